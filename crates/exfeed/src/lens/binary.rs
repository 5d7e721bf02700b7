//! The big-endian binary `.bex` format (magic cookie `0xaaaaaaaa`, four-byte reals).
//!
//! The writer reproduces Lens's own `saveExamples -binary` byte for byte: event headers only for
//! events that differ from the set defaults, event lists as runs (`0 -2 4`), lists shared by
//! inputs and targets (`B:`) written once with the shared-targets flag. The reader trusts
//! nothing: every count is checked against the bytes left before anything is allocated.

use super::model::*;
use crate::error::{Error, Result};

use crate::format::LENS_BINARY_COOKIE;
use crate::limits::Limits;

/// Whether `bytes` start with the `.bex` cookie.
pub fn is_binary(bytes: &[u8]) -> bool {
    bytes.len() >= 4 && bytes[..4] == LENS_BINARY_COOKIE.to_be_bytes()
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Reading a prefix of a stream: a count larger than the bytes at hand means "read more",
    /// not "corrupt".
    streaming: bool,
    /// Events allocated so far, bounded by [`event_budget`] of the input size.
    events_total: usize,
    /// One example's events must fit in this many bytes of memory (see [`max_events`]).
    max_record_bytes: u64,
}

impl<'a> Cursor<'a> {
    fn new(buf: &'a [u8], streaming: bool, max_record_bytes: u64) -> Self {
        Cursor {
            buf,
            pos: 0,
            streaming,
            events_total: 0,
            max_record_bytes,
        }
    }
}

impl<'a> Cursor<'a> {
    #[inline]
    fn left(&self) -> usize {
        self.buf.len() - self.pos
    }
    #[inline]
    fn need(&self, n: usize, what: &str) -> Result<()> {
        if self.left() < n {
            return Err(self.ends_inside(n, what));
        }
        Ok(())
    }
    #[cold]
    fn ends_inside(&self, n: usize, what: &str) -> Error {
        Error::eof(
            self.pos as u64,
            format!(
                "file ends inside {what} ({} bytes needed, {} left)",
                n,
                self.left()
            ),
        )
    }
    #[inline]
    fn u32(&mut self, what: &str) -> Result<u32> {
        self.need(4, what)?;
        let b = &self.buf[self.pos..self.pos + 4];
        self.pos += 4;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    #[inline]
    fn i32(&mut self, what: &str) -> Result<i32> {
        Ok(self.u32(what)? as i32)
    }
    #[inline]
    fn real(&mut self, what: &str) -> Result<f32> {
        Ok(f32::from_bits(self.u32(what)?))
    }
    #[inline]
    fn byte(&mut self, what: &str) -> Result<u8> {
        self.need(1, what)?;
        self.pos += 1;
        Ok(self.buf[self.pos - 1])
    }
    #[inline]
    fn flag(&mut self, what: &str) -> Result<bool> {
        let at = self.pos;
        match self.byte(what)? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(Error::corrupt(
                at as u64,
                format!("{what} is {b}, not 0 or 1"),
            )),
        }
    }
    fn string(&mut self, what: &str) -> Result<String> {
        let mut s = String::new();
        self.string_into(what, &mut s)?;
        Ok(s)
    }
    /// [`Cursor::string`] into `out` (replacing what it held).
    fn string_into(&mut self, what: &str, out: &mut String) -> Result<()> {
        let rest = &self.buf[self.pos..];
        // Most strings (procs, group names) are empty.
        if rest.first() == Some(&0) {
            out.clear();
            self.pos += 1;
            return Ok(());
        }
        match memchr::memchr(0, rest) {
            Some(n) => {
                super::set_lossy(out, &rest[..n]);
                self.pos += n + 1;
                Ok(())
            }
            None => Err(Error::eof(
                self.pos as u64,
                format!("file ends inside {what} (no terminating NUL)"),
            )),
        }
    }
    /// The next `n` four-byte items, whole (checked at once, decoded by the caller as a block).
    #[inline]
    fn block(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let len = n.saturating_mul(4);
        self.need(len, what)?;
        let block = &self.buf[self.pos..self.pos + len];
        self.pos += len;
        Ok(block)
    }
    /// A count of items of at least `min_size` bytes each, checked against the bytes left.
    #[inline]
    fn count(&mut self, what: &str, min_size: usize) -> Result<usize> {
        let at = self.pos;
        let n = self.i32(what)?;
        if n < 0 || (n as usize).saturating_mul(min_size) > self.left() {
            return Err(self.bad_count(at, n, what));
        }
        Ok(n as usize)
    }
    #[cold]
    fn bad_count(&self, at: usize, n: i32, what: &str) -> Error {
        if n < 0 {
            Error::corrupt(at as u64, format!("{what} is negative ({n})"))
        } else if self.streaming {
            Error::eof(at as u64, format!("file ends inside {what} items"))
        } else {
            Error::corrupt(
                at as u64,
                format!(
                    "{what} is {n}, more than the {} bytes left can hold",
                    self.left()
                ),
            )
        }
    }
}

