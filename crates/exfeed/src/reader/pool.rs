//! Decoded-chunk batches kept when a reader is dropped, for the next reader of the process
//! with the same streams: a training loop may start a reader every epoch (`exfeed.torch`'s
//! dataset opens one each time it is iterated), and the benchmarks start one every run. A new
//! batch's buffers are fresh pages, which the kernel zeroes (and a virtual machine's host
//! backs) as the first chunk is decoded into them: on the benchmark machine, the window's and
//! the prefetch's batches of a sweep of 1 GB cost about 5% of the reader's CPU time when new.
//! At most [`KEPT_BATCHES`] batches and [`KEPT_BYTES`] are kept, each for [`KEPT_FOR`]: a
//! process that drops its reader to free memory gets it back then (or at once with
//! [`release_kept_batches`]), freed by a thread that lives only while batches are kept.

use crate::batch::SequenceBatch;
use crate::buffers::owned_by_this_process;
use crate::element::Element;
use crate::stream::StreamSpec;
use std::any::Any;
use std::sync::atomic::AtomicU32;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// The process [`POOL`] belongs to (see [`owned_by_this_process`]).
static POOL_OWNER: AtomicU32 = AtomicU32::new(0);

/// Batches kept at most: exfeed.torch's default window (64 MiB: 64 chunks of 1 MiB) and the
/// prefetch of a machine of up to 32 cores (64 chunks), so that its next epoch decodes into
/// pages in place.
const KEPT_BATCHES: usize = 128;
/// Bytes kept at most: that window of dense text decoded as float32 (about 1.6 times the text
/// for MNIST-like data, at most 4 times) with some prefetch, or 8 chunks of CNTK's 32 MiB.
const KEPT_BYTES: usize = 256 << 20;

/// How long a batch is kept for the next reader: long enough for a training loop to start the
/// next epoch's reader, short enough that memory comes back soon after the last one.
const KEPT_FOR: Duration = Duration::from_secs(10);

/// A kept batch (a `SequenceBatch<T>` of any element type).
struct Kept {
    bytes: usize,
    until: Instant,
    batch: Box<dyn Any + Send>,
}

/// The kept batches, and whether the thread that frees them when they expire is running.
struct Pool {
    kept: Vec<Kept>,
    reaper: bool,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    kept: Vec::new(),
    reaper: false,
});
/// Wakes the reaper early (when everything was released).
static RELEASED: Condvar = Condvar::new();

/// A kept batch with the streams `specs` (empty, its buffers in place), if there is one.
pub(super) fn take<T: Element>(specs: &[StreamSpec]) -> Option<SequenceBatch<T>> {
    let fits = |b: &SequenceBatch<T>| {
        b.streams().len() == specs.len()
            && b.streams()
                .iter()
                .zip(specs)
                .all(|(s, spec)| s.storage() == spec.storage && s.dim() == spec.dim)
    };
    if !owned_by_this_process(&POOL_OWNER) {
        return None;
    }
    let kept = POOL.lock().ok().and_then(|mut pool| {
        let i = pool.kept.iter().position(|k| {
            k.batch
                .downcast_ref::<SequenceBatch<T>>()
                .is_some_and(&fits)
        })?;
        Some(pool.kept.swap_remove(i).batch)
    });
    kept.and_then(|b| b.downcast::<SequenceBatch<T>>().ok())
        .map(|b| *b)
}

/// Keeps `batches` (emptied) for a later [`take`], as far as the bounds allow; the rest are
/// freed.
pub(super) fn keep<T: Element>(batches: impl IntoIterator<Item = SequenceBatch<T>>) {
    if !owned_by_this_process(&POOL_OWNER) {
        return;
    }
    let mut freed = Vec::new();
    let until = Instant::now() + KEPT_FOR;
    if let Ok(mut pool) = POOL.lock() {
        let mut bytes: usize = pool.kept.iter().map(|k| k.bytes).sum();
        for mut b in batches {
            let n = b.allocated_bytes();
            if pool.kept.len() < KEPT_BATCHES && bytes + n <= KEPT_BYTES {
                b.clear();
                bytes += n;
                pool.kept.push(Kept {
                    bytes: n,
                    until,
                    batch: Box::new(b),
                });
            } else {
                freed.push(b);
            }
        }
        if !pool.kept.is_empty() && !pool.reaper {
            let started = std::thread::Builder::new()
                .name("exfeed-pool".into())
                .spawn(reap)
                .is_ok();
            pool.reaper = started;
            if !started {
                pool.kept.clear(); // nothing would free them: keep nothing
            }
        }
    }
    drop(freed); // outside the lock
}

