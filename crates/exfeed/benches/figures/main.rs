//! The end-to-end figures of docs/benchmarks.md, each against its peer measured in the same run: CTF
//! parsing (beside pyarrow's CSV reader: `scripts/bench`), CTF -> CBF conversion against that
//! parse and CBF reading against `cat`, Lens text against binary loading, and the minibatch
//! reader against the parse, with index-cache start-up and the peak memory of `exfeed read`.
//!
//! `cargo bench -p exfeed --bench figures -- WHAT [--mb N] [--runs N] ...` with WHAT one of
//! `ctf`, `cbf`, `lens`, `read` (see [`USAGE`]); `scripts/bench` runs them all. Wall-clock
//! figures on a shared machine mostly measure the scheduler, so CPU-second figures and the load
//! average are printed too. Never run by the tests.

#[path = "../common/mod.rs"]
mod common;

mod cbf;
mod ctf;
mod lens;
mod read;
mod start;
mod timing;

use std::path::PathBuf;

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

const USAGE: &str = "\
usage: cargo bench -p exfeed --bench figures -- WHAT [options]
WHAT:
  ctf   single-threaded CTF parse of generated dense and MNIST-like data (--write-to DIR also
        writes them as dense/mnist .ctf and .csv, for the pyarrow comparison of scripts/bench)
  cbf   CTF -> CBF conversion (file to file, synced and not) against the parse; reading the
        page-cached CBF file against read() and cat (--dir DIR: where the files go)
  lens  loading Lens files: two conformance files (from $EXFEED_CONFORMANCE or
        ../shared/conformance), text against binary; the set of issue 13 (97 MB .ex) and one of
        long sparse lists (--mb, default 50) as .ex, .bex, .ex.gz, .bex.gz: streaming decode,
        `exfeed check` and `exfeed dump` time and peak RSS (--write-to DIR keeps the files)
  read  the minibatch reader end to end against the parse (with the index built, indexing
        included, and without an index), index cache start-up, and peak RSS of `exfeed read`
        ($EXFEED_BIN, default target/release/exfeed)
  start rank 0 of 8 as `exfeed read` with --index full and none on a cold page cache: time to
        the first minibatch and bytes read from storage over its sweep (--mb, default 256;
        --chunk-mb; the file is removed at the end)
options:
  --mb N        size of each generated file in MB (default 64; cbf 200, lens 100)
  --runs N      runs per measure; medians are reported (default 5)
  --chunk-mb N  read, start: chunk size in MB (default 32)
  --window N    read: randomization window in chunks (default 4)
  --write-to D  ctf, read, lens: keep the generated data in directory D (start: write it there)
  --dir D       cbf: put the temporary directory in D";

/// The command line.
pub struct Args {
    what: String,
    mb: Option<usize>,
    runs: usize,
    chunk_mb: u64,
    window: u64,
    write_to: Option<PathBuf>,
    dir: Option<PathBuf>,
}

impl Args {
    /// Where to write generated data: `--write-to`, else a temporary directory (returned too,
    /// so that it lives as long as the caller keeps it).
    pub fn data_dir(&self) -> Result<(PathBuf, Option<tempfile::TempDir>)> {
        match &self.write_to {
            Some(d) => {
                std::fs::create_dir_all(d)?;
                Ok((d.clone(), None))
            }
            None => {
                let temp = tempfile::tempdir()?;
                Ok((temp.path().to_path_buf(), Some(temp)))
            }
        }
    }

    fn parse() -> Result<Option<Args>> {
        let mut args = Args {
            what: String::new(),
            mb: None,
            runs: 5,
            chunk_mb: 32,
            window: 4,
            write_to: None,
            dir: None,
        };
        // `cargo bench` adds `--bench`.
        let mut it = std::env::args().skip(1).filter(|a| a != "--bench");
        while let Some(arg) = it.next() {
            let mut value = || it.next().ok_or(format!("{arg} needs a value"));
            match arg.as_str() {
                "--mb" => args.mb = Some(value()?.parse()?),
                "--runs" => args.runs = value()?.parse::<usize>()?.max(1),
                "--chunk-mb" => args.chunk_mb = value()?.parse()?,
                "--window" => args.window = value()?.parse()?,
                "--write-to" => args.write_to = Some(value()?.into()),
                "--dir" => args.dir = Some(value()?.into()),
                "-h" | "--help" => return Ok(None),
                _ if args.what.is_empty() && !arg.starts_with('-') => args.what = arg,
                _ => return Err(format!("unexpected argument '{arg}'\n{USAGE}").into()),
            }
        }
        Ok((!args.what.is_empty()).then_some(args))
    }
}

fn main() -> Result {
    let Some(args) = Args::parse()? else {
        // Also what a plain `cargo bench` (the criterion benches) prints for this target.
        println!("{USAGE}");
        return Ok(());
    };
    match args.what.as_str() {
        "ctf" => ctf::run(&args),
        "cbf" => cbf::run(&args),
        "lens" => lens::run(&args),
        "read" => read::run(&args),
        "start" => start::run(&args),
        other => Err(format!("unknown benchmark '{other}'\n{USAGE}").into()),
    }
}

/// The `exfeed` command to measure: $EXFEED_BIN, else this workspace's release build.
pub fn exfeed_bin() -> PathBuf {
    std::env::var_os("EXFEED_BIN").map_or_else(
        || {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../target/release/exfeed"
            ))
        },
        PathBuf::from,
    )
}
