//! `exfeed read`: feed minibatches through the reader engine, as a trainer would, and report.

use super::source::{exit_code_for, parse_size, LayoutArgs, SourceArgs};
use crate::diag::{print_library_error, Stderr};
use crate::progress::{Progress, Unit};
use exfeed::config::ReaderConfig;
use exfeed::configured::{AnyReader, Equalize, ReaderArgs, RunOptions};
use exfeed::io::InputPath;
use exfeed::options::{ChunkSize, ReadOptions};
use exfeed::reader::{
    EpochLimit, EqualizeMode, MinibatchSize, Randomizer, ReadSummary, ReaderState,
};
use exfeed::source::{Corpus, DataPath, IndexMode, IndexOrigin, MixSpec};
use exfeed::{Diagnostic, DiagnosticSink, Error, Location, Severity};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `exfeed read`.
#[derive(clap::Args)]
pub struct Args {
    /// The corpus to read (from --corpus or the config), set by `run`.
    #[arg(skip)]
    pub corpus: Option<Corpus>,
    /// The data files: one per deserializer of --config (in its order, or matched by name;
    /// by default the config's `file =`), or CBF files (every stream), or one CTF file with
    /// --input. Several files are joined by sequence key.
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub source: SourceArgs,
    /// Data sets mixed by weight, instead of FILE or --corpus: SOURCE=WEIGHT,... with each
    /// SOURCE a file, a quoted glob or @LIST, e.g. 'a.ctf=0.7,b/*.cbf=0.3'. A weight is a
    /// share of a sweep's samples; a source smaller than its share cycles within the sweep.
    /// The sources must have the same streams (see docs/mixing.md).
    #[arg(long, value_name = "SOURCE=WEIGHT,...", conflicts_with = "corpus")]
    pub mix: Option<String>,
    /// The samples of a sweep of a mix (default: the sum of its sources' samples).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub mix_epoch_samples: Option<u64>,
    /// Minibatch size in samples (whole sequences; the first sequence is always taken).
    #[arg(long, short = 'm', value_name = "N", value_parser = clap::value_parser!(u64).range(1..),
          required_unless_present = "minibatch_sequences")]
    pub minibatch_size: Option<u64>,
    /// Minibatch size in sequences, whatever their lengths (what a PyTorch batch_size counts),
    /// instead of --minibatch-size.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..),
          conflicts_with = "minibatch_size")]
    pub minibatch_sequences: Option<u64>,
    /// Stop after K sweeps over the data (default: one sweep).
    #[arg(long, value_name = "K", conflicts_with = "max_samples")]
    pub max_sweeps: Option<u64>,
    /// Stop after N samples (this worker's).
    #[arg(long, value_name = "N")]
    pub max_samples: Option<u64>,
    /// Read in file order.
    #[arg(long)]
    pub no_randomize: bool,
    /// randomizationSeed: sweep s is shuffled with seed + s.
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    /// Randomization window in chunks.
    #[arg(long, value_name = "W", conflicts_with_all = ["window_samples", "window_bytes"])]
    pub window_chunks: Option<u64>,
    /// Randomization window in samples (sampleBasedRandomizationWindow).
    #[arg(long, value_name = "W", conflicts_with = "window_bytes")]
    pub window_samples: Option<u64>,
    /// Randomization window in bytes of the file (randomizationWindowInBytes; suffixes K, M,
    /// G): consecutive chunks of at most this many bytes, at least one; chunks decoded ahead
    /// stay within it too.
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub window_bytes: Option<u64>,
    /// chunkSizeInBytes for CTF and Lens files (suffixes K, M, G for KiB, MiB, GiB), or auto:
    /// at least 4 chunks per worker (the data's size / (4 x --num-workers), at most 32M or the
    /// config's).
    #[arg(long, value_name = "BYTES", value_parser = parse_chunk_size)]
    pub chunk_size: Option<ChunkSize>,
    /// Keep ranks in step: every worker delivers the same number of minibatches per sweep,
    /// max(1, samples (or sequences) of a sweep / (num-workers x minibatch size)); a worker
    /// whose part runs out repeats it from its start, one with more drops the rest (see
    /// --equalize-mode). A note per sweep says what.
    #[arg(long)]
    pub equalize: bool,
    /// equalizeMode: repeat (the default: minibatches of the asked size, parts repeated or cut
    /// short) or spread (every sequence of the sweep once, spread over the minibatches, whose
    /// sizes then vary; needs --index full for CTF). Implies --equalize.
    #[arg(long, value_name = "MODE", value_parser = parse_named::<EqualizeMode>)]
    pub equalize_mode: Option<EqualizeMode>,
    /// Number of distributed workers.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "worker_rank")]
    pub num_workers: usize,
    /// This worker's rank, 0..N.
    #[arg(long, value_name = "R", default_value_t = 0)]
    pub worker_rank: usize,
    /// frameMode: every sequence is one sample; samples are shuffled individually.
    #[arg(long)]
    pub frame_mode: bool,
    /// keepDataInMemory: read whole files into memory.
    #[arg(long)]
    pub keep_in_memory: bool,
    /// cacheIndex: keep the CTF index beside the data file (FILE.exfeed-index).
    #[arg(long)]
    pub cache_index: bool,
    /// CTF files: full (index the whole file before the first minibatch), none (chunks are
    /// byte ranges of the file, resolved to whole sequences as they are read: a worker reads
    /// only its own), or auto (none unless --cache-index, --max-errors, a file without
    /// sequence ids or a join by key needs the index). Default: the config's, else auto.
    #[arg(long, value_name = "auto|full|none", value_parser = parse_named::<IndexMode>)]
    pub index: Option<IndexMode>,
    /// randomizer: exfeed (the default: exfeed's order, chunks decoded ahead on threads) or
    /// cntk (CNTK 2.7's order and minibatches exactly, for CTF and CBF; needs the full index).
    /// Default: the config's, else exfeed.
    #[arg(long, value_name = "exfeed|cntk", value_parser = parse_named::<Randomizer>)]
    pub randomizer: Option<Randomizer>,
    /// Threads decoding chunks ahead (default: the available cores; 0: on the caller's thread;
    /// at most 4 per core).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Write the reader's position to FILE at the end (see --stop-after).
    #[arg(long, value_name = "FILE")]
    pub save_state: Option<PathBuf>,
    /// Stop after M minibatches.
    #[arg(long, value_name = "M")]
    pub stop_after: Option<u64>,
    /// Continue from a position written by --save-state (same data and options). Repeat it,
    /// or give a directory (its *.json files), to resume the states of all the workers of a
    /// read on another --num-workers: the rest of their sweep is split between the new
    /// workers, each sequence once (docs/reader.md).
    #[arg(long, value_name = "FILE|DIR")]
    pub restore_state: Vec<PathBuf>,
    /// Print one JSON line per minibatch on stdout.
    #[arg(long)]
    pub dump: bool,
    /// Lens files: the network's layout (required) and the value NaN becomes.
    #[command(flatten)]
    pub lens: LayoutArgs,
    /// Lens files: Lens's example selection instead of the block randomizer: ordered (file
    /// order), permuted (every example once a sweep, a new order each sweep), randomized
    /// (uniform draws with replacement), probabilistic (draws weighted by freq:). Default: the
    /// block randomizer, as for CTF and CBF (which, with no window, is a permutation).
    #[arg(long, value_name = "MODE", value_parser = parse_named::<exfeed::lens::select::SelectionMode>,
          conflicts_with_all = ["no_randomize", "window_chunks", "window_samples", "window_bytes"])]
    pub lens_mode: Option<exfeed::lens::select::SelectionMode>,
}

