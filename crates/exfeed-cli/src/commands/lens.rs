//! Lens example files in the CLI. `dump` is what `exfeed dump FILE.ex|FILE.bex` runs (the
//! dump command dispatches here by format).

use exfeed::format::FileFormat;
use exfeed::io::InputPath;
use exfeed::lens::materialize::{Layout, Materializer};
use exfeed::lens::pipe::PipeReader;
use std::io::Read;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// Whether `file` is a Lens example file: `--from ex|bex` says so, else its first bytes (the
/// binary cookie) or its name (`.ex`/`.bex`, through `.gz`/`.bz2`; a missing name is looked up
/// with `.gz`/`.bz2` as Lens does). Standard input is Lens only with `--from`.
pub fn is_lens(file: &Path, from: Option<FileFormat>) -> bool {
    if let Some(f) = from {
        return matches!(f, FileFormat::LensText | FileFormat::LensBinary);
    }
    if file == Path::new("-") {
        return false;
    }
    let file = exfeed::lens::resolve(file);
    let mut head = [0u8; 8];
    let n = std::fs::File::open(&file)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    matches!(
        FileFormat::detect(&file, &head[..n]),
        FileFormat::LensText | FileFormat::LensBinary
    )
}

/// The network layout a Lens example file is materialized for (`exfeed convert` to CTF/CBF,
/// `exfeed read`): one sequence per example, one sample per event, an `input` and a `target`
/// stream.
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

/// What `exfeed dump` of a Lens file prints and how it reads.
pub struct DumpOptions<'a> {
    /// The network's input groups, `NAME:SIZE,...` (materialized dump).
    pub input_groups: Option<&'a str>,
    /// The network's target groups, `NAME:SIZE,...` (materialized dump).
    pub target_groups: Option<&'a str>,
    /// Pipe mode for a file or FIFO (standard input always is).
    pub pipe: bool,
    /// Pipe mode: reopen a file at its end.
    pub looping: bool,
    /// Stop after this many examples.
    pub max_examples: Option<u64>,
}

/// Prints the set header, then one structural JSON object per example; or, given the
/// network's groups (`NAME:SIZE,...` in network order), one materialized object per example:
/// `{"name", "freq", "proc", "events": [{"input": [...], "target": [...]}]}`.
///
/// Standard input and `--pipe` files are read one example at a time (memory bounded by one
/// example), each printed and flushed as soon as it is parsed; the header's example and
/// event counts are then `null` as they are not known yet.
pub fn dump(file: &Path, opts: &DumpOptions<'_>) -> anyhow::Result<ExitCode> {
    let input = InputPath::new(file);
    let streaming = opts.pipe || matches!(input, InputPath::Stdin);
    let mut materializer = match (opts.input_groups, opts.target_groups) {
        (None, None) => None,
        (i, t) => Some(Materializer::new(
            Layout::parse(i.unwrap_or(""))?,
            Layout::parse(t.unwrap_or(""))?,
        )),
    };
    let name = input.display_name();
    // Either the whole set, loaded at once, or a reader of one example at a time.
    let mut line = Vec::new();
    let (mut loaded, mut pipe) = if streaming {
        let r = PipeReader::open(input, opts.looping)?;
        exfeed::dump::write_set_header(&mut line, r.header(), None);
        (None, Some(r))
    } else {
        let set = exfeed::lens::load(&input)?;
        exfeed::dump::write_header(&mut line, &set);
        (Some(set.examples.into_iter()), None)
    };
    let stdout = std::io::stdout();
    let mut w = std::io::BufWriter::new(stdout.lock());
    let mut sink = crate::diag::Stderr::new(1);
    let max = opts.max_examples.unwrap_or(u64::MAX);
    let result = (|| {
        if materializer.is_none() {
            w.write_all(&line)?;
            w.flush()?;
        }
        let mut i = 0u64;
        while i < max {
            let ex = match (&mut loaded, &mut pipe) {
                (Some(all), _) => all.next(),
                (None, Some(r)) => r.next_example()?,
                (None, None) => None,
            };
            let Some(ex) = ex else { break };
            line.clear();
            match &mut materializer {
                None => exfeed::dump::write_example(&mut line, i as usize, &ex),
                Some(m) => exfeed::dump::write_materialized(&mut line, &ex, m, &mut sink)
                    .map_err(|e| e.in_context(format!("example {i}")).in_file(name.clone()))?,
            }
            w.write_all(&line)?;
            if streaming {
                // A reader at the other end sees each example as soon as it is parsed.
                w.flush()?;
            }
            i += 1;
        }
        w.flush()?;
        anyhow::Ok(())
    })();
    match result {
        Err(e) => match e.downcast_ref::<std::io::Error>() {
            // Standard output closed (a pipe into `head`): a quiet end.
            Some(io) if io.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
            _ => Err(e),
        },
        Ok(()) => Ok(ExitCode::SUCCESS),
    }
}

