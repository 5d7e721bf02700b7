//! The conformance CBF files written by CNTK's ctf2bin.py: every one reads, holds the sequences
//! of its CTF source, and (where ctf2bin wrote one chunk) our writer reproduces it byte for byte.
//!
//! The CTF sources are read here by a minimal reader for these well-formed files (optional id,
//! `|name` dense values or `index:value` pairs), parsing values as Python's `float()` does (to
//! double) as ctf2bin.py does before packing them.

mod common;

use exfeed::cbf::{CbfFile, CbfWriter, CbfWriterOptions};
use exfeed::{Precision, SequenceBatch, Storage, StreamSpec};
use std::path::Path;

/// Reads a ctf2bin header file: `name alias dense|sparse dim` per line.
fn header(path: &Path) -> Vec<StreamSpec> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let mut s = StreamSpec::new(f[0], f[2].parse().unwrap(), f[3].parse().unwrap());
            s.alias = Some(f[1].to_string());
            s
        })
        .collect()
}

fn mini_ctf(path: &Path, specs: &[StreamSpec]) -> SequenceBatch<f64> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut batch = SequenceBatch::<f64>::new(specs);
    let mut current: Option<String> = None;
    let mut open = false;
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        let bar = line.find('|').unwrap();
        let id = line[..bar].trim();
        let id = if id.is_empty() {
            None
        } else {
            Some(id.to_string())
        };
        // A new sequence when the id changes; without ids every line is one sequence.
        let new_seq = id.is_none() && current.is_none() || id.is_some() && id != current;
        if new_seq && open {
            batch.finish_sequence(batch.len() as u64);
        }
        if id.is_some() {
            current = id;
        }
        open = true;
        for field in line[bar + 1..].split('|') {
            let mut toks = field.split_whitespace();
            let name = toks.next().unwrap();
            let t = specs.iter().position(|s| s.name_in_file() == name).unwrap();
            let s = batch.stream_mut(t);
            match s.storage() {
                Storage::Dense => {
                    let values: Vec<f64> = toks.map(|v| v.parse().unwrap()).collect();
                    s.push_dense_sample(&values);
                }
                Storage::Sparse => {
                    let (indices, values): (Vec<u32>, Vec<f64>) = toks
                        .map(|p| {
                            let (i, v) = p.split_once(':').unwrap();
                            (i.parse::<u32>().unwrap(), v.parse::<f64>().unwrap())
                        })
                        .unzip();
                    s.push_sparse_sample(&indices, &values);
                }
            }
        }
    }
    if open {
        batch.finish_sequence(batch.len() as u64);
    }
    batch
}

const CASES: &[(&str, &str)] = &[
    ("h_10x10_dense.txt", "10x10_dense"),
    ("h_10x10_sparse.txt", "10x10_sparse"),
    ("h_50x20_dense.txt", "50x20_jagged_sequences_dense"),
    ("h_50x20_sparse.txt", "50x20_jagged_sequences_sparse"),
    ("h_simple.txt", "Simple_dense"),
];

#[test]
fn every_conformance_cbf_file_reads_and_validates() {
    let Some(dir) = common::conformance("cntk/cbf") else {
        return;
    };
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let f =
            CbfFile::open(bytes.as_slice()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let seqs = f
            .validate_all()
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(seqs > 0);
        n += 1;
    }
    assert_eq!(n, 6);
}

#[test]
fn cbf_files_hold_their_ctf_sources_and_are_reproduced_byte_for_byte() {
    let Some(root) = common::conformance("cntk") else {
        return;
    };
    for &(h, name) in CASES {
        let specs = header(&root.join("ctf2bin-headers").join(h));
        let source = mini_ctf(&root.join("ctf").join(format!("{name}.txt")), &specs);
        let bin = std::fs::read(root.join("cbf").join(format!("{name}.bin"))).unwrap();
        let f = CbfFile::open(bin.as_slice()).unwrap();
        assert_eq!(f.num_chunks(), 1, "{name}");
        let precision = f.streams()[0].element;

        // Same sequences (keys are 0-based indices in both).
        let mut got = SequenceBatch::<f64>::new(&[]);
        f.read_chunk(0, &mut got).unwrap();
        assert_eq!(got.len(), source.len(), "{name}");
        let mut want = source.clone();
        if precision == Precision::Float {
            // What a float file can hold: the values rounded to f32.
            want = round_to_f32(&source);
        }
        assert_eq!(got, want, "{name}");

        // Byte identity.
        let mut w = CbfWriter::new(
            Vec::new(),
            &specs,
            CbfWriterOptions {
                chunk_size: u64::MAX,
                precision,
            },
        )
        .unwrap();
        w.write_batch(&source).unwrap();
        let ours = w.finish().unwrap();
        assert!(
            ours == bin,
            "{name}: bytes differ from ctf2bin.py's (len {} vs {})",
            ours.len(),
            bin.len()
        );
    }
}

