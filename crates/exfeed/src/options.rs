//! What reading data can be asked, below the configuration that sets it and the sources that
//! follow it.

use crate::error::{Error, Result};
use crate::io::{InputPath, StorageOptions};
use crate::limits::DEFAULT_CHUNK_SIZE_BYTES;
use std::path::{Path, PathBuf};

/// The most bytes a cache directory holds when only the directory is given: 10 GiB.
pub const DEFAULT_CACHE_LIMIT: u64 = 10 << 30;

/// How a CTF file's chunks are found: by a full index (a scan of the whole file at open, or
/// its cache), or as byte ranges fixed from the file's size, each resolved to whole sequences
/// when it is decoded (see [`CtfSource`](crate::source::CtfSource)). `--index`, the configuration's `index`, Python's
/// `index=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IndexMode {
    /// `none` when nothing asks for the full index, else `full`: the full index with
    /// `cacheIndex` (to use or write the cache), `maxErrors` above 0 (its warnings then name
    /// lines, which a byte range does not know), a file without sequence ids (its keys are
    /// line numbers) and files joined by key (the join needs every chunk's keys).
    #[default]
    Auto,
    /// Always the full index.
    Full,
    /// Never an index: the first minibatch after reading only the first bytes of the file and
    /// the chunks it needs. A file without sequence ids keys each line by its byte offset; an
    /// error's line number is found by counting the lines before it.
    None,
}

/// `as_str` and `FromStr` (case-insensitive) for an option whose values are names; a name
/// not on the list is an error naming the parameter (`KEY` in the configuration).
macro_rules! named_values {
    ($t:ident, $key:literal, $($value:ident => $name:literal),+ $(,)?) => {
        impl $t {
            #[doc = concat!("The name: ", $("`", $name, "` "),+)]
            pub fn as_str(self) -> &'static str {
                match self {
                    $($t::$value => $name,)+
                }
            }
        }

        impl std::str::FromStr for $t {
            type Err = Error;

            fn from_str(s: &str) -> Result<Self> {
                match s.to_ascii_lowercase().as_str() {
                    $($name => Ok($t::$value),)+
                    _ => Err(Error::config(format!(
                        "{} '{s}' is not one of {}",
                        $key,
                        [$($name),+].join(", ")
                    ))),
                }
            }
        }
    };
}

named_values!(IndexMode, "index", Auto => "auto", Full => "full", None => "none");
named_values!(Randomizer, "randomizer", Exfeed => "exfeed", Cntk => "cntk");
named_values!(EqualizeMode, "equalizeMode", Repeat => "repeat", Spread => "spread");

impl std::fmt::Display for IndexMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How big the chunks of a data file are: CNTK's `chunkSizeInBytes`, or chosen from the size of
/// the data and the number of workers (at least [`AUTO_CHUNKS_PER_WORKER`] chunks each, at most
/// the `chunkSizeInBytes` in effect below it: see [`ReadOptions::sized_for`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkSize {
    /// About this many bytes of whole sequences (at least 1).
    Bytes(u64),
    /// From the size of the data and the number of workers.
    Auto,
}

/// Chunks per worker [`ChunkSize::Auto`] aims at.
pub const AUTO_CHUNKS_PER_WORKER: u64 = 4;

/// How the data of a deserializer is read: its chunk size, whether it is held in memory,
/// indexed (and the index cached), whether every sample is a sequence, and how a URL reaches
/// its store (storage options; their values never show in `Debug`). One value per
/// layer: the reader block of a configuration, a deserializer's block, the settings a front
/// end was given (`exfeed read`'s flags, `exfeed.Reader`'s keywords); [`ReadOptions::over`]
/// puts one layer on another, and what no layer sets has its default.
///
/// ```
/// use exfeed::options::{ChunkSize, IndexMode, ReadOptions};
///
/// let config = ReadOptions::new().with_chunk_size(ChunkSize::Bytes(1 << 20)).with_cache_index(true);
/// let given = ReadOptions::new().with_chunk_size(ChunkSize::Auto).with_index(IndexMode::Full);
/// let read = given.over(&config);
/// assert_eq!((read.cache_index(), read.index()), (true, IndexMode::Full));
/// // Auto: at least 4 chunks a worker, at most the 1 MiB set below it.
/// assert_eq!(read.sized_for(Some(64 << 20), 2).chunk_bytes(), 1 << 20);
/// assert_eq!(read.sized_for(Some(8 << 20), 8).chunk_bytes(), 256 << 10);
/// // Unset: CNTK's defaults.
/// assert_eq!(ReadOptions::new().chunk_bytes(), 32 << 20);
/// assert!(!ReadOptions::new().keep_in_memory());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ReadOptions {
    chunk_bytes: Option<u64>,
    auto_chunks: Option<bool>,
    keep_in_memory: Option<bool>,
    frame_mode: Option<bool>,
    cache_index: Option<bool>,
    index: Option<IndexMode>,
    /// Unset when empty.
    storage_options: StorageOptions,
    cache_dir: Option<PathBuf>,
    cache_limit: Option<u64>,
}

