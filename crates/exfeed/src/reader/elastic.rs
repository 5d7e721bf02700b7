//! Resuming on another number of workers: the plans of the sweeps that the old workers had
//! begun, recomputed from where each of them stopped.
//!
//! A worker's delivered sequences are a pure function of the sweep plan (seed, sweep, chunk
//! list, options) and its position (sweep, window, offset): every window before the position's,
//! and the first `offset` sequences of the position's window in its shuffled order. So the
//! positions of *all* the old workers give the rest of a sweep exactly: every sequence none of
//! them delivered. The rule:
//!
//! - the sweeps from the earliest old position's up to the last one an old worker had begun are
//!   *resumed sweeps*: their rest is split between the new workers, each sequence once, and
//!   nothing delivered before is delivered again;
//! - from the first sweep no old worker had begun, sweeps are planned for the new count, as a
//!   fresh reader with that count plans them (when the old workers were themselves resumed,
//!   from the first sweep none of the workers before them had begun either).
//!
//! The rest of a resumed sweep is made of *pieces*: for each old worker in rank order, its
//! windows from its position on (the position's window without its first `offset` sequences).
//! The chunks of the pieces that still have sequences to deliver are dealt round-robin to the
//! new workers (the `i`-th such chunk to new worker `i % workers`); a new worker delivers, piece
//! after piece, the sequences of its chunks in the order the old worker would have (the old
//! window's shuffled order, without what was delivered). Each piece is one window of the new
//! worker's plan, so a new worker never holds more decoded chunks than the old one did.
//!
//! The shuffled order of an old window is recomputed from the index's sequence counts
//! ([`ChunkInfo::sequences`]): a chunk that decodes to another count (sequences dropped under
//! `maxErrors`, or chunks read as byte ranges without an index) cannot be resumed on another
//! count, and the reader says so. A resumed reader's state holds the old positions
//! ([`Resume`]) until its resumed sweeps are over, so it can be saved and resumed again, on the
//! same count or another.
//!
//! With equalize, an old worker that went through its whole part and began it again has its
//! position back at the part's start: its count of the sweep's sequences
//! ([`Position::delivered`]) says it delivered the whole part. Every new worker needs sequences
//! of the rest for its quota: where fewer chunks than new workers have sequences left, the
//! sequences are dealt instead of the chunks ([`Resume::equalized`]). The quota of the rest is
//! the engine's (`rest_quota`).

use super::plan::{shuffle_window, SweepPlan, Window};
use super::ChunkInfo;
use serde::{Deserialize, Serialize};

/// Where one worker stopped: the sweep, the window of its plan of that sweep, and how many
/// sequences of that window it had delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    /// The sweep.
    pub sweep: u64,
    /// The window of the worker's plan of that sweep.
    pub window: usize,
    /// Sequences of that window delivered.
    pub offset: usize,
    /// With equalize: the sequences delivered in that sweep, repeats included. As many as the
    /// worker's part holds means its whole part was delivered: with equalize repeat a worker
    /// goes through its part again from window 0, so its window and offset no longer say it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delivered: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Position {
    /// Whether the worker had delivered anything of its position's sweep.
    fn begun(&self) -> bool {
        self.window > 0 || self.offset > 0 || self.delivered > 0
    }
}

/// One resume onto another number of workers: how many workers there were and where each of
/// them (by rank) stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resume {
    /// The old number of workers.
    pub num_workers: usize,
    /// The old workers' positions, by rank.
    pub positions: Vec<Position>,
    /// The new workers read with equalize, which needs every one of them to have sequences of
    /// the rest to deliver: where fewer chunks than new workers have sequences left, the
    /// sequences are dealt one by one instead of the chunks.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub equalized: bool,
}

/// The most sweeps a resume finishes: old workers further apart than this are refused (their
/// positions are corrupt, or they were not reading together).
pub const MAX_RESUMED_SWEEPS: u64 = 64;

impl Resume {
    /// The first resumed sweep: the earliest old position's.
    pub fn start(&self) -> u64 {
        self.positions.iter().map(|p| p.sweep).min().unwrap_or(0)
    }

    /// The first sweep no old worker had begun. (Sweeps are planned for the new count from
    /// [`first_fresh_sweep`] on, which also counts earlier resumes.)
    pub fn end(&self) -> u64 {
        let end = |p: &Position| p.sweep.saturating_add(u64::from(p.begun()));
        self.positions.iter().map(end).max().unwrap_or(0)
    }
}

/// The first sweep planned for the new count after `resumes` (oldest first): the first that
/// neither the last resume's old workers nor those of the resumes before had begun (old workers
/// that were themselves resumed planned their sweeps up to there from what was left).
pub fn first_fresh_sweep(resumes: &[Resume]) -> u64 {
    resumes.iter().map(Resume::end).max().unwrap_or(0)
}

/// What every plan depends on: the chunks, the options of the order, each sweep's chunk order.
pub(super) struct PlanInputs<'a> {
    pub infos: &'a [ChunkInfo],
    pub randomize: bool,
    pub seed: u64,
    pub window: Window,
    pub order: &'a dyn Fn(u64) -> Vec<usize>,
}

