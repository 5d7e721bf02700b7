//! The `exfeed` command: a thin layer over the library.

mod commands;
mod diag;
mod progress;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Read, check, convert and feed CNTK Text/Binary Format and Lens example files.
#[derive(Parser)]
#[command(name = "exfeed", version, about, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print every sequence (or example) as one JSON object per line.
    Dump(commands::dump::Args),
    /// Validate whole files; print every problem and a summary. Exit 1 if anything is invalid.
    Check(commands::check::Args),
    /// Convert between CTF, CBF and Lens .ex/.bex (plain or compressed), Lens to CTF/CBF, and
    /// any of them to and from Parquet and Arrow IPC, atomically.
    Convert(commands::convert::Args),
    /// Feed minibatches through the reader (chunked, randomized, parallel, distributed,
    /// resumable) and print a summary.
    Read(Box<commands::read::Args>),
    /// Describe a file: a CBF header (streams, chunks, sizes), a Lens set (examples, events,
    /// groups, values) or a CTF file's summary; text, or JSON with --json.
    Info(commands::info::Args),
    /// Show what exfeed understood of a configuration file: the resolved reader of each section,
    /// every parameter with its value and where it came from. Opens no data file.
    Config(commands::config::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Interrupted (Ctrl-C, SIGTERM, SIGHUP): delete the temporary files of unfinished outputs,
    // which a signal would otherwise leave behind, and exit as an interrupted program does.
    // Without the handler (it cannot be installed) the default action still ends the process.
    let _ = ctrlc::set_handler(|| {
        exfeed::io::remove_unfinished_outputs();
        std::process::exit(130);
    });
    let result = match cli.command {
        Command::Dump(args) => commands::dump::run(args),
        Command::Check(args) => commands::check::run(args),
        Command::Info(args) => commands::info::run(args),
        Command::Read(args) => commands::read::run(*args),
        Command::Convert(args) => commands::convert::run(args),
        Command::Config(args) => commands::config::run(args),
    };
    // What the cache of URL inputs could not keep: the reads went on uncached.
    let mut warnings = diag::Stderr::new(1);
    for warning in exfeed::io::take_cache_warnings() {
        exfeed::DiagnosticSink::report(&mut warnings, warning);
    }
    match result {
        Ok(code) => code,
        // A library error: the same exit status from every command (1 invalid data, 2 usage
        // or I/O), see commands::source::exit_code_for.
        Err(err) => match err.downcast_ref::<exfeed::Error>() {
            Some(e) => {
                diag::print_library_error(e);
                ExitCode::from(commands::source::exit_code_for(e))
            }
            None => {
                diag::print_error(&err);
                ExitCode::from(2)
            }
        },
    }
}
