//! Opening inputs.

use crate::error::{Error, Result};
use crate::limits::Limits;
use memmap2::Mmap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::remote_input::{is_remote_url, RemoteUrl, StorageOptions};

/// A named input: a file path, a URL (`s3://bucket/key`, `gs://bucket/key`, `http(s)://...`),
/// `-` for standard input, or bytes already read (from a pipe, a FIFO or standard input, which
/// can be read only once; see [`crate::DataSet::into_input`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputPath {
    /// A file.
    File(PathBuf),
    /// An object in S3-compatible storage or on an HTTP(S) server, read by byte range (see
    /// [`RemoteUrl`]; it needs the `remote` feature).
    Url(RemoteUrl),
    /// Standard input.
    Stdin,
    /// The whole (decompressed) content of an input, in memory, under the name it came from.
    Memory {
        /// The name used in messages.
        name: Arc<str>,
        /// The content.
        bytes: Arc<[u8]>,
    },
}

impl InputPath {
    /// `-` is standard input, `s3://`, `gs://`, `http://` and `https://` a URL, anything else a
    /// file.
    pub fn new(arg: impl AsRef<Path>) -> Self {
        let p = arg.as_ref();
        if p == Path::new("-") {
            InputPath::Stdin
        } else if let Some(url) = p.to_str().filter(|p| is_remote_url(p)) {
            InputPath::Url(RemoteUrl::new(url))
        } else {
            InputPath::File(p.to_path_buf())
        }
    }

    /// A URL read with `options` (see [`RemoteUrl::with_storage_options`]); anything else as
    /// it is.
    pub fn with_storage_options(self, options: &StorageOptions) -> Self {
        match self {
            InputPath::Url(url) if !options.is_empty() => {
                InputPath::Url(url.with_storage_options(options))
            }
            other => other,
        }
    }

    /// A URL read with `storage` options through the cache `cache` (a directory and its
    /// limit in bytes; see [`RemoteUrl::with_cache`]); anything else as it is.
    pub fn with_remote(self, storage: &StorageOptions, cache: Option<(PathBuf, u64)>) -> Self {
        match self {
            InputPath::Url(url) => {
                InputPath::Url(url.with_storage_options(storage).with_cache(cache))
            }
            other => other,
        }
    }

    /// The same input, a URL with its object opened now (see [`RemoteUrl::opened`]: one HEAD
    /// request that every later reader of this input shares); anything else as it is.
    pub fn opened(self) -> Result<Self> {
        match self {
            InputPath::Url(url) => Ok(InputPath::Url(url.opened()?)),
            other => Ok(other),
        }
    }

    /// The name used in messages: the path as given (a URL without its query, which may
    /// hold secrets: see [`RemoteUrl::shown`]), or `-`.
    pub fn display_name(&self) -> String {
        match self {
            InputPath::File(p) => p.display().to_string(),
            InputPath::Url(url) => url.shown().into_owned(),
            InputPath::Stdin => "-".to_string(),
            InputPath::Memory { name, .. } => name.to_string(),
        }
    }

    /// The input as a corpus names its files: the file's path, else its name in messages.
    pub fn as_corpus_file(&self) -> PathBuf {
        match self {
            InputPath::File(p) => p.clone(),
            other => PathBuf::from(other.display_name()),
        }
    }

    /// The file, when this is one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            InputPath::File(p) => Some(p),
            _ => None,
        }
    }

    /// Lens's file lookup: a file name that does not exist is retried with `.gz`, then `.bz2`
    /// appended (the first that exists); anything else is returned as is.
    pub fn with_compressed_lookup(self) -> Self {
        let InputPath::File(path) = &self else {
            return self;
        };
        if path.exists() {
            return self;
        }
        for ext in ["gz", "bz2"] {
            let mut name = path.as_os_str().to_os_string();
            name.push(".");
            name.push(ext);
            let candidate = PathBuf::from(name);
            if candidate.exists() {
                return InputPath::File(candidate);
            }
        }
        self
    }

    /// Whether the input can be read more than once, at any position: a regular file or a URL
    /// (a pipe, a FIFO or standard input can be read only once, from its start).
    pub fn is_seekable(&self) -> bool {
        match self {
            InputPath::File(p) => std::fs::metadata(p).is_ok_and(|m| m.is_file()),
            InputPath::Url(_) => true,
            InputPath::Stdin => false,
            InputPath::Memory { .. } => true,
        }
    }
}

