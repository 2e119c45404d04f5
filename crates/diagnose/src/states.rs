//! One state per interval (about one base RTT): what held the sender in
//! that round trip, as the kernel's chrono stats (tcpi_busy_time,
//! tcpi_rwnd_limited, tcpi_sndbuf_limited) and Web100's SndLimTime* split a
//! connection's time, with the states a capture can tell apart (slow start,
//! the application, the bottleneck link).
//!
//! The detectors (`crate::detect`) read the shares of these states; the
//! thresholds here decide a single round trip, not a cause.

use tcpwhy_core::units::calc;
use crate::limits::Interval;
use tcpwhy_core::Limit;

/// A window below two full segments is closed for the sender: the receiver
/// does not open its window by less than one MSS (receiver-side silly
/// window syndrome avoidance, RFC 1122 4.2.3.3) and the sender does not
/// send less than one MSS into it (RFC 1122 4.2.3.4).
pub const WINDOW_CLOSED_SEGMENTS: u64 = 2;
/// A window counts as having been open once it reached this many segments:
/// only then is a window below [`WINDOW_CLOSED_SEGMENTS`] a closing (the
/// reader fell behind) rather than a small buffer from the start.
pub const WINDOW_WAS_OPEN_SEGMENTS: u64 = 8;
/// A window that fell below this share of its largest value shrank: the
/// application did not read (the kernel never shrinks the right edge
/// itself, tcp_select_window()).
pub const WINDOW_SHRUNK_SHARE: f64 = 0.5;
/// A window's dip ([`crate::limits::WINDOW_DIPPED_SHARE`]) counts when it
/// lasted at least this share of the interval (a round trip). A reader that
/// keeps up can leave unread what one ACK acknowledged (the ACK goes out in
/// the receive path, before the reader is woken: a whole GRO aggregate at
/// LAN speed), but takes it as soon as it runs, and Linux then offers the
/// room at once once the window can double (tcp_cleanup_rbuf): its dips
/// last a wake-up, not a quarter of a round trip.
pub const WINDOW_DIPPED_MIN_SHARE: f64 = 0.25;
/// At the sender, a full window acknowledged by ACKs of at least this many
/// segments each, a round trip late (`RTT_INFLATED_*`): the receiver held
/// its ACKs until its application read. Linux acknowledges at once only
/// data that leaves its window at least as large (__tcp_ack_snd_check:
/// "right edge of window advances far enough"); data its reader has not
/// taken waits for tcp_recvmsg (tcp_cleanup_rbuf) or the delayed-ACK
/// timer, so a slow reader shows as a window that never shrinks, acked
/// whole when the reader takes it. A receiver that reads at once ACKs
/// every second segment (RFC 1122 4.2.3.2, RFC 5681 4.2); receive offload
/// (GRO) merges more, but only at LAN speed, where its ACKs are not late.
/// Measured in the lab: a reader at 52 Mbit/s behind a 79 KiB window on a
/// 280 Mbit/s, 2.5 ms path, one ACK per 55 segments 12 ms after them, read
/// `receiver_window` `high` from the sender. Each held ACK also covers at
/// least [`HELD_ACK_MIN_WINDOW_SHARE`] of the window: when the reader takes
/// the data, Linux sends the ACK once the window it can offer at least
/// doubles (tcp_cleanup_rbuf), and a full window leaves nothing to double
/// from. Receivers that coalesce (Windows' RSC behind TSO: ACK steps of 6
/// segments at the median, 17 at the 90th percentile, in a 255 KiB window
/// on the shared M-Lab C2E15 capture) stay well below it.
pub const HELD_ACK_MIN_SEGMENTS: u64 = 8;
pub const HELD_ACK_MIN_WINDOW_SHARE: f64 = 0.5;
/// ACKs that freed at least this many segments of room in one round trip,
/// with nothing sent: the sender had the window and did not use it.
pub const FREED_MIN_SEGMENTS: u64 = 4;
/// At the receiver, a round trip's data filling this share of the window in
/// effect is window-limited (the receiver cannot see the sender's flight;
/// one round's data is the flight, less the segments still on the wire).
pub const RECEIVER_WINDOW_FULL_SHARE: f64 = 0.8;
/// At the sender, a round trip is window-limited when the room left in the
/// window after a segment fell below two segments (the sender cannot send a
/// full segment more, RFC 1122 4.2.3.4) or below this share of the window.
pub const SENDER_WINDOW_FULL_GAP_SHARE: f64 = 0.05;
/// Slow start doubles the flight each round (RFC 5681 3.1); with delayed
/// ACKs the growth per round is 1.5x (one segment per two acknowledged).
/// Growth of at least this much over one round trip is slow start.
pub const SLOW_START_GROWTH: f64 = 1.5;
/// Smaller growth still counts while slow start is under way: rounds and
/// intervals are not in phase, so one interval can hold parts of two rounds.
pub const SLOW_START_GROWTH_SPLIT_ROUND: f64 = 1.15;
/// The largest flight at the sender growing by this much within one round.
pub const SLOW_START_FLIGHT_GROWTH: f64 = 1.3;
/// The first burst after idle, up to this many segments, is slow start (the
/// initial window is 10 segments, RFC 6928; a restart after idle begins
/// there again, RFC 5681 4.1): two rounds of doubling from it.
pub const FIRST_BURST_MAX_SEGMENTS: u64 = 40;
/// A pause between two rounds of a burst below this share of the base
/// RTT is no slow-start round boundary (`runs_on`): the round took more
/// than half a round trip to arrive, so its window was at least half the
/// path's bandwidth-delay product, and the rounds left to double to it
/// are at most one.
pub const SLOW_START_ROUND_PAUSE_SHARE: f64 = 0.5;
/// An interval's mean RTT above base x this plus [`RTT_INFLATED_MIN_US`]
/// carries a queue at the bottleneck (a quarter of the path's RTT, beyond
/// the jitter of delayed ACKs).
pub const RTT_INFLATED_FACTOR: f64 = 1.25;
pub const RTT_INFLATED_MIN_US: f64 = 2000.0;
/// Sending at this share of the measured path rate fills the link (the
/// trains' rate is itself a median, so a full link reads a little below it).
pub const AT_PATH_RATE_SHARE: f64 = 0.85;
/// ACKs freed room but the sender sent less than this share of it: it had
/// nothing to send (each ACK would otherwise release data).
pub const STALLED_NEW_SHARE: f64 = 0.25;
/// After a loss, a flight below this share of the flight the loss cut is
/// the congestion window still recovering (CUBIC's window grows back to
/// W_max, RFC 9438).
pub const BELOW_LOSS_PEAK_SHARE: f64 = 0.9;
/// The receive window opening round by round (autotuning,
/// tcp_rcv_space_adjust()) while the flight doubles: this much within an
/// interval, or from the last one.
pub const WINDOW_OPENING_GROWTH: f64 = 1.3;
pub const WINDOW_OPENING_GROWTH_SPLIT_ROUND: f64 = 1.15;
/// Linear growth (congestion avoidance, one segment per round, RFC 5681
/// 3.1) over [`LINEAR_GROWTH_ROUNDS`] round trips: at least this many
/// segments (half of Reno's four, for delayed ACKs).
pub const LINEAR_GROWTH_MIN_SEGMENTS: u64 = 2;
pub const LINEAR_GROWTH_ROUNDS: usize = 4;

