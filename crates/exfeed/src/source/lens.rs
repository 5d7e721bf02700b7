//! [`LensSource`]: a Lens example file (`.ex` text or `.bex` binary, compressed or not) as a

use super::chunker::{ChunkExtent, Chunker, SequenceSpan};
use crate::batch::SequenceBatch;
use crate::element::Element;
use crate::error::{Diagnostic, Error, Location, Result, Severity};
use crate::io::{open_bytes, read_into_memory, InputBytes, InputPath};
use crate::lens::materialize::{Layout, Materializer};
use crate::lens::model::{Example, SetHeader, Spare};
use crate::lens::select::SelectionMode;
use crate::lens::{binary, shifted, text};
use crate::options::ReadOptions;
use crate::reader::{ChunkInfo, ChunkSource, ReaderOptions, Window};
use crate::stream::{Storage, StreamSpec};
use std::collections::BTreeSet;

/// How to open a Lens example file for the reader.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LensSourceOptions {
    /// The network's input groups, in network order (`--input-groups`).
    pub input_groups: Layout,
    /// The network's target groups, in network order (`--target-groups`).
    pub target_groups: Layout,
    /// The value NaN (`-` in the file) becomes; `None` keeps NaN (float buffers hold it, and
    /// in Lens a NaN target means "no error here").
    pub nan: Option<f32>,
    /// `chunkSizeInBytes` (examples are grouped into chunks of about this many bytes) and
    /// `keepDataInMemory` (read the whole file into memory instead of mapping it).
    pub read: ReadOptions,
    /// Whether [`ChunkSource::chunk_weights`] gives the examples' frequencies (only Lens's
    /// PROBABILISTIC mode uses them; RANDOMIZED draws uniformly).
    pub use_frequencies: bool,
    /// The most bytes one example may take (`--max-record-size`).
    pub limits: crate::limits::Limits,
}

/// A Lens example file as a [`ChunkSource`].
///
/// [`ChunkSource`]: one sequence per example, one sample per event, and two dense streams,
/// `input` and `target`, materialized for the network's group layout (see
/// [`Materializer`]). Sequence keys are 0-based example indices; the examples' `freq:` values
/// are the source's [`ChunkSource::chunk_weights`] when asked for (Lens's PROBABILISTIC mode).
///
/// Opening indexes the file once: every example is skimmed (text: its structure read, its
/// numbers passed over unchecked; binary: read) to find where it ends, how many events it has
/// and its frequency, and examples are grouped into chunks of about `chunk_size` bytes.
/// Decoding a chunk parses its examples from their bytes (the one full parse of a text file's
/// numbers, where their errors are found) and materializes them. A plain file is memory-mapped; a compressed file (`.gz`,
/// `.bz2`, by content) or standard input is decompressed into memory once, whole.
pub struct LensSource {
    bytes: InputBytes,
    name: String,
    binary: bool,
    header: SetHeader,
    chunks: Vec<ChunkExtent>,
    infos: Vec<ChunkInfo>,
    frequencies: Vec<f32>,
    materializer: Materializer,
    specs: Vec<StreamSpec>,
    options: LensSourceOptions,
    diagnostics: Vec<Diagnostic>,
}

impl LensSource {
    /// Opens and indexes `input` (`-` for standard input; a missing name is retried with
    /// `.gz`/`.bz2` as Lens does). `select` may rename the two streams: empty for `input` and
    /// `target`, else exactly two inputs whose names in the file (alias, else name) are
    /// `input` and `target`, in that order; a dim given there must match the layout's size.
    pub fn open(
        input: &InputPath,
        select: &[StreamSpec],
        options: LensSourceOptions,
    ) -> Result<Self> {
        let input = input.clone().with_compressed_lookup();
        let name = input.display_name();
        let bytes = if options.read.keep_in_memory() {
            read_into_memory(&input)?
        } else {
            open_bytes(&input)?
        };
        let materializer =
            Materializer::new(options.input_groups.clone(), options.target_groups.clone());
        let specs = select_streams(&materializer, select).map_err(|e| e.in_file(name.clone()))?;
        let mut source = LensSource {
            binary: binary::is_binary(&bytes),
            bytes,
            name,
            header: SetHeader::default(),
            chunks: Vec::new(),
            infos: Vec::new(),
            frequencies: Vec::new(),
            materializer,
            specs,
            options,
            diagnostics: Vec::new(),
        };
        source.index()?;
        Ok(source)
    }

