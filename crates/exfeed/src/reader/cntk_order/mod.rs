//! CNTK 2.7's order of sequences, exactly: its block randomizer (`BlockRandomizer`,
//! `ChunkRandomizer`, `SequenceRandomizer` in CNTK's `Source/Readers/ReaderLib`) as a pure
//! function of the chunks, the options and the position.
//!
//! What CNTK does, and so what this module does:
//! 1. a sweep's generator is `std::mt19937_64` ([`Mt19937_64`]) seeded with
//!    `randomizationSeed + sweep`; a random number in `[begin, end)` is
//!    `begin + rng() % (end - begin)` (CNTK's `RandMT`: it avoids the standard library's
//!    distributions, which differ between libraries);
//! 2. the chunks are shuffled by swapping position `i = 0, 1, ...` with position
//!    `rng() % chunks` (CNTK's `RandomShuffleMT`);
//! 3. every randomized chunk gets a window of neighbouring randomized chunks: in chunks
//!    (`randomizationWindow` chunks around it, clamped to the ends) or in samples (chunks within
//!    half the window's samples on either side);
//! 4. the sequences, laid out in randomized chunk order, are swapped in order of position `t`:
//!    a position `j` is drawn from the sequences of `t`'s chunk's window until the sequence at
//!    `j` may move to `t`'s chunk and the one at `t` to `j`'s chunk (a sequence may sit in a
//!    chunk whose window holds the sequence's own chunk), then the two swap. A fresh generator
//!    with the same seed does this, after the chunk shuffle's generator;
//! 5. worker `rank` of `workers` takes the sequences whose own chunk's randomized position
//!    modulo `workers` is `rank`, wherever they were swapped to, and minibatches are cut from
//!    this global timeline by [`CntkRandomizer::next_sequences`]
//!    (`BlockRandomizer::GetNextSequences`).
//!
//! CNTK randomizes a rolling window of chunks at a time, but the swaps it makes are exactly
//! those of one pass over the whole sweep, in the same order with the same generator, so
//! [`sweep_order`] computes the sweep at once.

mod chunking;
mod mt19937_64;
#[cfg(test)]
mod tests;

pub use chunking::{cntk_ctf_chunk_samples, cntk_ctf_chunks, cntk_ctf_sequences, CntkCtfSequence};
pub(crate) use chunking::{cntk_ctf_sequences_read, ctf_chunk_samples};
pub use mt19937_64::Mt19937_64;

use crate::error::{Error, Result};

pub use crate::options::Randomizer;

impl std::fmt::Display for Randomizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// CNTK's randomization window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CntkWindow {
    /// `randomizationWindow` in chunks (`sampleBasedRandomizationWindow = false`, CNTK's
    /// default for CTF: 4 GiB / `chunkSizeInBytes`, 128 chunks of 32 MiB).
    Chunks(u64),
    /// `randomizationWindow` in samples (`sampleBasedRandomizationWindow = true`).
    Samples(u64),
}

/// A chunk after CNTK's chunk shuffle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RandomizedChunk {
    /// The chunk's index in the file.
    pub original: u32,
    /// Samples of the randomized chunks before it.
    pub sample_start: u64,
    /// Sequences of the randomized chunks before it.
    pub sequence_start: u64,
    /// Its samples.
    pub samples: u64,
    /// Its sequences.
    pub sequences: u64,
    /// The randomized chunks whose sequences may be placed in it: `begin..end`.
    pub window: std::ops::Range<u32>,
}

/// One sequence of a sweep in CNTK's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CntkSequence {
    /// Its chunk's index in the file.
    pub chunk: u32,
    /// Its index in that chunk.
    pub index: u32,
    /// Its samples (what the index says: lines for CTF, the chunk header's count for CBF).
    pub samples: u32,
    /// Its chunk's randomized position, which decides the worker.
    pub randomized_chunk: u32,
}

/// CNTK's `RandMT`: `begin + rng() % (end - begin)`.
fn rand_in(begin: u64, end: u64, rng: &mut Mt19937_64) -> u64 {
    begin + rng.next_u64() % (end - begin)
}

