//! The keyword arguments of `exfeed.Reader` (those of `exfeed read`), checked and turned into
//! the library's [`ReaderConfig`] and run options.

use crate::errors::bad_arg;
use exfeed::config::{ConfigOptions, ReaderConfig, SectionReader};
use exfeed::configured::{Equalize, ReaderArgs, RunOptions};
use exfeed::io::{InputPath, StorageOptions};
use exfeed::lens::materialize::Layout;
use exfeed::options::{ChunkSize, ReadOptions};
use exfeed::reader::{EpochLimit, EqualizeMode, MinibatchSize, Randomizer};
use exfeed::source::{Corpus, IndexMode, MixSpec};
use exfeed::{Precision, Storage, StreamSpec};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use std::path::PathBuf;

/// What the data is and how to read it: a configuration file (with its section and
/// overrides) and the reader's arguments on top; everything but the engine's run options.
#[derive(Debug, Clone, Default)]
pub struct SourceArgs {
    pub config: Option<PathBuf>,
    /// `section=` and `set=` (NAME=VALUE overrides applied to the configuration file).
    pub config_options: ConfigOptions,
    pub args: ReaderArgs,
}

/// The epoch limit from `max_sweeps` (None: unlimited) and `max_samples`.
pub fn epoch_limit(max_sweeps: Option<u64>, max_samples: Option<u64>) -> PyResult<EpochLimit> {
    Ok(match (max_sweeps, max_samples) {
        (_, Some(0)) => return Err(bad_arg("max_samples", "must be at least 1")),
        (Some(0), _) => return Err(bad_arg("max_sweeps", "must be at least 1 (or None)")),
        // max_sweeps=1 is the default: max_samples replaces it.
        (Some(1) | None, Some(n)) => EpochLimit::Samples(n),
        (Some(_), Some(_)) => {
            return Err(bad_arg(
                "max_samples",
                "give max_sweeps or max_samples, not both",
            ))
        }
        (Some(k), None) => EpochLimit::Sweeps(k),
        (None, None) => EpochLimit::Unlimited,
    })
}

/// Checks the run options' arguments (the library would refuse them without naming them).
pub fn check_run_options(o: &RunOptions) -> PyResult<()> {
    if o.num_workers == 0 {
        return Err(bad_arg("num_workers", "must be at least 1"));
    }
    if o.worker_rank >= o.num_workers {
        return Err(bad_arg(
            "worker_rank",
            format!(
                "must be below num_workers ({}), found {}",
                o.num_workers, o.worker_rank
            ),
        ));
    }
    if o.prefetch_chunks == Some(0) {
        return Err(bad_arg("prefetch_chunks", "must be at least 1"));
    }
    Ok(())
}

/// The `randomizer` argument (`"exfeed"` or `"cntk"`).
pub fn parse_randomizer(name: &str) -> PyResult<Randomizer> {
    name.parse()
        .map_err(|e: exfeed::Error| bad_arg("randomizer", e.message()))
}

/// The `index` argument (`"auto"`, `"full"` or `"none"`).
pub fn parse_index(mode: &str) -> PyResult<IndexMode> {
    mode.parse()
        .map_err(|e: exfeed::Error| bad_arg("index", e.message()))
}

/// `files`: one path or a list of paths (str or os.PathLike).
pub fn extract_files(files: &Bound<'_, PyAny>) -> PyResult<Vec<PathBuf>> {
    let files: Vec<PathBuf> = if let Ok(one) = files.extract::<PathBuf>() {
        vec![one]
    } else {
        files.extract().map_err(|_| {
            PyTypeError::new_err("files: expected a path or a list of paths (str or os.PathLike)")
        })?
    };
    if files.is_empty() {
        return Err(bad_arg("files", "no file given"));
    }
    Ok(files)
}

/// `chunk_size`: bytes (an int) or `"auto"`; None: not given.
pub fn extract_chunk_size(v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<ChunkSize>> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    if !v.is_instance_of::<pyo3::types::PyBool>() {
        if let Ok(bytes) = v.extract::<u64>() {
            return Ok(Some(ChunkSize::Bytes(bytes)));
        }
    }
    match v.extract::<String>() {
        Ok(s) if s == "auto" => Ok(Some(ChunkSize::Auto)),
        _ => Err(bad_arg(
            "chunk_size",
            format!(
                "expected a number of bytes or \"auto\", found {}",
                v.repr()?
            ),
        )),
    }
}

