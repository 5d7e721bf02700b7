//! The I/O layer: opening inputs (memory-mapped files, standard input, compressed streams) and
//! writing outputs atomically. Parsing cores never touch I/O; they take the bytes this layer
//! provides.

mod input;
mod output;

pub use input::{open_bytes, open_reader, read_into_memory, Compression, InputBytes, InputPath};
pub use output::{remove_unfinished_outputs, AtomicOutput, OutputOptions};
