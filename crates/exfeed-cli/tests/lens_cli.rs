//! `exfeed dump/check/info/convert` on Lens example files, through the real binary, including
//! standard input fed by another process through a pipe.

mod common;

use common::{dumped_example_names, exfeed, text};
use std::process::{Command, Output, Stdio};

const EX: &str = ";\nname: a I: (in 1) 0.5 T: {out} 1;\nname: b 2 I: (in 0) 1 0 T: 0 1;\n";

#[test]
fn dump_file_and_piped_stdin_agree() {
    let dir = tempfile::tempdir().unwrap();
    let ex = dir.path().join("x.ex");
    std::fs::write(&ex, EX).unwrap();
    let from_file = exfeed(&["dump", ex.to_str().unwrap()]);
    assert!(from_file.status.success(), "{}", text(&from_file.stderr));
    let lines: Vec<_> = text(&from_file.stdout).lines().map(String::from).collect();
    assert_eq!(lines.len(), 3, "header and two examples");
    assert!(lines[1].contains("\"name\":\"a\""));

    // A real pipe: `cat x.ex | exfeed dump - --from ex`.
    let mut cat = Command::new("cat")
        .arg(&ex)
        .stdout(Stdio::piped())
        .spawn()
        .expect("cat runs");
    let piped = Command::new(env!("CARGO_BIN_EXE_exfeed"))
        .args(["dump", "-", "--from", "ex"])
        .stdin(cat.stdout.take().unwrap())
        .output()
        .unwrap();
    cat.wait().unwrap();
    assert!(piped.status.success(), "{}", text(&piped.stderr));
    // Standard input is read one example at a time: the same examples, and the same set
    // header but with its counts unknown (null) when it is printed.
    let piped_lines: Vec<_> = text(&piped.stdout).lines().map(String::from).collect();
    assert_eq!(piped_lines[1..], lines[1..]);
    let head = |l: &str| serde_json::from_str::<serde_json::Value>(l).unwrap();
    let (file_head, pipe_head) = (head(&lines[0]), head(&piped_lines[0]));
    assert_eq!(file_head["set"], pipe_head["set"]);
    assert_eq!(file_head["examples"], 2);
    assert!(pipe_head["examples"].is_null());
}

