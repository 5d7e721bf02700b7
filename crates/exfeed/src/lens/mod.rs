//! Lens example files: `.ex` text and `.bex` binary.
//!
//! [`model`] is the example-set model, [`text`] parses and writes `.ex`, [`binary`] reads and
//! writes `.bex` byte for byte as Lens does. They work on byte slices; files are opened by
//! [`crate::open()`] (and [`crate::io::load_lens`], [`crate::io::save_lens`]).
//!
//! An example set says which units its events set; a network's layout (its input and target
//! groups, in order) turns each event into the vectors Lens would load ([`materialize`]);
//! [`pipe`] reads examples one at a time from a stream.
//!
//! ```
//! use exfeed::lens::materialize::{Layout, Materializer};
//! use exfeed::lens::pipe::PipeReader;
//!
//! let text = b"defI: 0\nactI: 1\n;\n\
//!     name: cat I: (vision) 0 2 T: 1;\n\
//!     name: dog 2 I: (vision) 1 T: 0  I: {vision} 1 3 T: 0 1;\n";
//! let set = exfeed::lens::parse(text)?;
//! assert_eq!(set.examples[1].name, "dog");
//! assert_eq!(set.examples[1].events.len(), 2);
//!
//! // Units count from their group's start: the dense range `(vision) 1` sets vision's first
//! // unit; the sparse range `{vision} 1 3` sets units 1 and 3 to actI; the rest keep defI.
//! let mut m = Materializer::new(Layout::parse("bias:1,vision:4")?, Layout::parse("out:2")?);
//! let (mut input, mut target) = (Vec::new(), Vec::new());
//! m.event(&set.examples[1], 1, &mut input, &mut target, &mut exfeed::error::Ignore)?;
//! assert_eq!(input, [0.0, 0.0, 1.0, 0.0, 1.0]);
//! assert_eq!(target, [0.0, 1.0]);
//!
//! // The same examples from a stream, one at a time, without looping back to the start.
//! let mut pipe = PipeReader::from_reader(Box::new(&text[..]), "examples.ex")?;
//! let mut names = Vec::new();
//! while let Some(example) = pipe.next_example()? {
//!     names.push(example.name);
//! }
//! assert_eq!(names, ["cat", "dog"]);
//! # Ok::<(), exfeed::Error>(())
//! ```

pub mod binary;
pub(crate) mod dump;
pub mod info;
pub mod materialize;
pub mod model;
pub mod pipe;
pub mod select;
pub mod text;

pub use model::{Event, Example, ExampleSet, Range, RangeKind, RangeList, SetHeader, SparseUnits};

/// Parses a Lens example file of either form (binary when it starts with the cookie). As Lens,
/// anything shorter than the cookie is refused.
pub fn parse(bytes: &[u8]) -> crate::Result<ExampleSet> {
    if bytes.len() < 4 {
        return Err(too_short());
    }
    if binary::is_binary(bytes) {
        binary::read(bytes)
    } else {
        text::parse(bytes)
    }
}

use std::path::Path;

/// Lens refuses a file shorter than its binary cookie; the whole file is the place (no byte).
pub(crate) fn too_short() -> crate::Error {
    crate::Error::new(
        crate::ErrorKind::Syntax,
        crate::Location::default(),
        "example file empty (shorter than 4 bytes)",
    )
}

/// Moves an error's byte offset (relative to a slice) by `by`, to the file's.
pub(crate) fn shifted(mut e: crate::Error, by: usize) -> crate::Error {
    if let Some(b) = e.location().byte {
        e.location_mut().byte = Some(b + by as u64);
    }
    e
}

/// Whether a file name asks for the binary form: it ends in `.bex`, before any `.gz`/`.bz2`.
pub fn is_binary_name(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let name = name
        .strip_suffix(".gz")
        .or_else(|| name.strip_suffix(".bz2"))
        .unwrap_or(&name);
    name.ends_with(".bex")
}
