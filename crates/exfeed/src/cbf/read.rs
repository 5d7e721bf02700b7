//! Reading CBF: the header at open, each chunk on demand.

use super::{CBF_MAGIC, PREFIX_LEN, VERSION};
use crate::batch::{SequenceBatch, StreamData};
use crate::buffers::{give_back_read_buffer, take_read_buffer};
use crate::element::{Element, Precision};
use crate::error::{Error, ErrorKind, Result};
use crate::stream::{Storage, StreamSpec};
use std::borrow::Cow;
use std::ops::Deref;

/// One stream of a CBF file, as its header says (with the name it is exposed under).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CbfStream {
    /// The stream as exposed: `name` is the one a configured alias gives ([`CbfFile::select`]),
    /// `alias` then holds the name stored in the file.
    pub spec: StreamSpec,
    /// The element type stored in the file.
    pub element: Precision,
    /// Index of the stream in the file's header.
    pub index: usize,
}

impl CbfStream {
    /// The name stored in the file.
    pub fn name_in_file(&self) -> &str {
        self.spec.name_in_file()
    }
}

/// An entry of the chunk offset table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkEntry {
    /// Byte offset of the chunk in the file.
    pub offset: u64,
    /// Byte length of the chunk (up to the next chunk or the header).
    pub len: u64,
    /// Number of sequences in the chunk.
    pub sequences: u32,
    /// Total number of samples in the chunk (sum of the per-sequence counts).
    pub samples: u32,
    /// Global index (key) of the chunk's first sequence.
    pub first_key: u64,
}

/// A CBF file over any byte buffer (a memory map, a `Vec<u8>`, a `&[u8]`), or a file read a
/// range at a time. The header is read and checked when it is opened; chunks are decoded
/// independently, in any order, without reading the others.
#[derive(Debug)]
pub struct CbfFile<B> {
    source: Source<B>,
    file_streams: Vec<CbfStream>,
    exposed: Vec<CbfStream>,
    /// The specs given to [`CbfFile::select`] that named no stream of the file.
    unmatched: Vec<StreamSpec>,
    chunks: Vec<ChunkEntry>,
    header_offset: u64,
    len: u64,
}

/// Bytes read by position: where a CBF file that is not held in memory is read from, a range at
/// a time (a local file with `pread`: see [`crate::io::open_cbf`]). The core never opens a
/// file itself; [`crate::io`] gives it one of these.
pub trait ReadAt: Send + Sync + std::fmt::Debug {
    /// Fills `buf` with the bytes at `offset`; bytes missing (the file ended) are an error.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;
    /// The length in bytes.
    fn byte_len(&self) -> Result<u64>;

    /// Whether a chunk is read whole, in one read: where each read is a request (a remote
    /// object). A local file is read in cache-sized pieces (see [`CbfFile::read_chunk`]).
    fn reads_whole_chunks(&self) -> bool {
        false
    }

    /// The `len` bytes at `offset`, in a buffer from the process's pool of read buffers: the
    /// buffer they were [fetched ahead](ReadAt::take_fetched_ahead) into, handed over
    /// uncopied, or else read now.
    fn read_whole_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        if let Some(fetched) = self.take_fetched_ahead(offset, len)? {
            return Ok(fetched);
        }
        let mut buf = take_read_buffer(len);
        self.read_exact_at(&mut buf, offset)?;
        Ok(buf)
    }

    /// The bytes `offset..offset + len` fetched ahead ([`ReadAt::fetch_ahead`]), in a buffer
    /// from the process's pool; `None` when they were not (a failed fetch is this read's
    /// error). Default: none.
    fn take_fetched_ahead(&self, offset: u64, len: usize) -> Result<Option<Vec<u8>>> {
        let _ = (offset, len);
        Ok(None)
    }

    /// Names the bytes `offset..offset + len` for fetching ahead of the read that asks for them
    /// (a remote object, see [`crate::fetch_ahead`]); `None`: never fetched ahead. Default:
    /// none.
    fn fetch_ahead(&self, offset: u64, len: u64) -> Option<crate::fetch_ahead::FetchTicket> {
        let _ = (offset, len);
        None
    }
}

/// Where the bytes of a [`CbfFile`] are.
#[derive(Debug)]
enum Source<B> {
    /// All in memory.
    Memory(B),
    /// Read by range: the header at open and each chunk when it is decoded, into a buffer from
    /// the process's pool of read buffers (shared by the decoding threads).
    Ranges(Box<dyn ReadAt>),
}

