//! Minibatches in CNTK's order ([`Randomizer::Cntk`](super::Randomizer::Cntk)): the
//! [`CntkRandomizer`] decides every minibatch's sequences; their chunks are decoded ahead on
//! the reader's threads (the next `prefetch_chunks` chunks this worker's sequences of the
//! sweep need; on the caller's thread with `threads = 0`) and dropped once all their sequences
//! of the sweep are delivered (CNTK's rolling chunk window).

use super::cntk_order::{minibatch_budgets, CntkEpoch, CntkEpochSize, CntkRandomizer, CntkWindow};
use super::engine::{check_frames, EpochLimit, ReaderOptions, Window};
use super::minibatch::Minibatch;
use super::packing::{Entry, Loaded, Packer};
use super::stats::{DecodeCounters, ReaderStats, WaitClock};
use super::ChunkSource;
use crate::batch::SequenceBatch;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::stream::StreamSpec;
use crossbeam_channel::Receiver;
use std::collections::HashMap;
use std::sync::Arc;

/// A decoded chunk: its slot in the loaded batches and its sequences still to deliver.
struct Held {
    slot: usize,
    outstanding: usize,
}

/// The CNTK-order part of a [`Reader`](super::Reader).
pub(super) struct CntkDelivery<T: Element> {
    source: Arc<dyn ChunkSource<T>>,
    order: CntkRandomizer,
    workers: usize,
    rank: usize,
    specs: Vec<StreamSpec>,
    defining: Option<usize>,
    corpus: bool,
    loaded: Loaded<T>,
    /// Decoded chunks by (sweep, chunk): a chunk is held until its sequences of that sweep are
    /// delivered.
    held: HashMap<(u64, u32), Held>,
    free_slots: Vec<usize>,
    /// Chunks being decoded ahead, by (sweep, chunk), on `pool`.
    ahead: HashMap<(u64, u32), Receiver<Result<SequenceBatch<T>>>>,
    /// (sweep, place in its order) where [`CntkDelivery::decode_ahead`] stopped scanning.
    scanned: (u64, usize),
    pool: Option<rayon::ThreadPool>,
    packer: Packer,
    prefetch_chunks: usize,
    /// Empty batches to decode into.
    spare: Vec<SequenceBatch<T>>,
    done: bool,
    chunks_read: u64,
    frame_mode: bool,
    decode: Arc<DecodeCounters>,
    wait: WaitClock,
}

/// CNTK's epoch size for an exfeed epoch limit: samples count the global timeline (all
/// workers' samples), as in CNTK.
fn epoch_size(limit: EpochLimit) -> CntkEpochSize {
    match limit {
        EpochLimit::Sweeps(n) => CntkEpochSize::Sweeps(n),
        EpochLimit::Samples(n) => CntkEpochSize::Samples(n),
        EpochLimit::Unlimited => CntkEpochSize::Samples(u64::MAX / 2),
    }
}

impl<T: Element> CntkDelivery<T> {
    /// CNTK's order over `source` with `opts` (randomizationSeed, window, workers, epoch).
    /// CNTK's order over `source` with `opts`, decoding ahead on `pool` (none: on the caller's
    /// thread).
    pub(super) fn new(
        source: Arc<dyn ChunkSource<T>>,
        opts: &ReaderOptions,
        corpus: bool,
        pool: Option<rayon::ThreadPool>,
        decode: Arc<DecodeCounters>,
    ) -> Result<Self> {
        if opts.with_replacement || opts.equalize.is_some() {
            return Err(Error::config(
                "randomizer cntk is CNTK's block randomizer (or, with randomize = false, its \
                 NoRandomizer): it goes without drawing with replacement (lensMode) or equalize",
            ));
        }
        let chunks = source.cntk_chunks().unwrap_or_else(|| {
            Err(Error::config(
                "randomizer cntk reads CTF and CBF files only (CNTK's chunks)",
            ))
        })?;
        let window = match opts.window {
            Window::Chunks(n) => CntkWindow::Chunks(n as u64),
            Window::Samples(n) => CntkWindow::Samples(n),
            // CNTK's randomizationWindow when nothing sets it: requestDataSize samples
            // (`SIZE_MAX >> 2`, DataReader.h).
            Window::All => CntkWindow::Samples(u64::MAX >> 2),
            Window::Bytes(_) => {
                return Err(Error::config(
                    "randomizer cntk counts its window in chunks or samples \
                     (randomizationWindow), not in bytes (randomizationWindowInBytes)",
                ))
            }
        };
        let mut order = if opts.randomize {
            CntkRandomizer::new(chunks, window, opts.seed)?
        } else {
            CntkRandomizer::in_file_order(chunks)?
        };
        order.start_epoch(CntkEpoch {
            workers: opts.num_workers,
            rank: opts.worker_rank,
            size: epoch_size(opts.limit),
            index: 0,
            cross_sweeps: true,
        })?;
        let specs = source.streams().to_vec();
        Ok(CntkDelivery {
            defining: specs.iter().position(|s| s.defines_mb_size),
            specs,
            source,
            order,
            workers: opts.num_workers,
            rank: opts.worker_rank,
            corpus,
            loaded: Loaded {
                batches: Vec::new(),
                order: Vec::new(),
            },
            held: HashMap::new(),
            free_slots: Vec::new(),
            ahead: HashMap::new(),
            scanned: (0, 0),
            pool,
            packer: Packer::default(),
            prefetch_chunks: opts.prefetch_chunks.max(1),
            spare: Vec::new(),
            done: false,
            chunks_read: 0,
            frame_mode: opts.frame_mode,
            decode,
            wait: WaitClock::default(),
        })
    }

