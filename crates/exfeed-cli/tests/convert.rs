//! `exfeed convert` on real files: atomic, refuses clobbering and self-conversion.

mod common;

use common::{conformance, exfeed_in};
use std::path::Path;
use std::process::Command;

/// Runs exfeed in `dir`; its exit code and stderr.
fn exfeed(args: &[&str], dir: &Path) -> (i32, String) {
    let out = exfeed_in(dir, args, None);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stderr).unwrap(),
    )
}

const CTF: &str = "0 |a 1 2 |b 3:1\n0 |a 3 4\n1 |a 5 6 |b 0:2 4:0.5\n";

/// `exfeed convert INPUT OUTPUT` in `dir` of a file laid out like [`CTF`] (dense `a` as `x`,
/// sparse `b` as `y`), with `extra` arguments.
fn convert_ctf(input: &str, output: &str, extra: &[&str], dir: &Path) -> (i32, String) {
    let mut args = vec![
        "convert",
        input,
        output,
        "-i",
        "x:dense:2:a",
        "-i",
        "y:sparse:5:b",
    ];
    args.extend_from_slice(extra);
    exfeed(&args, dir)
}

#[test]
fn ctf_to_cbf_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("in.txt"), CTF).unwrap();
    let (code, err) = convert_ctf("in.txt", "out.cbf", &[], d);
    assert_eq!(code, 0, "{err}");
    // Stderr that is not a terminal gets no progress bar bytes (a quick conversion none at all).
    assert_eq!(err, "");
    let (code, err) = exfeed(&["convert", "out.cbf", "back.txt"], d);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read_to_string(d.join("back.txt")).unwrap(),
        "0 |x 1 2 |y 3:1\n0 |x 3 4\n1 |x 5 6 |y 0:2 4:0.5\n"
    );
    // --to overrides the extension; the same bytes again.
    let (code, err) = exfeed(
        &[
            "convert",
            "back.txt",
            "again",
            "--to",
            "cbf",
            "-i",
            "x:dense:2",
            "-i",
            "y:sparse:5",
        ],
        d,
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read(d.join("again")).unwrap(),
        std::fs::read(d.join("out.cbf")).unwrap()
    );
}

#[test]
fn refuses_clobbering_and_self_conversion_and_leaves_no_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("in.txt"), CTF).unwrap();
    std::fs::write(d.join("out.cbf"), "keep").unwrap();
    let (code, err) = convert_ctf("in.txt", "out.cbf", &[], d);
    assert_eq!(code, 2);
    assert!(
        err.contains("out.cbf: output exists; replace it with --force"),
        "{err}"
    );
    assert_eq!(std::fs::read(d.join("out.cbf")).unwrap(), b"keep");
    assert_eq!(convert_ctf("in.txt", "out.cbf", &["--force"], d).0, 0);
    assert_ne!(std::fs::read(d.join("out.cbf")).unwrap(), b"keep");

    let (code, err) = exfeed(&["convert", "out.cbf", "out.cbf", "--force"], d);
    assert_eq!(code, 2);
    assert!(err.contains("same file as an input"), "{err}");

    // A conversion that fails half-way (index 7 out of range in the last line) leaves nothing.
    std::fs::write(d.join("bad.txt"), format!("{CTF}2 |a 1 1 |b 7:1\n")).unwrap();
    let (code, err) = convert_ctf("bad.txt", "bad.cbf", &[], d);
    // Invalid data: 1, as from every command.
    assert_eq!(code, 1, "{err}");
    assert!(!d.join("bad.cbf").exists());
    let names: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
}

