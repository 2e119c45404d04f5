//! Flows compared with each other: the data directions from one host to
//! another that overlap in time, captured at one point, form a group. A
//! policer often enforces one rate for all of a customer's flows (Flach et
//! al. 2016; seed case 3: two downloads held together at an instance's
//! baseline), and then each flow sees a varying share of the rate: its own
//! losses fail the token-bucket test while the group's pass it. So when a
//! flow's own test fails, the group's verdict (`policer::detect_group`)
//! stands in for it, and the diagnosis names the flows it shares the
//! policer with.

use tcpwhy_core::units::calc;
use crate::options::{Options, MIN_BYTES, MIN_DATA_SEGMENTS};
pub use crate::path::{GroupContext, GroupVerdicts};
use crate::path::Path;
use crate::policer::detect_group;
use crate::record::{AckRec, DataRec, Records};
use std::collections::HashMap;
use std::sync::Arc;
use tcpwhy_core::units::{Duration, Rate};
use tcpwhy_flow::ConnectionSummary;

/// Flows a group needs: two or more.
pub const GROUP_MIN_FLOWS: usize = 2;

struct Member {
    ci: usize,
    d: usize,
    start: i64,
    end: i64,
    lossy: bool,
}

/// Finds the groups of two or more overlapping flows between the same two
/// hosts: each gets the group's base RTT where its own holds a queue, and
/// the lossy flows of a group are tested together for one policer.
pub fn policed_groups(
    connections: &[ConnectionSummary],
    recorder: &Records,
    opts: &Options,
) -> GroupVerdicts {
    let mut by_hosts: HashMap<(&str, &str), Vec<Member>> = HashMap::new();
    for (ci, cs) in connections.iter().enumerate() {
        let Some(rec) = recorder.get(cs.id) else {
            continue;
        };
        for d in 0..2 {
            let r = &rec.dirs[d];
            if cs.directions[d].counts.unique_bytes < MIN_BYTES || r.data.len() < MIN_DATA_SEGMENTS
            {
                continue;
            }
            let lossy = r.data.iter().any(|x| x.is_retransmission());
            let key = if d == 0 {
                (cs.a.addr.as_str(), cs.b.addr.as_str())
            } else {
                (cs.b.addr.as_str(), cs.a.addr.as_str())
            };
            let (start, end) = (r.data[0].t_ns, r.data[r.data.len() - 1].t_ns);
            by_hosts.entry(key).or_default().push(Member {
                ci,
                d,
                start,
                end,
                lossy,
            });
        }
    }
    let mut out = GroupVerdicts::new();
    for (_, mut members) in by_hosts {
        if members.len() < GROUP_MIN_FLOWS {
            continue;
        }
        // Clusters of flows that overlap in time (a sweep over start times).
        members.sort_by_key(|m| (m.start, m.ci, m.d));
        let mut cluster: Vec<&Member> = Vec::new();
        let mut cluster_end = i64::MIN;
        let sentinel = Member {
            ci: usize::MAX,
            d: 0,
            start: i64::MAX,
            end: i64::MAX,
            lossy: false,
        };
        for m in members.iter().chain(std::iter::once(&sentinel)) {
            if m.start > cluster_end && !cluster.is_empty() {
                let lossy: Vec<&Member> = cluster.iter().copied().filter(|m| m.lossy).collect();
                let mut paths = measure(&cluster, lossy.len(), connections, recorder, opts);
                group_base(&cluster, connections, &paths, opts, &mut out);
                others_rate(&cluster, connections, recorder, &mut out);
                test_cluster(&lossy, connections, recorder, &mut paths, opts, &mut out);
                cluster.clear();
            }
            if m.ci == usize::MAX {
                break;
            }
            cluster_end = if cluster.is_empty() {
                m.end
            } else {
                cluster_end.max(m.end)
            };
            cluster.push(m);
        }
    }
    out
}

