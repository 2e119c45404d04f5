//! Spurious retransmissions: segments sent again although the original
//! arrived. The flow model flags those already acknowledged and those the
//! receiver reported as duplicates (D-SACK, RFC 2883); at the sender, an
//! ACK for the original arriving sooner after the retransmission than any
//! ACK for the retransmission could (the Eifel idea, RFC 3522: the ACK
//! answers the original) marks one too.

use tcpwhy_core::units::calc;
use super::{finding, Input};
use crate::model::{Evidence, Finding};
use serde_json::json;
use std::collections::{HashMap, HashSet};
use tcpwhy_core::Cause;
use tcpwhy_flow::Flags;

/// An ACK covering a retransmission within this share of the base RTT
/// after it answers the original (the retransmission's own ACK needs a
/// whole round trip).
pub const QUICK_ACK_RTT_SHARE: f64 = 0.5;
/// The data's RTT this factor above the handshake's and
/// [`RTT_JUMP_MIN_MS`] above it: the SYN was answered by a box nearer than
/// the receiver (a proxy, a load balancer, a SYN cookie front), so the RTO,
/// first computed from the handshake (RFC 6298 2.2), is far too short for
/// the data (seed case 5.1). Linux's minimum RTO is 200 ms (TCP_RTO_MIN);
/// the jump matters when the data's RTT approaches it.
pub const RTT_JUMP_FACTOR: f64 = 4.0;
pub const RTT_JUMP_MIN_MS: f64 = 10.0;
/// The handshake RTT is floored at this (ms) for the factor: loopback and
/// same-host handshakes take microseconds.
const HANDSHAKE_FLOOR_MS: f64 = 0.05;
/// Without an RTT jump, spurious retransmissions are the story only when
/// there are at least this many, they are at least half the
/// retransmissions, and no limit they cannot tighten held the sender
/// [`HELD_ELSEWHERE_MAX_SHARE`] of the time. A spurious retransmission
/// costs the sender what a loss does, a congestion response (cwnd and
/// ssthresh cut, RFC 5681 3.2; back to one segment after a timeout, RFC
/// 6298 5.5) until undone; that cost shows only while the congestion
/// window is the limit. The receiver's window and reader, the send buffer
/// and the sending application hold the sender whatever the congestion
/// window is: a lone tail-loss probe at a full receive window, or frames
/// the capture reordered (the ACK captured before the data it covers,
/// read as a retransmission of acknowledged data) in a transfer its
/// application paces, are not the story. Nor is a direction idle most of
/// the capture, that sends only when its application has something to
/// say (measurement messages beside an upload): the idle time counts with
/// those limits, over the whole capture.
pub const SPURIOUS_MIN_COUNT: u64 = 3;
/// At the receiver, a retransmission of a segment that had arrived in
/// order (no hole before it, nothing beyond it: the sender had no loss
/// signal, no duplicate ACK, no SACK) was sent by a timer (RTO or tail-loss
/// probe). Arriving less than this share of the data's round trip after
/// the original, that timer ran shorter than the round trip, which a
/// sender that measured the data's RTT never does (RFC 6298 2.3: RTO >=
/// SRTT; RFC 8985 7.2: PTO = 2 SRTT). Its RTT came from a shorter round
/// trip: a SYN answered nearer than the receiver. The share leaves the
/// round trip's jitter aside.
pub const EARLY_TIMER_MAX_RTT_SHARE: f64 = 0.9;
/// No timer fires sooner than this (ms) after a send: Linux adds
/// TCP_TIMEOUT_MIN (2 jiffies) to a tail-loss probe's 2 SRTT
/// (tcp_schedule_loss_probe), and its RTO is at least TCP_RTO_MIN (200 ms).
/// A copy sooner is the capture's own duplicate, not a timer's.
pub const EARLY_TIMER_MIN_MS: f64 = 2.0;
/// Retransmissions looked at for an early timer (the first ones: an RTT
/// jump's timers fire at the start).
const EARLY_TIMER_MAX_CHECKED: usize = 16;
pub const HELD_ELSEWHERE_MAX_SHARE: f64 = 0.5;
const MAX_EVIDENCE: usize = 8;