/// The keywords of `ReadOptions`: `chunk_size`, `index` (None: not given) and the switches
/// `keep_in_memory`, `cache_index`, `frame_mode` (False: the configuration's value stands).
pub fn read_options(
    chunk_size: Option<&Bound<'_, PyAny>>,
    index: Option<&str>,
    keep_in_memory: bool,
    cache_index: bool,
    frame_mode: bool,
) -> PyResult<ReadOptions> {
    let mut read = ReadOptions::new();
    if let Some(size) = extract_chunk_size(chunk_size)? {
        read = read.with_chunk_size(size);
    }
    if let Some(index) = index {
        read = read.with_index(parse_index(index)?);
    }
    if keep_in_memory {
        read = read.with_keep_in_memory(true);
    }
    if cache_index {
        read = read.with_cache_index(true);
    }
    if frame_mode {
        read = read.with_frame_mode(true);
    }
    Ok(read)
}

/// `equalize`: True (the `num_workers` workers are the ranks kept in step), a number of ranks
/// (the workers split evenly between them, e.g. DataLoader processes), or False/None.
pub fn extract_equalize(
    v: Option<&Bound<'_, PyAny>>,
    minibatch_size: MinibatchSize,
    num_workers: usize,
    mode: EqualizeMode,
) -> PyResult<Option<Equalize>> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let ranks = if v.is_instance_of::<pyo3::types::PyBool>() {
        if !v.extract::<bool>()? {
            return Ok(None);
        }
        num_workers
    } else {
        let ranks: usize = crate::errors::extract_arg(v, "equalize")?;
        if ranks == 0 || !num_workers.is_multiple_of(ranks) {
            return Err(bad_arg(
                "equalize",
                format!("{ranks} ranks do not divide num_workers ({num_workers})"),
            ));
        }
        ranks
    };
    Ok(Some(Equalize {
        minibatch_size,
        ranks,
        mode,
    }))
}

/// `corpus`: a glob (`"data/train-*.ctf"`), `"@list.txt"` (a list file), or a list of paths.
pub fn extract_corpus(corpus: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Corpus>> {
    let Some(corpus) = corpus.filter(|c| !c.is_none()) else {
        return Ok(None);
    };
    if let Ok(spec) = corpus.extract::<String>() {
        return Ok(Some(Corpus::parse(&spec)));
    }
    if let Ok(path) = corpus.extract::<PathBuf>() {
        return Ok(Some(Corpus::Glob(path.display().to_string())));
    }
    let files: Vec<PathBuf> = corpus.extract().map_err(|_| {
        PyTypeError::new_err(
            "corpus: expected a glob, \"@LIST\" or a list of paths (str or os.PathLike)",
        )
    })?;
    if files.is_empty() {
        return Err(bad_arg("corpus", "no file given"));
    }
    Ok(Some(Corpus::Files(files)))
}

/// `mix`: `{"a.ctf": 0.7, "b/*.cbf": 0.3}` (each source a file, glob or `"@LIST"`, str or
/// os.PathLike, and its weight) or the string `"a.ctf=0.7,b/*.cbf=0.3"`; with `corpus`, refused.
pub fn extract_mix(
    mix: Option<&Bound<'_, PyAny>>,
    corpus: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<Corpus>> {
    let Some(mix) = mix.filter(|m| !m.is_none()) else {
        return Ok(None);
    };
    if corpus.is_some_and(|c| !c.is_none()) {
        return Err(bad_arg("mix", "give corpus= or mix=, not both"));
    }
    let spec = match mix.extract::<String>() {
        Ok(text) => MixSpec::parse(&text),
        Err(_) => {
            let dict = mix.cast::<PyDict>().map_err(|_| {
                PyTypeError::new_err(
                    "mix: expected a dict of sources (str or os.PathLike) and weights, or \
                     \"SOURCE=WEIGHT,...\"",
                )
            })?;
            let mut parts = Vec::new();
            for (source, weight) in dict.iter() {
                let source: PathBuf = source
                    .extract()
                    .map_err(|_| PyTypeError::new_err("mix: a source is a str or os.PathLike"))?;
                let weight: f64 = weight
                    .extract()
                    .map_err(|_| PyTypeError::new_err("mix: a weight is a number"))?;
                parts.push((Corpus::parse(&source.display().to_string()), weight));
            }
            MixSpec::new(parts, None)
        }
    };
    let spec = spec.map_err(|e| bad_arg("mix", e.message()))?;
    Ok(Some(Corpus::Mix(spec)))
}

/// `inputs`: `{"name": ("dense", 784), "labels": ("sparse", 10, "L")}`, a list of
/// `exfeed.Input` objects (anything with name, storage, dim, alias, defines_mb_size
/// attributes) or of `"NAME:FORMAT:DIM[:ALIAS]"` strings.
pub fn extract_inputs(inputs: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<StreamSpec>> {
    let Some(inputs) = inputs.filter(|i| !i.is_none()) else {
        return Ok(Vec::new());
    };
    let err = |what: String| bad_arg("inputs", what);
    let spec = |name: String, storage: String, dim: usize| -> PyResult<StreamSpec> {
        let storage: Storage = storage.parse().map_err(|e| err(format!("'{name}': {e}")))?;
        if dim == 0 {
            return Err(err(format!("'{name}': dim must be at least 1")));
        }
        Ok(StreamSpec::new(name, storage, dim))
    };
    if let Ok(dict) = inputs.cast::<PyDict>() {
        let mut out = Vec::new();
        for (k, v) in dict.iter() {
            let name: String = k
                .extract()
                .map_err(|_| err("keys must be names (str)".into()))?;
            let t = v.cast::<PyTuple>().map_err(|_| {
                err(format!(
                    "'{name}': expected (storage, dim[, alias]), e.g. (\"dense\", 784)"
                ))
            })?;
            let (storage, dim, alias): (String, usize, Option<String>) = match t.len() {
                2 => {
                    let (s, d) = t.extract()?;
                    (s, d, None)
                }
                3 => t.extract()?,
                _ => return Err(err(format!("'{name}': expected (storage, dim[, alias])"))),
            };
            let mut s = spec(name, storage, dim)?;
            s.alias = alias;
            out.push(s);
        }
        return Ok(out);
    }
    if inputs.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "inputs: expected a dict or a list of exfeed.Input, found a str",
        ));
    }
    let mut out = Vec::new();
    for item in inputs
        .try_iter()
        .map_err(|_| PyTypeError::new_err("inputs: expected a dict or a list of exfeed.Input"))?
    {
        let item = item?;
        if let Ok(text) = item.extract::<String>() {
            out.push(text.parse::<StreamSpec>().map_err(|e| err(e.to_string()))?);
            continue;
        }
        let get = |a: &str| {
            item.getattr(a).map_err(|_| {
                PyTypeError::new_err(format!(
                    "inputs: expected exfeed.Input objects, found {}",
                    item.get_type()
                        .name()
                        .map(|n| n.to_string())
                        .unwrap_or_default()
                ))
            })
        };
        let name: String = get("name")?.extract()?;
        let mut s = spec(name, get("storage")?.extract()?, get("dim")?.extract()?)?;
        s.alias = get("alias")?.extract()?;
        s.defines_mb_size = get("defines_mb_size")?.extract()?;
        out.push(s);
    }
    Ok(out)
}

