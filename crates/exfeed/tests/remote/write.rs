//! Writing objects (`exfeed::io::remote_write`) to SeaweedFS: a whole write lands, an existing
//! object is refused without `force`, a part that fails transiently is sent again, and an
//! unfinished write (dropped, a part failing on every attempt, a killed process) leaves no
//! object.

use super::{assert_no_secret, fast_retries, pattern, services, unique, Services};
use crate::fault_proxy::{Fault, FaultProxy};
use exfeed::convert::{convert, ConvertOptions};
use exfeed::format::FileFormat;
use exfeed::io::remote::{RemoteObject, RemoteOptions};
use exfeed::io::remote_write::RemoteOutput;
use exfeed::options::ReadOptions;
use exfeed::ErrorKind;
use exfeed::{open, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// Three parts of 8 MiB and a short last one.
const SIZE: usize = (24 << 20) + 12_345;

/// The object's bytes, or `None` if there is none.
fn stored(services: &Services, key: &str) -> Option<Vec<u8>> {
    match RemoteObject::open(&services.url(key), &services.options()) {
        Ok(object) => Some(object.read_at(0, object.size() as usize).unwrap()),
        Err(e) if e.to_string().contains("not found") => None,
        Err(e) => panic!("{e}"),
    }
}

fn write_in_pieces(output: &mut RemoteOutput, data: &[u8]) -> std::io::Result<()> {
    data.chunks(1 << 20)
        .try_for_each(|piece| output.write_all(piece))
}

#[test]
fn a_whole_write_lands_and_an_existing_object_is_refused_unless_forced() {
    let Some(services) = services() else { return };
    let key = unique("written.bin");
    let url = services.url(&key);
    let data = pattern(SIZE, 21);
    let mut output = RemoteOutput::create(&url, &services.options(), false).unwrap();
    write_in_pieces(&mut output, &data).unwrap();
    assert_eq!(stored(&services, &key), None, "visible before finish");
    output.finish().unwrap();
    assert!(stored(&services, &key).unwrap() == data);
    let err = RemoteOutput::create(&url, &services.options(), false).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Refused);
    assert!(err.to_string().starts_with(&url), "{err}");
    assert!(err.to_string().contains("--force"), "{err}");
    assert_no_secret(&err, &[&services.secret]);
    let replacement = pattern(1000, 22);
    let mut output = RemoteOutput::create(&url, &services.options(), true).unwrap();
    output.write_all(&replacement).unwrap();
    output.finish().unwrap();
    assert_eq!(stored(&services, &key).unwrap(), replacement);
}

#[test]
fn an_object_that_appears_while_writing_is_not_replaced() {
    let Some(services) = services() else { return };
    let key = unique("appeared.bin");
    let mut output = RemoteOutput::create(&services.url(&key), &services.options(), false).unwrap();
    output.write_all(&pattern(1000, 23)).unwrap();
    services.put(&key, b"theirs");
    let err = output.finish().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Refused, "{err}");
    assert_eq!(stored(&services, &key).unwrap(), b"theirs");
}

#[test]
fn an_unfinished_write_leaves_no_object() {
    let Some(services) = services() else { return };
    // Dropped part-way, after parts were uploaded.
    let key = unique("dropped.bin");
    let mut output = RemoteOutput::create(&services.url(&key), &services.options(), false).unwrap();
    write_in_pieces(&mut output, &pattern(SIZE, 24)).unwrap();
    drop(output);
    assert_eq!(stored(&services, &key), None);
    // Parts refused by the server (503) on every attempt: the write fails and is aborted.
    let key = unique("failed.bin");
    let proxy = FaultProxy::start(&services.s3_endpoint);
    let mut options = services.options_at(&proxy.url(), &services.key_id, &services.secret);
    options.retry = fast_retries();
    // The first four parts are in flight at once: four attempts each.
    proxy.inject_puts((0..16).map(|_| Fault::SlowDown));
    let mut output = RemoteOutput::create(&services.url(&key), &options, false).unwrap();
    let failed = write_in_pieces(&mut output, &pattern(SIZE, 25))
        .map_err(exfeed::Error::from)
        .and_then(|()| output.finish());
    let err = failed.unwrap_err();
    assert!(err.to_string().starts_with(&services.url(&key)), "{err}");
    assert!(err.to_string().contains("SlowDown"), "{err}");
    assert_no_secret(&err, &[&services.secret]);
    assert_eq!(stored(&services, &key), None);
    // A part refused permanently (403): not sent again; the write fails and is aborted.
    // A proxy of its own: the write above may stop before its parts used all sixteen faults.
    let key = unique("refused.bin");
    let proxy = FaultProxy::start(&services.s3_endpoint);
    let mut options = services.options_at(&proxy.url(), &services.key_id, &services.secret);
    options.retry = fast_retries();
    proxy.inject_puts([Fault::Forbidden]);
    let mut output = RemoteOutput::create(&services.url(&key), &options, false).unwrap();
    let failed = write_in_pieces(&mut output, &pattern(SIZE, 27))
        .map_err(exfeed::Error::from)
        .and_then(|()| output.finish());
    let err = failed.unwrap_err();
    assert!(err.to_string().contains("403"), "{err}");
    assert_eq!(stored(&services, &key), None);
    // No part was sent twice: each PUT names its own part (`?partNumber=N&uploadId=...`).
    let puts = proxy.requests("PUT");
    let parts: std::collections::HashSet<_> = puts.iter().map(|r| &r.path).collect();
    assert_eq!(parts.len(), puts.len(), "{puts:?}");
}