impl<B: Deref<Target = [u8]>> Source<B> {
    /// The whole file, when it is in memory.
    fn bytes(&self) -> Option<&[u8]> {
        match self {
            Source::Memory(b) => Some(b),
            Source::Ranges(_) => None,
        }
    }

    /// Bytes `offset..offset + len` of the file (in range: the caller checked).
    fn read(&self, offset: u64, len: usize) -> Result<Cow<'_, [u8]>> {
        match self.bytes() {
            Some(b) => Ok(Cow::Borrowed(&b[offset as usize..offset as usize + len])),
            None => {
                let mut buf = vec![0; len];
                self.read_into(offset, &mut buf)?;
                Ok(Cow::Owned(buf))
            }
        }
    }

    /// Reads `buf.len()` bytes at `offset` from the file (read by range only).
    fn read_into(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let Source::Ranges(file) = self else {
            unreachable!("only a file read by range reads")
        };
        file.read_exact_at(buf, offset)
            .map_err(|e| e.in_context(format!("reading {} bytes at byte {offset}", buf.len())))
    }
}

fn corrupt(byte: u64, message: impl Into<String>) -> Error {
    Error::corrupt(byte, message)
}

/// Checks that `count` items of `size` bytes fit in the `remaining` bytes from file offset `at`,
/// before anything is allocated for them; returns the byte length. The description is only
/// built on error (this runs for every sequence of every stream, where formatting it eagerly
/// costs more than the checks themselves).
#[inline]
fn check_fits_at(
    at: u64,
    remaining: usize,
    count: u64,
    size: u64,
    what: impl FnOnce() -> String,
) -> Result<usize> {
    match count.checked_mul(size) {
        Some(n) if n <= remaining as u64 => Ok(n as usize),
        _ => Err(corrupt(
            at,
            format!(
                "{}: {count} x {size} bytes do not fit in the {remaining} bytes left before byte {}",
                what(),
                at + remaining as u64
            ),
        )),
    }
}

/// Bytes taken in order and bounds-checked, errors giving file offsets: from memory
/// ([`Cursor`]) or from a file a piece at a time ([`Pieces`]).
trait TakeBytes {
    /// The file offset of the next byte.
    fn at(&self) -> u64;

    /// Bytes left.
    fn remaining(&self) -> usize;

    /// The next `n` bytes; `n <= remaining()` (the caller checked).
    fn next(&mut self, n: usize) -> Result<&[u8]>;

    /// Bytes worth taking at once where a run of values can be taken in parts.
    fn piece(&self) -> usize;

    /// Takes `n` bytes, or says that `what` is truncated.
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8]> {
        if n > self.remaining() {
            return Err(corrupt(
                self.at(),
                format!(
                    "{what}: needs {n} bytes, only {} left before byte {}",
                    self.remaining(),
                    self.at() + self.remaining() as u64
                ),
            ));
        }
        self.next(n)
    }

    /// Checks that `count` items of `size` bytes fit in what is left, before anything is
    /// allocated for them; returns the byte length.
    fn check_fits(&self, count: u64, size: u64, what: &str) -> Result<usize> {
        check_fits_at(self.at(), self.remaining(), count, size, || {
            what.to_string()
        })
    }

    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4, what)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8 bytes"),
        ))
    }
    /// A signed 32-bit count or index that must not be negative.
    fn count_i32(&mut self, what: &str) -> Result<u32> {
        let at = self.at();
        let v = i32::from_le_bytes(self.take(4, what)?.try_into().expect("4 bytes"));
        u32::try_from(v).map_err(|_| corrupt(at, format!("{what} is negative ({v})")))
    }
}

/// Bytes in memory: `buf[pos..end]`, `buf` starting at byte `base` of the file.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
    base: u64,
}

impl<'a> Cursor<'a> {
    fn new(buf: &'a [u8], pos: usize, end: usize) -> Self {
        Cursor {
            buf,
            pos,
            end,
            base: 0,
        }
    }

    /// A cursor over all of `buf`, which is at byte `base` of the file.
    fn at_base(buf: &'a [u8], base: u64) -> Self {
        Cursor {
            buf,
            pos: 0,
            end: buf.len(),
            base,
        }
    }
}

impl TakeBytes for Cursor<'_> {
    fn at(&self) -> u64 {
        self.base + self.pos as u64
    }

    fn remaining(&self) -> usize {
        self.end - self.pos
    }

    #[inline]
    fn next(&mut self, n: usize) -> Result<&[u8]> {
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn piece(&self) -> usize {
        usize::MAX
    }
}

