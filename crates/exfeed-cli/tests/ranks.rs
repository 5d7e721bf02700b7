//! Ranks that stay in step, with the real binary: the warning for a worker with (almost) no
//! data, `--chunk-size auto`, and `--equalize`.

mod common;

use common::{ctf_data as data, dumped_minibatches, exfeed, text};
use std::collections::BTreeMap;
use std::process::Output;

fn total_samples(n: u64) -> u64 {
    (0..n).map(|k| k % 4 + 1).sum()
}

fn read(file: &str, workers: usize, rank: usize, extra: &[&str]) -> Output {
    let (w, r) = (workers.to_string(), rank.to_string());
    let mut args = vec![
        "read",
        file,
        "--input",
        "x:dense:2",
        "-m",
        "8",
        "--dump",
        "--num-workers",
        &w,
        "--worker-rank",
        &r,
    ];
    args.extend_from_slice(extra);
    exfeed(args)
}

/// The dumped minibatches: (end_of_sweep, [(sweep, key)]).
fn minibatches(out: &Output) -> Vec<(bool, Vec<(u64, u64)>)> {
    let summary = |mb: &serde_json::Value| {
        let seqs = mb["sequences"].as_array().unwrap().iter();
        let seqs = seqs
            .map(|s| (s["sweep"].as_u64().unwrap(), s["key"].as_u64().unwrap()))
            .collect();
        (mb["end_of_sweep"].as_bool().unwrap(), seqs)
    };
    dumped_minibatches(out).iter().map(summary).collect()
}

