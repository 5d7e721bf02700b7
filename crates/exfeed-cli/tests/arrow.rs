//! `exfeed convert` to and from Parquet and Arrow IPC files, through the real binary: round
//! trips from CTF, CBF and Lens that give back the same bytes, files of another schema, atomic
//! output.

mod common;
use common::{exfeed, exfeed_in, text};

use arrow_array::{Int32Array, RecordBatch, StringArray, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use parquet::file::reader::{FileReader, SerializedFileReader};
use std::path::Path;
use std::sync::Arc;

/// Sequences of several samples, ids that are not 0..n, a sparse stream absent from some
/// samples and empty in one sequence, aliases.
const CTF: &str = "\
3 |a 1 2 |b 3:1
3 |a 3 4
7 |a 5 6 |b 0:2 4:0.5
9 |a -0.125 1e-7 |b 1:3
9 |a 8 9
";

fn inputs() -> [&'static str; 4] {
    ["-i", "x:dense:2:a", "-i", "y:sparse:5:b"]
}

/// Runs exfeed in `d`, with `stdin` piped in, which must succeed; returns its stderr.
fn ok_with(args: &[&str], d: &Path, stdin: Option<&[u8]>) -> String {
    let out = exfeed_in(d, args, stdin);
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stderr)
}

/// Runs exfeed in `d`, which must succeed; returns its stderr.
fn ok(args: &[&str], d: &Path) -> String {
    ok_with(args, d, None)
}

#[test]
fn ctf_to_parquet_and_arrow_and_back_gives_the_same_text() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("in.ctf"), CTF).unwrap();
    for out in ["out.parquet", "out.arrow"] {
        let mut args = vec!["convert", "in.ctf", out];
        args.extend(inputs());
        assert_eq!(ok(&args, d), "");
        // Back without any flag: the schema's metadata has the streams, their dims and aliases.
        ok(&["convert", out, "back.ctf", "--force"], d);
        let back = std::fs::read_to_string(d.join("back.ctf")).unwrap();
        assert_eq!(back, CTF, "{out}");
    }
    // The Parquet file is what `--to parquet` writes under any name.
    let mut args = vec!["convert", "in.ctf", "named.data", "--to", "parquet"];
    args.extend(inputs());
    ok(&args, d);
    assert_eq!(
        std::fs::read(d.join("named.data")).unwrap(),
        std::fs::read(d.join("out.parquet")).unwrap()
    );
    // Parquet to Arrow IPC and on to CBF: the bytes of CTF straight to CBF.
    ok(&["convert", "out.parquet", "again.arrow"], d);
    ok(&["convert", "again.arrow", "via.cbf"], d);
    let mut args = vec!["convert", "in.ctf", "direct.cbf"];
    args.extend(inputs());
    ok(&args, d);
    assert_eq!(
        std::fs::read(d.join("via.cbf")).unwrap(),
        std::fs::read(d.join("direct.cbf")).unwrap()
    );
}

