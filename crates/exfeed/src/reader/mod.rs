//! The minibatch reader: chunked, randomized, parallel, distributed and resumable.
//!
//! The engine here does not know any file format. It reads from a [`ChunkSource`]: something
//! that has a list of streams, a list of chunks (runs of whole sequences of about
//! `chunkSizeInBytes`) and
//! can decode any chunk into a [`SequenceBatch`]. The CTF, CBF and Lens readers provide one each;
//! [`MemorySource`](crate::source::MemorySource) holds sequences in memory.
//!
//! How a sweep (one pass over the data) is planned:
//! 1. with `randomize`, the chunks are permuted with a generator seeded by
//!    `randomizationSeed + sweep` (SplitMix64, specified in exfeed's source, so a seed gives
//!    the same order on every machine and version); otherwise they stay in file order;
//! 2. the chunk at randomized position `i` belongs to worker `i % num_workers`;
//! 3. each worker groups its own chunks, in that order, into windows of `randomizationWindow`
//!    chunks (or of at least that many samples), and shuffles the sequences of each window
//!    (in `frameMode`, where every sequence is one sample, this shuffles samples individually).
//!
//! Sources mixed by weight ([`ChunkSource::mix`]) replace step 1: a sweep's chunks are those
//! [`Mix::sweep_chunks`] gives (see the `mix` module), then partitioned and windowed the same way.
//!
//! With [`ReaderOptions::with_replacement`] a window's sequences are instead drawn at random
//! with replacement, as many draws as it has sequences, weighted by the source's
//! [`ChunkSource::chunk_weights`] when it has them. Lens's example selection modes map onto
//! this: ORDERED is `randomize = false`; PERMUTED is `randomize` with [`Window::All`];
//! RANDOMIZED adds `with_replacement`; PROBABILISTIC is RANDOMIZED over a source with weights
//! (a [`LensSource`](crate::source::LensSource) opened with `use_frequencies`). See
//! [`SelectionMode::apply_to`](crate::lens::select::SelectionMode::apply_to).
//!
//! Windows are consecutive, non-overlapping groups of a worker's chunks (CNTK's block
//! randomizer slides its window around each chunk instead); this keeps every window's
//! sequences decodable from the worker's own chunks, and makes a position in a sweep just
//! (window, offset). [`EpochLimit::Samples`] counts the samples this worker delivers.
//!
//! A worker therefore reads only its own chunks, and the workers' parts of a sweep are disjoint
//! and together are the whole data set. Minibatches are packed from that sequence order by
//! [`Reader::next_minibatch`]; [`Reader::state`] and [`Reader::restore`] save and resume the
//! exact position.
//!
//! The pipeline: the chunks of the worker's plan (sweep after sweep, window after window) are
//! decoded in plan order on a pool of [`ReaderOptions::threads`] threads, up to
//! [`ReaderOptions::prefetch_chunks`] ahead of the window being delivered, so the threads decode
//! the next window(s) while the caller packs minibatches from the current one. A window is
//! delivered once all its chunks are decoded (its shuffled order draws from all of them); without
//! `randomize` every chunk is a window, so chunks stream in file order. At the start (nothing
//! decoded ahead) the first window's chunks are scheduled alone, so that every thread works on
//! what the consumer waits for; the decoding ahead starts once that window is loaded. Decoded
//! chunks and their buffers are recycled, and when the reader is dropped they are kept (up to 128
//! of them and 256 MiB in all, for 10 seconds; [`release_kept_batches`] frees them at once) for
//! the process's next reader of the same streams, which then decodes into pages already in
//! place instead of fresh ones. Memory is bounded: at most `chunks of the
//! current window + prefetch_chunks` decoded chunks are held at once (see [`Reader::peak_chunks_held`]), plus
//! one minibatch, plus for a CTF file the mapped bytes of the chunks being decoded (one per
//! thread). Packing copies each run of consecutive sequences of a chunk at once (file order:
//! whole minibatches) and, in shuffled order, prefetches the scattered sequences a few places
//! ahead; sequence lengths are computed once per window, in file order. The order, and so every
//! minibatch, does not depend on the number of threads or the prefetch.
//!
//! ```
//! use exfeed::reader::{EpochLimit, Reader, ReaderOptions, Window};
//! use exfeed::source::MemorySource;
//! use exfeed::{SequenceBatch, Storage, StreamSpec};
//! use std::sync::Arc;
//!
//! // Ten sequences of one dense sample each, in chunks of three sequences.
//! let specs = vec![StreamSpec::new("x", Storage::Dense, 2)];
//! let mut all = SequenceBatch::<f32>::new(&specs);
//! for k in 0..10 {
//!     all.stream_mut(0).push_dense_sample(&[k as f32, 1.0]);
//!     all.finish_sequence(k);
//! }
//! let source = Arc::new(MemorySource::from_batch(specs, &all, 3));
//! let options = ReaderOptions {
//!     seed: 1,
//!     window: Window::Chunks(2),
//!     limit: EpochLimit::Sweeps(2),
//!     ..ReaderOptions::default()
//! };
//! let mut reader = Reader::new(source.clone(), options.clone())?;
//! let mut mb = reader.new_minibatch();
//! assert!(reader.next_minibatch(4, &mut mb)?);
//! assert_eq!(mb.samples, 4);
//! assert_eq!(mb.data.streams()[0].values().len(), 8); // [4 samples x 2]
//!
//! // Save the position, and a restored reader goes on with the same minibatches.
//! let saved = reader.state().to_json();
//! let mut again = Reader::restore(source, options, &exfeed::reader::ReaderState::from_json(&saved)?)?;
//! let mut mb2 = again.new_minibatch();
//! while reader.next_minibatch(4, &mut mb)? {
//!     assert!(again.next_minibatch(4, &mut mb2)?);
//!     assert_eq!(mb.sequences, mb2.sequences);
//! }
//! assert!(!again.next_minibatch(4, &mut mb2)?);
//! # Ok::<(), exfeed::Error>(())
//! ```

