//! CNTK's own randomizer tests (`Tests/UnitTests/ReaderTests/ReaderLibTests.cpp`), with their
//! expected orders, and properties of the order over many seeds, windows, chunk sizes and
//! worker counts.

use super::*;
use crate::reader::rng::SplitMix64;
use std::collections::BTreeSet;

/// CNTK's `MockDeserializer(chunks, perChunk, data, length)`: sequence `k` of chunk `c` has
/// value `c * perChunk + k` and `length` samples.
fn mock(chunks: usize, per_chunk: usize, length: u32) -> Vec<Vec<u32>> {
    vec![vec![length; per_chunk]; chunks]
}

/// The mock's value of a sequence, once per sample (CNTK's tests compare sample values).
fn values(seqs: &[CntkSequence], per_chunk: usize) -> Vec<u32> {
    seqs.iter()
        .flat_map(|s| {
            let v = s.chunk * per_chunk as u32 + s.index;
            std::iter::repeat_n(v, s.samples as usize)
        })
        .collect()
}

fn epoch(size: u64, index: u64, cross_sweeps: bool) -> CntkEpoch {
    CntkEpoch {
        workers: 1,
        rank: 0,
        size: CntkEpochSize::Samples(size),
        index,
        cross_sweeps,
    }
}

/// CNTK's `OneEpochRandomizationTest` for one minibatch size.
fn one_epoch(
    r: &mut CntkRandomizer,
    sweep: u64,
    config: CntkEpoch,
    mb: u64,
    expected: &[u32],
    per_chunk: usize,
    length: u64,
) {
    let CntkEpochSize::Samples(size) = config.size else {
        unreachable!("the tests give epochs in samples")
    };
    assert_eq!(size, expected.len() as u64);
    r.start_epoch(config).unwrap();
    let mut actual = Vec::new();
    let mut total = 0u64;
    while total < size {
        let b = r.next_sequences(mb, mb).unwrap();
        let read: u64 = b.sequences.iter().map(|s| u64::from(s.samples)).sum();
        actual.extend(values(&b.sequences, per_chunk));
        let mut expected_size = (size - total).min(mb);
        if !config.cross_sweeps {
            expected_size = expected_size.min(sweep - total % sweep);
        }
        expected_size = expected_size.max(length);
        assert!(read <= mb.max(length), "mb {mb}: read {read}");
        if length == 1 {
            assert_eq!(read, expected_size, "mb {mb}");
        } else {
            assert!(
                read <= expected_size && expected_size - read < length,
                "mb {mb}"
            );
        }
        assert_eq!(b.end_of_epoch, total + read == size, "mb {mb} at {total}");
        assert_eq!(
            b.end_of_sweep,
            total / sweep != (total + read) / sweep,
            "mb {mb} at {total}"
        );
        total += read;
    }
    for n in 1..=3 {
        let b = r.next_sequences(n, n).unwrap();
        assert!(b.sequences.is_empty());
        assert!(b.end_of_epoch);
        assert_eq!(b.end_of_sweep, size % sweep == 0);
    }
    assert_eq!(actual, expected, "mb {mb}");
}

/// CNTK's `TestRandomization`: a full window in samples, every minibatch size from 1 to the
/// epoch's size + 1. (CNTK also runs its `NoRandomizer` there, which is not this mode.)
fn test_randomization(
    chunks: Vec<Vec<u32>>,
    per_chunk: usize,
    index: u64,
    cross_sweeps: bool,
    sweep: u64,
    expected: &[u32],
    length: u64,
) {
    let mut r = CntkRandomizer::new(chunks, CntkWindow::Samples(u64::MAX), 0).unwrap();
    let size = expected.len() as u64;
    for mb in 1..=size + 1 {
        let config = epoch(size, index, cross_sweeps);
        one_epoch(&mut r, sweep, config, mb, expected, per_chunk, length);
    }
}

