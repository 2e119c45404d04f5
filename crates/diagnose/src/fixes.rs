//! Fixes with values computed from the evidence, and what each is predicted
//! to gain (with its assumptions).

use tcpwhy_core::units::calc;
use tcpwhy_core::units::{fmt_bytes, fmt_rate, Rate};
use crate::model::{Fix, WhatIf};
use crate::options::KernelRule;
use crate::timeline::{owned_by, Timeline};
use tcpwhy_core::Limit;
use tcpwhy_core::Cause;

#[derive(Clone)]
pub(crate) struct Facts {
    pub primary: Cause,
    pub goodput_bps: f64,
    pub rtt_s: Option<f64>,
    pub path_rate: Option<Rate>,
    pub path_measured: bool,
    /// `path_rate` is the bottleneck's rate from packet-pair dispersion
    /// (crate::path::dispersion_rate): nothing filled the path.
    pub path_from_dispersion: bool,
    pub rcv_window: u64,
    pub smss: u32,
    pub loss_rate: f64,
    pub policer_rate: Option<f64>,
    /// A policer whose bucket is smaller than the sender's bursts, its rate
    /// not measured (`detect::policing::SMALL_BUCKET_PATH_RATIO`).
    pub policer_small_bucket: bool,
    /// Flows sharing the policer (0: the flow was tested alone).
    pub policer_flows: usize,
    /// A policer whose rate the losses do not show: the fastest bucket of
    /// the fitted depth that explains them as well
    /// (`PolicerVerdict::rate_high_bps`); None when unbounded or seen.
    pub policer_rate_high: Option<f64>,
    pub kernel: KernelRule,
    pub wscale_who_receiver: bool,
    pub bytes: u64,
    pub bursts: usize,
    pub ss_rounds: usize,
    pub sender_side: bool,
    /// The capture showed the path's capacity (or the user gave it): a
    /// queue grew, losses came after a queue, a bucket ran empty. Else the
    /// path rate is only a lower bound (`Plan::ceiling`).
    pub capacity_seen: bool,
    /// What the sender runs, when named with medium confidence or more
    /// (`CongestionControl::acted_on`): the loss bound follows it, and no
    /// fix switches a BBR sender to BBR.
    pub sender_cc: Option<&'static str>,
    /// The application's pace in words, when the sender wrote on its own
    /// clock (`detect::sender::wakes`).
    pub app_pace: Option<String>,
    /// The direction's phases (`crate::timeline`): the what-if replays them.
    pub timeline: Timeline,
}

impl Facts {
    /// [`Facts::path_rate`] in bit/s, for arithmetic.
    fn path_bps(&self) -> Option<f64> {
        self.path_rate.map(Rate::bps)
    }

    fn sender_runs_bbr(&self) -> bool {
        self.sender_cc == Some("bbr")
    }
}

/// The line that switches a Linux sender to BBR, with why; none for a
/// sender that runs it already.
fn bbr_line(f: &Facts, why: &str) -> Vec<String> {
    if f.sender_runs_bbr() {
        vec![]
    } else {
        vec![format!("sysctl -w net.ipv4.tcp_congestion_control=bbr   # {why}")]
    }
}

pub use tcpwhy_core::kernel::buffer_for_window;

/// Linux's initial congestion window since 2.6.39 (RFC 6928): 10 segments.
pub const INITIAL_WINDOW_SEGMENTS: f64 = 10.0;
/// The goodput of one transfer of `bytes` once only the path limits it:
/// slow start from the initial window (RFC 6928) doubles the window each
/// round trip until it holds the path's bandwidth-delay product, and the
/// rest goes at the path rate (`crate::timeline::grow`, the model of
/// Cardwell, Savage and Anderson, INFOCOM 2000). Returns the goodput and
/// the slow-start rounds.
pub fn transfer_bps(bytes: f64, rate_bps: f64, rtt_s: f64, smss: u32) -> (f64, u32) {
    if bytes <= 0.0 || rate_bps <= 0.0 || rtt_s <= 0.0 {
        return (rate_bps, 0);
    }
    let (t, rounds) = crate::timeline::grow(bytes, INITIAL_WINDOW_SEGMENTS * f64::from(smss.max(1)), rate_bps, rtt_s);
    (calc::bps(bytes, t).min(rate_bps), rounds)
}

/// Mathis et al.: rate <= MSS/RTT * 1.22/sqrt(p).
pub fn mathis_bps(smss: u32, rtt_s: f64, p: f64) -> f64 {
    calc::bps(smss as f64, rtt_s) * 1.22 / p.max(1e-9).sqrt()
}

/// What the loss rate does to the sender's rate, by what it runs: Reno's
/// average window is 1.22/sqrt(p) segments (Mathis et al., CCR 1997);
/// CUBIC's is (C(3+beta)/(4(1-beta)))^(1/4) RTT^(3/4) / p^(3/4), or Reno's
/// where that is larger (RFC 9438 section 5.1); BBR has no loss response
/// (Linux's `tcp_bbr.c`: the window is not cut for a loss, and its
/// long-term model engages only past 20% loss in an interval,
/// `BBR_LT_LOSS_THRESH` = 50/256). Unknown: the larger loss-based bound.
fn loss_bound(f: &Facts, rtt: f64) -> String {
    let (pct, ms) = (f.loss_rate * 100.0, calc::ms_from_s(rtt));
    let rate = |segments: f64| fmt_rate(calc::bps(segments * f64::from(f.smss), rtt));
    match f.sender_cc {
        Some("reno") => format!(
            "Reno at {pct:.2}% loss and {ms:.1} ms is bounded near {} (Mathis et al.: 1.22/sqrt(p) segments per round trip)",
            fmt_rate(mathis_bps(f.smss, rtt, f.loss_rate))
        ),
        Some("cubic") => format!(
            "CUBIC at {pct:.2}% loss and {ms:.1} ms is bounded near {} (RFC 9438 section 5.1: its average window at this loss rate, or Reno's where larger)",
            rate(crate::congestion::loss_based_window(f.loss_rate.max(1e-9), rtt))
        ),
        Some("bbr") => format!(
            "BBR does not lower its rate for a loss at {pct:.2}% (tcp_bbr.c: no window cut for a loss; its long-term model engages only past 20% loss): the losses cost it retransmissions, not its rate"
        ),
        _ => format!(
            "a loss-based sender at {pct:.2}% loss and {ms:.1} ms is bounded near {} (the larger of Reno's, Mathis et al., and CUBIC's, RFC 9438 section 5.1; what the sender runs was not read)",
            rate(crate::congestion::loss_based_window(f.loss_rate.max(1e-9), rtt))
        ),
    }
}

