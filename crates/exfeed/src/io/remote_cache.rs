//! A local cache of remote objects and byte ranges that several processes and jobs on one node
//! share (the `remote` feature, Linux).
//!
//! [`RemoteCache::read_at`] gives the bytes `offset..offset + len` of a [`RemoteObject`] from
//! the cache, or fetches them and keeps them; [`RemoteCache::local_copy`] fetches a whole object
//! once and gives its local path (for what cannot be read at random: Lens files, compressed
//! files); [`RemoteCache::keep_derived`] and [`RemoteCache::derived`] keep and give data
//! derived from an object (the CTF index).
//!
//! Every entry is keyed by the object's URL, ETag and size (and the range), so a replaced
//! object is fetched again, never served stale; objects without an ETag are never cached.
//! An entry is written under a temporary name and renamed into place only when whole and
//! synced, so a killed process leaves at most a temporary file, which is never trusted and is
//! removed by the next eviction. Entries are evicted least recently used first, so that the
//! entries and the writes under way stay within `limit` bytes; a write reserves its space
//! (`posix_fallocate`) before it starts. File locks (`flock`) make it safe for any number of
//! processes at once: a file in use is locked, and eviction passes over it; one process fills
//! an entry while the others wait for it. When an entry cannot be kept (the disk is full, the
//! limit is smaller than the entry, the directory is not writable) the read goes on uncached
//! and the cache records a warning ([`RemoteCache::take_warnings`]), never an error.
//!
//! Layout of the directory: `entries/` (one file per entry, named by a 128-bit hash of its
//! key), `tmp/` (entries being written), `locks/` (one per entry being filled) and
//! `evict.lock` (held while space is reserved or freed).

use super::remote::RemoteObject;
use crate::error::{Diagnostic, Error, ErrorKind, Location, Result, Severity};
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

/// Where the cache lives and how large it may grow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheOptions {
    /// The cache directory (created if missing); processes that name the same one share it.
    pub dir: PathBuf,
    /// The most bytes its entries (and the writes under way) may take.
    pub limit: u64,
}

/// A whole object's bytes in a local file: see [`RemoteCache::local_copy`].
#[derive(Debug)]
pub struct LocalCopy {
    path: PathBuf,
    hold: Hold,
}

#[derive(Debug)]
enum Hold {
    /// A cache entry, held with a shared lock so that no eviction removes it while in use.
    Entry { _locked: File },
    /// A private temporary file (the cache could not keep it), removed on drop.
    Private {
        _removed_on_drop: tempfile::TempPath,
    },
}

impl LocalCopy {
    /// The local file; it stays there at least as long as this value lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the copy is a cache entry (otherwise a private file, removed on drop).
    pub fn is_cached(&self) -> bool {
        matches!(self.hold, Hold::Entry { .. })
    }
}

/// A shared local cache of remote objects; see the module docs.
#[derive(Debug)]
pub struct RemoteCache {
    dir: PathBuf,
    limit: u64,
    warnings: Mutex<Vec<Diagnostic>>,
}

/// What a whole-object fetch writes at a time.
const PIECE: usize = 8 << 20;

