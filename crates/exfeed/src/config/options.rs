//! The typed reader options and their conversion from a parsed configuration tree.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::syntax::{error_at, Block, Entry, Node, Pos, Value};
use crate::element::Precision;
use crate::error::{Error, ErrorKind, Result};
use crate::lens::materialize::Layout;
use crate::lens::select::SelectionMode;
use crate::stream::{Storage, StreamSpec};

/// CNTK's default `chunkSizeInBytes`: 32 MiB.
pub const DEFAULT_CHUNK_SIZE_BYTES: u64 = 32 * 1024 * 1024;

/// Which deserializer reads a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DeserializerKind {
    /// CNTK Text Format: readerType `CNTKTextFormatReader`, type `CNTKTextFormatDeserializer`.
    #[default]
    Ctf,
    /// CNTK Binary Format: readerType `CNTKBinaryReader`, type `CNTKBinaryFormatDeserializer`.
    Cbf,
    /// Lens example files (an exfeed extension): readerType `LensReader`, type `LensDeserializer`.
    Lens,
}

impl DeserializerKind {
    /// The `readerType` of the plain (non-composite) form, which is also the `module` name.
    pub fn reader_type(self) -> &'static str {
        match self {
            DeserializerKind::Ctf => "CNTKTextFormatReader",
            DeserializerKind::Cbf => "CNTKBinaryReader",
            DeserializerKind::Lens => "LensReader",
        }
    }

    /// The deserializer `type` of the composite form.
    pub fn deserializer_type(self) -> &'static str {
        match self {
            DeserializerKind::Ctf => "CNTKTextFormatDeserializer",
            DeserializerKind::Cbf => "CNTKBinaryFormatDeserializer",
            DeserializerKind::Lens => "LensDeserializer",
        }
    }

    const ALL: [DeserializerKind; 3] = [
        DeserializerKind::Ctf,
        DeserializerKind::Cbf,
        DeserializerKind::Lens,
    ];

    /// Whether an input may leave out `dim` and `format` (the file's header has them).
    pub fn inputs_described_by_file(self) -> bool {
        !matches!(self, DeserializerKind::Ctf)
    }
}

/// One deserializer: a file, its format and the inputs read from it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DeserializerConfig {
    /// The file's format.
    pub kind: DeserializerKind,
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
    /// `chunkSizeInBytes` set in this deserializer's block (overrides the reader's).
    pub chunk_size_bytes: Option<u64>,
    /// `keepDataInMemory` set in this deserializer's block (overrides the reader's).
    pub keep_data_in_memory: Option<bool>,
    /// `frameMode` set in this deserializer's block (overrides the reader's).
    pub frame_mode: Option<bool>,
    /// `cacheIndex` set in this deserializer's block (overrides the reader's).
    pub cache_index: Option<bool>,
    /// Lens (exfeed): `inputGroups = "NAME:SIZE,..."`, the network's input groups in order.
    pub input_groups: Option<Layout>,
    /// Lens (exfeed): `targetGroups = "NAME:SIZE,..."`, the network's target groups in order.
    pub target_groups: Option<Layout>,
    /// Lens (exfeed): `nanValue`, the value NaN becomes (unset: NaN stays NaN).
    pub nan: Option<f32>,
}

impl DeserializerConfig {
    /// A deserializer of `kind` for `file` with `inputs` and no per-deserializer overrides.
    pub fn new(kind: DeserializerKind, file: impl Into<PathBuf>, inputs: Vec<StreamSpec>) -> Self {
        DeserializerConfig {
            kind,
            file: file.into(),
            inputs,
            ..Default::default()
        }
    }

