//! Lens example files through the minibatch reader: [`LensSource`] and Lens's selection modes.

mod common;

use exfeed::config::ReaderConfig;
use exfeed::configured::build_reader;
use exfeed::io::InputPath;
use exfeed::lens::materialize::{Layout, Materializer};
use exfeed::lens::model::{ExampleSet, RangeKind};
use exfeed::lens::select::SelectionMode;
use exfeed::options::{ChunkSize, ReadOptions};
use exfeed::reader::{ChunkSource, EpochLimit, Reader, ReaderOptions, ReaderState};
use exfeed::source::{LensSource, LensSourceOptions};
use exfeed::{Element, SequenceBatch};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A layout big enough for every range of `set`: each group as large as its ranges reach, and
/// a padding group when ungrouped ranges reach further than the groups' total.
fn layout_for(set: &ExampleSet) -> (Layout, Layout) {
    let mut reach: [BTreeMap<String, usize>; 2] = [BTreeMap::new(), BTreeMap::new()];
    let mut ungrouped = [0usize; 2];
    for ex in &set.examples {
        for e in &ex.events {
            for (side, list) in [(0, e.input), (1, e.target)] {
                let Some(list) = list.and_then(|l| ex.lists.get(l)) else {
                    continue;
                };
                for r in list {
                    let n = match &r.kind {
                        RangeKind::Dense { first, values } if !values.is_empty() => {
                            *first as usize + values.len()
                        }
                        RangeKind::Dense { .. } => 0,
                        RangeKind::Sparse { units, .. } => units
                            .spans()
                            .and_then(|s| s.iter().map(|&(_, b)| b as usize + 1).max())
                            .unwrap_or(0),
                    };
                    match &r.group {
                        Some(g) => {
                            let v = reach[side].entry(g.clone()).or_insert(1);
                            *v = (*v).max(n);
                        }
                        None => ungrouped[side] = ungrouped[side].max(n),
                    }
                }
            }
        }
    }
    let make = |side: usize| {
        let mut groups: Vec<(String, usize)> = reach[side].clone().into_iter().collect();
        let total: usize = groups.iter().map(|g| g.1).sum();
        if ungrouped[side] > total || groups.is_empty() {
            groups.push(("_pad".into(), ungrouped[side].saturating_sub(total).max(1)));
        }
        Layout { groups }
    };
    (make(0), make(1))
}

fn options(set: &ExampleSet, chunk_size: u64) -> LensSourceOptions {
    let (input_groups, target_groups) = layout_for(set);
    LensSourceOptions {
        input_groups,
        target_groups,
        read: ReadOptions::new().with_chunk_size(ChunkSize::Bytes(chunk_size)),
        ..LensSourceOptions::default()
    }
}

fn reader_options(mode: SelectionMode, seed: u64, limit: EpochLimit) -> ReaderOptions {
    let mut o = ReaderOptions {
        seed,
        limit,
        threads: 2,
        prefetch_chunks: 3,
        ..ReaderOptions::default()
    };
    mode.apply_to(&mut o);
    o
}

/// Every minibatch's (sweep, key) and the whole data, concatenated.
struct Read<T> {
    keys: Vec<(u64, u64)>,
    samples: Vec<usize>,
    mb_samples: Vec<usize>,
    data: SequenceBatch<T>,
}

fn read_all<T: Element>(reader: &mut Reader<T>, size: usize) -> Read<T> {
    let mut out = Read {
        keys: Vec::new(),
        samples: Vec::new(),
        mb_samples: Vec::new(),
        data: SequenceBatch::new(reader.streams()),
    };
    let mut mb = reader.new_minibatch();
    while reader.next_minibatch(size, &mut mb).unwrap() {
        out.mb_samples.push(mb.samples);
        for (i, s) in mb.sequences.iter().enumerate() {
            out.keys.push((s.sweep, s.key));
            out.samples.push(s.samples);
            out.data.push_sequence_from(&mb.data, i);
        }
    }
    out
}

