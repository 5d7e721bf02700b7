//! The front door: [`open`] any input (a file, `-` for standard input, a pipe or FIFO, plain or
//! gzip/bzip2-compressed), in any of the formats, and read it as [`SequenceBatch`]es, summarize
//! it, or hand it to the minibatch reader.
//!
//! The format is recognised once, when the input is opened, from a peek at its first bytes
//! (decompressed) that the reader then replays: an input that cannot seek (a pipe, a FIFO,
//! standard input) is read exactly once, from its first byte. Magic bytes decide (CBF, Lens
//! `.bex`), then the name (`.ex`, `.bex`, `.cbf`/`.bin`, anything else CTF; see
//! [`FileFormat::from_name`]); [`OpenOptions::format`] overrides both (it is the only way to say
//! that standard input holds Lens text).
//!
//! ```
//! use exfeed::{open, OpenOptions, SequenceBatch, Storage, StreamSpec};
//! use exfeed::format::FileFormat;
//!
//! let path = std::env::temp_dir().join(format!("exfeed-open-doc-{}.ctf", std::process::id()));
//! std::fs::write(&path, "0 |x 1 2\n0 |x 3 4\n1 |x 5 6\n")?;
//! let options = OpenOptions {
//!     inputs: vec![StreamSpec::new("x", Storage::Dense, 2)],
//!     ..OpenOptions::default()
//! };
//! let data = open(&path, &options)?;
//! assert_eq!(data.format(), FileFormat::Ctf);
//! let mut sequences = data.sequences::<f32>()?;
//! let mut batch = SequenceBatch::new(sequences.streams());
//! let mut keys = Vec::new();
//! while sequences.next_batch(&mut batch, &mut exfeed::error::Ignore)? {
//!     keys.extend_from_slice(batch.keys());
//! }
//! assert_eq!(keys, [0, 1]);
//!
//! let summary = open(&path, &options)?.summary::<f32>(&mut exfeed::error::Ignore).result?;
//! assert_eq!((summary.sequences, summary.longest), (2, Some((2, 0))));
//! assert_eq!(summary.streams[0].samples, 3);
//! # std::fs::remove_file(&path)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::batch::SequenceBatch;
use crate::cbf::CbfFile;
use crate::ctf::{CtfOptions, CtfParser, CtfStream};
use crate::element::{Element, Precision};
use crate::error::{Diagnostic, DiagnosticSink, Error, ErrorKind, Location, Result, Severity};
use crate::format::FileFormat;
use crate::io::{open_peeked, read_all, Compression, Holding, InputBytes, InputPath};
use crate::lens::info::Info;
use crate::lens::materialize::{Layout, Materializer};
use crate::lens::pipe::PipeReader;
use crate::lens::ExampleSet;
use crate::limits::Limits;
use crate::options::ReadOptions;
use crate::reader::ChunkSource;
use crate::source::{
    CbfSource, CorpusSource, CtfSource, CtfSourceOptions, LensSource, LensSourceOptions,
};
use crate::stream::{Storage, StreamSpec};
use std::io::BufRead;
use std::path::PathBuf;
use std::sync::Arc;

mod corpus;
pub use corpus::{open_corpus, Shards};

/// How to open and read an input. Every field has a default; what a format does not use is
/// ignored.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpenOptions {
    /// The format, overriding detection (`--from`).
    pub format: Option<FileFormat>,
    /// CTF: the inputs (streams) to read, in the order of the batches' streams (required).
    /// CBF: every stream is exposed; these rename the ones they name, as CNTK does (see
    /// [`CbfFile::select`]).
    pub inputs: Vec<StreamSpec>,
    /// CTF: every line is a sequence keyed by its line number (`skipSequenceIds`).
    pub skip_sequence_ids: bool,
    /// CTF: bad samples or sequences reported and skipped before one stops the reading
    /// (`maxErrors`).
    pub max_errors: u64,
    /// Lens: the network's layout, which makes examples sequences (one sample per event) of
    /// an `input` and a `target` stream.
    pub lens: Option<LensLayout>,
    /// The most bytes one record (a CTF sequence, a Lens example) may take, also in an input
    /// read whole from a stream (see [`Limits`]).
    pub limits: Limits,
    /// How [`DataSet::into_chunk_source`] reads a CTF or Lens file: its chunk size, index,
    /// index cache, whether it is held in memory (a CBF file has its own chunks); and how a URL
    /// input reaches its store (its storage options).
    pub read: ReadOptions,
}

/// The network layout a Lens example file is read for (see [`Materializer`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LensLayout {
    /// The input groups, in network order (`inputGroups`).
    pub input_groups: Layout,
    /// The target groups, in network order (`targetGroups`).
    pub target_groups: Layout,
    /// The value NaN becomes. `None`: NaN is an error in [`DataSet::sequences`] (CTF and CBF
    /// cannot hold it) and stays NaN in [`DataSet::into_chunk_source`] (minibatches can).
    pub nan: Option<f32>,
    /// Whether the reader's source gives the examples' frequencies (`freq:`) as weights for
    /// draws with replacement (Lens's PROBABILISTIC mode).
    pub frequencies: bool,
}

