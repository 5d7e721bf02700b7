//! [`CtfSource`]: a CTF file as a [`ChunkSource`].

use super::chunker::{Chunker, SequenceSpan};
use super::index_cache::{self, index_cache_path, CacheParams, DataStamp};
use super::{ChunkInfo, ChunkSource};
use crate::batch::SequenceBatch;
use crate::ctf::{detect_key_mode, scan_sequences, CtfOptions, CtfParser, KeyMode};
use crate::element::Element;
use crate::error::{Diagnostic, Error, Location, Result, Severity};
use crate::io::{open_bytes_as, Holding, InputBytes, InputPath};
use crate::stream::StreamSpec;
use std::fs::File;
use std::sync::{Arc, Mutex};

/// Options of a [`CtfSource`]: the parsing options plus CNTK's indexing parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtfSourceOptions {
    /// Inputs, `skipSequenceIds`, `maxErrors`.
    pub ctf: CtfOptions,
    /// `chunkSizeInBytes`.
    pub chunk_size: u64,
    /// `keepDataInMemory`: read the whole file into memory at open.
    pub keep_in_memory: bool,
    /// `frameMode` (recorded in the index cache).
    pub frame_mode: bool,
    /// `cacheIndex`.
    pub cache_index: bool,
}

impl Default for CtfSourceOptions {
    fn default() -> Self {
        CtfSourceOptions {
            ctf: CtfOptions::default(),
            chunk_size: crate::config::DEFAULT_CHUNK_SIZE_BYTES,
            keep_in_memory: false,
            frame_mode: false,
            cache_index: false,
        }
    }
}

/// A chunk of the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Chunk {
    /// Byte offset of its first sequence.
    pub(super) offset: u64,
    /// Its length in bytes.
    pub(super) bytes: u64,
    /// 1-based line of its first sequence.
    pub(super) line: u64,
    /// Index of its first sequence in the file.
    pub(super) first_sequence: u64,
    /// Number of sequences.
    pub(super) sequences: u64,
    /// Samples by the index (lines, or one a sequence in frame mode).
    pub(super) samples: u64,
}

/// The index of a CTF file: its chunks and every sequence's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Index {
    /// How sequences are keyed (by id, or one a line).
    pub(super) mode: KeyMode,
    /// The chunks, in file order.
    pub(super) chunks: Vec<Chunk>,
    /// Every sequence's key, in file order.
    pub(super) keys: Vec<u64>,
}

enum Data {
    File(File),
    Memory(InputBytes),
}

impl Data {
    /// Whether every chunk of `ix` starts at a line start of this data (see
    /// [`index_cache::check_line_starts`]).
    fn check_line_starts(&self, ix: &Index) -> std::result::Result<(), String> {
        match self {
            Data::File(f) => {
                let mut start = [0u8; 3];
                let n = crate::io::read_at_most(f, &mut start, 0).unwrap_or(0);
                index_cache::check_line_starts(ix, &start[..n], |offset| {
                    let mut b = [0u8; 1];
                    crate::io::read_exact_at(f, &mut b, offset - 1).map(|()| b[0])
                })
            }
            Data::Memory(bytes) => index_cache::check_line_starts(ix, bytes, |offset| {
                bytes.get(offset as usize - 1).copied().ok_or_else(|| {
                    std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "past the end")
                })
            }),
        }
    }
}

/// Where the index came from when a [`CtfSource`] was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexOrigin {
    /// Built by scanning the file (and not cached).
    Scanned,
    /// Built by scanning the file and written to the cache.
    ScannedAndCached,
    /// Read from the cache file.
    Cache,
}

