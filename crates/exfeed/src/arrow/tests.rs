//! Round trips through record batches and files, and what a file of another schema gets.

use crate::arrow::read::{parquet_batches, project};
use crate::arrow::schema::{Streams, META_DIM};
use crate::arrow::*;
use crate::convert::arrow_stream::SequenceStream;
use crate::convert::write_sequences;
use crate::format::FileFormat;
use crate::{SequenceBatch, Storage, StreamSpec};
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, LargeListArray, RecordBatch, RecordBatchReader};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
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

fn round_trip<T: Value>(format: FileFormat, chunk_size: u64) -> (SequenceBatch<T>, u64) {
    let all = sequences::<T>(500);
    let options = WriteOptions::new(format, chunk_size);
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
    for format in [FileFormat::Parquet, FileFormat::ArrowIpc] {
        assert_eq!(round_trip::<f32>(format, 32 << 20).1, 1);
        assert_eq!(round_trip::<f64>(format, 32 << 20).1, 1);
        // About 100 bytes a sequence: 4 KiB chunks are some 12 of them.
        let (_, chunks) = round_trip::<f32>(format, 4096);
        assert!((5..=20).contains(&chunks), "{format:?}: {chunks} chunks");
        // A chunk size below one sequence: a chunk per sequence, none split.
        assert_eq!(round_trip::<f64>(format, 1).1, 500);
    }
}

/// `all` written as Parquet with `threads` encoding threads, in batches of `step` sequences.
fn parquet_bytes(
    all: &SequenceBatch<f32>,
    chunk_size: u64,
    threads: usize,
    step: usize,
) -> Vec<u8> {
    let options = WriteOptions {
        threads,
        ..WriteOptions::new(FileFormat::Parquet, chunk_size)
    };
    let mut w = SequenceWriter::<_, f32>::new(Vec::new(), &specs(), options).unwrap();
    for start in (0..all.len()).step_by(step) {
        let mut part = all.empty_like();
        part.push_sequences_from(all, start..(start + step).min(all.len()));
        w.write_batch(&part).unwrap();
    }
    w.finish().unwrap().0
}

#[test]
fn parquet_is_the_same_file_on_any_number_of_threads_however_the_sequences_come() {
    let all = sequences::<f32>(500);
    let one = parquet_bytes(&all, 2048, 1, 500);
    let file = tempfile::tempfile().unwrap();
    std::io::Write::write_all(&mut &file, &one).unwrap();
    let groups = parquet::file::reader::FileReader::metadata(
        &parquet::file::serialized_reader::SerializedFileReader::new(file).unwrap(),
    )
    .num_row_groups();
    assert!(groups > 10, "{groups} row groups");
    for threads in [0, 2, 3, 8] {
        for step in [1, 70, 500] {
            let other = parquet_bytes(&all, 2048, threads, step);
            assert!(other == one, "{threads} threads, batches of {step}");
        }
    }
    // And the file is what parquet's own ArrowWriter writes of the same record batches, a row
    // group each.
    let mut builder = BatchBuilder::<f32>::new(&specs()).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(
        Vec::new(),
        builder.schema().clone(),
        Some(crate::arrow::file::parquet_properties()),
    )
    .unwrap();
    let mut start = 0;
    while start < all.len() {
        start = builder.fill_from(&all, start, 2048).unwrap();
        if builder.bytes() >= 2048 || start == all.len() {
            w.write(&builder.finish().unwrap()).unwrap();
            w.flush().unwrap();
        }
    }
    assert!(w.into_inner().unwrap() == one);
}

/// 200 sequences of two lines of CTF text, of the streams of [`specs`].
fn ctf_text() -> String {
    let mut text = String::new();
    for k in 0..400 {
        text += &format!("{} |F {k} 0.5 -1 |y {}:1.25\n", k / 2, (k * 7) % 1000);
    }
    text
}

fn ctf_options() -> crate::OpenOptions {
    crate::OpenOptions {
        inputs: specs(),
        ..Default::default()
    }
}

