//! Output for people and programs: terminal tables, versioned JSON, the
//! self-contained HTML report, static plots and Parquet/Arrow tables.
//!
//! The report never analyses: it formats what `tcpwhy-flow` computed.

mod columns;
pub mod decimate;
pub mod escape;
pub mod flowgroups;
pub mod html;
pub mod packets;
pub mod pair_html;
pub mod plot;
mod stats_json;
mod stats_table;
pub mod tables;
mod thin;
pub mod timeline;
pub mod units;

pub use stats_json::{stats_json, STATS_SCHEMA};
pub use stats_table::{attempts_advice, attempts_line, write_stats_table};
pub use html::{write_html, CaptureReport, HtmlOptions, HtmlStats};
pub use packets::PacketLog;
pub use tables::{write_tables, TableFormat};
