//! Resuming on another number of workers, with the real binary: every old worker's
//! `--save-state`, then `--restore-state` (several files or a directory) with another
//! `--num-workers`. The rest of the interrupted sweep comes exactly once, and the next sweep is
//! a fresh reader's with the new count.

mod common;

use common::{ctf_data as data, dumped_minibatches, exfeed, text};
use std::collections::BTreeMap;
use std::process::Output;

const SEQUENCES: u64 = 120;

/// `exfeed read` of worker `rank` of `workers`, the chunks found by `index` (full: by the
/// index; none: byte ranges, whose sequences are counted when a resume needs them).
fn run(file: &str, index: &str, workers: usize, rank: usize, extra: &[&str]) -> Output {
    let (w, r) = (workers.to_string(), rank.to_string());
    let mut args = vec![
        "read",
        file,
        "--input",
        "x:dense:2",
        "-m",
        "6",
        "--dump",
        "--chunk-size",
        "150",
        "--index",
        index,
        "--window-chunks",
        "3",
        "--seed",
        "5",
        "--max-sweeps",
        "2",
        "--num-workers",
        &w,
        "--worker-rank",
        &r,
    ];
    args.extend_from_slice(extra);
    exfeed(args)
}

fn read(file: &str, index: &str, workers: usize, rank: usize, extra: &[&str]) -> Output {
    let out = run(file, index, workers, rank, extra);
    assert!(out.status.success(), "{}", text(&out.stderr));
    out
}

/// The (sweep, key) of every sequence dumped, in order.
fn sequences(out: &Output) -> Vec<(u64, u64)> {
    let mut all = Vec::new();
    for mb in dumped_minibatches(out) {
        for s in mb["sequences"].as_array().unwrap() {
            all.push((s["sweep"].as_u64().unwrap(), s["key"].as_u64().unwrap()));
        }
    }
    all
}

#[test]
fn the_rest_of_a_sweep_once_on_another_count_then_a_fresh_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let f = data(&dir, SEQUENCES);
    // (old workers, where each stops, new workers); the old ones stop in sweep 0.
    // A read of one worker: its one state file is the whole read.
    let cases: [(usize, &[u64], usize); 4] = [
        (2, &[3, 9], 3),
        (3, &[0, 4, 7], 1),
        (4, &[2, 5, 1, 6], 2),
        (1, &[5], 2),
    ];
    for ((old, stops, new), index) in cases
        .into_iter()
        .flat_map(|case| ["full", "none"].map(|index| (case, index)))
    {
        let states = dir.path().join(format!("states-{old}-{new}-{index}"));
        std::fs::create_dir(&states).unwrap();
        let mut by_sweep: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        let mut files = Vec::new();
        for (rank, stop) in stops.iter().enumerate() {
            let state = states.join(format!("{rank}.json")).display().to_string();
            let stop = stop.to_string();
            let out = read(
                &f,
                index,
                old,
                rank,
                &["--stop-after", &stop, "--save-state", &state],
            );
            for (sweep, key) in sequences(&out) {
                assert_eq!(sweep, 0);
                by_sweep.entry(sweep).or_default().push(key);
            }
            files.push(state);
        }
        for rank in 0..new {
            // A directory of states for some, the files one by one for the others.
            let dir_arg = states.display().to_string();
            let mut restore = Vec::new();
            if rank % 2 == 0 {
                restore.extend(["--restore-state", dir_arg.as_str()]);
            } else {
                for file in &files {
                    restore.extend(["--restore-state", file.as_str()]);
                }
            }
            let got = sequences(&read(&f, index, new, rank, &restore));
            let fresh = sequences(&read(&f, index, new, rank, &[]));
            let later = |v: &[(u64, u64)]| -> Vec<(u64, u64)> {
                v.iter().filter(|(s, _)| *s == 1).copied().collect()
            };
            assert_eq!(
                later(&got),
                later(&fresh),
                "{old} -> {new}, index {index}, worker {rank}"
            );
            for (sweep, key) in got {
                by_sweep.entry(sweep).or_default().push(key);
            }
        }
        let whole: Vec<u64> = (0..SEQUENCES).collect();
        for (sweep, mut keys) in by_sweep {
            keys.sort_unstable();
            assert_eq!(keys, whole, "{old} -> {new}, index {index}, sweep {sweep}");
        }
    }
}

