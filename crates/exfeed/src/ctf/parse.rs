//! The CTF parser: whole sequences from a buffer of whole lines into a [`SequenceBatch`].

use super::scan::{
    detect_key_mode, is_blank, is_blank_line, line_id, scan_sequences, KeyMode, BOM,
};
use super::CtfOptions;
use crate::batch::{SequenceBatch, StreamData};
use crate::element::Element;
use crate::error::{
    Diagnostic, DiagnosticSink, Error, ErrorBudget, ErrorKind, Location, Result, Severity,
};
use crate::number::{parse_number, six_decimals, BadNumber};
use crate::stream::Storage;
use std::sync::Arc;

/// Parses CTF text into [`SequenceBatch`]es. Keeps the state that spans chunks of one file: the
/// error budget, the file name for messages.
#[derive(Debug, Clone)]
pub struct CtfParser {
    opts: CtfOptions,
    /// The name each input has after `|` (its alias, else its name), with its stream index.
    names: Vec<(Box<[u8]>, usize)>,
    budget: ErrorBudget,
    on_line: Vec<bool>,
    file: Option<Arc<str>>,
    /// Without ids, key each line by its byte offset rather than its line number (when the
    /// line numbers are not known: a chunk read without an index).
    keys_by_offset: bool,
    /// Read runs of plain dense values a block at a time (see `blocks`); off in tests that
    /// compare against one value at a time.
    blocks: bool,
}

/// A sequence being read.
#[derive(Clone, Copy)]
struct OpenSeq {
    key: u64,
    byte: u64,
    line: u64,
    lines: u64,
}

/// Where in the file the current line is.
#[derive(Clone, Copy)]
struct LineAt {
    byte: u64,
    line: u64,
}

/// The most bytes [`CtfStream::feed_from`] reads at once.
pub const READ_SIZE: usize = 1 << 20;

/// A bad sample: the error, and where in the line to resume (the next `|`).
type SampleResult = std::result::Result<usize, (Error, usize)>;

fn shown(bytes: &[u8]) -> String {
    let end = bytes
        .iter()
        .position(|&b| matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b'|'))
        .unwrap_or(bytes.len())
        .min(40);
    // Control bytes (a NUL, an escape) are shown escaped: printed raw they are invisible.
    String::from_utf8_lossy(&bytes[..end])
        .chars()
        .flat_map(|c| {
            let escaped = c.is_control().then(|| c.escape_default());
            escaped
                .into_iter()
                .flatten()
                .chain((!c.is_control()).then_some(c))
        })
        .collect()
}

fn shown_char(line: &[u8], i: usize) -> String {
    match line.get(i) {
        None => "the end of the line".to_string(),
        Some(b) if b.is_ascii_graphic() => format!("'{}'", *b as char),
        Some(b' ') => "a space".to_string(),
        Some(b'\t') => "a tab".to_string(),
        Some(b) => format!("byte 0x{b:02x}"),
    }
}

#[inline]
fn next_bar(line: &[u8], from: usize) -> usize {
    let from = from.min(line.len());
    memchr::memchr(b'|', &line[from..]).map_or(line.len(), |k| from + k)
}

impl CtfParser {
    /// A parser for the configured inputs. Fails if there are none, if two inputs have the
    /// same name in the file, or if a dense dim is more than a sequence can hold
    /// ([`CtfOptions::limits`]). As
    /// CNTK's text parser, the data names an input by its alias only (by its name when it has
    /// no alias): `|labels` does not reach an input `labels` aliased `L`, so an alias may be
    /// another input's name (`-i y:dense:1:x -i x:dense:1:y`).
    pub fn new(opts: CtfOptions) -> Result<Self> {
        if opts.inputs.is_empty() {
            return Err(Error::config("no inputs are configured"));
        }
        opts.limits.check_text_inputs(&opts.inputs)?;
        let mut names: Vec<(Box<[u8]>, usize)> = Vec::new();
        for (i, s) in opts.inputs.iter().enumerate() {
            let n = s.name_in_file();
            if names.iter().any(|(m, _)| **m == *n.as_bytes()) {
                return Err(Error::config(format!(
                    "'{n}' names two inputs in the file (an input's alias, else its name)"
                )));
            }
            names.push((n.as_bytes().into(), i));
        }
        let budget = ErrorBudget::new(opts.max_errors);
        let on_line = vec![false; opts.inputs.len()];
        Ok(CtfParser {
            opts,
            names,
            budget,
            on_line,
            file: None,
            keys_by_offset: false,
            blocks: true,
        })
    }