/// Each member's own path facts (`Path::measure`), once, for the members
/// the group's base and the group's policer test read: every member of a
/// cluster of two or more (none under `--rtt`, which sets the base), the
/// lossy ones when two or more are.
fn measure(
    cluster: &[&Member],
    lossy: usize,
    connections: &[ConnectionSummary],
    recorder: &Records,
    opts: &Options,
) -> HashMap<(u64, usize), Path> {
    let mut out = HashMap::new();
    if cluster.len() < GROUP_MIN_FLOWS {
        return out;
    }
    for m in cluster.iter().filter(|m| opts.rtt_ms.is_none() || (m.lossy && lossy >= GROUP_MIN_FLOWS)) {
        let cs = &connections[m.ci];
        let Some(rec) = recorder.get(cs.id) else {
            continue;
        };
        if let Some(path) = Path::measure(cs, m.d, &rec.dirs[m.d], opts) {
            out.insert((cs.id, m.d), path);
        }
    }
    out
}

/// Flows between the same two hosts at the same time cross the same path,
/// so its base RTT is the smallest any of them measured. A flow that
/// started while the others kept a queue full never saw the path empty:
/// its own base RTT (its handshake, its smallest samples) already holds the
/// queue, which then looks like no queueing at all. Such a flow, whose base
/// exceeds the group's as the loss detector defines a queue
/// (`QUEUE_BEFORE_LOSS_FACTOR` and `QUEUE_BEFORE_LOSS_MIN_MS`), takes the
/// group's base. Only flows seen from the same capture point are compared.
fn group_base(
    cluster: &[&Member],
    connections: &[ConnectionSummary],
    paths: &HashMap<(u64, usize), Path>,
    opts: &Options,
    out: &mut GroupVerdicts,
) {
    if cluster.len() < GROUP_MIN_FLOWS || opts.rtt_ms.is_some() {
        return;
    }
    let mut bases: Vec<((u64, usize), bool, Duration)> = Vec::new();
    for m in cluster {
        let cs = &connections[m.ci];
        let Some(path) = paths.get(&(cs.id, m.d)) else {
            continue;
        };
        if let Some(b) = path.rtt.base.filter(|b| *b > Duration::ZERO) {
            bases.push(((cs.id, m.d), path.sender_side, b));
        }
    }
    for side in [true, false] {
        let same: Vec<&((u64, usize), bool, Duration)> = bases.iter().filter(|b| b.1 == side).collect();
        let Some(min) = same.iter().map(|b| b.2).min().filter(|_| same.len() >= GROUP_MIN_FLOWS) else {
            continue;
        };
        for (id, _, b) in same {
            if crate::path::queued_at(b.as_millis_f64(), min.as_millis_f64()) {
                out.entry(*id).or_default().base_rtt = Some(min);
            }
        }
    }
}

/// For each flow of a group, the rate of the new data the other flows
/// sent while it moved data (between its first and last data segment). The
/// flows cross the same path, so the link is as full as all of them make
/// it. One sorted pass with prefix sums over every flow's new data.
fn others_rate(
    cluster: &[&Member],
    connections: &[ConnectionSummary],
    recorder: &Records,
    out: &mut GroupVerdicts,
) {
    if cluster.len() < GROUP_MIN_FLOWS {
        return;
    }
    let mut events: Vec<(i64, u64)> = Vec::new();
    let mut own: Vec<u64> = Vec::with_capacity(cluster.len());
    for m in cluster {
        let Some(rec) = recorder.get(connections[m.ci].id) else {
            own.push(0);
            continue;
        };
        let before = events.len();
        events.extend(
            rec.dirs[m.d]
                .data
                .iter()
                .filter(|x| !x.is_retransmission() && x.len > 0)
                .map(|x| (x.t_ns, x.len as u64)),
        );
        own.push(events[before..].iter().map(|e| e.1).sum());
    }
    events.sort_unstable_by_key(|e| e.0);
    let mut prefix = Vec::with_capacity(events.len() + 1);
    prefix.push(0u64);
    for e in &events {
        prefix.push(prefix[prefix.len() - 1] + e.1);
    }
    // Bytes of events with start <= t <= end (none when the end is
    // before the start: a capture clock that stepped back).
    let between = |a: i64, b: i64| {
        let lo = events.partition_point(|e| e.0 < a);
        let hi = events.partition_point(|e| e.0 <= b).max(lo);
        prefix[hi] - prefix[lo]
    };
    for (m, own) in cluster.iter().zip(own) {
        let span = m.end - m.start;
        let others = between(m.start, m.end).saturating_sub(own);
        if span > 0 && others > 0 {
            out.entry((connections[m.ci].id, m.d))
                .or_default()
                .others_rate = Some(Rate::from_bps_f64(calc::bps(others as f64, calc::s_from_ns(span as f64))));
        }
    }
}

