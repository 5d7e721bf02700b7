//! Writing CBF.

use super::{ChunkEntry, CBF_MAGIC, PREFIX_LEN, VERSION};
use crate::batch::{SequenceBatch, StreamData};
use crate::element::{Element, Precision};
use crate::error::{Error, Result};
use crate::stream::{Storage, StreamSpec};
use std::io::Write;

/// Options of [`CbfWriter`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CbfWriterOptions {
    /// A chunk stays within this many bytes unless one sequence alone is larger.
    pub chunk_size: u64,
    /// The element type written for every stream.
    pub precision: Precision,
}

impl Default for CbfWriterOptions {
    fn default() -> Self {
        CbfWriterOptions {
            chunk_size: crate::limits::DEFAULT_CHUNK_SIZE_BYTES,
            precision: Precision::Float,
        }
    }
}

/// Writes a CBF file to any [`Write`] (e.g. [`crate::io::AtomicOutput`]): the prefix at once,
/// chunks of whole sequences as they fill up, the header on [`finish`](Self::finish).
///
/// Streams are stored under [`StreamSpec::name`]. The per-sequence sample count is that of the
/// stream marked `defines_mb_size`, or else the largest over the sequence's streams. Sparse
/// pairs are written sorted by index within each sample.
///
/// Sequences are encoded a batch at a time (by worker threads, in a conversion);
/// the open chunk keeps the encoded batches and is written straight from them when it is full,
/// one write per stream and batch, without copying the bytes again.
pub struct CbfWriter<W: Write> {
    out: W,
    encoder: CbfEncoder,
    chunk_size: u64,
    /// The open chunk: sequences `start..end` of each batch, in order (the first batch may have
    /// begun in the previous chunk, the last may continue into the next one).
    open: Vec<Segment>,
    chunk_bytes: u64,
    chunk_sequences: u32,
    chunk_samples: u32,
    chunks: Vec<ChunkEntry>,
    position: u64,
    sequences: u64,
    /// Written batches, kept for their buffers ([`take_spare`](Self::take_spare)).
    spare: Vec<EncodedBatch>,
    meta: Vec<u8>,
}

/// Part of an encoded batch in the open chunk.
struct Segment {
    batch: EncodedBatch,
    start: usize,
    end: usize,
}

/// Written batches kept for reuse beyond this many are dropped (bounds what a caller that never
/// takes them back leaves in memory).
const MAX_SPARE: usize = 16;

fn invalid(message: impl Into<String>) -> Error {
    Error::invalid(0, message).without_byte()
}

trait WithoutByte {
    fn without_byte(self) -> Self;
}
impl WithoutByte for Error {
    fn without_byte(mut self) -> Self {
        self.location_mut().byte = None;
        self
    }
}

impl<W: Write> CbfWriter<W> {
    /// Starts a CBF file with these streams (at least one) and writes its prefix.
    pub fn new(mut out: W, streams: &[StreamSpec], options: CbfWriterOptions) -> Result<Self> {
        if streams.is_empty() {
            return Err(Error::config("a CBF file needs at least one stream"));
        }
        for (i, s) in streams.iter().enumerate() {
            if s.dim == 0 || s.dim > i32::MAX as usize {
                return Err(Error::config(format!(
                    "stream '{}': dim {} is out of range",
                    s.name, s.dim
                )));
            }
            if u32::try_from(s.name.len()).is_err() || s.name.is_empty() {
                return Err(Error::config(format!("stream {i}: bad name length")));
            }
            if streams[..i].iter().any(|o| o.name == s.name) {
                return Err(Error::config(format!("stream '{}' is given twice", s.name)));
            }
        }
        let mut prefix = Vec::with_capacity(PREFIX_LEN as usize);
        prefix.extend_from_slice(&CBF_MAGIC.to_le_bytes());
        prefix.extend_from_slice(&VERSION.to_le_bytes());
        out.write_all(&prefix)?;
        Ok(CbfWriter {
            out,
            encoder: CbfEncoder {
                specs: streams.to_vec(),
                defining: streams.iter().position(|s| s.defines_mb_size),
                precision: options.precision,
            },
            chunk_size: options.chunk_size,
            open: Vec::new(),
            chunk_bytes: 0,
            chunk_sequences: 0,
            chunk_samples: 0,
            chunks: Vec::new(),
            position: PREFIX_LEN,
            sequences: 0,
            spare: Vec::new(),
            meta: Vec::new(),
        })
    }

