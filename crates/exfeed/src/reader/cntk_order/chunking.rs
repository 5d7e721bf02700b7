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

/// The numeric sequence id at the start of `line` (CNTK's `TryGetNumericSequenceId`): `None`
/// when it starts with no digit or its digits run to the end of the file (the last line without
/// a newline); also the index after the digits. `at` is the line's byte offset, for messages.
fn sequence_id(line: &[u8], at: u64) -> Result<(Option<u64>, usize)> {
    let mut id = 0u64;
    let mut end = 0;
    while let Some(&c) = line.get(end).filter(|c| c.is_ascii_digit()) {
        id = id
            .checked_mul(10)
            .and_then(|x| x.checked_add(u64::from(c - b'0')))
            .ok_or_else(|| {
                Error::config(format!("byte {at}: the sequence id overflows 64 bits"))
            })?;
        end += 1;
    }
    let found = end > 0 && end < line.len();
    Ok((found.then_some(id), end))
}

/// How the lines of a file are read so far (see [`CntkCtfScan`]).
enum ScanState {
    /// Before the first character that is not a BOM or white space.
    Leading,
    /// Without sequence ids: every line is a sequence.
    NoIds,
    /// With ids: the sequence being read, its id, first byte and samples.
    Ids {
        previous: u64,
        start: u64,
        samples: u32,
    },
}

/// CNTK's CTF indexer fed a file's lines in order ([`cntk_ctf_sequences`] over a whole text,
/// `CtfSource` over pieces read in turn, so that the file is never held whole).
struct CntkCtfScan<'a> {
    skip_sequence_ids: bool,
    main_stream: Option<&'a [u8]>,
    state: ScanState,
    out: Vec<CntkCtfSequence>,
}

impl<'a> CntkCtfScan<'a> {
    fn new(skip_sequence_ids: bool, main_stream: Option<&'a str>) -> Self {
        CntkCtfScan {
            skip_sequence_ids,
            main_stream: main_stream.map(str::as_bytes),
            state: ScanState::Leading,
            out: Vec::new(),
        }
    }

    /// Whether `content` (a line after its id) counts as a sample.
    fn counts(&self, content: &[u8], last: bool) -> bool {
        self.main_stream
            .is_none_or(|name| holds_stream(content, name, last))
    }

    /// The next line, starting at byte `at` of the file: its bytes with its newline (none for
    /// the `last` line when the file does not end with one).
    fn line(&mut self, at: u64, mut line: &[u8], last: bool) -> Result<()> {
        let mut at = at;
        if let ScanState::Leading = self.state {
            let mut skip = 0;
            if at == 0 {
                skip = line
                    .iter()
                    .zip([0xEF, 0xBB, 0xBF])
                    .take_while(|(a, b)| *a == b)
                    .count();
            }
            skip += line[skip..].iter().take_while(|&&b| is_c_space(b)).count();
            (line, at) = (&line[skip..], at + skip as u64);
            if line.is_empty() {
                return Ok(());
            }
            if self.skip_sequence_ids || line[0] == b'|' {
                self.state = ScanState::NoIds;
            } else {
                let (Some(id), digits) = sequence_id(line, at)? else {
                    return Err(Error::config(format!(
                        "byte {at}: expected a sequence id, found none"
                    )));
                };
                self.state = ScanState::Ids {
                    previous: id,
                    start: at,
                    samples: 0,
                };
                return self.count(&line[digits..], last);
            }
        }
        let end = at + line.len() as u64;
        match self.state {
            ScanState::NoIds => {
                if self.counts(line, last) {
                    self.out.push(CntkCtfSequence {
                        offset: at,
                        size: end - at,
                        samples: 1,
                    });
                }
                Ok(())
            }
            ScanState::Ids { previous, .. } => {
                let (id, digits) = sequence_id(line, at)?;
                if let Some(id) = id.filter(|&id| id != previous) {
                    self.close(at);
                    self.state = ScanState::Ids {
                        previous: id,
                        start: at,
                        samples: 0,
                    };
                }
                self.count(&line[digits..], last)
            }
            ScanState::Leading => unreachable!("left above"),
        }
    }

    /// One more line of the current sequence, counted if it holds the main stream.
    fn count(&mut self, content: &[u8], last: bool) -> Result<()> {
        let counted = self.counts(content, last);
        if let ScanState::Ids { samples, start, .. } = &mut self.state {
            if counted {
                *samples = samples.checked_add(1).ok_or_else(|| {
                    Error::config(format!("byte {start}: a sequence of 2^32 lines"))
                })?;
            }
        }
        Ok(())
    }