/// What the walk over the intervals carries from one to the next.
struct Walk {
    /// Intervals up to this index are still recovering from a loss.
    loss_until: i64,
    ss_active: bool,
    burst_start: bool,
    max_win_seen: u64,
    /// The flight the window held when the last loss came.
    loss_peak: u64,
    /// At the receiver, the last interval with data acknowledged none of
    /// it, or less than one segment in [`HELD_ACK_MIN_SEGMENTS`]: the
    /// receiver held its ACKs (a receiver that reads ACKs every second
    /// segment, and a hole brings a duplicate ACK for each segment past it).
    held_burst: bool,
}

pub(crate) struct Ctx {
    pub sender_side: bool,
    pub smss: u32,
    pub width_ns: i64,
    /// The path's base RTT: an interval's RTT above it carries a queue.
    /// The width is a round of the window, which for a flow that joined
    /// the others' standing queue is its own inflated RTT (path.rs).
    pub base_ns: Option<i64>,
}

impl Ctx {
    /// Bytes in flight in an interval: at the sender the largest flight (or
    /// the new bytes when the flight was not seen), at the receiver the data
    /// that arrived.
    fn flight(&self, it: &Interval) -> u64 {
        if self.sender_side {
            it.max_flight.max(it.new_bytes.min(it.max_flight.max(1) * 4))
        } else {
            it.new_bytes
        }
    }