impl From<&Path> for InputPath {
    fn from(p: &Path) -> Self {
        InputPath::new(p)
    }
}

impl From<&PathBuf> for InputPath {
    fn from(p: &PathBuf) -> Self {
        InputPath::new(p)
    }
}

impl From<PathBuf> for InputPath {
    fn from(p: PathBuf) -> Self {
        InputPath::new(p)
    }
}

impl From<&str> for InputPath {
    fn from(p: &str) -> Self {
        InputPath::new(p)
    }
}

/// Compression of a stream, recognised by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Not compressed.
    None,
    /// gzip (`1f 8b`).
    Gzip,
    /// bzip2 (`BZh`).
    Bzip2,
}

impl Compression {
    /// Recognises compression by magic bytes (`head` is the start of the stream).
    pub fn sniff(head: &[u8]) -> Self {
        if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if head.len() >= 4 && head.starts_with(b"BZh") && (b'1'..=b'9').contains(&head[3]) {
            Compression::Bzip2
        } else {
            Compression::None
        }
    }

    /// Compression implied by a file name's extension (`.gz`, `.bz2`), for writing.
    pub fn from_extension(path: &Path) -> Self {
        match path.extension().and_then(|e| e.to_str()) {
            Some("gz") => Compression::Gzip,
            Some("bz2") => Compression::Bzip2,
            _ => Compression::None,
        }
    }
}

/// The whole content of an input: a memory map of a private copy of a regular uncompressed
/// file, or the bytes read (and decompressed) from anything else.
pub enum InputBytes {
    /// A memory-mapped private copy of a file (see [`open_bytes`]).
    Mapped(Mmap),
    /// Bytes in memory.
    Owned(Vec<u8>),
    /// Bytes in memory, shared ([`InputPath::Memory`]).
    Shared(Arc<[u8]>),
}

impl Deref for InputBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            InputBytes::Mapped(m) => m,
            InputBytes::Owned(v) => v,
            InputBytes::Shared(b) => b,
        }
    }
}

fn open_file(path: &Path) -> Result<File> {
    File::open(path).map_err(|e| Error::io(path, e))
}

/// Reads a whole input into memory: regular uncompressed files are copied by the kernel into an
/// unlinked temporary file, which is mapped (never the input itself: see `snapshot`), compressed
/// files are decompressed, standard input is read to its end.
pub fn open_bytes(input: &InputPath) -> Result<InputBytes> {
    open_bytes_as(input, Holding::Binary)
}

/// [`open_bytes`] for an input whose content is `holding`: text is checked as it streams in.
pub fn open_bytes_as(input: &InputPath, holding: Holding) -> Result<InputBytes> {
    let name = input.display_name();
    match input {
        InputPath::File(path) => {
            let file = open_file(path)?;
            let meta = file.metadata().map_err(|e| Error::io(path, e))?;
            if meta.is_file() && meta.len() > 0 {
                let mut head = [0u8; 4];
                let n = head.len().min(meta.len() as usize);
                super::read_exact_at(&file, &mut head[..n], 0).map_err(|e| Error::io(path, e))?;
                if Compression::sniff(&head[..n]) == Compression::None {
                    // Where the copy cannot be made (no room in TMPDIR, a file-size limit),
                    // the file is read into memory instead.
                    if let Some(map) = snapshot(path, file, meta.len())? {
                        return Ok(InputBytes::Mapped(map));
                    }
                }
            }
            read_all(open_reader(input)?, &name, holding)
        }
        InputPath::Stdin | InputPath::Url(_) => read_all(open_reader(input)?, &name, holding),
        InputPath::Memory { bytes, .. } => Ok(InputBytes::Shared(bytes.clone())),
    }
}

/// A map of a private copy of `file` (at `path`, `len` bytes long): an unlinked temporary file
/// (in `TMPDIR`) that nothing else can change. The input itself is never mapped: a mapped file
/// that shrinks under the reader (truncated, or rewritten in place by `cp`) kills the process
/// with `SIGBUS` at the next access past its new end, which no Rust program can recover from.
/// The copy is made by the kernel (`copy_file_range`, a reflink where the file system shares
/// blocks). `None` where the copy cannot be made (no room in `TMPDIR`, a file-size limit: a
/// read error of the input itself recurs, named, when it is read instead); a file that ends
/// before `len` while it is copied is an error naming it and the byte.
fn snapshot(path: &Path, file: File, len: u64) -> Result<Option<Mmap>> {
    let Ok(mut copy) = tempfile::tempfile_in(std::env::temp_dir()) else {
        return Ok(None);
    };
    let Ok(copied) = std::io::copy(&mut file.take(len), &mut copy) else {
        return Ok(None);
    };
    if copied < len {
        let e = std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("the file ends before byte {len} (has the file changed?)"),
        );
        return Err(Error::io(path, e));
    }
    // SAFETY: a read-only map of a file that only this process holds (unlinked at creation),
    // written whole before it is mapped and never changed after.
    Ok(unsafe { Mmap::map(&copy) }.ok())
}