const FIRST_SWEEP: [u32; 10] = [6, 3, 1, 5, 9, 0, 4, 2, 7, 8];
const SECOND_SWEEP: [u32; 10] = [3, 0, 8, 4, 7, 5, 2, 9, 1, 6];

fn two_sweeps() -> Vec<u32> {
    FIRST_SWEEP.iter().chain(&SECOND_SWEEP).copied().collect()
}

fn repeat_samples(values: &[u32], length: u32) -> Vec<u32> {
    values
        .iter()
        .flat_map(|&v| std::iter::repeat_n(v, length as usize))
        .collect()
}

#[test]
fn cntk_test_randomization_first_epoch() {
    test_randomization(mock(5, 2, 1), 2, 0, false, 10, &FIRST_SWEEP, 1);
}

#[test]
fn cntk_test_randomization_second_epoch() {
    test_randomization(mock(5, 2, 1), 2, 1, false, 10, &SECOND_SWEEP, 1);
}

#[test]
fn cntk_test_randomization_two_sweeps() {
    test_randomization(mock(5, 2, 1), 2, 0, false, 10, &two_sweeps(), 1);
}

/// CNTK's `TestRandomization_TwoSweeps_WithSequences` and its sweep-crossing twin: two sweeps
/// of sequences of 2 to 10 samples.
fn two_sweeps_with_sequences(cross_sweeps: bool) {
    for length in 2..=10u32 {
        let expected = repeat_samples(&two_sweeps(), length);
        let sweep = 10 * u64::from(length);
        let chunks = mock(5, 2, length);
        test_randomization(chunks, 2, 0, cross_sweeps, sweep, &expected, length.into());
    }
}

#[test]
fn cntk_test_randomization_two_sweeps_with_sequences() {
    two_sweeps_with_sequences(false);
}

#[test]
fn cntk_test_randomization_two_sweeps_allow_to_cross_sweep_boundary() {
    test_randomization(mock(5, 2, 1), 2, 0, true, 10, &two_sweeps(), 1);
}

#[test]
fn cntk_test_randomization_two_sweeps_allow_to_cross_sweep_boundary_with_sequences() {
    two_sweeps_with_sequences(true);
}

/// CNTK's `BlockRandomizerOneEpochWithChunks1Test` and its neighbours: one sequence a call.
fn one_at_a_time(chunks: Vec<Vec<u32>>, per_chunk: usize, window: CntkWindow, expected: &[u32]) {
    let mut r = CntkRandomizer::new(chunks, window, 0).unwrap();
    let n = expected.len() as u64;
    r.start_epoch(epoch(n, 0, false)).unwrap();
    let mut actual = Vec::new();
    for i in 0..=n {
        let b = r.next_sequences(1, 1).unwrap();
        assert_eq!(b.sequences.len() as u64, 1 - i / n);
        if i < n {
            assert_eq!(b.sequences[0].samples, 1);
        }
        actual.extend(values(&b.sequences, per_chunk));
        assert_eq!(b.end_of_epoch, n <= i + 1);
    }
    assert_eq!(actual, expected);
}

#[test]
fn cntk_block_randomizer_one_epoch_with_chunks1() {
    let expected = [8, 9, 1, 0, 6, 7, 2, 3, 4, 5];
    one_at_a_time(mock(5, 2, 1), 2, CntkWindow::Samples(4), &expected);
}

#[test]
fn cntk_block_randomizer_one_epoch_with_chunks2() {
    let expected = [
        18, 19, 7, 14, 6, 9, 8, 15, 5, 2, 10, 13, 16, 17, 1, 4, 3, 12, 11, 0,
    ];
    one_at_a_time(mock(10, 2, 1), 2, CntkWindow::Samples(18), &expected);
}

#[test]
fn cntk_block_randomizer_one_epoch_legacy_randomization() {
    one_at_a_time(
        mock(5, 2, 1),
        2,
        CntkWindow::Samples(u64::MAX),
        &FIRST_SWEEP,
    );
}

