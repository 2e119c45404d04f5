//! The paragraph a person reads for one direction.

use crate::analyze::fmt_rate;
use crate::model::DirectionDiagnosis;

pub fn headline(primary: &str) -> &'static str {
    match primary {
        "receiver_window" => "limited by the receiver's window",
        "send_buffer" => "limited by the sender's send buffer",
        "window_scaling_off" => "limited to a 64 KiB window: window scaling was not negotiated",
        "congestion_loss" => "limited by congestion losses",
        "policer" => "throttled by a token-bucket policer",
        "shaper" => "held at a shaper's rate, behind its queue",
        "bottleneck_link" => "running at the bottleneck link's rate",
        "random_loss" => "limited by random packet loss",
        "sender_application" => "limited by the sending application",
        "receiver_application" => "limited by the receiving application",
        "slow_start" => "spent its time in slow start",
        "spurious_retransmission" => "hurt by spurious retransmissions",
        "cached_ssthresh" => "left slow start at a tiny window (cached ssthresh)",
        _ => "not limited by anything tcpwhy can name",
    }
}

pub fn paragraph(d: &DirectionDiagnosis) -> String {
    let mut s = format!(
        "{} -> {}: {} in {:.2} s{}, {}.",
        d.sender,
        d.receiver,
        crate::analyze::fmt_bytes(d.bytes as f64),
        d.duration_s,
        d.goodput_bps.map_or(String::new(), |g| format!(" ({})", fmt_rate(g))),
        headline(d.primary)
    );
    if let Some(b) = d.rtt.base_ms {
        s.push_str(&format!(" RTT {}", crate::analyze::fmt_ms(b)));
        if let Some(m) = d.rtt.median_ms.filter(|m| *m > 1.25 * b + 1.0) {
            s.push_str(&format!(" (median {})", crate::analyze::fmt_ms(m)));
        }
        if let Some(p) = d.path_rate_bps {
            s.push_str(&format!(", path about {}", fmt_rate(p)));
        }
        s.push('.');
    }
    let mut top: Vec<(&&str, &f64)> = d.limits.iter().filter(|(_, v)| **v >= 0.05).collect();
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
        if let Some(p) = w.predicted_bps {
            s.push_str(&format!(" Expected after the fix: about {} (now {}).", fmt_rate(p), fmt_rate(w.current_bps)));
        }
    }
    s
}
