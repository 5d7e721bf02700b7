use super::*;
use crate::error::{Diagnostic, ErrorKind, Severity};
use proptest::prelude::*;

fn spec(s: &str) -> StreamSpec {
    s.parse().unwrap()
}

fn opts(inputs: &[&str], max_errors: u64) -> CtfOptions {
    CtfOptions {
        inputs: inputs.iter().map(|s| spec(s)).collect(),
        skip_sequence_ids: false,
        max_errors,
        ..CtfOptions::default()
    }
}

fn run<T: Element>(buf: &[u8], o: &CtfOptions) -> (Result<()>, SequenceBatch<T>, Vec<Diagnostic>) {
    let mut batch = SequenceBatch::<T>::new(&o.inputs);
    let mut diags = Vec::new();
    let r = parse(buf, o, &mut batch, &mut diags);
    (r, batch, diags)
}

fn dump<T: Element>(b: &SequenceBatch<T>) -> String {
    let mut out = Vec::new();
    let names: Vec<String> = (0..b.streams().len()).map(|i| format!("s{i}")).collect();
    for s in 0..b.len() {
        crate::json::write_sequence(&mut out, b, s, &names);
    }
    String::from_utf8(out).unwrap()
}

#[test]
fn spec_extended_example() {
    let text = b"100 |a 1 2 3 |b 100 200\n100 |a 4 5 6 |b 101 201\n100 |b 102983 14532 |a 7 8 9\n\
100 |a 7 8 9\n200 |b 300 400 |a 10 20 30\n333 |b 500 100\n333 |b 600 -900\n400 |a 1 2 3 |b 100 200\n\
|a 4 5 6 |b 101 201\n|a 4 5 6 |b 101 201\n500 |a 1 2 3 |b 100 200\n";
    // Sequence 333 has no sample of 'a': CNTK rejects it.
    let o = opts(&["Some_very_long:dense:3:a", "other:dense:2:b"], 0);
    let (r, _, _) = run::<f32>(text, &o);
    assert!(r
        .unwrap_err()
        .to_string()
        .starts_with("6:1 (byte 117): input 'a': sequence 333 has no sample"));
    let o = opts(&["Some_very_long:dense:3:a", "other:dense:2:b"], 1);
    let (r, b, _) = run::<f32>(text, &o);
    r.unwrap();
    assert_eq!(b.keys(), &[100, 200, 400, 500]);
    assert_eq!(b.streams()[0].sequence_samples(0).len(), 4);
    assert_eq!(b.streams()[1].sequence_samples(0).len(), 3);
    assert_eq!(b.streams()[0].dense_sample(2), &[7.0, 8.0, 9.0]);
    assert_eq!(b.streams()[1].dense_sample(2), &[102983.0, 14532.0]);
    assert_eq!(b.streams()[1].sequence_samples(2).len(), 3);
}

#[test]
fn line_keys_names_aliases_whitespace_crlf_bom_comments() {
    let text = b"\xEF\xBB\xBF\n\n|B 100:3 123:4 |C 8 |A 0 1 2 3 4 |# a CTF comment\r\n\
|# another comment |A 0 1.1 22 0.3 54 |C 123917 |B 1134:1.911 13331:0.014\n\
|C -0.001 |# a comment with an escaped pipe: '|#' |A 3.9 1.11 121.2 99.13 0.04 |B 999:0.001 918918:-9.19\n\
7\t|A\t1 2 3 4 5\t|B\t|C 1e2";
    let o = opts(&["longA:dense:5:A", "B:sparse:1000000", "C:dense:1"], 0);
    let (r, b, d) = run::<f64>(text, &o);
    r.unwrap();
    assert!(d.iter().all(|d| d.severity > Severity::Error), "{d:?}");
    assert_eq!(b.keys(), &[2, 3, 4, 5]);
    assert_eq!(b.streams()[0].dense_sample(1), &[0.0, 1.1, 22.0, 0.3, 54.0]);
    assert_eq!(
        b.streams()[1].sparse_sample(2),
        (&[999u32, 918918][..], &[0.001, -9.19][..])
    );
    assert_eq!(
        b.streams()[1].sparse_sample(3).0.len(),
        0,
        "empty sparse sample"
    );
    assert_eq!(b.streams()[2].dense_sample(3), &[100.0]);
    assert_eq!(b.streams()[2].dense_sample(0), &[8.0]);
}

