//! The sender's congestion control (reno, cubic, bbr) from what it does
//! after a loss, and from how it spaces its packets.
//!
//! **The window after a loss.** Each loss recovery that ends with the
//! sender's window cut shows the algorithm's multiplicative decrease:
//! - Reno halves it: ssthresh = FlightSize / 2 (RFC 5681 section 3.1).
//! - CUBIC keeps 0.7 of it (RFC 9438 section 4.6; Linux's `tcp_cubic.c`,
//!   beta = 717/1024).
//! - BBR does not cut it for loss: it holds the window during recovery and
//!   restores the one from before when recovery ends (Linux's `tcp_bbr.c`,
//!   `bbr_set_cwnd`: "restore cwnd after recovery").
//!
//! The window is read as the bytes in flight: at the sender, each new
//! segment's end less the highest ACK that had arrived; at the receiver,
//! rebuilt from the sequence space and the ACKs (Nebby's signal, Mishra et
//! al., SIGCOMM 2024): a segment's TSecr names the receiver's ACK that
//! released it (RFC 7323 section 4.3), so its flight is its end less that
//! ACK. Before a loss it is the largest flight in the round trip before the
//! first retransmission; after, the median flight in the half round trip
//! after the ACK that ends recovery (when Linux sets the window to ssthresh,
//! `tcp_end_cwnd_reduction`). Their ratio is the decrease; the name is the
//! one whose factor is nearest, split halfway (`RENO_CUBIC_SPLIT`,
//! `CUBIC_BBR_SPLIT`).
//!
//! A recovery is not read when it cannot show the factor: after a
//! retransmission timeout (the window restarts from one segment), when the
//! retransmissions were spurious (Linux undoes the cut), when the
//! receiver's window held the flight, or when the window was too small to
//! tell a half from 0.7 (`MIN_WINDOW_SEGMENTS`).
//!
//! **Pacing.** BBR paces every packet (it asks for the kernel's internal
//! pacing, `SK_PACING_NEEDED`); Reno and CUBIC send when an ACK arrives,
//! unless the host's fq qdisc paces them. At the sender, the share of new
//! segments sent within `ACK_CLOCK_MAX_NS` of an ACK's arrival tells an
//! ACK-clocked sender from a paced one. It names BBR only beside a loss
//! response that is not Reno's or CUBIC's, because fq paces any algorithm.
//!
//! **A fall without a loss.** BBR lowers its window with no loss: DRAIN
//! after STARTUP paces at 1/2.89 of the rate until the flight is down to
//! one BDP, and PROBE_RTT holds it at 4 packets for 200 ms when the
//! minimum RTT has not been refreshed for 10 s (Linux's `tcp_bbr.c`).
//! Reno and CUBIC lower theirs only for a loss or an ECN echo (RFC 5681,
//! RFC 9438, RFC 3168), after an idle period (RFC 5681 4.1) or while the
//! application leaves the window unused (RFC 7661). So where nothing was
//! lost, a bulk sender that the network held (`BULK_MAX_HELD_SHARE`) and
//! whose flight fell to `LOSSLESS_FALL_SHARE` of its peak or less, with
//! the receiver's window still open, is BBR. (ECN echoes are not read yet:
//! on a path that marks, Reno and CUBIC fall without a loss too.)
//!
//! `unknown` when no recovery and no such fall could be read: the flow
//! never left slow start, or a window, a buffer or the application held it.

pub use crate::model::{CcEvent, CcGrowth, CongestionControl};
use tcpwhy_core::units::calc;
use crate::record::{DataRec, DirRecords};
use tcpwhy_core::Confidence;
use tcpwhy_flow::Flags;

/// CUBIC's multiplicative decrease (RFC 9438 section 4.6; Linux's
/// 717/1024).
pub const CUBIC_BETA: f64 = 0.7;
/// CUBIC's constant C (RFC 9438 section 4.2; Linux's `bic_scale` 41/1024
/// scaled: 0.4 segments per second cubed).
pub const CUBIC_C: f64 = 0.4;
/// CUBIC's Reno-friendly estimate grows 3 (1 - beta) / (1 + beta) segments
/// per round trip (RFC 9438 section 4.3; Linux's `beta_scale`: 0.53).
pub const CUBIC_FRIENDLY_PER_ROUND: f64 = 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA);
/// CUBIC's least growth per round trip before its first loss: Linux caps
/// `cnt` at 20 while `last_max_cwnd` is 0 ("increase cwnd 5% per RTT",
/// `bictcp_update` in `tcp_cubic.c`).
pub const CUBIC_UNKNOWN_BW_GROWTH: f64 = 0.05;
/// Slow start's window grows this many times a round trip (2, less
/// delayed ACKs and the round's phase; also `detect::start`'s test of a
/// round that was still doubling).
pub const SLOW_START_GROWTH: f64 = 1.6;
/// Round trips of doubling before a slow start's end without a loss is
/// read (the capture holds the start of the connection).
pub const SLOW_START_MIN_ROUNDS: usize = 3;
/// Round trips of growth needed after a recovery before it is read (at
/// fewer, a segment or two of the flight's spread is much of Reno's).
pub const GROWTH_MIN_ROUNDS: usize = 8;
/// The growth names an algorithm only when the other's differs from it by
/// this many times (the lab's readings sat within 5% of the fitting one).
pub const GROWTH_MIN_SEPARATION: f64 = 1.5;
/// The measured growth fits an algorithm within this factor.
pub const GROWTH_TOLERANCE: f64 = 1.25;
/// Reno's: ssthresh = FlightSize / 2 (RFC 5681 section 3.1). Reno is
/// named only when most cuts read sit within [`CUBIC_FACTOR_TOLERANCE`] of
/// it: deeper readings come from a bucket's bursts of loss or a buffer
/// holding the flight (the lab's Reno senders behind
/// policers read 0.47 to 0.51; the public policing captures' CUBIC senders
/// read 0.36 to 0.40 there, recovery after recovery).
pub const RENO_BETA: f64 = 0.5;
/// The deepest cut one loss response makes: two of Reno's halvings
/// (ssthresh = FlightSize / 2, RFC 5681 section 3.1, and PRR brings the
/// window to ssthresh by the end of recovery, RFC 6937). A deeper cut
/// does not vote for an algorithm's factor: more than one reduction, or
/// another limit, set the window after it (a CUBIC sender's send buffer
/// seen from the receiver read 0.09 and 0.24, and was named Reno from
/// them).
pub const DEEPEST_LOSS_CUT: f64 = 0.25;
/// The highest window after a recovery over the one before that a loss
/// response leaves: BBR restores its window to the one before the
/// recovery (`bbr_set_cwnd_to_recover_or_restore`) and its flight can
/// reach its probing gain of 5/4 of it (`bbr_pacing_gain`); Reno and CUBIC
/// cut. A reading above it is not a loss response (the flight before the
/// loss was held below the window) and votes for no algorithm. (Measured:
/// CUBIC senders of the public policing captures read 1.3 to 2.9 at some
/// recoveries and were named `bbr`.)
pub const HIGHEST_RECOVERY_READING: f64 = 1.25;

/// Events kept per direction for the plot: the first 512 (a recovery every
/// few round trips over minutes of a long fat path is thousands; the
/// counts, `recoveries` and `lossless_falls`, stay whole).
pub const MAX_EVENTS: usize = 512;
/// Halfway between Reno's 0.5 and CUBIC's 0.7.
pub const RENO_CUBIC_SPLIT: f64 = 0.6;
/// Halfway between CUBIC's 0.7 and no cut at all (BBR).
pub const CUBIC_BBR_SPLIT: f64 = 0.85;
/// The flight before the loss, in segments, below which 0.5 and 0.7 of it
/// differ by less than two segments: such a recovery is not read.
pub const MIN_WINDOW_SEGMENTS: u64 = 10;
/// The window after a recovery is read at this quarter of the sender's
/// answers to the ACKs of the half round trip after it, sorted (2: the
/// median). Each answer, the largest pipe of the segments one ACK
/// released, is the window for a sender the window holds; the median
/// leaves out an answer the window's growth in that time raised, or one
/// sent before the cut took hold.
pub const AFTER_QUANTILE_NUM: usize = 2;
/// Linux's minimum retransmission timeout (TCP_RTO_MIN, 200 ms): a
/// retransmission after a silence this long (and two RTTs) is a timeout.
pub const RTO_MIN_NS: i64 = 200_000_000;

/// An idle this long restarts slow start (`tcp_cwnd_restart`, RFC 5681
/// 4.1: an RTO, at least [`RTO_MIN_NS`] and two round trips of
/// `round_ns`); a silence this long before a retransmission is a timeout.
pub fn restart_idle_ns(round_ns: i64) -> i64 {
    RTO_MIN_NS.max(2 * round_ns)
}
/// The flight is the receiver's window's, not the congestion window's,
/// above this share of the advertised window.
pub const RWND_HELD_SHARE: f64 = 0.9;
/// Recoveries read before a name is `high`, and the share of them that
/// must agree.
pub const HIGH_MIN_RECOVERIES: usize = 3;
pub const HIGH_AGREEMENT: f64 = 0.75;
/// BBR when at least this share of the recoveries read left the window
/// uncut (0.85 of the one before or more): Reno and CUBIC cut at every
/// recovery that is not undone as spurious, and measurement moves 0.7 by
/// far less than 0.15; BBR's window after a recovery is wherever its gain
/// cycle was, so some of its recoveries look cut, but a third does not.
pub const BBR_UNCUT_MIN_SHARE: f64 = 0.3;
/// BBR when the window at the losses is this many times the peak window a
/// loss-based sender holds at the loss rate seen (`loss_based_window`):
/// the response functions are averages, and the loss-event rate is
/// counted per recovery, which can only raise the bound.
pub const RESPONSE_MARGIN: f64 = 2.0;
/// An ACK-clocked sender sends within this time of the ACK's arrival at
/// its own interface (kernel processing, tens of µs).
pub const ACK_CLOCK_MAX_NS: i64 = 100_000;
/// ACKs closer than this (median) leave no room to tell: four times the
/// kernel's reaction time of about 25 µs.
pub const ACK_GAP_MIN_NS: i64 = 100_000;
/// ACK gaps, and segments released by an ACK, needed before the share is
/// read: a share of 100 moves in steps of 1%, far finer than the gap
/// between the two classes measured in the lab (0.996 against 0.59 or less).
pub const ACK_CLOCK_MIN_SAMPLES: usize = 100;
/// At or above this share of ACK-clocked segments the sender is not
/// paced, so not BBR (which always paces, `SK_PACING_NEEDED`).
pub const ACK_CLOCKED_MIN_SHARE: f64 = 0.9;
/// At or below this share the sender is paced: BBR, or fq pacing any
/// algorithm.
pub const PACED_MAX_SHARE: f64 = 0.7;

/// BBR's drain (to one BDP from STARTUP's 2.89) and PROBE_RTT (to 4
/// packets) take the flight to this share of its peak or less, with no
/// loss; the 0.75 phase of its gain cycle, and the measurement's noise, stay
/// above it.
pub const LOSSLESS_FALL_SHARE: f64 = 0.5;
/// A fall is read only where the sender kept sending: at least this many
/// new segments in the round trip of the fall (PROBE_RTT's 4 packets).
pub const FALL_MIN_SEGMENTS: usize = 4;
/// BBR falls without a loss once after STARTUP and then at most once per
/// PROBE_RTT interval (`bbr_min_rtt_win_sec`, 10 s): more falls than
/// that in a capture are some other sender's (a buffer, the application).
pub const PROBE_RTT_INTERVAL_NS: i64 = 10_000_000_000;
/// CUBIC's decrease is a fixed 0.7 (RFC 9438; Linux 717/1024): when at least
/// [`HIGH_AGREEMENT`] of [`HIGH_MIN_RECOVERIES`] or more readable recoveries
/// left 0.7 of the window, within this much, the sender is CUBIC even when
/// its window at the losses is beyond the loss-based bound (a policer's
/// bucket lets it grow past what the loss rate alone allows). BBR's window
/// after a recovery is wherever its gain cycle was, which does not sit at
/// 0.7 recovery after recovery.
pub const CUBIC_FACTOR_TOLERANCE: f64 = 0.05;
/// The falls are read only when the receiver's window and reader, the send
/// buffer, the sending application and idle periods held the sender less
/// than this share of the capture: a window left unused shrinks for any
/// algorithm (RFC 7661), and a restart after idle starts small.
pub const BULK_MAX_HELD_SHARE: f64 = 0.2;