#[test]
fn materialized_dump_from_binary_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let ex = dir.path().join("x.ex");
    std::fs::write(&ex, EX).unwrap();
    let bex = dir.path().join("x.bex.gz");
    let conv = exfeed(&["convert", ex.to_str().unwrap(), bex.to_str().unwrap()]);
    assert!(conv.status.success(), "{}", text(&conv.stderr));
    let groups = ["--input-groups", "in:2", "--target-groups", "out:2"];
    let mut args = vec!["dump", ex.to_str().unwrap()];
    args.extend(groups);
    let direct = exfeed(&args);
    assert!(direct.status.success(), "{}", text(&direct.stderr));
    let first: serde_json::Value =
        serde_json::from_str(text(&direct.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(first["name"], "a");
    let floats = |v: &serde_json::Value| -> Vec<f64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    assert_eq!(floats(&first["events"][0]["input"]), [0.0, 0.5]);
    assert_eq!(floats(&first["events"][0]["target"]), [0.0, 1.0]);

    let mut cat = Command::new("cat")
        .arg(&bex)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut args = vec!["dump", "-", "--from", "bex"];
    args.extend(groups);
    let piped = Command::new(env!("CARGO_BIN_EXE_exfeed"))
        .args(&args)
        .stdin(cat.stdout.take().unwrap())
        .output()
        .unwrap();
    cat.wait().unwrap();
    assert!(piped.status.success(), "{}", text(&piped.stderr));
    assert_eq!(piped.stdout, direct.stdout);
}

#[test]
fn check_info_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let ex = dir.path().join("x.ex");
    std::fs::write(&ex, EX).unwrap();
    let ok = exfeed(&["check", ex.to_str().unwrap()]);
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    assert!(
        text(&ok.stdout).contains("examples: 2, events: 3"),
        "{}",
        text(&ok.stdout)
    );
    let info = exfeed(&["info", ex.to_str().unwrap(), "--json"]);
    assert!(info.status.success(), "{}", text(&info.stderr));
    let v: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(v["examples"], 2);
    assert_eq!(v["events"], 3);
    let bad = dir.path().join("bad.ex");
    std::fs::write(&bad, ";\nI: 1\n").unwrap();
    let out = exfeed(&["check", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("error: ") && text(&out.stdout).contains("bad.ex:3:1 (byte 7)"),
        "{}",
        text(&out.stdout)
    );
}

/// `.ex -> .ctf/.cbf` given the layout, dumped, equals the materialized Lens dump.
#[test]
fn convert_to_ctf_and_cbf_matches_materialized_dump() {
    let dir = tempfile::tempdir().unwrap();
    let ex = dir.path().join("x.ex");
    std::fs::write(&ex, EX).unwrap();
    let ex = ex.to_str().unwrap();
    let groups = ["--input-groups", "in:2", "--target-groups", "out:2"];
    let mut args = vec!["dump", ex];
    args.extend(groups);
    let lens = exfeed(&args);
    assert!(lens.status.success(), "{}", text(&lens.stderr));
    let lens: Vec<serde_json::Value> = text(&lens.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lens.len(), 2);
    for out_name in ["x.ctf", "x.cbf"] {
        let out = dir.path().join(out_name);
        let out = out.to_str().unwrap();
        let mut args = vec!["convert", ex, out];
        args.extend(groups);
        let conv = exfeed(&args);
        assert!(conv.status.success(), "{}", text(&conv.stderr));
        let mut args = vec!["dump", out];
        if out_name.ends_with("ctf") {
            args.extend(["--input", "input:dense:2", "--input", "target:dense:2"]);
        }
        let dumped = exfeed(&args);
        assert!(dumped.status.success(), "{}", text(&dumped.stderr));
        let seqs: Vec<serde_json::Value> = text(&dumped.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(seqs.len(), lens.len(), "{out_name}");
        for (k, (s, l)) in seqs.iter().zip(&lens).enumerate() {
            assert_eq!(s["key"], k);
            let events = l["events"].as_array().unwrap();
            for stream in ["input", "target"] {
                let want: Vec<_> = events.iter().map(|e| e[stream].clone()).collect();
                let got = s["streams"][stream].as_array().unwrap();
                assert_eq!(got.len(), want.len());
                for (g, w) in got.iter().zip(&want) {
                    let f = |v: &serde_json::Value| -> Vec<f64> {
                        v.as_array()
                            .unwrap()
                            .iter()
                            .map(|x| x.as_f64().unwrap())
                            .collect()
                    };
                    assert_eq!(f(g), f(w), "{out_name} example {k} {stream}");
                }
            }
        }
    }
}

#[test]
fn convert_with_nan_needs_a_value() {
    let dir = tempfile::tempdir().unwrap();
    let ex = dir.path().join("n.ex");
    std::fs::write(&ex, ";\nname: a I: 1 - T: 0 1;\n").unwrap();
    let ex = ex.to_str().unwrap();
    let out = dir.path().join("n.ctf");
    let out = out.to_str().unwrap();
    let groups = ["--input-groups", "in:2", "--target-groups", "out:2"];
    let mut args = vec!["convert", ex, out];
    args.extend(groups);
    let r = exfeed(&args);
    assert!(!r.status.success());
    let err = text(&r.stderr);
    assert!(
        err.contains("example 0") && err.contains("event 0") && err.contains("--nan"),
        "{err}"
    );
    assert!(!std::path::Path::new(out).exists(), "no partial output");
    args.extend(["--nan", "-1"]);
    let r = exfeed(&args);
    assert!(r.status.success(), "{}", text(&r.stderr));
    let ctf = std::fs::read_to_string(out).unwrap();
    assert!(ctf.contains("|input 1 -1"), "{ctf}");
}

/// Spawns `exfeed ARGS` with piped standard input and output; a thread forwards its output
/// lines, so the test can wait for each one with a generous deadline guard.
fn spawn_streaming(
    args: &[&str],
) -> (
    std::process::Child,
    std::process::ChildStdin,
    std::sync::mpsc::Receiver<String>,
) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_exfeed"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("exfeed runs");
    let stdin = child.stdin.take().unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, stdin, rx)
}