/// The chunk shuffle and windows of a sweep (CNTK's `ChunkRandomizer::Randomize`): `chunks[i]`
/// is chunk `i`'s sequences' sample counts, in file order.
pub fn randomize_chunks(
    chunks: &[Vec<u32>],
    window: CntkWindow,
    seed: u64,
) -> Result<Vec<RandomizedChunk>> {
    let n = chunks.len();
    if u32::try_from(n).is_err() {
        return Err(Error::config(format!(
            "{n} chunks: CNTK's chunk ids are 32-bit (a larger chunkSizeInBytes makes fewer)"
        )));
    }
    let mut order: Vec<u32> = (0..n as u32).collect();
    let mut rng = Mt19937_64::new(seed);
    for i in 0..n {
        let j = rand_in(0, n as u64, &mut rng) as usize;
        order.swap(i, j);
    }
    let (mut samples, mut sequences) = (0u64, 0u64);
    let mut out: Vec<RandomizedChunk> = order
        .iter()
        .map(|&original| {
            let own = &chunks[original as usize];
            let own_samples = own.iter().map(|&s| u64::from(s)).sum::<u64>();
            let chunk = RandomizedChunk {
                original,
                sample_start: samples,
                sequence_start: sequences,
                samples: own_samples,
                sequences: own.len() as u64,
                window: 0..0,
            };
            samples += own_samples;
            sequences += own.len() as u64;
            chunk
        })
        .collect();
    match window {
        CntkWindow::Samples(range) => windows_in_samples(&mut out, range),
        CntkWindow::Chunks(range) => windows_in_chunks(&mut out, range)?,
    }
    Ok(out)
}

/// CNTK's `RandomizeUsingWindowInSamples`.
fn windows_in_samples(chunks: &mut [RandomizedChunk], range: u64) {
    let half = range / 2;
    for id in 0..chunks.len() {
        let (mut begin, mut end) = if id == 0 {
            (0u32, 1u32)
        } else {
            let w = &chunks[id - 1].window;
            (w.start, w.end)
        };
        let start = chunks[id].sample_start;
        while start - chunks[begin as usize].sample_start > half {
            begin += 1;
        }
        begin = begin.min(id as u32);
        end = end.max(id as u32 + 1);
        while (end as usize) < chunks.len() && {
            let next = &chunks[end as usize];
            next.sample_start + next.samples - start < half
        } {
            end += 1;
        }
        chunks[id].window = begin..end;
    }
}

/// CNTK's `RandomizeUsingWindowInChunks`, with its 32-bit chunk-id arithmetic.
fn windows_in_chunks(chunks: &mut [RandomizedChunk], range: u64) -> Result<()> {
    let n = chunks.len();
    let half = range / 2;
    let size: u32 = if range == 0 { 1 } else { range as u32 };
    for (i, chunk) in chunks.iter_mut().enumerate() {
        let mut begin: u32 = if i as u64 > half {
            (i as u32).wrapping_sub(half as u32)
        } else {
            0
        };
        let mut end = begin.wrapping_add(size);
        if end as usize > n {
            end = n as u32;
            begin = if n > size as usize {
                n as u32 - size
            } else {
                0
            };
        }
        if !(begin as usize <= i && i < end as usize) {
            return Err(Error::config(format!(
                "randomizationWindow {range} chunks: CNTK's 32-bit window arithmetic gives chunk \
                 {i} the window {begin}..{end}, which does not hold it (use fewer than 2^31 chunks)"
            )));
        }
        chunk.window = begin..end;
    }
    Ok(())
}

/// The randomized chunk holding sweep position `t` (CNTK's
/// `GetChunkIndexForSequencePosition`).
fn chunk_at(chunks: &[RandomizedChunk], t: u64) -> usize {
    chunks.partition_point(|c| c.sequence_start <= t) - 1
}

