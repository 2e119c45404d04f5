//! Exit codes of `tcpwhy lab` and its subcommands (documented in
//! `tcpwhy lab --help`): `lab run`, `lab sweep`, `lab clean`.

pub const OK: u8 = 0;
pub const FAILURE: u8 = 1;
pub const INVALID: u8 = 2;
/// The scenario file could not be read.
pub const UNREADABLE: u8 = crate::exit::UNREADABLE;
/// The run finished but the kernel's numbers did not show the cause.
pub const NOT_SHOWN: u8 = 5;
/// Not root, or a required tool / kernel feature is missing.
pub const ENVIRONMENT: u8 = 6;
pub const INTERRUPTED: u8 = 130;
