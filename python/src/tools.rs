//! `exfeed.check`, `exfeed.info`, `exfeed.dump` and `exfeed.convert`: the library's front door
//! (`exfeed::open`, `exfeed::convert`) as Python calls (no subprocess).

use crate::errors::{bad_arg, detached};
use crate::options::{
    extract_corpus, extract_inputs, extract_layout, extract_overrides, extract_precision,
    extract_remote_read, SourceArgs,
};
use exfeed::config::ConfigOptions;
use exfeed::configured::ReaderArgs;
use exfeed::convert::{convert as convert_file, ConvertOptions};
use exfeed::dataset::Summary;
use exfeed::format::FileFormat;
use exfeed::source::{split_corpus_key, DataPath};
use exfeed::{open, DataSet, Diagnostic, OpenOptions, Precision, SequenceBatch, Severity, Storage};
use numpy::{PyArray1, PyArrayMethods};
use pyo3::conversion::FromPyObjectOwned;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::convert::Infallible;
use std::path::{Path, PathBuf};

/// `format=`, `to=`: ctf, cbf, ex (or lens), bex.
fn format_arg(name: &str, v: Option<String>) -> PyResult<Option<FileFormat>> {
    v.map(|f| {
        FileFormat::parse_name(&f).ok_or_else(|| {
            let want = "expected ctf, cbf, ex, bex, parquet or arrow";
            bad_arg(name, format!("{want}, found {f:?}"))
        })
    })
    .transpose()
}

/// Keyword arguments, taken out one by one; what is left at the end was not expected.
pub(crate) struct Kwargs<'py>(Bound<'py, PyDict>);

impl<'py> Kwargs<'py> {
    /// A copy of the call's keyword arguments.
    pub(crate) fn new(py: Python<'py>, kwargs: Option<&Bound<'py, PyDict>>) -> PyResult<Self> {
        Ok(Kwargs(match kwargs {
            Some(k) => k.copy()?,
            None => PyDict::new(py),
        }))
    }

    /// Removes `name` and gives the object passed (`None` when absent or None).
    pub(crate) fn any(&self, name: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
        let v = self.0.get_item(name)?;
        if v.is_some() {
            self.0.del_item(name)?;
        }
        Ok(v.filter(|v| !v.is_none()))
    }

    /// Removes `name` and extracts it (see [`extract_arg`](crate::errors::extract_arg)).
    pub(crate) fn get<T: FromPyObjectOwned<'py>>(&self, name: &str) -> PyResult<Option<T>> {
        let Some(v) = self.any(name)? else {
            return Ok(None);
        };
        crate::errors::extract_arg(&v, name).map(Some)
    }

    /// A `TypeError` for the first keyword not taken.
    pub(crate) fn finish(self, function: &str) -> PyResult<()> {
        match self.0.keys().iter().next() {
            Some(k) => Err(PyTypeError::new_err(format!(
                "{function}() got an unexpected keyword argument {}",
                k.repr()?
            ))),
            None => Ok(()),
        }
    }
}

/// How to read a file: the keyword arguments `check`, `dump` and `convert` share, as `exfeed
/// check/dump/convert` take them: corpus=, inputs=, config=, section=, set=, format=,
/// max_errors=, skip_sequence_ids=, precision=, input_groups=, target_groups=, nan=.
pub(crate) struct OpenArgs {
    source: SourceArgs,
    format: Option<FileFormat>,
}

impl OpenArgs {
    pub(crate) fn take(kw: &Kwargs<'_>) -> PyResult<Self> {
        let input_groups = extract_layout("input_groups", kw.any("input_groups")?.as_ref())?;
        let target_groups = extract_layout("target_groups", kw.any("target_groups")?.as_ref())?;
        if input_groups.is_some() != target_groups.is_some() {
            return Err(bad_arg(
                "target_groups",
                "give input_groups and target_groups together",
            ));
        }
        let source = SourceArgs {
            config: kw.get("config")?,
            config_options: ConfigOptions {
                section: kw.get("section")?,
                overrides: extract_overrides(kw.any("set")?.as_ref())?,
            },
            args: ReaderArgs {
                inputs: extract_inputs(kw.any("inputs")?.as_ref())?,
                max_errors: kw.get("max_errors")?,
                skip_sequence_ids: kw.get("skip_sequence_ids")?.unwrap_or(false),
                precision: extract_precision(kw.any("precision")?.as_ref())?,
                input_groups,
                target_groups,
                nan: kw.get("nan")?,
                max_record_size: kw.get("max_record_size")?,
                corpus: extract_corpus(kw.any("corpus")?.as_ref())?,
                read: extract_remote_read(
                    kw.any("storage_options")?.as_ref(),
                    kw.get("cache_dir")?,
                    kw.get("cache_limit")?,
                )?,
                ..ReaderArgs::default()
            },
        };
        source.check()?;
        Ok(OpenArgs {
            format: format_arg("format", kw.get("format")?)?,
            source,
        })
    }

