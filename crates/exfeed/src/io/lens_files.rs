//! Lens example files on disk: loading a whole set and saving one atomically.

use super::{open_bytes, AtomicOutput, InputPath, OutputOptions};
use crate::error::{Error, Result};
use crate::lens::pipe::PipeReader;
use crate::lens::{binary, is_binary_name, text, write_examples, ExampleSet};
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

/// Writes the examples `examples` reads, one at a time, as `.bex` (`binary`) or `.ex`, handing
/// the bytes to `write` example by example: memory holds one example. `.bex` starts with the
/// number of examples: `count` gives it when it is known before (a `.bex` input declares it,
/// see [`PipeReader::declared_examples`]; a text file can
/// be counted first, see [`crate::DataSet::lens_counts`]), and a different number read is an
/// error. Without it (text from a pipe) the examples are written to an unnamed temporary file
/// in the directory `spool_in` first, and copied after the header once they are counted:
/// memory still holds one example, the disk holds the examples twice until the end.
/// Returns the number of examples written.
pub fn write_lens_stream(
    examples: &mut PipeReader,
    binary: bool,
    count: Option<usize>,
    spool_in: &Path,
    write: &mut dyn FnMut(&[u8]) -> Result<()>,
) -> Result<usize> {
    let header = examples.header().clone();
    let n = match (binary, count) {
        (true, None) => {
            use std::io::{Seek, Write};
            let io = |e| Error::io(spool_in, e);
            let mut spool = std::io::BufWriter::with_capacity(
                SPOOL_BUFFER,
                tempfile::tempfile_in(spool_in).map_err(io)?,
            );
            let n = write_examples(examples, true, &header, &mut |b| {
                spool.write_all(b).map_err(io)
            })?;
            let mut spool = spool.into_inner().map_err(|e| io(e.into_error()))?;
            spool.rewind().map_err(io)?;
            write(&binary::write_header(&header, n)?)?;
            let spool = Box::new(std::io::BufReader::with_capacity(SPOOL_BUFFER, spool));
            let name = spool_in.display().to_string();
            super::copy_checked(spool, &name, super::Holding::Binary, write)?;
            return Ok(n);
        }
        (true, Some(n)) => {
            write(&binary::write_header(&header, n)?)?;
            n
        }
        (false, _) => {
            write(&text::write_header(&header)?)?;
            return write_examples(examples, false, &header, write);
        }
    };
    let written = write_examples(examples, true, &header, write)?;
    if written != n {
        return Err(Error::corrupt(
            0,
            format!(
                "{written} examples read, {n} counted before: the input changed while it was read"
            ),
        ));
    }
    Ok(written)
}

/// Buffer of the spool file of [`write_lens_stream`], each way.
const SPOOL_BUFFER: usize = 1 << 20;
