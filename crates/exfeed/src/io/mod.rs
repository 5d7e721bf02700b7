//! The I/O layer: opening inputs (memory-mapped files, standard input, compressed streams) and
//! writing outputs atomically. Parsing cores never touch I/O; they take the bytes this layer
//! provides.
//!
//! ```
//! use exfeed::io::{open_reader, AtomicOutput, InputPath, OutputOptions};
//! use std::io::{BufRead, Write};
//!
//! let dir = std::env::temp_dir().join(format!("exfeed-io-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let target = dir.join("out.ctf.gz");
//! // Written under a temporary name (compressed, as the name says); the target appears,
//! // complete, only at commit. Dropped without a commit, nothing is left behind.
//! let mut out = AtomicOutput::create(&target, &OutputOptions::default())?;
//! out.write_all(b"0 |x 1 2\n")?;
//! assert!(!target.exists());
//! out.commit()?;
//! // An existing file is not replaced unless `force` is set.
//! assert!(AtomicOutput::create(&target, &OutputOptions::default()).is_err());
//! // Inputs are decompressed when their first bytes say so, whatever their name.
//! let mut lines = open_reader(&InputPath::new(&target))?.lines();
//! assert_eq!(lines.next().unwrap()?, "0 |x 1 2");
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod cbf_files;
mod corpus;
pub(crate) mod data_stamp;
mod decompress;
mod input;
mod lens_files;
mod output;
mod positioned;
mod read_ahead;
#[cfg(feature = "remote")]
pub mod remote;
#[cfg(all(feature = "remote", target_os = "linux"))]
pub mod remote_cache;
mod remote_input;
#[cfg(feature = "remote")]
pub mod remote_write;
mod reopening;

pub use cbf_files::{open_cbf, open_cbf_buffered};
pub(crate) use corpus::resolve_path;
pub use corpus::{Corpus, DataPath, MixSpec};
pub(crate) use data_stamp::checksum;
pub use data_stamp::FileStamp;
pub(crate) use input::{copy_checked, open_peeked, read_all};
pub use input::{
    open_bytes, open_bytes_as, open_reader, read_into_memory, spool, Compression, Holding,
    InputBytes, InputPath,
};
pub use lens_files::{load_lens, save_lens, write_lens_stream};
pub use output::{
    remove_unfinished_outputs, replace_file, stdout_was_closed, AtomicOutput, OutputOptions,
};
pub(crate) use positioned::{advise_random, advise_will_need};
pub use positioned::{read_at, read_at_most, read_exact_at};
pub use read_ahead::ReadAhead;
pub use remote_input::{
    is_remote_url, shown_url, take_cache_warnings, user_index_cache_dir, RemoteFile, RemoteStream,
    RemoteUrl, StorageOptions, USER_INDEX_CACHE_LIMIT,
};
pub use reopening::ReopeningFile;
