//! `exfeed convert`: between CTF, CBF and Lens `.ex`/`.bex` (Lens to CTF/CBF with a layout),
//! written atomically.

use super::source::{parse_format, parse_size, LayoutArgs, SourceArgs};
use crate::diag::Stderr;
use crate::progress::{Progress, Unit};
use exfeed::config::DEFAULT_CHUNK_SIZE_BYTES;
use exfeed::convert::{convert_with_progress, ColumnarFormat, ConvertOptions};
use exfeed::format::FileFormat;
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
    /// Format of the output (ctf, cbf, ex, bex, parquet, arrow); by default from its name
    /// (.parquet, .arrow/.feather; .cbf/.bin: CBF, .ex: Lens text, .bex: Lens binary, through
    /// .gz/.bz2; anything else CTF).
    #[arg(long, value_parser = Target::parse)]
    pub to: Option<Target>,
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

/// What `exfeed convert` writes: a format of the library, or a columnar one (recognised by
/// `--to` or the output's name before the library's formats), which the library does not write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// CTF, CBF, Lens `.ex`/`.bex`: [`exfeed::convert::convert`].
    Exfeed(FileFormat),
    /// Parquet or Arrow IPC.
    Columnar(ColumnarFormat),
}

impl Target {
    /// `--to`: a library format, or parquet, arrow.
    fn parse(s: &str) -> Result<Self, String> {
        match ColumnarFormat::parse_name(s) {
            Some(c) => Ok(Target::Columnar(c)),
            None => s
                .parse()
                .map(Target::Exfeed)
                .map_err(|_| format!("unknown format '{s}' (ctf, cbf, ex, bex, parquet, arrow)")),
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let target = args
        .to
        .unwrap_or_else(|| match ColumnarFormat::from_name(&args.output) {
            Some(c) => Target::Columnar(c),
            None => Target::Exfeed(FileFormat::from_name(&args.output)),
        });
    let to = match target {
        Target::Exfeed(format) => format,
        Target::Columnar(c) => return Err(c.unsupported(&args.output).into()),
    };
    let opened = args.source.open(&args.input, args.from, &args.lens)?;
    let is_lens = |f: FileFormat| matches!(f, FileFormat::LensText | FileFormat::LensBinary);
    if opened.is_lens() && !is_lens(to) && opened.options.lens.is_none() {
        anyhow::bail!(
            "converting a Lens example file to {} needs the network's layout: \
             --input-groups NAME:SIZE,... --target-groups NAME:SIZE,... (or a --config with \
             inputGroups and targetGroups)",
            to.describe()
        );
    }
    let options = ConvertOptions {
        to: Some(to),
        precision: Some(opened.precision),
        chunk_size: args.chunk_size,
        overwrite: args.force,
        sync: !args.no_sync,
    };
    let mut sink = Stderr::new(opened.trace_level);
    let mut bar: Option<Progress> = None;
    let done = convert_with_progress(
        opened.data,
        &args.output,
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
    if sink.errors > 0 {
        eprintln!(
            "exfeed: {}: wrote {} sequences; {} errors were skipped (see above)",
            args.output.display(),
            done.sequences,
            sink.errors
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
