//! Host and kernel evidence (`tcpwhy_host::evidence::Evidence`: `ss`
//! snapshots, sysctls, tcp_metrics, counters, tcp_probe traces, a lab run)
//! added to a capture's diagnosis as findings, matched by 4-tuple (the
//! socket's local end is the data sender or the receiver of a direction).

use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use tcpwhy_core::units::fmt_bytes;
use tcpwhy_core::{Cause, Limit};
use tcpwhy_diagnose::model::{Evidence as FrameEvidence, Finding};
use tcpwhy_diagnose::{ConnectionDiagnosis, DirectionDiagnosis};
use tcpwhy_host::evidence::Evidence;
use tcpwhy_host::series;

fn addr(s: &str) -> Option<SocketAddr> {
    s.parse().ok()
}

fn numbers(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn finding(kind: &'static str, text: String, n: Value) -> Finding {
    Finding {
        kind,
        text,
        numbers: numbers(n),
        evidence: FrameEvidence::default(),
    }
}

fn sysctl_get<'a>(m: &'a BTreeMap<String, String>, role: &str, key: &str) -> Option<&'a String> {
    m.get(&format!("{role}:{key}")).or_else(|| m.get(key))
}

/// Adds the evidence to one direction (sender and receiver as "ip:port"):
/// findings (JSON) and the same sentences at the end of the summary (text).
pub fn apply_direction(ev: &Evidence, d: &mut DirectionDiagnosis) {
    let before = d.findings.len();
    add_findings(ev, d);
    let added: Vec<String> = d.findings[before..].iter().map(|f| f.text.clone()).collect();
    for t in added {
        let t = t.trim_end_matches('.');
        let mut c = t.chars();
        let t = match c.next() {
            Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
            None => continue,
        };
        if !d.summary.is_empty() && !d.summary.ends_with(' ') {
            d.summary.push(' ');
        }
        d.summary += &format!("Host evidence: {t}.");
    }
}

