//! Opening CBF files: read a chunk at a time, or in memory.

use super::{open_bytes, read_exact_at, Compression, InputBytes, InputPath, ReopeningFile};
use crate::cbf::CbfFile;
use crate::error::{Error, Result};
use std::path::Path;

/// Opens a CBF file from a path or standard input; errors name the file. A plain file is read
/// a chunk at a time, each chunk with one positioned read when it is decoded (never mapped: a
/// mapped file that shrinks under the reader kills the process with `SIGBUS`, where a short
/// read is an error naming the file and the byte); a compressed file is decompressed into an
/// unlinked temporary file (see [`spool`](super::spool)) and read from it the same way; a URL
/// is read by range as a file is; standard input and other non-regular files are read into
/// memory.
pub fn open_cbf(input: &InputPath) -> Result<CbfFile<InputBytes>> {
    let name = input.display_name();
    let in_file = |e: Error| e.in_file(name.clone());
    if let InputPath::File(path) = input {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let meta = file.metadata().map_err(|e| Error::io(path, e))?;
        if meta.is_file() && meta.len() > 0 {
            let mut head = [0u8; 4];
            let n = head.len().min(meta.len() as usize);
            read_exact_at(&file, &mut head[..n], 0).map_err(|e| Error::io(path, e))?;
            if Compression::sniff(&head[..n]) == Compression::None {
                let file = ReopeningFile::new(path, file)?;
                return CbfFile::open_ranges(Box::new(file)).map_err(in_file);
            }
            return open_spooled(input);
        }
    }
    if let InputPath::Url(url) = input {
        // Read by range (the tail, the header, then each chunk when decoded); compressed, it
        // is streamed once into a temporary file, as a compressed local file is.
        let object = super::RemoteFile::open(url)?;
        let mut head = [0u8; 4];
        let n = object.read_at_most(&mut head, 0)?;
        if Compression::sniff(&head[..n]) == Compression::None {
            return CbfFile::open_ranges(Box::new(object)).map_err(in_file);
        }
        return open_spooled(input);
    }
    CbfFile::open(open_bytes(input).map_err(in_file)?).map_err(in_file)
}

/// A compressed CBF file or object: decompressed once into an unlinked temporary file, each
/// chunk then read from it when decoded (memory holds chunks, not the file).
fn open_spooled(input: &InputPath) -> Result<CbfFile<InputBytes>> {
    let spooled = super::spool(input, super::Holding::Binary)?;
    let file = ReopeningFile::kept_open(spooled)?;
    CbfFile::open_ranges(Box::new(file)).map_err(|e| e.in_file(input.display_name()))
}

/// Opens a CBF file at `path` without mapping it (the buffered fallback): the header is read
/// now, each chunk with one positioned read when it is decoded. Errors name the file.
pub fn open_cbf_buffered(path: &Path) -> Result<CbfFile<InputBytes>> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let in_file = |e: Error| e.in_file(path.display().to_string());
    CbfFile::open_ranges(Box::new(ReopeningFile::kept_open(file).map_err(in_file)?))
        .map_err(in_file)
}
