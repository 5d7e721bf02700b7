//! The crate's layering (lib.rs, "Layering"), checked on its source: no module refers to one
//! of a layer below its own (`crate::x` paths and `use crate::{...}` lists, test modules and
//! comments left out).

use std::collections::BTreeSet;
use std::path::Path;

/// Each top-level module's layer, as lib.rs lists them.
const LAYERS: &[(&str, u8)] = &[
    ("error", 1),
    ("element", 1),
    ("stream", 1),
    ("batch", 1),
    ("buffers", 1),
    ("limits", 1),
    ("format", 1),
    ("number", 1),
    ("json", 1),
    ("fetch_ahead", 1),
    ("ctf", 2),
    ("cbf", 2),
    ("lens", 2),
    ("io", 3),
    ("options", 4),
    ("config", 4),
    ("reader", 5),
    ("source", 6),
    ("arrow", 6),
    ("dataset", 7),
    ("convert", 7),
    ("dump", 7),
    ("configured", 8),
];

/// Names the crate root re-exports, by the module they come from.
const REEXPORTS: &[(&str, &str)] = &[
    ("DataSet", "dataset"),
    ("open", "dataset"),
    ("open_corpus", "dataset"),
    ("Sequences", "dataset"),
    ("Summary", "dataset"),
    ("OpenOptions", "dataset"),
    ("LensLayout", "dataset"),
    ("FormatSource", "dataset"),
];

fn layer(name: &str) -> Option<u8> {
    let module = REEXPORTS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(name, |(_, m)| m);
    LAYERS.iter().find(|(m, _)| *m == module).map(|(_, l)| *l)
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The modules and re-exported names `code` refers to through `crate::`.
fn references(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(list) = rest.strip_prefix('{') {
            // `use crate::{a::b, C, d}`: the first name of each path in the list.
            let end = list.find("};").unwrap_or(list.len());
            let mut depth = 0;
            let mut start = true;
            for (i, c) in list[..end].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && (c.is_alphanumeric() || c == '_') => {
                        out.insert(ident_at(&list[i..]).to_string());
                        start = false;
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident_at(rest).to_string());
        }
    }
    out
}

#[test]
fn no_module_refers_to_a_layer_below_its_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![src.clone()];
    let mut wrong = Vec::new();
    let mut checked = 0;
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let rel = path
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let top = rel.split('/').next().unwrap().trim_end_matches(".rs");
        let (Some(own), false) = (layer(top), rel.ends_with("tests.rs")) else {
            continue;
        };
        let text = std::fs::read_to_string(&path).unwrap();
        let text = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        let code: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        checked += 1;
        for name in references(&code) {
            if layer(&name).is_some_and(|l| l > own) {
                wrong.push(format!("{rel} (layer {own}) refers to crate::{name}"));
            }
        }
    }
    assert!(checked > 50, "{checked} files checked");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_check_sees_a_reference_in_a_use_list() {
    let found =
        references("use crate::{batch::X, dataset::DataSet, Error};\nlet x = crate::io::read_at;");
    let want = ["batch", "dataset", "Error", "io"];
    assert_eq!(found, want.iter().map(|s| s.to_string()).collect());
}
