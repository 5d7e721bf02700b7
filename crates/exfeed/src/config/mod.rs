//! Reader configuration: a whole CNTK config file read as CNTK reads it, its TOML form, and the
//! option structs.
//!
//! A CNTK config holds much more than the reader: network definitions in BrainScript, SGD blocks,
//! commands and variables. [`ConfigFile`] reads the whole file without evaluating what the reader
//! does not use, applies command-line overrides, picks the section a command reads
//! (`command = Train:Test`), and converts its reader block into a [`ReaderConfig`], resolving
//! `$variables$` lazily as CNTK does. Both forms share one tree, so they accept the same
//! parameter names (case-insensitively, as CNTK) and report the same errors, each with the file,
//! line and column:
//!
//! ```
//! use exfeed::config::{ConfigFile, ConfigOptions};
//!
//! let text = r#"
//! DataDir = ../Data
//! command = Train:Test
//! Train = [
//!     action = "train"
//!     BrainScriptNetworkBuilder = { features = Input(3); z = Times(W, features) + b }
//!     SGD = [ minibatchSize = 70 ]
//!     reader = [
//!         readerType = "CNTKTextFormatReader"
//!         file = "$DataDir$/train.ctf"
//!         input = [ features = [ dim = 3; format = "dense"; alias = "F" ] ]
//!     ]
//! ]
//! "#;
//! let overrides = [("DataDir".to_string(), "/data".to_string())];
//! let cfg = ConfigFile::parse_cntk(text, "train.cntk", &overrides).unwrap();
//! let reader = cfg.reader(None).unwrap();
//! assert_eq!(reader.section.as_deref(), Some("Train"));
//! assert_eq!(reader.config.deserializers[0].file, std::path::Path::new("/data/train.ctf"));
//!
//! // The plain entry point, for configs that are only a reader block:
//! use exfeed::config::ReaderConfig;
//! let err = ReaderConfig::from_cntk_str("reader = [ randomise = false ]", "x.cntk", None).unwrap_err();
//! assert_eq!(err.to_string(), "x.cntk:1:12: unknown reader parameter 'randomise' (did you mean 'randomize'?)");
//! ```
//!
//! See `docs/config.md` for what is read, what is skipped and why.

mod from_tree;
mod options;
mod resolve;
pub(crate) mod syntax;
mod toml_form;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use options::{
    deserializer_type, inputs_described_by_file, reader_type, DeserializerConfig, ReaderConfig,
    DEFAULT_CHUNK_SIZE_BYTES,
};

use crate::error::{Error, ErrorKind, Result, Severity};
use from_tree::{section_names, Cx};
use resolve::{Resolved, Resolver, Scope};
use syntax::{error_at, Block, Entry, Node, Origin, Pos, Value};

/// How to read a configuration file, as the command line and Python give it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigOptions {
    /// The section whose reader to use (`--section`); `None`: see [`ConfigFile::choose`].
    pub section: Option<String>,
    /// `NAME=VALUE` assignments applied after the file, in order, as CNTK takes them on its
    /// command line (`cntk configFile=X.cntk DataDir=/data`). NAME may be a dotted path into
    /// blocks (`Train.reader.randomize`); VALUE is read in the config syntax, and a `[ ... ]`
    /// block merges into an existing one.
    pub overrides: Vec<(String, String)>,
}

impl ConfigOptions {
    /// Parses `NAME=VALUE` (the form of `--set`).
    pub fn parse_override(text: &str) -> Result<(String, String)> {
        match text.split_once('=') {
            Some((n, v)) if !n.trim().is_empty() => {
                Ok((n.trim().to_string(), v.trim().to_string()))
            }
            _ => Err(Error::config(format!("'{text}' is not NAME=VALUE"))),
        }
    }
}

/// One parameter the reader read: its name (prefixed by its deserializer or input), its value
/// with variables substituted, and where it was set (`file:line:column`, `--set ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// `randomize`, `deserializer 1: file`, `input 'features': dim`.
    pub name: String,
    /// The value as the reader took it.
    pub value: String,
    /// Where it was written.
    pub from: String,
}