#[test]
fn a_worker_without_data_is_warned() {
    let dir = tempfile::tempdir().unwrap();
    let f = data(&dir, 50);
    let out = read(&f, 2, 1, &[]);
    assert!(minibatches(&out).is_empty());
    let err = text(&out.stderr);
    assert!(
        err.contains("warning: worker 1 of 2 gets no data in sweep 0")
            && err.contains("1 chunk(s) for 2 workers")
            && err.contains("--chunk-size auto"),
        "{err}"
    );
    let out = read(&f, 2, 0, &[]);
    assert!(
        !text(&out.stderr).contains("warning"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_worker_with_far_less_than_the_others_is_warned() {
    let dir = tempfile::tempdir().unwrap();
    // Four sequences, one chunk each: the first of 40 samples, the others of one.
    let mut text_ = String::new();
    for t in 0..40 {
        text_.push_str(&format!("0 |x 0 {t}\n"));
    }
    text_.push_str("1 |x 1 0\n2 |x 2 0\n3 |x 3 0\n");
    let f = dir.path().join("uneven.ctf");
    std::fs::write(&f, text_).unwrap();
    let f = f.to_str().unwrap();
    // The index's chunks and sample counts (without one they are byte ranges and estimates).
    let args = ["--chunk-size", "8", "--no-randomize", "--index", "full"];
    // File order: worker 0 reads chunks 0 and 2 (41 samples), worker 1 chunks 1 and 3 (2).
    let out = read(f, 2, 1, &args);
    assert_eq!(minibatches(&out).len(), 1);
    let err = text(&out.stderr);
    assert!(
        err.contains(
            "worker 1 of 2 gets 2 samples of sweep 0, less than half the workers' mean of 21"
        ),
        "{err}"
    );
    let out = read(f, 2, 0, &args);
    minibatches(&out);
    assert!(
        !text(&out.stderr).contains("warning"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn auto_chunk_size_gives_every_worker_its_part() {
    let dir = tempfile::tempdir().unwrap();
    let f = data(&dir, 50);
    let mut per_sweep: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for rank in 0..3 {
        let out = read(&f, 3, rank, &["--chunk-size", "auto", "--max-sweeps", "2"]);
        let mbs = minibatches(&out);
        assert!(!mbs.is_empty(), "rank {rank}");
        assert!(
            !text(&out.stderr).contains("warning"),
            "{}",
            text(&out.stderr)
        );
        for (sweep, key) in mbs.into_iter().flat_map(|m| m.1) {
            per_sweep.entry(sweep).or_default().push(key);
        }
    }
    for keys in per_sweep.values_mut() {
        keys.sort_unstable();
        assert_eq!(*keys, (0..50).collect::<Vec<_>>());
    }
    assert_eq!(per_sweep.len(), 2);
    assert!(exfeed(["read", "--help"])
        .stdout
        .windows(4)
        .any(|w| w == b"auto"));
}

#[test]
fn equalize_gives_every_worker_the_same_minibatches_per_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let f = data(&dir, 50);
    let quota = (total_samples(50) / (3 * 8)) as usize;
    let mut outcomes = Vec::new();
    for rank in 0..3 {
        // The index's counts, which the notes compare with (see the next test without one).
        let args = [
            "--equalize",
            "--chunk-size",
            "200",
            "--max-sweeps",
            "2",
            "--seed",
            "4",
            "--index",
            "full",
        ];
        let out = read(&f, 3, rank, &args);
        let mbs = minibatches(&out);
        let err = text(&out.stderr);
        for sweep in 0..2u64 {
            let mine: Vec<&(bool, Vec<(u64, u64)>)> =
                mbs.iter().filter(|m| m.1[0].0 == sweep).collect();
            assert_eq!(mine.len(), quota, "rank {rank} sweep {sweep}");
            assert!(
                mine.last().unwrap().0,
                "the quota's last minibatch ends the sweep"
            );
            // The note says what was repeated or dropped, and it matches the keys.
            let keys: Vec<u64> = mine.iter().flat_map(|m| m.1.iter().map(|s| s.1)).collect();
            let mut unique = keys.clone();
            unique.sort_unstable();
            unique.dedup();
            let prefix = format!("note: equalize: sweep {sweep}: worker {rank} of 3 delivered {quota} minibatches, {} sequences", keys.len());
            let note = err
                .lines()
                .find(|l| l.contains(&prefix))
                .unwrap_or_else(|| panic!("{err}"));
            if let Some(n) = note.split("repeated ").nth(1) {
                let n: usize = n.split(' ').next().unwrap().parse().unwrap();
                assert_eq!(keys.len() - unique.len(), n, "{note}");
                outcomes.push("repeated");
            } else {
                assert_eq!(keys.len(), unique.len(), "{note}");
                outcomes.push(if note.contains("dropped") {
                    "dropped"
                } else {
                    "once"
                });
            }
        }
    }
    // The seed and sizes make both cases happen.
    assert!(
        outcomes.contains(&"repeated") && outcomes.contains(&"dropped"),
        "{outcomes:?}"
    );
}

#[test]
fn equalize_resumes_exactly_and_refuses_a_worker_without_data() {
    let dir = tempfile::tempdir().unwrap();
    let f = data(&dir, 50);
    let state = dir.path().join("state.json").display().to_string();
    let args = ["--equalize", "--chunk-size", "200", "--max-sweeps", "3"];
    let whole = minibatches(&read(&f, 3, 1, &args));
    let mut first = args.to_vec();
    first.extend(["--stop-after", "7", "--save-state", &state]);
    let mut got = minibatches(&read(&f, 3, 1, &first));
    let mut rest = args.to_vec();
    rest.extend(["--restore-state", &state]);
    got.extend(minibatches(&read(&f, 3, 1, &rest)));
    assert_eq!(got, whole);
    // One chunk for three workers: equalize cannot make minibatches from nothing.
    let out = read(&f, 3, 2, &["--equalize"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("equalize: worker 2 of 3 has no data"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_configuration_says_equalize() {
    let dir = tempfile::tempdir().unwrap();
    let f = data(&dir, 50);
    let cfg = dir.path().join("eq.cntk");
    std::fs::write(
        &cfg,
        format!(
            "reader = [ readerType = CNTKTextFormatReader; file = \"{f}\"; equalize = true\n\
             chunkSizeInBytes = 200; input = [ x = [ dim = 2; format = dense ] ] ]\n"
        ),
    )
    .unwrap();
    let quota = (total_samples(50) / (3 * 8)) as usize;
    for rank in 0..3 {
        let (w, r) = ("3".to_string(), rank.to_string());
        let args = [
            "read",
            "--config",
            cfg.to_str().unwrap(),
            "-m",
            "8",
            "--dump",
        ];
        let out = exfeed(
            args.iter()
                .copied()
                .chain(["--num-workers", &w, "--worker-rank", &r]),
        );
        assert_eq!(minibatches(&out).len(), quota, "rank {rank}");
        assert!(text(&out.stderr).contains("note: equalize: sweep 0"));
    }
}
