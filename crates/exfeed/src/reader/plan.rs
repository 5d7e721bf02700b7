//! The order of one sweep for one worker: which chunks, grouped into which windows, and the
//! shuffled sequence order of a window. Everything here is a pure function of the seed, the
//! sweep number, the chunk list and the options, which is what makes checkpoints exact.

use super::rng::SplitMix64;
use super::ChunkInfo;
use std::ops::Range;

/// The randomization window: how many chunks' sequences are shuffled together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Window {
    /// `randomizationWindow` chunks (at least one).
    Chunks(usize),
    /// With `sampleBasedRandomizationWindow`: chunks are added to a window until it holds at
    /// least this many samples (at least one chunk).
    Samples(u64),
    /// `randomizationWindowInBytes` (exfeed): consecutive chunks while their bytes in the file
    /// total at most this many (at least one chunk); the first window of a sweep at most a
    /// quarter of them.
    Bytes(u64),
    /// The whole data set (of this worker) is one window.
    All,
}

impl Default for Window {
    /// CNTK's default for chunk-based windows with the default 32 MB chunks: 128 chunks.
    fn default() -> Self {
        Window::Chunks(128)
    }
}

/// The first window of a sweep in bytes takes at most this share of the window, so that the
/// first minibatch of an epoch waits for a quarter of a window (as WebDataset's shuffle buffer
/// starts small): on 2 cores 16 MiB of CTF text decode in a few hundredths of a second.
pub const FIRST_WINDOW_SHARE: u64 = 4;

/// The generator seed of a sweep: `randomizationSeed + sweep` (wrapping).
pub fn sweep_seed(seed: u64, sweep: u64) -> u64 {
    seed.wrapping_add(sweep)
}

/// The chunk order of a sweep: a permutation of `0..num_chunks` drawn from stream 0 of the
/// sweep's seed with `randomize`, file order without.
pub fn chunk_order(num_chunks: usize, randomize: bool, seed: u64, sweep: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..num_chunks).collect();
    if randomize {
        SplitMix64::for_stream(sweep_seed(seed, sweep), 0).shuffle(&mut order);
    }
    order
}

/// The chunks of worker `rank` of `workers`: those at randomized positions `i` with
/// `i % workers == rank`, in randomized order.
pub fn worker_chunks(order: &[usize], workers: usize, rank: usize) -> Vec<usize> {
    order
        .iter()
        .enumerate()
        .filter(|(i, _)| i % workers.max(1) == rank)
        .map(|(_, &c)| c)
        .collect()
}

/// Groups a worker's chunks into windows: ranges of `own`. Without randomization every chunk is
/// a window of its own (nothing to shuffle, least memory).
pub fn windows(
    own: &[usize],
    infos: &[ChunkInfo],
    window: Window,
    randomize: bool,
) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    if !randomize {
        out.extend((0..own.len()).map(|i| i..i + 1));
        return out;
    }
    match window {
        Window::All => {
            if !own.is_empty() {
                out.push(0..own.len());
            }
        }
        Window::Chunks(n) => {
            let n = n.max(1);
            let mut start = 0;
            while start < own.len() {
                let end = (start + n).min(own.len());
                out.push(start..end);
                start = end;
            }
        }
        Window::Samples(min) => {
            let mut start = 0;
            let mut samples = 0u64;
            for (i, &c) in own.iter().enumerate() {
                samples = samples.saturating_add(infos[c].samples);
                if samples >= min {
                    out.push(start..i + 1);
                    start = i + 1;
                    samples = 0;
                }
            }
            if start < own.len() {
                out.push(start..own.len());
            }
        }
        Window::Bytes(most) => {
            let mut start = 0;
            let mut bytes = 0u64;
            let mut limit = most / FIRST_WINDOW_SHARE;
            for (i, &c) in own.iter().enumerate() {
                let with = bytes.saturating_add(infos[c].bytes);
                if i > start && with > limit {
                    out.push(start..i);
                    start = i;
                    bytes = infos[c].bytes;
                    limit = most;
                } else {
                    bytes = with;
                }
            }
            if start < own.len() {
                out.push(start..own.len());
            }
        }
    }
    out
}

