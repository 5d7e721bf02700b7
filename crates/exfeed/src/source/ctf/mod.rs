//! [`CtfSource`]: a CTF file as a [`ChunkSource`].

mod byte_ranges;
mod index;
mod index_cache;

use super::chunker::{Chunker, SequenceSpan};
use crate::batch::SequenceBatch;
use crate::buffers::{give_back_read_buffer, take_read_buffer};
use crate::ctf::{detect_key_mode, scan_sequences, CtfOptions, CtfParser, KeyMode};
use crate::element::Element;
use crate::error::{Diagnostic, Error, Location, Result, Severity};
use crate::fetch_ahead::{ChunkFetches, FetchTicket, Fetched};
use crate::io::{open_bytes_as, Holding, InputBytes, InputPath, RemoteFile, ReopeningFile};
pub use crate::options::IndexMode;
use crate::options::ReadOptions;
use crate::reader::{ChunkInfo, ChunkSource};
use crate::stream::StreamSpec;
use byte_ranges::{ByteRanges, ReadAt, HEAD};
use index::{Chunk, Index};
#[cfg(fuzzing)]
pub use index_cache::fuzz_decode as fuzz_index_cache;
pub use index_cache::index_cache_path;
use index_cache::{CacheParams, DataStamp};
use std::fs::File;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// Options of a [`CtfSource`]: the parsing options and how the file is read (its chunk size,
/// whether it is indexed, the index cached, held in memory, read in frame mode).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CtfSourceOptions {
    /// Inputs, `skipSequenceIds`, `maxErrors`.
    pub ctf: CtfOptions,
    /// `chunkSizeInBytes` (a [`ChunkSize::Auto`](crate::options::ChunkSize::Auto) not sized
    /// before is the most it may be), `keepDataInMemory`, `frameMode` (recorded in the index
    /// cache), `cacheIndex`, `index`.
    pub read: ReadOptions,
}

impl CtfSourceOptions {
    /// The parameters an index cache must have been built with to be used.
    fn cache_params(&self) -> CacheParams {
        CacheParams::new(
            self.read.chunk_bytes(),
            self.ctf.skip_sequence_ids,
            self.read.frame_mode(),
        )
    }
}

enum Data {
    /// Closed while not read when many are open (a corpus's shards: see [`ReopeningFile`]).
    File(ReopeningFile),
    /// An object read by byte range: each chunk with one request for exactly its bytes.
    Remote(RemoteFile),
    Memory(InputBytes),
}

impl ReadAt for Data {
    fn bytes_at<'a>(&'a self, offset: u64, len: usize, buf: &'a mut Vec<u8>) -> Result<&'a [u8]> {
        match self {
            Data::File(f) => {
                let f = f.get()?;
                buf.resize(len, 0);
                let n = crate::io::read_at_most(&f, buf, offset)?;
                Ok(&buf[..n])
            }
            Data::Remote(object) => object.bytes_at(offset, len, buf),
            Data::Memory(b) => b[..].bytes_at(offset, len, buf),
        }
    }
}

impl Data {
    /// The data's length in bytes.
    fn len(&self) -> Result<u64> {
        match self {
            Data::File(f) => Ok(f.get()?.metadata()?.len()),
            Data::Remote(object) => Ok(object.len()),
            Data::Memory(b) => Ok(b.len() as u64),
        }
    }

    /// The 1-based line and column of byte `at`, by counting the lines before it.
    fn line_column(&self, at: u64) -> Result<(u64, u64)> {
        let (mut pos, mut lines, mut line_start) = (0u64, 1u64, 0u64);
        let mut buf = Vec::new();
        while pos < at {
            let block = (at - pos).min(SCAN_BLOCK as u64) as usize;
            let bytes = self.bytes_at(pos, block, &mut buf)?;
            if bytes.is_empty() {
                break;
            }
            lines += memchr::memchr_iter(b'\n', bytes).count() as u64;
            if let Some(i) = memchr::memrchr(b'\n', bytes) {
                line_start = pos + i as u64 + 1;
            }
            pos += bytes.len() as u64;
        }
        Ok((lines, at - line_start + 1))
    }

