//! `exfeed.Reader`, `Minibatch`, `Stream`: the minibatch reader for Python.
//!
//! Zero-copy contract: a minibatch's buffers belong to a hidden `Buffers` object; every array
//! a `Minibatch` or `Stream` hands out is a NumPy view on them whose `base` keeps that object
//! alive. The reader reuses a minibatch's buffers for a later minibatch only when nothing but
//! the reader refers to them any more (no array, `Stream` or `Minibatch` of it is alive);
//! otherwise it fills fresh buffers. An array you keep is therefore never overwritten, and
//! arrays you drop give their memory back to the next minibatch.

use crate::errors::{arg, bad_arg, detached, to_py, ConfigWarning, InternalError};
use exfeed::config::{ConfigOptions, ReaderConfig};
use exfeed::configured::{AnyMinibatch, AnyReader, Equalize, ReaderArgs, RunOptions};
use exfeed::reader::{MinibatchSize, ReaderState, Stopper};
use exfeed::{Element, Precision, Storage, StreamData, StreamSpec};
use numpy::ndarray::{ArrayView, IxDyn};
use numpy::{PyArray, PyArray1, PyArrayDescr, PyArrayMethods};
use pyo3::exceptions::{
    PyImportError, PyKeyError, PyModuleNotFoundError, PyRuntimeError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

const _: () = assert!(
    std::mem::size_of::<usize>() == 8,
    "offsets are handed out as int64"
);

/// The memory of one minibatch, owned by Python so that arrays can view it.
#[pyclass(module = "exfeed")]
pub struct Buffers {
    mb: Option<AnyMinibatch>,
}

/// A NumPy view of `data` with `shape`, keeping `owner` alive.
fn view<'py, T: numpy::Element>(
    owner: &Bound<'py, Buffers>,
    data: &[T],
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    let a = ArrayView::from_shape(IxDyn(shape), data)
        .map_err(|e| InternalError::new_err(format!("internal error: array shape: {e}")))?;
    // SAFETY: the data lives in `owner`'s buffers, which are neither moved nor changed while
    // `owner` is referenced by anything but the reader (see the module documentation), and
    // the array keeps `owner` alive through its base.
    Ok(unsafe { PyArray::borrow_from_array(&a, owner.clone().into_any()) }.into_any())
}

fn as_i64(s: &[usize]) -> &[i64] {
    // SAFETY: usize is 8 bytes (asserted above); offsets are far below i64::MAX.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), s.len()) }
}

fn dtype_of(py: Python<'_>, p: Precision) -> Bound<'_, PyArrayDescr> {
    match p {
        Precision::Float => numpy::dtype::<f32>(py),
        Precision::Double => numpy::dtype::<f64>(py),
    }
}

/// What a stream is: name, storage, dimension and element type.
#[pyclass(frozen, module = "exfeed", name = "StreamInfo")]
pub struct StreamInfo {
    #[pyo3(get)]
    name: String,
    #[pyo3(get)]
    storage: &'static str,
    #[pyo3(get)]
    dim: usize,
    #[pyo3(get)]
    alias: Option<String>,
    #[pyo3(get)]
    defines_mb_size: bool,
    precision: Precision,
}

#[pymethods]
impl StreamInfo {
    /// numpy.float32 or numpy.float64.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> Bound<'py, PyArrayDescr> {
        dtype_of(py, self.precision)
    }

    #[getter]
    fn is_sparse(&self) -> bool {
        self.storage == "sparse"
    }

    fn __repr__(&self) -> String {
        format!(
            "StreamInfo(name={:?}, storage={:?}, dim={}, dtype={})",
            self.name,
            self.storage,
            self.dim,
            match self.precision {
                Precision::Float => "float32",
                Precision::Double => "float64",
            }
        )
    }
}

fn stream_infos(
    py: Python<'_>,
    specs: &[StreamSpec],
    p: Precision,
) -> PyResult<Vec<Py<StreamInfo>>> {
    specs
        .iter()
        .map(|s| {
            Py::new(
                py,
                StreamInfo {
                    name: s.name.clone(),
                    storage: s.storage.as_str(),
                    dim: s.dim,
                    alias: s.alias.clone(),
                    defines_mb_size: s.defines_mb_size,
                    precision: p,
                },
            )
        })
        .collect()
}

/// The minibatch reader: `exfeed.Reader(files, *, minibatch_size, ...)`. See the stub file
/// `exfeed/_exfeed.pyi` for every argument.
///
/// Shared between Python threads, its calls take turns ([`Reader::engine`]); `close()` from
/// another thread stops a read in progress at its next window. In a process forked from the
/// one that made it, a reader with decoding threads refuses every call at once (its threads
/// did not follow), and is never dropped there (that would wait for them for ever).
#[pyclass(frozen, module = "exfeed", name = "Reader")]
pub struct Reader {
    engine: Mutex<Engine>,
    /// Set by `close()`: whoever holds `engine` closes it (see [`EngineGuard`]).
    closing: AtomicBool,
    /// Stops the engine's read in progress (replaced with the engine by `load_state_dict`).
    stopper: Mutex<Stopper>,
    /// The process that made the reader.
    owner_pid: u32,
    cfg: ReaderConfig,
    run: RunOptions,
    specs: Arc<Vec<StreamSpec>>,
    precision: Precision,
    /// The default size of a minibatch: `minibatch_size` or `minibatch_sequences`.
    size: MinibatchSize,
}

