//! The index cache file of a CTF file (`cacheIndex`): `DATA.exfeed-index` beside the data,
//! written atomically after a scan and used instead of scanning when it is valid for the data
//! (length and modification time) and for the indexing parameters.
//!
//! Layout (little-endian): magic "EXFIDX\0\0", u32 format version, u64 chunk size, u8
//! skipSequenceIds, u8 frameMode, u8 key mode (0 ids, 1 lines), u8 0, u64 data length, i64 data
//! mtime seconds, u32 nanoseconds, u64 chunk count, u64 key count, then per chunk six u64
//! (offset, bytes, line, first sequence, sequences, samples), then the keys. Every count is
//! checked against the file's size before anything is allocated.

use super::ctf_source::{Chunk, CtfSourceOptions, Index};
use crate::ctf::KeyMode;
use crate::error::Result;
use crate::io::{AtomicOutput, OutputOptions};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// The index cache file of `data`: `DATA.exfeed-index` beside it.
pub fn index_cache_path(data: &Path) -> PathBuf {
    let mut name = data.as_os_str().to_owned();
    name.push(".exfeed-index");
    PathBuf::from(name)
}

const CACHE_MAGIC: &[u8; 8] = b"EXFIDX\0\0";
const CACHE_VERSION: u32 = 1;
const CACHE_HEADER: u64 = 8 + 4 + 8 + 4 + 8 + 8 + 4 + 8 + 8;
const CHUNK_RECORD: u64 = 6 * 8;

/// The indexing parameters an index depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CacheParams {
    chunk_size: u64,
    skip_ids: bool,
    frame_mode: bool,
}

impl CacheParams {
    pub(super) fn of(o: &CtfSourceOptions) -> Self {
        CacheParams {
            chunk_size: o.chunk_size.max(1),
            skip_ids: o.ctf.skip_sequence_ids,
            frame_mode: o.frame_mode,
        }
    }
}

/// What identifies a version of the data file: its length and modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct DataStamp {
    len: u64,
    secs: i64,
    nanos: u32,
}

impl DataStamp {
    pub(super) fn of(meta: &std::fs::Metadata) -> Self {
        let (secs, nanos) = match meta.modified().map(|t| t.duration_since(UNIX_EPOCH)) {
            Ok(Ok(d)) => (d.as_secs() as i64, d.subsec_nanos()),
            _ => (0, 0),
        };
        DataStamp {
            len: meta.len(),
            secs,
            nanos,
        }
    }
}

/// Writes the index of a data file (as `stamp` describes it) built with `p` to `path`,
/// atomically (a reader never sees a partial cache).
pub(super) fn write(path: &Path, ix: &Index, stamp: DataStamp, p: CacheParams) -> Result<()> {
    // A stale cache is replaced.
    let replace = OutputOptions {
        force: true,
        ..OutputOptions::default()
    };
    let mut out = AtomicOutput::create(path, &replace)?;
    let mut head = Vec::with_capacity(CACHE_HEADER as usize);
    head.extend_from_slice(CACHE_MAGIC);
    head.extend_from_slice(&CACHE_VERSION.to_le_bytes());
    head.extend_from_slice(&p.chunk_size.to_le_bytes());
    head.extend_from_slice(&[
        p.skip_ids as u8,
        p.frame_mode as u8,
        (ix.mode == KeyMode::Lines) as u8,
        0,
    ]);
    head.extend_from_slice(&stamp.len.to_le_bytes());
    head.extend_from_slice(&stamp.secs.to_le_bytes());
    head.extend_from_slice(&stamp.nanos.to_le_bytes());
    head.extend_from_slice(&(ix.chunks.len() as u64).to_le_bytes());
    head.extend_from_slice(&(ix.keys.len() as u64).to_le_bytes());
    out.write_all(&head)?;
    let mut rec = Vec::with_capacity(1 << 16);
    for c in &ix.chunks {
        for v in [
            c.offset,
            c.bytes,
            c.line,
            c.first_sequence,
            c.sequences,
            c.samples,
        ] {
            rec.extend_from_slice(&v.to_le_bytes());
        }
        if rec.len() >= 1 << 16 {
            out.write_all(&rec)?;
            rec.clear();
        }
    }
    for k in &ix.keys {
        rec.extend_from_slice(&k.to_le_bytes());
        if rec.len() >= 1 << 16 {
            out.write_all(&rec)?;
            rec.clear();
        }
    }
    out.write_all(&rec)?;
    out.commit()
}

