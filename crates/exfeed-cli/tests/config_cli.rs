//! `--config FILE --section NAME` on the real binary: every section of CNTK's own test configs
//! that reads a CTF file of the corpus dumps exactly as the same inputs and parameters given as
//! flags do.

mod common;

use common::exfeed;
use exfeed::config::{cntk_sections, ReaderConfig};
use exfeed::format::FileFormat;

#[test]
fn every_ctf_config_section_dumps_like_its_flags() {
    let Some(cntk) = common::conformance("cntk") else {
        return;
    };
    let mut compared = 0;
    for cfg_name in ["dense.cntk", "sparse.cntk", "edge_cases.cntk"] {
        let cfg_path = cntk.join("config").join(cfg_name);
        let text = std::fs::read_to_string(&cfg_path).unwrap();
        for section in cntk_sections(&text, cfg_name).unwrap() {
            let cfg = ReaderConfig::from_cntk_str(&text, cfg_name, Some(&section)).unwrap();
            for d in &cfg.deserializers {
                let data = cntk.join("ctf").join(&d.file);
                if d.format != FileFormat::Ctf || !data.exists() {
                    continue; // the corpus does not carry every file CNTK's tests generate
                }
                let data = data.to_str().unwrap().to_string();
                let by_config = exfeed(&[
                    "dump".into(),
                    data.clone(),
                    "--config".into(),
                    cfg_path.to_str().unwrap().into(),
                    "--section".into(),
                    section.clone(),
                ]);
                let mut flags = vec!["dump".into(), data.clone()];
                for i in &d.inputs {
                    let alias = i
                        .alias
                        .as_ref()
                        .map(|a| format!(":{a}"))
                        .unwrap_or_default();
                    flags.push("--input".into());
                    flags.push(format!("{}:{}:{}{alias}", i.name, i.storage, i.dim));
                }
                flags.extend([
                    "--precision".into(),
                    cfg.precision.to_string(),
                    "--max-errors".into(),
                    d.effective_max_errors(&cfg).to_string(),
                    "--trace-level".into(),
                    d.effective_trace_level(&cfg).to_string(),
                ]);
                if d.effective_skip_sequence_ids(&cfg) {
                    flags.push("--skip-sequence-ids".into());
                }
                let by_flags = exfeed(&flags);
                let what = format!("{cfg_name} [{section}] on {}", d.file.display());
                assert_eq!(by_config.status.code(), by_flags.status.code(), "{what}");
                assert_eq!(by_config.stdout, by_flags.stdout, "{what}");
                // The data path given differs from the config's relative `file =`: a note,
                // which only trace level 2 (information) shows.
                let stderr = common::text(&by_config.stderr);
                let rest = if cfg.trace_level >= 2 {
                    let (note, rest) = stderr.split_once('\n').unwrap();
                    assert!(
                        note.starts_with("exfeed: note: reading "),
                        "{what}: {stderr}"
                    );
                    rest
                } else {
                    &stderr
                };
                assert_eq!(rest, common::text(&by_flags.stderr), "{what}");
                compared += 1;
            }
        }
    }
    // dense.cntk, sparse.cntk and edge_cases.cntk name 30 CTF files that the corpus has.
    assert!(compared >= 25, "only {compared} sections compared");
}

#[test]
fn config_errors_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("bad.cntk");
    std::fs::write(&cfg, "reader = [\n  randomise = false\n]\n").unwrap();
    let data = dir.path().join("d.ctf");
    std::fs::write(&data, "|a 1\n").unwrap();
    let out = exfeed([
        "dump",
        data.to_str().unwrap(),
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "bad.cntk:2:3: unknown reader parameter 'randomise' (did you mean 'randomize'?)"
        ),
        "{err}"
    );
}

/// exfeed's own whole-file test configs (networks, SGD blocks, several sections).
fn own_config(name: &str) -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../exfeed/tests/configs")
        .join(name)
        .to_str()
        .unwrap()
        .to_string()
}