fn bits<T: Element>(b: &SequenceBatch<T>) -> Vec<Vec<u64>> {
    b.streams()
        .iter()
        .map(|s| s.values().iter().map(|v| v.to_f64().to_bits()).collect())
        .collect()
}

#[test]
fn every_conformance_file_reads_in_order_as_loaded() {
    let Some(dir) = common::conformance("lens") else {
        return;
    };
    let (mut files_read, mut rejected) = (0, 0);
    let mut all = common::files_under(&dir.join("examples"));
    all.extend(common::files_under(&dir.join("reference")));
    all.extend(
        common::files_under(&dir.join("cases"))
            .into_iter()
            .filter(|p| {
                let n = p.to_string_lossy();
                n.ends_with(".ex") || n.ends_with(".bex")
            }),
    );
    for p in all {
        let name = p.to_string_lossy().to_string();
        if !(name.ends_with(".ex")
            || name.ends_with(".bex")
            || name.ends_with(".ex.gz")
            || name.ends_with(".bex.gz"))
        {
            continue;
        }
        let input = InputPath::new(&p);
        let set = match exfeed::io::load_lens(&input) {
            Ok(set) => set,
            Err(e) => {
                // What the whole-file loader rejects, the reader rejects too, with the same
                // message: when opening (the examples' structure), or when the chunk holding
                // the bad example is decoded (its numbers, which opening passes over).
                let ours = match LensSource::open(&input, &[], rejecting_options()) {
                    Err(ours) => vec![ours.to_string()],
                    Ok(source) => chunk_errors(&source),
                };
                assert!(ours.contains(&e.to_string()), "{name}: {e} not in {ours:?}");
                rejected += 1;
                continue;
            }
        };
        // Small chunks, so that most files have several.
        let opts = options(&set, 200);
        let source =
            LensSource::open(&input, &[], opts.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(source.len(), set.examples.len(), "{name}");
        let freqs: Vec<u32> = set.examples.iter().map(|e| e.frequency.to_bits()).collect();
        let got_freqs: Vec<u32> = source.frequencies().iter().map(|f| f.to_bits()).collect();
        assert_eq!(got_freqs, freqs, "{name}");
        let source: Arc<dyn ChunkSource<f32>> = Arc::new(source);
        let mut reader = Reader::new(
            source,
            reader_options(SelectionMode::Ordered, 0, EpochLimit::Sweeps(1)),
        )
        .unwrap();
        let got = read_all(&mut reader, 5);
        // The same as materializing the loaded set, example by example, in file order.
        let mut m = Materializer::new(opts.input_groups.clone(), opts.target_groups.clone());
        let mut want = SequenceBatch::<f32>::new(reader.streams());
        let mut diags: Vec<exfeed::Diagnostic> = Vec::new();
        for (k, ex) in set.examples.iter().enumerate() {
            m.push_example_as(ex, k as u64, None, true, &mut want, &mut diags)
                .unwrap();
        }
        let keys: Vec<(u64, u64)> = (0..set.examples.len() as u64).map(|k| (0, k)).collect();
        assert_eq!(got.keys, keys, "{name}: every example once, in file order");
        let events: Vec<usize> = set.examples.iter().map(|e| e.events.len()).collect();
        assert_eq!(got.samples, events, "{name}: one sample per event");
        assert_eq!(got.data.keys(), want.keys(), "{name}");
        assert_eq!(bits(&got.data), bits(&want), "{name}: values");
        assert!(got.mb_samples.iter().all(|&n| n > 0), "{name}");
        files_read += 1;
    }
    assert!(files_read > 100, "only {files_read} files read");
    assert!(rejected > 10, "only {rejected} rejected");
}

/// For a file that does not load: one example a chunk, and groups wide enough for the small
/// files of the conformance cases.
fn rejecting_options() -> LensSourceOptions {
    LensSourceOptions {
        input_groups: Layout::parse("in:4096").unwrap(),
        target_groups: Layout::parse("out:4096").unwrap(),
        read: ReadOptions::new().with_chunk_size(ChunkSize::Bytes(1)),
        ..LensSourceOptions::default()
    }
}

/// The errors of decoding each chunk of `source`.
fn chunk_errors(source: &LensSource) -> Vec<String> {
    let mut batch = SequenceBatch::<f32>::new(ChunkSource::<f32>::streams(source));
    (0..ChunkSource::<f32>::chunks(source).len())
        .filter_map(|c| {
            batch.clear();
            source
                .read_chunk(c, &mut batch)
                .err()
                .map(|e| e.to_string())
        })
        .collect()
}

/// A text set of `n` examples: example k has k % 3 + 1 events, inputs (k, event) and target k,
/// and frequency `freq(k)`.
fn generated(dir: &Path, n: usize, freq: impl Fn(usize) -> f32) -> PathBuf {
    let mut s = String::from("defT:0;\n");
    for k in 0..n {
        let events = k % 3 + 1;
        s.push_str(&format!("name: e{k} freq: {} {events}\n", freq(k)));
        for e in 0..events {
            s.push_str(&format!("[{e}] I: {k} {e} T: {k}\n"));
        }
        s.push_str(";\n");
    }
    let p = dir.join("gen.ex");
    std::fs::write(&p, s).unwrap();
    p
}

fn generated_source(p: &Path, chunk_size: u64, mode: SelectionMode) -> Arc<dyn ChunkSource<f32>> {
    let opts = LensSourceOptions {
        input_groups: Layout::parse("a:2").unwrap(),
        target_groups: Layout::parse("t:1").unwrap(),
        read: ReadOptions::new().with_chunk_size(ChunkSize::Bytes(chunk_size)),
        use_frequencies: mode.uses_frequencies(),
        ..LensSourceOptions::default()
    };
    let s = LensSource::open(&InputPath::new(p), &[], opts).unwrap();
    mode.check_frequencies(s.frequencies()).unwrap();
    assert!(
        ChunkSource::<f32>::chunks(&s).len() > 5,
        "several chunks to test with"
    );
    Arc::new(s)
}

fn by_sweep(keys: &[(u64, u64)]) -> BTreeMap<u64, Vec<u64>> {
    let mut m: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for &(s, k) in keys {
        m.entry(s).or_default().push(k);
    }
    m
}

#[test]
fn ordered_and_binary_give_file_order_with_samples_per_event() {
    let dir = tempfile::tempdir().unwrap();
    let p = generated(dir.path(), 40, |_| 1.0);
    // The same set as .bex, and gzipped .bex (decompressed into memory).
    let set = exfeed::io::load_lens(&InputPath::new(&p)).unwrap();
    let bex = dir.path().join("gen.bex");
    let bexgz = dir.path().join("gen.bex.gz");
    let out = exfeed::io::OutputOptions::default();
    exfeed::io::save_lens(&set, &bex, true, &out).unwrap();
    exfeed::io::save_lens(&set, &bexgz, true, &out).unwrap();
    let mut reads = Vec::new();
    for file in [&p, &bex, &bexgz] {
        let source = generated_source(file, 64, SelectionMode::Ordered);
        let mut r = Reader::new(
            source,
            reader_options(SelectionMode::Ordered, 3, EpochLimit::Sweeps(2)),
        )
        .unwrap();
        let got = read_all(&mut r, 4);
        let want: Vec<(u64, u64)> = (0..2).flat_map(|s| (0..40).map(move |k| (s, k))).collect();
        assert_eq!(got.keys, want, "{}", file.display());
        let events: Vec<usize> = (0..80).map(|i| i % 40 % 3 + 1).collect();
        assert_eq!(got.samples, events);
        // Inputs (k, event), target k.
        let input = got.data.streams()[0].values();
        assert_eq!(&input[..4], &[0.0, 0.0, 1.0, 0.0]);
        assert_eq!(&input[4..10], &[1.0, 1.0, 2.0, 0.0, 2.0, 1.0]);
        reads.push(bits(&got.data));
    }
    assert_eq!(reads[0], reads[1], "text and binary read the same");
    assert_eq!(reads[1], reads[2], "compressed too");
}

fn permuted_keys(source: &Arc<dyn ChunkSource<f32>>, seed: u64) -> Vec<(u64, u64)> {
    let mut r = Reader::new(
        source.clone(),
        reader_options(SelectionMode::Permuted, seed, EpochLimit::Sweeps(3)),
    )
    .unwrap();
    read_all(&mut r, 6).keys
}

#[test]
fn permuted_is_a_new_permutation_each_sweep_and_seeded() {
    let dir = tempfile::tempdir().unwrap();
    let p = generated(dir.path(), 60, |_| 1.0);
    let source = generated_source(&p, 64, SelectionMode::Permuted);
    let keys = permuted_keys(&source, 11);
    let sweeps = by_sweep(&keys);
    assert_eq!(sweeps.len(), 3);
    let all: Vec<u64> = (0..60).collect();
    for order in sweeps.values() {
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, all, "each sweep has every example once");
        assert_ne!(order, &all, "not file order");
    }
    assert_ne!(sweeps[&0], sweeps[&1]);
    assert_ne!(sweeps[&1], sweeps[&2]);
    assert_eq!(permuted_keys(&source, 11), keys, "same seed, same order");
    assert_ne!(
        permuted_keys(&source, 12),
        keys,
        "another seed, another order"
    );
}

