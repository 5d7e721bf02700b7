//! Round trips through record batches and files, and what a file of another schema gets.

use crate::schema::{Streams, META_DIM};
use crate::stream::SequenceStream;
use crate::*;
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, LargeListArray, RecordBatch, RecordBatchReader};
use arrow_schema::{DataType, Field, Schema};
use exfeed::{SequenceBatch, Storage, StreamSpec};
use std::sync::Arc;

fn specs() -> Vec<StreamSpec> {
    let mut x = StreamSpec::new("x", Storage::Dense, 3);
    x.alias = Some("F".into());
    vec![x, StreamSpec::new("y", Storage::Sparse, 1000)]
}

/// `n` sequences of 1..4 samples; sparse samples of 0..3 entries (some empty).
fn sequences<T: Value>(n: u64) -> SequenceBatch<T> {
    let mut b = SequenceBatch::<T>::new(&specs());
    for k in 0..n {
        for t in 0..(k % 4 + 1) {
            let v = |i: u64| T::from_f64((k * 10 + t + i) as f64 / 7.0);
            b.stream_mut(0).push_dense_sample(&[v(0), v(1), v(2)]);
        }
        for t in 0..(k % 3) {
            let entries = (k + t) % 3;
            // Increasing indices, as CBF stores them.
            let mut idx: Vec<u32> = (0..entries)
                .map(|i| (k * 37 + i * 101) as u32 % 1000)
                .collect();
            idx.sort_unstable();
            let val: Vec<T> = (0..entries).map(|i| T::from_f64(i as f64 - 0.5)).collect();
            b.stream_mut(1).push_sparse_sample(&idx, &val);
        }
        b.finish_sequence(k * 3 + 1);
    }
    b
}

fn round_trip<T: Value>(format: ArrowFormat, chunk_size: u64) -> (SequenceBatch<T>, u64) {
    let all = sequences::<T>(500);
    let options = WriteOptions { format, chunk_size };
    let mut w = SequenceWriter::<_, T>::new(Vec::new(), &specs(), options).unwrap();
    // In pieces of 70 sequences, as a reader delivers them.
    for start in (0..all.len()).step_by(70) {
        let mut part = all.empty_like();
        part.push_sequences_from(&all, start..(start + 70).min(all.len()));
        w.write_batch(&part).unwrap();
    }
    assert_eq!(w.sequences(), 500);
    let (bytes, chunks) = w.finish().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, bytes).unwrap();
    let mut file = ArrowSequences::open(&path, &[]).unwrap();
    assert_eq!(file.format(), format);
    assert_eq!(file.streams(), &specs()[..]);
    assert_eq!(file.precision(), T::PRECISION);
    let mut back = all.empty_like();
    let mut b = all.empty_like();
    while file.next_batch(&mut b).unwrap() {
        back.push_sequences_from(&b, 0..b.len());
    }
    assert!(back == all, "{format:?}");
    (back, chunks)
}

#[test]
fn parquet_and_ipc_round_trip_in_chunks_of_the_chunk_size() {
    for format in [ArrowFormat::Parquet, ArrowFormat::Ipc] {
        assert_eq!(round_trip::<f32>(format, 32 << 20).1, 1);
        assert_eq!(round_trip::<f64>(format, 32 << 20).1, 1);
        // About 100 bytes a sequence: 4 KiB chunks are some 12 of them.
        let (_, chunks) = round_trip::<f32>(format, 4096);
        assert!((5..=20).contains(&chunks), "{format:?}: {chunks} chunks");
        // A chunk size below one sequence: a chunk per sequence, none split.
        assert_eq!(round_trip::<f64>(format, 1).1, 500);
    }
}

#[test]
fn the_stream_makes_record_batches_of_about_the_chunk_size() {
    let all = sequences::<f32>(300);
    let specs = specs();
    let source = Arc::new(exfeed::reader::MemorySource::from_batch(
        specs.clone(),
        &all,
        40,
    ));
    let stream = SequenceStream::<f32>::from_chunks(source.clone(), 2..5).unwrap();
    let schema = stream.schema();
    let batches: Vec<RecordBatch> = stream.map(|b| b.unwrap()).collect();
    assert_eq!(batches.len(), 3);
    assert!(batches.iter().all(|b| b.schema() == schema));
    let mut back = all.empty_like();
    let streams = Streams::of(&schema, &[]).unwrap();
    for b in &batches {
        append_record_batch(b, &streams, &mut back).unwrap();
    }
    let mut want = all.empty_like();
    want.push_sequences_from(&all, 80..200);
    assert!(back == want);
    // Sequences from a reader, in record batches of about 2 KiB however they are delivered.
    let data = std::env::temp_dir().join(format!("exfeed-arrow-stream-{}.cbf", std::process::id()));
    let mut w = exfeed::cbf::CbfWriter::new(
        std::fs::File::create(&data).unwrap(),
        &specs,
        Default::default(),
    )
    .unwrap();
    w.write_batch(&all).unwrap();
    w.finish().unwrap();
    let opened = exfeed::open(&data, &exfeed::OpenOptions::default()).unwrap();
    let seqs = opened.sequences::<f32>().unwrap();
    let stream = SequenceStream::from_sequences(seqs, 2048, Box::new(Vec::new())).unwrap();
    let batches: Vec<RecordBatch> = stream.map(|b| b.unwrap()).collect();
    std::fs::remove_file(&data).unwrap();
    assert!(batches.len() > 5, "{} record batches", batches.len());
    let mut back = all.empty_like();
    for b in &batches {
        append_record_batch(b, &streams, &mut back).unwrap();
    }
    // CBF keys are the sequences' indices.
    assert_eq!(back.keys(), (0..300).collect::<Vec<u64>>());
    assert!(back.streams() == all.streams());
}

