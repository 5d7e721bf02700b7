//! Where CNTK 2.7 is lenient and users depend on it, through the real binary: repeated sequence
//! ids (files joined with `cat`), CBF aliases that rename only what they name, and config files
//! with a stray closing bracket (CNTK's own Network_Operator_Plus.cntk).

mod common;

use common::{dumped_sequences, exfeed, text};
use std::path::Path;
use std::process::Output;

/// The keys `exfeed dump` printed, one JSON line a sequence (the command must have succeeded).
fn dump_keys(out: &Output) -> Vec<u64> {
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["key"]
                .as_u64()
                .unwrap()
        })
        .collect()
}

fn read_keys(out: &Output) -> Vec<u64> {
    dumped_sequences(out)
        .iter()
        .map(|s| s["key"].as_u64().unwrap())
        .collect()
}

fn write(dir: &Path, name: &str, content: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p.to_str().unwrap().to_string()
}

/// Two parts, each starting at id 0, joined as `cat a.ctf b.ctf` joins them.
const PART_A: &str = "0 |x 1 2\n0 |x 3 4\n1 |x 5 6\n";
const PART_B: &str = "0 |x 7 8\n1 |x 9 10\n1 |x 11 12\n";

#[test]
fn files_joined_with_cat_read_in_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let all = write(dir.path(), "all.ctf", &format!("{PART_A}{PART_B}"));
    let input = ["-i", "x:dense:2"];
    let check = exfeed([&["check", &all][..], &input].concat());
    assert!(check.status.success(), "{}", text(&check.stdout));
    let report = text(&check.stdout);
    assert!(
        report.contains("sequences: 4") && report.contains("errors: 0"),
        "{report}"
    );
    assert_eq!(
        dump_keys(&exfeed([&["dump", &all][..], &input].concat())),
        [0, 1, 0, 1]
    );
    let read = |extra: &[&str]| {
        let args = [
            &["read", &all, "--no-randomize", "--dump", "-m", "100"][..],
            &input,
            extra,
        ];
        read_keys(&exfeed(args.concat()))
    };
    for mode in [
        &["--index", "full"][..],
        &["--index", "none"],
        &["--cache-index"],
        &["--cache-index"],
    ] {
        assert_eq!(read(mode), [0, 1, 0, 1], "{mode:?}");
    }
    assert!(Path::new(&format!("{all}.exfeed-index")).exists());
    // Chunks of one sequence, split between workers: each sequence once.
    let mut keys = Vec::new();
    for rank in ["0", "1"] {
        let args = [
            "--chunk-size",
            "10",
            "--num-workers",
            "2",
            "--worker-rank",
            rank,
        ];
        keys.extend(read(&[&args[..], &["--index", "none"]].concat()));
    }
    keys.sort_unstable();
    assert_eq!(keys, [0, 0, 1, 1]);
    // Converted, the four sequences are the CBF file's (keyed by position there).
    let cbf = dir.path().join("all.cbf");
    let cbf = cbf.to_str().unwrap();
    let out = exfeed([&["convert", &all, cbf][..], &input].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(dump_keys(&exfeed(["dump", cbf])), [0, 1, 2, 3]);
    // A corpus of such files.
    write(dir.path(), "more.ctf", &format!("{PART_B}{PART_A}"));
    let corpus = format!("{}/*.ctf", dir.path().display());
    let out = exfeed([&["dump", "--corpus", &corpus][..], &input].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let keys: Vec<String> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["key"].to_string())
        .collect();
    let want = ["0:0", "0:1", "0:0", "0:1", "1:0", "1:1", "1:0", "1:1"].map(|k| format!("\"{k}\""));
    assert_eq!(keys, want);
}

#[test]
fn a_join_refuses_a_key_repeated_in_a_joined_file() {
    let dir = tempfile::tempdir().unwrap();
    let features = write(dir.path(), "f.ctf", &format!("{PART_A}{PART_B}"));
    let config = |labels: &str| {
        let labels = write(dir.path(), "l.ctf", labels);
        let text = format!(
            "reader = [\n  randomize = false\n  deserializers = (\n    [ type = \"CNTKTextFormatDeserializer\"; file = \"{features}\"\n      input = [ x = [ dim = 2; format = \"dense\" ] ] ]\n  : [ type = \"CNTKTextFormatDeserializer\"; file = \"{labels}\"\n      input = [ y = [ dim = 1; format = \"dense\" ] ] ])\n]\n"
        );
        write(dir.path(), "join.cntk", &text)
    };
    // Repeats in the first deserializer: each sequence joined with its key's label.
    let cfg = config("0 |y 1\n1 |y 2\n");
    let out = exfeed(["read", "--config", &cfg, "--dump", "-m", "100"]);
    assert_eq!(read_keys(&out), [0, 1, 0, 1]);
    let cfg = config("0 |y 1\n1 |y 2\n0 |y 3\n");
    let out = exfeed(["read", "--config", &cfg, "-m", "100"]);
    assert_eq!(out.status.code(), Some(1));
    let labels = dir.path().join("l.ctf").display().to_string();
    assert!(
        text(&out.stderr).contains(&format!(
            "sequence id 0 repeats in deserializer 1, which is joined by key: at {labels}:1 \
             (byte 0) and at {labels}:3 (byte 14)"
        )),
        "{}",
        text(&out.stderr)
    );
}

