//! CNTK's sequences and chunks of a CTF file, as its indexer finds them
//! (`TextInputIndexBuilder` in CNTK's `ReaderLib/IndexBuilder.cpp`, `Index::AddSequence` in
//! `ReaderLib/Index.cpp`): the input [`CntkRandomizer`](super::CntkRandomizer) needs to give
//! CNTK's order for a CTF file.

use crate::error::{Error, Result};

/// One sequence as CNTK's CTF indexer records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CntkCtfSequence {
    /// Byte offset of its first line.
    pub offset: u64,
    /// Bytes up to the next sequence's first line (the end of the file for the last one).
    pub size: u64,
    /// Its lines (those holding the `definesMBSize` stream when there is one): CNTK's count of
    /// its samples.
    pub samples: u32,
}

/// C's `isspace` in the C locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

/// Whether `line` holds `|name` followed by a space, a `|`, a control character or a byte
/// above 0x7F (CNTK compares a signed `char` with `' '`), or the end of the file (CNTK's
/// `FindMainStream`).
fn holds_stream(line: &[u8], name: &[u8], at_file_end: bool) -> bool {
    let pattern_len = name.len() + 1;
    (0..line.len().saturating_sub(pattern_len - 1)).any(|i| {
        line[i] == b'|'
            && &line[i + 1..i + pattern_len] == name
            && line.get(i + pattern_len).map_or(at_file_end, |&c| {
                is_c_space(c) || c == b'|' || (c as i8) < 0x20
            })
    })
}

/// The numeric sequence id at `at` (CNTK's `TryGetNumericSequenceId`): `None` when `at` holds
/// no digit or the digits run to the end of the file; also the index after the digits.
fn sequence_id(text: &[u8], at: usize) -> Result<(Option<u64>, usize)> {
    let mut id = 0u64;
    let mut end = at;
    while let Some(&c) = text.get(end).filter(|c| c.is_ascii_digit()) {
        id = id
            .checked_mul(10)
            .and_then(|x| x.checked_add(u64::from(c - b'0')))
            .ok_or_else(|| {
                Error::config(format!("byte {at}: the sequence id overflows 64 bits"))
            })?;
        end += 1;
    }
    let found = end > at && end < text.len();
    Ok((found.then_some(id), end))
}

/// The end of the line starting at `at` (after its `\n`, or the end of the text).
fn line_end(text: &[u8], at: usize) -> usize {
    memchr::memchr(b'\n', &text[at..]).map_or(text.len(), |i| at + i + 1)
}

/// CNTK's CTF index of `text` (a whole file): its sequences in file order, with numeric
/// sequence ids (CNTK's default); `skip_sequence_ids` is `skipSequenceIds`; `main_stream` is
/// the name of the `definesMBSize` stream. A sequence starts wherever a line's id differs from
/// the previous one's (a line without an id continues the sequence); one without a line of the
/// main stream is left out. A file whose first character (after a UTF-8 BOM and white space)
/// is `|` has no ids: each line is a sequence of one sample. Every line counts as a sample
/// when there is no main stream, blank ones included.
pub fn cntk_ctf_sequences(
    text: &[u8],
    skip_sequence_ids: bool,
    main_stream: Option<&str>,
) -> Result<Vec<CntkCtfSequence>> {
    let len = text.len();
    let mut pos = 0;
    for &b in &[0xEF, 0xBB, 0xBF] {
        if text.get(pos) == Some(&b) {
            pos += 1;
        } else {
            break;
        }
    }
    while pos < len && is_c_space(text[pos]) {
        pos += 1;
    }
    if pos == len {
        return Err(Error::config("the input file is empty"));
    }
    let counts = |line: &[u8], end: usize| {
        main_stream.is_none_or(|name| holds_stream(line, name.as_bytes(), end == len))
    };
    let mut out = Vec::new();
    let span = |offset: usize, end: usize, samples: u32| CntkCtfSequence {
        offset: offset as u64,
        size: (end - offset) as u64,
        samples,
    };
    if skip_sequence_ids || text[pos] == b'|' {
        while pos < len {
            let end = line_end(text, pos);
            if counts(&text[pos..end], end) {
                out.push(span(pos, end, 1));
            }
            pos = end;
        }
        return Ok(out);
    }
    let (Some(mut previous), mut cursor) = sequence_id(text, pos)? else {
        return Err(Error::config(format!(
            "byte {pos}: expected a sequence id, found none"
        )));
    };
    let (mut start, mut samples) = (pos, 0u32);
    while cursor < len {
        let end = line_end(text, cursor);
        if counts(&text[cursor..end], end) {
            samples = samples
                .checked_add(1)
                .ok_or_else(|| Error::config(format!("byte {start}: a sequence of 2^32 lines")))?;
        }
        let (id, after) = sequence_id(text, end)?;
        if let Some(id) = id.filter(|&id| id != previous) {
            if samples > 0 {
                out.push(span(start, end, samples));
            }
            (previous, start, samples) = (id, end, 0);
        }
        cursor = after;
    }
    if samples > 0 {
        out.push(span(start, len, samples));
    }
    Ok(out)
}