/// A Lens layout: `"in:4,hidden:2"`, a list of `(name, size)` pairs, or a dict.
pub fn extract_layout(name: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Layout>> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    if let Ok(text) = v.extract::<String>() {
        return Layout::parse(&text)
            .map(Some)
            .map_err(|e| bad_arg(name, e.message()));
    }
    let groups: Vec<(String, usize)> = if let Ok(d) = v.cast::<PyDict>() {
        d.iter()
            .map(|(k, v)| Ok((k.extract()?, v.extract()?)))
            .collect::<PyResult<_>>()
    } else {
        v.extract()
    }
    .map_err(|_| {
        PyTypeError::new_err(format!(
            "{name}: expected \"NAME:SIZE,...\" or a list of (name, size) pairs"
        ))
    })?;
    Ok(Some(Layout { groups }))
}

/// `set`: `{"name": value}` (bool values as true/false, others as str()) or a list of
/// `"NAME=VALUE"` strings, as `exfeed read --set`.
/// `storage_options`: a dict of the store's settings for URL inputs (`s3://`, `http(s)://`),
/// e.g. `{"aws_endpoint": "http://127.0.0.1:8333", "aws_region": "us-east-1"}`, as pandas,
/// polars and pyarrow take them; values are strings (a bool is `true`/`false`).
pub fn extract_storage_options(v: Option<&Bound<'_, PyAny>>) -> PyResult<StorageOptions> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(StorageOptions::default());
    };
    let d = v.cast::<PyDict>().map_err(|_| {
        PyTypeError::new_err("storage_options: expected a dict of setting names to values")
    })?;
    d.iter()
        .map(|(k, x)| {
            let key = k.extract::<String>().map_err(|_| {
                PyTypeError::new_err("storage_options: the setting names must be str")
            })?;
            let value = match x.extract::<bool>() {
                Ok(b) if x.is_instance_of::<pyo3::types::PyBool>() => b.to_string(),
                _ => x.str()?.to_string(),
            };
            Ok((key.to_ascii_lowercase(), value))
        })
        .collect()
}

