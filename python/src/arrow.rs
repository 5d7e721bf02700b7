//! `exfeed.to_arrow` and the read tasks of `exfeed.ray`: sequences as Arrow record batches of
//! exfeed-arrow's schema, handed to pyarrow (or any consumer of the Arrow PyCapsule protocol)
//! through the Arrow C stream interface. No value passes through Python objects.
//!
//! arrow-rs's own pyo3 integration (`pyarrow` feature) is built on another pyo3 than ours; the
//! capsule protocol needs none: `ArrowStream.__arrow_c_stream__` hands out an
//! `FFI_ArrowArrayStream` that pyarrow moves out of the capsule and pulls batches from.

use crate::errors::detached;
use crate::options::extract_precision;
use crate::tools::open_options;
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::RecordBatchReader;
use arrow_schema::ffi::FFI_ArrowSchema;
use arrow_schema::SchemaRef;
use exfeed::config::DEFAULT_CHUNK_SIZE_BYTES;
use exfeed::convert::ConvertOptions;
use exfeed::ctf::CtfOptions;
use exfeed::format::FileFormat;
use exfeed::reader::{ChunkSource, CtfSource, CtfSourceOptions};
use exfeed::{open, Diagnostic, DiagnosticSink, OpenOptions, Precision};
use exfeed_arrow::stream::SequenceStream;
use exfeed_arrow::{read_arrow_file, write_arrow_file, ArrowFormat, Format, Value};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

type Batches = Box<dyn RecordBatchReader + Send>;

/// The keyword arguments of these functions: those of `exfeed.check` (how to read the file),
/// `chunk_size` and, for `_convert_arrow`, `overwrite`.
struct Options {
    open: OpenOptions,
    precision: Option<Precision>,
    chunk_size: u64,
    overwrite: bool,
}

const KEYWORDS: &[&str] = &[
    "inputs",
    "format",
    "max_errors",
    "skip_sequence_ids",
    "precision",
    "input_groups",
    "target_groups",
    "nan",
    "chunk_size",
    "overwrite",
];

fn options(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Options> {
    let get = |name: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
        match kwargs {
            Some(k) => Ok(k.get_item(name)?.filter(|v| !v.is_none())),
            None => Ok(None),
        }
    };
    if let Some(k) = kwargs {
        for key in k.keys() {
            let key: String = key.extract()?;
            if !KEYWORDS.contains(&key.as_str()) {
                return Err(PyTypeError::new_err(format!(
                    "unexpected keyword argument '{key}'"
                )));
            }
        }
    }
    let format: Option<String> = get("format")?.map(|v| v.extract()).transpose()?;
    let open = open_options(
        get("inputs")?.as_ref(),
        format.as_deref(),
        get("max_errors")?
            .map(|v| v.extract())
            .transpose()?
            .unwrap_or(0),
        get("skip_sequence_ids")?
            .map(|v| v.extract())
            .transpose()?
            .unwrap_or(false),
        get("input_groups")?.as_ref(),
        get("target_groups")?.as_ref(),
        get("nan")?.map(|v| v.extract()).transpose()?,
    )?;
    Ok(Options {
        open,
        precision: extract_precision(get("precision")?.as_ref())?,
        chunk_size: get("chunk_size")?
            .map(|v| v.extract())
            .transpose()?
            .unwrap_or(DEFAULT_CHUNK_SIZE_BYTES),
        overwrite: get("overwrite")?
            .map(|v| v.extract())
            .transpose()?
            .unwrap_or(false),
    })
}

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

/// Diagnostics tolerated by the error budget, printed on standard error as the command does.
struct Stderr;

impl DiagnosticSink for Stderr {
    fn report(&mut self, d: Diagnostic) {
        eprintln!("exfeed: {d}");
    }
}

fn stream_of<T: Value>(
    options: &OpenOptions,
    path: &Path,
    chunk_size: u64,
) -> exfeed::Result<Batches> {
    let seqs = open(path, options)?.sequences::<T>()?;
    Ok(Box::new(SequenceStream::from_sequences(
        seqs,
        chunk_size,
        Box::new(Stderr),
    )?))
}