    /// CNTK's `minibatchSourcePosition`: the global sample position.
    pub(super) fn position(&self) -> u64 {
        self.order.position()
    }

    /// Moves to a saved `minibatchSourcePosition`.
    pub(super) fn set_position(&mut self, position: u64) -> Result<()> {
        self.release_all();
        self.done = false;
        self.order.set_position(position)
    }

    /// A new epoch limit, keeping the position.
    pub(super) fn set_limit(&mut self, limit: EpochLimit) -> Result<()> {
        self.done = false;
        self.order.set_epoch_size(epoch_size(limit))
    }

    pub(super) fn done(&self) -> bool {
        self.done
    }

    /// Fills the consumer's side of [`ReaderStats`]: its wait, the chunks held.
    pub(super) fn fill_stats(&self, stats: &mut ReaderStats) {
        stats.wait_time = self.wait.total();
        stats.window_chunks = self.held.len();
        stats.chunks_held = self.held.len() + self.ahead.len();
    }

    pub(super) fn chunks_read(&self) -> u64 {
        self.chunks_read
    }

    /// Fills `mb` with CNTK's next minibatch of `size` samples; `false` once the epoch is over.
    pub(super) fn fill(&mut self, size: usize, mb: &mut Minibatch<T>) -> Result<bool> {
        let (global, local) = minibatch_budgets(size as u64, self.workers, self.rank, true);
        self.decode_ahead();
        while !self.done {
            let batch = self.order.next_sequences(global, local)?;
            self.done = batch.end_of_epoch;
            if batch.sequences.is_empty() {
                continue;
            }
            let mut entries = std::mem::take(&mut self.loaded.order);
            entries.clear();
            for (s, &sweep) in batch.sequences.iter().zip(&batch.sweeps) {
                let slot = self.hold(sweep, s.chunk)?;
                let decoded = &self.loaded.batches[slot];
                entries.push(Entry {
                    chunk: slot as u32,
                    seq: s.index,
                    samples: decoded.sequence_length(s.index as usize, self.defining),
                });
            }
            self.loaded.order = entries;
            // One copy per run of sequences of the same sweep.
            let mut start = 0;
            while start < batch.sweeps.len() {
                let sweep = batch.sweeps[start];
                let end = start + batch.sweeps[start..].partition_point(|&s| s == sweep);
                let (loaded, pool) = (&self.loaded, self.pool.as_ref());
                self.packer
                    .copy_sequences(loaded, start..end, sweep, self.corpus, mb, pool);
                start = end;
            }
            mb.samples = self.loaded.order.iter().map(|e| e.samples).sum();
            mb.end_of_sweep = batch.end_of_sweep;
            for (s, &sweep) in batch.sequences.iter().zip(&batch.sweeps) {
                self.delivered(sweep, s.chunk);
            }
            self.decode_ahead();
            return Ok(true);
        }
        Ok(false)
    }