/// A CTF file as a [`ChunkSource`].
///
/// Opening it makes one indexing pass ([`scan_sequences`], memchr speed) over the file, read in
/// blocks so only a block (or one sequence, if larger) is in memory; whole sequences are grouped
/// into chunks of about `chunkSizeInBytes`. Decoding a chunk reads just its byte
/// range (`pread`) and parses it with a fresh [`CtfParser`] at the chunk's true byte offset and
/// line, so every error names its real place in the file. A compressed file cannot be read by
/// offset: it is decompressed once, at open, into an unlinked temporary file (in `TMPDIR`: disk
/// for its decompressed size, memory for a buffer) that is then read as a plain file. Standard
/// input, and any file with `keepDataInMemory`, is held in memory.
///
/// Each chunk is parsed independently (in parallel), so `maxErrors` applies per chunk and a
/// sequence id repeated in two different chunks is not detected (both are kept).
///
/// With `cacheIndex` the index is stored beside the file (`FILE.exfeed-index`, see
/// [`index_cache_path`]) and reused when it is valid; see [`CtfSource::open`].
pub struct CtfSource {
    name: Arc<str>,
    specs: Vec<StreamSpec>,
    parser: CtfParser,
    data: Data,
    index: Index,
    infos: Vec<ChunkInfo>,
    origin: IndexOrigin,
    diagnostics: Mutex<Vec<Diagnostic>>,
}

/// Read buffers for reuse, shared by every CTF source (fresh ones would cost a page fault per
/// 4 KiB on every chunk). One pool for the process, not one per source: a corpus of thousands
/// of shards keeps at most [`KEPT_BUFFERS`] chunks' worth, not a chunk per shard.
static BUFFERS: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
/// Buffers kept in [`BUFFERS`] (about one per decoding thread).
const KEPT_BUFFERS: usize = 8;

/// Diagnostics kept per source (the rest are counted only).
const MAX_KEPT_DIAGNOSTICS: usize = 1000;
/// Bytes read per block while indexing (small enough to stay in the cache while scanned).
const SCAN_BLOCK: usize = 4 << 20;