    /// At the receiver, one round's data: the interval's data, scaled to
    /// the round trip the interval's own echo samples measured when the
    /// interval is longer than that (the width is one RTT of the whole
    /// flow; while the queue was shorter, an interval holds more than one
    /// round of the window, and its data more than the window).
    fn round_data(&self, it: &Interval) -> u64 {
        let f = self.flight(it);
        match it.rtt_mean_us() {
            Some(r) if !self.sender_side && calc::ns_from_us(r) < self.width_ns as f64 => {
                (calc::ns_from_us(f as f64 * r) / self.width_ns as f64) as u64
            }
            _ => f,
        }
    }
}

/// States per interval.
pub(crate) fn classify(iv: &[Interval], ctx: &Ctx, path_bps: Option<f64>) -> Vec<Limit> {
    let smss = ctx.smss as u64;
    let mut out = Vec::with_capacity(iv.len());
    let mut w = Walk { loss_until: -1, ss_active: true, burst_start: true, max_win_seen: 0, loss_peak: 0, held_burst: false };
    for (i, it) in iv.iter().enumerate() {
        let was_open = w.max_win_seen >= WINDOW_WAS_OPEN_SEGMENTS * smss;
        let shrinking = was_open && (it.win_max as f64) < WINDOW_SHRUNK_SHARE * w.max_win_seen as f64;
        // out of a loss's recovery: the out-of-order queue takes buffer room too
        let dipped = was_open
            && it.retx_pkts == 0
            && (i as i64) > w.loss_until + 1
            && it.dipped_ns as f64 >= WINDOW_DIPPED_MIN_SHARE * ctx.width_ns as f64;
        w.max_win_seen = w.max_win_seen.max(it.win_max);
        if it.retx_pkts > 0 {
            w.loss_until = i as i64 + 1;
            w.ss_active = false;
            w.loss_peak = ctx.flight(it).max(if i > 0 { ctx.flight(&iv[i - 1]) } else { 0 });
        }
        let state = if it.data_pkts == 0 {
            quiet_state(iv, i, ctx, &w, &out)
        } else if it.zero_window || (it.win_max < WINDOW_CLOSED_SEGMENTS * smss && w.max_win_seen >= WINDOW_WAS_OPEN_SEGMENTS * smss) {
            Limit::ReceiverApplication
        } else if (i as i64) <= w.loss_until {
            Limit::CongestionWindow
        } else {
            busy_state(iv, i, ctx, path_bps, shrinking, dipped, &mut w)
        };
        if state == Limit::Idle {
            w.burst_start = true;
            w.ss_active = true;
        } else if it.data_pkts > 0 {
            w.burst_start = false;
        }
        if it.data_pkts > 0 {
            w.held_burst = !ctx.sender_side
                && it.data_pkts as u64 >= HELD_ACK_MIN_SEGMENTS
                && it.acks as u64 * HELD_ACK_MIN_SEGMENTS <= it.data_pkts as u64;
        }
        out.push(state);
    }
    if !ctx.sender_side {
        fill_receiver_gaps(iv, smss, &mut out);
    }
    out
}

/// An interval without data.
fn quiet_state(iv: &[Interval], i: usize, ctx: &Ctx, w: &Walk, out: &[Limit]) -> Limit {
    let smss = ctx.smss as u64;
    // less than this is no window for the sender (`WINDOW_CLOSED_SEGMENTS`)
    let closed = (WINDOW_CLOSED_SEGMENTS * smss) as i64;
    let it = &iv[i];
    let outstanding = it.snd_nxt != i64::MIN && it.snd_nxt > it.acked;
    let prev_outstanding = i > 0 && iv[i - 1].snd_nxt != i64::MIN && iv[i - 1].snd_nxt > iv[i - 1].acked;
    // A window still closed (zero or nearly) since the last ACK: the
    // receiver holds the sender, data outstanding or not.
    if it.zero_window
        || (it.win_max < WINDOW_CLOSED_SEGMENTS * smss && (outstanding || w.max_win_seen >= WINDOW_WAS_OPEN_SEGMENTS * smss))
    {
        Limit::ReceiverApplication
    } else if (i as i64) <= w.loss_until {
        Limit::CongestionWindow
    } else if ctx.sender_side && it.acked_bytes >= FREED_MIN_SEGMENTS * smss && it.win_max >= FREED_MIN_SEGMENTS * smss {
        // ACKs freed room and nothing was sent.
        if it.drained { Limit::SenderApplication } else { Limit::SendBuffer }
    } else if ctx.sender_side && (outstanding || prev_outstanding) {
        // Waiting for ACKs with nothing sent: whatever held it before.
        out.last().copied().unwrap_or(Limit::Idle)
    } else if !ctx.sender_side && it.snd_nxt != i64::MIN && it.acked != i64::MIN && it.snd_nxt + closed >= it.acked + it.win_end as i64 {
        // At the receiver: what arrived reached the right edge of the
        // window it last advertised, so the sender could send nothing. Data
        // that came without ACKs and was still not acknowledged a round
        // trip on is data its application had not read (an ACK held for
        // the reader, `HELD_ACK_MIN_SEGMENTS`). Data past a hole, which
        // brought duplicate ACKs, waits on a retransmission instead.
        let unacked = it.snd_nxt - it.acked >= closed;
        if unacked && w.held_burst { Limit::ReceiverApplication } else { Limit::Idle }
    } else {
        Limit::Idle
    }
}

