//! One TCP connection: both directions, the handshake, and the analysis of
//! every segment.
//!
//! Two views of each direction are kept side by side:
//! - Wireshark's `tcp_analyze_sequence_number` state (raw 32-bit numbers,
//!   last ACK/window seen, duplicate-ACK count), so that per-segment flags
//!   mean exactly what `tcp.analysis.*` means (rules and their order follow
//!   Wireshark 4.0, see docs/flags.md);
//! - a sender model in unwrapped byte offsets: highest sequence sent,
//!   cumulative ACK, SACK scoreboard (RFC 2018), holes the capture never saw,
//!   segments awaiting an ACK for RTT sampling (Karn's rule, RFC 6298 section
//!   3) and TSval send times for timestamp RTT (RFC 7323 section 4).

use crate::flags::{FlagCounts, Flags};
use crate::quality::{renumbered, DuplicateFilter};
use crate::ranges::RangeSet;
use crate::seq::{seq_gt, seq_le, seq_lt, Unwrapper};
use crate::stats::{DurationStats, RateSeries, Wide};
use std::collections::VecDeque;
use tcpwhy_wire::{Addr, TcpFlags, TcpSegment};

/// Linux's minimum RTO (TCP_RTO_MIN, 200 ms): a sender idle for longer may
/// restart from the initial window (RFC 5681 section 4.1, tcp_cwnd_restart).
pub const IDLE_GAP_NS: i64 = 200_000_000;
/// Wireshark's out-of-order threshold when no handshake RTT is known.
const DEFAULT_OOO_NS: i64 = 3_000_000;
/// tcpwhy's line between a hole filled by reordering and one filled by a
/// retransmission, as a share of the handshake's RTT (Wireshark's iRTT):
/// the fill of a lost segment comes one round trip after the hole opened
/// at the earliest (the receiver's duplicate ACKs or SACKs reach the
/// sender, its retransmission comes back), wherever the capture point
/// is, so it ages about one RTT less the jitter; a reordered segment
/// comes sooner, and one later than a quarter RTT the sender retransmits
/// itself (RACK's reordering window, RFC 8985 section 6.2). Wireshark
/// draws the line at the iRTT, where the losses' fills fall: at a
/// receiver 30 ms past a random-loss hop, 24 of the 29 retransmissions
/// read out-of-order (bench/independent loss-reno).
pub const REORDER_MAX_RTT_SHARE: f64 = 0.5;
/// Wireshark's window for a retransmission to count as "fast" after a dup ACK.
const FAST_RETRANS_NS: i64 = 20_000_000;
/// Bounds on per-direction queues, so memory stays bounded per connection.
const MAX_UNACKED: usize = 1 << 16;
const MAX_TSVALS: usize = 1 << 14;
const MAX_RETRANS_RECORDS: usize = 4096;
const MAX_IDLE_GAPS_KEPT: usize = 64;
const MAX_EVIDENCE_FRAMES: usize = 64;
const MAX_HOLE_TIMES: usize = 256;

/// Window-scale knowledge for one side, as Wireshark keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WindowScale {
    /// The handshake was not captured.
    #[default]
    Unknown,
    /// Both SYNs seen and at least one lacked the option: windows are not scaled.
    NotNegotiated,
    /// This side's shift count.
    Shift(u8),
}

impl WindowScale {
    /// Shift to apply to this side's advertised windows, if known.
    pub fn shift(self) -> Option<u8> {
        match self {
            WindowScale::Unknown => None,
            WindowScale::NotNegotiated => Some(0),
            WindowScale::Shift(s) => Some(s),
        }
    }
}

/// What a side's SYN (or SYN-ACK) said.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SynOptions {
    pub frame: u64,
    pub time_ns: i64,
    pub isn: u32,
    pub mss: Option<u16>,
    pub window_scale: Option<u8>,
    pub sack_permitted: bool,
    pub timestamps: bool,
    pub window: u16,
    /// The IP TTL (hop limit) as captured, the IPv4 DF bit, and the
    /// options' order: with the window and MSS, the stack's signature
    /// (crate `tcpwhy_diagnose::system`).
    pub ttl: u8,
    pub dont_fragment: bool,
    pub layout: tcpwhy_wire::OptionLayout,
    /// A SYN-ACK (the side answered a SYN), not a SYN.
    pub syn_ack: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct SentSegment {
    start: i64,
    end: i64,
    time_ns: i64,
    retransmitted: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct RetransRecord {
    start: i64,
    end: i64,
    frame: u64,
    spurious: bool,
}

/// D-SACK lookups of a second stretch that went past the retransmissions
/// it recorded itself: (block, the record found as it was), in order.
#[derive(Debug, Clone, Default)]
struct RetransSplit {
    recorded_since: usize,
    lookups: Vec<((i64, i64), Option<RetransRecord>)>,
}

/// Holes the capture never filled that opened before a second stretch's
/// warm-up are not in its state (it jumped over the frames around them);
/// they lie below its *horizon*, the sequence offset of its first segment
/// after the jump. From the split on, every question the second stretch
/// asks of the holes below the horizon is recorded with its answer, to be
/// asked again of the first stretch's holes at the join (see
/// [`Connection::answers_as`]).
#[derive(Debug, Clone, Default)]
struct HoleAudit {
    horizon: i64,
    ops: Vec<HoleOp>,
    /// Hole times recorded since the split.
    pushed: usize,
    /// The hole times reached their cap since the split, or more than
    /// [`HOLE_AUDIT_MAX_OPS`] questions were asked.
    spoiled: bool,
}

/// A question asked of the holes below the horizon, and its answer.
#[derive(Debug, Clone, Copy, PartialEq)]
enum HoleOp {
    /// Bytes of [start, end) removed from the holes (data seen).
    Remove(i64, i64, i64),
    /// Bytes of [start, end) in holes.
    Overlap(i64, i64, i64),
    /// The time of the newest hole entry holding an offset.
    Age(i64, Option<i64>),
}

/// Questions recorded below the horizon at most (each a retransmission of
/// data sent before the warm-up); past this the split is not joined.
const HOLE_AUDIT_MAX_OPS: usize = 4096;

/// A period when the sender had nothing outstanding and sent nothing.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct IdleGap {
    pub start_ns: i64,
    pub duration_ns: i64,
}

/// Everything tracked for the data one side sends (and the ACKs and window
/// it advertises for the other side's data).
#[derive(Debug, Clone, Default)]
pub struct Direction {
    pub syn: Option<SynOptions>,
    pub window_scale: WindowScale,
    /// The snaplen cut this side's SYN options: whether it offered window
    /// scaling is unknown.
    pub syn_options_cut: bool,
    pub(crate) unwrap: Unwrapper,

    // Wireshark's per-flow analysis state (raw sequence numbers).
    ws_next_seq: Option<u32>,
    ws_next_seq_time: i64,
    ws_next_seq_frame: u64,
    ws_max_seq_to_be_acked: Option<u32>,
    ws_last_ack: Option<u32>,
    ws_last_ack_time: i64,
    ws_window: Option<u16>,
    ws_dup_ack_num: i32,
    ws_last_segment_flags: Flags,
    ws_is_first_ack: bool,

    // Sender model in unwrapped offsets.
    high_seq: Option<i64>,
    snd_una: Option<i64>,
    sacked: RangeSet,
    holes: RangeSet,
    /// When each hole appeared (start, end, time), newest last.
    hole_times: VecDeque<(i64, i64, i64)>,
    unacked: VecDeque<SentSegment>,
    tsvals: VecDeque<(u32, i64)>,
    retrans: VecDeque<RetransRecord>,
    /// The second stretch of a split in time: what its D-SACK lookups
    /// found among the retransmissions before the split (see
    /// [`Connection::answers_as`]).
    retrans_split: Option<Box<RetransSplit>>,
    /// Retransmissions recorded before a jump (frames numbered below this)
    /// are not looked at (see [`Connection::resume_after_jump`]).
    trust_from: u64,
    /// The next jump in this side's sequence follows skipped records, not
    /// bytes the capture missed (see `Connection::restart_position`).
    skip_hole: bool,
    /// After a jump: the offset of this side's first segment ([`HoleAudit`]),
    /// or whether it is still to come.
    horizon: Option<i64>,
    horizon_pending: bool,
    hole_audit: Option<Box<HoleAudit>>,
    last_activity_ns: Option<i64>,
    /// Last ACK from the peer carrying a TSval, for upstream RTT (time until
    /// this side's next segment echoes it).
    pending_echo: Option<(u32, i64)>,
    window_last: Option<(i64, u64)>,
    /// Sum of window (bytes) x time (ns): an integer, so that two halves
    /// of a capture add up exactly.
    window_weighted: Wide,
    window_time_ns: i64,

    pub stats: DirectionStats,
}