fn round_to_f32(b: &SequenceBatch<f64>) -> SequenceBatch<f64> {
    let mut out = b.clone();
    // Rebuild stream by stream through a float batch.
    let mut w = CbfWriter::new(
        Vec::new(),
        &b.streams()
            .iter()
            .enumerate()
            .map(|(i, s)| StreamSpec::new(format!("s{i}"), s.storage(), s.dim()))
            .collect::<Vec<_>>(),
        CbfWriterOptions {
            chunk_size: u64::MAX,
            precision: Precision::Float,
        },
    )
    .unwrap();
    w.write_batch(b).unwrap();
    let bytes = w.finish().unwrap();
    let f = CbfFile::open(bytes.as_slice()).unwrap();
    f.read_chunk(0, &mut out).unwrap();
    out
}

#[test]
fn real_files_truncated_or_flipped_give_clean_errors() {
    let Some(dir) = common::conformance("cntk/cbf") else {
        return;
    };
    for name in ["10x10_sparse.bin", "10x10_dense.bin"] {
        let good = std::fs::read(dir.join(name)).unwrap();
        for cut in 0..good.len() {
            let r = CbfFile::open(&good[..cut]).and_then(|f| f.validate_all());
            assert_eq!(
                r.unwrap_err().kind(),
                exfeed::ErrorKind::Corrupt,
                "{name} cut at {cut}"
            );
        }
        let mut bytes = good.clone();
        for i in 0..good.len() {
            for v in [0x00u8, 0xff, good[i] ^ 0x40] {
                bytes[i] = v;
                if let Ok(f) = CbfFile::open(&bytes[..]) {
                    let _ = f.validate_all();
                }
            }
            bytes[i] = good[i];
        }
    }
}

/// With the real CTF parser: `convert` reproduces ctf2bin's bytes, and CTF -> CBF -> CTF -> CBF
/// gives the same CBF bytes the second time.
#[test]
fn conversion_reproduces_ctf2bin_and_round_trips() {
    use exfeed::convert::{cbf_to_ctf, ctf_to_cbf, CtfToCbfOptions};
    use exfeed::ctf::CtfOptions;
    let Some(root) = common::conformance("cntk") else {
        return;
    };
    for &(h, name) in CASES {
        let specs = header(&root.join("ctf2bin-headers").join(h));
        let text = std::fs::read(root.join("ctf").join(format!("{name}.txt"))).unwrap();
        let bin = std::fs::read(root.join("cbf").join(format!("{name}.bin"))).unwrap();
        let precision = CbfFile::open(bin.as_slice()).unwrap().streams()[0].element;
        let mut options = CtfToCbfOptions {
            file: name.to_string(),
            ctf: CtfOptions {
                inputs: specs.clone(),
                ..Default::default()
            },
            cbf: CbfWriterOptions {
                chunk_size: u64::MAX,
                precision,
            },
        };
        let mut diags = Vec::new();
        let (ours, stats) = ctf_to_cbf(&text, &options, Vec::new(), &mut diags, |_| {}).unwrap();
        assert!(
            ours == bin,
            "{name}: convert's bytes differ from ctf2bin.py's"
        );
        assert_eq!(stats.chunks, 1);

        // CBF -> CTF -> CBF, with small chunks too.
        for chunk_size in [u64::MAX, 3000] {
            options.cbf.chunk_size = chunk_size;
            let (first, _) = ctf_to_cbf(&text, &options, Vec::new(), &mut diags, |_| {}).unwrap();
            let f = CbfFile::open(first.as_slice()).unwrap();
            let (ctf2, s2) = cbf_to_ctf(&f, Vec::new(), |_| {}).unwrap();
            assert_eq!(s2.sequences, f.num_sequences());
            // The CTF written names streams as stored in the CBF file.
            let again = CtfToCbfOptions {
                file: "round trip".into(),
                ctf: CtfOptions {
                    inputs: specs
                        .iter()
                        .map(|s| StreamSpec::new(s.name.clone(), s.storage, s.dim))
                        .collect(),
                    ..Default::default()
                },
                cbf: options.cbf.clone(),
            };
            let (second, _) = ctf_to_cbf(&ctf2, &again, Vec::new(), &mut diags, |_| {}).unwrap();
            assert!(
                second == first,
                "{name} chunk size {chunk_size}: CBF -> CTF -> CBF changed the bytes"
            );
            // And the CTF is stable too.
            let (ctf3, _) = cbf_to_ctf(
                &CbfFile::open(second.as_slice()).unwrap(),
                Vec::new(),
                |_| {},
            )
            .unwrap();
            assert_eq!(ctf3, ctf2);
        }
        assert!(
            diags
                .iter()
                .all(|d: &exfeed::Diagnostic| d.severity != exfeed::Severity::Error),
            "{diags:?}"
        );
    }
}
