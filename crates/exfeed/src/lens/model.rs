//! The Lens example-set model: a set header, examples, events, and the range lists that carry
//! inputs and targets. Procs are opaque Tcl text: carried through, never run.

/// Set-level defaults (the optional set header of a `.ex` file).
#[derive(Debug, Clone, PartialEq)]
pub struct SetHeader {
    /// Set procedure (Tcl text, empty when none).
    pub proc: String,
    /// Default maximum time of events.
    pub max_time: f32,
    /// Default minimum time of events.
    pub min_time: f32,
    /// Default grace time of events.
    pub grace_time: f32,
    /// Value of input units no range names.
    pub default_input: f32,
    /// Value of sparse input units whose range gives none.
    pub active_input: f32,
    /// Value of target units no range names.
    pub default_target: f32,
    /// Value of sparse target units whose range gives none.
    pub active_target: f32,
}

impl Default for SetHeader {
    /// Lens's defaults: maxTime 1, minTime 0, graceTime 0, defaults 0, active values 1.
    fn default() -> Self {
        SetHeader {
            proc: String::new(),
            max_time: 1.0,
            min_time: 0.0,
            grace_time: 0.0,
            default_input: 0.0,
            active_input: 1.0,
            default_target: 0.0,
            active_target: 1.0,
        }
    }
}

/// A whole example set.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExampleSet {
    /// The set header.
    pub header: SetHeader,
    /// The examples, in file order.
    pub examples: Vec<Example>,
}

/// One example: a named sequence of events.
#[derive(Debug, Clone, PartialEq)]
pub struct Example {
    /// The name (empty when the file gave none; Lens then labels it by its index).
    pub name: String,
    /// Example procedure (Tcl text, empty when none).
    pub proc: String,
    /// Presentation frequency (default 1).
    pub frequency: f32,
    /// The events (at least one).
    pub events: Vec<Event>,
    /// The range lists the events' inputs and targets point to (by index). Several events may
    /// share one list, and a list may serve as both inputs and targets (`B:`/`b:`).
    pub lists: Vec<RangeList>,
}

impl Example {
    /// For each list of [`Example::lists`], the events using it as inputs and as targets (in
    /// event order). Event references to lists that do not exist are ignored.
    pub fn list_users(&self) -> (Vec<Vec<usize>>, Vec<Vec<usize>>) {
        let mut inputs = vec![Vec::new(); self.lists.len()];
        let mut targets = vec![Vec::new(); self.lists.len()];
        for (k, e) in self.events.iter().enumerate() {
            if let Some(v) = e.input.and_then(|l| inputs.get_mut(l)) {
                v.push(k);
            }
            if let Some(v) = e.target.and_then(|l| targets.get_mut(l)) {
                v.push(k);
            }
        }
        (inputs, targets)
    }
}

/// A list of ranges: one `I:`/`T:`/`B:` specification.
pub type RangeList = Vec<Range>;

/// One event of an example.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Event procedure (Tcl text, empty when none).
    pub proc: String,
    /// Maximum time; NaN means "use the set's".
    pub max_time: f32,
    /// Minimum time; NaN means "use the set's".
    pub min_time: f32,
    /// Grace time; NaN means "use the set's".
    pub grace_time: f32,
    /// Value of input units no range names.
    pub default_input: f32,
    /// Default value of sparse input ranges.
    pub active_input: f32,
    /// Value of target units no range names.
    pub default_target: f32,
    /// Default value of sparse target ranges.
    pub active_target: f32,
    /// Index into [`Example::lists`] of this event's inputs.
    pub input: Option<usize>,
    /// Index into [`Example::lists`] of this event's targets.
    pub target: Option<usize>,
}

impl Event {
    /// An event with the set's defaults: no proc, NaN times, the set's default/active values.
    pub fn from_header(h: &SetHeader) -> Self {
        Event {
            proc: String::new(),
            max_time: f32::NAN,
            min_time: f32::NAN,
            grace_time: f32::NAN,
            default_input: h.default_input,
            active_input: h.active_input,
            default_target: h.default_target,
            active_target: h.active_target,
            input: None,
            target: None,
        }
    }

    /// Makes this event what [`Event::from_header`] makes (keeping its proc's allocation).
    pub(crate) fn reset(&mut self, h: &SetHeader) {
        let mut proc = std::mem::take(&mut self.proc);
        proc.clear();
        *self = Event {
            proc,
            ..Event::from_header(h)
        };
    }

