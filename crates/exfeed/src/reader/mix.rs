//! Mixing data sets by weight: which chunks of which source a sweep reads ([`Mix`]).
//!
//! A mixed data set is several sources (each one file or a corpus), each with a weight. A sweep
//! of the mix has a size in samples ([`Mix::epoch_samples`]; by default the sum of the sources'
//! sizes), of which source `i` takes the share `weight_i / sum of weights`. Each source's chunks
//! form an endless stream of passes (pass `p` is a permutation of its chunks drawn from `p` and
//! the source; without `randomize`, file order), and a sweep takes from each stream the chunks
//! whose midpoints (in cumulated samples) fall within its share: the chunks from cumulated
//! samples `g * share` to `(g + 1) * share`, where `g = seed + sweep` (as sweep `s` of any data
//! set is shuffled with the seed `seed + s`, so that sweep 0 with the seed `seed + e` is sweep
//! `e` with `seed`: an `exfeed.torch` epoch goes on where the last one stopped). So a source smaller
//! than its share cycles (its next pass continues in the same sweep: "B twice per sweep of A"),
//! one larger than its share is read over several sweeps, and each source's samples in a sweep
//! differ from its share by at most one of its chunks, and over any run of sweeps too (the
//! error does not add up). The sweep's chunks of all sources are then shuffled together (without
//! `randomize`, interleaved evenly), and the engine reads that list as it reads any sweep's
//! chunk order: partitioned among workers, grouped in windows, shuffled within a window.
//!
//! Everything is a pure function of (seed, sweep, weights, the sources' chunk lists), so a
//! saved position (sweep, window, offset) resumes exactly, on any machine.

use super::plan::sweep_seed;
use super::rng::SplitMix64;
use super::ChunkInfo;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// One source of a [`Mix`].
#[derive(Debug, Clone, PartialEq)]
pub struct MixPart {
    /// Its name (the file or corpus as given).
    pub name: String,
    /// Its weight as given (the shares are the weights over their sum).
    pub weight: f64,
    /// Its chunks in the mixed source's chunk list.
    pub chunks: Range<usize>,
    /// Its samples, by the index.
    pub samples: u64,
    /// Each of its chunks' samples, in file order.
    chunk_samples: Vec<u64>,
}

/// Several sources mixed by weight: each a range of the mixed source's chunks with a weight, a
/// weight being a share of a sweep's samples; [`Mix::sweep_chunks`] says which chunks a sweep
/// reads (docs/mixing.md has the whole rule).
#[derive(Debug, Clone, PartialEq)]
pub struct Mix {
    parts: Vec<MixPart>,
    epoch_samples: u64,
    /// The part of each chunk of the mixed source.
    part_of_chunk: Vec<u32>,
}

/// What one source contributed to (a worker's part of) a sweep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MixCount {
    /// Sequences delivered.
    pub sequences: u64,
    /// Samples delivered.
    pub samples: u64,
}

/// What each source of a mix contributed to one sweep, as a reader delivered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepMix {
    /// The sweep.
    pub sweep: u64,
    /// One count per source, in the mix's order.
    pub counts: Vec<MixCount>,
    /// The sweep ended (else it is the sweep in progress).
    pub ended: bool,
}

/// The generator stream of source `part`'s passes (far from the window streams, `1 + window`).
fn pass_stream(part: usize) -> u64 {
    u64::MAX - part as u64
}

impl Mix {
    /// The mix of `parts` (name, weight, chunk range in `infos`) with sweeps of
    /// `epoch_samples` samples (default: the sum of the parts' samples). Weights must be
    /// finite and positive; every part needs samples.
    pub fn new(
        parts: Vec<(String, f64, Range<usize>)>,
        infos: &[ChunkInfo],
        epoch_samples: Option<u64>,
    ) -> Result<Mix> {
        if parts.is_empty() {
            return Err(Error::config("a mix needs at least one source"));
        }
        let mut part_of_chunk = vec![0u32; infos.len()];
        let mut out = Vec::with_capacity(parts.len());
        for (i, (name, weight, chunks)) in parts.into_iter().enumerate() {
            if !(weight.is_finite() && weight > 0.0) {
                return Err(Error::config(format!(
                    "mix source {name} has the weight {weight}; a weight must be a finite \
                     positive number"
                )));
            }
            let chunk_samples: Vec<u64> = infos[chunks.clone()].iter().map(|c| c.samples).collect();
            let samples = chunk_samples.iter().fold(0u64, |a, &b| a.saturating_add(b));
            if samples == 0 {
                return Err(Error::config(format!("mix source {name} has no samples")));
            }
            part_of_chunk[chunks.clone()].fill(i as u32);
            out.push(MixPart {
                name,
                weight,
                chunks,
                samples,
                chunk_samples,
            });
        }
        let total = out.iter().fold(0u64, |a, p| a.saturating_add(p.samples));
        let epoch_samples = epoch_samples.unwrap_or(total);
        if epoch_samples == 0 {
            return Err(Error::config(
                "the mix's epoch size must be at least one sample",
            ));
        }
        Ok(Mix {
            parts: out,
            epoch_samples,
            part_of_chunk,
        })
    }