/// The next output line; the deadline only guards against a hang (a dump that waits for the
/// end of its input would never print it while the test still holds the pipe open).
#[track_caller]
fn next_line(rx: &std::sync::mpsc::Receiver<String>) -> serde_json::Value {
    let line = rx
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("an output line while standard input is still open");
    serde_json::from_str(&line).unwrap()
}

#[test]
fn stdin_dump_prints_each_example_before_the_next_arrives() {
    use std::io::Write;
    // Structural: the header line, then each example as soon as its ';' arrives.
    dump_two_examples_one_at_a_time("ex", b"max: 3;\nname: a I: 1 T: 0;\n", b"name: b 2 I: 2;\n");

    // Materialized: no header, one object per example.
    let (child, mut stdin, rx) = spawn_streaming(&[
        "dump",
        "-",
        "--from",
        "ex",
        "--input-groups",
        "in:2",
        "--target-groups",
        "out:1",
    ]);
    stdin
        .write_all(b";\nname: a I: (in 1) 0.5 T: 1;\n")
        .unwrap();
    stdin.flush().unwrap();
    let a = next_line(&rx);
    assert_eq!(a["name"], "a");
    assert_eq!(a["events"][0]["input"], serde_json::json!([0, 0.5]));
    assert_eq!(a["events"][0]["target"], serde_json::json!([1]));
    stdin.write_all(b"name: b I: 1 1;\n").unwrap();
    stdin.flush().unwrap();
    let b = next_line(&rx);
    assert_eq!(b["events"][0]["input"], serde_json::json!([1, 1]));
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(rx.recv().is_err());
}

#[test]
fn binary_stdin_dump_prints_each_example_before_the_next_arrives() {
    // The .bex of a one-example set is, up to its example count, the start of the .bex of the
    // same set with a second example: feed that much, see the first example, then the rest.
    let dir = tempfile::tempdir().unwrap();
    let bex = |name: &str, ex: &[u8]| -> Vec<u8> {
        let (src, dst) = (
            dir.path().join(format!("{name}.ex")),
            dir.path().join(format!("{name}.bex")),
        );
        std::fs::write(&src, ex).unwrap();
        let r = exfeed([
            std::ffi::OsStr::new("convert"),
            src.as_os_str(),
            dst.as_os_str(),
        ]);
        assert!(r.status.success(), "{}", text(&r.stderr));
        std::fs::read(dst).unwrap()
    };
    let one = bex("one", b"max: 3;\nname: a I: 1 T: 0;\n");
    let two = bex("two", b"max: 3;\nname: a I: 1 T: 0;\nname: b 2 I: 2;\n");
    let split = one.len();
    assert!(two.len() > split);

    dump_two_examples_one_at_a_time("bex", &two[..split], &two[split..]);
}

/// Feeds `first` (a set with maxTime 3 and its example "a") to `exfeed dump - --from FROM`, sees
/// the header and "a" printed while standard input is still open, then feeds `rest` (example
/// "b" of two events) and sees it.
fn dump_two_examples_one_at_a_time(from: &str, first: &[u8], rest: &[u8]) {
    use std::io::Write;
    let (child, mut stdin, rx) = spawn_streaming(&["dump", "-", "--from", from]);
    stdin.write_all(first).unwrap();
    stdin.flush().unwrap();
    let head = next_line(&rx);
    assert_eq!(head["set"]["maxTime"], 3);
    let a = next_line(&rx);
    assert_eq!(
        (a["index"].as_u64(), a["name"].as_str()),
        (Some(0), Some("a"))
    );
    // Only now does the second example exist.
    stdin.write_all(rest).unwrap();
    stdin.flush().unwrap();
    let b = next_line(&rx);
    assert_eq!(
        (b["index"].as_u64(), b["name"].as_str()),
        (Some(1), Some("b"))
    );
    assert_eq!(b["events"].as_array().unwrap().len(), 2);
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(rx.recv().is_err(), "nothing more after the two examples");
}