    /// Refuses a path with corpus=, before anything is opened (`what`: the path's name).
    pub(crate) fn check_path(&self, path: Option<&PathBuf>, what: &str) -> PyResult<()> {
        if path.is_some() && self.source.args.corpus.is_some() {
            return Err(bad_arg(
                "corpus",
                format!("give {what} or corpus=, not both"),
            ));
        }
        Ok(())
    }

    /// Opens `path`, else corpus=, else what config= names (call it with the GIL released): the
    /// data set, the precision to read it in, and the error budget (`max_errors`, or the
    /// configuration's). With `every_problem` the reading goes on past the budget (check lists
    /// every problem).
    pub(crate) fn open(&self, path: Option<&Path>, every_problem: bool) -> exfeed::Result<Opened> {
        let cfg = self.source.config_file()?;
        let args = &self.source.args;
        let data = match (path, &args.corpus) {
            (Some(_), Some(_)) => {
                return Err(exfeed::Error::config(
                    "corpus: give a path or corpus=, not both",
                ))
            }
            (Some(path), None) => DataPath::File(path.to_path_buf()),
            (None, Some(corpus)) => DataPath::Corpus(corpus.clone()),
            (None, None) => match cfg.as_ref().map(|c| c.data_paths()).as_deref() {
                Some([one]) => one.clone(),
                _ => {
                    return Err(exfeed::Error::config(
                        "path: give a file, corpus=, or a config= whose reader names one file",
                    ))
                }
            },
        };
        let mut data = args.open(cfg.as_ref(), &data, self.format)?;
        let budget = data.options().max_errors;
        if every_problem {
            data.set_max_errors(u64::MAX);
        }
        let precision = args.precision_for(cfg.as_ref(), &data);
        Ok(Opened {
            data,
            precision,
            budget,
        })
    }
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

/// A file opened by [`OpenArgs::open`].
pub(crate) struct Opened {
    pub(crate) data: DataSet,
    pub(crate) precision: Precision,
    budget: u64,
}

/// Reads a whole file and returns its summary and every problem, as `exfeed check` does:
/// `{"path", "format", "ok", "sequences", "longest": {"samples", "key"} | None, "streams":
/// [{"name", "storage", "dim", "samples", "non_zeros"}], "problems": [...], "error": str | None}`.
/// `ok` is False when the reading stopped on an error or more than `max_errors` errors were found.
/// A corpus (`corpus=`, or a config= that names one) gives that for the whole corpus (keys
/// `"SHARD:KEY"`, every problem) and `"shards"`: the same for each file, in corpus order.
#[pyfunction]
#[pyo3(signature = (path=None, **kwargs))]
pub fn check<'py>(
    py: Python<'py>,
    path: Option<PathBuf>,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let kw = Kwargs::new(py, kwargs)?;
    let args = OpenArgs::take(&kw)?;
    kw.finish("check")?;
    args.check_path(path.as_ref(), "path")?;
    let (whole, shards) = detached(py, move || {
        // Every problem is listed: the budget decides only whether the file is usable.
        let opened = args.open(path.as_deref(), true)?;
        let (budget, precision) = (opened.budget, opened.precision);
        if !opened.data.is_corpus() {
            return Ok((Checked::of(opened.data, precision, budget), Vec::new()));
        }
        let mut shards: Vec<Checked> = Vec::new();
        let (summary, _) = opened.data.summarize_shards(|file, shard| {
            let (one, summary) = match shard {
                Ok(data) => {
                    let one = Checked::of(data, precision, budget);
                    let summary = one.summary.clone();
                    (one, Some(summary))
                }
                Err(e) => (Checked::unopened(file.display().to_string(), e), None),
            };
            shards.push(one);
            (summary, Ok::<(), Infallible>(()))
        });
        let problems: Vec<Diagnostic> = shards.iter().flat_map(|s| s.problems.clone()).collect();
        let errors = problems
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count();
        let total = Checked {
            summary,
            ok: shards.iter().all(|s| s.ok) && errors as u64 <= budget,
            error: shards.iter().find_map(|s| s.error.clone()),
            problems,
        };
        Ok((total, shards))
    })?;
    let out = whole.to_dict(py)?;
    if whole.summary.corpus {
        let list = PyList::empty(py);
        for shard in &shards {
            list.append(shard.to_dict(py)?)?;
        }
        out.set_item("shards", list)?;
    }
    Ok(out)
}