/// How many of the last minibatches' buffers a reader keeps to refill. More than one: a
/// training loop still holds the last minibatch (its loop variable, the tensors made from it)
/// while it asks for the next, so the one before it is the one free to refill.
const RECENT_BUFFERS: usize = 3;

/// What a `Reader`'s calls take turns with: the engine and the last minibatches' buffers.
struct Engine {
    inner: Option<AnyReader>,
    /// The buffers of the last minibatches delivered, oldest first: refilled when nobody else
    /// holds them (warm pages, no allocation).
    recent: VecDeque<Py<Buffers>>,
}

impl Engine {
    fn open(&mut self) -> PyResult<&mut AnyReader> {
        self.inner.as_mut().ok_or_else(closed_error)
    }

    /// Stops the decoding threads (with the GIL released) and frees the buffers.
    fn close(&mut self, py: Python<'_>) {
        if let Some(r) = self.inner.take() {
            py.detach(move || drop(r));
        }
        self.recent.clear();
    }
}

fn closed_error() -> PyErr {
    PyValueError::new_err("the reader is closed")
}

/// A `Reader`'s engine held by one call; on release it closes the engine if `close()` was
/// called meanwhile.
struct EngineGuard<'a> {
    engine: MutexGuard<'a, Engine>,
    closing: &'a AtomicBool,
}

impl std::ops::Deref for EngineGuard<'_> {
    type Target = Engine;
    fn deref(&self) -> &Engine {
        &self.engine
    }
}

impl std::ops::DerefMut for EngineGuard<'_> {
    fn deref_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }
}

impl Drop for EngineGuard<'_> {
    fn drop(&mut self) {
        if self.closing.load(Ordering::SeqCst) {
            Python::attach(|py| self.engine.close(py));
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        if !self.threads_are_here() {
            // A forked child's copy: dropping the engine would wait for the parent's threads.
            let engine = self.engine.get_mut().unwrap_or_else(|e| e.into_inner());
            std::mem::forget(engine.inner.take());
        }
    }
}

