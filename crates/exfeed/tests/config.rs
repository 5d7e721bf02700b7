//! Every section of every CNTK conformance config parses to the typed configuration it spells out,
//! with `$defMBSize$` substituted both ways (the CNTK tests ran with false and true), and the
//! TOML form written from a parsed configuration reads back to the same configuration.

mod common;

use std::path::Path;

use exfeed::config::{cntk_sections, ReaderConfig, DEFAULT_CHUNK_SIZE_BYTES};
use exfeed::format::FileFormat;
use exfeed::options::ChunkSize;
use exfeed::{Precision, Storage, StreamSpec};

/// `SECTION PRECISION RANDOMIZE [chunk=N] [keep] [trace=N] [skip] [maxErrors=N] ; FILE INPUT... ; ...`
/// where INPUT is `NAME:FORMAT:DIM[:ALIAS]` with a trailing `*` when it has
/// `definesMbSize=$defMBSize$`, or `NAME=ALIAS` (CBF: alias only).
const EXPECTED: &[(&str, &[&str])] = &[
    (
        "dense.cntk",
        &[
            "1x1 double true ; 1x1_dense.txt features:dense:10000:F*",
            "1x2 double true ; 1x2_dense.txt features:dense:100:F0*",
            "1x10 float true ; 1x10_dense.txt features:dense:10:F0*",
            "10x1_MI float true chunk=50000 keep ; 10x1_MI_dense.txt features1:dense:1:F1* features2:dense:10:F2 \
             features3:dense:100:F3 features4:dense:1000:F4 labels1:dense:1:L1 labels2:dense:10:L2 labels3:dense:100:L3",
            "10x10 float false ; 10x10_dense.txt features:dense:5:F0*",
            "100x1 double true chunk=10000 keep ; 100x1_dense.txt features:dense:100:F labels:dense:100:L*",
            "MNIST double false chunk=10000 keep ; MNIST_dense.txt features:dense:784:F labels:dense:10:L*",
            "Simple float false ; Simple_dense.txt features:dense:2:F* labels:dense:2:L",
            "Simple_single_stream float false trace=0 ; Simple_dense.txt features:dense:2:F*",
            "50x20_jagged_sequences double false ; 50x20_jagged_sequences_dense.txt features:dense:3:F0*",
            "100x100x3_randomize_auto double true ; 100x100x3_jagged_sequences_dense.txt features1:dense:10:F0* \
             features2:dense:50:F1 features3:dense:100:F2",
            "200x200x2_seq2seq double true ; 200x200x2_seq2seq_dense.txt features1:dense:5:F0 features2:dense:50:F1",
            "5x10_and_5x5_jagged double true ; 5x10_and_5x5_jagged.txt features1:dense:10:F0 features2:dense:5:F1",
            "5x10_and_5x5_jagged_composite double true ; 5x10_jagged.txt features1:dense:10:F0 ; \
             5x5_jagged.txt features2:dense:5:F1",
        ],
    ),
    (
        "sparse.cntk",
        &[
            "1x1 float true ; 1x1_sparse.txt features:sparse:10000:F0*",
            "1x2 float true ; 1x2_sparse.txt features:sparse:1000:F0*",
            "1x10 double true ; 1x10_sparse.txt features:sparse:100:F0*",
            "10x10 double false ; 10x10_sparse.txt features:sparse:100:F0*",
            "3x5_MI float false ; 3x5_MI_sparse.txt features1:sparse:2:F0* features2:sparse:20:F1 features3:sparse:200:F2",
            "20x10_MI_jagged_samples float false ; 20x10_MI_jagged_samples_sparse.txt features1:sparse:2:F0* \
             features2:sparse:20:F1 features3:sparse:200:F2",
            "50x20_jagged_sequences float false ; 50x20_jagged_sequences_sparse.txt features:sparse:100:F0",
            "100x100_jagged float false ; 100x100_jagged_sparse.txt features:sparse:20:F0",
        ],
    ),
    (
        "edge_cases.cntk",
        &[
            "space_separated double true ; space_separated.txt features1:dense:15:F1* features2:dense:12:F2 \
             features3:dense:1:F3",
            "missing_trailing_newline double true ; missing_trailing_newline.txt features:dense:1*",
            "blank_lines double true skip ; contains_blank_lines.txt features:dense:1*",
            "blank_lines_ignored double false maxErrors=2 ; contains_blank_lines.txt features:dense:1*",
            "duplicate_inputs double true ; duplicate_inputs.txt features1:dense:1:F1* features2:dense:1:F2",
            "empty_samples float false ; empty_samples.txt features:dense:10:F0* labels:sparse:10:F1",
            "ref_data_with_escape_sequences float false ; ref_data_with_escape_sequences.txt \
             features:sparse:100:F0* labels:dense:3:F1",
        ],
    ),
    (
        "cbf_test.cntk",
        &[
            "Simple float false ; Simple_dense.bin",
            "MNIST double false keep ; MNIST_dense.bin",
            "10x10_dense float false ; 10x10_dense.bin",
            "50x20_jagged_sequences_dense double false ; 50x20_jagged_sequences_dense.bin",
            "10x10_sparse double false ; 10x10_sparse.bin",
            "50x20_jagged_sequences_sparse float false ; 50x20_jagged_sequences_sparse.bin",
            "100x100x3_randomize_auto double true ; 100x100x3_jagged_sequences_dense.bin",
            "5_inputs_100x10_jagged_mixed float true ; 5_inputs_100x10_jagged_mixed.bin \
             features1=a features2=b features3=c features4=d features5=e",
        ],
    ),
];