/// `exfeed check FILE.ex|.bex`: loads the whole file; prints a one-line summary, or the error
/// (positioned) and exits 1.
pub fn check(file: &Path) -> anyhow::Result<ExitCode> {
    match exfeed::lens::load(&InputPath::new(file)) {
        Ok(set) => {
            println!(
                "{}: ok: {} examples, {} events",
                file.display(),
                set.examples.len(),
                set.num_events()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) if e.kind() == exfeed::ErrorKind::Io => Err(e.into()),
        Err(e) => {
            eprintln!("exfeed: error: {e}");
            Ok(ExitCode::from(1))
        }
    }
}

/// `exfeed info FILE.ex|.bex`: examples, events, groups used and value ranges, as JSON.
pub fn info(file: &Path) -> anyhow::Result<ExitCode> {
    let set = exfeed::lens::load(&InputPath::new(file))?;
    let i = exfeed::lens::info::Info::of(&set);
    let range = |r: Option<(f32, f32)>| r.map(|(a, b)| [a as f64, b as f64]);
    let v = serde_json::json!({
        "file": file.display().to_string(),
        "format": "lens",
        "examples": i.examples,
        "events": i.events,
        "maxEventsPerExample": i.max_events,
        "inputGroups": i.input_groups,
        "targetGroups": i.target_groups,
        "ungroupedInputs": i.ungrouped_inputs,
        "ungroupedTargets": i.ungrouped_targets,
        "ungroupedInputUnits": i.ungrouped_input_units,
        "ungroupedTargetUnits": i.ungrouped_target_units,
        "inputValues": range(i.input_values),
        "targetValues": range(i.target_values),
        "hasNaN": i.has_nan,
    });
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(ExitCode::SUCCESS)
}

/// `exfeed convert IN OUT` between `.ex`, `.bex` and their compressed forms (form by OUT's
/// name: `.bex[.gz|.bz2]` is binary).
pub fn convert(args: &super::convert::Args) -> anyhow::Result<ExitCode> {
    let (input, output) = (&args.input, &args.output);
    let to = args.to.unwrap_or_else(|| {
        if exfeed::lens::is_binary_name(output) {
            FileFormat::LensBinary
        } else {
            FileFormat::from_name(output)
        }
    });
    let set = exfeed::lens::load(&InputPath::new(input))?;
    let inputs = match InputPath::new(input) {
        InputPath::File(p) => vec![p],
        InputPath::Stdin => Vec::new(),
    };
    let options = exfeed::io::OutputOptions {
        force: args.force,
        inputs,
    };
    if matches!(to, FileFormat::LensText | FileFormat::LensBinary) {
        exfeed::lens::save(&set, output, to == FileFormat::LensBinary, &options)?;
        return Ok(ExitCode::SUCCESS);
    }
    let Some((i, t)) = args.lens.layouts()? else {
        anyhow::bail!(
            "converting a Lens example file to {to:?} needs the network's layout: \
             --input-groups NAME:SIZE,... --target-groups NAME:SIZE,..."
        );
    };
    let mut m = Materializer::new(i, t);
    let specs = m.stream_specs("input", "target");
    let mut sink = crate::diag::Stderr::new(1);
    let name = InputPath::new(input).display_name();
    let mut batch = exfeed::SequenceBatch::<f32>::new(&specs);
    let out = exfeed::io::AtomicOutput::create(output, &options)?;
    match to {
        FileFormat::Cbf => {
            let cbf = exfeed::cbf::CbfWriterOptions {
                chunk_size: args.chunk_size,
                precision: args.source.precision.unwrap_or(exfeed::Precision::Float),
            };
            let mut w = exfeed::cbf::CbfWriter::new(out, &specs, cbf)?;
            for (k, ex) in set.examples.iter().enumerate() {
                batch.clear();
                m.push_example(ex, k as u64, args.lens.nan, &mut batch, &mut sink)
                    .map_err(|e| e.in_file(name.clone()))?;
                w.write_batch(&batch)?;
            }
            super::convert::commit(w.finish()?, args.no_sync)?;
        }
        _ => {
            let mut out = std::io::BufWriter::new(out);
            let mut text = Vec::new();
            for (k, ex) in set.examples.iter().enumerate() {
                batch.clear();
                m.push_example(ex, k as u64, args.lens.nan, &mut batch, &mut sink)
                    .map_err(|e| e.in_file(name.clone()))?;
                text.clear();
                exfeed::ctf::write_sequence(&mut text, &batch, 0, &specs)
                    .map_err(|e| e.in_file(name.clone()))?;
                std::io::Write::write_all(&mut out, &text)?;
            }
            super::convert::commit(out.into_inner().map_err(|e| e.into_error())?, args.no_sync)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