#[test]
fn cntk_test_chunk_based_randomization() {
    // A window of k chunks against one of k * 100 samples (100 one-sample sequences a chunk):
    // the same chunk order, the sample window within the chunk window, and the chunk window
    // exactly min(10, max(k, 1)) chunks.
    let chunks = mock(10, 100, 1);
    for k in 0..=20u64 {
        let by_samples = randomize_chunks(&chunks, CntkWindow::Samples(k * 100), k).unwrap();
        let by_chunks = randomize_chunks(&chunks, CntkWindow::Chunks(k), k).unwrap();
        assert_eq!(by_samples.len(), by_chunks.len());
        for (a, b) in by_samples.iter().zip(&by_chunks) {
            assert_eq!(a.original, b.original);
            assert_eq!(a.sample_start, b.sample_start);
            assert_eq!(a.sequence_start, b.sequence_start);
            assert!(b.window.end > b.window.start);
            assert!(a.window.start >= b.window.start, "k {k}");
            assert!(a.window.end <= b.window.end, "k {k}");
            assert_eq!(b.window.len() as u64, k.clamp(1, 10), "k {k}");
        }
    }
}

#[test]
fn cntk_test_chunk_based_randomization_quality() {
    let mut r = CntkRandomizer::new(mock(10, 100, 1), CntkWindow::Chunks(3), 0).unwrap();
    r.start_epoch(epoch(1000, 0, false)).unwrap();
    for _ in 0..10 {
        let b = r.next_sequences(100, 100).unwrap();
        assert_eq!(b.sequences.len(), 100);
        let chunks: BTreeSet<u32> = b.sequences.iter().map(|s| s.chunk).collect();
        assert!(chunks.len() > 1);
    }
}

/// CNTK's `SequentialDeserializer`: sequences of 1 to `max_length` samples (1 every 1000
/// samples), the last one cut to fill `sweep` samples, in chunks closed once they hold
/// `chunk_samples`. (CNTK draws the lengths with boost's distribution; any lengths do here.)
fn sequential(seed: u64, chunk_samples: u64, sweep: u64, max_length: u32) -> Vec<Vec<u32>> {
    let mut rng = SplitMix64::new(seed);
    let (mut chunks, mut current, mut in_current) = (Vec::new(), Vec::new(), 0u64);
    let mut total = 0u64;
    while total < sweep {
        let length = if sweep - total < u64::from(max_length) {
            (sweep - total) as u32
        } else if total.is_multiple_of(1000) {
            1
        } else {
            1 + rng.below(u64::from(max_length)) as u32
        };
        if in_current >= chunk_samples {
            chunks.push(std::mem::take(&mut current));
            in_current = 0;
        }
        current.push(length);
        in_current += u64::from(length);
        total += u64::from(length);
    }
    if in_current > 0 {
        chunks.push(current);
    }
    chunks
}

/// CNTK's `ReadFullEpoch`: an epoch read one sample at a time, as the sequences' global ids
/// (chunk, index), once per sample.
fn read_full_epoch(r: &mut CntkRandomizer, size: u64, index: u64) -> Vec<(u32, u32, u32)> {
    r.start_epoch(epoch(size, index, false)).unwrap();
    let mut out = Vec::new();
    loop {
        let b = r.next_sequences(1, 1).unwrap();
        for s in &b.sequences {
            for k in 0..s.samples {
                out.push((s.chunk, s.index, k));
            }
        }
        if b.end_of_epoch || b.sequences.is_empty() {
            return out;
        }
    }
}

fn sequential_randomizer(window: u64) -> (CntkRandomizer, u64) {
    let sweep = 500_000;
    let chunks = sequential(0, 10_000, sweep, 300);
    let r = CntkRandomizer::new(chunks, CntkWindow::Samples(window), 0).unwrap();
    (r, sweep)
}

