//! Exit codes (documented in the README and in `--help`).

/// Everything read and analysed.
pub const OK: u8 = 0;
/// Output could not be written, or another unexpected failure.
pub const FAILURE: u8 = 1;
/// Command-line usage error (clap's own code).
#[allow(dead_code)]
pub const USAGE: u8 = 2;
/// An input could not be read at all (missing, not a capture).
pub const UNREADABLE: u8 = 3;
/// An input was truncated or corrupt part-way: results cover the part before it.
pub const PARTIAL: u8 = 4;
/// `diagnose --pair`: the two captures share no connection (each is
/// diagnosed alone).
pub const NOT_A_PAIR: u8 = 7;