fn parse_chunk_size(s: &str) -> Result<ChunkSize, String> {
    if s == "auto" {
        return Ok(ChunkSize::Auto);
    }
    parse_size(s).map(ChunkSize::Bytes)
}

/// A named value (`--index`, `--lens-mode`), with the library's message when it is not one.
fn parse_named<T: std::str::FromStr<Err = Error>>(s: &str) -> Result<T, String> {
    s.parse().map_err(|e: Error| e.message().to_string())
}

/// The reader configuration: --config (files replaced by the FILE arguments) or one
/// deserializer per file, then the flags on top; and the inputs, one per deserializer, each
/// file opened once.
/// The flags of `ReadOptions`; a flag not given leaves the configuration's value.
fn read_options(args: &Args) -> ReadOptions {
    let mut read = ReadOptions::new();
    if let Some(size) = args.chunk_size {
        read = read.with_chunk_size(size);
    }
    if let Some(index) = args.index {
        read = read.with_index(index);
    }
    // Switches: given, they set the value; absent, the configuration's stands.
    if args.keep_in_memory {
        read = read.with_keep_in_memory(true);
    }
    if args.cache_index {
        read = read.with_cache_index(true);
    }
    if args.frame_mode {
        read = read.with_frame_mode(true);
    }
    read
}

