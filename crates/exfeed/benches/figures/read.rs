//! `read`: the minibatch reader end to end against the single-threaded parse, start-up from the
//! index cache against re-indexing, and the peak memory of `exfeed read`.

use super::timing::{load_average, median, self_cpu_secs};
use super::{common, Args, Result};
use exfeed::ctf::{CtfOptions, CtfParser};
use exfeed::error::Ignore;
use exfeed::io::InputPath;
use exfeed::options::{ChunkSize, ReadOptions};
use exfeed::reader::{ChunkSource, EpochLimit, Reader, ReaderOptions, Window};
use exfeed::source::{index_cache_path, CtfSource, CtfSourceOptions, IndexMode, IndexOrigin};
use exfeed::{SequenceBatch, StreamSpec};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Writes about `bytes` of generated dense CTF (a block of at most 64 MB repeated).
fn write_data(path: &Path, bytes: usize) -> Result {
    let (block, _) = common::dense(bytes.min(64 << 20));
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut written = 0;
    while written < bytes {
        f.write_all(&block)?;
        written += block.len();
    }
    f.flush()?;
    Ok(())
}

fn source_options(
    inputs: &[StreamSpec],
    chunk: u64,
    cache: bool,
    index: IndexMode,
) -> CtfSourceOptions {
    CtfSourceOptions {
        ctf: CtfOptions {
            inputs: inputs.to_vec(),
            ..CtfOptions::default()
        },
        read: ReadOptions::new()
            .with_chunk_size(ChunkSize::Bytes(chunk))
            .with_cache_index(cache)
            .with_index(index),
    }
}

/// A measure: MB/s of wall time, and MB per CPU second (all threads of the process).
#[derive(Clone, Copy)]
struct Rate {
    wall: f64,
    cpu: f64,
}

fn timed(mb: f64, f: impl FnOnce() -> Result) -> Result<Rate> {
    let (start, cpu) = (Instant::now(), self_cpu_secs());
    f()?;
    Ok(Rate {
        wall: mb / start.elapsed().as_secs_f64(),
        cpu: mb / (self_cpu_secs() - cpu).max(1e-9),
    })
}

fn medians(v: &[Rate]) -> Rate {
    Rate {
        wall: median(v.iter().map(|r| r.wall).collect()),
        cpu: median(v.iter().map(|r| r.cpu).collect()),
    }
}

/// Opens the file with the full index (scanned, or from the cache) or without one.
fn open(
    path: &Path,
    inputs: &[StreamSpec],
    chunk: u64,
    cache: bool,
    index: IndexMode,
) -> Result<CtfSource> {
    let options = source_options(inputs, chunk, cache, index);
    Ok(CtfSource::open(&InputPath::new(path), options)?)
}

/// What a sweep reads: a source opened beforehand, or the file opened (and timed) with the
/// full index or without one.
enum Over<'a> {
    Built(&'a Arc<CtfSource>),
    Open(IndexMode),
}

/// One randomized sweep through the reader.
fn sweep(
    path: &Path,
    inputs: &[StreamSpec],
    chunk: u64,
    window: u64,
    threads: usize,
    source: Over<'_>,
) -> Result<Rate> {
    let mb = std::fs::metadata(path)?.len() as f64 / 1e6;
    timed(mb, || {
        let src: Arc<dyn ChunkSource<f32>> = match source {
            Over::Built(s) => s.clone(),
            Over::Open(index) => Arc::new(open(path, inputs, chunk, false, index)?),
        };
        let options = ReaderOptions {
            window: Window::Chunks(window as usize),
            limit: EpochLimit::Sweeps(1),
            threads,
            prefetch_chunks: ReaderOptions::prefetch_for(threads),
            ..ReaderOptions::default()
        };
        let mut reader = Reader::new(src, options)?;
        let summary = reader.run(256, None, |_| Ok(()))?;
        if !summary.finished {
            return Err("the sweep did not end".into());
        }
        Ok(())
    })
}

