//! Objects in S3-compatible storage, Google Cloud Storage and on HTTP(S) servers, read at
//! random by byte range (the `remote` feature).
//!
//! [`RemoteObject::open`] takes a URL (`s3://bucket/key`, `gs://bucket/key`,
//! `http://host/path`, `https://host/path`) and asks the server for the object's size and
//! ETag; then [`RemoteObject::read_at`] reads any byte range with one ranged GET, conditional
//! on that ETag: an object replaced since it was opened is an error naming it, never a mix of
//! two versions. Transient failures (5xx, 429 and S3's `503 SlowDown`, reset connections,
//! timeouts, bodies cut short) are retried with exponential backoff and full jitter, bounded in
//! attempts and in time ([`RetryPolicy`]); each retry asks only for the bytes that have not
//! arrived, so nothing is lost or delivered twice. Permanent failures (403, 404, a refused or
//! unknown endpoint when the object is first reached) fail at once, naming the URL and what
//! the server said. [`glob()`] lists a bucket prefix and matches a pattern
//! (`s3://data/train-*.ctf`, `gs://data/train-*.ctf`).
//!
//! Credentials and settings come from the standard environment variables (`AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`, `AWS_ENDPOINT`, ..., and
//! instance or container credentials where they exist; for gs://, `GOOGLE_APPLICATION_CREDENTIALS`,
//! `GOOGLE_SERVICE_ACCOUNT`, `GOOGLE_SERVICE_ACCOUNT_KEY`, gcloud's application default
//! credentials, the instance's metadata server), overridden by explicit storage options named
//! as object_store's `AmazonS3ConfigKey`, `GoogleConfigKey` and `ClientConfigKey` parse them
//! (`aws_access_key_id`, `aws_secret_access_key`, `aws_endpoint`, `aws_region`,
//! `aws_allow_http`, `google_service_account_key`, `google_base_url`, `timeout`, ...). An
//! `aws_endpoint` or `google_base_url` given as `http://...` (a local server, an emulator)
//! allows plain HTTP by itself. Secret values (keys, tokens, passwords, service account keys)
//! never appear in a message. Outputs go only to `s3://` URLs.
//!
//! The API is blocking: calls run on one private tokio runtime shared by the process, so the
//! callers are plain threads (it must not be called from inside another tokio runtime).
//! A process forked after using it (a PyTorch DataLoader worker) builds its own runtime and
//! clients on first use.

use super::StorageOptions;
use crate::error::{Error, ErrorKind, Location, Result};
use futures_util::StreamExt;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::client::{HttpError, HttpErrorKind};
use object_store::gcp::{GoogleCloudStorage, GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::http::HttpBuilder;
use object_store::path::Path as ObjectPath;
use object_store::{ClientConfigKey, GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How transient failures are retried: at most `max_attempts` requests for one read, and no
/// new attempt once `max_elapsed` has passed since the first; between attempts a random wait
/// in `[0, min(max_backoff, initial_backoff * 2^retry))` (exponential backoff, full jitter).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Requests per read, the first included (at least 1).
    pub max_attempts: u32,
    /// Time after which no further attempt is started.
    pub max_elapsed: Duration,
    /// The ceiling of the first wait.
    pub initial_backoff: Duration,
    /// The largest ceiling of any wait.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 10,
            max_elapsed: Duration::from_secs(120),
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
        }
    }
}

/// How to reach remote objects: storage options (`KEY=VALUE` pairs, see the module docs) and
/// the retry policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteOptions {
    /// Settings of the store, e.g. `("aws_endpoint", "http://127.0.0.1:8333")`; they override
    /// the environment's. Their values never show in `Debug`.
    pub storage_options: StorageOptions,
    /// Retries of transient failures.
    pub retry: RetryPolicy,
}

impl RemoteOptions {
    /// Options with these storage options and the default retry policy.
    pub fn with_storage_options<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        RemoteOptions {
            storage_options: pairs.into_iter().collect(),
            retry: RetryPolicy::default(),
        }
    }

    /// Parses `KEY=VALUE` (the CLI's `--storage-option`) into a storage option.
    pub fn parse_storage_option(text: &str) -> Result<(String, String)> {
        match text.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() => {
                Ok((key.trim().to_ascii_lowercase(), value.to_string()))
            }
            _ => Err(Error::config(format!(
                "storage option '{}' is not KEY=VALUE",
                text.split_once('=').map_or(text, |(key, _)| key)
            ))),
        }
    }
}

pub use super::remote_input::{is_remote_url, shown_url};

/// The kinds of bucket store, by URL scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cloud {
    /// `s3://`: S3 and S3-compatible stores.
    S3,
    /// `gs://`: Google Cloud Storage.
    Gcs,
}

