//! The paragraph a person reads for one direction.

use tcpwhy_core::units::calc;
use tcpwhy_core::units::{fmt_bytes, fmt_ms, fmt_rate};
use crate::model::{DirectionDiagnosis, TimeSplit};
use crate::shape::Shape;
use crate::timeline::{Timeline, NETWORK_STATES};
use tcpwhy_core::{Cause, Limit};
use std::collections::BTreeMap;

/// The summary gives the median RTT beside the base when a queue raised it:
/// above the base by the queue test's factor
/// ([`crate::path::QUEUE_BEFORE_LOSS_FACTOR`]) plus a millisecond, so a
/// sub-millisecond path's jitter is not shown as a queue.
const MEDIAN_SHOWN_FACTOR: f64 = crate::path::QUEUE_BEFORE_LOSS_FACTOR;
const MEDIAN_SHOWN_MIN_MS: f64 = 1.0;

pub fn headline(primary: Cause) -> &'static str {
    match primary {
        Cause::ReceiverWindow => "limited by the receiver's window",
        Cause::SendBuffer => "limited by the sender's send buffer",
        Cause::WindowScalingOff => "limited to a 64 KiB window: window scaling was not negotiated",
        Cause::CongestionLoss => "limited by congestion losses",
        Cause::Policer => "throttled by a token-bucket policer",
        Cause::Shaper => "held at a shaper's rate, behind its queue",
        Cause::BottleneckLink => "running at the bottleneck link's rate",
        Cause::RandomLoss => "limited by random packet loss",
        Cause::SenderApplication => "limited by the sending application",
        Cause::ReceiverApplication => "limited by the receiving application",
        Cause::SlowStart => "spent its time in slow start",
        Cause::SpuriousRetransmission => "hurt by spurious retransmissions",
        Cause::CachedSsthresh => "left slow start at a tiny window (cached ssthresh)",
        // Delayed ACKs are a request/response latency cause, never a bulk primary.
        Cause::DelayedAck | Cause::None => "not limited by anything tcpwhy can name",
        Cause::Undetermined => "undetermined: the capture cannot tell what limited it",
    }
}

pub fn paragraph(d: &DirectionDiagnosis) -> String {
    let mut s = format!(
        "{} -> {}: {} in {:.2} s{}, {}.",
        d.sender,
        d.receiver,
        fmt_bytes(d.bytes as f64),
        d.duration_s,
        d.goodput_bps.map_or(String::new(), |g| format!(" ({})", fmt_rate(g))),
        headline(d.primary)
    );
    if let Some(b) = d.rtt.base_ms {
        s.push_str(&format!(" Base RTT {}", fmt_ms(b)));
        if let Some(m) = d.rtt.median_ms.filter(|m| *m > MEDIAN_SHOWN_FACTOR * b + MEDIAN_SHOWN_MIN_MS) {
            s.push_str(&format!(" (median {})", fmt_ms(m)));
        }
        if let Some(p) = d.path_rate_bps {
            s.push_str(&format!(", path about {}", fmt_rate(p)));
        }
        s.push('.');
    }
    match d.traffic_shape {
        crate::shape::Shape::Bulk => {}
        crate::shape::Shape::RequestResponse => s.push_str(" Shape: request/response (each burst follows the receiver's request)."),
        crate::shape::Shape::SenderPaced => {
            s.push_str(" Shape: the sender paused on its own (no request from the receiver before its bursts).")
        }
    }
    let mut top: Vec<(&Limit, &f64)> = d.limits.iter().filter(|(_, v)| **v >= crate::detect::FINDING_MIN_SHARE).collect();
    top.sort_by(|a, b| b.1.total_cmp(a.1));
    if !top.is_empty() {
        let parts: Vec<String> = top.iter().map(|(k, v)| format!("{} {:.0}%", k, **v * 100.0)).collect();
        s.push_str(&format!(" Time: {}.", parts.join(", ")));
    }
    if !d.time_split.text.is_empty() {
        s.push_str(&format!(" Is it the network? {}.", d.time_split.text));
    }
    for f in d.findings.iter().take(3) {
        let mut t = f.text.clone();
        if let Some(c) = t.get(0..1) {
            t.replace_range(0..1, &c.to_uppercase());
        }
        s.push_str(&format!(" {t}."));
    }
    if let Some(fix) = d.fixes.first() {
        s.push_str(&format!(" Fix: {}.", fix.text));
    }
    if let Some(w) = d.what_if.first() {
        if let Some(e) = w.expected_text() {
            s.push_str(&format!(" Expected after the fix: {e} (now {}", fmt_rate(w.current_bps)));
            if let (Some(saved), Some(after)) = (w.saved_s, w.duration_s) {
                s.push_str(&format!("; it wins back {:.2} s of {:.2} s, {:.2}x", saved, d.duration_s, d.duration_s / after.max(f64::MIN_POSITIVE)));
            }
            s.push_str(").");
        }
    }
    s
}