fn build_config(args: &Args) -> anyhow::Result<(ReaderConfig, Vec<InputPath>)> {
    let s = &args.source;
    let (input_groups, target_groups) = args.lens.layouts()?.unzip();
    let reader_args = ReaderArgs {
        files: args.files.clone(),
        corpus: args.corpus.clone(),
        mix_epoch_samples: args.mix_epoch_samples,
        inputs: s.inputs.clone(),
        precision: s.precision,
        skip_sequence_ids: s.skip_sequence_ids,
        max_errors: s.max_errors,
        trace_level: s.trace_level,
        randomize: args.no_randomize.then_some(false),
        seed: args.seed,
        window_chunks: args.window_chunks,
        window_samples: args.window_samples,
        window_bytes: args.window_bytes,
        read: read_options(args).over(&s.read_options()),
        randomizer: args.randomizer,
        input_groups,
        target_groups,
        nan: args.lens.nan,
        lens_mode: args.lens_mode,
        max_record_size: s.max_record_size,
    };
    Ok(reader_args.configure(s.reader_config()?)?)
}

pub fn run(mut args: Args) -> anyhow::Result<ExitCode> {
    // The mix, files or corpus given, else the config's.
    let data = match &args.mix {
        Some(_) if !args.files.is_empty() => anyhow::bail!("give FILE or --mix, not both"),
        Some(mix) => vec![DataPath::Corpus(Corpus::Mix(MixSpec::parse(mix)?))],
        None => args.source.data(&args.files)?,
    };
    args.files.clear();
    for d in data {
        match d {
            DataPath::File(f) => args.files.push(f),
            DataPath::Corpus(c) => args.corpus = Some(c),
        }
    }
    if args.num_workers == 0 {
        anyhow::bail!("--num-workers must be at least 1");
    }
    if args.worker_rank >= args.num_workers {
        anyhow::bail!("--worker-rank must be below --num-workers");
    }
    let (cfg, inputs) = build_config(&args)?;
    match read(&cfg, inputs, &args) {
        Ok(code) => Ok(code),
        Err(e) => {
            print_library_error(&e);
            Ok(ExitCode::from(exit_code_for(&e)))
        }
    }
}

impl Args {
    /// --minibatch-size or --minibatch-sequences (clap makes sure there is one).
    fn minibatch(&self) -> MinibatchSize {
        match (self.minibatch_size, self.minibatch_sequences) {
            (_, Some(n)) => MinibatchSize::Sequences(n as usize),
            (n, None) => MinibatchSize::Samples(n.unwrap_or(1) as usize),
        }
    }
}