#[test]
fn randomized_draws_with_replacement_deterministically() {
    let dir = tempfile::tempdir().unwrap();
    let p = generated(dir.path(), 50, |k| if k == 7 { 0.0 } else { 1.0 });
    let source = generated_source(&p, 64, SelectionMode::Randomized);
    let read = |seed| {
        let mut r = Reader::new(
            source.clone(),
            reader_options(SelectionMode::Randomized, seed, EpochLimit::Sweeps(40)),
        )
        .unwrap();
        read_all(&mut r, 8).keys
    };
    let keys = read(5);
    assert_eq!(keys, read(5), "deterministic with a fixed seed");
    let sweeps = by_sweep(&keys);
    assert_eq!(sweeps.len(), 40);
    let first = &sweeps[&0];
    assert_eq!(first.len(), 50, "as many draws as examples per sweep");
    let distinct: BTreeSet<u64> = first.iter().copied().collect();
    assert!(distinct.len() < 50, "with replacement: repeats in a sweep");
    // Uniform, frequencies ignored: example 7 (freq 0) is drawn too, and all are seen.
    let mut counts = [0usize; 50];
    for &(_, k) in &keys {
        counts[k as usize] += 1;
    }
    assert!(counts[7] > 0, "RANDOMIZED ignores frequencies");
    // 2000 draws, 40 expected per example.
    assert!(counts.iter().all(|&c| (15..=70).contains(&c)), "{counts:?}");
}

