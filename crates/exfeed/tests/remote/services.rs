//! The test services (`scripts/services`): their endpoints and keys from the environment, and
//! putting objects there. Shared by the library's and the command's remote tests.
#![allow(dead_code)]

use exfeed::io::remote::RemoteOptions;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStoreExt, PutPayload};

/// The endpoints and keys `scripts/services` prints.
pub struct Services {
    pub s3_endpoint: String,
    pub bucket: String,
    pub key_id: String,
    pub secret: String,
    pub readonly_key_id: String,
    pub readonly_secret: String,
    pub http_url: String,
    pub http_root: std::path::PathBuf,
    /// fake-gcs-server's base URL (plain HTTP, no credentials) and its bucket.
    pub gcs_url: String,
    pub gcs_bucket: String,
}

pub fn services() -> Option<Services> {
    let var = |name: &str| std::env::var(name).ok();
    let found = (|| {
        Some(Services {
            s3_endpoint: var("EXFEED_TEST_S3_ENDPOINT")?,
            bucket: var("EXFEED_TEST_S3_BUCKET")?,
            key_id: var("EXFEED_TEST_S3_ACCESS_KEY_ID")?,
            secret: var("EXFEED_TEST_S3_SECRET_ACCESS_KEY")?,
            readonly_key_id: var("EXFEED_TEST_S3_READONLY_ACCESS_KEY_ID")?,
            readonly_secret: var("EXFEED_TEST_S3_READONLY_SECRET_ACCESS_KEY")?,
            http_url: var("EXFEED_TEST_HTTP_URL")?,
            http_root: var("EXFEED_TEST_HTTP_ROOT")?.into(),
            gcs_url: var("EXFEED_TEST_GCS_URL")?,
            gcs_bucket: var("EXFEED_TEST_GCS_BUCKET")?,
        })
    })();
    if found.is_none() {
        let why = "the test services' variables (EXFEED_TEST_S3_ENDPOINT, ...) are not set: \
                   run scripts/test, or eval \"$(scripts/services start)\" first";
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{why} (required in CI)");
        }
        crate::common::record_skip_because(why);
    }
    found
}

impl Services {
    /// Storage options for the read-write identity at `endpoint` (SeaweedFS or the proxy).
    pub fn options_at(&self, endpoint: &str, key_id: &str, secret: &str) -> RemoteOptions {
        RemoteOptions::with_storage_options([
            ("aws_endpoint", endpoint),
            ("aws_access_key_id", key_id),
            ("aws_secret_access_key", secret),
            ("aws_region", "us-east-1"),
        ])
    }

    pub fn options(&self) -> RemoteOptions {
        self.options_at(&self.s3_endpoint, &self.key_id, &self.secret)
    }

    /// Stores `bytes` under `key` in the bucket: see [`Writer::put`].
    pub fn put(&self, key: &str, bytes: &[u8]) {
        self.writer().put(key, bytes)
    }

    pub fn writer(&self) -> Writer {
        Writer {
            endpoint: self.s3_endpoint.clone(),
            bucket: self.bucket.clone(),
            key_id: self.key_id.clone(),
            secret: self.secret.clone(),
        }
    }

    pub fn url(&self, key: &str) -> String {
        format!("s3://{}/{key}", self.bucket)
    }

    /// Storage options that point gs:// URLs at fake-gcs-server, which takes no credentials.
    pub fn gcs_options(&self) -> RemoteOptions {
        RemoteOptions::with_storage_options([
            ("google_base_url", self.gcs_url.as_str()),
            ("google_skip_signature", "true"),
        ])
    }

    pub fn gcs_url_of(&self, key: &str) -> String {
        format!("gs://{}/{key}", self.gcs_bucket)
    }

    /// Stores `bytes` under `key` in fake-gcs-server's bucket through the JSON API's media
    /// upload (it takes none of object_store's uploads): one HTTP/1.1 request on a socket.
    pub fn gcs_put(&self, key: &str, bytes: &[u8]) {
        use std::io::{Read, Write};
        let authority = self.gcs_url.strip_prefix("http://").unwrap();
        let name: String = key
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let mut socket = std::net::TcpStream::connect(authority).unwrap();
        write!(
            socket,
            "POST /upload/storage/v1/b/{}/o?uploadType=media&name={name} HTTP/1.1\r\n\
             Host: {authority}\r\nContent-Type: application/octet-stream\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            self.gcs_bucket,
            bytes.len()
        )
        .unwrap();
        socket.write_all(bytes).unwrap();
        let mut response = String::new();
        socket.read_to_string(&mut response).unwrap();
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    }

    /// Writes `bytes` as `name` in nginx's directory; its URL.
    pub fn serve(&self, name: &str, bytes: &[u8]) -> String {
        let path = self.http_root.join(name);
        let temporary = path.with_extension("partial");
        std::fs::write(&temporary, bytes).unwrap();
        std::fs::rename(&temporary, &path).unwrap();
        format!("{}/{name}", self.http_url)
    }
}

/// Puts objects into the bucket, with object_store itself and the read-write keys.
pub struct Writer {
    pub endpoint: String,
    pub bucket: String,
    pub key_id: String,
    pub secret: String,
}

impl Writer {
    pub fn put(&self, key: &str, bytes: &[u8]) {
        // The client has no TLS provider of its own (as in exfeed's remote reader).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let store = AmazonS3Builder::new()
            .with_endpoint(&self.endpoint)
            .with_allow_http(true)
            .with_bucket_name(&self.bucket)
            .with_region("us-east-1")
            .with_access_key_id(&self.key_id)
            .with_secret_access_key(&self.secret)
            .build()
            .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let payload = PutPayload::from(bytes.to_vec());
        runtime
            .block_on(store.put(&ObjectPath::from(key), payload))
            .unwrap();
    }
}

/// A key of its own for each test run, so runs and tests never see each other's objects.
pub fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("t{}-{nanos}/{name}", std::process::id())
}
