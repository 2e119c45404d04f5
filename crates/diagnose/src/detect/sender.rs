//! The sender's side: a send buffer that caps the flight below an open
//! window, and an application that writes less than the path takes (or
//! waits for the receiver's application, an application-level window).
//!
//! Both are states of the intervals (`crate::states`); which one leads is
//! the decision step's. This module words their evidence.

use super::{finding, num, Input, FINDING_MIN_SHARE};
use crate::model::{Evidence, Finding};
use serde_json::json;
use tcpwhy_core::units::fmt_bytes;
use tcpwhy_core::{Cause, Limit};

/// A writer blocked on a full send buffer is woken by the ACK that frees
/// room (tcp_check_space -> sk_stream_write_space) and what it writes goes
/// out at once (tcp_push): at the sender, a burst of a send-buffer-limited
/// flow begins within this long after an ACK on a host that is not
/// saturated.
pub const WAKE_MAX_NS: i64 = 1_000_000;
/// A burst begins after a silence longer than the wake-up window, so the
/// ACK before it is not one of the burst's own.
pub const BURST_GAP_MIN_NS: i64 = 2 * WAKE_MAX_NS;
/// Of a send-buffer-limited sender's bursts, all but those after ACKs the
/// capture dropped and the sends of timers (tail-loss probes, RTO) follow
/// an ACK within the wake-up window (held out: 97 to 100%).
/// Fewer, and the sender writes on its own clock: the application paces
/// it.
pub const WOKEN_MIN_SHARE: f64 = 0.8;
/// Bursts the wake-up test needs.
pub const WAKE_MIN_BURSTS: usize = 20;
/// The test tells the two clocks apart only where an instant unrelated to
/// the ACKs falls in a wake-up window less often than this (ACKs sparse
/// enough); denser ACKs wake nothing they can be told from.
pub const WAKE_COINCIDENCE_MAX: f64 = 0.5;
/// A sender paced by its application below this share of the busy time,
/// with its bursts woken by nothing: the `high` verdict needs the bursts
/// clearly unclocked.
pub const APP_CLOCK_HIGH_MAX_WOKEN: f64 = 0.5;

/// When the sender's bursts begin: after the ACK that freed buffer room
/// (a writer a full send buffer blocks), or on the application's own
/// clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Wakes {
    /// Bursts of new data after a silence of [`BURST_GAP_MIN_NS`].
    pub bursts: usize,
    /// Those that began within the wake-up window of an ACK.
    pub woken: usize,
    /// The share of the direction's time inside a wake-up window: what
    /// an unrelated burst start hits by chance.
    pub coincidence: f64,
    /// The median time from one burst to the next, and the median bytes
    /// a burst carries.
    pub period_ns: i64,
    pub burst_bytes: u64,
}

impl Wakes {
    pub fn woken_share(&self) -> f64 {
        self.woken as f64 / self.bursts.max(1) as f64
    }

    /// The bursts follow the application's clock, not the ACKs: enough
    /// of them, ACKs sparse enough to tell, and fewer woken than a full
    /// send buffer wakes.
    pub fn app_clocked(&self) -> bool {
        self.bursts >= WAKE_MIN_BURSTS && self.coincidence < WAKE_COINCIDENCE_MAX && self.woken_share() < WOKEN_MIN_SHARE
    }

    /// The application's pace in words: the bursts' median size and
    /// spacing (a write the congestion window splits counts as two).
    pub fn pace_text(&self) -> String {
        format!(
            "bursts of about {} (median) every {:.1} ms",
            fmt_bytes(self.burst_bytes as f64),
            self.period_ns as f64 / 1e6
        )
    }
}

