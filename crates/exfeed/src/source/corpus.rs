//! [`CorpusSource`]: one data set of many shard files (`train-00000.ctf ... train-01023.ctf`),
//! as opposed to [`JoinedSource`](super::JoinedSource), which joins files by sequence key.
//!
//! Its chunks are those of every shard, shard after shard, so one randomization shuffles them
//! all and each worker decodes only its own chunks (of whichever shards they are in). Shards
//! may be CTF or CBF (mixed, when they have the same streams), compressed or not.
//!
//! Keys: a sequence's key is `shard << 40 | key in its file` ([`CORPUS_KEY_BITS`]), unique across
//! the corpus; `--dump` shows it as `"shard:key"`, e.g. `"3:17"`. A key of `2^40` or more in a
//! shard is an error naming the file.
//!
//! Every shard is opened when the corpus is (the plan needs every shard's chunk count): a CTF
//! shard without an index reads just its first 64 KiB then (see
//! [`IndexMode`](super::IndexMode)), one with the index is scanned or its index read from its
//! cache. A worker decodes only its own chunks. A plain shard's file is closed when many are
//! open and reopened when its chunks are read ([`ReopeningFile`](crate::io::ReopeningFile)), so
//! any number of shards reads under the process's limit of open files.

use crate::batch::SequenceBatch;
pub use crate::batch::{split_corpus_key, CORPUS_KEY_BITS};
use crate::element::Element;
use crate::error::{Error, ErrorKind, Location, Result};
pub use crate::io::{Corpus, DataPath, MixSpec};
use crate::reader::{ChunkInfo, ChunkSource};
use crate::stream::StreamSpec;
use std::sync::Arc;

/// Rewrites the keys of shard `shard` (named `name` in messages) as corpus keys: `shard << 40 |
/// key`; a key of `2^40` or more is an error naming the file.
pub(crate) fn to_corpus_keys(keys: &mut [u64], shard: usize, name: &str) -> Result<()> {
    let high = (shard as u64) << CORPUS_KEY_BITS;
    for key in keys {
        if *key >> CORPUS_KEY_BITS != 0 {
            return Err(Error::new(
                ErrorKind::Invalid,
                Location::default().with_file(name.to_string()),
                format!(
                    "sequence key {key} is too large for a corpus (keys below 2^{CORPUS_KEY_BITS})"
                ),
            ));
        }
        *key |= high;
    }
    Ok(())
}

/// Checks that shard `name` has the streams of the corpus's first shard (name, storage,
/// dimension); the error names both files and their streams.
pub(crate) fn same_streams(
    name: &str,
    specs: &[StreamSpec],
    first_name: &str,
    first: &[StreamSpec],
) -> Result<()> {
    let shape = |s: &[StreamSpec]| -> Vec<String> {
        s.iter()
            .map(|s| format!("{}:{}:{}", s.name, s.storage.as_str(), s.dim))
            .collect()
    };
    if shape(specs) == shape(first) {
        return Ok(());
    }
    Err(Error::config(format!(
        "corpus file {name} has the streams {}, not those of {first_name}: {}",
        shape(specs).join(" "),
        shape(first).join(" ")
    )))
}

/// Shard files as one data set: its chunks are every shard's, shard after shard (so one
/// randomization covers them all and a worker decodes only its own); a key is `shard << 40 |
/// key in its file` ([`CORPUS_KEY_BITS`], [`split_corpus_key`]). Every shard is opened when the
/// corpus is (the plan needs their chunk counts).
pub struct CorpusSource<T> {
    shards: Vec<Arc<dyn ChunkSource<T>>>,
    names: Vec<String>,
    specs: Vec<StreamSpec>,
    infos: Vec<ChunkInfo>,
    /// The first corpus chunk of each shard.
    starts: Vec<usize>,
}

impl<T: Element> CorpusSource<T> {
    /// The corpus of `shards` (with their names, for messages), in order. They must have the
    /// same streams (name, storage, dimension): the first that differs from the first shard is
    /// named in the error.
    pub fn new(shards: Vec<(String, Arc<dyn ChunkSource<T>>)>) -> Result<Self> {
        if shards.len() >= 1 << (64 - CORPUS_KEY_BITS) {
            return Err(Error::config(format!(
                "a corpus holds at most 2^{} files, not {}",
                64 - CORPUS_KEY_BITS,
                shards.len()
            )));
        }
        let Some((first_name, first)) = shards.first() else {
            return Err(Error::config("a corpus needs at least one file"));
        };
        let specs = first.streams().to_vec();
        let (mut infos, mut starts) = (Vec::new(), Vec::new());
        for (name, shard) in &shards {
            same_streams(name, shard.streams(), first_name, &specs)?;
            starts.push(infos.len());
            infos.extend_from_slice(shard.chunks());
        }
        let (names, shards) = shards.into_iter().unzip();
        Ok(CorpusSource {
            shards,
            names,
            specs,
            infos,
            starts,
        })
    }

    /// The shards' names, in corpus order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The corpus chunks of shard `shard`.
    pub fn shard_chunks(&self, shard: usize) -> std::ops::Range<usize> {
        let end = self
            .starts
            .get(shard + 1)
            .copied()
            .unwrap_or(self.infos.len());
        self.starts[shard]..end
    }

    /// The shard of corpus chunk `chunk` and its chunk number there.
    fn locate(&self, chunk: usize) -> (usize, usize) {
        let shard = self.starts.partition_point(|&s| s <= chunk) - 1;
        (shard, chunk - self.starts[shard])
    }
}

impl<T: Element> ChunkSource<T> for CorpusSource<T> {
    fn streams(&self) -> &[StreamSpec] {
        &self.specs
    }

    fn chunks(&self) -> &[ChunkInfo] {
        &self.infos
    }

    fn read_chunk(&self, chunk: usize, out: &mut SequenceBatch<T>) -> Result<()> {
        let (shard, local) = self.locate(chunk);
        self.shards[shard].read_chunk(local, out)?;
        to_corpus_keys(out.keys_mut(), shard, &self.names[shard])
    }

    fn fetch_ahead(&self, chunk: usize) -> Option<crate::fetch_ahead::FetchTicket> {
        let (shard, local) = self.locate(chunk);
        self.shards[shard].fetch_ahead(local)
    }

    fn chunk_keys(&self, chunk: usize) -> Option<Vec<u64>> {
        let (shard, local) = self.locate(chunk);
        let high = (shard as u64) << CORPUS_KEY_BITS;
        let keys = self.shards[shard].chunk_keys(local)?;
        Some(keys.into_iter().map(|k| k | high).collect())
    }

    fn chunk_weights(&self, chunk: usize) -> Option<Vec<f64>> {
        let (shard, local) = self.locate(chunk);
        self.shards[shard].chunk_weights(local)
    }

    fn shard_names(&self) -> Option<&[String]> {
        Some(&self.names)
    }

    fn chunks_by_byte_range(&self) -> bool {
        self.shards.iter().any(|s| s.chunks_by_byte_range())
    }
}
