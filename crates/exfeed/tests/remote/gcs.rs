//! gs:// URLs against fake-gcs-server (started by `scripts/services`): every format read
//! through `exfeed::open` as from its file, a glob listing the bucket, a missing object's error
//! naming its URL, and a service account key that never shows.

use super::open::{chunks, ctf_options, ctf_text, local_files, sequences};
use super::{services, unique};
use exfeed::io::remote::{glob, RemoteObject, RemoteOptions};
use exfeed::io::Corpus;
use exfeed::options::{ChunkSize, IndexMode, ReadOptions};
use exfeed::{open, OpenOptions};

fn gcs_open_options(services: &super::Services, read: ReadOptions) -> OpenOptions {
    ctf_options(read.with_storage_options(services.gcs_options().storage_options))
}

#[test]
fn every_format_reads_from_gcs_as_from_its_file() {
    let Some(services) = services() else { return };
    let dir = tempfile::tempdir().unwrap();
    let prefix = unique("gcs-formats");
    for (path, format) in local_files(dir.path()) {
        let name = path.file_name().unwrap().to_str().unwrap();
        let key = format!("{prefix}/{name}");
        services.gcs_put(&key, &std::fs::read(&path).unwrap());
        let url = services.gcs_url_of(&key);
        for read in [
            ReadOptions::new().with_chunk_size(ChunkSize::Bytes(50_000)),
            ReadOptions::new()
                .with_chunk_size(ChunkSize::Bytes(50_000))
                .with_index(IndexMode::Full),
        ] {
            let local = ctf_options(read.clone());
            let remote = gcs_open_options(&services, read);
            let data = open(url.as_str(), &remote).unwrap();
            assert_eq!(data.format(), format, "{url}");
            assert_eq!(data.name(), url.as_str());
            let local_name = path.to_str().unwrap();
            assert_eq!(
                sequences(&url, &remote),
                sequences(local_name, &local),
                "{url}"
            );
            assert_eq!(chunks(&url, &remote), chunks(local_name, &local), "{url}");
        }
    }
}

#[test]
fn a_glob_lists_the_bucket_and_its_objects_read_as_listed() {
    let Some(services) = services() else { return };
    let dir = unique("gcs-corpus");
    let texts = [
        ("train-2.ctf", ctf_text(30)),
        ("train-1.ctf", ctf_text(20)),
        ("test-1.ctf", ctf_text(10)),
    ];
    for (name, text) in &texts {
        services.gcs_put(&format!("{dir}/{name}"), text.as_bytes());
    }
    let pattern = services.gcs_url_of(&format!("{dir}/train-*.ctf"));
    let options = services.gcs_options();
    let found = glob(&pattern, &options).unwrap();
    let urls: Vec<_> = found.iter().map(|e| e.url.clone()).collect();
    let train = |n: usize| services.gcs_url_of(&format!("{dir}/train-{n}.ctf"));
    assert_eq!(urls, [train(1), train(2)]);
    assert_eq!(found[0].size, texts[1].1.len() as u64);
    // Opened from the listing (no HEAD): reads compare the listed ETag, which
    // fake-gcs-server gives without the quotes its GETs give, with the GET's.
    for (entry, text) in found.iter().zip([&texts[1].1, &texts[0].1]) {
        let object = RemoteObject::open(&entry.url, &options).unwrap();
        assert_eq!(object.read_at(0, text.len()).unwrap(), text.as_bytes());
    }

    // The same through a corpus: listed, opened and read as the local files are.
    let corpus = Corpus::Glob(pattern);
    let files = corpus.expand_with(&options.storage_options).unwrap();
    let read = gcs_open_options(&services, ReadOptions::new());
    let got: Vec<_> = (files.iter())
        .flat_map(|url| sequences(url.to_str().unwrap(), &read))
        .collect();
    let local = tempfile::tempdir().unwrap();
    let want: Vec<_> = [&texts[1].1, &texts[0].1]
        .iter()
        .enumerate()
        .flat_map(|(i, text)| {
            let path = local.path().join(format!("{i}.ctf"));
            std::fs::write(&path, text).unwrap();
            sequences(path.to_str().unwrap(), &ctf_options(ReadOptions::new()))
        })
        .collect();
    assert_eq!(got.len(), 50);
    assert_eq!(got, want);
}

#[test]
fn a_missing_object_is_an_error_naming_its_url_and_no_key_shows() {
    let Some(services) = services() else { return };
    let missing = services.gcs_url_of(&unique("missing.ctf"));
    let err = open(
        missing.as_str(),
        &gcs_open_options(&services, ReadOptions::new()),
    )
    .err()
    .unwrap();
    assert!(err.to_string().starts_with(&missing), "{err}");
    assert!(err.to_string().contains("not found"), "{err}");

    // A service account's key (fake-gcs-server takes any, with OAuth off) reaches the bucket,
    // and its private key shows in no error or debug form.
    let private_key = "-----BEGIN PRIVATE KEY-----not-a-real-key-5f3a9c-----END PRIVATE KEY-----";
    let account = format!(
        r#"{{"private_key":"{private_key}","private_key_id":"k1","client_email":"test@example.com","gcs_base_url":"{}","disable_oauth":true}}"#,
        services.gcs_url
    );
    let options = RemoteOptions::with_storage_options([
        ("google_service_account_key", account.as_str()),
        ("google_allow_http", "true"),
    ]);
    let key = unique("account.ctf");
    services.gcs_put(&key, b"0 |a 1 2 3\n");
    let object = RemoteObject::open(&services.gcs_url_of(&key), &options).unwrap();
    assert_eq!(object.read_at(0, 4).unwrap(), b"0 |a");
    let err = RemoteObject::open(&missing, &options).unwrap_err();
    assert!(err.to_string().starts_with(&missing), "{err}");
    let shown = format!("{err} {err:?} {options:?}");
    assert!(!shown.contains("not-a-real-key-5f3a9c"), "{shown}");

    // An S3 option with a gs:// URL is S3's (ignored); a name neither store knows is refused.
    let mixed = RemoteOptions::with_storage_options([
        ("google_base_url", services.gcs_url.as_str()),
        ("google_skip_signature", "true"),
        ("aws_region", "us-east-1"),
    ]);
    assert_eq!(
        RemoteObject::open(&services.gcs_url_of(&key), &mixed)
            .unwrap()
            .size(),
        11
    );
    let unknown = RemoteOptions::with_storage_options([("google_no_such_key", "1")]);
    let err = RemoteObject::open(&missing, &unknown).unwrap_err();
    assert!(err.to_string().contains("'google_no_such_key'"), "{err}");
}
