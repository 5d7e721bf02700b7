//! Hostile input and faults, through the real binary: each test is named after the defect it
//! caught (issue 13). Small reproducing inputs live in `tests/data/`.

mod common;

use common::{exfeed, exfeed_in, record_skip_because, text};
use std::path::{Path, PathBuf};

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

/// Runs exfeed from `sh -c "SETUP; exec exfeed ARGS"`, so that the resource limits SETUP sets
/// apply to exfeed alone: (exit code, stdout, stderr).
fn run_in_shell(setup: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let script = format!(
        "{setup}; exec '{}' {}",
        env!("CARGO_BIN_EXE_exfeed"),
        quoted.join(" ")
    );
    let o = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .unwrap();
    (o.status.code(), text(&o.stdout), text(&o.stderr))
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
        let (code, _, err) = run_in_shell("trap '' XFSZ; ulimit -f 20", &args);
        assert_eq!(code, Some(2), "{out}: {err}");
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
    // Through a pipe (a stream, never a file that could be mapped): a NUL fails at once, a line
    // of digits at the maximum record size (64 MiB), instead of being buffered without end.
    let feed_to = |command: &str, input: Vec<u8>| {
        let mut args = vec![command, "-i", "a:dense:1", "-"];
        if command == "read" {
            args.extend(["-m", "2"]);
        }
        let out = exfeed_in(Path::new("."), args, Some(input.as_slice()));
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let feed = |input: Vec<u8>| feed_to("dump", input);
    let mut zeros = b"7 |a 1\n8 |a 2\n".to_vec();
    zeros.resize(zeros.len() + (8 << 20), 0);
    let (code, out, err) = feed(zeros);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("-:3:1 (byte 14): found a NUL byte: CTF is text"),
        "{err}"
    );
    // The input reads as if it ended before the NUL's line: both sequences are kept.
    assert_eq!(out.lines().count(), 2, "{out}");
    let mut digits = b"|a 1\n".to_vec();
    digits.resize(digits.len() + (65 << 20), b'1');
    // `read` holds a stream whole in memory (to randomize it): checked as it arrives.
    for (command, what) in [("dump", "sequence"), ("read", "line")] {
        let (code, _, err) = feed_to(command, digits.clone());
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains(&format!(
                "-:2:67108865 (byte 67108869): a {what} longer than the maximum record size \
                 (67108864 bytes) starts at byte 5"
            )),
            "{command}: {err}"
        );
    }
    // Control bytes in what was found are shown escaped, not printed raw (invisible, or
    // read by the terminal).
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("escape.ctf");
    std::fs::write(&f, b"\x1b[31m\n").unwrap();
    let (code, _, err) = run(&["dump", "-i", "a:dense:1", &f.to_string_lossy()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(r"found '\u{1b}[31m'"), "{err}");
}

#[test]
fn a_damaged_index_cache_is_not_used_and_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("big.ctf");
    std::fs::write(&data, ctf_lines(3000)).unwrap();
    let cache = dir.path().join("big.ctf.exfeed-index");
    let read = || {
        let data = data.to_string_lossy();
        let args = [
            &["read", "-m", "100", "--no-randomize", "--cache-index"][..],
            &["--chunk-size", "4096"],
            &CTF_INPUTS,
            &[&data],
        ]
        .concat();
        run(&args)
    };
    let (code, _, err) = read();
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("index scanned and cached"), "{err}");
    let good = std::fs::read(&cache).unwrap();
    // One flipped bit in a chunk record once gave a false data error and the damaged cache
    // was kept; a shifted offset silently dropped a sequence. Any damaged byte now means "not
    // used, re-indexing", every sequence is read, and the rebuilt cache replaces the damaged
    // one. The header is 80 bytes, each chunk record 48, the keys follow.
    let chunks = u64::from_le_bytes(good[64..72].try_into().unwrap()) as usize;
    for at in [
        80 + 48,
        80 + 48 + 16,
        80 + 48 * chunks + 8 * 1500,
        good.len() - 1,
    ] {
        let mut bad = good.clone();
        bad[at] ^= 1;
        std::fs::write(&cache, &bad).unwrap();
        let (code, _, err) = read();
        assert_eq!(code, 0, "{at}: {err}");
        assert!(
            err.contains("not used (its checksum does not match: it is damaged); re-indexing"),
            "{at}: {err}"
        );
        assert!(err.contains("3000 sequences"), "{at}: {err}");
        assert_eq!(std::fs::read(&cache).unwrap(), good, "{at}: replaced");
        let (code, _, err) = read();
        assert_eq!(code, 0, "{err}");
        assert!(
            err.contains("index from cache") && !err.contains("warning"),
            "{err}"
        );
    }
}

