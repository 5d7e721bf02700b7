//! `exfeed convert` to and from Parquet and Arrow IPC files: exfeed-arrow's
//! [`write_arrow_file`] and [`read_arrow_file`].

use super::source::{LayoutArgs, SourceArgs};
use crate::diag::Stderr;
use exfeed::convert::ConvertOptions;
use exfeed::source::DataPath;
use exfeed_arrow::{read_arrow_file, write_arrow_file, ArrowFormat, Format};
use std::path::Path;

/// Runs the conversion to `output` in format `to` when its input or output is Parquet or Arrow
/// IPC (`None` otherwise), with `options` (their precision: given, or else the input's): the
/// sequences written and the errors skipped. `from` is `--from`; `source` and `lens` say how
/// to read the input.
pub fn convert(
    from: Option<Format>,
    source: &SourceArgs,
    lens: &LayoutArgs,
    data: &DataPath,
    output: &Path,
    to: Format,
    options: &mut ConvertOptions,
) -> anyhow::Result<Option<(u64, u64)>> {
    let given = from;
    let from = match (from, data) {
        (Some(f), _) => f.arrow(),
        (None, DataPath::File(input)) if input.as_os_str() != "-" => ArrowFormat::of_file(input),
        // A corpus is read by exfeed (its files CTF, CBF or Lens).
        (None, _) => None,
    };
    if from.is_none() && to.arrow().is_none() {
        return Ok(None);
    }
    let Some(format) = to.arrow().filter(|_| from.is_none()) else {
        let DataPath::File(input) = data else {
            anyhow::bail!("a corpus of Parquet or Arrow IPC files is not read: convert each file");
        };
        if input.as_os_str() == "-" {
            anyhow::bail!(
                "Parquet and Arrow IPC files are not read from standard input: their footer, \
                 at the end, says where everything is; give a file"
            );
        }
        let sequences = read_arrow_file(input, &source.inputs, output, to, options)?;
        return Ok(Some((sequences, 0)));
    };
    let opened = source.open(data, given.and_then(Format::exfeed), lens)?;
    options.precision = Some(opened.precision);
    let mut sink = Stderr::new(opened.trace_level);
    let sequences = write_arrow_file(opened.data, output, format, options, &mut sink)?;
    Ok(Some((sequences, sink.errors)))
}
