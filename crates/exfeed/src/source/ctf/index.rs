//! The index of a CTF file: its chunks and every sequence's key, as a scan finds them or the
//! index cache holds them.

use crate::ctf::KeyMode;

/// A chunk of the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Chunk {
    /// Byte offset of its first sequence.
    pub(super) offset: u64,
    /// Its length in bytes.
    pub(super) bytes: u64,
    /// 1-based line of its first sequence.
    pub(super) line: u64,
    /// Index of its first sequence in the file.
    pub(super) first_sequence: u64,
    /// Number of sequences.
    pub(super) sequences: u64,
    /// Samples by the index (lines, or one a sequence in frame mode).
    pub(super) samples: u64,
}

/// The index of a CTF file: its chunks and every sequence's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Index {
    /// How sequences are keyed (by id, or one a line).
    pub(super) mode: KeyMode,
    /// The chunks, in file order.
    pub(super) chunks: Vec<Chunk>,
    /// Every sequence's key, in file order.
    pub(super) keys: Vec<u64>,
}
