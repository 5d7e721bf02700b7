//! A CTF file's chunks as byte ranges fixed from its size: the start without a full index
//! ([`IndexMode::None`](super::IndexMode::None)).
//!
//! A file of `len` bytes read in chunks of about `chunk_size` bytes is cut into `n =
//! ceil(len / chunk_size)` nominal ranges of equal size: chunk `i` nominally starts at
//! `B(i) = i * len / n`. Its real start is [`first_sequence_start`]`(B(i))`: the first byte at or
//! after `B(i)` where a sequence starts, found when the chunk is decoded by reading a little of
//! the file around `B(i)`. Chunk `i` is then the bytes from its start to the next chunk's start
//! (the file's end for the last one): it holds exactly the sequences that start there, so a
//! sequence whose lines cross a nominal boundary belongs to the chunk where it starts (that
//! chunk's decoder reads past its nominal end to finish it, the next one skips it). As every
//! chunk's start is the same function of the file's bytes, whoever computes it, every sequence
//! is in exactly one chunk, whatever the chunk size; a chunk in the middle of a sequence larger
//! than it holds none.
//!
//! Where a sequence starts is decided exactly as the indexing scan decides it
//! ([`scan_sequences`](crate::ctf::scan_sequences)): with sequence ids ([`KeyMode::Ids`]) a line
//! starts a sequence when it has an id that differs from the current sequence's, the id of the
//! last line before it that has one (lines without an id, blank ones too, continue the current
//! sequence; before the first sequence a blank line belongs to none and a line without an id
//! starts one keyed 0). Without ids ([`KeyMode::Lines`]) every line starts one (blank lines are
//! skipped by the parser). So finding the start after `B` takes: the first line start at or
//! after `B` (a line starts after a `\n`; `\r\n` ends a line as `\n` does, the `\r` being
//! blank), the id of the last line with one before it (looking back), then skipping the lines
//! that continue that sequence. Each look is bounded by the maximum record size: a sequence
//! longer than that is an error, as it is for the scan.

use crate::ctf::{line_key, starts_sequence, KeyMode, BOM};
use crate::error::{Error, Result};
use crate::limits::Limits;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes read per look (grown when a line is longer).
const PROBE: usize = 8 << 10;
/// Bytes of the file's start read at open: the key mode, and the samples per byte the plan
/// estimates its chunks' samples with.
pub(super) const HEAD: usize = 64 << 10;

/// Bytes of the data at an offset: a file read by offset, or the data in memory.
pub(super) trait ReadAt {
    /// The bytes `offset..offset + len` (fewer at the end of the data), borrowed from memory or
    /// read into `buf`.
    fn bytes_at<'a>(&'a self, offset: u64, len: usize, buf: &'a mut Vec<u8>) -> Result<&'a [u8]>;
}

impl ReadAt for [u8] {
    fn bytes_at<'a>(&'a self, offset: u64, len: usize, _: &'a mut Vec<u8>) -> Result<&'a [u8]> {
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.len());
        Ok(&self[start..start.saturating_add(len).min(self.len())])
    }
}

impl ReadAt for crate::io::RemoteFile {
    fn bytes_at<'a>(&'a self, offset: u64, len: usize, buf: &'a mut Vec<u8>) -> Result<&'a [u8]> {
        buf.resize(len, 0);
        let n = self.read_at_most(buf, offset)?;
        Ok(&buf[..n])
    }
}

impl ReadAt for std::fs::File {
    fn bytes_at<'a>(&'a self, offset: u64, len: usize, buf: &'a mut Vec<u8>) -> Result<&'a [u8]> {
        buf.resize(len, 0);
        let n = crate::io::read_at_most(self, buf, offset)?;
        Ok(&buf[..n])
    }
}

/// The chunk layout of a file without an index: nominal ranges, and the real starts found so
/// far (shared by the decoding threads: a chunk's end is the next one's start).
#[derive(Debug)]
pub(super) struct ByteRanges {
    /// Where the first range starts (0 for a file's chunks; a chunk's start for its pieces).
    start: u64,
    /// Where the last range ends: the file's end, or the chunk's.
    end: u64,
    mode: KeyMode,
    limits: Limits,
    /// Real start of range `i` once found (`UNKNOWN` before); entry `n` is `end`.
    starts: Vec<AtomicU64>,
}

