//! [`ReopeningFile`]: a file read by offset that may be closed while it is not read and is
//! reopened by its path when it is read again, so that a corpus of any number of shards reads
//! under the process's limit of open files (`RLIMIT_NOFILE`, often 1,024 or 256).
//!
//! The files opened this way share one budget, a quarter of the soft limit (8 to 4,096): the
//! least recently read beyond it is closed (a read in progress keeps its descriptor until it
//! ends). A file reopened must be the one first opened (same device and inode): one replaced
//! meanwhile is an error naming it, not other data read with the first one's index.

use crate::error::{Error, Result};
use std::collections::VecDeque;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// A file read by offset, closed and reopened as the budget of open files needs.
pub struct ReopeningFile {
    inner: Arc<Inner>,
}

struct Inner {
    id: u64,
    /// Where to reopen it; `None`: it cannot be (an unlinked temporary file) and stays open.
    path: Option<PathBuf>,
    identity: (u64, u64),
    /// Read at random offsets: `POSIX_FADV_RANDOM` again on every reopened descriptor.
    random: AtomicBool,
    open: Mutex<Option<Arc<File>>>,
}

/// The files open now, least recently read first.
struct Budget {
    limit: usize,
    open: VecDeque<(u64, Weak<Inner>)>,
}

fn budget() -> &'static Mutex<Budget> {
    static BUDGET: OnceLock<Mutex<Budget>> = OnceLock::new();
    BUDGET.get_or_init(|| {
        Mutex::new(Budget {
            limit: (open_files_limit() / 4).clamp(8, 4096),
            open: VecDeque::new(),
        })
    })
}

/// The soft limit of open files (at least 32; 1,024 where it cannot be read).
fn open_files_limit() -> usize {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the struct it is given.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
            return usize::try_from(limit.rlim_cur)
                .unwrap_or(usize::MAX)
                .max(32);
        }
    }
    1024
}

#[cfg(unix)]
fn identity(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

#[cfg(not(unix))]
fn identity(_: &std::fs::Metadata) -> (u64, u64) {
    (0, 0)
}

impl ReopeningFile {
    /// `file`, opened from `path` (reopened from there when it was closed).
    pub fn new(path: &Path, file: File) -> Result<Self> {
        Self::with(Some(path.to_path_buf()), file)
    }

    /// `file`, which cannot be reopened (an unlinked temporary file): it stays open.
    pub fn kept_open(file: File) -> Result<Self> {
        Self::with(None, file)
    }

    fn with(path: Option<PathBuf>, file: File) -> Result<Self> {
        static IDS: AtomicU64 = AtomicU64::new(0);
        let meta = file.metadata()?;
        let inner = Arc::new(Inner {
            id: IDS.fetch_add(1, Ordering::Relaxed),
            path,
            identity: identity(&meta),
            random: AtomicBool::new(false),
            open: Mutex::new(Some(Arc::new(file))),
        });
        let me = ReopeningFile { inner };
        me.used();
        Ok(me)
    }

    /// The open file (reopened if it was closed); it stays open while it is held.
    pub fn get(&self) -> Result<Arc<File>> {
        let file = {
            let mut open = self.inner.open.lock().unwrap_or_else(|p| p.into_inner());
            match &*open {
                Some(f) => f.clone(),
                None => open.insert(Arc::new(self.reopen()?)).clone(),
            }
        };
        self.used();
        Ok(file)
    }

    /// Advises random reads (`POSIX_FADV_RANDOM`: no read-ahead), now and whenever
    /// the file is reopened.
    pub fn advise_random(&self) -> Result<()> {
        self.inner.random.store(true, Ordering::Relaxed);
        super::advise_random(&*self.get()?);
        Ok(())
    }

    fn reopen(&self) -> Result<File> {
        let path = self
            .inner
            .path
            .as_ref()
            .expect("only a file with a path is closed");
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let meta = file.metadata().map_err(|e| Error::io(path, e))?;
        if identity(&meta) != self.inner.identity {
            let e = std::io::Error::other("the file was replaced while it was being read");
            return Err(Error::io(path, e));
        }
        if self.inner.random.load(Ordering::Relaxed) {
            super::advise_random(&file);
        }
        Ok(file)
    }

    /// Marks the file the most recently read, and closes the least recently read beyond the
    /// budget. No other lock is held while the budget's is.
    fn used(&self) {
        if self.inner.path.is_none() {
            return;
        }
        let closing: Vec<Weak<Inner>> = {
            let mut b = budget().lock().unwrap_or_else(|p| p.into_inner());
            let id = self.inner.id;
            if b.open.back().is_some_and(|(last, _)| *last == id) {
                return;
            }
            if let Some(at) = b.open.iter().position(|(i, _)| *i == id) {
                b.open.remove(at);
            }
            b.open.push_back((id, Arc::downgrade(&self.inner)));
            let over = b.open.len().saturating_sub(b.limit);
            b.open.drain(..over).map(|(_, w)| w).collect()
        };
        for inner in closing.iter().filter_map(Weak::upgrade) {
            *inner.open.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
    }
}

impl crate::cbf::ReadAt for ReopeningFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        super::read_exact_at(&*self.get()?, buf, offset).map_err(Error::from)
    }

    fn byte_len(&self) -> Result<u64> {
        Ok(self.get()?.metadata()?.len())
    }
}

impl std::fmt::Debug for ReopeningFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReopeningFile")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl Drop for ReopeningFile {
    fn drop(&mut self) {
        let mut b = budget().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = b.open.iter().position(|(i, _)| *i == self.inner.id) {
            b.open.remove(at);
        }
    }
}
