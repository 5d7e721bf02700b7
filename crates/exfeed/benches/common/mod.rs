//! Generated data sets and timing helpers shared by the benchmarks (each bench uses a part).
#![allow(dead_code)]

use std::fmt::Write as _;

/// xorshift64*: a fixed, fast stream of numbers for generated data (never for the reader).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// About `bytes` of dense CTF, 200 floats per line with 6 decimals (`|x`), and the same numbers
/// as CSV. Returns (ctf, csv).
pub fn dense(bytes: usize) -> (Vec<u8>, Vec<u8>) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut ctf, mut csv) = (Vec::with_capacity(bytes + 4096), Vec::with_capacity(bytes));
    let mut num = String::new();
    while ctf.len() < bytes {
        ctf.extend_from_slice(b"|x");
        for j in 0..200 {
            num.clear();
            let v = (rng.next() % 20_000_000) as f64 / 1e6 - 10.0;
            let _ = write!(num, "{v:.6}");
            ctf.push(b' ');
            ctf.extend_from_slice(num.as_bytes());
            if j > 0 {
                csv.push(b',');
            }
            csv.extend_from_slice(num.as_bytes());
        }
        ctf.push(b'\n');
        csv.push(b'\n');
    }
    (ctf, csv)
}

/// The stream of [`dense`].
pub const DENSE_INPUTS: &[&str] = &["x:dense:200"];

/// About `bytes` of MNIST-like CTF: 784 small integers (mostly 0) in `|features` and a one-hot
/// sparse label of dimension 10 in `|labels`, and the same numbers as CSV. Returns (ctf, csv).
pub fn mnist(bytes: usize) -> (Vec<u8>, Vec<u8>) {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let (mut ctf, mut csv) = (Vec::with_capacity(bytes + 8192), Vec::with_capacity(bytes));
    while ctf.len() < bytes {
        ctf.extend_from_slice(b"|features");
        for j in 0..784 {
            let r = rng.next();
            let v = if r % 5 < 4 { 0 } else { (r >> 8) % 256 };
            let text = v.to_string();
            ctf.push(b' ');
            ctf.extend_from_slice(text.as_bytes());
            if j > 0 {
                csv.push(b',');
            }
            csv.extend_from_slice(text.as_bytes());
        }
        let label = rng.next() % 10;
        ctf.extend_from_slice(format!(" |labels {label}:1\n").as_bytes());
        csv.extend_from_slice(format!(",{label}\n").as_bytes());
    }
    (ctf, csv)
}

/// The streams of [`mnist`].
pub const MNIST_INPUTS: &[&str] = &["features:dense:784", "labels:sparse:10"];

/// Stream specifications from `name:storage:dim` texts.
pub fn specs(inputs: &[&str]) -> Vec<exfeed::StreamSpec> {
    inputs
        .iter()
        .map(|s| s.parse().expect("a valid stream specification"))
        .collect()
}

/// A Lens `.ex` of about `bytes`: 100 binary inputs and 20 three-decimal targets per example.
pub fn generated_ex(bytes: usize) -> Vec<u8> {
    let mut s = String::with_capacity(bytes + 4096);
    s.push_str(";\n");
    let mut k = 0u64;
    while s.len() < bytes {
        let _ = write!(s, "name:{{item {k}}}\nI:");
        for u in 0..100 {
            s.push_str(if (k + u).is_multiple_of(7) {
                " 1"
            } else {
                " 0"
            });
        }
        s.push_str("\nT:");
        for u in 0..20u64 {
            let _ = write!(s, " {:.3}", ((k * 31 + u) % 1000) as f64 / 1000.0);
        }
        s.push_str(";\n");
        k += 1;
    }
    s.into_bytes()
}

/// `text` (generated CTF with the streams `inputs`) parsed whole into one batch.
pub fn parsed<T: exfeed::Element>(text: &[u8], inputs: &[&str]) -> exfeed::SequenceBatch<T> {
    let opts = exfeed::ctf::CtfOptions {
        inputs: specs(inputs),
        ..Default::default()
    };
    let mut batch = exfeed::SequenceBatch::new(&opts.inputs);
    exfeed::ctf::parse(text, &opts, &mut batch, &mut Vec::new()).expect("generated CTF parses");
    batch
}

/// The Lens set of issue 13: `examples` examples of 3 events, each event 50 dense inputs with
/// three decimals (`I:`) and 2 sparse targets of 20 (`t:`); 100,000 examples make 97 MB.
pub fn lens_dense_ex(examples: usize) -> Vec<u8> {
    let mut rng = Rng(0x5851_f42d_4c95_7f2d);
    let mut s = String::with_capacity(examples * 1000);
    s.push_str(";\n");
    for k in 0..examples {
        let _ = write!(s, "name:{{item {k}}} 3");
        for _ in 0..3 {
            s.push_str("\nI:");
            for _ in 0..50 {
                let _ = write!(s, " {:.3}", (rng.next() % 1000) as f64 / 1000.0);
            }
            let a = rng.next() % 10;
            let _ = write!(s, " t: {a} {}", 10 + rng.next() % 10);
        }
        s.push_str(";\n");
    }
    s.into_bytes()
}

/// A Lens set of long sparse lists, about `bytes`: one event an example, 1000 of 100,000
/// input units on (`i:`, ascending) and one target of 10.
pub fn lens_sparse_ex(bytes: usize) -> Vec<u8> {
    let mut rng = Rng(0x1405_7b7e_f767_814f);
    let mut s = String::with_capacity(bytes + 16384);
    s.push_str(";\n");
    let mut k = 0;
    while s.len() < bytes {
        let _ = write!(s, "name:{{sparse {k}}}\ni:");
        let mut unit = 0;
        for _ in 0..1000 {
            unit += 1 + rng.next() % 199;
            let _ = write!(s, " {unit}");
        }
        let _ = writeln!(s, " t: {};", rng.next() % 10);
        k += 1;
    }
    s.into_bytes()
}