#[derive(Debug, Default)]
pub(crate) struct Spurious {
    pub frames: Vec<u64>,
    /// (handshake RTT, data RTT) when the data's RTT jumped.
    pub rtt_jump: Option<(f64, f64)>,
    /// At the receiver, (how long after its original a timer's
    /// retransmission arrived, the data's RTT), both ms, when that was less
    /// than the round trip ([`EARLY_TIMER_MAX_RTT_SHARE`]).
    pub early_timer: Option<(f64, f64)>,
}

impl Spurious {
    pub fn detect(inp: &Input) -> Spurious {
        let (r, path) = (inp.r, inp.path);
        let dsack: HashSet<u64> = inp.ds.dsack_spurious_frames.iter().copied().collect();
        let flagged = |x: &crate::record::DataRec| x.flags.has(Flags::SPURIOUS_RETRANSMISSION) || dsack.contains(&x.frame);
        let retx = r.data.iter().filter(|x| x.is_retransmission());
        let mut frames = Vec::new();
        if path.sender_side {
            if let Some(bns) = path.base_ns() {
                let quick_ns = (bns as f64 * QUICK_ACK_RTT_SHARE) as i64;
                let mut j = 0usize;
                for x in retx {
                    while j < r.acks.len() && r.acks[j].t_ns <= x.t_ns {
                        j += 1;
                    }
                    let quick = r.acks[j..].iter().take_while(|a| a.t_ns - x.t_ns < quick_ns).any(|a| a.ack >= x.end());
                    if quick || flagged(x) {
                        frames.push(x.frame);
                    }
                }
            }
        } else {
            frames.extend(retx.filter(|x| flagged(x)).map(|x| x.frame));
        }
        // The data's RTT without a queue: a proxy that answered the SYN
        // lengthens every data round trip, the lowest too, while a queue
        // that others filled later (or this flow itself) leaves the first
        // ones at the handshake's. At the sender that is the smallest
        // sample (`Path::min_rtt`), not the base percentile, which a queue
        // standing through most of the flow raises (a deep shaper's: 328 ms
        // against a handshake of 101 ms and a smallest sample of about
        // that).
        let data_rtt = if path.sender_side { path.min_rtt_ms().or(path.rtt.base_ms()) } else { path.echo_base_ms().or(path.rtt.median_ms()) };
        let rtt_jump = match (inp.cs.handshake_rtt_ms, data_rtt) {
            (Some(h), Some(b)) if b > RTT_JUMP_FACTOR * h.max(HANDSHAKE_FLOOR_MS) && b - h > RTT_JUMP_MIN_MS => Some((h, b)),
            _ => None,
        };
        let early_timer = if path.sender_side { None } else { data_rtt.and_then(|b| early_timer(r, b)) };
        Spurious { frames, rtt_jump, early_timer }
    }

    pub fn count(&self) -> u64 {
        self.frames.len() as u64
    }

    /// Spurious retransmissions matter when the RTT jumped after the
    /// handshake (every early timer fires), or when there are several and
    /// no window explains the time. Behind a deep queue (`deep_queue`,
    /// `detect::loss::DEEP_QUEUE_FACTOR` times the path's RTT: a standing
    /// queue of two RTTs and more) the link held the sender too: a
    /// congestion response cuts the window by at most half (RFC 5681
    /// 3.1), which such a queue absorbs with the link still full, so the
    /// time the link was the limit counts as held elsewhere.
    pub fn explains(&self, inp: &Input, retransmissions: u64, deep_queue: bool) -> bool {
        let n = self.count();
        let link_held = if deep_queue { super::capture_share(inp.states, &[tcpwhy_core::Limit::BottleneckLink]) } else { 0.0 };
        let held_elsewhere = super::held_elsewhere_share(inp.states) + link_held;
        n >= 1
            && n * 2 >= retransmissions
            && (self.rtt_jump.is_some() || self.early_timer.is_some() || (n >= SPURIOUS_MIN_COUNT && held_elsewhere < HELD_ELSEWHERE_MAX_SHARE))
    }

