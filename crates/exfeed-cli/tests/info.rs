//! `exfeed info` on real files.

use exfeed::cbf::{CbfWriter, CbfWriterOptions};
use exfeed::{SequenceBatch, Storage, StreamSpec};
use std::process::Command;

fn exfeed(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_exfeed"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn info_describes_a_cbf_file_and_reports_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let specs = [
        StreamSpec::new("x", Storage::Dense, 2),
        StreamSpec::new("y", Storage::Sparse, 7),
    ];
    let mut b = SequenceBatch::<f32>::new(&specs);
    for k in 0..30u32 {
        b.stream_mut(0).push_dense_sample(&[k as f32, 1.0]);
        b.stream_mut(1).push_sparse_sample(&[k % 7], &[2.0]);
        b.finish_sequence(u64::from(k));
    }
    let mut w = CbfWriter::new(
        Vec::new(),
        &specs,
        CbfWriterOptions {
            chunk_size: 40,
            ..Default::default()
        },
    )
    .unwrap();
    w.write_batch(&b).unwrap();
    let bytes = w.finish().unwrap();
    let path = dir.path().join("a.cbf");
    std::fs::write(&path, &bytes).unwrap();
    let (code, out, _) = exfeed(&["info".as_ref(), path.as_os_str()]);
    assert_eq!(code, 0);
    assert!(
        out.contains(&format!("file size: {} bytes", bytes.len())),
        "{out}"
    );
    assert!(
        out.contains("  x: dense float dim 2\n  y: sparse float dim 7\n"),
        "{out}"
    );
    assert!(
        out.contains("chunks: 30 (30 sequences, 30 samples)"),
        "{out}"
    );
    assert!(
        out.contains("sequences per chunk: min 1, mean 1.0, max 1"),
        "{out}"
    );

    let bad = dir.path().join("bad.cbf");
    std::fs::write(&bad, &bytes[..bytes.len() - 1]).unwrap();
    let (code, _, err) = exfeed(&["info".as_ref(), bad.as_os_str()]);
    // Invalid data: 1, as from every command.
    assert_eq!(code, 1);
    assert!(err.contains("bad.cbf (byte"), "{err}");
}

#[test]
fn info_on_a_ctf_file_summarizes_it_given_its_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("d.ctf");
    std::fs::write(&p, "|a 1 2\n").unwrap();
    let (code, out, err) = exfeed(&["info".as_ref(), p.as_os_str()]);
    assert_eq!(code, 2);
    assert_eq!(out, "");
    assert!(err.contains("reading CTF needs its inputs"), "{err}");
    let (code, out, err) = exfeed(&[
        "info".as_ref(),
        p.as_os_str(),
        "--input".as_ref(),
        "a:dense:2".as_ref(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "format: CTF\n  sequences: 1\n  longest sequence: 1 samples (key 0)\n  input 'a' (dense 2): 1 samples\n");
}
