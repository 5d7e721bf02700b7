//! The `.ex` parser: a byte slice in, the set (or the first error, positioned) out.

use crate::error::{Error, Result};
use crate::lens::model::*;
use crate::number;

use super::{dense, runs};

/// Parses a whole `.ex` text into a set (see [`crate::lens::parse`] for either form).
pub fn parse(bytes: &[u8]) -> Result<ExampleSet> {
    let mut spare = Spare::default();
    let mut p = Parser::new(bytes, &mut spare);
    p.parse_set().map_err(|e| e.resolve_in(bytes, 0, 1))
}

/// [`parse`] reading dense values one at a time only: the reference the vector reading of
/// [`dense`] is tested against.
#[cfg(test)]
pub(super) fn parse_one_at_a_time(bytes: &[u8]) -> Result<ExampleSet> {
    let mut spare = Spare::default();
    let mut p = Parser::new(bytes, &mut spare);
    p.vectors = false;
    p.parse_set().map_err(|e| e.resolve_in(bytes, 0, 1))
}

/// Whether an error from the prefix parsers means "the text at hand ends too soon".
pub(crate) fn is_incomplete(e: &Error) -> bool {
    e.is_eof()
}

/// Streaming: the set header at the start of `buf`, the bytes it takes, and whether it ran
/// to the end of `buf` (then more text may still belong to it).
pub(crate) fn parse_header_prefix(buf: &[u8]) -> Result<(SetHeader, usize, bool)> {
    let mut spare = Spare::default();
    let mut p = Parser::new(buf, &mut spare);
    let h = p.parse_header()?;
    let used = p.pos;
    let at_end = p.tok()? == Tok::Eof;
    Ok((h, used, at_end))
}

/// Indexing a whole buffer: example `index`, starting at or after byte `pos` of `buf` (the
/// whole file, so that comment lines and error positions are judged as in [`parse`], and errors
/// read the same), and the byte where it ends; `Ok(None)` when only whitespace and comments
/// are left. The example's events must fit in `max_record_bytes` of memory; its allocations
/// come from `spare` where it has them.
///
/// With `skim`, the numbers of the ranges are passed over, unchecked, so the example comes
/// with its ranges (and their groups) but without their values (dense values and sparse unit
/// lists empty); its name, frequency, events and end are as parsed. Where the full parse
/// succeeds the skim ends at the same byte; where the skim fails, the full parse gives the
/// error (or, should it succeed, the example); a bad number may skim without error (the full
/// parse of that example then reports it). For finding where examples end and how many events
/// they have without converting their numbers or storing them.
pub(crate) fn parse_example_at(
    buf: &[u8],
    pos: usize,
    index: usize,
    h: &SetHeader,
    max_record_bytes: u64,
    spare: &mut Spare,
    skim: bool,
) -> Result<Option<(Example, usize)>> {
    let mut p = Parser::new(buf, spare);
    p.max_record_bytes = max_record_bytes;
    p.pos = pos.min(buf.len());
    p.skim = skim;
    let got = match p.tok() {
        Ok(Tok::Eof) => Ok(None),
        Ok(_) => p
            .parse_example(h)
            .map(|ex| Some((ex, p.pos)))
            .map_err(|e| e.in_context(format!("example {index}"))),
        Err(e) => Err(e),
    };
    match got {
        Err(_) if skim => parse_example_at(buf, pos, index, h, max_record_bytes, spare, false),
        got => got,
    }
}

/// The start of a number at `b[pos..]`: `-?digits(.digits)?` or `-?.digits`
/// (possibly no digits at all), read by the digit loop the CTF parser uses.
#[inline(always)]
fn mantissa(b: &[u8], pos: usize) -> Mantissa {
    let neg = b.get(pos) == Some(&b'-');
    let d0 = pos + neg as usize;
    let mut m = Mantissa {
        neg,
        mantissa: 0,
        digits: 0,
        exp10: 0,
        dot: false,
        end: 0,
    };
    let mut i = number::digits(b, d0, &mut m.mantissa);
    m.digits = i - d0;
    if b.get(i) == Some(&b'.') {
        m.dot = true;
        let f0 = i + 1;
        i = number::digits(b, f0, &mut m.mantissa);
        m.digits += i - f0;
        m.exp10 = -((i - f0) as i64);
    }
    m.end = i;
    m
}

/// The number at `b[pos..]` when it has the common form `-?digits(.digits)?` or
/// `-?.digits`, at most 19 digits, is followed by a delimiter and is exact in one
/// floating-point operation (see [`number::fast`], as in the CTF parser): its value and
/// end. Anything else (a lone `-`, an exponent, a long mantissa, an error) is left to
/// [`Parser::lex_number`], which gives the same value where both apply.
#[inline(always)]
fn fast_number(b: &[u8], pos: usize) -> Option<(f32, usize)> {
    let neg = b.get(pos) == Some(&b'-');
    // Most often `D+.D*` in a few bytes, read at once. (An exponent is left to the general
    // lexer by the delimiter check: `e` and `E` are no delimiters.)
    if let Some((mantissa, fraction, end)) = number::short_decimal(b, pos + neg as usize) {
        if !delim_at(b, end) {
            return None;
        }
        return Some((number::short_f32(mantissa, fraction, neg), end));
    }
    let m = mantissa(b, pos);
    if m.digits == 0 || m.digits > 19 || !delim_at(b, m.end) {
        return None;
    }
    number::fast::<f32>(m.mantissa, m.exp10, m.neg).map(|v| (v, m.end))
}

