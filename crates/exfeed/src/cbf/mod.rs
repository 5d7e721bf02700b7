//! The CNTK Binary Format (CBF): a reader that validates every byte it uses, and a writer.
//!
//! Layout (all numbers little-endian): a 12-byte prefix (magic `0x636e746b5f62696e`, version
//! `1`), the chunks, then the header (the magic again as a sentinel, chunk and stream counts,
//! the stream headers, the chunk offset table) and finally the 8-byte offset of the header.
//! A chunk holds, for its `S` sequences, `S` per-sequence sample counts (meta information),
//! then every stream's sequences in turn: dense `N, N*dim values`; sparse
//! `N, NNZ, NNZ values, NNZ indices, N per-sample counts`.
//!
//! [`CbfFile`] opens any byte buffer (a memory map from [`crate::io::open_bytes`], a `Vec`,
//! a slice), checks the prefix, the header and the offset table at once and each chunk when it
//! is read: every size read from the file is checked against the bytes that are really there
//! before anything is allocated, so a corrupt or truncated file gives an
//! [`ErrorKind::Corrupt`](crate::ErrorKind::Corrupt) error with the byte offset and a context
//! such as `chunk 3, stream 'features'`, never a panic or a huge allocation.
//!
//! ```
//! use exfeed::cbf::{CbfFile, CbfWriter, CbfWriterOptions};
//! use exfeed::{SequenceBatch, Storage, StreamSpec};
//!
//! let specs = [StreamSpec::new("x", Storage::Dense, 2), StreamSpec::new("y", Storage::Sparse, 5)];
//! let mut batch = SequenceBatch::<f32>::new(&specs);
//! batch.stream_mut(0).push_dense_sample(&[1.0, 2.0]);
//! batch.stream_mut(1).push_sparse_sample(&[4, 1], &[0.5, 0.25]);
//! batch.finish_sequence(0);
//!
//! let mut writer = CbfWriter::new(Vec::new(), &specs, CbfWriterOptions::default())?;
//! writer.write_batch(&batch)?;
//! let bytes = writer.finish()?;
//!
//! let file = CbfFile::open(bytes.as_slice())?;
//! assert_eq!((file.num_chunks(), file.num_sequences()), (1, 1));
//! let mut read = SequenceBatch::<f64>::new(&file.stream_specs());
//! file.read_chunk(0, &mut read)?;
//! assert_eq!(read.streams()[1].sparse_sample(0), (&[1u32, 4][..], &[0.25f64, 0.5][..]));
//! # Ok::<(), exfeed::Error>(())
//! ```
//!
//! Decisions where the spec or CNTK leave room:
//! - **Element type and precision.** CNTK refuses a file whose element type differs from the
//!   configured precision. [`CbfFile::read_chunk`] instead converts (float to double exactly,
//!   double to float rounding to nearest); [`CbfStream::element`] tells what the file holds, so
//!   a caller that wants CNTK's rule can enforce it.
//! - **Keys** are the 0-based global index of a sequence in the file.
//! - **Sample counts.** The per-sequence sample count (meta) must equal the sample count of at
//!   least one of the sequence's streams (the longest, or the one defining the minibatch size),
//!   and the chunk's count must be their sum.
//! - **Chunking** ([`CbfWriter`]): a chunk holds whole sequences and stays within the chunk size
//!   unless one sequence alone is larger. CNTK's `ctf2bin.py` never resets its size estimate
//!   after the first chunk, so every later chunk holds a single sequence; exfeed follows the
//!   spec instead. Where ctf2bin writes one chunk the bytes are identical. ctf2bin also drops
//!   empty sparse samples; exfeed keeps them (they are samples).

mod read;
mod write;

pub(crate) use read::check_magic;
pub use read::{CbfFile, CbfStream, ChunkEntry, ReadAt};
pub(crate) use write::EncodedBatch;
pub use write::{CbfWriter, CbfWriterOptions};

use crate::format::CBF_MAGIC;
/// The only CBF version there is.
pub const VERSION: u32 = 1;
/// Size of the prefix (magic and version) in bytes.
pub const PREFIX_LEN: u64 = 12;

#[cfg(test)]
mod tests;
