//! Building a reader from a [`ReaderConfig`]: one source per deserializer, joined by key
//! ([`JoinedSource`]) when there are several, and the [`ReaderOptions`] the config's
//! parameters say.

use crate::config::{DeserializerConfig, ReaderConfig};
use crate::element::Element;
use crate::error::{Diagnostic, Error, Location, Result, Severity};
use crate::format::FileFormat;
use crate::io::{Corpus, InputPath, MixSpec};
use crate::options::{IndexMode, ReadOptions};
use crate::reader::{ChunkSource, EpochLimit, Randomizer, Reader, ReaderOptions, Window};
use crate::source::{CtfSource, JoinedSource, LensSource, MixSource};
use crate::{FormatSource, LensLayout, OpenOptions};
use std::path::PathBuf;
use std::sync::Arc;

/// The data set a [`ReaderConfig`] describes, opened and indexed.
pub struct ConfiguredSource<T: Element> {
    /// What the reader reads from.
    pub source: Arc<dyn ChunkSource<T>>,
    /// Each deserializer's source, as [`crate::open`] gave it.
    opened: Vec<FormatSource<T>>,
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
        d.extend(self.opened.iter().flat_map(|o| o.diagnostics()));
        if let Some(j) = &self.joined {
            d.extend_from_slice(j.diagnostics());
        }
        d
    }

    /// The CTF sources among the deserializers (to see where their index came from).
    pub fn ctf_sources(&self) -> Vec<Arc<CtfSource>> {
        self.opened.iter().flat_map(|o| o.ctf_sources()).collect()
    }

    /// The Lens sources among the deserializers.
    pub fn lens_sources(&self) -> Vec<Arc<LensSource>> {
        self.opened.iter().flat_map(|o| o.lens_sources()).collect()
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
/// [`ChunkSize::Auto`](crate::options::ChunkSize::Auto) is sized for them
/// ([`ReadOptions::sized_for`]) from the size of its file (or of all the files of its corpus).
/// Every deserializer's data is opened through the front door, [`crate::open`] (or
/// [`crate::open_corpus`]).
pub(super) fn open_sources<T: Element>(
    cfg: &ReaderConfig,
    inputs: &[InputPath],
    workers: usize,
) -> Result<ConfiguredSource<T>> {
    check(cfg)?;
    let mut opened = Vec::new();
    let mut sources = Vec::new();
    let mut unused = Vec::new();
    for (i, d) in cfg.deserializers.iter().enumerate() {
        let mut options = open_options(cfg, d)?;
        let mut data = match &d.corpus {
            // Each file's format is recognised by its content: CTF and CBF may be mixed.
            Some(corpus) => crate::open_corpus(
                corpus,
                &OpenOptions {
                    format: None,
                    ..options.clone()
                },
            )?,
            None => {
                let input = inputs
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| InputPath::new(&d.file));
                crate::open(input, &options)?
            }
        };
        options.read = options.read.sized_for(data_bytes(&data.files()), workers);
        data.set_read(options.read.clone());
        unused.extend(data.rename_warnings());
        if data.format().is_lens() {
            unused.extend(lens_unused(cfg, d, &options.read, data.name()));
        }
        let source = data.into_source::<T>()?;
        if let Some(mode) = cfg.lens_mode {
            for s in source.lens_sources() {
                mode.check_frequencies(s.frequencies())
                    .map_err(|e| e.in_file(s.name().to_string()))?;
            }
        }
        sources.push(match &d.corpus {
            Some(Corpus::Mix(mix)) => mixed(mix, &source, &options.read)?,
            _ => source.chunk_source(),
        });
        opened.push(source);
    }
    if opened.len() == 1 {
        return Ok(ConfiguredSource {
            source: sources.swap_remove(0),
            opened,
            joined: None,
            unused,
        });
    }
    let joined = Arc::new(JoinedSource::new(sources)?);
    Ok(ConfiguredSource {
        source: joined.clone(),
        opened,
        joined: Some(joined),
        unused,
    })
}

/// The sources of `mix`, opened as one corpus of all their files (`opened`), mixed by weight.
fn mixed<T: Element>(
    mix: &MixSpec,
    opened: &FormatSource<T>,
    read: &ReadOptions,
) -> Result<Arc<dyn ChunkSource<T>>> {
    let FormatSource::Corpus { source, .. } = opened else {
        return Err(Error::config(
            "a mix is read as a corpus of its sources' files",
        ));
    };
    let parts: Vec<(String, f64, usize)> = (mix.expand_parts(read.storage_options())?)
        .into_iter()
        .map(|(name, weight, files)| (name, weight, files.len()))
        .collect();
    Ok(Arc::new(MixSource::new(
        source.clone(),
        &parts,
        mix.epoch_samples,
    )?))
}

/// What `cfg` asks that no set of deserializers can do.
fn check(cfg: &ReaderConfig) -> Result<()> {
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
        .filter(|d| d.format.is_lens())
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
        if cfg.deserializers.iter().any(|d| d.corpus.is_some()) {
            return Err(Error::config(
                "a corpus is read alone: it cannot be joined by key with other deserializers",
            ));
        }
        if let Some(d) = cfg.deserializers.iter().find(|d| {
            d.format == FileFormat::Ctf && d.effective_read(cfg).index() == IndexMode::None
        }) {
            return Err(Error::config(format!(
                "{}: index none cannot be joined by key with other deserializers (the join \
                 needs every chunk's keys: the full index)",
                d.file.display()
            )));
        }
    }
    Ok(())
}

