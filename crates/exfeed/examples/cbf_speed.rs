//! Measures CBF writing and reading speed on generated data (not a test):
//! `cargo run --release --example cbf_speed -- OUT.cbf [MB]`.

use exfeed::cbf::{CbfFile, CbfWriter, CbfWriterOptions};
use exfeed::io::InputPath;
use exfeed::{Precision, SequenceBatch, Storage, StreamSpec};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = std::path::PathBuf::from(&args[1]);
    let mb: u64 = args.get(2).map_or(200, |s| s.parse().unwrap());
    let specs = [
        StreamSpec::new("features", Storage::Dense, 100),
        StreamSpec::new("labels", Storage::Sparse, 1000),
    ];
    let mut batch = SequenceBatch::<f32>::new(&specs);
    let mut x = 1u32;
    for k in 0..1000u64 {
        for _ in 0..(k % 20 + 1) {
            let vals: Vec<f32> = (0..100).map(|i| (i as f32) * 0.5 + k as f32).collect();
            batch.stream_mut(0).push_dense_sample(&vals);
            for _ in 0..5 {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                batch.stream_mut(1).push_sparse_value((x >> 8) % 1000, 1.0);
            }
            batch.stream_mut(1).end_sparse_sample();
        }
        batch.finish_sequence(k);
    }
    let out = std::io::BufWriter::new(std::fs::File::create(&path)?);
    let t = Instant::now();
    let mut w = CbfWriter::new(
        out,
        &specs,
        CbfWriterOptions {
            precision: Precision::Float,
            ..Default::default()
        },
    )?;
    let mut written = 0u64;
    while written < mb << 20 {
        w.write_batch(&batch)?;
        written = w.chunks().iter().map(|c| c.len).sum::<u64>() + 1;
        if w.chunks().is_empty() {
            written = w.sequences() * 4000;
        }
    }
    w.finish()?;
    let size = std::fs::metadata(&path)?.len();
    let dt = t.elapsed().as_secs_f64();
    println!(
        "write: {} MB in {:.3}s = {:.0} MB/s",
        size >> 20,
        dt,
        size as f64 / dt / 1e6
    );

    let f = CbfFile::open_input(&InputPath::new(&path))?;
    let mut b = SequenceBatch::<f32>::new(&[]);
    for i in 0..f.num_chunks() {
        f.read_chunk(i, &mut b)?;
    }
    let t = Instant::now();
    let mut n = 0;
    for i in 0..f.num_chunks() {
        f.read_chunk(i, &mut b)?;
        n += b.len();
    }
    let dt = t.elapsed().as_secs_f64();
    println!(
        "read: {n} sequences, {} MB in {:.3}s = {:.0} MB/s",
        size >> 20,
        dt,
        size as f64 / dt / 1e6
    );
    let t = Instant::now();
    let mut sum = 0u64;
    for c in f.bytes().chunks(1 << 16) {
        sum += c[0] as u64;
    }
    std::hint::black_box(sum);
    let v = std::fs::read(&path)?;
    let dt = t.elapsed().as_secs_f64();
    println!(
        "read file into memory (cat-like): {:.0} MB/s",
        v.len() as f64 / dt / 1e6
    );
    Ok(())
}
