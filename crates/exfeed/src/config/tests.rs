use super::*;
use crate::element::Precision;
use crate::error::ErrorKind;
use crate::format::FileFormat;
use crate::options::{ChunkSize, IndexMode, ReadOptions};
use crate::stream::Storage;

const CTF_READER: &str = r#"readerType = "CNTKTextFormatReader"; file = "d.ctf""#;

/// A config with a top-level reader block made of `body` (lines of the reader block).
fn reader(body: &str) -> String {
    format!("deviceId = -1\nreader = [\n{body}\n]\n")
}

#[test]
fn spec_composite_example_with_braces_and_semicolons() {
    // The composite example of the CTF spec, closed as the page should have closed it.
    let text = r#"
reader = {
        verbosity = 0 ;
        randomize = true;
        deserializers = ({
            type = "CNTKTextFormatDeserializer" ; module = "CNTKTextFormatReader"
            file = "/home/mydata/SampleInput.txt" # See the first example for Windows style path example
            maxErrors = 100
            skipSequenceIds = false
            traceLevel = 2
            input = {
                qu1fea = {alias = "qui"; dim = 95589; format = "sparse"}
                qu2fea = {alias = "quj"; dim = 95589; format = "sparse"}
                pairweight = {alias = "wij"; dim = 1; format = "dense"}
            }
        })
}
"#;
    let cfg = ReaderConfig::from_cntk_str(text, "c", None).unwrap();
    assert_eq!(
        cfg.trace_level, 0,
        "verbosity sets the reader's trace level"
    );
    assert!(cfg.randomize);
    let d = &cfg.deserializers[0];
    assert_eq!(d.file, Path::new("/home/mydata/SampleInput.txt"));
    assert_eq!(
        (d.max_errors, d.skip_sequence_ids, d.trace_level),
        (Some(100), Some(false), Some(2))
    );
    assert_eq!(d.effective_max_errors(&cfg), 100);
    assert_eq!(d.effective_trace_level(&cfg), 2);
    assert_eq!(
        d.effective_read(&cfg).chunk_bytes(),
        DEFAULT_CHUNK_SIZE_BYTES
    );
    assert!(
        !cfg.sample_based_randomization_window,
        "a CTF deserializer: the window counts chunks"
    );
    let names: Vec<_> = d
        .inputs
        .iter()
        .map(|i| (i.name.as_str(), i.name_in_file(), i.storage, i.dim))
        .collect();
    assert_eq!(
        names,
        [
            ("qu1fea", "qui", Storage::Sparse, 95589),
            ("qu2fea", "quj", Storage::Sparse, 95589),
            ("pairweight", "wij", Storage::Dense, 1)
        ]
    );
}

#[test]
fn spec_extended_example_sets_every_reader_parameter() {
    let text = r#"
precision = "double"
reader = [
    readerType = "CNTKTextFormatReader"
    file = "/home/mydata/SampleInput.txt"
    randomize = true
    randomizationWindow = 30
    randomizationSeed = 7
    sampleBasedRandomizationWindow = T
    skipSequenceIds = false
    maxErrors = 100
    traceLevel = 2
    chunkSizeInBytes = 1024
    keepDataInMemory = true
    frameMode = 0
    cacheIndex = true
    index = "full"
    input = [
        Some_very_long_input_name = [ alias = "a"; dim = 3; format = "dense" ]
        Some_other_also_very_long_input_name = [ alias = "b"; dim = 2; format = "dense" ]
    ]
]
"#;
    let cfg = ReaderConfig::from_cntk_str(text, "c", None).unwrap();
    let want = ReaderConfig {
        precision: Precision::Double,
        randomize: true,
        randomization_seed: 7,
        randomization_window: Some(30),
        sample_based_randomization_window: true,
        randomization_window_bytes: None,
        skip_sequence_ids: false,
        trace_level: 2,
        max_errors: 100,
        read: ReadOptions::new()
            .with_chunk_size(ChunkSize::Bytes(1024))
            .with_keep_in_memory(true)
            .with_frame_mode(false)
            .with_cache_index(true)
            .with_index(IndexMode::Full),
        lens_mode: None,
        limits: Default::default(),
        equalize: false,
        equalize_mode: Default::default(),
        randomizer: crate::reader::Randomizer::Exfeed,
        deserializers: vec![DeserializerConfig {
            format: FileFormat::Ctf,
            file: "/home/mydata/SampleInput.txt".into(),
            inputs: vec![
                "Some_very_long_input_name:dense:3:a".parse().unwrap(),
                "Some_other_also_very_long_input_name:dense:2:b"
                    .parse()
                    .unwrap(),
            ],
            ..Default::default()
        }],
    };
    assert_eq!(cfg, want);
}

