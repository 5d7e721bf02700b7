//! `exfeed read --mix`: data sets mixed by weight, with the real binary and real files (CTF,
//! and CBF written by `exfeed convert`), workers as separate processes, resume through
//! `--save-state`/`--restore-state`.

mod common;

use common::{convert_to_cbf, dumped_sequences, exfeed, text};
use std::collections::BTreeMap;
use std::path::Path;

/// CTF text of `n` sequences keyed 0..n, of 1 to 3 samples, whose values name the source.
fn ctf(source: u64, n: u64) -> String {
    let mut s = String::new();
    for k in 0..n {
        for t in 0..(k % 3 + 1) {
            s.push_str(&format!("{k} |x {source} {}\n", k * 10 + t));
        }
    }
    s
}

/// `a.ctf` (60 sequences, 120 samples) and the corpus `b/` of `part-0.ctf` (15 sequences, 30
/// samples) and `part-1.cbf` (15, converted): sources with the same streams in two formats.
fn make_sources(dir: &Path) {
    std::fs::write(dir.join("a.ctf"), ctf(0, 60)).unwrap();
    std::fs::create_dir(dir.join("b")).unwrap();
    std::fs::write(dir.join("b/part-0.ctf"), ctf(1, 15)).unwrap();
    let tmp = dir.join("part-1.ctf");
    std::fs::write(&tmp, ctf(2, 15)).unwrap();
    convert_to_cbf(&tmp, &dir.join("b/part-1.cbf"), "x:dense:2");
}

/// `exfeed read --mix MIX` (`DIR` in it standing for `dir`) with small chunks and the full
/// index (exact sample counts), dumping; `args` on top.
fn run(dir: &Path, mix: &str, args: &[&str]) -> std::process::Output {
    let mix = mix.replace("DIR", &dir.display().to_string());
    let mut all = vec![
        "read",
        "--mix",
        &mix,
        "--input",
        "x:dense:2",
        "-m",
        "7",
        "--chunk-size",
        "64",
        "--index",
        "full",
        "--dump",
    ];
    all.extend_from_slice(args);
    exfeed(all)
}

/// [`run`], which must succeed.
fn read(dir: &Path, mix: &str, args: &[&str]) -> std::process::Output {
    let out = run(dir, mix, args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    out
}

const MIX: &str = "DIR/a.ctf=0.7,DIR/b/*=0.3";

/// (sweep, "file:key", samples) of every sequence dumped.
fn dumped(out: &std::process::Output) -> Vec<(u64, String, u64)> {
    dumped_sequences(out)
        .into_iter()
        .map(|s| {
            let key = s["key"].as_str().expect("a mix's key is \"file:key\"");
            let samples = s["samples"].as_u64().unwrap();
            (s["sweep"].as_u64().unwrap(), key.to_string(), samples)
        })
        .collect()
}

/// Samples of source a (file 0) and b (files 1 and 2) in each sweep.
fn samples_by_source(seqs: &[(u64, String, u64)]) -> BTreeMap<u64, [u64; 2]> {
    let mut out = BTreeMap::new();
    for (sweep, key, samples) in seqs {
        let source = usize::from(!key.starts_with("0:"));
        out.entry(*sweep).or_insert([0, 0])[source] += samples;
    }
    out
}

fn sorted<T: Ord + Clone>(v: &[T]) -> Vec<T> {
    let mut v = v.to_vec();
    v.sort();
    v
}

#[test]
fn a_mix_is_deterministic_for_a_seed() {
    let dir = tempfile::tempdir().unwrap();
    make_sources(dir.path());
    let args = ["--seed", "5", "--max-sweeps", "2"];
    let one = dumped(&read(dir.path(), MIX, &args));
    assert_eq!(one, dumped(&read(dir.path(), MIX, &args)));
    let other = dumped(&read(
        dir.path(),
        MIX,
        &["--seed", "6", "--max-sweeps", "2"],
    ));
    assert_ne!(one, other);
}

#[test]
fn each_source_gives_its_share_of_every_sweep() {
    let dir = tempfile::tempdir().unwrap();
    make_sources(dir.path());
    // 400 samples a sweep: a 280 (more than twice its 120), b 120 (twice its 60).
    let out = read(
        dir.path(),
        MIX,
        &["--mix-epoch-samples", "400", "--max-sweeps", "4"],
    );
    let seqs = dumped(&out);
    let by_sweep = samples_by_source(&seqs);
    assert_eq!(by_sweep.len(), 4);
    // Each source within one chunk (at most 64 bytes: fewer than 10 samples) of its share.
    for (sweep, [a, b]) in &by_sweep {
        assert!((*a as i64 - 280).abs() < 10, "sweep {sweep}: a {a}");
        assert!((*b as i64 - 120).abs() < 10, "sweep {sweep}: b {b}");
    }
    // A source smaller than its share cycles: b's 30 sequences come twice in sweep 0 (its
    // two passes), nothing more than twice.
    let mut b_keys: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, key, _) in seqs.iter().filter(|s| s.0 == 0 && !s.1.starts_with("0:")) {
        *b_keys.entry(key).or_default() += 1;
    }
    assert!(b_keys.len() >= 28, "{b_keys:?}");
    assert!(b_keys.values().all(|&n| n <= 3), "{b_keys:?}");
    // The summary says what each source contributed to each sweep.
    let stderr = text(&out.stderr);
    for (sweep, [a, b]) in &by_sweep {
        let line = stderr
            .lines()
            .find(|l| l.starts_with(&format!("mix: sweep {sweep}:")))
            .unwrap_or_else(|| panic!("no mix line for sweep {sweep}: {stderr}"));
        assert!(line.contains(&format!(" {a} samples")), "{line}");
        assert!(line.contains(&format!(" {b} samples")), "{line}");
        assert!(
            line.contains("a.ctf=0.7 ") && line.contains("b/*=0.3 "),
            "{line}"
        );
    }
}

