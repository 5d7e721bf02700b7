//! The input flags shared by the commands that read data files, and opening those files.

use exfeed::config::{ConfigOptions, ReaderConfig, SectionReader};
use exfeed::configured::ReaderArgs;
use exfeed::format::FileFormat;
use exfeed::lens::materialize::Layout;
use exfeed::options::ReadOptions;
use exfeed::source::{Corpus, DataPath};
use exfeed::{DataSet, DiagnosticSink, Error, ErrorKind, OpenOptions, Precision, StreamSpec};
use std::path::{Path, PathBuf};

/// How to read a data file: its inputs and CNTK's reader parameters, from flags, from a
/// configuration file, or both (flags given explicitly win over the configuration).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct SourceArgs {
    /// One data set of many files (shards), instead of FILE: a glob such as
    /// 'data/train-*.ctf' (quoted: exfeed expands it, in sorted order) or @LIST, a file of
    /// paths, one a line. CTF and CBF shards may be mixed; their streams must agree. Keys are
    /// SHARD:KEY.
    #[arg(long, value_name = "GLOB|@LIST")]
    pub corpus: Option<String>,
    /// An input (stream): NAME:FORMAT:DIM[:ALIAS], FORMAT dense or sparse. Repeat for each input,
    /// in the order the output should have.
    #[arg(long = "input", short = 'i', value_name = "NAME:FORMAT:DIM[:ALIAS]")]
    pub inputs: Vec<StreamSpec>,
    /// A reader configuration: CNTK's config syntax (`reader = [ ... ]`), or TOML for `.toml`
    /// names. Its inputs and parameters apply unless a flag overrides them.
    #[arg(long, value_name = "FILE", conflicts_with = "inputs")]
    pub config: Option<PathBuf>,
    /// The section of --config to use (`NAME = [ ... reader = [ ... ] ]`); by default the first
    /// section of the config's `command = A:B` that has a reader.
    #[arg(long, value_name = "NAME", requires = "config")]
    pub section: Option<String>,
    /// Set a parameter of --config before it is resolved, as on CNTK's command line
    /// (`DataDir=/data`, `Train.reader.randomize=false`). Repeatable.
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = super::config::parse_set, requires = "config")]
    pub overrides: Vec<(String, String)>,
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
    /// The most bytes one record (a CTF sequence) may take, also in a stream read whole into
    /// memory (suffixes K, M, G; default 64M, or the config's maxRecordSizeInBytes). Longer
    /// records are an error where the limit is crossed.
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub max_record_size: Option<u64>,
    /// A setting of the store that URL inputs (s3://, gs://, http://, https://) are read from,
    /// over the environment's: aws_endpoint, aws_region, aws_access_key_id,
    /// aws_secret_access_key, aws_session_token, aws_allow_http, google_service_account_key,
    /// google_base_url, timeout, ... (see docs/remote.md). Repeatable.
    #[arg(long = "storage-option", value_name = "KEY=VALUE", value_parser = parse_storage_option)]
    pub storage_options: Vec<StorageOption>,
    /// A local cache of URL inputs, shared by the processes that name it: byte ranges read are
    /// kept there and read from it again (see docs/remote.md; default: no cache).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// The most bytes --cache-dir may hold (suffixes K, M, G; default 10G); least recently
    /// used entries are evicted.
    #[arg(long, value_name = "BYTES", value_parser = parse_size, requires = "cache_dir")]
    pub cache_limit: Option<u64>,
}

/// One `--storage-option KEY=VALUE`; its `Debug` shows the key only (values may be secrets).
#[derive(Clone)]
pub struct StorageOption(String, String);

impl std::fmt::Debug for StorageOption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}=<hidden>", self.0)
    }
}

fn parse_storage_option(text: &str) -> Result<StorageOption, String> {
    let (key, value) =
        exfeed::io::remote::RemoteOptions::parse_storage_option(text).map_err(|e| e.to_string())?;
    Ok(StorageOption(key, value))
}

impl SourceArgs {
    /// How URL inputs are reached: the `--storage-option`s, `--cache-dir`, `--cache-limit`.
    pub fn read_options(&self) -> ReadOptions {
        let mut read = ReadOptions::new().with_storage_options(
            (self.storage_options.iter())
                .map(|StorageOption(key, value)| (key.clone(), value.clone()))
                .collect(),
        );
        if let Some(dir) = &self.cache_dir {
            read = read.with_cache_dir(dir);
        }
        if let Some(limit) = self.cache_limit {
            read = read.with_cache_limit(limit);
        }
        read
    }

    /// The configuration named by --config/--section/--set, if any.
    pub fn reader_config(&self) -> Result<Option<ReaderConfig>, Error> {
        Ok(self.section_reader()?.map(|r| r.config))
    }

    fn section_reader(&self) -> Result<Option<SectionReader>, Error> {
        let Some(path) = &self.config else {
            return Ok(None);
        };
        let options = ConfigOptions {
            section: self.section.clone(),
            overrides: self.overrides.clone(),
        };
        ReaderConfig::load(path, &options).map(Some)
    }