/// Runs exfeed in `d` with `stdin`, which must succeed; returns its stdout.
fn stdout_of(args: &[&str], d: &Path, stdin: Option<&[u8]>) -> String {
    let out = exfeed_in(d, args, stdin);
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn parquet_and_arrow_are_read_by_every_command_like_the_ctf_they_hold() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Many sequences in small row groups / record batches: several chunks each.
    let ctf: String = (0..200)
        .map(|k| format!("{} |a {k} 0.5 |b {}:1\n{} |a -1 {k}\n", k * 3, k % 5, k * 3))
        .collect();
    std::fs::write(d.join("in.ctf"), &ctf).unwrap();
    let with_inputs = |args: &[&'static str]| {
        let mut v = args.to_vec();
        v.extend(inputs());
        v
    };
    let want_dump = stdout_of(&with_inputs(&["dump", "in.ctf"]), d, None);
    let read = ["read", "--no-randomize", "--dump", "--minibatch-size", "64"];
    let mut read_ctf = read.to_vec();
    read_ctf.insert(1, "in.ctf");
    let want_read = stdout_of(&with_inputs(&read_ctf), d, None).replace("in.ctf", "F");
    let want_check = stdout_of(&with_inputs(&["check", "in.ctf"]), d, None);
    for (file, format) in [("s.parquet", "Parquet"), ("s.arrow", "Arrow IPC")] {
        ok(
            &with_inputs(&["convert", "in.ctf", file, "--chunk-size", "2K"]),
            d,
        );
        let info = stdout_of(&["info", file], d, None);
        assert!(info.contains(&format!("format: {format}")), "{info}");
        // The same sequences as the CTF file, by every command, without any --input.
        assert_eq!(stdout_of(&["dump", file], d, None), want_dump, "{file}");
        let mut read_file = read.to_vec();
        read_file.insert(1, file);
        assert_eq!(
            stdout_of(&read_file, d, None).replace(file, "F"),
            want_read,
            "{file}"
        );
        let check = stdout_of(&["check", file], d, None);
        let streams = |s: &str| {
            s.lines()
                .filter(|l| l.contains("input '"))
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(streams(&check), streams(&want_check), "{file}");
        // Shuffled, two workers: every sequence once between them.
        let mut keys = Vec::new();
        for rank in ["0", "1"] {
            let args = [
                "read",
                file,
                "--dump",
                "--minibatch-size",
                "32",
                "--num-workers",
                "2",
                "--worker-rank",
                rank,
            ];
            for line in stdout_of(&args, d, None).lines() {
                let mb: serde_json::Value = serde_json::from_str(line).unwrap();
                for s in mb["sequences"].as_array().unwrap() {
                    keys.push(s["key"].as_u64().unwrap());
                }
            }
        }
        keys.sort_unstable();
        assert_eq!(
            keys,
            (0..200).map(|k| k * 3).collect::<Vec<u64>>(),
            "{file}"
        );
        // From standard input (read into memory: the footer is at the end).
        let bytes = std::fs::read(d.join(file)).unwrap();
        let from = format.split(' ').next().unwrap().to_lowercase();
        let piped = stdout_of(&["dump", "-", "--from", &from], d, Some(&bytes));
        assert_eq!(piped, want_dump, "{file} from standard input");
    }
    // A configuration names them by exfeed's reader types.
    std::fs::write(
        d.join("p.cntk"),
        "reader = [ readerType = ParquetReader ; file = \"s.parquet\" ; randomize = false ]\n",
    )
    .unwrap();
    let by_config = stdout_of(
        &[
            "read",
            "--config",
            "p.cntk",
            "--dump",
            "--minibatch-size",
            "64",
        ],
        d,
        None,
    );
    assert_eq!(by_config.replace("s.parquet", "F"), want_read);
}

#[test]
fn a_stream_selection_reads_one_column_of_parquet_and_arrow() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("in.ctf"), CTF).unwrap();
    for out in ["all.parquet", "all.arrow"] {
        let mut args = vec!["convert", "in.ctf", out];
        args.extend(inputs());
        ok(&args, d);
        // `y` alone (the reader reads only its column; the library's arrow tests check the bytes
        // read), by its name, and by its name in the file exposed under another; written
        // under the alias the file keeps.
        for (i, input) in ["y:sparse:5", "labels:sparse:5:y"].iter().enumerate() {
            let ctf = format!("{out}.{i}.ctf");
            ok(&["convert", out, &ctf, "-i", input], d);
            assert_eq!(
                std::fs::read_to_string(d.join(&ctf)).unwrap(),
                "3 |b 3:1\n7 |b 0:2 4:0.5\n9 |b 1:3\n",
                "{out} {input}"
            );
        }
    }
}

#[test]
fn a_double_cbf_file_stays_double_and_chunk_size_makes_row_groups() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 200 sequences of values that float would round.
    let mut ctf = String::new();
    for k in 0..200 {
        ctf += &format!("{k} |a {} 0.1 |b {}:0.3\n", k as f64 / 3.0, k % 5);
    }
    std::fs::write(d.join("in.ctf"), &ctf).unwrap();
    let mut args = vec!["convert", "in.ctf", "in.cbf", "--precision", "double"];
    args.extend(inputs());
    ok(&args, d);
    ok(
        &["convert", "in.cbf", "small.parquet", "--chunk-size", "1K"],
        d,
    );
    ok(&["convert", "in.cbf", "big.parquet"], d);
    let groups = |name: &str| {
        let f = std::fs::File::open(d.join(name)).unwrap();
        let r = SerializedFileReader::new(f).unwrap();
        let m = r.metadata();
        let rows: i64 = m.row_groups().iter().map(|g| g.num_rows()).sum();
        (m.num_row_groups(), rows)
    };
    let (small, rows) = groups("small.parquet");
    assert_eq!(rows, 200);
    // Each sequence holds 8 + 2*8 + 8 + 4 (+ offsets) bytes: about 1 KiB is some 25 of them.
    assert!((5..=12).contains(&small), "{small} row groups");
    assert_eq!(groups("big.parquet"), (1, 200));
    // Back to CBF with the file's precision: the same bytes as the double CBF file.
    ok(&["convert", "small.parquet", "back.cbf"], d);
    assert_eq!(
        std::fs::read(d.join("back.cbf")).unwrap(),
        std::fs::read(d.join("in.cbf")).unwrap()
    );
    // --precision float makes a float file, whose CTF is float's shortest forms (the streams
    // are named as the CBF file stores them).
    ok(&["convert", "in.cbf", "f.arrow", "--precision", "float"], d);
    ok(&["convert", "f.arrow", "f.ctf"], d);
    let first = std::fs::read_to_string(d.join("f.ctf")).unwrap();
    assert!(
        first.starts_with("0 |x 0 0.1 |y 0:0.3\n1 |x 0.33333334 0.1 |y 1:0.3\n"),
        "{first}"
    );
}

