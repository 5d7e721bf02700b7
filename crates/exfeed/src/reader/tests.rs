//! Tests of the engine on in-memory sources.

use super::elastic;
use super::packing::SHARE_FROM_BYTES;
use super::plan::SweepPlan;
use super::*;
use crate::error::ErrorKind;
use crate::options::{ChunkSize, ReadOptions};
use crate::source::{CtfSource, CtfSourceOptions, IndexMode, JoinedSource, MemorySource};
use crate::stream::Storage;
use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};

fn specs() -> Vec<StreamSpec> {
    vec![
        StreamSpec::new("features", Storage::Dense, 2),
        StreamSpec::new("labels", Storage::Sparse, 100),
    ]
}

/// Sequence `k` has `lens[k]` samples in both streams; dense sample `i` is `[k, i]`, sparse
/// sample `i` is `{k % 100: i}`.
fn batch_of(lens: &[usize]) -> SequenceBatch<f32> {
    let mut b = SequenceBatch::new(&specs());
    for (k, &len) in lens.iter().enumerate() {
        for i in 0..len {
            b.stream_mut(0).push_dense_sample(&[k as f32, i as f32]);
            b.stream_mut(1)
                .push_sparse_sample(&[(k % 100) as u32], &[i as f32]);
        }
        b.finish_sequence(k as u64);
    }
    b
}

fn lens(n: usize) -> Vec<usize> {
    (0..n).map(|k| 1 + (k * 7 + 3) % 5).collect()
}

fn source(n: usize, per_chunk: usize) -> Arc<MemorySource<f32>> {
    Arc::new(MemorySource::from_batch(
        specs(),
        &batch_of(&lens(n)),
        per_chunk,
    ))
}

fn opts() -> ReaderOptions {
    ReaderOptions {
        randomize: true,
        seed: 3,
        window: Window::Chunks(2),
        limit: EpochLimit::Sweeps(1),
        threads: 2,
        prefetch_chunks: 2,
        ..ReaderOptions::default()
    }
}

/// Reads to the end; returns the minibatches' sequences and their JSON lines.
fn read_all(
    src: Arc<dyn ChunkSource<f32>>,
    o: ReaderOptions,
    size: usize,
) -> (Vec<Vec<SequenceInfo>>, Vec<String>) {
    let mut r = Reader::new(src, o).unwrap();
    drain(&mut r, size)
}

fn drain(r: &mut Reader<f32>, size: usize) -> (Vec<Vec<SequenceInfo>>, Vec<String>) {
    let mut mb = r.new_minibatch();
    let (mut seqs, mut lines) = (Vec::new(), Vec::new());
    while r.next_minibatch(size, &mut mb).unwrap() {
        check_data(&mb);
        seqs.push(mb.sequences.clone());
        let mut line = Vec::new();
        write_minibatch_json(&mut line, &mb);
        lines.push(String::from_utf8(line).unwrap());
        assert!(seqs.len() < 100_000, "runaway reader");
    }
    assert!(mb.is_empty());
    assert!(!r.next_minibatch(size, &mut mb).unwrap(), "stays done");
    (seqs, lines)
}

/// The data columns match the sequence list (the right sequences were copied whole).
fn check_data(mb: &Minibatch<f32>) {
    assert_eq!(
        mb.data.keys(),
        mb.sequences.iter().map(|s| s.key).collect::<Vec<_>>()
    );
    assert_eq!(
        mb.samples,
        mb.sequences.iter().map(|s| s.samples).sum::<usize>()
    );
    let dense = &mb.data.streams()[0];
    let sparse = &mb.data.streams()[1];
    for (i, s) in mb.sequences.iter().enumerate() {
        let r = dense.sequence_samples(i);
        assert_eq!(r.len(), s.samples);
        for (j, sample) in r.enumerate() {
            assert_eq!(dense.dense_sample(sample), &[s.key as f32, j as f32]);
        }
        for (j, sample) in sparse.sequence_samples(i).enumerate() {
            assert_eq!(
                sparse.sparse_sample(sample),
                (&[(s.key % 100) as u32][..], &[j as f32][..])
            );
        }
    }
}

fn flat(seqs: &[Vec<SequenceInfo>]) -> Vec<(u64, u64)> {
    seqs.iter().flatten().map(|s| (s.sweep, s.key)).collect()
}

fn sweep_keys(seqs: &[Vec<SequenceInfo>], sweep: u64) -> Vec<u64> {
    flat(seqs)
        .into_iter()
        .filter(|&(s, _)| s == sweep)
        .map(|(_, k)| k)
        .collect()
}

#[test]
fn every_sweep_is_a_new_permutation() {
    let n = 103;
    let o = ReaderOptions {
        limit: EpochLimit::Sweeps(3),
        ..opts()
    };
    let (seqs, _) = read_all(source(n, 7), o, 9);
    let mut orders = Vec::new();
    for sweep in 0..3 {
        let keys = sweep_keys(&seqs, sweep);
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..n as u64).collect::<Vec<_>>(), "sweep {sweep}");
        assert_ne!(keys, sorted, "sweep {sweep} is shuffled");
        orders.push(keys);
    }
    assert_ne!(orders[0], orders[1]);
    assert_ne!(orders[1], orders[2]);
    // Sweeps come one after the other.
    let sweeps: Vec<u64> = flat(&seqs).iter().map(|x| x.0).collect();
    assert!(sweeps.windows(2).all(|w| w[0] <= w[1]));
}

#[test]
fn same_seed_same_order_whatever_the_threads() {
    let o = ReaderOptions {
        limit: EpochLimit::Sweeps(2),
        ..opts()
    };
    let (_, a) = read_all(source(80, 5), o.clone(), 6);
    let (_, b) = read_all(
        source(80, 5),
        ReaderOptions {
            threads: 0,
            prefetch_chunks: 1,
            ..o.clone()
        },
        6,
    );
    let (_, c) = read_all(
        source(80, 5),
        ReaderOptions {
            threads: 3,
            prefetch_chunks: 9,
            ..o.clone()
        },
        6,
    );
    assert_eq!(a, b);
    assert_eq!(a, c);
    let (_, d) = read_all(source(80, 5), ReaderOptions { seed: 4, ..o }, 6);
    assert_ne!(a, d);
}

#[test]
fn sweep_seed_is_seed_plus_sweep() {
    let o = ReaderOptions {
        limit: EpochLimit::Sweeps(2),
        seed: 10,
        ..opts()
    };
    let (two, _) = read_all(source(60, 4), o.clone(), 5);
    let (one, _) = read_all(
        source(60, 4),
        ReaderOptions {
            seed: 11,
            limit: EpochLimit::Sweeps(1),
            ..o
        },
        5,
    );
    assert_eq!(sweep_keys(&two, 1), sweep_keys(&one, 0));
}

#[test]
fn without_randomize_file_order() {
    let o = ReaderOptions {
        randomize: false,
        limit: EpochLimit::Sweeps(2),
        ..opts()
    };
    let (seqs, _) = read_all(source(50, 6), o, 8);
    let want: Vec<u64> = (0..50).collect();
    assert_eq!(sweep_keys(&seqs, 0), want);
    assert_eq!(sweep_keys(&seqs, 1), want);
}

#[test]
fn sequences_stay_within_their_window() {
    let per_chunk = 4;
    let src = source(90, per_chunk);
    for window in [
        Window::Chunks(1),
        Window::Chunks(3),
        Window::Samples(25),
        Window::Bytes(300),
        Window::All,
    ] {
        let o = ReaderOptions {
            window,
            limit: EpochLimit::Sweeps(2),
            ..opts()
        };
        let (seqs, _) = read_all(src.clone(), o.clone(), 7);
        for sweep in 0..2 {
            let keys = sweep_keys(&seqs, sweep);
            let plan = SweepPlan::new(src.chunks(), true, o.seed, sweep, window, 1, 0);
            let mut at = 0;
            for w in 0..plan.windows.len() {
                let chunks: BTreeSet<usize> = plan.window_chunks(w).iter().copied().collect();
                let n: usize = chunks.iter().map(|&c| src.chunks()[c].sequences).sum();
                let got: BTreeSet<usize> = keys[at..at + n]
                    .iter()
                    .map(|&k| k as usize / per_chunk)
                    .collect();
                assert_eq!(got, chunks, "{window:?} sweep {sweep} window {w}");
                at += n;
            }
            assert_eq!(at, keys.len());
            if let Window::Samples(min) = window {
                // Every window but the last holds at least `min` samples.
                for w in 0..plan.windows.len() - 1 {
                    let s: u64 = plan
                        .window_chunks(w)
                        .iter()
                        .map(|&c| src.chunks()[c].samples)
                        .sum();
                    assert!(s >= min);
                }
            }
        }
    }
}

/// A source that logs which chunks were read, each read taking at least `delay`.
struct Logged {
    inner: Arc<MemorySource<f32>>,
    log: Mutex<Vec<usize>>,
    delay: std::time::Duration,
}

impl ChunkSource<f32> for Logged {
    fn streams(&self) -> &[StreamSpec] {
        self.inner.streams()
    }
    fn chunks(&self) -> &[ChunkInfo] {
        self.inner.chunks()
    }
    fn read_chunk(&self, chunk: usize, out: &mut SequenceBatch<f32>) -> crate::error::Result<()> {
        self.log.lock().unwrap().push(chunk);
        std::thread::sleep(self.delay);
        self.inner.read_chunk(chunk, out)
    }
}

