//! URLs as inputs ([`InputPath::Url`](super::InputPath::Url)): the one place that turns an
//! `s3://`, `gs://`, `http://` or `https://` input into reads of its object. Read at random by
//! byte range ([`RemoteFile`]: CTF chunks, CBF's tail, header and chunks), or as a stream of
//! consecutive ranges ([`RemoteFile::stream`]: Lens files, compressed objects, format
//! detection). With a cache directory ([`RemoteUrl::with_cache`]) every range read goes
//! through the shared local cache ([`super::remote_cache`]), so a range read again (the same
//! chunk, the same block of a stream) comes from local disk. Without the `remote` feature
//! every URL is refused with an error saying so.

use crate::error::{Error, Result};
#[cfg(not(feature = "remote"))]
use crate::error::{ErrorKind, Location};
use std::path::PathBuf;
use std::sync::Arc;

/// Whether `path` is a URL exfeed reads remotely (`s3://`, `gs://`, `http://`, `https://`, any
/// case), with or without the `remote` feature (without it, opening one is an error saying so).
pub fn is_remote_url(path: &str) -> bool {
    ["s3://", "gs://", "http://", "https://"]
        .iter()
        .any(|scheme| {
            path.len() > scheme.len()
                && path
                    .get(..scheme.len())
                    .is_some_and(|start| start.eq_ignore_ascii_case(scheme))
        })
}

/// `url` as messages show it: its query, which may hold secrets (a presigned URL's
/// signature), replaced by `<redacted>`.
pub fn shown_url(url: &str) -> std::borrow::Cow<'_, str> {
    match url.split_once('?') {
        Some((before, _)) => format!("{before}?<redacted>").into(),
        None => url.into(),
    }
}

/// Storage options: settings of the store that override the environment's (`KEY=VALUE` pairs
/// named as the [`remote`](super::remote) module's docs say, e.g. `aws_endpoint`,
/// `aws_access_key_id`, `aws_secret_access_key`). Their values never show in `Debug`.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct StorageOptions(Arc<[(String, String)]>);