impl ReadOptions {
    /// Nothing set: every value its default.
    pub fn new() -> Self {
        ReadOptions::default()
    }

    /// `chunkSizeInBytes`, or [`ChunkSize::Auto`]. A size of 0 is refused when the data is
    /// opened.
    pub fn with_chunk_size(mut self, size: ChunkSize) -> Self {
        match size {
            ChunkSize::Bytes(n) => (self.chunk_bytes, self.auto_chunks) = (Some(n), Some(false)),
            ChunkSize::Auto => self.auto_chunks = Some(true),
        }
        self
    }

    /// `keepDataInMemory`: read the whole file into memory when it is opened.
    pub fn with_keep_in_memory(mut self, keep: bool) -> Self {
        self.keep_in_memory = Some(keep);
        self
    }

    /// `frameMode`: every sample is a sequence of its own.
    pub fn with_frame_mode(mut self, frame_mode: bool) -> Self {
        self.frame_mode = Some(frame_mode);
        self
    }

    /// `cacheIndex`: use (or write) a CTF file's index cache beside it; a URL's in the local
    /// cache (`cacheDir`, else the user's: see docs/remote.md).
    pub fn with_cache_index(mut self, cache: bool) -> Self {
        self.cache_index = Some(cache);
        self
    }

    /// `index`: whether a CTF file is indexed before it is read (see [`IndexMode`]).
    pub fn with_index(mut self, index: IndexMode) -> Self {
        self.index = Some(index);
        self
    }

    /// How URL inputs (`s3://`, `gs://`, `http://`, `https://`) reach their store: credentials,
    /// the endpoint, the region, ... over the environment's (see [`crate::io::remote`]). The CLI's
    /// `--storage-option`, Python's `storage_options=`; not a configuration key.
    pub fn with_storage_options(mut self, options: StorageOptions) -> Self {
        self.storage_options = options;
        self
    }

    /// `cacheDir` (exfeed): the local cache of URL inputs, shared by every process that names
    /// it (see docs/remote.md): the byte ranges read are kept there, and the CTF indexes of
    /// `cacheIndex`. Without it, nothing of a URL is kept but those indexes, in the user's
    /// cache directory.
    pub fn with_cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// `cacheLimitInBytes` (exfeed): the most bytes the cache directory may hold (default
    /// [`DEFAULT_CACHE_LIMIT`]); least recently used entries are evicted to stay under it.
    pub fn with_cache_limit(mut self, bytes: u64) -> Self {
        self.cache_limit = Some(bytes);
        self
    }

    /// These options with what they leave unset taken from `below`.
    pub fn over(&self, below: &ReadOptions) -> ReadOptions {
        ReadOptions {
            chunk_bytes: self.chunk_bytes.or(below.chunk_bytes),
            auto_chunks: self.auto_chunks.or(below.auto_chunks),
            keep_in_memory: self.keep_in_memory.or(below.keep_in_memory),
            frame_mode: self.frame_mode.or(below.frame_mode),
            cache_index: self.cache_index.or(below.cache_index),
            index: self.index.or(below.index),
            storage_options: if self.storage_options.is_empty() {
                below.storage_options.clone()
            } else {
                self.storage_options.clone()
            },
            cache_dir: self.cache_dir.clone().or_else(|| below.cache_dir.clone()),
            cache_limit: self.cache_limit.or(below.cache_limit),
        }
    }

    /// The chunk size asked for: [`ChunkSize::Auto`], or the bytes (default: CNTK's 32 MiB).
    pub fn chunk_size(&self) -> ChunkSize {
        match self.auto_chunks {
            Some(true) => ChunkSize::Auto,
            _ => ChunkSize::Bytes(self.chunk_bytes()),
        }
    }

    /// The chunk size in bytes: `chunkSizeInBytes` (default: CNTK's 32 MiB); for
    /// [`ChunkSize::Auto`] not yet [sized](ReadOptions::sized_for), the most it may be.
    pub fn chunk_bytes(&self) -> u64 {
        self.chunk_bytes.unwrap_or(DEFAULT_CHUNK_SIZE_BYTES)
    }

