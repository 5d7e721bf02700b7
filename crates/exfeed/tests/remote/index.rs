//! The CTF index of a URL (`cacheIndex`), kept in the local cache and keyed by the object's
//! URL, ETag and size: a second open reads it instead of making an index pass, a replaced
//! object is indexed again, and a presigned URL's token shows in no cache file and no message.
//! Counted through the fault proxy, which records every request.

use super::{services, unique, FaultProxy};
use crate::open::{ctf_options, ctf_text, every_chunk, range_len, storage_options, SEQUENCES};
use exfeed::options::{ChunkSize, IndexMode, ReadOptions};
use exfeed::source::IndexOrigin;
use exfeed::{open, Diagnostic, OpenOptions};
use std::path::{Path, PathBuf};

type Sequences = Vec<(u64, f64, usize)>;

/// Full index, cached, chunks of 64 KiB.
fn cached_index() -> ReadOptions {
    ReadOptions::new()
        .with_chunk_size(ChunkSize::Bytes(64 << 10))
        .with_index(IndexMode::Full)
        .with_cache_index(true)
}

/// Where `input`'s index came from, its chunks' sequences and the source's warnings.
fn indexed(input: &str, options: &OpenOptions) -> (IndexOrigin, Sequences, Vec<Diagnostic>) {
    let source = open(input, options).unwrap().into_source::<f32>().unwrap();
    let origin = source.ctf_sources()[0].index_origin();
    let sequences = every_chunk(&*source.chunk_source());
    (origin, sequences, source.diagnostics())
}

/// Every file under `dir`.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files_under(&path));
        } else {
            found.push(path);
        }
    }
    found
}

/// The cache's entries that hold an index (an exfeed index cache's magic).
fn index_entries(cache: &Path) -> Vec<PathBuf> {
    files_under(&cache.join("entries"))
        .into_iter()
        .filter(|p| std::fs::read(p).unwrap().starts_with(b"EXFIDX"))
        .collect()
}

#[test]
fn a_second_open_reads_the_cached_index_and_makes_no_index_pass() {
    let Some(services) = services() else { return };
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let text = ctf_text(SEQUENCES);
    let local = dir.path().join("data.ctf");
    std::fs::write(&local, &text).unwrap();
    let key = unique("indexed.ctf");
    services.put(&key, text.as_bytes());
    let url = services.url(&key);
    let proxy = FaultProxy::start(&services.s3_endpoint);
    let want = every_chunk(
        &*open(&local, &ctf_options(cached_index().with_cache_index(false)))
            .unwrap()
            .into_chunk_source::<f32>()
            .unwrap(),
    );
    assert_eq!(want.len(), SEQUENCES);
    let remote = ctf_options(
        cached_index()
            .with_storage_options(storage_options(&services, &proxy.url()))
            .with_cache_dir(cache.path()),
    );

    let (origin, got, notes) = indexed(&url, &remote);
    assert_eq!(origin, IndexOrigin::ScannedAndCached, "{notes:?}");
    assert_eq!(got, want);
    assert_eq!(index_entries(cache.path()).len(), 1);
    // The ranges read are kept too: removed, so that what the next open needs goes to the
    // store and is counted.
    for entry in files_under(&cache.path().join("entries")) {
        if !index_entries(cache.path()).contains(&entry) {
            std::fs::remove_file(entry).unwrap();
        }
    }

    let before = proxy.gets().len();
    let source = open(url.as_str(), &remote)
        .unwrap()
        .into_source::<f32>()
        .unwrap();
    assert_eq!(source.ctf_sources()[0].index_origin(), IndexOrigin::Cache);
    assert_eq!(source.diagnostics(), vec![]);
    // Opening: format detection's first block and the compression probe, no index pass.
    let opening: u64 = proxy.gets()[before..]
        .iter()
        .map(|r| range_len(r.range.as_deref().expect("every GET is ranged")))
        .sum();
    assert!(
        opening <= (64 << 10) + 4 && opening < text.len() as u64 / 4,
        "{opening} bytes fetched to open a {}-byte object",
        text.len()
    );
    assert_eq!(every_chunk(&*source.chunk_source()), want);
}

/// `lines` CTF lines of the same length, `group` lines to a sequence (keys 0, 1, ...), each
/// line's dense values its number and two zeros: the same size for any `group`.
fn grouped(lines: usize, group: usize) -> String {
    (0..lines)
        .map(|line| format!("{:04} |a {line:04} 0 0\n", line / group))
        .collect()
}