/// How the flight grew around interval `i`.
struct Growth {
    /// Slow start still under way (the split-round tests included).
    slow_start: bool,
    /// By [`SLOW_START_GROWTH`] over one round trip, after growth over the
    /// one before (slow start again after a loss or timeout).
    twice: bool,
    /// Linear over four round trips.
    linear: bool,
}

fn growth(iv: &[Interval], i: usize, ctx: &Ctx, burst_start: bool) -> Growth {
    let smss = ctx.smss as u64;
    let it = &iv[i];
    let f = ctx.flight(it);
    let prev = if i > 0 { ctx.flight(&iv[i - 1]) } else { 0 };
    let prev2 = if i > 1 { ctx.flight(&iv[i - 2]) } else { 0 };
    let fast = !burst_start && prev > 0 && f as f64 >= SLOW_START_GROWTH * prev as f64;
    let next = iv.get(i + 1).filter(|n| n.retx_pkts == 0).map_or(0, |n| ctx.flight(n));
    let slow_start = !burst_start
        && prev > 0
        && (f as f64 >= SLOW_START_GROWTH_SPLIT_ROUND * prev as f64
            // At the sender, the largest flight alone (the new bytes of a
            // round split between two intervals mislead).
            || (ctx.sender_side
                && iv[i - 1].max_flight > 0
                && it.max_flight as f64 >= SLOW_START_FLIGHT_GROWTH * iv[i - 1].max_flight as f64)
            // A round split unevenly between two intervals: the next one
            // resumes the doubling.
            || (it.retx_pkts == 0 && next as f64 >= SLOW_START_GROWTH * f.max(prev) as f64));
    let twice = fast && prev2 > 0 && prev as f64 >= SLOW_START_FLIGHT_GROWTH * prev2 as f64;
    let linear = i >= LINEAR_GROWTH_ROUNDS && {
        let f4 = ctx.flight(&iv[i - LINEAR_GROWTH_ROUNDS]);
        f >= f4 + LINEAR_GROWTH_MIN_SEGMENTS * smss && f >= ctx.flight(&iv[i - 2])
    };
    Growth { slow_start, twice, linear }
}

/// A new connection's receive window opening round by round (autotuning)
/// while the congestion window doubles: both are the cold start. Within
/// the interval, or from the last one while the flight keeps doubling, or
/// in the next one with the flight following. A window reopening after it
/// was closed is the reader, not autotuning (the caller checks).
fn window_opening(iv: &[Interval], i: usize, ctx: &Ctx, w: &Walk) -> bool {
    let it = &iv[i];
    let f = ctx.flight(it);
    let prev = if i > 0 { ctx.flight(&iv[i - 1]) } else { 0 };
    let prev_win = if i > 0 { iv[i - 1].win_max } else { 0 };
    w.ss_active
        && it.retx_pkts == 0
        && it.win_min >= WINDOW_CLOSED_SEGMENTS * ctx.smss as u64
        && (it.win_max as f64 >= WINDOW_OPENING_GROWTH * it.win_min.max(1) as f64
            || (!w.burst_start
                && prev_win > 0
                && it.win_max as f64 >= WINDOW_OPENING_GROWTH_SPLIT_ROUND * prev_win as f64
                && f as f64 >= WINDOW_OPENING_GROWTH * prev as f64)
            || (!w.burst_start
                && iv.get(i + 1).is_some_and(|n| {
                    n.retx_pkts == 0
                        && n.win_max as f64 >= WINDOW_OPENING_GROWTH * it.win_max.max(1) as f64
                        && ctx.flight(n) as f64 >= WINDOW_OPENING_GROWTH * f.max(1) as f64
                })))
}

