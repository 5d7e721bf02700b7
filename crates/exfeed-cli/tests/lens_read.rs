//! `exfeed read` on Lens example files (.ex, .bex, compressed), with Lens's selection modes.

mod common;

use common::{exfeed, text};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Output;

fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// (sweep, key, samples) of every dumped sequence, and every minibatch's sample count.
fn sequences(mbs: &[serde_json::Value]) -> (Vec<(u64, u64, u64)>, Vec<u64>) {
    let seqs = mbs
        .iter()
        .flat_map(|mb| mb["sequences"].as_array().unwrap().iter())
        .map(|s| {
            (
                s["sweep"].as_u64().unwrap(),
                s["key"].as_u64().unwrap(),
                s["samples"].as_u64().unwrap(),
            )
        })
        .collect();
    let sizes = mbs
        .iter()
        .map(|mb| mb["samples"].as_u64().unwrap())
        .collect();
    (seqs, sizes)
}

/// Events per example, from `exfeed dump FILE` (one line per example after the header).
fn events_per_example(file: &str) -> Vec<u64> {
    let lines = json_lines(&exfeed(&["dump", file]));
    lines[1..]
        .iter()
        .map(|l| l["events"].as_array().unwrap().len() as u64)
        .collect()
}

#[test]
fn ordered_dump_of_real_files_is_file_order_with_a_sample_per_event() {
    let Some(dir) = common::conformance("lens/examples/lens_dist") else {
        return;
    };
    for (name, inputs, targets) in [
        ("sequence.ex", "in:5", "out:6"),
        ("rhw-sequence.trn.ex", "in:5", "out:3"),
        ("adder2.ex.gz", "in:2", "out:1"),
        ("hand-digits.trn.bex.gz", "in:64", "out:10"),
    ] {
        let file = dir.join(name).to_string_lossy().to_string();
        let events = events_per_example(&file);
        let out = exfeed(&[
            "read",
            &file,
            "--input-groups",
            inputs,
            "--target-groups",
            targets,
            "--lens-mode",
            "ordered",
            "--chunk-size",
            "512",
            "-m",
            "16",
            "--dump",
        ]);
        let (seqs, sizes) = sequences(&json_lines(&out));
        let want: Vec<(u64, u64, u64)> = events
            .iter()
            .enumerate()
            .map(|(k, &e)| (0, k as u64, e))
            .collect();
        assert_eq!(seqs, want, "{name}: every example once, in order");
        assert_eq!(sizes.iter().sum::<u64>(), events.iter().sum::<u64>());
        // Whole examples up to 16 samples, at least one example each.
        assert!(sizes.iter().all(|&s| s > 0), "{name}");
        let summary = text(&out.stderr);
        assert!(
            summary.contains(&format!("{} sequences", events.len())),
            "{summary}"
        );
    }
}

/// A text file of `n` examples with k % 3 + 1 events each and frequency `freq(k)`.
fn generated(dir: &Path, n: usize, freq: impl Fn(usize) -> f32) -> String {
    let mut s = String::from(";\n");
    for k in 0..n {
        let events = k % 3 + 1;
        s.push_str(&format!(
            "name: e{k} freq: {} {events}\nI: {k} 1 T: 0 ;\n",
            freq(k)
        ));
    }
    let p = dir.join("gen.ex");
    std::fs::write(&p, s).unwrap();
    p.to_string_lossy().to_string()
}

fn read_lens(file: &str, extra: &[&str]) -> Vec<(u64, u64, u64)> {
    let mut args = vec![
        "read",
        file,
        "--input-groups",
        "a:2",
        "--target-groups",
        "t:1",
        "--chunk-size",
        "64",
        "-m",
        "5",
        "--dump",
    ];
    args.extend_from_slice(extra);
    sequences(&json_lines(&exfeed(&args))).0
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn keys_by_sweep(seqs: &[(u64, u64, u64)]) -> BTreeMap<u64, Vec<u64>> {
    let mut m: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for &(s, k, _) in seqs {
        m.entry(s).or_default().push(k);
    }
    m
}

#[test]
fn modes_permuted_randomized_probabilistic_and_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let f = generated(dir.path(), 30, |k| [2.0, 0.0, 1.0][k % 3]);
    let all: Vec<u64> = (0..30).collect();
    let permuted = |seed: &str| {
        read_lens(
            &f,
            &["--lens-mode", "PERM", "--max-sweeps", "3", "--seed", seed],
        )
    };
    let p = permuted("4");
    for order in keys_by_sweep(&p).values() {
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, all);
    }
    assert_eq!(p, permuted("4"));
    assert_ne!(p, permuted("5"));
    // Without --lens-mode: the block randomizer; with no window given, a Lens file is one
    // window, so every sweep is a permutation too.
    let d = read_lens(&f, &["--max-sweeps", "2"]);
    for order in keys_by_sweep(&d).values() {
        let set: BTreeSet<u64> = order.iter().copied().collect();
        assert_eq!(set.len(), 30);
    }
    // RANDOMIZED: 30 draws a sweep, with repeats, reproducible.
    let r = read_lens(&f, &["--lens-mode", "randomized", "--seed", "8"]);
    assert_eq!(r.len(), 30);
    let distinct: BTreeSet<u64> = r.iter().map(|s| s.1).collect();
    assert!(distinct.len() < 30);
    assert_eq!(
        r,
        read_lens(&f, &["--lens-mode", "randomized", "--seed", "8"])
    );
    // PROBABILISTIC: frequency 0 (k % 3 == 1) never drawn; 2:1 for the others.
    let q = read_lens(&f, &["--lens-mode", "probabilistic", "--max-sweeps", "100"]);
    assert_eq!(q.len(), 3000);
    let mut counts = [0usize; 3];
    for s in &q {
        counts[s.1 as usize % 3] += 1;
        assert_eq!(s.2, s.1 % 3 + 1, "samples are the example's events");
    }
    assert_eq!(counts[1], 0);
    let ratio = counts[0] as f64 / counts[2] as f64;
    assert!((1.7..2.3).contains(&ratio), "{counts:?}");
}

