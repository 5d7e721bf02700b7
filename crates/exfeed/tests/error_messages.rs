//! Error messages, verbatim, from tables of (input, message), as serde_json tests its own: what a
//! user reads is part of the interface. Each case goes through the public entry point of its
//! format. A byte offset appears only where the place is known (never "(byte 0)" for a whole
//! file), an example number where the example is the place; an input that ends too soon is an
//! end-of-input error (`is_eof`), which pipe mode waits on instead of failing.

use exfeed::ctf::CtfOptions;
use exfeed::SequenceBatch;

#[test]
fn ctf_errors() {
    let opts = CtfOptions {
        inputs: vec!["a:dense:2".parse().unwrap(), "s:sparse:5".parse().unwrap()],
        ..Default::default()
    };
    for (input, message) in [
        ("0 |a 1 2 3\n", "t.ctf:1:4 (byte 3): input 'a': has 3 dense values, dim is 2"),
        ("0 |s 7:1\n", "t.ctf:1:6 (byte 5): input 's': sparse index 7 is out of range, dim is 5"),
        (
            "0 |a 1 x\n",
            "t.ctf:1:8 (byte 7): input 'a': malformed number 'x': unexpected 'x' \
             (expected [+-]digits[.digits][e[+-]digits])",
        ),
        (
            "0 |s 1\n",
            "t.ctf:1:7 (byte 6): input 's': expected ':' after sparse index 1, found the end of the line",
        ),
        ("", "t.ctf: the file is empty: no data lines"),
        ("0 |a 1 2\nq |a 1 2\n", "t.ctf:2:1 (byte 9): expected '|' and an input name, found 'q'"),
        (
            "|a 1e999 2\n",
            "t.ctf:1:4 (byte 3): input 'a': number '1e999' is out of range for precision float",
        ),
    ] {
        let mut batch = SequenceBatch::<f32>::new(&opts.inputs);
        let e = exfeed::ctf::parse(input.as_bytes(), &opts, &mut batch, &mut Vec::new())
            .expect_err(input)
            .in_file("t.ctf");
        assert_eq!(e.to_string(), message, "{input:?}");
    }
}

#[test]
fn cbf_errors() {
    let specs = vec!["x:dense:2".parse().unwrap()];
    let mut b = SequenceBatch::<f32>::new(&specs);
    b.stream_mut(0).push_dense_sample(&[1.0, 2.0]);
    b.finish_sequence(0);
    let mut w = exfeed::cbf::CbfWriter::new(Vec::new(), &specs, Default::default()).unwrap();
    w.write_batch(&b).unwrap();
    let good = w.finish().unwrap();
    assert_eq!(good.len(), 79);
    let with = |at: usize, byte: u8| {
        let mut v = good.clone();
        v[at] = byte;
        v
    };
    for (what, bytes, message) in [
        ("empty", vec![], "t.cbf (byte 0): not a CBF file: 0 bytes, too short for the magic"),
        ("7 bytes", good[..7].to_vec(), "t.cbf (byte 0): not a CBF file: 7 bytes, too short for the magic"),
        (
            "text",
            b"hello world, this is not a cbf file at all".to_vec(),
            "t.cbf (byte 0): not a CBF file: magic is 0x6f77206f6c6c6568, expected 0x636e746b5f62696e",
        ),
        ("version 9", with(8, 9), "t.cbf (byte 8): unsupported CBF version 9, expected 1"),
        (
            "cut by a byte",
            good[..78].to_vec(),
            "t.cbf (byte 70): header offset 7168 is out of range (expected 12..=54)",
        ),
        (
            "header offset flipped",
            with(71, good[71] ^ 0xff),
            "t.cbf (byte 71): header offset 227 is out of range (expected 12..=55)",
        ),
    ] {
        let e = exfeed::cbf::CbfFile::open(&bytes[..]).expect_err(what).in_file("t.cbf");
        assert_eq!(e.to_string(), message, "{what}");
    }
}

#[test]
fn lens_errors() {
    for (input, message, eof) in [
        ("", "t.ex: example file empty (shorter than 4 bytes)", false),
        (
            ";\nI: 1\n",
            "t.ex:3:1 (byte 7): example 0: expected ';' at the end of the example, found end of file",
            true,
        ),
        (
            ";\nI: 1 x;\n",
            "t.ex:2:6 (byte 7): example 0: expected '[', 'I:', 'i:', 'T:', 't:', 'B:', 'b:' or ';', found 'x;'",
            false,
        ),
        ("max: x;\n", "t.ex:1:6 (byte 5): expected a number after 'max:', found 'x;'", false),
        (
            ";\nname: {a I: 1;\n",
            "t.ex:2:7 (byte 8): example 0: '{' is never closed (expected '}', found end of file)",
            true,
        ),
        (
            ";\n[3] I: 1;\n",
            "t.ex:2:2 (byte 3): example 0: event 3 out of range (the example has events 0 to 0)",
            false,
        ),
        (";\ni: 1-0;\n", "t.ex:2:4 (byte 5): example 0: invalid sparse unit range 1-0", false),
    ] {
        let e = exfeed::lens::parse(input.as_bytes()).expect_err(input);
        assert_eq!(e.is_eof(), eof, "{input:?}");
        assert_eq!(e.in_file("t.ex").to_string(), message, "{input:?}");
    }
    let set = exfeed::lens::parse(b";\nI: 1 2 T: 3;\nname:x 2 i: 4 i: 5;\n").unwrap();
    let bex = exfeed::lens::binary::write(&set).unwrap();
    for (cut, message) in [
        (5, "t.bex (byte 4): file ends inside sizeof(real) (4 bytes needed, 1 left)"),
        (20, "t.bex (byte 17): file ends inside the set graceTime (4 bytes needed, 3 left)"),
        (
            bex.len() - 3,
            "t.bex (byte 193): example 1: file ends inside the number of target sets (4 bytes needed, 1 left)",
        ),
    ] {
        let e = exfeed::lens::parse(&bex[..cut]).expect_err("cut");
        assert!(e.is_eof(), "{e}");
        assert_eq!(e.in_file("t.bex").to_string(), message);
    }
}

#[test]
fn an_io_error_says_its_cause_once() {
    let e = exfeed::open("/nonexistent/x.ctf", &Default::default())
        .err()
        .unwrap();
    assert_eq!(e.kind(), exfeed::ErrorKind::Io);
    assert_eq!(
        e.to_string(),
        "/nonexistent/x.ctf: No such file or directory (os error 2)"
    );
    // Displayed, so not also the source: a chain printer would say it twice.
    assert!(std::error::Error::source(&e).is_none());
    assert_eq!(
        e.io_error().map(|io| io.kind()),
        Some(std::io::ErrorKind::NotFound)
    );
}
