//! Reading CTF without an index (`IndexMode::None`: chunks are byte ranges resolved when
//! decoded) gives the same sequences as the full index, each exactly once: for generated files
//! and CNTK's conformance files, for many chunk sizes, decoded chunk by chunk and through the
//! reader split between workers; and checkpoints keep their meaning.

mod common;

use exfeed::config::ReaderConfig;
use exfeed::configured::open_configured_source;
use exfeed::ctf::CtfOptions;
use exfeed::io::InputPath;
use exfeed::options::{ChunkSize, ReadOptions};
use exfeed::reader::{ChunkSource, EpochLimit, Reader, ReaderOptions, ReaderState, Window};
use exfeed::source::{CtfSource, CtfSourceOptions, IndexMode, IndexOrigin};
use exfeed::{Element, SequenceBatch, Storage, StreamSpec};
use std::path::Path;
use std::sync::Arc;

/// Every sequence of `b`, as text: its key and each stream's samples.
fn sequences<T: Element>(b: &SequenceBatch<T>) -> Vec<String> {
    (0..b.len())
        .map(|s| {
            let mut out = format!("{}:", b.keys()[s]);
            for st in b.streams() {
                for i in st.sequence_samples(s) {
                    match st.storage() {
                        Storage::Dense => out += &format!(" {:?}", st.dense_sample(i)),
                        Storage::Sparse => out += &format!(" {:?}", st.sparse_sample(i)),
                    }
                }
                out += " |";
            }
            out
        })
        .collect()
}

/// Every chunk of `source` decoded, the sequences sorted (or the first error).
fn decode_all<T: Element>(source: &dyn ChunkSource<T>) -> exfeed::Result<Vec<String>> {
    let mut all = Vec::new();
    let mut b = SequenceBatch::new(source.streams());
    for c in 0..source.chunks().len() {
        b.clear();
        source.read_chunk(c, &mut b)?;
        all.extend(sequences(&b));
    }
    all.sort();
    Ok(all)
}

fn specs() -> Vec<StreamSpec> {
    vec![
        StreamSpec::new("x", Storage::Dense, 2),
        StreamSpec::new("y", Storage::Sparse, 50),
    ]
}

fn options(chunk: u64, index: IndexMode) -> CtfSourceOptions {
    CtfSourceOptions {
        ctf: CtfOptions {
            inputs: specs(),
            ..CtfOptions::default()
        },
        read: ReadOptions::new()
            .with_chunk_size(ChunkSize::Bytes(chunk))
            .with_index(index),
    }
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A valid CTF file: sequences of 1 to 4 lines with ids (repeated on every line, or only on the
/// first), blank lines at the start, `\r\n` or `\n`, a dense and a sparse stream.
fn generate(rng: &mut Rng, sequences: u64) -> String {
    let mut t = String::new();
    for _ in 0..rng.below(3) {
        t += ["\n", " \r\n"][rng.below(2) as usize];
    }
    let mut id = rng.below(5);
    for _ in 0..sequences {
        id += 1 + rng.below(100);
        for l in 0..1 + rng.below(4) {
            if l == 0 || rng.below(2) == 0 {
                t += &format!("{}{id} ", [" ", "", "\t"][rng.below(3) as usize]);
            }
            t += &format!("|x {} {}", rng.below(100), rng.below(100));
            if l == 0 || rng.below(2) == 0 {
                t += &format!(" |y {}:{}", rng.below(50), rng.below(9));
            }
            t += ["\n", "\r\n"][rng.below(2) as usize];
        }
    }
    t
}

#[test]
fn generated_files_give_the_same_sequences_with_and_without_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.ctf");
    let mut rng = Rng(0x5eed);
    for case in 0..40 {
        let n = 1 + rng.below(60);
        let text = generate(&mut rng, n);
        std::fs::write(&path, &text).unwrap();
        let input = InputPath::new(&path);
        let full = CtfSource::open(&input, options(1 << 20, IndexMode::Full)).unwrap();
        let want = decode_all::<f32>(&full).unwrap();
        assert_eq!(want.len(), full.num_sequences().unwrap());
        for chunk in [1, 3, 8, 20, 33, 64, 100, 250, 1000, 1 << 20] {
            let none = CtfSource::open(&input, options(chunk, IndexMode::None)).unwrap();
            assert_eq!(none.index_origin(), IndexOrigin::ByteRanges);
            assert_eq!(
                decode_all::<f32>(&none).unwrap(),
                want,
                "case {case}, chunk size {chunk}:\n{text}"
            );
            // The same from memory (as a compressed file or standard input is read).
            let memory = InputPath::Memory {
                name: "m.ctf".into(),
                bytes: Arc::from(text.as_bytes()),
            };
            let none = CtfSource::open(&memory, options(chunk, IndexMode::None)).unwrap();
            assert_eq!(
                decode_all::<f32>(&none).unwrap(),
                want,
                "case {case} {chunk}"
            );
        }
    }
}

/// The sequences each of `workers` readers delivers in one sweep, all together, sorted; and
/// checks that no worker delivered a sequence twice.
fn read_by_workers(
    source: Arc<dyn ChunkSource<f32>>,
    workers: usize,
    threads: usize,
) -> Vec<String> {
    let mut all = Vec::new();
    for rank in 0..workers {
        let options = ReaderOptions {
            seed: 3,
            window: Window::Chunks(2),
            num_workers: workers,
            worker_rank: rank,
            threads,
            prefetch_chunks: 3,
            ..ReaderOptions::default()
        };
        let mut reader = Reader::new(source.clone(), options).unwrap();
        reader
            .run(7, None, |mb| {
                all.extend(sequences(&mb.data));
                Ok(())
            })
            .unwrap();
    }
    all.sort();
    all
}

#[test]
fn workers_read_every_sequence_once_without_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.ctf");
    let mut rng = Rng(77);
    std::fs::write(&path, generate(&mut rng, 300)).unwrap();
    let input = InputPath::new(&path);
    let full = CtfSource::open(&input, options(1 << 20, IndexMode::Full)).unwrap();
    let want = decode_all::<f32>(&full).unwrap();
    for chunk in [5, 40, 300, 2000] {
        let none: Arc<dyn ChunkSource<f32>> =
            Arc::new(CtfSource::open(&input, options(chunk, IndexMode::None)).unwrap());
        assert!(none.chunks_by_byte_range());
        for workers in [1, 2, 3, 8] {
            for threads in [0, 2] {
                assert_eq!(
                    read_by_workers(none.clone(), workers, threads),
                    want,
                    "chunk size {chunk}, {workers} workers, {threads} threads"
                );
            }
        }
    }
}

