//! Converting a whole input, in any format, to a file in any format: the library's
//! `exfeed convert` ([`convert`]).

use super::{cbf_to_ctf, ctf_to_cbf, CtfToCbfOptions};
use crate::batch::SequenceBatch;
use crate::cbf::{CbfFile, CbfWriter, CbfWriterOptions};
use crate::config::DEFAULT_CHUNK_SIZE_BYTES;
use crate::dataset::DataSet;
use crate::element::{Element, Precision};
use crate::error::{DiagnosticSink, Error, ErrorKind, Location, Result};
use crate::format::FileFormat;
use crate::io::{AtomicOutput, OutputOptions};
use crate::stream::StreamSpec;
use std::io::Write;
use std::path::Path;

/// The options of [`convert`].
#[derive(Debug, Clone, PartialEq)]
pub struct ConvertOptions {
    /// The output's format; `None`: from its name ([`FileFormat::from_name`]: `.cbf`/`.bin`
    /// CBF, `.ex` Lens text, `.bex` Lens binary, through `.gz`/`.bz2`; anything else CTF).
    pub to: Option<FileFormat>,
    /// The element type of CBF output, and the one a Lens file or a corpus is read in for CTF
    /// output; `None`: the input's (a CBF file's stored type), else float.
    pub precision: Option<Precision>,
    /// The chunk size of CBF output, in bytes.
    pub chunk_size: u64,
    /// Replace the output if it exists (otherwise an existing output is refused, before
    /// anything is read, and kept).
    pub overwrite: bool,
    /// Sync the output to disk before it is renamed into place. Without it a crash of the
    /// machine (not of the process) soon after may leave a short or empty file under its name.
    pub sync: bool,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        ConvertOptions {
            to: None,
            precision: None,
            chunk_size: DEFAULT_CHUNK_SIZE_BYTES,
            overwrite: false,
            sync: true,
        }
    }
}

/// What [`convert`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Converted {
    /// The input's format.
    pub from: FileFormat,
    /// The output's format.
    pub to: FileFormat,
    /// Sequences written (a Lens file's examples).
    pub sequences: u64,
    /// Chunks written (CBF output only).
    pub chunks: u64,
}

/// The conversions [`convert`] does, for messages.
const SUPPORTED: &str = "CTF <-> CBF, CBF -> CBF, Lens -> Lens, CTF or CBF, Parquet or Arrow IPC \
                         -> CTF or CBF, any -> Parquet or Arrow IPC";

/// Converts `data` (see [`crate::open`]; its [`OpenOptions`](crate::OpenOptions) say how CTF is
/// read and the layout a Lens file is materialized for) to the file `output`, atomically: a
/// temporary file beside it is renamed into place once complete, so `output` holds either what
/// it held before or the whole new file, never part of one. `output` must not exist unless
/// [`ConvertOptions::overwrite`] is set, and may never be the input. Names ending in
/// `.gz`/`.bz2` are compressed.
///
/// The conversions: CTF to CBF and back, CBF to CBF (re-chunked, another element type), a Lens
/// file to Lens (text or binary), and a Lens file to CTF or CBF (one sequence per example, one
/// sample per event, streams `input` and `target`: this needs the layout). A corpus
/// ([`crate::open_corpus`]) converts to one CTF or CBF file, its shards one after the other, each
/// sequence keyed by its corpus key (`shard << 40 | key`, the key `exfeed read` gives it; CBF
/// stores no keys). With the `arrow` feature, any input converts to Parquet or Arrow IPC (one
/// row per sequence), and those convert to CTF or CBF. Problems tolerated by the error budget
/// (CTF's `max_errors`) go to `sink`; the first one beyond it stops the conversion, and the
/// output is then not written.
///
/// ```
/// use exfeed::convert::{convert, ConvertOptions};
/// use exfeed::format::FileFormat;
/// use exfeed::{open, OpenOptions};
///
/// let dir = std::env::temp_dir().join(format!("exfeed-convert-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let (ctf, cbf) = (dir.join("in.ctf"), dir.join("out.cbf"));
/// std::fs::write(&ctf, "0 |x 1 2\n0 |x 3 4\n1 |x 5 6\n")?;
/// let options = OpenOptions { inputs: vec!["x:dense:2".parse()?], ..OpenOptions::default() };
/// let done = convert(open(&ctf, &options)?, &cbf, &ConvertOptions::default(), &mut Vec::new())?;
/// assert_eq!((done.to, done.sequences, done.chunks), (FileFormat::Cbf, 2, 1));
/// // The output exists now: converting onto it again needs `overwrite`.
/// let again = convert(open(&ctf, &options)?, &cbf, &ConvertOptions::default(), &mut Vec::new());
/// assert_eq!(again.unwrap_err().kind(), exfeed::ErrorKind::Refused);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn convert(
    data: DataSet,
    output: &Path,
    options: &ConvertOptions,
    sink: &mut dyn DiagnosticSink,
) -> Result<Converted> {
    convert_with_progress(data, output, options, sink, &mut |_, _| {})
}

