//! Conversion: whole inputs of any format to files of any format ([`convert`], what
//! `exfeed convert` does), and the cores between CTF and CBF ([`ctf_to_cbf`], [`cbf_to_ctf`]).
//! With the `arrow` feature, any input also becomes a stream of Arrow record batches
//! (`arrow_stream::SequenceStream`, Python's `exfeed.to_arrow`).
//!
//! CTF to CBF parses the text in pieces of whole sequences on every core ([`parse_ctf_pieces`]),
//! encoding each where it was parsed, while this thread writes them out in order: memory stays
//! bounded by the pieces in flight and the open chunk, and the bytes, chunks and first error
//! are those of one parser in file order (which is what runs with an error budget, as errors
//! must be counted in file order). Values are parsed to double and rounded once to the output
//! precision, as CNTK's `ctf2bin.py` does (Python floats are doubles), which makes our output
//! byte-identical to ctf2bin's wherever it writes a single chunk. CBF keys do not store the CTF sequence ids; CBF to CTF writes the 0-based
//! sequence index as the id.

#[cfg(feature = "arrow")]
pub mod arrow_stream;
#[cfg(feature = "arrow")]
pub(crate) mod columnar;
mod files;
mod pieces;

#[cfg(feature = "arrow")]
pub use columnar::{write_arrow_file, write_sequences};
pub use files::{convert, convert_with_progress, write_cbf, write_ctf, ConvertOptions, Converted};
pub use pieces::{parse_ctf_pieces, PieceStages, PIECE_BYTES};

use crate::batch::SequenceBatch;
use crate::cbf::{CbfFile, CbfWriter, CbfWriterOptions, EncodedBatch};
use crate::ctf::CtfOptions;
use crate::element::{Element, Precision};
use crate::error::{DiagnosticSink, Result};
use std::io::Write;
use std::ops::Deref;

/// What a conversion did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConvertStats {
    /// Sequences written.
    pub sequences: u64,
    /// Chunks written (CBF output only).
    pub chunks: u64,
}

/// The options of [`ctf_to_cbf`]: how to read the CTF text and how to write the CBF file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CtfToCbfOptions {
    /// The input's name in errors (a path, or `<stdin>`).
    pub file: String,
    /// How the CTF text is read: its inputs become the CBF streams, stored under their names
    /// (their aliases are the CTF names); the error budget (`max_errors`) applies as in a parse.
    pub ctf: CtfOptions,
    /// How the CBF file is written: chunk size and element precision.
    pub cbf: CbfWriterOptions,
}

/// Converts a whole CTF file held in `ctf` to CBF written to `out`, reporting tolerated
/// problems to `sink`. `progress` is called with the number of input bytes done after each
/// piece.
///
/// ```
/// use exfeed::cbf::CbfFile;
/// use exfeed::convert::{ctf_to_cbf, CtfToCbfOptions};
/// use exfeed::ctf::CtfOptions;
///
/// let options = CtfToCbfOptions {
///     file: "two.ctf".into(),
///     ctf: CtfOptions { inputs: vec!["x:dense:2".parse()?], ..CtfOptions::default() },
///     ..CtfToCbfOptions::default()
/// };
/// let text = b"0 |x 1 2\n1 |x 3 4\n";
/// let (cbf, stats) = ctf_to_cbf(text, &options, Vec::new(), &mut Vec::new(), |_| {})?;
/// assert_eq!((stats.sequences, stats.chunks), (2, 1));
/// assert_eq!(CbfFile::open(cbf)?.num_sequences(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn ctf_to_cbf<W: Write>(
    ctf: &[u8],
    options: &CtfToCbfOptions,
    out: W,
    sink: &mut dyn DiagnosticSink,
    progress: impl FnMut(u64),
) -> Result<(W, ConvertStats)> {
    ctf_to_cbf_in_pieces(ctf, options, out, sink, progress, PIECE_BYTES)
}