    /// The chunks written so far.
    pub fn chunks(&self) -> &[ChunkEntry] {
        &self.chunks
    }

    /// Number of sequences accepted so far.
    pub fn sequences(&self) -> u64 {
        self.sequences
    }

    /// Appends every sequence of `batch` (its streams must match the writer's, in order). On an
    /// error in a sequence, the sequences before it are kept and nothing of it is.
    pub fn write_batch<T: Element>(&mut self, batch: &SequenceBatch<T>) -> Result<()> {
        // Small batches (a sequence at a time) go on the end of the last batch of the open
        // chunk rather than each into a batch of its own, unless a chunk boundary split it.
        match self.open.last_mut() {
            Some(seg) if seg.start == 0 && seg.end == seg.batch.len() => {
                let from = seg.end;
                self.encoder.check(batch)?;
                self.encoder.append(batch, &mut seg.batch);
                self.take_sequences(from)
            }
            _ => {
                let mut enc = self.spare.pop().unwrap_or_default();
                self.encoder.encode_into(batch, &mut enc)?;
                self.write_encoded(enc)
            }
        }
    }

    /// An encoder of batches for this writer, usable on other threads (see [`CbfEncoder`]).
    pub(crate) fn encoder(&self) -> CbfEncoder {
        self.encoder.clone()
    }

    /// A batch already written, for its buffers: pass it to [`CbfEncoder::encode_into`] to
    /// save allocating (and faulting in) new ones.
    pub(crate) fn take_spare(&mut self) -> Option<EncodedBatch> {
        self.spare.pop()
    }

    /// Appends a batch encoded by [`CbfEncoder::encode`]: the same bytes, chunks and errors as
    /// [`write_batch`](Self::write_batch) on the batch it was encoded from.
    pub(crate) fn write_encoded(&mut self, enc: EncodedBatch) -> Result<()> {
        if enc.streams.len() != self.encoder.specs.len() {
            return Err(Error::config(
                "the encoded batch's streams do not match the CBF writer's",
            ));
        }
        self.open.push(Segment {
            batch: enc,
            start: 0,
            end: 0,
        });
        self.take_sequences(0)
    }

    /// Adds the sequences of the last open batch from `from` on to the open chunk, flushing it
    /// whenever the next one does not fit; then returns the batch's failure, if any.
    fn take_sequences(&mut self, from: usize) -> Result<()> {
        let last = self.open.last_mut().expect("a batch was just added");
        let failure = last.batch.failure.take();
        for seq in from..last.batch.len() {
            let last = self
                .open
                .last()
                .expect("kept open while it has sequences left");
            let (size, samples) = (last.batch.sizes[seq], last.batch.samples[seq]);
            self.make_room(size, samples)?;
            self.open.last_mut().expect("kept by the flush").end += 1;
            self.accept(size, samples);
        }
        match failure {
            None => Ok(()),
            Some(Failure::Measure(e)) => Err(e),
            Some(Failure::Encode(size, samples, e)) => {
                self.make_room(size, samples)?;
                Err(e)
            }
        }
    }

    /// Flushes the open chunk if a sequence of `size` bytes and `samples` samples does not fit.
    fn make_room(&mut self, size: u64, samples: u32) -> Result<()> {
        if self.chunk_sequences > 0
            && (self.chunk_bytes + size > self.chunk_size
                || self.chunk_sequences == u32::MAX
                || self.chunk_samples.checked_add(samples).is_none())
        {
            self.flush_chunk()?;
        }
        Ok(())
    }

    /// Counts a sequence just added to the open chunk.
    fn accept(&mut self, size: u64, samples: u32) {
        self.chunk_bytes += size;
        self.chunk_sequences += 1;
        self.chunk_samples += samples;
        self.sequences += 1;
    }