    /// The file resolved against `dir` (unchanged when it is absolute).
    pub fn resolve_file(&self, dir: &Path) -> PathBuf {
        dir.join(&self.file)
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

    /// `chunkSizeInBytes` in effect: this block's, else the reader's.
    pub fn effective_chunk_size_bytes(&self, reader: &ReaderConfig) -> u64 {
        self.chunk_size_bytes.unwrap_or(reader.chunk_size_bytes)
    }

    /// `keepDataInMemory` in effect: this block's, else the reader's.
    pub fn effective_keep_data_in_memory(&self, reader: &ReaderConfig) -> bool {
        self.keep_data_in_memory
            .unwrap_or(reader.keep_data_in_memory)
    }

    /// `frameMode` in effect: this block's, else the reader's.
    pub fn effective_frame_mode(&self, reader: &ReaderConfig) -> bool {
        self.frame_mode.unwrap_or(reader.frame_mode)
    }

    /// `cacheIndex` in effect: this block's, else the reader's.
    pub fn effective_cache_index(&self, reader: &ReaderConfig) -> bool {
        self.cache_index.unwrap_or(reader.cache_index)
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
    /// `skipSequenceIds` (default false).
    pub skip_sequence_ids: bool,
    /// `traceLevel` (default 1): 0 errors, 1 warnings too, 2 everything. `verbosity` sets it too.
    pub trace_level: u8,
    /// `maxErrors` (default 0: the first error is fatal).
    pub max_errors: u64,
    /// `chunkSizeInBytes` (default 32 MiB).
    pub chunk_size_bytes: u64,
    /// `keepDataInMemory` (default false).
    pub keep_data_in_memory: bool,
    /// `frameMode` (default false).
    pub frame_mode: bool,
    /// `cacheIndex` (default false).
    pub cache_index: bool,
    /// `lensMode` (exfeed): Lens's example selection (ORDERED, PERMUTED, RANDOMIZED,
    /// PROBABILISTIC) instead of `randomize` and the window; see
    /// [`SelectionMode::apply_to`](crate::lens::select::SelectionMode::apply_to).
    pub lens_mode: Option<SelectionMode>,
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
            skip_sequence_ids: false,
            trace_level: 1,
            max_errors: 0,
            chunk_size_bytes: DEFAULT_CHUNK_SIZE_BYTES,
            keep_data_in_memory: false,
            frame_mode: false,
            cache_index: false,
            lens_mode: None,
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
            .any(|d| d.kind == DeserializerKind::Ctf);
        if self.sample_based_randomization_window || !has_ctf {
            None
        } else {
            Some(((4u64 << 30) / self.chunk_size_bytes.max(1)).max(1))
        }
    }

    /// Resolves every deserializer's file against `dir` (see [`DeserializerConfig::resolve_file`]).
    pub fn resolve_files(&mut self, dir: &Path) {
        for d in &mut self.deserializers {
            d.file = d.resolve_file(dir);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// From the tree to the options.

const READER_PARAMS: &[&str] = &[
    "readerType",
    "file",
    "input",
    "deserializers",
    "precision",
    "randomize",
    "randomizationSeed",
    "randomizationWindow",
    "sampleBasedRandomizationWindow",
    "skipSequenceIds",
    "maxErrors",
    "traceLevel",
    "verbosity",
    "chunkSizeInBytes",
    "keepDataInMemory",
    "frameMode",
    "cacheIndex",
    "lensMode",
    "inputGroups",
    "targetGroups",
    "nanValue",
    // The composite reader's own parameters that exfeed checks but does not need.
    "truncated",
    "truncationLength",
    "multiThreadedDeserialization",
    "useNumericSequenceKeys",
    "hashSequenceKeys",
];
const DESERIALIZER_PARAMS: &[&str] = &[
    "type",
    "module",
    "file",
    "input",
    "skipSequenceIds",
    "maxErrors",
    "traceLevel",
    "chunkSizeInBytes",
    "keepDataInMemory",
    "frameMode",
    "cacheIndex",
    "inputGroups",
    "targetGroups",
    "nanValue",
];
const INPUT_PARAMS: &[&str] = &["alias", "dim", "format", "definesMBSize"];

/// Converts the parsed tree, choosing the section that holds the reader block.
pub(crate) fn reader_from_tree(
    top: &Block,
    file: &str,
    section: Option<&str>,
) -> Result<ReaderConfig> {
    let file: Arc<str> = file.into();
    let cx = Cx { file: &file };
    let (scopes, reader) = select_section(top, section, &file)?;
    cx.reader(&scopes, reader)
}

/// Names of the top-level sections that contain a `reader` block, in file order.
pub(crate) fn section_names(top: &Block) -> Vec<String> {
    top.entries
        .iter()
        .filter(|e| matches!(&e.node.value, Value::Block(b) if b.get("reader").is_some()))
        .map(|e| e.key.clone())
        .collect()
}

fn select_section<'a>(
    top: &'a Block,
    section: Option<&str>,
    file: &Arc<str>,
) -> Result<(Vec<&'a Block>, &'a Entry)> {
    let names = section_names(top);
    let list = if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    };
    let no_pos = Pos::default();
    match section {
        Some(name) => {
            let entry = top.get(name).ok_or_else(|| {
                error_at(
                    ErrorKind::Config,
                    file,
                    no_pos,
                    format!("no section '{name}' (sections with a reader block: {list})"),
                )
            })?;
            let Value::Block(sec) = &entry.node.value else {
                return Err(error_at(
                    ErrorKind::Config,
                    file,
                    entry.key_pos,
                    format!("'{}' is not a section", entry.key),
                ));
            };
            // As in CNTK's scoped lookup, a section without its own reader uses the top level's.
            let reader = sec
                .get("reader")
                .or_else(|| top.get("reader"))
                .ok_or_else(|| {
                    error_at(
                        ErrorKind::Config,
                        file,
                        entry.key_pos,
                        format!("section '{}' has no reader block", entry.key),
                    )
                })?;
            Ok((vec![top, sec], reader))
        }
        None => {
            if let Some(reader) = top.get("reader") {
                return Ok((vec![top], reader));
            }
            match names.len() {
                0 => Err(error_at(ErrorKind::Config, file, no_pos, "no reader block")),
                1 => select_section(top, Some(&names[0]), file),
                n => Err(error_at(
                    ErrorKind::Config,
                    file,
                    no_pos,
                    format!("{n} sections have a reader block, name one of them: {list}"),
                )),
            }
        }
    }
}

/// The conversion context: the file name that errors carry.
struct Cx<'f> {
    file: &'f Arc<str>,
}

/// Known parameters of one block, checked as they are met: unknown names and repeats are errors.
struct Seen {
    known: &'static [&'static str],
    what: &'static str,
    context: Option<String>,
    seen: Vec<(&'static str, Pos)>,
}

impl Cx<'_> {
    fn err(&self, pos: Pos, context: Option<&str>, msg: impl Into<String>) -> Error {
        let e = error_at(ErrorKind::Config, self.file, pos, msg);
        match context {
            Some(c) => e.in_context(c.to_string()),
            None => e,
        }
    }

