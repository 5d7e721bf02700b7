//! `exfeed config`: what exfeed understood of a configuration file, section by section, without
//! opening any data file.

use exfeed::config::{ConfigFile, DeserializerConfig, ReaderConfig, SectionReader};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `exfeed config`.
#[derive(clap::Args)]
pub struct Args {
    /// The configuration file (CNTK's syntax, or TOML for `.toml`).
    pub file: PathBuf,
    /// Show only this section's reader.
    #[arg(long)]
    pub section: Option<String>,
    /// Set a parameter before the file is resolved, as on CNTK's command line
    /// (`DataDir=/data`, `Train.reader.randomize=false`, `Train=[ SGD=[ maxEpochs=1 ] ]`).
    /// Repeatable.
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = parse_set)]
    pub overrides: Vec<(String, String)>,
    /// Print JSON instead of an indented listing.
    #[arg(long)]
    pub json: bool,
}

/// `NAME=VALUE` of `--set`.
pub fn parse_set(text: &str) -> Result<(String, String), String> {
    exfeed::config::ConfigOptions::parse_override(text).map_err(|e| e.message().to_string())
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cfg = ConfigFile::open(&args.file, &args.overrides)?;
    let commands = cfg.commands()?;
    let readers: Vec<(Option<String>, exfeed::Result<SectionReader>)> = match &args.section {
        Some(s) => vec![(Some(s.clone()), cfg.reader(Some(s)))],
        None => cfg.all_readers(),
    };
    // The section read/check/dump use without --section.
    let chosen = match &args.section {
        Some(s) => Ok((Some(s.clone()), None)),
        None => cfg.choose(None),
    };
    let failed = readers.iter().any(|(_, r)| r.is_err());
    if args.json {
        let sections: Vec<Value> = readers.iter().map(|(s, r)| section_json(s, r)).collect();
        let (default, because) = match &chosen {
            Ok((s, why)) => (json!(s), json!(why)),
            Err(e) => (Value::Null, json!(e.to_string())),
        };
        let out = json!({
            "file": cfg.file(),
            "command": commands,
            "section_used": default,
            "because": because,
            "sections": sections,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        let mut out = String::new();
        let _ = writeln!(out, "config: {}", cfg.file());
        if !commands.is_empty() {
            let _ = writeln!(out, "command: {}", commands.join(":"));
        }
        match &chosen {
            Ok((s, why)) => {
                let why = why.as_ref().map_or(String::new(), |w| format!(" ({w})"));
                let _ = writeln!(out, "read/check/dump use: {}{why}", section_label(s));
            }
            Err(e) => {
                let _ = writeln!(out, "read/check/dump use: none without --section ({e})");
            }
        }
        for (s, r) in &readers {
            section_text(&mut out, s, r);
        }
        print!("{out}");
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn section_label(s: &Option<String>) -> String {
    match s {
        Some(s) => format!("section '{s}'"),
        None => "the top-level reader".into(),
    }
}

/// The reader-level options with their values, in the order of `docs/config.md`.
fn reader_options(c: &ReaderConfig) -> Vec<(&'static str, String)> {
    let window = match c.randomization_window {
        _ if c.randomization_window_bytes.is_some() => "unset (randomizationWindowInBytes)".into(),
        Some(w) => w.to_string(),
        None => match c.default_randomization_window() {
            Some(w) => format!("{w} (default: 4 GiB of chunks)"),
            None => "the whole data set (default)".into(),
        },
    };
    vec![
        ("precision", c.precision.to_string()),
        ("randomize", c.randomize.to_string()),
        ("randomizationSeed", c.randomization_seed.to_string()),
        ("randomizationWindow", window),
        (
            "sampleBasedRandomizationWindow",
            c.sample_based_randomization_window.to_string(),
        ),
        (
            "randomizationWindowInBytes",
            c.randomization_window_bytes
                .map_or("unset".into(), |b| b.to_string()),
        ),
        ("skipSequenceIds", c.skip_sequence_ids.to_string()),
        ("maxErrors", c.max_errors.to_string()),
        ("traceLevel", c.trace_level.to_string()),
        ("chunkSizeInBytes", c.read.chunk_bytes().to_string()),
        ("keepDataInMemory", c.read.keep_in_memory().to_string()),
        ("frameMode", c.read.frame_mode().to_string()),
        ("cacheIndex", c.read.cache_index().to_string()),
        ("index", c.read.index().to_string()),
        ("equalize", c.equalize.to_string()),
        ("randomizer", c.randomizer.to_string()),
        (
            "lensMode",
            c.lens_mode
                .map_or("unset".into(), |m| format!("{m:?}").to_uppercase()),
        ),
    ]
}

/// Where a reader-level option came from: the parameter that set it, else "default".
fn origin(r: &SectionReader, name: &str) -> String {
    let alias = if name == "traceLevel" {
        "verbosity"
    } else {
        name
    };
    r.params
        .iter()
        .rev()
        .find(|p| p.name == name || p.name == alias)
        .map_or("default".into(), |p| p.from.clone())
}

fn deserializer_json(d: &DeserializerConfig) -> Value {
    let inputs: Vec<Value> = d
        .inputs
        .iter()
        .map(|i| {
            json!({
                "name": i.name,
                "alias": i.alias,
                "dim": (i.dim > 0).then_some(i.dim),
                "format": (i.dim > 0).then(|| i.storage.to_string()),
                "definesMBSize": i.defines_mb_size,
            })
        })
        .collect();
    json!({
        "type": exfeed::config::deserializer_type(d.format),
        "file": d.file.display().to_string(),
        "inputs": inputs,
    })
}

fn section_json(s: &Option<String>, r: &exfeed::Result<SectionReader>) -> Value {
    let r = match r {
        Ok(r) => r,
        Err(e) => return json!({ "section": s, "error": e.to_string() }),
    };
    let options: serde_json::Map<String, Value> = reader_options(&r.config)
        .into_iter()
        .map(|(n, v)| (n.to_string(), json!({ "value": v, "from": origin(r, n) })))
        .collect();
    let params: Vec<Value> = r
        .params
        .iter()
        .map(|p| json!({ "name": p.name, "value": p.value, "from": p.from }))
        .collect();
    json!({
        "section": s,
        "reader": options,
        "deserializers": r.config.deserializers.iter().map(deserializer_json).collect::<Vec<_>>(),
        "parameters": params,
        "warnings": r.warnings,
    })
}

fn section_text(out: &mut String, s: &Option<String>, r: &exfeed::Result<SectionReader>) {
    let _ = writeln!(out, "\n{}:", section_label(s));
    let r = match r {
        Ok(r) => r,
        Err(e) => {
            let _ = writeln!(out, "  error: {e}");
            return;
        }
    };
    let _ = writeln!(out, "  reader:");
    for (n, v) in reader_options(&r.config) {
        let _ = writeln!(out, "    {n} = {v}  [{}]", origin(r, n));
    }
    for (i, d) in r.config.deserializers.iter().enumerate() {
        let _ = writeln!(
            out,
            "  deserializer {}: {}",
            i + 1,
            exfeed::config::deserializer_type(d.format)
        );
        let _ = writeln!(out, "    file = {}", d.file.display());
        if d.inputs.is_empty() {
            let _ = writeln!(out, "    inputs: every stream of the file");
        }
        for input in &d.inputs {
            let mut line = format!("    input {}", input.name);
            if let Some(a) = &input.alias {
                let _ = write!(line, ": alias {a}");
            } else {
                line.push(':');
            }
            if input.dim > 0 {
                let _ = write!(line, " dim {} {}", input.dim, input.storage);
            } else {
                line.push_str(" (dim and format from the file)");
            }
            if input.defines_mb_size {
                line.push_str(" definesMBSize");
            }
            let _ = writeln!(out, "{line}");
        }
    }
    let _ = writeln!(out, "  parameters read:");
    for p in &r.params {
        let _ = writeln!(out, "    {} = {}  [{}]", p.name, p.value, p.from);
    }
    for w in &r.warnings {
        let _ = writeln!(out, "  warning: {w}");
    }
}