    fn flush_chunk(&mut self) -> Result<()> {
        if self.chunk_sequences == 0 {
            return Ok(());
        }
        self.meta.clear();
        for seg in &self.open {
            for &n in &seg.batch.samples[seg.start..seg.end] {
                self.meta.extend_from_slice(&n.to_le_bytes());
            }
        }
        self.out.write_all(&self.meta)?;
        for s in 0..self.encoder.specs.len() {
            for seg in &self.open {
                self.out
                    .write_all(seg.batch.stream_bytes(s, seg.start..seg.end))?;
            }
        }
        self.chunks.push(ChunkEntry {
            offset: self.position,
            len: self.chunk_bytes,
            sequences: self.chunk_sequences,
            samples: self.chunk_samples,
            first_key: self.sequences - u64::from(self.chunk_sequences),
        });
        if u32::try_from(self.chunks.len()).is_err() {
            return Err(invalid("more than 2^32 - 1 chunks"));
        }
        self.position += self.chunk_bytes;
        // The last batch may have sequences left for the next chunk; the others are done.
        let last = self.open.pop();
        for seg in self.open.drain(..) {
            if self.spare.len() < MAX_SPARE {
                self.spare.push(seg.batch);
            }
        }
        if let Some(mut seg) = last {
            if seg.end < seg.batch.sizes.len() {
                seg.start = seg.end;
                self.open.push(seg);
            } else if self.spare.len() < MAX_SPARE {
                self.spare.push(seg.batch);
            }
        }
        self.chunk_bytes = 0;
        self.chunk_sequences = 0;
        self.chunk_samples = 0;
        Ok(())
    }

    /// Writes the last chunk and the header, flushes, and returns the output.
    pub fn finish(self) -> Result<W> {
        Ok(self.finish_with_chunks()?.0)
    }

    /// As [`finish`](Self::finish), also returning the chunk table written.
    pub fn finish_with_chunks(mut self) -> Result<(W, Vec<ChunkEntry>)> {
        self.flush_chunk()?;
        let header_offset = self.position;
        let mut h = Vec::new();
        h.extend_from_slice(&CBF_MAGIC.to_le_bytes());
        h.extend_from_slice(&(self.chunks.len() as u32).to_le_bytes());
        h.extend_from_slice(&(self.encoder.specs.len() as u32).to_le_bytes());
        for s in &self.encoder.specs {
            h.push(match s.storage {
                Storage::Dense => 0,
                Storage::Sparse => 1,
            });
            h.extend_from_slice(&(s.name.len() as u32).to_le_bytes());
            h.extend_from_slice(s.name.as_bytes());
            h.push(match self.encoder.precision {
                Precision::Float => 0,
                Precision::Double => 1,
            });
            h.extend_from_slice(&(s.dim as u32).to_le_bytes());
        }
        for c in &self.chunks {
            h.extend_from_slice(&c.offset.to_le_bytes());
            h.extend_from_slice(&c.sequences.to_le_bytes());
            h.extend_from_slice(&c.samples.to_le_bytes());
        }
        h.extend_from_slice(&(header_offset as i64).to_le_bytes());
        self.out.write_all(&h)?;
        self.out.flush()?;
        Ok((self.out, self.chunks))
    }
}

/// The encoded size in bytes and the sample count of sequence `seq` of `batch`.
fn measure<T: Element>(
    precision: Precision,
    defining: Option<usize>,
    batch: &SequenceBatch<T>,
    seq: usize,
) -> Result<(u64, u32)> {
    let es = precision.size() as u64;
    let mut size = 4u64;
    for s in batch.streams() {
        let n = s.sequence_samples(seq).len() as u64;
        size += match s.storage() {
            Storage::Dense => 4 + n * s.dim() as u64 * es,
            Storage::Sparse => 8 + s.sequence_nnz(seq) as u64 * (es + 4) + 4 * n,
        };
    }
    let samples = batch.sequence_length(seq, defining);
    let samples = u32::try_from(samples).map_err(|_| {
        invalid(format!(
            "sequence {seq}: {samples} samples do not fit in 32 bits"
        ))
    })?;
    Ok((size, samples))
}

/// Appends every stream of sequence `seq` to `data` (one buffer per stream); on an error the
/// buffers may hold part of the sequence.
fn encode_streams<T: Element>(
    precision: Precision,
    specs: &[StreamSpec],
    batch: &SequenceBatch<T>,
    seq: usize,
    data: &mut [Vec<u8>],
    scratch: &mut Vec<(u32, f64)>,
) -> Result<()> {
    for (i, s) in batch.streams().iter().enumerate() {
        encode(precision, s, seq, &mut data[i], scratch)
            .map_err(|m| invalid(format!("sequence {seq}, stream '{}': {m}", specs[i].name)))?;
    }
    Ok(())
}

/// Encodes batches into CBF chunk bytes away from the [`CbfWriter`] that made it (e.g. on
/// worker threads); the writer then only writes the bytes out in order
/// ([`CbfWriter::write_encoded`]).
#[derive(Debug, Clone)]
pub(crate) struct CbfEncoder {
    specs: Vec<StreamSpec>,
    defining: Option<usize>,
    precision: Precision,
}