    /// Whether every chunk of `ix` starts at a line start of this data (see
    /// [`index_cache::check_line_starts`]).
    fn check_line_starts(&self, ix: &Index) -> std::result::Result<(), String> {
        match self {
            Data::File(f) => {
                let f = f.get().map_err(|e| e.to_string())?;
                let f = &*f;
                let mut start = [0u8; 3];
                let n = crate::io::read_at_most(f, &mut start, 0).unwrap_or(0);
                index_cache::check_line_starts(ix, &start[..n], |offset| {
                    let mut b = [0u8; 1];
                    crate::io::read_exact_at(f, &mut b, offset - 1).map(|()| b[0])
                })
            }
            Data::Remote(object) => {
                let mut start = [0u8; 3];
                let n = object.read_at_most(&mut start, 0).unwrap_or(0);
                index_cache::check_line_starts(ix, &start[..n], |offset| {
                    let mut b = [0u8; 1];
                    object
                        .read_exact_at(&mut b, offset - 1)
                        .map(|()| b[0])
                        .map_err(Error::into_io)
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
    /// No index: the chunks are byte ranges ([`IndexMode::None`]).
    ByteRanges,
}

/// A CTF file as a [`ChunkSource`].
///
/// With the full index ([`IndexMode::Full`]), opening it makes one indexing pass
/// ([`scan_sequences`], memchr speed) over the file, read in blocks so only a block (or one
/// sequence, if larger) is in memory; whole sequences are grouped into chunks of about
/// `chunkSizeInBytes`. Decoding a chunk reads just its byte range (mapped while it is decoded,
/// the range advised `POSIX_FADV_WILLNEED`; the file is advised `POSIX_FADV_RANDOM` once open,
/// so the kernel reads no further than asked, into other workers' chunks) and parses it with a
/// fresh [`CtfParser`] at the chunk's true byte offset and line, so every error names its real
/// place in the file. A compressed file cannot be read by offset: it is decompressed once, at
/// open, into an unlinked temporary file (in `TMPDIR`: disk for its decompressed size, memory
/// for a buffer) that is then read as a plain file. Standard input, and any file with
/// `keepDataInMemory`, is held in memory.
///
/// Without an index ([`IndexMode::None`], the default when nothing needs the index, see
/// [`IndexMode::Auto`]), opening reads only the first 64 KiB of the file (of a compressed
/// file, its decompressed text): the chunks are byte ranges fixed from the file's size, each
/// starting at the first sequence that starts at or after its nominal start, found when the
/// chunk is decoded (a sequence belongs to the chunk it starts in: see the `byte_ranges`
/// module). Every sequence is still read exactly once, as with the index. What the plan knows
/// of a chunk before decoding it ([`ChunkInfo`]'s sequences and samples) is then estimated
/// from the lines per byte of the file's first 64 KiB; see
/// [`ChunkSource::chunks_by_byte_range`]. Such a chunk is advised `POSIX_FADV_WILLNEED` and
/// decoded in pieces of about 2 MiB, cut by the same rule, as they arrive from storage, by every
/// idle thread of the reader when it is the only chunk being decoded (the first window, the
/// consumer waiting): the same sequences in the same order as one parse of the chunk.
///
/// Each chunk is parsed independently (in parallel), so `maxErrors` applies per chunk. A
/// sequence id may repeat, as in CNTK: a line whose id differs from the line before starts a
/// sequence.
///
/// With `cacheIndex` the index is stored beside the file (`FILE.exfeed-index`, see
/// [`index_cache_path`]) and reused when it is valid; see [`CtfSource::open`]. A URL's index
/// is stored in the local cache instead (the bucket may be read-only), keyed by the object's
/// URL, ETag and size: see [`RemoteFile::derived`].
pub struct CtfSource {
    name: Arc<str>,
    specs: Vec<StreamSpec>,
    parser: CtfParser,
    data: Data,
    layout: Layout,
    infos: Vec<ChunkInfo>,
    origin: IndexOrigin,
    diagnostics: Mutex<Vec<Diagnostic>>,
    /// Without an index, chunks are decoded in pieces of about this many bytes (see
    /// [`PIECE_BYTES`]).
    piece_bytes: u64,
    /// Chunks being decoded now.
    decoding: AtomicUsize,
    /// `chunkSizeInBytes` (for CNTK's chunks, see [`ChunkSource::cntk_chunks`]).
    chunk_size: u64,
    /// An object's chunks fetched ahead of their decoding ([`ChunkSource::fetch_ahead`]).
    fetched_ahead: Arc<ChunkFetches>,
}

/// How the chunks were found.
enum Layout {
    Indexed(Index),
    Ranges(Arc<ByteRanges>),
}

/// Bytes of a piece: without an index a chunk is decoded in pieces of about this size, cut
/// where sequences start by the rule that cuts the file into chunks, on every idle thread of the
/// reader and while the rest of the chunk is still being read (see [`CtfSource::read_chunk`]).
/// Small enough that the first piece arrives soon and the last one is decoded soon after the
/// chunk is read; large enough that finding a piece's bounds costs next to nothing.
const PIECE_BYTES: u64 = 2 << 20;

/// Diagnostics kept per source (the rest are counted only).
const MAX_KEPT_DIAGNOSTICS: usize = 1000;
/// Bytes read per block while indexing (small enough to stay in the cache while scanned).
const SCAN_BLOCK: usize = 4 << 20;

impl CtfSource {
    /// Opens `input`: without an index (see [`IndexMode`]), or indexed. With `cache_index` and a
    /// file path, a valid cache beside the file is used instead of scanning; a cache is valid
    /// when it is newer than the data file, records the data file's current size and
    /// modification time, was built with the same chunk size, `skipSequenceIds`, `frameMode`
    /// and cache format version, and passes every consistency check. Otherwise the file is
    /// scanned and the cache (re)written through a temporary file and a rename; a stale or
    /// corrupt cache is reported as a warning ([`CtfSource::diagnostics`]). Failing to write the
    /// cache is a warning too. A URL's index is kept in the local cache (`cacheDir`, else the
    /// user's: see [`crate::io::user_index_cache_dir`]), found again by the object's URL, ETag
    /// and size and the same parameters.
    ///
    /// ```
    /// use exfeed::ctf::CtfOptions;
    /// use exfeed::io::InputPath;
    /// use exfeed::options::{ChunkSize, ReadOptions};
    /// use exfeed::reader::ChunkSource;
    /// use exfeed::source::{CtfSource, CtfSourceOptions, IndexMode, IndexOrigin};
    /// use exfeed::SequenceBatch;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("three.ctf");
    /// std::fs::write(&path, "0 |x 1 2\n0 |x 3 4\n1 |x 5 6\n2 |x 7 8\n")?;
    /// let options = CtfSourceOptions {
    ///     ctf: CtfOptions { inputs: vec!["x:dense:2".parse()?], ..CtfOptions::default() },
    ///     // Bytes: the sequences go into chunks of about this size.
    ///     read: ReadOptions::new().with_chunk_size(ChunkSize::Bytes(20)).with_cache_index(true),
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
    /// let again = CtfSource::open(&InputPath::new(&path), options.clone())?;
    /// assert_eq!(again.index_origin(), IndexOrigin::Cache);
    ///
    /// // Without an index: byte ranges of about 20 bytes, each decoded to whole sequences.
    /// let read = options.read.with_cache_index(false).with_index(IndexMode::None);
    /// let options = CtfSourceOptions { read, ..options };
    /// let ranges = CtfSource::open(&InputPath::new(&path), options)?;
    /// assert_eq!(ranges.index_origin(), IndexOrigin::ByteRanges);
    /// let mut keys = Vec::new();
    /// for c in 0..ChunkSource::<f32>::chunks(&ranges).len() {
    ///     batch.clear();
    ///     ranges.read_chunk(c, &mut batch)?;
    ///     keys.extend_from_slice(batch.keys());
    /// }
    /// assert_eq!(keys, [0, 1, 2]); // sequence 0's two lines cross the first range's end
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(input: &InputPath, options: CtfSourceOptions) -> Result<Self> {
        let name: Arc<str> = input.display_name().into();
        let mut parser = CtfParser::new(options.ctf.clone())?;
        parser.set_file_name(name.clone());
        if options.read.index() == IndexMode::None && options.read.cache_index() {
            return Err(Error::config(format!(
                "{name}: index none reads the file without an index, and cacheIndex asks for \
                 one: give one or the other"
            )));
        }
        let plain_file = match input {
            InputPath::File(path) => {
                let file = File::open(path).map_err(|e| Error::io(path, e))?;
                let mut head = [0u8; 4];
                let n = crate::io::read_at_most(&file, &mut head, 0).unwrap_or(0);
                let compressed =
                    crate::io::Compression::sniff(&head[..n]) != crate::io::Compression::None;
                (!compressed).then(|| (path.clone(), file))
            }
            InputPath::Url(_) | InputPath::Stdin | InputPath::Memory { .. } => None,
        };
        // An object not compressed is read by byte range, unless asked to be held in memory.
        let object = match input {
            InputPath::Url(url) if !options.read.keep_in_memory() => {
                let object = RemoteFile::open(url)?;
                let mut head = [0u8; 4];
                let n = object.read_at_most(&mut head, 0)?;
                let compressed =
                    crate::io::Compression::sniff(&head[..n]) != crate::io::Compression::None;
                (!compressed).then_some(object)
            }
            _ => None,
        };
        let (data, file) = match plain_file {
            None if object.is_some() => (Data::Remote(object.expect("checked")), None),
            Some((path, file)) => {
                let meta = file.metadata().map_err(|e| Error::io(&path, e))?;
                let data = if options.read.keep_in_memory() {
                    Data::Memory(InputBytes::Owned(
                        std::fs::read(&path).map_err(|e| Error::io(&path, e))?,
                    ))
                } else {
                    Data::File(ReopeningFile::new(&path, file)?)
                };
                (data, Some((path, meta)))
            }
            // A compressed file: decompressed once into a temporary file, then read by offset
            // as a plain one, so memory holds chunks, not the file.
            None if matches!(input, InputPath::File(_) | InputPath::Url(_))
                && !options.read.keep_in_memory() =>
            {
                (
                    Data::File(ReopeningFile::kept_open(crate::io::spool(
                        input,
                        Holding::CtfText(options.ctf.limits),
                    )?)?),
                    None,
                )
            }
            None => (
                Data::Memory(open_bytes_as(input, Holding::CtfText(options.ctf.limits))?),
                None,
            ),
        };
        let in_file = |e: Error| e.in_file(name.clone());
        let mut warnings = Vec::new();
        let (layout, infos, origin) = match byte_ranges(&data, &options).map_err(in_file)? {
            Some((ranges, infos)) => {
                parser.set_keys_by_offset(ranges.mode() == KeyMode::Lines);
                (
                    Layout::Ranges(Arc::new(ranges)),
                    infos,
                    IndexOrigin::ByteRanges,
                )
            }
            None => {
                let (index, origin) =
                    index(&data, file, &options, &mut warnings).map_err(in_file)?;
                let infos = index
                    .chunks
                    .iter()
                    .map(|c| ChunkInfo {
                        sequences: c.sequences as usize,
                        samples: c.samples,
                        bytes: c.bytes,
                    })
                    .collect();
                (Layout::Indexed(index), infos, origin)
            }
        };
        if let Data::File(f) = &data {
            // From now on only chunks are read, each by its exact range.
            f.advise_random().map_err(in_file)?;
        }
        if infos.is_empty() {
            // As when the file is read as a stream: no data lines is an error, so an empty
            // pipe, FIFO or device (/dev/null) is not read silently as no data.
            return Err(parser.empty_file());
        }
        let warnings = warnings
            .into_iter()
            .map(|message| Diagnostic {
                severity: Severity::Warning,
                location: Location::default().with_file(name.clone()),
                message,
            })
            .collect();
        Ok(CtfSource {
            name,
            specs: options.ctf.inputs.clone(),
            parser,
            data,
            layout,
            infos,
            origin,
            diagnostics: Mutex::new(warnings),
            // An error budget counts errors over the whole chunk, in file order.
            piece_bytes: match options.ctf.max_errors {
                0 => PIECE_BYTES,
                _ => u64::MAX,
            },
            decoding: AtomicUsize::new(0),
            chunk_size: options.read.chunk_bytes(),
            fetched_ahead: Arc::default(),
        })
    }

    /// CNTK's chunks' sequences' sample counts, when exfeed's index made the same chunks
    /// (see [`ChunkSource::cntk_chunks`]): the file is scanned once more by CNTK's rules.
    fn cntk_chunk_samples(&self) -> Result<Vec<Vec<u32>>> {
        let Layout::Indexed(ix) = &self.layout else {
            return Err(Error::config(format!(
                "{}: randomizer cntk needs the full index (CNTK's chunks and every sequence's \
                 samples): give index full, not none",
                self.name
            )));
        };
        // Scanned in pieces with positioned reads (never mapped, see `io::open_bytes`).
        let len = self.data.len().map_err(|e| e.in_file(self.name.clone()))?;
        let mut own = Vec::new();
        let read = |offset: u64, buf: &mut [u8]| {
            let got = self.data.bytes_at(offset, buf.len(), &mut own)?;
            if got.len() < buf.len() {
                return Err(Error::config(format!(
                    "byte {}: the file ended early (it shrank while read)",
                    offset + got.len() as u64
                )));
            }
            buf.copy_from_slice(got);
            Ok(())
        };
        let ctf = self.parser.options();
        let main = ctf.inputs.iter().find(|s| s.defines_mb_size);
        let sequences = crate::reader::cntk_order::cntk_ctf_sequences_read(
            len,
            SCAN_BLOCK,
            read,
            ctf.skip_sequence_ids,
            main.map(|s| s.name_in_file()),
        )
        .map_err(|e| e.in_file(self.name.clone()))?;
        crate::reader::cntk_order::ctf_chunk_samples(
            &sequences,
            len,
            self.chunk_size,
            ix.chunks.iter().map(|c| c.sequences),
        )
        .map_err(|e| e.in_file(self.name.clone()))
    }

    /// Where the index came from.
    pub fn index_origin(&self) -> IndexOrigin {
        self.origin
    }

    /// Total number of sequences by the index (`None` without one: see [`IndexMode::None`]).
    pub fn num_sequences(&self) -> Option<usize> {
        match &self.layout {
            Layout::Indexed(ix) => Some(ix.keys.len()),
            Layout::Ranges(_) => None,
        }
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

    /// `e` with the file named and, without an index, its line made the file's: shifted by
    /// `lines_before` (the lines before the chunk the parser counted from, `None` when it did
    /// not count) when it has one, else found for its byte. Lines are counted only when there
    /// is an error to report.
    fn placed(&self, mut e: Error, lines_before: impl FnOnce() -> Option<u64>) -> Error {
        if matches!(self.layout, Layout::Ranges(_)) {
            let loc = e.location_mut();
            if loc.line.is_some() {
                if let Some(before) = lines_before() {
                    shift_lines(loc, before);
                }
            } else if let Some(byte) = loc.byte {
                if let Ok((line, column)) = self.data.line_column(byte) {
                    (loc.line, loc.column) = (Some(line), Some(column));
                }
            }
        }
        if e.location().file.is_none() {
            e = e.in_file(self.name.clone());
        }
        e
    }

    /// How many more diagnostics are kept (see [`CtfSource::diagnostics`]).
    fn diagnostics_room(&self) -> usize {
        self.diagnostics
            .lock()
            .map_or(0, |d| MAX_KEPT_DIAGNOSTICS.saturating_sub(d.len()))
    }
}

impl CtfSource {
    /// Chunk `chunk`'s bytes `start..end`: fetched ahead (waiting for their fetch), or read
    /// as any chunk's are.
    fn fetched_or_read(
        &self,
        fetched: Option<Result<Fetched>>,
        start: u64,
        end: u64,
        chunk: usize,
    ) -> Result<ChunkBytes<'_>> {
        match fetched {
            Some(Ok((at, bytes))) if at == start && bytes.len() as u64 == end - start => {
                Ok(ChunkBytes::Read(bytes))
            }
            // It gave up after the read's retries: read again, they would be spent twice.
            Some(Err(e)) => Err(self.placed_read_error(e, chunk)),
            Some(Ok((_, bytes))) => {
                give_back_read_buffer(bytes);
                self.chunk_bytes(start, end, chunk)
            }
            None => self.chunk_bytes(start, end, chunk),
        }
    }

    /// A read error of chunk `chunk`, placed in the file.
    fn placed_read_error(&self, e: Error, chunk: usize) -> Error {
        e.in_file(self.name.clone())
            .in_context(format!("reading chunk {chunk} (has the file changed?)"))
    }

    /// The bytes `start..end` of the data, to decode chunk `chunk` from. A file's are read into
    /// a buffer (one positioned read, after the kernel was asked to read exactly them ahead,
    /// `POSIX_FADV_WILLNEED`, so it never reads around them: the neighbouring bytes are other
    /// workers' chunks), never mapped: a mapped file that shrinks under the reader (truncated,
    /// or rewritten in place by `cp`) kills the process with `SIGBUS` on the next access to a
    /// page past its new end, which no Rust program can recover from, where a read just comes
    /// back short and becomes an error naming the file and the byte. The copy costs some CPU
    /// (docs/hardening.md has the figures); memory stays bounded by the chunks being decoded.
    fn chunk_bytes(&self, start: u64, end: u64, chunk: usize) -> Result<ChunkBytes<'_>> {
        let place = |e: Error| self.placed_read_error(e, chunk);
        let len = usize::try_from(end - start)
            .map_err(|_| place(Error::corrupt(start, "chunk too large")))?;
        let f = match &self.data {
            Data::File(f) => f.get().map_err(place)?,
            Data::Memory(b) => {
                let e = usize::try_from(end)
                    .ok()
                    .filter(|&e| e <= b.len())
                    .ok_or_else(|| {
                        place(Error::corrupt(start, "chunk beyond the end of the data"))
                    })?;
                return Ok(ChunkBytes::Borrowed(&b[start as usize..e]));
            }
            Data::Remote(object) => {
                let mut buf = take_read_buffer(len);
                object.read_exact_at(&mut buf, start).map_err(place)?;
                return Ok(ChunkBytes::Read(buf));
            }
        };
        crate::io::advise_will_need(&f, start, end - start);
        let mut buf = take_read_buffer(len);
        crate::io::read_exact_at(&f, &mut buf, start).map_err(|e| place(e.into()))?;
        Ok(ChunkBytes::Read(buf))
    }

    /// Decodes `bytes`, the data's bytes `range` (whole sequences; `line`: the line at its
    /// start, 1 when not known), into `out` with a fresh parser: the result, its error placed in
    /// the file, and the diagnostics, their lines placed.
    fn decode<T: Element>(
        &self,
        range: std::ops::Range<u64>,
        line: u64,
        out: &mut SequenceBatch<T>,
        bytes: &[u8],
    ) -> (Result<()>, Vec<Diagnostic>) {
        let mut sink: Vec<Diagnostic> = Vec::new();
        let mode = match &self.layout {
            Layout::Indexed(ix) => ix.mode,
            Layout::Ranges(r) => r.mode(),
        };
        let mut parser = self.parser.clone();
        let r = parser
            .parse_chunk(bytes, range.start, line, mode, out, &mut sink)
            .map(drop);
        // Without an index the parser counts lines from 1 at the range's start; the lines
        // before it are counted (from the file's start) at most once, and only when an error
        // or a kept diagnostic needs them.
        let counted = std::cell::OnceCell::new();
        let lines_before = || {
            *counted.get_or_init(|| match self.layout {
                Layout::Ranges(_) => self.data.line_column(range.start).ok().map(|(l, _)| l - 1),
                Layout::Indexed(_) => None,
            })
        };
        let r = r.map_err(|e| self.placed(e, lines_before));
        if !sink.is_empty() && self.diagnostics_room() > 0 {
            if let Some(before) = lines_before() {
                for d in &mut sink {
                    shift_lines(&mut d.location, before);
                }
            }
        }
        (r, sink)
    }

    /// Keeps `diagnostics` as far as there is room (see [`CtfSource::diagnostics`]).
    fn keep(&self, diagnostics: Vec<Diagnostic>) {
        if diagnostics.is_empty() {
            return;
        }
        if let Ok(mut kept) = self.diagnostics.lock() {
            let room = MAX_KEPT_DIAGNOSTICS.saturating_sub(kept.len());
            kept.extend(diagnostics.into_iter().take(room));
        }
    }

    /// Decodes a chunk cut into `pieces` (see [`ByteRanges::within`]) into `out`: the same
    /// sequences, in the same order, with the same error, as one parse of the whole chunk.
    ///
    /// Its pieces are taken in file order by this thread and (with `offer`) by idle threads of
    /// the reader's pool (helpers offered to rayon's work stealing: a busy thread never takes
    /// one, so the threads are never oversubscribed). This thread decodes its pieces straight
    /// into `out` until a helper takes one; the pieces from there on are decoded into batches of their own and appended in order.
    /// The pieces' parsers do not see across pieces, so on an error (the first in file order
    /// stops the taking of pieces) the chunk is decoded again in one piece, which reports what
    /// one parse reports. Errors end the reading (a chunk is
    /// cut in pieces only without an error budget), so this costs nothing when all is well.
    fn read_pieces<T: Element>(
        &self,
        pieces: &ByteRanges,
        bytes: &ChunkBytes<'_>,
        chunk: usize,
        offer: bool,
        out: &mut SequenceBatch<T>,
    ) -> Result<()> {
        let n = pieces.len();
        let work = Pieces {
            ranges: pieces,
            bytes,
            claims: Mutex::new(Claims {
                next: 0,
                direct: 0,
                running: 0,
                done: (0..n).map(|_| None).collect(),
            }),
            finished: Condvar::new(),
        };
        // Helpers only on a pool's thread (the reader's): elsewhere rayon would start its own.
        let helpers = match (offer, rayon::current_thread_index()) {
            (true, Some(_)) => (rayon::current_num_threads() - 1).min(n - 1),
            _ => 0,
        };
        if helpers == 0 {
            self.take_pieces(&work, Some(&mut *out), || ());
        } else {
            rayon::scope(|s| {
                // Offered once this thread has taken the first piece (it decodes the pieces
                // it takes first straight into `out`).
                let offer = || {
                    for _ in 0..helpers {
                        s.spawn(|_| self.take_pieces::<T>(&work, None, || ()));
                    }
                };
                self.take_pieces(&work, Some(&mut *out), offer);
            });
        }
        let claims = work.claims.into_inner().map_err(|_| {
            Error::new(
                crate::error::ErrorKind::Invalid,
                Location::default().with_context(format!("chunk {chunk}")),
                "decoding the chunk failed: a thread panicked",
            )
        })?;
        let mut diagnostics = Vec::new();
        let mut result = Ok(());
        for done in claims.done {
            let Some(done) = done else { break }; // after an error
            diagnostics.extend(done.diagnostics);
            if let Err(e) = done.result {
                result = Err(e);
                break;
            }
            if let Some(b) = done.batch {
                out.push_sequences_from(&b, 0..b.len());
            }
        }
        // An error (a piece's bounds not found, or one a single parse would report
        // differently): the chunk again in one piece, for what one parse makes of it.
        if n > 1 && result.is_err() {
            out.clear();
            (result, diagnostics) = self.decode(pieces.bounds(), 1, out, bytes.bytes());
        }
        self.keep(diagnostics);
        result
    }

    /// Takes pieces of `work` and decodes them until none is left: the chunk's own thread
    /// (with `out`, the chunk's batch), or a helper (`None`).
    /// `taken` is called once the first piece is taken.
    fn take_pieces<T: Element>(
        &self,
        work: &Pieces<'_, T>,
        mut out: Option<&mut SequenceBatch<T>>,
        taken: impl FnOnce(),
    ) {
        let mut taken = Some(taken);
        let (base, bytes) = (work.ranges.bounds().start, work.bytes.bytes());
        // The pieces' bounds are found in the chunk's bytes (and before it, in the file).
        let within = Within {
            base,
            bytes,
            data: &self.data,
        };
        loop {
            let Ok(mut claims) = work.claims.lock() else {
                break;
            };
            let i = claims.next;
            if i >= claims.done.len() {
                if out.is_some() {
                    // The chunk's thread returns once every piece taken is decoded.
                    while claims.running > 0 {
                        claims = match work.finished.wait(claims) {
                            Ok(c) => c,
                            Err(_) => break,
                        };
                    }
                }
                break;
            }
            claims.next += 1;
            claims.running += 1;
            let direct = out.is_some() && claims.direct == i;
            claims.direct += usize::from(direct);
            drop(claims);
            if let Some(f) = taken.take() {
                f();
            }
            let running = Running(work);
            let mut own = None;
            let batch = match (&mut out, direct) {
                (Some(out), true) => &mut **out,
                _ => own.insert(SequenceBatch::new(&self.specs)),
            };
            let (result, diagnostics) = match work.ranges.range(&within, i) {
                Ok((start, end)) => {
                    let piece = (start - base) as usize..(end - base) as usize;
                    self.decode(start..end, 1, batch, &bytes[piece])
                }
                Err(e) => (Err(e), Vec::new()),
            };
            let failed = result.is_err();
            if let Ok(mut claims) = work.claims.lock() {
                if failed {
                    claims.next = claims.done.len(); // one parse would stop here
                }
                claims.done[i] = Some(Done {
                    batch: own,
                    diagnostics,
                    result,
                });
            }
            drop(running);
        }
    }
}

/// A piece being decoded: no longer running once dropped, also when its decoding panicked (the
/// chunk's thread then does not wait for it in vain; the panic reaches it through the scope).
struct Running<'a, T>(&'a Pieces<'a, T>);

impl<T> Drop for Running<'_, T> {
    fn drop(&mut self) {
        if let Ok(mut claims) = self.0.claims.lock() {
            claims.running -= 1;
        }
        self.0.finished.notify_all();
    }
}

/// A chunk's bytes while it is decoded ([`CtfSource::chunk_bytes`]).
enum ChunkBytes<'a> {
    /// Read from the file (a buffer of [`BUFFERS`], given back when dropped).
    Read(Vec<u8>),
    /// The data in memory.
    Borrowed(&'a [u8]),
}

impl ChunkBytes<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            ChunkBytes::Read(b) => b,
            ChunkBytes::Borrowed(b) => b,
        }
    }
}