impl OpenOptions {
    /// How CTF is read, from these options.
    pub fn ctf(&self) -> CtfOptions {
        CtfOptions {
            inputs: self.inputs.clone(),
            skip_sequence_ids: self.skip_sequence_ids,
            max_errors: self.max_errors,
            limits: self.limits,
        }
    }
}

/// An opened input: its format known, nothing of it read yet but the first bytes (which are
/// kept for reading). See the [module documentation](self).
pub struct DataSet {
    input: InputPath,
    name: String,
    format: FileFormat,
    compression: Compression,
    content: Content,
    options: OpenOptions,
}

enum Content {
    /// The stream, from its first (decompressed) byte.
    Stream(Box<dyn BufRead + Send>),
    /// A CBF file (its header read: CBF is read by chunk, from memory or a mapped file).
    Cbf(Box<CbfFile<InputBytes>>),
    /// A corpus ([`open_corpus`]): its first file opened, the others opened when reached.
    Corpus(Box<corpus::CorpusFiles>),
    /// A Parquet or Arrow IPC file (its footer and schema read).
    #[cfg(feature = "arrow")]
    Columnar(Box<crate::arrow::ColumnarFile>),
}

/// Opens `input` (a path; `-` is standard input) and recognises its format (see the
/// [module documentation](self)). A file name that does not exist is retried with `.gz`, then
/// `.bz2` appended, as Lens does. A CBF file's header is read and checked here. A URL
/// (`s3://bucket/key`, `gs://bucket/key`, `http(s)://...`) is read by byte range where the format
/// allows (CTF, CBF, Parquet, Arrow IPC), else as a stream (Lens, compressed objects); see
/// docs/remote.md.
pub fn open(input: impl Into<InputPath>, options: &OpenOptions) -> Result<DataSet> {
    // A URL's object is opened once, here: detection and the format's reader share it.
    let input = (options.read.apply_to(input.into()))
        .with_compressed_lookup()
        .opened()?;
    let name = input.display_name();
    let (reader, head, compression) = open_peeked(&input, 8)?;
    let format = options
        .format
        .unwrap_or_else(|| detect_format(&input, &head));
    let in_file = |e: Error| e.in_file(name.clone());
    let mut content = match format {
        // A file, mapped (or, compressed, decompressed to a temporary file: see open_cbf).
        FileFormat::Cbf if input.is_seekable() => {
            drop(reader);
            Content::Cbf(Box::new(crate::io::open_cbf(&input)?))
        }
        FileFormat::Cbf => {
            // Its magic is checked before the stream is read whole (it may never end).
            crate::cbf::check_magic(&head).map_err(in_file)?;
            let bytes = read_all(reader, &name, Holding::Binary)?;
            Content::Cbf(Box::new(CbfFile::open(bytes).map_err(in_file)?))
        }
        format if format.is_columnar() => {
            open_columnar(&input, reader, compression, format, options)?
        }
        _ => Content::Stream(reader),
    };
    if let Content::Cbf(file) = &mut content {
        if !options.inputs.is_empty() {
            file.select(&options.inputs).map_err(in_file)?;
        }
    }
    Ok(DataSet {
        input,
        name,
        format,
        compression,
        content,
        options: options.clone(),
    })
}

/// A Parquet or Arrow IPC file: read in place when it is a plain file or an object at a URL
/// (by ranged requests), else (a pipe, standard input, a compressed file) read into memory
/// first, as its footer is at its end.
#[cfg(feature = "arrow")]
fn open_columnar(
    input: &InputPath,
    reader: Box<dyn BufRead + Send>,
    compression: Compression,
    format: FileFormat,
    options: &OpenOptions,
) -> Result<Content> {
    use crate::arrow::{ColumnarFile, ColumnarInput};
    let name = input.display_name();
    let bytes = match input {
        InputPath::File(path) if input.is_seekable() && compression == Compression::None => {
            drop(reader);
            ColumnarInput::file(path)?
        }
        InputPath::Url(url) if compression == Compression::None => {
            drop(reader);
            ColumnarInput::Remote(crate::io::RemoteFile::open(url)?)
        }
        _ => match read_all(reader, &name, Holding::Binary)? {
            InputBytes::Owned(v) => ColumnarInput::Memory(v.into()),
            other => ColumnarInput::Memory(bytes::Bytes::copy_from_slice(&other)),
        },
    };
    let file = ColumnarFile::open(bytes, &name, format, &options.inputs)?;
    Ok(Content::Columnar(Box::new(file)))
}

/// Without the `arrow` feature, Parquet and Arrow IPC files are recognised and refused.
#[cfg(not(feature = "arrow"))]
fn open_columnar(
    input: &InputPath,
    _: Box<dyn BufRead + Send>,
    _: Compression,
    format: FileFormat,
    _: &OpenOptions,
) -> Result<Content> {
    Err(Error::new(
        ErrorKind::Unsupported,
        Location::default().with_file(input.display_name()),
        format!(
            "this is {}: reading it needs exfeed built with the `arrow` feature",
            format.describe()
        ),
    ))
}

/// The format of `input` whose first (decompressed) bytes are `head`: magic bytes, then the
/// name (see the [module documentation](self)).
fn detect_format(input: &InputPath, head: &[u8]) -> FileFormat {
    match input {
        InputPath::File(path) => FileFormat::detect(path, head),
        InputPath::Url(url) => FileFormat::detect(std::path::Path::new(url.file_name()), head),
        _ => FileFormat::from_magic(head).unwrap_or(FileFormat::Ctf),
    }
}