pub(crate) fn fixes(f: &Facts) -> (Vec<Fix>, Vec<WhatIf>, Vec<String>) {
    let mut p = Plan::default();
    match f.primary {
        Cause::ReceiverWindow | Cause::WindowScalingOff => receiver_window(f, &mut p),
        Cause::SendBuffer => send_buffer(f, &mut p),
        Cause::SenderApplication => sender_application(f, &mut p),
        Cause::ReceiverApplication => receiver_application(f, &mut p),
        Cause::Policer => policer(f, &mut p),
        Cause::Shaper | Cause::BottleneckLink => path_capacity(f, &mut p),
        Cause::RandomLoss | Cause::CongestionLoss => losses(f, &mut p),
        Cause::SlowStart => slow_start(f, &mut p),
        Cause::SpuriousRetransmission => spurious(f, &mut p),
        Cause::CachedSsthresh => cached_ssthresh(f, &mut p),
        // Nothing to fix; delayed ACKs are the latency diagnosis's (latency.rs), never a bulk primary.
        Cause::DelayedAck | Cause::None | Cause::Undetermined => {}
    }
    replay(f, &mut p);
    ranges(f, &mut p);
    (p.fixes, p.what_if, p.notes)
}

/// Each prediction replayed over the direction's own timeline: the phases
/// in the states the primary cause owns (`crate::timeline::owned_by`) go
/// at the fix's rate (`steady_bps`, and the fix's ceiling for the top of a
/// range), with the window first growing to it where the fix raises a
/// window; every other phase (idle time, the applications, the states
/// another cause holds) stays as captured. The prediction is the
/// direction's rate over the replayed duration, so it never exceeds what
/// the untouched time allows. The path's own rate (a shaper, the
/// bottleneck link) is no host's to change: those predictions stay the
/// current rate.
fn replay(f: &Facts, p: &mut Plan) {
    // no timeline (a direction built by hand): the rate model alone
    if matches!(f.primary, Cause::Shaper | Cause::BottleneckLink) || f.timeline.intervals == 0 {
        return;
    }
    let states = owned_by(f.primary);
    // pacing and a warm window send at the rate at once; the other fixes
    // open a window the congestion window then grows into
    let grow = !matches!(f.primary, Cause::Policer | Cause::SlowStart);
    let rtt = f.rtt_s.unwrap_or(0.0);
    let tl = &f.timeline;
    // a fixed pacing rate behind a policer sets the rate, below what a
    // flow got by taking more than its share of a bucket it shares
    let paced = f.primary == Cause::Policer && !f.policer_small_bucket;
    let speedup = |rate: f64| {
        let r = if paced { tl.paced(states, rate) } else { tl.replay(states, rate, rtt, grow) };
        (r, if r.duration_s > 0.0 { tl.duration_s / r.duration_s } else { 1.0 })
    };
    for w in p.what_if.iter_mut() {
        w.addresses = states.to_vec();
        let Some(steady) = w.steady_bps else { continue };
        let (point, gain) = speedup(steady);
        w.predicted_bps = Some(w.current_bps * gain);
        w.duration_s = Some(point.duration_s);
        w.saved_s = Some(point.saved_s);
        if let Some(hi) = w.predicted_high_bps {
            w.steady_high_bps = Some(hi);
            w.predicted_low_bps = w.predicted_bps;
            w.predicted_high_bps = Some(w.current_bps * speedup(hi).1);
        }
        w.assumptions.push(replay_text(tl, states, steady, &point));
    }
    for c in p.ceilings.iter_mut() {
        c.3 = Some(f.goodput_bps * speedup(c.1).1);
    }
}

/// The replay in words: what the fix shortens, at what rate, and what stays.
fn replay_text(tl: &Timeline, states: &[Limit], rate: f64, r: &crate::timeline::Replay) -> String {
    let names: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
    let (t, b) = tl.time_in(states);
    if t <= 0.0 {
        return format!("the capture shows no time in the states this fix shortens ({}): nothing to win back", names.join(", "));
    }
    let mut rest: Vec<(Limit, f64)> =
        Limit::ALL.iter().filter(|l| !states.contains(l)).map(|l| (*l, tl.share(&[*l]))).filter(|x| x.1 >= crate::detect::FINDING_MIN_SHARE).collect();
    rest.sort_by(|a, b| b.1.total_cmp(&a.1));
    let rest: Vec<String> = rest.iter().map(|(l, v)| format!("{l} {:.0}%", v * 100.0)).collect();
    let growth = if r.growth_rounds > 0 { format!(", after {} round trips of window growth", r.growth_rounds) } else { String::new() };
    format!(
        "replayed over the captured timeline: the {} phases ({:.0}% of the time, {}) at up to {}{growth}, {:.2} s instead of {:.2} s; the rest ({}) as captured: {:.2} s in all instead of {:.2} s",
        names.join(" and "),
        t / tl.duration_s.max(f64::MIN_POSITIVE) * 100.0,
        fmt_bytes(b as f64),
        fmt_rate(rate),
        t - r.saved_s,
        t,
        if rest.is_empty() { "nothing".to_string() } else { rest.join(", ") },
        r.duration_s,
        tl.duration_s
    )
}

/// The receiver's tcp_rmem max when nobody set it: Linux's default
/// (Documentation/networking/ip-sysctl.rst, tcp_rmem: "max ... Default:
/// between 131072 and 6MB, depending on RAM size"; 6 MiB on any host with
/// more than a few hundred MiB). Window scaling, once on, lets the window
/// grow up to it.
pub const LINUX_TCP_RMEM_MAX_DEFAULT: u64 = 6 << 20;

