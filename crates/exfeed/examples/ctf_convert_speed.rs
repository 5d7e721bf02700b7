//! Measures CTF parsing alone against CTF -> CBF conversion (not a test):
//! `cargo run --release --example ctf_convert_speed -- FILE.ctf NAME:FORMAT:DIM[:ALIAS]...`.

use exfeed::cbf::CbfWriterOptions;
use exfeed::convert::ctf_to_cbf;
use exfeed::ctf::{parse, CtfOptions};
use exfeed::SequenceBatch;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let text = std::fs::read(&args[1])?;
    let inputs = args[2..]
        .iter()
        .map(|s| s.parse())
        .collect::<Result<Vec<_>, _>>()?;
    let opts = CtfOptions {
        inputs,
        ..Default::default()
    };
    let mb = text.len() as f64 / 1e6;
    for _ in 0..2 {
        let t = Instant::now();
        let mut batch = SequenceBatch::<f32>::new(&opts.inputs);
        parse(&text, &opts, &mut batch, &mut Vec::new())?;
        let dt = t.elapsed().as_secs_f64();
        println!("parse f32: {} sequences, {:.0} MB/s", batch.len(), mb / dt);
        drop(batch);
        let t = Instant::now();
        let (out, stats) = ctf_to_cbf(
            &text,
            "x",
            &opts,
            &CbfWriterOptions::default(),
            std::io::sink(),
            &mut Vec::new(),
            |_| {},
        )?;
        let _ = out;
        let dt = t.elapsed().as_secs_f64();
        println!(
            "convert to CBF: {} sequences, {} chunks, {:.0} MB/s",
            stats.sequences,
            stats.chunks,
            mb / dt
        );
    }
    Ok(())
}
