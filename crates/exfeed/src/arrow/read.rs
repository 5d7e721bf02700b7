//! Reading Parquet and Arrow IPC files of the [schema](crate::arrow::schema). A
//! [`ColumnarFile`] is opened once (footer and schema read, streams selected); it is then read
//! whole, in order ([`ArrowSequences`]), or a chunk at a time from several threads
//! ([`ColumnarFile::read_chunk`], the reader's [`ChunkSource`]): a Parquet row group or an
//! Arrow IPC record batch is a chunk. Only the columns of the streams read (and the keys) are
//! read from the file.
//!
//! The file is read with positioned reads (never mapped, so a file truncated under the reader
//! is an error, not a crash); an input that cannot seek (standard input, a pipe, a compressed
//! file) is read into memory first, since the footer at the end says where everything is. An
//! object at a URL is read by ranged requests: Parquet's footer (its last 8 bytes, then the
//! metadata), then for each row group read only the column chunks read, fetched before it is
//! decoded (adjacent ones in one request); Arrow IPC's footer once, then each record batch's
//! block (its message and body) in one request.

use crate::arrow::decode::append_record_batch;
use crate::arrow::encode::{arrow_error, parquet_error};
use crate::arrow::schema::Streams;
use crate::format::FileFormat;
use crate::io::RemoteFile;
use crate::reader::{ChunkInfo, ChunkSource};
use crate::{Element, Error, Precision, Result, SequenceBatch, StreamSpec};
use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::ArrowError;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ProjectionMask;
use parquet::file::reader::{ChunkReader, Length};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;
use std::sync::Arc;

/// Rows per record batch read from a Parquet file.
const PARQUET_BATCH_ROWS: usize = 1024;

/// Column chunks of one row group at most this far apart are fetched in one request (the
/// bytes between them cost less than another request's round trip).
const COALESCE_GAP: u64 = 256 << 10;

/// The bytes of a columnar file: the file itself (read with positioned reads, safe from
/// several threads at once), its content in memory, or an object at a URL (ranged requests).
#[derive(Clone)]
pub enum ColumnarInput {
    /// A regular file and its length when opened.
    File(Arc<File>, u64),
    /// The whole content.
    Memory(bytes::Bytes),
    /// An object at a URL.
    Remote(RemoteFile),
}

impl ColumnarInput {
    /// The file at `path`.
    pub fn file(path: &std::path::Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        Ok(ColumnarInput::File(Arc::new(file), len))
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        match self {
            ColumnarInput::File(file, _) => {
                crate::io::read_at(file, buf, offset).map_err(std::io::Error::other)
            }
            ColumnarInput::Remote(file) => file.read_at_most(buf, offset).map_err(Error::into_io),
            ColumnarInput::Memory(bytes) => {
                let start = usize::try_from(offset)
                    .unwrap_or(usize::MAX)
                    .min(bytes.len());
                let n = buf.len().min(bytes.len() - start);
                buf[..n].copy_from_slice(&bytes[start..start + n]);
                Ok(n)
            }
        }
    }

    /// Exactly `len` bytes at `offset`: a file that has become shorter is an error.
    fn bytes_at(&self, offset: u64, len: usize) -> std::io::Result<bytes::Bytes> {
        if let ColumnarInput::Memory(bytes) = self {
            let start = usize::try_from(offset).unwrap_or(usize::MAX);
            return start
                .checked_add(len)
                .filter(|&end| end <= bytes.len())
                .map(|end| bytes.slice(start..end))
                .ok_or_else(|| short_read(offset, len));
        }
        let mut buf = vec![0; len];
        let mut done = 0;
        while done < len {
            match self.read_at(&mut buf[done..], offset + done as u64)? {
                0 => return Err(short_read(offset + done as u64, len - done)),
                n => done += n,
            }
        }
        Ok(buf.into())
    }
}

fn short_read(offset: u64, len: usize) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::UnexpectedEof,
        format!("the file ends before byte {} ({len} bytes wanted at byte {offset}): it changed while read", offset + len as u64),
    )
}

