//! exfeed reads, checks, converts and feeds to training the example-file formats of CNTK and
//! Lens: the CNTK Text Format (CTF), the CNTK Binary Format (CBF) and Lens example files (`.ex`
//! text, `.bex` binary).
//!
//! # Layering
//!
//! Each layer imports only from the layers above it in this list, never from one below:
//! 1. foundation: [`error`], [`element`], [`stream`], [`batch`], [`limits`], [`format`](mod@format),
//!    the process's pools of reusable read buffers (private), and [`fetch_ahead`] (bytes a
//!    remote source fetches ahead of their read);
//! 2. pure cores per format, over byte slices, never opening a file: [`ctf`], [`cbf`], [`lens`];
//! 3. [`io`]: memory maps, standard input, compression, positioned reads, spooling, corpus
//!    globs, atomic output;
//! 4. [`options`] (what reading can be asked) and [`config`] (CNTK's configuration syntax and
//!    its TOML form, read into a [`config::ReaderConfig`]);
//! 5. [`reader`]: the minibatch engine (plan, randomization, packing, prefetch, pool) over
//!    any [`reader::ChunkSource`], knowing no format;
//! 6. [`source`]: the chunk sources, one per format, in memory, joined by key, a corpus; and
//!    `arrow` (the `arrow` feature): Parquet and Arrow IPC files, read and written;
//! 7. the door: [`open()`] ([`dataset`]), the only way in for every format, with [`convert`] and
//!    [`dump`] over it;
//! 8. [`configured`]: the reader a configuration describes, each deserializer's data opened
//!    through the door, then joined by key.
//!
//! A test (tests/layering.rs) reads the source and fails on a reference to a lower layer.
//!
//! # Features
//!
//! `arrow` (off by default; the command and the Python package turn it on): Parquet and Arrow
//! IPC files through [`open()`] and [`convert`], and Arrow record batches of sequences. Without
//! it these files are recognised and refused with a message that says so.
//!
//! All decoders produce [`batch::SequenceBatch`]es and report problems as [`error::Error`]s and
//! [`error::Diagnostic`]s with file, line, column and byte.
//!
//! # Where to start
//!
//! - Any input, any format: [`open()`] (a file, `-` for standard input, a pipe or FIFO,
//!   compressed or not) recognises the format once and gives a [`DataSet`]: its sequences in
//!   batches ([`DataSet::sequences`]), a [`Summary`] ([`DataSet::summary`]), or the minibatch
//!   reader's source ([`DataSet::into_chunk_source`]). The command-line tool is a thin layer
//!   over it.
//! - Parse a file held in memory: [`ctf::parse`] (or [`ctf::CtfParser`] for chunks and
//!   streams), [`cbf::CbfFile::open`] (any chunk on its own), [`lens::parse`] (`.ex` or `.bex`).
//! - Write: [`cbf::CbfWriter`], [`ctf::write_sequence`], [`lens::text::write`] and
//!   [`lens::binary::write`]; convert any input to a file of any format, atomically, with
//!   [`convert::convert`] (what `exfeed convert` does), or CTF and CBF held in memory with
//!   [`convert::ctf_to_cbf`] and [`convert::cbf_to_ctf`]; print JSON lines with [`dump`].
//! - Feed training: [`configured::AnyReader`] builds the minibatch reader a
//!   [`config::ReaderConfig`] describes (CNTK's reader block, or its TOML form); or
//!   [`reader::Reader`] over any [`reader::ChunkSource`] ([`source::CtfSource`],
//!   [`source::CbfSource`], [`source::LensSource`], [`source::MemorySource`]) with
//!   [`reader::ReaderOptions`].
//! - Errors: one [`Error`] type with an [`ErrorKind`] and a [`Location`]; problems a parse may
//!   tolerate (`maxErrors`) go to a [`DiagnosticSink`] such as a `Vec<Diagnostic>`.
//!
//! ```
//! // A Lens example file: two examples of one event each, inputs then targets.
//! let set = exfeed::lens::parse(b"name: one I: 1 0 T: 0 1;\nname: two I: 0 1 T: 1 0;\n")?;
//! assert_eq!(set.examples.len(), 2);
//! assert_eq!(set.examples[1].name, "two");
//! // The same examples in the binary form read back the same.
//! let binary = exfeed::lens::binary::write(&set)?;
//! let back = exfeed::lens::parse(&binary)?;
//! assert_eq!(back.examples[1].name, "two");
//! assert_eq!(back.examples[1].lists, set.examples[1].lists);
//! # Ok::<(), exfeed::Error>(())
//! ```
#![deny(missing_docs)]

#[cfg(feature = "arrow")]
pub mod arrow;
pub mod batch;
mod buffers;
pub mod cbf;
pub mod config;
pub mod configured;
pub mod convert;
pub mod ctf;
pub mod dataset;
pub mod dump;
pub mod element;
pub mod error;
pub mod fetch_ahead;
pub mod format;
pub mod io;
mod json;
pub mod lens;
pub mod limits;
mod number;
pub mod options;
pub mod reader;
pub mod source;
pub mod stream;

pub use batch::{SequenceBatch, StreamData, StreamParts};
pub use dataset::{
    open, open_corpus, DataSet, FormatSource, LensLayout, OpenOptions, Sequences, Summary,
};
pub use element::{Element, Precision};
pub use error::{Diagnostic, DiagnosticSink, Error, ErrorKind, Location, Result, Severity};
pub use stream::{Storage, StreamSpec};

/// The README's Rust examples, compiled and run as doctests.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The Rust examples of docs/library.md, compiled and run as doctests.
#[doc = include_str!("../../../docs/library.md")]
#[cfg(doctest)]
pub struct LibraryDocDoctests;