fn parse_once(text: &[u8], inputs: &[StreamSpec], batch: &mut SequenceBatch<f32>) -> Result {
    batch.clear();
    let mut p = CtfParser::new(CtfOptions {
        inputs: inputs.to_vec(),
        ..CtfOptions::default()
    })?;
    p.parse_file(text, batch, &mut Ignore)?;
    Ok(())
}

/// The faster of two rates (a parse paired with a measure: the faster of one just before and
/// one just after it, so a slow moment on one side does not flatter the ratio).
fn faster(a: Rate, b: Rate) -> Rate {
    if b.wall > a.wall {
        b
    } else {
        a
    }
}

pub fn run(args: &Args) -> Result {
    let (dir, _temp) = args.data_dir()?;
    let path = dir.join("bench-read.ctf");
    let bytes = args.mb.unwrap_or(64) << 20;
    write_data(&path, bytes)?;
    let inputs = common::specs(common::DENSE_INPUTS);
    let chunk = args.chunk_mb << 20;
    let runs = args.runs;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "read bench: {:.0} MB dense CTF (200 floats/line), chunks {} MB, window {} chunks, minibatch 256, {} core(s), load average {}",
        bytes as f64 / 1e6,
        args.chunk_mb,
        args.window,
        threads,
        load_average(),
    );
    println!("  (MB/s of wall time; in brackets MB per CPU second of all the process's threads)");

    // Single-threaded parse of the first 64 MB in memory (the parse benchmark's measure), and
    // `threads` such parses at once (what the cores give together, under the current load).
    let sample = std::fs::read(&path)?;
    let sample = &sample[..sample.len().min(64 << 20)];
    let cut = sample
        .iter()
        .rposition(|&c| c == b'\n')
        .map_or(0, |i| i + 1);
    let text = &sample[..cut];
    let mut batch = SequenceBatch::<f32>::new(&inputs);
    parse_once(text, &inputs, &mut batch)?; // warm up: buffers grown
    let mut batches: Vec<_> = (0..threads).map(|_| batch.clone()).collect();
    let parse_mb = cut as f64 / 1e6;
    // Every measure is paired with a parse measured next to it, and reported as a ratio to it
    // too (the median of the ratios): other jobs on the machine come and go.
    let mut parse_once_timed = || timed(parse_mb, || parse_once(text, &inputs, &mut batch));
    let (mut parse, mut together) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let before = parse_once_timed()?;
        let t = timed(threads as f64 * parse_mb, || {
            std::thread::scope(|s| {
                let hs: Vec<_> = batches
                    .iter_mut()
                    .map(|b| s.spawn(|| parse_once(text, &inputs, b).map_err(|e| e.to_string())))
                    .collect();
                hs.into_iter()
                    .try_for_each(|h| h.join().expect("parse thread"))
            })?;
            Ok(())
        })?;
        let after = parse_once_timed()?;
        parse.push(before);
        parse.push(after);
        together.push((t, faster(before, after)));
    }
    drop(batches);
    let parse = medians(&parse);
    println!(
        "  single-threaded parse (in memory): {:.0} MB/s [{:.0}]",
        parse.wall, parse.cpu
    );
    let line = |what: &str, v: &[(Rate, Rate)]| {
        let r = medians(&v.iter().map(|x| x.0).collect::<Vec<_>>());
        let ratio = median(v.iter().map(|(r, p)| r.wall / p.wall).collect());
        let cpu_ratio = median(v.iter().map(|(r, p)| r.cpu / p.cpu).collect());
        let p = median(v.iter().map(|x| x.1.wall).collect());
        println!(
            "  {what}: {:.0} MB/s = {:.0}% of parse = {:.2}x [{:.0} = {:.0}%] (paired parses {p:.0} MB/s)",
            r.wall,
            100.0 * ratio,
            ratio,
            r.cpu,
            100.0 * cpu_ratio
        );
    };
    line(
        &format!("{threads} parses at once (the cores' ceiling under the current load)"),
        &together,
    );

    // The reader over one randomized sweep: decoding on the caller's thread (everything on
    // one core), with one decoding thread (the caller packs minibatches meanwhile), and with
    // one per core; over an index built beforehand, indexing included, and without an index
    // (byte ranges: the file has no sequence ids, so its keys are byte offsets).
    let indexed = Arc::new(open(&path, &inputs, chunk, false, IndexMode::Full)?);
    let counts = [0, 1, threads];
    let mut built = vec![Vec::new(); counts.len()];
    let mut fresh = vec![Vec::new(); counts.len()];
    let mut ranges = vec![Vec::new(); counts.len()];
    let mut paired = |f: &mut dyn FnMut() -> Result<Rate>| -> Result<(Rate, Rate)> {
        let before = parse_once_timed()?;
        let r = f()?;
        let after = parse_once_timed()?;
        Ok((r, faster(before, after)))
    };
    for _ in 0..runs {
        for (i, &t) in counts.iter().enumerate() {
            built[i].push(paired(&mut || {
                sweep(&path, &inputs, chunk, args.window, t, Over::Built(&indexed))
            })?);
            if t != 1 {
                fresh[i].push(paired(&mut || {
                    sweep(
                        &path,
                        &inputs,
                        chunk,
                        args.window,
                        t,
                        Over::Open(IndexMode::Full),
                    )
                })?);
                ranges[i].push(paired(&mut || {
                    sweep(
                        &path,
                        &inputs,
                        chunk,
                        args.window,
                        t,
                        Over::Open(IndexMode::None),
                    )
                })?);
            }
        }
    }
    for (i, &t) in counts.iter().enumerate() {
        let what = match t {
            0 => "reader, decoding on the caller's thread".to_string(),
            1 => "reader, 1 decoding thread".to_string(),
            _ => format!("reader, {t} decoding threads"),
        };
        line(&format!("{what}, index built"), &built[i]);
        if !fresh[i].is_empty() {
            line(&format!("{what}, indexing included"), &fresh[i]);
            line(&format!("{what}, no index"), &ranges[i]);
        }
    }
    drop(indexed);

    // Index: scanning against the cache.
    let cache = index_cache_path(&path);
    let _ = std::fs::remove_file(&cache);
    open(&path, &inputs, chunk, true, IndexMode::Full)?;
    let (mut scan, mut cached) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let t = Instant::now();
        open(&path, &inputs, chunk, false, IndexMode::Full)?;
        scan.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let s = open(&path, &inputs, chunk, true, IndexMode::Full)?;
        cached.push(t.elapsed().as_secs_f64());
        if s.index_origin() != IndexOrigin::Cache {
            return Err("the index was not read from the cache".into());
        }
    }
    let (scan, cached) = (median(scan), median(cached));
    println!(
        "  start-up: re-index {:.1} ms, from cache {:.2} ms ({:.0}x)",
        scan * 1e3,
        cached * 1e3,
        scan / cached.max(1e-9)
    );

    // Peak memory of `exfeed read` (a fresh process) over one randomized sweep, indexing, then
    // with the index cache (written above).
    let exe = super::exfeed_bin();
    for cache_index in [false, true] {
        let mut cmd = std::process::Command::new(&exe);
        cmd.arg("read")
            .arg(&path)
            .args(["--input", "x:dense:200", "-m", "256"])
            .args(["--chunk-size", &chunk.to_string()])
            .args(["--window-chunks", &args.window.to_string()]);
        if cache_index {
            cmd.arg("--cache-index");
        }
        let out = cmd
            .output()
            .map_err(|e| format!("{}: {e} (build it, or set EXFEED_BIN)", exe.display()))?;
        let err = String::from_utf8_lossy(&out.stderr);
        println!("  exfeed read: {}", err.trim());
    }
    let _ = std::fs::remove_file(&cache);
    Ok(())
}
