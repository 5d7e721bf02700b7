//! `exfeed dump/check/info/convert` on Lens example files, through the real binary, including
//! standard input fed by another process through a pipe.

use std::process::{Command, Output, Stdio};

fn exfeed(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_exfeed"))
        .args(args)
        .output()
        .expect("exfeed runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

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
    assert_eq!(piped.stdout, from_file.stdout);
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
    assert!(text(&ok.stdout).contains("2 examples"));
    let info = exfeed(&["info", ex.to_str().unwrap()]);
    assert!(info.status.success(), "{}", text(&info.stderr));
    let v: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(v["examples"], 2);
    assert_eq!(v["events"], 3);
    let bad = dir.path().join("bad.ex");
    std::fs::write(&bad, ";\nI: 1\n").unwrap();
    let out = exfeed(&["check", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("bad.ex:3:1 (byte 7)"),
        "{}",
        text(&out.stderr)
    );
}
