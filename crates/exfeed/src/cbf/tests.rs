//! Unit tests of the CBF reader and writer on batches built here.

use super::*;
use crate::batch::SequenceBatch;
use crate::element::Precision;
use crate::error::ErrorKind;
use crate::stream::{Storage, StreamSpec};

fn specs() -> Vec<StreamSpec> {
    vec![
        StreamSpec::new("d", Storage::Dense, 3),
        StreamSpec::new("s", Storage::Sparse, 10),
    ]
}

fn sample_batch() -> SequenceBatch<f32> {
    let mut b = SequenceBatch::<f32>::new(&specs());
    b.stream_mut(0).push_dense_sample(&[1.0, 2.0, 3.0]);
    b.stream_mut(0).push_dense_sample(&[4.0, 5.0, 6.0]);
    b.stream_mut(1).push_sparse_sample(&[7, 2], &[0.5, 0.25]);
    b.finish_sequence(0);
    b.stream_mut(0).push_dense_sample(&[9.0, 0.0, 0.0]);
    b.stream_mut(1).push_sparse_sample(&[], &[]);
    b.stream_mut(1).push_sparse_sample(&[9], &[1.5]);
    b.stream_mut(1).push_sparse_sample(&[0, 1], &[2.0, 3.0]);
    b.finish_sequence(1);
    b
}

fn write(batch: &SequenceBatch<f32>, options: CbfWriterOptions) -> Vec<u8> {
    let mut w = CbfWriter::new(Vec::new(), &specs(), options).unwrap();
    w.write_batch(batch).unwrap();
    w.finish().unwrap()
}

fn sorted(b: &SequenceBatch<f32>) -> SequenceBatch<f32> {
    // The writer sorts sparse pairs by index within a sample.
    let mut out = b.empty_like();
    for seq in 0..b.len() {
        for (t, s) in b.streams().iter().enumerate() {
            for sample in s.sequence_samples(seq) {
                match s.storage() {
                    Storage::Dense => out.stream_mut(t).push_dense_sample(s.dense_sample(sample)),
                    Storage::Sparse => {
                        let (ix, vs) = s.sparse_sample(sample);
                        let mut pairs: Vec<_> =
                            ix.iter().copied().zip(vs.iter().copied()).collect();
                        pairs.sort_by_key(|p| p.0);
                        for (i, v) in pairs {
                            out.stream_mut(t).push_sparse_value(i, v);
                        }
                        out.stream_mut(t).end_sparse_sample();
                    }
                }
            }
        }
        out.finish_sequence(b.keys()[seq]);
    }
    out
}

#[test]
fn layout_is_as_the_spec_says() {
    let bytes = write(&sample_batch(), CbfWriterOptions::default());
    assert_eq!(&bytes[..8], &CBF_MAGIC.to_le_bytes());
    assert_eq!(&bytes[8..12], &1u32.to_le_bytes());
    // meta counts: max over streams = 2, 3
    assert_eq!(&bytes[12..20], &[2, 0, 0, 0, 3, 0, 0, 0]);
    // dense stream, sequence 0: N = 2, six floats
    assert_eq!(&bytes[20..24], &2u32.to_le_bytes());
    assert_eq!(&bytes[24..28], &1.0f32.to_le_bytes());
    // sparse sequence 0 after the dense sequences (4+24 and 4+12 bytes): N=1, nnz=2, sorted
    let p = 20 + 28 + 16;
    assert_eq!(&bytes[p..p + 8], &[1, 0, 0, 0, 2, 0, 0, 0]);
    assert_eq!(&bytes[p + 8..p + 12], &0.25f32.to_le_bytes());
    assert_eq!(&bytes[p + 16..p + 20], &2i32.to_le_bytes());
    let f = CbfFile::open(&bytes[..]).unwrap();
    assert_eq!(f.num_chunks(), 1);
    let c = f.chunk_info(0);
    assert_eq!((c.offset, c.sequences, c.samples), (12, 2, 5));
    assert_eq!(f.streams()[1].spec.name, "s");
    assert_eq!(f.streams()[1].element, Precision::Float);
}

