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

/// The median of a state's intervals, by `value`, over those `keep`
/// holds (all of them when it holds none).
fn median_of(inp: &Input, state: Limit, value: impl Fn(&crate::limits::Interval) -> u64, keep: impl Fn(&crate::limits::Interval) -> bool) -> u64 {
    let of_state: Vec<&crate::limits::Interval> = inp.iv.iter().zip(inp.states).filter(|(_, s)| **s == state).map(|(x, _)| x).collect();
    let kept: Vec<&crate::limits::Interval> = of_state.iter().copied().filter(|x| keep(x)).collect();
    let mut v: Vec<u64> = if kept.is_empty() { of_state } else { kept }.into_iter().map(value).collect();
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

pub(crate) fn findings(inp: &Input, primary: Cause, out: &mut Vec<Finding>) {
    let (sb, sa) = (inp.shares.send_buffer, inp.shares.sender_application);
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
        findings(&inp, Cause::SendBuffer, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].kind, "flight_plateau");
        assert_eq!(out[0].numbers["flight_bytes"], json!(30 * 1448));
        assert_eq!(out[0].evidence.time_ranges, vec![(0.02, 0.06)]);
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
        findings(&inp, Cause::SendBuffer, &mut out);
        assert_eq!(out[0].numbers["flight_bytes"], json!(30 * 1448));
    }
}