fn test_cluster(
    cluster: &[&Member],
    connections: &[ConnectionSummary],
    recorder: &Records,
    paths: &mut HashMap<(u64, usize), Path>,
    opts: &Options,
    out: &mut GroupVerdicts,
) {
    if cluster.len() < GROUP_MIN_FLOWS {
        return;
    }
    // Each flow as its sender sent it: at the receiver, lost packets were
    // never captured, so stand-ins mark them (as for one flow, see
    // detect::policing::as_sent) and the ACKs' delays are the receiver's own.
    let mut owned: Vec<(Vec<DataRec>, Vec<AckRec>, u32)> = Vec::new();
    let mut ids = Vec::new();
    let mut min_rtt: Option<i64> = None;
    let mut sides = (0usize, 0usize);
    let mut path_rate: Option<Rate> = None;
    for m in cluster {
        let cs = &connections[m.ci];
        let Some(rec) = recorder.get(cs.id) else {
            continue;
        };
        let r = &rec.dirs[m.d];
        let Some(path) = paths.remove(&(cs.id, m.d)) else {
            continue;
        };
        let path = path.in_group(r, opts, out.get(&(cs.id, m.d)));
        if let Some(b) = path.base_ns() {
            min_rtt = Some(min_rtt.map_or(b, |x| x.min(b)));
        }
        path_rate = path_rate.max(path.path_rate);
        if path.sender_side {
            sides.0 += 1;
            owned.push((r.data.clone(), r.acks.clone(), path.smss));
        } else {
            sides.1 += 1;
            let acks = r.acks.iter().map(|a| AckRec { rtt_us: 0, ..*a }).collect();
            owned.push((crate::detect::policing::as_sent(&r.data, path.smss), acks, path.smss));
        }
        ids.push((cs.id, m.d));
    }
    // One capture point for the whole group (mixed points would shift one
    // flow's losses by a one-way delay against the others').
    if owned.len() < GROUP_MIN_FLOWS || (sides.0 > 0 && sides.1 > 0) {
        return;
    }
    let receiver_side = sides.1 > 0;
    let flows: Vec<(&[DataRec], &[AckRec], u32)> = owned
        .iter()
        .map(|(d, a, smss)| (d.as_slice(), a.as_slice(), *smss))
        .collect();
    let mut v = detect_group(&flows, min_rtt);
    if std::env::var_os("TCPWHY_DEBUG_INTERVALS").is_some() {
        eprintln!(
            "group {ids:?}: policed={} code={} rate={:?} chunks={} lossy={} policed_chunks={}",
            v.policed, v.code, v.rate_bps, v.chunks, v.lossy_chunks, v.policed_chunks
        );
    }
    if !v.policed {
        return;
    }
    if receiver_side {
        // Arrival bursts at the receiver mislead the bucket's rate: the
        // group's goodput between its first and last loss (as for one flow).
        if let Some((a, b)) = v.loss_span_s {
            let rate: f64 = cluster
                .iter()
                .filter_map(|m| {
                    recorder
                        .get(connections[m.ci].id)
                        .map(|rec| &rec.dirs[m.d].data)
                })
                .filter_map(|data| crate::detect::policing::goodput_between(data, a, b))
                .sum();
            if rate > 0.0 {
                v.rate_bps = Some(rate);
            }
        }
    }
    v.group = ids.clone();
    v.group_path_bps = path_rate.map(Rate::bps);
    let v = Arc::new(v);
    for id in ids {
        out.entry(id).or_default().policer = Some(v.clone());
    }
}