#[test]
fn round_trip_both_precisions_and_chunk_sizes() {
    let b = sample_batch();
    for precision in [Precision::Float, Precision::Double] {
        for chunk_size in [1, 60, 1 << 20] {
            let bytes = write(
                &b,
                CbfWriterOptions {
                    chunk_size,
                    precision,
                },
            );
            let f = CbfFile::open(bytes.as_slice()).unwrap();
            assert_eq!(f.num_sequences(), 2);
            let mut all = b.empty_like();
            let mut chunk = SequenceBatch::<f32>::new(&[]);
            for i in 0..f.num_chunks() {
                f.read_chunk(i, &mut chunk).unwrap();
                for s in 0..chunk.len() {
                    all.push_sequence_from(&chunk, s);
                }
            }
            assert_eq!(all, sorted(&b), "{precision} {chunk_size}");
            if chunk_size == 1 {
                assert_eq!(f.num_chunks(), 2);
            }
            // double file read as f64 too
            let mut d = SequenceBatch::<f64>::new(&[]);
            f.read_chunk(0, &mut d).unwrap();
            assert_eq!(d.streams()[0].values()[..3], [1.0, 2.0, 3.0]);
        }
    }
}

#[test]
fn aliases_rename_as_cntk_renames() {
    let bytes = write(&sample_batch(), CbfWriterOptions::default());
    let mut f = CbfFile::open(&bytes[..]).unwrap();
    let names = |f: &CbfFile<&[u8]>| -> Vec<(String, String)> {
        f.streams()
            .iter()
            .map(|s| (s.spec.name.clone(), s.name_in_file().to_string()))
            .collect()
    };
    // Every stream of the file, in header order; the one an alias names is renamed.
    let mut want = StreamSpec::new("labels", Storage::Sparse, 0);
    want.alias = Some("s".into());
    f.select(&[want]).unwrap();
    assert_eq!(
        names(&f),
        [("d".into(), "d".into()), ("labels".into(), "s".into())]
    );
    assert!(f.rename_warnings().is_empty());
    let mut b = SequenceBatch::<f32>::new(&[]);
    f.read_chunk(0, &mut b).unwrap();
    assert_eq!(b.streams().len(), 2);
    assert_eq!(b.streams()[1].sparse_sample(0).0, &[2, 7]);
    // An alias that names no stream renames nothing (CNTK ignores it); a warning says so.
    let mut features = StreamSpec::new("features", Storage::Dense, 0);
    features.alias = Some("S0".into());
    f.select(&[features, StreamSpec::new("x", Storage::Dense, 0)])
        .unwrap();
    assert_eq!(
        names(&f),
        [("d".into(), "d".into()), ("s".into(), "s".into())]
    );
    assert_eq!(
        f.rename_warnings(),
        [
            "input 'features': the file has no stream 'S0' (it has d, s); ignored, as CNTK \
             ignores it",
            "input 'x': the file has no stream 'x' (it has d, s); ignored, as CNTK ignores it"
        ]
    );
    let config_error = |f: &mut CbfFile<&[u8]>, specs: &[StreamSpec]| {
        let err = f.select(specs).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config);
        err.to_string()
    };
    let err = config_error(&mut f, &[StreamSpec::new("d", Storage::Dense, 4)]);
    assert!(err.contains("configured as dense dim 4"), "{err}");
    let mut twice = StreamSpec::new("e", Storage::Dense, 0);
    twice.alias = Some("d".into());
    let err = config_error(&mut f, &[StreamSpec::new("d", Storage::Dense, 0), twice]);
    assert!(
        err.contains("inputs 'd' and 'e' both name the file's stream 'd'"),
        "{err}"
    );
    let mut clash = StreamSpec::new("d", Storage::Sparse, 0);
    clash.alias = Some("s".into());
    let err = config_error(&mut f, &[clash]);
    assert!(
        err.contains("the file's streams 'd' and 's' would both be named 'd'"),
        "{err}"
    );
}

#[test]
fn corrupt_files_say_where() {
    let good = write(&sample_batch(), CbfWriterOptions::default());
    type Mutate = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(Mutate, &str)> = vec![
        (Box::new(|b| b[0] ^= 1), "(byte 0): not a CBF file: magic is"),
        (Box::new(|b| b[8] = 2), "(byte 8): unsupported CBF version 2"),
        (Box::new(|b| b.truncate(60)), "(byte 52): header offset"),
        (Box::new(|b| b.truncate(30)), "(byte 30): truncated: 30 bytes, a CBF file has at least 36"),
        // sparse index 7 (second pair after sorting) -> 10
        (
            Box::new(|b| {
                let p = 20 + 28 + 16 + 8 + 8 + 4;
                b[p..p + 4].copy_from_slice(&10i32.to_le_bytes());
            }),
            "(byte 84): chunk 0, stream 's': sequence 0: index 10 is outside [0, 10)",
        ),
        // meta count of sequence 0: 2 -> 7
        (Box::new(|b| b[12] = 7), "(byte 12): chunk 0: the sequences' sample counts add up to 10"),
        // dense N of sequence 0: 2 -> 200
        (
            Box::new(|b| b[20] = 200),
            "(byte 24): chunk 0, stream 'd': sequence 0: 200 dense samples: 600 x 4 bytes do not fit",
        ),
    ];
    for (mutate, want) in cases {
        let mut bytes = good.clone();
        mutate(&mut bytes);
        let err = CbfFile::open(&bytes[..])
            .and_then(|f| f.validate_all())
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        assert!(err.to_string().contains(want), "want {want:?}, got {err}");
    }
}

