//! Writing outputs atomically: into a temporary file beside the target, renamed into place only
//! when complete and flushed. A failed or interrupted write leaves no partial file, and an
//! existing file is replaced only when asked to.
//!
//! Temporary files of outputs being written are registered; [`remove_unfinished_outputs`] deletes
//! them, for a program's interrupt handler to call before it exits (a signal ends the process
//! without unwinding, so nothing else would).
//!
//! The commit syncs the file to disk before the rename (so the new name never points at data
//! that a crash could lose). On Linux, writeback of what has been written is started every
//! [`WRITEBACK_STEP`] bytes (`sync_file_range`, which does not wait), so that the disk works
//! while the output is still being produced and the final sync has little left to do.

use super::input::Compression;
use crate::error::{Error, ErrorKind, Location, Result};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use tempfile::TempPath;

/// Temporary files of the outputs being written now.
static UNFINISHED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Deletes the temporary files of every output still being written. For an interrupt
/// (SIGINT/SIGTERM) handler, which must then exit the process without committing them.
pub fn remove_unfinished_outputs() {
    let paths = UNFINISHED.lock().unwrap_or_else(|e| e.into_inner());
    for p in paths.iter() {
        let _ = std::fs::remove_file(p);
    }
}

/// Keeps a temporary file in [`UNFINISHED`] while it lives.
struct Registration(PathBuf);

impl Registration {
    fn new(path: &Path) -> Self {
        let mut paths = UNFINISHED.lock().unwrap_or_else(|e| e.into_inner());
        paths.push(path.to_path_buf());
        Registration(path.to_path_buf())
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut paths = UNFINISHED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = paths.iter().position(|p| *p == self.0) {
            paths.swap_remove(i);
        }
    }
}

/// How to treat the target of a write.
#[derive(Debug, Clone, Default)]
pub struct OutputOptions {
    /// Replace an existing file (`--force`).
    pub force: bool,
    /// Inputs of the same run: writing onto one of them is refused.
    pub inputs: Vec<PathBuf>,
    /// Settings for an `s3://` output (credentials, endpoint), over those of the environment.
    pub storage_options: super::StorageOptions,
}

/// Bytes written between two starts of writeback (Linux).
pub const WRITEBACK_STEP: u64 = 8 << 20;

enum Sink {
    Plain(BufWriter<File>),
    Gzip(flate2::write::GzEncoder<BufWriter<File>>),
    Bzip2(bzip2::write::BzEncoder<BufWriter<File>>),
    /// Standard output (the target `-`): written as it comes, flushed at commit.
    Stdout(BufWriter<io::Stdout>),
}

impl Sink {
    /// Writing `file`, compressed as `target`'s name says.
    fn file(target: &Path, file: File) -> Self {
        let buffered = BufWriter::with_capacity(1 << 20, file);
        match Compression::from_extension(target) {
            Compression::None => Sink::Plain(buffered),
            Compression::Gzip => Sink::Gzip(flate2::write::GzEncoder::new(
                buffered,
                flate2::Compression::default(),
            )),
            Compression::Bzip2 => Sink::Bzip2(bzip2::write::BzEncoder::new(
                buffered,
                bzip2::Compression::default(),
            )),
        }
    }
}

/// An output file being written. Write through [`AtomicOutput`]'s `Write` impl, then
/// [`AtomicOutput::commit`]; dropping it without committing removes the temporary file.
/// Names ending in `.gz` or `.bz2` are compressed.
///
/// The target `-` is standard output, written as the bytes come (every format exfeed writes is
/// written front to back, so a pipe takes any of them): nothing is renamed, and an error
/// part-way leaves what was written in the pipe (the exit status tells).
pub struct AtomicOutput {
    sink: Sink,
    /// The temporary file (none for standard output).
    temp: Option<TempPath>,
    target: PathBuf,
    force: bool,
    written: u64,
    /// `written` when writeback was last started.
    writeback_at: u64,
    /// Dropped (unregistered) only after the temporary file is renamed or deleted.
    _registration: Option<Registration>,
    /// The object the temporary file becomes at commit, for an `s3://` target: its upload,
    /// aborted if this is dropped without a commit.
    #[cfg(feature = "remote")]
    upload: Option<super::remote_write::RemoteOutput>,
}

fn refused(path: &Path, message: String) -> Error {
    Error::new(
        ErrorKind::Refused,
        Location::default().with_file(path.display().to_string()),
        message,
    )
}

