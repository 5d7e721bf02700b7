//! `cbf`: (i) CTF -> CBF conversion, to a real file through `AtomicOutput` as `exfeed convert`
//! does, against the single-threaded parse of `ctf`, once with the commit's sync to disk and
//! once without (`--no-sync`); (ii) reading the resulting page-cached CBF file into per-stream
//! buffers against plain `read` and `cat`.

use super::timing::{children_cpu_secs, load_average, median, process_cpu_secs, thread_cpu_secs};
use super::{common, Args, Result};
use exfeed::convert::{ctf_to_cbf, CtfToCbfOptions};
use exfeed::ctf::CtfOptions;
use exfeed::io::{open_bytes, AtomicOutput, InputPath, OutputOptions};
use exfeed::SequenceBatch;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

/// What one conversion took.
struct Conversion {
    /// Wall-clock and process CPU seconds, all included.
    secs: f64,
    cpu: f64,
    /// The same up to the commit (the sync to disk and the rename).
    pre_secs: f64,
    pre_cpu: f64,
    chunks: u64,
    out_len: u64,
}

/// One conversion as the CLI does it: map the input, write through an atomic output, commit
/// (with or without syncing the file to disk first). A previous output is removed first, outside
/// the timing: replacing it would add the freeing (and discarding) of its blocks to the rename.
fn convert_once(ctf: &Path, cbf: &Path, opts: &CtfOptions, sync: bool) -> Result<Conversion> {
    if cbf.exists() {
        std::fs::remove_file(cbf)?;
    }
    let cpu = process_cpu_secs();
    let start = Instant::now();
    let input = InputPath::new(ctf);
    let bytes = open_bytes(&input)?;
    let out = AtomicOutput::create(
        cbf,
        &OutputOptions {
            inputs: vec![ctf.to_path_buf()],
            ..OutputOptions::default()
        },
    )?;
    let job = CtfToCbfOptions {
        file: input.display_name(),
        ctf: opts.clone(),
        ..CtfToCbfOptions::default()
    };
    let (out, stats) = ctf_to_cbf(&bytes, &job, out, &mut Vec::new(), |_| {})?;
    let (pre_secs, pre_cpu) = (start.elapsed().as_secs_f64(), process_cpu_secs() - cpu);
    if sync {
        out.commit()?;
    } else {
        out.commit_unsynced()?;
    }
    drop(bytes);
    Ok(Conversion {
        secs: start.elapsed().as_secs_f64(),
        cpu: process_cpu_secs() - cpu,
        pre_secs,
        pre_cpu,
        chunks: stats.chunks,
        out_len: std::fs::metadata(cbf)?.len(),
    })
}

/// Reads every chunk of the CBF file into a reused batch (per-stream buffers), from a memory
/// map or with the buffered fallback; returns wall and CPU seconds and the number of samples
/// seen (so the work cannot be skipped).
fn read_cbf(path: &Path, buffered: bool) -> Result<(f64, f64, u64)> {
    let cpu = thread_cpu_secs();
    let start = Instant::now();
    let file = if buffered {
        exfeed::io::open_cbf_buffered(path)?
    } else {
        // A map of a private copy (open_cbf no longer maps: see docs/hardening.md).
        exfeed::cbf::CbfFile::open(exfeed::io::open_bytes(&InputPath::new(path))?)?
    };
    if file.is_buffered() != buffered {
        return Err("not the reader asked for".into());
    }
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
    drop(file);
    Ok((
        start.elapsed().as_secs_f64(),
        thread_cpu_secs() - cpu,
        std::hint::black_box(samples),
    ))
}

