//! Lens example files against what Lens 2.63 itself did (conformance/lens).

mod common;

use exfeed::io::{open_bytes, InputPath};
use exfeed::lens::{binary, text};
use std::path::Path;

fn load(p: &Path) -> Vec<u8> {
    open_bytes(&InputPath::new(p)).unwrap().to_vec()
}

/// NAME from examples/DIR/NAME.ex[.gz] or NAME.bex.gz.
fn stem(p: &Path) -> String {
    let n = p.file_name().unwrap().to_string_lossy().to_string();
    let n = n.strip_suffix(".gz").unwrap_or(&n).to_string();
    n.strip_suffix(".ex")
        .or(n.strip_suffix(".bex"))
        .unwrap_or(&n)
        .to_string()
}

#[test]
fn our_bex_bytes_equal_lens_for_every_reference_and_case() {
    let Some(dir) = common::conformance("lens") else {
        return;
    };
    let mut n = 0;
    for sub in ["reference", "cases"] {
        for p in common::files_under(&dir.join(sub)) {
            if !p.to_string_lossy().ends_with(".lens.bex") {
                continue;
            }
            let bytes = load(&p);
            let set = binary::read(&bytes).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let ours = binary::write(&set).unwrap();
            assert!(ours == bytes, "{}: written bytes differ", p.display());
            n += 1;
        }
    }
    assert!(n > 50, "only {n} reference .bex files");
}

#[test]
fn every_example_file_loads_as_lens_loaded_it() {
    let Some(dir) = common::conformance("lens") else {
        return;
    };
    let mut n = 0;
    for p in common::files_under(&dir.join("examples")) {
        if p.extension().is_some_and(|e| e == "md") {
            continue;
        }
        let name = stem(&p);
        let set = exfeed::lens::parse(&load(&p)).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let reference = load(&dir.join("reference").join(format!("{name}.lens.bex")));
        let ours = binary::write(&set).unwrap();
        assert!(
            ours == reference,
            "{}: loads differently from Lens",
            p.display()
        );
        n += 1;
    }
    assert!(n >= 38, "only {n} example files");
}

