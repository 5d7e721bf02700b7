//! A corpus of more shards than the process may have files open: `read` opens them as their
//! chunks are read (a bounded set of open files), so every sequence arrives under `ulimit -n`.

mod common;

use common::{exfeed, text};
use std::collections::HashMap;
use std::process::Command;

#[test]
fn five_thousand_shards_are_read_whole_under_a_limit_of_256_open_files() {
    // `read` kept every shard open: 5,000 shards failed with "Too many open files" at 256 (and a
    // 1,024-shard corpus at the usual 1,024), where check, convert, info and dump did not.
    let dir = tempfile::tempdir().unwrap();
    let (ctf_shards, cbf_shards) = (4700, 300);
    for i in 0..ctf_shards {
        let name = dir.path().join(format!("s-{i:05}.ctf"));
        std::fs::write(
            name,
            format!("{} |x {}\n{} |x 1\n", 2 * i, i % 7, 2 * i + 1),
        )
        .unwrap();
    }
    let source = dir.path().join("one.ctf");
    std::fs::write(&source, "0 |x 5\n1 |x 6\n").unwrap();
    let cbf = dir.path().join("one.cbf");
    let made = exfeed([
        "convert",
        source.to_str().unwrap(),
        cbf.to_str().unwrap(),
        "-i",
        "x:dense:1",
        "--precision",
        "double",
    ]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    for i in ctf_shards..ctf_shards + cbf_shards {
        std::fs::copy(&cbf, dir.path().join(format!("s-{i:05}.cbf"))).unwrap();
    }
    let corpus = format!("{}/s-*", dir.path().display());
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n 256 && exec '{}' read --corpus '{corpus}' -i x:dense:1 -m 100 --dump \
             --max-sweeps 2",
            env!("CARGO_BIN_EXE_exfeed")
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut seen: HashMap<(u64, String), usize> = HashMap::new();
    for line in text(&out.stdout).lines() {
        for part in line.split("{\"sweep\":").skip(1) {
            let sweep = part[..part.find(',').unwrap()].parse().unwrap();
            let key = part.split("\"key\":\"").nth(1).unwrap();
            let key = key[..key.find('"').unwrap()].to_string();
            *seen.entry((sweep, key)).or_default() += 1;
        }
    }
    for sweep in 0..2 {
        for shard in 0..ctf_shards + cbf_shards {
            let keys = if shard < ctf_shards {
                [2 * shard, 2 * shard + 1]
            } else {
                [0, 1]
            };
            for key in keys {
                let at = (sweep, format!("{shard}:{key}"));
                assert_eq!(seen.get(&at), Some(&1), "{at:?}");
            }
        }
    }
    assert_eq!(seen.len(), 2 * 2 * (ctf_shards + cbf_shards));
}