impl StorageOptions {
    /// The pairs, in the order given (a later one overrides an earlier one of the same name).
    pub fn pairs(&self) -> &[(String, String)] {
        &self.0
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for StorageOptions {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Self {
        StorageOptions(
            pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

impl std::fmt::Debug for StorageOptions {
    /// The names only: values may be secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(k, _)| k))
            .finish()
    }
}

/// An object's URL, the storage options it is read with and the cache it is read through;
/// once opened ([`RemoteUrl::opened`]), also the object as it was then. Its `Debug` form shows
/// the URL without its query (see [`shown_url`]).
#[derive(Clone)]
pub struct RemoteUrl {
    url: Arc<str>,
    storage_options: StorageOptions,
    /// The cache directory and its limit in bytes.
    cache: Option<(PathBuf, u64)>,
    /// The object opened with these settings, which every later open of this URL reuses.
    opened: Option<RemoteFile>,
    /// The size and ETag a listing gave ([`RemoteUrl::with_listing`]).
    listed: Option<(u64, String)>,
}

impl std::fmt::Debug for RemoteUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteUrl")
            .field("url", &shown_url(&self.url))
            .field("storage_options", &self.storage_options)
            .field("cache", &self.cache)
            .field("opened", &self.opened.is_some())
            .field("listed", &self.listed)
            .finish()
    }
}

/// Two URLs are equal when they name the same object read the same way, opened or not.
impl PartialEq for RemoteUrl {
    fn eq(&self, other: &Self) -> bool {
        (&self.url, &self.storage_options, &self.cache)
            == (&other.url, &other.storage_options, &other.cache)
    }
}

impl Eq for RemoteUrl {}

impl RemoteUrl {
    /// `url`, read with the credentials and settings of the environment.
    pub fn new(url: &str) -> Self {
        RemoteUrl {
            url: url.into(),
            storage_options: StorageOptions::default(),
            cache: None,
            opened: None,
            listed: None,
        }
    }

    /// The same URL with the size and ETag that a listing of its bucket gave (a corpus glob's
    /// shards): opening it then sends no HEAD request. Without an ETag, nothing is kept.
    pub fn with_listing(mut self, size: u64, etag: Option<String>) -> Self {
        self.listed = etag.map(|etag| (size, etag));
        self
    }

    /// The same URL read through the cache in `cache` (a directory and its limit in bytes),
    /// or through none; no longer opened if that is another cache.
    pub fn with_cache(mut self, cache: Option<(PathBuf, u64)>) -> Self {
        if cache != self.cache {
            self.cache = cache;
            self.opened = None;
        }
        self
    }

    /// The same URL read with `options` (over the environment's settings); no longer opened
    /// if they are other options.
    pub fn with_storage_options(mut self, options: &StorageOptions) -> Self {
        if *options != self.storage_options {
            self.storage_options = options.clone();
            self.opened = None;
        }
        self
    }

    /// The same URL with its object opened now (one HEAD request, unless it was opened
    /// already): every [`RemoteFile::open`] of it then reads that object, of the size and
    /// version seen now, with no request of its own. What `exfeed::open` does first, so that
    /// format detection and the format's reader share one HEAD.
    pub fn opened(self) -> Result<Self> {
        if self.opened.is_some() {
            return Ok(self);
        }
        let file = RemoteFile::open(&self)?;
        Ok(RemoteUrl {
            opened: Some(file),
            ..self
        })
    }

    /// The URL, as given.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The URL as messages show it (see [`shown_url`]).
    pub fn shown(&self) -> std::borrow::Cow<'_, str> {
        shown_url(&self.url)
    }

    /// The storage options.
    pub fn storage_options(&self) -> &StorageOptions {
        &self.storage_options
    }

    /// The object's name: the URL's last path segment (what format detection by name and a
    /// saved state's data stamps look at).
    pub fn file_name(&self) -> &str {
        self.url.rsplit('/').next().unwrap_or_default()
    }
}

/// A remote object opened for reading (its size and version fixed when opened: a read of
/// another version is an error naming it, see [`super::remote::RemoteObject`]). Cheap to clone.
#[cfg(feature = "remote")]
#[derive(Debug, Clone)]
pub struct RemoteFile {
    object: Arc<super::remote::RemoteObject>,
    cache: Option<Arc<SharedCache>>,
    /// Ranges fetched ahead of their reads, by offset ([`RemoteFile::fetch_ahead`]).
    fetched_ahead: Arc<crate::fetch_ahead::ChunkFetches>,
    /// The object's first [`FIRST_STREAM_BLOCK`] bytes (or all, if fewer) once read, until
    /// a read within them takes them: format detection reads them, then the format's reader
    /// reads (some of) them again.
    first_block: Arc<std::sync::Mutex<Option<Vec<u8>>>>,
}

#[cfg(all(feature = "remote", target_os = "linux"))]
type SharedCache = super::remote_cache::RemoteCache;
/// The cache needs file locks as Linux gives them: elsewhere a cache directory is not used.
#[cfg(all(feature = "remote", not(target_os = "linux")))]
type SharedCache = ();

/// The caches opened by this process, one per directory, so that their warnings are said once.
#[cfg(all(feature = "remote", target_os = "linux"))]
static CACHES: std::sync::Mutex<Vec<Arc<SharedCache>>> = std::sync::Mutex::new(Vec::new());

/// The cache at `dir` with `limit`, opened once per process.
#[cfg(all(feature = "remote", target_os = "linux"))]
fn shared_cache(dir: &std::path::Path, limit: u64) -> Result<Arc<SharedCache>> {
    let mut caches = CACHES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(cache) = caches.iter().find(|c| c.dir() == dir && c.limit() == limit) {
        return Ok(cache.clone());
    }
    let cache = Arc::new(SharedCache::open(&super::remote_cache::CacheOptions {
        dir: dir.to_path_buf(),
        limit,
    })?);
    caches.push(cache.clone());
    Ok(cache)
}

#[cfg(all(feature = "remote", not(target_os = "linux")))]
fn shared_cache(_: &std::path::Path, _: u64) -> Result<Arc<SharedCache>> {
    Ok(Arc::new(()))
}

/// What the caches of this process could not keep since the last call (each said once): for
/// a front end to show as warnings. Empty without the `remote` feature.
pub fn take_cache_warnings() -> Vec<crate::error::Diagnostic> {
    #[cfg(all(feature = "remote", target_os = "linux"))]
    return CACHES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .flat_map(|c| c.take_warnings())
        .collect();
    #[cfg(not(all(feature = "remote", target_os = "linux")))]
    Vec::new()
}

/// The most bytes the user's index cache ([`user_index_cache_dir`]) may hold: 1 GiB.
pub const USER_INDEX_CACHE_LIMIT: u64 = 1 << 30;

/// Where a URL's CTF index is kept when no cache directory is given:
/// `$XDG_CACHE_HOME/exfeed/index`, else `$HOME/.cache/exfeed/index`; `None` when neither
/// variable is set (to an absolute path). A cache like any other (see
/// [`super::remote_cache`]), limited to [`USER_INDEX_CACHE_LIMIT`].
pub fn user_index_cache_dir() -> Option<PathBuf> {
    let absolute = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let base = absolute("XDG_CACHE_HOME").or_else(|| absolute("HOME").map(|h| h.join(".cache")))?;
    Some(base.join("exfeed").join("index"))
}

/// Without the `remote` feature no remote object can be opened (nothing makes one).
#[cfg(not(feature = "remote"))]
#[derive(Debug, Clone)]
pub struct RemoteFile {
    _never: (),
}

#[cfg(not(all(feature = "remote", target_os = "linux")))]
const NO_LOCKS: &str = "the local cache needs file locks as Linux gives them";

#[cfg(not(feature = "remote"))]
const NEVER_OPENED: &str = "a RemoteFile is never opened without the remote feature";

/// The bytes a [`RemoteFile::stream`] asks for with each request, at most: its first request asks
/// for `FIRST_STREAM_BLOCK`, each next one for twice the one before. Format detection reads a
/// few bytes of a stream and drops it: that costs one small request, not 8 MiB.
const STREAM_BLOCK: usize = 8 << 20;
const FIRST_STREAM_BLOCK: usize = 64 << 10;

impl RemoteFile {
    /// Opens the object at `url` (one HEAD request; none when `url` was
    /// [opened](RemoteUrl::opened) already).
    #[cfg(feature = "remote")]
    pub fn open(url: &RemoteUrl) -> Result<Self> {
        if let Some(file) = &url.opened {
            return Ok(file.clone());
        }
        let options = super::remote::RemoteOptions {
            storage_options: url.storage_options().clone(),
            ..Default::default()
        };
        let object = Arc::new(match &url.listed {
            Some((size, etag)) => {
                let entry = super::remote::RemoteEntry {
                    url: url.url().to_string(),
                    size: *size,
                    etag: Some(etag.clone()),
                };
                super::remote::RemoteObject::open_listed(&entry, &options)?
            }
            None => super::remote::RemoteObject::open(url.url(), &options)?,
        });
        let cache = match &url.cache {
            Some((dir, limit)) => Some(shared_cache(dir, *limit)?),
            None => None,
        };
        Ok(RemoteFile {
            object,
            cache,
            fetched_ahead: Arc::default(),
            first_block: Arc::default(),
        })
    }