/// The start of a number as read by [`mantissa`].
struct Mantissa {
    neg: bool,
    /// The digits' value (wrapping past 19 digits).
    mantissa: u64,
    /// Digits before and after the `.`, leading zeros included.
    digits: usize,
    /// Minus the number of digits after the `.`.
    exp10: i64,
    dot: bool,
    /// Where the digits end.
    end: usize,
}

/// The events inputs or targets go to: the next one, or an event list's.
enum Events {
    One(usize),
    List(Vec<usize>),
}

impl Events {
    fn as_slice(&self) -> &[usize] {
        match self {
            Events::One(e) => std::slice::from_ref(e),
            Events::List(l) => l,
        }
    }
}

struct Parser<'a, 's> {
    buf: &'a [u8],
    pos: usize,
    /// Events named by event lists so far: `[*]` costs the example's event count, so a short
    /// file of `[]`s on a huge example could otherwise take quadratic time.
    work: usize,
    /// Events allocated so far (see [`event_budget`]).
    events_total: usize,
    /// One example's events must fit in this many bytes of memory (see [`max_events`]).
    max_record_bytes: u64,
    /// Where the example's allocations come from, and the buffers it is read through.
    spare: &'s mut Spare,
    /// Skimming (see [`parse_example_at`]): the numbers of ranges are passed over, not read.
    skim: bool,
    /// Whether runs of alike dense values are read with vector instructions where the CPU has
    /// them ([`dense::run`] checks); off in tests that compare against one at a time.
    vectors: bool,
}

