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
    /// Share of probes where the peer's window held the sender: what it
    /// left unused (snd_una + snd_wnd - snd_nxt) was below `window_margin`.
    pub window_bound_share: f64,
    pub retransmits: usize,
    /// ca_state changes: (state name, count).
    pub cong_states: BTreeMap<&'static str, usize>,
}

/// net.ipv4.tcp_tso_win_divisor's default (Documentation/networking/
/// ip-sysctl.rst): tcp_tso_should_defer sends at once only when at least
/// this fraction of min(snd_wnd, cwnd) is free, else it waits for more
/// window and the kernel counts the time as rwnd-limited (send_win below
/// cong_win).
const TSO_WIN_DIVISOR: u64 = 3;
/// GSO_LEGACY_MAX_SIZE: with a full TSO burst free tcp_tso_should_defer
/// sends at once, however large the window.
const TSO_MAX_BYTES: u64 = 65_536;
/// RFC 1122's default MSS: less free window than this cannot take a
/// segment on any path (tcp_snd_wnd_test); the probe does not carry the MSS.
const MIN_SEGMENT_BYTES: u64 = 536;

/// The free window below which the kernel stops on the peer's window:
/// tcp_tso_should_defer's chunk (a third of the window, at most a TSO
/// burst), at least one segment. A small window is thus reached with a
/// third of it unused (a 10 KiB window with 5 of 7 segments in flight).
pub fn window_margin(snd_wnd: u32) -> u64 {
    (snd_wnd as u64 / TSO_WIN_DIVISOR).min(TSO_MAX_BYTES).max(MIN_SEGMENT_BYTES)
}

/// The peer's window holds the sender at this probe (a zero window most of all).
fn window_bound(snd_wnd: u32, in_flight: u32) -> bool {
    (snd_wnd as u64).saturating_sub(in_flight as u64) < window_margin(snd_wnd)
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
                    if window_bound(*snd_wnd, snd_nxt.wrapping_sub(*snd_una)) {
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
        "  the peer's window held the sender (less free than a third of it or 64 KiB) on {:.0}% of ACKs{}",
        f.window_bound_share * 100.0,
        if f.window_bound_share >= 0.5 { " (receiver-window bound)" } else { "" }
    );
    if f.retransmits > 0 {
        o += &format!("; {} retransmission{}", f.retransmits, if f.retransmits == 1 { "" } else { "s" });
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_holds_the_sender_where_the_kernel_would_wait_for_it() {
        // A 10,136-byte window (7 segments of 1,448): with 5 in flight the
        // 2 free segments are less than a third of the window, and
        // tcp_tso_should_defer waits for more; with 4 in flight it sends.
        assert!(window_bound(10_136, 5 * 1448));
        assert!(!window_bound(10_136, 4 * 1448));
        // A 3 MB window: a TSO burst free means the sender goes on.
        assert!(!window_bound(3_000_000, 3_000_000 - 100_000));
        assert!(window_bound(3_000_000, 3_000_000 - 60_000));
        // A zero window stops the sender outright; less than one segment
        // free in a tiny window does too.
        assert!(window_bound(0, 0));
        assert!(window_bound(1_000, 600));
        assert!(!window_bound(64_512, 0));
    }
}
