//! Output for people and programs: terminal tables and versioned JSON.
//!
//! The report never analyses: it formats what `tcpwhy-flow` computed.

mod stats_json;
mod stats_table;
pub mod units;

pub use stats_json::{stats_json, STATS_SCHEMA};
pub use stats_table::write_stats_table;
