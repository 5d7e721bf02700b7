//! CNTK's configuration syntax as users write it: a tokenizer and a recursive-descent parser
//! producing a tree of [`Block`]s whose every node remembers its line and column.
//!
//! ```text
//! deviceId = -1                     # name = value, one per line or ';'-separated
//! defMBSize = false
//! train = [                         # [ ... ] and { ... } are the same kind of block
//!     precision = "double"          # "..." and '...' strings (no escapes, as in CNTK)
//!     reader = {
//!         deserializers = ([ type = "CNTKTextFormatDeserializer" ] : [ ... ])   # arrays
//!         input = [ features = [ dim = 3; definesMBSize = $defMBSize$ ] ]
//!     }
//! ]
//! ```
//!
//! Keys are matched case-insensitively, as CNTK's `ConfigParameters` (a map with a case-insensitive
//! comparator) does. `$name$` is replaced by the text of the variable `name` looked up, also
//! case-insensitively, in the enclosing blocks from the innermost outwards to the top level,
//! after the whole file is read (so a variable may be defined after its use).

use std::sync::Arc;

use crate::error::{Error, ErrorKind, Location};

/// Where a node starts: 1-based line and column (in bytes). Zero means unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pos {
    /// 1-based line, 0 if unknown.
    pub line: u32,
    /// 1-based column in bytes, 0 if unknown.
    pub column: u32,
}

/// A value: text (quoted or bare), a block of named entries, or an array.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string, number or boolean, as written (quotes removed).
    Text(String),
    /// `[ ... ]` or `{ ... }`.
    Block(Block),
    /// `( a : b : c )`.
    Array(Vec<Node>),
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
}

/// A block's entries in the order written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Block {
    /// The entries.
    pub entries: Vec<Entry>,
}

impl Block {
    /// The last entry named `key` (case-insensitively): a later assignment overrides an earlier one.
    pub fn get(&self, key: &str) -> Option<&Entry> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.key.eq_ignore_ascii_case(key))
    }
}

/// Blocks and arrays nested deeper than this are refused (no stack overflow on `[[[[...`).
const MAX_DEPTH: usize = 64;
/// `$a$` -> `$b$` -> ... chains longer than this are taken as a cycle.
const MAX_SUBSTITUTION_DEPTH: usize = 16;
/// A value longer than this after substitution is refused (`$a$$a$` chains grow exponentially).
const MAX_EXPANDED_LEN: usize = 1 << 20;

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

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Quoted(String),
    Punct(u8),
    Newline,
    Eof,
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Word(w) => format!("'{w}'"),
        Tok::Quoted(s) => format!("string \"{s}\""),
        Tok::Punct(c) => format!("'{}'", *c as char),
        Tok::Newline => "end of line".into(),
        Tok::Eof => "end of file".into(),
    }
}

struct Lexer<'a> {
    src: &'a [u8],
    at: usize,
    line: u32,
    line_start: usize,
    file: Arc<str>,
}

fn is_punct(c: u8) -> bool {
    matches!(
        c,
        b'=' | b';' | b',' | b'[' | b']' | b'{' | b'}' | b'(' | b')'
    )
}

