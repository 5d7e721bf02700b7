//! One module per subcommand.

pub mod check;
pub mod convert;
pub mod dump;
pub mod info;
