//! One module per subcommand.

pub mod bench;
pub mod check;
pub mod dump;
pub mod source;