#[pymethods]
impl Reader {
    #[new]
    #[pyo3(signature = (files=None, *, minibatch_size=None, minibatch_sequences=None, corpus=None, mix=None, mix_epoch_samples=None, inputs=None, config=None, section=None, set=None,
        max_sweeps=Some(1), max_samples=None, randomize=None, seed=None, window_chunks=None,
        window_samples=None, window_bytes=None, frame_mode=false, chunk_size=None, keep_in_memory=false,
        cache_index=false, max_errors=None, precision=None, num_workers=1, worker_rank=0,
        threads=None, prefetch_chunks=None, input_groups=None, target_groups=None,
        lens_mode=None, nan=None, equalize=None, equalize_mode=None, max_record_size=None, index=None,
        randomizer=None, storage_options=None, cache_dir=None, cache_limit=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        files: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = arg::minibatch_size)] minibatch_size: Option<usize>,
        #[pyo3(from_py_with = arg::minibatch_sequences)] minibatch_sequences: Option<usize>,
        corpus: Option<&Bound<'_, PyAny>>,
        mix: Option<&Bound<'_, PyAny>>,
        mix_epoch_samples: Option<u64>,
        inputs: Option<&Bound<'_, PyAny>>,
        config: Option<std::path::PathBuf>,
        section: Option<String>,
        set: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = arg::max_sweeps)] max_sweeps: Option<u64>,
        #[pyo3(from_py_with = arg::max_samples)] max_samples: Option<u64>,
        randomize: Option<bool>,
        #[pyo3(from_py_with = arg::seed)] seed: Option<u64>,
        #[pyo3(from_py_with = arg::window_chunks)] window_chunks: Option<u64>,
        #[pyo3(from_py_with = arg::window_samples)] window_samples: Option<u64>,
        #[pyo3(from_py_with = arg::window_bytes)] window_bytes: Option<u64>,
        frame_mode: bool,
        chunk_size: Option<&Bound<'_, PyAny>>,
        keep_in_memory: bool,
        cache_index: bool,
        #[pyo3(from_py_with = arg::max_errors)] max_errors: Option<u64>,
        precision: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = arg::num_workers)] num_workers: usize,
        #[pyo3(from_py_with = arg::worker_rank)] worker_rank: usize,
        #[pyo3(from_py_with = arg::threads)] threads: Option<usize>,
        #[pyo3(from_py_with = arg::prefetch_chunks)] prefetch_chunks: Option<usize>,
        input_groups: Option<&Bound<'_, PyAny>>,
        target_groups: Option<&Bound<'_, PyAny>>,
        lens_mode: Option<String>,
        nan: Option<f32>,
        equalize: Option<&Bound<'_, PyAny>>,
        equalize_mode: Option<String>,
        #[pyo3(from_py_with = arg::max_record_size)] max_record_size: Option<u64>,
        index: Option<String>,
        randomizer: Option<String>,
        storage_options: Option<&Bound<'_, PyAny>>,
        cache_dir: Option<std::path::PathBuf>,
        cache_limit: Option<u64>,
    ) -> PyResult<Self> {
        use crate::options::*;
        let size = match (minibatch_size, minibatch_sequences) {
            (Some(0), _) => return Err(bad_arg("minibatch_size", "must be at least 1")),
            (_, Some(0)) => return Err(bad_arg("minibatch_sequences", "must be at least 1")),
            (Some(n), None) => MinibatchSize::Samples(n),
            (None, Some(n)) => MinibatchSize::Sequences(n),
            (None, None) => {
                return Err(bad_arg(
                    "minibatch_size",
                    "give minibatch_size (samples) or minibatch_sequences",
                ))
            }
            (Some(_), Some(_)) => {
                return Err(bad_arg(
                    "minibatch_sequences",
                    "give minibatch_size (samples) or minibatch_sequences, not both",
                ))
            }
        };
        let source = SourceArgs {
            config,
            config_options: ConfigOptions {
                section,
                overrides: extract_overrides(set)?,
            },
            args: ReaderArgs {
                corpus: extract_mix(mix, corpus)?.or(extract_corpus(corpus)?),
                mix_epoch_samples,
                files: match files.filter(|f| !f.is_none()) {
                    Some(files) => extract_files(files)?,
                    None if [corpus, mix].iter().flatten().any(|c| !c.is_none()) => Vec::new(),
                    None => return Err(bad_arg("files", "no file given (nor a corpus= or mix=)")),
                },
                inputs: extract_inputs(inputs)?,
                precision: extract_precision(precision)?,
                max_errors,
                randomize,
                seed,
                window_chunks,
                window_samples,
                window_bytes,
                read: read_options(
                    chunk_size,
                    index.as_deref(),
                    keep_in_memory,
                    cache_index,
                    frame_mode,
                )?
                .over(&extract_remote_read(
                    storage_options,
                    cache_dir,
                    cache_limit,
                )?),
                randomizer: randomizer.as_deref().map(parse_randomizer).transpose()?,
                input_groups: extract_layout("input_groups", input_groups)?,
                target_groups: extract_layout("target_groups", target_groups)?,
                nan,
                lens_mode: lens_mode
                    .map(|m| {
                        m.parse()
                            .map_err(|e: exfeed::Error| bad_arg("lens_mode", e.message()))
                    })
                    .transpose()?,
                max_record_size,
                ..ReaderArgs::default()
            },
        };
        source.check()?;
        let (cfg, inputs, warnings) = {
            let source = &source;
            detached(py, move || source.reader_config())?
        };
        for w in warnings {
            PyErr::warn(
                py,
                &py.get_type::<ConfigWarning>(),
                &std::ffi::CString::new(w)?,
                1,
            )?;
        }
        // RunOptions may gain fields (their defaults suit Python): hence the update syntax.
        let mode = match equalize_mode.as_deref() {
            Some(m) => m
                .parse()
                .map_err(|e: exfeed::Error| bad_arg("equalize_mode", e.message()))?,
            None => cfg.equalize_mode,
        };
        #[allow(clippy::needless_update)]
        let run = RunOptions {
            limit: epoch_limit(max_sweeps, max_samples)?,
            num_workers,
            worker_rank,
            threads,
            prefetch_chunks,
            inputs,
            equalize: match equalize.filter(|e| !e.is_none()) {
                Some(e) => extract_equalize(Some(e), size, num_workers, mode)?,
                None => (cfg.equalize || equalize_mode.is_some()).then_some(Equalize {
                    minibatch_size: size,
                    ranks: num_workers,
                    mode,
                }),
            },
            ..RunOptions::default()
        };
        check_run_options(&run)?;
        let inner = {
            let (cfg, run) = (&cfg, &run);
            detached(py, move || AnyReader::open(cfg, run))?
        };
        if let Some(w) = inner.share_warning() {
            PyErr::warn(
                py,
                &py.get_type::<pyo3::exceptions::PyUserWarning>(),
                &std::ffi::CString::new(w)?,
                1,
            )?;
        }
        Ok(Reader {
            specs: Arc::new(inner.streams().to_vec()),
            precision: inner.precision(),
            stopper: Mutex::new(inner.stopper()),
            engine: Mutex::new(Engine {
                inner: Some(inner),
                recent: VecDeque::new(),
            }),
            closing: AtomicBool::new(false),
            owner_pid: std::process::id(),
            cfg,
            run,
            size,
        })
    }

    /// The streams every minibatch has, in order.
    #[getter]
    fn streams(&self, py: Python<'_>) -> PyResult<Vec<Py<StreamInfo>>> {
        stream_infos(py, &self.specs, self.precision)
    }

    /// The default minibatch size in samples (None when given in sequences).
    #[getter]
    fn minibatch_size(&self) -> Option<usize> {
        match self.size {
            MinibatchSize::Samples(n) => Some(n),
            MinibatchSize::Sequences(_) => None,
        }
    }

    /// The default minibatch size in sequences (None when given in samples).
    #[getter]
    fn minibatch_sequences(&self) -> Option<usize> {
        match self.size {
            MinibatchSize::Sequences(n) => Some(n),
            MinibatchSize::Samples(_) => None,
        }
    }

    /// numpy.float32 or numpy.float64.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> Bound<'py, PyArrayDescr> {
        dtype_of(py, self.precision)
    }

    /// Samples of one sweep over the whole data set (all workers), by the index (estimated from
    /// the file's first 64 KiB without one: see `index`); of a mix, its first sweep's.
    #[getter]
    fn total_samples(&self, py: Python<'_>) -> PyResult<u64> {
        let mut engine = self.engine(py)?;
        Ok(engine.open()?.sweep_size().samples)
    }

    /// The sequences of one sweep, from the index (estimated without one, as total_samples).
    #[getter]
    fn total_sequences(&self, py: Python<'_>) -> PyResult<u64> {
        let mut engine = self.engine(py)?;
        Ok(engine.open()?.sweep_size().sequences as u64)
    }

    /// Warnings so far: parameters that do not apply, index cache problems, samples skipped
    /// under max_errors, keys missing from one of several joined files.
    #[getter]
    fn diagnostics(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let mut engine = self.engine(py)?;
        let diagnostics = engine.open()?.diagnostics();
        Ok(diagnostics.iter().map(|d| d.to_string()).collect())
    }

    /// What the reader has done so far, a dict: ``minibatches``, ``samples``,
    /// ``chunks_decoded``, ``bytes_decoded`` (the chunks' size in the file),
    /// ``decode_seconds`` (summed over the reader's threads), ``wait_seconds`` (the time
    /// ``next_minibatch`` waited for chunks to be decoded: the data stall), ``elapsed_seconds``
    /// (since the reader was opened), ``samples_per_second``, ``wait_share`` (wait over
    /// elapsed, 0 to 1), ``window_chunks``, ``window_bytes`` (their size in the file) and
    /// ``chunks_held`` (now), ``peak_chunks_held`` and ``peak_bytes_held`` (the most so far,
    /// the bytes in the file), ``buffers_reused`` and ``buffers_new`` (chunk buffers taken from
    /// those an earlier reader of the process left, and allocated anew); of a mix=, ``mix``:
    /// per sweep (the last one in progress) what each source contributed, ``{"sweep", "ended",
    /// "sources": [{"source", "weight", "sequences", "samples"}, ...]}`` (empty otherwise).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let mut engine = self.engine(py)?;
        let reader = engine.open()?;
        let s = reader.stats();
        let d = PyDict::new(py);
        d.set_item("mix", mix_report(py, reader)?)?;
        d.set_item("minibatches", s.minibatches)?;
        d.set_item("samples", s.samples)?;
        d.set_item("chunks_decoded", s.chunks_decoded)?;
        d.set_item("bytes_decoded", s.bytes_decoded)?;
        d.set_item("decode_seconds", s.decode_time.as_secs_f64())?;
        d.set_item("wait_seconds", s.wait_time.as_secs_f64())?;
        d.set_item("elapsed_seconds", s.elapsed.as_secs_f64())?;
        d.set_item("samples_per_second", s.samples_per_second())?;
        d.set_item("wait_share", s.wait_share())?;
        d.set_item("window_chunks", s.window_chunks)?;
        d.set_item("chunks_held", s.chunks_held)?;
        d.set_item("window_bytes", s.window_bytes)?;
        d.set_item("peak_chunks_held", s.peak_chunks_held)?;
        d.set_item("peak_bytes_held", s.peak_bytes_held)?;
        d.set_item("buffers_reused", s.buffers_reused)?;
        d.set_item("buffers_new", s.buffers_new)?;
        Ok(d)
    }

    /// With equalize=: a note per sweep ended since the last call, saying what this worker
    /// repeated or dropped to deliver its minibatches.
    fn take_notes(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let mut engine = self.engine(py)?;
        Ok(engine
            .inner
            .as_mut()
            .map_or_else(Vec::new, |r| r.take_notes()))
    }

    /// With equalize=: the minibatches this worker delivers in the current sweep (resumed on
    /// another number of workers, in the rest of the interrupted sweep: its own quota); None
    /// without equalize.
    #[getter]
    fn sweep_quota(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        let mut engine = self.engine(py)?;
        Ok(engine.open()?.sweep_quota())
    }

    /// True once the epoch (max_sweeps / max_samples) is over or the reader is closed.
    #[getter]
    fn done(&self, py: Python<'_>) -> PyResult<bool> {
        let engine = self.engine(py)?;
        Ok(engine.inner.as_ref().is_none_or(|r| r.is_done()))
    }

    /// The next minibatch of `size` (default: the reader's minibatch_size or
    /// minibatch_sequences, and in that unit), or None at the end of the epoch. The GIL is
    /// released while the minibatch is packed.
    #[pyo3(signature = (size=None))]
    fn next_minibatch(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = arg::size)] size: Option<usize>,
    ) -> PyResult<Option<Minibatch>> {
        let size = match (size, self.size) {
            (Some(0), _) => return Err(bad_arg("size", "must be at least 1")),
            (None, default) => default,
            (Some(n), MinibatchSize::Samples(_)) => MinibatchSize::Samples(n),
            (Some(n), MinibatchSize::Sequences(_)) => MinibatchSize::Sequences(n),
        };
        crate::options::warn_cache(py)?;
        let mut engine = self.engine(py)?;
        let engine = &mut *engine;
        let Some(reader) = engine.inner.as_mut() else {
            return Err(closed_error());
        };
        // Refill the buffers of a recent minibatch that only the reader still refers to.
        // SAFETY: reading the reference count of a live object we hold.
        let only_ours = |b: &Py<Buffers>| unsafe { pyo3::ffi::Py_REFCNT(b.as_ptr()) } == 1;
        let free = engine.recent.iter().position(only_ours);
        let mut mb = free
            .and_then(|i| engine.recent.remove(i))
            .and_then(|b| b.bind(py).borrow_mut().mb.take())
            .unwrap_or_else(|| reader.new_minibatch());
        let result = detached(py, move || {
            let got = reader.next_minibatch(size, &mut mb)?;
            Ok((got, mb))
        });
        if self.closing.load(Ordering::SeqCst) {
            // The engine is closed when `engine` is released.
            return Err(PyValueError::new_err(
                "the reader was closed (by close() in another thread) during this read",
            ));
        }
        let (got, mb) = match result {
            Ok(r) => r,
            Err(e) => {
                if e.is_instance_of::<InternalError>(py) {
                    engine.inner = None;
                }
                return Err(e);
            }
        };
        if !got {
            return Ok(None);
        }
        let (num_samples, num_sequences, end_of_sweep) =
            (mb.samples(), mb.len(), mb.end_of_sweep());
        let buffers = Py::new(py, Buffers { mb: Some(mb) })?;
        if engine.recent.len() == RECENT_BUFFERS {
            engine.recent.pop_front();
        }
        engine.recent.push_back(buffers.clone_ref(py));
        Ok(Some(Minibatch {
            buffers,
            specs: self.specs.clone(),
            precision: self.precision,
            num_samples,
            num_sequences,
            end_of_sweep,
        }))
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Minibatch>> {
        self.next_minibatch(py, None)
    }

    /// The reader's position and what it reads, as a JSON-serialisable dict.
    fn state_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let position = self.engine(py)?.open()?.state();
        let state = serde_json::json!({
            "format": "exfeed.Reader",
            "version": 1,
            "position": position,
            "data": self.fingerprint(),
        });
        json_to_py(py, &state.to_string())
    }

    /// Continues from a position saved by state_dict() of a reader of the same data and
    /// options; a different data set or options is refused with a ValueError saying what
    /// differs. A list of the state_dict()s of all the workers of a read (every worker_rank of
    /// their num_workers) resumes them on this reader's num_workers and worker_rank, which may
    /// differ: the rest of their sweep is split between the new workers, every sequence once,
    /// and later sweeps are planned for the new count (docs/reader.md); a ValueError names the
    /// workers whose states are missing.
    fn load_state_dict(&self, py: Python<'_>, state: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut engine = self.engine(py)?;
        engine.open()?;
        let all = state.is_instance_of::<pyo3::types::PyList>()
            || state.is_instance_of::<pyo3::types::PyTuple>();
        let states: Vec<Bound<'_, PyAny>> = match all {
            true => state.try_iter()?.collect::<PyResult<_>>()?,
            false => vec![state.clone()],
        };
        let positions = states
            .iter()
            .map(|s| self.saved_position(py, s))
            .collect::<PyResult<Vec<_>>>()?;
        // Stop this reader's threads before opening the restored one.
        engine.close(py);
        let (cfg, run) = (&self.cfg, &self.run);
        let restored = detached(py, move || match all {
            true => AnyReader::restore_from_all(cfg, run, &positions),
            false => AnyReader::restore(cfg, run, &positions[0]),
        })?;
        *lock_briefly(&self.stopper) = restored.stopper();
        engine.inner = Some(restored);
        Ok(())
    }

    /// With randomizer="cntk": goes to CNTK's checkpoint position, the global sample position
    /// CNTK saves as `minibatchSourcePosition`, as CNTK's SetState does (the sweep is position
    /// // samples per sweep; reading goes on at the first sequence of that sweep's order starting
    /// at or after it). ValueError with randomizer="exfeed" (restore a state_dict() there).
    fn set_cntk_position(&self, py: Python<'_>, position: u64) -> PyResult<()> {
        let mut engine = self.engine(py)?;
        let reader = engine.open()?;
        detached(py, move || reader.set_cntk_position(position))
    }

    /// Stops the decoding threads and frees the reader's memory (arrays handed out stay valid).
    /// From another thread, a read in progress stops at its next window and raises ValueError;
    /// the reader is closed when it does.
    fn close(&self, py: Python<'_>) {
        self.closing.store(true, Ordering::SeqCst);
        lock_briefly(&self.stopper).stop();
        let Ok(engine) = self.engine.try_lock() else {
            return; // the call holding the engine closes it when it returns
        };
        let mut engine = EngineGuard {
            engine,
            closing: &self.closing,
        };
        if !self.threads_are_here() {
            std::mem::forget(engine.inner.take());
        }
        engine.close(py);
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }

    #[getter]
    fn closed(&self, py: Python<'_>) -> PyResult<bool> {
        if self.closing.load(Ordering::SeqCst) {
            return Ok(true);
        }
        Ok(self.engine(py)?.inner.is_none())
    }
}