impl Length for ColumnarInput {
    fn len(&self) -> u64 {
        match self {
            ColumnarInput::File(_, len) => *len,
            ColumnarInput::Memory(bytes) => bytes.len() as u64,
            ColumnarInput::Remote(file) => file.len(),
        }
    }
}

impl ChunkReader for ColumnarInput {
    type T = PositionedReader;

    fn get_read(&self, start: u64) -> parquet::errors::Result<PositionedReader> {
        Ok(PositionedReader {
            input: self.clone(),
            pos: start,
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<bytes::Bytes> {
        self.bytes_at(start, length)
            .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))
    }
}

/// A reader of a [`ColumnarInput`] from a position of its own (readers never share one).
pub struct PositionedReader {
    input: ColumnarInput,
    pos: u64,
}

impl Read for PositionedReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.input.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for PositionedReader {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let target = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(d) => self.input.len().checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = target.ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before the start")
        })?;
        Ok(self.pos)
    }
}

/// A Parquet or Arrow IPC file, opened: its streams selected, its chunks known.
pub struct ColumnarFile {
    name: String,
    format: FileFormat,
    input: ColumnarInput,
    /// The columns read (the key's and the selected streams'), in file order.
    columns: Vec<usize>,
    /// The streams, renumbered to `columns`.
    streams: Streams,
    chunks: Vec<ChunkInfo>,
    /// Parquet's footer, read once.
    parquet: Option<ArrowReaderMetadata>,
    /// Arrow IPC's footer, read once.
    ipc: Option<Arc<IpcFooter>>,
}

impl ColumnarFile {
    /// Opens `input`, a file of `format` (Parquet or Arrow IPC) named `name` in messages, and
    /// reads its schema. `given` selects streams and supplies missing dims (see
    /// [`Streams::of`]): only their columns are read. A file of another schema is an error
    /// naming the column.
    pub fn open(
        input: ColumnarInput,
        name: &str,
        format: FileFormat,
        given: &[StreamSpec],
    ) -> Result<Self> {
        let in_file = |e: Error| e.in_file(name.to_string());
        let (parquet, ipc_footer, schema) = match format {
            FileFormat::Parquet => {
                let meta = ArrowReaderMetadata::load(&input, Default::default())
                    .map_err(|e| in_file(parquet_error(e)))?;
                let schema = meta.schema().clone();
                (Some(meta), None, schema)
            }
            FileFormat::ArrowIpc => {
                let footer = IpcFooterParts::read(&input).map_err(in_file)?;
                let schema = footer.schema.clone();
                (None, Some(footer), schema)
            }
            other => {
                return Err(in_file(Error::config(format!(
                    "{} is not a columnar format",
                    other.describe()
                ))))
            }
        };
        let (columns, streams) = project(Streams::of(&schema, given).map_err(in_file)?);
        let (chunks, ipc) = match (&parquet, ipc_footer) {
            (Some(meta), _) => (parquet_chunks(meta, &columns, &streams), None),
            (None, Some(footer)) => {
                let chunks = ipc_chunks(&input, &footer.blocks).map_err(in_file)?;
                let footer = footer.decoder(&input, &columns).map_err(in_file)?;
                (chunks, Some(Arc::new(footer)))
            }
            (None, None) => unreachable!("a columnar file is Parquet or Arrow IPC"),
        };
        Ok(ColumnarFile {
            name: name.to_string(),
            format,
            input,
            columns,
            streams,
            chunks,
            parquet,
            ipc,
        })
    }

    /// The file's name in messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Parquet or Arrow IPC.
    pub fn format(&self) -> FileFormat {
        self.format
    }

    /// Where the bytes are read from.
    pub fn input(&self) -> &ColumnarInput {
        &self.input
    }

    /// The streams of every batch, in order.
    pub fn streams(&self) -> &[StreamSpec] {
        &self.streams.specs
    }