#[test]
fn workers_parts_are_disjoint_and_complete() {
    let n = 97;
    for workers in 1..=4 {
        for randomize in [true, false] {
            let mut all_keys = vec![Vec::new(); 2];
            let mut read_chunks = Vec::new();
            for rank in 0..workers {
                let src = Arc::new(Logged {
                    inner: source(n, 5),
                    log: Mutex::new(Vec::new()),
                    delay: std::time::Duration::ZERO,
                });
                let o = ReaderOptions {
                    randomize,
                    num_workers: workers,
                    worker_rank: rank,
                    limit: EpochLimit::Sweeps(2),
                    ..opts()
                };
                let (seqs, _) = read_all(src.clone(), o, 11);
                for sweep in 0..2 {
                    all_keys[sweep as usize].extend(sweep_keys(&seqs, sweep));
                }
                // Each worker reads each of its chunks once a sweep, and only its own. The pool's
                // threads may log a chunk of the second sweep before the last of the first, so
                // the log is compared as a whole with both sweeps' plans, sorted.
                let plan = |sweep| {
                    SweepPlan::new(
                        src.chunks(),
                        randomize,
                        3,
                        sweep,
                        Window::Chunks(2),
                        workers,
                        rank,
                    )
                    .chunks
                };
                let mut log = src.log.lock().unwrap().clone();
                let mut planned = plan(0);
                planned.extend(plan(1));
                log.sort_unstable();
                planned.sort_unstable();
                assert_eq!(log, planned, "{workers} workers, rank {rank}");
                let first_sweep: HashSet<usize> = plan(0).into_iter().collect();
                read_chunks.push(first_sweep);
            }
            for keys in &mut all_keys {
                keys.sort_unstable();
                assert_eq!(
                    *keys,
                    (0..n as u64).collect::<Vec<_>>(),
                    "{workers} workers"
                );
            }
            let total: usize = read_chunks.iter().map(|s| s.len()).sum();
            let union: HashSet<usize> = read_chunks.into_iter().flatten().collect();
            assert_eq!((total, union.len()), (20, 20));
        }
    }
}

#[test]
fn restored_reader_continues_exactly() {
    let configs = [
        (
            ReaderOptions {
                with_replacement: true,
                limit: EpochLimit::Sweeps(2),
                ..opts()
            },
            8,
        ),
        (
            ReaderOptions {
                limit: EpochLimit::Sweeps(3),
                ..opts()
            },
            10,
        ),
        (
            ReaderOptions {
                limit: EpochLimit::Sweeps(2),
                num_workers: 3,
                worker_rank: 1,
                ..opts()
            },
            4,
        ),
        (
            ReaderOptions {
                limit: EpochLimit::Samples(500),
                window: Window::Samples(30),
                ..opts()
            },
            13,
        ),
        (
            ReaderOptions {
                randomize: false,
                limit: EpochLimit::Sweeps(2),
                threads: 0,
                ..opts()
            },
            25,
        ),
    ];
    for (o, size) in configs {
        let src = source(70, 6);
        let mut r = Reader::new(src.clone(), o.clone()).unwrap();
        let mut mb = r.new_minibatch();
        let mut states = vec![serde_json::to_string(&r.state()).unwrap()];
        let mut lines = Vec::new();
        while r.next_minibatch(size, &mut mb).unwrap() {
            let mut line = Vec::new();
            write_minibatch_json(&mut line, &mb);
            lines.push(String::from_utf8(line).unwrap());
            states.push(serde_json::to_string(&r.state()).unwrap());
        }
        assert!(lines.len() > 5);
        for (k, state) in states.iter().enumerate() {
            let state: ReaderState = serde_json::from_str(state).unwrap();
            assert_eq!(state.minibatches, k as u64);
            // Restore into a reader with other threads/prefetch: same continuation.
            let o2 = ReaderOptions {
                threads: 1,
                prefetch_chunks: 1,
                ..o.clone()
            };
            let mut r2 = Reader::restore(src.clone(), o2, &state).unwrap();
            let (_, rest) = drain(&mut r2, size);
            assert_eq!(rest, lines[k..], "{o:?} resumed after minibatch {k}");
        }
    }
}

#[test]
fn restore_refuses_an_incompatible_state() {
    let src = source(30, 5);
    let state = Reader::new(src.clone(), opts()).unwrap().state();
    let err = Reader::restore(src.clone(), ReaderOptions { seed: 9, ..opts() }, &state)
        .err()
        .unwrap();
    assert_eq!(err.kind(), ErrorKind::Config);
    assert!(
        err.message().contains("randomizationSeed was 3, is 9"),
        "{err}"
    );
    let err = Reader::restore(source(31, 5), opts(), &state)
        .err()
        .unwrap();
    assert!(err.message().contains("number of samples"), "{err}");
}

fn fixed_source(lens: &[usize], per_chunk: usize) -> Arc<MemorySource<f32>> {
    Arc::new(MemorySource::from_batch(
        specs(),
        &batch_of(lens),
        per_chunk,
    ))
}

fn sizes(seqs: &[Vec<SequenceInfo>]) -> Vec<Vec<usize>> {
    seqs.iter()
        .map(|m| m.iter().map(|s| s.samples).collect())
        .collect()
}

#[test]
fn minibatches_take_whole_sequences_up_to_the_size() {
    let src = fixed_source(&[3, 1, 4, 1, 5, 9, 2, 6], 3);
    let o = ReaderOptions {
        randomize: false,
        ..opts()
    };
    let (seqs, lines) = read_all(src.clone(), o.clone(), 5);
    // The first sequence is always taken, even when larger than the size.
    assert_eq!(
        sizes(&seqs),
        vec![vec![3, 1], vec![4, 1], vec![5], vec![9], vec![2], vec![6]]
    );
    assert_eq!(lines[5], "{\"end_of_sweep\":true,\"samples\":6,\"sequences\":[{\"sweep\":0,\"key\":7,\"samples\":6}]}\n");
    assert!(lines[..5]
        .iter()
        .all(|l| l.starts_with("{\"end_of_sweep\":false,")));
    // Size 0 or 1: one sequence each.
    assert_eq!(read_all(src.clone(), o.clone(), 0).0.len(), 8);
    // A minibatch spans the sweep boundary and says so.
    let o2 = ReaderOptions {
        limit: EpochLimit::Sweeps(2),
        ..o
    };
    let (seqs, _) = read_all(src, o2.clone(), 12);
    let spanning: Vec<_> = seqs
        .iter()
        .filter(|m| m.first().unwrap().sweep == 0 && m.last().unwrap().sweep == 1)
        .collect();
    assert_eq!(spanning.len(), 1);
    assert_eq!(flat(&seqs).len(), 16);
    let mut r = Reader::new(fixed_source(&[3, 1, 4, 1, 5, 9, 2, 6], 3), o2).unwrap();
    let mut mb = r.new_minibatch();
    let mut flags = Vec::new();
    while r.next_minibatch(12, &mut mb).unwrap() {
        let has_last_of_sweep = mb.sequences.windows(2).any(|w| w[0].sweep != w[1].sweep)
            || mb.sequences.last().unwrap().key == 7;
        flags.push((mb.end_of_sweep, has_last_of_sweep));
    }
    assert!(flags.iter().all(|&(a, b)| a == b), "{flags:?}");
}

#[test]
fn defines_mb_size_counts_one_stream() {
    // Stream "labels" has one sample per sequence, "features" has lens[k].
    let mut specs = specs();
    specs[1].defines_mb_size = true;
    let mut b = SequenceBatch::<f32>::new(&specs);
    for (k, len) in [4usize, 4, 4, 4, 4].into_iter().enumerate() {
        for i in 0..len {
            b.stream_mut(0).push_dense_sample(&[k as f32, i as f32]);
        }
        b.stream_mut(1).push_sparse_sample(&[1], &[1.0]);
        b.finish_sequence(k as u64);
    }
    let src = Arc::new(MemorySource::from_batch(specs, &b, 2));
    assert_eq!(src.chunks()[0].samples, 2);
    let o = ReaderOptions {
        randomize: false,
        ..opts()
    };
    let (seqs, _) = read_all_unchecked(src, o, 2);
    assert_eq!(sizes(&seqs), vec![vec![1, 1], vec![1, 1], vec![1]]);
}

fn read_all_unchecked(
    src: Arc<dyn ChunkSource<f32>>,
    o: ReaderOptions,
    size: usize,
) -> (Vec<Vec<SequenceInfo>>, usize) {
    let mut r = Reader::new(src, o).unwrap();
    let mut mb = r.new_minibatch();
    let mut seqs = Vec::new();
    let mut samples = 0;
    while r.next_minibatch(size, &mut mb).unwrap() {
        seqs.push(mb.sequences.clone());
        samples += mb.data.streams()[0].num_samples();
    }
    (seqs, samples)
}

#[test]
fn max_samples_ends_the_epoch() {
    let o = ReaderOptions {
        limit: EpochLimit::Samples(200),
        ..opts()
    };
    let (seqs, _) = read_all(source(40, 4), o, 16);
    let total: usize = seqs.iter().flatten().map(|s| s.samples).sum();
    // 40 sequences hold 120 samples: the epoch runs into the second sweep and stops at 200,
    // passing it by less than one sequence (at most 5 samples) only if a minibatch's first
    // sequence is longer than what is left.
    assert_eq!(lens(40).iter().sum::<usize>(), 120);
    assert!((200..205).contains(&total), "{total}");
    assert!(seqs
        .iter()
        .all(|m| m.iter().map(|s| s.samples).sum::<usize>() <= 16));
    assert_eq!(seqs.last().unwrap().last().unwrap().sweep, 1);
}

#[test]
fn frame_mode() {
    let src = fixed_source(&[1; 30], 4);
    let o = ReaderOptions {
        frame_mode: true,
        window: Window::All,
        ..opts()
    };
    let (seqs, _) = read_all(src, o.clone(), 8);
    assert_eq!(
        sizes(&seqs).iter().map(|m| m.len()).collect::<Vec<_>>(),
        vec![8, 8, 8, 6]
    );
    let mut keys: Vec<u64> = flat(&seqs).iter().map(|x| x.1).collect();
    assert_ne!(keys, (0..30).collect::<Vec<_>>());
    keys.sort_unstable();
    assert_eq!(keys, (0..30).collect::<Vec<_>>());

    let mut lens = vec![1; 30];
    lens[13] = 3;
    let mut r = Reader::new(fixed_source(&lens, 4), o).unwrap();
    let mut mb = r.new_minibatch();
    let err = loop {
        match r.next_minibatch(8, &mut mb) {
            Ok(true) => {}
            Ok(false) => panic!("no error"),
            Err(e) => break e,
        }
    };
    assert_eq!(err.kind(), ErrorKind::Invalid);
    assert_eq!(
        err.to_string(),
        "chunk 3, input 'features': frameMode: sequence 13 has 3 samples; in frame mode every sequence must have exactly one sample"
    );
    assert!(r.next_minibatch(8, &mut mb).is_err(), "stays failed");
}

