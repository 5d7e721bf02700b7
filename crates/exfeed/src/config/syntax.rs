//! CNTK's configuration syntax as users write it, read the way CNTK's own config parser reads it:
//! a tree of [`Block`]s whose every node remembers where it was written.
//!
//! ```text
//! deviceId = -1                     # name = value, one per line or ';'/','-separated
//! command = Train:Test              // '#' and '//' comments (outside quoted strings)
//! Train = [                         # [ ... ] and { ... } are the same kind of block
//!     BrainScriptNetworkBuilder = { f(x) = x * 2 ; y = f(3) }   # kept as unevaluated expressions
//!     reader = {
//!         deserializers = ([ type = "CNTKTextFormatDeserializer" ] : [ ... ])   # arrays
//!         input = [ features = [ dim = 3; definesMBSize = $defMBSize$ ] ]
//!     }
//! ]
//! ```
//!
//! CNTK keeps every value as text and parses a block only when something asks for it, so a config
//! file may hold a whole network in BrainScript next to the reader. This parser is as lenient:
//! a value that is not a plain value, a block or an array (`Input(3)`, `if a then b else c`,
//! `[ ... ].lookup`) is kept as [`Value::Expr`], and a record that is not `name = value`
//! (`f(x) = ...`, `dims[i:0..2] = 5`, `else { ... }`) is skipped. Brackets and quotes must
//! balance; that is the only syntax error a config outside the reader block can have.
//!
//! Keys are matched case-insensitively, as CNTK's `ConfigParameters` (a map with a
//! case-insensitive comparator) does. `$name$` substitution is not done here: it is done lazily,
//! when the reader reads a value, by [`super::resolve`].

use std::sync::Arc;

use crate::error::{Error, ErrorKind, Location};

/// Where a node was written. `line` 0 means unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pos {
    /// 1-based line, 0 if unknown.
    pub line: u32,
    /// 1-based column in bytes, 0 if unknown.
    pub column: u32,
    /// Which text: the config file, or one of the overrides.
    pub origin: Origin,
}

/// The text a node comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Origin {
    /// The configuration file.
    #[default]
    File,
    /// The n-th override (0-based) of [`super::ConfigOptions::overrides`].
    Override(u32),
    /// A variable exfeed defines before reading the file (`ConfigDir`).
    Predefined,
}

/// A value: text (quoted or bare), a block of named entries, an array, or an expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string, number or boolean, as written (quotes removed). `$name$` not yet substituted.
    Text(String),
    /// `[ ... ]` or `{ ... }`.
    Block(Block),
    /// `( a : b : c )`.
    Array(Vec<Node>),
    /// Anything else CNTK would keep as text for BrainScript to evaluate (`Input(3)`,
    /// `inputDim * 3`, `if a then [ ... ] else [ ... ]`), kept as written, never evaluated.
    Expr(String),
}

/// A value and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The value.
    pub value: Value,
    /// Its position.
    pub pos: Pos,
}

/// One `name = value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The name as written.
    pub key: String,
    /// Where the name starts.
    pub key_pos: Pos,
    /// The value.
    pub node: Node,
    /// When the name was assigned twice in the same block of the file: where the earlier
    /// assignment, which the later one replaced (CNTK: the later assignment wins), and where the
    /// later one was. An override (`--set`) replacing a value is no duplicate and leaves this be.
    pub replaced: Option<(Pos, Pos)>,
}

/// A block's entries in the order written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Block {
    /// The entries.
    pub entries: Vec<Entry>,
}

impl Block {
    /// The entry named `key` (case-insensitively).
    pub fn get(&self, key: &str) -> Option<&Entry> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.key.eq_ignore_ascii_case(key))
    }

    /// Adds `entry` as CNTK's `ConfigParameters::Insert` does: a name already present is
    /// replaced, except that a block written with `[` is merged into an existing block
    /// (CNTK appends it, so `Train = [ SGD = [ maxEpochs = 2 ] ]` given after a `Train`
    /// section changes one parameter of it).
    pub fn insert(&mut self, entry: Entry, merge_block: bool) {
        Names::of(self).insert(self, entry, merge_block);
    }
}

