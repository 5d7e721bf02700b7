//! `$name$` substitution as CNTK's `ConfigParameters::TryFind` and `ResolveVariables` do it:
//! lazily, only for the values the reader reads, each value resolved in the scope where it is
//! defined, a name looked up from that block out to the top level.
//!
//! So `dumpModelPath = "$modelPath$.2"` at the top and `modelPath = "$dumpModelPath$"` inside
//! a section is not a cycle (the top level's `$modelPath$` finds the top level's `modelPath`),
//! and an undefined variable in a parameter the reader never reads is no error. Also here:
//! the command-line overrides (`--set`), applied to the tree before any lookup, as CNTK appends
//! its command-line assignments after the file.

use std::sync::Arc;

use super::syntax::{error_at, parse_with, Block, Entry, Node, Origin, Pos, Value};
use crate::error::{Error, ErrorKind, Result};

/// A value longer than this after substitution is refused (`$a$$a$` chains grow exponentially).
const MAX_EXPANDED_LEN: usize = 1 << 20;
/// Variables referring to variables deeper than this are taken as a runaway.
const MAX_DEPTH: usize = 64;

/// A block and the blocks around it, outermost (the top level) first, with their names.
#[derive(Debug, Clone)]
pub(crate) struct Scope<'a> {
    blocks: Vec<(&'a str, &'a Block)>,
}

impl<'a> Scope<'a> {
    /// The top level.
    pub(crate) fn top(block: &'a Block) -> Self {
        Scope {
            blocks: vec![("", block)],
        }
    }

    /// The block `name` inside this one.
    pub(crate) fn enter(&self, name: &'a str, block: &'a Block) -> Self {
        let mut blocks = self.blocks.clone();
        blocks.push((name, block));
        Scope { blocks }
    }

