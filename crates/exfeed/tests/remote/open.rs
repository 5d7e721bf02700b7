//! URLs through the front door, `exfeed::open`: every format read from the bucket and from the
//! HTTP server gives what its local file gives, CTF and CBF by byte range (checked on the
//! ranges the fault proxy saw), and errors name the URL with no secret in them.

use super::{services, unique, FaultProxy, Services};
use exfeed::configured::{AnyReader, ReaderArgs, RunOptions};
use exfeed::convert::{convert, ConvertOptions};
use exfeed::format::FileFormat;
use exfeed::io::StorageOptions;
use exfeed::options::{ChunkSize, IndexMode, ReadOptions};
use exfeed::{open, OpenOptions, SequenceBatch};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The sequences of the test data (about 600 KB of CTF).
pub(crate) const SEQUENCES: usize = 12_000;

/// CTF text of `n` sequences of 1 to 4 lines, a dense stream of 3 and a sparse one of 5.
pub(crate) fn ctf_text(n: usize) -> String {
    let mut text = String::new();
    for s in 0..n {
        for line in 0..(s % 4 + 1) {
            text += &format!("{s} |a {} {} {}", s, line, s * 7 % 11);
            if line == 0 {
                text += &format!(" |b {}:1.5", s % 5);
            }
            text += "\n";
        }
    }
    text
}

pub(crate) fn ctf_options(read: ReadOptions) -> OpenOptions {
    OpenOptions {
        inputs: vec!["a:dense:3".parse().unwrap(), "b:sparse:5".parse().unwrap()],
        read,
        ..OpenOptions::default()
    }
}

pub(crate) fn storage_options(services: &Services, endpoint: &str) -> StorageOptions {
    [
        ("aws_endpoint", endpoint),
        ("aws_access_key_id", services.key_id.as_str()),
        ("aws_secret_access_key", services.secret.as_str()),
        ("aws_region", "us-east-1"),
    ]
    .into_iter()
    .collect()
}

/// Every sequence's key, the sum of its values and its sample count, in file order.
pub(crate) fn sequences(input: &str, options: &OpenOptions) -> Vec<(u64, f64, usize)> {
    let mut reader = open(input, options).unwrap().sequences::<f32>().unwrap();
    let mut batch = SequenceBatch::new(reader.streams());
    let mut all = Vec::new();
    while reader
        .next_batch(&mut batch, &mut exfeed::error::Ignore)
        .unwrap()
    {
        all.extend(summed(&batch));
    }
    all
}

pub(crate) fn summed(batch: &SequenceBatch<f32>) -> Vec<(u64, f64, usize)> {
    (0..batch.len())
        .map(|i| {
            let (mut sum, mut samples) = (0.0, 0);
            for stream in batch.streams() {
                for j in stream.sequence_samples(i) {
                    let values = match stream.storage() {
                        exfeed::Storage::Dense => stream.dense_sample(j),
                        exfeed::Storage::Sparse => stream.sparse_sample(j).1,
                    };
                    sum += values.iter().map(|&v| v as f64).sum::<f64>();
                    samples += 1;
                }
            }
            (batch.keys()[i], sum, samples)
        })
        .collect()
}

/// The reader's source over `input`.
fn chunk_source(
    input: impl Into<exfeed::io::InputPath>,
    options: &OpenOptions,
) -> std::sync::Arc<dyn exfeed::reader::ChunkSource<f32>> {
    open(input, options)
        .unwrap()
        .into_chunk_source::<f32>()
        .unwrap()
}

pub(crate) fn chunks(input: &str, options: &OpenOptions) -> Vec<(u64, f64, usize)> {
    every_chunk(&*chunk_source(input, options))
}

/// Every chunk of `source`, read in order: each sequence's key, sum and sample count.
pub(crate) fn every_chunk(source: &dyn exfeed::reader::ChunkSource<f32>) -> Vec<(u64, f64, usize)> {
    let mut all = Vec::new();
    for c in 0..source.chunks().len() {
        let mut batch = SequenceBatch::new(source.streams());
        source.read_chunk(c, &mut batch).unwrap();
        all.extend(summed(&batch));
    }
    all
}