/// CNTK's `RandRollback*` tests: `sweeps` sweeps read as one epoch each, then as `parts`
/// epochs of a `parts`-th of their samples (the same samples), then the epochs `again` read
/// once more (the same as the first time).
fn rollback(window: u64, sweeps: u64, parts: u64, again: &[u64]) {
    let (mut r, sweep) = sequential_randomizer(window);
    let whole: Vec<_> = (0..sweeps)
        .flat_map(|s| read_full_epoch(&mut r, sweep, s))
        .collect();
    assert_eq!(whole.len() as u64, sweeps * sweep);
    let size = whole.len() as u64 / parts;
    let epochs: Vec<_> = (0..parts)
        .map(|e| read_full_epoch(&mut r, size, e))
        .collect();
    assert_eq!(epochs.concat(), whole);
    for &e in again {
        assert_eq!(read_full_epoch(&mut r, size, e), epochs[e as usize]);
    }
}

#[test]
fn cntk_rand_rollback_to_earlier_epoch_between_sweeps() {
    rollback(50_000, 3, 5, &[2]);
}

#[test]
fn cntk_rand_rollback_to_earlier_epoch_in_the_sweep() {
    rollback(30_000, 1, 3, &[1]);
}

#[test]
fn cntk_rand_rollback_to_same_epoch_in_the_sweep() {
    rollback(30_000, 1, 4, &[2]);
}

#[test]
fn cntk_rand_rollback_to_same_epoch_in_big_randomization_window() {
    rollback(250_000, 1, 5, &[1, 3, 2, 2]);
}

/// CNTK's CheckGetCurrentCursorForRandomizers and CheckSetCurrentCursorForRandomizers for
/// the randomizers `make` opens: the position after an epoch is its samples read, and setting
/// a position reads the same samples as the epoch starting there. Inside a sweep and across
/// sweeps.
fn check_get_and_set_current_cursor(make: impl Fn() -> CntkRandomizer) {
    let mut r = make();
    let sweep = r.sweep_samples();
    for size in [50_000, sweep * 2 / 3] {
        let first = read_full_epoch(&mut r, size, 0);
        let first_end = r.position();
        assert_eq!(first_end, first.len() as u64);
        let second = read_full_epoch(&mut r, size, 1);
        assert_eq!(r.position() - first_end, second.len() as u64);
        let third = read_full_epoch(&mut r, size, 2);

        let mut other = make();
        other.start_epoch(epoch(u64::MAX / 2, 0, false)).unwrap();
        for (start, expected) in [
            (first.len(), &second),
            (0, &first),
            (first.len() + second.len(), &third),
        ] {
            other.set_position(start as u64).unwrap();
            let mut got = Vec::new();
            while got.len() < expected.len() {
                let b = other.next_sequences(1, 1).unwrap();
                for s in &b.sequences {
                    got.extend((0..s.samples).map(|k| (s.chunk, s.index, k)));
                }
            }
            assert_eq!(&got, expected);
        }
    }
}

#[test]
fn cntk_check_get_and_set_current_cursor() {
    check_get_and_set_current_cursor(|| sequential_randomizer(50_000).0);
    check_get_and_set_current_cursor(|| {
        CntkRandomizer::in_file_order(sequential(0, 10_000, 500_000, 300)).unwrap()
    });
}

#[test]
fn cntk_no_randomizer_one_epoch() {
    // CNTK's NoRandomizerOneEpoch: 5 chunks of 2 one-sample sequences, an epoch of 10
    // samples, read one sample at a time: the file's order, then nothing; the epoch's end is
    // flagged with its last sequence.
    let mut r = CntkRandomizer::in_file_order(mock(5, 2, 1)).unwrap();
    r.start_epoch(epoch(10, 0, false)).unwrap();
    let mut actual = Vec::new();
    for i in 0..12u32 {
        let b = r.next_sequences(1, 1).unwrap();
        assert_eq!(b.sequences.len(), usize::from(i < 10));
        actual.extend(values(&b.sequences, 2));
        assert_eq!(b.end_of_epoch, 10 <= i + 1);
    }
    assert_eq!(actual, (0..10).collect::<Vec<u32>>());
}

