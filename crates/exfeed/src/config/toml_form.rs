//! The TOML form: parsed with the `toml` crate, then turned into the same tree as CNTK's syntax
//! so that both forms share one set of parameter names, checks and error messages.

use std::sync::Arc;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::syntax::{error_at, Block, Entry, Node, Origin, Pos, Value};
use crate::error::{line_column, Error, ErrorKind};

/// Parses TOML text into a configuration tree (`file` names it in errors).
pub fn parse(text: &str, file: &str) -> Result<Block, Error> {
    let file: Arc<str> = file.into();
    let pos_of = |byte: usize| {
        let (line, column) = line_column(text.as_bytes(), byte);
        Pos {
            line: line as u32,
            column: column as u32,
            origin: Origin::File,
        }
    };
    let doc = DeTable::parse(text).map_err(|e| {
        let pos = e.span().map_or(Pos::default(), |s| pos_of(s.start));
        error_at(
            ErrorKind::Syntax,
            &file,
            pos,
            e.message().trim_end().to_string(),
        )
    })?;
    let top = table(doc.get_ref(), &pos_of);
    Ok(top)
}

fn table(t: &DeTable<'_>, pos_of: &dyn Fn(usize) -> Pos) -> Block {
    let mut entries: Vec<(usize, Entry)> = t
        .iter()
        .map(|(k, v)| {
            let start = k.span().start;
            let entry = Entry {
                key: k.get_ref().to_string(),
                key_pos: pos_of(start),
                node: node(v, pos_of),
                replaced: None,
            };
            (start, entry)
        })
        .collect();
    // Without the `preserve_order` feature the map is sorted by key; the spans give file order,
    // which matters for inputs.
    entries.sort_by_key(|(start, _)| *start);
    Block {
        entries: entries.into_iter().map(|(_, e)| e).collect(),
    }
}

fn node(v: &Spanned<DeValue<'_>>, pos_of: &dyn Fn(usize) -> Pos) -> Node {
    let value = match v.get_ref() {
        DeValue::String(s) => Value::Text(s.to_string()),
        DeValue::Integer(i) => Value::Text(
            i128::from_str_radix(i.as_str(), i.radix())
                .map_or_else(|_| i.as_str().to_string(), |n| n.to_string()),
        ),
        DeValue::Float(f) => Value::Text(f.as_str().to_string()),
        DeValue::Boolean(b) => Value::Text(b.to_string()),
        DeValue::Datetime(d) => Value::Text(d.to_string()),
        DeValue::Array(items) => Value::Array(items.iter().map(|i| node(i, pos_of)).collect()),
        DeValue::Table(t) => Value::Block(table(t, pos_of)),
    };
    Node {
        value,
        pos: pos_of(v.span().start),
    }
}
