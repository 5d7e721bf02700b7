//! [`JoinedSource`]: several sources joined by sequence key, as CNTK's composite reader joins
//! several deserializers (say, features in one CTF file and labels in another).
//!
//! The first source is the primary: its chunks are the joined source's chunks and its sequence
//! order is kept. Every other source is looked up by key through its index
//! ([`ChunkSource::chunk_keys`]); a key missing from any source is reported once (a warning,
//! see [`JoinedSource::diagnostics`]) and its sequence dropped. The primary's keys may repeat
//! (each of its sequences is joined with the same sequences of the others); a key repeated in
//! another source is an error naming both places, as CNTK's choice there is unspecified. Reading a joined chunk decodes
//! the primary chunk and the chunks of the other sources that hold its keys.

use crate::batch::SequenceBatch;
use crate::element::Element;
use crate::error::{Diagnostic, Error, ErrorKind, Location, Result, Severity};
use crate::reader::{ChunkInfo, ChunkSource};
use crate::stream::StreamSpec;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

/// A decoded chunk of a non-primary source and where each key is in it.
type Decoded<T> = (SequenceBatch<T>, HashMap<u64, usize>);

/// Sources joined by sequence key; its streams are those of all sources, in order.
///
/// ```
/// use exfeed::ctf::CtfOptions;
/// use exfeed::io::InputPath;
/// use exfeed::options::ReadOptions;
/// use exfeed::reader::ChunkSource;
/// use exfeed::source::{CtfSource, CtfSourceOptions, IndexMode, JoinedSource};
/// use exfeed::SequenceBatch;
/// use std::sync::Arc;
///
/// let dir = tempfile::tempdir()?;
/// let open = |name: &str, text: &str, input: &str| -> Result<_, Box<dyn std::error::Error>> {
///     let path = dir.path().join(name);
///     std::fs::write(&path, text)?;
///     let ctf = CtfOptions { inputs: vec![input.parse()?], ..CtfOptions::default() };
///     // A join reads every chunk's keys from the full index.
///     let read = ReadOptions::new().with_index(IndexMode::Full);
///     let options = CtfSourceOptions { ctf, read };
///     let source: Arc<dyn ChunkSource<f32>> =
///         Arc::new(CtfSource::open(&InputPath::new(&path), options)?);
///     Ok(source)
/// };
/// // Features for sequences 0, 1 and 2; labels only for 0 and 1.
/// let features = open("features.ctf", "0 |x 1 2\n1 |x 3 4\n2 |x 5 6\n", "x:dense:2")?;
/// let labels = open("labels.ctf", "0 |y 0:1\n1 |y 1:1\n", "y:sparse:3")?;
/// let joined = JoinedSource::new(vec![features, labels])?;
/// assert_eq!(joined.diagnostics().len(), 1); // sequence 2 has no label: dropped
/// let mut batch = SequenceBatch::new(joined.streams());
/// joined.read_chunk(0, &mut batch)?;
/// assert_eq!(batch.keys(), &[0, 1]);
/// assert_eq!(batch.streams()[1].indices(), &[0, 1]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct JoinedSource<T> {
    sources: Vec<Arc<dyn ChunkSource<T>>>,
    specs: Vec<StreamSpec>,
    infos: Vec<ChunkInfo>,
    /// Per source after the primary: key -> chunk holding it.
    locate: Vec<HashMap<u64, usize>>,
    /// Keys of the primary that every source has.
    joinable: HashSet<u64>,
    diagnostics: Vec<Diagnostic>,
}

