//! `exfeed.check`, `exfeed.info` and `exfeed.dump`: the library's front door (`exfeed::open`)
//! as Python calls (no subprocess).

use crate::errors::detached;
use crate::options::{extract_inputs, extract_layout, extract_precision};
use exfeed::format::FileFormat;
use exfeed::{
    open, Diagnostic, LensLayout, OpenOptions, Precision, SequenceBatch, Severity, Storage,
};
use numpy::{PyArray1, PyArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyDict, PyList};
use std::path::PathBuf;

fn format_arg(v: Option<&str>) -> PyResult<Option<FileFormat>> {
    v.map(|f| {
        FileFormat::parse_name(f).ok_or_else(|| {
            PyValueError::new_err(format!("format: expected ctf, cbf, ex or bex, found {f:?}"))
        })
    })
    .transpose()
}

/// The open options from the keyword arguments every function shares.
pub(crate) fn open_options(
    inputs: Option<&Bound<'_, PyAny>>,
    format: Option<&str>,
    max_errors: u64,
    skip_sequence_ids: bool,
    input_groups: Option<&Bound<'_, PyAny>>,
    target_groups: Option<&Bound<'_, PyAny>>,
    nan: Option<f32>,
) -> PyResult<OpenOptions> {
    let lens = match (
        extract_layout("input_groups", input_groups)?,
        extract_layout("target_groups", target_groups)?,
    ) {
        (Some(input_groups), Some(target_groups)) => Some(LensLayout {
            input_groups,
            target_groups,
            nan,
        }),
        (None, None) => None,
        _ => {
            return Err(crate::errors::bad_arg(
                "target_groups",
                "give input_groups and target_groups together",
            ))
        }
    };
    Ok(OpenOptions {
        format: format_arg(format)?,
        inputs: extract_inputs(inputs)?,
        skip_sequence_ids,
        max_errors,
        lens,
    })
}

fn diagnostics_list<'py>(py: Python<'py>, ds: &[Diagnostic]) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for d in ds {
        let item = PyDict::new(py);
        item.set_item("severity", d.severity.to_string())?;
        item.set_item("message", d.to_string())?;
        item.set_item("path", d.location.file.as_deref())?;
        item.set_item("line", d.location.line)?;
        item.set_item("column", d.location.column)?;
        item.set_item("byte", d.location.byte)?;
        out.append(item)?;
    }
    Ok(out)
}

/// Reads a whole file and returns its summary and every problem, as `exfeed check` does:
/// `{"path", "format", "ok", "sequences", "longest": {"samples", "key"} | None, "streams":
/// [{"name", "storage", "dim", "samples", "non_zeros"}], "problems": [...], "error": str | None}`.
/// `ok` is False when the reading stopped on an error or more than `max_errors` errors were found.
#[pyfunction]
#[pyo3(signature = (path, *, inputs=None, format=None, max_errors=0, skip_sequence_ids=false,
    precision=None, input_groups=None, target_groups=None, nan=None))]
#[allow(clippy::too_many_arguments)]
pub fn check<'py>(
    py: Python<'py>,
    path: PathBuf,
    inputs: Option<&Bound<'py, PyAny>>,
    format: Option<&str>,
    max_errors: u64,
    skip_sequence_ids: bool,
    precision: Option<&Bound<'py, PyAny>>,
    input_groups: Option<&Bound<'py, PyAny>>,
    target_groups: Option<&Bound<'py, PyAny>>,
    nan: Option<f32>,
) -> PyResult<Bound<'py, PyDict>> {
    // Every problem is listed: the budget decides only whether the file is usable.
    let options = open_options(
        inputs,
        format,
        u64::MAX,
        skip_sequence_ids,
        input_groups,
        target_groups,
        nan,
    )?;
    let precision = extract_precision(precision)?.unwrap_or_default();
    let (outcome, problems) = detached(py, move || {
        let data = open(&path, &options)?;
        let mut problems: Vec<Diagnostic> = Vec::new();
        let outcome = match precision {
            Precision::Float => data.summary::<f32>(&mut problems),
            Precision::Double => data.summary::<f64>(&mut problems),
        };
        Ok((outcome, problems))
    })?;
    let s = &outcome.summary;
    let errors = problems
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count() as u64;
    let out = PyDict::new(py);
    out.set_item("path", &s.name)?;
    out.set_item("format", s.format.describe())?;
    out.set_item("ok", outcome.result.is_ok() && errors <= max_errors)?;
    out.set_item("sequences", s.sequences)?;
    out.set_item(
        "longest",
        s.longest
            .map(|(samples, key)| [("samples", samples as u64), ("key", key)].into_py_dict(py))
            .transpose()?,
    )?;
    let streams = PyList::empty(py);
    for st in &s.streams {
        let d = PyDict::new(py);
        d.set_item("name", &st.spec.name)?;
        d.set_item("storage", st.spec.storage.as_str())?;
        d.set_item("dim", st.spec.dim)?;
        d.set_item("samples", st.samples)?;
        d.set_item("non_zeros", st.non_zeros)?;
        streams.append(d)?;
    }
    out.set_item("streams", streams)?;
    out.set_item("problems", diagnostics_list(py, &problems)?)?;
    out.set_item(
        "error",
        outcome.result.as_ref().err().map(|e| e.to_string()),
    )?;
    Ok(out)
}