fn add_findings(ev: &Evidence, d: &mut DirectionDiagnosis) {
    let (Some(snd), Some(rcv)) = (addr(&d.sender), addr(&d.receiver)) else { return };
    // Kernel view from the sender's socket.
    for c in ev.series.iter().filter(|c| addr(&c.local) == Some(snd) && addr(&c.peer) == Some(rcv)) {
        let rw = c.limits.get(&Limit::ReceiverWindow).copied().unwrap_or(0.0);
        let sb = c.limits.get(&Limit::SendBuffer).copied().unwrap_or(0.0);
        let rw_life = c.lifetime_rwnd_share.unwrap_or(0.0);
        let sb_life = c.lifetime_sndbuf_share.unwrap_or(0.0);
        if rw >= 0.3 || rw_life >= 0.3 {
            let agrees = matches!(d.primary, Cause::ReceiverWindow | Cause::WindowScalingOff);
            d.findings.push(finding(
                "kernel_rwnd_limited",
                format!(
                    "the sender's kernel {} the receiver window: tcpi_rwnd_limited was {:.0}% of its busy time{} ({} samples)",
                    if agrees { "confirms" } else { "reports" },
                    rw_life.max(rw) * 100.0,
                    c.snd_wnd_max.map(|w| format!(", peer window at most {}", fmt_bytes(w as f64))).unwrap_or_default(),
                    c.samples
                ),
                json!({"rwnd_limited_share": rw_life.max(rw), "confirms": agrees}),
            ));
        }
        let last = ev.last.get(&(snd, rcv));
        let sendq_full = last.filter(|s| series::sndbuf_bound(s)).and_then(|s| s.skmem.map(|m| (s.wqueue, m)));
        if sb >= 0.3 || sb_life >= 0.3 || sendq_full.is_some() {
            let agrees = d.primary == Cause::SendBuffer;
            let mut t = format!(
                "the sender's kernel {} a send-buffer limit",
                if agrees { "confirms" } else { "reports" }
            );
            if sb_life.max(sb) > 0.0 {
                t += &format!(": tcpi_sndbuf_limited {:.0}% of its busy time", sb_life.max(sb) * 100.0);
            }
            if let Some((q, m)) = sendq_full {
                t += &format!(
                    "; Send-Q {} with {} queued, at the send buffer of {} (skmem tb)",
                    fmt_bytes(q as f64),
                    fmt_bytes(m.wmem_queued as f64),
                    fmt_bytes(m.sndbuf as f64)
                );
            }
            d.findings.push(finding("kernel_sndbuf_limited", t, json!({"sndbuf_limited_share": sb_life.max(sb), "confirms": agrees})));
        }
        if let Some(ss) = c.ssthresh_min.filter(|&s| s < 20) {
            d.findings.push(finding(
                "kernel_small_ssthresh",
                format!("the sender's socket had ssthresh {ss} (cwnd median {})", c.cwnd_median.unwrap_or(0)),
                json!({"ssthresh": ss}),
            ));
        }
    }
    // Receiver's socket: a full receive queue means a slow reader.
    if let Some(s) = ev.last.get(&(rcv, snd)) {
        if let Some(m) = s.skmem {
            if m.rcvbuf > 0 && s.rqueue as u64 * 2 >= m.rcvbuf as u64 {
                d.findings.push(finding(
                    "kernel_receive_queue_full",
                    format!(
                        "the receiver's socket held {} unread (Recv-Q) of a {} receive buffer: the receiving application is slow to read",
                        fmt_bytes(s.rqueue as f64),
                        fmt_bytes(m.rcvbuf as f64)
                    ),
                    json!({"recv_q": s.rqueue, "rcvbuf": m.rcvbuf}),
                ));
            }
        }
    }
    // Trace of the sender's socket.
    for t in ev.traces.iter().filter(|t| t.local == snd && t.peer == rcv) {
        d.findings.push(finding(
            "kernel_trace",
            format!(
                "tcp_probe at the sender ({} ACKs): cwnd median {} (max {}), ssthresh {}, peer window median {}, srtt {:.2} ms; the peer's window held the sender on {:.0}% of ACKs",
                t.probes,
                t.cwnd_median,
                t.cwnd_max,
                t.ssthresh_min.map_or("unset".into(), |s| s.to_string()),
                fmt_bytes(t.snd_wnd_median as f64),
                t.srtt_median_us as f64 / 1e3,
                t.window_bound_share * 100.0
            ),
            json!({"cwnd_median": t.cwnd_median, "snd_wnd_median": t.snd_wnd_median, "window_bound_share": t.window_bound_share}),
        ));
    }
    // Host settings.
    if d.primary == Cause::ReceiverWindow {
        if let Some(r) = sysctl_get(&ev.sysctl, "server", "net.ipv4.tcp_rmem").or_else(|| sysctl_get(&ev.sysctl, "client", "net.ipv4.tcp_rmem")) {
            d.findings.push(finding(
                "host_tcp_rmem",
                format!("the host settings given have tcp_rmem = {r}: the receive window cannot grow past its maximum times the kernel's window fraction"),
                json!({"tcp_rmem": r}),
            ));
        }
    }
    if d.primary == Cause::SendBuffer {
        if let Some(w) = sysctl_get(&ev.sysctl, "client", "net.ipv4.tcp_wmem") {
            d.findings.push(finding(
                "host_tcp_wmem",
                format!("the host settings given have tcp_wmem = {w}: the sender cannot keep more than its maximum unacknowledged"),
                json!({"tcp_wmem": w}),
            ));
        }
    }
    if let Some(m) = ev.tcp_metrics.iter().find(|m| m.ip() == Some(rcv.ip()) && m.ssthresh.is_some_and(|s| s < 20)) {
        d.findings.push(finding(
            "cached_ssthresh_entry",
            format!(
                "ip tcp_metrics holds ssthresh {}{} for {}: new connections to it start in congestion avoidance (fix: ip tcp_metrics delete {}; sysctl -w net.ipv4.tcp_no_metrics_save=1)",
                m.ssthresh.unwrap_or(0),
                m.cwnd.map(|c| format!(" cwnd {c}")).unwrap_or_default(),
                m.addr,
                m.addr
            ),
            json!({"ssthresh": m.ssthresh, "cwnd": m.cwnd}),
        ));
    }
}

