//! From the parsed tree to the typed options: every reader parameter read, checked and
//! resolved (variables substituted lazily, in their scope), with where its value came from.

use std::cell::RefCell;
use std::sync::Arc;

use super::options::{
    deserializer_type, inputs_described_by_file, reader_type, DeserializerConfig, ReaderConfig,
    DESERIALIZER_FORMATS,
};
use super::resolve::{Resolved, Resolver, Scope};
use super::syntax::{error_at, Block, Entry, Origin, Pos, Value};
use super::Param;
use crate::element::Precision;
use crate::error::{Error, ErrorKind, Result};
use crate::format::FileFormat;
use crate::io::{Corpus, MixSpec};
use crate::lens::materialize::Layout;
use crate::options::{ChunkSize, IndexMode, ReadOptions};
use crate::stream::{Storage, StreamSpec};

/// A reader block's parameters, besides [`READ_PARAMS`].
const READER_PARAMS: &[&str] = &[
    "readerType",
    "file",
    "corpus",
    "mix",
    "mixEpochSamples",
    "input",
    "deserializers",
    "precision",
    "randomize",
    "randomizationSeed",
    "randomizationWindow",
    "sampleBasedRandomizationWindow",
    "randomizationWindowInBytes",
    "skipSequenceIds",
    "maxErrors",
    "traceLevel",
    "verbosity",
    "lensMode",
    "maxRecordSizeInBytes",
    "equalize",
    "equalizeMode",
    "randomizer",
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
/// Parameters CNTK's reader layer accepts in a reader block that exfeed has no use for:
/// a warning names them, they are not errors.
const READER_ACCEPTED_UNUSED: &[&str] =
    &["numMBsToShowResult", "prefetch", "miniBatchMode", "module"];
/// A deserializer block's parameters, besides [`READ_PARAMS`].
const DESERIALIZER_PARAMS: &[&str] = &[
    "type",
    "module",
    "file",
    "corpus",
    "mix",
    "mixEpochSamples",
    "input",
    "skipSequenceIds",
    "maxErrors",
    "traceLevel",
    "inputGroups",
    "targetGroups",
    "nanValue",
];
/// The parameters of [`ReadOptions`], in a reader block or a deserializer's (see
/// [`Cx::read_param`]).
const READ_PARAMS: &[&str] = &[
    "chunkSizeInBytes",
    "keepDataInMemory",
    "frameMode",
    "cacheIndex",
    "index",
    "cacheDir",
    "cacheLimitInBytes",
];
const INPUT_PARAMS: &[&str] = &["alias", "dim", "format", "definesMBSize"];
/// Deserializer types and reader types of CNTK that exfeed does not read: named in a clear
/// error, not taken for typos.
const CNTK_OTHER_DESERIALIZERS: &[&str] = &[
    "ImageDeserializer",
    "Base64ImageDeserializer",
    "HTKFeatureDeserializer",
    "HTKMLFDeserializer",
    "LatticeDeserializer",
];
const CNTK_OTHER_READERS: &[&str] = &[
    "ImageReader",
    "HTKMLFReader",
    "HTKDeserializers",
    "UCIFastReader",
    "LMSequenceReader",
    "LUSequenceReader",
    "BinaryReader",
    "DSSMReader",
    "LibSVMBinaryReader",
    "SparsePCReader",
    "Kaldi2Reader",
    "ImageDeserializers",
];
/// The composite reader's own name: accepted as a `readerType` beside `deserializers`.
const COMPOSITE_READER: &str = "CompositeDataReader";

/// The conversion context: the file name errors carry, what was read, and the warnings.
pub(crate) struct Cx<'f> {
    file: &'f Arc<str>,
    resolver: Resolver<'f>,
    overrides: &'f [(String, String)],
    /// `--set NAME=VALUE` for each override, naming it in errors.
    override_labels: Vec<Arc<str>>,
    /// "section 'Train'" or "the top-level reader", for messages.
    pub(crate) section: String,
    pub(crate) params: RefCell<Vec<Param>>,
    pub(crate) warnings: RefCell<Vec<String>>,
}

/// Known parameters of one block, checked as they are met.
struct Seen {
    known: Vec<&'static str>,
    what: &'static str,
    context: Option<String>,
    seen: Vec<&'static str>,
}

impl Seen {
    fn new(known: &[&'static [&'static str]], what: &'static str, context: Option<String>) -> Self {
        Seen {
            known: known.concat(),
            what,
            context,
            seen: Vec::new(),
        }
    }
}