    /// The precision of the file's values (`Double` when any stream holds `float64`).
    pub fn precision(&self) -> Precision {
        self.streams.precision
    }

    /// The file's chunks: its row groups (Parquet) or record batches (Arrow IPC). A chunk's
    /// `sequences` are its rows; its `samples` are an estimate (the file does not say them
    /// without decoding): the largest dense stream's samples by Parquet's value counts, else
    /// the rows.
    pub fn chunks(&self) -> &[ChunkInfo] {
        &self.chunks
    }

    /// The file's sequences in order, of the chunks `chunks` (all when `None`).
    pub fn sequences(self, chunks: Option<Range<usize>>) -> Result<ArrowSequences> {
        let chunks = chunks.unwrap_or(0..self.chunks.len());
        if chunks.start > chunks.end || chunks.end > self.chunks.len() {
            return Err(Error::config(format!(
                "chunks {}..{} of a file of {}",
                chunks.start,
                chunks.end,
                self.chunks.len()
            ))
            .in_file(self.name.clone()));
        }
        let batches = self.batches(chunks)?;
        Ok(ArrowSequences {
            file: self,
            batches,
        })
    }

    /// The record batches of `chunks`, of the columns read.
    fn batches(&self, chunks: Range<usize>) -> Result<Box<dyn RecordBatchReader + Send>> {
        let in_file = |e: Error| e.in_file(self.name.clone());
        if let (Some(meta), ColumnarInput::Remote(file)) = (&self.parquet, &self.input) {
            return Ok(Box::new(RemoteRowGroups {
                file: file.clone(),
                schema: Arc::new(meta.schema().project(&self.columns).map_err(arrow_error)?),
                meta: meta.clone(),
                columns: self.columns.clone(),
                groups: chunks,
                current: None,
            }));
        }
        if let Some(meta) = &self.parquet {
            let reader = parquet_batches(self.input.clone(), meta, &self.columns, chunks);
            return Ok(Box::new(reader.map_err(in_file)?));
        }
        let footer = self.ipc.clone().expect("an Arrow IPC file has its footer");
        Ok(Box::new(IpcBatches {
            input: self.input.clone(),
            blocks: chunks.start.min(footer.blocks.len())..chunks.end.min(footer.blocks.len()),
            footer,
        }))
    }

    /// Decodes chunk `chunk` into `out` (whose streams are [`ColumnarFile::streams`]).
    pub fn read_chunk<T: Element>(&self, chunk: usize, out: &mut SequenceBatch<T>) -> Result<()> {
        for rb in self.batches(chunk..chunk + 1)? {
            let rb = rb.map_err(|e| from_arrow(e).in_file(self.name.clone()))?;
            append_record_batch(&rb, &self.streams, out)
                .map_err(|e| e.in_file(self.name.clone()))?;
        }
        Ok(())
    }
}

impl<T: Element> ChunkSource<T> for ColumnarFile {
    fn streams(&self) -> &[StreamSpec] {
        &self.streams.specs
    }

    fn chunks(&self) -> &[ChunkInfo] {
        &self.chunks
    }

    fn read_chunk(&self, chunk: usize, out: &mut SequenceBatch<T>) -> Result<()> {
        ColumnarFile::read_chunk(self, chunk, out)
    }
}

/// The record batches of a Parquet file whose footer is `meta`: its `columns` (see [`project`]),
/// of row groups `chunks`.
pub(crate) fn parquet_batches<R: ChunkReader + 'static>(
    input: R,
    meta: &ArrowReaderMetadata,
    columns: &[usize],
    chunks: Range<usize>,
) -> Result<ParquetRecordBatchReader> {
    let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(input, meta.clone());
    let mask = ProjectionMask::roots(builder.parquet_schema(), columns.iter().copied());
    builder
        .with_projection(mask)
        .with_batch_size(PARQUET_BATCH_ROWS)
        .with_row_groups(chunks.collect())
        .build()
        .map_err(parquet_error)
}

