//! `exfeed dump`: every sequence (or Lens example) as one JSON object per line.

use super::source::{parse_format, LayoutArgs, Opened, SourceArgs};
use crate::diag::Stderr;
use exfeed::format::FileFormat;
use exfeed::lens::materialize::Materializer;
use exfeed::{Element, Error, SequenceBatch};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `exfeed dump`.
#[derive(clap::Args)]
pub struct Args {
    /// The file to print (`-` for standard input; pipes and FIFOs are read once, as they come);
    /// by default the --config's `file =` (or `corpus =`). A --corpus is printed file after
    /// file, keys as "SHARD:KEY".
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub source: SourceArgs,
    /// Format of the input (ctf, cbf, ex, bex, parquet, arrow); by default from its magic bytes and name.
    /// Needed for a Lens text stream on standard input (`--from ex`).
    #[arg(long, value_parser = parse_format)]
    pub from: Option<FileFormat>,
    /// Lens: the network's layout (flags, or a --config's inputGroups/targetGroups) prints each
    /// example materialized (dense input and target vectors per event).
    #[command(flatten)]
    pub lens: LayoutArgs,
    /// Lens: pipe mode for a file or FIFO: examples are read and printed one at a time as
    /// they arrive, and the source is reopened and read again at its end (as Lens's PIPE
    /// mode loops) unless `--no-loop`. Standard input and other inputs that cannot be read
    /// twice are always read this way, once.
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
    let data = args.source.one(args.file.as_deref(), "dump")?;
    let opened = args.source.open(&data, args.from, &args.lens)?;
    // A corpus is dumped as sequences (Lens shards materialized with the layout).
    if opened.is_lens() && !opened.data.is_corpus() {
        return dump_lens(opened, &args);
    }
    if args.pipe || args.no_loop || args.max_examples.is_some() {
        anyhow::bail!("--pipe, --no-loop and --max-examples apply to Lens example files only");
    }
    let result = crate::with_precision!(opened.precision, T => dump_sequences::<T>(opened));
    crate::diag::stdout_closed_is_fine(result)
}

fn dump_sequences<T: Element>(opened: Opened) -> anyhow::Result<()> {
    let mut sink = Stderr::new(opened.trace_level);
    let mut sequences = opened.data.sequences::<T>()?;
    let corpus = sequences.is_corpus();
    let names: Vec<String> = sequences.streams().iter().map(|s| s.name.clone()).collect();
    let mut batch = SequenceBatch::<T>::new(sequences.streams());
    let mut out = std::io::BufWriter::with_capacity(1 << 16, crate::diag::Stdout::lock());
    let mut line = Vec::new();
    loop {
        let more = sequences.next_batch(&mut batch, &mut sink);
        let more = match more {
            Ok(more) => more,
            Err(e) => {
                out.flush()?;
                return Err(e.into());
            }
        };
        if !more {
            break;
        }
        for seq in 0..batch.len() {
            line.clear();
            exfeed::dump::write_keyed_sequence(&mut line, &batch, seq, &names, corpus);
            out.write_all(&line)?;
        }
    }
    out.flush()?;
    Ok(())
}

/// Prints the set header, then one structural JSON object per example; or, given the
/// network's layout, one materialized object per example:
/// `{"name", "freq", "proc", "events": [{"input": [...], "target": [...]}]}`.
///
/// Examples are read one at a time (memory bounded by one example). A file is read twice: first
/// for the header's example and event counts; inputs that cannot be read twice and `--pipe`
/// files are read once, each example printed and flushed as soon as it is parsed, and the
/// counts are then `null` as they are not known yet.
fn dump_lens(opened: Opened, args: &Args) -> anyhow::Result<ExitCode> {
    let streaming = args.pipe || !opened.data.is_seekable();
    let mut materializer = opened
        .options
        .lens
        .as_ref()
        .map(|l| Materializer::new(l.input_groups.clone(), l.target_groups.clone()));
    let name = opened.data.name().to_string();
    let mut line = Vec::new();
    let counts = match (streaming, &materializer) {
        (false, None) => opened.data.lens_counts()?,
        _ => None,
    };
    // Only --pipe loops (reopens the source at its end), as Lens's PIPE mode.
    let mut examples = opened.data.lens_examples(args.pipe && !args.no_loop)?;
    exfeed::dump::write_set_header(&mut line, examples.header(), counts);
    let mut w = std::io::BufWriter::new(crate::diag::Stdout::lock());
    let mut sink = Stderr::new(opened.trace_level);
    let max = args.max_examples.unwrap_or(u64::MAX);
    let result = (|| {
        if materializer.is_none() {
            w.write_all(&line)?;
            w.flush()?;
        }
        let mut i = 0u64;
        while i < max {
            let Some(ex) = examples.next_example()? else {
                break;
            };
            line.clear();
            match &mut materializer {
                None => exfeed::dump::write_example(&mut line, i as usize, &ex),
                Some(m) => exfeed::dump::write_materialized(&mut line, &ex, m, &mut sink)
                    .map_err(|e: Error| e.within(format!("example {i}")).in_file(name.clone()))?,
            }
            examples.recycle(ex);
            w.write_all(&line)?;
            if streaming {
                // A reader at the other end sees each example as soon as it is parsed.
                w.flush()?;
            }
            i += 1;
        }
        w.flush()?;
        anyhow::Ok(())
    })();
    crate::diag::stdout_closed_is_fine(result)
}