impl Cloud {
    fn scheme(self) -> &'static str {
        match self {
            Cloud::S3 => "s3",
            Cloud::Gcs => "gs",
        }
    }
}

/// An object's URL taken apart: the store it lives in and its path there.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ObjectUrl {
    /// `s3://bucket/key` or `gs://bucket/key`.
    Bucket {
        cloud: Cloud,
        bucket: String,
        key: String,
    },
    /// `http(s)://authority/path`: the store is `scheme://authority`.
    Http { base: String, path: String },
}

fn parse_url(url: &str) -> Result<ObjectUrl> {
    let bad = |why: &str| {
        Error::new(
            ErrorKind::Config,
            Location::default().with_file(shown_url(url)),
            format!("not a readable remote URL: {why}"),
        )
    };
    let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("no scheme"))?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    if authority.is_empty() {
        return Err(bad("no bucket or host"));
    }
    match scheme.to_ascii_lowercase().as_str() {
        scheme @ ("s3" | "gs") => Ok(ObjectUrl::Bucket {
            cloud: if scheme == "s3" {
                Cloud::S3
            } else {
                Cloud::Gcs
            },
            bucket: authority.to_string(),
            key: path.to_string(),
        }),
        scheme @ ("http" | "https") => {
            if authority.contains('@') {
                return Err(bad(
                    "credentials in the URL are not taken (use storage options)",
                ));
            }
            // A query (a presigned URL's signature) goes with every request: object_store
            // keeps the base URL's query when it appends the object's path.
            let path = path.split_once('#').map_or(path, |(path, _)| path);
            let (path, query) = match path.split_once('?') {
                Some((path, query)) => (path, format!("?{query}")),
                None => (path, String::new()),
            };
            Ok(ObjectUrl::Http {
                base: format!("{scheme}://{authority}{query}"),
                path: path.to_string(),
            })
        }
        other => Err(bad(&format!(
            "scheme '{other}' is not one of s3, gs, http, https"
        ))),
    }
}

/// The secret values among the options and the environment, to be kept out of messages.
/// Whether a store's address (an S3 endpoint, a GCS base URL) asks for plain HTTP by itself:
/// it does when named `http://...` (a local server, an emulator) and `allow_http` was not set
/// either way.
fn asks_for_plain_http(address: Option<&str>, allow_http_given: bool) -> bool {
    !allow_http_given && address.is_some_and(|a| a.to_ascii_lowercase().starts_with("http://"))
}

fn secrets_of(options: &RemoteOptions) -> Vec<String> {
    let is_secret = |key: &str| {
        let key = key.to_ascii_lowercase();
        // `google_service_account_key` is a whole service account's JSON, private key and all.
        [
            "secret",
            "token",
            "password",
            "service_account_key",
            "private_key",
        ]
        .iter()
        .any(|s| key.contains(s))
    };
    let from_env = std::env::vars().filter(|(key, _)| is_secret(key));
    options
        .storage_options
        .pairs()
        .iter()
        .cloned()
        .chain(from_env)
        .filter(|(key, value)| is_secret(key) && value.len() >= 4)
        .map(|(_, value)| value)
        .collect()
}

