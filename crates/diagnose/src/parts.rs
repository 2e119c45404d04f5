//! A long direction diagnosed in parts, so that memory is bounded by the
//! live connections and not by the length of the capture.
//!
//! The detectors work on a direction's per-segment records (several passes:
//! the path estimates first, then intervals one base RTT wide, the policer's
//! token-bucket test, the loss episodes). Rather than keep every record of a
//! 100 M-packet transfer, the recorder (`crate::recorder`) closes a direction's
//! records into a *part* when they reach [`PART_DATA_SEGMENTS`]: the part is
//! diagnosed there and then, from a snapshot of the connection, exactly as a
//! whole direction would be, and its records are dropped. At the end the
//! last part (what is still held) is diagnosed, and [`merge`] joins the
//! parts into the direction's diagnosis:
//!
//! - time shares of the limits: the parts' shares weighted by their busy time;
//! - the primary cause: the one that held the most busy time over all parts;
//!   its findings and fixes come from the longest part with that primary;
//! - "is it the network?" from the weighted shares, and the what-if summed
//!   over the parts that proposed the same fix (`whole_what_if`): one
//!   duration for the gain and the time won back;
//! - when that cause held less than [`PART_AGREEMENT`] of the time, the
//!   confidence is at most medium and a `cause_changed` finding lists the
//!   causes with their shares;
//! - `parts` in the JSON lists every part (time span, bytes, goodput,
//!   primary, confidence).
//!
//! A direction with fewer data segments than [`PART_DATA_SEGMENTS`] is one
//! part, and its diagnosis is exactly what it was before parts existed.

use tcpwhy_core::units::calc;
use crate::model::{DirectionDiagnosis, Evidence, Finding, WhatIf};
pub use crate::model::{Part, PartSummary};
use crate::record::DirRecords;
use serde_json::{json, Map};
use std::collections::BTreeMap;
use tcpwhy_core::{Cause, Confidence};
use tcpwhy_flow::{Connection, ConnectionSummary};

pub use crate::record::{part_segments, PART_DATA_SEGMENTS};

/// The primary of a direction split into parts must have held at least
/// this share of the busy time for the confidence of its best part to
/// stand. Below two thirds, another cause held a third of the time or more:
/// the fix of the primary is then not the whole answer (the same rule as a
/// runner-up's share in `decide`'s "mixed" verdicts would give, stated per
/// part instead of per interval).
pub const PART_AGREEMENT: f64 = 2.0 / 3.0;

/// The connection as seen by one part of direction `d`: the counts that
/// describe the part alone (new bytes, goodput over the part's span), and,
/// for every part after the first, "started mid capture" (its first segments
/// are not a slow start; the connection is already open).
pub fn part_view(cs: &ConnectionSummary, d: usize, r: &DirRecords) -> (ConnectionSummary, PartSummary) {
    let mut v = cs.clone();
    let new: Vec<_> = r.data.iter().filter(|x| !x.is_retransmission()).collect();
    let bytes: u64 = new.iter().map(|x| x.len as u64).sum();
    let (start_ns, end_ns) = match (r.data.first(), r.data.last()) {
        (Some(a), Some(b)) => (a.t_ns, b.t_ns.max(a.t_ns)),
        _ => (0, 0),
    };
    let span_s = calc::s_from_ns((end_ns - start_ns) as f64);
    let goodput = (span_s > 0.0).then(|| calc::bps(bytes as f64, span_s));
    let ds = &mut v.directions[d];
    ds.counts.unique_bytes = bytes;
    ds.goodput_bps = goodput;
    if r.parts_closed > 0 {
        v.started_mid_capture = true;
    }
    let summary = PartSummary {
        start: calc::s_from_ns(start_ns as f64),
        end: calc::s_from_ns(end_ns as f64),
        data_segments: r.data.len() as u64,
        bytes,
        goodput_bps: goodput,
        primary: Cause::Undetermined,
        confidence: Confidence::Low,
    };
    (v, summary)
}

/// Diagnoses the records held for direction `d` of a live connection as a
/// part and drops them (keeping their memory for the next part).
pub fn close(c: &Connection, d: usize, r: &mut DirRecords, opts: &crate::options::Options) {
    let cs = ConnectionSummary::from_connection(c, false);
    let part = diagnose(&cs, d, r, opts, None);
    r.parts.push(part);
    r.parts_closed += 1;
    r.data.clear();
    r.acks.clear();
}