/// The record batches of a Parquet object at a URL, a row group at a time: the group's column
/// chunks of the columns read are fetched (see [`column_chunk_ranges`]), then decoded.
struct RemoteRowGroups {
    file: RemoteFile,
    meta: ArrowReaderMetadata,
    columns: Vec<usize>,
    schema: arrow_schema::SchemaRef,
    groups: Range<usize>,
    current: Option<ParquetRecordBatchReader>,
}

impl RemoteRowGroups {
    fn open_group(&self, group: usize) -> Result<ParquetRecordBatchReader> {
        let ranges = column_chunk_ranges(self.meta.metadata(), group, &self.columns);
        let mut fetched = Vec::with_capacity(ranges.len());
        for range in ranges {
            let mut buf = vec![0; (range.end - range.start) as usize];
            self.file.read_exact_at(&mut buf, range.start)?;
            fetched.push((range.start, bytes::Bytes::from(buf)));
        }
        let fetched = FetchedRanges {
            len: self.file.len(),
            ranges: fetched,
        };
        parquet_batches(fetched, &self.meta, &self.columns, group..group + 1)
    }
}

impl Iterator for RemoteRowGroups {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(batch) = self.current.as_mut().and_then(Iterator::next) {
                return Some(batch);
            }
            let group = self.groups.next()?;
            match self.open_group(group) {
                Ok(reader) => self.current = Some(reader),
                Err(e) => return Some(Err(ArrowError::ExternalError(Box::new(e)))),
            }
        }
    }
}

impl RecordBatchReader for RemoteRowGroups {
    fn schema(&self) -> arrow_schema::SchemaRef {
        self.schema.clone()
    }
}

/// Our own error carried through Arrow's (a failed fetch) as it was; any other, described.
fn from_arrow(e: ArrowError) -> Error {
    match e {
        ArrowError::ExternalError(inner) => match inner.downcast::<Error>() {
            Ok(ours) => *ours,
            Err(inner) => arrow_error(ArrowError::ExternalError(inner)),
        },
        other => arrow_error(other),
    }
}

/// The byte ranges of row group `group`'s column chunks of the root columns `columns`, in file
/// order, those less than [`COALESCE_GAP`] apart merged into one.
fn column_chunk_ranges(
    meta: &parquet::file::metadata::ParquetMetaData,
    group: usize,
    columns: &[usize],
) -> Vec<Range<u64>> {
    let schema = meta.file_metadata().schema_descr();
    let mut chunks: Vec<Range<u64>> = (meta.row_group(group).columns().iter().enumerate())
        .filter(|(leaf, _)| columns.contains(&schema.get_column_root_idx(*leaf)))
        .map(|(_, column)| {
            let (start, len) = column.byte_range();
            start..start.saturating_add(len)
        })
        .collect();
    chunks.sort_unstable_by_key(|r| r.start);
    let mut merged: Vec<Range<u64>> = Vec::with_capacity(chunks.len());
    for chunk in chunks {
        match merged.last_mut() {
            Some(last) if chunk.start <= last.end.saturating_add(COALESCE_GAP) => {
                last.end = last.end.max(chunk.end)
            }
            _ => merged.push(chunk),
        }
    }
    merged
}

/// Byte ranges of a file fetched into memory, for the parquet crate's reader: a read outside
/// them is an error (the reader reads only the column chunks they were chosen for).
struct FetchedRanges {
    len: u64,
    /// Each range's first byte and its bytes, in file order.
    ranges: Vec<(u64, bytes::Bytes)>,
}

impl FetchedRanges {
    fn bytes_from(&self, start: u64) -> parquet::errors::Result<bytes::Bytes> {
        self.ranges
            .iter()
            .find(|(at, bytes)| (*at..*at + bytes.len() as u64).contains(&start))
            .map(|(at, bytes)| bytes.slice((start - at) as usize..))
            .ok_or_else(|| {
                parquet::errors::ParquetError::General(format!(
                    "byte {start} is outside the column chunks fetched"
                ))
            })
    }
}

