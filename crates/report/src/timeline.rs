//! The report's request-latency views: a waterfall of every connection's
//! exchanges on the capture's time axis, and per connection a waterfall of
//! its exchanges (one row each) with the table `tcpwhy latency` prints.
//!
//! Both are inline SVG written here (no script needed to read them): each
//! exchange is a row of bars, handshake, request, the responder's time,
//! response (orange when it restarted from the initial window after idle),
//! delayed-ACK waits in red over the bar that waited, ticks where each
//! response round began, and a thin line under the bar as long as the
//! same exchange would take on a warm connection. Hovering shows the
//! numbers (SVG `<title>`); the page script zooms the connection's plots
//! to an exchange when it is clicked (`data-t0`/`data-t1`, seconds on the
//! plots' axis). Capture text (request and status lines) is escaped.

use crate::escape::escape_html;
use std::fmt::Write;
use tcpwhy_diagnose::latency::{ConnLatency, Exchange, LatencyReport};
use tcpwhy_diagnose::{fmt_bytes, fmt_ms};

/// Rows drawn per waterfall; the rest is counted in a note.
pub const MAX_ROWS: usize = 200;

const W: f64 = 1000.0;
const LABEL_W: f64 = 190.0;
const RIGHT: f64 = 10.0;
const ROW_H: f64 = 16.0;
const TOP: f64 = 6.0;
const AXIS_H: f64 = 22.0;

fn fmt_size(b: u64) -> String {
    fmt_bytes(b as f64)
}

/// A "nice" tick step (1, 2, 5 × 10^k) giving about `n` ticks over `span`.
pub(crate) fn tick_step(span: f64, n: f64) -> f64 {
    let raw = (span / n).max(1e-9);
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    p * if m < 1.5 {
        1.0
    } else if m < 3.5 {
        2.0
    } else if m < 7.5 {
        5.0
    } else {
        10.0
    }
}

pub(crate) fn fmt_tick(t: f64, step: f64) -> String {
    let t = if t.abs() < step * 1e-6 { 0.0 } else { t };
    if step >= 1.0 {
        format!("{t:.0} s")
    } else if step >= 0.1 {
        format!("{t:.1} s")
    } else if step >= 0.01 {
        format!("{t:.2} s")
    } else {
        format!("{:.0} ms", t * 1000.0)
    }
}

/// The time scale of one waterfall: seconds (relative to `t0`) to x.
struct Scale {
    t0: f64,
    lo: f64,
    hi: f64,
}

impl Scale {
    fn x(&self, abs: f64) -> f64 {
        let rel = abs - self.t0;
        LABEL_W + (rel - self.lo) / (self.hi - self.lo) * (W - LABEL_W - RIGHT)
    }
    fn axis(&self, s: &mut String, y: f64) {
        let step = tick_step(self.hi - self.lo, 8.0);
        let mut t = (self.lo / step).ceil() * step;
        let _ = write!(s, "<line class=\"ax\" x1=\"{LABEL_W}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/>", W - RIGHT);
        let mut n = 0;
        while t <= self.hi + step * 1e-6 && n < 30 {
            let x = LABEL_W + (t - self.lo) / (self.hi - self.lo) * (W - LABEL_W - RIGHT);
            let _ = write!(
                s,
                "<line class=\"grid\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{TOP}\" y2=\"{y:.1}\"/><text class=\"tick\" x=\"{x:.1}\" y=\"{:.1}\">{}</text>",
                y + 14.0,
                fmt_tick(t, step)
            );
            t += step;
            n += 1;
        }
    }
}

/// Start of an exchange on the time axis (the SYN for a new connection).
fn ex_start(e: &Exchange) -> f64 {
    e.request_start - e.handshake_ms.unwrap_or(0.0) / 1000.0
}

fn ex_end(e: &Exchange) -> f64 {
    e.response_last.unwrap_or(e.request_end).max(e.request_end)
}