/// `all` as one record batch.
fn record_batch(all: &SequenceBatch<f32>) -> RecordBatch {
    let mut builder = BatchBuilder::<f32>::new(&specs()).unwrap();
    builder.append(all).unwrap();
    builder.finish().unwrap()
}

/// A record batch of `all`, with its `y` column replaced.
fn with_column(all: &SequenceBatch<f32>, y: Field, column: ArrayRef) -> RecordBatch {
    let rb = record_batch(all);
    let mut fields: Vec<Field> = rb
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields[2] = y;
    let mut columns = rb.columns().to_vec();
    columns[2] = column;
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

#[test]
fn large_lists_and_missing_metadata_read_with_a_given_dim() {
    let all = sequences::<f32>(20);
    let rb = record_batch(&all);
    // The sparse column as a large_list (as Polars writes), without exfeed's metadata.
    let y = rb.column(2).as_list::<i32>();
    let large = LargeListArray::try_new(
        Arc::new(Field::new("item", y.value_type(), false)),
        arrow_buffer::OffsetBuffer::<i64>::from_lengths(
            y.value_offsets().windows(2).map(|w| (w[1] - w[0]) as usize),
        ),
        y.values().clone(),
        None,
    )
    .unwrap();
    let field = Field::new("y", large.data_type().clone(), true);
    let rb = with_column(&all, field, Arc::new(large));
    let err = Streams::of(&rb.schema(), &[]).unwrap_err().to_string();
    assert!(
        err.contains("column 'y': a sparse stream needs its dim") && err.contains(META_DIM),
        "{err}"
    );
    let given = vec![
        StreamSpec::new("x", Storage::Dense, 0),
        StreamSpec::new("y", Storage::Sparse, 1000),
    ];
    let streams = Streams::of(&rb.schema(), &given).unwrap();
    let mut back = all.empty_like();
    append_record_batch(&rb, &streams, &mut back).unwrap();
    assert!(back == all);
    // A dim too small for the indices is an error naming the column.
    let small = vec![StreamSpec::new("y", Storage::Sparse, 5)];
    let streams = Streams::of(&rb.schema(), &small).unwrap();
    let mut out = SequenceBatch::<f32>::new(&streams.specs);
    let err = append_record_batch(&rb, &streams, &mut out)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("column 'y': sparse index") && err.contains("outside [0, 5)"),
        "{err}"
    );
}

#[test]
fn other_schemas_are_errors_naming_the_column() {
    let all = sequences::<f32>(3);
    let strings: ArrayRef = Arc::new(arrow_array::StringArray::from(vec!["a", "b", "c"]));
    let rb = with_column(&all, Field::new("y", DataType::Utf8, false), strings);
    let err = Streams::of(&rb.schema(), &[]).unwrap_err().to_string();
    assert!(
        err.contains("column 'y' is Utf8, which is not an exfeed stream"),
        "{err}"
    );
    // Metadata that contradicts the type.
    let rb = record_batch(&all);
    let mut x = rb.schema().field(1).as_ref().clone();
    x.set_metadata(std::collections::HashMap::from([(
        META_DIM.to_string(),
        "4".to_string(),
    )]));
    let schema = Schema::new(vec![rb.schema().field(0).as_ref().clone(), x]);
    let err = Streams::of(&schema, &[]).unwrap_err().to_string();
    assert!(
        err.contains("column 'x': 'exfeed.dim' is 4, its samples have 3 values"),
        "{err}"
    );
    // A stream the caller asks for that the file lacks.
    let err = Streams::of(&rb.schema(), &[StreamSpec::new("z", Storage::Dense, 3)])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the file has no column 'z' (its columns: key, x, y)"),
        "{err}"
    );
    // A stream named like the key column cannot be written.
    let err = BatchBuilder::<f32>::new(&[StreamSpec::new("key", Storage::Dense, 1)])
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("clash with the key column"), "{err}");
}

#[test]
fn nulls_are_errors_naming_the_column() {
    let all = sequences::<f32>(3);
    let rb = record_batch(&all);
    let y = rb.column(2).as_list::<i32>();
    let (field, offsets, values, _) = y.clone().into_parts();
    let nulls = arrow_buffer::NullBuffer::from(vec![true, false, true]);
    let with_null = arrow_array::ListArray::try_new(field, offsets, values, Some(nulls)).unwrap();
    let mut f = rb.schema().field(2).as_ref().clone();
    f.set_nullable(true);
    let rb = with_column(&all, f, Arc::new(with_null));
    let streams = Streams::of(&rb.schema(), &[]).unwrap();
    let mut out = SequenceBatch::<f32>::new(&streams.specs);
    let err = append_record_batch(&rb, &streams, &mut out)
        .unwrap_err()
        .to_string();
    assert!(err.contains("column 'y': a null at position 1"), "{err}");
}
