//! [`SequenceBatch`]: whole sequences of every stream, stored column by column.
//!
//! This is what every decoder produces (a CTF chunk, a CBF chunk, Lens examples made dense) and
//! what minibatches are built from. Per stream, dense data is one contiguous `[samples x dim]`
//! buffer and sparse data is CSR (`sample_offsets` as row pointers, `indices`, `values`); a
//! `seq_offsets` vector marks where each sequence's samples begin. Nothing is allocated per
//! sample or per sequence, and [`SequenceBatch::clear`] keeps the buffers for reuse.
//!
//! Filling protocol: push the samples of one sequence into its streams, then call
//! [`SequenceBatch::finish_sequence`] with its key, or [`SequenceBatch::discard_sequence`] to drop
//! everything pushed since the last finished sequence (a bad sequence under `maxErrors`).

use crate::element::Element;
use crate::stream::{Storage, StreamSpec};
use std::ops::Range;

/// The low bits of a corpus key that hold the key in its shard; the shard is above them.
pub const CORPUS_KEY_BITS: u32 = 40;

/// A corpus key's shard and key in that shard.
pub fn split_corpus_key(key: u64) -> (u64, u64) {
    (key >> CORPUS_KEY_BITS, key & ((1 << CORPUS_KEY_BITS) - 1))
}

/// The samples of one stream for a run of sequences.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamData<T> {
    storage: Storage,
    dim: usize,
    /// Dense: `samples * dim` values. Sparse: the non-zero values of all samples.
    values: Vec<T>,
    /// Sparse only: the index of each non-zero value.
    indices: Vec<u32>,
    /// Sparse only: CSR row pointers, `samples + 1` entries starting with 0.
    sample_offsets: Vec<usize>,
    /// `sequences + 1` entries starting with 0: the first sample of each sequence.
    seq_offsets: Vec<usize>,
    /// Dense only: number of complete samples (values.len() / dim once a sample is ended).
    dense_samples: usize,
}

impl<T: Element> StreamData<T> {
    /// An empty stream of the given storage and dimension.
    pub fn new(storage: Storage, dim: usize) -> Self {
        StreamData {
            storage,
            dim,
            values: Vec::new(),
            indices: Vec::new(),
            sample_offsets: vec![0],
            seq_offsets: vec![0],
            dense_samples: 0,
        }
    }

    /// Dense or sparse.
    pub fn storage(&self) -> Storage {
        self.storage
    }

    /// The stream's dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of finished and open samples pushed so far.
    pub fn num_samples(&self) -> usize {
        match self.storage {
            Storage::Dense => self.dense_samples,
            Storage::Sparse => self.sample_offsets.len() - 1,
        }
    }

    /// Number of finished sequences.
    pub fn num_sequences(&self) -> usize {
        self.seq_offsets.len() - 1
    }

    /// All values: dense `[samples x dim]`, or the sparse non-zeros.
    pub fn values(&self) -> &[T] {
        &self.values
    }

