//! Packing minibatches: a loaded window's sequences, in delivery order, copied into a
//! [`Minibatch`]. Runs of consecutive sequences of one chunk (file order) are one bulk copy;
//! in shuffled order the data of the sequences a few places ahead is prefetched into the cache
//! ([`super::prefetch`]), as they are scattered over the window's chunks. With reader threads,
//! the copy of a large minibatch's dense values is shared with them ([`Pieces`]).

use super::minibatch::{Minibatch, SequenceInfo};
use super::prefetch::{prefetch_boundaries, prefetch_sequence, prefetch_start};
use crate::batch::SequenceBatch;
use crate::element::Element;
use crate::stream::Storage;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A window whose chunks are decoded: their batches and the order its sequences are delivered in.
pub(super) struct Loaded<T> {
    pub(super) batches: Vec<SequenceBatch<T>>,
    /// The window's sequences in delivery order.
    pub(super) order: Vec<Entry>,
}

/// A sequence of a loaded window.
#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    /// Chunk in the window.
    pub(super) chunk: u32,
    /// Sequence in that chunk.
    pub(super) seq: u32,
    /// Its length as minibatches count it (computed once, in file order, when the window is
    /// loaded: cheaper than looking it up in shuffled order).
    pub(super) samples: usize,
}

/// How many sequences ahead of the one being copied are prefetched into the cache.
const PREFETCH_AHEAD: usize = 8;

/// Dense values of at least this many bytes are copied by the consumer's thread and the
/// reader's threads together; fewer are not worth waking a thread for.
pub(super) const SHARE_FROM_BYTES: usize = 64 << 10;

/// The bytes of a piece of a shared copy (at least, but for the last; spans are cut to it).
const PIECE_BYTES: usize = 32 << 10;

/// Packs minibatches, sharing the copy of their dense values with the reader's threads.
#[derive(Default)]
pub(super) struct Packer {
    /// The pieces of the last shared copies (at most [`PIECE_SETS`]): late helper tasks may
    /// still hold some.
    sets: Vec<Arc<Pieces>>,
}

/// How many shared copies may have helper tasks yet to run: a thread decoding a chunk runs its
/// helpers late, and meanwhile the next minibatches are shared with the other threads. (With
/// 4, the MNIST-like benchmark shared 47% of its minibatches; with 16, 81%.)
const PIECE_SETS: usize = 16;

impl Packer {
    /// Appends the sequences `range` of a loaded window's order to `mb`: runs of consecutive
    /// sequences of one chunk (file order) with one bulk copy each; in shuffled order, one
    /// sequence at a time with the data of those a few places ahead prefetched, as they are
    /// scattered over the window's chunks. With a `pool`, the dense values of a large
    /// minibatch are copied in pieces that this thread and a task on each of the pool's
    /// threads take in turn.
    pub(super) fn copy_sequences<T: Element>(
        &mut self,
        loaded: &Loaded<T>,
        range: std::ops::Range<usize>,
        sweep: u64,
        corpus: bool,
        mb: &mut Minibatch<T>,
        pool: Option<&rayon::ThreadPool>,
    ) {
        let dense_dims: usize = (mb.data.streams().iter())
            .filter(|s| s.storage() == Storage::Dense)
            .map(|s| s.dim())
            .sum();
        let samples: usize = loaded.order[range.clone()].iter().map(|e| e.samples).sum();
        let dense_bytes = samples
            .saturating_mul(dense_dims)
            .saturating_mul(std::mem::size_of::<T>());
        let shared = pool
            .filter(|_| dense_bytes >= SHARE_FROM_BYTES)
            .and_then(|pool| Some((pool, self.free_set()?)));
        let Some((pool, set)) = shared else {
            for_runs(loaded, range, sweep, corpus, mb, true, |mb, batch, seqs| {
                mb.push_sequences_from(batch, seqs)
            });
            return;
        };
        let pieces = Arc::get_mut(&mut self.sets[set]).expect("no task holds a free set");
        pieces.clear(mb.data.streams().len());
        for_runs(
            loaded,
            range,
            sweep,
            corpus,
            mb,
            false,
            |mb, batch, seqs| {
                mb.push_sequences_but_dense_values(batch, seqs, |stream, values| {
                    pieces.add(stream, values)
                })
            },
        );
        pieces.end_piece();
        for (i, room) in pieces.rooms.iter_mut().enumerate() {
            if room.bytes > 0 {
                room.start = mb.data.stream_mut(i).dense_room().cast();
            }
        }
        let shared = &self.sets[set];
        let helper = shared.clone();
        // A broadcast: each thread runs it once its task in progress ends, before the
        // decoding tasks queued (a spawned task would wait for all of them).
        pool.spawn_broadcast(move |_| helper.take());
        let abort = AbortOnUnwind;
        shared.take();
        shared.wait();
        std::mem::forget(abort);
        for (i, room) in shared.rooms.iter().enumerate() {
            if room.bytes > 0 {
                // SAFETY: every piece is copied (`wait`), and the pieces cover the stream's
                // room: the spans `add` appended, one after another from its start.
                unsafe { mb.data.stream_mut(i).dense_room_written() }
            }
        }
    }