/// The configuration a line of [`EXPECTED`] describes, with `defines` for the starred inputs.
fn expected(line: &str, defines: bool) -> (String, ReaderConfig) {
    let mut parts = line.split(';');
    let mut head = parts.next().unwrap().split_whitespace();
    let section = head.next().unwrap().to_string();
    let mut cfg = ReaderConfig {
        precision: head.next().unwrap().parse().unwrap(),
        randomize: head.next().unwrap().parse().unwrap(),
        ..ReaderConfig::default()
    };
    for extra in head {
        match extra.split_once('=') {
            Some(("chunk", n)) => {
                cfg.read = cfg
                    .read
                    .with_chunk_size(ChunkSize::Bytes(n.parse().unwrap()))
            }
            Some(("trace", n)) => cfg.trace_level = n.parse().unwrap(),
            Some(("maxErrors", n)) => cfg.max_errors = n.parse().unwrap(),
            None if extra == "keep" => cfg.read = cfg.read.with_keep_in_memory(true),
            None if extra == "skip" => cfg.skip_sequence_ids = true,
            _ => panic!("bad expectation {extra}"),
        }
    }
    for d in parts {
        let mut words = d.split_whitespace();
        let file = words.next().unwrap();
        let kind = if file.ends_with(".bin") {
            FileFormat::Cbf
        } else {
            FileFormat::Ctf
        };
        let inputs = words
            .map(|w| match w.split_once('=') {
                Some((name, alias)) => {
                    let mut s = StreamSpec::new(name, Storage::Dense, 0);
                    s.alias = Some(alias.into());
                    s
                }
                None => {
                    let mut s: StreamSpec = w.trim_end_matches('*').parse().unwrap();
                    s.defines_mb_size = defines && w.ends_with('*');
                    s
                }
            })
            .collect();
        cfg.deserializers.push(exfeed::config::DeserializerConfig {
            format: kind,
            file: file.into(),
            inputs,
            ..Default::default()
        });
    }
    // CNTK's default: the window counts chunks with a CTF deserializer, samples otherwise.
    cfg.sample_based_randomization_window = !cfg
        .deserializers
        .iter()
        .any(|d| d.format == FileFormat::Ctf);
    (section, cfg)
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap()
}

