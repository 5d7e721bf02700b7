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
