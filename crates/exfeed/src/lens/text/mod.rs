//! The text `.ex` format: a parser over a byte slice that loads what Lens 2.63 loads and rejects
//! what it rejects (with line, column, byte, example index, and what was expected versus found),
//! and a writer whose output reads back to the same set.

mod dense;
mod parse;
mod runs;
mod write;

pub use parse::parse;
#[cfg(test)]
use parse::parse_one_at_a_time;
pub(crate) use parse::{is_incomplete, parse_example_at, parse_header_prefix};
pub use write::{write, write_example, write_header};

#[cfg(test)]
mod tests;
