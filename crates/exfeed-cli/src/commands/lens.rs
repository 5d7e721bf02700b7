//! Lens example files in the CLI. `dump` is what `exfeed dump FILE.ex|FILE.bex` runs (the
//! dump command dispatches here by format).

use exfeed::io::InputPath;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// Prints the set header, then one structural JSON object per example.
#[allow(dead_code)] // wired into `exfeed dump` when the dispatch by format lands
pub fn dump(file: &Path) -> anyhow::Result<ExitCode> {
    let set = exfeed::lens::load(&InputPath::new(file))?;
    let stdout = std::io::stdout();
    let mut w = std::io::BufWriter::new(stdout.lock());
    let mut line = Vec::new();
    exfeed::lens::dump::write_header(&mut line, &set);
    w.write_all(&line)?;
    for (i, ex) in set.examples.iter().enumerate() {
        line.clear();
        exfeed::lens::dump::write_example(&mut line, i, ex);
        w.write_all(&line)?;
    }
    w.flush()?;
    Ok(ExitCode::SUCCESS)
}