/// BBR's gain cycle in PROBE_BW: eight phases of one min_rtt each, pacing
/// at 1.25, 0.75, then six times 1 of its bandwidth estimate
/// (`bbr_pacing_gain` in tcp_bbr.c, a cycle of 8 phases): the flight rises a
/// quarter of a BDP into the queue and drains it once every 8 round trips.
pub const BBR_CYCLE_ROUNDS: f64 = 8.0;
/// The shortest period, in base RTTs, at which the cycle is looked for:
/// the base RTT read here may sit above BBR's own min_rtt (a sender's
/// capture read 64.3 ms where the kernel's min_rtt was 60.4 ms: 7.5 base
/// RTTs a cycle).
pub const BBR_CYCLE_SCAN_LOW: f64 = 7.0;
/// The longest period, in base RTTs, at which the cycle is looked for: a
/// phase ends at the first ACK after a min_rtt, and the 1.25 phase waits
/// for the flight to reach its target (`bbr_is_next_cycle_phase`), so the
/// cycle runs longer than 8, not shorter (8.0 to 8.4 measured).
pub const BBR_CYCLE_SCAN_HIGH: f64 = 9.0;
/// The cycle is read only over this many of its periods or more.
pub const BBR_CYCLE_MIN_CYCLES: f64 = 6.0;
/// The share of the flight's variance, round trip by round trip, at the
/// cycle's period above which the sender cycles as BBR does. A clean cycle
/// (the flight a quarter up in two round trips of eight, read at each
/// round trip's largest) puts 0.57 of it there; BBR on bench/independent's
/// one-BDP queue and on 0.5% loss put 0.32 to 0.62 there from both ends,
/// CUBIC and Reno there and in the lab 0.046 or less (a sawtooth's
/// variance sits at its own, far longer, period).
pub const BBR_CYCLE_MIN_SHARE: f64 = 0.2;
/// The cycle is read only from a sender that kept sending: at most this
/// share of the round trips sent nothing.
pub const BBR_CYCLE_MAX_IDLE_SHARE: f64 = 0.1;
/// The cycle moves the flight a quarter of a BDP: round trips whose
/// largest pipe is beyond this factor of the median either way (STARTUP's
/// overshoot and DRAIN, a loss recovery, PROBE_RTT's 4 packets) are read
/// at the median, so that they do not swamp it.
pub const BBR_CYCLE_CLIP: f64 = 1.5;

/// Each new data segment's flight, by its index in `r.data` (None: not
/// new data, or no ACK to rebuild it from): the bytes sent and not yet
/// acknowledged (`end` less it is the ACK that released the segment); and
/// the bytes the receiver had SACKed above that ACK (RFC 2018; 0 without
/// SACK), which [`pipe`] leaves out. A window, whatever the algorithm,
/// bounds the pipe (RFC 6675's, Linux's `tcp_packets_in_flight`): the
/// flight also counts bytes delivered above a hole. Behind a deep queue a
/// hole stands an inflated round trip: a Reno sender the kernel had cut
/// to 1502 segments showed 2860 in flight while a few segments lost after
/// its recovery stood unrepaired (`tcpi_sacked` 1425; bench/independent's
/// deep queue, 50 Mbit/s, 40 ms, 2 MB), and that read as no cut.
fn flights(r: &DirRecords, sender_side: bool) -> (Vec<Option<i64>>, Vec<u32>) {
    let mut out = vec![None; r.data.len()];
    let mut sacked = vec![0u32; r.data.len()];
    let mut walk = AckWalk { r, ai: 0, acked: i64::MIN, high: i64::MIN };
    if sender_side {
        for (i, d) in r.data.iter().enumerate() {
            let held = walk.to(i);
            if walk.acked > i64::MIN && !d.is_retransmission() {
                out[i] = Some(d.end() - walk.acked);
                sacked[i] = held;
            }
        }
    } else {
        // The receiver's ACKs by their TSval: the highest ACK carrying it,
        // and the bytes it held above that ACK (read at the first segment
        // it received after it).
        let mut by_tsval: foldhash::HashMap<u32, (i64, u32)> = Default::default();
        let (mut di, mut held) = (0, 0);
        for a in r.acks.iter() {
            while di < r.data.len() && r.data[di].t_ns <= a.t_ns {
                walk.to(di);
                di += 1;
            }
            if a.tsval == 0 {
                continue;
            }
            if di < r.data.len() {
                held = walk.to(di);
            }
            let e = by_tsval.entry(a.tsval).or_insert((a.ack, held));
            if a.ack > e.0 {
                *e = (a.ack, held);
            }
        }
        for (i, d) in r.data.iter().enumerate() {
            if d.tsecr == 0 || d.is_retransmission() {
                continue;
            }
            if let Some(&(ack, held)) = by_tsval.get(&d.tsecr) {
                out[i] = Some(d.end() - ack);
                sacked[i] = held;
            }
        }
    }
    (out, sacked)
}

/// The data segments in capture order, with the ACKs that arrived by each.
struct AckWalk<'a> {
    r: &'a DirRecords,
    ai: usize,
    /// The highest ACK by the segment walked to (i64::MIN: none yet).
    acked: i64,
    /// The highest byte sent by then.
    high: i64,
}

impl AckWalk<'_> {
    /// Walks to data segment `i` (never back: walking to it again changes
    /// nothing) and gives the bytes SACKed above the cumulative ACK then:
    /// the highest byte sent, less the ACK, less the flow's SACK-aware
    /// flight (0 there: the flow did not know it).
    fn to(&mut self, i: usize) -> u32 {
        let d = &self.r.data[i];
        while self.ai < self.r.acks.len() && self.r.acks[self.ai].t_ns <= d.t_ns {
            self.acked = self.acked.max(self.r.acks[self.ai].ack);
            self.ai += 1;
        }
        self.high = self.high.max(d.end());
        if self.acked > i64::MIN && d.in_flight > 0 && d.in_flight < u32::MAX {
            (self.high - self.acked - d.in_flight as i64).clamp(0, u32::MAX as i64) as u32
        } else {
            0
        }
    }
}

/// Segment `k`'s pipe: its flight less the bytes SACKed above ([`flights`]).
fn pipe(flight: &[Option<i64>], sacked: &[u32], k: usize) -> Option<i64> {
    flight[k].map(|f| f - sacked[k] as i64)
}

/// The share of new data segments an ACK released (sender side): sent
/// within `ACK_CLOCK_MAX_NS`, or a quarter of the median gap between ACKs
/// if that is shorter, of an ACK's arrival. None when ACKs come closer
/// than `ACK_GAP_MIN_NS` apart (above a few hundred Mbit/s): a paced
/// sender's packets then fall near some ACK anyway.
fn ack_clocked_share(data: &[DataRec], acks: &[crate::record::AckRec]) -> Option<f64> {
    let mut gaps: Vec<i64> = acks.windows(2).map(|w| w[1].t_ns - w[0].t_ns).filter(|g| *g > 0).collect();
    if gaps.len() < ACK_CLOCK_MIN_SAMPLES {
        return None;
    }
    let mid = gaps.len() / 2;
    let median_gap = *gaps.select_nth_unstable(mid).1;
    if median_gap < ACK_GAP_MIN_NS {
        return None;
    }
    let window = ACK_CLOCK_MAX_NS.min(median_gap / 4);
    let (mut ai, mut last_ack, mut clocked, mut n) = (0, i64::MIN, 0usize, 0usize);
    let mut prev_data = i64::MIN;
    for d in data.iter().filter(|d| !d.is_retransmission()) {
        while ai < acks.len() && acks[ai].t_ns <= d.t_ns {
            last_ack = acks[ai].t_ns;
            ai += 1;
        }
        // Only segments with an ACK since the one before: a train's
        // later segments go with its first.
        if last_ack > prev_data && last_ack > i64::MIN {
            n += 1;
            if d.t_ns - last_ack <= window {
                clocked += 1;
            }
        }
        prev_data = d.t_ns;
    }
    (n >= ACK_CLOCK_MIN_SAMPLES).then(|| clocked as f64 / n as f64)
}

/// What the diagnosis holds of the direction's losses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bucket {
    /// Not a token bucket's.
    None,
    /// A token bucket's, by the verdict (`policer`) below `high`: the
    /// loss-rate bound is not read (a bucket lets any sender's window grow
    /// past it) unless the sender paces; the cuts are read as they are
    /// (the fit also passes BBR's random losses, which BBR does not cut
    /// for: from the receiver, `policer` `medium` in about one lab run in
    /// five, its uncut recoveries name it rightly).
    Fits,
    /// A policer's at `high` confidence: the sender's halvings are read
    /// against it too.
    Policed,
}

impl Bucket {
    /// From the direction's verdict.
    pub fn of(primary: tcpwhy_core::Cause, confidence: Confidence) -> Bucket {
        match (primary, confidence) {
            (tcpwhy_core::Cause::Policer, Confidence::High) => Bucket::Policed,
            (tcpwhy_core::Cause::Policer, _) => Bucket::Fits,
            _ => Bucket::None,
        }
    }

    /// The cuts are read as behind a bucket (`policed` in
    /// [`CongestionControl`]): a policer's at `high` only.
    fn reads_cuts_behind(self) -> bool {
        self == Bucket::Policed
    }
}

/// How many readings sit at an algorithm's factor (within
/// [`CUBIC_FACTOR_TOLERANCE`]).
fn at_factor(readings: &[f64], factor: f64) -> usize {
    readings.iter().filter(|&&b| (b - factor).abs() <= CUBIC_FACTOR_TOLERANCE).count()
}

/// A reading that one loss response's cut explains: below BBR's uncut
/// window ([`CUBIC_BBR_SPLIT`]), no deeper than [`DEEPEST_LOSS_CUT`]. Only
/// such a cut votes for a factor, or is followed by its growth.
fn a_loss_cut(reading: f64) -> bool {
    (DEEPEST_LOSS_CUT..CUBIC_BBR_SPLIT).contains(&reading)
}