    /// Ends the current sequence at byte `end` (one without samples is left out).
    fn close(&mut self, end: u64) {
        if let ScanState::Ids { start, samples, .. } = self.state {
            if samples > 0 {
                self.out.push(CntkCtfSequence {
                    offset: start,
                    size: end - start,
                    samples,
                });
            }
        }
    }

    /// The sequences, once every line of a file of `len` bytes was given.
    fn finish(mut self, len: u64) -> Result<Vec<CntkCtfSequence>> {
        if let ScanState::Leading = self.state {
            return Err(Error::config("the input file is empty"));
        }
        self.close(len);
        Ok(self.out)
    }
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
    let mut scan = CntkCtfScan::new(skip_sequence_ids, main_stream);
    let mut at = 0;
    while at < text.len() {
        let end = line_end(text, at);
        scan.line(at as u64, &text[at..end], end == text.len())?;
        at = end;
    }
    scan.finish(text.len() as u64)
}

/// [`cntk_ctf_sequences`] of a file of `len` bytes read in pieces: `read(offset, buf)` fills
/// `buf` with the bytes from `offset` on (all of `buf`, or up to the end of the file). At most
/// `piece` bytes and the longest line are held at once.
pub(crate) fn cntk_ctf_sequences_read(
    len: u64,
    piece: usize,
    mut read: impl FnMut(u64, &mut [u8]) -> Result<()>,
    skip_sequence_ids: bool,
    main_stream: Option<&str>,
) -> Result<Vec<CntkCtfSequence>> {
    let mut scan = CntkCtfScan::new(skip_sequence_ids, main_stream);
    // buf holds the file's bytes from `base` on; its lines are given while complete.
    let (mut buf, mut base) = (Vec::new(), 0u64);
    let mut loaded = 0u64;
    while loaded < len {
        let more = (len - loaded).min(piece.max(1) as u64) as usize;
        let old = buf.len();
        buf.resize(old + more, 0);
        read(loaded, &mut buf[old..])?;
        loaded += more as u64;
        let mut at = 0;
        while let Some(i) = memchr::memchr(b'\n', &buf[at..]) {
            let end = at + i + 1;
            let last = loaded == len && end == buf.len();
            scan.line(base + at as u64, &buf[at..end], last)?;
            at = end;
        }
        buf.drain(..at);
        base += at as u64;
    }
    if !buf.is_empty() {
        scan.line(base, &buf, true)?;
    }
    scan.finish(len)
}

/// The end of the line starting at `at` (after its `\n`, or the end of the text).
fn line_end(text: &[u8], at: usize) -> usize {
    memchr::memchr(b'\n', &text[at..]).map_or(text.len(), |i| at + i + 1)
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

/// CNTK's chunks of a CTF file of `file_size` bytes whose CNTK `sequences` are these, as the
/// randomizer's input, when they are the chunks
/// exfeed's index made (`own`: each of those chunks' sequence count); an error names the first
/// difference otherwise (exfeed reads chunks by its own index, so it cannot give CNTK's order
/// over other chunks).
pub(crate) fn ctf_chunk_samples(
    sequences: &[CntkCtfSequence],
    file_size: u64,
    chunk_size: u64,
    own: impl ExactSizeIterator<Item = u64>,
) -> Result<Vec<Vec<u32>>> {
    let chunks = cntk_ctf_chunk_samples(sequences, chunk_size, file_size);
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
    fn read_in_pieces_the_index_is_the_same_as_of_the_whole_text() {
        let texts: [&[u8]; 8] = [
            b"\xEF\xBB\xBF \n\n  0 |x 1\n0 |y 2\n1 |x 3\n\n1 |x 4\n2 |y 5",
            b"0 |x 1\n0 |x 2\n1 |y 3\n1 |x 4\n7",
            b"0 |x 1\n0 |x 2\n1 |y 3\n1 |x 4\n7\n",
            b"|x 1\n|y 2\n\n|x 3",
            b"5 |x 1\n5 |x 1\n6 |x 1\n",
            b" \n\t",
            b"a |x 1\n",
            b"",
        ];
        for text in texts {
            for (skip, main) in [(false, None), (false, Some("x")), (true, Some("x"))] {
                let whole = cntk_ctf_sequences(text, skip, main);
                for piece in [1, 2, 3, 5, 8, 64] {
                    let read = |offset: u64, buf: &mut [u8]| {
                        let at = offset as usize;
                        buf.copy_from_slice(&text[at..at + buf.len()]);
                        Ok(())
                    };
                    let pieces =
                        cntk_ctf_sequences_read(text.len() as u64, piece, read, skip, main);
                    match (&whole, &pieces) {
                        (Ok(a), Ok(b)) => assert_eq!(a, b, "{text:?} piece {piece}"),
                        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                        _ => panic!("{text:?} piece {piece}: {whole:?} / {pieces:?}"),
                    }
                }
            }
        }
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
