//! The index cache file of a CTF file (`cacheIndex`): `DATA.exfeed-index` beside the data,
//! written atomically after a scan and used instead of scanning when it is valid for the data
//! (see [`DataStamp`]) and for the indexing parameters.
//!
//! Layout (little-endian), format version 3: magic "EXFIDX\0\0", u32 format version, u64 chunk
//! size, u8 skipSequenceIds, u8 frameMode, u8 key mode (0 ids, 1 lines), u8 0, u64 data length,
//! i64 data mtime seconds, u32 nanoseconds, i64 data ctime seconds, u32 nanoseconds, u64 inode,
//! u64 chunk count, u64 key count, then per chunk six
//! u64 (offset, bytes, line, first sequence, sequences, samples), then the keys, then a 64-bit
//! FNV-1a checksum of every byte before it.
//!
//! Nothing in a cache is trusted: the checksum catches any damage (a flipped bit in a record, a
//! shifted offset), every count is checked against the file's size before anything is
//! allocated, the records are checked against each other and against the data's length, and
//! [`check_line_starts`] checks that every chunk starts at a line start of the data. A cache
//! that fails any check is not used: the file is indexed again and the cache replaced.

use super::index::{Chunk, Index};
use crate::ctf::{KeyMode, BOM};
use crate::error::Result;
use crate::io::checksum;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

const MAGIC: &[u8; 8] = b"EXFIDX\0\0";
const VERSION: u32 = 3;
const HEADER: u64 = 8 + 4 + 8 + 4 + 8 + 8 + 4 + 8 + 4 + 8 + 8 + 8;
const CHUNK_RECORD: u64 = 6 * 8;
const CHECKSUM: u64 = 8;

/// The index cache file of `data`: `DATA.exfeed-index` beside it.
pub fn index_cache_path(data: &Path) -> PathBuf {
    let mut name = data.as_os_str().to_owned();
    name.push(".exfeed-index");
    PathBuf::from(name)
}

/// The indexing parameters an index depends on; a cache built with others is not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CacheParams {
    chunk_size: u64,
    skip_ids: bool,
    frame_mode: bool,
}

impl CacheParams {
    pub(super) fn new(chunk_size: u64, skip_ids: bool, frame_mode: bool) -> Self {
        CacheParams {
            chunk_size: chunk_size.max(1),
            skip_ids,
            frame_mode,
        }
    }
}

/// The data file as it was when the index was built: a cache for another state is stale.
///
/// Length and modification time are kept by a same-size rewrite that sets the old mtime again
/// (`cp -p` over the file, `rsync --times`, an archive made with a fixed mtime extracted over
/// it), so the inode-change time (ctime) is kept too: every write, and setting the mtime
/// itself, sets it to the current time, and no program can set it back. The inode number
/// catches a file replaced by another (a rename over it) on file systems whose ctime is coarse.
/// Copying the data with its cache elsewhere changes both: the copy is indexed again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct DataStamp {
    len: u64,
    secs: i64,
    nanos: u32,
    changed_secs: i64,
    changed_nanos: u32,
    inode: u64,
}

impl DataStamp {
    /// A remote object of `len` bytes: its version is in the cache's key (its ETag), so only
    /// its length is recorded here.
    pub(super) fn of_object(len: u64) -> Self {
        DataStamp {
            len,
            secs: 0,
            nanos: 0,
            changed_secs: 0,
            changed_nanos: 0,
            inode: 0,
        }
    }

    pub(super) fn of(meta: &std::fs::Metadata) -> Self {
        let (secs, nanos) = match meta.modified().map(|t| t.duration_since(UNIX_EPOCH)) {
            Ok(Ok(d)) => (d.as_secs() as i64, d.subsec_nanos()),
            _ => (0, 0),
        };
        #[cfg(unix)]
        let (changed_secs, changed_nanos, inode) = {
            use std::os::unix::fs::MetadataExt;
            (meta.ctime(), meta.ctime_nsec() as u32, meta.ino())
        };
        #[cfg(not(unix))]
        let (changed_secs, changed_nanos, inode) = (0, 0, 0);
        DataStamp {
            len: meta.len(),
            secs,
            nanos,
            changed_secs,
            changed_nanos,
            inode,
        }
    }
}

