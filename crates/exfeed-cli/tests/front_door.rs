//! Every command on every format through the real binary, including inputs that can be read
//! only once: real FIFOs (mkfifo) and real pipes (standard input). Each test is named after the
//! defect it caught; see issue 9, section 4.

mod common;

use common::{dumped_example_names, fifo, spawn_in, text};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn samples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples")
}

fn sample(name: &str) -> String {
    samples().join(name).display().to_string()
}

/// Runs exfeed with `stdin` piped in (a real pipe), failing the test instead of hanging.
fn run(args: &[&str], stdin: Option<Vec<u8>>) -> Output {
    let mut child = spawn_in(Path::new("."), args, stdin.is_some());
    if let Some(data) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        std::thread::spawn(move || {
            let _ = pipe.write_all(&data);
        });
    }
    let id = child.id();
    let watchdog = std::thread::spawn(move || {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(100));
            if !Path::new(&format!("/proc/{id}")).exists() {
                return false;
            }
        }
        let _ = Command::new("kill").arg(id.to_string()).status();
        true
    });
    let out = child.wait_with_output().unwrap();
    assert!(!watchdog.join().unwrap(), "exfeed {args:?} hung");
    out
}

fn stdout(out: &Output) -> String {
    text(&out.stdout)
}

/// Asserts that `text` (a command's output) contains `part`, showing the whole output if not.
#[track_caller]
fn assert_contains(text: &str, part: &str) {
    assert!(text.contains(part), "{text}");
}

fn stderr(out: &Output) -> String {
    text(&out.stderr)
}

fn ctf_bytes() -> Vec<u8> {
    std::fs::read(samples().join("sequences.ctf")).unwrap()
}

fn cbf_bytes(dir: &Path) -> Vec<u8> {
    let cbf = dir.join("s.cbf");
    let out = run(
        &[
            "convert",
            &sample("sequences.ctf"),
            cbf.to_str().unwrap(),
            "--config",
            &sample("sequences.cntk"),
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::read(cbf).unwrap()
}

/// `--config samples/sequences.cntk`.
fn config() -> [String; 2] {
    ["--config".to_string(), sample("sequences.cntk")]
}

#[test]
fn fifo_ctf_loses_no_bytes_in_read_check_and_dump() {
    let dir = tempfile::tempdir().unwrap();
    let [c, cfg] = config();
    let f = fifo(dir.path(), "a.ctf", ctf_bytes(), 1);
    let out = run(&["read", &f, &c, &cfg, "-m", "1000"], None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_contains(
        &stderr(&out),
        "read: 1 minibatches, 40 sequences, 96 samples",
    );
    let f = fifo(dir.path(), "b.ctf", ctf_bytes(), 1);
    let out = run(&["check", &f, &c, &cfg], None);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_contains(&stdout(&out), "  sequences: 40\n");
    assert!(stdout(&out).contains("errors: 0, warnings: 0"));
    let f = fifo(dir.path(), "c", ctf_bytes(), 1);
    let out = run(&["dump", "--from", "ctf", &f, &c, &cfg], None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), 40);
    assert!(stdout(&out).starts_with("{\"key\":0,"));
}

#[test]
fn piped_ctf_reads_like_the_file() {
    let [c, cfg] = config();
    let file = run(&["dump", &sample("sequences.ctf"), &c, &cfg], None);
    let piped = run(&["dump", "-", &c, &cfg], Some(ctf_bytes()));
    assert!(piped.status.success(), "{}", stderr(&piped));
    assert_eq!(stdout(&piped), stdout(&file));
    let read = run(&["read", "-", &c, &cfg, "-m", "1000"], Some(ctf_bytes()));
    assert_contains(&stderr(&read), "40 sequences, 96 samples");
}

#[test]
fn cbf_on_standard_input_works_in_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let cbf = cbf_bytes(dir.path());
    let from_file = run(&["dump", dir.path().join("s.cbf").to_str().unwrap()], None);
    for extra in [&[][..], &["--from", "cbf"][..]] {
        let mut args = vec!["dump", "-"];
        args.extend_from_slice(extra);
        let out = run(&args, Some(cbf.clone()));
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(stdout(&out), stdout(&from_file));
    }
    let out = run(&["check", "-"], Some(cbf.clone()));
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_contains(
        &stdout(&out),
        "-: ok\n  sequences: 40\n  longest sequence: 4 samples (key 2)\n",
    );
    let out = run(
        &["read", "-", "-m", "1000", "--no-randomize"],
        Some(cbf.clone()),
    );
    assert_contains(&stderr(&out), "40 sequences, 96 samples");
    let out = run(&["info", "-"], Some(cbf.clone()));
    assert_contains(&stdout(&out), "chunks: 1 (40 sequences, 96 samples)");
    let ctf = dir.path().join("back.ctf");
    let out = run(&["convert", "-", ctf.to_str().unwrap()], Some(cbf));
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(
        &[
            "check",
            ctf.to_str().unwrap(),
            "--config",
            &sample("sequences.cntk"),
        ],
        None,
    );
    assert!(stdout(&out).contains("sequences: 40"));
}

#[test]
fn lens_fifo_keeps_its_first_bytes_and_a_plain_dump_does_not_hang() {
    let dir = tempfile::tempdir().unwrap();
    let ex = std::fs::read(samples().join("patterns.ex")).unwrap();
    let from_file = run(
        &["dump", &sample("patterns.ex"), "--pipe", "--no-loop"],
        None,
    );
    assert!(from_file.status.success(), "{}", stderr(&from_file));
    let f = fifo(dir.path(), "p.ex", ex.clone(), 1);
    let out = run(&["dump", &f], None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), stdout(&from_file));
    assert!(stdout(&out).contains("\"name\":\"ab first\""));
    let f = fifo(dir.path(), "q.ex", ex.clone(), 1);
    let out = run(&["check", &f], None);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert_contains(&stdout(&out), "examples: 4, events: 8");
    // Standard input, Lens text: --from says so.
    let out = run(&["dump", "-", "--from", "ex"], Some(ex));
    assert_eq!(stdout(&out), stdout(&from_file));
}

