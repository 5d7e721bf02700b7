//! One module per subcommand.

pub mod bench;
pub mod bench_cbf;
pub mod bench_read;
pub mod check;
pub mod convert;
pub mod dump;
pub mod info;
pub mod read;
pub mod source;