/// Why an [`EncodedBatch`] stops early, as [`CbfWriter::write_batch`] would have failed.
#[derive(Debug)]
enum Failure {
    /// Before the open chunk is flushed (the sample count does not fit).
    Measure(Error),
    /// After making room for a sequence of this size and sample count.
    Encode(u64, u32, Error),
}

/// A batch's sequences encoded as CBF bytes, per stream (see [`CbfEncoder`]). `Default` gives
/// an empty one to encode into; a written one comes back from [`CbfWriter::take_spare`].
#[derive(Debug, Default)]
pub(crate) struct EncodedBatch {
    /// Per stream: the encoded sequences, one after another.
    streams: Vec<Vec<u8>>,
    /// Per stream: where each sequence's bytes end.
    ends: Vec<Vec<usize>>,
    sizes: Vec<u64>,
    samples: Vec<u32>,
    /// The error of the first sequence that could not be encoded (later ones are not).
    failure: Option<Failure>,
}

impl EncodedBatch {
    /// Number of sequences encoded (those before a failure).
    pub(crate) fn len(&self) -> usize {
        self.sizes.len()
    }

    /// The bytes of stream `s` for sequences `seqs`.
    fn stream_bytes(&self, s: usize, seqs: std::ops::Range<usize>) -> &[u8] {
        let ends = &self.ends[s];
        let at = |k: usize| if k == 0 { 0 } else { ends[k - 1] };
        &self.streams[s][at(seqs.start)..at(seqs.end)]
    }
}

impl CbfEncoder {
    /// Encodes every sequence of `batch` (its streams must match the writer's, in order).
    /// An error in a sequence is kept in the result and returned by
    /// [`CbfWriter::write_encoded`] after the sequences before it are written.
    #[cfg(test)]
    pub(crate) fn encode<T: Element>(&self, batch: &SequenceBatch<T>) -> Result<EncodedBatch> {
        let mut enc = EncodedBatch::default();
        self.encode_into(batch, &mut enc)?;
        Ok(enc)
    }

    /// As [`encode`](Self::encode), into `enc` (replacing what it held, reusing its buffers).
    pub(crate) fn encode_into<T: Element>(
        &self,
        batch: &SequenceBatch<T>,
        enc: &mut EncodedBatch,
    ) -> Result<()> {
        self.check(batch)?;
        let k = self.specs.len();
        enc.streams.resize_with(k, Vec::new);
        enc.ends.resize_with(k, Vec::new);
        for (bytes, ends) in enc.streams.iter_mut().zip(&mut enc.ends) {
            bytes.clear();
            ends.clear();
        }
        enc.sizes.clear();
        enc.samples.clear();
        self.append(batch, enc);
        Ok(())
    }

    /// Checks that `batch` has the writer's streams.
    fn check<T: Element>(&self, batch: &SequenceBatch<T>) -> Result<()> {
        if batch.streams().len() != self.specs.len()
            || batch
                .streams()
                .iter()
                .zip(&self.specs)
                .any(|(b, s)| b.storage() != s.storage || b.dim() != s.dim)
        {
            return Err(Error::config(
                "the batch's streams do not match the CBF writer's",
            ));
        }
        Ok(())
    }

    /// Encodes the sequences of a checked `batch` after those of `enc` (which has a buffer per
    /// stream), up to the first that fails.
    fn append<T: Element>(&self, batch: &SequenceBatch<T>, enc: &mut EncodedBatch) {
        let n = batch.len();
        let es = self.precision.size();
        for ((bytes, ends), s) in enc
            .streams
            .iter_mut()
            .zip(&mut enc.ends)
            .zip(batch.streams())
        {
            // Drops what a failed sequence left behind.
            bytes.truncate(ends.last().copied().unwrap_or(0));
            ends.reserve(n);
            // The bytes the whole batch takes, reserved at once.
            let (samples, values) = (s.num_samples(), s.values().len());
            bytes.reserve(match s.storage() {
                Storage::Dense => 4 * n + values * es,
                Storage::Sparse => 8 * n + values * (es + 4) + 4 * samples,
            });
        }
        enc.failure = None;
        let mut scratch = Vec::new();
        for seq in 0..n {
            let (size, samples) = match measure(self.precision, self.defining, batch, seq) {
                Ok(m) => m,
                Err(e) => {
                    enc.failure = Some(Failure::Measure(e));
                    break;
                }
            };
            let r = encode_streams(
                self.precision,
                &self.specs,
                batch,
                seq,
                &mut enc.streams,
                &mut scratch,
            );
            if let Err(e) = r {
                enc.failure = Some(Failure::Encode(size, samples, e));
                break;
            }
            for (ends, s) in enc.ends.iter_mut().zip(&enc.streams) {
                ends.push(s.len());
            }
            enc.sizes.push(size);
            enc.samples.push(samples);
        }
    }
}