#[test]
fn weights_like_the_sizes_read_each_sequence_once_a_sweep() {
    let dir = tempfile::tempdir().unwrap();
    make_sources(dir.path());
    // a 120 samples, b 60: weights 2:1 and the default sweep (their sum) take each once.
    let seqs = dumped(&read(
        dir.path(),
        "DIR/a.ctf=2,DIR/b/*=1",
        &["--max-sweeps", "2"],
    ));
    for sweep in 0..2 {
        let keys: Vec<&str> = (seqs.iter())
            .filter(|s| s.0 == sweep)
            .map(|s| s.1.as_str())
            .collect();
        assert_eq!(keys.len(), 90, "sweep {sweep}");
        let mut unique = keys.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 90, "sweep {sweep} has duplicates");
    }
}

#[test]
fn workers_in_separate_processes_share_the_mixed_sweep() {
    let dir = tempfile::tempdir().unwrap();
    make_sources(dir.path());
    let common = [
        "--seed",
        "2",
        "--mix-epoch-samples",
        "300",
        "--max-sweeps",
        "2",
    ];
    let whole = dumped(&read(dir.path(), MIX, &common));
    for workers in [2usize, 3] {
        let mut union = Vec::new();
        let mut parts = Vec::new();
        for rank in 0..workers {
            let (n, r) = (workers.to_string(), rank.to_string());
            let mut args = common.to_vec();
            args.extend(["--num-workers", &n, "--worker-rank", &r]);
            let part = dumped(&read(dir.path(), MIX, &args));
            assert!(!part.is_empty(), "worker {rank} of {workers} read nothing");
            union.extend(part.clone());
            parts.push(part);
        }
        // Together the workers read the sweep: the same sequences, each as often.
        assert_eq!(sorted(&union), sorted(&whole), "{workers} workers");
        // No worker reads a chunk's sequence that another one reads (in a sweep where the
        // sequence comes once).
        let once: Vec<&(u64, String, u64)> = whole
            .iter()
            .filter(|s| whole.iter().filter(|t| t.0 == s.0 && t.1 == s.1).count() == 1)
            .collect();
        for s in once {
            let owners = parts.iter().filter(|p| p.contains(s)).count();
            assert_eq!(owners, 1, "{s:?} read by {owners} workers");
        }
    }
}

