//! [`Reader`]: the minibatch engine over a [`ChunkSource`].

use super::cntk_delivery::CntkDelivery;
use super::elastic::{self, PlanInputs, Position, Resume};
use super::madvise::prepare_batch;
use super::minibatch::{Minibatch, MinibatchSize};
use super::mix::{MixCount, SweepMix};
use super::packing::{Entry, Loaded, Packer};
pub use super::plan::Window;
use super::plan::{draw_window, shuffle_window, SweepPlan};
use super::pool;
use super::stats::{DecodeCounters, ReaderStats, WaitClock};
use super::Randomizer;
use super::{ChunkInfo, ChunkSource};
use crate::batch::SequenceBatch;
use crate::element::Element;
use crate::error::{Error, ErrorKind, Location, Result};
use crate::fetch_ahead::FetchTicket;
use crate::io::FileStamp;
pub use crate::options::EqualizeMode;
use crate::stream::StreamSpec;
use crossbeam_channel::Receiver;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

/// When an epoch (a run of the reader) ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpochLimit {
    /// After this many sweeps over the data (the default: one).
    Sweeps(u64),
    /// Once this many samples have been delivered (by this worker). Minibatches are cut so as
    /// not to pass the limit, except that a minibatch always holds at least one sequence.
    Samples(u64),
    /// Never (the caller stops).
    Unlimited,
}

impl Default for EpochLimit {
    fn default() -> Self {
        EpochLimit::Sweeps(1)
    }
}

/// The engine's options; they map one to one onto CNTK's reader parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderOptions {
    /// `randomize` (default true).
    pub randomize: bool,
    /// `randomizationSeed` (default 0); sweep `s` uses `seed + s`.
    pub seed: u64,
    /// `randomizationWindow` / `sampleBasedRandomizationWindow`.
    pub window: Window,
    /// `frameMode`: every sequence must be one sample.
    pub frame_mode: bool,
    /// Epoch size: max sweeps or max samples.
    pub limit: EpochLimit,
    /// Number of distributed workers (at least 1).
    pub num_workers: usize,
    /// This worker's rank, `0..num_workers`.
    pub worker_rank: usize,
    /// Threads decoding chunks ahead of the consumer; 0 decodes on the caller's thread when a
    /// chunk is needed. Default: the available parallelism. At most
    /// [`ReaderOptions::max_threads`]: more are refused (they only add contention).
    pub threads: usize,
    /// How many chunks may be scheduled or decoded ahead of the current window (at least 1;
    /// default [`ReaderOptions::prefetch_for`] the threads; with a window in bytes, at most as
    /// many of the data set's largest chunks as fit in the window, at least 1). At most
    /// `window chunks + prefetch_chunks` decoded (or being decoded) chunks are held at any time, so memory is
    /// bounded by that many decoded chunks (plus, for CTF files, the mapped bytes of the chunks
    /// being decoded, one per thread, and one minibatch). The threads stay busy while the
    /// consumer packs the current window as long as this covers what they decode meanwhile;
    /// when it equals the window's chunks, the whole next window is decoded during the current
    /// one.
    pub prefetch_chunks: usize,
    /// With `randomize`: draw each window's sequences at random with replacement (as many draws
    /// as it has sequences), weighted by [`ChunkSource::chunk_weights`] when the source has
    /// them, instead of shuffling them (Lens's RANDOMIZED and PROBABILISTIC modes).
    pub with_replacement: bool,
    /// Ranks in step: deliver exactly this many minibatches every sweep (see
    /// [`equalize_quota`]). A worker whose part of the sweep runs out first goes through its
    /// part again from its start (same order, same sweep number) until it has delivered them;
    /// one with more drops the rest of its part. [`Reader::take_notes`] says, per sweep, what
    /// was repeated or dropped. With [`EqualizeMode::Spread`] nothing is: the minibatches
    /// share the part instead.
    pub equalize: Option<u64>,
    /// How [`ReaderOptions::equalize`] keeps the ranks in step.
    pub equalize_mode: EqualizeMode,
    /// What [`ReaderOptions::equalize`] was computed from: the minibatch size and the ranks kept
    /// in step. A reader resumed with equalize on another number of workers
    /// ([`Reader::restore_from_all`]) computes the quota of the rest of the interrupted sweep
    /// from them; without them that is refused.
    pub equalize_basis: Option<QuotaBasis>,
    /// Whose order: exfeed's (the default) or CNTK's block randomizer exactly
    /// ([`Randomizer::Cntk`]: CTF and CBF with their full index; see the `cntk_order` module).
    pub randomizer: Randomizer,
}

/// The minibatches a worker delivers per sweep so that ranks stay in step: the sweep's samples
/// (or sequences, for a minibatch size in sequences) split into minibatches of
/// `minibatch_size` over `ranks` ranks, `max(1, total_samples / (ranks * minibatch_size))` per
/// rank (rounded down), that rank's share split between its
/// `workers / ranks` parts (a DataLoader's worker processes; the first parts take one more
/// when it does not divide). Worker `worker` of `workers` belongs to rank `worker / (workers /
/// ranks)`. `workers` must be a multiple of `ranks`.
pub fn equalize_quota(
    total_samples: u64,
    minibatch_size: usize,
    workers: usize,
    ranks: usize,
    worker: usize,
) -> Result<u64> {
    if ranks == 0 || !workers.is_multiple_of(ranks) || minibatch_size == 0 {
        return Err(Error::config(format!(
            "equalize: {workers} workers cannot be split between {ranks} ranks"
        )));
    }
    let parts = (workers / ranks) as u64;
    let per_rank = ranks as u64 * minibatch_size as u64;
    let steps = (total_samples / per_rank).max(1);
    let part = (worker as u64) % parts;
    Ok(steps / parts + u64::from(part < steps % parts))
}

/// What a sweep's equalize quota is computed from ([`equalize_quota`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaBasis {
    /// The minibatch size; in sequences ([`MinibatchSize::Sequences`]), sequences are counted.
    pub minibatch_size: MinibatchSize,
    /// The ranks kept in step; the workers are split evenly between them.
    pub ranks: usize,
}

/// Decoding threads per core beyond which a reader refuses ([`ReaderOptions::max_threads`]):
/// decoding is CPU-bound, so more threads than cores only wait on each other.
const MAX_THREADS_PER_CORE: usize = 4;

impl Default for ReaderOptions {
    fn default() -> Self {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        ReaderOptions {
            randomize: true,
            seed: 0,
            window: Window::default(),
            frame_mode: false,
            limit: EpochLimit::default(),
            num_workers: 1,
            worker_rank: 0,
            threads,
            prefetch_chunks: ReaderOptions::prefetch_for(threads),
            with_replacement: false,
            equalize: None,
            equalize_mode: EqualizeMode::Repeat,
            equalize_basis: None,
            randomizer: Randomizer::Exfeed,
        }
    }
}

impl ReaderOptions {
    /// The default prefetch for `threads` decoding threads: two chunks a thread (at least two),
    /// so every thread has a chunk to go on with while the consumer takes the one it finished.
    pub fn prefetch_for(threads: usize) -> usize {
        threads.saturating_mul(2).max(2)
    }

    /// The most decoding threads a reader takes: four per available core.
    pub fn max_threads() -> usize {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        cores.saturating_mul(MAX_THREADS_PER_CORE)
    }
}