/// The process's runtime, rebuilt in a forked child (whose parent's threads do not exist).
fn runtime() -> Result<Arc<tokio::runtime::Runtime>> {
    static RUNTIME: Mutex<Option<(u32, Arc<tokio::runtime::Runtime>)>> = Mutex::new(None);
    let mut slot = RUNTIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let pid = std::process::id();
    if let Some((owner, runtime)) = slot.as_ref() {
        if *owner == pid {
            return Ok(runtime.clone());
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("exfeed-remote")
        .enable_all()
        .build()
        .map_err(|e| {
            Error::new(
                ErrorKind::Io,
                Location::default(),
                format!("cannot start the remote reader's runtime: {e}"),
            )
        })?;
    let runtime = Arc::new(runtime);
    if let Some((_, stale)) = slot.replace((pid, runtime.clone())) {
        // The parent's runtime: its threads are gone, dropping it would wait for them.
        std::mem::forget(stale);
    }
    Ok(runtime)
}

/// Makes rustls over `ring` the process's TLS provider unless one is installed already: the
/// HTTP client is built without a provider of its own (see the workspace's Cargo.toml).
fn install_tls_provider() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        // An error means another provider is installed: it serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A store and path ready for requests, made in this process.
struct Client {
    pid: u32,
    store: Arc<dyn ObjectStore>,
    runtime: Arc<tokio::runtime::Runtime>,
}

/// What a request's failure means for the read.
pub(super) enum Failure {
    /// Worth another attempt.
    Transient(String),
    /// Final: the message says why.
    Permanent(String),
    /// The object is not the one that was opened.
    Replaced(String),
}

/// Access to one remote object: its URL, how to reach it, and what it was when opened.
pub(super) struct Remote {
    url: Arc<str>,
    location: ObjectUrl,
    options: RemoteOptions,
    secrets: Vec<String>,
    client: Mutex<Option<Client>>,
    /// Whether object_store retries failed requests itself (writes: see build_store).
    client_retries: bool,
}

impl Remote {
    /// For reading: transient failures are retried by this module, resuming a cut range.
    pub(super) fn new(url: &str, options: &RemoteOptions) -> Result<Self> {
        Self::with_client_retries(url, options, false)
    }

    /// For writing: object_store retries each request (a multipart upload's part, its start
    /// and completion) on transient failures, as `options.retry` bounds them.
    pub(super) fn for_writing(url: &str, options: &RemoteOptions) -> Result<Self> {
        Self::with_client_retries(url, options, true)
    }

    fn with_client_retries(
        url: &str,
        options: &RemoteOptions,
        client_retries: bool,
    ) -> Result<Self> {
        let location = parse_url(url)?;
        let remote = Remote {
            url: url.into(),
            location,
            options: options.clone(),
            secrets: secrets_of(options),
            client: Mutex::new(None),
            client_retries,
        };
        // Bad options fail here, before any request.
        remote.client()?;
        Ok(remote)
    }

    /// Removes every secret value from `text`.
    pub(super) fn redact(&self, text: &str) -> String {
        self.secrets.iter().fold(text.to_string(), |text, secret| {
            text.replace(secret.as_str(), "<redacted>")
        })
    }

    pub(super) fn error(
        &self,
        byte: Option<u64>,
        kind: ErrorKind,
        message: impl AsRef<str>,
    ) -> Error {
        let mut location = Location::default().with_file(shown_url(&self.url));
        location.byte = byte;
        Error::new(kind, location, self.redact(message.as_ref()))
    }

    fn config_error(&self, message: impl AsRef<str>) -> Error {
        self.error(None, ErrorKind::Config, message)
    }

    fn build_store(&self) -> Result<Arc<dyn ObjectStore>> {
        install_tls_provider();
        // Reads are retried by this module (see read_into), which resumes a cut body where it
        // stopped: object_store makes one attempt. A write's requests (a part is idempotent:
        // sent again whole under its number) are retried by object_store, as bounded here.
        let policy = &self.options.retry;
        let retry = match self.client_retries {
            false => object_store::RetryConfig {
                max_retries: 0,
                ..Default::default()
            },
            true => object_store::RetryConfig {
                backoff: object_store::BackoffConfig {
                    init_backoff: policy.initial_backoff,
                    max_backoff: policy.max_backoff,
                    base: 2.0,
                },
                max_retries: policy.max_attempts.saturating_sub(1) as usize,
                retry_timeout: policy.max_elapsed,
            },
        };
        let store: Arc<dyn ObjectStore> = match &self.location {
            ObjectUrl::Bucket {
                cloud: Cloud::Gcs,
                bucket,
                ..
            } => Arc::new(self.gcs_store(bucket, retry)?),
            ObjectUrl::Bucket {
                cloud: Cloud::S3,
                bucket,
                ..
            } => {
                let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
                let mut endpoint = std::env::var("AWS_ENDPOINT")
                    .or_else(|_| std::env::var("AWS_ENDPOINT_URL"))
                    .ok();
                let mut allow_http_given = false;
                for (key, value) in self.options.storage_options.pairs() {
                    let Ok(parsed) = key.parse::<AmazonS3ConfigKey>() else {
                        // Google's own settings are for gs:// URLs read with the same options.
                        if key.parse::<GoogleConfigKey>().is_ok() {
                            continue;
                        }
                        return Err(self.config_error(format!(
                            "unknown storage option '{key}' (expected a name such as \
                             aws_access_key_id, aws_secret_access_key, aws_endpoint, aws_region, \
                             aws_allow_http, timeout)"
                        )));
                    };
                    match parsed {
                        AmazonS3ConfigKey::Endpoint => endpoint = Some(value.clone()),
                        AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp) => {
                            allow_http_given = true
                        }
                        _ => {}
                    }
                    builder = builder.with_config(parsed, value);
                }
                if asks_for_plain_http(endpoint.as_deref(), allow_http_given) {
                    builder = builder.with_config(
                        AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp),
                        "true",
                    );
                }
                let store = builder
                    .with_retry(retry)
                    .build()
                    .map_err(|e| self.config_error(format!("cannot reach the bucket: {e}")))?;
                Arc::new(store)
            }
            ObjectUrl::Http { base, .. } => {
                let mut builder = HttpBuilder::new().with_url(base.as_str());
                if base.starts_with("http://") {
                    builder = builder.with_config(ClientConfigKey::AllowHttp, "true");
                }
                for (key, value) in self.options.storage_options.pairs() {
                    match key.parse::<ClientConfigKey>() {
                        Ok(parsed) => builder = builder.with_config(parsed, value),
                        // The clouds' own settings are for their URLs read with the same
                        // options.
                        Err(_)
                            if key.parse::<AmazonS3ConfigKey>().is_ok()
                                || key.parse::<GoogleConfigKey>().is_ok() => {}
                        Err(_) => {
                            return Err(self.config_error(format!(
                                "unknown storage option '{key}' for an HTTP URL (expected a \
                                 client setting such as timeout, connect_timeout, allow_http)"
                            )))
                        }
                    }
                }
                let store = builder
                    .with_retry(retry)
                    .build()
                    .map_err(|e| self.config_error(format!("cannot reach the server: {e}")))?;
                Arc::new(store)
            }
        };
        Ok(store)
    }

    /// A Google Cloud Storage bucket: settings from the environment (`GOOGLE_*`, the
    /// application default credentials), overridden by the storage options.
    fn gcs_store(
        &self,
        bucket: &str,
        retry: object_store::RetryConfig,
    ) -> Result<GoogleCloudStorage> {
        let mut builder = GoogleCloudStorageBuilder::from_env().with_bucket_name(bucket);
        let mut base_url = std::env::var("GOOGLE_BASE_URL").ok();
        if base_url.is_none() {
            // The emulator variable of Google's own client libraries: the emulator's address,
            // which takes no credentials. GOOGLE_BASE_URL and the storage options win over it.
            if let Some(host) = std::env::var("STORAGE_EMULATOR_HOST")
                .ok()
                .filter(|host| !host.is_empty())
            {
                let url = match host.contains("://") {
                    true => host,
                    false => format!("http://{host}"),
                };
                builder = builder
                    .with_config(GoogleConfigKey::BaseUrl, &url)
                    .with_config(GoogleConfigKey::SkipSignature, "true");
                base_url = Some(url);
            }
        }
        let mut allow_http_given = false;
        for (key, value) in self.options.storage_options.pairs() {
            let Ok(parsed) = key.parse::<GoogleConfigKey>() else {
                // S3's own settings are for s3:// URLs read with the same options.
                if key.parse::<AmazonS3ConfigKey>().is_ok() {
                    continue;
                }
                return Err(self.config_error(format!(
                    "unknown storage option '{key}' (expected a name such as \
                     google_application_credentials, google_service_account_key, \
                     google_base_url, google_skip_signature, timeout)"
                )));
            };
            match parsed {
                GoogleConfigKey::BaseUrl => base_url = Some(value.clone()),
                GoogleConfigKey::Client(ClientConfigKey::AllowHttp) => allow_http_given = true,
                _ => {}
            }
            builder = builder.with_config(parsed, value);
        }
        if asks_for_plain_http(base_url.as_deref(), allow_http_given) {
            builder =
                builder.with_config(GoogleConfigKey::Client(ClientConfigKey::AllowHttp), "true");
        }
        builder
            .with_retry(retry)
            .build()
            .map_err(|e| self.config_error(format!("cannot reach the bucket: {e}")))
    }

    /// The store and runtime of this process (made on first use, and again after a fork).
    pub(super) fn client(&self) -> Result<(Arc<dyn ObjectStore>, Arc<tokio::runtime::Runtime>)> {
        let mut slot = self
            .client
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let pid = std::process::id();
        match slot.as_ref() {
            Some(client) if client.pid == pid => {}
            _ => {
                let client = Client {
                    pid,
                    store: self.build_store()?,
                    runtime: runtime()?,
                };
                if let Some(stale) = slot.replace(client) {
                    // Its connections belong to the parent's runtime.
                    std::mem::forget(stale);
                }
            }
        }
        let client = slot.as_ref().expect("set above");
        Ok((client.store.clone(), client.runtime.clone()))
    }

    /// The URL, as given.
    pub(super) fn url(&self) -> &str {
        &self.url
    }

    /// Whether the object is in S3 (the only store written to: HTTP servers take no writes,
    /// and no Google Cloud Storage emulator that the tests can run takes object_store's).
    pub(super) fn is_s3(&self) -> bool {
        matches!(
            self.location,
            ObjectUrl::Bucket {
                cloud: Cloud::S3,
                ..
            }
        )
    }

    pub(super) fn path(&self) -> Result<ObjectPath> {
        let raw = match &self.location {
            ObjectUrl::Bucket { key, .. } => key,
            ObjectUrl::Http { path, .. } => path,
        };
        ObjectPath::from_url_path(raw)
            .map_err(|e| self.config_error(format!("not a valid object path: {e}")))
    }

    /// Sorts a failure of object_store into transient, permanent or replaced, with a message
    /// saying what the server said. `reached` tells whether the server answered before (a
    /// refused connection is then a server restarting, not a wrong endpoint).
    pub(super) fn classify(&self, error: &object_store::Error, reached: bool) -> Failure {
        use object_store::Error as E;
        let said = server_said(error);
        match error {
            E::NotFound { .. } => Failure::Permanent(format!("not found ({said})")),
            E::PermissionDenied { .. } => Failure::Permanent(format!("access denied ({said})")),
            E::Unauthenticated { .. } => Failure::Permanent(format!("not authenticated ({said})")),
            E::Precondition { .. } => Failure::Replaced(said),
            E::Generic { .. } => {
                if let Some(status) = http_status(error) {
                    return if status >= 500 || status == 429 || status == 408 {
                        Failure::Transient(said)
                    } else {
                        Failure::Permanent(said)
                    };
                }
                match http_error_kind(error) {
                    Some(HttpErrorKind::Connect) if !reached => Failure::Permanent(format!(
                        "cannot connect to the server (is the endpoint right?): {said}"
                    )),
                    Some(
                        HttpErrorKind::Connect
                        | HttpErrorKind::Request
                        | HttpErrorKind::Timeout
                        | HttpErrorKind::Interrupted
                        | HttpErrorKind::Decode,
                    ) => Failure::Transient(said),
                    _ => Failure::Permanent(said),
                }
            }
            _ => Failure::Permanent(said),
        }
    }

    /// What the server says when asked for the object's first byte: a refused HEAD has no
    /// body, a GET's says why (S3's `SignatureDoesNotMatch`, `InvalidAccessKeyId`, ...).
    fn explain(&self, path: &ObjectPath) -> Option<String> {
        let (store, runtime) = self.client().ok()?;
        let options = GetOptions {
            range: Some(GetRange::Bounded(0..1)),
            ..GetOptions::default()
        };
        let error = runtime.block_on(store.get_opts(path, options)).err()?;
        let said = server_said(&error);
        match self.classify(&error, false) {
            Failure::Permanent(said_in_full) if said.contains(", ") => Some(said_in_full),
            _ => None,
        }
    }

    /// Waits before attempt `attempt + 1`, or says why there is none (the bounds are reached).
    fn back_off(&self, attempt: u32, started: Instant) -> bool {
        let policy = &self.options.retry;
        if attempt >= policy.max_attempts.max(1) {
            return false;
        }
        let ceiling = policy
            .initial_backoff
            .saturating_mul(1u32 << (attempt - 1).min(20))
            .min(policy.max_backoff);
        let fraction = (std::collections::hash_map::RandomState::new().hash_one(attempt) >> 11)
            as f64
            / (1u64 << 53) as f64;
        let wait = ceiling.mul_f64(fraction);
        if started.elapsed() + wait > policy.max_elapsed {
            return false;
        }
        std::thread::sleep(wait);
        true
    }
}

