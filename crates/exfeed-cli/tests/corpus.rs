//! `exfeed read --corpus`: many shard files as one data set, with the real binary and real
//! files (CTF, gzip-compressed CTF by the real gzip, CBF written by `exfeed convert`).

mod common;

use common::{convert_to_cbf, dumped_sequences, exfeed, text};
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
    convert_to_cbf(&ctf, &dir.join("train-2.cbf"), "x:dense:2");
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
    dumped_sequences(out)
        .into_iter()
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

/// `d/a-0.cbf`, `d/a-1.cbf` of stream x:dense:2, then `d/a-2.cbf` and `d/a-3.cbf` of x:dense:3.
fn shards_of_two_shapes(d: &Path) {
    cbf(d, "a-0.cbf", &shard_text(0, 5), "x:dense:2");
    cbf(d, "a-1.cbf", &shard_text(1, 5), "x:dense:2");
    cbf(d, "a-2.cbf", "0 |x 1 2 3\n", "x:dense:3");
    std::fs::copy(d.join("a-2.cbf"), d.join("a-3.cbf")).unwrap();
}

#[test]
fn shards_with_other_streams_are_refused_naming_the_first_that_differs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    shards_of_two_shapes(d);
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

/// `dir/corpus.cntk`, a configuration whose reader reads the corpus `dir/train-*` (an absolute
/// glob: a config's paths are relative to the working directory, as CNTK opens `file =`).
fn corpus_config(dir: &Path) -> String {
    let cfg = dir.join("corpus.cntk");
    std::fs::write(
        &cfg,
        format!(
            "reader = [ readerType = CNTKTextFormatReader; corpus = \"{}\"\n\
             input = [ x = [ dim = 2; format = dense ] ] ]\n",
            dir.join("train-*").display()
        ),
    )
    .unwrap();
    cfg.display().to_string()
}

#[test]
fn a_configuration_names_a_corpus() {
    let dir = tempfile::tempdir().unwrap();
    make_corpus(dir.path());
    let cfg = corpus_config(dir.path());
    let out = exfeed(["read", "--config", &cfg, "-m", "5", "--dump"]);
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

// check, dump, info and convert of a corpus.

/// `exfeed ARGS... --input x:dense:2`.
fn with_input(args: &[&str]) -> std::process::Output {
    let mut all = args.to_vec();
    all.extend_from_slice(&["--input", "x:dense:2"]);
    exfeed(all)
}

/// The keys (as dumped: "SHARD:KEY" strings or numbers) and each sequence's values of a dump.
fn dump_lines(out: &std::process::Output) -> Vec<(serde_json::Value, Vec<f64>)> {
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|l| {
            let seq: serde_json::Value = serde_json::from_str(l).unwrap();
            let values = seq["streams"]["x"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|s| s.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()))
                .collect();
            (seq["key"].clone(), values)
        })
        .collect()
}

#[test]
fn check_reports_each_shard_and_the_corpus_and_names_the_bad_shard() {
    let dir = tempfile::tempdir().unwrap();
    make_corpus(dir.path());
    let glob = dir.path().join("train-*").display().to_string();
    let out = with_input(&["check", "--corpus", &glob]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    for shard in ["train-0.ctf: ok", "train-1.ctf.gz: ok", "train-2.cbf: ok"] {
        assert!(stdout.contains(shard), "{stdout}");
    }
    let total: u64 = SIZES.iter().sum();
    let samples: u64 = SIZES
        .iter()
        .map(|&n| (0..n).map(|k| k % 3 + 1).sum::<u64>())
        .sum();
    let summary = format!(
        "corpus {glob}: ok\n  files: 3\n  sequences: {total}\n  longest sequence: 3 samples \
         (key 0:2)\n  input 'x' (dense 2): {samples} samples\n  errors: 0, warnings: 0\n"
    );
    assert!(stdout.ends_with(&summary), "{stdout}");

    // A bad shard: its error names it (line and byte), the others stay ok, the total says 1 of 4.
    std::fs::write(
        dir.path().join("train-3.ctf"),
        "0 |x 1 2\n1 |x 3 y\n2 |x 5 6\n",
    )
    .unwrap();
    let out = with_input(&["check", "--corpus", &glob]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("train-3.ctf:2:8 (byte 16)"), "{stdout}");
    assert!(stdout.contains("train-3.ctf: invalid\n"), "{stdout}");
    assert!(stdout.contains("train-2.cbf: ok\n"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "corpus {glob}: invalid (1 of 4 files)\n  files: 4\n  sequences: {}",
            total + 2
        )),
        "{stdout}"
    );

    // A shard that cannot be opened (a CBF file cut short: its header is read when opened) is
    // named, and the others are still checked.
    let cbf = std::fs::read(dir.path().join("train-2.cbf")).unwrap();
    std::fs::write(dir.path().join("train-4.cbf"), &cbf[..cbf.len() / 2]).unwrap();
    let out = with_input(&["check", "--corpus", &glob]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("train-4.cbf: invalid (stopped at the error above)\n"),
        "{stdout}"
    );
    assert!(stdout.contains("train-2.cbf: ok\n"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "corpus {glob}: invalid (2 of 5 files)\n  files: 5\n"
        )),
        "{stdout}"
    );
}