#[test]
fn probabilistic_draws_by_frequency() {
    let dir = tempfile::tempdir().unwrap();
    let freq = |k: usize| [1.0, 0.0, 3.0, 6.0][k % 4];
    let p = generated(dir.path(), 40, freq);
    let source = generated_source(&p, 64, SelectionMode::Probabilistic);
    let read = |seed| {
        let mut r = Reader::new(
            source.clone(),
            reader_options(SelectionMode::Probabilistic, seed, EpochLimit::Sweeps(500)),
        )
        .unwrap();
        read_all(&mut r, 16).keys
    };
    let keys = read(9);
    assert_eq!(keys, read(9), "deterministic with a fixed seed");
    assert_eq!(keys.len(), 40 * 500);
    let mut by_freq = [0usize; 4];
    for &(_, k) in &keys {
        by_freq[k as usize % 4] += 1;
    }
    assert_eq!(by_freq[1], 0, "frequency 0 is never drawn");
    // Expected shares 0.1, 0, 0.3, 0.6 of 20000 draws (standard deviation below 70).
    let share = |i: usize| by_freq[i] as f64 / keys.len() as f64;
    assert!((share(0) - 0.1).abs() < 0.015, "{by_freq:?}");
    assert!((share(2) - 0.3).abs() < 0.015, "{by_freq:?}");
    assert!((share(3) - 0.6).abs() < 0.015, "{by_freq:?}");
}