const UNKNOWN: u64 = u64::MAX;

impl ByteRanges {
    /// The layout of `len` bytes in chunks of about `chunk_size` (at least one chunk).
    pub(super) fn new(len: u64, chunk_size: u64, mode: KeyMode, limits: Limits) -> Self {
        ByteRanges::between(0, len, chunk_size, mode, limits)
    }

    /// The bytes `start..end` in ranges of about `size` (at least one), resolved by the same
    /// rule: `start` and `end` must be where sequences start (or the data's end), as a chunk's
    /// real bounds are; then each range holds the sequences that start in it, and decoding the
    /// ranges one after the other gives the sequences of `start..end` in order (a chunk's
    /// pieces, see `CtfSource::read_chunk`).
    fn between(start: u64, end: u64, size: u64, mode: KeyMode, limits: Limits) -> Self {
        let n = (end - start).div_ceil(size.max(1)).max(1);
        let mut starts: Vec<AtomicU64> = (0..=n).map(|_| AtomicU64::new(UNKNOWN)).collect();
        starts[0] = AtomicU64::new(start);
        starts[n as usize] = AtomicU64::new(end);
        ByteRanges {
            start,
            end,
            mode,
            limits,
            starts,
        }
    }

    /// Number of chunks.
    pub(super) fn len(&self) -> usize {
        self.starts.len() - 1
    }

    /// Range `start..end` of this layout's data, whose bounds are where sequences start (a
    /// chunk's [`ByteRanges::range`]), cut in turn into ranges of about `size`.
    pub(super) fn within(&self, start: u64, end: u64, size: u64) -> ByteRanges {
        ByteRanges::between(start, end, size, self.mode, self.limits)
    }

    /// Where the first range starts and the last one ends.
    pub(super) fn bounds(&self) -> std::ops::Range<u64> {
        self.start..self.end
    }

    /// How the file keys its sequences.
    pub(super) fn mode(&self) -> KeyMode {
        self.mode
    }

    /// Where range `i` nominally starts.
    pub(super) fn nominal_start(&self, i: usize) -> u64 {
        let span = (self.end - self.start) as u128;
        self.start + (i as u128 * span / self.len() as u128) as u64
    }

    /// The real byte range of chunk `i`, found (and remembered) on first use.
    pub(super) fn range<D: ReadAt + ?Sized>(&self, data: &D, i: usize) -> Result<(u64, u64)> {
        Ok((self.start(data, i)?, self.start(data, i + 1)?))
    }

    fn start<D: ReadAt + ?Sized>(&self, data: &D, i: usize) -> Result<u64> {
        let known = self.starts[i].load(Ordering::Relaxed);
        if known != UNKNOWN {
            return Ok(known);
        }
        let nominal = self.nominal_start(i);
        let around = Around::read(data, nominal)?;
        // Never past `end` (a sequence starts there), even if the data changed meanwhile.
        let at =
            first_sequence_start(&around, self.end, nominal, self.mode, self.limits)?.min(self.end);
        self.starts[i].store(at, Ordering::Relaxed);
        Ok(at)
    }
}

/// The bytes around a nominal start, read with one request: the looks that find the sequence
/// start after it (the line start after it, the id before that, the lines continuing that
/// sequence: a [`PROBE`] each) mostly fall inside, so a remote object answers them with one
/// ranged GET instead of three. Looks outside are read from the data.
struct Around<'a, D: ?Sized> {
    data: &'a D,
    offset: u64,
    bytes: Vec<u8>,
    /// Whether `bytes` reach the data's end.
    to_the_end: bool,
}

impl<'a, D: ReadAt + ?Sized> Around<'a, D> {
    /// [`PROBE`] bytes before `nominal - 1`, where the first look starts, and two after.
    fn read(data: &'a D, nominal: u64) -> Result<Self> {
        let offset = nominal.saturating_sub(1 + PROBE as u64);
        let want = (nominal - 1 - offset) as usize + 2 * PROBE;
        let mut bytes = Vec::new();
        let got = data.bytes_at(offset, want, &mut bytes)?.to_vec();
        Ok(Around {
            data,
            offset,
            to_the_end: got.len() < want,
            bytes: got,
        })
    }
}

