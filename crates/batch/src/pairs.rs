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

use crate::rows::{file_result, read_file_into, FileRead, FileResult, Input};
use serde::Serialize;
use tcpwhy_diagnose::Options;
use tcpwhy_diagnose::model::ConnectionDiagnosis;
use tcpwhy_pair::model::{CarriedCapacity, PairReport, PairedConnection};
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
    let one = |k: usize| -> (FileRead, Option<Spill>) {
        // a spill that cannot be made only means reading the capture again
        let mut spill = Spill::new().ok();
        let r = match spill.as_mut() {
            Some(s) => read_file_into(&job.inputs[k], opts, s),
            None => read_file_into(&job.inputs[k], opts, &mut ()),
        };
        (r, spill)
    };
    let ((mut r0, s0), (mut r1, s1)) = rayon::join(|| one(0), || one(1));
    let key = pair_key(&job.inputs);
    let report = match (r0.diagnosed(), r1.diagnosed()) {
        (Some(d0), Some(d1)) => {
            let paths = [job.inputs[0].path.as_path(), job.inputs[1].path.as_path()];
            let opt = PairOptions::default();
            let compared = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let analyses = [&d0.analysis, &d1.analysis];
                let mut p = match (s0, s1) {
                    (Some(s0), Some(s1)) => tcpwhy_pair::pair_spilled(paths, analyses, [s0, s1], opt),
                    _ => tcpwhy_pair::pair_analyses(paths, analyses, opt),
                }?;
                // each capture's what-if with the capacity the pair measured,
                // as `diagnose --pair` gives it
                carry_to_pair(&mut p, [&mut d0.diagnoses, &mut d1.diagnoses]);
                Ok::<_, tcpwhy_pair::PairError>(p)
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
    let files = [(0, r0), (1, r1)]
        .into_iter()
        .filter(|(k, _)| job.diagnose[*k])
        .map(|(k, r)| file_result(&job.inputs[k], r).0)
        .collect();
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

/// Gives each capture's what-if a path capacity from the pair
/// ([`tcpwhy_diagnose::DirectionDiagnosis::with_capacity_from`]), for each
/// direction of each connection compared segment by segment:
/// - the rate a queue between the points drained at (the pair's own
///   measurement of a bottleneck between them: `drain_between`), in place
///   of any capacity the capture did not show or inferred from its trains
///   (the lab's slow-start responses through a 20 Mbit/s tbf: 17 to 33
///   Mbit/s `seen` from the trains, 19 to 21 from the drain);
/// - else, where this capture did not show the capacity, the one the
///   other capture saw of the same direction when that capture is the
///   sender's (`seen_at_sender`): the sender's own RTT
///   rose as a queue built, the mechanism `seen` rests on. A receiver's
///   echo RTT can step for other reasons (the ACKs' path, a late ACK:
///   docs/diagnose.md), so a capacity only a receiver saw is not carried.
///
/// `conns`: the diagnoses, each with its capture's index.
pub fn carry_capacities(p: &mut PairReport, conns: &mut [(usize, &mut ConnectionDiagnosis)]) {
    let index: std::collections::HashMap<(usize, u64), usize> = conns.iter().enumerate().map(|(i, (f, d))| ((*f, d.id.number), i)).collect();
    let at = |capture: usize, id: u64| index.get(&(capture, id)).copied();
    // what the other capture saw, read before any diagnosis is changed
    let mut carry = Vec::new();
    for (pi, pc) in p.pairs.iter().enumerate() {
        for d in &pc.directions {
            let drained = d.delay.as_ref().and_then(|x| x.drain_rate_bps);
            for capture in 0..2 {
                let other = &pc.connections[1 - capture];
                let seen_at_sender = at(other.capture, other.id).and_then(|i| {
                    let dd = conns[i].1.directions.iter().find(|x| same_end(&x.sender, sender_of(other, d.from)))?;
                    (dd.path_capacity == "seen" && dd.capture_point == "near_sender").then_some(dd.path_rate_bps).flatten()
                });
                if let Some((rate, source)) = drained.map(|r| (r, "drain_between")).or(seen_at_sender.map(|r| (r, "seen_at_sender"))) {
                    carry.push((pi, CarriedCapacity { capture, from: d.from, rate_bps: rate, source }));
                }
            }
        }
    }
    for (pi, c) in carry {
        let pc = &mut p.pairs[pi];
        let this = &pc.connections[c.capture];
        let Some(i) = at(this.capture, this.id) else { continue };
        let mine = sender_of(this, c.from);
        let Some(dd) = conns[i].1.directions.iter_mut().find(|x| same_end(&x.sender, mine)) else { continue };
        if dd.with_capacity_from(c.rate_bps, c.source == "drain_between") {
            pc.capacities.push(c);
        }
    }
}

/// [`carry_capacities`] for the two captures of one pair, each capture's
/// diagnoses in its own list.
pub fn carry_to_pair(p: &mut PairReport, [d0, d1]: [&mut [ConnectionDiagnosis]; 2]) {
    let mut conns: Vec<(usize, &mut ConnectionDiagnosis)> = d0.iter_mut().map(|d| (0, d)).chain(d1.iter_mut().map(|d| (1, d))).collect();
    carry_capacities(p, &mut conns);
}

/// The sending end of `from`'s data ("client" or "server") at one capture.
fn sender_of<'a>(r: &'a tcpwhy_pair::model::ConnRef, from: &str) -> &'a str {
    if from == "client" { &r.client } else { &r.server }
}

/// A diagnosis's endpoint (`[v6]:port` bracketed) against the pair's
/// (`v6:port`).
fn same_end(diagnosis: &str, pair: &str) -> bool {
    match diagnosis.strip_prefix('[') {
        Some(rest) => rest.split_once("]:").is_some_and(|(a, port)| pair.strip_suffix(port).and_then(|x| x.strip_suffix(':')) == Some(a)),
        None => diagnosis == pair,
    }
}

#[cfg(test)]
mod tests {
    use super::same_end;

    #[test]
    fn a_diagnosis_endpoint_is_the_pairs_with_or_without_brackets() {
        assert!(same_end("10.0.0.1:80", "10.0.0.1:80"));
        assert!(!same_end("10.0.0.1:80", "10.0.0.1:8080"));
        assert!(same_end("[2001:db8::1]:443", "2001:db8::1:443"));
        assert!(!same_end("[2001:db8::1]:443", "2001:db8::1:44"));
        assert!(!same_end("[2001:db8::2]:443", "2001:db8::1:443"));
    }
}
