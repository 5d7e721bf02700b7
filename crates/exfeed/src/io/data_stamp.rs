//! What a saved reader state knows of its data ([`ReaderState::data`](super::ReaderState)): each
//! file's name, length and a checksum of blocks sampled across it, so that a state is refused on
//! other data even when it has the same name, size and first bytes (its chunks and sample count
//! can then agree while its sequences lie elsewhere).
//!
//! The stamp is by content, not by inode or times: a state moves with its data to another
//! machine or a fresh copy (`cp` without `-p`) and is still accepted there. A same-size change
//! that touches none of the sampled blocks is not seen; the blocks are spread evenly from the
//! first to the last byte, 4 KiB each, up to 64 a file (16 MiB for all the files together).

use crate::error::{Error, Result};
use crate::io::InputPath;
use serde::{Deserialize, Serialize};

/// Bytes of one sampled block.
const BLOCK: u64 = 4096;
/// The most blocks sampled from one file.
const MOST_BLOCKS: u64 = 64;
/// The most bytes sampled from all the files together.
const MOST_BYTES: u64 = 16 << 20;

/// One data file as a saved state knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStamp {
    /// The file's name, without its directory (a state moves with its data).
    pub name: String,
    /// Its length in bytes.
    pub len: u64,
    /// A checksum (hexadecimal) of its sampled blocks.
    pub sampled: String,
}

/// The stamps of `files`; standard input, which cannot be read again, has none.
pub(crate) fn stamps(files: &[InputPath]) -> Result<Vec<FileStamp>> {
    let per_file = (MOST_BYTES / BLOCK / files.len().max(1) as u64).clamp(2, MOST_BLOCKS);
    let mut out = Vec::with_capacity(files.len());
    for input in files {
        let stamp = match input {
            InputPath::File(path) => {
                let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
                let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
                let sampled = sample(len, per_file, |at, buf| {
                    crate::io::read_exact_at(&file, buf, at).map_err(|e| Error::io(path, e))
                })?;
                stamp(path.file_name().map(|n| n.to_string_lossy()), len, sampled)
            }
            InputPath::Url(url) => {
                let object = crate::io::RemoteFile::open(url)?;
                let len = object.len();
                let sampled = sample(len, per_file, |at, buf| object.read_exact_at(buf, at))?;
                stamp(Some(url.file_name().into()), len, sampled)
            }
            InputPath::Memory { name, bytes } => {
                let len = bytes.len() as u64;
                let sampled = sample(len, per_file, |at, buf| {
                    buf.copy_from_slice(&bytes[at as usize..at as usize + buf.len()]);
                    Ok(())
                })?;
                stamp(Some(name.as_ref().into()), len, sampled)
            }
            InputPath::Stdin => continue,
        };
        out.push(stamp);
    }
    Ok(out)
}

fn stamp(name: Option<std::borrow::Cow<'_, str>>, len: u64, sampled: u64) -> FileStamp {
    FileStamp {
        name: name.map(|n| n.into_owned()).unwrap_or_default(),
        len,
        sampled: format!("{sampled:016x}"),
    }
}

/// The checksum of `blocks` blocks spread evenly over `len` bytes (all of them when they are
/// fewer), each read by `read(offset, buffer)`.
fn sample(
    len: u64,
    blocks: u64,
    mut read: impl FnMut(u64, &mut [u8]) -> Result<()>,
) -> Result<u64> {
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; BLOCK as usize];
    let starts: Vec<u64> = if len <= BLOCK * blocks {
        (0..len.div_ceil(BLOCK)).map(|i| i * BLOCK).collect()
    } else {
        let last = len - BLOCK;
        (0..blocks).map(|i| last / (blocks - 1) * i).collect()
    };
    for at in starts {
        let n = BLOCK.min(len - at) as usize;
        read(at, &mut buf[..n])?;
        bytes.extend_from_slice(&buf[..n]);
    }
    Ok(checksum(&bytes))
}

/// What differs between the data a state was saved on (`saved`) and this reader's (`now`), if
/// anything.
pub(crate) fn difference(saved: &[FileStamp], now: &[FileStamp]) -> Option<String> {
    if saved.len() != now.len() {
        return Some(format!(
            "it was saved on {} data files, this reader has {}",
            saved.len(),
            now.len()
        ));
    }
    let (was, is) = saved.iter().zip(now).find(|(was, is)| was != is)?;
    Some(if was.len != is.len {
        format!(
            "data file {} is {} bytes long, {} when the state was saved",
            is.name, is.len, was.len
        )
    } else if was.name != is.name {
        format!(
            "data file {} was {} when the state was saved",
            is.name, was.name
        )
    } else {
        format!(
            "data file {} has other contents than when the state was saved (the same size, \
             other bytes)",
            is.name
        )
    })
}

/// 64-bit FNV-1a: every step is a bijection of the state for a given byte, so any single
/// changed byte changes the sum.
pub(crate) fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}
