//! A corpus through the front door ([`open_corpus`]): shard files read as one data set by
//! `check`, `dump`, `info` and `convert`, as [`CorpusSource`](crate::source::CorpusSource) is
//! for the minibatch reader.
//!
//! Shards are opened one at a time, when reached ([`Shards`]), so a corpus of thousands of
//! files holds one open at once; each must have the streams of the first (the error names the
//! first that differs). Sequence keys are corpus keys (`shard << 40 | key`, see
//! [`split_corpus_key`](crate::source::split_corpus_key)), as `exfeed read` gives them.

use super::{Content, DataSet, Inner, Sequences, Summary};
use crate::batch::SequenceBatch;
use crate::element::Element;
use crate::error::{DiagnosticSink, Result};
use crate::format::FileFormat;
use crate::io::InputPath;
use crate::source::{same_streams, to_corpus_keys, Corpus, CORPUS_KEY_BITS};
use crate::stream::StreamSpec;
use crate::OpenOptions;
use std::path::{Path, PathBuf};
use std::result::Result as StdResult;

/// The files of an opened corpus: the first one opened (it gives the format), the rest by name.
pub(super) struct CorpusFiles {
    pub(super) files: Vec<InputPath>,
    pub(super) first: DataSet,
}

/// Opens the corpus `corpus` (a glob, a list file or files; see [`Corpus`]) as one data set:
/// its first file is opened now (its format is the corpus's), the others when they are reached,
/// each with `options` ([`DataSet::shards`]; a file whose streams differ from the first's is an
/// error naming it). Sequences come shard after shard with corpus keys (`shard << 40 | key`,
/// see [`split_corpus_key`](crate::source::split_corpus_key)).
///
/// ```
/// use exfeed::source::{split_corpus_key, Corpus};
/// use exfeed::{open_corpus, OpenOptions, SequenceBatch};
///
/// let dir = tempfile::tempdir()?;
/// std::fs::write(dir.path().join("part-0.ctf"), "0 |x 1\n1 |x 2\n")?;
/// std::fs::write(dir.path().join("part-1.ctf"), "0 |x 3\n")?;
/// let corpus = Corpus::parse(&format!("{}/part-*.ctf", dir.path().display()));
/// let options = OpenOptions { inputs: vec!["x:dense:1".parse()?], ..OpenOptions::default() };
/// let mut sequences = open_corpus(&corpus, &options)?.sequences::<f32>()?;
/// let mut batch = SequenceBatch::new(sequences.streams());
/// let mut keys = Vec::new();
/// while sequences.next_batch(&mut batch, &mut exfeed::error::Ignore)? {
///     keys.extend(batch.keys().iter().map(|&k| split_corpus_key(k)));
/// }
/// assert_eq!(keys, [(0, 0), (0, 1), (1, 0)]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open_corpus(corpus: &Corpus, options: &OpenOptions) -> Result<DataSet> {
    let files = corpus.expand_inputs(options.read.storage_options())?;
    let first = super::open(files[0].clone(), options)?;
    Ok(DataSet {
        input: first.input.clone(),
        name: corpus.to_string(),
        format: first.format,
        compression: first.compression,
        options: options.clone(),
        content: Content::Corpus(Box::new(CorpusFiles { files, first })),
    })
}

/// The shards of a corpus, each opened when reached, with its number in the corpus
/// ([`DataSet::shards`]). A shard whose streams differ from the first's is an error naming it.
pub struct Shards {
    files: Vec<InputPath>,
    next: usize,
    first: Option<DataSet>,
    /// The first shard's name and streams (when known before reading: see
    /// [`DataSet::declared_streams`]).
    first_streams: (String, Option<Vec<StreamSpec>>),
    options: OpenOptions,
}

impl Shards {
    pub(super) fn new(files: CorpusFiles, options: OpenOptions) -> Shards {
        let first_streams = (
            files.first.name().to_string(),
            files.first.declared_streams(),
        );
        Shards {
            files: files.files,
            next: 0,
            first: Some(files.first),
            first_streams,
            options,
        }
    }
}

impl Iterator for Shards {
    /// The shard's number, its file, and it opened (or the error opening it).
    type Item = (usize, PathBuf, Result<DataSet>);

    fn next(&mut self) -> Option<Self::Item> {
        let shard = self.next;
        let input = self.files.get(shard)?.clone();
        let file = input.as_corpus_file();
        let data = match self.first.take() {
            Some(first) => Ok(first),
            None => super::open(input, &self.options).and_then(|data| {
                let (first_name, first) = &self.first_streams;
                if let (Some(first), Some(these)) = (first, data.declared_streams()) {
                    same_streams(data.name(), &these, first_name, first)?;
                }
                Ok(data)
            }),
        };
        self.next += 1;
        Some((shard, file, data))
    }
}

impl DataSet {
    /// Summarizes a corpus shard by shard, for callers that report each shard: `each(file,
    /// opened)` gets every shard opened (or the error opening it) and gives what it read of
    /// it, added to the corpus's summary ([`Summary::merge`]), and whether to go on (an error
    /// stops the walk). Returns the corpus's summary up to there, and the error if any.
    pub fn summarize_shards<E>(
        self,
        mut each: impl FnMut(&Path, Result<DataSet>) -> (Option<Summary>, StdResult<(), E>),
    ) -> (Summary, StdResult<(), E>) {
        let mut total = Summary::of_corpus(self.name.clone(), self.format);
        for (shard, file, data) in self.shards() {
            let (summary, go_on) = each(&file, data);
            if let Some(summary) = &summary {
                total.merge(shard, summary);
            }
            if go_on.is_err() {
                return (total, go_on);
            }
        }
        (total, Ok(()))
    }
}

