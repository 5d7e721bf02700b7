//! `exfeed check`: validate whole files, list every problem, print each file's summary.

use super::source::{exit_code_for, parse_format, LayoutArgs, Opened, SourceArgs};
use exfeed::dataset::Summary;
use exfeed::format::FileFormat;
use exfeed::source::DataPath;
use exfeed::{Diagnostic, DiagnosticSink, Severity, Storage};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `exfeed check`.
#[derive(clap::Args)]
pub struct Args {
    /// The files to validate (`-` for standard input); by default the --config's `file =`.
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub source: SourceArgs,
    /// Print at most N problems per file, then how many more there were.
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub max_problems: u64,
    /// Format of the inputs (ctf, cbf, ex, bex, parquet, arrow); by default from magic bytes and names.
    #[arg(long, value_parser = parse_format)]
    pub from: Option<FileFormat>,
    /// Lens files: the network's layout checks every example against it too.
    #[command(flatten)]
    pub lens: LayoutArgs,
}

/// Prints problems up to a cap and counts them all.
struct Problems {
    trace_level: u8,
    cap: u64,
    printed: u64,
    hidden: u64,
    errors: u64,
    warnings: u64,
    /// The first failed write to standard output.
    write_error: Option<std::io::Error>,
}

impl DiagnosticSink for Problems {
    fn report(&mut self, d: Diagnostic) {
        match d.severity {
            Severity::Error => self.errors += 1,
            Severity::Warning => self.warnings += 1,
            Severity::Info => {}
        }
        if d.severity as u8 > self.trace_level {
            return;
        }
        if self.printed < self.cap {
            self.printed += 1;
            if let Err(e) = writeln!(crate::diag::Stdout::lock(), "{d}") {
                self.write_error.get_or_insert(e);
            }
        } else {
            self.hidden += 1;
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut worst = 0u8;
    for data in &args.source.data(&args.files)? {
        worst = worst.max(check(data, &args)?);
    }
    Ok(ExitCode::from(worst))
}

/// What one check found: its exit status (0 ok, 1 invalid, 2 unreadable), its summary (when
/// the input could be opened) and its problems.
struct Checked {
    code: u8,
    summary: Option<Summary>,
    errors: u64,
    warnings: u64,
}

/// Checks a file, or every file of a corpus and then the corpus as a whole; returns the exit
/// status.
fn check(data: &DataPath, args: &Args) -> anyhow::Result<u8> {
    let opened = match args.source.open(data, args.from, &args.lens) {
        Ok(o) => o,
        Err(e) => return Ok(report_unopened(&data.to_string(), e)?.code),
    };
    if !opened.data.is_corpus() {
        return Ok(check_one(opened, args)?.code);
    }
    // File by file, each reported as a file is; then the totals.
    let name = opened.data.name().to_string();
    let (trace_level, precision) = (opened.trace_level, opened.precision);
    let tolerated = opened.options.max_errors;
    let (mut files, mut invalid, mut errors, mut warnings, mut worst) = (0, 0, 0, 0, 0u8);
    let (total, reported) = opened.data.summarize_shards(|file, shard| {
        files += 1;
        let checked = match shard {
            Ok(data) => {
                let shard = Opened {
                    options: data.options().clone(),
                    data,
                    precision,
                    trace_level,
                };
                check_one(shard, args)
            }
            Err(e) => report_unopened(&file.display().to_string(), e.into()),
        };
        match checked {
            Ok(checked) => {
                invalid += u64::from(checked.code != 0);
                errors += checked.errors;
                warnings += checked.warnings;
                worst = worst.max(checked.code);
                (checked.summary, Ok(()))
            }
            Err(e) => (None, Err(e)),
        }
    });
    reported?;
    let mut out = crate::diag::Stdout::lock();
    let verdict = match invalid {
        0 => "ok".to_string(),
        n => format!("invalid ({n} of {files} files)"),
    };
    writeln!(out, "corpus {name}: {verdict}")?;
    writeln!(out, "  files: {files}")?;
    write_summary(&mut out, &total)?;
    writeln!(out, "  errors: {errors}, warnings: {warnings}")?;
    if worst == 1 && invalid > 0 && errors <= tolerated {
        writeln!(
            out,
            "  (within --max-errors {tolerated}: reading with it would skip these)"
        )?;
    }
    Ok(worst)
}

/// Reports an input that could not be opened: its error, and it as invalid.
fn report_unopened(name: &str, e: anyhow::Error) -> anyhow::Result<Checked> {
    let e = e.downcast::<exfeed::Error>()?;
    let mut out = crate::diag::Stdout::lock();
    writeln!(out, "error: {e}")?;
    writeln!(out, "{name}: invalid (stopped at the error above)")?;
    writeln!(out, "  errors: 1, warnings: 0")?;
    Ok(Checked {
        code: exit_code_for(&e),
        summary: None,
        errors: 1,
        warnings: 0,
    })
}

/// Checks one opened file and reports it.
fn check_one(opened: Opened, args: &Args) -> anyhow::Result<Checked> {
    let mut out = crate::diag::Stdout::lock();
    // check lists every problem; --max-errors only says how many make the file fatal to others.
    let tolerated = opened.options.max_errors;
    let mut data = opened.data;
    data.set_max_errors(u64::MAX);
    let mut sink = Problems {
        trace_level: opened.trace_level,
        cap: args.max_problems,
        printed: 0,
        hidden: 0,
        errors: 0,
        warnings: 0,
        write_error: None,
    };
    let outcome = crate::with_precision!(opened.precision, T => data.summary::<T>(&mut sink));
    if let Some(e) = sink.write_error.take() {
        return Err(e.into());
    }
    if sink.hidden > 0 {
        writeln!(out, "... and {} more problems not shown", sink.hidden)?;
    }
    let code = match &outcome.result {
        Err(e) => {
            writeln!(out, "error: {e}")?;
            // The error that stopped the check is one more.
            sink.errors += 1;
            exit_code_for(e)
        }
        Ok(_) if sink.errors > 0 => 1,
        Ok(_) => 0,
    };
    let verdict = match (code, &outcome.result) {
        (0, _) => "ok",
        (_, Ok(_)) => "invalid",
        (_, Err(_)) => "invalid (stopped at the error above)",
    };
    writeln!(out, "{}: {verdict}", outcome.summary.name)?;
    write_summary(&mut out, &outcome.summary)?;
    writeln!(
        out,
        "  errors: {}, warnings: {}",
        sink.errors, sink.warnings
    )?;
    if code == 1 && outcome.result.is_ok() && sink.errors <= tolerated {
        writeln!(
            out,
            "  (within --max-errors {tolerated}: reading with it would skip these)"
        )?;
    }
    Ok(Checked {
        code,
        summary: Some(outcome.summary),
        errors: sink.errors,
        warnings: sink.warnings,
    })
}

/// The summary lines of `check` (and `info` of a CTF file).
pub fn write_summary(out: &mut impl Write, s: &Summary) -> std::io::Result<()> {
    if let Some(lens) = &s.lens {
        writeln!(
            out,
            "  examples: {}, events: {}",
            lens.examples, lens.events
        )?;
        if let Some((len, key)) = s.longest {
            writeln!(
                out,
                "  longest example: {len} events (example {})",
                key_text(s, key)
            )?;
        }
        return Ok(());
    }
    writeln!(out, "  sequences: {}", s.sequences)?;
    if let Some((len, key)) = s.longest {
        writeln!(
            out,
            "  longest sequence: {len} samples (key {})",
            key_text(s, key)
        )?;
    }
    for st in &s.streams {
        write!(
            out,
            "  input '{}' ({} {}",
            st.spec.name, st.spec.storage, st.spec.dim
        )?;
        if let Some(p) = st.stored {
            write!(out, ", {p}")?;
        }
        write!(out, "): {} samples", st.samples)?;
        if st.spec.storage == Storage::Sparse {
            write!(out, ", {} non-zeros", st.non_zeros)?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// A key as the summary's data names it: `SHARD:KEY` in a corpus.
pub fn key_text(s: &Summary, key: u64) -> String {
    if s.corpus {
        let (shard, key) = exfeed::source::split_corpus_key(key);
        format!("{shard}:{key}")
    } else {
        key.to_string()
    }
}