impl<'f> Cx<'f> {
    pub(crate) fn new(
        file: &'f Arc<str>,
        overrides: &'f [(String, String)],
        section: String,
    ) -> Self {
        Cx {
            file,
            resolver: Resolver { file },
            overrides,
            override_labels: overrides
                .iter()
                .map(|(n, v)| format!("--set {n}={v}").into())
                .collect(),
            section,
            params: RefCell::new(Vec::new()),
            warnings: RefCell::new(Vec::new()),
        }
    }

    fn err(&self, pos: Pos, context: Option<&str>, msg: impl Into<String>) -> Error {
        let e = error_at(ErrorKind::Config, self.label(pos), pos, msg);
        match context {
            Some(c) => e.in_context(c.to_string()),
            None => e,
        }
    }

    /// The name of the text `pos` is in: the file, or the override.
    fn label(&self, pos: Pos) -> &Arc<str> {
        match pos.origin {
            Origin::Override(i) => &self.override_labels[i as usize],
            _ => self.file,
        }
    }

    /// Where a value came from, for `exfeed config`.
    pub(crate) fn origin(&self, pos: Pos) -> String {
        match pos.origin {
            Origin::File => format!("{}:{}:{}", self.file, pos.line, pos.column),
            Origin::Override(i) => {
                let (n, v) = &self.overrides[i as usize];
                format!("--set {n}={v}")
            }
            Origin::Predefined => "predefined".into(),
        }
    }

    /// Where a parameter was set, in a message about the file: its line, or the override.
    fn place(&self, pos: Pos) -> String {
        match pos.origin {
            Origin::File => format!("line {}", pos.line),
            _ => self.origin(pos),
        }
    }

    fn warn(&self, msg: String) {
        self.warnings.borrow_mut().push(msg);
    }

