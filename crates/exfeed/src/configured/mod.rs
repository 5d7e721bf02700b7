//! The reader a configuration describes: CNTK's reader block (or its TOML form, or the
//! command line's and Python's arguments) opened into a minibatch [`Reader`](crate::reader::Reader)
//! over the [sources](crate::source) of its deserializers.

mod any;
mod args;
mod build;

pub use any::{AnyMinibatch, AnyReader, Equalize, RunOptions};
pub use args::ReaderArgs;
pub use build::{
    build_reader, open_configured_source, open_configured_source_with, reader_options,
    ConfiguredSource,
};
