//! One module per subcommand.

pub mod check;
pub mod config;
pub mod convert;
pub mod dump;
pub mod info;
pub mod read;
pub mod source;