/// The entries of a block by lower-case name, so that a block of n entries is built in O(n).
struct Names(std::collections::HashMap<String, usize>);

impl Names {
    fn of(block: &Block) -> Self {
        let mut names = Names(Default::default());
        for (i, e) in block.entries.iter().enumerate() {
            names.0.insert(e.key.to_ascii_lowercase(), i);
        }
        names
    }

    /// [`Block::insert`] into `block`, whose names these are.
    fn insert(&mut self, block: &mut Block, entry: Entry, merge_block: bool) {
        let lower = entry.key.to_ascii_lowercase();
        let Some(&at) = self.0.get(&lower) else {
            self.0.insert(lower, block.entries.len());
            block.entries.push(entry);
            return;
        };
        let old = &mut block.entries[at];
        match (&mut old.node.value, entry.node.value) {
            (Value::Block(into), Value::Block(from)) if merge_block => {
                let mut names = Names::of(into);
                for e in from.entries {
                    let merge = matches!(e.node.value, Value::Block(_));
                    names.insert(into, e, merge);
                }
            }
            (_, value) => {
                if !matches!(entry.key_pos.origin, Origin::Override(_)) {
                    old.replaced = Some((old.key_pos, entry.key_pos));
                }
                old.key_pos = entry.key_pos;
                old.node = Node {
                    value,
                    pos: entry.node.pos,
                };
            }
        }
    }
}

/// Blocks and arrays nested deeper than this are refused (no stack overflow on `[[[[...`).
const MAX_DEPTH: usize = 64;

/// An error at `pos` of `file` (line and column only when known).
pub(crate) fn error_at(
    kind: ErrorKind,
    file: &Arc<str>,
    pos: Pos,
    msg: impl Into<String>,
) -> Error {
    let mut loc = Location::default().with_file(file.clone());
    if pos.line > 0 {
        loc.line = Some(pos.line.into());
        loc.column = Some(pos.column.into());
    }
    Error::new(kind, loc, msg)
}

/// What ends a value: a record of a block (newline, `,`, the block's separator, `;` unless
/// the block chose another, and its closing bracket) or an element of an array (`:`, `)`).
#[derive(Clone, Copy, PartialEq)]
enum Ends {
    Record { close: Option<u8>, separator: u8 },
    Element,
}

/// Where CNTK's parser ends records: the top level, and blocks without a custom separator.
const TOP_LEVEL: Ends = Ends::Record {
    close: None,
    separator: b';',
};

/// The characters that, right after a block's opening bracket, become its record separator in
/// place of `;` (CNTK's `[|a=1|b=2]`), unless they start `..`, `./` or `.\\`.
const CUSTOM_SEPARATORS: &[u8] = b"`~!@$%^&*_-+|:;,?.";

struct Parser<'a> {
    src: &'a [u8],
    at: usize,
    /// Byte offsets where lines start, for positions.
    lines: Vec<usize>,
    file: Arc<str>,
    origin: Origin,
}

fn closer(open: u8) -> u8 {
    match open {
        b'[' => b']',
        b'{' => b'}',
        _ => b')',
    }
}

fn describe(c: Option<u8>) -> String {
    match c {
        None => "end of file".into(),
        Some(b'\n') => "end of line".into(),
        Some(c) => format!("'{}'", c as char),
    }
}

impl<'a> Parser<'a> {
    fn pos_of(&self, at: usize) -> Pos {
        let line = self.lines.partition_point(|&s| s <= at);
        let start = self.lines[line - 1];
        Pos {
            line: line as u32,
            column: (at - start + 1) as u32,
            origin: self.origin,
        }
    }