impl Length for FetchedRanges {
    fn len(&self) -> u64 {
        self.len
    }
}

impl ChunkReader for FetchedRanges {
    type T = std::io::Cursor<bytes::Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(std::io::Cursor::new(self.bytes_from(start)?))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<bytes::Bytes> {
        let bytes = self.bytes_from(start)?;
        if bytes.len() < length {
            return Err(parquet::errors::ParquetError::General(format!(
                "bytes {start}..{} are outside the column chunks fetched",
                start + length as u64
            )));
        }
        Ok(bytes.slice(..length))
    }
}

/// The columns of a file's streams as read: the key and the selected streams' columns, in file
/// order; returns those columns and the streams renumbered to them.
pub(crate) fn project(streams: Streams) -> (Vec<usize>, Streams) {
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

/// A Parquet file's row groups as chunks: rows, compressed bytes of the columns read, and the
/// samples estimated from the dense streams' value counts (a dense sample is `dim` values).
fn parquet_chunks(
    meta: &ArrowReaderMetadata,
    columns: &[usize],
    streams: &Streams,
) -> Vec<ChunkInfo> {
    let schema = meta.metadata().file_metadata().schema_descr();
    meta.metadata()
        .row_groups()
        .iter()
        .map(|group| {
            let rows = usize::try_from(group.num_rows()).unwrap_or(0);
            let mut samples = rows as u64;
            let mut bytes = 0u64;
            for (leaf, column) in group.columns().iter().enumerate() {
                let root = schema.get_column_root_idx(leaf);
                let Some(read) = columns.iter().position(|&c| c == root) else {
                    continue;
                };
                bytes += u64::try_from(column.compressed_size()).unwrap_or(0);
                let stream = streams.columns.iter().position(|&c| c == read);
                if let Some(spec) = stream.map(|s| &streams.specs[s]) {
                    if spec.storage == crate::Storage::Dense && spec.dim > 0 {
                        let values = u64::try_from(column.num_values()).unwrap_or(0);
                        samples = samples.max(values / spec.dim as u64);
                    }
                }
            }
            ChunkInfo {
                sequences: rows,
                samples,
                bytes,
            }
        })
        .collect()
}

/// An Arrow IPC file that is not as its format says.
fn ipc_error(what: impl std::fmt::Display) -> Error {
    Error::config(format!("Arrow IPC: {what}"))
}

/// An Arrow IPC file's footer as read: its schema, where its record batches and dictionaries
/// are, and its metadata version.
struct IpcFooterParts {
    schema: arrow_schema::SchemaRef,
    version: arrow_ipc::MetadataVersion,
    blocks: Vec<arrow_ipc::Block>,
    dictionaries: Vec<arrow_ipc::Block>,
}

impl IpcFooterParts {
    /// The footer at the end of `input`: its length in the last 10 bytes, then the footer.
    fn read(input: &ColumnarInput) -> Result<Self> {
        let len = input.len();
        let tail_at = len.checked_sub(10).ok_or_else(|| ipc_error("too short"))?;
        let tail = input.bytes_at(tail_at, 10).map_err(ipc_error)?;
        let tail: [u8; 10] = tail[..].try_into().expect("10 bytes");
        let footer_len = arrow_ipc::reader::read_footer_length(tail).map_err(arrow_error)?;
        let footer_at = tail_at
            .checked_sub(footer_len as u64)
            .ok_or_else(|| ipc_error("the footer's length is past the start"))?;
        let bytes = input.bytes_at(footer_at, footer_len).map_err(ipc_error)?;
        let footer = arrow_ipc::root_as_footer(&bytes).map_err(ipc_error)?;
        let fb_schema = footer
            .schema()
            .ok_or_else(|| ipc_error("the footer has no schema"))?;
        if !fb_schema.endianness().equals_to_target_endianness() {
            return Err(ipc_error(
                "the file's byte order is not this machine's (not supported)",
            ));
        }
        let schema = arrow_ipc::convert::try_fb_to_schema(fb_schema).map_err(arrow_error)?;
        Ok(IpcFooterParts {
            schema: Arc::new(schema),
            version: footer.version(),
            blocks: footer
                .recordBatches()
                .map(|b| b.iter().copied().collect())
                .unwrap_or_default(),
            dictionaries: footer
                .dictionaries()
                .map(|b| b.iter().copied().collect())
                .unwrap_or_default(),
        })
    }

    /// The decoder of the record batches' `columns`, its dictionaries read.
    fn decoder(self, input: &ColumnarInput, columns: &[usize]) -> Result<IpcFooter> {
        let schema = Arc::new(self.schema.project(columns).map_err(arrow_error)?);
        let mut decoder = arrow_ipc::reader::FileDecoder::new(self.schema, self.version)
            .with_projection(columns.to_vec());
        for block in &self.dictionaries {
            let buf = read_block(input, block).map_err(arrow_error)?;
            decoder.read_dictionary(block, &buf).map_err(arrow_error)?;
        }
        Ok(IpcFooter {
            decoder,
            schema,
            blocks: self.blocks,
        })
    }
}

/// What reading an Arrow IPC file's record batches needs, from its footer read once: each
/// chunk is then one read of its block.
struct IpcFooter {
    decoder: arrow_ipc::reader::FileDecoder,
    /// The schema of the batches the decoder gives (the columns read).
    schema: arrow_schema::SchemaRef,
    blocks: Vec<arrow_ipc::Block>,
}

/// Where a block is, checked against the file's length before anything is allocated for it.
fn block_range(input: &ColumnarInput, block: &arrow_ipc::Block) -> Result<(u64, usize)> {
    let offset = u64::try_from(block.offset()).map_err(|_| ipc_error("a negative offset"))?;
    let len = u64::try_from(block.metaDataLength())
        .ok()
        .zip(u64::try_from(block.bodyLength()).ok())
        .and_then(|(meta, body)| meta.checked_add(body))
        .ok_or_else(|| ipc_error(format!("a negative length at byte {offset}")))?;
    match offset.checked_add(len) {
        Some(end) if end <= input.len() => Ok((offset, len as usize)),
        _ => Err(ipc_error(format!(
            "a block of {len} bytes at byte {offset} ends past the file's end ({} bytes)",
            input.len()
        ))),
    }
}

/// A block (its message and body) in one read.
fn read_block(
    input: &ColumnarInput,
    block: &arrow_ipc::Block,
) -> std::result::Result<arrow_buffer::Buffer, ArrowError> {
    let (offset, len) =
        block_range(input, block).map_err(|e| ArrowError::IpcError(e.to_string()))?;
    Ok(input.bytes_at(offset, len)?.into())
}

/// An Arrow IPC file's record batches as chunks: their rows, read from each batch's message
/// header (a few bytes each; the bodies are not read), and their body sizes.
fn ipc_chunks(input: &ColumnarInput, blocks: &[arrow_ipc::Block]) -> Result<Vec<ChunkInfo>> {
    let mut chunks = Vec::new();
    for block in blocks {
        let (offset, _) = block_range(input, block)?;
        let meta_len = block.metaDataLength() as usize; // checked by block_range
        let meta = input.bytes_at(offset, meta_len).map_err(ipc_error)?;
        // The message: a continuation marker and its length (or, in old files, the length).
        let skip = if meta.starts_with(&[0xff; 4]) { 8 } else { 4 };
        let no_batch = || ipc_error(format!("no record batch message at byte {offset}"));
        let rows = meta
            .get(skip..)
            .and_then(|m| arrow_ipc::root_as_message(m).ok())
            .ok_or_else(no_batch)?
            .header_as_record_batch()
            .ok_or_else(no_batch)?
            .length();
        let rows = usize::try_from(rows).map_err(|_| ipc_error("a negative row count"))?;
        chunks.push(ChunkInfo {
            sequences: rows,
            samples: rows as u64,
            bytes: u64::try_from(block.bodyLength()).unwrap_or(0),
        });
    }
    Ok(chunks)
}

/// Record batches `blocks` of an Arrow IPC file, each read in one request and decoded.
struct IpcBatches {
    input: ColumnarInput,
    footer: Arc<IpcFooter>,
    blocks: Range<usize>,
}

impl Iterator for IpcBatches {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let block = &self.footer.blocks[self.blocks.next()?];
        let batch = read_block(&self.input, block)
            .and_then(|buf| self.footer.decoder.read_record_batch(block, &buf));
        Some(batch.and_then(|b| {
            b.ok_or_else(|| {
                ArrowError::IpcError("an empty message in a record batch's place".into())
            })
        }))
    }
}