impl<'a> Lexer<'a> {
    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            column: (self.at - self.line_start + 1) as u32,
        }
    }

    /// The next token and where it starts.
    fn next(&mut self) -> Result<(Tok, Pos), Error> {
        loop {
            match self.src.get(self.at) {
                Some(b' ' | b'\t' | b'\r') => self.at += 1,
                Some(b'#') => {
                    while !matches!(self.src.get(self.at), None | Some(b'\n')) {
                        self.at += 1;
                    }
                }
                _ => break,
            }
        }
        let pos = self.pos();
        let Some(&c) = self.src.get(self.at) else {
            return Ok((Tok::Eof, pos));
        };
        if c == b'\n' {
            self.at += 1;
            self.line = self.line.saturating_add(1);
            self.line_start = self.at;
            return Ok((Tok::Newline, pos));
        }
        if is_punct(c) || c == b':' {
            // ':' separates array elements when it starts a token; inside a bare word (a
            // Windows path `c:\data`) it is part of the word.
            self.at += 1;
            return Ok((Tok::Punct(c), pos));
        }
        if c == b'"' || c == b'\'' {
            let start = self.at + 1;
            let Some(len) = self.src[start..].iter().position(|&b| b == c || b == b'\n') else {
                return Err(self.unterminated(pos));
            };
            if self.src[start + len] != c {
                return Err(self.unterminated(pos));
            }
            self.at = start + len + 1;
            let text = String::from_utf8_lossy(&self.src[start..start + len]).into_owned();
            return Ok((Tok::Quoted(text), pos));
        }
        let start = self.at;
        while let Some(&b) = self.src.get(self.at) {
            if b.is_ascii_whitespace() || is_punct(b) || matches!(b, b'#' | b'"' | b'\'') {
                break;
            }
            self.at += 1;
        }
        Ok((
            Tok::Word(String::from_utf8_lossy(&self.src[start..self.at]).into_owned()),
            pos,
        ))
    }

    fn unterminated(&self, pos: Pos) -> Error {
        error_at(
            ErrorKind::Syntax,
            &self.file,
            pos,
            "unterminated string (no closing quote on this line)",
        )
    }
}

struct Parser<'a> {
    lex: Lexer<'a>,
    tok: Tok,
    pos: Pos,
}

impl<'a> Parser<'a> {
    fn bump(&mut self) -> Result<(), Error> {
        (self.tok, self.pos) = self.lex.next()?;
        Ok(())
    }

    fn err(&self, pos: Pos, msg: impl Into<String>) -> Error {
        error_at(ErrorKind::Syntax, &self.lex.file, pos, msg)
    }

    /// A closing bracket that does not close the block opened at `open`.
    fn mismatched(&self, want: u8, open: Pos) -> Error {
        let opener = if want == b']' { '[' } else { '{' };
        self.err(
            self.pos,
            format!(
                "expected '{}' to close the '{opener}' at line {}, column {}, found {}",
                want as char,
                open.line,
                open.column,
                describe(&self.tok)
            ),
        )
    }

    fn skip_separators(&mut self) -> Result<(), Error> {
        while matches!(self.tok, Tok::Newline | Tok::Punct(b';' | b',')) {
            self.bump()?;
        }
        Ok(())
    }

    fn skip_newlines(&mut self) -> Result<(), Error> {
        while self.tok == Tok::Newline {
            self.bump()?;
        }
        Ok(())
    }