/// A flow (one connection's data direction) in a group.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GroupFlow {
    pub connection: u64,
    /// "a" or "b": the data sender, as in the connection's directions.
    pub from: &'static str,
    pub bytes: u64,
    pub goodput_bps: Option<f64>,
    pub primary: tcpwhy_core::Cause,
    pub first_time: f64,
    pub last_time: f64,
}

/// What the flows of a group say together.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GroupFinding {
    /// "shared_policer", "shared_bottleneck" or "per_flow_limit".
    pub kind: &'static str,
    pub text: String,
}

/// The diagnosed flows from one host to another that overlap in time.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FlowGroup {
    pub sender: String,
    pub receiver: String,
    pub flows: Vec<GroupFlow>,
    pub first_time: f64,
    pub last_time: f64,
    /// All the flows' bytes over the time any of them moved data.
    pub aggregate_goodput_bps: Option<f64>,
    /// The policer the flows share (from the group test), if any.
    pub policer_rate_bps: Option<f64>,
    pub policer_burst_bytes: Option<u64>,
    pub findings: Vec<GroupFinding>,
}

/// A flow this many times faster than another over the same hosts at the
/// same time shows the slower one is not held by what they share: TCP
/// flows sharing a bottleneck converge to equal shares (Chiu and Jain 1989;
/// RTT unfairness stays within a factor of two for RTTs within a factor of
/// about 1.4, Floyd and Jacobson 1991), so a factor of 2 is more than
/// sharing explains.
pub const PER_FLOW_FAST_RATIO: f64 = 2.0;

/// Primaries that belong to one flow (its window, its buffer, its
/// application), not to the path the flows share.
fn per_flow(c: tcpwhy_core::Cause) -> bool {
    use tcpwhy_core::Cause::*;
    matches!(
        c,
        ReceiverWindow | SendBuffer | WindowScalingOff | SenderApplication | ReceiverApplication
    )
}