fn rect(s: &mut String, class: &str, x0: f64, x1: f64, y: f64, h: f64) {
    let w = (x1 - x0).max(1.0);
    let _ = write!(s, "<rect class=\"{class}\" x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\"/>");
}

/// The bars of one exchange in a row at `y`.
fn exchange_bars(s: &mut String, sc: &Scale, e: &Exchange, y: f64, ticks: bool) {
    let h = ROW_H - 5.0;
    let start = ex_start(e);
    if e.handshake_ms.is_some() {
        rect(s, "ph-hs", sc.x(start), sc.x(e.request_start), y, h);
    }
    rect(s, "ph-req", sc.x(e.request_start), sc.x(e.request_end), y, h);
    if let (Some(f), Some(l)) = (e.response_first, e.response_last) {
        if f > e.request_end {
            rect(s, "ph-wait", sc.x(e.request_end), sc.x(f), y, h);
        }
        rect(s, if e.idle_restart { "ph-restart" } else { "ph-resp" }, sc.x(f), sc.x(l), y, h);
        if ticks {
            for &r in e.round_starts.iter().skip(1) {
                let x = sc.x(r);
                let _ = write!(s, "<line class=\"round\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{y:.1}\" y2=\"{:.1}\"/>", y + h);
            }
        }
    }
    for &(a, b) in &e.waits {
        rect(s, "ph-dack", sc.x(a), sc.x(b), y, h);
    }
    if let Some(w) = e.warm_ms {
        let yy = y + h + 1.5;
        let _ = write!(
            s,
            "<line class=\"warm\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\"/>",
            sc.x(start),
            sc.x(start) + (sc.x(start + w / 1000.0) - sc.x(start)).max(1.0)
        );
    }
}

fn exchange_title(e: &Exchange) -> String {
    let mut t = format!("exchange {}", e.index);
    if let Some(r) = &e.request_line {
        let _ = write!(t, ": {r}");
    }
    if let Some(st) = &e.status_line {
        let _ = write!(t, " -> {st}");
    }
    let _ = write!(t, "\n{} connection", if e.new_connection { "new" } else { "reused" });
    if let Some(h) = e.handshake_ms {
        let _ = write!(t, ", handshake {}", fmt_ms(h));
    }
    if let Some(i) = e.idle_before_ms {
        let _ = write!(
            t,
            ", idle {} before{}",
            fmt_ms(i),
            if e.idle_restart {
                " (longer than the RTO: restarted from the initial window)"
            } else if e.idle_exceeds_rto {
                " (longer than the RTO)"
            } else {
                ""
            }
        );
    }
    let _ = write!(t, "\nrequest {}, response {}", fmt_size(e.request_bytes), fmt_size(e.response_bytes));
    if let Some(sv) = e.server_ms {
        let _ = write!(t, " after {} at the responder", fmt_ms(sv));
    }
    let _ = write!(
        t,
        "\n{} round(s), {} of them slow start, first flight {} segments",
        e.response_rounds, e.slow_start_rounds, e.first_flight_segments
    );
    if e.delayed_ack_ms > 0.0 {
        let _ = write!(t, "\nwaited {} for delayed ACKs", fmt_ms(e.delayed_ack_ms));
    }
    if let Some(x) = e.time_ms {
        let _ = write!(t, "\ntook {}", fmt_ms(x));
    }
    if let Some(w) = e.warm_ms {
        let _ = write!(t, "; about {} on a warm connection", fmt_ms(w));
    }
    t
}

fn svg_open(s: &mut String, rows: usize, label: &str) -> f64 {
    let height = TOP + rows as f64 * ROW_H + AXIS_H;
    let _ = write!(
        s,
        "<svg class=\"waterfall\" viewBox=\"0 0 {W} {height:.0}\" width=\"100%\" role=\"img\" aria-label=\"{}\">",
        escape_html(label)
    );
    TOP + rows as f64 * ROW_H
}

