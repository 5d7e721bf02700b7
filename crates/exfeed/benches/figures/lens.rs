//! `lens`: Lens example files. Decoding from memory, text against binary (two conformance
//! files); then the set of issue 13 (100,000 examples of 3 events, 50 dense inputs and sparse
//! targets: 97 MB of `.ex`) and a set of long sparse lists, each as `.ex`, `.bex`, `.ex.gz` and
//! `.bex.gz`: the streaming decode in MB per CPU-second, and `exfeed check` and `exfeed dump`
//! as fresh processes (wall-clock time and peak RSS; `exfeed read` too for the first set),
//! with the decompression alone beside the gzip forms. `--write-to DIR` keeps the files (scripts/bench-lens-peer times Lens on them).

use super::timing::{load_average, median, thread_cpu_secs};
use super::{common, Args, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// Times loading a Lens file already in memory (decompressed) whole: medians over `runs`.
/// Prints a line and returns CPU seconds per example.
fn measure(name: &str, data: &[u8], runs: usize) -> Result<f64> {
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    let mut examples = 0;
    for _ in 0..runs {
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

fn conformance_files(args: &Args) -> Result {
    let dir = std::env::var_os("EXFEED_CONFORMANCE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/conformance"
            ))
        })
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
        let per_given = measure(&format!("{file} (decompressed)"), &data, args.runs)?;
        // The same examples in the other form, for the text/binary comparison.
        let set = exfeed::lens::parse(&data)?;
        let ratio = if data.starts_with(&[0xaa; 4]) {
            let text = exfeed::lens::text::write(&set)?;
            measure(&format!("{file} as .ex"), &text, args.runs)? / per_given
        } else {
            let binary = exfeed::lens::binary::write(&set)?;
            per_given / measure(&format!("{file} as .bex"), &binary, args.runs)?
        };
        println!("lens {file}: binary is {ratio:.1}x faster than text per example");
    }
    Ok(())
}

/// The streaming decode `check` does (one example at a time, each handed back for the next to
/// reuse its allocations), from memory: median MB per
/// CPU-second and wall-clock second, and the number of examples.
fn decode(data: &Arc<[u8]>, runs: usize) -> Result<(f64, f64, usize)> {
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    let mut examples = 0;
    for _ in 0..runs {
        let c = thread_cpu_secs();
        let t = Instant::now();
        let source = Box::new(std::io::Cursor::new(data.clone()));
        let mut r = exfeed::lens::pipe::PipeReader::from_reader(source, "generated")?;
        while let Some(ex) = r.next_example()? {
            std::hint::black_box(&ex);
            r.recycle(ex);
        }
        wall.push(t.elapsed().as_secs_f64());
        cpu.push(thread_cpu_secs() - c);
        examples = r.examples_read();
    }
    let mb = data.len() as f64 / 1e6;
    Ok((
        mb / median(cpu).max(1e-9),
        mb / median(wall).max(1e-9),
        examples,
    ))
}

/// Runs `exe args` (output to /dev/null) and waits for it: wall-clock seconds and its peak RSS
/// in MiB, its VmHWM read from /proc while it runs. (A child's rusage would count this
/// process's memory too: a child's high-water mark starts as its parent's before the exec.)
fn run_process(exe: &Path, args: &[&str]) -> Result<(f64, f64)> {
    let t = Instant::now();
    let mut child = std::process::Command::new(exe)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("{}: {e} (build it, or set EXFEED_BIN)", exe.display()))?;
    let proc_status = format!("/proc/{}/status", child.id());
    let name = exe.file_name().unwrap_or_default().to_string_lossy();
    let mut peak_kib = 0u64;
    let status = loop {
        let text = std::fs::read_to_string(&proc_status).unwrap_or_default();
        // Only once it runs `exe` (before the exec it is a copy of this process).
        if text
            .lines()
            .any(|l| l.strip_prefix("Name:").map(str::trim) == Some(&*name))
        {
            let kib = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok());
            peak_kib = peak_kib.max(kib.unwrap_or(0));
        }
        if let Some(status) = child.try_wait()? {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    let secs = t.elapsed().as_secs_f64();
    if !status.success() {
        return Err(format!("{} {} failed ({status})", exe.display(), args.join(" ")).into());
    }
    Ok((secs, peak_kib as f64 / 1024.0))
}