/// CNTK's chunks of a CTF file as the randomizer's input: each chunk's sequences' sample
/// counts, from [`cntk_ctf_sequences`] grouped by [`cntk_ctf_chunks`].
pub fn cntk_ctf_chunk_samples(
    sequences: &[CntkCtfSequence],
    chunk_size: u64,
    file_size: u64,
) -> Vec<Vec<u32>> {
    let spans = sequences.iter().map(|s| (s.offset, s.size));
    let mut rest = sequences;
    cntk_ctf_chunks(spans, chunk_size, file_size)
        .into_iter()
        .map(|n| {
            let (chunk, after) = rest.split_at(n);
            rest = after;
            chunk.iter().map(|s| s.samples).collect()
        })
        .collect()
}

/// How CNTK's CTF indexer groups sequences into chunks: `spans` are the sequences' byte
/// offsets and sizes in file order (a sequence runs from the start of its first line to the
/// start of the next sequence, the last one to the end of the file); the result is the number
/// of sequences of each chunk, in order.
///
/// A chunk's size is the bytes from its first sequence's start to its last one's end. A new
/// chunk starts when the current one is empty or when its size plus the next sequence's size
/// would pass `chunk_size`, which is first lowered to `file_size` when larger (CNTK's
/// `Index::Reserve`). A sequence is never split: one larger than `chunk_size` is a chunk alone.
///
/// ```
/// use exfeed::reader::cntk_order::cntk_ctf_chunks;
/// // Sequences of 10, 10, 5 and 30 bytes, chunks of at most 25 bytes.
/// let spans = [(0, 10), (10, 10), (20, 5), (25, 30)];
/// assert_eq!(cntk_ctf_chunks(spans, 25, 55), [3, 1]);
/// ```
pub fn cntk_ctf_chunks(
    spans: impl IntoIterator<Item = (u64, u64)>,
    chunk_size: u64,
    file_size: u64,
) -> Vec<usize> {
    let max = chunk_size.min(file_size);
    let mut counts = Vec::new();
    let (mut start, mut end) = (0u64, 0u64);
    for (offset, size) in spans {
        let current = end - start;
        if current == 0 || current.saturating_add(size) > max {
            counts.push(0);
            start = offset;
        }
        *counts.last_mut().expect("a chunk was opened") += 1;
        end = offset + size;
    }
    counts
}