/// As [`convert`], calling `progress(done, total)` with the input bytes done and the total
/// along the way, where the total is known (CTF to CBF, CBF to CTF).
pub fn convert_with_progress(
    data: DataSet,
    output: &Path,
    options: &ConvertOptions,
    sink: &mut dyn DiagnosticSink,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Converted> {
    let from = data.format();
    let to = options.to.unwrap_or_else(|| FileFormat::from_name(output));
    let is_lens = |f: FileFormat| matches!(f, FileFormat::LensText | FileFormat::LensBinary);
    let unsupported = |what: String| {
        Error::new(
            ErrorKind::Unsupported,
            Location::default().with_file(output.display().to_string()),
            what,
        )
    };
    // A corpus is read as sequences, shard after shard: to CTF or CBF (its shards joined).
    let corpus = data.is_corpus();
    if corpus && is_lens(to) {
        return Err(unsupported(format!(
            "a corpus converts to one CTF or CBF file (Lens shards with the network's layout), \
             not to {}: convert each file on its own",
            to.describe()
        )));
    }
    // A corpus also converts CTF shards to one CTF file.
    let supported = matches!(
        (from, to),
        (FileFormat::Ctf, FileFormat::Cbf)
            | (FileFormat::Cbf, FileFormat::Ctf | FileFormat::Cbf)
            | (FileFormat::LensText | FileFormat::LensBinary, _)
            | (
                FileFormat::Parquet | FileFormat::ArrowIpc,
                FileFormat::Ctf | FileFormat::Cbf
            )
            | (_, FileFormat::Parquet | FileFormat::ArrowIpc)
    ) || (corpus && to == FileFormat::Ctf);
    if !supported {
        return Err(unsupported(format!(
            "converting {} to {} is not supported ({SUPPORTED})",
            from.describe(),
            to.describe()
        )));
    }
    if is_lens(from) && !is_lens(to) && data.options().lens.is_none() {
        return Err(Error::config(format!(
            "converting a Lens example file to {} needs the network's layout: inputGroups \
             and targetGroups (NAME:SIZE,... in network order)",
            to.describe()
        ))
        .in_file(data.name().to_string()));
    }
    let outputs = output_options(options, &data);
    let commit = |out: AtomicOutput| {
        if options.sync {
            out.commit()
        } else {
            out.commit_unsynced()
        }
    };
    let name = data.name().to_string();
    let precision = options
        .precision
        .or(data.stored_precision())
        .unwrap_or_default();
    let mut done = Converted {
        from,
        to,
        sequences: 0,
        chunks: 0,
    };
    let cbf_options = CbfWriterOptions {
        chunk_size: options.chunk_size,
        precision,
    };
    match (from, to) {
        (_, FileFormat::Parquet | FileFormat::ArrowIpc) => {
            done.sequences = write_columnar(data, output, to, options, sink)?;
        }
        (
            FileFormat::LensText | FileFormat::LensBinary,
            FileFormat::LensText | FileFormat::LensBinary,
        ) => {
            // One example at a time; `.bex` starts with the example count, which a text
            // input gives only when read to its end: a file is counted in a first pass, the
            // examples of a pipe are spooled to a temporary file.
            let binary = to == FileFormat::LensBinary;
            let counted = match (binary, from) {
                (true, FileFormat::LensText) => data.lens_counts()?.map(|(examples, _)| examples),
                _ => None,
            };
            let mut out = AtomicOutput::create(output, &outputs)?;
            let mut examples = data.lens_examples(false)?;
            let count = examples.declared_examples().or(counted);
            let spool_in = out.temp_dir();
            let mut write = |bytes: &[u8]| out.write_all(bytes).map_err(|e| Error::io(output, e));
            done.sequences =
                crate::io::write_lens_stream(&mut examples, binary, count, &spool_in, &mut write)
                    .map_err(|e| {
                        // Reading errors name the input already; writing ones name the output.
                        if e.location().file.is_some() {
                            e
                        } else {
                            e.in_file(output.display().to_string())
                        }
                    })? as u64;
            commit(out)?;
        }
        (FileFormat::Ctf, FileFormat::Cbf) if !corpus => {
            let ctf = data.options().ctf();
            let out = AtomicOutput::create(output, &outputs)?;
            let bytes = data.into_bytes()?;
            let total = bytes.len() as u64;
            let convert = CtfToCbfOptions {
                file: name,
                ctf,
                cbf: cbf_options,
            };
            let (out, stats) = ctf_to_cbf(&bytes, &convert, out, sink, |d| progress(d, total))?;
            commit(out)?;
            (done.sequences, done.chunks) = (stats.sequences, stats.chunks);
        }
        (FileFormat::Cbf, FileFormat::Ctf) if !corpus => {
            let out = AtomicOutput::create(output, &outputs)?;
            let bytes = data.into_bytes()?;
            let total = bytes.len() as u64;
            let file = CbfFile::open(&*bytes).map_err(|e| e.in_file(name.clone()))?;
            let (out, stats) =
                cbf_to_ctf(&file, out, |d| progress(d, total)).map_err(|e| e.in_file(name))?;
            commit(out)?;
            done.sequences = stats.sequences;
        }
        (_, FileFormat::Cbf) => {
            // CBF re-chunked or given another element type, or a Lens file materialized.
            let out = AtomicOutput::create(output, &outputs)?;
            let mut seqs = data.sequences::<f64>()?;
            let specs = seqs.streams().to_vec();
            let fill = |b: &mut SequenceBatch<f64>| seqs.next_batch(b, sink);
            let (out, sequences, chunks) = write_cbf(&specs, fill, out, cbf_options)?;
            (done.sequences, done.chunks) = (sequences, chunks);
            commit(out)?;
        }
        (_, _) => {
            // A Lens file materialized, or a corpus, to CTF: values read in the precision
            // they are stored in (double CBF shards lose nothing), or asked for.
            let out = AtomicOutput::create(output, &outputs)?;
            let (out, sequences) = match precision {
                Precision::Float => sequences_to_ctf::<f32>(data, out, &name, sink)?,
                Precision::Double => sequences_to_ctf::<f64>(data, out, &name, sink)?,
            };
            done.sequences = sequences;
            commit(out)?;
        }
    }
    Ok(done)
}

/// Writes `data` to `output` as Parquet or Arrow IPC (`to`), with the `arrow` feature.
#[cfg(feature = "arrow")]
fn write_columnar(
    data: DataSet,
    output: &Path,
    to: FileFormat,
    options: &ConvertOptions,
    sink: &mut dyn DiagnosticSink,
) -> Result<u64> {
    crate::convert::write_arrow_file(data, output, to, options, sink)
}

/// Without the `arrow` feature, Parquet and Arrow IPC outputs are refused.
#[cfg(not(feature = "arrow"))]
fn write_columnar(
    _: DataSet,
    output: &Path,
    to: FileFormat,
    _: &ConvertOptions,
    _: &mut dyn DiagnosticSink,
) -> Result<u64> {
    Err(Error::new(
        ErrorKind::Unsupported,
        Location::default().with_file(output.display().to_string()),
        format!(
            "writing {} needs exfeed built with the `arrow` feature",
            to.describe()
        ),
    ))
}

/// Writes the sequences of `data`, read as `T`, to `out` as CTF (see [`write_ctf`]).
fn sequences_to_ctf<T: Element>(
    data: DataSet,
    out: AtomicOutput,
    name: &str,
    sink: &mut dyn DiagnosticSink,
) -> Result<(AtomicOutput, u64)> {
    let mut seqs = data.sequences::<T>()?;
    let specs = seqs.streams().to_vec();
    let fill = |b: &mut SequenceBatch<T>| seqs.next_batch(b, sink);
    write_ctf(&specs, fill, out, name)
}

/// Writes the sequences `fill` gives (it fills a batch of `specs` and says whether it did) to
/// `out` as CBF. Returns `out`, the sequences and the chunks written.
pub fn write_cbf<T: Element, W: Write>(
    specs: &[StreamSpec],
    mut fill: impl FnMut(&mut SequenceBatch<T>) -> Result<bool>,
    out: W,
    options: CbfWriterOptions,
) -> Result<(W, u64, u64)> {
    let mut writer = CbfWriter::new(out, specs, options)?;
    let mut batch = SequenceBatch::<T>::new(specs);
    while fill(&mut batch)? {
        writer.write_batch(&batch)?;
    }
    let sequences = writer.sequences();
    let (out, chunks) = writer.finish_with_chunks()?;
    Ok((out, sequences, chunks.len() as u64))
}

/// Writes the sequences `fill` gives (batches of `specs`) to `out` as CTF: each sequence's key
/// its id, each stream under its alias if it has one. `name` (the input's) is for errors.
/// Returns `out` and the sequences written.
pub fn write_ctf<T: Element, W: Write>(
    specs: &[StreamSpec],
    mut fill: impl FnMut(&mut SequenceBatch<T>) -> Result<bool>,
    out: W,
    name: &str,
) -> Result<(W, u64)> {
    let mut out = std::io::BufWriter::new(out);
    let mut batch = SequenceBatch::<T>::new(specs);
    let mut text = Vec::new();
    let mut sequences = 0;
    while fill(&mut batch)? {
        for q in 0..batch.len() {
            text.clear();
            crate::ctf::write_sequence(&mut text, &batch, q, specs)
                .map_err(|e| e.in_file(name.to_string()))?;
            out.write_all(&text)?;
        }
        sequences += batch.len() as u64;
    }
    Ok((out.into_inner().map_err(|e| e.into_error())?, sequences))
}

/// Where and how a conversion of `data` writes: never onto one of its files (a corpus has many),
/// and an output in a bucket with the settings the inputs were opened with.
pub(super) fn output_options(options: &ConvertOptions, data: &DataSet) -> OutputOptions {
    OutputOptions {
        force: options.overwrite,
        inputs: data.files(),
        storage_options: data.options().read.storage_options().clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{open, OpenOptions, StreamSpec};

    fn ctf_options() -> OpenOptions {
        OpenOptions {
            inputs: vec![
                "x:dense:2".parse::<StreamSpec>().unwrap(),
                "y:sparse:5".parse().unwrap(),
            ],
            ..OpenOptions::default()
        }
    }

    fn run(input: &Path, output: &Path, options: &ConvertOptions) -> Result<Converted> {
        let data = open(input, &ctf_options())?;
        convert(data, output, options, &mut Vec::new())
    }

    #[test]
    fn ctf_to_cbf_and_back_gives_the_same_values() {
        let dir = tempfile::tempdir().unwrap();
        let ctf = dir.path().join("in.ctf");
        std::fs::write(&ctf, "0 |x 1 2 |y 4:0.5\n0 |x 3 4\n1 |x 5 6 |y 0:1\n").unwrap();
        let (cbf, back) = (dir.path().join("o.cbf"), dir.path().join("back.ctf"));
        let done = run(&ctf, &cbf, &ConvertOptions::default()).unwrap();
        assert_eq!((done.from, done.to), (FileFormat::Ctf, FileFormat::Cbf));
        assert_eq!((done.sequences, done.chunks), (2, 1));
        let done = run(&cbf, &back, &ConvertOptions::default()).unwrap();
        assert_eq!(
            (done.from, done.to, done.sequences),
            (FileFormat::Cbf, FileFormat::Ctf, 2)
        );
        // CBF keeps no ids: the sequences are numbered from 0, as here already.
        assert_eq!(
            std::fs::read_to_string(&back).unwrap(),
            "0 |x 1 2 |y 4:0.5\n0 |x 3 4\n1 |x 5 6 |y 0:1\n"
        );
        // CBF to CBF in doubles, and the format from `to` rather than the name.
        let doubles = dir.path().join("doubles.data");
        let options = ConvertOptions {
            to: Some(FileFormat::Cbf),
            precision: Some(Precision::Double),
            ..ConvertOptions::default()
        };
        run(&cbf, &doubles, &options).unwrap();
        let data = open(&doubles, &OpenOptions::default()).unwrap();
        assert_eq!(data.stored_precision(), Some(Precision::Double));
    }

    #[test]
    fn existing_outputs_are_kept_unless_overwrite_and_errors_leave_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (good, bad) = (dir.path().join("good.ctf"), dir.path().join("bad.ctf"));
        std::fs::write(&good, "0 |x 1 2 |y 0:1\n").unwrap();
        std::fs::write(&bad, "0 |x 1 2 |y 0:1\n1 |x 1 oops |y 0:1\n").unwrap();
        let out = dir.path().join("out.cbf");
        std::fs::write(&out, "old").unwrap();
        let err = run(&good, &out, &ConvertOptions::default()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Refused);
        assert_eq!(std::fs::read(&out).unwrap(), b"old");
        let overwrite = ConvertOptions {
            overwrite: true,
            ..ConvertOptions::default()
        };
        let err = run(&bad, &out, &overwrite).unwrap_err();
        assert!(err.to_string().contains("bad.ctf:2:"), "{err}");
        assert_eq!(std::fs::read(&out).unwrap(), b"old");
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["bad.ctf", "good.ctf", "out.cbf"], "no partial file");
        run(&good, &out, &overwrite).unwrap();
        assert_eq!(
            CbfFile::open(std::fs::read(&out).unwrap())
                .unwrap()
                .num_sequences(),
            1
        );
        // Onto its own input: refused even with overwrite.
        let err = run(&out, &out, &overwrite).unwrap_err();
        assert!(err.to_string().contains("same file as an input"), "{err}");
    }

    #[test]
    fn lens_converts_to_lens_and_with_a_layout_to_ctf() {
        let dir = tempfile::tempdir().unwrap();
        let ex = dir.path().join("in.ex");
        std::fs::write(&ex, "name: a I: 1 0 T: 0 1;\nname: b I: 0 1 T: 1 0;\n").unwrap();
        let bex = dir.path().join("out.bex.gz");
        let data = open(&ex, &OpenOptions::default()).unwrap();
        let done = convert(data, &bex, &ConvertOptions::default(), &mut Vec::new()).unwrap();
        assert_eq!((done.to, done.sequences), (FileFormat::LensBinary, 2));
        let back = open(&bex, &OpenOptions::default())
            .unwrap()
            .lens_set()
            .unwrap();
        assert_eq!(back.examples[1].name, "b");

        let ctf = dir.path().join("out.ctf");
        let data = open(&ex, &OpenOptions::default()).unwrap();
        let err = convert(data, &ctf, &ConvertOptions::default(), &mut Vec::new()).unwrap_err();
        assert!(
            err.to_string().contains("needs the network's layout"),
            "{err}"
        );
        let layout = OpenOptions {
            lens: Some(crate::LensLayout {
                input_groups: crate::lens::materialize::Layout::parse("in:2").unwrap(),
                target_groups: crate::lens::materialize::Layout::parse("out:2").unwrap(),
                nan: None,
                frequencies: false,
            }),
            ..OpenOptions::default()
        };
        let data = open(&ex, &layout).unwrap();
        convert(data, &ctf, &ConvertOptions::default(), &mut Vec::new()).unwrap();
        assert_eq!(
            std::fs::read_to_string(&ctf).unwrap(),
            "0 |input 1 0 |target 0 1\n1 |input 0 1 |target 1 0\n"
        );
    }

    #[test]
    fn unsupported_pairs_are_refused_before_writing() {
        let dir = tempfile::tempdir().unwrap();
        let ctf = dir.path().join("in.ctf");
        std::fs::write(&ctf, "0 |x 1 2 |y 0:1\n").unwrap();
        let out = dir.path().join("out.ex");
        let err = run(&ctf, &out, &ConvertOptions::default()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported);
        assert!(
            err.to_string()
                .contains("converting CTF to Lens text (.ex) is not supported"),
            "{err}"
        );
        assert!(!out.exists());
        // The columnar formats by any of their names: never taken for CTF. Written with the
        // `arrow` feature, refused without it.
        for (name, format, magic) in [
            ("out.parquet", "Parquet", &b"PAR1"[..]),
            ("out.pq", "Parquet", b"PAR1"),
            ("out.arrow", "Arrow IPC", b"ARROW1"),
            ("out.feather", "Arrow IPC", b"ARROW1"),
            ("out.ipc", "Arrow IPC", b"ARROW1"),
        ] {
            let out = dir.path().join(name);
            let result = run(&ctf, &out, &ConvertOptions::default());
            if cfg!(feature = "arrow") {
                assert_eq!(result.unwrap().to.describe(), format);
                assert!(std::fs::read(&out).unwrap().starts_with(magic), "{name}");
                continue;
            }
            let err = result.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Unsupported);
            let want = format!("writing {format} needs exfeed built with the `arrow` feature");
            assert!(err.to_string().contains(&want), "{err}");
            assert!(!out.exists(), "{name}");
        }
    }
}