    /// Names the file in every error and diagnostic.
    pub fn set_file_name(&mut self, file: impl Into<Arc<str>>) {
        self.file = Some(file.into());
    }

    /// Without sequence ids, key each line by its byte offset instead of its 0-based line number
    /// (for chunks parsed without knowing their line numbers; see
    /// [`IndexMode::None`](crate::options::IndexMode::None)).
    pub fn set_keys_by_offset(&mut self, on: bool) {
        self.keys_by_offset = on;
    }

    /// Reads dense values one at a time only (for tests comparing the two ways).
    #[cfg(test)]
    pub(crate) fn set_blocks(&mut self, on: bool) {
        self.blocks = on;
    }

    /// The options.
    pub fn options(&self) -> &CtfOptions {
        &self.opts
    }

    /// Errors seen so far (tolerated ones included).
    pub fn errors_seen(&self) -> u64 {
        self.budget.seen()
    }

    fn loc(&self, at: LineAt, col: usize, input: Option<usize>) -> Location {
        Location {
            file: self.file.clone(),
            line: Some(at.line),
            column: Some(col as u64 + 1),
            byte: Some(at.byte + col as u64),
            context: input.map(|i| format!("input '{}'", self.opts.inputs[i].name_in_file())),
        }
    }

    fn error(
        &self,
        kind: ErrorKind,
        at: LineAt,
        col: usize,
        input: Option<usize>,
        msg: String,
    ) -> Error {
        Error::new(kind, self.loc(at, col, input), msg)
    }

    /// Reports a bad sample or sequence under the error budget (`maxErrors`): `Ok` while the
    /// budget lasts, else the error that stops the run.
    fn tolerate(
        &mut self,
        sink: &mut dyn DiagnosticSink,
        kind: ErrorKind,
        at: LineAt,
        col: usize,
        input: Option<usize>,
        msg: String,
    ) -> Result<()> {
        let e = self.error(kind, at, col, input, msg);
        self.budget.tolerate(e, sink)
    }

    fn note(
        &self,
        sink: &mut dyn DiagnosticSink,
        severity: Severity,
        at: LineAt,
        col: usize,
        input: Option<usize>,
        message: String,
    ) {
        sink.report(Diagnostic {
            severity,
            location: self.loc(at, col, input),
            message,
        });
    }

    #[inline]
    fn lookup(&self, name: &[u8]) -> Option<usize> {
        self.names
            .iter()
            .find(|(n, _)| **n == *name)
            .map(|(_, i)| *i)
    }

    /// Parses a whole file held in `buf`: decides the key mode, fails on an empty file.
    pub fn parse_file<T: Element>(
        &mut self,
        buf: &[u8],
        batch: &mut SequenceBatch<T>,
        sink: &mut dyn DiagnosticSink,
    ) -> Result<()> {
        let mode =
            detect_key_mode(buf, self.opts.skip_sequence_ids).ok_or_else(|| self.empty_file())?;
        self.parse_chunk(buf, 0, 1, mode, batch, sink).map(drop)
    }

    pub(crate) fn empty_file(&self) -> Error {
        // The whole file is the place: no byte offset.
        let mut e = Error::new(
            crate::ErrorKind::Invalid,
            crate::Location::default(),
            "the file is empty: no data lines",
        );
        if let Some(f) = &self.file {
            e = e.in_file(f.clone());
        }
        e
    }