/// The stream of a whole file (`exfeed.to_arrow`): record batches of about `chunk_size` bytes
/// of data, in file order.
#[pyfunction]
#[pyo3(signature = (path, **options))]
pub fn _to_arrow(
    py: Python<'_>,
    path: PathBuf,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<ArrowStream> {
    let o = self::options(options)?;
    let batches = detached(py, move || {
        let precision = match o.precision {
            Some(p) => p,
            None => open(&path, &o.open)?.stored_precision().unwrap_or_default(),
        };
        match precision {
            Precision::Float => stream_of::<f32>(&o.open, &path, o.chunk_size),
            Precision::Double => stream_of::<f64>(&o.open, &path, o.chunk_size),
        }
    })?;
    Ok(ArrowStream::new(batches))
}

/// The chunk source of a file: CTF indexed in chunks of `chunk_size` bytes; CBF in its own
/// chunks; Lens in the reader's.
fn source<T: Value>(
    options: &OpenOptions,
    path: &Path,
    chunk_size: u64,
) -> exfeed::Result<Arc<dyn ChunkSource<T>>> {
    let data = open(path, options)?;
    if data.format() != FileFormat::Ctf {
        return data.into_chunk_source::<T>();
    }
    let ctf = CtfSourceOptions {
        ctf: CtfOptions {
            inputs: options.inputs.clone(),
            skip_sequence_ids: options.skip_sequence_ids,
            max_errors: options.max_errors,
        },
        chunk_size,
        ..CtfSourceOptions::default()
    };
    Ok(Arc::new(CtfSource::open(&data.into_input()?, ctf)?))
}

/// The chunks of a file, as `(sequences, samples, bytes)` each (what a Ray read task reads).
#[pyfunction]
#[pyo3(signature = (path, **options))]
pub fn _chunks(
    py: Python<'_>,
    path: PathBuf,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Vec<(usize, u64, u64)>> {
    let o = self::options(options)?;
    detached(py, move || {
        let s = source::<f32>(&o.open, &path, o.chunk_size)?;
        Ok(s.chunks()
            .iter()
            .map(|c| (c.sequences, c.samples, c.bytes))
            .collect())
    })
}

/// Chunks `start..end` of a file as a stream, one record batch per chunk.
#[pyfunction]
#[pyo3(signature = (path, start, end, **options))]
pub fn _read_chunks(
    py: Python<'_>,
    path: PathBuf,
    start: usize,
    end: usize,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<ArrowStream> {
    let o = self::options(options)?;
    let batches = detached(py, move || {
        fn chunks<T: Value>(
            s: Arc<dyn ChunkSource<T>>,
            start: usize,
            end: usize,
        ) -> exfeed::Result<Batches> {
            let end = end.min(s.chunks().len());
            Ok(Box::new(SequenceStream::from_chunks(s, start..end)?))
        }
        let (open, size) = (&o.open, o.chunk_size);
        match o.precision.unwrap_or_default() {
            Precision::Float => chunks(source::<f32>(open, &path, size)?, start, end),
            Precision::Double => chunks(source::<f64>(open, &path, size)?, start, end),
        }
    })?;
    Ok(ArrowStream::new(batches))
}

/// Converts `src` to `dst` when either is a Parquet or Arrow IPC file (by its magic bytes, or
/// its name): any input to `.parquet`/`.arrow`, or a file of exfeed's Arrow schema to CTF, CBF,
/// Parquet or Arrow IPC, atomically. Returns the number of sequences written.
#[pyfunction]
#[pyo3(signature = (src, dst, **options))]
pub fn _convert_arrow(
    py: Python<'_>,
    src: PathBuf,
    dst: PathBuf,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<u64> {
    let o = self::options(options)?;
    let convert = ConvertOptions {
        to: None,
        precision: o.precision,
        chunk_size: o.chunk_size,
        overwrite: o.overwrite,
        sync: true,
    };
    let to = Format::from_name(&dst);
    detached(py, move || {
        if ArrowFormat::of_file(&src).is_some() {
            return read_arrow_file(&src, &o.open.inputs, &dst, to, &convert);
        }
        let Some(arrow) = to.arrow() else {
            return Err(exfeed::Error::config(format!(
                "{}: neither side is a Parquet or Arrow IPC file",
                dst.display()
            )));
        };
        write_arrow_file(open(&src, &o.open)?, &dst, arrow, &convert, &mut Stderr)
    })
}
