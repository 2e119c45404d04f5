//! The report's "Flows compared" section: each group of flows from one host
//! to another at the same time (tcpwhy_diagnose::groups) with its findings
//! and a plot of the group's aggregate rate over time, the flows stacked,
//! and the shared policer's rate as a dashed line when there is one.
//!
//! Inline SVG written here, like the latency timelines (no script needed to
//! read it); hovering a band shows the flow's connection and mean rate, the
//! legend links to each connection's section. Capture text is escaped.

use crate::escape::escape_html;
use crate::timeline::{fmt_tick, tick_step};
use std::fmt::Write;
use tcpwhy_core::units::fmt_rate;
use tcpwhy_diagnose::groups::{FlowGroup, GroupSeries};

/// Time bins per group plot.
pub const BINS: usize = 200;
/// Flows drawn per group (the rest are summed into one band).
pub const MAX_FLOWS: usize = 12;

const W: f64 = 1000.0;
const H: f64 = 220.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 10.0;
const TOP: f64 = 8.0;
const BOTTOM: f64 = 24.0;

/// Colours of the bands (Tableau 10), in the group's flow order; the
/// legend's swatches have the same in report.css (`.gc0` to `.gc9`).
const COLOURS: [&str; 10] =
    ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];

/// The section for one capture's groups (empty when it has none).
/// `t0`: the capture's first time (the plots' axis starts there, as the
/// connections' plots do); `file`: the capture's index for the links.
pub fn overview_block(groups: &[(FlowGroup, GroupSeries)], t0: f64, file: usize, multi: Option<&str>) -> String {
    let mut s = String::new();
    if groups.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "<h2 class=\"section\">Flows compared{}</h2>\n<p>{} group(s) of flows from one host to another at the same time. <span class=\"hint\">(tcpwhy diagnose prints the same after the connections; <code>groups</code> in its JSON.)</span></p>",
        multi.map_or(String::new(), |path| format!(" ({})", escape_html(path))),
        groups.len()
    );
    for (g, series) in groups {
        let _ = writeln!(
            s,
            "<div class=\"group\"><h3>{} &rarr; {}: {} flows{}</h3>",
            escape_html(&g.sender),
            escape_html(&g.receiver),
            g.flows.len(),
            g.aggregate_goodput_bps.map_or(String::new(), |r| format!(", together {}", fmt_rate(r)))
        );
        if !g.findings.is_empty() {
            s.push_str("<ul class=\"findings\">");
            for f in &g.findings {
                let _ = write!(s, "<li><span class=\"primary\">{}</span>: {}</li>", escape_html(&f.kind.replace('_', " ")), escape_html(&f.text));
            }
            s.push_str("</ul>\n");
        }
        plot(&mut s, g, series, t0, file);
        s.push_str("</div>\n");
    }
    s
}

