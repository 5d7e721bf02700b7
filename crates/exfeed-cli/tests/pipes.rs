//! Standard input and output as real pipes between real processes (`-` in and out), and
//! damaged compression streams made by the real gzip and bzip2, through the binary.

mod common;

use common::{exfeed, exfeed_in, text};
use std::path::Path;
use std::process::{Command, Stdio};

/// `n` sequences of x:dense:2, keys 0..n, one or two samples each.
fn ctf_text(n: u64) -> String {
    (0..n)
        .flat_map(|k| (0..k % 2 + 1).map(move |t| format!("{k} |x {k} {t}\n")))
        .collect()
}

/// `dir/NAME` compressed by the real `tool` (gzip or bzip2) from `text`; its path.
fn compressed(dir: &Path, name: &str, tool: &str, text: &str) -> std::path::PathBuf {
    let plain = dir.join(name);
    std::fs::write(&plain, text).unwrap();
    let status = Command::new(tool).arg("-f").arg(&plain).status();
    assert!(status.expect("the tool runs").success());
    let suffix = if tool == "gzip" { "gz" } else { "bz2" };
    dir.join(format!("{name}.{suffix}"))
}

/// The compressed byte offset a message gives.
fn compressed_byte(message: &str) -> u64 {
    let after = message
        .split("at compressed byte ")
        .nth(1)
        .unwrap_or_else(|| panic!("no offset in: {message}"));
    after.split(' ').next().unwrap().parse().unwrap()
}

#[test]
fn damaged_compression_streams_are_reported_with_the_file_and_byte() {
    let dir = tempfile::tempdir().unwrap();
    let data = ctf_text(100_000);
    for tool in ["gzip", "bzip2"] {
        let file = compressed(dir.path(), &format!("d-{tool}.ctf"), tool, &data);
        let mut bytes = std::fs::read(&file).unwrap();
        let len = bytes.len() as u64;
        // Truncated: the stream ends at its last byte.
        let cut = dir.path().join(format!("cut-{tool}.ctf"));
        std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
        // Damaged: a byte in the middle flipped; the decoder notices at it or after it.
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x55;
        let bad = dir.path().join(format!("bad-{tool}.ctf"));
        std::fs::write(&bad, &bytes).unwrap();
        for (path, range) in [(&cut, len / 2..=len / 2), (&bad, middle as u64..=len)] {
            let name = path.to_str().unwrap();
            for args in [
                vec!["read", name, "-i", "x:dense:2", "-m", "10"],
                vec!["dump", name, "-i", "x:dense:2"],
                vec!["convert", name, "-i", "x:dense:2", "--to", "cbf", "-"],
            ] {
                let out = exfeed(&args);
                let err = text(&out.stderr);
                assert!(!out.status.success(), "{args:?}");
                let line = err
                    .lines()
                    .find(|l| l.contains("at compressed byte"))
                    .unwrap_or_else(|| panic!("{args:?}: {err}"));
                assert!(line.contains(&format!("{name}: {tool}")), "{line}");
                assert!(range.contains(&compressed_byte(line)), "{range:?}: {line}");
                assert!(line.contains("(decompressed byte "), "{line}");
            }
            // check reports it as the error that stopped it, counted.
            let out = exfeed(["check", name, "-i", "x:dense:2"]);
            let report = text(&out.stdout);
            assert_eq!(out.status.code(), Some(2), "{report}");
            assert!(report.contains("at compressed byte"), "{report}");
            assert!(!report.contains("errors: 0,"), "{report}");
        }
    }
}

/// Runs `first | second` (each `exfeed ARGS`, in `dir`); the second's output.
fn pipe(dir: &Path, first: &[&str], second: &[&str]) -> std::process::Output {
    let mut a = Command::new(env!("CARGO_BIN_EXE_exfeed"))
        .args(first)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let b = Command::new(env!("CARGO_BIN_EXE_exfeed"))
        .args(second)
        .current_dir(dir)
        .stdin(a.stdout.take().unwrap())
        .output()
        .unwrap();
    assert!(a.wait().unwrap().success(), "{first:?}");
    b
}