/// Adds host/kernel evidence to every direction of every connection, and
/// a note on the loss-probe counters once (on the first direction that has
/// retransmissions as its primary).
pub fn apply<'a>(ev: &Evidence, conns: impl IntoIterator<Item = &'a mut ConnectionDiagnosis>) {
    let mut counters_used = ev.counters.is_empty();
    for c in conns {
        for d in c.directions.iter_mut() {
            apply_direction(ev, d);
            if !counters_used && matches!(d.primary, Cause::CongestionLoss | Cause::RandomLoss | Cause::SpuriousRetransmission | Cause::Policer) {
                let g = |k: &str| ev.counters.get(k).copied();
                if let Some(p) = g("TcpExtTCPLossProbes") {
                    d.findings.push(finding(
                        "host_loss_counters",
                        format!(
                            "host counters: {p} tail loss probes, {} recovered a loss, {} retransmitted of {} segments sent, {} timeouts",
                            g("TcpExtTCPLossProbeRecovery").unwrap_or(0),
                            g("TcpRetransSegs").unwrap_or(0),
                            g("TcpOutSegs").unwrap_or(0),
                            g("TcpExtTCPTimeouts").unwrap_or(0)
                        ),
                        json!({"loss_probes": p}),
                    ));
                    counters_used = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::apply;
    use std::collections::BTreeMap;
    use std::path::Path;
    use tcpwhy_core::Cause;
    use tcpwhy_diagnose::model::{ConnectionId, Endpoint, Rtt};
    use tcpwhy_diagnose::system::SystemGuess;
    use tcpwhy_diagnose::{ConnectionDiagnosis, DirectionDiagnosis};
    use tcpwhy_host::evidence::{Evidence, EvidenceArgs};

    fn direction(sender: &str, receiver: &str, primary: Cause) -> DirectionDiagnosis {
        DirectionDiagnosis {
            from: "a",
            sender: sender.into(),
            receiver: receiver.into(),
            bytes: 1_000_000,
            duration_s: 1.0,
            goodput_bps: Some(8e6),
            capture_point: "near_sender",
            rtt: Rtt { base_ms: Some(0.02), median_ms: Some(0.02), p90_ms: None, handshake_ms: None, source: "data_ack" },
            segment_bytes: 1448,
            path_rate_bps: None,
            path_capacity: "unknown",
            interval_ms: 1.0,
            limits: BTreeMap::new(),
            timeline: vec![],
            time_split: Default::default(),
            traffic_shape: tcpwhy_diagnose::shape::Shape::Bulk,
            primary,
            congestion_control: tcpwhy_diagnose::congestion::detect(&Default::default(), true, None, 1448, 0.0, tcpwhy_diagnose::congestion::Bucket::None),
            confidence: tcpwhy_core::Confidence::High,
            summary: String::new(),
            findings: vec![],
            fixes: vec![],
            what_if: vec![],
            to_confirm: vec![],
            truncated: false,
            parts: Vec::new(),
            what_if_inputs: None,
        }
    }

    fn conn(d: DirectionDiagnosis) -> ConnectionDiagnosis {
        ConnectionDiagnosis {
            id: ConnectionId {
                number: 1,
                a: Endpoint { addr: "10.55.0.1".into(), port: 39710, system: SystemGuess::unknown_without_syn() },
                b: Endpoint { addr: "10.55.0.2".into(), port: 5201, system: SystemGuess::unknown_without_syn() },
            },
            first_time: 0.0,
            duration_s: 1.0,
            handshake_rtt_ms: None,
            capture_quality: vec![],
            directions: vec![d],
        }
    }

    #[test]
    fn ss_confirms_receiver_window_and_host_settings_join() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/tests/fixtures");
        let ev = Evidence::load(&EvidenceArgs {
            ss: vec![dir.join("ss-tinm-loop-iproute2-6.1-linux-6.18.txt")],
            sysctl: Some(dir.join("sysctl-a-linux-6.18.txt")),
            tcp_metrics: Some(dir.join("tcp_metrics-iproute2-3.10-ms.txt")),
            nstat: Some(dir.join("nstat-az-iproute2-6.1.txt")),
            ..Default::default()
        })
        .unwrap();
        let mut conns = vec![conn(direction("10.55.0.1:39710", "10.55.0.2:5201", Cause::ReceiverWindow))];
        apply(&ev, &mut conns);
        let kinds: Vec<&str> = conns[0].directions[0].findings.iter().map(|f| f.kind).collect();
        assert!(kinds.contains(&"kernel_rwnd_limited"), "{kinds:?}");
        assert!(kinds.contains(&"host_tcp_rmem"), "{kinds:?}");
        let f = conns[0].directions[0].findings.iter().find(|f| f.kind == "kernel_rwnd_limited").unwrap();
        assert!(f.text.contains("confirms"), "{}", f.text);
        assert_eq!(f.numbers["confirms"], true);
        assert!(conns[0].directions[0].summary.contains("Host evidence: The sender's kernel confirms"), "{}", conns[0].directions[0].summary);

        // Another 4-tuple gets nothing from this ss file.
        let mut other = vec![conn(direction("10.9.9.9:1", "10.55.0.2:5201", Cause::ReceiverWindow))];
        apply(&ev, &mut other);
        assert!(!other[0].directions[0].findings.iter().any(|f| f.kind.starts_with("kernel_")));
    }

    #[test]
    fn send_queue_at_wmem_confirms_send_buffer() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/tests/fixtures");
        let ev = Evidence::load(&EvidenceArgs {
            ss: vec![dir.join("ss-tinm-iproute2-4.9-debian9.txt")],
            ..Default::default()
        })
        .unwrap();
        let mut conns = vec![conn(direction("10.1.0.4:38650", "10.2.0.7:5201", Cause::SendBuffer))];
        apply(&ev, &mut conns);
        let f = conns[0].directions[0].findings.iter().find(|f| f.kind == "kernel_sndbuf_limited").expect("sndbuf finding");
        assert!(f.text.contains("confirms") && f.text.contains("Send-Q"), "{}", f.text);
    }

    #[test]
    fn cached_ssthresh_for_the_receiver() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/tests/fixtures");
        let ev = Evidence::load(&EvidenceArgs {
            tcp_metrics: Some(dir.join("tcp_metrics-iproute2-3.10-ms.txt")),
            ss: vec![dir.join("ss-tin-iproute2-3.10-centos7.txt")],
            ..Default::default()
        })
        .unwrap();
        let mut conns = vec![conn(direction("192.168.10.5:44312", "192.168.20.9:2049", Cause::CachedSsthresh))];
        apply(&ev, &mut conns);
        let kinds: Vec<&str> = conns[0].directions[0].findings.iter().map(|f| f.kind).collect();
        assert!(kinds.contains(&"cached_ssthresh_entry"), "{kinds:?}");
        assert!(kinds.contains(&"kernel_small_ssthresh"), "{kinds:?}");
    }
}
