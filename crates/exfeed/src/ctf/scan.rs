//! Finding sequence boundaries without parsing values.

use crate::error::{Error, Result};
use crate::limits::Limits;

/// How a file keys its sequences, decided by its first non-blank line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyMode {
    /// Lines start with numeric sequence ids; consecutive lines with the same id (or none) form
    /// one sequence.
    Ids,
    /// Every line is one sequence whose key is its 0-based line number (the first line had no
    /// id, or `skipSequenceIds` is set); ids on later lines are ignored.
    Lines,
}

/// The UTF-8 byte-order mark, skipped at the start of a file.
pub const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Decides the [`KeyMode`] from the start of a file. `None` when `file_start` holds nothing but
/// a BOM and whitespace (an empty file, or not enough bytes yet).
pub fn detect_key_mode(file_start: &[u8], skip_sequence_ids: bool) -> Option<KeyMode> {
    let body = file_start.strip_prefix(BOM).unwrap_or(file_start);
    let first = *body.iter().find(|b| !b.is_ascii_whitespace())?;
    if skip_sequence_ids || !first.is_ascii_digit() {
        Some(KeyMode::Lines)
    } else {
        Some(KeyMode::Ids)
    }
}

/// Where one sequence lies in a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SequenceExtent {
    /// Byte offset of its first line in the file.
    pub offset: u64,
    /// Length in bytes, through the newline of its last line.
    pub len: usize,
    /// Its key: the sequence id, or the 0-based line number.
    pub key: u64,
    /// 1-based line number of its first line.
    pub line: u64,
    /// Number of lines it spans.
    pub lines: u64,
}

impl SequenceExtent {
    /// Checks the sequence against `limits`: longer than a record may be is an error.
    pub fn check_size(&self, limits: &Limits) -> Result<()> {
        if self.len as u64 > limits.max_record_bytes {
            return Err(limits.sequence_too_long(self.offset));
        }
        Ok(())
    }
}

/// Whitespace CTF allows between tokens.
#[inline]
pub(crate) fn is_blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r')
}

/// The sequence id at the start of `line`, if any: `Ok(None)` for a line without one,
/// `Err(at)` for an id too large for 64 bits (`at` is its offset in the line).
#[inline]
pub(crate) fn line_id(line: &[u8]) -> std::result::Result<Option<(u64, usize)>, usize> {
    let mut i = 0;
    while i < line.len() && is_blank(line[i]) {
        i += 1;
    }
    let start = i;
    let mut id: u64 = 0;
    while i < line.len() && line[i].is_ascii_digit() {
        id = id
            .checked_mul(10)
            .and_then(|v| v.checked_add((line[i] - b'0') as u64))
            .ok_or(start)?;
        i += 1;
    }
    Ok(if i == start { None } else { Some((id, i)) })
}

/// The sequence id of line `text` (without its newline), which starts at byte `start` of the
/// file: `None` for a line without one. A BOM at the file's start is skipped.
#[inline]
pub(crate) fn line_key(text: &[u8], start: u64) -> Result<Option<u64>> {
    let skipped = if start == 0 && text.starts_with(BOM) {
        BOM.len()
    } else {
        0
    };
    match line_id(&text[skipped..]) {
        Ok(id) => Ok(id.map(|(id, _)| id)),
        Err(at) => Err(Error::syntax(
            start + (skipped + at) as u64,
            "sequence id does not fit in 64 bits",
        )),
    }
}

/// Does line `text` (without its newline), with sequence id `id` (see [`line_key`]), start a
/// sequence after the one keyed `current` (`None`: no sequence yet)? Yes for another id, and
/// with no sequence yet for any line with text; a line without an id continues the sequence.
#[inline]
pub(crate) fn starts_sequence(text: &[u8], id: Option<u64>, current: Option<u64>) -> bool {
    match (id, current) {
        (Some(id), Some(key)) => id != key,
        (Some(_), None) => true,
        (None, Some(_)) => false,
        (None, None) => !is_blank_line(text),
    }
}

/// Is `line` (without its newline) empty or blank?
#[inline]
pub(crate) fn is_blank_line(line: &[u8]) -> bool {
    line.iter().all(|&b| is_blank(b))
}

/// Calls `f` for each sequence in `buf`, which starts at byte `base` and line `base_line`
/// (1-based) of the file and holds whole lines. Blank lines before a sequence are skipped (in
/// [`KeyMode::Lines`] every blank line is); a blank line after one belongs to it. Stops at the
/// first error (`f`'s, or an id out of range).
pub fn scan_sequences(
    buf: &[u8],
    base: u64,
    base_line: u64,
    mode: KeyMode,
    mut f: impl FnMut(SequenceExtent) -> Result<()>,
) -> Result<()> {
    let mut pos = if base == 0 && buf.starts_with(BOM) {
        BOM.len()
    } else {
        0
    };
    let mut line_no = base_line;
    let mut cur: Option<SequenceExtent> = None;
    while pos < buf.len() {
        let end = memchr::memchr(b'\n', &buf[pos..]).map_or(buf.len(), |i| pos + i + 1);
        let line = &buf[pos..end];
        let text = line.strip_suffix(b"\n").unwrap_or(line);
        match mode {
            KeyMode::Lines => {
                if !is_blank_line(text) {
                    f(SequenceExtent {
                        offset: base + pos as u64,
                        len: end - pos,
                        key: line_no.saturating_sub(1),
                        line: line_no,
                        lines: 1,
                    })?;
                }
            }
            KeyMode::Ids => {
                let id = line_key(text, base + pos as u64)?;
                if starts_sequence(text, id, cur.as_ref().map(|c| c.key)) {
                    if let Some(c) = cur.take() {
                        f(c)?;
                    }
                    cur = Some(SequenceExtent {
                        offset: base + pos as u64,
                        len: end - pos,
                        key: id.unwrap_or(0),
                        line: line_no,
                        lines: 1,
                    });
                } else if let Some(c) = cur.as_mut() {
                    c.len = (base + end as u64 - c.offset) as usize;
                    c.lines += 1;
                } // else a blank line before the first sequence
            }
        }
        pos = end;
        line_no += 1;
    }
    if let Some(c) = cur {
        f(c)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(buf: &[u8], mode: KeyMode) -> Vec<(u64, usize, u64, u64, u64)> {
        let mut v = Vec::new();
        scan_sequences(buf, 0, 1, mode, |e| {
            v.push((e.offset, e.len, e.key, e.line, e.lines));
            Ok(())
        })
        .unwrap();
        v
    }

    #[test]
    fn ids_and_lines() {
        let buf = b"\n1 |a 1\n1 |a 2\n|a 3\n7 |a 1\n";
        assert_eq!(detect_key_mode(buf, false), Some(KeyMode::Ids));
        assert_eq!(
            scan(buf, KeyMode::Ids),
            vec![(1, 19, 1, 2, 3), (20, 7, 7, 5, 1)]
        );
        assert_eq!(scan(buf, KeyMode::Lines).len(), 4);
        assert_eq!(scan(buf, KeyMode::Lines)[0], (1, 7, 1, 2, 1));
        assert_eq!(
            detect_key_mode(b"\xEF\xBB\xBF |a", false),
            Some(KeyMode::Lines)
        );
        assert_eq!(detect_key_mode(b" \r\n\t", false), None);
    }
}