    /// The object opened (its URL, size and version).
    #[cfg(feature = "remote")]
    pub fn object(&self) -> &super::remote::RemoteObject {
        &self.object
    }

    /// Refused: exfeed was built without the `remote` feature.
    #[cfg(not(feature = "remote"))]
    pub fn open(url: &RemoteUrl) -> Result<Self> {
        Err(Error::new(
            ErrorKind::Unsupported,
            Location::default().with_file(shown_url(url.url())),
            "reading a URL needs exfeed built with the `remote` feature, which this build has \
             not got",
        ))
    }

    /// The object's size in bytes.
    pub fn len(&self) -> u64 {
        #[cfg(feature = "remote")]
        return self.object.size();
        #[cfg(not(feature = "remote"))]
        unreachable!("{NEVER_OPENED}")
    }

    /// Whether the object is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fills `buf` with the bytes at `offset`; bytes past the object's end are an error. Bytes
    /// [fetched ahead](RemoteFile::fetch_ahead) at that offset, if exactly these, are taken
    /// from there (waiting for their fetch). A fetch ahead that failed gives its error: it
    /// spent the read's retries already, which a read again would spend twice.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        #[cfg(feature = "remote")]
        {
            if let Some(bytes) = self.take_fetched_ahead(offset, buf.len())? {
                buf.copy_from_slice(&bytes);
                crate::buffers::give_back_read_buffer(bytes);
                return Ok(());
            }
            let first_block = (FIRST_STREAM_BLOCK as u64).min(self.len());
            let end = offset.saturating_add(buf.len() as u64);
            if end <= first_block && !buf.is_empty() {
                let mut kept = self.first_block.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(block) = kept.take() {
                    buf.copy_from_slice(&block[offset as usize..end as usize]);
                    return Ok(());
                }
                if offset == 0 && end == first_block {
                    self.read_direct(buf, offset)?;
                    *kept = Some(buf.to_vec());
                    return Ok(());
                }
            }
        }
        self.read_direct(buf, offset)
    }

