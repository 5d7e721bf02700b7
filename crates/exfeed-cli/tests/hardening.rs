//! Hostile input and faults, through the real binary: each test is named after the defect it
//! caught (issue 13). Small reproducing inputs live in `tests/data/`.

mod common;

use common::{exfeed, text};
use std::path::PathBuf;

fn data(name: &str) -> String {
    let p: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "data", name]
        .iter()
        .collect();
    p.to_string_lossy().into_owned()
}

/// Runs exfeed and returns (exit code, stdout, stdout and stderr: reports go to either).
fn run(args: &[&str]) -> (i32, String, String) {
    let out = exfeed(args);
    let stdout = text(&out.stdout);
    let all = format!("{stdout}{}", text(&out.stderr));
    (out.status.code().expect("exited, not killed"), stdout, all)
}

#[test]
fn huge_dense_dim_is_refused_before_allocating() {
    let f = data("two-dense-samples.ctf");
    // Beyond what any format can hold: refused where the input is given.
    for dim in ["18446744073709551615", "1099511627776"] {
        let spec = format!("d:dense:{dim}");
        let (code, _, err) = run(&["dump", "-i", &spec, &f]);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains(&format!(
                "dim {dim} of a dense input is larger than 4294967295"
            )),
            "{err}"
        );
    }
    // Within CBF's u32 but beyond what a record of text can hold: every command says so,
    // naming the input, before reading (the 14-byte file once grew to 7.5 GB).
    let want = "input 'd': dense dim 4294967295 cannot be held: a record is at most 67108864 \
                bytes (the maximum record size), which holds at most 33554432 dense values";
    for cmd in [
        &["dump", "-i", "d:dense:4294967295", &f][..],
        &["check", "-i", "d:dense:4294967295", &f],
        &["read", "-m", "2", "-i", "d:dense:4294967295", &f],
    ] {
        let (code, _, err) = run(cmd);
        assert_eq!(code, 2, "{cmd:?}: {err}");
        assert!(err.contains(want), "{cmd:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // The largest dim a record can hold still reads (zero-padded, with a warning).
    let (code, _, err) = run(&["read", "-m", "1", "-i", "d:dense:33554432", &f]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("padded with zeros"), "{err}");
    assert!(err.contains("2 sequences"), "{err}");
}

#[test]
fn threads_beyond_four_per_core_are_refused() {
    let f = data("two-dense-samples.ctf");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (code, _, err) = run(&[
        "read",
        "-m",
        "2",
        "-i",
        "d:dense:2",
        "--threads",
        "10000",
        &f,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!(
            "threads 10000 is more than {} (4 per available core)",
            4 * cores
        )),
        "{err}"
    );
    let max = (4 * cores).to_string();
    let (code, _, err) = run(&["read", "-m", "2", "-i", "d:dense:2", "--threads", &max, &f]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("2 sequences, 2 samples"), "{err}");
    let (_, help, _) = run(&["read", "--help"]);
    assert!(help.contains("at most 4 per core"), "{help}");
}

#[test]
fn out_of_range_values_are_invalid_values_counted_under_max_errors() {
    let f = data("out-of-range-values.ctf");
    let (code, _, err) = run(&["check", "-i", "d:dense:2", &f]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(":1:4 (byte 3): input 'd': number '1e39' is out of range for precision float"),
        "{err}"
    );
    assert!(
        err.contains(
            ":2:6 (byte 15): input 'd': number '1e400' is out of range for precision float"
        ),
        "{err}"
    );
    assert!(err.contains("errors: 2"), "{err}");
    // 1e39 fits a double; 1e400 does not.
    let (code, _, err) = run(&["check", "-i", "d:dense:2", "--precision", "double", &f]);
    assert_eq!(code, 1, "{err}");
    assert!(!err.contains("'1e39'"), "{err}");
    assert!(err.contains("errors: 1"), "{err}");
    // Under maxErrors the bad samples are skipped: no inf reaches the output.
    let (code, out, err) = run(&["dump", "-i", "d:dense:2", "--max-errors", "2", &f]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("null") && !out.contains("inf"), "{out}");
    assert!(out.contains("[3.0,4.0]") || out.contains("[3,4]"), "{out}");
    let (code, _, err) = run(&["dump", "-i", "d:dense:2", "--max-errors", "1", &f]);
    assert_eq!(code, 1, "{err}");
}

#[test]
fn zero_workers_and_zero_chunk_size_are_refused_with_their_own_names() {
    let f = data("two-dense-samples.ctf");
    let base = ["read", "-m", "2", "-i", "d:dense:2"];
    let (code, _, err) =
        run(&[&base[..], &["--num-workers", "0", "--worker-rank", "0", &f]].concat());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--num-workers must be at least 1"), "{err}");
    assert!(!err.contains("--worker-rank"), "{err}");
    let (code, _, err) = run(&[&base[..], &["--chunk-size", "0", &f]].concat());
    assert_eq!(code, 2, "{err}");
    // One size parser for every --chunk-size (K/M/G): it names the flag.
    assert!(
        err.contains("'--chunk-size <BYTES>': expected a positive size in bytes"),
        "{err}"
    );
}

/// Converts `from` to `to` (in `dir`) and returns the path of `to`.
fn convert(dir: &tempfile::TempDir, from: &str, to: &str) -> String {
    let out = dir.path().join(to).to_string_lossy().into_owned();
    let (code, _, err) = run(&["convert", from, &out]);
    assert_eq!(code, 0, "{from} -> {to}: {err}");
    out
}

#[test]
fn bex_empty_target_set_reads_as_no_set_as_in_lens() {
    // Event 0 has a target set with no ranges. Lens keeps such a set as none (its event's
    // list pointer stays NULL, in the binary reader as in the text reader, where `T:` with
    // nothing after it gives no set), so exfeed reads it as none: .bex -> .ex -> .bex and the
    // dumps agree, where the text writer once wrote `T:` and the target vanished on reload.
    let dir = tempfile::tempdir().unwrap();
    let bex = data("empty-target-set.bex");
    let (code, dumped, err) = run(&["dump", &bex]);
    assert_eq!(code, 0, "{err}");
    assert!(dumped.contains(r#""input":0,"target":null}"#), "{dumped}");
    let ex = convert(&dir, &bex, "t.ex");
    let text = std::fs::read_to_string(&ex).unwrap();
    assert!(!text.contains("T:\n"), "{text}");
    let again = convert(&dir, &ex, "t.bex");
    let (_, redumped, _) = run(&["dump", &again]);
    assert_eq!(redumped, dumped);
}

#[test]
fn bex_nan_payload_becomes_a_quiet_nan_through_text() {
    // .bex -> .ex -> .bex keeps a NaN but not its payload: text has only `-` for NaN.
    let dir = tempfile::tempdir().unwrap();
    let bex = data("nan-payload.bex");
    let original = std::fs::read(&bex).unwrap();
    assert!(original.windows(4).any(|w| w == [0xff; 4]));
    let ex = convert(&dir, &bex, "n.ex");
    assert!(std::fs::read_to_string(&ex)
        .unwrap()
        .contains("I: (0) - 0.25"));
    let back = std::fs::read(convert(&dir, &ex, "n.bex")).unwrap();
    assert_eq!(back.len(), original.len());
    let quiet = 0x7fc0_0000u32.to_be_bytes();
    let at = original.windows(4).position(|w| w == [0xff; 4]).unwrap();
    assert_eq!(&back[at..at + 4], &quiet);
    assert_eq!(&back[..at], &original[..at]);
    assert_eq!(&back[at + 4..], &original[at + 4..]);
}

/// A CTF file of `n` one-line sequences (dense `features` of 4, sparse `label` of 3).
fn ctf_lines(n: usize) -> String {
    (0..n)
        .map(|i| format!("{i} |features 0.5 -0.25 0.125 {i} |label {}:1\n", i % 3))
        .collect()
}

const CTF_INPUTS: [&str; 4] = ["-i", "features:dense:4", "-i", "label:sparse:3"];

/// Files in `dir` whose names start with `.exfeed-partial-` (unfinished outputs).
fn partial_files(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".exfeed-partial-"))
        .collect()
}

#[test]
fn full_disk_keeps_the_old_output_and_names_it() {
    // A full disk without privileges: the child's file-size limit (RLIMIT_FSIZE, 10 KiB) with
    // SIGXFSZ ignored, so a write past it fails (EFBIG) as a write to a full disk does.
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
    std::fs::write(d("big.ctf"), ctf_lines(3000)).unwrap();
    let (code, _, err) = run(&[
        &["convert"][..],
        &CTF_INPUTS,
        &[&d("big.ctf"), &d("big.cbf")],
    ]
    .concat());
    assert_eq!(code, 0, "{err}");
    let lens: String = (0..2000)
        .map(|i| format!("name:{{e{i}}} I: 0.5 0.25 T: {i};\n"))
        .collect();
    std::fs::write(d("big.ex"), lens).unwrap();
    let cases: [(&str, &str, &[&str]); 4] = [
        ("big.ctf", "out.cbf", &CTF_INPUTS),
        ("big.cbf", "out.ctf", &[]),
        ("big.cbf", "rechunked.cbf", &["--chunk-size", "1K"]),
        ("big.ex", "out.bex", &[]),
    ];
    for (input, out, extra) in cases {
        let (input, output) = (d(input), d(out));
        let args = [&["convert", &input, &output, "--force"][..], extra].concat();
        std::fs::write(d(out), "old\n").unwrap();
        let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
        let script = format!(
            "trap '' XFSZ; ulimit -f 20; exec '{}' {}",
            env!("CARGO_BIN_EXE_exfeed"),
            quoted.join(" ")
        );
        let o = std::process::Command::new("sh")
            .args(["-c", &script])
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{out}: {err}");
        assert!(
            err.contains(&format!("{}: File too large", d(out))),
            "{out}: the message names the output: {err}"
        );
        assert_eq!(std::fs::read_to_string(d(out)).unwrap(), "old\n", "{out}");
        assert_eq!(partial_files(dir.path()), Vec::<String>::new(), "{out}");
    }
}

#[test]
fn sigkill_during_a_conversion_leaves_the_old_output_or_nothing() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
    std::fs::write(d("big.ctf"), ctf_lines(200_000)).unwrap();
    let args = |out: &str, force: bool| {
        let mut a: Vec<String> = [&["convert"][..], &CTF_INPUTS, &[&d("big.ctf"), &d(out)]]
            .concat()
            .iter()
            .map(|s| s.to_string())
            .collect();
        if force {
            a.push("--force".into());
        }
        a
    };
    let (code, _, err) = run(&args("whole.cbf", false)
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>());
    assert_eq!(code, 0, "{err}");
    let whole = std::fs::read(d("whole.cbf")).unwrap();
    // Kill at several points, with and without an old file under the output name.
    for (i, ms) in [0u64, 2, 10, 30, 100, 300].into_iter().enumerate() {
        let old = i % 2 == 0;
        let out = format!("out{i}.cbf");
        if old {
            std::fs::write(d(&out), "old\n").unwrap();
        }
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_exfeed"))
            .args(args(&out, old))
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(ms));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        match std::fs::read(d(&out)) {
            Ok(bytes) if old => assert!(bytes == b"old\n" || bytes == whole, "{out} after {ms} ms"),
            Ok(bytes) => assert_eq!(bytes, whole, "{out} after {ms} ms: a partial file"),
            Err(e) => {
                assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
                assert!(!old, "{out}: the old file vanished after {ms} ms");
            }
        }
    }
}

