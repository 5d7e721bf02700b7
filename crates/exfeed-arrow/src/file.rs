//! Parquet and Arrow IPC files of the [schema](crate::schema): [`SequenceWriter`] writes
//! sequences into one, [`ArrowSequences`] reads them back.

use crate::decode::append_record_batch;
use crate::encode::{arrow_error, BatchBuilder};
use crate::schema::Streams;
use crate::Value;
use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::ArrowError;
use arrow_schema::SchemaRef;
use exfeed::convert::ColumnarFormat;
use exfeed::{
    DiagnosticSink, Element, Error, Precision, Result, SequenceBatch, Sequences, StreamSpec,
};
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::arrow::arrow_writer::{compute_leaves, ArrowColumnChunk, ArrowRowGroupWriterFactory};
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use std::collections::VecDeque;
use std::io::Write;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

/// Which Arrow file: Parquet, or Arrow's IPC file format (Feather v2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArrowFormat {
    /// Apache Parquet (`.parquet`, `.pq`).
    Parquet,
    /// The Arrow IPC file format (`.arrow`, `.feather`, `.ipc`).
    Ipc,
}

impl ArrowFormat {
    /// From the file name's extension (the core library's names, [`ColumnarFormat::from_name`]);
    /// `None` for other names.
    pub fn from_name(path: &Path) -> Option<Self> {
        ColumnarFormat::from_name(path).map(Self::from)
    }

    /// From a file's first bytes: `PAR1` (Parquet) or `ARROW1` (IPC file).
    pub fn from_magic(head: &[u8]) -> Option<Self> {
        if head.starts_with(b"PAR1") {
            Some(ArrowFormat::Parquet)
        } else if head.starts_with(b"ARROW1") {
            Some(ArrowFormat::Ipc)
        } else {
            None
        }
    }

    /// The file's format from its first bytes, or else its name. Only a regular file is
    /// peeked at: a FIFO or device (which cannot be read twice) goes by its name alone.
    pub fn of_file(path: &Path) -> Option<Self> {
        let mut head = [0u8; 6];
        let regular = std::fs::metadata(path).is_ok_and(|m| m.is_file());
        let magic = regular
            .then(|| std::fs::File::open(path).ok())
            .flatten()
            .and_then(|mut f| {
                let n = std::io::Read::read(&mut f, &mut head).ok()?;
                Self::from_magic(&head[..n])
            });
        magic.or_else(|| Self::from_name(path))
    }

    /// `parquet` or `arrow`: the name `--to` takes.
    pub fn short_name(self) -> &'static str {
        match self {
            ArrowFormat::Parquet => "parquet",
            ArrowFormat::Ipc => "arrow",
        }
    }

    /// "Parquet" or "Arrow IPC".
    pub fn describe(self) -> &'static str {
        ColumnarFormat::from(self).describe()
    }
}

impl From<ArrowFormat> for ColumnarFormat {
    fn from(format: ArrowFormat) -> Self {
        match format {
            ArrowFormat::Parquet => ColumnarFormat::Parquet,
            ArrowFormat::Ipc => ColumnarFormat::ArrowIpc,
        }
    }
}

impl From<ColumnarFormat> for ArrowFormat {
    fn from(format: ColumnarFormat) -> Self {
        match format {
            ColumnarFormat::Parquet => ArrowFormat::Parquet,
            ColumnarFormat::ArrowIpc => ArrowFormat::Ipc,
        }
    }
}

/// How [`SequenceWriter`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOptions {
    /// Parquet or Arrow IPC.
    pub format: ArrowFormat,
    /// Bytes of data (values, indices, keys, offsets) per record batch, which is also one
    /// Parquet row group: as exfeed's chunks, the unit a reader decodes at once. A sequence is
    /// never split; a batch ends after the sequence that reaches the size.
    pub chunk_size: u64,
    /// Threads that encode and compress Parquet row groups, each its own (0: one per core, at
    /// most 4; 1: on the writing thread). The file's bytes are the same for any number.
    pub threads: usize,
}

impl WriteOptions {
    /// `format` in record batches of `chunk_size` bytes, encoded on every core.
    pub fn new(format: ArrowFormat, chunk_size: u64) -> Self {
        WriteOptions {
            format,
            chunk_size,
            threads: 0,
        }
    }
}