/// A run of sequences to deliver: chunks, and the sequences of them in order, as (index into
/// `chunks`, sequence in the chunk).
struct Piece {
    chunks: Vec<usize>,
    order: Vec<(u32, u32)>,
}

/// The plans of sweep `sweep` of every one of `workers` workers after `resumes` (oldest first,
/// the last onto `workers`), each window's sequences listed.
pub(super) fn all_plans(
    inputs: &PlanInputs<'_>,
    resumes: &[Resume],
    workers: usize,
    sweep: u64,
) -> Result<Vec<SweepPlan>, String> {
    match resumes.split_last() {
        Some((last, _)) if last.num_workers == 0 || last.positions.len() != last.num_workers => {
            Err(format!(
                "a resume of {} workers holds {} positions",
                last.num_workers,
                last.positions.len()
            ))
        }
        Some((last, earlier)) if sweep < first_fresh_sweep(resumes) => {
            let old = all_plans(inputs, earlier, last.num_workers, sweep)?;
            let rest = remainder(&old, last, sweep)?;
            Ok(deal(rest, workers, sweep, last.equalized))
        }
        _ => Ok(fresh_plans(inputs, workers, sweep)),
    }
}

/// The plans of a sweep planned for `workers` from its start, each window's shuffled order
/// listed from the index's sequence counts.
fn fresh_plans(inputs: &PlanInputs<'_>, workers: usize, sweep: u64) -> Vec<SweepPlan> {
    let order = (inputs.order)(sweep);
    (0..workers)
        .map(|rank| {
            let mut plan = SweepPlan::from_order(
                &order,
                inputs.infos,
                inputs.randomize,
                sweep,
                inputs.window,
                workers,
                rank,
            );
            let listed = (0..plan.windows.len())
                .map(|w| {
                    let mut entries = Vec::new();
                    for (i, &c) in plan.window_chunks(w).iter().enumerate() {
                        entries
                            .extend((0..inputs.infos[c].sequences).map(|s| (i as u32, s as u32)));
                    }
                    if inputs.randomize {
                        shuffle_window(&mut entries, inputs.seed, sweep, w);
                    }
                    entries
                })
                .collect();
            plan.listed = Some(listed);
            plan
        })
        .collect()
}

/// What the old workers (`old`, their plans of `sweep`) had not delivered of it when they
/// stopped at `resume`'s positions, as pieces in rank order.
fn remainder(old: &[SweepPlan], resume: &Resume, sweep: u64) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    for (rank, (plan, at)) in old.iter().zip(&resume.positions).enumerate() {
        let (from_window, skip) = match at.sweep.cmp(&sweep) {
            std::cmp::Ordering::Greater => continue,
            std::cmp::Ordering::Equal => (at.window, at.offset),
            std::cmp::Ordering::Less => (0, 0),
        };
        let listed = plan.listed.as_deref().unwrap_or_default();
        let part: usize = listed.iter().map(Vec::len).sum();
        if at.sweep == sweep && at.delivered >= part as u64 {
            continue; // the whole part was delivered (and begun again, with equalize repeat)
        }
        if from_window > listed.len() {
            return Err(format!(
                "worker {rank} of {}: window {from_window} of sweep {sweep} does not exist",
                resume.num_workers
            ));
        }
        for (w, entries) in listed.iter().enumerate().skip(from_window) {
            let skip = if w == from_window { skip } else { 0 };
            if skip > entries.len() {
                return Err(format!(
                    "worker {rank} of {}: window {w} of sweep {sweep} has {} sequences, not {skip}",
                    resume.num_workers,
                    entries.len()
                ));
            }
            if skip < entries.len() {
                pieces.push(Piece {
                    chunks: plan.window_chunks(w).to_vec(),
                    order: entries[skip..].to_vec(),
                });
            }
        }
    }
    Ok(pieces)
}

