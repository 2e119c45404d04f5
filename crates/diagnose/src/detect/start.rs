//! Starting up: slow start per burst (a new connection, or a restart from
//! the initial window after idle, RFC 5681 4.1 and Linux's
//! tcp_slow_start_after_idle), the cold start of a short transfer, a
//! connection that left slow start early with no loss (a cached ssthresh,
//! Linux's tcp_metrics; or CUBIC's HyStart delay exit).

use tcpwhy_core::units::calc;
use super::{finding, num, Input, FINDING_MIN_SHARE};
use crate::model::{Evidence, Finding};
use serde_json::json;
use tcpwhy_core::units::{fmt_bytes, fmt_ms};
use tcpwhy_core::{Cause, Limit};

/// Data trains: segments closer than a quarter of the interval (one base
/// RTT) belong to one round; a restart from the initial window shows as
/// trains that wait a round trip for ACKs.
pub const TRAIN_GAP_INTERVAL_DIV: i64 = 4;
/// A response paid slow start when it took at least this many rounds of
/// growth (one round is the initial window alone).
pub const RESTART_MIN_ROUNDS: usize = 2;
/// Cached ssthresh: the first round trips (`CACHED_EARLY_INTERVALS`) with
/// no loss, the window open and data waiting, the second round's flight
/// at most `CACHED_MAX_SEGMENTS` (slow start from IW10 reaches 20 to 40 by
/// then, RFC 6928) and the fourth's within `CACHED_LINEAR_MIN`..
/// `CACHED_LINEAR_MAX` of it: linear (congestion avoidance adds one
/// segment per round, RFC 5681 3.1), not doubling.
pub const CACHED_EARLY_INTERVALS: usize = 6;
pub const CACHED_MAX_SEGMENTS: u64 = 24;
pub const CACHED_LINEAR_MIN: f64 = 0.9;
pub const CACHED_LINEAR_MAX: f64 = 1.6;
/// At most this many leading intervals of less than a full segment (the
/// application's greeting and the wait for its answer) before the rounds
/// [`CACHED_EARLY_INTERVALS`] are counted from.
pub const CACHED_GREETING_MAX_INTERVALS: usize = 2;
/// CUBIC's HyStart delay exit (net/ipv4/tcp_cubic.c): slow start ends
/// when a round's RTT exceeds the minimum by delay_min/8 clamped to
/// [HYSTART_DELAY_MIN, HYSTART_DELAY_MAX] = [4 ms, 16 ms], once the window
/// is at least hystart_low_window = 16 segments.
pub const HYSTART_DELAY_DIV: f64 = 8.0;
pub const HYSTART_DELAY_MIN_MS: f64 = 4.0;
pub const HYSTART_DELAY_MAX_MS: f64 = 16.0;
pub const HYSTART_LOW_WINDOW: u64 = 16;
/// A round that grew by this much was still doubling when the RTT rose
/// (slow start's 2x, less delayed ACKs and round/interval phase).
pub const HYSTART_DOUBLING: f64 = crate::congestion::SLOW_START_GROWTH;
/// The rounds HyStart can end slow start in before a cached ssthresh
/// would have shown (rounds 1 to 3).
const HYSTART_ROUNDS: usize = 4;
/// Cold start: a short transfer (at most this many busy round trips)
/// that began in slow start, had no loss, and whose later round trips
/// carried at least `COLD_START_GROWTH` times the earlier ones (still
/// growing when the data ran out), over at least `COLD_START_MIN_ROUNDS`.
pub const COLD_START_MAX_BUSY_RTTS: f64 = 40.0;
pub const COLD_START_GROWTH: f64 = 1.2;
pub const COLD_START_MIN_ROUNDS: usize = 4;

#[derive(Debug, Default)]
pub(crate) struct Start {
    /// Bursts of data between idle periods (interval index ranges).
    pub bursts: Vec<(usize, usize)>,
    /// Slow-start rounds per burst.
    pub ss_rounds: Vec<usize>,
    /// Slow start ended early with no loss, as a cached ssthresh does.
    pub cached: bool,
    /// Slow start ended by HyStart's delay exit: (interval, RTT rise ms).
    pub hystart_exit: Option<(usize, f64)>,
    /// A new connection still growing from its initial window when the data ran out.
    pub cold: bool,
}