/// Reads the cache: `Ok(None)` when there is none, `Err(why)` when it cannot be used (older
/// than the data, built with other parameters, for another version of the data, or corrupt:
/// every chunk is checked against the data's length and its neighbours).
pub(super) fn read(
    path: &Path,
    data_meta: &std::fs::Metadata,
    stamp: DataStamp,
    p: CacheParams,
) -> std::result::Result<Option<Index>, String> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let meta = f.metadata().map_err(|e| e.to_string())?;
    let cache_time = meta.modified().unwrap_or(UNIX_EPOCH);
    let data_time = data_meta.modified().unwrap_or(SystemTime::now());
    if cache_time < data_time {
        return Err("it is older than the data".into());
    }
    let len = meta.len();
    if len < CACHE_HEADER {
        return Err("it is truncated".into());
    }
    let mut head = vec![0u8; CACHE_HEADER as usize];
    f.read_exact(&mut head).map_err(|e| e.to_string())?;
    let u64_at = |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8"));
    if &head[..8] != CACHE_MAGIC {
        return Err("it is not an exfeed index".into());
    }
    let version = u32::from_le_bytes(head[8..12].try_into().expect("4"));
    if version != CACHE_VERSION {
        return Err(format!(
            "format version {version}, expected {CACHE_VERSION}"
        ));
    }
    let got = CacheParams {
        chunk_size: u64_at(&head, 12),
        skip_ids: head[20] == 1,
        frame_mode: head[21] == 1,
    };
    if head[20] > 1 || head[21] > 1 || head[22] > 1 || head[23] != 0 {
        return Err("its header is corrupt".into());
    }
    if got != p {
        return Err("it was built with other parameters".into());
    }
    let mode = if head[22] == 1 {
        KeyMode::Lines
    } else {
        KeyMode::Ids
    };
    let got_stamp = DataStamp {
        len: u64_at(&head, 24),
        secs: i64::from_le_bytes(head[32..40].try_into().expect("8")),
        nanos: u32::from_le_bytes(head[40..44].try_into().expect("4")),
    };
    if got_stamp != stamp {
        return Err("the data file has changed since it was built".into());
    }
    let n_chunks = u64_at(&head, 44);
    let n_keys = u64_at(&head, 52);
    let expected = n_chunks
        .checked_mul(CHUNK_RECORD)
        .and_then(|c| n_keys.checked_mul(8).and_then(|k| c.checked_add(k)))
        .and_then(|b| b.checked_add(CACHE_HEADER));
    if expected != Some(len) {
        return Err("its size does not match its counts".into());
    }
    // The size check bounds both counts by the cache file's length.
    let mut body = vec![0u8; (len - CACHE_HEADER) as usize];
    f.read_exact(&mut body).map_err(|e| e.to_string())?;
    let mut chunks = Vec::with_capacity(n_chunks as usize);
    let mut next_seq = 0u64;
    let mut end = 0u64;
    for i in 0..n_chunks as usize {
        let r = &body[i * CHUNK_RECORD as usize..];
        let c = Chunk {
            offset: u64_at(r, 0),
            bytes: u64_at(r, 8),
            line: u64_at(r, 16),
            first_sequence: u64_at(r, 24),
            sequences: u64_at(r, 32),
            samples: u64_at(r, 40),
        };
        let ok = c.offset >= end
            && c.bytes > 0
            && c.offset
                .checked_add(c.bytes)
                .is_some_and(|e| e <= stamp.len)
            && c.line >= 1
            && c.first_sequence == next_seq
            && c.sequences >= 1
            && c.samples >= c.sequences;
        if !ok {
            return Err(format!("chunk {i} is inconsistent"));
        }
        end = c.offset + c.bytes;
        next_seq += c.sequences;
        chunks.push(c);
    }
    if next_seq != n_keys {
        return Err("its key count does not match its chunks".into());
    }
    let keys_at = n_chunks as usize * CHUNK_RECORD as usize;
    let keys = body[keys_at..]
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8")))
        .collect();
    Ok(Some(Index { mode, chunks, keys }))
}
