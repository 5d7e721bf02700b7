//! Every command reads URLs, through the real binary, against the real test services
//! (`scripts/services`: SeaweedFS for s3:// with signed requests, nginx for http://): `read`,
//! `check`, `dump`, `info`, `convert`'s input, a config's `file = s3://...`, `--corpus` globs
//! of the bucket and list files of URLs, with `--storage-option` for the credentials.
//!
//! Without the services' variables these tests say they were skipped; under CI=true they fail.

mod common;
#[path = "../../exfeed/tests/remote/services.rs"]
mod services;

use common::{dumped_sequences, exfeed, text};
use services::{services, unique, Services};
use std::path::Path;

const INPUTS: [&str; 4] = ["-i", "features:dense:4", "-i", "label:sparse:3"];

fn sample_ctf() -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples/sequences.ctf"))
        .unwrap()
}

/// The sample written to `dir` as sequences.ctf and put in the bucket under a unique key
/// made from `name`: (the local file, the key, its s3:// URL).
fn sample_here_and_in_the_bucket(
    services: &Services,
    dir: &Path,
    name: &str,
) -> (std::path::PathBuf, String, String) {
    let local = dir.join("sequences.ctf");
    std::fs::write(&local, sample_ctf()).unwrap();
    let key = unique(name);
    services.put(&key, &sample_ctf());
    let s3 = services.url(&key);
    (local, key, s3)
}

/// `--storage-option`s for the read-write identity.
fn storage_flags(services: &Services) -> Vec<String> {
    [
        format!("aws_endpoint={}", services.s3_endpoint),
        format!("aws_access_key_id={}", services.key_id),
        format!("aws_secret_access_key={}", services.secret),
        "aws_region=us-east-1".to_string(),
    ]
    .into_iter()
    .flat_map(|option| ["--storage-option".to_string(), option])
    .collect()
}

