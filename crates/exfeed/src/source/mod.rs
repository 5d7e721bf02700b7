//! The data sources of the minibatch reader: the [`ChunkSource`](crate::reader::ChunkSource)
//! implementations, one per format ([`CtfSource`], [`CbfSource`], [`LensSource`]), one over
//! sequences held in memory ([`MemorySource`]), and three that combine sources: by sequence key
//! ([`JoinedSource`]), shard after shard ([`CorpusSource`]) or mixed by weight ([`MixSource`]).

mod cbf;
mod chunker;
mod corpus;
mod ctf;
mod join;
mod lens;
mod memory;
mod mix;

pub use cbf::CbfSource;
pub(crate) use corpus::{same_streams, to_corpus_keys};
pub use corpus::{split_corpus_key, Corpus, CorpusSource, DataPath, MixSpec, CORPUS_KEY_BITS};
#[cfg(fuzzing)]
pub use ctf::fuzz_index_cache;
pub use ctf::{index_cache_path, CtfSource, CtfSourceOptions, IndexMode, IndexOrigin};
pub use join::JoinedSource;
pub use lens::{LensSource, LensSourceOptions};
pub use memory::MemorySource;
pub use mix::MixSource;