/// Locks a mutex held only for moments (never across a wait).
fn lock_briefly<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Reader {
    /// The engine, for one call: waits while another thread's call holds it, with the GIL
    /// released (that call needs the GIL to finish). In a process forked from the reader's, a
    /// reader with decoding threads refuses at once.
    fn engine(&self, py: Python<'_>) -> PyResult<EngineGuard<'_>> {
        if !self.threads_are_here() {
            return Err(PyRuntimeError::new_err(format!(
                "this Reader was created in process {} and inherited through fork() by process \
                 {}: its decoding threads did not follow it. Create the Reader after the fork \
                 (exfeed.torch does so in each worker), or give threads=0",
                self.owner_pid,
                std::process::id()
            )));
        }
        let engine = loop {
            match self.engine.try_lock() {
                Ok(engine) => break engine,
                Err(TryLockError::Poisoned(e)) => break e.into_inner(),
                Err(TryLockError::WouldBlock) => py.detach(|| drop(lock_briefly(&self.engine))),
            }
        };
        Ok(EngineGuard {
            engine,
            closing: &self.closing,
        })
    }

    /// Whether the engine's decoding threads run in this process: it is the one that made
    /// the reader, or the reader has none (threads=0).
    fn threads_are_here(&self) -> bool {
        self.owner_pid == std::process::id() || self.run.threads == Some(0)
    }

    /// What a saved state must agree on besides the engine options (the library checks those).
    /// The reader position of a state_dict() of a reader of the same data.
    fn saved_position(&self, py: Python<'_>, state: &Bound<'_, PyAny>) -> PyResult<ReaderState> {
        let text: String = py
            .import("json")?
            .call_method1("dumps", (state,))?
            .extract()?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| bad_arg("state", format!("not a reader state: {e}")))?;
        if v.get("format").and_then(|f| f.as_str()) != Some("exfeed.Reader") {
            return Err(bad_arg("state", "not a state_dict() of exfeed.Reader"));
        }
        let saved = v.get("data").cloned().unwrap_or_default();
        let mine = self.fingerprint();
        for key in ["files", "streams", "precision"] {
            if saved.get(key) != mine.get(key) {
                return Err(bad_arg(
                    "state",
                    format!(
                        "it was saved by a reader of different data: {key} {} there, {} here",
                        saved.get(key).unwrap_or(&serde_json::Value::Null),
                        mine.get(key).unwrap_or(&serde_json::Value::Null)
                    ),
                ));
            }
        }
        let position = v.get("position").cloned().unwrap_or_default();
        ReaderState::from_json(&position.to_string()).map_err(to_py)
    }

    fn fingerprint(&self) -> serde_json::Value {
        let files: Vec<String> = self
            .cfg
            .deserializers
            .iter()
            // By name, so that a state moves with the data to another directory. A corpus's
            // files are in the library's state (and compared there, by name).
            .map(|d| {
                if d.corpus.is_some() {
                    return "(corpus)".to_string();
                }
                d.file
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        let streams: Vec<serde_json::Value> = self
            .specs
            .iter()
            .map(|s| serde_json::json!([s.name, s.storage.as_str(), s.dim]))
            .collect();
        serde_json::json!({
            "files": files,
            "streams": streams,
            "precision": self.precision.as_str(),
        })
    }
}

pub fn json_to_py<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (text,))
}