    /// The slot of chunk `chunk` for sweep `sweep`, decoding it if it is not held.
    fn hold(&mut self, sweep: u64, chunk: u32) -> Result<usize> {
        let expected = self.source.chunks()[chunk as usize].sequences;
        if let Some(h) = self.held.get(&(sweep, chunk)) {
            return Ok(h.slot);
        }
        let slot = self.free_slots.pop().unwrap_or_else(|| {
            self.loaded.batches.push(SequenceBatch::new(&self.specs));
            self.loaded.batches.len() - 1
        });
        if let Some(rx) = self.ahead.remove(&(sweep, chunk)) {
            let decoded = self.wait.time(|| rx.recv()).map_err(|_| {
                Error::config(format!(
                    "decoding chunk {chunk} failed: its thread panicked"
                ))
            })??;
            let old = std::mem::replace(&mut self.loaded.batches[slot], decoded);
            self.spare.push(old);
        } else {
            let batch = &mut self.loaded.batches[slot];
            batch.clear();
            let (source, decode) = (&self.source, &self.decode);
            self.wait
                .time(|| decode.read_chunk(&**source, chunk as usize, batch))?;
            self.chunks_read += 1;
        }
        let batch = &self.loaded.batches[slot];
        if self.frame_mode {
            check_frames(batch, &self.specs, chunk as usize)?;
        }
        if batch.len() != expected {
            return Err(Error::config(format!(
                "randomizer cntk: chunk {chunk} decoded to {} sequences, its index says \
                 {expected} (with maxErrors, a dropped sequence changes CNTK's order)",
                batch.len()
            )));
        }
        self.held.insert(
            (sweep, chunk),
            Held {
                slot,
                outstanding: expected,
            },
        );
        Ok(slot)
    }

    /// One more sequence of `chunk` of sweep `sweep` delivered: the chunk is dropped after its
    /// last one. In file order (where workers share a chunk's sequences) a chunk is dropped
    /// once a sequence of another is delivered: no later sequence of the sweep is in it.
    fn delivered(&mut self, sweep: u64, chunk: u32) {
        if !self.order.randomizes() {
            let done: Vec<_> = self
                .held
                .keys()
                .filter(|&&k| k != (sweep, chunk))
                .copied()
                .collect();
            for key in done {
                self.release(key);
            }
            return;
        }
        if let Some(h) = self.held.get_mut(&(sweep, chunk)) {
            h.outstanding = h.outstanding.saturating_sub(1);
            if h.outstanding == 0 {
                self.release((sweep, chunk));
            }
        }
    }

    fn release(&mut self, key: (u64, u32)) {
        if let Some(h) = self.held.remove(&key) {
            self.loaded.batches[h.slot].clear();
            self.free_slots.push(h.slot);
        }
    }

    /// Starts decoding the chunks this worker's next sequences of the sweep need, up to
    /// `prefetch_chunks` being decoded (none without a pool). The order is scanned once a
    /// sweep: `scanned` is where the last scan stopped.
    fn decode_ahead(&mut self) {
        let Some(pool) = &self.pool else { return };
        if self.ahead.len() >= self.prefetch_chunks {
            return;
        }
        let Some(sweep) = self.order.current_sweep() else {
            return;
        };
        if self.scanned.0 != sweep {
            self.scanned = (sweep, 0);
        }
        for (place, chunk) in self.order.upcoming(self.scanned.1) {
            if self.ahead.len() >= self.prefetch_chunks {
                break;
            }
            self.scanned.1 = place + 1;
            let key = (sweep, chunk);
            if self.held.contains_key(&key) || self.ahead.contains_key(&key) {
                continue;
            }
            let mut batch = self
                .spare
                .pop()
                .unwrap_or_else(|| SequenceBatch::new(&self.specs));
            batch.clear();
            let (tx, rx) = crossbeam_channel::bounded(1);
            let (source, decode) = (self.source.clone(), self.decode.clone());
            pool.spawn(move || {
                let r = decode
                    .read_chunk(&*source, chunk as usize, &mut batch)
                    .map(|()| batch);
                let _ = tx.send(r);
            });
            self.chunks_read += 1;
            self.ahead.insert(key, rx);
        }
    }