/// A new temporary file in `dir` for the output `target`, registered for removal on an
/// interrupt.
fn partial_file(dir: &Path, target: &Path) -> Result<(File, TempPath, Registration)> {
    // The name is registered before the file exists, so that an interrupt at any moment
    // finds it (registering after the creation left a window in which a signal left the
    // file behind). A name taken already is retried by tempfile with another one.
    let mut registration = None;
    let temp = tempfile::Builder::new()
        .prefix(".exfeed-partial-")
        .make_in(dir, |path| {
            registration = Some(Registration::new(path));
            let mut open = std::fs::OpenOptions::new();
            open.read(true).write(true).create_new(true);
            // An ordinary file: 0666 less the process umask, as for any file a program
            // creates (tempfile's own files are 0600).
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut open, 0o666);
            open.open(path)
        })
        .map_err(|e| Error::io(target, e))?;
    let registration = registration.expect("make_in calls its function");
    let (file, temp) = temp.into_parts();
    Ok((file, temp, registration))
}

/// The directory of the file `target` (`.` for a bare name).
fn directory_of(target: &Path) -> &Path {
    match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// What is at an output path before it is written, and the refusal naming it.
enum Existing {
    Nothing,
    /// A regular file, or a symbolic link to one or to nothing: replaced (the name, never the
    /// file a link points to) by renaming the complete output over it.
    Replaceable(String),
    /// A FIFO or a character device (or a link to one), named: written into in place, as a
    /// shell's redirection does; a rename would put a regular file in its place.
    Device(&'static str),
    /// A directory, a socket or a block device, named: never written.
    Unwritable(&'static str),
}

/// What `target` is: its kind, through a symbolic link (a dangling link is there too).
fn what_is_at(target: &Path) -> io::Result<Existing> {
    let own = match std::fs::symlink_metadata(target) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Existing::Nothing),
        Err(e) => return Err(e),
    };
    let link_to = match own.file_type().is_symlink() {
        true => Some(std::fs::read_link(target)?.display().to_string()),
        false => None,
    };
    let kind = match std::fs::metadata(target) {
        Ok(m) => m.file_type(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let to = link_to.unwrap_or_default();
            return Ok(Existing::Replaceable(format!(
                "output is a symbolic link to '{to}', which does not exist; --force replaces \
                 the link with a regular file"
            )));
        }
        Err(e) => return Err(e),
    };
    if kind.is_file() {
        return Ok(Existing::Replaceable(match link_to {
            Some(to) => format!(
                "output is a symbolic link to '{to}'; --force replaces the link (not the file \
                 it points to) with a regular file"
            ),
            None => "output exists; replace it with --force".into(),
        }));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let device = if kind.is_fifo() {
            Some("a FIFO (named pipe)")
        } else if kind.is_char_device() {
            Some("a character device")
        } else {
            None
        };
        if let Some(device) = device {
            return Ok(Existing::Device(device));
        }
    }
    let what = if kind.is_dir() {
        "a directory"
    } else if is_socket(&kind) {
        "a socket"
    } else {
        "a block device or another special file"
    };
    Ok(Existing::Unwritable(what))
}

fn is_socket(kind: &std::fs::FileType) -> bool {
    #[cfg(unix)]
    return std::os::unix::fs::FileTypeExt::is_socket(kind);
    #[cfg(not(unix))]
    return false;
}

impl AtomicOutput {
    /// Writes into a FIFO or character device in place (opening a FIFO waits for its reader):
    /// as standard output, nothing is renamed and an error part-way leaves what was written.
    fn into_device(target: &Path, options: &OutputOptions) -> Result<Self> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(target)
            .map_err(|e| Error::io(target, e))?;
        Ok(Self::in_place(Sink::file(target, file), target, options))
    }

    /// An output written as it comes, without a temporary file (standard output, a device).
    fn in_place(sink: Sink, target: &Path, options: &OutputOptions) -> Self {
        AtomicOutput {
            sink,
            temp: None,
            target: target.to_path_buf(),
            force: options.force,
            written: 0,
            writeback_at: 0,
            _registration: None,
            #[cfg(feature = "remote")]
            upload: None,
        }
    }

    /// Starts writing `target`. Fails at once if it is one of the inputs, or exists and
    /// `force` is not set.
    pub fn create(target: &Path, options: &OutputOptions) -> Result<Self> {
        if target == Path::new("-") {
            let stdout = BufWriter::with_capacity(1 << 16, io::stdout());
            return Ok(Self::in_place(Sink::Stdout(stdout), target, options));
        }
        #[cfg(feature = "remote")]
        if let Some(url) = target.to_str().filter(|t| super::remote::is_remote_url(t)) {
            return Self::to_bucket(target, url, options);
        }
        if options.inputs.iter().any(|i| same_file(i, target)) {
            return Err(refused(
                target,
                "output is the same file as an input".into(),
            ));
        }
        match what_is_at(target).map_err(|e| Error::io(target, e))? {
            Existing::Nothing => {}
            Existing::Replaceable(what) if !options.force => {
                return Err(refused(
                    target,
                    format!("{what} (overwrite=True in Python)"),
                ));
            }
            Existing::Device(kind) if !options.force => {
                return Err(refused(
                    target,
                    format!(
                        "output is {kind}; --force writes into it in place (overwrite=True \
                         in Python)"
                    ),
                ));
            }
            Existing::Replaceable(_) => {}
            Existing::Device(_) => return Self::into_device(target, options),
            Existing::Unwritable(kind) => {
                return Err(refused(
                    target,
                    format!(
                        "output is {kind}: exfeed writes regular files, FIFOs and character \
                         devices"
                    ),
                ))
            }
        }
        Self::through_partial_file(target, directory_of(target), options)
    }

    /// Writing `target` through a temporary file in `dir`.
    fn through_partial_file(target: &Path, dir: &Path, options: &OutputOptions) -> Result<Self> {
        let (file, temp, registration) = partial_file(dir, target)?;
        Ok(AtomicOutput {
            sink: Sink::file(target, file),
            temp: Some(temp),
            target: target.to_path_buf(),
            force: options.force,
            written: 0,
            writeback_at: 0,
            _registration: Some(registration),
            #[cfg(feature = "remote")]
            upload: None,
        })
    }

    /// Writing the object at `url` (`s3://bucket/key`): into a temporary file in the system's
    /// temporary directory, uploaded at commit (see [`super::remote_write`]). The upload is
    /// started now, so that an existing object is refused before any work. Settings come from
    /// the environment (`AWS_ENDPOINT`, `AWS_ACCESS_KEY_ID`, ...) and `options.storage_options`.
    #[cfg(feature = "remote")]
    fn to_bucket(target: &Path, url: &str, options: &OutputOptions) -> Result<Self> {
        let remote = super::remote::RemoteOptions {
            storage_options: options.storage_options.clone(),
            ..Default::default()
        };
        let upload = super::remote_write::RemoteOutput::create(url, &remote, options.force)?;
        let mut output = Self::through_partial_file(target, &std::env::temp_dir(), options)?;
        output.upload = Some(upload);
        Ok(output)
    }

    /// The final path.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Where a writer puts the temporary files it needs besides the output: the output's
    /// directory (the disk that takes the output), or the system's temporary directory when
    /// the output is standard output.
    pub fn temp_dir(&self) -> PathBuf {
        #[cfg(feature = "remote")]
        if self.upload.is_some() {
            return std::env::temp_dir();
        }
        match self.temp {
            None => std::env::temp_dir(),
            Some(_) => directory_of(&self.target).to_path_buf(),
        }
    }

    /// Bytes written so far (before compression).
    pub fn position(&self) -> u64 {
        self.written
    }

    fn file(&self) -> Option<&File> {
        match &self.sink {
            Sink::Plain(w) => Some(w.get_ref()),
            Sink::Gzip(w) => Some(w.get_ref().get_ref()),
            Sink::Bzip2(w) => Some(w.get_ref().get_ref()),
            Sink::Stdout(_) => None,
        }
    }

    /// Starts writeback of the file's dirty pages without waiting for it (a hint: errors are
    /// left to the sync at commit, which reports them).
    fn start_writeback(&self) {
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::io::AsRawFd;
            let Some(file) = self.file() else { return };
            // SAFETY: a plain system call on a file descriptor we own; offset 0 and length 0
            // mean the whole file.
            unsafe {
                libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE);
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = self.file();
    }

    /// Finishes compression, flushes and syncs, and renames the file into place.
    pub fn commit(self) -> Result<()> {
        self.commit_as(true)
    }

    /// As [`commit`](Self::commit) without syncing the file to disk before the rename
    /// (`--no-sync`): faster where the disk is slow, but a crash of the machine (not of the
    /// process) soon after may leave a short or empty file under the target name.
    pub fn commit_unsynced(self) -> Result<()> {
        self.commit_as(false)
    }

    fn commit_as(mut self, sync: bool) -> Result<()> {
        if let Sink::Stdout(_) = self.sink {
            // Nothing to rename: flushed (a closed pipe noted, see `failed`).
            return Ok(self.flush()?);
        }
        let target = self.target;
        let io = |e: io::Error| Error::io(&target, e);
        let buffered = match self.sink {
            Sink::Plain(w) => w,
            Sink::Gzip(w) => w.finish().map_err(io)?,
            Sink::Bzip2(w) => w.finish().map_err(io)?,
            Sink::Stdout(_) => unreachable!("flushed above"),
        };
        let file = buffered.into_inner().map_err(|e| io(e.into_error()))?;
        #[cfg(feature = "remote")]
        if let Some(mut upload) = self.upload.take() {
            // The whole output, from its start, then the upload's completion.
            use std::io::Seek;
            (&file).seek(io::SeekFrom::Start(0)).map_err(io)?;
            io::copy(&mut &file, &mut upload).map_err(Error::from)?;
            return upload.finish();
        }
        let Some(temp) = self.temp else {
            // A device or FIFO written in place: nothing to sync or rename.
            return Ok(());
        };
        if sync {
            file.sync_all().map_err(io)?;
        }
        drop(file);
        let result = if self.force {
            temp.persist(&target).map(|_| ())
        } else {
            temp.persist_noclobber(&target).map(|_| ())
        };
        result.map_err(|e| {
            if e.error.kind() == io::ErrorKind::AlreadyExists {
                refused(
                    &target,
                    "output appeared while writing; replace it with --force (overwrite=True in Python)".into(),
                )
            } else {
                io(e.error)
            }
        })
    }
}