    fn err(&self, at: usize, msg: impl Into<String>) -> Error {
        error_at(ErrorKind::Syntax, &self.file, self.pos_of(at), msg)
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.at).copied()
    }

    /// A comment starts here: `#` or `//` at the start of a line or after white space (as in
    /// CNTK, `a#b` and `http://x` are not comments).
    fn at_comment(&self) -> bool {
        let rest = &self.src[self.at..];
        if !(rest.starts_with(b"#") || rest.starts_with(b"//")) {
            return false;
        }
        self.at == 0 || matches!(self.src[self.at - 1], b' ' | b'\t' | b'\n' | b'\r')
    }

    fn skip_comment(&mut self) {
        while !matches!(self.peek(), None | Some(b'\n')) {
            self.at += 1;
        }
    }

    /// Skips spaces, tabs and comments; with `newlines`, line ends and `extra` bytes too.
    fn skip_space(&mut self, newlines: bool, extra: &[u8]) {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\r') => self.at += 1,
                Some(b'\n') if newlines => self.at += 1,
                Some(c) if extra.contains(&c) => self.at += 1,
                Some(_) if self.at_comment() => self.skip_comment(),
                _ => return,
            }
        }
    }

    /// At the end of a value: the byte that ends it, or a comment.
    fn at_end(&self, ends: Ends) -> bool {
        match (self.peek(), ends) {
            (None, _) => true,
            (Some(b'\n' | b','), Ends::Record { .. }) => true,
            (Some(c), Ends::Record { separator, .. }) if c == separator => true,
            (Some(c), Ends::Record { close, .. }) if Some(c) == close => true,
            (Some(b':' | b')'), Ends::Element) => true,
            _ => self.at_comment(),
        }
    }

    /// A quoted string starting at the cursor, if its closing quote is on the same line:
    /// its text, and the cursor moved past it. An unclosed `"` is an error; an unclosed `'`
    /// is an apostrophe (`Bob's`), as CNTK, whose own parser knows only `"`, reads it.
    fn quoted(&mut self) -> Result<Option<String>, Error> {
        let Some(q @ (b'"' | b'\'')) = self.peek() else {
            return Ok(None);
        };
        let start = self.at + 1;
        let len = self.src[start..].iter().position(|&b| b == q || b == b'\n');
        match len {
            Some(len) if self.src[start + len] == q => {
                self.at = start + len + 1;
                Ok(Some(
                    String::from_utf8_lossy(&self.src[start..start + len]).into_owned(),
                ))
            }
            _ if q == b'"' => Err(self.err(
                self.at,
                "unterminated string (no closing quote on this line)",
            )),
            _ => Ok(None),
        }
    }

    /// Moves past balanced text up to the end of the value; returns whether it held brackets
    /// or quoted strings (then it is an expression, not a plain value). At the top level, as
    /// in CNTK's tokenizer, a closing bracket that closes nothing ends the value when a
    /// bracketed group or quoted string came before it in the value (`after_group`: before
    /// this text), else it is part of the text (`a = 1 ]`).
    fn skip_balanced(
        &mut self,
        ends: Ends,
        open_at: Option<usize>,
        after_group: bool,
    ) -> Result<bool, Error> {
        let mut stack: Vec<(u8, usize)> = Vec::new();
        let mut structured = false;
        loop {
            if stack.is_empty() && self.at_end(ends) {
                return Ok(structured);
            }
            let Some(c) = self.peek() else {
                let (open, at) = stack.last().copied().unwrap_or_default();
                return Err(self.unterminated(open, at));
            };
            if self.at_comment() {
                self.skip_comment();
                continue;
            }
            match c {
                b'"' | b'\'' if self.quoted()?.is_some() => {
                    structured = true;
                    continue;
                }
                b'[' | b'{' | b'(' => {
                    if stack.len() >= MAX_DEPTH {
                        return Err(self.err(self.at, too_deep()));
                    }
                    stack.push((c, self.at));
                    structured = true;
                }
                b']' | b'}' | b')' => match stack.pop() {
                    Some((open, _)) if closer(open) == c => {}
                    Some((open, at)) => return Err(self.mismatched(open, at)),
                    None if ends == TOP_LEVEL && (structured || after_group) => {
                        return Ok(structured)
                    }
                    None if ends == TOP_LEVEL => {}
                    None => return Err(self.stray_closer(ends, open_at)),
                },
                _ => {}
            }
            self.at += 1;
        }
    }

    fn unterminated(&self, open: u8, at: usize) -> Error {
        let what = if open == b'(' { "parenthesis" } else { "block" };
        self.err(
            at,
            format!(
                "unterminated {what}: '{}' is never closed by '{}'",
                open as char,
                closer(open) as char
            ),
        )
    }

    fn mismatched(&self, open: u8, at: usize) -> Error {
        let p = self.pos_of(at);
        self.err(
            self.at,
            format!(
                "expected '{}' to close the '{}' at line {}, column {}, found {}",
                closer(open) as char,
                open as char,
                p.line,
                p.column,
                describe(self.peek())
            ),
        )
    }

    /// A closing bracket that closes nothing open inside the value.
    fn stray_closer(&self, ends: Ends, open_at: Option<usize>) -> Error {
        match (ends, open_at) {
            (Ends::Record { close: Some(_), .. }, Some(at)) | (Ends::Element, Some(at)) => {
                let open = self.src[at];
                self.mismatched(open, at)
            }
            _ => self.err(self.at, format!("{} closes nothing", describe(self.peek()))),
        }
    }

    /// A custom record separator right after a block's opening bracket (CNTK's
    /// `[|a=1|b=2]`), moved past.
    fn custom_separator(&mut self) -> Option<u8> {
        let rest = &self.src[self.at..];
        let c = *rest.first()?;
        let path = [&b".."[..], b"./", b".\\"]
            .iter()
            .any(|p| rest.starts_with(p));
        if !CUSTOM_SEPARATORS.contains(&c) || path {
            return None;
        }
        self.at += 1;
        Some(c)
    }

    /// Entries up to the closing bracket of the block opened at `open_at` (`None`: the end of
    /// the text), into `block`. As in CNTK's parser, a bracketed record at the top level
    /// (`[ a = 1 ]` where a name would be) adds its entries to the top level, and a closing
    /// bracket that closes nothing there (a stray `]`) is read as a name alone, set to true.
    fn block_body(&mut self, open_at: Option<usize>, depth: usize) -> Result<Block, Error> {
        let mut block = Block::default();
        self.block_into(&mut block, open_at, depth)?;
        Ok(block)
    }

    fn block_into(
        &mut self,
        block: &mut Block,
        open_at: Option<usize>,
        depth: usize,
    ) -> Result<(), Error> {
        let close = open_at.map(|at| closer(self.src[at]));
        let separator = match open_at {
            Some(_) => self.custom_separator().unwrap_or(b';'),
            None => b';',
        };
        let ends = Ends::Record { close, separator };
        let mut names = Names::of(block);
        loop {
            self.skip_space(true, &[separator, b',']);
            match (self.peek(), close) {
                (None, None) => return Ok(()),
                (None, Some(_)) => {
                    let at = open_at.unwrap_or_default();
                    return Err(self.unterminated(self.src[at], at));
                }
                (Some(c), Some(want)) if c == want => {
                    self.at += 1;
                    return Ok(());
                }
                (Some(b']' | b'}' | b')'), None) => {
                    let key_at = self.at;
                    while !self.at_end(ends) {
                        self.at += 1;
                    }
                    let key = String::from_utf8_lossy(&self.src[key_at..self.at]);
                    let entry = self.flag(key.trim_end().to_string(), key_at);
                    names.insert(block, entry, false);
                    continue;
                }
                (Some(b']' | b'}' | b')'), _) => return Err(self.stray_closer(ends, open_at)),
                (Some(b'[' | b'{'), None) => {
                    let at = self.at;
                    self.at += 1;
                    let mut inner = Block::default();
                    self.block_into(&mut inner, Some(at), depth + 1)?;
                    for entry in inner.entries {
                        names.insert(block, entry, false);
                    }
                    continue;
                }
                _ => {}
            }
            let key_at = self.at;
            while let Some(c) = self.peek() {
                if c.is_ascii_whitespace()
                    || c == separator
                    || matches!(
                        c,
                        b'=' | b'[' | b']' | b'{' | b'}' | b'(' | b')' | b'"' | b','
                    )
                {
                    break;
                }
                self.at += 1;
            }
            let key = String::from_utf8_lossy(&self.src[key_at..self.at]).into_owned();
            self.skip_space(false, b"");
            let assigned = match self.peek() {
                Some(b'=') if !key.is_empty() => {
                    self.at += 1;
                    self.skip_space(true, b"");
                    if self.at_end(ends) {
                        return Err(self.err(
                            self.at,
                            format!(
                                "expected a value after '{key} =', found {}",
                                describe(self.peek())
                            ),
                        ));
                    }
                    true
                }
                // CNTK also takes `name [ ... ]` without '='.
                Some(b'[' | b'{') if !key.is_empty() => true,
                _ => false,
            };
            if !assigned {
                if !key.is_empty() && self.at_end(ends) {
                    let entry = self.flag(key, key_at);
                    names.insert(block, entry, false);
                } else {
                    // A definition this reader never reads (`f(x) = ...`, `a[i:0..2] = ...`,
                    // `else [ ... ]`): skipped as balanced text.
                    self.skip_balanced(ends, open_at, false)?;
                }
                continue;
            }
            let merge = self.peek() == Some(b'[');
            let node = self.value(ends, open_at, depth)?;
            let key_pos = self.pos_of(key_at);
            let entry = Entry {
                key,
                key_pos,
                node,
                replaced: None,
            };
            names.insert(block, entry, merge);
        }
    }

    /// A name alone, written at `at`: a flag, which CNTK sets to true.
    fn flag(&self, key: String, at: usize) -> Entry {
        let pos = self.pos_of(at);
        let node = Node {
            value: Value::Text("true".into()),
            pos,
        };
        Entry {
            key,
            key_pos: pos,
            node,
            replaced: None,
        }
    }

    /// A value at the cursor (after `=`, or an array element) up to what `ends` it.
    fn value(&mut self, ends: Ends, open_at: Option<usize>, depth: usize) -> Result<Node, Error> {
        if depth >= MAX_DEPTH {
            return Err(self.err(self.at, too_deep()));
        }
        let start = self.at;
        let pos = self.pos_of(start);
        let value = match self.peek() {
            Some(b'[' | b'{') => {
                self.at += 1;
                Some(Value::Block(self.block_body(Some(start), depth + 1)?))
            }
            Some(b'(') => {
                self.at += 1;
                Some(Value::Array(self.array(start, depth + 1)?))
            }
            _ => self.quoted()?.map(Value::Text),
        };
        if let Some(value) = value {
            // Inside an array, line ends are spaces.
            self.skip_space(ends == Ends::Element, b"");
            // At the top level a closing bracket here closes nothing: the next record's.
            let stray = ends == TOP_LEVEL && matches!(self.peek(), Some(b']' | b'}' | b')'));
            if self.at_end(ends) || stray {
                return Ok(Node { value, pos });
            }
        }
        // Bare text, or an expression: up to the end of the value.
        let started_structured = value_started_structured(self.src[start]);
        let structured =
            self.skip_balanced(ends, open_at, started_structured)? || started_structured;
        let text = String::from_utf8_lossy(&self.src[start..self.at])
            .trim_end()
            .to_string();
        let value = if structured {
            Value::Expr(text)
        } else {
            Value::Text(text)
        };
        Ok(Node { value, pos })
    }

    /// Elements separated by ':' up to the `)` closing the `(` at `open_at`.
    fn array(&mut self, open_at: usize, depth: usize) -> Result<Vec<Node>, Error> {
        let mut items = Vec::new();
        loop {
            self.skip_space(true, b"");
            match self.peek() {
                Some(b')') => {
                    self.at += 1;
                    return Ok(items);
                }
                None => return Err(self.unterminated(b'(', open_at)),
                Some(b':') if !items.is_empty() => {
                    self.at += 1;
                    self.skip_space(true, b"");
                }
                _ if items.is_empty() => {}
                Some(_) => {
                    return Err(self.err(
                        self.at,
                        format!(
                            "expected ':' or ')' in an array, found {}",
                            describe(self.peek())
                        ),
                    ))
                }
            }
            if matches!(self.peek(), Some(b':' | b')')) {
                // `(a::b)`, `(a:)`: an empty element.
                let pos = self.pos_of(self.at);
                items.push(Node {
                    value: Value::Text(String::new()),
                    pos,
                });
                continue;
            }
            let mut node = self.value(Ends::Element, Some(open_at), depth)?;
            if let Value::Text(t) = &mut node.value {
                // Elements spread over lines keep their own trailing spaces out.
                *t = t.trim().to_string();
            }
            items.push(node);
        }
    }
}