    pub fn findings(&self, retransmissions: u64, out: &mut Vec<Finding>) {
        if self.count() == 0 && self.rtt_jump.is_none() {
            return;
        }
        let early = self.early_timer.map_or(String::new(), |(g, b)| {
            format!(
                "; a timer's retransmission arrived {g:.1} ms after its original, less than the data's round trip ({b:.1} ms): the sender's timer was set from a shorter round trip (a SYN answered nearer than the receiver)"
            )
        });
        out.push(finding(
            "spurious_retransmissions",
            format!(
                "{} of {} retransmissions were spurious (the original was acknowledged anyway){}{}",
                self.count(),
                retransmissions,
                self.rtt_jump.map_or(String::new(), |(h, b)| format!(
                    "; the handshake took {h:.1} ms but data round trips {b:.1} ms: timers set from the handshake fire too early"
                )),
                early
            ),
            &[
                ("spurious", json!(self.count())),
                ("retransmissions", json!(retransmissions)),
                ("handshake_rtt_ms", json!(self.rtt_jump.map(|x| x.0))),
                ("data_rtt_ms", json!(self.rtt_jump.or(self.early_timer).map(|x| x.1))),
                ("early_timer_ms", json!(self.early_timer.map(|x| x.0))),
            ],
            Evidence { frames: self.frames.iter().take(MAX_EVIDENCE).copied().collect(), time_ranges: vec![] },
        ));
    }

    pub fn cause(&self) -> Cause {
        Cause::SpuriousRetransmission
    }
}

