//! Printing diagnostics and errors to stderr.

use exfeed::error::ReaderArg;
use exfeed::{Diagnostic, DiagnosticSink, Severity};
use std::io::Write;

/// Prints diagnostics up to a trace level (0 errors, 1 warnings too, 2 info too) to stderr,
/// and counts them by severity.
pub struct Stderr {
    trace_level: u8,
    pub errors: u64,
    pub warnings: u64,
}

impl Stderr {
    pub fn new(trace_level: u8) -> Self {
        Stderr {
            trace_level,
            errors: 0,
            warnings: 0,
        }
    }
}

impl DiagnosticSink for Stderr {
    fn report(&mut self, d: Diagnostic) {
        match d.severity {
            Severity::Error => self.errors += 1,
            Severity::Warning => self.warnings += 1,
            Severity::Info => {}
        }
        if d.severity as u8 <= self.trace_level {
            let _ = writeln!(std::io::stderr().lock(), "exfeed: {d}");
        }
    }
}

/// Standard output whose write errors say where they happened ("standard output: No space
/// left on device" under a redirect to a full disk, rather than an error with no place). The
/// kind is kept: a closed pipe is still `BrokenPipe`.
pub struct Stdout(std::io::StdoutLock<'static>);

impl Stdout {
    pub fn lock() -> Self {
        Stdout(std::io::stdout().lock())
    }
}

fn named(e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("standard output: {e}"))
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf).map_err(named)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush().map_err(named)
    }
}

/// A closed standard output (a pipe into `head`) ends the output quietly: success.
pub fn stdout_closed_is_fine(result: anyhow::Result<()>) -> anyhow::Result<std::process::ExitCode> {
    match result {
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            Ok(std::process::ExitCode::SUCCESS)
        }
        Err(e) => Err(e),
        Ok(()) => Ok(std::process::ExitCode::SUCCESS),
    }
}

/// Prints a fatal error with its chain of causes.
pub fn print_error(err: &anyhow::Error) {
    let mut stderr = std::io::stderr().lock();
    let _ = write!(stderr, "exfeed: error: {err}");
    for cause in err.chain().skip(1) {
        let _ = write!(stderr, ": {cause}");
    }
    let _ = writeln!(stderr);
}

/// Prints a library error (it carries its own location); a bad reader argument is named by its
/// flag.
pub fn print_library_error(err: &exfeed::Error) {
    let message = match err.arg_error() {
        Some(bad) => bad.message(flag),
        None => err.to_string(),
    };
    let _ = writeln!(std::io::stderr().lock(), "exfeed: error: {message}");
}

/// The flag of a reader's argument, as messages name it.
fn flag(arg: ReaderArg) -> &'static str {
    match arg {
        ReaderArg::Files => "files",
        ReaderArg::Corpus => "--corpus",
        ReaderArg::MixEpochSamples => "--mix-epoch-samples",
        ReaderArg::Inputs => "--input NAME:FORMAT:DIM[:ALIAS]",
        ReaderArg::Config => "--config",
        ReaderArg::ChunkSize => "--chunk-size",
        ReaderArg::MaxRecordSize => "--max-record-size",
        ReaderArg::Randomize => "--no-randomize",
        ReaderArg::WindowChunks => "--window-chunks",
        ReaderArg::WindowSamples => "--window-samples",
        ReaderArg::WindowBytes => "--window-bytes",
        ReaderArg::LensMode => "--lens-mode",
        ReaderArg::InputGroups => "--input-groups",
        ReaderArg::TargetGroups => "--target-groups",
        ReaderArg::Nan => "--nan",
        other => other.config_key(),
    }
}