fn stdout_of(args: &[&str]) -> String {
    let out = common::exfeed(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Every conformance CBF file dumps to the same JSON lines as its CTF source (read in the
/// file's precision), and `convert` reproduces ctf2bin.py's bytes.
#[test]
fn conformance_cbf_dumps_as_its_ctf_source_and_convert_reproduces_it() {
    let Some(root) = conformance("cntk") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (name, inputs, precision) in [
        ("10x10_dense", &["features:dense:5:F0"][..], "float"),
        ("10x10_sparse", &["features:sparse:100:F0"][..], "double"),
        (
            "50x20_jagged_sequences_dense",
            &["features:dense:3:F0"][..],
            "double",
        ),
        (
            "50x20_jagged_sequences_sparse",
            &["features:sparse:100:F0"][..],
            "float",
        ),
        (
            "Simple_dense",
            &["features:dense:2:F", "labels:dense:2:L"][..],
            "float",
        ),
    ] {
        let bin = root.join("cbf").join(format!("{name}.bin"));
        let ctf = root.join("ctf").join(format!("{name}.txt"));
        let mut args = vec!["dump", ctf.to_str().unwrap(), "--precision", precision];
        for i in inputs {
            args.extend(["--input", i]);
        }
        let from_ctf = stdout_of(&args);
        let from_cbf = stdout_of(&["dump", bin.to_str().unwrap()]);
        assert_eq!(from_cbf, from_ctf, "{name}");

        let out = dir.path().join(format!("{name}.cbf"));
        let mut args = vec![
            "convert",
            ctf.to_str().unwrap(),
            out.to_str().unwrap(),
            "--precision",
            precision,
        ];
        for i in inputs {
            args.extend(["--input", i]);
        }
        stdout_of(&args);
        assert!(
            std::fs::read(&out).unwrap() == std::fs::read(&bin).unwrap(),
            "{name}: bytes differ"
        );
    }
}

/// `convert --config FILE --section NAME` takes the streams and precision from CNTK's config
/// and writes the same bytes as the `--input` form (and as ctf2bin.py).
#[test]
fn convert_with_config_section_matches_input_flags() {
    let Some(root) = conformance("cntk") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ctf = root.join("ctf").join("Simple_dense.txt");
    let by_config = dir.path().join("by_config.cbf");
    let by_flags = dir.path().join("by_flags.cbf");
    stdout_of(&[
        "convert",
        ctf.to_str().unwrap(),
        by_config.to_str().unwrap(),
        "--config",
        root.join("config").join("dense.cntk").to_str().unwrap(),
        "--section",
        "Simple",
    ]);
    stdout_of(&[
        "convert",
        ctf.to_str().unwrap(),
        by_flags.to_str().unwrap(),
        "--input",
        "features:dense:2:F",
        "--input",
        "labels:dense:2:L",
        "--precision",
        "float",
    ]);
    let config_bytes = std::fs::read(&by_config).unwrap();
    assert!(!config_bytes.is_empty());
    assert!(
        config_bytes == std::fs::read(&by_flags).unwrap(),
        "--config and --input outputs differ"
    );
    assert!(
        config_bytes == std::fs::read(root.join("cbf").join("Simple_dense.bin")).unwrap(),
        "differs from ctf2bin.py's Simple_dense.bin"
    );
}

/// Files in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn parallel_conversion_of_a_large_file_and_errors_in_its_middle() {
    // Over 8 MiB, so that the conversion runs in several pieces on worker threads.
    let mut good = String::new();
    let mut k = 0u64;
    while good.len() < 9 << 20 {
        let v: Vec<String> = (0..20).map(|j| ((k * 7 + j) % 97).to_string()).collect();
        good += &format!("|a {} |b {}:1\n", v.join(" "), k % 5);
        k += 1;
    }
    let lines: Vec<&str> = good.lines().collect();
    let n = lines.len();
    // Two bad lines in the middle (sparse indices out of range), in different pieces.
    let (b1, b2) = (n / 2, n / 2 + n / 5);
    let mut bad_lines = lines.clone();
    let l1 = format!("{} |b 9:1", lines[b1].split(" |b").next().unwrap());
    bad_lines[b1] = &l1;
    bad_lines[b2] = "|a 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 |b 5:1";
    let bad = bad_lines.join("\n") + "\n";
    let mut kept = lines.clone();
    kept.remove(b2);
    kept.remove(b1);
    let kept = kept.join("\n") + "\n";
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("good.ctf"), &good).unwrap();
    std::fs::write(d.join("bad.ctf"), &bad).unwrap();
    std::fs::write(d.join("kept.ctf"), &kept).unwrap();
    let convert = |input: &str, output: &str, extra: &[&str]| {
        let mut args = vec![
            "convert",
            input,
            output,
            "-i",
            "a:dense:20",
            "-i",
            "b:sparse:5",
            "--chunk-size",
            "1M",
        ];
        args.extend_from_slice(extra);
        exfeed(&args, d)
    };

    // Parallel (no error budget) and serial (a budget) conversions write the same bytes.
    let (code, err) = convert("good.ctf", "parallel.cbf", &[]);
    assert_eq!(code, 0, "{err}");
    let (code, err) = convert("good.ctf", "serial.cbf", &["--max-errors", "3"]);
    assert_eq!(code, 0, "{err}");
    let parallel = std::fs::read(d.join("parallel.cbf")).unwrap();
    assert!(parallel == std::fs::read(d.join("serial.cbf")).unwrap());
    let (code, info) = {
        let out = exfeed_in(d, ["info", "parallel.cbf"], None);
        (out.status.code(), String::from_utf8(out.stdout).unwrap())
    };
    assert_eq!(code, Some(0));
    assert!(info.contains(&format!("{n} sequences")), "{info}");

    // Each bad line counts as two errors (its bad sample, and the input it then lacks). No
    // budget, or too small a one, stops the conversion and leaves no output.
    for budget in ["0", "3"] {
        let (code, err) = convert("bad.ctf", "out.cbf", &["--max-errors", budget]);
        assert_ne!(code, 0, "budget {budget}");
        assert!(
            err.contains(&format!("bad.ctf:{}:", b1 + 1)),
            "budget {budget}: {err}"
        );
        if budget == "3" {
            assert!(err.contains(&format!("bad.ctf:{}:", b2 + 1)), "{err}");
        }
        assert_eq!(
            listing(d),
            [
                "bad.ctf",
                "good.ctf",
                "kept.ctf",
                "parallel.cbf",
                "serial.cbf"
            ],
            "budget {budget}"
        );
    }
    // A large enough budget skips both: the same bytes as the file without those lines.
    let (code, err) = convert("bad.ctf", "skipped.cbf", &["--max-errors", "4"]);
    assert_eq!(code, 1, "{err}");
    let (code, err) = convert("kept.ctf", "kept.cbf", &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        std::fs::read(d.join("skipped.cbf")).unwrap() == std::fs::read(d.join("kept.cbf")).unwrap()
    );
}

#[test]
fn no_sync_writes_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("in.txt"), CTF).unwrap();
    for (out, extra) in [("synced.cbf", None), ("unsynced.cbf", Some("--no-sync"))] {
        let (code, err) = convert_ctf("in.txt", out, extra.as_slice(), d);
        assert_eq!(code, 0, "{err}");
    }
    assert_eq!(
        std::fs::read(d.join("synced.cbf")).unwrap(),
        std::fs::read(d.join("unsynced.cbf")).unwrap()
    );
    assert_eq!(listing(d), ["in.txt", "synced.cbf", "unsynced.cbf"]);
}