impl DataSet {
    /// The format, as recognised or given.
    pub fn format(&self) -> FileFormat {
        self.format
    }

    /// The name used in messages (the path as given, `-` for standard input; a corpus's glob,
    /// `@LIST`, or its first file and count).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The options it was opened with.
    pub fn options(&self) -> &OpenOptions {
        &self.options
    }

    /// The compression recognised by the first bytes.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// The input (after the `.gz`/`.bz2` lookup; a corpus's first file).
    pub fn input(&self) -> &InputPath {
        &self.input
    }

    /// Whether this is a corpus ([`open_corpus`]).
    pub fn is_corpus(&self) -> bool {
        matches!(self.content, Content::Corpus(_))
    }

    /// The files read: the input's path (none for standard input), or every file of a corpus.
    pub fn files(&self) -> Vec<PathBuf> {
        match &self.content {
            Content::Corpus(c) => c.files.iter().map(InputPath::as_corpus_file).collect(),
            _ => self.input.path().map(PathBuf::from).into_iter().collect(),
        }
    }

    /// A corpus's files, each opened when reached, with its number; a single input is the
    /// one shard of itself. See [`Shards`].
    pub fn shards(self) -> Shards {
        let options = self.options.clone();
        match self.content {
            Content::Corpus(files) => Shards::new(*files, options),
            _ => {
                let files = vec![self.input.clone()];
                Shards::new(corpus::CorpusFiles { files, first: self }, options)
            }
        }
    }

    /// The streams of the sequences, when known before reading: the inputs of CTF, the
    /// (selected) streams of CBF, `input` and `target` of a Lens file with a layout.
    pub fn declared_streams(&self) -> Option<Vec<StreamSpec>> {
        match &self.content {
            Content::Cbf(f) => Some(f.stream_specs()),
            Content::Corpus(c) => c.first.declared_streams(),
            Content::Stream(_) if self.format == FileFormat::Ctf => {
                Some(self.options.inputs.clone()).filter(|i| !i.is_empty())
            }
            Content::Stream(_) => self.options.lens.as_ref().map(|l| {
                Materializer::new(l.input_groups.clone(), l.target_groups.clone())
                    .stream_specs("input", "target")
            }),
            #[cfg(feature = "arrow")]
            Content::Columnar(f) => Some(f.streams().to_vec()),
        }
    }

