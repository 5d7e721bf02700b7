//! `exfeed convert`: CTF <-> CBF, written atomically.

use super::source::SourceArgs;
use crate::diag::Stderr;
use crate::progress::{Progress, Unit};
use exfeed::cbf::{CbfFile, CbfWriter, CbfWriterOptions};
use exfeed::config::DEFAULT_CHUNK_SIZE_BYTES;
use exfeed::convert::{cbf_to_ctf, ctf_to_cbf, CtfToCbfOptions};
use exfeed::format::FileFormat;
use exfeed::io::{open_bytes, AtomicOutput, InputPath, OutputOptions};
use exfeed::SequenceBatch;
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
    /// Format of the input (ctf, cbf); by default from its magic bytes and extension.
    #[arg(long, value_parser = parse_format)]
    pub from: Option<FileFormat>,
    /// Format of the output (ctf, cbf); by default from its extension (.cbf/.bin: CBF).
    #[arg(long, value_parser = parse_format)]
    pub to: Option<FileFormat>,
    /// Lens to CTF/CBF: the network's layout, and the value written for NaN (required when
    /// there is one).
    #[command(flatten)]
    pub lens: super::lens::LayoutArgs,
    /// Replace the output if it exists.
    #[arg(long)]
    pub force: bool,
    /// Rename the output into place without first syncing it to disk: faster where the disk is
    /// slow, but a machine crash soon after may leave a short or empty file under its name.
    #[arg(long)]
    pub no_sync: bool,
}

/// Renames the finished output into place, synced to disk unless `--no-sync`.
pub(crate) fn commit(out: AtomicOutput, no_sync: bool) -> exfeed::Result<()> {
    if no_sync {
        out.commit_unsynced()
    } else {
        out.commit()
    }
}

pub(crate) fn parse_format(s: &str) -> Result<FileFormat, String> {
    FileFormat::parse_name(s).ok_or_else(|| format!("unknown format '{s}' (ctf, cbf, ex, bex)"))
}

fn parse_size(s: &str) -> Result<u64, String> {
    let (digits, shift) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 20),
        Some(b'G' | b'g') => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("expected a positive size in bytes (e.g. 32M), found '{s}'"))
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if super::lens::is_lens(&args.input, args.from) {
        return super::lens::convert(&args);
    }
    let input = InputPath::new(&args.input);
    let name = input.display_name();
    let bytes = open_bytes(&input).map_err(|e| e.in_file(name.clone()))?;
    let from = args
        .from
        .unwrap_or_else(|| FileFormat::detect(&args.input, &bytes[..bytes.len().min(16)]));
    let to = args
        .to
        .unwrap_or_else(|| FileFormat::from_name(&args.output));
    let inputs = match &input {
        InputPath::File(p) => vec![p.clone()],
        InputPath::Stdin => Vec::new(),
    };
    let out = AtomicOutput::create(
        &args.output,
        &OutputOptions {
            force: args.force,
            inputs,
        },
    )?;
    let mut bar = Progress::for_stderr(Some(bytes.len() as u64), Unit::Bytes);
    let trace_level = args.source.trace_level.unwrap_or(1);
    let mut sink = Stderr::new(trace_level);
    let sequences = match (from, to) {
        (FileFormat::Ctf, FileFormat::Cbf) => {
            let source = args.source.resolve(&args.input)?;
            sink = Stderr::new(source.trace_level);
            let options = CtfToCbfOptions {
                file: name.clone(),
                ctf: source.ctf,
                cbf: CbfWriterOptions {
                    chunk_size: args.chunk_size,
                    precision: source.precision,
                },
            };
            let (out, stats) = ctf_to_cbf(&bytes, &options, out, &mut sink, |done| bar.set(done))?;
            commit(out, args.no_sync)?;
            stats.sequences
        }
        (FileFormat::Cbf, FileFormat::Ctf) => {
            let file = CbfFile::open(&*bytes).map_err(|e| e.in_file(name.clone()))?;
            let (out, stats) = cbf_to_ctf(&file, out, |done| bar.set(done))
                .map_err(|e| e.in_file(name.clone()))?;
            commit(out, args.no_sync)?;
            stats.sequences
        }
        (FileFormat::Cbf, FileFormat::Cbf) => {
            // Re-chunk and/or change the element type.
            let file = CbfFile::open(&*bytes).map_err(|e| e.in_file(name.clone()))?;
            let precision = args.source.precision.unwrap_or(file.streams()[0].element);
            let cbf = CbfWriterOptions {
                chunk_size: args.chunk_size,
                precision,
            };
            let mut writer = CbfWriter::new(out, &file.stream_specs(), cbf)?;
            let mut batch = SequenceBatch::<f64>::new(&file.stream_specs());
            for i in 0..file.num_chunks() {
                file.read_chunk(i, &mut batch)
                    .map_err(|e| e.in_file(name.clone()))?;
                writer.write_batch(&batch)?;
                let c = file.chunk_info(i);
                bar.set(c.offset + c.len);
            }
            let sequences = writer.sequences();
            commit(writer.finish()?, args.no_sync)?;
            sequences
        }
        (from, to) => anyhow::bail!(
            "converting {from:?} to {to:?} is not supported (CTF <-> CBF, CBF -> CBF)"
        ),
    };
    bar.finish();
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
