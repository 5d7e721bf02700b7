//! Cache prefetch hints for packing in shuffled order: the CPU is asked to start loading a
//! sequence's boundaries and first bytes a few sequences before they are copied. Hints only:
//! they never fault and change nothing but timing.

use crate::batch::SequenceBatch;
use crate::element::Element;

/// Asks the CPU to start loading the key and sequence boundaries of sequence `seq` into the
/// cache.
#[inline]
pub(super) fn prefetch_boundaries<T: Element>(batch: &SequenceBatch<T>, seq: usize) {
    if let Some(k) = batch.keys().get(seq) {
        prefetch_line(std::ptr::from_ref(k).cast());
    }
    for stream in batch.streams() {
        if let Some(o) = stream.seq_offsets().get(seq) {
            prefetch_line(std::ptr::from_ref(o).cast());
        }
    }
}

/// Asks the CPU to start loading the cache line of `p` (never faults).
#[inline]
fn prefetch_line(p: *const i8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint, it never faults, whatever the address.
    #[allow(unused_unsafe)]
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Asks the CPU to start loading sequence `seq`'s data (up to 1 KiB a stream) into the cache:
/// of every stream, or (`dense` false) of its sparse streams only.
#[inline]
pub(super) fn prefetch_sequence<T: Element>(batch: &SequenceBatch<T>, seq: usize, dense: bool) {
    for stream in batch.streams() {
        let r = stream.sequence_samples(seq);
        let values = match stream.storage() {
            crate::stream::Storage::Dense if !dense => None,
            crate::stream::Storage::Dense => {
                let d = stream.dim();
                stream.values().get(r.start * d..r.end * d)
            }
            crate::stream::Storage::Sparse => {
                let o = stream.sample_offsets();
                stream.values().get(o[r.start]..o[r.end])
            }
        };
        let Some(values) = values else { continue };
        prefetch_start(values.as_ptr().cast(), std::mem::size_of_val(values));
    }
}

/// Asks the CPU to start loading the first KiB (at most) of the `bytes` at `p`; the hardware
/// prefetcher follows a longer sequential copy by itself.
#[inline]
pub(super) fn prefetch_start(p: *const i8, bytes: usize) {
    for off in (0..bytes.min(1024)).step_by(64) {
        prefetch_line(p.wrapping_add(off));
    }
}
