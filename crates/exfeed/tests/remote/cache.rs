//! The shared cache (`exfeed::io::remote_cache`) against SeaweedFS, through the fault proxy,
//! which counts the GET requests that reach the server. Some tests run this test binary again
//! as child processes (the `child_*` tests, ignored unless a parent runs them): two at once on
//! one cache, one killed mid-write, one whose files may not grow past 64 KiB.

use super::{pattern, services, unique, Services};
use crate::fault_proxy::{Fault, FaultProxy};
use exfeed::io::remote::{RemoteObject, RemoteOptions};
use exfeed::io::remote_cache::{CacheOptions, RemoteCache};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

const SIZE: usize = 2_000_000;
const RANGE: usize = 100_000;

/// A child's instructions, passed in its environment.
const CHILD_CACHE: &str = "EXFEED_TEST_CHILD_CACHE";
const CHILD_ENDPOINT: &str = "EXFEED_TEST_CHILD_ENDPOINT";
const CHILD_KEY: &str = "EXFEED_TEST_CHILD_KEY";
const CHILD_SEED: &str = "EXFEED_TEST_CHILD_SEED";

fn cache_at(dir: &Path, limit: u64) -> RemoteCache {
    RemoteCache::open(&CacheOptions {
        dir: dir.to_path_buf(),
        limit,
    })
    .unwrap()
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    found.sort();
    found
}

fn bytes_in(dir: &Path) -> u64 {
    files_in(dir)
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum()
}

/// This test binary, running the ignored test `name` with `env`.
fn spawn_child(name: &str, env: &[(&str, String)]) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &format!("cache::{name}"), "--ignored"])
        .args(["--nocapture", "--test-threads=1"])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .spawn()
        .unwrap()
}

/// What a parent gave its child: the cache, the options (through the proxy), the object's URL
/// and its bytes.
fn child_setup() -> (Services, PathBuf, RemoteOptions, String, Vec<u8>) {
    let var = |name: &str| {
        std::env::var(name).unwrap_or_else(|_| panic!("{name} unset: a child of another test"))
    };
    let services = services().expect("the services' variables");
    let options = services.options_at(&var(CHILD_ENDPOINT), &services.key_id, &services.secret);
    let url = services.url(&var(CHILD_KEY));
    let data = pattern(SIZE, var(CHILD_SEED).parse().unwrap());
    (services, var(CHILD_CACHE).into(), options, url, data)
}

fn child_env(
    cache: &Path,
    proxy: &FaultProxy,
    key: &str,
    seed: u64,
) -> Vec<(&'static str, String)> {
    vec![
        (CHILD_CACHE, cache.display().to_string()),
        (CHILD_ENDPOINT, proxy.url()),
        (CHILD_KEY, key.to_string()),
        (CHILD_SEED, seed.to_string()),
    ]
}

#[test]
#[ignore = "a child process of two_processes_fill_one_cache_at_once"]
fn child_reads_every_range_and_the_whole() {
    let (_services, dir, options, url, data) = child_setup();
    let cache = cache_at(&dir, 1 << 30);
    let object = RemoteObject::open(&url, &options).unwrap();
    for offset in (0..SIZE).step_by(RANGE) {
        let got = cache.read_at(&object, offset as u64, RANGE).unwrap();
        assert!(got == data[offset..offset + RANGE], "range at {offset}");
    }
    let copy = cache.local_copy(&object).unwrap();
    assert!(copy.is_cached());
    assert!(std::fs::read(copy.path()).unwrap() == data);
    assert_eq!(cache.take_warnings(), vec![]);
}