/// What checking one file (or a whole corpus) found.
struct Checked {
    summary: Summary,
    problems: Vec<Diagnostic>,
    error: Option<String>,
    ok: bool,
}

impl Checked {
    /// Checks `data` in `precision`; `budget` errors are tolerated.
    fn of(data: DataSet, precision: Precision, budget: u64) -> Checked {
        let mut problems: Vec<Diagnostic> = Vec::new();
        let outcome = match precision {
            Precision::Float => data.summary::<f32>(&mut problems),
            Precision::Double => data.summary::<f64>(&mut problems),
        };
        let errors = problems
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count() as u64;
        Checked {
            ok: outcome.result.is_ok() && errors <= budget,
            error: outcome.result.err().map(|e| e.to_string()),
            summary: outcome.summary,
            problems,
        }
    }

    /// A corpus file that could not be opened (or whose streams differ from the first's).
    fn unopened(name: String, e: exfeed::Error) -> Checked {
        Checked {
            summary: Summary {
                corpus: false,
                ..Summary::of_corpus(name, FileFormat::Ctf)
            },
            problems: Vec::new(),
            error: Some(e.to_string()),
            ok: false,
        }
    }

    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = &self.summary;
        let out = PyDict::new(py);
        out.set_item("path", &s.name)?;
        out.set_item("format", s.format.describe())?;
        out.set_item("ok", self.ok)?;
        out.set_item("sequences", s.sequences)?;
        let longest = s
            .longest
            .map(|(samples, key)| -> PyResult<Bound<'py, PyDict>> {
                let d = PyDict::new(py);
                d.set_item("samples", samples)?;
                match s.corpus {
                    true => {
                        let (shard, key) = split_corpus_key(key);
                        d.set_item("key", format!("{shard}:{key}"))?
                    }
                    false => d.set_item("key", key)?,
                }
                Ok(d)
            });
        out.set_item("longest", longest.transpose()?)?;
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
        out.set_item("problems", diagnostics_list(py, &self.problems)?)?;
        out.set_item("error", self.error.as_deref())?;
        Ok(out)
    }
}