impl<D: ReadAt + ?Sized> ReadAt for Around<'_, D> {
    fn bytes_at<'b>(&'b self, offset: u64, len: usize, buf: &'b mut Vec<u8>) -> Result<&'b [u8]> {
        let held = self.bytes.len() as u64;
        match offset.checked_sub(self.offset) {
            Some(from) if from + len as u64 <= held || (self.to_the_end && from <= held) => {
                let from = from as usize;
                Ok(&self.bytes[from..(from + len).min(self.bytes.len())])
            }
            _ => self.data.bytes_at(offset, len, buf),
        }
    }
}

/// The first byte at or after `nominal` (`0 < nominal`) where a sequence starts in data of
/// `len` bytes keyed by `mode`; `len` when none does. See the [module documentation](self).
pub(super) fn first_sequence_start<D: ReadAt + ?Sized>(
    data: &D,
    len: u64,
    nominal: u64,
    mode: KeyMode,
    limits: Limits,
) -> Result<u64> {
    let p = line_start_at_or_after(data, len, nominal, limits)?;
    if mode == KeyMode::Lines || p >= len {
        return Ok(p);
    }
    let current = current_key(data, p, limits)?;
    skip_continuing_lines(data, len, p, current, limits)
}

/// The first line start at or after `b` (> 0): `b` when the byte before it is a newline, else
/// just after the next newline (`len` when there is none).
fn line_start_at_or_after<D: ReadAt + ?Sized>(
    data: &D,
    len: u64,
    b: u64,
    limits: Limits,
) -> Result<u64> {
    let mut buf = Vec::new();
    let mut pos = b - 1;
    while pos < len {
        let bytes = data.bytes_at(pos, PROBE, &mut buf)?;
        if bytes.is_empty() {
            break;
        }
        if let Some(i) = memchr::memchr(b'\n', bytes) {
            return Ok(pos + i as u64 + 1);
        }
        pos += bytes.len() as u64;
        if pos - b > limits.max_record_bytes {
            return Err(Error::invalid(
                pos,
                format!(
                    "no line ends between bytes {b} and {pos}: a line is longer than the maximum \
                     record size ({} bytes; raise it with --max-record-size or \
                     maxRecordSizeInBytes)",
                    limits.max_record_bytes
                ),
            ));
        }
    }
    Ok(len)
}

/// The error for a sequence that goes on across byte `at` for more than the maximum record size.
fn sequence_across(at: u64, limits: Limits) -> Error {
    Error::invalid(
        at,
        format!(
            "the sequence around byte {at} is longer than the maximum record size ({} bytes; \
             raise it with --max-record-size or maxRecordSizeInBytes)",
            limits.max_record_bytes
        ),
    )
}

/// The key of the sequence open at line start `p` (> 0): the id of the last line with one before
/// `p`; with none, `None` when every line before `p` is blank (no sequence yet), else 0 (a
/// first line without an id starts a sequence keyed 0, as the scan reads it).
fn current_key<D: ReadAt + ?Sized>(data: &D, p: u64, limits: Limits) -> Result<Option<u64>> {
    let mut buf = Vec::new();
    let mut window = PROBE as u64;
    loop {
        let from = p.saturating_sub(window);
        let bytes = data.bytes_at(from, (p - from) as usize, &mut buf)?;
        // The lines that start inside the window, last first (the first one is cut unless the
        // window starts the file).
        let mut end = bytes.len();
        let mut any_text = false;
        while end > 0 {
            let start = memchr::memrchr(b'\n', &bytes[..end - 1]).map_or(0, |i| i + 1);
            if start == 0 && from > 0 {
                break;
            }
            let text = &bytes[start..end - 1];
            if let Some(id) = line_key(text, from + start as u64)? {
                return Ok(Some(id));
            }
            any_text |= !crate::ctf::is_blank_line(text.strip_prefix(BOM).unwrap_or(text));
            end = start;
        }
        if from == 0 {
            return Ok(any_text.then_some(0));
        }
        if window > limits.max_record_bytes {
            // No id within a record's size: the lines back there are one sequence too long,
            // unless they are blank lines at the start of the file, before any sequence.
            return match last_text_before(data, from)? {
                None if !any_text => Ok(None),
                _ => Err(sequence_across(p, limits)),
            };
        }
        window = window.saturating_mul(2);
    }
}

