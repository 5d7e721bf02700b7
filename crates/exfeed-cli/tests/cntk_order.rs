//! `exfeed read --randomizer cntk` with the real binary: CNTK 2.7's order of sequences and
//! minibatches over a CTF file, from the flag and from a configuration, split between workers,
//! and refused without the full index.

mod common;

use common::{ctf_data, dumped_minibatches, exfeed, text};
use exfeed::reader::cntk_order::{
    self, cntk_ctf_chunk_samples, cntk_ctf_sequences, CntkEpoch, CntkEpochSize, CntkWindow,
};
use std::process::Output;

/// Every minibatch's keys `exfeed read --dump` printed.
fn minibatch_keys(out: &Output) -> Vec<Vec<u64>> {
    let keys = |mb: &serde_json::Value| -> Vec<u64> {
        let seqs = mb["sequences"].as_array().unwrap();
        seqs.iter().map(|s| s["key"].as_u64().unwrap()).collect()
    };
    dumped_minibatches(out).iter().map(keys).collect()
}

/// CNTK's minibatches of one sweep of `file` (keys are the file's sequence indices), chunks of
/// `chunk_size` bytes, minibatches of `mb` samples, worker `rank` of `workers`.
fn cntk_minibatches(
    file: &str,
    chunk_size: u64,
    window: CntkWindow,
    seed: u64,
    mb: u64,
    workers: usize,
    rank: usize,
) -> Vec<Vec<u64>> {
    let text = std::fs::read(file).unwrap();
    let seqs = cntk_ctf_sequences(&text, false, None).unwrap();
    let chunks = cntk_ctf_chunk_samples(&seqs, chunk_size, text.len() as u64);
    let epoch = CntkEpoch {
        workers,
        rank,
        size: CntkEpochSize::Sweeps(1),
        index: 0,
        cross_sweeps: true,
    };
    cntk_order::minibatch_keys(chunks, window, seed, epoch, mb).unwrap()
}

fn read(file: &str, args: &[&str]) -> Output {
    let mut all = vec!["read", file, "--input", "x:dense:2", "-m", "9", "--dump"];
    all.extend_from_slice(args);
    exfeed(all)
}

#[test]
fn the_flag_and_the_config_give_cntk_s_minibatches() {
    let dir = tempfile::tempdir().unwrap();
    let file = ctf_data(&dir, 400);
    let cntk = ["--randomizer", "cntk", "--chunk-size", "300", "--seed", "4"];
    let by_chunks = read(&file, &[&cntk[..], &["--window-chunks", "3"]].concat());
    let want = cntk_minibatches(&file, 300, CntkWindow::Chunks(3), 4, 9, 1, 0);
    assert!(want.len() > 50);
    assert_eq!(minibatch_keys(&by_chunks), want);
    let by_samples = read(&file, &[&cntk[..], &["--window-samples", "100"]].concat());
    let want = cntk_minibatches(&file, 300, CntkWindow::Samples(100), 4, 9, 1, 0);
    assert_eq!(minibatch_keys(&by_samples), want);
    // exfeed's own order is another one.
    let own = read(
        &file,
        &["--chunk-size", "300", "--seed", "4", "--window-chunks", "3"],
    );
    assert_ne!(minibatch_keys(&own).concat(), want.concat());

    let cfg = dir.path().join("r.cntk");
    std::fs::write(
        &cfg,
        format!(
            "reader = [ readerType = CNTKTextFormatReader; file = \"{file}\"; randomizer = cntk;\n\
             randomizationSeed = 4; randomizationWindow = 3; chunkSizeInBytes = 300;\n\
             input = [ x = [ dim = 2; format = dense ] ] ]"
        ),
    )
    .unwrap();
    let from_config = exfeed([
        "read",
        "--config",
        cfg.to_str().unwrap(),
        "-m",
        "9",
        "--dump",
    ]);
    let want = cntk_minibatches(&file, 300, CntkWindow::Chunks(3), 4, 9, 1, 0);
    assert_eq!(minibatch_keys(&from_config), want);
}

#[test]
fn cntk_s_own_expected_order_comes_out_of_exfeed_read() {
    // CNTK's TestRandomization_TwoSweeps (ReaderLibTests.cpp): 5 chunks of 2 one-sample
    // sequences (9 bytes each, chunks of 18 bytes), a window of the whole data, seed 0.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ten.ctf");
    let lines: String = (0..10).map(|k| format!("{k} |x {k} 0\n")).collect();
    std::fs::write(&path, lines).unwrap();
    let file = path.to_str().unwrap();
    let args = [
        "--randomizer",
        "cntk",
        "--chunk-size",
        "18",
        "--window-samples",
        "9223372036854775808",
        "--max-sweeps",
        "2",
    ];
    for mb in ["1", "4", "25"] {
        let out = exfeed(
            [
                &["read", file, "--input", "x:dense:2", "-m", mb, "--dump"][..],
                &args,
            ]
            .concat(),
        );
        let keys: Vec<u64> = minibatch_keys(&out).concat();
        let want = [6, 3, 1, 5, 9, 0, 4, 2, 7, 8, 3, 0, 8, 4, 7, 5, 2, 9, 1, 6];
        assert_eq!(keys, want, "minibatches of {mb}");
    }
}

#[test]
fn workers_share_the_sweep_as_cntk_s_workers_do() {
    let dir = tempfile::tempdir().unwrap();
    let file = ctf_data(&dir, 300);
    let mut all = Vec::new();
    for rank in 0..3 {
        let r = rank.to_string();
        let args = [
            "--randomizer",
            "cntk",
            "--chunk-size",
            "200",
            "--num-workers",
            "3",
            "--worker-rank",
            &r,
        ];
        let got = minibatch_keys(&read(&file, &args));
        // CNTK's default window for CTF: 4 GiB worth of chunks, in chunks.
        let window = CntkWindow::Chunks((4u64 << 30) / 200);
        assert_eq!(got, cntk_minibatches(&file, 200, window, 0, 9, 3, rank));
        all.extend(got.concat());
    }
    all.sort_unstable();
    assert_eq!(all, (0..300).collect::<Vec<u64>>());
}

#[test]
fn without_the_full_index_cntk_s_order_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = ctf_data(&dir, 50);
    let out = read(&file, &["--randomizer", "cntk", "--index", "none"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("needs the full index"),
        "{}",
        text(&out.stderr)
    );
    let bad = read(&file, &["--randomizer", "shuffle"]);
    assert!(!bad.status.success());
    assert!(
        text(&bad.stderr).contains("randomizer 'shuffle' is not one of exfeed, cntk"),
        "{}",
        text(&bad.stderr)
    );
}
