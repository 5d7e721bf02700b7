//! Arbitrary bytes into the CTF parser under a few fixed configurations: it must never panic,
//! and feeding the bytes in two pieces must give the same result as feeding them whole.
#![no_main]

use exfeed::ctf::{parse, CtfOptions, CtfParser, CtfStream};
use exfeed::{Diagnostic, SequenceBatch, StreamSpec};
use libfuzzer_sys::fuzz_target;

fn config(which: u8) -> CtfOptions {
    let inputs: Vec<StreamSpec> = match which % 3 {
        0 => vec!["a:dense:3".parse().unwrap(), "s:sparse:10:b".parse().unwrap()],
        1 => vec!["features:dense:2:F".parse().unwrap()],
        _ => vec!["x:sparse:5".parse().unwrap(), "y:dense:1:a".parse().unwrap()],
    };
    CtfOptions {
        inputs,
        skip_sequence_ids: which & 4 != 0,
        max_errors: (which as u64 >> 3) % 4,
        ..CtfOptions::default()
    }
}

fn streamed(data: &[u8], opts: &CtfOptions, cut: usize) -> (SequenceBatch<f32>, Vec<Diagnostic>, Option<String>) {
    let mut batch = SequenceBatch::new(&opts.inputs);
    let mut diags = Vec::new();
    let mut s = CtfStream::new(CtfParser::new(opts.clone()).unwrap());
    let r = s
        .feed(&data[..cut], &mut batch, &mut diags)
        .and_then(|_| s.feed(&data[cut..], &mut batch, &mut diags))
        .and_then(|_| s.finish(&mut batch, &mut diags));
    (batch, diags, r.err().map(|e| e.to_string()))
}

fuzz_target!(|input: &[u8]| {
    let Some((&which, data)) = input.split_first() else { return };
    let opts = config(which);
    let mut b64 = SequenceBatch::<f64>::new(&opts.inputs);
    let _ = parse(data, &opts, &mut b64, &mut Vec::new());
    let whole = streamed(data, &opts, data.len());
    let cut = if data.is_empty() { 0 } else { which as usize * 7 % (data.len() + 1) };
    let split = streamed(data, &opts, cut);
    assert_eq!(whole, split, "split at {cut}");
});