    /// A set of pieces whose tasks have all run (a new one while there are fewer than
    /// [`PIECE_SETS`]), if there is one.
    fn free_set(&mut self) -> Option<usize> {
        let free = self.sets.iter_mut().position(|p| Arc::get_mut(p).is_some());
        if free.is_none() && self.sets.len() < PIECE_SETS {
            self.sets.push(Arc::default());
            return Some(self.sets.len() - 1);
        }
        free
    }
}

/// Appends the sequences `range` of `loaded`'s order to `mb` (their infos), copying each run
/// of consecutive sequences of one chunk with `copy`; prefetches ahead in shuffled order (the
/// data of the dense streams too, if `dense`).
fn for_runs<T: Element>(
    loaded: &Loaded<T>,
    range: std::ops::Range<usize>,
    sweep: u64,
    corpus: bool,
    mb: &mut Minibatch<T>,
    dense: bool,
    mut copy: impl FnMut(&mut SequenceBatch<T>, &SequenceBatch<T>, std::ops::Range<usize>),
) {
    let order = &loaded.order;
    let mut i = range.start;
    while i < range.end {
        let first = order[i];
        let mut j = i + 1;
        while j < range.end
            && order[j].chunk == first.chunk
            && order[j].seq == order[j - 1].seq.wrapping_add(1)
        {
            j += 1;
        }
        if j == i + 1 {
            // Two stages: the sequence boundaries of one far ahead, the data of one nearer
            // (finding the data needs the boundaries).
            if let Some(far) = order.get(i + 2 * PREFETCH_AHEAD) {
                prefetch_boundaries(&loaded.batches[far.chunk as usize], far.seq as usize);
            }
            if let Some(ahead) = order.get(i + PREFETCH_AHEAD) {
                let batch = &loaded.batches[ahead.chunk as usize];
                prefetch_sequence(batch, ahead.seq as usize, dense);
            }
        }
        let batch = &loaded.batches[first.chunk as usize];
        let seqs = first.seq as usize..order[j - 1].seq as usize + 1;
        copy(&mut mb.data, batch, seqs.clone());
        mb.sequences.extend(
            batch.keys()[seqs]
                .iter()
                .zip(&order[i..j])
                .map(|(&key, e)| SequenceInfo {
                    sweep,
                    key,
                    samples: e.samples,
                    corpus,
                }),
        );
        i = j;
    }
}

/// The dense copies of a minibatch, in pieces that the consumer's thread and a task on each of
/// the reader's threads take in turn (`next`): a thread copies only the pieces it takes, so a
/// task that runs late, once all are taken, touches no memory of the batches or the minibatch.
/// The consumer waits only for pieces in progress (`done`), never for a piece no one has begun.
#[derive(Default)]
pub(super) struct Pieces {
    /// The copies, piece after piece.
    spans: Vec<Span>,
    /// Where each piece's spans end in `spans`.
    ends: Vec<usize>,
    /// The bytes of the open (last) piece so far.
    open: usize,
    /// Per stream of the minibatch, its room for the values.
    rooms: Vec<Room>,
    /// The next piece to take (past the last: none left).
    next: AtomicUsize,
    /// The pieces copied.
    done: AtomicUsize,
}

