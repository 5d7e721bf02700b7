//! Any input written to a Parquet or Arrow IPC file, atomically: what
//! [`crate::convert::convert`] does when the output is one of these formats (reading them is
//! [`crate::open`]'s, like any other format).

use crate::arrow::Value;
use crate::arrow::{write_batches, SequenceWriter, WriteOptions};
use crate::convert::{parse_ctf_pieces, ConvertOptions, PieceStages, PIECE_BYTES};
use crate::format::FileFormat;
use crate::io::{AtomicOutput, OutputOptions};
use crate::SequenceBatch;
use crate::Sequences;
use crate::{DataSet, DiagnosticSink, Precision, Result};
use std::path::Path;

fn commit(out: AtomicOutput, options: &ConvertOptions) -> Result<()> {
    if options.sync {
        out.commit()
    } else {
        out.commit_unsynced()
    }
}

/// Writes every sequence of `data` (any input [`crate::open`] reads; a Lens file needs its
/// layout) to `output` as a Parquet or Arrow IPC file, atomically. Values are
/// `options.precision`, else what a CBF file stores, else float32; record batches (row groups)
/// hold about `options.chunk_size` bytes (`options.to` is not used). Problems tolerated by the
/// error budget go to `sink`. Returns the number of sequences written.
pub fn write_arrow_file(
    data: DataSet,
    output: &Path,
    format: FileFormat,
    options: &ConvertOptions,
    sink: &mut dyn DiagnosticSink,
) -> Result<u64> {
    let outs = super::files::output_options(options, &data);
    let precision = options
        .precision
        .or(data.stored_precision())
        .unwrap_or_default();
    let write = WriteOptions::new(format, options.chunk_size);
    fn run<T: Value>(
        data: DataSet,
        output: &Path,
        outs: &OutputOptions,
        write: WriteOptions,
        options: &ConvertOptions,
        sink: &mut dyn DiagnosticSink,
    ) -> Result<u64> {
        let out = AtomicOutput::create(output, outs)?;
        let (out, sequences) = if parses_in_pieces(&data) {
            write_ctf_pieces::<_, T>(data, out, write, sink, PIECE_BYTES)?
        } else {
            let (out, sequences, _) = write_sequences(data.sequences::<T>()?, out, write, sink)?;
            (out, sequences)
        };
        commit(out, options)?;
        Ok(sequences)
    }
    match precision {
        Precision::Float => run::<f32>(data, output, &outs, write, options, sink),
        Precision::Double => run::<f64>(data, output, &outs, write, options, sink),
    }
}

/// Whether `data` is CTF text in one plain file, which is then parsed on every core
/// ([`ctf_pieces`]). A pipe or a compressed file is parsed as it is read, on one thread: memory
/// stays bounded by a chunk there too.
pub(crate) fn parses_in_pieces(data: &DataSet) -> bool {
    data.format() == FileFormat::Ctf
        && !data.is_corpus()
        && data.is_seekable()
        && data.compression() == crate::io::Compression::None
}

/// Parses the CTF text of `data` (a plain file, mapped into memory) in pieces of about
/// `piece_bytes` on every core ([`parse_ctf_pieces`]), handing each piece's sequences to `each`
/// in file order; `each` may push batches it is done with onto the spares (for their buffers).
pub(crate) fn ctf_pieces<T: Value>(
    data: DataSet,
    sink: &mut dyn DiagnosticSink,
    piece_bytes: usize,
    mut each: impl FnMut(SequenceBatch<T>, &mut Vec<SequenceBatch<T>>) -> Result<()>,
) -> Result<()> {
    let (name, ctf) = (data.name().to_string(), data.options().ctf());
    let text = data.into_bytes()?;
    // The parsed batches themselves are handed on.
    let work = |parsed: &mut SequenceBatch<T>, piece: &mut SequenceBatch<T>| {
        std::mem::swap(parsed, piece);
        Ok(())
    };
    let new = || SequenceBatch::<T>::new(&ctf.inputs);
    let mut consume = |piece, _end, spares: &mut Vec<_>| each(piece, spares);
    let stages = PieceStages {
        work: &work,
        new: &new,
        consume: &mut consume,
    };
    parse_ctf_pieces::<T, _>(&text, &name, &ctf, piece_bytes, sink, stages)
}

/// The CTF text of `data` (a plain file) written to `out` as Parquet or Arrow IPC: parsed in
/// pieces of about `piece_bytes` on every core, the pieces handed to the writer in file order
/// (whose row groups are encoded on every core too). The same file as [`write_sequences`]
/// writes. Returns the output and the sequences written.
pub(crate) fn write_ctf_pieces<W: std::io::Write + Send, T: Value>(
    data: DataSet,
    out: W,
    write: WriteOptions,
    sink: &mut dyn DiagnosticSink,
    piece_bytes: usize,
) -> Result<(W, u64)> {
    let mut writer = SequenceWriter::<W, T>::new(out, &data.options().inputs, write)?;
    ctf_pieces::<T>(data, sink, piece_bytes, |piece, spares| {
        writer.write_batch(&piece)?;
        spares.push(piece);
        Ok(())
    })?;
    let sequences = writer.sequences();
    Ok((writer.finish()?.0, sequences))
}

/// Writes every sequence of `sequences` to `out` as a Parquet or Arrow IPC file; returns the
/// output, the sequences and the chunks written. Problems the reading tolerates go to `sink`.
pub fn write_sequences<W: std::io::Write + Send, T: Value>(
    mut sequences: Sequences<T>,
    out: W,
    options: WriteOptions,
    sink: &mut dyn DiagnosticSink,
) -> Result<(W, u64, u64)> {
    let specs = sequences.streams().to_vec();
    write_batches(&specs, |b| sequences.next_batch(b, sink), out, options)
}
