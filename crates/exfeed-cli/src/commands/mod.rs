//! One module per subcommand.

pub mod cbf_source;
pub mod check;
pub mod config;
pub mod convert;
pub mod dump;
pub mod info;
pub mod lens;
pub mod read;
pub mod source;