fn range(exs: impl Iterator<Item = (f64, f64)>, t0: f64) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for (a, b) in exs {
        lo = lo.min(a - t0);
        hi = hi.max(b - t0);
    }
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.01).max(1e-4);
    (lo.min(hi) - pad, hi + pad)
}

const LEGEND: &str = "<div class=\"panel-legend\"><span class=\"sw ph-hs\"></span>handshake<span class=\"sw ph-req\"></span>request<span class=\"sw ph-wait\"></span>responder<span class=\"sw ph-resp\"></span>response<span class=\"sw ph-restart\"></span>response restarted after idle<span class=\"sw ph-dack\"></span>delayed-ACK wait<span class=\"sw swline\"></span>same exchange on a warm connection; ticks: response rounds</div>\n";

/// One connection's exchanges, one row each, on the plots' time axis
/// (`t0`: the connection's first packet), then the exchange table.
pub fn connection_block(c: &ConnLatency, t0: f64) -> String {
    let mut s = String::new();
    if c.exchanges.is_empty() {
        return s;
    }
    let shown = &c.exchanges[..c.exchanges.len().min(MAX_ROWS)];
    let _ = write!(
        s,
        "<h3>Exchanges: {} request(s) from {}, RTT {}{}</h3>\n{LEGEND}",
        c.exchanges.len(),
        escape_html(&c.client),
        c.rtt_ms.map_or("?".into(), fmt_ms),
        c.path_bps.map_or(String::new(), |p| format!(", path about {}", tcpwhy_diagnose::fmt_rate(p))),
    );
    let sc = {
        let (lo, hi) = range(shown.iter().map(|e| (ex_start(e), ex_end(e).max(ex_start(e) + e.warm_ms.unwrap_or(0.0) / 1e3))), t0);
        Scale { t0, lo, hi }
    };
    let axis_y = svg_open(&mut s, shown.len(), &format!("exchanges of connection {}", c.connection));
    sc.axis(&mut s, axis_y);
    for (k, e) in shown.iter().enumerate() {
        let y = TOP + k as f64 * ROW_H;
        let label = match &e.request_line {
            Some(r) => format!("#{} {}", e.index, r),
            None => format!("#{} {} B", e.index, e.request_bytes),
        };
        let label: String = if label.chars().count() > 30 { label.chars().take(29).chain(['…']).collect() } else { label };
        let _ = write!(
            s,
            "<g class=\"ex\" data-t0=\"{:.6}\" data-t1=\"{:.6}\"><title>{}</title><rect class=\"hit\" x=\"0\" y=\"{y:.1}\" width=\"{W}\" height=\"{ROW_H}\"/><text class=\"lbl\" x=\"4\" y=\"{:.1}\">{}</text>",
            ex_start(e) - t0,
            ex_end(e) - t0,
            escape_html(&exchange_title(e)),
            y + ROW_H - 5.0,
            escape_html(&label)
        );
        exchange_bars(&mut s, &sc, e, y + 1.0, true);
        s.push_str("</g>");
    }
    s.push_str("</svg>\n");
    if c.exchanges.len() > shown.len() {
        let _ = writeln!(s, "<p class=\"hint\">{} later exchanges not drawn (see the table).</p>", c.exchanges.len() - shown.len());
    }
    // The table.
    s.push_str("<table class=\"overview exchanges\"><thead><tr>");
    for hd in ["#", "request", "status", "connection", "idle before", "response", "time", "rounds", "slow start", "first flight", "delayed ACK", "warm"] {
        let _ = write!(s, "<th>{hd}</th>");
    }
    s.push_str("</tr></thead><tbody>\n");
    for e in &c.exchanges {
        let idle = e.idle_before_ms.map_or("-".into(), |m| {
            format!("{}{}", fmt_ms(m), if e.idle_restart { " (restart)" } else if e.idle_exceeds_rto { " (&gt; RTO)" } else { "" })
        });
        let _ = writeln!(
            s,
            "<tr><td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{} seg</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            e.index,
            escape_html(e.request_line.as_deref().unwrap_or("")),
            escape_html(e.status_line.as_deref().unwrap_or("")),
            if e.new_connection { format!("new, handshake {}", fmt_ms(e.handshake_ms.unwrap_or(0.0))) } else { "reused".into() },
            idle,
            fmt_size(e.response_bytes),
            e.time_ms.map_or("-".into(), fmt_ms),
            e.response_rounds,
            e.slow_start_rounds,
            e.first_flight_segments,
            if e.delayed_ack_ms > 0.0 { fmt_ms(e.delayed_ack_ms) } else { "-".into() },
            e.warm_ms.map_or("-".into(), fmt_ms),
        );
    }
    s.push_str("</tbody></table>\n");
    s
}