impl Drop for ChunkBytes<'_> {
    fn drop(&mut self) {
        if let ChunkBytes::Read(b) = self {
            give_back_read_buffer(std::mem::take(b));
        }
    }
}

/// A chunk's bytes (`bytes`, at `base` in the data), and the rest of the data read as needed:
/// where the bounds of its pieces are found.
struct Within<'a> {
    base: u64,
    bytes: &'a [u8],
    data: &'a Data,
}

impl ReadAt for Within<'_> {
    fn bytes_at<'a>(&'a self, offset: u64, len: usize, buf: &'a mut Vec<u8>) -> Result<&'a [u8]> {
        let inside = offset
            .checked_sub(self.base)
            .and_then(|from| usize::try_from(from).ok())
            .filter(|&from| from.saturating_add(len) <= self.bytes.len());
        match inside {
            Some(from) => Ok(&self.bytes[from..from + len]),
            None => self.data.bytes_at(offset, len, buf),
        }
    }
}

/// A chunk being decoded in pieces ([`CtfSource::read_pieces`]).
struct Pieces<'a, T> {
    ranges: &'a ByteRanges,
    /// The chunk's bytes.
    bytes: &'a ChunkBytes<'a>,
    claims: Mutex<Claims<T>>,
    /// Signalled when a piece is decoded.
    finished: Condvar,
}