impl Start {
    pub fn detect(inp: &Input, retransmissions: u64) -> Start {
        let bursts = crate::shape::bursts(inp.states);
        let ss_rounds = bursts.iter().map(|&b| rounds_in(inp, b)).collect();
        let cached = cached_ssthresh(inp);
        let hystart_exit = if cached { hystart_exit(inp) } else { None };
        Start { bursts, ss_rounds, cached: cached && hystart_exit.is_none(), hystart_exit, cold: cold_start(inp, retransmissions) }
    }

    /// Request/response: the later responses (all of them without a
    /// handshake in the capture) restarted from the initial window.
    pub fn responses_restart(&self, has_handshake: bool) -> bool {
        let later = if has_handshake { &self.ss_rounds[1.min(self.ss_rounds.len())..] } else { &self.ss_rounds[..] };
        let restarts = later.iter().filter(|&&n| n >= RESTART_MIN_ROUNDS).count();
        !later.is_empty() && restarts * 2 >= later.len()
    }

    pub fn rounds(&self) -> usize {
        self.ss_rounds.iter().sum()
    }

    pub fn findings(&self, inp: &Input, primary: Cause, reqresp: bool, out: &mut Vec<Finding>) {
        let (iv, first) = (inp.iv, inp.path.first_ns);
        if self.cached || primary == Cause::CachedSsthresh {
            out.push(finding(
                "early_slow_start_exit",
                format!(
                    "growth turned linear after {} per RTT with no loss before it: the connection left slow start at a tiny window, as a cached ssthresh (ip tcp_metrics) does",
                    fmt_bytes(iv.get(1).map_or(0, |x| x.new_bytes) as f64)
                ),
                &[("bytes_per_rtt_at_exit", json!(iv.get(1).map(|x| x.new_bytes)))],
                Evidence {
                    frames: vec![inp.r.data[0].frame],
                    time_ranges: vec![(calc::s_from_ns(first as f64), calc::s_from_ns(iv.get(4).map_or(first, |x| x.start_ns) as f64))],
                },
            ));
        }
        if let Some((i, rise)) = self.hystart_exit {
            out.push(finding(
                "hystart_exit",
                format!(
                    "slow start ended without loss at {} per RTT when the RTT rose {} in one round: CUBIC's HyStart delay exit (a queue or jitter on the path), not a cached ssthresh",
                    fmt_bytes(iv[i].new_bytes as f64),
                    fmt_ms(rise)
                ),
                &[("bytes_per_rtt_at_exit", json!(iv[i].new_bytes)), ("rtt_rise_ms", num(rise))],
                Evidence { frames: vec![], time_ranges: vec![(calc::s_from_ns(iv[i].start_ns as f64), calc::s_from_ns((iv[i].start_ns + inp.path.width_ns()) as f64))] },
            ));
        }
        let ss = inp.shares.slow_start;
        if ss > FINDING_MIN_SHARE || primary == Cause::SlowStart {
            let n = self.bursts.len();
            out.push(finding(
                "slow_start",
                format!(
                    "{} slow-start round trips over {} burst{} of data{}",
                    self.rounds(),
                    n,
                    if n == 1 { "" } else { "s" },
                    if reqresp { ", each after an idle period" } else { "" }
                ),
                &[("rounds", json!(self.rounds())), ("bursts", json!(n)), ("share", num(ss))],
                Evidence { frames: vec![], time_ranges: inp.runs_of(Limit::SlowStart) },
            ));
        }
    }
}

/// Slow-start rounds in a burst: its intervals in slow start, but no more
/// than the trains of data in it (a response sent in one train is split
/// between two intervals when it straddles a boundary).
fn rounds_in(inp: &Input, (a, b): (usize, usize)) -> usize {
    let (iv, data, width_ns) = (inp.iv, &inp.r.data, inp.path.width_ns());
    let n = inp.states[a..b].iter().filter(|s| **s == Limit::SlowStart).count();
    let (t0, t1) = (iv[a].start_ns, iv[b - 1].start_ns + width_ns);
    let gap = width_ns / TRAIN_GAP_INTERVAL_DIV;
    let j = data.partition_point(|x| x.t_ns < t0);
    let mut trains = 0usize;
    let mut last = i64::MIN;
    for x in data[j..].iter().take_while(|x| x.t_ns < t1) {
        if last == i64::MIN || x.t_ns - last > gap {
            trains += 1;
        }
        last = x.t_ns;
    }
    n.min(trains.max(1))
}

