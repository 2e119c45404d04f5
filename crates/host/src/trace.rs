//! Per-flow summaries of `tcp:tcp_probe` / `tcp_retransmit_skb` /
//! `tcp_cong_state_set` events (as recorded by `tcpwhy trace` or a lab run,
//! JSON Lines of [`TraceEvent`]).

use serde::Serialize;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use tcpwhy_kernel::TraceEvent;

use tcpwhy_core::units::fmt_bytes;

#[derive(Debug, Clone, Serialize)]
pub struct FlowTrace {
    /// The socket's local end (tcp_probe's src).
    pub local: SocketAddr,
    pub peer: SocketAddr,
    pub probes: usize,
    pub duration_s: f64,
    pub cwnd_min: u32,
    pub cwnd_median: u32,
    pub cwnd_max: u32,
    /// Smallest ssthresh below "infinite" (None: never left slow start).
    pub ssthresh_min: Option<u32>,
    pub snd_wnd_median: u32,
    pub snd_wnd_max: u32,
    pub srtt_median_us: u32,
    /// Bytes the sequence space advanced (snd_una, last - first).
    pub acked_bytes: u64,
    /// Share of probes where the bytes in flight (snd_nxt - snd_una) were
    /// at least 90% of the peer's window.
    pub window_bound_share: f64,
    pub retransmits: usize,
    /// ca_state changes: (state name, count).
    pub cong_states: BTreeMap<&'static str, usize>,
}

fn med(mut v: Vec<u32>) -> u32 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[v.len() / 2]
}

/// Groups events per socket (local, peer) and summarises each flow that
/// had tcp_probe events.
pub fn summarize(events: &[TraceEvent]) -> Vec<FlowTrace> {
    let mut by: BTreeMap<(SocketAddr, SocketAddr), Vec<&TraceEvent>> = BTreeMap::new();
    for e in events {
        let (s, d) = match e {
            TraceEvent::Probe { saddr, daddr, sport, dport, .. }
            | TraceEvent::Retransmit { saddr, daddr, sport, dport, .. }
            | TraceEvent::CongState { saddr, daddr, sport, dport, .. } => {
                (SocketAddr::new(*saddr, *sport), SocketAddr::new(*daddr, *dport))
            }
        };
        by.entry((s, d)).or_default().push(e);
    }
    let mut out = Vec::new();
    for ((local, peer), evs) in by {
        let mut cw = Vec::new();
        let mut wnd = Vec::new();
        let mut srtt = Vec::new();
        let mut ss_min: Option<u32> = None;
        let mut bound = 0usize;
        let mut retrans = 0;
        let mut states: BTreeMap<&'static str, usize> = BTreeMap::new();
        let (mut t0, mut t1) = (u64::MAX, 0u64);
        let (mut una0, mut una_last, mut una_acc) = (None::<u32>, 0u32, 0u64);
        for e in &evs {
            match e {
                TraceEvent::Probe { mono_ns, snd_cwnd, ssthresh, snd_wnd, srtt_us, snd_nxt, snd_una, .. } => {
                    t0 = t0.min(*mono_ns);
                    t1 = t1.max(*mono_ns);
                    cw.push(*snd_cwnd);
                    wnd.push(*snd_wnd);
                    srtt.push(*srtt_us);
                    if *ssthresh < 0x7fff_0000 {
                        ss_min = Some(ss_min.map_or(*ssthresh, |m| m.min(*ssthresh)));
                    }
                    let inflight = snd_nxt.wrapping_sub(*snd_una);
                    if *snd_wnd > 0 && inflight as u64 * 10 >= *snd_wnd as u64 * 9 {
                        bound += 1;
                    }
                    match una0 {
                        None => {
                            una0 = Some(*snd_una);
                            una_last = *snd_una;
                        }
                        Some(_) => {
                            let d = snd_una.wrapping_sub(una_last);
                            if d < 1 << 31 {
                                una_acc += d as u64;
                                una_last = *snd_una;
                            }
                        }
                    }
                }
                TraceEvent::Retransmit { .. } => retrans += 1,
                TraceEvent::CongState { cong_state, .. } => {
                    *states.entry(tcpwhy_kernel::tcp_info::ca_state_name(*cong_state)).or_insert(0) += 1;
                }
            }
        }
        if cw.is_empty() {
            continue;
        }
        let n = cw.len();
        out.push(FlowTrace {
            local,
            peer,
            probes: n,
            duration_s: t1.saturating_sub(t0) as f64 / 1e9,
            cwnd_min: cw.iter().copied().min().unwrap_or(0),
            cwnd_max: cw.iter().copied().max().unwrap_or(0),
            cwnd_median: med(cw),
            ssthresh_min: ss_min,
            snd_wnd_median: med(wnd.clone()),
            snd_wnd_max: wnd.iter().copied().max().unwrap_or(0),
            srtt_median_us: med(srtt),
            acked_bytes: una_acc,
            window_bound_share: bound as f64 / n as f64,
            retransmits: retrans,
            cong_states: states,
        });
    }
    out
}

/// Keep events of sockets matching the address filter (ports are filtered
/// in the kernel already).
pub fn keep(e: &TraceEvent, addrs: &[IpAddr]) -> bool {
    if addrs.is_empty() {
        return true;
    }
    let (s, d) = match e {
        TraceEvent::Probe { saddr, daddr, .. }
        | TraceEvent::Retransmit { saddr, daddr, .. }
        | TraceEvent::CongState { saddr, daddr, .. } => (saddr, daddr),
    };
    addrs.iter().any(|a| a == s || a == d)
}

pub fn render(f: &FlowTrace) -> String {
    let mut o = format!(
        "{} -> {}  {} tcp_probe events over {:.2} s, {} acknowledged\n",
        f.local,
        f.peer,
        f.probes,
        f.duration_s,
        fmt_bytes(f.acked_bytes as f64)
    );
    o += &format!(
        "  cwnd min/median/max {}/{}/{} segments, ssthresh {}, peer window median {} (max {}), srtt median {:.2} ms\n",
        f.cwnd_min,
        f.cwnd_median,
        f.cwnd_max,
        f.ssthresh_min.map_or("never set (slow start only)".into(), |s| s.to_string()),
        fmt_bytes(f.snd_wnd_median as f64),
        fmt_bytes(f.snd_wnd_max as f64),
        f.srtt_median_us as f64 / 1e3
    );
    o += &format!(
        "  in flight within 10% of the peer's window on {:.0}% of ACKs{}",
        f.window_bound_share * 100.0,
        if f.window_bound_share >= 0.5 { " (receiver-window bound)" } else { "" }
    );
    if f.retransmits > 0 {
        o += &format!("; {} retransmissions", f.retransmits);
    }
    if !f.cong_states.is_empty() {
        let v: Vec<String> = f.cong_states.iter().map(|(k, n)| format!("{k} x{n}")).collect();
        o += &format!("; ca_state changes: {}", v.join(", "));
    }
    o
}

/// Read JSON Lines of [`TraceEvent`]; bad lines are counted.
pub fn read_jsonl(text: &str) -> (Vec<TraceEvent>, usize) {
    let mut bad = 0;
    let mut v = Vec::new();
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str(l) {
            Ok(e) => v.push(e),
            Err(_) => {
                // Raw trace_pipe text is accepted too.
                match tcpwhy_kernel::tracefs::parse_trace_line(l) {
                    Some(e) => v.push(e),
                    None => bad += 1,
                }
            }
        }
    }
    (v, bad)
}
