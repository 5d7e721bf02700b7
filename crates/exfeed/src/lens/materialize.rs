//! Turning events into the dense input and target vectors Lens would load into a network.
//!
//! Given the network's input groups and target groups (in network order), an event's input
//! vector starts as the event's default input everywhere; then its ranges apply in order. A
//! grouped range counts units from the start of its group; an ungrouped one counts across all
//! input (target) groups. A range naming a group the layout does not have is ignored, with one
//! warning per group name.

use super::model::*;
use crate::error::{Diagnostic, DiagnosticSink, Error, Location, Result, Severity};
use std::collections::HashSet;

/// An example that does not fit the layout: the place is the example and event (the caller's
/// context), not a byte.
fn layout_error(message: impl Into<String>) -> Error {
    Error::new(crate::ErrorKind::Invalid, Location::default(), message)
}

/// Named groups with their sizes, in network order: `NAME:SIZE,NAME:SIZE,...`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Layout {
    /// (name, number of units), in order.
    pub groups: Vec<(String, usize)>,
}

impl Layout {
    /// Parses `NAME:SIZE,...` (as given to `--input-groups`).
    pub fn parse(spec: &str) -> Result<Layout> {
        let mut groups = Vec::new();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, size) = part
                .rsplit_once(':')
                .ok_or_else(|| Error::config(format!("group '{part}': expected NAME:SIZE")))?;
            let size: usize = size.parse().map_err(|_| {
                Error::config(format!("group '{name}': size '{size}' is not a number"))
            })?;
            if name.is_empty() || groups.iter().any(|(n, _): &(String, usize)| n == name) {
                return Err(Error::config(format!(
                    "group name '{name}' is empty or repeated"
                )));
            }
            groups.push((name.to_string(), size));
        }
        Ok(Layout { groups })
    }

    /// Total number of units.
    pub fn size(&self) -> usize {
        self.groups.iter().map(|g| g.1).sum()
    }

    /// Offset and size of a group.
    pub fn find(&self, name: &str) -> Option<(usize, usize)> {
        let mut offset = 0;
        for (n, s) in &self.groups {
            if n == name {
                return Some((offset, *s));
            }
            offset += s;
        }
        None
    }
}

/// Materializes events for one network layout.
#[derive(Debug, Clone)]
pub struct Materializer {
    inputs: Layout,
    targets: Layout,
    warned: HashSet<String>,
}

impl Materializer {
    /// For a network with these input and target groups.
    pub fn new(inputs: Layout, targets: Layout) -> Self {
        Materializer {
            inputs,
            targets,
            warned: HashSet::new(),
        }
    }

    /// The input layout.
    pub fn inputs(&self) -> &Layout {
        &self.inputs
    }

    /// The target layout.
    pub fn targets(&self) -> &Layout {
        &self.targets
    }

    /// Fills `input` and `target` (resized to the layouts' sizes) for event `k` of `ex`; errors
    /// name the event (`event k`).
    pub fn event(
        &mut self,
        ex: &Example,
        k: usize,
        input: &mut Vec<f32>,
        target: &mut Vec<f32>,
        sink: &mut dyn DiagnosticSink,
    ) -> Result<()> {
        self.fill_event(ex, k, input, target, sink)
            .map_err(|e| e.within(format!("event {k}")))
    }

    fn fill_event(
        &mut self,
        ex: &Example,
        k: usize,
        input: &mut Vec<f32>,
        target: &mut Vec<f32>,
        sink: &mut dyn DiagnosticSink,
    ) -> Result<()> {
        let e = ex.events.get(k).ok_or_else(|| {
            layout_error(format!(
                "no event {k} (the example has {})",
                ex.events.len()
            ))
        })?;
        let lists = (
            e.input.map(|l| ex.lists.get(l)),
            e.target.map(|l| ex.lists.get(l)),
        );
        let (Some(li), Some(lt)) = (
            lists.0.map_or(Some(None), |l| l.map(Some)),
            lists.1.map_or(Some(None), |l| l.map(Some)),
        ) else {
            return Err(layout_error(
                "event refers to a list the example does not have",
            ));
        };
        input.clear();
        input.resize(self.inputs.size(), e.default_input);
        target.clear();
        target.resize(self.targets.size(), e.default_target);
        fill(input, li, &self.inputs, "input", &mut self.warned, sink)?;
        fill(target, lt, &self.targets, "target", &mut self.warned, sink)?;
        Ok(())
    }

    /// The two dense streams a materialized set becomes in CTF/CBF: `input` and `target`
    /// (named as given), dims the layouts' sizes.
    pub fn stream_specs(&self, input: &str, target: &str) -> Vec<crate::StreamSpec> {
        use crate::stream::{Storage, StreamSpec};
        vec![
            StreamSpec::new(input, Storage::Dense, self.inputs.size()),
            StreamSpec::new(target, Storage::Dense, self.targets.size()),
        ]
    }

    /// Appends example `ex` to `batch` (streams as [`stream_specs`](Self::stream_specs) says)
    /// as one sequence with key `key`: one sample per event. NaN has no CTF form: it becomes
    /// `nan` when given, else it is an error naming the example and event.
    pub fn push_example(
        &mut self,
        ex: &Example,
        key: u64,
        nan: Option<f32>,
        batch: &mut crate::SequenceBatch<f32>,
        sink: &mut dyn DiagnosticSink,
    ) -> Result<()> {
        self.push_example_as(ex, key, nan, false, batch, sink)
    }