impl RemoteCache {
    /// Opens (creating) the cache directory.
    pub fn open(options: &CacheOptions) -> Result<Self> {
        let dir = options.dir.clone();
        for sub in ["entries", "tmp", "locks"] {
            std::fs::create_dir_all(dir.join(sub)).map_err(|e| {
                Error::new(
                    ErrorKind::Io,
                    Location::default().with_file(dir.display().to_string()),
                    format!("cannot create the cache directory: {e}"),
                )
            })?;
        }
        Ok(RemoteCache {
            dir,
            limit: options.limit,
            warnings: Mutex::new(Vec::new()),
        })
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The most bytes its entries may take.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The bytes `offset..offset + len` of `object`: from the cache, or fetched and kept.
    /// Errors are the fetch's; the cache's own troubles are warnings.
    pub fn read_at(&self, object: &RemoteObject, offset: u64, len: usize) -> Result<Vec<u8>> {
        let Some(name) = entry_name(object, &format!("range {offset} {len}")) else {
            return object.read_at(offset, len);
        };
        let from_entry = |file: File| {
            let mut bytes = Vec::with_capacity(len);
            (&file).read_to_end(&mut bytes).map(|_| bytes)
        };
        if let Some(bytes) = self
            .lookup(&name, Some(len as u64))
            .and_then(|f| from_entry(f).ok())
        {
            return Ok(bytes);
        }
        let _filling = self.fill_lock(&name);
        if let Some(bytes) = self
            .lookup(&name, Some(len as u64))
            .and_then(|f| from_entry(f).ok())
        {
            return Ok(bytes);
        }
        let bytes = object.read_at(offset, len)?;
        let stored = self
            .reserve(len as u64)
            .and_then(|mut temp| {
                temp.file.write_all(&bytes)?;
                self.commit(temp, &name)
            })
            .map(drop);
        if let Err(e) = stored {
            self.warn(object, e);
        }
        Ok(bytes)
    }

    /// The whole of `object` in a local file, fetched once (in pieces, of the version that was
    /// opened) and kept in the cache; where the cache cannot keep it, a private temporary file.
    pub fn local_copy(&self, object: &RemoteObject) -> Result<LocalCopy> {
        let size = object.size();
        let Some(name) = entry_name(object, "whole") else {
            return private_copy(object);
        };
        let held = |file: File| LocalCopy {
            path: self.dir.join("entries").join(&name),
            hold: Hold::Entry { _locked: file },
        };
        if let Some(file) = self.lookup(&name, Some(size)) {
            return Ok(held(file));
        }
        let _filling = self.fill_lock(&name);
        if let Some(file) = self.lookup(&name, Some(size)) {
            return Ok(held(file));
        }
        let mut temp = match self.reserve(size) {
            Ok(temp) => temp,
            Err(e) => {
                self.warn(object, e);
                return private_copy(object);
            }
        };
        let mut offset = 0;
        while offset < size {
            let len = (size - offset).min(PIECE as u64) as usize;
            let bytes = object.read_at(offset, len)?;
            if let Err(e) = temp.file.write_all(&bytes) {
                self.warn(object, e);
                return private_copy(object);
            }
            offset += len as u64;
        }
        match self.commit(temp, &name) {
            Ok(file) => {
                lock(&file, libc::LOCK_SH).map_err(Error::from)?;
                Ok(held(file))
            }
            Err(e) => {
                self.warn(object, e);
                private_copy(object)
            }
        }
    }

    /// Data derived from `object` (`kind` names what and how it was made, e.g. a CTF index
    /// and its chunk size), kept by [`RemoteCache::keep_derived`]: its bytes, or `None` when
    /// there are none (never kept, evicted, or an object without an ETag).
    pub fn derived(&self, object: &RemoteObject, kind: &str) -> Option<Vec<u8>> {
        let name = entry_name(object, &format!("derived {kind}"))?;
        let file = self.lookup(&name, None)?;
        let mut bytes = Vec::new();
        (&file).read_to_end(&mut bytes).ok()?;
        Some(bytes)
    }

    /// Keeps `bytes`, data derived from `object`, as an entry keyed like the others (by the
    /// object's URL, ETag and size, and `kind`), written whole or not at all and evicted with
    /// the rest within the limit; replaces what was kept under the same key.
    pub fn keep_derived(
        &self,
        object: &RemoteObject,
        kind: &str,
        bytes: &[u8],
    ) -> std::io::Result<()> {
        let name = entry_name(object, &format!("derived {kind}")).ok_or_else(|| {
            std::io::Error::other(
                "the server gives the object no ETag, so a replaced object could not be told \
                 from this one",
            )
        })?;
        let mut temp = self.reserve(bytes.len() as u64)?;
        temp.file.write_all(bytes)?;
        self.commit(temp, &name).map(drop)
    }

    /// The warnings so far (entries that could not be kept), each said once; clears them.
    pub fn take_warnings(&self) -> Vec<Diagnostic> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn warn(&self, object: &RemoteObject, error: std::io::Error) {
        let message = format!(
            "the cache in {} cannot keep this object's data, so it is read uncached: {error}",
            self.dir.display()
        );
        let mut warnings = self.warnings.lock().unwrap_or_else(|p| p.into_inner());
        if !warnings.iter().any(|w| w.message == message) {
            warnings.push(Diagnostic {
                severity: Severity::Warning,
                location: Location::default().with_file(super::shown_url(object.url())),
                message,
            });
        }
    }

    /// The entry `name` if it is there, whole (`len` bytes, when known) and not being
    /// evicted: opened, locked shared, and marked as just used.
    fn lookup(&self, name: &str, len: Option<u64>) -> Option<File> {
        let file = File::open(self.dir.join("entries").join(name)).ok()?;
        lock(&file, libc::LOCK_SH).ok()?;
        let meta = file.metadata().ok()?;
        if meta.nlink() == 0 || len.is_some_and(|len| meta.len() != len) {
            return None;
        }
        // The recency that eviction goes by; without the right to set it, the entry is only
        // evicted sooner.
        let _ = file.set_modified(SystemTime::now());
        Some(file)
    }

    /// The lock of entry `name` while it is filled, so that one process fetches it and the
    /// others wait for it; `None` (fill anyway) if it cannot be had.
    fn fill_lock(&self, name: &str) -> Option<FillLock> {
        let path = self.dir.join("locks").join(name);
        loop {
            let file = File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .ok()?;
            lock(&file, libc::LOCK_EX).ok()?;
            // The file locked must still be the one at the path (its filler may have removed
            // it in the meantime).
            let current = std::fs::metadata(&path).ok();
            let mine = file.metadata().ok()?;
            if current.is_some_and(|c| c.ino() == mine.ino() && c.dev() == mine.dev()) {
                return Some(FillLock { path, _file: file });
            }
        }
    }

    /// A temporary file of `len` bytes' room, locked while written: the space is made by
    /// evicting the least recently used entries not in use, and allocated, under the eviction
    /// lock, so that no two writers count the same free space.
    fn reserve(&self, len: u64) -> std::io::Result<Temp> {
        if len > self.limit {
            return Err(std::io::Error::other(format!(
                "it is larger ({len} bytes) than the cache's limit ({} bytes)",
                self.limit
            )));
        }
        let guard = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.dir.join("evict.lock"))?;
        lock(&guard, libc::LOCK_EX)?;
        self.make_room(len)?;
        let temp = tempfile::Builder::new()
            .prefix("fill-")
            .tempfile_in(self.dir.join("tmp"))?;
        lock(temp.as_file(), libc::LOCK_EX)?;
        allocate(temp.as_file(), len)?;
        let (file, path) = temp.into_parts();
        Ok(Temp { file, path })
    }

