//! `exfeed check`: validate whole files, list every problem, print each file's summary.

use super::source::{exit_code_for, parse_format, LayoutArgs, SourceArgs};
use exfeed::dataset::Summary;
use exfeed::format::FileFormat;
use exfeed::{Diagnostic, DiagnosticSink, Severity, Storage};
use std::io::Write;
use std::path::{Path, PathBuf};
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
    /// Format of the inputs (ctf, cbf, ex, bex); by default from magic bytes and names.
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
    for file in &args.source.data_files(&args.files)? {
        worst = worst.max(check(file, &args)?);
    }
    Ok(ExitCode::from(worst))
}

/// Checks one file; returns its exit status (0 ok, 1 invalid, 2 unreadable).
fn check(file: &Path, args: &Args) -> anyhow::Result<u8> {
    let mut out = crate::diag::Stdout::lock();
    let opened = match args.source.open(file, args.from, &args.lens) {
        Ok(o) => o,
        Err(e) => match e.downcast::<exfeed::Error>() {
            Ok(e) => {
                writeln!(out, "error: {e}")?;
                writeln!(
                    out,
                    "{}: invalid (stopped at the error above)",
                    file.display()
                )?;
                writeln!(out, "  errors: 1, warnings: 0")?;
                return Ok(exit_code_for(&e));
            }
            Err(e) => return Err(e),
        },
    };
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
    Ok(code)
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
            writeln!(out, "  longest example: {len} events (example {key})")?;
        }
        return Ok(());
    }
    writeln!(out, "  sequences: {}", s.sequences)?;
    if let Some((len, key)) = s.longest {
        writeln!(out, "  longest sequence: {len} samples (key {key})")?;
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