/// A 1 GiB address space (RLIMIT_AS) for the child: an input read whole into memory or a line
/// buffered without end fails there ("out of memory", not the expected error) long before it
/// could take the machine's memory.
const ONE_GIB_OF_MEMORY: &str = "ulimit -v 1048576";

/// Every command that reads, on `file`, with `args`; `convert` writes `out`.
fn every_reading_command<'a>(file: &'a str, args: &[&'a str], out: &'a str) -> Vec<Vec<&'a str>> {
    let convert = ["convert", "--force"];
    [
        (&["info"][..], None),
        (&["dump"], None),
        (&["check"], None),
        (&["read", "-m", "2"], None),
        (&convert, Some(out)),
    ]
    .iter()
    .map(|(cmd, out)| [cmd, args, &[file], out.as_slice()].concat())
    .collect()
}

/// One dense input `a` of dim 1.
const A: [&str; 2] = ["-i", "a:dense:1"];

#[test]
fn an_endless_device_stops_at_its_first_byte_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.cbf").to_string_lossy().into_owned();
    for cmd in every_reading_command("/dev/zero", &A, &out) {
        let (code, stdout, err) = run_in_shell(ONE_GIB_OF_MEMORY, &cmd);
        assert_eq!(code, Some(1), "{cmd:?}: {err}");
        assert!(
            format!("{stdout}{err}")
                .contains("/dev/zero:1:1 (byte 0): found a NUL byte: CTF is text"),
            "{cmd:?}: {stdout}{err}"
        );
    }
    // As CBF: refused on its magic before the stream is read whole.
    let out = dir.path().join("out.ctf").to_string_lossy().into_owned();
    for cmd in [
        &["info", "--from", "cbf", "/dev/zero"][..],
        &["dump", "--from", "cbf", "/dev/zero"],
        &["check", "--from", "cbf", "/dev/zero"],
        &["convert", "--from", "cbf", "/dev/zero", &out],
    ] {
        let (code, stdout, err) = run_in_shell(ONE_GIB_OF_MEMORY, cmd);
        assert_eq!(code, Some(1), "{cmd:?}: {err}");
        assert!(
            format!("{stdout}{err}")
                .contains("/dev/zero (byte 0): not a CBF file: magic is 0x0000000000000000"),
            "{cmd:?}: {stdout}{err}"
        );
    }
    // As Lens (zeros are no cookie, so text): a set header that never ends, refused at the
    // record limit. It once took minutes: every read searched the whole unread part for a
    // line end.
    let out_bex = dir.path().join("out.bex").to_string_lossy().into_owned();
    for from in ["ex", "bex"] {
        for cmd in [
            &["info", "--from", from, "/dev/zero"][..],
            &["dump", "--from", from, "/dev/zero"],
            &["check", "--from", from, "/dev/zero"],
            &["convert", "--from", from, "/dev/zero", &out_bex],
        ] {
            let (code, stdout, err) = run_in_shell(ONE_GIB_OF_MEMORY, cmd);
            assert_eq!(code, Some(1), "{cmd:?}: {err}");
            assert!(
                format!("{stdout}{err}").contains(
                    "/dev/zero:1:67108865 (byte 67108864): the set header is longer than the \
                     maximum record size (67108864 bytes) or never ends"
                ),
                "{cmd:?}: {stdout}{err}"
            );
        }
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// `n` gzip members of `block` each, one after another: a small file that decompresses to `n`
/// times `block` (gzip readers go on across members, as `gzip -d` does).
fn gzip_bomb(block: &[u8], n: usize) -> Vec<u8> {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(block).unwrap();
    gz.finish().unwrap().repeat(n)
}

#[test]
fn decompression_bombs_are_checked_as_they_stream_in_bounded_memory() {
    // Each 2 GiB decompressed, twice the child's address space.
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
    std::fs::write(d("zeros.gz"), gzip_bomb(&[0; 1 << 20], 2048)).unwrap();
    std::fs::write(d("digits.gz"), gzip_bomb(&[b'1'; 1 << 20], 2048)).unwrap();
    assert!(std::fs::metadata(d("digits.gz")).unwrap().len() < 8 << 20);
    let out = d("out.cbf");
    let zeros = d("zeros.gz");
    for cmd in every_reading_command(&zeros, &A, &out) {
        let (code, stdout, err) = run_in_shell(ONE_GIB_OF_MEMORY, &cmd);
        assert_eq!(code, Some(1), "{cmd:?}: {err}");
        assert!(
            format!("{stdout}{err}").contains("zeros.gz:1:1 (byte 0): found a NUL byte"),
            "{cmd:?}: {stdout}{err}"
        );
    }
    // A line without end: an error where it crosses the maximum record size (the commands
    // that stream say sequence, those that hold the input whole say line).
    let digits = d("digits.gz");
    for cmd in every_reading_command(
        &digits,
        &[&A[..], &["--max-record-size", "1M"]].concat(),
        &out,
    ) {
        let (code, stdout, err) = run_in_shell(ONE_GIB_OF_MEMORY, &cmd);
        assert_eq!(code, Some(1), "{cmd:?}: {err}");
        let all = format!("{stdout}{err}");
        assert!(
            all.contains("digits.gz:1:1048577 (byte 1048576): a "),
            "{cmd:?}: {all}"
        );
        assert!(
            all.contains("longer than the maximum record size (1048576 bytes) starts at byte 0"),
            "{cmd:?}: {all}"
        );
    }
    assert!(!std::path::Path::new(&out).exists());
}

/// A CTF file of two sequences of one line each, a sparse input `s` of 1000 values (about 6 KB).
fn long_lines(dir: &std::path::Path) -> String {
    let line: String = (0..1000).map(|i| format!(" {i}:1")).collect();
    let path = dir.join("long.ctf");
    std::fs::write(&path, format!("0 |s{line}\n1 |s{line}\n")).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn max_record_size_is_a_flag_of_every_reading_command_and_a_config_parameter() {
    let dir = tempfile::tempdir().unwrap();
    let f = long_lines(dir.path());
    let out = dir.path().join("out.cbf").to_string_lossy().into_owned();
    let s = ["-i", "s:sparse:1000"];
    for cmd in every_reading_command(&f, &s, &out) {
        let (code, _, err) = run(&cmd);
        assert_eq!(code, 0, "{cmd:?}: {err}");
    }
    // Each reads the file its own way (streamed, indexed, mapped and converted in pieces):
    // the same error at the same byte.
    let lower = [&s[..], &["--max-record-size", "4K"]].concat();
    for cmd in every_reading_command(&f, &lower, &out) {
        let (code, _, err) = run(&cmd);
        assert_eq!(code, 1, "{cmd:?}: {err}");
        assert!(
            err.contains(
                "long.ctf:1:4097 (byte 4096): a sequence longer than the maximum record size \
                 (4096 bytes) starts at byte 0 (raise it with --max-record-size or \
                 maxRecordSizeInBytes)"
            ),
            "{cmd:?}: {err}"
        );
    }
    // A Lens example longer than the limit: the same error in every command, `read` (whose
    // source indexes the whole file) included.
    let ex = dir.path().join("long.ex");
    let units = vec!["1"; 3000].join(" ");
    std::fs::write(&ex, format!("name: a I: {units} T: 1;\n")).unwrap();
    let ex = ex.to_string_lossy().into_owned();
    let out_bex = dir.path().join("out.bex").to_string_lossy().into_owned();
    let layout = ["--input-groups", "in:3000", "--target-groups", "out:1"];
    let limit = ["--max-record-size", "1K"];
    for cmd in [
        &["info", limit[0], limit[1], &ex][..],
        &["dump", limit[0], limit[1], &ex],
        &["check", limit[0], limit[1], &ex],
        &[&["read", "-m", "2"][..], &layout, &limit, &[&ex]].concat(),
        &["convert", limit[0], limit[1], &ex, &out_bex],
    ] {
        let (code, _, err) = run(cmd);
        assert_eq!(code, 1, "{cmd:?}: {err}");
        assert!(
            err.contains(
                "long.ex:1:1025 (byte 1024): example 0 is longer than the maximum record size \
                 (1024 bytes)"
            ),
            "{cmd:?}: {err}"
        );
    }
    let (code, _, err) = run(&["check", "-i", "s:sparse:1000", "--max-record-size", "0", &f]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("'--max-record-size <BYTES>': expected a positive size in bytes"),
        "{err}"
    );
    // The configuration's maxRecordSizeInBytes, which the flag overrides.
    let cfg = dir.path().join("r.cntk");
    std::fs::write(
        &cfg,
        format!(
            "reader = [\n  readerType = \"CNTKTextFormatReader\"\n  file = \"{f}\"\n  \
             maxRecordSizeInBytes = 4096\n  input = [ s = [ dim = 1000 ; format = \"sparse\" ] ]\n]\n"
        ),
    )
    .unwrap();
    let cfg = cfg.to_string_lossy();
    for cmd in [&["read", "-m", "2"][..], &["check"], &["dump"]] {
        let (code, _, err) = run(&[cmd, &["--config", &cfg]].concat());
        assert_eq!(code, 1, "{cmd:?}: {err}");
        assert!(
            err.contains("(byte 4096): a sequence longer"),
            "{cmd:?}: {err}"
        );
        let (code, _, err) = run(&[cmd, &["--config", &cfg, "--max-record-size", "64K"]].concat());
        assert_eq!(code, 0, "{cmd:?}: {err}");
    }
    let (_, help, _) = run(&["read", "--help"]);
    assert!(help.contains("--max-record-size <BYTES>"), "{help}");
}

#[test]
fn non_regular_inputs_are_read_as_streams_never_silently_as_nothing() {
    use std::io::Write;
    // A FIFO is read as the stream it is.
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("data.fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
            f.write_all(ctf_lines(500).as_bytes()).unwrap();
        })
    };
    let fifo = fifo.to_string_lossy();
    let (code, _, err) = run(&[&["read", "-m", "64"][..], &CTF_INPUTS, &[&fifo]].concat());
    writer.join().unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("500 sequences, 500 samples"), "{err}");
    // An empty device or pipe is an empty file: an error, as for an empty regular file,
    // in every command (read once reported 0 sequences and exit 0).
    let out = dir.path().join("out.cbf").to_string_lossy().into_owned();
    for cmd in every_reading_command("/dev/null", &A, &out) {
        let (code, stdout, err) = run(&cmd);
        assert_eq!(code, 1, "{cmd:?}: {err}");
        assert!(
            format!("{stdout}{err}").contains("/dev/null: the file is empty: no data lines"),
            "{cmd:?}: {stdout}{err}"
        );
    }
    let empty = std::process::Command::new(env!("CARGO_BIN_EXE_exfeed"))
        .args(["read", "-m", "2", "-i", "a:dense:1", "-"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(empty.status.code(), Some(1));
    assert!(text(&empty.stderr).contains("-: the file is empty: no data lines"));
}

#[test]
fn a_full_standard_output_is_named_and_fails_the_command() {
    let f = data("two-dense-samples.ctf");
    for cmd in [
        &["dump", "-i", "d:dense:2", &f][..],
        &["check", "-i", "d:dense:2", &f],
        &["info", "-i", "d:dense:2", &f],
        &["read", "-m", "1", "--dump", "-i", "d:dense:2", &f],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_exfeed"))
            .args(cmd)
            .stdout(full)
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{cmd:?}: {err}");
        assert!(
            err.contains("exfeed: error: standard output: No space left on device"),
            "{cmd:?}: {err}"
        );
    }
}

#[test]
fn check_counts_a_decompression_error_as_one_error() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(ctf_lines(20_000).as_bytes()).unwrap();
    let gz = gz.finish().unwrap();
    let cut = dir.path().join("cut.ctf.gz");
    std::fs::write(&cut, &gz[..gz.len() / 2]).unwrap();
    let (code, out, _) = run(&[&["check"][..], &CTF_INPUTS, &[&cut.to_string_lossy()]].concat());
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("cut.ctf.gz: invalid (stopped at the error above)"),
        "{out}"
    );
    assert!(out.contains("errors: 1,"), "{out}");
    assert!(
        !out.contains("  sequences: 0\n"),
        "the part before the cut is counted: {out}"
    );
}

