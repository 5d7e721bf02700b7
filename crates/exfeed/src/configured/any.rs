//! [`AnyReader`]: the minibatch reader of a [`ReaderConfig`], whatever its precision.
//!
//! [`Reader`] is generic over the element type; a caller that learns the precision only from
//! the configuration (the command line, a Python binding) uses [`AnyReader`], which picks `f32`
//! or `f64` once, from `cfg.precision`, and delivers [`AnyMinibatch`]es.
//!
//! # Buffers and ownership
//!
//! A minibatch owns its buffers. [`AnyReader::next_minibatch`] clears the minibatch it is given
//! and refills it, reusing whatever buffers it still has. A caller that wants to keep the data
//! (to hand it to NumPy without copying, say) moves the buffers out with
//! [`SequenceBatch::take_stream`] and [`StreamData::into_parts`] (and
//! [`SequenceBatch::take_keys`]); the stream left behind is empty, with the same storage and
//! dimension, and the next call simply allocates fresh buffers for it. Nothing the caller took
//! is touched again by the reader.
//!
//! [`SequenceBatch::take_stream`]: crate::SequenceBatch::take_stream
//! [`SequenceBatch::take_keys`]: crate::SequenceBatch::take_keys
//! [`StreamData::into_parts`]: crate::StreamData::into_parts
//!
//! ```
//! use exfeed::config::ReaderConfig;
//! use exfeed::configured::{AnyMinibatch, AnyReader, RunOptions};
//! use exfeed::reader::EpochLimit;
//!
//! // A CTF file of three sequences and its reader configuration.
//! let dir = std::env::temp_dir().join(format!("exfeed-anyreader-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let data = dir.join("tiny.ctf");
//! std::fs::write(&data, "0 |x 1 2 |y 0:1\n0 |x 3 4\n1 |x 5 6 |y 1:1\n2 |x 7 8 |y 2:1\n")?;
//! let text = format!(
//!     "reader = [ readerType = CNTKTextFormatReader; file = \"{}\"; randomize = false; precision = double;
//!        input = [ x = [ dim = 2; format = dense ]; y = [ dim = 3; format = sparse ] ] ]",
//!     data.display()
//! );
//! let cfg = ReaderConfig::from_cntk_str(&text, "tiny.cntk", None)?;
//!
//! let options = RunOptions { limit: EpochLimit::Sweeps(1), threads: Some(0), ..RunOptions::default() };
//! let mut reader = AnyReader::open(&cfg, &options)?;
//! assert_eq!(reader.precision(), exfeed::Precision::Double);
//! let mut mb = reader.new_minibatch();
//! assert!(reader.next_minibatch(3, &mut mb)?); // sequences 0 (2 samples) and 1 (1 sample)
//! assert_eq!((mb.len(), mb.samples()), (2, 3));
//!
//! // Take the dense stream `x` out: its values are ours now, without a copy.
//! let AnyMinibatch::F64(m) = &mut mb else { unreachable!() };
//! assert_eq!(m.data.take_keys(), vec![0, 1]);
//! let x = m.data.take_stream(0).into_parts();
//! assert_eq!(x.values, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]); // [3 samples x 2]
//! assert_eq!(x.seq_offsets, vec![0, 2, 3]);
//! let y = m.data.take_stream(1).into_parts();
//! // `y` has one sample in each sequence (the streams of a sequence may differ in length).
//! assert_eq!((y.indices, y.sample_offsets), (vec![0, 1], vec![0, 1, 2]));
//!
//! // The reader refills the same minibatch with fresh buffers.
//! assert!(reader.next_minibatch(3, &mut mb)?);
//! assert_eq!(mb.len(), 1);
//! assert!(!reader.next_minibatch(3, &mut mb)?);
//! assert!(reader.is_done());
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use super::build::{open_sources, reader_options, ConfiguredSource};
use crate::config::ReaderConfig;
use crate::element::{Element, Precision};
use crate::error::{Diagnostic, Error, Result};
use crate::io::data_stamp::{self, FileStamp};
use crate::io::InputPath;
use crate::reader::{
    equalize_quota, EpochLimit, Minibatch, MinibatchSize, QuotaBasis, Reader, ReaderOptions,
    ReaderState, SequenceInfo,
};
use crate::stream::StreamSpec;

