//! Building a reader from a [`ReaderConfig`]: one source per deserializer, joined by key
//! ([`JoinedSource`]) when there are several, and the [`ReaderOptions`] the config's
//! parameters say.

use crate::config::{DeserializerConfig, DeserializerKind, ReaderConfig};
use crate::ctf::CtfOptions;
use crate::element::Element;
use crate::error::{Diagnostic, Error, Location, Result, Severity};
use crate::format::FileFormat;
use crate::io::InputPath;
use crate::options::ReadOptions;
use crate::reader::{ChunkSource, EpochLimit, Randomizer, Reader, ReaderOptions, Window};
use crate::source::{
    CbfSource, CorpusSource, CtfSource, CtfSourceOptions, IndexMode, JoinedSource, LensSource,
    LensSourceOptions,
};
use std::path::PathBuf;
use std::sync::Arc;

/// The data set a [`ReaderConfig`] describes, opened and indexed.
pub struct ConfiguredSource<T: Element> {
    /// What the reader reads from.
    pub source: Arc<dyn ChunkSource<T>>,
    ctf: Vec<Arc<CtfSource>>,
    lens: Vec<Arc<LensSource>>,
    joined: Option<Arc<JoinedSource<T>>>,
    /// Parameters given that do not apply to the files read, aliases that name no stream.
    unused: Vec<Diagnostic>,
}

impl<T: Element> ConfiguredSource<T> {
    /// Warnings so far: parameters that do not apply to a file, CBF aliases that name no
    /// stream of the file, index cache problems, samples skipped under `maxErrors`, keys
    /// missing from one of several joined deserializers.
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        let mut d = self.unused.clone();
        d.extend(
            self.lens
                .iter()
                .flat_map(|l| l.diagnostics().iter().cloned()),
        );
        d.extend(self.ctf.iter().flat_map(|c| c.diagnostics()));
        if let Some(j) = &self.joined {
            d.extend_from_slice(j.diagnostics());
        }
        d
    }

    /// The CTF sources among the deserializers (to see where their index came from).
    pub fn ctf_sources(&self) -> &[Arc<CtfSource>] {
        &self.ctf
    }

    /// The Lens sources among the deserializers.
    pub fn lens_sources(&self) -> &[Arc<LensSource>] {
        &self.lens
    }
}

/// Opens every deserializer of `cfg` (files as written in it; see
/// [`ReaderConfig::resolve_files`]) with the per-deserializer parameters, and joins them by
/// sequence key when there are several. A Lens deserializer needs `inputGroups` and
/// `targetGroups`; with `lensMode` PROBABILISTIC its examples' frequencies weight the draws.
pub fn open_configured_source<T: Element>(cfg: &ReaderConfig) -> Result<ConfiguredSource<T>> {
    open_configured_source_with(cfg, &[])
}

/// [`open_configured_source`] reading `inputs[i]` in place of deserializer `i`'s file (e.g. data
/// already read from a pipe, see [`crate::DataSet::into_input`]); deserializers beyond `inputs`
/// read their files. A file that cannot be read twice (standard input, a pipe, a FIFO) is read
/// once, into memory.
pub fn open_configured_source_with<T: Element>(
    cfg: &ReaderConfig,
    inputs: &[InputPath],
) -> Result<ConfiguredSource<T>> {
    open_sources(cfg, inputs, 1)
}

