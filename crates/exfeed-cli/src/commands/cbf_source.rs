//! `dump` and `check` for CBF files: the streams come from the file's header (`--input` may
//! choose and rename them: NAME:FORMAT:DIM:ALIAS exposes the file's stream ALIAS as NAME).

use super::source::{exit_code_for, SourceArgs};
use crate::diag::print_library_error;
use exfeed::cbf::CbfFile;
use exfeed::format::FileFormat;
use exfeed::io::{InputBytes, InputPath};
use exfeed::{Element, Error, Precision, SequenceBatch, Storage};
use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;

/// Whether `file` holds CBF (by its magic bytes, else its name). Standard input is not sniffed.
pub fn is_cbf(file: &Path) -> bool {
    let mut head = [0u8; 8];
    let n = std::fs::File::open(file)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    FileFormat::detect(file, &head[..n]) == FileFormat::Cbf
}

fn open(file: &Path, source: &SourceArgs) -> Result<CbfFile<InputBytes>, Error> {
    let input = InputPath::new(file);
    let name = input.display_name();
    let mut f = CbfFile::open_input(&input)?;
    let inputs = source.cbf_inputs(file)?;
    if !inputs.is_empty() {
        f.select(&inputs).map_err(|e| e.in_file(name))?;
    }
    Ok(f)
}

fn file_precision(f: &CbfFile<InputBytes>) -> Precision {
    if f.streams().iter().all(|s| s.element == Precision::Float) {
        Precision::Float
    } else {
        Precision::Double
    }
}

fn each_chunk<T: Element>(
    f: &CbfFile<InputBytes>,
    name: &str,
    mut each: impl FnMut(&SequenceBatch<T>) -> std::io::Result<()>,
) -> Result<(), Error> {
    let mut batch = SequenceBatch::<T>::new(&f.stream_specs());
    for i in 0..f.num_chunks() {
        f.read_chunk(i, &mut batch)
            .map_err(|e| e.in_file(name.to_string()))?;
        each(&batch).map_err(Error::from)?;
    }
    Ok(())
}

/// `exfeed dump FILE.cbf`: the JSON lines of every sequence, keys 0-based sequence indices.
/// Values are read in the file's element type.
pub fn dump(file: &Path, source: &SourceArgs) -> anyhow::Result<ExitCode> {
    let name = InputPath::new(file).display_name();
    let f = match open(file, source) {
        Ok(f) => f,
        Err(e) => {
            print_library_error(&e);
            return Ok(ExitCode::from(exit_code_for(&e)));
        }
    };
    let names: Vec<String> = f.streams().iter().map(|s| s.spec.name.clone()).collect();
    let mut out = super::dump::JsonLines::new(names);
    let result = crate::with_precision!(file_precision(&f), T => {
        each_chunk::<T>(&f, &name, |batch| out.write_batch(batch))
    });
    out.finish(result)
}

/// `exfeed check FILE.cbf`: validates the header and every chunk; prints a summary. Returns
/// the exit code for this file (0 ok, 1 corrupt, 2 unreadable).
pub fn check(file: &Path, source: &SourceArgs) -> anyhow::Result<u8> {
    let name = InputPath::new(file).display_name();
    let mut out = std::io::stdout().lock();
    let f = match open(file, source) {
        Ok(f) => f,
        Err(e) => {
            writeln!(out, "error: {e}")?;
            writeln!(out, "{name}: invalid (stopped at the error above)")?;
            return Ok(exit_code_for(&e));
        }
    };
    let n = f.streams().len();
    let (mut samples, mut nnz, mut sequences) = (vec![0u64; n], vec![0u64; n], 0u64);
    let result = each_chunk::<f32>(&f, &name, |batch| {
        sequences += batch.len() as u64;
        for (i, s) in batch.streams().iter().enumerate() {
            samples[i] += s.num_samples() as u64;
            nnz[i] += s.values().len() as u64;
        }
        Ok(())
    });
    let code = match &result {
        Ok(()) => 0,
        Err(e) => {
            writeln!(out, "error: {e}")?;
            exit_code_for(e)
        }
    };
    let verdict = if code == 0 {
        "ok"
    } else {
        "invalid (stopped at the error above)"
    };
    writeln!(out, "{name}: {verdict}")?;
    writeln!(out, "  chunks: {}, sequences: {sequences}", f.num_chunks())?;
    for (i, s) in f.streams().iter().enumerate() {
        write!(
            out,
            "  input '{}' ({} {}, {}): {} samples",
            s.spec.name, s.spec.storage, s.spec.dim, s.element, samples[i]
        )?;
        if s.spec.storage == Storage::Sparse {
            write!(out, ", {} non-zeros", nnz[i])?;
        }
        writeln!(out)?;
    }
    Ok(code)
}