/// The most Parquet encoding threads [`WriteOptions::threads`] 0 starts: each holds a row group
/// and its encoder's state (rep/def levels of every value: for small values more than the data),
/// so memory grows with them.
const MAX_ENCODING_THREADS: usize = 4;

/// Encodes a record batch into the column chunks of one Parquet row group, on any thread.
struct RowGroupEncoder {
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
}

impl RowGroupEncoder {
    fn encode(&self, index: usize, rb: &RecordBatch) -> Result<Vec<ArrowColumnChunk>> {
        let mut writers = self
            .factory
            .create_column_writers(index)
            .map_err(parquet_error)?;
        let mut next = writers.iter_mut();
        for (field, column) in self.schema.fields().iter().zip(rb.columns()) {
            for leaf in compute_leaves(field, column).map_err(parquet_error)? {
                let writer = next.next().expect("a writer per leaf column");
                writer.write(&leaf).map_err(parquet_error)?;
            }
        }
        writers
            .into_iter()
            .map(|w| w.close().map_err(parquet_error))
            .collect()
    }
}

type Encoded = Result<Vec<ArrowColumnChunk>>;

/// Row groups being encoded on threads of their own, in file order.
struct EncodingThreads {
    jobs: crossbeam_channel::Sender<(usize, RecordBatch, crossbeam_channel::Sender<Encoded>)>,
    pending: VecDeque<crossbeam_channel::Receiver<Encoded>>,
    threads: usize,
}

impl EncodingThreads {
    fn start(encoder: &Arc<RowGroupEncoder>, threads: usize) -> Self {
        let (jobs, rx) = crossbeam_channel::unbounded::<(
            usize,
            RecordBatch,
            crossbeam_channel::Sender<Encoded>,
        )>();
        for _ in 0..threads {
            let (rx, encoder) = (rx.clone(), encoder.clone());
            // Each ends when the writer drops `jobs` (or the result is no longer wanted).
            std::thread::spawn(move || {
                for (index, rb, done) in rx {
                    if done.send(encoder.encode(index, &rb)).is_err() {
                        break;
                    }
                }
            });
        }
        EncodingThreads {
            jobs,
            pending: VecDeque::new(),
            threads,
        }
    }
}

enum Sink<W: Write + Send> {
    Parquet {
        file: Box<SerializedFileWriter<W>>,
        encoder: Arc<RowGroupEncoder>,
        /// `None`: row groups are encoded on the writing thread.
        threads: Option<EncodingThreads>,
    },
    Ipc(Box<arrow_ipc::writer::FileWriter<W>>),
}

/// Writes sequences to a Parquet or Arrow IPC file, one record batch (and row group) per chunk,
/// and the file is complete only after [`SequenceWriter::finish`]. Parquet row groups are
/// encoded and compressed on [`WriteOptions::threads`] threads, each row group on one, and
/// written in order: memory holds the chunk being built and up to one row group per thread
/// (and one more while the oldest is waited for).
pub struct SequenceWriter<W: Write + Send, T: Value> {
    builder: BatchBuilder<T>,
    sink: Sink<W>,
    chunk_size: usize,
    sequences: u64,
    chunks: u64,
}

/// How exfeed writes Parquet: Snappy, a row group per chunk.
pub(crate) fn parquet_properties() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        // Row groups end where chunks do, not at a row count.
        .set_max_row_group_row_count(None)
        .set_created_by(format!("exfeed {}", env!("CARGO_PKG_VERSION")))
        .build()
}

fn parquet_error(e: parquet::errors::ParquetError) -> Error {
    Error::config(format!("Parquet: {e}"))
}