#[test]
fn input_without_line_ends_is_bounded_by_the_record_size() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    // Through a pipe (a stream, never a file that could be mapped): a NUL fails at once, a line
    // of digits at the maximum record size (64 MiB), instead of being buffered without end.
    let feed = |input: Vec<u8>| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_exfeed"))
            .args(["dump", "-i", "a:dense:1", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&input); // the reader may stop early
        });
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let mut zeros = b"7 |a 1\n8 |a 2\n".to_vec();
    zeros.resize(zeros.len() + (8 << 20), 0);
    let (code, out, err) = feed(zeros);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("-:3:1 (byte 14): found a NUL byte: CTF is text"),
        "{err}"
    );
    // Sequence 7 is complete; 8 could still have gone on when the NUL came.
    assert_eq!(out.lines().count(), 1, "complete sequences are kept: {out}");
    let mut digits = b"|a 1\n".to_vec();
    digits.resize(digits.len() + (65 << 20), b'1');
    let (code, _, err) = feed(digits);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(
            "-:2:67108865 (byte 67108869): a sequence longer than the maximum record size \
             (67108864 bytes) starts at byte 5"
        ),
        "{err}"
    );
    // NULs, wherever they are, are shown escaped, not as invisible bytes.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("nul.ctf");
    std::fs::write(&f, b"\0\0\0\n").unwrap();
    let (code, _, err) = run(&["dump", "-i", "a:dense:1", &f.to_string_lossy()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(r"found '\u{0}\u{0}\u{0}'"), "{err}");
}