    /// Parses `buf`, which holds whole sequences starting at byte `base` and line `base_line`
    /// (1-based) of the file, appending them to `batch`. `mode` comes from the start of the
    /// file ([`detect_key_mode`]). A BOM is skipped when `base` is 0. Tolerated problems go to
    /// `sink`; the first one past the budget comes back as the error. Returns the number of
    /// lines parsed (a last one without a newline counted).
    pub fn parse_chunk<T: Element>(
        &mut self,
        buf: &[u8],
        base: u64,
        base_line: u64,
        mode: KeyMode,
        batch: &mut SequenceBatch<T>,
        sink: &mut dyn DiagnosticSink,
    ) -> Result<u64> {
        let mut pos = if base == 0 && buf.starts_with(BOM) {
            BOM.len()
        } else {
            0
        };
        let mut line_no = base_line;
        let mut seq: Option<OpenSeq> = None;
        while pos < buf.len() {
            let nl = memchr::memchr(b'\n', &buf[pos..]);
            let end = nl.map_or(buf.len(), |i| pos + i);
            let line = &buf[pos..end];
            let at = LineAt {
                byte: base + pos as u64,
                line: line_no,
            };
            match mode {
                KeyMode::Lines => {
                    if !is_blank_line(line) {
                        // Ids are ignored in this mode (even one too large for 64 bits).
                        let from = match line_id(line) {
                            Ok(Some((_, after))) => after,
                            Ok(None) => 0,
                            Err(start) => {
                                start
                                    + line[start..]
                                        .iter()
                                        .take_while(|b| b.is_ascii_digit())
                                        .count()
                            }
                        };
                        if self.parse_line(line, from, at, batch, sink)? {
                            let s = OpenSeq {
                                key: if self.keys_by_offset {
                                    at.byte
                                } else {
                                    line_no.saturating_sub(1)
                                },
                                byte: at.byte,
                                line: line_no,
                                lines: 1,
                            };
                            self.end_sequence(mode, s, batch, sink)?;
                        } else {
                            batch.discard_sequence();
                        }
                    }
                }
                KeyMode::Ids => {
                    let id = line_id(line).map_err(|col| {
                        self.error(
                            ErrorKind::Syntax,
                            at,
                            col,
                            None,
                            "sequence id does not fit in 64 bits".into(),
                        )
                    })?;
                    match (id, seq.as_mut()) {
                        (Some((id, after)), Some(s)) if id == s.key => {
                            s.lines += 1;
                            self.parse_line(line, after, at, batch, sink)?;
                        }
                        (None, Some(s)) => {
                            s.lines += 1;
                            self.parse_line(line, 0, at, batch, sink)?;
                        }
                        (None, None) if is_blank_line(line) => {}
                        (None, None) => {
                            return Err(self.error(
                                ErrorKind::Syntax,
                                at,
                                0,
                                None,
                                "expected a sequence id at the start of the first line (the file's first line has one)"
                                    .into(),
                            ));
                        }
                        (Some((id, after)), _) => {
                            if let Some(s) = seq.take() {
                                self.end_sequence(mode, s, batch, sink)?;
                            }
                            seq = Some(OpenSeq {
                                key: id,
                                byte: at.byte,
                                line: line_no,
                                lines: 1,
                            });
                            self.parse_line(line, after, at, batch, sink)?;
                        }
                    }
                }
            }
            pos = nl.map_or(buf.len(), |i| pos + i + 1);
            line_no += 1;
            // The sequence this line belongs to, through this line: at most a record.
            let start = match (mode, &seq) {
                (KeyMode::Ids, Some(s)) => s.byte,
                _ => at.byte,
            };
            if base + pos as u64 - start > self.opts.limits.max_record_bytes {
                let e = self.opts.limits.sequence_too_long(start);
                let e = e.resolve_in(buf, base, base_line);
                return Err(match &self.file {
                    Some(f) => e.in_file(f.clone()),
                    None => e,
                });
            }
        }
        if let Some(s) = seq {
            self.end_sequence(mode, s, batch, sink)?;
        }
        Ok(line_no - base_line)
    }

    fn end_sequence<T: Element>(
        &mut self,
        mode: KeyMode,
        s: OpenSeq,
        batch: &mut SequenceBatch<T>,
        sink: &mut dyn DiagnosticSink,
    ) -> Result<()> {
        let at = LineAt {
            byte: s.byte,
            line: s.line,
        };
        // Only formatted for a message (this runs once per sequence).
        let what = || match mode {
            KeyMode::Ids => format!("sequence {}", s.key),
            KeyMode::Lines if self.keys_by_offset => format!("the line at byte {}", s.byte),
            KeyMode::Lines => format!("line {}", s.line),
        };
        if let Some(i) = batch
            .streams()
            .iter()
            .position(|st| st.open_sequence_samples() == 0)
        {
            batch.discard_sequence();
            return self.tolerate(
                sink,
                ErrorKind::Invalid,
                at,
                0,
                Some(i),
                format!(
                    "{} has no sample of this input (every configured input needs one)",
                    what()
                ),
            );
        }
        let longest = batch
            .streams()
            .iter()
            .map(|st| st.open_sequence_samples())
            .max()
            .unwrap_or(0) as u64;
        if longest < s.lines {
            // CNTK counts this as an error but keeps the sequence.
            self.tolerate(
                sink,
                ErrorKind::Invalid,
                at,
                0,
                None,
                format!(
                    "{} spans {} lines but its longest input has {longest} samples",
                    what(),
                    s.lines
                ),
            )?;
        }
        batch.finish_sequence(s.key);
        Ok(())
    }