impl<W: Write + Send, T: Value> SequenceWriter<W, T> {
    /// Starts a file of `streams` with values of type `T` on `out`.
    pub fn new(out: W, streams: &[StreamSpec], options: WriteOptions) -> Result<Self> {
        let builder = BatchBuilder::<T>::new(streams)?;
        let schema = builder.schema().clone();
        let sink = match options.format {
            ArrowFormat::Parquet => {
                // The writer that `ArrowWriter` is made of (with the Arrow schema in the
                // file's metadata), driven a row group at a time.
                let props = parquet_properties();
                let (file, factory) = ArrowWriter::try_new(out, schema.clone(), Some(props))
                    .and_then(ArrowWriter::into_serialized_writer)
                    .map_err(parquet_error)?;
                let encoder = Arc::new(RowGroupEncoder { factory, schema });
                let threads = match options.threads {
                    0 => std::thread::available_parallelism()
                        .map_or(1, |n| n.get())
                        .min(MAX_ENCODING_THREADS),
                    n => n,
                };
                Sink::Parquet {
                    file: Box::new(file),
                    threads: (threads > 1).then(|| EncodingThreads::start(&encoder, threads)),
                    encoder,
                }
            }
            ArrowFormat::Ipc => Sink::Ipc(Box::new(
                arrow_ipc::writer::FileWriter::try_new(out, &schema).map_err(arrow_error)?,
            )),
        };
        Ok(SequenceWriter {
            builder,
            sink,
            chunk_size: options.chunk_size.clamp(1, usize::MAX as u64) as usize,
            sequences: 0,
            chunks: 0,
        })
    }

    /// Appends the sequences of `batch`, writing a chunk whenever one is full (a batch larger
    /// than a chunk is cut between sequences).
    pub fn write_batch(&mut self, batch: &SequenceBatch<T>) -> Result<()> {
        let mut start = 0;
        while start < batch.len() {
            start = self.builder.fill_from(batch, start, self.chunk_size)?;
            if self.builder.bytes() >= self.chunk_size {
                self.write_chunk()?;
            }
        }
        self.sequences += batch.len() as u64;
        Ok(())
    }

    fn write_chunk(&mut self) -> Result<()> {
        let rb = self.builder.finish()?;
        let index = self.chunks as usize;
        self.chunks += 1;
        match &mut self.sink {
            Sink::Parquet {
                file,
                encoder,
                threads: None,
            } => append_row_group(file, encoder.encode(index, &rb)),
            Sink::Parquet {
                file,
                threads: Some(t),
                ..
            } => {
                let (done, result) = crossbeam_channel::bounded(1);
                t.jobs
                    .send((index, rb, done))
                    .map_err(|_| Error::config("the Parquet encoding threads stopped"))?;
                t.pending.push_back(result);
                // One row group per thread in flight (memory), written as soon as it can be.
                while t.pending.len() > t.threads {
                    append_row_group(file, next_encoded(t))?;
                }
                Ok(())
            }
            Sink::Ipc(w) => w.write(&rb).map_err(arrow_error),
        }
    }

    /// Sequences written so far.
    pub fn sequences(&self) -> u64 {
        self.sequences
    }

    /// Writes the last chunk and the file's footer, and returns the output and the number of
    /// chunks (record batches, row groups) written.
    pub fn finish(mut self) -> Result<(W, u64)> {
        if !self.builder.is_empty() {
            self.write_chunk()?;
        }
        let out = match self.sink {
            Sink::Parquet {
                mut file,
                mut threads,
                ..
            } => {
                if let Some(t) = &mut threads {
                    while !t.pending.is_empty() {
                        append_row_group(&mut file, next_encoded(t))?;
                    }
                }
                file.into_inner().map_err(parquet_error)?
            }
            Sink::Ipc(mut w) => {
                w.finish().map_err(arrow_error)?;
                w.into_inner().map_err(arrow_error)?
            }
        };
        Ok((out, self.chunks))
    }
}

/// The oldest row group in flight, once encoded.
fn next_encoded(threads: &mut EncodingThreads) -> Encoded {
    let result = threads.pending.pop_front().expect("a row group in flight");
    result
        .recv()
        .map_err(|_| Error::config("a Parquet encoding thread stopped"))?
}

/// Appends an encoded row group to the file.
fn append_row_group<W: Write + Send>(
    file: &mut SerializedFileWriter<W>,
    chunks: Encoded,
) -> Result<()> {
    let mut row_group = file.next_row_group().map_err(parquet_error)?;
    for chunk in chunks? {
        chunk
            .append_to_row_group(&mut row_group)
            .map_err(parquet_error)?;
    }
    row_group.close().map_err(parquet_error)?;
    Ok(())
}