/// Segment and byte counts of one direction. The same struct is flattened
/// into the JSON summary (docs/json.md describes each field).
#[derive(Debug, Clone, Copy, Default, serde::Serialize, PartialEq, Eq)]
pub struct SegmentCounts {
    pub packets: u64,
    pub data_packets: u64,
    pub pure_acks: u64,
    pub syn: u64,
    pub fin: u64,
    pub rst: u64,
    pub pushed_packets: u64,
    /// Payload bytes on the wire, retransmissions included.
    pub bytes: u64,
    /// Payload bytes seen for the first time.
    pub unique_bytes: u64,
    pub retransmitted_packets: u64,
    pub retransmitted_bytes: u64,
    pub max_segment: u32,
    pub min_segment: Option<u32>,
    /// Data segments larger than the MSS: TSO/GSO (capture at the sender) or GRO (at the receiver).
    pub segments_above_mss: u64,
    /// Data segments whose payload the snaplen cut, and the bytes cut.
    pub truncated_payload_packets: u64,
    pub truncated_bytes: u64,
    /// Segments whose TCP options the snaplen cut (window scale, SACK
    /// blocks or timestamps lost). Present when there were any.
    #[serde(skip_serializing_if = "crate::conn::is_zero")]
    pub options_cut_packets: u64,
    /// Data sent before the first ACK of data returned (tcptrace's "initial window").
    pub initial_window_bytes: u64,
    pub initial_window_packets: u64,
    /// Duplicate ACKs this side sent that were the third in a row.
    pub triple_dup_acks: u64,
    /// SACK and D-SACK (RFC 2883) blocks this side sent.
    pub sack_blocks_sent: u64,
    pub dsack_blocks_sent: u64,
}

/// Counters and distributions of one direction.
#[derive(Debug, Clone, Default)]
pub struct DirectionStats {
    pub counts: SegmentCounts,
    /// The first ACK of data has come back (ends the initial window).
    initial_window_closed: bool,
    /// This side has sent data (state, not a count: kept by
    /// [`Connection::restart_counts`]).
    data_sent: bool,
    /// Time from a segment's first transmission to its retransmission.
    pub retransmit_delay: DurationStats,
    /// Frames of retransmissions a later D-SACK showed to be spurious (first 64).
    pub dsack_spurious_frames: Vec<u64>,
    pub flags: FlagCounts,
    /// RTT measured from this side's data to the peer's ACK (Karn's rule).
    pub rtt: DurationStats,
    /// RTT from this side's TSval to the peer's echo of it.
    pub ts_rtt: DurationStats,
    /// Time from the peer's ACK (TSval) to this side's next segment echoing
    /// it: the part of the RTT on this side of the capture point.
    pub echo_delay: DurationStats,
    pub window_min: Option<u64>,
    pub window_max: Option<u64>,
    pub zero_window_ns: i64,
    pub in_flight_max: u64,
    pub in_flight_sum: Wide,
    pub in_flight_samples: u64,
    pub first_data_ns: Option<i64>,
    pub last_data_ns: Option<i64>,
    pub throughput: Option<RateSeries>,
    pub goodput: Option<RateSeries>,
    pub idle_gaps: Vec<IdleGap>,
    pub idle_gap_count: u64,
    pub idle_total_ns: i64,
    pub idle_max_ns: i64,
}

impl Direction {
    /// Time-weighted mean of the window this side advertised.
    pub fn window_avg(&self) -> Option<f64> {
        (self.window_time_ns > 0).then(|| self.window_weighted.signed() as f64 / self.window_time_ns as f64)
    }

    /// Bytes sent but not yet cumulatively acknowledged, less those SACKed.
    fn in_flight(&self) -> Option<i64> {
        let (high, una) = (self.high_seq?, self.snd_una?);
        Some((high - una - self.sacked.overlap(una, high)).max(0))
    }

    /// Marks the retransmission a D-SACK block reports as spurious (RFC 2883).
    /// The SACK scoreboard after the last ACK from the peer: byte ranges
    /// above the cumulative ACK the peer reported as received (relative
    /// offsets, as `SegmentEvent::seq`). For plots.
    pub fn sacked_ranges(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.sacked.iter().copied()
    }

    fn mark_dsack(&mut self, start: i64, end: i64) {
        let trust = self.trust_from;
        let found = self.retrans.iter().rposition(|r| r.start < end && start < r.end && r.frame >= trust);
        if let Some(split) = self.retrans_split.as_mut() {
            let own = self.retrans.len() - split.recorded_since.min(self.retrans.len());
            if found.is_none_or(|i| i < own) {
                split.lookups.push(((start, end), found.map(|i| self.retrans[i])));
            }
        }
        if let Some(r) = found.map(|i| &mut self.retrans[i]) {
            if !r.spurious {
                r.spurious = true;
                self.stats.flags.spurious_retransmission += 1;
                self.stats.flags.spurious_by_dsack += 1;
                if self.stats.dsack_spurious_frames.len() < MAX_EVIDENCE_FRAMES {
                    self.stats.dsack_spurious_frames.push(r.frame);
                }
            }
        }
    }

    /// How long ago the hole containing `offset` appeared, if it is in one.
    fn hole_age(&mut self, offset: i64, now: i64) -> Option<i64> {
        let t = hole_time(&self.hole_times, offset);
        if let Some(a) = self.hole_audit.as_deref_mut().filter(|a| offset < a.horizon) {
            a.record(HoleOp::Age(offset, t));
        }
        t.map(|t| now - t)
    }

    /// Removes [start, end) from the holes (bytes seen); the bytes removed.
    fn fill_holes(&mut self, start: i64, end: i64) -> i64 {
        if let Some(a) = self.hole_audit.as_deref_mut().filter(|a| start < a.horizon) {
            let below = end.min(a.horizon);
            a.record(HoleOp::Remove(start, below, self.holes.overlap(start, below)));
        }
        self.holes.remove(start, end)
    }

    /// Bytes the capture never saw (holes still open).
    pub fn missed_bytes(&self) -> i64 {
        self.holes.overlap(i64::MIN / 2, i64::MAX / 2)
    }

    /// Bytes of [start, end) below the highest sequence that the capture saw
    /// before (i.e. not in a hole).
    fn seen_before(&mut self, start: i64, end: i64) -> i64 {
        let Some(high) = self.high_seq else { return 0 };
        let end = end.min(high);
        if end <= start {
            return 0;
        }
        if let Some(a) = self.hole_audit.as_deref_mut().filter(|a| start < a.horizon) {
            let below = end.min(a.horizon);
            a.record(HoleOp::Overlap(start, below, self.holes.overlap(start, below)));
        }
        (end - start) - self.holes.overlap(start, end)
    }
}

impl Direction {
    /// Whether the holes at the split (`holes`, `times`, the second
    /// stretch's then) are the first stretch's (`whole`'s): the same, or,
    /// when this side has a horizon, the same at and above it, none of the
    /// first stretch's across it, and every question asked below it since
    /// the split answered alike by the first stretch's ([`HoleAudit`]).
    fn holes_answer_as(&self, horizon: Option<i64>, holes: &RangeSet, times: &VecDeque<(i64, i64, i64)>, whole: &Direction) -> bool {
        if *holes == whole.holes && *times == whole.hole_times {
            return true;
        }
        let (Some(h), Some(a)) = (horizon, self.hole_audit.as_deref()) else { return false };
        let above = |r: &RangeSet| r.iter().filter(|&&(_, e)| e > h).copied().collect::<Vec<_>>();
        let times_above = |t: &VecDeque<(i64, i64, i64)>| t.iter().filter(|&&(s, _, _)| s >= h).copied().collect::<Vec<_>>();
        a.horizon == h
            && !a.spoiled
            && whole.holes.iter().all(|&(s, e)| e <= h || s >= h)
            && holes.iter().all(|&(s, e)| e <= h || s >= h)
            && whole.hole_times.iter().chain(times).all(|&(s, e, _)| e <= h || s >= h)
            && above(holes) == above(&whole.holes)
            && times_above(times) == times_above(&whole.hole_times)
            && whole.hole_times.len() + a.pushed <= MAX_HOLE_TIMES
            && a.replay(&whole.holes, &whole.hole_times).is_some()
    }

    /// Joins the holes (see [`Direction::holes_answer_as`]): the first
    /// stretch's below the horizon, as the audit's removals left them, and
    /// this stretch's above it.
    fn join_holes(&mut self, whole: &Direction) {
        let Some(a) = self.hole_audit.take() else { return };
        if a.spoiled {
            // Then the holes were the same at the split (`holes_answer_as`),
            // and this stretch's are the whole's.
            return;
        }
        let Some((below, times_below)) = a.replay(&whole.holes, &whole.hole_times) else { return };
        let mut holes = below;
        for &(s, e) in self.holes.iter().filter(|&&(_, e)| e > a.horizon) {
            holes.insert(s, e);
        }
        self.holes = holes;
        let mut times = times_below;
        times.extend(self.hole_times.iter().copied().filter(|&(s, _, _)| s >= a.horizon));
        self.hole_times = times;
    }
}

/// The time of the newest hole entry holding `offset`.
fn hole_time(times: &VecDeque<(i64, i64, i64)>, offset: i64) -> Option<i64> {
    times.iter().rev().find(|&&(s, e, _)| s <= offset && offset < e).map(|&(_, _, t)| t)
}

impl HoleAudit {
    fn record(&mut self, op: HoleOp) {
        if self.ops.len() < HOLE_AUDIT_MAX_OPS {
            self.ops.push(op);
        } else {
            self.spoiled = true;
        }
    }