/// Groups the diagnosed directions by (sender host, receiver host) and time
/// overlap, and says what the flows show together.
pub fn describe(
    diags: &[crate::model::ConnectionDiagnosis],
    conns: &[ConnectionSummary],
    recorder: &Records,
) -> Vec<FlowGroup> {
    let mut by_hosts: HashMap<(&str, &str), Vec<GroupFlow>> = HashMap::new();
    let mut rate_of: HashMap<(u64, &'static str), (Option<f64>, Option<u64>, usize)> =
        HashMap::new();
    for (i, c) in conns.iter().enumerate() {
        let Some(dg) = diags.get(i) else { continue };
        for dd in &dg.directions {
            let d = usize::from(dd.from == "b");
            let ds = &c.directions[d];
            let (Some(first), Some(last)) = (ds.first_data_time, ds.last_data_time) else {
                continue;
            };
            let key = if d == 0 {
                (c.a.addr.as_str(), c.b.addr.as_str())
            } else {
                (c.b.addr.as_str(), c.a.addr.as_str())
            };
            by_hosts.entry(key).or_default().push(GroupFlow {
                connection: c.id,
                from: dd.from,
                bytes: dd.bytes,
                goodput_bps: dd.goodput_bps,
                primary: dd.primary,
                first_time: first,
                last_time: last,
            });
            // Only flows the policer holds (its finding can also stand as
            // evidence under another primary).
            if let Some(f) = dd
                .findings
                .iter()
                .find(|f| f.kind == "policer")
                .filter(|_| dd.primary == tcpwhy_core::Cause::Policer)
            {
                let n = f
                    .numbers
                    .get("shared_by_flows")
                    .and_then(|v| v.as_u64())
                    .unwrap_or(1) as usize;
                rate_of.insert(
                    (c.id, dd.from),
                    (
                        f.numbers.get("rate_bps").and_then(|v| v.as_f64()),
                        f.numbers.get("burst_bytes").and_then(|v| v.as_u64()),
                        n,
                    ),
                );
            }
        }
    }
    let mut out = Vec::new();
    let mut keys: Vec<_> = by_hosts.keys().copied().collect();
    keys.sort();
    for key in keys {
        let mut flows = by_hosts.remove(&key).unwrap_or_default();
        flows.sort_by(|x, y| x.first_time.total_cmp(&y.first_time));
        let mut cluster: Vec<GroupFlow> = Vec::new();
        let mut end = f64::NEG_INFINITY;
        for f in flows.into_iter().map(Some).chain(std::iter::once(None)) {
            let starts_new = f.as_ref().is_none_or(|f| f.first_time > end);
            if starts_new && cluster.len() >= GROUP_MIN_FLOWS {
                let mut g = group(key, std::mem::take(&mut cluster), &rate_of);
                shared_queue(&mut g, conns, diags, recorder);
                out.push(g);
            }
            let Some(f) = f else { break };
            if starts_new {
                cluster.clear();
                end = f.last_time;
            }
            end = end.max(f.last_time);
            cluster.push(f);
        }
    }
    out.sort_by(|x, y| x.first_time.total_cmp(&y.first_time));
    out
}

fn group(
    key: (&str, &str),
    flows: Vec<GroupFlow>,
    rate_of: &HashMap<(u64, &'static str), (Option<f64>, Option<u64>, usize)>,
) -> FlowGroup {
    use tcpwhy_core::units::{fmt_bytes, fmt_rate};
    let first_time = flows
        .iter()
        .map(|f| f.first_time)
        .fold(f64::INFINITY, f64::min);
    let last_time = flows
        .iter()
        .map(|f| f.last_time)
        .fold(f64::NEG_INFINITY, f64::max);
    // Time any flow moved data: the union of the flows' spans.
    let mut spans: Vec<(f64, f64)> = flows.iter().map(|f| (f.first_time, f.last_time)).collect();
    spans.sort_by(|x, y| x.0.total_cmp(&y.0));
    let (mut busy, mut cur) = (0.0, None::<(f64, f64)>);
    for s in spans {
        cur = match cur {
            Some((a, b)) if s.0 <= b => Some((a, b.max(s.1))),
            Some((a, b)) => {
                busy += b - a;
                Some(s)
            }
            None => Some(s),
        };
    }
    if let Some((a, b)) = cur {
        busy += b - a;
    }
    let bytes: u64 = flows.iter().map(|f| f.bytes).sum();
    let aggregate = (busy > 0.0).then(|| calc::bps(bytes as f64, busy));
    let mut findings = Vec::new();
    let shared: Vec<&GroupFlow> = flows
        .iter()
        .filter(|f| {
            rate_of
                .get(&(f.connection, f.from))
                .is_some_and(|r| r.2 >= GROUP_MIN_FLOWS)
        })
        .collect();
    let (mut policer_rate, mut policer_burst) = (None, None);
    if shared.len() >= GROUP_MIN_FLOWS {
        let r = rate_of[&(shared[0].connection, shared[0].from)];
        (policer_rate, policer_burst) = (r.0, r.1);
        findings.push(GroupFinding {
            kind: "shared_policer",
            text: format!(
                "these {} flows (connections {}) share a policer at {} with a burst of {}: more parallel flows will not get past it",
                shared.len(),
                shared.iter().map(|f| f.connection.to_string()).collect::<Vec<_>>().join(", "),
                r.0.map_or("?".into(), fmt_rate),
                fmt_bytes(r.1.unwrap_or(0) as f64)
            ),
        });
    }
    // A slow flow held by its own limit next to a fast one at the same time.
    for slow in flows.iter().filter(|f| per_flow(f.primary)) {
        let Some(gs) = slow.goodput_bps else { continue };
        let fast = flows.iter().filter(|f| {
            f.connection != slow.connection
                && f.first_time < slow.last_time
                && slow.first_time < f.last_time
                && f.goodput_bps.is_some_and(|g| g >= PER_FLOW_FAST_RATIO * gs)
        });
        if let Some(fast) = fast.max_by(|x, y| {
            x.goodput_bps
                .unwrap_or(0.0)
                .total_cmp(&y.goodput_bps.unwrap_or(0.0))
        }) {
            findings.push(GroupFinding {
                kind: "per_flow_limit",
                text: format!(
                    "connection {} is slow ({}, {}) while connection {} to the same host moves {} at the same time: the limit is per flow (its window, its buffer, its application, or per-flow policing), not the hosts' link",
                    slow.connection,
                    fmt_rate(gs),
                    slow.primary,
                    fast.connection,
                    fmt_rate(fast.goodput_bps.unwrap_or(0.0))
                ),
            });
        }
    }
    FlowGroup {
        sender: key.0.to_string(),
        receiver: key.1.to_string(),
        flows,
        first_time,
        last_time,
        aggregate_goodput_bps: aggregate,
        policer_rate_bps: policer_rate,
        policer_burst_bytes: policer_burst,
        findings,
    }
}

/// Fewest RTT-sample pairs for the shared-queue test.
pub const SHARED_QUEUE_MIN_PAIRS: usize = 50;

/// Pearson's r needs three pairs: through two, a line always fits (r = ±1).
const CORRELATION_MIN_PAIRS: usize = 3;

/// Pearson correlation of paired values.
fn correlation(pairs: &[(f64, f64)]) -> Option<f64> {
    let n = pairs.len() as f64;
    if pairs.len() < CORRELATION_MIN_PAIRS {
        return None;
    }
    let (mx, my) = pairs
        .iter()
        .fold((0.0, 0.0), |a, p| (a.0 + p.0 / n, a.1 + p.1 / n));
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (x, y) in pairs {
        sxy += (x - mx) * (y - my);
        sxx += (x - mx) * (x - mx);
        syy += (y - my) * (y - my);
    }
    (sxx > 0.0 && syy > 0.0).then(|| sxy / (sxx * syy).sqrt())
}

/// The delay-based shared-congestion test of Rubenstein, Kurose and Towsley
/// (ACM SIGMETRICS 2000): flows behind one queue see their delays rise and
/// fall together. In the merged order of both flows' samples, wherever a
/// sample X_i of one flow is followed by a sample Y_j of the other before
/// its own next sample X_{i+1}, the cross measure correlates (X_i, Y_j) and
/// the auto measure (X_i, X_{i+1}); Y_j is nearer in time, so behind one
/// queue the cross measure exceeds the auto one, while behind separate
/// queues a flow is more like itself than like the other. Both directions
/// (a before b, b before a) are counted. Samples are (time ns, RTT µs), in
/// time order. Returns (cross, auto) when both could be measured.
pub fn cross_and_auto(a: &[(i64, f64)], b: &[(i64, f64)]) -> Option<(f64, f64)> {
    let mut cross = Vec::new();
    let mut auto = Vec::new();
    for (x, y) in [(a, b), (b, a)] {
        let mut j = 0usize;
        for i in 0..x.len().saturating_sub(1) {
            let (t, r) = x[i];
            while j < y.len() && y[j].0 < t {
                j += 1;
            }
            let Some(&(ty, ry)) = y.get(j) else { break };
            if ty <= x[i + 1].0 {
                cross.push((r, ry));
                auto.push((r, x[i + 1].1));
            }
        }
    }
    if cross.len() < SHARED_QUEUE_MIN_PAIRS {
        return None;
    }
    Some((correlation(&cross)?, correlation(&auto)?))
}

fn rtt_series(recorder: &Records, conn: u64, d: usize) -> Vec<(i64, f64)> {
    recorder.get(conn).map_or_else(Vec::new, |r| {
        r.dirs[d]
            .acks
            .iter()
            .filter(|a| a.rtt_us > 0)
            .map(|a| (a.t_ns, a.rtt_us as f64))
            .collect()
    })
}

/// One sample per round trip: each kept sample at least the flow's
/// smallest RTT after the one before. ACK-clocked samples come every few
/// hundred microseconds, over which a queue hardly changes: a flow's next
/// sample and the other flow's are then equally alike and the test of
/// Rubenstein et al. (made for probes spaced like the queue's changes) has
/// no power. A round trip apart, the queue has moved.
fn thin(s: &[(i64, f64)]) -> Vec<(i64, f64)> {
    let min_ns = calc::ns_from_us(s.iter().map(|x| x.1).fold(f64::INFINITY, f64::min));
    if !min_ns.is_finite() {
        return Vec::new();
    }
    let mut out: Vec<(i64, f64)> = Vec::new();
    for &x in s {
        if out.last().is_none_or(|l| (x.0 - l.0) as f64 >= min_ns) {
            out.push(x);
        }
    }
    out
}

/// (minimum, 90th percentile) of the RTT samples, ms.
fn min_p90_ms(s: &[(i64, f64)]) -> (f64, f64) {
    let mut v: Vec<f64> = s.iter().map(|x| x.1).collect();
    if v.is_empty() {
        return (0.0, 0.0);
    }
    v.sort_by(f64::total_cmp);
    (calc::ms_from_us(v[0]), calc::ms_from_us(v[(v.len() - 1) * 9 / 10]))
}

/// A queue worth naming: the 90th-percentile RTT above the minimum by the
/// one queue test (`crate::path::queued_at`).
fn queued(s: &[(i64, f64)]) -> bool {
    let (min, p90) = min_p90_ms(s);
    min > 0.0 && crate::path::queued_at(p90, min)
}

/// Adds `shared_bottleneck` when every pair of the group's flows captured
/// at the sender passes the shared-congestion test.
fn shared_queue(
    g: &mut FlowGroup,
    conns: &[ConnectionSummary],
    diags: &[crate::model::ConnectionDiagnosis],
    recorder: &Records,
) {
    use tcpwhy_core::units::fmt_rate;
    let sender_side = |f: &GroupFlow| {
        conns
            .iter()
            .position(|c| c.id == f.connection)
            .and_then(|i| diags.get(i))
            .is_some_and(|dg| {
                dg.directions
                    .iter()
                    .any(|dd| dd.from == f.from && dd.capture_point == "near_sender")
            })
    };
    let series: Vec<(u64, Vec<(i64, f64)>)> = g
        .flows
        .iter()
        .filter(|f| sender_side(f))
        .map(|f| {
            (
                f.connection,
                rtt_series(recorder, f.connection, usize::from(f.from == "b")),
            )
        })
        .filter(|(_, s)| queued(s))
        .map(|(c, s)| (c, thin(&s)))
        .collect();
    if std::env::var_os("TCPWHY_DEBUG_INTERVALS").is_some() {
        for f in &g.flows {
            let s = rtt_series(recorder, f.connection, usize::from(f.from == "b"));
            eprintln!(
                "shared queue: conn {} sender_side={} samples={} min/p90={:?} queued={}",
                f.connection,
                sender_side(f),
                s.len(),
                min_p90_ms(&s),
                queued(&s)
            );
        }
        for i in 0..series.len() {
            for j in i + 1..series.len() {
                eprintln!(
                    "shared queue: {} vs {}: {:?}",
                    series[i].0,
                    series[j].0,
                    cross_and_auto(&series[i].1, &series[j].1)
                );
            }
        }
    }
    if series.len() < GROUP_MIN_FLOWS {
        return;
    }
    let mut measures = Vec::new();
    for i in 0..series.len() {
        for j in i + 1..series.len() {
            match cross_and_auto(&series[i].1, &series[j].1) {
                Some((x, a)) if x > a => measures.push((x, a)),
                _ => return,
            }
        }
    }
    let all: Vec<(i64, f64)> = series.iter().flat_map(|s| s.1.iter().copied()).collect();
    let (min, p90) = min_p90_ms(&all);
    let queue_ms = p90 - min;
    let (x, a) = measures
        .iter()
        .fold((1.0f64, 1.0f64), |m, p| (m.0.min(p.0), m.1.min(p.1)));
    g.findings.push(GroupFinding {
        kind: "shared_bottleneck",
        text: format!(
            "these {} flows (connections {}) share a bottleneck: their RTTs rise and fall together (correlation {:.2} across flows against {:.2} within a flow, the test of Rubenstein, Kurose and Towsley); together {}, queue up to {:.0} ms (90th percentile RTT above the minimum)",
            series.len(),
            series.iter().map(|s| s.0.to_string()).collect::<Vec<_>>().join(", "),
            x,
            a,
            g.aggregate_goodput_bps.map_or("?".into(), fmt_rate),
            queue_ms
        ),
    });
}

/// A group's flows over time: the new data each delivered per time bin
/// (from the recorded data segments: sent at the sender's capture, arrived
/// at the receiver's), for the report's stacked plot.
#[derive(Debug, Clone)]
pub struct GroupSeries {
    /// Start of the first bin (capture seconds) and the bin width (s).
    pub t0: f64,
    pub bin_s: f64,
    /// (connection number, "a"/"b", bits/s per bin), in the group's order.
    pub flows: Vec<(u64, &'static str, Vec<f64>)>,
}

/// Bins `bins` equal steps over the group's span.
pub fn series(g: &FlowGroup, conns: &[ConnectionSummary], recorder: &Records, bins: usize) -> GroupSeries {
    let bins = bins.max(1);
    let span = (g.last_time - g.first_time).max(1e-6);
    let bin_s = span / bins as f64;
    let mut flows = Vec::new();
    for f in &g.flows {
        let d = usize::from(f.from == "b");
        let mut v = vec![0.0f64; bins];
        let rec = conns.iter().find(|c| c.id == f.connection).and_then(|c| recorder.get(c.id));
        if let Some(rec) = rec {
            for x in rec.dirs[d].data.iter().filter(|x| !x.is_retransmission() && x.len > 0) {
                let k = ((calc::s_from_ns(x.t_ns as f64) - g.first_time) / bin_s).floor();
                if k >= 0.0 {
                    v[(k as usize).min(bins - 1)] += calc::bps(x.len as f64, bin_s);
                }
            }
        }
        flows.push((f.connection, f.from, v));
    }
    GroupSeries { t0: g.first_time, bin_s, flows }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A queue that fills and drains (a sawtooth of 40 ms) seen by two flows
    /// sampling it at interleaved times, against two flows behind queues of
    /// their own with the same shape but out of phase.
    #[test]
    fn flows_behind_one_queue_correlate_more_across_than_within() {
        let queue = |t: i64, phase: f64| {
            let x = ((t as f64 / 1e9) / 0.8 + phase).fract();
            40_000.0 * x + 20_000.0
        };
        let mut seed = 7u64;
        let mut noise = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) as f64 / (1u64 << 31) as f64 - 0.5) * 8_000.0
        };
        let mk = |offset: i64, phase: f64, noise: &mut dyn FnMut() -> f64| -> Vec<(i64, f64)> {
            (0..2000)
                .map(|i| {
                    let t = i * 10_000_000 + offset;
                    (t, queue(t, phase) + noise())
                })
                .collect()
        };
        let a = mk(0, 0.0, &mut noise);
        let b = mk(3_000_000, 0.0, &mut noise);
        let (x, auto) = cross_and_auto(&a, &b).unwrap();
        assert!(x > auto, "shared: cross {x} auto {auto}");
        let c = mk(3_000_000, 0.5, &mut noise);
        let (x, auto) = cross_and_auto(&a, &c).unwrap();
        assert!(x < auto, "independent: cross {x} auto {auto}");
        assert!(cross_and_auto(&a[..20], &b[..20]).is_none());
    }
}