/// The wake-up test over a direction's records, at the sender (None at
/// the receiver, or without the records it needs): each burst of new data,
/// and whether an ACK came within the wake-up window before it.
pub(crate) fn wakes(inp: &Input) -> Option<Wakes> {
    // At the sender only: there the ACK and the write it wakes meet on one
    // host. At the receiver the ACK left a round trip before the burst
    // arrives, and that round trip varies with the queue the sender's own
    // bursts build (held out: 60 to 88 ms on a 60 ms path behind a 64 KiB
    // send buffer), more than any window that still tells the clocks apart.
    if !inp.path.sender_side {
        return None;
    }
    let (shift, window) = (0i64, WAKE_MAX_NS);
    // each ACK as the burst it may wake sees it (the records are in
    // capture order: no copy, a search per burst)
    let acks = &inp.r.acks;
    let new_data = || inp.r.data.iter().filter(|d| d.len > 0 && !d.is_retransmission());
    let (first, last) = (new_data().next()?.t_ns, new_data().next_back()?.t_ns);
    if last <= first {
        return None;
    }
    let (mut bursts, mut woken) = (0usize, 0usize);
    let mut starts: Vec<i64> = Vec::new();
    let mut sizes: Vec<u64> = Vec::new();
    let mut prev = i64::MIN;
    for d in new_data() {
        if prev != i64::MIN && d.t_ns - prev >= BURST_GAP_MIN_NS {
            bursts += 1;
            starts.push(d.t_ns);
            sizes.push(0);
            // the last ACK at or before the burst's first segment
            let i = acks.partition_point(|a| a.t_ns + shift <= d.t_ns);
            if i > 0 && d.t_ns - (acks[i - 1].t_ns + shift) <= window {
                woken += 1;
            }
        }
        if let Some(b) = sizes.last_mut() {
            *b += u64::from(d.len);
        }
        prev = d.t_ns;
    }
    // the time inside some ACK's wake-up window, from first to last data
    let (mut covered, mut until) = (0i64, i64::MIN);
    for a in acks.iter().map(|a| a.t_ns + shift).filter(|a| *a + window > first && *a < last) {
        let (from, to) = (a.max(until).max(first), (a + window).min(last));
        if to > from {
            covered += to - from;
            until = to;
        }
    }
    let mut gaps: Vec<i64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    let period_ns = crate::rank::quantile_i64(&mut gaps, 0.5).unwrap_or(0);
    sizes.sort_unstable();
    let burst_bytes = sizes.get(sizes.len() / 2).copied().unwrap_or(0);
    Some(Wakes { bursts, woken, coincidence: covered as f64 / (last - first) as f64, period_ns, burst_bytes })
}

