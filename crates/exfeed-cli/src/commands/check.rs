//! `exfeed check`.

use super::source::{exit_code_for, read_batches, SourceArgs};
use exfeed::{Diagnostic, DiagnosticSink, Severity, Storage};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `exfeed check`.
#[derive(clap::Args)]
pub struct Args {
    /// The files to validate.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub source: SourceArgs,
    /// Print at most N problems per file, then how many more there were.
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub max_problems: u64,
    /// Format of the inputs (ctf, cbf, ex, bex); by default from magic bytes and names.
    #[arg(long, value_parser = super::convert::parse_format)]
    pub from: Option<exfeed::format::FileFormat>,
}

/// Prints problems up to a cap and counts them all.
struct Problems {
    trace_level: u8,
    cap: u64,
    printed: u64,
    hidden: u64,
    errors: u64,
    warnings: u64,
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
            println!("{d}");
        } else {
            self.hidden += 1;
        }
    }
}

struct Summary {
    sequences: u64,
    samples: Vec<u64>,
    nnz: Vec<u64>,
    longest: Option<(usize, u64)>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut worst = 0u8;
    for file in &args.files {
        if super::lens::is_lens(file, args.from) {
            let code = super::lens::check(file)?;
            worst = worst.max(if code == ExitCode::SUCCESS { 0 } else { 1 });
            continue;
        }
        // CBF files need no --input (their header has the streams).
        if super::cbf_source::is_cbf(file) {
            worst = worst.max(super::cbf_source::check(file, &args.source)?);
            continue;
        }
        let source = args.source.resolve(file)?;
        let mut opts = source.ctf;
        // check lists every problem; --max-errors only says how many make the file fatal to others.
        let tolerated = opts.max_errors;
        opts.max_errors = u64::MAX;
        let mut sink = Problems {
            trace_level: source.trace_level,
            cap: args.max_problems,
            printed: 0,
            hidden: 0,
            errors: 0,
            warnings: 0,
        };
        let n = opts.inputs.len();
        let mut sum = Summary {
            sequences: 0,
            samples: vec![0; n],
            nnz: vec![0; n],
            longest: None,
        };
        let result = crate::with_precision!(source.precision, T => {
            read_batches::<T>(file, &opts, &mut sink, |batch| {
                sum.sequences += batch.len() as u64;
                for (i, s) in batch.streams().iter().enumerate() {
                    sum.samples[i] += s.num_samples() as u64;
                    if s.storage() == Storage::Sparse {
                        sum.nnz[i] += s.values().len() as u64;
                    }
                }
                for q in 0..batch.len() {
                    let len = batch.sequence_length(q, None);
                    if sum.longest.map_or(true, |(l, _)| len > l) {
                        sum.longest = Some((len, batch.keys()[q]));
                    }
                }
                Ok(())
            })
        });
        let mut out = std::io::stdout().lock();
        if sink.hidden > 0 {
            writeln!(out, "... and {} more problems not shown", sink.hidden)?;
        }
        let name = file.display();
        let code = match &result {
            Err(e) => {
                writeln!(out, "error: {e}")?;
                exit_code_for(e)
            }
            Ok(()) if sink.errors > 0 => 1,
            Ok(()) => 0,
        };
        let verdict = match (code, &result) {
            (0, _) => "ok",
            (_, Ok(())) => "invalid",
            (_, Err(_)) => "invalid (stopped at the error above)",
        };
        writeln!(out, "{name}: {verdict}")?;
        writeln!(out, "  sequences: {}", sum.sequences)?;
        if let Some((len, key)) = sum.longest {
            writeln!(out, "  longest sequence: {len} samples (key {key})")?;
        }
        for (i, spec) in opts.inputs.iter().enumerate() {
            write!(
                out,
                "  input '{}' ({} {}): {} samples",
                spec.name, spec.storage, spec.dim, sum.samples[i]
            )?;
            if spec.storage == Storage::Sparse {
                write!(out, ", {} non-zeros", sum.nnz[i])?;
            }
            writeln!(out)?;
        }
        writeln!(
            out,
            "  errors: {}, warnings: {}",
            sink.errors, sink.warnings
        )?;
        if code == 1 && result.is_ok() && sink.errors <= tolerated {
            writeln!(
                out,
                "  (within --max-errors {tolerated}: reading with it would skip these)"
            )?;
        }
        worst = worst.max(code);
    }
    Ok(ExitCode::from(worst))
}