    /// Parses the samples of one line (without its newline) from `from`. Returns whether any
    /// sample was taken.
    fn parse_line<T: Element>(
        &mut self,
        line: &[u8],
        from: usize,
        at: LineAt,
        batch: &mut SequenceBatch<T>,
        sink: &mut dyn DiagnosticSink,
    ) -> Result<bool> {
        self.on_line.iter_mut().for_each(|b| *b = false);
        let n = line.len();
        let mut i = from;
        let mut any = false;
        loop {
            while i < n && is_blank(line[i]) {
                i += 1;
            }
            if i >= n {
                break;
            }
            if line[i] != b'|' {
                self.tolerate(
                    sink,
                    ErrorKind::Syntax,
                    at,
                    i,
                    None,
                    format!(
                        "expected '|' and an input name, found '{}'",
                        shown(&line[i..])
                    ),
                )?;
                i = next_bar(line, i);
                continue;
            }
            i += 1;
            if i < n && line[i] == b'#' {
                // A comment runs to the next '|' that is not the escape "|#".
                i += 1;
                loop {
                    i = next_bar(line, i);
                    if i + 1 < n && line[i + 1] == b'#' {
                        i += 2;
                    } else {
                        break;
                    }
                }
                continue;
            }
            let name_start = i;
            while i < n && line[i] > b' ' && line[i] != b'|' && line[i] != 0x7f {
                i += 1;
            }
            if i == name_start {
                self.tolerate(
                    sink,
                    ErrorKind::Syntax,
                    at,
                    i,
                    None,
                    format!(
                        "'|' must be followed by an input name, found {}",
                        shown_char(line, i)
                    ),
                )?;
                i = next_bar(line, i);
                continue;
            }
            let Some(idx) = self.lookup(&line[name_start..i]) else {
                let name = String::from_utf8_lossy(&line[name_start..i]).into_owned();
                self.note(
                    sink,
                    Severity::Info,
                    at,
                    name_start,
                    None,
                    format!("skipping unknown input '{name}'"),
                );
                i = next_bar(line, i);
                continue;
            };
            if self.on_line[idx] {
                self.tolerate(
                    sink,
                    ErrorKind::Invalid,
                    at,
                    name_start,
                    Some(idx),
                    "appears twice on one line (one sample per input per line)".into(),
                )?;
                i = next_bar(line, i);
                continue;
            }
            let r = match self.opts.inputs[idx].storage {
                Storage::Dense => self.dense(line, i, name_start, at, idx, batch, sink),
                Storage::Sparse => self.sparse(line, i, at, idx, batch),
            };
            match r {
                Ok(next) => {
                    any = true;
                    self.on_line[idx] = true;
                    i = next;
                }
                Err((e, resume)) => {
                    batch.stream_mut(idx).discard_open_sample();
                    self.budget.tolerate(e, sink)?;
                    i = next_bar(line, resume);
                }
            }
        }
        if !any {
            let message = if is_blank_line(&line[from.min(n)..]) {
                "line has no samples"
            } else {
                "line has no valid sample of a configured input"
            };
            self.note(sink, Severity::Warning, at, from, None, message.into());
        }
        Ok(any)
    }