/// A copy of `bytes` from `src` to `at` bytes into stream `stream`'s room.
struct Span {
    src: *const u8,
    stream: usize,
    at: usize,
    bytes: usize,
}

/// A dense stream's room for the values of the minibatch's new samples.
struct Room {
    /// The bytes its spans take so far.
    bytes: usize,
    /// Where it starts (once made).
    start: *mut u8,
}

// SAFETY: the pointers are those of the window's batches (read) and of the minibatch's rooms
// (written, each byte by one span). A thread dereferences them only for a piece it took with
// `next` below the count of pieces, and the consumer's thread, which holds the batches and the
// minibatch borrowed throughout, returns only when every piece taken is copied (`wait`); a new
// copy resets `next` only with the `Arc` to itself (`Arc::get_mut`).
unsafe impl Send for Pieces {}
// SAFETY: as for `Send`; shared, the pieces are only read, but for the atomics.
unsafe impl Sync for Pieces {}

impl Pieces {
    /// Empty, for a minibatch of `streams` streams.
    fn clear(&mut self, streams: usize) {
        self.spans.clear();
        self.ends.clear();
        self.open = 0;
        self.rooms.clear();
        self.rooms.resize_with(streams, || Room {
            bytes: 0,
            start: std::ptr::null_mut(),
        });
        *self.next.get_mut() = 0;
        *self.done.get_mut() = 0;
    }

    /// Appends the copy of `values` to the room of stream `stream`, in pieces of
    /// [`PIECE_BYTES`].
    fn add<T>(&mut self, stream: usize, values: &[T]) {
        let src: *const u8 = values.as_ptr().cast();
        let bytes = std::mem::size_of_val(values);
        let mut done = 0;
        while done < bytes {
            let n = (bytes - done).min(PIECE_BYTES - self.open);
            let room = &mut self.rooms[stream];
            self.spans.push(Span {
                src: src.wrapping_add(done),
                stream,
                at: room.bytes,
                bytes: n,
            });
            room.bytes += n;
            done += n;
            self.open += n;
            if self.open == PIECE_BYTES {
                self.end_piece();
            }
        }
    }

    /// Ends the open piece, if it has any bytes.
    fn end_piece(&mut self) {
        if self.ends.last().copied().unwrap_or(0) < self.spans.len() {
            self.ends.push(self.spans.len());
        }
        self.open = 0;
    }

    /// Takes pieces and copies them, until none is left.
    fn take(&self) {
        loop {
            let p = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(&end) = self.ends.get(p) else {
                return;
            };
            let start = p.checked_sub(1).map_or(0, |q| self.ends[q]);
            for (k, span) in self.spans[start..end].iter().enumerate() {
                if let Some(ahead) = self.spans.get(start + k + PREFETCH_AHEAD) {
                    prefetch_start(ahead.src.cast(), ahead.bytes);
                }
                let dst = self.rooms[span.stream].start.wrapping_add(span.at);
                // SAFETY: piece `p` is this thread's alone (`next`); its spans read the
                // window's batches and write their own bytes of a stream's room (reserved by
                // `dense_room`), which the consumer's thread keeps alive and untouched until
                // every piece is done (see `Send`).
                unsafe { std::ptr::copy_nonoverlapping(span.src, dst, span.bytes) };
            }
            self.done.fetch_add(1, Ordering::Release);
        }
    }

    /// Waits until every piece is copied: only for those in progress on another thread, as
    /// this one has taken the rest (`take`).
    fn wait(&self) {
        let mut spins = 0u32;
        while self.done.load(Ordering::Acquire) < self.ends.len() {
            if spins < 64 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// Aborts the process if dropped: held while the reader's thread may write into the minibatch,
/// so that a panic there cannot hand the minibatch back (to be freed) under that write. (A
/// panic on the pool's thread aborts by itself: the pool has no panic handler.)
struct AbortOnUnwind;

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        std::process::abort();
    }
}