/// At the receiver, the first retransmission (of up to
/// [`EARLY_TIMER_MAX_CHECKED`]) that a timer sent less than a round trip
/// after its original arrived in order (see [`EARLY_TIMER_MAX_RTT_SHARE`]):
/// (ms after the original, `data_rtt_ms`).
fn early_timer(r: &crate::record::DirRecords, data_rtt_ms: f64) -> Option<(f64, f64)> {
    let max_ns = calc::ns_from_ms(EARLY_TIMER_MAX_RTT_SHARE * data_rtt_ms) as i64;
    let retx: Vec<&crate::record::DataRec> = r.data.iter().filter(|x| x.is_retransmission()).take(EARLY_TIMER_MAX_CHECKED).collect();
    if retx.is_empty() {
        return None;
    }
    // Each original's arrival (the last first-time segment with the
    // retransmission's start before it) and whether it arrived in order:
    // at the top of what had arrived (nothing beyond it first, so no
    // duplicate ACK or SACK could have told the sender), with no
    // retransmission before it (a hole's repair, sent after it, that RACK
    // could weigh it against).
    let mut originals: HashMap<i64, (i64, bool)> = retx.iter().map(|x| (x.seq, (i64::MIN, false))).collect();
    let (mut highest, mut last_retx_ns) = (i64::MIN, i64::MIN);
    for d in r.data.iter().filter(|d| d.len > 0) {
        if d.is_retransmission() {
            last_retx_ns = d.t_ns;
        } else if let Some(o) = originals.get_mut(&d.seq) {
            let in_order = (highest == i64::MIN || highest == d.seq) && last_retx_ns == i64::MIN;
            *o = (d.t_ns, in_order);
        }
        highest = highest.max(d.end());
    }
    retx.iter().find_map(|x| {
        let (t, in_order) = originals[&x.seq];
        let gap = x.t_ns.saturating_sub(t);
        (in_order && gap as f64 >= calc::ns_from_ms(EARLY_TIMER_MIN_MS) && gap < max_ns).then(|| (calc::ms_from_ns(gap as f64), data_rtt_ms))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::{testkit, Shares};
    use crate::record::{AckRec, DataRec};
    use tcpwhy_core::Limit;

    fn seg(t_ms: i64, seq: i64, retx: bool) -> DataRec {
        let mut flags = Flags::default();
        if retx {
            flags.set(Flags::RETRANSMISSION);
        }
        DataRec { t_ns: t_ms * 1_000_000, seq, frame: t_ms as u64, len: 1000, in_flight: 0, flags, tsecr: 0 }
    }

    fn ack(t_ms: i64, ack: i64) -> AckRec {
        AckRec { t_ns: t_ms * 1_000_000, ack, frame: 0, window: 65535, rtt_us: 0, payload: 0, flags: Flags::default(), tsval: 0 }
    }

    /// The receiver's view of a SYN answered within a millisecond and data
    /// round trips of 320 ms: the first segments arrive in order, and
    /// Linux's 200 ms RTO (from the handshake's RTT) sends the first again
    /// 210 ms later, before any ACK could have returned.
    #[test]
    fn a_timer_shorter_than_the_round_trip_shows_at_the_receiver() {
        let mut r = testkit::records();
        r.data = (0..10).map(|i| seg(i, i * 1000, false)).collect();
        r.data.push(seg(210, 0, true));
        assert_eq!(early_timer(&r, 320.0), Some((210.0, 320.0)));
        // a round trip and more after it: a timer that may be right
        assert_eq!(early_timer(&r, 200.0), None);
        // the original filled a hole (something beyond it arrived first):
        // duplicate ACKs and SACKs could have asked for it
        let mut holed = r.clone();
        holed.data.swap(0, 1);
        for (k, d) in holed.data.iter_mut().enumerate().take(2) {
            d.t_ns = k as i64 * 1_000_000;
        }
        assert_eq!(early_timer(&holed, 320.0), None);
        // a copy within a millisecond is the capture's, not a timer's
        let mut dup = testkit::records();
        dup.data = vec![seg(0, 0, false), seg(1, 0, true)];
        assert_eq!(early_timer(&dup, 320.0), None);
    }

    #[test]
    fn an_ack_for_the_original_right_after_the_retransmission_marks_it_spurious() {
        let mut cs = testkit::summary();
        cs.handshake_rtt_ms = Some(1.4);
        let mut path = testkit::path(true, 260.0);
        path.rtt.handshake = Some(tcpwhy_core::units::Duration::from_millis_f64(1.4));
        let mut r = testkit::records();
        // the RTO (from a 1.4 ms handshake) fires at 200 ms; the original's
        // ACK arrives at 260 ms, 60 ms after the retransmission
        r.data = vec![seg(0, 0, false), seg(200, 0, true), seg(201, 1000, false), seg(400, 1000, true), seg(500, 2000, false), seg(700, 2000, true)];
        r.acks = vec![ack(260, 1000), ack(461, 2000), ack(760, 3000)];
        let states = vec![Limit::CongestionWindow; 4];
        let inp = Input { cs: &cs, d: 0, ds: &cs.directions[0], peer: &cs.directions[1], r: &r, path: &path, iv: &[], states: &states, shares: Shares::of(&states) };
        let s = Spurious::detect(&inp);
        assert_eq!(s.frames, vec![200, 400, 700]);
        assert_eq!(s.rtt_jump, Some((1.4, 260.0)));
        assert!(s.explains(&inp, 3, false));
        // an ACK a whole round trip later answers the retransmission itself
        let mut late = testkit::records();
        late.data = r.data[..2].to_vec();
        late.acks = vec![ack(460, 1000)];
        let inp = Input { r: &late, ..inp };
        assert!(Spurious::detect(&inp).frames.is_empty());
    }

    #[test]
    fn spurious_retransmissions_without_an_rtt_jump_matter_only_where_the_congestion_window_limits() {
        let cs = testkit::summary();
        let path = testkit::path(true, 20.0);
        let r = testkit::records();
        let s = Spurious { frames: vec![10, 20, 30], rtt_jump: None, early_timer: None };
        let verdict_with = |states: Vec<Limit>, deep_queue: bool| {
            let inp = Input { cs: &cs, d: 0, ds: &cs.directions[0], peer: &cs.directions[1], r: &r, path: &path, iv: &[], states: &states, shares: Shares::of(&states) };
            s.explains(&inp, 3, deep_queue)
        };
        let verdict = |states: Vec<Limit>| verdict_with(states, false);
        let mut window_bound = vec![Limit::CongestionWindow; 6];
        window_bound.extend([Limit::SenderApplication; 4]);
        assert!(verdict(window_bound));
        // the sender's own pace held it: a cwnd cut cost nothing
        let mut paced = vec![Limit::SenderApplication; 9];
        paced.push(Limit::CongestionWindow);
        assert!(!verdict(paced));
        // the receive window held it
        let mut held = vec![Limit::ReceiverWindow; 6];
        held.extend([Limit::CongestionWindow; 4]);
        assert!(!verdict(held));
        // a direction that sends only now and then: idle most of the
        // capture, the window-bound rest cost nothing that mattered
        let mut quiet = vec![Limit::Idle; 8];
        quiet.extend([Limit::CongestionWindow; 2]);
        assert!(!verdict(quiet));
        let mut busy = vec![Limit::Idle; 2];
        busy.extend([Limit::CongestionWindow; 8]);
        assert!(verdict(busy));
        // a full link: a window cut empties a shallow queue and costs
        // throughput, while a deep one (two RTTs and more) absorbs it
        let mut full = vec![Limit::BottleneckLink; 4];
        full.extend([Limit::SendBuffer; 2]);
        full.extend([Limit::CongestionWindow; 4]);
        assert!(verdict_with(full.clone(), false));
        assert!(!verdict_with(full, true));
    }
}