#[test]
fn decoded_chunks_are_bounded_by_the_window() {
    for (window, prefetch) in [(1, 1), (2, 1), (3, 2), (4, 4)] {
        let src = source(200, 3);
        let o = ReaderOptions {
            window: Window::Chunks(window),
            prefetch_chunks: prefetch,
            limit: EpochLimit::Sweeps(2),
            ..opts()
        };
        let mut r = Reader::new(src.clone(), o).unwrap();
        let mut mb = r.new_minibatch();
        while r.next_minibatch(10, &mut mb).unwrap() {
            assert!(r.peak_chunks_held() <= window + prefetch);
        }
        assert!(r.peak_chunks_held() >= window);
        // Every chunk decoded once a sweep, nothing beyond the epoch.
        assert_eq!(r.chunks_read(), 2 * src.chunks().len() as u64);
        assert_eq!(src.reads(), 2 * src.chunks().len());
    }
}

#[test]
fn a_window_in_bytes_bounds_the_bytes_held_whatever_the_chunk_size() {
    // Chunks of 3 to 16 sequences, 12 to 60 bytes each: about 100 to 600 bytes a chunk.
    for (per_chunk, most) in [(3, 1000), (8, 1000), (16, 1000), (16, 100)] {
        let src = source(300, per_chunk);
        let largest = src.chunks().iter().map(|c| c.bytes).max().unwrap();
        let o = ReaderOptions {
            window: Window::Bytes(most),
            threads: 4,
            prefetch_chunks: ReaderOptions::prefetch_for(4),
            limit: EpochLimit::Sweeps(2),
            ..opts()
        };
        let plan = SweepPlan::new(src.chunks(), true, o.seed, 0, o.window, 1, 0);
        for w in 0..plan.windows.len() {
            let chunks = plan.window_chunks(w);
            let bytes: u64 = chunks.iter().map(|&c| src.chunks()[c].bytes).sum();
            // The first window of a sweep takes a quarter of the bytes.
            let limit = if w == 0 { most / 4 } else { most };
            assert!(
                bytes <= limit || chunks.len() == 1,
                "{chunks:?}: {bytes} bytes"
            );
            let next = plan.chunks.get(plan.windows[w].end);
            let fuller = next.map_or(0, |&c| bytes + src.chunks()[c].bytes);
            assert!(
                next.is_none() || fuller > limit,
                "window {w} could take one more"
            );
        }
        let bound = most.max(largest);
        let mut r = Reader::new(src.clone(), o).unwrap();
        // Decoding ahead: no more of the largest chunks than fit in the window, at least one.
        let ahead = (most / largest).clamp(1, 8) as usize;
        assert_eq!(r.options().prefetch_chunks, ahead, "{per_chunk} a chunk");
        let mut mb = r.new_minibatch();
        let (mut keys, mut widest) = (Vec::new(), 0);
        while r.next_minibatch(10, &mut mb).unwrap() {
            widest = widest.max(r.stats().window_bytes);
            keys.extend(mb.sequences.iter().map(|s| s.key));
        }
        assert!(widest > 0 && widest <= bound, "{widest} over {bound}");
        let stats = r.stats();
        assert!(
            stats.peak_bytes_held <= 2 * bound,
            "{per_chunk}: {stats:?} over {bound}"
        );
        assert!(stats.peak_bytes_held >= most.min(largest), "{stats:?}");
        keys.sort_unstable();
        let want: Vec<u64> = (0..300).flat_map(|k| [k, k]).collect();
        assert_eq!(keys, want, "every sequence once a sweep");
    }
    let o = ReaderOptions {
        window: Window::Bytes(0),
        ..opts()
    };
    let err = Reader::new(source(8, 4), o).err().unwrap();
    assert_eq!(
        err.message(),
        "randomizationWindowInBytes must be at least 1 byte"
    );
}

#[test]
fn empty_data_and_idle_workers_end_at_once() {
    let src = fixed_source(&[], 4);
    let (seqs, _) = read_all(src, opts(), 5);
    assert!(seqs.is_empty());
    // Two chunks, three workers: rank 2 owns nothing, whatever the limit.
    let src = source(8, 4);
    let o = ReaderOptions {
        num_workers: 3,
        worker_rank: 2,
        limit: EpochLimit::Unlimited,
        ..opts()
    };
    assert!(read_all(src, o, 5).0.is_empty());
    // Sequences of zero samples with a sample limit: no endless loop.
    let src = fixed_source(&[0, 0, 0], 2);
    let o = ReaderOptions {
        limit: EpochLimit::Samples(10),
        ..opts()
    };
    let (seqs, _) = read_all_unchecked(src, o, 5);
    assert_eq!(seqs.iter().map(|m| m.len()).sum::<usize>(), 3);
}

#[test]
fn bad_options_are_config_errors() {
    let src = source(8, 4);
    for (o, want) in [
        (
            ReaderOptions {
                num_workers: 2,
                worker_rank: 2,
                ..opts()
            },
            "worker_rank 2 is out of range for 2 workers",
        ),
        (
            ReaderOptions {
                num_workers: 0,
                ..opts()
            },
            "num_workers must be at least 1",
        ),
        (
            ReaderOptions {
                window: Window::Chunks(0),
                ..opts()
            },
            "randomizationWindow must be a positive integer",
        ),
        (
            ReaderOptions {
                limit: EpochLimit::Samples(0),
                ..opts()
            },
            "must be positive",
        ),
    ] {
        let err = Reader::new(src.clone(), o).err().unwrap();
        assert_eq!(err.kind(), ErrorKind::Config);
        assert!(err.message().contains(want), "{err}");
    }
}

/// A source whose decoder fails on one chunk.
struct Failing(Arc<MemorySource<f32>>);

impl ChunkSource<f32> for Failing {
    fn streams(&self) -> &[StreamSpec] {
        self.0.streams()
    }
    fn chunks(&self) -> &[ChunkInfo] {
        self.0.chunks()
    }
    fn read_chunk(&self, chunk: usize, out: &mut SequenceBatch<f32>) -> crate::error::Result<()> {
        if chunk == 2 {
            return Err(crate::error::Error::syntax(77, "bad number").in_file("x.ctf"));
        }
        self.0.read_chunk(chunk, out)
    }
}

#[test]
fn decoder_errors_reach_the_caller() {
    for threads in [0, 2] {
        let o = ReaderOptions {
            randomize: false,
            threads,
            ..opts()
        };
        let mut r = Reader::new(Arc::new(Failing(source(20, 4))), o).unwrap();
        let mut mb = r.new_minibatch();
        let mut ok = 0;
        let err = loop {
            match r.next_minibatch(4, &mut mb) {
                Ok(true) => ok += 1,
                Ok(false) => panic!("no error"),
                Err(e) => break e,
            }
        };
        assert!(ok >= 1);
        assert_eq!(err.to_string(), "x.ctf (byte 77): bad number");
    }
}

#[test]
fn reader_is_send() {
    fn send<X: Send>() {}
    send::<Reader<f32>>();
    send::<Reader<f64>>();
}

#[test]
fn extending_the_limit_continues_the_same_stream() {
    let o = ReaderOptions {
        limit: EpochLimit::Sweeps(3),
        ..opts()
    };
    let (_, whole) = read_all(source(40, 3), o.clone(), 7);
    let mut r = Reader::new(
        source(40, 3),
        ReaderOptions {
            limit: EpochLimit::Sweeps(1),
            ..o
        },
    )
    .unwrap();
    let (_, mut parts) = drain(&mut r, 7);
    r.set_limit(EpochLimit::Sweeps(3)).unwrap();
    parts.extend(drain(&mut r, 7).1);
    assert_eq!(parts, whole);
}

