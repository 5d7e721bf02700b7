//! exfeed reads, checks, converts and feeds to training the example-file formats of CNTK and
//! Lens: the CNTK Text Format (CTF), the CNTK Binary Format (CBF) and Lens example files (`.ex`
//! text, `.bex` binary).
//!
//! Layout: pure parsing cores per format ([`ctf`], [`cbf`], [`lens`]) that work on byte slices
//! and never open a file; the [`io`] layer (memory maps, standard input, compression, atomic
//! output) above them; [`config`] for CNTK's configuration syntax and its TOML form; and the
//! minibatch [`reader`] on top. All decoders produce [`batch::SequenceBatch`]es and report
//! problems as [`error::Error`]s and [`error::Diagnostic`]s with file, line, column and byte.
#![deny(missing_docs)]

pub mod batch;
pub mod cbf;
pub mod config;
pub mod convert;
pub mod ctf;
pub mod dataset;
pub mod dump;
pub mod element;
pub mod error;
pub mod format;
pub mod io;
mod json;
pub mod lens;
pub mod limits;
pub mod reader;
pub mod stream;

pub use batch::{SequenceBatch, StreamData, StreamParts};
pub use dataset::{open, DataSet, LensLayout, OpenOptions, Sequences, Summary};
pub use element::{Element, Precision};
pub use error::{Diagnostic, DiagnosticSink, Error, ErrorKind, Location, Result, Severity};
pub use stream::{Storage, StreamSpec};

/// The README's Rust examples, compiled and run as doctests.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
