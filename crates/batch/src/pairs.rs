//! Two capture points of one path, many at once: each listed pair of
//! captures is compared as `tcpwhy diagnose --pair A B` compares them
//! (tcpwhy-pair; docs/pair.md), and the comparison becomes rows of the
//! `pairs` table, one per paired connection. Each capture of a pair is
//! also diagnosed alone into the usual tables, once however many pairs
//! list it.
//!
//! The comparison's records are spilled during each capture's one read
//! (`tcpwhy_pair::stream::Spill`), so a pair costs the two diagnoses and
//! the merge, not a second read of each capture.

use crate::rows::{diagnose_file_into, FileResult, Input};
use serde::Serialize;
use tcpwhy_diagnose::Options;
use tcpwhy_flow::CaptureAnalysis;
use tcpwhy_pair::model::{PairReport, PairedConnection};
use tcpwhy_pair::stream::Spill;
use tcpwhy_pair::PairOptions;

/// What identifies a compared pair for a resumed batch: both captures'
/// path, size and modification time.
pub type PairKey = [(String, u64, i64); 2];

/// The key of two inputs.
pub fn pair_key(inputs: &[Input; 2]) -> PairKey {
    [0, 1].map(|k| (inputs[k].path.display().to_string(), inputs[k].size, inputs[k].mtime_ns))
}

/// One listed pair to compare. `diagnose[k]`: capture k's own rows are
/// written by this pair (the first pair listing it, when no earlier run
/// wrote them).
#[derive(Debug, Clone)]
pub struct PairJob {
    pub inputs: [Input; 2],
    pub diagnose: [bool; 2],
}

/// What one pair gives: the rows of the captures it diagnoses, and its
/// `pairs` rows (at least one: a pair nothing matched in, or that could
/// not be compared, has a row saying why).
#[derive(Debug, Clone)]
pub struct PairResult {
    pub key: PairKey,
    pub files: Vec<FileResult>,
    pub pairs: Vec<PairRow>,
}