/// The reader of one section, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct SectionReader {
    /// The section (`None`: the top-level reader block).
    pub section: Option<String>,
    /// Why this section, when it was not named: e.g. "the first section of command = Train:Test
    /// that has a reader".
    pub chosen_because: Option<String>,
    /// The options.
    pub config: ReaderConfig,
    /// Every parameter read, in the order read.
    pub params: Vec<Param>,
    /// Parameters accepted without effect, and values set twice.
    pub warnings: Vec<String>,
}

impl SectionReader {
    /// What a command that reads data says before it starts, as far as `trace_level` shows it
    /// (0 errors, 1 warnings, 2 information): which section it uses and why, when the user did
    /// not name it (information), then the warnings.
    pub fn notes(&self, trace_level: u8) -> Vec<String> {
        let mut notes = Vec::new();
        if trace_level >= Severity::Info as u8 {
            if let (Some(s), Some(why)) = (&self.section, &self.chosen_because) {
                notes.push(format!("note: using section '{s}' ({why})"));
            }
        }
        if trace_level >= Severity::Warning as u8 {
            notes.extend(self.warnings.iter().map(|w| format!("warning: {w}")));
        }
        notes
    }

    /// The data files to read: `given` (from the command line) when there are any, else the
    /// `file =` of every deserializer, as CNTK opens them (relative to the working directory).
    /// A given file that is none of the config's overrides it, which a note says when
    /// `trace_level` shows information (2).
    pub fn data_files(&self, given: &[PathBuf], trace_level: u8) -> (Vec<PathBuf>, Vec<String>) {
        let configured: Vec<PathBuf> = self
            .config
            .deserializers
            .iter()
            .map(|d| d.file.clone())
            .collect();
        if given.is_empty() {
            return (configured, Vec::new());
        }
        if trace_level < Severity::Info as u8 {
            return (given.to_vec(), Vec::new());
        }
        let notes = given
            .iter()
            .filter(|g| !configured.iter().any(|c| same_file(c, g)))
            .map(|g| {
                let list: Vec<String> =
                    configured.iter().map(|c| c.display().to_string()).collect();
                format!(
                    "note: reading {} given on the command line instead of the config's file = {}",
                    g.display(),
                    list.join(", ")
                )
            })
            .collect();
        (given.to_vec(), notes)
    }
}

/// Whether two paths name one file (compared as written, else by canonical path).
fn same_file(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// A whole configuration file, parsed, with its overrides applied.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    top: Block,
    file: Arc<str>,
    overrides: Vec<(String, String)>,
}

impl ConfigFile {
    /// Reads CNTK config text. `file` names it in errors.
    pub fn parse_cntk(text: &str, file: &str, overrides: &[(String, String)]) -> Result<Self> {
        Self::with_overrides(syntax::parse(text, file)?, file, overrides)
    }

    /// Reads the TOML form (same parameter names; see `docs/config.md`).
    pub fn parse_toml(text: &str, file: &str, overrides: &[(String, String)]) -> Result<Self> {
        Self::with_overrides(toml_form::parse(text, file)?, file, overrides)
    }

    /// Reads a file in the form its name says (TOML for `.toml`, CNTK's syntax otherwise) and
    /// predefines `ConfigDir` as the file's directory (a definition in the file or an override
    /// wins), as CNTK's test drivers pass it.
    pub fn open(path: impl AsRef<Path>, overrides: &[(String, String)]) -> Result<Self> {
        let path = path.as_ref();
        let text = read_config(path)?;
        let name = path.display().to_string();
        let mut top = if is_toml(path) {
            toml_form::parse(&text, &name)?
        } else {
            syntax::parse(&text, &name)?
        };
        if top.get("ConfigDir").is_none() {
            let dir = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let pos = Pos {
                origin: Origin::Predefined,
                ..Pos::default()
            };
            let node = Node {
                value: Value::Text(dir.display().to_string()),
                pos,
            };
            top.entries.insert(
                0,
                Entry {
                    key: "ConfigDir".into(),
                    key_pos: pos,
                    node,
                    replaced: None,
                },
            );
        }
        Self::with_overrides(top, &name, overrides)
    }

    fn with_overrides(mut top: Block, file: &str, overrides: &[(String, String)]) -> Result<Self> {
        for (i, (name, value)) in overrides.iter().enumerate() {
            resolve::apply_override(&mut top, i as u32, name, value)?;
        }
        Ok(ConfigFile {
            top,
            file: file.into(),
            overrides: overrides.to_vec(),
        })
    }

