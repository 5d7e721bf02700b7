//! The next reader of the process (a training loop's next epoch) decodes into the buffers the
//! last one left, for a window as large as exfeed.torch's default and its prefetch. Its own
//! test binary: the kept buffers are the process's, and other tests' readers would take them or
//! fill the pool meanwhile.

use exfeed::reader::{ChunkSource, EpochLimit, Reader, ReaderOptions, Window};
use exfeed::source::MemorySource;
use exfeed::{SequenceBatch, Storage, StreamSpec};
use std::sync::Arc;

#[test]
fn the_next_reader_decodes_into_the_last_ones_buffers() {
    // 80 chunks in windows of 64 (exfeed.torch's 64 MiB of 1 MiB chunks), 32 decoded ahead.
    let specs = vec![StreamSpec::new("x", Storage::Dense, 977)];
    let mut all = SequenceBatch::<f32>::new(&specs);
    for k in 0..800 {
        all.stream_mut(0).push_dense_sample(&[k as f32; 977]);
        all.finish_sequence(k);
    }
    let source: Arc<dyn ChunkSource<f32>> = Arc::new(MemorySource::from_batch(specs, &all, 10));
    let sweep = |seed: u64| {
        let options = ReaderOptions {
            seed,
            window: Window::Chunks(64),
            prefetch_chunks: 32,
            threads: 2,
            limit: EpochLimit::Sweeps(1),
            ..ReaderOptions::default()
        };
        let mut reader = Reader::new(source.clone(), options).unwrap();
        let mut mb = reader.new_minibatch();
        while reader.next_minibatch(64, &mut mb).unwrap() {}
        reader.stats()
    };
    let first = sweep(1);
    assert!((64..=96).contains(&first.peak_chunks_held), "{first:?}");
    assert!(
        first.buffers_new >= first.peak_chunks_held as u64,
        "{first:?}"
    );
    assert_eq!(first.buffers_reused, 0, "{first:?}");
    // Every buffer the next epoch's reader needs is one the first left.
    let second = sweep(2);
    assert_eq!(second.buffers_new, 0, "{second:?}");
    assert_eq!(second.buffers_reused, first.buffers_new, "{second:?}");
}
