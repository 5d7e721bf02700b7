//! Packing minibatches: a loaded window's sequences, in delivery order, copied into a
//! [`Minibatch`]. Runs of consecutive sequences of one chunk (file order) are one bulk copy;
//! in shuffled order the data of the sequences a few places ahead is prefetched into the cache
//! ([`super::prefetch`]), as they are scattered over the window's chunks.

use super::minibatch::{Minibatch, SequenceInfo};
use super::prefetch::{prefetch_boundaries, prefetch_sequence};
use crate::batch::SequenceBatch;
use crate::element::Element;

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

/// Appends the sequences `range` of a loaded window's order to `mb`: runs of consecutive
/// sequences of one chunk (file order) with one bulk copy each; in shuffled order, one sequence
/// at a time with the data of those a few places ahead prefetched, as they are scattered over
/// the window's chunks.
pub(super) fn copy_sequences<T: Element>(
    loaded: &Loaded<T>,
    range: std::ops::Range<usize>,
    sweep: u64,
    corpus: bool,
    mb: &mut Minibatch<T>,
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
                prefetch_sequence(&loaded.batches[ahead.chunk as usize], ahead.seq as usize);
            }
        }
        let batch = &loaded.batches[first.chunk as usize];
        let seqs = first.seq as usize..order[j - 1].seq as usize + 1;
        mb.data.push_sequences_from(batch, seqs.clone());
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
