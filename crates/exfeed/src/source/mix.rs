//! [`MixSource`]: several data sets (each a file or a corpus) mixed by weight. Its chunks are
//! those of every source's files, as one [`CorpusSource`] of them all (so keys are corpus keys,
//! `file << 40 | key`, numbering the files of every source in order); which of them a sweep
//! reads, and how often, is its [`Mix`]'s to say (see [`Mix::sweep_chunks`]).

use super::CorpusSource;
use crate::batch::SequenceBatch;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::reader::{ChunkInfo, ChunkSource, Mix};
use crate::stream::StreamSpec;
use std::sync::Arc;

/// Sources mixed by weight: one corpus of all their files, and the [`Mix`] that picks each
/// sweep's chunks.
pub struct MixSource<T> {
    files: Arc<CorpusSource<T>>,
    mix: Mix,
}

impl<T: Element> MixSource<T> {
    /// The mix of `parts` (each source's name, weight and number of files) whose files, source
    /// after source, are the shards of `files`; a sweep has `epoch_samples` samples (default:
    /// the sum of the sources').
    pub fn new(
        files: Arc<CorpusSource<T>>,
        parts: &[(String, f64, usize)],
        epoch_samples: Option<u64>,
    ) -> Result<Self> {
        let shards: usize = parts.iter().map(|p| p.2).sum();
        if shards != files.names().len() {
            return Err(Error::config(format!(
                "a mix of {shards} files over a corpus of {}",
                files.names().len()
            )));
        }
        let mut first_shard = 0;
        let mut ranges = Vec::with_capacity(parts.len());
        for (name, weight, count) in parts {
            let start = files.shard_chunks(first_shard).start;
            let end = match first_shard + count {
                end if end < shards => files.shard_chunks(end).start,
                _ => files.chunks().len(),
            };
            ranges.push((name.clone(), *weight, start..end));
            first_shard += count;
        }
        let mix = Mix::new(ranges, files.chunks(), epoch_samples)?;
        Ok(MixSource { files, mix })
    }
}

impl<T: Element> ChunkSource<T> for MixSource<T> {
    fn streams(&self) -> &[StreamSpec] {
        self.files.streams()
    }

    fn chunks(&self) -> &[ChunkInfo] {
        self.files.chunks()
    }

    fn read_chunk(&self, chunk: usize, out: &mut SequenceBatch<T>) -> Result<()> {
        self.files.read_chunk(chunk, out)
    }

    fn fetch_ahead(&self, chunk: usize) -> Option<crate::fetch_ahead::FetchTicket> {
        self.files.fetch_ahead(chunk)
    }

    fn chunk_keys(&self, chunk: usize) -> Option<Vec<u64>> {
        self.files.chunk_keys(chunk)
    }

    fn sequence_place(&self, chunk: usize, index: usize) -> String {
        self.files.sequence_place(chunk, index)
    }

    fn chunk_weights(&self, chunk: usize) -> Option<Vec<f64>> {
        self.files.chunk_weights(chunk)
    }

    fn shard_names(&self) -> Option<&[String]> {
        self.files.shard_names()
    }

    fn chunks_by_byte_range(&self) -> bool {
        self.files.chunks_by_byte_range()
    }

    fn mix(&self) -> Option<&Mix> {
        Some(&self.mix)
    }
}
