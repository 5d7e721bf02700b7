//! `lens`: loading Lens example files, text against binary.

use super::timing::{median, thread_cpu_secs};
use super::{common, Args, Result};
use std::path::PathBuf;
use std::time::Instant;

/// Times loading a Lens file already in memory (decompressed): medians over `runs`. Prints a
/// line and returns CPU seconds per example.
fn measure(name: &str, data: &[u8], runs: usize) -> Result<f64> {
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    let mut examples = 0;
    for _ in 0..runs {
        let c = thread_cpu_secs();
        let t = Instant::now();
        let set = exfeed::lens::parse(data).map_err(|e| e.in_file(name.to_string()))?;
        wall.push(t.elapsed().as_secs_f64());
        cpu.push(thread_cpu_secs() - c);
        examples = set.examples.len();
    }
    let (w, c) = (median(wall).max(1e-9), median(cpu).max(1e-9));
    let mb = data.len() as f64 / 1e6;
    println!(
        "lens {name}: {mb:.1} MB, {examples} examples: {:.0} MB/s, {:.0} examples/s wall-clock; \
         {:.0} MB/s, {:.0} examples/s per CPU-second",
        mb / w,
        examples as f64 / w,
        mb / c,
        examples as f64 / c
    );
    Ok(c / examples.max(1) as f64)
}

pub fn run(args: &Args) -> Result {
    let dir = std::env::var_os("EXFEED_CONFORMANCE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/conformance"
            ))
        })
        .join("lens/examples");
    for file in [
        "spinnaker_pdp2/simple_past_tense_1868_items.ex",
        "lens_dist/hand-digits.trn.bex.gz",
    ] {
        let path = dir.join(file);
        let data = match exfeed::io::open_bytes(&exfeed::io::InputPath::new(&path)) {
            Ok(d) => d,
            Err(e) => {
                println!("lens {file}: skipped ({e})");
                continue;
            }
        };
        let per_given = measure(&format!("{file} (decompressed)"), &data, args.runs)?;
        // The same examples in the other form, for the text/binary comparison.
        let set = exfeed::lens::parse(&data)?;
        let ratio = if data.starts_with(&[0xaa; 4]) {
            let text = exfeed::lens::text::write(&set)?;
            measure(&format!("{file} as .ex"), &text, args.runs)? / per_given
        } else {
            let binary = exfeed::lens::binary::write(&set)?;
            per_given / measure(&format!("{file} as .bex"), &binary, args.runs)?
        };
        println!("lens {file}: binary is {ratio:.1}x faster than text per example");
    }
    let ex = common::generated_ex(args.mb.unwrap_or(100) << 20);
    let per_text = measure("generated.ex", &ex, args.runs)?;
    let bex = exfeed::lens::binary::write(&exfeed::lens::parse(&ex)?)?;
    let per_binary = measure("generated.bex", &bex, args.runs)?;
    println!(
        "lens generated: binary is {:.1}x faster than text per example",
        per_text / per_binary
    );
    Ok(())
}
