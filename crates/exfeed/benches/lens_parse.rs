//! Lens example files: a generated `.ex` (100 binary inputs and 20 targets an example) and the
//! same examples as `.bex`, parsed whole from memory.

mod common;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

fn lens_parse(c: &mut Criterion) {
    let text = common::generated_ex(4 << 20);
    let set = exfeed::lens::parse(&text).expect("generated .ex parses");
    let binary = exfeed::lens::binary::write(&set).expect("the set encodes");
    let mut group = c.benchmark_group("lens_parse");
    // Per example, so text and binary compare directly.
    group.throughput(Throughput::Elements(set.examples.len() as u64));
    for (name, bytes) in [("ex", &text), ("bex", &binary)] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let set = exfeed::lens::parse(black_box(bytes)).expect("parses");
                black_box(set.examples.len())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, lens_parse);
criterion_main!(benches);