/// A double-precision file of sequences 0..n (the sample batch, then more) in 80-byte chunks.
fn multi_chunk_file(n: u32) -> Vec<u8> {
    let mut b = sample_batch();
    for k in 2..n {
        b.stream_mut(0).push_dense_sample(&[k as f32; 3]);
        b.stream_mut(1).push_sparse_sample(&[k], &[1.0]);
        b.finish_sequence(k as u64);
    }
    write(
        &b,
        CbfWriterOptions {
            chunk_size: 80,
            precision: Precision::Double,
        },
    )
}

#[test]
fn truncation_and_bit_flips_never_panic() {
    let good = multi_chunk_file(6);
    assert!(CbfFile::open(&good[..]).unwrap().num_chunks() > 1);
    for cut in 0..good.len() {
        let r = CbfFile::open(&good[..cut]).and_then(|f| f.validate_all());
        assert_eq!(r.unwrap_err().kind(), ErrorKind::Corrupt, "cut at {cut}");
    }
    let mut bytes = good.clone();
    for i in 0..good.len() {
        for v in [
            0x00u8,
            0x01,
            0x7f,
            0x80,
            0xff,
            good[i] ^ 0x01,
            good[i] ^ 0x80,
        ] {
            bytes[i] = v;
            if let Ok(f) = CbfFile::open(&bytes[..]) {
                let _ = f.validate_all();
                let mut d = SequenceBatch::<f64>::new(&[]);
                for c in 0..f.num_chunks() {
                    let _ = f.read_chunk(c, &mut d);
                }
            }
        }
        bytes[i] = good[i];
    }
}

#[test]
fn writer_rejects_bad_input() {
    let mut b = SequenceBatch::<f32>::new(&specs());
    b.stream_mut(0).push_dense_sample(&[1.0, 2.0, 3.0]);
    b.stream_mut(1).push_sparse_sample(&[10], &[1.0]);
    b.finish_sequence(0);
    let mut w = CbfWriter::new(Vec::new(), &specs(), CbfWriterOptions::default()).unwrap();
    let err = w.write_batch(&b).unwrap_err();
    assert!(
        err.to_string()
            .contains("sequence 0, stream 's': index 10 is outside [0, 10)"),
        "{err}"
    );
    // The failed sequence left nothing behind.
    let bytes = w.finish().unwrap();
    let f = CbfFile::open(&bytes[..]).unwrap();
    assert_eq!(f.num_sequences(), 0);
    assert!(CbfWriter::new(Vec::new(), &[], CbfWriterOptions::default()).is_err());
}

#[test]
fn encoded_batches_write_the_same_bytes_and_errors_as_write_batch() {
    // Sequences of sample_batch() repeated, a bad index in the middle of the second batch.
    let good = sample_batch();
    let mut bad = good.empty_like();
    bad.push_sequence_from(&good, 0);
    bad.stream_mut(0).push_dense_sample(&[1.0, 1.0, 1.0]);
    bad.stream_mut(1).push_sparse_sample(&[3, 10], &[1.0, 2.0]);
    bad.finish_sequence(7);
    bad.push_sequence_from(&good, 1);
    for precision in [Precision::Float, Precision::Double] {
        for chunk_size in [1, 60, 1 << 20] {
            let options = CbfWriterOptions {
                chunk_size,
                precision,
            };
            let mut direct = CbfWriter::new(Vec::new(), &specs(), options.clone()).unwrap();
            let mut encoded = CbfWriter::new(Vec::new(), &specs(), options.clone()).unwrap();
            let encoder = encoded.encoder();
            for batch in [&good, &good] {
                direct.write_batch(batch).unwrap();
                encoded
                    .write_encoded(encoder.encode(batch).unwrap())
                    .unwrap();
            }
            let want = direct.write_batch(&bad).unwrap_err().to_string();
            let got = encoded
                .write_encoded(encoder.encode(&bad).unwrap())
                .unwrap_err()
                .to_string();
            assert!(want.contains("index 10 is outside [0, 10)"), "{want}");
            assert_eq!(got, want);
            assert_eq!(direct.sequences(), 5);
            assert_eq!(encoded.sequences(), 5);
            let (a, ca) = direct.finish_with_chunks().unwrap();
            let (b, cb) = encoded.finish_with_chunks().unwrap();
            assert_eq!(a, b, "chunk size {chunk_size}");
            assert_eq!(ca.len(), cb.len());
        }
    }
}