/// The recoveries of one direction: (after / before of each one read, the
/// window before each one read, recoveries seen, the window's growth after
/// each one read, if `read_growth`).
fn recoveries(r: &DirRecords, flight: &[Option<i64>], sacked: &[u32], base_ns: i64, smss: u32, read_growth: bool, events: &mut Vec<CcEvent>) -> (Vec<f64>, Vec<i64>, usize, Vec<CcGrowth>) {
    let data = &r.data;
    let mut out = Vec::new();
    let mut growths = Vec::new();
    let mut befores = Vec::new();
    let debug = debug_cc();
    let mut seen = 0;
    let mut snd_nxt = i64::MIN;
    let mut i = 0;
    // The first loss after an idle gap of an RTO (at least RTO_MIN_NS, and
    // two RTTs) ends the slow start Linux restarts there
    // (`tcp_cwnd_restart`, RFC 5681 4.1): the window doubled every round
    // before it, so the flight of the round before the loss is not the
    // window the loss cut. Such a recovery is counted, not read.
    // (Measured: CUBIC senders of the public policing captures, five 2 MB
    // chunks after gaps of 0.5 to 3.5 s, read 1.2 to 2.9 there.)
    let idle_ns = restart_idle_ns(base_ns);
    let mut in_slow_start = false;
    while i < data.len() {
        let d = &data[i];
        if i > 0 && d.t_ns - data[i - 1].t_ns >= idle_ns {
            in_slow_start = true;
        }
        if !d.is_retransmission() || snd_nxt == i64::MIN {
            snd_nxt = snd_nxt.max(d.end());
            i += 1;
            continue;
        }
        // A recovery starts: it ends when a segment goes out on an ACK at
        // or past the recovery point.
        seen += 1;
        let t0 = d.t_ns;
        let point = snd_nxt;
        let prev_t = if i > 0 { data[i - 1].t_ns } else { t0 };
        let timeout = t0 - prev_t >= restart_idle_ns(base_ns);
        let mut spurious = d.flags.has(Flags::SPURIOUS_RETRANSMISSION);
        // Before: the pipe of segments released by ACKs up to the hole,
        // over the round trip before the loss was repaired.
        let hole = d.seq;
        let mut before = 0;
        for k in (0..i).rev().take_while(|&k| data[k].t_ns >= t0 - base_ns) {
            if let (Some(f), Some(p)) = (flight[k], pipe(flight, sacked, k)) {
                if data[k].end() - f <= hole {
                    before = before.max(p);
                }
            }
        }
        // The end: the first new segment whose flight shows an ACK past the point.
        let mut j = i + 1;
        while j < data.len() {
            let e = &data[j];
            spurious |= e.flags.has(Flags::SPURIOUS_RETRANSMISSION);
            snd_nxt = snd_nxt.max(e.end());
            if let Some(f) = flight[j] {
                if e.end() - f >= point {
                    break;
                }
            }
            j += 1;
        }
        // After: the pipe over the half round trip from there, while
        // nothing else is lost.
        let t1 = data.get(j).map_or(i64::MAX, |e| e.t_ns);
        let Answers { mut after, read, clean, next: k } = answers(data, flight, sacked, j, t1.saturating_add(base_ns / 2), &mut snd_nxt);
        // The ACKs are in time order: the two round trips before t0.
        let lo = r.acks.partition_point(|a| a.t_ns < t0 - 2 * base_ns);
        let hi = r.acks.partition_point(|a| a.t_ns < t0);
        let rwnd = r.acks[lo..hi.max(lo)].iter().map(|a| a.window as i64).max().unwrap_or(i64::MAX);
        // The loss that ends a restart's slow start is no loss response.
        let ends_slow_start = std::mem::replace(&mut in_slow_start, false);
        let readable = !timeout
            && !ends_slow_start
            && !spurious
            && clean
            && read >= 2
            && before >= (MIN_WINDOW_SEGMENTS * smss as u64) as i64
            && (before as f64) < RWND_HELD_SHARE * rwnd as f64;
        if readable {
            // The median of the ACKs' answers (AFTER_QUANTILE_NUM).
            after.sort_unstable();
            let a = after[after.len() * AFTER_QUANTILE_NUM / 4];
            let reading = a as f64 / before as f64;
            out.push(reading);
            befores.push(before);
            let grew = if read_growth && a_loss_cut(reading) {
                // CUBIC's W_max as a multiple of the window after the cut:
                // it cut from W_max; after an earlier recovery fast
                // convergence may have lowered W_max (RFC 9438 4.7).
                let high = 1.0 / CUBIC_BETA;
                let low = if seen == 1 { high } else { (1.0 + CUBIC_BETA) / 2.0 / CUBIC_BETA };
                growth(r, flight, j, a, smss, idle_ns, Some((low, high)))
            } else {
                None
            };
            if let Some(g) = grew {
                if debug {
                    debug_growth(t0, a, smss, &g);
                }
                growths.push(g);
            }
            if debug {
                let lost: i64 = data[i..j.min(data.len())].iter().filter(|e| e.is_retransmission()).map(|e| e.end() - e.seq).sum();
                eprintln!("recovery at {:.3} s: before {before} after {a} ({reading:.2}) retransmitted {lost} ({:.2})", calc::s_from_ns(t0 as f64), lost as f64 / before as f64);
            }
        }
        // the factor just read, or none for a recovery that could not be read
        event(events, t0, "recovery", if readable { out.last().copied() } else { None });
        i = k.max(i + 1);
    }
    (out, befores, seen, growths)
}

/// The pipe after a recovery, from segment `from` until `until_ns`: each
/// ACK's answer read once, at its largest pipe (a burst released by one
/// ACK climbs to the window from the pipe before it); `clean` false when a
/// retransmission came first. `snd_nxt` moves past what was sent.
struct Answers {
    after: Vec<i64>,
    read: usize,
    clean: bool,
    /// The first segment not read.
    next: usize,
}

fn answers(data: &[DataRec], flight: &[Option<i64>], sacked: &[u32], from: usize, until_ns: i64, snd_nxt: &mut i64) -> Answers {
    let mut after: Vec<i64> = Vec::new();
    let mut answered = i64::MIN;
    let mut read = 0;
    let mut k = from;
    let mut clean = true;
    while k < data.len() && data[k].t_ns < until_ns {
        if data[k].is_retransmission() {
            clean = false;
            break;
        }
        if let (Some(f), Some(p)) = (flight[k], pipe(flight, sacked, k)) {
            let ack = data[k].end() - f;
            match after.last_mut() {
                Some(last) if ack == answered => *last = (*last).max(p),
                _ => after.push(p),
            }
            answered = ack;
            read += 1;
        }
        *snd_nxt = (*snd_nxt).max(data[k].end());
        k += 1;
    }
    Answers { after, read, clean, next: k }
}

/// `TCPWHY_DEBUG_CC`: the growth read after the recovery at `t0`, from a
/// window of `a` bytes.
fn debug_growth(t0: i64, a: i64, smss: u32, g: &CcGrowth) {
    eprintln!(
        "growth after {:.3} s: {} rounds {:.2} s, {:.0} -> {:.0} segments: +{:.1}, reno +{:.1}, cubic +{:.1} ({})",
        calc::s_from_ns(t0 as f64),
        g.rounds,
        g.seconds,
        a as f64 / smss as f64,
        a as f64 / smss as f64 + g.segments,
        g.segments,
        g.reno_segments,
        g.cubic_segments,
        g.fits
    );
}

/// Round trips counted from the sequence space: a round ends when a
/// segment's flight shows an ACK past the first segment of the round
/// (from either end: the flight is rebuilt at the receiver).
struct Rounds {
    /// Index and time of the round's first segment.
    first: usize,
    t_ns: i64,
    /// Its end: the ACK past it ends the round.
    end_seq: i64,
    /// The largest flight sent in it.
    max: i64,
}

impl Rounds {
    fn starting(k: usize, d: &DataRec) -> Rounds {
        Rounds { first: k, t_ns: d.t_ns, end_seq: d.end(), max: 0 }
    }

    /// Takes segment `k`, sent with flight `f`: the round it ends, if it
    /// starts a new one.
    fn take(&mut self, k: usize, d: &DataRec, f: i64) -> Option<Rounds> {
        let ended = (d.end() - f >= self.end_seq).then(|| std::mem::replace(self, Rounds::starting(k, d)));
        self.max = self.max.max(f);
        ended
    }
}

/// The window's growth after a recovery, in round trips counted from the
/// sequence space (a round ends when a segment's flight shows an ACK past
/// the first segment of the round), while nothing is lost, no idle gap
/// restarts it, the receiver's window does not hold it and it does not
/// fall: the measured growth at the end of that stretch against each
/// loss-based algorithm's.
/// - Reno: one segment per round trip in congestion avoidance (RFC 5681
///   section 3.1; Linux counts the segments ACKed, `tcp_cong_avoid_ai`).
/// - CUBIC: W(t) = C (t - K)^3 + W_max with K = cbrt((W_max - W_0) / C),
///   C = 0.4, t in seconds from the end of recovery (RFC 9438 section 4.2;
///   Linux's `bictcp_update` takes K from the window it starts from), and
///   never below its Reno-friendly estimate, which grows
///   3 (1 - beta) / (1 + beta) segments per round trip (RFC 9438 4.3).
fn growth(r: &DirRecords, flight: &[Option<i64>], j: usize, w0: i64, smss: u32, idle_ns: i64, wmax: Option<(f64, f64)>) -> Option<CcGrowth> {
    let data = &r.data;
    let start = data.get(j)?;
    // (start time, largest flight) of each round
    let mut rounds: Vec<(i64, i64)> = Vec::new();
    let mut round = Rounds::starting(j, start);
    let mut peak = 0i64;
    let mut ai = r.acks.partition_point(|a| a.t_ns <= start.t_ns);
    let mut rwnd = ai.checked_sub(1).map_or(i64::MAX, |i| r.acks[i].window as i64);
    let mut ended_by_data = true;
    for k in j..data.len() {
        let d = &data[k];
        if d.is_retransmission() || (k > j && d.t_ns - data[k - 1].t_ns >= idle_ns) {
            ended_by_data = false;
            break;
        }
        while ai < r.acks.len() && r.acks[ai].t_ns <= d.t_ns {
            rwnd = r.acks[ai].window as i64;
            ai += 1;
        }
        let Some(f) = flight[k] else { continue };
        if f as f64 >= RWND_HELD_SHARE * rwnd as f64 {
            ended_by_data = false;
            break;
        }
        if let Some(ended) = round.take(k, d, f) {
            if (ended.max as f64) < LOSSLESS_FALL_SHARE * peak as f64 {
                ended_by_data = false;
                break;
            }
            peak = peak.max(ended.max);
            rounds.push((ended.t_ns, ended.max));
        }
    }
    if ended_by_data {
        // the last round runs out of data
        rounds.pop();
    }
    // read at the middle of the last three rounds
    if rounds.len() < GROWTH_MIN_ROUNDS + 2 {
        return None;
    }
    let seg = f64::from(smss);
    let n = rounds.len();
    let mut last: Vec<i64> = rounds[n - 3..].iter().map(|x| x.1).collect();
    last.sort_unstable();
    let (t_mid, _) = rounds[n - 2];
    let seconds = calc::s_from_ns((t_mid - start.t_ns) as f64);
    let rounds_at = (n - 2) as f64;
    let w0s = w0 as f64 / seg;
    let measured = last[1] as f64 / seg - w0s;
    let reno = rounds_at;
    // CUBIC cut its window to beta of the one at the loss, which is its
    // W_max; or, with fast convergence (a window that had not regained the
    // W_max before), to (1 + beta) / 2 of it (RFC 9438 section 4.7).
    let cubic_at = |wmax: f64| {
        let k = ((wmax - w0s).max(0.0) / CUBIC_C).cbrt();
        (CUBIC_C * ((seconds - k).powi(3) + k.powi(3))).max(CUBIC_FRIENDLY_PER_ROUND * rounds_at)
    };
    let (cubic_low, cubic_high) = match wmax {
        Some((low, high)) => (cubic_at(w0s * low), cubic_at(w0s * high)),
        // No earlier maximum (no loss yet): K = 0 from the window at slow
        // start's end, and at least 5% a round trip while the bandwidth is
        // unknown (`bictcp_update`: cnt at most 20 when last_max_cwnd is 0).
        None => {
            let g = cubic_at(w0s).max(w0s * ((1.0 + CUBIC_UNKNOWN_BW_GROWTH).powf(rounds_at) - 1.0));
            (g, g)
        }
    };
    // Only where CUBIC's curve runs well above Reno's line do the two stand
    // apart: at small windows CUBIC grows by its Reno-friendly estimate,
    // and the CUBIC senders of the public policing captures grew anywhere
    // from 0.5 to 1 segment a round trip there (a Reno sender held part of
    // the time grows slower than its rule too).
    let fits = if measured >= reno / GROWTH_TOLERANCE && measured <= reno * GROWTH_TOLERANCE && measured * GROWTH_MIN_SEPARATION <= cubic_low {
        "reno"
    } else if measured >= cubic_low / GROWTH_TOLERANCE && measured <= cubic_high * GROWTH_TOLERANCE && measured >= reno * GROWTH_MIN_SEPARATION {
        "cubic"
    } else if cubic_low < reno * GROWTH_MIN_SEPARATION {
        "either"
    } else {
        "neither"
    };
    Some(CcGrowth { t: calc::s_from_us((start.t_ns / 1000) as f64), rounds: n - 2, seconds, segments: measured, reno_segments: reno, cubic_segments: cubic_high, fits })
}

/// At most this many round trips are read (the rest fall in the last): a
/// bound on the memory and time a long capture of a short path costs.
pub const MAX_ROUND_TRIPS: usize = 1 << 20;