/// Which pieces are taken and what became of them.
struct Claims<T> {
    /// The next piece to take (all taken when it is the number of pieces).
    next: usize,
    /// Pieces `0..direct` were decoded straight into the chunk's batch by its own thread.
    direct: usize,
    /// Pieces taken and not decoded yet.
    running: usize,
    /// What each piece gave.
    done: Vec<Option<Done<T>>>,
}

/// A decoded piece: its own batch (none when decoded into the chunk's), its diagnostics, and
/// its error.
struct Done<T> {
    batch: Option<SequenceBatch<T>>,
    diagnostics: Vec<Diagnostic>,
    result: Result<()>,
}

/// `loc`'s line, counted from 1 at a chunk's first line, made the file's: `lines_before` is the
/// number of lines before the chunk.
fn shift_lines(loc: &mut Location, lines_before: u64) {
    if let Some(line) = &mut loc.line {
        *line += lines_before;
    }
}

impl<T: Element> ChunkSource<T> for CtfSource {
    fn streams(&self) -> &[StreamSpec] {
        &self.specs
    }

    fn chunks(&self) -> &[ChunkInfo] {
        &self.infos
    }

    fn cntk_chunks(&self) -> Option<Result<Vec<Vec<u32>>>> {
        Some(self.cntk_chunk_samples())
    }