    /// The error for what a corpus cannot do as a whole (`what`).
    fn refuse_corpus(&self, what: &str) -> Result<()> {
        if !self.is_corpus() {
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::Unsupported,
            Location::default().with_file(self.name.clone()),
            format!("a corpus {what}"),
        ))
    }

    /// Whether the input can be read again (a regular file): the minibatch reader then reads it
    /// by itself; otherwise [`DataSet::into_input`] holds it in memory.
    pub fn is_seekable(&self) -> bool {
        self.input.is_seekable()
    }

    /// The element type stored in the file: a CBF file's (`double` when any stream is); `None`
    /// for text formats, which have none.
    pub fn stored_precision(&self) -> Option<Precision> {
        match &self.content {
            Content::Cbf(f) if f.streams().iter().all(|s| s.element == Precision::Float) => {
                Some(Precision::Float)
            }
            Content::Cbf(_) => Some(Precision::Double),
            Content::Stream(_) => None,
            Content::Corpus(c) => c.first.stored_precision(),
            #[cfg(feature = "arrow")]
            Content::Columnar(f) => Some(f.precision()),
        }
    }

    /// The CBF file, when this is one (for its header and chunk table).
    pub fn cbf(&self) -> Option<&CbfFile<InputBytes>> {
        match &self.content {
            Content::Cbf(f) => Some(f),
            _ => None,
        }
    }

    /// The Parquet or Arrow IPC file, when this is one (for its schema and chunks).
    #[cfg(feature = "arrow")]
    pub fn columnar(&self) -> Option<&crate::arrow::ColumnarFile> {
        match &self.content {
            Content::Columnar(f) => Some(f),
            _ => None,
        }
    }

    /// Warnings for the configured inputs that name no stream of this CBF file (of a corpus:
    /// of its first file), which CNTK ignores (see [`CbfFile::select`]).
    pub fn rename_warnings(&self) -> Vec<Diagnostic> {
        let (file, name) = match &self.content {
            Content::Cbf(f) => (f, self.name()),
            Content::Corpus(c) => match &c.first.content {
                Content::Cbf(f) => (f, c.first.name()),
                _ => return Vec::new(),
            },
            _ => return Vec::new(),
        };
        file.rename_warnings()
            .into_iter()
            .map(|message| Diagnostic {
                severity: Severity::Warning,
                location: Location::default().with_file(name.to_string()),
                message,
            })
            .collect()
    }

    /// An input the minibatch reader can open (see [`crate::configured::open_configured_source`]):
    /// the file itself when it can be read again, else the whole (decompressed) content, read
    /// now, in memory.
    pub fn into_input(self) -> Result<InputPath> {
        self.refuse_corpus("is many inputs, not one (see into_chunk_source)")?;
        if self.input.is_seekable() {
            return Ok(self.input);
        }
        let holding = self.holding();
        let bytes: Arc<[u8]> = match self.content {
            Content::Stream(reader) => match read_all(reader, &self.name, holding)? {
                InputBytes::Owned(v) => v.into(),
                other => Arc::from(&other[..]),
            },
            Content::Cbf(file) => match file.bytes() {
                Some(b) => Arc::from(b),
                None => return Ok(self.input),
            },
            #[cfg(feature = "arrow")]
            Content::Columnar(file) => match file.input() {
                crate::arrow::ColumnarInput::Memory(b) => Arc::from(&b[..]),
                crate::arrow::ColumnarInput::File(..) | crate::arrow::ColumnarInput::Remote(_) => {
                    return Ok(self.input)
                }
            },
            Content::Corpus(_) => unreachable!("refused above"),
        };
        Ok(InputPath::Memory {
            name: self.name.into(),
            bytes,
        })
    }

    /// The engine's source over this input: chunks of whole sequences decoded on demand, read
    /// as [`OpenOptions::read`] says (see [`DataSet::into_source`]).
    pub fn into_chunk_source<T: Element>(self) -> Result<Arc<dyn ChunkSource<T>>> {
        Ok(self.into_source()?.chunk_source())
    }

    /// The engine's source over this input, by format (see [`FormatSource`]): CTF read as
    /// [`OpenOptions::read`] says ([`CtfSource`]), CBF by its own chunks ([`CbfSource`]), a
    /// Lens file for [`OpenOptions::lens`] ([`LensSource`]), a Parquet or Arrow IPC file by row
    /// group or record batch, a corpus shard after shard ([`CorpusSource`]). Inputs that
    /// cannot seek are read into memory first.
    pub fn into_source<T: Element>(self) -> Result<FormatSource<T>> {
        if self.is_corpus() {
            let mut shards = Vec::new();
            for (_, _, data) in self.shards() {
                let data = data?;
                let name = data.name().to_string();
                shards.push((name, data.into_source::<T>()?));
            }
            let parts = shards
                .iter()
                .map(|(name, s)| (name.clone(), s.chunk_source()))
                .collect();
            let source = Arc::new(CorpusSource::new(parts)?);
            let shards = shards.into_iter().map(|(_, s)| s).collect();
            return Ok(FormatSource::Corpus { source, shards });
        }
        let (format, options) = (self.format, self.options.clone());
        let name = self.name.clone();
        let input = match self.content {
            // Opened already (mapped, or decompressed once), its streams selected.
            Content::Cbf(file) => {
                return Ok(FormatSource::Cbf(Arc::new(CbfSource::from_file(
                    *file, self.name,
                ))))
            }
            #[cfg(feature = "arrow")]
            Content::Columnar(file) => return Ok(FormatSource::Columnar(Arc::new(*file))),
            content => DataSet { content, ..self }.into_input()?,
        };
        Ok(match format {
            FileFormat::Ctf => FormatSource::Ctf(Arc::new(CtfSource::open(
                &input,
                CtfSourceOptions {
                    ctf: options.ctf(),
                    read: options.read.clone(),
                },
            )?)),
            FileFormat::LensText | FileFormat::LensBinary => {
                let layout = needs_layout(&options, &name)?;
                FormatSource::Lens(Arc::new(LensSource::open(
                    &input,
                    &options.inputs,
                    LensSourceOptions {
                        input_groups: layout.input_groups.clone(),
                        target_groups: layout.target_groups.clone(),
                        nan: layout.nan,
                        limits: options.limits,
                        read: options.read.clone(),
                        use_frequencies: layout.frequencies,
                    },
                )?))
            }
            FileFormat::Cbf | FileFormat::Parquet | FileFormat::ArrowIpc => {
                unreachable!("opened as their content")
            }
        })
    }

    /// What the content is, for reading it whole from a stream (see [`Holding`]).
    fn holding(&self) -> Holding {
        match self.format {
            FileFormat::Ctf => Holding::CtfText(self.options.limits),
            _ => Holding::Binary,
        }
    }

    /// Sets how many bad samples or sequences are tolerated (`maxErrors`), before anything is
    /// read: `check` lists every problem of a file however many there are.
    pub fn set_max_errors(&mut self, max_errors: u64) {
        self.options.max_errors = max_errors;
        if let Content::Corpus(c) = &mut self.content {
            c.first.set_max_errors(max_errors);
        }
    }

    /// Sets how [`DataSet::into_chunk_source`] reads the data (see [`OpenOptions::read`]).
    pub fn set_read(&mut self, read: ReadOptions) {
        if let Content::Corpus(c) = &mut self.content {
            c.first.set_read(read.clone());
        }
        self.options.read = read;
    }

    /// The whole content in memory (a plain regular file is memory-mapped; a stream is read
    /// whole, CTF text checked as it arrives: see [`Holding`]).
    pub fn into_bytes(self) -> Result<InputBytes> {
        self.refuse_corpus("is read file by file, not whole (see sequences)")?;
        let holding = self.holding();
        match self.content {
            Content::Stream(_)
                if self.input.is_seekable() && self.compression == Compression::None =>
            {
                crate::io::open_bytes(&self.input)
            }
            Content::Stream(reader) => read_all(reader, &self.name, holding),
            Content::Cbf(file) => match file.bytes() {
                Some(b) => Ok(InputBytes::Owned(b.to_vec())),
                None => crate::io::open_bytes(&self.input),
            },
            #[cfg(feature = "arrow")]
            Content::Columnar(_) => crate::io::open_bytes(&self.input),
            Content::Corpus(_) => unreachable!("refused above"),
        }
    }

    /// A Lens example file, whole (either form). Errors name the file.
    pub fn lens_set(self) -> Result<ExampleSet> {
        self.expect_lens()?;
        let name = self.name.clone();
        crate::lens::parse(&self.into_bytes()?).map_err(|e| e.in_file(name))
    }

    /// A Lens example file read one example at a time, as it arrives (Lens's PIPE mode):
    /// memory bounded by one example. With `looping`, a file is reopened and read again at its
    /// end (standard input cannot be, so it never loops).
    pub fn lens_examples(self, looping: bool) -> Result<PipeReader> {
        self.expect_lens()?;
        let Content::Stream(reader) = self.content else {
            unreachable!("Lens input is a stream")
        };
        // A compressed file is decompressed, and an object fetched, on a thread of its own,
        // beside the parse. (Not standard input: its thread could wait for input long after
        // the reader is gone.)
        let reader = match (&self.input, self.compression) {
            (InputPath::File(_), Compression::Gzip | Compression::Bzip2)
            | (InputPath::Url(_), _) => {
                Box::new(crate::io::ReadAhead::new(Box::new(reader), 256 << 10, 4))
            }
            _ => reader,
        };
        let reopen = match (&self.input, looping) {
            (InputPath::File(_) | InputPath::Url(_), true) => {
                let input = self.input.clone();
                Some(Box::new(move || crate::io::open_reader(&input)) as crate::lens::pipe::Opener)
            }
            _ => None,
        };
        PipeReader::with_limits(reader, reopen, self.name, self.options.limits)
    }

    /// A Lens file's example and event counts, from a pass over it of its own (the file is
    /// opened again; one example in memory at a time; text is skimmed, see
    /// [`PipeReader::skim`], so a bad number is not found here but when the examples are
    /// read). `None` when the input cannot be read twice (a pipe, standard input).
    pub fn lens_counts(&self) -> Result<Option<(usize, usize)>> {
        self.expect_lens()?;
        if !self.is_seekable() {
            return Ok(None);
        }
        let mut examples = open(self.input.clone(), &self.options)?.lens_examples(false)?;
        examples.skim();
        let mut events = 0;
        while let Some(ex) = examples.next_example()? {
            events += ex.events.len();
            examples.recycle(ex);
        }
        Ok(Some((examples.examples_read(), events)))
    }

    fn expect_lens(&self) -> Result<()> {
        self.refuse_corpus(
            "of Lens files is read as sequences, with the network's layout (or file by file)",
        )?;
        if matches!(self.format, FileFormat::LensText | FileFormat::LensBinary) {
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::Unsupported,
                Location::default().with_file(self.name.clone()),
                format!(
                    "this is {}, not a Lens example file",
                    self.format.describe()
                ),
            ))
        }
    }

    /// Reads the input as batches of whole sequences, in file order.
    pub fn sequences<T: Element>(self) -> Result<Sequences<T>> {
        let name = self.name.clone();
        let in_file = |e: Error| e.in_file(name.clone());
        let inner = match (self.format, self.content) {
            (_, Content::Corpus(files)) => {
                let (corpus, streams) = corpus::CorpusSequences::new(*files, self.options)?;
                return Ok(Sequences {
                    name: self.name,
                    streams,
                    inner: Inner::Corpus(Box::new(corpus)),
                    pending: None,
                    _t: std::marker::PhantomData,
                });
            }
            (FileFormat::Cbf, Content::Cbf(file)) => Inner::Cbf { file, next: 0 },
            (FileFormat::Ctf, Content::Stream(reader)) => {
                if self.options.inputs.is_empty() {
                    return Err(Error::config(
                        "reading CTF needs its inputs: NAME:FORMAT:DIM[:ALIAS] for each \
                         (--input), or a configuration",
                    )
                    .in_file(self.name));
                }
                let mut parser = CtfParser::new(self.options.ctf()).map_err(in_file)?;
                parser.set_file_name(self.name.clone());
                Inner::Ctf {
                    stream: Box::new(CtfStream::new(parser)),
                    reader,
                    done: false,
                }
            }
            (_, Content::Stream(reader)) => {
                let layout = needs_layout(&self.options, &self.name)?.clone();
                let materializer = Materializer::new(layout.input_groups, layout.target_groups);
                Inner::Lens {
                    examples: Box::new(PipeReader::with_limits(
                        reader,
                        None,
                        self.name.clone(),
                        self.options.limits,
                    )?),
                    materializer,
                    nan: layout.nan,
                    next_key: 0,
                }
            }
            (_, Content::Cbf(_)) => unreachable!("CBF content is opened as CBF"),
            #[cfg(feature = "arrow")]
            (_, Content::Columnar(file)) => Inner::Columnar(Box::new(file.sequences(None)?)),
        };
        let streams = match &inner {
            Inner::Ctf { .. } => self.options.inputs.clone(),
            Inner::Cbf { file, .. } => file.stream_specs(),
            Inner::Lens { materializer, .. } => materializer.stream_specs("input", "target"),
            #[cfg(feature = "arrow")]
            Inner::Columnar(file) => file.streams().to_vec(),
            Inner::Corpus(_) => unreachable!("returned above"),
        };
        Ok(Sequences {
            name: self.name,
            streams,
            inner,
            pending: None,
            _t: std::marker::PhantomData,
        })
    }

    /// Reads the whole input and summarizes it (what `exfeed check` prints). Diagnostics go to
    /// `sink`. A fatal error still gives the summary of what was read before it.
    /// A corpus is summarized file after file, its counts added up ([`Summary::merge`]).
    pub fn summary<T: Element>(self, sink: &mut dyn DiagnosticSink) -> SummaryOutcome {
        if self.is_corpus() {
            let (total, result) = self.summarize_shards(|_, data| match data {
                Ok(data) => {
                    let one = data.summary::<T>(sink);
                    (Some(one.summary), one.result.map(drop))
                }
                Err(e) => (None, Err(e)),
            });
            return SummaryOutcome {
                result: result.map(|()| total.clone()),
                summary: total,
            };
        }
        let mut summary = Summary {
            name: self.name.clone(),
            format: self.format,
            sequences: 0,
            longest: None,
            streams: Vec::new(),
            lens: None,
            corpus: false,
        };
        let result = self.summarize::<T>(&mut summary, sink);
        SummaryOutcome {
            result: result.map(|()| summary.clone()),
            summary,
        }
    }

    fn summarize<T: Element>(
        self,
        summary: &mut Summary,
        sink: &mut dyn DiagnosticSink,
    ) -> Result<()> {
        if matches!(self.format, FileFormat::LensText | FileFormat::LensBinary)
            && self.options.lens.is_none()
        {
            // One example at a time: memory is one example's, whatever the file's size.
            let mut examples = self.lens_examples(false)?;
            let info = summary.lens.insert(Info::default());
            while let Some(ex) = examples.next_example()? {
                let len = ex.events.len();
                if summary.longest.is_none_or(|(l, _)| len > l) {
                    summary.longest = Some((len, info.examples as u64));
                }
                info.add(&ex);
                summary.sequences = info.examples as u64;
                examples.recycle(ex);
            }
            return Ok(());
        }
        let stored = self.cbf().map(|f| {
            f.streams()
                .iter()
                .map(|s| s.element)
                .collect::<Vec<Precision>>()
        });
        let mut sequences = self.sequences::<T>()?;
        summary.streams = sequences
            .streams()
            .iter()
            .enumerate()
            .map(|(i, spec)| StreamSummary {
                spec: spec.clone(),
                stored: stored.as_ref().map(|s| s[i]),
                samples: 0,
                non_zeros: 0,
            })
            .collect();
        let mut batch = SequenceBatch::<T>::new(sequences.streams());
        while sequences.next_batch(&mut batch, sink)? {
            summary.add(&batch);
        }
        Ok(())
    }
}