/// The stream names of the first sequence `exfeed dump` printed.
fn dumped_streams(out: &Output) -> Vec<String> {
    assert!(out.status.success(), "{}", text(&out.stderr));
    let first = text(&out.stdout).lines().next().unwrap().to_string();
    let v: serde_json::Value = serde_json::from_str(&first).unwrap();
    v["streams"].as_object().unwrap().keys().cloned().collect()
}

#[test]
fn cbf_aliases_rename_only_the_streams_they_name() {
    let dir = tempfile::tempdir().unwrap();
    let ctf = write(dir.path(), "d.ctf", "0 |S0 1 |S1 2\n1 |S0 3 |S1 4\n");
    let cbf = dir.path().join("d.cbf").display().to_string();
    // As ctf2bin's header `features S0 dense 1`: the file stores the name, features.
    let out = exfeed([
        "convert",
        &ctf,
        &cbf,
        "-i",
        "features:dense:1:S0",
        "-i",
        "labels:dense:1:S1",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The CTF file's inputs given to the CBF file: S0 names no stream of it, so nothing is
    // renamed (as in CNTK) and a warning names the input; every stream is read.
    let out = exfeed(["dump", &cbf, "-i", "features:dense:1:S0"]);
    assert_eq!(dumped_streams(&out), ["features", "labels"]);
    let warning = format!(
        "warning: {cbf}: input 'features': the file has no stream 'S0' (it has features, labels); \
         ignored, as CNTK ignores it"
    );
    assert!(
        text(&out.stderr).contains(&warning),
        "{}",
        text(&out.stderr)
    );
    let quiet = exfeed([
        "dump",
        &cbf,
        "-i",
        "features:dense:1:S0",
        "--trace-level",
        "0",
    ]);
    assert!(
        !text(&quiet.stderr).contains("warning"),
        "{}",
        text(&quiet.stderr)
    );
    // An alias that names a stream renames it; the others keep their names.
    let out = exfeed(["dump", &cbf, "-i", "f:dense:1:features"]);
    assert_eq!(dumped_streams(&out), ["f", "labels"]);
    // Through a config, read by the minibatch reader: the warning is the reader's.
    let cfg = write(
        dir.path(),
        "r.cntk",
        &format!(
            "reader = [ randomize = false; deserializers = ([ type = \"CNTKBinaryFormatDeserializer\"; file = \"{cbf}\"\n  input = [ features = [ alias = S0 ]; l = [ alias = labels ] ] ]) ]\n"
        ),
    );
    let out = exfeed(["read", "--config", &cfg, "--dump", "-m", "10"]);
    assert_eq!(read_keys(&out), [0, 1]);
    assert!(
        text(&out.stderr).contains(&warning),
        "{}",
        text(&out.stderr)
    );
    let out = exfeed(["dump", "--config", &cfg]);
    assert_eq!(dumped_streams(&out), ["features", "l"]);
}

#[test]
fn cntks_own_config_with_a_stray_bracket_reads_as_in_cntk() {
    // Tests/UnitTests/NetworkTests/Config/Network_Operator_Plus.cntk from CNTK, verbatim: its
    // section closes before `reader`, which is then at the top level (CNTK finds it there from
    // the section), and a ']' that closes nothing ends the file.
    let config = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/Network_Operator_Plus.cntk"
    );
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("Data")).unwrap();
    write(
        &root.path().join("Data"),
        "Network_Operator_Plus_Data.txt",
        "|X 1\n|X 2\n|X 3\n",
    );
    let set = format!("RootDir={}", root.path().display());
    let out = exfeed([
        "read", "--config", config, "--set", &set, "--dump", "-m", "10",
    ]);
    assert_eq!(read_keys(&out), [0, 1, 2]);
    let warning = "Network_Operator_Plus.cntk:37: ']' closes nothing: read as a parameter named \
                   ']' set to true, as CNTK reads it";
    assert!(text(&out.stderr).contains(warning), "{}", text(&out.stderr));
    let shown = exfeed(["config", config, "--set", &set]);
    assert!(shown.status.success(), "{}", text(&shown.stderr));
    assert!(
        text(&shown.stdout).contains(warning),
        "{}",
        text(&shown.stdout)
    );
}