impl RecordBatchReader for IpcBatches {
    fn schema(&self) -> arrow_schema::SchemaRef {
        self.footer.schema.clone()
    }
}

/// The sequences of a Parquet or Arrow IPC file, read a record batch at a time
/// ([`ColumnarFile::sequences`]).
pub struct ArrowSequences {
    file: ColumnarFile,
    batches: Box<dyn RecordBatchReader + Send>,
}

impl ArrowSequences {
    /// Opens the file at `path` (Parquet or Arrow IPC by its first bytes, else its name) and
    /// reads all its chunks (see [`ColumnarFile::open`] for `given`).
    pub fn open(path: &std::path::Path, given: &[StreamSpec]) -> Result<Self> {
        Self::open_chunks(path, given, None)
    }

    /// As [`ArrowSequences::open`], reading only the chunks `chunks` (all when `None`): a
    /// worker reading its share of a file reads only its row groups.
    pub fn open_chunks(
        path: &std::path::Path,
        given: &[StreamSpec],
        chunks: Option<Range<usize>>,
    ) -> Result<Self> {
        let name = path.display().to_string();
        let mut head = [0u8; 8];
        let input = ColumnarInput::file(path)?;
        let n = input
            .read_at(&mut head, 0)
            .map_err(|e| Error::io(path, e))?;
        let format = FileFormat::from_magic(&head[..n])
            .filter(|f| f.is_columnar())
            .or_else(|| Some(FileFormat::from_name(path)).filter(|f| f.is_columnar()))
            .ok_or_else(|| {
                Error::config("neither a Parquet nor an Arrow IPC file").in_file(name.clone())
            })?;
        ColumnarFile::open(input, &name, format, given)?.sequences(chunks)
    }

