//! The arguments of a reader as `exfeed read` and `exfeed.Reader` take them: data files, and
//! options on top of (or instead of) a configuration file; [`ReaderArgs::configure`] turns them
//! into the [`ReaderConfig`] and the inputs [`AnyReader`](super::AnyReader) opens.

use crate::config::{DeserializerConfig, ReaderConfig};
use crate::element::Precision;
use crate::error::{ArgError, ReaderArg, Result};
use crate::format::FileFormat;
use crate::io::InputPath;
use crate::lens::materialize::Layout;
use crate::lens::select::SelectionMode;
use crate::limits::Limits;
use crate::options::ReadOptions;
use crate::reader::Randomizer;
use crate::source::{Corpus, DataPath};
use crate::stream::StreamSpec;
use crate::{DataSet, LensLayout, OpenOptions};
use std::path::{Path, PathBuf};

/// A reader's data files and the options given with them; `None`, empty or false when not
/// given, so that a configuration's value stands: what `exfeed read` and `exfeed.Reader` take.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReaderArgs {
    /// The data files: one per deserializer of the configuration (matched by file name when
    /// every name matches a different one, else in order), or without a configuration one
    /// deserializer each (CBF and Lens files, or one CTF file).
    pub files: Vec<PathBuf>,
    /// A corpus instead of files, read as one data set of shards (see
    /// [`CorpusSource`](crate::source::CorpusSource)); with a configuration, in place of its (one)
    /// deserializer's file.
    pub corpus: Option<Corpus>,
    /// Of a mix (a corpus that is a [`Corpus::Mix`], given or the configuration's): the
    /// samples of a sweep (`mixEpochSamples`).
    pub mix_epoch_samples: Option<u64>,
    /// The inputs of a CTF file, or the streams of a CBF file to read (without a configuration).
    pub inputs: Vec<StreamSpec>,
    /// The element type of the values (`precision`).
    pub precision: Option<Precision>,
    /// `skipSequenceIds`.
    pub skip_sequence_ids: bool,
    /// `maxErrors`, for every deserializer.
    pub max_errors: Option<u64>,
    /// `traceLevel`.
    pub trace_level: Option<u8>,
    /// `randomize`.
    pub randomize: Option<bool>,
    /// `randomizationSeed`.
    pub seed: Option<u64>,
    /// `randomizationWindow` in chunks.
    pub window_chunks: Option<u64>,
    /// `randomizationWindow` in samples (`sampleBasedRandomizationWindow`).
    pub window_samples: Option<u64>,
    /// `randomizationWindowInBytes`: a window of at most this many bytes of the file.
    pub window_bytes: Option<u64>,
    /// How every deserializer's data is read (`chunkSizeInBytes`, `keepDataInMemory`,
    /// `cacheIndex`, `index`, `frameMode`, and how URL data files reach their store): what is
    /// set here goes over the configuration.
    pub read: ReadOptions,
    /// `randomizer`: exfeed's order or CNTK's (see [`Randomizer`]).
    pub randomizer: Option<Randomizer>,
    /// Lens files: the network's input groups (`inputGroups`).
    pub input_groups: Option<Layout>,
    /// Lens files: the network's target groups (`targetGroups`).
    pub target_groups: Option<Layout>,
    /// Lens files: the value NaN becomes (`nanValue`).
    pub nan: Option<f32>,
    /// Lens files: Lens's example selection (`lensMode`).
    pub lens_mode: Option<SelectionMode>,
    /// The most bytes one record may take (`maxRecordSizeInBytes`, see [`Limits`]).
    pub max_record_size: Option<u64>,
}

