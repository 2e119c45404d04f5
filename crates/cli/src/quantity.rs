//! Command-line quantities: every flag that takes a rate, a time or a size
//! reads it with `tcpwhy_core::units` (one parser, docs/units.md). These
//! adapters hand the value on in the unit a subcommand computes in.

use tcpwhy_core::units::{Duration, ParseError, Rate};

/// A time flag (`35ms`, `0.035s`), in seconds.
pub fn seconds(s: &str) -> Result<f64, ParseError> {
    s.parse::<Duration>().map(Duration::as_secs_f64)
}

/// A time flag (`35ms`, `0.035s`), in milliseconds.
pub fn millis(s: &str) -> Result<f64, ParseError> {
    s.parse::<Duration>().map(Duration::as_millis_f64)
}

/// A rate flag (`1gbit`, `1Gbit/s`, `125MB/s`), in bits per second.
pub fn bits_per_sec(s: &str) -> Result<f64, ParseError> {
    s.parse::<Rate>().map(Rate::bps)
}

/// The accepted spellings, for the after-help of commands with quantities.
pub const UNITS_HELP: &str = "\
Quantities need their unit (a bare 35 could be seconds or milliseconds):
rates 1gbit, 1Gbit/s, 1gbps, 200mbit, 125MB/s; times 35ms, 35 ms, 0.035s;
sizes 4MiB, 4m (binary), 6.25MB (decimal), 65535 (bytes). See docs/units.md.";
