//! The `.ex` writer.

use crate::element::Element;
use crate::error::{Error, Result};
use crate::lens::model::*;

/// Writes a set as `.ex` text that reads back (here and in Lens) to the same set. Unlike Lens's
/// own writer, NaN is written as `-` everywhere, every range keeps its `()`/`{}` header, and
/// values are written in the shortest form that reads back to the same `f32`.
///
/// Fails on what text cannot carry: infinite values, and strings that cannot be quoted so as
/// to read back unchanged (unbalanced brackets, a `#` starting a line, a leading line break).
pub fn write(set: &ExampleSet) -> Result<Vec<u8>> {
    let mut out = write_header(&set.header)?;
    for (i, ex) in set.examples.iter().enumerate() {
        write_example(&mut out, ex, &set.header)
            .map_err(|e| e.in_context(format!("example {i}")))?;
    }
    Ok(out)
}

/// The set header's text, ending with its `;` (see [`write()`]).
pub fn write_header(h: &SetHeader) -> Result<Vec<u8>> {
    let mut w = Writer { out: Vec::new() };
    let d = SetHeader::default();
    if !h.proc.is_empty() {
        w.out.extend_from_slice(b"proc:");
        w.string(&h.proc, "the set proc")?;
        w.out.push(b'\n');
    }
    let fields = [
        ("max", h.max_time, d.max_time),
        ("min", h.min_time, d.min_time),
        ("grace", h.grace_time, d.grace_time),
        ("defI", h.default_input, d.default_input),
        ("actI", h.active_input, d.active_input),
        ("defT", h.default_target, d.default_target),
        ("actT", h.active_target, d.active_target),
    ];
    for (k, v, dv) in fields {
        if v.to_bits() != dv.to_bits() {
            w.field(k, v)?;
            w.out.push(b'\n');
        }
    }
    w.out.extend_from_slice(b";\n");
    Ok(w.out)
}

/// Appends one example of a set with header `h` as text (see [`write()`]).
pub fn write_example(out: &mut Vec<u8>, ex: &Example, h: &SetHeader) -> Result<()> {
    let mut w = Writer {
        out: std::mem::take(out),
    };
    let done = w.example(ex, h);
    *out = w.out;
    done
}

struct Writer {
    out: Vec<u8>,
}

impl Writer {
    fn value(&mut self, v: f32) -> Result<()> {
        if v.is_nan() {
            self.out.push(b'-');
        } else if v.is_infinite() {
            return Err(Error::invalid(0, "an infinite value has no .ex text form"));
        } else {
            v.write_shortest(&mut self.out);
        }
        Ok(())
    }

    fn field(&mut self, k: &str, v: f32) -> Result<()> {
        self.out.extend_from_slice(k.as_bytes());
        self.out.push(b':');
        self.value(v)
    }

    /// A string in braces, checked to read back unchanged.
    fn string(&mut self, s: &str, what: &str) -> Result<()> {
        let b = s.as_bytes();
        let mut depth: Vec<u8> = Vec::new();
        let mut ok = !b.starts_with(b"\n") && !b.starts_with(b"\r\n") && !b.contains(&0);
        let mut i = 0;
        while ok && i < b.len() {
            let c = b[i];
            if c == b'\\' {
                i += 2;
                continue;
            }
            if c == b'\r' || (c == b'#' && i > 0 && b[i - 1] == b'\n') {
                ok = false;
            } else if depth.last() == Some(&c) {
                depth.pop();
            } else if matches!(c, b'{' | b'(' | b'[' | b'"') {
                depth.push(match c {
                    b'{' => b'}',
                    b'(' => b')',
                    b'[' => b']',
                    _ => b'"',
                });
            } else if matches!(c, b'}' | b')' | b']') {
                ok = false;
            }
            i += 1;
        }
        if !ok || !depth.is_empty() || i > b.len() {
            return Err(Error::invalid(
                0,
                format!("{what} {s:?} cannot be written as .ex text"),
            ));
        }
        self.out.push(b'{');
        self.out.extend_from_slice(b);
        self.out.push(b'}');
        Ok(())
    }

    fn events(&mut self, evs: &[usize]) {
        self.out.push(b'[');
        let mut i = 0;
        let mut sep = false;
        while i < evs.len() {
            let mut j = i;
            while j + 1 < evs.len() && evs[j + 1] == evs[j] + 1 {
                j += 1;
            }
            if sep {
                self.out.push(b' ');
            }
            sep = true;
            self.out.extend_from_slice(evs[i].to_string().as_bytes());
            if j > i {
                self.out.push(b'-');
                self.out.extend_from_slice(evs[j].to_string().as_bytes());
            }
            i = j + 1;
        }
        self.out.push(b']');
    }

