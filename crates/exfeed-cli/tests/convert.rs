//! `exfeed convert` on real files: atomic, refuses clobbering and self-conversion.

use std::path::Path;
use std::process::Command;

fn exfeed(args: &[&str], dir: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_exfeed"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stderr).unwrap(),
    )
}

const CTF: &str = "0 |a 1 2 |b 3:1\n0 |a 3 4\n1 |a 5 6 |b 0:2 4:0.5\n";

#[test]
fn ctf_to_cbf_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("in.txt"), CTF).unwrap();
    let (code, err) = exfeed(
        &[
            "convert",
            "in.txt",
            "out.cbf",
            "-i",
            "x:dense:2:a",
            "-i",
            "y:sparse:5:b",
        ],
        d,
    );
    assert_eq!(code, 0, "{err}");
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
    let args = [
        "convert",
        "in.txt",
        "out.cbf",
        "-i",
        "x:dense:2:a",
        "-i",
        "y:sparse:5:b",
    ];
    let (code, err) = exfeed(&args, d);
    assert_eq!(code, 2);
    assert!(err.contains("out.cbf: output exists; use --force"), "{err}");
    assert_eq!(std::fs::read(d.join("out.cbf")).unwrap(), b"keep");
    let mut forced = args.to_vec();
    forced.push("--force");
    assert_eq!(exfeed(&forced, d).0, 0);
    assert_ne!(std::fs::read(d.join("out.cbf")).unwrap(), b"keep");

    let (code, err) = exfeed(&["convert", "out.cbf", "out.cbf", "--force"], d);
    assert_eq!(code, 2);
    assert!(err.contains("same file as an input"), "{err}");

    // A conversion that fails half-way (index 7 out of range in the last line) leaves nothing.
    std::fs::write(d.join("bad.txt"), format!("{CTF}2 |a 1 1 |b 7:1\n")).unwrap();
    let (code, err) = exfeed(
        &[
            "convert",
            "bad.txt",
            "bad.cbf",
            "-i",
            "x:dense:2:a",
            "-i",
            "y:sparse:5:b",
        ],
        d,
    );
    assert_eq!(code, 2, "{err}");
    assert!(!d.join("bad.cbf").exists());
    let names: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
}

fn conformance() -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("EXFEED_CONFORMANCE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance")
        });
    if dir.is_dir() {
        return Some(dir.join("cntk"));
    }
    assert_ne!(
        std::env::var("CI").as_deref(),
        Ok("true"),
        "conformance corpus missing (required in CI)"
    );
    eprintln!("SKIPPED: conformance corpus not found at {}", dir.display());
    None
}

fn stdout_of(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_exfeed"))
        .args(args)
        .output()
        .unwrap();
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
    let Some(root) = conformance() else { return };
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
