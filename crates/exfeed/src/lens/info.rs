//! A summary of an example set, for `exfeed info`.

use super::model::*;
use std::collections::BTreeSet;

/// Counts, groups used and value ranges of a set.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Info {
    /// Number of examples.
    pub examples: usize,
    /// Number of events over all examples.
    pub events: usize,
    /// Most events in one example.
    pub max_events: usize,
    /// Group names used by input ranges.
    pub input_groups: BTreeSet<String>,
    /// Group names used by target ranges.
    pub target_groups: BTreeSet<String>,
    /// Whether some input (target) range has no group.
    pub ungrouped_inputs: bool,
    /// Whether some target range has no group.
    pub ungrouped_targets: bool,
    /// Smallest and largest non-NaN value in input ranges (`None` when there is none).
    pub input_values: Option<(f32, f32)>,
    /// Smallest and largest non-NaN value in target ranges.
    pub target_values: Option<(f32, f32)>,
    /// Highest unit index any ungrouped input range reaches (+1: the minimum network size).
    pub ungrouped_input_units: u64,
    /// Highest unit index any ungrouped target range reaches, plus one.
    pub ungrouped_target_units: u64,
    /// Whether NaN appears in a range.
    pub has_nan: bool,
}

fn widen(r: &mut Option<(f32, f32)>, v: f32) {
    if v.is_nan() {
        return;
    }
    *r = Some(match *r {
        None => (v, v),
        Some((a, b)) => (a.min(v), b.max(v)),
    });
}

impl Info {
    /// Summarizes `set`.
    pub fn of(set: &ExampleSet) -> Info {
        let mut info = Info::default();
        for ex in &set.examples {
            info.add(ex);
        }
        info
    }

    /// Adds one example (examples are summarized one at a time as they are read).
    pub fn add(&mut self, ex: &Example) {
        self.examples += 1;
        self.events += ex.events.len();
        self.max_events = self.max_events.max(ex.events.len());
        // Which lists serve as inputs (bit 0) and as targets (bit 1).
        let mut roles = vec![0u8; ex.lists.len()];
        for e in &ex.events {
            for (list, bit) in [(e.input, 1), (e.target, 2)] {
                if let Some(r) = list.and_then(|l| roles.get_mut(l)) {
                    *r |= bit;
                }
            }
        }
        for (list, role) in ex.lists.iter().zip(roles) {
            for (is_target, bit) in [(false, 1), (true, 2)] {
                if role & bit != 0 {
                    for r in list {
                        self.add_range(r, is_target);
                    }
                }
            }
        }
    }

    /// Adds the summary of another set (a corpus's next file).
    pub fn merge(&mut self, other: &Info) {
        self.examples += other.examples;
        self.events += other.events;
        self.max_events = self.max_events.max(other.max_events);
        self.input_groups.extend(other.input_groups.iter().cloned());
        self.target_groups
            .extend(other.target_groups.iter().cloned());
        self.ungrouped_inputs |= other.ungrouped_inputs;
        self.ungrouped_targets |= other.ungrouped_targets;
        for (mine, theirs) in [
            (&mut self.input_values, other.input_values),
            (&mut self.target_values, other.target_values),
        ] {
            if let Some((lo, hi)) = theirs {
                widen(mine, lo);
                widen(mine, hi);
            }
        }
        self.ungrouped_input_units = self.ungrouped_input_units.max(other.ungrouped_input_units);
        self.ungrouped_target_units = self
            .ungrouped_target_units
            .max(other.ungrouped_target_units);
        self.has_nan |= other.has_nan;
    }

    fn add_range(&mut self, r: &Range, is_target: bool) {
        let (groups, ungrouped, values, units) = if is_target {
            (
                &mut self.target_groups,
                &mut self.ungrouped_targets,
                &mut self.target_values,
                &mut self.ungrouped_target_units,
            )
        } else {
            (
                &mut self.input_groups,
                &mut self.ungrouped_inputs,
                &mut self.input_values,
                &mut self.ungrouped_input_units,
            )
        };
        match &r.group {
            Some(g) => {
                if !groups.contains(g) {
                    groups.insert(g.clone());
                }
            }
            None => *ungrouped = true,
        }
        let reach = match &r.kind {
            RangeKind::Dense { first, values: vs } => {
                // Comparisons with NaN are false: it is passed over.
                let (mut lo, mut hi, mut nan) = (f32::INFINITY, f32::NEG_INFINITY, false);
                for &v in vs {
                    nan |= v.is_nan();
                    lo = if v < lo { v } else { lo };
                    hi = if v > hi { v } else { hi };
                }
                self.has_nan |= nan;
                if lo <= hi {
                    widen(values, lo);
                    widen(values, hi);
                }
                *first as u64 + vs.len() as u64
            }
            RangeKind::Sparse { value, units: us } => {
                self.has_nan |= value.is_nan();
                widen(values, *value);
                us.end()
            }
        };
        if r.group.is_none() {
            *units = (*units).max(reach);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary() {
        let set =
            crate::lens::text::parse(b";\n2 I: (g 1) 3 -1 T: {-} * I: 0 0 5;\nb: 7-9;\n").unwrap();
        let i = Info::of(&set);
        assert_eq!((i.examples, i.events, i.max_events), (2, 3, 2));
        assert_eq!(i.input_groups.iter().collect::<Vec<_>>(), ["g"]);
        assert!(i.ungrouped_inputs && i.ungrouped_targets && i.has_nan);
        assert_eq!(i.input_values, Some((-1.0, 5.0)));
        assert_eq!(i.target_values, Some((1.0, 1.0)));
        assert_eq!(
            (i.ungrouped_input_units, i.ungrouped_target_units),
            (10, 10)
        );
    }
}
