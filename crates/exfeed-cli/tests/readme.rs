//! The README's command lines run as written, through the real binary: the first set-up command
//! (its happy path prints the summary and nothing else) and the shell examples.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The README's ```sh blocks, in order.
fn shell_blocks() -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("README.md")).unwrap();
    text.split("```sh\n")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap().to_string())
        .collect()
}

#[test]
fn the_first_set_up_command_prints_the_minibatches_and_one_summary_line() {
    let blocks = shell_blocks();
    let line = blocks
        .iter()
        .flat_map(|b| b.lines())
        .find(|l| l.starts_with("cargo run "))
        .expect("the README's set-up command");
    let (_, args) = line.split_once(" -- ").expect("cargo run ... -- ARGS");
    let out = common::exfeed_in(&repo(), args.split_whitespace(), None);
    let stderr = common::text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.starts_with("read: 7 minibatches, 80 sequences, 192 samples;"),
        "{stderr}"
    );
    assert_eq!(
        stderr.lines().count(),
        1,
        "no notes on the happy path: {stderr}"
    );
    let stdout = common::text(&out.stdout);
    assert_eq!(stdout.lines().count(), 7, "{stdout}");
    assert!(stdout.starts_with("{\"end_of_sweep\":false,"), "{stdout}");
}

#[test]
fn the_shell_examples_run_as_written() {
    let block = shell_blocks()
        .into_iter()
        .find(|b| b.lines().all(|l| l.starts_with("exfeed ")))
        .expect("a block of exfeed command lines");
    // Run where a user would, with `samples/` at hand and the outputs landing in a fresh place.
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(repo().join("samples"), dir.path().join("samples")).unwrap();
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_exfeed"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut outputs = Vec::new();
    for line in block.lines() {
        let out = Command::new("sh")
            .args(["-c", line])
            .current_dir(dir.path())
            .env("PATH", &path)
            .output()
            .unwrap();
        let (stdout, stderr) = (common::text(&out.stdout), common::text(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "{line}: {stderr}");
        assert!(
            !stderr.contains("note:") && !stderr.contains("warning:"),
            "{line}: {stderr}"
        );
        outputs.push(format!("{stdout}{stderr}"));
    }
    let all = outputs.concat();
    for part in [
        "samples/sequences.ctf: ok\n  sequences: 40\n",
        "{\"key\":0,\"streams\":{\"features\":[[0.8957,",
        "read: 4 minibatches, 24 sequences, 52 samples;",
    ] {
        assert!(all.contains(part), "{part} in {all}");
    }
    assert!(dir.path().join("sequences.cbf").is_file());
}