    /// The bytes fetched ahead for exactly `offset..offset + len`, if they were (a failed
    /// fetch is this read's error).
    #[cfg(feature = "remote")]
    fn take_fetched_ahead(&self, offset: u64, len: usize) -> Result<Option<Vec<u8>>> {
        match self.fetched_ahead.take(offset) {
            Some(Ok((at, bytes))) if at == offset && bytes.len() == len => Ok(Some(bytes)),
            Some(Ok((_, bytes))) => {
                crate::buffers::give_back_read_buffer(bytes);
                Ok(None)
            }
            Some(Err(e)) => Err(e),
            None => Ok(None),
        }
    }

    /// Names the bytes `offset..offset + len` for fetching on a thread of its own (as soon as
    /// the process's bounds leave room), for a later [`RemoteFile::read_exact_at`] of exactly
    /// them (see [`crate::fetch_ahead`]); `None`: never fetched ahead (named already, or larger
    /// than the bounds).
    #[cfg(feature = "remote")]
    pub fn fetch_ahead(&self, offset: u64, len: u64) -> Option<crate::fetch_ahead::FetchTicket> {
        let file = self.clone();
        let size = usize::try_from(len).ok()?;
        self.fetched_ahead.start(offset, len, move || {
            let mut buf = crate::buffers::take_read_buffer(size);
            file.read_direct(&mut buf, offset)?;
            Ok((offset, buf))
        })
    }

    /// Never started: exfeed was built without the `remote` feature.
    #[cfg(not(feature = "remote"))]
    pub fn fetch_ahead(&self, offset: u64, len: u64) -> Option<crate::fetch_ahead::FetchTicket> {
        let _ = (offset, len);
        None
    }

    /// Reads the bytes at `offset` into `buf`, from the cache or the object (never from what
    /// was fetched ahead).
    fn read_direct(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        #[cfg(all(feature = "remote", target_os = "linux"))]
        if let Some(cache) = &self.cache {
            buf.copy_from_slice(&cache.read_at(&self.object, offset, buf.len())?);
            return Ok(());
        }
        #[cfg(feature = "remote")]
        return self.object.read_exact_at(offset, buf);
        #[cfg(not(feature = "remote"))]
        {
            let _ = (buf, offset);
            unreachable!("{NEVER_OPENED}")
        }
    }

    /// Reads the bytes at `offset` into `buf`, as many as there are before the object's end;
    /// returns how many.
    pub fn read_at_most(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        let n = self.len().saturating_sub(offset).min(buf.len() as u64) as usize;
        self.read_exact_at(&mut buf[..n], offset)?;
        Ok(n)
    }

