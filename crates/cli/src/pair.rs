//! `diagnose --pair A B`: the comparison of two capture points, as text
//! and as JSON beside the two captures' own diagnoses.

use std::io::{self, Write};
use tcpwhy_diagnose::model::ConnectionDiagnosis;
use tcpwhy_pair::model::PairReport;

/// Paired connections the text shows at most (the JSON has all).
const TEXT_PAIRS_MAX: usize = 10;

/// Adds the report to diagnose's JSON: `pair` at the top (clock, counts,
/// every paired connection) and, on each paired connection, its `pair`
/// object.
pub(crate) fn add_json(doc: &mut serde_json::Value, p: &PairReport) {
    let mut by_conn = std::collections::HashMap::new();
    for pc in &p.pairs {
        let v = serde_json::to_value(pc).unwrap_or(serde_json::Value::Null);
        for c in &pc.connections {
            by_conn.insert((c.capture as u64, c.id), v.clone());
        }
    }
    if let Some(conns) = doc.get_mut("connections").and_then(|c| c.as_array_mut()) {
        for c in conns {
            let file = c.get("file").and_then(|f| f.as_u64());
            let id = c.pointer("/id/number").and_then(|n| n.as_u64());
            if let (Some(f), Some(id)) = (file, id) {
                if let Some(v) = by_conn.get(&(f, id)) {
                    c.as_object_mut().map(|m| m.insert("pair".into(), v.clone()));
                }
            }
        }
    }
    if let Some(m) = doc.as_object_mut() {
        m.insert("pair".into(), serde_json::to_value(p).unwrap_or(serde_json::Value::Null));
    }
}

/// Compares two captures already read and diagnosed (read again,
/// docs/pair.md), then carries the capacities the pair measures to their
/// diagnoses ([`tcpwhy_batch::pairs::carry_to_pair`]).
pub(crate) fn pair_and_carry(
    paths: [&std::path::Path; 2],
    analyses: [&tcpwhy_flow::CaptureAnalysis; 2],
    diagnoses: [&mut Vec<ConnectionDiagnosis>; 2],
) -> Result<PairReport, tcpwhy_pair::PairError> {
    let mut p = tcpwhy_pair::pair_analyses(paths, analyses, tcpwhy_pair::PairOptions::default())?;
    let [d0, d1] = diagnoses;
    tcpwhy_batch::pairs::carry_to_pair(&mut p, [d0, d1]);
    Ok(p)
}

pub(crate) fn write_text(out: &mut impl Write, p: &PairReport, color: bool) -> io::Result<()> {
    let (bold, reset) = if color { ("\x1b[1m", "\x1b[0m") } else { ("", "") };
    writeln!(out)?;
    writeln!(out, "{bold}Two capture points{reset}: capture 0 = {}, capture 1 = {}", p.files[0], p.files[1])?;
    writeln!(out, "  clocks: {}", p.clock.describe())?;
    writeln!(
        out,
        "  {} connection(s) matched; unmatched: {} in capture 0, {} in capture 1",
        p.pairs.len(),
        p.unmatched[0],
        p.unmatched[1]
    )?;
    for m in &p.messages {
        writeln!(out, "  {m}")?;
    }
    for pc in p.by_interest().into_iter().take(TEXT_PAIRS_MAX) {
        let [a, b] = &pc.connections;
        writeln!(out)?;
        writeln!(
            out,
            "{bold}{} -> {}{reset} (capture 0 #{}) = {} -> {} (capture 1 #{}): {}",
            a.client,
            a.server,
            a.id,
            b.client,
            b.server,
            b.id,
            pc.kind.name()
        )?;
        for e in &pc.evidence {
            writeln!(out, "  matched by: {e}")?;
        }
        writeln!(out, "  capture {} is nearer the client ({})", pc.client_capture, pc.client_capture_by)?;
        for f in &pc.findings {
            writeln!(out, "  {bold}{}{reset} [{}]: {}", f.kind, f.location, f.text)?;
            if let Some(fix) = &f.fix {
                writeln!(out, "    fix: {fix}")?;
            }
        }
        for d in &pc.directions {
            if let Some(delay) = &d.delay {
                let base = delay.base_ms.map(|[x, y]| format!("{x:.2} to {y:.2} ms, ")).unwrap_or_default();
                writeln!(
                    out,
                    "  the {}'s packets between the points: {}one-way delay {base}growth {:.2} ms (median) / {:.2} ms (95th percentile); {} paired, {} and {} seen at one capture only",
                    d.from, if d.paired > 0 { "" } else { "none paired; " }, delay.growth_p50_ms, delay.growth_p95_ms, d.paired, d.unpaired[0], d.unpaired[1]
                )?;
            }
        }
        for c in &pc.capacities {
            let why = if c.source == "drain_between" {
                "the rate the queue between the points drained at, measured directly"
            } else {
                "what the sender's capture saw the path carry; this capture alone had not seen the path's capacity"
            };
            writeln!(
                out,
                "  capture {}'s what-if for the {}'s data now uses a path of {} ({why})",
                c.capture,
                c.from,
                tcpwhy_diagnose::fmt_rate(c.rate_bps)
            )?;
        }
        for x in &pc.proxy {
            writeln!(
                out,
                "  the {}'s {} bytes: {:.0} ms at the upstream capture, {:.0} ms at the downstream one",
                x.from,
                x.bytes.iter().max().copied().unwrap_or(0),
                x.upstream_ms,
                x.downstream_ms
            )?;
        }
    }
    if p.pairs.len() > TEXT_PAIRS_MAX {
        writeln!(out, "\n({} more paired connections in --json)", p.pairs.len() - TEXT_PAIRS_MAX)?;
    }
    Ok(())
}