    fn bad_number<T: Element>(
        &self,
        line: &[u8],
        start: usize,
        bad: BadNumber,
        at: LineAt,
        idx: usize,
    ) -> (Error, usize) {
        let at_char = bad.at;
        if bad.out_of_range {
            let e = self.error(
                ErrorKind::Invalid,
                at,
                start,
                Some(idx),
                format!(
                    "number '{}' is out of range for precision {}",
                    shown(&line[start..]),
                    T::PRECISION
                ),
            );
            return (e, at_char);
        }
        let e = self.error(
            ErrorKind::Syntax,
            at,
            start,
            Some(idx),
            format!(
                "malformed number '{}': unexpected {} (expected [+-]digits[.digits][e[+-]digits])",
                shown(&line[start..]),
                shown_char(line, at_char)
            ),
        );
        (e, at_char)
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn dense<T: Element>(
        &self,
        line: &[u8],
        i: usize,
        name_start: usize,
        at: LineAt,
        idx: usize,
        batch: &mut SequenceBatch<T>,
        sink: &mut dyn DiagnosticSink,
    ) -> SampleResult {
        let dim = self.opts.inputs[idx].dim;
        let stream = batch.stream_mut(idx);
        let (count, i) = match dense_values(line, i, dim, stream, self.blocks) {
            Ok(done) => done,
            Err((bad, at_value)) => return Err(self.bad_number::<T>(line, at_value, bad, at, idx)),
        };
        if count > dim {
            let e = self.error(
                ErrorKind::Invalid,
                at,
                name_start,
                Some(idx),
                format!("has {count} dense values, dim is {dim}"),
            );
            return Err((e, i));
        }
        stream.end_dense_sample();
        if count < dim {
            self.note(
                sink,
                Severity::Warning,
                at,
                name_start,
                Some(idx),
                format!("has {count} dense values, dim is {dim}; padded with zeros"),
            );
        }
        Ok(i)
    }

    #[inline]
    fn sparse<T: Element>(
        &self,
        line: &[u8],
        mut i: usize,
        at: LineAt,
        idx: usize,
        batch: &mut SequenceBatch<T>,
    ) -> SampleResult {
        let dim = self.opts.inputs[idx].dim as u64;
        let stream = batch.stream_mut(idx);
        let n = line.len();
        loop {
            while i < n && is_blank(line[i]) {
                i += 1;
            }
            if i >= n || line[i] == b'|' {
                break;
            }
            let start = i;
            let mut index: u64 = 0;
            while i < n && line[i].is_ascii_digit() {
                index = index
                    .saturating_mul(10)
                    .saturating_add((line[i] - b'0') as u64);
                i += 1;
            }
            if i == start {
                let e = self.error(
                    ErrorKind::Syntax,
                    at,
                    start,
                    Some(idx),
                    format!(
                        "expected a sparse index:value pair, found '{}'",
                        shown(&line[start..])
                    ),
                );
                return Err((e, i));
            }
            if i >= n || line[i] != b':' {
                let e = self.error(
                    ErrorKind::Syntax,
                    at,
                    i,
                    Some(idx),
                    format!(
                        "expected ':' after sparse index {index}, found {}",
                        shown_char(line, i)
                    ),
                );
                return Err((e, i));
            }
            i += 1;
            let (v, end) = parse_number::<T>(line, i)
                .map_err(|bad| self.bad_number::<T>(line, i, bad, at, idx))?;
            if index >= dim || index > u32::MAX as u64 {
                let e = self.error(
                    ErrorKind::Invalid,
                    at,
                    start,
                    Some(idx),
                    format!("sparse index {index} is out of range, dim is {dim}"),
                );
                return Err((e, end));
            }
            stream.push_sparse_value(index as u32, v);
            i = end;
        }
        stream.end_sparse_sample();
        Ok(i)
    }
}

/// Feeds a CTF file to a parser piece by piece (as it arrives from a pipe or a decompressor),
/// parsing each sequence as soon as it is known to be complete. The result is the same however
/// the bytes are split. Holds at most one sequence (and a partial line) in memory.
#[derive(Debug, Clone)]
pub struct CtfStream {
    parser: CtfParser,
    /// The bytes not parsed yet are `buf[..pending]`; the rest of `buf` is room for the next
    /// read (kept between reads: neither cleared nor moved).
    buf: Vec<u8>,
    pending: usize,
    base: u64,
    base_line: u64,
    mode: Option<KeyMode>,
}

/// The values of one dense sample, from `i` to the next `|` or the line end, pushed onto
/// `stream` (the first `dim` of them): the count of values and where they end, or what did not
/// parse and where. A function of its own so that its loop, the hottest of the parser, is
/// compiled apart from the error paths around it (inlined into `dense`, the loop's position
/// lived on the stack: about 20% more CPU on pixel data).
#[inline(never)]
fn dense_values<T: Element>(
    line: &[u8],
    mut i: usize,
    dim: usize,
    stream: &mut StreamData<T>,
    blocks: bool,
) -> std::result::Result<(usize, usize), (BadNumber, usize)> {
    let n = line.len();
    let mut count = 0usize;
    // Numbers to read one at a time before reading blocks of integers again: many after a
    // block read that took none (decimals, `1e-5`: not slowed down), some after one that took
    // few, none after one that took many.
    let mut alone = 0u32;
    loop {
        if blocks && alone == 0 {
            let before = count;
            i = super::blocks::dense_blocks(line, i, dim, &mut count, stream);
            alone = match count - before {
                0 => 64,
                1..8 => 8,
                _ => 0,
            };
        } else {
            alone = alone.saturating_sub(1);
        }
        while i < n && is_blank(line[i]) {
            i += 1;
        }
        if i >= n || line[i] == b'|' {
            break;
        }
        // Small unsigned integers followed by a space (pixel data) skip the general path.
        let mut m = line[i].wrapping_sub(b'0') as u32;
        if m <= 9 {
            let mut j = i + 1;
            while j < n && j - i < 7 {
                let d = line[j].wrapping_sub(b'0') as u32;
                if d > 9 {
                    break;
                }
                m = m * 10 + d;
                j += 1;
            }
            if j == n || line[j] == b' ' {
                if count < dim {
                    stream.push_dense_value(T::from_f32(m as f32));
                }
                count += 1;
                i = j;
                continue;
            }
            // So do `D+.DDDDDD ` (printed floats).
            if let Some(v) = six_decimals::<T>(line, j, m as u64, false) {
                if count < dim {
                    stream.push_dense_value(v);
                }
                count += 1;
                i = j + 8;
                continue;
            }
        } else if m == (b'-'.wrapping_sub(b'0')) as u32 {
            // And `-D+.DDDDDD `.
            let mut j = i + 1;
            let mut m = 0u32;
            while j < n && j - i < 8 {
                let d = line[j].wrapping_sub(b'0') as u32;
                if d > 9 {
                    break;
                }
                m = m * 10 + d;
                j += 1;
            }
            if j > i + 1 {
                if let Some(v) = six_decimals::<T>(line, j, m as u64, true) {
                    if count < dim {
                        stream.push_dense_value(v);
                    }
                    count += 1;
                    i = j + 8;
                    continue;
                }
            }
        }
        match parse_number::<T>(line, i) {
            Ok((v, end)) => {
                if count < dim {
                    stream.push_dense_value(v);
                }
                count += 1;
                i = end;
            }
            Err(bad) => return Err((bad, i)),
        }
    }
    Ok((count, i))
}

impl CtfStream {
    /// A stream over a fresh parser.
    pub fn new(parser: CtfParser) -> Self {
        CtfStream {
            parser,
            buf: Vec::new(),
            pending: 0,
            base: 0,
            base_line: 1,
            mode: None,
        }
    }