/// A data set's chunk source, by format ([`DataSet::into_source`]): the engine reads it as
/// [`FormatSource::chunk_source`]; the sources themselves say more (a CTF file's index, a Lens
/// file's frequencies, warnings met while reading).
pub enum FormatSource<T: Element> {
    /// A CTF file.
    Ctf(Arc<CtfSource>),
    /// A CBF file.
    Cbf(Arc<CbfSource>),
    /// A Lens example file.
    Lens(Arc<LensSource>),
    /// A Parquet or Arrow IPC file.
    #[cfg(feature = "arrow")]
    Columnar(Arc<crate::arrow::ColumnarFile>),
    /// A corpus: its shards' sources, one after the other.
    Corpus {
        /// The shards as one source.
        source: Arc<CorpusSource<T>>,
        /// Each shard's own.
        shards: Vec<FormatSource<T>>,
    },
}

impl<T: Element> FormatSource<T> {
    /// What the reader engine reads.
    pub fn chunk_source(&self) -> Arc<dyn ChunkSource<T>> {
        match self {
            FormatSource::Ctf(s) => s.clone(),
            FormatSource::Cbf(s) => s.clone(),
            FormatSource::Lens(s) => s.clone(),
            #[cfg(feature = "arrow")]
            FormatSource::Columnar(s) => s.clone(),
            FormatSource::Corpus { source, .. } => source.clone(),
        }
    }