/// One part's diagnosis from the records held.
pub fn diagnose(
    cs: &ConnectionSummary,
    d: usize,
    r: &DirRecords,
    opts: &crate::options::Options,
    group: Option<&crate::path::GroupContext>,
) -> Part {
    let (view, mut summary) = part_view(cs, d, r);
    let diagnosis = crate::analyze::diagnose_direction(&view, d, r, opts, group);
    if let Some(dd) = &diagnosis {
        summary.primary = dd.primary;
        summary.confidence = dd.confidence;
    }
    Part { summary, diagnosis }
}

/// The direction's diagnosis from its parts (module docs). None when no
/// part could be diagnosed.
pub fn merge(parts: Vec<Part>, cs: &ConnectionSummary, d: usize) -> Option<DirectionDiagnosis> {
    let busy = |p: &DirectionDiagnosis| p.duration_s.max(1e-9);
    let judged: Vec<&DirectionDiagnosis> = parts.iter().filter_map(|p| p.diagnosis.as_ref()).collect();
    let total: f64 = judged.iter().map(|p| busy(p)).sum();
    let mut by_cause: BTreeMap<Cause, f64> = BTreeMap::new();
    for p in &judged {
        *by_cause.entry(p.primary).or_default() += busy(p);
    }
    let (&primary, &held) = by_cause.iter().max_by(|a, b| a.1.total_cmp(b.1))?;
    let best = judged
        .iter()
        .filter(|p| p.primary == primary)
        .max_by(|a, b| busy(a).total_cmp(&busy(b)))?;
    let mut out = (*best).clone();
    out.limits = BTreeMap::new();
    for p in &judged {
        for (k, v) in &p.limits {
            *out.limits.entry(*k).or_default() += v * busy(p) / total;
        }
    }
    out.timeline = judged.iter().flat_map(|p| p.timeline.iter().cloned()).collect();
    out.rtt.base_ms = judged.iter().filter_map(|p| p.rtt.base_ms).min_by(f64::total_cmp);
    out.truncated = judged.iter().any(|p| p.truncated);
    let ds = &cs.directions[d];
    out.bytes = ds.counts.unique_bytes;
    out.goodput_bps = ds.goodput_bps;
    let held_data = parts.iter().filter(|p| p.summary.data_segments > 0);
    let first = held_data.clone().map(|p| p.summary.start).min_by(f64::total_cmp)?;
    let last = held_data.map(|p| p.summary.end).max_by(f64::total_cmp)?;
    out.duration_s = last - first;
    // "Is it the network?" and the what-if for the whole direction, not
    // the best part's span.
    out.time_split = crate::text::time_split_from_limits(&out.limits, out.duration_s, out.bytes, out.traffic_shape);
    out.what_if = out.what_if.iter().map(|w| whole_what_if(w, &judged, out.duration_s, out.bytes, out.goodput_bps)).collect();
    let share = held / total;
    if share < PART_AGREEMENT {
        out.confidence.cap(Confidence::Medium);
        let mut causes: Vec<(Cause, f64)> = by_cause.iter().map(|(c, t)| (*c, t / total)).collect();
        causes.sort_by(|a, b| b.1.total_cmp(&a.1));
        let listed: Vec<String> = causes.iter().map(|(c, s)| format!("{} {:.0}%", c.as_str(), s * 100.0)).collect();
        let mut numbers = Map::new();
        numbers.insert("primary_share".into(), crate::detect::num(share));
        numbers.insert(
            "causes".into(),
            json!(causes.iter().map(|(c, s)| json!({"cause": c.as_str(), "share": crate::detect::num(*s)})).collect::<Vec<_>>()),
        );
        let ranges = parts
            .iter()
            .filter(|p| p.diagnosis.as_ref().is_some_and(|x| x.primary != primary))
            .take(8)
            .map(|p| (p.summary.start, p.summary.end))
            .collect();
        out.findings.insert(
            0,
            Finding {
                kind: "cause_changed",
                text: format!(
                    "The cause changed over the capture: diagnosed in {} parts of up to {} data segments, the busy time was {}.",
                    parts.len(),
                    parts.iter().map(|p| p.summary.data_segments).max().unwrap_or(0),
                    listed.join(", ")
                ),
                numbers,
                evidence: Evidence { frames: vec![], time_ranges: ranges },
            },
        );
        out.to_confirm.push(format!(
            "{} held only {:.0}% of the busy time (below {:.0}%): look at each part (`parts`) and fix the others' causes too.",
            primary.as_str(),
            share * 100.0,
            PART_AGREEMENT * 100.0
        ));
    }
    // The recoveries of all parts, read against the whole direction's verdict.
    let bucket = crate::congestion::Bucket::of(out.primary, out.confidence);
    out.congestion_control = crate::congestion::merge(judged.iter().map(|p| &p.congestion_control), bucket);
    let agree = judged.iter().filter(|p| p.primary == primary).count();
    let (best_start, best_end) = parts
        .iter()
        .find(|p| p.diagnosis.as_ref().is_some_and(|x| std::ptr::eq(x, *best)))
        .map_or((first, last), |p| (p.summary.start, p.summary.end));
    out.parts = parts.into_iter().map(|p| p.summary).collect();
    out.summary = format!(
        "{} Diagnosed in {} parts of up to {} data segments, {} of which found this cause; the loss and window figures and the fix are those of the longest of them ({:.1} s to {:.1} s after the first data).",
        crate::text::paragraph(&out),
        out.parts.len(),
        out.parts.iter().map(|p| p.data_segments).max().unwrap_or(0),
        agree,
        best_start - first,
        best_end - first
    );
    Some(out)
}