    /// The parser (for its error count).
    pub fn parser(&self) -> &CtfParser {
        &self.parser
    }

    /// Takes the next bytes; appends every sequence now complete to `batch`.
    pub fn feed<T: Element>(
        &mut self,
        bytes: &[u8],
        batch: &mut SequenceBatch<T>,
        sink: &mut dyn DiagnosticSink,
    ) -> Result<()> {
        let old = self.pending;
        self.make_room(bytes.len());
        self.buf[old..old + bytes.len()].copy_from_slice(bytes);
        self.took(old, bytes.len(), batch, sink)
    }

    /// Reads the next bytes from `reader` (one read of up to `READ_SIZE` bytes) into the stream's
    /// own buffer and does what [`feed`](Self::feed) does with them. At the end of the input
    /// (a read of none), does what [`finish`](Self::finish) does and returns `false`.
    pub fn feed_from<T: Element>(
        &mut self,
        reader: &mut dyn std::io::Read,
        batch: &mut SequenceBatch<T>,
        sink: &mut dyn DiagnosticSink,
    ) -> Result<bool> {
        let old = self.pending;
        self.make_room(READ_SIZE);
        let n = loop {
            match reader.read(&mut self.buf[old..old + READ_SIZE]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let e = Error::from(e);
                    return Err(match &self.parser.file {
                        Some(f) => e.in_file(f.clone()),
                        None => e,
                    });
                }
            }
        };
        if n == 0 {
            self.finish(batch, sink)?;
            return Ok(false);
        }
        self.took(old, n, batch, sink)?;
        Ok(true)
    }

    /// Room for `n` more bytes after the pending ones.
    fn make_room(&mut self, n: usize) {
        if self.buf.len() - self.pending < n {
            self.buf.resize(self.pending + n, 0);
        }
    }

