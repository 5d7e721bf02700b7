//! `exfeed bench read`: the minibatch reader end to end (a development aid, never run by the
//! tests).

use super::bench::{dense, Args};
use exfeed::ctf::{CtfOptions, CtfParser};
use exfeed::error::Ignore;
use exfeed::io::InputPath;
use exfeed::reader::{
    index_cache_path, ChunkSource, CtfSource, CtfSourceOptions, EpochLimit, Reader, ReaderOptions,
    Window,
};
use exfeed::{SequenceBatch, StreamSpec};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Writes about `bytes` of generated dense CTF (a 64 MB block repeated).
fn write_data(path: &Path, bytes: usize) -> anyhow::Result<()> {
    let (block, _) = dense(bytes.min(64 << 20));
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut written = 0;
    while written < bytes {
        f.write_all(&block)?;
        written += block.len();
    }
    f.flush()?;
    Ok(())
}

fn source_options(inputs: &[StreamSpec], chunk: u64, cache: bool) -> CtfSourceOptions {
    CtfSourceOptions {
        ctf: CtfOptions {
            inputs: inputs.to_vec(),
            ..CtfOptions::default()
        },
        chunk_size: chunk,
        cache_index: cache,
        ..CtfSourceOptions::default()
    }
}

/// One sweep through the reader; returns MB/s of the file.
fn sweep(
    path: &Path,
    inputs: &[StreamSpec],
    chunk: u64,
    window: u64,
    threads: usize,
) -> anyhow::Result<f64> {
    let len = std::fs::metadata(path)?.len() as f64;
    let start = Instant::now();
    let src: Arc<dyn ChunkSource<f32>> = Arc::new(CtfSource::open(
        &InputPath::new(path),
        source_options(inputs, chunk, false),
    )?);
    let options = ReaderOptions {
        window: Window::Chunks(window as usize),
        limit: EpochLimit::Sweeps(1),
        threads,
        prefetch_chunks: threads.max(2),
        ..ReaderOptions::default()
    };
    let mut reader = Reader::new(src, options)?;
    let summary = reader.run(256, None, |_| Ok(()))?;
    anyhow::ensure!(summary.finished, "the sweep did not end");
    Ok(len / 1e6 / start.elapsed().as_secs_f64())
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let temp;
    let dir: PathBuf = match &args.write_to {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            d.clone()
        }
        None => {
            temp = tempfile::tempdir()?;
            temp.path().to_path_buf()
        }
    };
    let path = dir.join("bench-read.ctf");
    let bytes = args.mb.unwrap_or(64) << 20;
    write_data(&path, bytes)?;
    let inputs: Vec<StreamSpec> = vec!["x:dense:200".parse().map_err(anyhow::Error::msg)?];
    let chunk = args.chunk_mb << 20;
    let runs = args.runs.max(1);
    println!(
        "read bench: {:.0} MB dense CTF (200 floats/line), chunks {} MB, window {} chunks, minibatch 256, {} core(s)",
        bytes as f64 / 1e6,
        args.chunk_mb,
        args.window,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );

    // Single-threaded parse of the first 64 MB in memory (the parse benchmark's measure).
    let sample = std::fs::read(&path)?;
    let sample = &sample[..sample.len().min(64 << 20)];
    let cut = memchr_last_newline(sample);
    let mut parse = Vec::new();
    let mut batch = SequenceBatch::<f32>::new(&inputs);
    for _ in 0..runs {
        batch.clear();
        let mut p = CtfParser::new(CtfOptions {
            inputs: inputs.clone(),
            ..CtfOptions::default()
        })?;
        let start = Instant::now();
        p.parse_file(&sample[..cut], &mut batch, &mut Ignore)?;
        parse.push(cut as f64 / 1e6 / start.elapsed().as_secs_f64());
    }
    drop(batch);
    let parse = median(parse);
    println!("  single-threaded parse (in memory): {parse:.0} MB/s");

    let mut single = Vec::new();
    let mut pooled = Vec::new();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    for _ in 0..runs {
        single.push(sweep(&path, &inputs, chunk, args.window, 0)?);
        pooled.push(sweep(&path, &inputs, chunk, args.window, threads)?);
    }
    let (single, pooled) = (median(single), median(pooled));
    println!(
        "  reader, one thread (index + pread + parse + shuffle + minibatches): {single:.0} MB/s = {:.0}% of parse",
        100.0 * single / parse
    );
    println!(
        "  reader, {threads} decoding threads: {pooled:.0} MB/s = {:.2}x single-threaded parse",
        pooled / parse
    );

    // Index: scanning against the cache.
    let cache = index_cache_path(&path);
    let _ = std::fs::remove_file(&cache);
    CtfSource::open(&InputPath::new(&path), source_options(&inputs, chunk, true))?;
    let (mut scan, mut cached) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let t = Instant::now();
        CtfSource::open(
            &InputPath::new(&path),
            source_options(&inputs, chunk, false),
        )?;
        scan.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let s = CtfSource::open(&InputPath::new(&path), source_options(&inputs, chunk, true))?;
        cached.push(t.elapsed().as_secs_f64());
        anyhow::ensure!(s.index_origin() == exfeed::reader::IndexOrigin::Cache);
    }
    let (scan, cached) = (median(scan), median(cached));
    println!(
        "  start-up: re-index {:.1} ms, from cache {:.2} ms ({:.0}x)",
        scan * 1e3,
        cached * 1e3,
        scan / cached.max(1e-9)
    );
    let _ = std::fs::remove_file(&cache);

    // Peak memory of `exfeed read` (a fresh process) over one randomized sweep.
    let exe = std::env::current_exe()?;
    let out = std::process::Command::new(exe)
        .arg("read")
        .arg(&path)
        .args(["--input", "x:dense:200", "-m", "256"])
        .args(["--chunk-size", &chunk.to_string()])
        .args(["--window-chunks", &args.window.to_string()])
        .output()?;
    let err = String::from_utf8_lossy(&out.stderr);
    println!("  exfeed read: {}", err.trim());
    Ok(ExitCode::SUCCESS)
}

fn memchr_last_newline(b: &[u8]) -> usize {
    b.iter().rposition(|&c| c == b'\n').map_or(0, |i| i + 1)
}