#[test]
fn sequence_at_a_time_and_after_an_error_writes_what_a_whole_batch_does() {
    // Twelve sequences, written as one batch or one batch per sequence; a bad sequence (index
    // out of range) written in between is refused and leaves nothing behind.
    let one = sample_batch();
    let mut all = one.empty_like();
    for k in 0..6 {
        for s in 0..one.len() {
            all.push_sequence_from(&one, s);
        }
        all.stream_mut(0).push_dense_sample(&[k as f32; 3]);
        all.stream_mut(1).push_sparse_sample(&[k], &[0.5]);
        all.finish_sequence(k as u64);
    }
    let mut bad = one.empty_like();
    bad.stream_mut(0).push_dense_sample(&[1.0, 1.0, 1.0]);
    bad.stream_mut(0).push_dense_sample(&[2.0, 2.0, 2.0]);
    bad.stream_mut(1).push_sparse_sample(&[3, 10], &[1.0, 2.0]);
    bad.finish_sequence(99);
    for precision in [Precision::Float, Precision::Double] {
        for chunk_size in [1, 60, 200, 1 << 20] {
            let options = CbfWriterOptions {
                chunk_size,
                precision,
            };
            let mut whole = CbfWriter::new(Vec::new(), &specs(), options.clone()).unwrap();
            whole.write_batch(&all).unwrap();
            let (want, want_chunks) = whole.finish_with_chunks().unwrap();
            let mut single = CbfWriter::new(Vec::new(), &specs(), options).unwrap();
            for s in 0..all.len() {
                let mut b = all.empty_like();
                b.push_sequence_from(&all, s);
                single.write_batch(&b).unwrap();
                if s % 5 == 2 {
                    let err = single.write_batch(&bad).unwrap_err();
                    assert!(err.to_string().contains("index 10 is outside"), "{err}");
                }
            }
            assert_eq!(single.sequences(), all.len() as u64);
            let (got, got_chunks) = single.finish_with_chunks().unwrap();
            assert!(got == want, "{precision}, chunk size {chunk_size}");
            assert_eq!(got_chunks, want_chunks);
        }
    }
}

#[test]
fn buffered_fallback_reads_and_rejects_what_memory_does() {
    use crate::io::InputPath;
    let good = multi_chunk_file(9);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.cbf");
    std::fs::write(&path, &good).unwrap();
    let mapped = CbfFile::open(good.clone()).unwrap();
    let buffered = crate::io::open_cbf(&InputPath::new(&path)).unwrap();
    assert!(!mapped.is_buffered() && mapped.bytes() == Some(&good[..]));
    assert!(buffered.is_buffered() && buffered.bytes().is_none());
    assert!(buffered.num_chunks() > 3);
    assert_eq!(buffered.chunks(), mapped.chunks());
    assert_eq!(buffered.streams(), mapped.streams());
    assert_eq!(
        (buffered.file_len(), buffered.header_offset()),
        (mapped.file_len(), mapped.header_offset())
    );
    // Any chunk, in any order, without the others.
    let (mut x, mut y) = (
        SequenceBatch::<f64>::new(&[]),
        SequenceBatch::<f64>::new(&[]),
    );
    for i in (0..buffered.num_chunks()).rev() {
        mapped.read_chunk(i, &mut x).unwrap();
        buffered.read_chunk(i, &mut y).unwrap();
        assert_eq!(x, y, "chunk {i}");
        assert_eq!(y.keys()[0], buffered.chunk_info(i).first_key);
    }

    // Truncated and corrupt files: the same result, error and byte offset as from memory.
    let mut cases: Vec<Vec<u8>> = (0..good.len()).map(|cut| good[..cut].to_vec()).collect();
    for i in 0..good.len() {
        for flip in [0x01u8, 0x80] {
            let mut bytes = good.clone();
            bytes[i] ^= flip;
            cases.push(bytes);
        }
    }
    for bytes in cases {
        std::fs::write(&path, &bytes).unwrap();
        let from_file = std::fs::File::open(&path).unwrap();
        let want = CbfFile::open(&bytes[..]).and_then(|f| f.validate_all());
        let from_file = crate::io::ReopeningFile::kept_open(from_file).unwrap();
        let got = CbfFile::<&[u8]>::open_ranges(Box::new(from_file)).and_then(|f| f.validate_all());
        match (want, got) {
            (Ok(a), Ok(b)) => assert_eq!(a, b),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
            (a, b) => panic!("from memory {a:?}, buffered {b:?}"),
        }
    }

    // A file cut short after it was opened: a clean I/O error for the chunks it lost.
    std::fs::write(&path, &good).unwrap();
    let f = crate::io::open_cbf_buffered(&path).unwrap();
    std::fs::write(&path, &good[..good.len() / 2]).unwrap();
    let last = f.num_chunks() - 1;
    let err = f.read_chunk(last, &mut y).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Io, "{err}");
    f.read_chunk(0, &mut y).unwrap();
}

