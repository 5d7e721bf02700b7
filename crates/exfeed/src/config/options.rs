//! The typed reader options: one plain struct per block, one field per parameter.

use std::path::{Path, PathBuf};

use crate::element::Precision;
use crate::format::FileFormat;
use crate::lens::materialize::Layout;
use crate::lens::select::SelectionMode;
use crate::limits::Limits;
use crate::options::ReadOptions;
use crate::stream::StreamSpec;

pub use crate::limits::DEFAULT_CHUNK_SIZE_BYTES;

/// The formats a configuration's deserializers can name, in the order messages list them. A
/// Lens deserializer reads both forms (the file's first bytes tell them apart):
/// [`FileFormat::LensText`] stands for both.
pub(crate) const DESERIALIZER_FORMATS: [FileFormat; 5] = [
    FileFormat::Ctf,
    FileFormat::Cbf,
    FileFormat::LensText,
    FileFormat::Parquet,
    FileFormat::ArrowIpc,
];

/// The `readerType` of the plain (non-composite) form that reads `format`, which is also the
/// `module` name: `CNTKTextFormatReader`, `CNTKBinaryReader`; exfeed's own `LensReader`,
/// `ParquetReader`, `ArrowReader`.
pub fn reader_type(format: FileFormat) -> &'static str {
    match format {
        FileFormat::Ctf => "CNTKTextFormatReader",
        FileFormat::Cbf => "CNTKBinaryReader",
        FileFormat::LensText | FileFormat::LensBinary => "LensReader",
        FileFormat::Parquet => "ParquetReader",
        FileFormat::ArrowIpc => "ArrowReader",
    }
}

/// The deserializer `type` of the composite form that reads `format`:
/// `CNTKTextFormatDeserializer`, `CNTKBinaryFormatDeserializer`; exfeed's own
/// `LensDeserializer`, `ParquetDeserializer`, `ArrowDeserializer`.
pub fn deserializer_type(format: FileFormat) -> &'static str {
    match format {
        FileFormat::Ctf => "CNTKTextFormatDeserializer",
        FileFormat::Cbf => "CNTKBinaryFormatDeserializer",
        FileFormat::LensText | FileFormat::LensBinary => "LensDeserializer",
        FileFormat::Parquet => "ParquetDeserializer",
        FileFormat::ArrowIpc => "ArrowDeserializer",
    }
}

/// Whether an input may leave out `dim` and `format`: every format but CTF describes its
/// streams itself (a header, a schema, the Lens layout).
pub fn inputs_described_by_file(format: FileFormat) -> bool {
    format != FileFormat::Ctf
}

/// One deserializer: a file, its format and the inputs read from it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DeserializerConfig {
    /// The file's format (for Lens [`FileFormat::LensText`] stands for either form: the file's
    /// first bytes tell them apart).
    pub format: FileFormat,
    /// The file as written in the configuration. CNTK opens it relative to the working
    /// directory; see [`DeserializerConfig::resolve_file`] to resolve it against another one.
    pub file: PathBuf,
    /// The inputs in configuration order. For CBF and Lens an input may carry only an alias (or
    /// nothing): then `dim` is 0 and `storage` is a placeholder, both to be taken from the file.
    /// An empty list for CBF and Lens means every stream in the file.
    pub inputs: Vec<StreamSpec>,
    /// `skipSequenceIds` set in this deserializer's block (overrides the reader's).
    pub skip_sequence_ids: Option<bool>,
    /// `maxErrors` set in this deserializer's block (overrides the reader's).
    pub max_errors: Option<u64>,
    /// `traceLevel` set in this deserializer's block (overrides the reader's).
    pub trace_level: Option<u8>,
    /// `chunkSizeInBytes`, `keepDataInMemory`, `frameMode`, `cacheIndex` and `index` set in
    /// this deserializer's block (over the reader's, see [`DeserializerConfig::effective_read`]).
    pub read: ReadOptions,
    /// Lens (exfeed): `inputGroups = "NAME:SIZE,..."`, the network's input groups in order.
    pub input_groups: Option<Layout>,
    /// Lens (exfeed): `targetGroups = "NAME:SIZE,..."`, the network's target groups in order.
    pub target_groups: Option<Layout>,
    /// Lens (exfeed): `nanValue`, the value NaN becomes (unset: NaN stays NaN).
    pub nan: Option<f32>,
    /// exfeed: `corpus = "data/train-*.ctf"` (a glob) or `corpus = "@list.txt"` (a list file):
    /// the deserializer reads one data set of many shard files (see
    /// [`CorpusSource`](crate::source::CorpusSource)); `file` is then this text, for messages.
    pub corpus: Option<crate::io::Corpus>,
}