/// As [`open_bytes`], but held in memory even where it could be mapped (`keepDataInMemory`):
/// compressed files are decompressed, plain ones copied in whole.
pub fn read_into_memory(input: &InputPath) -> Result<InputBytes> {
    match input {
        InputPath::Memory { bytes, .. } => Ok(InputBytes::Shared(bytes.clone())),
        _ => read_all(open_reader(input)?, &input.display_name(), Holding::Binary),
    }
}

/// What a stream read whole into memory holds, which says what can be checked as it arrives
/// (a decompressed stream or a device can be endless: it must fail before it fills memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holding {
    /// Binary data (CBF, Lens `.bex`), or text checked elsewhere: no check.
    Binary,
    /// CTF text: a NUL byte, which CTF text cannot hold, or a line longer than the maximum
    /// record size (a sequence holds its lines whole) is an error as soon as it arrives.
    CtfText(Limits),
}

/// Reads the rest of `reader` into memory, checking it as `holding` says; errors name `name`.
pub(crate) fn read_all(
    reader: Box<dyn BufRead + Send>,
    name: &str,
    holding: Holding,
) -> Result<InputBytes> {
    let mut buf = Vec::new();
    copy_checked(reader, name, holding, |bytes| {
        buf.extend_from_slice(bytes);
        Ok(())
    })?;
    Ok(InputBytes::Owned(buf))
}

/// Decompresses `input` into a temporary file (in the temporary directory, `TMPDIR`; unlinked
/// at once, so nothing is left behind whatever happens), checking it as `holding` says: what
/// random access into a compressed file needs, with memory bounded by a buffer (and a line of
/// CTF text) rather than by the file. Errors name the input; a failed write names the directory.
pub fn spool(input: &InputPath, holding: Holding) -> Result<File> {
    let dir = std::env::temp_dir();
    let failed = |e: std::io::Error| {
        let what = format!("decompressing {} to a temporary file", input.display_name());
        Error::io(&dir, e).within(what)
    };
    let file = tempfile::tempfile_in(&dir).map_err(failed)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    copy_checked(
        open_reader(input)?,
        &input.display_name(),
        holding,
        |bytes| std::io::Write::write_all(&mut out, bytes).map_err(failed),
    )?;
    out.into_inner().map_err(|e| failed(e.into_error()))
}

/// Passes the rest of `reader` to `put` block by block, checking it as `holding` says; errors
/// name `name`. Only the current line of text is kept (for an error's line and column).
pub(crate) fn copy_checked(
    mut reader: Box<dyn BufRead + Send>,
    name: &str,
    holding: Holding,
    mut put: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let in_file = |e: Error| e.in_file(name.to_string());
    // The bytes since the current line's start (absolute offset `line_start`, line `line`).
    let (mut total, mut line_start, mut line, mut tail) = (0u64, 0u64, 1u64, Vec::new());
    loop {
        let got = match reader.fill_buf() {
            Ok([]) => return Ok(()),
            Ok(got) => got,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(in_file(Error::from(e))),
        };
        let n = got.len();
        if let Holding::CtfText(limits) = holding {
            let err = if let Some(k) = memchr::memchr(0, got) {
                tail.extend_from_slice(&got[..k]);
                Some(Error::syntax(
                    total + k as u64,
                    "found a NUL byte: CTF is text",
                ))
            } else {
                match memchr::memrchr(b'\n', got) {
                    Some(k) => {
                        line += memchr::memchr_iter(b'\n', &got[..=k]).count() as u64;
                        line_start = total + k as u64 + 1;
                        tail.clear();
                        tail.extend_from_slice(&got[k + 1..]);
                    }
                    None => tail.extend_from_slice(got),
                }
                (total + n as u64 - line_start > limits.max_record_bytes)
                    .then(|| limits.line_too_long(line_start))
            };
            if let Some(e) = err {
                return Err(in_file(e.resolve_in(&tail, line_start, line)));
            }
        }
        put(got)?;
        total += n as u64;
        reader.consume(n);
    }
}

