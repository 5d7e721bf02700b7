//! The keyword arguments of `exfeed.Reader` (those of `exfeed read`), checked and turned into
//! the library's [`ReaderConfig`] and run options.

use crate::errors::{bad_arg, to_py};
use exfeed::config::{ConfigOptions, DeserializerConfig, DeserializerKind, ReaderConfig};
use exfeed::format::FileFormat;
use exfeed::lens::materialize::Layout;
use exfeed::lens::select::SelectionMode;
use exfeed::reader::{EpochLimit, RunOptions};
use exfeed::{Precision, Storage, StreamSpec};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use std::io::Read;
use std::path::{Path, PathBuf};

/// What the data is and how to read it: everything but the engine's run options.
#[derive(Debug, Clone, Default)]
pub struct SourceArgs {
    pub files: Vec<PathBuf>,
    pub inputs: Vec<StreamSpec>,
    pub config: Option<PathBuf>,
    pub section: Option<String>,
    /// `set=`: NAME=VALUE overrides applied to the configuration file.
    pub overrides: Vec<(String, String)>,
    pub randomize: Option<bool>,
    pub seed: Option<u64>,
    pub window_chunks: Option<u64>,
    pub window_samples: Option<u64>,
    pub frame_mode: bool,
    pub chunk_size: Option<u64>,
    pub keep_in_memory: bool,
    pub cache_index: bool,
    pub max_errors: Option<u64>,
    pub precision: Option<Precision>,
    pub input_groups: Option<Layout>,
    pub target_groups: Option<Layout>,
    pub lens_mode: Option<SelectionMode>,
    pub nan: Option<f32>,
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

/// The format of a file named without a configuration (magic bytes, then the name, which
/// sees through `.gz`/`.bz2`); a file that cannot be read is left to the reader to report.
fn kind_of(file: &Path) -> DeserializerKind {
    let mut head = [0u8; 8];
    let n = std::fs::File::open(file)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    match FileFormat::detect(file, &head[..n]) {
        FileFormat::LensText | FileFormat::LensBinary => DeserializerKind::Lens,
        FileFormat::Cbf => DeserializerKind::Cbf,
        FileFormat::Ctf => DeserializerKind::Ctf,
    }
}

impl SourceArgs {
    /// The reader configuration: `config` (its files replaced by `files`, matched by name or
    /// in order) or one deserializer per file; the options on top.
    /// Also returns the configuration's warnings.
    pub fn reader_config(&self) -> PyResult<(ReaderConfig, Vec<String>)> {
        let (mut cfg, warnings) = match &self.config {
            Some(path) => {
                let options = ConfigOptions {
                    section: self.section.clone(),
                    overrides: self.overrides.clone(),
                };
                let read = ReaderConfig::load(path, &options).map_err(to_py)?;
                let mut cfg = read.config;
                self.place_files(&mut cfg)?;
                (cfg, read.warnings)
            }
            None => {
                for (name, given) in [
                    ("section", self.section.is_some()),
                    ("set", !self.overrides.is_empty()),
                ] {
                    if given {
                        return Err(bad_arg(
                            name,
                            "applies to a configuration file: give config=",
                        ));
                    }
                }
                (self.config_from_files()?, Vec::new())
            }
        };
        if let Some(p) = self.precision {
            cfg.precision = p;
        }
        if let Some(m) = self.max_errors {
            cfg.max_errors = m;
            for d in &mut cfg.deserializers {
                d.max_errors = None;
            }
        }
        if let Some(r) = self.randomize {
            cfg.randomize = r;
        }
        if let Some(s) = self.seed {
            cfg.randomization_seed = s;
        }
        match (self.window_chunks, self.window_samples) {
            (Some(_), Some(_)) => {
                return Err(bad_arg(
                    "window_samples",
                    "give window_chunks or window_samples, not both",
                ))
            }
            (Some(0), _) => return Err(bad_arg("window_chunks", "must be at least 1")),
            (_, Some(0)) => return Err(bad_arg("window_samples", "must be at least 1")),
            (Some(w), None) => {
                cfg.randomization_window = Some(w);
                cfg.sample_based_randomization_window = false;
            }
            (None, Some(w)) => {
                cfg.randomization_window = Some(w);
                cfg.sample_based_randomization_window = true;
            }
            (None, None) => {}
        }
        if self.chunk_size == Some(0) {
            return Err(bad_arg("chunk_size", "must be at least 1 byte"));
        }
        for d in &mut cfg.deserializers {
            d.chunk_size_bytes = self.chunk_size.or(d.chunk_size_bytes);
            if self.keep_in_memory {
                d.keep_data_in_memory = Some(true);
            }
            if self.cache_index {
                d.cache_index = Some(true);
            }
            if self.frame_mode {
                d.frame_mode = Some(true);
            }
        }
        cfg.frame_mode |= self.frame_mode;
        self.apply_lens(&mut cfg)?;
        Ok((cfg, warnings))
    }

