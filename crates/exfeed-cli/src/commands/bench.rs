//! `exfeed bench ctf`: single-threaded CTF parsing speed on generated data (a development aid,
//! never run by the tests).

use exfeed::ctf::{CtfOptions, CtfParser};
use exfeed::error::Ignore;
use exfeed::{SequenceBatch, StreamSpec};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `exfeed bench`.
#[derive(clap::Args)]
pub struct Args {
    /// What to measure: `ctf` (parsing), or `read` (the minibatch reader end to end against
    /// single-threaded parsing, index cache start-up against re-indexing, and peak memory of
    /// `exfeed read` with a randomization window; the data file is written to --write-to or a
    /// temporary directory).
    pub what: String,
    /// `bench read`: chunk size in MB.
    #[arg(long, default_value_t = 32)]
    pub chunk_mb: u64,
    /// `bench read`: randomization window in chunks.
    #[arg(long, default_value_t = 4)]
    pub window: u64,
    /// Approximate size of each generated file in MB.
    #[arg(long, default_value_t = 64)]
    pub mb: usize,
    /// Runs per data set; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Also write the data sets (dense.ctf, mnist.ctf) and the same numbers as CSV (dense.csv,
    /// mnist.csv) into this directory.
    #[arg(long)]
    pub write_to: Option<PathBuf>,
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// (a) 200 dense floats per line with 6 decimals. Returns (ctf, csv).
pub(crate) fn dense(bytes: usize) -> (Vec<u8>, Vec<u8>) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut ctf, mut csv) = (Vec::with_capacity(bytes + 4096), Vec::with_capacity(bytes));
    let mut num = String::new();
    while ctf.len() < bytes {
        ctf.extend_from_slice(b"|x");
        for j in 0..200 {
            num.clear();
            let v = (rng.next() % 20_000_000) as f64 / 1e6 - 10.0;
            use std::fmt::Write as _;
            let _ = write!(num, "{v:.6}");
            ctf.push(b' ');
            ctf.extend_from_slice(num.as_bytes());
            if j > 0 {
                csv.push(b',');
            }
            csv.extend_from_slice(num.as_bytes());
        }
        ctf.push(b'\n');
        csv.push(b'\n');
    }
    (ctf, csv)
}

/// (b) MNIST-like: 784 small integers (mostly 0) and a one-hot sparse label of dim 10.
fn mnist(bytes: usize) -> (Vec<u8>, Vec<u8>) {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let (mut ctf, mut csv) = (Vec::with_capacity(bytes + 8192), Vec::with_capacity(bytes));
    while ctf.len() < bytes {
        ctf.extend_from_slice(b"|features");
        for j in 0..784 {
            let r = rng.next();
            let v = if r % 5 < 4 { 0 } else { (r >> 8) % 256 };
            let text = v.to_string();
            ctf.push(b' ');
            ctf.extend_from_slice(text.as_bytes());
            if j > 0 {
                csv.push(b',');
            }
            csv.extend_from_slice(text.as_bytes());
        }
        let label = rng.next() % 10;
        ctf.extend_from_slice(format!(" |labels {label}:1\n").as_bytes());
        csv.extend_from_slice(format!(",{label}\n").as_bytes());
    }
    (ctf, csv)
}

fn measure(name: &str, data: &[u8], inputs: Vec<StreamSpec>, runs: usize) -> anyhow::Result<f64> {
    let opts = CtfOptions {
        inputs,
        ..CtfOptions::default()
    };
    let mut speeds = Vec::new();
    let mut batch = SequenceBatch::<f32>::new(&opts.inputs);
    for _ in 0..runs.max(1) {
        batch.clear();
        let mut parser = CtfParser::new(opts.clone())?;
        let start = Instant::now();
        parser.parse_file(data, &mut batch, &mut Ignore)?;
        let secs = start.elapsed().as_secs_f64();
        speeds.push(data.len() as f64 / 1e6 / secs);
    }
    speeds.sort_by(|a, b| a.total_cmp(b));
    let median = speeds[speeds.len() / 2];
    println!(
        "ctf {name}: {:.1} MB, {} sequences, median {median:.0} MB/s over {} runs (min {:.0}, max {:.0})",
        data.len() as f64 / 1e6,
        batch.len(),
        speeds.len(),
        speeds[0],
        speeds[speeds.len() - 1]
    );
    Ok(median)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.what == "read" {
        return super::bench_read::run(&args);
    }
    if args.what != "ctf" {
        anyhow::bail!("bench knows 'ctf' and 'read', found '{}'", args.what);
    }
    let bytes = args.mb << 20;
    let (dense_ctf, dense_csv) = dense(bytes);
    let (mnist_ctf, mnist_csv) = mnist(bytes);
    if let Some(dir) = &args.write_to {
        std::fs::create_dir_all(dir)?;
        for (file, data) in [
            ("dense.ctf", &dense_ctf),
            ("dense.csv", &dense_csv),
            ("mnist.ctf", &mnist_ctf),
            ("mnist.csv", &mnist_csv),
        ] {
            std::fs::File::create(dir.join(file))?.write_all(data)?;
        }
    }
    measure(
        "dense (200 floats/line, 6 decimals)",
        &dense_ctf,
        vec!["x:dense:200".parse().map_err(anyhow::Error::msg)?],
        args.runs,
    )?;
    measure(
        "mnist (784 ints + sparse label)",
        &mnist_ctf,
        vec![
            "features:dense:784".parse().map_err(anyhow::Error::msg)?,
            "labels:sparse:10".parse().map_err(anyhow::Error::msg)?,
        ],
        args.runs,
    )?;
    Ok(ExitCode::SUCCESS)
}