/// The capture-wide view: findings, fixes with their predicted totals, and
/// one row per connection (by start time) with all its exchanges, on the
/// time axis of the capture's first connection. `key` links each row to the
/// connection's section.
pub fn overview_block(rep: &LatencyReport, t0: f64, file: usize, multi: Option<&str>) -> String {
    let mut s = String::new();
    if rep.connections.iter().all(|c| c.exchanges.is_empty()) {
        return s;
    }
    let n_ex: usize = rep.connections.iter().map(|c| c.exchanges.len()).sum();
    let _ = writeln!(
        s,
        "<h2 class=\"section\">Request latency{}</h2>\n<p>{} exchange(s) on {} connection(s), {} in total. <span class=\"hint\">(tcpwhy latency prints the same per exchange.)</span></p>",
        multi.map_or(String::new(), |path| format!(" ({})", escape_html(path))),
        n_ex,
        rep.connections.len(),
        fmt_ms(rep.total_ms)
    );
    if !rep.findings.is_empty() || !rep.fixes.is_empty() {
        s.push_str("<ul class=\"findings\">");
        for f in &rep.findings {
            let _ = write!(s, "<li><span class=\"primary\">{}</span>: {}</li>", escape_html(&f.kind.replace('_', " ")), escape_html(&f.text));
        }
        for f in &rep.fixes {
            let after = rep.predicted_ms.get(f.kind).and_then(|v| v.as_f64());
            let _ = write!(
                s,
                "<li>fix [{}] {}{}",
                escape_html(f.on),
                escape_html(&f.text),
                after.map_or(String::new(), |a| format!(": total request time {} &rarr; about {}", fmt_ms(rep.total_ms), fmt_ms(a)))
            );
            if !f.commands.is_empty() {
                let _ = write!(s, "<pre>{}</pre>", escape_html(&f.commands.join("\n")));
            }
            s.push_str("</li>");
        }
        s.push_str("</ul>\n");
    }
    let mut conns: Vec<&ConnLatency> = rep.connections.iter().filter(|c| !c.exchanges.is_empty()).collect();
    conns.sort_by(|a, b| ex_start(&a.exchanges[0]).total_cmp(&ex_start(&b.exchanges[0])));
    let total = conns.len();
    conns.truncate(MAX_ROWS);
    s.push_str(LEGEND);
    let (lo, hi) = range(conns.iter().flat_map(|c| c.exchanges.iter().map(|e| (ex_start(e), ex_end(e).max(ex_start(e) + e.warm_ms.unwrap_or(0.0) / 1e3)))), t0);
    let sc = Scale { t0, lo, hi };
    let axis_y = svg_open(&mut s, conns.len(), "exchanges of all connections");
    sc.axis(&mut s, axis_y);
    for (k, c) in conns.iter().enumerate() {
        let y = TOP + k as f64 * ROW_H;
        let _ = write!(
            s,
            "<g class=\"conn-row\" data-conn=\"c-{file}-{}\"><title>connection {}: {} -&gt; {}, {} exchange(s)</title><rect class=\"hit\" x=\"0\" y=\"{y:.1}\" width=\"{W}\" height=\"{ROW_H}\"/><text class=\"lbl\" x=\"4\" y=\"{:.1}\">conn {} ({})</text>",
            c.connection,
            c.connection,
            escape_html(&c.client),
            escape_html(&c.server),
            c.exchanges.len(),
            y + ROW_H - 5.0,
            c.connection,
            c.exchanges.len()
        );
        for e in &c.exchanges {
            exchange_bars(&mut s, &sc, e, y + 1.0, false);
        }
        s.push_str("</g>");
    }
    s.push_str("</svg>\n");
    if total > conns.len() {
        let _ = writeln!(s, "<p class=\"hint\">{} later connections not drawn.</p>", total - conns.len());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(index: usize, start: f64, line: &str, restart: bool) -> Exchange {
        Exchange {
            index,
            request_line: Some(line.into()),
            status_line: Some("HTTP/1.1 200 OK".into()),
            request_start: start,
            request_end: start,
            response_first: Some(start + 0.025),
            response_last: Some(start + 0.105),
            request_bytes: 80,
            response_bytes: 700_000,
            new_connection: index == 1,
            handshake_ms: (index == 1).then_some(20.0),
            idle_before_ms: (index > 1).then_some(2000.0),
            idle_exceeds_rto: index > 1,
            idle_restart: restart,
            first_flight_bytes: 14_480,
            first_flight_segments: 10,
            response_rounds: 5,
            slow_start_rounds: 4,
            delayed_ack_ms: 0.0,
            server_ms: Some(5.0),
            time_ms: Some(105.0),
            warm_ms: Some(60.0),
            round_starts: vec![start + 0.025, start + 0.045, start + 0.065],
            waits: vec![],
        }
    }

    fn conn() -> ConnLatency {
        ConnLatency {
            connection: 7,
            client: "10.0.0.1:40000".into(),
            server: "10.0.0.2:80".into(),
            rtt_ms: Some(20.0),
            path_bps: Some(1e8),
            exchanges: vec![ex(1, 100.02, "GET /a HTTP/1.1", false), ex(2, 102.2, "GET /<script>x</script> HTTP/1.1", true)],
            closed_after_idle_ms: None,
            turns: Vec::new(),
        }
    }

    #[test]
    fn a_row_per_exchange_on_the_plots_axis_with_capture_text_escaped() {
        let s = connection_block(&conn(), 100.0);
        assert_eq!(s.matches("<g class=\"ex\"").count(), 2);
        // Relative to the connection's first packet: the SYN at 100.0 s.
        assert!(s.contains("data-t0=\"0.000000\" data-t1=\"0.125000\""), "{s}");
        assert!(s.contains("data-t0=\"2.200000\" data-t1=\"2.305000\""), "{s}");
        assert!(!s.contains("<script>") && s.contains("&lt;script&gt;"));
        // Handshake only on the new connection; the restarted response in orange.
        assert_eq!(s.matches("class=\"ph-hs\"").count(), 1);
        assert_eq!(s.matches("class=\"ph-restart\"").count(), 1);
        // Round ticks after the first round, for both exchanges.
        assert_eq!(s.matches("class=\"round\"").count(), 4);
        assert_eq!(s.matches("<tr><td class=\"n\">").count(), 2);
    }

    #[test]
    fn overview_links_each_connection_row_to_its_section() {
        let rep = tcpwhy_diagnose::latency::latency_report(vec![conn()]);
        let s = overview_block(&rep, 99.0, 0, None);
        assert!(s.contains("data-conn=\"c-0-7\""));
        assert!(s.contains("idle restart"), "{s}");
        assert!(s.contains("tcp_slow_start_after_idle=0"));
    }

    #[test]
    fn ticks_are_round_numbers() {
        assert_eq!(tick_step(10.0, 8.0), 1.0);
        assert_eq!(tick_step(0.35, 8.0), 0.05);
        assert_eq!(tick_step(1.7, 8.0), 0.2);
        assert_eq!(fmt_tick(0.25, 0.05), "0.25 s");
        assert_eq!(fmt_tick(0.004, 0.002), "4 ms");
    }
}
