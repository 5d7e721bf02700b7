//! `exfeed convert IN s3://bucket/key` against SeaweedFS (scripts/services; scripts/test
//! starts it): the object lands whole in each format, an existing one is refused without
//! `--force`, and a failed or killed upload leaves no object. The keys reach the command in
//! the standard environment variables, never on its command line.
//!
//! Without the services' variables these tests say they were skipped; under CI=true they fail.

mod common;
#[path = "../../exfeed/tests/remote/fault_proxy.rs"]
#[allow(dead_code)]
mod fault_proxy;

use common::record_skip_because;
use exfeed::io::remote::{RemoteObject, RemoteOptions};
use fault_proxy::{Fault, FaultProxy};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// The stream of the CTF files these tests write (see [`ctf_file`]).
const STREAMS: &[&str] = &["-i", "x:dense:64:x"];

struct Bucket {
    endpoint: String,
    name: String,
    key_id: String,
    secret: String,
}

fn bucket() -> Option<Bucket> {
    let var = |name: &str| std::env::var(name).ok();
    let found = (|| {
        Some(Bucket {
            endpoint: var("EXFEED_TEST_S3_ENDPOINT")?,
            name: var("EXFEED_TEST_S3_BUCKET")?,
            key_id: var("EXFEED_TEST_S3_ACCESS_KEY_ID")?,
            secret: var("EXFEED_TEST_S3_SECRET_ACCESS_KEY")?,
        })
    })();
    if found.is_none() {
        let why = "the test services' variables (EXFEED_TEST_S3_ENDPOINT, ...) are not set: \
                   run scripts/test, or eval \"$(scripts/services start)\" first";
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{why} (required in CI)");
        }
        record_skip_because(why);
    }
    found
}

impl Bucket {
    fn url(&self, name: &str) -> String {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        format!(
            "s3://{}/cli-{}-{nanos}/{name}",
            self.name,
            std::process::id()
        )
    }

    /// `exfeed ARGS` with the keys in its environment and `endpoint` as the store.
    fn command(&self, endpoint: &str, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_exfeed"));
        command
            .args(args)
            .args(STREAMS)
            .env("AWS_ENDPOINT", endpoint)
            .env("AWS_ACCESS_KEY_ID", &self.key_id)
            .env("AWS_SECRET_ACCESS_KEY", &self.secret)
            .env("AWS_REGION", "us-east-1");
        command
    }

    fn exfeed(&self, args: &[&str]) -> Output {
        self.command(&self.endpoint, args).output().unwrap()
    }

    /// The object's bytes, or `None` if there is none.
    fn stored(&self, url: &str) -> Option<Vec<u8>> {
        let options = RemoteOptions::with_storage_options([
            ("aws_endpoint", self.endpoint.as_str()),
            ("aws_access_key_id", &self.key_id),
            ("aws_secret_access_key", &self.secret),
            ("aws_region", "us-east-1"),
        ]);
        match RemoteObject::open(url, &options) {
            Ok(object) => Some(object.read_at(0, object.size() as usize).unwrap()),
            Err(e) if e.to_string().contains("not found") => None,
            Err(e) => panic!("{e}"),
        }
    }
}

/// A CTF file of `sequences` sequences of two dense samples of 64 values.
fn ctf_file(dir: &Path, sequences: usize) -> String {
    let path = dir.join("in.ctf");
    let mut text = String::new();
    for s in 0..sequences {
        for _ in 0..2 {
            text.push_str(&format!("{s} |x"));
            for v in 0..64 {
                text.push_str(&format!(" {}", (s * 64 + v) % 1000));
            }
            text.push('\n');
        }
    }
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn convert_writes_each_format_to_the_bucket_and_refuses_to_replace_without_force() {
    let Some(bucket) = bucket() else { return };
    let dir = tempfile::tempdir().unwrap();
    let input = ctf_file(dir.path(), 300);
    let local_cbf = dir.path().join("local.cbf").display().to_string();
    let made = common::exfeed(["convert", &input, &local_cbf].iter().chain(STREAMS));
    assert!(made.status.success(), "{}", stderr_of(&made));
    let lens = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/nan-payload.bex");
    // Each output is compared with the same conversion to a local file.
    for (input, name) in [
        (&input[..], "out.cbf"),
        (&input[..], "out.parquet"),
        (&local_cbf[..], "out.ctf.gz"),
        (lens, "out.bex"),
    ] {
        let url = bucket.url(name);
        let local = dir.path().join(name).display().to_string();
        let wrote = bucket.exfeed(&["convert", input, &url]);
        assert!(wrote.status.success(), "{name}: {}", stderr_of(&wrote));
        let made = common::exfeed(["convert", input, &local].iter().chain(STREAMS));
        assert!(made.status.success(), "{name}: {}", stderr_of(&made));
        let stored = bucket.stored(&url).expect("the object");
        if name.ends_with(".gz") {
            // Compared decompressed: gzip's header holds the time of writing.
            let text = |bytes: &[u8]| {
                let mut text = String::new();
                std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(bytes), &mut text)
                    .unwrap();
                text
            };
            assert_eq!(text(&stored), text(&std::fs::read(&local).unwrap()));
        } else {
            assert!(stored == std::fs::read(&local).unwrap(), "{name}");
        }
        let refused = bucket.exfeed(&["convert", input, &url]);
        assert!(!refused.status.success());
        let said = stderr_of(&refused);
        assert!(said.contains(&url) && said.contains("--force"), "{said}");
        assert!(!said.contains(&bucket.secret), "{said}");
        let forced = bucket.exfeed(&["convert", "--force", input, &url]);
        assert!(forced.status.success(), "{}", stderr_of(&forced));
    }
}

