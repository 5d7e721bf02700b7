//! Conversion: whole inputs of any format to files of any format ([`convert`], what
//! `exfeed convert` does), and the cores between CTF and CBF ([`ctf_to_cbf`], [`cbf_to_ctf`]).
//!
//! CTF to CBF first finds the sequence boundaries ([`crate::ctf::scan_sequences`]) and cuts
//! the text into pieces of whole sequences, so memory stays bounded by the pieces in flight and
//! the open chunk. Without an error budget, worker threads (one per core of rayon's pool) parse
//! and encode pieces while this thread writes them out in order;
//! the bytes, chunks and first error are those of the serial path, which is taken with an error
//! budget (errors must be counted in file order) or a repeated sequence id. Values are parsed
//! to double and rounded once to the output precision, as CNTK's `ctf2bin.py` does (Python
//! floats are doubles), which makes our output byte-identical to ctf2bin's wherever it writes a
//! single chunk. CBF keys do not store the CTF sequence ids; CBF to CTF writes the 0-based
//! sequence index as the id.

mod files;

pub use files::{
    convert, convert_with_progress, write_cbf, write_ctf, ColumnarFormat, ConvertOptions, Converted,
};

use crate::batch::SequenceBatch;
use crate::cbf::{CbfFile, CbfWriter, CbfWriterOptions};
use crate::ctf::{detect_key_mode, scan_sequences, CtfOptions, CtfParser, KeyMode};
use crate::element::{Element, Precision};
use crate::error::{DiagnosticSink, Error, Result};
use std::io::Write;
use std::ops::Deref;

/// Bytes of CTF text parsed at a time (whole sequences; a longer sequence makes a longer piece).
/// Pieces are parsed on all cores when no error may be tolerated and no sequence id repeats.
/// About 1 MiB, as the CTF parse benchmark parses: the parsed values of a piece (doubles) then stay in the
/// cache until they are encoded, and fewer bytes are in flight (measured: 1 MiB pieces took
/// less CPU time and fewer page faults than 4 MiB ones).
const PIECE_BYTES: usize = 1 << 20;