    fn release_all(&mut self) {
        // Decodes under way finish on their own; their results are not waited for.
        self.ahead.clear();
        self.scanned = (0, 0);
        let keys: Vec<_> = self.held.keys().copied().collect();
        for key in keys {
            self.release(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::cntk_order::{cntk_ctf_chunk_samples, cntk_ctf_sequences, minibatch_keys};
    use super::super::{Randomizer, Reader};
    use super::*;
    use crate::cbf::{CbfWriter, CbfWriterOptions};
    use crate::ctf::CtfOptions;
    use crate::io::InputPath;
    use crate::options::{ChunkSize, ReadOptions};
    use crate::source::{CbfSource, CtfSource, CtfSourceOptions, IndexMode, MemorySource};
    use crate::Storage;

    /// A CTF file of `n` sequences (ids 0..n) of 1 to 4 lines.
    fn ctf_text(n: u64) -> String {
        let mut text = String::new();
        for id in 0..n {
            for line in 0..1 + (id * 7) % 4 {
                text.push_str(&format!("{id} |x {} {line}\n", id as f32));
            }
        }
        text
    }

    fn options(workers: usize, rank: usize, window: Window) -> ReaderOptions {
        ReaderOptions {
            seed: 5,
            window,
            limit: EpochLimit::Sweeps(2),
            num_workers: workers,
            worker_rank: rank,
            threads: 0,
            randomizer: Randomizer::Cntk,
            ..ReaderOptions::default()
        }
    }

    /// A CTF source of one dense stream `x` of dim 2, fully indexed in chunks of `chunk_bytes`.
    fn x_source_options(chunk_bytes: u64) -> CtfSourceOptions {
        CtfSourceOptions {
            ctf: CtfOptions {
                inputs: vec!["x:dense:2".parse().unwrap()],
                ..CtfOptions::default()
            },
            read: ReadOptions::new()
                .with_chunk_size(ChunkSize::Bytes(chunk_bytes))
                .with_index(IndexMode::Full),
        }
    }

    /// Every minibatch's keys, read through a [`Reader`].
    fn read_keys(reader: &mut Reader<f32>, size: usize) -> Vec<Vec<u64>> {
        let mut mb = reader.new_minibatch();
        let mut out = Vec::new();
        while reader.next_minibatch(size, &mut mb).unwrap() {
            out.push(mb.sequences.iter().map(|s| s.key).collect());
        }
        out
    }

    /// What the pure randomizer says the minibatches are, as keys (a sequence's key is its
    /// index in the file).
    fn expected_keys(
        chunks: &[Vec<u32>],
        opts: &ReaderOptions,
        window: CntkWindow,
        size: u64,
    ) -> Vec<Vec<u64>> {
        let epoch = CntkEpoch {
            workers: opts.num_workers,
            rank: opts.worker_rank,
            size: CntkEpochSize::Sweeps(2),
            index: 0,
            cross_sweeps: true,
        };
        minibatch_keys(chunks.to_vec(), window, opts.seed, epoch, size).unwrap()
    }

    #[test]
    fn a_ctf_file_is_read_in_cntk_s_order_minibatch_for_minibatch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.ctf");
        let text = ctf_text(300);
        std::fs::write(&path, &text).unwrap();
        let seqs = cntk_ctf_sequences(text.as_bytes(), false, None).unwrap();
        let chunks = cntk_ctf_chunk_samples(&seqs, 400, text.len() as u64);
        assert!(chunks.len() > 10);
        let source_options = x_source_options(400);
        for (workers, window, cntk_window) in [
            (1, Window::Chunks(3), CntkWindow::Chunks(3)),
            (3, Window::Samples(200), CntkWindow::Samples(200)),
        ] {
            for rank in 0..workers {
                let source = CtfSource::open(&InputPath::new(&path), source_options.clone());
                let opts = options(workers, rank, window);
                let mut reader = Reader::new(Arc::new(source.unwrap()), opts.clone()).unwrap();
                let got = read_keys(&mut reader, 25);
                assert_eq!(got, expected_keys(&chunks, &opts, cntk_window, 25));
                assert!(!got.is_empty());
            }
        }
        // Restored from a saved state, the reader goes on with the same minibatches.
        let opts = options(2, 1, Window::Chunks(4));
        let open =
            || Arc::new(CtfSource::open(&InputPath::new(&path), source_options.clone()).unwrap());
        let mut first = Reader::new(open(), opts.clone()).unwrap();
        let mut mb = first.new_minibatch();
        for _ in 0..7 {
            assert!(first.next_minibatch(10, &mut mb).unwrap());
        }
        let state = first.state();
        assert!(state.cntk_position.is_some());
        let mut again = Reader::restore(open(), opts.clone(), &state).unwrap();
        // CNTK's checkpoint holds only the position: a fresh reader moved there goes on alike.
        let mut moved = Reader::new(open(), opts.clone()).unwrap();
        moved
            .set_cntk_position(state.cntk_position.unwrap())
            .unwrap();
        let rest = read_keys(&mut first, 10);
        assert!(!rest.is_empty());
        assert_eq!(read_keys(&mut again, 10), rest);
        assert_eq!(read_keys(&mut moved, 10), rest);
        let exfeed_order = ReaderOptions {
            randomizer: Randomizer::Exfeed,
            ..opts
        };
        let err = Reader::<f32>::new(open(), exfeed_order)
            .unwrap()
            .set_cntk_position(3)
            .unwrap_err();
        assert!(err.to_string().contains("needs randomizer cntk"), "{err}");
        // Without the index there are no CNTK chunks.
        let no_index = CtfSourceOptions {
            read: source_options.read.with_index(IndexMode::None),
            ..source_options
        };
        let source = Arc::new(CtfSource::open(&InputPath::new(&path), no_index).unwrap());
        let err = Reader::<f32>::new(source, options(1, 0, Window::Chunks(2)))
            .err()
            .unwrap();
        assert!(err.to_string().contains("needs the full index"), "{err}");
    }

    #[test]
    fn stats_count_the_chunks_of_cntks_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.ctf");
        std::fs::write(&path, ctf_text(400)).unwrap();
        let open = || CtfSource::open(&InputPath::new(&path), x_source_options(300)).unwrap();
        let bytes: u64 = ChunkSource::<f32>::chunks(&open())
            .iter()
            .map(|c| c.bytes)
            .sum();
        for threads in [0, 2] {
            let opts = ReaderOptions {
                threads,
                ..options(1, 0, Window::Chunks(3))
            };
            let mut r = Reader::<f32>::new(Arc::new(open()), opts).unwrap();
            let mut mb = r.new_minibatch();
            while r.next_minibatch(20, &mut mb).unwrap() {}
            let s = r.stats();
            assert_eq!(s.chunks_decoded, r.chunks_read(), "{s:?}");
            assert_eq!(s.bytes_decoded, 2 * bytes, "{s:?}");
            assert_eq!(s.samples, r.samples_delivered(), "{s:?}");
            let zero = std::time::Duration::ZERO;
            assert!(s.decode_time > zero && s.wait_time <= s.elapsed, "{s:?}");
        }
        // CNTK's minibatches count samples: a size in sequences is refused.
        let mut r = Reader::<f32>::new(Arc::new(open()), options(1, 0, Window::Chunks(3))).unwrap();
        let mut mb = r.new_minibatch();
        let size = crate::reader::MinibatchSize::Sequences(4);
        let err = r.next_minibatch(size, &mut mb).unwrap_err();
        assert!(err.to_string().contains("which count samples"), "{err}");
    }

    #[test]
    fn decoding_ahead_gives_the_same_minibatches_and_holds_few_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.ctf");
        std::fs::write(&path, ctf_text(400)).unwrap();
        let source_options = x_source_options(300);
        let open =
            || Arc::new(CtfSource::open(&InputPath::new(&path), source_options.clone()).unwrap());
        for randomize in [true, false] {
            for workers in 1..=3 {
                for rank in 0..workers {
                    let opts = ReaderOptions {
                        randomize,
                        ..options(workers, rank, Window::Chunks(3))
                    };
                    let mut alone = Reader::new(open(), opts.clone()).unwrap();
                    let threaded = ReaderOptions {
                        threads: 2,
                        prefetch_chunks: 3,
                        ..opts.clone()
                    };
                    let mut ahead = Reader::new(open(), threaded.clone()).unwrap();
                    let expected = read_keys(&mut alone, 20);
                    assert!(!expected.is_empty());
                    assert_eq!(read_keys(&mut ahead, 20), expected);
                    // Held chunks: those of a window (3, and the next sweep's at its start) in
                    // CNTK's order, one or two in file order; decoding ahead: at most 3.
                    let chunks = ChunkSource::<f32>::cntk_chunks(&*open()).unwrap().unwrap();
                    let mut d = CntkDelivery::<f32>::new(
                        open(),
                        &threaded,
                        false,
                        None,
                        Default::default(),
                    )
                    .unwrap();
                    d.pool = Some(
                        rayon::ThreadPoolBuilder::new()
                            .num_threads(2)
                            .build()
                            .unwrap(),
                    );
                    let mut mb = Reader::new(open(), opts).unwrap().new_minibatch();
                    let most_held = if randomize { 2 * 3 + 1 } else { 2 };
                    let mut most_ahead = 0;
                    while d.fill(20, &mut mb).unwrap() {
                        assert!(d.held.len() <= most_held, "{} held", d.held.len());
                        most_ahead = most_ahead.max(d.ahead.len());
                    }
                    assert!((1..=3).contains(&most_ahead), "{most_ahead} decoded ahead");
                    assert!(chunks.len() > 10);
                }
            }
        }
    }