#[test]
fn ctf_parsed_in_pieces_gives_the_file_the_stream_gives() {
    let dir = tempfile::tempdir().unwrap();
    let (ctf, text) = (dir.path().join("in.ctf"), ctf_text());
    std::fs::write(&ctf, &text).unwrap();
    let open = || crate::open(&ctf, &ctf_options()).unwrap();
    let write = WriteOptions::new(FileFormat::Parquet, 1000);
    let stream = |write| {
        let seqs = open().sequences::<f32>().unwrap();
        write_sequences(seqs, Vec::new(), write, &mut Vec::new()).unwrap()
    };
    let (want, sequences, chunks) = stream(write);
    assert_eq!(sequences, 200);
    assert!(chunks > 5, "{chunks} chunks");
    for piece in [1, 100, 5000, 1 << 20] {
        for threads in [1, 2] {
            let w = WriteOptions { threads, ..write };
            let (got, n) = crate::convert::columnar::write_ctf_pieces::<_, f32>(
                open(),
                Vec::new(),
                w,
                &mut Vec::new(),
                piece,
            )
            .unwrap();
            assert_eq!(n, 200);
            assert!(got == want, "pieces of {piece} bytes, {threads} threads");
        }
    }
    // Arrow IPC too.
    let ipc = WriteOptions::new(FileFormat::ArrowIpc, 1000);
    let (want, _, _) = stream(ipc);
    let (got, _) = crate::convert::columnar::write_ctf_pieces::<_, f32>(
        open(),
        Vec::new(),
        ipc,
        &mut Vec::new(),
        100,
    )
    .unwrap();
    assert!(got == want);
    // The first bad line in file order is the error, as in the stream.
    let bad = text
        .replace("|F 37 0.5", "|F 37 x.5")
        .replace("|F 301 0.5", "|F 301 0.5 2");
    std::fs::write(&ctf, &bad).unwrap();
    let seqs = open().sequences::<f32>().unwrap();
    let want = write_sequences(seqs, Vec::new(), write, &mut Vec::new())
        .unwrap_err()
        .to_string();
    assert!(want.contains("in.ctf:38:"), "{want}");
    for piece in [1, 100, 5000] {
        let got = crate::convert::columnar::write_ctf_pieces::<_, f32>(
            open(),
            Vec::new(),
            write,
            &mut Vec::new(),
            piece,
        )
        .unwrap_err();
        assert_eq!(got.to_string(), want, "pieces of {piece} bytes");
    }
}