    /// Entries up to `close` (`None`: the end of the file). The opening bracket was at `open`.
    fn block_body(&mut self, close: Option<(u8, Pos)>, depth: usize) -> Result<Block, Error> {
        let mut block = Block::default();
        loop {
            self.skip_separators()?;
            match (&self.tok, close) {
                (Tok::Eof, None) => return Ok(block),
                (Tok::Eof, Some((c, open))) => {
                    let opener = if c == b']' { '[' } else { '{' };
                    return Err(self.err(
                        open,
                        format!(
                            "unterminated block: '{opener}' is never closed by '{}'",
                            c as char
                        ),
                    ));
                }
                (Tok::Punct(c), Some((want, _))) if *c == want => {
                    self.bump()?;
                    return Ok(block);
                }
                (Tok::Punct(b']' | b'}' | b')'), Some((want, open))) => {
                    return Err(self.mismatched(want, open))
                }
                (Tok::Word(_), _) => {}
                (other, _) => {
                    return Err(self.err(
                        self.pos,
                        format!("expected a parameter name, found {}", describe(other)),
                    ));
                }
            }
            let Tok::Word(key) = std::mem::replace(&mut self.tok, Tok::Eof) else {
                unreachable!()
            };
            let key_pos = self.pos;
            self.bump()?;
            if self.tok != Tok::Punct(b'=') {
                return Err(self.err(
                    self.pos,
                    format!("expected '=' after '{key}', found {}", describe(&self.tok)),
                ));
            }
            self.bump()?;
            self.skip_newlines()?;
            let node = self.value(depth)?;
            match &self.tok {
                Tok::Newline | Tok::Eof | Tok::Punct(b';' | b',') => {}
                Tok::Punct(c) if Some(*c) == close.map(|c| c.0) => {}
                Tok::Punct(b']' | b'}' | b')') if close.is_some() => {
                    let (want, open) = close.unwrap_or_default();
                    return Err(self.mismatched(want, open));
                }
                other => {
                    return Err(self.err(
                        self.pos,
                        format!(
                            "expected end of line or ';' after the value of '{key}', found {}",
                            describe(other)
                        ),
                    ));
                }
            }
            block.entries.push(Entry { key, key_pos, node });
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node, Error> {
        let pos = self.pos;
        if depth >= MAX_DEPTH {
            return Err(self.err(pos, format!("blocks nested deeper than {MAX_DEPTH}")));
        }
        let value = match std::mem::replace(&mut self.tok, Tok::Eof) {
            Tok::Quoted(s) => {
                self.bump()?;
                Value::Text(s)
            }
            Tok::Word(mut w) => {
                // A bare value runs to the end of the line: `a = hello world` is "hello world".
                self.bump()?;
                while let Tok::Word(more) = &self.tok {
                    w.push(' ');
                    w.push_str(more);
                    self.bump()?;
                }
                Value::Text(w)
            }
            Tok::Punct(b'[') => {
                self.bump()?;
                Value::Block(self.block_body(Some((b']', pos)), depth + 1)?)
            }
            Tok::Punct(b'{') => {
                self.bump()?;
                Value::Block(self.block_body(Some((b'}', pos)), depth + 1)?)
            }
            Tok::Punct(b'(') => {
                self.bump()?;
                Value::Array(self.array(pos, depth + 1)?)
            }
            other => {
                self.tok = other;
                return Err(self.err(
                    pos,
                    format!("expected a value, found {}", describe(&self.tok)),
                ));
            }
        };
        Ok(Node { value, pos })
    }

    /// Elements separated by ':' up to ')'; `(a:b)` as one bare word is split too.
    fn array(&mut self, open: Pos, depth: usize) -> Result<Vec<Node>, Error> {
        let mut items = Vec::new();
        loop {
            self.skip_newlines()?;
            match &self.tok {
                Tok::Punct(b')') => {
                    self.bump()?;
                    return Ok(items);
                }
                Tok::Eof => {
                    return Err(self.err(open, "unterminated array: '(' is never closed by ')'"))
                }
                Tok::Punct(b':') if !items.is_empty() => {
                    self.bump()?;
                    self.skip_newlines()?;
                }
                _ if items.is_empty() => {}
                other => {
                    return Err(self.err(
                        self.pos,
                        format!("expected ':' or ')' in an array, found {}", describe(other)),
                    ));
                }
            }
            let bare = matches!(self.tok, Tok::Word(_));
            let node = self.value(depth)?;
            match node.value {
                Value::Text(ref t) if bare && t.contains(':') => {
                    for (i, part) in t.split(':').enumerate() {
                        let pos = Pos {
                            line: node.pos.line,
                            column: node.pos.column.saturating_add(i as u32),
                        };
                        items.push(Node {
                            value: Value::Text(part.trim().to_string()),
                            pos,
                        });
                    }
                }
                _ => items.push(node),
            }
        }
    }
}

/// Parses CNTK config text into its top-level block (`file` names it in errors).
pub fn parse(text: &str, file: &str) -> Result<Block, Error> {
    let file: Arc<str> = file.into();
    let src = text.strip_prefix('\u{feff}').unwrap_or(text).as_bytes();
    let lex = Lexer {
        src,
        at: 0,
        line: 1,
        line_start: 0,
        file: file.clone(),
    };
    let mut p = Parser {
        lex,
        tok: Tok::Eof,
        pos: Pos::default(),
    };
    p.bump()?;
    let mut top = p.block_body(None, 0)?;
    substitute_block(&mut top, &[], &file)?;
    Ok(top)
}

/// Replaces `$name$` in every text of `block`, whose enclosing blocks are `outer` (outermost first).
fn substitute_block(block: &mut Block, outer: &[&Block], file: &Arc<str>) -> Result<(), Error> {
    // Resolve against a snapshot of this block so that lookups see the text as written.
    let snapshot = block.clone();
    let mut scopes: Vec<&Block> = outer.to_vec();
    scopes.push(&snapshot);
    for entry in &mut block.entries {
        substitute_node(&mut entry.node, &scopes, file)?;
    }
    Ok(())
}

fn substitute_node(node: &mut Node, scopes: &[&Block], file: &Arc<str>) -> Result<(), Error> {
    match &mut node.value {
        Value::Text(t) => {
            if t.contains('$') {
                *t = expand(t, scopes, file, node.pos, 0)?;
            }
        }
        Value::Block(b) => substitute_block(b, scopes, file)?,
        Value::Array(items) => {
            for item in items {
                substitute_node(item, scopes, file)?;
            }
        }
    }
    Ok(())
}

fn expand(
    text: &str,
    scopes: &[&Block],
    file: &Arc<str>,
    pos: Pos,
    depth: usize,
) -> Result<String, Error> {
    if depth > MAX_SUBSTITUTION_DEPTH {
        return Err(error_at(
            ErrorKind::Config,
            file,
            pos,
            "'$...$' substitutions nest too deep (a cycle?)",
        ));
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('$') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        // As in CNTK, only '$' followed by a letter or '_' starts a variable ("$1", "$$" stay).
        if !after.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            out.push('$');
            rest = after;
            continue;
        }
        let end = after.find(|c: char| c == '$' || c.is_whitespace());
        let Some(end) = end.filter(|&e| after.as_bytes()[e] == b'$') else {
            return Err(error_at(
                ErrorKind::Config,
                file,
                pos,
                format!(
                    "'${}' is not closed by '$'",
                    after.split_whitespace().next().unwrap_or("")
                ),
            ));
        };
        let name = &after[..end];
        let found = scopes.iter().rev().find_map(|b| b.get(name));
        match found.map(|e| &e.node.value) {
            Some(Value::Text(v)) => out.push_str(&expand(v, scopes, file, pos, depth + 1)?),
            Some(_) => {
                return Err(error_at(
                    ErrorKind::Config,
                    file,
                    pos,
                    format!("'${name}$' names a block or array, not a value"),
                ));
            }
            None => {
                return Err(error_at(
                    ErrorKind::Config,
                    file,
                    pos,
                    format!("undefined variable '${name}$'"),
                ));
            }
        }
        rest = &after[end + 1..];
        if out.len() > MAX_EXPANDED_LEN {
            return Err(error_at(
                ErrorKind::Config,
                file,
                pos,
                format!("value is longer than {MAX_EXPANDED_LEN} bytes after '$...$' substitution"),
            ));
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text<'a>(b: &'a Block, key: &str) -> &'a str {
        match &b.get(key).unwrap().node.value {
            Value::Text(t) => t,
            other => panic!("{key}: {other:?}"),
        }
    }

    fn block<'a>(b: &'a Block, key: &str) -> &'a Block {
        match &b.get(key).unwrap().node.value {
            Value::Block(b) => b,
            other => panic!("{key}: {other:?}"),
        }
    }

    #[test]
    fn lines_semicolons_blocks_comments_strings() {
        let b = parse(
            "a = 1 # c\nb='x # not a comment'; c = \"y;z\"\nd = { e = [ f = g h ] ; i = 2 }\n",
            "t",
        )
        .unwrap();
        assert_eq!(text(&b, "A"), "1");
        assert_eq!(text(&b, "b"), "x # not a comment");
        assert_eq!(text(&b, "c"), "y;z");
        let d = block(&b, "d");
        assert_eq!(text(block(d, "e"), "f"), "g h");
        assert_eq!(text(d, "i"), "2");
        assert_eq!(b.get("d").unwrap().key_pos, Pos { line: 3, column: 1 });
        assert_eq!(
            d.get("i").unwrap().node.pos,
            Pos {
                line: 3,
                column: 29
            }
        );
    }

    #[test]
    fn arrays_of_blocks_and_words() {
        let b = parse(
            "x = ([a=1]:[a=2])\ny = ({ a = 3 })\nz = (p:q : r : 's:t')\nw = c:\\data\\f.txt",
            "t",
        )
        .unwrap();
        let Value::Array(x) = &b.get("x").unwrap().node.value else {
            panic!()
        };
        assert_eq!(x.len(), 2);
        let Value::Array(y) = &b.get("y").unwrap().node.value else {
            panic!()
        };
        assert_eq!(y.len(), 1);
        let Value::Array(z) = &b.get("z").unwrap().node.value else {
            panic!()
        };
        let z: Vec<_> = z.iter().map(|n| n.value.clone()).collect();
        assert_eq!(z, ["p", "q", "r", "s:t"].map(|s| Value::Text(s.into())));
        assert_eq!(text(&b, "w"), "c:\\data\\f.txt");
    }

    #[test]
    fn substitution_is_case_insensitive_and_scoped() {
        let b = parse("defMbSize = false\ns = [ v = $defMBSize$ ; in = [ w = x$v$y ] ]\nlate = $after$\nafter = 5", "t")
            .unwrap();
        let s = block(&b, "s");
        assert_eq!(text(s, "v"), "false");
        assert_eq!(text(block(s, "in"), "w"), "xfalsey");
        assert_eq!(text(&b, "late"), "5");
        let b = parse("a = $1 $$ $_x$, _x = y", "t").unwrap();
        assert_eq!(
            text(&b, "a"),
            "$1 $$ y",
            "'$' before a non-letter is literal; ',' separates"
        );
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
                "a = 'abc",
                "t:1:5: unterminated string (no closing quote on this line)",
            ),
            ("\n  a 1", "t:2:5: expected '=' after 'a', found '1'"),
            ("a = ", "t:1:5: expected a value, found end of file"),
            (
                "a = ([b=1] [c=2])",
                "t:1:12: expected ':' or ')' in an array, found '['",
            ),
            (
                "a = ([b=1]",
                "t:1:5: unterminated array: '(' is never closed by ')'",
            ),
            (
                "a = [b=1] c",
                "t:1:11: expected end of line or ';' after the value of 'a', found 'c'",
            ),
            ("]", "t:1:1: expected a parameter name, found ']'"),
            ("a = $nope$", "t:1:5: undefined variable '$nope$'"),
            ("a = x$nope", "t:1:5: '$nope' is not closed by '$'"),
            ("a = $no pe$", "t:1:5: '$no' is not closed by '$'"),
            (
                "a = $b$\nb = $a$",
                "t:1:5: '$...$' substitutions nest too deep (a cycle?)",
            ),
            (
                "a = $b$\nb = [ c = 1 ]",
                "t:1:5: '$b$' names a block or array, not a value",
            ),
        ] {
            let err = parse(src, "t").unwrap_err();
            assert_eq!(err.to_string(), want, "{src:?}");
        }
    }

    #[test]
    fn exponential_substitution_is_capped() {
        let mut src =
            String::from("v0 = xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n");
        for i in 1..=15 {
            src += &format!("v{i} = $v{}$$v{}$\n", i - 1, i - 1);
        }
        let err = parse(&src, "t").unwrap_err();
        assert!(
            err.to_string().contains("longer than 1048576 bytes"),
            "{err}"
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics(src in "[a-c=;:#$\\[\\]{}()'\" \n]{0,64}") {
            let _ = parse(&src, "t");
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let src = format!("a = {}", "[ b = ".repeat(10_000));
        let err = parse(&src, "t").unwrap_err();
        assert!(err.to_string().contains("nested deeper than 64"), "{err}");
    }
}