/// Each prediction's range. Where the capture showed the path's capacity,
/// the prediction is one number (low = high). Where it showed only a lower
/// bound, the fix may free more than the path rate the capture saw: low is
/// the prediction at that bound (for this transfer, as `predicted_bps`),
/// high what the fix itself allows once past slow start (its
/// `Plan::ceiling`): an upper bound for this transfer and for a longer one.
fn ranges(f: &Facts, p: &mut Plan) {
    // a fix that knows its own range (pace_bursts_what_if) keeps it
    for w in p.what_if.iter_mut().filter(|w| w.predicted_high_bps.is_none()) {
        w.predicted_low_bps = w.predicted_bps;
        w.predicted_high_bps = w.predicted_bps;
        if f.capacity_seen {
            continue;
        }
        let Some(low) = w.predicted_bps else { continue };
        let Some((steady_high, why, replayed)) = p.ceilings.iter().find(|c| c.0 == w.fix).map(|c| (c.1, c.2.clone(), c.3)) else { continue };
        let high = replayed.unwrap_or(steady_high);
        if w.steady_bps.is_some_and(|s| steady_high > s * RANGE_MIN_RATIO) {
            w.steady_high_bps = Some(steady_high);
        }
        if high <= low * RANGE_MIN_RATIO {
            if w.steady_high_bps.is_some() {
                w.assumptions.push(format!(
                    "the capture never showed the path's capacity, but a faster path would not shorten this transfer much: the window's growth to it costs round trips (up to {} past slow start: {why})",
                    fmt_rate(steady_high)
                ));
            }
            continue;
        }
        w.predicted_high_bps = Some(high);
        let low_is = if f.path_from_dispersion {
            "is at the rate the spacing of back-to-back packets shows"
        } else {
            "is a lower bound"
        };
        w.assumptions.push(format!(
            "the capture never showed the path's capacity (no queue grew, no loss came after a queue, no bucket ran empty): {} {low_is}; up to {} if the path is faster ({why})",
            fmt_rate(low),
            fmt_rate(high)
        ));
    }
}

/// A ceiling within this factor of the lower bound is no range worth
/// stating: the prediction stays one number.
pub const RANGE_MIN_RATIO: f64 = 1.1;

/// The fixes, their predictions and the notes for one cause.
#[derive(Default)]
struct Plan {
    fixes: Vec<Fix>,
    what_if: Vec<WhatIf>,
    notes: Vec<String>,
    /// Per fix: the rate the fix itself allows whatever the path (bit/s),
    /// and why, for `ranges`.
    /// With the rate for this transfer once replayed (`replay`).
    ceilings: Vec<(&'static str, f64, String, Option<f64>)>,
}

impl Plan {
    /// What the fix `fix` allows at most: `window` bytes over the RTT.
    fn ceiling(&mut self, fix: &'static str, window: f64, rtt: f64, why: String) {
        if window > 0.0 && rtt > 0.0 {
            self.ceilings.push((fix, calc::bps(window, rtt), why, None));
        }
    }

