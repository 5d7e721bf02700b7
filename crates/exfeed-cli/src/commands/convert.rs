//! `exfeed convert`: between CTF, CBF and Lens `.ex`/`.bex` (Lens to CTF/CBF with a layout),
//! written atomically.

use super::arrow::{parse_convert_format, Format};
use super::source::{parse_size, LayoutArgs, SourceArgs};
use crate::diag::Stderr;
use crate::progress::{Progress, Unit};
use exfeed::cbf::{CbfFile, CbfWriter, CbfWriterOptions};
use exfeed::config::DEFAULT_CHUNK_SIZE_BYTES;
use exfeed::convert::{cbf_to_ctf, ctf_to_cbf, CtfToCbfOptions};
use exfeed::ctf::CtfOptions;
use exfeed::format::FileFormat;
use exfeed::io::{AtomicOutput, OutputOptions};
use exfeed::{SequenceBatch, StreamSpec};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `exfeed convert`.
#[derive(clap::Args)]
pub struct Args {
    /// The file to read (`-` for standard input).
    pub input: PathBuf,
    /// The file to write (atomically: a temporary file renamed into place when complete).
    pub output: PathBuf,
    /// How to read CTF input (--input, or --config [--section], and CNTK's reader parameters);
    /// --precision is also the element type of CBF output (for CBF input: the input's by default).
    #[command(flatten)]
    pub source: SourceArgs,
    /// Chunk size of CBF output (and of Parquet row groups and Arrow record batches) in bytes (suffixes K, M, G for KiB, MiB, GiB).
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value_t = DEFAULT_CHUNK_SIZE_BYTES)]
    pub chunk_size: u64,
    /// Format of the input (ctf, cbf, ex, bex, parquet, arrow); by default from its magic
    /// bytes and name.
    #[arg(long, value_parser = parse_convert_format)]
    pub from: Option<Format>,
    /// Format of the output (ctf, cbf, ex, bex, parquet, arrow); by default from its name
    /// (.cbf/.bin: CBF, .ex: Lens text, .bex: Lens binary, through .gz/.bz2; .parquet/.pq:
    /// Parquet; .arrow/.feather/.ipc: Arrow IPC file; anything else CTF).
    #[arg(long, value_parser = parse_convert_format)]
    pub to: Option<Format>,
    /// Lens to CTF/CBF: the network's layout, and the value written for NaN (required when
    /// there is one).
    #[command(flatten)]
    pub lens: LayoutArgs,
    /// Replace the output if it exists.
    #[arg(long)]
    pub force: bool,
    /// Rename the output into place without first syncing it to disk: faster where the disk is
    /// slow, but a machine crash soon after may leave a short or empty file under its name.
    #[arg(long)]
    pub no_sync: bool,
}