#[test]
fn two_processes_fill_one_cache_at_once() {
    let Some(services) = services() else { return };
    let key = unique("shared.bin");
    services.put(&key, &pattern(SIZE, 11));
    let dir = tempfile::tempdir().unwrap();
    let proxy = FaultProxy::start(&services.s3_endpoint);
    let env = child_env(dir.path(), &proxy, &key, 11);
    let children: Vec<Child> = (0..2)
        .map(|_| spawn_child("child_reads_every_range_and_the_whole", &env))
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    // Each range was fetched once, by one of them, and the whole object once (one GET: it is
    // smaller than a piece); the other waited and read the entry.
    let ranges = SIZE / RANGE;
    assert_eq!(proxy.gets().len(), ranges + 1, "{:?}", proxy.gets());
    let entries = files_in(&dir.path().join("entries"));
    assert_eq!(entries.len(), ranges + 1);
    assert_eq!(bytes_in(&dir.path().join("entries")), 2 * SIZE as u64);
    assert_eq!(files_in(&dir.path().join("tmp")), Vec::<PathBuf>::new());
    // A third process, this one, reads it all from the cache.
    let cache = cache_at(dir.path(), 1 << 30);
    let options = services.options_at(&proxy.url(), &services.key_id, &services.secret);
    let object = RemoteObject::open(&services.url(&key), &options).unwrap();
    let data = pattern(SIZE, 11);
    assert!(cache.read_at(&object, RANGE as u64, RANGE).unwrap() == data[RANGE..2 * RANGE]);
    assert!(std::fs::read(cache.local_copy(&object).unwrap().path()).unwrap() == data);
    assert_eq!(proxy.gets().len(), ranges + 1);
}

#[test]
fn a_replaced_object_is_fetched_again() {
    let Some(services) = services() else { return };
    let key = unique("replaced.bin");
    let dir = tempfile::tempdir().unwrap();
    let cache = cache_at(dir.path(), 1 << 30);
    // The same size, other bytes: only the ETag tells the second version from the first.
    for seed in [12, 13] {
        let data = pattern(50_000, seed);
        services.put(&key, &data);
        let object = RemoteObject::open(&services.url(&key), &services.options()).unwrap();
        assert_eq!(cache.read_at(&object, 100, 1000).unwrap(), &data[100..1100]);
        let copy = cache.local_copy(&object).unwrap();
        assert_eq!(std::fs::read(copy.path()).unwrap(), data);
    }
    assert_eq!(files_in(&dir.path().join("entries")).len(), 4);
}

#[test]
fn eviction_goes_by_least_recent_use() {
    let Some(services) = services() else { return };
    let key = unique("evicted.bin");
    let data = pattern(10_000, 14);
    services.put(&key, &data);
    let dir = tempfile::tempdir().unwrap();
    let cache = cache_at(dir.path(), 3000);
    let proxy = FaultProxy::start(&services.s3_endpoint);
    let options = services.options_at(&proxy.url(), &services.key_id, &services.secret);
    let object = RemoteObject::open(&services.url(&key), &options).unwrap();
    let read = |block: u64| {
        let at = block as usize * 1000;
        assert_eq!(
            cache.read_at(&object, block * 1000, 1000).unwrap(),
            &data[at..at + 1000]
        );
        proxy.gets().len()
    };
    // Blocks 0, 1, 2 fill it; 0 is used again; 3 then evicts 1, the least recently used.
    assert_eq!(
        [read(0), read(1), read(2), read(0), read(3)],
        [1, 2, 3, 3, 4]
    );
    assert!(bytes_in(&dir.path().join("entries")) <= 3000);
    assert_eq!([read(0), read(2), read(3)], [4, 4, 4]);
    assert_eq!(read(1), 5);
    assert!(bytes_in(&dir.path().join("entries")) <= 3000);
    assert_eq!(cache.take_warnings(), vec![]);
}

#[test]
#[ignore = "a child process of a_killed_writer_leaves_no_trusted_entry"]
fn child_copies_the_whole() {
    let (_services, dir, options, url, _data) = child_setup();
    let cache = cache_at(&dir, 1 << 30);
    let object = RemoteObject::open(&url, &options).unwrap();
    cache.local_copy(&object).unwrap();
    unreachable!("killed by the parent before its copy is whole");
}

