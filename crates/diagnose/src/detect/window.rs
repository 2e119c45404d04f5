//! The receiver's side: its window (the buffer behind it), window scaling
//! missing from a SYN, and an application that does not read.

use tcpwhy_core::units::calc;
use super::{endpoint_str, finding, num, Input, FINDING_MIN_SHARE};
use crate::model::{Evidence, Finding};
use serde_json::{json, Value};
use tcpwhy_core::units::{fmt_bytes, fmt_rate};
use tcpwhy_core::{Cause, Limit};
use tcpwhy_flow::Flags;

/// Without window scaling the window field is 16 bits (RFC 7323 2.2).
pub const UNSCALED_MAX_WINDOW: u64 = 65535;
/// Window scaling off is the cause when the 64 KiB window held the sender
/// this share of the busy time (and at least as long as the reader did)...
pub const WSCALE_OFF_MIN_WINDOW_SHARE: f64 = 0.3;
/// ...or held it this share, window and reader together above
/// [`WSCALE_OFF_MIN_WINDOW_SHARE`], with the window at zero less than
/// [`WSCALE_OFF_MAX_ZERO_TIME_SHARE`] of the time: a 64 KiB buffer that
/// also closes now and then is still capped by the missing scaling (a
/// bigger buffer absorbs the reader's pauses); a reader that holds it
/// closed most of the time is the receiving application.
pub const WSCALE_OFF_MIN_WINDOW_SHARE_WITH_READER: f64 = 0.1;
pub const WSCALE_OFF_MAX_ZERO_TIME_SHARE: f64 = 0.3;
/// The receiving application is the cause when its closing (or shrinking)
/// window held the sender this share of the busy time...
pub const RECEIVER_APP_MIN_SHARE: f64 = 0.25;
/// ...or the window sat at zero this share of the direction's time with the
/// state above [`RECEIVER_APP_MIN_SHARE_WITH_ZERO_TIME`].
pub const RECEIVER_APP_MIN_ZERO_TIME_SHARE: f64 = 0.1;
pub const RECEIVER_APP_MIN_SHARE_WITH_ZERO_TIME: f64 = 0.1;
/// ...or the window closed to zero at least [`READER_MIN_ZERO_WINDOWS`]
/// times, with the state above [`RECEIVER_APP_MIN_SHARE_WITH_ZERO_TIME`],
/// while the flow got less than this share of what its largest window
/// carries per base RTT. A zero window means the receive buffer filled:
/// the application left unread what had arrived (RFC 9293 3.8.6.2.2; a
/// reader that keeps up drains the buffer as it fills, and Linux
/// advertises zero only when the free space falls below a segment,
/// tcp_select_window). A buffer too small for the path, read as it
/// fills, is used to its size every round trip instead: the flow gets
/// about window / RTT. Getting under half of it at the path's own RTT
/// leaves the buffer's size out, and the reader's clock sets the rate (a
/// slow reader at 10 ms read as `receiver_window` `high` 3 times in 6,
/// its reader's share 0.24 against 0.25 for the shares alone).
pub const READER_WINDOW_UNUSED_SHARE: f64 = 0.5;
pub const READER_MIN_ZERO_WINDOWS: u64 = 2;

/// The receiver's window in numbers.
pub(crate) struct Window {
    /// Window scaling was not negotiated (one SYN lacked the option).
    pub scaling_off: bool,
    /// The largest window the receiver advertised (bytes).
    pub max_bytes: u64,
    /// Time at zero window.
    pub zero_window_s: f64,
}

impl Window {
    pub fn detect(inp: &Input) -> Window {
        Window {
            scaling_off: inp.ds.window_scaling == "not_negotiated" || inp.peer.window_scaling == "not_negotiated",
            max_bytes: inp.rcv_win_max(),
            zero_window_s: inp.peer.advertised_window.zero_window_s,
        }
    }

    /// The missing window scaling capped the transfer.
    pub fn scaling_off_explains(&self, inp: &Input) -> bool {
        let (rw, ra) = (inp.shares.receiver_window, inp.shares.receiver_application);
        self.scaling_off
            && self.max_bytes <= UNSCALED_MAX_WINDOW
            && ((rw >= WSCALE_OFF_MIN_WINDOW_SHARE && rw >= ra)
                || (rw >= WSCALE_OFF_MIN_WINDOW_SHARE_WITH_READER
                    && rw + ra >= WSCALE_OFF_MIN_WINDOW_SHARE
                    && self.zero_window_s < WSCALE_OFF_MAX_ZERO_TIME_SHARE * inp.duration_s()))
    }