    /// Sparse indices (empty for dense).
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }

    /// Sparse CSR row pointers, `samples + 1` entries (just `[0]` for dense).
    pub fn sample_offsets(&self) -> &[usize] {
        &self.sample_offsets
    }

    /// Sequence boundaries in samples, `sequences + 1` entries.
    pub fn seq_offsets(&self) -> &[usize] {
        &self.seq_offsets
    }

    /// The sample range of sequence `seq`.
    pub fn sequence_samples(&self, seq: usize) -> Range<usize> {
        self.seq_offsets[seq]..self.seq_offsets[seq + 1]
    }

    /// The values of dense sample `sample`.
    pub fn dense_sample(&self, sample: usize) -> &[T] {
        &self.values[sample * self.dim..(sample + 1) * self.dim]
    }

    /// The indices and values of sparse sample `sample`.
    pub fn sparse_sample(&self, sample: usize) -> (&[u32], &[T]) {
        let r = self.sample_offsets[sample]..self.sample_offsets[sample + 1];
        (&self.indices[r.clone()], &self.values[r])
    }

    /// Number of non-zeros of the samples of sequence `seq` (sparse), or values (dense).
    pub fn sequence_nnz(&self, seq: usize) -> usize {
        let r = self.sequence_samples(seq);
        match self.storage {
            Storage::Dense => r.len() * self.dim,
            Storage::Sparse => self.sample_offsets[r.end] - self.sample_offsets[r.start],
        }
    }

    /// Reserves room for `samples` more samples holding `values` more values (dense: values
    /// are `samples * dim`, pass 0 samples; sparse: the non-zero pairs).
    pub fn reserve(&mut self, samples: usize, values: usize) {
        self.values.reserve(values);
        if self.storage == Storage::Sparse {
            self.indices.reserve(values);
            self.sample_offsets.reserve(samples);
        }
    }

    /// The values buffer's allocation as (address, bytes), for memory advice to the OS.
    pub(crate) fn values_allocation(&self) -> (*const u8, usize) {
        (
            self.values.as_ptr().cast(),
            self.values.capacity() * std::mem::size_of::<T>(),
        )
    }

    /// Appends `n` complete dense samples from exactly `n * dim` values (a bulk path for binary
    /// decoders; no sample may be open). Fewer values are zero-padded, more are dropped.
    pub fn extend_dense_samples(&mut self, n: usize, values: impl IntoIterator<Item = T>) {
        debug_assert_eq!(self.open_dense_len(), 0, "a sample is still open");
        let end = (self.dense_samples + n) * self.dim;
        self.values.extend(values.into_iter().take(n * self.dim));
        self.values.resize(end, T::default());
        self.dense_samples += n;
    }

    /// Appends sparse samples in bulk (a path for binary decoders): all their indices and values,
    /// and each sample's count of pairs. The counts must add up to the number of pairs
    /// (debug-asserted; the caller validates).
    pub fn extend_sparse_samples(
        &mut self,
        indices: impl IntoIterator<Item = u32>,
        values: impl IntoIterator<Item = T>,
        counts: impl IntoIterator<Item = usize>,
    ) {
        self.indices.extend(indices);
        self.values.extend(values);
        let mut at = *self.sample_offsets.last().expect("never empty");
        for c in counts {
            at += c;
            self.sample_offsets.push(at);
        }
        debug_assert_eq!(at, self.values.len());
        debug_assert_eq!(at, self.indices.len());
    }

    /// Appends a complete dense sample. `values` shorter than `dim` are zero-padded; longer is
    /// the caller's error to catch first (debug-asserted).
    pub fn push_dense_sample(&mut self, values: &[T]) {
        debug_assert!(values.len() <= self.dim);
        self.values.extend_from_slice(values);
        self.end_dense_sample();
    }

    /// Appends one value to the open dense sample (for parsers that write values as they go).
    #[inline]
    pub(crate) fn push_dense_value(&mut self, value: T) {
        self.values.push(value);
    }

    /// Room for `N` more values of the open dense sample, zeros, for a parser to write a block
    /// of values into in place; [`Self::keep_dense_block`] then keeps the first of them. (Values
    /// stored one by one into a buffer and then copied here made the copy's loads wait for
    /// those stores: 5% of the parse of pixel data.)
    #[inline(always)]
    pub(crate) fn dense_block<const N: usize>(&mut self) -> &mut [T; N] {
        let len = self.values.len();
        self.values.resize(len + N, T::default());
        let block: &mut [T] = &mut self.values[len..];
        block.try_into().expect("N values")
    }

    /// Keeps the first `keep` (at most `N`) values of the last [`Self::dense_block`].
    #[inline(always)]
    pub(crate) fn keep_dense_block<const N: usize>(&mut self, keep: usize) {
        let len = self.values.len() - N;
        self.values.truncate(len + keep.min(N));
    }

    /// Values pushed into the open dense sample so far.
    #[inline]
    pub(crate) fn open_dense_len(&self) -> usize {
        self.values.len() - self.dense_samples * self.dim
    }

    /// Ends the open dense sample, zero-padding it to `dim`. Returns how many values it had.
    pub(crate) fn end_dense_sample(&mut self) -> usize {
        let had = self.open_dense_len();
        debug_assert!(had <= self.dim);
        self.values
            .resize((self.dense_samples + 1) * self.dim, T::default());
        self.dense_samples += 1;
        had
    }

    /// Appends one `(index, value)` pair to the open sparse sample.
    #[inline]
    pub(crate) fn push_sparse_value(&mut self, index: u32, value: T) {
        self.indices.push(index);
        self.values.push(value);
    }

    /// Ends the open sparse sample (possibly with no pairs).
    pub(crate) fn end_sparse_sample(&mut self) {
        self.sample_offsets.push(self.values.len());
    }

    /// Appends a complete sparse sample.
    pub fn push_sparse_sample(&mut self, indices: &[u32], values: &[T]) {
        debug_assert_eq!(indices.len(), values.len());
        self.indices.extend_from_slice(indices);
        self.values.extend_from_slice(values);
        self.end_sparse_sample();
    }

    /// Drops the values pushed into the open (not yet ended) sample.
    pub(crate) fn discard_open_sample(&mut self) {
        match self.storage {
            Storage::Dense => self.values.truncate(self.dense_samples * self.dim),
            Storage::Sparse => {
                let keep = *self.sample_offsets.last().expect("never empty");
                self.values.truncate(keep);
                self.indices.truncate(keep);
            }
        }
    }

    /// Samples pushed since the last finished sequence.
    pub(crate) fn open_sequence_samples(&self) -> usize {
        self.num_samples() - self.seq_offsets.last().expect("never empty")
    }

    /// Closes the samples pushed since the last finished sequence as one sequence of this
    /// stream (for decoders that fill a batch a stream at a time: the keys follow with
    /// [`SequenceBatch::push_keys`]).
    pub(crate) fn finish_sequence(&mut self) {
        debug_assert_eq!(self.open_dense_len_or_zero(), 0, "a sample is still open");
        self.seq_offsets.push(self.num_samples());
    }

    fn open_dense_len_or_zero(&self) -> usize {
        match self.storage {
            Storage::Dense => self.open_dense_len(),
            Storage::Sparse => 0,
        }
    }

    fn discard_sequence(&mut self) {
        let first = *self.seq_offsets.last().expect("never empty");
        match self.storage {
            Storage::Dense => {
                self.dense_samples = first;
                self.values.truncate(first * self.dim);
            }
            Storage::Sparse => {
                self.sample_offsets.truncate(first + 1);
                let keep = self.sample_offsets[first];
                self.values.truncate(keep);
                self.indices.truncate(keep);
            }
        }
    }

    /// Appends a copy of sequence `seq` of `other` (same storage and dim) as an open sequence.
    pub fn extend_from_sequence(&mut self, other: &StreamData<T>, seq: usize) {
        self.extend_from_samples(other, other.sequence_samples(seq));
    }

    /// Appends copies of sequences `seqs` of `other` (same storage and dim) as finished
    /// sequences, with one bulk copy per buffer (no sample may be open).
    pub fn extend_from_sequences(&mut self, other: &StreamData<T>, seqs: Range<usize>) {
        debug_assert_eq!(self.open_dense_len_or_zero(), 0, "a sample is still open");
        let samples = self.push_sequence_bounds(other, seqs);
        self.extend_from_samples(other, samples);
    }

    /// Appends the boundaries of sequences `seqs` of `other` (after this stream's samples);
    /// returns the samples of `other` they hold.
    fn push_sequence_bounds(&mut self, other: &StreamData<T>, seqs: Range<usize>) -> Range<usize> {
        let first = other.seq_offsets[seqs.start];
        let base = self.num_samples();
        self.seq_offsets.extend(
            other.seq_offsets[seqs.start + 1..=seqs.end]
                .iter()
                .map(|&o| o - first + base),
        );
        first..other.seq_offsets[seqs.end]
    }

    /// Dense: appends sequences `seqs` of `other` (same dim) as finished sequences but for
    /// their values, which it returns: the caller copies them into the room that
    /// [`Self::dense_room`] makes, then calls [`Self::dense_room_written`]. Until then the
    /// stream counts samples whose values are not there (`values` is shorter than
    /// `samples * dim`).
    pub(crate) fn extend_from_sequences_but_values<'o>(
        &mut self,
        other: &'o StreamData<T>,
        seqs: Range<usize>,
    ) -> &'o [T] {
        debug_assert_eq!((self.storage, self.dim), (Storage::Dense, other.dim));
        let r = self.push_sequence_bounds(other, seqs);
        self.dense_samples += r.len();
        &other.values[r.start * self.dim..r.end * self.dim]
    }

    /// Dense: room for the values missing after [`Self::extend_from_sequences_but_values`]
    /// (uninitialized, not zero-filled: a fill would be one more pass over the memory); where
    /// it starts, just past the values. The pointer stays valid until the stream is changed.
    pub(crate) fn dense_room(&mut self) -> *mut T {
        let missing = self.dense_samples * self.dim - self.values.len();
        self.values.reserve(missing);
        self.values.spare_capacity_mut().as_mut_ptr().cast()
    }

    /// Dense: takes the room of [`Self::dense_room`] as the missing values.
    ///
    /// # Safety
    /// All of the room's `samples * dim - values.len()` values must have been written.
    pub(crate) unsafe fn dense_room_written(&mut self) {
        let len = self.dense_samples * self.dim;
        debug_assert!(len <= self.values.capacity());
        // SAFETY: `dense_room` reserved up to `len`, and the caller wrote all the values up to
        // it.
        unsafe { self.values.set_len(len) }
    }

    /// Appends copies of samples `r` of `other`.
    fn extend_from_samples(&mut self, other: &StreamData<T>, r: Range<usize>) {
        debug_assert_eq!((self.storage, self.dim), (other.storage, other.dim));
        match self.storage {
            Storage::Dense => {
                self.values
                    .extend_from_slice(&other.values[r.start * self.dim..r.end * self.dim]);
                self.dense_samples += r.len();
            }
            Storage::Sparse => {
                let (lo, hi) = (other.sample_offsets[r.start], other.sample_offsets[r.end]);
                let base = self.values.len();
                self.values.extend_from_slice(&other.values[lo..hi]);
                self.indices.extend_from_slice(&other.indices[lo..hi]);
                self.sample_offsets.extend(
                    other.sample_offsets[r.start + 1..=r.end]
                        .iter()
                        .map(|&o| o - lo + base),
                );
            }
        }
    }

    fn clear(&mut self) {
        self.values.clear();
        self.indices.clear();
        self.sample_offsets.truncate(1);
        self.seq_offsets.truncate(1);
        self.dense_samples = 0;
    }
}