impl<'a, 's> Parser<'a, 's> {
    fn new(buf: &'a [u8], spare: &'s mut Spare) -> Self {
        Parser {
            buf,
            pos: 0,
            work: 0,
            events_total: 0,
            max_record_bytes: crate::limits::Limits::default().max_record_bytes,
            spare,
            skim: false,
            vectors: true,
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Tok<'a> {
    Eof,
    Punct(u8),
    Key(&'a [u8]),
    Other,
}

#[inline(always)]
fn is_ws(c: u8) -> bool {
    CLASS[c as usize] & WS != 0
}

/// Whether position `i` is the end of the buffer or a delimiter.
#[inline(always)]
fn delim_at(b: &[u8], i: usize) -> bool {
    b.get(i).is_none_or(|&c| is_delim(c))
}

/// Characters that end a number or an unquoted string without whitespace.
#[inline(always)]
fn is_delim(c: u8) -> bool {
    CLASS[c as usize] & (WS | DELIM) != 0
}

/// [`CLASS`] bits: white space, and the other characters that end a number.
const WS: u8 = 1;
const DELIM: u8 = 2;

/// The class of each byte (one load instead of a chain of comparisons).
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let ws = b" \t\r\n\x0b\x0c";
    let mut i = 0;
    while i < ws.len() {
        t[ws[i] as usize] = WS;
        i += 1;
    }
    let delim = b";(){}[]\"*";
    let mut i = 0;
    while i < delim.len() {
        t[delim[i] as usize] = DELIM;
        i += 1;
    }
    t
};

const EVENT_FIELDS: &[&[u8]] = &[
    b"proc", b"max", b"min", b"grace", b"defI", b"actI", b"defT", b"actT",
];

impl<'a> Parser<'a, '_> {
    fn peek(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    fn at_line_start(&self, i: usize) -> bool {
        i == 0 || self.buf[i - 1] == b'\n'
    }

    /// Skips whitespace and comment lines (a `#` in the first column).
    #[inline]
    fn skip_ws(&mut self) -> Result<()> {
        // Most often one space, between numbers.
        while self.peek() == Some(b' ') {
            self.pos += 1;
        }
        while let Some(c) = self.peek() {
            if c == b'#' {
                if !self.at_line_start(self.pos) {
                    return Err(
                        self.unexpected("whitespace, or '#' only in the first column of a line")
                    );
                }
                self.skip_line();
            } else if is_ws(c) {
                self.pos += 1;
            } else {
                break;
            }
        }
        Ok(())
    }

    fn skip_line(&mut self) {
        match memchr::memchr(b'\n', &self.buf[self.pos..]) {
            Some(n) => self.pos += n + 1,
            None => self.pos = self.buf.len(),
        }
    }

    /// What is at the current position, for "found ..." in messages.
    fn found(&self) -> String {
        if self.pos >= self.buf.len() {
            return "end of file".into();
        }
        let rest = &self.buf[self.pos..];
        let end = rest
            .iter()
            .position(|&c| is_ws(c))
            .unwrap_or(rest.len())
            .clamp(1, 24);
        format!("'{}'", String::from_utf8_lossy(&rest[..end]))
    }

    fn unexpected(&self, expected: &str) -> Error {
        let message = format!("expected {expected}, found {}", self.found());
        if self.pos >= self.buf.len() {
            Error::eof(self.pos as u64, message)
        } else {
            Error::syntax(self.pos as u64, message)
        }
    }

    /// The token at the current position (after whitespace).
    fn tok(&mut self) -> Result<Tok<'a>> {
        self.skip_ws()?;
        let Some(c) = self.peek() else {
            return Ok(Tok::Eof);
        };
        if matches!(c, b';' | b'[' | b']' | b'(' | b')' | b'{' | b'}' | b'*') {
            return Ok(Tok::Punct(c));
        }
        let rest = &self.buf[self.pos..];
        let n = rest.iter().take_while(|c| c.is_ascii_alphabetic()).count();
        if n > 0 && rest.get(n) == Some(&b':') {
            return Ok(Tok::Key(&rest[..n]));
        }
        Ok(Tok::Other)
    }

    fn eat_key(&mut self, key: &[u8]) {
        self.pos += key.len() + 1;
    }

    /// Lexes a number at the current position: `9 .9 -9 -.9 1e5`, or a lone `-` (NaN).
    /// Returns the value, the end offset and whether it is an integer (no `.`, no exponent),
    /// or `None` when there is no number here. An `e` not followed by an exponent is not part
    /// of the number.
    fn lex_number(&self) -> Option<(f32, usize, bool)> {
        let b = self.buf;
        let start = self.pos;
        let mut m = mantissa(b, start);
        if m.digits == 0 {
            // A lone '-' is NaN.
            if m.end == start + 1 && m.neg && delim_at(b, m.end) {
                return Some((f32::NAN, m.end, false));
            }
            return None;
        }
        let mut integral = !m.dot;
        if matches!(b.get(m.end), Some(b'e' | b'E')) {
            if let Ok((e, end)) = number::exponent(b, m.end + 1) {
                integral = false;
                m.exp10 += e;
                m.end = end;
            }
        }
        let v = number::value::<f32>(&b[start..m.end], m.mantissa, m.digits, m.exp10, m.neg)?;
        Some((v, m.end, integral))
    }

    /// [`fast_number`] at the current position.
    #[inline(always)]
    fn fast_number(&self) -> Option<(f32, usize)> {
        fast_number(self.buf, self.pos)
    }

    /// A real number (or `-`) followed by a delimiter.
    fn real(&mut self, what: &str) -> Result<f32> {
        self.skip_ws()?;
        match self.lex_number() {
            Some((v, end, _)) if delim_at(self.buf, end) => {
                self.pos = end;
                Ok(v)
            }
            _ => Err(self.unexpected(what)),
        }
    }

    /// A number if one is next (not consumed otherwise), as Lens's isNumber decides inside
    /// ranges: a lone '-' (NaN) only before white space, the end, '}', ')' or ';'. Glued to
    /// anything else (`-(g)`, `-{`, `-[`, `-"`, `-*`) it is no number, and what follows is
    /// unexpected. (A field value such as `max:-]` is read as Lens's readReal reads it.)
    fn try_real(&mut self) -> Result<Option<f32>> {
        self.skip_ws()?;
        if let Some((v, end)) = self.fast_number() {
            self.pos = end;
            return Ok(Some(v));
        }
        let b = self.buf;
        let lone_dash = b.get(self.pos) == Some(&b'-')
            && b.get(self.pos + 1)
                .is_some_and(|&c| !(c.is_ascii_digit() || c == b'.'));
        if lone_dash
            && !b
                .get(self.pos + 1)
                .is_some_and(|&c| is_ws(c) || matches!(c, b'}' | b')' | b';'))
        {
            return Ok(None);
        }
        match self.lex_number() {
            Some((v, end, _)) if delim_at(self.buf, end) => {
                self.pos = end;
                Ok(Some(v))
            }
            Some(_) => Err(self.unexpected("a number")),
            None => Ok(None),
        }
    }

    /// An integer if one is next (not consumed otherwise).
    fn try_int(&mut self) -> Result<Option<i64>> {
        self.skip_ws()?;
        match self.lex_number() {
            Some((v, end, true)) if v.is_finite() && delim_at(self.buf, end) => {
                let text = std::str::from_utf8(&self.buf[self.pos..end]).unwrap_or("");
                match text.parse::<i64>() {
                    Ok(n) if n.unsigned_abs() <= i32::MAX as u64 => {
                        self.pos = end;
                        Ok(Some(n))
                    }
                    _ => Err(Error::invalid(
                        self.pos as u64,
                        format!("integer {text} out of range"),
                    )),
                }
            }
            _ => Ok(None),
        }
    }

    /// A string: a `{}`/`()`/`[]`/`""` block (delimiters dropped, nesting kept) or a run of
    /// characters up to whitespace or one of `{}()[]"`.
    fn string(&mut self, what: &str) -> Result<String> {
        let mut s = String::new();
        self.string_into(what, &mut s)?;
        Ok(s)
    }

    /// [`Parser::string`] into `out` (replacing what it held).
    fn string_into(&mut self, what: &str, out: &mut String) -> Result<()> {
        self.skip_ws()?;
        let Some(c) = self.peek() else {
            return Err(self.unexpected(what));
        };
        let buf = self.buf;
        let mut block = std::mem::take(&mut self.spare.scratch.block);
        block.clear();
        let bytes = if matches!(c, b'{' | b'(' | b'[' | b'"') {
            let read = self.block(&mut block);
            if let Err(e) = read {
                self.spare.scratch.block = block;
                return Err(e);
            }
            &block[..]
        } else {
            let rest = &buf[self.pos..];
            let n = rest
                .iter()
                .position(|&c| {
                    is_ws(c) || matches!(c, b'{' | b'}' | b'(' | b')' | b'[' | b']' | b'"')
                })
                .unwrap_or(rest.len());
            if n == 0 {
                self.spare.scratch.block = block;
                return Err(self.unexpected(what));
            }
            self.pos += n;
            &rest[..n]
        };
        let got = if memchr::memchr(0, bytes).is_some() {
            Err(Error::syntax(
                self.pos as u64,
                format!("{what} contains a NUL byte"),
            ))
        } else {
            crate::lens::set_lossy(out, bytes);
            Ok(())
        };
        self.spare.scratch.block = block;
        got
    }

    /// A bracketed block at the current position, its content appended to `out`.
    fn block(&mut self, out: &mut Vec<u8>) -> Result<()> {
        let mut stack = std::mem::take(&mut self.spare.scratch.stack);
        stack.clear();
        let read = self.block_with(out, &mut stack);
        self.spare.scratch.stack = stack;
        read
    }

    /// [`Parser::block`] with `stack` (empty) for the closing delimiters awaited.
    fn block_with(&mut self, out: &mut Vec<u8>, stack: &mut Vec<u8>) -> Result<()> {
        let open_at = self.pos;
        let closer = |c: u8| match c {
            b'{' => b'}',
            b'(' => b')',
            b'[' => b']',
            _ => b'"',
        };
        stack.push(closer(self.buf[self.pos]));
        self.pos += 1;
        // A line break right after the opening delimiter is dropped, as Lens does.
        if self.buf[self.pos..].starts_with(b"\r\n") {
            self.pos += 2;
        } else if self.peek() == Some(b'\n') {
            self.pos += 1;
        }
        loop {
            let Some(c) = self.peek() else {
                return Err(Error::eof(
                    open_at as u64,
                    format!(
                        "'{}' is never closed (expected '{}', found end of file)",
                        self.buf[open_at] as char,
                        *stack.last().unwrap_or(&b'}') as char
                    ),
                ));
            };
            if c == b'#' && self.at_line_start(self.pos) {
                // Comment lines are dropped even inside blocks.
                self.skip_line();
                continue;
            }
            self.pos += 1;
            let top = *stack.last().unwrap_or(&b'"');
            if c == b'\\' {
                out.push(c);
                if let Some(n) = self.peek() {
                    out.push(n);
                    self.pos += 1;
                }
                continue;
            }
            if c == top {
                stack.pop();
                if stack.is_empty() {
                    return Ok(());
                }
            } else if matches!(c, b'{' | b'(' | b'[' | b'"') {
                stack.push(closer(c));
            } else if matches!(c, b'}' | b')' | b']') {
                return Err(Error::syntax(
                    (self.pos - 1) as u64,
                    format!(
                        "unbalanced block: expected '{}', found '{}'",
                        top as char, c as char
                    ),
                ));
            }
            if c == b'\r' && self.peek() == Some(b'\n') {
                continue;
            }
            out.push(c);
        }
    }

    fn parse_set(&mut self) -> Result<ExampleSet> {
        let mut set = ExampleSet {
            header: self.parse_header()?,
            examples: Vec::new(),
        };
        loop {
            if self.tok()? == Tok::Eof {
                break;
            }
            let i = set.examples.len();
            let ex = self
                .parse_example(&set.header)
                .map_err(|e| e.in_context(format!("example {i}")))?;
            set.examples.push(ex);
        }
        Ok(set)
    }

    fn parse_header(&mut self) -> Result<SetHeader> {
        let mut h = SetHeader::default();
        // Obsolete `numInputs numTargets` counts: up to two integers, ignored.
        for _ in 0..2 {
            if self.try_int()?.is_none() {
                break;
            }
        }
        loop {
            match self.tok()? {
                Tok::Key(k) if EVENT_FIELDS.contains(&k) => {
                    self.eat_key(k);
                    match k {
                        b"proc" => h.proc = self.string("the set proc")?,
                        b"max" => h.max_time = self.real("a number after 'max:'")?,
                        b"min" => h.min_time = self.real("a number after 'min:'")?,
                        b"grace" => h.grace_time = self.real("a number after 'grace:'")?,
                        b"defI" => h.default_input = self.real("a number after 'defI:'")?,
                        b"actI" => h.active_input = self.real("a number after 'actI:'")?,
                        b"defT" => h.default_target = self.real("a number after 'defT:'")?,
                        _ => h.active_target = self.real("a number after 'actT:'")?,
                    }
                }
                Tok::Punct(b';') => {
                    self.pos += 1;
                    break;
                }
                _ => break,
            }
        }
        Ok(h)
    }

    fn parse_example(&mut self, h: &SetHeader) -> Result<Example> {
        let mut name = self.spare.name();
        let mut proc = String::new();
        let mut frequency = 1.0f32;
        let mut num_events = 1usize;
        loop {
            match self.tok()? {
                Tok::Key(k @ b"name") => {
                    self.eat_key(k);
                    self.string_into("the example name", &mut name)?;
                }
                Tok::Key(k @ b"proc") => {
                    self.eat_key(k);
                    proc = self.string("the example proc")?;
                }
                Tok::Key(k @ b"freq") => {
                    self.eat_key(k);
                    frequency = self.real("a number after 'freq:'")?;
                }
                Tok::Other => {
                    let at = self.pos;
                    match self.try_int()? {
                        Some(n) if n >= 1 => num_events = n as usize,
                        Some(n) => {
                            return Err(Error::invalid(
                                at as u64,
                                format!("expected a positive number of events, found {n}"),
                            ))
                        }
                        None => break,
                    }
                }
                _ => break,
            }
        }
        // Events are cheap but not free: bound them by the record size and the file size so a
        // typo cannot allocate gigabytes.
        if num_events > max_events(self.max_record_bytes) {
            return Err(too_many_events(self.pos, num_events, self.max_record_bytes));
        }
        // In all, bounded by the file's size. Not one example on its own: .bex event lists
        // declare many events in few bytes, and what a .bex holds must read back from the
        // text written for it (the lens fuzz target found 196,608 events refused there).
        self.events_total += num_events;
        if self.events_total > event_budget(self.buf.len()) {
            return Err(Error::invalid(
                self.pos as u64,
                format!("implausible number of events {num_events}"),
            ));
        }
        let mut ex = Example {
            name,
            proc,
            frequency,
            events: self.spare.events(h, num_events),
            lists: self.spare.lists(),
        };
        let mut pending_in: Option<Vec<usize>> = None;
        let mut pending_t: Option<Vec<usize>> = None;
        // One past the highest event with inputs, with targets.
        let mut next = (0usize, 0usize);
        loop {
            let at = self.pos;
            match self.tok()? {
                Tok::Punct(b';') => {
                    self.pos += 1;
                    return Ok(ex);
                }
                Tok::Punct(b'[') => {
                    self.pos += 1;
                    let list = self.event_list(&mut ex)?;
                    pending_in = Some(list.clone());
                    pending_t = Some(list);
                }
                Tok::Key(k @ (b"I" | b"i" | b"T" | b"t" | b"B" | b"b")) => {
                    let key_at = self.pos;
                    self.eat_key(k);
                    let sparse = k[0].is_ascii_lowercase();
                    let (inputs, targets) = match k[0].to_ascii_uppercase() {
                        b'I' => (true, false),
                        b'T' => (false, true),
                        _ => (true, true),
                    };
                    let ev_in = if inputs {
                        Some(self.targets_of(&ex, pending_in.take(), false, key_at, next)?)
                    } else {
                        None
                    };
                    let ev_t = if targets {
                        Some(self.targets_of(&ex, pending_t.take(), true, key_at, next)?)
                    } else {
                        None
                    };
                    let first = ev_in
                        .as_ref()
                        .or(ev_t.as_ref())
                        .and_then(|l| l.as_slice().first().copied())
                        .unwrap_or(0);
                    let act = if inputs {
                        ex.events[first].active_input
                    } else {
                        ex.events[first].active_target
                    };
                    let (ranges, implicit) = self.ranges(sparse, act)?;
                    if ranges.is_empty() {
                        // Nothing given: the events keep no inputs (targets), but as in Lens
                        // the set still counts as theirs, so the next set goes to the next event.
                        for &e in ev_in.iter().flat_map(Events::as_slice) {
                            next.0 = next.0.max(e + 1);
                        }
                        for &e in ev_t.iter().flat_map(Events::as_slice) {
                            next.1 = next.1.max(e + 1);
                        }
                        continue;
                    }
                    let id = ex.lists.len();
                    ex.lists.push(ranges);
                    if let Some(evs) = &ev_in {
                        for &e in evs.as_slice() {
                            ex.events[e].input = Some(id);
                            next.0 = next.0.max(e + 1);
                        }
                    }
                    if let Some(evs) = &ev_t {
                        // B:/b: share one list unless a value taken from actI would differ
                        // from the targets' actT.
                        let act_t =
                            ex.events[evs.as_slice().first().copied().unwrap_or(0)].active_target;
                        let tid = if inputs && implicit && !same(act, act_t) {
                            let mut copy = ex.lists[id].clone();
                            for r in &mut copy {
                                if let RangeKind::Sparse { value, .. } = &mut r.kind {
                                    if same(*value, act) {
                                        *value = act_t;
                                    }
                                }
                            }
                            ex.lists.push(copy);
                            ex.lists.len() - 1
                        } else {
                            id
                        };
                        for &e in evs.as_slice() {
                            ex.events[e].target = Some(tid);
                            next.1 = next.1.max(e + 1);
                        }
                    }
                }
                Tok::Eof => {
                    return Err(Error::eof(
                        at as u64,
                        "expected ';' at the end of the example, found end of file",
                    ));
                }
                _ => {
                    return Err(self.unexpected("'[', 'I:', 'i:', 'T:', 't:', 'B:', 'b:' or ';'"));
                }
            }
        }
    }

    /// The events the next inputs (targets) go to: the pending event list, or the event after
    /// the highest one that already has inputs (targets).
    fn targets_of(
        &self,
        ex: &Example,
        pending: Option<Vec<usize>>,
        target: bool,
        at: usize,
        next: (usize, usize),
    ) -> Result<Events> {
        let has = |e: &Event| {
            if target {
                e.target.is_some()
            } else {
                e.input.is_some()
            }
        };
        let what = if target { "targets" } else { "inputs" };
        let evs = match pending {
            Some(l) => Events::List(l),
            None => {
                let next = if target { next.1 } else { next.0 };
                if next >= ex.events.len() {
                    return Err(Error::invalid(
                        at as u64,
                        format!(
                            "{what} for event {next}, but the example has {} events",
                            ex.events.len()
                        ),
                    ));
                }
                Events::One(next)
            }
        };
        for &e in evs.as_slice() {
            if has(&ex.events[e]) {
                return Err(Error::invalid(
                    at as u64,
                    format!("event {e} already has {what}"),
                ));
            }
        }
        Ok(evs)
    }

    /// An event list after its `[`, applying its fields to its events.
    fn event_list(&mut self, ex: &mut Example) -> Result<Vec<usize>> {
        let n = ex.events.len();
        let mut all = false;
        let mut evs: Vec<usize> = Vec::new();
        loop {
            let at = self.pos;
            match self.tok()? {
                Tok::Punct(b'*') => {
                    self.pos += 1;
                    all = true;
                }
                Tok::Other if self.peek().is_some_and(|c| c.is_ascii_digit()) => {
                    let a = self.unit_number()? as i64;
                    if self.peek().is_some_and(|c| !is_delim(c) && c != b'-') {
                        return Err(self.unexpected("an event number"));
                    }
                    self.skip_ws()?;
                    let mut b = a;
                    if self.peek() == Some(b'-') {
                        self.pos += 1;
                        self.skip_ws()?;
                        if !self.peek().is_some_and(|c| c.is_ascii_digit()) {
                            return Err(self.unexpected("an event number after '-'"));
                        }
                        b = self.unit_number()? as i64;
                        if self.peek().is_some_and(|c| !is_delim(c)) {
                            return Err(self.unexpected("an event number"));
                        }
                    }
                    if a < 0 || b < a || b as usize >= n {
                        let bad = if a < 0 || a as usize >= n { a } else { b };
                        return Err(Error::invalid(
                            at as u64,
                            format!(
                                "event {bad} out of range (the example has events 0 to {})",
                                n - 1
                            ),
                        ));
                    }
                    evs.extend(a as usize..=b as usize);
                }
                _ => break,
            }
        }
        if all || evs.is_empty() {
            evs = (0..n).collect();
        }
        self.work += evs.len();
        if self.work > 64 * self.buf.len() + (1 << 24) {
            return Err(Error::invalid(
                self.pos as u64,
                "event lists name too many events in all (more than 64 per byte of input)",
            ));
        }
        evs.sort_unstable();
        evs.dedup();
        loop {
            match self.tok()? {
                Tok::Punct(b']') => {
                    self.pos += 1;
                    return Ok(evs);
                }
                Tok::Key(k) if EVENT_FIELDS.contains(&k) => {
                    self.eat_key(k);
                    if k == b"proc" {
                        let s = self.string("the event proc")?;
                        for &e in &evs {
                            ex.events[e].proc = s.clone();
                        }
                        continue;
                    }
                    let v = self.real("a number")?;
                    for &e in &evs {
                        let ev = &mut ex.events[e];
                        *match k {
                            b"max" => &mut ev.max_time,
                            b"min" => &mut ev.min_time,
                            b"grace" => &mut ev.grace_time,
                            b"defI" => &mut ev.default_input,
                            b"actI" => &mut ev.active_input,
                            b"defT" => &mut ev.default_target,
                            _ => &mut ev.active_target,
                        } = v;
                    }
                }
                _ => return Err(self.unexpected("an event number, '*', an event field (proc: max: min: grace: defI: actI: defT: actT:) or ']'")),
            }
        }
    }

    /// The ranges after `I:`/`T:`/...; `sparse` for the lowercase forms. Returns the ranges and
    /// whether a sparse range took `act` as its value.
    fn ranges(&mut self, sparse: bool, act: f32) -> Result<(RangeList, bool)> {
        let mut out = self.spare.ranges();
        let mut implicit = false;
        let mut first = true;
        loop {
            let t = self.tok()?;
            match t {
                Tok::Punct(b'(') => {
                    self.pos += 1;
                    let mut group = None;
                    let mut start = 0u32;
                    loop {
                        match self.tok()? {
                            Tok::Punct(b')') => {
                                self.pos += 1;
                                break;
                            }
                            Tok::Eof => return Err(self.unexpected("')'")),
                            _ => {
                                let at = self.pos;
                                if let Some(v) = self.try_int()? {
                                    if v < 0 {
                                        return Err(Error::invalid(
                                            at as u64,
                                            format!("negative first unit {v}"),
                                        ));
                                    }
                                    start = v as u32;
                                } else {
                                    group = Some(self.string("a group name or first unit")?);
                                }
                            }
                        }
                    }
                    let (values, _) = self.dense_values()?;
                    out.push(Range {
                        group,
                        kind: RangeKind::Dense {
                            first: start,
                            values,
                        },
                    });
                }
                Tok::Punct(b'{') => {
                    self.pos += 1;
                    let mut group = None;
                    let mut value = None;
                    loop {
                        match self.tok()? {
                            Tok::Punct(b'}') => {
                                self.pos += 1;
                                break;
                            }
                            Tok::Eof => return Err(self.unexpected("'}'")),
                            _ => {
                                if let Some(v) = self.try_real()? {
                                    value = Some(v);
                                } else {
                                    group = Some(self.string("a group name or value")?);
                                }
                            }
                        }
                    }
                    implicit |= value.is_none();
                    let (units, _) = self.sparse_units()?;
                    out.push(Range {
                        group,
                        kind: RangeKind::Sparse {
                            value: value.unwrap_or(act),
                            units,
                        },
                    });
                }
                _ if first => {
                    // An implicit first range with nothing in it is no range at all (Lens
                    // gives `i: t:0` no inputs).
                    if sparse {
                        let (units, any) = self.sparse_units()?;
                        if any {
                            implicit = true;
                            out.push(Range {
                                group: None,
                                kind: RangeKind::Sparse { value: act, units },
                            });
                        }
                    } else {
                        let (values, any) = self.dense_values()?;
                        if any {
                            out.push(Range {
                                group: None,
                                kind: RangeKind::Dense { first: 0, values },
                            });
                        }
                    }
                }
                _ => break,
            }
            first = false;
        }
        Ok((out, implicit))
    }

    /// The values of a dense range, and whether there were any (skimming: none kept).
    fn dense_values(&mut self) -> Result<(Vec<f32>, bool)> {
        if self.skim {
            return self
                .pass_over(|c| c.is_ascii_digit() || matches!(c, b'.' | b'-' | b'+' | b'e' | b'E'))
                .map(|any| (Vec::new(), any));
        }
        // Gathered in a buffer kept across ranges, then copied once at their exact size into
        // a spare vector (or a new one).
        let mut v = std::mem::take(&mut self.spare.scratch.values);
        v.clear();
        let b = self.buf;
        let got = loop {
            // The common case first: spaces, then a number of the common form, in a loop of
            // its own (the position in a register).
            let mut pos = self.pos;
            // Numbers to read one at a time before looking for a run of alike ones again (see
            // `dense::run`): more after each look that found none in a row (so that values
            // of many shapes, `0 0.5 0.25`, are not slowed down), none after one that found one.
            let mut alone = 0u32;
            loop {
                while b.get(pos) == Some(&b' ') {
                    pos += 1;
                }
                let Some((x, end)) = fast_number(b, pos) else {
                    break;
                };
                v.push(x);
                if self.vectors && alone == 0 && b.get(end) == Some(&b' ') {
                    let to = dense::run(b, pos, end, &mut v);
                    let misses = &mut self.spare.scratch.dense_misses;
                    if to == end {
                        *misses = (*misses + 1).min(6);
                        alone = 4 << *misses;
                    } else {
                        *misses = 0;
                    }
                    pos = to;
                } else {
                    alone = alone.saturating_sub(1);
                    pos = end;
                }
            }
            self.pos = pos;
            // Most often the next key (`t:`) or the `;`: no number, as try_real would find.
            let no_number = b
                .get(pos)
                .is_some_and(|&c| c.is_ascii_alphabetic() || c == b';');
            match if no_number { Ok(None) } else { self.try_real() } {
                Ok(Some(x)) => v.push(x),
                Ok(None) => {
                    let mut out = self.spare.values();
                    out.extend_from_slice(&v);
                    break Ok((out, !v.is_empty()));
                }
                Err(e) => break Err(e),
            }
        };
        self.spare.scratch.values = v;
        got
    }

    /// The units of a sparse range, and whether there were any (skimming: none kept).
    fn sparse_units(&mut self) -> Result<(SparseUnits, bool)> {
        if self.tok()? == Tok::Punct(b'*') {
            self.pos += 1;
            return Ok((SparseUnits::All, true));
        }
        if self.skim {
            return self
                .pass_over(|c| c.is_ascii_digit() || c == b'-')
                .map(|any| (SparseUnits::List(Vec::new()), any));
        }
        // Gathered in buffers kept across ranges (the entries and where each starts), then
        // copied once at their exact size into a spare vector (or a new one).
        let mut list = std::mem::take(&mut self.spare.scratch.units);
        let mut starts = std::mem::take(&mut self.spare.scratch.unit_starts);
        list.clear();
        starts.clear();
        let read = self.unit_list(&mut list, &mut starts);
        let got = read.and_then(|()| match check_unit_list(&list) {
            Err(i) => Err(Error::invalid(
                starts[i] as u64,
                format!("invalid sparse unit range (entry {})", list[i]),
            )),
            Ok(()) => {
                let mut out = self.spare.units();
                out.extend_from_slice(&list);
                Ok((SparseUnits::List(out), !list.is_empty()))
            }
        });
        self.spare.scratch.units = list;
        self.spare.scratch.unit_starts = starts;
        got
    }

    /// The entries of a sparse unit list, into `list`, and the byte where each starts.
    fn unit_list(&mut self, list: &mut Vec<i32>, starts: &mut Vec<usize>) -> Result<()> {
        let b = self.buf;
        // A unit of at most 9 digits (no range, no sign) followed by white space at `s`: its
        // value and end.
        let plain = |s: usize| {
            let mut unit = 0u64;
            let end = number::digits(b, s, &mut unit);
            if end == s || end - s > 9 || !b.get(end).is_some_and(|&c| is_ws(c)) {
                return Err(s);
            }
            Ok((unit as i32, end))
        };
        loop {
            // The common case first, plain units: the first few one at a time (a short list,
            // most often a few targets, costs less than a block's mask), then a block at a time.
            let mut pos = self.pos;
            let mut few = 0;
            while few < 8 {
                while b.get(pos).is_some_and(|&c| is_ws(c)) {
                    pos += 1;
                }
                let Ok((unit, end)) = plain(pos) else { break };
                list.push(unit);
                starts.push(pos);
                pos = end;
                few += 1;
            }
            if few == 8 {
                pos = runs::run(b, pos, |s| {
                    let (unit, end) = plain(s)?;
                    list.push(unit);
                    starts.push(s);
                    Ok(end)
                });
            }
            self.pos = pos;
            self.skip_ws()?;
            let at = self.pos;
            match self.peek() {
                Some(b'*') => {
                    return Err(self.unexpected(
                        "a unit number ('*' may only be the first thing in a sparse range)",
                    ))
                }
                Some(c) if c == b'-' || c.is_ascii_digit() => {}
                _ => return Ok(()),
            }
            let a = self.unit_number()?;
            list.push(a);
            starts.push(at);
            if a >= 0 && self.peek() == Some(b'-') {
                let at2 = self.pos;
                self.pos += 1;
                let b = self.unit_number()?;
                if b < 0 || b <= a {
                    return Err(Error::invalid(
                        at as u64,
                        format!("invalid sparse unit range {a}-{b}"),
                    ));
                }
                list.push(-b);
                starts.push(at2);
            }
            if self.peek().is_some_and(|c| !is_delim(c)) {
                return Err(self.unexpected("a sparse unit number"));
            }
        }
    }

    /// Skimming: passes over the runs of bytes `part` accepts (the characters of a range's
    /// numbers) and the white space and comments between them; whether there were any. The
    /// numbers are not checked: the full parse does that. On text the full parse accepts,
    /// this ends where its list of numbers ends (the next token starts with none of these
    /// characters), so an example skimmed ends where it ends when parsed.
    fn pass_over(&mut self, part: impl Fn(u8) -> bool) -> Result<bool> {
        let mut any = false;
        loop {
            self.skip_ws()?;
            let rest = &self.buf[self.pos..];
            let n = rest.iter().position(|&c| !part(c)).unwrap_or(rest.len());
            if n == 0 {
                return Ok(any);
            }
            self.pos += n;
            any = true;
        }
    }

    /// `-?digits`, stopping before a `-` that follows the digits.
    fn unit_number(&mut self) -> Result<i32> {
        let start = self.pos;
        let mut i = start;
        if self.buf.get(i) == Some(&b'-') {
            i += 1;
        }
        let d0 = i;
        let mut value = 0u64;
        i = number::digits(self.buf, d0, &mut value);
        if i == d0 {
            return Err(self.unexpected("a sparse unit number"));
        }
        // Past 10 digits (leading zeros allowed), saturating: anything past i32 is out of
        // range anyway.
        let magnitude = if i - d0 <= 10 {
            value as i64
        } else {
            self.buf[d0..i]
                .iter()
                .fold(0i64, |n, &c| (n * 10 + (c - b'0') as i64).min(1 << 40))
        };
        if magnitude > i32::MAX as i64 {
            let text = String::from_utf8_lossy(&self.buf[start..i]);
            return Err(Error::invalid(
                start as u64,
                format!("unit number {text} out of range"),
            ));
        }
        self.pos = i;
        Ok(if d0 > start { -magnitude } else { magnitude } as i32)
    }
}

#[cfg(test)]
mod number_tests {
    use super::*;