/// CNTK's text parser looks inputs up by alias only (by name when there is no alias).
#[test]
fn inputs_are_named_in_the_data_by_alias_only_as_cntk_does() {
    // An alias that is another word of the line: `labels` (aliased `labels_smooth`) is not
    // reached by `|labels`, which is skipped as an unknown input.
    let o = opts(&["labels:dense:2:labels_smooth"], 0);
    let (r, b, d) = run::<f32>(b"0 |labels 0 1 |labels_smooth 0.1 0.9\n", &o);
    r.unwrap();
    assert_eq!(b.streams()[0].dense_sample(0), &[0.1, 0.9]);
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(
        d[0].to_string()
            .ends_with("skipping unknown input 'labels'"),
        "{}",
        d[0]
    );
    // Swapped aliases: input y reads `|x`, input x reads `|y`.
    let o = opts(&["y:dense:1:x", "x:dense:1:y"], 0);
    let (r, b, _) = run::<f32>(b"|x 1 |y 2\n|y 4 |x 3\n", &o);
    r.unwrap();
    let y: Vec<f32> = (0..2).map(|s| b.streams()[0].dense_sample(s)[0]).collect();
    let x: Vec<f32> = (0..2).map(|s| b.streams()[1].dense_sample(s)[0]).collect();
    assert_eq!((y, x), (vec![1.0, 3.0], vec![2.0, 4.0]));
    // Two inputs with one name in the file cannot be told apart.
    for inputs in [
        &["a:dense:1:x", "x:dense:1"][..],
        &["a:dense:1:z", "b:dense:1:z"],
    ] {
        let err = CtfParser::new(opts(inputs, 0)).err().unwrap();
        let n = inputs[1].rsplit(':').next().unwrap();
        let n = if n == "1" { "x" } else { n };
        assert_eq!(
            err.to_string(),
            format!("'{n}' names two inputs in the file (an input's alias, else its name)")
        );
    }
}

#[test]
fn errors_have_positions_and_say_what() {
    let o = opts(&["a:dense:3", "s:sparse:5"], 0);
    let (r, _, _) = run::<f32>(b"1 |a 1 |s 1:1\n2 |a 1 2 3 4 |s 0:1\n", &o);
    let e = r.unwrap_err().resolve_in(b"", 0, 1);
    assert_eq!(e.kind(), ErrorKind::Invalid);
    assert_eq!(
        e.to_string(),
        "2:4 (byte 17): input 'a': has 4 dense values, dim is 3"
    );
    let (r, _, _) = run::<f32>(b"|a 1 2 3 |s 5:1\n", &o);
    assert_eq!(
        r.unwrap_err().to_string(),
        "1:13 (byte 12): input 's': sparse index 5 is out of range, dim is 5"
    );
    let (r, _, _) = run::<f32>(b"|a 1 2,0 3 |s 1:1\n", &o);
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Syntax);
    assert!(
        e.to_string()
            .starts_with("1:6 (byte 5): input 'a': malformed number '2,0'"),
        "{e}"
    );
    let (r, _, _) = run::<f32>(b"|a 1 2 3 |s -1:1\n", &o);
    assert!(r
        .unwrap_err()
        .to_string()
        .contains("expected a sparse index:value pair, found '-1:1'"));
    // As in CNTK's indexer, a changed id starts a sequence: ids may repeat (files joined with
    // `cat`, each starting at 0) and come in any order; each run of lines is its own sequence.
    let seq = |ids: &[u64]| {
        let text: String = ids.iter().map(|i| format!("{i} |a 1 |s 1:1\n")).collect();
        let (r, b, _) = run::<f32>(text.as_bytes(), &o);
        r.map(|()| b.keys().to_vec()).map_err(|e| e.to_string())
    };
    for ids in [
        &[1, 2, 5, 3, 4, 0, 9][..],
        &[1, 2, 1],
        &[0, 1, 2, 0, 1, 2],
        &[4, 1, 3, 9, 3],
    ] {
        assert_eq!(seq(ids), Ok(ids.to_vec()));
    }
    let (r, b, _) = run::<f32>(b"0 |a 1 |s 1:1\n0 |a 2\n1 |a 3 |s 1:1\n0 |a 4 |s 1:1\n", &o);
    r.unwrap();
    assert_eq!(b.keys(), &[0, 1, 0]);
    assert_eq!(b.streams()[0].sequence_samples(0).len(), 2);
    let (r, _, _) = run::<f32>(b"1 |a 1 |s 1:1\n1 |a 1\n1 |a 1\n1 |s 1:1\n", &o);
    assert!(r
        .unwrap_err()
        .to_string()
        .contains("spans 4 lines but its longest input has 3 samples"));
    let (r, _, _) = run::<f32>(b"|a 1\n", &o);
    assert!(r
        .unwrap_err()
        .to_string()
        .contains("input 's': line 1 has no sample"));
    for empty in [&b""[..], b"\xEF\xBB\xBF", b" \n\r\n\t\n"] {
        let (r, _, _) = run::<f32>(empty, &o);
        assert!(r.unwrap_err().to_string().contains("empty"));
    }
    let (r, _, _) = run::<f32>(b"| a 1\n", &o);
    assert!(r
        .unwrap_err()
        .to_string()
        .contains("'|' must be followed by an input name, found a space"));
}