#[test]
fn cntk_no_randomizer_gives_workers_sequences_by_their_running_count() {
    // NoRandomizer: worker `rank` of `n` takes the sequences whose running count modulo `n` is
    // `rank`; the count goes on across sweeps (7 sequences: worker 0 of 2 takes 0, 2, 4, 6,
    // then 1, 3, 5 of the second sweep), and a SetState restarts it at the sequence's place in
    // its sweep.
    let mut r = CntkRandomizer::in_file_order(mock(7, 1, 2)).unwrap();
    r.start_epoch(CntkEpoch {
        workers: 2,
        rank: 0,
        size: CntkEpochSize::Sweeps(2),
        index: 0,
        cross_sweeps: true,
    })
    .unwrap();
    let mut taken = Vec::new();
    loop {
        let b = r.next_sequences(u64::MAX, 2).unwrap();
        taken.extend(values(&b.sequences, 1));
        if b.end_of_epoch {
            break;
        }
    }
    assert_eq!(taken, [0, 0, 2, 2, 4, 4, 6, 6, 1, 1, 3, 3, 5, 5]);
    r.set_position(14 + 4).unwrap();
    let b = r.next_sequences(u64::MAX, 2).unwrap();
    assert_eq!(values(&b.sequences, 1), [2, 2]);
    assert_eq!(r.position(), 14 + 6);
}

#[test]
fn cntk_randomizer_chaos_monkey() {
    // CNTK's RandomizerChaosMonkey: random worker counts, ranks, epoch sizes and indices,
    // crossing sweeps or not, random minibatch sizes: a minibatch of more than one sequence
    // never passes its size, and the epoch ends after as many sweep ends as it spans.
    // (CNTK draws the parameters with boost's distribution; these are drawn here.)
    let length = 3;
    let chunks = mock(100, 10, length);
    let sweep = 1000 * u64::from(length);
    let mut r = CntkRandomizer::new(chunks, CntkWindow::Samples(18), 0).unwrap();
    let mut rng = SplitMix64::new(42);
    let mut draw = || 1 + rng.below(100);
    for _ in 0..100 {
        let workers = draw() as usize;
        let rank = draw() as usize % workers;
        let size = sweep * draw() / draw();
        let index = draw();
        let cross_sweeps = draw() % 2 == 0;
        let config = CntkEpoch {
            workers,
            rank,
            size: CntkEpochSize::Samples(size),
            index,
            cross_sweeps,
        };
        r.start_epoch(config).unwrap();
        let (start, end) = (index * size, index * size + size);
        let sweeps = end / sweep - start / sweep;
        let mut sweep_ends = 0;
        loop {
            let n = draw();
            let b = r.next_sequences(n, n).unwrap();
            sweep_ends += u64::from(b.end_of_sweep);
            if b.sequences.len() > 1 {
                let samples: u64 = b.sequences.iter().map(|s| u64::from(s.samples)).sum();
                assert!(samples <= n);
            }
            if b.end_of_epoch {
                break;
            }
        }
        assert_eq!(sweep_ends, sweeps, "{config:?}");
    }
}

/// Chunks of random sequence counts (1 to `max_sequences`) and lengths (1 to `max_length`).
fn random_chunks(
    rng: &mut SplitMix64,
    num_chunks: usize,
    max_sequences: u64,
    max_length: u64,
) -> Vec<Vec<u32>> {
    (0..num_chunks)
        .map(|_| {
            let n = 1 + rng.below(max_sequences);
            (0..n).map(|_| 1 + rng.below(max_length) as u32).collect()
        })
        .collect()
}

fn random_window(rng: &mut SplitMix64, chunks: &[Vec<u32>]) -> CntkWindow {
    let samples: u64 = chunks.iter().flatten().map(|&s| u64::from(s)).sum();
    match rng.below(3) {
        0 => CntkWindow::Chunks(rng.below(chunks.len() as u64 + 3)),
        1 => CntkWindow::Samples(rng.below(samples + 10)),
        _ => CntkWindow::Samples(u64::MAX),
    }
}