/// An interval with data, the window open and no loss being recovered.
fn busy_state(iv: &[Interval], i: usize, ctx: &Ctx, path_bps: Option<f64>, shrinking: bool, dipped: bool, w: &mut Walk) -> Limit {
    let smss = ctx.smss as u64;
    let it = &iv[i];
    let win = it.win_max;
    let f = ctx.flight(it);
    let window_limited = if ctx.sender_side {
        it.window_full_flag
            || it.min_gap.is_some_and(|g| g < 2 * smss as i64 || (g as f64) < SENDER_WINDOW_FULL_GAP_SHARE * win as f64)
    } else {
        win > 0 && ctx.round_data(it) as f64 >= RECEIVER_WINDOW_FULL_SHARE * win as f64
    };
    let g = growth(iv, i, ctx, w.burst_start);
    let drained = ctx.sender_side && it.drained;
    // A burst whose first round carried all of it (at the sender, all of
    // it ACKed in the interval; at the receiver, nothing more came in the
    // next round trip) went out in one round: no window held it back, so
    // slow start cost it nothing (a round trip is the least any burst
    // takes; the next round starts a whole RTT after this one, so it falls
    // in the next interval, RFC 5681 3.1).
    // At the receiver a burst that runs on into the next interval with
    // no pause of [`SLOW_START_ROUND_PAUSE_SHARE`] of a round trip had no
    // round boundary in it either: its segments came back to back at the
    // path's rate, and what held it was not a window.
    let one_round = drained
        || (!ctx.sender_side
            && w.burst_start
            && iv.get(i + 1).is_none_or(|n| n.retx_pkts == 0 && (n.new_bytes == 0 || runs_on(it, n, ctx))));
    let first_of_burst_small = w.burst_start && f <= FIRST_BURST_MAX_SEGMENTS * smss;
    let base_us = calc::us_from_ns(ctx.base_ns.unwrap_or(ctx.width_ns) as f64);
    let rtt_inflated = it.rtt_mean_us().is_some_and(|r| r > base_us * RTT_INFLATED_FACTOR + RTT_INFLATED_MIN_US);
    let rate = calc::bps(it.new_bytes as f64, calc::s_from_ns(ctx.width_ns as f64));
    let at_path_rate = path_bps.is_some_and(|p| rate >= AT_PATH_RATE_SHARE * p);
    // ACKs came back but the sender sent (almost) nothing new: not the
    // congestion window (each ACK would release data), not the receiver's
    // window (open): the sender had nothing to send.
    let stalled = ctx.sender_side
        && it.acked_bytes >= FREED_MIN_SEGMENTS * smss
        && (it.new_bytes as f64) < STALLED_NEW_SHARE * it.acked_bytes as f64
        && !window_limited;
    // a window back at a peak it had offered before is not opening
    if window_limited && window_opening(iv, i, ctx, w) && !shrinking && !dipped {
        return Limit::SlowStart;
    }
    if window_limited {
        w.ss_active = false;
        // the bytes each ACK acknowledged
        let step = (it.advancing_acks > 0).then(|| it.acked_bytes as f64 / it.advancing_acks as f64);
        let held = ctx.sender_side
            && rtt_inflated
            && step.is_some_and(|b| b >= (HELD_ACK_MIN_SEGMENTS * smss) as f64 && b >= HELD_ACK_MIN_WINDOW_SHARE * win as f64);
        return if shrinking || dipped || held { Limit::ReceiverApplication } else { Limit::ReceiverWindow };
    }
    if (g.twice && it.retx_pkts == 0) || (w.ss_active && (g.slow_start || first_of_burst_small) && !one_round) {
        return Limit::SlowStart;
    }
    if w.ss_active && w.burst_start && one_round {
        // A whole burst in its first round: what the application gave.
        w.ss_active = false;
        return Limit::SenderApplication;
    }
    if w.ss_active && !w.burst_start {
        w.ss_active = false;
    }
    if drained || it.reverse_data {
        Limit::SenderApplication
    } else if stalled {
        // Stalled next to a message from the receiver's application (an
        // application-level window update): the sender's application
        // waited for it.
        let msg_near = (i > 0 && iv[i - 1].reverse_data) || iv.get(i + 1).is_some_and(|n| n.reverse_data);
        if msg_near { Limit::SenderApplication } else { Limit::SendBuffer }
    } else if rtt_inflated || at_path_rate {
        Limit::BottleneckLink
    } else if g.linear || (ctx.sender_side && (f as f64) < BELOW_LOSS_PEAK_SHARE * w.loss_peak as f64) {
        // Growing slowly, or still below where a loss cut it.
        Limit::CongestionWindow
    } else {
        Limit::SendBuffer
    }
}