fn ctf_to_cbf_in_pieces<W: Write>(
    ctf: &[u8],
    options: &CtfToCbfOptions,
    out: W,
    sink: &mut dyn DiagnosticSink,
    mut progress: impl FnMut(u64),
    piece_bytes: usize,
) -> Result<(W, ConvertStats)> {
    let (file, opts) = (options.file.as_str(), &options.ctf);
    let mut writer = CbfWriter::new(out, &opts.inputs, options.cbf.clone())?;
    // Pieces are encoded where they are parsed; the writer writes each chunk straight from
    // them, in order, and returns written pieces for their buffers.
    let encoder = writer.encoder();
    let work =
        |batch: &mut SequenceBatch<f64>, enc: &mut EncodedBatch| encoder.encode_into(batch, enc);
    let mut consume = |enc: EncodedBatch, end: u64, spares: &mut Vec<EncodedBatch>| {
        writer
            .write_encoded(enc)
            .map_err(|e| e.in_file(file.to_string()))?;
        spares.extend(std::iter::from_fn(|| writer.take_spare()));
        progress(end);
        Ok(())
    };
    let stages = PieceStages {
        work: &work,
        new: &EncodedBatch::default,
        consume: &mut consume,
    };
    parse_ctf_pieces::<f64, _>(ctf, file, opts, piece_bytes, sink, stages)?;
    let sequences = writer.sequences();
    let (out, chunks) = writer.finish_with_chunks()?;
    Ok((
        out,
        ConvertStats {
            sequences,
            chunks: chunks.len() as u64,
        },
    ))
}

/// Converts a CBF file to CTF written to `out`: every stream, named as stored, each sequence's
/// id its 0-based index. Float files are written in float's shortest form. `progress` is called
/// with the byte offset reached after each chunk.
///
/// ```
/// use exfeed::cbf::{CbfFile, CbfWriter, CbfWriterOptions};
/// use exfeed::convert::cbf_to_ctf;
/// use exfeed::{SequenceBatch, Storage, StreamSpec};
///
/// let specs = vec![StreamSpec::new("x", Storage::Dense, 2)];
/// let mut batch = SequenceBatch::<f32>::new(&specs);
/// batch.stream_mut(0).push_dense_sample(&[1.0, 0.5]);
/// batch.finish_sequence(42);
/// let mut writer = CbfWriter::new(Vec::new(), &specs, CbfWriterOptions::default())?;
/// writer.write_batch(&batch)?;
/// let cbf = CbfFile::open(writer.finish()?)?;
/// let (ctf, stats) = cbf_to_ctf(&cbf, Vec::new(), |_| {})?;
/// assert_eq!(stats.sequences, 1);
/// assert_eq!(ctf, b"0 |x 1 0.5\n");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn cbf_to_ctf<B: Deref<Target = [u8]>, W: Write>(
    file: &CbfFile<B>,
    out: W,
    progress: impl FnMut(u64),
) -> Result<(W, ConvertStats)> {
    if file.streams().iter().all(|s| s.element == Precision::Float) {
        cbf_to_ctf_as::<f32, B, W>(file, out, progress)
    } else {
        cbf_to_ctf_as::<f64, B, W>(file, out, progress)
    }
}

