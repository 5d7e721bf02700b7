//! Lens example files: `.ex` text and `.bex` binary.
//!
//! [`model`] is the example-set model, [`text`] parses and writes `.ex`, [`binary`] reads and
//! writes `.bex` byte for byte as Lens does.

pub mod binary;
pub(crate) mod dump;
pub mod info;
pub mod materialize;
pub mod model;
pub mod pipe;
pub mod select;
pub mod text;

pub use model::{Event, Example, ExampleSet, Range, RangeKind, RangeList, SetHeader, SparseUnits};

/// Parses a Lens example file of either form (binary when it starts with the cookie).
pub fn parse(bytes: &[u8]) -> crate::Result<ExampleSet> {
    text::parse(bytes)
}

use crate::io::{open_bytes, InputPath};
use std::path::{Path, PathBuf};

/// Lens's file lookup: the name as given, or, when no such file exists, the name with `.gz`
/// or `.bz2` appended (whichever exists first). Compression itself is recognised by content.
pub fn resolve(path: &Path) -> PathBuf {
    if path.exists() {
        return path.to_path_buf();
    }
    for ext in ["gz", "bz2"] {
        let mut name = path.as_os_str().to_os_string();
        name.push(".");
        name.push(ext);
        let candidate = PathBuf::from(name);
        if candidate.exists() {
            return candidate;
        }
    }
    path.to_path_buf()
}

/// Loads a whole example file, text or binary, compressed or not (`-` reads standard input;
/// a missing name is retried with `.gz`/`.bz2` as Lens does). Errors name the file.
pub fn load(input: &InputPath) -> crate::Result<ExampleSet> {
    let input = match input {
        InputPath::File(p) => InputPath::File(resolve(p)),
        InputPath::Stdin => InputPath::Stdin,
    };
    let name = input.display_name();
    let bytes = open_bytes(&input)?;
    parse(&bytes).map_err(|e| e.in_file(name))
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

/// Saves a set atomically: binary when the name says `.bex` (see [`is_binary_name`]) or
/// `binary` is set, text otherwise; compressed when the name ends in `.gz`/`.bz2`.
pub fn save(
    set: &ExampleSet,
    path: &Path,
    binary: bool,
    options: &crate::io::OutputOptions,
) -> crate::Result<()> {
    use std::io::Write;
    let name = path.display().to_string();
    let bytes = if binary || is_binary_name(path) {
        binary::write(set)
    } else {
        text::write(set)
    }
    .map_err(|e| e.in_file(name.clone()))?;
    let mut out = crate::io::AtomicOutput::create(path, options)?;
    out.write_all(&bytes)
        .map_err(|e| crate::Error::io(path, e))?;
    out.commit()
}