impl CtfSource {
    /// Opens and indexes `input`. With `cache_index` and a file path, a valid cache beside the
    /// file is used instead of scanning; a cache is valid when it is newer than the data file,
    /// records the data file's current size and modification time, was built with the same
    /// chunk size, `skipSequenceIds`, `frameMode` and cache format version, and passes every
    /// consistency check. Otherwise the file is scanned and the cache (re)written through a
    /// temporary file and a rename; a stale or corrupt cache is reported as a warning
    /// ([`CtfSource::diagnostics`]). Failing to write the cache is a warning too.
    ///
    /// ```
    /// use exfeed::ctf::CtfOptions;
    /// use exfeed::io::InputPath;
    /// use exfeed::reader::{ChunkSource, CtfSource, CtfSourceOptions, IndexOrigin};
    /// use exfeed::SequenceBatch;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("three.ctf");
    /// std::fs::write(&path, "0 |x 1 2\n0 |x 3 4\n1 |x 5 6\n2 |x 7 8\n")?;
    /// let options = CtfSourceOptions {
    ///     ctf: CtfOptions { inputs: vec!["x:dense:2".parse()?], ..CtfOptions::default() },
    ///     chunk_size: 20, // bytes: the sequences go into chunks of about this size
    ///     cache_index: true,
    ///     ..CtfSourceOptions::default()
    /// };
    /// let source = CtfSource::open(&InputPath::new(&path), options.clone())?;
    /// assert_eq!(source.index_origin(), IndexOrigin::ScannedAndCached);
    /// let chunks = ChunkSource::<f32>::chunks(&source);
    /// assert_eq!(chunks.iter().map(|c| c.sequences).sum::<usize>(), 3);
    /// // Any chunk decodes on its own, at its place in the file.
    /// let mut batch = SequenceBatch::<f32>::new(&options.ctf.inputs);
    /// source.read_chunk(chunks.len() - 1, &mut batch)?;
    /// assert_eq!(batch.keys().last(), Some(&2));
    /// // Opened again, the index comes from the cache beside the file.
    /// let again = CtfSource::open(&InputPath::new(&path), options)?;
    /// assert_eq!(again.index_origin(), IndexOrigin::Cache);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(input: &InputPath, options: CtfSourceOptions) -> Result<Self> {
        let name: Arc<str> = input.display_name().into();
        let mut parser = CtfParser::new(options.ctf.clone())?;
        parser.set_file_name(name.clone());
        let mut warnings = Vec::new();
        let warn = |warnings: &mut Vec<Diagnostic>, message: String| {
            warnings.push(Diagnostic {
                severity: Severity::Warning,
                location: Location::default().with_file(name.clone()),
                message,
            })
        };
        let params = CacheParams::of(&options);
        let plain_file = match input {
            InputPath::File(path) => {
                let file = File::open(path).map_err(|e| Error::io(path, e))?;
                let mut head = [0u8; 4];
                let n = crate::io::read_at_most(&file, &mut head, 0).unwrap_or(0);
                let compressed =
                    crate::io::Compression::sniff(&head[..n]) != crate::io::Compression::None;
                (!compressed).then(|| (path.clone(), file))
            }
            InputPath::Stdin | InputPath::Memory { .. } => None,
        };
        let (data, index, origin) = match plain_file {
            Some((path, file)) => {
                let meta = file.metadata().map_err(|e| Error::io(&path, e))?;
                let stamp = DataStamp::of(&meta);
                let cache = index_cache_path(&path);
                let mut from_cache = None;
                if options.cache_index {
                    match index_cache::read(&cache, &meta, stamp, params) {
                        Ok(Some(ix)) => from_cache = Some(ix),
                        Ok(None) => {}
                        Err(why) => warn(
                            &mut warnings,
                            format!(
                                "index cache {} not used ({why}); re-indexing",
                                cache.display()
                            ),
                        ),
                    }
                }
                let data = if options.keep_in_memory {
                    Data::Memory(InputBytes::Owned(
                        std::fs::read(&path).map_err(|e| Error::io(&path, e))?,
                    ))
                } else {
                    Data::File(file)
                };
                if let Some(ix) = &from_cache {
                    if let Err(why) = data.check_line_starts(ix) {
                        warn(
                            &mut warnings,
                            format!(
                                "index cache {} not used ({why}); re-indexing",
                                cache.display()
                            ),
                        );
                        from_cache = None;
                    }
                }
                match from_cache {
                    Some(ix) => (data, ix, IndexOrigin::Cache),
                    None => {
                        let ix = match &data {
                            Data::Memory(b) => index_buffer(b, &options),
                            Data::File(f) => index_file(f, &options, SCAN_BLOCK),
                        }
                        .map_err(|e| e.in_file(name.clone()))?;
                        let mut origin = IndexOrigin::Scanned;
                        if options.cache_index {
                            match index_cache::write(&cache, &ix, stamp, params) {
                                Ok(()) => origin = IndexOrigin::ScannedAndCached,
                                Err(e) => warn(
                                    &mut warnings,
                                    format!("could not write the index cache: {e}"),
                                ),
                            }
                        }
                        (data, ix, origin)
                    }
                }
            }
            // A compressed file: decompressed once into a temporary file, then read by offset
            // as a plain one, so memory holds chunks, not the file.
            None if matches!(input, InputPath::File(_)) && !options.keep_in_memory => {
                let spooled = crate::io::spool(input, Holding::CtfText(options.ctf.limits))?;
                let ix = index_file(&spooled, &options, SCAN_BLOCK)
                    .map_err(|e| e.in_file(name.clone()))?;
                (Data::File(spooled), ix, IndexOrigin::Scanned)
            }
            None => {
                let bytes = open_bytes_as(input, Holding::CtfText(options.ctf.limits))?;
                let ix = index_buffer(&bytes, &options).map_err(|e| e.in_file(name.clone()))?;
                (Data::Memory(bytes), ix, IndexOrigin::Scanned)
            }
        };
        if index.chunks.is_empty() {
            // As when the file is read as a stream: no data lines is an error, so an empty
            // pipe, FIFO or device (/dev/null) is not read silently as no data.
            return Err(parser.empty_file());
        }
        let infos = index
            .chunks
            .iter()
            .map(|c| ChunkInfo {
                sequences: c.sequences as usize,
                samples: c.samples,
                bytes: c.bytes,
            })
            .collect();
        Ok(CtfSource {
            name,
            specs: options.ctf.inputs.clone(),
            parser,
            data,
            index,
            infos,
            origin,
            diagnostics: Mutex::new(warnings),
        })
    }

    /// Where the index came from.
    pub fn index_origin(&self) -> IndexOrigin {
        self.origin
    }

    /// Total number of sequences by the index.
    pub fn num_sequences(&self) -> usize {
        self.index.keys.len()
    }

    /// Warnings and errors tolerated so far (index cache problems, bad samples skipped under
    /// `maxErrors`, ...); the first 1000 are kept.
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        self.diagnostics
            .lock()
            .map(|d| d.clone())
            .unwrap_or_default()
    }

    /// The file's name as used in messages.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl<T: Element> ChunkSource<T> for CtfSource {
    fn streams(&self) -> &[StreamSpec] {
        &self.specs
    }

    fn chunks(&self) -> &[ChunkInfo] {
        &self.infos
    }

    fn read_chunk(&self, chunk: usize, out: &mut SequenceBatch<T>) -> Result<()> {
        let Some(c) = self.index.chunks.get(chunk) else {
            return Err(Error::config(format!("chunk {chunk} does not exist")));
        };
        let mut owned = Vec::new();
        let map;
        let buf: &[u8] = match &self.data {
            Data::Memory(b) => {
                let end = usize::try_from(c.offset + c.bytes)
                    .ok()
                    .filter(|&e| e <= b.len())
                    .ok_or_else(|| Error::corrupt(c.offset, "chunk beyond the end of the data"))?;
                &b[c.offset as usize..end]
            }
            Data::File(f) => {
                let len = usize::try_from(c.bytes)
                    .map_err(|_| Error::corrupt(c.offset, "chunk too large"))?;
                let io_error = |e: std::io::Error| {
                    Error::from(e)
                        .in_file(self.name.clone())
                        .in_context(format!("reading chunk {chunk} (has the file changed?)"))
                };
                // Map just this chunk's pages (no copy; unmapped when done, so memory stays
                // bounded by the chunks being decoded); read it if mapping fails.
                let page = 4096u64;
                let start = c.offset / page * page;
                let skip = (c.offset - start) as usize;
                let size = f.metadata().map(|m| m.len()).unwrap_or(0);
                // SAFETY: a read-only private map of a range checked against the file's size;
                // a file truncated by another process meanwhile is outside what any reader can
                // defend against (as for every mmap user).
                let mapped = (c.offset + c.bytes <= size)
                    .then(|| unsafe {
                        memmap2::MmapOptions::new()
                            .offset(start)
                            .len(skip + len)
                            .populate()
                            .map(f)
                    })
                    .and_then(|m| m.ok());
                match mapped {
                    Some(m) => {
                        map = m;
                        &map[skip..skip + len]
                    }
                    None => {
                        owned = BUFFERS
                            .lock()
                            .ok()
                            .and_then(|mut b| b.pop())
                            .unwrap_or_default();
                        owned.clear();
                        owned.resize(len, 0);
                        crate::io::read_exact_at(f, &mut owned, c.offset).map_err(io_error)?;
                        &owned
                    }
                }
            }
        };
        let mut parser = self.parser.clone();
        let mut sink: Vec<Diagnostic> = Vec::new();
        let r = parser.parse_chunk(buf, c.offset, c.line, self.index.mode, out, &mut sink);
        if !sink.is_empty() {
            if let Ok(mut d) = self.diagnostics.lock() {
                let room = MAX_KEPT_DIAGNOSTICS.saturating_sub(d.len());
                d.extend(sink.into_iter().take(room));
            }
        }
        if owned.capacity() > 0 {
            if let Ok(mut b) = BUFFERS.lock() {
                if b.len() < KEPT_BUFFERS {
                    b.push(owned);
                }
            }
        }
        r
    }

    fn chunk_keys(&self, chunk: usize) -> Option<Vec<u64>> {
        let c = self.index.chunks.get(chunk)?;
        let start = c.first_sequence as usize;
        self.index
            .keys
            .get(start..start + c.sequences as usize)
            .map(<[u64]>::to_vec)
    }
}

