//! `exfeed bench cbf`: (i) CTF -> CBF conversion, to a real file through [`AtomicOutput`] as
//! `exfeed convert` does, against the single-threaded parse of `bench ctf`; (ii) reading the
//! resulting page-cached CBF file into per-stream buffers against plain `read` and `cat`.

use super::bench::{measure, median, mnist, Args};
use exfeed::cbf::{CbfFile, CbfWriterOptions};
use exfeed::convert::ctf_to_cbf;
use exfeed::ctf::CtfOptions;
use exfeed::io::{open_bytes, AtomicOutput, InputPath, OutputOptions};
use exfeed::{SequenceBatch, StreamSpec};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

/// CPU time of the whole process (all threads), to see whether conversion uses every core.
fn process_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

/// One conversion as the CLI does it: map the input, write through an atomic output, commit.
/// Returns (wall seconds, process CPU seconds, chunks written, output size, wall seconds and
/// CPU seconds before the commit, which syncs the file to disk and renames it into place).
fn convert_once(
    ctf: &Path,
    cbf: &Path,
    opts: &CtfOptions,
) -> anyhow::Result<(f64, f64, u64, u64, f64, f64)> {
    let cpu = process_cpu_secs();
    let start = Instant::now();
    let input = InputPath::new(ctf);
    let bytes = open_bytes(&input)?;
    let out = AtomicOutput::create(
        cbf,
        &OutputOptions {
            force: true,
            inputs: vec![ctf.to_path_buf()],
        },
    )?;
    let (out, stats) = ctf_to_cbf(
        &bytes,
        &input.display_name(),
        opts,
        &CbfWriterOptions::default(),
        out,
        &mut Vec::new(),
        |_| {},
    )?;
    let (pre_secs, pre_cpu) = (start.elapsed().as_secs_f64(), process_cpu_secs() - cpu);
    out.commit()?;
    let secs = start.elapsed().as_secs_f64();
    let cpu_secs = process_cpu_secs() - cpu;
    Ok((
        secs,
        cpu_secs,
        stats.chunks,
        std::fs::metadata(cbf)?.len(),
        pre_secs,
        pre_cpu,
    ))
}

/// Reads every chunk of the CBF file into a reused batch (per-stream buffers); returns seconds
/// and the number of samples seen (so the work cannot be skipped).
fn read_cbf(path: &Path) -> anyhow::Result<(f64, u64)> {
    let start = Instant::now();
    let file = CbfFile::open_input(&InputPath::new(path))?;
    let mut batch = SequenceBatch::<f32>::new(&file.stream_specs());
    let mut samples = 0u64;
    for i in 0..file.num_chunks() {
        file.read_chunk(i, &mut batch)?;
        samples += batch
            .streams()
            .iter()
            .map(|s| s.num_samples() as u64)
            .sum::<u64>();
    }
    Ok((start.elapsed().as_secs_f64(), std::hint::black_box(samples)))
}

/// What `cat FILE > /dev/null` does in-process: `read` into one reused buffer.
fn read_plain(path: &Path, buf: &mut [u8]) -> anyhow::Result<f64> {
    let start = Instant::now();
    let mut f = std::fs::File::open(path)?;
    let mut total = 0usize;
    loop {
        let n = f.read(buf)?;
        if n == 0 {
            break;
        }
        total += n;
    }
    std::hint::black_box(total);
    Ok(start.elapsed().as_secs_f64())
}