    fn example(&mut self, ex: &Example, h: &SetHeader) -> Result<()> {
        if !ex.name.is_empty() {
            self.out.extend_from_slice(b"name:");
            self.string(&ex.name, "the example name")?;
            self.out.push(b'\n');
        }
        if !ex.proc.is_empty() {
            self.out.extend_from_slice(b"proc:");
            self.string(&ex.proc, "the example proc")?;
            self.out.push(b'\n');
        }
        if ex.frequency.to_bits() != 1.0f32.to_bits() {
            self.field("freq", ex.frequency)?;
            self.out.push(b'\n');
        }
        let n = ex.events.len();
        if n != 1 {
            self.out.extend_from_slice(format!("{n}\n").as_bytes());
        }
        for (k, e) in ex.events.iter().enumerate() {
            if !e.is_special(h) {
                continue;
            }
            self.out.extend_from_slice(format!("[{k}").as_bytes());
            if !e.proc.is_empty() {
                self.out.extend_from_slice(b" proc:");
                self.string(&e.proc, "an event proc")?;
            }
            let fields = [
                ("max", e.max_time, f32::NAN),
                ("min", e.min_time, f32::NAN),
                ("grace", e.grace_time, f32::NAN),
                ("defI", e.default_input, h.default_input),
                ("actI", e.active_input, h.active_input),
                ("defT", e.default_target, h.default_target),
                ("actT", e.active_target, h.active_target),
            ];
            for (name, v, dv) in fields {
                if !same(v, dv) {
                    self.out.push(b' ');
                    self.field(name, v)?;
                }
            }
            self.out.extend_from_slice(b"]\n");
        }
        let (users_in, users_t) = ex.list_users();
        let users = |l: usize, target: bool| -> &Vec<usize> {
            if target {
                &users_t[l]
            } else {
                &users_in[l]
            }
        };
        let mut done_in = vec![false; ex.lists.len()];
        let mut done_t = vec![false; ex.lists.len()];
        for target in [false, true] {
            for e in &ex.events {
                let Some(l) = (if target { e.target } else { e.input }) else {
                    continue;
                };
                let Some(list) = ex.lists.get(l) else {
                    return Err(Error::invalid(
                        0,
                        format!(
                            "event refers to list {l}, the example has {}",
                            ex.lists.len()
                        ),
                    ));
                };
                let done = if target { done_t[l] } else { done_in[l] };
                if done {
                    continue;
                }
                let evs = users(l, target);
                let both = !target && users(l, true) == evs;
                self.events(evs);
                self.out.extend_from_slice(match (target, both) {
                    (false, true) => b" B:",
                    (false, false) => b" I:",
                    _ => b" T:",
                });
                if both {
                    done_t[l] = true;
                }
                if target {
                    done_t[l] = true;
                } else {
                    done_in[l] = true;
                }
                self.ranges(list)?;
                self.out.push(b'\n');
            }
        }
        self.out.extend_from_slice(b";\n");
        Ok(())
    }

    fn ranges(&mut self, list: &RangeList) -> Result<()> {
        for r in list {
            self.out.push(b' ');
            match &r.kind {
                RangeKind::Dense { first, values } => {
                    self.out.push(b'(');
                    if let Some(g) = &r.group {
                        self.string(g, "a group name")?;
                        self.out.push(b' ');
                    }
                    self.out.extend_from_slice(format!("{first})").as_bytes());
                    for &v in values {
                        self.out.push(b' ');
                        self.value(v)?;
                    }
                }
                RangeKind::Sparse { value, units } => {
                    self.out.push(b'{');
                    if let Some(g) = &r.group {
                        self.string(g, "a group name")?;
                        self.out.push(b' ');
                    }
                    self.value(*value)?;
                    self.out.push(b'}');
                    match units {
                        SparseUnits::All => self.out.extend_from_slice(b" *"),
                        SparseUnits::List(l) => {
                            if check_unit_list(l).is_err() {
                                return Err(Error::invalid(0, "invalid sparse unit list"));
                            }
                            for (i, &u) in l.iter().enumerate() {
                                // A span end follows its start without a space (`0-3`); one
                                // that follows another span end stands alone (`-5`).
                                if u < 0 && i > 0 && l[i - 1] >= 0 {
                                    self.out.extend_from_slice(format!("{u}").as_bytes());
                                } else {
                                    self.out.extend_from_slice(format!(" {u}").as_bytes());
                                }
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