/// Frees every kept batch now and returns their bytes: for a process that is done reading and
/// wants its memory back before they expire on their own (after 10 seconds).
pub fn release_kept_batches() -> usize {
    if !owned_by_this_process(&POOL_OWNER) {
        return 0;
    }
    let released = match POOL.lock() {
        Ok(mut pool) => std::mem::take(&mut pool.kept),
        Err(_) => Vec::new(),
    };
    RELEASED.notify_all();
    released.iter().map(|k| k.bytes).sum()
}

/// The reaper: frees batches as they expire, and ends when none is left.
fn reap() {
    let Ok(mut pool) = POOL.lock() else { return };
    loop {
        let now = Instant::now();
        let (expired, kept): (Vec<Kept>, Vec<Kept>) = std::mem::take(&mut pool.kept)
            .into_iter()
            .partition(|k| k.until <= now);
        pool.kept = kept;
        let next = pool.kept.iter().map(|k| k.until).min();
        pool.reaper = next.is_some();
        drop(pool);
        drop(expired); // outside the lock
        let Some(next) = next else { return };
        pool = match POOL.lock() {
            Ok(p) => p,
            Err(_) => return,
        };
        pool = match RELEASED.wait_timeout(pool, next.saturating_duration_since(Instant::now())) {
            Ok((p, _)) => p,
            Err(_) => return,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::Storage;

    #[test]
    fn a_kept_batch_goes_to_a_reader_of_the_same_streams_only() {
        // A shape no other test uses (the pool is the process's).
        let specs = [
            StreamSpec::new("x", Storage::Dense, 7919),
            StreamSpec::new("y", Storage::Sparse, 31),
        ];
        assert!(take::<f32>(&specs).is_none());
        let mut b = SequenceBatch::<f32>::new(&specs);
        b.stream_mut(0).push_dense_sample(&[1.0; 7919]);
        b.stream_mut(1).push_sparse_sample(&[3], &[1.0]);
        b.finish_sequence(5);
        let bytes = b.allocated_bytes();
        keep(vec![b]);
        // Other streams, or another element type: not that one.
        let other = [StreamSpec::new("x", Storage::Dense, 7918), specs[1].clone()];
        assert!(take::<f32>(&other).is_none());
        assert!(take::<f64>(&specs).is_none());
        let again = take::<f32>(&specs).expect("the kept batch");
        assert_eq!(again.allocated_bytes(), bytes);
        assert!(again.is_empty());
        assert!(again.streams()[0].values().is_empty());
        // Taken once only.
        assert!(take::<f32>(&specs).is_none());
        // Bounded: a batch larger than the bound is freed.
        let mut big = again;
        big.stream_mut(0).reserve(0, KEPT_BYTES / 4 + 1);
        keep(vec![big]);
        assert!(take::<f32>(&specs).is_none());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_forked_child_never_waits_for_the_parents_pool() {
        // The pool's mutex held while the process forks (as a thread of a Python process may
        // hold it when a DataLoader forks its workers): the child has a copy locked for ever.
        let specs = [StreamSpec::new("x", Storage::Dense, 7907)];
        keep(vec![SequenceBatch::<f32>::new(&specs)]); // the pool is this process's
        let held = POOL.lock().unwrap();
        // SAFETY: the child only takes, keeps and releases batches, then leaves with _exit.
        let child = unsafe { libc::fork() };
        assert!(child >= 0, "fork failed");
        if child == 0 {
            keep(take::<f32>(&specs));
            release_kept_batches();
            // SAFETY: ends the child at once, without the test harness's exit handlers.
            unsafe { libc::_exit(0) };
        }
        drop(held);
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut status = 0;
        // SAFETY: waitpid and kill on the child this test forked.
        while unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) } == 0 {
            if Instant::now() > deadline {
                unsafe {
                    libc::kill(child, libc::SIGKILL);
                    libc::waitpid(child, &mut status, 0);
                }
                panic!("the forked child waited for the parent's pool");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    }
}
