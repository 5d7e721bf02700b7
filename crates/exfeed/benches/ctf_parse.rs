//! CTF parsing on one thread: generated dense floats and MNIST-like integers, parsed whole into
//! a reused batch (what each reader thread does with a chunk).

mod common;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use exfeed::ctf::{CtfOptions, CtfParser};
use exfeed::error::Ignore;
use exfeed::SequenceBatch;
use std::hint::black_box;

fn ctf_parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("ctf_parse");
    let sets = [
        ("dense", common::dense(4 << 20).0, common::DENSE_INPUTS),
        ("mnist", common::mnist(4 << 20).0, common::MNIST_INPUTS),
    ];
    for (name, text, inputs) in &sets {
        let opts = CtfOptions {
            inputs: common::specs(inputs),
            ..CtfOptions::default()
        };
        let mut batch = SequenceBatch::<f32>::new(&opts.inputs);
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(*name, |b| {
            b.iter(|| {
                batch.clear();
                let mut parser = CtfParser::new(opts.clone()).expect("valid options");
                parser
                    .parse_file(black_box(text), &mut batch, &mut Ignore)
                    .expect("generated CTF parses");
                black_box(batch.len())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, ctf_parse);
criterion_main!(benches);