    /// The file's name as errors give it.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The sections `command` names (`command = Train:Output:Test`), in order; empty without one.
    pub fn commands(&self) -> Result<Vec<String>> {
        let Some(e) = self.top.get("command") else {
            return Ok(Vec::new());
        };
        let resolver = Resolver { file: &self.file };
        match resolver.resolve(&e.node, &e.key, &Scope::top(&self.top))? {
            Resolved::Text(t) => Ok(syntax::colon_list(&t)),
            Resolved::Array(items, _) => Ok(items
                .iter()
                .filter_map(|n| match &n.value {
                    Value::Text(t) => Some(t.trim().to_string()),
                    _ => None,
                })
                .collect()),
            _ => Err(error_at(
                ErrorKind::Config,
                &self.file,
                e.node.pos,
                "command must name sections: command = A:B",
            )),
        }
    }

    /// The top-level sections that hold a reader block, in file order.
    pub fn reader_sections(&self) -> Vec<String> {
        section_names(&self.top)
    }

    /// Whether the top level has a reader block of its own.
    pub fn has_top_level_reader(&self) -> bool {
        self.top.get("reader").is_some()
    }

    /// The section a command that reads data uses, and why: `section` if given; else the first
    /// section `command` lists that has a reader (its own or the top level's); else the
    /// top-level reader block; else the only section that has one.
    pub fn choose(&self, section: Option<&str>) -> Result<(Option<String>, Option<String>)> {
        if let Some(s) = section {
            return Ok((Some(s.to_string()), None));
        }
        let commands = self.commands()?;
        for c in &commands {
            let Some(e) = self.top.get(c) else { continue };
            if let Value::Block(b) = &e.node.value {
                if b.get("reader").is_some() || self.has_top_level_reader() {
                    let why = format!(
                        "the first section of command = {} that has a reader",
                        commands.join(":")
                    );
                    return Ok((Some(e.key.clone()), Some(why)));
                }
            }
        }
        if self.has_top_level_reader() {
            return Ok((None, None));
        }
        let names = self.reader_sections();
        match names.len() {
            0 => Err(self.no_pos_err("no reader block")),
            1 => Ok((
                Some(names[0].clone()),
                Some("the only section that has a reader".into()),
            )),
            n => Err(self.no_pos_err(format!(
                "{n} sections have a reader block, name one of them: {}",
                names.join(", ")
            ))),
        }
    }

    fn no_pos_err(&self, msg: impl Into<String>) -> Error {
        error_at(ErrorKind::Config, &self.file, Pos::default(), msg)
    }

    /// The resolved reader of `section` (or of the section [`ConfigFile::choose`] picks).
    pub fn reader(&self, section: Option<&str>) -> Result<SectionReader> {
        let (name, why) = self.choose(section)?;
        let mut r = self.reader_in(name.as_deref())?;
        r.chosen_because = why;
        Ok(r)
    }

    /// The reader of section `name` (`None`: the top-level reader block).
    fn reader_in(&self, name: Option<&str>) -> Result<SectionReader> {
        let top = Scope::top(&self.top);
        let (scope, reader, label) = match name {
            None => {
                let reader = self
                    .top
                    .get("reader")
                    .ok_or_else(|| self.no_pos_err("no reader block"))?;
                (top, reader, "the top-level reader".to_string())
            }
            Some(name) => {
                let list = self.reader_sections();
                let list = if list.is_empty() {
                    "none".to_string()
                } else {
                    list.join(", ")
                };
                let entry = self.top.get(name).ok_or_else(|| {
                    self.no_pos_err(format!(
                        "no section '{name}' (sections with a reader block: {list})"
                    ))
                })?;
                let Value::Block(sec) = &entry.node.value else {
                    return Err(error_at(
                        ErrorKind::Config,
                        &self.file,
                        entry.key_pos,
                        format!("'{}' is not a section", entry.key),
                    ));
                };
                // As in CNTK's scoped lookup, a section without its own reader uses the top level's.
                let reader = sec
                    .get("reader")
                    .or_else(|| self.top.get("reader"))
                    .ok_or_else(|| {
                        error_at(
                            ErrorKind::Config,
                            &self.file,
                            entry.key_pos,
                            format!("section '{}' has no reader block", entry.key),
                        )
                    })?;
                (
                    top.enter(&entry.key, sec),
                    reader,
                    format!("section '{}'", entry.key),
                )
            }
        };
        let cx = Cx::new(&self.file, &self.overrides, label);
        let config = cx.reader(&scope, reader)?;
        let mut warnings = self.stray_closer_warnings();
        warnings.extend(cx.warnings.into_inner());
        Ok(SectionReader {
            section: name.map(str::to_string),
            chosen_because: None,
            config,
            params: cx.params.into_inner(),
            warnings,
        })
    }

