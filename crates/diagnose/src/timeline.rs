//! The direction's timeline: its intervals' states merged into phases in
//! order, each with its bytes and its time. The what-if replays it with a
//! fix's ceiling: the phases the fix addresses are recomputed, every other
//! phase stays as captured, so no prediction exceeds what the untouched
//! time allows (Amdahl's law). The same phases answer "is it the
//! network?": the share of the time that the network and TCP's settings
//! account for, against the applications' time and idle time, as the
//! kernel's chrono accounting splits a connection's time (tcp_info's
//! tcpi_busy_time, tcpi_rwnd_limited, tcpi_sndbuf_limited; what is not
//! busy is the application's).

use tcpwhy_core::units::calc;
use crate::limits::Interval;
use tcpwhy_core::{Cause, Limit};

/// The states a network or TCP setting holds the sender in: the receiver's
/// window, the send buffer, the congestion window (loss recovery), a
/// policer, the bottleneck link, slow start. Idle time (nothing to send, or
/// waiting on the peer's turn) and the applications' own states
/// (`sender_application`, `receiver_application`) are not the network's:
/// no network or buffer fix shortens them.
pub const NETWORK_STATES: &[Limit] = &[
    Limit::ReceiverWindow,
    Limit::SendBuffer,
    Limit::CongestionWindow,
    Limit::Policer,
    Limit::BottleneckLink,
    Limit::SlowStart,
];

/// The time the applications and the waits between turns hold: a network
/// or TCP fix leaves it as it is.
pub const UNTOUCHED_BY_NETWORK: &[Limit] = &[Limit::Idle, Limit::SenderApplication, Limit::ReceiverApplication];

/// The states a cause produces, whose time its fix wins back: a root cause
/// owns every state it makes (window scaling off owns the receiver-window
/// time; a slow reader the window its unread data shrinks; a policer's
/// losses set the congestion window; a shaper's queue
/// drops and its rate is the bottleneck's; a cached ssthresh leaves the
/// sender window-limited at a small window, congestion window or send
/// buffer).
pub fn owned_by(cause: Cause) -> &'static [Limit] {
    match cause {
        Cause::ReceiverWindow | Cause::WindowScalingOff => &[Limit::ReceiverWindow],
        Cause::SendBuffer => &[Limit::SendBuffer],
        Cause::SenderApplication => &[Limit::SenderApplication],
        // a reader that does not keep up leaves its buffer's free space,
        // the window it advertises (tcp_select_window), small: the
        // window-limited time beside it is the reader's
        Cause::ReceiverApplication => &[Limit::ReceiverApplication, Limit::ReceiverWindow],
        Cause::Policer => &[Limit::Policer, Limit::CongestionWindow],
        Cause::RandomLoss | Cause::CongestionLoss | Cause::SpuriousRetransmission => &[Limit::CongestionWindow],
        Cause::CachedSsthresh => &[Limit::CongestionWindow, Limit::SendBuffer],
        Cause::Shaper | Cause::BottleneckLink => &[Limit::BottleneckLink, Limit::CongestionWindow],
        Cause::SlowStart => &[Limit::SlowStart],
        Cause::DelayedAck | Cause::None | Cause::Undetermined => &[],
    }
}

/// One phase: consecutive intervals in one state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Phase {
    pub state: Limit,
    /// The first interval's start (ns since the epoch).
    pub start_ns: i64,
    /// The intervals it spans.
    pub intervals: usize,
    /// New payload bytes sent in it.
    pub bytes: u64,
}

/// A direction's phases in order, over its duration.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    pub phases: Vec<Phase>,
    /// The direction's duration (first to last data segment), seconds.
    pub duration_s: f64,
    /// The intervals in all; each stands for `duration_s / intervals` of
    /// the time, so a state's time is its share of the intervals, as the
    /// `limits` shares count it.
    pub intervals: usize,
}

/// A replay with a fix: the direction's duration and rate after it, and
/// the time the fix wins back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Replay {
    pub duration_s: f64,
    pub bps: f64,
    pub saved_s: f64,
    /// Round trips of window growth before the new rate (0 without growth).
    pub growth_rounds: u32,
}