#[test]
fn save_and_restore_continue_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let f = generated(dir.path(), 40, |k| (k % 4) as f32);
    for mode in ["ordered", "permuted", "randomized", "probabilistic"] {
        let base = ["--lens-mode", mode, "--max-sweeps", "2", "--seed", "3"];
        let whole = read_lens(&f, &base);
        let state = dir.path().join(format!("{mode}.state"));
        let state = state.to_str().unwrap();
        let mut first_args = base.to_vec();
        first_args.extend_from_slice(&["--stop-after", "7", "--save-state", state]);
        let first = read_lens(&f, &first_args);
        let mut rest_args = base.to_vec();
        rest_args.extend_from_slice(&["--restore-state", state]);
        let rest = read_lens(&f, &rest_args);
        let mut joined = first.clone();
        joined.extend(rest);
        assert_eq!(joined, whole, "{mode}");
    }
}

#[test]
fn workers_split_permuted_sweeps() {
    let dir = tempfile::tempdir().unwrap();
    let f = generated(dir.path(), 50, |_| 1.0);
    let mut per_sweep: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for rank in ["0", "1"] {
        let seqs = read_lens(
            &f,
            &[
                "--lens-mode",
                "permuted",
                "--max-sweeps",
                "2",
                "--num-workers",
                "2",
                "--worker-rank",
                rank,
            ],
        );
        assert!(!seqs.is_empty());
        for (s, k) in keys_by_sweep(&seqs) {
            per_sweep.entry(s).or_default().extend(k);
        }
    }
    for keys in per_sweep.values_mut() {
        keys.sort_unstable();
        assert_eq!(*keys, (0..50).collect::<Vec<_>>());
    }
}

#[test]
fn conflicts_and_missing_layout_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let f = generated(dir.path(), 5, |_| 1.0);
    let fail = |args: &[&str], needle: &str| {
        let out = exfeed(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    };
    let layout = ["--input-groups", "a:2", "--target-groups", "t:1", "-m", "4"];
    let with = |extra: &[&'static str]| -> Vec<String> {
        let mut v = vec!["read".to_string(), f.clone()];
        v.extend(layout.iter().chain(extra).map(|a| a.to_string()));
        v
    };
    fail(
        &strs(&with(&["--lens-mode", "permuted", "--no-randomize"])),
        "cannot be used with",
    );
    fail(
        &strs(&with(&["--lens-mode", "ordered", "--window-chunks", "2"])),
        "cannot be used with",
    );
    fail(
        &strs(&with(&["--lens-mode", "sideways"])),
        "ORDERED, PERMUTED",
    );
    fail(
        &["read", &f, "-m", "4"],
        "needs the network's layout: --input-groups and --target-groups",
    );
    fail(
        &["read", &f, "-m", "4", "--input-groups", "a:2"],
        "give both",
    );
    let ctf = dir.path().join("x.ctf");
    std::fs::write(&ctf, "0 |x 1\n").unwrap();
    let ctf = ctf.to_string_lossy().to_string();
    fail(
        &[
            "read",
            &ctf,
            "--input",
            "x:dense:1",
            "-m",
            "4",
            "--lens-mode",
            "ordered",
        ],
        // The flag given is named.
        "error: --lens-mode applies to Lens example files",
    );
    // All frequencies 0: PROBABILISTIC cannot draw.
    let zero = generated(dir.path(), 3, |_| 0.0);
    let out = exfeed(&[
        "read",
        &zero,
        "--input-groups",
        "a:2",
        "--target-groups",
        "t:1",
        "-m",
        "4",
        "--lens-mode",
        "prob",
    ]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains("frequency 0"),
        "{}",
        text(&out.stderr)
    );
    // A layout too small for the file: the example is named.
    let out = exfeed(&[
        "read",
        &f,
        "--input-groups",
        "a:1",
        "--target-groups",
        "t:1",
        "-m",
        "4",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("gen.ex") && err.contains("example"), "{err}");
}

#[test]
fn cache_index_and_max_errors_warn_that_they_do_not_apply() {
    let dir = tempfile::tempdir().unwrap();
    let f = generated(dir.path(), 5, |_| 1.0);
    let layout = ["--input-groups", "a:2", "--target-groups", "t:1", "-m", "4"];
    let out = exfeed(["read", f.as_str()].iter().chain(&layout).chain(&[
        "--cache-index",
        "--max-errors",
        "3",
    ]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    for what in ["cacheIndex", "maxErrors"] {
        assert!(
            err.contains(&format!(
                "warning: {f}: {what} does not apply to Lens example files"
            )),
            "{err}"
        );
    }
    assert!(!Path::new(&format!("{f}.exfeed-index")).exists());
}