#[test]
fn state_json_round_trip_and_garbage() {
    let r = Reader::new(source(10, 3), opts()).unwrap();
    let s = r.state();
    assert_eq!(ReaderState::from_json(&s.to_json()).unwrap(), s);
    let err = ReaderState::from_json("{\"sweep\": 1}").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
    // Hostile positions: an error or a clean end, never a panic.
    let o = ReaderOptions {
        limit: EpochLimit::Unlimited,
        ..opts()
    };
    let far = ReaderState {
        sweep: u64::MAX,
        samples_delivered: u64::MAX - 1,
        minibatches: u64::MAX,
        ..s.clone()
    };
    let mut r = Reader::restore(source(10, 3), o.clone(), &far).unwrap();
    let (seqs, _) = drain(&mut r, 4);
    assert!(!seqs.is_empty());
    assert!(seqs.iter().all(|m| m.iter().all(|x| x.sweep == u64::MAX)));
    let bad_window = ReaderState {
        window: usize::MAX,
        ..s.clone()
    };
    assert!(Reader::restore(source(10, 3), o.clone(), &bad_window).is_err());
    let bad_offset = ReaderState {
        offset: 1 << 40,
        ..s.clone()
    };
    let mut r = Reader::restore(source(10, 3), o, &bad_offset).unwrap();
    let mut mb = r.new_minibatch();
    assert_eq!(
        r.next_minibatch(4, &mut mb).unwrap_err().kind(),
        ErrorKind::Config
    );
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn window() -> impl Strategy<Value = Window> {
        prop_oneof![
            (1usize..5).prop_map(Window::Chunks),
            (1u64..40).prop_map(Window::Samples),
            (1u64..400).prop_map(Window::Bytes),
            Just(Window::All)
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// Any configuration: every sweep, the workers' parts together are a permutation of all
        /// sequences; and every worker resumes exactly from a state saved at minibatch `k`.
        #[test]
        fn parts_and_resume(
            n in 0usize..60,
            per_chunk in 1usize..8,
            window in window(),
            workers in 1usize..4,
            seed in any::<u64>(),
            randomize in any::<bool>(),
            size in 0usize..12,
            k in 0usize..40,
        ) {
            let src = source(n, per_chunk);
            let mut per_sweep = vec![Vec::new(); 2];
            for rank in 0..workers {
                let o = ReaderOptions {
                    randomize, seed, window, num_workers: workers, worker_rank: rank,
                    limit: EpochLimit::Sweeps(2), threads: 1, prefetch_chunks: 2, ..ReaderOptions::default()
                };
                let mut r = Reader::new(src.clone(), o.clone()).unwrap();
                let mut mb = r.new_minibatch();
                let mut lines = Vec::new();
                let mut saved = None;
                loop {
                    if lines.len() == k {
                        saved = Some(r.state().to_json());
                    }
                    if !r.next_minibatch(size, &mut mb).unwrap() {
                        break;
                    }
                    for s in &mb.sequences {
                        per_sweep[s.sweep as usize].push(s.key);
                    }
                    let mut line = Vec::new();
                    write_minibatch_json(&mut line, &mb);
                    lines.push(String::from_utf8(line).unwrap());
                }
                if let Some(saved) = saved {
                    let state = ReaderState::from_json(&saved).unwrap();
                    let mut r2 = Reader::restore(src.clone(), ReaderOptions { threads: 0, ..o }, &state).unwrap();
                    let (_, rest) = drain(&mut r2, size);
                    prop_assert_eq!(&rest[..], &lines[k..]);
                }
            }
            for keys in &mut per_sweep {
                keys.sort_unstable();
                prop_assert_eq!(&keys[..], &(0..n as u64).collect::<Vec<_>>()[..]);
            }
        }

        /// Any configuration, old workers stopped anywhere, any new count: over the old and
        /// the new workers every sweep is every sequence once, and the sweeps no old worker
        /// had begun are a fresh reader's.
        #[test]
        fn resume_on_any_count(
            n in 0usize..60,
            per_chunk in 1usize..8,
            window in window(),
            seed in any::<u64>(),
            randomize in any::<bool>(),
            stops in prop::collection::vec(0u64..40, 1..5),
            then in prop::collection::vec(prop::option::of(0u64..40), 1..5),
            new in 1usize..5,
        ) {
            let src = source(n, per_chunk);
            let options = ReaderOptions {
                randomize, seed, window, limit: EpochLimit::Sweeps(3), threads: 1, ..opts()
            };
            // Stopped anywhere, resumed on `then` workers stopped anywhere again, then on `new`.
            let stops: Vec<Option<u64>> = stops.into_iter().map(Some).collect();
            let (first, states) = elastic_phase(&src, &options, &[], &stops);
            let (second, states) = elastic_phase(&src, &options, &states, &then);
            // (On the same count each worker goes on with its own plan: tested elsewhere.)
            let end = first_fresh_sweep(&states, (new, None), u64::MAX);
            let (resumed, _) = elastic_phase(&src, &options, &states, &vec![None; new]);
            for (rank, got) in resumed.iter().enumerate() {
                let o = ReaderOptions { num_workers: new, worker_rank: rank, ..options.clone() };
                let fresh = flat(&read_all(src.clone(), o, 4).0);
                let later = |v: &[(u64, u64)]| -> Vec<(u64, u64)> {
                    v.iter().filter(|(s, _)| *s >= end).copied().collect()
                };
                prop_assert_eq!(later(got), later(&fresh));
            }
            let all: Vec<(u64, u64)> = first.into_iter().chain(second).chain(resumed).flatten().collect();
            for sweep in 0..3 {
                let mut keys: Vec<u64> =
                    all.iter().filter(|(s, _)| *s == sweep).map(|(_, k)| *k).collect();
                keys.sort_unstable();
                prop_assert_eq!(&keys[..], &(0..n as u64).collect::<Vec<_>>()[..]);
            }
        }
    }
}

/// A source whose reads wait (up to a generous deadline) for a second read to run beside them,
/// recording the most reads seen running at once.
struct Concurrent {
    inner: Arc<MemorySource<f32>>,
    state: Mutex<(usize, usize)>, // (running, most running)
    cv: std::sync::Condvar,
}

impl ChunkSource<f32> for Concurrent {
    fn streams(&self) -> &[StreamSpec] {
        self.inner.streams()
    }
    fn chunks(&self) -> &[ChunkInfo] {
        self.inner.chunks()
    }
    fn read_chunk(&self, chunk: usize, out: &mut SequenceBatch<f32>) -> crate::error::Result<()> {
        let mut st = self.state.lock().unwrap();
        st.0 += 1;
        st.1 = st.1.max(st.0);
        self.cv.notify_all();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while st.1 < 2 && std::time::Instant::now() < deadline {
            st = self
                .cv
                .wait_timeout(st, std::time::Duration::from_millis(50))
                .unwrap()
                .0;
        }
        st.0 -= 1;
        drop(st);
        self.inner.read_chunk(chunk, out)
    }
}

#[test]
fn chunks_are_decoded_in_parallel_ahead_of_the_consumer() {
    let src = Arc::new(Concurrent {
        inner: source(40, 4),
        state: Mutex::new((0, 0)),
        cv: std::sync::Condvar::new(),
    });
    let o = ReaderOptions {
        threads: 2,
        prefetch_chunks: 2,
        ..opts()
    };
    let (seqs, _) = read_all(src.clone(), o.clone(), 5);
    assert_eq!(
        src.state.lock().unwrap().1,
        2,
        "two chunk reads ran at once"
    );
    // And the order is the one a single-threaded reader gives.
    let (single, _) = read_all(source(40, 4), ReaderOptions { threads: 0, ..o }, 5);
    assert_eq!(flat(&seqs), flat(&single));
}

#[test]
fn run_stops_after_and_resumes_like_the_cli() {
    let o = ReaderOptions {
        limit: EpochLimit::Sweeps(2),
        ..opts()
    };
    let (_, whole) = read_all(source(30, 4), o.clone(), 6);
    let mut lines = Vec::new();
    let mut r = Reader::new(source(30, 4), o.clone()).unwrap();
    let first = r
        .run(6, Some(5), |mb| {
            let mut l = Vec::new();
            write_minibatch_json(&mut l, mb);
            lines.push(String::from_utf8(l).unwrap());
            Ok(())
        })
        .unwrap();
    assert_eq!((first.minibatches, first.finished), (5, false));
    let saved = r.state().to_json();
    let mut r2 =
        Reader::restore(source(30, 4), o, &ReaderState::from_json(&saved).unwrap()).unwrap();
    let rest = r2
        .run(6, None, |mb| {
            let mut l = Vec::new();
            write_minibatch_json(&mut l, mb);
            lines.push(String::from_utf8(l).unwrap());
            Ok(())
        })
        .unwrap();
    assert!(rest.finished);
    assert_eq!(lines, whole);
    assert_eq!(first.sweeps_ended + rest.sweeps_ended, 2);
    assert_eq!(first.sequences + rest.sequences, 60);
    assert_eq!(
        first.samples + rest.samples,
        2 * lens(30).iter().sum::<usize>() as u64
    );
}

#[test]
fn joined_sources_meet_by_key() {
    // Primary: features of keys 0..20 except 5, chunks of 3. Secondary: labels of keys 19..=0
    // (reverse order) except 7, plus 100, chunks of 4.
    let fspec = vec![StreamSpec::new("features", Storage::Dense, 2)];
    let mut f = SequenceBatch::<f32>::new(&fspec);
    for k in (0..20u64).filter(|&k| k != 5) {
        for i in 0..(k % 3 + 1) {
            f.stream_mut(0).push_dense_sample(&[k as f32, i as f32]);
        }
        f.finish_sequence(k);
    }
    let lspec = vec![StreamSpec::new("labels", Storage::Sparse, 50)];
    let mut l = SequenceBatch::<f32>::new(&lspec);
    for k in (0..20u64).rev().filter(|&k| k != 7).chain([100]) {
        l.stream_mut(0).push_sparse_sample(&[k as u32 % 50], &[1.0]);
        l.finish_sequence(k);
    }
    let primary: Arc<dyn ChunkSource<f32>> = Arc::new(MemorySource::from_batch(fspec, &f, 3));
    let secondary: Arc<dyn ChunkSource<f32>> = Arc::new(MemorySource::from_batch(lspec, &l, 4));
    let joined = Arc::new(JoinedSource::new(vec![primary, secondary]).unwrap());
    let warnings: Vec<String> = joined.diagnostics().iter().map(|d| d.to_string()).collect();
    assert_eq!(
        warnings,
        vec![
            "warning: sequence 7 is missing from deserializer 1; dropped",
            "warning: sequence 5 of deserializer 1 is missing from deserializer 0; dropped",
            "warning: sequence 100 of deserializer 1 is missing from deserializer 0; dropped",
        ]
    );
    let names: Vec<&str> = joined.streams().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["features", "labels"]);
    assert_eq!(
        joined.chunks().iter().map(|c| c.sequences).sum::<usize>(),
        18
    );

    let o = ReaderOptions {
        limit: EpochLimit::Sweeps(2),
        ..opts()
    };
    let mut r = Reader::new(joined, o).unwrap();
    let mut mb = r.new_minibatch();
    let mut per_sweep = vec![Vec::new(); 2];
    while r.next_minibatch(4, &mut mb).unwrap() {
        for (i, s) in mb.sequences.iter().enumerate() {
            per_sweep[s.sweep as usize].push(s.key);
            let feats = mb.data.streams()[0].sequence_samples(i);
            assert_eq!(feats.len() as u64, s.key % 3 + 1);
            for sample in feats {
                assert_eq!(mb.data.streams()[0].dense_sample(sample)[0], s.key as f32);
            }
            let labels = &mb.data.streams()[1];
            let r = labels.sequence_samples(i);
            assert_eq!(r.len(), 1);
            assert_eq!(labels.sparse_sample(r.start).0, &[s.key as u32 % 50]);
        }
    }
    let want: Vec<u64> = (0..20).filter(|&k| k != 5 && k != 7).collect();
    for keys in &mut per_sweep {
        keys.sort_unstable();
        assert_eq!(*keys, want);
    }
}