impl ReaderArgs {
    /// The reader's configuration: `config` with its files replaced by [`ReaderArgs::files`],
    /// or without one a deserializer per file (its format recognised by [`crate::open`]); these
    /// arguments on top. Also the inputs to read, one per deserializer, each file opened once:
    /// a pipe, a FIFO or standard input is read into memory (see
    /// [`DataSet::into_input`](crate::DataSet::into_input)), as it cannot be read twice.
    ///
    /// A bad argument is an [`ArgError`] (see [`Error::arg_error`](crate::Error::arg_error)):
    /// its message names the arguments by their configuration keys, and a front end renders it
    /// with its own spelling of them.
    ///
    /// ```
    /// use exfeed::configured::{AnyReader, ReaderArgs, RunOptions};
    ///
    /// let path = std::env::temp_dir().join(format!("exfeed-args-doc-{}.ctf", std::process::id()));
    /// std::fs::write(&path, "0 |x 1 2\n1 |x 3 4\n2 |x 5 6\n")?;
    /// let args = ReaderArgs {
    ///     files: vec![path.clone()],
    ///     inputs: vec!["x:dense:2".parse()?],
    ///     randomize: Some(false),
    ///     ..ReaderArgs::default()
    /// };
    /// let (cfg, inputs) = args.configure(None)?;
    /// assert!(!cfg.randomize);
    /// let run = RunOptions { inputs, ..RunOptions::default() };
    /// let mut reader = AnyReader::open(&cfg, &run)?;
    /// let mut mb = reader.new_minibatch();
    /// assert!(reader.next_minibatch(10, &mut mb)?);
    /// assert_eq!(mb.len(), 3);
    /// // Without inputs a CTF file cannot be read: the error names the argument to give.
    /// let err = ReaderArgs { inputs: vec![], ..args }.configure(None).unwrap_err();
    /// assert_eq!(err.arg_error().unwrap().arg(), exfeed::error::ReaderArg::Inputs);
    /// assert!(err.to_string().ends_with("(CTF): give input, or a configuration"));
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn configure(
        &self,
        config: Option<ReaderConfig>,
    ) -> Result<(ReaderConfig, Vec<InputPath>)> {
        self.check_max_record_size()?;
        let limits = self.limits(config.as_ref());
        if self.corpus.is_some() && !self.files.is_empty() {
            return Err(ArgError::about(ReaderArg::Corpus)
                .say("give ")
                .name(ReaderArg::Files)
                .say(" or ")
                .name(ReaderArg::Corpus)
                .say(", not both")
                .into());
        }
        let (mut cfg, inputs) = match config {
            Some(mut cfg) => {
                self.place_files(&mut cfg)?;
                let mut inputs = Vec::new();
                for d in &cfg.deserializers {
                    if d.corpus.is_some() {
                        // Each file of the corpus is opened when the source is.
                        inputs.push(InputPath::new(&d.file));
                        continue;
                    }
                    // Lens text or binary: the Lens source tells them apart by content.
                    let format = Some(d.format).filter(|f| !f.is_lens());
                    inputs.push(self.open_once(&d.file, format, &d.inputs, limits)?.1);
                }
                (cfg, inputs)
            }
            None => self.config_from_files(limits)?,
        };
        cfg.limits = limits;
        self.apply_mix_epoch_samples(&mut cfg)?;
        if let Some(p) = self.precision {
            cfg.precision = p;
        }
        cfg.skip_sequence_ids |= self.skip_sequence_ids;
        if let Some(m) = self.max_errors {
            cfg.max_errors = m;
            for d in &mut cfg.deserializers {
                d.max_errors = None;
            }
        }
        if let Some(t) = self.trace_level {
            cfg.trace_level = t;
        }
        if let Some(r) = self.randomize {
            cfg.randomize = r;
        }
        if let Some(s) = self.seed {
            cfg.randomization_seed = s;
        }
        if let Some(r) = self.randomizer {
            cfg.randomizer = r;
        }
        self.apply_window(&mut cfg)?;
        if self.read.chunk_bytes() == 0 {
            return Err(ArgError::must(ReaderArg::ChunkSize, "be at least 1 byte").into());
        }
        for d in &mut cfg.deserializers {
            d.read = self.read.over(&d.read);
        }
        self.apply_lens(&mut cfg)?;
        Ok((cfg, inputs))
    }

