//! Lens example files in the CLI. `dump` is what `exfeed dump FILE.ex|FILE.bex` runs (the
//! dump command dispatches here by format).

use exfeed::io::InputPath;
use exfeed::lens::materialize::{Layout, Materializer};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// Prints the set header, then one structural JSON object per example; or, given the
/// network's groups (`NAME:SIZE,...` in network order), one materialized object per example:
/// `{"name", "freq", "proc", "events": [{"input": [...], "target": [...]}]}`.
#[allow(dead_code)] // wired into `exfeed dump` when the dispatch by format lands
pub fn dump(
    file: &Path,
    input_groups: Option<&str>,
    target_groups: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let set = exfeed::lens::load(&InputPath::new(file))?;
    let stdout = std::io::stdout();
    let mut w = std::io::BufWriter::new(stdout.lock());
    let mut line = Vec::new();
    let mut sink = crate::diag::Stderr::new(1);
    let mut materializer = match (input_groups, target_groups) {
        (None, None) => None,
        (i, t) => Some(Materializer::new(
            Layout::parse(i.unwrap_or(""))?,
            Layout::parse(t.unwrap_or(""))?,
        )),
    };
    if materializer.is_none() {
        exfeed::lens::dump::write_header(&mut line, &set);
        w.write_all(&line)?;
    }
    for (i, ex) in set.examples.iter().enumerate() {
        line.clear();
        match &mut materializer {
            None => exfeed::lens::dump::write_example(&mut line, i, ex),
            Some(m) => exfeed::lens::dump::write_materialized(&mut line, ex, m, &mut sink)
                .map_err(|e| {
                    e.in_context(format!("example {i}"))
                        .in_file(file.display().to_string())
                })?,
        }
        w.write_all(&line)?;
    }
    w.flush()?;
    Ok(ExitCode::SUCCESS)
}