/// The bytes a file read by range holds read into memory at a time, as a rule: a piece small
/// enough to stay in the CPU's cache (L2) until the decode has copied its values out, where a
/// whole chunk read at once is back in main memory by then (the copy out of the kernel and the
/// decode's copy then each cost a pass over memory; a map's decode made one).
const PIECE: usize = 256 << 10;

/// Bytes `offset..offset + len` of a file read by range, a piece at a time (more when one take
/// needs more: never more than the range) into a buffer from the process's pool.
struct Pieces<'a> {
    file: &'a dyn ReadAt,
    /// Bytes read at a time.
    piece: usize,
    buf: Vec<u8>,
    /// The file offset of `buf[0]`.
    buf_at: u64,
    /// Bytes of `buf` read so far.
    filled: usize,
    /// The next byte of `buf` to take.
    pos: usize,
    /// The file offset where the range ends.
    end: u64,
}

impl<'a> Pieces<'a> {
    /// The range read a piece at a time; one no longer than a piece is read at once.
    fn new(file: &'a dyn ReadAt, offset: u64, len: u64, piece: usize) -> Result<Self> {
        let mut pieces = Pieces {
            file,
            piece,
            buf: Vec::new(),
            buf_at: offset,
            filled: 0,
            pos: 0,
            end: offset + len,
        };
        if len <= piece as u64 {
            pieces.buf = file
                .read_whole_at(offset, len as usize)
                .map_err(|e| e.in_context(format!("reading {len} bytes at byte {offset}")))?;
            pieces.filled = len as usize;
        } else {
            pieces.buf = take_read_buffer(piece);
        }
        Ok(pieces)
    }

    /// Reads on until `n` bytes are there to take (`n <= remaining()`): what is left of the
    /// piece moves to the front of the buffer, and the next piece follows it.
    fn read_on(&mut self, n: usize) -> Result<()> {
        self.buf.copy_within(self.pos..self.filled, 0);
        self.buf_at += self.pos as u64;
        self.filled -= self.pos;
        self.pos = 0;
        let want = n.max(self.piece).min(self.remaining());
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        let offset = self.buf_at + self.filled as u64;
        let len = want - self.filled;
        self.file
            .read_exact_at(&mut self.buf[self.filled..want], offset)
            .map_err(|e| e.in_context(format!("reading {len} bytes at byte {offset}")))?;
        self.filled = want;
        Ok(())
    }
}

impl TakeBytes for Pieces<'_> {
    fn at(&self) -> u64 {
        self.buf_at + self.pos as u64
    }

    fn remaining(&self) -> usize {
        (self.end - self.at()) as usize
    }

    #[inline]
    fn next(&mut self, n: usize) -> Result<&[u8]> {
        if n > self.filled - self.pos {
            self.read_on(n)?;
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn piece(&self) -> usize {
        self.piece
    }
}

impl Drop for Pieces<'_> {
    fn drop(&mut self) {
        give_back_read_buffer(std::mem::take(&mut self.buf));
    }
}

fn read_i32_le(b: &[u8]) -> i32 {
    i32::from_le_bytes(b.try_into().expect("4 bytes"))
}

impl<B: Deref<Target = [u8]>> CbfFile<B> {
    /// Opens a CBF file held in `bytes`: checks the prefix, the trailing header offset, the
    /// sentinel, the stream headers and the chunk offset table (offsets in range and
    /// increasing, sequence counts that fit in the chunks' bytes).
    pub fn open(bytes: B) -> Result<Self> {
        let len = bytes.len() as u64;
        Self::from_source(Source::Memory(bytes), len)
    }

    /// Opens a CBF file read a range at a time from `file` (see [`ReadAt`]): the header now,
    /// each chunk with one read when it is decoded. Errors do not name the file.
    pub fn open_ranges(file: Box<dyn ReadAt>) -> Result<Self> {
        let len = file.byte_len()?;
        Self::from_source(Source::Ranges(file), len)
    }

    fn from_source(source: Source<B>, len: u64) -> Result<Self> {
        let (file_streams, chunks, header_offset) = parse_header(&source, len)?;
        Ok(CbfFile {
            source,
            exposed: file_streams.clone(),
            unmatched: Vec::new(),
            file_streams,
            chunks,
            header_offset,
            len,
        })
    }

    /// The file's bytes when they are in memory (or mapped); `None` for the buffered fallback.
    pub fn bytes(&self) -> Option<&[u8]> {
        self.source.bytes()
    }

    /// Whether chunks are read from the file with positioned reads (the buffered fallback)
    /// rather than from memory or a memory map.
    pub fn is_buffered(&self) -> bool {
        matches!(self.source, Source::Ranges { .. })
    }

