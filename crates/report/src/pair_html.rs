//! The report's section for two capture points (`report --pair A B`):
//! the comparison `diagnose --pair` prints, as HTML (docs/pair.md).

use crate::escape::escape_html as esc;
use tcpwhy_core::units::fmt_rate;
use tcpwhy_pair::model::{PairReport, PairedConnection};

/// Paired connections shown at most (those with findings first; the JSON has them all).
pub const PAIRS_SHOWN_MAX: usize = 50;

/// The section: the clocks, then each paired connection with its verdict,
/// per-direction loss and delay, and what a box changed.
pub fn pair_section(p: &PairReport) -> String {
    let mut h = String::from("<section id=\"pair\"><h2>Two capture points</h2>\n");
    h.push_str(&format!(
        "<p>capture 0 = {}, capture 1 = {}. {} connection(s) matched; unmatched: {} in capture 0, {} in capture 1.</p>\n",
        esc(&p.files[0]),
        esc(&p.files[1]),
        p.pairs.len(),
        p.unmatched[0],
        p.unmatched[1]
    ));
    h.push_str(&format!("<p>Clocks: {}</p>\n", esc(&p.clock.describe())));
    for m in &p.messages {
        h.push_str(&format!("<p class=\"hint\">{}</p>\n", esc(m)));
    }
    for pc in p.by_interest().into_iter().take(PAIRS_SHOWN_MAX) {
        paired(&mut h, pc);
    }
    if p.pairs.len() > PAIRS_SHOWN_MAX {
        h.push_str(&format!("<p class=\"hint\">{} more paired connections: see `tcpwhy diagnose --pair --json`.</p>\n", p.pairs.len() - PAIRS_SHOWN_MAX));
    }
    h.push_str("</section>\n");
    h
}

fn paired(h: &mut String, pc: &PairedConnection) {
    let [a, b] = &pc.connections;
    h.push_str(&format!(
        "<details open><summary>{} &rarr; {} (capture 0 #{}) = {} &rarr; {} (capture 1 #{}): {}</summary>\n",
        esc(&a.client),
        esc(&a.server),
        a.id,
        esc(&b.client),
        esc(&b.server),
        b.id,
        pc.kind.name()
    ));
    h.push_str(&format!("<p>Matched by: {}. {}.</p>\n", esc(&pc.evidence.join("; ")), esc(&format!("capture {} is nearer the client ({})", pc.client_capture, pc.client_capture_by))));
    h.push_str("<table><thead><tr><th>finding</th><th>where</th><th>what</th><th>fix</th></tr></thead><tbody>\n");
    for f in &pc.findings {
        h.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            esc(f.kind),
            esc(&f.location),
            esc(&f.text),
            esc(f.fix.as_deref().unwrap_or(""))
        ));
    }
    h.push_str("</tbody></table>\n");
    if !pc.directions.is_empty() {
        h.push_str("<table><thead><tr><th>data of</th><th>packets (0 / 1)</th><th>paired</th><th>lost before / between / after</th><th>not captured</th><th>delay growth p50 / p95 ms</th><th>queue drains at</th></tr></thead><tbody>\n");
        for d in &pc.directions {
            let l = &d.loss;
            let (g50, g95, drain) = d.delay.as_ref().map_or((String::new(), String::new(), String::new()), |x| {
                (format!("{:.2}", x.growth_p50_ms), format!("{:.2}", x.growth_p95_ms), x.drain_rate_bps.map(fmt_rate).unwrap_or_default())
            });
            h.push_str(&format!(
                "<tr><td>{}</td><td>{} / {}</td><td>{}</td><td>{} / {} / {} of {}</td><td>{}</td><td>{g50} / {g95}</td><td>{}</td></tr>\n",
                d.from,
                d.packets[0],
                d.packets[1],
                d.paired,
                l.before_upstream,
                l.between,
                l.after_downstream,
                l.segments,
                l.not_captured_upstream + l.not_captured_downstream,
                esc(&drain)
            ));
        }
        h.push_str("</tbody></table>\n");
    }
    if !pc.changes.is_empty() {
        h.push_str("<ul>\n");
        for c in &pc.changes {
            let frames: Vec<String> = c.frames.iter().map(|[cap, f]| format!("capture {cap} frame {f}")).collect();
            h.push_str(&format!("<li>{}: {} ({})</li>\n", esc(c.kind), esc(&c.detail), esc(&frames.join(", "))));
        }
        h.push_str("</ul>\n");
    }
    h.push_str("</details>\n");
}