fn cbf_to_ctf_as<T: Element, B: Deref<Target = [u8]>, W: Write>(
    file: &CbfFile<B>,
    mut out: W,
    mut progress: impl FnMut(u64),
) -> Result<(W, ConvertStats)> {
    let specs = file.stream_specs();
    let mut batch = SequenceBatch::<T>::new(&specs);
    let mut text = Vec::new();
    let mut stats = ConvertStats::default();
    for i in 0..file.num_chunks() {
        file.read_chunk(i, &mut batch)?;
        text.clear();
        for seq in 0..batch.len() {
            crate::ctf::write_sequence(&mut text, &batch, seq, &specs)
                .map_err(|e| e.in_context(format!("chunk {i}, sequence {}", batch.keys()[seq])))?;
        }
        out.write_all(&text)?;
        stats.sequences += batch.len() as u64;
        stats.chunks += 1;
        let c = file.chunk_info(i);
        progress(c.offset + c.len);
    }
    out.flush()?;
    Ok((out, stats))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Severity;
    use crate::stream::{Storage, StreamSpec};

    fn inputs() -> Vec<StreamSpec> {
        let mut a = StreamSpec::new("x", Storage::Dense, 2);
        a.alias = Some("a".into());
        let mut b = StreamSpec::new("y", Storage::Sparse, 9);
        b.alias = Some("b".into());
        vec![a, b]
    }

    fn text(lines: usize) -> String {
        let mut t = String::new();
        for k in 0..lines {
            t += &format!("{} |a {k} 0.5 |b {}:1.25\n", k / 3, k % 9);
        }
        t
    }

    fn run(
        t: &str,
        max_errors: u64,
        piece: usize,
    ) -> (Result<Vec<u8>>, Vec<crate::error::Diagnostic>) {
        let opts = CtfOptions {
            inputs: inputs(),
            max_errors,
            ..Default::default()
        };
        let options = CtfToCbfOptions {
            file: "t".into(),
            ctf: opts,
            cbf: CbfWriterOptions {
                chunk_size: 200,
                ..Default::default()
            },
        };
        let mut diags = Vec::new();
        let r = ctf_to_cbf_in_pieces(
            t.as_bytes(),
            &options,
            Vec::new(),
            &mut diags,
            |_| {},
            piece,
        )
        .map(|(o, _)| o);
        (r, diags)
    }

    #[test]
    fn parallel_pieces_give_the_serial_bytes_and_the_first_error() {
        let t = text(300);
        let serial = run(&t, 0, usize::MAX).0.unwrap();
        for piece in [1, 50, 1000] {
            assert_eq!(run(&t, 0, piece).0.unwrap(), serial, "piece {piece}");
            assert_eq!(
                run(&t, 5, piece).0.unwrap(),
                serial,
                "piece {piece}, serial path"
            );
        }
        // Two bad lines: the first in file order is the error, whatever the pieces.
        let bad = t
            .replace("|b 4:1.25\n13 ", "|b 9:1.25\n13 ")
            .replace("|a 280 0.5", "|a 280 0.5 7");
        let want = run(&bad, 0, usize::MAX).0.unwrap_err().to_string();
        assert!(want.contains("t:41:17 (byte 896)"), "{want}");
        for piece in [1, 50, 1000] {
            let (r, diags) = run(&bad, 0, piece);
            assert_eq!(r.unwrap_err().to_string(), want);
            assert!(diags.iter().all(|d| d.severity != Severity::Error));
        }
        // The same on any number of worker threads.
        for threads in [1, 3, 8] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let (r, _) = pool.install(|| run(&bad, 0, 50));
            assert_eq!(r.unwrap_err().to_string(), want, "{threads} threads");
        }
        // A repeated id is a sequence like any other (as in CNTK), in pieces as serially.
        let rep = format!("{t}0 |a 1 1 |b 0:1\n");
        let one = run(&rep, 0, usize::MAX).0.unwrap();
        assert_eq!(CbfFile::open(one.as_slice()).unwrap().num_sequences(), 101);
        assert!(run(&rep, 0, 50).0.unwrap() == one);
    }

    #[test]
    fn many_chunks_keep_their_order_on_any_number_of_threads() {
        let t = text(3000);
        let serial = run(&t, 0, usize::MAX).0.unwrap();
        let file = CbfFile::open(serial.as_slice()).unwrap();
        assert!(file.num_chunks() > 100, "{} chunks", file.num_chunks());
        assert_eq!(file.num_sequences(), 1000);
        for threads in [1, 2, 3, 8] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            // Pieces of one sequence, of a few, and of more than a chunk.
            for piece in [1, 100, 700] {
                let got = pool.install(|| run(&t, 0, piece)).0.unwrap();
                assert!(got == serial, "{threads} threads, pieces of {piece} bytes");
            }
        }
        // And the serial path (an error budget) on many pieces writes the same bytes.
        assert!(run(&t, 3, 100).0.unwrap() == serial);
    }
}