/// Builds the index from sequences found in file order.
struct IndexBuilder {
    chunker: Chunker,
    lines: Vec<u64>,
    keys: Vec<u64>,
    frame_mode: bool,
}

impl IndexBuilder {
    fn new(options: &CtfSourceOptions) -> Self {
        IndexBuilder {
            chunker: Chunker::new(options.chunk_size),
            lines: Vec::new(),
            keys: Vec::new(),
            frame_mode: options.frame_mode,
        }
    }

    fn push(&mut self, e: crate::ctf::SequenceExtent) {
        // Samples by the index: a sequence has as many samples as lines (the exact count per
        // input is known only after parsing).
        let samples = if self.frame_mode { 1 } else { e.lines };
        self.chunker.push(SequenceSpan {
            offset: e.offset,
            bytes: e.len as u64,
            samples,
        });
        self.keys.push(e.key);
        self.lines.push(e.line);
    }

    fn finish(self, mode: KeyMode) -> Index {
        let lines = self.lines;
        let chunks = self
            .chunker
            .finish()
            .into_iter()
            .map(|c| Chunk {
                offset: c.offset,
                bytes: c.bytes,
                line: lines[c.first_sequence],
                first_sequence: c.first_sequence as u64,
                sequences: c.sequences as u64,
                samples: c.samples,
            })
            .collect();
        Index {
            mode,
            chunks,
            keys: self.keys,
        }
    }
}