#[test]
fn looping_pipe_mode_keeps_the_first_writers_first_example() {
    let dir = tempfile::tempdir().unwrap();
    let ex = std::fs::read(samples().join("patterns.ex")).unwrap();
    let f = fifo(dir.path(), "loop.ex", ex, 2);
    let out = run(&["dump", &f, "--pipe", "--max-examples", "8"], None);
    let names = dumped_example_names(&out);
    let one = ["ab first", "ba", "flat", "sparse-pair"];
    assert_eq!(names, [one, one].concat());
}

/// A reader configuration for patterns.ex with its layout, as a file in `dir`.
fn lens_config(dir: &Path, layout: &str) -> String {
    let p = dir.join("lens.cntk");
    std::fs::write(
        &p,
        format!(
            "reader = [ readerType = LensReader ; file = \"{}\" ; {layout} ]",
            sample("patterns.ex")
        ),
    )
    .unwrap();
    p.display().to_string()
}

#[test]
fn lens_layout_from_config_is_used_by_dump_and_convert() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = lens_config(
        dir.path(),
        "inputGroups = \"in:4\" ; targetGroups = \"out:2\"",
    );
    let flags = run(
        &[
            "dump",
            &sample("patterns.ex"),
            "--input-groups",
            "in:4",
            "--target-groups",
            "out:2",
        ],
        None,
    );
    let out = run(&["dump", &sample("patterns.ex"), "--config", &cfg], None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), stdout(&flags));
    assert!(
        stdout(&out).starts_with("{\"name\":\"ab first\",\"freq\":2,"),
        "{}",
        stdout(&out)
    );
    let ctf = dir.path().join("p.ctf");
    let out = run(
        &[
            "convert",
            &sample("patterns.ex"),
            ctf.to_str().unwrap(),
            "--config",
            &cfg,
            "--nan",
            "0",
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let written = std::fs::read_to_string(&ctf).unwrap();
    assert!(
        written.starts_with("0 |input 1 0 0 1 |target 1 0\n"),
        "{written}"
    );
}

#[test]
fn a_layout_error_reads_the_same_with_the_same_status_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    // The input group has 3 units; example 0's first event sets 4.
    let cfg = lens_config(
        dir.path(),
        "inputGroups = \"in:3\" ; targetGroups = \"out:2\"",
    );
    let ctf = dir.path().join("p.ctf");
    let expected = "patterns.ex: example 0, event 0: a range reaches unit 3 of input group 'in', which has 3 units";
    for args in [
        vec!["dump", "PATTERNS", "--config", &cfg],
        vec![
            "convert",
            "PATTERNS",
            ctf.to_str().unwrap(),
            "--config",
            &cfg,
            "--nan",
            "0",
        ],
        vec![
            "read",
            "PATTERNS",
            "--config",
            &cfg,
            "-m",
            "10",
            "--lens-mode",
            "ordered",
        ],
    ] {
        let file = sample("patterns.ex");
        let args: Vec<&str> = args
            .iter()
            .map(|a| if *a == "PATTERNS" { file.as_str() } else { a })
            .collect();
        let out = run(&args, None);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(expected),
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(
            !stderr(&out).contains("(byte"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn chunk_size_takes_k_m_g_in_read_too() {
    let [c, cfg] = config();
    let out = run(
        &[
            "read",
            &sample("sequences.ctf"),
            &c,
            &cfg,
            "-m",
            "10",
            "--chunk-size",
            "1K",
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(
        &[
            "read",
            &sample("sequences.ctf"),
            &c,
            &cfg,
            "-m",
            "10",
            "--chunk-size",
            "0",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("expected a positive size in bytes (e.g. 32M), found '0'"));
}

#[test]
fn exit_statuses_agree_across_commands() {
    let dir = tempfile::tempdir().unwrap();
    let cbf = cbf_bytes(dir.path());
    let cut = dir.path().join("cut.cbf");
    std::fs::write(&cut, &cbf[..cbf.len() - 5]).unwrap();
    let cut = cut.to_str().unwrap();
    let out_ctf = dir.path().join("o.ctf");
    for args in [
        vec!["check", cut],
        vec!["dump", cut],
        vec!["read", cut, "-m", "5"],
        vec!["info", cut],
        vec!["convert", cut, out_ctf.to_str().unwrap()],
    ] {
        let out = run(&args, None);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{args:?}: {}{}",
            stdout(&out),
            stderr(&out)
        );
    }
    // The fatal error counts in check's summary.
    let out = run(&["check", cut], None);
    assert_contains(&stdout(&out), "errors: 1,");
    // Invalid CTF through convert: invalid data.
    let bad = dir.path().join("bad.ctf");
    std::fs::write(&bad, "0 |features 1 2 3 4 5\n").unwrap();
    let out = run(
        &[
            "convert",
            bad.to_str().unwrap(),
            dir.path().join("b.cbf").to_str().unwrap(),
            "--config",
            &sample("sequences.cntk"),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // Usage: an unsupported pair of formats, named properly.
    let out = run(
        &[
            "convert",
            &sample("sequences.ctf"),
            out_ctf.to_str().unwrap(),
            "--config",
            &sample("sequences.cntk"),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert_contains(&stderr(&out), "converting CTF to CTF is not supported");
    let help = run(&["convert", "--help"], None);
    assert_contains(&stdout(&help), "(ctf, cbf, ex, bex, parquet, arrow)");
}

#[test]
fn info_is_text_by_default_and_json_with_json_for_every_format() {
    let dir = tempfile::tempdir().unwrap();
    cbf_bytes(dir.path());
    let cbf = dir.path().join("s.cbf").display().to_string();
    let [c, cfg] = config();
    for (args, text_has, format) in [
        (vec![cbf.as_str()], "format: CBF version 1", "cbf"),
        (
            vec![&sample("patterns.ex")[..]],
            "format: Lens example file\nexamples: 4\n",
            "lens",
        ),
        (
            vec![&sample("sequences.ctf")[..], &c[..], &cfg[..]],
            "format: CTF\n  sequences: 40\n",
            "ctf",
        ),
    ] {
        let mut a = vec!["info"];
        a.extend_from_slice(&args);
        let out = run(&a, None);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_contains(&stdout(&out), text_has);
        a.push("--json");
        let out = run(&a, None);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(v["format"], format);
    }
}