    /// The file's chunks (row groups, record batches).
    pub fn num_chunks(&self) -> usize {
        self.file.chunks.len()
    }

    /// Parquet or Arrow IPC.
    pub fn format(&self) -> FileFormat {
        self.file.format
    }

    /// The streams of every batch, in order.
    pub fn streams(&self) -> &[StreamSpec] {
        self.file.streams()
    }

    /// The precision of the file's values (`Double` when any stream holds `float64`).
    pub fn precision(&self) -> Precision {
        self.file.precision()
    }

    /// The streams and their columns in the record batches read.
    #[cfg(test)]
    pub(crate) fn projected_streams(&self) -> &Streams {
        &self.file.streams
    }

    /// The next record batch of the file, as it is stored.
    pub fn next_record_batch(&mut self) -> Result<Option<RecordBatch>> {
        self.batches
            .next()
            .transpose()
            .map_err(|e: ArrowError| from_arrow(e).in_file(self.file.name.clone()))
    }

    /// Fills `batch` (cleared first; its streams are [`ArrowSequences::streams`]) with the
    /// sequences of the next record batch; `false` at the end of the file.
    pub fn next_batch<T: Element>(&mut self, batch: &mut SequenceBatch<T>) -> Result<bool> {
        batch.clear();
        while batch.is_empty() {
            let Some(rb) = self.next_record_batch()? else {
                return Ok(false);
            };
            append_record_batch(&rb, &self.file.streams, batch)
                .map_err(|e| e.in_file(self.file.name.clone()))?;
        }
        Ok(true)
    }
}
