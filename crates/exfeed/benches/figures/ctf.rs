//! `ctf`: single-threaded CTF parsing of generated data.

use super::timing::{median, thread_cpu_secs};
use super::{common, Args, Result};
use exfeed::ctf::{detect_key_mode, scan_sequences, CtfOptions, CtfParser};
use exfeed::error::Ignore;
use exfeed::{SequenceBatch, StreamSpec};
use std::time::Instant;

/// Parses `data` on one thread as the reader and `dump` do: finds the sequence boundaries, then
/// parses pieces of about 1 MB into a reused batch (so it stays in cache); both passes are
/// timed. Prints a line and returns the median wall-clock and per-CPU-second MB/s.
pub fn measure(
    name: &str,
    data: &[u8],
    inputs: Vec<StreamSpec>,
    runs: usize,
) -> Result<(f64, f64)> {
    let opts = CtfOptions {
        inputs,
        ..CtfOptions::default()
    };
    let (mut speeds, mut cpu_speeds) = (Vec::new(), Vec::new());
    let mut sequences = 0;
    let mut batch = SequenceBatch::<f32>::new(&opts.inputs);
    for _ in 0..runs {
        batch.clear();
        let mut parser = CtfParser::new(opts.clone())?;
        let cpu = thread_cpu_secs();
        let start = Instant::now();
        let mode = detect_key_mode(data, false).ok_or("the data is empty")?;
        let mut pieces = Vec::new();
        let (mut piece_start, mut piece_line) = (0u64, 1u64);
        scan_sequences(data, 0, 1, mode, |e| {
            if e.offset - piece_start >= 1 << 20 {
                pieces.push((piece_start, e.offset, piece_line));
                (piece_start, piece_line) = (e.offset, e.line);
            }
            Ok(())
        })?;
        pieces.push((piece_start, data.len() as u64, piece_line));
        sequences = 0;
        for &(from, to, line) in &pieces {
            batch.clear();
            let text = &data[from as usize..to as usize];
            parser.parse_chunk(text, from, line, mode, &mut batch, &mut Ignore)?;
            sequences += batch.len();
        }
        let secs = start.elapsed().as_secs_f64();
        let cpu_secs = thread_cpu_secs() - cpu;
        speeds.push(data.len() as f64 / 1e6 / secs);
        cpu_speeds.push(data.len() as f64 / 1e6 / cpu_secs.max(1e-9));
    }
    let (wall, cpu) = (median(speeds), median(cpu_speeds));
    println!(
        "ctf {name}: {:.1} MB, {sequences} sequences, median of {runs} runs: {wall:.0} MB/s wall-clock, {cpu:.0} MB/s per CPU-second",
        data.len() as f64 / 1e6,
    );
    Ok((wall, cpu))
}

pub fn run(args: &Args) -> Result {
    let bytes = args.mb.unwrap_or(64) << 20;
    let (dense_ctf, dense_csv) = common::dense(bytes);
    let (mnist_ctf, mnist_csv) = common::mnist(bytes);
    if let Some(dir) = &args.write_to {
        std::fs::create_dir_all(dir)?;
        for (file, data) in [
            ("dense.ctf", &dense_ctf),
            ("dense.csv", &dense_csv),
            ("mnist.ctf", &mnist_ctf),
            ("mnist.csv", &mnist_csv),
        ] {
            std::fs::write(dir.join(file), data)?;
        }
    }
    measure(
        "dense (200 floats/line, 6 decimals)",
        &dense_ctf,
        common::specs(common::DENSE_INPUTS),
        args.runs,
    )?;
    measure(
        "mnist (784 ints + sparse label)",
        &mnist_ctf,
        common::specs(common::MNIST_INPUTS),
        args.runs,
    )?;
    Ok(())
}