#[test]
fn a_cut_bex_fails_at_the_same_byte_in_every_command() {
    // convert (.bex -> .ex, which reads the set whole) once said byte 37 ("the number of
    // examples is 3, more than the 4 bytes left can hold") where read said byte 44.
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
    std::fs::write(d("ok.ex"), "name: a I: 1 0 T: 0 1;\n".repeat(3)).unwrap();
    let bex = std::fs::read(convert(&dir, &d("ok.ex"), "ok.bex")).unwrap();
    std::fs::write(d("cut.bex"), &bex[..45]).unwrap();
    let cut = d("cut.bex");
    let layout = ["--input-groups", "in:2", "--target-groups", "out:2"];
    let (out_ex, out_ctf) = (d("out.ex"), d("out.ctf"));
    for cmd in [
        &["read", "-m", "1", &cut][..],
        &["convert", &cut, &out_ex],
        &["convert", &cut, &out_ctf],
        &["check", &cut],
        &["dump", &cut],
        &["info", &cut],
    ] {
        let (code, _, all) = run(&[cmd, &layout[..]].concat());
        assert_eq!(code, 1, "{cmd:?}: {all}");
        assert!(
            all.contains(
                "cut.bex (byte 44): example 0: file ends inside the example frequency (4 bytes \
                 needed, 1 left)"
            ),
            "{cmd:?}: {all}"
        );
    }
}