#[test]
fn an_interrupted_conversion_leaves_nothing_behind() {
    // Large enough that the conversion is still running when the signal comes.
    let mut data = String::new();
    let mut k = 0u64;
    while data.len() < 24 << 20 {
        let v: Vec<String> = (0..40).map(|j| ((k * 7 + j) % 97).to_string()).collect();
        data += &format!("|a {}\n", v.join(" "));
        k += 1;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("in.ctf"), &data).unwrap();
    for signal in ["INT", "TERM"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_exfeed"))
            .args(["convert", "in.ctf", "out.cbf", "-i", "a:dense:40"])
            .current_dir(d)
            .spawn()
            .unwrap();
        // Wait for the temporary output to appear, then interrupt.
        let started = std::time::Instant::now();
        while !listing(d).iter().any(|f| f.starts_with(".exfeed-partial-")) {
            assert!(
                child.try_wait().unwrap().is_none(),
                "the conversion ended before it could be interrupted"
            );
            assert!(
                started.elapsed().as_secs() < 120,
                "no temporary output appeared"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let kill = Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(130), "SIG{signal}");
        assert_eq!(
            listing(d),
            ["in.ctf"],
            "SIG{signal}: nothing but the input is left"
        );
    }
}

#[test]
fn columnar_outputs_are_recognised_by_name_and_to_not_written_as_ctf() {
    // Parquet and Arrow IPC (the library's arrow feature, tested in tests/arrow.rs): by name or --to.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("in.txt"), CTF).unwrap();
    for (out, extra, magic) in [
        ("out.parquet", &[][..], &b"PAR1"[..]),
        ("out.arrow", &[][..], &b"ARROW1"[..]),
        ("out.data", &["--to", "parquet"][..], &b"PAR1"[..]),
    ] {
        let (code, err) = convert_ctf("in.txt", out, extra, d);
        assert_eq!(code, 0, "{out}: {err}");
        assert!(
            std::fs::read(d.join(out)).unwrap().starts_with(magic),
            "{out}"
        );
    }
    let (code, err) = convert_ctf("in.txt", "out.x", &["--to", "orc"], d);
    assert_eq!(code, 2);
    assert!(
        err.contains("unknown format 'orc' (ctf, cbf, ex, bex, parquet, arrow)"),
        "{err}"
    );
}
