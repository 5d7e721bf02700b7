//! `exfeed convert` to and from Parquet and Arrow IPC files (the exfeed-arrow crate): any input
//! exfeed reads to `.parquet`/`.arrow`, and files of exfeed's Arrow schema back to CTF, CBF,
//! Parquet or Arrow IPC.

use super::convert::{finish, Args};
use crate::diag::Stderr;
use crate::with_precision;
use exfeed::cbf::CbfWriterOptions;
use exfeed::convert::{write_cbf, write_ctf};
use exfeed::format::FileFormat;
use exfeed::io::{AtomicOutput, OutputOptions};
use exfeed::{Error, SequenceBatch};
use exfeed_arrow::{write_sequences, ArrowFormat, ArrowSequences, SequenceWriter, WriteOptions};
use std::process::ExitCode;

/// A format `exfeed convert` reads or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// CTF, CBF, Lens.
    Exfeed(FileFormat),
    /// Parquet, Arrow IPC.
    Arrow(ArrowFormat),
}

impl Format {
    /// The CTF/CBF/Lens format, if this is one.
    pub fn exfeed(self) -> Option<FileFormat> {
        match self {
            Format::Exfeed(f) => Some(f),
            Format::Arrow(_) => None,
        }
    }

    fn arrow(self) -> Option<ArrowFormat> {
        match self {
            Format::Arrow(f) => Some(f),
            Format::Exfeed(_) => None,
        }
    }
}

/// `--from`/`--to` of convert: ctf, cbf, ex (or lens), bex, parquet, arrow (or ipc, feather).
pub fn parse_convert_format(s: &str) -> Result<Format, Error> {
    match s {
        "parquet" => Ok(Format::Arrow(ArrowFormat::Parquet)),
        "arrow" | "ipc" | "feather" => Ok(Format::Arrow(ArrowFormat::Ipc)),
        _ => FileFormat::parse_name(s)
            .map(Format::Exfeed)
            .ok_or_else(|| {
                Error::config(format!(
                    "unknown format '{s}' (ctf, cbf, ex, bex, parquet, arrow)"
                ))
            }),
    }
}

/// Runs the conversion when its input or output is Parquet or Arrow IPC (`None` otherwise).
pub fn convert(args: &Args) -> anyhow::Result<Option<ExitCode>> {
    let from = match args.from {
        Some(f) => f.arrow(),
        None if args.input.as_os_str() == "-" => None,
        None => ArrowFormat::of_file(&args.input),
    };
    let to = match args.to {
        Some(f) => f,
        None => ArrowFormat::from_name(&args.output)
            .map(Format::Arrow)
            .unwrap_or_else(|| Format::Exfeed(FileFormat::from_name(&args.output))),
    };
    if from.is_none() && to.arrow().is_none() {
        return Ok(None);
    }
    let options = OutputOptions {
        force: args.force,
        inputs: vec![args.input.clone()],
    };
    let write = |format| WriteOptions {
        format,
        chunk_size: args.chunk_size,
    };
    if from.is_none() {
        let opened =
            args.source
                .open(&args.input, args.from.and_then(Format::exfeed), &args.lens)?;
        let mut sink = Stderr::new(opened.trace_level);
        let format = to.arrow().expect("Arrow output");
        let sequences = with_precision!(opened.precision, T => {
            let seqs = opened.data.sequences::<T>()?;
            let out = AtomicOutput::create(&args.output, &options)?;
            let (out, sequences, _) = write_sequences(seqs, out, write(format), &mut sink)?;
            commit(out, args.no_sync)?;
            sequences
        });
        return Ok(Some(finish(args, sequences, sink.errors)));
    }
    let mut file = ArrowSequences::open(&args.input, &args.source.inputs)?;
    let specs = file.streams().to_vec();
    let precision = args.source.precision.unwrap_or(file.precision());
    let name = args.input.display().to_string();
    let out = AtomicOutput::create(&args.output, &options)?;
    let sequences = with_precision!(precision, T => {
        let fill = |b: &mut SequenceBatch<T>| file.next_batch(b);
        match to {
            Format::Arrow(format) => {
                let mut writer = SequenceWriter::<_, T>::new(out, &specs, write(format))?;
                let mut batch = SequenceBatch::<T>::new(&specs);
                while file.next_batch(&mut batch)? {
                    writer.write_batch(&batch)?;
                }
                let sequences = writer.sequences();
                commit(writer.finish()?.0, args.no_sync)?;
                sequences
            }
            Format::Exfeed(FileFormat::Cbf) => {
                let cbf = CbfWriterOptions { chunk_size: args.chunk_size, precision };
                let (out, sequences, _) = write_cbf(&specs, fill, out, cbf)?;
                commit(out, args.no_sync)?;
                sequences
            }
            Format::Exfeed(FileFormat::Ctf) => {
                let (out, sequences) = write_ctf(&specs, fill, out, &name)?;
                commit(out, args.no_sync)?;
                sequences
            }
            Format::Exfeed(other) => anyhow::bail!(
                "converting {} to {} is not supported (to CTF, CBF, Parquet or Arrow IPC)",
                file.format().describe(),
                other.describe()
            ),
        }
    });
    Ok(Some(finish(args, sequences, 0)))
}

/// Renames the finished output into place, synced to disk unless `--no-sync`.
fn commit(out: AtomicOutput, no_sync: bool) -> exfeed::Result<()> {
    if no_sync {
        out.commit_unsynced()
    } else {
        out.commit()
    }
}
