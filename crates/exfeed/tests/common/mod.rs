//! Shared by the integration tests: where the conformance corpus is.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The conformance corpus (`../shared/conformance` from the project root, or
/// `$EXFEED_CONFORMANCE`). `None`, with a note on stderr, when it is missing on a developer's
/// machine; in CI (`CI=true`) a missing corpus fails the test.
pub fn conformance_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("EXFEED_CONFORMANCE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance")
        });
    if dir.is_dir() {
        return Some(dir);
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!(
            "conformance corpus missing at {} (required in CI)",
            dir.display()
        );
    }
    record_skip(&dir);
    None
}

/// Says that the running test is skipped for want of the conformance corpus (see
/// [`record_skip_because`]).
pub fn record_skip(dir: &Path) {
    record_skip_because(&format!(
        "conformance corpus not found at {}",
        dir.display()
    ));
}

/// Says that the running test is skipped, and why: on stderr, and as a line in
/// `$EXFEED_SKIP_LOG` (`scripts/test` counts and lists them at its end, where the user sees
/// them).
pub fn record_skip_because(why: &str) {
    let test = std::thread::current().name().unwrap_or("?").to_string();
    eprintln!("SKIPPED: {test}: {why}");
    if let Some(log) = std::env::var_os("EXFEED_SKIP_LOG") {
        use std::io::Write;
        let crate_name = env!("CARGO_CRATE_NAME");
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            let _ = writeln!(f, "{crate_name}::{test}: {why}");
        }
    }
}

pub fn conformance(sub: &str) -> Option<PathBuf> {
    conformance_dir().map(|d| d.join(sub))
}

/// Every file below `dir`, recursively, sorted.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}