/// Renames the finished output into place, synced to disk unless `--no-sync`.
pub fn commit(out: AtomicOutput, no_sync: bool) -> exfeed::Result<()> {
    if no_sync {
        out.commit_unsynced()
    } else {
        out.commit()
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(code) = super::arrow::convert(&args)? {
        return Ok(code);
    }
    let opened = args
        .source
        .open(&args.input, args.from.and_then(Format::exfeed), &args.lens)?;
    let from = opened.data.format();
    let to = args
        .to
        .and_then(Format::exfeed)
        .unwrap_or_else(|| FileFormat::from_name(&args.output));
    let is_lens = |f: FileFormat| matches!(f, FileFormat::LensText | FileFormat::LensBinary);
    let inputs = opened
        .data
        .input()
        .path()
        .map(|p| vec![p.to_path_buf()])
        .unwrap_or_default();
    let options = OutputOptions {
        force: args.force,
        inputs,
    };
    if is_lens(from) && is_lens(to) {
        let set = opened.data.lens_set()?;
        exfeed::io::save_lens(&set, &args.output, to == FileFormat::LensBinary, &options)?;
        return Ok(ExitCode::SUCCESS);
    }
    if is_lens(from) && opened.options.lens.is_none() {
        anyhow::bail!(
            "converting a Lens example file to {} needs the network's layout: \
             --input-groups NAME:SIZE,... --target-groups NAME:SIZE,... (or a --config with \
             inputGroups and targetGroups)",
            to.describe()
        );
    }
    let name = opened.data.name().to_string();
    let mut sink = Stderr::new(opened.trace_level);
    let precision = opened.precision;
    let sequences = match (from, to) {
        (FileFormat::Ctf, FileFormat::Cbf) => {
            let bytes = opened.data.into_bytes()?;
            let out = AtomicOutput::create(&args.output, &options)?;
            let mut bar = Progress::for_stderr(Some(bytes.len() as u64), Unit::Bytes);
            let convert = CtfToCbfOptions {
                file: name.clone(),
                ctf: CtfOptions {
                    inputs: opened.options.inputs.clone(),
                    skip_sequence_ids: opened.options.skip_sequence_ids,
                    max_errors: opened.options.max_errors,
                },
                cbf: CbfWriterOptions {
                    chunk_size: args.chunk_size,
                    precision,
                },
            };
            let (out, stats) =
                ctf_to_cbf(&bytes, &convert, out, &mut sink, |done| bar.set(done))?;
            commit(out, args.no_sync)?;
            bar.finish();
            stats.sequences
        }
        (FileFormat::Cbf, FileFormat::Ctf) => {
            let bytes = opened.data.into_bytes()?;
            let out = AtomicOutput::create(&args.output, &options)?;
            let mut bar = Progress::for_stderr(Some(bytes.len() as u64), Unit::Bytes);
            let file = CbfFile::open(&*bytes).map_err(|e| e.in_file(name.clone()))?;
            let (out, stats) = cbf_to_ctf(&file, out, |done| bar.set(done))
                .map_err(|e| e.in_file(name.clone()))?;
            commit(out, args.no_sync)?;
            bar.finish();
            stats.sequences
        }
        (FileFormat::Cbf | FileFormat::LensText | FileFormat::LensBinary, FileFormat::Cbf) => {
            // Re-chunk and/or change the element type; or a materialized Lens file.
            let precision = args.source.precision.unwrap_or(precision);
            let mut seqs = opened.data.sequences::<f64>()?;
            let specs = seqs.streams().to_vec();
            let out = AtomicOutput::create(&args.output, &options)?;
            let cbf = CbfWriterOptions {
                chunk_size: args.chunk_size,
                precision,
            };
            write_cbf(&specs, |b| seqs.next_batch(b, &mut sink), out, cbf, args.no_sync)?
        }
        (FileFormat::LensText | FileFormat::LensBinary, FileFormat::Ctf) => {
            let mut seqs = opened.data.sequences::<f32>()?;
            let specs = seqs.streams().to_vec();
            let out = AtomicOutput::create(&args.output, &options)?;
            write_ctf(&specs, |b| seqs.next_batch(b, &mut sink), out, &name, args.no_sync)?
        }
        (from, to) => anyhow::bail!(
            "converting {} to {} is not supported (CTF <-> CBF, CBF -> CBF, Lens -> Lens, CTF or CBF)",
            from.describe(),
            to.describe()
        ),
    };
    Ok(finish(&args, sequences, sink.errors))
}

/// The exit status of a conversion that wrote `sequences`: 1, with a note, when `errors` were
/// skipped (`--max-errors`).
pub fn finish(args: &Args, sequences: u64, errors: u64) -> ExitCode {
    if errors > 0 {
        eprintln!(
            "exfeed: {}: wrote {sequences} sequences; {errors} errors were skipped (see above)",
            args.output.display(),
        );
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// Writes the sequences `fill` gives (batches of `specs`) to `out` as CBF, and commits it;
/// returns the number of sequences.
pub fn write_cbf<T: exfeed::Element>(
    specs: &[StreamSpec],
    mut fill: impl FnMut(&mut SequenceBatch<T>) -> exfeed::Result<bool>,
    out: AtomicOutput,
    options: CbfWriterOptions,
    no_sync: bool,
) -> exfeed::Result<u64> {
    let mut writer = CbfWriter::new(out, specs, options)?;
    let mut batch = SequenceBatch::<T>::new(specs);
    while fill(&mut batch)? {
        writer.write_batch(&batch)?;
    }
    let sequences = writer.sequences();
    commit(writer.finish()?, no_sync)?;
    Ok(sequences)
}

/// Writes the sequences `fill` gives (batches of `specs`) to `out` as CTF (each sequence's key
/// its id, each stream under its alias if any), and commits it; returns the number of
/// sequences. `name` is the input's, for errors.
pub fn write_ctf<T: exfeed::Element>(
    specs: &[StreamSpec],
    mut fill: impl FnMut(&mut SequenceBatch<T>) -> exfeed::Result<bool>,
    out: AtomicOutput,
    name: &str,
    no_sync: bool,
) -> exfeed::Result<u64> {
    let mut out = std::io::BufWriter::new(out);
    let mut batch = SequenceBatch::<T>::new(specs);
    let mut text = Vec::new();
    let mut sequences = 0;
    while fill(&mut batch)? {
        for q in 0..batch.len() {
            text.clear();
            exfeed::ctf::write_sequence(&mut text, &batch, q, specs)
                .map_err(|e| e.in_file(name.to_string()))?;
            out.write_all(&text)?;
        }
        sequences += batch.len() as u64;
    }
    commit(out.into_inner().map_err(|e| e.into_error())?, no_sync)?;
    Ok(sequences)
}