/// [`open_configured_source_with`] for `workers` workers: a deserializer with
/// [`ChunkSize::Auto`] is sized for them ([`ReadOptions::sized_for`]) from the size of its file
/// (or of all the files of its corpus).
pub(super) fn open_sources<T: Element>(
    cfg: &ReaderConfig,
    inputs: &[InputPath],
    workers: usize,
) -> Result<ConfiguredSource<T>> {
    if cfg.deserializers.is_empty() {
        return Err(Error::config(
            "the reader configuration has no deserializer",
        ));
    }
    if cfg
        .deserializers
        .iter()
        .any(|d| d.effective_read(cfg).chunk_bytes() == 0)
    {
        return Err(Error::config("chunkSizeInBytes must be positive"));
    }
    let lens_count = cfg
        .deserializers
        .iter()
        .filter(|d| d.kind == DeserializerKind::Lens)
        .count();
    if let Some(mode) = cfg.lens_mode {
        if lens_count == 0 {
            return Err(Error::config(format!(
                "lensMode {mode:?} applies to Lens example files, and no deserializer reads one"
            )));
        }
        if mode.uses_frequencies() && cfg.deserializers.len() > 1 {
            return Err(Error::config(
                "lensMode PROBABILISTIC needs the Lens file to be the only deserializer \
                 (example frequencies are not carried through a join by key)",
            ));
        }
    }
    if cfg.deserializers.len() > 1 {
        if let Some(d) = cfg.deserializers.iter().find(|d| {
            d.kind == DeserializerKind::Ctf && d.effective_read(cfg).index() == IndexMode::None
        }) {
            return Err(Error::config(format!(
                "{}: index none cannot be joined by key with other deserializers (the join \
                 needs every chunk's keys: the full index)",
                d.file.display()
            )));
        }
    }
    let mut opened = Opened::default();
    let mut sources: Vec<Arc<dyn ChunkSource<T>>> = Vec::new();
    for (i, d) in cfg.deserializers.iter().enumerate() {
        if d.corpus.is_some() {
            if cfg.deserializers.len() > 1 {
                return Err(Error::config(
                    "a corpus is read alone: it cannot be joined by key with other deserializers",
                ));
            }
            sources.push(open_corpus(cfg, d, workers, &mut opened)?);
            continue;
        }
        let input = match inputs.get(i) {
            Some(input) => input.clone(),
            None => readable_input(d)?,
        };
        let read = d
            .effective_read(cfg)
            .sized_for(data_bytes(&[&d.file]), workers);
        sources.push(opened.open(cfg, d, read, &input)?);
    }
    let Opened { ctf, lens, unused } = opened;
    if sources.len() == 1 {
        return Ok(ConfiguredSource {
            source: sources.pop().expect("one"),
            ctf,
            lens,
            joined: None,
            unused,
        });
    }
    let joined = Arc::new(JoinedSource::new(sources)?);
    Ok(ConfiguredSource {
        source: joined.clone(),
        ctf,
        lens,
        joined: Some(joined),
        unused,
    })
}

/// The sources opened so far, kept for their diagnostics.
#[derive(Default)]
struct Opened {
    ctf: Vec<Arc<CtfSource>>,
    lens: Vec<Arc<LensSource>>,
    /// Parameters given that do not apply to the files read.
    unused: Vec<Diagnostic>,
}

impl Opened {
    /// Opens `input` as deserializer `d` says, read as `read` says (`d`'s options, sized).
    fn open<T: Element>(
        &mut self,
        cfg: &ReaderConfig,
        d: &DeserializerConfig,
        read: ReadOptions,
        input: &InputPath,
    ) -> Result<Arc<dyn ChunkSource<T>>> {
        match d.kind {
            DeserializerKind::Ctf => {
                let s = Arc::new(CtfSource::open(
                    input,
                    CtfSourceOptions {
                        ctf: CtfOptions {
                            inputs: d.inputs.clone(),
                            skip_sequence_ids: d.effective_skip_sequence_ids(cfg),
                            max_errors: d.effective_max_errors(cfg),
                            limits: cfg.limits,
                        },
                        // Joined by key: every chunk's keys are needed, so the full index.
                        // CNTK's order needs CNTK's chunks: the full index too.
                        read: match read.index() {
                            IndexMode::Auto
                                if cfg.deserializers.len() > 1
                                    || cfg.randomizer == Randomizer::Cntk =>
                            {
                                read.with_index(IndexMode::Full)
                            }
                            _ => read,
                        },
                    },
                )?);
                self.ctf.push(s.clone());
                Ok(s)
            }
            DeserializerKind::Cbf => {
                let s = CbfSource::open(input, &d.inputs, read.keep_in_memory())?;
                for message in s.file().rename_warnings() {
                    self.unused.push(Diagnostic {
                        severity: Severity::Warning,
                        location: Location::default().with_file(input.display_name()),
                        message,
                    });
                }
                Ok(Arc::new(s))
            }
            DeserializerKind::Lens => {
                let (Some(inputs), Some(targets)) = (&d.input_groups, &d.target_groups) else {
                    return Err(Error::config(format!(
                        "reading the Lens example file {} needs the network's layout: \
                         inputGroups and targetGroups (NAME:SIZE,... in network order; \
                         --input-groups/--target-groups on the command line)",
                        input.display_name()
                    )));
                };
                let s = Arc::new(LensSource::open(
                    input,
                    &d.inputs,
                    LensSourceOptions {
                        input_groups: inputs.clone(),
                        target_groups: targets.clone(),
                        nan: d.nan,
                        read,
                        use_frequencies: cfg.lens_mode.is_some_and(|m| m.uses_frequencies()),
                        limits: cfg.limits,
                    },
                )?);
                if let Some(mode) = cfg.lens_mode {
                    mode.check_frequencies(s.frequencies())
                        .map_err(|e| e.in_file(s.name().to_string()))?;
                }
                let mut unused = |what: &str, why: &str| {
                    self.unused.push(Diagnostic {
                        severity: Severity::Warning,
                        location: Location::default().with_file(s.name().to_string()),
                        message: format!("{what} does not apply to Lens example files: {why}"),
                    })
                };
                if read.cache_index() {
                    unused("cacheIndex", "the file is indexed anew on every run");
                }
                if d.effective_max_errors(cfg) > 0 {
                    unused("maxErrors", "as in Lens, one bad example refuses the file");
                }
                if read.index() == IndexMode::None {
                    unused("index none", "a Lens file is indexed when it is opened");
                }
                self.lens.push(s.clone());
                Ok(s)
            }
        }
    }
}

