//! [`MemorySource`]: sequences held in memory, split into chunks.

use crate::batch::SequenceBatch;
use crate::element::Element;
use crate::error::Result;
use crate::reader::{ChunkInfo, ChunkSource};
use crate::stream::StreamSpec;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A [`ChunkSource`] over sequences already in memory (tests, Lens example sets, data handed
/// in from Python). Each chunk is a [`SequenceBatch`]; reading one copies it.
#[derive(Debug)]
pub struct MemorySource<T> {
    specs: Vec<StreamSpec>,
    chunks: Vec<SequenceBatch<T>>,
    infos: Vec<ChunkInfo>,
    weights: Option<Vec<Vec<f64>>>,
    reads: AtomicUsize,
}

impl<T: Element> MemorySource<T> {
    /// A source with the given chunks, each holding the streams of `specs`. A chunk's sample
    /// count is the sum of its sequences' lengths (definesMBSize stream, else longest stream);
    /// its byte size is the size of its values.
    pub fn new(specs: Vec<StreamSpec>, chunks: Vec<SequenceBatch<T>>) -> Self {
        let defining = specs.iter().position(|s| s.defines_mb_size);
        let infos = chunks
            .iter()
            .map(|c| ChunkInfo {
                sequences: c.len(),
                samples: (0..c.len())
                    .map(|s| c.sequence_length(s, defining) as u64)
                    .sum(),
                bytes: c
                    .streams()
                    .iter()
                    .map(|s| (s.values().len() * T::SIZE) as u64)
                    .sum(),
            })
            .collect();
        MemorySource {
            specs,
            chunks,
            infos,
            weights: None,
            reads: AtomicUsize::new(0),
        }
    }

    /// Splits `batch` into chunks of `sequences_per_chunk` consecutive sequences (at least 1).
    ///
    /// ```
    /// use exfeed::reader::ChunkSource;
    /// use exfeed::source::MemorySource;
    /// use exfeed::{SequenceBatch, Storage, StreamSpec};
    ///
    /// let specs = vec![StreamSpec::new("x", Storage::Dense, 1)];
    /// let mut all = SequenceBatch::<f32>::new(&specs);
    /// for k in 0..5 {
    ///     all.stream_mut(0).push_dense_sample(&[k as f32]);
    ///     all.finish_sequence(k);
    /// }
    /// let source = MemorySource::from_batch(specs, &all, 2);
    /// let sizes: Vec<usize> = source.chunks().iter().map(|c| c.sequences).collect();
    /// assert_eq!(sizes, [2, 2, 1]);
    /// ```
    pub fn from_batch(
        specs: Vec<StreamSpec>,
        batch: &SequenceBatch<T>,
        sequences_per_chunk: usize,
    ) -> Self {
        let per = sequences_per_chunk.max(1);
        let mut chunks = Vec::new();
        let mut cur = SequenceBatch::new(&specs);
        for s in 0..batch.len() {
            cur.push_sequence_from(batch, s);
            if cur.len() == per {
                let next = cur.empty_like();
                chunks.push(std::mem::replace(&mut cur, next));
            }
        }
        if !cur.is_empty() {
            chunks.push(cur);
        }
        Self::new(specs, chunks)
    }

    /// Gives every sequence a selection frequency (Lens's `freq:`), in sequence order across
    /// chunks; see [`ChunkSource::chunk_weights`]. Missing ones are 1.
    pub fn with_weights(mut self, weights: &[f64]) -> Self {
        let mut it = weights.iter().copied();
        self.weights = Some(
            self.chunks
                .iter()
                .map(|c| (0..c.len()).map(|_| it.next().unwrap_or(1.0)).collect())
                .collect(),
        );
        self
    }

    /// How many times [`ChunkSource::read_chunk`] has been called.
    pub fn reads(&self) -> usize {
        self.reads.load(Ordering::Relaxed)
    }
}

impl<T: Element> ChunkSource<T> for MemorySource<T> {
    fn streams(&self) -> &[StreamSpec] {
        &self.specs
    }

    fn chunks(&self) -> &[ChunkInfo] {
        &self.infos
    }

    fn read_chunk(&self, chunk: usize, out: &mut SequenceBatch<T>) -> Result<()> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let src = &self.chunks[chunk];
        for s in 0..src.len() {
            out.push_sequence_from(src, s);
        }
        Ok(())
    }

    fn chunk_weights(&self, chunk: usize) -> Option<Vec<f64>> {
        self.weights.as_ref().map(|w| w[chunk].clone())
    }

    fn chunk_keys(&self, chunk: usize) -> Option<Vec<u64>> {
        Some(self.chunks[chunk].keys().to_vec())
    }
}