    /// Data derived from the object (`kind` names what and how it was made: a CTF index and
    /// its parameters), from the local cache: the cache directory the object is read
    /// through, or without one the user's ([`user_index_cache_dir`]). `None` when none is
    /// kept (or no cache can be used: [`RemoteFile::keep_derived`] says why).
    pub fn derived(&self, kind: &str) -> Option<Vec<u8>> {
        #[cfg(all(feature = "remote", target_os = "linux"))]
        return self.derived_cache().ok()?.derived(&self.object, kind);
        #[cfg(not(all(feature = "remote", target_os = "linux")))]
        {
            let _ = kind;
            None
        }
    }

    /// Keeps `bytes`, data derived from the object, in the cache [`RemoteFile::derived`]
    /// reads; `Err` says why it could not.
    pub fn keep_derived(&self, kind: &str, bytes: &[u8]) -> std::result::Result<(), String> {
        #[cfg(all(feature = "remote", target_os = "linux"))]
        return self.derived_cache().and_then(|cache| {
            (cache.keep_derived(&self.object, kind, bytes))
                .map_err(|e| format!("the cache in {} cannot keep it: {e}", cache.dir().display()))
        });
        #[cfg(not(all(feature = "remote", target_os = "linux")))]
        {
            let _ = (kind, bytes);
            Err(NO_LOCKS.into())
        }
    }

    /// The cache of derived data: the object's own, or the user's.
    #[cfg(all(feature = "remote", target_os = "linux"))]
    fn derived_cache(&self) -> std::result::Result<Arc<SharedCache>, String> {
        if let Some(cache) = &self.cache {
            return Ok(cache.clone());
        }
        let dir = user_index_cache_dir().ok_or(
            "there is no cache directory: give one (--cache-dir, cacheDir, cache_dir=), or set \
             XDG_CACHE_HOME or HOME",
        )?;
        shared_cache(&dir, USER_INDEX_CACHE_LIMIT).map_err(|e| e.to_string())
    }

    /// The object from its first byte as a stream, read by consecutive ranged requests of
    /// 64 KiB, then twice as many bytes each time up to 8 MiB (each retried and resumed as any
    /// read is).
    pub fn stream(&self) -> RemoteStream {
        RemoteStream {
            file: self.clone(),
            next: 0,
            block: Vec::new(),
            taken: 0,
            block_size: FIRST_STREAM_BLOCK,
        }
    }
}

impl crate::cbf::ReadAt for RemoteFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        RemoteFile::read_exact_at(self, buf, offset)
    }

    fn byte_len(&self) -> Result<u64> {
        Ok(self.len())
    }

    fn reads_whole_chunks(&self) -> bool {
        true
    }

    fn fetch_ahead(&self, offset: u64, len: u64) -> Option<crate::fetch_ahead::FetchTicket> {
        RemoteFile::fetch_ahead(self, offset, len)
    }

    #[cfg(feature = "remote")]
    fn take_fetched_ahead(&self, offset: u64, len: usize) -> Result<Option<Vec<u8>>> {
        RemoteFile::take_fetched_ahead(self, offset, len)
    }
}

/// A remote object read from its start ([`RemoteFile::stream`]): one request per block.
pub struct RemoteStream {
    file: RemoteFile,
    /// The object's offset of the first byte after `block`.
    next: u64,
    block: Vec<u8>,
    /// How much of `block` was read out.
    taken: usize,
    /// The bytes the next request asks for (fewer at the object's end).
    block_size: usize,
}

impl std::io::BufRead for RemoteStream {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.taken == self.block.len() {
            let n =
                (self.file.len().saturating_sub(self.next)).min(self.block_size as u64) as usize;
            self.block.resize(n, 0);
            self.file
                .read_exact_at(&mut self.block, self.next)
                .map_err(Error::into_io)?;
            self.next += n as u64;
            self.taken = 0;
            self.block_size = (self.block_size * 2).min(STREAM_BLOCK);
        }
        Ok(&self.block[self.taken..])
    }

    fn consume(&mut self, n: usize) {
        self.taken = (self.taken + n).min(self.block.len());
    }
}

impl std::io::Read for RemoteStream {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        super::read_ahead::read_buffered(self, out)
    }
}