fn plot(s: &mut String, g: &FlowGroup, series: &GroupSeries, t0: f64, file: usize) {
    let n = series.flows.first().map_or(0, |f| f.2.len());
    if n == 0 {
        return;
    }
    // Bands: the first MAX_FLOWS flows, the rest summed.
    let mut bands: Vec<(String, Option<u64>, Vec<f64>)> = Vec::new();
    for (i, (conn, _, v)) in series.flows.iter().enumerate() {
        if i < MAX_FLOWS {
            bands.push((format!("connection {conn}"), Some(*conn), v.clone()));
        } else if i == MAX_FLOWS {
            bands.push((format!("{} more flows", series.flows.len() - MAX_FLOWS), None, v.clone()));
        } else if let Some(last) = bands.last_mut() {
            for (a, b) in last.2.iter_mut().zip(v) {
                *a += b;
            }
        }
    }
    let mut top = vec![0.0f64; n];
    for b in &bands {
        for (t, x) in top.iter_mut().zip(&b.2) {
            *t += x;
        }
    }
    let ymax = top.iter().copied().fold(0.0, f64::max).max(g.policer_rate_bps.unwrap_or(0.0)) * 1.08;
    if ymax <= 0.0 {
        return;
    }
    let (x0, x1) = (series.t0 - t0, series.t0 - t0 + series.bin_s * n as f64);
    let px = |t: f64| LEFT + (t - x0) / (x1 - x0).max(1e-9) * (W - LEFT - RIGHT);
    let py = |r: f64| TOP + (1.0 - r / ymax) * (H - TOP - BOTTOM);
    let _ = writeln!(
        s,
        "<svg class=\"groupplot\" viewBox=\"0 0 {W} {H}\" width=\"100%\" role=\"img\" aria-label=\"aggregate rate of the group, flows stacked\">"
    );
    // Stacked bands: each a polygon from its lower to its upper edge.
    let mut base = vec![0.0f64; n];
    for (k, (label, conn, v)) in bands.iter().enumerate() {
        let mut pts = String::new();
        for i in 0..n {
            let (ta, tb) = (x0 + series.bin_s * i as f64, x0 + series.bin_s * (i + 1) as f64);
            let y = py(base[i] + v[i]);
            let _ = write!(pts, "{:.1},{:.1} {:.1},{:.1} ", px(ta), y, px(tb), y);
        }
        for i in (0..n).rev() {
            let (ta, tb) = (x0 + series.bin_s * i as f64, x0 + series.bin_s * (i + 1) as f64);
            let y = py(base[i]);
            let _ = write!(pts, "{:.1},{:.1} {:.1},{:.1} ", px(tb), y, px(ta), y);
        }
        let active: Vec<f64> = v.iter().copied().filter(|x| *x > 0.0).collect();
        let mean = if active.is_empty() { 0.0 } else { active.iter().sum::<f64>() / active.len() as f64 };
        let _ = writeln!(
            s,
            "<polygon points=\"{}\" fill=\"{}\" fill-opacity=\"0.85\"{}><title>{}: about {} while it moved data</title></polygon>",
            pts.trim_end(),
            COLOURS[k % COLOURS.len()],
            conn.map_or(String::new(), |c| format!(" data-conn=\"c-{file}-{c}\"")),
            escape_html(label),
            fmt_rate(mean)
        );
        for (b, x) in base.iter_mut().zip(v) {
            *b += x;
        }
    }
    if let Some(r) = g.policer_rate_bps {
        let y = py(r);
        let _ = writeln!(
            s,
            "<line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" class=\"policer-line\" stroke=\"#c00\" stroke-dasharray=\"6 4\" stroke-width=\"1.5\"><title>shared policer: {}</title></line>",
            W - RIGHT,
            fmt_rate(r)
        );
    }
    // Axes: time below, rate on the left.
    let step = tick_step(x1 - x0, 8.0);
    let mut t = (x0 / step).ceil() * step;
    while t <= x1 + step * 1e-6 {
        let x = px(t);
        let _ = writeln!(
            s,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#999\"/><text x=\"{x:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{}</text>",
            H - BOTTOM,
            H - BOTTOM + 4.0,
            H - 8.0,
            fmt_tick(t, step)
        );
        t += step;
    }
    let rstep = tick_step(ymax, 4.0);
    let mut r = 0.0;
    while r <= ymax {
        let y = py(r);
        let _ = writeln!(
            s,
            "<line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{}</text>",
            W - RIGHT,
            LEFT - 4.0,
            y + 4.0,
            fmt_rate(r)
        );
        r += rstep;
    }
    s.push_str("</svg>\n<div class=\"panel-legend\">");
    for (k, (label, conn, _)) in bands.iter().enumerate() {
        let text = match conn {
            Some(c) => format!("<a href=\"#c-{file}-{c}\">{}</a>", escape_html(label)),
            None => escape_html(label),
        };
        // A class, not a style attribute: the page's CSP allows no inline styles.
        let _ = write!(s, "<span class=\"sw gc{}\"></span>{text}", k % COLOURS.len());
    }
    if g.policer_rate_bps.is_some() {
        s.push_str("<span class=\"sw swdash\"></span>shared policer's rate");
    }
    s.push_str("</div>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpwhy_core::Cause;
    use tcpwhy_diagnose::groups::{GroupFinding, GroupFlow};

    fn flow(c: u64, a: f64, b: f64) -> GroupFlow {
        GroupFlow { connection: c, from: "b", bytes: 1_000_000, goodput_bps: Some(8e6), primary: Cause::Policer, first_time: a, last_time: b }
    }

    #[test]
    fn stacks_the_flows_and_draws_the_policer_line() {
        let g = FlowGroup {
            sender: "10.0.0.2".into(),
            receiver: "10.0.0.1<script>".into(),
            flows: vec![flow(1, 100.0, 104.0), flow(2, 101.0, 104.0)],
            first_time: 100.0,
            last_time: 104.0,
            aggregate_goodput_bps: Some(40e6),
            policer_rate_bps: Some(40e6),
            policer_burst_bytes: Some(500_000),
            findings: vec![GroupFinding { kind: "shared_policer", text: "these 2 flows share a policer".into() }],
        };
        let series = GroupSeries {
            t0: 100.0,
            bin_s: 1.0,
            flows: vec![(1, "b", vec![40e6, 20e6, 20e6, 20e6]), (2, "b", vec![0.0, 20e6, 20e6, 20e6])],
        };
        let html = overview_block(&[(g, series)], 99.0, 0, None);
        assert_eq!(html.matches("<polygon").count(), 2, "{html}");
        assert!(html.contains("class=\"policer-line\""));
        assert!(html.contains("href=\"#c-0-1\"") && html.contains("href=\"#c-0-2\""));
        assert!(html.contains("10.0.0.1&lt;script&gt;") && !html.contains("<script>"));
        assert!(html.contains("shared policer"));
        // The top band's upper edge in the first bin is the sum of both (40 Mbit/s).
        assert!(html.contains("connection 2: about 20.0 Mbit/s"), "{html}");
        assert!(overview_block(&[], 0.0, 0, None).is_empty());
    }
}