/// A saved reader position ([`Reader::state`]), serializable with serde (JSON).
///
/// It holds the position in the sweep order (which is recomputed from the seed on restore) and
/// the options that order depends on, so a state is only restored into a compatible reader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReaderState {
    /// Format version of this structure (1).
    pub version: u32,
    /// The current sweep.
    pub sweep: u64,
    /// The current window of this worker's plan of that sweep.
    pub window: usize,
    /// Sequences of that window already delivered.
    pub offset: usize,
    /// Samples delivered so far (for [`EpochLimit::Samples`]).
    pub samples_delivered: u64,
    /// Samples delivered in the current sweep so far.
    pub sweep_samples: u64,
    /// Minibatches delivered so far.
    pub minibatches: u64,
    /// `randomize` of the reader that saved it.
    pub randomize: bool,
    /// `randomizationSeed`.
    pub seed: u64,
    /// The randomization window.
    pub randomization_window: Window,
    /// `frameMode`.
    pub frame_mode: bool,
    /// Number of workers.
    pub num_workers: usize,
    /// This worker's rank.
    pub worker_rank: usize,
    /// Drawing with replacement.
    #[serde(default)]
    pub with_replacement: bool,
    /// Draws weighted by the source's [`ChunkSource::chunk_weights`] (Lens's PROBABILISTIC
    /// rather than RANDOMIZED).
    #[serde(default)]
    pub weighted: bool,
    /// Number of chunks of the data set.
    pub chunks: usize,
    /// Total samples of the data set by its index.
    pub total_samples: u64,
    /// The file names (without directories) of a corpus, in order (see
    /// [`ChunkSource::shard_names`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corpus: Option<Vec<String>>,
    /// [`ReaderOptions::equalize`]: minibatches per sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equalize: Option<u64>,
    /// With equalize: the ranks kept in step ([`QuotaBasis::ranks`]). Resumed on the same
    /// number of workers but other ranks (or another quota), the workers are not in step: the
    /// rest of the sweep is then shared as on another count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equalize_ranks: Option<usize>,
    /// With equalize: minibatches and sequences delivered in the current sweep so far.
    #[serde(default)]
    pub sweep_minibatches: u64,
    /// See `sweep_minibatches`.
    #[serde(default)]
    pub sweep_sequences: u64,
    /// The chunks were byte ranges of the files, read without an index
    /// ([`ChunkSource::chunks_by_byte_range`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub byte_ranges: bool,
    /// The data files it was saved on (see [`FileStamp`]), filled in by
    /// [`AnyReader::state`](crate::configured::AnyReader::state), which refuses to restore it on other
    /// data. A state without them (written by exfeed before they were kept, or by
    /// [`Reader::state`]) is restored unchecked, as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Vec<FileStamp>>,
    /// With `randomizer cntk`: CNTK's `minibatchSourcePosition` (the global sample position),
    /// the whole position in CNTK's order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cntk_position: Option<u64>,
    /// Of sources mixed by weight: the mix ([`Mix::describe`](super::Mix::describe): each
    /// source's chunks and weight, the sweep's size), which must be the same to restore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mix: Option<String>,
    /// Of a mix: what each source contributed to the current sweep so far.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mix_sweep: Vec<MixCount>,
    /// Of a reader resumed on another number of workers ([`Reader::restore_from_all`]), while
    /// it is in a sweep the old workers had begun: where they stopped (oldest resume first),
    /// which decides the plans of those sweeps (see the `elastic` module).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resumed: Vec<Resume>,
}

/// What [`Reader::run`] delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadSummary {
    /// Minibatches delivered.
    pub minibatches: u64,
    /// Sequences delivered.
    pub sequences: u64,
    /// Samples delivered.
    pub samples: u64,
    /// Minibatches that ended a sweep.
    pub sweeps_ended: u64,
    /// The epoch ended (rather than `stop_after` being reached).
    pub finished: bool,
}

impl ReaderState {
    /// The state as one line of JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a ReaderState always serializes")
    }

    /// Reads a state written by [`ReaderState::to_json`].
    pub fn from_json(text: &str) -> Result<Self> {
        serde_json::from_str(text).map_err(|e| Error::config(format!("not a reader state: {e}")))
    }
}

enum Pending<T> {
    /// Decoding on the pool; the result arrives on the channel.
    Async(Receiver<Result<SequenceBatch<T>>>),
    /// Decoded on the caller's thread when taken (threads = 0).
    Deferred(SequenceBatch<T>, Option<FetchTicket>),
}

/// Position of the scheduler (what to decode next) in the chunk stream.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    sweep: u64,
    window: usize,
    index: usize,
}

/// Stops a reader's read from another thread: the read in progress, and every later one,
/// fails at the next window ([`Reader::stopper`]). For closing a reader that another thread is
/// reading.
#[derive(Debug, Clone, Default)]
pub struct Stopper(Arc<std::sync::atomic::AtomicBool>);

