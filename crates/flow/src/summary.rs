//! Plain, serialisable summaries of connections: what `tcpwhy stats` prints
//! and what later stages read.

use crate::conn::{CloseState, Connection, Direction, IdleGap, SegmentCounts, WindowScale};
use crate::flags::FlagCounts;
use crate::stats::DurationSummary;
use serde::Serialize;

#[derive(Debug, Clone, Default, Serialize)]
pub struct EndpointSummary {
    pub addr: String,
    pub port: u16,
}

/// Where the capture was taken relative to one direction's data sender.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CapturePoint {
    /// The sender's side of the path holds less than a quarter of the RTT:
    /// ACK-based RTT samples are the full path RTT, and in-flight bytes are
    /// what the sender has outstanding.
    NearSender,
    /// The receiver's side holds less than a quarter of the RTT: data-to-ACK
    /// times are tiny, losses upstream show as holes.
    NearReceiver,
    Middle,
    /// No evidence for the sender's side of the RTT (no handshake, no timestamps).
    #[default]
    Unknown,
}

impl CapturePoint {
    /// The name the JSON of `stats` and `diagnose` gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            CapturePoint::NearSender => "near_sender",
            CapturePoint::NearReceiver => "near_receiver",
            CapturePoint::Middle => "middle",
            CapturePoint::Unknown => "unknown",
        }
    }
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct WindowSummary {
    pub min_bytes: Option<u64>,
    pub max_bytes: Option<u64>,
    /// Time-weighted mean.
    pub avg_bytes: Option<f64>,
    pub zero_window_s: f64,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct InFlightSummary {
    pub max_bytes: u64,
    pub avg_bytes: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct IdleSummary {
    /// Periods over 200 ms (Linux's minimum RTO) with nothing outstanding
    /// and nothing sent: after one, CUBIC/Reno may restart from the initial window.
    pub gaps: u64,
    pub total_s: f64,
    pub max_s: f64,
    /// Up to the first 64 gaps, as (start time, seconds).
    pub first: Vec<(f64, f64)>,
}

/// One direction: the data `from` sends to `to`, and the window `from` advertises.
/// `Default` is an empty direction (for tests that build one by hand).
#[derive(Debug, Clone, Default, Serialize)]
pub struct DirectionSummary {
    pub from: &'static str,
    pub to: &'static str,
    #[serde(flatten)]
    pub counts: SegmentCounts,
    /// retransmitted_bytes / bytes.
    pub retransmission_ratio: Option<f64>,
    /// Bytes the capture never saw (sequence holes still open at the end).
    pub missed_bytes: u64,
    /// Frames the capture held twice (a mirror port, `-i any` over a
    /// bridge, merged files), removed before any analysis; see
    /// `quality::DuplicateFilter`. Present when there were any.
    #[serde(skip_serializing_if = "is_zero")]
    pub duplicate_frames: u64,
    /// The first few copies as (copy, original) frame numbers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub duplicate_examples: Vec<(u64, u64)>,
    /// The largest gap between a copy and its original (ms): microseconds
    /// for a mirror port or `-i any`, the delay between two capture points
    /// for captures merged from several points.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicate_max_gap_ms: Option<f64>,
    pub avg_segment: Option<f64>,
    /// Time from first transmission to retransmission (tcptrace's "retr time").
    pub retransmit_delay: Option<DurationSummary>,
    /// MSS option in this side's SYN.
    pub mss: Option<u16>,
    /// Shift applied to this side's advertised window; null when unknown.
    pub window_scale: Option<u8>,
    /// "negotiated", "not_negotiated" (a SYN lacked the option) or "unknown" (no handshake captured).
    pub window_scaling: &'static str,
    /// Window-scale option in this side's SYN (null if its SYN was not seen).
    pub window_scale_offered: Option<bool>,
    pub sack_permitted: Option<bool>,
    pub timestamps: Option<bool>,
    /// This side's SYN or SYN-ACK as captured, for the system fingerprint
    /// (`tcpwhy_diagnose::system`).
    #[serde(skip)]
    pub syn: Option<crate::conn::SynOptions>,
    pub advertised_window: WindowSummary,
    pub in_flight: InFlightSummary,
    /// Data-to-ACK RTT samples (Karn's rule).
    pub rtt: Option<DurationSummary>,
    /// TSval-to-TSecr RTT samples.
    pub ts_rtt: Option<DurationSummary>,
    /// Time from the peer's pure ACK to this side's first data segment
    /// echoing its TSval: seen from the receiver, the round trip through the
    /// sender, queueing included.
    pub echo_delay: Option<DurationSummary>,
    /// Time from the capture point to the receiver and back, from the
    /// evidence that decided `capture_point`.
    pub rtt_to_receiver_ms: Option<f64>,
    /// Time from the capture point to the sender and back, same evidence.
    pub rtt_to_sender_ms: Option<f64>,
    pub capture_point: CapturePoint,
    /// What decided it: "handshake", "data_minimum", "data_median" or
    /// "all_legs_under_1ms" (a LAN: the capture point does not matter).
    pub capture_point_evidence: Option<&'static str>,
    pub first_data_time: Option<f64>,
    pub last_data_time: Option<f64>,
    /// bytes * 8 / (last_data_time - first_data_time).
    pub throughput_bps: Option<f64>,
    /// unique_bytes * 8 / the same span.
    pub goodput_bps: Option<f64>,
    /// Highest throughput over any 100 ms.
    pub peak_throughput_bps: Option<f64>,
    pub idle: IdleSummary,
    /// Throughput and goodput over time (only with `series` requested).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<SeriesSummary>,
    /// Frames of this side's retransmissions that a D-SACK showed to be spurious (first 64).
    pub dsack_spurious_frames: Vec<u64>,
    pub flags: FlagCounts,
}

/// Bytes per time bin; bins double in width as needed to stay at most 2,048.
#[derive(Debug, Clone, Serialize)]
pub struct BinnedBytes {
    pub start_time: f64,
    pub bin_s: f64,
    pub bytes: Vec<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SeriesSummary {
    /// All payload bytes, retransmissions included.
    pub throughput: Option<BinnedBytes>,
    /// Bytes seen for the first time.
    pub goodput: Option<BinnedBytes>,
}

fn binned(r: &crate::stats::RateSeries) -> BinnedBytes {
    BinnedBytes {
        start_time: secs(r.start_ns),
        bin_s: secs(r.bin_ns),
        bytes: r.bytes.clone(),
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ConnectionSummary {
    pub id: u64,
    pub a: EndpointSummary,
    pub b: EndpointSummary,
    pub first_frame: u64,
    pub last_frame: u64,
    pub first_time: f64,
    pub last_time: f64,
    pub duration_s: f64,
    /// No SYN from `a` was captured: the connection was open before the capture began.
    pub started_mid_capture: bool,
    /// SYN to the ACK of the SYN-ACK; none when a leg of the handshake was
    /// sent twice before its answer (Karn's rule: `handshake_retransmitted`).
    pub handshake_rtt_ms: Option<f64>,
    /// The handshake completed, but a SYN or SYN-ACK was sent twice before
    /// its answer: the handshake times no RTT.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub handshake_retransmitted: bool,
    /// "open", "fin_one", "fin_both" or "reset".
    pub close: &'static str,
    /// Frames more than 1 ms earlier than the connection's latest (the
    /// capture clock stepped back), and the largest step; present when any.
    #[serde(skip_serializing_if = "is_zero")]
    pub clock_steps_back: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_clock_step_back_s: Option<f64>,
    /// Longest time between two packets of the connection.
    pub idle_max_s: f64,
    /// Retired while still open to keep the table within its connection
    /// limit (`--max-connections`): a later segment of the same tuple starts
    /// a new connection, as one open before the capture began.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub evicted: bool,
    pub directions: [DirectionSummary; 2],
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn secs(ns: i64) -> f64 {
    ns as f64 / 1e9
}

fn ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

impl ConnectionSummary {
    /// The handshake completed in the capture: the connection's start is
    /// in it, whether or not the handshake timed an RTT.
    pub fn handshake_seen(&self) -> bool {
        self.handshake_rtt_ms.is_some() || self.handshake_retransmitted
    }

    /// `series`: include throughput and goodput over time.
    pub fn from_connection(c: &Connection, series: bool) -> ConnectionSummary {
        let endpoint = |i: usize| EndpointSummary {
            addr: c.endpoints[i].0.to_string(),
            port: c.endpoints[i].1,
        };
        ConnectionSummary {
            id: c.id,
            a: endpoint(0),
            b: endpoint(1),
            first_frame: c.first_frame,
            last_frame: c.last_frame,
            first_time: secs(c.first_ns),
            last_time: secs(c.last_ns),
            duration_s: secs(c.last_ns - c.first_ns),
            started_mid_capture: c.dirs[0].syn.is_none(),
            handshake_rtt_ms: c.handshake_rtt_ns().map(ms),
            handshake_retransmitted: c.handshake_seen() && c.handshake_leg_resent.contains(&true),
            close: match c.close {
                CloseState::Open => "open",
                CloseState::FinOne => "fin_one",
                CloseState::FinBoth => "fin_both",
                CloseState::Reset => "reset",
            },
            idle_max_s: secs(c.max_idle_ns),
            evicted: false,
            clock_steps_back: c.clock_steps_back,
            max_clock_step_back_s: (c.clock_steps_back > 0).then(|| secs(c.max_clock_step_back_ns)),
            directions: [
                direction_summary(c, 0, series),
                direction_summary(c, 1, series),
            ],
        }
    }
}

/// The RTT of direction `d` split at the capture point, from three kinds of
/// evidence, each giving (towards the receiver, towards the sender):
/// the handshake (the receiver answers one leg, the sender the other, both
/// straight from the kernel), the smallest data-phase samples (data to ACK;
/// the sender's echo of the receiver's TSval in new data), and their medians.
struct RttLegs {
    handshake: (Option<i64>, Option<i64>),
    minimum: (Option<i64>, Option<i64>),
    median: (Option<i64>, Option<i64>),
}

fn rtt_legs(c: &Connection, d: usize) -> RttLegs {
    let dir = &c.dirs[d];
    // a leg sent twice before its answer times nothing (Karn's rule)
    let syn_to_synack = match (c.syn_ns, c.synack_ns) {
        (Some(s), Some(sa)) if sa >= s && !c.handshake_leg_resent[0] => Some(sa - s),
        _ => None,
    };
    let synack_to_ack = match (c.synack_ns, c.handshake_ack_ns) {
        (Some(sa), Some(a)) if a >= sa && !c.handshake_leg_resent[1] => Some(a - sa),
        _ => None,
    };
    // The client (a, d = 0) answers the SYN-ACK; the server answers the SYN.
    let handshake = if d == 0 {
        (syn_to_synack, synack_to_ack)
    } else {
        (synack_to_ack, syn_to_synack)
    };
    let data_to_ack = if dir.stats.rtt.count() > 0 {
        &dir.stats.rtt
    } else {
        &dir.stats.ts_rtt
    };
    let echo = &dir.stats.echo_delay;
    RttLegs {
        handshake,
        minimum: (data_to_ack.min_ns(), echo.min_ns()),
        median: (data_to_ack.quantile_ns(0.5), echo.quantile_ns(0.5)),
    }
}

/// The two legs must differ by this much before one side is called near:
/// on a LAN both are fractions of a millisecond and their ratio is noise.
const CAPTURE_POINT_MIN_DIFFERENCE_NS: i64 = 1_000_000;

/// Decides from the first kind of evidence that separates the legs.
/// Returns the point, the evidence used, and that evidence's two legs.
fn capture_point(legs: &RttLegs) -> (CapturePoint, Option<&'static str>, Option<(i64, i64)>) {
    let mut first = None;
    for (evidence, (r, s)) in [
        ("handshake", legs.handshake),
        ("data_minimum", legs.minimum),
        ("data_median", legs.median),
    ] {
        let (Some(r), Some(s)) = (r, s) else { continue };
        first.get_or_insert((r, s));
        if (r - s).abs() < CAPTURE_POINT_MIN_DIFFERENCE_NS {
            continue;
        }
        let sender_share = s as f64 / (r + s) as f64;
        let point = if sender_share < 0.25 {
            CapturePoint::NearSender
        } else if sender_share > 0.75 {
            CapturePoint::NearReceiver
        } else {
            CapturePoint::Middle
        };
        return (point, Some(evidence), Some((r, s)));
    }
    match first {
        Some(legs) => (CapturePoint::Middle, Some("all_legs_under_1ms"), Some(legs)),
        None => (CapturePoint::Unknown, None, None),
    }
}

fn direction_summary(c: &Connection, d: usize, series: bool) -> DirectionSummary {
    let dir: &Direction = &c.dirs[d];
    let peer: &Direction = &c.dirs[1 - d];
    let s = &dir.stats;
    let legs = rtt_legs(c, d);
    let (point, evidence, deciding) = capture_point(&legs);
    let span = match (s.first_data_ns, s.last_data_ns) {
        (Some(f), Some(l)) if l > f => Some(secs(l - f)),
        _ => None,
    };
    let both_syn = dir.syn.is_some() && peer.syn.is_some();
    DirectionSummary {
        from: if d == 0 { "a" } else { "b" },
        to: if d == 0 { "b" } else { "a" },
        counts: s.counts,
        retransmission_ratio: (s.counts.bytes > 0)
            .then(|| s.counts.retransmitted_bytes as f64 / s.counts.bytes as f64),
        missed_bytes: dir.missed_bytes().max(0) as u64,
        duplicate_frames: c.copies[d].copies,
        duplicate_examples: c.copies[d].examples.clone(),
        duplicate_max_gap_ms: (c.copies[d].copies > 0).then(|| ms(c.copies[d].max_gap_ns)),
        avg_segment: (s.counts.data_packets > 0)
            .then(|| s.counts.bytes as f64 / s.counts.data_packets as f64),
        retransmit_delay: s.retransmit_delay.summary(),
        mss: dir.syn.and_then(|x| x.mss),
        window_scale: dir.window_scale.shift(),
        window_scaling: match dir.window_scale {
            WindowScale::Unknown => "unknown",
            WindowScale::NotNegotiated => "not_negotiated",
            WindowScale::Shift(_) if both_syn => "negotiated",
            // Only one SYN seen (e.g. the SYN-ACK); Wireshark keeps the shift.
            WindowScale::Shift(_) => "negotiated",
        },
        window_scale_offered: dir.syn.map(|x| x.window_scale.is_some()),
        sack_permitted: dir.syn.map(|x| x.sack_permitted),
        timestamps: dir.syn.map(|x| x.timestamps),
        syn: dir.syn,
        advertised_window: WindowSummary {
            min_bytes: s.window_min,
            max_bytes: s.window_max,
            avg_bytes: dir.window_avg(),
            zero_window_s: secs(s.zero_window_ns),
        },
        in_flight: InFlightSummary {
            max_bytes: s.in_flight_max,
            avg_bytes: (s.in_flight_samples > 0)
                .then(|| s.in_flight_sum.unsigned() as f64 / s.in_flight_samples as f64),
        },
        rtt: s.rtt.summary(),
        ts_rtt: s.ts_rtt.summary(),
        echo_delay: s.echo_delay.summary(),
        rtt_to_receiver_ms: deciding.map(|(r, _)| ms(r)),
        rtt_to_sender_ms: deciding.map(|(_, s)| ms(s)),
        capture_point: point,
        capture_point_evidence: evidence,
        first_data_time: s.first_data_ns.map(secs),
        last_data_time: s.last_data_ns.map(secs),
        throughput_bps: span.map(|t| s.counts.bytes as f64 * 8.0 / t),
        goodput_bps: span.map(|t| s.counts.unique_bytes as f64 * 8.0 / t),
        peak_throughput_bps: s
            .throughput
            .as_ref()
            .and_then(|r| r.peak_bits_per_sec(100_000_000)),
        idle: IdleSummary {
            gaps: s.idle_gap_count,
            total_s: secs(s.idle_total_ns),
            max_s: secs(s.idle_max_ns),
            first: s
                .idle_gaps
                .iter()
                .map(|g: &IdleGap| (secs(g.start_ns), secs(g.duration_ns)))
                .collect(),
        },
        series: series.then(|| SeriesSummary {
            throughput: s.throughput.as_ref().map(binned),
            goodput: s.goodput.as_ref().map(binned),
        }),
        dsack_spurious_frames: s.dsack_spurious_frames.clone(),
        flags: s.flags,
    }
}