#[test]
fn every_conformance_section_parses_to_its_typed_config() {
    let Some(dir) = common::conformance("cntk/config") else {
        return;
    };
    let mut checked = 0;
    for (file, lines) in EXPECTED {
        let text = read(&dir, file);
        // The CNTK tests ran these configs with defMBSize false (as written) and true.
        let with_true = text
            .replace("defMBSize=false", "defMBSize=true")
            .replace("defMbSize=false", "defMbSize=true");
        assert_eq!(
            text != with_true,
            *file != "cbf_test.cntk",
            "{file}: only the CTF configs define defMBSize"
        );
        let sections = cntk_sections(&text, file).unwrap();
        let listed: Vec<String> = lines.iter().map(|l| expected(l, false).0).collect();
        assert_eq!(
            sections, listed,
            "{file}: every section is in the table, in file order"
        );
        for line in *lines {
            for (text, defines) in [(&text, false), (&with_true, true)] {
                let (section, want) = expected(line, defines);
                let got = ReaderConfig::from_cntk_str(text, file, Some(&section))
                    .unwrap_or_else(|e| panic!("{file} [{section}]: {e}"));
                assert_eq!(got, want, "{file} [{section}] defMBSize={defines}");
                checked += 1;
            }
        }
        // Through the file API too, and several sections without a name is an error listing them.
        let path = dir.join(file);
        let err = ReaderConfig::from_cntk_file(&path, None).unwrap_err();
        let msg = format!(
            "{}: {} sections have a reader block, name one of them: {}",
            path.display(),
            listed.len(),
            listed.join(", ")
        );
        assert_eq!(err.to_string(), msg);
        let first = expected(lines[0], false);
        assert_eq!(
            ReaderConfig::from_cntk_file(&path, Some(&first.0)).unwrap(),
            first.1
        );
    }
    assert_eq!(checked, 2 * 37);
}

/// Writes `cfg` in the documented TOML form.
fn to_toml(cfg: &ReaderConfig, flat: bool) -> String {
    let mut s = format!("precision = \"{}\"\n\n[reader]\n", cfg.precision);
    let d0 = ReaderConfig::default();
    s += &format!("randomize = {}\n", cfg.randomize);
    if cfg.read.chunk_bytes() != d0.read.chunk_bytes() {
        s += &format!("chunkSizeInBytes = {}\n", cfg.read.chunk_bytes());
    }
    for (key, on) in [
        ("keepDataInMemory", cfg.read.keep_in_memory()),
        ("skipSequenceIds", cfg.skip_sequence_ids),
        ("frameMode", cfg.read.frame_mode()),
        ("cacheIndex", cfg.read.cache_index()),
    ] {
        if on {
            s += &format!("{key} = true\n");
        }
    }
    s += &format!(
        "traceLevel = {}\nmaxErrors = {}\nsampleBasedRandomizationWindow = {}\n",
        cfg.trace_level, cfg.max_errors, cfg.sample_based_randomization_window
    );
    let input_tables = |s: &mut String, prefix: &str, d: &exfeed::config::DeserializerConfig| {
        for i in &d.inputs {
            *s += &format!("\n[{prefix}.input.{}]\n", i.name);
            if let Some(a) = &i.alias {
                *s += &format!("alias = \"{a}\"\n");
            }
            if i.dim > 0 {
                *s += &format!("dim = {}\nformat = \"{}\"\n", i.dim, i.storage);
            }
            *s += &format!("definesMBSize = {}\n", i.defines_mb_size);
        }
    };
    if flat {
        let d = &cfg.deserializers[0];
        s += &format!(
            "readerType = \"{}\"\nfile = \"{}\"\n",
            exfeed::config::reader_type(d.format),
            d.file.display()
        );
        input_tables(&mut s, "reader", d);
    } else {
        for d in &cfg.deserializers {
            s += &format!(
                "\n[[reader.deserializers]]\ntype = \"{}\"\nfile = \"{}\"\n",
                exfeed::config::deserializer_type(d.format),
                d.file.display()
            );
            input_tables(&mut s, "reader.deserializers", d);
        }
    }
    s
}

#[test]
fn toml_form_of_every_conformance_section_reads_back_the_same() {
    let Some(dir) = common::conformance("cntk/config") else {
        return;
    };
    for (file, lines) in EXPECTED {
        let text = read(&dir, file);
        for line in *lines {
            let section = expected(line, false).0;
            let cfg = ReaderConfig::from_cntk_str(&text, file, Some(&section)).unwrap();
            for flat in [true, false] {
                if flat && cfg.deserializers.len() > 1 {
                    continue;
                }
                let toml = to_toml(&cfg, flat);
                let back = ReaderConfig::from_toml_str(&toml, "t.toml", None)
                    .unwrap_or_else(|e| panic!("{file} [{section}]: {e}\n{toml}"));
                assert_eq!(back, cfg, "{file} [{section}] flat={flat}\n{toml}");
            }
        }
    }
}