impl Timeline {
    pub fn of(iv: &[Interval], states: &[Limit], duration_s: f64) -> Timeline {
        let mut phases: Vec<Phase> = Vec::new();
        for (it, &state) in iv.iter().zip(states) {
            match phases.last_mut() {
                Some(p) if p.state == state => {
                    p.intervals += 1;
                    p.bytes += it.new_bytes;
                }
                _ => phases.push(Phase { state, start_ns: it.start_ns, intervals: 1, bytes: it.new_bytes }),
            }
        }
        Timeline { phases, duration_s, intervals: iv.len().min(states.len()) }
    }

    fn interval_s(&self) -> f64 {
        if self.intervals == 0 {
            0.0
        } else {
            self.duration_s / self.intervals as f64
        }
    }

    pub fn bytes(&self) -> u64 {
        self.phases.iter().map(|p| p.bytes).sum()
    }

    /// Seconds and bytes in the phases of `states`.
    pub fn time_in(&self, states: &[Limit]) -> (f64, u64) {
        let (n, b) = self
            .phases
            .iter()
            .filter(|p| states.contains(&p.state))
            .fold((0usize, 0u64), |(n, b), p| (n + p.intervals, b + p.bytes));
        (n as f64 * self.interval_s(), b)
    }

    /// The share of the direction's time in `states`.
    pub fn share(&self, states: &[Limit]) -> f64 {
        if self.duration_s > 0.0 {
            self.time_in(states).0 / self.duration_s
        } else {
            0.0
        }
    }

    /// The direction replayed with the phases of `addressed` sent at
    /// `rate_bps`: their bytes take `bytes / rate`, with the window first
    /// growing from the flight those phases held to the new rate's
    /// bandwidth-delay product when `grow` (slow start doubles it each
    /// round trip, RFC 5681; the connection stays warm between phases, so
    /// it grows once). A phase already faster keeps its time. Every other
    /// phase stays as captured.
    pub fn replay(&self, addressed: &[Limit], rate_bps: f64, rtt_s: f64, grows: bool) -> Replay {
        let (t, b) = self.time_in(addressed);
        if t <= 0.0 || rate_bps <= 0.0 || !rate_bps.is_finite() {
            return self.unchanged();
        }
        let now_bps = calc::bps(b as f64, t);
        if rate_bps <= now_bps {
            return self.unchanged();
        }
        let from_window = if grows && rtt_s > 0.0 { calc::bytes_in(now_bps, rtt_s) } else { f64::INFINITY };
        let (new_t, growth_rounds) = grow(b as f64, from_window, rate_bps, rtt_s);
        if new_t >= t {
            return self.unchanged();
        }
        self.with_phases_taking(t, new_t, growth_rounds)
    }

    /// The direction replayed with the phases of `addressed` sent at
    /// exactly `rate_bps`, slower or faster than now: a sender paced at a
    /// rate (fq's maxrate) sends at it, and a flow that took more than its
    /// share of a policer it shares gets its share (`saved_s` is then
    /// negative).
    pub fn paced(&self, addressed: &[Limit], rate_bps: f64) -> Replay {
        let (t, b) = self.time_in(addressed);
        if t <= 0.0 || rate_bps <= 0.0 || !rate_bps.is_finite() {
            return self.unchanged();
        }
        self.with_phases_taking(t, calc::s_to_send(b as f64, rate_bps), 0)
    }

    /// The direction as captured: nothing won back.
    fn unchanged(&self) -> Replay {
        Replay { duration_s: self.duration_s, bps: self.rate(self.duration_s), saved_s: 0.0, growth_rounds: 0 }
    }

    /// The direction with phases that took `t` seconds taking `new_t`.
    fn with_phases_taking(&self, t: f64, new_t: f64, growth_rounds: u32) -> Replay {
        let duration_s = self.duration_s - t + new_t;
        Replay { duration_s, bps: self.rate(duration_s), saved_s: t - new_t, growth_rounds }
    }

    fn rate(&self, duration_s: f64) -> f64 {
        if duration_s > 0.0 {
            calc::bps(self.bytes() as f64, duration_s)
        } else {
            0.0
        }
    }
}

/// A bound on the slow-start rounds counted: 64 doublings exceed any window
/// a path can hold.
const GROWTH_MAX_ROUNDS: u32 = 64;

