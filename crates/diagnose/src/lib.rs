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

use tcpwhy_flow::CaptureAnalysis;

/// Diagnoses every connection of a capture.
pub fn diagnose_all(capture: &CaptureAnalysis, recorder: &Recorder, opts: &Options) -> Vec<ConnectionDiagnosis> {
    let connections = &capture.connections;
    // Flows compared with each other first: a group's policer verdict
    // stands in for a member's own when the member alone fails the test.
    let groups = groups::policed_groups(connections, recorder.records(), opts);
    let mut diags: Vec<ConnectionDiagnosis> =
        connections.iter().map(|c| diagnose_connection(c, recorder.get(c.id), opts, &groups)).collect();
    quality::shared_path(&mut diags, connections);
    if let Some(n) = capture.interface_drops.filter(|n| *n > 0) {
        let counters = match capture.format {
            tcpwhy_wire::CaptureFormat::Live => {
                "the kernel's counters for this live capture (pcap_stats): the capture ring ran full, or the interface dropped them"
            }
            _ => "pcapng interface statistics: interface and OS drops",
        };
        quality::capture_dropped(&mut diags, n, counters);
    }
    // A capture cut part-way: its last transfers are seen only up to the cut.
    match &capture.error {
        Some(tcpwhy_wire::CaptureError::Truncated { frames, .. }) => {
            quality::capture_cut(&mut diags, connections, *frames, "the file ends there, in the middle of a record")
        }
        Some(tcpwhy_wire::CaptureError::Corrupt { frames, .. }) => {
            quality::capture_cut(&mut diags, connections, *frames, "the file is corrupt from there on")
        }
        _ => {}
    }
    diags
}