    /// The receiving application held the window shut.
    pub fn reader_explains(&self, inp: &Input) -> bool {
        let ra = inp.shares.receiver_application;
        ra >= RECEIVER_APP_MIN_SHARE
            || (self.zero_window_s > RECEIVER_APP_MIN_ZERO_TIME_SHARE * inp.duration_s() && ra > RECEIVER_APP_MIN_SHARE_WITH_ZERO_TIME)
            || (inp.peer.flags.zero_window >= READER_MIN_ZERO_WINDOWS
                && ra > RECEIVER_APP_MIN_SHARE_WITH_ZERO_TIME
                && self.window_left_unused(inp))
    }

    /// The flow, while busy, got less than [`READER_WINDOW_UNUSED_SHARE`]
    /// of its largest window per base RTT.
    fn window_left_unused(&self, inp: &Input) -> bool {
        let busy = inp.states.iter().filter(|s| **s != Limit::Idle).count();
        let goodput = inp.ds.goodput_bps.map(|g| if busy > 0 { g * inp.states.len() as f64 / busy as f64 } else { g });
        let carries = inp.path.rtt.base_ms().filter(|b| *b > 0.0).map(|b| calc::bps(self.max_bytes as f64, calc::s_from_ms(b)));
        goodput.zip(carries).is_some_and(|(g, c)| g < READER_WINDOW_UNUSED_SHARE * c)
    }

    pub fn findings(&self, inp: &Input, primary: Cause, out: &mut Vec<Finding>) {
        let rw = inp.shares.receiver_window;
        if rw > FINDING_MIN_SHARE || primary == Cause::ReceiverWindow || primary == Cause::WindowScalingOff {
            out.push(self.plateau(inp));
        }
        if self.scaling_off {
            out.push(self.scaling_finding(inp));
        }
        let ra = inp.shares.receiver_application;
        if ra > 0.0 || self.zero_window_s > 0.0 {
            out.push(finding(
                "receiver_application",
                if inp.peer.flags.zero_window > 0 {
                    format!(
                        "the receiver's window shrank or closed: {} zero-window advertisements, {:.2} s at zero; receiver-application limited {:.0}% of the busy time",
                        inp.peer.flags.zero_window,
                        self.zero_window_s,
                        ra * 100.0
                    )
                } else if inp.path.sender_side {
                    format!(
                        "the receiver's window shrank below half its largest value, or the receiver held its ACK of a full window until its application read (it never closed): receiver-application limited {:.0}% of the busy time",
                        ra * 100.0
                    )
                } else {
                    format!(
                        "the receiver's window shrank below half its largest value (it never closed): receiver-application limited {:.0}% of the busy time",
                        ra * 100.0
                    )
                },
                &[("zero_windows", json!(inp.peer.flags.zero_window)), ("zero_window_s", num(self.zero_window_s)), ("share", num(ra))],
                Evidence { frames: vec![], time_ranges: inp.runs_of(Limit::ReceiverApplication) },
            ));
        }
    }

    fn plateau(&self, inp: &Input) -> Finding {
        let rtt = &inp.path.rtt;
        let plateau = self.max_bytes as f64;
        // The ceiling at the RTT the flow lived with (queueing included).
        let live_ms = rtt.median_ms().or(rtt.base_ms()).map(|m| m.max(rtt.base_ms().unwrap_or(0.0)));
        let ceiling = live_ms.map(|t| calc::bps(plateau, calc::s_from_ms(t)));
        let frames: Vec<u64> = inp.r.data.iter().filter(|x| x.flags.has(Flags::WINDOW_FULL)).take(8).map(|x| x.frame).collect();
        let rw = inp.shares.receiver_window;
        finding(
            "window_plateau",
            format!(
                "the receiver's advertised window peaked at {}{}; the sender was window-limited {:.0}% of the busy time",
                fmt_bytes(plateau),
                ceiling.map_or(String::new(), |c| format!(", a ceiling of {} at {:.1} ms", fmt_rate(c), live_ms.unwrap_or(0.0))),
                rw * 100.0
            ),
            &[
                ("window_bytes", json!(self.max_bytes)),
                ("ceiling_bps", ceiling.map_or(Value::Null, num)),
                ("share", num(rw)),
                ("window_full_segments", json!(inp.ds.flags.window_full)),
            ],
            Evidence { frames, time_ranges: inp.runs_of(Limit::ReceiverWindow) },
        )
    }