    /// Whether the event's own fields (not its inputs/targets) differ from what
    /// [`Event::from_header`] gives (Lens writes headers only for such events in `.bex`).
    pub fn is_special(&self, h: &SetHeader) -> bool {
        !self.proc.is_empty()
            || !self.max_time.is_nan()
            || !self.min_time.is_nan()
            || !self.grace_time.is_nan()
            || !same(self.default_input, h.default_input)
            || !same(self.active_input, h.active_input)
            || !same(self.default_target, h.default_target)
            || !same(self.active_target, h.active_target)
    }
}

/// Equal, with NaN equal to NaN.
pub(crate) fn same(a: f32, b: f32) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

/// One range of an input or target list.
#[derive(Debug, Clone, PartialEq)]
pub struct Range {
    /// The group the unit indices are relative to; `None`: relative to all input (target) units.
    pub group: Option<String>,
    /// Dense or sparse content.
    pub kind: RangeKind,
}

/// The content of a range.
#[derive(Debug, Clone, PartialEq)]
pub enum RangeKind {
    /// Consecutive values from `first` on.
    Dense {
        /// First unit index.
        first: u32,
        /// The values (NaN allowed).
        values: Vec<f32>,
    },
    /// One value for a set of units.
    Sparse {
        /// The value (NaN allowed).
        value: f32,
        /// The units.
        units: SparseUnits,
    },
}

/// The units of a sparse range.
#[derive(Debug, Clone, PartialEq)]
pub enum SparseUnits {
    /// `*`: every unit (of the group, or of all input/target units).
    All,
    /// Lens's encoding, kept as read so it round-trips: a non-negative entry names one unit, a
    /// negative entry `-e` ends a span running from the unit after the previous entry to `e`
    /// (`2 -5 6` is units 2..=5 and 6).
    List(Vec<i32>),
}

impl SparseUnits {
    /// The inclusive unit spans the list names, in order (`None` for [`SparseUnits::All`]).
    /// Spans, not indices, so a huge span costs nothing.
    pub fn spans(&self) -> Option<Vec<(u32, u32)>> {
        match self {
            SparseUnits::All => None,
            SparseUnits::List(list) => {
                let mut out = Vec::with_capacity(list.len());
                let mut last: i64 = -1;
                for &v in list {
                    if v >= 0 {
                        out.push((v as u32, v as u32));
                        last = v as i64;
                    } else {
                        // A span end continues the span or unit before it.
                        let end = -(v as i64);
                        match out.last_mut() {
                            Some(span) if end > last => span.1 = end as u32,
                            None if end > last => out.push(((last + 1) as u32, end as u32)),
                            _ => {}
                        }
                        last = end;
                    }
                }
                Some(out)
            }
        }
    }

    /// One past the last unit the list names: its largest entry, a unit or a span's end (where
    /// [`spans`](Self::spans) ends, without building the spans); 0 for an empty list and for
    /// [`SparseUnits::All`], which names no unit of its own.
    pub(crate) fn end(&self) -> u64 {
        match self {
            SparseUnits::All => 0,
            SparseUnits::List(list) => list
                .iter()
                .map(|&v| v.unsigned_abs() as u64 + 1)
                .max()
                .unwrap_or(0),
        }
    }
}

/// Bit for bit (so `-0` differs from `0`), except that all NaNs are equal (text has one NaN).
fn bits_eq(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn ranges_eq(a: &[Range], b: &[Range]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.group == y.group
                && match (&x.kind, &y.kind) {
                    (
                        RangeKind::Dense {
                            first: f1,
                            values: v1,
                        },
                        RangeKind::Dense {
                            first: f2,
                            values: v2,
                        },
                    ) => {
                        f1 == f2
                            && v1.len() == v2.len()
                            && v1.iter().zip(v2).all(|(p, q)| bits_eq(*p, *q))
                    }
                    (
                        RangeKind::Sparse {
                            value: v1,
                            units: u1,
                        },
                        RangeKind::Sparse {
                            value: v2,
                            units: u2,
                        },
                    ) => bits_eq(*v1, *v2) && u1 == u2,
                    _ => false,
                }
        })
}