#[test]
fn a_full_tmpfs_keeps_the_old_output_and_names_it() {
    // A real full disk without privileges: a 64 KiB tmpfs mounted in a user and mount
    // namespace of our own (unshare -rm), where the conversion runs; what the mount holds
    // afterwards is listed from inside it (the mount ends with the namespace).
    let probe = std::process::Command::new("unshare")
        .args(["-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        return record_skip_because(
            "unprivileged user namespaces or tmpfs mounts are not allowed here",
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
    std::fs::write(d("big.ctf"), ctf_lines(3000)).unwrap();
    std::fs::create_dir(d("full")).unwrap();
    let out = d("full/out.cbf");
    let script = format!(
        "mount -t tmpfs -o size=64k tmpfs '{full}' && printf 'old\\n' >'{out}' && \
         '{exe}' convert --force -i features:dense:4 -i label:sparse:3 '{input}' '{out}'; \
         echo \"exit $?\"; cat '{out}'; ls -A '{full}'",
        full = d("full"),
        exe = env!("CARGO_BIN_EXE_exfeed"),
        input = d("big.ctf"),
    );
    let o = std::process::Command::new("unshare")
        .args(["-rm", "sh", "-c", &script])
        .output()
        .unwrap();
    let (stdout, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(
        stdout, "exit 2\nold\nout.cbf\n",
        "old file kept, nothing else: {err}"
    );
    assert!(
        err.contains(&format!("{out}: No space left on device")),
        "names the output: {err}"
    );
}

#[test]
fn an_example_of_many_events_in_few_bytes_reads_back_in_both_forms() {
    // 70,000 events declared in a few bytes (one event list for all): the text reader once
    // refused more events than the file had bytes, the binary reader more than 8 per byte
    // left, so a .bex it read (the lens fuzz target's find: 196,608 events in 39 KB) was
    // written as .ex that did not read back. Memory is bounded by the record size instead.
    let dir = tempfile::tempdir().unwrap();
    let ex = dir.path().join("many.ex").to_string_lossy().into_owned();
    std::fs::write(&ex, ";\n70000 [*] I: 1 0 T: 0 1;\n").unwrap();
    let bex = convert(&dir, &ex, "many.bex");
    let again = convert(&dir, &bex, "again.ex");
    for f in [&ex, &bex, &again] {
        let (code, out, all) = run(&["check", f]);
        assert_eq!(code, 0, "{f}: {all}");
        assert!(out.contains("examples: 1, events: 70000"), "{f}: {out}");
    }
    assert_eq!(
        std::fs::read(convert(&dir, &again, "again.bex")).unwrap(),
        std::fs::read(&bex).unwrap()
    );
}

/// A small CTF input in `dir` and its conversion to CBF (the bytes a consumer must get).
fn ctf_and_its_cbf(dir: &Path) -> (String, Vec<u8>) {
    let input = dir.join("in.ctf").display().to_string();
    std::fs::write(&input, ctf_lines(200)).unwrap();
    let reference = dir.join("reference.cbf").display().to_string();
    let (code, _, err) = run(&[&["convert"][..], &CTF_INPUTS, &[&input, &reference]].concat());
    assert_eq!(code, 0, "{err}");
    (input, std::fs::read(&reference).unwrap())
}

#[cfg(unix)]
#[test]
fn force_writes_into_a_fifo_for_its_reader_and_never_renames_over_it() {
    use std::os::unix::fs::FileTypeExt;
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let (input, want) = ctf_and_its_cbf(dir.path());
    let fifo = dir.path().join("out.cbf");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let convert = [
        &["convert"][..],
        &CTF_INPUTS,
        &[&input, fifo.to_str().unwrap()],
    ]
    .concat();
    // Without --force: refused, saying what is there and what --force would do.
    let (code, _, err) = run(&convert);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("output is a FIFO (named pipe); --force writes into it in place"),
        "{err}"
    );
    // With --force: a real consumer blocked on the FIFO gets the whole conversion.
    let got = dir.path().join("got.cbf");
    let mut consumer = std::process::Command::new("sh")
        .args(["-c", "exec cat \"$0\" > \"$1\""])
        .args([&fifo, &got])
        .spawn()
        .unwrap();
    let (code, _, err) = run(&[&convert[..], &["--force"]].concat());
    let started = Instant::now();
    let finished = loop {
        if let Some(status) = consumer.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > Duration::from_secs(20) {
            let _ = consumer.kill();
            let _ = consumer.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, 0, "{err}");
    assert!(finished.is_some(), "the FIFO's reader never got the output");
    assert!(
        std::fs::read(&got).unwrap() == want,
        "the reader got the whole CBF"
    );
    let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(kind.is_fifo(), "still a FIFO: {kind:?}");
    assert_eq!(partial_files(dir.path()), Vec::<String>::new());
}

#[cfg(unix)]
#[test]
fn force_writes_into_a_character_device_and_it_stays_one() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let (input, _) = ctf_and_its_cbf(dir.path());
    // A copy of /dev/null (needs root, as the issue's reproduction did).
    let null = dir.path().join("null");
    let made = std::process::Command::new("mknod")
        .arg(&null)
        .args(["c", "1", "3"])
        .output()
        .unwrap();
    if !made.status.success() {
        record_skip_because(&format!("mknod failed: {}", text(&made.stderr)));
        return;
    }
    // Through a link as well, as /dev/stdout is one.
    let link = dir.path().join("null-link");
    std::os::unix::fs::symlink(&null, &link).unwrap();
    for target in [&null, &link] {
        let target = target.to_str().unwrap();
        let convert = [
            &["convert"][..],
            &CTF_INPUTS,
            &[&input, target, "--to", "cbf"],
        ]
        .concat();
        let (code, _, err) = run(&convert);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("output is a character device; --force writes into it in place"),
            "{err}"
        );
        let (code, _, err) = run(&[&convert[..], &["--force"]].concat());
        assert_eq!(code, 0, "{target}: {err}");
        let kind = std::fs::metadata(&null).unwrap().file_type();
        assert!(kind.is_char_device(), "{target}: still a device: {kind:?}");
        assert_eq!(std::fs::read(&null).unwrap().len(), 0, "still /dev/null");
    }
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(partial_files(dir.path()), Vec::<String>::new());
}

#[cfg(unix)]
#[test]
fn a_socket_as_output_is_refused_saying_why() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let (input, _) = ctf_and_its_cbf(dir.path());
    let socket = dir.path().join("out.cbf");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let socket = socket.to_str().unwrap();
    for force in [&[][..], &["--force"]] {
        let args = [&["convert"][..], &CTF_INPUTS, &[&input, socket], force].concat();
        let (code, _, err) = run(&args);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains(
                "output is a socket: exfeed writes regular files, FIFOs and character devices"
            ),
            "{err}"
        );
        let kind = std::fs::symlink_metadata(socket).unwrap().file_type();
        assert!(kind.is_socket(), "{kind:?}");
    }
}

