//! The network overlapped with decoding: a large read split into parallel ranged GETs, and the
//! reader fetching chunks ahead of its decoding threads, each with several GETs in flight at
//! once (counted by the fault proxy, which holds every GET a while, as a slow server does),
//! faults retried, and every byte and sequence exact and delivered once.

use super::open::{ctf_options, storage_options, summed, SEQUENCES};
use super::{pattern, services, unique, Fault, FaultProxy};
use exfeed::convert::{convert, ConvertOptions};
use exfeed::fetch_ahead::FETCH_AHEAD_CHUNKS;
use exfeed::format::FileFormat;
use exfeed::io::remote::{RemoteObject, PART_BYTES};
use exfeed::options::{ChunkSize, IndexMode, ReadOptions};
use exfeed::reader::{EpochLimit, Reader, ReaderOptions, Window};
use exfeed::{open, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The start and end (exclusive) of a `bytes=A-B` range.
fn range_of(header: &str) -> (u64, u64) {
    let (a, b) = header
        .trim_start_matches("bytes=")
        .split_once('-')
        .expect("bytes=A-B");
    (a.parse().unwrap(), b.parse::<u64>().unwrap() + 1)
}

#[test]
fn a_large_read_is_fetched_in_parallel_parts_and_a_cut_part_resumes() {
    let Some(services) = services() else { return };
    let key = unique("parts.bin");
    let data = pattern(2 * PART_BYTES + 12_345, 21);
    services.put(&key, &data);
    let proxy = FaultProxy::start(&services.s3_endpoint);
    let object = RemoteObject::open(
        &services.url(&key),
        &services.options_at(&proxy.url(), &services.key_id, &services.secret),
    )
    .unwrap();
    proxy.delay_every_get(Duration::from_millis(300));
    // One of the three parts (whichever asks first) is cut after 10,000 bytes: it alone asks
    // again, for the rest.
    let cut = 10_000;
    proxy.inject([Fault::CutBodyAfter(cut)]);
    assert!(
        object.read_at(0, data.len()).unwrap() == data,
        "the bytes differ"
    );
    assert!(
        proxy.peak_gets_in_flight() >= 3,
        "{} GETs in flight at most",
        proxy.peak_gets_in_flight()
    );
    let mut ranges: Vec<(u64, u64)> = proxy
        .gets()
        .iter()
        .map(|r| range_of(r.range.as_deref().expect("ranged")))
        .collect();
    ranges.sort();
    let part = PART_BYTES as u64;
    let end = data.len() as u64;
    let parts = [(0, part), (part, 2 * part), (2 * part, end)];
    let resumed: Vec<_> = ranges.iter().filter(|r| !parts.contains(r)).collect();
    assert_eq!(resumed.len(), 1, "{ranges:?}");
    let (from, to) = *resumed[0];
    assert!(
        parts
            .iter()
            .any(|&(a, b)| from == a + cut as u64 && to == b),
        "the cut part resumes where its bytes stopped: {ranges:?}"
    );
    assert_eq!(ranges.len(), 4, "{ranges:?}");
}

/// Every sequence the reader gives in one sweep of `url`, sorted; `opened` runs once the
/// source is open.
fn read_sweep(
    url: &str,
    options: &OpenOptions,
    reader: ReaderOptions,
    opened: impl FnOnce(),
) -> Vec<(u64, f64, usize)> {
    let source = open(url, options)
        .unwrap()
        .into_chunk_source::<f32>()
        .unwrap();
    opened();
    let mut reader = Reader::new(source, reader).unwrap();
    let mut mb = reader.new_minibatch();
    let mut all = Vec::new();
    while reader.next_minibatch(64, &mut mb).unwrap() {
        all.extend(summed(&mb.data));
    }
    all.sort_by(|a, b| a.partial_cmp(b).unwrap());
    all
}

fn one_thread() -> ReaderOptions {
    ReaderOptions {
        threads: 1,
        prefetch_chunks: 2,
        limit: EpochLimit::Sweeps(1),
        ..ReaderOptions::default()
    }
}

/// The test data as a CTF file in `dir` and its CBF, in chunks of `chunk_size` bytes.
fn ctf_and_cbf(dir: &Path, chunk_size: u64) -> (PathBuf, PathBuf) {
    let ctf = dir.join("data.ctf");
    std::fs::write(&ctf, super::open::ctf_text(SEQUENCES)).unwrap();
    let cbf = dir.join("data.cbf");
    let data = open(&ctf, &ctf_options(ReadOptions::new())).unwrap();
    let convert_options = ConvertOptions {
        to: Some(FileFormat::Cbf),
        chunk_size,
        ..ConvertOptions::default()
    };
    convert(data, &cbf, &convert_options, &mut Vec::new()).unwrap();
    (ctf, cbf)
}

#[test]
fn the_reader_fetches_chunks_ahead_of_its_decoding_thread() {
    let Some(services) = services() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (ctf, cbf) = ctf_and_cbf(dir.path(), 64 << 10);
    let prefix = unique("ahead");
    let local = read_sweep(
        ctf.to_str().unwrap(),
        &ctf_options(ReadOptions::new()),
        one_thread(),
        || {},
    );
    assert_eq!(local.len(), SEQUENCES);
    // From the bucket, and CTF without an index and CBF from nginx.
    for (path, index, http) in [
        (&ctf, IndexMode::None, false),
        (&ctf, IndexMode::Full, false),
        (&cbf, IndexMode::Auto, false),
        (&ctf, IndexMode::None, true),
        (&cbf, IndexMode::Auto, true),
    ] {
        let bytes = std::fs::read(path).unwrap();
        let name = format!("{index:?}-{}", path.file_name().unwrap().to_str().unwrap());
        let (proxy, url) = match http {
            false => {
                let key = format!("{prefix}/{name}");
                services.put(&key, &bytes);
                (FaultProxy::start(&services.s3_endpoint), services.url(&key))
            }
            true => {
                let name = format!("{}-{name}", prefix.replace('/', "-"));
                services.serve(&name, &bytes);
                let proxy = FaultProxy::start(&services.http_url);
                let url = format!("{}/{name}", proxy.url());
                (proxy, url)
            }
        };
        let options = ctf_options(
            ReadOptions::new()
                .with_chunk_size(ChunkSize::Bytes(64 << 10))
                .with_index(index)
                .with_storage_options(storage_options(&services, &proxy.url())),
        );
        proxy.delay_every_get(Duration::from_millis(100));
        // Once the source is open, a fetch is reset and one cut short: retried, resumed,
        // nothing lost or doubled.
        let mut before = 0;
        let got = read_sweep(&url, &options, one_thread(), || {
            before = proxy.gets().len();
            proxy.inject([Fault::Reset, Fault::CutBodyAfter(10_000)])
        });
        assert!(got == local, "{url} {index:?}: the sequences differ");
        assert_eq!(
            proxy.faults_left(),
            0,
            "{url} {index:?}: the faults came too late"
        );
        // One decoding thread alone has one GET in flight at a time.
        let peak = proxy.peak_gets_in_flight();
        assert!(peak >= 3, "{url} {index:?}: {peak} GETs in flight at most");
        let fetched: u64 = proxy.gets()[before..]
            .iter()
            .map(|r| {
                let (a, b) = range_of(r.range.as_deref().unwrap());
                b - a
            })
            .sum();
        // Each chunk once (the probes of CTF's bounds, and the two faulted GETs, besides).
        let most = bytes.len() as u64
            + 3 * (64 << 10)
            + (bytes.len() as u64 / (64 << 10) + 2) * (48 << 10);
        assert!(
            fetched <= most,
            "{url} {index:?}: {fetched} bytes fetched for a {}-byte object",
            bytes.len()
        );
    }
}

#[test]
fn chunks_past_the_bounds_are_fetched_ahead_as_room_frees() {
    let Some(services) = services() else { return };
    let dir = tempfile::tempdir().unwrap();
    let chunk = 8 << 10;
    let (ctf, cbf) = ctf_and_cbf(dir.path(), chunk);
    let local = read_sweep(
        ctf.to_str().unwrap(),
        &ctf_options(ReadOptions::new()),
        one_thread(),
        || {},
    );
    // One window of every chunk, named for fetching ahead at once: far more than the bounds.
    let whole_window = ReaderOptions {
        window: Window::All,
        ..one_thread()
    };
    let prefix = unique("room").replace('/', "-");
    for (path, index) in [(&ctf, IndexMode::Full), (&cbf, IndexMode::Auto)] {
        let bytes = std::fs::read(path).unwrap();
        let name = format!("{prefix}-{}", path.file_name().unwrap().to_str().unwrap());
        services.serve(&name, &bytes);
        let proxy = FaultProxy::start(&services.http_url);
        let url = format!("{}/{name}", proxy.url());
        let options = ctf_options(
            ReadOptions::new()
                .with_chunk_size(ChunkSize::Bytes(chunk))
                .with_index(index)
                .with_storage_options(storage_options(&services, &proxy.url())),
        );
        proxy.delay_every_get(Duration::from_millis(50));
        let mut before = 0;
        let got = read_sweep(&url, &options, whole_window.clone(), || {
            before = proxy.gets().len()
        });
        assert!(got == local, "{url}: the sequences differ");
        let gets = proxy.gets()[before..].to_vec();
        assert!(
            gets.len() >= 3 * FETCH_AHEAD_CHUNKS,
            "{url}: {} GETs",
            gets.len()
        );
        let mut ranges: Vec<_> = gets.iter().map(|r| r.range.clone()).collect();
        ranges.sort();
        ranges.dedup();
        assert_eq!(ranges.len(), gets.len(), "{url}: a range fetched twice");
        // Fetched by the one decoding thread, a chunk's GET would have no other in flight.
        let alone = gets.iter().filter(|r| r.gets_in_flight == 0).count();
        assert!(
            alone <= gets.len() / 10,
            "{url}: {alone} of {} GETs had no other in flight",
            gets.len()
        );
    }
}

#[test]
fn rank_0_of_8_fetches_only_its_own_chunks_ahead() {
    let Some(services) = services() else { return };
    let dir = tempfile::tempdir().unwrap();
    let chunk = 16 << 10;
    let (_, cbf) = ctf_and_cbf(dir.path(), chunk);
    let bytes = std::fs::read(&cbf).unwrap();
    let key = unique("rank.cbf");
    services.put(&key, &bytes);
    let proxy = FaultProxy::start(&services.s3_endpoint);
    let options = ctf_options(
        ReadOptions::new().with_storage_options(storage_options(&services, &proxy.url())),
    );
    let source = open(services.url(&key).as_str(), &options)
        .unwrap()
        .into_chunk_source::<f32>()
        .unwrap();
    let chunks = source.chunks().len();
    assert!(chunks >= 16, "{chunks} chunks");
    let before = proxy.gets().len();
    let reader_options = ReaderOptions {
        num_workers: 8,
        worker_rank: 0,
        ..one_thread()
    };
    let mut reader = Reader::new(source, reader_options).unwrap();
    let mut mb = reader.new_minibatch();
    let mut sequences = 0;
    while reader.next_minibatch(64, &mut mb).unwrap() {
        sequences += mb.sequences.len();
    }
    drop(reader);
    assert!(sequences > 0 && sequences < SEQUENCES / 4, "{sequences}");
    let gets = proxy.gets()[before..].to_vec();
    let fetched: u64 = gets
        .iter()
        .map(|r| {
            let (a, b) = range_of(r.range.as_deref().unwrap());
            b - a
        })
        .sum();
    // Rank 0's chunks, each once, nothing of the others'.
    let mut ranges: Vec<_> = gets.iter().map(|r| r.range.clone()).collect();
    ranges.sort();
    ranges.dedup();
    assert_eq!(ranges.len(), gets.len(), "a range fetched twice: {gets:?}");
    assert!(gets.len() <= chunks.div_ceil(8) + 1, "{} GETs", gets.len());
    assert!(
        fetched <= bytes.len() as u64 / 8 + 2 * chunk,
        "{fetched} bytes fetched by rank 0 of 8 of a {}-byte object",
        bytes.len()
    );
}