/// The buffers of a [`StreamData`], moved out by [`StreamData::into_parts`] (no copy).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamParts<T> {
    /// Dense or sparse.
    pub storage: Storage,
    /// The stream's dimension.
    pub dim: usize,
    /// Number of samples.
    pub samples: usize,
    /// Dense: `samples * dim` values, row-major. Sparse: the non-zero values of all samples.
    pub values: Vec<T>,
    /// Sparse: the index of each non-zero value. Dense: empty.
    pub indices: Vec<u32>,
    /// Sparse: CSR row pointers, `samples + 1` entries starting with 0 (`values[sample_offsets[i]
    /// ..sample_offsets[i + 1]]` are sample `i`'s). Dense: `[0]`.
    pub sample_offsets: Vec<usize>,
    /// `sequences + 1` entries starting with 0: sequence `s` is samples
    /// `seq_offsets[s]..seq_offsets[s + 1]`.
    pub seq_offsets: Vec<usize>,
}

impl<T: Element> StreamData<T> {
    /// Moves the buffers out, without copying (to hand them to NumPy, say). The values of an
    /// open (not ended) sample are dropped first; samples of a sequence not yet finished are
    /// kept (they are past the last `seq_offsets` entry).
    ///
    /// ```
    /// use exfeed::{Storage, StreamData};
    /// let mut s = StreamData::<f32>::new(Storage::Sparse, 5);
    /// s.push_sparse_sample(&[1, 4], &[0.5, 2.0]);
    /// s.push_sparse_sample(&[], &[]);
    /// let parts = s.into_parts();
    /// assert_eq!((parts.samples, parts.values, parts.indices), (2, vec![0.5, 2.0], vec![1, 4]));
    /// assert_eq!(parts.sample_offsets, vec![0, 2, 2]);
    /// assert_eq!(parts.seq_offsets, vec![0]); // no finished sequence
    /// ```
    pub fn into_parts(mut self) -> StreamParts<T> {
        self.discard_open_sample();
        StreamParts {
            storage: self.storage,
            dim: self.dim,
            samples: self.num_samples(),
            values: self.values,
            indices: self.indices,
            sample_offsets: self.sample_offsets,
            seq_offsets: self.seq_offsets,
        }
    }
}