#[test]
#[ignore = "a child process of a_killed_writer_leaves_no_object"]
fn child_writes_slowly() {
    let services = services().expect("the services' variables");
    let endpoint = std::env::var("EXFEED_TEST_CHILD_ENDPOINT").expect("a child of another test");
    let key = std::env::var("EXFEED_TEST_CHILD_KEY").unwrap();
    let options: RemoteOptions = services.options_at(&endpoint, &services.key_id, &services.secret);
    let mut output = RemoteOutput::create(&services.url(&key), &options, false).unwrap();
    write_in_pieces(&mut output, &pattern(SIZE, 26)).unwrap();
    output.finish().unwrap();
    unreachable!("killed by the parent before its write is whole");
}

#[test]
fn a_killed_writer_leaves_no_object() {
    let Some(services) = services() else { return };
    let key = unique("killed.bin");
    let proxy = FaultProxy::start(&services.s3_endpoint);
    // The first part goes through, the second waits.
    proxy.inject_puts([
        Fault::Delay(Duration::ZERO),
        Fault::Delay(Duration::from_secs(5)),
    ]);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "write::child_writes_slowly",
            "--ignored",
            "--nocapture",
        ])
        .env("EXFEED_TEST_CHILD_ENDPOINT", proxy.url())
        .env("EXFEED_TEST_CHILD_KEY", &key)
        .spawn()
        .unwrap();
    proxy.wait_for("PUT", 2);
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(stored(&services, &key), None);
}

/// `convert` to the bucket survives a part answered `503 SlowDown` and then reset: it is sent
/// again, and the object is whole, the same bytes as the local output.
#[test]
fn a_convert_survives_a_part_that_fails_transiently() {
    let Some(services) = services() else { return };
    let dir = tempfile::tempdir().unwrap();
    let ctf = dir.path().join("data.ctf");
    let text: String = (0..5000)
        .map(|s| format!("{s} |a {s} {} |b {}:1\n", s % 7, s % 5))
        .collect();
    std::fs::write(&ctf, text).unwrap();
    let proxy = FaultProxy::start(&services.s3_endpoint);
    let endpoint = proxy.url();
    let options = OpenOptions {
        inputs: vec!["a:dense:2".parse().unwrap(), "b:sparse:5".parse().unwrap()],
        read: ReadOptions::new().with_storage_options(
            services
                .options_at(&endpoint, &services.key_id, &services.secret)
                .storage_options,
        ),
        ..OpenOptions::default()
    };
    let convert_to = |out: &Path| {
        let to = ConvertOptions {
            to: Some(FileFormat::Cbf),
            ..ConvertOptions::default()
        };
        convert(open(&ctf, &options)?, out, &to, &mut Vec::new())
    };
    let local = dir.path().join("data.cbf");
    convert_to(&local).unwrap();
    let key = unique("converted.cbf");
    proxy.inject_puts([Fault::SlowDown, Fault::Reset]);
    convert_to(Path::new(&services.url(&key))).unwrap();
    assert!(stored(&services, &key).unwrap() == std::fs::read(&local).unwrap());
    // One part, sent three times.
    assert_eq!(proxy.requests("PUT").len(), 3);
}