    fn read_chunk(&self, chunk: usize, out: &mut SequenceBatch<T>) -> Result<()> {
        if chunk >= self.infos.len() {
            return Err(Error::config(format!("chunk {chunk} does not exist")));
        }
        match &self.layout {
            Layout::Indexed(ix) => {
                let c = &ix.chunks[chunk];
                let range = c.offset..c.offset + c.bytes;
                let fetched = self.fetched_ahead.take(chunk as u64);
                let bytes = self.fetched_or_read(fetched, range.start, range.end, chunk)?;
                let (r, diagnostics) = self.decode(range, c.line, out, bytes.bytes());
                self.keep(diagnostics);
                r
            }
            Layout::Ranges(ranges) => {
                // Taken first: its fetch found the range's bounds, which are then known.
                let fetched = self.fetched_ahead.take(chunk as u64);
                let (start, end) = ranges
                    .range(&self.data, chunk)
                    .map_err(|e| self.placed(e, || None))?;
                if start == end {
                    return Ok(()); // a range inside a sequence that started before it
                }
                let bytes = self.fetched_or_read(fetched, start, end, chunk)?;
                let pieces = ranges.within(start, end, self.piece_bytes);
                // Other threads are offered pieces when no other chunk is being decoded: they
                // are idle (the reader's start, the consumer waiting), or about to take the
                // next chunk. Otherwise every thread decodes a chunk of its own, whole.
                let alone = self.decoding.fetch_add(1, Ordering::Relaxed) == 0;
                let r = self.read_pieces(&pieces, &bytes, chunk, alone, out);
                self.decoding.fetch_sub(1, Ordering::Relaxed);
                r
            }
        }
    }