#[test]
fn joining_needs_keys_and_unique_names() {
    let a: Arc<dyn ChunkSource<f32>> = source(5, 2);
    let b: Arc<dyn ChunkSource<f32>> = source(5, 2);
    let err = JoinedSource::new(vec![a.clone(), b]).err().unwrap();
    assert_eq!(
        err.message(),
        "input 'features' is defined by more than one deserializer"
    );
    let logged: Arc<dyn ChunkSource<f32>> = Arc::new(Logged {
        inner: source(5, 2),
        log: Mutex::new(Vec::new()),
        delay: std::time::Duration::ZERO,
    });
    let err = JoinedSource::new(vec![logged]).err().unwrap();
    assert!(err.message().contains("cannot be joined by key"), "{err}");
    assert!(JoinedSource::<f32>::new(vec![]).is_err());
}

#[test]
fn joined_ctf_files_with_repeated_ids() {
    let dir = tempfile::tempdir().unwrap();
    let open = |name: &str, text: &str, input: &str| -> Result<Arc<dyn ChunkSource<f32>>> {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let ctf = crate::ctf::CtfOptions {
            inputs: vec![input.parse().unwrap()],
            ..Default::default()
        };
        let options = CtfSourceOptions {
            ctf,
            read: ReadOptions::new()
                .with_chunk_size(ChunkSize::Bytes(16))
                .with_index(IndexMode::Full),
        };
        Ok(Arc::new(CtfSource::open(
            &crate::io::InputPath::new(&path),
            options,
        )?))
    };
    // The primary repeats ids (two files joined with `cat`): each sequence meets its label.
    let features = open("f.ctf", "0 |x 1\n1 |x 2\n0 |x 3\n1 |x 4\n", "x:dense:1").unwrap();
    let labels = open("l.ctf", "0 |y 10\n1 |y 11\n", "y:dense:1").unwrap();
    let joined = JoinedSource::new(vec![features.clone(), labels]).unwrap();
    assert!(joined.diagnostics().is_empty());
    let mut batch = SequenceBatch::new(joined.streams());
    let mut rows = Vec::new();
    for c in 0..joined.chunks().len() {
        batch.clear();
        joined.read_chunk(c, &mut batch).unwrap();
        for (i, &k) in batch.keys().iter().enumerate() {
            let value = |s: usize| {
                batch.streams()[s].dense_sample(batch.streams()[s].sequence_samples(i).start)[0]
            };
            rows.push((k, value(0), value(1)));
        }
    }
    assert_eq!(
        rows,
        [
            (0, 1.0, 10.0),
            (1, 2.0, 11.0),
            (0, 3.0, 10.0),
            (1, 4.0, 11.0)
        ]
    );
    // A repeat in a joined deserializer: which one CNTK would join is unspecified; refused.
    let labels = open("l2.ctf", "0 |y 10\n1 |y 11\n\n0 |y 12\n", "y:dense:1").unwrap();
    let err = JoinedSource::new(vec![features, labels]).err().unwrap();
    let l2 = dir.path().join("l2.ctf").display().to_string();
    assert_eq!(
        err.message(),
        format!(
            "sequence id 0 repeats in deserializer 1, which is joined by key: at {l2}:1 (byte 0) \
             and at {l2}:4 (byte 17) (a joined deserializer needs each id once; only the first \
             deserializer may repeat ids)"
        )
    );
}

#[test]
fn drawing_with_replacement() {
    let n = 60;
    let o = ReaderOptions {
        with_replacement: true,
        window: Window::All,
        limit: EpochLimit::Sweeps(2),
        ..opts()
    };
    let (seqs, a) = read_all(source(n, 7), o.clone(), 9);
    let (_, b) = read_all(
        source(n, 7),
        ReaderOptions {
            threads: 0,
            ..o.clone()
        },
        9,
    );
    assert_eq!(a, b, "deterministic");
    for sweep in 0..2 {
        let keys = sweep_keys(&seqs, sweep);
        assert_eq!(keys.len(), n, "as many draws as sequences");
        let distinct: HashSet<u64> = keys.iter().copied().collect();
        assert!(distinct.len() < n, "with replacement, some repeat");
        assert!(distinct.iter().all(|&k| k < n as u64));
    }
    // Weighted (PROBABILISTIC): weight 0 is never drawn; 3:1 shows in the counts.
    let weights: Vec<f64> = (0..n)
        .map(|k| {
            if k == 4 {
                3.0
            } else if k == 9 {
                1.0
            } else {
                0.0
            }
        })
        .collect();
    let src =
        Arc::new(MemorySource::from_batch(specs(), &batch_of(&lens(n)), 7).with_weights(&weights));
    let o = ReaderOptions {
        limit: EpochLimit::Sweeps(20),
        ..o
    };
    let (seqs, _) = read_all(src, o.clone(), 9);
    let keys: Vec<u64> = flat(&seqs).iter().map(|x| x.1).collect();
    assert_eq!(keys.len(), 20 * n);
    let fours = keys.iter().filter(|&&k| k == 4).count();
    let nines = keys.iter().filter(|&&k| k == 9).count();
    assert_eq!(fours + nines, keys.len());
    assert!(fours > 2 * nines && fours < 4 * nines, "{fours} vs {nines}");
    // Bad frequencies are errors.
    let src =
        Arc::new(MemorySource::from_batch(specs(), &batch_of(&lens(n)), 7).with_weights(&[-1.0]));
    let mut r = Reader::new(src, o).unwrap();
    let mut mb = r.new_minibatch();
    let err = r.next_minibatch(4, &mut mb).unwrap_err();
    assert!(err.message().contains("has frequency -1"), "{err}");
}

#[test]
fn equalize_quota_splits_a_ranks_steps_between_its_parts() {
    // 100 samples, minibatches of 8, 2 ranks: 6 steps a rank; 4 workers: 3 + 3.
    assert_eq!(equalize_quota(100, 8, 2, 2, 1).unwrap(), 6);
    let parts: Vec<u64> = (0..6)
        .map(|w| equalize_quota(100, 8, 6, 2, w).unwrap())
        .collect();
    assert_eq!(parts, [2, 2, 2, 2, 2, 2]);
    // 7 steps a rank over 3 parts: 3, 2, 2 for each rank.
    let parts: Vec<u64> = (0..6)
        .map(|w| equalize_quota(112, 8, 6, 2, w).unwrap())
        .collect();
    assert_eq!(parts, [3, 2, 2, 3, 2, 2]);
    assert_eq!(equalize_quota(3, 8, 4, 4, 0).unwrap(), 1, "at least one");
    assert!(equalize_quota(100, 8, 5, 2, 0).is_err());
}

#[test]
fn equalize_delivers_the_quota_every_sweep_at_any_thread_count() {
    let n = 61;
    let src = source(n, 5);
    let total: u64 = src.chunks().iter().map(|c| c.samples).sum();
    let quota = equalize_quota(total, 6, 3, 3, 0).unwrap();
    for threads in [0, 2] {
        let mut all = Vec::new();
        for rank in 0..3 {
            let o = ReaderOptions {
                num_workers: 3,
                worker_rank: rank,
                equalize: Some(quota),
                limit: EpochLimit::Sweeps(3),
                threads,
                ..opts()
            };
            let mut r = Reader::new(src.clone(), o.clone()).unwrap();
            let (seqs, _) = drain(&mut r, 6);
            assert_eq!(seqs.len() as u64, 3 * quota, "rank {rank}");
            assert_eq!(r.take_notes().len(), 3);
            // Resumed after any minibatch, the rest is the same.
            let mut first = Reader::new(src.clone(), o.clone()).unwrap();
            let mut mb = first.new_minibatch();
            for _ in 0..quota + 1 {
                assert!(first.next_minibatch(6, &mut mb).unwrap());
            }
            let mut rest = Reader::restore(src.clone(), o, &first.state()).unwrap();
            assert_eq!(drain(&mut rest, 6).0, seqs[quota as usize + 1..]);
            all.push(seqs);
        }
        // Every minibatch's sequences come from one sweep's part of its worker.
        for seqs in &all {
            for mb in seqs {
                assert!(mb.iter().all(|s| s.sweep == mb[0].sweep));
            }
        }
    }
}

#[test]
fn stats_count_what_was_decoded_and_waited_for() {
    use std::time::Duration;
    let delay = Duration::from_millis(20);
    {
        for threads in [0, 2] {
            let inner = source(60, 5);
            let chunks = inner.chunks().len() as u64;
            let bytes: u64 = inner.chunks().iter().map(|c| c.bytes).sum();
            assert!(bytes > 0);
            let log = Mutex::default();
            let src = Arc::new(Logged { inner, log, delay });
            let o = ReaderOptions {
                threads,
                limit: EpochLimit::Sweeps(2),
                ..opts()
            };
            let mut r = Reader::new(src, o).unwrap();
            assert_eq!(r.stats().chunks_decoded, 0);
            let mut mb = r.new_minibatch();
            let (mut minibatches, mut samples, mut widest) = (0, 0, 0);
            while r.next_minibatch(16, &mut mb).unwrap() {
                minibatches += 1;
                samples += mb.samples as u64;
                let s = r.stats();
                assert!(s.chunks_held >= s.window_chunks, "{s:?}");
                widest = widest.max(s.window_chunks);
            }
            assert!(widest >= 1);
            let s = r.stats();
            let what = format!("{threads} threads: {s:?}");
            assert_eq!((s.minibatches, s.samples), (minibatches, samples), "{what}");
            assert_eq!(s.chunks_decoded, 2 * chunks, "{what}");
            assert_eq!(s.bytes_decoded, 2 * bytes, "{what}");
            assert!(s.decode_time >= delay * 2 * chunks as u32, "{what}");
            // The consumer waited at least for the first chunk; with no threads it decoded
            // every chunk itself.
            let least = if threads == 0 {
                delay * 2 * chunks as u32
            } else {
                delay
            };
            assert!(s.wait_time >= least && s.wait_time <= s.elapsed, "{what}");
            assert!(
                s.samples_per_second() > 0.0 && s.wait_share() <= 1.0,
                "{what}"
            );
        }
    }
}

