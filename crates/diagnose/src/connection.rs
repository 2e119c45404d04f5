//! A connection's diagnosis: each data direction whole or, for a long one,
//! in parts merged; what the capture did to the evidence; each end's
//! system, and every fix in the terms of the end it applies to.

use crate::model::{ConnectionDiagnosis, ConnectionId, Endpoint};
use crate::options::Options;
use crate::path::GroupVerdicts;
use crate::record::ConnRecords;
use tcpwhy_flow::ConnectionSummary;

pub fn diagnose_connection(
    cs: &ConnectionSummary,
    recs: Option<&ConnRecords>,
    opts: &Options,
    groups: &GroupVerdicts,
) -> ConnectionDiagnosis {
    // Capture quality first: it decides what the verdicts may rest on.
    let capture_quality = crate::quality::assess(cs);
    let systems = crate::system::of_connection(cs);
    let mut directions = Vec::new();
    if let Some(r) = recs {
        for d in 0..2 {
            let group = groups.get(&(cs.id, d));
            let dd = if r.dirs[d].parts.is_empty() {
                crate::analyze::diagnose_direction(cs, d, &r.dirs[d], opts, group)
            } else {
                // A long direction: the parts closed during the pass, then
                // what is still held (crate::parts).
                let mut parts = r.dirs[d].parts.clone();
                if !r.dirs[d].data.is_empty() {
                    parts.push(crate::parts::diagnose(cs, d, &r.dirs[d], opts, group));
                }
                crate::parts::merge(parts, cs, d)
            };
            if let Some(mut dd) = dd {
                crate::quality::apply(&mut dd, &capture_quality);
                // Each fix in the terms of the end it applies to.
                let (sender, receiver) = if d == 0 { (&systems[0], &systems[1]) } else { (&systems[1], &systems[0]) };
                crate::commands::localize(&mut dd.fixes, sender.name, receiver.name);
                directions.push(dd);
            }
        }
    }
    let [a_system, b_system] = systems;
    ConnectionDiagnosis {
        id: ConnectionId {
            number: cs.id,
            a: Endpoint { addr: cs.a.addr.clone(), port: cs.a.port, system: a_system },
            b: Endpoint { addr: cs.b.addr.clone(), port: cs.b.port, system: b_system },
        },
        first_time: cs.first_time,
        duration_s: cs.duration_s,
        handshake_rtt_ms: cs.handshake_rtt_ms,
        capture_quality,
        directions,
    }
}