/// The HTTP status in an object_store error's chain. object_store keeps its request error
/// type private; its message reads `Server returned non-2xx status code: 503 ...`.
fn http_status(error: &object_store::Error) -> Option<u16> {
    const MARK: &str = "non-2xx status code: ";
    let text = error.to_string();
    let at = text.find(MARK)? + MARK.len();
    text.get(at..at + 3)?.parse().ok()
}

fn http_error_kind(error: &object_store::Error) -> Option<HttpErrorKind> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(http) = e.downcast_ref::<HttpError>() {
            return Some(http.kind());
        }
        source = e.source();
    }
    None
}

/// What the server said: the status and, for S3, the error's code and message from its XML
/// body; otherwise object_store's message.
fn server_said(error: &object_store::Error) -> String {
    let text = error.to_string();
    let tag = |name: &str| {
        let open = format!("<{name}>");
        let start = text.find(&open)? + open.len();
        let end = start + text[start..].find(&format!("</{name}>"))?;
        Some(text[start..end].to_string())
    };
    match (http_status(error), tag("Code")) {
        (Some(status), Some(code)) => match tag("Message") {
            Some(message) => format!("HTTP {status}, {code}: {message}"),
            None => format!("HTTP {status}, {code}"),
        },
        (Some(status), None) => format!("HTTP {status}"),
        // object_store's message, and the innermost cause where it does not say it
        // (`connection refused`, `operation timed out`).
        _ => {
            let mut root: &(dyn std::error::Error + 'static) = error;
            while let Some(source) = root.source() {
                root = source;
            }
            let cause = root.to_string();
            if text.contains(&cause) {
                text
            } else {
                format!("{text}: {cause}")
            }
        }
    }
}

/// The most bytes one GET asks for: a larger read is split into ranged GETs of this size,
/// [`PARALLEL_PARTS`] of them in flight at once (a large chunk arrives several times as fast
/// from a server that serves each connection at its own pace).
pub const PART_BYTES: usize = 8 << 20;

/// The most GETs one read has in flight at once.
pub const PARALLEL_PARTS: usize = 4;

/// A remote object opened for reading at random: its URL, size and ETag as the server gave
/// them when it was opened.
pub struct RemoteObject {
    remote: Remote,
    size: u64,
    etag: Option<String>,
}

impl std::fmt::Debug for RemoteObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteObject")
            .field("url", &shown_url(&self.remote.url))
            .field("size", &self.size)
            .field("etag", &self.etag)
            .finish()
    }
}

