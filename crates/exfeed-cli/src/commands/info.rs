//! `exfeed info`: what a file holds. CBF: the header (streams, chunks, sizes) without decoding
//! the chunks. Lens: examples, events, groups and value ranges. CTF: the summary `check`
//! prints (it has no header: the file is read). Text by default, one JSON object with `--json`.

use super::source::{parse_format, LayoutArgs, SourceArgs};
use crate::diag::Stderr;
use exfeed::cbf::CbfFile;
use exfeed::dataset::Summary;
use exfeed::format::FileFormat;
use exfeed::io::InputBytes;
use exfeed::lens::info::Info;
use serde_json::json;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `exfeed info`.
#[derive(clap::Args)]
pub struct Args {
    /// The file to describe (`-` for standard input); by default the --config's `file =` (or
    /// `corpus =`). A --corpus is described file by file (each one read), then as a whole.
    pub file: Option<PathBuf>,
    /// List every chunk of a CBF file, however many there are.
    #[arg(long)]
    pub all_chunks: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Format of the input (ctf, cbf, ex, bex, parquet, arrow); by default from its magic bytes and name.
    #[arg(long, value_parser = parse_format)]
    pub from: Option<FileFormat>,
    /// CTF files: how to read them (--input or --config).
    #[command(flatten)]
    pub source: SourceArgs,
    /// Lens files: with the network's layout, the summary of the materialized sequences.
    #[command(flatten)]
    pub lens: LayoutArgs,
}

/// Chunks listed one per line up to this many; beyond, a summary.
const LIST_CHUNKS: usize = 20;

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let data = args.source.one(args.file.as_deref(), "info")?;
    let opened = args.source.open(&data, args.from, &args.lens)?;
    let data = opened.data;
    let text = if data.is_corpus() {
        let mut sink = Stderr::new(opened.trace_level);
        crate::with_precision!(opened.precision, T => describe_corpus::<T>(data, args.json, &mut sink))?
    } else if let Some(file) = data.cbf() {
        if args.json {
            cbf_json(data.name(), file).to_string()
        } else {
            describe(file, args.all_chunks)
        }
    } else {
        let mut sink = Stderr::new(opened.trace_level);
        let summary =
            crate::with_precision!(opened.precision, T => data.summary::<T>(&mut sink)).result?;
        match (&summary.lens, args.json) {
            (Some(info), true) => lens_json(&summary.name, info).to_string(),
            (Some(info), false) => describe_lens(info),
            (None, true) => summary_json(&summary).to_string(),
            (None, false) => {
                let mut out = Vec::new();
                writeln_summary(&mut out, &summary)?;
                String::from_utf8(out)?
            }
        }
    };
    let mut out = crate::diag::Stdout::lock();
    crate::diag::stdout_closed_is_fine((|| {
        out.write_all(text.as_bytes())?;
        if args.json {
            out.write_all(b"\n")?;
        }
        out.flush()?;
        anyhow::Ok(())
    })())
}

/// A corpus: each file (its format, size and sequences; each one read), then the whole
/// corpus's summary. With `json`, one object: `{"corpus", "files": [{"file", "format",
/// "bytes", "sequences"}], ...}` and the summary's keys.
fn describe_corpus<T: exfeed::Element>(
    data: exfeed::DataSet,
    json: bool,
    sink: &mut Stderr,
) -> anyhow::Result<String> {
    let name = data.name().to_string();
    let mut files = Vec::new();
    let (total, read) = data.summarize_shards(|file, shard| {
        let bytes = std::fs::metadata(file).map_or(0, |m| m.len());
        match shard.and_then(|shard| shard.summary::<T>(sink).result) {
            Ok(summary) => {
                files.push((summary.clone(), bytes));
                (Some(summary), Ok(()))
            }
            Err(e) => (None, Err(e)),
        }
    });
    read?;
    if json {
        let mut object = summary_json(&total);
        object["corpus"] = json!(name);
        object["files"] = files
            .iter()
            .map(|(s, bytes)| {
                json!({"file": s.name, "format": s.format.short_name(), "bytes": bytes,
                       "sequences": s.sequences})
            })
            .collect();
        return Ok(object.to_string());
    }
    let mut out = Vec::new();
    use std::io::Write;
    writeln!(out, "corpus: {name}")?;
    let bytes: u64 = files.iter().map(|f| f.1).sum();
    writeln!(out, "files: {} ({bytes} bytes)", files.len())?;
    for (s, bytes) in &files {
        writeln!(
            out,
            "  {}: {}, {bytes} bytes, {} sequences",
            s.name,
            s.format.describe(),
            s.sequences
        )?;
    }
    super::check::write_summary(&mut out, &total)?;
    Ok(String::from_utf8(out)?)
}

fn writeln_summary(out: &mut Vec<u8>, s: &Summary) -> std::io::Result<()> {
    use std::io::Write;
    writeln!(out, "format: {}", s.format.describe())?;
    super::check::write_summary(out, s)
}