    /// The bytes pending, `buf[old..old + n]` new among them: appends every sequence now
    /// complete to `batch`.
    fn took<T: Element>(
        &mut self,
        old: usize,
        n: usize,
        batch: &mut SequenceBatch<T>,
        sink: &mut dyn DiagnosticSink,
    ) -> Result<()> {
        self.pending = old + n;
        let bytes = &self.buf[old..old + n];
        if let Some(k) = memchr::memchr(0, bytes) {
            // A NUL cannot be part of CTF text: fail at it rather than buffer what follows (a
            // zero-filled device or a decompression bomb would otherwise be held as one line).
            // The input reads as if it ended at the start of the NUL's line, then fails at the
            // NUL: the same result however the bytes were split into feeds.
            let nul = old + k;
            let err = Error::syntax(self.base + nul as u64, "found a NUL byte: CTF is text");
            let err = self.fatal(err);
            // The key mode from everything before the NUL, as a split feed would have seen it.
            if self.mode.is_none() {
                let skip_ids = self.parser.opts.skip_sequence_ids;
                self.mode = detect_key_mode(&self.buf[..nul], skip_ids);
            }
            let line_start = memchr::memrchr(b'\n', &self.buf[..nul]).map_or(0, |i| i + 1);
            self.pending = line_start;
            if self.mode.is_some() {
                self.finish(batch, sink)?;
            }
            return Err(err);
        }
        if memchr::memchr(b'\n', bytes).is_some() {
            self.parse_complete(batch, sink)?;
        }
        let limits = self.parser.opts.limits;
        if self.pending as u64 > limits.max_record_bytes {
            return Err(self.fatal(limits.sequence_too_long(self.base)));
        }
        Ok(())
    }

    /// `e`, at a byte of the pending bytes, with its line, column and file.
    fn fatal(&self, e: Error) -> Error {
        let mut e = e.resolve_in(&self.buf[..self.pending], self.base, self.base_line);
        if let Some(f) = &self.parser.file {
            e = e.in_file(f.clone());
        }
        e
    }

    /// Parses the complete sequences at the start of the pending bytes.
    fn parse_complete<T: Element>(
        &mut self,
        batch: &mut SequenceBatch<T>,
        sink: &mut dyn DiagnosticSink,
    ) -> Result<()> {
        let pending = &self.buf[..self.pending];
        let mode = match self.mode {
            Some(m) => m,
            None => {
                if pending.len() < BOM.len() && BOM.starts_with(pending) {
                    return Ok(());
                }
                match detect_key_mode(pending, self.parser.opts.skip_sequence_ids) {
                    Some(m) => *self.mode.insert(m),
                    None => return Ok(()),
                }
            }
        };
        let complete = memchr::memrchr(b'\n', pending).map_or(0, |i| i + 1);
        let boundary = match mode {
            KeyMode::Lines => complete,
            KeyMode::Ids => {
                let mut last = None;
                // A bad id stops the scan; the sequences before it are parsed now and the
                // error itself comes from parsing, at the same point as for the whole file.
                let _ =
                    scan_sequences(&pending[..complete], self.base, self.base_line, mode, |e| {
                        last = Some(e.offset);
                        Ok(())
                    });
                last.map_or(0, |o| (o - self.base) as usize)
            }
        };
        if boundary > 0 {
            let chunk = &pending[..boundary];
            let lines =
                self.parser
                    .parse_chunk(chunk, self.base, self.base_line, mode, batch, sink)?;
            self.base_line += lines;
            self.base += boundary as u64;
            self.buf.copy_within(boundary..self.pending, 0);
            self.pending -= boundary;
        }
        Ok(())
    }

    /// Parses what is left (a last line without a newline is fine). Fails on an empty file.
    pub fn finish<T: Element>(
        &mut self,
        batch: &mut SequenceBatch<T>,
        sink: &mut dyn DiagnosticSink,
    ) -> Result<()> {
        let mode = match self.mode {
            Some(m) => m,
            None => detect_key_mode(
                &self.buf[..self.pending],
                self.parser.opts.skip_sequence_ids,
            )
            .ok_or_else(|| self.parser.empty_file())?,
        };
        self.mode = Some(mode);
        let pending = &self.buf[..std::mem::take(&mut self.pending)];
        self.parser
            .parse_chunk(pending, self.base, self.base_line, mode, batch, sink)?;
        self.base += pending.len() as u64;
        Ok(())
    }
}