#[test]
fn cbf_alias_only_inputs_leave_dim_to_the_file() {
    let Some(dir) = common::conformance("cntk/config") else {
        return;
    };
    let cfg = ReaderConfig::from_cntk_file(
        dir.join("cbf_test.cntk"),
        Some("5_inputs_100x10_jagged_mixed"),
    )
    .unwrap();
    let d = &cfg.deserializers[0];
    assert_eq!(d.format, FileFormat::Cbf);
    assert_eq!(cfg.precision, Precision::Float);
    assert!(d.inputs.iter().all(|i| i.dim == 0));
    let names: Vec<_> = d
        .inputs
        .iter()
        .map(|i| (i.name.as_str(), i.alias.as_deref().unwrap()))
        .collect();
    assert_eq!(
        names,
        [
            ("features1", "a"),
            ("features2", "b"),
            ("features3", "c"),
            ("features4", "d"),
            ("features5", "e")
        ]
    );
    assert_eq!(cfg.read.chunk_bytes(), DEFAULT_CHUNK_SIZE_BYTES);
    // CNTK opens files relative to the working directory; the tests resolve against the data.
    let data = dir.join("../cbf");
    assert_eq!(
        d.resolve_file(&data),
        data.join("5_inputs_100x10_jagged_mixed.bin")
    );
}

#[test]
fn documented_examples_are_true() {
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/config.md"))
            .unwrap();
    let blocks: Vec<&str> = docs
        .split("```toml\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .collect();
    assert_eq!(blocks.len(), 2);
    let composite = ReaderConfig::from_toml_str(blocks[0], "doc.toml", None).unwrap();
    assert_eq!(composite.deserializers.len(), 2);
    assert_eq!(composite.precision, Precision::Double);
    let flat = ReaderConfig::from_toml_str(blocks[1], "doc.toml", None).unwrap();
    let names: Vec<_> = flat.deserializers[0]
        .inputs
        .iter()
        .map(|i| i.name.as_str())
        .collect();
    assert_eq!(names, ["features", "labels"]);

    let Some(dir) = common::conformance("cntk/config") else {
        return;
    };
    let text = read(&dir, "dense.cntk");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        (lines[12].trim(), lines[19].trim()),
        ("randomize = true", "dim = 10000")
    );
    for (from, to, want) in [
        (
            "        randomize = true\n\n        input",
            "        randomise = true\n\n        input",
            "dense.cntk:13:9: unknown reader parameter 'randomise' (did you mean 'randomize'?)",
        ),
        (
            "dim = 10000",
            "dim = abc",
            "dense.cntk:20:23: input 'features': dim must be a positive integer, found 'abc'",
        ),
    ] {
        let bad = text.replacen(from, to, 1);
        let err = ReaderConfig::from_cntk_str(&bad, "dense.cntk", Some("1x1")).unwrap_err();
        assert_eq!(err.to_string(), want);
        assert!(docs.contains(want), "docs/config.md shows {want}");
    }
}

// ---------------------------------------------------------------------------------------------
// Whole CNTK config files, in the shape real ones have (tests/configs/, written for exfeed):
// networks in BrainScript, SGD blocks, several command sections, variables, comments.

mod whole_files {
    use std::path::{Path, PathBuf};

    use exfeed::config::{ConfigFile, ConfigOptions, ReaderConfig};
    use exfeed::{ErrorKind, Storage};

    fn config(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/configs")
            .join(name)
    }