/// Whether `seq` may be placed in randomized chunk `chunk` (CNTK's `IsValidForPosition`).
fn may_sit_in(chunks: &[RandomizedChunk], chunk: usize, seq: &CntkSequence) -> bool {
    chunks[chunk].window.contains(&seq.randomized_chunk)
}

/// The whole sweep in CNTK's order, with its randomized chunks: `chunks[i]` is chunk `i`'s
/// sequences' sample counts, in file order; `seed` is `randomizationSeed + sweep`.
pub fn sweep_order(
    chunks: &[Vec<u32>],
    window: CntkWindow,
    seed: u64,
) -> Result<(Vec<RandomizedChunk>, Vec<CntkSequence>)> {
    let randomized = randomize_chunks(chunks, window, seed)?;
    let mut order: Vec<CntkSequence> = Vec::new();
    for (position, chunk) in randomized.iter().enumerate() {
        let own = &chunks[chunk.original as usize];
        order.extend(
            own.iter()
                .enumerate()
                .map(|(index, &samples)| CntkSequence {
                    chunk: chunk.original,
                    index: index as u32,
                    samples,
                    randomized_chunk: position as u32,
                }),
        );
    }
    let mut rng = Mt19937_64::new(seed);
    for t in 0..order.len() as u64 {
        let t_chunk = chunk_at(&randomized, t);
        let window = &randomized[t_chunk].window;
        let first = &randomized[window.start as usize];
        let last = &randomized[window.end as usize - 1];
        let (begin, end) = (first.sequence_start, last.sequence_start + last.sequences);
        loop {
            let j = rand_in(begin, end, &mut rng);
            let j_chunk = chunk_at(&randomized, j);
            if may_sit_in(&randomized, t_chunk, &order[j as usize])
                && may_sit_in(&randomized, j_chunk, &order[t as usize])
            {
                order.swap(t as usize, j as usize);
                break;
            }
        }
    }
    Ok((randomized, order))
}

/// How long an epoch is (CNTK's `EpochConfiguration`: `m_totalEpochSizeInSweeps`, else
/// `m_totalEpochSizeInSamples`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CntkEpochSize {
    /// This many samples of the global timeline (all workers' samples).
    Samples(u64),
    /// This many sweeps.
    Sweeps(u64),
    /// One sweep (`requestDataSize`).
    Sweep,
}

/// What CNTK's `StartEpoch` is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CntkEpoch {
    /// Number of workers.
    pub workers: usize,
    /// This worker's rank.
    pub rank: usize,
    /// The epoch's size.
    pub size: CntkEpochSize,
    /// The epoch's index: it starts at `index * size` samples.
    pub index: u64,
    /// Whether a minibatch goes on into the next sweep (`m_allowMinibatchesToCrossSweepBoundaries`;
    /// CNTK's `MinibatchSource` sets it).
    pub cross_sweeps: bool,
}

impl Default for CntkEpoch {
    /// What CNTK's Python `MinibatchSource` starts with by default: one worker, repeating for
    /// ever (`INFINITELY_REPEAT`: `SIZE_MAX / 2` samples), minibatches crossing sweeps.
    fn default() -> Self {
        CntkEpoch {
            workers: 1,
            rank: 0,
            size: CntkEpochSize::Samples(u64::MAX / 2),
            index: 0,
            cross_sweeps: true,
        }
    }
}

/// What one [`CntkRandomizer::next_sequences`] call gives this worker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CntkBatch {
    /// This worker's sequences, in order (may be empty while other workers get sequences).
    pub sequences: Vec<CntkSequence>,
    /// Samples of the global timeline this call moved past (every worker's).
    pub global_samples: u64,
    /// Samples of this worker's sequences.
    pub local_samples: u64,
    /// The sweep of each of `sequences` (a minibatch may cross into the next sweep).
    pub sweeps: Vec<u64>,
    /// A sweep ended within (or exactly at the end of) this call.
    pub end_of_sweep: bool,
    /// The epoch ended: this and every later call give nothing more.
    pub end_of_epoch: bool,
}