/// Opens an input as a buffered stream, decompressing gzip or bzip2 when its first bytes say so
/// (whatever the name). The stream starts at the input's first byte: the bytes looked at to
/// recognise the compression are replayed, so a pipe loses nothing.
pub fn open_reader(input: &InputPath) -> Result<Box<dyn BufRead + Send>> {
    Ok(open_peeked(input, 0)?.0)
}

/// [`open_reader`], and the first `n` bytes of the decompressed content (fewer when it is
/// shorter), which the stream replays: what format detection looks at, read once.
pub(crate) fn open_peeked(
    input: &InputPath,
    n: usize,
) -> Result<(Box<dyn BufRead + Send>, Vec<u8>, Compression)> {
    let raw: Box<dyn Read + Send> = match input {
        InputPath::File(path) => Box::new(open_file(path)?),
        InputPath::Url(url) => Box::new(super::RemoteFile::open(url)?.stream()),
        InputPath::Stdin => Box::new(std::io::stdin()),
        InputPath::Memory { bytes, .. } => Box::new(std::io::Cursor::new(bytes.clone())),
    };
    let buffered = BufReader::with_capacity(1 << 16, raw);
    let (buffered, magic) = Replay::peek(buffered, 4).map_err(|e| io_error(input, e))?;
    let compression = Compression::sniff(&magic);
    let decoded = super::decompress::decoder(compression, buffered);
    if n == 0 {
        return Ok((decoded, Vec::new(), compression));
    }
    let (replay, head) = Replay::peek(decoded, n).map_err(|e| io_error(input, e))?;
    Ok((Box::new(replay), head, compression))
}

/// A stream that first gives back the bytes already taken from it, then the rest.
struct Replay<R> {
    head: Vec<u8>,
    pos: usize,
    inner: R,
}

impl<R: BufRead> Replay<R> {
    /// Takes up to `n` bytes from `inner` (fewer only at its end: a pipe may deliver them a
    /// few at a time), returning the stream that replays them and a copy of them.
    fn peek(mut inner: R, n: usize) -> std::io::Result<(Self, Vec<u8>)> {
        let mut head = Vec::with_capacity(n);
        while head.len() < n {
            let got = match inner.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if got.is_empty() {
                break;
            }
            let take = got.len().min(n - head.len());
            head.extend_from_slice(&got[..take]);
            inner.consume(take);
        }
        let copy = head.clone();
        Ok((
            Replay {
                head,
                pos: 0,
                inner,
            },
            copy,
        ))
    }
}

impl<R: BufRead> Read for Replay<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = {
            let buf = self.fill_buf()?;
            let n = buf.len().min(out.len());
            out[..n].copy_from_slice(&buf[..n]);
            n
        };
        self.consume(n);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Replay<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.pos < self.head.len() {
            Ok(&self.head[self.pos..])
        } else {
            self.inner.fill_buf()
        }
    }

    fn consume(&mut self, n: usize) {
        if self.pos < self.head.len() {
            self.pos = (self.pos + n).min(self.head.len());
        } else {
            self.inner.consume(n);
        }
    }
}

