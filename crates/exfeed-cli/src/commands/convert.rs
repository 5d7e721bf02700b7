//! `exfeed convert`: between CTF, CBF and Lens `.ex`/`.bex` (Lens to CTF/CBF with a layout),
//! and to and from Parquet and Arrow IPC files, written atomically.

use super::source::{parse_format, parse_size, LayoutArgs, SourceArgs};
use crate::diag::Stderr;
use crate::progress::{Progress, Unit};
use exfeed::config::DEFAULT_CHUNK_SIZE_BYTES;
use exfeed::convert::{convert_with_progress, ConvertOptions};
use exfeed::format::FileFormat;
use exfeed::source::DataPath;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `exfeed convert`.
#[derive(clap::Args)]
pub struct Args {
    /// The file to read (`-` for standard input); left out with --corpus (or a --config whose
    /// reader names its file or corpus).
    #[arg(value_name = "INPUT")]
    pub input: Option<PathBuf>,
    /// The file to write (atomically: a temporary file renamed into place when complete); `-`
    /// writes standard output (CTF unless --to says otherwise; binary formats to a pipe or
    /// file, not a terminal). A corpus is written as one file, its shards one after the other
    /// (keys SHARD << 40 | KEY).
    #[arg(value_name = "OUTPUT")]
    pub output: Option<PathBuf>,
    /// How to read CTF input (--input, or --config [--section], and CNTK's reader parameters);
    /// --precision is also the element type of CBF output, and of the values of a corpus or Lens
    /// file written as CTF (for CBF input: the input's by default).
    #[command(flatten)]
    pub source: SourceArgs,
    /// Chunk size of CBF output, and of Parquet row groups and Arrow record batches, in bytes
    /// (suffixes K, M, G for KiB, MiB, GiB).
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value_t = DEFAULT_CHUNK_SIZE_BYTES)]
    pub chunk_size: u64,
    /// Format of the input (ctf, cbf, ex, bex, parquet, arrow); by default from its magic
    /// bytes and name.
    #[arg(long, value_parser = parse_format)]
    pub from: Option<FileFormat>,
    /// Format of the output (ctf, cbf, ex, bex, parquet, arrow); by default from its name
    /// (.parquet/.pq, .arrow/.feather/.ipc; .cbf/.bin: CBF, .ex: Lens text, .bex: Lens binary,
    /// through .gz/.bz2; anything else CTF).
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

impl Args {
    /// What to read and the file to write: INPUT OUTPUT, or OUTPUT alone with --corpus or a
    /// --config that names the data.
    pub fn paths(&self) -> anyhow::Result<(DataPath, PathBuf)> {
        match (&self.input, &self.output) {
            (Some(input), Some(output)) => {
                Ok((self.source.one(Some(input), "convert")?, output.clone()))
            }
            (Some(output), None) => Ok((self.source.one(None, "convert")?, output.clone())),
            _ => anyhow::bail!("give INPUT OUTPUT (or OUTPUT with --corpus)"),
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (data, output) = args.paths()?;
    let to = args.to.unwrap_or_else(|| FileFormat::from_name(&output));
    if output != Path::new("-") {
        return convert(&args, &data, &output, to);
    }
    // Standard output: every format is written front to back, so any may go to a pipe; binary
    // ones not to a terminal. A reader that stops early (`| head`) ends the conversion quietly.
    let binary = match to {
        FileFormat::Ctf | FileFormat::LensText => None,
        binary => Some(binary.describe()),
    };
    if let (Some(binary), true) = (binary, std::io::stdout().is_terminal()) {
        anyhow::bail!(
            "standard output is a terminal: {binary} is binary; redirect it to a file or a pipe"
        );
    }
    match convert(&args, &data, &output, to) {
        Err(_) if exfeed::io::stdout_was_closed() => Ok(ExitCode::SUCCESS),
        result => result,
    }
}

/// Converts `data` to `output` (`-`: standard output) in format `to`.
fn convert(
    args: &Args,
    data: &DataPath,
    output: &Path,
    to: FileFormat,
) -> anyhow::Result<ExitCode> {
    let mut options = ConvertOptions {
        to: Some(to),
        precision: args.source.precision,
        chunk_size: args.chunk_size,
        overwrite: args.force,
        sync: !args.no_sync,
    };
    let opened = args.source.open(data, args.from, &args.lens)?;
    if opened.is_lens() && !to.is_lens() && opened.options.lens.is_none() {
        anyhow::bail!(
            "converting a Lens example file to {} needs the network's layout: \
             --input-groups NAME:SIZE,... --target-groups NAME:SIZE,... (or a --config with \
             inputGroups and targetGroups)",
            to.describe()
        );
    }
    options.precision = Some(opened.precision);
    let mut sink = Stderr::new(opened.trace_level);
    let mut bar: Option<Progress> = None;
    let done = convert_with_progress(
        opened.data,
        output,
        &options,
        &mut sink,
        &mut |done, total| {
            bar.get_or_insert_with(|| Progress::for_stderr(Some(total), Unit::Bytes))
                .set(done)
        },
    )?;
    if let Some(bar) = bar {
        bar.finish();
    }
    Ok(finish(output, done.sequences, sink.errors))
}

/// The exit status of a conversion that wrote `sequences` to `output`: 1, with a note, when
/// `errors` were skipped (`--max-errors`).
fn finish(output: &Path, sequences: u64, errors: u64) -> ExitCode {
    if errors > 0 {
        eprintln!(
            "exfeed: {}: wrote {sequences} sequences; {errors} errors were skipped (see above)",
            output.display(),
        );
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