/// The minibatches worker `epoch.rank` gets in CNTK's order over `chunks` (each chunk's
/// sequences' samples), as keys: a sequence's key is its index in the file. Minibatches hold
/// about `minibatch_size` samples of the global timeline (CNTK's local timeline); this is the
/// reference the reader's `randomizer cntk` mode is tested against.
pub fn minibatch_keys(
    chunks: Vec<Vec<u32>>,
    window: CntkWindow,
    seed: u64,
    epoch: CntkEpoch,
    minibatch_size: u64,
) -> Result<Vec<Vec<u64>>> {
    let firsts: Vec<u64> = chunks
        .iter()
        .scan(0u64, |n, c| {
            *n += c.len() as u64;
            Some(*n - c.len() as u64)
        })
        .collect();
    let (global, local) = minibatch_budgets(minibatch_size, epoch.workers, epoch.rank, true);
    let mut r = CntkRandomizer::new(chunks, window, seed)?;
    r.start_epoch(epoch)?;
    let mut out = Vec::new();
    loop {
        let b = r.next_sequences(global, local)?;
        if !b.sequences.is_empty() {
            let keys = b.sequences.iter();
            out.push(
                keys.map(|s| firsts[s.chunk as usize] + u64::from(s.index))
                    .collect(),
            );
        }
        if b.end_of_epoch {
            return Ok(out);
        }
    }
}

/// The global and local sample budgets CNTK's packer asks the randomizer for, for minibatches
/// of `minibatch_size` samples (CNTK's `SequencePacker::SetConfiguration`). With
/// `local_timeline` (CNTK's default) each worker counts only its own samples: the global budget
/// is unbounded and the local one `minibatch_size / workers`, one more for the first
/// `minibatch_size % workers` ranks, at least 1.
pub fn minibatch_budgets(
    minibatch_size: u64,
    workers: usize,
    rank: usize,
    local_timeline: bool,
) -> (u64, u64) {
    if !local_timeline {
        return (minibatch_size, minibatch_size);
    }
    let workers = workers.max(1) as u64;
    let extra = u64::from(minibatch_size % workers > rank as u64);
    ((u64::MAX), (minibatch_size / workers + extra).max(1))
}

/// CNTK's `BlockRandomizer` for one worker: the sweep orders and the position on the global
/// timeline (in samples, over all sweeps), from which minibatches are cut.
#[derive(Debug, Clone)]
pub struct CntkRandomizer {
    chunks: Vec<Vec<u32>>,
    window: CntkWindow,
    seed: u64,
    sweep_samples: u64,
    epoch: CntkEpoch,
    epoch_start: u64,
    epoch_size: u64,
    /// The sweep whose order is in `order`.
    sweep: Option<u64>,
    order: Vec<CntkSequence>,
    /// Next sequence of `order` to give, and the samples before it.
    cursor: usize,
    cursor_samples: u64,
    /// The global sample position (CNTK's `minibatchSourcePosition`).
    position: u64,
    /// `false`: CNTK's `NoRandomizer` (`randomize = false`), file order.
    randomize: bool,
    /// `NoRandomizer`'s `m_globalSequencePosition`, which decides the worker: it counts on
    /// across sweeps and restarts at the sequence's index in its sweep on a `SetState`.
    sequence_position: u64,
}

impl CntkRandomizer {
    /// A randomizer over `chunks` (`chunks[i]`: chunk `i`'s sequences' sample counts, in file
    /// order) with `window` and `randomizationSeed` `seed`, at the start of epoch 0 of
    /// [`CntkEpoch::default`].
    pub fn new(chunks: Vec<Vec<u32>>, window: CntkWindow, seed: u64) -> Result<Self> {
        let sweep_samples = chunks
            .iter()
            .flatten()
            .try_fold(0u64, |sum, &s| sum.checked_add(u64::from(s)))
            .ok_or_else(|| Error::config("the data has more than 2^64 samples"))?;
        if sweep_samples == 0 {
            return Err(Error::config(
                "the data has no samples: CNTK's randomizer needs at least one",
            ));
        }
        if let CntkWindow::Chunks(_) = window {
            // Fail now rather than on the first sweep.
            randomize_chunks(&chunks, window, seed)?;
        }
        let mut r = CntkRandomizer {
            chunks,
            window,
            seed,
            sweep_samples,
            epoch: CntkEpoch::default(),
            epoch_start: 0,
            epoch_size: 0,
            sweep: None,
            order: Vec::new(),
            cursor: 0,
            cursor_samples: 0,
            position: 0,
            randomize: true,
            sequence_position: 0,
        };
        r.start_epoch(CntkEpoch::default())?;
        Ok(r)
    }

