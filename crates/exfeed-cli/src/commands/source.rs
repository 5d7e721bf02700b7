//! The input flags shared by the commands that read data files, and opening those files.

use exfeed::config::{DeserializerConfig, DeserializerKind, ReaderConfig};
use exfeed::ctf::{CtfOptions, CtfParser, CtfStream};
use exfeed::format::FileFormat;
use exfeed::io::{open_reader, InputPath};
use exfeed::{DiagnosticSink, Element, Error, ErrorKind, Precision, SequenceBatch, StreamSpec};
use std::io::BufRead;
use std::path::{Path, PathBuf};

/// How to read a data file: its inputs and CNTK's reader parameters, from flags, from a
/// configuration file, or both (flags given explicitly win over the configuration).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct SourceArgs {
    /// An input (stream): NAME:FORMAT:DIM[:ALIAS], FORMAT dense or sparse. Repeat for each input,
    /// in the order the output should have.
    #[arg(long = "input", short = 'i', value_name = "NAME:FORMAT:DIM[:ALIAS]")]
    pub inputs: Vec<StreamSpec>,
    /// A reader configuration: CNTK's config syntax (`reader = [ ... ]`), or TOML for `.toml`
    /// names. Its inputs and parameters apply unless a flag overrides them.
    #[arg(long, value_name = "FILE", conflicts_with = "inputs")]
    pub config: Option<PathBuf>,
    /// The section of --config to use (`NAME = [ ... reader = [ ... ] ]`).
    #[arg(long, value_name = "NAME", requires = "config")]
    pub section: Option<String>,
    /// Ignore sequence ids: every line is one sequence keyed by its 0-based line number.
    #[arg(long)]
    pub skip_sequence_ids: bool,
    /// Precision of values: float (the default) or double.
    #[arg(long, value_name = "float|double")]
    pub precision: Option<Precision>,
    /// Report and skip up to N bad samples or sequences; the next one stops the run (default 0).
    #[arg(long, value_name = "N")]
    pub max_errors: Option<u64>,
    /// 0: errors only, 1: warnings too (the default), 2: information too.
    #[arg(long, value_name = "0|1|2", value_parser = clap::value_parser!(u8).range(0..=2))]
    pub trace_level: Option<u8>,
}

/// What [`SourceArgs`] resolve to for one data file.
#[derive(Clone, Debug)]
pub struct Source {
    /// How to parse CTF.
    pub ctf: CtfOptions,
    /// Precision of values.
    pub precision: Precision,
    /// Diagnostics shown: 0 errors, 1 warnings, 2 information.
    pub trace_level: u8,
    /// The configuration, when one was given.
    pub config: Option<ReaderConfig>,
}

impl SourceArgs {
    /// The configuration named by --config/--section, if any.
    pub fn reader_config(&self) -> Result<Option<ReaderConfig>, Error> {
        match &self.config {
            None => Ok(None),
            Some(path) => ReaderConfig::from_file(path, self.section.as_deref()).map(Some),
        }
    }

    /// The streams to select (and rename) in CBF `file`: the --input flags, else the inputs of
    /// the configuration's CBF deserializer (the one whose file has `file`'s name when there are
    /// several); empty for every stream of the file.
    pub fn cbf_inputs(&self, file: &Path) -> Result<Vec<StreamSpec>, Error> {
        if !self.inputs.is_empty() {
            return Ok(self.inputs.clone());
        }
        let Some(cfg) = self.reader_config()? else {
            return Ok(Vec::new());
        };
        Ok(pick_deserializer(&cfg, DeserializerKind::Cbf, file)
            .map(|d| d.inputs.clone())
            .unwrap_or_default())
    }