impl DeserializerConfig {
    /// A deserializer of `format` for `file` with `inputs` and no per-deserializer overrides.
    pub fn new(format: FileFormat, file: impl Into<PathBuf>, inputs: Vec<StreamSpec>) -> Self {
        DeserializerConfig {
            format,
            file: file.into(),
            inputs,
            ..Default::default()
        }
    }

    /// The file resolved against `dir` (unchanged when it is absolute).
    pub fn resolve_file(&self, dir: &Path) -> PathBuf {
        crate::io::resolve_path(dir, &self.file)
    }

    /// The corpus resolved against `dir`: the glob, or the list file of `@list.txt`.
    pub fn resolve_corpus(&self, dir: &Path) -> Option<crate::io::Corpus> {
        Some(self.corpus.as_ref()?.resolve(dir))
    }

    /// `skipSequenceIds` in effect: this block's, else the reader's.
    pub fn effective_skip_sequence_ids(&self, reader: &ReaderConfig) -> bool {
        self.skip_sequence_ids.unwrap_or(reader.skip_sequence_ids)
    }

    /// `maxErrors` in effect: this block's, else the reader's.
    pub fn effective_max_errors(&self, reader: &ReaderConfig) -> u64 {
        self.max_errors.unwrap_or(reader.max_errors)
    }

    /// `traceLevel` in effect: this block's, else the reader's.
    pub fn effective_trace_level(&self, reader: &ReaderConfig) -> u8 {
        self.trace_level.unwrap_or(reader.trace_level)
    }

    /// How this deserializer's data is read: this block's options over the reader's.
    pub fn effective_read(&self, reader: &ReaderConfig) -> ReadOptions {
        self.read.over(&reader.read)
    }
}

