//! Streams (CNTK's "inputs"): what a file's data columns are called and look like.
//!
//! ```
//! use exfeed::{Storage, StreamSpec};
//!
//! // The command line's NAME:FORMAT:DIM[:ALIAS]; in CTF the data names the stream by its alias.
//! let spec: StreamSpec = "features:dense:784:F".parse()?;
//! assert_eq!((spec.storage, spec.dim, spec.name_in_file()), (Storage::Dense, 784, "F"));
//! assert_eq!(spec, StreamSpec { alias: Some("F".into()), ..StreamSpec::new("features", Storage::Dense, 784) });
//! assert!("labels:onehot:10".parse::<StreamSpec>().is_err());
//! # Ok::<(), exfeed::Error>(())
//! ```

use crate::error::Error;
use std::fmt;
use std::str::FromStr;

/// How a stream's samples are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Storage {
    /// Every sample has exactly `dim` values.
    Dense,
    /// Every sample is a list of `(index, value)` pairs with indices in `[0, dim)`.
    Sparse,
}

impl Storage {
    /// `dense` or `sparse`.
    pub fn as_str(self) -> &'static str {
        match self {
            Storage::Dense => "dense",
            Storage::Sparse => "sparse",
        }
    }

    /// The largest dim the formats can hold: CBF stores a dense dim as a 32-bit unsigned
    /// number; sparse indices are 32-bit signed in CNTK and in CBF files.
    pub fn max_dim(self) -> u64 {
        match self {
            Storage::Dense => u32::MAX as u64,
            Storage::Sparse => i32::MAX as u64,
        }
    }
}

impl fmt::Display for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Storage {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "dense" => Ok(Storage::Dense),
            "sparse" => Ok(Storage::Sparse),
            other => Err(Error::config(format!(
                "format must be 'dense' or 'sparse', found '{other}'"
            ))),
        }
    }
}

/// One configured input stream: CNTK's `input = [ NAME = [ alias dim format definesMBSize ] ]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StreamSpec {
    /// The stream's name (the configuration's key). Output is always keyed by this name.
    pub name: String,
    /// For CTF: the shorter name used in the data file instead of `name`. For CBF: the name the
    /// stream is exposed under (CBF's `alias` renames a stored stream).
    pub alias: Option<String>,
    /// Dense or sparse.
    pub storage: Storage,
    /// Values per dense sample; exclusive upper bound of sparse indices.
    pub dim: usize,
    /// Count minibatch sizes in samples of this stream.
    pub defines_mb_size: bool,
}

impl StreamSpec {
    /// A stream with no alias that does not define the minibatch size.
    pub fn new(name: impl Into<String>, storage: Storage, dim: usize) -> Self {
        StreamSpec {
            name: name.into(),
            alias: None,
            storage,
            dim,
            defines_mb_size: false,
        }
    }

    /// The name the data file uses for this stream in CTF: the alias if given, else the name.
    pub fn name_in_file(&self) -> &str {
        self.alias.as_deref().unwrap_or(&self.name)
    }
}

impl FromStr for StreamSpec {
    type Err = Error;

    /// The CLI form `NAME:FORMAT:DIM[:ALIAS]`, e.g. `features:dense:784:F`.
    fn from_str(s: &str) -> Result<Self, Error> {
        Self::parse_cli(s).map_err(Error::config)
    }
}

impl StreamSpec {
    fn parse_cli(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(':').collect();
        if !(3..=4).contains(&parts.len()) {
            return Err(format!("expected NAME:FORMAT:DIM[:ALIAS], found '{s}'"));
        }
        if parts[0].is_empty() {
            return Err(format!("input name is empty in '{s}'"));
        }
        let storage: Storage = parts[1]
            .parse()
            .map_err(|e: Error| e.message().to_string())?;
        let dim: u64 = parts[2]
            .parse()
            .ok()
            .filter(|&d| d > 0)
            .ok_or_else(|| format!("dim must be a positive integer, found '{}'", parts[2]))?;
        if dim > storage.max_dim() {
            return Err(format!(
                "dim {dim} of a {storage} input is larger than {}",
                storage.max_dim()
            ));
        }
        let dim = dim as usize;
        let mut spec = StreamSpec::new(parts[0], storage, dim);
        if let Some(alias) = parts.get(3) {
            if alias.is_empty() {
                return Err(format!("alias is empty in '{s}'"));
            }
            spec.alias = Some((*alias).to_string());
        }
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_form_parses() {
        let s: StreamSpec = "features:dense:784:F".parse().unwrap();
        assert_eq!(s.name, "features");
        assert_eq!(s.alias.as_deref(), Some("F"));
        assert_eq!(s.storage, Storage::Dense);
        assert_eq!(s.dim, 784);
        assert_eq!(s.name_in_file(), "F");
        let s: StreamSpec = "labels:sparse:10".parse().unwrap();
        assert_eq!(s.name_in_file(), "labels");
    }

    #[test]
    fn cli_form_rejects_with_reasons() {
        for (text, want) in [
            ("a:dense", "expected NAME:FORMAT:DIM[:ALIAS]"),
            (
                "a:dence:3",
                "format must be 'dense' or 'sparse', found 'dence'",
            ),
            ("a:dense:0", "dim must be a positive integer, found '0'"),
            ("a:dense:x", "dim must be a positive integer, found 'x'"),
            (
                "d:dense:18446744073709551615",
                "dim 18446744073709551615 of a dense input is larger than 4294967295",
            ),
            (
                "d:dense:99999999999999999999",
                "dim must be a positive integer, found '99999999999999999999'",
            ),
            (
                "s:sparse:2147483648",
                "dim 2147483648 of a sparse input is larger than 2147483647",
            ),
            (":dense:3", "input name is empty"),
            ("a:dense:3:", "alias is empty"),
        ] {
            let err = text.parse::<StreamSpec>().unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::Config);
            assert!(err.message().contains(want), "{text}: {err}");
        }
    }
}