#[test]
fn checkpoints_resume_exactly_and_name_the_index_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.ctf");
    let mut rng = Rng(5);
    std::fs::write(&path, generate(&mut rng, 200)).unwrap();
    let input = InputPath::new(&path);
    let open = |index| -> Arc<dyn ChunkSource<f32>> {
        Arc::new(CtfSource::open(&input, options(300, index)).unwrap())
    };
    let none = open(IndexMode::None);
    let o = ReaderOptions {
        seed: 9,
        window: Window::Samples(40),
        num_workers: 2,
        worker_rank: 1,
        limit: EpochLimit::Sweeps(2),
        threads: 1,
        ..ReaderOptions::default()
    };
    let mut whole = Vec::new();
    Reader::new(none.clone(), o.clone())
        .unwrap()
        .run(5, None, |mb| {
            whole.push(sequences(&mb.data));
            Ok(())
        })
        .unwrap();
    let mut first = Reader::new(none.clone(), o.clone()).unwrap();
    let mut got = Vec::new();
    first
        .run(5, Some(9), |mb| {
            got.push(sequences(&mb.data));
            Ok(())
        })
        .unwrap();
    let state = ReaderState::from_json(&first.state().to_json()).unwrap();
    assert!(state.byte_ranges);
    let mut resumed = Reader::restore(open(IndexMode::None), o.clone(), &state).unwrap();
    resumed
        .run(5, None, |mb| {
            got.push(sequences(&mb.data));
            Ok(())
        })
        .unwrap();
    assert_eq!(got, whole);
    // With the full index the chunks are others: refused, saying why.
    let err = Reader::restore(open(IndexMode::Full), o, &state)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("chunks as byte ranges without an index"),
        "{err}"
    );
}

/// (config, section) of CNTK's reader tests over CTF files (conformance/cntk/config).
const SECTIONS: &[(&str, &str)] = &[
    ("dense.cntk", "Simple"),
    ("dense.cntk", "MNIST"),
    ("dense.cntk", "1x1"),
    ("dense.cntk", "1x2"),
    ("dense.cntk", "1x10"),
    ("dense.cntk", "10x1_MI"),
    ("dense.cntk", "10x10"),
    ("dense.cntk", "100x1"),
    ("dense.cntk", "50x20_jagged_sequences"),
    ("sparse.cntk", "1x2"),
    ("sparse.cntk", "10x10"),
    ("sparse.cntk", "3x5_MI"),
    ("sparse.cntk", "20x10_MI_jagged_samples"),
    ("sparse.cntk", "50x20_jagged_sequences"),
    ("sparse.cntk", "100x100_jagged"),
    ("edge_cases.cntk", "space_separated"),
    ("edge_cases.cntk", "empty_samples"),
    ("edge_cases.cntk", "ref_data_with_escape_sequences"),
];