/// Everything a `reader = [ ... ]` block says, one field per documented parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct ReaderConfig {
    /// `precision` (reader block, else its section, else the top level): float or double.
    pub precision: Precision,
    /// `randomize` (default true).
    pub randomize: bool,
    /// `randomizationSeed` (default 0); sweep `s` uses seed + s.
    pub randomization_seed: u64,
    /// `randomizationWindow`: in chunks, or in samples with `sampleBasedRandomizationWindow`.
    /// `None`: CNTK's default, see [`ReaderConfig::default_randomization_window`].
    pub randomization_window: Option<u64>,
    /// `sampleBasedRandomizationWindow`. Default, as in CNTK: false when a CTF deserializer is
    /// present, true otherwise (the binary reader's window counts samples).
    pub sample_based_randomization_window: bool,
    /// `randomizationWindowInBytes` (exfeed): a window of consecutive chunks of at most this
    /// many bytes of the file (at least one chunk), instead of `randomizationWindow`; giving
    /// both in one block is an error (see docs/config.md).
    pub randomization_window_bytes: Option<u64>,
    /// `skipSequenceIds` (default false).
    pub skip_sequence_ids: bool,
    /// `traceLevel` (default 1): 0 errors, 1 warnings too, 2 everything. `verbosity` sets it too.
    pub trace_level: u8,
    /// `maxErrors` (default 0: the first error is fatal).
    pub max_errors: u64,
    /// `chunkSizeInBytes` (default 32 MiB), `keepDataInMemory`, `frameMode`, `cacheIndex`
    /// (default false) and `index` (exfeed; `auto`, `full` or `none`, default `auto`: whether a
    /// CTF file is indexed before reading or read in byte ranges without an index, see
    /// [`IndexMode`](crate::options::IndexMode)), for every deserializer.
    pub read: ReadOptions,
    /// `lensMode` (exfeed): Lens's example selection (ORDERED, PERMUTED, RANDOMIZED,
    /// PROBABILISTIC) instead of `randomize` and the window; see
    /// [`SelectionMode::apply_to`](crate::lens::select::SelectionMode::apply_to).
    pub lens_mode: Option<SelectionMode>,
    /// `maxRecordSizeInBytes` (exfeed; default 64 MiB): the most bytes one record (a CTF
    /// sequence) may take, also in an input held whole in memory (see [`Limits`]).
    pub limits: Limits,
    /// `randomizer` (exfeed; `exfeed` or `cntk`, default `exfeed`): whose order of sequences
    /// (see [`Randomizer`](crate::options::Randomizer)).
    pub randomizer: crate::options::Randomizer,
    /// `equalize` (exfeed, default false): distributed workers deliver the same number of
    /// minibatches per sweep (see [`ReaderOptions::equalize`](crate::reader::ReaderOptions::equalize)).
    pub equalize: bool,
    /// `equalizeMode` (exfeed; `repeat` or `spread`, default `repeat`): how equalized workers
    /// come to the same number of minibatches (see
    /// [`EqualizeMode`](crate::options::EqualizeMode)).
    pub equalize_mode: crate::options::EqualizeMode,
    /// The deserializers: one for the plain form, one per array element for `deserializers`.
    pub deserializers: Vec<DeserializerConfig>,
}

impl Default for ReaderConfig {
    fn default() -> Self {
        ReaderConfig {
            precision: Precision::Float,
            randomize: true,
            randomization_seed: 0,
            randomization_window: None,
            sample_based_randomization_window: false,
            randomization_window_bytes: None,
            skip_sequence_ids: false,
            trace_level: 1,
            max_errors: 0,
            read: ReadOptions::default(),
            lens_mode: None,
            limits: Limits::default(),
            equalize: false,
            equalize_mode: Default::default(),
            randomizer: crate::options::Randomizer::Exfeed,
            deserializers: Vec::new(),
        }
    }
}

impl ReaderConfig {
    /// The window CNTK uses when `randomizationWindow` is not set: with a CTF deserializer and a
    /// window counted in chunks, 4 GiB worth of chunks (`4 GiB / chunkSizeInBytes`, at least 1);
    /// otherwise `None`, the whole data set.
    pub fn default_randomization_window(&self) -> Option<u64> {
        let has_ctf = self
            .deserializers
            .iter()
            .any(|d| d.format == FileFormat::Ctf);
        if self.sample_based_randomization_window || !has_ctf {
            None
        } else {
            Some(((4u64 << 30) / self.read.chunk_bytes().max(1)).max(1))
        }
    }

    /// The deserializer that reads `file`: the one whose file has `file`'s name, else the
    /// first.
    pub fn deserializer_for(&self, file: &Path) -> Option<&DeserializerConfig> {
        self.deserializers
            .iter()
            .find(|d| d.file.file_name().is_some() && d.file.file_name() == file.file_name())
            .or(self.deserializers.first())
    }

    /// What each deserializer reads: its corpus, else its file.
    pub fn data_paths(&self) -> Vec<crate::io::DataPath> {
        use crate::io::DataPath;
        self.deserializers
            .iter()
            .map(|d| match &d.corpus {
                Some(c) => DataPath::Corpus(c.clone()),
                None => DataPath::File(d.file.clone()),
            })
            .collect()
    }

    /// Resolves every deserializer's file against `dir` (see [`DeserializerConfig::resolve_file`]).
    pub fn resolve_files(&mut self, dir: &Path) {
        for d in &mut self.deserializers {
            d.file = d.resolve_file(dir);
            d.corpus = d.resolve_corpus(dir);
        }
    }
}