/// Bytes of CTF text in flight in the parallel pipeline (at least two pieces per worker).
const WINDOW_BYTES: usize = 32 << 20;

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
    let mut parser = CtfParser::new(opts.clone())?;
    parser.set_file_name(file);
    let mode = detect_key_mode(ctf, opts.skip_sequence_ids).ok_or_else(|| parser.empty_file())?;
    let mut writer = CbfWriter::new(out, &opts.inputs, options.cbf.clone())?;
    // Piece boundaries: (byte offset, 1-based line) of the first sequence of each piece.
    let mut starts: Vec<(u64, u64)> = Vec::new();
    let mut piece_start = 0u64;
    // Whether a sequence id repeats (only then do pieces depend on each other).
    let mut ids = std::collections::HashSet::new();
    let mut repeated = false;
    scan_sequences(ctf, 0, 1, mode, |e| {
        opts.limits.check_sequence(&e)?;
        if starts.is_empty() || e.offset - piece_start >= piece_bytes as u64 {
            let first = if starts.is_empty() {
                (0, 1)
            } else {
                (e.offset, e.line)
            };
            starts.push(first);
            piece_start = first.0;
        }
        if mode == KeyMode::Ids && !repeated {
            repeated = !ids.insert(e.key);
        }
        Ok(())
    })
    .map_err(|e| e.resolve_in(ctf, 0, 1).in_file(file.to_string()))?;
    drop(ids);
    let pieces: Vec<(u64, u64, usize)> = starts
        .iter()
        .enumerate()
        .map(|(i, &(offset, line))| {
            (
                offset,
                line,
                starts.get(i + 1).map_or(ctf.len(), |s| s.0 as usize),
            )
        })
        .collect();
    // Pieces parse independently (in parallel) when no error may be tolerated (the first one
    // in file order is fatal, as in a serial parse) and no id repeats; otherwise the error
    // budget and the repeated-id check need one parser over the whole file.
    let parallel = opts.max_errors == 0 && !repeated && pieces.len() > 1;
    if !parallel {
        let mut batch = SequenceBatch::<f64>::new(&opts.inputs);
        for &(offset, line, end) in &pieces {
            batch.clear();
            parser.parse_chunk(
                &ctf[offset as usize..end],
                offset,
                line,
                mode,
                &mut batch,
                sink,
            )?;
            writer
                .write_batch(&batch)
                .map_err(|e| e.in_file(file.to_string()))?;
            progress(end as u64);
        }
    } else {
        // A bounded in-order pipeline: worker threads parse and encode pieces (a window of them
        // ahead of the writer); this thread reports their diagnostics and hands the encoded
        // pieces to the writer in file order (which writes each chunk straight from them),
        // stopping at the first error as the serial path does, and returns written pieces to
        // the workers for their buffers.
        let workers = rayon::current_num_threads().clamp(1, pieces.len());
        // Pieces in flight (bounding memory): up to WINDOW_BYTES of text, enough that the
        // workers keep going while the writer is in the write of a whole chunk (32 MiB by
        // default, about 18 MiB of MNIST-like text), or two per worker when pieces are larger
        // (sequences of many megabytes) or cores many.
        let min_pieces = 2 * workers;
        let encoder = writer.encoder();
        let stop = std::sync::atomic::AtomicBool::new(false);
        type Done = (
            Result<crate::cbf::EncodedBatch>,
            Vec<crate::error::Diagnostic>,
        );
        let (jobs_tx, jobs_rx) =
            crossbeam_channel::unbounded::<(usize, crossbeam_channel::Sender<Done>)>();
        // Written batches go back to the workers for their buffers (bounded by the window and
        // the batches of one chunk).
        let (spares_tx, spares_rx) = crossbeam_channel::unbounded::<crate::cbf::EncodedBatch>();
        std::thread::scope(|scope| -> Result<()> {
            for _ in 0..workers {
                let (jobs_rx, spares) = (jobs_rx.clone(), spares_rx.clone());
                let (pieces, encoder, stop) = (&pieces, &encoder, &stop);
                scope.spawn(move || {
                    let mut batch = SequenceBatch::<f64>::new(&opts.inputs);
                    for (i, done) in jobs_rx {
                        if stop.load(std::sync::atomic::Ordering::Relaxed) {
                            break;
                        }
                        let (offset, line, end) = pieces[i];
                        let mut diags = Vec::new();
                        batch.clear();
                        // A fresh parser per piece, as pieces are independent.
                        let mut enc = spares.try_recv().unwrap_or_default();
                        let r = CtfParser::new(opts.clone())
                            .and_then(|mut p| {
                                p.set_file_name(file);
                                p.parse_chunk(
                                    &ctf[offset as usize..end],
                                    offset,
                                    line,
                                    mode,
                                    &mut batch,
                                    &mut diags,
                                )
                            })
                            .and_then(|()| encoder.encode_into(&batch, &mut enc))
                            .map(|()| enc);
                        // The writer may have stopped and dropped the receiver.
                        let _ = done.send((r, diags));
                    }
                });
            }
            drop((jobs_rx, spares_rx));
            let result = (|| {
                let mut queue = std::collections::VecDeque::new();
                let (mut next, mut in_flight) = (0, 0);
                let len = |i: usize| pieces[i].2 - pieces[i].0 as usize;
                loop {
                    while next < pieces.len()
                        && (queue.len() < min_pieces || in_flight + len(next) <= WINDOW_BYTES)
                    {
                        let (tx, rx) = crossbeam_channel::bounded(1);
                        jobs_tx
                            .send((next, tx))
                            .map_err(|_| Error::config("conversion workers stopped"))?;
                        queue.push_back((rx, next));
                        in_flight += len(next);
                        next += 1;
                    }
                    let Some((rx, i)) = queue.pop_front() else {
                        return Ok(());
                    };
                    in_flight -= len(i);
                    let end = pieces[i].2;
                    let (r, diags): Done = rx
                        .recv()
                        .map_err(|_| Error::config("a conversion worker stopped"))?;
                    for d in diags {
                        sink.report(d);
                    }
                    writer
                        .write_encoded(r?)
                        .map_err(|e| e.in_file(file.to_string()))?;
                    while let Some(spare) = writer.take_spare() {
                        let _ = spares_tx.send(spare);
                    }
                    progress(end as u64);
                }
            })();
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            drop(jobs_tx);
            result
        })?;
    }
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
        // A repeated id falls back to one parser, which reports it.
        let rep = format!("{t}0 |a 1 1 |b 0:1\n");
        let one = run(&rep, 0, usize::MAX).0.unwrap_err().to_string();
        assert_eq!(run(&rep, 0, 50).0.unwrap_err().to_string(), one);
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