/// What a file's header says, as `exfeed info`: for CBF `{"path", "format", "streams":
/// [{"name", "storage", "dim", "element"}], "chunks", "sequences", "samples", "bytes"}`; for
/// Parquet and Arrow IPC the same without "samples" (their footer does not say); for a
/// Lens file `{"path", "format", "examples", "events", "max_events", "input_groups",
/// "target_groups", "has_nan"}`. CTF has no header: `check()` summarizes it.
#[pyfunction]
#[pyo3(signature = (path, *, format=None, storage_options=None, cache_dir=None, cache_limit=None))]
pub fn info<'py>(
    py: Python<'py>,
    path: PathBuf,
    format: Option<String>,
    storage_options: Option<&Bound<'py, PyAny>>,
    cache_dir: Option<PathBuf>,
    cache_limit: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let options = OpenOptions {
        format: format_arg("format", format)?,
        read: extract_remote_read(storage_options, cache_dir, cache_limit)?,
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
        #[cfg_attr(not(feature = "arrow"), expect(dead_code))]
        Columnar(Vec<(String, Storage, usize, Precision)>, usize, u64, u64),
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
            #[cfg(feature = "arrow")]
            FileFormat::Parquet | FileFormat::ArrowIpc => {
                let f = data.columnar().expect("a columnar data set has its file");
                let element = f.precision();
                let streams = (f.streams().iter())
                    .map(|s| (s.name.clone(), s.storage, s.dim, element))
                    .collect();
                let chunks = f.chunks();
                let sequences = chunks.iter().map(|c| c.sequences as u64).sum();
                let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
                Found::Columnar(streams, chunks.len(), sequences, bytes)
            }
            FileFormat::LensText | FileFormat::LensBinary => {
                // One example at a time, as `exfeed info` reads it: memory is one example's.
                let summary = data.summary::<f32>(&mut exfeed::error::Ignore).result?;
                Found::Lens(summary.lens.expect("a Lens file read without a layout"))
            }
            // `open` refuses these files in a build without Arrow.
            #[cfg(not(feature = "arrow"))]
            FileFormat::Parquet | FileFormat::ArrowIpc => unreachable!("opened without Arrow"),
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
    let stream_list = |streams: Vec<(String, Storage, usize, Precision)>| {
        let list = PyList::empty(py);
        for (n, storage, dim, element) in streams {
            let d = PyDict::new(py);
            d.set_item("name", n)?;
            d.set_item("storage", storage.as_str())?;
            d.set_item("dim", dim)?;
            d.set_item("element", element.as_str())?;
            list.append(d)?;
        }
        PyResult::Ok(list)
    };
    match found {
        Found::Cbf(streams, chunks, sequences, samples, bytes) => {
            out.set_item("streams", stream_list(streams)?)?;
            out.set_item("chunks", chunks)?;
            out.set_item("sequences", sequences)?;
            out.set_item("samples", samples)?;
            out.set_item("bytes", bytes)?;
        }
        Found::Columnar(streams, chunks, sequences, bytes) => {
            out.set_item("streams", stream_list(streams)?)?;
            out.set_item("chunks", chunks)?;
            out.set_item("sequences", sequences)?;
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
/// `(indptr, indices, data)` of its samples. A corpus's files one after the other, keys
/// `"SHARD:KEY"` strings.
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
#[pyo3(signature = (path=None, **kwargs))]
pub fn dump(
    py: Python<'_>,
    path: Option<PathBuf>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Dump> {
    let kw = Kwargs::new(py, kwargs)?;
    let args = OpenArgs::take(&kw)?;
    kw.finish("dump")?;
    args.check_path(path.as_ref(), "path")?;
    let (sequences, precision) = detached(py, move || {
        let opened = args.open(path.as_deref(), false)?;
        Ok((opened.data.sequences::<f64>()?, opened.precision))
    })?;
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

/// Converts `src` to the file `dst` as `exfeed convert` does (see `exfeed::convert`): atomically
/// (`dst` keeps its old content, or gets the whole new file), refusing an existing `dst` unless
/// `overwrite`. Returns `{"from", "to", "sequences", "chunks", "problems": [...]}` (problems:
/// those skipped under `max_errors`). With `corpus=` (no `src`) every file of the corpus goes
/// into the one file `dst`, keys `SHARD << 40 | KEY`.
#[pyfunction]
#[pyo3(signature = (src=None, dst=None, **kwargs))]
pub fn convert<'py>(
    py: Python<'py>,
    src: Option<PathBuf>,
    dst: Option<PathBuf>,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let kw = Kwargs::new(py, kwargs)?;
    let args = OpenArgs::take(&kw)?;
    args.check_path(src.as_ref(), "src")?;
    let Some(dst) = dst else {
        return Err(bad_arg(
            "dst",
            "give the file to write (with corpus=: convert(dst=..., corpus=...))",
        ));
    };
    let to = kw
        .get::<String>("to")?
        .map(|t| {
            FileFormat::parse_name(&t).ok_or_else(|| {
                bad_arg(
                    "to",
                    format!("expected ctf, cbf, ex, bex, parquet or arrow, found {t:?}"),
                )
            })
        })
        .transpose()?;
    let chunk_size: Option<u64> = kw.get("chunk_size")?;
    if chunk_size == Some(0) {
        return Err(bad_arg("chunk_size", "must be at least 1 byte"));
    }
    let overwrite = kw.get("overwrite")?.unwrap_or(false);
    let sync = kw.get("sync")?.unwrap_or(true);
    kw.finish("convert")?;
    let (done, problems) = detached(py, move || {
        let mut options = ConvertOptions {
            to: None,
            precision: args.source.args.precision,
            chunk_size: chunk_size.unwrap_or(ConvertOptions::default().chunk_size),
            overwrite,
            sync,
        };
        let mut problems: Vec<Diagnostic> = Vec::new();
        let opened = args.open(src.as_deref(), false)?;
        options.precision = Some(opened.precision);
        let from = opened.data.format().short_name();
        options.to = Some(to.unwrap_or_else(|| FileFormat::from_name(&dst)));
        let done = convert_file(opened.data, &dst, &options, &mut problems)?;
        Ok((
            (from, done.to.short_name(), done.sequences, done.chunks),
            problems,
        ))
    })?;
    let (from, to, sequences, chunks) = done;
    let out = PyDict::new(py);
    out.set_item("from", from)?;
    out.set_item("to", to)?;
    out.set_item("sequences", sequences)?;
    out.set_item("chunks", chunks)?;
    out.set_item("problems", diagnostics_list(py, &problems)?)?;
    Ok(out)
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
        let key = state.batch.keys()[q];
        if state.sequences.is_corpus() {
            let (shard, key) = split_corpus_key(key);
            out.set_item("key", format!("{shard}:{key}"))?;
        } else {
            out.set_item("key", key)?;
        }
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
