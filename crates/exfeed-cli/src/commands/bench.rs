//! `exfeed bench ctf`: single-threaded CTF parsing speed on generated data; `exfeed bench cbf`:
//! CTF -> CBF conversion against that parse, and reading a CBF file against `cat`. Development
//! aids, never run by the tests.

use exfeed::ctf::{detect_key_mode, scan_sequences, CtfOptions, CtfParser};
use exfeed::error::Ignore;
use exfeed::{SequenceBatch, StreamSpec};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `exfeed bench`.
#[derive(clap::Args)]
pub struct Args {
    /// What to measure: `ctf` (parsing), `cbf` (conversion and reading), `read` (the
    /// minibatch reader end to end against single-threaded parsing, index cache start-up against
    /// re-indexing, and peak memory of `exfeed read` with a randomization window; the data file
    /// is written to --write-to or a temporary directory), or `lens` (loading .ex/.bex: the
    /// conformance examples simple_past_tense_1868_items.ex and hand-digits.trn.bex.gz, found
    /// through $EXFEED_CONFORMANCE or ../shared/conformance, and a generated `--mb` MB .ex with
    /// its .bex).
    pub what: String,
    /// Approximate size of each generated file in MB (default: 64 for ctf and read, 200 for cbf).
    #[arg(long)]
    pub mb: Option<usize>,
    /// `bench read`: chunk size in MB.
    #[arg(long, default_value_t = 32)]
    pub chunk_mb: u64,
    /// `bench read`: randomization window in chunks.
    #[arg(long, default_value_t = 4)]
    pub window: u64,
    /// Runs per data set; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Also write the data sets (dense.ctf, mnist.ctf) and the same numbers as CSV (dense.csv,
    /// mnist.csv) into this directory.
    #[arg(long)]
    pub write_to: Option<PathBuf>,
    /// cbf: where to put the temporary directory holding the generated files (default: the
    /// system's temporary directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
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
pub(super) fn mnist(bytes: usize) -> (Vec<u8>, Vec<u8>) {
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

/// CPU time of the calling thread: on a loaded shared machine wall-clock time mostly measures
/// the scheduler, so both are reported.
pub(super) fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

pub(super) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Single-threaded parse of `data` as `bench ctf` measures it; prints a line and returns the
/// median wall-clock and per-CPU-second throughputs in MB/s.
pub(super) fn measure(
    name: &str,
    data: &[u8],
    inputs: Vec<StreamSpec>,
    runs: usize,
) -> anyhow::Result<(f64, f64)> {
    let opts = CtfOptions {
        inputs,
        ..CtfOptions::default()
    };
    let mut speeds = Vec::new();
    let mut cpu_speeds = Vec::new();
    let mut sequences = 0;
    let mut batch = SequenceBatch::<f32>::new(&opts.inputs);
    for _ in 0..runs.max(1) {
        batch.clear();
        let mut parser = CtfParser::new(opts.clone())?;
        let cpu = thread_cpu_secs();
        let start = Instant::now();
        // As the reader and `dump` do: find sequence boundaries, then parse chunks of about
        // 1 MB into a batch that is reused (so it stays in cache). Both passes are timed.
        let mode = detect_key_mode(data, false).expect("generated data is not empty");
        let mut chunks = Vec::new();
        let (mut chunk_start, mut chunk_line) = (0u64, 1u64);
        scan_sequences(data, 0, 1, mode, |e| {
            if e.offset - chunk_start >= 1 << 20 {
                chunks.push((chunk_start, e.offset, chunk_line));
                (chunk_start, chunk_line) = (e.offset, e.line);
            }
            Ok(())
        })?;
        chunks.push((chunk_start, data.len() as u64, chunk_line));
        sequences = 0;
        for &(from, to, line) in &chunks {
            batch.clear();
            parser.parse_chunk(
                &data[from as usize..to as usize],
                from,
                line,
                mode,
                &mut batch,
                &mut Ignore,
            )?;
            sequences += batch.len();
        }
        let secs = start.elapsed().as_secs_f64();
        let cpu_secs = thread_cpu_secs() - cpu;
        speeds.push(data.len() as f64 / 1e6 / secs);
        cpu_speeds.push(data.len() as f64 / 1e6 / cpu_secs.max(1e-9));
    }
    let runs = speeds.len();
    let (wall, cpu) = (median(speeds), median(cpu_speeds));
    println!(
        "ctf {name}: {:.1} MB, {} sequences, median of {runs} runs: {wall:.0} MB/s wall-clock, {cpu:.0} MB/s per CPU-second",
        data.len() as f64 / 1e6,
        sequences,
    );
    Ok((wall, cpu))
}

/// Times loading a Lens file already in memory (decompressed): median over `runs`.
/// Returns seconds per example.
fn measure_lens(name: &str, data: &[u8], runs: usize) -> anyhow::Result<f64> {
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    let mut examples = 0;
    for _ in 0..runs.max(1) {
        let c = thread_cpu_secs();
        let t = Instant::now();
        let set = exfeed::lens::parse(data).map_err(|e| e.in_file(name.to_string()))?;
        wall.push(t.elapsed().as_secs_f64());
        cpu.push(thread_cpu_secs() - c);
        examples = set.examples.len();
    }
    let (w, c) = (median(wall).max(1e-9), median(cpu).max(1e-9));
    let mb = data.len() as f64 / 1e6;
    println!(
        "lens {name}: {mb:.1} MB, {examples} examples: {:.0} MB/s, {:.0} examples/s wall-clock; \
         {:.0} MB/s, {:.0} examples/s per CPU-second",
        mb / w,
        examples as f64 / w,
        mb / c,
        examples as f64 / c
    );
    Ok(c / examples.max(1) as f64)
}

/// A generated .ex of about `bytes`: 100 binary inputs and 20 three-decimal targets per example.
fn generated_ex(bytes: usize) -> Vec<u8> {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes + 4096);
    s.push_str(";\n");
    let mut k = 0u64;
    while s.len() < bytes {
        let _ = write!(s, "name:{{item {k}}}\nI:");
        for u in 0..100 {
            s.push_str(if (k + u) % 7 == 0 { " 1" } else { " 0" });
        }
        s.push_str("\nT:");
        for u in 0..20u64 {
            let _ = write!(s, " {:.3}", ((k * 31 + u) % 1000) as f64 / 1000.0);
        }
        s.push_str(";\n");
        k += 1;
    }
    s.into_bytes()
}

fn lens(args: &Args) -> anyhow::Result<ExitCode> {
    let dir = std::env::var_os("EXFEED_CONFORMANCE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("../shared/conformance"))
        .join("lens/examples");
    for file in [
        "spinnaker_pdp2/simple_past_tense_1868_items.ex",
        "lens_dist/hand-digits.trn.bex.gz",
    ] {
        let path = dir.join(file);
        let data = match exfeed::io::open_bytes(&exfeed::io::InputPath::new(&path)) {
            Ok(d) => d,
            Err(e) => {
                println!("lens {file}: skipped ({e})");
                continue;
            }
        };
        let per_text = measure_lens(&format!("{file} (decompressed)"), &data, args.runs)?;
        // The same examples in the other form, for the text/binary comparison.
        let set = exfeed::lens::parse(&data)?;
        let (text, binary) = (
            exfeed::lens::text::write(&set)?,
            exfeed::lens::binary::write(&set)?,
        );
        let other = if data.starts_with(&[0xaa; 4]) {
            measure_lens(&format!("{file} as .ex"), &text, args.runs)? / per_text
        } else {
            per_text / measure_lens(&format!("{file} as .bex"), &binary, args.runs)?
        };
        println!("lens {file}: binary is {other:.1}x faster than text per example");
    }
    let ex = generated_ex(args.mb.unwrap_or(100) << 20);
    let per_text = measure_lens("generated.ex", &ex, args.runs)?;
    let bex = exfeed::lens::binary::write(&exfeed::lens::parse(&ex)?)?;
    let per_bin = measure_lens("generated.bex", &bex, args.runs)?;
    println!(
        "lens generated: binary is {:.1}x faster than text per example",
        per_text / per_bin
    );
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.what.as_str() {
        "ctf" => bench_ctf(args),
        "cbf" => super::bench_cbf::run(args),
        "read" => super::bench_read::run(&args),
        "lens" => lens(&args),
        other => anyhow::bail!("bench knows 'ctf', 'cbf', 'read' and 'lens', found '{other}'"),
    }
}

fn bench_ctf(args: Args) -> anyhow::Result<ExitCode> {
    let bytes = args.mb.unwrap_or(64) << 20;
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