/// The offset of the last byte before `end` that is not blank or a newline.
fn last_text_before<D: ReadAt + ?Sized>(data: &D, mut end: u64) -> Result<Option<u64>> {
    let mut buf = Vec::new();
    while end > 0 {
        let from = end.saturating_sub(PROBE as u64);
        let bytes = data.bytes_at(from, (end - from) as usize, &mut buf)?;
        if let Some(i) = bytes
            .iter()
            .rposition(|&b| !(crate::ctf::is_blank(b) || b == b'\n'))
        {
            return Ok(Some(from + i as u64));
        }
        end = from;
    }
    Ok(None)
}

/// From line start `p`, the start of the first line that does not continue the sequence keyed
/// `current` (`None`: no sequence yet, so blank lines are skipped): a line with another id, or
/// (with `None`) a non-blank one.
fn skip_continuing_lines<D: ReadAt + ?Sized>(
    data: &D,
    len: u64,
    p: u64,
    current: Option<u64>,
    limits: Limits,
) -> Result<u64> {
    let mut buf = Vec::new();
    let (mut pos, mut want) = (p, PROBE);
    while pos < len {
        let bytes = data.bytes_at(pos, want, &mut buf)?;
        if bytes.is_empty() {
            break; // the data is shorter than it was: the chunk's read will say so
        }
        let eof = pos + bytes.len() as u64 >= len;
        let mut at = 0;
        while at < bytes.len() {
            let end = match memchr::memchr(b'\n', &bytes[at..]) {
                Some(i) => at + i,
                None if eof => bytes.len(),
                None => break, // the line goes on past the block: read again from its start
            };
            let (text, start) = (&bytes[at..end], pos + at as u64);
            if starts_sequence(text, line_key(text, start)?, current) {
                return Ok(start);
            }
            if current.is_some() && pos + end as u64 - p > limits.max_record_bytes {
                return Err(sequence_across(p, limits));
            }
            at = end + 1;
        }
        if at == 0 {
            if want as u64 > limits.max_record_bytes {
                return Err(limits.line_too_long(pos));
            }
            want = want.saturating_mul(2);
        } else {
            pos += at as u64;
            want = PROBE;
        }
    }
    Ok(len)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::ctf::{detect_key_mode, scan_sequences};
    use crate::reader::rng::SplitMix64;

    /// (offset, length, key) of every sequence the scan finds in `buf`, which starts at byte
    /// `base`; without ids the key (a line number, relative to `base`) is left out.
    fn scan(buf: &[u8], base: u64, mode: KeyMode) -> Result<Vec<(u64, usize, u64)>> {
        let mut v = Vec::new();
        scan_sequences(buf, base, 1, mode, |e| {
            let key = if mode == KeyMode::Ids { e.key } else { 0 };
            v.push((e.offset, e.len, key));
            Ok(())
        })?;
        Ok(v)
    }

    /// The sequences of every chunk of `data`'s byte ranges, chunk after chunk, each chunk
    /// scanned alone from its real start; checks that the ranges tile the data.
    fn by_ranges<D: ReadAt + ?Sized>(
        data: &D,
        text: &[u8],
        chunk: u64,
        mode: KeyMode,
        limits: Limits,
    ) -> Result<Vec<(u64, usize, u64)>> {
        let ranges = ByteRanges::new(text.len() as u64, chunk, mode, limits);
        let mut all = Vec::new();
        let mut end = 0;
        // Decoded in a scrambled order, as the workers do: a range does not depend on which
        // were resolved before.
        let mut order: Vec<usize> = (0..ranges.len()).collect();
        SplitMix64::new(chunk).shuffle(&mut order);
        let mut found = vec![(0, 0); ranges.len()];
        for &i in &order {
            found[i] = ranges.range(data, i)?;
        }
        for (i, &(s, e)) in found.iter().enumerate() {
            assert_eq!(s, end, "chunk {i} starts where the one before ends");
            assert!(e >= s);
            all.extend(scan(&text[s as usize..e as usize], s, mode)?);
            end = e;
        }
        assert_eq!(end, text.len() as u64);
        Ok(all)
    }

    /// A CTF text exercising what decides where sequences start: a BOM, blank lines at the
    /// start, ids after blanks, lines without ids, blank lines inside sequences, ids repeated
    /// after other sequences, `\r\n`, lines of every length, no newline at the end; or lines
    /// without ids at all.
    pub(in crate::source::ctf) fn generate(rng: &mut SplitMix64) -> Vec<u8> {
        let mut t = Vec::new();
        let pick = |rng: &mut SplitMix64, n: u64| rng.below(n);
        if pick(rng, 4) == 0 {
            t.extend_from_slice(BOM);
        }
        for _ in 0..pick(rng, 3) {
            t.extend_from_slice([&b"\n"[..], b" \n", b"\r\n", b"\t\t\n"][pick(rng, 4) as usize]);
        }
        let ids = pick(rng, 4) != 0;
        let (mut next, mut used, mut last) = (pick(rng, 3) * 1000, Vec::new(), u64::MAX);
        for _ in 0..1 + pick(rng, 40) {
            let id = if !used.is_empty() && pick(rng, 5) == 0 {
                used[pick(rng, used.len() as u64) as usize] // may repeat a non-adjacent id
            } else {
                next += 1 + pick(rng, 3);
                next
            };
            if id == last {
                continue;
            }
            (last, used) = (id, [used, vec![id]].concat());
            for l in 0..1 + pick(rng, 4) {
                let blank = [&b""[..], b" ", b"\t", b"  \t"][pick(rng, 4) as usize];
                match (ids, l, pick(rng, 6)) {
                    (true, 0, _) | (true, _, 0..=2) => {
                        t.extend_from_slice(blank);
                        t.extend_from_slice(id.to_string().as_bytes());
                        t.push(b' ');
                    }
                    (true, _, 3) => {
                        t.extend_from_slice(blank); // a blank line inside the sequence
                        t.extend_from_slice([&b"\n"[..], b"\r\n"][pick(rng, 2) as usize]);
                        continue;
                    }
                    _ => t.extend_from_slice(blank),
                }
                t.extend_from_slice(b"|x");
                for _ in 0..pick(rng, 12) {
                    t.extend_from_slice(format!(" {}", pick(rng, 1000)).as_bytes());
                }
                t.extend_from_slice([&b"\n"[..], b"\r\n"][pick(rng, 2) as usize]);
            }
        }
        if pick(rng, 3) == 0 {
            while t.last().is_some_and(|&b| b == b'\n' || b == b'\r') {
                t.pop();
            }
        }
        t
    }

    const CHUNKS: &[u64] = &[
        1,
        2,
        3,
        4,
        5,
        7,
        9,
        13,
        17,
        31,
        50,
        64,
        100,
        257,
        1000,
        1 << 20,
    ];

    #[test]
    fn every_sequence_in_exactly_one_range_whatever_the_chunk_size() {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = SplitMix64::new(12);
        for case in 0..200 {
            let text = generate(&mut rng);
            let Some(mode) = detect_key_mode(&text, false) else {
                continue;
            };
            let whole = scan(&text, 0, mode).unwrap();
            let path = dir.path().join("g.ctf");
            std::fs::write(&path, &text).unwrap();
            let file = std::fs::File::open(&path).unwrap();
            for &chunk in CHUNKS.iter().chain(&[text.len() as u64 / 3 + 1]) {
                let got = by_ranges(&text[..], &text, chunk, mode, Limits::default()).unwrap();
                assert_eq!(
                    got,
                    whole,
                    "case {case}, chunk size {chunk}: {:?}",
                    String::from_utf8_lossy(&text)
                );
                if case % 10 == 0 && chunk >= 5 {
                    let from_file = by_ranges(&file, &text, chunk, mode, Limits::default());
                    assert_eq!(from_file.unwrap(), whole, "case {case}, chunk size {chunk}");
                }
            }
        }
    }

    /// Data that counts the reads made of it.
    struct Counted<'a>(&'a [u8], std::cell::Cell<usize>);

    impl ReadAt for Counted<'_> {
        fn bytes_at<'a>(
            &'a self,
            offset: u64,
            len: usize,
            buf: &'a mut Vec<u8>,
        ) -> Result<&'a [u8]> {
            self.1.set(self.1.get() + 1);
            self.0.bytes_at(offset, len, buf)
        }
    }

    #[test]
    fn each_start_is_found_with_one_read_when_its_lines_are_short() {
        // Lines of about 1.8 kB, every third one continuing the sequence before it: the line
        // start, the id before it and the continuing lines all lie within the bytes read.
        let mut text = Vec::new();
        for line in 0..3000u64 {
            let values = " 1.234567".repeat(200);
            text.extend_from_slice(format!("{} |x{values}\n", line - line / 3).as_bytes());
        }
        let mode = detect_key_mode(&text, false).unwrap();
        let whole = scan(&text, 0, mode).unwrap();
        for chunk in [64 << 10, 1 << 20] {
            let data = Counted(&text, Default::default());
            assert_eq!(
                by_ranges(&data, &text, chunk, mode, Limits::default()).unwrap(),
                whole
            );
            let ranges = ByteRanges::new(text.len() as u64, chunk, mode, Limits::default());
            assert_eq!(data.1.get(), ranges.len() - 1, "chunk size {chunk}");
        }
    }

    #[test]
    fn every_conformance_ctf_file_splits_into_its_sequences() {
        let Some(dir) = crate::ctf::tests::crate_conformance("cntk/ctf") else {
            return;
        };
        let mut files = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read(&path).unwrap();
            for skip_ids in [false, true] {
                let Some(mode) = detect_key_mode(&text, skip_ids) else {
                    continue;
                };
                let whole = scan(&text, 0, mode);
                // At most a few thousand chunks a file (the tests run unoptimized).
                for chunk in CHUNKS.iter().map(|&c| c.max(text.len() as u64 / 3000)) {
                    let got = by_ranges(&text[..], &text, chunk, mode, Limits::default());
                    match (&got, &whole) {
                        (Ok(g), Ok(w)) => assert_eq!(g, w, "{} {chunk}", path.display()),
                        // An id too large for 64 bits: an error either way.
                        (Err(_), Err(_)) => {}
                        _ => panic!("{} {chunk}: {got:?} {whole:?}", path.display()),
                    }
                }
            }
            files += 1;
        }
        assert!(files >= 20, "{files} files");
    }

    #[test]
    fn a_sequence_longer_than_a_record_is_an_error_as_for_the_scan() {
        let limits = Limits {
            max_record_bytes: 40,
        };
        // Sequence 2 takes 60 bytes over three lines; the lines alone are short.
        let mut text = b"1 |x 1\n".to_vec();
        for _ in 0..3 {
            text.extend_from_slice(b"2 |x 1 2 3 4 5 6 7 8\n");
        }
        text.extend_from_slice(b"3 |x 1\n");
        for chunk in [10, 20, 30] {
            let ranges = ByteRanges::new(text.len() as u64, chunk, KeyMode::Ids, limits);
            let errors = (0..ranges.len())
                .filter_map(|i| ranges.range(&text[..], i).err())
                .collect::<Vec<_>>();
            assert!(!errors.is_empty(), "{chunk}");
            assert!(
                errors[0]
                    .message()
                    .contains("longer than the maximum record size"),
                "{}",
                errors[0]
            );
        }
        // Blank lines at the start of a file belong to no sequence: no limit.
        let mut blank = vec![b'\n'; 200];
        blank.extend_from_slice(b"5 |x 1\n");
        let ranges = ByteRanges::new(blank.len() as u64, 16, KeyMode::Ids, limits);
        let starts: Vec<_> = (0..ranges.len())
            .map(|i| ranges.range(&blank[..], i).unwrap().0)
            .collect();
        assert_eq!(starts[0], 0);
        assert!(starts[1..].iter().all(|&s| s == 200), "{starts:?}");
    }

    #[test]
    fn an_id_too_large_is_the_same_error_as_for_the_scan() {
        // The first line's id, looked back at from the later chunks, after a BOM or not.
        for bom in [&b""[..], BOM] {
            let mut text = bom.to_vec();
            text.extend_from_slice(b"99999999999999999999999 |x 1\n");
            for _ in 0..10 {
                text.extend_from_slice(b"|x 2\n");
            }
            let whole = scan(&text, 0, KeyMode::Ids).unwrap_err();
            assert_eq!(whole.location().byte, Some(bom.len() as u64), "{whole}");
            let ranges = ByteRanges::new(text.len() as u64, 16, KeyMode::Ids, Limits::default());
            for i in 1..ranges.len() {
                let e = ranges.range(&text[..], i).unwrap_err();
                assert_eq!(e.to_string(), whole.to_string(), "chunk {i}");
            }
        }
    }
}