#[test]
fn probabilistic_refuses_bad_frequencies() {
    let dir = tempfile::tempdir().unwrap();
    let p = generated(dir.path(), 5, |_| 0.0);
    let s = LensSource::open(
        &InputPath::new(&p),
        &[],
        LensSourceOptions {
            input_groups: Layout::parse("a:2").unwrap(),
            target_groups: Layout::parse("t:1").unwrap(),
            ..LensSourceOptions::default()
        },
    )
    .unwrap();
    let e = SelectionMode::Probabilistic
        .check_frequencies(s.frequencies())
        .unwrap_err();
    assert!(e.to_string().contains("frequency 0"), "{e}");
    SelectionMode::Randomized
        .check_frequencies(s.frequencies())
        .unwrap();
}

#[test]
fn checkpoints_resume_exactly_in_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let p = generated(dir.path(), 45, |k| (k % 5) as f32);
    for mode in [
        SelectionMode::Ordered,
        SelectionMode::Permuted,
        SelectionMode::Randomized,
        SelectionMode::Probabilistic,
    ] {
        let source = generated_source(&p, 64, mode);
        let opts = reader_options(mode, 21, EpochLimit::Sweeps(3));
        let whole = read_all(&mut Reader::new(source.clone(), opts.clone()).unwrap(), 7);
        for stop in [1usize, 6, 13] {
            let mut first = Reader::new(source.clone(), opts.clone()).unwrap();
            let mut mb = first.new_minibatch();
            let mut before = 0;
            for _ in 0..stop {
                assert!(first.next_minibatch(7, &mut mb).unwrap());
                before += mb.len();
            }
            let state = ReaderState::from_json(&first.state().to_json()).unwrap();
            let mut again = Reader::restore(source.clone(), opts.clone(), &state).unwrap();
            let rest = read_all(&mut again, 7);
            assert_eq!(rest.keys, whole.keys[before..], "{mode:?} stop {stop}");
            let rest_first = read_all(&mut first, 7);
            assert_eq!(bits(&rest.data), bits(&rest_first.data), "{mode:?}");
        }
        // The state remembers the mode: restoring into any other one is refused.
        let state = Reader::new(source.clone(), opts.clone()).unwrap().state();
        for other in [
            SelectionMode::Ordered,
            SelectionMode::Permuted,
            SelectionMode::Randomized,
            SelectionMode::Probabilistic,
        ] {
            let restored = Reader::restore(
                generated_source(&p, 64, other),
                reader_options(other, 21, EpochLimit::Sweeps(3)),
                &state,
            );
            assert_eq!(restored.is_ok(), other == mode, "{mode:?} into {other:?}");
        }
    }
}

#[test]
fn workers_are_disjoint_and_complete() {
    let dir = tempfile::tempdir().unwrap();
    let p = generated(dir.path(), 70, |_| 1.0);
    for mode in [SelectionMode::Ordered, SelectionMode::Permuted] {
        let source = generated_source(&p, 64, mode);
        let mut per_sweep: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for rank in 0..3 {
            let mut o = reader_options(mode, 4, EpochLimit::Sweeps(2));
            o.num_workers = 3;
            o.worker_rank = rank;
            let got = read_all(&mut Reader::new(source.clone(), o).unwrap(), 5);
            assert!(!got.keys.is_empty(), "{mode:?}: worker {rank} has a part");
            for (s, k) in got.keys {
                per_sweep.entry(s).or_default().push(k);
            }
        }
        assert_eq!(per_sweep.len(), 2);
        for keys in per_sweep.values_mut() {
            keys.sort_unstable();
            assert_eq!(*keys, (0..70).collect::<Vec<_>>(), "{mode:?}");
        }
    }
}