/// CNTK's chunks of the CTF file `text` as the randomizer's input, when they are the chunks
/// exfeed's index made (`own`: each of those chunks' sequence count); an error names the first
/// difference otherwise (exfeed reads chunks by its own index, so it cannot give CNTK's order
/// over other chunks).
pub(crate) fn ctf_chunk_samples(
    text: &[u8],
    skip_sequence_ids: bool,
    main_stream: Option<&str>,
    chunk_size: u64,
    own: impl ExactSizeIterator<Item = u64>,
) -> Result<Vec<Vec<u32>>> {
    let sequences = cntk_ctf_sequences(text, skip_sequence_ids, main_stream)?;
    let chunks = cntk_ctf_chunk_samples(&sequences, chunk_size, text.len() as u64);
    let (ours, theirs) = (own.len(), chunks.len());
    for (i, (mine, cntk)) in own.zip(&chunks).enumerate() {
        if mine != cntk.len() as u64 {
            return Err(Error::config(format!(
                "randomizer cntk: chunk {i} has {mine} sequences by exfeed's index, {} by \
                 CNTK's (a blank or comment line, or a line without the definesMBSize stream, \
                 counts differently): CNTK's order cannot be given for this file",
                cntk.len()
            )));
        }
    }
    if ours != theirs {
        return Err(Error::config(format!(
            "randomizer cntk: exfeed's index has {ours} chunks, CNTK's {theirs}: CNTK's order \
             cannot be given for this file"
        )));
    }
    Ok(chunks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contiguous(sizes: &[u64]) -> Vec<(u64, u64)> {
        let mut offset = 0;
        sizes
            .iter()
            .map(|&s| {
                offset += s;
                (offset - s, s)
            })
            .collect()
    }

    #[test]
    fn a_chunk_closes_when_the_next_sequence_would_pass_the_size() {
        let spans = contiguous(&[10, 10, 10, 10, 10]);
        assert_eq!(cntk_ctf_chunks(spans.clone(), 30, 50), [3, 2]);
        assert_eq!(cntk_ctf_chunks(spans.clone(), 29, 50), [2, 2, 1]);
        assert_eq!(cntk_ctf_chunks(spans, 31, 50), [3, 2]);
    }

    #[test]
    fn a_sequence_larger_than_the_chunk_size_is_a_chunk_alone() {
        let spans = contiguous(&[5, 100, 5, 5]);
        assert_eq!(cntk_ctf_chunks(spans, 20, 115), [1, 1, 2]);
    }

    #[test]
    fn the_chunk_size_is_lowered_to_the_file_size() {
        // With 32 MiB chunks a 50-byte file is one chunk; the lowering matters only when the
        // sequences' sizes add up to more than the file (never for a real index), so this
        // checks that it does not split anything.
        let spans = contiguous(&[10, 20, 20]);
        assert_eq!(cntk_ctf_chunks(spans, 32 << 20, 50), [3]);
        // Lowered to 40 bytes, the same spans make two chunks.
        assert_eq!(
            cntk_ctf_chunks(contiguous(&[10, 20, 20]), 32 << 20, 40),
            [2, 1]
        );
    }

    #[test]
    fn a_gap_before_a_sequence_counts_only_once_the_sequence_is_in_the_chunk() {
        // Sequence 1 starts 15 bytes after sequence 0 ends (a skipped sequence between them):
        // the test adds only sequence 1's own size to the chunk's 10 bytes, and the gap then
        // counts in the chunk's size for the sequence after it.
        let spans = [(0, 10), (25, 10), (35, 10)];
        assert_eq!(cntk_ctf_chunks(spans, 20, 45), [2, 1]);
        assert_eq!(cntk_ctf_chunks(spans, 45, 45), [3]);
    }

    fn index(text: &str, main: Option<&str>) -> Vec<(u64, u64, u32)> {
        cntk_ctf_sequences(text.as_bytes(), false, main)
            .unwrap()
            .iter()
            .map(|s| (s.offset, s.size, s.samples))
            .collect()
    }

    #[test]
    fn a_changed_id_starts_a_sequence_and_a_line_without_one_continues_it() {
        let text = "0 |x 1\n0 |x 2\n1 |x 3\n |x 4\n0 |x 5\n";
        assert_eq!(index(text, None), [(0, 14, 2), (14, 13, 2), (27, 7, 1)]);
    }

    #[test]
    fn blank_lines_count_as_samples_unless_a_main_stream_is_named() {
        let text = "0 |x 1 |y 2\n\n0 |y 3\n1 |x 4";
        assert_eq!(index(text, None), [(0, 20, 3), (20, 6, 1)]);
        assert_eq!(index(text, Some("x")), [(0, 20, 1), (20, 6, 1)]);
        assert_eq!(index(text, Some("y")), [(0, 20, 2)]);
        // "|x" inside "|xy" is no match; a match at the very end of the file is.
        assert_eq!(index("0 |xy 1\n1 |x", Some("x")), [(8, 4, 1)]);
    }

    #[test]
    fn a_bom_and_leading_space_are_skipped_and_files_without_ids_are_one_line_a_sequence() {
        let text = "\u{FEFF}\n  0 |x 1\n1 |x 2\n";
        assert_eq!(index(text, None), [(6, 7, 1), (13, 7, 1)]);
        assert_eq!(index("|x 1\n|x 2\n\n|x 3", None).len(), 4);
        let skipped = cntk_ctf_sequences(b"7 |x 1\n7 |x 2\n", true, None).unwrap();
        assert_eq!(skipped.len(), 2);
    }

    #[test]
    fn bad_files_are_errors() {
        assert!(cntk_ctf_sequences(b" \n\t", false, None).is_err());
        assert!(cntk_ctf_sequences(b"a |x 1\n", false, None).is_err());
        assert!(cntk_ctf_sequences(b"99999999999999999999999 |x 1\n", false, None).is_err());
    }

    #[test]
    fn chunk_samples_group_the_sequences_by_the_chunk_rule() {
        let text = "0 |x 1\n0 |x 2\n1 |x 3\n2 |x 4\n2 |x 5\n2 |x 6\n";
        let seqs = cntk_ctf_sequences(text.as_bytes(), false, None).unwrap();
        assert_eq!(
            cntk_ctf_chunk_samples(&seqs, 21, text.len() as u64),
            [vec![2, 1], vec![3]]
        );
    }

    #[test]
    fn no_sequences_no_chunks() {
        assert!(cntk_ctf_chunks([], 10, 0).is_empty());
    }
}