/// How a reader runs, beyond what its configuration says: the epoch's end, the decoding
/// threads and the distributed worker. `None` takes the default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOptions {
    /// When the epoch ends (default: after one sweep).
    pub limit: EpochLimit,
    /// Decoding threads (see [`ReaderOptions::threads`]); default: the available parallelism.
    pub threads: Option<usize>,
    /// Chunks decoded ahead (see [`ReaderOptions::prefetch_chunks`]); default:
    /// [`ReaderOptions::prefetch_for`] the threads.
    pub prefetch_chunks: Option<usize>,
    /// Number of distributed workers (at least 1).
    pub num_workers: usize,
    /// This worker's rank, `0..num_workers`.
    pub worker_rank: usize,
    /// Inputs read in place of the deserializers' files, in order (e.g. data already read from
    /// a pipe, see [`crate::DataSet::into_input`]); empty: the files the configuration names.
    pub inputs: Vec<InputPath>,
    /// Keep ranks in step: every worker delivers the same number of minibatches per sweep
    /// ([`ReaderOptions::equalize`], the number from [`equalize_quota`]).
    pub equalize: Option<Equalize>,
}

/// What [`RunOptions::equalize`] computes the minibatches per sweep from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Equalize {
    /// The minibatch size the caller asks for (a plain number: samples).
    pub minibatch_size: MinibatchSize,
    /// The ranks that must stay in step; the workers are split evenly between them (e.g.
    /// DataLoader processes of each rank). Usually `num_workers`.
    pub ranks: usize,
    /// How: repeating or dropping data, or spreading every sequence over the minibatches.
    pub mode: crate::options::EqualizeMode,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            limit: EpochLimit::default(),
            threads: None,
            prefetch_chunks: None,
            num_workers: 1,
            worker_rank: 0,
            inputs: Vec::new(),
            equalize: None,
        }
    }
}

impl RunOptions {
    /// The engine options: those `cfg` says ([`reader_options`]) with these on top.
    pub fn reader_options(&self, cfg: &ReaderConfig) -> ReaderOptions {
        let mut o = reader_options(cfg, self.limit);
        o.num_workers = self.num_workers;
        o.worker_rank = self.worker_rank;
        if let Some(t) = self.threads {
            o.threads = t;
            o.prefetch_chunks = ReaderOptions::prefetch_for(t);
        }
        if let Some(p) = self.prefetch_chunks {
            o.prefetch_chunks = p;
        }
        o
    }
}

/// A minibatch of either precision, as [`AnyReader`] delivers it.
#[derive(Debug, Clone)]
pub enum AnyMinibatch {
    /// Values are `f32` (precision `float`).
    F32(Minibatch<f32>),
    /// Values are `f64` (precision `double`).
    F64(Minibatch<f64>),
}

macro_rules! either {
    ($value:expr, $x:ident => $body:expr) => {
        match $value {
            AnyMinibatch::F32($x) => $body,
            AnyMinibatch::F64($x) => $body,
        }
    };
}

impl AnyMinibatch {
    /// An empty minibatch of `precision` with the streams `specs`.
    pub fn new(precision: Precision, specs: &[StreamSpec]) -> Self {
        match precision {
            Precision::Float => AnyMinibatch::F32(Minibatch::new(specs)),
            Precision::Double => AnyMinibatch::F64(Minibatch::new(specs)),
        }
    }

    /// The precision of its values.
    pub fn precision(&self) -> Precision {
        match self {
            AnyMinibatch::F32(_) => Precision::Float,
            AnyMinibatch::F64(_) => Precision::Double,
        }
    }

    /// Number of sequences.
    pub fn len(&self) -> usize {
        either!(self, m => m.len())
    }

    /// No sequences?
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Total samples.
    pub fn samples(&self) -> usize {
        either!(self, m => m.samples)
    }

    /// Where each sequence came from, in order.
    pub fn sequences(&self) -> &[SequenceInfo] {
        either!(self, m => &m.sequences)
    }