#[test]
fn a_failed_upload_leaves_no_object_and_no_secret_in_the_message() {
    let Some(bucket) = bucket() else { return };
    let dir = tempfile::tempdir().unwrap();
    let input = ctf_file(dir.path(), 300);
    let proxy = FaultProxy::start(&bucket.endpoint);
    // Refused permanently (a part answered 403): the upload is aborted at once.
    proxy.inject_puts([Fault::Forbidden]);
    let url = bucket.url("failed.cbf");
    let failed = bucket
        .command(&proxy.url(), &["convert", &input, &url])
        .output()
        .unwrap();
    assert!(!failed.status.success());
    let said = stderr_of(&failed);
    assert!(said.contains(&url) && said.contains("403"), "{said}");
    assert!(!said.contains(&bucket.secret), "{said}");
    assert_eq!(bucket.stored(&url), None);
}

#[test]
fn a_killed_upload_leaves_no_object() {
    let Some(bucket) = bucket() else { return };
    let dir = tempfile::tempdir().unwrap();
    // About 40 MB of CBF: several parts of 8 MiB.
    let input = ctf_file(dir.path(), 40_000);
    let proxy = FaultProxy::start(&bucket.endpoint);
    proxy.inject_puts([
        Fault::Delay(Duration::ZERO),
        Fault::Delay(Duration::from_secs(5)),
    ]);
    let url = bucket.url("killed.cbf");
    let mut child = bucket
        .command(&proxy.url(), &["convert", &input, &url])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    proxy.wait_for("PUT", 2);
    assert!(
        child.try_wait().unwrap().is_none(),
        "exited before its upload"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(bucket.stored(&url), None);
}

#[test]
fn storage_options_on_the_command_line_reach_the_output_bucket() {
    let Some(bucket) = bucket() else { return };
    let dir = tempfile::tempdir().unwrap();
    let input = ctf_file(dir.path(), 50);
    let url = bucket.url("options.cbf");
    let option = |key: &str, value: &str| format!("--storage-option={key}={value}");
    let args = [
        option("aws_endpoint", &bucket.endpoint),
        option("aws_access_key_id", &bucket.key_id),
        option("aws_secret_access_key", &bucket.secret),
        option("aws_region", "us-east-1"),
    ];
    // No AWS_* variables: the settings come only from the command line.
    let run = |extra: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_exfeed"));
        for (name, _) in std::env::vars().filter(|(n, _)| n.starts_with("AWS_")) {
            command.env_remove(name);
        }
        command
            .args(["convert", &input, &url])
            .args(extra)
            .args(STREAMS)
            .output()
            .unwrap()
    };
    let without = run(&[]);
    assert!(!without.status.success(), "wrote without credentials");
    assert_eq!(bucket.stored(&url), None);
    let with: Vec<&str> = args.iter().map(String::as_str).collect();
    let wrote = run(&with);
    assert!(wrote.status.success(), "{}", stderr_of(&wrote));
    let local = dir.path().join("local.cbf").display().to_string();
    let made = common::exfeed(["convert", &input, &local].iter().chain(STREAMS));
    assert!(made.status.success(), "{}", stderr_of(&made));
    assert!(bucket.stored(&url).unwrap() == std::fs::read(&local).unwrap());
    assert!(!stderr_of(&wrote).contains(&bucket.secret));
}
