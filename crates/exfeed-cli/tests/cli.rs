//! The real `exfeed` binary on temp files and on the conformance corpus.

mod common;

use common::{exfeed, exfeed_in, text};

fn temp_file(dir: &tempfile::TempDir, name: &str, content: &[u8]) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, content).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn dump_prints_json_lines() {
    let dir = tempfile::tempdir().unwrap();
    let f = temp_file(&dir, "d.ctf", b"1 |b 3:0.5 |a 1 2\n1 |a 0.1\n7 |a 3 4 |b\n");
    let out = exfeed(&[
        "dump",
        &f,
        "--input",
        "first:dense:2:a",
        "--input",
        "b:sparse:5",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "{\"key\":1,\"streams\":{\"first\":[[1,2],[0.1,0]],\"b\":[{\"indices\":[3],\"values\":[0.5]}]}}\n\
         {\"key\":7,\"streams\":{\"first\":[[3,4]],\"b\":[{\"indices\":[],\"values\":[]}]}}\n"
    );
    // The short sample is padded, with a warning naming file, line, column and byte.
    let err = text(&out.stderr);
    assert!(
        err.contains("d.ctf:2:4 (byte 21): input 'a': has 1 dense values, dim is 2"),
        "{err}"
    );
    let quiet = exfeed(&[
        "dump",
        &f,
        "--input",
        "first:dense:2:a",
        "--input",
        "b:sparse:5",
        "--trace-level",
        "0",
    ]);
    assert!(quiet.stderr.is_empty());
    let double = exfeed(&[
        "dump",
        &f,
        "--input",
        "first:dense:2:a",
        "--input",
        "b:sparse:5",
        "--precision",
        "double",
    ]);
    assert!(text(&double.stdout).contains("[0.1,0]"));
}

#[test]
fn dump_fails_on_bad_data_with_location() {
    let dir = tempfile::tempdir().unwrap();
    let f = temp_file(&dir, "bad.ctf", b"|a 1 2\n|a 1 2 3\n|a 1 x\n");
    let out = exfeed(&["dump", &f, "--input", "a:dense:2"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("bad.ctf:2:2 (byte 8): input 'a': has 3 dense values, dim is 2")
    );
    assert_eq!(
        text(&out.stdout).lines().count(),
        1,
        "the good sequence before the error is printed"
    );
    let out = exfeed(&["dump", &f, "--input", "a:dense:2", "--max-errors", "2"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout).lines().count(), 1);
    let out = exfeed(&["dump", &f, "--input", "a:dense:2", "--max-errors", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("maxErrors exceeded"));
}

#[test]
fn check_reports_and_summarises() {
    let dir = tempfile::tempdir().unwrap();
    let good = temp_file(
        &dir,
        "good.ctf",
        b"1 |a 1 2 |s 1:1 2:2\n1 |a 3 4\n2 |a 5 6 |s\n",
    );
    let bad = temp_file(
        &dir,
        "bad.ctf",
        b"|a 1 2 |s 9:1\n|a 1 2 3 |s 1:1\n|a 1 1 |s 1:1\n",
    );
    let args = ["--input", "a:dense:2", "--input", "s:sparse:5"];
    let out = exfeed(&[&["check", &good][..], &args].concat());
    let so = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{so}");
    assert!(so.contains("good.ctf: ok"));
    assert!(so.contains("sequences: 2"));
    assert!(so.contains("longest sequence: 2 samples (key 1)"));
    assert!(so.contains("input 'a' (dense 2): 3 samples"));
    assert!(so.contains("input 's' (sparse 5): 2 samples, 2 non-zeros"));
    let out = exfeed(&[&["check", &good, &bad, "--max-problems", "1"][..], &args].concat());
    let so = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{so}");
    assert!(
        so.contains("bad.ctf:1:11 (byte 10): input 's': sparse index 9 is out of range, dim is 5"),
        "{so}"
    );
    assert!(so.contains("... and 3 more problems not shown"), "{so}");
    assert!(so.contains("bad.ctf: invalid"));
    assert!(so.contains("sequences: 1"));
}

#[test]
fn usage_and_io_errors_exit_2() {
    let out = exfeed(&["check", "/nonexistent/x.ctf", "--input", "a:dense:1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stdout).contains("/nonexistent/x.ctf"));
    let out = exfeed(&["dump", "/nonexistent/x.ctf"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("/nonexistent/x.ctf: No such file"),
        "{}",
        text(&out.stderr)
    );
    let dir = tempfile::tempdir().unwrap();
    let ctf = temp_file(&dir, "a.ctf", b"|a 1\n");
    let out = exfeed(&["dump", &ctf]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--input"),
        "{}",
        text(&out.stderr)
    );
    let out = exfeed(&["dump", "x.ctf", "--input", "a:dense:0"]);
    assert_eq!(out.status.code(), Some(2));
    let dir = tempfile::tempdir().unwrap();
    let cbf = temp_file(&dir, "x.bin", &0x636e_746b_5f62_696e_u64.to_le_bytes());
    let out = exfeed(&["dump", &cbf, "--input", "a:dense:1"]);
    assert_ne!(out.status.code(), Some(0));
    // CBF is read now: a truncated one is a clean corruption error (exit 1).
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("x.bin (byte 8): version: needs 4 bytes"),
        "{}",
        text(&out.stderr)
    );
    let empty = temp_file(&dir, "e.ctf", b"\n  \n");
    let out = exfeed(&["check", &empty, "--input", "a:dense:1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("empty"));
}

/// Every CTF file of the corpus, with the inputs of its config in conformance/cntk/config
/// (written out by hand), the flags there, and what dump should do.
type Case = (
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
    Option<usize>,
);
const CORPUS: &[Case] = &[
    // (file, precision, inputs, extra flags, Some(sequences) when dump succeeds / None when it fails)
    (
        "1x1_dense.txt",
        "double",
        &["features:dense:10000:F"],
        &[],
        Some(1),
    ),
    (
        "1x2_dense.txt",
        "double",
        &["features:dense:100:F0"],
        &[],
        Some(1),
    ),
    (
        "1x10_dense.txt",
        "float",
        &["features:dense:10:F0"],
        &[],
        Some(1),
    ),
    (
        "10x1_MI_dense.txt",
        "float",
        &[
            "features1:dense:1:F1",
            "features2:dense:10:F2",
            "features3:dense:100:F3",
            "features4:dense:1000:F4",
            "labels1:dense:1:L1",
            "labels2:dense:10:L2",
            "labels3:dense:100:L3",
        ],
        &[],
        Some(10),
    ),
    (
        "10x10_dense.txt",
        "float",
        &["features:dense:5:F0"],
        &[],
        Some(10),
    ),
    (
        "100x1_dense.txt",
        "double",
        &["features:dense:100:F", "labels:dense:100:L"],
        &[],
        Some(100),
    ),
    (
        "MNIST_dense.txt",
        "double",
        &["features:dense:784:F", "labels:dense:10:L"],
        &[],
        Some(1000),
    ),
    (
        "Simple_dense.txt",
        "float",
        &["features:dense:2:F", "labels:dense:2:L"],
        &[],
        Some(10000),
    ),
    (
        "Simple_dense.txt",
        "float",
        &["features:dense:2:F"],
        &[],
        Some(10000),
    ),
    (
        "50x20_jagged_sequences_dense.txt",
        "double",
        &["features:dense:3:F0"],
        &[],
        Some(50),
    ),
    (
        "5x10_and_5x5_jagged.txt",
        "double",
        &["features1:dense:10:F0", "features2:dense:5:F1"],
        &[],
        Some(5),
    ),
    (
        "5x10_jagged.txt",
        "double",
        &["features1:dense:10:F0"],
        &[],
        Some(5),
    ),
    (
        "5x5_jagged.txt",
        "double",
        &["features2:dense:5:F1"],
        &[],
        Some(5),
    ),
    (
        "1x1_sparse.txt",
        "float",
        &["features:sparse:10000:F0"],
        &[],
        Some(1),
    ),
    (
        "1x2_sparse.txt",
        "float",
        &["features:sparse:1000:F0"],
        &[],
        Some(1),
    ),
    (
        "1x10_sparse.txt",
        "double",
        &["features:sparse:100:F0"],
        &[],
        Some(1),
    ),
    (
        "10x10_sparse.txt",
        "double",
        &["features:sparse:100:F0"],
        &[],
        Some(10),
    ),
    (
        "3x5_MI_sparse.txt",
        "float",
        &[
            "features1:sparse:2:F0",
            "features2:sparse:20:F1",
            "features3:sparse:200:F2",
        ],
        &[],
        Some(3),
    ),
    (
        "20x10_MI_jagged_samples_sparse.txt",
        "float",
        &[
            "features1:sparse:2:F0",
            "features2:sparse:20:F1",
            "features3:sparse:200:F2",
        ],
        &[],
        Some(20),
    ),
    (
        "50x20_jagged_sequences_sparse.txt",
        "float",
        &["features:sparse:100:F0"],
        &[],
        Some(50),
    ),
    (
        "100x100_jagged_sparse.txt",
        "float",
        &["features:sparse:20:F0"],
        &[],
        Some(100),
    ),
    (
        "100x100_jagged_sequences_sparse.txt",
        "float",
        &["features:sparse:20:F0"],
        &[],
        Some(100),
    ),
    (
        "space_separated.txt",
        "double",
        &[
            "features1:dense:15:F1",
            "features2:dense:12:F2",
            "features3:dense:1:F3",
        ],
        &[],
        Some(1),
    ),
    (
        "missing_trailing_newline.txt",
        "double",
        &["features:dense:1"],
        &[],
        Some(1),
    ),
    (
        "contains_blank_lines.txt",
        "double",
        &["features:dense:1"],
        &["--skip-sequence-ids"],
        Some(2),
    ),
    (
        "contains_blank_lines.txt",
        "double",
        &["features:dense:1"],
        &["--max-errors", "2"],
        Some(2),
    ),
    (
        "duplicate_inputs.txt",
        "double",
        &["features1:dense:1:F1", "features2:dense:1:F2"],
        &[],
        None,
    ),
    (
        "empty_samples.txt",
        "float",
        &["features:dense:10:F0", "labels:sparse:10:F1"],
        &[],
        Some(3),
    ),
    (
        "ref_data_with_escape_sequences.txt",
        "float",
        &["features:sparse:100:F0", "labels:dense:3:F1"],
        &[],
        Some(3),
    ),
    (
        "invalid_inputs.txt",
        "float",
        &["A:dense:1", "B:sparse:10"],
        &["--max-errors", "1000"],
        Some(7),
    ),
];

#[test]
fn every_conformance_file() {
    let Some(dir) = common::conformance("cntk/ctf") else {
        return;
    };
    let mut covered = std::collections::HashSet::new();
    for (file, precision, inputs, extra, sequences) in CORPUS {
        covered.insert(*file);
        let path = dir.join(file);
        let mut args: Vec<&str> = vec![
            "dump",
            path.to_str().unwrap(),
            "--precision",
            precision,
            "--trace-level",
            "0",
        ];
        for i in *inputs {
            args.extend(["--input", i]);
        }
        args.extend(*extra);
        let out = exfeed(&args);
        let so = text(&out.stdout);
        match sequences {
            Some(n) => {
                assert_eq!(out.status.code(), Some(0), "{file}: {}", text(&out.stderr));
                assert_eq!(so.lines().count(), *n, "{file}");
                for line in so.lines() {
                    let v: serde_json::Value = serde_json::from_str(line).unwrap();
                    let streams = v["streams"].as_object().unwrap();
                    for (spec, (name, samples)) in inputs.iter().zip(streams) {
                        let parts: Vec<&str> = spec.split(':').collect();
                        assert_eq!(parts[0], name);
                        let dim: usize = parts[2].parse().unwrap();
                        for s in samples.as_array().unwrap() {
                            if parts[1] == "dense" {
                                assert_eq!(s.as_array().unwrap().len(), dim, "{file}");
                            } else {
                                assert!(s["indices"]
                                    .as_array()
                                    .unwrap()
                                    .iter()
                                    .all(|i| i.as_u64().unwrap() < dim as u64));
                            }
                        }
                    }
                }
            }
            None => {
                assert_eq!(out.status.code(), Some(1), "{file}");
                assert!(
                    text(&out.stderr).contains(&format!("{file}:")),
                    "{file}: {}",
                    text(&out.stderr)
                );
            }
        }
        args[0] = "check";
        let out = exfeed(&args);
        assert!(text(&out.stdout).contains("sequences: "), "{file}");
        assert!(matches!(out.status.code(), Some(0 | 1)), "{file}");
    }
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(
            covered.contains(name.as_str()),
            "{name} is not in the table"
        );
    }
}

#[test]
fn dump_reads_stdin_and_trace_level_2_shows_info() {
    let out = exfeed_in(
        std::path::Path::new("."),
        [
            "dump",
            "-",
            "--input",
            "a:dense:1",
            "--trace-level",
            "2",
            "--skip-sequence-ids",
        ],
        Some(b"5 |a 1 |zz 2\r\n5 |a -2.5e-1".as_slice()),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "{\"key\":0,\"streams\":{\"a\":[[1]]}}\n{\"key\":1,\"streams\":{\"a\":[[-0.25]]}}\n"
    );
    assert!(
        text(&out.stderr).contains("-:1:9 (byte 8): skipping unknown input 'zz'"),
        "{}",
        text(&out.stderr)
    );
}
