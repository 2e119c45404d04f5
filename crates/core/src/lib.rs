//! The bottom of the tcpwhy workspace: the words every other crate shares.
//!
//! - [`units`]: [`Bytes`], [`Rate`] and [`Duration`], each with one parser
//!   (every CLI flag and every scenario key) and one human formatter (every
//!   text output). The conventions are in docs/units.md.
//! - [`vocab`]: [`Limit`] (what held a connection back during an interval)
//!   and [`Cause`] (the root cause, `primary` in the JSON), so a misspelt
//!   name is a compile error or a parse error, never a silent mismatch.
//! - [`kernel`]: [`KernelRule`], how Linux turns a receive buffer into a
//!   window, and [`buffer_for_window`].

pub mod kernel;
pub mod units;
pub mod vocab;

pub use kernel::{buffer_for_window, KernelRule};
pub use units::{Bytes, Duration, ParseError, Rate};
pub use vocab::{Cause, Confidence, Limit, UnknownName};