#[test]
fn pipe_mode_loops_over_a_file_until_max_examples() {
    let dir = tempfile::tempdir().unwrap();
    let ex = dir.path().join("x.ex");
    std::fs::write(&ex, EX).unwrap();
    let ex = ex.to_str().unwrap();
    let looped = exfeed(&["dump", ex, "--pipe", "--max-examples", "4"]);
    assert_eq!(dumped_example_names(&looped), ["a", "b", "a", "b"]);
    let indices: Vec<_> = text(&looped.stdout)
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["index"].clone())
        .collect();
    assert_eq!(indices, [0, 1, 2, 3]);
    let once = exfeed(&["dump", ex, "--pipe", "--no-loop", "--max-examples", "4"]);
    assert_eq!(dumped_example_names(&once), ["a", "b"]);
    // Materialized, looping over the binary form.
    let bex = dir.path().join("x.bex");
    let conv = exfeed(&["convert", ex, bex.to_str().unwrap()]);
    assert!(conv.status.success(), "{}", text(&conv.stderr));
    let groups = ["--input-groups", "in:2", "--target-groups", "out:2"];
    let mut args = vec![
        "dump",
        bex.to_str().unwrap(),
        "--pipe",
        "--max-examples",
        "5",
    ];
    args.extend(groups);
    let out = exfeed(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let got: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let got: Vec<_> = got.iter().map(|v| v["name"].as_str().unwrap()).collect();
    assert_eq!(got, ["a", "b", "a", "b", "a"]);
    // Standard input is never reopened.
    let piped = Command::new(env!("CARGO_BIN_EXE_exfeed"))
        .args(["dump", "-", "--from", "ex", "--max-examples", "9"])
        .stdin(std::fs::File::open(ex).unwrap())
        .output()
        .unwrap();
    assert_eq!(dumped_example_names(&piped), ["a", "b"]);
}

#[cfg(unix)]
#[test]
fn pipe_mode_reads_a_fifo() {
    let dir = tempfile::tempdir().unwrap();
    // Opening a FIFO for writing waits for its reader, the dump below.
    let fifo = common::fifo(dir.path(), "x.fifo", EX.as_bytes().to_vec(), 1);
    let out = exfeed(&["dump", &fifo, "--from", "ex", "--pipe", "--no-loop"]);
    assert_eq!(dumped_example_names(&out), ["a", "b"]);
}

/// Issue 13, defect 5: a valid 721 KB `.bex` whose 14,700 examples each declare 850 events
/// sharing one input list through the event list "all" (12.5 million events from 49 bytes an
/// example). Whole, that set took 1.0 GB in `info` and 1.87 GB in `dump`.
fn shared_range_bex() -> Vec<u8> {
    let be = |v: i32| v.to_be_bytes();
    let mut out = Vec::new();
    out.extend(0xaaaa_aaaau32.to_be_bytes());
    out.extend(be(4));
    out.push(0); // no set proc
    for v in [1.0f32, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0] {
        out.extend(v.to_be_bytes());
    }
    out.extend(be(14_700));
    for _ in 0..14_700 {
        out.extend([0, 0]); // no name, no proc
        out.extend(1.0f32.to_be_bytes());
        out.extend(be(850)); // events
        out.extend(be(0)); // special events
        out.extend(be(1)); // input sets
        out.extend(be(1));
        out.extend(be(-1)); // the event list: every event
        out.extend(be(1)); // one range
        out.push(0); // no group
        out.extend(be(1)); // one unit
        out.push(1); // sparse
        out.extend(1.0f32.to_be_bytes());
        out.extend(be(0));
        out.push(0); // no shared targets
        out.extend(be(0)); // target sets
    }
    out
}

/// Runs exfeed under an address-space limit (RLIMIT_AS, in KiB): an allocation past it fails.
fn exfeed_within(limit_kib: u64, args: &[&str]) -> Output {
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let script = format!(
        "ulimit -v {limit_kib}; exec '{}' {} > /dev/null",
        env!("CARGO_BIN_EXE_exfeed"),
        quoted.join(" ")
    );
    Command::new("sh").args(["-c", &script]).output().unwrap()
}

