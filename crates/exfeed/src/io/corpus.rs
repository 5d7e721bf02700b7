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
        }
    }

    /// The shard files, in corpus order; none is an error.
    pub fn expand(&self) -> Result<Vec<PathBuf>> {
        self.expand_with(&StorageOptions::default())
    }

    /// [`Corpus::expand`], a remote glob or list file reached with `storage_options`.
    pub fn expand_with(&self, storage_options: &StorageOptions) -> Result<Vec<PathBuf>> {
        let files = match self {
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
                    .map(|l| resolve_path(dir, Path::new(l)))
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
                files
            }
            Corpus::Files(files) => files.clone(),
        };
        if files.is_empty() {
            return Err(Error::config(format!("corpus {self} names no file")));
        }
        Ok(files)
    }
}

/// The objects a remote glob matches, in sorted order, without exfeed's index caches.
#[cfg(feature = "remote")]
fn remote_glob(spec: &str, storage_options: &StorageOptions) -> Result<Vec<PathBuf>> {
    let options = super::remote::RemoteOptions {
        storage_options: storage_options.clone(),
        ..Default::default()
    };
    Ok(super::remote::glob(spec, &options)?
        .into_iter()
        .filter(|entry| !entry.url.ends_with(".exfeed-index"))
        .map(|entry| PathBuf::from(entry.url))
        .collect())
}

/// Without the `remote` feature a remote glob is refused, as any URL is.
#[cfg(not(feature = "remote"))]
fn remote_glob(spec: &str, _: &StorageOptions) -> Result<Vec<PathBuf>> {
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
        }
    }
}