    /// The single files' sources: this one, or a corpus's shards.
    fn files(&self) -> Vec<&FormatSource<T>> {
        match self {
            FormatSource::Corpus { shards, .. } => shards.iter().flat_map(|s| s.files()).collect(),
            one => vec![one],
        }
    }

    /// The CTF files' sources among these (a corpus's shards included).
    pub fn ctf_sources(&self) -> Vec<Arc<CtfSource>> {
        (self.files().into_iter())
            .filter_map(|s| match s {
                FormatSource::Ctf(c) => Some(c.clone()),
                _ => None,
            })
            .collect()
    }

    /// The Lens files' sources among these (a corpus's shards included).
    pub fn lens_sources(&self) -> Vec<Arc<LensSource>> {
        (self.files().into_iter())
            .filter_map(|s| match s {
                FormatSource::Lens(l) => Some(l.clone()),
                _ => None,
            })
            .collect()
    }

    /// Warnings so far: index cache problems and samples skipped under `maxErrors` (CTF),
    /// examples skipped (Lens).
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        let mut d: Vec<Diagnostic> = self
            .lens_sources()
            .iter()
            .flat_map(|l| l.diagnostics().to_vec())
            .collect();
        d.extend(self.ctf_sources().iter().flat_map(|c| c.diagnostics()));
        d
    }
}