/// Deals the pieces to `workers` new workers: their chunks that have sequences left
/// round-robin (the `i`-th such chunk to new worker `i % workers`), or, with `equalized` and
/// fewer such chunks than new workers, their sequences round-robin (a chunk is then decoded by
/// each new worker it has sequences for). Each new worker's plan has one window per piece it
/// has sequences of: those of the piece's chunks, in the piece's order.
fn deal(pieces: Vec<Piece>, workers: usize, sweep: u64, equalized: bool) -> Vec<SweepPlan> {
    let left = |piece: &Piece| {
        let mut left = vec![false; piece.chunks.len()];
        for &(i, _) in &piece.order {
            left[i as usize] = true;
        }
        left
    };
    let chunks_left: usize = pieces
        .iter()
        .map(|p| left(p).iter().filter(|&&l| l).count())
        .sum();
    let by_sequence = equalized && chunks_left < workers;
    let mut plans: Vec<SweepPlan> = (0..workers)
        .map(|_| SweepPlan {
            sweep,
            chunks: Vec::new(),
            windows: Vec::new(),
            listed: Some(Vec::new()),
        })
        .collect();
    let mut next = 0usize;
    for piece in pieces {
        let mut orders = vec![Vec::new(); workers];
        if by_sequence {
            for &entry in &piece.order {
                orders[next % workers].push(entry);
                next += 1;
            }
        } else {
            let mut owner = vec![0; piece.chunks.len()];
            for (i, _) in left(&piece).iter().enumerate().filter(|(_, &l)| l) {
                owner[i] = next % workers;
                next += 1;
            }
            for &entry in &piece.order {
                orders[owner[entry.0 as usize]].push(entry);
            }
        }
        for (plan, order) in plans.iter_mut().zip(orders) {
            if order.is_empty() {
                continue;
            }
            // The piece's chunks this worker has sequences of, in the piece's order.
            let mut own: Vec<u32> = order.iter().map(|&(i, _)| i).collect();
            own.sort_unstable();
            own.dedup();
            let start = plan.chunks.len();
            plan.chunks
                .extend(own.iter().map(|&i| piece.chunks[i as usize]));
            plan.windows.push(start..plan.chunks.len());
            let at = |i: u32| own.binary_search(&i).expect("one of its chunks") as u32;
            let order = order.into_iter().map(|(i, s)| (at(i), s)).collect();
            plan.listed.as_mut().expect("listed").push(order);
        }
    }
    plans
}

/// The sequences of the rest of a sweep in `plans` (every new worker's), and its samples by
/// `infos`: a chunk's samples per sequence times its sequences in the rest (exact where the
/// chunk's sequences are all as long; the same for every worker either way).
pub(super) fn rest_size(plans: &[SweepPlan], infos: &[ChunkInfo]) -> (u64, u64) {
    let mut counts = std::collections::BTreeMap::<usize, u64>::new();
    for plan in plans {
        for (w, entries) in plan.listed.iter().flatten().enumerate() {
            let chunks = plan.window_chunks(w);
            for &(i, _) in entries {
                *counts.entry(chunks[i as usize]).or_default() += 1;
            }
        }
    }
    let sequences = counts.values().sum();
    let samples = counts.iter().map(|(&c, &n)| {
        let info = &infos[c];
        u128::from(n) * u128::from(info.samples) / info.sequences.max(1) as u128
    });
    (
        sequences,
        u64::try_from(samples.sum::<u128>()).unwrap_or(u64::MAX),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn infos(sequences: &[usize]) -> Vec<ChunkInfo> {
        sequences
            .iter()
            .map(|&n| ChunkInfo {
                sequences: n,
                samples: n as u64,
                bytes: 0,
            })
            .collect()
    }

    /// Every (chunk, sequence) a plan delivers, in order.
    fn delivered(plan: &SweepPlan) -> Vec<(usize, u32)> {
        let listed = plan.listed.as_ref().unwrap();
        let mut out = Vec::new();
        for (w, entries) in listed.iter().enumerate() {
            let chunks = plan.window_chunks(w);
            out.extend(entries.iter().map(|&(i, s)| (chunks[i as usize], s)));
        }
        out
    }

    #[test]
    fn the_rest_of_a_sweep_is_dealt_once_and_later_sweeps_are_fresh() {
        let infos = infos(&[3, 5, 2, 4, 4, 1, 6]);
        let order = |s: u64| super::super::plan::chunk_order(7, true, 9, s);
        let inputs = PlanInputs {
            infos: &infos,
            randomize: true,
            seed: 9,
            window: Window::Chunks(2),
            order: &order,
        };
        let old = all_plans(&inputs, &[], 2, 0).unwrap();
        // Worker 0 stopped in its second window, worker 1 in its first.
        let resume = Resume {
            num_workers: 2,
            positions: vec![
                Position {
                    sweep: 0,
                    window: 1,
                    offset: 2,
                    delivered: 0,
                },
                Position {
                    sweep: 0,
                    window: 0,
                    offset: 3,
                    delivered: 0,
                },
            ],
            equalized: false,
        };
        let mut seen: Vec<(usize, u32)> = Vec::new();
        let l0 = old[0].listed.as_ref().unwrap();
        seen.extend(delivered(&old[0]).into_iter().take(l0[0].len() + 2));
        seen.extend(delivered(&old[1]).into_iter().take(3));
        let new = all_plans(&inputs, std::slice::from_ref(&resume), 3, 0).unwrap();
        for plan in &new {
            seen.extend(delivered(plan));
        }
        let all: BTreeSet<(usize, u32)> = (0..7)
            .flat_map(|c| (0..infos[c].sequences as u32).map(move |s| (c, s)))
            .collect();
        assert_eq!(seen.len(), all.len(), "no sequence twice");
        assert_eq!(seen.into_iter().collect::<BTreeSet<_>>(), all);
        assert_eq!(resume.end(), 1);
        let fresh = all_plans(&inputs, &[], 3, 1).unwrap();
        assert_eq!(all_plans(&inputs, &[resume], 3, 1).unwrap(), fresh);
    }
}