#[test]
fn a_missing_state_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let f = data(&dir, SEQUENCES);
    let state = |rank: usize| {
        dir.path()
            .join(format!("{rank}.json"))
            .display()
            .to_string()
    };
    for rank in 0..3 {
        read(
            &f,
            "full",
            3,
            rank,
            &["--stop-after", "2", "--save-state", &state(rank)],
        );
    }
    let out = run(
        &f,
        "full",
        2,
        0,
        &["--restore-state", &state(0), "--restore-state", &state(2)],
    );
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("worker(s) 1 of 3 are missing"), "{err}");
}

#[test]
fn equalize_resumes_on_another_count_with_ranks_in_step() {
    let dir = tempfile::tempdir().unwrap();
    let f = data(&dir, SEQUENCES);
    for mode in ["repeat", "spread"] {
        let eq = ["--equalize", "--equalize-mode", mode];
        // 3 workers (ranks) stop in sweep 0; 2 or 4 resume.
        let stops = [2u64, 5, 4];
        let states = dir.path().join(format!("equalized-{mode}"));
        std::fs::create_dir(&states).unwrap();
        let mut old = Vec::new();
        for (rank, stop) in stops.iter().enumerate() {
            let state = states.join(format!("{rank}.json")).display().to_string();
            let stop = stop.to_string();
            let mut extra = vec!["--stop-after", &stop, "--save-state", &state];
            extra.extend(eq);
            let out = read(&f, "full", 3, rank, &extra);
            old.push(sequences(&out));
        }
        for new in [2, 4] {
            let dir_arg = states.display().to_string();
            let mut readers: Vec<Vec<(u64, u64)>> = old.clone();
            let mut steps = Vec::new();
            for rank in 0..new {
                let mut extra = vec!["--restore-state", dir_arg.as_str()];
                extra.extend(eq);
                let out = read(&f, "full", new, rank, &extra);
                let rest = dumped_minibatches(&out)
                    .iter()
                    .filter(|mb| mb["sequences"][0]["sweep"] == 0)
                    .count();
                steps.push(rest);
                let got = sequences(&out);
                let fresh = sequences(&read(&f, "full", new, rank, &eq));
                let later = |v: &[(u64, u64)]| -> Vec<(u64, u64)> {
                    v.iter().filter(|(s, _)| *s == 1).copied().collect()
                };
                assert_eq!(
                    later(&got),
                    later(&fresh),
                    "{mode}: 3 -> {new}, worker {rank}"
                );
                readers.push(got);
            }
            assert!(
                steps[0] > 0 && steps.iter().all(|&s| s == steps[0]),
                "{mode}: 3 -> {new}: {steps:?}"
            );
            // No sequence of sweep 0 from two readers (repeat repeats a worker's own part
            // only); spread: every one exactly once.
            let mut seen = std::collections::BTreeSet::new();
            let mut all = Vec::new();
            for keys in &readers {
                let own: std::collections::BTreeSet<u64> = keys
                    .iter()
                    .filter(|(s, _)| *s == 0)
                    .map(|(_, k)| *k)
                    .collect();
                assert!(seen.is_disjoint(&own), "{mode}: 3 -> {new}");
                seen.extend(own);
                all.extend(keys.iter().filter(|(s, _)| *s == 0).map(|(_, k)| *k));
            }
            if mode == "spread" {
                all.sort_unstable();
                assert_eq!(all, (0..SEQUENCES).collect::<Vec<_>>(), "3 -> {new}: once");
            }
        }
    }
}
