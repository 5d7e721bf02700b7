//! `exfeed read --index auto|full|none` with the real binary: reading a CTF file in byte ranges
//! without an index delivers the same sequences as with it, split between workers, from a
//! corpus and across a saved state; and the choices that cannot go together are refused.

mod common;

use common::{ctf_data, dumped_sequences, exfeed, text};
use std::process::Output;

fn read(file: &str, args: &[&str]) -> Output {
    let mut all = vec!["read", file, "--input", "x:dense:2", "-m", "7", "--dump"];
    all.extend_from_slice(args);
    exfeed(all)
}

/// The keys dumped, in order (failing on an unsuccessful run).
fn keys(out: &Output) -> Vec<u64> {
    dumped_sequences(out)
        .into_iter()
        .map(|s| s["key"].as_u64().unwrap())
        .collect()
}

#[test]
fn no_index_reads_the_same_sequences_as_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let file = ctf_data(&dir, 300);
    let ordered = ["--no-randomize", "--chunk-size", "100"];
    let full = read(&file, &[&ordered[..], &["--index", "full"]].concat());
    assert!(
        text(&full.stderr).contains("index scanned"),
        "{}",
        text(&full.stderr)
    );
    let want: Vec<u64> = (0..300).collect();
    assert_eq!(keys(&full), want);
    // Auto is none for a file with ids, and nothing else asking for the index.
    for index in ["none", "auto"] {
        let none = read(&file, &[&ordered[..], &["--index", index]].concat());
        assert!(
            text(&none.stderr).contains("index none (byte ranges)"),
            "{}",
            text(&none.stderr)
        );
        assert_eq!(keys(&none), want, "{index}");
    }
    // Randomized and split between 4 workers: every sequence once.
    let mut all = Vec::new();
    for rank in 0..4 {
        let r = rank.to_string();
        let args = [
            "--chunk-size",
            "64",
            "--num-workers",
            "4",
            "--worker-rank",
            &r,
        ];
        all.extend(keys(&read(&file, &args)));
    }
    all.sort();
    assert_eq!(all, want);
}

#[test]
fn a_saved_state_resumes_without_an_index_and_names_the_mode() {
    let dir = tempfile::tempdir().unwrap();
    let file = ctf_data(&dir, 200);
    let state = dir.path().join("state.json");
    let state = state.to_str().unwrap();
    let common = [
        "--chunk-size",
        "80",
        "--window-samples",
        "30",
        "--seed",
        "4",
    ];
    let whole = keys(&read(&file, &common));
    let first = keys(&read(
        &file,
        &[&common[..], &["--stop-after", "5", "--save-state", state]].concat(),
    ));
    let rest = keys(&read(
        &file,
        &[&common[..], &["--restore-state", state]].concat(),
    ));
    assert_eq!([first, rest].concat(), whole);
    let full = read(
        &file,
        &[&common[..], &["--restore-state", state, "--index", "full"]].concat(),
    );
    assert!(!full.status.success());
    assert!(
        text(&full.stderr)
            .contains("chunks as byte ranges without an index (index none) was true, is false"),
        "{}",
        text(&full.stderr)
    );
}

#[test]
fn what_needs_the_index_takes_it_and_what_conflicts_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = ctf_data(&dir, 50);
    let cached = read(&file, &["--cache-index"]);
    assert!(text(&cached.stderr).contains("index scanned and cached"));
    let errors = read(&file, &["--max-errors", "5"]);
    assert!(
        text(&errors.stderr).contains("index scanned"),
        "{}",
        text(&errors.stderr)
    );
    let both = read(&file, &["--cache-index", "--index", "none"]);
    assert!(!both.status.success());
    assert!(
        text(&both.stderr)
            .contains("index none reads the file without an index, and cacheIndex asks for one"),
        "{}",
        text(&both.stderr)
    );
    let bad = read(&file, &["--index", "some"]);
    assert!(!bad.status.success());
    assert!(
        text(&bad.stderr).contains("index 'some' is not one of auto, full, none"),
        "{}",
        text(&bad.stderr)
    );
    // The configuration's `index`, which the flag overrides.
    let cfg = dir.path().join("r.cntk");
    std::fs::write(
        &cfg,
        format!(
            "reader = [ readerType = CNTKTextFormatReader; file = \"{file}\"; index = \"full\"; randomize = false;\n\
             input = [ x = [ dim = 2; format = dense ] ] ]"
        ),
    )
    .unwrap();
    let cfg = cfg.to_str().unwrap();
    let from_config = exfeed(["read", "--config", cfg, "-m", "7"]);
    assert!(
        text(&from_config.stderr).contains("index scanned"),
        "{}",
        text(&from_config.stderr)
    );
    let flag = exfeed(["read", "--config", cfg, "-m", "7", "--index", "none"]);
    assert!(
        text(&flag.stderr).contains("index none (byte ranges)"),
        "{}",
        text(&flag.stderr)
    );
}

#[test]
fn a_corpus_of_plain_and_compressed_shards_without_an_index() {
    let dir = tempfile::tempdir().unwrap();
    for shard in 0..3 {
        let mut s = String::new();
        for k in 0..40 {
            for t in 0..(k % 3 + 1) {
                s.push_str(&format!("{k} |x {shard} {t}\n"));
            }
        }
        std::fs::write(dir.path().join(format!("s-{shard}.ctf")), s).unwrap();
    }
    let gz = std::process::Command::new("gzip")
        .arg(dir.path().join("s-1.ctf"))
        .status()
        .expect("gzip runs");
    assert!(gz.success());
    let glob = dir.path().join("s-*").to_str().unwrap().to_string();
    let mut all = Vec::new();
    for rank in ["0", "1"] {
        let out = exfeed([
            "read",
            "--corpus",
            &glob,
            "-i",
            "x:dense:2",
            "-m",
            "9",
            "--dump",
            "--index",
            "none",
            "--chunk-size",
            "50",
            "--num-workers",
            "2",
            "--worker-rank",
            rank,
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr)
                .contains("index none (byte ranges),none (byte ranges),none (byte ranges)"),
            "{}",
            text(&out.stderr)
        );
        for l in text(&out.stdout).lines() {
            let mb: serde_json::Value = serde_json::from_str(l).unwrap();
            for s in mb["sequences"].as_array().unwrap() {
                all.push(s["key"].as_str().unwrap().to_string());
            }
        }
    }
    all.sort();
    let mut want: Vec<String> = (0..3)
        .flat_map(|shard| (0..40).map(move |k| format!("{shard}:{k}")))
        .collect();
    want.sort();
    assert_eq!(all, want);
}

#[test]
fn equalize_keeps_ranks_in_step_without_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let file = ctf_data(&dir, 120);
    let mut counts = Vec::new();
    for rank in ["0", "1", "2"] {
        let args = [
            "--equalize",
            "--chunk-size",
            "300",
            "--num-workers",
            "3",
            "--worker-rank",
            rank,
        ];
        let out = read(&file, &args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        // The quota comes from the estimated samples, the same on every rank.
        let note = "sequences (its part's sequences are not counted without an index)";
        assert!(text(&out.stderr).contains(note), "{}", text(&out.stderr));
        counts.push(text(&out.stdout).lines().count());
    }
    assert!(
        counts[0] > 0 && counts.iter().all(|&c| c == counts[0]),
        "{counts:?}"
    );
}