    /// CNTK's `NoRandomizer` (`randomize = false`) over `chunks`: every sweep in file order,
    /// worker `rank` taking the sequences whose running sequence count modulo the workers is
    /// `rank`.
    pub fn in_file_order(chunks: Vec<Vec<u32>>) -> Result<Self> {
        let mut r = CntkRandomizer::new(chunks, CntkWindow::Chunks(1), 0)?;
        r.randomize = false;
        r.sweep = None;
        r.order = Vec::new();
        r.start_epoch(CntkEpoch::default())?;
        Ok(r)
    }

    /// Samples in a sweep.
    pub fn sweep_samples(&self) -> u64 {
        self.sweep_samples
    }

    /// CNTK's `StartEpoch`: the epoch's size and start, and the position at its start (the
    /// first sequence starting at or after it).
    pub fn start_epoch(&mut self, epoch: CntkEpoch) -> Result<()> {
        if epoch.workers == 0 || epoch.rank >= epoch.workers {
            return Err(Error::config(format!(
                "worker rank {} of {} workers",
                epoch.rank, epoch.workers
            )));
        }
        let size = match epoch.size {
            CntkEpochSize::Sweeps(n) => self.sweep_samples.wrapping_mul(n),
            CntkEpochSize::Sweep => self.sweep_samples,
            CntkEpochSize::Samples(n) => n,
        };
        if size > u64::MAX / 2 {
            return Err(Error::config(format!(
                "an epoch of {size} samples: CNTK refuses epochs above 2^63 samples"
            )));
        }
        self.epoch = epoch;
        self.epoch_size = size;
        self.epoch_start = size.wrapping_mul(epoch.index);
        self.set_position(self.epoch_start)
    }

    /// Changes the epoch's size, keeping the position (the epoch starts at 0).
    pub fn set_epoch_size(&mut self, size: CntkEpochSize) -> Result<()> {
        let position = self.position;
        let (sweep, cursor, cursor_samples) = (self.sweep, self.cursor, self.cursor_samples);
        self.start_epoch(CntkEpoch {
            size,
            index: 0,
            ..self.epoch
        })?;
        // Back to where it was: the same sweep order and cursor.
        if self.sweep == sweep {
            (self.cursor, self.cursor_samples) = (cursor, cursor_samples);
            self.position = position;
            Ok(())
        } else {
            self.set_position(position)
        }
    }

    /// Changes the number of workers and the rank mid-epoch (CNTK's `SetConfiguration`).
    pub fn set_workers(&mut self, workers: usize, rank: usize) -> Result<()> {
        if workers == 0 || rank >= workers {
            return Err(Error::config(format!(
                "worker rank {rank} of {workers} workers"
            )));
        }
        self.epoch.workers = workers;
        self.epoch.rank = rank;
        Ok(())
    }

    /// The global sample position: CNTK's checkpoint `minibatchSourcePosition`.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// CNTK's `SetState`: moves to the first sequence that starts at or after global sample
    /// `position` (the next sweep's start if `position` is inside the sweep's last sequence).
    pub fn set_position(&mut self, position: u64) -> Result<()> {
        self.prepare_sweep(position)?;
        let offset = position % self.sweep_samples;
        if offset < self.cursor_samples {
            self.cursor = 0;
            self.cursor_samples = 0;
        }
        while self.cursor < self.order.len() && self.cursor_samples < offset {
            self.cursor_samples += u64::from(self.order[self.cursor].samples);
            self.cursor += 1;
        }
        let sweep = position / self.sweep_samples;
        self.position = sweep * self.sweep_samples + self.cursor_samples;
        // NoRandomizer's sequence count restarts at the sequence's place in the sweep (at 0
        // when the position moved on to the next sweep's start).
        self.sequence_position = (self.cursor % self.order.len()) as u64;
        if self.randomize && self.epoch.rank >= self.chunks.len() {
            // A worker without a chunk has nothing to read.
            self.position = self.epoch_start.wrapping_add(self.epoch_size);
        }
        Ok(())
    }

