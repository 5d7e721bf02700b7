//! Lens example files on disk: loading a whole set and saving one atomically.

use super::{open_bytes, AtomicOutput, InputPath, OutputOptions};
use crate::error::{Error, Result};
use crate::lens::{binary, is_binary_name, text, ExampleSet};
use std::io::Write;
use std::path::Path;

/// Loads a whole example file, text or binary, compressed or not (`-` reads standard input;
/// a missing name is retried with `.gz`/`.bz2` as Lens does). Errors name the file.
pub fn load_lens(input: &InputPath) -> Result<ExampleSet> {
    let input = input.clone().with_compressed_lookup();
    let name = input.display_name();
    let bytes = open_bytes(&input)?;
    crate::lens::parse(&bytes).map_err(|e| e.in_file(name))
}

/// Saves a set atomically: binary when the name says `.bex` (see [`is_binary_name`]) or
/// `binary` is set, text otherwise; compressed when the name ends in `.gz`/`.bz2`.
pub fn save_lens(
    set: &ExampleSet,
    path: &Path,
    binary: bool,
    options: &OutputOptions,
) -> Result<()> {
    let name = path.display().to_string();
    let bytes = if binary || is_binary_name(path) {
        binary::write(set)
    } else {
        text::write(set)
    }
    .map_err(|e| e.in_file(name.clone()))?;
    let mut out = AtomicOutput::create(path, options)?;
    out.write_all(&bytes).map_err(|e| Error::io(path, e))?;
    out.commit()
}