#[test]
fn minibatches_of_a_number_of_sequences() {
    // Sequences of 1..=5 samples: a size in sequences takes that many whatever their lengths.
    let src = source(103, 7);
    for workers in [1, 3] {
        let mut all = Vec::new();
        for rank in 0..workers {
            let o = ReaderOptions {
                num_workers: workers,
                worker_rank: rank,
                ..opts()
            };
            let mut r = Reader::new(src.clone(), o).unwrap();
            let mut mb = r.new_minibatch();
            let mut sizes = Vec::new();
            while r
                .next_minibatch(MinibatchSize::Sequences(10), &mut mb)
                .unwrap()
            {
                sizes.push(mb.len());
                check_data(&mb);
                all.extend(mb.sequences.iter().map(|s| s.key));
            }
            let (last, full) = sizes.split_last().unwrap();
            assert!(
                full.iter().all(|&n| n == 10) && (1..=10).contains(last),
                "{sizes:?}"
            );
        }
        all.sort_unstable();
        assert_eq!(all, (0..103).collect::<Vec<_>>(), "each sequence once");
    }
    // Resuming from a state continues the same minibatches.
    let mut r = Reader::new(src.clone(), opts()).unwrap();
    let mut mb = r.new_minibatch();
    let size = MinibatchSize::Sequences(6);
    let mut seen = Vec::new();
    for _ in 0..4 {
        assert!(r.next_minibatch(size, &mut mb).unwrap());
    }
    let state = r.state();
    while r.next_minibatch(size, &mut mb).unwrap() {
        seen.push(mb.sequences.clone());
    }
    let mut again = Reader::restore(src.clone(), opts(), &state).unwrap();
    let mut resumed = Vec::new();
    while again.next_minibatch(size, &mut mb).unwrap() {
        resumed.push(mb.sequences.clone());
    }
    assert_eq!(resumed, seen);
    // Equalized in sequences: every worker the same number of minibatches.
    let quota = equalize_quota(103, 10, 2, 2, 0).unwrap();
    for rank in 0..2 {
        let o = ReaderOptions {
            num_workers: 2,
            worker_rank: rank,
            equalize: Some(quota),
            ..opts()
        };
        let mut r = Reader::new(src.clone(), o).unwrap();
        let mut n = 0;
        while r
            .next_minibatch(MinibatchSize::Sequences(10), &mut mb)
            .unwrap()
        {
            assert!(mb.len() <= 10);
            n += 1;
        }
        assert_eq!(n, quota);
    }
}

#[test]
fn equalize_spread_gives_equal_steps_and_every_sequence_once() {
    let src = source(103, 7);
    let total: u64 = src.chunks().iter().map(|c| c.samples).sum();
    for workers in [2, 3, 5] {
        let mut steps = Vec::new();
        let mut per_sweep = vec![Vec::new(); 2];
        for rank in 0..workers {
            let quota = equalize_quota(total, 16, workers, workers, rank).unwrap();
            let o = ReaderOptions {
                num_workers: workers,
                worker_rank: rank,
                equalize: Some(quota),
                equalize_mode: EqualizeMode::Spread,
                limit: EpochLimit::Sweeps(2),
                ..opts()
            };
            let mut r = Reader::new(src.clone(), o).unwrap();
            let mut mb = r.new_minibatch();
            let mut n = [0u64; 2];
            let mut mine = Vec::new();
            while r.next_minibatch(16, &mut mb).unwrap() {
                let sweep = mb.sequences[0].sweep as usize;
                assert!(mb.sequences.iter().all(|s| s.sweep as usize == sweep));
                per_sweep[sweep].extend(mb.sequences.iter().map(|s| s.key));
                n[sweep] += 1;
                mine.push(mb.len());
            }
            assert_eq!(n, [quota; 2], "worker {rank} of {workers}");
            // Within a worker's sweep the sizes differ by at most one.
            for sweep in mine.chunks(quota as usize) {
                let (lo, hi) = (sweep.iter().min().unwrap(), sweep.iter().max().unwrap());
                assert!(hi - lo <= 1, "{sweep:?}");
            }
            steps.push(quota);
            assert!(r
                .take_notes()
                .iter()
                .all(|n| n.contains("all of them once")));
        }
        assert!(steps.iter().all(|&s| s == steps[0]), "{steps:?}");
        for keys in &mut per_sweep {
            keys.sort_unstable();
            assert_eq!(
                keys,
                &(0..103).collect::<Vec<_>>(),
                "{workers} workers: each once"
            );
        }
    }
}

/// Workers `0..workers` each read `stops[w]` minibatches of 4 samples (`None`: to the end),
/// from the start or resumed from all of `states`: what each delivered, as (sweep, key), and
/// their states (through JSON).
fn elastic_phase(
    src: &Arc<MemorySource<f32>>,
    options: &ReaderOptions,
    states: &[ReaderState],
    stops: &[Option<u64>],
) -> (Vec<Vec<(u64, u64)>>, Vec<ReaderState>) {
    let workers = stops.len();
    let (mut seen, mut saved) = (Vec::new(), Vec::new());
    for (rank, stop) in stops.iter().enumerate() {
        let o = ReaderOptions {
            num_workers: workers,
            worker_rank: rank,
            ..options.clone()
        };
        let mut r = match states.is_empty() {
            true => Reader::new(src.clone(), o).unwrap(),
            false => Reader::restore_from_all(src.clone(), o, states).unwrap(),
        };
        let mut mb = r.new_minibatch();
        let mut got = Vec::new();
        let mut taken = 0;
        while stop.is_none_or(|s| taken < s) && r.next_minibatch(4, &mut mb).unwrap() {
            check_data(&mb);
            got.extend(mb.sequences.iter().map(|s| (s.sweep, s.key)));
            taken += 1;
        }
        seen.push(got);
        saved.push(ReaderState::from_json(&r.state().to_json()).unwrap());
    }
    saved.reverse(); // any order will do
    (seen, saved)
}

/// The first sweep that `workers` workers (with equalize over `ranks`) resumed from `states`
/// plan as a fresh reader does: where each continues its own state (the same count and ranks)
/// that of the old workers' own plans (`before`), else the first none of them had begun.
fn first_fresh_sweep(
    states: &[ReaderState],
    (workers, ranks): (usize, Option<usize>),
    before: u64,
) -> u64 {
    match states.first() {
        None => 0,
        Some(s) if s.num_workers == workers && s.equalize_ranks == ranks => before,
        // Where the old workers were, and where those they were resumed from had been.
        Some(_) => states
            .iter()
            .map(|s| s.sweep + u64::from(s.window > 0 || s.offset > 0 || s.sweep_sequences > 0))
            .chain(
                states
                    .iter()
                    .map(|s| elastic::first_fresh_sweep(&s.resumed)),
            )
            .max()
            .unwrap_or(0),
    }
}

#[test]
fn resumed_on_other_worker_counts_the_rest_of_a_sweep_once_then_fresh_sweeps() {
    let n = 70;
    let src = source(n, 6);
    for window in [Window::Chunks(2), Window::All] {
        let options = ReaderOptions {
            window,
            limit: EpochLimit::Sweeps(3),
            ..opts()
        };
        let scenarios: &[&[&[Option<u64>]]] = &[
            &[&[Some(3), Some(30)], &[None, None, None]],
            &[&[Some(0), Some(5), Some(9)], &[None]],
            &[&[Some(2), Some(2), Some(17), Some(6)], &[None, None]],
            &[&[None, Some(4)], &[None, None, None]],
            &[
                &[Some(3), Some(30)],
                &[Some(4), Some(0), Some(11)],
                &[Some(1), Some(2), Some(3)],
                &[None, None],
            ],
            &[
                &[Some(40)],
                &[Some(5), Some(5), Some(5), Some(5)],
                &[None, None],
            ],
            &[&[Some(0), Some(0)], &[None, None, None]],
        ];
        for phases in scenarios {
            let mut states = Vec::new();
            let mut all = Vec::new();
            let mut end = 0;
            for stops in phases.iter() {
                end = first_fresh_sweep(&states, (stops.len(), None), end);
                let (seen, saved) = elastic_phase(&src, &options, &states, stops);
                // From the first sweep no old worker had begun: a fresh reader's order.
                for (rank, got) in seen.iter().enumerate() {
                    let o = ReaderOptions {
                        num_workers: stops.len(),
                        worker_rank: rank,
                        ..options.clone()
                    };
                    let fresh = flat(&read_all(src.clone(), o, 4).0);
                    let later = |v: &[(u64, u64)]| -> Vec<(u64, u64)> {
                        v.iter().filter(|(s, _)| *s >= end).copied().collect()
                    };
                    let (got, fresh) = (later(got), later(&fresh));
                    assert_eq!(got, fresh[..got.len()], "{phases:?} worker {rank}");
                }
                all.extend(seen.into_iter().flatten());
                states = saved;
            }
            for sweep in 0..3 {
                let mut keys: Vec<u64> = all
                    .iter()
                    .filter(|(s, _)| *s == sweep)
                    .map(|(_, k)| *k)
                    .collect();
                keys.sort_unstable();
                let whole: Vec<u64> = (0..n as u64).collect();
                assert_eq!(keys, whole, "{window:?} {phases:?} sweep {sweep}");
            }
        }
    }
}