    /// Whether this is the block randomizer (else `NoRandomizer`, file order).
    pub fn randomizes(&self) -> bool {
        self.randomize
    }

    /// The sweep whose order is drawn (`None` before the first).
    pub fn current_sweep(&self) -> Option<u64> {
        self.sweep
    }

    /// This worker's next sequences of the current sweep from place `from` of the sweep's
    /// order on (not before the next one to give), as `(place, chunk)`: what to decode ahead.
    /// The next sweep's are not known before its order is drawn.
    pub fn upcoming(&self, from: usize) -> impl Iterator<Item = (usize, u32)> + '_ {
        let (workers, rank) = (self.epoch.workers as u64, self.epoch.rank as u64);
        let mine = move |k: usize, s: &CntkSequence| {
            if self.randomize {
                u64::from(s.randomized_chunk) % workers == rank
            } else {
                (self.sequence_position + (k - self.cursor) as u64) % workers == rank
            }
        };
        let places = self.order.iter().enumerate().skip(from.max(self.cursor));
        places
            .filter(move |(k, s)| mine(*k, s))
            .map(|(k, s)| (k, s.chunk))
    }

    /// CNTK's `PrepareNewSweepIfNeeded`.
    fn prepare_sweep(&mut self, position: u64) -> Result<()> {
        let sweep = position / self.sweep_samples;
        if self.sweep != Some(sweep) {
            if self.randomize {
                let seed = self.seed.wrapping_add(sweep);
                self.order = sweep_order(&self.chunks, self.window, seed)?.1;
            } else if self.order.is_empty() {
                self.order = file_order(&self.chunks);
            }
            self.sweep = Some(sweep);
            self.cursor = 0;
            self.cursor_samples = 0;
        }
        Ok(())
    }

    /// CNTK's `GetNextSequences(global, local)`: this worker's next sequences, moving along
    /// the global timeline by at most `global` samples while this worker's sequences add up to
    /// at most `local` samples, except that at least one sequence of this worker is given (when
    /// the epoch has one left) however long it is. With `cross_sweeps` a minibatch ending a
    /// sweep is filled up from the next one, within the budgets.
    pub fn next_sequences(&mut self, global: u64, local: u64) -> Result<CntkBatch> {
        if global == 0 || local == 0 {
            return Err(Error::config("a minibatch of 0 samples"));
        }
        if !self.randomize {
            return self.next_in_file_order(global, local);
        }
        let mut batch = CntkBatch::default();
        loop {
            let at_sweep_boundary = batch.end_of_sweep;
            let (g, l) = self.next_descriptions(
                global - batch.global_samples,
                local - batch.local_samples,
                &mut batch,
                !at_sweep_boundary,
            )?;
            if at_sweep_boundary && g == 0 {
                break;
            }
            batch.global_samples += g;
            batch.local_samples += l;
            if !(self.epoch.cross_sweeps
                && !batch.end_of_epoch
                && batch.end_of_sweep
                && global > batch.global_samples
                && local > batch.local_samples)
            {
                break;
            }
        }
        Ok(batch)
    }

    /// CNTK's `BlockRandomizer::GetNextSequenceDescriptions`: appends to `batch` and returns
    /// the global and local samples taken.
    fn next_descriptions(
        &mut self,
        global: u64,
        local: u64,
        batch: &mut CntkBatch,
        mut at_least_one: bool,
    ) -> Result<(u64, u64)> {
        self.prepare_sweep(self.position)?;
        let sweep_position = self.position % self.sweep_samples;
        let epoch_end = self.epoch_size.wrapping_add(self.epoch_start);
        if self.position >= epoch_end {
            batch.end_of_epoch = true;
            batch.end_of_sweep |= self.position >= self.sweep_samples && sweep_position == 0;
            return Ok((0, 0));
        }
        let global = global.min(self.sweep_samples - sweep_position);
        let (workers, rank) = (self.epoch.workers as u64, self.epoch.rank as u64);
        let (mut g, mut l) = (0u64, 0u64);
        let (mut end_of_sweep, mut end_of_epoch) = (false, false);
        while self.cursor < self.order.len() {
            let s = self.order[self.cursor];
            let len = u64::from(s.samples);
            let is_local = u64::from(s.randomized_chunk) % workers == rank;
            if !at_least_one && (g + len > global || (is_local && l + len > local)) {
                break;
            }
            if self.position + g >= epoch_end {
                end_of_epoch = true;
                end_of_sweep = sweep_position + g >= self.sweep_samples;
                break;
            }
            if is_local {
                batch.sequences.push(s);
                batch.sweeps.push(self.position / self.sweep_samples);
                l += len;
                at_least_one = false;
            }
            g += len;
            self.cursor += 1;
            self.cursor_samples += len;
        }
        end_of_sweep |= sweep_position + g >= self.sweep_samples;
        end_of_epoch |= self.position + g >= epoch_end;
        batch.end_of_sweep |= end_of_sweep;
        batch.end_of_epoch |= end_of_epoch;
        self.position += g;
        Ok((g, l))
    }

    /// CNTK's `NoRandomizer::GetNextSequences` (with `GetNextSequenceDescriptions`): one walk
    /// along the file order, across sweep ends when the epoch allows it.
    fn next_in_file_order(&mut self, global: u64, local: u64) -> Result<CntkBatch> {
        let mut batch = CntkBatch::default();
        let epoch_end = self.epoch_size.wrapping_add(self.epoch_start);
        let sweep_samples = self.sweep_samples;
        if self.position >= epoch_end {
            batch.end_of_epoch = true;
            batch.end_of_sweep =
                self.position >= sweep_samples && self.position.is_multiple_of(sweep_samples);
            return Ok(batch);
        }
        let global = if self.epoch.cross_sweeps {
            global
        } else {
            global.min(sweep_samples - self.position % sweep_samples)
        };
        let sweep = self.position / sweep_samples;
        let (workers, rank) = (self.epoch.workers as u64, self.epoch.rank as u64);
        let mut at_least_one = true;
        while batch.global_samples < global && batch.local_samples < local {
            self.prepare_sweep(self.position)?;
            let s = self.order[self.cursor];
            let len = u64::from(s.samples);
            let is_local = self.sequence_position % workers == rank;
            if !at_least_one
                && (batch.global_samples + len > global
                    || (is_local && batch.local_samples + len > local))
            {
                break;
            }
            if self.position >= epoch_end {
                batch.end_of_epoch = true;
                batch.end_of_sweep = sweep != self.position / sweep_samples;
                break;
            }
            if is_local {
                batch.sequences.push(s);
                batch.sweeps.push(self.position / sweep_samples);
                batch.local_samples += len;
                at_least_one = false;
            }
            batch.global_samples += len;
            self.position += len;
            self.sequence_position += 1;
            self.cursor += 1;
            self.cursor_samples += len;
        }
        batch.end_of_epoch |= self.position >= epoch_end;
        batch.end_of_sweep |= sweep != self.position / sweep_samples;
        Ok(batch)
    }
}

/// A sweep in file order (CNTK's `NoRandomizer`).
fn file_order(chunks: &[Vec<u32>]) -> Vec<CntkSequence> {
    let mut order = Vec::new();
    for (chunk, own) in chunks.iter().enumerate() {
        order.extend(
            own.iter()
                .enumerate()
                .map(|(index, &samples)| CntkSequence {
                    chunk: chunk as u32,
                    index: index as u32,
                    samples,
                    randomized_chunk: chunk as u32,
                }),
        );
    }
    order
}