    /// The window given, in one of its units, in place of the configuration's (whichever
    /// unit that one has). A window of 0 is refused as the configuration's is.
    fn apply_window(&self, cfg: &mut ReaderConfig) -> Result<()> {
        let given = [
            (ReaderArg::WindowChunks, self.window_chunks),
            (ReaderArg::WindowSamples, self.window_samples),
            (ReaderArg::WindowBytes, self.window_bytes),
        ];
        let mut set = given
            .iter()
            .filter(|(_, w)| w.is_some())
            .map(|(arg, _)| *arg);
        let Some(arg) = set.next() else {
            return Ok(());
        };
        if let Some(other) = set.next() {
            return Err(ArgError::about(other)
                .say("give ")
                .name(arg)
                .say(" or ")
                .name(other)
                .say(", not both")
                .into());
        }
        cfg.randomization_window = self.window_chunks.or(self.window_samples);
        cfg.sample_based_randomization_window = self.window_samples.is_some();
        cfg.randomization_window_bytes = self.window_bytes;
        Ok(())
    }

    /// How to open `file` alone with [`crate::open`] (to check, dump or convert it): these
    /// arguments on top of what the configuration's deserializer for it says (see
    /// [`ReaderConfig::deserializer_for`]): inputs, `skipSequenceIds`, `maxErrors`, and a Lens
    /// layout (`inputGroups`, `targetGroups`, `nanValue`). The format is left to detection.
    pub fn open_options(&self, config: Option<&ReaderConfig>, file: &Path) -> OpenOptions {
        let d = config.and_then(|c| Some((c, c.deserializer_for(file)?)));
        let mut options = OpenOptions {
            inputs: self.inputs.clone(),
            skip_sequence_ids: self.skip_sequence_ids,
            max_errors: self.max_errors.unwrap_or(0),
            limits: self.limits(config),
            read: self.read.clone(),
            ..OpenOptions::default()
        };
        if let Some((cfg, d)) = d {
            if options.inputs.is_empty() {
                options.inputs = d.inputs.clone();
            }
            options.skip_sequence_ids |= d.effective_skip_sequence_ids(cfg);
            options.max_errors = self
                .max_errors
                .unwrap_or_else(|| d.effective_max_errors(cfg));
        }
        let d = d.map(|(_, d)| d);
        let input_groups = self
            .input_groups
            .clone()
            .or_else(|| d.and_then(|d| d.input_groups.clone()));
        let target_groups = self
            .target_groups
            .clone()
            .or_else(|| d.and_then(|d| d.target_groups.clone()));
        if let (Some(input_groups), Some(target_groups)) = (input_groups, target_groups) {
            options.lens = Some(LensLayout {
                input_groups,
                target_groups,
                nan: self.nan.or_else(|| d.and_then(|d| d.nan)),
                frequencies: false,
            });
        }
        options
    }

    /// Opens `data` alone, to check, dump, describe or convert it: a file with
    /// [`crate::open`], a corpus with [`crate::open_corpus`] (every file of it), as
    /// [`ReaderArgs::open_options`] says for it (a corpus is read as the configuration's
    /// deserializer of it, else its first); `format` overrides detection (for every file of a
    /// corpus).
    pub fn open(
        &self,
        config: Option<&ReaderConfig>,
        data: &DataPath,
        format: Option<FileFormat>,
    ) -> Result<DataSet> {
        self.check_max_record_size()?;
        let mut options = self.open_options(config, Path::new(&data.to_string()));
        options.format = format;
        match data {
            DataPath::File(file) => crate::open(file, &options),
            DataPath::Corpus(corpus) => crate::open_corpus(corpus, &options),
        }
    }

    /// [`ReaderArgs::mix_epoch_samples`] onto the configuration's mix.
    fn apply_mix_epoch_samples(&self, cfg: &mut ReaderConfig) -> Result<()> {
        let Some(samples) = self.mix_epoch_samples else {
            return Ok(());
        };
        let arg = ReaderArg::MixEpochSamples;
        if samples == 0 {
            return Err(ArgError::must(arg, "be at least 1 sample").into());
        }
        let mixes = cfg
            .deserializers
            .iter_mut()
            .filter_map(|d| match &mut d.corpus {
                Some(Corpus::Mix(mix)) => Some(mix),
                _ => None,
            });
        let mut any = false;
        for mix in mixes {
            mix.epoch_samples = Some(samples);
            any = true;
        }
        if !any {
            return Err(ArgError::about(arg)
                .name(arg)
                .say(" applies to a mix of data sets, and none is read")
                .into());
        }
        Ok(())
    }