fn conformance_sequences(
    dir: &Path,
    config: &str,
    section: &str,
    chunk: u64,
    index: IndexMode,
) -> exfeed::Result<Vec<String>> {
    let mut cfg = ReaderConfig::from_cntk_file(dir.join("config").join(config), Some(section))?;
    cfg.resolve_files(&dir.join("ctf"));
    // At most a thousand chunks a file (the tests run unoptimized).
    let size = std::fs::metadata(&cfg.deserializers[0].file)?.len();
    let read = ReadOptions::new()
        .with_chunk_size(ChunkSize::Bytes(chunk.max(size / 1000)))
        .with_index(index);
    cfg.read = read.over(&cfg.read);
    for d in &mut cfg.deserializers {
        d.read = read.over(&d.read);
    }
    let source = open_configured_source::<f64>(&cfg)?;
    let text = std::fs::read(&cfg.deserializers[0].file)?;
    let by_lines = exfeed::ctf::detect_key_mode(&text, cfg.skip_sequence_ids)
        == Some(exfeed::ctf::KeyMode::Lines);
    // Without ids the index keys a line by its number, byte ranges by its offset (and auto
    // takes the index for such a file): the full index's keys turned into offsets.
    assert_eq!(
        source.source.chunks_by_byte_range(),
        index == IndexMode::None || (index == IndexMode::Auto && !by_lines)
    );
    let mut got = decode_all(&*source.source)?;
    if by_lines && !source.source.chunks_by_byte_range() {
        let mut starts = vec![0];
        starts.extend(memchr_lines(&text));
        for s in &mut got {
            let (key, rest) = s.split_once(':').unwrap();
            *s = format!("{}:{rest}", starts[key.parse::<usize>().unwrap()]);
        }
        got.sort();
    }
    Ok(got)
}

/// The offsets where the second and later lines of `text` start.
fn memchr_lines(text: &[u8]) -> impl Iterator<Item = usize> + '_ {
    text.iter()
        .enumerate()
        .filter(|(_, &b)| b == b'\n')
        .map(|(i, _)| i + 1)
}

/// The first sequence where `got` and `want` differ (the lists are long).
fn first_difference(got: &[String], want: &[String]) -> Option<String> {
    if let Some((g, w)) = got.iter().zip(want).find(|(g, w)| g != w) {
        return Some(format!("{g} against {w}"));
    }
    (got.len() != want.len()).then(|| format!("{} sequences against {}", got.len(), want.len()))
}

#[test]
fn conformance_files_give_the_same_sequences_with_and_without_an_index() {
    let Some(dir) = common::conformance("cntk") else {
        return;
    };
    for &(config, section) in SECTIONS {
        let want = conformance_sequences(&dir, config, section, 1 << 25, IndexMode::Full);
        for (chunk, index) in [1, 5, 50, 1000, 1 << 25]
            .into_iter()
            .flat_map(|c| [(c, IndexMode::None), (c, IndexMode::Auto)])
        {
            let got = conformance_sequences(&dir, config, section, chunk, index);
            match (&got, &want) {
                (Ok(g), Ok(w)) => assert_eq!(
                    first_difference(g, w),
                    None,
                    "{config} [{section}] chunk size {chunk} {index}"
                ),
                (Err(_), Err(_)) => {}
                _ => panic!("{config} [{section}] chunk size {chunk}: {got:?} against {want:?}"),
            }
        }
        assert!(want.is_ok_and(|w| !w.is_empty()), "{config} [{section}]");
    }
}

#[test]
fn auto_takes_the_index_only_when_something_needs_it() {
    let dir = tempfile::tempdir().unwrap();
    let ids = dir.path().join("ids.ctf");
    std::fs::write(&ids, "1 |x 1 2 |y 1:1\n2 |x 3 4 |y 2:1\n").unwrap();
    let lines = dir.path().join("lines.ctf");
    std::fs::write(&lines, "|x 1 2 |y 1:1\n|x 3 4 |y 2:1\n").unwrap();
    let origin = |path: &Path, o: CtfSourceOptions| {
        CtfSource::open(&InputPath::new(path), o)
            .unwrap()
            .index_origin()
    };
    let auto = options(1 << 20, IndexMode::Auto);
    assert_eq!(origin(&ids, auto.clone()), IndexOrigin::ByteRanges);
    // Keys of a file without ids are line numbers: they need the index.
    assert_eq!(origin(&lines, auto.clone()), IndexOrigin::Scanned);
    let mut errors = auto.clone();
    errors.ctf.max_errors = 3;
    assert_eq!(origin(&ids, errors), IndexOrigin::Scanned);
    let cached = CtfSourceOptions {
        read: auto.read.clone().with_cache_index(true),
        ..auto.clone()
    };
    assert_eq!(origin(&ids, cached.clone()), IndexOrigin::ScannedAndCached);
    assert_eq!(origin(&ids, cached), IndexOrigin::Cache);
    // Asked for: none keys the lines of a file without ids by their byte offsets.
    let none = CtfSource::open(&InputPath::new(&lines), options(5, IndexMode::None)).unwrap();
    let got = decode_all::<f32>(&none).unwrap();
    assert_eq!(
        got,
        [
            "0: [1.0, 2.0] | ([1], [1.0]) |",
            "14: [3.0, 4.0] | ([2], [1.0]) |"
        ]
    );
    // It cannot be both without an index and with its cache.
    let none = options(5, IndexMode::None);
    let both = CtfSourceOptions {
        read: none.read.with_cache_index(true),
        ..none
    };
    let err = CtfSource::open(&InputPath::new(&ids), both).err().unwrap();
    assert!(err.to_string().contains("index none"), "{err}");
}