    /// The last sequence of a sweep is in this minibatch.
    pub fn end_of_sweep(&self) -> bool {
        either!(self, m => m.end_of_sweep)
    }

    /// The keys of its sequences, in order (empty once taken out).
    pub fn keys(&self) -> &[u64] {
        either!(self, m => m.data.keys())
    }

    /// The minibatch's `--dump` JSON line (see [`crate::reader::write_minibatch_json`]).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        either!(self, m => crate::reader::write_minibatch_json(out, m))
    }
}

/// One reader per element type, with the source it reads (for its diagnostics).
enum Typed {
    F32(Reader<f32>, ConfiguredSource<f32>),
    F64(Reader<f64>, ConfiguredSource<f64>),
}

macro_rules! typed {
    ($value:expr, $r:ident, $s:ident => $body:expr) => {
        match $value {
            Typed::F32($r, $s) => $body,
            Typed::F64($r, $s) => $body,
        }
    };
}

/// The minibatch reader of a [`ReaderConfig`], of the precision it says. A minibatch owns its
/// buffers: a caller keeps the data by moving them out ([`SequenceBatch::take_stream`](crate::SequenceBatch::take_stream),
/// [`StreamData::into_parts`](crate::StreamData::into_parts)), and the reader allocates fresh
/// ones for the next minibatch.
pub struct AnyReader {
    typed: Typed,
    /// The data files, stamped for a saved state when one is first asked for.
    files: Vec<InputPath>,
    stamps: std::sync::OnceLock<Option<Vec<FileStamp>>>,
}

impl AnyReader {
    /// Opens and indexes every deserializer of `cfg` (see
    /// [`open_configured_source`](super::open_configured_source)) and
    /// starts at the beginning of sweep 0.
    pub fn open(cfg: &ReaderConfig, options: &RunOptions) -> Result<AnyReader> {
        Self::build(cfg, options, &[], false)
    }

    /// Like [`AnyReader::open`], continuing from a state saved by [`AnyReader::state`] (see
    /// [`Reader::restore`] for what must agree).
    pub fn restore(
        cfg: &ReaderConfig,
        options: &RunOptions,
        state: &ReaderState,
    ) -> Result<AnyReader> {
        // A state of a read of one worker is the whole read: it resumes on any count.
        Self::build(
            cfg,
            options,
            std::slice::from_ref(state),
            state.num_workers == 1,
        )
    }

    /// Like [`AnyReader::open`], continuing from the states of all the workers of a read,
    /// saved by [`AnyReader::state`], on this reader's number of workers and rank, which may
    /// differ (see [`Reader::restore_from_all`]).
    pub fn restore_from_all(
        cfg: &ReaderConfig,
        options: &RunOptions,
        states: &[ReaderState],
    ) -> Result<AnyReader> {
        if states.is_empty() {
            return Err(Error::config("no saved reader state given"));
        }
        Self::build(cfg, options, states, true)
    }