impl Example {
    /// Whether two examples carry the same content: the same fields (floats compared bit for
    /// bit, except that any NaN equals any NaN) and, event by event, the same input and target ranges, whether
    /// or not the lists are shared in the same way.
    pub fn same_content(&self, other: &Example) -> bool {
        let list = |ex: &'_ Example, l: Option<usize>| -> Option<Vec<Range>> {
            l.map(|l| ex.lists.get(l).cloned().unwrap_or_default())
        };
        self.name == other.name
            && self.proc == other.proc
            && bits_eq(self.frequency, other.frequency)
            && self.events.len() == other.events.len()
            && self.events.iter().zip(&other.events).all(|(a, b)| {
                a.proc == b.proc
                    && [
                        (a.max_time, b.max_time),
                        (a.min_time, b.min_time),
                        (a.grace_time, b.grace_time),
                        (a.default_input, b.default_input),
                        (a.active_input, b.active_input),
                        (a.default_target, b.default_target),
                        (a.active_target, b.active_target),
                    ]
                    .iter()
                    .all(|&(x, y)| bits_eq(x, y))
                    && match (list(self, a.input), list(other, b.input)) {
                        (Some(x), Some(y)) => ranges_eq(&x, &y),
                        (None, None) => true,
                        _ => false,
                    }
                    && match (list(self, a.target), list(other, b.target)) {
                        (Some(x), Some(y)) => ranges_eq(&x, &y),
                        (None, None) => true,
                        _ => false,
                    }
            })
    }
}

impl ExampleSet {
    /// Whether two sets carry the same content (see [`Example::same_content`]).
    pub fn same_content(&self, other: &ExampleSet) -> bool {
        let (h, g) = (&self.header, &other.header);
        h.proc == g.proc
            && [
                (h.max_time, g.max_time),
                (h.min_time, g.min_time),
                (h.grace_time, g.grace_time),
                (h.default_input, g.default_input),
                (h.active_input, g.active_input),
                (h.default_target, g.default_target),
                (h.active_target, g.active_target),
            ]
            .iter()
            .all(|&(x, y)| bits_eq(x, y))
            && self.examples.len() == other.examples.len()
            && self
                .examples
                .iter()
                .zip(&other.examples)
                .all(|(a, b)| a.same_content(b))
    }

    /// Total number of events over all examples.
    pub fn num_events(&self) -> usize {
        self.examples.iter().map(|e| e.events.len()).sum()
    }
}

/// `parameters()` for the set header and events: maxTime, minTime, graceTime, defaultInput,
/// activeInput, defaultTarget, activeTarget, the parameters both have, in the order `.bex` stores
/// them.
macro_rules! parameters {
    ($($ty:ty),*) => {$(
        impl $ty {
            /// maxTime, minTime, graceTime, defaultInput, activeInput, defaultTarget,
            /// activeTarget, in the order `.bex` stores them.
            pub fn parameters(&self) -> [f32; 7] {
                [
                    self.max_time,
                    self.min_time,
                    self.grace_time,
                    self.default_input,
                    self.active_input,
                    self.default_target,
                    self.active_target,
                ]
            }
        }
    )*};
}

parameters!(SetHeader, Event);

/// At most this many events in all for an input of `len` bytes: generous for real files (a few
/// events per hundred bytes), yet bounded, so a tiny file cannot declare billions of events.
pub(crate) fn event_budget(len: usize) -> usize {
    16 * len + (1 << 20)
}

/// The most events one example may declare: their records must fit in `max_record_bytes` of
/// memory (see [`crate::limits::Limits`]), so that a few bytes (`100000000;`, or a `.bex` count
/// with its events shared by one event list) cannot make exfeed allocate gigabytes.
pub(crate) fn max_events(max_record_bytes: u64) -> usize {
    (max_record_bytes / std::mem::size_of::<Event>() as u64).max(1) as usize
}

/// The error for an example declaring more events than [`max_events`] allows.
pub(crate) fn too_many_events(at: usize, num_events: usize, max_record_bytes: u64) -> crate::Error {
    crate::Error::invalid(
        at as u64,
        format!(
            "example declares {num_events} events, which take {} bytes in memory, more than \
             the maximum record size ({max_record_bytes} bytes)",
            num_events as u64 * std::mem::size_of::<Event>() as u64
        ),
    )
}