/// The real `cat`, stdout to /dev/null, spawn included.
fn run_cat(path: &Path) -> anyhow::Result<f64> {
    let start = Instant::now();
    let status = Command::new("cat")
        .arg(path)
        .stdout(Stdio::null())
        .status()?;
    anyhow::ensure!(status.success(), "cat failed: {status}");
    Ok(start.elapsed().as_secs_f64())
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let runs = args.runs.max(1);
    let size = args.mb.unwrap_or(200) << 20;
    let dir = match &args.dir {
        Some(d) => tempfile::tempdir_in(d)?,
        None => tempfile::tempdir()?,
    };
    let ctf_path = dir.path().join("mnist.ctf");
    let cbf_path = dir.path().join("mnist.cbf");
    let (ctf, _csv) = mnist(size);
    drop(_csv);
    std::fs::File::create(&ctf_path)?.write_all(&ctf)?;
    let inputs: Vec<StreamSpec> = vec![
        "features:dense:784".parse().map_err(anyhow::Error::msg)?,
        "labels:sparse:10".parse().map_err(anyhow::Error::msg)?,
    ];
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "cbf bench: {:.1} MB of MNIST-like CTF (784 ints + sparse label) in {}, {cores} cores, median of {runs} runs",
        mb(ctf.len() as u64),
        dir.path().display()
    );

    // (i) parse vs conversion.
    let (parse_wall, parse_cpu) = measure(
        "parse, single-threaded (as bench ctf)",
        &ctf,
        inputs.clone(),
        runs,
    )?;
    let in_mb = mb(ctf.len() as u64);
    drop(ctf);
    let opts = CtfOptions {
        inputs,
        ..CtfOptions::default()
    };
    let (mut speeds, mut ratios) = (Vec::new(), Vec::new());
    let (mut pre_speeds, mut pre_ratios, mut commits) = (Vec::new(), Vec::new(), Vec::new());
    let (mut chunks, mut out_len) = (0, 0);
    for _ in 0..runs {
        let (secs, cpu, c, len, pre_secs, pre_cpu) = convert_once(&ctf_path, &cbf_path, &opts)?;
        speeds.push(in_mb / secs);
        ratios.push(cpu / secs);
        pre_speeds.push(in_mb / pre_secs);
        pre_ratios.push(pre_cpu / pre_secs);
        commits.push(secs - pre_secs);
        (chunks, out_len) = (c, len);
    }
    let (conv, cpu_ratio) = (median(speeds), median(ratios));
    println!(
        "convert CTF -> CBF (file to file, atomic): {conv:.0} MB/s of input wall-clock, {chunks} chunks, {:.1} MB written, CPU/wall {cpu_ratio:.2} (of {cores} cores)",
        mb(out_len)
    );
    println!(
        "  conversion / single-threaded parse: {:.0}% of wall-clock parse ({parse_wall:.0} MB/s), {:.0}% of per-CPU-second parse ({parse_cpu:.0} MB/s); target >= 80%",
        100.0 * conv / parse_wall,
        100.0 * conv / parse_cpu
    );
    let pre = median(pre_speeds);
    println!(
        "  of which commit (fsync + rename over the previous output, disk-bound): {:.2} s; before the commit: {pre:.0} MB/s = {:.0}% of wall-clock parse, CPU/wall {:.2}",
        median(commits),
        100.0 * pre / parse_wall,
        median(pre_ratios)
    );

    // (ii) reading the CBF file, page-cached (every run reads it first as a warm-up too).
    read_cbf(&cbf_path)?;
    let mut buf = vec![0u8; 128 << 10];
    read_plain(&cbf_path, &mut buf)?;
    let (mut cbf_speeds, mut plain_speeds, mut cat_speeds) = (Vec::new(), Vec::new(), Vec::new());
    let mut samples = 0;
    let cbf_mb = mb(out_len);
    for _ in 0..runs {
        let (secs, n) = read_cbf(&cbf_path)?;
        cbf_speeds.push(cbf_mb / secs);
        samples = n;
        plain_speeds.push(cbf_mb / read_plain(&cbf_path, &mut buf)?);
        cat_speeds.push(cbf_mb / run_cat(&cbf_path)?);
    }
    let (read, plain, cat) = (median(cbf_speeds), median(plain_speeds), median(cat_speeds));
    println!(
        "read CBF into per-stream buffers: {read:.0} MB/s ({cbf_mb:.1} MB, {samples} stream samples)"
    );
    println!("  plain read() into a 128 KiB buffer: {plain:.0} MB/s; cat FILE > /dev/null: {cat:.0} MB/s");
    println!(
        "  CBF read / cat: {:.0}%, CBF read / plain read: {:.0}%; target >= 50% of cat",
        100.0 * read / cat,
        100.0 * read / plain
    );
    Ok(ExitCode::SUCCESS)
}
