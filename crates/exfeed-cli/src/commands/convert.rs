//! `exfeed convert`: between CTF, CBF and Lens `.ex`/`.bex` (Lens to CTF/CBF with a layout),
//! written atomically.

use super::source::{parse_format, parse_size, LayoutArgs, SourceArgs};
use crate::diag::Stderr;
use crate::progress::{Progress, Unit};
use exfeed::cbf::{CbfFile, CbfWriter, CbfWriterOptions};
use exfeed::config::DEFAULT_CHUNK_SIZE_BYTES;
use exfeed::convert::{cbf_to_ctf, ctf_to_cbf, CtfToCbfOptions};
use exfeed::ctf::CtfOptions;
use exfeed::format::FileFormat;
use exfeed::io::{AtomicOutput, OutputOptions};
use exfeed::SequenceBatch;
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
    /// Chunk size of CBF output in bytes (suffixes K, M, G for KiB, MiB, GiB).
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value_t = DEFAULT_CHUNK_SIZE_BYTES)]
    pub chunk_size: u64,
    /// Format of the input (ctf, cbf, ex, bex); by default from its magic bytes and name.
    #[arg(long, value_parser = parse_format)]
    pub from: Option<FileFormat>,
    /// Format of the output (ctf, cbf, ex, bex); by default from its name (.cbf/.bin: CBF,
    /// .ex: Lens text, .bex: Lens binary, through .gz/.bz2; anything else CTF).
    #[arg(long, value_parser = parse_format)]
    pub to: Option<FileFormat>,
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
fn commit(out: AtomicOutput, no_sync: bool) -> exfeed::Result<()> {
    if no_sync {
        out.commit_unsynced()
    } else {
        out.commit()
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let opened = args.source.open(&args.input, args.from, &args.lens)?;
    let from = opened.data.format();
    let to = args
        .to
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
                    limits: opened.options.limits,
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
            let mut writer = CbfWriter::new(out, &specs, cbf)?;
            let mut batch = SequenceBatch::<f64>::new(&specs);
            while seqs.next_batch(&mut batch, &mut sink)? {
                writer.write_batch(&batch)?;
            }
            let sequences = writer.sequences();
            commit(writer.finish()?, args.no_sync)?;
            sequences
        }
        (FileFormat::LensText | FileFormat::LensBinary, FileFormat::Ctf) => {
            let mut seqs = opened.data.sequences::<f32>()?;
            let specs = seqs.streams().to_vec();
            let out = AtomicOutput::create(&args.output, &options)?;
            let mut out = std::io::BufWriter::new(out);
            let mut batch = SequenceBatch::<f32>::new(&specs);
            let mut text = Vec::new();
            let mut sequences = 0;
            while seqs.next_batch(&mut batch, &mut sink)? {
                for q in 0..batch.len() {
                    text.clear();
                    exfeed::ctf::write_sequence(&mut text, &batch, q, &specs)
                        .map_err(|e| e.in_file(name.clone()))?;
                    out.write_all(&text)?;
                }
                sequences += batch.len() as u64;
            }
            commit(out.into_inner().map_err(|e| e.into_error())?, args.no_sync)?;
            sequences
        }
        (from, to) => anyhow::bail!(
            "converting {} to {} is not supported (CTF <-> CBF, CBF -> CBF, Lens -> Lens, CTF or CBF)",
            from.describe(),
            to.describe()
        ),
    };
    if sink.errors > 0 {
        eprintln!(
            "exfeed: {}: wrote {sequences} sequences; {} errors were skipped (see above)",
            args.output.display(),
            sink.errors
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
