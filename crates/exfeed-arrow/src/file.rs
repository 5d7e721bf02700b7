//! Parquet and Arrow IPC files of the [schema](crate::schema): [`SequenceWriter`] writes
//! sequences into one, [`ArrowSequences`] reads them back.

use crate::decode::append_record_batch;
use crate::encode::{arrow_error, BatchBuilder};
use crate::schema::Streams;
use crate::Value;
use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::ArrowError;
use exfeed::{
    DiagnosticSink, Element, Error, Precision, Result, SequenceBatch, Sequences, StreamSpec,
};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use std::io::Write;
use std::path::Path;

/// Which Arrow file: Parquet, or Arrow's IPC file format (Feather v2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArrowFormat {
    /// Apache Parquet (`.parquet`, `.pq`).
    Parquet,
    /// The Arrow IPC file format (`.arrow`, `.feather`, `.ipc`).
    Ipc,
}

impl ArrowFormat {
    /// From the file name's extension; `None` for other names.
    pub fn from_name(path: &Path) -> Option<Self> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("parquet" | "pq") => Some(ArrowFormat::Parquet),
            Some("arrow" | "feather" | "ipc") => Some(ArrowFormat::Ipc),
            _ => None,
        }
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
        match self {
            ArrowFormat::Parquet => "Parquet",
            ArrowFormat::Ipc => "Arrow IPC",
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
}

enum Sink<W: Write + Send> {
    Parquet(Box<ArrowWriter<W>>),
    Ipc(Box<arrow_ipc::writer::FileWriter<W>>),
}

/// Writes sequences to a Parquet or Arrow IPC file, one record batch (and row group) per chunk:
/// memory holds one chunk, and the file is complete only after [`SequenceWriter::finish`].
pub struct SequenceWriter<W: Write + Send, T: Value> {
    builder: BatchBuilder<T>,
    sink: Sink<W>,
    chunk_size: usize,
    sequences: u64,
    chunks: u64,
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
                let props = WriterProperties::builder()
                    .set_compression(Compression::SNAPPY)
                    // Row groups end where chunks do, not at a row count.
                    .set_max_row_group_row_count(None)
                    .set_created_by(format!("exfeed {}", env!("CARGO_PKG_VERSION")))
                    .build();
                Sink::Parquet(Box::new(
                    ArrowWriter::try_new(out, schema, Some(props)).map_err(parquet_error)?,
                ))
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
        match &mut self.sink {
            Sink::Parquet(w) => {
                w.write(&rb).map_err(parquet_error)?;
                w.flush().map_err(parquet_error)?;
            }
            Sink::Ipc(w) => w.write(&rb).map_err(arrow_error)?,
        }
        self.chunks += 1;
        Ok(())
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
            Sink::Parquet(w) => w.into_inner().map_err(parquet_error)?,
            Sink::Ipc(mut w) => {
                w.finish().map_err(arrow_error)?;
                w.into_inner().map_err(arrow_error)?
            }
        };
        Ok((out, self.chunks))
    }
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
    let mut writer = SequenceWriter::<W, T>::new(out, &specs, options)?;
    let mut batch = SequenceBatch::<T>::new(&specs);
    while sequences.next_batch(&mut batch, sink)? {
        writer.write_batch(&batch)?;
    }
    let n = writer.sequences();
    let (out, chunks) = writer.finish()?;
    Ok((out, n, chunks))
}

/// Rows per record batch read from a Parquet file.
const PARQUET_BATCH_ROWS: usize = 1024;

/// The sequences of a Parquet or Arrow IPC file of the [schema](crate::schema), read a record
/// batch at a time.
pub struct ArrowSequences {
    name: String,
    format: ArrowFormat,
    streams: Streams,
    batches: Box<dyn RecordBatchReader + Send>,
}

impl ArrowSequences {
    /// Opens `path` (Parquet or Arrow IPC, by its first bytes, else its name) and reads its
    /// schema. `given` selects streams and supplies missing dims (see [`Streams::of`]). A file
    /// of another schema is an error naming the column.
    pub fn open(path: &Path, given: &[StreamSpec]) -> Result<Self> {
        let name = path.display().to_string();
        let in_file = |e: Error| e.in_file(name.clone());
        let format = ArrowFormat::of_file(path)
            .ok_or_else(|| in_file(Error::config("neither a Parquet nor an Arrow IPC file")))?;
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let batches: Box<dyn RecordBatchReader + Send> = match format {
            ArrowFormat::Parquet => Box::new(
                ParquetRecordBatchReaderBuilder::try_new(file)
                    .and_then(|b| b.with_batch_size(PARQUET_BATCH_ROWS).build())
                    .map_err(|e| in_file(parquet_error(e)))?,
            ),
            ArrowFormat::Ipc => Box::new(
                arrow_ipc::reader::FileReader::try_new(std::io::BufReader::new(file), None)
                    .map_err(|e| in_file(arrow_error(e)))?,
            ),
        };
        let streams = Streams::of(&batches.schema(), given).map_err(in_file)?;
        Ok(ArrowSequences {
            name,
            format,
            streams,
            batches,
        })
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
