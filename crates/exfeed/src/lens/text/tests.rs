//! Parser and writer tests.

use super::*;
use crate::error::Error;
use crate::lens::binary;
use crate::lens::model::*;

fn ex(s: &str) -> ExampleSet {
    parse(s.as_bytes()).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

fn err(s: &str) -> Error {
    parse(s.as_bytes()).expect_err(s)
}

fn same_set(a: &ExampleSet, b: &ExampleSet) -> bool {
    binary::write(a).unwrap() == binary::write(b).unwrap()
}

#[test]
fn many_group_names_load_where_lens_segfaults() {
    let mut s = String::from(";\n");
    for g in 0..20 {
        s.push_str(&format!("I: (g{g} 1) 0.5 T: {{h{g}}} 2;\n"));
    }
    let set = ex(&s);
    assert_eq!(set.examples.len(), 20);
    let r = &set.examples[19].lists[set.examples[19].events[0].input.unwrap()][0];
    assert_eq!(r.group.as_deref(), Some("g19"));
    assert_eq!(
        r.kind,
        RangeKind::Dense {
            first: 1,
            values: vec![0.5]
        }
    );
}

#[test]
fn errors_say_where_and_what() {
    let e = err(";\nI: 1;\nI: 1 2\n[0 bogus:3] I: 1;\n");
    let loc = e.location();
    assert_eq!(
        (loc.line, loc.column, loc.byte),
        (Some(4), Some(4), Some(18))
    );
    assert_eq!(loc.context.as_deref(), Some("example 1"));
    assert!(
        e.message().contains("expected") && e.message().contains("found 'bogus:3]'"),
        "{e}"
    );
    let e = err(";\nI: 1 2x;");
    assert!(e.message().contains("found '2x;'"), "{e}");
}

#[test]
fn obsolete_counts_header_and_sharing() {
    let set = ex("3 2 max:2 actT:0.5;\n2 [0-1 min:1] b: 4 {-} 7-9;\n");
    assert_eq!(set.header.max_time, 2.0);
    assert_eq!(set.header.active_target, 0.5);
    let e = &set.examples[0];
    assert_eq!(e.events.len(), 2);
    assert!(e.events.iter().all(|v| v.min_time == 1.0));
    // b: with an implicit value: inputs take actI (1), targets actT (0.5), so no sharing.
    let (i, t) = (e.events[0].input.unwrap(), e.events[0].target.unwrap());
    assert_ne!(i, t);
    assert_eq!(e.events[1].input, Some(i));
    match &e.lists[t][0].kind {
        RangeKind::Sparse { value, units } => {
            assert_eq!(*value, 0.5);
            assert_eq!(units.spans(), Some(vec![(4, 4)]));
        }
        k => panic!("{k:?}"),
    }
    match &e.lists[i][1].kind {
        RangeKind::Sparse { value, units } => {
            assert!(value.is_nan());
            assert_eq!(units.spans(), Some(vec![(7, 9)]));
        }
        k => panic!("{k:?}"),
    }
}

#[test]
fn writer_fixes_lens_defects() {
    // NaN inside a dense range, and an ungrouped dense range at unit 0 after a grouped one.
    let set = ex(";\nI: (grp 2) 1 - 3 (0) - 4 T: {x -} 1-2 -5;\n");
    let text = write(&set).unwrap();
    let back = parse(&text).unwrap();
    assert!(same_set(&set, &back), "{}", String::from_utf8_lossy(&text));
    let t = String::from_utf8_lossy(&text);
    assert!(t.contains("(0) - 4") && !t.contains("nan"), "{t}");
}

#[test]
fn writer_keeps_procs_names_and_event_fields() {
    let src = "proc:{set x {1 2}}\ndefI:-;\nname:{a b} proc:(puts \"hi\") freq:2.5 3\n\
               [1 proc:{p} max:3 actI:0.25] [0 2] B: 1 [1] I: {g} 4;\n";
    let set = ex(src);
    assert_eq!(set.header.proc, "set x {1 2}");
    assert_eq!(set.examples[0].proc, "puts \"hi\"");
    let back = parse(&write(&set).unwrap()).unwrap();
    assert!(same_set(&set, &back));
    assert_eq!(back.examples[0].events[1].proc, "p");
}

#[test]
fn values_round_trip_exactly() {
    let mut rng = crate::number::XorShift(0x1234_5678_9abc_def0);
    let mut values = Vec::new();
    for _ in 0..5000 {
        let state = rng.next();
        let v = f32::from_bits(state as u32);
        if v.is_finite() {
            values.push(v);
        }
    }
    values.extend([0.1, -0.0, f32::MIN_POSITIVE, f32::MAX, 1e-45, 16777217.0]);
    let set = ExampleSet {
        header: SetHeader::default(),
        examples: vec![Example {
            name: String::new(),
            proc: String::new(),
            frequency: 1.0,
            events: vec![Event {
                input: Some(0),
                ..Event::from_header(&SetHeader::default())
            }],
            lists: vec![vec![Range {
                group: None,
                kind: RangeKind::Dense { first: 0, values },
            }]],
        }],
    };
    let back = parse(&write(&set).unwrap()).unwrap();
    assert!(same_set(&set, &back));
}

#[test]
fn many_star_lists_on_a_huge_example_stop_quickly() {
    let mut s = b";\n60000 ".to_vec();
    s.extend(b"[]".repeat(30000));
    s.extend(b";\n");
    let e = err(std::str::from_utf8(&s).unwrap());
    assert!(e.message().contains("too many events"), "{e}");
}

#[test]
fn tiny_files_cannot_declare_millions_of_events() {
    let e = err(&format!(";\n{}", "60000;\n".repeat(100)));
    assert!(e.message().contains("implausible number of events"), "{e}");
    let set = text_of_events(3000);
    assert_eq!(set.num_events(), 3000 * 7);
}

fn text_of_events(n: usize) -> ExampleSet {
    ex(&format!(";\n{}", "7 I: 1;\n".repeat(n)))
}

#[test]
fn blocks_nest_span_lines_and_skip_comment_lines() {
    let set = ex(";\nname:{a {b (c)}\n# gone\n  d} proc:\"x [y] z\" I: 1;\n");
    assert_eq!(set.examples[0].name, "a {b (c)}\n  d");
    assert_eq!(set.examples[0].proc, "x [y] z");
    let set = ex(";\r\nname:x;y I: 1;\r\n;\r\n");
    assert_eq!(set.examples[0].name, "x;y");
    assert_eq!(set.examples.len(), 2);
}

/// The events that have inputs and targets, and the first value or unit of each.
fn sets_of(set: &ExampleSet) -> Vec<(Option<String>, Option<String>)> {
    let ex = &set.examples[0];
    let show = |id: Option<usize>| {
        id.map(|i| match &ex.lists[i][0].kind {
            RangeKind::Dense { values, .. } => format!("dense {:?}", values),
            RangeKind::Sparse { units, .. } => format!("sparse {:?}", units),
        })
    };
    ex.events
        .iter()
        .map(|e| (show(e.input), show(e.target)))
        .collect()
}

/// Lens 2.63 counts an empty input (target) set as that event's set: the next set goes to the
/// next event (an empty set is no input at all, so an event list may still give it one).
#[test]
fn an_empty_set_still_takes_its_event_as_in_lens() {
    let sparse = |u: &[i32]| Some(format!("sparse {:?}", SparseUnits::List(u.to_vec())));
    let dense = |v: &[f32]| Some(format!("dense {v:?}"));
    for (text, want) in [
        // The case: a file that starts with ';', an empty `i:` before `t:0`.
        (
            ";\n3\ni: t:0\ni: 1 t:1\ni: t:2;",
            vec![
                (None, sparse(&[0])),
                (sparse(&[1]), sparse(&[1])),
                (None, sparse(&[2])),
            ],
        ),
        // Dense and targets alike; `B:` empty takes both.
        (
            ";\n3 I: T: 1 I: 2 T: 3 I: 4 T:;",
            vec![
                (None, dense(&[1.0])),
                (dense(&[2.0]), dense(&[3.0])),
                (dense(&[4.0]), None),
            ],
        ),
        (
            ";\n2 B: I: 5 T: 6;",
            vec![(None, None), (dense(&[5.0]), dense(&[6.0]))],
        ),
        // After an event list: the next set goes past the list's events.
        (
            ";\n3 [1] i: i: 2;",
            vec![(None, None), (None, None), (sparse(&[2]), None)],
        ),
        // The empty set is no input: a later event list may give that event one.
        (
            ";\n2 i: [0] i: 3;",
            vec![(sparse(&[3]), None), (None, None)],
        ),
    ] {
        assert_eq!(sets_of(&ex(text)), want, "{text:?}");
    }
    // Without the leading ';' the event count is taken for the obsolete header: one event, and
    // Lens refuses the second `i:` ("attempted to specify inputs for event 1", case r15).
    let e = err("3\ni: t:0\ni: 1 t:1\ni: t:2;");
    assert!(
        e.message()
            .starts_with("inputs for event 1, but the example has 1 events"),
        "{e}"
    );
    assert_eq!(e.location().line, Some(3));
}

/// Lens reads a lone '-' as NaN only when white space, the end, '}', ')' or ';' follows
/// (its isNumber); glued to anything else it is "something unexpected".
#[test]
fn a_nan_dash_glued_to_a_bracket_is_refused_as_in_lens() {
    for text in [
        ";\nI: 1 -(g) 2;",
        ";\nI: 1 -{g} 2;",
        ";\ni: 1 -[0] ;",
        ";\nI: 1 -\"g\";",
        ";\nT: 1 -*;",
    ] {
        let e = err(text);
        assert!(e.message().contains("found '-"), "{text:?}: {e}");
        assert_eq!(e.location().line, Some(2), "{text:?}");
    }
    for (text, nan_at) in [
        (";\nI: 1 - (g) 2;", 1),
        (";\nI: 1 -;", 1),
        (";\nI: (0) 1 -\n2;", 1),
        (";\nI: 1 2 -\t;", 2),
    ] {
        let set = ex(text);
        let ex0 = &set.examples[0];
        let RangeKind::Dense { values, .. } = &ex0.lists[ex0.events[0].input.unwrap()][0].kind
        else {
            panic!("{text:?}")
        };
        assert!(values[nan_at].is_nan(), "{text:?}: {values:?}");
    }
    // In a sparse range header, '-}' is NaN as the value.
    let set = ex(";\ni: {-} 1 2;");
    let RangeKind::Sparse { value, .. } = &set.examples[0].lists[0][0].kind else {
        panic!()
    };
    assert!(value.is_nan());
}

/// Each example of `text` skimmed and parsed from the same place: the same end, events,
/// frequency, name, lists and groups; or, where the parse fails, the same error.
fn skim_agrees(text: &str) {
    let b = text.as_bytes();
    let (h, mut pos, _) = parse_header_prefix(b).unwrap();
    let mut spare = Spare::default();
    for i in 0.. {
        let max = crate::limits::Limits::default().max_record_bytes;
        let parsed = parse_example_at(b, pos, i, &h, max, &mut Spare::default(), false);
        let skimmed = parse_example_at(b, pos, i, &h, max, &mut spare, true);
        match (parsed, skimmed) {
            (Ok(None), Ok(None)) => return,
            (Ok(Some((p, end))), Ok(Some((s, skim_end)))) => {
                assert_eq!(end, skim_end, "{text:?}: example {i} ends");
                assert_eq!(
                    (
                        p.events.len(),
                        p.frequency.to_bits(),
                        &p.name,
                        p.lists.len()
                    ),
                    (
                        s.events.len(),
                        s.frequency.to_bits(),
                        &s.name,
                        s.lists.len()
                    ),
                    "{text:?}: example {i}"
                );
                let groups = |e: &Example| -> Vec<Vec<Option<String>>> {
                    let lists = e.lists.iter();
                    lists
                        .map(|l| l.iter().map(|r| r.group.clone()).collect())
                        .collect()
                };
                assert_eq!(groups(&p), groups(&s), "{text:?}: example {i}");
                spare.keep(s);
                pos = end;
            }
            (Err(p), Ok(Some(_))) => {
                // A bad number or unit list: left to the full parse (reported when the
                // example is read).
                let p = p.to_string();
                assert!(p.contains("number") || p.contains("unit"), "{text:?}: {p}");
                return;
            }
            (Err(p), Err(s)) => {
                assert_eq!(p.to_string(), s.to_string(), "{text:?}");
                return;
            }
            (p, s) => panic!("{text:?}: example {i}: parsed {p:?}, skimmed {s:?}"),
        }
    }
}

#[test]
fn skimming_finds_what_parsing_finds() {
    for text in [
        ";\nname: a I: 1 2.5 -3e2 - .5 T: 0;\nname: {b c} freq: 0.25 2 I: (g 3) 1\n# x;y\n 2 t: 4-9 12;\n",
        "max: 2;\n3 [0 2] I: 1 [1] i: {g 0.5} 1 -4 7 B: 3 4;\nname: z b: * i: 2;\n",
        ";\nI: 1 2 ; I: 3\n;\n",
        ";\nproc: {set x ;} name: \"q;\" I: 1;\n",
        ";\nI: (in) 1 2 3 t: {out} 2 3 I:;\n",
        // Errors: the skim's are the parse's.
        ";\ni: 3 *;\n",
        ";\nI: 1 2 x;\n",
        ";\ni: 5-2;\n",
        ";\nI: 1 2",
        ";\n2 I: 1 I: 2 I: 3;\n",
        // Bad numbers and unit lists pass the skim.
        ";\nI: 1.2.3;\n",
        ";\nI: 1e;\n",
    ] {
        skim_agrees(text);
    }
}

#[test]
fn unit_numbers_with_leading_zeros_and_out_of_range() {
    let set = ex(";\ni: 00000000000003 2147483647 T: 1;\n");
    let list = &set.examples[0].lists[set.examples[0].events[0].input.unwrap()][0];
    assert_eq!(
        list.kind,
        RangeKind::Sparse {
            value: 1.0,
            units: SparseUnits::List(vec![3, 2147483647])
        }
    );
    for big in ["2147483648", "99999999999", "000000000002147483648"] {
        let e = err(&format!(";\ni: {big};\n"));
        assert!(
            e.message()
                .contains(&format!("unit number {big} out of range")),
            "{e}"
        );
    }
}

/// Long sparse lists (read a 64-byte block at a time where units are plain, each followed by
/// white space): the entries as written, whatever separates them (comment lines too), spans
/// and span ends among them, and the last unit glued to the `;` or a `t:`.
#[test]
fn long_unit_lists_read_as_written() {
    let mut rng = crate::number::XorShift(0x2545_f491_4f6c_dd1d);
    let mut next = |n: u64| rng.below(n);
    for round in 0..200 {
        let (mut text, mut want) = (String::from(";\ni:"), Vec::new());
        let mut unit = next(3) as i32;
        for _ in 0..next(120) + 1 {
            text.push_str(
                ["  ", " ", "\n", "\t", "\r\n", "\n# 1 2 3\n", " \x0b\x0c "][next(7) as usize],
            );
            match next(8) {
                0 => {
                    let end = unit + 1 + next(5) as i32;
                    text.push_str(&format!("{unit}-{end}"));
                    want.extend([unit, -end]);
                    unit = end;
                }
                1 if !want.is_empty() => {
                    text.push_str(&format!("-{unit}"));
                    want.push(-unit);
                }
                2 => {
                    // Leading zeros: 9 digits (the most read a block at a time), or 10.
                    let width = 9 + next(2) as usize;
                    text.push_str(&format!("{unit:0width$}"));
                    want.push(unit);
                }
                _ => {
                    text.push_str(&unit.to_string());
                    want.push(unit);
                }
            }
            unit += 1 + next(100_000) as i32;
        }
        text.push_str([";\n", " ;\n", " t: 1;\n"][round % 3]);
        let set = ex(&text);
        let ranges = &set.examples[0].lists[0];
        match &ranges[0].kind {
            RangeKind::Sparse {
                units: SparseUnits::List(got),
                ..
            } => assert_eq!(got, &want, "{text}"),
            k => panic!("{k:?}"),
        }
    }
}

/// A bad unit deep in a long list (past the first blocks) is reported where it is, as when it
/// comes first.
#[test]
fn a_bad_unit_deep_in_a_long_list_is_placed_exactly() {
    // Short lists are read one unit at a time, long ones a block at a time after 8 units.
    for count in [1, 3, 7, 8, 9, 40] {
        a_bad_unit_after(count);
    }
}

fn a_bad_unit_after(count: usize) {
    let units: String = (0..count).map(|i| format!(" {}", i * 7)).collect();
    for (bad, message) in [
        ("12x", "expected a sparse unit number, found 'x'"),
        ("3000000000", "unit number 3000000000 out of range"),
        ("*", "'*' may only be the first thing"),
        ("5-2", "invalid sparse unit range 5-2"),
    ] {
        for line_break in [" ", "\n"] {
            let head = format!(";\ni:{units}{line_break}");
            let text = format!("{head}{bad} 1 2;\n");
            let e = err(&text);
            let loc = e.location();
            // The place of the bad token's first byte (for '12x', of the 'x').
            let at = head.len() + if bad == "12x" { 2 } else { 0 };
            let line = text[..at].matches('\n').count() + 1;
            let column = at - text[..at].rfind('\n').map_or(0, |i| i + 1) + 1;
            assert_eq!(
                (loc.byte, loc.line, loc.column),
                (Some(at as u64), Some(line as u64), Some(column as u64)),
                "{bad:?}: {e}"
            );
            assert!(e.message().contains(message), "{bad:?}: {e}");
        }
    }
}

/// `text` parsed as usual and with dense values read one at a time: the same set, bit for bit,
/// or the same error at the same place.
fn vectors_agree(text: &[u8]) -> std::result::Result<ExampleSet, Error> {
    let usual = parse(text);
    let reference = parse_one_at_a_time(text);
    match (&usual, &reference) {
        (Ok(a), Ok(b)) => assert!(same_set(a, b), "{}", String::from_utf8_lossy(text)),
        (Err(a), Err(b)) => {
            assert_eq!(a.to_string(), b.to_string());
            let (a, b) = (a.location(), b.location());
            assert_eq!(
                (a.line, a.column, a.byte),
                (b.line, b.column, b.byte),
                "{}",
                String::from_utf8_lossy(text)
            );
        }
        (a, b) => panic!("{}: {a:?} against {b:?}", String::from_utf8_lossy(text)),
    }
    usual
}

/// Runs of numbers of one shape (and of none: exponents, `.5`, `5.`, a lone `-`, 8 digits and
/// more), with every sign, digit count and separator, read as the general lexer reads each.
#[test]
fn dense_values_read_in_vectors_are_those_read_one_at_a_time() {
    let mut rng = crate::number::XorShift(0x2545_f491_4f6c_dd1d);
    let mut next = move |n: u64| rng.below(n);
    let specials = [
        ".5",
        "5.",
        "-0",
        "-",
        "1e-3",
        "-.5",
        "0.0000001",
        "123456789012",
        "16777217",
        "9999999",
        "99999999",
        "-9999.999",
        "1234567.",
        "0.1234567",
        "7e0",
        "1.5E+2",
        "00000.1",
    ];
    let mut read_alike = 0;
    for _ in 0..400 {
        let events = 1 + next(3);
        let mut text = format!(";\n{events}\n");
        let mut tokens = Vec::new();
        for _ in 0..events {
            text.push_str("I:");
            for _ in 0..next(12) {
                // A run of one shape.
                let (neg, int, frac) = (next(3) == 0, next(9) as usize, next(9) as usize);
                let dot = next(4) != 0;
                for _ in 0..1 + next(14) {
                    let token = if next(25) == 0 {
                        specials[next(specials.len() as u64) as usize].to_string()
                    } else {
                        let digits = |n: usize, next: &mut dyn FnMut(u64) -> u64| -> String {
                            (0..n).map(|_| (b'0' + next(10) as u8) as char).collect()
                        };
                        let mut t = String::from(if neg { "-" } else { "" });
                        t += &digits(int.max(1), &mut next);
                        if dot {
                            t.push('.');
                            t += &digits(frac, &mut next);
                        }
                        t
                    };
                    text.push_str(match next(40) {
                        0 => "  ",
                        1 => "\t",
                        2 => "\n",
                        _ => " ",
                    });
                    text.push_str(&token);
                    tokens.push(token);
                }
            }
            text.push_str(if next(2) == 0 { " t: 1\n" } else { "\n" });
        }
        text.push_str(";\n");
        let set = vectors_agree(text.as_bytes()).unwrap_or_else(|e| panic!("{text}: {e}"));
        let values: Vec<f32> = set.examples[0]
            .lists
            .iter()
            .flat_map(|l| l.iter())
            .flat_map(|r| match &r.kind {
                RangeKind::Dense { values, .. } => values.clone(),
                _ => Vec::new(),
            })
            .collect();
        let want: Vec<u32> = tokens
            .iter()
            .map(|t| t.parse::<f32>().unwrap_or(f32::NAN).to_bits())
            .collect();
        let got: Vec<u32> = values.iter().map(|v| v.to_bits()).collect();
        assert_eq!(got.len(), want.len(), "{text}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let nan = f32::from_bits(*g).is_nan() && f32::from_bits(*w).is_nan();
            assert!(nan || g == w, "{text}: token {i} {:?}", tokens[i]);
        }
        read_alike += tokens.len();
    }
    assert!(read_alike > 10_000, "{read_alike} numbers");
}

/// A bad number anywhere among numbers read four at a time is found and placed as when they
/// are read one at a time: at its own line, column and byte.
#[test]
fn a_bad_dense_value_among_alike_ones_is_placed_exactly() {
    for bad in [
        "0.1x3",
        "0..12",
        "0.1-3",
        "--0.1",
        "0.12a",
        "0.123e",
        "0.12.",
        "0.1\u{0}2",
        "0.1é",
    ] {
        for line in [25, 38] {
            for i in 0..line + 3 {
                let mut text = String::from(";\nname: x\nI:");
                let mut at = 0;
                for k in 0..line + 3 {
                    text.push(if k == line { '\n' } else { ' ' });
                    if k == i {
                        at = text.len();
                        text.push_str(bad);
                    } else {
                        text.push_str(&format!("{}.{:03}", k % 10, (k * 37) % 1000));
                    }
                }
                text.push_str(" t: 3;\n");
                let e = vectors_agree(text.as_bytes()).expect_err(&text);
                let loc = e.location();
                let line_of = |b: usize| 1 + text[..b].matches('\n').count() as u64;
                let byte = loc.byte.expect("a byte") as usize;
                assert!(
                    (at..at + bad.len()).contains(&byte),
                    "{bad:?} at {at}, error at {byte}: {e}"
                );
                assert_eq!(loc.line, Some(line_of(byte)), "{e}");
                let column = byte - text[..byte].rfind('\n').map_or(0, |n| n + 1) + 1;
                assert_eq!(loc.column, Some(column as u64), "{e}");
            }
        }
    }
}

/// Every `.ex` of the conformance corpus (plain and gzipped) reads the same with and without
/// vectors, whether it loads or not.
#[test]
fn conformance_ex_files_read_the_same_with_vectors() {
    let Some(dir) = crate::ctf::tests::crate_conformance("lens") else {
        return;
    };
    let mut files = Vec::new();
    let mut dirs = vec![dir];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let name = path.to_string_lossy();
            if path.is_dir() {
                dirs.push(path);
            } else if name.ends_with(".ex") || name.ends_with(".ex.gz") {
                files.push(path);
            }
        }
    }
    assert!(files.len() > 100, "{} files", files.len());
    let mut loaded = 0;
    for path in &files {
        let bytes = crate::io::open_bytes(&crate::io::InputPath::new(path)).unwrap();
        loaded += usize::from(vectors_agree(&bytes).is_ok());
    }
    assert!(loaded > 50, "{loaded} of {} load", files.len());
}