    /// Size of the file in bytes.
    pub fn file_len(&self) -> u64 {
        self.len
    }

    /// Byte offset of the header.
    pub fn header_offset(&self) -> u64 {
        self.header_offset
    }

    /// Number of chunks.
    pub fn num_chunks(&self) -> usize {
        self.chunks.len()
    }

    /// The offset table entry of chunk `i` (panics if `i >= num_chunks()`).
    pub fn chunk_info(&self, i: usize) -> ChunkEntry {
        self.chunks[i]
    }

    /// All chunk table entries.
    pub fn chunks(&self) -> &[ChunkEntry] {
        &self.chunks
    }

    /// Number of sequences in the file.
    pub fn num_sequences(&self) -> u64 {
        self.chunks
            .last()
            .map_or(0, |c| c.first_key + u64::from(c.sequences))
    }

    /// Number of samples in the file (sum of the per-sequence counts).
    pub fn num_samples(&self) -> u64 {
        self.chunks.iter().map(|c| u64::from(c.samples)).sum()
    }

    /// The streams [`read_chunk`](Self::read_chunk) produces, in order: all streams of the file,
    /// under their stored names unless [`select`](Self::select) renamed some.
    pub fn streams(&self) -> &[CbfStream] {
        &self.exposed
    }

    /// All streams of the file, in header order, under their stored names.
    pub fn file_streams(&self) -> &[CbfStream] {
        &self.file_streams
    }

    /// The exposed streams as [`StreamSpec`]s (for building a [`SequenceBatch`]).
    pub fn stream_specs(&self) -> Vec<StreamSpec> {
        self.exposed.iter().map(|s| s.spec.clone()).collect()
    }

    /// Renames streams as CNTK's binary reader does: every stream of the file is exposed, in
    /// header order; one whose stored name is a spec's [`StreamSpec::name_in_file`] (its
    /// `alias` if set, else its `name`) is exposed under `spec.name`. A spec that names no
    /// stream of the file renames nothing: [`rename_warnings`](Self::rename_warnings) names
    /// it (CNTK ignores it silently). A spec's `dim` of 0 takes the file's; otherwise storage and dim must match the
    /// file's, and two specs may not rename one stream nor two streams end up with one name
    /// (a [`ErrorKind::Config`] error says which).
    pub fn select(&mut self, specs: &[StreamSpec]) -> Result<()> {
        let mut exposed = self.file_streams.clone();
        let mut renamed_by: Vec<Option<&str>> = vec![None; exposed.len()];
        let mut unmatched = Vec::new();
        for spec in specs {
            let in_file = spec.name_in_file();
            let Some(i) = self
                .file_streams
                .iter()
                .position(|s| s.spec.name == in_file)
            else {
                unmatched.push(spec.clone());
                continue;
            };
            let file_spec = &self.file_streams[i].spec;
            if spec.dim != 0 && (spec.dim != file_spec.dim || spec.storage != file_spec.storage) {
                return Err(Error::config(format!(
                    "input '{}': configured as {} dim {}, the file's stream '{in_file}' is {} dim {}",
                    spec.name, spec.storage, spec.dim, file_spec.storage, file_spec.dim
                )));
            }
            if let Some(other) = renamed_by[i] {
                return Err(Error::config(format!(
                    "inputs '{other}' and '{}' both name the file's stream '{in_file}'",
                    spec.name
                )));
            }
            renamed_by[i] = Some(&spec.name);
            let e = &mut exposed[i].spec;
            e.name = spec.name.clone();
            e.alias = (spec.name != in_file).then(|| in_file.to_string());
            e.defines_mb_size = spec.defines_mb_size;
        }
        for (i, e) in exposed.iter().enumerate() {
            if let Some(other) = exposed[..i].iter().find(|o| o.spec.name == e.spec.name) {
                return Err(Error::config(format!(
                    "the file's streams '{}' and '{}' would both be named '{}'",
                    other.name_in_file(),
                    e.name_in_file(),
                    e.spec.name
                )));
            }
        }
        self.exposed = exposed;
        self.unmatched = unmatched;
        Ok(())
    }

    /// A warning for each spec [`select`](Self::select) found no stream for.
    pub fn rename_warnings(&self) -> Vec<String> {
        let names: Vec<&str> = self
            .file_streams
            .iter()
            .map(|s| s.spec.name.as_str())
            .collect();
        self.unmatched
            .iter()
            .map(|spec| {
                format!(
                    "input '{}': the file has no stream '{}' (it has {}); ignored, as CNTK \
                     ignores it",
                    spec.name,
                    spec.name_in_file(),
                    names.join(", ")
                )
            })
            .collect()
    }