#[test]
fn config_shows_the_resolved_reader_of_each_section() {
    let cfg = own_config("slot_tagging.cntk");
    let out = exfeed(["config", &cfg]);
    assert_eq!(out.status.code(), Some(0), "{}", common::text(&out.stderr));
    let text = common::text(&out.stdout);
    for want in [
        "command: Train:Dump:Test\n",
        "read/check/dump use: section 'Train' (the first section of command = Train:Dump:Test that has a reader)\n",
        "\nsection 'Train':\n",
        "    randomize = false  [",
        "slot_tagging.cntk:57:21]\n",
        "    randomizationSeed = 0  [default]\n",
        "    input words: alias W dim 5 sparse\n",
        "  warning: section 'Train': 'numMBsToShowResult' (line 59) is a CNTK reader parameter exfeed does not need; ignored\n",
        "\nsection 'Test':\n",
        "  deserializer 1: CNTKTextFormatDeserializer\n",
        "    deserializer 1: input 'tags': dim = 3  [",
    ] {
        assert!(text.contains(want), "{want:?} not in\n{text}");
    }
    // JSON, with overrides; no data file is opened (DataDir points nowhere).
    let out = exfeed([
        "config",
        &cfg,
        "--json",
        "--set",
        "DataDir=/nowhere",
        "--set",
        "command=Test",
        "--section",
        "Train",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", common::text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["section_used"], "Train");
    assert_eq!(v["command"], serde_json::json!(["Test"]));
    let s = &v["sections"][0];
    assert_eq!(s["section"], "Train");
    assert_eq!(s["deserializers"][0]["file"], "/nowhere/train.ctf");
    assert_eq!(s["deserializers"][0]["inputs"][1]["name"], "tags");
    assert_eq!(s["deserializers"][0]["inputs"][1]["alias"], "T");
    assert_eq!(s["reader"]["randomize"]["value"], "false");
    assert_eq!(s["reader"]["maxErrors"]["from"], "default");
    let file = s["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "file")
        .unwrap();
    assert_eq!(file["value"], "/nowhere/train.ctf");
    assert!(file["from"]
        .as_str()
        .unwrap()
        .ends_with("slot_tagging.cntk:56:16"));
    assert_eq!(s["warnings"].as_array().unwrap().len(), 1);
}

#[test]
fn config_names_what_it_cannot_read_and_exits_1() {
    let out = exfeed(["config", &own_config("images_and_text.cntk"), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let err = v["sections"][0]["error"].as_str().unwrap();
    assert!(err.ends_with("deserializer 1 of section 'Train' uses type 'ImageDeserializer', which exfeed cannot read \
         (it reads CNTKTextFormatDeserializer, CNTKBinaryFormatDeserializer, LensDeserializer, \
         ParquetDeserializer, ArrowDeserializer)"), "{err}");
    let out = exfeed([
        "config",
        &own_config("slot_tagging.cntk"),
        "--set",
        "Train..x=1",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        common::text(&out.stderr).contains("'Train..x' is not a parameter name or a dotted path")
    );
    let out = exfeed([
        "config",
        &own_config("slot_tagging.cntk"),
        "--set",
        "novalue",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        common::text(&out.stderr).contains("'novalue' is not NAME=VALUE"),
        "{}",
        common::text(&out.stderr)
    );
}

/// read, check and dump take the data file from the config's `file =`; --set overrides a
/// parameter; a FILE given overrides the config's file, which a note says at trace level 2.
#[test]
fn read_check_dump_take_the_file_from_the_config() {
    let cfg = own_config("slot_tagging.cntk");
    let chosen = "exfeed: note: using section 'Train' (the first section of command = Train:Dump:Test that has a reader)\n";
    let warned = "exfeed: warning: section 'Train': 'numMBsToShowResult' (line 59) is a CNTK reader parameter exfeed does not need; ignored\n";
    let dump = exfeed(["dump", "--config", &cfg]);
    assert_eq!(
        dump.status.code(),
        Some(0),
        "{}",
        common::text(&dump.stderr)
    );
    // The config's `verbosity = 0` hides even warnings; `--trace-level` wins over it: 1 shows
    // the warnings, 2 also which section was used (information).
    assert_eq!(common::text(&dump.stderr), "");
    let warnings = exfeed(["dump", "--config", &cfg, "--trace-level", "1"]);
    assert_eq!(common::text(&warnings.stderr), warned);
    let informed = exfeed(["dump", "--config", &cfg, "--trace-level", "2"]);
    assert_eq!(common::text(&informed.stderr), format!("{chosen}{warned}"));
    let quiet = exfeed(["dump", "--config", &cfg, "--trace-level", "0"]);
    assert_eq!(common::text(&quiet.stderr), "");
    let lines: Vec<String> = common::text(&dump.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), 3, "train.ctf has 3 sequences");
    assert!(lines[0].starts_with("{\"key\":0,"), "{}", lines[0]);
    // The same with the file given explicitly: the same output, no note about the file.
    let dump_file = |file: &std::path::Path, extra: &[&str]| {
        let mut args = vec!["dump", file.to_str().unwrap(), "--config", &cfg];
        args.extend_from_slice(extra);
        exfeed(args)
    };
    let data = std::path::Path::new(&cfg).with_file_name("data/train.ctf");
    let explicit = dump_file(&data, &["--trace-level", "2"]);
    assert_eq!(explicit.stdout, dump.stdout);
    assert!(!common::text(&explicit.stderr).contains("instead of"));
    // Another file overrides the config's; a note says so at trace level 2, never below.
    let test = std::path::Path::new(&cfg).with_file_name("data/test.ctf");
    let other = dump_file(&test, &["--trace-level", "2"]);
    assert_eq!(other.status.code(), Some(0));
    assert_eq!(common::text(&other.stdout).lines().count(), 2);
    assert!(common::text(&other.stderr).contains(&format!(
        "exfeed: note: reading {} given on the command line instead of the config's file = ",
        test.display()
    )));
    for level in [&[][..], &["--trace-level", "1"], &["--trace-level", "0"]] {
        let out = dump_file(&test, level);
        assert_eq!(out.stdout, other.stdout);
        let stderr = common::text(&out.stderr);
        assert!(!stderr.contains("note:"), "{level:?}: {stderr}");
    }
    // check and read, and the section chosen with --set command=..., DataDir with --set.
    let check = exfeed([
        "check",
        "--config",
        &cfg,
        "--set",
        "command=Test",
        "--trace-level",
        "2",
    ]);
    assert_eq!(
        check.status.code(),
        Some(0),
        "{}",
        common::text(&check.stderr)
    );
    assert!(common::text(&check.stderr).contains("using section 'Test'"));
    assert!(
        common::text(&check.stdout).contains("test.ctf"),
        "{}",
        common::text(&check.stdout)
    );
    let read = exfeed(["read", "--config", &cfg, "--section", "Train", "-m", "4"]);
    assert_eq!(
        read.status.code(),
        Some(0),
        "{}",
        common::text(&read.stderr)
    );
    assert!(
        !common::text(&read.stderr).contains("using section"),
        "named: no note"
    );
    let moved = exfeed([
        "read",
        "--config",
        &cfg,
        "--set",
        "DataDir=/no/such/dir",
        "-m",
        "4",
    ]);
    assert_eq!(moved.status.code(), Some(2));
    assert!(
        common::text(&moved.stderr).contains("/no/such/dir/train.ctf"),
        "{}",
        common::text(&moved.stderr)
    );
    // Without a config, FILE is needed.
    let none = exfeed(["check"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(
        common::text(&none.stderr).contains("no data file: give FILE"),
        "{}",
        common::text(&none.stderr)
    );
}

/// The README's first command: the sample config names its data file as `$ConfigDir$/...`, so
/// it runs from any directory with no FILE, and the happy path says nothing but the summary.
/// `--set` is an override, not a duplicate, and `exfeed config` says where a value came from.
#[test]
fn the_sample_config_runs_from_anywhere_and_an_override_is_no_duplicate() {
    let samples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples");
    let cfg = samples.join("sequences.cntk").canonicalize().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let read = |dir: &std::path::Path, cfg: &str, extra: &[&str]| {
        let mut args = vec![
            "read",
            "--config",
            cfg,
            "--minibatch-size",
            "32",
            "--max-sweeps",
            "2",
            "--dump",
        ];
        args.extend_from_slice(extra);
        common::exfeed_in(dir, args, None)
    };
    let here = read(&samples, "sequences.cntk", &[]);
    let there = read(elsewhere.path(), cfg.to_str().unwrap(), &[]);
    for out in [&here, &there] {
        assert_eq!(out.status.code(), Some(0), "{}", common::text(&out.stderr));
        let stderr = common::text(&out.stderr);
        assert!(
            stderr.starts_with("read: 7 minibatches, 80 sequences, 192 samples;"),
            "{stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    assert_eq!(here.stdout, there.stdout);
    let file_order = read(
        elsewhere.path(),
        cfg.to_str().unwrap(),
        &["--set", "sample.reader.randomize=false"],
    );
    let stderr = common::text(&file_order.stderr);
    assert!(
        !stderr.contains("set twice") && !stderr.contains("warning"),
        "{stderr}"
    );
    let first = common::text(&file_order.stdout)
        .lines()
        .next()
        .unwrap()
        .to_string();
    assert!(first.contains("[{\"sweep\":0,\"key\":0,"), "{first}");
    let shown = exfeed([
        "config",
        cfg.to_str().unwrap(),
        "--set",
        "sample.reader.randomize=false",
        "--json",
    ]);
    let text = common::text(&shown.stdout);
    assert!(
        text.contains("--set sample.reader.randomize=false"),
        "{text}"
    );
    assert!(!text.contains("set twice"), "{text}");
}
