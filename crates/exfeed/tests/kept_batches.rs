//! A dropped reader's decoded-chunk batches are kept for the process's next reader, but not
//! for ever: `release_kept_batches` frees them at once, and the thread that frees them when
//! they expire (10 seconds after the reader was dropped) ends when none is left. Its own test binary: the pool is the process's, and
//! other tests' readers would fill it meanwhile.

use exfeed::reader::{release_kept_batches, EpochLimit, Reader, ReaderOptions, Window};
use exfeed::source::MemorySource;
use exfeed::{SequenceBatch, Storage, StreamSpec};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Whether this process has a thread named `name` (Linux: /proc/self/task/*/comm).
fn has_thread(name: &str) -> bool {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok()) // threads come and go
        .any(|comm| comm.trim_end() == name)
}

#[test]
#[cfg(target_os = "linux")]
fn kept_batches_are_released_on_request_and_their_thread_ends() {
    let specs = vec![StreamSpec::new("x", Storage::Dense, 1000)];
    let mut all = SequenceBatch::<f32>::new(&specs);
    for k in 0..64 {
        all.stream_mut(0).push_dense_sample(&[k as f32; 1000]);
        all.finish_sequence(k);
    }
    let source: Arc<MemorySource<f32>> = Arc::new(MemorySource::from_batch(specs, &all, 8));
    let options = ReaderOptions {
        window: Window::Chunks(2),
        limit: EpochLimit::Sweeps(1),
        ..ReaderOptions::default()
    };
    assert!(!has_thread("exfeed-pool"));
    let sweep = || {
        let mut reader = Reader::new(source.clone(), options.clone()).unwrap();
        let mut mb = reader.new_minibatch();
        let mut sequences = 0;
        while reader.next_minibatch(16, &mut mb).unwrap() {
            sequences += mb.sequences.len();
        }
        assert_eq!(sequences, 64);
    };
    sweep();
    // (A new thread names itself once it runs.)
    eventually(
        || has_thread("exfeed-pool"),
        5,
        "batches kept: their reaper runs",
    );
    // The decoded chunks held 4000 bytes of values each at least.
    let freed = release_kept_batches();
    assert!(freed >= 4 * 4000, "freed {freed} bytes");
    assert_eq!(release_kept_batches(), 0, "nothing is kept twice");
    eventually(
        || !has_thread("exfeed-pool"),
        5,
        "nothing kept: the reaper ends",
    );

    // Unless released, they are freed 10 seconds after the reader was dropped.
    sweep();
    let dropped = Instant::now();
    eventually(|| has_thread("exfeed-pool"), 5, "batches kept again");
    eventually(|| !has_thread("exfeed-pool"), 20, "the kept batches expire");
    assert!(dropped.elapsed() >= Duration::from_secs(9));
    assert_eq!(release_kept_batches(), 0, "expired batches were freed");
}

/// Waits up to `seconds` for `condition`.
fn eventually(condition: impl Fn() -> bool, seconds: u64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while !condition() {
        assert!(Instant::now() < deadline, "{what}: not within {seconds} s");
        std::thread::sleep(Duration::from_millis(5));
    }
}