fn needs_layout<'a>(options: &'a OpenOptions, name: &str) -> Result<&'a LensLayout> {
    options.lens.as_ref().ok_or_else(|| {
        Error::config(
            "reading a Lens example file as sequences needs the network's layout: \
             inputGroups and targetGroups (NAME:SIZE,... in network order)",
        )
        .in_file(name.to_string())
    })
}

/// What [`DataSet::summary`] found: the summary of what was read, and the outcome (the
/// summary again when the whole input was read, or the error that stopped it).
#[derive(Debug)]
pub struct SummaryOutcome {
    /// The whole summary, or the fatal error.
    pub result: Result<Summary>,
    /// What was read (up to the error, if any).
    pub summary: Summary,
}

/// The counts of a file, for `exfeed check` and `exfeed info`.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The file's name.
    pub name: String,
    /// Its format.
    pub format: FileFormat,
    /// Sequences read (a Lens file's examples).
    pub sequences: u64,
    /// The longest sequence: its length in samples (a Lens example's events) and key (the
    /// first one of that length).
    pub longest: Option<(usize, u64)>,
    /// Per stream (none for a Lens file read without a layout).
    pub streams: Vec<StreamSummary>,
    /// A Lens file read without a layout: its examples, events, groups and value ranges.
    pub lens: Option<Info>,
    /// The summary of a corpus: keys are corpus keys (`shard << 40 | key`).
    pub corpus: bool,
}

/// The counts of one stream.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamSummary {
    /// The stream (as exposed: a CBF stream under its alias).
    pub spec: StreamSpec,
    /// The element type stored in the file (CBF), `None` for text.
    pub stored: Option<Precision>,
    /// Samples.
    pub samples: u64,
    /// Non-zero entries (sparse streams; 0 for dense ones).
    pub non_zeros: u64,
}

impl Summary {
    /// Adds the sequences of `batch` (whose streams are the summary's).
    pub fn add<T: Element>(&mut self, batch: &SequenceBatch<T>) {
        self.sequences += batch.len() as u64;
        for (sum, s) in self.streams.iter_mut().zip(batch.streams()) {
            sum.samples += s.num_samples() as u64;
            if s.storage() == Storage::Sparse {
                sum.non_zeros += s.values().len() as u64;
            }
        }
        for q in 0..batch.len() {
            let len = batch.sequence_length(q, None);
            if self.longest.is_none_or(|(l, _)| len > l) {
                self.longest = Some((len, batch.keys()[q]));
            }
        }
    }
}

/// Batches of whole sequences from a [`DataSet`], in file order ([`DataSet::sequences`]).
pub struct Sequences<T: Element> {
    name: String,
    streams: Vec<StreamSpec>,
    inner: Inner<T>,
    /// An error met after some sequences of the batch were complete: returned next time.
    pending: Option<Error>,
    _t: std::marker::PhantomData<T>,
}

enum Inner<T: Element> {
    Ctf {
        stream: Box<CtfStream>,
        reader: Box<dyn BufRead + Send>,
        done: bool,
    },
    Cbf {
        file: Box<CbfFile<InputBytes>>,
        next: usize,
    },
    Lens {
        examples: Box<PipeReader>,
        materializer: Materializer,
        nan: Option<f32>,
        next_key: u64,
    },
    Corpus(Box<corpus::CorpusSequences<T>>),
    #[cfg(feature = "arrow")]
    Columnar(Box<crate::arrow::ArrowSequences>),
}

/// Lens examples per batch.
const LENS_BATCH: usize = 64;

impl<T: Element> Sequences<T> {
    /// The streams of every batch, in order.
    pub fn streams(&self) -> &[StreamSpec] {
        &self.streams
    }

    /// Fills `batch` (cleared first; its streams are [`Sequences::streams`]) with the next
    /// sequences: at least one, unless the input has ended (`false`). After an error the
    /// sequences complete before it are delivered first, then the error.
    pub fn next_batch(
        &mut self,
        batch: &mut SequenceBatch<T>,
        sink: &mut dyn DiagnosticSink,
    ) -> Result<bool> {
        batch.clear();
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        let result = self.fill(batch, sink);
        match result {
            Err(e) if !batch.is_empty() => {
                self.pending = Some(e);
                Ok(true)
            }
            other => other,
        }
    }