#[cfg(unix)]
#[test]
fn a_dangling_symlink_as_output_is_named_with_what_force_would_do() {
    let dir = tempfile::tempdir().unwrap();
    let (input, want) = ctf_and_its_cbf(dir.path());
    let link = dir.path().join("out.cbf");
    std::os::unix::fs::symlink("/nonexistent/exfeed-target.cbf", &link).unwrap();
    let link = link.to_str().unwrap();
    let convert = [&["convert"][..], &CTF_INPUTS, &[&input, link]].concat();
    let (code, _, err) = run(&convert);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(
            "output is a symbolic link to '/nonexistent/exfeed-target.cbf', which does not \
             exist; --force replaces the link with a regular file"
        ),
        "{err}"
    );
    assert!(!err.contains("appeared while writing"), "{err}");
    assert!(std::fs::symlink_metadata(link)
        .unwrap()
        .file_type()
        .is_symlink());
    let (code, _, err) = run(&[&convert[..], &["--force"]].concat());
    assert_eq!(code, 0, "{err}");
    let meta = std::fs::symlink_metadata(link).unwrap();
    assert!(meta.file_type().is_file(), "the link was replaced");
    assert!(std::fs::read(link).unwrap() == want);
}

#[cfg(unix)]
#[test]
fn force_replaces_a_symlink_to_a_file_and_leaves_the_file_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (input, want) = ctf_and_its_cbf(dir.path());
    let kept = dir.path().join("kept.cbf");
    std::fs::write(&kept, "old\n").unwrap();
    let link = dir.path().join("out.cbf");
    std::os::unix::fs::symlink(&kept, &link).unwrap();
    let link = link.to_str().unwrap();
    let convert = [&["convert"][..], &CTF_INPUTS, &[&input, link]].concat();
    let (code, _, err) = run(&convert);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!(
            "output is a symbolic link to '{}'; --force replaces the link (not the file it points to) with a regular file",
            kept.display()
        )),
        "{err}"
    );
    let (code, _, err) = run(&[&convert[..], &["--force"]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::symlink_metadata(link)
        .unwrap()
        .file_type()
        .is_file());
    assert!(std::fs::read(link).unwrap() == want);
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "old\n");
}