use crate::batch::SequenceBatch;
use crate::element::Element;
use crate::error::Result;
use crate::stream::StreamSpec;

mod cntk_delivery;
pub mod cntk_order;
pub mod elastic;
mod engine;
mod madvise;
mod minibatch;
mod mix;
mod packing;
mod plan;
mod pool;
mod prefetch;
pub(crate) mod rng;
mod stats;

#[cfg(test)]
mod tests;

pub use cntk_order::Randomizer;
pub use engine::{
    equalize_quota, EpochLimit, EqualizeMode, QuotaBasis, ReadSummary, Reader, ReaderOptions,
    ReaderState, Stopper, Window,
};
pub use minibatch::{write_minibatch_json, Minibatch, MinibatchSize, SequenceInfo};
pub use mix::{Mix, MixCount, MixPart, SweepMix};
pub use pool::release_kept_batches;
pub use stats::ReaderStats;

/// What the engine knows of a chunk before decoding it (from the index; estimates for chunks
/// that are byte ranges, see [`ChunkSource::chunks_by_byte_range`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChunkInfo {
    /// Number of sequences (decoding may drop bad ones under `maxErrors`).
    pub sequences: usize,
    /// Total samples of its sequences (used for sample-based randomization windows).
    pub samples: u64,
    /// Size in the file, in bytes.
    pub bytes: u64,
}

/// What the reader engine reads from: an indexed data set split into chunks of whole sequences.
///
/// `read_chunk` is called from several threads at once, for different chunks.
pub trait ChunkSource<T: Element>: Send + Sync {
    /// The streams every decoded chunk has, in this order.
    fn streams(&self) -> &[StreamSpec];
    /// The chunks, in file order.
    fn chunks(&self) -> &[ChunkInfo];
    /// Decodes chunk `chunk` (an index into [`ChunkSource::chunks`]) into `out`, which is empty
    /// (cleared, buffers kept) and has the streams of [`ChunkSource::streams`]. Sequences are
    /// appended in file order.
    fn read_chunk(&self, chunk: usize, out: &mut SequenceBatch<T>) -> Result<()>;
    /// Names chunk `chunk` for fetching its bytes ahead of its decoding, where they come over
    /// the network (a URL's CTF or CBF chunks): the fetch starts at once or, past the process's
    /// bounds, as soon as room frees; [`ChunkSource::read_chunk`] then takes the bytes, until
    /// the ticket is dropped (see [`crate::fetch_ahead`]). Name chunks in the order they will be
    /// decoded. `None`: never fetched ahead (local data, a chunk named already or too large).
    /// Default: none.
    fn fetch_ahead(&self, chunk: usize) -> Option<crate::fetch_ahead::FetchTicket> {
        let _ = chunk;
        None
    }
    /// The keys of chunk `chunk`'s sequences in file order, when the index knows them without
    /// decoding (needed to join sources by key, see [`JoinedSource`](crate::source::JoinedSource)). Default: unknown.
    fn chunk_keys(&self, chunk: usize) -> Option<Vec<u64>> {
        let _ = chunk;
        None
    }
    /// Where sequence `index` (in file order) of chunk `chunk` is, for messages. Default: the
    /// chunk and the sequence's place in it.
    fn sequence_place(&self, chunk: usize, index: usize) -> String {
        format!("sequence {index} of chunk {chunk}")
    }
    /// Each chunk's sequences' sample counts as CNTK's reader gives them to its randomizer, for
    /// CNTK's order ([`cntk_order::Randomizer::Cntk`]); an error when this source's chunks are
    /// not CNTK's. Default: none (the source has no CNTK counterpart).
    fn cntk_chunks(&self) -> Option<Result<Vec<Vec<u32>>>> {
        None
    }
    /// Selection frequencies of chunk `chunk`'s sequences, one per sequence [`ChunkSource::read_chunk`]
    /// gives, in that order (Lens's `freq:`), for drawing with replacement
    /// ([`ReaderOptions::with_replacement`]). Default: none (all equally likely).
    fn chunk_weights(&self, chunk: usize) -> Option<Vec<f64>> {
        let _ = chunk;
        None
    }
    /// The names of the files of a corpus ([`CorpusSource`](crate::source::CorpusSource)), whose keys then hold the shard
    /// (see [`CORPUS_KEY_BITS`](crate::batch::CORPUS_KEY_BITS)). Default: none (one file, or files joined by key).
    fn shard_names(&self) -> Option<&[String]> {
        None
    }
    /// Whether the chunks are byte ranges of files, resolved to whole sequences when decoded
    /// (a CTF file read without an index, see [`IndexMode::None`](crate::options::IndexMode::None)): then [`ChunkInfo`]'s
    /// `sequences` and `samples` are estimates, fixed when the source is opened. Default: no.
    fn chunks_by_byte_range(&self) -> bool {
        false
    }
    /// Of sources mixed by weight ([`MixSource`](crate::source::MixSource)): the mix, which
    /// then decides each sweep's chunks ([`Mix::sweep_chunks`]). Default: none (a sweep reads
    /// every chunk once).
    fn mix(&self) -> Option<&Mix> {
        None
    }
}