impl<T: Element> JoinedSource<T> {
    /// Joins `sources` (at least one) by key. Every source's index must know its keys, and
    /// stream names must be unique across sources.
    pub fn new(sources: Vec<Arc<dyn ChunkSource<T>>>) -> Result<Self> {
        if sources.is_empty() {
            return Err(Error::config("a reader needs at least one deserializer"));
        }
        let mut specs: Vec<StreamSpec> = Vec::new();
        for s in &sources {
            for spec in s.streams() {
                if specs.iter().any(|o| o.name == spec.name) {
                    return Err(Error::config(format!(
                        "input '{}' is defined by more than one deserializer",
                        spec.name
                    )));
                }
                specs.push(spec.clone());
            }
        }
        let keys_of = |i: usize, s: &Arc<dyn ChunkSource<T>>| -> Result<Vec<Vec<u64>>> {
            (0..s.chunks().len())
                .map(|c| {
                    s.chunk_keys(c).ok_or_else(|| {
                        Error::config(format!(
                            "deserializer {i} cannot be joined by key: its index has no sequence \
                             keys (a CTF file read without an index: open it with the full index)"
                        ))
                    })
                })
                .collect()
        };
        let primary_keys = keys_of(0, &sources[0])?;
        let mut locate = Vec::new();
        for (i, s) in sources.iter().enumerate().skip(1) {
            let mut map: HashMap<u64, (usize, usize)> = HashMap::new();
            for (c, keys) in keys_of(i, s)?.into_iter().enumerate() {
                for (n, k) in keys.into_iter().enumerate() {
                    if let Some(&(c0, n0)) = map.get(&k) {
                        // CNTK finds a key by binary search after an unstable sort: which of
                        // the sequences it joins is unspecified.
                        return Err(Error::new(
                            ErrorKind::Invalid,
                            Location::default(),
                            format!(
                                "sequence id {k} repeats in deserializer {i}, which is joined by \
                                 key: at {} and at {} (a joined deserializer needs each id once; \
                                 only the first deserializer may repeat ids)",
                                s.sequence_place(c0, n0),
                                s.sequence_place(c, n)
                            ),
                        ));
                    }
                    map.insert(k, (c, n));
                }
            }
            let map: HashMap<u64, usize> = map.into_iter().map(|(k, (c, _))| (k, c)).collect();
            locate.push(map);
        }
        let mut diagnostics = Vec::new();
        let mut warn = |msg: String| {
            diagnostics.push(Diagnostic {
                severity: Severity::Warning,
                location: Location::default(),
                message: msg,
            })
        };
        let all_primary: HashSet<u64> = primary_keys.iter().flatten().copied().collect();
        let mut joinable = HashSet::new();
        let mut infos = Vec::with_capacity(primary_keys.len());
        for (c, keys) in primary_keys.iter().enumerate() {
            let mut n = 0;
            for &k in keys {
                let absent: Vec<usize> = (0..locate.len())
                    .filter(|&j| !locate[j].contains_key(&k))
                    .map(|j| j + 1)
                    .collect();
                if absent.is_empty() {
                    joinable.insert(k);
                    n += 1;
                } else {
                    warn(format!(
                        "sequence {k} is missing from deserializer {}; dropped",
                        absent
                            .iter()
                            .map(|j| j.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            }
            let info = sources[0].chunks()[c];
            infos.push(ChunkInfo {
                sequences: n,
                ..info
            });
        }
        for (j, map) in locate.iter().enumerate() {
            let extra: BTreeSet<u64> = map
                .keys()
                .filter(|k| !all_primary.contains(k))
                .copied()
                .collect();
            for k in extra {
                warn(format!(
                    "sequence {k} of deserializer {} is missing from deserializer 0; dropped",
                    j + 1
                ));
            }
        }
        Ok(JoinedSource {
            sources,
            specs,
            infos,
            locate,
            joinable,
            diagnostics,
        })
    }

    /// The warnings about keys missing from some source, found when joining.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }
}

impl<T: Element> ChunkSource<T> for JoinedSource<T> {
    fn streams(&self) -> &[StreamSpec] {
        &self.specs
    }

    fn chunks(&self) -> &[ChunkInfo] {
        &self.infos
    }

    fn read_chunk(&self, chunk: usize, out: &mut SequenceBatch<T>) -> Result<()> {
        let mut primary = SequenceBatch::new(self.sources[0].streams());
        self.sources[0].read_chunk(chunk, &mut primary)?;
        // Decode the other sources' chunks holding these keys, each once.
        let mut others: Vec<Vec<Decoded<T>>> = Vec::new();
        let mut where_: Vec<HashMap<usize, usize>> = Vec::new();
        for (j, map) in self.locate.iter().enumerate() {
            let source = &self.sources[j + 1];
            let needed: BTreeSet<usize> = primary
                .keys()
                .iter()
                .filter_map(|k| map.get(k).copied())
                .collect();
            let mut decoded = Vec::new();
            let mut slot = HashMap::new();
            for c in needed {
                let mut b = SequenceBatch::new(source.streams());
                source.read_chunk(c, &mut b)?;
                let by_key = b
                    .keys()
                    .iter()
                    .enumerate()
                    .map(|(i, &k)| (k, i))
                    .rev()
                    .collect();
                slot.insert(c, decoded.len());
                decoded.push((b, by_key));
            }
            others.push(decoded);
            where_.push(slot);
        }
        'seq: for (s, &key) in primary.keys().iter().enumerate() {
            if !self.joinable.contains(&key) {
                continue;
            }
            // Find the sequence in every other source (a decoder may have dropped it).
            let mut found = Vec::with_capacity(others.len());
            for j in 0..others.len() {
                let Some(&c) = self.locate[j].get(&key) else {
                    continue 'seq;
                };
                let (b, by_key) = &others[j][where_[j][&c]];
                let Some(&i) = by_key.get(&key) else {
                    continue 'seq;
                };
                found.push((b, i));
            }
            let mut stream = 0;
            for st in primary.streams() {
                out.stream_mut(stream).extend_from_sequence(st, s);
                stream += 1;
            }
            for (b, i) in found {
                for st in b.streams() {
                    out.stream_mut(stream).extend_from_sequence(st, i);
                    stream += 1;
                }
            }
            out.finish_sequence(key);
        }
        Ok(())
    }

    fn chunk_keys(&self, chunk: usize) -> Option<Vec<u64>> {
        let keys = self.sources[0].chunk_keys(chunk)?;
        Some(
            keys.into_iter()
                .filter(|k| self.joinable.contains(k))
                .collect(),
        )
    }
}
