//! `exfeed read` with the real binary.

mod common;

use common::{ctf_data as data, exfeed, text};
use std::collections::BTreeMap;
use std::process::{Command, Output};

fn read_ok(args: &[&str]) -> (Vec<serde_json::Value>, String) {
    let out = exfeed(args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    (lines, text(&out.stderr))
}

/// The standard error of a read that must fail.
fn read_refused(args: &[&str]) -> String {
    let out = exfeed(args);
    assert!(!out.status.success(), "{}", text(&out.stdout));
    text(&out.stderr)
}

/// (sweep, key) of every sequence of every dumped minibatch, in order.
fn sequences(mbs: &[serde_json::Value]) -> Vec<(u64, u64)> {
    mbs.iter()
        .flat_map(|mb| mb["sequences"].as_array().unwrap().iter())
        .map(|s| (s["sweep"].as_u64().unwrap(), s["key"].as_u64().unwrap()))
        .collect()
}

const COMMON: &[&str] = &["--input", "x:dense:2", "--chunk-size", "64", "--dump"];

#[test]
fn dump_lines_and_summary() {
    let dir = tempfile::tempdir().unwrap();
    let f = data(&dir, 50);
    let mut args = vec!["read", &f, "-m", "7", "--max-sweeps", "2", "--seed", "5"];
    args.extend_from_slice(COMMON);
    let (mbs, err) = read_ok(&args);
    assert!(err.contains("read: "), "{err}");
    assert!(err.contains("peak RSS"), "{err}");
    let total_samples: u64 = (0..50u64).map(|k| k % 4 + 1).sum();
    let mut samples = 0;
    for mb in &mbs {
        let n = mb["samples"].as_u64().unwrap();
        let per: u64 = mb["sequences"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["samples"].as_u64().unwrap())
            .sum();
        assert_eq!(n, per);
        // Whole sequences, at most the size unless one sequence alone is larger.
        assert!(n <= 7 || mb["sequences"].as_array().unwrap().len() == 1);
        samples += n;
    }
    assert_eq!(samples, 2 * total_samples);
    assert_eq!(mbs.iter().filter(|m| m["end_of_sweep"] == true).count(), 2);
    // What the reader did: every chunk decoded once a sweep, and the time it waited for that.
    let decoded = |err: &str| -> u64 {
        let at = err.find("; decoded ").expect("the decoding figures") + "; decoded ".len();
        let n = err[at..].split(' ').next().unwrap();
        assert!(
            err[at..].contains(" chunks, ") && err.contains(" for data ("),
            "{err}"
        );
        n.parse().unwrap()
    };
    let mut one_sweep = args.clone();
    one_sweep[5] = "1";
    let chunks = decoded(&read_ok(&one_sweep).1);
    assert!(chunks > 1, "{err}");
    assert_eq!(decoded(&err), 2 * chunks, "{err}");
    // Each sweep is a permutation of all keys, and the two sweeps differ in order.
    let seqs = sequences(&mbs);
    let sweep = |s: u64| -> Vec<u64> { seqs.iter().filter(|x| x.0 == s).map(|x| x.1).collect() };
    let (a, b) = (sweep(0), sweep(1));
    let mut sa = a.clone();
    sa.sort_unstable();
    assert_eq!(sa, (0..50).collect::<Vec<_>>());
    let mut sb = b.clone();
    sb.sort_unstable();
    assert_eq!(sb, sa);
    assert_ne!(a, b);
    // Same seed, same order; --no-randomize gives file order.
    let (again, _) = read_ok(&args);
    assert_eq!(again, mbs);
    let mut args = vec!["read", &f, "-m", "7", "--no-randomize"];
    args.extend_from_slice(COMMON);
    let (ordered, _) = read_ok(&args);
    let keys: Vec<u64> = sequences(&ordered).into_iter().map(|x| x.1).collect();
    assert_eq!(keys, (0..50).collect::<Vec<_>>());
}

#[test]
fn save_and_restore_equals_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let f = data(&dir, 80);
    let state = dir.path().join("state.json");
    let state = state.to_str().unwrap();
    for extra in [
        &["--window-chunks", "2"][..],
        &[
            "--window-samples",
            "20",
            "--num-workers",
            "2",
            "--worker-rank",
            "1",
        ],
        &["--no-randomize"],
    ] {
        let mut base = vec!["read", &f, "-m", "9", "--max-sweeps", "3", "--seed", "11"];
        base.extend_from_slice(COMMON);
        base.extend_from_slice(extra);
        let (whole, _) = read_ok(&base);
        assert!(whole.len() > 10);
        let mut first = base.clone();
        first.extend_from_slice(&["--stop-after", "10", "--save-state", state]);
        let (head, err) = read_ok(&first);
        assert!(err.contains("(stopped)"), "{err}");
        assert_eq!(head.len(), 10);
        let mut second = base.clone();
        second.extend_from_slice(&["--restore-state", state]);
        let (tail, _) = read_ok(&second);
        let mut joined = head;
        joined.extend(tail);
        assert_eq!(joined, whole, "{extra:?}");
    }
    // A state does not restore into a reader with other options.
    let mut other = vec![
        "read",
        &f,
        "-m",
        "9",
        "--seed",
        "12",
        "--restore-state",
        state,
    ];
    other.extend_from_slice(COMMON);
    let out = exfeed(&other);
    assert!(!out.status.success());
}

