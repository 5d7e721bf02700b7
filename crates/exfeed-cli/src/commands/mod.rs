//! One module per subcommand.

pub mod bench;
mod bench_read;
pub mod cbf_source;
pub mod check;
pub mod convert;
pub mod dump;
pub mod info;
pub mod read;
pub mod source;
