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

/// The examples of [`write_lens_stream`](crate::io::write_lens_stream) without the header: the
/// number written.
pub(crate) fn write_examples(
    examples: &mut pipe::PipeReader,
    binary: bool,
    header: &SetHeader,
    write: &mut dyn FnMut(&[u8]) -> crate::Result<()>,
) -> crate::Result<usize> {
    let mut out = Vec::new();
    let mut n = 0;
    while let Some(ex) = examples.next_example()? {
        if binary {
            binary::write_example(&mut out, &ex, header)
        } else {
            text::write_example(&mut out, &ex, header)
        }
        .map_err(|e| e.in_context(format!("example {n}")))?;
        write(&out)?;
        out.clear();
        examples.recycle(ex);
        n += 1;
    }
    Ok(n)
}

/// Sets `out` to `bytes` as text, invalid UTF-8 replaced (checked once; valid text, nearly
/// always the case for names, is copied without an allocation).
pub(crate) fn set_lossy(out: &mut String, bytes: &[u8]) {
    out.clear();
    out.push_str(&String::from_utf8_lossy(bytes));
}

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
pub fn is_binary_name(path: &std::path::Path) -> bool {
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

/// `what` (an example, the set header) goes on past the record limit `max` at byte `at`.
pub(crate) fn longer_than_a_record(what: &str, at: u64, max: u64, text: bool) -> crate::Error {
    crate::Error::invalid(
        at,
        format!(
            "{what} is longer than the maximum record size ({max} bytes){}",
            if text { " or never ends" } else { "" }
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_writing_equals_writing_the_whole_set() {
        let src = b"max:2;\nname:a 2 I: 1 2 T: 0;\nname:b [0] t: 3 i: 4;\n";
        let set = text::parse(src).unwrap();
        let expected = [text::write(&set).unwrap(), binary::write(&set).unwrap()];
        let spool = tempfile::tempdir().unwrap();
        let open = |bytes: &[u8]| {
            pipe::PipeReader::from_reader(Box::new(std::io::Cursor::new(bytes.to_vec())), "x")
                .unwrap()
        };
        for input in [src.to_vec(), expected[1].clone()] {
            for (binary, want) in [(false, &expected[0]), (true, &expected[1])] {
                // The count known before (declared or counted), or not (spooled).
                for count in [open(&input).declared_examples().or(Some(2)), None] {
                    let mut out = Vec::new();
                    let n = crate::io::write_lens_stream(
                        &mut open(&input),
                        binary,
                        count,
                        spool.path(),
                        &mut |b| {
                            out.extend_from_slice(b);
                            Ok(())
                        },
                    )
                    .unwrap();
                    assert_eq!((n, &out), (2, want));
                }
            }
        }
        // The spool is an unnamed file: nothing is left in its directory.
        assert_eq!(std::fs::read_dir(spool.path()).unwrap().count(), 0);
        // A count given must be the right one.
        let mut sink = |_: &[u8]| Ok(());
        let e =
            crate::io::write_lens_stream(&mut open(src), true, Some(3), spool.path(), &mut sink)
                .unwrap_err();
        assert!(e.message().contains("2 examples read, 3 counted"), "{e}");
    }
}