    /// The next limit the capture shows: the receiver's largest advertised
    /// window over the RTT.
    fn receiver_window_ceiling(&mut self, fix: &'static str, f: &Facts, rtt: f64) {
        let w = f.rcv_window as f64;
        self.ceiling(fix, w, rtt, format!("the receiver's largest advertised window, {}, then holds the flow", fmt_bytes(w)));
    }
}

impl Facts {
    /// Where the path rate in a prediction came from.
    fn path_note(&self, v: &mut Vec<String>) {
        match (self.path_bps(), self.path_measured) {
            (Some(p), true) if self.path_from_dispersion => v.push(format!(
                "path rate {} from the spacing of packets that crossed the bottleneck back to back (packet-pair dispersion; pass --bandwidth if you know it)",
                fmt_rate(p)
            )),
            (Some(p), true) => v.push(format!(
                "path rate {} estimated from packet spacing inside trains (pass --bandwidth if you know it)",
                fmt_rate(p)
            )),
            (Some(p), false) => v.push(format!("path rate {} as given", fmt_rate(p))),
            (None, _) => v.push("path rate unknown: pass --bandwidth for a firmer prediction".into()),
        }
    }
}

fn receiver_window(f: &Facts, p: &mut Plan) {
    let Some(rtt) = f.rtt_s else {
        p.notes.push("no RTT measured: the window needed cannot be computed".into());
        return;
    };
    // Window needed to fill the path (or 1 Gbit/s when unknown).
    let target = f.path_bps().unwrap_or(1e9);
    let need = calc::bytes_in(target, rtt);
    let buf = buffer_for_window(need * 1.1, f.kernel).max(4 << 20);
    if f.primary == Cause::WindowScalingOff {
        let who = if f.wscale_who_receiver { "receiver (or the proxy/load balancer answering its SYN)" } else { "sender" };
        p.fixes.push(Fix {
            kind: "enable_window_scaling",
            on: if f.wscale_who_receiver { "receiver" } else { "sender" },
            text: format!("enable window scaling on the {who}; if a proxy or load balancer (e.g. LVS) builds the SYN-ACK, the fix belongs there"),
            commands: vec!["sysctl -w net.ipv4.tcp_window_scaling=1".into()],
            ..Default::default()
        });
        let win = buffer_for_window(need, f.kernel) as f64 * f.kernel.window_fraction();
        let mut a = vec![
            format!("window then grows to the {} needed for {} at {:.1} ms", fmt_bytes(need), fmt_rate(target), calc::ms_from_s(rtt)),
            "the receiver's tcp_rmem max allows that window".into(),
        ];
        let pred = calc::bps(win, rtt).min(target);
        let steady = pred;
        f.path_note(&mut a);
        p.ceiling(
            "enable_window_scaling",
            LINUX_TCP_RMEM_MAX_DEFAULT as f64,
            rtt,
            format!("the window then grows up to the receiver's tcp_rmem max, {} by Linux's default", fmt_bytes(LINUX_TCP_RMEM_MAX_DEFAULT as f64)),
        );
        p.what_if.push(WhatIf::new(
            "enable_window_scaling",
            f.goodput_bps,
            Some(pred),
            Some(steady),
            if f.path_rate.is_some() { "path_rate" } else { "window" },
            a,
        ));
    } else {
        p.fixes.push(Fix {
            kind: "raise_tcp_rmem",
            on: "receiver",
            text: format!(
                "raise the receiver's tcp_rmem max to {} so the window can reach {} ({}: the window is {} of the buffer)",
                buf,
                fmt_bytes(need),
                f.kernel.describe(),
                f.kernel.fraction_text()
            ),
            commands: vec![
                format!("sysctl -w net.ipv4.tcp_rmem=\"4096 131072 {buf}\""),
                format!("sysctl -w net.core.rmem_max={buf}   # only if the application sets SO_RCVBUF"),
            ],
            buffer_bytes: Some(buf),
            ..Default::default()
        });
        p.fixes.push(Fix {
            kind: "application_buffer",
            on: "application",
            text: format!("without sysctl rights: SO_RCVBUF of {buf} in the receiving application (iperf3 -w), or several parallel connections (HTTP Range requests)"),
            commands: vec![],
            ..Default::default()
        });
        let mut a = vec![
            format!("the receiver window reaches {}", fmt_bytes(need)),
            "no loss appears at the higher rate".into(),
        ];
        let pred = calc::bps(need, rtt).min(target);
        let steady = pred;
        f.path_note(&mut a);
        p.ceiling("raise_tcp_rmem", buf as f64, rtt, format!("a window never exceeds the {} buffer", fmt_bytes(buf as f64)));
        p.what_if.push(WhatIf::new(
            "raise_tcp_rmem",
            f.goodput_bps,
            Some(pred),
            Some(steady),
            if f.path_rate.is_some() { "path_rate" } else { "window" },
            a,
        ));
        let w = f.rcv_window as f64;
        if w > 0.0 {
            p.notes.push(format!(
                "a path with a short RTT is not affected: the same {} window allows {} at 3 ms",
                fmt_bytes(w),
                fmt_rate(calc::bps(w, 0.003))
            ));
        }
    }
}

fn send_buffer(f: &Facts, p: &mut Plan) {
    let rtt = f.rtt_s.unwrap_or(0.1);
    let target = f.path_bps().unwrap_or(1e9);
    let need = calc::bytes_in(target, rtt);
    let buf = buffer_for_window(need * 1.1, f.kernel).max(4 << 20);
    p.fixes.push(Fix {
        kind: "raise_tcp_wmem",
        on: "sender",
        text: format!(
            "raise the sender's tcp_wmem max to {buf} (the send buffer holds the data in flight plus overhead; {} in flight needs about twice that)",
            fmt_bytes(need)
        ),
        commands: vec![
            format!("sysctl -w net.ipv4.tcp_wmem=\"4096 16384 {buf}\""),
            format!("sysctl -w net.core.wmem_max={buf}   # only if the application sets SO_SNDBUF"),
        ],
        buffer_bytes: Some(buf),
        ..Default::default()
    });
    let mut a = vec![format!("the send buffer then holds {} in flight", fmt_bytes(need)), "the receiver's window is not smaller".into()];
    let after = f.path_bps().or(f.rtt_s.map(|r| calc::bps(need, r))).map(|r| (r, r));
    let (pred, steady) = (after.map(|x| x.0), after.map(|x| x.1));
    f.path_note(&mut a);
    // The flight never exceeds the send buffer, nor what the receiver's
    // window can grow to. The window seen while the sender starved is no
    // bound: the receiver's autotuning grows it with what arrives
    // (tcp_rcv_space_adjust), up to its tcp_rmem max.
    let rmem = LINUX_TCP_RMEM_MAX_DEFAULT as f64 * f.kernel.window_fraction();
    if rmem < buf as f64 {
        p.ceiling(
            "raise_tcp_wmem",
            rmem,
            rtt,
            format!(
                "the receiver's window then grows with what arrives (autotuning, tcp_rcv_space_adjust) up to {} of its {} tcp_rmem max by Linux's default; the window it showed while the sender starved is no bound",
                fmt_bytes(rmem),
                fmt_bytes(LINUX_TCP_RMEM_MAX_DEFAULT as f64)
            ),
        );
    } else {
        p.ceiling("raise_tcp_wmem", buf as f64, rtt, format!("the flight never exceeds the {} send buffer", fmt_bytes(buf as f64)));
    }
    p.what_if.push(WhatIf::new(
        "raise_tcp_wmem",
        f.goodput_bps,
        pred,
        steady,
        "path_rate",
        a,
    ));
    if !f.sender_side {
        p.notes.push("an application writing slowly looks the same from the receiver: check Send-Q at the sender (`ss -tm`)".into());
    }
}

fn sender_application(f: &Facts, p: &mut Plan) {
    if let Some(pace) = &f.app_pace {
        return application_pace(f, pace, p);
    }
    let rtt = f.rtt_s.unwrap_or(0.1);
    let target = f.path_bps().unwrap_or(1e9);
    let need = calc::bytes_in(target, rtt);
    p.fixes.push(Fix {
        kind: "application_window",
        on: "application",
        text: format!(
            "the application sends a fixed amount per round trip and waits: raise its own window or buffer to at least {} (the BDP), or use a tool without per-channel flow control (e.g. HPN-SSH / larger SSH channel window, rsync over a plain TCP stream, wget)",
            fmt_bytes(need)
        ),
        commands: vec![],
        ..Default::default()
    });
    let mut a = vec![format!("the application keeps {} outstanding", fmt_bytes(need))];
    // The same transfer with the application out of the way: slow start,
    // then the path rate, as for the other windows' fixes.
    let after = f.path_bps().map(|r| (r, r));
    f.path_note(&mut a);
    p.receiver_window_ceiling("application_window", f, rtt);
    p.what_if.push(WhatIf::new(
        "application_window",
        f.goodput_bps,
        after.map(|x| x.0),
        after.map(|x| x.1),
        "path_rate",
        a,
    ));
}

/// An application that writes on its own clock: nothing in the network or
/// TCP's settings holds it; how much faster it can write is its own.
fn application_pace(f: &Facts, pace: &str, p: &mut Plan) {
    p.fixes.push(Fix {
        kind: "application_pace",
        on: "application",
        text: format!(
            "the sending application paces itself, {pace}: no buffer, window or path holds it back, and no sysctl changes that; if the pace is not by design, make it write larger chunks or more often (a producer thread, a larger read from its source)"
        ),
        commands: vec!["ss -tinm   # on the sender: app_limited, and a Send-Q (notsent) near empty".into()],
        ..Default::default()
    });
    p.what_if.push(WhatIf::new(
        "application_pace",
        f.goodput_bps,
        None,
        None,
        "path_rate",
        vec!["depends on how fast the application can produce its data".into()],
    ));
}

fn receiver_application(f: &Facts, p: &mut Plan) {
    p.fixes.push(Fix {
        kind: "receiver_reads_faster",
        on: "receiver",
        text: "the receiving application does not read fast enough (its socket buffer fills and the window closes): give it CPU, read in larger chunks, or move the work off the reading thread; a larger SO_RCVBUF only absorbs bursts".into(),
        commands: vec!["ss -tinm   # on the receiver: Recv-Q stays non-empty".into()],
        ..Default::default()
    });
    // A reader that keeps up leaves the window open: the flow then goes
    // at what the receiver's largest window allows over the RTT, or the
    // path's rate where that is lower.
    let window = f.rtt_s.filter(|r| *r > 0.0 && f.rcv_window > 0).map(|r| calc::bps(f.rcv_window as f64, r));
    let steady = match (window, f.path_bps()) {
        (Some(w), Some(p)) => Some(w.min(p)),
        (w, p) => w.or(p),
    };
    let mut a = vec!["the application reads as fast as the data arrives".into()];
    if let Some(w) = window {
        a.push(format!("the receiver's largest window, {}, then holds the flow at {} over the RTT", fmt_bytes(f.rcv_window as f64), fmt_rate(w)));
    }
    f.path_note(&mut a);
    p.what_if.push(WhatIf::new(
        "receiver_reads_faster",
        f.goodput_bps,
        steady,
        steady,
        if window.is_some_and(|w| f.path_bps().is_none_or(|p| w < p)) { "window" } else { "path_rate" },
        a,
    ));
}

fn policer(f: &Facts, p: &mut Plan) {
    if f.policer_small_bucket {
        return small_bucket(f, p);
    }
    let r = f.policer_rate.unwrap_or(f.goodput_bps);
    let flows = f.policer_flows.max(1);
    let shared = if flows >= 2 {
        format!(
            ". It holds the {flows} flows between these hosts together: more parallel flows will not get past it (they would past a per-flow policer), and the pacing rate is per flow (fq maxrate), so each gets a share"
        )
    } else {
        String::new()
    };
    p.fixes.push(Fix {
        kind: "policer_not_host",
        on: "path",
        text: format!(
            "host tuning will not help: a token-bucket policer on the path enforces {}{}. Check the provider's limit (instance baseline bandwidth, network credits, the contract rate); to avoid the losses, pace the sender at or below it{shared}{}",
            fmt_rate(r),
            if flows >= 2 { " for all these flows together" } else { "" },
            if f.sender_runs_bbr() {
                ". The sender runs BBR: it finds a policer by the steady rate it delivers under heavy loss and then paces at that rate for 48 round trips (tcp_bbr.c's long-term bandwidth model), losing packets each time it probes above it; a fixed pacing rate below the policer avoids those"
            } else {
                ""
            }
        ),
        commands: vec![
            if flows >= 2 {
                format!(
                    "tc qdisc replace dev IFACE root fq maxrate {}kbit   # sender: pace each flow below its share of the policer",
                    (calc::kbps(r / flows as f64) * 0.95).floor().max(8.0)
                )
            } else {
                format!("tc qdisc replace dev IFACE root fq maxrate {}mbit   # sender: pace below the policer", (calc::mbps(r) * 0.95).floor().max(1.0))
            },
        ]
        .into_iter()
        .chain(bbr_line(f, "paces at the measured rate"))
        .collect(),
        pace_bps: Some((r * 0.95 / flows as f64).floor()),
        ..Default::default()
    });
    let paced_per_flow = r * 0.95 / flows as f64;
    p.what_if.push(WhatIf::new(
        "policer_not_host",
        f.goodput_bps,
        Some(r * 0.95 / flows as f64),
        Some(r * 0.95 / flows as f64),
        "policer_rate",
        if flows >= 2 {
            vec![format!(
                "pacing removes the policer's drops; the {flows} flows share the policed rate equally{}",
                if paced_per_flow < f.goodput_bps {
                    format!(": this one, which got {} by taking more than its share, gets its share", fmt_rate(f.goodput_bps))
                } else {
                    String::new()
                }
            )]
        } else {
            vec!["pacing removes the policer's drops; the rate stays at the policed rate".into()]
        },
    ));
}

/// A policer whose bucket is smaller than the sender's bursts: the flow
/// never reached the token rate, so no rate is known to pace at; pacing
/// spreads each window over the round trip, so each packet finds the
/// tokens that came in since the one before.
fn small_bucket(f: &Facts, p: &mut Plan) {
    p.fixes.push(Fix {
        kind: "pace_bursts",
        on: "sender",
        text: format!(
            "host tuning of buffers will not help: a token-bucket policer on the path drops the tail of every burst larger than the tokens it holds (its bucket is small, or other flows drain it), and the flow, cut back after each loss, stays at {}. Pace the sender so that its packets come spaced instead of back to back (fq pacing with BBR), and ask the provider for the policer's rate and bucket",
            fmt_rate(f.goodput_bps)
        ),
        commands: vec![
            "tc qdisc replace dev IFACE root fq   # sender: pacing, one packet at a time".into(),
        ]
        .into_iter()
        .chain(bbr_line(f, "paces at the rate it measures"))
        .collect(),
        ..Default::default()
    });
    p.what_if.push(pace_bursts_what_if(f));
}

/// What pacing gives behind a bucket whose rate the losses leave open
/// (`policer::rate_high`): a sender that paces at the rate it measures
/// (BBR; behind a policer, tcp_bbr.c's long-term model paces at the
/// delivered rate under loss) reaches the bucket's rate and no more. That
/// rate is at least what the flow got, and at most the fastest bucket that
/// explains the losses, or the receiver's window over the RTT if that is
/// lower: the prediction is that range, with the low end for this
/// transfer (slow start counted). With no bound above, no prediction.
fn pace_bursts_what_if(f: &Facts) -> WhatIf {
    let none = |why: &str| WhatIf::new(
        "pace_bursts",
        f.goodput_bps,
        None,
        None,
        "policer_rate",
        vec![why.to_string()],
    );
    let (Some(low), Some(high), Some(rtt)) = (f.policer_rate, f.policer_rate_high, f.rtt_s) else {
        return none("the policer's rate is not measured (this flow alone stays below it): no prediction");
    };
    // flows that share the bucket share its rate
    let flows = f.policer_flows.max(1) as f64;
    let (low, mut high) = (low / flows, high / flows);
    let mut a = Vec::new();
    if flows > 1.0 {
        a.push(format!("the {flows} flows that share the policer share its rate equally"));
    }
    let window = calc::bps(f.rcv_window as f64, rtt);
    let mut why = "the fastest bucket of that size that explains the losses as well";
    if window > 0.0 && window < high {
        high = window;
        why = "the receiver's largest advertised window over the RTT, which then holds the flow";
    }
    let at_low = low;
    if high <= at_low * RANGE_MIN_RATIO {
        high = at_low;
    }
    a.insert(
        0,
        format!(
            "paced at the rate it measures (BBR), the flow reaches the policer's rate, which the losses do not show: at least {} ({}), at most {} ({why})",
            fmt_rate(low),
            if flows > 1.0 { "what the flows got together, per flow" } else { "what the flow got" },
            fmt_rate(high)
        ),
    );
    WhatIf {
        fix: "pace_bursts",
        current_bps: f.goodput_bps,
        predicted_bps: Some(at_low),
        predicted_low_bps: Some(at_low),
        predicted_high_bps: Some(high),
        steady_bps: Some(low),
        steady_high_bps: Some(high),
        bound: "policer_rate",
        addresses: vec![],
        duration_s: None,
        saved_s: None,
        assumptions: a,
    }
}

fn path_capacity(f: &Facts, p: &mut Plan) {
    let shaper = f.primary == Cause::Shaper;
    p.fixes.push(Fix {
        kind: if shaper { "shaper_queue" } else { "link_capacity" },
        on: "path",
        text: if shaper {
            format!(
                "the flow runs at a shaped rate and the shaper's queue adds delay and drops when full: host tuning will not raise the rate; ask for a higher rate, or keep the queue short with AQM at the shaper{}",
                if f.sender_runs_bbr() { " (the sender runs BBR already, which keeps its own share of the queue short)" } else { " or a sender that paces at the rate (BBR)" }
            )
        } else {
            "the flow runs at the bottleneck link's rate: nothing on the hosts limits it; only more capacity (or less competing traffic) helps".into()
        },
        commands: if shaper { bbr_line(f, "sender: keeps the queue short") } else { vec![] },
        ..Default::default()
    });
    let mut a = vec!["the rate is the path's".into()];
    f.path_note(&mut a);
    p.what_if.push(WhatIf::new(
        if shaper { "shaper_queue" } else { "link_capacity" },
        f.goodput_bps,
        Some(f.goodput_bps),
        Some(f.goodput_bps),
        "path_rate",
        a,
    ));
}

fn losses(f: &Facts, p: &mut Plan) {
    let random = f.primary == Cause::RandomLoss;
    p.fixes.push(Fix {
        kind: if random { "find_lossy_link" } else { "congestion" },
        on: "path",
        text: if random {
            format!(
                "packets are lost without queueing before the losses ({:.2}% of segments): find the lossy link (errors, a bad cable or radio); {}",
                f.loss_rate * 100.0,
                if f.sender_runs_bbr() {
                    "the sender runs BBR already, which does not treat loss as congestion: the losses cost it retransmissions, not its rate"
                } else {
                    "meanwhile a congestion control that does not treat loss as congestion copes better"
                }
            )
        } else {
            "losses follow queue build-up with other traffic: the path is congested; QoS or more capacity helps, host tuning does not".into()
        },
        commands: if random { bbr_line(f, "sender") } else { vec![] },
        ..Default::default()
    });
    if let Some(rtt) = f.rtt_s {
        let mut a = vec![loss_bound(f, rtt)];
        let after = f.path_bps().map(|r| (r, r));
        let (pred, steady) = (after.map(|x| x.0), after.map(|x| x.1));
        f.path_note(&mut a);
        p.what_if.push(WhatIf::new(
            if random { "find_lossy_link" } else { "congestion" },
            f.goodput_bps,
            pred,
            steady,
            "path_rate",
            a,
        ));
    }
}

fn slow_start(f: &Facts, p: &mut Plan) {
    let rtt = f.rtt_s.unwrap_or(0.05);
    p.fixes.push(Fix {
        kind: "keep_connections_warm",
        on: "both",
        text: "responses pay slow start from the initial window: reuse connections (keep-alive idle timeouts longer than the gaps between requests on both ends, connection pools), and on CUBIC/Reno senders do not restart after idle".into(),
        commands: vec![
            "sysctl -w net.ipv4.tcp_slow_start_after_idle=0   # sender".into(),
            "keepalive_timeout 300s;   # nginx, on both proxy hops".into(),
        ],
        ..Default::default()
    });
    let per_burst = f.bytes as f64 / f.bursts.max(1) as f64;
    let warm = rtt + f.path_bps().map_or(0.0, |p| calc::s_to_send(per_burst, p));
    let cold = rtt * (f.ss_rounds as f64 / f.bursts.max(1) as f64).max(1.0);
    p.what_if.push(WhatIf::new(
        "keep_connections_warm",
        f.goodput_bps,
        f.path_bps().map(|_| calc::bps(per_burst, warm)),
        f.path_bps().map(|_| calc::bps(per_burst, warm)),
        "path_rate",
        vec![format!(
            "each {} response then takes about {:.0} ms (one RTT plus transmission) instead of about {:.0} ms in slow start",
            fmt_bytes(per_burst),
            calc::ms_from_s(warm),
            calc::ms_from_s(cold)
        )],
    ));
}

fn spurious(f: &Facts, p: &mut Plan) {
    p.fixes.push(Fix {
        kind: "spurious_timers",
        on: "sender",
        text: "retransmission timers fire before the ACKs can return (the RTT measured at the handshake is far below the data path's, e.g. a nearby proxy answered the SYN): disable tail-loss probes on old kernels, keep F-RTO on to undo spurious timeouts, or upgrade the kernel".into(),
        commands: vec!["sysctl -w net.ipv4.tcp_early_retrans=2   # no TLP (kernels < 4.0)".into(), "sysctl -w net.ipv4.tcp_frto=2".into()],
        ..Default::default()
    });
    p.what_if.push(WhatIf::new(
        "spurious_timers",
        f.goodput_bps,
        None,
        None,
        "window",
        vec!["without the spurious retransmissions ssthresh is not cut and slow start continues".into()],
    ));
}

fn cached_ssthresh(f: &Facts, p: &mut Plan) {
    p.fixes.push(Fix {
        kind: "flush_tcp_metrics",
        on: "sender",
        text: "a small ssthresh cached from earlier connections (ip tcp_metrics) ends slow start at once: flush the entry and stop saving metrics".into(),
        commands: vec![
            "ip tcp_metrics show   # look for a small ssthresh towards this destination".into(),
            "ip tcp_metrics flush".into(),
            "sysctl -w net.ipv4.tcp_no_metrics_save=1".into(),
        ],
        ..Default::default()
    });
    let mut a = vec!["slow start then runs up to the path's BDP".into()];
    let (pred, steady) = (f.path_bps(), f.path_bps());
    f.path_note(&mut a);
    if let Some(rtt) = f.rtt_s {
        p.receiver_window_ceiling("flush_tcp_metrics", f, rtt);
    }
    p.what_if.push(WhatIf::new(
        "flush_tcp_metrics",
        f.goodput_bps,
        pred,
        steady,
        "path_rate",
        a,
    ));
}


#[cfg(test)]
mod transfer_tests {
    use super::*;