/// Whether a write to standard output (the target `-`) found it closed (the reader at the
/// other end of the pipe stopped early, as `head` does), however the error was wrapped after.
static STDOUT_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether an [`AtomicOutput`] to standard output found it closed by its reader (a broken
/// pipe): a command then ends quietly, as it would had it been killed by SIGPIPE.
pub fn stdout_was_closed() -> bool {
    STDOUT_CLOSED.load(std::sync::atomic::Ordering::Relaxed)
}

impl AtomicOutput {
    /// A write error as an I/O error naming the output (a full disk is the output's problem,
    /// whatever the caller was reading).
    fn failed(&self, e: io::Error) -> io::Error {
        if matches!(self.sink, Sink::Stdout(_)) && e.kind() == io::ErrorKind::BrokenPipe {
            STDOUT_CLOSED.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Error::io(&self.target, e).into_io()
    }
}

impl Write for AtomicOutput {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = match &mut self.sink {
            Sink::Plain(w) => w.write(buf),
            Sink::Gzip(w) => w.write(buf),
            Sink::Bzip2(w) => w.write(buf),
            Sink::Stdout(w) => w.write(buf),
        }
        .map_err(|e| self.failed(e))?;
        self.written += n as u64;
        if self.written - self.writeback_at >= WRITEBACK_STEP {
            self.writeback_at = self.written;
            self.start_writeback();
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.sink {
            Sink::Plain(w) => w.flush(),
            Sink::Gzip(w) => w.flush(),
            Sink::Bzip2(w) => w.flush(),
            Sink::Stdout(w) => w.flush(),
        }
        .map_err(|e| self.failed(e))
    }
}

/// Writes `bytes` to `path` atomically, replacing whatever is there (a cache, a saved state):
/// `path` holds its old content or all of `bytes`, never part of them.
/// Only a regular file (or nothing) is replaced: a FIFO or device there is refused, since
/// writing into it would not store anything.
pub fn replace_file(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Existing::Device(kind) | Existing::Unwritable(kind) =
        what_is_at(path).map_err(|e| Error::io(path, e))?
    {
        return Err(refused(
            path,
            format!("this is {kind}: it is written only as a regular file"),
        ));
    }
    let replace = OutputOptions {
        force: true,
        ..OutputOptions::default()
    };
    let mut out = AtomicOutput::create(path, &replace)?;
    out.write_all(bytes).map_err(|e| Error::io(path, e))?;
    out.commit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{open_bytes, InputPath};

    fn files_in(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn committed_output_appears_whole() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.txt");
        let mut out = AtomicOutput::create(&target, &OutputOptions::default()).unwrap();
        out.write_all(b"hello").unwrap();
        assert!(!target.exists(), "nothing at the target before commit");
        out.commit().unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"hello");
        assert_eq!(files_in(dir.path()), ["out.txt"]);
    }

    #[test]
    fn large_outputs_commit_whole_synced_or_not() {
        // Crosses WRITEBACK_STEP several times (writeback is started along the way on Linux),
        // in writes of odd sizes.
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..2 * WRITEBACK_STEP + 12_345)
            .map(|i| (i % 251) as u8)
            .collect();
        for sync in [true, false] {
            let target = dir.path().join(format!("out-{sync}"));
            let mut out = AtomicOutput::create(&target, &OutputOptions::default()).unwrap();
            for piece in data.chunks(3_000_001) {
                out.write_all(piece).unwrap();
            }
            assert_eq!(out.position(), data.len() as u64);
            assert!(!target.exists());
            if sync {
                out.commit().unwrap();
            } else {
                out.commit_unsynced().unwrap();
            }
            assert!(std::fs::read(&target).unwrap() == data, "sync {sync}");
        }
        assert_eq!(files_in(dir.path()), ["out-false", "out-true"]);
    }

    #[cfg(unix)]
    #[test]
    fn output_gets_ordinary_file_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.txt");
        let out = AtomicOutput::create(&target, &OutputOptions::default()).unwrap();
        out.commit().unwrap();
        let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
        // What any newly created file gets: 0666 less the process umask (Linux reports it).
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let Some(umask) = status
            .lines()
            .find_map(|l| l.strip_prefix("Umask:"))
            .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        else {
            eprintln!("SKIPPED: no Umask in /proc/self/status");
            return;
        };
        assert_eq!(mode, 0o666 & !umask, "mode {mode:o}, umask {umask:o}");
    }

    #[test]
    fn replace_file_replaces_whole() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("state.json");
        std::fs::write(&target, b"old and longer").unwrap();
        replace_file(&target, b"new").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert_eq!(files_in(dir.path()), ["state.json"]);
    }

    #[cfg(unix)]
    #[test]
    fn replace_file_refuses_a_fifo_rather_than_block_on_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("cache");
        let made = std::process::Command::new("mkfifo")
            .arg(&target)
            .status()
            .unwrap();
        assert!(made.success());
        let err = replace_file(&target, b"new").unwrap_err();
        assert!(
            err.to_string()
                .contains("this is a FIFO (named pipe): it is written only as a regular file"),
            "{err}"
        );
        assert_eq!(files_in(dir.path()), ["cache"]);
    }

    #[test]
    fn dropped_output_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.txt");
        let mut out = AtomicOutput::create(&target, &OutputOptions::default()).unwrap();
        out.write_all(b"partial").unwrap();
        drop(out);
        assert!(files_in(dir.path()).is_empty());
    }

    #[test]
    fn existing_output_needs_force() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.txt");
        std::fs::write(&target, b"old").unwrap();
        let err = AtomicOutput::create(&target, &OutputOptions::default())
            .err()
            .unwrap();
        assert_eq!(err.kind(), ErrorKind::Refused);
        assert!(err.to_string().contains("replace it with --force"), "{err}");
        assert_eq!(std::fs::read(&target).unwrap(), b"old");
        let opts = OutputOptions {
            force: true,
            ..Default::default()
        };
        let mut out = AtomicOutput::create(&target, &opts).unwrap();
        out.write_all(b"new").unwrap();
        out.commit().unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
    }

    #[test]
    fn writing_onto_an_input_is_refused_even_with_force() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.txt");
        std::fs::write(&input, b"data").unwrap();
        let opts = OutputOptions {
            force: true,
            inputs: vec![input.clone()],
            ..Default::default()
        };
        let via_dot = dir.path().join(".").join("in.txt");
        let err = AtomicOutput::create(&via_dot, &opts).err().unwrap();
        assert!(err.to_string().contains("same file as an input"), "{err}");
    }

    #[test]
    fn gz_and_bz2_names_compress() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["o.gz", "o.bz2"] {
            let target = dir.path().join(name);
            let mut out = AtomicOutput::create(&target, &OutputOptions::default()).unwrap();
            out.write_all(&b"0123456789".repeat(100)).unwrap();
            out.commit().unwrap();
            let raw = std::fs::read(&target).unwrap();
            assert!(raw.len() < 1000, "{name} is compressed");
            let back = open_bytes(&InputPath::new(&target)).unwrap();
            assert_eq!(&back[..], &b"0123456789".repeat(100)[..]);
        }
    }
}