/// Round trips of `base_ns` from data segment `from` on, in time order,
/// each with (its largest pipe, new segments, whether it retransmitted);
/// the last one holds the rest of the capture (at most
/// [`MAX_ROUND_TRIPS`]).
fn round_trips(r: &DirRecords, flight: &[Option<i64>], sacked: &[u32], base_ns: i64, from: usize) -> Vec<(i64, usize, bool)> {
    let (Some(first), Some(last)) = (r.data.get(from), r.data.last()) else {
        return Vec::new();
    };
    let n = ((last.t_ns - first.t_ns) / base_ns + 1).clamp(1, MAX_ROUND_TRIPS as i64) as usize;
    let mut rounds = vec![(0i64, 0usize, false); n];
    for (i, d) in r.data.iter().enumerate().skip(from) {
        let k = (((d.t_ns - first.t_ns) / base_ns) as usize).min(n - 1);
        if d.is_retransmission() {
            rounds[k].2 = true;
        } else {
            rounds[k].1 += 1;
            if let Some(f) = pipe(flight, sacked, i) {
                rounds[k].0 = rounds[k].0.max(f);
            }
        }
    }
    rounds
}

/// Falls of the flight to [`LOSSLESS_FALL_SHARE`] of its peak or less with
/// no loss near them: round trips (of `base_ns`) in time order, each with
/// its largest flight; the peak since the last loss, idle round trip or
/// fall; a fall in a round trip that sent at least [`FALL_MIN_SEGMENTS`]
/// new segments, with no retransmission from two round trips before it to
/// one after, data after it, the peak at least
/// [`MIN_WINDOW_SEGMENTS`] and the receiver's window above the peak.
fn lossless_falls(r: &DirRecords, flight: &[Option<i64>], sacked: &[u32], base_ns: i64, smss: u32, events: &mut Vec<CcEvent>) -> usize {
    let Some(first) = r.data.first() else {
        return 0;
    };
    let rounds = round_trips(r, flight, sacked, base_ns, 0);
    let n = rounds.len();
    let lossy_near = |k: usize| rounds[k.saturating_sub(2)..(k + 2).min(n)].iter().any(|x| x.2);
    let min_peak = (MIN_WINDOW_SEGMENTS * smss as u64) as i64;
    let (mut peak, mut falls) = (0i64, 0usize);
    for k in 0..n.saturating_sub(1) {
        let (f, segs, _) = rounds[k];
        if segs == 0 || lossy_near(k) {
            peak = 0;
            continue;
        }
        if peak >= min_peak && segs >= FALL_MIN_SEGMENTS && (f as f64) <= LOSSLESS_FALL_SHARE * peak as f64 && rounds[k + 1].1 > 0 {
            // the receiver's window over the round trip before: open above the peak
            let t = first.t_ns + k as i64 * base_ns;
            let lo = r.acks.partition_point(|a| a.t_ns < t - base_ns);
            let hi = r.acks.partition_point(|a| a.t_ns < t + base_ns);
            let rwnd = r.acks[lo..hi.max(lo)].iter().map(|a| a.window as i64).min().unwrap_or(i64::MAX);
            if rwnd > peak {
                falls += 1;
                event(events, t, "fall", Some(f as f64 / peak as f64));
                if debug_cc() {
                    eprintln!("lossless fall at {:.3} s: flight {f} after a peak of {peak}", calc::s_from_ns(t as f64));
                }
                peak = f;
                continue;
            }
        }
        peak = peak.max(f);
    }
    falls
}

/// BBR's gain cycle ([`BBR_CYCLE_ROUNDS`]): the share of the pipe's
/// variance, read at each round trip's largest from segment `from` on, at
/// the strongest period between [`BBR_CYCLE_SCAN_LOW`] and
/// [`BBR_CYCLE_SCAN_HIGH`] round trips (a Fourier coefficient at that
/// period, over the variance). None over fewer than
/// [`BBR_CYCLE_MIN_CYCLES`] periods, or when more than
/// [`BBR_CYCLE_MAX_IDLE_SHARE`] of the round trips sent nothing. Round trips whose pipe is beyond
/// [`BBR_CYCLE_CLIP`] times the median either way are read at the median.
fn gain_cycle(r: &DirRecords, flight: &[Option<i64>], sacked: &[u32], base_ns: i64, from: usize) -> Option<f64> {
    // whole round trips only: the last one runs out of data
    let mut bins: Vec<i64> = round_trips(r, flight, sacked, base_ns, from).iter().map(|x| x.0).collect();
    bins.pop();
    let n = bins.len();
    if (n as f64) < BBR_CYCLE_MIN_CYCLES * BBR_CYCLE_SCAN_HIGH {
        return None;
    }
    if bins.iter().filter(|&&b| b <= 0).count() as f64 > BBR_CYCLE_MAX_IDLE_SHARE * n as f64 {
        return None;
    }
    let mut sorted = bins.clone();
    sorted.sort_unstable();
    let median = sorted[n / 2] as f64;
    let clip = |b: i64| {
        let b = b as f64;
        if b < median / BBR_CYCLE_CLIP || b > median * BBR_CYCLE_CLIP {
            median
        } else {
            b
        }
    };
    let x: Vec<f64> = bins.iter().map(|&b| clip(b)).collect();
    let mean = x.iter().sum::<f64>() / n as f64;
    let var: f64 = x.iter().map(|v| (v - mean).powi(2)).sum();
    if var <= 0.0 {
        return None;
    }
    let mut best = 0.0f64;
    let mut period = BBR_CYCLE_SCAN_LOW;
    while period <= BBR_CYCLE_SCAN_HIGH + 1e-9 {
        let w = std::f64::consts::TAU / period;
        let (re, im) = x.iter().enumerate().fold((0.0, 0.0), |(re, im), (i, v)| (re + (v - mean) * (w * i as f64).cos(), im + (v - mean) * (w * i as f64).sin()));
        best = best.max(2.0 * (re * re + im * im) / n as f64 / var);
        period += 0.1;
    }
    Some(best)
}

/// The sender's congestion control, from one direction's records.
/// `held_share`: the share of the capture the receiver's window and reader,
/// the send buffer, the sending application and idle periods held the
/// sender (the falls are read below [`BULK_MAX_HELD_SHARE`]).
pub fn detect(r: &DirRecords, sender_side: bool, base_ns: Option<i64>, smss: u32, held_share: f64, bucket: Bucket) -> CongestionControl {
    let policed = bucket.reads_cuts_behind();
    let clocked = if sender_side { ack_clocked_share(&r.data, &r.acks) } else { None };
    let Some(base_ns) = base_ns.filter(|b| *b > 0) else {
        return CongestionControl::unknown("no RTT: the window before and after a loss cannot be told".into(), 0, clocked);
    };
    if !sender_side && !r.data.iter().any(|d| d.tsecr != 0) {
        return CongestionControl::unknown(
            "no TCP timestamps: the sender's flight cannot be rebuilt from the receiver's side".into(),
            0,
            clocked,
        );
    }
    let (flight, sacked) = flights(r, sender_side);
    let mut events = Vec::new();
    // A bucket sets the flight behind it (BBR's long-term rate behind a
    // policer grew one segment per round trip in the lab), and a sender
    // the application, a buffer or the receiver held grows slower than
    // its algorithm: the growth is read only where neither was.
    let read_growth = bucket == Bucket::None && held_share < BULK_MAX_HELD_SHARE;
    let (decreases, befores, seen, mut growth) = recoveries(r, &flight, &sacked, base_ns, smss.max(1), read_growth, &mut events);
    if read_growth && seen == 0 {
        // No loss: the growth after slow start's end. CUBIC's W_max is the
        // window there (K = 0: W_0 + C t^3, `bictcp_update` with no
        // earlier maximum).
        let idle_ns = restart_idle_ns(base_ns);
        growth.extend(slow_start_exit(r, &flight).and_then(|(j, w0)| self::growth(r, &flight, j, w0, smss.max(1), idle_ns, None)));
        if debug_cc() {
            for g in &growth {
                eprintln!(
                    "growth after slow start: {} rounds {:.2} s: +{:.1}, reno +{:.1}, cubic +{:.1} ({})",
                    g.rounds, g.seconds, g.segments, g.reno_segments, g.cubic_segments, g.fits
                );
            }
        }
    }
    growth.truncate(MAX_EVENTS);
    // BBR's gain cycle, read after startup (or the first loss).
    let cycle = if held_share < BULK_MAX_HELD_SHARE {
        let exit = slow_start_exit(r, &flight).map(|(j, _)| j);
        let lost = r.data.iter().position(|d| d.is_retransmission());
        exit.into_iter().chain(lost).min().and_then(|from| gain_cycle(r, &flight, &sacked, base_ns, from))
    } else {
        None
    };
    let new_segments = r.data.iter().filter(|d| !d.is_retransmission()).count();
    // Behind a token bucket the window at the losses is the bucket's depth
    // and the policed rate's BDP, whatever the loss rate: no bound to read
    // a loss-based sender's window against. Only from a sender seen to
    // pace (BBR, whose window holds through losses at twice its BDP
    // estimate) is it read.
    let paced_sender = clocked.is_some_and(|c| c <= PACED_MAX_SHARE);
    let above = if bucket == Bucket::None || paced_sender { above_response(&befores, seen, new_segments, base_ns, smss.max(1)) } else { None };
    let mut fell = Vec::new();
    // The flight above a hole counts bytes already delivered: its fall
    // when the hole is repaired is no window's.
    let mut falls = if held_share < BULK_MAX_HELD_SHARE { lossless_falls(r, &flight, &sacked, base_ns, smss.max(1), &mut fell) } else { 0 };
    let span_ns = r.data.last().map_or(0, |l| l.t_ns) - r.data.first().map_or(0, |f| f.t_ns);
    if falls as i64 > 1 + span_ns / PROBE_RTT_INTERVAL_NS {
        // more often than BBR falls: not its drain or PROBE_RTT
        falls = 0;
        fell.clear();
    }
    events.extend(fell);
    events.sort_by(|a, b| a.t.total_cmp(&b.t));
    events.truncate(MAX_EVENTS);
    let at_receiver = !sender_side;
    let cc = with_gain_cycle(name_from_cuts(decreases, seen, clocked, above, falls, bucket, at_receiver, grown_as(&growth)), cycle);
    CongestionControl { events, growth, policed, at_receiver, ..cc }
}

/// What the recoveries, the falls and the ACK clock named, with BBR's
/// gain cycle where it was read: at [`BBR_CYCLE_MIN_SHARE`] or more it
/// names BBR (high with another of BBR's signs), and against a Reno or
/// CUBIC reading it names nothing.
fn with_gain_cycle(cc: CongestionControl, share: Option<f64>) -> CongestionControl {
    let cc = CongestionControl { gain_cycle_share: share.map(calc::thousandths), ..cc };
    let Some(share) = share.filter(|s| *s >= BBR_CYCLE_MIN_SHARE) else {
        return cc;
    };
    let cycled = format!(
        "the flight rose and fell once every {BBR_CYCLE_ROUNDS} round trips ({:.0}% of its variance at that period, where Reno and CUBIC put 5% or less): BBR's gain cycle, which paces at 1.25, 0.75 and six times 1 of its bandwidth estimate a min_RTT each (tcp_bbr.c)",
        share * 100.0
    );
    // BBR always paces (SK_PACING_NEEDED): a sender whose segments leave
    // as ACKs arrive is not BBR, whatever the flight's period (losses that
    // come once every few round trips, behind a policer, give one too)
    if cc.ack_clocked_share.is_some_and(|c| c >= ACK_CLOCKED_MIN_SHARE) {
        return CongestionControl {
            evidence: format!("{}; the flight's period is not BBR's gain cycle: {cycled}, but the sender does not pace", cc.evidence),
            ..cc
        };
    }
    match cc.name {
        "bbr" => CongestionControl { confidence: Some(Confidence::High), evidence: format!("{}; and {cycled}", cc.evidence), ..cc },
        "unknown" => CongestionControl { name: "bbr", confidence: Some(Confidence::Medium), evidence: format!("{cycled} (the losses alone: {})", cc.evidence), ..cc },
        other => CongestionControl {
            name: "unknown",
            confidence: None,
            evidence: format!("the losses read as {other}'s ({}), but {cycled}: the two disagree", cc.evidence),
            ..cc
        },
    }
}

