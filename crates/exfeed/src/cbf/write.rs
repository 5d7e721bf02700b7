//! Writing CBF.

use super::{ChunkInfo, MAGIC, PREFIX_LEN, VERSION};
use crate::batch::{SequenceBatch, StreamData};
use crate::element::{Element, Precision};
use crate::error::{Error, Result};
use crate::stream::{Storage, StreamSpec};
use std::io::Write;

/// The default chunk size: 32 MiB.
pub const DEFAULT_CHUNK_SIZE: u64 = 32 << 20;

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
            chunk_size: DEFAULT_CHUNK_SIZE,
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
pub struct CbfWriter<W: Write> {
    out: W,
    specs: Vec<StreamSpec>,
    defining: Option<usize>,
    options: CbfWriterOptions,
    /// The open chunk: per-sequence sample counts, and each stream's encoded sequences.
    meta: Vec<u8>,
    data: Vec<Vec<u8>>,
    chunk_bytes: u64,
    chunk_sequences: u32,
    chunk_samples: u32,
    chunks: Vec<ChunkInfo>,
    position: u64,
    sequences: u64,
    scratch: Vec<(u32, f64)>,
}

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
        prefix.extend_from_slice(&MAGIC.to_le_bytes());
        prefix.extend_from_slice(&VERSION.to_le_bytes());
        out.write_all(&prefix)?;
        Ok(CbfWriter {
            out,
            defining: streams.iter().position(|s| s.defines_mb_size),
            specs: streams.to_vec(),
            options,
            meta: Vec::new(),
            data: vec![Vec::new(); streams.len()],
            chunk_bytes: 0,
            chunk_sequences: 0,
            chunk_samples: 0,
            chunks: Vec::new(),
            position: PREFIX_LEN,
            sequences: 0,
            scratch: Vec::new(),
        })
    }

    /// The chunks written so far.
    pub fn chunks(&self) -> &[ChunkInfo] {
        &self.chunks
    }

    /// Number of sequences accepted so far.
    pub fn sequences(&self) -> u64 {
        self.sequences
    }

    /// Appends every sequence of `batch` (its streams must match the writer's, in order).
    pub fn write_batch<T: Element>(&mut self, batch: &SequenceBatch<T>) -> Result<()> {
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
        for seq in 0..batch.len() {
            self.write_sequence(batch, seq)?;
        }
        Ok(())
    }

    /// Appends sequence `seq` of `batch`.
    pub fn write_sequence<T: Element>(
        &mut self,
        batch: &SequenceBatch<T>,
        seq: usize,
    ) -> Result<()> {
        let (size, samples) = measure(self.options.precision, self.defining, batch, seq)?;
        self.make_room(size, samples)?;
        // Encode into the open chunk; on an error, roll back to where it was.
        let lens: Vec<usize> = self.data.iter().map(Vec::len).collect();
        let result = encode_streams(
            self.options.precision,
            &self.specs,
            batch,
            seq,
            &mut self.data,
            &mut self.scratch,
        );
        if let Err(e) = result {
            for (d, l) in self.data.iter_mut().zip(lens) {
                d.truncate(l);
            }
            return Err(e);
        }
        self.accept(size, samples);
        Ok(())
    }

    /// An encoder of batches for this writer, usable on other threads (see [`CbfEncoder`]).
    pub fn encoder(&self) -> CbfEncoder {
        CbfEncoder {
            specs: self.specs.clone(),
            defining: self.defining,
            precision: self.options.precision,
        }
    }

    /// Appends a batch encoded by [`CbfEncoder::encode`]: the same bytes, chunks and errors as
    /// [`write_batch`](Self::write_batch) on the batch it was encoded from.
    pub fn write_encoded(&mut self, enc: EncodedBatch) -> Result<()> {
        let n = self.specs.len();
        if enc.streams.len() != n {
            return Err(Error::config(
                "the encoded batch's streams do not match the CBF writer's",
            ));
        }
        for (seq, (&size, &samples)) in enc.sizes.iter().zip(&enc.samples).enumerate() {
            self.make_room(size, samples)?;
            for ((d, bytes), ends) in self.data.iter_mut().zip(&enc.streams).zip(&enc.ends) {
                let start = if seq == 0 { 0 } else { ends[seq - 1] };
                d.extend_from_slice(&bytes[start..ends[seq]]);
            }
            self.accept(size, samples);
        }
        match enc.failure {
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
            && (self.chunk_bytes + size > self.options.chunk_size
                || self.chunk_sequences == u32::MAX
                || self.chunk_samples.checked_add(samples).is_none())
        {
            self.flush_chunk()?;
        }
        Ok(())
    }

    /// Counts a sequence just encoded into the open chunk.
    fn accept(&mut self, size: u64, samples: u32) {
        self.meta.extend_from_slice(&samples.to_le_bytes());
        self.chunk_bytes += size;
        self.chunk_sequences += 1;
        self.chunk_samples += samples;
        self.sequences += 1;
    }

    fn flush_chunk(&mut self) -> Result<()> {
        if self.chunk_sequences == 0 {
            return Ok(());
        }
        self.out.write_all(&self.meta)?;
        for d in &self.data {
            self.out.write_all(d)?;
        }
        self.chunks.push(ChunkInfo {
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
        self.meta.clear();
        for d in &mut self.data {
            d.clear();
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
    pub fn finish_with_chunks(mut self) -> Result<(W, Vec<ChunkInfo>)> {
        self.flush_chunk()?;
        let header_offset = self.position;
        let mut h = Vec::new();
        h.extend_from_slice(&MAGIC.to_le_bytes());
        h.extend_from_slice(&(self.chunks.len() as u32).to_le_bytes());
        h.extend_from_slice(&(self.specs.len() as u32).to_le_bytes());
        for s in &self.specs {
            h.push(match s.storage {
                Storage::Dense => 0,
                Storage::Sparse => 1,
            });
            h.extend_from_slice(&(s.name.len() as u32).to_le_bytes());
            h.extend_from_slice(s.name.as_bytes());
            h.push(match self.options.precision {
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
        let name = &specs[i].name;
        let out = &mut data[i];
        match precision {
            Precision::Float => encode::<T, f32>(s, seq, out, scratch),
            Precision::Double => encode::<T, f64>(s, seq, out, scratch),
        }
        .map_err(|m| invalid(format!("sequence {seq}, stream '{name}': {m}")))?;
    }
    Ok(())
}

/// Encodes batches into CBF chunk bytes away from the [`CbfWriter`] that made it (e.g. on
/// worker threads); the writer then only copies the bytes into its chunks in order
/// ([`CbfWriter::write_encoded`]).
#[derive(Debug, Clone)]
pub struct CbfEncoder {
    specs: Vec<StreamSpec>,
    defining: Option<usize>,
    precision: Precision,
}

/// Why an [`EncodedBatch`] stops early, as [`CbfWriter::write_sequence`] would have failed.
#[derive(Debug)]
enum Failure {
    /// Before the open chunk is flushed (the sample count does not fit).
    Measure(Error),
    /// After making room for a sequence of this size and sample count.
    Encode(u64, u32, Error),
}

/// A batch's sequences encoded as CBF bytes, per stream (see [`CbfEncoder`]).
#[derive(Debug)]
pub struct EncodedBatch {
    /// Per stream: the encoded sequences, one after another.
    streams: Vec<Vec<u8>>,
    /// Per stream: where each sequence's bytes end.
    ends: Vec<Vec<usize>>,
    sizes: Vec<u64>,
    samples: Vec<u32>,
    /// The error of the first sequence that could not be encoded (later ones are not).
    failure: Option<Failure>,
}

impl CbfEncoder {
    /// Encodes every sequence of `batch` (its streams must match the writer's, in order).
    /// An error in a sequence is kept in the result and returned by
    /// [`CbfWriter::write_encoded`] after the sequences before it are written.
    pub fn encode<T: Element>(&self, batch: &SequenceBatch<T>) -> Result<EncodedBatch> {
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
        let n = batch.len();
        let mut enc = EncodedBatch {
            streams: vec![Vec::new(); self.specs.len()],
            ends: vec![Vec::with_capacity(n); self.specs.len()],
            sizes: Vec::with_capacity(n),
            samples: Vec::with_capacity(n),
            failure: None,
        };
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
        Ok(enc)
    }
}

/// Encodes sequence `seq` of stream `s` with elements of type `U`.
fn encode<T: Element, U: Element>(
    s: &StreamData<T>,
    seq: usize,
    out: &mut Vec<u8>,
    scratch: &mut Vec<(u32, f64)>,
) -> std::result::Result<(), String> {
    let r = s.sequence_samples(seq);
    let n = u32::try_from(r.len()).map_err(|_| format!("{} samples", r.len()))?;
    out.extend_from_slice(&n.to_le_bytes());
    // Through f64: exact for float and double, rounding to nearest for double to float.
    let cv = |v: T| -> U { U::from_f64(v.to_f64()) };
    match s.storage() {
        Storage::Dense => {
            let vals = &s.values()[r.start * s.dim()..r.end * s.dim()];
            out.reserve(vals.len() * U::SIZE);
            for &v in vals {
                cv(v).write_le(out);
            }
        }
        Storage::Sparse => {
            let offs = s.sample_offsets();
            let (lo, hi) = (offs[r.start], offs[r.end]);
            let nnz = i32::try_from(hi - lo).map_err(|_| format!("{} non-zeros", hi - lo))?;
            out.extend_from_slice(&nnz.to_le_bytes());
            let dim = s.dim();
            // Values, then indices, each sample's pairs sorted by index.
            let mut idx_bytes = Vec::with_capacity((hi - lo) * 4);
            for sample in r.clone() {
                let (ix, vs) = s.sparse_sample(sample);
                scratch.clear();
                scratch.extend(ix.iter().zip(vs).map(|(&i, &v)| (i, v.to_f64())));
                if !ix.windows(2).all(|w| w[0] <= w[1]) {
                    scratch.sort_by_key(|p| p.0);
                }
                for &(i, _) in scratch.iter() {
                    if i as usize >= dim {
                        return Err(format!("index {i} is outside [0, {dim})"));
                    }
                    idx_bytes.extend_from_slice(&(i as i32).to_le_bytes());
                }
                for &(_, v) in scratch.iter() {
                    U::from_f64(v).write_le(out);
                }
            }
            out.extend_from_slice(&idx_bytes);
            for sample in r {
                let m = (offs[sample + 1] - offs[sample]) as i32;
                out.extend_from_slice(&m.to_le_bytes());
            }
        }
    }
    Ok(())
}
