//! The structural JSON-lines form of an example set that `exfeed dump FILE.ex|.bex` prints:
//! one line for the set header, then one line per example with its events and range lists
//! (events point to lists by index, so sharing stays visible). NaN is `null`; numbers are in
//! the shortest form that reads back to the same `f32`.

use super::model::*;
use crate::json::{write_array, write_integer, write_number, write_numbers, write_str};

fn key(out: &mut Vec<u8>, first: &mut bool, k: &str) {
    if !*first {
        out.push(b',');
    }
    *first = false;
    write_str(out, k);
    out.push(b':');
}

fn num(out: &mut Vec<u8>, first: &mut bool, k: &str, v: f32) {
    key(out, first, k);
    write_number(out, v);
}

fn opt_index(out: &mut Vec<u8>, v: Option<usize>) {
    match v {
        Some(i) => write_integer(out, i),
        None => out.extend_from_slice(b"null"),
    }
}

/// The timing and default-value parameters a set header and an event both have, in this order.
const PARAMETER_KEYS: [&str; 7] = [
    "maxTime",
    "minTime",
    "graceTime",
    "defaultInput",
    "activeInput",
    "defaultTarget",
    "activeTarget",
];

fn parameters(out: &mut Vec<u8>, first: &mut bool, values: [f32; 7]) {
    for (k, v) in PARAMETER_KEYS.iter().zip(values) {
        num(out, first, k, v);
    }
}

/// Appends the header line: `{"set": {"proc": ..., "maxTime": ..., ...}, "examples": N}`.
pub fn write_header(out: &mut Vec<u8>, set: &ExampleSet) {
    write_set_header(
        out,
        &set.header,
        Some((set.examples.len(), set.num_events())),
    );
}

/// Appends the header line for a set header alone; `counts` (examples, events) are `null`
/// when not known, as when examples are read one at a time from a pipe.
pub fn write_set_header(out: &mut Vec<u8>, h: &SetHeader, counts: Option<(usize, usize)>) {
    out.extend_from_slice(b"{\"set\":{");
    let mut f = true;
    key(out, &mut f, "proc");
    write_str(out, &h.proc);
    parameters(out, &mut f, h.parameters());
    match counts {
        Some((examples, events)) => {
            out.extend_from_slice(b"},\"examples\":");
            write_integer(out, examples);
            out.extend_from_slice(b",\"events\":");
            write_integer(out, events);
        }
        None => out.extend_from_slice(b"},\"examples\":null,\"events\":null"),
    }
    out.extend_from_slice(b"}\n");
}

/// Appends one example line: `{"index", "name", "proc", "freq", "events": [{"proc", "maxTime",
/// ..., "input": LIST|null, "target": LIST|null}], "lists": [[RANGE, ...], ...]}`, a range being
/// `{"group": G|null, "first": F, "values": [...]}` (dense) or
/// `{"group": G|null, "value": V, "units": "*"|[[FROM, TO], ...]}` (sparse).
pub fn write_example(out: &mut Vec<u8>, index: usize, ex: &Example) {
    out.push(b'{');
    let mut f = true;
    key(out, &mut f, "index");
    write_integer(out, index);
    key(out, &mut f, "name");
    write_str(out, &ex.name);
    key(out, &mut f, "proc");
    write_str(out, &ex.proc);
    num(out, &mut f, "freq", ex.frequency);
    key(out, &mut f, "events");
    write_array(out, &ex.events, |out, e| {
        out.push(b'{');
        let mut g = true;
        key(out, &mut g, "proc");
        write_str(out, &e.proc);
        parameters(out, &mut g, e.parameters());
        key(out, &mut g, "input");
        opt_index(out, e.input);
        key(out, &mut g, "target");
        opt_index(out, e.target);
        out.push(b'}');
    });
    key(out, &mut f, "lists");
    write_array(out, &ex.lists, |out, list| {
        write_array(out, list, write_range)
    });
    out.extend_from_slice(b"}\n");
}