#[test]
fn workers_are_disjoint_and_complete() {
    let dir = tempfile::tempdir().unwrap();
    let f = data(&dir, 120);
    for workers in [2usize, 3] {
        let mut seen: BTreeMap<(u64, u64), usize> = BTreeMap::new();
        for rank in 0..workers {
            let (w, r) = (workers.to_string(), rank.to_string());
            let mut args = vec![
                "read",
                &f,
                "-m",
                "16",
                "--max-sweeps",
                "2",
                "--num-workers",
                &w,
                "--worker-rank",
                &r,
            ];
            args.extend_from_slice(COMMON);
            let (mbs, _) = read_ok(&args);
            let mine = sequences(&mbs);
            assert!(!mine.is_empty());
            for s in mine {
                *seen.entry(s).or_default() += 1;
            }
        }
        // Every (sweep, key) exactly once over all workers.
        assert_eq!(seen.len(), 2 * 120);
        assert!(seen.values().all(|&n| n == 1));
    }
}

#[test]
fn cache_index_is_written_and_reused() {
    let dir = tempfile::tempdir().unwrap();
    let f = data(&dir, 40);
    let mut args = vec!["read", &f, "-m", "10", "--cache-index", "--seed", "1"];
    args.extend_from_slice(COMMON);
    let (first, err) = read_ok(&args);
    assert!(
        err.contains("(opening ") && err.contains("s, index scanned and cached)"),
        "{err}"
    );
    assert!(std::path::Path::new(&format!("{f}.exfeed-index")).exists());
    let (second, err) = read_ok(&args);
    assert!(err.contains("s, index from cache)"), "{err}");
    assert_eq!(first, second);
    // A corrupt cache: a warning, and the same result.
    std::fs::write(format!("{f}.exfeed-index"), b"garbage").unwrap();
    let (third, err) = read_ok(&args);
    assert!(err.contains("not used"), "{err}");
    assert_eq!(third, first);
}

