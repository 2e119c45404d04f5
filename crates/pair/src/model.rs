//! What `diagnose --pair` reports (JSON: the `pair` object; docs/pair.md).

use crate::compare::LossCounts;
use crate::matching::MatchKind;
use serde::Serialize;

/// Schema of the pair report's JSON.
pub const PAIR_SCHEMA: &str = "tcpwhy.pair/1";

#[derive(Debug, Clone, Serialize)]
pub struct PairReport {
    pub schema: &'static str,
    pub files: [String; 2],
    /// Connections each capture holds.
    pub connections: [usize; 2],
    pub clock: Clock,
    pub pairs: Vec<PairedConnection>,
    /// Connections of each capture matched with none of the other.
    pub unmatched: [usize; 2],
    /// What kept the comparison from being complete (no match, no overlap).
    pub messages: Vec<String>,
}

/// Capture 1's clock minus capture 0's, bounded by causality.
#[derive(Debug, Clone, Serialize)]
pub struct Clock {
    /// [lower, upper] bound, ms; absent when no packet crossed both points
    /// in one of the two directions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset_ms: Option<[f64; 2]>,
    /// The bounds contradict each other (a clock stepped or drifted during
    /// the captures, or the matches are wrong): no offset is given.
    pub consistent: bool,
    /// The coarse offset the handshakes gave, used only to order the two
    /// captures' packets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handshake_offset_ms: Option<f64>,
}

impl Clock {
    /// The bounds in words (text and HTML output).
    pub fn describe(&self) -> String {
        match (self.offset_ms, self.consistent) {
            (Some([lo, hi]), _) => format!("capture 1 reads between {lo:.3} and {hi:.3} ms later than capture 0 (bounded by packets seen at both; no offset is assumed)"),
            (None, false) => "cannot be aligned (the bounds contradict each other)".into(),
            (None, true) => "not bounded (no packet crossed both points in each direction)".into(),
        }
    }
}

impl PairReport {
    /// The pairs with something to say first, then in capture order.
    pub fn by_interest(&self) -> Vec<&PairedConnection> {
        let mut shown: Vec<_> = self.pairs.iter().collect();
        shown.sort_by_key(|pc| pc.findings.iter().all(|f| f.kind == "nothing_between"));
        shown
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ConnRef {
    pub capture: usize,
    /// The connection's id in that capture (as in `diagnose`).
    pub id: u64,
    pub client: String,
    pub server: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct PairedConnection {
    pub connections: [ConnRef; 2],
    pub kind: MatchKind,
    pub evidence: Vec<String>,
    /// The capture nearer the client, and why.
    pub client_capture: usize,
    pub client_capture_by: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset_ms: Option<[f64; 2]>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub directions: Vec<PairedDirection>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub proxy: Vec<ProxyDirection>,
    pub changes: Vec<Change>,
    /// The paired verdict, most important first: what and where.
    pub findings: Vec<Finding>,
    /// Path capacities one capture did not show, carried to its diagnosis
    /// from the pair (filled by the caller that holds the diagnoses:
    /// `tcpwhy diagnose --pair`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub capacities: Vec<CarriedCapacity>,
}

/// A path capacity given to one capture's what-if from the pair.
#[derive(Debug, Clone, Serialize)]
pub struct CarriedCapacity {
    /// The capture whose diagnosis took it.
    pub capture: usize,
    /// "client" or "server": whose data.
    pub from: &'static str,
    /// Payload bits per second.
    pub rate_bps: f64,
    /// "drain_between" (the rate a queue between the points drained at) or
    /// "seen_at_sender" (the sender's capture saw the path fill).
    pub source: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct PairedDirection {
    /// "client" (the client's data) or "server".
    pub from: &'static str,
    pub upstream_capture: usize,
    /// Packets of this direction seen at each capture, paired across them,
    /// and left unpaired at each.
    pub packets: [u64; 2],
    pub paired: u64,
    pub unpaired: [u64; 2],
    pub loss: LossCounts,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay: Option<Delay>,
    /// RTT of this direction's data as each capture saw it (data to ACK).
    pub rtt_ms: [Option<Spread>; 2],
    pub window_rewritten: u64,
}

/// One-way delay between the points.
#[derive(Debug, Clone, Serialize)]
pub struct Delay {
    /// The smallest one-way delay, bounded as the clocks are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_ms: Option<[f64; 2]>,
    /// Its growth over the smallest (a queue between the points): no offset needed.
    pub growth_p50_ms: f64,
    pub growth_p95_ms: f64,
    pub growth_max_ms: f64,
    /// When the largest growth was seen, s after capture 0's first paired packet.
    pub growth_max_at_s: f64,
    /// The rate the queue between the points drained at (payload bits/s;
    /// `compare::Drain`), when enough back-to-back queued copies were seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drain_rate_bps: Option<f64>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Spread {
    pub min: f64,
    pub p50: f64,
    pub p95: f64,
}

/// One direction through a terminating proxy.
#[derive(Debug, Clone, Serialize)]
pub struct ProxyDirection {
    pub from: &'static str,
    pub bytes: [i64; 2],
    /// First to last data byte at the upstream and the downstream capture, ms.
    pub upstream_ms: f64,
    pub downstream_ms: f64,
    /// Bytes the downstream capture had seen, at most, when the upstream
    /// one saw the last byte leave.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub downstream_bytes_when_upstream_done: Option<i64>,
    /// What the proxy released to the client per round trip, the rounds
    /// counted, and the client's largest window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub release_per_round_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rounds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round_trip_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_window_max: Option<u64>,
}

/// Something a box between the points did to the connection.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    pub kind: &'static str,
    pub detail: String,
    /// [capture, frame] of the packets that show it.
    pub frames: Vec<[u64; 2]>,
}

/// One line of the paired verdict.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub kind: &'static str,
    /// "between", "before:<capture>", "after:<capture>", "middlebox", "proxy"...
    pub location: String,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// The parameter the finding measures (bytes, ms, a share), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
}
