//! Chunks fetched ahead of their decoding: the network kept busy while the reader's threads
//! decode. The reader names the chunks it will decode next
//! ([`crate::reader::ChunkSource::fetch_ahead`]); a source whose bytes come over the network
//! starts fetching each on a thread of its own and keeps the bytes in its [`ChunkFetches`]
//! until the chunk is decoded ([`ChunkFetches::take`], which waits for a fetch in flight). So a
//! chunk is fetched once, by its fetch or (when none was started) by its decoding, never both.
//!
//! Bounded per process: at most [`FETCH_AHEAD_CHUNKS`] chunks and [`FETCH_AHEAD_BYTES`] bytes
//! are fetched ahead (in flight, or fetched and not yet taken) at once; past that no fetch is
//! started and the chunk is fetched when it is decoded. Dropping a chunk's [`FetchTicket`]
//! forgets its bytes, taken or not (a fetch in flight finishes and drops them).

use crate::error::Result;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};

/// The most chunks fetched ahead at once in a process.
pub const FETCH_AHEAD_CHUNKS: usize = 16;

/// The most bytes fetched ahead at once in a process (a chunk larger than this is never
/// fetched ahead).
pub const FETCH_AHEAD_BYTES: u64 = 256 << 20;

/// The chunks and bytes fetched ahead now, by the process that counts them (a forked child,
/// a DataLoader worker, starts from none: its parent's fetches are not its own).
static HELD: Mutex<Held> = Mutex::new(Held {
    pid: 0,
    chunks: 0,
    bytes: 0,
});

struct Held {
    pid: u32,
    chunks: usize,
    bytes: u64,
}

/// This process's count.
fn held() -> std::sync::MutexGuard<'static, Held> {
    let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
    let pid = std::process::id();
    if held.pid != pid {
        *held = Held {
            pid,
            chunks: 0,
            bytes: 0,
        };
    }
    held
}

/// One chunk's share of the process's bounds, given back when dropped.
struct Reservation {
    pid: u32,
    bytes: u64,
}

impl Reservation {
    fn take(bytes: u64) -> Option<Self> {
        let mut held = held();
        if held.chunks >= FETCH_AHEAD_CHUNKS || held.bytes + bytes > FETCH_AHEAD_BYTES {
            return None;
        }
        held.chunks += 1;
        held.bytes += bytes;
        Some(Reservation {
            pid: held.pid,
            bytes,
        })
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut held = held();
        if held.pid == self.pid {
            held.chunks -= 1;
            held.bytes -= self.bytes;
        }
    }
}

/// What a fetch gives: the offset of the bytes in the data, and the bytes.
pub type Fetched = (u64, Vec<u8>);

/// One chunk's fetch: in flight until `result` is set.
struct Slot {
    /// The process whose thread fetches it (in a forked child that thread does not exist).
    pid: u32,
    result: Mutex<Option<Result<Fetched>>>,
    done: Condvar,
    reservation: Mutex<Option<Reservation>>,
}

/// A source's chunks being fetched ahead, by chunk number (or offset: any key that names a
/// chunk).
#[derive(Default)]
pub struct ChunkFetches {
    slots: Mutex<HashMap<u64, Arc<Slot>>>,
}

impl std::fmt::Debug for ChunkFetches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held = self.slots.lock().map_or(0, |s| s.len());
        f.debug_struct("ChunkFetches").field("held", &held).finish()
    }
}

/// Keeps a chunk's bytes fetched ahead until dropped ([`ChunkFetches::start`]).
pub struct FetchTicket {
    fetches: Arc<ChunkFetches>,
    chunk: u64,
    slot: Arc<Slot>,
}

impl std::fmt::Debug for FetchTicket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FetchTicket")
            .field("chunk", &self.chunk)
            .finish()
    }
}

impl Drop for FetchTicket {
    fn drop(&mut self) {
        let mut slots = self.fetches.slots.lock().unwrap_or_else(|p| p.into_inner());
        if slots
            .get(&self.chunk)
            .is_some_and(|s| Arc::ptr_eq(s, &self.slot))
        {
            slots.remove(&self.chunk);
        }
        drop(slots);
        if self.slot.pid != std::process::id() {
            return; // a forked child's copy: its parent's thread fetches it
        }
        // Its bytes, if the fetch finished and they were never taken.
        self.slot
            .result
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        self.slot
            .reservation
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
    }
}

impl ChunkFetches {
    /// Starts `fetch`, chunk `chunk`'s fetch of about `bytes` bytes, on a thread of its own;
    /// `None` when it is not started: the chunk is fetched ahead already, or the process's
    /// bounds are reached.
    pub fn start(
        self: &Arc<Self>,
        chunk: u64,
        bytes: u64,
        fetch: impl FnOnce() -> Result<Fetched> + Send + 'static,
    ) -> Option<FetchTicket> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let pid = std::process::id();
        if slots.get(&chunk).is_some_and(|slot| slot.pid == pid) {
            return None;
        }
        let slot = Arc::new(Slot {
            pid,
            result: Mutex::new(None),
            done: Condvar::new(),
            reservation: Mutex::new(Some(Reservation::take(bytes)?)),
        });
        let filled = slot.clone();
        std::thread::Builder::new()
            .name("exfeed-fetch".into())
            .spawn(move || {
                let result = fetch();
                *filled.result.lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
                filled.done.notify_all();
            })
            .ok()?;
        slots.insert(chunk, slot.clone());
        Some(FetchTicket {
            fetches: self.clone(),
            chunk,
            slot,
        })
    }

    /// Chunk `chunk`'s bytes fetched ahead, waiting for its fetch to finish; `None` when none
    /// was started by this process (or they were taken already: each fetch is taken once).
    pub fn take(&self, chunk: u64) -> Option<Result<Fetched>> {
        let slot = self
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&chunk)
            .filter(|slot| slot.pid == std::process::id())?;
        let mut result = slot.result.lock().unwrap_or_else(|p| p.into_inner());
        while result.is_none() {
            result = slot.done.wait(result).unwrap_or_else(|p| p.into_inner());
        }
        // Taken, the bytes count against the decoding, not against what is fetched ahead.
        slot.reservation
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        result.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_fetch_is_taken_once_and_a_second_start_of_the_same_chunk_is_refused() {
        let fetches = Arc::new(ChunkFetches::default());
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let ticket = fetches
            .start(3, 10, move || {
                counted.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_millis(50));
                Ok((100, vec![7; 10]))
            })
            .expect("started");
        assert!(fetches.start(3, 10, || Ok((0, Vec::new()))).is_none());
        // Waits for the fetch in flight.
        let (at, bytes) = fetches.take(3).unwrap().unwrap();
        assert_eq!((at, bytes), (100, vec![7; 10]));
        assert!(fetches.take(3).is_none());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        drop(ticket);
        assert!(fetches.take(3).is_none());
    }

    #[test]
    fn a_chunk_larger_than_the_byte_bound_is_not_fetched_ahead() {
        let fetches = Arc::new(ChunkFetches::default());
        assert!(fetches
            .start(0, FETCH_AHEAD_BYTES + 1, || Ok((0, Vec::new())))
            .is_none());
        assert!(fetches.take(0).is_none());
    }

    #[test]
    fn a_dropped_ticket_forgets_the_bytes() {
        let fetches = Arc::new(ChunkFetches::default());
        let ticket = fetches.start(1, 4, || Ok((0, vec![1, 2, 3, 4]))).unwrap();
        drop(ticket);
        assert!(fetches.take(1).is_none());
    }
}