fn index_buffer(buf: &[u8], options: &CtfSourceOptions) -> Result<Index> {
    let Some(mode) = detect_key_mode(buf, options.ctf.skip_sequence_ids) else {
        return Ok(Index {
            mode: KeyMode::Lines,
            chunks: Vec::new(),
            keys: Vec::new(),
        });
    };
    let mut b = IndexBuilder::new(options);
    scan_sequences(buf, 0, 1, mode, |e| {
        options.ctf.limits.check_sequence(&e)?;
        b.push(e);
        Ok(())
    })
    .map_err(|e| e.resolve_in(buf, 0, 1))?;
    Ok(b.finish(mode))
}

/// Scans a file in blocks read into one reused buffer (4 MiB blocks stay in the cache while
/// they are scanned: this measured faster than mapping them). The last sequence found in a
/// block may continue in the next one, so it is read again from its start with the next block
/// (twice as large when that sequence is all the block held, up to the maximum record size).
fn index_file(file: &File, options: &CtfSourceOptions, block: usize) -> Result<Index> {
    let limits = options.ctf.limits;
    let mut b = IndexBuilder::new(options);
    let len = file.metadata()?.len();
    let block = block.max(1) as u64;
    let mut buf: Vec<u8> = Vec::new();
    let mut pos = 0u64; // file offset of the block
    let mut line = 1u64; // line number at `pos`
    let mut want = block;
    let mut mode = None;
    let mut found = Vec::new();
    loop {
        let end = pos.saturating_add(want).min(len);
        let n = usize::try_from(end - pos).map_err(|_| Error::corrupt(pos, "block too large"))?;
        // Grown (zeroed) only when a block is larger than any before.
        buf.resize(n, 0);
        let got = crate::io::read_at_most(file, &mut buf, pos)?;
        let bytes = &buf[..got];
        let eof = end == len || bytes.len() < n;
        if mode.is_none() {
            mode = detect_key_mode(bytes, options.ctf.skip_sequence_ids);
            if mode.is_none() {
                if eof {
                    break;
                }
                want = want.saturating_mul(2);
                continue;
            }
        }
        let mode = mode.expect("set above");
        let scan_end = if eof {
            bytes.len()
        } else {
            match memchr::memrchr(b'\n', bytes) {
                Some(i) => i + 1,
                None if bytes.len() as u64 > limits.max_record_bytes => {
                    // One line fills the block: the sequence at `pos` is too long.
                    return Err(limits.sequence_too_long(pos).resolve_in(bytes, pos, line));
                }
                None => {
                    want = want.saturating_mul(2);
                    continue;
                }
            }
        };
        found.clear();
        scan_sequences(&bytes[..scan_end], pos, line, mode, |e| {
            limits.check_sequence(&e)?;
            found.push(e);
            Ok(())
        })
        .map_err(|e| e.resolve_in(&bytes[..scan_end], pos, line))?;
        if eof {
            found.drain(..).for_each(|e| b.push(e));
            break;
        }
        let next = if let Some(last) = found.pop() {
            found.drain(..).for_each(|e| b.push(e));
            line = last.line;
            last.offset
        } else {
            line += memchr::memchr_iter(b'\n', &bytes[..scan_end]).count() as u64;
            pos + scan_end as u64
        };
        want = if next == pos {
            want.saturating_mul(2)
        } else {
            block
        };
        pos = next;
    }
    Ok(b.finish(mode.unwrap_or(KeyMode::Lines)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::Storage;
    use std::path::PathBuf;

    const DATA: &str =
        "\n1 |a 1 2 |b 0:1\n1 |a 3 4\n|a 5 6\n2 |a 7 8 |b 1:2\n7 |a 9 9 |b 2:3\n7 |a 1 1\n3 |b 2:1 |a 0 0\n";

    fn opts(chunk: u64) -> CtfSourceOptions {
        CtfSourceOptions {
            ctf: CtfOptions {
                inputs: vec![
                    StreamSpec::new("a", Storage::Dense, 2),
                    StreamSpec::new("b", Storage::Sparse, 3),
                ],
                skip_sequence_ids: false,
                max_errors: 0,
                ..CtfOptions::default()
            },
            chunk_size: chunk,
            ..Default::default()
        }
    }

    fn write(dir: &tempfile::TempDir, text: &str) -> PathBuf {
        let p = dir.path().join("d.ctf");
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn block_scan_equals_whole_buffer_scan() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(&dir, DATA);
        let f = File::open(&p).unwrap();
        for chunk in [1, 20, 40, 1000] {
            let whole = index_buffer(DATA.as_bytes(), &opts(chunk)).unwrap();
            assert_eq!(whole.keys, vec![1, 2, 7, 3]);
            for block in [1, 2, 5, 13, 64, 4096] {
                assert_eq!(
                    index_file(&f, &opts(chunk), block).unwrap(),
                    whole,
                    "{chunk} {block}"
                );
            }
        }
    }

    #[test]
    fn chunks_decode_to_the_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(&dir, DATA);
        let mut whole = SequenceBatch::<f32>::new(&opts(1).ctf.inputs);
        crate::ctf::parse(DATA.as_bytes(), &opts(1).ctf, &mut whole, &mut Vec::new()).unwrap();
        for keep in [false, true] {
            let o = CtfSourceOptions {
                keep_in_memory: keep,
                ..opts(30)
            };
            let src = CtfSource::open(&InputPath::new(&p), o).unwrap();
            let n = ChunkSource::<f32>::chunks(&src).len();
            assert!(n > 1);
            let mut all = SequenceBatch::<f32>::new(&opts(1).ctf.inputs);
            let mut keys = Vec::new();
            for c in 0..n {
                let mut b = SequenceBatch::<f32>::new(&opts(1).ctf.inputs);
                src.read_chunk(c, &mut b).unwrap();
                assert_eq!(
                    Some(b.keys().to_vec()),
                    ChunkSource::<f32>::chunk_keys(&src, c)
                );
                keys.extend_from_slice(b.keys());
                for s in 0..b.len() {
                    all.push_sequence_from(&b, s);
                }
            }
            assert_eq!(keys, whole.keys());
            assert_eq!(all.streams()[0].values(), whole.streams()[0].values());
            assert_eq!(all.streams()[1].indices(), whole.streams()[1].indices());
        }
    }

    #[test]
    fn errors_keep_their_file_position() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(&dir, "1 |a 1 2\n2 |a 3 4\n3 |a 5 x\n");
        let src = CtfSource::open(&InputPath::new(&p), opts(10)).unwrap();
        let n = ChunkSource::<f64>::chunks(&src).len();
        assert_eq!(n, 3);
        let mut b = SequenceBatch::<f64>::new(&opts(1).ctf.inputs);
        let e = src.read_chunk(2, &mut b).unwrap_err();
        let loc = e.location();
        assert_eq!(
            (loc.line, loc.column, loc.byte),
            (Some(3), Some(8), Some(25)),
            "{e}"
        );
        assert!(e.to_string().contains("d.ctf:3:8"), "{e}");
    }

    #[test]
    fn index_cache_is_reused_only_when_valid() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(&dir, DATA);
        let input = InputPath::new(&p);
        let o = CtfSourceOptions {
            cache_index: true,
            ..opts(30)
        };
        let first = CtfSource::open(&input, o.clone()).unwrap();
        assert_eq!(first.index_origin(), IndexOrigin::ScannedAndCached);
        let cache = index_cache_path(&p);
        assert!(cache.exists());
        let again = CtfSource::open(&input, o.clone()).unwrap();
        assert_eq!(again.index_origin(), IndexOrigin::Cache);
        assert_eq!(again.index, first.index);
        assert!(again.diagnostics().is_empty());
        // Other parameters: rebuilt, with a warning.
        let other = CtfSource::open(
            &input,
            CtfSourceOptions {
                chunk_size: 7,
                ..o.clone()
            },
        )
        .unwrap();
        assert_eq!(other.index_origin(), IndexOrigin::ScannedAndCached);
        assert!(other.diagnostics()[0].message.contains("other parameters"));
        // Corrupt caches of every kind are rejected, never trusted.
        let good = {
            CtfSource::open(&input, o.clone()).unwrap();
            std::fs::read(&cache).unwrap()
        };
        for cut in [0, 10, good.len() - 1] {
            std::fs::write(&cache, &good[..cut]).unwrap();
            let s = CtfSource::open(&input, o.clone()).unwrap();
            assert_eq!(s.index, first.index);
            assert_eq!(s.diagnostics().len(), 1, "{cut}");
        }
        // Any damaged byte (a key, a record, the checksum itself) is caught, and the rebuilt
        // cache replaces the damaged one.
        for at in 0..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 0x55;
            std::fs::write(&cache, &bad).unwrap();
            let s = CtfSource::open(&input, o.clone()).unwrap();
            assert_eq!(s.index, first.index, "{at}");
            assert_eq!(s.diagnostics().len(), 1, "{at}");
            assert!(s.diagnostics()[0].message.contains("re-indexing"), "{at}");
            assert_eq!(std::fs::read(&cache).unwrap(), good, "{at}");
        }
        // A record moved off a line start, with a checksum made to match, is caught too.
        let shifted = {
            let mut ix = first.index.clone();
            ix.chunks[1].offset += 1;
            ix.chunks[1].bytes -= 1;
            let meta = std::fs::metadata(&p).unwrap();
            index_cache::encode(&ix, DataStamp::of(&meta), CacheParams::of(&o))
        };
        std::fs::write(&cache, &shifted).unwrap();
        let s = CtfSource::open(&input, o.clone()).unwrap();
        assert_eq!(s.index, first.index);
        assert!(s.diagnostics()[0]
            .message
            .contains("chunk 1 does not start at a line start"));
        // The data changes: the cache is stale.
        CtfSource::open(&input, o.clone()).unwrap();
        std::fs::write(&p, "5 |a 1 1\n").unwrap();
        let s = CtfSource::open(&input, o).unwrap();
        assert_eq!(s.index.keys, vec![5]);
        assert_eq!(s.diagnostics().len(), 1);
    }
}