    fn check_max_record_size(&self) -> Result<()> {
        if self.max_record_size == Some(0) {
            return Err(ArgError::must(ReaderArg::MaxRecordSize, "be at least 1 byte").into());
        }
        Ok(())
    }

    /// The record limits: [`ReaderArgs::max_record_size`], else the configuration's, else the
    /// default.
    fn limits(&self, config: Option<&ReaderConfig>) -> Limits {
        match self.max_record_size {
            Some(max_record_bytes) => Limits { max_record_bytes },
            None => config.map(|c| c.limits).unwrap_or_default(),
        }
    }

    /// The element type to read `data` as: [`ReaderArgs::precision`], else the
    /// configuration's, else the type a CBF file stores, else float.
    pub fn precision_for(&self, config: Option<&ReaderConfig>, data: &DataSet) -> Precision {
        self.precision
            .or(config.map(|c| c.precision))
            .or(data.stored_precision())
            .unwrap_or_default()
    }

    fn place_files(&self, cfg: &mut ReaderConfig) -> Result<()> {
        let n = cfg.deserializers.len();
        if let Some(corpus) = &self.corpus {
            let [d] = &mut cfg.deserializers[..] else {
                return Err(ArgError::about(ReaderArg::Corpus)
                    .say(format!(
                        "a corpus replaces the file of a configuration with one deserializer; \
                         this one has {n}"
                    ))
                    .into());
            };
            d.file = PathBuf::from(corpus.to_string());
            d.corpus = Some(corpus.clone());
            return Ok(());
        }
        if self.files.len() != n {
            return Err(ArgError::about(ReaderArg::Files)
                .say(format!(
                    "the configuration has {n} deserializer(s) but {} file(s) were given",
                    self.files.len()
                ))
                .into());
        }
        // By file name when every name matches a different deserializer, else in order.
        let by_name: Option<Vec<usize>> = self
            .files
            .iter()
            .map(|f| {
                cfg.deserializers
                    .iter()
                    .position(|d| d.file.file_name() == f.file_name())
            })
            .collect();
        let order = by_name
            .filter(|v| {
                let mut u = v.clone();
                u.sort_unstable();
                u.dedup();
                u.len() == v.len()
            })
            .unwrap_or_else(|| (0..n).collect());
        for (f, &d) in self.files.iter().zip(&order) {
            cfg.deserializers[d].file = f.clone();
        }
        Ok(())
    }

    fn config_from_files(&self, limits: Limits) -> Result<(ReaderConfig, Vec<InputPath>)> {
        let mut cfg = ReaderConfig::default();
        let (mut formats, mut inputs) = (Vec::new(), Vec::new());
        let corpus = match &self.corpus {
            // The first file's format stands for the corpus (each file's is recognised when
            // the corpus is opened).
            Some(corpus) => {
                let first = &corpus.expand_with(self.read.storage_options())?[0];
                formats.push(self.open_once(first, None, &self.inputs, limits)?.0);
                let name = PathBuf::from(corpus.to_string());
                inputs.push(InputPath::new(&name));
                vec![name]
            }
            None => Vec::new(),
        };
        for f in &self.files {
            let (format, input) = self.open_once(f, None, &self.inputs, limits)?;
            formats.push(format);
            inputs.push(input);
        }
        let ctf_files = formats.iter().filter(|&&f| f == FileFormat::Ctf).count();
        if ctf_files > 1 {
            return Err(ArgError::about(ReaderArg::Files)
                .say("several CTF files need a ")
                .name(ReaderArg::Config)
                .say(" saying each one's inputs")
                .into());
        }
        for (f, format) in corpus.iter().chain(&self.files).zip(formats) {
            let (kind, streams) = match format {
                // A Lens file's streams are 'input' and 'target', from the layout.
                FileFormat::LensText | FileFormat::LensBinary => (FileFormat::LensText, Vec::new()),
                // The others describe their streams; inputs select and rename them.
                FileFormat::Cbf | FileFormat::Parquet | FileFormat::ArrowIpc => {
                    (format, self.inputs.clone())
                }
                FileFormat::Ctf if self.inputs.is_empty() => {
                    return Err(ArgError::about(ReaderArg::Inputs)
                        .say(format!("no inputs for {} (CTF): give ", f.display()))
                        .name(ReaderArg::Inputs)
                        .say(", or a ")
                        .name(ReaderArg::Config)
                        .into());
                }
                FileFormat::Ctf => (FileFormat::Ctf, self.inputs.clone()),
            };
            let mut d = DeserializerConfig::new(kind, f, streams);
            d.corpus = self.corpus.clone();
            cfg.deserializers.push(d);
        }
        // CNTK's default: a sample-counted window for binary-only readers.
        cfg.sample_based_randomization_window = ctf_files == 0;
        Ok((cfg, inputs))
    }