#[test]
fn names_are_case_insensitive_and_other_parameters_are_ignored_outside_the_reader() {
    let text = r#"
command = train:test
DEFMBSIZE = true
train = [
    action = "train"; modelPath = "m.dnn"
    reader = [
        READERTYPE = "cntktextformatreader"
        File = "d.ctf"
        Input = [ x = [ DIM = 2; Format = "Sparse"; definesMBSize = $defMbSize$ ] ]
    ]
]
"#;
    let cfg = ReaderConfig::from_cntk_str(text, "c", None).unwrap();
    let x = &cfg.deserializers[0].inputs[0];
    assert_eq!(
        (x.storage, x.dim, x.defines_mb_size),
        (Storage::Sparse, 2, true)
    );
    // The section is found case-insensitively too; precision defaults to float.
    let cfg2 = ReaderConfig::from_cntk_str(text, "c", Some("TRAIN")).unwrap();
    assert_eq!(cfg, cfg2);
    assert_eq!(cfg.precision, Precision::Float);
}

#[test]
fn precision_in_the_reader_block_wins_over_the_section_and_top_level() {
    let text = format!("precision = double\ns = [ reader = [ {CTF_READER}; input = [ a = [ dim = 1; format = dense ] ] ] ]");
    assert_eq!(
        ReaderConfig::from_cntk_str(&text, "c", None)
            .unwrap()
            .precision,
        Precision::Double
    );
    let text = text.replace("s = [", "s = [ precision = float;");
    assert_eq!(
        ReaderConfig::from_cntk_str(&text, "c", None)
            .unwrap()
            .precision,
        Precision::Float
    );
    let text = text.replace("reader = [", "reader = [ precision = double;");
    assert_eq!(
        ReaderConfig::from_cntk_str(&text, "c", None)
            .unwrap()
            .precision,
        Precision::Double
    );
}

#[test]
fn a_section_without_a_reader_uses_the_top_level_one_and_high_trace_levels_are_kept() {
    let text = format!("reader = [ {CTF_READER}; traceLevel = 7; input = [ a = [ dim = 1; format = dense ] ] ]\ntest = [ action = test ]");
    let top = ReaderConfig::from_cntk_str(&text, "c", None).unwrap();
    assert_eq!(top.trace_level, 7);
    assert_eq!(
        ReaderConfig::from_cntk_str(&text, "c", Some("test")).unwrap(),
        top
    );
    let d = DeserializerConfig::new(FileFormat::Ctf, "d.ctf", vec!["a:dense:1".parse().unwrap()]);
    assert_eq!(top.deserializers, [d]);
}

#[test]
fn a_window_in_bytes_replaces_the_window_in_chunks() {
    use crate::configured::reader_options;
    use crate::reader::{EpochLimit, Window};
    let input = "input = [ a = [ dim = 1; format = dense ] ]";
    let text = reader(&format!(
        "{CTF_READER}\nrandomizationWindowInBytes = 67108864\n{input}"
    ));
    let cfg = ReaderConfig::from_cntk_str(&text, "c", None).unwrap();
    assert_eq!(cfg.randomization_window_bytes, Some(64 << 20));
    let options = reader_options(&cfg, EpochLimit::Sweeps(1));
    assert_eq!(options.window, Window::Bytes(64 << 20));
    let both = reader(&format!(
        "{CTF_READER}\nrandomizationWindow = 4\nrandomizationWindowInBytes = 1000\n{input}"
    ));
    let err = ReaderConfig::from_cntk_str(&both, "c", None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "c:5:1: give 'randomizationWindow' or 'randomizationWindowInBytes', not both"
    );
}

#[test]
fn default_randomization_window_is_4_gib_of_chunks() {
    let mut cfg = ReaderConfig::default();
    assert_eq!(
        cfg.default_randomization_window(),
        None,
        "no CTF deserializer: whole data set"
    );
    cfg.deserializers
        .push(DeserializerConfig::new(FileFormat::Ctf, "x", vec![]));
    assert_eq!(cfg.default_randomization_window(), Some(128));
    cfg.read = cfg.read.with_chunk_size(ChunkSize::Bytes(10_000));
    assert_eq!(cfg.default_randomization_window(), Some(429_496));
    cfg.sample_based_randomization_window = true;
    assert_eq!(cfg.default_randomization_window(), None);
}

