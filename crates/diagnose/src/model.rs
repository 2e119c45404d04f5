//! The diagnosis as data: what `diagnose --json` prints (schema
//! `tcpwhy.diagnose/2`, documented in docs/json.md) and what the terminal
//! text is rendered from.

use serde::Serialize;
use serde_json::{Map, Value};
use tcpwhy_core::{Cause, Confidence, Limit};

pub const SCHEMA: &str = "tcpwhy.diagnose/2";

#[derive(Debug, Clone, Serialize)]
pub struct Endpoint {
    pub addr: String,
    pub port: u16,
    /// The end's operating system, from its SYN or SYN-ACK (crate::system).
    pub system: crate::system::SystemGuess,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConnectionId {
    /// Connection number, as in `tcpwhy stats`.
    pub number: u64,
    pub a: Endpoint,
    pub b: Endpoint,
}

/// Evidence: packet (frame) numbers and time ranges (capture time, seconds).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Evidence {
    pub frames: Vec<u64>,
    pub time_ranges: Vec<(f64, f64)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// e.g. "window_plateau", "policer", "zero_window", "spurious_retransmissions".
    pub kind: &'static str,
    /// One sentence with the numbers.
    pub text: String,
    /// The numbers, by name (bytes, bit/s, ms, shares). A policer finding
    /// carries `rate_bps` and `burst_bytes`.
    #[serde(flatten)]
    pub numbers: Map<String, Value>,
    pub evidence: Evidence,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Fix {
    pub kind: &'static str,
    /// Where it applies: "receiver", "sender", "both", "path", "application".
    pub on: &'static str,
    pub text: String,
    /// Exact commands or settings, if any, in the terms of `system`.
    pub commands: Vec<String>,
    /// The system `commands` are written for: the end's, as its handshake
    /// shows it ("linux", "windows", "macos", "freebsd"); "linux" where the
    /// end's system is unknown, with `other_systems` beside it. Absent for
    /// a fix with no commands.
    pub system: &'static str,
    /// Where the end's system is unknown: the same fix on the others.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_systems: Vec<SystemCommands>,
    /// The buffer the fix sets (bytes), for the buffer fixes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buffer_bytes: Option<u64>,
    /// The rate the fix paces at (bit/s), for the pacing fixes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pace_bps: Option<f64>,
}

impl Fix {
    /// Each command with the tag a reader sees before it: the end it runs
    /// on, and the system when it is not Linux or stands beside others
    /// ("receiver, Windows").
    pub fn tagged_commands(&self) -> Vec<(String, &str)> {
        let tag = |system: &str, beside_others: bool| match crate::system::System::from_name(system) {
            Some(crate::system::System::Linux) if !beside_others => self.on.to_string(),
            Some(s) if s != crate::system::System::Unknown => format!("{}, {}", self.on, s.label()),
            _ => self.on.to_string(),
        };
        let own = tag(self.system, !self.other_systems.is_empty());
        let mut out: Vec<(String, &str)> = self.commands.iter().map(|c| (own.clone(), c.as_str())).collect();
        for o in &self.other_systems {
            let t = tag(o.system, true);
            out.extend(o.commands.iter().map(|c| (t.clone(), c.as_str())));
        }
        out
    }
}

/// One fix's commands on one system.
#[derive(Debug, Clone, Serialize)]
pub struct SystemCommands {
    pub system: &'static str,
    pub commands: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct WhatIf {
    /// The fix this prediction is for (a `Fix::kind`).
    pub fix: &'static str,
    pub current_bps: f64,
    /// Predicted throughput after the fix; null when no prediction can be made.
    pub predicted_bps: Option<f64>,
    /// The range the prediction is sure of. When the capture showed the
    /// path's capacity (`path_capacity` "seen", "given" or "paired"), both equal
    /// `predicted_bps`. When it showed only a lower bound, low is the
    /// prediction at that bound and high the fix's own ceiling (the new
    /// window or buffer over the RTT, or the next limit the capture shows).
    pub predicted_low_bps: Option<f64>,
    pub predicted_high_bps: Option<f64>,
    /// The rate once past slow start; `predicted_bps` is for this
    /// direction's transfer (its bytes), which pays slow start first.
    pub steady_bps: Option<f64>,
    /// Where the prediction is a range: the top of `steady_bps`'s range,
    /// the rate the fix itself allows (its window or buffer over the RTT,
    /// or the fastest bucket the losses allow); `predicted_high_bps` is
    /// that rate replayed over this transfer. `tcpwhy prove` runs the fix
    /// at it. Null where the capture showed the path's capacity.
    pub steady_high_bps: Option<f64>,
    /// What bounds the prediction: "path_rate" (the path's rate, seen or
    /// given), "window" (the fix's window or buffer over the RTT: no path
    /// rate known) or "policer_rate" (the token rate of the policer).
    pub bound: &'static str,
    /// The states whose phases the fix shortens (`crate::timeline`): the
    /// replay sends their bytes at the fix's rate and keeps every other
    /// phase as captured.
    pub addresses: Vec<Limit>,
    /// The direction's duration after the fix (the replay at
    /// `predicted_bps`), and the seconds it wins back; null without a
    /// prediction.
    pub duration_s: Option<f64>,
    pub saved_s: Option<f64>,
    pub assumptions: Vec<String>,
}

impl WhatIf {
    /// A fix's prediction as its cause computes it: the rate after it
    /// (`predicted`, null when none can be made), the rate inside the
    /// phases it shortens (`steady`), what caps that, and what it assumes.
    /// The range, the states it addresses and the replay's duration and
    /// saving are filled in after, by the replay over the timeline
    /// (`crate::fixes`).
    pub fn new(
        fix: &'static str,
        current_bps: f64,
        predicted: Option<f64>,
        steady: Option<f64>,
        bound: &'static str,
        assumptions: Vec<String>,
    ) -> WhatIf {
        WhatIf {
            fix,
            current_bps,
            predicted_bps: predicted,
            predicted_low_bps: None,
            predicted_high_bps: None,
            steady_bps: steady,
            steady_high_bps: None,
            bound,
            addresses: Vec::new(),
            duration_s: None,
            saved_s: None,
            assumptions,
        }
    }

