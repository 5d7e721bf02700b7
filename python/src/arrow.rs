//! `exfeed.to_arrow` and the read tasks of `exfeed.ray`: sequences as Arrow record batches of
//! exfeed's sequence schema (exfeed::arrow::schema), handed to pyarrow (or any consumer of the Arrow PyCapsule protocol)
//! through the Arrow C stream interface. No value passes through Python objects.
//!
//! arrow-rs's own pyo3 integration (`pyarrow` feature) is built on another pyo3 than ours; the
//! capsule protocol needs none: `ArrowStream.__arrow_c_stream__` hands out an
//! `FFI_ArrowArrayStream` that pyarrow moves out of the capsule and pulls batches from.

use crate::errors::{arg, bad_arg, detached};
use crate::options::parse_index;
use crate::tools::{Kwargs, OpenArgs, Opened};
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::RecordBatchReader;
use arrow_schema::ffi::FFI_ArrowSchema;
use arrow_schema::SchemaRef;
use exfeed::arrow::Value;
use exfeed::config::DEFAULT_CHUNK_SIZE_BYTES;
use exfeed::convert::arrow_stream::SequenceStream;
use exfeed::format::FileFormat;
use exfeed::options::{ChunkSize, ReadOptions};
use exfeed::reader::ChunkSource;
use exfeed::source::IndexMode;
use exfeed::{DataSet, Diagnostic, DiagnosticSink, Precision};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

type Batches = Box<dyn RecordBatchReader + Send>;

/// A stream of Arrow record batches (exfeed's sequence schema), read as they are pulled; it
/// can be consumed once. `pyarrow.RecordBatchReader.from_stream(s)`, `polars.from_arrow(s)` and
/// DuckDB take it through `__arrow_c_stream__`.
#[pyclass(module = "exfeed", name = "ArrowStream")]
pub struct ArrowStream {
    batches: Mutex<Option<Batches>>,
    schema: SchemaRef,
}

impl ArrowStream {
    fn new(batches: Batches) -> Self {
        ArrowStream {
            schema: batches.schema(),
            batches: Mutex::new(Some(batches)),
        }
    }
}

#[pymethods]
impl ArrowStream {
    /// The Arrow PyCapsule protocol: the stream as an `arrow_array_stream` capsule.
    /// `requested_schema` is not supported (the schema is exfeed's) and ignored, as the
    /// protocol allows.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let batches = self
            .batches
            .lock()
            .map_err(|_| PyValueError::new_err("the stream's reader failed"))?
            .take()
            .ok_or_else(|| PyValueError::new_err("this ArrowStream was already consumed"))?;
        // The capsule owns the C stream; pyarrow moves it out (leaving a released stream,
        // which dropping then leaves alone), or dropping the capsule releases it.
        PyCapsule::new_with_value(
            py,
            FFI_ArrowArrayStream::new(batches),
            c"arrow_array_stream",
        )
    }

    /// The Arrow PyCapsule protocol: the schema as an `arrow_schema` capsule.
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        let schema = FFI_ArrowSchema::try_from(self.schema.as_ref())
            .map_err(|e| PyValueError::new_err(format!("Arrow schema: {e}")))?;
        PyCapsule::new_with_value(py, schema, c"arrow_schema")
    }
}

/// The reading options (`exfeed.check`'s keyword arguments, see [`OpenArgs`]) and
/// `chunk_size`, taken from a call's keyword arguments.
fn take_options(kw: &Kwargs<'_>) -> PyResult<(OpenArgs, u64)> {
    let args = OpenArgs::take(kw)?;
    let chunk_size = match kw.get::<u64>("chunk_size")? {
        Some(0) => return Err(bad_arg("chunk_size", "must be at least 1 byte")),
        size => size.unwrap_or(DEFAULT_CHUNK_SIZE_BYTES),
    };
    Ok((args, chunk_size))
}

/// How the Ray functions find a CTF file's chunks: `index` (`"auto"`, the default, `"full"` or
/// `"none"`, as for `exfeed.Reader`), taken from a call's keyword arguments.
fn take_index(kw: &Kwargs<'_>) -> PyResult<IndexMode> {
    let mode = kw.get::<String>("index")?;
    Ok(mode
        .as_deref()
        .map(parse_index)
        .transpose()?
        .unwrap_or(IndexMode::Auto))
}

/// Diagnostics tolerated by the error budget, printed on standard error as the command does.
struct Stderr;

impl DiagnosticSink for Stderr {
    fn report(&mut self, d: Diagnostic) {
        eprintln!("exfeed: {d}");
    }
}

/// The stream of a whole file (`exfeed.to_arrow`): record batches of about `chunk_size` bytes
/// of data, in file order.
#[pyfunction]
#[pyo3(signature = (path, **kwargs))]
pub fn _to_arrow<'py>(
    py: Python<'py>,
    path: PathBuf,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> PyResult<ArrowStream> {
    let kw = Kwargs::new(py, kwargs)?;
    let (args, chunk_size) = take_options(&kw)?;
    kw.finish("to_arrow")?;
    let batches = detached(py, move || {
        let opened = args.open(Some(&path), false)?;
        fn stream<T: Value>(data: DataSet, chunk_size: u64) -> exfeed::Result<Batches> {
            // A plain CTF file is parsed on every core.
            let s = SequenceStream::<T>::from_data(data, chunk_size, Box::new(Stderr))?;
            Ok(Box::new(s))
        }
        match opened.precision {
            Precision::Float => stream::<f32>(opened.data, chunk_size),
            Precision::Double => stream::<f64>(opened.data, chunk_size),
        }
    })?;
    Ok(ArrowStream::new(batches))
}