/// A random data set (up to `max_chunks` chunks), window and seed.
fn random_case(
    rng: &mut SplitMix64,
    max_chunks: u64,
    max_sequences: u64,
    max_length: u64,
) -> (Vec<Vec<u32>>, CntkWindow, u64) {
    let num_chunks = 1 + rng.below(max_chunks) as usize;
    let chunks = random_chunks(rng, num_chunks, max_sequences, max_length);
    let window = random_window(rng, &chunks);
    (chunks, window, rng.below(1000))
}

#[test]
fn a_sweep_holds_every_sequence_once_each_within_its_window() {
    let mut rng = SplitMix64::new(7);
    for case in 0..300 {
        let (chunks, window, seed) = random_case(&mut rng, 30, 12, 9);
        let (randomized, order) = sweep_order(&chunks, window, seed).unwrap();
        let all: BTreeSet<(u32, u32)> = order.iter().map(|s| (s.chunk, s.index)).collect();
        let total: usize = chunks.iter().map(Vec::len).sum();
        assert_eq!(all.len(), total, "case {case}");
        assert_eq!(order.len(), total, "case {case}");
        for (t, s) in order.iter().enumerate() {
            let at = chunk_at(&randomized, t as u64);
            assert!(randomized[at].window.contains(&s.randomized_chunk));
            assert_eq!(randomized[s.randomized_chunk as usize].original, s.chunk);
            assert_eq!(chunks[s.chunk as usize][s.index as usize], s.samples);
        }
        // Each randomized chunk keeps its number of sequences.
        for c in &randomized {
            assert_eq!(c.sequences, chunks[c.original as usize].len() as u64);
        }
        assert_eq!(sweep_order(&chunks, window, seed).unwrap().1, order);
    }
}

/// Every sequence each worker gets in an epoch of `sweeps` sweeps with minibatches of `mb`.
fn worker_epoch(
    chunks: &[Vec<u32>],
    window: CntkWindow,
    seed: u64,
    workers: usize,
    rank: usize,
    sweeps: u64,
    mb: u64,
) -> Vec<Vec<CntkSequence>> {
    let mut r = CntkRandomizer::new(chunks.to_vec(), window, seed).unwrap();
    let config = CntkEpoch {
        workers,
        rank,
        size: CntkEpochSize::Sweeps(sweeps),
        index: 0,
        cross_sweeps: true,
    };
    r.start_epoch(config).unwrap();
    let (global, local) = minibatch_budgets(mb, workers, rank, true);
    let mut batches = Vec::new();
    loop {
        let b = r.next_sequences(global, local).unwrap();
        let samples: u64 = b.sequences.iter().map(|s| u64::from(s.samples)).sum();
        assert_eq!(samples, b.local_samples);
        assert!(
            b.sequences.len() <= 1 || samples <= local,
            "local budget {local}"
        );
        if !b.sequences.is_empty() {
            batches.push(b.sequences);
        }
        if b.end_of_epoch {
            return batches;
        }
    }
}

#[test]
fn the_workers_share_every_sweep_exactly() {
    let mut rng = SplitMix64::new(11);
    for case in 0..120 {
        let (chunks, window, seed) = random_case(&mut rng, 20, 8, 5);
        let workers = 1 + rng.below(6) as usize;
        let mb = 1 + rng.below(40);
        let sweeps = 1 + rng.below(3);
        let total: usize = chunks.iter().map(Vec::len).sum();
        let mut per_sweep: Vec<Vec<(u32, u32)>> = vec![Vec::new(); sweeps as usize];
        for rank in 0..workers {
            let got: Vec<CntkSequence> =
                worker_epoch(&chunks, window, seed, workers, rank, sweeps, mb)
                    .into_iter()
                    .flatten()
                    .collect();
            for s in &got {
                assert_eq!(s.randomized_chunk as usize % workers, rank, "case {case}");
            }
            // The worker's sequences are the sweeps' orders filtered to its chunks.
            let mut expected = Vec::new();
            for sweep in 0..sweeps {
                let (_, order) = sweep_order(&chunks, window, seed + sweep).unwrap();
                let mine: Vec<_> = order
                    .into_iter()
                    .filter(|s| s.randomized_chunk as usize % workers == rank)
                    .collect();
                per_sweep[sweep as usize].extend(mine.iter().map(|s| (s.chunk, s.index)));
                expected.extend(mine);
            }
            assert_eq!(got, expected, "case {case} rank {rank}");
        }
        for sweep in per_sweep {
            let distinct: BTreeSet<_> = sweep.iter().collect();
            assert_eq!(distinct.len(), total, "case {case}");
            assert_eq!(sweep.len(), total, "case {case}");
        }
    }
}