    /// The first stretch's holes and hole times at the split with this
    /// audit's questions asked again in order (removals applied), below
    /// the horizon; None when an answer differs.
    fn replay(&self, holes: &RangeSet, times: &VecDeque<(i64, i64, i64)>) -> Option<(RangeSet, VecDeque<(i64, i64, i64)>)> {
        let mut holes = holes.clone();
        holes.trim_above(self.horizon);
        let mut times: VecDeque<_> = times.iter().copied().filter(|&(s, _, _)| s < self.horizon).collect();
        for op in &self.ops {
            match *op {
                HoleOp::Remove(start, end, n) => {
                    if holes.remove(start, end) != n {
                        return None;
                    }
                    if n > 0 {
                        times.retain(|&(s, e, _)| holes.overlap(s, e) > 0);
                    }
                }
                HoleOp::Overlap(start, end, n) => {
                    if holes.overlap(start, end) != n {
                        return None;
                    }
                }
                HoleOp::Age(offset, t) => {
                    if hole_time(&times, offset) != t {
                        return None;
                    }
                }
            }
        }
        Some((holes, times))
    }
}

/// Per-segment result handed to a [`crate::SegmentSink`].
#[derive(Debug, Clone, Copy)]
pub struct SegmentEvent {
    pub frame: u64,
    pub time_ns: i64,
    pub connection: u64,
    /// 0: from endpoint a, 1: from endpoint b.
    pub direction: usize,
    /// Relative sequence number (offset from this side's ISN or first seen sequence).
    pub seq: i64,
    pub payload_len: u32,
    /// Relative acknowledgement number in the peer's sequence space.
    pub ack: Option<i64>,
    pub tcp_flags: u16,
    pub flags: Flags,
    pub dup_ack_num: u32,
    /// The advertised window in bytes (scaled when the scale is known).
    pub window_bytes: u64,
    /// Bytes in flight after this data segment (SACK-aware), data segments only.
    pub in_flight: Option<u64>,
    /// An RTT sample produced by this ACK, for the peer's data.
    pub rtt_ns: Option<i64>,
    /// TCP timestamps option (TSval, TSecr), if present.
    pub timestamp: Option<(u32, u32)>,
}

/// How a connection ended, as far as the capture shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseState {
    Open,
    FinOne,
    FinBoth,
    Reset,
}

impl CloseState {
    /// The state after a segment from side `d` (`fin_seen` includes it).
    pub(crate) fn after(self, rst: bool, fin_seen: [bool; 2], d: usize) -> CloseState {
        if rst {
            CloseState::Reset
        } else if fin_seen[0] && fin_seen[1] {
            CloseState::FinBoth
        } else if fin_seen[d] && self == CloseState::Open {
            CloseState::FinOne
        } else {
            self
        }
    }
}

/// A tracked connection. Endpoint `a` is the side that sent the first SYN,
/// or, for a connection already open when the capture started, the sender
/// of the first packet seen.
#[derive(Debug, Clone)]
pub struct Connection {
    pub id: u64,
    pub endpoints: [(Addr, u16); 2],
    pub first_ns: i64,
    pub last_ns: i64,
    pub first_frame: u64,
    pub last_frame: u64,
    pub dirs: [Direction; 2],
    pub syn_ns: Option<i64>,
    pub synack_ns: Option<i64>,
    pub handshake_ack_ns: Option<i64>,
    /// A leg of the handshake the capture saw sent twice before it was
    /// answered: [SYN to SYN-ACK, SYN-ACK to its ACK]. Its answer may be to
    /// either copy, so the leg times nothing (Karn's rule, RFC 6298
    /// section 3; the SYN-ACK's TSecr does not tell, Linux echoes the first
    /// SYN's TSval in every SYN-ACK of the request).
    pub handshake_leg_resent: [bool; 2],
    pub close: CloseState,
    pub fin_seen: [bool; 2],
    pub max_idle_ns: i64,
    /// Wireshark's iRTT, the out-of-order threshold.
    first_rtt_ns: Option<i64>,
    /// Time of the most recent pure SYN (Wireshark's ts_mru_syn).
    last_syn_ns: Option<i64>,
    /// Frames of each direction the capture held twice.
    pub copies: [DuplicateFilter; 2],
    /// Frames that arrived more than `CLOCK_STEP_BACK_NS` before the
    /// latest frame of the connection, and the largest such step.
    pub clock_steps_back: u64,
    pub max_clock_step_back_ns: i64,
    /// Records may have been skipped before the next segment (see
    /// [`Connection::resume_after_jump`]).
    jumped: bool,
}

impl Connection {
    pub fn new(id: u64, a: (Addr, u16), b: (Addr, u16), time_ns: i64, frame: u64) -> Self {
        Connection {
            id,
            endpoints: [a, b],
            first_ns: time_ns,
            last_ns: time_ns,
            first_frame: frame,
            last_frame: frame,
            dirs: [Direction::default(), Direction::default()],
            syn_ns: None,
            synack_ns: None,
            handshake_ack_ns: None,
            handshake_leg_resent: [false; 2],
            close: CloseState::Open,
            fin_seen: [false; 2],
            max_idle_ns: 0,
            first_rtt_ns: None,
            last_syn_ns: None,
            copies: Default::default(),
            clock_steps_back: 0,
            max_clock_step_back_ns: 0,
            jumped: false,
        }
    }

    /// The handshake RTT (SYN to the ACK of the SYN-ACK): the full path RTT
    /// wherever the capture was taken; none when a leg was sent twice
    /// before its answer ([`Connection::handshake_leg_resent`]): a SYN lost
    /// after the capture point would count the SYN's retransmission
    /// timeout (1 s) as path.
    pub fn handshake_rtt_ns(&self) -> Option<i64> {
        if self.handshake_leg_resent.contains(&true) {
            return None;
        }
        Some(self.handshake_ack_ns? - self.syn_ns?)
    }

    /// The handshake completed in the capture (SYN, SYN-ACK, its ACK), timed
    /// or not.
    pub fn handshake_seen(&self) -> bool {
        self.syn_ns.is_some() && self.handshake_ack_ns.is_some()
    }

    /// Analyses one segment sent by side `d`: the counters, the handshake,
    /// the segment as an ACK of the peer's data, Wireshark's analysis
    /// flags, retransmission or reordering, Wireshark's record of the
    /// segment, the sender's model and the advertised window, in that
    /// order (the sections below, each inlined: this is the hottest code
    /// of every command).
    pub fn process(
        &mut self,
        seg: &TcpSegment<'_>,
        frame: u64,
        now: i64,
        d: usize,
    ) -> SegmentEvent {
        if self.jumped {
            self.jumped = false;
            self.restart_position();
        }
        let gap = now - self.last_ns;
        if gap > self.max_idle_ns {
            self.max_idle_ns = gap;
        }
        self.last_ns = now;
        self.last_frame = frame;
        let flags = seg.flags;
        let seglen = seg.payload_len;
        let (fwd, rev) = split(&mut self.dirs, d);

        count(&mut fwd.stats, seg);
        if flags.fin() {
            self.fin_seen[d] = true;
        }
        if flags.rst() || self.fin_seen != [false, false] {
            self.close = self.close.after(flags.rst(), self.fin_seen, d);
        }

        // --- handshake ----------------------------------------------------
        if flags.syn() {
            if fwd.syn.is_none() {
                fwd.syn = Some(SynOptions {
                    frame,
                    time_ns: now,
                    isn: seg.seq,
                    mss: seg.options.mss,
                    window_scale: seg.options.window_scale,
                    sack_permitted: seg.options.sack_permitted,
                    timestamps: seg.options.timestamp.is_some(),
                    window: seg.window,
                    ttl: seg.ttl,
                    dont_fragment: seg.dont_fragment,
                    layout: seg.options.layout,
                    syn_ack: flags.ack(),
                });
                fwd.unwrap.set_base(seg.seq);
            }
            if flags.ack() {
                self.handshake_leg_resent[1] |= self.synack_ns.is_some() && self.handshake_ack_ns.is_none();
                self.synack_ns.get_or_insert(now);
            } else {
                self.handshake_leg_resent[0] |= self.syn_ns.is_some() && self.synack_ns.is_none();
                self.syn_ns.get_or_insert(now);
                self.last_syn_ns = Some(now);
            }
        } else if flags.ack()
            && self.synack_ns.is_some()
            && self.handshake_ack_ns.is_none()
            && fwd.syn.is_some()
            && self.syn_ns.is_some()
            && rev.syn.is_some_and(|s| seg.ack == s.isn.wrapping_add(1))
        {
            self.handshake_ack_ns = Some(now);
        }
        if !fwd.unwrap.is_set() {
            fwd.unwrap.set_base(seg.seq);
        }
        // Wireshark's iRTT: first pure ACK after a SYN.
        if flags.0 & (0x02 | 0x10) == 0x10 && self.first_rtt_ns.is_none() {
            if let Some(syn) = self.last_syn_ns {
                self.first_rtt_ns = Some(now - syn);
            }
        }

        // --- this segment as an ACK of the peer's data --------------------
        let mut rtt_sample = None;
        let mut ack_rel = None;
        if flags.ack() {
            if !rev.unwrap.is_set() {
                rev.unwrap.set_base(seg.ack);
            }
            let ack = rev.unwrap.offset(seg.ack);
            ack_rel = Some(ack);
            let (sample, dsack_blocks) = on_ack(rev, seg.options.sacks(), ack, seg, now);
            rtt_sample = sample;
            fwd.stats.counts.sack_blocks_sent += seg.options.sack_count as u64;
            fwd.stats.counts.dsack_blocks_sent += dsack_blocks;
        }

        let (mut ta, dup_ack_num) = analysis_flags(fwd, rev, seg);
        let seq_rel = fwd.unwrap.advance(seg.seq);
        if fwd.horizon_pending {
            fwd.horizon_pending = false;
            fwd.horizon = Some(seq_rel);
        }
        let syn_fin = syn_fin(flags);
        let end_rel = seq_rel + seglen as i64 + syn_fin;
        let is_data = seglen > 0 || flags.syn() || flags.fin();
        if is_data {
            classify_sequence(fwd, rev, seg, &mut ta, seq_rel, end_rel, now, self.first_rtt_ns);
        }
        record_position(fwd, rev, seg, ta, frame, now);

        // --- sender model: new data, holes, RTT bookkeeping ---------------
        if ta.has(Flags::LOST_SEGMENT) {
            note_missed(fwd, seq_rel, now);
        }
        let in_flight = if is_data { sender_model(fwd, rev, seg, ta, seq_rel, end_rel, frame, now) } else { None };
        // Upstream delay: this segment echoes the TSval of the peer's last ACK.
        if let (Some((tsval_wanted, ack_time)), Some((_, tsecr))) =
            (fwd.pending_echo, seg.options.timestamp)
        {
            if tsecr == tsval_wanted && seglen > 0 {
                fwd.stats.echo_delay.add(now - ack_time);
                fwd.pending_echo = None;
            }
        }
        if flags.ack() && seglen == 0 {
            if let Some((tsval, _)) = seg.options.timestamp {
                rev.pending_echo = Some((tsval, now));
            }
        }

        let window_bytes = advertised_window(fwd, seg, now);
        fwd.stats.flags.add(ta);


        SegmentEvent {
            frame,
            time_ns: now,
            connection: self.id,
            direction: d,
            seq: seq_rel,
            payload_len: seglen,
            ack: ack_rel,
            tcp_flags: flags.0,
            flags: ta,
            dup_ack_num,
            window_bytes,
            in_flight,
            rtt_ns: rtt_sample,
            timestamp: seg.options.timestamp,
        }
    }
}