/// The network holds the direction when it holds more than this share of
/// the time (a majority); below it, the answer leads with what else does.
pub const NETWORK_HOLDS_SHARE: f64 = 0.5;
/// A part of the time named in the answer: at least this share (the
/// `Time:` list's own floor, [`crate::detect::FINDING_MIN_SHARE`]).
const PART_NAMED_MIN_SHARE: f64 = crate::detect::FINDING_MIN_SHARE;

/// "Is it the network?" for one direction: the share of its time the
/// network and TCP's settings hold, and the most any network or TCP fix
/// can gain (Amdahl's law: the idle and application time stays).
pub fn time_split(tl: &Timeline, bytes: u64, shape: Shape) -> TimeSplit {
    let judged = tl.duration_s > 0.0 && tl.intervals > 0;
    time_split_of(|states| tl.share(states), tl.duration_s, judged, bytes, shape)
}

/// [`time_split`] from the shares of the limits (a direction diagnosed in
/// parts: the parts' shares weighted by their busy time, `crate::parts`).
pub fn time_split_from_limits(limits: &BTreeMap<Limit, f64>, duration_s: f64, bytes: u64, shape: Shape) -> TimeSplit {
    let share = |states: &[Limit]| states.iter().filter_map(|s| limits.get(s)).sum::<f64>();
    time_split_of(share, duration_s, duration_s > 0.0 && !limits.is_empty(), bytes, shape)
}

fn time_split_of(share: impl Fn(&[Limit]) -> f64, duration_s: f64, judged: bool, bytes: u64, shape: Shape) -> TimeSplit {
    let network = share(NETWORK_STATES);
    let sender_application = share(&[Limit::SenderApplication]);
    let receiver_application = share(&[Limit::ReceiverApplication]);
    let idle = share(&[Limit::Idle]);
    let untouched = sender_application + receiver_application + idle;
    let most_gain = (untouched > 0.0).then(|| 1.0 / untouched);
    let most_bps = (untouched > 0.0 && duration_s > 0.0).then(|| calc::bps(bytes as f64, duration_s * untouched));
    let mut parts: Vec<(f64, String)> = vec![
        (
            idle,
            match shape {
                Shape::RequestResponse => "the sender waited on the receiver's next request or reply".to_string(),
                Shape::SenderPaced => "the sender had nothing to send (its application paused)".to_string(),
                Shape::Bulk => "nothing was sent or in flight (idle)".to_string(),
            },
        ),
        (receiver_application, "the receiving application did not read (its window closed)".to_string()),
        (sender_application, "the sending application did not write fast enough".to_string()),
    ];
    parts.retain(|p| p.0 >= PART_NAMED_MIN_SHARE);
    parts.sort_by(|a, b| b.0.total_cmp(&a.0));
    let named: Vec<String> = parts
        .iter()
        .enumerate()
        .map(|(i, (v, t))| format!("{:.0}%{} {t}", v * 100.0, if i == 0 { " of the time" } else { "" }))
        .collect();
    let text = if !judged {
        String::new()
    } else if network > NETWORK_HOLDS_SHARE {
        format!("yes: the network and TCP's settings hold {:.0}% of the time", network * 100.0)
    } else {
        let gain = most_gain.map_or(String::new(), |g| format!(", so no network or TCP fix makes it more than {g:.2}x faster"));
        format!(
            "mostly not. The network and TCP's settings hold {:.0}% of the time{gain}{}{}",
            network * 100.0,
            if named.is_empty() { "" } else { "; " },
            named.join(", ")
        )
    };
    TimeSplit { network, sender_application, receiver_application, idle, most_gain, most_bps, text }
}
