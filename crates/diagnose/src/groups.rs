//! Flows compared with each other: the data directions from one host to
//! another that overlap in time, captured at the sender, form a group. A
//! policer often enforces one rate for all of a customer's flows (Flach et
//! al. 2016; seed case 3: two downloads held together at an instance's
//! baseline), and then each flow sees a varying share of the rate: its own
//! losses fail the token-bucket test while the group's pass it. So when a
//! flow's own test fails, the group's verdict (`policer::detect_group`)
//! stands in for it, and the diagnosis names the flows it shares the
//! policer with.

use crate::analyze::{Options, MIN_BYTES, MIN_DATA_SEGMENTS};
use crate::path::Path;
use crate::policer::{detect_group, PolicerVerdict};
use crate::record::{AckRec, DataRec, Recorder};
use std::collections::HashMap;
use std::sync::Arc;
use tcpwhy_flow::ConnectionSummary;

/// Flows a group needs: two or more.
pub const GROUP_MIN_FLOWS: usize = 2;

/// The policed groups' verdicts, by (connection number, direction index)
/// of each member.
pub type GroupVerdicts = HashMap<(u64, usize), Arc<PolicerVerdict>>;

struct Member {
    ci: usize,
    d: usize,
    start: i64,
    end: i64,
}

/// Tests every group of two or more overlapping lossy flows between the
/// same two hosts; returns the verdicts of the groups found policed.
pub fn policed_groups(connections: &[ConnectionSummary], recorder: &Recorder, opts: &Options) -> GroupVerdicts {
    let mut by_hosts: HashMap<(&str, &str), Vec<Member>> = HashMap::new();
    for (ci, cs) in connections.iter().enumerate() {
        let Some(rec) = recorder.get(cs.id) else { continue };
        for d in 0..2 {
            let r = &rec.dirs[d];
            if cs.directions[d].counts.unique_bytes < MIN_BYTES
                || r.data.len() < MIN_DATA_SEGMENTS
                || !r.data.iter().any(|x| x.is_retransmission())
            {
                continue;
            }
            let key = if d == 0 { (cs.a.addr.as_str(), cs.b.addr.as_str()) } else { (cs.b.addr.as_str(), cs.a.addr.as_str()) };
            let (start, end) = (r.data[0].t_ns, r.data[r.data.len() - 1].t_ns);
            by_hosts.entry(key).or_default().push(Member { ci, d, start, end });
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
        for m in members.iter().chain(std::iter::once(&Member { ci: usize::MAX, d: 0, start: i64::MAX, end: i64::MAX })) {
            if m.start > cluster_end && !cluster.is_empty() {
                test_cluster(&cluster, connections, recorder, opts, &mut out);
                cluster.clear();
            }
            if m.ci == usize::MAX {
                break;
            }
            cluster_end = if cluster.is_empty() { m.end } else { cluster_end.max(m.end) };
            cluster.push(m);
        }
    }
    out
}

fn test_cluster(cluster: &[&Member], connections: &[ConnectionSummary], recorder: &Recorder, opts: &Options, out: &mut GroupVerdicts) {
    if cluster.len() < GROUP_MIN_FLOWS {
        return;
    }
    let mut flows: Vec<(&[DataRec], &[AckRec])> = Vec::new();
    let mut ids = Vec::new();
    let mut min_rtt: Option<i64> = None;
    for m in cluster {
        let cs = &connections[m.ci];
        let Some(rec) = recorder.get(cs.id) else { continue };
        let r = &rec.dirs[m.d];
        // At the receiver, lost packets were never captured: the merged
        // loss pattern needs the sender's view.
        let Some(path) = Path::estimate(cs, m.d, r, opts) else { continue };
        if !path.sender_side {
            continue;
        }
        if let Some(b) = path.base_ns() {
            min_rtt = Some(min_rtt.map_or(b, |x| x.min(b)));
        }
        flows.push((&r.data, &r.acks));
        ids.push((cs.id, m.d));
    }
    if flows.len() < GROUP_MIN_FLOWS {
        return;
    }
    let mut v = detect_group(&flows, min_rtt);
    if std::env::var_os("TCPWHY_DEBUG_INTERVALS").is_some() {
        eprintln!("group {ids:?}: policed={} code={} rate={:?} chunks={} lossy={} policed_chunks={}", v.policed, v.code, v.rate_bps, v.chunks, v.lossy_chunks, v.policed_chunks);
    }
    if !v.policed {
        return;
    }
    v.group = ids.clone();
    let v = Arc::new(v);
    for id in ids {
        out.insert(id, v.clone());
    }
}