    fn set(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    fn load(
        name: &str,
        section: Option<&str>,
        overrides: &[(&str, &str)],
    ) -> exfeed::Result<exfeed::config::SectionReader> {
        let options = ConfigOptions {
            section: section.map(str::to_string),
            overrides: set(overrides),
        };
        ReaderConfig::load(config(name), &options)
    }

    #[test]
    fn the_first_command_section_with_a_reader_is_used_and_says_so() {
        let r = load("slot_tagging.cntk", None, &[]).unwrap();
        assert_eq!(r.section.as_deref(), Some("Train"));
        assert_eq!(
            r.chosen_because.as_deref(),
            Some("the first section of command = Train:Dump:Test that has a reader")
        );
        // ConfigDir is the config's directory; the input block comes from a variable.
        let d = &r.config.deserializers[0];
        assert_eq!(d.file, config("data/train.ctf"));
        let inputs: Vec<_> = d
            .inputs
            .iter()
            .map(|i| (i.name.as_str(), i.name_in_file(), i.storage, i.dim))
            .collect();
        assert_eq!(
            inputs,
            [
                ("words", "W", Storage::Sparse, 5),
                ("tags", "T", Storage::Sparse, 3)
            ]
        );
        assert!(!r.config.randomize);
        assert_eq!(r.config.trace_level, 0, "verbosity sets the trace level");
        assert_eq!(
            r.warnings,
            ["section 'Train': 'numMBsToShowResult' (line 59) is a CNTK reader parameter exfeed does not need; ignored"]
        );
        let file = r.params.iter().find(|p| p.name == "file").unwrap();
        assert_eq!(file.value, config("data/train.ctf").display().to_string());
        assert_eq!(
            file.from,
            format!("{}:56:16", config("slot_tagging.cntk").display())
        );
        // An input parameter read through the variable says where the variable's block is.
        let dim = r
            .params
            .iter()
            .find(|p| p.name == "input 'words': dim")
            .unwrap();
        assert_eq!(
            (dim.value.as_str(), dim.from.ends_with(":17:48")),
            ("5", true),
            "{dim:?}"
        );
    }

    #[test]
    fn section_variables_are_looked_up_at_the_top_level_first_as_cntk_does() {
        // Test defines its own DataDir, but CNTK resolves every $name$ of a section against the
        // top level when it fetches the section, so the top-level DataDir is the one used.
        let r = load("slot_tagging.cntk", Some("test"), &[]).unwrap();
        assert_eq!(
            (r.section.as_deref(), r.chosen_because.as_deref()),
            (Some("test"), None)
        );
        assert_eq!(r.config.deserializers[0].file, config("data/test.ctf"));
        // Unused parameters with undefined variables ($DeviceId$, $notDefinedAnywhere$) are
        // no errors; the network block is never evaluated.
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }

    #[test]
    fn overrides_as_cntk_takes_them_on_its_command_line() {
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, bool);
        let cases: &[Case<'_>] = &[
            (&[("DataDir", "/data")], "/data/train.ctf", false),
            (
                &[("datadir", "/data"), ("Train.reader.randomize", "true")],
                "/data/train.ctf",
                true,
            ),
            // A block written with '[' merges into the section, as `Train=[SGD=[maxEpochs=2]]`.
            (&[("Train", "[ reader = [ randomize = true ] ]")], "", true),
            (&[("ConfigDir", "/cfg")], "/cfg/data/train.ctf", false),
            (
                &[("Train.reader.file", "$OutputDir$/other.ctf")],
                "./out/other.ctf",
                false,
            ),
        ];
        for (overrides, file, randomize) in cases {
            let r = load("slot_tagging.cntk", None, overrides).unwrap();
            let want = if file.is_empty() {
                config("data/train.ctf")
            } else {
                PathBuf::from(file)
            };
            assert_eq!(r.config.deserializers[0].file, want, "{overrides:?}");
            assert_eq!(r.config.randomize, *randomize, "{overrides:?}");
            assert_eq!(
                r.config.deserializers[0].inputs.len(),
                2,
                "{overrides:?}: the rest of the block stays"
            );
        }
        let r = load(
            "slot_tagging.cntk",
            None,
            &[("Train.reader.randomize", "true")],
        )
        .unwrap();
        let p = r.params.iter().find(|p| p.name == "randomize").unwrap();
        assert_eq!(p.from, "--set Train.reader.randomize=true");
        // `command` chooses the section.
        let r = load("slot_tagging.cntk", None, &[("command", "Dump:Test")]).unwrap();
        assert_eq!(r.section.as_deref(), Some("Test"));
        // A value of the wrong kind is named by its override.
        let err = load(
            "slot_tagging.cntk",
            None,
            &[("Train.reader.randomize", "maybe")],
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "--set Train.reader.randomize=maybe:1:11: randomize must be true or false, found 'maybe'"
        );
        for (name, value, want) in [
            (
                "Train..x",
                "1",
                "--set Train..x=1: 'Train..x' is not a parameter name or a dotted path",
            ),
            (
                "DataDir.x",
                "1",
                "--set DataDir.x=1: 'DataDir' is not a block",
            ),
            (
                "x",
                "[ a = 1",
                "--set x=[ a = 1:1:3: unterminated block: '[' is never closed by ']'",
            ),
        ] {
            let err = load("slot_tagging.cntk", None, &[(name, value)]).unwrap_err();
            assert_eq!(err.to_string(), want);
        }
        assert_eq!(
            ConfigOptions::parse_override(" a.b = c=d ").unwrap(),
            ("a.b".into(), "c=d".into())
        );
        assert!(ConfigOptions::parse_override("=1").is_err());
    }