#[test]
fn errors_name_the_line_in_the_file_without_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.ctf");
    let mut text = String::new();
    for i in 0..50 {
        text += &format!("{i} |x {i} 1 |y 0:1\n");
    }
    text += "50 |x 1 nope |y 0:1\n";
    std::fs::write(&path, &text).unwrap();
    let none = CtfSource::open(&InputPath::new(&path), options(64, IndexMode::None)).unwrap();
    let err = decode_all::<f32>(&none).unwrap_err();
    let full = CtfSource::open(&InputPath::new(&path), options(64, IndexMode::Full)).unwrap();
    let want = decode_all::<f32>(&full).unwrap_err();
    assert_eq!(err.to_string(), want.to_string());
    assert_eq!(err.location().line, Some(51), "{err}");
}

#[test]
fn tolerated_errors_name_their_lines_in_the_file_without_an_index() {
    // A bad sample (two errors: the bad number, the input then missing) every 20 lines,
    // tolerated (`maxErrors` 2, counted per chunk), then three in a row: the chunk that holds
    // two of them keeps the first one's diagnostics and stops at the next.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.ctf");
    let bad = |i: u64| i % 20 == 7 || (189..192).contains(&i);
    let mut text = String::new();
    for i in 0..200 {
        let x = if bad(i) { "nope" } else { "1" };
        text += &format!("{i} |x {i} {x} |y 0:1\n");
    }
    std::fs::write(&path, &text).unwrap();
    let open = |index| {
        let mut o = options(64, index);
        o.ctf.max_errors = 2;
        CtfSource::open(&InputPath::new(&path), o).unwrap()
    };
    let (none, full) = (open(IndexMode::None), open(IndexMode::Full));
    assert_eq!(none.index_origin(), IndexOrigin::ByteRanges);
    let err = decode_all::<f32>(&none).unwrap_err();
    let want = decode_all::<f32>(&full).unwrap_err();
    assert_eq!(err.to_string(), want.to_string());
    let lines = |s: &CtfSource| -> Vec<u64> {
        s.diagnostics()
            .iter()
            .map(|d| d.location.line.unwrap())
            .collect()
    };
    let fatal = err.location().line.unwrap();
    assert!([191, 192].contains(&fatal), "{err}");
    let kept: Vec<u64> = (0..fatal - 1)
        .filter(|&i| bad(i))
        .flat_map(|i| [i + 1, i + 1])
        .collect();
    assert_eq!(lines(&none), kept);
    assert_eq!(lines(&full), kept);
    let text =
        |s: &CtfSource| -> Vec<String> { s.diagnostics().iter().map(|d| d.to_string()).collect() };
    assert_eq!(text(&none), text(&full));
}

#[test]
fn the_key_mode_is_found_after_a_head_of_blank_lines() {
    // 100 000 bytes of blank lines, more than the head read at open: the ids after them still
    // key the sequences, so `auto` reads byte ranges.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("blank_start.ctf");
    let mut text = "\n \r\n\t".repeat(25_000);
    text += "7 |x 1 2 |y 0:1\n7 |x 3 4\n8 |x 5 6 |y 1:1\n";
    std::fs::write(&path, &text).unwrap();
    let auto = CtfSource::open(&InputPath::new(&path), options(4096, IndexMode::Auto)).unwrap();
    assert_eq!(auto.index_origin(), IndexOrigin::ByteRanges);
    let full = CtfSource::open(&InputPath::new(&path), options(4096, IndexMode::Full)).unwrap();
    let got = decode_all::<f32>(&auto).unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got, decode_all::<f32>(&full).unwrap());
}