/// Appends `vals` as little-endian elements of `precision` (rounded through f64: exact for
/// float and double, to nearest for double to float). Writes straight into the reserved
/// capacity rather than value by value (which lets the loop vectorise) or into zeroed bytes
/// (which costs a pass of `memset`).
fn put_values<T: Element>(precision: Precision, vals: &[T], out: &mut Vec<u8>) {
    use std::mem::MaybeUninit;
    let n = vals.len() * precision.size();
    out.reserve(n);
    let dst = &mut out.spare_capacity_mut()[..n];
    match precision {
        Precision::Float => {
            for (o, &v) in dst.chunks_exact_mut(4).zip(vals) {
                o.copy_from_slice(&(v.to_f64() as f32).to_le_bytes().map(MaybeUninit::new));
            }
        }
        Precision::Double => {
            for (o, &v) in dst.chunks_exact_mut(8).zip(vals) {
                o.copy_from_slice(&v.to_f64().to_le_bytes().map(MaybeUninit::new));
            }
        }
    }
    // SAFETY: `dst` is the first `n` bytes of spare capacity, and the loop above initialised
    // all of them: `vals.len()` pieces of `precision.size()` bytes.
    unsafe { out.set_len(out.len() + n) };
}

/// Encodes sequence `seq` of stream `s` with elements of type `precision`.
fn encode<T: Element>(
    precision: Precision,
    s: &StreamData<T>,
    seq: usize,
    out: &mut Vec<u8>,
    scratch: &mut Vec<(u32, f64)>,
) -> std::result::Result<(), String> {
    let r = s.sequence_samples(seq);
    let n = u32::try_from(r.len()).map_err(|_| format!("{} samples", r.len()))?;
    out.extend_from_slice(&n.to_le_bytes());
    match s.storage() {
        Storage::Dense => {
            put_values(
                precision,
                &s.values()[r.start * s.dim()..r.end * s.dim()],
                out,
            );
        }
        Storage::Sparse => {
            let offs = s.sample_offsets();
            let (lo, hi) = (offs[r.start], offs[r.end]);
            let nnz = i32::try_from(hi - lo).map_err(|_| format!("{} non-zeros", hi - lo))?;
            out.extend_from_slice(&nnz.to_le_bytes());
            let dim = s.dim();
            // Values, then indices, each sample's pairs sorted by index (as they mostly are
            // already: then straight from the batch).
            let vals_at = out.len();
            put_values(precision, &s.values()[lo..hi], out);
            let idx_at = out.len();
            out.reserve((hi - lo) * 4 + r.len() * 4);
            for &i in &s.indices()[lo..hi] {
                if i as usize >= dim {
                    return Err(format!("index {i} is outside [0, {dim})"));
                }
                out.extend_from_slice(&(i as i32).to_le_bytes());
            }
            for sample in r.clone() {
                let (ix, vs) = s.sparse_sample(sample);
                if ix.windows(2).all(|w| w[0] <= w[1]) {
                    continue;
                }
                scratch.clear();
                scratch.extend(ix.iter().zip(vs).map(|(&i, &v)| (i, v.to_f64())));
                scratch.sort_by_key(|p| p.0);
                let (from, to) = (offs[sample] - lo, offs[sample + 1] - lo);
                let es = precision.size();
                let vals = &mut out[vals_at + from * es..vals_at + to * es];
                for (o, &(_, v)) in vals.chunks_exact_mut(es).zip(scratch.iter()) {
                    match precision {
                        Precision::Float => o.copy_from_slice(&(v as f32).to_le_bytes()),
                        Precision::Double => o.copy_from_slice(&v.to_le_bytes()),
                    }
                }
                let idxs = &mut out[idx_at + from * 4..idx_at + to * 4];
                for (o, &(i, _)) in idxs.chunks_exact_mut(4).zip(scratch.iter()) {
                    o.copy_from_slice(&(i as i32).to_le_bytes());
                }
            }
            for sample in r {
                let m = (offs[sample + 1] - offs[sample]) as i32;
                out.extend_from_slice(&m.to_le_bytes());
            }
        }
    }
    Ok(())
}
