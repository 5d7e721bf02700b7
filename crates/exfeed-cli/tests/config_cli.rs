//! `--config FILE --section NAME` on the real binary: every section of CNTK's own test configs
//! that reads a CTF file of the corpus dumps exactly as the same inputs and parameters given as
//! flags do.

mod common;

use common::exfeed;
use exfeed::config::{cntk_sections, DeserializerKind, ReaderConfig};

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
                if d.kind != DeserializerKind::Ctf || !data.exists() {
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
                assert_eq!(by_config.stderr, by_flags.stderr, "{what}");
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