#[test]
fn short_dense_padded_with_warning_unknown_skipped_with_info() {
    let o = opts(&["a:dense:3"], 0);
    let (r, b, d) = run::<f32>(b"|a 1 |zz 4 5\n", &o);
    r.unwrap();
    assert_eq!(b.streams()[0].dense_sample(0), &[1.0, 0.0, 0.0]);
    assert_eq!(d.len(), 2);
    assert_eq!(d[0].severity, Severity::Warning);
    assert_eq!(d[1].severity, Severity::Info);
    assert!(d[1].message.contains("'zz'"));
}

#[test]
fn budget_skips_bad_samples_then_stops() {
    let o = opts(&["a:dense:1"], 2);
    let (r, b, d) = run::<f32>(b"|a 1\n|a 1 2\n|a x\n|a 4\n", &o);
    r.unwrap();
    assert_eq!(b.keys(), &[0, 3]);
    assert_eq!(
        d.iter().filter(|d| d.severity == Severity::Error).count(),
        2
    );
    let (r, _, _) = run::<f32>(b"|a 1\n|a 1 2\n|a x\n|a 4 4\n", &o);
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooManyErrors);
    assert!(e.to_string().contains("error 3 of at most 2"), "{e}");
}

#[test]
fn skip_sequence_ids_and_precision() {
    let mut o = opts(&["a:dense:1"], 0);
    o.skip_sequence_ids = true;
    let (r, b, _) = run::<f64>(b"5 |a 0.1\n5 |a 1.000000059604644775390625001\n", &o);
    r.unwrap();
    assert_eq!(b.keys(), &[0, 1]);
    assert_eq!(
        b.streams()[0].values(),
        &[0.1, "1.000000059604644775390625001".parse::<f64>().unwrap()]
    );
    let (_, b, _) = run::<f32>(b"5 |a 0.1\n5 |a 1.000000059604644775390625001\n", &o);
    assert_eq!(b.streams()[0].values(), &[0.1f32, 1.000_000_1]);
}

fn outcome(buf: &[u8], o: &CtfOptions, pieces: &[usize]) -> (String, String, Vec<Diagnostic>) {
    let mut batch = SequenceBatch::<f32>::new(&o.inputs);
    let mut diags = Vec::new();
    let mut stream = CtfStream::new(CtfParser::new(o.clone()).unwrap());
    let mut last = 0;
    let mut r = Ok(());
    for &p in pieces.iter().chain(std::iter::once(&buf.len())) {
        r = r.and_then(|_| stream.feed(&buf[last..p], &mut batch, &mut diags));
        last = p;
    }
    r = r.and_then(|_| stream.finish(&mut batch, &mut diags));
    (
        dump(&batch),
        r.map_err(|e| e.to_string()).err().unwrap_or_default(),
        diags,
    )
}

#[test]
fn split_at_every_byte_gives_the_same_result() {
    let samples: [(&[u8], u64); 5] = [
        (b"\xEF\xBB\xBF\n1 |a 1 2 |s 3:1\n1 |s 2:2.5\n\n|a 3 |s\r\n22\t|a 1e3 |# c |# d|s 0:0\n22 |a 9", 5),
        (b"|a 1 |s 1:1\n|a 1 2 3 |s 1:1\n\n|zz |a -0.5 |s 4:1e-3\n|a 2,0\n|a 7", 5),
        (b"3 |a 1\n4 |s 1:1 |a 1\n3 |a 1 |s 1:1\n", 5),
        (b"3 |a 1\n4 |s 1:1 |a 1\n3 |a 1 |s 1:1\n", 0),
        // Found by the fuzzer: an id too large for 64 bits after a good sequence.
        (b"5 |a 1 |s\n6 |a 1 |s\n86000000000000000000000 |a 1\n", 0),
    ];
    for (text, max_errors) in samples {
        let o = opts(&["a:dense:2", "s:sparse:5"], max_errors);
        let whole = outcome(text, &o, &[]);
        let (r, b, d) = run::<f32>(text, &o);
        assert_eq!(whole.0, dump(&b));
        assert_eq!(
            whole.1,
            r.map_err(|e| e.to_string()).err().unwrap_or_default()
        );
        assert_eq!(whole.2, d);
        for cut in 0..=text.len() {
            assert_eq!(outcome(text, &o, &[cut]), whole, "split at {cut}");
        }
        let every: Vec<usize> = (0..=text.len()).collect();
        assert_eq!(outcome(text, &o, &every), whole, "byte by byte");
    }
}