// --- the sections of Connection::process ------------------------------------
// Inlined into it: as separate functions they read as the steps they are;
// `#[inline(always)]` keeps the one body the compiler optimised before.

/// The sequence numbers a segment's SYN and FIN take (one each, RFC 9293
/// section 3.4), beside its payload's.
#[inline(always)]
fn syn_fin(flags: TcpFlags) -> i64 {
    i64::from(flags.syn()) + i64::from(flags.fin())
}

/// The direction's packet, byte and flag counters for one segment.
#[inline(always)]
fn count(st: &mut DirectionStats, seg: &TcpSegment<'_>) {
    let flags = seg.flags;
    let seglen = seg.payload_len;
    st.counts.packets += 1;
    if seg.options.truncated {
        st.counts.options_cut_packets += 1;
    }
    if seglen > 0 {
        st.counts.data_packets += 1;
        st.data_sent = true;
        st.counts.bytes += seglen as u64;
        st.counts.max_segment = st.counts.max_segment.max(seglen);
        st.counts.min_segment = Some(st.counts.min_segment.map_or(seglen, |m| m.min(seglen)));
        if seg.captured < seglen {
            st.counts.truncated_payload_packets += 1;
            st.counts.truncated_bytes += (seglen - seg.captured) as u64;
        }
        if flags.psh() {
            st.counts.pushed_packets += 1;
        }
        if !st.initial_window_closed {
            st.counts.initial_window_bytes += seglen as u64;
            st.counts.initial_window_packets += 1;
        }
    } else if !flags.syn() && !flags.fin() && !flags.rst() {
        st.counts.pure_acks += 1;
    }
    if flags.syn() {
        st.counts.syn += 1;
    }
    if flags.fin() {
        st.counts.fin += 1;
    }
    if flags.rst() {
        st.counts.rst += 1;
    }
}

/// Wireshark's analysis flags of a segment (the order and conditions of
/// its 4.0 `tcp_analyze_sequence_number`), and its duplicate-ACK number.
#[inline(always)]
fn analysis_flags(fwd: &mut Direction, rev: &mut Direction, seg: &TcpSegment<'_>) -> (Flags, u32) {
    let flags = seg.flags;
    let seglen = seg.payload_len;
    let mut ta = Flags::default();
    let mut dup_ack_num = 0u32;
    let no_sfr = flags.0 & 0x007 == 0; // none of SYN/FIN/RST
    let window = seg.window;
    let seq = seg.seq;
    let ack = seg.ack;
    'fwd: {
        if seglen == 1 && Some(seq) == fwd.ws_next_seq && rev.ws_window == Some(0) {
            ta.set(Flags::ZERO_WINDOW_PROBE);
            break 'fwd;
        }
        if window == 0 && no_sfr {
            ta.set(Flags::ZERO_WINDOW);
        }
        if let Some(next) = fwd.ws_next_seq {
            if seq_gt(seq, next) && !flags.rst() {
                ta.set(Flags::LOST_SEGMENT);
            }
            if seglen <= 1 && seq == next.wrapping_sub(1) && no_sfr {
                ta.set(Flags::KEEP_ALIVE);
            }
        }
        let same_pos = Some(seq) == fwd.ws_next_seq && Some(ack) == fwd.ws_last_ack;
        if seglen == 0 && window != 0 && Some(window) != fwd.ws_window && same_pos && no_sfr {
            ta.set(Flags::WINDOW_UPDATE);
        }
        if seglen > 0 && no_sfr && rev.window_scale != WindowScale::Unknown {
            if let (Some(rack), Some(rwin)) = (rev.ws_last_ack, rev.ws_window) {
                let shift = if rev.ws_is_first_ack {
                    0
                } else {
                    rev.window_scale.shift().unwrap_or(0)
                };
                if seq.wrapping_add(seglen) == rack.wrapping_add((rwin as u32) << shift) {
                    ta.set(Flags::WINDOW_FULL);
                }
            }
        }
        let repeat = seglen == 0 && Some(window) == fwd.ws_window && same_pos && no_sfr;
        if repeat && window != 0 && rev.ws_last_segment_flags.has(Flags::KEEP_ALIVE) {
            ta.set(Flags::KEEP_ALIVE_ACK);
            break 'fwd;
        }
        if repeat && window == 0 && rev.ws_last_segment_flags.has(Flags::ZERO_WINDOW_PROBE) {
            ta.set(Flags::ZERO_WINDOW_PROBE_ACK);
            break 'fwd;
        }
        if repeat && window != 0 {
            fwd.ws_dup_ack_num = if fwd.ws_dup_ack_num == -1 {
                1
            } else {
                fwd.ws_dup_ack_num + 1
            };
            ta.set(Flags::DUPLICATE_ACK);
            dup_ack_num = fwd.ws_dup_ack_num as u32;
            if dup_ack_num == 3 {
                fwd.stats.counts.triple_dup_acks += 1;
            }
        }
    }
    if Some(ack) != fwd.ws_last_ack {
        fwd.ws_dup_ack_num = 0;
    }
    if flags.ack() {
        if let Some(max_to_ack) = rev.ws_max_seq_to_be_acked {
            if seq_gt(ack, max_to_ack) {
                match rev.ws_next_seq {
                    Some(next) if seq_lt(max_to_ack, next) => {
                        rev.ws_max_seq_to_be_acked = Some(next);
                        ta.set(Flags::ACK_UNSEEN_SEGMENT);
                    }
                    _ => {
                        if rev.ws_dup_ack_num == 0 {
                            ta.set(Flags::ACK_UNSEEN_SEGMENT);
                        }
                        rev.ws_dup_ack_num = -1;
                    }
                }
            }
        }
    }
    (ta, dup_ack_num)
}