impl RemoteObject {
    /// Opens the object that [`glob()`] listed as `entry`, with no request when the listing
    /// gave its ETag (a corpus's shards); else as [`RemoteObject::open`] does.
    pub fn open_listed(entry: &RemoteEntry, options: &RemoteOptions) -> Result<Self> {
        let Some(etag) = &entry.etag else {
            return Self::open(&entry.url, options);
        };
        Ok(RemoteObject {
            remote: Remote::new(&entry.url, options)?,
            size: entry.size,
            etag: Some(etag.clone()),
        })
    }

    /// Opens the object at `url`: one HEAD request (retried like a read) for its size and
    /// ETag.
    pub fn open(url: &str, options: &RemoteOptions) -> Result<Self> {
        let remote = Remote::new(url, options)?;
        let path = remote.path()?;
        let started = Instant::now();
        let mut attempt = 1;
        loop {
            let (store, runtime) = remote.client()?;
            let failure = match runtime.block_on(store.head(&path)) {
                Ok(meta) => {
                    return Ok(RemoteObject {
                        remote,
                        size: meta.size,
                        etag: meta.e_tag,
                    })
                }
                Err(e) => remote.classify(&e, false),
            };
            match failure {
                Failure::Transient(said) => {
                    if !remote.back_off(attempt, started) {
                        return Err(remote.error(
                            None,
                            ErrorKind::Io,
                            gave_up(attempt, started, &said),
                        ));
                    }
                    attempt += 1;
                }
                Failure::Permanent(said) | Failure::Replaced(said) => {
                    let said = remote.explain(&path).unwrap_or(said);
                    return Err(remote.error(None, ErrorKind::Io, said));
                }
            }
        }
    }

