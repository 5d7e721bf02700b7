//! `exfeed dump`.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `exfeed dump`.
#[derive(clap::Args)]
pub struct Args {
    /// The file to print (`-` for standard input).
    pub file: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("{}: dump is not implemented yet", args.file.display())
}