#[test]
fn a_restored_position_goes_on_with_the_same_minibatches() {
    let mut rng = SplitMix64::new(3);
    for case in 0..80 {
        let (chunks, window, seed) = random_case(&mut rng, 15, 10, 6);
        let workers = 1 + rng.below(3) as usize;
        let rank = rng.below(workers as u64) as usize;
        let mb = 1 + rng.below(30);
        let (global, local) = minibatch_budgets(mb, workers, rank, true);
        let config = CntkEpoch {
            workers,
            rank,
            size: CntkEpochSize::Sweeps(3),
            index: 0,
            cross_sweeps: true,
        };
        let mut r = CntkRandomizer::new(chunks.clone(), window, seed).unwrap();
        r.start_epoch(config).unwrap();
        let stop = rng.below(20);
        for _ in 0..stop {
            r.next_sequences(global, local).unwrap();
        }
        let mut restored = CntkRandomizer::new(chunks, window, seed).unwrap();
        restored.start_epoch(config).unwrap();
        restored.set_position(r.position()).unwrap();
        loop {
            let a = r.next_sequences(global, local).unwrap();
            let b = restored.next_sequences(global, local).unwrap();
            assert_eq!(a, b, "case {case}");
            if a.end_of_epoch {
                break;
            }
        }
    }
}

#[test]
fn the_budgets_follow_cntk_s_local_timeline() {
    assert_eq!(minibatch_budgets(10, 1, 0, true), (u64::MAX, 10));
    assert_eq!(minibatch_budgets(10, 3, 0, true), (u64::MAX, 4));
    assert_eq!(minibatch_budgets(10, 3, 2, true), (u64::MAX, 3));
    assert_eq!(minibatch_budgets(2, 4, 3, true), (u64::MAX, 1));
    assert_eq!(minibatch_budgets(10, 3, 1, false), (10, 10));
}

#[test]
fn a_worker_without_chunks_has_nothing_to_read() {
    let mut r = CntkRandomizer::new(mock(2, 3, 1), CntkWindow::Chunks(2), 0).unwrap();
    r.start_epoch(CntkEpoch {
        workers: 3,
        rank: 2,
        ..CntkEpoch::default()
    })
    .unwrap();
    let b = r.next_sequences(u64::MAX, 5).unwrap();
    assert!(b.sequences.is_empty());
    assert!(b.end_of_epoch);
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    assert!(CntkRandomizer::new(Vec::new(), CntkWindow::Chunks(1), 0).is_err());
    assert!(CntkRandomizer::new(vec![vec![0, 0]], CntkWindow::Chunks(1), 0).is_err());
    let mut r = CntkRandomizer::new(mock(2, 2, 1), CntkWindow::Chunks(1), 0).unwrap();
    assert!(r.next_sequences(0, 1).is_err());
    let config = CntkEpoch {
        workers: 2,
        rank: 2,
        ..CntkEpoch::default()
    };
    assert!(r.start_epoch(config).is_err());
    let config = CntkEpoch {
        size: CntkEpochSize::Samples(u64::MAX),
        ..CntkEpoch::default()
    };
    assert!(r.start_epoch(config).is_err());
    // A window of 2^32 chunks wraps in CNTK's 32-bit arithmetic to an empty window.
    assert!(CntkRandomizer::new(mock(3, 1, 1), CntkWindow::Chunks(1 << 32), 0).is_err());
}