/// The local files: CTF, the same gzip-compressed, its CBF (64 KiB chunks) and, with the
/// `arrow` feature, its Parquet and Arrow IPC.
pub(crate) fn local_files(dir: &Path) -> Vec<(PathBuf, FileFormat)> {
    let ctf = dir.join("data.ctf");
    std::fs::write(&ctf, ctf_text(SEQUENCES)).unwrap();
    let gz = dir.join("data.ctf.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(&std::fs::read(&ctf).unwrap()).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let mut files = vec![(ctf.clone(), FileFormat::Ctf), (gz, FileFormat::Ctf)];
    let mut targets = vec![("data.cbf", FileFormat::Cbf)];
    if cfg!(feature = "arrow") {
        targets.push(("data.parquet", FileFormat::Parquet));
        targets.push(("data.arrow", FileFormat::ArrowIpc));
    }
    for (name, format) in targets {
        let out = dir.join(name);
        convert_ctf(&ctf, &out, format);
        files.push((out, format));
    }
    files
}

/// Converts the CTF file `ctf` to `out` in `format`, in chunks of 64 KiB.
fn convert_ctf(ctf: &Path, out: &Path, format: FileFormat) {
    let convert_options = ConvertOptions {
        to: Some(format),
        chunk_size: 64 << 10,
        ..ConvertOptions::default()
    };
    let data = open(ctf, &ctf_options(ReadOptions::new())).unwrap();
    convert(data, out, &convert_options, &mut Vec::new()).unwrap();
}

#[test]
fn every_format_reads_from_the_bucket_and_the_server_as_from_its_file() {
    let Some(services) = services() else { return };
    let dir = tempfile::tempdir().unwrap();
    let prefix = unique("formats");
    for (path, format) in local_files(dir.path()) {
        let name = path.file_name().unwrap().to_str().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let key = format!("{prefix}/{name}");
        services.put(&key, &bytes);
        let s3 = services.url(&key);
        let http = services.serve(&format!("{}-{name}", prefix.replace('/', "-")), &bytes);
        for read in [
            ReadOptions::new().with_chunk_size(ChunkSize::Bytes(50_000)),
            ReadOptions::new()
                .with_chunk_size(ChunkSize::Bytes(50_000))
                .with_index(IndexMode::Full),
        ] {
            let local = ctf_options(read);
            let remote = OpenOptions {
                read: (local.read.clone())
                    .with_storage_options(storage_options(&services, &services.s3_endpoint)),
                ..local.clone()
            };
            let want = sequences(path.to_str().unwrap(), &local);
            assert_eq!(want.len(), SEQUENCES);
            let want_chunks = chunks(path.to_str().unwrap(), &local);
            assert_eq!(want_chunks.len(), SEQUENCES);
            for url in [&s3, &http] {
                let data = open(url.as_str(), &remote).unwrap();
                assert_eq!(data.format(), format, "{url}");
                assert_eq!(data.name(), url.as_str());
                assert_eq!(sequences(url, &remote), want, "{url}");
                assert_eq!(chunks(url, &remote), want_chunks, "{url}");
            }
        }
    }
}

#[test]
fn lens_files_stream_from_a_url() {
    let Some(services) = services() else { return };
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples/patterns.ex");
    let bytes = std::fs::read(&sample).unwrap();
    let key = unique("patterns.ex");
    services.put(&key, &bytes);
    let options = OpenOptions {
        read: ReadOptions::new()
            .with_storage_options(storage_options(&services, &services.s3_endpoint)),
        ..OpenOptions::default()
    };
    let local = open(&sample, &options).unwrap().lens_set().unwrap();
    for url in [services.url(&key), services.serve("patterns.ex", &bytes)] {
        let data = open(url.as_str(), &options).unwrap();
        assert_eq!(data.format(), FileFormat::LensText, "{url}");
        let mut examples = data.lens_examples(false).unwrap();
        let mut names = Vec::new();
        while let Some(example) = examples.next_example().unwrap() {
            names.push(example.name.clone());
        }
        let want: Vec<_> = local.examples.iter().map(|e| e.name.clone()).collect();
        assert_eq!(names, want, "{url}");
    }
}

#[test]
fn a_ctf_chunk_and_a_cbf_chunk_are_read_by_their_byte_ranges() {
    let Some(services) = services() else { return };
    let dir = tempfile::tempdir().unwrap();
    let files = local_files(dir.path());
    let proxy = FaultProxy::start(&services.s3_endpoint);
    let prefix = unique("ranges");
    for (path, format) in files
        .iter()
        .filter(|(p, _)| p.extension().is_some_and(|e| e == "ctf" || e == "cbf"))
    {
        let bytes = std::fs::read(path).unwrap();
        let key = format!("{prefix}/{}", path.file_name().unwrap().to_str().unwrap());
        services.put(&key, &bytes);
        let options = ctf_options(
            ReadOptions::new()
                .with_chunk_size(ChunkSize::Bytes(64 << 10))
                .with_storage_options(storage_options(&services, &proxy.url())),
        );
        let fetched_since = |before: usize| -> u64 {
            proxy.gets()[before..]
                .iter()
                .map(|r| range_len(r.range.as_deref().expect("every GET is ranged")))
                .sum()
        };
        let before_open = proxy.gets().len();
        let source = chunk_source(services.url(&key).as_str(), &options);
        // Opening looks at the object's first bytes (format, compression; CTF: the head its
        // plan is estimated from) and CBF's tail and header: a few small ranges, never the
        // whole object.
        let opening = fetched_since(before_open);
        assert!(
            opening <= 3 * (64 << 10) && (opening as usize) < bytes.len() / 2,
            "{format:?}: {opening} bytes fetched to open a {}-byte object",
            bytes.len()
        );
        let before = proxy.gets().len();
        let chunk = source.chunks().len() / 2;
        let mut batch = SequenceBatch::new(source.streams());
        source.read_chunk(chunk, &mut batch).unwrap();
        assert!(!batch.is_empty());
        if matches!(format, FileFormat::Cbf) {
            // Not in pieces, as a local file is: each would be a request.
            assert_eq!(proxy.gets().len() - before, 1, "one GET for a CBF chunk");
        }
        let fetched = fetched_since(before);
        // The chunk's bytes, and for CTF the probes that find its sequences' bounds.
        let most = (64 << 10) * 2;
        assert!(
            fetched <= most && (fetched as usize) < bytes.len() / 4,
            "{format:?}: {fetched} bytes fetched for one chunk of a {}-byte object",
            bytes.len()
        );
    }
}

#[test]
fn opening_a_url_sends_one_head_request() {
    let Some(services) = services() else { return };
    let dir = tempfile::tempdir().unwrap();
    let proxy = FaultProxy::start(&services.s3_endpoint);
    let prefix = unique("one-head");
    let read = ReadOptions::new()
        .with_chunk_size(ChunkSize::Bytes(64 << 10))
        .with_storage_options(storage_options(&services, &proxy.url()));
    let heads = || proxy.requests("HEAD").len();
    for (path, format) in local_files(dir.path()) {
        let name = path.file_name().unwrap().to_str().unwrap();
        let key = format!("{prefix}/{name}");
        services.put(&key, &std::fs::read(&path).unwrap());
        let url = services.url(&key);
        let indexes = [IndexMode::None, IndexMode::Full];
        for (index, cached) in indexes.into_iter().zip([false, true]) {
            let options = ctf_options(read.clone().with_index(index).with_cache_index(cached));
            // The reader's source, one chunk read; the sequences, read as a stream.
            let before = heads();
            let source = chunk_source(url.as_str(), &options);
            let mut batch = SequenceBatch::new(source.streams());
            source.read_chunk(0, &mut batch).unwrap();
            assert!(!batch.is_empty());
            assert_eq!(
                heads() - before,
                1,
                "{format:?} {index:?}: {:?}",
                proxy.requests("HEAD")
            );
            let before = heads();
            assert_eq!(sequences(&url, &options).len(), SEQUENCES);
            assert_eq!(heads() - before, 1, "{format:?} {index:?}: sequences");
        }
    }
    // A Lens file, streamed.
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples/patterns.ex");
    let key = format!("{prefix}/patterns.ex");
    services.put(&key, &std::fs::read(&sample).unwrap());
    let before = heads();
    let options = OpenOptions {
        read: read.clone(),
        ..OpenOptions::default()
    };
    let mut examples = open(services.url(&key).as_str(), &options)
        .unwrap()
        .lens_examples(false)
        .unwrap();
    while examples.next_example().unwrap().is_some() {}
    assert_eq!(heads() - before, 1, "Lens");

    // The configured reader (what `exfeed read` and Python's Reader build): its format found
    // at configuration, then read, with one HEAD.
    let url = services.url(&format!("{prefix}/data.ctf"));
    let args = ReaderArgs {
        files: vec![url.into()],
        inputs: ctf_options(ReadOptions::new()).inputs,
        read: read.clone().with_cache_index(true),
        ..ReaderArgs::default()
    };
    let before = heads();
    let gets_before = proxy.gets().len();
    let (config, inputs) = args.configure(None).unwrap();
    let run = RunOptions {
        inputs,
        ..RunOptions::default()
    };
    let mut reader = AnyReader::open(&config, &run).unwrap();
    let mut minibatch = reader.new_minibatch();
    assert!(reader.next_minibatch(100, &mut minibatch).unwrap());
    assert_eq!(heads() - before, 1, "the configured reader");
    // Its first 64 KiB, which format detection reads and then the CTF reader, fetched once.
    let first_block = proxy.gets()[gets_before..]
        .iter()
        .filter(|r| r.range.as_deref() == Some("bytes=0-65535"))
        .count();
    assert_eq!(first_block, 1, "{:?}", &proxy.gets()[gets_before..]);
}

/// Reading one row group of a Parquet object (one record batch of an Arrow IPC object) fetches
/// the footer and that chunk's bytes only, and gives what the local file gives.
#[cfg(feature = "arrow")]
#[test]
fn a_parquet_row_group_and_an_arrow_record_batch_are_read_by_their_byte_ranges() {
    let Some(services) = services() else { return };
    let dir = tempfile::tempdir().unwrap();
    let ctf = dir.path().join("big.ctf");
    std::fs::write(&ctf, ctf_text(8 * SEQUENCES)).unwrap();
    let proxy = FaultProxy::start(&services.s3_endpoint);
    let prefix = unique("columnar-ranges");
    for (name, format) in [
        ("big.parquet", FileFormat::Parquet),
        ("big.arrow", FileFormat::ArrowIpc),
    ] {
        let path = dir.path().join(name);
        convert_ctf(&ctf, &path, format);
        let bytes = std::fs::read(&path).unwrap();
        let key = format!("{prefix}/{name}");
        services.put(&key, &bytes);
        let options = ctf_options(
            ReadOptions::new().with_storage_options(storage_options(&services, &proxy.url())),
        );
        let local = chunk_source(&path, &options);

        let before = proxy.gets().len();
        let source = chunk_source(services.url(&key).as_str(), &options);
        let opened = proxy.gets().len();
        let chunk = source.chunks().len() / 2;
        assert!(
            source.chunks().len() >= 8,
            "{format:?}: {}",
            source.chunks().len()
        );
        let mut batch = SequenceBatch::new(source.streams());
        source.read_chunk(chunk, &mut batch).unwrap();
        let mut want = SequenceBatch::new(local.streams());
        local.read_chunk(chunk, &mut want).unwrap();
        assert!(!batch.is_empty());
        assert_eq!(summed(&batch), summed(&want), "{format:?}");

        let fetched = |range: std::ops::Range<usize>| -> u64 {
            proxy.gets()[range]
                .iter()
                .map(|r| range_len(r.range.as_deref().expect("every GET is ranged")))
                .sum()
        };
        let chunk_gets = proxy.gets().len() - opened;
        let for_chunk = fetched(opened..proxy.gets().len());
        let for_open = fetched(before..opened);
        let chunk_bytes = source.chunks()[chunk].bytes;
        // One request a chunk. Parquet: the row group's column chunks, adjacent. Arrow IPC:
        // the record batch's block, its header and body (the footer was read when opened).
        assert_eq!(chunk_gets, 1, "{format:?}");
        match format {
            FileFormat::Parquet => assert_eq!(for_chunk, chunk_bytes, "{format:?}"),
            _ => assert!(
                for_chunk <= chunk_bytes + 4096,
                "{format:?}: {for_chunk} bytes"
            ),
        }
        // Opening: format detection's first block (64 KiB), the footer and, for Arrow IPC,
        // each record batch's header.
        assert!(
            for_open + for_chunk < bytes.len() as u64 / 4,
            "{format:?}: {for_open} + {for_chunk} bytes fetched of a {}-byte object",
            bytes.len()
        );
    }
}

/// The length of `bytes=A-B`.
pub(crate) fn range_len(range: &str) -> u64 {
    let (a, b) = range
        .strip_prefix("bytes=")
        .and_then(|r| r.split_once('-'))
        .unwrap_or_else(|| panic!("not a bounded range: {range}"));
    b.parse::<u64>().unwrap() - a.parse::<u64>().unwrap() + 1
}

#[test]
fn errors_name_the_url_and_hold_no_secret() {
    let Some(services) = services() else { return };
    let missing = services.url(&unique("missing.ctf"));
    let options = ctf_options(
        ReadOptions::new().with_storage_options(storage_options(&services, &services.s3_endpoint)),
    );
    let err = open(missing.as_str(), &options).err().unwrap();
    assert!(err.to_string().starts_with(&missing), "{err}");
    assert!(err.to_string().contains("not found"), "{err}");

    let key = unique("bad.ctf");
    services.put(&key, b"0 |a 1 2 3 |b 0:1\n1 |a 4 x 6 |b 1:1\n");
    let url = services.url(&key);
    let err = sequences_error(&url, &options);
    assert!(err.starts_with(&format!("{url}:2:")), "{err}");

    let wrong = OpenOptions {
        read: ReadOptions::new().with_storage_options(
            [
                ("aws_endpoint", services.s3_endpoint.as_str()),
                ("aws_access_key_id", services.key_id.as_str()),
                ("aws_secret_access_key", "not-the-secret-0123456789"),
                ("aws_region", "us-east-1"),
            ]
            .into_iter()
            .collect(),
        ),
        ..options.clone()
    };
    let err = open(url.as_str(), &wrong).err().unwrap();
    let shown = format!("{err} {err:?} {wrong:?}");
    assert!(err.to_string().starts_with(&url), "{err}");
    assert!(
        !shown.contains("not-the-secret-0123456789") && !shown.contains(&services.secret),
        "{shown}"
    );
}

fn sequences_error(url: &str, options: &OpenOptions) -> String {
    let mut reader = open(url, options).unwrap().sequences::<f32>().unwrap();
    let mut batch = SequenceBatch::new(reader.streams());
    loop {
        match reader.next_batch(&mut batch, &mut exfeed::error::Ignore) {
            Ok(true) => continue,
            Ok(false) => panic!("{url} read without an error"),
            Err(e) => return e.to_string(),
        }
    }
}

#[test]
fn a_cache_dir_serves_a_second_read_and_fetches_a_replaced_object_again() {
    let Some(services) = services() else { return };
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let proxy = FaultProxy::start(&services.s3_endpoint);
    let prefix = unique("cached");
    let local = ctf_options(ReadOptions::new().with_chunk_size(ChunkSize::Bytes(64 << 10)));
    let cached = ctf_options(
        (local.read.clone())
            .with_storage_options(storage_options(&services, &proxy.url()))
            .with_cache_dir(cache.path()),
    );
    // CTF by byte range, gzip-compressed CTF as a stream, CBF by byte range.
    for (path, _) in local_files(dir.path())
        .iter()
        .filter(|(_, f)| *f != FileFormat::Parquet)
    {
        let name = path.file_name().unwrap().to_str().unwrap();
        let key = format!("{prefix}/{name}");
        services.put(&key, &std::fs::read(path).unwrap());
        let url = services.url(&key);
        let (want_chunks, want) = (
            chunks(path.to_str().unwrap(), &local),
            sequences(path.to_str().unwrap(), &local),
        );
        assert_eq!(chunks(&url, &cached), want_chunks, "{name}");
        assert_eq!(sequences(&url, &cached), want, "{name}");
        let fetched = proxy.gets().len();
        assert!(fetched > 0);
        // Again: every range from the cache, only the HEAD that checks the version goes out.
        assert_eq!(chunks(&url, &cached), want_chunks, "{name}");
        assert_eq!(sequences(&url, &cached), want, "{name}");
        assert_eq!(
            proxy.gets().len(),
            fetched,
            "{name}: read again from the store"
        );
    }
    assert!(
        std::fs::read_dir(cache.path().join("entries"))
            .unwrap()
            .count()
            > 0
    );

    // A replaced object (another ETag and size) is fetched again, never served stale.
    let key = format!("{prefix}/replaced.ctf");
    let url = services.url(&key);
    services.put(&key, ctf_text(100).as_bytes());
    assert_eq!(chunks(&url, &cached).len(), 100);
    services.put(&key, ctf_text(120).as_bytes());
    let fetched = proxy.gets().len();
    let again = chunks(&url, &cached);
    assert_eq!(again.len(), 120);
    assert_eq!(again.last().unwrap().0, 119);
    assert!(proxy.gets().len() > fetched);
    assert!(exfeed::io::take_cache_warnings().is_empty());
}

#[test]
fn what_the_cache_cannot_keep_is_read_uncached_with_a_warning() {
    let Some(services) = services() else { return };
    let cache = tempfile::tempdir().unwrap();
    let key = unique("too-big.ctf");
    services.put(&key, ctf_text(2_000).as_bytes());
    let url = services.url(&key);
    let read = ReadOptions::new()
        .with_storage_options(storage_options(&services, &services.s3_endpoint))
        .with_cache_dir(cache.path())
        .with_cache_limit(1_000);
    assert_eq!(chunks(&url, &ctf_options(read)).len(), 2_000);
    let warnings = exfeed::io::take_cache_warnings();
    assert!(!warnings.is_empty());
    let shown = warnings[0].to_string();
    assert!(
        shown.contains(&url) && shown.contains("read uncached"),
        "{shown}"
    );
    assert!(!shown.contains(&services.secret), "{shown}");
}