    fn scaling_finding(&self, inp: &Input) -> Finding {
        let (ds, peer, cs) = (inp.ds, inp.peer, inp.cs);
        let (sender, receiver) = if inp.d == 0 { (&cs.a, &cs.b) } else { (&cs.b, &cs.a) };
        let who = if peer.window_scale_offered == Some(false) {
            format!("the receiver ({})'s SYN", endpoint_str(&receiver.addr, receiver.port))
        } else if ds.window_scale_offered == Some(false) {
            format!("the sender ({})'s SYN", endpoint_str(&sender.addr, sender.port))
        } else {
            "a SYN".into()
        };
        finding(
            "window_scaling_off",
            format!("window scaling was not negotiated: {who} carried no window-scale option, so the window can never exceed 64 KiB"),
            &[("sender_offered", json!(ds.window_scale_offered)), ("receiver_offered", json!(peer.window_scale_offered))],
            Evidence { frames: vec![cs.first_frame], time_ranges: vec![] },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::{testkit, Shares};

    fn input<'a>(cs: &'a tcpwhy_flow::ConnectionSummary, path: &'a crate::path::Path, r: &'a crate::record::DirRecords, states: &'a [Limit]) -> Input<'a> {
        Input { cs, d: 0, ds: &cs.directions[0], peer: &cs.directions[1], r, path, iv: &[], states, shares: Shares::of(states) }
    }

    #[test]
    fn scaling_off_explains_a_64k_window_that_held_the_sender() {
        let mut cs = testkit::summary();
        cs.directions[1].window_scaling = "not_negotiated";
        cs.directions[1].advertised_window.max_bytes = Some(65535);
        let path = testkit::path(true, 40.0);
        let r = testkit::records();
        let states = [vec![Limit::SlowStart; 3], vec![Limit::ReceiverWindow; 7]].concat();
        let inp = input(&cs, &path, &r, &states);
        let w = Window::detect(&inp);
        assert!(w.scaling_off && w.scaling_off_explains(&inp));
        assert!(!w.reader_explains(&inp));
        // the same window with scaling on is the buffer, not the option
        cs.directions[1].window_scaling = "negotiated";
        let inp = input(&cs, &path, &r, &states);
        assert!(!Window::detect(&inp).scaling_off_explains(&inp));
    }

    #[test]
    fn a_window_held_at_zero_most_of_the_time_is_the_reader_even_unscaled() {
        let mut cs = testkit::summary();
        cs.directions[1].window_scaling = "not_negotiated";
        cs.directions[1].advertised_window.max_bytes = Some(65535);
        cs.directions[1].advertised_window.zero_window_s = 0.15;
        let path = testkit::path(true, 10.0);
        let r = testkit::records();
        let states = [vec![Limit::ReceiverWindow; 2], vec![Limit::ReceiverApplication; 8]].concat();
        let inp = input(&cs, &path, &r, &states);
        let w = Window::detect(&inp);
        assert!(!w.scaling_off_explains(&inp), "the reader held it closed");
        assert!(w.reader_explains(&inp));
    }

    /// A slow reader behind a small buffer (the lab's slow-reader at 10 ms:
    /// 79 KiB, read at 8 Mbit/s): the window closes now and then and sits
    /// full in between, so the reader's share alone stays under its bar.
    /// The flow got an eighth of what the window carries per base RTT: the
    /// reader's clock, not the buffer's size. At the window's own rate it
    /// is the buffer.
    #[test]
    fn zero_windows_with_the_window_left_unused_are_the_reader() {
        let mut cs = testkit::summary();
        cs.directions[1].window_scale = Some(7);
        cs.directions[1].advertised_window.max_bytes = Some(80_480);
        cs.directions[1].flags.zero_window = 11;
        // short at zero: the zero-time rule does not decide
        cs.directions[1].advertised_window.zero_window_s = 0.0;
        let path = testkit::path(true, 10.0);
        let r = testkit::records();
        let states = [vec![Limit::ReceiverWindow; 14], vec![Limit::ReceiverApplication; 4], vec![Limit::SenderApplication; 2]].concat();
        let carries = 80_480.0 * 8.0 / 0.010;
        cs.directions[0].goodput_bps = Some(carries / 8.0);
        let inp = input(&cs, &path, &r, &states);
        assert!(Window::detect(&inp).reader_explains(&inp));
        cs.directions[0].goodput_bps = Some(carries * 0.8);
        let inp = input(&cs, &path, &r, &states);
        assert!(!Window::detect(&inp).reader_explains(&inp), "the window was used: the buffer");
        // one zero window is not a reader that lags
        cs.directions[0].goodput_bps = Some(carries / 8.0);
        cs.directions[1].flags.zero_window = 1;
        let inp = input(&cs, &path, &r, &states);
        assert!(!Window::detect(&inp).reader_explains(&inp));
    }
}
