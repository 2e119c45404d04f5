//! The paragraph a person reads for one direction.

use tcpwhy_core::units::{fmt_bytes, fmt_ms, fmt_rate};
use crate::model::DirectionDiagnosis;
use tcpwhy_core::{Cause, Limit};

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
        s.push_str(&format!(" RTT {}", fmt_ms(b)));
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
            s.push_str(&format!(" Expected after the fix: {e} (now {}).", fmt_rate(w.current_bps)));
        }
    }
    s
}