#[test]
fn chunks_parse_like_the_whole() {
    let text = b"\n1 |a 1 |s 1:1\n1 |a 2\n2 |a 3 |s\n\n3 |a 4 |s 2:2\n";
    let o = opts(&["a:dense:1", "s:sparse:5"], 9);
    let (r, whole, wd) = run::<f32>(text, &o);
    r.unwrap();
    let mut extents = Vec::new();
    scan_sequences(text, 0, 1, KeyMode::Ids, |e| {
        extents.push(e);
        Ok(())
    })
    .unwrap();
    assert_eq!(
        extents.iter().map(|e| e.key).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    let mut parser = CtfParser::new(o.clone()).unwrap();
    let mut batch = SequenceBatch::<f32>::new(&o.inputs);
    let mut diags = Vec::new();
    for e in extents.iter().rev() {
        let chunk = &text[e.offset as usize..e.offset as usize + e.len];
        parser
            .parse_chunk(
                chunk,
                e.offset,
                e.line,
                KeyMode::Ids,
                &mut batch,
                &mut diags,
            )
            .unwrap();
    }
    assert_eq!(batch.keys(), &[3, 2, 1]);
    for (i, j) in [(0, 2), (1, 1), (2, 0)] {
        let mut a = whole.empty_like();
        a.push_sequence_from(&whole, i);
        let mut b = batch.empty_like();
        b.push_sequence_from(&batch, j);
        assert_eq!(a, b);
    }
    // The same diagnostics, in chunk order.
    let mut wd_sorted = wd.clone();
    wd_sorted.sort_by_key(|d| std::cmp::Reverse(d.location.byte));
    diags.sort_by_key(|d| std::cmp::Reverse(d.location.byte));
    assert_eq!(diags, wd_sorted);
}

/// CNTK's invalid_inputs.txt (A dense 1, B sparse 10, maxErrors large): which samples it keeps.
#[test]
fn cntk_invalid_inputs() {
    let Some(dir) = crate_conformance("cntk/ctf") else {
        return;
    };
    let text = std::fs::read(dir.join("invalid_inputs.txt")).unwrap();
    let o = opts(&["A:dense:1", "B:sparse:10"], 1000);
    let (r, b, d) = run::<f32>(&text, &o);
    r.unwrap();
    assert_eq!(b.keys(), &[1, 2, 3, 4, 5, 123, 6]);
    // Samples per sequence, from the counts in control/invalid_inputs_Control.txt and its rows.
    let count = |s: usize| {
        (0..b.len())
            .map(|q| b.streams()[s].sequence_samples(q).len())
            .collect::<Vec<_>>()
    };
    assert_eq!(count(0), vec![2, 9, 5, 3, 1, 2, 4]);
    assert_eq!(count(1), vec![2, 7, 7, 3, 1, 2, 5]);
    // Errors: 2 + 1 (seq 1), 10 + 1 (seq 2), 2 + 1 (seq 3), 2 + 1 (seq 4), 1 (seq 123), 1 (seq 6).
    let errors: Vec<_> = d.iter().filter(|d| d.severity == Severity::Error).collect();
    let lines: Vec<u64> = errors.iter().map(|d| d.location.line.unwrap()).collect();
    assert_eq!(
        lines,
        vec![2, 3, 1, 5, 6, 8, 9, 10, 11, 12, 14, 15, 16, 17, 4, 19, 21, 18, 28, 31, 27, 35, 40]
    );
    // The sparse index CNTK reports at offset 90 and the "2,0" at offset 221 (just past where
    // each token starts, which is where exfeed points).
    assert!(errors
        .iter()
        .any(|d| d.location.byte == Some(88) && d.message.contains("index 10")));
    assert!(errors
        .iter()
        .any(|d| d.location.byte == Some(220) && d.message.contains("'2,0'")));
    assert!(d
        .iter()
        .any(|d| d.severity == Severity::Info && d.message.contains("'C'")));
}

pub(crate) fn crate_conformance(sub: &str) -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("EXFEED_CONFORMANCE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance")
        });
    if dir.is_dir() {
        return Some(dir.join(sub));
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "conformance corpus missing (required in CI)"
    );
    // Counted and listed at the end of scripts/test (see tests/common/mod.rs).
    let test = std::thread::current().name().unwrap_or("?").to_string();
    eprintln!(
        "SKIPPED: {test}: conformance corpus not found at {}",
        dir.display()
    );
    if let Some(log) = std::env::var_os("EXFEED_SKIP_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            let _ = writeln!(f, "exfeed::{test}");
        }
    }
    None
}

