//! `exfeed read --corpus`: many shard files as one data set, with the real binary and real
//! files (CTF, gzip-compressed CTF by the real gzip, CBF written by `exfeed convert`).

mod common;

use common::{exfeed, text};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Shard `shard` as CTF text: `n` sequences keyed 0..n, of 1 to 3 samples, whose values name
/// the shard and key.
fn shard_text(shard: u64, n: u64) -> String {
    let mut s = String::new();
    for k in 0..n {
        for t in 0..(k % 3 + 1) {
            s.push_str(&format!("{k} |x {shard} {}\n", k * 10 + t));
        }
    }
    s
}

/// Sequences per shard of the corpus [`make_corpus`] writes.
const SIZES: [u64; 3] = [40, 25, 33];

/// `dir/train-0.ctf`, `dir/train-1.ctf.gz` (gzip) and `dir/train-2.cbf` (converted), and
/// `dir/other.txt` that the glob must not take.
fn make_corpus(dir: &Path) {
    for (i, &n) in SIZES.iter().enumerate() {
        std::fs::write(dir.join(format!("train-{i}.ctf")), shard_text(i as u64, n)).unwrap();
    }
    let gz = Command::new("gzip")
        .arg(dir.join("train-1.ctf"))
        .status()
        .expect("gzip runs");
    assert!(gz.success());
    let ctf = dir.join("train-2.ctf");
    let cbf = dir.join("train-2.cbf");
    let out = exfeed([
        "convert".as_ref(),
        ctf.as_os_str(),
        cbf.as_os_str(),
        "--input".as_ref(),
        "x:dense:2".as_ref(),
        "--chunk-size".as_ref(),
        "64".as_ref(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    std::fs::remove_file(ctf).unwrap();
    std::fs::write(dir.join("other.txt"), "not a shard").unwrap();
}

fn read(args: &[&str]) -> std::process::Output {
    let mut all = vec!["read", "--input", "x:dense:2", "-m", "5", "--dump"];
    all.extend_from_slice(args);
    exfeed(all)
}

/// (sweep, "shard:key") of every sequence dumped.
fn dumped(out: &std::process::Output) -> Vec<(u64, String)> {
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .flat_map(|l| {
            let mb: serde_json::Value = serde_json::from_str(l).unwrap();
            mb["sequences"].as_array().unwrap().clone()
        })
        .map(|s| {
            let key = s["key"].as_str().expect("a corpus key is \"shard:key\"");
            (s["sweep"].as_u64().unwrap(), key.to_string())
        })
        .collect()
}

fn every_key() -> Vec<String> {
    let mut all: Vec<String> = SIZES
        .iter()
        .enumerate()
        .flat_map(|(i, &n)| (0..n).map(move |k| format!("{i}:{k}")))
        .collect();
    all.sort();
    all
}

#[test]
fn two_workers_read_every_sequence_of_every_shard_once_a_sweep() {
    let dir = tempfile::tempdir().unwrap();
    make_corpus(dir.path());
    let glob = dir.path().join("train-*").display().to_string();
    let mut per_sweep: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for rank in ["0", "1"] {
        let out = read(&[
            "--corpus",
            &glob,
            "--chunk-size",
            "64",
            "--max-sweeps",
            "2",
            "--seed",
            "3",
            "--num-workers",
            "2",
            "--worker-rank",
            rank,
        ]);
        let seqs = dumped(&out);
        assert!(seqs.len() > 20, "rank {rank} read {}", seqs.len());
        // Both workers read from several shards (one randomization over all chunks).
        let shards: std::collections::BTreeSet<&str> = seqs
            .iter()
            .map(|(_, k)| k.split(':').next().unwrap())
            .collect();
        assert!(shards.len() >= 2, "rank {rank}: shards {shards:?}");
        for (sweep, key) in seqs {
            per_sweep.entry(sweep).or_default().push(key);
        }
    }
    assert_eq!(per_sweep.len(), 2);
    for (sweep, mut keys) in per_sweep {
        keys.sort();
        assert_eq!(keys, every_key(), "sweep {sweep}");
    }
}

#[test]
fn a_list_file_names_the_shards_in_its_order() {
    let dir = tempfile::tempdir().unwrap();
    make_corpus(dir.path());
    // Relative to the list file's directory; comments and blank lines skipped.
    std::fs::write(
        dir.path().join("list.txt"),
        "# shards\ntrain-2.cbf\n\ntrain-0.ctf\n",
    )
    .unwrap();
    let list = format!("@{}", dir.path().join("list.txt").display());
    let seqs = dumped(&read(&["--corpus", &list, "--no-randomize"]));
    let keys: Vec<String> = seqs.into_iter().map(|(_, k)| k).collect();
    // File order: the list's first file (train-2.cbf) is shard 0.
    let want: Vec<String> = (0..SIZES[2])
        .map(|k| format!("0:{k}"))
        .chain((0..SIZES[0]).map(|k| format!("1:{k}")))
        .collect();
    assert_eq!(keys, want);
}

/// `dir/NAME` converted from CTF `ctf_text` with the input `input`.
fn cbf(dir: &Path, name: &str, ctf_text: &str, input: &str) {
    let ctf = dir.join(format!("{name}.ctf"));
    std::fs::write(&ctf, ctf_text).unwrap();
    let out = exfeed([
        "convert".as_ref(),
        ctf.as_os_str(),
        dir.join(name).as_os_str(),
        "--input".as_ref(),
        input.as_ref(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    std::fs::remove_file(ctf).unwrap();
}

#[test]
fn shards_with_other_streams_are_refused_naming_the_first_that_differs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    cbf(d, "a-0.cbf", &shard_text(0, 5), "x:dense:2");
    cbf(d, "a-1.cbf", &shard_text(1, 5), "x:dense:2");
    cbf(d, "a-2.cbf", "0 |x 1 2 3\n", "x:dense:3");
    std::fs::copy(d.join("a-2.cbf"), d.join("a-3.cbf")).unwrap();
    // Without --input every CBF shard has the streams it stores.
    let glob = d.join("a-*").display().to_string();
    let out = exfeed(["read", "--corpus", &glob, "-m", "5"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("corpus file") && err.contains("a-2.cbf has the streams x:dense:3"),
        "{err}"
    );
    assert!(
        err.contains("a-0.cbf: x:dense:2") && !err.contains("a-3.cbf"),
        "{err}"
    );
    // With --input, the shard that cannot give it is named.
    let out = read(&["--corpus", &glob]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("a-2.cbf") && !err.contains("a-3.cbf"), "{err}");
}

#[test]
fn a_pattern_that_names_no_file_and_files_with_a_corpus_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let glob = dir.path().join("none-*.ctf").display().to_string();
    let out = read(&["--corpus", &glob]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("names no file"),
        "{}",
        text(&out.stderr)
    );
    let out = read(&["some.ctf", "--corpus", &glob]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--corpus"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_configuration_names_a_corpus() {
    let dir = tempfile::tempdir().unwrap();
    make_corpus(dir.path());
    let cfg = dir.path().join("corpus.cntk");
    std::fs::write(
        &cfg,
        format!(
            "reader = [ readerType = CNTKTextFormatReader; corpus = \"{}\"; randomize = false\n\
             input = [ x = [ dim = 2; format = dense ] ] ]\n",
            dir.path().join("train-*").display()
        ),
    )
    .unwrap();
    let out = exfeed([
        "read",
        "--config",
        cfg.to_str().unwrap(),
        "-m",
        "5",
        "--dump",
    ]);
    let mut keys: Vec<String> = dumped(&out).into_iter().map(|(_, k)| k).collect();
    keys.sort();
    assert_eq!(keys, every_key());
}

#[test]
fn a_saved_state_is_refused_by_another_corpus() {
    let dir = tempfile::tempdir().unwrap();
    make_corpus(dir.path());
    let glob = dir.path().join("train-*").display().to_string();
    let state = dir.path().join("state.json").display().to_string();
    let out = read(&[
        "--corpus",
        &glob,
        "--stop-after",
        "2",
        "--save-state",
        &state,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The same corpus goes on; one without train-2.cbf is refused, naming the corpus.
    let out = read(&["--corpus", &glob, "--restore-state", &state]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let fewer = dir.path().join("train-[01]*").display().to_string();
    let out = read(&["--corpus", &fewer, "--restore-state", &state]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("corpus of 3 files, is a corpus of 2 files"),
        "{err}"
    );
}

#[test]
fn a_corpus_keeps_an_index_cache_per_file_and_says_so_in_one_count() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..6 {
        std::fs::write(dir.path().join(format!("s-{i}.ctf")), shard_text(i, 10)).unwrap();
    }
    // The caches (s-0.ctf.exfeed-index, ...) match the glob too, and are not shards.
    let glob = dir.path().join("s-*").display().to_string();
    let args = ["--corpus", &glob, "--cache-index"];
    let out = read(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("index scanned and cached x6)"),
        "{}",
        text(&out.stderr)
    );
    let out = read(&args);
    assert!(
        text(&out.stderr).contains("index from cache x6)"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(dumped(&out).len(), 60);
}

#[test]
fn a_saved_state_moves_with_the_corpus_to_another_directory() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir(&a).unwrap();
    make_corpus(&a);
    let state = dir.path().join("state.json").display().to_string();
    let glob = |d: &Path| d.join("train-*").display().to_string();
    let whole = dumped(&read(&["--corpus", &glob(&a)]));
    let mut got = dumped(&read(&[
        "--corpus",
        &glob(&a),
        "--stop-after",
        "3",
        "--save-state",
        &state,
    ]));
    std::fs::rename(&a, &b).unwrap();
    got.extend(dumped(&read(&[
        "--corpus",
        &glob(&b),
        "--restore-state",
        &state,
    ])));
    assert_eq!(got, whole);
}