/// A value that starts with an opening bracket or quote and did not end there is an
/// expression (`[ ... ].lookup`, `(a) * b`, `"a" + b`).
fn value_started_structured(first: u8) -> bool {
    matches!(first, b'[' | b'{' | b'(' | b'"' | b'\'')
}

fn too_deep() -> String {
    format!("blocks nested deeper than {MAX_DEPTH}")
}

/// Parses CNTK config text into its top-level block (`file` names it in errors).
pub fn parse(text: &str, file: &str) -> Result<Block, Error> {
    parse_with(text, file.into(), Origin::File)
}

/// [`parse`] for a text of the given origin.
pub(crate) fn parse_with(text: &str, file: Arc<str>, origin: Origin) -> Result<Block, Error> {
    let src = text.strip_prefix('\u{feff}').unwrap_or(text).as_bytes();
    let lines = std::iter::once(0)
        .chain(memchr::memchr_iter(b'\n', src).map(|i| i + 1))
        .collect();
    let mut p = Parser {
        src,
        at: 0,
        lines,
        file,
        origin,
    };
    p.block_body(None, 0)
}

/// Splits a value CNTK reads as an array (`ConfigArray`): `a:b:c`, trimmed, as
/// `command = Train:Output:Test` and `outputNodeNames = PosteriorProb : labels` are written.
pub fn colon_list(text: &str) -> Vec<String> {
    text.split(':')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value<'a>(b: &'a Block, key: &str) -> &'a Value {
        &b.get(key).unwrap_or_else(|| panic!("no {key}")).node.value
    }

    fn text<'a>(b: &'a Block, key: &str) -> &'a str {
        match value(b, key) {
            Value::Text(t) => t,
            other => panic!("{key}: {other:?}"),
        }
    }

    fn block<'a>(b: &'a Block, key: &str) -> &'a Block {
        match value(b, key) {
            Value::Block(b) => b,
            other => panic!("{key}: {other:?}"),
        }
    }

    #[test]
    fn lines_semicolons_blocks_comments_strings() {
        let b = parse(
            "a = 1 # c\nb='x # not a comment'; c = \"y;z\"\nd = { e = [ f = g h ] ; i = 2 }\nj = 3 // c\nk = a#b\nl = http://x/y\n",
            "t",
        )
        .unwrap();
        assert_eq!(text(&b, "A"), "1");
        assert_eq!(text(&b, "b"), "x # not a comment");
        assert_eq!(text(&b, "c"), "y;z");
        let d = block(&b, "d");
        assert_eq!(text(block(d, "e"), "f"), "g h");
        assert_eq!(text(d, "i"), "2");
        assert_eq!(text(&b, "j"), "3");
        assert_eq!(
            text(&b, "k"),
            "a#b",
            "as in CNTK, '#' starts a comment only after a space"
        );
        assert_eq!(text(&b, "l"), "http://x/y");
        let key_pos = b.get("d").unwrap().key_pos;
        assert_eq!((key_pos.line, key_pos.column), (3, 1));
        let i = d.get("i").unwrap().node.pos;
        assert_eq!((i.line, i.column), (3, 29));
    }

    #[test]
    fn arrays_of_blocks_and_words() {
        let b = parse(
            "x = ([a=1]:[a=2])\ny = ({ a = 3 })\nz = (p:q : r : 's:t')\nw = c:\\data\\f.txt\nv = (\n  [ a = 1 ]\n  : [ a = 2 ] # two\n)",
            "t",
        )
        .unwrap();
        let len = |k| match value(&b, k) {
            Value::Array(a) => a.len(),
            other => panic!("{other:?}"),
        };
        assert_eq!((len("x"), len("y"), len("v")), (2, 1, 2));
        let Value::Array(z) = value(&b, "z") else {
            panic!()
        };
        let z: Vec<_> = z.iter().map(|n| n.value.clone()).collect();
        assert_eq!(z, ["p", "q", "r", "s:t"].map(|s| Value::Text(s.into())));
        assert_eq!(text(&b, "w"), "c:\\data\\f.txt");
        assert_eq!(
            colon_list("Train:Output : Test"),
            ["Train", "Output", "Test"]
        );
    }

    /// BrainScript outside the reader: kept as expressions or skipped, never an error.
    #[test]
    fn brainscript_is_kept_as_balanced_text() {
        let src = r#"
net = [
    featDim = inputDim*3   # contextual words
    features = RowStack(featuresPW : featuresCW)
    lstmDims[i:0..maxLayer-1] = hiddenDim
    NoAuxInputHook (input, lstmState) = BS.Constants.None
    Layer(x, n) = [ z = x * n ; y = Sigmoid(z) ].y   // a function with a record
    dims = if a < 200 then a else b
    params =
        # with attention
        if useEncoder then {
            previousHook = PreviousHC   // hidden state(t-1)
        }
        else {
            augmentInputDim = 0
        }
    tag = Pass (z, tag='criterion')
    name = "it's"
    note = Bob's note
]
builder = (new ComputationNetwork {
    z = W * S(x) + B;  // top-level input to Softmax
})
after = 1
"#;
        let b = parse(src, "t").unwrap();
        let net = block(&b, "net");
        assert_eq!(text(net, "featDim"), "inputDim*3");
        assert!(
            matches!(value(net, "features"), Value::Expr(e) if e == "RowStack(featuresPW : featuresCW)")
        );
        assert!(matches!(value(net, "dims"), Value::Text(t) if t == "if a < 200 then a else b"));
        assert!(
            matches!(value(net, "params"), Value::Expr(e) if e.starts_with("if useEncoder then {"))
        );
        assert!(matches!(value(net, "tag"), Value::Expr(_)));
        assert_eq!(text(net, "name"), "it's");
        assert_eq!(text(net, "note"), "Bob's note");
        assert!(net.get("Layer").is_none() && net.get("NoAuxInputHook").is_none());
        assert!(
            matches!(value(&b, "builder"), Value::Array(a) if matches!(a[0].value, Value::Expr(_)))
        );
        assert_eq!(text(&b, "after"), "1");
    }

    #[test]
    fn later_assignments_win_and_blocks_merge_as_in_cntk() {
        let b = parse(
            "a = 1\nA = 2\ns = [ x = 1; y = 2 ]\ns = [ y = 3 ]\nflag\nt = { u = 1 }\nt = { v = 2 }",
            "t",
        )
        .unwrap();
        assert_eq!(text(&b, "a"), "2");
        let a = b.get("a").unwrap();
        let (first, again) = a.replaced.unwrap();
        assert_eq!((first.line, again.line, a.key_pos.line), (1, 2, 2));
        let s = block(&b, "s");
        assert_eq!((text(s, "x"), text(s, "y")), ("1", "3"));
        assert_eq!(text(&b, "flag"), "true", "a name alone is true");
        // CNTK appends only a value starting with '['; a '{' block replaces.
        let t = block(&b, "t");
        assert!(t.get("u").is_none() && t.get("v").is_some());
    }

    #[test]
    fn errors_name_line_and_column() {
        for (src, want) in [
            (
                "a = [ b = 1\n",
                "t:1:5: unterminated block: '[' is never closed by ']'",
            ),
            (
                "a = { b = 1 ]",
                "t:1:13: expected '}' to close the '{' at line 1, column 5, found ']'",
            ),
            (
                "a = [\n b = 1; )",
                "t:2:9: expected ']' to close the '[' at line 1, column 5, found ')'",
            ),
            (
                "a = \"abc\nb = 1",
                "t:1:5: unterminated string (no closing quote on this line)",
            ),
            (
                "a = ",
                "t:1:5: expected a value after 'a =', found end of file",
            ),
            (
                "a = ([b=1]",
                "t:1:5: unterminated parenthesis: '(' is never closed by ')'",
            ),
            (
                "s = [ a = f(x)) ]",
                "t:1:15: expected ']' to close the '[' at line 1, column 5, found ')'",
            ),
            (
                "net = [ f(x) = (x ]",
                "t:1:19: expected ')' to close the '(' at line 1, column 16, found ']'",
            ),
            (
                "net = { g = h(1, [2) }",
                "t:1:20: expected ']' to close the '[' at line 1, column 18, found ')'",
            ),
        ] {
            let err = parse(src, "t").unwrap_err();
            assert_eq!(err.to_string(), want, "{src:?}");
        }
    }

    /// Where CNTK's tokenizer is tolerant, so is this parser.
    #[test]
    fn stray_closers_at_the_top_level_are_names_alone() {
        // CNTK's Network_Operator_Plus.cntk: its section closed early, the reader at the top
        // level, a stray ']' after it.
        let b = parse("P = [\n  a = 1\n]\nreader = [ x = 1 ]\n]\nafter = 2\n", "t").unwrap();
        assert_eq!(text(&b, "]"), "true");
        assert_eq!(b.get("]").unwrap().key_pos.line, 5);
        assert_eq!(text(block(&b, "reader"), "x"), "1");
        assert_eq!(text(&b, "after"), "2");
        // After a bracketed or quoted value it starts a record of its own; after plain text
        // it is part of the text.
        let b = parse("a = f(x))\nb = [ c = 1 ] }\nd = \"q\" ] ; e = 1 ]", "t").unwrap();
        assert!(matches!(value(&b, "a"), Value::Expr(e) if e == "f(x)"));
        assert_eq!(text(&b, ")"), "true");
        assert_eq!(text(block(&b, "b"), "c"), "1");
        assert_eq!(text(&b, "}"), "true");
        assert_eq!(text(&b, "d"), "q");
        assert_eq!(text(&b, "]"), "true");
        assert_eq!(text(&b, "e"), "1 ]");
    }

    #[test]
    fn custom_separators_flags_empty_sections_and_top_level_brackets() {
        // A separator right after an opening bracket replaces ';' in that block only.
        let b = parse(
            "s = [|a=1|b=x;y|n=[c=1;d=2]]\nt = {:e=2:f=3}\nu = [./g]",
            "t",
        )
        .unwrap();
        let s = block(&b, "s");
        assert_eq!((text(s, "a"), text(s, "b")), ("1", "x;y"));
        assert_eq!(text(block(s, "n"), "d"), "2");
        assert_eq!(text(block(&b, "t"), "f"), "3");
        // `./`, `..` and `.\` start a path, not a separator.
        assert_eq!(text(block(&b, "u"), "./g"), "true");
        // A bracketed record at the top level adds its entries there.
        let b = parse("[ a = 1 ; b = 2 ]\n{|c=3|d=4}\n", "t").unwrap();
        let all: Vec<_> = ["a", "b", "c", "d"].map(|k| text(&b, k)).to_vec();
        assert_eq!(all, ["1", "2", "3", "4"]);
        // A name alone is true; an empty section and an empty string are values; a name with
        // '=' and nothing after it is an error, as in CNTK ("No value given").
        let b = parse("flag\ns = []\nq = \"\"\nr = [ inner ]", "t").unwrap();
        assert_eq!(text(&b, "flag"), "true");
        assert!(block(&b, "s").entries.is_empty());
        assert_eq!(text(&b, "q"), "");
        assert_eq!(text(block(&b, "r"), "inner"), "true");
        let e = parse("a = 1\nb =\n", "t").unwrap_err().to_string();
        assert_eq!(e, "t:3:1: expected a value after 'b =', found end of file");
    }

    proptest::proptest! {
        #[test]
        fn never_panics(src in "[a-c=;:#/$\\[\\]{}()'\" \n]{0,64}") {
            let _ = parse(&src, "t");
        }
    }

    /// Repeated names are found through an index: a block of many entries, given twice, is
    /// read in linear time (a quadratic search would take minutes here).
    #[test]
    fn large_blocks_with_repeated_names() {
        let body: String = (0..20_000).map(|i| format!("p{i} = {i}\n")).collect();
        let b = parse(
            &format!("s = [\n{body}]\ns = [\n{body}]\n{body}{body}"),
            "t",
        )
        .unwrap();
        assert_eq!(b.entries.len(), 20_001);
        assert_eq!(block(&b, "s").entries.len(), 20_000);
        assert_eq!(
            b.get("p19999").unwrap().replaced.map(|(p, _)| p.line),
            Some(60_004)
        );
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        for src in [
            format!("a = {}", "[ b = ".repeat(10_000)),
            format!("a = f{}", "(".repeat(10_000)),
        ] {
            let err = parse(&src, "t").unwrap_err();
            assert!(err.to_string().contains("nested deeper than 64"), "{err}");
        }
    }
}
