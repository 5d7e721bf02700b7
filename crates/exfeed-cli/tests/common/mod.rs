//! Shared by the command's integration tests: running the real binary, and where the
//! conformance corpus is.
#![allow(dead_code)]

#[path = "../../../exfeed/tests/common/mod.rs"]
mod corpus;

#[allow(unused_imports)] // not every test file reads the corpus
pub use corpus::{conformance, record_skip_because};
use std::ffi::OsStr;
use std::process::{Command, Output};

/// Runs the `exfeed` binary built for these tests and waits for it.
pub fn exfeed<I>(args: I) -> Output
where
    I: IntoIterator,
    I::Item: AsRef<OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_exfeed"))
        .args(args)
        .output()
        .expect("exfeed runs")
}

/// Bytes of a process's output as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