/// What `cat FILE > /dev/null` does in-process: `read` into one reused buffer.
fn read_plain(path: &Path, buf: &mut [u8]) -> Result<f64> {
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

/// The real `cat`, stdout to /dev/null, spawn included: wall and CPU seconds.
fn run_cat(path: &Path) -> Result<(f64, f64)> {
    let cpu = children_cpu_secs();
    let start = Instant::now();
    let status = Command::new("cat")
        .arg(path)
        .stdout(Stdio::null())
        .status()?;
    if !status.success() {
        return Err(format!("cat failed: {status}").into());
    }
    Ok((start.elapsed().as_secs_f64(), children_cpu_secs() - cpu))
}

pub fn run(args: &Args) -> Result {
    let runs = args.runs;
    let size = args.mb.unwrap_or(200) << 20;
    let dir = match &args.dir {
        Some(d) => tempfile::tempdir_in(d)?,
        None => tempfile::tempdir()?,
    };
    let ctf_path = dir.path().join("mnist.ctf");
    let cbf_path = dir.path().join("mnist.cbf");
    let (ctf, csv) = common::mnist(size);
    drop(csv);
    {
        // Synced, so that its writeback does not run during the measurements.
        let mut f = std::fs::File::create(&ctf_path)?;
        f.write_all(&ctf)?;
        f.sync_all()?;
    }
    let inputs = common::specs(common::MNIST_INPUTS);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "cbf bench: {:.1} MB of MNIST-like CTF (784 ints + sparse label) in {}, {cores} cores, load average {} at the start, median of {runs} runs",
        mb(ctf.len() as u64),
        dir.path().display(),
        load_average()
    );

    // (i) parse vs conversion.
    let (parse_wall, parse_cpu) = super::ctf::measure(
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
    let (mut synced, mut unsynced) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        synced.push(convert_once(&ctf_path, &cbf_path, &opts, true)?);
        unsynced.push(convert_once(&ctf_path, &cbf_path, &opts, false)?);
    }
    let (chunks, out_len) = (synced[0].chunks, synced[0].out_len);
    println!(
        "convert CTF -> CBF, file to file through an atomic output: {chunks} chunks, {:.1} MB written; single-threaded parse {parse_wall:.0} MB/s wall-clock, {parse_cpu:.0} MB/s per CPU-second; target >= 80% of the parse",
        mb(out_len)
    );
    let report = |what: &str, v: &[Conversion], secs: fn(&Conversion) -> (f64, f64)| {
        let wall = median(v.iter().map(|c| in_mb / secs(c).0).collect());
        let per_cpu = median(v.iter().map(|c| in_mb / secs(c).1).collect());
        let ratio = median(v.iter().map(|c| secs(c).1 / secs(c).0).collect());
        println!(
            "  {what}: {wall:.0} MB/s = {:.0}% of the parse, CPU/wall {ratio:.2} (of {cores} cores); {per_cpu:.0} MB per process CPU-second = {:.0}% of the parse's",
            100.0 * wall / parse_wall,
            100.0 * per_cpu / parse_cpu,
        );
    };
    let all = |c: &Conversion| (c.secs, c.cpu);
    report("with the commit's sync to disk (the default)", &synced, all);
    report("with --no-sync (rename without syncing)", &unsynced, all);
    report("up to the commit (all of the CPU work)", &synced, |c| {
        (c.pre_secs, c.pre_cpu)
    });
    println!(
        "  the commit's sync to disk takes {:.2} s (median; {:.0} MB at the disk's speed, writeback starts while converting)",
        median(synced.iter().map(|c| c.secs - c.pre_secs).collect()),
        mb(out_len)
    );

    // (ii) reading the CBF file, page-cached (every reader reads it once first as a warm-up).
    read_cbf(&cbf_path, false)?;
    let mut buf = vec![0u8; 128 << 10];
    read_plain(&cbf_path, &mut buf)?;
    let (mut cbf_speeds, mut cbf_cpu, mut plain_speeds) = (Vec::new(), Vec::new(), Vec::new());
    let (mut cat_speeds, mut cat_cpu) = (Vec::new(), Vec::new());
    let (mut buffered_speeds, mut buffered_cpu) = (Vec::new(), Vec::new());
    let mut samples = 0;
    let cbf_mb = mb(out_len);
    for _ in 0..runs {
        let (secs, cpu, n) = read_cbf(&cbf_path, false)?;
        cbf_speeds.push(cbf_mb / secs);
        cbf_cpu.push(cbf_mb / cpu.max(1e-9));
        samples = n;
        let (secs, cpu, _) = read_cbf(&cbf_path, true)?;
        buffered_speeds.push(cbf_mb / secs);
        buffered_cpu.push(cbf_mb / cpu.max(1e-9));
        plain_speeds.push(cbf_mb / read_plain(&cbf_path, &mut buf)?);
        let (secs, cpu) = run_cat(&cbf_path)?;
        cat_speeds.push(cbf_mb / secs);
        cat_cpu.push(cbf_mb / cpu.max(1e-9));
    }
    let (read, plain, cat) = (median(cbf_speeds), median(plain_speeds), median(cat_speeds));
    let (read_cpu, cat_cpu) = (median(cbf_cpu), median(cat_cpu));
    println!(
        "read CBF into per-stream buffers: {read:.0} MB/s wall-clock, {read_cpu:.0} MB per CPU-second ({cbf_mb:.1} MB, {samples} stream samples)"
    );
    let (buffered, buffered_cpu) = (median(buffered_speeds), median(buffered_cpu));
    println!(
        "  the same with the buffered fallback (a positioned read per chunk instead of the memory map): {buffered:.0} MB/s wall-clock, {buffered_cpu:.0} MB per CPU-second = {:.0}% of cat",
        100.0 * buffered / cat
    );
    println!(
        "  plain read() into a 128 KiB buffer: {plain:.0} MB/s; cat FILE > /dev/null: {cat:.0} MB/s wall-clock (spawn included), {cat_cpu:.0} MB per CPU-second"
    );
    println!(
        "  CBF read / cat: {:.0}% wall-clock, {:.0}% per CPU-second; CBF read / plain read: {:.0}%; target >= 50% of cat",
        100.0 * read / cat,
        100.0 * read_cpu / cat_cpu,
        100.0 * read / plain
    );
    println!("  load average at the end: {}", load_average());
    Ok(())
}