    #[test]
    fn a_long_transfer_reaches_the_rate_and_a_short_one_pays_slow_start() {
        // 1 GB at 200 Mbit/s, 40 ms: slow start is a few tenths of a second of 40 s
        let (long, _) = transfer_bps(1e9, 200e6, 0.04, 1448);
        assert!(long > 0.99 * 200e6 && long <= 200e6, "{long}");
        // 6.4 MB: 7 rounds from 10 segments (14,480 B) to the 1 MB BDP carry
        // 1.84 MB; the rest takes 0.18 s: about 112 Mbit/s over the transfer
        let (short, rounds) = transfer_bps(6.4e6, 205e6, 0.04, 1448);
        assert_eq!(rounds, 7);
        assert!((short - 112e6).abs() < 2e6, "{short}");
        // a transfer inside the initial window goes back to back
        assert_eq!(transfer_bps(10_000.0, 100e6, 0.05, 1448), (100e6, 0));
    }
}

#[cfg(test)]
mod range_tests {
    use super::*;

    /// A receive-window-limited flow at 40 ms whose capture saw the path
    /// at 43 Mbit/s (the sender capture of a 100 Mbit/s path).
    /// The loss bound follows what the sender runs: at 1% loss and 100 ms
    /// Reno holds 12.2 segments a round trip (1.41 Mbit/s of 1448-byte
    /// segments), CUBIC its Reno-friendly 12.2 too (its own window is
    /// smaller at this RTT), BBR none.
    #[test]
    fn the_loss_bound_is_the_senders_own() {
        let mut f = facts(Cause::RandomLoss, true);
        f.loss_rate = 0.01;
        f.smss = 1448;
        f.sender_cc = Some("reno");
        let reno = loss_bound(&f, 0.1);
        assert!(reno.starts_with("Reno at 1.00% loss") && reno.contains("1.4 Mbit/s"), "{reno}");
        f.sender_cc = Some("cubic");
        assert!(loss_bound(&f, 0.1).starts_with("CUBIC at 1.00% loss"), "{}", loss_bound(&f, 0.1));
        f.sender_cc = Some("bbr");
        let bbr = loss_bound(&f, 0.1);
        assert!(bbr.starts_with("BBR does not lower its rate") && !bbr.contains("bit/s"), "{bbr}");
        f.sender_cc = None;
        assert!(loss_bound(&f, 0.1).contains("what the sender runs was not read"));
    }

