//! [`Minibatch`]: what the reader delivers, and its `--dump` JSON line.

use crate::batch::SequenceBatch;
use crate::element::Element;
use crate::stream::StreamSpec;

/// How large a minibatch [`Reader::next_minibatch`](super::Reader::next_minibatch) makes: in
/// samples (CNTK's `minibatchSize`, the default; a plain number converts to it) or in
/// sequences (what a PyTorch `batch_size` counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MinibatchSize {
    /// About this many samples: whole sequences while they fit, and always at least one.
    Samples(usize),
    /// This many sequences whatever their lengths (fewer only where the epoch ends).
    Sequences(usize),
}

impl From<usize> for MinibatchSize {
    fn from(samples: usize) -> Self {
        MinibatchSize::Samples(samples)
    }
}

impl MinibatchSize {
    /// The number, in its unit.
    pub fn count(self) -> usize {
        match self {
            MinibatchSize::Samples(n) | MinibatchSize::Sequences(n) => n,
        }
    }

    /// The unit, as messages name it: "samples" or "sequences".
    pub fn unit(self) -> &'static str {
        match self {
            MinibatchSize::Samples(_) => "samples",
            MinibatchSize::Sequences(_) => "sequences",
        }
    }
}

/// Where a delivered sequence came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SequenceInfo {
    /// The sweep it was read in (0-based).
    pub sweep: u64,
    /// Its key (the CTF sequence id, the CBF/Lens sequence number; in a corpus, the shard and
    /// that key, see [`split_corpus_key`](crate::batch::split_corpus_key)).
    pub key: u64,
    /// Its sample count as the minibatch size counts it.
    pub samples: usize,
    /// It comes from a corpus: `key` holds the shard too.
    pub corpus: bool,
}

/// One minibatch: whole sequences, column by column, plus where they came from. Reuse one
/// `Minibatch` across calls to [`super::Reader::next_minibatch`]; its buffers are kept.
#[derive(Debug, Clone)]
pub struct Minibatch<T> {
    /// The data: per stream a dense `[samples x dim]` buffer or CSR, with sequence boundaries.
    pub data: SequenceBatch<T>,
    /// One entry per sequence of `data`, in the same order.
    pub sequences: Vec<SequenceInfo>,
    /// Total samples (the sum of `sequences[..].samples`).
    pub samples: usize,
    /// The last sequence of a sweep is in this minibatch.
    pub end_of_sweep: bool,
}

impl<T: Element> Minibatch<T> {
    /// An empty minibatch for the given streams.
    pub fn new(specs: &[StreamSpec]) -> Self {
        Minibatch {
            data: SequenceBatch::new(specs),
            sequences: Vec::new(),
            samples: 0,
            end_of_sweep: false,
        }
    }

    /// Empties it, keeping the buffers.
    pub fn clear(&mut self) {
        self.data.clear();
        self.sequences.clear();
        self.samples = 0;
        self.end_of_sweep = false;
    }

    /// Number of sequences.
    pub fn len(&self) -> usize {
        self.sequences.len()
    }

    /// No sequences?
    pub fn is_empty(&self) -> bool {
        self.sequences.is_empty()
    }
}

/// Appends the `--dump` line of a minibatch (with `\n`):
/// `{"end_of_sweep":B,"samples":N,"sequences":[{"sweep":S,"key":K,"samples":N},...]}`; in a
/// corpus the key is a string `"SHARD:KEY"` (e.g. `"3:17"`: key 17 of the fourth file).
pub fn write_minibatch_json<T: Element>(out: &mut Vec<u8>, mb: &Minibatch<T>) {
    use std::io::Write;
    let _ = write!(
        out,
        "{{\"end_of_sweep\":{},\"samples\":{},\"sequences\":[",
        mb.end_of_sweep, mb.samples
    );
    for (i, s) in mb.sequences.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let _ = write!(out, "{{\"sweep\":{},\"key\":", s.sweep);
        crate::json::write_key(out, s.key, s.corpus);
        let _ = write!(out, ",\"samples\":{}}}", s.samples);
    }
    out.extend_from_slice(b"]}\n");
}