    fn place_files(&self, cfg: &mut ReaderConfig) -> PyResult<()> {
        let n = cfg.deserializers.len();
        if self.files.len() != n {
            return Err(bad_arg(
                "files",
                format!(
                    "the configuration has {n} deserializer(s) but {} file(s) were given",
                    self.files.len()
                ),
            ));
        }
        // By file name when every name matches a different deserializer, else in order.
        let mut by_name: Vec<Option<usize>> = self
            .files
            .iter()
            .map(|f| {
                cfg.deserializers
                    .iter()
                    .position(|d| d.file.file_name() == f.file_name())
            })
            .collect();
        let mut seen = by_name.clone();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() != n || seen.contains(&None) {
            by_name = (0..n).map(Some).collect();
        }
        for (f, d) in self.files.iter().zip(by_name) {
            cfg.deserializers[d.expect("checked")].file = f.clone();
        }
        Ok(())
    }

    fn config_from_files(&self) -> PyResult<ReaderConfig> {
        let mut cfg = ReaderConfig::default();
        let kinds: Vec<DeserializerKind> = self.files.iter().map(|f| kind_of(f)).collect();
        let ctf_files = kinds
            .iter()
            .filter(|k| **k == DeserializerKind::Ctf)
            .count();
        if ctf_files > 1 {
            return Err(bad_arg(
                "files",
                "several CTF files need a config= saying each one's inputs",
            ));
        }
        for (f, &kind) in self.files.iter().zip(&kinds) {
            let inputs = match kind {
                // A Lens file's streams are 'input' and 'target', from the layout.
                DeserializerKind::Lens => Vec::new(),
                DeserializerKind::Ctf if self.inputs.is_empty() => {
                    return Err(bad_arg(
                        "inputs",
                        format!("{} is CTF: give inputs= (or config=)", f.display()),
                    ))
                }
                _ => self.inputs.clone(),
            };
            cfg.deserializers
                .push(DeserializerConfig::new(kind, f, inputs));
        }
        // CNTK's default: a sample-counted window for binary-only readers.
        cfg.sample_based_randomization_window = ctf_files == 0;
        Ok(cfg)
    }

    fn apply_lens(&self, cfg: &mut ReaderConfig) -> PyResult<()> {
        let has_lens = cfg
            .deserializers
            .iter()
            .any(|d| d.kind == DeserializerKind::Lens);
        if !has_lens {
            for (name, given) in [
                ("input_groups", self.input_groups.is_some()),
                ("target_groups", self.target_groups.is_some()),
                ("nan", self.nan.is_some()),
                ("lens_mode", self.lens_mode.is_some()),
            ] {
                if given {
                    return Err(bad_arg(
                        name,
                        "applies to Lens example files (.ex, .bex), and none is read",
                    ));
                }
            }
            return Ok(());
        }
        for d in cfg
            .deserializers
            .iter_mut()
            .filter(|d| d.kind == DeserializerKind::Lens)
        {
            d.input_groups = self.input_groups.clone().or(d.input_groups.take());
            d.target_groups = self.target_groups.clone().or(d.target_groups.take());
            d.nan = self.nan.or(d.nan);
            if d.input_groups.is_none() || d.target_groups.is_none() {
                return Err(bad_arg(
                    "input_groups",
                    format!(
                        "reading the Lens example file {} needs the network's layout: \
                         input_groups and target_groups (in network order)",
                        d.file.display()
                    ),
                ));
            }
        }
        if let Some(mode) = self.lens_mode {
            if self.randomize == Some(false)
                || self.window_chunks.is_some()
                || self.window_samples.is_some()
            {
                return Err(bad_arg(
                    "lens_mode",
                    "decides the example order: randomize=False and window_chunks/window_samples cannot be combined with it",
                ));
            }
            cfg.lens_mode = Some(mode);
        }
        Ok(())
    }
}
