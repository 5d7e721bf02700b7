//! Lens example files: `.ex` text and `.bex` binary.
//!
//! [`model`] is the example-set model, [`text`] parses and writes `.ex`, [`binary`] reads and
//! writes `.bex` byte for byte as Lens does.

pub mod binary;
pub mod dump;
pub mod materialize;
pub mod model;
pub mod pipe;
pub mod select;
pub mod text;

pub use model::{Event, Example, ExampleSet, Range, RangeKind, RangeList, SetHeader, SparseUnits};

/// Parses a Lens example file of either form (binary when it starts with the cookie).
pub fn parse(bytes: &[u8]) -> crate::Result<ExampleSet> {
    text::parse(bytes)
}