#[cfg(unix)]
#[test]
fn a_broken_symlink_matched_by_a_corpus_glob_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g");
    std::fs::create_dir(&g).unwrap();
    for name in ["a.ctf", "b.ctf"] {
        std::fs::write(g.join(name), ctf_lines(10)).unwrap();
    }
    std::os::unix::fs::symlink("/nonexistent", g.join("c.ctf")).unwrap();
    // A directory matched by the glob is no shard, and no error.
    std::fs::create_dir(g.join("d.ctf")).unwrap();
    let glob = format!("{}/*.ctf", g.display());
    let link = g.join("c.ctf").display().to_string();
    let want = format!(
        "{link}: matched by the corpus glob '{glob}', a symbolic link to '/nonexistent', which \
         does not exist"
    );
    for command in ["read", "check", "convert"] {
        let out = dir.path().join("out.cbf").display().to_string();
        let mut args = vec![command, "--corpus", &glob];
        args.extend(CTF_INPUTS);
        match command {
            "read" => args.extend(["-m", "4"]),
            "convert" => args.push(&out),
            _ => {}
        }
        let (code, _, err) = run(&args);
        assert_eq!(code, 2, "{command}: {err}");
        assert!(err.contains(&want), "{command}: {err}");
    }
    // The same entry in a list file, for comparison, was an error already.
    let list = dir.path().join("list.txt");
    std::fs::write(&list, "g/a.ctf\ng/b.ctf\ng/c.ctf\n").unwrap();
    let list = format!("@{}", list.display());
    let (code, _, err) = run(&[&["read", "-m", "4", "--corpus", &list][..], &CTF_INPUTS].concat());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&link), "{err}");
}
