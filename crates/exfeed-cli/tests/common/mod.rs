//! Shared by the command's integration tests: running the real binary, and where the
//! conformance corpus is.
#![allow(dead_code)]

#[path = "../../../exfeed/tests/common/mod.rs"]
mod corpus;

#[allow(unused_imports)] // not every test file reads the corpus
pub use corpus::{conformance, record_skip_because};
use std::ffi::OsStr;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// Runs the `exfeed` binary built for these tests and waits for it.
pub fn exfeed<I>(args: I) -> Output
where
    I: IntoIterator,
    I::Item: AsRef<OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_exfeed"))
        .args(args)
        .output()
        .expect("exfeed runs")
}

/// `exfeed convert CTF CBF --input INPUT --chunk-size 64`, which must succeed.
pub fn convert_to_cbf(ctf: &Path, cbf: &Path, input: &str) {
    let out = exfeed([
        "convert".as_ref(),
        ctf.as_os_str(),
        cbf.as_os_str(),
        "--input".as_ref(),
        input.as_ref(),
        "--chunk-size".as_ref(),
        "64".as_ref(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// Starts the `exfeed` binary built for these tests in `dir`, its standard input a real pipe
/// when `piped_stdin` (else none), its output captured.
pub fn spawn_in<I>(dir: &Path, args: I, piped_stdin: bool) -> Child
where
    I: IntoIterator,
    I::Item: AsRef<OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_exfeed"))
        .args(args)
        .current_dir(dir)
        .stdin(if piped_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("exfeed runs")
}

/// Runs the `exfeed` binary built for these tests in `dir`, with `stdin` written into a real
/// pipe (else no input), and waits for it.
pub fn exfeed_in<I>(dir: &Path, args: I, stdin: Option<&[u8]>) -> Output
where
    I: IntoIterator,
    I::Item: AsRef<OsStr>,
{
    let mut child = spawn_in(dir, args, stdin.is_some());
    std::thread::scope(|s| {
        if let (Some(data), Some(mut pipe)) = (stdin, child.stdin.take()) {
            // The command may stop reading early; the pipe closes when the thread ends.
            s.spawn(move || std::io::Write::write_all(&mut pipe, data));
        }
        child.wait_with_output().expect("exfeed runs")
    })
}

/// `dir/d.ctf`: `n` sequences keyed 0..n of 1 to 4 samples (`k |x k t`, input x:dense:2; about
/// 1.6 KB for 50: one chunk by default); its path.
pub fn ctf_data(dir: &tempfile::TempDir, n: u64) -> String {
    let mut s = String::new();
    for k in 0..n {
        for t in 0..(k % 4 + 1) {
            s.push_str(&format!("{k} |x {k} {t}\n"));
        }
    }
    let p = dir.path().join("d.ctf");
    std::fs::write(&p, s).unwrap();
    p.to_str().unwrap().to_string()
}

/// Bytes of a process's output as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A FIFO at `dir/name` whose writer (a thread) writes `passes` copies of `data`, each through
/// its own open (as a program writing the FIFO again and again would). Between passes it waits
/// a moment, so the reader sees the end of one pass before the next writer opens (else both
/// would be one stream, for Lens as for us).
#[cfg(unix)]
pub fn fifo(dir: &std::path::Path, name: &str, data: Vec<u8>, passes: usize) -> String {
    let path = dir.join(name);
    let made = Command::new("mkfifo").arg(&path).status().unwrap();
    assert!(made.success());
    let p = path.clone();
    std::thread::spawn(move || {
        for pass in 0..passes {
            if pass > 0 {
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            match std::fs::OpenOptions::new().write(true).open(&p) {
                Ok(mut f) => {
                    let _ = std::io::Write::write_all(&mut f, &data);
                }
                Err(_) => return,
            }
        }
    });
    path.display().to_string()
}

/// Every minibatch `exfeed read --dump` printed (one JSON object per line), in order; the command
/// must have succeeded.
pub fn dumped_minibatches(out: &Output) -> Vec<serde_json::Value> {
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Every sequence `exfeed read --dump` printed, in order; the command must have succeeded.
pub fn dumped_sequences(out: &Output) -> Vec<serde_json::Value> {
    dumped_minibatches(out)
        .iter()
        .flat_map(|mb| mb["sequences"].as_array().unwrap().clone())
        .collect()
}

/// The example names `exfeed dump` printed for a Lens file (one JSON line per example after the
/// header line); the command must have succeeded.
pub fn dumped_example_names(out: &Output) -> Vec<String> {
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .skip(1)
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["name"].as_str().unwrap().to_string()
        })
        .collect()
}