/// The median of a state's intervals, by `value`, over those `keep`
/// holds (all of them when it holds none).
fn median_of(inp: &Input, state: Limit, value: impl Fn(&crate::limits::Interval) -> u64, keep: impl Fn(&crate::limits::Interval) -> bool) -> u64 {
    let of_state: Vec<&crate::limits::Interval> = inp.iv.iter().zip(inp.states).filter(|(_, s)| **s == state).map(|(x, _)| x).collect();
    let kept: Vec<&crate::limits::Interval> = of_state.iter().copied().filter(|x| keep(x)).collect();
    let mut v: Vec<u64> = if kept.is_empty() { of_state } else { kept }.into_iter().map(value).collect();
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

pub(crate) fn findings(inp: &Input, primary: Cause, app_clock: Option<&Wakes>, out: &mut Vec<Finding>) {
    let (sb, sa) = (inp.shares.send_buffer, inp.shares.sender_application);
    if let Some(w) = app_clock {
        out.push(finding(
            "application_clock",
            format!(
                "the sender wrote on its own clock, {}: {} of {} bursts began with no ACK in the {:.0} ms before them (by chance {:.0}%), where a writer a full send buffer blocks is woken by the ACK that frees room; the flat flight ({:.0}% of the busy time) is the application's pace",
                w.pace_text(),
                w.bursts - w.woken,
                w.bursts,
                WAKE_MAX_NS as f64 / 1e6,
                w.coincidence * 100.0,
                (sb + sa) * 100.0
            ),
            &[
                ("bursts", json!(w.bursts)),
                ("woken_by_ack", json!(w.woken)),
                ("coincidence", num(w.coincidence)),
                ("period_ms", num(w.period_ns as f64 / 1e6)),
                ("burst_bytes", json!(w.burst_bytes)),
            ],
            Evidence { frames: vec![], time_ranges: inp.runs_of(Limit::SendBuffer) },
        ));
        return;
    }
    if sb > FINDING_MIN_SHARE || primary == Cause::SendBuffer {
        let sender_side = inp.path.sender_side;
        // The flight is read where the sender sent: an interval in which
        // ACKs freed room and nothing left (crate::states) has none.
        let sent = |x: &crate::limits::Interval| x.data_pkts > 0;
        let plateau = median_of(inp, Limit::SendBuffer, |x| if sender_side { x.max_flight } else { x.new_bytes }, sent);
        let window = inp.rcv_win_max();
        // 0: the receiver's window scale is unknown (no handshake captured).
        let below = if window > 0 { format!("below the {} window", fmt_bytes(window as f64)) } else { "below a window of unknown scale".into() };
        out.push(finding(
            "flight_plateau",
            format!(
                "bytes in flight flat at about {} {below}, with no loss and no queueing: send-buffer limited {:.0}% of the busy time",
                fmt_bytes(plateau as f64),
                sb * 100.0
            ),
            &[("flight_bytes", json!(plateau)), ("window_bytes", json!(window)), ("share", num(sb))],
            Evidence { frames: vec![], time_ranges: inp.runs_of(Limit::SendBuffer) },
        ));
    }
    if sa > FINDING_MIN_SHARE || primary == Cause::SenderApplication {
        let typical = median_of(inp, Limit::SenderApplication, |x| x.new_bytes, |_| true);
        let drained = inp.iv.iter().filter(|x| x.drained).count();
        let reverse = inp.iv.iter().filter(|x| x.reverse_data).count();
        out.push(finding(
            "sender_application",
            format!(
                "the sender had nothing in flight for part of each round trip while the window was open: about {} per RTT{}; application-limited {:.0}% of the busy time",
                fmt_bytes(typical as f64),
                if reverse > 0 {
                    format!(", each burst following data from the receiver ({reverse} round trips): application-level flow control")
                } else {
                    String::new()
                },
                sa * 100.0
            ),
            &[("bytes_per_rtt", json!(typical)), ("drained_rtts", json!(drained)), ("reverse_data_rtts", json!(reverse)), ("share", num(sa))],
            Evidence { frames: vec![], time_ranges: inp.runs_of(Limit::SenderApplication) },
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::{testkit, Shares};
    use crate::record::{AckRec, DataRec, DirRecords};

    #[test]
    fn the_flight_plateau_is_the_median_flight_of_the_send_buffer_intervals() {
        let cs = testkit::summary();
        let path = testkit::path(true, 10.0);
        let r = testkit::records();
        let mut iv = testkit::flat(6, 30, path.width_ns());
        iv[5].max_flight = 99 * 1448;
        let states = [vec![Limit::SlowStart; 2], vec![Limit::SendBuffer; 4]].concat();
        let inp = Input { cs: &cs, d: 0, ds: &cs.directions[0], peer: &cs.directions[1], r: &r, path: &path, iv: &iv, states: &states, shares: Shares::of(&states) };
        let mut out = Vec::new();
        findings(&inp, Cause::SendBuffer, None, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].kind, "flight_plateau");
        assert_eq!(out[0].numbers["flight_bytes"], json!(30 * 1448));
        assert_eq!(out[0].evidence.time_ranges, vec![(0.02, 0.06)]);
    }

    /// 40 bursts of 10 segments, 20 ms apart, each ACKed 30 ms later; with
    /// `woken`, each burst leaves 50 µs after an ACK (a writer a full send
    /// buffer blocked), else on its own 20 ms clock, 7 ms after the last ACK.
    fn bursts(woken: bool) -> DirRecords {
        let mut r = testkit::records();
        let (mut seq, ms) = (0i64, 1_000_000i64);
        for k in 0..40i64 {
            let start = k * 20 * ms + if woken { 50_000 } else { 0 };
            for i in 0..10i64 {
                let t = start + i * 100_000;
                r.data.push(DataRec { t_ns: t, seq, frame: 0, len: 1448, in_flight: 0, flags: Default::default(), tsecr: 0 });
                seq += 1448;
                r.acks.push(AckRec { t_ns: t + 30 * ms, ack: seq, frame: 0, window: 1 << 20, rtt_us: 30_000, payload: 0, flags: Default::default(), tsval: 0 });
            }
            if woken {
                // the ACK that freed the room this burst fills
                r.acks.push(AckRec { t_ns: start - 50_000, ack: seq, frame: 0, window: 1 << 20, rtt_us: 0, payload: 0, flags: Default::default(), tsval: 0 });
            }
        }
        r.acks.sort_by_key(|a| a.t_ns);
        r
    }

    #[test]
    fn bursts_after_the_acks_are_a_full_send_buffer_and_bursts_on_a_timer_the_application() {
        let cs = testkit::summary();
        let path = testkit::path(true, 30.0);
        let iv = testkit::flat(5, 10, path.width_ns());
        let states = vec![Limit::SendBuffer; 5];
        for (woken, app) in [(true, false), (false, true)] {
            let r = bursts(woken);
            let inp = Input { cs: &cs, d: 0, ds: &cs.directions[0], peer: &cs.directions[1], r: &r, path: &path, iv: &iv, states: &states, shares: Shares::of(&states) };
            let w = wakes(&inp).expect("records enough");
            assert_eq!(w.bursts, 39, "{w:?}");
            assert_eq!(w.app_clocked(), app, "{w:?}");
            assert_eq!((w.period_ns, w.burst_bytes), (20_000_000, 14_480));
            assert!(w.coincidence < 0.2, "{w:?}");
            if app {
                // the ACKs 30 ms after each burst fall 10 ms before the next
                assert_eq!(w.woken, 0);
            }
        }
    }

    #[test]
    fn intervals_that_sent_nothing_do_not_set_the_flight_plateau() {
        let cs = testkit::summary();
        let path = testkit::path(true, 10.0);
        let r = testkit::records();
        // ACKs freed room and nothing left in three of the five
        let mut iv = testkit::flat(5, 30, path.width_ns());
        for x in &mut iv[2..] {
            (x.data_pkts, x.new_bytes, x.max_flight) = (0, 0, 0);
        }
        let states = vec![Limit::SendBuffer; 5];
        let inp = Input { cs: &cs, d: 0, ds: &cs.directions[0], peer: &cs.directions[1], r: &r, path: &path, iv: &iv, states: &states, shares: Shares::of(&states) };
        let mut out = Vec::new();
        findings(&inp, Cause::SendBuffer, None, &mut out);
        assert_eq!(out[0].numbers["flight_bytes"], json!(30 * 1448));
    }
}
