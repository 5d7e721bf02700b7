//! The CNTK Text Format (CTF): parsing, scanning for sequence boundaries, and writing.
//!
//! A pure core over borrowed bytes: no I/O, no `String` per line, no allocation per value.
//! [`CtfParser::parse_chunk`] parses a buffer of whole sequences (a whole file, or a chunk of
//! one at a known byte offset and line) into a [`SequenceBatch`]; [`CtfStream`] feeds it bytes
//! as they arrive; [`scan_sequences`] finds sequence boundaries without parsing values; and
//! [`write_sequence`] writes a sequence back as CTF.
//!
//! Where the spec is silent, this follows CNTK's reader: a bad sample (malformed number, too
//! many dense values, sparse index out of range, `|` without a name) counts one error and is
//! skipped while the rest of its line is read; a sequence spanning more lines than its longest
//! input has samples counts one error and is kept; a sequence missing a configured input or
//! reusing an earlier id counts one error and is dropped. Errors beyond `max_errors` stop the
//! parse. Short dense samples are zero-padded with a warning; unknown inputs are skipped (info).
//!
//! ```
//! use exfeed::ctf::{CtfOptions, CtfParser};
//! use exfeed::{Diagnostic, SequenceBatch, Severity};
//!
//! let opts = CtfOptions {
//!     inputs: vec!["x:dense:2".parse()?, "y:sparse:5".parse()?],
//!     max_errors: 2,
//!     ..CtfOptions::default()
//! };
//! // Sequence 0 has two samples. Sequence 1's bad value costs an error and the sample; the
//! // sequence, now missing input x, costs another and is dropped.
//! let text = b"0 |x 1 2 |y 4:1\n0 |x 3 4\n1 |x 5 oops |y 0:1\n2 |x 7 8 |y 1:1\n";
//! let mut batch = SequenceBatch::<f32>::new(&opts.inputs);
//! let mut problems: Vec<Diagnostic> = Vec::new();
//! let mut parser = CtfParser::new(opts)?;
//! parser.set_file_name("example.ctf");
//! parser.parse_file(text, &mut batch, &mut problems)?;
//! assert_eq!(batch.keys(), &[0, 2]);
//! assert_eq!(batch.streams()[0].values(), &[1.0, 2.0, 3.0, 4.0, 7.0, 8.0]);
//! assert_eq!(batch.streams()[1].indices(), &[4, 1]);
//! assert_eq!(problems.len(), 2);
//! assert_eq!(problems[0].severity, Severity::Error);
//! assert!(problems[0].to_string().starts_with("error: example.ctf:3:8 (byte 32)"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod blocks;
mod parse;
mod scan;

pub use parse::{CtfParser, CtfStream};
pub use scan::{detect_key_mode, scan_sequences, KeyMode, SequenceExtent, BOM};
pub(crate) use scan::{is_blank, is_blank_line, line_key, starts_sequence};

use crate::batch::SequenceBatch;
use crate::element::Element;
use crate::error::{DiagnosticSink, Error, Result};
use crate::limits::Limits;
use crate::stream::{Storage, StreamSpec};

/// What to read from a CTF file: CNTK's reader parameters that concern parsing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CtfOptions {
    /// The configured inputs, in configuration order (the order of the batch's streams).
    pub inputs: Vec<StreamSpec>,
    /// Ignore sequence ids: every line is one sequence keyed by its 0-based line number.
    pub skip_sequence_ids: bool,
    /// How many bad samples or sequences to report and skip before stopping (`maxErrors`).
    pub max_errors: u64,
    /// The most bytes one sequence may take (and so the largest dense dim it can hold).
    pub limits: Limits,
}

/// Parses a whole CTF file held in `buf` into `batch` (whose streams are `opts.inputs`),
/// reporting tolerated problems to `sink` (a `Vec<Diagnostic>` collects them).
///
/// ```
/// use exfeed::ctf::CtfOptions;
/// use exfeed::SequenceBatch;
///
/// let opts = CtfOptions { inputs: vec!["a:dense:2".parse()?], ..CtfOptions::default() };
/// let mut batch = SequenceBatch::<f32>::new(&opts.inputs);
/// exfeed::ctf::parse(b"0 |a 1 2\n0 |a 3 4\n", &opts, &mut batch, &mut Vec::new())?;
/// assert_eq!(batch.len(), 1);
/// assert_eq!(batch.streams()[0].values(), &[1.0, 2.0, 3.0, 4.0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn parse<T: Element>(
    buf: &[u8],
    opts: &CtfOptions,
    batch: &mut SequenceBatch<T>,
    sink: &mut dyn DiagnosticSink,
) -> Result<()> {
    CtfParser::new(opts.clone())?.parse_file(buf, batch, sink)
}

/// Appends sequence `seq` of `batch` as CTF lines, its key as the sequence id, the streams
/// named as `specs` say (alias if any), numbers in the shortest form that reads back to the
/// same value. Line `t` holds sample `t` of every stream that has one. Fails on a non-finite
/// value (CTF has no spelling for it) or a sequence with no samples at all.
pub fn write_sequence<T: Element>(
    out: &mut Vec<u8>,
    batch: &SequenceBatch<T>,
    seq: usize,
    specs: &[StreamSpec],
) -> Result<()> {
    let key = batch.keys()[seq];
    let len = batch.sequence_length(seq, None);
    if len == 0 {
        return Err(Error::invalid(
            0,
            format!("sequence {key} has no samples; CTF cannot write it"),
        ));
    }
    let key_text = key.to_string();
    for t in 0..len {
        out.extend_from_slice(key_text.as_bytes());
        for (stream, spec) in batch.streams().iter().zip(specs) {
            let r = stream.sequence_samples(seq);
            if t >= r.len() {
                continue;
            }
            let sample = r.start + t;
            out.extend_from_slice(b" |");
            out.extend_from_slice(spec.name_in_file().as_bytes());
            match stream.storage() {
                Storage::Dense => {
                    for &v in stream.dense_sample(sample) {
                        out.push(b' ');
                        write_value(out, v, key)?;
                    }
                }
                Storage::Sparse => {
                    let (indices, values) = stream.sparse_sample(sample);
                    for (&i, &v) in indices.iter().zip(values) {
                        out.push(b' ');
                        out.extend_from_slice(i.to_string().as_bytes());
                        out.push(b':');
                        write_value(out, v, key)?;
                    }
                }
            }
        }
        out.push(b'\n');
    }
    Ok(())
}

fn write_value<T: Element>(out: &mut Vec<u8>, v: T, key: u64) -> Result<()> {
    if !v.to_f64().is_finite() {
        return Err(Error::invalid(
            0,
            format!("sequence {key} holds {v}, which CTF cannot represent"),
        ));
    }
    v.write_shortest(out);
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests;