    /// Opens, restoring `states`: one worker's own ([`Reader::restore`]), or with `all` those
    /// of every worker of a read ([`Reader::restore_from_all`]).
    fn build(
        cfg: &ReaderConfig,
        options: &RunOptions,
        states: &[ReaderState],
        all: bool,
    ) -> Result<AnyReader> {
        fn typed<T: Element>(
            cfg: &ReaderConfig,
            run: &RunOptions,
            mut options: ReaderOptions,
            (states, all): (&[ReaderState], bool),
        ) -> Result<(Reader<T>, ConfiguredSource<T>)> {
            let source = open_sources::<T>(cfg, &run.inputs, run.num_workers)?;
            if let Some(e) = run.equalize {
                let sweep = sweep_size(&*source.source, &options);
                let total = match e.minibatch_size {
                    MinibatchSize::Samples(_) => sweep.samples,
                    MinibatchSize::Sequences(_) => sweep.sequences as u64,
                };
                let (workers, rank) = (run.num_workers, run.worker_rank);
                options.equalize_mode = e.mode;
                options.equalize_basis = Some(QuotaBasis {
                    minibatch_size: e.minibatch_size,
                    ranks: e.ranks,
                });
                options.equalize = Some(equalize_quota(
                    total,
                    e.minibatch_size.count(),
                    workers,
                    e.ranks,
                    rank,
                )?);
            }
            let reader = match (states, all) {
                ([], _) => Reader::new(source.source.clone(), options)?,
                (_, true) => Reader::restore_from_all(source.source.clone(), options, states)?,
                ([s, ..], false) => Reader::restore(source.source.clone(), options, s)?,
            };
            Ok((reader, source))
        }
        let files = data_files(cfg, &options.inputs)?;
        let stamps = std::sync::OnceLock::new();
        // A state saved before states knew their data (it has none) is not checked.
        if states.iter().any(|s| s.data.is_some()) {
            let now = data_stamp::stamps(&files)?;
            for saved in states.iter().filter_map(|s| s.data.as_deref()) {
                if let Some(why) = data_stamp::difference(saved, &now) {
                    return Err(Error::config(format!(
                        "the saved reader state does not fit this reader: {why}"
                    )));
                }
            }
            let _ = stamps.set(Some(now));
        }
        let o = options.reader_options(cfg);
        let typed = match cfg.precision {
            Precision::Float => {
                typed(cfg, options, o, (states, all)).map(|(r, s)| Typed::F32(r, s))
            }
            Precision::Double => {
                typed(cfg, options, o, (states, all)).map(|(r, s)| Typed::F64(r, s))
            }
        }?;
        Ok(AnyReader {
            typed,
            files,
            stamps,
        })
    }

    /// The precision of the values delivered.
    pub fn precision(&self) -> Precision {
        match self.typed {
            Typed::F32(..) => Precision::Float,
            Typed::F64(..) => Precision::Double,
        }
    }

    /// The streams of every minibatch, in order.
    pub fn streams(&self) -> &[StreamSpec] {
        typed!(&self.typed, r, _s => r.streams())
    }

    /// The engine options in effect.
    pub fn options(&self) -> &ReaderOptions {
        typed!(&self.typed, r, _s => r.options())
    }

    /// An empty minibatch of this reader's precision and streams.
    pub fn new_minibatch(&self) -> AnyMinibatch {
        AnyMinibatch::new(self.precision(), self.streams())
    }

    /// Fills `mb` with the next minibatch of about `size` samples (see
    /// [`Reader::next_minibatch`]); `false` (and an empty `mb`) once the epoch is over. A
    /// minibatch of the other precision, or with its streams taken out, is fine: it is
    /// replaced or refilled.
    pub fn next_minibatch(
        &mut self,
        size: impl Into<MinibatchSize>,
        mb: &mut AnyMinibatch,
    ) -> Result<bool> {
        let size = size.into();
        match (&mut self.typed, &mut *mb) {
            (Typed::F32(r, _), AnyMinibatch::F32(m)) => r.next_minibatch(size, m),
            (Typed::F64(r, _), AnyMinibatch::F64(m)) => r.next_minibatch(size, m),
            _ => {
                *mb = self.new_minibatch();
                self.next_minibatch(size, mb)
            }
        }
    }

    /// A handle that stops this reader's reads from another thread.
    pub fn stopper(&self) -> crate::reader::Stopper {
        typed!(&self.typed, r, _s => r.stopper())
    }

    /// The current position, to save and pass to [`AnyReader::restore`].
    /// It names the data files ([`ReaderState::data`]), stamped when it is first asked for (a
    /// file that cannot be read then leaves the state without them).
    pub fn state(&self) -> ReaderState {
        let mut state = typed!(&self.typed, r, _s => r.state());
        let stamps = self
            .stamps
            .get_or_init(|| data_stamp::stamps(&self.files).ok());
        state.data = stamps.clone();
        state
    }

    /// Goes to CNTK's checkpoint position (see [`Reader::set_cntk_position`]).
    pub fn set_cntk_position(&mut self, position: u64) -> Result<()> {
        typed!(&mut self.typed, r, _s => r.set_cntk_position(position))
    }

    /// Changes when the epoch ends (see [`Reader::set_limit`]).
    pub fn set_limit(&mut self, limit: EpochLimit) -> Result<()> {
        typed!(&mut self.typed, r, _s => r.set_limit(limit))
    }