/// The flight of interval `i` (the new bytes when larger: a round split
/// between two intervals).
fn flight(inp: &Input, i: usize) -> u64 {
    let it = &inp.iv[i];
    if inp.path.sender_side { it.max_flight.max(it.new_bytes) } else { it.new_bytes }
}

/// Growth linear from the start, at a small window, with no loss, the
/// window open and more data waiting. The rounds begin with the first
/// interval that carries a full segment: a short first write (a protocol's
/// greeting, iperf3's cookie, a request) and the wait for its answer are
/// the application's turn, and a window not used does not grow (RFC 7661;
/// Linux's tcp_cwnd_validate), so the rounds after it are the window's
/// first. The drain that wait leaves in that interval, before its data,
/// is the greeting's.
fn cached_ssthresh(inp: &Input) -> bool {
    let (iv, states, smss) = (inp.iv, inp.states, inp.path.smss as u64);
    let n = CACHED_EARLY_INTERVALS;
    if inp.cs.started_mid_capture || !inp.cs.handshake_seen() {
        return false;
    }
    let Some(s) = iv.iter().take(CACHED_GREETING_MAX_INTERVALS + 1).position(|x| x.new_bytes >= smss) else {
        return false;
    };
    if iv.len() < s + n {
        return false;
    }
    let (iv, states) = (&iv[s..s + n], &states[s..s + n]);
    let no_loss_early = iv.iter().all(|x| x.retx_pkts == 0);
    let open = states.iter().all(|s| *s != Limit::ReceiverWindow && *s != Limit::ReceiverApplication);
    let first_checked = usize::from(s > 0);
    let not_drained = iv[first_checked..4].iter().all(|x| !(inp.path.sender_side && x.drained) && !x.reverse_data);
    let round = |i: usize| flight(inp, s + i);
    let f1 = round(1).max(1) as f64;
    let f3 = round(3) as f64;
    no_loss_early
        && open
        && not_drained
        && round(1) <= CACHED_MAX_SEGMENTS * smss
        && f3 < CACHED_LINEAR_MAX * f1
        && f3 >= f1 * CACHED_LINEAR_MIN
}

/// A round still doubling whose RTT rose by HyStart's threshold: that
/// round, not a cached value, ended slow start.
fn hystart_exit(inp: &Input) -> Option<(usize, f64)> {
    let iv = inp.iv;
    let smss = inp.path.smss as u64;
    let base = inp.path.lowest_rtt_ms()?;
    let rise = (base / HYSTART_DELAY_DIV).clamp(HYSTART_DELAY_MIN_MS, HYSTART_DELAY_MAX_MS);
    (1..HYSTART_ROUNDS.min(iv.len())).find_map(|i| {
        let doubling = flight(inp, i) >= HYSTART_LOW_WINDOW * smss && flight(inp, i) as f64 >= HYSTART_DOUBLING * flight(inp, i - 1) as f64;
        let r = calc::ms_from_us(iv[i].rtt_min_us as f64);
        (doubling && iv[i].rtt_min_us > 0 && r > base + rise).then_some((i, r - base))
    })
}