fn stats(values: impl Iterator<Item = u64> + Clone) -> String {
    let min = values.clone().min().unwrap_or(0);
    let max = values.clone().max().unwrap_or(0);
    let n = values.clone().count().max(1) as f64;
    let mean = values.map(|v| v as f64).sum::<f64>() / n;
    format!("min {min}, mean {mean:.1}, max {max}")
}

/// The text `exfeed info` prints for a CBF file.
fn describe(file: &CbfFile<InputBytes>, all_chunks: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "format: CBF version 1");
    let _ = writeln!(out, "file size: {} bytes", file.file_len());
    let _ = writeln!(out, "streams: {}", file.file_streams().len());
    for s in file.file_streams() {
        let _ = writeln!(
            out,
            "  {}: {} {} dim {}",
            s.spec.name, s.spec.storage, s.element, s.spec.dim
        );
    }
    let _ = writeln!(
        out,
        "chunks: {} ({} sequences, {} samples)",
        file.num_chunks(),
        file.num_sequences(),
        file.num_samples()
    );
    let chunks = file.chunks();
    if all_chunks || chunks.len() <= LIST_CHUNKS {
        for (i, c) in chunks.iter().enumerate() {
            let _ = writeln!(
                out,
                "  chunk {i}: offset {}, {} bytes, {} sequences, {} samples",
                c.offset, c.len, c.sequences, c.samples
            );
        }
    } else {
        let _ = writeln!(
            out,
            "  sequences per chunk: {}",
            stats(chunks.iter().map(|c| u64::from(c.sequences)))
        );
        let _ = writeln!(
            out,
            "  samples per chunk:   {}",
            stats(chunks.iter().map(|c| u64::from(c.samples)))
        );
        let _ = writeln!(
            out,
            "  bytes per chunk:     {}",
            stats(chunks.iter().map(|c| c.len))
        );
        let _ = writeln!(out, "  (--all-chunks lists each)");
    }
    let _ = writeln!(out, "header: at byte {}", file.header_offset());
    out
}

fn cbf_json(name: &str, file: &CbfFile<InputBytes>) -> serde_json::Value {
    json!({
        "file": name,
        "format": "cbf",
        "fileSize": file.file_len(),
        "streams": file.file_streams().iter().map(|s| json!({
            "name": s.spec.name,
            "storage": s.spec.storage.to_string(),
            "element": s.element.as_str(),
            "dim": s.spec.dim,
        })).collect::<Vec<_>>(),
        "sequences": file.num_sequences(),
        "samples": file.num_samples(),
        "chunks": file.chunks().iter().map(|c| json!({
            "offset": c.offset,
            "bytes": c.len,
            "sequences": c.sequences,
            "samples": c.samples,
        })).collect::<Vec<_>>(),
        "headerOffset": file.header_offset(),
    })
}

fn range(r: Option<(f32, f32)>) -> Option<[f64; 2]> {
    r.map(|(a, b)| [a as f64, b as f64])
}

fn lens_json(name: &str, i: &Info) -> serde_json::Value {
    json!({
        "file": name,
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
    })
}

fn describe_lens(i: &Info) -> String {
    let list = |s: &std::collections::BTreeSet<String>| {
        if s.is_empty() {
            "none".to_string()
        } else {
            s.iter().cloned().collect::<Vec<_>>().join(", ")
        }
    };
    let values =
        |r: Option<(f32, f32)>| r.map_or("none".to_string(), |(a, b)| format!("{a} to {b}"));
    let mut out = String::new();
    let _ = writeln!(out, "format: Lens example file");
    let _ = writeln!(out, "examples: {}", i.examples);
    let _ = writeln!(
        out,
        "events: {} (at most {} in an example)",
        i.events, i.max_events
    );
    let _ = writeln!(out, "input groups: {}", list(&i.input_groups));
    let _ = writeln!(out, "target groups: {}", list(&i.target_groups));
    if i.ungrouped_inputs {
        let _ = writeln!(
            out,
            "ungrouped inputs: up to unit {}",
            i.ungrouped_input_units
        );
    }
    if i.ungrouped_targets {
        let _ = writeln!(
            out,
            "ungrouped targets: up to unit {}",
            i.ungrouped_target_units
        );
    }
    let _ = writeln!(out, "input values: {}", values(i.input_values));
    let _ = writeln!(out, "target values: {}", values(i.target_values));
    let _ = writeln!(out, "NaN: {}", if i.has_nan { "yes" } else { "no" });
    out
}

fn summary_json(s: &Summary) -> serde_json::Value {
    json!({
        "file": s.name,
        "format": s.format.short_name(),
        "sequences": s.sequences,
        "longestSequence": s.longest.map(|(len, key)| {
            let key = match s.corpus {
                true => json!(super::check::key_text(s, key)),
                false => json!(key),
            };
            json!({"samples": len, "key": key})
        }),
        "streams": s.streams.iter().map(|st| json!({
            "name": st.spec.name,
            "storage": st.spec.storage.to_string(),
            "dim": st.spec.dim,
            "samples": st.samples,
            "nonZeros": st.non_zeros,
        })).collect::<Vec<_>>(),
    })
}