/// Writes every sequence of `sequences` to `out` as a Parquet or Arrow IPC file; returns the
/// output, the sequences and the chunks written. Problems the reading tolerates go to `sink`.
pub fn write_sequences<W: Write + Send, T: Value>(
    mut sequences: Sequences<T>,
    out: W,
    options: WriteOptions,
    sink: &mut dyn DiagnosticSink,
) -> Result<(W, u64, u64)> {
    let specs = sequences.streams().to_vec();
    write_batches(&specs, |b| sequences.next_batch(b, sink), out, options)
}

/// Writes the sequences of `specs` that `fill` gives, batch after batch until it returns
/// `false`, to `out` as a Parquet or Arrow IPC file; returns the output, the sequences and the
/// chunks written.
pub(crate) fn write_batches<W: Write + Send, T: Value>(
    specs: &[StreamSpec],
    mut fill: impl FnMut(&mut SequenceBatch<T>) -> Result<bool>,
    out: W,
    options: WriteOptions,
) -> Result<(W, u64, u64)> {
    let mut writer = SequenceWriter::<W, T>::new(out, specs, options)?;
    let mut batch = SequenceBatch::<T>::new(specs);
    while fill(&mut batch)? {
        writer.write_batch(&batch)?;
    }
    let n = writer.sequences();
    let (out, chunks) = writer.finish()?;
    Ok((out, n, chunks))
}

/// Rows per record batch read from a Parquet file.
const PARQUET_BATCH_ROWS: usize = 1024;

/// The sequences of a Parquet or Arrow IPC file of the [schema](crate::schema), read a record
/// batch at a time. Only the columns of the streams read (and the keys) are read from the file,
/// and, when chunks are chosen ([`ArrowSequences::open_chunks`]), only their row groups.
pub struct ArrowSequences {
    name: String,
    format: ArrowFormat,
    pub(crate) streams: Streams,
    chunks: usize,
    batches: Box<dyn RecordBatchReader + Send>,
}

/// What [`Streams::of`] found in a file's schema, as the columns of its projection: the key
/// and the selected streams' columns, in file order; returns those columns and the streams
/// renumbered to them.
fn project(streams: Streams) -> (Vec<usize>, Streams) {
    let mut read = streams.columns.clone();
    read.push(streams.key_column);
    read.sort_unstable();
    let at = |c: usize| read.binary_search(&c).expect("a column read");
    let projected = Streams {
        key_column: at(streams.key_column),
        columns: streams.columns.iter().map(|&c| at(c)).collect(),
        ..streams
    };
    (read, projected)
}

/// A Parquet file's record batches: the projection of the streams `given` selects, of row
/// groups `chunks` (all when `None`); and the file's row group count.
pub(crate) fn parquet_batches<R: parquet::file::reader::ChunkReader + 'static>(
    file: R,
    given: &[StreamSpec],
    chunks: Option<Range<usize>>,
) -> Result<(Streams, ParquetRecordBatchReader, usize)> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(parquet_error)?;
    let (columns, streams) = project(Streams::of(builder.schema(), given)?);
    let groups = builder.metadata().num_row_groups();
    let mask = ProjectionMask::roots(builder.parquet_schema(), columns);
    let mut builder = builder
        .with_projection(mask)
        .with_batch_size(PARQUET_BATCH_ROWS);
    if let Some(chunks) = chunks {
        check_chunks(&chunks, groups)?;
        builder = builder.with_row_groups(chunks.collect());
    }
    Ok((streams, builder.build().map_err(parquet_error)?, groups))
}

fn check_chunks(chunks: &Range<usize>, count: usize) -> Result<()> {
    if chunks.start > chunks.end || chunks.end > count {
        return Err(Error::config(format!(
            "chunks {}..{} of a file of {count}",
            chunks.start, chunks.end
        )));
    }
    Ok(())
}

/// An Arrow IPC file's record batches `chunks` (all when `None`), of the columns of the
/// streams `given` selects.
struct IpcBatches {
    reader: arrow_ipc::reader::FileReader<std::io::BufReader<std::fs::File>>,
    left: usize,
}

impl Iterator for IpcBatches {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.left = self.left.checked_sub(1)?;
        self.reader.next()
    }
}