fn read(cfg: &ReaderConfig, inputs: Vec<InputPath>, args: &Args) -> Result<ExitCode, Error> {
    let start = Instant::now();
    let options = RunOptions {
        limit: match (args.max_sweeps, args.max_samples) {
            (_, Some(n)) => EpochLimit::Samples(n),
            (Some(k), None) => EpochLimit::Sweeps(k),
            (None, None) => EpochLimit::Sweeps(1),
        },
        threads: args.threads,
        prefetch_chunks: None,
        num_workers: args.num_workers,
        worker_rank: args.worker_rank,
        inputs,
        equalize: (args.equalize || cfg.equalize || args.equalize_mode.is_some()).then_some(
            Equalize {
                minibatch_size: args.minibatch(),
                ranks: args.num_workers,
                mode: args.equalize_mode.unwrap_or(cfg.equalize_mode),
            },
        ),
    };
    let mut reader = match saved_states(&args.restore_state)?.as_slice() {
        [] => AnyReader::open(cfg, &options)?,
        // One file is one worker's state, several are all the workers of a read.
        [one] if args.restore_state.len() == 1 && !args.restore_state[0].is_dir() => {
            AnyReader::restore(cfg, &options, one)?
        }
        all => AnyReader::restore_from_all(cfg, &options, all)?,
    };
    let indexed = start.elapsed();
    let mut sink = Stderr::new(cfg.trace_level);
    if let Some(w) = reader.share_warning() {
        sink.report(Diagnostic {
            severity: Severity::Warning,
            location: Location::default(),
            message: w,
        });
    }
    let mut out = std::io::BufWriter::with_capacity(1 << 16, crate::diag::Stdout::lock());
    let mut line = Vec::new();
    // A closed standard output (a pipe into `head`) ends the dump quietly, not the reading;
    // any other write error (a full disk) ends the run.
    let mut stdout_closed = false;
    let mut write_error = None;
    let (mut bar, mut done) = progress_bar(&reader, args);
    let mut mb = reader.new_minibatch();
    let mut summary = ReadSummary::default();
    let result = loop {
        if args.stop_after.is_some_and(|m| summary.minibatches >= m) {
            break Ok(());
        }
        match reader.next_minibatch(args.minibatch(), &mut mb) {
            Ok(true) => {}
            Ok(false) => {
                summary.finished = true;
                break Ok(());
            }
            Err(e) => break Err(e),
        }
        summary.minibatches += 1;
        summary.sequences += mb.len() as u64;
        summary.samples += mb.samples() as u64;
        done += mb.samples() as u64;
        bar.set(done);
        if args.dump && !stdout_closed {
            line.clear();
            mb.write_json(&mut line);
            match out.write_all(&line) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => stdout_closed = true,
                Err(e) => {
                    write_error = Some(e);
                    break Ok(());
                }
            }
        }
    };
    match out.flush() {
        Err(e) if !stdout_closed && e.kind() != std::io::ErrorKind::BrokenPipe => {
            write_error.get_or_insert(e);
        }
        _ => {}
    }
    drop(out);
    bar.finish();
    for d in reader.diagnostics() {
        sink.report(d);
    }
    for note in reader.take_notes() {
        eprintln!("exfeed: note: {note}");
    }
    result?;
    if let Some(e) = write_error {
        return Err(e.into());
    }
    if let Some(path) = &args.save_state {
        exfeed::io::replace_file(path, format!("{}\n", reader.state().to_json()).as_bytes())?;
    }
    let elapsed = start.elapsed().as_secs_f64().max(1e-9);
    let sweep = reader.sweep_size();
    let (total_bytes, total_samples) = (sweep.bytes, sweep.samples);
    // Input bytes the delivered samples stand for (the index's share of the data).
    let bytes = if total_samples > 0 {
        total_bytes as f64 * summary.samples as f64 / total_samples as f64
    } else {
        0.0
    };
    let origin = index_origins(&reader.index_origins());
    let stats = reader.stats();
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "read: {} minibatches, {} sequences, {} samples{}; {:.1} MB/s, {:.0} samples/s; {:.3} s (opening {:.3} s{}); decoded {} chunks, {:.1} MB in {:.3} s; waited {:.3} s for data ({:.0}%); peak RSS {}",
        summary.minibatches,
        summary.sequences,
        summary.samples,
        if summary.finished { "" } else { " (stopped)" },
        bytes / 1e6 / elapsed,
        summary.samples as f64 / elapsed,
        elapsed,
        indexed.as_secs_f64(),
        if origin.is_empty() { String::new() } else { format!(", index {origin}") },
        stats.chunks_decoded,
        stats.bytes_decoded as f64 / 1e6,
        stats.decode_time.as_secs_f64(),
        stats.wait_time.as_secs_f64(),
        100.0 * stats.wait_share(),
        peak_rss().map_or_else(|| "unknown".to_string(), |kb| format!("{:.1} MB", kb as f64 / 1024.0)),
    );
    if let Some(mix) = reader.mix() {
        for sweep in reader.mix_report() {
            let _ = writeln!(err, "{}", mix_line(mix, &sweep));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What each source of `mix` contributed to one sweep (this worker's part of it): `mix: sweep
/// 0: a.ctf=0.7 35 sequences, 700 samples (70.0%); b.ctf=0.3 ...`.
fn mix_line(mix: &exfeed::reader::Mix, sweep: &exfeed::reader::SweepMix) -> String {
    let total: u64 = sweep.counts.iter().map(|c| c.samples).sum();
    let parts: Vec<String> = (mix.parts().iter().zip(&sweep.counts))
        .map(|(p, c)| {
            let share = 100.0 * c.samples as f64 / total.max(1) as f64;
            format!(
                "{}={} {} sequences, {} samples ({share:.1}%)",
                p.name, p.weight, c.sequences, c.samples
            )
        })
        .collect();
    let progress = if sweep.ended { "" } else { " (in progress)" };
    format!("mix: sweep {}{progress}: {}", sweep.sweep, parts.join("; "))
}

/// Where the CTF indexes came from, one word per file (`scanned,from cache`); for many files (a
/// corpus), the count of each (`from cache x1022, scanned x2`).
fn index_origins(origins: &[IndexOrigin]) -> String {
    let word = |o: &IndexOrigin| match o {
        IndexOrigin::Scanned => "scanned",
        IndexOrigin::ScannedAndCached => "scanned and cached",
        IndexOrigin::Cache => "from cache",
        IndexOrigin::ByteRanges => "none (byte ranges)",
    };
    if origins.len() <= 4 {
        return origins.iter().map(word).collect::<Vec<_>>().join(",");
    }
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for o in origins {
        match counts.iter_mut().find(|(w, _)| *w == word(o)) {
            Some((_, n)) => *n += 1,
            None => counts.push((word(o), 1)),
        }
    }
    let counts: Vec<String> = counts.iter().map(|(w, n)| format!("{w} x{n}")).collect();
    counts.join(", ")
}

/// The states of `--restore-state`: each file, and each directory's `*.json` files in name
/// order.
fn saved_states(paths: &[PathBuf]) -> Result<Vec<ReaderState>, Error> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let entries = std::fs::read_dir(path).map_err(|e| Error::io(path, e))?;
            let mut found = Vec::new();
            for entry in entries {
                let file = entry.map_err(|e| Error::io(path, e))?.path();
                if file.extension().is_some_and(|x| x == "json") {
                    found.push(file);
                }
            }
            if found.is_empty() {
                return Err(Error::config(format!(
                    "--restore-state {}: the directory has no *.json state files",
                    path.display()
                )));
            }
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    let read = |path: &PathBuf| {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        ReaderState::from_json(&text).map_err(|e| e.in_file(path.display().to_string()))
    };
    files.iter().map(read).collect()
}

/// The progress bar (on a terminal only) in samples delivered, from where a restored reader
/// starts, towards the epoch's end when it is known: exact with --max-samples, by the index's
/// sample count with --max-sweeps (this worker's share estimated as an equal part).
fn progress_bar(reader: &AnyReader, args: &Args) -> (Progress, u64) {
    let per_sweep = reader.sweep_size().samples / args.num_workers.max(1) as u64;
    let total = match reader.options().limit {
        EpochLimit::Samples(n) => Some(n),
        EpochLimit::Sweeps(k) if per_sweep > 0 => Some(per_sweep.saturating_mul(k)),
        _ => None,
    };
    let start = reader.samples_delivered();
    let mut bar = Progress::for_stderr(total, Unit::Samples);
    bar.set(start);
    (bar, start)
}

/// Peak resident set size in KiB (VmHWM of /proc/self/status), on Linux.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
