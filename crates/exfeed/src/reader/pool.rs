//! Decoded-chunk batches kept when a reader is dropped, for the next reader of the process
//! with the same streams: a training loop may start a reader every epoch (`exfeed.torch`'s
//! dataset opens one each time it is iterated), and the benchmarks start one every run. A new
//! batch's buffers are fresh pages, which the kernel zeroes (and a virtual machine's host
//! backs) as the first chunk is decoded into them: on the benchmark machine, the window's and
//! the prefetch's batches of a sweep of 1 GB cost about 5% of the reader's CPU time when new.
//! At most [`KEPT_BATCHES`] batches and [`KEPT_BYTES`] are kept.

use crate::batch::SequenceBatch;
use crate::element::Element;
use crate::stream::StreamSpec;
use std::any::Any;
use std::sync::Mutex;

/// Batches kept at most (a window of 4 chunks and 4 prefetched, twice over).
const KEPT_BATCHES: usize = 16;
/// Bytes kept at most (the batches of 8 chunks of 32 MiB of dense text decoded as float32
/// take about 110 MB).
const KEPT_BYTES: usize = 256 << 20;

/// The kept batches (`SequenceBatch<T>` of any element type), with their allocated bytes.
static KEPT: Mutex<Vec<(usize, Box<dyn Any + Send>)>> = Mutex::new(Vec::new());

/// An empty batch with the streams `specs`: a kept one when there is one, else a new one.
pub(super) fn take<T: Element>(specs: &[StreamSpec]) -> SequenceBatch<T> {
    let fits = |b: &SequenceBatch<T>| {
        b.streams().len() == specs.len()
            && b.streams()
                .iter()
                .zip(specs)
                .all(|(s, spec)| s.storage() == spec.storage && s.dim() == spec.dim)
    };
    let kept = KEPT.lock().ok().and_then(|mut kept| {
        let i = kept
            .iter()
            .position(|(_, b)| b.downcast_ref::<SequenceBatch<T>>().is_some_and(&fits))?;
        Some(kept.swap_remove(i).1)
    });
    match kept.map(|b| b.downcast::<SequenceBatch<T>>()) {
        Some(Ok(b)) => *b,
        _ => SequenceBatch::new(specs),
    }
}

/// Keeps `batches` (emptied) for a later [`take`], as far as the bounds allow; the rest are
/// freed.
pub(super) fn keep<T: Element>(batches: impl IntoIterator<Item = SequenceBatch<T>>) {
    let mut freed = Vec::new();
    if let Ok(mut kept) = KEPT.lock() {
        let mut bytes: usize = kept.iter().map(|(n, _)| n).sum();
        for mut b in batches {
            let n = b.allocated_bytes();
            if kept.len() < KEPT_BATCHES && bytes + n <= KEPT_BYTES {
                b.clear();
                bytes += n;
                kept.push((n, Box::new(b)));
            } else {
                freed.push(b);
            }
        }
    }
    drop(freed); // outside the lock
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
        let mut b = take::<f32>(&specs);
        assert_eq!(
            b.allocated_bytes(),
            SequenceBatch::<f32>::new(&specs).allocated_bytes()
        );
        b.stream_mut(0).push_dense_sample(&[1.0; 7919]);
        b.stream_mut(1).push_sparse_sample(&[3], &[1.0]);
        b.finish_sequence(5);
        let bytes = b.allocated_bytes();
        keep(vec![b]);
        // Other streams, or another element type: not that one.
        let other = [StreamSpec::new("x", Storage::Dense, 7918), specs[1].clone()];
        assert!(take::<f32>(&other).allocated_bytes() < bytes);
        assert!(take::<f64>(&specs).allocated_bytes() < bytes);
        let again = take::<f32>(&specs);
        assert_eq!(again.allocated_bytes(), bytes);
        assert!(again.is_empty());
        assert!(again.streams()[0].values().is_empty());
        // Taken once only.
        assert!(take::<f32>(&specs).allocated_bytes() < bytes);
        // Bounded: a batch larger than the bound is freed.
        let mut big = again;
        big.stream_mut(0).reserve(0, KEPT_BYTES / 4 + 1);
        keep(vec![big]);
        assert!(take::<f32>(&specs).allocated_bytes() < KEPT_BYTES);
    }
}