    #[test]
    fn lazy_lookup_is_not_a_cycle_and_real_cycles_and_undefined_names_say_where() {
        let text = r#"
modelPath = "out/m.dnn"
dumpModelPath = "$modelPath$.2"
a = $b$
b = $a$
dump = [
    modelPath = "$dumpModelPath$"
    reader = [ readerType = CNTKBinaryReader ; file = "$dumpModelPath$" ; cycle = $a$ ]
]
"#;
        let ok = text.replace("; cycle = $a$ ", "");
        let cfg = ConfigFile::parse_cntk(&ok, "c.cntk", &[]).unwrap();
        let r = cfg.reader(None).unwrap();
        assert_eq!(r.section.as_deref(), Some("dump"));
        assert_eq!(r.config.deserializers[0].file, Path::new("out/m.dnn.2"));
        // `$modelPath$` inside the section is the top level's: CNTK resolves a section's text
        // against the top level when it fetches the section.
        let top_first = ok.replace("file = \"$dumpModelPath$\"", "file = \"$modelPath$\"");
        let r = ConfigFile::parse_cntk(&top_first, "c.cntk", &[])
            .unwrap()
            .reader(None)
            .unwrap();
        assert_eq!(r.config.deserializers[0].file, Path::new("out/m.dnn"));
        for (text, want) in [
            (text.replace("cycle = $a$", "maxErrors = $a$"), "c.cntk:8:87: 'maxErrors' refers to itself: maxErrors -> $a$ -> $b$ -> $a$"),
            (text.replace("cycle = $a$", "maxErrors = $nope$"),
             "c.cntk:8:87: undefined variable '$nope$' in 'maxErrors' (looked in the top level, dump.reader, dump)"),
            (text.replace("cycle = $a$", "maxErrors = $dumpModelPath$"), "c.cntk:8:87: maxErrors must be a non-negative integer, found 'out/m.dnn.2'"),
            (text.replace("cycle = $a$", "input = $modelPath$"), "c.cntk:8:83: input must be a block [ ... ], found 'out/m.dnn'"),
            (text.replace("cycle = $a$", "file = x$dump$"), "c.cntk:8:82: '$dump$' is a block (defined at line 6), not a value to put into text"),
        ] {
            let err = ConfigFile::parse_cntk(&text, "c.cntk", &[]).and_then(|c| c.reader(None)).unwrap_err();
            assert_eq!(err.to_string(), want);
        }
    }