/// A segment that carries data (or SYN or FIN) below the next expected
/// sequence: a retransmission (spurious, fast or not) or reordered, by
/// Wireshark's rules and then tcpwhy's (see the comments).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn classify_sequence(fwd: &mut Direction, rev: &Direction, seg: &TcpSegment<'_>, ta: &mut Flags, seq_rel: i64, end_rel: i64, now: i64, first_rtt_ns: Option<i64>) {
    let (seq, seglen, flags) = (seg.seq, seg.payload_len, seg.flags);
    let syn_fin = syn_fin(flags);
    'retrans: {
        let mut not_advanced = fwd.ws_next_seq.is_some_and(|n| seq_lt(seq, n));
        if ta.has(Flags::KEEP_ALIVE) {
            break 'retrans;
        }
        if seglen > 1 && fwd.ws_next_seq.map(|n| n.wrapping_sub(1)) == Some(seq) {
            not_advanced = false;
        }
        if seglen > 0 {
            if let Some(rack) = rev.ws_last_ack {
                if rack != 0 && seq_le(seq.wrapping_add(seglen), rack) {
                    // tcpwhy's rule: bytes never seen, timestamped
                    // before the peer's frame whose ACK covers them.
                    // No capture point sees an ACK before the data
                    // it acknowledges: the capture wrote the two out
                    // of order (queues of a multi-queue NIC, `-i
                    // any`, merged interfaces), and its clock says
                    // which came first. Not a retransmission.
                    if rev.ws_last_ack_time > now && fwd.seen_before(seq_rel, end_rel) == 0 {
                        ta.set(Flags::OUT_OF_ORDER);
                        ta.set(Flags::RECLASSIFIED);
                        break 'retrans;
                    }
                    ta.set(Flags::SPURIOUS_RETRANSMISSION);
                    ta.set(Flags::RETRANSMISSION);
                    break 'retrans;
                }
            }
        }
        if not_advanced
            && rev.ws_dup_ack_num >= 2
            && rev.ws_last_ack == Some(seq)
            && now - rev.ws_last_ack_time < FAST_RETRANS_NS
        {
            ta.set(Flags::FAST_RETRANSMISSION);
            ta.set(Flags::RETRANSMISSION);
            break 'retrans;
        }
        let ooo_threshold = first_rtt_ns
            .filter(|&t| t != 0)
            .unwrap_or(DEFAULT_OOO_NS);
        // Wireshark computes the elapsed time unsigned: a capture whose
        // timestamps step backwards never yields out-of-order there.
        let since_next_seq = (now - fwd.ws_next_seq_time) as u64;
        let ws_ooo = not_advanced
            && since_next_seq < ooo_threshold as u64
            && fwd.ws_next_seq
                != Some(seq.wrapping_add(seglen).wrapping_add(syn_fin as u32));
        if !not_advanced {
            break 'retrans;
        }
        // tcpwhy's rule: bytes seen before are retransmitted; bytes never
        // seen that fill a hole younger than half the RTT were reordered.
        let seen = fwd.seen_before(seq_rel, end_rel);
        let hole_age = fwd.hole_age(seq_rel, now);
        let reorder_max = first_rtt_ns.filter(|&t| t > 0).map_or(DEFAULT_OOO_NS, |t| (t as f64 * REORDER_MAX_RTT_SHARE) as i64);
        let reordered = seen == 0 && hole_age.is_some_and(|age| age < reorder_max);
        if reordered {
            ta.set(Flags::OUT_OF_ORDER);
        } else {
            ta.set(Flags::RETRANSMISSION);
        }
        if reordered != ws_ooo {
            ta.set(Flags::RECLASSIFIED);
        }
    }
}

/// Records the segment as Wireshark does (its step 13): the next expected
/// sequence, the highest to be acknowledged, the window and ACK last seen;
/// a SYN settles the window scale.
#[inline(always)]
fn record_position(fwd: &mut Direction, rev: &mut Direction, seg: &TcpSegment<'_>, ta: Flags, frame: u64, now: i64) {
    let (flags, seq, ack, window, seglen) = (seg.flags, seg.seq, seg.ack, seg.window, seg.payload_len);
    let syn_fin = syn_fin(flags);
    let ws_next = seq.wrapping_add(seglen).wrapping_add(syn_fin as u32);
    if fwd.ws_next_seq.is_none_or(|n| seq_gt(ws_next, n)) && !ta.has(Flags::ZERO_WINDOW_PROBE) {
        fwd.ws_next_seq = Some(ws_next);
        fwd.ws_next_seq_time = now;
        fwd.ws_next_seq_frame = frame;
    }
    if (fwd.ws_max_seq_to_be_acked.is_none() || fwd.ws_max_seq_to_be_acked == Some(seq))
        && !ta.has(Flags::ZERO_WINDOW_PROBE)
    {
        fwd.ws_max_seq_to_be_acked = fwd.ws_next_seq;
    }
    fwd.ws_window = Some(window);
    fwd.ws_last_ack = Some(ack);
    fwd.ws_last_ack_time = now;
    fwd.ws_last_segment_flags = ta;
    if flags.syn() {
        fwd.ws_is_first_ack = true;
    } else if flags.ack() {
        fwd.ws_is_first_ack = false;
    }
    if flags.syn() {
        resolve_window_scale(fwd, rev, seg);
    }
}

/// A segment (data or not) starting beyond the highest sequence seen
/// proves the bytes in between were sent: the capture missed them.
#[inline(always)]
fn note_missed(fwd: &mut Direction, seq_rel: i64, now: i64) {
    if let Some(h) = fwd.high_seq {
        if seq_rel > h {
            if fwd.skip_hole {
                fwd.skip_hole = false;
            } else {
                fwd.holes.insert(h, seq_rel);
                if let Some(a) = fwd.hole_audit.as_deref_mut() {
                    a.pushed += 1;
                    a.spoiled |= fwd.hole_times.len() == MAX_HOLE_TIMES;
                }
                if fwd.hole_times.len() == MAX_HOLE_TIMES {
                    fwd.hole_times.pop_front();
                }
                fwd.hole_times.push_back((h, seq_rel, now));
            }
            fwd.high_seq = Some(seq_rel);
        }
    }
}

/// The sender's model for a segment with data (or SYN or FIN): the new
/// bytes and the holes they fill, idle gaps, retransmissions (Karn's rule
/// for the RTT samples), the timestamps to match, the rates; returns the
/// bytes in flight after it.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn sender_model(fwd: &mut Direction, rev: &Direction, seg: &TcpSegment<'_>, ta: Flags, seq_rel: i64, end_rel: i64, frame: u64, now: i64) -> Option<u64> {
    let (flags, seglen) = (seg.flags, seg.payload_len);
    let syn_fin = syn_fin(flags);
    let mut in_flight = None;
    let retransmitted = ta.has(Flags::RETRANSMISSION);
    let high_before = fwd.high_seq;
    let filled = fwd.fill_holes(seq_rel, end_rel);
    if filled > 0 {
        // Only a hole's own entry can answer `hole_age` (entries are
        // disjoint, below the highest sequence, and asked only for
        // bytes in a hole): a filled hole's entry goes.
        let holes = &fwd.holes;
        fwd.hole_times.retain(|&(s, e, _)| holes.overlap(s, e) > 0);
    }
    let beyond = end_rel - high_before.map_or(seq_rel, |h| h.max(seq_rel));
    let new_bytes = (filled + beyond.max(0) - syn_fin.min(beyond.max(0))).max(0);
    fwd.stats.counts.unique_bytes += new_bytes.min(seglen as i64) as u64;
    if high_before.is_none_or(|h| end_rel > h) {
        fwd.high_seq = Some(end_rel);
    }
    // Idle: nothing outstanding since the last activity.
    if seglen > 0 {
        let idle_from = fwd.last_activity_ns;
        let nothing_out = match (high_before, fwd.snd_una) {
            (Some(h), Some(u)) => u >= h,
            _ => false,
        };
        if let Some(from) = idle_from {
            let gap = now - from;
            if nothing_out && gap > IDLE_GAP_NS {
                let s = &mut fwd.stats;
                s.idle_gap_count += 1;
                s.idle_total_ns += gap;
                s.idle_max_ns = s.idle_max_ns.max(gap);
                if s.idle_gaps.len() < MAX_IDLE_GAPS_KEPT {
                    s.idle_gaps.push(IdleGap {
                        start_ns: from,
                        duration_ns: gap,
                    });
                }
            }
        }
        fwd.last_activity_ns = Some(now);
    }
    if retransmitted {
        fwd.stats.counts.retransmitted_packets += 1;
        fwd.stats.counts.retransmitted_bytes += seglen as u64;
        // Karn: no RTT sample from anything this retransmission covers.
        let i = fwd.unacked.partition_point(|s| s.end <= seq_rel);
        if let Some(original) = fwd.unacked.get(i) {
            if !original.retransmitted {
                fwd.stats.retransmit_delay.add(now - original.time_ns);
            }
        }
        for s in fwd.unacked.iter_mut().skip(i) {
            s.retransmitted = true;
            if s.end >= end_rel {
                break;
            }
        }
        if fwd.retrans.len() == MAX_RETRANS_RECORDS {
            fwd.retrans.pop_front();
        }
        if let Some(split) = fwd.retrans_split.as_mut() {
            split.recorded_since += 1;
        }
        fwd.retrans.push_back(RetransRecord {
            start: seq_rel,
            end: end_rel,
            frame,
            spurious: ta.has(Flags::SPURIOUS_RETRANSMISSION),
        });
    } else if high_before.is_none_or(|h| end_rel > h) {
        if fwd.unacked.len() == MAX_UNACKED {
            fwd.unacked.pop_front();
        }
        fwd.unacked.push_back(SentSegment {
            start: seq_rel,
            end: end_rel,
            time_ns: now,
            retransmitted: false,
        });
    }
    if let Some((tsval, _)) = seg.options.timestamp {
        if fwd.tsvals.back().is_none_or(|&(v, _)| seq_gt(tsval, v)) {
            if fwd.tsvals.len() == MAX_TSVALS {
                fwd.tsvals.pop_front();
            }
            fwd.tsvals.push_back((tsval, now));
        }
    }
    if seglen > 0 {
        let st = &mut fwd.stats;
        st.first_data_ns.get_or_insert(now);
        st.last_data_ns = Some(now);
        st.throughput
            .get_or_insert_with(|| RateSeries::new(now))
            .add(now, seglen as u64);
        if new_bytes > 0 {
            st.goodput
                .get_or_insert_with(|| RateSeries::new(now))
                .add(now, new_bytes.min(seglen as i64) as u64);
        }
        if let Some(mss) = fwd.syn.and_then(|s| s.mss).or(rev.syn.and_then(|s| s.mss)) {
            if seglen > mss as u32 {
                st.counts.segments_above_mss += 1;
            }
        }
        if let Some(f) = fwd.in_flight() {
            let f = f as u64;
            let st = &mut fwd.stats;
            st.in_flight_max = st.in_flight_max.max(f);
            st.in_flight_sum.add(f as i128);
            st.in_flight_samples += 1;
            in_flight = Some(f);
        }
    }
    in_flight
}