    /// Resolves flags and configuration for reading `file`. With a configuration, the inputs
    /// are those of its CTF deserializer (the one whose file has `file`'s name when there are
    /// several).
    pub fn resolve(&self, file: &Path) -> anyhow::Result<Source> {
        let config = self.reader_config()?;
        let mut source = Source {
            ctf: CtfOptions {
                inputs: self.inputs.clone(),
                skip_sequence_ids: self.skip_sequence_ids,
                max_errors: self.max_errors.unwrap_or(0),
            },
            precision: self.precision.unwrap_or_default(),
            trace_level: self.trace_level.unwrap_or(1),
            config: None,
        };
        if let Some(cfg) = config {
            if let Some(d) = pick_deserializer(&cfg, DeserializerKind::Ctf, file) {
                source.ctf.inputs = d.inputs.clone();
                source.ctf.skip_sequence_ids |= d.effective_skip_sequence_ids(&cfg);
                source.ctf.max_errors = self
                    .max_errors
                    .unwrap_or_else(|| d.effective_max_errors(&cfg));
                source.trace_level = self
                    .trace_level
                    .unwrap_or_else(|| d.effective_trace_level(&cfg));
            }
            source.precision = self.precision.unwrap_or(cfg.precision);
            source.config = Some(cfg);
        }
        if source.ctf.inputs.is_empty() {
            anyhow::bail!(
                "no inputs: give --input NAME:FORMAT:DIM[:ALIAS] for each, or a --config with a CTF reader"
            );
        }
        Ok(source)
    }
}

/// The configuration's deserializer of `kind` for `file`: the one whose file has `file`'s name,
/// else the first of that kind.
fn pick_deserializer<'a>(
    cfg: &'a ReaderConfig,
    kind: DeserializerKind,
    file: &Path,
) -> Option<&'a DeserializerConfig> {
    let mut of_kind = cfg.deserializers.iter().filter(|d| d.kind == kind);
    let first = of_kind.clone().next();
    of_kind
        .find(|d| d.file.file_name().is_some() && d.file.file_name() == file.file_name())
        .or(first)
}

/// Exit status for a library error: 2 for I/O and usage problems, 1 for invalid data.
pub fn exit_code_for(err: &Error) -> u8 {
    match err.kind() {
        ErrorKind::Io | ErrorKind::Config | ErrorKind::Refused => 2,
        _ => 1,
    }
}

/// Reads `file` sequence by sequence in batches, calling `each` with every batch filled
/// (and then cleared). The format is detected from the content and name.
pub fn read_batches<T: Element>(
    file: &Path,
    opts: &CtfOptions,
    sink: &mut dyn DiagnosticSink,
    mut each: impl FnMut(&SequenceBatch<T>) -> std::io::Result<()>,
) -> Result<(), Error> {
    let input = InputPath::new(file);
    let name = input.display_name();
    let mut reader = open_reader(&input)?;
    let head = reader
        .fill_buf()
        .map_err(|e| Error::from(e).in_file(name.clone()))?;
    match FileFormat::detect(file, head) {
        FileFormat::Ctf => {}
        other => {
            return Err(Error::new(
                ErrorKind::Unsupported,
                exfeed::Location::default().with_file(name),
                format!("{other:?} files are not supported by this command yet (only CTF)"),
            ))
        }
    }
    let mut parser = CtfParser::new(opts.clone())?;
    parser.set_file_name(name.clone());
    let mut stream = CtfStream::new(parser);
    let mut batch = SequenceBatch::<T>::new(&opts.inputs);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match std::io::Read::read(&mut reader, &mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::from(e).in_file(name)),
        };
        if n == 0 {
            break;
        }
        let fed = stream.feed(&buf[..n], &mut batch, sink);
        if let Err(e) = fed {
            // Hand over the sequences finished before the error, then stop.
            each(&batch).map_err(Error::from)?;
            return Err(e);
        }
        if !batch.is_empty() {
            each(&batch).map_err(Error::from)?;
            batch.clear();
        }
    }
    let finished = stream.finish(&mut batch, sink);
    if !batch.is_empty() {
        each(&batch).map_err(Error::from)?;
    }
    finished
}

/// Runs `$body` with `$T` bound to the element type of `$precision`.
#[macro_export]
macro_rules! with_precision {
    ($precision:expr, $T:ident => $body:expr) => {
        match $precision {
            exfeed::Precision::Float => {
                type $T = f32;
                $body
            }
            exfeed::Precision::Double => {
                type $T = f64;
                $body
            }
        }
    };
}