/// One row of the `pairs` table: a connection seen at both capture points
/// (names as in `diagnose --pair --json`'s `pair` object, flattened).
#[derive(Debug, Clone, Serialize)]
pub struct PairRow {
    pub file_0: String,
    pub size_0: u64,
    pub mtime_ns_0: i64,
    pub file_1: String,
    pub size_1: u64,
    pub mtime_ns_1: i64,
    /// The connection's id in each capture (as in `directions.connection`);
    /// null on the row of a pair in which nothing was matched.
    pub connection_0: Option<u64>,
    pub connection_1: Option<u64>,
    pub client_0: Option<String>,
    pub server_0: Option<String>,
    pub client_1: Option<String>,
    pub server_1: Option<String>,
    /// same_tuple, translated, syn_answered_in_middle or proxied.
    pub match_kind: Option<String>,
    pub evidence: Vec<String>,
    /// The capture nearer the client (0 or 1), and how that was told.
    pub client_capture: Option<u8>,
    pub client_capture_by: Option<String>,
    /// Capture 1's clock minus capture 0's, bounded by causality (ms).
    pub offset_low_ms: Option<f64>,
    pub offset_high_ms: Option<f64>,
    /// The first finding: what the pair says most, and where.
    pub primary: Option<String>,
    pub primary_location: Option<String>,
    pub findings: Vec<PairFindingRow>,
    pub changes: Vec<ChangeRow>,
    pub directions: Vec<PairDirectionRow>,
    pub proxy: Vec<ProxyRow>,
    /// The whole pair of captures (the same on each of its rows):
    /// connections each holds, those matched with none of the other, the
    /// clocks' consistency, and what kept the comparison from being complete.
    pub connections_0: u64,
    pub connections_1: u64,
    pub unmatched_0: u64,
    pub unmatched_1: u64,
    pub clock_consistent: bool,
    pub messages: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PairFindingRow {
    pub kind: String,
    pub location: String,
    pub text: String,
    pub fix: Option<String>,
    pub value: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ChangeRow {
    pub kind: String,
    pub detail: String,
    /// Packets that show it.
    pub frames: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct PairDirectionRow {
    /// "client" (the client's data) or "server".
    pub from: String,
    pub upstream_capture: u8,
    pub packets_0: u64,
    pub packets_1: u64,
    pub paired: u64,
    pub segments: u64,
    pub lost_before_upstream: u64,
    pub lost_between: u64,
    pub lost_after_downstream: u64,
    pub not_captured_upstream: u64,
    pub not_captured_downstream: u64,
    pub needless_retransmissions: u64,
    pub unresolved: u64,
    pub base_delay_low_ms: Option<f64>,
    pub base_delay_high_ms: Option<f64>,
    pub growth_p50_ms: Option<f64>,
    pub growth_p95_ms: Option<f64>,
    pub growth_max_ms: Option<f64>,
    pub drain_rate_bps: Option<f64>,
    pub rtt_min_ms_0: Option<f64>,
    pub rtt_min_ms_1: Option<f64>,
    pub window_rewritten: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProxyRow {
    pub from: String,
    pub bytes_0: i64,
    pub bytes_1: i64,
    pub upstream_ms: f64,
    pub downstream_ms: f64,
    pub release_per_round_bytes: Option<i64>,
    pub round_trip_ms: Option<f64>,
    pub client_window_max: Option<u64>,
}

/// Diagnoses both captures (on two threads of the caller's pool) with the
/// comparison's records spilled during the same reads, and compares them.
pub fn diagnose_pair(job: &PairJob, opts: &Options) -> PairResult {
    let one = |k: usize| -> (FileResult, Option<CaptureAnalysis>, Option<Spill>) {
        // a spill that cannot be made only means reading the capture again
        let mut spill = Spill::new().ok();
        let (r, a) = match spill.as_mut() {
            Some(s) => diagnose_file_into(&job.inputs[k], opts, s),
            None => diagnose_file_into(&job.inputs[k], opts, &mut ()),
        };
        (r, a, spill)
    };
    let ((r0, a0, s0), (r1, a1, s1)) = rayon::join(|| one(0), || one(1));
    let key = pair_key(&job.inputs);
    let report = match (&a0, &a1) {
        (Some(a0), Some(a1)) => {
            let paths = [job.inputs[0].path.as_path(), job.inputs[1].path.as_path()];
            let opt = PairOptions::default();
            let compared = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match (s0, s1) {
                (Some(s0), Some(s1)) => tcpwhy_pair::pair_spilled(paths, [a0, a1], [s0, s1], opt),
                _ => tcpwhy_pair::pair_analyses(paths, [a0, a1], opt),
            }));
            match compared {
                Ok(Ok(p)) => Ok(p),
                Ok(Err(e)) => Err(format!("not compared: {e}")),
                Err(_) => Err("not compared: internal error while comparing (please report it with the captures)".into()),
            }
        }
        _ => Err("not compared: a capture could not be read (its row in errors/ says why)".into()),
    };
    let pairs = match report {
        Ok(p) => pair_rows(&key, &p),
        Err(why) => vec![empty_row(&key, [0, 0], vec![why])],
    };
    let files = [r0, r1].into_iter().zip(job.diagnose).filter(|(_, d)| *d).map(|(r, _)| r).collect();
    PairResult { key, files, pairs }
}

/// A row with the pair's own columns only.
fn empty_row(key: &PairKey, connections: [u64; 2], messages: Vec<String>) -> PairRow {
    let [(file_0, size_0, mtime_ns_0), (file_1, size_1, mtime_ns_1)] = key.clone();
    PairRow {
        file_0,
        size_0,
        mtime_ns_0,
        file_1,
        size_1,
        mtime_ns_1,
        connection_0: None,
        connection_1: None,
        client_0: None,
        server_0: None,
        client_1: None,
        server_1: None,
        match_kind: None,
        evidence: Vec::new(),
        client_capture: None,
        client_capture_by: None,
        offset_low_ms: None,
        offset_high_ms: None,
        primary: None,
        primary_location: None,
        findings: Vec::new(),
        changes: Vec::new(),
        directions: Vec::new(),
        proxy: Vec::new(),
        connections_0: connections[0],
        connections_1: connections[1],
        unmatched_0: connections[0],
        unmatched_1: connections[1],
        clock_consistent: true,
        messages,
    }
}

/// The `pairs` rows of one comparison: a row per paired connection, or one
/// row saying why there is none.
pub fn pair_rows(key: &PairKey, p: &PairReport) -> Vec<PairRow> {
    let mut base = empty_row(key, p.connections.map(|n| n as u64), p.messages.clone());
    base.unmatched_0 = p.unmatched[0] as u64;
    base.unmatched_1 = p.unmatched[1] as u64;
    base.clock_consistent = p.clock.consistent;
    [base.offset_low_ms, base.offset_high_ms] = p.clock.offset_ms.map_or([None, None], |[lo, hi]| [Some(lo), Some(hi)]);
    if p.pairs.is_empty() {
        return vec![base];
    }
    p.pairs.iter().map(|pc| connection_row(base.clone(), pc)).collect()
}

fn connection_row(mut r: PairRow, pc: &PairedConnection) -> PairRow {
    let [c0, c1] = &pc.connections;
    r.connection_0 = Some(c0.id);
    r.connection_1 = Some(c1.id);
    (r.client_0, r.server_0) = (Some(c0.client.clone()), Some(c0.server.clone()));
    (r.client_1, r.server_1) = (Some(c1.client.clone()), Some(c1.server.clone()));
    r.match_kind = Some(pc.kind.name().to_string());
    r.evidence = pc.evidence.clone();
    r.client_capture = Some(pc.client_capture as u8);
    r.client_capture_by = Some(pc.client_capture_by.clone());
    if let Some([lo, hi]) = pc.offset_ms {
        (r.offset_low_ms, r.offset_high_ms) = (Some(lo), Some(hi));
    }
    r.primary = pc.findings.first().map(|f| f.kind.to_string());
    r.primary_location = pc.findings.first().map(|f| f.location.clone());
    r.findings = pc
        .findings
        .iter()
        .map(|f| PairFindingRow { kind: f.kind.into(), location: f.location.clone(), text: f.text.clone(), fix: f.fix.clone(), value: f.value })
        .collect();
    r.changes = pc.changes.iter().map(|c| ChangeRow { kind: c.kind.into(), detail: c.detail.clone(), frames: c.frames.len() as u64 }).collect();
    r.directions = pc
        .directions
        .iter()
        .map(|d| {
            let l = &d.loss;
            let base = d.delay.as_ref().and_then(|x| x.base_ms);
            PairDirectionRow {
                from: d.from.into(),
                upstream_capture: d.upstream_capture as u8,
                packets_0: d.packets[0],
                packets_1: d.packets[1],
                paired: d.paired,
                segments: l.segments,
                lost_before_upstream: l.before_upstream,
                lost_between: l.between,
                lost_after_downstream: l.after_downstream,
                not_captured_upstream: l.not_captured_upstream,
                not_captured_downstream: l.not_captured_downstream,
                needless_retransmissions: l.needless_retransmissions,
                unresolved: l.unresolved,
                base_delay_low_ms: base.map(|b| b[0]),
                base_delay_high_ms: base.map(|b| b[1]),
                growth_p50_ms: d.delay.as_ref().map(|x| x.growth_p50_ms),
                growth_p95_ms: d.delay.as_ref().map(|x| x.growth_p95_ms),
                growth_max_ms: d.delay.as_ref().map(|x| x.growth_max_ms),
                drain_rate_bps: d.delay.as_ref().and_then(|x| x.drain_rate_bps),
                rtt_min_ms_0: d.rtt_ms[0].map(|s| s.min),
                rtt_min_ms_1: d.rtt_ms[1].map(|s| s.min),
                window_rewritten: d.window_rewritten,
            }
        })
        .collect();
    r.proxy = pc
        .proxy
        .iter()
        .map(|x| ProxyRow {
            from: x.from.into(),
            bytes_0: x.bytes[0],
            bytes_1: x.bytes[1],
            upstream_ms: x.upstream_ms,
            downstream_ms: x.downstream_ms,
            release_per_round_bytes: x.release_per_round_bytes,
            round_trip_ms: x.round_trip_ms,
            client_window_max: x.client_window_max,
        })
        .collect();
    r
}