/// One minibatch: whole sequences; `mb[name]` is a Stream.
#[pyclass(frozen, module = "exfeed", name = "Minibatch")]
pub struct Minibatch {
    buffers: Py<Buffers>,
    specs: Arc<Vec<StreamSpec>>,
    precision: Precision,
    /// Samples (as the minibatch size counts them).
    #[pyo3(get)]
    num_samples: usize,
    /// Sequences.
    #[pyo3(get)]
    num_sequences: usize,
    /// The last sequence of a sweep is in this minibatch.
    #[pyo3(get)]
    end_of_sweep: bool,
}

impl Minibatch {
    fn stream(&self, py: Python<'_>, index: usize) -> Stream {
        Stream {
            buffers: self.buffers.clone_ref(py),
            index,
            spec: self.specs[index].clone(),
            precision: self.precision,
        }
    }

    fn sequence_field(
        &self,
        py: Python<'_>,
        f: fn(&exfeed::reader::SequenceInfo) -> u64,
    ) -> PyResult<Py<PyAny>> {
        let b = self.buffers.bind(py).borrow();
        let mb =
            b.mb.as_ref()
                .ok_or_else(|| InternalError::new_err("minibatch buffers gone"))?;
        let v: Vec<i64> = mb.sequences().iter().map(|s| f(s) as i64).collect();
        Ok(PyArray1::from_vec(py, v).into_any().unbind())
    }
}