    #[test]
    fn an_override_is_no_duplicate_and_is_named_as_set() {
        let text = "s = [\n    reader = [\n        readerType = CNTKTextFormatReader\n        file = a.ctf\n        randomize = true\n        input = [ x = [ dim = 1 ; format = dense ] ]\n    ]\n]\n";
        let read = |text: &str, overrides: &[(&str, &str)]| {
            ConfigFile::parse_cntk(text, "c.cntk", &set(overrides)).and_then(|c| c.reader(None))
        };
        let r = read(text, &[("s.reader.randomize", "false")]).unwrap();
        assert!(!r.config.randomize);
        assert_eq!(r.warnings, Vec::<String>::new());
        let r = read(text, &[("s.reader", "[ randomize = false ]")]).unwrap();
        assert!(!r.config.randomize);
        assert_eq!(r.warnings, Vec::<String>::new());
        // A value written twice in the file is still a duplicate, overridden or not.
        let twice = text.replace(
            "randomize = true\n",
            "randomize = true\n        randomize = true\n",
        );
        for overrides in [&[][..], &[("s.reader.randomize", "false")][..]] {
            assert_eq!(
                read(&twice, overrides).unwrap().warnings,
                ["section 's': 'randomize' is set twice (lines 5 and 6); the later value is used, as in CNTK"]
            );
        }
        // A parameter exfeed does not need, or a block put into text, by --set: named as such.
        let r = read(text, &[("s.reader.numMBsToShowResult", "10")]).unwrap();
        assert_eq!(
            r.warnings,
            ["section 's': 'numMBsToShowResult' (--set s.reader.numMBsToShowResult=10) is a CNTK reader parameter exfeed does not need; ignored"]
        );
        let err = read(&text.replace("a.ctf", "x$b$"), &[("b", "[ c = 1 ]")]).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("'$b$' is a block (set by --set), not a value to put into text"),
            "{err}"
        );
    }

    #[test]
    fn a_network_at_the_top_level_and_a_variable_holding_an_input_block() {
        let path = config("seq2seq.cntk");
        let cfg = ConfigFile::open(&path, &[]).unwrap();
        assert_eq!(cfg.commands().unwrap(), ["train"]);
        assert_eq!(cfg.reader_sections(), ["train"]);
        let r = cfg.reader(None).unwrap();
        assert_eq!(
            r.config.deserializers[0].file,
            Path::new("./data/train.ctf")
        );
        assert_eq!(r.config.deserializers[0].inputs[1].name_in_file(), "T");
        assert!(r.config.randomize);
    }

    #[test]
    fn a_deserializer_exfeed_cannot_read_is_named_with_its_section() {
        let err = load("images_and_text.cntk", None, &[]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported);
        assert!(
            err.to_string().ends_with(
                "images_and_text.cntk:8:20: deserializer 1 of section 'Train' uses type 'ImageDeserializer', which exfeed \
                 cannot read (it reads CNTKTextFormatDeserializer, CNTKBinaryFormatDeserializer, LensDeserializer, \
                 ParquetDeserializer, ArrowDeserializer)"
            ),
            "{err}"
        );
    }

    #[test]
    fn the_data_file_comes_from_the_config_and_a_given_one_is_noted() {
        let r = load("slot_tagging.cntk", None, &[]).unwrap();
        // The trace level decides: information (2) names the section, warnings (1) only warn.
        assert_eq!(
            r.notes(2),
            [
                "note: using section 'Train' (the first section of command = Train:Dump:Test that has a reader)",
                "warning: section 'Train': 'numMBsToShowResult' (line 59) is a CNTK reader parameter exfeed does not need; ignored",
            ]
        );
        assert_eq!(
            r.notes(1),
            ["warning: section 'Train': 'numMBsToShowResult' (line 59) is a CNTK reader parameter exfeed does not need; ignored"]
        );
        assert!(r.notes(0).is_empty());
        let train = config("data/train.ctf");
        assert_eq!(r.data_files(&[], 2), (vec![train.clone()], vec![]));
        // The same file written another way is no override.
        let other_spelling = config("data/../data/train.ctf");
        assert_eq!(
            r.data_files(std::slice::from_ref(&other_spelling), 2).1,
            Vec::<String>::new()
        );
        let test = config("data/test.ctf");
        let (files, quiet) = r.data_files(std::slice::from_ref(&test), 1);
        assert_eq!(
            (files.as_slice(), quiet.len()),
            (std::slice::from_ref(&test), 0)
        );
        let (files, notes) = r.data_files(std::slice::from_ref(&test), 2);
        assert_eq!(files, std::slice::from_ref(&test));
        assert_eq!(
            notes,
            [format!(
                "note: reading {} given on the command line instead of the config's file = {}",
                test.display(),
                train.display()
            )]
        );
        // A named section says nothing about how it was chosen.
        assert!(load("slot_tagging.cntk", Some("Test"), &[])
            .unwrap()
            .notes(2)
            .is_empty());
    }

    #[test]
    fn every_reader_of_a_file_for_exfeed_config() {
        let cfg = ConfigFile::open(config("slot_tagging.cntk"), &[]).unwrap();
        let all = cfg.all_readers();
        let names: Vec<_> = all.iter().map(|(s, r)| (s.as_deref(), r.is_ok())).collect();
        assert_eq!(names, [(Some("Train"), true), (Some("Test"), true)]);
    }
}