    /// The per-sequence sample counts chunk `i` starts with (what CNTK's binary reader gives
    /// its randomizer), without decoding the chunk.
    pub fn sequence_samples(&self, i: usize) -> Result<Vec<u32>> {
        let info = self.chunk_info(i);
        let len = info.sequences as usize * 4;
        if len as u64 > info.len {
            return Err(corrupt(
                info.offset,
                format!(
                    "chunk {i}: {} sequences do not fit its {} bytes",
                    info.sequences, info.len
                ),
            ));
        }
        let mut own = vec![0u8; len];
        let bytes: &[u8] = match &self.source {
            Source::Memory(b) => &b[info.offset as usize..info.offset as usize + len],
            Source::Ranges { .. } => {
                self.source.read_into(info.offset, &mut own)?;
                &own
            }
        };
        Ok(bytes
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }

    /// Decodes chunk `i` into `batch` (cleared first; rebuilt if its streams do not match
    /// [`streams`](Self::streams)), checking every count, offset and index. Values are
    /// converted to `T` when the file's element type differs. Keys are global sequence indices.
    /// A file read by range is read and decoded 256 KiB at a time, each piece while it is in the
    /// CPU's cache; one that [reads whole chunks](ReadAt::reads_whole_chunks) in one read.
    pub fn read_chunk<T: Element>(&self, i: usize, batch: &mut SequenceBatch<T>) -> Result<()> {
        self.read_chunk_in_pieces(i, batch, PIECE)
    }

    /// [`read_chunk`](Self::read_chunk), a file read by range being read `piece` bytes at a
    /// time.
    pub(super) fn read_chunk_in_pieces<T: Element>(
        &self,
        i: usize,
        batch: &mut SequenceBatch<T>,
        piece: usize,
    ) -> Result<()> {
        let Some(&info) = self.chunks.get(i) else {
            return Err(Error::new(
                ErrorKind::Invalid,
                crate::Location::default(),
                format!(
                    "chunk {i} does not exist (the file has {})",
                    self.chunks.len()
                ),
            ));
        };
        let matches = batch.streams().len() == self.exposed.len()
            && batch
                .streams()
                .iter()
                .zip(&self.exposed)
                .all(|(b, e)| b.storage() == e.spec.storage && b.dim() == e.spec.dim);
        if matches {
            batch.clear();
        } else {
            *batch = SequenceBatch::new(&self.stream_specs());
        }
        // The chunk's range was checked against the file's length at open.
        let decoded = match &self.source {
            Source::Memory(b) => {
                let bytes = &b[info.offset as usize..(info.offset + info.len) as usize];
                let mut c = Cursor::at_base(bytes, info.offset);
                decode_chunk(&mut c, i, info, &self.file_streams, &self.exposed, batch)
            }
            Source::Ranges(file) => {
                let piece = if file.reads_whole_chunks() {
                    info.len as usize
                } else {
                    piece
                };
                Pieces::new(file.as_ref(), info.offset, info.len, piece).and_then(|mut c| {
                    decode_chunk(&mut c, i, info, &self.file_streams, &self.exposed, batch)
                })
            }
        };
        decoded.map_err(|e| {
            batch.clear();
            if e.location().context.is_none() {
                e.in_context(format!("chunk {i}"))
            } else {
                e
            }
        })
    }

    /// Names chunk `i`'s bytes for fetching ahead of its decoding, where the file is a remote
    /// object ([`ReadAt::fetch_ahead`]); `None`: never fetched ahead.
    pub fn fetch_ahead(&self, i: usize) -> Option<crate::fetch_ahead::FetchTicket> {
        let (Source::Ranges(file), Some(info)) = (&self.source, self.chunks.get(i)) else {
            return None;
        };
        file.fetch_ahead(info.offset, info.len)
    }

    /// Reads every chunk, checking it (for `exfeed check`); returns the number of sequences.
    pub fn validate_all(&self) -> Result<u64> {
        let mut batch = SequenceBatch::<f32>::new(&self.stream_specs());
        for i in 0..self.chunks.len() {
            self.read_chunk(i, &mut batch)?;
        }
        Ok(self.num_sequences())
    }
}

type Header = (Vec<CbfStream>, Vec<ChunkEntry>, u64);

/// Checks that `head`, the first bytes of a file, starts with CBF's magic: what can be refused
/// before a stream is read whole.
pub(crate) fn check_magic(head: &[u8]) -> Result<()> {
    let Some(magic) = head.get(..8) else {
        return Err(corrupt(
            0,
            format!(
                "not a CBF file: {} bytes, too short for the magic",
                head.len()
            ),
        ));
    };
    let magic = u64::from_le_bytes(magic.try_into().expect("8 bytes"));
    if magic != CBF_MAGIC {
        return Err(corrupt(
            0,
            format!("not a CBF file: magic is {magic:#018x}, expected {CBF_MAGIC:#018x}"),
        ));
    }
    Ok(())
}

fn parse_header<B: Deref<Target = [u8]>>(source: &Source<B>, len: u64) -> Result<Header> {
    // Prefix + header sentinel, counts and the trailing offset.
    const MIN_LEN: u64 = PREFIX_LEN + 8 + 4 + 4 + 8;
    let prefix = source.read(0, len.min(PREFIX_LEN) as usize)?;
    check_magic(&prefix)?;
    let mut c = Cursor::new(&prefix, 8, prefix.len());
    let version = c.u32("version")?;
    if version != VERSION {
        return Err(corrupt(
            8,
            format!("unsupported CBF version {version}, expected {VERSION}"),
        ));
    }
    if len < MIN_LEN {
        return Err(corrupt(
            len,
            format!("truncated: {len} bytes, a CBF file has at least {MIN_LEN}"),
        ));
    }
    let tail = len - 8;
    let header_offset =
        i64::from_le_bytes(source.read(tail, 8)?.as_ref().try_into().expect("8 bytes"));
    if header_offset < PREFIX_LEN as i64 || header_offset as u64 > tail - 16 {
        return Err(corrupt(
            tail,
            format!(
                "header offset {header_offset} is out of range (expected {PREFIX_LEN}..={})",
                tail - 16
            ),
        ));
    }
    let header_offset = header_offset as u64;
    // The sentinel first: the buffered fallback reads the rest of the header (no more than
    // the file's length) only when it is there.
    let sentinel = u64::from_le_bytes(
        source
            .read(header_offset, 8)?
            .as_ref()
            .try_into()
            .expect("8 bytes"),
    );
    if sentinel != CBF_MAGIC {
        return Err(corrupt(
            header_offset,
            format!(
                "header sentinel is {sentinel:#018x}, expected {CBF_MAGIC:#018x} (bad header offset?)"
            ),
        ));
    }
    let header = source.read(header_offset, (tail - header_offset) as usize)?;
    let mut c = Cursor::at_base(&header, header_offset);
    c.u64("header sentinel")?;
    let num_chunks = c.u32("chunk count")?;
    let num_streams = c.u32("stream count")?;
    if num_streams == 0 {
        return Err(corrupt(c.at() - 4, "the header declares no streams"));
    }
    // A stream header is at least 10 bytes, a chunk header 16.
    c.check_fits(u64::from(num_streams), 10, "stream headers")?;
    let mut streams: Vec<CbfStream> = Vec::with_capacity(num_streams as usize);
    for index in 0..num_streams as usize {
        let at = c.at();
        let ctx = |e: Error| e.in_context(format!("stream header {index}"));
        let storage = match c.u8("storage type").map_err(ctx)? {
            0 => Storage::Dense,
            1 => Storage::Sparse,
            t => {
                return Err(ctx(corrupt(
                    at,
                    format!("storage type is {t}, expected 0 (dense) or 1 (sparse)"),
                )))
            }
        };
        let name_len = c.u32("name length").map_err(ctx)?;
        let name_at = c.at();
        let n = c
            .check_fits(u64::from(name_len), 1, "stream name")
            .map_err(ctx)?;
        let name = std::str::from_utf8(c.take(n, "stream name").map_err(ctx)?)
            .map_err(|_| ctx(corrupt(name_at, "stream name is not valid UTF-8")))?
            .to_string();
        if name.is_empty() {
            return Err(ctx(corrupt(name_at, "stream name is empty")));
        }
        if streams.iter().any(|s| s.spec.name == name) {
            return Err(ctx(corrupt(
                name_at,
                format!("stream name '{name}' appears twice"),
            )));
        }
        let et_at = c.at();
        let element = match c.u8("element type").map_err(ctx)? {
            0 => Precision::Float,
            1 => Precision::Double,
            t => {
                return Err(ctx(corrupt(
                    et_at,
                    format!("element type is {t}, expected 0 (float) or 1 (double)"),
                )))
            }
        };
        let dim_at = c.at();
        let dim = c.u32("sample dim").map_err(ctx)?;
        if dim == 0 {
            return Err(ctx(corrupt(dim_at, "sample dim is 0")));
        }
        if storage == Storage::Sparse && dim > i32::MAX as u32 {
            return Err(ctx(corrupt(
                dim_at,
                format!("sparse dim {dim} exceeds the largest index"),
            )));
        }
        streams.push(CbfStream {
            spec: StreamSpec::new(name, storage, dim as usize),
            element,
            index,
        });
    }
    let table_at = c.at();
    let table_len = c.check_fits(u64::from(num_chunks), 16, "chunk offset table")?;
    if table_len != c.remaining() {
        return Err(corrupt(
            table_at,
            format!(
                "chunk offset table of {num_chunks} entries is {table_len} bytes, but {} bytes are left before the header offset",
                c.remaining()
            ),
        ));
    }
    let min_seq_bytes = 4 * (1 + u64::from(num_streams));
    let mut raw = Vec::with_capacity(num_chunks as usize);
    for _ in 0..num_chunks {
        let at = c.at();
        let offset = c.u64("chunk offset")?;
        let sequences = c.u32("chunk sequence count")?;
        let samples = c.u32("chunk sample count")?;
        raw.push((at, offset, sequences, samples));
    }
    let mut chunks = Vec::with_capacity(raw.len());
    let mut expected = PREFIX_LEN;
    let mut first_key = 0u64;
    for (i, &(at, offset, sequences, samples)) in raw.iter().enumerate() {
        let ctx = |e: Error| e.in_context(format!("chunk table entry {i}"));
        if offset != expected {
            return Err(ctx(corrupt(
                at,
                format!(
                    "chunk offset is {offset}, expected {expected} (where the previous chunk ends)"
                ),
            )));
        }
        let end = raw.get(i + 1).map_or(header_offset, |r| r.1);
        if end < offset || end > header_offset {
            return Err(ctx(corrupt(
                at + 16,
                format!("chunk {i} would end at {end}, outside {offset}..={header_offset}"),
            )));
        }
        let len = end - offset;
        if u64::from(sequences) * min_seq_bytes > len {
            return Err(ctx(corrupt(
                at + 8,
                format!("{sequences} sequences cannot fit in the chunk's {len} bytes"),
            )));
        }
        chunks.push(ChunkEntry {
            offset,
            len,
            sequences,
            samples,
            first_key,
        });
        first_key += u64::from(sequences);
        expected = end;
    }
    if expected != header_offset {
        return Err(corrupt(
            expected,
            format!(
                "{} bytes between the last chunk and the header",
                header_offset - expected
            ),
        ));
    }
    Ok((streams, chunks, header_offset))
}

/// Decodes chunk `chunk` from `c` in one pass over its bytes, in file order (a stream's
/// sequences, then the next stream's), checking each count, offset and index before its values
/// are copied. On an error the batch holds part of the chunk (the caller clears it).
fn decode_chunk<T: Element>(
    c: &mut impl TakeBytes,
    chunk: usize,
    info: ChunkEntry,
    file_streams: &[CbfStream],
    exposed: &[CbfStream],
    batch: &mut SequenceBatch<T>,
) -> Result<()> {
    let s = info.sequences as usize;
    // Checked at open: the 4*S bytes of meta counts (and 4*S per stream) fit in the chunk.
    let meta: Vec<u32> = c
        .take(4 * s, "sequence sample counts")?
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4")))
        .collect();
    let total: u64 = meta.iter().map(|&m| u64::from(m)).sum();
    if total != u64::from(info.samples) {
        return Err(corrupt(
            info.offset,
            format!(
                "the sequences' sample counts add up to {total}, the chunk table says {}",
                info.samples
            ),
        ));
    }
    let mut matched = vec![false; s];
    batch.reserve_sequences(s);
    for (f, fs) in file_streams.iter().enumerate() {
        let ctx = |e: Error| e.in_context(format!("chunk {chunk}, stream '{}'", fs.spec.name));
        let t = exposed
            .iter()
            .position(|e| e.index == f)
            .expect("every stream of the file is exposed");
        let out = batch.stream_mut(t);
        let (dim, es) = (fs.spec.dim, fs.element.size());
        let samples_per_take = (c.piece() / (dim * es)).max(1);
        if fs.spec.storage == Storage::Dense {
            // The chunk's samples, as far as the bytes left can hold them.
            out.reserve(
                0,
                (total as usize).saturating_mul(dim).min(c.remaining() / es),
            );
        }
        for (k, matched) in matched.iter_mut().enumerate() {
            let n = c.u32("sample count").map_err(ctx)?;
            if n == meta[k] {
                *matched = true;
            }
            match fs.spec.storage {
                Storage::Dense => {
                    // In parts of up to a piece (one sample at least).
                    let values = u64::from(n) * dim as u64;
                    check_fits_at(c.at(), c.remaining(), values, es as u64, || {
                        format!("sequence {k}: {n} dense samples")
                    })
                    .map_err(ctx)?;
                    let mut left = n as usize;
                    while left > 0 {
                        let m = left.min(samples_per_take);
                        let bytes = c.next(m * dim * es).map_err(ctx)?;
                        match fs.element {
                            Precision::Float => out.extend_dense_samples(m, f32_values(bytes)),
                            Precision::Double => out.extend_dense_samples(m, f64_values(bytes)),
                        }
                        left -= m;
                    }
                }
                Storage::Sparse => fill_sparse(c, n, k, fs, out).map_err(ctx)?,
            }
            out.finish_sequence();
        }
    }
    if c.remaining() != 0 {
        return Err(corrupt(
            c.at(),
            format!("{} bytes left over at the end of the chunk", c.remaining()),
        ));
    }
    if let Some(k) = matched.iter().position(|m| !m) {
        return Err(corrupt(
            info.offset + 4 * k as u64,
            format!(
                "sequence {k}: sample count {} matches none of its streams' sample counts",
                meta[k]
            ),
        ));
    }
    batch.push_keys(info.first_key..info.first_key + s as u64);
    Ok(())
}

/// Appends sequence `k` of sparse stream `e` (`n` samples), checking its counts and indices.
fn fill_sparse<T: Element>(
    c: &mut impl TakeBytes,
    n: u32,
    k: usize,
    e: &CbfStream,
    out: &mut StreamData<T>,
) -> Result<()> {
    let nnz_at = c.at();
    let nnz = c.count_i32("nnz")?;
    // The values, the indices and the per-sample counts follow: each checked to fit, then
    // taken at once.
    let (values_at, left) = (c.at(), c.remaining());
    let es = e.element.size() as u64;
    let values_len = check_fits_at(values_at, left, u64::from(nnz), es, || {
        format!("sequence {k}: {nnz} sparse values")
    })?;
    let (idx_at, left) = (values_at + values_len as u64, left - values_len);
    let idx_len = check_fits_at(idx_at, left, u64::from(nnz), 4, || {
        format!("sequence {k}: {nnz} sparse indices")
    })?;
    let (counts_at, left) = (idx_at + idx_len as u64, left - idx_len);
    let counts_len = check_fits_at(counts_at, left, u64::from(n), 4, || {
        format!("sequence {k}: {n} per-sample nnz counts")
    })?;
    let body = c.next(values_len + idx_len + counts_len)?;
    let (values, rest) = body.split_at(values_len);
    let (idxs, counts) = rest.split_at(idx_len);
    let mut sum = 0u64;
    for (j, cnt) in counts.chunks_exact(4).enumerate() {
        let v = read_i32_le(cnt);
        if v < 0 {
            return Err(corrupt(
                counts_at + 4 * j as u64,
                format!("sequence {k}: sample {j} has a negative nnz count ({v})"),
            ));
        }
        sum += v as u64;
    }
    if sum != u64::from(nnz) {
        return Err(corrupt(
            nnz_at,
            format!("sequence {k}: nnz is {nnz}, the per-sample counts add up to {sum}"),
        ));
    }
    let dim = e.spec.dim as u64;
    for (j, ix) in idxs.chunks_exact(4).enumerate() {
        let v = read_i32_le(ix);
        if v < 0 || v as u64 >= dim {
            return Err(corrupt(
                idx_at + 4 * j as u64,
                format!("sequence {k}: index {v} is outside [0, {dim})"),
            ));
        }
    }
    let indices = idxs.chunks_exact(4).map(|b| read_i32_le(b) as u32);
    let counts = counts.chunks_exact(4).map(|b| read_i32_le(b) as usize);
    match e.element {
        Precision::Float => out.extend_sparse_samples(indices, f32_values(values), counts),
        Precision::Double => out.extend_sparse_samples(indices, f64_values(values), counts),
    }
    Ok(())
}

/// Little-endian `f32`s, as `T`.
fn f32_values<T: Element>(bytes: &[u8]) -> impl Iterator<Item = T> + '_ {
    bytes
        .chunks_exact(4)
        .map(|v| T::from_f32(f32::from_le_bytes(v.try_into().expect("4"))))
}

/// Little-endian `f64`s, as `T`.
fn f64_values<T: Element>(bytes: &[u8]) -> impl Iterator<Item = T> + '_ {
    bytes
        .chunks_exact(8)
        .map(|v| T::from_f64(f64::from_le_bytes(v.try_into().expect("8"))))
}
