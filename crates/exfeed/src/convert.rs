//! Conversion between CTF and CBF.
//!
//! CTF to CBF parses the text in pieces of whole sequences (found by
//! [`crate::ctf::scan_sequences`]) and hands each piece's sequences to a [`CbfWriter`], so memory
//! stays bounded by the piece and the open chunk. Values are parsed to double and rounded once
//! to the output precision, as CNTK's `ctf2bin.py` does (Python floats are doubles), which makes
//! our output byte-identical to ctf2bin's wherever it writes a single chunk. CBF keys do not
//! store the CTF sequence ids; CBF to CTF writes the 0-based sequence index as the id.

use crate::batch::SequenceBatch;
use crate::cbf::{CbfFile, CbfWriter, CbfWriterOptions};
use crate::ctf::{detect_key_mode, scan_sequences, CtfOptions, CtfParser};
use crate::element::{Element, Precision};
use crate::error::{DiagnosticSink, Error, Result};
use std::io::Write;
use std::ops::Deref;

/// Bytes of CTF text parsed at a time (whole sequences; a longer sequence makes a longer piece).
const PIECE_BYTES: usize = 8 << 20;

/// What a conversion did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConvertStats {
    /// Sequences written.
    pub sequences: u64,
    /// Chunks written (CBF output only).
    pub chunks: u64,
}

/// Converts a whole CTF file held in `ctf` (named `file` in errors) to CBF written to `out`.
/// The CBF streams are `opts.inputs`, stored under their names (their aliases are the CTF
/// names). `progress` is called with the number of input bytes done after each piece.
pub fn ctf_to_cbf<W: Write>(
    ctf: &[u8],
    file: &str,
    opts: &CtfOptions,
    cbf: &CbfWriterOptions,
    out: W,
    sink: &mut dyn DiagnosticSink,
    mut progress: impl FnMut(u64),
) -> Result<(W, ConvertStats)> {
    let mut parser = CtfParser::new(opts.clone())?;
    parser.set_file_name(file);
    let mode = detect_key_mode(ctf, opts.skip_sequence_ids).ok_or_else(|| {
        Error::invalid(0, "the file is empty: no data lines").in_file(file.to_string())
    })?;
    let mut writer = CbfWriter::new(out, &opts.inputs, cbf.clone())?;
    let mut batch = SequenceBatch::<f64>::new(&opts.inputs);
    // Piece boundaries: (byte offset, 1-based line) of the first sequence of each piece.
    let mut starts: Vec<(u64, u64)> = Vec::new();
    let mut piece_start = 0u64;
    scan_sequences(ctf, 0, 1, mode, |e| {
        if starts.is_empty() || e.offset - piece_start >= PIECE_BYTES as u64 {
            let first = if starts.is_empty() {
                (0, 1)
            } else {
                (e.offset, e.line)
            };
            starts.push(first);
            piece_start = first.0;
        }
        Ok(())
    })
    .map_err(|e| e.in_file(file.to_string()))?;
    for (i, &(offset, line)) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(ctf.len(), |s| s.0 as usize);
        let piece = &ctf[offset as usize..end];
        batch.clear();
        parser.parse_chunk(piece, offset, line, mode, &mut batch, sink)?;
        writer
            .write_batch(&batch)
            .map_err(|e| e.in_file(file.to_string()))?;
        progress(end as u64);
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