#[test]
fn composite_of_ctf_and_cbf() {
    let text = reader(
        r#"deserializers = (
            [ type = "CNTKTextFormatDeserializer"; file = "f.ctf"; chunkSizeInBytes = 4096
              input = [ features = [ dim = 4; format = "dense" ] ] ]
          : [ type = "CNTKBinaryFormatDeserializer"; module = "CNTKBinaryReader"; file = "l.bin"
              input = [ labels = [ alias = "L" ] ] ]
        )"#,
    );
    let text = text.replace(
        "chunkSizeInBytes = 4096",
        "chunkSizeInBytes = 4096; keepDataInMemory = true; frameMode = true; cacheIndex = true",
    );
    let text = text.replace("deserializers =", "truncated = false; truncationLength = 0; multiThreadedDeserialization = true\ndeserializers =");
    let cfg = ReaderConfig::from_cntk_str(&text, "c", None).unwrap();
    let d0 = &cfg.deserializers[0];
    let read = d0.effective_read(&cfg);
    assert!(read.keep_in_memory() && read.frame_mode() && read.cache_index());
    let d1 = &cfg.deserializers[1];
    let read = d1.effective_read(&cfg);
    assert!(!read.keep_in_memory() && !read.frame_mode() && !read.cache_index());
    let kinds: Vec<_> = cfg.deserializers.iter().map(|d| d.format).collect();
    assert_eq!(kinds, [FileFormat::Ctf, FileFormat::Cbf]);
    assert_eq!(
        cfg.deserializers[0].read.chunk_size(),
        ChunkSize::Bytes(4096)
    );
    assert_eq!(cfg.deserializers[1].inputs[0].alias.as_deref(), Some("L"));
    let mut cfg = cfg;
    cfg.resolve_files(Path::new("/data"));
    assert_eq!(cfg.deserializers[1].file, Path::new("/data/l.bin"));
}