    /// The layout and NaN value for every Lens deserializer, and the selection mode.
    fn apply_lens(&self, cfg: &mut ReaderConfig) -> Result<()> {
        let has_lens = cfg.deserializers.iter().any(|d| d.format.is_lens());
        let lens_arg = [
            (ReaderArg::InputGroups, self.input_groups.is_some()),
            (ReaderArg::TargetGroups, self.target_groups.is_some()),
            (ReaderArg::Nan, self.nan.is_some()),
            (ReaderArg::LensMode, self.lens_mode.is_some()),
        ]
        .into_iter()
        .find_map(|(arg, given)| given.then_some(arg));
        if let (false, Some(arg)) = (has_lens, lens_arg) {
            let what = " applies to Lens example files (.ex, .bex), and none is read";
            return Err(ArgError::about(arg).name(arg).say(what).into());
        }
        for d in cfg.deserializers.iter_mut().filter(|d| d.format.is_lens()) {
            d.input_groups = self.input_groups.clone().or(d.input_groups.take());
            d.target_groups = self.target_groups.clone().or(d.target_groups.take());
            d.nan = self.nan.or(d.nan);
            if d.input_groups.is_none() || d.target_groups.is_none() {
                return Err(ArgError::about(ReaderArg::InputGroups)
                    .say(format!(
                        "reading the Lens example file {} needs the network's layout: ",
                        d.file.display()
                    ))
                    .name(ReaderArg::InputGroups)
                    .say(" and ")
                    .name(ReaderArg::TargetGroups)
                    .say(" (NAME:SIZE,... in network order)")
                    .into());
            }
        }
        let orders = self.randomize == Some(false)
            || self.window_chunks.is_some()
            || self.window_samples.is_some()
            || self.window_bytes.is_some();
        let mode = ReaderArg::LensMode;
        // `{randomize} and {windows} cannot be combined with it`.
        let order_args = |e: ArgError| {
            e.name(ReaderArg::Randomize)
                .say(" and ")
                .name(ReaderArg::WindowChunks)
                .say("/")
                .name(ReaderArg::WindowSamples)
                .say("/")
                .name(ReaderArg::WindowBytes)
                .say(" cannot be combined with it")
        };
        if self.lens_mode.is_some() && orders {
            let decides = ArgError::about(mode)
                .name(mode)
                .say(" decides the example order: ");
            return Err(order_args(decides).into());
        }
        if self.lens_mode.is_none() && cfg.lens_mode.is_some() && orders {
            let decides = ArgError::about(mode)
                .say("the configuration's lensMode decides the example order; ");
            return Err(order_args(decides)
                .say(" (give ")
                .name(mode)
                .say(" to override it)")
                .into());
        }
        if let Some(mode) = self.lens_mode {
            cfg.lens_mode = Some(mode);
        }
        Ok(())
    }
}