    /// The URL, as given.
    pub fn url(&self) -> &str {
        &self.remote.url
    }

    /// The object's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The object's ETag when it was opened (servers without ETags give none).
    pub fn etag(&self) -> Option<&str> {
        self.etag.as_deref()
    }

    /// Reads `len` bytes at `offset`: exactly those bytes, of the version that was opened, or
    /// an error naming the URL and the byte where the read stopped. One ranged GET, or for
    /// more than [`PART_BYTES`] one per part, [`PARALLEL_PARTS`] at a time.
    pub fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0; len];
        self.read_exact_at(offset, &mut buf)?;
        Ok(buf)
    }

    /// Fills `buf` with the bytes at `offset`, each written once, where it belongs; see
    /// [`RemoteObject::read_at`].
    pub fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let len = buf.len();
        let within = offset
            .checked_add(len as u64)
            .is_some_and(|end| end <= self.size);
        if len <= PART_BYTES || !within {
            return self.read_range_into(offset, buf); // one GET, or the error it gives
        }
        // A large range in parts of PART_BYTES, PARALLEL_PARTS at a time: each part is its own
        // ranged GET, retried and resumed on its own; the first error (in byte order) is the
        // read's.
        let parts = Mutex::new(buf.chunks_mut(PART_BYTES).enumerate());
        let failures = Mutex::new(Vec::new());
        let failed = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            for _ in 0..PARALLEL_PARTS.min(len.div_ceil(PART_BYTES)) {
                scope.spawn(|| {
                    while !failed.load(std::sync::atomic::Ordering::Relaxed) {
                        let next = parts.lock().unwrap_or_else(|p| p.into_inner()).next();
                        let Some((i, out)) = next else { break };
                        let at = offset + (i * PART_BYTES) as u64;
                        if let Err(e) = self.read_range_into(at, out) {
                            failed.store(true, std::sync::atomic::Ordering::Relaxed);
                            let mut failures = failures.lock().unwrap_or_else(|p| p.into_inner());
                            failures.push((at, e));
                        }
                    }
                });
            }
        });
        let failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
        match failures.into_iter().min_by_key(|(at, _)| *at) {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    }

    /// Fills `buf` with the bytes at `offset` with one ranged GET, retried and resumed where
    /// its bytes stopped.
    fn read_range_into(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let remote = &self.remote;
        let len = buf.len();
        let end = offset
            .checked_add(len as u64)
            .filter(|&end| end <= self.size);
        let Some(end) = end else {
            return Err(remote.error(
                Some(offset),
                ErrorKind::UnexpectedEof,
                format!(
                    "a read of {len} bytes at byte {offset} goes past the object's end ({} bytes)",
                    self.size
                ),
            ));
        };
        if len == 0 {
            return Ok(());
        }
        let path = remote.path()?;
        let started = Instant::now();
        let mut attempt = 1;
        let mut filled = 0;
        loop {
            let from = offset + filled as u64;
            let (store, runtime) = remote.client()?;
            let (got, failure) =
                runtime.block_on(self.fetch(&*store, &path, from..end, &mut buf[filled..]));
            filled += got;
            let Some(failure) = failure else {
                return Ok(());
            };
            let at = Some(offset + filled as u64);
            match failure {
                Failure::Transient(said) => {
                    if !remote.back_off(attempt, started) {
                        return Err(remote.error(
                            at,
                            ErrorKind::Io,
                            gave_up(attempt, started, &said),
                        ));
                    }
                    attempt += 1;
                }
                Failure::Permanent(said) => return Err(remote.error(at, ErrorKind::Io, said)),
                Failure::Replaced(said) => {
                    return Err(remote.error(
                        at,
                        ErrorKind::Io,
                        format!(
                            "the object changed while it was read (it is no longer the version \
                             with ETag {} that was opened; {said}): read it again from the start",
                            self.etag.as_deref().unwrap_or("(none)")
                        ),
                    ))
                }
            }
        }
    }

    /// One ranged GET of `range` into `out` (as long as the range): how many bytes arrived,
    /// and the failure, `None` when all did.
    async fn fetch(
        &self,
        store: &dyn ObjectStore,
        path: &ObjectPath,
        range: std::ops::Range<u64>,
        out: &mut [u8],
    ) -> (usize, Option<Failure>) {
        let options = GetOptions {
            range: Some(GetRange::Bounded(range)),
            if_match: self.etag.clone(),
            ..GetOptions::default()
        };
        let result = match store.get_opts(path, options).await {
            Ok(result) => result,
            Err(e) => return (0, Some(self.remote.classify(&e, true))),
        };
        // Servers that ignore If-Match still say which version they sent. Quotes aside: a
        // listing may give an ETag without them (fake-gcs-server's does), a GET with them.
        if let (Some(expected), Some(got)) = (&self.etag, &result.meta.e_tag) {
            if expected.trim_matches('"') != got.trim_matches('"') {
                let said = format!("the server now has ETag {got}");
                return (0, Some(Failure::Replaced(said)));
            }
        }
        let mut got = 0;
        let mut stream = result.into_stream();
        while let Some(piece) = stream.next().await {
            match piece {
                Ok(bytes) => {
                    let room = (out.len() - got).min(bytes.len());
                    out[got..got + room].copy_from_slice(&bytes[..room]);
                    got += room;
                }
                Err(e) => return (got, Some(self.remote.classify(&e, true))),
            }
        }
        let wanted = out.len();
        let short = (got < wanted).then(|| {
            Failure::Transient(format!("the response ended after {got} of {wanted} bytes"))
        });
        (got, short)
    }
}