    fn index(&mut self) -> Result<()> {
        let bytes: &[u8] = &self.bytes;
        let name = self.name.clone();
        let binary = self.binary;
        let fail = |e: Error, example: Option<usize>| {
            let e = match example {
                Some(i) => e.in_context(format!("example {i}")),
                None => e,
            };
            resolved(e, bytes, binary).in_file(name.clone())
        };
        if bytes.len() < 4 {
            // As Lens (and `lens::parse`): anything shorter than the binary cookie is refused.
            return Err(fail(crate::lens::too_short(), None));
        }
        let mut chunker = Chunker::new(self.options.read.chunk_bytes());
        let mut spare = Spare::default();
        let mut unknown = BTreeSet::new();
        let max = self.options.limits.max_record_bytes;
        // The bound `--max-record-size` sets, as when the file is read a record at a time.
        let within_limit = |i: usize, start: usize, end: usize| {
            if (end - start) as u64 > max {
                let what = format!("example {i}");
                let e = crate::lens::longer_than_a_record(&what, start as u64 + max, max, !binary);
                return Err(fail(e, None));
            }
            Ok(())
        };
        let mut push = |chunker: &mut Chunker, ex: &Example, start: usize, end: usize| {
            chunker.push(SequenceSpan {
                offset: start as u64,
                bytes: (end - start) as u64,
                samples: ex.events.len() as u64,
            });
            self.frequencies.push(ex.frequency);
            unknown_groups(ex, &self.materializer, &mut unknown);
        };
        if self.binary {
            let (header, count, mut pos) =
                binary::read_header_prefix(bytes).map_err(|e| fail(e, None))?;
            self.header = header;
            for i in 0..count {
                let (ex, used) =
                    binary::read_example_prefix(&bytes[pos..], &self.header, max, &mut spare)
                        .map_err(|e| fail(shifted(e, pos), Some(i)))?;
                within_limit(i, pos, pos + used)?;
                push(&mut chunker, &ex, pos, pos + used);
                spare.keep(ex);
                pos += used;
            }
            if pos != bytes.len() {
                return Err(fail(
                    Error::corrupt(
                        pos as u64,
                        format!("{} bytes after the last example", bytes.len() - pos),
                    ),
                    None,
                ));
            }
        } else {
            let (header, mut pos, _) =
                text::parse_header_prefix(bytes).map_err(|e| fail(e, None))?;
            self.header = header;
            let mut i = 0;
            while let Some((ex, end)) =
                text::parse_example_at(bytes, pos, i, &self.header, max, &mut spare, true)
                    .map_err(|e| fail(e, None))?
            {
                within_limit(i, pos, end)?;
                push(&mut chunker, &ex, pos, end);
                spare.keep(ex);
                pos = end;
                i += 1;
            }
        }
        self.chunks = chunker.finish();
        self.infos = self.chunks.iter().map(ChunkExtent::info).collect();
        for (what, group) in unknown {
            self.diagnostics.push(Diagnostic {
                severity: Severity::Warning,
                location: Location::default().with_file(self.name.clone()),
                message: format!(
                    "{what} group '{group}' is not in the layout; its ranges are ignored"
                ),
            });
        }
        Ok(())
    }

    /// The set header.
    pub fn header(&self) -> &SetHeader {
        &self.header
    }

    /// Number of examples.
    pub fn len(&self) -> usize {
        self.frequencies.len()
    }

    /// Whether the file has no examples.
    pub fn is_empty(&self) -> bool {
        self.frequencies.is_empty()
    }

    /// Every example's frequency (`freq:`, default 1), in file order.
    pub fn frequencies(&self) -> &[f32] {
        &self.frequencies
    }

    /// Whether the file is the binary form.
    pub fn is_binary(&self) -> bool {
        self.binary
    }

    /// Warnings from indexing: groups the examples use that the layout does not have.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// The file's name as used in messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Parses chunk `chunk`'s examples, handing each with its index and first byte to `each`.
    fn parse_chunk(
        &self,
        chunk: usize,
        mut each: impl FnMut(usize, usize, &Example) -> Result<()>,
    ) -> Result<()> {
        let c = self
            .chunks
            .get(chunk)
            .ok_or_else(|| Error::invalid(0, format!("no chunk {chunk}")))?;
        let bytes: &[u8] = &self.bytes;
        let mut pos = c.offset as usize;
        let mut spare = Spare::default();
        for i in c.first_sequence..c.first_sequence + c.sequences {
            let (ex, end) = if self.binary {
                let (ex, used) = binary::read_example_prefix(
                    &bytes[pos..],
                    &self.header,
                    self.options.limits.max_record_bytes,
                    &mut spare,
                )
                .map_err(|e| shifted(e, pos))?;
                (ex, pos + used)
            } else {
                text::parse_example_at(
                    bytes,
                    pos,
                    i,
                    &self.header,
                    self.options.limits.max_record_bytes,
                    &mut spare,
                    false,
                )?
                .ok_or_else(|| {
                    Error::corrupt(pos as u64, "the file changed since it was indexed")
                })?
            };
            let start = pos;
            pos = end;
            each(i, start, &ex)?;
            spare.keep(ex);
        }
        Ok(())
    }
}

