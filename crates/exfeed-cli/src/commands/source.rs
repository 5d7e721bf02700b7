//! The input flags shared by the commands that read data files, and opening those files.

use exfeed::ctf::{CtfOptions, CtfParser, CtfStream};
use exfeed::format::FileFormat;
use exfeed::io::{open_reader, InputPath};
use exfeed::{DiagnosticSink, Element, Error, ErrorKind, Precision, SequenceBatch, StreamSpec};
use std::io::BufRead;
use std::path::Path;

/// How to read a data file: its inputs and CNTK's reader parameters.
#[derive(clap::Args, Clone, Debug)]
pub struct SourceArgs {
    /// An input (stream): NAME:FORMAT:DIM[:ALIAS], FORMAT dense or sparse. Repeat for each input,
    /// in the order the output should have.
    #[arg(long = "input", value_name = "NAME:FORMAT:DIM[:ALIAS]")]
    pub inputs: Vec<StreamSpec>,
    /// Ignore sequence ids: every line is one sequence keyed by its 0-based line number.
    #[arg(long)]
    pub skip_sequence_ids: bool,
    /// Precision of values: float or double.
    #[arg(long, default_value = "float", value_name = "float|double")]
    pub precision: Precision,
    /// Report and skip up to N bad samples or sequences; the next one stops the run.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub max_errors: u64,
    /// 0: errors only, 1: warnings too, 2: information too.
    #[arg(long, default_value_t = 1, value_name = "0|1|2",
          value_parser = clap::value_parser!(u8).range(0..=2))]
    pub trace_level: u8,
}

impl SourceArgs {
    /// The CTF options these flags describe.
    pub fn ctf_options(&self) -> anyhow::Result<CtfOptions> {
        if self.inputs.is_empty() {
            anyhow::bail!("no inputs: give at least one --input NAME:FORMAT:DIM[:ALIAS]");
        }
        Ok(CtfOptions {
            inputs: self.inputs.clone(),
            skip_sequence_ids: self.skip_sequence_ids,
            max_errors: self.max_errors,
        })
    }
}

/// Exit status for a library error: 2 for I/O and usage problems, 1 for invalid data.
pub fn exit_code_for(err: &Error) -> u8 {
    match err.kind() {
        ErrorKind::Io | ErrorKind::Config | ErrorKind::Refused => 2,
        _ => 1,
    }
}

/// Reads `file` sequence by sequence in batches, calling `each` with every batch filled
/// (and then cleared). The format is detected from the content and name.
pub fn read_batches<T: Element>(
    file: &Path,
    opts: &CtfOptions,
    sink: &mut dyn DiagnosticSink,
    mut each: impl FnMut(&SequenceBatch<T>) -> std::io::Result<()>,
) -> Result<(), Error> {
    let input = InputPath::new(file);
    let name = input.display_name();
    let mut reader = open_reader(&input)?;
    let head = reader
        .fill_buf()
        .map_err(|e| Error::from(e).in_file(name.clone()))?;
    match FileFormat::detect(file, head) {
        FileFormat::Ctf => {}
        other => {
            return Err(Error::new(
                ErrorKind::Unsupported,
                exfeed::Location::default().with_file(name),
                format!("{other:?} files are not supported by this command yet (only CTF)"),
            ))
        }
    }
    let mut parser = CtfParser::new(opts.clone())?;
    parser.set_file_name(name.clone());
    let mut stream = CtfStream::new(parser);
    let mut batch = SequenceBatch::<T>::new(&opts.inputs);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match std::io::Read::read(&mut reader, &mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::from(e).in_file(name)),
        };
        if n == 0 {
            break;
        }
        let fed = stream.feed(&buf[..n], &mut batch, sink);
        if let Err(e) = fed {
            // Hand over the sequences finished before the error, then stop.
            each(&batch).map_err(Error::from)?;
            return Err(e);
        }
        if !batch.is_empty() {
            each(&batch).map_err(Error::from)?;
            batch.clear();
        }
    }
    let finished = stream.finish(&mut batch, sink);
    if !batch.is_empty() {
        each(&batch).map_err(Error::from)?;
    }
    finished
}

/// Runs `$body` with `$T` bound to the element type of `$precision`.
#[macro_export]
macro_rules! with_precision {
    ($precision:expr, $T:ident => $body:expr) => {
        match $precision {
            exfeed::Precision::Float => {
                type $T = f32;
                $body
            }
            exfeed::Precision::Double => {
                type $T = f64;
                $body
            }
        }
    };
}