/// The corpus of deserializer `d`: every file it names opened as `d` says (each file's format
/// recognised by its content: CTF and CBF files may be mixed).
fn open_corpus<T: Element>(
    cfg: &ReaderConfig,
    d: &DeserializerConfig,
    workers: usize,
    opened: &mut Opened,
) -> Result<Arc<dyn ChunkSource<T>>> {
    let corpus = d.corpus.as_ref().expect("a corpus deserializer");
    let files = corpus.expand()?;
    let read =
        (d.effective_read(cfg)).sized_for(data_bytes(&files.iter().collect::<Vec<_>>()), workers);
    let mut shards = Vec::new();
    for file in files {
        // The first bytes say the format; the source opens the file (a compressed one is
        // decompressed to a temporary file there, once).
        let input = InputPath::new(&file);
        let kind = match crate::dataset::format_of(&input)? {
            FileFormat::Ctf => DeserializerKind::Ctf,
            FileFormat::Cbf => DeserializerKind::Cbf,
            FileFormat::LensText | FileFormat::LensBinary => DeserializerKind::Lens,
        };
        let shard = DeserializerConfig {
            kind,
            file: file.clone(),
            corpus: None,
            ..d.clone()
        };
        shards.push((
            input.display_name(),
            opened.open(cfg, &shard, read, &input)?,
        ));
    }
    Ok(Arc::new(CorpusSource::new(shards)?))
}

/// The size of `files` together, when every one is a regular file (not standard input, a pipe).
fn data_bytes(files: &[&PathBuf]) -> Option<u64> {
    (files.iter())
        .map(|f| Some(std::fs::metadata(f).ok().filter(|m| m.is_file())?.len()))
        .sum()
}

/// Deserializer `d`'s file, read into memory when it cannot be read twice.
fn readable_input(d: &DeserializerConfig) -> Result<InputPath> {
    let input = InputPath::new(&d.file);
    if input.is_seekable() {
        return Ok(input);
    }
    let format = match d.kind {
        DeserializerKind::Ctf => FileFormat::Ctf,
        DeserializerKind::Cbf => FileFormat::Cbf,
        // Text or binary: the Lens source tells them apart by content.
        DeserializerKind::Lens => FileFormat::LensText,
    };
    let options = crate::OpenOptions {
        format: Some(format),
        ..Default::default()
    };
    crate::open(input, &options)?.into_input()
}

/// The engine options `cfg` says: `randomize`, `randomizationSeed`, the window
/// (`randomizationWindow` in chunks, or in samples with `sampleBasedRandomizationWindow`; when
/// unset, CNTK's default, see [`ReaderConfig::default_randomization_window`]), `frameMode` (of
/// the reader or any deserializer), `lensMode` (which then decides `randomize`, the window and
/// drawing with replacement, see [`SelectionMode::apply_to`](crate::lens::select::SelectionMode::apply_to));
/// `limit` is the epoch size. Threads, prefetch and the worker are left at their defaults.
pub fn reader_options(cfg: &ReaderConfig, limit: EpochLimit) -> ReaderOptions {
    let window = match cfg
        .randomization_window
        .or_else(|| cfg.default_randomization_window())
    {
        None => Window::All,
        Some(n) if cfg.sample_based_randomization_window => Window::Samples(n),
        Some(n) => Window::Chunks(usize::try_from(n).unwrap_or(usize::MAX)),
    };
    let frame_mode = cfg.read.frame_mode()
        || (cfg.deserializers.iter()).any(|d| d.effective_read(cfg).frame_mode());
    let mut options = ReaderOptions {
        randomize: cfg.randomize,
        seed: cfg.randomization_seed,
        window,
        frame_mode,
        limit,
        randomizer: cfg.randomizer,
        ..ReaderOptions::default()
    };
    if let Some(mode) = cfg.lens_mode {
        mode.apply_to(&mut options);
    }
    options
}

/// A reader of element type `T` over the data set `cfg` describes (the caller picks `T` by
/// `cfg.precision`: `f32` for float, `f64` for double).
pub fn build_reader<T: Element>(
    cfg: &ReaderConfig,
    limit: EpochLimit,
) -> Result<(Reader<T>, ConfiguredSource<T>)> {
    let source = open_configured_source::<T>(cfg)?;
    let reader = Reader::new(source.source.clone(), reader_options(cfg, limit))?;
    Ok((reader, source))
}