/// Whole sequences of a fixed list of streams, column by column.
#[derive(Debug, Clone, PartialEq)]
pub struct SequenceBatch<T> {
    keys: Vec<u64>,
    streams: Vec<StreamData<T>>,
}

impl<T: Element> SequenceBatch<T> {
    /// An empty batch for the given streams (in this order).
    pub fn new(specs: &[StreamSpec]) -> Self {
        SequenceBatch {
            keys: Vec::new(),
            streams: specs
                .iter()
                .map(|s| StreamData::new(s.storage, s.dim))
                .collect(),
        }
    }

    /// An empty batch with the same streams as `self`.
    pub fn empty_like(&self) -> Self {
        SequenceBatch {
            keys: Vec::new(),
            streams: self
                .streams
                .iter()
                .map(|s| StreamData::new(s.storage, s.dim))
                .collect(),
        }
    }

    /// Number of finished sequences.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// No finished sequences?
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The sequence keys, in order.
    pub fn keys(&self) -> &[u64] {
        &self.keys
    }

    /// The sequence keys, to rewrite in place (e.g. a corpus adds the shard to each key).
    pub fn keys_mut(&mut self) -> &mut [u64] {
        &mut self.keys
    }

    /// The streams, in configuration order.
    pub fn streams(&self) -> &[StreamData<T>] {
        &self.streams
    }