/// A new connection's window still growing from the initial window when
/// the data ran out (slow start left early, e.g. by HyStart, then linear
/// growth): the cost is the cold start.
fn cold_start(inp: &Input, retransmissions: u64) -> bool {
    let (iv, states) = (inp.iv, inp.states);
    inp.cs.handshake_seen()
        && !inp.cs.started_mid_capture
        && retransmissions == 0
        && inp.shares.slow_start > 0.0
        && inp.shares.busy_intervals <= COLD_START_MAX_BUSY_RTTS
        && states.first() == Some(&Limit::SlowStart)
        && {
            // Later round trips carried more than earlier ones (the last,
            // partial one left out).
            let busy: Vec<u64> = iv.iter().zip(states).filter(|(_, s)| **s != Limit::Idle).map(|(x, _)| x.new_bytes).collect();
            let n = busy.len().saturating_sub(1);
            n >= COLD_START_MIN_ROUNDS && {
                let (a, b) = busy[..n].split_at(n / 2);
                let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len().max(1) as f64;
                mean(b) >= COLD_START_GROWTH * mean(a)
            }
        }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::{testkit, Shares};
    use crate::limits::Interval;

    fn rounds(segs: &[u64]) -> Vec<Interval> {
        segs.iter()
            .enumerate()
            .map(|(k, &s)| Interval {
                start_ns: k as i64 * 60_000_000,
                new_bytes: s * 1448,
                data_pkts: s as u32,
                max_flight: s * 1448,
                win_max: 1 << 22,
                win_min: 1 << 22,
                rtt_min_us: 60_000,
                snd_nxt: i64::MIN,
                acked: i64::MIN,
                ..Default::default()
            })
            .collect()
    }

    fn start(iv: &[Interval], states: &[Limit]) -> Start {
        let mut cs = testkit::summary();
        cs.handshake_rtt_ms = Some(60.0);
        let path = testkit::path(true, 60.0);
        let r = testkit::records();
        let inp = Input { cs: &cs, d: 0, ds: &cs.directions[0], peer: &cs.directions[1], r: &r, path: &path, iv, states, shares: Shares::of(states) };
        Start::detect(&inp, 0)
    }

    #[test]
    fn linear_growth_from_six_segments_is_a_cached_ssthresh_and_doubling_is_not() {
        let iv = rounds(&[6, 7, 8, 9, 10, 11, 12, 13]);
        let states = vec![Limit::CongestionWindow; 8];
        assert!(start(&iv, &states).cached);
        let iv = rounds(&[10, 20, 40, 80, 160, 160, 160, 160]);
        let states = [vec![Limit::SlowStart; 4], vec![Limit::BottleneckLink; 4]].concat();
        assert!(!start(&iv, &states).cached);
    }

    /// iperf3 over a route with a cached ssthresh of 8 (at the sender,
    /// 80 ms): a 37-byte cookie, a round trip's wait for the test to
    /// start (a drain), then IW10 growing a segment every second round.
    #[test]
    fn a_greeting_before_the_rounds_does_not_hide_a_cached_ssthresh() {
        let mut iv = rounds(&[0, 10, 10, 11, 11, 12, 12, 13]);
        iv[0].new_bytes = 37;
        iv[1].drained = true;
        let states = vec![Limit::CongestionWindow; 8];
        assert!(start(&iv, &states).cached);
        // a drain after the first round of the window's own is the
        // application's, and the rounds tell nothing
        iv[2].drained = true;
        assert!(!start(&iv, &states).cached);
        // slow start after the greeting is no cache
        let mut iv = rounds(&[0, 10, 20, 40, 80, 160, 160, 160]);
        iv[0].new_bytes = 37;
        assert!(!start(&iv, &states).cached);
    }

    #[test]
    fn an_rtt_rise_while_doubling_is_hystart_not_a_cache() {
        // grows 10 -> 20 -> 24 -> 26: linear after round 1; round 1's RTT
        // rose 16 ms over 60 ms (threshold 60/8 = 7.5 ms)
        let mut iv = rounds(&[10, 20, 21, 22, 23, 24, 25, 26]);
        iv[1].rtt_min_us = 76_000;
        let states = vec![Limit::CongestionWindow; 8];
        let s = start(&iv, &states);
        assert!(!s.cached);
        let (i, rise) = s.hystart_exit.unwrap();
        assert_eq!(i, 1);
        assert!((rise - 16.0).abs() < 1e-9);
    }

    #[test]
    fn a_short_transfer_still_growing_is_a_cold_start() {
        let iv = rounds(&[10, 15, 22, 33, 50, 10]);
        let states = [vec![Limit::SlowStart; 3], vec![Limit::CongestionWindow; 3]].concat();
        assert!(start(&iv, &states).cold);
        let flat = rounds(&[[10].as_slice(), &[40; 18], &[10]].concat());
        let states = [vec![Limit::SlowStart; 2], vec![Limit::SendBuffer; 18]].concat();
        assert!(!start(&flat, &states).cold);
    }
}