/// Checks Lens's sparse encoding: the first entry is a unit, a span end exceeds what precedes.
/// Returns the index of the first bad entry.
pub(crate) fn check_unit_list(list: &[i32]) -> std::result::Result<(), usize> {
    // An entry is bad when it is a span end not above the entry before it (whether a unit or
    // a span end, its absolute value is where the units got to), or the first entry. Checked
    // pairwise without branches or stopping, so the loop is vectorized; the place is looked
    // for only then.
    let bad = |prev: i32, v: i32| (v < 0) & (v.unsigned_abs() <= prev.unsigned_abs());
    let first_bad = list.first().is_some_and(|&v| v < 0);
    let next = list.get(1..).unwrap_or_default();
    let any_bad = (list.iter().zip(next)).fold(first_bad, |acc, (&p, &v)| acc | bad(p, v));
    if !any_bad {
        return Ok(());
    }
    if first_bad {
        return Err(0);
    }
    Err(1
        + (list.iter().zip(next))
            .position(|(&p, &v)| bad(p, v))
            .unwrap_or(0))
}

/// The allocations of examples a consumer is done with, for the parsers to reuse: a stream of
/// examples then allocates only when an example needs more than those before it. It holds at
/// most what the largest example held.
///
/// Examples come back whole: the binary reader reads the next example into one in place (its
/// lists, ranges and value vectors overwritten where the shapes match, so a stream of examples
/// of one shape moves nothing between pools); the text parser takes them apart into the pools
/// below when it needs a part.
#[derive(Debug, Default)]
pub(crate) struct Spare {
    /// The text parser's buffers, kept from one example to the next.
    pub scratch: Scratch,
    whole: Vec<Example>,
    events: Vec<Vec<Event>>,
    lists: Vec<Vec<RangeList>>,
    ranges: Vec<RangeList>,
    values: Vec<Vec<f32>>,
    units: Vec<Vec<i32>>,
    names: Vec<String>,
}

impl Spare {
    /// Keeps `ex` for its allocations.
    pub fn keep(&mut self, ex: Example) {
        self.whole.push(ex);
    }

    /// Takes a whole example apart into the pools, if one is kept.
    fn take_apart(&mut self) {
        let Some(ex) = self.whole.pop() else { return };
        let Example {
            mut name,
            events,
            lists,
            ..
        } = ex;
        name.clear();
        self.names.push(name);
        self.events.push(events);
        self.keep_lists(lists);
    }

    /// Keeps the allocations of range lists (emptied), and the list of them.
    pub fn keep_lists(&mut self, mut lists: Vec<RangeList>) {
        for ranges in lists.drain(..) {
            self.keep_ranges(ranges);
        }
        self.lists.push(lists);
    }

    /// Keeps the allocations of a range list (emptied).
    pub fn keep_ranges(&mut self, mut ranges: RangeList) {
        for range in ranges.drain(..) {
            self.keep_kind(range.kind);
        }
        self.ranges.push(ranges);
    }

    /// Keeps the vector of a range's values or units (emptied).
    pub fn keep_kind(&mut self, kind: RangeKind) {
        // Only allocations: an empty vector (a skimmed range's) is worth nothing, and would
        // pile up where nothing takes it back.
        match kind {
            RangeKind::Dense { mut values, .. } if values.capacity() > 0 => {
                values.clear();
                self.values.push(values);
            }
            RangeKind::Sparse {
                units: SparseUnits::List(units),
                ..
            } => self.keep_units(units),
            _ => {}
        }
    }

    /// Keeps a list of sparse units (emptied).
    pub fn keep_units(&mut self, mut units: Vec<i32>) {
        if units.capacity() > 0 {
            units.clear();
            self.units.push(units);
        }
    }

    /// How many allocations it holds (a whole example's counted as when taken apart).
    #[cfg(test)]
    pub fn held(&self) -> usize {
        let kinds = |r: &Range| match &r.kind {
            RangeKind::Dense { values, .. } => usize::from(values.capacity() > 0),
            RangeKind::Sparse {
                units: SparseUnits::List(u),
                ..
            } => usize::from(u.capacity() > 0),
            _ => 0,
        };
        let whole: usize = self
            .whole
            .iter()
            .map(|ex| {
                let lists = ex.lists.iter();
                3 + lists
                    .map(|l| 1 + l.iter().map(kinds).sum::<usize>())
                    .sum::<usize>()
            })
            .sum();
        whole
            + self.events.len()
            + self.lists.len()
            + self.ranges.len()
            + self.values.len()
            + self.units.len()
            + self.names.len()
    }