    /// Has the epoch ended?
    pub fn is_done(&self) -> bool {
        typed!(&self.typed, r, _s => r.is_done())
    }

    /// Samples delivered so far.
    pub fn samples_delivered(&self) -> u64 {
        typed!(&self.typed, r, _s => r.samples_delivered())
    }

    /// Minibatches delivered so far.
    pub fn minibatches(&self) -> u64 {
        typed!(&self.typed, r, _s => r.minibatches())
    }

    /// What the reader has done so far (see [`Reader::stats`]).
    pub fn stats(&self) -> crate::reader::ReaderStats {
        typed!(&self.typed, r, _s => r.stats())
    }

    /// The samples and sequences of a sweep over the whole data set (all workers), by the
    /// index: the data set's, or of a mix its first sweep's (the others differ by less than a
    /// chunk a source).
    pub fn sweep_size(&self) -> crate::reader::ChunkInfo {
        typed!(&self.typed, r, s => sweep_size(&*s.source, r.options()))
    }

    /// The chunks of the data set (from the index), in file order.
    pub fn chunks(&self) -> &[crate::reader::ChunkInfo] {
        typed!(&self.typed, _r, s => s.source.chunks())
    }

    /// Warnings so far (see [`ConfiguredSource::diagnostics`]).
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        typed!(&self.typed, _r, s => s.diagnostics())
    }

    /// A warning when this worker's share of the sweep is empty or far below the others' (see
    /// [`Reader::share_warning`]).
    pub fn share_warning(&self) -> Option<String> {
        typed!(&self.typed, r, _s => r.share_warning())
    }

    /// Of a mix of data sets: the mix (its sources, weights and sweep size).
    pub fn mix(&self) -> Option<&crate::reader::Mix> {
        typed!(&self.typed, _r, s => s.source.mix())
    }

    /// Of a mix: what each source contributed to each sweep (see [`Reader::mix_report`]).
    pub fn mix_report(&self) -> Vec<crate::reader::SweepMix> {
        typed!(&self.typed, r, _s => r.mix_report())
    }

    /// With equalize, the minibatches this worker delivers in the current sweep (see
    /// [`Reader::sweep_quota`]).
    pub fn sweep_quota(&self) -> Option<u64> {
        typed!(&self.typed, r, _s => r.sweep_quota())
    }

    /// With equalize, the notes of the sweeps ended since the last call (see
    /// [`Reader::take_notes`]).
    pub fn take_notes(&mut self) -> Vec<String> {
        typed!(&mut self.typed, r, _s => r.take_notes())
    }

    /// Where each CTF deserializer's index came from, in configuration order.
    pub fn index_origins(&self) -> Vec<crate::source::IndexOrigin> {
        typed!(&self.typed, _r, s => s.ctf_sources().iter().map(|c| c.index_origin()).collect())
    }
}

/// The samples, sequences and bytes of a sweep over `source` (all workers), by the index: its
/// chunks', or of a mix the chunks of its first sweep (the others differ by less than a chunk a
/// source).
fn sweep_size<T: Element>(
    source: &dyn crate::reader::ChunkSource<T>,
    options: &ReaderOptions,
) -> crate::reader::ChunkInfo {
    let infos = source.chunks();
    let chunks: Vec<usize> = match source.mix() {
        Some(mix) => mix.sweep_chunks(options.randomize, options.seed, 0),
        None => (0..infos.len()).collect(),
    };
    let mut total = crate::reader::ChunkInfo::default();
    for c in chunks {
        total.samples = total.samples.saturating_add(infos[c].samples);
        total.sequences = total.sequences.saturating_add(infos[c].sequences);
        total.bytes = total.bytes.saturating_add(infos[c].bytes);
    }
    total
}

/// The data files of `cfg`, or `inputs` read in their place (see [`RunOptions::inputs`]).
fn data_files(cfg: &ReaderConfig, inputs: &[InputPath]) -> Result<Vec<InputPath>> {
    if !inputs.is_empty() {
        return Ok(inputs.to_vec());
    }
    let mut files = Vec::new();
    for d in &cfg.deserializers {
        let read = d.effective_read(cfg);
        match &d.corpus {
            Some(corpus) => files.extend(
                corpus
                    .expand_inputs(read.storage_options())?
                    .into_iter()
                    .map(|f| read.apply_to(f)),
            ),
            None => files.push(read.apply_to(InputPath::new(&d.file))),
        }
    }
    Ok(files)
}