/// A part's prediction made the direction's: each part's replay with the
/// same fix wins back its time (a part whose diagnosis proposed no such
/// fix keeps its time as captured), and the direction's duration after
/// the fix is its own less the sum. The rates are the direction's bytes
/// over that, so the gain and the time won back are of one duration, and
/// the prediction never exceeds what the untouched time of every part
/// allows. A prediction without a replay (the rate model alone) stays the
/// part's.
fn whole_what_if(w: &WhatIf, parts: &[&DirectionDiagnosis], duration_s: f64, bytes: u64, current: Option<f64>) -> WhatIf {
    let (Some(current), Some(_)) = (current, w.duration_s) else { return w.clone() };
    // each part's time won back at its own prediction, and at a rate r
    // over its own bytes (the range's ends)
    let saved_at = |p: &DirectionDiagnosis, x: &WhatIf, r: Option<f64>| -> f64 {
        let before = x.duration_s.unwrap_or(0.0) + x.saved_s.unwrap_or(0.0);
        match r {
            None => x.saved_s.unwrap_or(0.0),
            Some(r) if r > 0.0 => before - calc::s_to_send(p.bytes as f64, r),
            Some(_) => 0.0,
        }
    };
    let (mut saved, mut saved_low, mut saved_high, mut replayed) = (0.0, 0.0, 0.0, 0);
    for p in parts {
        if let Some(x) = p.what_if.iter().find(|x| x.fix == w.fix && x.duration_s.is_some()) {
            saved += saved_at(p, x, None);
            saved_low += saved_at(p, x, x.predicted_low_bps.or(x.predicted_bps));
            saved_high += saved_at(p, x, x.predicted_high_bps.or(x.predicted_bps));
            replayed += 1;
        }
    }
    let rate = |saved: f64| {
        let after = duration_s - saved;
        (after > 0.0).then(|| calc::bps(bytes as f64, after))
    };
    let mut out = w.clone();
    out.current_bps = current;
    out.predicted_bps = rate(saved);
    out.duration_s = Some(duration_s - saved);
    out.saved_s = Some(saved);
    if w.predicted_low_bps.is_some() {
        out.predicted_low_bps = rate(saved_low);
    }
    if w.predicted_high_bps.is_some() {
        out.predicted_high_bps = rate(saved_high);
    }
    out.assumptions.push(format!(
        "the direction was diagnosed in {} parts; {} of them proposed this fix, and the time each of their replays wins back ({:.2} s in all) is taken from the direction's {:.2} s; the other parts keep their time",
        parts.len(),
        replayed,
        saved,
        duration_s
    ));
    out
}