    fn facts(primary: Cause, capacity_seen: bool) -> Facts {
        Facts {
            primary,
            goodput_bps: 40e6,
            rtt_s: Some(0.04),
            path_rate: Some(Rate(43_000_000)),
            path_measured: true,
            path_from_dispersion: false,
            rcv_window: 256 << 10,
            smss: 1448,
            loss_rate: 0.0,
            policer_rate: None,
            policer_small_bucket: false,
            policer_rate_high: None,
            policer_flows: 0,
            kernel: KernelRule::ScalingRatio,
            wscale_who_receiver: true,
            bytes: 1 << 30,
            bursts: 1,
            ss_rounds: 0,
            sender_side: true,
            capacity_seen,
            sender_cc: None,
            app_pace: None,
            timeline: Timeline::default(),
        }
    }

    /// A direction of `seconds`, the first tenth idle, the rest in
    /// `state`, at 40 Mbit/s while sending.
    fn timeline(state: Limit, seconds: f64) -> Timeline {
        let n = 100usize;
        let width = seconds / n as f64;
        let ivs: Vec<crate::limits::Interval> = (0..n)
            .map(|i| crate::limits::Interval {
                start_ns: (i as f64 * width * 1e9) as i64,
                new_bytes: if i < 10 { 0 } else { (40e6 / 8.0 * width) as u64 },
                ..Default::default()
            })
            .collect();
        let states: Vec<Limit> = (0..n).map(|i| if i < 10 { Limit::Idle } else { state }).collect();
        Timeline::of(&ivs, &states, seconds)
    }