#[test]
fn shared_ranges_do_not_amplify_memory() {
    let dir = tempfile::tempdir().unwrap();
    let bex = dir.path().join("shared.bex");
    let bytes = shared_range_bex();
    assert_eq!(bytes.len(), 720_341);
    std::fs::write(&bex, &bytes).unwrap();
    let bex = bex.to_str().unwrap();
    // 256 MiB of address space: the program, its stacks and the mapped file, and a few MB of
    // data (one example at a time), a quarter of what the whole set took before. (dump reads
    // every example for the header's counts, then prints the first few: the whole dump is
    // 1.9 GB of JSON.)
    let dump = ["dump", bex, "--max-examples", "20"];
    for args in [&["info", bex][..], &["check", bex], &dump] {
        let out = exfeed_within(256 << 10, args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    }
    let out = exfeed(["check", bex]);
    assert!(
        text(&out.stdout).contains("examples: 14700, events: 12495000"),
        "{}",
        text(&out.stdout)
    );
    // Conversions stream too, and keep every event.
    for out in ["back.bex", "back.ex"] {
        let out = dir.path().join(out);
        let out = out.to_str().unwrap();
        let done = exfeed_within(256 << 10, &["convert", bex, out]);
        assert!(done.status.success(), "{out}: {}", text(&done.stderr));
        let check = exfeed(["check", out]);
        assert!(
            text(&check.stdout).contains("examples: 14700, events: 12495000"),
            "{out}: {}",
            text(&check.stdout)
        );
    }
    // The limit bites: the same program needs more than 8 MiB of address space.
    let out = exfeed_within(8 << 10, &["info", bex]);
    assert!(!out.status.success());
}

#[test]
fn text_converts_to_bex_from_a_file_and_from_a_pipe_alike() {
    let dir = tempfile::tempdir().unwrap();
    let ex = dir.path().join("x.ex");
    std::fs::write(&ex, EX).unwrap();
    let from_file = dir.path().join("file.bex");
    let out = exfeed(["convert", ex.to_str().unwrap(), from_file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Standard input cannot be counted first: its examples are spooled to a temporary file,
    // then written after the header with their count.
    let from_pipe = dir.path().join("pipe.bex");
    let out = Command::new(env!("CARGO_BIN_EXE_exfeed"))
        .args(["convert", "-", "--from", "ex", from_pipe.to_str().unwrap()])
        .stdin(std::fs::File::open(&ex).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (a, b) = (
        std::fs::read(&from_file).unwrap(),
        std::fs::read(&from_pipe).unwrap(),
    );
    assert_eq!(a, b);
    assert_eq!(&a[..4], &[0xaa; 4]);
    let check = exfeed(["check", from_file.to_str().unwrap()]);
    assert!(text(&check.stdout).contains("examples: 2, events: 3"));
}

/// The peak RSS (VmHWM, KiB) of a running process, 0 once it has gone.
fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn bex_conversion_from_a_pipe_holds_one_example_not_the_set() {
    // 400,000 examples of 30 one-digit inputs: 27 MB of text, about 150 MB as a set in memory.
    let mut ex = String::from(";\n");
    for k in 0..400_000 {
        ex.push_str("I:");
        for j in 0..30 {
            ex.push_str(if (k + j) % 3 == 0 { " 1" } else { " 0" });
        }
        ex.push_str(" T: 1;\n");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big.ex");
    std::fs::write(&file, &ex).unwrap();
    let from_pipe = dir.path().join("pipe.bex");
    let mut child = Command::new(env!("CARGO_BIN_EXE_exfeed"))
        .args(["convert", "-", "--from", "ex", from_pipe.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        use std::io::Write;
        for piece in ex.as_bytes().chunks(64 << 10) {
            stdin.write_all(piece).unwrap();
        }
    });
    // The child's own high-water mark (its rusage would start from this process's).
    let mut peak = 0;
    while child.try_wait().unwrap().is_none() {
        peak = peak.max(peak_rss_kib(child.id()));
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    feeder.join().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        peak > 0 && peak < 40 << 10,
        "peak RSS {peak} KiB converting 27 MB from a pipe"
    );
    // The same file as the conversion of the file (counted in a first pass), and nothing
    // left beside it.
    let from_file = dir.path().join("file.bex");
    let out = exfeed([
        "convert",
        file.to_str().unwrap(),
        from_file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(std::fs::read(&from_pipe).unwrap() == std::fs::read(&from_file).unwrap());
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["big.ex", "file.bex", "pipe.bex"]);
}
