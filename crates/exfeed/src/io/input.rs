//! Opening inputs.

use crate::error::{Error, ErrorKind, Location, Result};
use memmap2::Mmap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::ops::Deref;
use std::path::{Path, PathBuf};

/// A named input: a file path, or `-` for standard input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputPath {
    /// A file.
    File(PathBuf),
    /// Standard input.
    Stdin,
}

impl InputPath {
    /// `-` is standard input, anything else a file.
    pub fn new(arg: impl AsRef<Path>) -> Self {
        let p = arg.as_ref();
        if p == Path::new("-") {
            InputPath::Stdin
        } else {
            InputPath::File(p.to_path_buf())
        }
    }

    /// The name used in messages: the path as given, or `-`.
    pub fn display_name(&self) -> String {
        match self {
            InputPath::File(p) => p.display().to_string(),
            InputPath::Stdin => "-".to_string(),
        }
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

/// The whole content of an input: a memory map of a regular uncompressed file, or the bytes
/// read (and decompressed) from anything else.
pub enum InputBytes {
    /// A memory-mapped file.
    Mapped(Mmap),
    /// Bytes in memory.
    Owned(Vec<u8>),
}

impl Deref for InputBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            InputBytes::Mapped(m) => m,
            InputBytes::Owned(v) => v,
        }
    }
}

fn open_file(path: &Path) -> Result<File> {
    File::open(path).map_err(|e| Error::io(path, e))
}

/// Reads a whole input into memory: regular uncompressed files are memory-mapped, compressed
/// files are decompressed, standard input is read to its end.
pub fn open_bytes(input: &InputPath) -> Result<InputBytes> {
    let name = input.display_name();
    match input {
        InputPath::File(path) => {
            let file = open_file(path)?;
            let meta = file.metadata().map_err(|e| Error::io(path, e))?;
            if meta.is_file() && meta.len() > 0 {
                // SAFETY: the map is read-only; a file truncated by another process while
                // mapped is outside what any reader can defend against (as for every mmap user).
                let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
                if Compression::sniff(&map) == Compression::None {
                    return Ok(InputBytes::Mapped(map));
                }
            }
            read_all(open_reader(input)?, &name)
        }
        InputPath::Stdin => read_all(open_reader(input)?, &name),
    }
}

/// As [`open_bytes`], but held in memory even where it could be mapped (`keepDataInMemory`):
/// compressed files are decompressed, plain ones copied in whole.
pub fn read_into_memory(input: &InputPath) -> Result<InputBytes> {
    Ok(match open_bytes(input)? {
        InputBytes::Mapped(map) => InputBytes::Owned(map.to_vec()),
        owned => owned,
    })
}

fn read_all(mut reader: Box<dyn BufRead + Send>, name: &str) -> Result<InputBytes> {
    let mut buf = Vec::new();
    reader
        .read_to_end(&mut buf)
        .map_err(|e| Error::from(e).in_file(name.to_string()))?;
    Ok(InputBytes::Owned(buf))
}

/// Opens an input as a buffered stream, decompressing gzip or bzip2 when its first bytes say so
/// (whatever the name). Nothing is read ahead beyond the buffer.
pub fn open_reader(input: &InputPath) -> Result<Box<dyn BufRead + Send>> {
    let raw: Box<dyn Read + Send> = match input {
        InputPath::File(path) => Box::new(open_file(path)?),
        InputPath::Stdin => Box::new(std::io::stdin()),
    };
    let mut buffered = BufReader::with_capacity(1 << 16, raw);
    let head = buffered.fill_buf().map_err(|e| io_error(input, e))?;
    Ok(match Compression::sniff(head) {
        Compression::None => Box::new(buffered),
        Compression::Gzip => Box::new(BufReader::with_capacity(
            1 << 16,
            flate2::bufread::MultiGzDecoder::new(buffered),
        )),
        Compression::Bzip2 => Box::new(BufReader::with_capacity(
            1 << 16,
            bzip2::bufread::MultiBzDecoder::new(buffered),
        )),
    })
}

fn io_error(input: &InputPath, e: std::io::Error) -> Error {
    Error::new(
        ErrorKind::Io,
        Location::default().with_file(input.display_name()),
        e.to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

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
    fn empty_file_reads_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("empty");
        std::fs::write(&p, b"").unwrap();
        assert!(open_bytes(&InputPath::new(&p)).unwrap().is_empty());
    }
}