fn arb_batch() -> impl Strategy<Value = SequenceBatch<f32>> {
    let sample_d = prop::collection::vec(any::<f32>().prop_filter("finite", |v| v.is_finite()), 3);
    let sample_s = prop::collection::vec(
        (
            0u32..7,
            any::<f32>().prop_filter("finite", |v| v.is_finite()),
        ),
        0..4,
    );
    let seq = (
        prop::collection::vec(sample_d, 1..4),
        prop::collection::vec(sample_s, 1..4),
    );
    prop::collection::vec(seq, 1..6).prop_map(|seqs| {
        let specs = [spec("d:dense:3:x"), spec("s:sparse:7")];
        let mut b = SequenceBatch::<f32>::new(&specs);
        for (k, (ds, ss)) in seqs.into_iter().enumerate() {
            for d in ds {
                b.stream_mut(0).push_dense_sample(&d);
            }
            for s in ss {
                let (i, v): (Vec<u32>, Vec<f32>) = s.into_iter().unzip();
                b.stream_mut(1).push_sparse_sample(&i, &v);
            }
            b.finish_sequence(k as u64 * 3 + 1);
        }
        b
    })
}

proptest! {
    #[test]
    fn writer_round_trips(b in arb_batch()) {
        let specs = [spec("d:dense:3:x"), spec("s:sparse:7")];
        let mut out = Vec::new();
        for s in 0..b.len() {
            write_sequence(&mut out, &b, s, &specs).unwrap();
        }
        let o = CtfOptions { inputs: specs.to_vec(), ..CtfOptions::default() };
        let (r, back, _) = run::<f32>(&out, &o);
        r.unwrap();
        prop_assert_eq!(dump(&back), dump(&b));
        prop_assert_eq!(back.keys(), b.keys());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(
        prop::sample::select(b" \t\r\n|#:.-+e0123456789asA".to_vec()), 0..80)) {
        let o = opts(&["a:dense:2", "s:sparse:5:A"], 3);
        let _ = run::<f32>(&bytes, &o);
        let whole = outcome(&bytes, &o, &[]);
        let half = outcome(&bytes, &o, &[bytes.len() / 2]);
        prop_assert_eq!(whole, half);
    }
}

/// `text` parsed with dense values read a block at a time where they can be, and one at a
/// time only: the same result, bit for bit (the sign of a zero included), the same diagnostics.
fn blocks_agree<T: Element>(text: &[u8], o: &CtfOptions) {
    let parse_with = |blocks: bool| {
        let mut parser = CtfParser::new(o.clone()).unwrap();
        parser.set_blocks(blocks);
        let mut batch = SequenceBatch::<T>::new(&o.inputs);
        let mut diags = Vec::new();
        let r = parser.parse_file(text, &mut batch, &mut diags);
        let streams: Vec<_> = batch
            .streams()
            .iter()
            .map(|s| {
                let bits: Vec<u64> = s.values().iter().map(|v| v.to_f64().to_bits()).collect();
                (bits, s.indices().to_vec(), s.sample_offsets().to_vec())
            })
            .collect();
        let diags: Vec<String> = diags.iter().map(|d| d.to_string()).collect();
        (
            r.map_err(|e| e.to_string()),
            batch.keys().to_vec(),
            streams,
            diags,
        )
    };
    let (slow, fast) = (parse_with(false), parse_with(true));
    if slow != fast {
        let text = String::from_utf8_lossy(text);
        assert_eq!(slow.0, fast.0, "{text}");
        assert_eq!(slow.3, fast.3, "{text}");
        assert_eq!(slow.2, fast.2, "{text}");
        panic!("{text}");
    }
}

