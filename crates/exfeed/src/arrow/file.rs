//! Parquet and Arrow IPC files of the [schema](crate::arrow::schema): [`SequenceWriter`] writes
//! sequences into one, [`ArrowSequences`] reads them back.

use crate::arrow::encode::{arrow_error, parquet_error, BatchBuilder};
use crate::arrow::Value;
use crate::format::FileFormat;
use crate::{Error, Result, SequenceBatch, StreamSpec};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::arrow_writer::{compute_leaves, ArrowColumnChunk, ArrowRowGroupWriterFactory};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use std::collections::VecDeque;
use std::io::Write;
use std::sync::Arc;

/// How [`SequenceWriter`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOptions {
    /// [`FileFormat::Parquet`] or [`FileFormat::ArrowIpc`].
    pub format: FileFormat,
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
    pub fn new(format: FileFormat, chunk_size: u64) -> Self {
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

impl<W: Write + Send, T: Value> SequenceWriter<W, T> {
    /// Starts a file of `streams` with values of type `T` on `out`.
    pub fn new(out: W, streams: &[StreamSpec], options: WriteOptions) -> Result<Self> {
        let builder = BatchBuilder::<T>::new(streams)?;
        let schema = builder.schema().clone();
        let sink = match options.format {
            FileFormat::Parquet => {
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
            FileFormat::ArrowIpc => Sink::Ipc(Box::new(
                arrow_ipc::writer::FileWriter::try_new(out, &schema).map_err(arrow_error)?,
            )),
            other => {
                return Err(Error::config(format!(
                    "{} is not a columnar format",
                    other.describe()
                )))
            }
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

/// Writes the sequences of `specs` that `fill` gives, batch after batch until it returns
/// `false`, to `out` as a Parquet or Arrow IPC file; returns the output, the sequences and the
/// chunks written.
pub fn write_batches<W: Write + Send, T: Value>(
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