    #[test]
    fn the_replay_shortens_only_the_fixs_phases() {
        // 10 s: 1 s idle, 9 s window-limited at 40 Mbit/s; the path is 43
        let f = Facts { goodput_bps: 36e6, timeline: timeline(Limit::ReceiverWindow, 10.0), ..facts(Cause::ReceiverWindow, true) };
        let (_, w, _) = fixes(&f);
        let w = &w[0];
        assert_eq!(w.addresses, [Limit::ReceiverWindow]);
        // the 9 s at 43 instead of 40 Mbit/s (and one round of growth): the
        // idle second stays
        let after = w.duration_s.unwrap();
        assert!(after > 1.0 + 9.0 * 40.0 / 43.0 && after < 10.0, "{after}");
        assert!((w.saved_s.unwrap() - (10.0 - after)).abs() < 1e-9);
        assert!((w.predicted_bps.unwrap() - 36e6 * 10.0 / after).abs() < 1.0);
        // however fast the path, never more than the idle second allows
        let f = Facts { path_rate: Some(Rate(100_000_000_000)), ..f };
        let (_, w, _) = fixes(&f);
        assert!(w[0].predicted_high_bps.unwrap() <= 36e6 * 10.0, "{:?}", w[0]);
        // a cause whose states the capture never showed wins nothing back
        let f = Facts { timeline: timeline(Limit::SendBuffer, 10.0), ..f };
        let (_, w, _) = fixes(&f);
        assert_eq!((w[0].predicted_bps, w[0].saved_s), (Some(36e6), Some(0.0)));
    }

