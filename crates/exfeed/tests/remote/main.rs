//! The remote reader (`exfeed::io::remote`) against real servers on loopback: SeaweedFS (S3,
//! signed requests, a read-write and a read-only identity) and nginx (HTTP with Range), both
//! started by `scripts/services` (scripts/test starts them), and the fault proxy between the
//! reader and SeaweedFS or nginx.
//!
//! Without the services' variables these tests say they were skipped; under CI=true they fail.

mod ahead;
mod cache;
#[path = "../common/mod.rs"]
mod common;
mod fault_proxy;
mod gcs;
mod index;
mod open;
mod services;
mod write;

use exfeed::io::remote::{glob, RemoteObject, RemoteOptions, RetryPolicy};
use exfeed::{Error, ErrorKind};
use fault_proxy::{Fault, FaultProxy};
use services::{services, unique, Services};
use std::time::{Duration, Instant};

/// Bytes no two positions of which are likely to repeat a pattern: a mis-placed range shows.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// The error's message and debug form hold none of the secrets.
fn assert_no_secret(error: &Error, secrets: &[&str]) {
    let shown = format!("{error} {error:?}");
    for secret in secrets {
        assert!(!shown.contains(secret), "a secret in the message: {shown}");
    }
}

fn fast_retries() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 4,
        max_elapsed: Duration::from_secs(20),
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(200),
    }
}

const RANGES: [(u64, usize); 5] = [
    (0, 1),
    (0, 4096),
    (12_345, 100_000),
    (1_000_000 - 1, 1),
    (500_000, 500_000),
];

#[test]
fn s3_ranged_reads_are_exact_with_either_identity() {
    let Some(services) = services() else { return };
    let key = unique("data.bin");
    let data = pattern(1_000_000, 1);
    services.put(&key, &data);
    let readonly = services.options_at(
        &services.s3_endpoint,
        &services.readonly_key_id,
        &services.readonly_secret,
    );
    for options in [services.options(), readonly] {
        let object = RemoteObject::open(&services.url(&key), &options).unwrap();
        assert_eq!(object.size(), data.len() as u64);
        assert!(object.etag().is_some());
        for (offset, len) in RANGES {
            let start = offset as usize;
            assert_eq!(
                object.read_at(offset, len).unwrap(),
                &data[start..start + len]
            );
        }
        let err = object.read_at(999_999, 2).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::UnexpectedEof);
        assert!(err.to_string().starts_with(&services.url(&key)), "{err}");
    }
}

#[test]
fn http_ranged_reads_are_exact() {
    let Some(services) = services() else { return };
    let name = format!("exact-{}.bin", std::process::id());
    let data = pattern(1_000_000, 2);
    let url = services.serve(&name, &data);
    let object = RemoteObject::open(&url, &RemoteOptions::default()).unwrap();
    assert_eq!(object.size(), data.len() as u64);
    for (offset, len) in RANGES {
        let start = offset as usize;
        assert_eq!(
            object.read_at(offset, len).unwrap(),
            &data[start..start + len]
        );
    }
}

#[test]
fn a_replaced_object_is_an_error_never_a_mix() {
    let Some(services) = services() else { return };
    // S3: replaced between two reads.
    let key = unique("replaced.bin");
    services.put(&key, &pattern(100_000, 3));
    let object = RemoteObject::open(&services.url(&key), &services.options()).unwrap();
    object.read_at(0, 10).unwrap();
    services.put(&key, &pattern(100_000, 4));
    let err = object.read_at(0, 10).unwrap_err();
    assert!(err.to_string().starts_with(&services.url(&key)), "{err}");
    assert!(
        err.to_string().contains("changed while it was read"),
        "{err}"
    );
    // HTTP: the same.
    let name = format!("replaced-{}.bin", std::process::id());
    let url = services.serve(&name, &pattern(100_000, 5));
    let object = RemoteObject::open(&url, &RemoteOptions::default()).unwrap();
    object.read_at(50, 10).unwrap();
    // nginx's ETag is the file's time and size: a different size makes it differ at once.
    services.serve(&name, &pattern(100_001, 6));
    let err = object.read_at(50, 10).unwrap_err();
    assert!(
        err.to_string().contains("changed while it was read"),
        "{err}"
    );
}

#[test]
fn an_object_replaced_between_a_cut_and_its_resumption_is_an_error() {
    let Some(services) = services() else { return };
    let key = unique("cut-then-replaced.bin");
    services.put(&key, &pattern(300_000, 7));
    let proxy = FaultProxy::start(&services.s3_endpoint);
    let options = services.options_at(&proxy.url(), &services.key_id, &services.secret);
    let object = RemoteObject::open(&services.url(&key), &options).unwrap();
    let writer = services.writer();
    let replace = move || writer.put(&key, &pattern(300_000, 8));
    proxy.inject([Fault::CutBodyAfter(1000), Fault::Run(Box::new(replace))]);
    let err = object.read_at(0, 200_000).unwrap_err();
    assert!(
        err.to_string().contains("changed while it was read"),
        "{err}"
    );
    assert!(err.to_string().contains("(byte 1000)"), "{err}");
}