fn io_error(input: &InputPath, e: std::io::Error) -> Error {
    // Keeps the operating system's error (its errno), see Error::io_error.
    Error::from(e).in_file(input.display_name())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use std::io::Write;

    #[test]
    fn a_file_that_ends_early_while_copied_is_an_error_naming_it() {
        // The file is shorter than the length its copy was started for: it shrank meanwhile.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.ctf");
        std::fs::write(&path, b"0 |x 1\n").unwrap();
        let file = File::open(&path).unwrap();
        let e = snapshot(&path, file, 20).unwrap_err().to_string();
        assert!(
            e.contains("x.ctf") && e.contains("ends before byte 20"),
            "{e}"
        );
        // Whole, it is copied and mapped.
        let file = File::open(&path).unwrap();
        let map = snapshot(&path, file, 7).unwrap().expect("a copy in TMPDIR");
        assert_eq!(&map[..], b"0 |x 1\n");
    }

    #[test]
    fn sniff_magic() {
        assert_eq!(Compression::sniff(&[0x1f, 0x8b, 8]), Compression::Gzip);
        assert_eq!(Compression::sniff(b"BZh9"), Compression::Bzip2);
        assert_eq!(Compression::sniff(b"BZhx"), Compression::None);
        assert_eq!(Compression::sniff(b"|a 1"), Compression::None);
        assert_eq!(Compression::sniff(b""), Compression::None);
    }

    #[test]
    fn plain_gzip_and_bzip2_files_read_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let text = b"|a 1 2 3\n|a 4 5 6\n".repeat(1000);
        let plain = dir.path().join("x.ctf");
        std::fs::write(&plain, &text).unwrap();
        // Compressed files deliberately without telling extensions: magic bytes decide.
        let gz = dir.path().join("x1");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(&text).unwrap();
        std::fs::write(&gz, enc.finish().unwrap()).unwrap();
        let bz = dir.path().join("x2");
        let mut enc = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
        enc.write_all(&text).unwrap();
        std::fs::write(&bz, enc.finish().unwrap()).unwrap();
        for p in [&plain, &gz, &bz] {
            let bytes = open_bytes(&InputPath::new(p)).unwrap();
            assert_eq!(&bytes[..], &text[..], "{}", p.display());
        }
        assert!(matches!(
            open_bytes(&InputPath::new(&plain)).unwrap(),
            InputBytes::Mapped(_)
        ));
    }

    #[test]
    fn missing_file_names_the_file() {
        let err = open_bytes(&InputPath::new("/nonexistent/x.ctf"))
            .err()
            .unwrap();
        assert_eq!(err.kind(), ErrorKind::Io);
        assert!(err.to_string().starts_with("/nonexistent/x.ctf: "), "{err}");
    }

    #[test]
    fn a_peek_is_replayed_even_when_bytes_arrive_one_at_a_time() {
        let text = b"0 |a 1 2\n1 |a 3 4\n".to_vec();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&text).unwrap();
        for data in [text.clone(), gz.finish().unwrap()] {
            // A pipe that delivers one byte per read.
            let slow = BufReader::with_capacity(1, std::io::Cursor::new(data));
            let (replay, magic) = Replay::peek(slow, 4).unwrap();
            assert_eq!(magic.len(), 4);
            let decoded: Box<dyn BufRead + Send> = match Compression::sniff(&magic) {
                Compression::Gzip => {
                    Box::new(BufReader::new(flate2::bufread::MultiGzDecoder::new(replay)))
                }
                _ => Box::new(replay),
            };
            let (mut replay, head) = Replay::peek(decoded, 8).unwrap();
            assert_eq!(head, &text[..8]);
            let mut all = Vec::new();
            replay.read_to_end(&mut all).unwrap();
            assert_eq!(all, text);
        }
    }

    #[test]
    fn a_spooled_file_holds_the_stream_and_fails_as_reading_it_whole_does() {
        use std::io::Seek;
        let dir = tempfile::tempdir().unwrap();
        let gz = |name: &str, text: &[u8]| {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            enc.write_all(text).unwrap();
            let path = dir.path().join(name);
            std::fs::write(&path, enc.finish().unwrap()).unwrap();
            InputPath::new(path)
        };
        let limits = Limits {
            max_record_bytes: 100,
        };
        let text = b"0 |a 1 2\n1 |a 3 4\n".repeat(10_000);
        let good = gz("good.gz", &text);
        let mut file = spool(&good, Holding::CtfText(limits)).unwrap();
        let mut back = Vec::new();
        file.rewind().unwrap();
        file.read_to_end(&mut back).unwrap();
        assert_eq!(back, text);
        // A NUL on line 3, and a line longer than the limit: the same error either way.
        let nul = gz("nul.gz", b"0 |a 1\n1 |a 2\n2 |a \x003\n");
        let long = gz("long.gz", &[&b"0 |a 1\n"[..], &[b'7'; 300]].concat());
        for (input, want) in [
            (&nul, "nul.gz:3:6 (byte 19)"),
            (&long, "long.gz:2:101 (byte 107)"),
        ] {
            let whole = open_bytes_as(input, Holding::CtfText(limits))
                .err()
                .unwrap();
            let spooled = spool(input, Holding::CtfText(limits)).err().unwrap();
            assert_eq!(whole.to_string(), spooled.to_string());
            assert!(spooled.to_string().contains(want), "{spooled}");
        }
    }

    #[test]
    fn empty_file_reads_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("empty");
        std::fs::write(&p, b"").unwrap();
        assert!(open_bytes(&InputPath::new(&p)).unwrap().is_empty());
    }
}