    fn chunk_keys(&self, chunk: usize) -> Option<Vec<u64>> {
        let Layout::Indexed(index) = &self.layout else {
            return None;
        };
        let c = index.chunks.get(chunk)?;
        let start = c.first_sequence as usize;
        index
            .keys
            .get(start..start + c.sequences as usize)
            .map(<[u64]>::to_vec)
    }

    fn sequence_place(&self, chunk: usize, index: usize) -> String {
        let found = match &self.layout {
            Layout::Indexed(ix) => ix.chunks.get(chunk).and_then(|c| {
                let bytes = self.chunk_bytes(c.offset, c.offset + c.bytes, chunk).ok()?;
                let mut nth = None;
                let mut i = 0;
                let _ = scan_sequences(bytes.bytes(), c.offset, c.line, ix.mode, |e| {
                    if i == index {
                        nth = Some((e.line, e.offset));
                    }
                    i += 1;
                    Ok(())
                });
                nth
            }),
            Layout::Ranges(_) => None,
        };
        match found {
            Some((line, byte)) => format!("{}:{line} (byte {byte})", self.name),
            None => format!("{}: sequence {index} of chunk {chunk}", self.name),
        }
    }

    fn chunks_by_byte_range(&self) -> bool {
        matches!(self.layout, Layout::Ranges(_))
    }

    fn fetch_ahead(&self, chunk: usize) -> Option<FetchTicket> {
        let Data::Remote(object) = &self.data else {
            return None;
        };
        let object = object.clone();
        match &self.layout {
            Layout::Indexed(ix) => {
                let c = ix.chunks.get(chunk)?;
                let (start, end) = (c.offset, c.offset + c.bytes);
                self.fetched_ahead.start(chunk as u64, c.bytes, move || {
                    fetch_range(&object, start, end)
                })
            }
            Layout::Ranges(ranges) => {
                let ranges = ranges.clone();
                let estimate = self.infos.get(chunk)?.bytes;
                self.fetched_ahead.start(chunk as u64, estimate, move || {
                    let (start, end) = ranges.range(&object, chunk)?;
                    fetch_range(&object, start, end)
                })
            }
        }
    }
}

/// The bytes `start..end` of `object`, fetched ahead of their decoding.
fn fetch_range(object: &RemoteFile, start: u64, end: u64) -> Result<Fetched> {
    let len = usize::try_from(end - start).map_err(|_| Error::corrupt(start, "chunk too large"))?;
    let mut buf = take_read_buffer(len);
    object.read_exact_at(&mut buf, start)?;
    Ok((start, buf))
}

/// The byte-range layout of `data` and its chunks' estimated sizes, when `options` read it
/// without an index (see [`IndexMode`]); `None` for the full index (also for data with no line,
/// which the index reports as empty).
fn byte_ranges(
    data: &Data,
    options: &CtfSourceOptions,
) -> Result<Option<(ByteRanges, Vec<ChunkInfo>)>> {
    let wanted = match options.read.index() {
        IndexMode::Full => false,
        IndexMode::None => true,
        IndexMode::Auto => !options.read.cache_index() && options.ctf.max_errors == 0,
    };
    if !wanted {
        return Ok(None);
    }
    let len = data.len()?;
    let mut buf = Vec::new();
    let head = data.bytes_at(0, HEAD, &mut buf)?;
    let Some(mode) = key_mode(data, head, len, options.ctf.skip_sequence_ids)? else {
        return Ok(None);
    };
    if mode == KeyMode::Lines && options.read.index() == IndexMode::Auto {
        return Ok(None); // its keys are line numbers
    }
    let ranges = ByteRanges::new(len, options.read.chunk_bytes(), mode, options.ctf.limits);
    // The plan's sample and sequence counts: those of the head's whole lines, per byte.
    let whole = if head.len() as u64 == len {
        head.len()
    } else {
        memchr::memrchr(b'\n', head).map_or(head.len(), |i| i + 1)
    };
    let (mut sequences, mut lines) = (0u64, 0u64);
    let _ = scan_sequences(&head[..whole], 0, 1, mode, |e| {
        sequences += 1;
        lines += e.lines;
        Ok(())
    });
    let samples = if options.read.frame_mode() {
        sequences
    } else {
        lines
    };
    let per_byte = |n: u64| n.max(1) as f64 / whole.max(1) as f64;
    let estimate = |bytes: u64, rate: f64| ((bytes as f64 * rate).round() as u64).max(1);
    let infos = (0..ranges.len())
        .map(|i| {
            let bytes = ranges.nominal_start(i + 1) - ranges.nominal_start(i);
            ChunkInfo {
                sequences: estimate(bytes, per_byte(sequences)) as usize,
                samples: estimate(bytes, per_byte(samples)),
                bytes,
            }
        })
        .collect();
    Ok(Some((ranges, infos)))
}

/// The key mode, from the first byte of `data` (after a BOM) that is not whitespace; `None`
/// when there is none. `head` is the data's start, read already: the rest is read only when
/// the head decides nothing (all whitespace).
fn key_mode(data: &Data, head: &[u8], len: u64, skip_ids: bool) -> Result<Option<KeyMode>> {
    // The BOM only at the file's start (in the head).
    if let Some(mode) = detect_key_mode(head, skip_ids) {
        return Ok(Some(mode));
    }
    let (mut pos, mut buf) = (head.len() as u64, Vec::new());
    while pos < len {
        let bytes = data.bytes_at(pos, HEAD, &mut buf)?;
        if bytes.is_empty() {
            break;
        }
        let from = bytes
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(bytes.len());
        if let Some(mode) = detect_key_mode(&bytes[from..], skip_ids) {
            return Ok(Some(mode));
        }
        pos += bytes.len() as u64;
    }
    Ok(None)
}