/// Median wall-clock seconds and the largest peak RSS (MiB) of `exe args` over `runs`.
fn process_figures(exe: &Path, args: &[&str], runs: usize) -> Result<(f64, f64)> {
    let (mut secs, mut peak) = (Vec::new(), 0f64);
    for _ in 0..runs {
        let (s, rss) = run_process(exe, args)?;
        secs.push(s);
        peak = peak.max(rss);
    }
    Ok((median(secs), peak))
}

/// Median wall-clock seconds to decompress a gzip file (to nothing).
fn gunzip_secs(path: &Path, runs: usize) -> Result<f64> {
    let mut secs = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let file = std::io::BufReader::new(std::fs::File::open(path)?);
        std::io::copy(
            &mut flate2::read::MultiGzDecoder::new(file),
            &mut std::io::sink(),
        )?;
        secs.push(t.elapsed().as_secs_f64());
    }
    Ok(median(secs))
}

fn gzip(data: &[u8], path: &Path) -> Result {
    let mut gz =
        flate2::write::GzEncoder::new(std::fs::File::create(path)?, flate2::Compression::default());
    gz.write_all(data)?;
    gz.finish()?;
    Ok(())
}

/// One generated set as `.ex`, `.bex` and their gzip forms in `dir`; prints its figures. With
/// a `layout` (input groups, target groups), `exfeed read` of each file too (minibatches of 256).
fn generated_set(
    name: &str,
    text: Vec<u8>,
    layout: Option<(&str, &str)>,
    dir: &Path,
    args: &Args,
) -> Result {
    let binary = exfeed::lens::binary::write(&exfeed::lens::parse(&text)?)?;
    let exe = super::exfeed_bin();
    for (ext, data) in [("ex", text), ("bex", binary)] {
        let path = dir.join(format!("{name}.{ext}"));
        std::fs::write(&path, &data)?;
        let gz = dir.join(format!("{name}.{ext}.gz"));
        gzip(&data, &gz)?;
        let data: Arc<[u8]> = data.into();
        let (cpu, wall, examples) = decode(&data, args.runs)?;
        println!(
            "lens {name}.{ext}: {:.1} MB, {examples} examples: decode {cpu:.0} MB per \
             CPU-second ({wall:.0} MB/s wall-clock), one example at a time",
            data.len() as f64 / 1e6
        );
        for file in [&path, &gz] {
            let f = file.to_str().ok_or("a UTF-8 path")?;
            let (check, check_rss) = process_figures(&exe, &["check", f], args.runs)?;
            let (dump, dump_rss) = process_figures(&exe, &["dump", f], args.runs)?;
            let read = match layout {
                Some((inputs, targets)) => {
                    let read = [
                        "read",
                        f,
                        "-m",
                        "256",
                        "--input-groups",
                        inputs,
                        "--target-groups",
                        targets,
                    ];
                    let (secs, rss) = process_figures(&exe, &read, args.runs)?;
                    format!("; read {secs:.3} s, peak RSS {rss:.1} MiB")
                }
                None => String::new(),
            };
            let gunzip = if file == &gz {
                format!("; gunzip alone {:.3} s", gunzip_secs(file, args.runs)?)
            } else {
                String::new()
            };
            println!(
                "  {}: check {check:.3} s, peak RSS {check_rss:.1} MiB; dump {dump:.3} s, peak \
                 RSS {dump_rss:.1} MiB{read}{gunzip}",
                file.file_name().unwrap_or_default().to_string_lossy()
            );
        }
    }
    Ok(())
}

pub fn run(args: &Args) -> Result {
    conformance_files(args)?;
    let (dir, _temp) = args.data_dir()?;
    println!("load average: {}", load_average());
    // 50 dense inputs and targets among 20 units an event.
    let dense_layout = Some(("in:50", "out:20"));
    generated_set(
        "dense",
        common::lens_dense_ex(100_000),
        dense_layout,
        &dir,
        args,
    )?;
    let sparse_mb = args.mb.unwrap_or(50);
    generated_set(
        "sparse",
        common::lens_sparse_ex(sparse_mb << 20),
        None,
        &dir,
        args,
    )?;
    println!("load average: {}", load_average());
    Ok(())
}