/// Reads a whole `.bex` file.
pub fn read(bytes: &[u8]) -> Result<ExampleSet> {
    let mut c = Cursor::new(bytes, false, Limits::default().max_record_bytes);
    let header = read_header(&mut c)?;
    // Not checked against the bytes left (the examples are not allocated ahead): a cut file
    // fails where it ends, at the same byte as in the streaming reader.
    let n = c.count("the number of examples", 0)?;
    let mut examples = Vec::new();
    for i in 0..n {
        examples.push(
            read_example(&mut c, &header, &mut Spare::default())
                .map_err(|e| e.in_context(format!("example {i}")))?,
        );
    }
    if c.left() != 0 {
        return Err(Error::corrupt(
            c.pos as u64,
            format!("{} bytes after the last example", c.left()),
        ));
    }
    Ok(ExampleSet { header, examples })
}

fn read_header(c: &mut Cursor<'_>) -> Result<SetHeader> {
    let cookie = c.u32("the magic cookie")?;
    if cookie != LENS_BINARY_COOKIE {
        return Err(Error::corrupt(
            0,
            format!("not a .bex file (cookie {cookie:#010x})"),
        ));
    }
    let at = c.pos;
    let size = c.u32("sizeof(real)")?;
    if size != 4 {
        return Err(Error::corrupt(
            at as u64,
            format!("sizeof(real) is {size}; only 4 is supported"),
        ));
    }
    Ok(SetHeader {
        proc: c.string("the set proc")?,
        max_time: c.real("the set maxTime")?,
        min_time: c.real("the set minTime")?,
        grace_time: c.real("the set graceTime")?,
        default_input: c.real("the set defaultInput")?,
        active_input: c.real("the set activeInput")?,
        default_target: c.real("the set defaultTarget")?,
        active_target: c.real("the set activeTarget")?,
    })
}

/// Whether an error from the streaming readers means "the bytes at hand end too soon".
pub(crate) fn is_incomplete(e: &Error) -> bool {
    e.is_eof()
}

/// Streaming: the set header and example count at the start of `buf`, and the bytes they take.
pub(crate) fn read_header_prefix(buf: &[u8]) -> Result<(SetHeader, usize, usize)> {
    let mut c = Cursor::new(buf, true, Limits::default().max_record_bytes);
    let h = read_header(&mut c)?;
    let n = c.count("the number of examples", 0)?;
    Ok((h, n, c.pos))
}

/// Streaming: one example at the start of `buf`, and the bytes it takes; its events must fit
/// in `max_record_bytes` of memory. Its allocations come from `spare` where it has them.
pub(crate) fn read_example_prefix(
    buf: &[u8],
    h: &SetHeader,
    max_record_bytes: u64,
    spare: &mut Spare,
) -> Result<(Example, usize)> {
    let mut c = Cursor::new(buf, true, max_record_bytes);
    let ex = read_example(&mut c, h, spare)?;
    Ok((ex, c.pos))
}