impl RecordBatchReader for IpcBatches {
    fn schema(&self) -> arrow_schema::SchemaRef {
        self.reader.schema()
    }
}

fn ipc_batches(
    file: std::fs::File,
    given: &[StreamSpec],
    chunks: Option<Range<usize>>,
) -> Result<(Streams, IpcBatches, usize)> {
    let again = file.try_clone().map_err(Error::from)?;
    let all = arrow_ipc::reader::FileReader::try_new(std::io::BufReader::new(file), None)
        .map_err(arrow_error)?;
    let (columns, streams) = project(Streams::of(&all.schema(), given)?);
    let count = all.num_batches();
    // Opened again with the projection (the footer is read again: a few bytes).
    let mut reader =
        arrow_ipc::reader::FileReader::try_new(std::io::BufReader::new(again), Some(columns))
            .map_err(arrow_error)?;
    let chunks = chunks.unwrap_or(0..count);
    check_chunks(&chunks, count)?;
    if chunks.start < count {
        reader.set_index(chunks.start).map_err(arrow_error)?;
    }
    let left = chunks.len();
    Ok((streams, IpcBatches { reader, left }, count))
}

impl ArrowSequences {
    /// Opens `path` (Parquet or Arrow IPC, by its first bytes, else its name) and reads its
    /// schema. `given` selects streams and supplies missing dims (see [`Streams::of`]): only
    /// their columns are read. A file of another schema is an error naming the column.
    pub fn open(path: &Path, given: &[StreamSpec]) -> Result<Self> {
        Self::open_chunks(path, given, None)
    }

    /// As [`ArrowSequences::open`], reading only the chunks `chunks` (Parquet row groups,
    /// Arrow IPC record batches: exfeed writes one per chunk), all when `None`: a worker
    /// reading its share of a file reads only its row groups.
    pub fn open_chunks(
        path: &Path,
        given: &[StreamSpec],
        chunks: Option<Range<usize>>,
    ) -> Result<Self> {
        let name = path.display().to_string();
        let in_file = |e: Error| e.in_file(name.clone());
        let format = ArrowFormat::of_file(path)
            .ok_or_else(|| in_file(Error::config("neither a Parquet nor an Arrow IPC file")))?;
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let (streams, batches, count): (_, Box<dyn RecordBatchReader + Send>, _) = match format {
            ArrowFormat::Parquet => {
                let (s, b, n) = parquet_batches(file, given, chunks).map_err(in_file)?;
                (s, Box::new(b), n)
            }
            ArrowFormat::Ipc => {
                let (s, b, n) = ipc_batches(file, given, chunks).map_err(in_file)?;
                (s, Box::new(b), n)
            }
        };
        Ok(ArrowSequences {
            name,
            format,
            streams,
            chunks: count,
            batches,
        })
    }

    /// The file's chunks: its row groups (Parquet) or record batches (Arrow IPC).
    pub fn num_chunks(&self) -> usize {
        self.chunks
    }

    /// Parquet or Arrow IPC.
    pub fn format(&self) -> ArrowFormat {
        self.format
    }

    /// The streams of every batch, in order.
    pub fn streams(&self) -> &[StreamSpec] {
        &self.streams.specs
    }

    /// The precision of the file's values (`Double` when any stream holds `float64`).
    pub fn precision(&self) -> Precision {
        self.streams.precision
    }

    /// The next record batch of the file, as it is stored.
    pub fn next_record_batch(&mut self) -> Result<Option<RecordBatch>> {
        self.batches
            .next()
            .transpose()
            .map_err(|e: ArrowError| arrow_error(e).in_file(self.name.clone()))
    }

    /// Fills `batch` (cleared first; its streams are [`ArrowSequences::streams`]) with the
    /// sequences of the next record batch; `false` at the end of the file.
    pub fn next_batch<T: Element>(&mut self, batch: &mut SequenceBatch<T>) -> Result<bool> {
        batch.clear();
        while batch.is_empty() {
            let Some(rb) = self.next_record_batch()? else {
                return Ok(false);
            };
            append_record_batch(&rb, &self.streams, batch)
                .map_err(|e| e.in_file(self.name.clone()))?;
        }
        Ok(true)
    }
}