    /// The innermost block.
    pub(crate) fn block(&self) -> &'a Block {
        self.blocks[self.blocks.len() - 1].1
    }

    /// `Train.reader`, or "the top level".
    pub(crate) fn path(&self) -> String {
        let names: Vec<&str> = self.blocks[1..].iter().map(|b| b.0).collect();
        if names.is_empty() {
            "the top level".into()
        } else {
            names.join(".")
        }
    }

    /// The entry `name` and the scope it is defined in. CNTK resolves every `$name$` of a
    /// top-level block against the top level (when the block is fetched, its whole text is
    /// resolved there), so the top level is looked at first; a name it lacks is then looked up
    /// from this block outwards (where CNTK would stop with "No variable found").
    pub(crate) fn find(&self, name: &str) -> Option<(&'a Entry, Scope<'a>)> {
        self.lookup(std::iter::once(0).chain((1..self.blocks.len()).rev()), name)
    }

    /// The entry `name` of this block or, failing that, of the nearest enclosing block, as
    /// CNTK's parameter lookup walks out through the parents (how `precision` is inherited).
    pub(crate) fn inherited(&self, name: &str) -> Option<(&'a Entry, Scope<'a>)> {
        self.lookup((0..self.blocks.len()).rev(), name)
    }

    /// The first of the blocks at `order` (indices, outermost 0) that has `name`.
    fn lookup(
        &self,
        order: impl Iterator<Item = usize>,
        name: &str,
    ) -> Option<(&'a Entry, Scope<'a>)> {
        order.into_iter().find_map(|i| {
            self.blocks[i].1.get(name).map(|e| {
                let scope = Scope {
                    blocks: self.blocks[..=i].to_vec(),
                };
                (e, scope)
            })
        })
    }

    /// The blocks looked in, in order: `the top level, Train.reader, Train`.
    fn lookup_trail(&self) -> String {
        let order = std::iter::once(1).chain((2..=self.blocks.len()).rev());
        order
            .map(|n| {
                Scope {
                    blocks: self.blocks[..n].to_vec(),
                }
                .path()
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A value as the reader sees it, variables substituted.
#[derive(Debug, Clone)]
pub(crate) enum Resolved<'a> {
    /// Text with every `$name$` replaced.
    Text(String),
    /// A block, with the scope its own values are resolved in.
    Block(Scope<'a>),
    /// An array, with the scope its elements are resolved in.
    Array(&'a [Node], Scope<'a>),
    /// An expression for BrainScript, as written.
    Expr(&'a str),
}

/// Resolves values of one configuration file.
pub(crate) struct Resolver<'f> {
    pub(crate) file: &'f Arc<str>,
}

impl Resolver<'_> {
    /// `node`, the value of `key` in `scope`, with its variables substituted. A value that is
    /// exactly one `$name$` naming a block or an array is that block or array
    /// (`input = $cntkReaderInputDef$`).
    pub(crate) fn resolve<'a>(
        &self,
        node: &'a Node,
        key: &'a str,
        scope: &Scope<'a>,
    ) -> Result<Resolved<'a>> {
        match &node.value {
            Value::Text(t) => {
                if let Some(name) = whole_variable(t) {
                    if let Some((e, defined_in)) = scope.find(name) {
                        match &e.node.value {
                            Value::Block(b) => {
                                return Ok(Resolved::Block(defined_in.enter(&e.key, b)))
                            }
                            Value::Array(items) => return Ok(Resolved::Array(items, defined_in)),
                            _ => {}
                        }
                    }
                }
                let mut stack = Vec::new();
                Ok(Resolved::Text(
                    self.expand(t, scope, node.pos, key, &mut stack)?,
                ))
            }
            Value::Block(b) => Ok(Resolved::Block(scope.enter(key, b))),
            Value::Array(items) => Ok(Resolved::Array(items, scope.clone())),
            Value::Expr(e) => Ok(Resolved::Expr(e)),
        }
    }

    /// `text` (a value in `scope`) with every `$name$` replaced. Errors point at `pos` (the
    /// parameter the reader reads, `key`) and name the variables `stack` went through.
    fn expand<'a>(
        &self,
        text: &str,
        scope: &Scope<'a>,
        pos: Pos,
        key: &str,
        stack: &mut Vec<(*const Entry, &'a str)>,
    ) -> Result<String> {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find('$') {
            out.push_str(&rest[..start]);
            let after = &rest[start + 1..];
            // As CNTK: a name starts with a letter or '_' and ends at the next '$'; a '$' not
            // followed by such a name is kept as it is ("$1", "$$", "a$b c").
            let name_len = after
                .find(|c: char| c == '$' || FORBIDDEN_IN_NAME.contains(c))
                .filter(|&e| after.as_bytes()[e] == b'$');
            let Some(len) = name_len
                .filter(|_| after.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
            else {
                out.push('$');
                rest = after;
                continue;
            };
            let name = &after[..len];
            let through = |stack: &[(*const Entry, &str)]| -> String {
                stack.iter().map(|(_, n)| format!(" -> ${n}$")).collect()
            };
            let Some((entry, defined_in)) = scope.find(name) else {
                return Err(self.err(
                    pos,
                    format!(
                        "undefined variable '${name}$' in '{key}'{} (looked in {})",
                        through(stack),
                        scope.lookup_trail()
                    ),
                ));
            };
            let id: *const Entry = entry;
            if stack.iter().any(|(e, _)| *e == id) || stack.len() >= MAX_DEPTH {
                return Err(self.err(
                    pos,
                    format!(
                        "'{key}' refers to itself: {key}{} -> ${name}$",
                        through(stack)
                    ),
                ));
            }
            let value = match &entry.node.value {
                Value::Text(v) | Value::Expr(v) => {
                    stack.push((id, &entry.key));
                    let v = self.expand(v, &defined_in, pos, key, stack)?;
                    stack.pop();
                    v
                }
                Value::Block(_) | Value::Array(_) => {
                    return Err(self.err(
                        pos,
                        format!(
                            "'${name}$' is a {} ({}), not a value to put into text",
                            if matches!(entry.node.value, Value::Block(_)) {
                                "block"
                            } else {
                                "array"
                            },
                            match entry.key_pos.origin {
                                Origin::File => format!("defined at line {}", entry.key_pos.line),
                                Origin::Override(_) => "set by --set".to_string(),
                                Origin::Predefined => "predefined".to_string(),
                            }
                        ),
                    ));
                }
            };
            out.push_str(&value);
            rest = &after[len + 1..];
            if out.len() > MAX_EXPANDED_LEN {
                return Err(self.err(
                    pos,
                    format!(
                        "value is longer than {MAX_EXPANDED_LEN} bytes after '$...$' substitution"
                    ),
                ));
            }
        }
        out.push_str(rest);
        Ok(out)
    }

    fn err(&self, pos: Pos, msg: String) -> Error {
        error_at(ErrorKind::Config, self.file, pos, msg)
    }
}

/// CNTK's `forbiddenCharactersInVarName`.
const FORBIDDEN_IN_NAME: &str = ",/<>?;':\"[]{}\\|!@#%^&*()+=~` \t\n";

/// `name` when `text` is exactly `$name$`.
fn whole_variable(text: &str) -> Option<&str> {
    let name = text.trim().strip_prefix('$')?.strip_suffix('$')?;
    let ok = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && !name.contains(|c: char| c == '$' || FORBIDDEN_IN_NAME.contains(c));
    ok.then_some(name)
}

/// Applies `NAME=VALUE` (the `index`-th override) to `top`: NAME may be a dotted path
/// (`Train.reader.randomize`) into blocks, created when missing; VALUE is read as a value in
/// the config syntax (`[ ... ]` merges into an existing block, as CNTK's command line does).
pub(crate) fn apply_override(top: &mut Block, index: u32, name: &str, value: &str) -> Result<()> {
    let label: Arc<str> = format!("--set {name}={value}").into();
    let fail = |msg: String| error_at(ErrorKind::Config, &label, Pos::default(), msg);
    let parts: Vec<&str> = name.split('.').map(str::trim).collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(fail(format!(
            "'{name}' is not a parameter name or a dotted path"
        )));
    }
    let last = parts[parts.len() - 1];
    let mut parsed = parse_with(
        &format!("{last}={value}"),
        label.clone(),
        Origin::Override(index),
    )?;
    let Some(entry) = parsed
        .entries
        .pop()
        .filter(|e| e.key == last && parsed.entries.is_empty())
    else {
        return Err(fail(format!("'{value}' is not one value")));
    };
    let mut block = top;
    for (i, part) in parts[..parts.len() - 1].iter().enumerate() {
        if block.get(part).is_none() {
            let pos = entry.key_pos;
            block.entries.push(Entry {
                key: part.to_string(),
                key_pos: pos,
                node: Node {
                    value: Value::Block(Block::default()),
                    pos,
                },
                replaced: None,
            });
        }
        let e = block
            .entries
            .iter_mut()
            .rev()
            .find(|e| e.key.eq_ignore_ascii_case(part))
            .expect("just found or added");
        match &mut e.node.value {
            Value::Block(b) => block = b,
            _ => return Err(fail(format!("'{}' is not a block", parts[..=i].join(".")))),
        }
    }
    let merge = value.trim_start().starts_with('[');
    block.insert(entry, merge);
    Ok(())
}
