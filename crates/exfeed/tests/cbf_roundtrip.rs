//! Property test: any batch written to CBF reads back as the same batch (sparse pairs sorted
//! by index within a sample), whatever the chunk size; and every chunk respects it.

use exfeed::cbf::{CbfFile, CbfWriter, CbfWriterOptions};
use exfeed::{Precision, SequenceBatch, Storage, StreamSpec};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Sample {
    Dense(Vec<f64>),
    Sparse(Vec<(u32, f64)>),
}

fn layout() -> impl Strategy<Value = Vec<(bool, usize)>> {
    prop::collection::vec((any::<bool>(), 1usize..6), 1..4)
}

/// Stream layout (sparse?, dim), and per sequence, per stream, its samples.
type Generated = (Vec<(bool, usize)>, Vec<Vec<Vec<Sample>>>);

fn batch_strategy() -> impl Strategy<Value = Generated> {
    layout().prop_flat_map(|lay| {
        let per_stream: Vec<BoxedStrategy<Vec<Sample>>> = lay
            .iter()
            .map(|&(sparse, dim)| {
                let sample: BoxedStrategy<Sample> = if sparse {
                    prop::collection::btree_map(0..dim as u32, -1e6f64..1e6, 0..=dim)
                        .prop_map(|m| Sample::Sparse(m.into_iter().rev().collect()))
                        .boxed()
                } else {
                    prop::collection::vec(-1e6f64..1e6, dim)
                        .prop_map(Sample::Dense)
                        .boxed()
                };
                prop::collection::vec(sample, 0..4).boxed()
            })
            .collect();
        (Just(lay), prop::collection::vec(per_stream, 0..12))
    })
}

fn build(
    lay: &[(bool, usize)],
    seqs: &[Vec<Vec<Sample>>],
) -> (Vec<StreamSpec>, SequenceBatch<f64>) {
    let specs: Vec<StreamSpec> = lay
        .iter()
        .enumerate()
        .map(|(i, &(sparse, dim))| {
            StreamSpec::new(
                format!("s{i}"),
                if sparse {
                    Storage::Sparse
                } else {
                    Storage::Dense
                },
                dim,
            )
        })
        .collect();
    let mut b = SequenceBatch::<f64>::new(&specs);
    for (k, seq) in seqs.iter().enumerate() {
        for (t, samples) in seq.iter().enumerate() {
            for s in samples {
                match s {
                    Sample::Dense(v) => b.stream_mut(t).push_dense_sample(v),
                    Sample::Sparse(p) => {
                        let (indices, values): (Vec<u32>, Vec<f64>) = p.iter().copied().unzip();
                        b.stream_mut(t).push_sparse_sample(&indices, &values);
                    }
                }
            }
        }
        // A sequence needs at least one sample somewhere to be meaningful; empty ones are fine too.
        b.finish_sequence(k as u64);
    }
    (specs, b)
}

fn sort_pairs(b: &SequenceBatch<f64>) -> SequenceBatch<f64> {
    let mut out = b.empty_like();
    for seq in 0..b.len() {
        for (t, s) in b.streams().iter().enumerate() {
            for sample in s.sequence_samples(seq) {
                if s.storage() == Storage::Dense {
                    out.stream_mut(t).push_dense_sample(s.dense_sample(sample));
                } else {
                    let (ix, vs) = s.sparse_sample(sample);
                    let mut p: Vec<_> = ix.iter().copied().zip(vs.iter().copied()).collect();
                    p.sort_by_key(|x| x.0);
                    let (indices, values): (Vec<u32>, Vec<_>) = p.into_iter().unzip();
                    out.stream_mut(t).push_sparse_sample(&indices, &values);
                }
            }
        }
        out.finish_sequence(b.keys()[seq]);
    }
    out
}

proptest! {
    #[test]
    fn write_then_read_gives_the_same_batch((lay, seqs) in batch_strategy(), chunk_size in 1u64..400) {
        let (specs, batch) = build(&lay, &seqs);
        let mut w = CbfWriter::new(Vec::new(), &specs,
            CbfWriterOptions { chunk_size, precision: Precision::Double }).unwrap();
        w.write_batch(&batch).unwrap();
        let bytes = w.finish().unwrap();
        let f = CbfFile::open(bytes.as_slice()).unwrap();
        prop_assert_eq!(f.num_sequences(), batch.len() as u64);
        let mut all = batch.empty_like();
        let mut chunk = SequenceBatch::<f64>::new(&[]);
        for i in 0..f.num_chunks() {
            let info = f.chunk_info(i);
            // Within the chunk size unless a single sequence is larger.
            prop_assert!(info.len <= chunk_size || info.sequences == 1);
            f.read_chunk(i, &mut chunk).unwrap();
            prop_assert_eq!(chunk.len(), info.sequences as usize);
            for s in 0..chunk.len() {
                all.push_sequence_from(&chunk, s);
            }
        }
        prop_assert_eq!(all, sort_pairs(&batch));
        // Writing what was read gives the same bytes.
        let mut w2 = CbfWriter::new(Vec::new(), &specs,
            CbfWriterOptions { chunk_size, precision: Precision::Double }).unwrap();
        w2.write_batch(&sort_pairs(&batch)).unwrap();
        prop_assert_eq!(w2.finish().unwrap(), bytes);
    }
}