/// The window this segment advertises for the peer's data (scaled; a
/// SYN's never is), added to the direction's time-weighted average, zero-
/// window time and range.
#[inline(always)]
fn advertised_window(fwd: &mut Direction, seg: &TcpSegment<'_>, now: i64) -> u64 {
    let (flags, window) = (seg.flags, seg.window);
    let shift = if flags.syn() {
        Some(0)
    } else {
        fwd.window_scale.shift()
    };
    let window_bytes = (window as u64) << shift.unwrap_or(0);
    if let Some((t, w)) = fwd.window_last {
        let dt = now - t;
        fwd.window_weighted.add(w as i128 * dt as i128);
        fwd.window_time_ns += dt;
        if w == 0 {
            fwd.stats.zero_window_ns += dt;
        }
    }
    if !flags.rst() {
        fwd.window_last = Some((now, window_bytes));
        let st = &mut fwd.stats;
        st.window_min = Some(st.window_min.map_or(window_bytes, |m| m.min(window_bytes)));
        st.window_max = Some(st.window_max.map_or(window_bytes, |m| m.max(window_bytes)));
    }
    window_bytes
}


// --- a split in time -------------------------------------------------------
// A capture cut in two at a record boundary can be analysed as two stretches:
// the second starts from the state the first ends in, with everything
// counted emptied (`restart_counts`), and is then joined to the first
// (`join`). Each field of the model is either state, which decides how later
// segments are read and is carried over as it is, or a count, which only
// the summaries read: sums, minima, maxima, firsts, lasts and bounded lists,
// each joined here so that the whole equals one pass (tested by
// `split_in_time_joins_to_one_pass` on the shared captures).

impl SegmentCounts {
    fn join(&mut self, earlier: &SegmentCounts) {
        let SegmentCounts {
            packets,
            data_packets,
            pure_acks,
            syn,
            fin,
            rst,
            pushed_packets,
            bytes,
            unique_bytes,
            retransmitted_packets,
            retransmitted_bytes,
            max_segment,
            min_segment,
            segments_above_mss,
            truncated_payload_packets,
            truncated_bytes,
            options_cut_packets,
            initial_window_bytes,
            initial_window_packets,
            triple_dup_acks,
            sack_blocks_sent,
            dsack_blocks_sent,
        } = *earlier;
        self.packets += packets;
        self.data_packets += data_packets;
        self.pure_acks += pure_acks;
        self.syn += syn;
        self.fin += fin;
        self.rst += rst;
        self.pushed_packets += pushed_packets;
        self.bytes += bytes;
        self.unique_bytes += unique_bytes;
        self.retransmitted_packets += retransmitted_packets;
        self.retransmitted_bytes += retransmitted_bytes;
        self.max_segment = self.max_segment.max(max_segment);
        self.min_segment = min_option(self.min_segment, min_segment);
        self.segments_above_mss += segments_above_mss;
        self.truncated_payload_packets += truncated_payload_packets;
        self.truncated_bytes += truncated_bytes;
        self.options_cut_packets += options_cut_packets;
        self.initial_window_bytes += initial_window_bytes;
        self.initial_window_packets += initial_window_packets;
        self.triple_dup_acks += triple_dup_acks;
        self.sack_blocks_sent += sack_blocks_sent;
        self.dsack_blocks_sent += dsack_blocks_sent;
    }
}

fn min_option<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn max_option<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// `earlier` then `later`, at most `max` long: what one pass that stops
/// adding at `max` keeps.
fn join_capped<T: Clone>(earlier: &[T], later: &mut Vec<T>, max: usize) {
    let mut all: Vec<T> = earlier.iter().take(max).cloned().collect();
    let room = max - all.len();
    all.extend(later.drain(..).take(room));
    *later = all;
}

fn join_series(later: &mut Option<RateSeries>, earlier: &Option<RateSeries>) {
    if let Some(e) = earlier {
        let mut whole = e.clone();
        if let Some(l) = later.as_ref() {
            whole.merge(l);
        }
        *later = Some(whole);
    }
}

impl DirectionStats {
    /// The counts emptied; the state kept.
    fn emptied(&self) -> DirectionStats {
        DirectionStats {
            initial_window_closed: self.initial_window_closed,
            data_sent: self.data_sent,
            throughput: self.throughput.as_ref().map(RateSeries::emptied),
            goodput: self.goodput.as_ref().map(RateSeries::emptied),
            ..DirectionStats::default()
        }
    }

    /// `self` continued from `earlier` emptied; makes it the whole.
    fn join(&mut self, earlier: &DirectionStats) {
        self.counts.join(&earlier.counts);
        self.retransmit_delay.merge(&earlier.retransmit_delay);
        join_capped(&earlier.dsack_spurious_frames, &mut self.dsack_spurious_frames, MAX_EVIDENCE_FRAMES);
        self.flags.merge(&earlier.flags);
        self.rtt.merge(&earlier.rtt);
        self.ts_rtt.merge(&earlier.ts_rtt);
        self.echo_delay.merge(&earlier.echo_delay);
        self.window_min = min_option(self.window_min, earlier.window_min);
        self.window_max = max_option(self.window_max, earlier.window_max);
        self.zero_window_ns += earlier.zero_window_ns;
        self.in_flight_max = self.in_flight_max.max(earlier.in_flight_max);
        self.in_flight_sum.merge(earlier.in_flight_sum);
        self.in_flight_samples += earlier.in_flight_samples;
        self.first_data_ns = earlier.first_data_ns.or(self.first_data_ns);
        self.last_data_ns = self.last_data_ns.or(earlier.last_data_ns);
        join_series(&mut self.throughput, &earlier.throughput);
        join_series(&mut self.goodput, &earlier.goodput);
        join_capped(&earlier.idle_gaps, &mut self.idle_gaps, MAX_IDLE_GAPS_KEPT);
        self.idle_gap_count += earlier.idle_gap_count;
        self.idle_total_ns += earlier.idle_total_ns;
        self.idle_max_ns = self.idle_max_ns.max(earlier.idle_max_ns);
    }
}

impl Connection {
    /// Empties everything the connection has counted and keeps its state:
    /// the start of the second stretch of a split in time.
    pub fn restart_counts(&mut self) {
        self.max_idle_ns = 0;
        for dir in &mut self.dirs {
            dir.window_weighted = Wide::default();
            dir.window_time_ns = 0;
            dir.stats = dir.stats.emptied();
            dir.retrans_split = Some(Box::default());
            dir.hole_audit = dir.horizon.map(|horizon| Box::new(HoleAudit { horizon, ..HoleAudit::default() }));
            dir.skip_hole = false;
        }
        self.jumped = false;
    }

    /// Records after the last segment analysed may have been skipped (the
    /// second stretch of a split in time jumps ahead of the split to warm
    /// up): the next jump in each side's sequence is not taken for bytes
    /// the capture missed. Everything else is brought up to date by the
    /// segments that follow, or was not touched by the records skipped;
    /// [`Connection::answers_as`] checks which.
    pub fn resume_after_jump(&mut self, first_frame: u64) {
        self.jumped = true;
        for dir in &mut self.dirs {
            dir.trust_from = first_frame;
        }
    }

    /// The first segment after a jump (a connection without segments
    /// between the jump and the split keeps its state whole). Two things
    /// would read the jump as the network's doing: Wireshark's "ACKed
    /// unseen segment" test against the highest sequence to be
    /// acknowledged, which is forgotten until the side sends again, and the
    /// sender model's hole for the bytes in between, which the side's next
    /// jump does not open. All other state is overwritten by the segments
    /// that follow; what is not is told by [`Connection::answers_as`].
    fn restart_position(&mut self) {
        for dir in &mut self.dirs {
            dir.ws_max_seq_to_be_acked = None;
            dir.skip_hole = true;
            dir.horizon = None;
            dir.horizon_pending = true;
        }
    }

    /// Whether `self`, a second stretch started at the split from
    /// `at_split` (its state then, built from a jump and a warm-up), read
    /// the segments since the split as one pass would have from `whole`
    /// (the first stretch's state at the split): the same state, field by
    /// field, except the history a warm-up cannot rebuild (the
    /// retransmissions recorded for D-SACK), where `at_split`'s must be the
    /// newest of `whole`'s and every lookup that went past them must find
    /// the same record in `whole`'s.
    pub fn answers_as(&self, at_split: &Connection, whole: &Connection) -> bool {
        let Connection {
            id,
            endpoints,
            first_ns,
            last_ns,
            first_frame,
            last_frame,
            dirs,
            syn_ns,
            synack_ns,
            handshake_ack_ns,
            handshake_leg_resent,
            close,
            fin_seen,
            max_idle_ns: _,
            first_rtt_ns,
            last_syn_ns,
            copies: _,
            clock_steps_back: _,
            max_clock_step_back_ns: _,
            jumped: _,
        } = at_split;
        let same = *id == whole.id
            && *endpoints == whole.endpoints
            && *first_ns == whole.first_ns
            && *last_ns == whole.last_ns
            && *first_frame == whole.first_frame
            && *last_frame == whole.last_frame
            && *syn_ns == whole.syn_ns
            && *synack_ns == whole.synack_ns
            && *handshake_ack_ns == whole.handshake_ack_ns
            && *handshake_leg_resent == whole.handshake_leg_resent
            && *close == whole.close
            && *fin_seen == whole.fin_seen
            && *first_rtt_ns == whole.first_rtt_ns
            && *last_syn_ns == whole.last_syn_ns;
        same && (0..2).all(|d| self.dirs[d].answers_as(&dirs[d], &whole.dirs[d]))
    }
}