fn read_example(c: &mut Cursor<'_>, h: &SetHeader, spare: &mut Spare) -> Result<Example> {
    let mut ex = spare.example();
    match read_example_into(c, h, &mut ex, spare) {
        Ok(()) => Ok(ex),
        Err(e) => {
            // A streamed example cut by the end of the bytes at hand is read again: into the
            // same allocations.
            spare.keep(ex);
            Err(e)
        }
    }
}

/// Reads an example into `ex`, overwriting every field, reusing its allocations.
fn read_example_into(
    c: &mut Cursor<'_>,
    h: &SetHeader,
    ex: &mut Example,
    spare: &mut Spare,
) -> Result<()> {
    c.string_into("the example name", &mut ex.name)?;
    c.string_into("the example proc", &mut ex.proc)?;
    ex.frequency = c.real("the example frequency")?;
    let at = c.pos;
    let num_events = c.i32("the number of events")?;
    if num_events < 1 {
        return Err(Error::corrupt(
            at as u64,
            format!("example has {num_events} events"),
        ));
    }
    if num_events as usize > max_events(c.max_record_bytes) {
        return Err(too_many_events(at, num_events as usize, c.max_record_bytes));
    }
    // One example's events are bounded by the record size (above), all of a set read whole by
    // the file's size (below); not one example by the bytes left: event lists declare many
    // events in few bytes, and the text written for a set must read back as the same set.
    let num_events = num_events as usize;
    c.events_total += num_events;
    if !c.streaming && c.events_total > event_budget(c.buf.len()) {
        return Err(Error::corrupt(
            at as u64,
            format!(
                "implausible number of events {num_events} (too many in all for the file size)"
            ),
        ));
    }
    super::model::reset_events(&mut ex.events, h, num_events);
    let events = &mut ex.events;
    let specials = c.count("the number of special events", 4 + 1 + 28)?;
    for _ in 0..specials {
        let at = c.pos;
        let k = c.i32("an event number")?;
        if k < 0 || k as usize >= num_events {
            return Err(Error::corrupt(
                at as u64,
                format!("event number {k} out of range 0..{num_events}"),
            ));
        }
        let e = &mut events[k as usize];
        c.string_into("an event proc", &mut e.proc)?;
        e.max_time = c.real("an event maxTime")?;
        e.min_time = c.real("an event minTime")?;
        e.grace_time = c.real("an event graceTime")?;
        e.default_input = c.real("an event defaultInput")?;
        e.active_input = c.real("an event activeInput")?;
        e.default_target = c.real("an event defaultTarget")?;
        e.active_target = c.real("an event activeTarget")?;
    }
    // The lists are read into `ex.lists` from the start, in place; `used` of them are read.
    // A set without ranges is no set at all, as in Lens (its event keeps a NULL list) and in
    // the text reader (`T:` with nothing after it): so .bex -> .ex -> .bex gives the same set.
    let lists = &mut ex.lists;
    let mut used = 0;
    let n_in = c.count("the number of input sets", 9)?;
    for _ in 0..n_in {
        let evs = read_event_list(c, num_events)?;
        let id = read_list(c, lists, &mut used, spare)?;
        assign(events, &evs, id, false, c.pos)?;
        if c.flag("the shared-targets flag")? {
            let evs = read_event_list(c, num_events)?;
            assign(events, &evs, id, true, c.pos)?;
        }
    }
    let n_t = c.count("the number of target sets", 8)?;
    for _ in 0..n_t {
        let evs = read_event_list(c, num_events)?;
        let id = read_list(c, lists, &mut used, spare)?;
        assign(events, &evs, id, true, c.pos)?;
    }
    for list in lists.drain(used..) {
        spare.keep_ranges(list);
    }
    Ok(())
}

/// Reads a range list into `lists[*used]` (a new one at the end), reusing what that one holds:
/// the index of the list, or `None` when it has no ranges (it is not kept then).
fn read_list(
    c: &mut Cursor<'_>,
    lists: &mut Vec<RangeList>,
    used: &mut usize,
    spare: &mut Spare,
) -> Result<Option<usize>> {
    if *used == lists.len() {
        lists.push(spare.ranges());
    }
    let list = &mut lists[*used];
    read_ranges(c, list, spare)?;
    if list.is_empty() {
        return Ok(None);
    }
    *used += 1;
    Ok(Some(*used - 1))
}