#[test]
fn every_case_loads_or_fails_as_in_lens() {
    let Some(dir) = common::conformance("lens/cases") else {
        return;
    };
    let mut n = 0;
    let mut failures = Vec::new();
    for p in common::files_under(&dir) {
        let s = p.to_string_lossy().to_string();
        if !s.ends_with(".ex") || s.ends_with(".lens.ex") {
            continue;
        }
        let base = s.strip_suffix(".ex").unwrap();
        let log = std::fs::read_to_string(format!("{base}.log")).unwrap();
        let loaded = log.contains("returned code=0");
        let got = exfeed::lens::parse(&load(&p));
        n += 1;
        match (loaded, got) {
            (true, Ok(set)) => {
                let reference = load(Path::new(&format!("{base}.lens.bex")));
                if binary::write(&set).unwrap() != reference {
                    failures.push(format!("{s}: loads differently from Lens: {set:?}"));
                }
            }
            (true, Err(e)) => failures.push(format!("{s}: Lens loaded it, we said {e}")),
            (false, Ok(_)) => failures.push(format!("{s}: Lens rejected it, we loaded it")),
            (false, Err(e)) => {
                // A positioned message, unless the whole file is the place (too short to be
                // an example file: no "(byte 0)").
                let whole_file = e.message().starts_with("example file empty");
                assert!(
                    whole_file || (e.location().line.is_some() && e.location().byte.is_some()),
                    "{s}: {e}"
                );
                assert_eq!(whole_file, e.location().byte.is_none(), "{s}: {e}");
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(n > 60, "only {n} cases");
}

#[test]
fn text_writer_round_trips_every_reference() {
    let Some(dir) = common::conformance("lens/reference") else {
        return;
    };
    for p in common::files_under(&dir) {
        if !p.to_string_lossy().ends_with(".lens.bex") {
            continue;
        }
        let set = binary::read(&load(&p)).unwrap();
        let ex = text::write(&set).unwrap();
        let back = exfeed::lens::parse(&ex).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(
            binary::write(&back).unwrap() == binary::write(&set).unwrap(),
            "{}: text round trip differs",
            p.display()
        );
    }
}

#[test]
fn truncated_bex_is_a_clean_error_at_every_offset() {
    let Some(dir) = common::conformance("lens") else {
        return;
    };
    for name in [
        "cases/r14_both.lens.bex",
        "reference/crazyxor.lens.bex",
        "cases/e12_event_proc_multi.lens.bex",
    ] {
        let bytes = load(&dir.join(name));
        for cut in 0..bytes.len() {
            let e = binary::read(&bytes[..cut]).expect_err("truncated file accepted");
            let at = e.location().byte.unwrap();
            assert!(at <= cut as u64, "{name} cut at {cut}: error at {at}");
        }
        // Flipping any byte never panics.
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0xff;
            let _ = binary::read(&b);
        }
    }
}

#[test]
fn lens_own_text_saves_load_except_where_its_writer_is_defective() {
    // Lens writes NaN inside ranges as `nan`, which neither it nor we read back; everything
    // else it wrote must load. (Its B: saves as separate I:/T: lists and its unit-0 dense
    // range loses its parentheses, so the loaded sets may differ: docs/lens-deviations.md.)
    let Some(dir) = common::conformance("lens") else {
        return;
    };
    let mut n = 0;
    for p in common::files_under(&dir.join("reference"))
        .into_iter()
        .chain(common::files_under(&dir.join("cases")))
    {
        let s = p.to_string_lossy().to_string();
        if !s.ends_with(".lens.ex") {
            continue;
        }
        let bytes = load(&p);
        let has_nan = bytes.windows(3).any(|w| w == b"nan");
        // Lens writes a span end after a span as `0-3-5`.
        let glued_spans = s.contains("r23_");
        match exfeed::lens::parse(&bytes) {
            // `{nan}` reads as a group named nan: loaded, but not as Lens meant.
            Ok(_) => {}
            Err(e) => assert!(has_nan || glued_spans, "{s}: {e}"),
        }
        n += 1;
    }
    assert!(n > 60);
}

#[test]
fn mutated_files_never_panic_and_what_loads_round_trips() {
    let Some(dir) = common::conformance("lens") else {
        return;
    };
    let seeds = [
        "examples/lens_dist/crazyxor.ex",
        "examples/lens_dist/jets-n-sharks.ex",
        "examples/lens_dist/rhw-sequence.tst.ex",
        "reference/crazyxor.lens.bex",
        "reference/jets-n-sharks.lens.bex",
    ];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let alphabet = b" \n\r\t;:[](){}*-.#\"0123456789eIiTtBb";
    let mut loaded = 0;
    for seed in seeds {
        let original = load(&dir.join(seed));
        // EXFEED_MUTATIONS raises the count for a longer soak.
        let count = std::env::var("EXFEED_MUTATIONS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1500);
        for _ in 0..count {
            let mut b = original.clone();
            for _ in 0..1 + rand() % 4 {
                let at = (rand() as usize) % b.len().max(1);
                match rand() % 4 {
                    0 => b.truncate(at),
                    1 if !b.is_empty() => b[at] = alphabet[(rand() as usize) % alphabet.len()],
                    2 => b.insert(
                        at.min(b.len()),
                        alphabet[(rand() as usize) % alphabet.len()],
                    ),
                    _ if !b.is_empty() => b[at] = rand() as u8,
                    _ => {}
                }
            }
            for set in [exfeed::lens::parse(&b).ok(), binary::read(&b).ok()]
                .into_iter()
                .flatten()
            {
                loaded += 1;
                let bex = binary::write(&set).unwrap();
                let again = binary::read(&bex).unwrap();
                assert!(binary::write(&again).unwrap() == bex);
                if let Ok(ex) = text::write(&set) {
                    let back = text::parse(&ex)
                        .unwrap_or_else(|e| panic!("{e}\n{}", String::from_utf8_lossy(&ex)));
                    // Text cannot say "B: for different events", so sharing may differ.
                    if !back.same_content(&set) {
                        let k = (0..set.examples.len().min(back.examples.len()))
                            .find(|&k| !set.examples[k].same_content(&back.examples[k]));
                        panic!(
                            "text round trip differs at {k:?}\n{:?}\n{:?}\n{:?}\n{:?}",
                            set.header,
                            back.header,
                            k.map(|k| &set.examples[k]),
                            k.map(|k| &back.examples[k])
                        );
                    }
                }
            }
        }
    }
    assert!(loaded > 100, "only {loaded} mutants loaded");
}

#[test]
fn pipe_mode_reads_every_example_file_as_whole_file_loading_does() {
    let Some(dir) = common::conformance("lens") else {
        return;
    };
    let mut paths = common::files_under(&dir.join("examples"));
    paths.push(dir.join("cases/p01_pipe_text.ex"));
    for p in paths {
        if p.extension().is_some_and(|e| e == "md") {
            continue;
        }
        let whole = exfeed::lens::parse(&load(&p)).unwrap();
        let lens = exfeed::OpenOptions {
            // Text or binary: the pipe reader tells them apart by the cookie.
            format: Some(exfeed::format::FileFormat::LensText),
            ..Default::default()
        };
        let mut r = exfeed::open(&p, &lens)
            .and_then(|d| d.lens_examples(false))
            .unwrap();
        let mut examples = Vec::new();
        while let Some(ex) = r.next_example().unwrap_or_else(|e| panic!("{e}")) {
            examples.push(ex);
        }
        let piped = exfeed::lens::ExampleSet {
            header: r.header().clone(),
            examples,
        };
        assert!(piped.same_content(&whole), "{}", p.display());
    }
}

#[test]
fn a_missing_name_is_retried_with_compression_suffixes() {
    let Some(dir) = common::conformance("lens") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(
        dir.join("examples/lens_dist/adder10.ex.gz"),
        tmp.path().join("a.ex.gz"),
    )
    .unwrap();
    let set = exfeed::io::load_lens(&InputPath::new(tmp.path().join("a.ex"))).unwrap();
    let direct = exfeed::lens::parse(&load(&dir.join("examples/lens_dist/adder10.ex.gz"))).unwrap();
    assert!(set.same_content(&direct));
    assert_eq!(set.examples.len(), 100);
    let e = exfeed::io::load_lens(&InputPath::new(tmp.path().join("missing.ex"))).unwrap_err();
    assert!(e.to_string().contains("missing.ex"), "{e}");
}

#[test]
fn save_picks_form_and_compression_by_name_and_loads_back() {
    let Some(dir) = common::conformance("lens") else {
        return;
    };
    let set = exfeed::lens::parse(&load(&dir.join("examples/lens_dist/crazyxor.ex"))).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let opts = exfeed::io::OutputOptions::default();
    for name in ["a.ex", "a.bex", "b.ex.gz", "b.bex.bz2"] {
        let p = tmp.path().join(name);
        exfeed::io::save_lens(&set, &p, false, &opts).unwrap();
        let raw = std::fs::read(&p).unwrap();
        let back = exfeed::io::load_lens(&InputPath::new(&p)).unwrap();
        assert!(back.same_content(&set), "{name}");
        let bytes = load(&p);
        assert_eq!(binary::is_binary(&bytes), name.contains(".bex"), "{name}");
        assert_eq!(
            raw != bytes,
            name.ends_with(".gz") || name.ends_with(".bz2"),
            "{name}"
        );
    }
    let reference = load(&dir.join("reference/crazyxor.lens.bex"));
    assert!(std::fs::read(tmp.path().join("a.bex")).unwrap() == reference);
    assert!(
        exfeed::io::save_lens(&set, &tmp.path().join("a.ex"), false, &opts).is_err(),
        "no clobber"
    );
}