#[test]
fn resume_from_a_saved_state_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    make_sources(dir.path());
    let state = dir.path().join("state.json");
    let state = state.to_str().unwrap();
    let common = [
        "--seed",
        "9",
        "--mix-epoch-samples",
        "250",
        "--max-sweeps",
        "3",
    ];
    for workers in ["1", "2"] {
        let mut whole_args = common.to_vec();
        whole_args.extend(["--num-workers", workers, "--worker-rank", "0"]);
        let whole = dumped(&read(dir.path(), MIX, &whole_args));
        // Stop in sweep 0, then again in a later sweep, resuming each time.
        let mut resumed = Vec::new();
        let mut first = whole_args.clone();
        first.extend(["--stop-after", "5", "--save-state", state]);
        resumed.extend(dumped(&read(dir.path(), MIX, &first)));
        let mut second = whole_args.clone();
        second.extend([
            "--restore-state",
            state,
            "--stop-after",
            "20",
            "--save-state",
            state,
        ]);
        resumed.extend(dumped(&read(dir.path(), MIX, &second)));
        let mut rest = whole_args.clone();
        rest.extend(["--restore-state", state]);
        let last = read(dir.path(), MIX, &rest);
        resumed.extend(dumped(&last));
        assert_eq!(resumed, whole, "{workers} workers");
        // The report of the sweep in progress at the checkpoint counts what came before it.
        let by_sweep = samples_by_source(&whole);
        let [a, b] = by_sweep[&2];
        let stderr = text(&last.stderr);
        let line = stderr
            .lines()
            .find(|l| l.starts_with("mix: sweep 2:"))
            .unwrap();
        assert!(line.contains(&format!(" {a} samples")) && line.contains(&format!(" {b} samples")));
    }
    // Another mix does not take the state.
    let args = [
        "--seed",
        "9",
        "--mix-epoch-samples",
        "250",
        "--restore-state",
        state,
    ];
    let out = run(dir.path(), "DIR/a.ctf=0.5,DIR/b/*=0.5", &args);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("the mix was"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn bad_mixes_are_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    make_sources(dir.path());
    std::fs::write(dir.path().join("c.ctf"), "0 |x 1 2 3\n").unwrap();
    let d = dir.path().display().to_string();
    let cases = [
        (format!("{d}/a.ctf=0.7,{d}/b/*=x"), "the weight of"),
        (
            format!("{d}/a.ctf=0,{d}/b/*=1"),
            "a weight must be a finite positive number",
        ),
        (format!("{d}/a.ctf"), "has no weight"),
        (format!("{d}/a.ctf=1,{d}/nothing-*.ctf=1"), "names no file"),
    ];
    for (mix, expected) in cases {
        let out = exfeed(["read", "--mix", &mix, "--input", "x:dense:2", "-m", "7"]);
        assert!(!out.status.success(), "{mix}");
        assert!(
            text(&out.stderr).contains(expected),
            "{mix}: {}",
            text(&out.stderr)
        );
    }
    // Sources with other streams.
    let c_cbf = format!("{d}/c.cbf");
    let out = exfeed([
        "convert",
        &format!("{d}/c.ctf"),
        &c_cbf,
        "--input",
        "x:dense:3",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mix = format!("{d}/b/part-1.cbf=1,{c_cbf}=1");
    let out = exfeed(["read", "--mix", &mix, "-m", "7"]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("c.cbf has the streams x:dense:3"),
        "{stderr}"
    );
    // An epoch size without a mix.
    let a_file = format!("{d}/a.ctf");
    let out = exfeed([
        "read",
        &a_file,
        "--input",
        "x:dense:2",
        "-m",
        "7",
        "--mix-epoch-samples",
        "10",
    ]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("--mix-epoch-samples applies to a mix"),
        "{stderr}"
    );
}

/// `dir/mix.cntk`: a reader whose `mix` is `mix` (`DIR` standing for `dir`), with `extra`
/// parameters.
fn mix_config(dir: &Path, mix: &str, extra: &str) -> String {
    let cfg = dir.join("mix.cntk");
    let mix = mix.replace("DIR", &dir.display().to_string());
    std::fs::write(
        &cfg,
        format!(
            "reader = [ readerType = CNTKTextFormatReader; mix = \"{mix}\"; {extra}\n\
             chunkSizeInBytes = 64; index = full\n\
             input = [ x = [ dim = 2; format = dense ] ] ]\n"
        ),
    )
    .unwrap();
    cfg.display().to_string()
}

#[test]
fn a_configuration_names_a_mix_and_its_epoch_size() {
    let dir = tempfile::tempdir().unwrap();
    make_sources(dir.path());
    let cfg = mix_config(dir.path(), MIX, "mixEpochSamples = 400");
    let args = ["--seed", "4", "--max-sweeps", "2"];
    let by_flags = read(
        dir.path(),
        MIX,
        &[&args[..], &["--mix-epoch-samples", "400"]].concat(),
    );
    let mut with_config = vec!["read", "--config", &cfg, "-m", "7", "--dump"];
    with_config.extend(args);
    let out = exfeed(&with_config);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(dumped(&out), dumped(&by_flags));
    // The flag goes over the configuration's epoch size.
    with_config.extend(["--mix-epoch-samples", "200"]);
    let smaller = dumped(&exfeed(&with_config));
    assert_eq!(samples_by_source(&smaller).len(), 2);
    let samples: u64 = smaller.iter().map(|s| s.2).sum();
    assert!((380..=420).contains(&samples), "{samples}");
    // mixEpochSamples needs a mix; a corpus and a mix are not both given.
    for (extra, expected) in [
        ("corpus = \"x-*.ctf\"", "give 'corpus' or 'mix', not both"),
        ("mixEpochSamples = 0", "mixEpochSamples"),
    ] {
        let cfg = mix_config(dir.path(), MIX, extra);
        let out = exfeed(["read", "--config", &cfg, "-m", "7"]);
        assert!(!out.status.success(), "{extra}");
        assert!(
            text(&out.stderr).contains(expected),
            "{extra}: {}",
            text(&out.stderr)
        );
    }
    let cfg = dir.path().join("plain.cntk");
    std::fs::write(
        &cfg,
        "reader = [ readerType = CNTKTextFormatReader; file = a.ctf; mixEpochSamples = 5\n\
         input = [ x = [ dim = 2; format = dense ] ] ]\n",
    )
    .unwrap();
    let out = exfeed(["read", "--config", cfg.to_str().unwrap(), "-m", "7"]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("'mixEpochSamples' applies to a 'mix'"),
        "{stderr}"
    );
}

#[test]
fn resumed_on_another_number_of_workers_the_mixed_sweep_is_finished_once() {
    let dir = tempfile::tempdir().unwrap();
    make_sources(dir.path());
    let common = [
        "--seed",
        "4",
        "--mix-epoch-samples",
        "250",
        "--max-sweeps",
        "2",
    ];
    let with = |workers: &str, rank: &str, extra: &[&str]| {
        let mut args = common.to_vec();
        args.extend(["--num-workers", workers, "--worker-rank", rank]);
        args.extend_from_slice(extra);
        dumped(&read(dir.path(), MIX, &args))
    };
    let of_sweep = |v: &[(u64, String, u64)], sweep: u64| -> Vec<(u64, String, u64)> {
        v.iter().filter(|s| s.0 == sweep).cloned().collect()
    };
    // Two workers stop in sweep 0; three go on.
    let mut states = Vec::new();
    let mut sweep0 = Vec::new();
    for (rank, stop) in ["0", "1"].into_iter().zip(["3", "6"]) {
        let state = dir.path().join(format!("state-{rank}.json"));
        let state = state.to_str().unwrap().to_string();
        let got = with("2", rank, &["--stop-after", stop, "--save-state", &state]);
        sweep0.extend(got);
        states.push(state);
    }
    for rank in ["0", "1", "2"] {
        let mut restore = Vec::new();
        for s in &states {
            restore.extend(["--restore-state", s.as_str()]);
        }
        let got = with("3", rank, &restore);
        sweep0.extend(of_sweep(&got, 0));
        let fresh = with("3", rank, &[]);
        assert_eq!(of_sweep(&got, 1), of_sweep(&fresh, 1), "worker {rank}");
    }
    // The mixed sweep (where a chunk may come more than once) as one worker reads it.
    let whole = of_sweep(&with("1", "0", &[]), 0);
    assert_eq!(sorted(&sweep0), sorted(&whole));
}