/// How URL inputs are reached: `storage_options` (see [`extract_storage_options`]),
/// `cache_dir` (the local cache shared by the processes that name it) and `cache_limit` (its
/// most bytes; default 10 GiB).
pub fn extract_remote_read(
    storage_options: Option<&Bound<'_, PyAny>>,
    cache_dir: Option<PathBuf>,
    cache_limit: Option<u64>,
) -> PyResult<ReadOptions> {
    let mut read =
        ReadOptions::new().with_storage_options(extract_storage_options(storage_options)?);
    if let Some(dir) = cache_dir {
        read = read.with_cache_dir(dir);
    }
    if let Some(limit) = cache_limit {
        if read.cache_dir().is_none() {
            return Err(bad_arg("cache_limit", "needs cache_dir"));
        }
        read = read.with_cache_limit(limit);
    }
    Ok(read)
}

/// Says as a `ConfigWarning` what the caches of URL inputs could not keep (those reads went
/// on uncached).
pub fn warn_cache(py: Python<'_>) -> PyResult<()> {
    for w in exfeed::io::take_cache_warnings() {
        PyErr::warn(
            py,
            &py.get_type::<crate::errors::ConfigWarning>(),
            &std::ffi::CString::new(w.to_string())?,
            1,
        )?;
    }
    Ok(())
}

pub fn extract_overrides(v: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(String, String)>> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(Vec::new());
    };
    let value_text = |x: &Bound<'_, PyAny>| -> PyResult<String> {
        match x.extract::<bool>() {
            Ok(b) if x.is_instance_of::<pyo3::types::PyBool>() => Ok(b.to_string()),
            _ => Ok(x.str()?.to_string()),
        }
    };
    if let Ok(d) = v.cast::<PyDict>() {
        return d
            .iter()
            .map(|(k, x)| Ok((k.extract::<String>()?, value_text(&x)?)))
            .collect();
    }
    if v.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "set: expected a dict or a list of \"NAME=VALUE\" strings, found a str",
        ));
    }
    let items: Vec<String> = v.extract().map_err(|_| {
        PyTypeError::new_err("set: expected a dict or a list of \"NAME=VALUE\" strings")
    })?;
    items
        .iter()
        .map(|t| ConfigOptions::parse_override(t).map_err(|e| bad_arg("set", e.message())))
        .collect()
}

/// `precision`: "float"/"double" or a NumPy float dtype.
pub fn extract_precision(v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Precision>> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let text = match v.extract::<String>() {
        Ok(t) => t,
        Err(_) => v.str()?.to_string(),
    };
    match text.as_str() {
        "float" | "float32" | "<class 'numpy.float32'>" => Ok(Some(Precision::Float)),
        "double" | "float64" | "<class 'numpy.float64'>" => Ok(Some(Precision::Double)),
        _ => Err(bad_arg(
            "precision",
            format!("expected \"float\" or \"double\", found {text:?}"),
        )),
    }
}

impl SourceArgs {
    /// The reader configuration (see [`ReaderArgs::configure`]) and the inputs to read, each
    /// file opened once; also the configuration's warnings. Opens the files: call it with the
    /// GIL released.
    pub fn reader_config(&self) -> exfeed::Result<(ReaderConfig, Vec<InputPath>, Vec<String>)> {
        let (cfg, warnings) = match self.load_config()? {
            Some(read) => (Some(read.config), read.warnings),
            None => (None, Vec::new()),
        };
        let (cfg, inputs) = self.args.configure(cfg)?;
        Ok((cfg, inputs, warnings))
    }

    /// The configuration file's reader (`config=`, `section=`, `set=`), if one was given.
    pub fn config_file(&self) -> exfeed::Result<Option<ReaderConfig>> {
        Ok(self.load_config()?.map(|r| r.config))
    }

    fn load_config(&self) -> exfeed::Result<Option<SectionReader>> {
        (self.config.as_ref())
            .map(|path| ReaderConfig::load(path, &self.config_options))
            .transpose()
    }

    /// Refuses what only Python can get wrong: section= or set= without config=, and inputs=
    /// with config=.
    pub fn check(&self) -> PyResult<()> {
        if self.config.is_some() && !self.args.inputs.is_empty() {
            return Err(bad_arg("inputs", "give inputs= or config=, not both"));
        }
        if self.config.is_none() {
            for (name, given) in [
                ("section", self.config_options.section.is_some()),
                ("set", !self.config_options.overrides.is_empty()),
            ] {
                if given {
                    return Err(bad_arg(
                        name,
                        "applies to a configuration file: give config=",
                    ));
                }
            }
        }
        Ok(())
    }
}