#[test]
fn a_killed_writer_leaves_no_trusted_entry() {
    let Some(services) = services() else { return };
    // Larger than a piece (8 MiB): two GETs, the second held back by the proxy.
    let key = unique("killed.bin");
    let size = (8 << 20) + 1000;
    let data = pattern(size, 15);
    services.put(&key, &data);
    let dir = tempfile::tempdir().unwrap();
    let proxy = FaultProxy::start(&services.s3_endpoint);
    proxy.inject([
        Fault::Delay(Duration::ZERO),
        Fault::Delay(Duration::from_secs(5)),
    ]);
    let mut child = spawn_child(
        "child_copies_the_whole",
        &child_env(dir.path(), &proxy, &key, 15),
    );
    proxy.wait_for("GET", 2);
    child.kill().unwrap();
    child.wait().unwrap();
    // Half written: a temporary file, no entry.
    assert_eq!(files_in(&dir.path().join("entries")), Vec::<PathBuf>::new());
    assert_eq!(files_in(&dir.path().join("tmp")).len(), 1);
    let cache = cache_at(dir.path(), 1 << 30);
    let object = RemoteObject::open(&services.url(&key), &services.options()).unwrap();
    let copy = cache.local_copy(&object).unwrap();
    assert!(copy.is_cached());
    assert!(std::fs::read(copy.path()).unwrap() == data);
    // The next fill removed what the killed one left.
    assert_eq!(files_in(&dir.path().join("tmp")), Vec::<PathBuf>::new());
}

#[test]
#[ignore = "a child process of a_full_cache_directory_degrades_to_uncached_reads"]
fn child_reads_with_files_limited_to_64_kib() {
    // The kernel refuses to grow any file past 64 KiB (EFBIG, as a full disk refuses with
    // ENOSPC); its signal is ignored so that the write fails instead.
    let limit = libc::rlimit {
        rlim_cur: 64 << 10,
        rlim_max: 64 << 10,
    };
    // SAFETY: plain system calls on this process's own limits and signal disposition.
    unsafe {
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    let (_services, dir, options, url, data) = child_setup();
    let cache = cache_at(&dir, 1 << 30);
    let object = RemoteObject::open(&url, &options).unwrap();
    assert!(cache.read_at(&object, 5, 200_000).unwrap() == data[5..200_005]);
    let warnings = cache.take_warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].message.contains("read uncached"),
        "{warnings:?}"
    );
    assert!(warnings[0].to_string().contains(&url), "{warnings:?}");
    assert_eq!(files_in(&dir.join("entries")), Vec::<PathBuf>::new());
    assert_eq!(files_in(&dir.join("tmp")), Vec::<PathBuf>::new());
}

#[test]
fn a_full_cache_directory_degrades_to_uncached_reads() {
    let Some(services) = services() else { return };
    let key = unique("full.bin");
    let data = pattern(SIZE, 16);
    services.put(&key, &data);
    // A disk that refuses to grow files.
    let dir = tempfile::tempdir().unwrap();
    let proxy = FaultProxy::start(&services.s3_endpoint);
    let mut child = spawn_child(
        "child_reads_with_files_limited_to_64_kib",
        &child_env(dir.path(), &proxy, &key, 16),
    );
    assert!(child.wait().unwrap().success());
    // A limit smaller than one entry.
    let cache = cache_at(dir.path(), 1000);
    let object = RemoteObject::open(&services.url(&key), &services.options()).unwrap();
    assert!(cache.read_at(&object, 0, 5000).unwrap() == data[..5000]);
    let copy = cache.local_copy(&object).unwrap();
    assert!(!copy.is_cached());
    assert!(std::fs::read(copy.path()).unwrap() == data);
    let private = copy.path().to_path_buf();
    drop(copy);
    assert!(!private.exists());
    let warnings = cache.take_warnings();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings.iter().all(|w| w.message.contains("larger")),
        "{warnings:?}"
    );
    assert_eq!(files_in(&dir.path().join("entries")), Vec::<PathBuf>::new());
    assert_eq!(files_in(&dir.path().join("tmp")), Vec::<PathBuf>::new());
}