/// Interval `n`'s new data followed `it`'s with no pause a slow-start
/// round boundary makes: the next round's first segment arrives a round
/// trip after this round's first, so the pause after a round is the round
/// trip less the round's own arrival time. A pause under
/// [`SLOW_START_ROUND_PAUSE_SHARE`] of the base RTT means the round took
/// most of a round trip to arrive: its window held half the path's
/// bandwidth-delay product or more, and the path's rate, not the window,
/// spaced it.
fn runs_on(it: &Interval, n: &Interval, ctx: &Ctx) -> bool {
    let base = ctx.base_ns.unwrap_or(ctx.width_ns);
    match (it.new_data_span, n.new_data_span) {
        (Some((_, last)), Some((first, _))) => ((first - last) as f64) < SLOW_START_ROUND_PAUSE_SHARE * base as f64,
        _ => false,
    }
}

/// At the receiver a single silent round trip between two with data, the
/// window open and no loss, is the sender holding back, not idle.
fn fill_receiver_gaps(iv: &[Interval], smss: u64, out: &mut [Limit]) {
    for i in 1..iv.len().saturating_sub(1) {
        if out[i] == Limit::Idle
            && iv[i - 1].data_pkts > 0
            && iv[i + 1].data_pkts > 0
            && iv[i].retx_pkts == 0
            && iv[i + 1].retx_pkts == 0
            && iv[i].win_min >= FREED_MIN_SEGMENTS * smss
        {
            out[i] = if iv[i - 1].reverse_data || iv[i].reverse_data || iv[i + 1].reverse_data {
                Limit::SenderApplication
            } else {
                Limit::SendBuffer
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1448;

    /// A round trip of data at the sender: `segs` segments in flight in a
    /// window of `win_segs`, acknowledging as much as was sent before.
    fn round(k: i64, segs: u64, win_segs: u64) -> Interval {
        Interval {
            start_ns: k * 10_000_000,
            new_bytes: segs * MSS,
            data_pkts: segs as u32,
            max_flight: segs * MSS,
            min_gap: Some(((win_segs - segs.min(win_segs)) * MSS) as i64),
            win_max: win_segs * MSS,
            win_min: win_segs * MSS,
            rtt_sum_us: 10_000.0 * segs as f64,
            rtt_n: segs as u32,
            snd_nxt: (k + 1) * 1_000_000,
            acked: k * 1_000_000,
            acked_bytes: segs * MSS,
            ..Default::default()
        }
    }

    fn ctx() -> Ctx {
        Ctx { sender_side: true, smss: MSS as u32, width_ns: 10_000_000, base_ns: Some(10_000_000) }
    }

    #[test]
    fn doubling_rounds_are_slow_start_then_a_full_window_is_the_receiver() {
        let iv: Vec<Interval> = [10, 20, 40, 80, 100, 100, 100].iter().enumerate().map(|(k, &s)| round(k as i64, s, 100)).collect();
        let st = classify(&iv, &ctx(), None);
        assert_eq!(&st[..4], &[Limit::SlowStart; 4]);
        assert_eq!(&st[4..], &[Limit::ReceiverWindow; 3]);
    }

    /// Near the receiver: an application writing 25 segments every two
    /// round trips into a warm window, each chunk arriving whole within
    /// one round and nothing in the next, is what the application gave,
    /// not slow start (it read `slow_start` `high`); a burst whose next
    /// round brings twice as much is slow start.
    #[test]
    fn a_burst_carried_whole_by_its_first_round_is_not_slow_start() {
        let rx = Ctx { sender_side: false, ..ctx() };
        let quiet = |k: i64| Interval { start_ns: k * 10_000_000, win_max: 125 * MSS, win_min: 125 * MSS, ..Default::default() };
        let iv: Vec<Interval> = (0..12).map(|k| if k % 2 == 0 { round(k, 25, 125) } else { quiet(k) }).collect();
        let st = classify(&iv, &rx, None);
        for k in (2..12).step_by(2) {
            assert_eq!(st[k], Limit::SenderApplication, "chunk {k}: {st:?}");
        }
        let iv: Vec<Interval> = vec![quiet(0), round(1, 10, 125), round(2, 20, 125), round(3, 40, 125), quiet(4)];
        let st = classify(&iv, &rx, None);
        assert_eq!(&st[1..3], &[Limit::SlowStart; 2], "{st:?}");
        // a 10-segment chunk the path spreads over two intervals: back to
        // back (0.1 ms between the parts) it had no round boundary; a
        // pause of most of a round trip (9 ms of 10) is one
        let part = |k: i64, segs: u64, from_ms: f64, to_ms: f64| Interval {
            new_data_span: Some(((from_ms * 1e6) as i64 + k * 10_000_000, (to_ms * 1e6) as i64 + k * 10_000_000)),
            ..round(k, segs, 125)
        };
        let spread = vec![quiet(0), part(1, 7, 6.0, 9.9), part(2, 3, 0.0, 2.0), quiet(3), quiet(4)];
        assert_ne!(classify(&spread, &rx, None)[1], Limit::SlowStart);
        let paused = vec![quiet(0), part(1, 7, 0.0, 1.0), part(2, 3, 0.0, 2.0), quiet(3), quiet(4)];
        assert_eq!(classify(&paused, &rx, None)[1], Limit::SlowStart);
    }

    /// A slow reader behind a window that never shrinks: each round's full
    /// window is acknowledged by one ACK, 12 ms late on a 10 ms path (the
    /// receiver held it until its application read); the same window
    /// acknowledged every second segment on time is the buffer's size.
    #[test]
    fn a_full_window_acknowledged_late_in_one_ack_is_the_reader() {
        let held = |k: i64| Interval { advancing_acks: 1, rtt_sum_us: 22_000.0, rtt_n: 1, ..round(k, 55, 55) };
        let iv: Vec<Interval> = (0..6).map(held).collect();
        assert_eq!(&classify(&iv, &ctx(), None)[2..], &[Limit::ReceiverApplication; 4]);
        let prompt = |k: i64| Interval { advancing_acks: 28, ..round(k, 55, 55) };
        let iv: Vec<Interval> = (0..6).map(prompt).collect();
        assert_eq!(&classify(&iv, &ctx(), None)[2..], &[Limit::ReceiverWindow; 4]);
        // stretch ACKs on time (receive offload): still the buffer's size
        let merged = |k: i64| Interval { advancing_acks: 1, ..round(k, 55, 55) };
        let iv: Vec<Interval> = (0..6).map(merged).collect();
        assert_eq!(&classify(&iv, &ctx(), None)[2..], &[Limit::ReceiverWindow; 4]);
    }

    /// A reader a little slower than the window: each round the window
    /// the sender filled falls to half its size and stays there for 4 of
    /// the round's 10 ms, until the reader takes the data; the same dip
    /// for a wake-up (0.2 ms, a reader that keeps up behind receive
    /// offload) is not the reader, nor is a dip within a loss's recovery
    /// (the out-of-order queue takes room too).
    #[test]
    fn a_window_that_stays_below_its_peak_is_the_reader() {
        let dip = |ns: i64| move |k: i64| Interval { win_min: 28 * MSS, dipped_ns: if k >= 2 { ns } else { 0 }, advancing_acks: 28, ..round(k, 55, 55) };
        let iv: Vec<Interval> = (0..6).map(dip(4_000_000)).collect();
        assert_eq!(&classify(&iv, &ctx(), None)[2..], &[Limit::ReceiverApplication; 4]);
        let iv: Vec<Interval> = (0..6).map(dip(200_000)).collect();
        assert!(classify(&iv, &ctx(), None)[2..].iter().all(|s| *s != Limit::ReceiverApplication));
        let mut iv: Vec<Interval> = (0..6).map(dip(4_000_000)).collect();
        iv[2].retx_pkts = 1;
        assert_eq!(&classify(&iv, &ctx(), None)[5..], &[Limit::ReceiverApplication]);
        assert!(classify(&iv, &ctx(), None)[2..5].iter().all(|s| *s != Limit::ReceiverApplication));
    }

    /// The receiver's view of the same reader: a window's worth arrives
    /// with no ACK from the receiver, then nothing while the receiver still
    /// has not acknowledged it; a receiver that acknowledged all of it
    /// opened its window again (the sender paused); one that sent a
    /// duplicate ACK for each segment past a hole waits on a
    /// retransmission.
    #[test]
    fn at_the_receiver_a_full_window_left_unacknowledged_is_the_reader() {
        let rctx = Ctx { sender_side: false, ..ctx() };
        let win = 55 * MSS;
        let burst = |k: i64, acks: u32, acked: i64| Interval {
            start_ns: k * 10_000_000,
            new_bytes: win,
            data_pkts: 55,
            acks,
            win_max: win,
            win_min: win,
            win_end: win,
            snd_nxt: acked + win as i64,
            acked,
            ..Default::default()
        };
        let quiet = |k: i64, from: &Interval, acked: i64| Interval {
            start_ns: k * 10_000_000,
            data_pkts: 0,
            acks: 0,
            new_bytes: 0,
            snd_nxt: from.snd_nxt,
            acked,
            ..from.clone()
        };
        let b = burst(0, 0, 0);
        let iv = vec![b.clone(), quiet(1, &b, 0), quiet(2, &b, 0)];
        assert_eq!(&classify(&iv, &rctx, None)[1..], &[Limit::ReceiverApplication; 2]);
        // every second segment acknowledged at once, the window open again
        let b = burst(0, 28, 0);
        let iv = vec![b.clone(), quiet(1, &b, b.snd_nxt), quiet(2, &b, b.snd_nxt)];
        assert_eq!(&classify(&iv, &rctx, None)[1..], &[Limit::Idle; 2]);
        // a hole: a duplicate ACK per segment, the data above it waits
        let b = burst(0, 55, 0);
        let iv = vec![b.clone(), quiet(1, &b, 0), quiet(2, &b, 0)];
        assert_eq!(&classify(&iv, &rctx, None)[1..], &[Limit::Idle; 2]);
    }

    #[test]
    fn a_flat_flight_below_an_open_window_without_queue_is_the_send_buffer() {
        let iv: Vec<Interval> = [10, 20, 40, 40, 40, 40, 40, 40, 40].iter().enumerate().map(|(k, &s)| round(k as i64, s, 1000)).collect();
        let st = classify(&iv, &ctx(), None);
        // growth from 20 to 40 segments within the last four round trips
        // is still the congestion window's linear growth
        assert_eq!(&st[4..6], &[Limit::CongestionWindow; 2]);
        assert_eq!(&st[6..], &[Limit::SendBuffer; 3]);
        // the same flight at the path's rate fills the link
        let rate = 40.0 * MSS as f64 * 8.0 / 0.01;
        let st = classify(&iv, &ctx(), Some(rate));
        assert_eq!(&st[3..], &[Limit::BottleneckLink; 6]);
    }

    #[test]
    fn a_window_closed_after_it_was_open_is_the_reader() {
        let mut iv: Vec<Interval> = [10, 20, 40, 40].iter().enumerate().map(|(k, &s)| round(k as i64, s, 100)).collect();
        let mut shut = round(4, 1, 100);
        shut.win_max = MSS;
        shut.win_min = 0;
        shut.zero_window = true;
        iv.push(shut);
        assert_eq!(classify(&iv, &ctx(), None)[4], Limit::ReceiverApplication);
    }

    #[test]
    fn a_loss_holds_the_congestion_window_for_the_next_round_trip() {
        let mut iv: Vec<Interval> = [10, 20, 40, 80].iter().enumerate().map(|(k, &s)| round(k as i64, s, 1000)).collect();
        iv[3].retx_pkts = 2;
        iv.push(round(4, 40, 1000));
        iv.push(round(5, 41, 1000));
        let st = classify(&iv, &ctx(), None);
        assert_eq!(&st[3..5], &[Limit::CongestionWindow; 2]);
        // still below the flight the loss cut: recovering
        assert_eq!(st[5], Limit::CongestionWindow);
    }

    #[test]
    fn a_quiet_round_trip_with_nothing_outstanding_is_idle_and_restarts_slow_start() {
        let mut iv: Vec<Interval> = [10, 20, 40].iter().enumerate().map(|(k, &s)| round(k as i64, s, 1000)).collect();
        // everything sent was acknowledged before the pause
        iv[2].acked = iv[2].snd_nxt;
        iv.push(Interval { start_ns: 30_000_000, snd_nxt: 4_000_000, acked: 4_000_000, win_max: 1000 * MSS, win_min: 1000 * MSS, ..Default::default() });
        iv.push(round(4, 10, 1000));
        let st = classify(&iv, &ctx(), None);
        assert_eq!(st[3], Limit::Idle);
        assert_eq!(st[4], Limit::SlowStart);
    }
}
