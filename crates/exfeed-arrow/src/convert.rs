//! Whole files to and from Parquet and Arrow IPC, atomically: what `exfeed convert` (and
//! Python's `exfeed.convert`) do when either side is one of these formats. The other
//! conversions are the core library's ([`exfeed::convert::convert`]), whose
//! [`ConvertOptions`] these take too.

use crate::file::{
    write_batches, write_sequences, ArrowFormat, ArrowSequences, SequenceWriter, WriteOptions,
};
use crate::Value;
use exfeed::cbf::CbfWriterOptions;
use exfeed::convert::{
    parse_ctf_pieces, write_cbf, write_ctf, ColumnarFormat, ConvertOptions, PieceStages,
    PIECE_BYTES,
};
use exfeed::format::FileFormat;
use exfeed::io::{AtomicOutput, OutputOptions};
use exfeed::{DataSet, DiagnosticSink, Error, ErrorKind, Location, Precision, Result};
use exfeed::{SequenceBatch, StreamSpec};
use std::path::{Path, PathBuf};

/// A format a conversion reads or writes: the core library's, or Parquet / Arrow IPC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// CTF, CBF, Lens `.ex`/`.bex`.
    Exfeed(FileFormat),
    /// Parquet, Arrow IPC.
    Arrow(ArrowFormat),
}

impl Format {
    /// `ctf`, `cbf`, `ex` (or `lens`), `bex`, `parquet`, `arrow` (or `ipc`, `feather`).
    pub fn parse_name(name: &str) -> Option<Self> {
        ColumnarFormat::parse_name(name)
            .map(|f| Format::Arrow(f.into()))
            .or_else(|| FileFormat::parse_name(name).map(Format::Exfeed))
    }

    /// An output's format from its name: Parquet or Arrow IPC by extension, else the core
    /// library's rule ([`FileFormat::from_name`]).
    pub fn from_name(path: &Path) -> Self {
        ArrowFormat::from_name(path)
            .map(Format::Arrow)
            .unwrap_or_else(|| Format::Exfeed(FileFormat::from_name(path)))
    }

    /// The name `--to` takes: `ctf`, `cbf`, `ex`, `bex`, `parquet`, `arrow`.
    pub fn short_name(self) -> &'static str {
        match self {
            Format::Exfeed(f) => f.short_name(),
            Format::Arrow(f) => f.short_name(),
        }
    }

    /// The core library's format, if this is one.
    pub fn exfeed(self) -> Option<FileFormat> {
        match self {
            Format::Exfeed(f) => Some(f),
            Format::Arrow(_) => None,
        }
    }

    /// Parquet or Arrow IPC, if this is one.
    pub fn arrow(self) -> Option<ArrowFormat> {
        match self {
            Format::Arrow(f) => Some(f),
            Format::Exfeed(_) => None,
        }
    }
}

/// The output options: never onto one of `inputs` (a corpus has many).
fn outputs(options: &ConvertOptions, inputs: Vec<PathBuf>) -> OutputOptions {
    OutputOptions {
        force: options.overwrite,
        inputs,
    }
}

fn commit(out: AtomicOutput, options: &ConvertOptions) -> Result<()> {
    if options.sync {
        out.commit()
    } else {
        out.commit_unsynced()
    }
}

/// Writes every sequence of `data` (any input [`exfeed::open`] reads; a Lens file needs its
/// layout) to `output` as a Parquet or Arrow IPC file, atomically. Values are
/// `options.precision`, else what a CBF file stores, else float32; record batches (row groups)
/// hold about `options.chunk_size` bytes (`options.to` is not used). Problems tolerated by the
/// error budget go to `sink`. Returns the number of sequences written.
pub fn write_arrow_file(
    data: DataSet,
    output: &Path,
    format: ArrowFormat,
    options: &ConvertOptions,
    sink: &mut dyn DiagnosticSink,
) -> Result<u64> {
    let outs = outputs(options, data.files());
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
        && data.compression() == exfeed::io::Compression::None
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

/// Converts the Parquet or Arrow IPC file `input` (of exfeed's schema, see
/// [`ArrowSequences::open`] for `given`) to `output` in format `to`: CTF, CBF, Parquet or Arrow
/// IPC, atomically. Values are `options.precision`, else the file's. Returns the number of
/// sequences written.
pub fn read_arrow_file(
    input: &Path,
    given: &[StreamSpec],
    output: &Path,
    to: Format,
    options: &ConvertOptions,
) -> Result<u64> {
    let mut file = ArrowSequences::open(input, given)?;
    let precision = options.precision.unwrap_or(file.precision());
    if let Format::Exfeed(other @ (FileFormat::LensText | FileFormat::LensBinary)) = to {
        return Err(Error::new(
            ErrorKind::Unsupported,
            Location::default().with_file(output.display().to_string()),
            format!(
                "converting {} to {} is not supported (to CTF, CBF, Parquet or Arrow IPC)",
                file.format().describe(),
                other.describe()
            ),
        ));
    }
    let out = AtomicOutput::create(output, &outputs(options, vec![input.to_path_buf()]))?;
    fn run<T: Value>(
        file: &mut ArrowSequences,
        out: AtomicOutput,
        to: Format,
        precision: Precision,
        options: &ConvertOptions,
        name: &str,
    ) -> Result<u64> {
        let specs = file.streams().to_vec();
        let fill = |b: &mut SequenceBatch<T>| file.next_batch(b);
        let (out, sequences) = match to {
            Format::Arrow(format) => {
                let write = WriteOptions::new(format, options.chunk_size);
                let (out, sequences, _) = write_batches(&specs, fill, out, write)?;
                (out, sequences)
            }
            Format::Exfeed(FileFormat::Cbf) => {
                let cbf = CbfWriterOptions {
                    chunk_size: options.chunk_size,
                    precision,
                };
                let (out, sequences, _) = write_cbf(&specs, fill, out, cbf)?;
                (out, sequences)
            }
            Format::Exfeed(_) => write_ctf(&specs, fill, out, name)?,
        };
        commit(out, options)?;
        Ok(sequences)
    }
    let name = input.display().to_string();
    match precision {
        Precision::Float => run::<f32>(&mut file, out, to, precision, options, &name),
        Precision::Double => run::<f64>(&mut file, out, to, precision, options, &name),
    }
}