#[test]
fn configured_lens_deserializer_reads_in_double_precision() {
    let dir = tempfile::tempdir().unwrap();
    let p = generated(dir.path(), 12, |k| k as f32);
    let cfg_path = dir.path().join("r.cfg");
    std::fs::write(
        &cfg_path,
        format!(
            "reader = [\n lensMode = ordered\n precision = double\n deserializers = ([\n  \
             type = LensDeserializer\n  file = \"{}\"\n  inputGroups = \"a:2\"\n  \
             targetGroups = \"t:1\"\n  nanValue = -1\n  chunkSizeInBytes = 50\n  input = [\n   features = [ alias = input ]\n   \
             labels = [ alias = target ; dim = 1 ; format = dense ]\n  ]\n ])\n]\n",
            p.display()
        ),
    )
    .unwrap();
    let cfg = ReaderConfig::from_file(&cfg_path, None).unwrap();
    assert_eq!(cfg.lens_mode, Some(SelectionMode::Ordered));
    let (mut reader, source) = build_reader::<f64>(&cfg, EpochLimit::Sweeps(1)).unwrap();
    assert_eq!(source.lens_sources().len(), 1);
    let names: Vec<&str> = reader.streams().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["features", "labels"]);
    let got = read_all(&mut reader, 3);
    assert_eq!(
        got.keys,
        (0..12).map(|k| (0, k)).collect::<Vec<_>>(),
        "ORDERED"
    );
    assert_eq!(got.data.streams()[1].values()[0], 0.0);

    // Conflicts and missing pieces are positioned configuration errors.
    let bad = |body: &str| {
        let f = dir.path().join("bad.cfg");
        std::fs::write(&f, body).unwrap();
        match ReaderConfig::from_file(&f, None) {
            Err(e) => e.to_string(),
            Ok(cfg) => match build_reader::<f32>(&cfg, EpochLimit::Sweeps(1)) {
                Err(e) => e.to_string(),
                Ok(_) => panic!("accepted: {body}"),
            },
        }
    };
    let file = p.display().to_string();
    let e = bad(&format!(
        "reader = [ readerType = LensReader ; file = \"{file}\" ; lensMode = permuted ; randomize = false ; inputGroups = \"a:2\" ; targetGroups = \"t:1\" ]"
    ));
    assert!(e.contains("lensMode decides"), "{e}");
    let e = bad(&format!(
        "reader = [ readerType = LensReader ; file = \"{file}\" ; lensMode = sideways ]"
    ));
    assert!(e.contains("lensMode"), "{e}");
    let e = bad(&format!(
        "reader = [ readerType = LensReader ; file = \"{file}\" ]"
    ));
    assert!(e.contains("inputGroups and targetGroups"), "{e}");
    let e = bad(&format!(
        "reader = [ readerType = CNTKTextFormatReader ; file = \"{file}\" ; inputGroups = \"a:2\" ; input = [ x = [ dim = 1 ; format = dense ] ] ]"
    ));
    assert!(e.contains("applies to Lens"), "{e}");
    let e = bad(&format!(
        "reader = [ readerType = LensReader ; file = \"{file}\" ; inputGroups = \"a:2\" ; targetGroups = \"t:1\" ; input = [ x = [ dim = 3 ; format = dense ; alias = input ] ; y = [ alias = target ] ] ]"
    ));
    assert!(e.contains("dim 2"), "{e}");
}

#[test]
fn a_lens_file_joins_a_ctf_file_by_example_index() {
    let dir = tempfile::tempdir().unwrap();
    let p = generated(dir.path(), 6, |_| 1.0);
    // CTF sequences keyed 0..6 in reverse order, with one key (3) missing.
    let ctf = dir.path().join("y.ctf");
    let mut text = String::new();
    for k in (0..6).rev().filter(|&k| k != 3) {
        text.push_str(&format!("{k} |y {}\n", 10 * k));
    }
    std::fs::write(&ctf, text).unwrap();
    let cfg_path = dir.path().join("j.cfg");
    std::fs::write(
        &cfg_path,
        format!(
            "reader = [\n randomize = false\n deserializers = (\n  [ type = LensDeserializer ; file = \"{}\" ; \
             inputGroups = \"a:2\" ; targetGroups = \"t:1\" ]\n  : [ type = CNTKTextFormatDeserializer ; \
             file = \"{}\" ; input = [ y = [ dim = 1 ; format = dense ] ] ]\n )\n]\n",
            p.display(),
            ctf.display()
        ),
    )
    .unwrap();
    let cfg = ReaderConfig::from_file(&cfg_path, None).unwrap();
    let (mut reader, source) = build_reader::<f32>(&cfg, EpochLimit::Sweeps(1)).unwrap();
    let names: Vec<&str> = reader.streams().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["input", "target", "y"]);
    let got = read_all(&mut reader, 4);
    let keys: Vec<u64> = got.keys.iter().map(|k| k.1).collect();
    assert_eq!(
        keys,
        [0, 1, 2, 4, 5],
        "file order of the Lens file, key 3 dropped"
    );
    // y's one sample per sequence sits beside the example's events (y has 1 sample, the
    // example k % 3 + 1).
    let y = got.data.streams()[2].values();
    assert_eq!(y, &[0.0, 10.0, 20.0, 40.0, 50.0]);
    assert!(source.diagnostics().iter().any(|d| d.message.contains('3')));
}