#[test]
fn dump_prints_every_shard_in_corpus_order_keyed_shard_key() {
    let dir = tempfile::tempdir().unwrap();
    make_corpus(dir.path());
    let glob = dir.path().join("train-*").display().to_string();
    let lines = dump_lines(&with_input(&["dump", "--corpus", &glob]));
    let keys: Vec<String> = lines
        .iter()
        .map(|(k, _)| k.as_str().unwrap().to_string())
        .collect();
    let want: Vec<String> = SIZES
        .iter()
        .enumerate()
        .flat_map(|(i, &n)| (0..n).map(move |k| format!("{i}:{k}")))
        .collect();
    assert_eq!(keys, want);
    // Each sample's first value is its shard (shard_text), the second key * 10 + t.
    for (key, values) in &lines {
        let (shard, k) = key.as_str().unwrap().split_once(':').unwrap();
        assert_eq!(values[0], shard.parse::<f64>().unwrap(), "{key}");
        assert_eq!(values[1], k.parse::<f64>().unwrap() * 10.0, "{key}");
    }
}

#[test]
fn convert_writes_one_file_of_every_shard_in_order() {
    let dir = tempfile::tempdir().unwrap();
    make_corpus(dir.path());
    let glob = dir.path().join("train-*").display().to_string();
    let corpus = dump_lines(&with_input(&["dump", "--corpus", &glob]));
    let values: Vec<&Vec<f64>> = corpus.iter().map(|(_, v)| v).collect();
    let out_dir = tempfile::tempdir().unwrap();
    for name in ["all.cbf", "all.ctf", "all.parquet"] {
        let output = out_dir.path().join(name).display().to_string();
        let out = with_input(&["convert", "--corpus", &glob, &output]);
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        let back = if name.ends_with("parquet") {
            // Back through CBF (dump reads exfeed's own formats).
            let cbf = out_dir
                .path()
                .join("from-parquet.cbf")
                .display()
                .to_string();
            let out = exfeed(["convert", &output, &cbf]);
            assert!(out.status.success(), "{}", text(&out.stderr));
            dump_lines(&exfeed(["dump", &cbf]))
        } else {
            dump_lines(&with_input(&["dump", &output]))
        };
        let got: Vec<&Vec<f64>> = back.iter().map(|(_, v)| v).collect();
        assert_eq!(got, values, "{name}");
        if name.ends_with("ctf") {
            // CTF keeps the corpus keys: SHARD << 40 | KEY.
            let keys: Vec<u64> = back.iter().map(|(k, _)| k.as_u64().unwrap()).collect();
            assert_eq!(keys[SIZES[0] as usize], 1 << 40);
            assert_eq!(keys.last(), Some(&(2 << 40 | (SIZES[2] - 1))));
        }
    }
    // Lens output is refused for a corpus, and nothing is written.
    let ex = out_dir.path().join("all.ex");
    let out = with_input(&["convert", "--corpus", &glob, ex.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("a corpus converts to one CTF or CBF file"),
        "{}",
        text(&out.stderr)
    );
    assert!(!ex.exists());
}

#[test]
fn a_corpus_of_double_cbf_shards_converts_to_ctf_without_rounding_to_float() {
    // Values float cannot hold (as float they read 0.12345679 and 1), one per shard.
    let dir = tempfile::tempdir().unwrap();
    let values = ["0.123456789", "1.0000000000009095"];
    for (i, v) in values.iter().enumerate() {
        let ctf = dir.path().join(format!("d{i}.ctf"));
        std::fs::write(&ctf, format!("0 |x {v} {i}\n")).unwrap();
        let cbf = dir.path().join(format!("d{i}.cbf")).display().to_string();
        let ctf = ctf.display().to_string();
        let out = with_input(&["convert", &ctf, &cbf, "--precision", "double"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        std::fs::remove_file(ctf).unwrap();
    }
    let glob = dir.path().join("d*.cbf").display().to_string();
    let output = dir.path().join("all.ctf");
    let out = exfeed(["convert", "--corpus", &glob, output.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let written = std::fs::read_to_string(&output).unwrap();
    assert_eq!(
        written,
        format!("0 |x {} 0\n1099511627776 |x {} 1\n", values[0], values[1])
    );
}

#[test]
fn info_describes_each_shard_and_the_whole_corpus() {
    let dir = tempfile::tempdir().unwrap();
    make_corpus(dir.path());
    let glob = dir.path().join("train-*").display().to_string();
    let out = with_input(&["info", "--corpus", &glob, "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["corpus"], glob.as_str());
    let files = info["files"].as_array().unwrap();
    let formats: Vec<&str> = files
        .iter()
        .map(|f| f["format"].as_str().unwrap())
        .collect();
    assert_eq!(formats, ["ctf", "ctf", "cbf"]);
    let counts: Vec<u64> = files
        .iter()
        .map(|f| f["sequences"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, SIZES);
    assert_eq!(info["sequences"], SIZES.iter().sum::<u64>());
    assert_eq!(info["longestSequence"]["key"], "0:2");
    let out = with_input(&["info", "--corpus", &glob]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("files: 3 (") && stdout.contains("train-2.cbf: CBF"),
        "{stdout}"
    );
}

#[test]
fn check_dump_and_convert_name_the_first_shard_whose_streams_differ() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    shards_of_two_shapes(d);
    let glob = d.join("a-*").display().to_string();
    let differs = "a-2.cbf has the streams x:dense:3, not those of";
    let out = exfeed(["check", "--corpus", &glob]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(
        stdout.contains(differs) && stdout.contains("a-2.cbf: invalid"),
        "{stdout}"
    );
    assert!(stdout.contains("a-1.cbf: ok"), "{stdout}");
    let out = exfeed(["dump", "--corpus", &glob]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains(differs) && !err.contains("a-3.cbf"), "{err}");
    let output = d.join("out.cbf");
    let out = exfeed(["convert", "--corpus", &glob, output.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains(differs), "{}", text(&out.stderr));
    assert!(!output.exists(), "no partial output");
}

#[test]
fn a_configuration_names_a_corpus_for_check_dump_info_and_convert() {
    let dir = tempfile::tempdir().unwrap();
    make_corpus(dir.path());
    let cfg = corpus_config(dir.path());
    let cfg = cfg.as_str();
    let out = exfeed(["check", "--config", cfg]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("train-2.cbf: ok") && stdout.contains(": ok\n  files: 3\n"),
        "{stdout}"
    );
    let lines = dump_lines(&exfeed(["dump", "--config", cfg]));
    assert_eq!(lines.len() as u64, SIZES.iter().sum::<u64>());
    assert_eq!(lines[0].0, "0:0");
    let out = exfeed(["info", "--config", cfg, "--json"]);
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["files"].as_array().unwrap().len(), 3);
    let output = dir.path().join("all.cbf");
    let out = exfeed(["convert", "--config", cfg, output.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        dump_lines(&exfeed(["dump", output.to_str().unwrap()])).len(),
        lines.len()
    );
}

/// Runs `exfeed ARGS` and waits for it with `wait4`: its exit status and its own peak resident
/// memory in bytes (not the test process's other children's).
#[cfg(unix)]
#[allow(clippy::zombie_processes)] // reaped by wait4, which Child does not know of
fn peak_rss(args: &[&str]) -> (bool, u64) {
    let child = Command::new(env!("CARGO_BIN_EXE_exfeed"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: waits for our own child; rusage is plain data the call fills in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid);
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    // Linux reports ru_maxrss in KiB.
    (ok, usage.ru_maxrss as u64 * 1024)
}

#[cfg(unix)]
#[test]
fn compressed_shards_are_not_held_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    // Shards of about 2.9 MB of CTF text each, gzip-compressed by the real gzip.
    let line = " 0.25".repeat(16);
    let mut bytes = 0;
    for shard in 0..7 {
        let text: String = (0..32_000)
            .map(|k| format!("{k} |x {shard}{line}\n"))
            .collect();
        bytes += text.len() as u64;
        let path = dir.path().join(format!("s-{shard}.ctf"));
        std::fs::write(&path, text).unwrap();
        let gzip = Command::new("gzip").arg("-1").arg(&path).status();
        assert!(gzip.unwrap().success());
    }
    let read = |glob: &str, extra: &[&str]| {
        let glob = dir.path().join(glob).display().to_string();
        // A window of 2 chunks: the decoded data held is the window's (by design), so what
        // the shards themselves cost shows.
        let mut args = vec!["read", "--corpus", &glob, "-i", "x:dense:17", "-m", "64"];
        args.extend_from_slice(&["--chunk-size", "256K", "--window-chunks", "2"]);
        args.extend_from_slice(extra);
        let (ok, peak) = peak_rss(&args);
        assert!(ok, "{args:?}");
        peak
    };
    let one = read("s-0.ctf.gz", &[]);
    let seven = read("s-*.ctf.gz", &[]);
    // Six more shards (about 17 MB decompressed) add their indexes (32,000 keys each) and
    // nothing like their text: memory follows the chunks read, not the corpus.
    let six = bytes * 6 / 7;
    let report = format!("1 shard: {one} bytes, 7 shards: {seven} bytes, text {bytes} bytes");
    assert!(seven < one + six / 3, "{report}");
    // Held in memory (keepDataInMemory), the same corpus costs its decompressed size: the
    // measure sees the difference.
    let held = read("s-*.ctf.gz", &["--keep-in-memory"]);
    assert!(
        held > seven + six * 2 / 3,
        "{report}, in memory: {held} bytes"
    );
}
