//! `exfeed info`: what a file's header says.

use exfeed::cbf::CbfFile;
use exfeed::format::FileFormat;
use exfeed::io::{open_bytes, InputPath};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `exfeed info`.
#[derive(clap::Args)]
pub struct Args {
    /// The file to describe (CBF, or a Lens example file).
    pub file: PathBuf,
    /// List every chunk, however many there are.
    #[arg(long)]
    pub all_chunks: bool,
    /// Format of the input (ctf, cbf, ex, bex); by default from its magic bytes and name.
    #[arg(long, value_parser = super::convert::parse_format)]
    pub from: Option<FileFormat>,
}

/// Chunks listed one per line up to this many; beyond, a summary.
const LIST_CHUNKS: usize = 20;

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if super::lens::is_lens(&args.file, args.from) {
        return super::lens::info(&args.file);
    }
    let input = InputPath::new(&args.file);
    let name = input.display_name();
    let bytes = open_bytes(&input).map_err(|e| e.in_file(name.clone()))?;
    let format = FileFormat::detect(&args.file, &bytes[..bytes.len().min(16)]);
    if format != FileFormat::Cbf {
        let hint = match format {
            FileFormat::Ctf => "CTF (`exfeed check` prints its summary)",
            _ => "a Lens file (give --from ex or --from bex)",
        };
        anyhow::bail!("{name}: info describes CBF and Lens files; this looks like {hint}");
    }
    let file = CbfFile::open(&*bytes).map_err(|e| e.in_file(name.clone()))?;
    let text = describe(&file, args.all_chunks);
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}

fn stats(values: impl Iterator<Item = u64> + Clone) -> String {
    let min = values.clone().min().unwrap_or(0);
    let max = values.clone().max().unwrap_or(0);
    let n = values.clone().count().max(1) as f64;
    let mean = values.map(|v| v as f64).sum::<f64>() / n;
    format!("min {min}, mean {mean:.1}, max {max}")
}

/// The text `exfeed info` prints for a CBF file.
pub fn describe(file: &CbfFile<&[u8]>, all_chunks: bool) -> String {
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