/// Assigns list `id` to the events of `evs` as inputs or targets; each event has at most one.
fn assign(
    events: &mut [Event],
    evs: &EventList<'_>,
    id: Option<usize>,
    target: bool,
    at: usize,
) -> Result<()> {
    let Some(id) = id else { return Ok(()) };
    evs.each(|k| {
        let slot = if target {
            &mut events[k].target
        } else {
            &mut events[k].input
        };
        match slot.replace(id) {
            None => Ok(()),
            Some(_) => Err(Error::corrupt(
                at as u64,
                format!(
                    "event {k} has {} twice",
                    if target { "targets" } else { "inputs" }
                ),
            )),
        }
    })
}

/// An event list as stored: big-endian entries, a negative one ending a run (`0 -2 4` is events
/// 0, 1, 2 and 4), a lone negative entry meaning every event. Checked when read.
struct EventList<'a> {
    raw: &'a [u8],
    num_events: usize,
}

impl EventList<'_> {
    fn entry(&self, i: usize) -> i64 {
        let b = &self.raw[4 * i..4 * i + 4];
        i32::from_be_bytes([b[0], b[1], b[2], b[3]]) as i64
    }

    /// Calls `f` with each event, in order, until it fails.
    fn each(&self, mut f: impl FnMut(usize) -> Result<()>) -> Result<()> {
        let n = self.raw.len() / 4;
        if n == 1 {
            // One event (the usual list), or all of them.
            return match usize::try_from(self.entry(0)) {
                Ok(k) => f(k),
                Err(_) => (0..self.num_events).try_for_each(f),
            };
        }
        let mut last: i64 = -1;
        for i in 0..n {
            let v = self.entry(i);
            let lo = if v >= 0 { v } else { last + 1 };
            let hi = v.abs();
            for k in lo..=hi {
                f(k as usize)?;
            }
            last = hi;
        }
        Ok(())
    }
}

fn read_event_list<'a>(c: &mut Cursor<'a>, num_events: usize) -> Result<EventList<'a>> {
    let n = c.count("the length of an event list", 4)?;
    let start = c.pos;
    let list = EventList {
        raw: &c.buf[start..start + 4 * n],
        num_events,
    };
    c.pos += 4 * n;
    if n == 1 && list.entry(0) < 0 {
        return Ok(list);
    }
    let mut last: i64 = -1;
    for i in 0..n {
        let at = (start + 4 * i) as u64;
        let v = list.entry(i);
        let hi = if v >= 0 || (i > 0 && -v > last) {
            v.abs()
        } else {
            return Err(Error::corrupt(
                at,
                format!("bad span end {v} in an event list"),
            ));
        };
        if hi as usize >= num_events {
            return Err(Error::corrupt(
                at,
                format!("event {hi} out of range 0..{num_events}"),
            ));
        }
        last = hi;
    }
    Ok(list)
}

/// Reads a range list into `out`, overwriting its ranges and reusing their vectors.
fn read_ranges(c: &mut Cursor<'_>, out: &mut RangeList, spare: &mut Spare) -> Result<()> {
    let n = c.count("the number of ranges", 1 + 4 + 1 + 4)?;
    for j in 0..n {
        if j == out.len() {
            out.push(Range {
                group: None,
                kind: RangeKind::Sparse {
                    value: 0.0,
                    units: SparseUnits::All,
                },
            });
        }
        let range = &mut out[j];
        let mut group = range.group.take().unwrap_or_default();
        c.string_into("a group name", &mut group)?;
        range.group = (!group.is_empty()).then_some(group);
        let units = c.count("the number of units of a range", 0)?;
        if c.flag("the sparse flag")? {
            let value = c.real("a sparse value")?;
            let start = c.pos;
            let block = c.block(units, "a sparse unit list")?;
            if units == 1 && i32::from_be_bytes([block[0], block[1], block[2], block[3]]) < 0 {
                // One negative unit: every unit (`*`).
                let all = RangeKind::Sparse {
                    value,
                    units: SparseUnits::All,
                };
                spare.keep_kind(std::mem::replace(&mut range.kind, all));
            } else {
                let (v, list) = sparse_parts(&mut range.kind, spare);
                list.clear();
                list.extend(
                    block
                        .chunks_exact(4)
                        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]])),
                );
                *v = value;
                check_unit_list(list).map_err(|i| {
                    Error::corrupt((start + 4 * i) as u64, "bad sparse unit list entry")
                })?;
            }
        } else {
            let at = c.pos;
            let first = c.i32("the first unit")?;
            if first < 0 {
                return Err(Error::corrupt(
                    at as u64,
                    format!("negative first unit {first}"),
                ));
            }
            let block = c.block(units, "dense values")?;
            let (f, values) = dense_parts(&mut range.kind, spare);
            *f = first as u32;
            values.clear();
            values.extend(
                block
                    .chunks_exact(4)
                    .map(|b| f32::from_bits(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))),
            );
        }
    }
    for range in out.drain(n..) {
        spare.keep_kind(range.kind);
    }
    Ok(())
}