    /// The canonical name of `entry`'s key among `seen.known`; `None` for a parameter CNTK
    /// accepts that exfeed does not need (warned about); an error for an unknown one.
    fn param(
        &self,
        seen: &mut Seen,
        entry: &Entry,
        unused: &[&str],
    ) -> Result<Option<&'static str>> {
        let ctx = seen.context.as_deref();
        let Some(name) = seen
            .known
            .iter()
            .copied()
            .find(|k| k.eq_ignore_ascii_case(&entry.key))
        else {
            if let Some(u) = unused.iter().find(|k| k.eq_ignore_ascii_case(&entry.key)) {
                self.warn(format!(
                    "{}: {}'{u}' ({}) is a CNTK reader parameter exfeed does not need; ignored",
                    self.section,
                    ctx.map_or(String::new(), |c| format!("{c}: ")),
                    self.place(entry.key_pos)
                ));
                return Ok(None);
            }
            let mut msg = format!("unknown {} parameter '{}'", seen.what, entry.key);
            let reader_param = READER_PARAMS
                .iter()
                .any(|k| k.eq_ignore_ascii_case(&entry.key));
            if seen.what == "deserializer" && reader_param {
                msg = format!(
                    "'{}' is a reader parameter: set it in the reader block, not in a deserializer",
                    entry.key
                );
            } else if let Some(near) = nearest(&entry.key, &seen.known) {
                msg.push_str(&format!(" (did you mean '{near}'?)"));
            }
            return Err(self.err(entry.key_pos, ctx, msg));
        };
        if let Some((first, again)) = entry.replaced {
            self.warn(format!(
                "{}: {}'{}' is set twice (lines {} and {}); the later value is used, as in CNTK",
                self.section,
                ctx.map_or(String::new(), |c| format!("{c}: ")),
                entry.key,
                first.line,
                again.line
            ));
        }
        seen.seen.push(name);
        Ok(Some(name))
    }

    fn resolve<'a>(&self, e: &'a Entry, scope: &Scope<'a>) -> Result<Resolved<'a>> {
        self.resolver.resolve(&e.node, &e.key, scope)
    }

    /// The text value of `e` (variables substituted), recorded as read.
    fn text<'a>(
        &self,
        e: &'a Entry,
        scope: &Scope<'a>,
        name: &str,
        ctx: Option<&str>,
    ) -> Result<String> {
        let pos = e.node.pos;
        match self.resolve(e, scope)? {
            Resolved::Text(t) => {
                let name = match ctx {
                    Some(c) => format!("{c}: {name}"),
                    None => name.to_string(),
                };
                let mut params = self.params.borrow_mut();
                params.retain(|p| p.name != name);
                params.push(Param {
                    name,
                    value: t.clone(),
                    from: self.origin(pos),
                });
                Ok(t)
            }
            other => Err(self.err(
                pos,
                ctx,
                format!("{name} must be a value, found {}", describe(&other)),
            )),
        }
    }

    fn block<'a>(
        &self,
        e: &'a Entry,
        scope: &Scope<'a>,
        name: &str,
        ctx: Option<&str>,
    ) -> Result<Scope<'a>> {
        let pos = e.node.pos;
        match self.resolve(e, scope)? {
            Resolved::Block(s) => Ok(s),
            other => Err(self.err(
                pos,
                ctx,
                format!("{name} must be a block [ ... ], found {}", describe(&other)),
            )),
        }
    }

    /// The value of `e` as a `T` (see [`ConfigValue`]), recorded as read.
    /// `read` with the reading option `name` (one of [`READ_PARAMS`]) set to entry `e`'s value.
    fn read_param<'a>(
        &self,
        read: ReadOptions,
        e: &'a Entry,
        scope: &Scope<'a>,
        name: &str,
        ctx: Option<&str>,
    ) -> Result<ReadOptions> {
        Ok(match name {
            "chunkSizeInBytes" => {
                let bytes = self.get::<Positive>(e, scope, name, ctx)?.0;
                read.with_chunk_size(ChunkSize::Bytes(bytes))
            }
            "keepDataInMemory" => read.with_keep_in_memory(self.get(e, scope, name, ctx)?),
            "frameMode" => read.with_frame_mode(self.get(e, scope, name, ctx)?),
            "cacheIndex" => read.with_cache_index(self.get(e, scope, name, ctx)?),
            "index" => read.with_index(self.get(e, scope, name, ctx)?),
            "cacheDir" => read.with_cache_dir(self.text(e, scope, name, ctx)?),
            "cacheLimitInBytes" => read.with_cache_limit(self.get(e, scope, name, ctx)?),
            other => unreachable!("{other} is not in READ_PARAMS"),
        })
    }

    fn get<'a, T: ConfigValue>(
        &self,
        e: &'a Entry,
        scope: &Scope<'a>,
        name: &str,
        ctx: Option<&str>,
    ) -> Result<T> {
        let t = self.text(e, scope, name, ctx)?;
        T::parse(name, &t).map_err(|msg| self.err(e.node.pos, ctx, msg))
    }

    /// Sets a Lens parameter of `d` (`inputGroups`, `targetGroups`, `nanValue`).
    fn lens_param<'a>(
        &self,
        d: &mut DeserializerConfig,
        name: &str,
        e: &'a Entry,
        scope: &Scope<'a>,
        ctx: Option<&str>,
    ) -> Result<()> {
        match name {
            "inputGroups" => d.input_groups = Some(self.get(e, scope, name, ctx)?),
            "targetGroups" => d.target_groups = Some(self.get(e, scope, name, ctx)?),
            _ => d.nan = Some(self.get::<Finite>(e, scope, name, ctx)?.0),
        }
        Ok(())
    }

    fn precision<'a>(&self, e: &'a Entry, scope: &Scope<'a>) -> Result<Precision> {
        let t = self.text(e, scope, "precision", None)?;
        t.to_ascii_lowercase()
            .parse()
            .map_err(|m: Error| self.err(e.node.pos, None, m.message()))
    }

    /// The deserializer kind a `readerType` (reader block) or `type` (deserializer block)
    /// names; a CNTK reader exfeed does not read is an unsupported error naming it.
    fn kind<'a>(
        &self,
        e: &'a Entry,
        scope: &Scope<'a>,
        name: &str,
        ctx: Option<&str>,
        of: fn(FileFormat) -> &'static str,
    ) -> Result<FileFormat> {
        let t = self.text(e, scope, name, ctx)?;
        if let Some(k) = DESERIALIZER_FORMATS
            .into_iter()
            .find(|k| of(*k).eq_ignore_ascii_case(&t))
        {
            return Ok(k);
        }
        let names: Vec<_> = DESERIALIZER_FORMATS.into_iter().map(of).collect();
        let others = if name == "type" {
            CNTK_OTHER_DESERIALIZERS
        } else {
            CNTK_OTHER_READERS
        };
        if others.iter().any(|o| o.eq_ignore_ascii_case(&t)) {
            let whose = match ctx {
                Some(c) => format!("{} of {}", c, self.section),
                None => self.section.clone(),
            };
            let msg = format!(
                "{whose} uses {name} '{t}', which exfeed cannot read (it reads {})",
                names.join(", ")
            );
            return Err(error_at(
                ErrorKind::Unsupported,
                self.label(e.node.pos),
                e.node.pos,
                msg,
            ));
        }
        Err(self.err(
            e.node.pos,
            ctx,
            format!("unknown {name} '{t}' (known: {})", names.join(", ")),
        ))
    }

    /// The reader block `reader_entry` in `scope` (its section).
    pub(crate) fn reader<'a>(
        &self,
        scope: &Scope<'a>,
        reader_entry: &'a Entry,
    ) -> Result<ReaderConfig> {
        let rs = self.block(reader_entry, scope, "reader", None)?;
        let reader = rs.block();
        let mut cfg = ReaderConfig::default();
        // precision: the reader's own, else the innermost enclosing block's (CNTK's lookup
        // walks out to the top level).
        if let Some((e, s)) = rs.inherited("precision") {
            cfg.precision = self.precision(e, &s)?;
        }
        let mut seen = Seen::new(&[READER_PARAMS, READ_PARAMS], "reader", None);
        let mut kind: Option<&Entry> = None;
        let mut file = None;
        let mut corpus = None;
        let (mut mix, mut mix_epoch) = (None, None);
        let mut input = None;
        let mut deserializers = None;
        let mut verbosity = None;
        let mut trace_level = None;
        let mut sample_based = None;
        let mut window_bytes_at = None;
        // Lens parameters of the plain form, applied to its one deserializer.
        let mut lens_params: Vec<(&'static str, &Entry)> = Vec::new();
        let mut lens_mode_at = None;
        for e in &reader.entries {
            let Some(param) = self.param(&mut seen, e, READER_ACCEPTED_UNUSED)? else {
                continue;
            };
            match param {
                "readerType" => kind = Some(e),
                "file" => file = Some((self.text(e, &rs, "file", None)?, e)),
                "corpus" => corpus = Some((self.text(e, &rs, "corpus", None)?, e)),
                "mix" => mix = Some((self.text(e, &rs, "mix", None)?, e)),
                "mixEpochSamples" => mix_epoch = Some(e),
                "input" => input = Some(e),
                "deserializers" => deserializers = Some(e),
                "precision" => {} // read above
                "randomize" => cfg.randomize = self.get::<bool>(e, &rs, "randomize", None)?,
                "randomizationSeed" => {
                    cfg.randomization_seed = self.get::<u64>(e, &rs, "randomizationSeed", None)?
                }
                "randomizationWindow" => {
                    cfg.randomization_window =
                        Some(self.get::<Positive>(e, &rs, "randomizationWindow", None)?.0)
                }
                "randomizationWindowInBytes" => {
                    let bytes = self.get::<Positive>(e, &rs, "randomizationWindowInBytes", None)?;
                    cfg.randomization_window_bytes = Some(bytes.0);
                    window_bytes_at = Some(e);
                }
                "sampleBasedRandomizationWindow" => {
                    sample_based =
                        Some(self.get::<bool>(e, &rs, "sampleBasedRandomizationWindow", None)?)
                }
                "skipSequenceIds" => {
                    cfg.skip_sequence_ids = self.get::<bool>(e, &rs, "skipSequenceIds", None)?
                }
                "maxErrors" => cfg.max_errors = self.get::<u64>(e, &rs, "maxErrors", None)?,
                "traceLevel" => {
                    trace_level = Some(self.get::<TraceLevel>(e, &rs, "traceLevel", None)?.0)
                }
                "verbosity" => {
                    verbosity = Some(self.get::<TraceLevel>(e, &rs, "verbosity", None)?.0)
                }
                name if READ_PARAMS.contains(&name) => {
                    cfg.read = self.read_param(cfg.read, e, &rs, name, None)?
                }
                "equalize" => cfg.equalize = self.get::<bool>(e, &rs, "equalize", None)?,
                "equalizeMode" => cfg.equalize_mode = self.get(e, &rs, "equalizeMode", None)?,
                "randomizer" => cfg.randomizer = self.get(e, &rs, "randomizer", None)?,
                "lensMode" => {
                    let t = self.text(e, &rs, "lensMode", None)?;
                    cfg.lens_mode = Some(t.parse().map_err(|err: Error| {
                        self.err(e.node.pos, None, format!("lensMode: {}", err.message()))
                    })?);
                    lens_mode_at = Some(e.key_pos);
                }
                "maxRecordSizeInBytes" => {
                    cfg.limits.max_record_bytes = self
                        .get::<Positive>(e, &rs, "maxRecordSizeInBytes", None)?
                        .0
                }
                name @ ("inputGroups" | "targetGroups" | "nanValue") => lens_params.push((name, e)),
                "truncated" => {
                    if self.get::<bool>(e, &rs, "truncated", None)? {
                        let msg = "truncated back-propagation through time (truncated = true) is not supported";
                        return Err(error_at(
                            ErrorKind::Unsupported,
                            self.label(e.node.pos),
                            e.node.pos,
                            msg,
                        ));
                    }
                }
                "truncationLength" => {
                    self.get::<u64>(e, &rs, "truncationLength", None)?;
                }
                // Performance and key-storage hints of CNTK's composite reader: no effect here.
                "multiThreadedDeserialization" | "useNumericSequenceKeys" | "hashSequenceKeys" => {
                    self.get::<bool>(e, &rs, "a composite reader flag", None)?;
                }
                other => unreachable!("{other} is a reader parameter"),
            }
        }
        cfg.trace_level = trace_level.or(verbosity).unwrap_or(cfg.trace_level);
        let corpus = self.corpus_or_mix(corpus, mix, mix_epoch, &rs, None)?;
        if let Some(list) = deserializers {
            let file = file.map(|f| f.1).or(corpus.as_ref().map(|c| c.1));
            self.composite(&rs, list, file, input, &lens_params, &mut cfg)?;
            if let Some(e) = kind {
                // Beside `deserializers`, a readerType is ignored; it must still name a reader.
                let t = self.text(e, &rs, "readerType", None)?;
                if !t.eq_ignore_ascii_case(COMPOSITE_READER) {
                    self.kind(e, &rs, "readerType", None, reader_type)?;
                }
            }
        } else {
            let Some(kind_entry) = kind else {
                return Err(self.err(
                    reader_entry.key_pos,
                    None,
                    "reader block has no 'readerType' (or 'deserializers')",
                ));
            };
            let kind = self.kind(kind_entry, &rs, "readerType", None, reader_type)?;
            let (path, corpus) = match (file, corpus) {
                (Some((path, _)), None) => (path, None),
                (None, Some((corpus, _))) => (corpus.to_string(), Some(corpus)),
                (Some(_), Some((_, e))) => {
                    return Err(self.err(
                        e.key_pos,
                        None,
                        format!("give 'file' or '{}', not both", e.key),
                    ))
                }
                (None, None) => {
                    return Err(self.err(reader_entry.key_pos, None, "reader block has no 'file'"))
                }
            };
            let inputs = match input {
                Some(e) => self.inputs(e, &rs, kind, None)?,
                None => Vec::new(),
            };
            if inputs.is_empty() && !inputs_described_by_file(kind) {
                return Err(self.err(reader_entry.key_pos, None, "reader block has no 'input'"));
            }
            let mut d = DeserializerConfig {
                format: kind,
                file: path.into(),
                inputs,
                corpus,
                ..Default::default()
            };
            for (name, e) in lens_params {
                if !kind.is_lens() {
                    return Err(self.err(
                        e.key_pos,
                        None,
                        format!(
                            "'{}' applies to Lens example files (readerType LensReader)",
                            e.key
                        ),
                    ));
                }
                self.lens_param(&mut d, name, e, &rs, None)?;
            }
            cfg.deserializers.push(d);
        }
        if let Some(e) = window_bytes_at.filter(|_| seen.seen.contains(&"randomizationWindow")) {
            return Err(self.err(
                e.key_pos,
                None,
                "give 'randomizationWindow' or 'randomizationWindowInBytes', not both",
            ));
        }
        if let Some(pos) = lens_mode_at {
            // The mode decides the order; the block randomizer's parameters would contradict it.
            for p in [
                "randomize",
                "randomizationWindow",
                "sampleBasedRandomizationWindow",
                "randomizationWindowInBytes",
            ] {
                if seen.seen.contains(&p) {
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
            .any(|d| d.format == FileFormat::Ctf);
        cfg.sample_based_randomization_window = sample_based.unwrap_or(!has_ctf);
        Ok(cfg)
    }

    /// The composite form: `deserializers = ( [ ... ] : ... )`.
    fn composite<'a>(
        &self,
        rs: &Scope<'a>,
        list: &'a Entry,
        file: Option<&'a Entry>,
        input: Option<&'a Entry>,
        lens_params: &[(&'static str, &'a Entry)],
        cfg: &mut ReaderConfig,
    ) -> Result<()> {
        // file and input belong in the deserializer blocks.
        let lens_first = lens_params.first().map(|p| p.1);
        let lens_what = lens_first.map_or("", |e| e.key.as_str());
        for (what, e) in [("file", file), ("input", input), (lens_what, lens_first)] {
            if let Some(e) = e {
                return Err(self.err(
                    e.key_pos,
                    None,
                    format!(
                        "'{what}' belongs in a deserializer block when 'deserializers' is given"
                    ),
                ));
            }
        }
        let blocks: Vec<(Scope<'a>, Pos)> = match self.resolve(list, rs)? {
            Resolved::Block(s) => vec![(s, list.node.pos)],
            Resolved::Array(items, s) => {
                let mut blocks = Vec::with_capacity(items.len());
                for (i, node) in items.iter().enumerate() {
                    // An element is a block, or a variable naming one.
                    match self.resolver.resolve(node, "deserializers", &s)? {
                        Resolved::Block(b) => blocks.push((b, node.pos)),
                        _ => {
                            let ctx = format!("deserializer {}", i + 1);
                            return Err(self.err(
                                node.pos,
                                Some(&ctx),
                                "a deserializer must be a block [ ... ]",
                            ));
                        }
                    }
                }
                blocks
            }
            Resolved::Text(t) => {
                return Err(self.err(
                    list.node.pos,
                    None,
                    format!("deserializers must be ([ ... ] : ...), found '{t}'"),
                ))
            }
            Resolved::Expr(x) => {
                return Err(self.err(
                    list.node.pos,
                    None,
                    format!(
                        "deserializers must be ([ ... ] : ...), found the expression '{}'",
                        short(x)
                    ),
                ))
            }
        };
        if blocks.is_empty() {
            return Err(self.err(list.node.pos, None, "deserializers is empty"));
        }
        for (i, (scope, pos)) in blocks.into_iter().enumerate() {
            let ctx = format!("deserializer {}", i + 1);
            cfg.deserializers
                .push(self.deserializer(&scope, pos, &ctx)?);
        }
        Ok(())
    }

    fn deserializer<'a>(&self, ds: &Scope<'a>, pos: Pos, ctx: &str) -> Result<DeserializerConfig> {
        let c = Some(ctx);
        let block = ds.block();
        // The type first: a deserializer exfeed cannot read is named before its parameters,
        // which belong to that other reader, are looked at.
        let kind = match block.get("type") {
            Some(e) => self.kind(e, ds, "type", c, deserializer_type)?,
            None => return Err(self.err(pos, c, "no 'type'")),
        };
        let mut seen = Seen::new(
            &[DESERIALIZER_PARAMS, READ_PARAMS],
            "deserializer",
            Some(ctx.to_string()),
        );
        let mut d = DeserializerConfig::default();
        let (mut module, mut file, mut input) = (None, None, None);
        let (mut corpus, mut mix, mut mix_epoch) = (None, None, None);
        let mut lens = Vec::new();
        for e in &block.entries {
            let Some(param) = self.param(&mut seen, e, &[])? else {
                continue;
            };
            match param {
                "type" => {}
                "module" => {
                    module = Some((self.kind(e, ds, "module", c, reader_type)?, e.node.pos))
                }
                "file" => file = Some(self.text(e, ds, "file", c)?),
                "corpus" => corpus = Some((self.text(e, ds, "corpus", c)?, e)),
                "mix" => mix = Some((self.text(e, ds, "mix", c)?, e)),
                "mixEpochSamples" => mix_epoch = Some(e),
                "input" => input = Some(e),
                "skipSequenceIds" => {
                    d.skip_sequence_ids = Some(self.get::<bool>(e, ds, "skipSequenceIds", c)?)
                }
                "maxErrors" => d.max_errors = Some(self.get::<u64>(e, ds, "maxErrors", c)?),
                "traceLevel" => {
                    d.trace_level = Some(self.get::<TraceLevel>(e, ds, "traceLevel", c)?.0)
                }
                name if READ_PARAMS.contains(&name) => {
                    d.read = self.read_param(d.read, e, ds, name, c)?
                }
                name @ ("inputGroups" | "targetGroups" | "nanValue") => {
                    lens.push((name, e));
                    self.lens_param(&mut d, name, e, ds, c)?;
                }
                other => unreachable!("{other} is a deserializer parameter"),
            }
        }
        if let Some((m, mpos)) = module {
            if m != kind {
                return Err(self.err(
                    mpos,
                    c,
                    format!(
                        "module '{}' does not provide type '{}'",
                        reader_type(m),
                        deserializer_type(kind)
                    ),
                ));
            }
        }
        if let Some((name, e)) = lens.first() {
            if !kind.is_lens() {
                return Err(self.err(
                    e.key_pos,
                    c,
                    format!("'{name}' applies to Lens example files (type LensDeserializer)"),
                ));
            }
        }
        d.format = kind;
        let corpus = self.corpus_or_mix(corpus, mix, mix_epoch, ds, c)?;
        d.file = match (file, corpus) {
            (Some(_), Some((_, e))) => {
                return Err(self.err(
                    e.key_pos,
                    c,
                    format!("give 'file' or '{}', not both", e.key),
                ))
            }
            (Some(f), None) => f.into(),
            (None, Some((corpus, _))) => {
                let name = corpus.to_string().into();
                d.corpus = Some(corpus);
                name
            }
            (None, None) => return Err(self.err(pos, c, "no 'file'")),
        };
        if let Some(e) = input {
            d.inputs = self.inputs(e, ds, kind, Some(ctx))?;
        }
        if d.inputs.is_empty() && !inputs_described_by_file(kind) {
            return Err(self.err(pos, c, "no 'input'"));
        }
        Ok(d)
    }

    /// A block's `corpus` or `mix` (with its `mixEpochSamples`), as its corpus, with the entry
    /// that gave it.
    fn corpus_or_mix<'e>(
        &self,
        corpus: Option<(String, &'e Entry)>,
        mix: Option<(String, &'e Entry)>,
        mix_epoch: Option<&Entry>,
        scope: &Scope<'_>,
        c: Option<&str>,
    ) -> Result<Option<(Corpus, &'e Entry)>> {
        let epoch_samples = match mix_epoch {
            Some(e) if mix.is_none() => {
                return Err(self.err(e.key_pos, c, "'mixEpochSamples' applies to a 'mix'"))
            }
            Some(e) => Some(self.get::<Positive>(e, scope, "mixEpochSamples", c)?.0),
            None => None,
        };
        match (corpus, mix) {
            (Some(_), Some((_, e))) => {
                Err(self.err(e.key_pos, c, "give 'corpus' or 'mix', not both"))
            }
            (Some((spec, e)), None) => Ok(Some((Corpus::parse(&spec), e))),
            (None, Some((spec, e))) => {
                let mut mix = MixSpec::parse(&spec)
                    .map_err(|err| self.err(e.node.pos, c, format!("mix: {}", err.message())))?;
                mix.epoch_samples = epoch_samples;
                Ok(Some((Corpus::Mix(mix), e)))
            }
            (None, None) => Ok(None),
        }
    }

    fn inputs<'a>(
        &self,
        e: &'a Entry,
        scope: &Scope<'a>,
        kind: FileFormat,
        ctx: Option<&str>,
    ) -> Result<Vec<StreamSpec>> {
        let is = self.block(e, scope, "input", ctx)?;
        let block = is.block();
        let mut out: Vec<StreamSpec> = Vec::with_capacity(block.entries.len());
        for ie in &block.entries {
            // Inside a deserializer, its number leads (two deserializers may name one input).
            let ictx = match ctx {
                Some(c) => format!("{c}: input '{}'", ie.key),
                None => format!("input '{}'", ie.key),
            };
            let c = Some(ictx.as_str());
            let bs = self.block(ie, &is, "an input", c)?;
            let mut seen = Seen::new(&[INPUT_PARAMS], "input", Some(ictx.clone()));
            let mut spec = StreamSpec::new(ie.key.clone(), Storage::Dense, 0);
            let (mut dim, mut format) = (None, None);
            for p in &bs.block().entries {
                let Some(param) = self.param(&mut seen, p, &[])? else {
                    continue;
                };
                match param {
                    "alias" => {
                        let a = self.text(p, &bs, "alias", c)?;
                        if a.is_empty() {
                            return Err(self.err(p.node.pos, c, "alias is empty"));
                        }
                        spec.alias = Some(a);
                    }
                    "dim" => dim = Some(self.get::<Positive>(p, &bs, "dim", c)?.0),
                    "format" => {
                        let t = self.text(p, &bs, "format", c)?;
                        format = Some(
                            t.to_ascii_lowercase()
                                .parse::<Storage>()
                                .map_err(|e| self.err(p.node.pos, c, e.message()))?,
                        );
                    }
                    "definesMBSize" => {
                        spec.defines_mb_size = self.get::<bool>(p, &bs, "definesMBSize", c)?
                    }
                    other => unreachable!("{other} is in INPUT_PARAMS"),
                }
            }
            match (dim, format) {
                (Some(d), Some(f)) => {
                    let limit = f.max_dim();
                    if d > limit {
                        return Err(self.err(
                            ie.key_pos,
                            c,
                            format!("dim {d} of a {f} input is larger than {limit}"),
                        ));
                    }
                    spec.dim = d as usize;
                    spec.storage = f;
                }
                (None, None) if inputs_described_by_file(kind) => {}
                (None, Some(_)) if !inputs_described_by_file(kind) => {
                    return Err(self.err(ie.key_pos, c, "no 'dim'"))
                }
                (Some(_), None) if !inputs_described_by_file(kind) => {
                    return Err(self.err(ie.key_pos, c, "no 'format' (dense or sparse)"))
                }
                (None, None) => return Err(self.err(ie.key_pos, c, "no 'dim' and no 'format'")),
                _ => {
                    return Err(self.err(
                        ie.key_pos,
                        c,
                        "give both 'dim' and 'format' or neither (then the file's header says)",
                    ))
                }
            }
            // Names in the data file must tell inputs apart (CNTK: "Alias ... is already mapped").
            if let Some(other) = out.iter().find(|s| s.name_in_file() == spec.name_in_file()) {
                return Err(self.err(
                    ie.key_pos,
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

/// A parameter's value as text read as a type: `Err` is the whole message, naming the
/// parameter (`name`) and the text found.
trait ConfigValue: Sized {
    fn parse(name: &str, text: &str) -> std::result::Result<Self, String>;
}

impl ConfigValue for bool {
    fn parse(name: &str, t: &str) -> std::result::Result<Self, String> {
        // CNTK's ConfigValue also takes t/f and 1/0.
        if ["true", "t", "1"].iter().any(|w| t.eq_ignore_ascii_case(w)) {
            Ok(true)
        } else if ["false", "f", "0"]
            .iter()
            .any(|w| t.eq_ignore_ascii_case(w))
        {
            Ok(false)
        } else {
            Err(format!("{name} must be true or false, found '{t}'"))
        }
    }
}

impl ConfigValue for u64 {
    fn parse(name: &str, t: &str) -> std::result::Result<Self, String> {
        t.parse()
            .map_err(|_| format!("{name} must be a non-negative integer, found '{t}'"))
    }
}

/// A positive integer.
struct Positive(u64);

impl ConfigValue for Positive {
    fn parse(name: &str, t: &str) -> std::result::Result<Self, String> {
        match t.parse() {
            Ok(v) if v > 0 => Ok(Positive(v)),
            _ => Err(format!("{name} must be a positive integer, found '{t}'")),
        }
    }
}

/// A trace level: 0 errors, 1 warnings, 2 everything; CNTK treats higher levels as 2, and so
/// do we (levels beyond a `u8` are kept as its largest).
struct TraceLevel(u8);

impl ConfigValue for TraceLevel {
    fn parse(name: &str, t: &str) -> std::result::Result<Self, String> {
        let v = u64::parse(name, t)?;
        Ok(TraceLevel(u8::try_from(v).unwrap_or(u8::MAX)))
    }
}

/// A finite number.
struct Finite(f32);

impl ConfigValue for Finite {
    fn parse(name: &str, t: &str) -> std::result::Result<Self, String> {
        match t.parse::<f32>() {
            Ok(v) if v.is_finite() => Ok(Finite(v)),
            _ => Err(format!("{name} must be a finite number, found '{t}'")),
        }
    }
}

impl ConfigValue for Layout {
    fn parse(name: &str, t: &str) -> std::result::Result<Self, String> {
        Layout::parse(t).map_err(|err| format!("{name}: {}", err.message()))
    }
}

/// `index = auto | full | none`, with the reader's own message for anything else.
impl ConfigValue for IndexMode {
    fn parse(_: &str, t: &str) -> std::result::Result<Self, String> {
        t.parse().map_err(|err: Error| err.message().to_string())
    }
}

/// `randomizer = exfeed | cntk`, with the reader's own message for anything else.
/// Options whose names parse with `FromStr` into an exfeed [`Error`].
macro_rules! config_value_from_str {
    ($($t:ty),*) => {$(
        impl ConfigValue for $t {
            fn parse(_: &str, t: &str) -> std::result::Result<Self, String> {
                t.parse().map_err(|err: Error| err.message().to_string())
            }
        }
    )*};
}
config_value_from_str!(crate::options::Randomizer, crate::options::EqualizeMode);

/// What a resolved value is, for messages: `'text'`, a block, an array, the expression '...'.
fn describe(r: &Resolved<'_>) -> String {
    match r {
        Resolved::Text(t) => format!("'{t}'"),
        Resolved::Block(_) => "a block".into(),
        Resolved::Array(..) => "an array".into(),
        Resolved::Expr(x) => format!("the expression '{}'", short(x)),
    }
}

/// An expression shortened for a message.
fn short(x: &str) -> String {
    let one_line = x.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(60) {
        Some((i, _)) => format!("{}...", &one_line[..i]),
        None => one_line,
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

/// Names of the blocks of `top` that contain a `reader` block, in file order.
pub(crate) fn section_names(top: &Block) -> Vec<String> {
    top.entries
        .iter()
        .filter(|e| matches!(&e.node.value, Value::Block(b) if b.get("reader").is_some()))
        .map(|e| e.key.clone())
        .collect()
}