    fn fill(
        &mut self,
        batch: &mut SequenceBatch<T>,
        sink: &mut dyn DiagnosticSink,
    ) -> Result<bool> {
        let name = &self.name;
        match &mut self.inner {
            Inner::Corpus(corpus) => corpus.fill(batch, sink),
            #[cfg(feature = "arrow")]
            Inner::Columnar(file) => file.next_batch(batch),
            Inner::Cbf { file, next } => {
                if *next >= file.num_chunks() {
                    return Ok(false);
                }
                file.read_chunk(*next, batch)
                    .map_err(|e| e.in_file(name.clone()))?;
                *next += 1;
                Ok(true)
            }
            Inner::Ctf {
                stream,
                reader,
                done,
            } => {
                while !*done && batch.is_empty() {
                    *done = !stream.feed_from(reader, batch, sink)?;
                }
                Ok(!batch.is_empty())
            }
            Inner::Lens {
                examples,
                materializer,
                nan,
                next_key,
            } => {
                while batch.len() < LENS_BATCH {
                    let Some(ex) = examples.next_example()? else {
                        break;
                    };
                    // NaN has no CTF/CBF form: without a value for it, it is an error.
                    materializer
                        .push_example_as(&ex, *next_key, *nan, false, batch, sink)
                        .map_err(|e| e.in_file(name.clone()))?;
                    examples.recycle(ex);
                    *next_key += 1;
                }
                Ok(!batch.is_empty())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Ignore;
    use std::path::Path;

    /// Keys and every stream's values, batch after batch.
    type Read = (Vec<u64>, Vec<Vec<f32>>);

    fn add(read: &mut Read, batch: &SequenceBatch<f32>) {
        read.0.extend_from_slice(batch.keys());
        read.1.resize(batch.streams().len(), Vec::new());
        for (values, s) in read.1.iter_mut().zip(batch.streams()) {
            values.extend_from_slice(s.values());
        }
    }

    fn through_sequences(path: &Path, options: &OpenOptions) -> Read {
        let mut seqs = open(path, options).unwrap().sequences::<f32>().unwrap();
        let mut batch = SequenceBatch::new(seqs.streams());
        let mut read = Read::default();
        while seqs.next_batch(&mut batch, &mut Ignore).unwrap() {
            add(&mut read, &batch);
        }
        read
    }

    fn through_chunk_source(path: &Path, options: &OpenOptions) -> Read {
        let source = open(path, options)
            .unwrap()
            .into_chunk_source::<f32>()
            .unwrap();
        let mut batch = SequenceBatch::new(source.streams());
        let mut read = Read::default();
        assert!(!source.chunks().is_empty());
        for i in 0..source.chunks().len() {
            batch.clear();
            source.read_chunk(i, &mut batch).unwrap();
            add(&mut read, &batch);
        }
        read
    }

    #[test]
    fn into_chunk_source_reads_what_sequences_read_in_every_format() {
        let dir = tempfile::tempdir().unwrap();
        let ctf = dir.path().join("d.ctf");
        let text: String = (0..300)
            .map(|k| format!("{k} |x {k} 0.5 |y {}:1\n{k} |x -1 {k}\n", k % 3))
            .collect();
        std::fs::write(&ctf, &text).unwrap();
        let options = OpenOptions {
            inputs: vec!["x:dense:2".parse().unwrap(), "y:sparse:3".parse().unwrap()],
            ..OpenOptions::default()
        };
        let want = through_sequences(&ctf, &options);
        assert_eq!(want.0, (0..300).collect::<Vec<u64>>());
        assert_eq!(through_chunk_source(&ctf, &options), want);

        let cbf = dir.path().join("d.cbf");
        let small_chunks = crate::convert::ConvertOptions {
            chunk_size: 1000,
            ..Default::default()
        };
        let data = open(&ctf, &options).unwrap();
        crate::convert::convert(data, &cbf, &small_chunks, &mut Ignore).unwrap();
        let all = OpenOptions::default();
        assert!(open(&cbf, &all).unwrap().cbf().unwrap().num_chunks() > 1);
        assert_eq!(through_chunk_source(&cbf, &all), want);
        // Compressed: the source reads the temporary file the opening decompressed it into.
        let gz = dir.path().join("d.cbf.gz");
        let data = open(&ctf, &options).unwrap();
        crate::convert::convert(data, &gz, &small_chunks, &mut Ignore).unwrap();
        assert_eq!(through_chunk_source(&gz, &all), want);

        let ex = dir.path().join("d.ex");
        std::fs::write(
            &ex,
            "name: a I: 1 0 T: 0 1;\nname: b 2 I: 0 1 T: 1 0 I: 1 1 T: 0 0;\n",
        )
        .unwrap();
        let layout = OpenOptions {
            lens: Some(LensLayout {
                input_groups: Layout::parse("in:2").unwrap(),
                target_groups: Layout::parse("out:2").unwrap(),
                nan: None,
                frequencies: false,
            }),
            ..OpenOptions::default()
        };
        let lens = through_chunk_source(&ex, &layout);
        assert_eq!(lens, through_sequences(&ex, &layout));
        assert_eq!(lens.0, [0, 1]);
        assert_eq!(lens.1[0], [1.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
        let err = open(&ex, &all)
            .unwrap()
            .into_chunk_source::<f32>()
            .err()
            .unwrap();
        assert!(
            err.to_string().contains("needs the network's layout"),
            "{err}"
        );

        // An input that cannot seek is read once, into memory, from its first byte.
        #[cfg(unix)]
        {
            let fifo = dir.path().join("fifo.ctf");
            let made = std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap();
            assert!(made.success());
            let (path, bytes) = (fifo.clone(), text.clone());
            let writer = std::thread::spawn(move || std::fs::write(path, bytes).unwrap());
            assert_eq!(through_chunk_source(&fifo, &options), want);
            writer.join().unwrap();
        }
    }
}