#[test]
fn resuming_on_another_count_names_what_is_missing_or_refused() {
    let src = source(40, 5);
    let options = ReaderOptions {
        limit: EpochLimit::Sweeps(2),
        ..opts()
    };
    let (_, states) = elastic_phase(&src, &options, &[], &[Some(2), Some(1), Some(3), Some(1)]);
    let new = |rank| ReaderOptions {
        num_workers: 3,
        worker_rank: rank,
        ..options.clone()
    };
    let message = |states: &[ReaderState], o: ReaderOptions| {
        let err = Reader::restore_from_all(src.clone(), o, states)
            .err()
            .unwrap();
        assert_eq!(err.kind(), ErrorKind::Config);
        err.message().to_string()
    };
    let some: Vec<ReaderState> = states
        .iter()
        .filter(|s| s.worker_rank % 2 == 0)
        .cloned()
        .collect();
    let m = message(&some, new(0));
    assert!(m.contains("worker(s) 1, 3 of 4 are missing"), "{m}");
    let twice = [states.clone(), vec![states[1].clone()]].concat();
    let m = message(&twice, new(0));
    assert!(m.contains("is given twice"), "{m}");
    let m = message(
        &states,
        ReaderOptions {
            limit: EpochLimit::Samples(100),
            ..new(1)
        },
    );
    assert!(m.contains("max samples"), "{m}");
    let m = message(&states, ReaderOptions { seed: 8, ..new(1) });
    assert!(m.contains("randomizationSeed was 3, is 8"), "{m}");
    let m = message(&[], new(0));
    assert!(m.contains("no saved reader state"), "{m}");
    // Positions that are not in the plans, or sweeps far apart: refused, not followed.
    let mut bad = states.clone();
    bad[0].window = 99;
    let m = message(&bad, new(0));
    assert!(m.contains("window 99 of sweep 0 does not exist"), "{m}");
    bad[0].window = 0;
    bad[0].offset = 10_000;
    let m = message(&bad, new(0));
    assert!(m.contains("not 10000"), "{m}");
    let mut far = states.clone();
    far[1].sweep = 1 << 40;
    let m = message(
        &far,
        ReaderOptions {
            limit: EpochLimit::Unlimited,
            ..new(0)
        },
    );
    assert!(m.contains("sweeps apart"), "{m}");
    // A resumed state whose record of the old workers is damaged.
    let o3 = |rank| ReaderState {
        ..Reader::restore_from_all(src.clone(), new(rank), &states)
            .unwrap()
            .state()
    };
    let mut damaged = o3(0);
    assert_eq!(damaged.resumed.len(), 1);
    damaged.resumed[0].num_workers = 0;
    let err = Reader::restore(src.clone(), new(0), &damaged)
        .err()
        .unwrap();
    assert!(err.message().contains("holds 4 positions"), "{err}");
    // equalize without what its quota was computed from
    let eq = ReaderOptions {
        equalize: Some(3),
        ..options.clone()
    };
    let (_, states) = elastic_phase(&src, &eq, &[], &[Some(1), Some(1)]);
    let m = message(
        &states,
        ReaderOptions {
            equalize: Some(3),
            ..new(2)
        },
    );
    assert!(m.contains("equalize_basis"), "{m}");
    // The same count restores each worker's own state, as Reader::restore does.
    let (_, states) = elastic_phase(&src, &options, &[], &[Some(2), Some(5)]);
    for rank in 0..2 {
        let o = ReaderOptions {
            num_workers: 2,
            worker_rank: rank,
            ..options.clone()
        };
        let own = states.iter().find(|s| s.worker_rank == rank).unwrap();
        let mut a = Reader::restore_from_all(src.clone(), o.clone(), &states).unwrap();
        let mut b = Reader::restore(src.clone(), o, own).unwrap();
        assert_eq!(drain(&mut a, 4).1, drain(&mut b, 4).1);
    }
}

/// A minibatch's sweep and keys.
type Delivered = (u64, Vec<u64>);

/// One phase of an equalized read: `stops.len()` workers kept in step over `ranks` ranks, each
/// reading `stops[w]` minibatches of `size` (`None`: to the end), from the start or resumed
/// from all of `states`: each worker's minibatches as (sweep, keys), and their states.
fn equalized_phase(
    src: &Arc<MemorySource<f32>>,
    base: &ReaderOptions,
    size: MinibatchSize,
    (ranks, states, stops): (usize, &[ReaderState], &[Option<u64>]),
) -> (Vec<Vec<Delivered>>, Vec<ReaderState>) {
    let workers = stops.len();
    let (mut seen, mut saved) = (Vec::new(), Vec::new());
    for (rank, stop) in stops.iter().enumerate() {
        let o = equalized_options(src, base, size, (ranks, workers, rank));
        let mut r = match states.is_empty() {
            true => Reader::new(src.clone(), o).unwrap(),
            false => Reader::restore_from_all(src.clone(), o, states).unwrap(),
        };
        let mut mb = r.new_minibatch();
        let mut got = Vec::new();
        while stop.is_none_or(|s| (got.len() as u64) < s)
            && r.next_minibatch(size, &mut mb).unwrap()
        {
            check_data(&mb);
            let sweep = mb.sequences[0].sweep;
            assert!(mb.sequences.iter().all(|s| s.sweep == sweep), "one sweep");
            got.push((sweep, mb.sequences.iter().map(|s| s.key).collect()));
            assert!(got.len() < 10_000, "runaway reader");
        }
        seen.push(got);
        saved.push(ReaderState::from_json(&r.state().to_json()).unwrap());
    }
    saved.reverse(); // any order will do
    (seen, saved)
}

/// Worker `rank` of `workers` kept in step over `ranks` ranks with minibatches of `size`.
fn equalized_options(
    src: &Arc<MemorySource<f32>>,
    base: &ReaderOptions,
    size: MinibatchSize,
    (ranks, workers, rank): (usize, usize, usize),
) -> ReaderOptions {
    let total = match size {
        MinibatchSize::Samples(_) => src.chunks().iter().map(|c| c.samples).sum(),
        MinibatchSize::Sequences(_) => src.chunks().iter().map(|c| c.sequences as u64).sum(),
    };
    ReaderOptions {
        num_workers: workers,
        worker_rank: rank,
        equalize: Some(equalize_quota(total, size.count(), workers, ranks, rank).unwrap()),
        equalize_basis: Some(QuotaBasis {
            minibatch_size: size,
            ranks,
        }),
        ..base.clone()
    }
}

#[test]
fn an_equalized_state_saved_in_the_rest_of_a_sweep_restores_exactly() {
    let src = source(90, 5);
    for mode in [EqualizeMode::Repeat, EqualizeMode::Spread] {
        let base = ReaderOptions {
            equalize_mode: mode,
            limit: EpochLimit::Sweeps(2),
            ..opts()
        };
        let (_, states) = equalized_phase(&src, &base, 8.into(), (2, &[], &[Some(3), Some(11)]));
        for rank in 0..3 {
            let o = equalized_options(&src, &base, 8.into(), (3, 3, rank));
            let mut whole = Reader::restore_from_all(src.clone(), o.clone(), &states).unwrap();
            let (all, _) = drain(&mut whole, 8);
            // The rest's note counts the part of the rest (not the worker's fresh part).
            let notes = whole.take_notes();
            let rest: u64 = all
                .iter()
                .filter(|m| m[0].sweep == 0)
                .map(|m| m.len() as u64)
                .sum();
            if mode == EqualizeMode::Spread {
                assert!(
                    notes[0].contains(&format!("its part has {rest} sequences")),
                    "{notes:?}"
                );
            }
            let mut first = Reader::restore_from_all(src.clone(), o.clone(), &states).unwrap();
            let mut mb = first.new_minibatch();
            for _ in 0..2 {
                assert!(first.next_minibatch(8, &mut mb).unwrap());
            }
            let state = ReaderState::from_json(&first.state().to_json()).unwrap();
            assert_eq!(state.resumed.len(), 1, "still in the rest");
            let mut again = Reader::restore(src.clone(), o, &state).unwrap();
            assert_eq!(drain(&mut again, 8).0, all[2..], "{mode:?} worker {rank}");
        }
    }
}