#[test]
fn a_chunk_read_in_pieces_of_any_size_decodes_as_from_memory() {
    // Sequences of 1 to 29 samples (dense dim 3; sparse with up to 9 pairs a sample), in chunks
    // of about 2 KB: pieces of every size below cross samples, sequences and the streams'
    // boundaries; a sequence longer than a piece is read in parts (dense) or whole (sparse).
    let mut b = SequenceBatch::<f32>::new(&specs());
    for k in 0..60u32 {
        for j in 0..1 + k % 29 {
            let v = (k * 100 + j) as f32;
            b.stream_mut(0).push_dense_sample(&[v, v + 0.5, -v]);
            let pairs: Vec<u32> = (0..(k + j) % 10).collect();
            let values: Vec<f32> = pairs.iter().map(|&i| v + i as f32).collect();
            b.stream_mut(1).push_sparse_sample(&pairs, &values);
        }
        b.finish_sequence(u64::from(k));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.cbf");
    for precision in [Precision::Float, Precision::Double] {
        let options = CbfWriterOptions {
            chunk_size: 2000,
            precision,
        };
        let good = write(&b, options);
        std::fs::write(&path, &good).unwrap();
        let in_memory = CbfFile::open(&good[..]).unwrap();
        let from_file = crate::io::open_cbf(&crate::io::InputPath::new(&path)).unwrap();
        assert!(from_file.is_buffered());
        assert!(
            from_file
                .chunks()
                .iter()
                .filter(|c| c.sequences > 1)
                .count()
                > 3
        );
        let (mut want, mut got) = (
            SequenceBatch::<f32>::new(&[]),
            SequenceBatch::<f32>::new(&[]),
        );
        for i in 0..in_memory.num_chunks() {
            in_memory.read_chunk(i, &mut want).unwrap();
            for piece in [1, 2, 3, 5, 8, 13, 64, 100, 777, 1 << 20] {
                from_file.read_chunk_in_pieces(i, &mut got, piece).unwrap();
                assert_eq!(got, want, "chunk {i}, pieces of {piece} bytes");
            }
        }
        let mut all = want.empty_like();
        for i in 0..from_file.num_chunks() {
            from_file.read_chunk_in_pieces(i, &mut got, 7).unwrap();
            all.push_sequences_from(&got, 0..got.len());
        }
        assert_eq!(sorted(&all), sorted(&b));
    }

    // Corrupt bytes: in pieces, the same error at the same byte as from memory, and an
    // emptied batch.
    let good = multi_chunk_file(9);
    let mut got = SequenceBatch::<f64>::new(&[]);
    for i in 0..good.len() {
        let mut bytes = good.clone();
        bytes[i] ^= 0x41;
        std::fs::write(&path, &bytes).unwrap();
        let (Ok(in_memory), Ok(from_file)) = (
            CbfFile::open(&bytes[..]),
            crate::io::open_cbf(&crate::io::InputPath::new(&path)),
        ) else {
            continue;
        };
        for c in 0..in_memory.num_chunks() {
            let want = in_memory.read_chunk(c, &mut SequenceBatch::<f64>::new(&[]));
            for piece in [1, 3, 16] {
                match (&want, from_file.read_chunk_in_pieces(c, &mut got, piece)) {
                    (Ok(()), Ok(())) => {}
                    (Err(a), Err(b)) => {
                        assert_eq!(a.to_string(), b.to_string());
                        assert!(got.is_empty(), "byte {i}, chunk {c}");
                    }
                    (a, b) => panic!("byte {i}, chunk {c}: from memory {a:?}, in pieces {b:?}"),
                }
            }
        }
    }
}