    /// A warning for each closing bracket at the top level that closes nothing: CNTK's parser
    /// reads it as a name alone (a flag set to true), and so does [`syntax::parse`].
    fn stray_closer_warnings(&self) -> Vec<String> {
        self.top
            .entries
            .iter()
            .filter(|e| e.key.starts_with([']', '}', ')']))
            .map(|e| {
                format!(
                    "{}:{}: '{}' closes nothing: read as a parameter named '{}' set to true, \
                     as CNTK reads it",
                    self.file,
                    e.key_pos.line,
                    &e.key[..1],
                    e.key
                )
            })
            .collect()
    }

    /// The reader of every section that has one (and of the top level), each resolved or the
    /// error that stops it, in file order: what `exfeed config` shows.
    pub fn all_readers(&self) -> Vec<(Option<String>, Result<SectionReader>)> {
        let mut out = Vec::new();
        if self.has_top_level_reader() {
            out.push((None, self.reader_in(None)));
        }
        for s in self.reader_sections() {
            let r = self.reader_in(Some(&s));
            out.push((Some(s), r));
        }
        out
    }
}

fn is_toml(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("toml"))
}

fn read_config(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    String::from_utf8(bytes).map_err(|_| {
        Error::config("the file is not UTF-8 text").in_file(path.display().to_string())
    })
}

impl ReaderConfig {
    /// Reads the reader block of CNTK config text. `file` names the text in errors. `section`
    /// selects a top-level section (`name = [ ... reader = [ ... ] ]`); without it, see
    /// [`ConfigFile::choose`].
    pub fn from_cntk_str(text: &str, file: &str, section: Option<&str>) -> Result<ReaderConfig> {
        Ok(ConfigFile::parse_cntk(text, file, &[])?
            .reader(section)?
            .config)
    }

    /// [`ReaderConfig::from_cntk_str`] on a file.
    pub fn from_cntk_file(path: impl AsRef<Path>, section: Option<&str>) -> Result<ReaderConfig> {
        let path = path.as_ref();
        Self::from_cntk_str(&read_config(path)?, &path.display().to_string(), section)
    }

    /// Reads the TOML form (same parameter names; see `docs/config.md`).
    pub fn from_toml_str(text: &str, file: &str, section: Option<&str>) -> Result<ReaderConfig> {
        Ok(ConfigFile::parse_toml(text, file, &[])?
            .reader(section)?
            .config)
    }

    /// [`ReaderConfig::from_toml_str`] on a file.
    pub fn from_toml_file(path: impl AsRef<Path>, section: Option<&str>) -> Result<ReaderConfig> {
        let path = path.as_ref();
        Self::from_toml_str(&read_config(path)?, &path.display().to_string(), section)
    }

    /// Reads a file in the form its name says: TOML for `.toml`, CNTK's syntax otherwise.
    pub fn from_file(path: impl AsRef<Path>, section: Option<&str>) -> Result<ReaderConfig> {
        Ok(Self::load(
            path,
            &ConfigOptions {
                section: section.map(str::to_string),
                ..Default::default()
            },
        )?
        .config)
    }

    /// Reads a file with its section and overrides ([`ConfigOptions`]): the reader, the section
    /// it comes from, and the warnings. `ConfigDir` is predefined ([`ConfigFile::open`]).
    pub fn load(path: impl AsRef<Path>, options: &ConfigOptions) -> Result<SectionReader> {
        ConfigFile::open(path, &options.overrides)?.reader(options.section.as_deref())
    }
}

/// The top-level sections of CNTK config text that hold a reader block, in file order.
pub fn cntk_sections(text: &str, file: &str) -> Result<Vec<String>> {
    Ok(section_names(&syntax::parse(text, file)?))
}

#[cfg(test)]
mod tests;
