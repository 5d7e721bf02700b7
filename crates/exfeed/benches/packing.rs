//! Minibatch packing: one sweep of the reader over sequences held in memory (so decoding is a
//! plain copy of each chunk), in file order and shuffled within windows of 4 chunks, on the
//! caller's thread, in minibatches of 256 samples of 200 floats.

mod common;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use exfeed::reader::{EpochLimit, Reader, ReaderOptions, Window};
use exfeed::source::MemorySource;
use std::hint::black_box;
use std::sync::Arc;

fn packing(c: &mut Criterion) {
    let (text, _) = common::dense(16 << 20);
    let all = common::parsed::<f32>(&text, common::DENSE_INPUTS);
    let values = all.streams()[0].values().len();
    let source = Arc::new(MemorySource::from_batch(
        common::specs(common::DENSE_INPUTS),
        &all,
        1000,
    ));
    drop(all);
    let mut group = c.benchmark_group("packing");
    group.throughput(Throughput::Bytes((values * 4) as u64));
    for (name, randomize) in [("file_order", false), ("shuffled", true)] {
        let options = ReaderOptions {
            randomize,
            window: Window::Chunks(4),
            limit: EpochLimit::Sweeps(1),
            threads: 0,
            ..ReaderOptions::default()
        };
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut reader = Reader::new(source.clone(), options.clone()).expect("valid");
                let mut mb = reader.new_minibatch();
                let mut samples = 0;
                while reader.next_minibatch(256, &mut mb).expect("in memory") {
                    samples += mb.samples;
                }
                black_box(samples)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, packing);
criterion_main!(benches);
