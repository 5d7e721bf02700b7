//! Limits on what one record of input may take, checked before anything is allocated for it.
//!
//! A hostile or broken input must not make exfeed allocate without bound: a file without line
//! ends, a decompression bomb, a declared dim far beyond the data. Every record (a CTF
//! sequence, a Lens example) is bounded by [`Limits::max_record_bytes`]; sizes that follow from
//! it (the largest dense dim a record can hold) are derived here, in one place.
//!
//! ```
//! use exfeed::limits::Limits;
//! use exfeed::StreamSpec;
//!
//! // A dense dim no record could fill is refused before anything is allocated for it.
//! let huge: StreamSpec = "x:dense:4294967295".parse()?;
//! let err = Limits::default().check_text_inputs(&[huge]).unwrap_err();
//! assert!(err.message().starts_with("input 'x': dense dim 4294967295 cannot be held"));
//! // Raising the record size raises the bound.
//! let big = Limits { max_record_bytes: 16 << 30 };
//! assert!(big.check_text_inputs(&["x:dense:4294967295".parse()?]).is_ok());
//! # Ok::<(), exfeed::Error>(())
//! ```

use crate::error::{Error, Result};
use crate::stream::{Storage, StreamSpec};

/// The default [`Limits::max_record_bytes`]: 64 MiB, far above real data (a CTF line of an
/// image of 224 x 224 x 3 floats is about 1.5 MB).
pub const DEFAULT_MAX_RECORD_BYTES: u64 = 64 << 20;

/// CNTK's default `chunkSizeInBytes`: 32 MiB.
pub const DEFAULT_CHUNK_SIZE_BYTES: u64 = 32 * 1024 * 1024;

/// Bounds on the size of one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most bytes of input one record may take: one CTF sequence (all its lines), one Lens
    /// example. Larger records are an error at the byte where the limit is crossed.
    pub max_record_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
        }
    }
}

impl Limits {
    /// The largest dense dim a text record can hold: every value takes at least one digit and
    /// one separator, so a sample of dim `d` needs at least `2d - 1` bytes. A larger dim could
    /// only be reached by zero-padding, which would make memory follow the declared dim instead
    /// of the data.
    pub fn max_dense_dim(&self) -> u64 {
        self.max_record_bytes
            .div_ceil(2)
            .min(Storage::Dense.max_dim())
    }

    /// The error for a sequence that starts at byte `start` and goes on past the maximum
    /// record size: at the byte where it crosses it.
    pub fn sequence_too_long(&self, start: u64) -> Error {
        self.too_long("sequence", start)
    }

    /// The error for a line that starts at byte `start` and goes on past the maximum record
    /// size (a line is part of one sequence): at the byte where it crosses it.
    pub fn line_too_long(&self, start: u64) -> Error {
        self.too_long("line", start)
    }

    fn too_long(&self, what: &str, start: u64) -> Error {
        let max = self.max_record_bytes;
        Error::invalid(
            start.saturating_add(max),
            format!(
                "a {what} longer than the maximum record size ({max} bytes) starts at byte \
                 {start} (raise it with --max-record-size or maxRecordSizeInBytes)"
            ),
        )
    }

    /// Checks the dims of text inputs (CTF) against what a record can hold.
    pub fn check_text_inputs(&self, inputs: &[StreamSpec]) -> Result<()> {
        let max = self.max_dense_dim();
        for s in inputs {
            if s.storage == Storage::Dense && s.dim as u64 > max {
                return Err(Error::config(format!(
                    "input '{}': dense dim {} cannot be held: a record is at most {} bytes \
                     (the maximum record size), which holds at most {max} dense values",
                    s.name, s.dim, self.max_record_bytes
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_dim_follows_the_record_size() {
        let l = Limits {
            max_record_bytes: 10,
        };
        assert_eq!(l.max_dense_dim(), 5);
        let ok: StreamSpec = "d:dense:5".parse().unwrap();
        assert!(l.check_text_inputs(&[ok]).is_ok());
        let big: StreamSpec = "d:dense:6".parse().unwrap();
        let sparse: StreamSpec = "s:sparse:1000".parse().unwrap();
        assert!(l.check_text_inputs(std::slice::from_ref(&sparse)).is_ok());
        let err = l.check_text_inputs(&[sparse, big]).unwrap_err();
        assert_eq!(
            err.message(),
            "input 'd': dense dim 6 cannot be held: a record is at most 10 bytes (the maximum \
             record size), which holds at most 5 dense values"
        );
        assert_eq!(Limits::default().max_dense_dim(), 32 << 20);
    }
}
