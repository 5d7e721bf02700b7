//! CBF decoding: every chunk of an in-memory CBF file (MNIST-like data, dense and sparse) read
//! into a reused batch of per-stream buffers.

mod common;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use exfeed::cbf::{CbfFile, CbfWriter, CbfWriterOptions};
use exfeed::SequenceBatch;
use std::hint::black_box;

/// The MNIST-like CTF data set as CBF, in chunks of about 1 MiB.
fn mnist_cbf() -> Vec<u8> {
    let (text, _) = common::mnist(8 << 20);
    let batch = common::parsed::<f64>(&text, common::MNIST_INPUTS);
    let options = CbfWriterOptions {
        chunk_size: 1 << 20,
        ..CbfWriterOptions::default()
    };
    let mut writer = CbfWriter::new(Vec::new(), &common::specs(common::MNIST_INPUTS), options)
        .expect("valid streams");
    writer.write_batch(&batch).expect("writes to memory");
    writer.finish().expect("writes to memory")
}

fn cbf_decode(c: &mut Criterion) {
    let bytes = mnist_cbf();
    let file = CbfFile::open(&bytes[..]).expect("a valid CBF file");
    let mut batch = SequenceBatch::<f32>::new(&file.stream_specs());
    let mut group = c.benchmark_group("cbf_decode");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function("mnist", |b| {
        b.iter(|| {
            let mut samples = 0;
            for i in 0..file.num_chunks() {
                file.read_chunk(i, &mut batch).expect("chunk decodes");
                samples += batch.streams()[0].num_samples();
            }
            black_box(samples)
        })
    });
    group.finish();
}

criterion_group!(benches, cbf_decode);
criterion_main!(benches);