#[test]
fn dash_is_standard_output_for_every_format_through_real_pipes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("d.ctf"), ctf_text(500)).unwrap();
    let want = exfeed(["dump", d.join("d.ctf").to_str().unwrap(), "-i", "x:dense:2"]);
    assert!(want.status.success());
    let x = ["-i", "x:dense:2"];
    // CTF in a file -> CBF on a pipe -> dump from standard input.
    let cbf = [&["convert", "d.ctf", "-", "--to", "cbf"][..], &x].concat();
    let out = pipe(d, &cbf, &["dump", "-"]);
    assert_eq!(
        text(&out.stdout),
        text(&want.stdout),
        "{}",
        text(&out.stderr)
    );
    // CBF in a file -> CTF (the default for `-`) on a pipe -> CBF from standard input -> a file.
    std::fs::write(
        d.join("d.cbf"),
        &pipe(
            d,
            &cbf,
            &["convert", "-", "-", "--to", "cbf", "--from", "cbf"],
        )
        .stdout,
    )
    .unwrap();
    let out = pipe(
        d,
        &["convert", "d.cbf", "-"],
        &[&["convert", "-", "back.cbf"][..], &x].concat(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let back = exfeed(["dump", d.join("back.cbf").to_str().unwrap()]);
    assert_eq!(text(&back.stdout), text(&want.stdout));
    // Parquet on a pipe (written front to back), read from the file it lands in.
    let parquet = pipe(
        d,
        &["convert", "d.cbf", "-", "--to", "parquet"],
        &["dump", "-", "--from", "cbf"],
    );
    assert!(!parquet.status.success(), "Parquet is not CBF");
    let mut a = Command::new(env!("CARGO_BIN_EXE_exfeed"))
        .args(["convert", "d.cbf", "-", "--to", "parquet"])
        .current_dir(d)
        .stdout(std::fs::File::create(d.join("piped.parquet")).unwrap())
        .spawn()
        .unwrap();
    assert!(a.wait().unwrap().success());
    let out = exfeed([
        "convert",
        d.join("piped.parquet").to_str().unwrap(),
        d.join("p.cbf").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let back = exfeed(["dump", d.join("p.cbf").to_str().unwrap()]);
    assert_eq!(text(&back.stdout), text(&want.stdout));
    // Never a file named `-`.
    assert!(!d.join("-").exists());
}

#[test]
fn a_reader_that_stops_early_ends_the_conversion_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("d.ctf"), ctf_text(200_000)).unwrap();
    let mut convert = Command::new(env!("CARGO_BIN_EXE_exfeed"))
        .args(["convert", "d.ctf", "-", "-i", "x:dense:2", "--to", "cbf"])
        .current_dir(d)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let head = Command::new("head")
        .args(["-c", "100"])
        .stdin(convert.stdout.take().unwrap())
        .output()
        .unwrap();
    assert_eq!(head.stdout.len(), 100);
    let done = convert.wait_with_output().unwrap();
    assert!(done.status.success(), "{}", text(&done.stderr));
    assert!(done.stderr.is_empty(), "{}", text(&done.stderr));
}

#[test]
fn binary_output_is_refused_on_a_terminal_and_parquet_is_read_from_a_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("d.ctf"), ctf_text(10)).unwrap();
    // `script` gives the command a terminal as its standard output.
    let run = format!(
        "{} convert {} - -i x:dense:2 --to cbf",
        env!("CARGO_BIN_EXE_exfeed"),
        d.join("d.ctf").display()
    );
    let out = Command::new("script")
        .args(["-qec", &run, "/dev/null"])
        .output()
        .expect("script runs");
    let shown = text(&out.stdout);
    assert!(!out.status.success(), "{shown}");
    assert!(
        shown.contains("standard output is a terminal: CBF is binary"),
        "{shown}"
    );
    let out = pipe(
        d,
        &[
            "convert",
            "d.ctf",
            "-",
            "-i",
            "x:dense:2",
            "--to",
            "parquet",
        ],
        &["convert", "-", "x.cbf", "--from", "parquet"],
    );
    // Parquet from a pipe is read into memory (its footer is at its end), then converted.
    assert!(out.status.success(), "{}", text(&out.stderr));
    let direct = exfeed_in(d, ["convert", "d.ctf", "y.cbf", "-i", "x:dense:2"], None);
    assert!(direct.status.success());
    assert_eq!(
        std::fs::read(d.join("x.cbf")).unwrap(),
        std::fs::read(d.join("y.cbf")).unwrap()
    );
}
