//! `exfeed.lens.load`: a Lens example set with its examples, events and (for a network
//! layout) the input and target vectors Lens would load.

use crate::errors::{bad_arg, detached};
use crate::options::extract_layout;
use exfeed::io::InputPath;
use exfeed::lens::materialize::Materializer;
use exfeed::lens::ExampleSet;
use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::path::PathBuf;

/// Reads a whole example file; returns the raw parts the Python `exfeed.lens` module wraps:
/// (header dict, [example dict]). With both layouts, each example has `inputs` and `targets`
/// float32 arrays [events, units].
#[pyfunction]
#[pyo3(signature = (path, *, input_groups=None, target_groups=None, nan=None))]
pub fn _lens_load<'py>(
    py: Python<'py>,
    path: PathBuf,
    input_groups: Option<&Bound<'py, PyAny>>,
    target_groups: Option<&Bound<'py, PyAny>>,
    nan: Option<f32>,
) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyList>)> {
    let inputs = extract_layout("input_groups", input_groups)?;
    let targets = extract_layout("target_groups", target_groups)?;
    let layout = match (inputs, targets) {
        (Some(i), Some(t)) => Some(Materializer::new(i, t)),
        (None, None) => None,
        _ => {
            return Err(bad_arg(
                "target_groups",
                "give input_groups and target_groups together",
            ))
        }
    };
    let (set, vectors) = detached(py, move || {
        let input = InputPath::new(&path);
        let bytes = exfeed::io::open_bytes(&input)?;
        let set = exfeed::lens::parse(&bytes).map_err(|e| e.in_file(input.display_name()))?;
        let vectors = match layout {
            Some(m) => {
                Some(materialize(&set, m, nan).map_err(|e| e.in_file(path.display().to_string()))?)
            }
            None => None,
        };
        Ok((set, vectors))
    })?;
    let h = &set.header;
    let header = PyDict::new(py);
    header.set_item("proc", &h.proc)?;
    for (k, v) in [
        ("max_time", h.max_time),
        ("min_time", h.min_time),
        ("grace_time", h.grace_time),
        ("default_input", h.default_input),
        ("active_input", h.active_input),
        ("default_target", h.default_target),
        ("active_target", h.active_target),
    ] {
        header.set_item(k, v)?;
    }
    let examples = PyList::empty(py);
    let mut vectors = vectors.map(Vec::into_iter);
    for ex in &set.examples {
        let d = PyDict::new(py);
        d.set_item("name", &ex.name)?;
        d.set_item("freq", ex.frequency)?;
        d.set_item("proc", &ex.proc)?;
        let events = PyList::empty(py);
        for e in &ex.events {
            let ev = PyDict::new(py);
            ev.set_item("proc", &e.proc)?;
            ev.set_item("max_time", e.max_time)?;
            ev.set_item("min_time", e.min_time)?;
            ev.set_item("grace_time", e.grace_time)?;
            events.append(ev)?;
        }
        d.set_item("events", events)?;
        if let Some((input, target)) = vectors.as_mut().and_then(Iterator::next) {
            let n = ex.events.len();
            let rows = |v: Vec<f32>| {
                let units = v.len() / n.max(1);
                PyArray1::from_vec(py, v).reshape([n, units])
            };
            d.set_item("inputs", rows(input)?)?;
            d.set_item("targets", rows(target)?)?;
        }
        examples.append(d)?;
    }
    Ok((header, examples))
}

/// Per example, its events' input and target vectors, row after row.
fn materialize(
    set: &ExampleSet,
    mut m: Materializer,
    nan: Option<f32>,
) -> exfeed::Result<Vec<(Vec<f32>, Vec<f32>)>> {
    let (mut input, mut target) = (Vec::new(), Vec::new());
    let mut out = Vec::with_capacity(set.examples.len());
    for (i, ex) in set.examples.iter().enumerate() {
        let (mut ins, mut tgs) = (Vec::new(), Vec::new());
        for k in 0..ex.events.len() {
            m.event(ex, k, &mut input, &mut target, &mut exfeed::error::Ignore)
                .map_err(|e| e.in_context(format!("example {i}, event {k}")))?;
            ins.extend_from_slice(&input);
            tgs.extend_from_slice(&target);
        }
        if let Some(n) = nan {
            ins.iter_mut()
                .chain(tgs.iter_mut())
                .filter(|x| x.is_nan())
                .for_each(|x| *x = n);
        }
        out.push((ins, tgs));
    }
    Ok(out)
}