#[test]
fn resumed_with_equalize_on_other_counts_keeps_ranks_in_step() {
    let n = 90;
    let src = source(n, 5);
    let sweeps = 3;
    let base = ReaderOptions {
        limit: EpochLimit::Sweeps(sweeps),
        ..opts()
    };
    // Per phase: the ranks and each worker's stop. 90 sequences of 1 to 5 samples in 18
    // chunks; minibatches of 8 samples (or 3 sequences).
    type Phase<'a> = (usize, &'a [Option<u64>]);
    let scenarios: &[(MinibatchSize, &[Phase<'_>])] = &[
        // 2 ranks x 2 workers -> 3 x 1; workers 2 and 3 reached their quota (sweep 1).
        (
            8.into(),
            &[(2, &[Some(4), Some(2), Some(8), Some(9)]), (3, &[None; 3])],
        ),
        // 2 x 1 -> 2 x 2, then 3 x 2 from inside the rest.
        (
            8.into(),
            &[
                (2, &[Some(3), Some(11)]),
                (2, &[Some(2), Some(1), Some(1), Some(0)]),
                (3, &[None; 6]),
            ],
        ),
        // Near the end of the sweep onto more workers than chunks left: sequences dealt.
        (8.into(), &[(2, &[Some(14), Some(14)]), (3, &[None; 6])]),
        // 3 x 1 -> 1 x 2, minibatches of 3 sequences.
        (
            MinibatchSize::Sequences(3),
            &[(3, &[Some(5), Some(0), Some(9)]), (1, &[None; 2])],
        ),
        // 5 x 1 -> 2 x 1: workers 3 and 4 (15 sequences, 13 minibatches of 4 samples)
        // delivered their whole part, and their position is back at its start (repeat).
        (4.into(), &[(5, &[Some(12); 5]), (2, &[None; 2])]),
        // The same count on other ranks (2 x 2 -> 4 x 1): not in step, so shared as a rest;
        // then on the same ranks again at the same step, each continuing its own state.
        (
            8.into(),
            &[
                (2, &[Some(3), Some(2), Some(3), Some(2)]),
                (4, &[Some(2); 4]),
                (4, &[None; 4]),
            ],
        ),
        // Saved before anything was read.
        (8.into(), &[(2, &[Some(0), Some(0)]), (4, &[None; 4])]),
    ];
    let mut repeat_passes = 0;
    for mode in [EqualizeMode::Repeat, EqualizeMode::Spread] {
        let base = ReaderOptions {
            equalize_mode: mode,
            ..base.clone()
        };
        for (size, phases) in scenarios {
            let what = format!("{mode:?} {size:?} {phases:?}");
            let mut states: Vec<ReaderState> = Vec::new();
            // Per sweep, what each (phase, worker) delivered.
            let mut by_reader: Vec<Vec<Vec<u64>>> = vec![Vec::new(); sweeps as usize];
            let mut end = 0;
            for (ranks, stops) in phases.iter() {
                let workers = stops.len();
                end = first_fresh_sweep(&states, (workers, Some(*ranks)), end);
                let (seen, saved) = equalized_phase(&src, &base, *size, (*ranks, &states, stops));
                // An old worker that went through its whole part (and began it again).
                for s in &saved {
                    let part = fresh_part(&src, &base, s.worker_rank, s.num_workers);
                    if s.resumed.is_empty() && s.sweep == 0 && s.sweep_sequences >= part {
                        repeat_passes += 1;
                    }
                }
                for sweep in 0..sweeps {
                    for got in &seen {
                        let keys = got.iter().filter(|(s, _)| *s == sweep);
                        let keys = keys.flat_map(|(_, k)| k.clone()).collect();
                        by_reader[sweep as usize].push(keys);
                    }
                }
                if stops.iter().any(Option::is_some) {
                    states = saved;
                    continue;
                }
                // Read to the end: every rank the same minibatches in every sweep, the rest
                // of a resumed one included.
                for sweep in 0..sweeps {
                    let per_rank: Vec<usize> = seen
                        .chunks(workers / ranks)
                        .map(|rank| rank.iter().flatten().filter(|(s, _)| *s == sweep).count())
                        .collect();
                    assert!(
                        per_rank.iter().all(|&m| m == per_rank[0]),
                        "{what} sweep {sweep}: {per_rank:?}"
                    );
                }
                // From the first sweep no old worker had begun: a fresh reader's minibatches.
                let (fresh, _) = equalized_phase(&src, &base, *size, (*ranks, &[], stops));
                for (got, fresh) in seen.iter().zip(&fresh) {
                    let later = |v: &[Delivered]| -> Vec<Delivered> {
                        v.iter().filter(|(s, _)| *s >= end).cloned().collect()
                    };
                    assert_eq!(later(got), later(fresh), "{what}");
                }
            }
            for (sweep, readers) in by_reader.iter().enumerate() {
                // No sequence delivered by two readers (an old and a new worker, two new
                // ones): only a worker's repeat of its own part comes twice.
                let mut union = BTreeSet::new();
                for keys in readers {
                    let own: BTreeSet<u64> = keys.iter().copied().collect();
                    assert!(union.is_disjoint(&own), "{what} sweep {sweep}");
                    union.extend(own);
                }
                if mode == EqualizeMode::Spread {
                    let mut all: Vec<u64> = readers.concat();
                    all.sort_unstable();
                    assert_eq!(
                        all,
                        (0..n as u64).collect::<Vec<_>>(),
                        "{what} sweep {sweep}: once"
                    );
                }
            }
        }
    }
    assert!(repeat_passes > 0, "an old worker was in its repeat pass");
}

/// The sequences of worker `rank` of `workers`'s part of sweep 0.
fn fresh_part(
    src: &Arc<MemorySource<f32>>,
    base: &ReaderOptions,
    rank: usize,
    workers: usize,
) -> u64 {
    let o = ReaderOptions {
        num_workers: workers,
        worker_rank: rank,
        equalize: None,
        limit: EpochLimit::Sweeps(1),
        ..base.clone()
    };
    flat(&read_all(src.clone(), o, 8).0).len() as u64
}

#[test]
fn an_equalized_rest_of_fewer_sequences_than_new_workers_is_dropped_with_a_note() {
    let src = source(90, 5);
    let base = ReaderOptions {
        equalize_mode: EqualizeMode::Spread,
        limit: EpochLimit::Sweeps(2),
        ..opts()
    };
    // 15 of 16 minibatches each: 4 sequences are left, for 6 new workers.
    let (seen, states) = equalized_phase(&src, &base, 8.into(), (2, &[], &[Some(15); 2]));
    let old: usize = seen.iter().flatten().map(|(_, k)| k.len()).sum();
    assert_eq!(old, 86);
    for rank in 0..6 {
        let o = equalized_options(&src, &base, 8.into(), (3, 6, rank));
        let mut r = Reader::restore_from_all(src.clone(), o.clone(), &states).unwrap();
        let (got, _) = drain(&mut r, 8);
        assert!(got.iter().all(|m| m[0].sweep == 1), "nothing of sweep 0");
        let notes = r.take_notes();
        assert!(
            notes[0].contains("sweep 0") && notes[0].contains("delivered 0 minibatches"),
            "{notes:?}"
        );
        assert!(
            notes[0].contains("dropped") || notes[0].contains("has 0 sequences"),
            "{notes:?}"
        );
        let fresh = read_all(src.clone(), o, 8).0;
        assert_eq!(flat(&got), sweep_keys_all(&fresh, 1));
    }
}

/// The (sweep, key) of every sequence of `sweep`.
fn sweep_keys_all(seqs: &[Vec<SequenceInfo>], sweep: u64) -> Vec<(u64, u64)> {
    flat(seqs)
        .into_iter()
        .filter(|&(s, _)| s == sweep)
        .collect()
}

#[test]
fn equalized_states_resume_without_equalize_as_their_rest() {
    let src = source(90, 5);
    let base = ReaderOptions {
        limit: EpochLimit::Sweeps(1),
        ..opts()
    };
    // Workers 3 and 4 went through their whole part and are back at its start (repeat).
    let (seen, states) = equalized_phase(&src, &base, 4.into(), (5, &[], &[Some(12); 5]));
    let old: BTreeSet<u64> = seen.iter().flatten().flat_map(|(_, k)| k.clone()).collect();
    let mut rest = Vec::new();
    for rank in 0..3 {
        let o = ReaderOptions {
            num_workers: 3,
            worker_rank: rank,
            ..base.clone()
        };
        let mut r = Reader::restore_from_all(src.clone(), o, &states).unwrap();
        rest.extend(flat(&drain(&mut r, 4).0).into_iter().map(|(_, k)| k));
    }
    rest.sort_unstable();
    let expected: Vec<u64> = (0..90).filter(|k| !old.contains(k)).collect();
    assert_eq!(rest, expected, "the rest, each sequence once");
}

/// `n` sequences of lengths `len(k)` with two dense streams (`dim` and 3) around a sparse one;
/// every value tells its sequence, sample and place.
fn numbered_batch<T: Element>(
    n: usize,
    dim: usize,
    len: impl Fn(usize) -> usize,
) -> (Vec<StreamSpec>, SequenceBatch<T>) {
    let specs = vec![
        StreamSpec::new("big", Storage::Dense, dim),
        StreamSpec::new("ids", Storage::Sparse, 10),
        StreamSpec::new("small", Storage::Dense, 3),
    ];
    let mut b = SequenceBatch::new(&specs);
    let value =
        |k: usize, i: usize, j: usize| T::from_f64(((k * 1009 + i * 31 + j) % 65521) as f64);
    for k in 0..n {
        for i in 0..len(k) {
            let big: Vec<T> = (0..dim).map(|j| value(k, i, j)).collect();
            b.stream_mut(0).push_dense_sample(&big);
            b.stream_mut(1)
                .push_sparse_sample(&[(k % 10) as u32], &[value(k, i, 0)]);
            b.stream_mut(2).push_dense_sample(&[value(k, i, 7); 3]);
        }
        b.finish_sequence(k as u64);
    }
    (specs, b)
}

/// Reads `batch` in chunks of `per_chunk` sequences with `threads` threads; every minibatch.
fn all_minibatches<T: Element>(
    specs: &[StreamSpec],
    batch: &SequenceBatch<T>,
    per_chunk: usize,
    o: ReaderOptions,
    size: MinibatchSize,
) -> Vec<Minibatch<T>> {
    let src = Arc::new(MemorySource::from_batch(specs.to_vec(), batch, per_chunk));
    let mut r = Reader::new(src, o).unwrap();
    let mut mb = r.new_minibatch();
    let mut all = Vec::new();
    while r.next_minibatch(size, &mut mb).unwrap() {
        all.push(mb.clone());
    }
    all
}

/// Large dense minibatches, whose copy the consumer's thread shares with the reader's threads
/// in pieces, hold exactly what the same reader delivers on one thread.
#[test]
fn shared_copies_deliver_what_one_thread_does() {
    fn case<T: Element>(
        name: &str,
        (n, dim, per_chunk): (usize, usize, usize),
        len: impl Fn(usize) -> usize,
        size: MinibatchSize,
    ) {
        let (specs, batch) = numbered_batch::<T>(n, dim, len);
        for randomize in [true, false] {
            let o = ReaderOptions {
                randomize,
                seed: 5,
                window: Window::Chunks(3),
                limit: EpochLimit::Sweeps(2),
                ..ReaderOptions::default()
            };
            let read = |threads| {
                let o = ReaderOptions {
                    threads,
                    ..o.clone()
                };
                all_minibatches(&specs, &batch, per_chunk, o, size)
            };
            let alone = read(0);
            let dense = |m: &Minibatch<T>| {
                let s = m.data.streams();
                (s[0].values().len() + s[2].values().len()) * T::SIZE
            };
            assert!(
                dense(&alone[0]) >= SHARE_FROM_BYTES,
                "{name}: a large minibatch"
            );
            if !randomize {
                // Each chunk is a window: some minibatches span two.
                let spans = |m: &Minibatch<T>| {
                    let keys = m.data.keys();
                    keys.iter()
                        .any(|&k| k as usize / per_chunk != keys[0] as usize / per_chunk)
                };
                assert!(alone.iter().any(spans), "{name}");
            }
            for threads in [1, 2] {
                let shared = read(threads);
                let what = format!("{name}, randomize {randomize}, {threads} threads");
                assert_eq!(shared.len(), alone.len(), "{what}");
                for (m, (a, b)) in shared.iter().zip(&alone).enumerate() {
                    assert_eq!(a.sequences, b.sequences, "{what}: minibatch {m}");
                    assert!(a.data == b.data, "{what}: minibatch {m}'s data");
                }
            }
        }
    }
    let mnist = MinibatchSize::Samples(256);
    case::<f32>("1-sample sequences", (3000, 784, 250), |_| 1, mnist);
    case::<f64>("1-sample sequences, f64", (2000, 200, 170), |_| 1, mnist);
    let long = |k| 20 + (k * 37) % 400;
    case::<f32>(
        "long sequences",
        (300, 64, 25),
        long,
        MinibatchSize::Samples(3000),
    );
    let short = |k| 1 + (k * 13) % 150;
    case::<f32>(
        "dim 1",
        (1200, 1, 100),
        short,
        MinibatchSize::Samples(10_000),
    );
    case::<f64>(
        "dim 1, f64",
        (1200, 1, 100),
        short,
        MinibatchSize::Sequences(130),
    );
}