/// The time to send `bytes` at up to `rate_bps` when the window starts at
/// `from_window` bytes and doubles each round trip (slow start, RFC 5681
/// 3.1) until it holds the rate's bandwidth-delay product: k rounds of
/// growth, then the rest at the rate (the slow-start model of Cardwell,
/// Savage and Anderson, "Modeling TCP latency", INFOCOM 2000, without
/// losses). Counted as a capture counts time, from the first segment sent
/// to the last.
pub fn grow_time(bytes: f64, from_window: f64, rate_bps: f64, rtt_s: f64) -> f64 {
    grow(bytes, from_window, rate_bps, rtt_s).0
}

/// [`grow_time`] with the rounds of growth.
pub fn grow(bytes: f64, from_window: f64, rate_bps: f64, rtt_s: f64) -> (f64, u32) {
    if bytes <= 0.0 || rate_bps <= 0.0 {
        return (0.0, 0);
    }
    let bdp = calc::bytes_in(rate_bps, rtt_s.max(0.0));
    let mut cwnd = from_window.max(1.0);
    let (mut sent, mut rounds) = (0.0, 0u32);
    while cwnd < bdp && sent + cwnd < bytes && rounds < GROWTH_MAX_ROUNDS {
        sent += cwnd;
        cwnd *= 2.0;
        rounds += 1;
    }
    (f64::from(rounds) * rtt_s + calc::s_to_send(bytes - sent, rate_bps), rounds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(start_ns: i64, new_bytes: u64) -> Interval {
        Interval { start_ns, new_bytes, ..Default::default() }
    }

    /// 10 intervals of 0.1 s: 2 idle, 6 window-limited at 64 KiB each, 2
    /// held by the receiving application.
    fn example() -> Timeline {
        let states = [
            vec![Limit::Idle; 2],
            vec![Limit::ReceiverWindow; 6],
            vec![Limit::ReceiverApplication; 2],
        ]
        .concat();
        let ivs: Vec<Interval> =
            (0..10).map(|i| iv(i * 100_000_000, if states[i as usize] == Limit::ReceiverWindow { 65536 } else { 0 })).collect();
        Timeline::of(&ivs, &states, 1.0)
    }

    #[test]
    fn phases_merge_runs_and_count_their_bytes() {
        let t = example();
        assert_eq!(t.phases.len(), 3);
        assert_eq!(t.phases[1], Phase { state: Limit::ReceiverWindow, start_ns: 200_000_000, intervals: 6, bytes: 6 * 65536 });
        assert!((t.share(&[Limit::ReceiverWindow]) - 0.6).abs() < 1e-9);
        assert!((t.share(UNTOUCHED_BY_NETWORK) - 0.4).abs() < 1e-9);
    }

    #[test]
    fn a_replay_never_shortens_the_untouched_time() {
        let t = example();
        // a window fix at any rate: the 0.4 s of idle and reader stay
        for rate in [1e7, 1e9, 1e12] {
            let r = t.replay(&[Limit::ReceiverWindow], rate, 0.1, true);
            assert!(r.duration_s >= 0.4 - 1e-12, "{r:?}");
            assert!(r.bps <= t.bytes() as f64 * 8.0 / 0.4 + 1e-6, "{r:?}");
            assert!((r.saved_s - (1.0 - r.duration_s)).abs() < 1e-9);
        }
        // a rate below the phases' own changes nothing
        let slow = t.replay(&[Limit::ReceiverWindow], 1e5, 0.1, true);
        assert_eq!(slow.saved_s, 0.0);
    }

    #[test]
    fn growth_from_the_old_window_costs_round_trips() {
        // 5.24 Mbit/s now (64 KiB per 0.1 s); at 100 Mbit/s the window must
        // grow from 64 KiB to 1.25 MB: five doublings at 0.1 s each
        let (t, rounds) = grow(6.0 * 65536.0, 65536.0, 1e8, 0.1);
        assert_eq!(rounds, 2, "the 384 KiB run out after two doublings");
        assert!((t - (0.2 + (6.0 - 3.0) * 65536.0 * 8.0 / 1e8)).abs() < 1e-9);
        let (_, rounds) = grow(100e6, 65536.0, 1e8, 0.1);
        assert_eq!(rounds, 5);
        // without growth: bytes over the rate
        assert!((grow_time(1e6, f64::INFINITY, 8e6, 0.1) - 1.0).abs() < 1e-9);
    }
}