impl Stopper {
    /// Stops the reader: its read in progress and every later one fail.
    pub fn stop(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn stopped(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// The minibatch reader. See the [module documentation](super).
pub struct Reader<T: Element> {
    source: Arc<dyn ChunkSource<T>>,
    specs: Vec<StreamSpec>,
    opts: ReaderOptions,
    defining: Option<usize>,
    pool: Option<rayon::ThreadPool>,
    packer: Packer,
    plans: VecDeque<Arc<SweepPlan>>,
    // Consumer position.
    sweep: u64,
    window: usize,
    offset: usize,
    loaded: Option<Loaded<T>>,
    samples_delivered: u64,
    sweep_samples: u64,
    minibatches: u64,
    done: bool,
    failed: bool,
    stopper: Stopper,
    // Prefetch.
    sched: Cursor,
    pending: VecDeque<(usize, Pending<T>)>,
    /// The chunks after the scheduled ones whose bytes are being fetched ahead (see
    /// [`ChunkSource::fetch_ahead`]), in plan order: the next ones `sched` gives.
    fetching: VecDeque<(usize, FetchTicket)>,
    /// Where the scheduler is once past `fetching`.
    fetch_cursor: Cursor,
    spare: Vec<SequenceBatch<T>>,
    /// The last window's order buffer, for reuse.
    spare_order: Vec<Entry>,
    peak_held: usize,
    /// The file bytes of the chunks held (the window's, those decoded ahead), the most so far,
    /// and the loaded window's.
    held_bytes: u64,
    peak_held_bytes: u64,
    window_bytes: u64,
    chunks_read: u64,
    /// Chunk buffers taken from the process's kept ones, and allocated anew.
    buffers_reused: u64,
    buffers_new: u64,
    no_data: bool,
    total_samples: u64,
    /// The file names of a corpus source (keys hold the shard).
    corpus: Option<Vec<String>>,
    // With equalize: what the current sweep delivered, and the notes of ended sweeps.
    sweep_minibatches: u64,
    sweep_sequences: u64,
    notes: Vec<String>,
    /// With equalize: a sequence was delivered since the part was last started again.
    delivered_in_pass: bool,
    /// With `randomizer cntk`: CNTK's order, which then decides every minibatch.
    cntk: Option<Box<CntkDelivery<T>>>,
    /// Of a mix: what each source contributed to the current sweep, and to the ended ones.
    mix_counts: Vec<MixCount>,
    mix_sweeps: Vec<SweepMix>,
    /// Of a reader resumed on another number of workers: the old workers' positions, and this
    /// worker's plans of the sweeps they had begun.
    resumes: Vec<Resume>,
    resumed_plans: Vec<Arc<SweepPlan>>,
    /// With equalize: this worker's quota of each resumed sweep, of its rest.
    resumed_quotas: Vec<(u64, u64)>,
    /// Of a resumed reader: the chunks as its resumed sweeps count them, made once (see
    /// [`Reader::resume_infos`]).
    resume_chunks: Option<Arc<[ChunkInfo]>>,
    // For [`Reader::stats`].
    decode: Arc<DecodeCounters>,
    wait: WaitClock,
    started: Instant,
}

impl<T: Element> Reader<T> {
    /// A reader at the start of sweep 0.
    pub fn new(source: Arc<dyn ChunkSource<T>>, options: ReaderOptions) -> Result<Self> {
        let num_chunks = source.chunks().len();
        let total_samples = source
            .chunks()
            .iter()
            .map(|c| c.samples)
            .fold(0u64, u64::saturating_add);
        if options.num_workers == 0 {
            return Err(Error::config("num_workers must be at least 1"));
        }
        if options.worker_rank >= options.num_workers {
            return Err(Error::config(format!(
                "worker_rank {} is out of range for {} workers",
                options.worker_rank, options.num_workers
            )));
        }
        match options.window {
            Window::Chunks(0) | Window::Samples(0) => {
                return Err(Error::config(
                    "randomizationWindow must be a positive integer",
                ));
            }
            Window::Bytes(0) => {
                return Err(Error::config(
                    "randomizationWindowInBytes must be at least 1 byte",
                ));
            }
            _ => {}
        }
        if options.limit == EpochLimit::Sweeps(0) || options.limit == EpochLimit::Samples(0) {
            return Err(Error::config(
                "the epoch limit (max sweeps or max samples) must be positive",
            ));
        }
        if options.threads > ReaderOptions::max_threads() {
            return Err(Error::config(format!(
                "threads {} is more than {} ({MAX_THREADS_PER_CORE} per available core)",
                options.threads,
                ReaderOptions::max_threads()
            )));
        }
        let mut pool = if options.threads > 0 {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(options.threads)
                .thread_name(|i| format!("exfeed-reader-{i}"))
                .build()
                .map_err(|e| {
                    Error::new(
                        ErrorKind::Io,
                        Location::default(),
                        format!("cannot start reader threads: {e}"),
                    )
                })?;
            Some(pool)
        } else {
            None
        };
        if options.equalize.is_some() && options.worker_rank >= num_chunks {
            return Err(Error::config(format!(
                "equalize: worker {} of {} has no data to deliver its minibatches from: the data \
                 set has {num_chunks} chunk(s); use a smaller chunk size (or auto), or fewer workers",
                options.worker_rank, options.num_workers
            )));
        }
        if options.equalize.is_some()
            && options.equalize_mode == EqualizeMode::Spread
            && source.chunks_by_byte_range()
        {
            return Err(Error::config(
                "equalize spread counts each part's sequences, which needs the index: give \
                 index = full",
            ));
        }
        if options.equalize == Some(0) {
            return Err(Error::config(
                "equalize: minibatches per sweep must be at least 1",
            ));
        }
        if source.mix().is_some() && options.randomizer == Randomizer::Cntk {
            return Err(Error::config(
                "randomizer cntk reads CNTK's order of one data set; a mix has its own order \
                 (randomizer exfeed)",
            ));
        }
        let mix_counts = vec![MixCount::default(); source.mix().map_or(0, |m| m.parts().len())];
        let specs = source.streams().to_vec();
        let defining = specs.iter().position(|s| s.defines_mb_size);
        let decode = Arc::new(DecodeCounters::default());
        let cntk = match options.randomizer {
            Randomizer::Exfeed => None,
            // CNTK's order decodes ahead on the reader's threads by itself.
            Randomizer::Cntk => Some(Box::new(CntkDelivery::new(
                source.clone(),
                &options,
                source.shard_names().is_some(),
                pool.take(),
                decode.clone(),
            )?)),
        };
        Ok(Reader {
            cntk,
            specs,
            defining,
            pool,
            packer: Packer::default(),
            plans: VecDeque::new(),
            sweep: 0,
            window: 0,
            offset: 0,
            loaded: None,
            samples_delivered: 0,
            sweep_samples: 0,
            minibatches: 0,
            done: false,
            failed: false,
            stopper: Stopper::default(),
            sched: Cursor {
                sweep: 0,
                window: 0,
                index: 0,
            },
            pending: VecDeque::new(),
            fetching: VecDeque::new(),
            fetch_cursor: Cursor {
                sweep: 0,
                window: 0,
                index: 0,
            },
            spare: Vec::new(),
            spare_order: Vec::new(),
            peak_held: 0,
            held_bytes: 0,
            peak_held_bytes: 0,
            window_bytes: 0,
            chunks_read: 0,
            buffers_reused: 0,
            buffers_new: 0,
            // The number of chunks a worker owns is the same every sweep (but of a mix).
            no_data: options.worker_rank >= num_chunks && source.mix().is_none(),
            mix_counts,
            mix_sweeps: Vec::new(),
            resumes: Vec::new(),
            resumed_plans: Vec::new(),
            resumed_quotas: Vec::new(),
            resume_chunks: None,
            total_samples,
            // By file name, so that a saved state moves with the data to another directory.
            corpus: source.shard_names().map(|names| {
                let base = |n: &String| {
                    let name = std::path::Path::new(n).file_name();
                    name.map_or_else(|| n.clone(), |f| f.to_string_lossy().into_owned())
                };
                names.iter().map(base).collect()
            }),
            sweep_minibatches: 0,
            sweep_sequences: 0,
            notes: Vec::new(),
            delivered_in_pass: false,
            opts: ReaderOptions {
                prefetch_chunks: super::plan::prefetch_within(
                    options.window,
                    options.prefetch_chunks,
                    source.chunks(),
                ),
                ..options
            },
            source,
            decode,
            wait: WaitClock::default(),
            started: Instant::now(),
        })
    }

    /// A reader continuing from a saved state. `options` must agree with those that produced
    /// the state in everything the order depends on (randomize, seed, window, frameMode, workers,
    /// rank) and the data set must have the same chunks; the epoch limit, threads and prefetch
    /// may differ.
    pub fn restore(
        source: Arc<dyn ChunkSource<T>>,
        options: ReaderOptions,
        state: &ReaderState,
    ) -> Result<Self> {
        let mut r = Reader::new(source, options)?;
        r.check_fits(state, true)?;
        match (&mut r.cntk, state.cntk_position) {
            (Some(c), Some(position)) => c.set_position(position)?,
            (None, None) => {}
            (c, _) => {
                let now = if c.is_some() { "cntk" } else { "exfeed" };
                return Err(Error::config(format!(
                    "the saved reader state does not fit this reader: its randomizer is {now}, \
                     the state's is not"
                )));
            }
        }
        r.sweep = state.sweep;
        r.window = state.window;
        r.offset = state.offset;
        r.samples_delivered = state.samples_delivered;
        r.sweep_samples = state.sweep_samples;
        r.minibatches = state.minibatches;
        r.sweep_minibatches = state.sweep_minibatches;
        r.sweep_sequences = state.sweep_sequences;
        if !state.mix_sweep.is_empty() {
            if state.mix_sweep.len() != r.mix_counts.len() {
                return Err(Error::config(
                    "the saved reader state is corrupt: its mix counts are not one per source",
                ));
            }
            r.mix_counts.clone_from(&state.mix_sweep);
        }
        r.sched = Cursor {
            sweep: state.sweep,
            window: state.window,
            index: 0,
        };
        r.resumes = pruned(&state.resumed, state.sweep);
        r.plan_resumed_sweeps()?;
        let plan = r.plan(state.sweep);
        if state.window > plan.windows.len() {
            return Err(Error::config(format!(
                "the saved reader state is corrupt: window {} of sweep {} does not exist",
                state.window, state.sweep
            )));
        }
        Ok(r)
    }

    /// Refuses a state that does not fit this reader: what the saved order depends on must
    /// agree (the worker count and rank too with `same_workers`).
    fn check_fits(&self, state: &ReaderState, same_workers: bool) -> Result<()> {
        let mut mismatch = Vec::new();
        if state.version != 1 {
            mismatch.push(format!("state version {} (expected 1)", state.version));
        }
        // What the saved order depends on, compared with this reader's own state.
        let now = self.state();
        macro_rules! compare {
            ($($field:ident: $what:literal),* $(,)?) => {$(
                if state.$field != now.$field {
                    mismatch.push(format!(
                        "{} was {:?}, is {:?}",
                        $what, state.$field, now.$field
                    ));
                }
            )*};
        }
        compare!(
            randomize: "randomize",
            seed: "randomizationSeed",
            randomization_window: "randomization window",
            frame_mode: "frameMode",
            with_replacement: "drawing with replacement",
            weighted: "drawing weighted by frequency",
            chunks: "number of chunks",
            total_samples: "number of samples",
            byte_ranges: "chunks as byte ranges without an index (index none)",
        );
        // The quota differs between workers, and a resume on another count has its own.
        if same_workers {
            compare!(
                num_workers: "num_workers",
                worker_rank: "worker_rank",
                equalize: "equalize (minibatches per sweep)",
            );
        }
        if state.mix != now.mix {
            mismatch.push(format!("the mix was {:?}, is {:?}", state.mix, now.mix));
        }
        if state.corpus != now.corpus {
            mismatch.push(corpus_difference(
                state.corpus.as_deref(),
                now.corpus.as_deref(),
            ));
        }
        if !mismatch.is_empty() {
            return Err(Error::config(format!(
                "the saved reader state does not fit this reader: {}",
                mismatch.join("; ")
            )));
        }
        Ok(())
    }

    /// A reader continuing from the states of *all* the workers of a read (every rank of
    /// `num_workers`, in any order) on this reader's own worker count and rank, which may
    /// differ: the rest of the sweeps they had begun is split between the new workers, every
    /// sequence none of them delivered exactly once, and the sweeps after those are planned
    /// for the new count (see the `elastic` module for the rule). With the same count this is
    /// [`Reader::restore`] of this rank's state (the set is still checked), unless equalize
    /// keeps other ranks in step now (or with another quota, or not at all before).
    ///
    /// With equalize ([`ReaderOptions::equalize_basis`] needed), the rest of a resumed sweep
    /// has a quota of its own, the same number of minibatches for every new rank; the sweeps
    /// after it have the options' quota (see the `rest_quota` function for the rule).
    ///
    /// Refused, naming the option, where the rest of a sweep is not defined exactly: drawing
    /// with replacement, randomizer cntk, an epoch limit in samples (it counts per worker).
    /// Chunks that are byte ranges (CTF with index none) are decoded once here to count their
    /// sequences. The counts of what was delivered
    /// ([`Reader::samples_delivered`], [`Reader::minibatches`]) start from the old workers'
    /// totals divided by the new count.
    pub fn restore_from_all(
        source: Arc<dyn ChunkSource<T>>,
        options: ReaderOptions,
        states: &[ReaderState],
    ) -> Result<Self> {
        let by_rank = states_by_rank(states)?;
        let old = by_rank.len();
        // With equalize, the same count continues each worker's state only with the same
        // ranks and quota: otherwise the rest of the sweep gets a quota of its own.
        let ranks = options
            .equalize
            .and(options.equalize_basis)
            .map(|b| b.ranks);
        let own = by_rank[options.worker_rank.min(old - 1)];
        let in_step = own.equalize == options.equalize && own.equalize_ranks == ranks;
        if old == options.num_workers && in_step {
            let r = Reader::restore(source, options, own)?;
            for s in &by_rank {
                r.check_fits(s, false)?;
            }
            return Ok(r);
        }
        let refuse = |why: &str| {
            Err(Error::config(format!(
                "resuming the states of {old} workers on {}: {why}; resume on {old} workers",
                options.num_workers
            )))
        };
        let first = by_rank[0];
        if options.with_replacement || first.with_replacement {
            return refuse("draws with replacement (with_replacement, Lens's randomized or probabilistic) have no rest of a sweep");
        }
        if options.randomizer == Randomizer::Cntk || first.cntk_position.is_some() {
            return refuse("randomizer cntk keeps CNTK's order, which is not split this way");
        }
        if matches!(options.limit, EpochLimit::Samples(_)) {
            return refuse("an epoch limit in samples (max samples) counts what each worker delivered (give a limit in sweeps)");
        }
        let mut r = Reader::new(source, options)?;
        // Earlier resumes: a worker past their sweeps no longer keeps them in its state.
        let earlier = by_rank.iter().map(|s| &s.resumed).max_by_key(|r| r.len());
        let earlier = earlier.expect("at least one state");
        for s in &by_rank {
            r.check_fits(s, false)?;
            if !earlier.ends_with(&s.resumed) {
                return Err(Error::config(format!(
                    "the saved reader states do not fit together: worker {}'s comes from \
                     another resume than the others'",
                    s.worker_rank
                )));
            }
        }
        let latest = by_rank.iter().map(|s| s.sweep).max().unwrap_or(0);
        let mix = r.source.mix().is_some();
        let positions: Vec<Position> = by_rank
            .iter()
            .map(|s| match s.worker_rank >= s.chunks && !mix {
                // A worker without chunks never delivers anything: it holds back no sweep.
                true => Position {
                    sweep: latest,
                    window: 0,
                    offset: 0,
                    delivered: 0,
                },
                false => Position {
                    sweep: s.sweep,
                    window: s.window,
                    offset: s.offset,
                    delivered: s.sweep_sequences,
                },
            })
            .collect();
        let mut resumes = earlier.clone();
        resumes.push(Resume {
            num_workers: old,
            positions,
            equalized: r.opts.equalize.is_some(),
        });
        let start = resumes.last().map_or(0, |r| r.start());
        let new = r.opts.num_workers as u64;
        let total = |f: fn(&ReaderState) -> u64| {
            by_rank.iter().map(|s| f(s)).fold(0u64, u64::saturating_add) / new
        };
        r.samples_delivered = total(|s| s.samples_delivered);
        r.minibatches = total(|s| s.minibatches);
        r.sweep = start;
        r.sched = Cursor {
            sweep: start,
            window: 0,
            index: 0,
        };
        r.resumes = pruned(&resumes, start);
        r.plan_resumed_sweeps()?;
        Ok(r)
    }

    /// Plans this worker's part of the sweeps resumed from other workers' positions, from the
    /// current sweep on.
    fn plan_resumed_sweeps(&mut self) -> Result<()> {
        if self.resumes.is_empty() {
            return Ok(());
        }
        let end = elastic::first_fresh_sweep(&self.resumes);
        if end.saturating_sub(self.sweep) > elastic::MAX_RESUMED_SWEEPS {
            return Err(Error::config(format!(
                "the saved reader states are {} sweeps apart (sweeps {} to {end}); resuming \
                 finishes at most {} sweeps the old workers had begun",
                end - self.sweep,
                self.sweep,
                elastic::MAX_RESUMED_SWEEPS
            )));
        }
        let end = match self.opts.limit {
            EpochLimit::Sweeps(k) => end.min(k),
            _ => end,
        };
        let infos = self.resume_infos()?;
        let order = |sweep| self.sweep_order(sweep);
        let o = &self.opts;
        let inputs = PlanInputs {
            infos: &infos,
            randomize: o.randomize,
            seed: o.seed,
            window: o.window,
            order: &order,
        };
        let (mut plans, mut quotas) = (Vec::new(), Vec::new());
        for sweep in self.sweep..end {
            let mut all = elastic::all_plans(&inputs, &self.resumes, o.num_workers, sweep)
                .map_err(|e| {
                    Error::config(format!("the saved reader states do not fit the data: {e}"))
                })?;
            if o.equalize.is_some() {
                quotas.push((sweep, rest_quota(o, &all, &infos)?));
            }
            plans.push(Arc::new(all.swap_remove(o.worker_rank)));
        }
        self.resumed_plans = plans;
        self.resumed_quotas = quotas;
        Ok(())
    }

    /// The chunks as the plans of resumed sweeps count them: the source's, or, where its chunks
    /// are byte ranges whose counts are estimates, the sequences each decodes to (what the old
    /// workers' windows held). Those are counted once, decoding every chunk on the reader's
    /// threads: a resume on another worker count then costs one pass over the data.
    fn resume_infos(&mut self) -> Result<Arc<[ChunkInfo]>> {
        if let Some(infos) = &self.resume_chunks {
            return Ok(infos.clone());
        }
        let infos: Arc<[ChunkInfo]> = match self.source.chunks_by_byte_range() {
            true => self.counted_chunks()?.into(),
            false => self.source.chunks().into(),
        };
        self.resume_chunks = Some(infos.clone());
        Ok(infos)
    }

    /// The source's chunks with the sequences each decodes to, decoding them all on the
    /// reader's threads.
    fn counted_chunks(&self) -> Result<Vec<ChunkInfo>> {
        let source = &*self.source;
        let next = std::sync::atomic::AtomicUsize::new(0);
        let count = || -> Result<Vec<(usize, usize)>> {
            let mut batch = SequenceBatch::new(source.streams());
            let mut counts = Vec::new();
            loop {
                let chunk = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if chunk >= source.chunks().len() {
                    return Ok(counts);
                }
                batch.clear();
                source.read_chunk(chunk, &mut batch)?;
                counts.push((chunk, batch.len()));
            }
        };
        let threads = self.opts.threads.max(1);
        let counts = std::thread::scope(|scope| {
            let counting: Vec<_> = (0..threads).map(|_| scope.spawn(count)).collect();
            counting
                .into_iter()
                .map(|t| {
                    t.join().unwrap_or_else(|_| {
                        Err(Error::config(
                            "counting the chunks' sequences: a thread panicked",
                        ))
                    })
                })
                .collect::<Result<Vec<_>>>()
        })?;
        let mut infos = source.chunks().to_vec();
        for (chunk, sequences) in counts.into_iter().flatten() {
            infos[chunk].sequences = sequences;
        }
        Ok(infos)
    }

    /// Whether `sweep` is one resumed from other workers' positions.
    fn resumed_sweep(&self, sweep: u64) -> bool {
        sweep < elastic::first_fresh_sweep(&self.resumes)
    }

    /// Whether draws with replacement are weighted (the source has weights).
    fn weighted(&self) -> bool {
        self.opts.with_replacement
            && !self.source.chunks().is_empty()
            && self.source.chunk_weights(0).is_some()
    }

    /// The current position, to save and pass to [`Reader::restore`].
    pub fn state(&self) -> ReaderState {
        ReaderState {
            version: 1,
            sweep: self.sweep,
            window: self.window,
            offset: self.offset,
            samples_delivered: self.samples_delivered,
            sweep_samples: self.sweep_samples,
            minibatches: self.minibatches,
            randomize: self.opts.randomize,
            seed: self.opts.seed,
            randomization_window: self.opts.window,
            frame_mode: self.opts.frame_mode,
            with_replacement: self.opts.with_replacement,
            weighted: self.weighted(),
            num_workers: self.opts.num_workers,
            worker_rank: self.opts.worker_rank,
            chunks: self.source.chunks().len(),
            total_samples: self.total_samples,
            corpus: self.corpus.clone(),
            equalize: self.opts.equalize,
            equalize_ranks: (self.opts.equalize)
                .and(self.opts.equalize_basis)
                .map(|b| b.ranks),
            sweep_minibatches: self.sweep_minibatches,
            sweep_sequences: self.sweep_sequences,
            byte_ranges: self.source.chunks_by_byte_range(),
            data: None,
            cntk_position: self.cntk.as_ref().map(|c| c.position()),
            mix: self.source.mix().map(|m| m.describe()),
            mix_sweep: self.mix_counts.clone(),
            resumed: pruned(&self.resumes, self.sweep),
        }
    }

    /// With `randomizer cntk`: goes to CNTK's checkpoint position `minibatchSourcePosition`
    /// (a global sample position, as in [`ReaderState::cntk_position`]) as CNTK's
    /// `SetState` does: the sweep is `position / samples per sweep`, and reading goes on at the
    /// first sequence of that sweep's order starting at or after the position. The counts of
    /// what this reader delivered are kept. An error with exfeed's randomizer, whose position
    /// is its whole [`ReaderState`].
    pub fn set_cntk_position(&mut self, position: u64) -> Result<()> {
        let Some(c) = &mut self.cntk else {
            return Err(Error::config(
                "a CNTK checkpoint position (minibatchSourcePosition) needs randomizer cntk; \
                 with randomizer exfeed restore the whole saved reader state",
            ));
        };
        c.set_position(position)?;
        self.done = false;
        Ok(())
    }

    /// Changes when the epoch ends, e.g. to go on reading after it ended (CNTK's next epoch).
    /// The position is kept: `Sweeps(k)` and `Samples(n)` count from the start of sweep 0.
    pub fn set_limit(&mut self, limit: EpochLimit) -> Result<()> {
        if limit == EpochLimit::Sweeps(0) || limit == EpochLimit::Samples(0) {
            return Err(Error::config(
                "the epoch limit (max sweeps or max samples) must be positive",
            ));
        }
        if let Some(c) = &mut self.cntk {
            c.set_limit(limit)?;
        }
        self.opts.limit = limit;
        self.done = false;
        Ok(())
    }

    /// The streams of every minibatch, in order.
    pub fn streams(&self) -> &[StreamSpec] {
        &self.specs
    }

    /// The options.
    pub fn options(&self) -> &ReaderOptions {
        &self.opts
    }

    /// An empty minibatch with this reader's streams, to pass to [`Reader::next_minibatch`].
    pub fn new_minibatch(&self) -> Minibatch<T> {
        Minibatch::new(&self.specs)
    }

    /// Samples delivered so far.
    pub fn samples_delivered(&self) -> u64 {
        self.samples_delivered
    }

    /// Minibatches delivered so far.
    pub fn minibatches(&self) -> u64 {
        self.minibatches
    }

    /// How many chunk reads were started (decoded or being decoded).
    pub fn chunks_read(&self) -> u64 {
        self.chunks_read + self.cntk.as_ref().map_or(0, |c| c.chunks_read())
    }

    /// The largest number of decoded (or being decoded) chunks held at once: the current
    /// window's plus those prefetched.
    pub fn peak_chunks_held(&self) -> usize {
        self.peak_held
    }

    /// What the reader has done so far: minibatches and samples delivered, chunks and bytes
    /// decoded, the time decoding took and the time the caller waited for it (see
    /// [`ReaderStats`]).
    pub fn stats(&self) -> ReaderStats {
        let mut stats = ReaderStats {
            minibatches: self.minibatches,
            samples: self.samples_delivered,
            elapsed: self.started.elapsed(),
            ..ReaderStats::default()
        };
        self.decode.fill(&mut stats);
        match &self.cntk {
            Some(c) => c.fill_stats(&mut stats),
            None => {
                stats.wait_time = self.wait.total();
                stats.window_chunks = self.loaded.as_ref().map_or(0, |l| l.batches.len());
                stats.chunks_held = stats.window_chunks + self.pending.len();
                stats.peak_chunks_held = self.peak_held;
                stats.window_bytes = self.window_bytes;
                stats.peak_bytes_held = self.peak_held_bytes;
                stats.buffers_reused = self.buffers_reused;
                stats.buffers_new = self.buffers_new;
            }
        }
        stats
    }

    /// Has the epoch ended?
    pub fn is_done(&self) -> bool {
        self.done || self.no_data || self.cntk.as_ref().is_some_and(|c| c.done())
    }

    /// A handle that stops this reader's reads from another thread.
    pub fn stopper(&self) -> Stopper {
        self.stopper.clone()
    }

    /// Fills `mb` with the next minibatch: of about `size` samples (a plain number), whole
    /// sequences while they fit and always at least one; or of `size` sequences
    /// ([`MinibatchSize::Sequences`]). Returns `false` (and an empty `mb`) once the epoch is
    /// over.
    pub fn next_minibatch(
        &mut self,
        size: impl Into<MinibatchSize>,
        mb: &mut Minibatch<T>,
    ) -> Result<bool> {
        let size = size.into();
        mb.clear();
        if self.failed {
            return Err(Error::new(
                ErrorKind::Invalid,
                Location::default(),
                "the reader stopped after an earlier error",
            ));
        }
        let r = self.fill(size, mb);
        if r.is_err() {
            self.failed = true;
            mb.clear();
        }
        r
    }

    /// Delivers minibatches of `size` samples until the epoch ends or `stop_after` minibatches
    /// have been delivered by this call, handing each to `each` (e.g. to write its
    /// [`super::write_minibatch_json`] line); what `exfeed read` does. Afterwards
    /// [`Reader::state`] is the position to save for `--save-state`.
    pub fn run(
        &mut self,
        size: impl Into<MinibatchSize>,
        stop_after: Option<u64>,
        mut each: impl FnMut(&Minibatch<T>) -> Result<()>,
    ) -> Result<ReadSummary> {
        let size = size.into();
        let mut mb = self.new_minibatch();
        let mut summary = ReadSummary::default();
        while stop_after.is_none_or(|m| summary.minibatches < m) {
            if !self.next_minibatch(size, &mut mb)? {
                summary.finished = true;
                break;
            }
            summary.minibatches += 1;
            summary.sequences += mb.len() as u64;
            summary.samples += mb.samples as u64;
            summary.sweeps_ended += u64::from(mb.end_of_sweep);
            each(&mb)?;
        }
        Ok(summary)
    }

    fn fill(&mut self, size: MinibatchSize, mb: &mut Minibatch<T>) -> Result<bool> {
        if let Some(c) = &mut self.cntk {
            let MinibatchSize::Samples(size) = size else {
                return Err(Error::config(
                    "randomizer cntk makes CNTK's minibatches, which count samples: give the \
                     minibatch size in samples",
                ));
            };
            let filled = c.fill(size, mb)?;
            if filled {
                self.minibatches = self.minibatches.saturating_add(1);
                self.samples_delivered = self.samples_delivered.saturating_add(mb.samples as u64);
            }
            return Ok(filled);
        }
        self.settle(mb)?;
        if self.is_done() {
            return Ok(false);
        }
        // The samples this minibatch may take, and the sequences.
        let quota = self.sweep_quota();
        let (size_samples, sequences) = match (quota, self.opts.equalize_mode) {
            (Some(quota), EqualizeMode::Spread) => (usize::MAX, self.spread_share(quota)),
            _ => match size {
                MinibatchSize::Samples(n) => (n, usize::MAX),
                MinibatchSize::Sequences(n) => (usize::MAX, n.max(1)),
            },
        };
        // The sweep's last equalized minibatch: the window after it is not loaded.
        let last = quota.is_some_and(|q| self.sweep_minibatches + 1 >= q);
        let budget = match self.opts.limit {
            EpochLimit::Samples(n) => {
                (size_samples as u64).min(n.saturating_sub(self.samples_delivered)) as usize
            }
            _ => size_samples,
        };
        while !self.is_done() {
            if self.stopper.stopped() {
                return Err(Error::new(
                    ErrorKind::Invalid,
                    Location::default(),
                    "the reader was stopped during a read",
                ));
            }
            let mix_plan = self.source.mix().is_some().then(|| self.plan(self.sweep));
            let loaded = self
                .loaded
                .as_ref()
                .expect("settle leaves a window loaded unless done");
            // The sequences of this window that go into the minibatch: whole ones while they
            // fit, at least one.
            let start = self.offset;
            let (mut end, mut taken, mut samples) = (start, mb.len(), mb.samples);
            let mut full = false;
            while let Some(e) = loaded.order.get(end) {
                if taken > 0 && samples + e.samples > budget {
                    full = true;
                    break;
                }
                samples += e.samples;
                taken += 1;
                end += 1;
                if samples >= budget || taken >= sequences {
                    full = true;
                    break;
                }
            }
            let corpus = self.corpus.is_some();
            let pool = self.pool.as_ref();
            self.packer
                .copy_sequences(loaded, start..end, self.sweep, corpus, mb, pool);
            if let (Some(plan), Some(mix)) = (mix_plan, self.source.mix()) {
                let chunks = plan.window_chunks(self.window);
                for e in &loaded.order[start..end] {
                    let count = &mut self.mix_counts[mix.part_of(chunks[e.chunk as usize])];
                    count.sequences += 1;
                    count.samples += e.samples as u64;
                }
            }
            self.delivered_in_pass |= end > start;
            let added = (samples - mb.samples) as u64;
            mb.samples = samples;
            self.offset = end;
            self.samples_delivered = self.samples_delivered.saturating_add(added);
            self.sweep_samples = self.sweep_samples.saturating_add(added);
            if full && last {
                break;
            }
            // Past the window's end this loads the next one (and flags the end of a sweep).
            self.settle(mb)?;
            if full {
                break;
            }
        }
        self.minibatches = self.minibatches.saturating_add(1);
        if let Some(quota) = quota {
            self.sweep_minibatches += 1;
            self.sweep_sequences += mb.len() as u64;
            if self.sweep_minibatches >= quota {
                mb.end_of_sweep = true;
                self.end_equalized_sweep(quota);
            }
        }
        Ok(true)
    }

    /// With equalize spread: the sequences this minibatch takes, the part's sequences left
    /// shared over the sweep's minibatches left.
    fn spread_share(&mut self, quota: u64) -> usize {
        let part = self.part_sequences(self.sweep);
        let left = part.saturating_sub(self.sweep_sequences).max(1);
        let steps = quota.saturating_sub(self.sweep_minibatches).max(1);
        left.div_ceil(steps) as usize
    }

    /// The sequences of this worker's part of `sweep`, by the index (of a resumed sweep: those
    /// its plan lists, the part of the rest).
    fn part_sequences(&mut self, sweep: u64) -> u64 {
        let plan = self.plan(sweep);
        if let Some(listed) = &plan.listed {
            return listed.iter().map(|l| l.len() as u64).sum();
        }
        let chunks = self.source.chunks();
        plan.chunks
            .iter()
            .map(|&c| chunks[c].sequences as u64)
            .sum()
    }

    /// With equalize, once the sweep's minibatches are delivered: notes what was repeated or
    /// dropped, and moves to the next sweep (dropping what is loaded or decoded ahead).
    fn end_equalized_sweep(&mut self, quota: u64) {
        let part = self.part_sequences(self.sweep);
        let (o, got) = (&self.opts, self.sweep_sequences);
        let head = format!(
            "equalize: sweep {}: worker {} of {} delivered {quota} minibatches, {got} sequences",
            self.sweep, o.worker_rank, o.num_workers
        );
        // Without an index a part's sequences are not counted before they are decoded.
        self.notes.push(if self.source.chunks_by_byte_range() {
            format!("{head} (its part's sequences are not counted without an index)")
        } else {
            let what = match got.cmp(&part) {
                std::cmp::Ordering::Less => format!("dropped the last {} of them", part - got),
                std::cmp::Ordering::Greater => format!("repeated {} of them", got - part),
                std::cmp::Ordering::Equal => "all of them once".to_string(),
            };
            format!("{head}; its part has {part} sequences: {what}")
        });
        if let Some(l) = self.loaded.take() {
            self.release(l);
        }
        self.drop_pending();
        self.end_mix_sweep();
        self.sweep = self.sweep.saturating_add(1);
        (self.window, self.offset) = (0, 0);
        (
            self.sweep_samples,
            self.sweep_minibatches,
            self.sweep_sequences,
        ) = (0, 0, 0);
        self.sched = Cursor {
            sweep: self.sweep,
            window: 0,
            index: 0,
        };
    }

    /// Of a mix, once a sweep ends: keeps what each source contributed to it.
    fn end_mix_sweep(&mut self) {
        if self.mix_counts.is_empty() {
            return;
        }
        let fresh = vec![MixCount::default(); self.mix_counts.len()];
        self.mix_sweeps.push(SweepMix {
            sweep: self.sweep,
            counts: std::mem::replace(&mut self.mix_counts, fresh),
            ended: true,
        });
    }

    /// Of a mix: what each source contributed to each sweep this reader delivered (a restored
    /// reader: since the saved position's sweep), the sweep in progress last; empty for other
    /// sources.
    pub fn mix_report(&self) -> Vec<SweepMix> {
        let mut out = self.mix_sweeps.clone();
        let current = self.mix_counts.iter().any(|c| c.sequences > 0);
        if current {
            out.push(SweepMix {
                sweep: self.sweep,
                counts: self.mix_counts.clone(),
                ended: false,
            });
        }
        out
    }

    /// Forgets the chunks scheduled ahead (their decoding finishes unseen).
    fn drop_pending(&mut self) {
        self.fetching.clear();
        for (chunk, p) in self.pending.drain(..) {
            let bytes = self.source.chunks()[chunk].bytes;
            self.held_bytes = self.held_bytes.saturating_sub(bytes);
            if let Pending::Deferred(mut b, _) = p {
                b.clear();
                self.spare.push(b);
            }
        }
    }

    /// A warning when this worker's share of the current sweep (its chunks' samples, by the
    /// index) is empty or less than half the workers' mean: ranks that read much less than the
    /// others fall out of step (or, with none, silently read nothing).
    pub fn share_warning(&self) -> Option<String> {
        let o = &self.opts;
        let workers = o.num_workers;
        if workers < 2 {
            return None;
        }
        let infos = self.source.chunks();
        let order = self.sweep_order(self.sweep);
        let mine: u64 = super::plan::worker_chunks(&order, workers, o.worker_rank)
            .iter()
            .map(|&c| infos[c].samples)
            .sum();
        let sweep_samples = self
            .source
            .mix()
            .map_or(self.total_samples, |m| m.epoch_samples());
        let mean = sweep_samples / workers as u64;
        let advice = "give a smaller chunk size (--chunk-size auto / chunk_size=\"auto\" sizes \
                      chunks for the workers), fewer workers, or equalize";
        let who = format!("worker {} of {workers}", o.worker_rank);
        if mine == 0 {
            Some(format!(
                "{who} gets no data in sweep {}: the data set has {} chunk(s) for {workers} \
                 workers (with the default 32 MiB chunks a small file is one chunk); {advice}",
                self.sweep,
                infos.len()
            ))
        } else if mine.saturating_mul(2) < mean {
            Some(format!(
                "{who} gets {mine} samples of sweep {}, less than half the workers' mean of \
                 {mean} ({} chunk(s) for {workers} workers); {advice}",
                self.sweep,
                infos.len()
            ))
        } else {
            None
        }
    }

    /// With equalize, the minibatches this worker delivers in the current sweep: the options'
    /// quota, or in the rest of a sweep resumed on another count, its quota of the rest.
    pub fn sweep_quota(&self) -> Option<u64> {
        let resumed = self.resumed_quotas.iter().find(|(s, _)| *s == self.sweep);
        (self.opts.equalize).map(|q| resumed.map_or(q, |&(_, rest)| rest))
    }

    /// With equalize, the notes of the sweeps ended since the last call: what each repeated or
    /// dropped.
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    fn limit_reached(&self) -> bool {
        match self.opts.limit {
            EpochLimit::Sweeps(k) => self.sweep >= k,
            EpochLimit::Samples(n) => self.samples_delivered >= n,
            EpochLimit::Unlimited => false,
        }
    }

    /// The chunks of sweep `sweep` in order: a permutation of all (file order without
    /// `randomize`), or what a mix says.
    fn sweep_order(&self, sweep: u64) -> Vec<usize> {
        let o = &self.opts;
        match self.source.mix() {
            Some(mix) => mix.sweep_chunks(o.randomize, o.seed, sweep),
            None => {
                super::plan::chunk_order(self.source.chunks().len(), o.randomize, o.seed, sweep)
            }
        }
    }

    fn plan(&mut self, sweep: u64) -> Arc<SweepPlan> {
        let resumed = self.resumed_plans.iter().find(|p| p.sweep == sweep);
        if let Some(p) = resumed.or_else(|| self.plans.iter().find(|p| p.sweep == sweep)) {
            return p.clone();
        }
        let o = &self.opts;
        let p = Arc::new(SweepPlan::from_order(
            &self.sweep_order(sweep),
            self.source.chunks(),
            o.randomize,
            sweep,
            o.window,
            o.num_workers,
            o.worker_rank,
        ));
        if self.plans.len() >= 3 {
            self.plans.pop_front();
        }
        self.plans.push_back(p.clone());
        p
    }

    /// Moves the position past exhausted windows (loading the next one) until a sequence is
    /// ready or the epoch is over; flags `mb` when a sweep ends after its last sequence.
    fn settle(&mut self, mb: &mut Minibatch<T>) -> Result<()> {
        loop {
            if self.no_data {
                return Ok(());
            }
            let available = self.loaded.as_ref().map(|l| self.offset < l.order.len());
            if available == Some(false) && !mb.is_empty() && self.opts.equalize.is_none() {
                let windows = self.plan(self.sweep).windows.len();
                if self.window + 1 >= windows {
                    mb.end_of_sweep = true;
                }
            }
            if self.limit_reached() {
                self.done = true;
                return Ok(());
            }
            if self.sweep_quota() == Some(0) {
                // The rest of a resumed sweep gives this worker no minibatch (see `rest_quota`).
                self.end_equalized_sweep(0);
                continue;
            }
            if available == Some(true) {
                return Ok(());
            }
            if let Some(l) = self.loaded.take() {
                self.release(l);
                self.window += 1;
                self.offset = 0;
            }
            let plan = self.plan(self.sweep);
            if self.window >= plan.windows.len() && self.opts.equalize.is_some() {
                // Equalize: the part ran out before the sweep's minibatches; again from its
                // start (what was decoded ahead belongs to the next sweep).
                if !std::mem::take(&mut self.delivered_in_pass) {
                    return Err(Error::config(format!(
                        "equalize: worker {} of {} has no sequence to deliver in sweep {}",
                        self.opts.worker_rank, self.opts.num_workers, self.sweep
                    )));
                }
                (self.window, self.offset) = (0, 0);
                self.drop_pending();
                self.sched = Cursor {
                    sweep: self.sweep,
                    window: 0,
                    index: 0,
                };
                continue;
            }
            if self.window >= plan.windows.len() {
                if !mb.is_empty() {
                    mb.end_of_sweep = true;
                }
                // (A resumed sweep may leave this worker nothing: the next one may not.)
                let idle = self.sweep_samples == 0
                    && !matches!(self.opts.limit, EpochLimit::Sweeps(_))
                    && !self.resumed_sweep(self.sweep);
                if idle || self.sweep == u64::MAX {
                    // A sweep gave this worker nothing: stop rather than loop for ever (and a
                    // restored state at the last representable sweep has nowhere to go).
                    self.done = true;
                    return Ok(());
                }
                self.end_mix_sweep();
                self.sweep += 1;
                self.window = 0;
                self.offset = 0;
                self.sweep_samples = 0;
                continue;
            }
            self.load_window(&plan)?;
        }
    }

    fn release(&mut self, loaded: Loaded<T>) {
        self.held_bytes = self.held_bytes.saturating_sub(self.window_bytes);
        self.window_bytes = 0;
        for mut b in loaded.batches {
            b.clear();
            self.spare.push(b);
        }
        self.spare_order = loaded.order;
        self.spare_order.clear();
    }

    fn load_window(&mut self, plan: &SweepPlan) -> Result<()> {
        let chunks = plan.window_chunks(self.window).to_vec();
        let mut batches = Vec::with_capacity(chunks.len());
        // Nothing decoded ahead (the reader's start): this window's chunks first, alone, so
        // every thread works on what the consumer waits for (a chunk without an index is
        // decoded in pieces by all of them); the decoding ahead starts once it is loaded.
        let ahead = !self.pending.is_empty();
        for (i, &chunk) in chunks.iter().enumerate() {
            self.schedule(chunks.len() - i, ahead);
            let (got, pending) = self.pending.pop_front().expect("scheduled in plan order");
            debug_assert_eq!(got, chunk);
            let (source, decode) = (&self.source, &self.decode);
            let batch = self.wait.time(|| match pending {
                Pending::Async(rx) => rx.recv().map_err(|_| {
                    Error::new(
                        ErrorKind::Invalid,
                        Location::default().with_context(format!("chunk {chunk}")),
                        "decoding the chunk failed: its thread panicked",
                    )
                })?,
                Pending::Deferred(mut b, fetched) => {
                    decode.read_chunk(&**source, chunk, &mut b)?;
                    drop(fetched);
                    Ok(b)
                }
            })?;
            if self.opts.frame_mode {
                self.check_frames(&batch, chunk)?;
            }
            batches.push(batch);
            self.track_held(batches.len());
        }
        let mut order = std::mem::take(&mut self.spare_order);
        order.reserve(batches.iter().map(|b| b.len()).sum());
        if let Some(listed) = &plan.listed {
            // A resumed sweep: the sequences listed, counted by the index.
            let infos = self.resume_infos()?;
            for (&chunk, b) in chunks.iter().zip(&batches) {
                let indexed = infos[chunk].sequences;
                if b.len() != indexed {
                    return Err(Error::new(
                        ErrorKind::Invalid,
                        Location::default().with_context(format!("chunk {chunk}")),
                        format!(
                            "resuming on another number of workers: the chunk decodes to {} \
                             sequences, its index says {indexed} (sequences dropped under \
                             maxErrors?); resume on the old number of workers",
                            b.len()
                        ),
                    ));
                }
            }
            order.extend(listed[self.window].iter().map(|&(c, s)| Entry {
                chunk: c,
                seq: s,
                samples: batches[c as usize].sequence_length(s as usize, self.defining),
            }));
        } else {
            for (c, b) in batches.iter().enumerate() {
                order.extend((0..b.len()).map(|s| Entry {
                    chunk: c as u32,
                    seq: s as u32,
                    samples: b.sequence_length(s, self.defining),
                }));
            }
            if self.opts.randomize && self.opts.with_replacement {
                let weights = self.window_weights(&chunks, &batches)?;
                order = draw_window(
                    &order,
                    weights.as_deref(),
                    self.opts.seed,
                    self.sweep,
                    self.window,
                )
                .map_err(|e| Error::new(ErrorKind::Invalid, Location::default(), e))?;
            } else if self.opts.randomize {
                shuffle_window(&mut order, self.opts.seed, self.sweep, self.window);
            }
        }
        if self.offset > order.len() {
            return Err(Error::config(format!(
                "the saved reader state does not fit the data: window {} of sweep {} has {} sequences, not {}",
                self.window,
                self.sweep,
                order.len(),
                self.offset
            )));
        }
        self.loaded = Some(Loaded { batches, order });
        let infos = self.source.chunks();
        self.window_bytes = chunks.iter().map(|&c| infos[c].bytes).sum();
        // Keep decoding ahead while the window is consumed.
        self.schedule(0, true);
        Ok(())
    }

    /// The weights of a window's sequences when every chunk of it has them.
    fn window_weights(
        &self,
        chunks: &[usize],
        batches: &[SequenceBatch<T>],
    ) -> Result<Option<Vec<f64>>> {
        let mut all = Vec::new();
        for (&c, b) in chunks.iter().zip(batches) {
            let Some(w) = self.source.chunk_weights(c) else {
                return Ok(None);
            };
            if w.len() != b.len() {
                return Err(Error::new(
                    ErrorKind::Invalid,
                    Location::default().with_context(format!("chunk {c}")),
                    format!("{} frequencies for {} sequences", w.len(), b.len()),
                ));
            }
            all.extend(w);
        }
        Ok(Some(all))
    }

    fn check_frames(&self, batch: &SequenceBatch<T>, chunk: usize) -> Result<()> {
        check_frames(batch, &self.specs, chunk)
    }

    /// A batch for a chunk: one an earlier reader of the process kept, else a new one.
    fn kept_or_new_batch(&mut self) -> SequenceBatch<T> {
        match pool::take(&self.specs) {
            Some(b) => {
                self.buffers_reused += 1;
                b
            }
            None => {
                self.buffers_new += 1;
                SequenceBatch::new(&self.specs)
            }
        }
    }

    fn track_held(&mut self, extra: usize) {
        let held = self.loaded.as_ref().map_or(0, |l| l.batches.len()) + self.pending.len() + extra;
        self.peak_held = self.peak_held.max(held);
        self.peak_held_bytes = self.peak_held_bytes.max(self.held_bytes);
    }

    /// Schedules chunk reads in plan order until `need` are pending, or (`ahead`) at least
    /// `prefetch_chunks`, not past the epoch's last sweep. Where the source fetches chunks over
    /// the network, the bytes of those that wait for a decoding thread are fetched meanwhile,
    /// and (`ahead`) of `prefetch_chunks` more after them (in plan order, as the process's
    /// bounds leave room: [`crate::fetch_ahead`]).
    fn schedule(&mut self, need: usize, ahead: bool) {
        let target = match ahead {
            true => self.opts.prefetch_chunks.max(1).max(need),
            false => need,
        };
        while self.pending.len() < target && !self.no_data {
            let mut cur = self.sched;
            let next = self.chunk_at(&mut cur);
            self.sched = cur;
            let Some(chunk) = next else { break };
            let fetched = match self.fetching.pop_front() {
                Some((fetching, ticket)) if fetching == chunk => Some(ticket),
                _ => {
                    self.fetching.clear();
                    // A chunk that waits for a decoding thread is fetched meanwhile.
                    let waits = self.pending.len() >= self.opts.threads;
                    waits.then(|| self.source.fetch_ahead(chunk)).flatten()
                }
            };
            let mut batch = match self.spare.pop() {
                Some(b) => b,
                None => self.kept_or_new_batch(),
            };
            prepare_batch(&mut batch, &self.source.chunks()[chunk]);
            let pending = match &self.pool {
                Some(pool) => {
                    let (tx, rx) = crossbeam_channel::bounded(1);
                    let (source, decode) = (self.source.clone(), self.decode.clone());
                    let mut batch = batch;
                    pool.spawn(move || {
                        let r = decode
                            .read_chunk(&*source, chunk, &mut batch)
                            .map(|()| batch);
                        drop(fetched);
                        let _ = tx.send(r);
                    });
                    Pending::Async(rx)
                }
                None => Pending::Deferred(batch, fetched),
            };
            self.chunks_read += 1;
            self.held_bytes = self
                .held_bytes
                .saturating_add(self.source.chunks()[chunk].bytes);
            self.pending.push_back((chunk, pending));
            self.track_held(0);
        }
        if ahead {
            self.fetch_ahead();
        }
    }

    /// Names the chunks after those scheduled for fetching ahead, up to `prefetch_chunks` of
    /// them, until the source takes no more.
    fn fetch_ahead(&mut self) {
        if self.fetching.is_empty() {
            self.fetch_cursor = self.sched;
        }
        while self.fetching.len() < self.opts.prefetch_chunks.max(1) && !self.no_data {
            let mut cur = self.fetch_cursor;
            let Some(chunk) = self.chunk_at(&mut cur) else {
                break;
            };
            let Some(ticket) = self.source.fetch_ahead(chunk) else {
                break;
            };
            self.fetch_cursor = cur;
            self.fetching.push_back((chunk, ticket));
        }
    }

    /// The chunk at `cur` in plan order, moving `cur` past it; `None` past the epoch's last
    /// sweep.
    fn chunk_at(&mut self, cur: &mut Cursor) -> Option<usize> {
        loop {
            if let EpochLimit::Sweeps(k) = self.opts.limit {
                if cur.sweep >= k {
                    return None;
                }
            }
            let plan = self.plan(cur.sweep);
            if cur.window >= plan.windows.len() {
                if cur.sweep == u64::MAX {
                    return None;
                }
                let ended = cur.sweep;
                *cur = Cursor {
                    sweep: ended + 1,
                    window: 0,
                    index: 0,
                };
                // A resumed sweep may leave this worker nothing; otherwise this never happens
                // with no_data false, and guards against a loop.
                if plan.windows.is_empty() && !self.resumed_sweep(ended) {
                    return None;
                }
                continue;
            }
            let in_window = plan.window_chunks(cur.window);
            if cur.index >= in_window.len() {
                *cur = Cursor {
                    sweep: cur.sweep,
                    window: cur.window + 1,
                    index: 0,
                };
                continue;
            }
            cur.index += 1;
            return Some(in_window[cur.index - 1]);
        }
    }
}

impl<T: Element> Drop for Reader<T> {
    /// Keeps the decoded-chunk batches at hand for the process's next reader (see the
    /// `pool` module); those still being decoded are freed by their threads.
    fn drop(&mut self) {
        if let Some(loaded) = self.loaded.take() {
            self.release(loaded);
        }
        self.drop_pending();
        pool::keep(self.spare.drain(..));
    }
}

/// With equalize, the quota of worker `o.worker_rank` in the rest of a resumed sweep, from
/// every new worker's plan of it (`all`), so that every rank delivers as many minibatches:
/// [`equalize_quota`] of the rest's samples (or sequences, by the minibatch size), at least one
/// minibatch per new worker; 0 where the rest is empty, or where a new worker has no sequence
/// of it (a rest of fewer sequences than new workers: it is dropped).
fn rest_quota(o: &ReaderOptions, all: &[SweepPlan], infos: &[ChunkInfo]) -> Result<u64> {
    let Some(basis) = o.equalize_basis else {
        return Err(Error::config(
            "equalize: resuming on another number of workers computes the quota of the rest of \
             the sweep from the minibatch size and the ranks (ReaderOptions::equalize_basis), \
             which were not given",
        ));
    };
    let (sequences, samples) = elastic::rest_size(all, infos);
    let total = match basis.minibatch_size {
        MinibatchSize::Samples(_) => samples,
        MinibatchSize::Sequences(_) => sequences,
    };
    // An empty rest, or one that leaves a new worker nothing (dealt by sequence, so fewer
    // sequences than new workers).
    if all
        .iter()
        .any(|p| p.listed.iter().flatten().all(Vec::is_empty))
    {
        return Ok(0);
    }
    let size = basis.minibatch_size.count();
    // At least one minibatch per new worker, so that every part of the rest is delivered.
    let parts = (all.len() / basis.ranks.max(1)) as u64;
    let least = parts
        .saturating_mul(basis.ranks as u64)
        .saturating_mul(size as u64);
    equalize_quota(
        total.max(least),
        size,
        all.len(),
        basis.ranks,
        o.worker_rank,
    )
}

/// The resumes still needed from sweep `sweep` on: without those whose resumed sweeps are all
/// before it.
fn pruned(resumes: &[Resume], sweep: u64) -> Vec<Resume> {
    let gone = resumes.iter().take_while(|r| r.end() <= sweep).count();
    resumes[gone..].to_vec()
}

/// The states of every worker of a read, by rank; an error names the ranks missing or given
/// twice.
fn states_by_rank(states: &[ReaderState]) -> Result<Vec<&ReaderState>> {
    let Some(first) = states.first() else {
        return Err(Error::config("no saved reader state given"));
    };
    let n = first.num_workers;
    if let Some(s) = states.iter().find(|s| s.num_workers != n) {
        return Err(Error::config(format!(
            "the saved reader states are of different reads: one of {n} workers, one of {} \
             (worker {})",
            s.num_workers, s.worker_rank
        )));
    }
    let mut by_rank: Vec<Option<&ReaderState>> = vec![None; n];
    for s in states {
        let Some(slot) = by_rank.get_mut(s.worker_rank) else {
            return Err(Error::config(format!(
                "a saved reader state of worker {} of {n} workers: the rank is out of range",
                s.worker_rank
            )));
        };
        if slot.replace(s).is_some() {
            return Err(Error::config(format!(
                "the saved reader state of worker {} of {n} is given twice",
                s.worker_rank
            )));
        }
    }
    let missing: Vec<String> = (0..n)
        .filter(|&w| by_rank[w].is_none())
        .map(|w| w.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(Error::config(format!(
            "the saved reader states of worker(s) {} of {n} are missing: resuming needs the \
             states of all the workers of the read (every rank)",
            missing.join(", ")
        )));
    }
    Ok(by_rank.into_iter().flatten().collect())
}

/// What differs between a saved corpus (file names) and this reader's: the first file that
/// differs, or the counts.
fn corpus_difference(saved: Option<&[String]>, now: Option<&[String]>) -> String {
    let describe = |c: Option<&[String]>| match c {
        None => "not a corpus".to_string(),
        Some(files) => format!("a corpus of {} files", files.len()),
    };
    if let (Some(a), Some(b)) = (saved, now) {
        if let Some((i, (x, y))) = a.iter().zip(b).enumerate().find(|(_, (x, y))| x != y) {
            return format!("corpus file {} was {x}, is {y}", i + 1);
        }
    }
    format!("the data was {}, is {}", describe(saved), describe(now))
}

/// `frameMode`: every sequence of decoded chunk `chunk` must have exactly one sample.
pub(super) fn check_frames<T: Element>(
    batch: &SequenceBatch<T>,
    specs: &[StreamSpec],
    chunk: usize,
) -> Result<()> {
    for s in 0..batch.len() {
        for (stream, spec) in batch.streams().iter().zip(specs) {
            let n = stream.sequence_samples(s).len();
            if n > 1 {
                return Err(Error::new(
                    ErrorKind::Invalid,
                    Location::default().with_context(format!("chunk {chunk}, input '{}'", spec.name)),
                    format!(
                        "frameMode: sequence {} has {n} samples; in frame mode every sequence must have exactly one sample",
                        batch.keys()[s]
                    ),
                ));
            }
        }
        if batch.sequence_length(s, None) == 0 {
            return Err(Error::new(
                ErrorKind::Invalid,
                Location::default().with_context(format!("chunk {chunk}")),
                format!(
                    "frameMode: sequence {} has no samples; in frame mode every sequence must have exactly one sample",
                    batch.keys()[s]
                ),
            ));
        }
    }
    Ok(())
}