    /// Takes stream `i` out, leaving an empty stream of the same storage and dimension (with no
    /// buffers) in its place. Until the batch is [cleared](SequenceBatch::clear) the streams no
    /// longer agree on the sequences: take the ones you want, then clear or refill it (as
    /// [`crate::configured::AnyReader::next_minibatch`] does).
    pub fn take_stream(&mut self, i: usize) -> StreamData<T> {
        let s = &self.streams[i];
        let empty = StreamData::new(s.storage, s.dim);
        std::mem::replace(&mut self.streams[i], empty)
    }

    /// Takes the keys out (see [`SequenceBatch::take_stream`]), leaving none.
    pub fn take_keys(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.keys)
    }

    /// Stream `i`, for pushing samples.
    pub fn stream_mut(&mut self, i: usize) -> &mut StreamData<T> {
        &mut self.streams[i]
    }

    /// Reserves room for `n` more sequences (keys and per-stream sequence offsets).
    pub fn reserve_sequences(&mut self, n: usize) {
        self.keys.reserve(n);
        for s in &mut self.streams {
            s.seq_offsets.reserve(n);
        }
    }

    /// Closes the samples pushed since the last finished sequence as one sequence with `key`.
    pub fn finish_sequence(&mut self, key: u64) {
        for s in &mut self.streams {
            s.finish_sequence();
        }
        self.keys.push(key);
    }

    /// Appends the keys of sequences that were finished stream by stream
    /// ([`StreamData::finish_sequence`]); every stream then holds one sequence per key.
    pub(crate) fn push_keys(&mut self, keys: impl IntoIterator<Item = u64>) {
        self.keys.extend(keys);
        debug_assert!(self
            .streams
            .iter()
            .all(|s| s.num_sequences() == self.keys.len()));
    }

    /// Drops everything pushed since the last finished sequence, open samples included.
    pub fn discard_sequence(&mut self) {
        for s in &mut self.streams {
            s.discard_sequence();
        }
    }

    /// The number of samples of sequence `seq`: the largest count over its streams, or that of
    /// stream `defining` when given (CNTK's definesMBSize).
    pub fn sequence_length(&self, seq: usize, defining: Option<usize>) -> usize {
        match defining {
            Some(i) => self.streams[i].sequence_samples(seq).len(),
            None => self
                .streams
                .iter()
                .map(|s| s.sequence_samples(seq).len())
                .max()
                .unwrap_or(0),
        }
    }

    /// Appends a copy of sequence `seq` of `other` (same streams), keeping its key.
    pub fn push_sequence_from(&mut self, other: &SequenceBatch<T>, seq: usize) {
        for (mine, theirs) in self.streams.iter_mut().zip(&other.streams) {
            mine.extend_from_sequence(theirs, seq);
        }
        self.finish_sequence(other.keys[seq]);
    }

    /// Appends copies of the sequences `seqs` of `other` (same streams), keeping their keys:
    /// the same as [`SequenceBatch::push_sequence_from`] for each, with one bulk copy per buffer.
    pub fn push_sequences_from(&mut self, other: &SequenceBatch<T>, seqs: Range<usize>) {
        for (mine, theirs) in self.streams.iter_mut().zip(&other.streams) {
            mine.extend_from_sequences(theirs, seqs.clone());
        }
        self.keys.extend_from_slice(&other.keys[seqs]);
    }

    /// As [`SequenceBatch::push_sequences_from`], but for the values of the dense streams:
    /// `values(stream, values)` is given those to copy (see
    /// [`StreamData::extend_from_sequences_but_values`]).
    pub(crate) fn push_sequences_but_dense_values<'o>(
        &mut self,
        other: &'o SequenceBatch<T>,
        seqs: Range<usize>,
        mut values: impl FnMut(usize, &'o [T]),
    ) {
        for (i, (mine, theirs)) in self.streams.iter_mut().zip(&other.streams).enumerate() {
            match mine.storage {
                Storage::Dense => values(
                    i,
                    mine.extend_from_sequences_but_values(theirs, seqs.clone()),
                ),
                Storage::Sparse => mine.extend_from_sequences(theirs, seqs.clone()),
            }
        }
        self.keys.extend_from_slice(&other.keys[seqs]);
    }

    /// The bytes its buffers hold allocated (their capacity, used or not).
    pub(crate) fn allocated_bytes(&self) -> usize {
        let words = std::mem::size_of::<usize>();
        self.keys.capacity() * 8
            + self
                .streams
                .iter()
                .map(|s| {
                    s.values.capacity() * std::mem::size_of::<T>()
                        + s.indices.capacity() * 4
                        + (s.sample_offsets.capacity() + s.seq_offsets.capacity()) * words
                })
                .sum::<usize>()
    }

    /// Empties the batch, keeping its buffers.
    pub fn clear(&mut self) {
        self.keys.clear();
        for s in &mut self.streams {
            s.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs() -> Vec<StreamSpec> {
        vec![
            StreamSpec::new("d", Storage::Dense, 3),
            StreamSpec::new("s", Storage::Sparse, 10),
        ]
    }

    #[test]
    fn fill_read_and_discard() {
        let mut b = SequenceBatch::<f32>::new(&specs());
        b.stream_mut(0).push_dense_sample(&[1.0, 2.0]);
        b.stream_mut(1).push_sparse_sample(&[4, 7], &[0.5, 0.25]);
        b.stream_mut(1).push_sparse_sample(&[], &[]);
        b.finish_sequence(100);
        // A bad sequence: pushed, then discarded.
        b.stream_mut(0).push_dense_sample(&[9.0]);
        b.stream_mut(1).push_sparse_value(1, 9.0);
        b.discard_sequence();
        b.stream_mut(0).push_dense_value(5.0);
        assert_eq!(b.stream_mut(0).end_dense_sample(), 1);
        b.finish_sequence(200);

        assert_eq!(b.keys(), &[100, 200]);
        let d = &b.streams()[0];
        assert_eq!(d.values(), &[1.0, 2.0, 0.0, 5.0, 0.0, 0.0]);
        assert_eq!(d.seq_offsets(), &[0, 1, 2]);
        let s = &b.streams()[1];
        assert_eq!(s.sequence_samples(0), 0..2);
        assert_eq!(s.sequence_samples(1), 2..2);
        assert_eq!(s.sparse_sample(0), (&[4u32, 7][..], &[0.5f32, 0.25][..]));
        assert_eq!(s.sparse_sample(1).0.len(), 0);
        assert_eq!(b.sequence_length(0, None), 2);
        assert_eq!(b.sequence_length(0, Some(0)), 1);
        assert_eq!(b.sequence_length(1, None), 1);
    }

    #[test]
    fn copy_sequences_between_batches() {
        let mut a = SequenceBatch::<f64>::new(&specs());
        for k in 0..3u32 {
            a.stream_mut(0).push_dense_sample(&[k as f64; 3]);
            a.stream_mut(1).push_sparse_sample(&[k, k + 1], &[1.0, 2.0]);
            a.finish_sequence(k as u64);
        }
        let mut b = a.empty_like();
        b.push_sequence_from(&a, 2);
        b.push_sequence_from(&a, 0);
        assert_eq!(b.keys(), &[2, 0]);
        assert_eq!(b.streams()[0].dense_sample(1), &[0.0; 3]);
        assert_eq!(b.streams()[1].sparse_sample(0).0, &[2, 3]);
        assert_eq!(b.streams()[1].sample_offsets(), &[0, 2, 4]);
        b.clear();
        assert!(b.is_empty());
        assert_eq!(b.streams()[1].num_samples(), 0);
    }

    #[test]
    fn bulk_copies_equal_one_by_one_copies() {
        let mut a = SequenceBatch::<f32>::new(&specs());
        for k in 0..6u32 {
            // Sequences of 0, 1 or 2 samples (of varying sparse widths).
            for j in 0..k % 3 {
                a.stream_mut(0).push_dense_sample(&[k as f32, j as f32]);
                let idx: Vec<u32> = (0..j + k % 2).collect();
                let val: Vec<f32> = idx.iter().map(|&i| i as f32 + 0.5).collect();
                a.stream_mut(1).push_sparse_sample(&idx, &val);
            }
            a.finish_sequence(10 + k as u64);
        }
        for (lo, hi) in [(0, 6), (1, 4), (2, 3), (5, 6), (3, 3)] {
            let mut one = a.empty_like();
            let mut bulk = a.empty_like();
            // Something before, so offsets must be rebased.
            one.push_sequence_from(&a, 4);
            bulk.push_sequence_from(&a, 4);
            for s in lo..hi {
                one.push_sequence_from(&a, s);
            }
            bulk.push_sequences_from(&a, lo..hi);
            assert_eq!(one, bulk, "{lo}..{hi}");
        }
    }
}
