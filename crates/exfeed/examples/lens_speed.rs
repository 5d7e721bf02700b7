//! Measures Lens example-file loading speed (text and binary). Not a test:
//! `cargo run --release -p exfeed --example lens_speed -- FILE...` (each FILE `.ex`/`.bex`,
//! compressed or not; decompression is done before timing). With `--generate MB`, also a
//! generated text file of about that size and its binary form.

use exfeed::io::{open_bytes, InputPath};
use exfeed::lens::{binary, text};
use std::time::Instant;

fn measure(label: &str, bytes: &[u8]) {
    // Best of a few runs (the machine is shared).
    let mut s = f64::INFINITY;
    let mut set = None;
    for _ in 0..5 {
        let t = Instant::now();
        let parsed = text::parse(bytes).unwrap_or_else(|e| panic!("{label}: {e}"));
        s = s.min(t.elapsed().as_secs_f64());
        set = Some(parsed);
    }
    let set = set.expect("parsed");
    let n = set.examples.len() as f64;
    println!(
        "{label}: {:.1} MB, {} examples, {:.1} MB/s, {:.0} examples/s",
        bytes.len() as f64 / 1e6,
        set.examples.len(),
        bytes.len() as f64 / 1e6 / s,
        n / s
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        if args[i] == "--generate" {
            let mb: usize = args[i + 1].parse().expect("--generate MB");
            i += 2;
            let mut s = String::from(";\n");
            let mut k = 0u64;
            while s.len() < mb * 1_000_000 {
                s.push_str(&format!("name:{{item {k}}}\nI:"));
                for u in 0..100 {
                    s.push_str(if (k + u) % 7 == 0 { " 1" } else { " 0" });
                }
                s.push_str("\nT:");
                for u in 0..20u64 {
                    s.push_str(&format!(" {:.3}", ((k * 31 + u) % 1000) as f64 / 1000.0));
                }
                s.push_str(";\n");
                k += 1;
            }
            measure("generated.ex", s.as_bytes());
            let set = text::parse(s.as_bytes()).unwrap();
            measure("generated.bex", &binary::write(&set).unwrap());
            continue;
        }
        let bytes = open_bytes(&InputPath::new(&args[i])).expect("open");
        measure(&args[i], &bytes);
        i += 1;
    }
}