    /// The data to read: the files `given`, or --corpus, else what the --config's reader
    /// names (`file =`, as CNTK opens it, or `corpus =`). Says on standard error, as far as the
    /// trace level shows it, which section the config gave (information), its warnings, and a
    /// given file that overrides the config's (information).
    pub fn data(&self, given: &[PathBuf]) -> anyhow::Result<Vec<DataPath>> {
        if let Some(corpus) = &self.corpus {
            if !given.is_empty() {
                anyhow::bail!("give FILE or --corpus, not both");
            }
            return Ok(vec![DataPath::Corpus(Corpus::parse(corpus))]);
        }
        let Some(r) = self.section_reader()? else {
            if given.is_empty() {
                anyhow::bail!(
                    "no data file: give FILE, --corpus, or a --config whose reader names its file"
                );
            }
            return Ok(given.iter().cloned().map(DataPath::File).collect());
        };
        let trace_level = self.trace_level.unwrap_or(r.config.trace_level);
        for note in r.notes(trace_level) {
            eprintln!("exfeed: {note}");
        }
        if given.is_empty() {
            return Ok(r.config.data_paths());
        }
        let (files, overridden) = r.data_files(given, trace_level);
        for note in overridden {
            eprintln!("exfeed: {note}");
        }
        Ok(files.into_iter().map(DataPath::File).collect())
    }

    /// The one data set `dump`, `info` and `convert` read: `given`, --corpus, or the
    /// --config's.
    pub fn one(&self, given: Option<&Path>, command: &str) -> anyhow::Result<DataPath> {
        let given: Vec<PathBuf> = given.map(PathBuf::from).into_iter().collect();
        match self.data(&given)?.as_slice() {
            [one] => Ok(one.clone()),
            many => anyhow::bail!(
                "the config's reader has {} files; {command} reads one: give FILE or --corpus",
                many.len()
            ),
        }
    }

    /// Opens `data` (a file, `-` for standard input, or a corpus) as these flags and the
    /// configuration say (see [`ReaderArgs::open`]): the format (`from`, else detected), the
    /// inputs, the Lens layout (flags, else the configuration's
    /// `inputGroups`/`targetGroups`), the precision (flag, else the configuration's, else what
    /// a CBF file stores, else float) and the trace level.
    pub fn open(
        &self,
        data: &DataPath,
        from: Option<FileFormat>,
        lens: &LayoutArgs,
    ) -> anyhow::Result<Opened> {
        let cfg = self.reader_config()?;
        let (input_groups, target_groups) = lens.layouts()?.unzip();
        let args = ReaderArgs {
            inputs: self.inputs.clone(),
            precision: self.precision,
            skip_sequence_ids: self.skip_sequence_ids,
            max_errors: self.max_errors,
            input_groups,
            target_groups,
            nan: lens.nan,
            max_record_size: self.max_record_size,
            read: self.read_options(),
            ..ReaderArgs::default()
        };
        let file = PathBuf::from(data.to_string());
        let trace_level = self.trace_level.unwrap_or_else(|| {
            cfg.as_ref()
                .and_then(|c| Some(c.deserializer_for(&file)?.effective_trace_level(c)))
                .unwrap_or(1)
        });
        let data = args.open(cfg.as_ref(), data, from)?;
        let mut sink = crate::diag::Stderr::new(trace_level);
        for warning in data.rename_warnings() {
            sink.report(warning);
        }
        let precision = args.precision_for(cfg.as_ref(), &data);
        Ok(Opened {
            options: data.options().clone(),
            data,
            precision,
            trace_level,
        })
    }
}

/// An input opened as [`SourceArgs::open`] says.
pub struct Opened {
    /// The input, format recognised.
    pub data: DataSet,
    /// What it was opened with.
    pub options: OpenOptions,
    /// The element type to read values as.
    pub precision: Precision,
    /// Diagnostics shown: 0 errors, 1 warnings, 2 information.
    pub trace_level: u8,
}

impl Opened {
    /// Whether this is a Lens example file.
    pub fn is_lens(&self) -> bool {
        matches!(
            self.data.format(),
            FileFormat::LensText | FileFormat::LensBinary
        )
    }
}

/// The network layout a Lens example file is materialized for (`exfeed convert` to CTF/CBF,
/// `exfeed read`, `exfeed dump`): one sequence per example, one sample per event, an `input`
/// and a `target` stream. Without the flags, a --config's `inputGroups`/`targetGroups` apply.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct LayoutArgs {
    /// Lens files: the network's input groups, `NAME:SIZE,...` in network order.
    #[arg(long, value_name = "NAME:SIZE,...")]
    pub input_groups: Option<String>,
    /// Lens files: the network's target groups, `NAME:SIZE,...` in network order.
    #[arg(long, value_name = "NAME:SIZE,...")]
    pub target_groups: Option<String>,
    /// Lens files: the value NaN (`-`) becomes (convert: required when there is one; read:
    /// NaN stays NaN without it).
    #[arg(long, value_name = "VALUE", allow_hyphen_values = true)]
    pub nan: Option<f32>,
}

impl LayoutArgs {
    /// The input and target layouts when both were given; an error when only one was.
    pub fn layouts(&self) -> anyhow::Result<Option<(Layout, Layout)>> {
        match (&self.input_groups, &self.target_groups) {
            (None, None) => Ok(None),
            (Some(i), Some(t)) => Ok(Some((Layout::parse(i)?, Layout::parse(t)?))),
            _ => {
                anyhow::bail!("give both --input-groups and --target-groups (the network's layout)")
            }
        }
    }
}

/// `--from`/`--to`: ctf, cbf, ex (or lens), bex.
pub fn parse_format(s: &str) -> Result<FileFormat, Error> {
    s.parse()
}

/// A size in bytes, with an optional suffix K, M or G (KiB, MiB, GiB): every `--chunk-size`
/// and `--max-record-size`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (digits, shift) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 20),
        Some(b'G' | b'g') => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("expected a positive size in bytes (e.g. 32M), found '{s}'"))
}

/// Exit status for a library error, the same for every command (as docs/cli.md says): 2 for
/// I/O and usage problems, 1 for invalid data.
pub fn exit_code_for(err: &Error) -> u8 {
    match err.kind() {
        ErrorKind::Io | ErrorKind::Config | ErrorKind::Refused | ErrorKind::Unsupported => 2,
        _ => 1,
    }
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