// The reader moves to other threads (a Python binding releases the GIL around it).
const _: () = {
    const fn send<T: Send>() {}
    send::<AnyReader>();
    send::<AnyMinibatch>();
};

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn sample_config(precision: Precision) -> ReaderConfig {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples");
        let mut cfg = ReaderConfig::from_file(dir.join("sequences.cntk"), None).unwrap();
        cfg.resolve_files(&dir);
        cfg.precision = precision;
        cfg
    }

    /// Every minibatch's keys and first stream's values, as f64.
    fn drain(
        reader: &mut AnyReader,
        mb: &mut AnyMinibatch,
        take: bool,
    ) -> Vec<(Vec<u64>, Vec<f64>)> {
        let mut out = Vec::new();
        while reader.next_minibatch(7, mb).unwrap() {
            let (keys, values): (Vec<u64>, Vec<f64>) = match mb {
                AnyMinibatch::F32(m) if take => (
                    m.data.take_keys(),
                    m.data
                        .take_stream(0)
                        .into_parts()
                        .values
                        .into_iter()
                        .map(f64::from)
                        .collect(),
                ),
                AnyMinibatch::F64(m) if take => (
                    m.data.take_keys(),
                    m.data.take_stream(0).into_parts().values,
                ),
                AnyMinibatch::F32(m) => (
                    m.data.keys().to_vec(),
                    m.data.streams()[0]
                        .values()
                        .iter()
                        .map(|&v| f64::from(v))
                        .collect(),
                ),
                AnyMinibatch::F64(m) => (
                    m.data.keys().to_vec(),
                    m.data.streams()[0].values().to_vec(),
                ),
            };
            out.push((keys, values));
        }
        out
    }

    #[test]
    fn taking_buffers_out_leaves_the_minibatches_unchanged_in_both_precisions() {
        let options = RunOptions {
            limit: EpochLimit::Sweeps(2),
            ..RunOptions::default()
        };
        let mut runs = Vec::new();
        for (precision, take) in [
            (Precision::Float, false),
            (Precision::Float, true),
            (Precision::Double, true),
        ] {
            let mut reader = AnyReader::open(&sample_config(precision), &options).unwrap();
            assert_eq!(reader.precision(), precision);
            // A minibatch of the other precision is replaced, not refused.
            let other = if precision == Precision::Float {
                Precision::Double
            } else {
                Precision::Float
            };
            let mut mb = AnyMinibatch::new(other, reader.streams());
            runs.push(drain(&mut reader, &mut mb, take));
            assert!(reader.is_done());
            assert_eq!(mb.precision(), precision);
        }
        assert!(runs[0].len() > 2);
        assert_eq!(runs[0], runs[1]);
        // The sample's values are short decimals: f32 and f64 agree to f32 precision.
        for (a, b) in runs[1].iter().zip(&runs[2]) {
            assert_eq!(a.0, b.0);
            let b32: Vec<f64> = b.1.iter().map(|&v| f64::from(v as f32)).collect();
            assert_eq!(a.1, b32);
        }
    }

    #[test]
    fn restore_goes_on_where_the_state_was_taken() {
        let cfg = sample_config(Precision::Double);
        let options = RunOptions {
            threads: Some(1),
            ..RunOptions::default()
        };
        let mut whole = AnyReader::open(&cfg, &options).unwrap();
        let mut mb = whole.new_minibatch();
        let all = drain(&mut whole, &mut mb, false);
        let mut first = AnyReader::open(&cfg, &options).unwrap();
        assert!(first.next_minibatch(7, &mut mb).unwrap());
        assert!(first.next_minibatch(7, &mut mb).unwrap());
        let mut rest = AnyReader::restore(&cfg, &options, &first.state()).unwrap();
        assert_eq!(rest.minibatches(), 2);
        assert_eq!(drain(&mut rest, &mut mb, true), all[2..]);
    }
}