/// Keeps an event (the first [`MAX_EVENTS`] of a kind; time in capture
/// seconds).
fn event(events: &mut Vec<CcEvent>, t_ns: i64, kind: &'static str, factor: Option<f64>) {
    if events.len() < MAX_EVENTS {
        // to the microsecond and the factor to 0.001: what the plot and the
        // JSON's reader can use
        let factor = factor.map(calc::thousandths);
        events.push(CcEvent { t: calc::s_from_us((t_ns / 1000) as f64), kind, factor });
    }
}

/// The largest average window (segments) a loss-based sender holds at a
/// loss-event rate `p` and an RTT: the larger of Reno's 1.22/sqrt(p)
/// (Mathis et al., CCR 1997; also CUBIC's Reno-friendly region) and
/// CUBIC's (C(3+beta)/(4(1-beta)))^(1/4) RTT^(3/4) / p^(3/4) (RFC 9438
/// section 5.1 and Ha, Rhee and Xu, 2008), C = 0.4, beta = 0.7.
pub fn loss_based_window(p: f64, rtt_s: f64) -> f64 {
    let reno = (1.5 / p).sqrt();
    let (c, beta) = (0.4f64, 0.7f64);
    let cubic = (c * (3.0 + beta) / (4.0 * (1.0 - beta))).powf(0.25) * rtt_s.powf(0.75) / p.powf(0.75);
    reno.max(cubic)
}

/// The window at the losses over the largest a loss-based sender holds at
/// this loss-event rate (its peak: 4/3 of the average, Reno's sawtooth).
fn above_response(befores: &[i64], seen: usize, new_segments: usize, base_ns: i64, smss: u32) -> Option<f64> {
    if befores.len() < HIGH_MIN_RECOVERIES || new_segments == 0 {
        return None;
    }
    let p = seen as f64 / new_segments as f64;
    let mut b = befores.to_vec();
    b.sort_unstable();
    let window = b[b.len() / 2] as f64 / f64::from(smss);
    Some(window / (loss_based_window(p, calc::s_from_ns(base_ns as f64)) * 4.0 / 3.0))
}

/// What the sender's clock says, in the evidence's words.
fn pacing_text(clocked: Option<f64>) -> String {
    match clocked {
        Some(c) if c >= ACK_CLOCKED_MIN_SHARE => format!("; {:.0}% of its segments left as an ACK arrived: it does not pace, so it is not BBR", c * 100.0),
        Some(c) if c <= PACED_MAX_SHARE => format!("; only {:.0}% of its segments left as an ACK arrived: it paces (BBR does; an fq qdisc paces any algorithm)", c * 100.0),
        Some(c) => format!("; {:.0}% of its segments left as an ACK arrived", c * 100.0),
        None => String::new(),
    }
}

/// `unknown`, with the recoveries read and why they name nothing.
fn withheld(evidence: String, decreases: &[f64], seen: usize, clocked: Option<f64>, above: Option<f64>, falls: usize) -> CongestionControl {
    CongestionControl {
        evidence,
        decreases: decreases.iter().map(|b| (b * 100.0).round() / 100.0).collect(),
        above_loss_based: above,
        lossless_falls: falls,
        ..CongestionControl::unknown(String::new(), seen, clocked)
    }
}

fn cuts_text(decreases: &[f64]) -> String {
    decreases.iter().map(|b| format!("{b:.2}")).collect::<Vec<_>>().join(", ")
}

/// Cuts read at the receiver behind a token bucket name nothing: the
/// receiver cannot see whether the sender paces, and behind a bucket BBR's
/// long-term rate model (`bbr_lt_bw_sampling`) takes its pipe down to the
/// policed rate's BDP as far as a loss-based cut: BBR behind a 20 Mbit/s,
/// 100 KB bucket read 0.67 to 0.75 of the window before (10 lab runs,
/// both ends), CUBIC's 0.7, and Reno's halvings are BBR's recoveries too.
fn behind_bucket_at_receiver(decreases: Vec<f64>, seen: usize, clocked: Option<f64>, falls: usize) -> CongestionControl {
    let why = format!(
        "{} of {seen} loss recoveries read from the receiver, the window after them {} of the one before; but the losses are a policer's, and behind one BBR's long-term rate takes its window down as far as Reno's or CUBIC's cut (0.5 to 0.75 in the lab), and the receiver cannot see whether the sender paces; the sender's capture would tell",
        decreases.len(),
        cuts_text(&decreases)
    );
    CongestionControl { above_loss_based: None, ..withheld(why, &decreases, seen, clocked, None, falls) }
}

/// What the sender's ACK clock showed.
#[derive(Clone, Copy)]
struct Sender {
    /// Seen to pace ([`PACED_MAX_SHARE`] or less on ACKs).
    paced: bool,
    /// Seen to send on ACKs ([`ACK_CLOCKED_MIN_SHARE`] or more).
    clocked: bool,
}

/// Why cuts that read as Reno's or CUBIC's name neither, if they do not.
/// Halving is not Reno's alone: BBR cuts its window in a recovery too
/// (packet conservation: the window falls to what is still in flight) and
/// behind a policer takes it down to the policed rate's BDP (its long-term
/// bandwidth model): tcp_bbr.c, `bbr_set_cwnd_to_recover_or_restore` and
/// `bbr_lt_bw_sampling`. A sender seen to pace is BBR's or one under an fq
/// qdisc, so its halvings do not name Reno; nor do fewer than
/// [`HIGH_MIN_RECOVERIES`] of them from a sender not seen to send on ACKs
/// when the losses fit a token bucket, nor any number of them read at the
/// receiver then (it cannot see the sender pace: the policing lab's BBR
/// receivers read 3 to 6 halvings, median 0.5 to 0.56, with `policer`
/// `medium`). And cuts that split evenly between Reno's and CUBIC's side
/// name neither.
#[allow(clippy::too_many_arguments)]
fn reno_or_cubic_withheld(
    name: &str,
    median: Option<f64>,
    agree: usize,
    cuts: usize,
    decreases: &[f64],
    seen: usize,
    sender: Sender,
    bucket: Bucket,
    at_receiver: bool,
    grew_as_reno: bool,
) -> Option<String> {
    if name != "bbr" && sender.paced && (name == "reno" || bucket != Bucket::None) {
        return Some(format!(
            "after {} of {seen} loss recoveries the window was {:.2} of the one before (median), as {}; but the sender paces, and BBR's recovery and its long-term rate behind a policer cut its window as deep (a loss-based sender paces only under an fq qdisc); cuts: {}",
            decreases.len(),
            median.unwrap_or(0.0),
            if name == "reno" { "Reno halves it" } else { "CUBIC keeps 0.7 of it" },
            cuts_text(decreases)
        ));
    }
    if name != "bbr" && bucket != Bucket::None && at_receiver {
        return Some(format!(
            "{} of {seen} loss recoveries read from the receiver, the window after them {} of the one before, as {name} cuts it; but the losses fit a token bucket, behind which BBR takes its window down to the policed rate's BDP as deep, and the receiver cannot see whether the sender paces; the sender's capture would tell",
            decreases.len(),
            cuts_text(decreases)
        ));
    }
    if name != "bbr" && bucket != Bucket::None && !sender.clocked && cuts < HIGH_MIN_RECOVERIES {
        return Some(format!(
            "{} of {seen} loss recoveries read, the window after them {} of the one before, as {name} cuts it; but the losses fit a token bucket, behind which BBR takes its window down to the policed rate's BDP as deep; {HIGH_MIN_RECOVERIES} recoveries or the sender's capture (BBR paces) would tell",
            decreases.len(),
            cuts_text(decreases)
        ));
    }
    let at_half = at_factor(decreases, RENO_BETA);
    if name == "reno" && at_half * 2 <= decreases.len() && !grew_as_reno {
        return Some(format!(
            "{} of {seen} loss recoveries read, the window after them {} of the one before: below CUBIC's 0.7, but most not at Reno's 0.5 either; behind a token bucket a loss-based sender's cuts read deeper than its factor (the bucket's bursts of loss, cuts in a row), so only cuts at a factor name one (another limit, a send buffer or the application, holds the flight below the window the same way)",
            decreases.len(),
            cuts_text(decreases)
        ));
    }
    if name != "bbr" && agree * 2 <= cuts {
        return Some(format!(
            "{} of {seen} loss recoveries read, the window after them {} of the one before: as many at Reno's half as at CUBIC's 0.7, which names neither",
            decreases.len(),
            cuts_text(decreases)
        ));
    }
    None
}

/// What the window's growth after the recoveries says: the algorithm every
/// reading that fits one names (none if they differ, or none fits).
fn grown_as(growth: &[CcGrowth]) -> Option<(&'static str, &CcGrowth)> {
    let mut named = growth.iter().filter(|g| matches!(g.fits, "reno" | "cubic"));
    let first = named.next()?;
    named.all(|g| g.fits == first.fits).then_some((first.fits, first))
}

/// Where slow start ended without a loss: the first round trip (counted
/// as in [`growth`]) whose window did not grow [`SLOW_START_GROWTH`] times
/// the one before, after [`SLOW_START_MIN_ROUNDS`] that did: (index of
/// its first segment, its window). HyStart ends CUBIC's slow start so
/// (Linux's `tcp_cubic.c`, on the RTT's rise or the ACK train's length);
/// Reno's ends only at a loss or a cached ssthresh.
fn slow_start_exit(r: &DirRecords, flight: &[Option<i64>]) -> Option<(usize, i64)> {
    let data = &r.data;
    let mut round = Rounds::starting(0, data.first()?);
    let (mut prev, mut doubled) = (0i64, 0usize);
    for (k, d) in data.iter().enumerate() {
        let Some(f) = flight[k] else { continue };
        let Some(ended) = round.take(k, d, f) else { continue };
        if prev > 0 && (ended.max as f64) >= SLOW_START_GROWTH * prev as f64 {
            doubled += 1;
        } else if doubled >= SLOW_START_MIN_ROUNDS {
            return Some((ended.first, ended.max));
        } else if prev > 0 {
            return None;
        }
        prev = ended.max;
    }
    None
}

fn debug_cc() -> bool {
    std::env::var_os("TCPWHY_DEBUG_CC").is_some()
}

/// The growth in the evidence's words.
fn growth_text(g: &CcGrowth) -> String {
    format!(
        "then the window grew {:.0} segments in {} round trips ({:.1} s), where Reno grows {:.0} (one a round trip) and CUBIC {:.0} (its cubic curve from that cut)",
        g.segments, g.rounds, g.seconds, g.reno_segments, g.cubic_segments
    )
}