/// The chunk source of a file: CTF in chunks of `chunk_size` bytes, with or without an index
/// (`index`: by default without one when the file allows it, so that a Ray read task reads its own
/// chunks and not the whole file); CBF in its own chunks; Lens in the reader's.
fn source<T: Value>(
    mut data: DataSet,
    chunk_size: u64,
    index: IndexMode,
) -> exfeed::Result<Arc<dyn ChunkSource<T>>> {
    if data.format() != FileFormat::Ctf {
        return data.into_chunk_source::<T>();
    }
    data.set_read(
        ReadOptions::new()
            .with_chunk_size(ChunkSize::Bytes(chunk_size))
            .with_index(index),
    );
    data.into_chunk_source::<T>()
}

/// `(sequences, samples, bytes)` of each chunk of a file.
type Chunks = Vec<(usize, u64, u64)>;

/// Chunks `range` of `source` as a stream, one record batch per chunk.
fn chunk_stream<T: Value>(
    source: Arc<dyn ChunkSource<T>>,
    range: std::ops::Range<usize>,
) -> exfeed::Result<Batches> {
    let end = range.end.min(source.chunks().len());
    Ok(Box::new(SequenceStream::from_chunks(
        source,
        range.start..end,
    )?))
}

/// A file's chunks (see `_chunks`) and the stream of chunks `range` of them.
fn file_chunks(
    opened: Opened,
    chunk_size: u64,
    index: IndexMode,
    range: std::ops::Range<usize>,
) -> exfeed::Result<(Chunks, bool, Batches)> {
    fn chunks<T: Value>(
        data: DataSet,
        chunk_size: u64,
        index: IndexMode,
        range: std::ops::Range<usize>,
    ) -> exfeed::Result<(Chunks, bool, Batches)> {
        let s = source::<T>(data, chunk_size, index)?;
        let chunks = s.chunks().iter();
        let chunks = chunks.map(|c| (c.sequences, c.samples, c.bytes)).collect();
        let exact = !s.chunks_by_byte_range();
        Ok((chunks, exact, chunk_stream(s, range)?))
    }
    match opened.precision {
        Precision::Float => chunks::<f32>(opened.data, chunk_size, index, range),
        Precision::Double => chunks::<f64>(opened.data, chunk_size, index, range),
    }
}

/// The chunks of a file, as `(sequences, samples, bytes)` each (what a Ray read task reads);
/// whether their sequence and sample counts are exact (an index's) rather than estimates (byte
/// ranges, see `IndexMode::None`); and the stream of none of them, whose schema
/// (`pyarrow.schema(s)`) is their record batches'.
#[pyfunction]
#[pyo3(signature = (path, **kwargs))]
pub fn _chunks<'py>(
    py: Python<'py>,
    path: PathBuf,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> PyResult<(Chunks, bool, ArrowStream)> {
    let kw = Kwargs::new(py, kwargs)?;
    let (args, chunk_size) = take_options(&kw)?;
    let index = take_index(&kw)?;
    kw.finish("_chunks")?;
    let (chunks, exact, none) = detached(py, move || {
        let opened = args.open(Some(&path), false)?;
        file_chunks(opened, chunk_size, index, 0..0)
    })?;
    Ok((chunks, exact, ArrowStream::new(none)))
}

/// The objects a URL glob (`s3://bucket/dir/train-*.ctf`) matches, in sorted order: the
/// bucket's prefix listed by the core's corpus glob (as `--corpus` lists it), reached with
/// `storage_options`. None matching is an error naming the pattern.
#[pyfunction]
#[pyo3(signature = (pattern, storage_options=None))]
pub fn _expand_glob(
    py: Python<'_>,
    pattern: String,
    storage_options: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<String>> {
    let storage_options = crate::options::extract_storage_options(storage_options)?;
    let files = detached(py, move || {
        exfeed::io::Corpus::Glob(pattern).expand_with(&storage_options)
    })?;
    Ok(files.iter().map(|f| f.display().to_string()).collect())
}

/// Chunks `start..end` of a file as a stream, one record batch per chunk.
#[pyfunction]
#[pyo3(signature = (path, start, end, **kwargs))]
pub fn _read_chunks<'py>(
    py: Python<'py>,
    path: PathBuf,
    #[pyo3(from_py_with = arg::start)] start: usize,
    #[pyo3(from_py_with = arg::end)] end: usize,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> PyResult<ArrowStream> {
    let kw = Kwargs::new(py, kwargs)?;
    let (args, chunk_size) = take_options(&kw)?;
    let index = take_index(&kw)?;
    kw.finish("_read_chunks")?;
    let (_, _, batches) = detached(py, move || {
        let opened = args.open(Some(&path), false)?;
        file_chunks(opened, chunk_size, index, start..end)
    })?;
    Ok(ArrowStream::new(batches))
}