/// How deserializer `d` of `cfg` is opened: its format, inputs and parameters (over the
/// reader's), the Lens layout, and how it is read (unsized: see [`open_sources`]).
fn open_options(cfg: &ReaderConfig, d: &DeserializerConfig) -> Result<OpenOptions> {
    let read = d.effective_read(cfg);
    // Joined by key: every chunk's keys are needed, so the full index. CNTK's order needs
    // CNTK's chunks: the full index too.
    let read = match read.index() {
        IndexMode::Auto if cfg.deserializers.len() > 1 || cfg.randomizer == Randomizer::Cntk => {
            read.with_index(IndexMode::Full)
        }
        _ => read,
    };
    let lens = match (&d.input_groups, &d.target_groups) {
        (Some(inputs), Some(targets)) => Some(LensLayout {
            input_groups: inputs.clone(),
            target_groups: targets.clone(),
            nan: d.nan,
            frequencies: cfg.lens_mode.is_some_and(|m| m.uses_frequencies()),
        }),
        _ if d.format.is_lens() => {
            return Err(Error::config(format!(
                "reading the Lens example file {} needs the network's layout: \
                 inputGroups and targetGroups (NAME:SIZE,... in network order)",
                d.file.display()
            )))
        }
        _ => None,
    };
    Ok(OpenOptions {
        format: Some(d.format),
        inputs: d.inputs.clone(),
        skip_sequence_ids: d.effective_skip_sequence_ids(cfg),
        max_errors: d.effective_max_errors(cfg),
        lens,
        limits: cfg.limits,
        read,
    })
}

/// Warnings for the parameters of `d` that do not apply to the Lens file `name`.
fn lens_unused(
    cfg: &ReaderConfig,
    d: &DeserializerConfig,
    read: &ReadOptions,
    name: &str,
) -> Vec<Diagnostic> {
    let unused = |what: &str, why: &str| Diagnostic {
        severity: Severity::Warning,
        location: Location::default().with_file(name.to_string()),
        message: format!("{what} does not apply to Lens example files: {why}"),
    };
    let mut out = Vec::new();
    if read.cache_index() {
        out.push(unused(
            "cacheIndex",
            "the file is indexed anew on every run",
        ));
    }
    if d.effective_max_errors(cfg) > 0 {
        out.push(unused(
            "maxErrors",
            "as in Lens, one bad example refuses the file",
        ));
    }
    if read.index() == IndexMode::None {
        out.push(unused(
            "index none",
            "a Lens file is indexed when it is opened",
        ));
    }
    out
}

/// The size of `files` together, when there are some and every one is a regular file (not
/// standard input, a pipe; data read into memory has no files).
fn data_bytes(files: &[PathBuf]) -> Option<u64> {
    if files.is_empty() {
        return None;
    }
    (files.iter())
        .map(|f| Some(std::fs::metadata(f).ok().filter(|m| m.is_file())?.len()))
        .sum()
}

/// The engine options `cfg` says: `randomize`, `randomizationSeed`, the window
/// (`randomizationWindowInBytes`, else `randomizationWindow` in chunks, or in samples with
/// `sampleBasedRandomizationWindow`; when unset, CNTK's default, see
/// [`ReaderConfig::default_randomization_window`]), `frameMode` (of
/// the reader or any deserializer), `lensMode` (which then decides `randomize`, the window and
/// drawing with replacement, see [`SelectionMode::apply_to`](crate::lens::select::SelectionMode::apply_to));
/// `limit` is the epoch size. Threads, prefetch and the worker are left at their defaults.
pub fn reader_options(cfg: &ReaderConfig, limit: EpochLimit) -> ReaderOptions {
    let window = match (cfg.randomization_window_bytes, cfg.randomization_window) {
        (Some(bytes), _) => Window::Bytes(bytes),
        (None, given) => match given.or_else(|| cfg.default_randomization_window()) {
            None => Window::All,
            Some(n) if cfg.sample_based_randomization_window => Window::Samples(n),
            Some(n) => Window::Chunks(usize::try_from(n).unwrap_or(usize::MAX)),
        },
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::ChunkSize;

    #[test]
    fn data_in_memory_with_auto_chunks_gets_the_largest_chunk_not_one_byte_ones() {
        let text = "0 |x 1\n1 |x 2\n2 |x 3\n";
        let mut cfg = ReaderConfig::default();
        let mut d =
            DeserializerConfig::new(FileFormat::Ctf, "-", vec!["x:dense:1".parse().unwrap()]);
        d.read = ReadOptions::new().with_chunk_size(ChunkSize::Auto);
        cfg.deserializers.push(d);
        let input = InputPath::Memory {
            name: "<stdin>".into(),
            bytes: text.as_bytes().into(),
        };
        let opened = open_sources::<f32>(&cfg, &[input], 4).unwrap();
        // Its size unknown to the sizing, the data is one chunk of at most the default size.
        assert_eq!(opened.source.chunks().len(), 1);
        assert_eq!(data_bytes(&[]), None);
    }
}