/// Fills in line and column of a text file's error (a binary file's has its byte offset only).
fn resolved(e: Error, bytes: &[u8], binary: bool) -> Error {
    if binary {
        e
    } else {
        e.resolve_in(bytes, 0, 1)
    }
}

/// The streams: `input` and `target` from the layout, renamed as `select` says.
fn select_streams(m: &Materializer, select: &[StreamSpec]) -> Result<Vec<StreamSpec>> {
    let mut specs = m.stream_specs("input", "target");
    if select.is_empty() {
        return Ok(specs);
    }
    let names: Vec<&str> = select.iter().map(StreamSpec::name_in_file).collect();
    if names != ["input", "target"] {
        return Err(Error::config(format!(
            "a Lens example file has two streams, 'input' then 'target'; the inputs given name {} \
             (use alias = input / alias = target to rename them)",
            names
                .iter()
                .map(|n| format!("'{n}'"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    for (spec, want) in specs.iter_mut().zip(select) {
        if want.dim != 0 && (want.dim != spec.dim || want.storage != Storage::Dense) {
            return Err(Error::config(format!(
                "input '{}': the layout makes '{}' dense with dim {}, not {} with dim {}",
                want.name, spec.name, spec.dim, want.storage, want.dim
            )));
        }
        spec.name = want.name.clone();
        spec.alias = want.alias.clone();
        spec.defines_mb_size = want.defines_mb_size;
    }
    Ok(specs)
}

/// Adds the groups `ex` names that `m`'s layouts do not have to `out`, as (what, group).
fn unknown_groups(ex: &Example, m: &Materializer, out: &mut BTreeSet<(&'static str, String)>) {
    for e in &ex.events {
        for (list, layout, what) in [
            (e.input, m.inputs(), "input"),
            (e.target, m.targets(), "target"),
        ] {
            let Some(list) = list.and_then(|l| ex.lists.get(l)) else {
                continue;
            };
            for r in list {
                if let Some(g) = &r.group {
                    if layout.find(g).is_none() && !out.contains(&(what, g.clone())) {
                        out.insert((what, g.clone()));
                    }
                }
            }
        }
    }
}

impl<T: Element> ChunkSource<T> for LensSource {
    fn streams(&self) -> &[StreamSpec] {
        &self.specs
    }

    fn chunks(&self) -> &[ChunkInfo] {
        &self.infos
    }

    fn read_chunk(&self, chunk: usize, out: &mut SequenceBatch<T>) -> Result<()> {
        // One materializer per call (it is cheap): chunks are decoded on several threads.
        // Unknown groups were reported once when indexing; the per-chunk warnings are dropped.
        let mut m = self.materializer.clone();
        let mut ignored: Vec<Diagnostic> = Vec::new();
        self.parse_chunk(chunk, |i, _start, ex| {
            ignored.clear();
            // An example that does not fit the layout: the error names the example and event.
            m.push_example_as(ex, i as u64, self.options.nan, true, out, &mut ignored)
        })
        .map_err(|e| resolved(e, &self.bytes, self.binary).in_file(self.name.clone()))
    }

    fn chunk_keys(&self, chunk: usize) -> Option<Vec<u64>> {
        let c = self.chunks.get(chunk)?;
        Some((c.first_sequence as u64..(c.first_sequence + c.sequences) as u64).collect())
    }

    fn chunk_weights(&self, chunk: usize) -> Option<Vec<f64>> {
        if !self.options.use_frequencies {
            return None;
        }
        let c = self.chunks.get(chunk)?;
        Some(
            self.frequencies[c.first_sequence..c.first_sequence + c.sequences]
                .iter()
                .map(|&f| f as f64)
                .collect(),
        )
    }
}

impl SelectionMode {
    /// Sets the engine options that give this Lens selection mode:
    /// ORDERED reads in file order (`randomize` off); PERMUTED shuffles the whole set (of this
    /// worker) each sweep ([`Window::All`]); RANDOMIZED draws as many examples as there are,
    /// uniformly with replacement, each sweep; PROBABILISTIC draws the same way weighted by the
    /// examples' frequencies (open the [`LensSource`] with `use_frequencies`). Seed, epoch
    /// limit, workers and threads are left as they are.
    pub fn apply_to(self, options: &mut ReaderOptions) {
        match self {
            SelectionMode::Ordered => {
                options.randomize = false;
                options.with_replacement = false;
            }
            SelectionMode::Permuted => {
                options.randomize = true;
                options.window = Window::All;
                options.with_replacement = false;
            }
            SelectionMode::Randomized | SelectionMode::Probabilistic => {
                options.randomize = true;
                options.window = Window::All;
                options.with_replacement = true;
            }
        }
    }
}
