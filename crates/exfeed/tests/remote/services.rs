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