/// What a file's header says, as `exfeed info`: for CBF `{"path", "format", "streams":
/// [{"name", "storage", "dim", "element"}], "chunks", "sequences", "samples", "bytes"}`; for a
/// Lens file `{"path", "format", "examples", "events", "max_events", "input_groups",
/// "target_groups", "has_nan"}`. CTF has no header: `check()` summarizes it.
#[pyfunction]
#[pyo3(signature = (path, *, format=None))]
pub fn info<'py>(
    py: Python<'py>,
    path: PathBuf,
    format: Option<&str>,
) -> PyResult<Bound<'py, PyDict>> {
    let options = OpenOptions {
        format: format_arg(format)?,
        ..OpenOptions::default()
    };
    let out = PyDict::new(py);
    enum Found {
        Cbf(
            Vec<(String, Storage, usize, Precision)>,
            usize,
            u64,
            u64,
            u64,
        ),
        Lens(exfeed::lens::info::Info),
    }
    let (name, fmt, found) = detached(py, move || {
        let data = open(&path, &options)?;
        let (name, fmt) = (data.name().to_string(), data.format());
        let found = match fmt {
            FileFormat::Cbf => {
                let f = data.cbf().expect("a CBF data set has its file");
                let streams = f
                    .file_streams()
                    .iter()
                    .map(|s| (s.spec.name.clone(), s.spec.storage, s.spec.dim, s.element))
                    .collect();
                Found::Cbf(
                    streams,
                    f.num_chunks(),
                    f.num_sequences(),
                    f.num_samples(),
                    f.file_len(),
                )
            }
            FileFormat::LensText | FileFormat::LensBinary => {
                Found::Lens(exfeed::lens::info::Info::of(&data.lens_set()?))
            }
            FileFormat::Ctf => return Err(exfeed::Error::new(
                exfeed::ErrorKind::Unsupported,
                exfeed::Location::default().with_file(name),
                "info describes CBF and Lens files; this looks like CTF (check() summarizes it)",
            )),
        };
        Ok((name, fmt, found))
    })?;
    out.set_item("path", name)?;
    out.set_item("format", fmt.describe())?;
    match found {
        Found::Cbf(streams, chunks, sequences, samples, bytes) => {
            let list = PyList::empty(py);
            for (n, storage, dim, element) in streams {
                let d = PyDict::new(py);
                d.set_item("name", n)?;
                d.set_item("storage", storage.as_str())?;
                d.set_item("dim", dim)?;
                d.set_item("element", element.as_str())?;
                list.append(d)?;
            }
            out.set_item("streams", list)?;
            out.set_item("chunks", chunks)?;
            out.set_item("sequences", sequences)?;
            out.set_item("samples", samples)?;
            out.set_item("bytes", bytes)?;
        }
        Found::Lens(i) => {
            out.set_item("examples", i.examples)?;
            out.set_item("events", i.events)?;
            out.set_item("max_events", i.max_events)?;
            out.set_item("input_groups", i.input_groups.iter().collect::<Vec<_>>())?;
            out.set_item("target_groups", i.target_groups.iter().collect::<Vec<_>>())?;
            out.set_item("has_nan", i.has_nan)?;
        }
    }
    Ok(out)
}