#[test]
fn transient_faults_are_retried_and_reads_resume_where_they_stopped() {
    let Some(services) = services() else { return };
    let key = unique("faults.bin");
    let data = pattern(400_000, 9);
    services.put(&key, &data);
    let proxy = FaultProxy::start(&services.s3_endpoint);
    let mut options = services.options_at(&proxy.url(), &services.key_id, &services.secret);
    options.retry = fast_retries();
    options.storage_options = (options.storage_options.pairs().iter().cloned())
        .chain([("timeout".to_string(), "1s".to_string())])
        .collect();
    let object = RemoteObject::open(&services.url(&key), &options).unwrap();

    proxy.inject([
        Fault::SlowDown,
        Fault::Reset,
        Fault::Delay(Duration::from_secs(3)),
    ]);
    assert_eq!(object.read_at(1000, 5000).unwrap(), &data[1000..6000]);
    assert_eq!(proxy.gets().len(), 4, "{:?}", proxy.gets());

    // Cut twice: each retry asks only for what has not arrived.
    let before = proxy.gets().len();
    proxy.inject([Fault::CutBodyAfter(70_000), Fault::CutBodyAfter(50_000)]);
    assert_eq!(
        object.read_at(10_000, 300_000).unwrap(),
        &data[10_000..310_000]
    );
    let ranges: Vec<_> = proxy.gets()[before..]
        .iter()
        .map(|r| r.range.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        ranges,
        [
            "bytes=10000-309999",
            "bytes=80000-309999",
            "bytes=130000-309999"
        ]
    );
}

#[test]
fn a_read_waits_out_a_server_stopped_and_started_again() {
    let Some(services) = services() else { return };
    let key = unique("restart.bin");
    let data = pattern(100_000, 13);
    services.put(&key, &data);
    let proxy = FaultProxy::start(&services.s3_endpoint);
    let address = proxy.address();
    let mut options = services.options_at(&proxy.url(), &services.key_id, &services.secret);
    options.retry = RetryPolicy {
        max_attempts: 30,
        ..fast_retries()
    };
    let object = RemoteObject::open(&services.url(&key), &options).unwrap();
    // Down: connections are refused until it is back, 300 ms later.
    drop(proxy);
    let upstream = services.s3_endpoint.clone();
    let restarted = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let proxy = FaultProxy::start_at(address, &upstream);
        std::thread::sleep(Duration::from_secs(3));
        proxy.gets().len()
    });
    let started = Instant::now();
    assert_eq!(object.read_at(5, 50_000).unwrap(), &data[5..50_005]);
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(restarted.join().unwrap(), 1);
}

#[test]
fn http_reads_resume_after_a_cut_body() {
    let Some(services) = services() else { return };
    let name = format!("cut-{}.bin", std::process::id());
    let data = pattern(200_000, 10);
    services.serve(&name, &data);
    let proxy = FaultProxy::start(&services.http_url);
    let options = RemoteOptions {
        retry: fast_retries(),
        ..RemoteOptions::default()
    };
    let object = RemoteObject::open(&format!("{}/{name}", proxy.url()), &options).unwrap();
    proxy.inject([Fault::CutBodyAfter(1234), Fault::SlowDown]);
    assert_eq!(object.read_at(100, 150_000).unwrap(), &data[100..150_100]);
    assert_eq!(proxy.gets().len(), 3);
}

#[test]
fn retries_are_bounded_and_the_last_failure_is_named() {
    let Some(services) = services() else { return };
    let key = unique("bounded.bin");
    services.put(&key, &pattern(1000, 11));
    let proxy = FaultProxy::start(&services.s3_endpoint);
    let mut options = services.options_at(&proxy.url(), &services.key_id, &services.secret);
    options.retry = fast_retries();
    let object = RemoteObject::open(&services.url(&key), &options).unwrap();
    proxy.inject((0..10).map(|_| Fault::SlowDown));
    let started = Instant::now();
    let err = object.read_at(0, 100).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(proxy.gets().len(), 4);
    let message = err.to_string();
    assert!(message.starts_with(&services.url(&key)), "{message}");
    assert!(message.contains("gave up after 4 attempts"), "{message}");
    assert!(message.contains("HTTP 503, SlowDown"), "{message}");
    assert_no_secret(&err, &[&services.secret]);
}