/// `kind` made dense (as it is, or with a vector from `spare`): its first unit and values, to
/// be overwritten.
fn dense_parts<'k>(kind: &'k mut RangeKind, spare: &mut Spare) -> (&'k mut u32, &'k mut Vec<f32>) {
    if !matches!(kind, RangeKind::Dense { .. }) {
        let values = spare.values();
        spare.keep_kind(std::mem::replace(
            kind,
            RangeKind::Dense { first: 0, values },
        ));
    }
    match kind {
        RangeKind::Dense { first, values } => (first, values),
        RangeKind::Sparse { .. } => unreachable!("made dense above"),
    }
}

/// `kind` made a sparse list (as it is, or with a vector from `spare`): its value and units, to
/// be overwritten.
fn sparse_parts<'k>(kind: &'k mut RangeKind, spare: &mut Spare) -> (&'k mut f32, &'k mut Vec<i32>) {
    let is_list = matches!(
        kind,
        RangeKind::Sparse {
            units: SparseUnits::List(_),
            ..
        }
    );
    if !is_list {
        let units = SparseUnits::List(spare.units());
        spare.keep_kind(std::mem::replace(
            kind,
            RangeKind::Sparse { value: 0.0, units },
        ));
    }
    match kind {
        RangeKind::Sparse {
            value,
            units: SparseUnits::List(list),
        } => (value, list),
        _ => unreachable!("made a sparse list above"),
    }
}

/// Encodes sorted event numbers as Lens's runs (`0 1 2 4` as `0 -2 4`).
fn runs(events: &[usize]) -> Vec<i32> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < events.len() {
        let mut j = i;
        while j + 1 < events.len() && events[j + 1] == events[j] + 1 {
            j += 1;
        }
        out.push(events[i] as i32);
        if j > i {
            out.push(-(events[j] as i32));
        }
        i = j + 1;
    }
    out
}

struct Out {
    buf: Vec<u8>,
}

impl Out {
    fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.u32(v as u32)
    }
    fn real(&mut self, v: f32) {
        self.u32(v.to_bits())
    }
    fn string(&mut self, s: &str, what: &str) -> Result<()> {
        if s.as_bytes().contains(&0) {
            return Err(Error::invalid(
                self.buf.len() as u64,
                format!("{what} contains a NUL byte"),
            ));
        }
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.push(0);
        Ok(())
    }
    fn list(&mut self, evs: &[usize]) {
        let r = runs(evs);
        self.i32(r.len() as i32);
        for v in r {
            self.i32(v);
        }
    }
    fn ranges(&mut self, list: &RangeList) -> Result<()> {
        self.i32(list.len() as i32);
        for r in list {
            self.string(r.group.as_deref().unwrap_or(""), "a group name")?;
            match &r.kind {
                RangeKind::Dense { first, values } => {
                    self.i32(values.len() as i32);
                    self.buf.push(0);
                    self.i32(*first as i32);
                    for &v in values {
                        self.real(v);
                    }
                }
                RangeKind::Sparse { value, units } => match units {
                    SparseUnits::All => {
                        self.i32(1);
                        self.buf.push(1);
                        self.real(*value);
                        self.i32(-1);
                    }
                    SparseUnits::List(l) => {
                        self.i32(l.len() as i32);
                        self.buf.push(1);
                        self.real(*value);
                        for &u in l {
                            self.i32(u);
                        }
                    }
                },
            }
        }
        Ok(())
    }
}