/// Runs `exfeed ARGS`, which must succeed; its standard output with `name` (the input as
/// given) replaced by `DATA`, so that a URL's output compares with the file's.
fn run_ok(args: &[String], name: &str) -> String {
    let out = exfeed(args);
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    text(&out.stdout).replace(name, "DATA")
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

#[test]
fn read_check_dump_info_and_convert_take_a_url_as_a_file() {
    let Some(services) = services() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (local, key, s3) = sample_here_and_in_the_bucket(&services, dir.path(), "sequences.ctf");
    let http = services.serve(&format!("{}.ctf", key.replace('/', "-")), &sample_ctf());
    let local_name = local.to_str().unwrap();
    let commands: [&[&str]; 5] = [
        &["read", "--dump", "-m", "4", "--seed", "3"],
        &["check"],
        &["dump"],
        &["info"],
        &[
            "read", "--index", "full", "--dump", "-m", "4", "--seed", "3",
        ],
    ];
    for command in commands {
        let with = |input: &str, remote: bool| {
            let mut args = strings(command);
            args.push(input.to_string());
            args.extend(strings(&INPUTS));
            if remote {
                args.extend(storage_flags(&services));
            }
            args
        };
        let want = run_ok(&with(local_name, false), local_name);
        assert!(!want.is_empty(), "{command:?}");
        assert_eq!(run_ok(&with(&s3, true), &s3), want, "{command:?} {s3}");
        assert_eq!(
            run_ok(&with(&http, false), &http),
            want,
            "{command:?} {http}"
        );
    }
    // convert: the URL's CBF is the file's, byte for byte.
    let (from_file, from_url) = (dir.path().join("a.cbf"), dir.path().join("b.cbf"));
    let convert = |input: &str, out: &Path| {
        let mut args = strings(&["convert", input, out.to_str().unwrap()]);
        args.extend(strings(&INPUTS));
        args.extend(storage_flags(&services));
        run_ok(&args, input)
    };
    convert(local_name, &from_file);
    convert(&s3, &from_url);
    assert_eq!(
        std::fs::read(&from_file).unwrap(),
        std::fs::read(&from_url).unwrap()
    );
}

#[test]
fn a_config_names_a_url_and_a_corpus_globs_the_bucket() {
    let Some(services) = services() else { return };
    let dir = tempfile::tempdir().unwrap();
    let prefix = unique("corpus");
    // Three shards of whole sequences (ids 0-9, 10-24, 25-39).
    let mut shards = [Vec::new(), Vec::new(), Vec::new()];
    for line in sample_ctf().split_inclusive(|&b| b == b'\n') {
        let id: u32 = text(line).split(' ').next().unwrap().parse().unwrap();
        shards[[10, 25, u32::MAX].iter().position(|&end| id < end).unwrap()]
            .extend_from_slice(line);
    }
    let mut list = String::new();
    for (i, shard) in shards.iter().enumerate() {
        std::fs::write(dir.path().join(format!("train-{i}.ctf")), shard).unwrap();
        services.put(&format!("{prefix}/train-{i}.ctf"), shard);
        list += &format!("{}\n", services.url(&format!("{prefix}/train-{i}.ctf")));
    }
    // An object the glob must not take.
    services.put(&format!("{prefix}/other.txt"), b"not a shard");
    services.put(&format!("{prefix}/list.txt"), list.as_bytes());
    let read = |corpus: &str| {
        let mut args = strings(&["read", "--corpus", corpus, "--dump", "-m", "5"]);
        args.extend(strings(&INPUTS));
        args.extend(storage_flags(&services));
        let out = exfeed(&args);
        assert!(out.status.success(), "{corpus}: {}", text(&out.stderr));
        dumped_sequences(&out)
    };
    let local_glob = dir.path().join("train-*.ctf");
    let want = read(local_glob.to_str().unwrap());
    assert_eq!(want.len(), 40);
    let bucket_glob = services.url(&format!("{prefix}/train-*.ctf"));
    assert_eq!(read(&bucket_glob), want);
    let list_file = format!("@{}", services.url(&format!("{prefix}/list.txt")));
    assert_eq!(read(&list_file), want);

    // A config whose reader names the object.
    let whole = unique("whole.ctf");
    services.put(&whole, &sample_ctf());
    let config = dir.path().join("remote.cntk");
    let sample_config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples/sequences.cntk");
    let config_text = std::fs::read_to_string(sample_config)
        .unwrap()
        .replace("$ConfigDir$/sequences.ctf", &services.url(&whole));
    std::fs::write(&config, config_text).unwrap();
    let mut args = strings(&[
        "read",
        "--config",
        config.to_str().unwrap(),
        "--dump",
        "-m",
        "5",
    ]);
    args.extend(storage_flags(&services));
    let out = exfeed(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(dumped_sequences(&out).len(), 40);
}

#[test]
fn a_refused_read_names_the_url_and_never_the_secret() {
    let Some(services) = services() else { return };
    let key = unique("secret.ctf");
    services.put(&key, &sample_ctf());
    let url = services.url(&key);
    let wrong_secret = "wrong-secret-4f2a9c7e1b";
    for secret in [wrong_secret, services.secret.as_str()] {
        let mut args = strings(&["check", &url]);
        args.extend(strings(&INPUTS));
        args.extend(strings(&[
            "--storage-option",
            &format!("aws_endpoint={}", services.s3_endpoint),
            "--storage-option",
            &format!("aws_access_key_id={}", services.key_id),
            "--storage-option",
            &format!("aws_secret_access_key={secret}"),
            "--storage-option",
            "aws_region=us-east-1",
        ]));
        if secret == wrong_secret {
            let out = exfeed(&args);
            assert!(!out.status.success());
            let shown = format!("{}{}", text(&out.stdout), text(&out.stderr));
            assert!(shown.contains(&url), "{shown}");
            assert!(shown.contains("403") || shown.contains("denied"), "{shown}");
            assert!(!shown.contains(wrong_secret), "{shown}");
        } else {
            // The right keys, a missing object: an error that names it.
            let missing = services.url(&unique("missing.ctf"));
            let last = args.iter().position(|a| a == &url).unwrap();
            args[last] = missing.clone();
            let out = exfeed(&args);
            assert!(!out.status.success());
            let shown = format!("{}{}", text(&out.stdout), text(&out.stderr));
            assert!(
                shown.contains(&missing) && shown.contains("not found"),
                "{shown}"
            );
            assert!(!shown.contains(&services.secret), "{shown}");
        }
    }
}

/// The entries of the cache directory `dir`.
fn cache_entries(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("entries")).map_or(0, |d| d.count())
}

#[test]
fn cache_dir_and_cache_limit_as_flags_and_config_keys() {
    let Some(services) = services() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (local, _, s3) = sample_here_and_in_the_bucket(&services, dir.path(), "cached.ctf");
    let local_name = local.to_str().unwrap();
    let cache = dir.path().join("cache");
    for command in [&["read", "--dump", "-m", "4"][..], &["check"], &["dump"]] {
        let mut args = strings(command);
        args.extend(strings(&INPUTS));
        let want = run_ok(
            &[args.clone(), vec![local_name.to_string()]].concat(),
            local_name,
        );
        args.extend(storage_flags(&services));
        args.extend(strings(&[
            "--cache-dir",
            cache.to_str().unwrap(),
            s3.as_str(),
        ]));
        assert_eq!(run_ok(&args, &s3), want, "{command:?}");
        assert!(cache_entries(&cache) > 0, "{command:?}");
        assert_eq!(run_ok(&args, &s3), want, "{command:?} from the cache");
    }

    // The configuration's keys; a limit too small for an entry: read uncached, a warning.
    let small = dir.path().join("small-cache");
    let config = dir.path().join("cached.cntk");
    std::fs::write(
        &config,
        format!(
            "r = [ reader = [ cacheDir = {} ; cacheLimitInBytes = 100 ; \
             deserializers = ( [ type = \"CNTKTextFormatDeserializer\" ; file = \"{s3}\" ; \
             input = [ features = [ dim = 4 ; format = \"dense\" ] ; \
             label = [ dim = 3 ; format = \"sparse\" ] ] ] ) ] ]\n",
            small.display()
        ),
    )
    .unwrap();
    let mut args = strings(&["read", "--dump", "-m", "4", "--config"]);
    args.push(config.display().to_string());
    args.extend(storage_flags(&services));
    let out = exfeed(&args);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(dumped_sequences(&out).len(), 40);
    assert!(
        stderr.contains("read uncached") && stderr.contains(&s3),
        "{stderr}"
    );
    assert!(!stderr.contains(&services.secret), "{stderr}");
    let kept: u64 = std::fs::read_dir(small.join("entries"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(kept <= 100, "{kept} bytes kept");

    // --cache-limit alone is refused.
    let out = exfeed(strings(&["check", "--cache-limit", "1G", local_name]));
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--cache-dir"),
        "{}",
        text(&out.stderr)
    );
}

/// The cache's entries under `dir` that hold a CTF index (an exfeed index cache's magic).
fn index_entries(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("entries")).map_or(0, |entries| {
        entries
            .filter(|e| {
                let bytes = std::fs::read(e.as_ref().unwrap().path()).unwrap();
                bytes.starts_with(b"EXFIDX")
            })
            .count()
    })
}

#[test]
fn cache_index_keeps_a_urls_index_in_the_local_cache() {
    let Some(services) = services() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (local, _, s3) = sample_here_and_in_the_bucket(&services, dir.path(), "indexed.ctf");
    let local_name = local.to_str().unwrap();
    let read = strings(&["read", "--dump", "-m", "4", "--seed", "3"]);
    let want = run_ok(
        &[
            read.clone(),
            strings(&INPUTS),
            strings(&["--index", "full", local_name]),
        ]
        .concat(),
        local_name,
    );
    let cache_home = dir.path().join("cache-home");
    // Without --cache-dir, in the user's cache ($XDG_CACHE_HOME/exfeed/index); with it, there.
    let run_in = |extra: &[&str], cache_home: Option<&Path>| {
        let args = [read.clone(), strings(&INPUTS), storage_flags(&services)];
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_exfeed"));
        command
            .args(args.concat())
            .arg("--cache-index")
            .args(extra)
            .arg(&s3);
        match cache_home {
            Some(home) => command.env("XDG_CACHE_HOME", home),
            None => command.env_remove("XDG_CACHE_HOME").env_remove("HOME"),
        };
        let out = command.output().unwrap();
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(!stderr.contains(&services.secret), "{stderr}");
        assert_eq!(text(&out.stdout).replace(&s3, "DATA"), want);
        stderr
    };
    let run = |extra: &[&str]| {
        let stderr = run_in(extra, Some(&cache_home));
        assert!(!stderr.contains("warning"), "{stderr}");
        stderr
    };
    let user_cache = cache_home.join("exfeed").join("index");
    assert!(run(&[]).contains("index scanned and cached"));
    assert_eq!(index_entries(&user_cache), 1);
    assert!(run(&[]).contains("index from cache"));

    let cache = dir.path().join("cache");
    let cache_dir = ["--cache-dir", cache.to_str().unwrap()];
    assert!(run(&cache_dir).contains("index scanned and cached"));
    assert_eq!(index_entries(&cache), 1);
    assert!(run(&cache_dir).contains("index from cache"));
    assert_eq!(index_entries(&user_cache), 1);

    // No cache directory at all: built on each open, and said once.
    let stderr = run_in(&[], None);
    assert!(stderr.contains("index scanned"), "{stderr}");
    assert_eq!(stderr.matches("warning").count(), 1, "{stderr}");
    assert!(
        stderr.contains("could not write the index cache of this URL: there is no cache directory"),
        "{stderr}"
    );
}

/// `exfeed ARGS` with the environment pointing gs:// URLs at fake-gcs-server, as a user
/// points them at an emulator (Google's settings come from `GOOGLE_*` variables).
fn exfeed_gcs(services: &Services, args: &[String]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_exfeed"))
        .args(args)
        .env("GOOGLE_BASE_URL", &services.gcs_url)
        .env("GOOGLE_SKIP_SIGNATURE", "true")
        .output()
        .unwrap()
}

#[test]
fn info_check_and_a_corpus_read_gs_urls_and_convert_refuses_to_write_one() {
    let Some(services) = services() else { return };
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("sequences.ctf");
    std::fs::write(&local, sample_ctf()).unwrap();
    let key = unique("sequences.ctf");
    services.gcs_put(&key, &sample_ctf());
    let gs = services.gcs_url_of(&key);
    for command in [["info"], ["check"]] {
        let with = |input: &str| [strings(&command), vec![input.to_string()], strings(&INPUTS)];
        let local_name = local.to_str().unwrap();
        let want = run_ok(&with(local_name).concat(), local_name);
        let out = exfeed_gcs(&services, &with(&gs).concat());
        assert!(out.status.success(), "{command:?}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout).replace(&gs, "DATA"), want, "{command:?}");
    }

    // The emulator variable of Google's client libraries (host:port, no scheme) alone.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_exfeed"))
        .args([strings(&["info", &gs]), strings(&INPUTS)].concat())
        .env(
            "STORAGE_EMULATOR_HOST",
            services.gcs_url.trim_start_matches("http://"),
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let local_name = local.to_str().unwrap();
    let want = run_ok(
        &[strings(&["info", local_name]), strings(&INPUTS)].concat(),
        local_name,
    );
    assert_eq!(text(&out.stdout).replace(&gs, "DATA"), want);

    // A corpus glob over the bucket, with the settings as --storage-option flags.
    let prefix = unique("gcs-corpus");
    for i in 0..2 {
        services.gcs_put(&format!("{prefix}/train-{i}.ctf"), &sample_ctf());
    }
    services.gcs_put(&format!("{prefix}/other.txt"), b"not a shard");
    let mut args = strings(&["read", "--dump", "-m", "5", "--corpus"]);
    args.push(services.gcs_url_of(&format!("{prefix}/train-*.ctf")));
    args.extend(strings(&INPUTS));
    for option in [
        format!("google_base_url={}", services.gcs_url),
        "google_skip_signature=true".to_string(),
    ] {
        args.extend(["--storage-option".to_string(), option]);
    }
    let out = exfeed(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(dumped_sequences(&out).len(), 80);

    // A missing object: the error names its URL.
    let missing = services.gcs_url_of(&unique("missing.ctf"));
    let out = exfeed_gcs(
        &services,
        &[strings(&["info", &missing]), strings(&INPUTS)].concat(),
    );
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&missing) && stderr.contains("not found"),
        "{stderr}"
    );

    // No emulator takes object_store's uploads to test them with: writes are refused, at once.
    let target = services.gcs_url_of(&unique("out.cbf"));
    let args = [
        strings(&["convert", local.to_str().unwrap(), &target]),
        strings(&INPUTS),
    ];
    let out = exfeed_gcs(&services, &args.concat());
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("only s3:// URLs can be written"),
        "{stderr}"
    );
    let out = exfeed_gcs(
        &services,
        &[strings(&["info", &target]), strings(&INPUTS)].concat(),
    );
    assert!(text(&out.stderr).contains("not found"), "no object appears");
}