/// The chunks decoded ahead of a window of `window`: `prefetch`, or with a window in bytes as
/// many of the largest of `infos` as fit in it (at least one), so that what is held stays
/// within twice the window whatever the chunk size.
pub fn prefetch_within(window: Window, prefetch: usize, infos: &[ChunkInfo]) -> usize {
    match window {
        Window::Bytes(most) => {
            let largest = infos.iter().map(|c| c.bytes).max().unwrap_or(0).max(1);
            prefetch.min(usize::try_from(most / largest).unwrap_or(usize::MAX).max(1))
        }
        _ => prefetch,
    }
}

/// One worker's plan of one sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepPlan {
    /// The sweep number.
    pub sweep: u64,
    /// The worker's chunks in the order they are read.
    pub chunks: Vec<usize>,
    /// The windows, as ranges of `chunks`.
    pub windows: Vec<Range<usize>>,
    /// Of a sweep resumed on another number of workers (see the `elastic` module): each
    /// window's sequences to deliver, in order, as (chunk in the window, sequence in the
    /// chunk). None: all of the window's sequences, shuffled (the normal plan).
    pub listed: Option<Vec<Vec<(u32, u32)>>>,
}

impl SweepPlan {
    /// Plans sweep `sweep`.
    #[cfg(test)]
    pub fn new(
        infos: &[ChunkInfo],
        randomize: bool,
        seed: u64,
        sweep: u64,
        window: Window,
        workers: usize,
        rank: usize,
    ) -> Self {
        let order = chunk_order(infos.len(), randomize, seed, sweep);
        SweepPlan::from_order(&order, infos, randomize, sweep, window, workers, rank)
    }

    /// Plans sweep `sweep` whose chunks, in order, are `order` (a permutation of all chunks,
    /// or a [`Mix`](super::Mix)'s sweep, where chunks may repeat).
    pub fn from_order(
        order: &[usize],
        infos: &[ChunkInfo],
        randomize: bool,
        sweep: u64,
        window: Window,
        workers: usize,
        rank: usize,
    ) -> Self {
        let chunks = worker_chunks(order, workers, rank);
        let windows = windows(&chunks, infos, window, randomize);
        SweepPlan {
            sweep,
            chunks,
            windows,
            listed: None,
        }
    }

    /// The chunks of window `w`.
    pub fn window_chunks(&self, w: usize) -> &[usize] {
        &self.chunks[self.windows[w].clone()]
    }
}

/// Shuffles the sequence order of window `w` of a sweep: `order` holds one entry per sequence
/// (such as `(chunk in window, sequence in chunk)` pairs) in file order and is shuffled with
/// stream `w + 1` of the sweep's seed. The permutation depends only on the length.
pub fn shuffle_window<X>(order: &mut [X], seed: u64, sweep: u64, w: usize) {
    SplitMix64::for_stream(sweep_seed(seed, sweep), w as u64 + 1).shuffle(order);
}

/// Draws `items.len()` entries of `items` at random *with replacement* for window `w` of a sweep
/// (Lens's RANDOMIZED mode, or PROBABILISTIC with `weights`, one per item, normalized here),
/// from stream `w + 1` of the sweep's seed. Weights must be finite, non-negative and not all 0.
pub fn draw_window<X: Copy>(
    items: &[X],
    weights: Option<&[f64]>,
    seed: u64,
    sweep: u64,
    w: usize,
) -> Result<Vec<X>, String> {
    let mut rng = SplitMix64::for_stream(sweep_seed(seed, sweep), w as u64 + 1);
    let n = items.len();
    match weights {
        None => Ok((0..n)
            .map(|_| items[rng.below(n as u64) as usize])
            .collect()),
        Some(weights) => {
            if weights.len() != n {
                return Err(format!("{} weights for {n} sequences", weights.len()));
            }
            let mut cumulative = Vec::with_capacity(n);
            let mut total = 0.0f64;
            for (i, &x) in weights.iter().enumerate() {
                if !(x.is_finite() && x >= 0.0) {
                    return Err(format!("sequence {i} of the window has frequency {x}; frequencies must be finite and non-negative"));
                }
                total += x;
                cumulative.push(total);
            }
            if n > 0 && !(total > 0.0 && total.is_finite()) {
                return Err("the frequencies of a window sum to 0 (or overflow)".to_string());
            }
            Ok((0..n)
                .map(|_| {
                    let u = rng.next_f64() * total;
                    let i = cumulative.partition_point(|&c| c <= u).min(n - 1);
                    items[i]
                })
                .collect())
        }
    }
}
