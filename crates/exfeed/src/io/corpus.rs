//! The files of a corpus (a glob, a list file, or the files themselves), expanded to its shard
//! files.

use super::{is_remote_url, InputPath, StorageOptions};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// `path` relative to `dir`: joined to it, unless it is absolute or a URL.
pub(crate) fn resolve_path(dir: &Path, path: &Path) -> PathBuf {
    match path.to_str() {
        Some(url) if is_remote_url(url) => path.to_path_buf(),
        _ => dir.join(path),
    }
}

/// What `check`, `dump`, `info` and `convert` read: one input (`-`: standard input) or a
/// corpus (see [`ReaderArgs::open`](crate::configured::ReaderArgs::open)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataPath {
    /// A file, or `-`.
    File(PathBuf),
    /// Shard files read as one data set.
    Corpus(Corpus),
}

impl std::fmt::Display for DataPath {
    /// The path, or the corpus as [`Corpus`] shows it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DataPath::File(p) => write!(f, "{}", p.display()),
            DataPath::Corpus(c) => write!(f, "{c}"),
        }
    }
}

/// The files of a corpus, as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Corpus {
    /// A glob (`data/train-*.ctf`), expanded by exfeed (not the shell) in sorted order: files
    /// only, not exfeed's index caches (`*.exfeed-index`). An `s3://` glob lists the bucket's
    /// prefix before its first wildcard (`s3://data/train-*.ctf`).
    Glob(String),
    /// A list file: one path or URL a line (relative paths are relative to the list file's
    /// directory; blank lines and lines starting with `#` are skipped), in its order. The
    /// list file may be a URL too.
    List(PathBuf),
    /// The files themselves, in this order.
    Files(Vec<PathBuf>),
    /// Several corpora mixed by weight (read by a [`MixSource`](crate::source::MixSource));
    /// its files are theirs, one after the other.
    Mix(MixSpec),
}

/// Several data sets mixed by weight, as given: `a.ctf=0.7,b/*.cbf=0.3` (see
/// [`MixSpec::parse`]). A weight is a share of the samples of a sweep (the weights over their
/// sum); a sweep has `epoch_samples` samples, by default the sum of the sources' sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct MixSpec {
    /// Each source (a file, glob or `@LIST`) and its weight.
    pub parts: Vec<(Corpus, f64)>,
    /// The samples of a sweep (default: the sum of the sources' samples).
    pub epoch_samples: Option<u64>,
}

// Weights are checked finite when parsed or given.
impl Eq for MixSpec {}

impl MixSpec {
    /// Parses `SOURCE=WEIGHT,...`: each source a file, a glob or `@LIST` (as a corpus is
    /// given), each weight a finite positive number.
    pub fn parse(spec: &str) -> Result<MixSpec> {
        let mut parts = Vec::new();
        for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let Some((source, weight)) = item.rsplit_once('=') else {
                return Err(Error::config(format!(
                    "mix '{spec}': '{item}' has no weight; give SOURCE=WEIGHT,... (e.g. \
                     a.ctf=0.7,b/*.cbf=0.3)"
                )));
            };
            let weight = weight.trim().parse::<f64>().map_err(|_| {
                Error::config(format!(
                    "mix '{spec}': the weight of {source} is '{weight}', not a number"
                ))
            })?;
            parts.push((Corpus::parse(source.trim()), weight));
        }
        MixSpec::new(parts, None)
    }

    /// The mix of `parts` (each source and its weight): at least one, weights finite and
    /// positive; `epoch_samples` (when given) at least 1.
    pub fn new(parts: Vec<(Corpus, f64)>, epoch_samples: Option<u64>) -> Result<MixSpec> {
        if parts.is_empty() {
            return Err(Error::config("a mix needs at least one source"));
        }
        if let Some((c, w)) = parts.iter().find(|(_, w)| !(w.is_finite() && *w > 0.0)) {
            return Err(Error::config(format!(
                "mix source {c} has the weight {w}; a weight must be a finite positive number"
            )));
        }
        if epoch_samples == Some(0) {
            return Err(Error::config(
                "the mix's epoch size must be at least one sample",
            ));
        }
        Ok(MixSpec {
            parts,
            epoch_samples,
        })
    }

    /// Each source's name (as given), weight and files.
    pub fn expand_parts(
        &self,
        storage_options: &StorageOptions,
    ) -> Result<Vec<(String, f64, Vec<PathBuf>)>> {
        (self.parts.iter())
            .map(|(c, w)| Ok((c.to_string(), *w, c.expand_with(storage_options)?)))
            .collect()
    }
}

impl std::fmt::Display for MixSpec {
    /// `SOURCE=WEIGHT,...`, as parsed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (c, w)) in self.parts.iter().enumerate() {
            let comma = if i > 0 { "," } else { "" };
            write!(f, "{comma}{c}={w}")?;
        }
        Ok(())
    }
}

impl Corpus {
    /// `@FILE` is a list file, anything else a glob.
    pub fn parse(spec: &str) -> Corpus {
        match spec.strip_prefix('@') {
            Some(list) => Corpus::List(list.into()),
            None => Corpus::Glob(spec.to_string()),
        }
    }