    #[test]
    fn a_path_the_flow_never_filled_gives_a_range_up_to_the_fixs_ceiling() {
        let (_, w, _) = fixes(&facts(Cause::ReceiverWindow, false));
        let w = &w[0];
        assert_eq!(w.fix, "raise_tcp_rmem");
        let (low, high) = (w.predicted_low_bps.unwrap(), w.predicted_high_bps.unwrap());
        assert_eq!(Some(low), w.predicted_bps);
        assert!((low - 43e6).abs() < 1e6, "{low}");
        // a 4 MiB buffer over 40 ms: 839 Mbit/s, a little less for a 1 GiB transfer
        assert!(high > 800e6 && high <= 4.0 * 1048576.0 * 8.0 / 0.04, "{high}");
        assert!(w.assumptions.iter().any(|a| a.contains("lower bound")), "{:?}", w.assumptions);
        assert!(w.expected_text().unwrap().starts_with("at least 43"), "{:?}", w.expected_text());
        // window scaling: up to Linux's default tcp_rmem max
        let (_, w, _) = fixes(&facts(Cause::WindowScalingOff, false));
        let high = w[0].predicted_high_bps.unwrap();
        assert!(high > 1.2e9 && high <= 6.0 * 1048576.0 * 8.0 / 0.04, "{high}");
    }

    #[test]
    fn a_send_buffer_fix_is_not_bounded_by_the_window_a_starved_sender_saw() {
        // the receiver showed 256 KiB while the sender starved; its
        // autotuning grows the window with what arrives, up to its
        // tcp_rmem max (6 MiB, half of it window under 6.6's ratio)
        let (_, w, _) = fixes(&facts(Cause::SendBuffer, false));
        let high = w[0].predicted_high_bps.unwrap();
        let seen = (256u64 << 10) as f64 * 8.0 / 0.04;
        let rmem = LINUX_TCP_RMEM_MAX_DEFAULT as f64 * KernelRule::ScalingRatio.window_fraction() * 8.0 / 0.04;
        assert!(high > 2.0 * seen && high <= rmem, "{high} vs {seen} seen, {rmem} at the rmem max");
    }

    #[test]
    fn a_path_seen_full_or_given_is_one_number() {
        for f in [facts(Cause::ReceiverWindow, true), Facts { path_measured: false, ..facts(Cause::ReceiverWindow, true) }] {
            let (_, w, _) = fixes(&f);
            assert_eq!(w[0].predicted_low_bps, w[0].predicted_bps);
            assert_eq!(w[0].predicted_high_bps, w[0].predicted_bps);
            assert!(w[0].expected_text().unwrap().starts_with("about "));
        }
        // a policer's rate is the path's: no range
        let (_, w, _) = fixes(&Facts { policer_rate: Some(20e6), ..facts(Cause::Policer, false) });
        assert_eq!(w[0].predicted_low_bps, w[0].predicted_high_bps);
    }

    #[test]
    fn pacing_behind_a_bucket_of_unseen_rate_predicts_the_range_the_losses_allow() {
        // the flow got 0.44 Mbit/s; any bucket of the fitted size from 0.457
        // to 0.717 Mbit/s explains its losses (a 0.5 Mbit/s policer)
        let base = Facts {
            goodput_bps: 0.44e6,
            rtt_s: Some(0.1),
            policer_rate: Some(0.457e6),
            policer_rate_high: Some(0.717e6),
            policer_small_bucket: true,
            ..facts(Cause::Policer, true)
        };
        let (_, w, _) = fixes(&base);
        let w = w.iter().find(|w| w.fix == "pace_bursts").unwrap();
        let (lo, hi) = w.range().expect("a range");
        // the low end pays slow start for this 1 GiB transfer: about the rate
        assert!(lo <= 0.457e6 && lo > 0.44e6, "{lo}");
        assert_eq!(hi, 0.717e6);
        assert_eq!(w.predicted_bps, Some(lo));
        assert!(w.expected_text().unwrap().contains("if the policer's rate is higher"), "{:?}", w.expected_text());
        // three flows share the bucket: each gets a third of it
        let (_, w, _) = fixes(&Facts { policer_flows: 3, ..base.clone() });
        let (lo3, hi3) = w[0].range().unwrap();
        assert!((lo3 - lo / 3.0).abs() < 0.02e6 && (hi3 - 0.717e6 / 3.0).abs() < 1.0, "{lo3} {hi3}");
        // the receiver's window caps the top: 8 KiB over 100 ms
        let (_, w, _) = fixes(&Facts { rcv_window: 8 << 10, ..base.clone() });
        assert!((w[0].range().unwrap().1 - 8192.0 * 8.0 / 0.1).abs() < 1.0);
        // a bucket with no bound above: no prediction
        let (_, w, _) = fixes(&Facts { policer_rate_high: None, ..base });
        assert_eq!((w[0].predicted_bps, w[0].range()), (None, None));
    }
}
