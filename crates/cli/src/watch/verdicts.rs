//! The verdicts as they firm up: each connection that moved data is
//! diagnosed again (the same `diagnose_connection` the exit report uses,
//! on the connection as it stands), and a change of a direction's primary
//! cause or confidence is an event: a JSON line (`--json`), a metric, and
//! for the flight recorder a trigger.

use super::keep::Keep;
use super::metrics::{Metrics, UNDIAGNOSED};
use foldhash::{HashMap, HashSet};
use serde_json::json;
use std::collections::VecDeque;
use std::io::Write;
use std::time::Instant;
use tcpwhy_core::{Cause, Confidence};
use tcpwhy_diagnose::{ConnectionDiagnosis, DirectionDiagnosis, Live};
use tcpwhy_flow::ConnectionSummary;

pub const WATCH_SCHEMA: &str = "tcpwhy.watch/1";

pub struct Context<'a> {
    pub metrics: &'a Metrics,
    /// Capture time of the latest frame (ns since the epoch).
    pub now_ns: i64,
}

/// One data direction as the view shows it.
#[derive(Debug, Clone)]
pub struct DirView {
    pub from: &'static str,
    pub sender: String,
    pub receiver: String,
    pub primary: Cause,
    pub confidence: Confidence,
    /// Capture time the verdict last changed (s since the epoch).
    pub since_s: f64,
    /// Goodput since the previous diagnosis (bit/s).
    pub rate_bps: Option<f64>,
    pub rtt_ms: Option<f64>,
    pub retransmitted: u64,
    pub bytes: u64,
}

pub struct ConnState {
    pub number: u64,
    pub dirs: Vec<DirView>,
    /// The label the connection is counted under in `tcpwhy_connections`.
    label: &'static str,
    /// Unique payload bytes per direction and capture time at the last diagnosis.
    bytes: [u64; 2],
    last_time: f64,
    pub updated: Instant,
}

pub struct Verdicts {
    json: bool,
    pub conns: HashMap<u64, ConnState>,
    queue: VecDeque<u64>,
    queued: HashSet<u64>,
}

impl Verdicts {
    pub fn new(json: bool) -> Verdicts {
        Verdicts {
            json,
            conns: HashMap::default(),
            queue: VecDeque::new(),
            queued: HashSet::default(),
        }
    }

    /// The connections to diagnose now: those that moved data, longest
    /// waiting first, at most `max`.
    pub fn pick(&mut self, dirty: &mut HashSet<u64>, max: usize) -> HashSet<u64> {
        for id in dirty.drain() {
            if self.queued.insert(id) {
                self.queue.push_back(id);
            }
        }
        let mut out = HashSet::default();
        while out.len() < max {
            let Some(id) = self.queue.pop_front() else { break };
            self.queued.remove(&id);
            out.insert(id);
        }
        out
    }

    /// Diagnoses live connections again (`Live::diagnose`: with the
    /// connections of the same hosts that ended and are held).
    pub fn update(&mut self, ctx: &Context<'_>, summaries: &[ConnectionSummary], live: &Live, mut keep: Option<&mut Keep>) {
        for (cs, d) in summaries.iter().zip(live.diagnose(summaries)) {
            self.apply(ctx, cs, &d, keep.as_deref_mut());
        }
    }

    /// A connection the table retired (closed and silent, or evicted),
    /// with its verdict as it ended (`Live::ended`; the exit report has its
    /// final one, `Live::finish`).
    pub fn ended(&mut self, ctx: &Context<'_>, cs: &ConnectionSummary, d: &ConnectionDiagnosis, keep: Option<&mut Keep>) {
        self.apply(ctx, cs, d, keep);
        if let Some(st) = self.conns.remove(&cs.id) {
            ctx.metrics.connections.get_or_create(&Metrics::limit(st.label)).dec();
            if self.json {
                let dirs: Vec<_> = d
                    .directions
                    .iter()
                    .map(|x| json!({"from": x.from, "primary": x.primary, "confidence": x.confidence}))
                    .collect();
                emit(&json!({
                    "schema": WATCH_SCHEMA,
                    "event": "end",
                    "time": ctx.now_ns as f64 / 1e9,
                    "connection": d.id,
                    "first_time": cs.first_time,
                    "evicted": cs.evicted,
                    "directions": dirs,
                }));
            }
        }
        self.queued.remove(&cs.id);
    }