    /// The sources, in order.
    pub fn parts(&self) -> &[MixPart] {
        &self.parts
    }

    /// The samples of a sweep.
    pub fn epoch_samples(&self) -> u64 {
        self.epoch_samples
    }

    /// The source of chunk `chunk`.
    pub fn part_of(&self, chunk: usize) -> usize {
        self.part_of_chunk[chunk] as usize
    }

    /// The mix as a saved state holds it: each source's chunks and weight, and the sweep size
    /// (not the sources' names, so that a state moves with the data to another directory; the
    /// state names the files).
    pub fn describe(&self) -> String {
        let parts: Vec<String> = (self.parts.iter())
            .map(|p| format!("{} chunks={}", p.chunks.len(), p.weight))
            .collect();
        format!(
            "{}; {} samples a sweep",
            parts.join(","),
            self.epoch_samples
        )
    }

    /// Source `part`'s target samples a sweep.
    pub fn share(&self, part: usize) -> f64 {
        let sum: f64 = self.parts.iter().map(|p| p.weight).sum();
        self.epoch_samples as f64 * self.parts[part].weight / sum
    }

    /// Source `part`'s chunks (in the mixed list) of pass `pass` of its stream.
    fn pass_order(&self, part: usize, randomize: bool, pass: u64) -> Vec<usize> {
        let p = &self.parts[part];
        let mut order: Vec<usize> = p.chunks.clone().collect();
        if randomize {
            SplitMix64::for_stream(pass, pass_stream(part)).shuffle(&mut order);
        }
        order
    }

    /// How many chunks of source `part`'s stream have their midpoint below `x` cumulated
    /// samples.
    fn stream_position(&self, part: usize, randomize: bool, x: u64) -> u64 {
        let p = &self.parts[part];
        let (pass, rest) = (x / p.samples, x % p.samples);
        let start = p.chunks.start;
        let mut count = 0u64;
        let mut cumulated = 0u128;
        for c in self.pass_order(part, randomize, pass) {
            let s = p.chunk_samples[c - start] as u128;
            // Midpoint below `rest`: cumulated + s / 2 < rest.
            if 2 * cumulated + s >= 2 * rest as u128 {
                break;
            }
            cumulated += s;
            count += 1;
        }
        pass.saturating_mul(p.chunk_samples.len() as u64)
            .saturating_add(count)
    }

    /// The chunks (of the mixed list) sweep `sweep` reads, in order; a chunk may come more
    /// than once. Each source's chunks form an endless stream of passes (each a permutation of
    /// its chunks, drawn from the pass number and the source; file order without `randomize`);
    /// the sweep takes from each the chunks whose midpoints, in samples along the stream, fall
    /// between `g * share` and `(g + 1) * share` with `g = seed + sweep`, and shuffles them
    /// together (without `randomize`, interleaves them evenly).
    pub fn sweep_chunks(&self, randomize: bool, seed: u64, sweep: u64) -> Vec<usize> {
        // The position in the sources' streams: seed + sweep, and the next one.
        let g = sweep_seed(seed, sweep) as f64;
        let mut by_part = Vec::with_capacity(self.parts.len());
        for (i, p) in self.parts.iter().enumerate() {
            let share = self.share(i);
            let from = self.stream_position(i, randomize, (g * share).round() as u64);
            let to = self.stream_position(i, randomize, ((g + 1.0) * share).round() as u64);
            let n = p.chunk_samples.len() as u64;
            let mut chunks = Vec::with_capacity(to.saturating_sub(from) as usize);
            let mut pass = None;
            for k in from..to {
                if pass.as_ref().is_none_or(|(q, _)| *q != k / n) {
                    pass = Some((k / n, self.pass_order(i, randomize, k / n)));
                }
                chunks.push(pass.as_ref().expect("set above").1[(k % n) as usize]);
            }
            by_part.push(chunks);
        }
        if randomize {
            let mut all: Vec<usize> = by_part.concat();
            SplitMix64::for_stream(sweep_seed(seed, sweep), 0).shuffle(&mut all);
            return all;
        }
        interleave(&by_part)
    }
}