#[pymethods]
impl Minibatch {
    /// The sequences' keys (CTF sequence ids, CBF/Lens sequence numbers), int64.
    #[getter]
    fn keys(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.sequence_field(py, |s| s.key)
    }

    /// The sweep each sequence was read in, int64.
    #[getter]
    fn sweeps(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.sequence_field(py, |s| s.sweep)
    }

    /// The stream names, in order.
    #[getter]
    fn stream_names(&self) -> Vec<String> {
        self.specs.iter().map(|s| s.name.clone()).collect()
    }

    fn __getitem__(&self, py: Python<'_>, name: &str) -> PyResult<Stream> {
        match self.specs.iter().position(|s| s.name == name) {
            Some(i) => Ok(self.stream(py, i)),
            None => Err(PyKeyError::new_err(format!(
                "no stream '{name}' (streams: {})",
                self.stream_names().join(", ")
            ))),
        }
    }

    fn __contains__(&self, name: &str) -> bool {
        self.specs.iter().any(|s| s.name == name)
    }

    /// (name, Stream) pairs, in order.
    fn items(&self, py: Python<'_>) -> Vec<(String, Stream)> {
        (0..self.specs.len())
            .map(|i| (self.specs[i].name.clone(), self.stream(py, i)))
            .collect()
    }

    fn __repr__(&self) -> String {
        format!(
            "Minibatch(num_samples={}, num_sequences={}, end_of_sweep={}, streams=[{}])",
            self.num_samples,
            self.num_sequences,
            if self.end_of_sweep { "True" } else { "False" },
            self.stream_names().join(", ")
        )
    }
}

