//! What reading data can be asked, below the configuration that sets it and the sources that
//! follow it.

use crate::error::{Error, Result};

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

impl IndexMode {
    /// The name: `auto`, `full`, `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            IndexMode::Auto => "auto",
            IndexMode::Full => "full",
            IndexMode::None => "none",
        }
    }
}

impl std::str::FromStr for IndexMode {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(IndexMode::Auto),
            "full" => Ok(IndexMode::Full),
            "none" => Ok(IndexMode::None),
            _ => Err(Error::config(format!(
                "index '{s}' is not one of auto, full, none"
            ))),
        }
    }
}

impl std::fmt::Display for IndexMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