#[test]
fn errors_are_reported_verbatim() {
    let input = |body: &str| reader(&format!("{CTF_READER}\ninput = [ a = [ {body} ] ]"));
    let cases: Vec<(String, Option<&str>, &str)> = vec![
        (reader("randomise = false"), None, "c:3:1: unknown reader parameter 'randomise' (did you mean 'randomize'?)"),
        (reader("  frobnicate = 1"), None, "c:3:3: unknown reader parameter 'frobnicate'"),
        (reader("randomize = yes"), None, "c:3:13: randomize must be true or false, found 'yes'"),
        (reader("chunkSizeInBytes = 0"), None, "c:3:20: chunkSizeInBytes must be a positive integer, found '0'"),
        (reader("maxErrors = -1"), None, "c:3:13: maxErrors must be a non-negative integer, found '-1'"),
        (reader("traceLevel = high"), None, "c:3:14: traceLevel must be a non-negative integer, found 'high'"),
        (reader("precision = half"), None, "c:3:13: precision must be 'float' or 'double', found 'half'"),
        (reader("readerType = HTKMLFReader"), None,
         "c:3:14: the top-level reader uses readerType 'HTKMLFReader', which exfeed cannot read (it reads CNTKTextFormatReader, CNTKBinaryReader, LensReader, ParquetReader, ArrowReader)"),
        (reader("readerType = HTKMLReader"), None,
         "c:3:14: unknown readerType 'HTKMLReader' (known: CNTKTextFormatReader, CNTKBinaryReader, LensReader, ParquetReader, ArrowReader)"),
        (reader("file = \"d.ctf\""), None, "c:2:1: reader block has no 'readerType' (or 'deserializers')"),
        (reader(r#"readerType = "CNTKTextFormatReader""#), None, "c:2:1: reader block has no 'file'"),
        (reader(CTF_READER), None, "c:2:1: reader block has no 'input'"),
        (input("dim = abc; format = dense"), None, "c:4:23: input 'a': dim must be a positive integer, found 'abc'"),
        (input("dim = 3; format = dence"), None,
         "c:4:35: input 'a': format must be 'dense' or 'sparse', found 'dence'"),
        (input("dim = 3; format = dense; alais = x"), None,
         "c:4:42: input 'a': unknown input parameter 'alais' (did you mean 'alias'?)"),
        (input("format = dense"), None, "c:4:11: input 'a': no 'dim'"),
        (input("dim = 3"), None, "c:4:11: input 'a': no 'format' (dense or sparse)"),
        (input("dim = [ x = 1 ]; format = dense"), None, "c:4:23: input 'a': dim must be a value, found a block"),
        (reader(&format!("{CTF_READER}\ninput = 5")), None, "c:4:9: input must be a block [ ... ], found '5'"),
        (reader(&format!("{CTF_READER}\ninput = [ a = [ dim=1;format=dense;alias=b ]; b = [ dim=1;format=dense ] ]")), None,
         "c:4:47: input 'b': 'b' in the file already stands for input 'a'"),
        (input("dim = 2147483648; format = sparse"), None,
         "c:4:11: input 'a': dim 2147483648 of a sparse input is larger than 2147483647"),
        (reader(r#"readerType = CNTKBinaryReader; file = x.bin; input = [ a = [ dim = 3 ] ]"#), None,
         "c:3:56: input 'a': give both 'dim' and 'format' or neither (then the file's header says)"),
        (reader("deserializers = ([ type = CNTKTextFormatDeserializer; file = x; input = [ a = [ dim=1; format=dense ] ]; rand = 1 ])"),
         None, "c:3:106: deserializer 1: unknown deserializer parameter 'rand'"),
        (reader("deserializers = ([ file = x ])"), None, "c:3:18: deserializer 1: no 'type'"),
        (reader("deserializers = ([ type = CNTKBinaryFormatDeserializer; file = x; randomize = false ])"), None,
         "c:3:67: deserializer 1: 'randomize' is a reader parameter: set it in the reader block, not in a deserializer"),
        (reader(&format!("{CTF_READER}\ntruncated = true")), None,
         "c:4:13: truncated back-propagation through time (truncated = true) is not supported"),
        (reader(&format!("{CTF_READER}\nmultiThreadedDeserialization = maybe")), None,
         "c:4:32: a composite reader flag must be true or false, found 'maybe'"),
        (reader("deserializers = ([ type = CNTKBinaryFormatDeserializer; module = CNTKTextFormatReader; file = x ])"),
         None, "c:3:66: deserializer 1: module 'CNTKTextFormatReader' does not provide type 'CNTKBinaryFormatDeserializer'"),
        (reader("deserializers = ([ type = CNTKBinaryFormatDeserializer; file = x ]:[ type = Foo ])"), None,
         "c:3:77: deserializer 2: unknown type 'Foo' (known: CNTKTextFormatDeserializer, CNTKBinaryFormatDeserializer, LensDeserializer, ParquetDeserializer, ArrowDeserializer)"),
        (reader("file = x\ndeserializers = ([ type = CNTKBinaryFormatDeserializer; file = x ])"), None,
         "c:3:1: 'file' belongs in a deserializer block when 'deserializers' is given"),
        (reader("deserializers = ()"), None, "c:3:17: deserializers is empty"),
        (reader("deserializers = x"), None, "c:3:17: deserializers must be ([ ... ] : ...), found 'x'"),
        ("reader = [\n  file = \"unterminated\n]".into(), None, "c:2:10: unterminated string (no closing quote on this line)"),
        ("s = [\n reader = [ randomize = true\n]".into(), None, "c:1:5: unterminated block: '[' is never closed by ']'"),
        ("a = [ reader = [] ]\nb = [ reader = [] ]".into(), None, "c: 2 sections have a reader block, name one of them: a, b"),
        ("a = [ reader = [] ]\nb = [ reader = [] ]".into(), Some("c"), "c: no section 'c' (sections with a reader block: a, b)"),
        ("a = [ x = 1 ]\nb = 2".into(), Some("b"), "c:2:1: 'b' is not a section"),
        ("a = [ x = 1 ]".into(), Some("a"), "c:1:1: section 'a' has no reader block"),
        ("deviceId = -1".into(), None, "c: no reader block"),
        ("reader = 1".into(), None, "c:1:10: reader must be a block [ ... ], found '1'"),
        (reader("randomize = $undefinedVar$"), None, "c:3:13: undefined variable '$undefinedVar$' in 'randomize' (looked in the top level, reader)"),
    ];
    let mut wrong = Vec::new();
    for (text, section, want) in cases {
        let err = match ReaderConfig::from_cntk_str(&text, "c", section) {
            Ok(_) => {
                wrong.push(format!("{text:?}\n  got:  Ok\n  want: {want}"));
                continue;
            }
            Err(e) => e,
        };
        if err.to_string() != want {
            wrong.push(format!("{text:?}\n  got:  {err}\n  want: {want}"));
        }
        assert!(matches!(
            err.kind(),
            ErrorKind::Config | ErrorKind::Syntax | ErrorKind::Unsupported
        ));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

const TOML_DOC: &str = r#"
precision = "double"

[reader]
randomize = false
chunkSizeInBytes = 50000

[[reader.deserializers]]
type = "CNTKTextFormatDeserializer"
file = "features.ctf"

[reader.deserializers.input.features]
dim = 784
format = "dense"
alias = "F"

[reader.deserializers.input.a_label]
dim = 10
format = "sparse"
definesMBSize = true

[[reader.deserializers]]
type = "CNTKBinaryFormatDeserializer"
file = "more.bin"
"#;

#[test]
fn toml_form_matches_the_cntk_form() {
    let cntk = r#"
precision = "double"
reader = [
    randomize = false
    chunkSizeInBytes = 50000
    deserializers = (
        [ type = "CNTKTextFormatDeserializer"; file = "features.ctf"
          input = [ features = [ dim = 784; format = "dense"; alias = "F" ]
                    a_label = [ dim = 10; format = "sparse"; definesMBSize = true ] ] ]
      : [ type = "CNTKBinaryFormatDeserializer"; file = "more.bin" ]
    )
]
"#;
    let from_toml = ReaderConfig::from_toml_str(TOML_DOC, "t.toml", None).unwrap();
    let from_cntk = ReaderConfig::from_cntk_str(cntk, "c.cntk", None).unwrap();
    assert_eq!(from_toml, from_cntk);
    // Inputs keep file order although TOML tables are sorted by key.
    assert_eq!(from_toml.deserializers[0].inputs[0].name, "features");

    let flat = r#"
[reader]
readerType = "CNTKTextFormatReader"
file = "train.ctf"
input.x = { dim = 3, format = "dense" }
"#;
    let cfg = ReaderConfig::from_toml_str(flat, "t.toml", None).unwrap();
    assert_eq!(cfg.deserializers[0].inputs[0], "x:dense:3".parse().unwrap());

    let sections = "[a.reader]\nreaderType = \"CNTKBinaryReader\"\nfile = \"a.bin\"\n[b.reader]\nreaderType = \"CNTKBinaryReader\"\nfile = \"b.bin\"\n";
    let b = ReaderConfig::from_toml_str(sections, "t.toml", Some("b")).unwrap();
    assert_eq!(b.deserializers[0].file, Path::new("b.bin"));
}

#[test]
fn toml_errors_name_line_and_column() {
    for (text, want) in [
        (
            "[reader]\nrandomise = false\n",
            "t.toml:2:1: unknown reader parameter 'randomise' (did you mean 'randomize'?)",
        ),
        (
            "[reader]\nrandomize = 2\n",
            "t.toml:2:13: randomize must be true or false, found '2'",
        ),
        ("[reader]\nrandomize = \n", "t.toml:2:13: "),
        ("[reader\n", "t.toml:1:"),
    ] {
        let err = ReaderConfig::from_toml_str(text, "t.toml", None).unwrap_err();
        assert!(err.to_string().starts_with(want), "{text:?}: {err}");
    }
}

#[test]
fn files_are_read_by_extension() {
    let dir = tempfile::tempdir().unwrap();
    let toml_path = dir.path().join("r.toml");
    std::fs::write(&toml_path, TOML_DOC).unwrap();
    let cntk_path = dir.path().join("r.cntk");
    std::fs::write(
        &cntk_path,
        reader(&format!(
            "{CTF_READER}\ninput = [ a = [ dim = 1; format = dense ] ]"
        )),
    )
    .unwrap();
    assert_eq!(
        ReaderConfig::from_file(&toml_path, None)
            .unwrap()
            .deserializers
            .len(),
        2
    );
    assert_eq!(
        ReaderConfig::from_file(&cntk_path, None)
            .unwrap()
            .deserializers[0]
            .inputs[0]
            .name,
        "a"
    );
    let err = ReaderConfig::from_file(dir.path().join("missing.cntk"), None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Io);
}

proptest::proptest! {
    /// Any one-byte change of a valid configuration parses or fails with an error, never panics.
    #[test]
    fn mutated_configs_never_panic(at in 0usize..400, c in proptest::sample::select(b"=;:#$[]{}()'\" \nx0".to_vec())) {
        let text = reader(&format!(
            "{CTF_READER}\nrandomize = $r$\ndeserializers = ([ type = CNTKTextFormatDeserializer; file = x; input = [ a = [ dim=1; format=dense ] ] ])"
        ));
        let text = format!("r = false\n{text}");
        let mut bytes = text.into_bytes();
        let at = at % bytes.len();
        bytes[at] = c;
        let text = String::from_utf8(bytes).unwrap();
        let _ = ReaderConfig::from_cntk_str(&text, "c", None);
        let _ = ReaderConfig::from_toml_str(&text, "c", None);
    }
}