impl ReaderArgs {
    /// Opens `file` once (its format recognised, or `format` when known; `inputs` select and
    /// name the streams of a file that describes its own) and gives what the reader reads: the
    /// file itself, or its content in memory when it cannot be read twice.
    fn open_once(
        &self,
        file: &Path,
        format: Option<FileFormat>,
        inputs: &[StreamSpec],
        limits: Limits,
    ) -> Result<(FileFormat, InputPath)> {
        let options = OpenOptions {
            format,
            inputs: inputs.to_vec(),
            limits,
            read: self.read.clone(),
            ..OpenOptions::default()
        };
        let data = crate::open(file, &options)?;
        Ok((data.format(), data.into_input()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> ReaderConfig {
        ReaderConfig::from_cntk_str(text, "t.cntk", None).unwrap()
    }

    #[test]
    fn open_options_take_the_configuration_under_the_arguments() {
        let cfg = config(
            "reader = [ deserializers = (
               [ type = LensDeserializer; file = \"a.ex\"; inputGroups = \"in:2\";
                 targetGroups = \"out:1\"; nanValue = 0 ]
             : [ type = CNTKTextFormatDeserializer; file = \"b.ctf\"; maxErrors = 3;
                 input = [ x = [ dim = 2; format = dense ] ] ] ) ]",
        );
        let none = ReaderArgs::default();
        let ctf = none.open_options(Some(&cfg), Path::new("/data/b.ctf"));
        assert_eq!((ctf.inputs.len(), ctf.max_errors, ctf.lens), (1, 3, None));
        let given = ReaderArgs {
            max_errors: Some(0),
            target_groups: Some(Layout::parse("t:4").unwrap()),
            ..ReaderArgs::default()
        };
        assert_eq!(
            given
                .open_options(Some(&cfg), Path::new("b.ctf"))
                .max_errors,
            0
        );
        // Matched by name; the layout from the configuration, an argument winning.
        let lens = given
            .open_options(Some(&cfg), Path::new("elsewhere/a.ex"))
            .lens
            .unwrap();
        assert_eq!(lens.input_groups, Layout::parse("in:2").unwrap());
        assert_eq!(lens.target_groups, Layout::parse("t:4").unwrap());
        assert_eq!(lens.nan, Some(0.0));
        // Without a configuration, only the arguments; one half of a layout is none.
        assert_eq!(given.open_options(None, Path::new("a.ex")).lens, None);
    }

    #[test]
    fn a_bad_argument_is_reported_as_data() {
        let dir = tempfile::tempdir().unwrap();
        let ctf = dir.path().join("d.ctf");
        std::fs::write(&ctf, "0 |x 1 2\n").unwrap();
        let args = ReaderArgs {
            files: vec![ctf],
            inputs: vec!["x:dense:2".parse().unwrap()],
            nan: Some(0.0),
            ..ReaderArgs::default()
        };
        let err = args.configure(None).unwrap_err();
        let bad = err.arg_error().unwrap();
        assert_eq!(bad.arg(), ReaderArg::Nan);
        assert_eq!(
            err.to_string(),
            "nanValue applies to Lens example files (.ex, .bex), and none is read"
        );
        assert_eq!(
            bad.keyed_message(|_| "nan"),
            "nan: applies to Lens example files (.ex, .bex), and none is read"
        );
        let zero = ReaderArgs {
            nan: None,
            read: ReadOptions::new().with_chunk_size(crate::options::ChunkSize::Bytes(0)),
            ..args.clone()
        };
        let err = zero.configure(None).unwrap_err();
        assert_eq!(err.arg_error().unwrap().arg(), ReaderArg::ChunkSize);
        assert_eq!(err.to_string(), "chunkSizeInBytes must be at least 1 byte");
        let both = ReaderArgs {
            nan: None,
            window_chunks: Some(2),
            window_samples: Some(9),
            ..args
        };
        let err = both.configure(None).unwrap_err();
        let flag = |a: ReaderArg| match a {
            ReaderArg::WindowChunks => "--window-chunks",
            ReaderArg::WindowSamples => "--window-samples",
            other => other.config_key(),
        };
        let bad = err.arg_error().unwrap();
        assert_eq!(bad.arg(), ReaderArg::WindowSamples);
        assert_eq!(
            bad.message(flag),
            "give --window-chunks or --window-samples, not both"
        );
    }
}