#[test]
fn truncated_files_are_refused_exactly_when_the_loader_refuses_them() {
    let dir = tempfile::tempdir().unwrap();
    let p = generated(dir.path(), 6, |k| k as f32);
    let set = exfeed::io::load_lens(&InputPath::new(&p)).unwrap();
    let text = std::fs::read(&p).unwrap();
    let bex = exfeed::lens::binary::write(&set).unwrap();
    for (full, ext) in [(&text, "ex"), (&bex, "bex")] {
        let f = dir.path().join(format!("t.{ext}"));
        for cut in 0..full.len() {
            std::fs::write(&f, &full[..cut]).unwrap();
            let input = InputPath::new(&f);
            let loaded = exfeed::io::load_lens(&input);
            let opts = LensSourceOptions {
                input_groups: Layout::parse("a:2").unwrap(),
                target_groups: Layout::parse("t:1").unwrap(),
                read: ReadOptions::new().with_chunk_size(ChunkSize::Bytes(30)),
                ..LensSourceOptions::default()
            };
            match (LensSource::open(&input, &[], opts), loaded) {
                (Ok(s), Ok(set)) => assert_eq!(s.len(), set.examples.len(), "{ext} cut {cut}"),
                // Positioned, unless the whole file is the place (shorter than 4 bytes).
                (Err(e), Err(_)) => assert_eq!(
                    e.location().byte.is_some(),
                    cut >= 4,
                    "{ext} cut {cut}: {e}"
                ),
                (Ok(_), Err(e)) => panic!("{ext} cut {cut}: only the loader refuses: {e}"),
                (Err(e), Ok(_)) => panic!("{ext} cut {cut}: only indexing refuses: {e}"),
            }
        }
    }
}

#[test]
fn nan_stays_nan_unless_a_value_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("n.ex");
    std::fs::write(&p, "defT:-;\nI: 1 - T: (1) 0;\nI: - 2;\n").unwrap();
    let read = |nan: Option<f32>| {
        let opts = LensSourceOptions {
            input_groups: Layout::parse("a:2").unwrap(),
            target_groups: Layout::parse("t:2").unwrap(),
            nan,
            ..LensSourceOptions::default()
        };
        let source: Arc<dyn ChunkSource<f64>> =
            Arc::new(LensSource::open(&InputPath::new(&p), &[], opts).unwrap());
        let mut r = Reader::new(
            source,
            reader_options(SelectionMode::Ordered, 0, EpochLimit::Sweeps(1)),
        )
        .unwrap();
        let got = read_all(&mut r, 10);
        let s = got.data.streams();
        (s[0].values().to_vec(), s[1].values().to_vec())
    };
    let (i, t) = read(None);
    assert_eq!(i[0], 1.0);
    assert!(i[1].is_nan() && i[2].is_nan());
    assert_eq!(i[3], 2.0);
    // The default target is NaN; the first example sets unit 1 to 0.
    assert!(t[0].is_nan() && t[2].is_nan() && t[3].is_nan());
    assert_eq!(t[1], 0.0);
    let (i, t) = read(Some(-7.0));
    assert_eq!(i, [1.0, -7.0, -7.0, 2.0]);
    assert_eq!(t, [-7.0, 0.0, -7.0, -7.0]);
}