/// The full index of `data` (`file`: its path and metadata, for the cache), from the cache
/// when `options` allow and it is valid; `warnings` get the cache's problems.
fn index(
    data: &Data,
    file: Option<(std::path::PathBuf, std::fs::Metadata)>,
    options: &CtfSourceOptions,
    warnings: &mut Vec<String>,
) -> Result<(Index, IndexOrigin)> {
    let scan = || match data {
        Data::Memory(b) => index_buffer(b, options),
        Data::File(f) => {
            let f = f.get()?;
            index_file(&*f, f.metadata()?.len(), options, SCAN_BLOCK)
        }
        Data::Remote(object) => index_file(object, object.len(), options, SCAN_BLOCK),
    };
    let cache = match (file, data) {
        _ if !options.read.cache_index() => return Ok((scan()?, IndexOrigin::Scanned)),
        (Some((path, meta)), _) => IndexCache::Beside {
            path: index_cache_path(&path),
            meta,
        },
        (None, Data::Remote(object)) => IndexCache::Local(object),
        (None, _) => return Ok((scan()?, IndexOrigin::Scanned)),
    };
    let params = options.cache_params();
    match cache.read(data, params) {
        Ok(Some(ix)) => return Ok((ix, IndexOrigin::Cache)),
        Ok(None) => {}
        Err(why) => warnings.push(format!("{} not used ({why}); re-indexing", cache.name())),
    }
    let ix = scan()?;
    match cache.write(&ix, params) {
        Ok(()) => Ok((ix, IndexOrigin::ScannedAndCached)),
        Err(e) => {
            warnings.push(format!("could not write the {}: {e}", cache.name()));
            Ok((ix, IndexOrigin::Scanned))
        }
    }
}

/// Where the index cache of a CTF input is kept (`cacheIndex`).
enum IndexCache<'a> {
    /// Beside the file (see [`index_cache_path`]), valid for the file's state `meta`.
    Beside {
        path: std::path::PathBuf,
        meta: std::fs::Metadata,
    },
    /// In the local cache (see [`RemoteFile::derived`]), keyed by the object's URL, ETag and
    /// size and by the indexing parameters, since the bucket may be read-only.
    Local(&'a RemoteFile),
}

impl IndexCache<'_> {
    /// What warnings call it.
    fn name(&self) -> String {
        match self {
            IndexCache::Beside { path, .. } => format!("index cache {}", path.display()),
            IndexCache::Local(_) => "index cache of this URL".to_string(),
        }
    }

    /// The data's state the index must have been built for.
    fn stamp(&self) -> DataStamp {
        match self {
            IndexCache::Beside { meta, .. } => DataStamp::of(meta),
            IndexCache::Local(object) => DataStamp::of_object(object.len()),
        }
    }

    /// The cached index of `data` built with `params`: `Ok(None)` when there is none,
    /// `Err(why)` when it cannot be used.
    fn read(&self, data: &Data, params: CacheParams) -> std::result::Result<Option<Index>, String> {
        match self {
            IndexCache::Beside { path, meta } => {
                let Some(ix) = index_cache::read(path, meta, self.stamp(), params)? else {
                    return Ok(None);
                };
                data.check_line_starts(&ix)?;
                Ok(Some(ix))
            }
            // The entry's key holds the object's ETag, so it was built from these very bytes:
            // its line starts are not checked again (a request for each chunk's).
            IndexCache::Local(object) => match object.derived(&local_index_kind(params)) {
                Some(bytes) => index_cache::decode(&bytes, self.stamp(), params).map(Some),
                None => Ok(None),
            },
        }
    }

    /// Writes `ix`, built with `params`, replacing what was cached.
    fn write(&self, ix: &Index, params: CacheParams) -> std::result::Result<(), String> {
        match self {
            IndexCache::Beside { path, .. } => {
                index_cache::write(path, ix, self.stamp(), params).map_err(|e| e.to_string())
            }
            IndexCache::Local(object) => object.keep_derived(
                &local_index_kind(params),
                &index_cache::encode(ix, self.stamp(), params),
            ),
        }
    }
}

