//! Diagnosis: what limited each data direction of each connection, the root
//! cause with its evidence, the fix with computed values and what the fix
//! gains.
//!
//! Input is the flow model: the [`ConnectionSummary`]s of a capture and the
//! per-segment records a [`Recorder`] kept during the same pass. Output is
//! [`model::ConnectionDiagnosis`] (JSON schema `tcpwhy.diagnose/2`).

mod analyze;
mod commands;
pub mod consistency;
pub mod connection;
pub mod congestion;
pub mod decide;
pub mod detect;
pub mod groups;
mod fixes;
pub mod latency;
pub mod limits;
pub mod model;
pub mod options;
pub mod parts;
pub mod path;
pub mod pipeline;
pub mod policer;
pub mod quality;
mod rank;
pub mod shape;
pub mod states;
pub mod system;
pub mod timeline;
pub mod record;
pub mod recorder;
pub mod split;
pub mod text;

pub use analyze::diagnose_direction;
pub use connection::diagnose_connection;
pub use options::{KernelRule, Options, MIN_BYTES};
pub use tcpwhy_core::units::{fmt_bytes, fmt_ms, fmt_rate};
pub use fixes::{buffer_for_window, mathis_bps, transfer_bps, INITIAL_WINDOW_SEGMENTS, LINUX_TCP_RMEM_MAX_DEFAULT, RANGE_MIN_RATIO};
pub use model::{ConnectionDiagnosis, DirectionDiagnosis, SCHEMA};
pub use record::{AckRec, ConnRecords, DataRec, DirRecords, Records, TurnHead};
pub use recorder::Recorder;
pub use text::headline;
pub use pipeline::{diagnose_all, diagnose_connections, CaptureDiagnosis, Diagnoser, Live};