#[test]
fn a_replaced_object_is_indexed_again_never_read_with_a_stale_index() {
    let Some(services) = services() else { return };
    let cache = tempfile::tempdir().unwrap();
    let key = unique("replaced-index.ctf");
    let url = services.url(&key);
    let options = OpenOptions {
        inputs: vec!["a:dense:3".parse().unwrap()],
        read: cached_index()
            .with_chunk_size(ChunkSize::Bytes(1000))
            .with_storage_options(storage_options(&services, &services.s3_endpoint))
            .with_cache_dir(cache.path()),
        ..OpenOptions::default()
    };
    let (first, second) = (grouped(600, 2), grouped(600, 3));
    // The same size: only the ETag tells the versions apart.
    assert_eq!(first.len(), second.len());
    for (text, group) in [(first, 2), (second, 3)] {
        services.put(&key, text.as_bytes());
        let (origin, got, notes) = indexed(&url, &options);
        assert_eq!(origin, IndexOrigin::ScannedAndCached, "{notes:?}");
        assert_eq!(got.len(), 600 / group);
        // Sequence 5: lines 5·group and on, their values summed.
        let lines = 5 * group..6 * group;
        assert_eq!(
            got[5],
            (5, lines.map(|l| l as f64).sum(), group),
            "group {group}"
        );
        let (origin, again, _) = indexed(&url, &options);
        assert_eq!(origin, IndexOrigin::Cache);
        assert_eq!(again, got);
    }
    // Each version has its index (the first ages out with its ranges).
    assert_eq!(index_entries(cache.path()).len(), 2);
}

#[test]
fn a_presigned_urls_token_is_in_no_cache_file_and_no_message() {
    let Some(services) = services() else { return };
    let cache = tempfile::tempdir().unwrap();
    let name = format!("presigned-{}.ctf", std::process::id());
    services.serve(&name, ctf_text(100).as_bytes());
    let proxy = FaultProxy::start(&services.http_url);
    let token = "0123456789abcdef0123456789abcdef-token";
    let query = format!("X-Amz-Expires=3600&X-Amz-Signature={token}");
    let url = format!("{}/{name}?{query}", proxy.url());
    let options = ctf_options(cached_index().with_cache_dir(cache.path()));

    let (origin, got, notes) = indexed(&url, &options);
    assert_eq!(origin, IndexOrigin::ScannedAndCached, "{notes:?}");
    assert_eq!(got.len(), 100);
    let (origin, again, notes) = indexed(&url, &options);
    assert_eq!(origin, IndexOrigin::Cache, "{notes:?}");
    assert_eq!(again, got);
    // The query reached the server with every request.
    let seen = proxy.requests("GET");
    assert!(!seen.is_empty());
    assert!(
        seen.iter().all(|r| r.path.ends_with(&format!("?{query}"))),
        "{seen:?}"
    );
    // Neither the token nor the URL is in a file's name or content.
    let files = files_under(cache.path());
    assert!(!index_entries(cache.path()).is_empty());
    for file in files {
        let shown = file.display().to_string();
        assert!(!shown.contains(token) && !shown.contains(&name), "{shown}");
        let bytes = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
        assert!(
            !bytes.contains(token) && !bytes.contains(&name),
            "{shown} holds the URL"
        );
    }

    // Nor in a message: a missing object, a chunk with an error.
    let missing = format!("{}/no-{name}?{query}", proxy.url());
    let err = open(missing.as_str(), &options).err().unwrap();
    let shown = format!("{err} {err:?}");
    assert!(shown.contains(&format!("no-{name}")), "{shown}");
    assert!(!shown.contains(token), "{shown}");
    let bad = format!("bad-{name}");
    services.serve(&bad, b"0 |a 1 2 3\n1 |a 4 x 6\n");
    let url = format!("{}/{bad}?{query}", proxy.url());
    let source = open(url.as_str(), &options)
        .unwrap()
        .into_chunk_source::<f32>()
        .unwrap();
    let mut batch = exfeed::SequenceBatch::new(source.streams());
    let err = source.read_chunk(0, &mut batch).unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(shown.contains(&format!("{bad}?")), "{shown}");
    assert!(!shown.contains(token), "{shown}");
}