impl Direction {
    fn answers_as(&self, at_split: &Direction, whole: &Direction) -> bool {
        let Direction {
            syn,
            window_scale,
            syn_options_cut,
            unwrap,
            ws_next_seq,
            ws_next_seq_time,
            ws_next_seq_frame,
            ws_max_seq_to_be_acked,
            ws_last_ack,
            ws_last_ack_time,
            ws_window,
            ws_dup_ack_num,
            ws_last_segment_flags,
            ws_is_first_ack,
            high_seq,
            snd_una,
            sacked,
            holes,
            hole_times,
            unacked,
            tsvals,
            retrans,
            retrans_split: _,
            trust_from,
            skip_hole: _,
            horizon,
            horizon_pending: _,
            hole_audit: _,
            last_activity_ns,
            pending_echo,
            window_last,
            window_weighted: _,
            window_time_ns: _,
            stats,
        } = at_split;
        let series_same = |a: &Option<RateSeries>, b: &Option<RateSeries>| match (a, b) {
            (Some(a), Some(b)) => a.start_ns == b.start_ns,
            (None, None) => true,
            _ => false,
        };
        let same = *syn == whole.syn
            && *window_scale == whole.window_scale
            && *syn_options_cut == whole.syn_options_cut
            && *unwrap == whole.unwrap
            && *ws_next_seq == whole.ws_next_seq
            && *ws_next_seq_time == whole.ws_next_seq_time
            && *ws_next_seq_frame == whole.ws_next_seq_frame
            && *ws_max_seq_to_be_acked == whole.ws_max_seq_to_be_acked
            && *ws_last_ack == whole.ws_last_ack
            && *ws_last_ack_time == whole.ws_last_ack_time
            && *ws_window == whole.ws_window
            && *ws_dup_ack_num == whole.ws_dup_ack_num
            && *ws_last_segment_flags == whole.ws_last_segment_flags
            && *ws_is_first_ack == whole.ws_is_first_ack
            && *high_seq == whole.high_seq
            && *snd_una == whole.snd_una
            && *sacked == whole.sacked
            && self.holes_answer_as(*horizon, holes, hole_times, whole)
            && *unacked == whole.unacked
            && *tsvals == whole.tsvals
            && *last_activity_ns == whole.last_activity_ns
            && *pending_echo == whole.pending_echo
            && *window_last == whole.window_last
            && stats.initial_window_closed == whole.stats.initial_window_closed
            && stats.data_sent == whole.stats.data_sent
            && series_same(&stats.throughput, &whole.stats.throughput)
            && series_same(&stats.goodput, &whole.stats.goodput);
        // The records at the split it trusts (since the jump): the newest
        // of the whole's, and no eviction since that one pass would have
        // made differently.
        let trusted: Vec<&RetransRecord> = retrans.iter().filter(|r| r.frame >= *trust_from).collect();
        if !same || trusted.len() > whole.retrans.len() || retrans.len() > whole.retrans.len() {
            return false;
        }
        let older = whole.retrans.len() - trusted.len();
        if !trusted.into_iter().eq(whole.retrans.iter().skip(older)) {
            return false;
        }
        let Some(split) = &self.retrans_split else { return false };
        if whole.retrans.len() + split.recorded_since > MAX_RETRANS_RECORDS {
            return false;
        }
        // Replay the lookups that went past the stretch's own records on
        // the whole's records at the split.
        let mut records: Vec<RetransRecord> = whole.retrans.iter().copied().collect();
        split.lookups.iter().all(|&((start, end), found)| {
            let i = records.iter().rposition(|r| r.start < end && start < r.end);
            let theirs = i.map(|i| records[i]);
            if let Some(i) = i {
                records[i].spurious = true;
            }
            theirs == found
        })
    }
}

impl Connection {

    /// `self` continued from `earlier`'s state with its counts restarted
    /// ([`Connection::restart_counts`]); makes `self` the whole, as one
    /// pass would have left it. The capture-quality counts (`copies`, clock
    /// steps) are the table's and are joined there.
    pub fn join(&mut self, earlier: &Connection) {
        self.max_idle_ns = self.max_idle_ns.max(earlier.max_idle_ns);
        for (dir, e) in self.dirs.iter_mut().zip(&earlier.dirs) {
            dir.retrans_split = None;
            dir.join_holes(e);
            dir.window_weighted.merge(e.window_weighted);
            dir.window_time_ns += e.window_time_ns;
            dir.stats.join(&e.stats);
        }
    }
}

impl Connection {
    /// Adds `delta` to every frame number from `from` on.
    pub(crate) fn renumber(&mut self, from: u64, delta: i64) {
        let r = |v: &mut u64| *v = renumbered(*v, from, delta);
        r(&mut self.first_frame);
        r(&mut self.last_frame);
        for dir in &mut self.dirs {
            if let Some(syn) = dir.syn.as_mut() {
                r(&mut syn.frame);
            }
            r(&mut dir.ws_next_seq_frame);
            r(&mut dir.trust_from);
            for rec in &mut dir.retrans {
                r(&mut rec.frame);
            }
            if let Some(split) = dir.retrans_split.as_mut() {
                for (_, found) in &mut split.lookups {
                    if let Some(rec) = found.as_mut() {
                        r(&mut rec.frame);
                    }
                }
            }
            for f in &mut dir.stats.dsack_spurious_frames {
                r(f);
            }
        }
    }
}

fn split(dirs: &mut [Direction; 2], d: usize) -> (&mut Direction, &mut Direction) {
    let (x, y) = dirs.split_at_mut(1);
    if d == 0 {
        (&mut x[0], &mut y[0])
    } else {
        (&mut y[0], &mut x[0])
    }
}

/// Processes an ACK (and its SACK blocks) against the sender's state.
/// Returns an RTT sample if this ACK produced one.
fn on_ack(
    sender: &mut Direction,
    sacks: &[tcpwhy_wire::SackBlock],
    ack: i64,
    seg: &TcpSegment<'_>,
    now: i64,
) -> (Option<i64>, u64) {
    let mut sample = None;
    let mut dsack_blocks = 0;
    let advanced = sender.snd_una.is_none_or(|u| ack > u);
    if sender.high_seq.is_some() && advanced {
        // Karn's rule as the kernel applies it (tcp_clean_rtx_queue): no
        // sample if any newly acknowledged segment was retransmitted.
        let mut newest: Option<SentSegment> = None;
        let mut any_retrans = false;
        while let Some(front) = sender.unacked.front() {
            if front.end > ack {
                break;
            }
            any_retrans |= front.retransmitted;
            newest = Some(*front);
            sender.unacked.pop_front();
        }
        // A partial ACK of a super-segment (TSO) also measures it, as the
        // kernel does for a partly acknowledged skb (tcp_tso_acked): only
        // when the ACK covers some of it. An ACK that ends where the front
        // segment starts acknowledged bytes the capture never saw sent (a
        // frame the capture dropped), and would measure the front segment
        // sent microseconds before.
        let partial = match (newest, sender.unacked.front()) {
            (None, Some(front)) if sender.snd_una.is_some_and(|u| ack > u) && ack > front.start => Some(*front),
            _ => None,
        };
        if let Some(s) = newest.or(partial) {
            if !any_retrans && !s.retransmitted && sender.snd_una.is_some() {
                sample = Some(now - s.time_ns);
                sender.stats.rtt.add(now - s.time_ns);
            }
        }
        // Timestamp RTT: TSecr echoes the TSval of the segment that caused this ACK.
        if let Some((_, tsecr)) = seg.options.timestamp {
            while let Some(&(v, t)) = sender.tsvals.front() {
                if seq_lt(v, tsecr) {
                    sender.tsvals.pop_front();
                    continue;
                }
                if v == tsecr {
                    sender.stats.ts_rtt.add(now - t);
                }
                break;
            }
        }
    }
    if advanced && sender.stats.data_sent {
        sender.stats.initial_window_closed = true;
    }
    if advanced {
        sender.snd_una = Some(ack);
        sender.sacked.trim_below(ack);
        if sender.high_seq.is_some_and(|h| ack >= h) {
            sender.last_activity_ns = Some(now);
        }
    }
    // SACK blocks (RFC 2018) and D-SACK (RFC 2883 section 4: the first block
    // is below the cumulative ACK, or inside the second block).
    for (i, b) in sacks.iter().enumerate() {
        let left = sender.unwrap.offset(b.left);
        let right = sender.unwrap.offset(b.right);
        if right <= left {
            continue;
        }
        let dsack = i == 0
            && (right <= ack
                || sacks.get(1).is_some_and(|b2| {
                    let (l2, r2) = (
                        sender.unwrap.offset(b2.left),
                        sender.unwrap.offset(b2.right),
                    );
                    l2 <= left && right <= r2
                }));
        if dsack {
            dsack_blocks += 1;
            sender.mark_dsack(left, right);
            continue;
        }
        if sender.high_seq.is_some_and(|h| left < h) && left >= ack {
            sender
                .sacked
                .insert(left, right.min(sender.high_seq.unwrap_or(right)));
        }
    }
    (sample, dsack_blocks)
}