    /// The canonical name of `entry`'s key among `seen.known`, or an error.
    fn param(&self, seen: &mut Seen, entry: &Entry) -> Result<&'static str> {
        let ctx = seen.context.as_deref();
        let Some(name) = seen
            .known
            .iter()
            .copied()
            .find(|k| k.eq_ignore_ascii_case(&entry.key))
        else {
            let mut msg = format!("unknown {} parameter '{}'", seen.what, entry.key);
            let reader_param = READER_PARAMS
                .iter()
                .any(|k| k.eq_ignore_ascii_case(&entry.key));
            if seen.what == "deserializer" && reader_param {
                msg = format!(
                    "'{}' is a reader parameter: set it in the reader block, not in a deserializer",
                    entry.key
                );
            } else if let Some(near) = nearest(&entry.key, seen.known) {
                msg.push_str(&format!(" (did you mean '{near}'?)"));
            }
            return Err(self.err(entry.key_pos, ctx, msg));
        };
        if let Some((_, first)) = seen.seen.iter().find(|(n, _)| *n == name) {
            return Err(self.err(
                entry.key_pos,
                ctx,
                format!(
                    "'{}' is set twice (first on line {})",
                    entry.key, first.line
                ),
            ));
        }
        seen.seen.push((name, entry.key_pos));
        Ok(name)
    }

    fn text<'n>(&self, node: &'n Node, name: &str, ctx: Option<&str>) -> Result<&'n str> {
        match &node.value {
            Value::Text(t) => Ok(t),
            Value::Block(_) => Err(self.err(
                node.pos,
                ctx,
                format!("{name} must be a value, found a block"),
            )),
            Value::Array(_) => Err(self.err(
                node.pos,
                ctx,
                format!("{name} must be a value, found an array"),
            )),
        }
    }

    fn block<'n>(&self, node: &'n Node, name: &str, ctx: Option<&str>) -> Result<&'n Block> {
        match &node.value {
            Value::Block(b) => Ok(b),
            Value::Text(t) => Err(self.err(
                node.pos,
                ctx,
                format!("{name} must be a block [ ... ], found '{t}'"),
            )),
            Value::Array(_) => Err(self.err(
                node.pos,
                ctx,
                format!("{name} must be a block [ ... ], found an array"),
            )),
        }
    }

    fn bool(&self, node: &Node, name: &str, ctx: Option<&str>) -> Result<bool> {
        let t = self.text(node, name, ctx)?;
        // CNTK's ConfigValue also takes t/f and 1/0.
        if ["true", "t", "1"].iter().any(|w| t.eq_ignore_ascii_case(w)) {
            Ok(true)
        } else if ["false", "f", "0"]
            .iter()
            .any(|w| t.eq_ignore_ascii_case(w))
        {
            Ok(false)
        } else {
            Err(self.err(
                node.pos,
                ctx,
                format!("{name} must be true or false, found '{t}'"),
            ))
        }
    }

    fn uint(&self, node: &Node, name: &str, ctx: Option<&str>, positive: bool) -> Result<u64> {
        let t = self.text(node, name, ctx)?;
        match t.parse::<u64>() {
            Ok(v) if v > 0 || !positive => Ok(v),
            _ => {
                let what = if positive {
                    "a positive integer"
                } else {
                    "a non-negative integer"
                };
                Err(self.err(node.pos, ctx, format!("{name} must be {what}, found '{t}'")))
            }
        }
    }

    fn layout(&self, node: &Node, name: &str, ctx: Option<&str>) -> Result<Layout> {
        let t = self.text(node, name, ctx)?;
        Layout::parse(t).map_err(|e| self.err(node.pos, ctx, format!("{name}: {}", e.message())))
    }

    fn real(&self, node: &Node, name: &str, ctx: Option<&str>) -> Result<f32> {
        let t = self.text(node, name, ctx)?;
        match t.parse::<f32>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(self.err(
                node.pos,
                ctx,
                format!("{name} must be a finite number, found '{t}'"),
            )),
        }
    }

    /// Sets a Lens parameter of `d` (`inputGroups`, `targetGroups`, `nanValue`).
    fn lens_param(
        &self,
        d: &mut DeserializerConfig,
        name: &str,
        node: &Node,
        ctx: Option<&str>,
    ) -> Result<()> {
        match name {
            "inputGroups" => d.input_groups = Some(self.layout(node, name, ctx)?),
            "targetGroups" => d.target_groups = Some(self.layout(node, name, ctx)?),
            _ => d.nan = Some(self.real(node, name, ctx)?),
        }
        Ok(())
    }

    fn trace_level(&self, node: &Node, name: &str, ctx: Option<&str>) -> Result<u8> {
        // 0 errors, 1 warnings, 2 everything; CNTK treats higher levels as 2, and so do we.
        let v = self.uint(node, name, ctx, false)?;
        Ok(u8::try_from(v).unwrap_or(u8::MAX))
    }

    fn precision(&self, node: &Node) -> Result<Precision> {
        let t = self.text(node, "precision", None)?;
        t.to_ascii_lowercase()
            .parse()
            .map_err(|e: String| self.err(node.pos, None, e))
    }

    fn kind(
        &self,
        node: &Node,
        name: &str,
        ctx: Option<&str>,
        of: fn(DeserializerKind) -> &'static str,
    ) -> Result<DeserializerKind> {
        let t = self.text(node, name, ctx)?;
        DeserializerKind::ALL
            .into_iter()
            .find(|k| of(*k).eq_ignore_ascii_case(t))
            .ok_or_else(|| {
                let names: Vec<_> = DeserializerKind::ALL.into_iter().map(of).collect();
                self.err(
                    node.pos,
                    ctx,
                    format!("unknown {name} '{t}' (known: {})", names.join(", ")),
                )
            })
    }

    fn reader(&self, scopes: &[&Block], reader_entry: &Entry) -> Result<ReaderConfig> {
        let reader = self.block(&reader_entry.node, "reader", None)?;
        let mut cfg = ReaderConfig::default();
        // precision: the innermost of the enclosing blocks that sets it; the reader's own wins.
        if let Some(e) = scopes.iter().rev().find_map(|b| b.get("precision")) {
            cfg.precision = self.precision(&e.node)?;
        }
        let mut seen = Seen::new(READER_PARAMS, "reader", None);
        let mut kind = None;
        let mut file = None;
        let mut input = None;
        let mut deserializers = None;
        let mut verbosity = None;
        let mut trace_level = None;
        let mut sample_based = None;
        // Lens parameters of the plain form, applied to its one deserializer.
        let mut lens_params: Vec<&Entry> = Vec::new();
        let mut lens_mode_at = None;
        for e in &reader.entries {
            let n = &e.node;
            match self.param(&mut seen, e)? {
                "readerType" => {
                    kind = Some(self.kind(n, "readerType", None, DeserializerKind::reader_type)?)
                }
                "file" => file = Some((self.text(n, "file", None)?, e)),
                "input" => input = Some(e),
                "deserializers" => deserializers = Some(e),
                "precision" => cfg.precision = self.precision(n)?,
                "randomize" => cfg.randomize = self.bool(n, "randomize", None)?,
                "randomizationSeed" => {
                    cfg.randomization_seed = self.uint(n, "randomizationSeed", None, false)?
                }
                "randomizationWindow" => {
                    cfg.randomization_window =
                        Some(self.uint(n, "randomizationWindow", None, true)?)
                }
                "sampleBasedRandomizationWindow" => {
                    sample_based = Some(self.bool(n, "sampleBasedRandomizationWindow", None)?)
                }
                "skipSequenceIds" => {
                    cfg.skip_sequence_ids = self.bool(n, "skipSequenceIds", None)?
                }
                "maxErrors" => cfg.max_errors = self.uint(n, "maxErrors", None, false)?,
                "traceLevel" => trace_level = Some(self.trace_level(n, "traceLevel", None)?),
                "verbosity" => verbosity = Some(self.trace_level(n, "verbosity", None)?),
                "chunkSizeInBytes" => {
                    cfg.chunk_size_bytes = self.uint(n, "chunkSizeInBytes", None, true)?
                }
                "keepDataInMemory" => {
                    cfg.keep_data_in_memory = self.bool(n, "keepDataInMemory", None)?
                }
                "frameMode" => cfg.frame_mode = self.bool(n, "frameMode", None)?,
                "cacheIndex" => cfg.cache_index = self.bool(n, "cacheIndex", None)?,
                "lensMode" => {
                    let t = self.text(n, "lensMode", None)?;
                    cfg.lens_mode = Some(t.parse().map_err(|e: Error| {
                        self.err(n.pos, None, format!("lensMode: {}", e.message()))
                    })?);
                    lens_mode_at = Some(e.key_pos);
                }
                "inputGroups" | "targetGroups" | "nanValue" => lens_params.push(e),
                "truncated" => {
                    if self.bool(n, "truncated", None)? {
                        let msg = "truncated back-propagation through time (truncated = true) is not supported";
                        return Err(error_at(ErrorKind::Unsupported, self.file, n.pos, msg));
                    }
                }
                "truncationLength" => {
                    self.uint(n, "truncationLength", None, false)?;
                }
                // Performance and key-storage hints of CNTK's composite reader: no effect here.
                "multiThreadedDeserialization" | "useNumericSequenceKeys" | "hashSequenceKeys" => {
                    self.bool(n, "a composite reader flag", None)?;
                }
                other => unreachable!("{other} is in READER_PARAMS"),
            }
        }
        cfg.trace_level = trace_level.or(verbosity).unwrap_or(cfg.trace_level);
        if let Some(list) = deserializers {
            // The composite form: file and input belong in the deserializer blocks.
            let lens_first = lens_params.first().copied();
            let lens_what = lens_first.map_or("", |e| e.key.as_str());
            for (what, e) in [
                ("file", file.map(|f| f.1)),
                ("input", input),
                (lens_what, lens_first),
            ] {
                if let Some(e) = e {
                    return Err(self.err(
                        e.key_pos,
                        None,
                        format!("'{what}' belongs in a deserializer block when 'deserializers' is given"),
                    ));
                }
            }
            let items: Vec<&Node> = match &list.node.value {
                Value::Array(items) => items.iter().collect(),
                Value::Block(_) => vec![&list.node],
                Value::Text(t) => {
                    return Err(self.err(
                        list.node.pos,
                        None,
                        format!("deserializers must be ([ ... ] : ...), found '{t}'"),
                    ))
                }
            };
            if items.is_empty() {
                return Err(self.err(list.node.pos, None, "deserializers is empty"));
            }
            for (i, item) in items.into_iter().enumerate() {
                let ctx = format!("deserializer {}", i + 1);
                let block = self.block(item, "a deserializer", Some(&ctx))?;
                cfg.deserializers
                    .push(self.deserializer(block, item.pos, &ctx)?);
            }
        } else {
            let Some(kind) = kind else {
                return Err(self.err(
                    reader_entry.key_pos,
                    None,
                    "reader block has no 'readerType' (or 'deserializers')",
                ));
            };
            let Some((path, _)) = file else {
                return Err(self.err(reader_entry.key_pos, None, "reader block has no 'file'"));
            };
            let inputs = match input {
                Some(e) => self.inputs(&e.node, kind, None)?,
                None => Vec::new(),
            };
            if inputs.is_empty() && !kind.inputs_described_by_file() {
                return Err(self.err(reader_entry.key_pos, None, "reader block has no 'input'"));
            }
            let mut d = DeserializerConfig {
                kind,
                file: path.into(),
                inputs,
                ..Default::default()
            };
            for e in lens_params {
                if kind != DeserializerKind::Lens {
                    return Err(self.err(
                        e.key_pos,
                        None,
                        format!(
                            "'{}' applies to Lens example files (readerType LensReader)",
                            e.key
                        ),
                    ));
                }
                let name = READER_PARAMS
                    .iter()
                    .find(|k| k.eq_ignore_ascii_case(&e.key))
                    .copied()
                    .unwrap_or("nanValue");
                self.lens_param(&mut d, name, &e.node, None)?;
            }
            cfg.deserializers.push(d);
        }
        if let Some(pos) = lens_mode_at {
            // The mode decides the order; the block randomizer's parameters would contradict it.
            for p in [
                "randomize",
                "randomizationWindow",
                "sampleBasedRandomizationWindow",
            ] {
                if seen.seen.iter().any(|(n, _)| *n == p) {
                    return Err(self.err(
                        pos,
                        None,
                        format!("lensMode decides the example order; do not set '{p}' with it"),
                    ));
                }
            }
        }
        // CNTK's composite reader counts the window in samples unless a CTF deserializer is
        // present (the CTF reader counts chunks); the binary reader's window is in samples.
        let has_ctf = cfg
            .deserializers
            .iter()
            .any(|d| d.kind == DeserializerKind::Ctf);
        cfg.sample_based_randomization_window = sample_based.unwrap_or(!has_ctf);
        Ok(cfg)
    }

    fn deserializer(&self, block: &Block, pos: Pos, ctx: &str) -> Result<DeserializerConfig> {
        let c = Some(ctx);
        let mut seen = Seen::new(DESERIALIZER_PARAMS, "deserializer", Some(ctx.to_string()));
        let mut d = DeserializerConfig::default();
        let (mut kind, mut module, mut file, mut input) = (None, None, None, None);
        let mut lens = Vec::new();
        for e in &block.entries {
            let n = &e.node;
            match self.param(&mut seen, e)? {
                "type" => {
                    kind = Some(self.kind(n, "type", c, DeserializerKind::deserializer_type)?)
                }
                "module" => {
                    module = Some((
                        self.kind(n, "module", c, DeserializerKind::reader_type)?,
                        n.pos,
                    ))
                }
                "file" => file = Some(self.text(n, "file", c)?),
                "input" => input = Some(n),
                "skipSequenceIds" => {
                    d.skip_sequence_ids = Some(self.bool(n, "skipSequenceIds", c)?)
                }
                "maxErrors" => d.max_errors = Some(self.uint(n, "maxErrors", c, false)?),
                "traceLevel" => d.trace_level = Some(self.trace_level(n, "traceLevel", c)?),
                "chunkSizeInBytes" => {
                    d.chunk_size_bytes = Some(self.uint(n, "chunkSizeInBytes", c, true)?)
                }
                "keepDataInMemory" => {
                    d.keep_data_in_memory = Some(self.bool(n, "keepDataInMemory", c)?)
                }
                "frameMode" => d.frame_mode = Some(self.bool(n, "frameMode", c)?),
                "cacheIndex" => d.cache_index = Some(self.bool(n, "cacheIndex", c)?),
                name @ ("inputGroups" | "targetGroups" | "nanValue") => {
                    lens.push((name, e));
                    self.lens_param(&mut d, name, n, c)?;
                }
                other => unreachable!("{other} is in DESERIALIZER_PARAMS"),
            }
        }
        let Some(kind) = kind else {
            return Err(self.err(pos, c, "no 'type'"));
        };
        if let Some((m, mpos)) = module {
            if m != kind {
                return Err(self.err(
                    mpos,
                    c,
                    format!(
                        "module '{}' does not provide type '{}'",
                        m.reader_type(),
                        kind.deserializer_type()
                    ),
                ));
            }
        }
        if let Some((name, e)) = lens.first() {
            if kind != DeserializerKind::Lens {
                return Err(self.err(
                    e.key_pos,
                    c,
                    format!("'{name}' applies to Lens example files (type LensDeserializer)"),
                ));
            }
        }
        d.kind = kind;
        d.file = file.ok_or_else(|| self.err(pos, c, "no 'file'"))?.into();
        if let Some(n) = input {
            d.inputs = self.inputs(n, kind, Some(ctx))?;
        }
        if d.inputs.is_empty() && !kind.inputs_described_by_file() {
            return Err(self.err(pos, c, "no 'input'"));
        }
        Ok(d)
    }

    fn inputs(
        &self,
        node: &Node,
        kind: DeserializerKind,
        ctx: Option<&str>,
    ) -> Result<Vec<StreamSpec>> {
        let block = self.block(node, "input", ctx)?;
        let mut out: Vec<StreamSpec> = Vec::with_capacity(block.entries.len());
        for e in &block.entries {
            let ctx = format!("input '{}'", e.key);
            let c = Some(ctx.as_str());
            if let Some(prev) = out.iter().find(|s| s.name.eq_ignore_ascii_case(&e.key)) {
                return Err(self.err(
                    e.key_pos,
                    None,
                    format!("input '{}' is defined twice", prev.name),
                ));
            }
            let b = self.block(&e.node, "an input", c)?;
            let mut seen = Seen::new(INPUT_PARAMS, "input", Some(ctx.clone()));
            let mut spec = StreamSpec::new(e.key.clone(), Storage::Dense, 0);
            let (mut dim, mut format) = (None, None);
            for p in &b.entries {
                let n = &p.node;
                match self.param(&mut seen, p)? {
                    "alias" => {
                        let a = self.text(n, "alias", c)?;
                        if a.is_empty() {
                            return Err(self.err(n.pos, c, "alias is empty"));
                        }
                        spec.alias = Some(a.to_string());
                    }
                    "dim" => dim = Some(self.uint(n, "dim", c, true)?),
                    "format" => {
                        let t = self.text(n, "format", c)?;
                        format = Some(
                            t.to_ascii_lowercase()
                                .parse::<Storage>()
                                .map_err(|m| self.err(n.pos, c, m))?,
                        );
                    }
                    "definesMBSize" => spec.defines_mb_size = self.bool(n, "definesMBSize", c)?,
                    other => unreachable!("{other} is in INPUT_PARAMS"),
                }
            }
            match (dim, format) {
                (Some(d), Some(f)) => {
                    let limit = f.max_dim();
                    if d > limit {
                        return Err(self.err(
                            e.key_pos,
                            c,
                            format!("dim {d} of a {f} input is larger than {limit}"),
                        ));
                    }
                    spec.dim = d as usize;
                    spec.storage = f;
                }
                (None, None) if kind.inputs_described_by_file() => {}
                (None, Some(_)) if !kind.inputs_described_by_file() => {
                    return Err(self.err(e.key_pos, c, "no 'dim'"))
                }
                (Some(_), None) if !kind.inputs_described_by_file() => {
                    return Err(self.err(e.key_pos, c, "no 'format' (dense or sparse)"))
                }
                (None, None) => return Err(self.err(e.key_pos, c, "no 'dim' and no 'format'")),
                _ => {
                    return Err(self.err(
                        e.key_pos,
                        c,
                        "give both 'dim' and 'format' or neither (then the file's header says)",
                    ))
                }
            }
            // Names in the data file must tell inputs apart (CNTK: "Alias ... is already mapped").
            if let Some(other) = out.iter().find(|s| s.name_in_file() == spec.name_in_file()) {
                return Err(self.err(
                    e.key_pos,
                    c,
                    format!(
                        "'{}' in the file already stands for input '{}'",
                        spec.name_in_file(),
                        other.name
                    ),
                ));
            }
            out.push(spec);
        }
        Ok(out)
    }
}

impl Seen {
    fn new(known: &'static [&'static str], what: &'static str, context: Option<String>) -> Self {
        Seen {
            known,
            what,
            context,
            seen: Vec::new(),
        }
    }
}

/// The known name closest to `name` when it is a plausible typo (edit distance at most 2).
fn nearest(name: &str, known: &[&'static str]) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    known
        .iter()
        .map(|k| (edit_distance(&lower, &k.to_ascii_lowercase()), *k))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len().abs_diff(b.len()) > 2 || a.len() > 64 {
        return 3;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}
