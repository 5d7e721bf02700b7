//! `exfeed dump`.

use super::source::{exit_code_for, read_batches, SourceArgs};
use crate::diag::{print_library_error, Stderr};
use exfeed::format::FileFormat;
use exfeed::{Element, Error, SequenceBatch};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `exfeed dump`.
#[derive(clap::Args)]
pub struct Args {
    /// The file to print (`-` for standard input).
    pub file: PathBuf,
    #[command(flatten)]
    pub source: SourceArgs,
    /// Format of the input (ctf, cbf, ex, bex); by default from its magic bytes and name.
    /// Needed for a Lens stream on standard input (`--from ex`).
    #[arg(long, value_parser = super::convert::parse_format)]
    pub from: Option<FileFormat>,
    /// Lens: the network's input groups, `NAME:SIZE,...` in network order; prints each example
    /// materialized (dense input and target vectors per event).
    #[arg(long, value_name = "NAME:SIZE,...")]
    pub input_groups: Option<String>,
    /// Lens: the network's target groups, `NAME:SIZE,...` in network order.
    #[arg(long, value_name = "NAME:SIZE,...")]
    pub target_groups: Option<String>,
    /// Lens: pipe mode for a file or FIFO: examples are read and printed one at a time as
    /// they arrive, and the source is reopened and read again at its end (as Lens's PIPE
    /// mode loops) unless `--no-loop`. Standard input (`-`) is always read this way, once.
    #[arg(long)]
    pub pipe: bool,
    /// Lens pipe mode: read the source once, do not reopen it at its end.
    #[arg(long)]
    pub no_loop: bool,
    /// Lens: stop after printing this many examples (a looping pipe dump never ends otherwise).
    #[arg(long, value_name = "N")]
    pub max_examples: Option<u64>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if super::lens::is_lens(&args.file, args.from) {
        let opts = super::lens::DumpOptions {
            input_groups: args.input_groups.as_deref(),
            target_groups: args.target_groups.as_deref(),
            pipe: args.pipe,
            looping: !args.no_loop,
            max_examples: args.max_examples,
        };
        return super::lens::dump(&args.file, &opts);
    }
    if args.pipe || args.no_loop || args.max_examples.is_some() {
        anyhow::bail!("--pipe, --no-loop and --max-examples apply to Lens example files only");
    }
    if super::cbf_source::is_cbf(&args.file) {
        return super::cbf_source::dump(&args.file, &args.source);
    }
    let source = args.source.resolve(&args.file)?;
    let opts = source.ctf;
    let names: Vec<String> = opts.inputs.iter().map(|s| s.name.clone()).collect();
    let mut sink = Stderr::new(source.trace_level);
    let mut out = JsonLines::new(names);
    let result = crate::with_precision!(source.precision, T => {
        read_batches::<T>(&args.file, &opts, &mut sink, |batch| out.write_batch(batch))
    });
    out.finish(result)
}

/// The output of `dump`: one JSON line per sequence on stdout, buffered.
pub struct JsonLines {
    out: std::io::BufWriter<std::io::StdoutLock<'static>>,
    line: Vec<u8>,
    names: Vec<String>,
}

impl JsonLines {
    /// Prints the streams under these names (the batches' streams, in order).
    pub fn new(names: Vec<String>) -> Self {
        JsonLines {
            out: std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock()),
            line: Vec::new(),
            names,
        }
    }

    /// Prints every sequence of `batch`.
    pub fn write_batch<T: Element>(&mut self, batch: &SequenceBatch<T>) -> std::io::Result<()> {
        for seq in 0..batch.len() {
            self.line.clear();
            exfeed::dump::write_sequence(&mut self.line, batch, seq, &self.names);
            self.out.write_all(&self.line)?;
        }
        Ok(())
    }

    /// Flushes, and turns the outcome of the dump into the exit code.
    pub fn finish(mut self, result: Result<(), Error>) -> anyhow::Result<ExitCode> {
        let flushed = self.out.flush();
        match result {
            Ok(()) => {
                flushed?;
                Ok(ExitCode::SUCCESS)
            }
            // stdout closed (a pipe into `head`): not an error worth a message.
            Err(e) if e.kind() == exfeed::ErrorKind::Io && flushed.is_err() => {
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                print_library_error(&e);
                Ok(ExitCode::from(exit_code_for(&e)))
            }
        }
    }
}