    /// The prediction in words: "about X", or, where the capture showed
    /// only a lower bound of the path, "at least X; up to Y if the path is
    /// faster than this capture shows (pass --bandwidth if you know it)".
    /// None without a prediction.
    pub fn expected_text(&self) -> Option<String> {
        use tcpwhy_core::units::fmt_rate;
        let p = self.predicted_bps?;
        Some(match self.range() {
            Some((lo, hi)) if self.bound == "policer_rate" => format!(
                "at least {}; up to {} if the policer's rate is higher than the losses show",
                fmt_rate(lo),
                fmt_rate(hi)
            ),
            Some((lo, hi)) => format!(
                "at least {}; up to {} if the path is faster than this capture shows (pass --bandwidth if you know it)",
                fmt_rate(lo),
                fmt_rate(hi)
            ),
            None => format!("about {}", fmt_rate(p)),
        })
    }

    /// (low, high) when the prediction is a range (the capture showed only
    /// a lower bound of the path and the fix allows more); None when it is
    /// one number.
    pub fn range(&self) -> Option<(f64, f64)> {
        match (self.predicted_low_bps, self.predicted_high_bps) {
            (Some(lo), Some(hi)) if hi > lo => Some((lo, hi)),
            _ => None,
        }
    }

    /// The range of the rate the fix allows once past slow start
    /// (`steady_bps` to `steady_high_bps`): what a run at the fix's
    /// ceiling tests, even where this transfer's own range is too narrow
    /// to state (its window's growth costs round trips). None when the
    /// capture showed the path's capacity.
    pub fn steady_range(&self) -> Option<(f64, f64)> {
        match (self.steady_bps, self.steady_high_bps) {
            (Some(lo), Some(hi)) if hi > lo => Some((lo, hi)),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Rtt {
    /// Base (minimum) path RTT used for the intervals, ms.
    pub base_ms: Option<f64>,
    pub median_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub handshake_ms: Option<f64>,
    /// "data_ack" (sender-side samples), "handshake", "split" (both halves
    /// around the capture point) or "none".
    pub source: &'static str,
}

/// The sender's congestion control (crate::congestion reads it).
#[derive(Debug, Clone, Serialize)]
pub struct CongestionControl {
    /// "reno", "cubic", "bbr" or "unknown".
    pub name: &'static str,
    /// null when unknown.
    pub confidence: Option<Confidence>,
    /// What was read, in words and numbers.
    pub evidence: String,
    /// The window after each recovery read, as a share of the one before.
    pub decreases: Vec<f64>,
    /// Recoveries seen, and those that could not be read.
    pub recoveries: usize,
    /// Sender side: the share of new segments sent within
    /// `congestion::ACK_CLOCK_MAX_NS` of an ACK (null at the receiver).
    pub ack_clocked_share: Option<f64>,
    /// The window at the losses over the largest a loss-based sender holds
    /// at the loss rate seen (`congestion::loss_based_window`); null with fewer than
    /// `congestion::HIGH_MIN_RECOVERIES` recoveries read.
    pub above_loss_based: Option<f64>,
    /// Falls of the window to half or less with no loss, while the network
    /// held a bulk sender (`congestion::LOSSLESS_FALL_SHARE`): BBR's drain
    /// and ProbeRTT; Reno and CUBIC lower it only for a loss.
    pub lossless_falls: usize,
    /// Each recovery and each fall without a loss, in time order, for the
    /// bytes-in-flight plot (the first `congestion::MAX_EVENTS`).
    pub events: Vec<CcEvent>,
    /// The window's growth after each recovery read where it could be read
    /// (`congestion::GROWTH_MIN_ROUNDS` round trips or more with no loss,
    /// not behind a token bucket), against Reno's and CUBIC's (the first
    /// `congestion::MAX_EVENTS`).
    pub growth: Vec<CcGrowth>,
    /// The share of the flight's variance, round trip by round trip, at
    /// BBR's gain cycle of 8 round trips (`congestion::gain_cycle`); null
    /// where it could not be read (too short, not a bulk sender).
    pub gain_cycle_share: Option<f64>,
    /// The direction's losses are held to be a policer's with high
    /// confidence (`congestion::Bucket::Policed`): kept so that the parts
    /// of a direction are named together as each was.
    #[serde(skip)]
    pub policed: bool,
    /// Read from the receiver's side of the bottleneck.
    #[serde(skip)]
    pub at_receiver: bool,
}

/// The window's growth after one recovery, against Reno's and CUBIC's.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CcGrowth {
    /// Capture time (s) the stretch of growth starts (the recovery's end).
    pub t: f64,
    /// Round trips to the reading.
    pub rounds: usize,
    /// Seconds to the reading.
    pub seconds: f64,
    /// Segments the window grew by.
    pub segments: f64,
    /// Segments Reno grows by in those round trips.
    pub reno_segments: f64,
    /// Segments CUBIC grows by in those seconds (or its Reno-friendly
    /// estimate, if larger).
    pub cubic_segments: f64,
    /// "reno", "cubic", "either" (the two grow too alike, or too little, to
    /// tell) or "neither" (the growth fits neither).
    pub fits: &'static str,
}

/// What the sender's window did at one moment.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CcEvent {
    /// Capture time (s) of the first retransmission, or of the round trip
    /// the flight fell in.
    pub t: f64,
    /// "recovery" (a loss recovery) or "fall" (the flight fell to half its
    /// peak or less with no loss near).
    pub kind: &'static str,
    /// A recovery read: the window after over the window before (0.5
    /// Reno, 0.7 CUBIC, about 1 BBR); a fall: the flight over the peak
    /// before it. Null for a recovery that could not be read (a timeout,
    /// spurious, held by the receiver's window, too small a window).
    pub factor: Option<f64>,
}

impl CongestionControl {
    /// The algorithm, when named with medium confidence or more: what the
    /// fixes and prove's rebuild may act on.
    pub fn acted_on(&self) -> Option<&'static str> {
        (self.name != "unknown" && self.confidence.is_some_and(|c| c != Confidence::Low)).then_some(self.name)
    }

