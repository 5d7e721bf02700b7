//! `exfeed check`.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `exfeed check`.
#[derive(clap::Args)]
pub struct Args {
    /// The files to validate.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("{}: check is not implemented yet", args.files[0].display())
}
