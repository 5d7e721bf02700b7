//! Chunks fetched ahead of their decoding: the network kept busy while the reader's threads
//! decode. The reader names the chunks it will decode next, in plan order
//! ([`crate::reader::ChunkSource::fetch_ahead`]); a source whose bytes come over the network
//! asks [`ChunkFetches::start`] to fetch each on a thread of its own and keeps the bytes until
//! the chunk is decoded ([`ChunkFetches::take`], which waits for a fetch in flight).
//!
//! Bounded per process: at most [`FETCH_AHEAD_CHUNKS`] chunks and [`FETCH_AHEAD_BYTES`] bytes
//! are fetched ahead (in flight, or fetched and not yet taken) at once. A chunk named while
//! the bounds are reached waits in the process's queue, in the order named, and its fetch
//! starts as soon as room frees (a fetch taken by its decoding, or a ticket dropped). A chunk
//! whose decoding comes first is fetched by its decoding instead, and leaves the queue: so each
//! chunk is fetched once, ahead or by its decoding, never both. Dropping a chunk's
//! [`FetchTicket`] forgets it: waiting, its fetch never starts; fetched, its bytes are dropped.

use crate::error::Result;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// The most chunks fetched ahead at once in a process.
pub const FETCH_AHEAD_CHUNKS: usize = 16;

/// The most bytes fetched ahead at once in a process (a chunk larger than this is never
/// fetched ahead).
pub const FETCH_AHEAD_BYTES: u64 = 256 << 20;

/// What a fetch gives: the offset of the bytes in the data, and the bytes.
pub type Fetched = (u64, Vec<u8>);

type Fetch = Box<dyn FnOnce() -> Result<Fetched> + Send>;

/// The process's fetches ahead: what they hold of the bounds, and the chunks waiting for room,
/// in the order named.
struct Queue {
    /// The process counted (a forked child, a DataLoader worker, starts from none: its
    /// parent's fetches are not its own).
    pid: u32,
    chunks: usize,
    bytes: u64,
    waiting: VecDeque<Arc<Slot>>,
}

static QUEUE: Mutex<Queue> = Mutex::new(Queue {
    pid: 0,
    chunks: 0,
    bytes: 0,
    waiting: VecDeque::new(),
});

/// This process's queue.
fn queue() -> MutexGuard<'static, Queue> {
    let mut queue = lock(&QUEUE);
    let pid = std::process::id();
    if queue.pid != pid {
        // The parent's waiting fetches are left alone: their sources belong to the parent.
        std::mem::forget(std::mem::take(&mut queue.waiting));
        *queue = Queue {
            pid,
            chunks: 0,
            bytes: 0,
            waiting: VecDeque::new(),
        };
    }
    queue
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Queue {
    /// Takes room for the waiting chunks at the front while there is room, in order; returns
    /// their fetches, to be started once the queue is unlocked.
    fn admit(&mut self) -> Vec<(Arc<Slot>, Fetch)> {
        let mut admitted = Vec::new();
        while let Some(slot) = self.waiting.front().cloned() {
            let mut state = lock(&slot.state);
            if matches!(*state, State::Waiting(_)) {
                if self.chunks >= FETCH_AHEAD_CHUNKS || self.bytes + slot.bytes > FETCH_AHEAD_BYTES
                {
                    break;
                }
                self.chunks += 1;
                self.bytes += slot.bytes;
                let reservation = Reservation {
                    pid: self.pid,
                    bytes: slot.bytes,
                };
                if let State::Waiting(fetch) =
                    std::mem::replace(&mut *state, State::Fetching(reservation))
                {
                    admitted.push((slot.clone(), fetch));
                }
            }
            drop(state);
            self.waiting.pop_front();
        }
        admitted
    }
}

/// Starts each admitted fetch on a thread of its own.
fn start_fetches(admitted: Vec<(Arc<Slot>, Fetch)>) {
    for (slot, fetch) in admitted {
        let filled = slot.clone();
        let spawned = std::thread::Builder::new()
            .name("exfeed-fetch".into())
            .spawn(move || {
                let result = fetch();
                filled.finish(Some(result));
            });
        if spawned.is_err() {
            slot.finish(None); // its decoding fetches it
        }
    }
}

/// One chunk's share of the process's bounds, given back when dropped (which admits the
/// chunks waiting for it). Never dropped while a queue or slot lock is held.
struct Reservation {
    pid: u32,
    bytes: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut queue = queue();
        if queue.pid != self.pid {
            return;
        }
        queue.chunks -= 1;
        queue.bytes -= self.bytes;
        let admitted = queue.admit();
        drop(queue);
        start_fetches(admitted);
    }
}

/// Where one chunk's fetch ahead is.
enum State {
    /// In the process's queue, waiting for room.
    Waiting(Fetch),
    /// Its thread fetches it.
    Fetching(Reservation),
    /// Fetched, not yet taken.
    Fetched(Result<Fetched>, Reservation),
    /// Its ticket was dropped while its thread fetches it: the bytes are dropped on arrival.
    Forgotten(Reservation),
    /// Taken, forgotten, or left to its decoding: nothing more happens.
    Over,
}

/// One chunk's fetch ahead.
struct Slot {
    /// The process that named it (in a forked child, its thread does not exist).
    pid: u32,
    bytes: u64,
    state: Mutex<State>,
    fetched: Condvar,
}