    pub(crate) fn unknown(evidence: String, recoveries: usize, ack_clocked_share: Option<f64>) -> Self {
        CongestionControl { name: "unknown", confidence: None, evidence, decreases: vec![], recoveries, ack_clocked_share, above_loss_based: None, lossless_falls: 0, events: Vec::new(), growth: Vec::new(), gain_cycle_share: None, policed: false, at_receiver: false }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct LimitRun {
    pub state: Limit,
    pub start: f64,
    pub end: f64,
    /// New payload bytes sent in the run.
    pub bytes: u64,
}

/// "Is it the network?": the direction's time split between what the
/// network and TCP's settings account for and what they do not (the
/// applications, and idle time between turns), and the most any network or
/// TCP fix could gain (Amdahl's law over that split).
#[derive(Debug, Clone, Serialize, Default)]
pub struct TimeSplit {
    /// The share of the time in the network's states
    /// (`crate::timeline::NETWORK_STATES`).
    pub network: f64,
    pub sender_application: f64,
    pub receiver_application: f64,
    pub idle: f64,
    /// How many times faster the direction could be at most with every
    /// network state gone: 1 / (1 - network); null when the network holds
    /// all the time (no bound from the time split).
    pub most_gain: Option<f64>,
    /// That bound as a rate: bytes over the time the network does not hold.
    pub most_bps: Option<f64>,
    /// The answer in words, as the text leads with it.
    pub text: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct DirectionDiagnosis {
    /// "a" or "b": the data sender.
    pub from: &'static str,
    pub sender: String,
    pub receiver: String,
    pub bytes: u64,
    pub duration_s: f64,
    pub goodput_bps: Option<f64>,
    /// Where the capture was taken on this direction's path, in `tcpwhy
    /// stats`' words (tcpwhy_flow::CapturePoint): "near_sender",
    /// "near_receiver", "middle" or "unknown".
    pub capture_point: &'static str,
    pub rtt: Rtt,
    /// Payload bytes of a full-sized segment.
    pub segment_bytes: u32,
    /// Bottleneck rate estimated from packet or ACK spacing inside trains.
    pub path_rate_bps: Option<f64>,
    /// What `path_rate_bps` rests on: "given" (--bandwidth), "seen" (the
    /// flow filled the path: a queue grew, losses came after a queue, a
    /// bucket ran empty), "paired" (measured at another capture point of
    /// the path, [`DirectionDiagnosis::with_capacity_from`]), "lower_bound"
    /// (nothing filled: the path is at least this fast), "dispersion" or
    /// "unknown" (no estimate).
    pub path_capacity: &'static str,
    pub interval_ms: f64,
    /// State -> share of time from the first to the last data segment.
    pub limits: std::collections::BTreeMap<Limit, f64>,
    /// The limit state over time (runs of equal state).
    pub timeline: Vec<LimitRun>,
    /// The time split: how much of it the network accounts for.
    pub time_split: TimeSplit,
    /// "bulk", "request_response" (bursts after the receiver's requests) or
    /// "sender_paced" (pauses that are the sender's own): crate::shape.
    pub traffic_shape: Shape,
    pub primary: Cause,
    /// The sender's congestion control (crate::congestion).
    pub congestion_control: CongestionControl,
    /// "high", "medium" or "low".
    pub confidence: tcpwhy_core::Confidence,
    /// The paragraph a person reads.
    pub summary: String,
    pub findings: Vec<Finding>,
    pub fixes: Vec<Fix>,
    pub what_if: Vec<WhatIf>,
    /// Evidence that would settle remaining doubt.
    pub to_confirm: Vec<String>,
    /// Some segments were not recorded (memory budget): covers the first part.
    pub truncated: bool,
    /// A direction of more than `PART_DATA_SEGMENTS` data segments is
    /// diagnosed in parts (crate::parts): each one's span, bytes and
    /// verdict. Absent for a direction diagnosed whole.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<PartSummary>,
    /// What the fixes and the what-if were computed from, kept so that a
    /// path capacity measured elsewhere can replay them
    /// ([`DirectionDiagnosis::with_capacity_from`]). Not part of the output.
    #[serde(skip)]
    pub what_if_inputs: Option<WhatIfInputs>,
}

/// What the fixes and the what-if were computed from, opaque here: the
/// model, a stage below the fixes, names none of their types (the fixes'
/// stage puts its inputs in and takes them out,
/// [`DirectionDiagnosis::with_capacity_from`]).
#[derive(Clone)]
pub struct WhatIfInputs(pub(crate) std::sync::Arc<dyn std::any::Any + Send + Sync>);

impl std::fmt::Debug for WhatIfInputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WhatIfInputs { .. }")
    }
}

impl DirectionDiagnosis {
    /// `capture_point` as the text says it ("capture near the sender"):
    /// "sender", "receiver", "middle" or "unknown".
    pub fn capture_near(&self) -> &'static str {
        self.capture_point.trim_start_matches("near_")
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ConnectionDiagnosis {
    pub id: ConnectionId,
    pub first_time: f64,
    pub duration_s: f64,
    pub handshake_rtt_ms: Option<f64>,
    /// What the capture did to the evidence (copies removed, one direction
    /// only, frames missing, options cut...) and what each weakens.
    pub capture_quality: Vec<QualityFinding>,
    /// Data directions worth a diagnosis (enough data to judge).
    pub directions: Vec<DirectionDiagnosis>,
}

/// A direction's traffic shape (crate::shape reads it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// Data most of the time.
    Bulk,
    /// Bursts, each after the receiver's request.
    RequestResponse,
    /// Bursts after pauses that are the sender's own (no request before them).
    SenderPaced,
}

/// One thing the capture did to the evidence.
#[derive(Debug, Clone, Serialize)]
pub struct QualityFinding {
    /// "duplicate_frames", "one_direction_data_only", "one_direction_acks_only",
    /// "frames_missing_from_capture", "options_cut_by_snaplen",
    /// "handshake_not_captured", "offload_super_segments",
    /// "capture_dropped_packets", "capture_cut".
    pub kind: &'static str,
    pub text: String,
    /// What it weakens: "nothing" (handled), "everything", "receiver_window",
    /// "window_scaling", "loss", "rtt", "path_rate", "transfer_end" (the
    /// capture was cut while the direction was still sending).
    pub weakens: Vec<&'static str>,
    #[serde(flatten)]
    pub numbers: Map<String, Value>,
}

/// One part of a direction, as listed in the JSON's `parts`.
#[derive(Debug, Clone, Serialize)]
pub struct PartSummary {
    /// Capture time of the part's first and last data segment (s).
    pub start: f64,
    pub end: f64,
    pub data_segments: u64,
    pub bytes: u64,
    pub goodput_bps: Option<f64>,
    pub primary: Cause,
    pub confidence: Confidence,
}

/// A closed part: its diagnosis (None when it held too little new data to
/// judge, such as a direction's pure ACKs) and its summary.
#[derive(Debug, Clone)]
pub struct Part {
    pub summary: PartSummary,
    pub diagnosis: Option<DirectionDiagnosis>,
}