/// The sequences of a file in file order, as `exfeed dump`: an iterator of
/// `{"key": int, name: array, ...}`, a dense stream as float [samples, dim], a sparse one as
/// `(indptr, indices, data)` of its samples.
#[pyclass(module = "exfeed", name = "Dump")]
pub struct Dump {
    inner: std::sync::Mutex<Option<DumpState>>,
}

struct DumpState {
    sequences: exfeed::Sequences<f64>,
    batch: SequenceBatch<f64>,
    next: usize,
    precision: Precision,
}

#[pyfunction]
#[pyo3(signature = (path, *, inputs=None, format=None, max_errors=0, skip_sequence_ids=false,
    precision=None, input_groups=None, target_groups=None, nan=None))]
#[allow(clippy::too_many_arguments)]
pub fn dump(
    py: Python<'_>,
    path: PathBuf,
    inputs: Option<&Bound<'_, PyAny>>,
    format: Option<&str>,
    max_errors: u64,
    skip_sequence_ids: bool,
    precision: Option<&Bound<'_, PyAny>>,
    input_groups: Option<&Bound<'_, PyAny>>,
    target_groups: Option<&Bound<'_, PyAny>>,
    nan: Option<f32>,
) -> PyResult<Dump> {
    let options = open_options(
        inputs,
        format,
        max_errors,
        skip_sequence_ids,
        input_groups,
        target_groups,
        nan,
    )?;
    let precision = extract_precision(precision)?.unwrap_or_default();
    let sequences = detached(py, move || open(&path, &options)?.sequences::<f64>())?;
    let batch = SequenceBatch::new(sequences.streams());
    Ok(Dump {
        inner: std::sync::Mutex::new(Some(DumpState {
            sequences,
            batch,
            next: 0,
            precision,
        })),
    })
}

#[pymethods]
impl Dump {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let mut guard = self
            .inner
            .try_lock()
            .map_err(|_| PyValueError::new_err("dump() is being read by another thread"))?;
        let Some(state) = guard.as_mut() else {
            return Ok(None);
        };
        if state.next >= state.batch.len() {
            let DumpState {
                sequences, batch, ..
            } = state;
            let more = detached(py, || {
                sequences.next_batch(batch, &mut exfeed::error::Ignore)
            });
            match more {
                Ok(true) => state.next = 0,
                Ok(false) => {
                    *guard = None;
                    return Ok(None);
                }
                Err(e) => {
                    *guard = None;
                    return Err(e);
                }
            }
        }
        let q = state.next;
        state.next += 1;
        let out = PyDict::new(py);
        out.set_item("key", state.batch.keys()[q])?;
        let specs = state.sequences.streams();
        for (spec, s) in specs.iter().zip(state.batch.streams()) {
            let rows = s.sequence_samples(q);
            let value = match s.storage() {
                Storage::Dense => {
                    let v = &s.values()[rows.start * s.dim()..rows.end * s.dim()];
                    values_array(py, v, state.precision, &[rows.len(), s.dim()])?
                }
                Storage::Sparse => {
                    let offs = &s.sample_offsets()[rows.start..=rows.end];
                    let base = offs[0];
                    let indptr: Vec<i64> = offs.iter().map(|&o| (o - base) as i64).collect();
                    let range = base..offs[offs.len() - 1];
                    let indices: Vec<i64> = s.indices()[range.clone()]
                        .iter()
                        .map(|&i| i as i64)
                        .collect();
                    let data = &s.values()[range];
                    (
                        PyArray1::from_vec(py, indptr),
                        PyArray1::from_vec(py, indices),
                        values_array(py, data, state.precision, &[data.len()])?,
                    )
                        .into_pyobject(py)?
                        .into_any()
                }
            };
            out.set_item(&spec.name, value)?;
        }
        Ok(Some(out))
    }
}

/// The values in the precision asked for (read as f64, which holds every f32 exactly), shaped.
fn values_array<'py>(
    py: Python<'py>,
    v: &[f64],
    p: Precision,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    let shape = numpy::ndarray::IxDyn(shape);
    Ok(match p {
        Precision::Double => PyArray1::from_slice(py, v).reshape(shape)?.into_any(),
        Precision::Float => {
            let v: Vec<f32> = v.iter().map(|&x| x as f32).collect();
            PyArray1::from_vec(py, v).reshape(shape)?.into_any()
        }
    })
}