/// The sequences of a corpus, shard after shard, keys made corpus keys.
pub(super) struct CorpusSequences<T: Element> {
    shards: Shards,
    /// The shard being read: its number, name and sequences.
    current: Option<(usize, String, Sequences<T>)>,
}

impl<T: Element> CorpusSequences<T> {
    /// The sequences of `files`, the first shard opened for reading (it gives the streams).
    pub(super) fn new(files: CorpusFiles, options: OpenOptions) -> Result<(Self, Vec<StreamSpec>)> {
        let mut shards = Shards::new(files, options);
        let (shard, _, first) = shards.next().expect("a corpus has a first file");
        let first = first?;
        let name = first.name().to_string();
        let sequences = first.sequences::<T>()?;
        let streams = sequences.streams().to_vec();
        let current = Some((shard, name, sequences));
        Ok((CorpusSequences { shards, current }, streams))
    }

    pub(super) fn fill(
        &mut self,
        batch: &mut SequenceBatch<T>,
        sink: &mut dyn DiagnosticSink,
    ) -> Result<bool> {
        loop {
            if self.current.is_none() {
                let Some(next) = self.shards.next() else {
                    return Ok(false);
                };
                let (shard, _, data) = next;
                let data = data?;
                let name = data.name().to_string();
                self.current = Some((shard, name, data.sequences::<T>()?));
            }
            let (shard, name, sequences) = self.current.as_mut().expect("a shard is open");
            if sequences.next_batch(batch, sink)? {
                to_corpus_keys(batch.keys_mut(), *shard, name)?;
                return Ok(true);
            }
            self.current = None;
        }
    }
}

impl Summary {
    /// The summary of a corpus named `name` before any file is added ([`Summary::merge`]).
    pub fn of_corpus(name: String, format: FileFormat) -> Summary {
        Summary {
            name,
            format,
            sequences: 0,
            longest: None,
            streams: Vec::new(),
            lens: None,
            corpus: true,
        }
    }

    /// Adds the summary of shard `shard` of a corpus: its counts, its longest sequence (with
    /// its corpus key), its streams' counts (the first shard's streams name them).
    pub fn merge(&mut self, shard: usize, other: &Summary) {
        self.sequences += other.sequences;
        if let Some((len, key)) = other.longest {
            if self.longest.is_none_or(|(l, _)| len > l) {
                self.longest = Some((len, (shard as u64) << CORPUS_KEY_BITS | key));
            }
        }
        if self.streams.is_empty() {
            self.streams = other.streams.clone();
        } else {
            for (sum, s) in self.streams.iter_mut().zip(&other.streams) {
                sum.samples += s.samples;
                sum.non_zeros += s.non_zeros;
            }
        }
        match (&mut self.lens, &other.lens) {
            (Some(total), Some(info)) => total.merge(info),
            (None, Some(info)) => self.lens = Some(info.clone()),
            (_, None) => {}
        }
    }
}

impl<T: Element> Sequences<T> {
    /// Whether the keys are corpus keys (`shard << 40 | key`): the sequences of a corpus.
    pub fn is_corpus(&self) -> bool {
        matches!(self.inner, Inner::Corpus(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Ignore;

    #[test]
    fn a_corpus_summary_adds_up_its_shards_and_stops_at_a_fatal_error_in_one() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p-0.ctf"), "0 |x 1\n1 |x 2\n1 |x 3\n").unwrap();
        std::fs::write(dir.path().join("p-1.ctf"), "0 |x 4\n1 |x y\n").unwrap();
        std::fs::write(dir.path().join("p-2.ctf"), "0 |x 5\n").unwrap();
        let options = OpenOptions {
            inputs: vec!["x:dense:1".parse().unwrap()],
            ..OpenOptions::default()
        };
        let corpus = Corpus::parse(&format!("{}/p-*.ctf", dir.path().display()));
        let outcome = open_corpus(&corpus, &options)
            .unwrap()
            .summary::<f32>(&mut Ignore);
        let err = outcome.result.unwrap_err();
        assert!(err.to_string().contains("p-1.ctf:2"), "{err}");
        // What was read up to the error: shard 0, and the first sequence of shard 1.
        let summary = outcome.summary;
        assert!(summary.corpus);
        assert_eq!(summary.sequences, 3);
        assert_eq!(summary.longest, Some((2, 1)));
        assert_eq!(summary.streams[0].samples, 4);

        std::fs::write(
            dir.path().join("p-1.ctf"),
            "0 |x 4\n1 |x 6\n1 |x 7\n1 |x 8\n",
        )
        .unwrap();
        let whole = open_corpus(&corpus, &options)
            .unwrap()
            .summary::<f32>(&mut Ignore)
            .result
            .unwrap();
        assert_eq!(whole.sequences, 5);
        assert_eq!(whole.longest, Some((3, 1 << CORPUS_KEY_BITS | 1)));
        assert_eq!(whole.streams[0].samples, 8);
    }
}