impl Slot {
    /// Its thread is done: `result` is what it fetched (`None`: no thread could be started).
    fn finish(&self, result: Option<Result<Fetched>>) {
        let mut state = lock(&self.state);
        let before = std::mem::replace(&mut *state, State::Over);
        let dropped = match (before, result) {
            (State::Fetching(reservation), Some(result)) => {
                *state = State::Fetched(result, reservation);
                None
            }
            (State::Fetching(reservation) | State::Forgotten(reservation), _) => Some(reservation),
            (other, _) => {
                *state = other;
                None
            }
        };
        drop(state);
        self.fetched.notify_all();
        drop(dropped);
    }
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

/// Keeps a chunk's fetch ahead until dropped ([`ChunkFetches::start`]).
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
        let mut slots = lock(&self.fetches.slots);
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
        let mut state = lock(&self.slot.state);
        let before = std::mem::replace(&mut *state, State::Over);
        let dropped = match before {
            State::Fetching(reservation) => {
                *state = State::Forgotten(reservation);
                None
            }
            State::Forgotten(reservation) => {
                *state = State::Forgotten(reservation);
                None
            }
            other => Some(other),
        };
        drop(state);
        drop(dropped);
    }
}

impl ChunkFetches {
    /// Names chunk `chunk` for fetching ahead: `fetch`, its fetch of about `bytes` bytes, starts
    /// on a thread of its own as soon as the process's bounds leave room (at once, or after the
    /// chunks named before it). `None` when it is never fetched ahead: it is named already, or
    /// it is larger than [`FETCH_AHEAD_BYTES`].
    pub fn start(
        self: &Arc<Self>,
        chunk: u64,
        bytes: u64,
        fetch: impl FnOnce() -> Result<Fetched> + Send + 'static,
    ) -> Option<FetchTicket> {
        if bytes > FETCH_AHEAD_BYTES {
            return None;
        }
        let pid = std::process::id();
        let mut slots = lock(&self.slots);
        if slots.get(&chunk).is_some_and(|slot| slot.pid == pid) {
            return None;
        }
        let slot = Arc::new(Slot {
            pid,
            bytes,
            state: Mutex::new(State::Waiting(Box::new(fetch))),
            fetched: Condvar::new(),
        });
        slots.insert(chunk, slot.clone());
        drop(slots);
        // Slots left to their decoding while they waited stay queued until they reach the
        // front, where `admit` drops them: the queue holds at most the chunks named.
        let mut queue = queue();
        queue.waiting.push_back(slot.clone());
        let admitted = queue.admit();
        drop(queue);
        start_fetches(admitted);
        Some(FetchTicket {
            fetches: self.clone(),
            chunk,
            slot,
        })
    }

    /// Chunk `chunk`'s bytes fetched ahead, waiting for its fetch in flight; `None` when they
    /// are not (it was not named by this process, or was taken already, or its fetch had not
    /// started: it leaves the queue, and the caller fetches it).
    pub fn take(&self, chunk: u64) -> Option<Result<Fetched>> {
        let slot = lock(&self.slots)
            .remove(&chunk)
            .filter(|slot| slot.pid == std::process::id())?;
        let mut state = lock(&slot.state);
        loop {
            match std::mem::replace(&mut *state, State::Over) {
                State::Fetched(result, reservation) => {
                    drop(state);
                    drop(reservation); // now the decoding's bytes, no longer fetched ahead
                    return Some(result);
                }
                in_flight @ (State::Fetching(_) | State::Forgotten(_)) => {
                    *state = in_flight;
                    state = slot.fetched.wait(state).unwrap_or_else(|p| p.into_inner());
                }
                State::Waiting(fetch) => {
                    drop(state);
                    drop(fetch);
                    return None;
                }
                State::Over => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The bounds are the process's: one test at a time uses them.
    fn one_at_a_time() -> MutexGuard<'static, ()> {
        static SERIAL: Mutex<()> = Mutex::new(());
        lock(&SERIAL)
    }

    #[test]
    fn a_chunk_past_the_bounds_starts_as_room_frees_unless_its_decoding_came_first() {
        let _serial = one_at_a_time();
        let fetches = Arc::new(ChunkFetches::default());
        let held: Vec<_> = (0..FETCH_AHEAD_CHUNKS as u64)
            .map(|chunk| fetches.start(chunk, 1, move || Ok((chunk, vec![1]))))
            .collect::<Option<_>>()
            .expect("started");
        let calls = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let waiting: Vec<_> = (0..2)
            .map(|i| {
                let counted = calls.clone();
                fetches
                    .start(100 + i as u64, 1, move || {
                        counted[i].fetch_add(1, Ordering::SeqCst);
                        Ok((100 + i as u64, vec![2]))
                    })
                    .expect("named")
            })
            .collect();
        // Chunk 101's decoding comes first: its fetch never starts.
        assert!(fetches.take(101).is_none());
        // Taking chunk 0 frees room: chunk 100, next in the queue, is fetched ahead.
        assert_eq!(fetches.take(0).unwrap().unwrap(), (0, vec![1]));
        assert_eq!(fetches.take(100).unwrap().unwrap(), (100, vec![2]));
        drop((held, waiting));
        let calls: Vec<_> = calls.iter().map(|c| c.load(Ordering::SeqCst)).collect();
        assert_eq!(calls, [1, 0]);
    }

    #[test]
    fn a_fetch_is_taken_once_and_a_second_start_of_the_same_chunk_is_refused() {
        let _serial = one_at_a_time();
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
        let _serial = one_at_a_time();
        let fetches = Arc::new(ChunkFetches::default());
        assert!(fetches
            .start(0, FETCH_AHEAD_BYTES + 1, || Ok((0, Vec::new())))
            .is_none());
        assert!(fetches.take(0).is_none());
    }

    #[test]
    fn a_dropped_ticket_forgets_the_bytes() {
        let _serial = one_at_a_time();
        let fetches = Arc::new(ChunkFetches::default());
        let ticket = fetches.start(1, 4, || Ok((0, vec![1, 2, 3, 4]))).unwrap();
        drop(ticket);
        assert!(fetches.take(1).is_none());
    }
}