/// The name from the decreases read (and the recoveries seen, the window
/// at the losses over the loss-based bound, what the window's growth
/// after them fits).
#[allow(clippy::too_many_arguments)]
fn name_from_cuts(
    decreases: Vec<f64>,
    seen: usize,
    clocked: Option<f64>,
    above: Option<f64>,
    falls: usize,
    bucket: Bucket,
    at_receiver: bool,
    grew: Option<(&'static str, &CcGrowth)>,
) -> CongestionControl {
    let policed = bucket.reads_cuts_behind();
    let paced = pacing_text(clocked);
    let clocked_sender = clocked.is_some_and(|c| c >= ACK_CLOCKED_MIN_SHARE);
    let paced_sender = clocked.is_some_and(|c| c <= PACED_MAX_SHARE);
    if policed && at_receiver {
        return behind_bucket_at_receiver(decreases, seen, clocked, falls);
    }
    if decreases.is_empty() {
        return without_a_cut(seen, clocked, falls, grew);
    }
    // A sender that sends on ACKs does not pace, so it is not BBR: an
    // uncut recovery is then a misreading. A paced one may be.
    // A loss-based algorithm cuts at every recovery; BBR keeps its window.
    let uncut = if clocked_sender { 0 } else { decreases.iter().filter(|&&b| (CUBIC_BBR_SPLIT..=HIGHEST_RECOVERY_READING).contains(&b)).count() };
    let uncut_share = uncut as f64 / decreases.len() as f64;
    // The cuts that vote for an algorithm's factor: none deeper than one
    // loss response makes (another limit set the window after those).
    let mut cut: Vec<f64> = decreases.iter().copied().filter(|&b| a_loss_cut(b)).collect();
    cut.sort_by(f64::total_cmp);
    let at_cubic = at_factor(&decreases, CUBIC_BETA);
    let cubic_factor = decreases.len() >= HIGH_MIN_RECOVERIES && at_cubic as f64 >= HIGH_AGREEMENT * decreases.len() as f64;
    let beyond_loss_based = !clocked_sender && !cubic_factor && above.is_some_and(|a| a >= RESPONSE_MARGIN);
    // The window beyond the loss-based bound says BBR only when the
    // losses set it; a recovery that cut it each time says they did not
    // (a buffer, the application or a link held it, losses were rare, and
    // the cuts are what the holding limit left), unless the sender is
    // seen to pace (BBR behind a policer cuts to the policed rate, its
    // long-term model): nothing is named then.
    if beyond_loss_based && uncut == 0 && decreases.len() >= HIGH_MIN_RECOVERIES && !paced_sender {
        let why = format!(
            "at its losses the window was {:.1} times the largest a loss-based sender holds at this loss rate, but all {} readable recoveries ({seen} in all) cut it, which BBR does not: something other than the losses held the window, and the cuts ({}) are not one algorithm's factor{paced}",
            above.unwrap_or(0.0),
            decreases.len(),
            cuts_text(&decreases)
        );
        return CongestionControl { lossless_falls: 0, ..withheld(why, &decreases, seen, clocked, above, falls) };
    }
    // BBR's window falls without a loss response too: its drain after
    // startup, the 0.75 phase of its gain cycle. One cut alone names Reno
    // or CUBIC only for a sender seen to send on ACKs (so not BBR).
    if decreases.len() == 1 && !clocked_sender && uncut == 0 {
        return one_cut(decreases, seen, clocked, grew);
    }
    // One uncut recovery: a misreading of a loss-based sender, or BBR. It
    // names BBR only from a sender seen to pace.
    if !beyond_loss_based && uncut_share >= BBR_UNCUT_MIN_SHARE && uncut < 2 && !paced_sender {
        return CongestionControl {
            evidence: format!(
                "{} of {seen} loss recoveries read; the one not cut is too little to name BBR, and too much for Reno or CUBIC{paced}",
                decreases.len()
            ),
            decreases,
            above_loss_based: above,
            ..CongestionControl::unknown(String::new(), seen, clocked)
        };
    }
    let bbr = beyond_loss_based || uncut_share >= BBR_UNCUT_MIN_SHARE;
    if !bbr && cut.is_empty() {
        let why = format!(
            "{} of {seen} loss recoveries read, the window after them {} of the one before: deeper than one loss response cuts (Reno halves it), so another limit set the window after them{paced}",
            decreases.len(),
            cuts_text(&decreases)
        );
        return withheld(why, &decreases, seen, clocked, above, falls);
    }
    let (name, agree, median) = if bbr {
        ("bbr", uncut, None)
    } else {
        let n = cut.len();
        let median = if n % 2 == 1 { cut[n / 2] } else { (cut[n / 2 - 1] + cut[n / 2]) / 2.0 };
        let name = if median < RENO_CUBIC_SPLIT { "reno" } else { "cubic" };
        let agree = cut.iter().filter(|&&b| (b < RENO_CUBIC_SPLIT) == (name == "reno")).count();
        (name, agree, Some(median))
    };
    let sender = Sender { paced: paced_sender, clocked: clocked_sender };
    let grew_as_reno = grew.is_some_and(|(g, _)| g == "reno");
    if let Some(why) = reno_or_cubic_withheld(name, median, agree, cut.len(), &decreases, seen, sender, bucket, at_receiver, grew_as_reno) {
        return withheld(format!("{why}{paced}"), &decreases, seen, clocked, above, falls);
    }
    let votes = Votes { name, uncut, agree, median, beyond_loss_based };
    let confidence = votes.confidence(&decreases, paced_sender);
    let evidence = votes.evidence(&decreases, seen, above, grew, &paced);
    let decreases = decreases.iter().map(|b| (b * 100.0).round() / 100.0).collect();
    CongestionControl {
        name,
        confidence: Some(confidence),
        evidence,
        decreases,
        recoveries: seen,
        ack_clocked_share: clocked,
        above_loss_based: above,
        lossless_falls: falls,
        events: Vec::new(),
        growth: Vec::new(),
        gain_cycle_share: None,
        policed,
        at_receiver,
    }
}

/// The name the recoveries voted for: how many left the window uncut
/// (BBR's), how many agree with the name's factor and their median (Reno's
/// or CUBIC's), and whether the window at the losses was beyond the
/// loss-based bound.
struct Votes {
    name: &'static str,
    uncut: usize,
    agree: usize,
    median: Option<f64>,
    beyond_loss_based: bool,
}

impl Votes {
    fn confidence(&self, decreases: &[f64], paced_sender: bool) -> Confidence {
        let (name, agree) = (self.name, self.agree);
        // BBR: every uncut recovery is one a loss-based sender could not show.
        if name == "bbr" {
            match self.uncut {
                _ if self.beyond_loss_based => Confidence::High,
                n if n >= HIGH_MIN_RECOVERIES => Confidence::High,
                2 => Confidence::Medium,
                // One uncut recovery from a sender that paces.
                _ if paced_sender => Confidence::Medium,
                _ => Confidence::Low,
            }
        } else if name == "reno" && at_factor(decreases, RENO_BETA) * 2 <= decreases.len() {
            // named from the growth, the cuts off Reno's factor
            Confidence::Medium
        } else if decreases.len() >= HIGH_MIN_RECOVERIES && agree as f64 >= HIGH_AGREEMENT * decreases.len() as f64 {
            Confidence::High
        } else if agree * 2 > decreases.len() {
            Confidence::Medium
        } else {
            Confidence::Low
        }
    }

    fn evidence(&self, decreases: &[f64], seen: usize, above: Option<f64>, grew: Option<(&'static str, &CcGrowth)>, paced: &str) -> String {
        let (name, uncut, agree) = (self.name, self.uncut, self.agree);
        match self.median {
            None if self.beyond_loss_based => format!(
                "at its losses the window was {:.1} times the largest a loss-based sender holds at this loss rate (Mathis; RFC 9438), and {uncut} of {} readable recoveries left it uncut: BBR does not cut its window for a loss{paced}",
                above.unwrap_or(0.0),
                decreases.len()
            ),
            None => format!(
                "after {uncut} of {} readable loss recoveries ({seen} in all) the window was not cut (0.85 of the one before or more): BBR does not cut its window for a loss, Reno and CUBIC always do{paced}",
                decreases.len()
            ),
            Some(m) => format!(
                "after {} of {seen} loss recoveries the window was {m:.2} of the one before (median; {agree} of them agree): {}{}{paced}",
                decreases.len(),
                if name == "reno" { "Reno halves its window (RFC 5681)" } else { "CUBIC keeps 0.7 of it (RFC 9438)" },
                grew.filter(|(g, _)| *g == name).map(|(_, g)| format!("; {}", growth_text(g))).unwrap_or_default(),
            ),
        }
    }
}

/// No recovery read: BBR from a fall without a loss, CUBIC from its growth
/// after a slow start that ended without one, or `unknown`.
fn without_a_cut(seen: usize, clocked: Option<f64>, falls: usize, grew: Option<(&'static str, &CcGrowth)>) -> CongestionControl {
    let paced = pacing_text(clocked);
    let clocked_sender = clocked.is_some_and(|c| c >= ACK_CLOCKED_MIN_SHARE);
    let paced_sender = clocked.is_some_and(|c| c <= PACED_MAX_SHARE);
    if falls > 0 && !clocked_sender {
        // No loss response to read, but a fall no loss-based sender makes.
        return CongestionControl {
            name: "bbr",
            confidence: Some(if paced_sender || falls >= 2 { Confidence::High } else { Confidence::Medium }),
            evidence: format!(
                "the window fell to half its peak or less {falls} time(s) with no loss, while the network held the sender: BBR drains its queue after startup and probes the RTT at 4 packets; Reno and CUBIC lower the window only for a loss{paced}"
            ),
            lossless_falls: falls,
            ..CongestionControl::unknown(String::new(), seen, clocked)
        };
    }
    if seen == 0 && falls == 0 && !paced_sender {
        // No loss, but a slow start that ended without one and a window
        // that then grew as only CUBIC's grows (HyStart's exit, then its
        // curve or 5% a round trip); Reno leaves slow start only at a loss
        // or a cached ssthresh, and grows one segment a round trip after.
        if let Some((name @ "cubic", g)) = grew {
            return CongestionControl {
                name,
                confidence: Some(Confidence::Medium),
                evidence: format!(
                    "no loss recovery; slow start ended without a loss (HyStart's exit), and in the {} round trips ({:.1} s) after it the window grew {:.0} segments, where Reno grows {:.0} (one a round trip) and CUBIC {:.0} (before its first loss: its curve from there, or 5% a round trip){paced}",
                    g.rounds, g.seconds, g.segments, g.reno_segments, g.cubic_segments
                ),
                lossless_falls: falls,
                ..CongestionControl::unknown(String::new(), seen, clocked)
            };
        }
    }
    let why = if seen == 0 {
        "no loss recovery: the capture shows no cut of the window to read".to_string()
    } else {
        format!("{seen} loss recoveries, none readable (timeouts, spurious retransmissions, a small window or the receiver's window held the flight)")
    };
    CongestionControl { lossless_falls: falls, ..CongestionControl::unknown(format!("{why}{paced}"), seen, clocked) }
}

/// One recovery read, cut: BBR's drain and gain cycle take its window as
/// far down without a loss response, so it names Reno or CUBIC only with
/// the window's growth after it on the same side.
fn one_cut(decreases: Vec<f64>, seen: usize, clocked: Option<f64>, grew: Option<(&'static str, &CcGrowth)>) -> CongestionControl {
    let paced = pacing_text(clocked);
    let paced_sender = clocked.is_some_and(|c| c <= PACED_MAX_SHARE);
    // The window grew as one loss-based algorithm's grows and the other's
    // cannot, from a cut on that algorithm's side.
    let side = if decreases[0] < RENO_CUBIC_SPLIT { "reno" } else { "cubic" };
    if let Some((name, g)) = grew.filter(|(name, _)| *name == side && !paced_sender) {
        return CongestionControl {
            name,
            confidence: Some(Confidence::Medium),
            evidence: format!(
                "one loss recovery read ({seen} in all), the window after it {:.2} of the one before; {}{paced}",
                decreases[0],
                growth_text(g)
            ),
            decreases,
            ..CongestionControl::unknown(String::new(), seen, clocked)
        };
    }
    CongestionControl {
        evidence: format!(
            "one loss recovery read ({seen} in all), the window after it {:.2} of the one before: BBR's drain and gain cycle take its window down as far without a loss response; a second recovery, the window's growth after it, or the sender's capture, would tell{paced}",
            decreases[0]
        ),
        decreases,
        ..CongestionControl::unknown(String::new(), seen, clocked)
    }
}

/// A direction diagnosed in parts (crate::parts): the recoveries of all
/// parts together, read against the whole direction's verdict (`bucket`).
pub fn merge<'a>(parts: impl Iterator<Item = &'a CongestionControl>, bucket: Bucket) -> CongestionControl {
    let (mut decreases, mut seen, mut clocked, mut above, mut falls) = (Vec::new(), 0, None::<f64>, Vec::new(), 0);
    let mut events = Vec::new();
    let mut at_receiver = false;
    let mut growth = Vec::new();
    let mut cycles = Vec::new();
    for p in parts {
        at_receiver |= p.at_receiver;
        cycles.extend(p.gain_cycle_share);
        growth.extend(p.growth.iter().take(MAX_EVENTS - growth.len()));
        falls += p.lossless_falls;
        events.extend(p.events.iter().take(MAX_EVENTS - events.len()));
        decreases.extend_from_slice(&p.decreases);
        seen += p.recoveries;
        clocked = clocked.or(p.ack_clocked_share);
        above.extend(p.above_loss_based);
    }
    above.sort_by(f64::total_cmp);
    let policed = bucket.reads_cuts_behind();
    cycles.sort_by(f64::total_cmp);
    let cc = name_from_cuts(decreases, seen, clocked, above.get(above.len() / 2).copied(), falls, bucket, at_receiver, grown_as(&growth));
    let cc = with_gain_cycle(cc, cycles.get(cycles.len() / 2).copied());
    CongestionControl { events, growth, policed, at_receiver, ..cc }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::AckRec;

    const MS: i64 = 1_000_000;
    const SEG: i64 = 1448;

    fn name_from(decreases: Vec<f64>, seen: usize, clocked: Option<f64>, above: Option<f64>, falls: usize, policed: bool, at_receiver: bool) -> CongestionControl {
        name_from_cuts(decreases, seen, clocked, above, falls, if policed { Bucket::Policed } else { Bucket::None }, at_receiver, None)
    }

    /// The name with these growth readings.
    #[allow(clippy::too_many_arguments)]
    fn name_read(decreases: Vec<f64>, seen: usize, clocked: Option<f64>, above: Option<f64>, falls: usize, policed: bool, at_receiver: bool, growth: Vec<CcGrowth>) -> CongestionControl {
        name_from_cuts(decreases, seen, clocked, above, falls, if policed { Bucket::Policed } else { Bucket::None }, at_receiver, grown_as(&growth))
    }

    /// Ten segments per 100 ms round trip, each sent with the given flight
    /// (segments); `retx` marks a round trip that retransmitted.
    fn records(flights: &[i64], retx: Option<usize>, window: u32) -> (DirRecords, Vec<Option<i64>>) {
        let mut r = DirRecords::default();
        let mut fl = Vec::new();
        let mut seq = 0;
        for (k, f) in flights.iter().enumerate() {
            for i in 0..10 {
                let mut flags = Flags::default();
                if retx == Some(k) && i == 0 {
                    flags.set(Flags::RETRANSMISSION);
                }
                r.data.push(DataRec { t_ns: k as i64 * 100 * MS + i * 5 * MS, seq, frame: 0, len: SEG as u32, in_flight: 0, flags, tsecr: 0 });
                fl.push((!flags.has(Flags::RETRANSMISSION)).then_some(f * SEG));
                seq += SEG;
            }
            r.acks.push(AckRec { t_ns: k as i64 * 100 * MS + 50 * MS, ack: seq - f * SEG, frame: 0, window, rtt_us: 0, payload: 0, flags: Flags::default(), tsval: 0 });
        }
        (r, fl)
    }

    #[test]
    fn a_window_that_halves_without_a_loss_is_a_fall_and_one_after_a_loss_is_not() {
        let flights = [20, 40, 60, 60, 60, 25, 30, 30];
        let (r, fl) = records(&flights, None, 1 << 24);
        assert_eq!(lossless_falls(&r, &fl, &vec![0; fl.len()], 100 * MS, SEG as u32, &mut Vec::new()), 1);
        // a retransmission the round trip before: a loss response
        let (r, fl) = records(&flights, Some(4), 1 << 24);
        assert_eq!(lossless_falls(&r, &fl, &vec![0; fl.len()], 100 * MS, SEG as u32, &mut Vec::new()), 0);
        // the receiver's window closed down to the flight: its fall, not the sender's
        let (r, fl) = records(&flights, None, (40 * SEG) as u32);
        assert_eq!(lossless_falls(&r, &fl, &vec![0; fl.len()], 100 * MS, SEG as u32, &mut Vec::new()), 0);
        // a dip to 0.75 (BBR's gain cycle, or noise) is no fall
        let (r, fl) = records(&[20, 40, 60, 60, 45, 60, 60, 60], None, 1 << 24);
        assert_eq!(lossless_falls(&r, &fl, &vec![0; fl.len()], 100 * MS, SEG as u32, &mut Vec::new()), 0);
    }

    #[test]
    fn a_window_is_read_from_the_pipe_not_from_bytes_sacked_above_a_hole() {
        // 40 segments a round trip; a loss repaired in round 4; from round
        // 5 on half of what is out was SACKed above a later hole: the
        // window was halved (the pipe), the flight did not fall.
        let read = |sacked_after: bool| {
            let (mut r, fl) = records(&[40; 10], Some(4), 1 << 24);
            for (d, f) in r.data.iter_mut().zip(&fl) {
                let f = f.unwrap_or(d.len as i64);
                let held = if sacked_after && d.t_ns >= 500 * MS { f / 2 } else { 0 };
                d.in_flight = (f - held) as u32;
            }
            let (flight, sacked) = flights(&r, true);
            recoveries(&r, &flight, &sacked, 100 * MS, SEG as u32, false, &mut Vec::new()).0
        };
        let cut = read(true);
        assert_eq!(cut.len(), 1, "{cut:?}");
        assert!((cut[0] - 0.5).abs() < 0.1, "{cut:?}");
        let uncut = read(false);
        assert!(uncut[0] > 0.9, "{uncut:?}");
    }

    #[test]
    fn the_window_after_a_recovery_is_read_at_the_top_of_each_acks_burst() {
        // 40 segments a round trip, a loss repaired in round 4; the ACK
        // that ends the recovery covers all that was out, and the sender
        // answers it with one burst of 20 segments (Reno's half): the
        // flight climbs from 1 to 20 segments, and the window is the top.
        let (mut r, mut fl) = records(&[40; 5], Some(4), 1 << 24);
        let mut seq = r.data.last().map_or(0, |d| d.end());
        r.acks.push(AckRec { t_ns: 500 * MS, ack: seq, frame: 0, window: 1 << 24, rtt_us: 0, payload: 0, flags: Flags::default(), tsval: 0 });
        for i in 0..20 {
            r.data.push(DataRec { t_ns: 501 * MS + i * MS / 10, seq, frame: 0, len: SEG as u32, in_flight: 0, flags: Flags::default(), tsecr: 0 });
            fl.push(Some((i + 1) * SEG));
            seq += SEG;
        }
        let cut = recoveries(&r, &fl, &vec![0; fl.len()], 100 * MS, SEG as u32, false, &mut Vec::new()).0;
        assert_eq!(cut, [0.5]);
    }

    #[test]
    fn a_fall_names_bbr_only_without_a_recovery_and_not_for_a_sender_on_acks() {
        assert_eq!(name_from(vec![], 0, None, None, 1, false, false).name, "bbr");
        assert_eq!(name_from(vec![], 0, Some(0.4), None, 1, false, false).confidence, Some(Confidence::High));
        assert_eq!(name_from(vec![], 0, Some(0.99), None, 1, false, false).name, "unknown");
        assert_eq!(name_from(vec![0.7, 0.7], 2, None, None, 1, false, false).name, "cubic");
        // CUBIC's 0.7 at every recovery outweighs a window beyond the loss-based bound
        assert_eq!(name_from(vec![0.69, 0.7, 0.71, 0.3], 4, None, Some(2.9), 0, false, false).name, "cubic");
        assert_eq!(name_from(vec![0.45, 0.5, 0.9, 0.6], 4, None, Some(2.9), 0, false, false).name, "bbr");
        // beyond the bound, but every recovery cut: another limit held the
        // window (a send buffer seen from the receiver read 5.2 times the
        // bound, cuts of 0.11, 0.14, 0.62); a pacing sender is still BBR
        // (its long-term model cuts to a policer's rate)
        assert_eq!(name_from(vec![0.11, 0.14, 0.62], 3, None, Some(5.2), 0, false, false).name, "unknown");
        assert_eq!(name_from(vec![0.22, 0.43, 0.5, 0.5], 4, Some(0.03), Some(5.2), 0, false, false).name, "bbr");
    }

    #[test]
    fn halvings_name_reno_only_where_bbr_cannot_have_made_them() {
        // measured: BBR behind a 20 Mbit/s policer at 80 ms, two recoveries
        // read at 0.43 and 0.44, its sender pacing (4% on ACKs)
        let sender = |d: Vec<f64>, clocked, policed| name_from(d, 8, Some(clocked), None, 0, policed, false).name;
        assert_eq!(sender(vec![0.43, 0.44], 0.04, false), "unknown");
        assert_eq!(sender(vec![0.43, 0.44, 0.45, 0.5], 0.04, false), "unknown");
        // a sender seen on ACKs still names Reno, behind a bucket or not
        assert_eq!(sender(vec![0.5, 0.5], 0.97, true), "reno");
        // behind a bucket BBR's long-term rate reads as CUBIC's 0.7 too
        // (0.67 to 0.75 from the pipe, 10 lab runs): a pacing sender's
        // 0.7 names nothing there, and CUBIC elsewhere
        assert_eq!(sender(vec![0.7, 0.69], 0.04, true), "unknown");
        assert_eq!(sender(vec![0.7, 0.69], 0.04, false), "cubic");
        // a sender whose clock could not be read, behind a bucket: two
        // halvings are too few, three name Reno
        let unread = |d: Vec<f64>, policed| name_from(d, 8, None, None, 0, policed, false).name;
        assert_eq!(unread(vec![0.43, 0.44], true), "unknown");
        assert_eq!(unread(vec![0.49, 0.5, 0.5], true), "reno");
        assert_eq!(unread(vec![0.5, 0.5], false), "reno");
        // measured at the receiver, BBR behind a 20 Mbit/s bucket read as
        // `policer` `medium` (Bucket::Fits): six recoveries, median 0.56;
        // from the pipe two such runs read 0.5, 0.72, 0.72, as CUBIC's
        // 0.7: nothing names it there; without a bucket halvings name Reno
        let fits = |d: Vec<f64>, bucket| name_from_cuts(d, 21, None, None, 0, bucket, true, None).name;
        assert_eq!(fits(vec![0.62, 0.51, 0.55, 0.57, 0.47, 0.95], Bucket::Fits), "unknown");
        assert_eq!(fits(vec![0.5, 0.49, 0.51, 0.52], Bucket::Fits), "unknown");
        assert_eq!(fits(vec![0.7, 0.69, 0.71], Bucket::Fits), "unknown");
        assert_eq!(fits(vec![0.7, 0.69, 0.71], Bucket::None), "cubic");
        assert_eq!(fits(vec![0.5, 0.49, 0.51], Bucket::None), "reno");
    }

    #[test]
    fn behind_a_bucket_neither_the_receiver_nor_a_pacing_sender_names_a_loss_based_algorithm() {
        // measured at the receiver behind a 20 Mbit/s bucket: Reno read
        // 0.34, 0.47, 0.88, 0.87 and CUBIC 0.94, 1.07, 0.70 x3 (the bucket
        // caps the arrivals before and after a cut), and BBR halved: the
        // uncut readings name nothing, halvings name nothing
        let receiver = |d: Vec<f64>| name_from(d, 8, None, Some(1.1), 0, true, true).name;
        assert_eq!(receiver(vec![0.34, 0.47, 0.88, 0.87]), "unknown");
        assert_eq!(receiver(vec![0.46, 0.47, 0.5, 0.52, 0.53]), "unknown");
        // and, with the window read from the pipe, BBR's long-term rate
        // read 0.67 to 0.75 there as CUBIC's cut does: 0.7 names nothing
        assert_eq!(receiver(vec![0.94, 1.07, 0.7, 0.7, 0.7]), "unknown");
        assert_eq!(receiver(vec![0.5, 0.72, 0.72]), "unknown");
        // nor from a sender seen to pace (BBR, or fq); one on ACKs is named
        let sender = |d: Vec<f64>, clocked: f64| name_from(d, 8, Some(clocked), None, 0, true, false).name;
        assert_eq!(sender(vec![0.5, 0.72, 0.72, 0.7], 0.04), "unknown");
        assert_eq!(sender(vec![0.5, 0.72, 0.72, 0.7], 0.99), "cubic");
        // without a bucket the receiver's readings stand
        assert_eq!(name_from(vec![0.46, 0.47, 0.5, 0.52, 0.53], 8, None, None, 0, false, true).name, "reno");
    }

    #[test]
    fn cuts_deeper_than_one_loss_response_vote_for_no_factor() {
        // measured: a CUBIC sender's send buffer seen from the receiver
        let n = |d: Vec<f64>, clocked| name_from(d, 3, clocked, None, 0, false, true).name;
        assert_eq!(n(vec![0.09, 0.24], None), "unknown");
        assert_eq!(n(vec![0.09, 0.24], Some(0.99)), "unknown");
        // the deep one is left out of the median: 0.7s name CUBIC
        assert_eq!(n(vec![0.1, 0.7, 0.69], Some(0.99)), "cubic");
    }

    #[test]
    fn cuts_split_between_reno_and_cubic_name_neither() {
        // measured: CUBIC behind a policer at 80 ms read 0.50 then 0.70
        assert_eq!(name_from(vec![0.5, 0.7], 3, Some(0.97), None, 0, false, false).name, "unknown");
        assert_eq!(name_from(vec![0.5, 0.5, 0.7, 0.7], 4, Some(0.97), None, 0, false, false).name, "unknown");
        assert_eq!(name_from(vec![0.5, 0.5, 0.7], 3, Some(0.97), None, 0, false, false).name, "reno");
    }

    /// Readings of the CUBIC senders of the public policing captures
    /// (Flach et al.; all CUBIC), which were named `bbr` and `reno` `high`.
    #[test]
    fn behind_a_bucket_only_readings_at_a_factor_name_an_algorithm() {
        // readings above 1.25 are no loss response: no uncut vote for BBR
        let n = name_from(vec![2.86, 0.01, 1.29, 0.7], 9, None, None, 0, true, false);
        assert_ne!(n.name, "bbr", "{}", n.evidence);
        // cuts at 0.36 behind a policer: deeper than CUBIC's, not at Reno's half
        let deep = [vec![0.8, 0.7], vec![0.36; 20], vec![0.4, 0.45]].concat();
        assert_eq!(name_from(deep.clone(), 30, None, None, 0, true, false).name, "unknown");
        // nor with no bucket (a send buffer holding the flight reads so too)
        assert_eq!(name_from(deep, 30, None, None, 0, false, false).name, "unknown");
        // the lab's Reno behind a policer: at 0.5
        let reno = [vec![0.26], vec![0.49; 14], vec![0.51]].concat();
        assert_eq!(name_from(reno, 16, None, None, 0, true, false).name, "reno");
        // the receiver behind a bucket: neither a spread nor most at 0.7
        let bbr_spread = vec![0.45, 0.55, 0.62, 0.64, 0.66, 0.78, 0.8, 0.9, 1.0];
        assert_eq!(name_from(bbr_spread, 12, None, None, 0, true, true).name, "unknown");
        let cubic = vec![0.45, 0.47, 0.63, 0.66, 0.67, 0.67, 0.68, 0.69, 0.71];
        assert_eq!(name_from(cubic, 12, None, None, 0, true, true).name, "unknown");
    }

    #[test]
    fn cuts_are_read_as_behind_a_bucket_only_behind_a_policer_held_high() {
        use tcpwhy_core::Cause;
        let fits = Bucket::of(Cause::Policer, Confidence::Medium);
        assert_eq!(fits, Bucket::Fits);
        assert!(!fits.reads_cuts_behind());
        assert!(Bucket::of(Cause::Policer, Confidence::High).reads_cuts_behind());
        assert!(!Bucket::of(Cause::Shaper, Confidence::High).reads_cuts_behind());
    }

    /// A sender whose window (segments) is `cwnd(t)`, t in seconds from the
    /// start, on a 100 ms path: each ACK releases what the window allows.
    fn window_over_time(cwnd: impl Fn(f64) -> f64, seconds: f64) -> (DirRecords, Vec<Option<i64>>) {
        let rtt = 100 * MS;
        let mut r = DirRecords::default();
        let mut fl = Vec::new();
        let w0 = cwnd(0.0) as i64;
        // the first window goes out at once
        let mut sent: Vec<i64> = (0..w0).map(|_| 0).collect();
        for i in 0..w0 {
            r.data.push(DataRec { t_ns: 0, seq: i * SEG, frame: 0, len: SEG as u32, in_flight: 0, flags: Flags::default(), tsecr: 0 });
            fl.push(Some((i + 1) * SEG));
        }
        let mut acked = 0usize;
        while acked < sent.len() && (sent[acked] + rtt) as f64 / 1e9 < seconds {
            let t = sent[acked] + rtt;
            acked += 1;
            r.acks.push(AckRec { t_ns: t, ack: acked as i64 * SEG, frame: 0, window: 1 << 30, rtt_us: 0, payload: 0, flags: Flags::default(), tsval: 0 });
            while ((sent.len() - acked) as f64) < cwnd(t as f64 / 1e9).floor() {
                let n = sent.len() as i64;
                r.data.push(DataRec { t_ns: t, seq: n * SEG, frame: 0, len: SEG as u32, in_flight: 0, flags: Flags::default(), tsecr: 0 });
                fl.push(Some((n + 1 - acked as i64) * SEG));
                sent.push(t);
            }
        }
        (r, fl)
    }

    #[test]
    fn a_flight_that_rises_once_every_8_round_trips_is_bbrs_gain_cycle() {
        let share = |cwnd: &dyn Fn(f64) -> f64| {
            let (r, fl) = window_over_time(cwnd, 8.0);
            gain_cycle(&r, &fl, &vec![0; fl.len()], 100 * MS, 0).unwrap()
        };
        // BBR: a quarter more in one round trip of eight
        let bbr = share(&|t: f64| if (t / 0.1).floor() as i64 % 8 == 0 { 125.0 } else { 100.0 });
        assert!(bbr >= BBR_CYCLE_MIN_SHARE, "{bbr}");
        // Reno's sawtooth: one segment a round trip from 60 to 120
        let reno = share(&|t: f64| 60.0 + (t / 0.1) % 60.0);
        assert!(reno < BBR_CYCLE_MIN_SHARE / 4.0, "{reno}");
        // CUBIC's: from 0.7 of W_max back to it along its curve, cut every 3 s
        let cubic = share(&|t: f64| {
            let k = (100.0 * (1.0 - CUBIC_BETA) / CUBIC_C).cbrt();
            (CUBIC_C * ((t % 3.0) - k).powi(3) + 100.0).max(70.0)
        });
        assert!(cubic < BBR_CYCLE_MIN_SHARE / 4.0, "{cubic}");
        // too short to read
        let (r, fl) = window_over_time(|t: f64| if (t / 0.1).floor() as i64 % 8 == 0 { 125.0 } else { 100.0 }, 3.0);
        assert_eq!(gain_cycle(&r, &fl, &vec![0; fl.len()], 100 * MS, 0), None);
    }

    #[test]
    fn the_growth_after_a_cut_tells_reno_from_cubic() {
        let w0 = 500.0;
        let idle = RTO_MIN_NS;
        // Reno: one segment per round trip.
        let (r, fl) = window_over_time(|t| w0 + t / 0.1, 3.0);
        let g = growth(&r, &fl, 0, (w0 as i64) * SEG, SEG as u32, idle, Some((1.0 / CUBIC_BETA, 1.0 / CUBIC_BETA))).unwrap();
        assert_eq!(g.fits, "reno", "{g:?}");
        assert!((g.segments - g.reno_segments).abs() <= 2.0, "{g:?}");
        // CUBIC from a cut to 0.7: W_max = w0 / 0.7.
        let k = ((w0 / CUBIC_BETA - w0) / CUBIC_C).cbrt();
        let (r, fl) = window_over_time(|t| w0 + CUBIC_C * ((t - k).powi(3) + k.powi(3)), 3.0);
        let g = growth(&r, &fl, 0, (w0 as i64) * SEG, SEG as u32, idle, Some((1.0 / CUBIC_BETA, 1.0 / CUBIC_BETA))).unwrap();
        assert_eq!(g.fits, "cubic", "{g:?}");
        // A window that holds (BBR's, or one held elsewhere) fits neither.
        let (r, fl) = window_over_time(|_| w0, 3.0);
        let g = growth(&r, &fl, 0, (w0 as i64) * SEG, SEG as u32, idle, Some((1.0 / CUBIC_BETA, 1.0 / CUBIC_BETA))).unwrap();
        assert_eq!(g.fits, "neither", "{g:?}");
        // A small window: CUBIC's Reno-friendly growth is near Reno's, so
        // the growth tells nothing.
        let (r, fl) = window_over_time(|t| 30.0 + t / 0.1, 3.0);
        let g = growth(&r, &fl, 0, 30 * SEG, SEG as u32, idle, Some((1.0 / CUBIC_BETA, 1.0 / CUBIC_BETA))).unwrap();
        assert_eq!(g.fits, "either", "{g:?}");
        // Too few round trips: not read.
        let (r, fl) = window_over_time(|t| w0 + t / 0.1, 0.8);
        assert!(growth(&r, &fl, 0, (w0 as i64) * SEG, SEG as u32, idle, Some((1.0 / CUBIC_BETA, 1.0 / CUBIC_BETA))).is_none());
    }

    #[test]
    fn a_slow_start_that_ends_without_a_loss_then_grows_as_cubic_names_it() {
        let idle = RTO_MIN_NS;
        // slow start doubles from 10 to 640 segments, then 5% a round trip
        let cubic = |t: f64| {
            // round trips since the start (ACKs come on the round's edge)
            let n = (t / 0.1 + 1e-6).floor();
            if n < 6.0 {
                10.0 * 2f64.powf(n)
            } else {
                640.0 * 1.05f64.powf(n - 6.0)
            }
        };
        let (r, fl) = window_over_time(cubic, 4.0);
        let (j, w0) = slow_start_exit(&r, &fl).unwrap();
        let g = growth(&r, &fl, j, w0, SEG as u32, idle, None).unwrap();
        assert_eq!(g.fits, "cubic", "{g:?}");
        let cc = name_read(vec![], 0, None, None, 0, false, false, vec![g]);
        assert_eq!((cc.name, cc.confidence), ("cubic", Some(Confidence::Medium)), "{}", cc.evidence);
        // Reno with a cached ssthresh: one segment a round trip after it
        let (r, fl) = window_over_time(
            |t: f64| {
                if t < 0.6 - 1e-6 {
                    10.0 * 2f64.powf((t / 0.1 + 1e-6).floor())
                } else {
                    640.0 + (t - 0.6) / 0.1
                }
            },
            4.0,
        );
        let (j, w0) = slow_start_exit(&r, &fl).unwrap();
        let g = growth(&r, &fl, j, w0, SEG as u32, idle, None).unwrap();
        assert_ne!(g.fits, "cubic", "{g:?}");
        assert_eq!(name_read(vec![], 0, None, None, 0, false, false, vec![g]).name, "unknown");
    }

    #[test]
    fn one_cut_names_an_algorithm_only_with_a_growth_on_its_side() {
        let g = |fits| CcGrowth { t: 0.0, rounds: 60, seconds: 9.0, segments: 61.0, reno_segments: 59.0, cubic_segments: 532.0, fits };
        let named = |d: f64, fits| name_read(vec![d], 2, None, None, 0, false, true, vec![g(fits)]);
        assert_eq!(named(0.44, "reno").name, "reno");
        assert_eq!(named(0.44, "reno").confidence, Some(Confidence::Medium));
        assert_eq!(named(0.70, "cubic").name, "cubic");
        // the growth and the cut disagree: nothing
        assert_eq!(named(0.44, "cubic").name, "unknown");
        assert_eq!(named(0.70, "reno").name, "unknown");
        assert_eq!(named(0.44, "either").name, "unknown");
        // a sender seen to pace is not named from its growth
        assert_eq!(name_read(vec![0.44], 2, Some(0.3), None, 0, false, false, vec![g("reno")]).name, "unknown");
        // cuts off Reno's 0.5 name Reno, medium, with Reno's growth
        assert_eq!(name_read(vec![0.34, 0.38, 0.40], 3, None, None, 0, false, false, vec![g("reno")]).confidence, Some(Confidence::Medium));
        assert_eq!(name_read(vec![0.34, 0.38, 0.40], 3, None, None, 0, false, false, vec![]).name, "unknown");
    }
}