    /// An example to read the next one into in place: one kept whole, else one of pooled parts
    /// (its fields are all to be overwritten).
    pub fn example(&mut self) -> Example {
        self.whole.pop().unwrap_or_else(|| Example {
            name: self.names.pop().unwrap_or_default(),
            proc: String::new(),
            frequency: 1.0,
            events: self.events.pop().unwrap_or_default(),
            lists: self.lists.pop().unwrap_or_default(),
        })
    }

    /// `num_events` events as [`Event::from_header`] makes them.
    pub fn events(&mut self, h: &SetHeader, num_events: usize) -> Vec<Event> {
        let mut events = self.pop(|s| &mut s.events);
        reset_events(&mut events, h, num_events);
        events
    }

    /// An empty list of range lists.
    pub fn lists(&mut self) -> Vec<RangeList> {
        self.pop(|s| &mut s.lists)
    }

    /// An empty range list.
    pub fn ranges(&mut self) -> RangeList {
        self.pop(|s| &mut s.ranges)
    }

    /// An empty vector of dense values.
    pub fn values(&mut self) -> Vec<f32> {
        self.pop(|s| &mut s.values)
    }

    /// An empty list of sparse units.
    pub fn units(&mut self) -> Vec<i32> {
        self.pop(|s| &mut s.units)
    }

    /// An empty string for a name.
    pub fn name(&mut self) -> String {
        self.pop(|s| &mut s.names)
    }

    /// One of the parts `pool` holds: a kept whole example is taken apart when it holds none;
    /// a new one when there is no part either.
    fn pop<V: Default>(&mut self, pool: fn(&mut Self) -> &mut Vec<V>) -> V {
        if pool(self).is_empty() {
            self.take_apart();
        }
        pool(self).pop().unwrap_or_default()
    }
}

/// Makes `events` `num_events` events as [`Event::from_header`] makes them, keeping the
/// allocations of those it had.
pub(crate) fn reset_events(events: &mut Vec<Event>, h: &SetHeader, num_events: usize) {
    events.truncate(num_events);
    for e in events.iter_mut() {
        e.reset(h);
    }
    events.resize(num_events, Event::from_header(h));
}

/// Buffers the text parser reads an example's parts into (then copies them at their exact size
/// into the example): kept in [`Spare`] so that they are allocated once, not per example.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// Dense values.
    pub values: Vec<f32>,
    /// Sparse units, and the byte where each starts.
    pub units: Vec<i32>,
    pub unit_starts: Vec<usize>,
    /// A block string's bytes, and the closing delimiters it awaits.
    pub block: Vec<u8>,
    pub stack: Vec<u8>,
    /// Looks for runs of alike dense values that found none since the last that found one.
    pub dense_misses: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check as Lens's encoding reads, entry by entry.
    fn check_one_by_one(list: &[i32]) -> std::result::Result<(), usize> {
        let mut last: i64 = -1;
        for (i, &v) in list.iter().enumerate() {
            if v >= 0 {
                last = v as i64;
            } else {
                let end = -(v as i64);
                if i == 0 || end <= last {
                    return Err(i);
                }
                last = end;
            }
        }
        Ok(())
    }

    #[test]
    fn unit_lists_are_checked_as_entry_by_entry() {
        let values = [0, 1, 2, 3, -1, -2, -3, i32::MAX, -i32::MAX, i32::MIN];
        // Every list of up to 4 of those entries.
        let mut lists = vec![vec![]];
        let mut round: Vec<Vec<i32>> = vec![vec![]];
        for _ in 0..4 {
            round = (round.iter())
                .flat_map(|l| values.iter().map(move |&v| [&l[..], &[v]].concat()))
                .collect();
            lists.extend(round.iter().cloned());
        }
        // And long ones (the vectorized loop), bad at one entry.
        let long: Vec<i32> = (0..1000)
            .map(|k| if k % 3 == 2 { -3 * k } else { 3 * k })
            .collect();
        for at in [1, 2, 500, 998, 999] {
            let mut l = long.clone();
            l[at] = -l[at - 1].abs();
            lists.push(l);
        }
        lists.push(long);
        let (mut good, mut bad) = (0, 0);
        for l in &lists {
            let want = check_one_by_one(l);
            assert_eq!(check_unit_list(l), want, "{l:?}");
            if want.is_ok() {
                good += 1
            } else {
                bad += 1
            }
        }
        assert!(good > 100 && bad > 100, "{good} good, {bad} bad lists");
    }
}