fn gave_up(attempts: u32, started: Instant, said: &str) -> String {
    format!(
        "gave up after {attempts} attempts in {:.1} s; the last failure: {said}",
        started.elapsed().as_secs_f64()
    )
}

/// One object found by [`glob()`]: its URL, size and ETag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteEntry {
    /// `s3://bucket/key` or `gs://bucket/key`.
    pub url: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its ETag, as the listing gave it.
    pub etag: Option<String>,
}

/// The objects whose URL matches `pattern` (`s3://bucket/dir/train-*.ctf`; `*`, `?` and `[...]`
/// as in shell globs, never matching `/`), in sorted order. Only bucket URLs (`s3://`, `gs://`)
/// can be listed. [`RemoteObject::open_listed`] opens one with no HEAD request.
pub fn glob(pattern: &str, options: &RemoteOptions) -> Result<Vec<RemoteEntry>> {
    let remote = Remote::new(pattern, options)?;
    let ObjectUrl::Bucket { cloud, bucket, key } = &remote.location else {
        return Err(remote.config_error(
            "an HTTP URL cannot be listed: name each file (globs need s3:// or gs:// URLs)",
        ));
    };
    let scheme = cloud.scheme();
    let matcher = glob::Pattern::new(key)
        .map_err(|e| remote.config_error(format!("not a valid glob: {e}")))?;
    // The directory part before the first wildcard: object_store lists whole path segments.
    let literal = &key[..key.find(['*', '?', '[']).unwrap_or(key.len())];
    let directory = &literal[..literal.rfind('/').unwrap_or(0)];
    let prefix = (!directory.is_empty()).then(|| ObjectPath::from(directory));
    let match_options = glob::MatchOptions {
        require_literal_separator: true,
        ..glob::MatchOptions::default()
    };
    let started = Instant::now();
    let mut attempt = 1;
    loop {
        let (store, runtime) = remote.client()?;
        let listed = runtime.block_on(async {
            let mut found = Vec::new();
            let mut stream = store.list(prefix.as_ref());
            while let Some(meta) = stream.next().await {
                let meta = meta?;
                if matcher.matches_with(meta.location.as_ref(), match_options) {
                    found.push(RemoteEntry {
                        url: format!("{scheme}://{bucket}/{}", meta.location),
                        size: meta.size,
                        etag: meta.e_tag,
                    });
                }
            }
            Ok::<_, object_store::Error>(found)
        });
        match listed {
            Ok(mut found) => {
                found.sort_by(|a, b| a.url.cmp(&b.url));
                return Ok(found);
            }
            Err(e) => match remote.classify(&e, false) {
                Failure::Transient(said) => {
                    if !remote.back_off(attempt, started) {
                        let message = gave_up(attempt, started, &said);
                        return Err(remote.error(None, ErrorKind::Io, message));
                    }
                    attempt += 1;
                }
                Failure::Permanent(said) | Failure::Replaced(said) => {
                    return Err(remote.error(None, ErrorKind::Io, format!("cannot list: {said}")))
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_taken_apart() {
        assert_eq!(
            parse_url("s3://data/dir/train-1.ctf").unwrap(),
            ObjectUrl::Bucket {
                cloud: Cloud::S3,
                bucket: "data".into(),
                key: "dir/train-1.ctf".into()
            }
        );
        assert_eq!(
            parse_url("GS://data/train-1.ctf").unwrap(),
            ObjectUrl::Bucket {
                cloud: Cloud::Gcs,
                bucket: "data".into(),
                key: "train-1.ctf".into()
            }
        );
        assert_eq!(
            parse_url("http://127.0.0.1:8080/a/b.cbf").unwrap(),
            ObjectUrl::Http {
                base: "http://127.0.0.1:8080".into(),
                path: "a/b.cbf".into()
            }
        );
        // A query goes with every request (object_store keeps the base URL's); a fragment
        // never leaves the client.
        assert_eq!(
            parse_url("https://host/a/b.ctf?X-Amz-Signature=abc&x=1#part").unwrap(),
            ObjectUrl::Http {
                base: "https://host?X-Amz-Signature=abc&x=1".into(),
                path: "a/b.ctf".into()
            }
        );
        assert_eq!(
            shown_url("https://host/b.ctf?sig=abc"),
            "https://host/b.ctf?<redacted>"
        );
        assert_eq!(shown_url("s3://data/b.ctf"), "s3://data/b.ctf");
        let err = parse_url("ftp://host/x?sig=abc").unwrap_err();
        assert!(!err.to_string().contains("abc"), "{err}");
        for bad in [
            "s3:///key",
            "gs:///key",
            "ftp://host/x",
            "data.ctf",
            "http://user:pw@host/x",
        ] {
            let err = parse_url(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Config, "{bad}");
            assert!(err.to_string().starts_with(bad), "{err}");
        }
        assert!(is_remote_url("S3://b/k") && is_remote_url("https://h/x"));
        assert!(is_remote_url("gs://b/k") && !is_remote_url("gs://"));
        assert!(!is_remote_url("data/s3://x") && !is_remote_url("s3://"));
        assert!(!is_remote_url("éééééé.ctf"));
    }

    #[test]
    fn storage_options_are_key_value() {
        assert_eq!(
            RemoteOptions::parse_storage_option("AWS_REGION=eu-west-1").unwrap(),
            ("aws_region".to_string(), "eu-west-1".to_string())
        );
        let err = RemoteOptions::parse_storage_option("aws_secret_access_key").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config);
    }

    #[test]
    fn debug_shows_the_names_of_storage_options_never_their_values() {
        let options = RemoteOptions::with_storage_options([
            ("aws_access_key_id", "key-id-5e1f"),
            ("aws_secret_access_key", "secret-9c3a7b"),
        ]);
        let shown = format!("{options:?}");
        assert!(shown.contains("aws_secret_access_key"), "{shown}");
        assert!(
            !shown.contains("secret-9c3a7b") && !shown.contains("key-id-5e1f"),
            "{shown}"
        );
    }

    #[test]
    fn unknown_storage_options_are_refused_naming_them() {
        let options = RemoteOptions::with_storage_options([("aws_no_such_key", "1")]);
        let err = RemoteObject::open("s3://bucket/key", &options).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config);
        assert!(err.to_string().contains("'aws_no_such_key'"), "{err}");
    }
}