#[test]
fn the_stream_makes_record_batches_of_about_the_chunk_size() {
    let all = sequences::<f32>(300);
    let specs = specs();
    let source = Arc::new(crate::source::MemorySource::from_batch(
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
    let mut w = crate::cbf::CbfWriter::new(
        std::fs::File::create(&data).unwrap(),
        &specs,
        Default::default(),
    )
    .unwrap();
    w.write_batch(&all).unwrap();
    w.finish().unwrap();
    let opened = crate::open(&data, &crate::OpenOptions::default()).unwrap();
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

/// A Parquet file that records the byte ranges read from it.
struct Recording {
    file: std::fs::File,
    read: Arc<std::sync::Mutex<Vec<Range<u64>>>>,
}

impl parquet::file::reader::Length for Recording {
    fn len(&self) -> u64 {
        parquet::file::reader::Length::len(&self.file)
    }
}

impl parquet::file::reader::ChunkReader for Recording {
    type T = Logged;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Logged> {
        let mut file = self.file.try_clone()?;
        std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(start))?;
        Ok(Logged {
            file,
            at: start,
            read: self.read.clone(),
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<bytes::Bytes> {
        self.read.lock().unwrap().push(start..start + length as u64);
        self.file.get_bytes(start, length)
    }
}

/// A reader of the file from a place, recording the bytes it gives.
struct Logged {
    file: std::fs::File,
    at: u64,
    read: Arc<std::sync::Mutex<Vec<Range<u64>>>>,
}

impl std::io::Read for Logged {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read(buf)?;
        self.read.lock().unwrap().push(self.at..self.at + n as u64);
        self.at += n as u64;
        Ok(n)
    }
}

use std::ops::Range;

#[test]
fn a_stream_selection_reads_only_its_columns_and_chosen_chunks_only_their_row_groups() {
    let all = sequences::<f32>(300);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.parquet");
    std::fs::write(&path, parquet_bytes(&all, 2048, 1, 300)).unwrap();
    let meta = parquet::file::serialized_reader::SerializedFileReader::new(
        std::fs::File::open(&path).unwrap(),
    )
    .unwrap();
    let meta = parquet::file::reader::FileReader::metadata(&meta).clone();
    let groups = meta.num_row_groups();
    assert!(groups > 8, "{groups} row groups");
    // The byte ranges of the leaf columns (key, x; y's indices and values) of each row group.
    let chunk = |g: usize, leaf: usize| {
        let (start, len) = meta.row_group(g).column(leaf).byte_range();
        start..start + len
    };
    let overlaps = |read: &[Range<u64>], r: &Range<u64>| {
        read.iter().any(|x| x.start < r.end && r.start < x.end)
    };
    let read = |given: &[StreamSpec], chunks: Option<Range<usize>>| {
        let recording = Recording {
            file: std::fs::File::open(&path).unwrap(),
            read: Default::default(),
        };
        let log = recording.read.clone();
        let footer = ArrowReaderMetadata::load(&recording, Default::default()).unwrap();
        let (columns, streams) = project(Streams::of(footer.schema(), given).unwrap());
        let chunks = chunks.unwrap_or(0..groups);
        let batches = parquet_batches(recording, &footer, &columns, chunks).unwrap();
        let mut back = SequenceBatch::<f32>::new(&streams.specs);
        for rb in batches {
            let rb = rb.unwrap();
            // Only the key and the selected columns are decoded.
            let streams_read = if given.is_empty() { 2 } else { given.len() };
            assert_eq!(rb.num_columns(), streams_read + 1);
            append_record_batch(&rb, &streams, &mut back).unwrap();
        }
        let log = log.lock().unwrap().clone();
        (back, log)
    };
    // Everything: every column chunk is read (so the checks below can fail).
    let (back, log) = read(&[], None);
    assert!(back == all);
    assert!((0..groups).all(|g| (0..4).all(|leaf| overlaps(&log, &chunk(g, leaf)))));
    // Only `y`: x's column chunks are never read, y's are.
    let y = [StreamSpec::new("y", Storage::Sparse, 0)];
    let (back, log) = read(&y, None);
    assert_eq!(back.keys(), all.keys());
    assert!(back.streams()[0] == all.streams()[1]);
    for g in 0..groups {
        assert!(!overlaps(&log, &chunk(g, 1)), "row group {g}: x was read");
        assert!(overlaps(&log, &chunk(g, 2)) && overlaps(&log, &chunk(g, 3)));
    }
    // Only `x` of row groups 2..5: nothing of the others, nor of y.
    let x = [StreamSpec::new("x", Storage::Dense, 0)];
    let (back, log) = read(&x, Some(2..5));
    let first = meta.row_groups()[..2]
        .iter()
        .map(|g| g.num_rows())
        .sum::<i64>() as usize;
    let rows = meta.row_groups()[2..5]
        .iter()
        .map(|g| g.num_rows())
        .sum::<i64>() as usize;
    assert_eq!(back.keys(), &all.keys()[first..first + rows]);
    for g in 0..groups {
        let wanted = (2..5).contains(&g);
        assert_eq!(overlaps(&log, &chunk(g, 1)), wanted, "row group {g}");
        assert!(!overlaps(&log, &chunk(g, 2)) && !overlaps(&log, &chunk(g, 3)));
    }
    // Out of range: an error, not a panic.
    let input = ColumnarInput::file(&path).unwrap();
    let file = ColumnarFile::open(input, "f.parquet", FileFormat::Parquet, &x).unwrap();
    let err = file.sequences(Some(groups..groups + 1)).err().unwrap();
    assert!(
        err.to_string().contains(&format!("of a file of {groups}")),
        "{err}"
    );
}

#[test]
fn arrow_ipc_reads_chosen_record_batches_of_the_selected_columns() {
    let all = sequences::<f32>(300);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.arrow");
    let options = WriteOptions::new(FileFormat::ArrowIpc, 2048);
    let mut w = SequenceWriter::<_, f32>::new(Vec::new(), &specs(), options).unwrap();
    w.write_batch(&all).unwrap();
    let (bytes, chunks) = w.finish().unwrap();
    std::fs::write(&path, bytes).unwrap();
    let y = [StreamSpec::new("y", Storage::Sparse, 0)];
    let mut file = ArrowSequences::open_chunks(&path, &y, Some(1..3)).unwrap();
    assert_eq!(file.num_chunks() as u64, chunks);
    let (mut back, mut rows) = (SequenceBatch::<f32>::new(file.streams()), Vec::new());
    while let Some(rb) = file.next_record_batch().unwrap() {
        assert_eq!(rb.num_columns(), 2);
        rows.push(rb.num_rows());
        let mut b = SequenceBatch::<f32>::new(file.streams());
        append_record_batch(&rb, file.projected_streams(), &mut b).unwrap();
        back.push_sequences_from(&b, 0..b.len());
    }
    assert_eq!(rows.len(), 2);
    let mut all_file = ArrowSequences::open(&path, &[]).unwrap();
    let first = all_file.next_record_batch().unwrap().unwrap().num_rows();
    let want: Vec<u64> = all.keys()[first..first + rows[0] + rows[1]].to_vec();
    assert_eq!(back.keys(), &want[..]);
    // The last chunk, and none.
    let last = ArrowSequences::open_chunks(&path, &y, Some(chunks as usize - 1..chunks as usize));
    assert!(last.unwrap().next_record_batch().unwrap().is_some());
    let none = ArrowSequences::open_chunks(&path, &y, Some(3..3));
    assert!(none.unwrap().next_record_batch().unwrap().is_none());
}

#[test]
fn a_ctf_file_streams_the_record_batches_of_one_parser_when_parsed_on_every_core() {
    let dir = tempfile::tempdir().unwrap();
    let (ctf, text) = (dir.path().join("in.ctf"), ctf_text());
    std::fs::write(&ctf, &text).unwrap();
    let open = || crate::open(&ctf, &ctf_options()).unwrap();
    let batches =
        |stream: SequenceStream<f32>| -> Vec<RecordBatch> { stream.map(|b| b.unwrap()).collect() };
    let seqs = open().sequences::<f32>().unwrap();
    let want = batches(SequenceStream::from_sequences(seqs, 1000, Box::new(Vec::new())).unwrap());
    assert!(want.len() > 5, "{} record batches", want.len());
    for piece in [1, 100, 5000] {
        let s =
            SequenceStream::<f32>::from_data_in_pieces(open(), 1000, Box::new(Vec::new()), piece);
        assert!(batches(s.unwrap()) == want, "pieces of {piece} bytes");
    }
    // Dropped after one record batch: the parsing thread stops (nothing hangs), and has stopped
    // when drop returns: the file may then be truncated and rewritten in place (were the
    // thread still reading its mapping, that would be a SIGBUS).
    for _ in 0..20 {
        let mut s =
            SequenceStream::<f32>::from_data_in_pieces(open(), 1000, Box::new(Vec::new()), 100)
                .unwrap();
        assert!(s.next().unwrap().is_ok());
        drop(s);
        std::fs::File::create(&ctf).unwrap();
        std::fs::write(&ctf, &text).unwrap();
    }
    // The error of the first bad line in file order ends the stream, after the record batches
    // before it.
    std::fs::write(&ctf, text.replace("|F 301 0.5", "|F 301 x.5")).unwrap();
    let in_pieces =
        SequenceStream::<f32>::from_data_in_pieces(open(), 1000, Box::new(Vec::new()), 100);
    let seqs = open().sequences::<f32>().unwrap();
    let streamed = SequenceStream::from_sequences(seqs, 1000, Box::new(Vec::new()));
    for mut s in [in_pieces.unwrap(), streamed.unwrap()] {
        let mut rows = 0;
        let err = loop {
            match s.next().unwrap() {
                Ok(rb) => rows += rb.num_rows(),
                Err(e) => break e.to_string(),
            }
        };
        assert!(err.contains("in.ctf:302:"), "{err}");
        // Every sequence before the bad one (key 150).
        assert_eq!(rows, 150);
        assert!(s.next().is_none());
    }
}