/// The key of a URL's index in the local cache, besides the object's: what the index depends
/// on, so that readers with other parameters keep indexes of their own side by side.
fn local_index_kind(params: CacheParams) -> String {
    format!("ctf-index {params:?}")
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
            chunker: Chunker::new(options.read.chunk_bytes()),
            lines: Vec::new(),
            keys: Vec::new(),
            frame_mode: options.read.frame_mode(),
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
        e.check_size(&options.ctf.limits)?;
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
fn index_file<D: ReadAt + ?Sized>(
    data: &D,
    len: u64,
    options: &CtfSourceOptions,
    block: usize,
) -> Result<Index> {
    let limits = options.ctf.limits;
    let mut b = IndexBuilder::new(options);
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
        let bytes = data.bytes_at(pos, n, &mut buf)?;
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
            e.check_size(&limits)?;
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
    use crate::options::ChunkSize;
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
            read: ReadOptions::new()
                .with_chunk_size(ChunkSize::Bytes(chunk))
                .with_index(IndexMode::Full),
        }
    }

    impl CtfSource {
        fn index(&self) -> &Index {
            match &self.layout {
                Layout::Indexed(ix) => ix,
                Layout::Ranges(_) => panic!("no index"),
            }
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
                    index_file(&f, DATA.len() as u64, &opts(chunk), block).unwrap(),
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
            let o = opts(30);
            let o = CtfSourceOptions {
                read: o.read.with_keep_in_memory(keep),
                ..o
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

    /// `path` without an index in chunks of `chunk` bytes, decoded in pieces of `piece` bytes.
    fn in_pieces(path: &std::path::Path, ctf: &CtfOptions, chunk: u64, piece: u64) -> CtfSource {
        let options = CtfSourceOptions {
            ctf: ctf.clone(),
            read: ReadOptions::new()
                .with_chunk_size(ChunkSize::Bytes(chunk))
                .with_index(IndexMode::None),
        };
        let mut source = CtfSource::open(&InputPath::new(path), options).unwrap();
        source.piece_bytes = piece;
        source
    }

    /// Each chunk of `source` decoded (its batch, or its error), then the source's diagnostics;
    /// on `pool`'s threads when given (its idle threads then take pieces).
    type Decoded = (
        Vec<std::result::Result<SequenceBatch<f32>, String>>,
        Vec<Diagnostic>,
    );
    fn decode_chunks(source: &CtfSource, pool: Option<&rayon::ThreadPool>) -> Decoded {
        let run = || {
            (0..ChunkSource::<f32>::chunks(source).len())
                .map(|c| {
                    let mut b = SequenceBatch::new(&source.specs);
                    let r = source.read_chunk(c, &mut b);
                    r.map(|()| b).map_err(|e| e.to_string())
                })
                .collect()
        };
        let chunks = pool.map_or_else(run, |p| p.install(run));
        (chunks, source.diagnostics())
    }

    #[test]
    fn a_chunk_decoded_in_pieces_is_the_chunk_decoded_whole() {
        // Generated texts: BOM, blank lines, CRLF, lines without ids, ids repeated after other
        // sequences (an error), no newline at the end, files without ids; dense values from
        // none to 11 (fewer than 12 are padded with a warning: diagnostics in file order).
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.ctf");
        let ctf = CtfOptions {
            inputs: vec![StreamSpec::new("x", Storage::Dense, 12)],
            ..CtfOptions::default()
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let mut rng = crate::reader::rng::SplitMix64::new(21);
        let (mut split, mut failed) = (0, 0);
        for case in 0..50 {
            let text = super::byte_ranges::tests::generate(&mut rng);
            if detect_key_mode(&text, false).is_none() {
                continue;
            }
            std::fs::write(&path, &text).unwrap();
            for chunk in [50, 1 << 20] {
                let whole = decode_chunks(&in_pieces(&path, &ctf, chunk, u64::MAX), None);
                failed += whole.0.iter().filter(|r| r.is_err()).count();
                for piece in [3, 20] {
                    let source = in_pieces(&path, &ctf, chunk, piece);
                    split += usize::from(source.piece_bytes < chunk);
                    for pool in [None, Some(&pool)] {
                        assert_eq!(
                            decode_chunks(&in_pieces(&path, &ctf, chunk, piece), pool),
                            whole,
                            "case {case}, chunk {chunk}, piece {piece}: {:?}",
                            String::from_utf8_lossy(&text)
                        );
                    }
                }
            }
        }
        assert!(split > 50 && failed > 5, "{split} {failed}");
    }

    #[test]
    fn errors_from_within_a_piece_name_their_place_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::new();
        for id in 0..40 {
            text += &format!("{id} |a 1 2 |b 0:1\r\n|a 3 4\n");
        }
        let place =
            |t: &str, byte: usize| (t[..byte].matches('\n').count() as u64 + 1, byte as u64);
        // A bad value in sequence 26's second line.
        let bad = text.replacen("|a 3 4\n27 ", "|a 3 x\n27 ", 1);
        let (line, byte) = place(&bad, bad.find("|a 3 x").unwrap() + 5);
        let cases = [(
            bad,
            (line, 6, byte),
            &[(1 << 20, 30), (1 << 20, 200), (300, 64), (300, u64::MAX)][..],
        )];
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for (text, (line, column, byte), layouts) in cases {
            let p = write(&dir, &text);
            for &(chunk, piece) in layouts {
                let source = in_pieces(&p, &opts(1).ctf, chunk, piece);
                for pool in [None, Some(&pool)] {
                    let first_error = || {
                        (0..ChunkSource::<f32>::chunks(&source).len()).find_map(|c| {
                            let mut b = SequenceBatch::<f32>::new(&source.specs);
                            source.read_chunk(c, &mut b).err()
                        })
                    };
                    let e = pool
                        .map_or_else(first_error, |p| p.install(first_error))
                        .unwrap();
                    let loc = e.location();
                    assert_eq!(
                        (loc.line, loc.column, loc.byte),
                        (Some(line), Some(column), Some(byte)),
                        "chunk {chunk}, piece {piece}: {e}"
                    );
                    assert!(
                        e.to_string().contains(&format!("d.ctf:{line}:{column}")),
                        "{e}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_reader_delivers_the_same_minibatches_with_or_without_pieces() {
        use crate::reader::{EpochLimit, Reader, ReaderOptions, Window};
        let dir = tempfile::tempdir().unwrap();
        let mut rng = crate::reader::rng::SplitMix64::new(8);
        let mut text = String::new();
        for id in 0..400 {
            for l in 0..1 + rng.below(3) {
                let head = if l == 0 || rng.below(2) == 0 {
                    format!("{id} ")
                } else {
                    String::new()
                };
                let end = ["\n", "\r\n"][rng.below(2) as usize];
                text += &format!("{head}|a {} {} |b {}:1{end}", rng.below(9), l, rng.below(3));
            }
        }
        let p = write(&dir, &text);
        let read = |piece: u64, threads: usize| {
            let source = Arc::new(in_pieces(&p, &opts(1).ctf, 900, piece));
            let options = ReaderOptions {
                seed: 5,
                window: Window::Chunks(2),
                limit: EpochLimit::Sweeps(2),
                num_workers: 2,
                worker_rank: 1,
                threads,
                ..ReaderOptions::default()
            };
            let mut reader = Reader::<f32>::new(source, options).unwrap();
            let mut got = Vec::new();
            reader
                .run(13, None, |mb| {
                    got.push((mb.data.clone(), mb.sequences.clone(), mb.end_of_sweep));
                    Ok(())
                })
                .unwrap();
            got
        };
        let whole = read(u64::MAX, 2);
        assert!(whole.len() > 20, "{}", whole.len());
        for (piece, threads) in [(60, 2), (60, 0), (7, 3), (300, 1)] {
            assert!(
                read(piece, threads) == whole,
                "pieces of {piece}, {threads} threads"
            );
        }
    }

    #[test]
    fn index_cache_is_reused_only_when_valid() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(&dir, DATA);
        let input = InputPath::new(&p);
        let o = opts(30);
        let o = CtfSourceOptions {
            read: o.read.with_cache_index(true),
            ..o
        };
        let first = CtfSource::open(&input, o.clone()).unwrap();
        assert_eq!(first.index_origin(), IndexOrigin::ScannedAndCached);
        let cache = index_cache_path(&p);
        assert!(cache.exists());
        let again = CtfSource::open(&input, o.clone()).unwrap();
        assert_eq!(again.index_origin(), IndexOrigin::Cache);
        assert_eq!(again.index(), first.index());
        assert!(again.diagnostics().is_empty());
        // Other parameters: rebuilt, with a warning.
        let other = CtfSource::open(
            &input,
            CtfSourceOptions {
                read: o.read.clone().with_chunk_size(ChunkSize::Bytes(7)),
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
            assert_eq!(s.index(), first.index());
            assert_eq!(s.diagnostics().len(), 1, "{cut}");
        }
        // Any damaged byte (a key, a record, the checksum itself) is caught, and the rebuilt
        // cache replaces the damaged one.
        for at in 0..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 0x55;
            std::fs::write(&cache, &bad).unwrap();
            let s = CtfSource::open(&input, o.clone()).unwrap();
            assert_eq!(s.index(), first.index(), "{at}");
            assert_eq!(s.diagnostics().len(), 1, "{at}");
            assert!(s.diagnostics()[0].message.contains("re-indexing"), "{at}");
            assert_eq!(std::fs::read(&cache).unwrap(), good, "{at}");
        }
        // A record moved off a line start, with a checksum made to match, is caught too.
        let shifted = {
            let mut ix = first.index().clone();
            ix.chunks[1].offset += 1;
            ix.chunks[1].bytes -= 1;
            let meta = std::fs::metadata(&p).unwrap();
            index_cache::encode(&ix, DataStamp::of(&meta), o.cache_params())
        };
        std::fs::write(&cache, &shifted).unwrap();
        let s = CtfSource::open(&input, o.clone()).unwrap();
        assert_eq!(s.index(), first.index());
        assert!(s.diagnostics()[0]
            .message
            .contains("chunk 1 does not start at a line start"));
        // The data changes: the cache is stale.
        CtfSource::open(&input, o.clone()).unwrap();
        std::fs::write(&p, "5 |a 1 1\n").unwrap();
        let s = CtfSource::open(&input, o).unwrap();
        assert_eq!(s.index().keys, vec![5]);
        assert_eq!(s.diagnostics().len(), 1);
    }
}