/// Appends one range of a list (see [`write_example`]).
fn write_range(out: &mut Vec<u8>, r: &Range) {
    out.push(b'{');
    let mut g = true;
    key(out, &mut g, "group");
    match &r.group {
        Some(name) => write_str(out, name),
        None => out.extend_from_slice(b"null"),
    }
    match &r.kind {
        RangeKind::Dense { first, values } => {
            key(out, &mut g, "first");
            write_integer(out, first);
            key(out, &mut g, "values");
            write_numbers(out, values);
        }
        RangeKind::Sparse { value, units } => {
            num(out, &mut g, "value", *value);
            key(out, &mut g, "units");
            match units.spans() {
                None => out.extend_from_slice(b"\"*\""),
                Some(spans) => write_array(out, spans, |out, (a, b)| {
                    out.push(b'[');
                    write_integer(out, a);
                    out.push(b',');
                    write_integer(out, b);
                    out.push(b']');
                }),
            }
        }
    }
    out.push(b'}');
}

/// Appends one example in its materialized form, exactly
/// `{"name": ..., "freq": ..., "proc": ..., "events": [{"input": [...], "target": [...]}, ...]}`
/// (NaN as `null`), the vectors as `m` loads them into a network.
pub fn write_materialized(
    out: &mut Vec<u8>,
    ex: &Example,
    m: &mut super::materialize::Materializer,
    sink: &mut dyn crate::error::DiagnosticSink,
) -> crate::Result<()> {
    let (mut input, mut target) = (Vec::new(), Vec::new());
    out.push(b'{');
    let mut f = true;
    key(out, &mut f, "name");
    write_str(out, &ex.name);
    num(out, &mut f, "freq", ex.frequency);
    key(out, &mut f, "proc");
    write_str(out, &ex.proc);
    key(out, &mut f, "events");
    out.push(b'[');
    for k in 0..ex.events.len() {
        m.event(ex, k, &mut input, &mut target, sink)?;
        if k > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"input\":");
        write_numbers(out, &input);
        out.extend_from_slice(b",\"target\":");
        write_numbers(out, &target);
        out.push(b'}');
    }
    out.extend_from_slice(b"]}\n");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_is_json_with_structure() {
        let set =
            crate::lens::text::parse(b";\nname:{a b} 3 [0-1] b: {g -} 1-3 5 [2] T: (2) 0.1 -;\n")
                .unwrap();
        let mut out = Vec::new();
        write_header(&mut out, &set);
        write_example(&mut out, 0, &set.examples[0]);
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["examples"], 1);
        let mut streamed = Vec::new();
        write_set_header(&mut streamed, &set.header, None);
        let streamed: serde_json::Value = serde_json::from_slice(&streamed).unwrap();
        assert_eq!(streamed["set"], lines[0]["set"]);
        assert!(streamed["examples"].is_null() && streamed["events"].is_null());
        assert_eq!(lines[0]["set"]["activeInput"], 1);
        let ex = &lines[1];
        assert_eq!(ex["name"], "a b");
        assert_eq!(ex["events"][0]["input"], ex["events"][1]["input"]);
        let shared = ex["events"][0]["input"].as_u64().unwrap() as usize;
        assert_eq!(ex["events"][0]["target"], shared);
        let r = &ex["lists"][shared][0];
        assert_eq!(r["group"], "g");
        assert!(r["value"].is_null());
        assert_eq!(r["units"], serde_json::json!([[1, 3], [5, 5]]));
    }
}

#[cfg(test)]
mod materialized_tests {
    use super::*;
    use crate::lens::materialize::{Layout, Materializer};

    #[test]
    fn materialized_line() {
        let set =
            crate::lens::text::parse(b"defT:-;\nname:x freq:2 2 I: 1 0 T: 1 i: 1;\n").unwrap();
        let mut m = Materializer::new(
            Layout::parse("in:2").unwrap(),
            Layout::parse("out:1").unwrap(),
        );
        let mut out = Vec::new();
        let mut sink: Vec<crate::error::Diagnostic> = Vec::new();
        write_materialized(&mut out, &set.examples[0], &mut m, &mut sink).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"name": "x", "freq": 2, "proc": "",
                "events": [{"input": [1, 0], "target": [1]}, {"input": [0, 1], "target": [null]}]})
        );
    }
}