/// The lists merged evenly: item `j` of a list of `n` goes at the fraction `(j + 1/2) / n` of
/// the whole (ties in list order).
fn interleave(lists: &[Vec<usize>]) -> Vec<usize> {
    let mut keyed: Vec<(u128, u128, usize, usize)> = Vec::new();
    for (l, list) in lists.iter().enumerate() {
        let n = list.len() as u128;
        keyed.extend((0..list.len()).map(|j| (2 * j as u128 + 1, 2 * n, l, j)));
    }
    keyed.sort_by(|a, b| (a.0 * b.1).cmp(&(b.0 * a.1)).then(a.2.cmp(&b.2)));
    keyed.into_iter().map(|(_, _, l, j)| lists[l][j]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(samples: &[u64]) -> Vec<ChunkInfo> {
        samples
            .iter()
            .map(|&s| ChunkInfo {
                sequences: s as usize,
                samples: s,
                bytes: s,
            })
            .collect()
    }

    /// Two sources: 10 chunks of 10 samples (0..10) and 4 chunks of 10 (10..14).
    fn two(weights: (f64, f64), epoch: Option<u64>) -> (Mix, Vec<ChunkInfo>) {
        let infos = chunks(&[10; 14]);
        let parts = vec![
            ("a".to_string(), weights.0, 0..10),
            ("b".to_string(), weights.1, 10..14),
        ];
        (Mix::new(parts, &infos, epoch).unwrap(), infos)
    }

    fn samples_by_part(mix: &Mix, infos: &[ChunkInfo], chunks: &[usize]) -> [u64; 2] {
        let mut out = [0; 2];
        for &c in chunks {
            out[mix.part_of(c)] += infos[c].samples;
        }
        out
    }

    #[test]
    fn sweeps_are_a_pure_function_of_the_seed_and_the_sweep() {
        let (mix, _) = two((0.7, 0.3), None);
        let again = two((0.7, 0.3), None).0;
        for sweep in 0..5 {
            assert_eq!(
                mix.sweep_chunks(true, 9, sweep),
                again.sweep_chunks(true, 9, sweep)
            );
        }
        assert_ne!(mix.sweep_chunks(true, 9, 0), mix.sweep_chunks(true, 10, 0));
        // Sweep 1 of seed 9 is sweep 0 of seed 10, as for any data set.
        assert_eq!(mix.sweep_chunks(true, 9, 1), mix.sweep_chunks(true, 10, 0));
    }

    #[test]
    fn each_source_takes_its_share_and_a_small_one_cycles() {
        // 140 samples a sweep: a takes 98 (of its 100), b 42 (of its 40: it cycles).
        let (mix, infos) = two((0.7, 0.3), None);
        let mut total = [0u64; 2];
        for sweep in 0..50 {
            let got = samples_by_part(&mix, &infos, &mix.sweep_chunks(true, 3, sweep));
            // Within one chunk of the share every sweep.
            assert!((got[0] as f64 - 98.0).abs() <= 10.0, "{got:?}");
            assert!((got[1] as f64 - 42.0).abs() <= 10.0, "{got:?}");
            total[0] += got[0];
            total[1] += got[1];
        }
        // Over 50 sweeps still within one chunk (half a chunk at either end).
        assert!((total[0] as f64 - 4900.0).abs() <= 10.0, "{total:?}");
        assert!((total[1] as f64 - 2100.0).abs() <= 10.0, "{total:?}");
    }

    #[test]
    fn a_source_is_read_whole_before_it_repeats() {
        // b twice per sweep of a: b's chunks come once each per pass of its stream.
        let (mix, _) = two((100.0, 80.0), Some(180));
        let sweep = mix.sweep_chunks(true, 1, 0);
        let mut b: Vec<usize> = sweep.iter().copied().filter(|&c| c >= 10).collect();
        b.sort_unstable();
        assert_eq!(b, [10, 10, 11, 11, 12, 12, 13, 13]);
        let mut a: Vec<usize> = sweep.into_iter().filter(|&c| c < 10).collect();
        a.sort_unstable();
        assert_eq!(a, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn the_epoch_size_is_independent_of_the_sources_sizes() {
        let (mix, infos) = two((1.0, 1.0), Some(60));
        for sweep in 0..10 {
            let got = samples_by_part(&mix, &infos, &mix.sweep_chunks(false, 0, sweep));
            assert_eq!(got[0] + got[1], 60, "sweep {sweep}: {got:?}");
        }
    }

    #[test]
    fn without_randomize_sources_interleave_in_file_order() {
        let (mix, _) = two((10.0, 4.0), None);
        assert_eq!(
            mix.sweep_chunks(false, 0, 0),
            [0, 10, 1, 2, 3, 11, 4, 5, 12, 6, 7, 8, 13, 9]
        );
    }

    #[test]
    fn bad_weights_and_empty_sources_are_refused() {
        let infos = chunks(&[10, 0]);
        for w in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let err = Mix::new(vec![("a".into(), w, 0..1)], &infos, None).unwrap_err();
            assert!(
                err.to_string().contains("mix source a has the weight"),
                "{err}"
            );
        }
        let err = Mix::new(vec![("e".into(), 1.0, 1..2)], &infos, None).unwrap_err();
        assert!(
            err.to_string().contains("mix source e has no samples"),
            "{err}"
        );
    }
}