#[test]
fn frame_mode_rejects_multi_sample_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let f = data(&dir, 10);
    let mut args = vec!["read", &f, "-m", "4", "--frame-mode"];
    args.extend_from_slice(COMMON);
    let out = exfeed(&args);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("sample"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn keep_in_memory_reads_compressed_files_like_mapped_ones() {
    let dir = tempfile::tempdir().unwrap();
    let f = data(&dir, 30);
    let cbf = dir.path().join("d.cbf.gz");
    let cbf = cbf.to_str().unwrap();
    let conv = exfeed([
        "convert",
        &f,
        cbf,
        "--input",
        "x:dense:2",
        "--chunk-size",
        "64",
    ]);
    assert!(conv.status.success(), "{}", text(&conv.stderr));
    for file in [f.as_str(), cbf] {
        let args = |keep: bool| {
            let mut a = vec!["read", file, "-m", "4", "--chunk-size", "64", "--dump"];
            if file == f {
                a.extend(["--input", "x:dense:2"]);
            }
            if keep {
                a.push("--keep-in-memory");
            }
            a
        };
        let (mapped, _) = read_ok(&args(false));
        let (kept, _) = read_ok(&args(true));
        assert!(!mapped.is_empty());
        assert_eq!(kept, mapped, "{file}");
    }
}

#[test]
fn empty_windows_and_epochs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let f = data(&dir, 10);
    for (flag, value, want) in [
        (
            "--window-chunks",
            "0",
            "randomizationWindow must be a positive integer",
        ),
        (
            "--window-samples",
            "0",
            "randomizationWindow must be a positive integer",
        ),
        ("--max-sweeps", "0", "must be positive"),
        ("--max-samples", "0", "must be positive"),
    ] {
        let mut args = vec!["read", &f, "-m", "4", flag, value];
        args.extend_from_slice(COMMON);
        let out = exfeed(&args);
        assert_eq!(out.status.code(), Some(2), "{flag}");
        assert!(
            text(&out.stderr).contains(want),
            "{flag}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn a_window_in_bytes_groups_chunks_by_their_size_over_the_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let f = data(&dir, 60);
    let read = |window: &[&str]| {
        let mut args = vec!["read", &f, "-m", "5", "--seed", "3"];
        args.extend_from_slice(window);
        args.extend_from_slice(COMMON);
        sequences(&read_ok(&args).0)
    };
    let whole = read(&["--window-bytes", "1G"]);
    assert_eq!(whole, read(&["--window-chunks", "100000"]));
    let each = read(&["--window-bytes", "1"]);
    assert_eq!(each, read(&["--window-chunks", "1"]));
    assert_ne!(whole, each);
    // The flag replaces the configuration's window in chunks.
    let config = dir.path().join("c.cntk");
    std::fs::write(
        &config,
        "reader = [\n readerType = \"CNTKTextFormatReader\"; file = \"x.ctf\"\n \
         randomizationWindow = 1; chunkSizeInBytes = 64\n \
         input = [ x = [ dim = 2; format = \"dense\" ] ]\n]\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let args = [
        "read", "--config", config, &f, "-m", "5", "--seed", "3", "--dump",
    ];
    assert_eq!(sequences(&read_ok(&args).0), each);
    let args: Vec<&str> = args
        .iter()
        .copied()
        .chain(["--window-bytes", "1G"])
        .collect();
    assert_eq!(sequences(&read_ok(&args).0), whole);
    let refused = |flags: &[&str]| {
        let mut args = vec!["read", &f, "-m", "5", "--input", "x:dense:2"];
        args.extend_from_slice(flags);
        read_refused(&args)
    };
    let err = refused(&["--window-bytes", "0"]);
    assert!(err.contains("expected a positive size in bytes"), "{err}");
    let err = refused(&["--window-bytes", "1", "--window-chunks", "1"]);
    assert!(err.contains("cannot be used with"), "{err}");
}

/// `exfeed read` with the progress bar shown at once (no delay), stderr as given.
fn read_with_progress(stderr: std::process::Stdio, f: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_exfeed"))
        .args([
            "read",
            f,
            "-m",
            "3",
            "--max-sweeps",
            "20",
            "--input",
            "x:dense:2",
        ])
        .args(["--chunk-size", "64"])
        .env("EXFEED_PROGRESS_DELAY_MS", "0")
        .stderr(stderr)
        .output()
        .expect("exfeed runs")
}

#[test]
fn no_progress_bar_on_a_non_terminal_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let f = data(&dir, 300);
    let out = read_with_progress(std::process::Stdio::piped(), &f);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    // Exactly the summary line: no bar, no carriage returns or terminal escapes.
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(err.starts_with("read: "), "{err:?}");
    assert!(!err.contains('\r') && !err.contains('\x1b'), "{err:?}");
    assert!(
        !err.contains("samples/s ETA") && !err.contains("ETA"),
        "{err:?}"
    );
}

#[test]
fn progress_bar_on_a_terminal() {
    // The positive control, where `script` can give the command a terminal.
    let Ok(script) = which_script() else {
        eprintln!("SKIPPED: no `script` command to run exfeed on a terminal");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let f = data(&dir, 300);
    let cmd = format!(
        "{} read {f} -m 3 --max-sweeps 20 --input x:dense:2 --chunk-size 64",
        env!("CARGO_BIN_EXE_exfeed")
    );
    let out = Command::new(script)
        .args(["-qec", &cmd, "/dev/null"])
        .env("EXFEED_PROGRESS_DELAY_MS", "0")
        .output()
        .expect("script runs");
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The terminal's output (stdout and stderr both): the bar, then the summary.
    let tty = text(&out.stdout);
    assert!(tty.contains("samples"), "{tty:?}");
    assert!(tty.contains("ETA"), "{tty:?}");
    assert!(tty.contains("read: "), "{tty:?}");
}

fn which_script() -> Result<std::path::PathBuf, ()> {
    ["/usr/bin/script", "/bin/script"]
        .iter()
        .map(std::path::PathBuf::from)
        .find(|p| p.exists())
        .ok_or(())
}

#[test]
fn minibatches_counted_in_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let f = data(&dir, 50);
    let mut args = vec!["read", &f, "--minibatch-sequences", "8"];
    args.extend_from_slice(COMMON);
    let (mbs, _) = read_ok(&args);
    let sizes: Vec<usize> = (mbs.iter())
        .map(|mb| mb["sequences"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, [8, 8, 8, 8, 8, 8, 2]);
    let mut keys: Vec<u64> = sequences(&mbs).into_iter().map(|x| x.1).collect();
    keys.sort_unstable();
    assert_eq!(keys, (0..50).collect::<Vec<_>>());
    // One size or the other.
    let err = read_refused(&["read", &f, "-m", "3", "--minibatch-sequences", "8"]);
    assert!(err.contains("cannot be used with"), "{err}");
}

#[test]
fn equalize_spread_keeps_ranks_in_step_with_every_sequence_once() {
    let dir = tempfile::tempdir().unwrap();
    let f = data(&dir, 50);
    let mut keys = Vec::new();
    let mut steps = Vec::new();
    let spread = |rank| {
        let spread = ["--equalize-mode", "spread", "--max-sweeps", "2"];
        let workers = ["--num-workers", "3", "--worker-rank", rank];
        [&["read", f.as_str(), "-m", "4"][..], &workers, &spread].concat()
    };
    for rank in ["0", "1", "2"] {
        let mut args = spread(rank);
        args.extend(["--index", "full"]);
        let (mbs, err) = read_ok(&[&args[..], COMMON].concat());
        assert!(err.contains("all of them once"), "{err}");
        steps.push(mbs.len());
        keys.extend(sequences(&mbs));
    }
    assert!(
        steps.iter().all(|&s| s == steps[0]) && steps[0] > 2,
        "{steps:?}"
    );
    keys.sort_unstable();
    let each_once: Vec<(u64, u64)> = (0..2).flat_map(|s| (0..50).map(move |k| (s, k))).collect();
    assert_eq!(keys, each_once);
    // Spread counts each part's sequences: a CTF file read without an index is refused.
    let mut args = spread("0");
    args.extend(["--index", "none", "-i", "x:dense:2"]);
    assert!(read_refused(&args).contains("needs the index"));
}
