//! The JSON-lines form of sequences that `exfeed dump` prints:
//! `{"key": K, "streams": {"NAME": [SAMPLE, ...], ...}}`, a dense sample as an array of `dim`
//! numbers and a sparse one as `{"indices": [...], "values": [...]}`, numbers in the shortest
//! form that reads back to the same value.

use crate::batch::SequenceBatch;
use crate::element::Element;
use crate::stream::Storage;

/// Appends a JSON string literal.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    // serde_json's escaping, without building a Value.
    serde_json::to_writer(&mut *out, s).expect("writing to a Vec cannot fail");
}

/// Appends a number (non-finite values, which JSON has no form for, as `null`).
pub fn write_number<T: Element>(out: &mut Vec<u8>, v: T) {
    if v.to_f64().is_finite() {
        v.write_shortest(out);
    } else {
        out.extend_from_slice(b"null");
    }
}

/// Appends `[item, item, ...]`, each item written by `each`.
pub fn write_array<I: IntoIterator>(
    out: &mut Vec<u8>,
    items: I,
    mut each: impl FnMut(&mut Vec<u8>, I::Item),
) {
    out.push(b'[');
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        each(out, item);
    }
    out.push(b']');
}

/// Appends `[v, v, ...]`.
pub fn write_numbers<T: Element>(out: &mut Vec<u8>, values: &[T]) {
    write_array(out, values, |out, &v| write_number(out, v));
}

/// Appends an integer.
pub fn write_integer(out: &mut Vec<u8>, v: impl std::fmt::Display) {
    use std::io::Write;
    write!(out, "{v}").expect("writing to a Vec cannot fail");
}

/// Appends a sequence key: an integer, or for a corpus key (see
/// [`split_corpus_key`](crate::batch::split_corpus_key)) the string `"SHARD:KEY"`.
pub fn write_key(out: &mut Vec<u8>, key: u64, corpus: bool) {
    if corpus {
        let (shard, key) = crate::batch::split_corpus_key(key);
        write_str(out, &format!("{shard}:{key}"));
    } else {
        write_integer(out, key);
    }
}

/// Appends one line (with `\n`) for sequence `seq` of `batch`, its streams named by `names`
/// (in the batch's stream order).
pub fn write_sequence<T: Element, S: AsRef<str>>(
    out: &mut Vec<u8>,
    batch: &SequenceBatch<T>,
    seq: usize,
    names: &[S],
) {
    write_keyed_sequence(out, batch, seq, names, false)
}

/// [`write_sequence`] of a batch whose keys are corpus keys when `corpus` (a
/// [`Sequences::is_corpus`](crate::Sequences::is_corpus)): the key is written `"SHARD:KEY"`.
pub fn write_keyed_sequence<T: Element, S: AsRef<str>>(
    out: &mut Vec<u8>,
    batch: &SequenceBatch<T>,
    seq: usize,
    names: &[S],
    corpus: bool,
) {
    out.extend_from_slice(b"{\"key\":");
    write_key(out, batch.keys()[seq], corpus);
    out.extend_from_slice(b",\"streams\":{");
    for (i, (stream, name)) in batch.streams().iter().zip(names).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, name.as_ref());
        out.extend_from_slice(b":[");
        for (j, sample) in stream.sequence_samples(seq).enumerate() {
            if j > 0 {
                out.push(b',');
            }
            match stream.storage() {
                Storage::Dense => write_numbers(out, stream.dense_sample(sample)),
                Storage::Sparse => {
                    let (indices, values) = stream.sparse_sample(sample);
                    out.extend_from_slice(b"{\"indices\":");
                    write_array(out, indices, |out, &ix| write_integer(out, ix));
                    out.extend_from_slice(b",\"values\":");
                    write_numbers(out, values);
                    out.push(b'}');
                }
            }
        }
        out.push(b']');
    }
    out.extend_from_slice(b"}}\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::StreamSpec;

    #[test]
    fn sequence_line() {
        let specs = [
            StreamSpec::new("a", Storage::Dense, 2),
            StreamSpec::new("b\"", Storage::Sparse, 9),
        ];
        let mut b = SequenceBatch::<f32>::new(&specs);
        b.stream_mut(0).push_dense_sample(&[1.0, 0.1]);
        b.stream_mut(1).push_sparse_sample(&[3], &[2.5]);
        b.stream_mut(1).push_sparse_sample(&[], &[]);
        b.finish_sequence(7);
        b.finish_sequence(8);
        let mut out = Vec::new();
        write_sequence(&mut out, &b, 0, &["a", "b\""]);
        write_sequence(&mut out, &b, 1, &["a", "b\""]);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"key\":7,\"streams\":{\"a\":[[1,0.1]],\"b\\\"\":[{\"indices\":[3],\"values\":[2.5]},{\"indices\":[],\"values\":[]}]}}\n\
             {\"key\":8,\"streams\":{\"a\":[],\"b\\\"\":[]}}\n"
        );
    }
}