/// The cache file's bytes for `ix`.
pub(super) fn encode(ix: &Index, stamp: DataStamp, p: CacheParams) -> Vec<u8> {
    let mut out = Vec::with_capacity(
        (HEADER + CHUNK_RECORD * ix.chunks.len() as u64 + 8 * ix.keys.len() as u64 + CHECKSUM)
            as usize,
    );
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&p.chunk_size.to_le_bytes());
    out.extend_from_slice(&[
        p.skip_ids as u8,
        p.frame_mode as u8,
        (ix.mode == KeyMode::Lines) as u8,
        0,
    ]);
    out.extend_from_slice(&stamp.len.to_le_bytes());
    out.extend_from_slice(&stamp.secs.to_le_bytes());
    out.extend_from_slice(&stamp.nanos.to_le_bytes());
    out.extend_from_slice(&stamp.changed_secs.to_le_bytes());
    out.extend_from_slice(&stamp.changed_nanos.to_le_bytes());
    out.extend_from_slice(&stamp.inode.to_le_bytes());
    out.extend_from_slice(&(ix.chunks.len() as u64).to_le_bytes());
    out.extend_from_slice(&(ix.keys.len() as u64).to_le_bytes());
    for c in &ix.chunks {
        for v in [
            c.offset,
            c.bytes,
            c.line,
            c.first_sequence,
            c.sequences,
            c.samples,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    for k in &ix.keys {
        out.extend_from_slice(&k.to_le_bytes());
    }
    let sum = checksum(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// Writes the cache through a temporary file and a rename (a damaged cache is replaced whole).
pub(super) fn write(path: &Path, ix: &Index, stamp: DataStamp, p: CacheParams) -> Result<()> {
    // A stale or damaged cache is replaced.
    crate::io::replace_file(path, &encode(ix, stamp, p))
}

/// Reads the cache: `Ok(None)` when there is none, `Err(why)` when it cannot be used.
pub(super) fn read(
    path: &Path,
    data_meta: &std::fs::Metadata,
    stamp: DataStamp,
    p: CacheParams,
) -> std::result::Result<Option<Index>, String> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let cache_time = meta.modified().unwrap_or(UNIX_EPOCH);
    let data_time = data_meta.modified().unwrap_or(SystemTime::now());
    if cache_time < data_time {
        return Err("it is older than the data".into());
    }
    // A cache holds at most a header, a record and a key per line of the data, and a sum.
    let bound = HEADER + CHECKSUM + stamp.len.saturating_mul(CHUNK_RECORD + 8);
    if meta.len() > bound {
        return Err("it is larger than an index of the data can be".into());
    }
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    decode(&bytes, stamp, p).map(Some)
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"))
}

/// The data stamp in a cache's header `head`.
fn stamp_at(head: &[u8]) -> DataStamp {
    DataStamp {
        len: u64_at(head, 24),
        secs: i64::from_le_bytes(head[32..40].try_into().expect("8 bytes")),
        nanos: u32::from_le_bytes(head[40..44].try_into().expect("4 bytes")),
        changed_secs: i64::from_le_bytes(head[44..52].try_into().expect("8 bytes")),
        changed_nanos: u32::from_le_bytes(head[52..56].try_into().expect("4 bytes")),
        inode: u64_at(head, 56),
    }
}

/// Decodes and checks a cache's bytes for data in state `stamp`, indexed with `p`.
pub(super) fn decode(
    bytes: &[u8],
    stamp: DataStamp,
    p: CacheParams,
) -> std::result::Result<Index, String> {
    let len = bytes.len() as u64;
    if len < HEADER + CHECKSUM {
        return Err("it is truncated".into());
    }
    if &bytes[..8] != MAGIC {
        return Err("it is not an exfeed index".into());
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(format!("format version {version}, expected {VERSION}"));
    }
    let (body, sum) = bytes.split_at(bytes.len() - CHECKSUM as usize);
    if checksum(body) != u64_at(sum, 0) {
        return Err("its checksum does not match: it is damaged".into());
    }
    let head = &body[..HEADER as usize];
    if head[20] > 1 || head[21] > 1 || head[22] > 1 || head[23] != 0 {
        return Err("its header is corrupt".into());
    }
    let got = CacheParams {
        chunk_size: u64_at(head, 12),
        skip_ids: head[20] == 1,
        frame_mode: head[21] == 1,
    };
    if got != p {
        return Err("it was built with other parameters".into());
    }
    let mode = if head[22] == 1 {
        KeyMode::Lines
    } else {
        KeyMode::Ids
    };
    if stamp_at(head) != stamp {
        return Err("the data file has changed since it was built".into());
    }
    let n_chunks = u64_at(head, 64);
    let n_keys = u64_at(head, 72);
    let expected = n_chunks
        .checked_mul(CHUNK_RECORD)
        .and_then(|c| n_keys.checked_mul(8).and_then(|k| c.checked_add(k)))
        .and_then(|b| b.checked_add(HEADER + CHECKSUM));
    if expected != Some(len) {
        return Err("its size does not match its counts".into());
    }
    // The size check bounds both counts by the cache's length: no allocation beyond it.
    let records = &body[HEADER as usize..];
    let mut chunks = Vec::with_capacity(n_chunks as usize);
    let (mut next_seq, mut end, mut line) = (0u64, 0u64, 0u64);
    for i in 0..n_chunks as usize {
        let r = &records[i * CHUNK_RECORD as usize..];
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
            && c.line > line
            && c.line - 1 <= c.offset
            && c.first_sequence == next_seq
            && c.sequences >= 1
            && c.sequences <= n_keys - next_seq
            && c.samples >= c.sequences;
        if !ok {
            return Err(format!("chunk {i} is inconsistent"));
        }
        end = c.offset + c.bytes;
        line = c.line;
        next_seq += c.sequences;
        chunks.push(c);
    }
    if next_seq != n_keys {
        return Err("its key count does not match its chunks".into());
    }
    let keys = records[n_chunks as usize * CHUNK_RECORD as usize..]
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect();
    Ok(Index { mode, chunks, keys })
}

/// Checks that every chunk starts at a line start of the data: `before(offset)` gives the
/// byte before `offset` (offset >= 1), `start` the data's first bytes (for a BOM).
pub(super) fn check_line_starts(
    ix: &Index,
    start: &[u8],
    mut before: impl FnMut(u64) -> std::io::Result<u8>,
) -> std::result::Result<(), String> {
    for (i, c) in ix.chunks.iter().enumerate() {
        let at_bom_end = c.offset == BOM.len() as u64 && start.starts_with(BOM);
        if c.offset > 0 && !at_bom_end && before(c.offset).map_err(|e| e.to_string())? != b'\n' {
            return Err(format!("chunk {i} does not start at a line start"));
        }
    }
    Ok(())
}

/// For the fuzz target: decodes `bytes` as a cache for the data state and parameters its own
/// header names; what decodes must encode back to the same bytes.
#[cfg(fuzzing)]
pub fn fuzz_decode(bytes: &[u8]) {
    if bytes.len() < HEADER as usize {
        return;
    }
    let stamp = stamp_at(bytes);
    let p = CacheParams {
        chunk_size: u64_at(bytes, 12),
        skip_ids: bytes[20] == 1,
        frame_mode: bytes[21] == 1,
    };
    let _ = decode(bytes, stamp, p);
    // With its checksum made right, so the fuzzer reaches the structural checks.
    let mut fixed = bytes.to_vec();
    if let Some(n) = fixed.len().checked_sub(CHECKSUM as usize) {
        let sum = checksum(&fixed[..n]);
        fixed[n..].copy_from_slice(&sum.to_le_bytes());
    }
    if let Ok(ix) = decode(&fixed, stamp, p) {
        assert_eq!(encode(&ix, stamp, p), fixed, "a decoded cache encodes back");
        let _ = check_line_starts(&ix, &fixed, |o| Ok(fixed[(o as usize - 1) % fixed.len()]));
    }
}