    /// Evicts entries, least recently used first, until `len` more bytes fit within the
    /// limit; removes temporary files that no process holds (left by killed writers).
    fn make_room(&self, len: u64) -> std::io::Result<()> {
        let mut used = 0u64;
        let mut candidates = Vec::new();
        for sub in ["tmp", "entries"] {
            for entry in std::fs::read_dir(self.dir.join(sub))? {
                let path = entry?.path();
                let Ok(meta) = std::fs::metadata(&path) else {
                    continue;
                };
                if sub == "tmp" {
                    if !remove_unless_in_use(&path) {
                        used += meta.len();
                    }
                } else {
                    used += meta.len();
                    candidates.push((meta.modified()?, path, meta.len()));
                }
            }
        }
        candidates.sort();
        let mut candidates = candidates.into_iter();
        while used + len > self.limit {
            let Some((_, path, size)) = candidates.next() else {
                return Err(std::io::Error::other(format!(
                    "no room for {len} bytes within its limit ({} bytes): the entries left \
                     are in use",
                    self.limit
                )));
            };
            if remove_unless_in_use(&path) {
                used -= size;
            }
        }
        Ok(())
    }

    /// Syncs the temporary file and renames it to the entry `name`, still locked.
    fn commit(&self, temp: Temp, name: &str) -> std::io::Result<File> {
        temp.file.sync_data()?;
        let (file, path) = (temp.file, temp.path);
        path.persist(self.dir.join("entries").join(name))
            .map_err(|e| e.error)?;
        Ok(file)
    }
}

/// A file being written in `tmp/`: removed if dropped before its commit.
struct Temp {
    file: File,
    path: tempfile::TempPath,
}

/// An entry's fill lock; its file is removed when the fill is done.
struct FillLock {
    path: PathBuf,
    _file: File,
}

impl Drop for FillLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The entry's file name for `what` of `object`: a 128-bit FNV-1a hash of its URL, ETag, size
/// and `what`, in hex; `None` without an ETag (a replaced object could not be told apart).
fn entry_name(object: &RemoteObject, what: &str) -> Option<String> {
    let etag = object.etag()?;
    let key = format!("{}\n{etag}\n{}\n{what}", object.url(), object.size());
    let hash = key
        .bytes()
        .fold(0x6c62_272e_07bb_0142_62b8_2175_6295_c58d_u128, |h, b| {
            (h ^ b as u128).wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b)
        });
    Some(format!("{hash:032x}"))
}

/// Takes `operation` (`LOCK_SH`, `LOCK_EX`, with `LOCK_NB` not to wait) on `file`.
fn lock(file: &File, operation: libc::c_int) -> std::io::Result<()> {
    loop {
        // SAFETY: flock on a descriptor that `file` keeps open.
        if unsafe { libc::flock(file.as_raw_fd(), operation) } == 0 {
            return Ok(());
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// Removes the file at `path` unless a process holds a lock on it; whether it was removed.
fn remove_unless_in_use(path: &Path) -> bool {
    let Ok(file) = File::open(path) else {
        return false;
    };
    lock(&file, libc::LOCK_EX | libc::LOCK_NB).is_ok() && std::fs::remove_file(path).is_ok()
}

/// Allocates `len` bytes to `file` (so that a full disk shows now, not halfway), or at least
/// sets its length where the file system cannot allocate.
fn allocate(file: &File, len: u64) -> std::io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    // SAFETY: posix_fallocate on a descriptor that `file` keeps open.
    let result = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len as libc::off_t) };
    match result {
        0 => Ok(()),
        libc::EOPNOTSUPP | libc::EINVAL => file.set_len(len),
        errno => Err(std::io::Error::from_raw_os_error(errno)),
    }
}

/// The whole object in a private temporary file (the cache could not keep it).
fn private_copy(object: &RemoteObject) -> Result<LocalCopy> {
    let mut temp = tempfile::Builder::new()
        .prefix("exfeed-remote-")
        .tempfile()?;
    let size = object.size();
    let mut offset = 0;
    while offset < size {
        let len = (size - offset).min(PIECE as u64) as usize;
        temp.write_all(&object.read_at(offset, len)?)?;
        offset += len as u64;
    }
    temp.as_file().sync_data()?;
    let path = temp.into_temp_path();
    Ok(LocalCopy {
        path: path.to_path_buf(),
        hold: Hold::Private {
            _removed_on_drop: path,
        },
    })
}