    /// [`push_example`](Self::push_example) for any element type, and with `keep_nan` (and no
    /// `nan`) NaN stays NaN (the minibatch reader's float buffers can hold it).
    pub fn push_example_as<T: crate::Element>(
        &mut self,
        ex: &Example,
        key: u64,
        nan: Option<f32>,
        keep_nan: bool,
        batch: &mut crate::SequenceBatch<T>,
        sink: &mut dyn DiagnosticSink,
    ) -> Result<()> {
        let (mut input, mut target) = (Vec::new(), Vec::new());
        let mut row: Vec<T> = Vec::new();
        for k in 0..ex.events.len() {
            let r = self.event(ex, k, &mut input, &mut target, sink);
            if let Err(e) = r {
                batch.discard_sequence();
                return Err(e.within(format!("example {key}")));
            }
            for (v, what) in [(&mut input, "input"), (&mut target, "target")] {
                if let Some(i) = v.iter().position(|x| x.is_nan()) {
                    match nan {
                        Some(n) => v.iter_mut().filter(|x| x.is_nan()).for_each(|x| *x = n),
                        None if keep_nan => {}
                        None => {
                            batch.discard_sequence();
                            // Examples do not keep their offset in the file; the message names it.
                            return Err(layout_error(format!(
                                "{what} unit {i} is NaN, which CTF/CBF cannot hold (give --nan VALUE)"
                            ))
                            .in_context(format!("example {key} ('{}'), event {k}", ex.name)));
                        }
                    }
                }
            }
            for (stream, v) in [(0, &input), (1, &target)] {
                row.clear();
                row.extend(v.iter().map(|&x| T::from_f32(x)));
                batch.stream_mut(stream).push_dense_sample(&row);
            }
        }
        batch.finish_sequence(key);
        Ok(())
    }
}

fn fill(
    out: &mut [f32],
    list: Option<&RangeList>,
    layout: &Layout,
    what: &str,
    warned: &mut HashSet<String>,
    sink: &mut dyn DiagnosticSink,
) -> Result<()> {
    let Some(list) = list else { return Ok(()) };
    for r in list {
        let (base, size) = match &r.group {
            None => (0, out.len()),
            Some(g) => {
                match layout.find(g) {
                    Some(v) => v,
                    None => {
                        if warned.insert(format!("{what}:{g}")) {
                            sink.report(Diagnostic {
                            severity: Severity::Warning,
                            location: Location::default(),
                            message: format!("{what} group '{g}' is not in the layout; its ranges are ignored"),
                        });
                        }
                        continue;
                    }
                }
            }
        };
        let name = r
            .group
            .as_deref()
            .map_or(format!("all {what}s"), |g| format!("{what} group '{g}'"));
        let too_far = |unit: u64| {
            layout_error(format!(
                "a range reaches unit {unit} of {name}, which has {size} units"
            ))
        };
        match &r.kind {
            RangeKind::Dense { first, values } => {
                let first = *first as usize;
                if values.is_empty() {
                    continue;
                }
                if first + values.len() > size {
                    return Err(too_far((first + values.len() - 1) as u64));
                }
                out[base + first..base + first + values.len()].copy_from_slice(values);
            }
            RangeKind::Sparse { value, units } => match units.spans() {
                None => out[base..base + size].fill(*value),
                Some(spans) => {
                    for (a, b) in spans {
                        if b as usize >= size {
                            return Err(too_far(b as u64));
                        }
                        out[base + a as usize..=base + b as usize].fill(*value);
                    }
                }
            },
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lens::text::parse;

    #[test]
    fn ranges_apply_in_order_over_defaults() {
        let set = parse(
            b"defI:- actT:0.5;\n2 [0] I: (b 1) 7 8 {a 2} 0 (3) 5 T: {-} * [1 defT:9] t: {g} 1 ;\n",
        )
        .unwrap();
        let mut m = Materializer::new(
            Layout::parse("a:2,b:3").unwrap(),
            Layout::parse("x:1,y:2").unwrap(),
        );
        let (mut i, mut t) = (Vec::new(), Vec::new());
        let mut diags: Vec<Diagnostic> = Vec::new();
        let ex = &set.examples[0];
        m.event(ex, 0, &mut i, &mut t, &mut diags).unwrap();
        // a0=2 (sparse), a1=NaN default, b1=7, b2=8, unit 3 (=b1) then 5.
        assert_eq!(i[0], 2.0);
        assert!(i[1].is_nan() && i[2].is_nan());
        assert_eq!(&i[3..], &[5.0, 8.0]);
        assert!(t.iter().all(|v| v.is_nan()));
        m.event(ex, 1, &mut i, &mut t, &mut diags).unwrap();
        assert!(i.iter().all(|v| v.is_nan()));
        assert_eq!(t, vec![9.0; 3]);
        assert_eq!(diags.len(), 1, "{diags:?}");
        assert!(diags[0].message.contains("'g'"));
        // An empty range far past the end is harmless.
        let set = parse(b";\nI: (a 99) T: (9);\n").unwrap();
        m.event(&set.examples[0], 0, &mut i, &mut t, &mut diags)
            .unwrap();
        let set = parse(b";\nI: (a 1) 1 2;\n").unwrap();
        let err = m
            .event(&set.examples[0], 0, &mut i, &mut t, &mut diags)
            .unwrap_err();
        assert!(err.message().contains("unit 2 of input group 'a'"), "{err}");
    }
}