/// Applies the window-scale rules once a SYN or SYN-ACK has been seen
/// (RFC 7323 section 2.2: scaling is in effect only if both SYNs carry the
/// option). Mirrors Wireshark's verify_tcp_window_scaling.
fn resolve_window_scale(fwd: &mut Direction, rev: &mut Direction, seg: &TcpSegment<'_>) {
    if seg.options.truncated {
        // The snaplen cut the options (as Wireshark, which then leaves the
        // scale unknown): scaling may or may not have been offered.
        fwd.syn_options_cut = true;
        fwd.window_scale = WindowScale::Unknown;
        if rev.window_scale != WindowScale::NotNegotiated {
            rev.window_scale = WindowScale::Unknown;
        }
        return;
    }
    if let Some(shift) = seg.options.window_scale {
        fwd.window_scale = WindowScale::Shift(shift.min(14));
    }
    if fwd.window_scale == WindowScale::Unknown {
        // This SYN lacked the option: neither side scales (RFC 7323 2.2).
        fwd.window_scale = WindowScale::NotNegotiated;
        rev.window_scale = WindowScale::NotNegotiated;
    } else if rev.syn_options_cut {
        fwd.window_scale = WindowScale::Unknown;
    } else if seg.flags.ack() && rev.window_scale == WindowScale::NotNegotiated {
        fwd.window_scale = WindowScale::NotNegotiated;
    }
}

pub(crate) fn is_zero(v: &u64) -> bool {
    *v == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpwhy_wire::{TcpFlags, TcpOptions};

    fn seg(from_a: bool, seq: u32, ack: u32, len: u32, flags: u16) -> TcpSegment<'static> {
        let (a, b) = (Addr::V4([10, 0, 0, 1]), Addr::V4([10, 0, 0, 2]));
        let (src, dst) = if from_a { (a, b) } else { (b, a) };
        TcpSegment {
            src,
            dst,
            src_port: if from_a { 40000 } else { 80 },
            dst_port: if from_a { 80 } else { 40000 },
            seq,
            ack,
            flags: TcpFlags(flags),
            window: 1000,
            options: TcpOptions::default(),
            payload_len: len,
            payload: &[],
            captured: 0,
            length_from_frame: false,
            ip_id: None,
            checksum: 0,
            ttl: 64,
            dont_fragment: true,
        }
    }

    const SYN: u16 = TcpFlags::SYN;
    const ACK: u16 = TcpFlags::ACK;

    /// A connection from 10.0.0.1:40000 (a) to 10.0.0.2:80 (b), as `seg` builds.
    fn new_conn() -> Connection {
        Connection::new(1, (Addr::V4([10, 0, 0, 1]), 40000), (Addr::V4([10, 0, 0, 2]), 80), 0, 1)
    }

    /// A handshake, 0..1000 from a, then the ACK for 1000..2000 written
    /// before the data it covers, stamped `data_ns` (the ACK at 20 ms).
    fn ack_before_its_data(data_ns: i64) -> Flags {
        let mut c = new_conn();
        let ms = 1_000_000;
        c.process(&seg(true, 99, 0, 0, SYN), 1, 0, 0);
        c.process(&seg(false, 499, 100, 0, SYN | ACK), 2, ms, 1);
        c.process(&seg(true, 100, 500, 0, ACK), 3, 2 * ms, 0);
        c.process(&seg(true, 100, 500, 1000, ACK), 4, 10 * ms, 0);
        c.process(&seg(false, 500, 2100, 0, ACK), 5, 20 * ms, 1);
        c.process(&seg(true, 1100, 500, 1000, ACK), 6, data_ns, 0).flags
    }

    #[test]
    fn data_stamped_before_the_ack_that_covers_it_was_reordered_by_the_capture() {
        let f = ack_before_its_data(19_000_000);
        assert!(f.has(Flags::OUT_OF_ORDER) && f.has(Flags::RECLASSIFIED), "{f:?}");
        assert!(!f.has(Flags::RETRANSMISSION) && !f.has(Flags::SPURIOUS_RETRANSMISSION), "{f:?}");
        // Stamped after the ACK: the original went uncaptured and this is a
        // retransmission of delivered data (Wireshark's reading).
        let f = ack_before_its_data(21_000_000);
        assert!(f.has(Flags::SPURIOUS_RETRANSMISSION) && f.has(Flags::RETRANSMISSION), "{f:?}");
        assert!(!f.has(Flags::RECLASSIFIED), "{f:?}");
    }

    #[test]
    fn a_handshake_leg_sent_twice_before_its_answer_times_nothing() {
        let ms = 1_000_000;
        // The lab's client capture under random loss: the SYN again after
        // its 1 s timeout, and a SYN-ACK 20 ms later, the server's own
        // retransmission for the first SYN (RTT 40 ms).
        let mut c = new_conn();
        c.process(&seg(true, 99, 0, 0, SYN), 1, 0, 0);
        c.process(&seg(true, 99, 0, 0, SYN), 2, 1022 * ms, 0);
        c.process(&seg(false, 499, 100, 0, SYN | ACK), 3, 1042 * ms, 1);
        c.process(&seg(true, 100, 500, 0, ACK), 4, 1042 * ms + 50_000, 0);
        assert!(c.handshake_seen());
        assert_eq!(c.handshake_rtt_ns(), None, "the SYN's timeout is no path");
        let s = crate::summary::ConnectionSummary::from_connection(&c, false);
        assert!(s.handshake_retransmitted && s.handshake_seen() && s.handshake_rtt_ms.is_none());
        // The SYN again after the SYN-ACK (which the client lost): the
        // server's SYN-to-SYN-ACK leg stands, its SYN-ACK's answer does not.
        let mut c = new_conn();
        c.process(&seg(true, 99, 0, 0, SYN), 1, 0, 0);
        c.process(&seg(false, 499, 100, 0, SYN | ACK), 2, 50_000, 1);
        c.process(&seg(true, 99, 0, 0, SYN), 3, 1040 * ms, 0);
        c.process(&seg(false, 499, 100, 0, SYN | ACK), 4, 1040 * ms + 50_000, 1);
        c.process(&seg(true, 100, 500, 0, ACK), 5, 1080 * ms, 0);
        assert_eq!(c.handshake_leg_resent, [false, true]);
        assert_eq!(c.handshake_rtt_ns(), None);
        // Each leg once: timed.
        let mut c = new_conn();
        c.process(&seg(true, 99, 0, 0, SYN), 1, 0, 0);
        c.process(&seg(false, 499, 100, 0, SYN | ACK), 2, 40 * ms, 1);
        c.process(&seg(true, 100, 500, 0, ACK), 3, 40 * ms + 50_000, 0);
        assert_eq!(c.handshake_rtt_ns(), Some(40 * ms + 50_000));
        assert!(!crate::summary::ConnectionSummary::from_connection(&c, false).handshake_retransmitted);
    }

    /// A hole filled `fill_ms` after it opened, on a 40 ms handshake.
    fn fill_after(fill_ms: i64) -> Flags {
        let ms = 1_000_000;
        let mut c = new_conn();
        c.process(&seg(true, 99, 0, 0, SYN), 1, 0, 0);
        c.process(&seg(false, 499, 100, 0, SYN | ACK), 2, 40 * ms, 1);
        c.process(&seg(false, 500, 100, 0, ACK), 3, 40 * ms, 1);
        c.process(&seg(true, 100, 500, 0, ACK), 4, 40 * ms, 0);
        // b sends 500..1500, loses 1500..2500, sends on; the receiver's
        // capture sees the hole open at 50 ms
        c.process(&seg(false, 500, 100, 1000, ACK), 5, 49 * ms, 1);
        c.process(&seg(false, 2500, 100, 1000, ACK), 6, 50 * ms, 1);
        for k in 0..8u32 {
            c.process(&seg(false, 3500 + 1000 * k, 100, 1000, ACK), 7 + u64::from(k), (51 + i64::from(k)) * ms, 1);
        }
        c.process(&seg(false, 1500, 100, 1000, ACK), 20, (50 + fill_ms) * ms, 1).flags
    }

    #[test]
    fn a_hole_filled_half_a_round_trip_after_it_opened_was_a_loss() {
        // a retransmission's fill, one round trip after the hole (less
        // jitter): Wireshark's out-of-order, within its iRTT of the last advance
        let f = fill_after(38);
        assert!(f.has(Flags::RETRANSMISSION) && f.has(Flags::RECLASSIFIED), "{f:?}");
        // reordered by a few ms
        let f = fill_after(4);
        assert!(f.has(Flags::OUT_OF_ORDER) && !f.has(Flags::RETRANSMISSION), "{f:?}");
    }
}