    fn apply(&mut self, ctx: &Context<'_>, cs: &ConnectionSummary, d: &ConnectionDiagnosis, mut keep: Option<&mut Keep>) {
        let m = ctx.metrics;
        let st = self.conns.entry(cs.id).or_insert_with(|| {
            m.connections_seen.inc();
            m.connections.get_or_create(&Metrics::limit(UNDIAGNOSED)).inc();
            ConnState { number: cs.id, dirs: Vec::new(), label: UNDIAGNOSED, bytes: [0; 2], last_time: cs.first_time, updated: Instant::now() }
        });
        let span = cs.last_time - st.last_time;
        let mut dirs = Vec::with_capacity(d.directions.len());
        for x in &d.directions {
            let i = usize::from(x.from == "b");
            let now_bytes = cs.directions[i].counts.unique_bytes;
            let rate = (span > 0.0).then(|| now_bytes.saturating_sub(st.bytes[i]) as f64 * 8.0 / span);
            let before = st.dirs.iter().find(|v| v.from == x.from);
            let changed = before.is_none_or(|b| b.primary != x.primary || b.confidence != x.confidence);
            let since_s = match before {
                Some(b) if b.primary == x.primary => b.since_s,
                _ => ctx.now_ns as f64 / 1e9,
            };
            if changed {
                m.verdict_changes.get_or_create(&Metrics::limit(x.primary.as_str())).inc();
                if x.primary == Cause::Policer && before.is_none_or(|b| b.primary != Cause::Policer) {
                    if let Some(r) = policer_rate_bps(x) {
                        m.policer_rate.observe(r / 8.0);
                    }
                }
                let previous = before.map(|b| json!({"primary": b.primary, "confidence": b.confidence}));
                if self.json {
                    emit(&json!({
                        "schema": WATCH_SCHEMA,
                        "event": "verdict",
                        "time": ctx.now_ns as f64 / 1e9,
                        "connection": d.id,
                        "first_time": cs.first_time,
                        "previous": previous,
                        "direction": x,
                    }));
                }
                if let Some(k) = keep.as_deref_mut() {
                    let side = json!({
                        "schema": "tcpwhy.watch.keep/1",
                        "trigger": x.primary,
                        "time": ctx.now_ns as f64 / 1e9,
                        "connection": d.id,
                        "first_time": cs.first_time,
                        "direction": x,
                    });
                    k.verdict(cs.id, x.primary, side);
                }
            }
            dirs.push(DirView {
                from: x.from,
                sender: x.sender.clone(),
                receiver: x.receiver.clone(),
                primary: x.primary,
                confidence: x.confidence,
                since_s,
                rate_bps: rate,
                rtt_ms: x.rtt.median_ms.or(x.rtt.base_ms),
                retransmitted: cs.directions[i].counts.retransmitted_packets,
                bytes: x.bytes,
            });
        }
        // Bytes carried since the last diagnosis, under the verdict now.
        let label = d.directions.iter().max_by_key(|x| x.bytes).map_or(UNDIAGNOSED, |x| x.primary.as_str());
        let moved: u64 = (0..2).map(|i| cs.directions[i].counts.unique_bytes.saturating_sub(st.bytes[i])).sum();
        m.limited_bytes.get_or_create(&Metrics::limit(label)).inc_by(moved);
        if label != st.label {
            m.connections.get_or_create(&Metrics::limit(st.label)).dec();
            m.connections.get_or_create(&Metrics::limit(label)).inc();
            st.label = label;
        }
        st.bytes = [cs.directions[0].counts.unique_bytes, cs.directions[1].counts.unique_bytes];
        st.last_time = cs.last_time;
        st.updated = Instant::now();
        if !dirs.is_empty() {
            st.dirs = dirs;
        }
    }
}

/// The token rate of a direction's policer finding (bit/s).
fn policer_rate_bps(x: &DirectionDiagnosis) -> Option<f64> {
    x.findings.iter().filter(|f| f.kind == "policer").find_map(|f| f.numbers.get("rate_bps").and_then(|v| v.as_f64()))
}

/// One JSON line on stdout, flushed (a reader follows it as it comes).
fn emit(v: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer(&mut out, v);
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}
