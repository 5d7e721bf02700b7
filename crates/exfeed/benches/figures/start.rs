//! `start`: the first minibatch without a full pass. On a generated CTF file with sequence ids,
//! rank 0 of 8 as a fresh `exfeed read` process, with the full index (`--index full`) and
//! without (`--index none`), the file evicted from the page cache before each run (so reads
//! come from the disk, as on a node that has not seen the file): the time to the first
//! minibatch, and the bytes rank 0 reads from storage over its whole sweep. The file is
//! removed at the end.

use super::timing::{load_average, median};
use super::{common, Args, Result};
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// Writes about `bytes` of dense CTF with sequence ids (a 64 MB block of lines repeated, ids
/// counting up; every third line continues the sequence before it, so sequences cross chunk
/// boundaries); its size.
fn write_data(path: &Path, bytes: u64) -> Result<u64> {
    let (block, _) = common::dense(64 << 20);
    let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let (mut written, mut id, mut line) = (0u64, 0u64, 0u64);
    'outer: loop {
        for l in block.split_inclusive(|&b| b == b'\n') {
            if line % 3 != 2 {
                id += 1;
            }
            line += 1;
            let head = format!("{id} ");
            f.write_all(head.as_bytes())?;
            f.write_all(l)?;
            written += (head.len() + l.len()) as u64;
            if written >= bytes {
                break 'outer;
            }
        }
    }
    f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    Ok(written)
}

/// Drops the file's pages from the page cache (they are clean: the file was synced).
fn evict(path: &Path) -> Result {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path)?;
    // SAFETY: advice about an open file descriptor; it changes no data.
    let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if r != 0 {
        return Err(format!("posix_fadvise: error {r}").into());
    }
    Ok(())
}

/// Bytes the waited-for children have read from storage so far (`ru_inblock`, 512-byte units).
fn children_read_bytes() -> u64 {
    // SAFETY: getrusage fills one rusage struct through a valid pointer.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    ru.ru_inblock as u64 * 512
}

/// One `exfeed read` of rank 0 of 8 from a cold cache: wall-clock seconds, bytes read from
/// storage, and the summary line.
fn rank0(path: &Path, index: &str, chunk: u64, extra: &[&str]) -> Result<(f64, u64, String)> {
    evict(path)?;
    let before = children_read_bytes();
    let start = Instant::now();
    let out = Command::new(super::exfeed_bin())
        .arg("read")
        .arg(path)
        .args(["--input", "x:dense:200", "-m", "256", "--index", index])
        .args(["--num-workers", "8", "--worker-rank", "0"])
        .args(["--chunk-size", &chunk.to_string(), "--window-chunks", "1"])
        .args(extra)
        .output()?;
    let secs = start.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if !out.status.success() {
        return Err(format!("exfeed read failed: {err}").into());
    }
    Ok((secs, children_read_bytes() - before, err))
}

pub fn run(args: &Args) -> Result {
    let (dir, _temp) = args.data_dir()?;
    let path = dir.join("bench-start.ctf");
    let size = write_data(&path, args.mb.unwrap_or(256) as u64 * 1_000_000)?;
    let result = measure(&path, size, args);
    std::fs::remove_file(&path)?;
    result
}

fn measure(path: &Path, size: u64, args: &Args) -> Result {
    let chunk = args.chunk_mb << 20;
    println!(
        "start bench: {:.0} MB dense CTF with sequence ids, rank 0 of 8, chunks {} MB, window 1 \
         chunk, minibatch 256, page cache evicted before each run, load average {}",
        size as f64 / 1e6,
        args.chunk_mb,
        load_average(),
    );
    let share = size as f64 / 8.0 + chunk as f64;
    for index in ["full", "none"] {
        let (mut first, mut read) = (Vec::new(), Vec::new());
        let mut summary = String::new();
        for _ in 0..args.runs {
            first.push(rank0(path, index, chunk, &["--stop-after", "1"])?.0);
            let (_, bytes, s) = rank0(path, index, chunk, &[])?;
            read.push(bytes as f64);
            summary = s;
        }
        let read = median(read);
        println!(
            "  --index {index}: first minibatch {:.1} ms (process start to exit); rank 0's sweep \
             read {:.1} MB from storage = {:.3} of the file ({:.2}x of 1/8 + one chunk); load \
             average {}",
            median(first) * 1e3,
            read / 1e6,
            read / size as f64,
            read / share,
            load_average(),
        );
        println!("    {}", summary.lines().last().unwrap_or(""));
    }
    Ok(())
}