    #[test]
    fn a_cbf_file_is_read_in_cntk_s_order_by_its_own_chunks() {
        let specs = [StreamSpec::new("x", Storage::Dense, 1)];
        let mut batch = SequenceBatch::<f32>::new(&specs);
        for k in 0..200u64 {
            for _ in 0..1 + k % 3 {
                batch.stream_mut(0).push_dense_sample(&[k as f32]);
            }
            batch.finish_sequence(k);
        }
        let cbf = CbfWriterOptions {
            chunk_size: 100,
            ..CbfWriterOptions::default()
        };
        let mut writer = CbfWriter::new(Vec::new(), &specs, cbf).unwrap();
        writer.write_batch(&batch).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.cbf");
        std::fs::write(&path, writer.finish().unwrap()).unwrap();
        let source = Arc::new(CbfSource::open(&InputPath::new(&path), &[], false).unwrap());
        let chunks = ChunkSource::<f32>::cntk_chunks(&*source).unwrap().unwrap();
        assert!(chunks.len() > 5);
        assert_eq!(chunks.iter().flatten().count(), 200);
        let opts = options(2, 0, Window::Samples(50));
        let mut reader = Reader::new(source, opts.clone()).unwrap();
        let expected = expected_keys(&chunks, &opts, CntkWindow::Samples(50), 16);
        assert_eq!(read_keys(&mut reader, 16), expected);
    }

