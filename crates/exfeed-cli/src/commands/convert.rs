//! `exfeed convert`: CTF <-> CBF, written atomically.

use super::source::SourceArgs;
use crate::diag::Stderr;
use exfeed::cbf::{CbfFile, CbfWriter, CbfWriterOptions, DEFAULT_CHUNK_SIZE};
use exfeed::convert::{cbf_to_ctf, ctf_to_cbf};
use exfeed::format::FileFormat;
use exfeed::io::{open_bytes, AtomicOutput, InputPath, OutputOptions};
use exfeed::SequenceBatch;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

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
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value_t = DEFAULT_CHUNK_SIZE)]
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

/// The conversion's progress bar: drawn on stderr only when stderr is a terminal, and only once
/// the conversion has run longer than [`PROGRESS_DELAY`] (quick conversions print nothing).
struct Progress {
    bar: ProgressBar,
    /// Where to draw once the delay has passed (None: never, e.g. stderr is not a terminal).
    target: Option<DrawTarget>,
    start: Instant,
    delay: Duration,
}

type DrawTarget = Box<dyn FnOnce() -> ProgressDrawTarget>;

const PROGRESS_DELAY: Duration = Duration::from_secs(1);

impl Progress {
    fn for_stderr(total: u64) -> Self {
        let target: Option<DrawTarget> = if std::io::stderr().is_terminal() {
            Some(Box::new(ProgressDrawTarget::stderr))
        } else {
            None
        };
        Self::new(total, target, PROGRESS_DELAY)
    }

    fn new(total: u64, target: Option<DrawTarget>, delay: Duration) -> Self {
        // Hidden until the delay has passed: indicatif draws nothing to a hidden target.
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
        bar.set_style(
            ProgressStyle::with_template(
                "{bar:30} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} ETA {eta}",
            )
            .expect("a valid template"),
        );
        Progress {
            bar,
            target,
            start: Instant::now(),
            delay,
        }
    }

    /// Records the input bytes done; shows the bar if the conversion has become long.
    fn set(&mut self, done: u64) {
        self.bar.set_position(done);
        if self.target.is_some() && self.start.elapsed() >= self.delay {
            if let Some(target) = self.target.take() {
                self.bar.set_draw_target(target());
                // Keeps rate and ETA moving between (possibly slow) updates.
                self.bar.enable_steady_tick(Duration::from_millis(500));
            }
        }
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
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
    let mut bar = Progress::for_stderr(bytes.len() as u64);
    let trace_level = args.source.trace_level.unwrap_or(1);
    let mut sink = Stderr::new(trace_level);
    let sequences = match (from, to) {
        (FileFormat::Ctf, FileFormat::Cbf) => {
            let source = args.source.resolve(&args.input)?;
            sink = Stderr::new(source.trace_level);
            let opts = source.ctf;
            let cbf = CbfWriterOptions {
                chunk_size: args.chunk_size,
                precision: source.precision,
            };
            let (out, stats) = ctf_to_cbf(&bytes, &name, &opts, &cbf, out, &mut sink, |done| {
                bar.set(done)
            })?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A terminal that records what is written to it.
    #[derive(Debug, Clone, Default)]
    struct Recorder(Arc<Mutex<String>>);

    impl indicatif::TermLike for Recorder {
        fn width(&self) -> u16 {
            80
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.0.lock().unwrap().push_str(s);
            self.0.lock().unwrap().push('\n');
            Ok(())
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.0.lock().unwrap().push_str(s);
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn progress(term: &Recorder, delay: Duration) -> Progress {
        let term = term.clone();
        Progress::new(
            1000,
            Some(Box::new(move || {
                ProgressDrawTarget::term_like(Box::new(term))
            })),
            delay,
        )
    }

    #[test]
    fn bar_gets_the_terminal_once_the_delay_has_passed() {
        let term = Recorder::default();
        let mut p = progress(&term, Duration::ZERO);
        assert!(p.bar.is_hidden());
        p.set(500);
        // The bar now draws to the terminal (what it draws is indicatif's business).
        assert!(!p.bar.is_hidden());
        p.finish();
    }

    #[test]
    fn quick_conversions_draw_nothing() {
        let term = Recorder::default();
        // A delay no test run reaches.
        let mut p = progress(&term, Duration::from_secs(3600));
        for done in [0, 500, 1000] {
            p.set(done);
            p.bar.tick();
        }
        assert!(p.bar.is_hidden());
        p.finish();
        assert_eq!(*term.0.lock().unwrap(), "");
    }

    #[test]
    fn no_terminal_no_bar() {
        let mut p = Progress::new(1000, None, Duration::ZERO);
        p.set(500);
        assert!(p.bar.is_hidden());
        p.finish();
    }
}