    /// With [`ChunkSize::Auto`], the bytes for `data_bytes` of data read by `workers` workers:
    /// at least [`AUTO_CHUNKS_PER_WORKER`] chunks per worker, at most [`ReadOptions::chunk_bytes`]
    /// (so a large file keeps its chunks), at least 1 byte. A chunk holds whole sequences, so
    /// a file of few sequences has fewer chunks. Data of unknown size (standard input, a pipe)
    /// keeps [`ReadOptions::chunk_bytes`]. Otherwise unchanged.
    pub fn sized_for(&self, data_bytes: Option<u64>, workers: usize) -> ReadOptions {
        let mut sized = self.clone();
        if self.chunk_size() == ChunkSize::Auto {
            let most = self.chunk_bytes().max(1);
            let per = AUTO_CHUNKS_PER_WORKER.saturating_mul(workers.max(1) as u64);
            let bytes = data_bytes.map_or(most, |d| (d / per).clamp(1, most));
            sized = sized.with_chunk_size(ChunkSize::Bytes(bytes));
        }
        sized
    }

    /// Whether the whole file is read into memory when it is opened (default: no).
    pub fn keep_in_memory(&self) -> bool {
        self.keep_in_memory.unwrap_or(false)
    }

    /// Whether every sample is a sequence of its own (default: no).
    pub fn frame_mode(&self) -> bool {
        self.frame_mode.unwrap_or(false)
    }

    /// Whether a CTF file's index cache is used or written (default: no).
    pub fn cache_index(&self) -> bool {
        self.cache_index.unwrap_or(false)
    }

    /// Whether a CTF file is indexed before it is read (default: [`IndexMode::Auto`]).
    pub fn index(&self) -> IndexMode {
        self.index.unwrap_or_default()
    }

    /// The storage options URL inputs are read with (default: none, the environment's).
    pub fn storage_options(&self) -> &StorageOptions {
        &self.storage_options
    }

    /// The cache directory of URL inputs, if one is set.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache_dir.as_deref()
    }

    /// The most bytes the cache directory may hold (default: [`DEFAULT_CACHE_LIMIT`]).
    pub fn cache_limit(&self) -> u64 {
        self.cache_limit.unwrap_or(DEFAULT_CACHE_LIMIT)
    }

    /// A URL input opened as these options say: with their storage options, through their
    /// cache; any other input as it is.
    pub fn apply_to(&self, input: InputPath) -> InputPath {
        let cache = (self.cache_dir.clone()).map(|dir| (dir, self.cache_limit()));
        input.with_remote(&self.storage_options, cache)
    }

    /// Whether `index` was set (at any layer).
    pub fn sets_index(&self) -> bool {
        self.index.is_some()
    }
}

/// Which order the reader gives: `randomizer` (`--randomizer`, Python `randomizer=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Randomizer {
    /// exfeed's own (the default): chunk windows shuffled whole, decoded ahead on threads.
    #[default]
    Exfeed,
    /// CNTK 2.7's block randomizer, exactly: this module's order and minibatch boundaries.
    Cntk,
}

/// `equalizeMode` (`--equalize-mode`, Python `equalize_mode=`): how equalized ranks
/// ([`ReaderOptions::equalize`](crate::reader::ReaderOptions::equalize)) come to the same
/// number of minibatches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EqualizeMode {
    /// Minibatches of the asked size; a part that runs out is gone through again from its
    /// start, one with more is cut short (the sweep's data is changed where parts differ).
    #[default]
    Repeat,
    /// Every sequence of the part exactly once, spread over the minibatches: each takes
    /// `ceil(sequences left / minibatches left)` sequences, whatever the asked size. Needs
    /// exact sequence counts (the index). Minibatch sizes then differ between ranks by about
    /// their parts' difference over the quota (documented in docs/reader.md).
    Spread,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_options_layer_and_their_values_never_show() {
        let given = ReadOptions::new().with_storage_options(
            [("aws_secret_access_key", "s3cr3t-value")]
                .into_iter()
                .collect(),
        );
        let config = ReadOptions::new().with_cache_index(true);
        let read = given.over(&config);
        assert_eq!(read.storage_options().pairs().len(), 1);
        assert!(read.cache_index());
        // Unset above: the layer below's stand.
        assert_eq!(
            config.over(&given).storage_options(),
            given.storage_options()
        );
        let shown = format!("{read:?}");
        assert!(shown.contains("aws_secret_access_key"), "{shown}");
        assert!(!shown.contains("s3cr3t-value"), "{shown}");
    }
}