    #[test]
    fn frame_mode_refuses_a_sequence_of_more_than_one_sample() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.ctf");
        std::fs::write(&path, "0 |x 1 2\n1 |x 3 4\n1 |x 5 6\n").unwrap();
        let source_options = CtfSourceOptions {
            ctf: CtfOptions {
                inputs: vec!["x:dense:2".parse().unwrap()],
                ..CtfOptions::default()
            },
            read: ReadOptions::new().with_index(IndexMode::Full),
        };
        let source = Arc::new(CtfSource::open(&InputPath::new(&path), source_options).unwrap());
        let opts = ReaderOptions {
            frame_mode: true,
            ..options(1, 0, Window::Chunks(1))
        };
        let mut reader = Reader::<f32>::new(source, opts).unwrap();
        let mut mb = reader.new_minibatch();
        let err = reader.next_minibatch(4, &mut mb).unwrap_err();
        assert!(
            err.to_string()
                .contains("frameMode: sequence 1 has 2 samples"),
            "{err}"
        );
    }

    #[test]
    fn a_source_without_cntk_chunks_is_refused() {
        let specs = vec![StreamSpec::new("x", Storage::Dense, 1)];
        let mut all = SequenceBatch::<f32>::new(&specs);
        all.stream_mut(0).push_dense_sample(&[1.0]);
        all.finish_sequence(0);
        let source = Arc::new(MemorySource::from_batch(specs, &all, 1));
        let err = Reader::<f32>::new(source, options(1, 0, Window::Chunks(2)))
            .err()
            .unwrap();
        assert!(err.to_string().contains("CTF and CBF"), "{err}");
    }

    /// Large dense minibatches (whose copy is shared with the reader's threads) in CNTK's
    /// order hold exactly what one thread delivers.
    #[test]
    fn shared_copies_deliver_what_one_thread_does() {
        let dim = 200;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.ctf");
        let mut text = String::new();
        for id in 0..1500 {
            text.push_str(&format!("{id} |x"));
            for j in 0..dim {
                text.push_str(&format!(" {}", (id * 7 + j) % 1000));
            }
            text.push('\n');
        }
        std::fs::write(&path, text).unwrap();
        let mut source_options = x_source_options(64 << 10);
        source_options.ctf.inputs = vec![format!("x:dense:{dim}").parse().unwrap()];
        let read = |threads| {
            let source = CtfSource::open(&InputPath::new(&path), source_options.clone());
            let opts = ReaderOptions {
                threads,
                ..options(1, 0, Window::Chunks(3))
            };
            let mut reader = Reader::<f32>::new(Arc::new(source.unwrap()), opts).unwrap();
            let mut mb = reader.new_minibatch();
            let mut all = Vec::new();
            while reader.next_minibatch(256, &mut mb).unwrap() {
                all.push((mb.sequences.clone(), mb.data.clone()));
            }
            all
        };
        let alone = read(0);
        let bytes = alone[0].1.streams()[0].values().len() * 4;
        assert!(bytes >= super::super::packing::SHARE_FROM_BYTES, "{bytes}");
        assert!(read(2) == alone);
    }
}