#[test]
fn lens_and_standard_input_convert_to_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples");
    let ex = samples.join("patterns.ex");
    let layout = [
        "--input-groups",
        "in:4",
        "--target-groups",
        "out:2",
        "--nan",
        "0",
    ];
    let mut args = vec!["convert", ex.to_str().unwrap(), "lens.parquet"];
    args.extend(layout);
    ok(&args, d);
    let mut args = vec!["convert", ex.to_str().unwrap(), "lens.ctf"];
    args.extend(layout);
    ok(&args, d);
    ok(&["convert", "lens.parquet", "back.ctf"], d);
    assert_eq!(
        std::fs::read_to_string(d.join("back.ctf")).unwrap(),
        std::fs::read_to_string(d.join("lens.ctf")).unwrap()
    );
    // Standard input (a pipe: read once, streaming).
    let mut args = vec!["convert", "-", "piped.arrow"];
    args.extend(inputs());
    ok_with(&args, d, Some(CTF.as_bytes()));
    ok(&["convert", "piped.arrow", "piped.ctf"], d);
    assert!(std::fs::read_to_string(d.join("piped.ctf"))
        .unwrap()
        .starts_with("3 |a 1 2 |b 3:1\n"));
}

#[test]
fn a_file_parsed_on_every_core_is_the_parquet_of_the_same_text_streamed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 3 MB: several 1 MiB pieces parsed in parallel, and (64 KiB chunks) many row groups.
    let mut ctf = String::new();
    for k in 0..100_000 {
        ctf += &format!("{} |a {k} 0.25 |b {}:1.5\n", k / 3, k % 5);
        if k % 3 == 2 {
            ctf += &format!("{} |a -1 {}\n", k / 3, k % 7);
        }
    }
    assert!(ctf.len() > 3 << 20, "{} bytes", ctf.len());
    std::fs::write(d.join("in.ctf"), &ctf).unwrap();
    let mut args = vec!["convert", "in.ctf", "file.parquet", "--chunk-size", "64K"];
    args.extend(inputs());
    ok(&args, d);
    // Standard input is parsed as it arrives, on one thread.
    let mut args = vec!["convert", "-", "piped.parquet", "--chunk-size", "64K"];
    args.extend(inputs());
    ok_with(&args, d, Some(ctf.as_bytes()));
    let file = std::fs::read(d.join("file.parquet")).unwrap();
    assert!(file == std::fs::read(d.join("piped.parquet")).unwrap());
    let r = SerializedFileReader::new(std::fs::File::open(d.join("file.parquet")).unwrap());
    assert!(r.unwrap().metadata().num_row_groups() > 10);
    // A bad line past the first pieces: the error of a serial parse, and no output.
    let bad = ctf.replacen("|a 25000 0.25", "|a 25000 x", 1);
    std::fs::write(d.join("bad.ctf"), bad).unwrap();
    let mut args = vec!["convert", "bad.ctf", "bad.parquet"];
    args.extend(inputs());
    let out = exfeed_in(d, &args, None);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("bad.ctf:33334:"), "{err}");
    assert!(!d.join("bad.parquet").exists());
}

/// A Parquet file with `key` and a column `label` of strings: not exfeed's schema.
fn write_foreign(path: &Path, key: bool) {
    let mut fields = vec![Field::new("label", DataType::Utf8, false)];
    let mut columns: Vec<arrow_array::ArrayRef> = vec![Arc::new(StringArray::from(vec!["a"]))];
    if key {
        fields.insert(0, Field::new("key", DataType::UInt64, false));
        columns.insert(0, Arc::new(UInt64Array::from(vec![0u64])));
    } else {
        fields.push(Field::new("n", DataType::Int32, false));
        columns.push(Arc::new(Int32Array::from(vec![1])));
    }
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
    let f = std::fs::File::create(path).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(f, batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

#[test]
fn a_file_of_another_schema_is_an_error_naming_the_column_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_foreign(&d.join("strings.parquet"), true);
    let out = exfeed([
        "convert",
        d.join("strings.parquet").to_str().unwrap(),
        d.join("out.cbf").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("strings.parquet")
            && err.contains("column 'label' is Utf8, which is not an exfeed stream"),
        "{err}"
    );
    write_foreign(&d.join("nokey.parquet"), false);
    let out = exfeed([
        "convert",
        d.join("nokey.parquet").to_str().unwrap(),
        d.join("out.cbf").to_str().unwrap(),
    ]);
    let err = text(&out.stderr);
    assert!(
        err.contains("no column 'key'") && err.contains("label, n"),
        "{err}"
    );
    assert!(!d.join("out.cbf").exists());
    // A bad line in the CTF input: exit 1, and no Parquet file (not even a partial one).
    std::fs::write(d.join("bad.ctf"), format!("{CTF}10 |a 1 2 3\n")).unwrap();
    let mut args = vec!["convert", "bad.ctf", "bad.parquet"];
    args.extend(inputs());
    let out = exfeed_in(d, &args, None);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("bad.ctf:6:"),
        "{}",
        text(&out.stderr)
    );
    let left: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("bad.parquet") || n.starts_with(".exfeed-partial"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // An existing output is kept unless --force.
    std::fs::write(d.join("in.ctf"), CTF).unwrap();
    std::fs::write(d.join("kept.parquet"), "keep").unwrap();
    let mut args = vec!["convert", "in.ctf", "kept.parquet"];
    args.extend(inputs());
    let out = exfeed_in(d, &args, None);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read(d.join("kept.parquet")).unwrap(), b"keep");
}
