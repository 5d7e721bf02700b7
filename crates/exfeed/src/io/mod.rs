//! The I/O layer: opening inputs (memory-mapped files, standard input, compressed streams) and
//! writing outputs atomically. Parsing cores never touch I/O; they take the bytes this layer
//! provides.

mod cbf_files;
mod input;
mod lens_files;
mod output;
mod positioned;

pub use cbf_files::{open_cbf, open_cbf_buffered};
pub use input::{
    open_bytes, open_bytes_as, open_reader, read_into_memory, Compression, Holding, InputBytes,
    InputPath,
};
pub(crate) use input::{open_peeked, read_all};
pub use lens_files::{load_lens, save_lens};
pub use output::{remove_unfinished_outputs, AtomicOutput, OutputOptions};
pub use positioned::{read_at, read_at_most, read_exact_at};