/// One stream of a minibatch. Dense: `values` [samples, dim]; sparse: CSR `indptr`,
/// `indices`, `data`; both: `offsets` [num_sequences + 1], sequence i is samples
/// offsets[i]..offsets[i+1]. Arrays are views on the minibatch's buffers (no copy).
#[pyclass(frozen, module = "exfeed", name = "Stream")]
pub struct Stream {
    buffers: Py<Buffers>,
    index: usize,
    spec: StreamSpec,
    precision: Precision,
}

impl Stream {
    /// Runs `f` on this stream's data and the buffers' owner.
    fn with<'py, R>(
        &self,
        py: Python<'py>,
        f: impl FnOnce(&Bound<'py, Buffers>, StreamRef<'_>) -> PyResult<R>,
    ) -> PyResult<R> {
        let owner = self.buffers.bind(py);
        let b = owner.borrow();
        let mb =
            b.mb.as_ref()
                .ok_or_else(|| InternalError::new_err("minibatch buffers gone"))?;
        match mb {
            AnyMinibatch::F32(m) => f(owner, StreamRef::F32(&m.data.streams()[self.index])),
            AnyMinibatch::F64(m) => f(owner, StreamRef::F64(&m.data.streams()[self.index])),
        }
    }

    fn require(&self, storage: Storage, what: &str) -> PyResult<()> {
        if self.spec.storage == storage {
            Ok(())
        } else {
            Err(PyTypeError::new_err(format!(
                "stream '{}' is {}: {what} is for {} streams",
                self.spec.name, self.spec.storage, storage
            )))
        }
    }
}

/// A stream's data in either precision.
pub enum StreamRef<'a> {
    F32(&'a StreamData<f32>),
    F64(&'a StreamData<f64>),
}

macro_rules! each {
    ($s:expr, $x:ident => $body:expr) => {
        match $s {
            StreamRef::F32($x) => $body,
            StreamRef::F64($x) => $body,
        }
    };
}

fn padded<'py, T: Element + numpy::Element>(
    py: Python<'py>,
    s: &StreamData<T>,
    pad: f64,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let seqs = s.num_sequences();
    let dim = s.dim();
    let max_len = (0..seqs)
        .map(|i| s.sequence_samples(i).len())
        .max()
        .unwrap_or(0);
    let pad = T::from_f64(pad);
    let (values, mask) = py.detach(|| {
        let mut values = vec![pad; seqs * max_len * dim];
        let mut mask = vec![false; seqs * max_len];
        for i in 0..seqs {
            for (j, sample) in s.sequence_samples(i).enumerate() {
                let row = &mut values[(i * max_len + j) * dim..][..dim];
                match s.storage() {
                    Storage::Dense => row.copy_from_slice(s.dense_sample(sample)),
                    Storage::Sparse => {
                        // Densified: zeros, then the non-zeros.
                        row.fill(T::default());
                        let (idx, val) = s.sparse_sample(sample);
                        for (&k, &v) in idx.iter().zip(val) {
                            row[k as usize] = v;
                        }
                    }
                }
                mask[i * max_len + j] = true;
            }
        }
        (values, mask)
    });
    let values = PyArray1::from_vec(py, values).reshape([seqs, max_len, dim])?;
    let mask = PyArray1::from_vec(py, mask).reshape([seqs, max_len])?;
    Ok((values.into_any(), mask.into_any()))
}

#[pymethods]
impl Stream {
    #[getter]
    fn name(&self) -> &str {
        &self.spec.name
    }