/// Writes a set as `.bex` bytes, exactly as Lens's `saveExamples -binary` does.
pub fn write(set: &ExampleSet) -> Result<Vec<u8>> {
    let mut out = write_header(&set.header, set.examples.len())?;
    for (i, ex) in set.examples.iter().enumerate() {
        write_example(&mut out, ex, &set.header)
            .map_err(|e| e.in_context(format!("example {i}")))?;
    }
    Ok(out)
}

/// The start of a `.bex` file: cookie, set header and the number of examples that follow.
pub fn write_header(h: &SetHeader, examples: usize) -> Result<Vec<u8>> {
    let mut o = Out { buf: Vec::new() };
    o.u32(LENS_BINARY_COOKIE);
    o.u32(4);
    o.string(&h.proc, "the set proc")?;
    for v in h.parameters() {
        o.real(v);
    }
    let count = i32::try_from(examples).map_err(|_| {
        Error::invalid(
            0,
            format!("{examples} examples are more than .bex can count"),
        )
    })?;
    o.i32(count);
    Ok(o.buf)
}

/// Appends one example of a set with header `h` in `.bex` form.
pub fn write_example(out: &mut Vec<u8>, ex: &Example, h: &SetHeader) -> Result<()> {
    let mut o = Out {
        buf: std::mem::take(out),
    };
    let done = encode_example(&mut o, ex, h);
    *out = o.buf;
    done
}

fn encode_example(o: &mut Out, ex: &Example, h: &SetHeader) -> Result<()> {
    o.string(&ex.name, "the example name")?;
    o.string(&ex.proc, "the example proc")?;
    o.real(ex.frequency);
    o.i32(ex.events.len() as i32);
    let special: Vec<usize> = (0..ex.events.len())
        .filter(|&k| ex.events[k].is_special(h))
        .collect();
    o.i32(special.len() as i32);
    for k in special {
        let e = &ex.events[k];
        o.i32(k as i32);
        o.string(&e.proc, "an event proc")?;
        for v in e.parameters() {
            o.real(v);
        }
    }
    let (users_in, users_t) = ex.list_users();
    let using = |l: usize, targets: bool| -> &Vec<usize> {
        if targets {
            &users_t[l]
        } else {
            &users_in[l]
        }
    };
    // Lists in the order of their first user, inputs first; a list already written as
    // inputs carries its targets along (the shared-targets flag).
    let mut seen = vec![false; ex.lists.len()];
    let mut order_in = Vec::new();
    let mut order_t = Vec::new();
    for e in &ex.events {
        if let Some(l) = e.input {
            check_list(ex, l)?;
            if !seen[l] {
                seen[l] = true;
                order_in.push(l);
            }
        }
    }
    for e in &ex.events {
        if let Some(l) = e.target {
            check_list(ex, l)?;
            if !seen[l] {
                seen[l] = true;
                order_t.push(l);
            }
        }
    }
    o.i32(order_in.len() as i32);
    for &l in &order_in {
        o.list(using(l, false));
        o.ranges(&ex.lists[l])?;
        let t = using(l, true);
        if t.is_empty() {
            o.buf.push(0);
        } else {
            o.buf.push(1);
            o.list(t);
        }
    }
    o.i32(order_t.len() as i32);
    for &l in &order_t {
        o.list(using(l, true));
        o.ranges(&ex.lists[l])?;
    }
    Ok(())
}

fn check_list(ex: &Example, l: usize) -> Result<()> {
    if l >= ex.lists.len() {
        return Err(Error::invalid(
            0,
            format!(
                "event refers to list {l}, the example has {}",
                ex.lists.len()
            ),
        ));
    }
    Ok(())
}