    /// The fast path gives exactly what the general lexer gives, wherever it answers.
    #[test]
    fn fast_numbers_equal_the_general_lexer() {
        let mut texts: Vec<String> = [
            "0",
            "-0",
            "1.",
            ".5",
            "-.5",
            "0.1",
            "-0.123",
            "16777216",
            "16777217",
            "0.0000000001",
            "123456.7",
            "1e5",
            "1.5e-3",
            "-",
            "-x",
            "1x",
            "12345678901234567890",
            "3.40282e38",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut rng = crate::number::XorShift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let x = rng.next();
            let digits = (x % 9) as usize;
            let v = (x >> 8) as f64 / (1u64 << 56) as f64 * 10f64.powi((x % 7) as i32);
            texts.push(format!("{}{v:.digits$}", if x & 1 == 1 { "-" } else { "" }));
        }
        let mut fast = 0;
        for t in &texts {
            let text = format!("{t} ");
            let mut spare = Spare::default();
            let p = Parser::new(text.as_bytes(), &mut spare);
            if let Some((v, end)) = p.fast_number() {
                fast += 1;
                let (w, wend, _) = p.lex_number().expect("the lexer reads it too");
                assert_eq!((v.to_bits(), end), (w.to_bits(), wend), "{t}");
            }
        }
        assert!(
            fast > texts.len() / 2,
            "the fast path answers for most ({fast})"
        );
        // Exponents go to the general lexer (`e` is no delimiter).
        for t in ["1e5 ", "-2.5E-3 ", "7.e1 "] {
            let mut spare = Spare::default();
            let p = Parser::new(t.as_bytes(), &mut spare);
            assert!(p.fast_number().is_none(), "{t}");
        }
    }
}
