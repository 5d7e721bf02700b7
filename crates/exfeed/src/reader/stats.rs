//! What a reader has done so far ([`Reader::stats`](super::Reader::stats)): what it decoded,
//! how long decoding took, and how long its consumer waited for data. A training loop compares
//! the wait with the time between its calls: a reader whose consumer waits a large share of
//! the time makes the training input-bound (docs/reader.md, "Is training waiting for data?").

use super::ChunkSource;
use crate::batch::SequenceBatch;
use crate::element::Element;
use crate::error::Result;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// A reader's counters at one moment ([`Reader::stats`](super::Reader::stats)).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub struct ReaderStats {
    /// Minibatches delivered.
    pub minibatches: u64,
    /// Samples delivered.
    pub samples: u64,
    /// Chunks whose decoding finished, including those decoded ahead and not yet delivered.
    pub chunks_decoded: u64,
    /// The decoded chunks' bytes as the data set's index counts them: their size in the file
    /// (for a compressed file or a Lens file read as a stream, what was read of the stream).
    pub bytes_decoded: u64,
    /// Time spent decoding chunks, summed over the reader's threads (more than the elapsed
    /// time when several threads decode at once).
    pub decode_time: Duration,
    /// Time the consumer waited inside `next_minibatch` for chunks to be decoded: the data
    /// stall. With no threads (`threads = 0`) the consumer decodes, and all of that is waiting.
    pub wait_time: Duration,
    /// Time since the reader was created (or restored).
    pub elapsed: Duration,
    /// Chunks of the window being delivered.
    pub window_chunks: usize,
    /// Their bytes in the file (0 with [`Randomizer::Cntk`](super::Randomizer::Cntk)).
    pub window_bytes: u64,
    /// Chunks held now: the window's, plus those decoded or being decoded ahead.
    pub chunks_held: usize,
    /// The most chunks held at once so far (what bounds the decoded data in memory). This and
    /// the counts below are 0 with [`Randomizer::Cntk`](super::Randomizer::Cntk).
    pub peak_chunks_held: usize,
    /// The most file bytes of chunks held at once so far (the window's and those decoded
    /// ahead): what a window in bytes bounds, at most twice the window (or two chunks larger
    /// than it).
    pub peak_bytes_held: u64,
    /// Chunk buffers this reader took from those an earlier reader of the process left (see
    /// [`release_kept_batches`](super::release_kept_batches)): pages already in place.
    pub buffers_reused: u64,
    /// Chunk buffers this reader allocated anew (pages the kernel faults in and zeroes).
    pub buffers_new: u64,
}

impl ReaderStats {
    /// Samples delivered per second since the reader was created.
    pub fn samples_per_second(&self) -> f64 {
        per_second(self.samples as f64, self.elapsed)
    }

    /// Bytes decoded per second of decoding on one thread.
    pub fn decode_bytes_per_second(&self) -> f64 {
        per_second(self.bytes_decoded as f64, self.decode_time)
    }

    /// The share of the elapsed time the consumer waited for data, 0 to 1.
    pub fn wait_share(&self) -> f64 {
        match self.elapsed.as_secs_f64() {
            0.0 => 0.0,
            e => (self.wait_time.as_secs_f64() / e).min(1.0),
        }
    }
}

fn per_second(amount: f64, time: Duration) -> f64 {
    match time.as_secs_f64() {
        0.0 => 0.0,
        t => amount / t,
    }
}

/// The counters decoding threads add to (shared with every thread the reader starts).
#[derive(Debug, Default)]
pub(super) struct DecodeCounters {
    chunks: AtomicU64,
    bytes: AtomicU64,
    nanos: AtomicU64,
}

impl DecodeCounters {
    /// [`ChunkSource::read_chunk`], counted.
    pub(super) fn read_chunk<T: Element>(
        &self,
        source: &dyn ChunkSource<T>,
        chunk: usize,
        out: &mut SequenceBatch<T>,
    ) -> Result<()> {
        let start = Instant::now();
        let r = source.read_chunk(chunk, out);
        let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(nanos, Relaxed);
        if r.is_ok() {
            self.chunks.fetch_add(1, Relaxed);
            let bytes = source.chunks().get(chunk).map_or(0, |c| c.bytes);
            self.bytes.fetch_add(bytes, Relaxed);
        }
        r
    }

    /// Fills the decoding fields of `stats`.
    pub(super) fn fill(&self, stats: &mut ReaderStats) {
        stats.chunks_decoded = self.chunks.load(Relaxed);
        stats.bytes_decoded = self.bytes.load(Relaxed);
        stats.decode_time = Duration::from_nanos(self.nanos.load(Relaxed));
    }
}

/// Time spent waiting, added up by [`WaitClock::time`].
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct WaitClock(Duration);

impl WaitClock {
    /// Runs `f`, counting its time as waiting.
    pub(super) fn time<R>(&mut self, f: impl FnOnce() -> R) -> R {
        let start = Instant::now();
        let r = f();
        self.0 += start.elapsed();
        r
    }

    pub(super) fn total(&self) -> Duration {
        self.0
    }
}