    /// The corpus with relative paths (of the glob, the list file or the files) resolved
    /// against `dir`.
    pub fn resolve(&self, dir: &Path) -> Corpus {
        match self {
            Corpus::Glob(g) => Corpus::Glob(resolve_path(dir, Path::new(g)).display().to_string()),
            Corpus::List(l) => Corpus::List(resolve_path(dir, l)),
            Corpus::Files(f) => Corpus::Files(f.iter().map(|f| resolve_path(dir, f)).collect()),
            Corpus::Mix(m) => Corpus::Mix(MixSpec {
                parts: (m.parts.iter())
                    .map(|(c, w)| (c.resolve(dir), *w))
                    .collect(),
                epoch_samples: m.epoch_samples,
            }),
        }
    }

    /// The shard files, in corpus order; none is an error.
    pub fn expand(&self) -> Result<Vec<PathBuf>> {
        self.expand_with(&StorageOptions::default())
    }

    /// [`Corpus::expand`], a remote glob or list file reached with `storage_options`.
    pub fn expand_with(&self, storage_options: &StorageOptions) -> Result<Vec<PathBuf>> {
        let inputs = self.expand_inputs(storage_options)?;
        Ok(inputs.iter().map(InputPath::as_corpus_file).collect())
    }

    /// [`Corpus::expand_with`], each file as the input to open: a remote glob's objects with
    /// the size and ETag their listing gave, so that opening them sends no HEAD request.
    pub fn expand_inputs(&self, storage_options: &StorageOptions) -> Result<Vec<InputPath>> {
        let files: Vec<InputPath> = match self {
            Corpus::List(list) => {
                let input = InputPath::new(list).with_storage_options(storage_options);
                let text = match &input {
                    InputPath::Url(_) => {
                        let bytes = super::open_bytes(&input)?;
                        String::from_utf8_lossy(&bytes).into_owned()
                    }
                    _ => std::fs::read_to_string(list).map_err(|e| Error::io(list, e))?,
                };
                let dir = list.parent().unwrap_or(Path::new(""));
                text.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(|l| InputPath::new(resolve_path(dir, Path::new(l))))
                    .collect()
            }
            Corpus::Glob(spec) if is_remote_url(spec) => remote_glob(spec, storage_options)?,
            Corpus::Glob(spec) => {
                let paths = glob::glob(spec).map_err(|e| {
                    Error::config(format!("corpus '{spec}' is not a valid pattern: {e}"))
                })?;
                let mut files = Vec::new();
                for p in paths {
                    let p = p.map_err(|e| {
                        let path = e.path().to_path_buf();
                        Error::io(&path, e.into())
                    })?;
                    // exfeed's own index caches (FILE.exfeed-index) are not shards.
                    let cache = p.extension().is_some_and(|e| e == "exfeed-index");
                    if is_file_matched(&p, spec)? && !cache {
                        files.push(p);
                    }
                }
                files.sort();
                files.into_iter().map(InputPath::File).collect()
            }
            Corpus::Files(files) => files.iter().map(InputPath::new).collect(),
            Corpus::Mix(m) => (m.expand_parts(storage_options)?.into_iter())
                .flat_map(|(_, _, files)| files)
                .map(InputPath::new)
                .collect(),
        };
        if files.is_empty() {
            return Err(Error::config(format!("corpus {self} names no file")));
        }
        Ok(files)
    }
}

/// The objects a remote glob matches, in sorted order, without exfeed's index caches, each
/// with the size and ETag the listing gave.
#[cfg(feature = "remote")]
fn remote_glob(spec: &str, storage_options: &StorageOptions) -> Result<Vec<InputPath>> {
    let options = super::remote::RemoteOptions {
        storage_options: storage_options.clone(),
        ..Default::default()
    };
    Ok(super::remote::glob(spec, &options)?
        .into_iter()
        .filter(|entry| !entry.url.ends_with(".exfeed-index"))
        .map(|entry| {
            let url = super::RemoteUrl::new(&entry.url).with_storage_options(storage_options);
            InputPath::Url(url.with_listing(entry.size, entry.etag))
        })
        .collect())
}

/// Without the `remote` feature a remote glob is refused, as any URL is.
#[cfg(not(feature = "remote"))]
fn remote_glob(spec: &str, _: &StorageOptions) -> Result<Vec<InputPath>> {
    Err(super::RemoteFile::open(&super::RemoteUrl::new(spec)).expect_err("no remote feature"))
}

/// Whether `path`, matched by the corpus glob `spec`, is a file (directories and other special
/// files are no shards). A symbolic link to nothing is an error naming it, as it is in a list
/// file: skipping it would drop a shard without a word.
fn is_file_matched(path: &Path, spec: &str) -> Result<bool> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(m.is_file()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let to = std::fs::read_link(path).map_err(|e| Error::io(path, e))?;
            let why = format!(
                "matched by the corpus glob '{spec}', a symbolic link to '{}', which does not \
                 exist",
                to.display()
            );
            Err(Error::io(path, std::io::Error::new(e.kind(), why)))
        }
        Err(e) => Err(Error::io(path, e)),
    }
}

impl std::fmt::Display for Corpus {
    /// The glob, `@LIST`, or the first file and the count.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Corpus::Glob(g) => write!(f, "{g}"),
            Corpus::List(l) => write!(f, "@{}", l.display()),
            Corpus::Files(files) => match files.first() {
                Some(first) => write!(f, "{} and {} more", first.display(), files.len() - 1),
                None => write!(f, "(no files)"),
            },
            Corpus::Mix(m) => write!(f, "{m}"),
        }
    }
}
