//! Diagnosis: what limited each data direction of each connection, the root
//! cause with its evidence, the fix with computed values and what the fix
//! gains.
//!
//! Input is the flow model: the [`ConnectionSummary`]s of a capture and the
//! per-segment records a [`Recorder`] kept during the same pass. Output is
//! [`model::ConnectionDiagnosis`] (JSON schema `tcpwhy.diagnose/2`).

mod analyze;
mod commands;
pub mod congestion;
pub mod decide;
pub mod detect;
pub mod groups;
mod fixes;
pub mod latency;
pub mod limits;
pub mod model;
pub mod parts;
pub mod path;
pub mod policer;
pub mod quality;
pub mod shape;
pub mod states;
pub mod system;
pub mod record;
pub mod split;
mod text;

pub use analyze::{diagnose_connection, diagnose_direction, Options, MIN_BYTES};
pub use tcpwhy_core::units::{fmt_bytes, fmt_ms, fmt_rate};
pub use fixes::{buffer_for_window, mathis_bps, transfer_bps, INITIAL_WINDOW_SEGMENTS, LINUX_TCP_RMEM_MAX_DEFAULT, RANGE_MIN_RATIO};
pub use model::{ConnectionDiagnosis, DirectionDiagnosis, SCHEMA};
pub use record::{AckRec, ConnRecords, DataRec, DirRecords, Recorder, TurnHead};
pub use text::headline;

use tcpwhy_flow::CaptureAnalysis;

/// How the kernel turns a receive buffer into a window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KernelRule {
    /// Before 6.6: window = buffer x (1 - 1/2^tcp_adv_win_scale).
    AdvWinScale(i8),
    /// 6.6 and later: a per-socket scaling_ratio (payload / truesize), about 50%.
    ScalingRatio,
}

impl Default for KernelRule {
    fn default() -> Self {
        KernelRule::ScalingRatio
    }
}

impl KernelRule {
    /// From a kernel version such as "5.10" or "6.6.1" (and the sysctl
    /// tcp_adv_win_scale when known; default 1).
    pub fn for_version(version: &str, adv_win_scale: Option<i8>) -> Option<KernelRule> {
        let mut it = version.trim().trim_start_matches('v').split(['.', '-']);
        let major: u32 = it.next()?.parse().ok()?;
        let minor: u32 = it.next().unwrap_or("0").parse().ok()?;
        Some(if (major, minor) >= (6, 6) {
            KernelRule::ScalingRatio
        } else {
            KernelRule::AdvWinScale(adv_win_scale.unwrap_or(1))
        })
    }
    pub fn window_fraction(self) -> f64 {
        match self {
            KernelRule::ScalingRatio => 0.5,
            KernelRule::AdvWinScale(s) if s > 0 => 1.0 - 1.0 / f64::from(1u32 << s.min(14)),
            KernelRule::AdvWinScale(s) => 1.0 / f64::from(1u32 << (-s).clamp(0, 14)),
        }
    }
    pub fn describe(self) -> String {
        match self {
            KernelRule::ScalingRatio => "Linux 6.6+ per-socket scaling_ratio".into(),
            KernelRule::AdvWinScale(s) => format!("Linux before 6.6 with tcp_adv_win_scale={s}"),
        }
    }
    pub fn fraction_text(self) -> String {
        match self {
            KernelRule::ScalingRatio => "about half".into(),
            _ => format!("{:.0}%", self.window_fraction() * 100.0),
        }
    }
}

/// Diagnoses every connection of a capture.
pub fn diagnose_all(capture: &CaptureAnalysis, recorder: &Recorder, opts: &Options) -> Vec<ConnectionDiagnosis> {
    let connections = &capture.connections;
    // Flows compared with each other first: a group's policer verdict
    // stands in for a member's own when the member alone fails the test.
    let groups = groups::policed_groups(connections, recorder, opts);
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
    diags
}
