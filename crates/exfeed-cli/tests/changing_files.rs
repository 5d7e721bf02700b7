//! Data files that change between runs or under the reader: an error naming the file, or the
//! new data read correctly; never a crash or the old file's layout applied to the new one.

mod common;

use common::{exfeed, text};
use std::path::Path;

/// `n` sequences of one line each, ids `00000`, `00001`, ...
fn one_line_sequences(n: usize) -> String {
    (0..n).map(|i| format!("{i:05} |x {}\n", i % 10)).collect()
}

/// The same number of lines and bytes as [`one_line_sequences`], two lines a sequence.
fn two_line_sequences(n: usize) -> String {
    (0..n)
        .map(|i| format!("{:05} |x {}\n", i / 2, i % 10))
        .collect()
}

/// `exfeed read FILE` of one dense input in minibatches of 10, with `extra` arguments.
fn read(file: &Path, chunk_size: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "read",
        file.to_str().unwrap(),
        "-i",
        "x:dense:1",
        "-m",
        "10",
    ];
    args.extend_from_slice(&["--chunk-size", chunk_size]);
    args.extend_from_slice(extra);
    exfeed(args)
}

/// `exfeed read` with the index cache, in file order; (sequences, samples) from its summary.
fn read_cached(file: &Path) -> (u64, u64) {
    let out = read(file, "100", &["--cache-index", "--no-randomize"]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let count = |what: &str| -> u64 {
        let before = err.split(&format!(" {what}")).next().unwrap();
        before.rsplit(' ').next().unwrap().parse().unwrap()
    };
    (count("sequences,"), count("samples;"))
}

/// Gives `file` the modification time `of` has.
fn same_mtime(file: &Path, of: &std::fs::Metadata) {
    let f = std::fs::File::options().write(true).open(file).unwrap();
    f.set_modified(of.modified().unwrap()).unwrap();
}

#[test]
fn a_same_size_replacement_with_the_old_mtime_is_indexed_again() {
    // Length and mtime were the cache's whole check: a file of the same size put in place with
    // the old mtime (an archive made with a fixed mtime, rsync --times, cp -p) was read with
    // the old file's chunks, its two-line sequences cut at chunk ends (109 sequences, not 100).
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data.ctf");
    let (old, new) = (one_line_sequences(200), two_line_sequences(200));
    assert_eq!(old.len(), new.len());

    // Extracted from an archive: a new file renamed over the old one, its mtime set.
    std::fs::write(&data, &old).unwrap();
    assert_eq!(read_cached(&data), (200, 200));
    let was = std::fs::metadata(&data).unwrap();
    let extracted = dir.path().join("extracted.ctf");
    std::fs::write(&extracted, &new).unwrap();
    same_mtime(&extracted, &was);
    std::fs::rename(&extracted, &data).unwrap();
    assert_eq!(read_cached(&data), (100, 200));

    // cp -p: the same file (inode) rewritten in place, its mtime set back.
    std::fs::write(&data, &old).unwrap();
    assert_eq!(read_cached(&data), (200, 200));
    let was = std::fs::metadata(&data).unwrap();
    std::fs::write(&data, &new).unwrap();
    same_mtime(&data, &was);
    assert_eq!(read_cached(&data), (100, 200));
}

#[test]
fn a_saved_state_is_refused_on_other_data_of_the_same_name_size_and_start() {
    // The state knew the data only by its chunk and sample counts, which a file of the same
    // size and first 64 KiB (the sample estimate without an index) shares: it resumed there,
    // delivering some sequences twice and others never.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data.ctf");
    let n = 12_000;
    let old = one_line_sequences(n);
    let start = 70_000; // a line start past the first 64 KiB
    let start = start + old[start..].find('\n').unwrap() + 1;
    let new = format!("{}{}", &old[..start], &two_line_sequences(n)[start..]);
    assert_eq!(old.len(), new.len());
    std::fs::write(&data, &old).unwrap();
    let state = dir.path().join("state.json");
    let state = state.to_str().unwrap();
    let saved = read(&data, "8K", &["--stop-after", "5", "--save-state", state]);
    assert!(saved.status.success(), "{}", text(&saved.stderr));

    // The same data, copied elsewhere without its times: accepted.
    let copy = dir.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    std::fs::write(copy.join("data.ctf"), &old).unwrap();
    let resumed = read(&copy.join("data.ctf"), "8K", &["--restore-state", state]);
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));

    std::fs::write(&data, &new).unwrap();
    let refused = read(&data, "8K", &["--restore-state", state]);
    let err = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(
        err.contains("does not fit this reader: data file data.ctf has other contents"),
        "{err}"
    );
}