    /// "dense" or "sparse".
    #[getter]
    fn storage(&self) -> &'static str {
        self.spec.storage.as_str()
    }

    #[getter]
    fn is_sparse(&self) -> bool {
        self.spec.storage == Storage::Sparse
    }

    #[getter]
    fn dim(&self) -> usize {
        self.spec.dim
    }

    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> Bound<'py, PyArrayDescr> {
        dtype_of(py, self.precision)
    }

    /// Samples of this stream in the minibatch.
    #[getter]
    fn num_samples(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |_, s| Ok(each!(s, d => d.num_samples())))
    }

    #[getter]
    fn num_sequences(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |_, s| Ok(each!(s, d => d.num_sequences())))
    }

    /// Dense: the values, [samples, dim] (float32 or float64), a view without copy.
    #[getter]
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.require(Storage::Dense, "values")?;
        self.with(
            py,
            |o, s| each!(s, d => view(o, d.values(), &[d.num_samples(), d.dim()])),
        )
    }

    /// int64 [num_sequences + 1]: sequence i is samples offsets[i]..offsets[i+1].
    #[getter]
    fn offsets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.with(
            py,
            |o, s| each!(s, d => view(o, as_i64(d.seq_offsets()), &[d.seq_offsets().len()])),
        )
    }

    /// Sparse: CSR row pointers, int64 [samples + 1].
    #[getter]
    fn indptr<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.require(Storage::Sparse, "indptr")?;
        self.with(
            py,
            |o, s| each!(s, d => view(o, as_i64(d.sample_offsets()), &[d.sample_offsets().len()])),
        )
    }

    /// Sparse: column indices of the non-zeros, int32 (uint32 above 2**31 - 1).
    #[getter]
    fn indices<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.require(Storage::Sparse, "indices")?;
        let small = self.spec.dim <= i32::MAX as usize;
        self.with(py, |o, s| {
            each!(s, d => {
                let idx = d.indices();
                if small {
                    // SAFETY: u32 and i32 have the same layout; every index is below dim.
                    let idx: &[i32] = unsafe { std::slice::from_raw_parts(idx.as_ptr().cast(), idx.len()) };
                    view(o, idx, &[idx.len()])
                } else {
                    view(o, idx, &[idx.len()])
                }
            })
        })
    }

    /// Sparse: the non-zero values.
    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.require(Storage::Sparse, "data")?;
        self.with(
            py,
            |o, s| each!(s, d => view(o, d.values(), &[d.values().len()])),
        )
    }

    /// Sparse: the column of each sample's one entry, int64 [samples], where every sample is
    /// one-hot (exactly one entry, of value 1); else None. One pass, for exfeed.torch's
    /// ``sparse="ids"``.
    fn one_hot_ids<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.require(Storage::Sparse, "one_hot_ids()")?;
        self.with(py, |_, s| {
            let ids = each!(s, d => {
                let one_hot = d.sample_offsets().windows(2).all(|w| w[1] - w[0] == 1)
                    && d.values().iter().all(|&v| v == 1.0);
                one_hot.then(|| d.indices().iter().map(|&i| i64::from(i)).collect::<Vec<_>>())
            });
            Ok(ids.map(|v| PyArray1::from_vec(py, v).into_any()))
        })
    }

    /// Sparse: a scipy.sparse.csr_matrix [samples, dim] sharing the data (scipy needed).
    fn to_scipy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.require(Storage::Sparse, "to_scipy()")?;
        let sparse = py.import("scipy.sparse").map_err(|e| {
            if !e.is_instance_of::<PyImportError>(py) {
                return e;
            }
            let missing = PyModuleNotFoundError::new_err(format!(
                "stream {:?} is sparse: as a scipy.sparse matrix (Stream.to_scipy(), \
                 as_sequences(), exfeed.cntk.io) it needs SciPy, which is not installed: \
                 pip install scipy (or pip install 'exfeed[scipy]')",
                self.spec.name
            ));
            missing.set_cause(py, Some(e));
            missing
        })?;
        let shape = (self.num_samples(py)?, self.spec.dim);
        let parts = (self.data(py)?, self.indices(py)?, self.indptr(py)?);
        let kwargs = PyDict::new(py);
        kwargs.set_item("shape", shape)?;
        sparse.getattr("csr_matrix")?.call((parts,), Some(&kwargs))
    }

    /// (values [sequences, longest, dim], mask bool [sequences, longest]): a fresh copy,
    /// padded with `pad`. Sparse streams are densified (costly for a large dim).
    #[pyo3(signature = (pad=0.0))]
    fn to_padded<'py>(
        &self,
        py: Python<'py>,
        pad: f64,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        self.with(py, |_, s| each!(s, d => padded(py, d, pad)))
    }

    /// One array per sequence: dense [length, dim] views; sparse scipy CSR matrices.
    fn as_sequences<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let whole = match self.spec.storage {
            Storage::Dense => self.values(py)?,
            Storage::Sparse => self.to_scipy(py)?,
        };
        let offsets: Vec<usize> =
            self.with(py, |_, s| Ok(each!(s, d => d.seq_offsets().to_vec())))?;
        let out = PyList::empty(py);
        for w in offsets.windows(2) {
            let rows = pyo3::types::PySlice::new(py, w[0] as isize, w[1] as isize, 1);
            out.append(whole.get_item(rows)?)?;
        }
        Ok(out)
    }

    fn __repr__(&self) -> String {
        format!(
            "Stream(name={:?}, storage={:?}, dim={})",
            self.spec.name,
            self.spec.storage.as_str(),
            self.spec.dim
        )
    }
}

/// Frees now the decoded-chunk buffers that closed readers left for the process's next reader
/// (they are freed on their own 10 seconds after the reader closed); returns the bytes freed.
#[pyfunction]
pub fn release_memory(py: Python<'_>) -> usize {
    py.detach(exfeed::reader::release_kept_batches)
}

/// Raises InternalError from a Rust panic, through the same guard as every call (for tests).
#[pyfunction]
pub fn _panic_for_tests(py: Python<'_>, message: String) -> PyResult<()> {
    detached(py, move || -> exfeed::Result<()> { panic!("{message}") })
}

/// The address of a dense stream's values in the Rust buffers (for the zero-copy tests).
#[pyfunction]
pub fn _buffer_address(py: Python<'_>, stream: &Stream) -> PyResult<usize> {
    stream.with(py, |_, s| Ok(each!(s, d => d.values().as_ptr() as usize)))
}

/// Of a mix: per sweep, what each source contributed (see `Reader.stats`); empty otherwise.
fn mix_report<'py>(py: Python<'py>, reader: &AnyReader) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    let Some(mix) = reader.mix() else {
        return Ok(out);
    };
    for sweep in reader.mix_report() {
        let sources = PyList::empty(py);
        for (part, count) in mix.parts().iter().zip(&sweep.counts) {
            let d = PyDict::new(py);
            d.set_item("source", &part.name)?;
            d.set_item("weight", part.weight)?;
            d.set_item("sequences", count.sequences)?;
            d.set_item("samples", count.samples)?;
            sources.append(d)?;
        }
        let d = PyDict::new(py);
        d.set_item("sweep", sweep.sweep)?;
        d.set_item("ended", sweep.ended)?;
        d.set_item("sources", sources)?;
        out.append(d)?;
    }
    Ok(out)
}