/// Numbers the block reader takes and numbers it leaves to the one-at-a-time path: leading
/// zeros, `-0`, exponents, more than 8 digits on a side, 7 and more decimals, values beyond
/// `f32`'s exact range, malformed ones.
const TRICKY_NUMBERS: &[&str] = &[
    "0",
    "255",
    "7",
    "-0",
    "-0.0",
    "007",
    "-007",
    "0.5",
    "-9.123456",
    "9.123456",
    "1.2345678",
    "-1.23456789",
    "12345678",
    "-99999999",
    "123456789",
    "16777217",
    "12345678.12345678",
    "0.00000001",
    "20.",
    "-20.",
    "5.",
    "1e5",
    "1.5E-3",
    "-2.5e+2",
    "+3",
    ".5",
    "-.5",
    "1.e5",
    "1..2",
    "1.2.3",
    "--1",
    "-",
    "1-2",
    "0000000000000000000001",
    "3.4028236e38",
    "1e-50",
    "abc",
    "4.",
    "0.000001",
    "65504.25",
    "9007199254740993",
];

/// A run of plain values around `number`, starting `pad` separators after the input's name and
/// laid out by `layout`, so that it falls at each place of a 64-byte block.
fn padded_line(pad: usize, number: &str, layout: usize) -> String {
    let sep = [" ", "\t", "  "][layout % 3];
    let mut line = format!("|x{}", " ".repeat(pad + 1));
    for k in 0..40 {
        line.push_str(["1", "0", "255", "-3.25", "0.125"][(k + layout) % 5]);
        line.push_str(sep);
        if k == 17 + layout % 5 {
            line.push_str(number);
            line.push_str(sep);
        }
    }
    line.push_str(number);
    line.push_str(
        [
            "\n",
            " \n",
            "\r\n",
            " |y 3:1\n",
            "|y 3:1\n",
            "|# a comment 1 2 |y 1:1\n",
        ][layout % 6],
    );
    line
}

#[test]
fn dense_blocks_read_every_number_as_one_at_a_time() {
    for number in TRICKY_NUMBERS {
        for layout in 0..6 {
            let text: String = (0..80)
                .map(|pad| padded_line(pad, number, layout))
                .collect();
            for dim in [42, 200] {
                let o = opts(&[&format!("x:dense:{dim}"), "y:sparse:5"], u64::MAX);
                blocks_agree::<f32>(text.as_bytes(), &o);
                blocks_agree::<f64>(text.as_bytes(), &o);
                // The first error, where it stops the parse.
                let o = opts(&[&format!("x:dense:{dim}"), "y:sparse:5"], 0);
                blocks_agree::<f32>(text.as_bytes(), &o);
            }
        }
    }
}

#[test]
fn dense_blocks_at_the_end_of_the_buffer() {
    // The last line without its newline, its values running to the buffer's end.
    for number in TRICKY_NUMBERS {
        for len in [60, 71, 72, 73, 80, 135, 136, 137] {
            let mut text = b"|x".to_vec();
            while text.len() < len {
                text.extend_from_slice(b" 12");
            }
            text.extend_from_slice(b" ");
            text.extend_from_slice(number.as_bytes());
            let o = opts(&["x:dense:100"], u64::MAX);
            blocks_agree::<f32>(&text, &o);
            blocks_agree::<f64>(&text, &o);
        }
    }
}

proptest! {
    #[test]
    fn dense_blocks_agree_on_random_lines(
        lines in prop::collection::vec(
            prop::collection::vec((0..TRICKY_NUMBERS.len() + 40, 0..6usize), 0..120),
            1..6,
        ),
        dim in 1usize..150,
        crlf: bool,
    ) {
        let plain = ["0", "0", "0", "1", "17", "255", "-9.123456", "3.000001", "-0.5", "42.25"];
        let mut text = String::new();
        for line in &lines {
            text.push_str("|x");
            for &(k, sep) in line {
                text.push_str([" ", " ", " ", "\t", "  ", " \t"][sep]);
                text.push_str(match k.checked_sub(40) {
                    Some(t) => TRICKY_NUMBERS[t],
                    None => plain[k % plain.len()],
                });
            }
            text.push_str(if crlf { " |y 1:1\r\n" } else { " |y 1:1\n" });
        }
        let o = opts(&[&format!("x:dense:{dim}"), "y:sparse:5"], u64::MAX);
        blocks_agree::<f32>(text.as_bytes(), &o);
        blocks_agree::<f64>(text.as_bytes(), &o);
    }
}