#[test]
fn permanent_failures_fail_at_once_naming_the_url_and_what_the_server_said() {
    let Some(services) = services() else { return };
    let key = unique("present.bin");
    services.put(&key, &pattern(1000, 12));
    let secrets = [services.secret.as_str(), "wrong-secret-value-123"];
    let check = |err: &Error, url: &str, said: &str, started: Instant| {
        let message = err.to_string();
        assert!(message.starts_with(url), "{message}");
        assert!(message.contains(said), "{message}");
        assert!(started.elapsed() < Duration::from_secs(3), "{message}");
        assert_no_secret(err, &secrets);
    };

    let missing = services.url(&unique("missing.bin"));
    let started = Instant::now();
    let err = RemoteObject::open(&missing, &services.options()).unwrap_err();
    check(&err, &missing, "not found", started);

    let present = services.url(&key);
    let wrong = services.options_at(&services.s3_endpoint, &services.key_id, secrets[1]);
    let started = Instant::now();
    let err = RemoteObject::open(&present, &wrong).unwrap_err();
    check(&err, &present, "403", started);

    let unknown = services.options_at(&services.s3_endpoint, "NOSUCHKEY", secrets[1]);
    let started = Instant::now();
    let err = RemoteObject::open(&present, &unknown).unwrap_err();
    check(&err, &present, "403", started);

    // No credentials at all: an anonymous request, refused.
    let anonymous = RemoteOptions::with_storage_options([
        ("aws_endpoint", services.s3_endpoint.as_str()),
        ("aws_skip_signature", "true"),
    ]);
    let started = Instant::now();
    let err = RemoteObject::open(&present, &anonymous).unwrap_err();
    check(&err, &present, "access denied", started);

    // A port nobody listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let nowhere = services.options_at(&endpoint, &services.key_id, &services.secret);
    let started = Instant::now();
    let err = RemoteObject::open(&present, &nowhere).unwrap_err();
    check(&err, &present, "cannot connect", started);

    let missing = format!(
        "{}/no-such-file-{}.bin",
        services.http_url,
        std::process::id()
    );
    let started = Instant::now();
    let err = RemoteObject::open(&missing, &RemoteOptions::default()).unwrap_err();
    check(&err, &missing, "not found", started);
}

#[test]
fn globs_list_the_bucket_prefix() {
    let Some(services) = services() else { return };
    let dir = unique("corpus");
    for name in [
        "train-2.ctf",
        "train-1.ctf",
        "test-1.ctf",
        "train-3.ctf/inner",
    ] {
        services.put(&format!("{dir}/{name}"), name.as_bytes());
    }
    let found = glob(
        &services.url(&format!("{dir}/train-*.ctf")),
        &services.options(),
    )
    .unwrap();
    let urls: Vec<_> = found.iter().map(|e| e.url.clone()).collect();
    assert_eq!(
        urls,
        [
            services.url(&format!("{dir}/train-1.ctf")),
            services.url(&format!("{dir}/train-2.ctf"))
        ]
    );
    assert_eq!(found[0].size, "train-1.ctf".len() as u64);
    // The listing gave each object's size and ETag: opening one from its entry sends no HEAD,
    // and reads are conditional on the listed ETag (the same as a HEAD's: they succeed).
    let proxy = FaultProxy::start(&services.s3_endpoint);
    let through_proxy = services.options_at(&proxy.url(), &services.key_id, &services.secret);
    let listed = glob(&services.url(&format!("{dir}/train-*.ctf")), &through_proxy).unwrap();
    for entry in &listed {
        let object = RemoteObject::open_listed(entry, &through_proxy).unwrap();
        assert_eq!(object.etag(), entry.etag.as_deref());
        assert_eq!(object.read_at(0, 5).unwrap(), b"train");
    }
    assert_eq!(
        proxy.requests("HEAD").len(),
        0,
        "a HEAD for a listed object"
    );
    // So are a corpus glob's shards, opened through the front door.
    let corpus = exfeed::io::Corpus::parse(&services.url(&format!("{dir}/train-*.ctf")));
    let read = exfeed::options::ReadOptions::new()
        .with_storage_options(open::storage_options(&services, &proxy.url()));
    let options = exfeed::OpenOptions {
        read: read.clone(),
        ..exfeed::OpenOptions::default()
    };
    for input in corpus.expand_inputs(read.storage_options()).unwrap() {
        let data = exfeed::open(input, &options).unwrap();
        assert!(data.name().contains("train-"), "{}", data.name());
    }
    assert_eq!(
        proxy.requests("HEAD").len(),
        0,
        "a HEAD for a corpus's shard"
    );
    let again = RemoteObject::open(&listed[0].url, &through_proxy).unwrap();
    assert_eq!(proxy.requests("HEAD").len(), 1);
    assert_eq!(
        again.etag(),
        listed[0].etag.as_deref(),
        "the listing's ETag is the HEAD's"
    );

    let wrong = services.options_at(&services.s3_endpoint, &services.key_id, "wrong-secret-xyz");
    let err = glob(&services.url(&format!("{dir}/*.ctf")), &wrong).unwrap_err();
    assert!(err.to_string().contains("cannot list"), "{err}");
    assert_no_secret(&err, &["wrong-secret-xyz"]);
}
