//! A host's TCP settings judged: the largest window each side can reach,
//! the throughput ceiling at an RTT, and findings with exact fix commands.

use serde::Serialize;
use std::collections::BTreeMap;
use tcpwhy_core::{buffer_for_window, KernelRule};

use crate::text::{Counters, TcpMetric};
use tcpwhy_core::units::{fmt_bytes, fmt_bytes_decimal, fmt_rate};

/// What `tcpwhy host` looks at.
#[derive(Debug, Clone, Default)]
pub struct HostInput {
    pub sysctl: BTreeMap<String, String>,
    /// Kernel release ("6.1.0-18-amd64"); else `kernel.osrelease` in sysctl.
    pub kernel: Option<String>,
    pub tcp_metrics: Option<Vec<TcpMetric>>,
    pub counters: Option<Counters>,
    pub rtt_s: Option<f64>,
    pub bandwidth_bps: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct HostFinding {
    pub kind: &'static str,
    /// "problem" (limits throughput now), "warning", "info".
    pub severity: &'static str,
    pub text: String,
    pub commands: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct HostReport {
    pub kernel: Option<String>,
    pub kernel_rule: String,
    pub congestion_control: Option<String>,
    pub tcp_rmem: Option<[u64; 3]>,
    pub tcp_wmem: Option<[u64; 3]>,
    pub window_scaling: Option<bool>,
    /// Largest receive window this host can advertise with autotuning, bytes.
    pub max_receive_window: Option<u64>,
    /// Largest amount this host can keep in flight as a sender (the send
    /// buffer holds unacknowledged and unsent data), bytes.
    pub max_send_window: Option<u64>,
    pub rtt_s: Option<f64>,
    /// Ceiling of one connection at that RTT: min(receive, send window)/RTT.
    pub ceiling_receive_bps: Option<f64>,
    pub ceiling_send_bps: Option<f64>,
    pub bdp_bytes: Option<f64>,
    pub findings: Vec<HostFinding>,
}

fn triple(s: Option<&String>) -> Option<[u64; 3]> {
    let v: Vec<u64> = s?.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    (v.len() == 3).then(|| [v[0], v[1], v[2]])
}

const LOSS_BASED: &[&str] = &["cubic", "reno", "htcp", "bic", "highspeed", "scalable", "hybla", "illinois", "westwood", "veno", "yeah"];

pub fn judge(input: &HostInput) -> HostReport {
    let s = &input.sysctl;
    let get = |k: &str| s.get(k).map(String::as_str);
    let kernel = input.kernel.clone().or_else(|| s.get("kernel.osrelease").cloned());
    let adv: Option<i8> = get("net.ipv4.tcp_adv_win_scale").and_then(|v| v.parse().ok());
    let rule = kernel
        .as_deref()
        .and_then(|k| KernelRule::for_version(k, adv))
        .unwrap_or_default();
    let rmem = triple(s.get("net.ipv4.tcp_rmem"));
    let wmem = triple(s.get("net.ipv4.tcp_wmem"));
    let wscale = get("net.ipv4.tcp_window_scaling").map(|v| v != "0");
    let moderate = get("net.ipv4.tcp_moderate_rcvbuf").map(|v| v != "0");
    let cc = get("net.ipv4.tcp_congestion_control").map(str::to_string);
    let mut findings = Vec::new();

    let frac = rule.window_fraction();
    let rcv_buf = match (rmem, moderate) {
        (Some(r), Some(false)) => Some(r[1]),
        (Some(r), _) => Some(r[2]),
        _ => None,
    };
    let mut max_rcv = rcv_buf.map(|b| (b as f64 * frac) as u64);
    if wscale == Some(false) {
        max_rcv = Some(max_rcv.unwrap_or(65535).min(65535));
    }
    // Payload can fill nearly all of sndbuf (measured ~97% with bulk writes).
    let max_snd = wmem.map(|w| w[2]);
    let rtt = input.rtt_s;
    let ceil = |w: Option<u64>| Some(w? as f64 * 8.0 / rtt?);
    let bdp = match (input.bandwidth_bps, rtt) {
        (Some(b), Some(r)) => Some(b / 8.0 * r),
        _ => None,
    };

    window_setting_findings(wscale, moderate, rmem, &mut findings);
    if let Some(need) = bdp {
        receive_buffer_finding(input, need, rule, max_rcv, rmem, &mut findings);
        send_buffer_finding(rtt, need, max_snd, wmem, &mut findings);
    }
    slow_start_findings(input, cc.as_deref(), &mut findings);
    loss_recovery_findings(input, &mut findings);
    if let Some(c) = &input.counters {
        counter_findings(c, &mut findings);
    }
    HostReport {
        kernel,
        kernel_rule: rule.describe(),
        congestion_control: cc,
        tcp_rmem: rmem,
        tcp_wmem: wmem,
        window_scaling: wscale,
        max_receive_window: max_rcv,
        max_send_window: max_snd,
        rtt_s: rtt,
        ceiling_receive_bps: ceil(max_rcv),
        ceiling_send_bps: ceil(max_snd),
        bdp_bytes: bdp,
        findings,
    }
}

/// Settings that cap every receive window whatever the path: window scaling
/// off (64 KiB at most), receive autotuning off (the tcp_rmem default).
fn window_setting_findings(wscale: Option<bool>, moderate: Option<bool>, rmem: Option<[u64; 3]>, findings: &mut Vec<HostFinding>) {
    if wscale == Some(false) {
        findings.push(HostFinding {
            kind: "window_scaling_off",
            severity: "problem",
            text: "window scaling is off (net.ipv4.tcp_window_scaling=0): no connection can use a window above 64 KiB".into(),
            commands: vec!["sysctl -w net.ipv4.tcp_window_scaling=1".into()],
        });
    }
    if moderate == Some(false) {
        findings.push(HostFinding {
            kind: "receive_autotuning_off",
            severity: "warning",
            text: format!(
                "receive buffer autotuning is off (tcp_moderate_rcvbuf=0): receive windows stay at the tcp_rmem default{}",
                rmem.map(|r| format!(" of {}", fmt_bytes(r[1] as f64))).unwrap_or_default()
            ),
            commands: vec!["sysctl -w net.ipv4.tcp_moderate_rcvbuf=1".into()],
        });
    }
}

/// The largest receive window below the path's BDP `need`: downloads are
/// capped, and the tcp_rmem max that lifts the cap under this kernel's rule.
fn receive_buffer_finding(
    input: &HostInput,
    need: f64,
    rule: KernelRule,
    max_rcv: Option<u64>,
    rmem: Option<[u64; 3]>,
    findings: &mut Vec<HostFinding>,
) {
    let bw = input.bandwidth_bps.unwrap_or(0.0);
    let rtt = input.rtt_s;
    if let (Some(w), Some(r)) = (max_rcv, rmem) {
        if (w as f64) < need {
            let buf = buffer_for_window(need, rule).max(r[2]);
            findings.push(HostFinding {
                kind: "receive_buffer_below_bdp",
                severity: "problem",
                text: format!(
                    "as a receiver this host can advertise at most {} ({} of tcp_rmem max {}, {}), below the {} the path needs ({} x {:.1} ms): downloads top out at {}",
                    fmt_bytes(w as f64),
                    rule.fraction_text(),
                    fmt_bytes(r[2] as f64),
                    rule.describe(),
                    fmt_bytes(need),
                    fmt_rate(bw),
                    rtt.unwrap_or(0.0) * 1e3,
                    fmt_rate(w as f64 * 8.0 / rtt.unwrap_or(1.0))
                ),
                commands: vec![
                    format!("sysctl -w net.ipv4.tcp_rmem=\"{} {} {buf}\"", r[0], r[1]),
                    format!("sysctl -w net.core.rmem_max={buf}   # only if applications set SO_RCVBUF"),
                ],
            });
        }
    }
}

/// The largest send window below the path's BDP `need`: uploads are capped,
/// and the tcp_wmem max that holds the window plus the data queued behind it.
fn send_buffer_finding(rtt: Option<f64>, need: f64, max_snd: Option<u64>, wmem: Option<[u64; 3]>, findings: &mut Vec<HostFinding>) {
    if let (Some(w), Some(wm)) = (max_snd, wmem) {
        if (w as f64) < need {
            // Unacknowledged window plus the data queued behind it: 2 x BDP.
            let buf = buffer_for_window(need, KernelRule::ScalingRatio).max(wm[2]);
            findings.push(HostFinding {
                kind: "send_buffer_below_bdp",
                severity: "problem",
                text: format!(
                    "as a sender this host can keep at most about {} in flight (tcp_wmem max), below the {} the path needs: uploads top out at {}",
                    fmt_bytes(w as f64),
                    fmt_bytes(need),
                    fmt_rate(w as f64 * 8.0 / rtt.unwrap_or(1.0))
                ),
                commands: vec![
                    format!("sysctl -w net.ipv4.tcp_wmem=\"{} {} {buf}\"", wm[0], wm[1]),
                    format!("sysctl -w net.core.wmem_max={buf}   # only if applications set SO_SNDBUF"),
                ],
            });
        }
    }
}

/// What sends connections back into slow start or out of it too early:
/// slow start after idle with a loss-based `cc`, a small cached ssthresh.
fn slow_start_findings(input: &HostInput, cc: Option<&str>, findings: &mut Vec<HostFinding>) {
    let get = |k: &str| input.sysctl.get(k).map(String::as_str);
    if get("net.ipv4.tcp_slow_start_after_idle") == Some("1") {
        let loss_based = cc.map(|c| LOSS_BASED.contains(&c)).unwrap_or(true);
        if loss_based {
            findings.push(HostFinding {
                kind: "slow_start_after_idle",
                severity: "warning",
                text: format!(
                    "slow start after idle is on with {}: a connection idle for more than one RTO restarts from the initial window, so request/response traffic on kept-alive connections keeps paying slow start",
                    cc.unwrap_or("a loss-based congestion control")
                ),
                commands: vec!["sysctl -w net.ipv4.tcp_slow_start_after_idle=0".into()],
            });
        }
    }
    if let Some(m) = &input.tcp_metrics {
        let small: Vec<&TcpMetric> = m.iter().filter(|e| e.ssthresh.is_some_and(|x| x < 20)).collect();
        if !small.is_empty() {
            let no_save = get("net.ipv4.tcp_no_metrics_save") == Some("1");
            let list: Vec<String> = small
                .iter()
                .take(5)
                .map(|e| format!("{} (ssthresh {}{})", e.addr, e.ssthresh.unwrap_or(0), e.cwnd.map(|c| format!(", cwnd {c}")).unwrap_or_default()))
                .collect();
            let mut commands: Vec<String> = small.iter().take(5).map(|e| format!("ip tcp_metrics delete {}", e.addr)).collect();
            if !no_save {
                commands.push("sysctl -w net.ipv4.tcp_no_metrics_save=1".into());
            }
            findings.push(HostFinding {
                kind: "cached_small_ssthresh",
                severity: "problem",
                text: format!(
                    "{} cached tcp_metrics {} a small ssthresh: new connections to {} leave slow start at once and grow one segment per RTT{}",
                    small.len(),
                    if small.len() == 1 { "entry carries" } else { "entries carry" },
                    list.join(", "),
                    if no_save { " (tcp_no_metrics_save=1 already stops new entries)" } else { "" }
                ),
                commands,
            });
        }
    }
}

/// The loss-recovery aids and whether they are on: tail loss probe (with
/// its counters), SACK, timestamps.
fn loss_recovery_findings(input: &HostInput, findings: &mut Vec<HostFinding>) {
    let get = |k: &str| input.sysctl.get(k).map(String::as_str);
    if let Some(er) = get("net.ipv4.tcp_early_retrans") {
        let tlp_on = matches!(er, "3" | "4");
        let probes = input.counters.as_ref().and_then(|c| c.get("TcpExtTCPLossProbes")).copied();
        let recov = input.counters.as_ref().and_then(|c| c.get("TcpExtTCPLossProbeRecovery")).copied();
        let mut text = format!(
            "tail loss probe is {} (tcp_early_retrans={er})",
            if tlp_on { "on" } else { "off" }
        );
        if let Some(p) = probes {
            text += &format!(
                "; {p} loss probes sent{}",
                recov.map(|r| format!(", {r} of them recovered a real loss")).unwrap_or_default()
            );
        }
        findings.push(HostFinding {
            kind: "tail_loss_probe",
            severity: if tlp_on { "info" } else { "warning" },
            text: if tlp_on { text } else { text + ": a lost last segment waits for a full RTO" },
            commands: if tlp_on { vec![] } else { vec!["sysctl -w net.ipv4.tcp_early_retrans=3".into()] },
        });
    }
    if get("net.ipv4.tcp_sack") == Some("0") {
        findings.push(HostFinding {
            kind: "sack_off",
            severity: "warning",
            text: "SACK is off: each loss episode repairs one segment per RTT".into(),
            commands: vec!["sysctl -w net.ipv4.tcp_sack=1".into()],
        });
    }
    if get("net.ipv4.tcp_timestamps") == Some("0") {
        findings.push(HostFinding {
            kind: "timestamps_off",
            severity: "info",
            text: "TCP timestamps are off: RTT is sampled less often and PAWS is unavailable".into(),
            commands: vec!["sysctl -w net.ipv4.tcp_timestamps=1".into()],
        });
    }
}

/// What the host's counters show: retransmissions above 1% of more than
/// 1000 segments sent, and any receive-queue, listen-queue or RTO events.
fn counter_findings(c: &Counters, findings: &mut Vec<HostFinding>) {
    let out = c.get("TcpOutSegs").copied().unwrap_or(0);
    let re = c.get("TcpRetransSegs").copied().unwrap_or(0);
    if out > 1000 && re * 100 > out {
        findings.push(HostFinding {
            kind: "retransmissions",
            severity: "warning",
            text: format!("{:.2}% of the segments this host sent were retransmissions ({re} of {out})", re as f64 * 100.0 / out as f64),
            commands: vec![],
        });
    }
    for (k, what) in [
        ("TcpExtPruneCalled", "receive queues pruned for lack of buffer"),
        ("TcpExtTCPRcvQDrop", "segments dropped because the receive queue was full"),
        ("TcpExtListenOverflows", "listen-queue overflows"),
        ("TcpExtTCPTimeouts", "retransmission timeouts"),
    ] {
        if let Some(&v) = c.get(k) {
            if v > 0 {
                findings.push(HostFinding {
                    kind: "counter",
                    severity: "info",
                    text: format!("{v} {what} ({k})"),
                    commands: vec![],
                });
            }
        }
    }
}

pub fn render(r: &HostReport) -> String {
    let mut o = String::new();
    o += &format!(
        "kernel {}  ({}), congestion control {}\n",
        r.kernel.as_deref().unwrap_or("unknown"),
        r.kernel_rule,
        r.congestion_control.as_deref().unwrap_or("unknown")
    );
    if let Some(m) = r.tcp_rmem {
        o += &format!("tcp_rmem {} {} {}", m[0], m[1], m[2]);
    }
    if let Some(m) = r.tcp_wmem {
        o += &format!("   tcp_wmem {} {} {}", m[0], m[1], m[2]);
    }
    o += "\n";
    let rtt = r.rtt_s.map(|x| format!(" at {:.1} ms", x * 1e3)).unwrap_or_default();
    if let Some(w) = r.max_receive_window {
        o += &format!(
            "largest receive window: {}{}\n",
            fmt_bytes(w as f64),
            r.ceiling_receive_bps.map(|c| format!("  -> at most {} per connection{rtt} (download)", fmt_rate(c))).unwrap_or_default()
        );
    }
    if let Some(w) = r.max_send_window {
        o += &format!(
            "largest send window:    {}{}\n",
            fmt_bytes(w as f64),
            r.ceiling_send_bps.map(|c| format!("  -> at most {} per connection{rtt} (upload)", fmt_rate(c))).unwrap_or_default()
        );
    }
    if let Some(b) = r.bdp_bytes {
        o += &format!("path bandwidth-delay product: {} = {}\n", fmt_bytes_decimal(b), fmt_bytes(b));
    }
    if r.findings.is_empty() {
        o += "\nno findings\n";
    }
    for f in &r.findings {
        o += &format!("\n[{}] {}: {}\n", f.severity, f.kind, f.text);
        for c in &f.commands {
            o += &format!("    {c}\n");
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{parse_sysctl, parse_tcp_metrics};

    #[test]
    fn small_buffers_and_cached_ssthresh() {
        let input = HostInput {
            sysctl: parse_sysctl(
                "net.ipv4.tcp_rmem = 4096 131072 6291456\nnet.ipv4.tcp_wmem = 4096 16384 4194304\nnet.ipv4.tcp_window_scaling = 1\nnet.ipv4.tcp_slow_start_after_idle = 1\nnet.ipv4.tcp_congestion_control = cubic\nnet.ipv4.tcp_adv_win_scale = 1\nnet.ipv4.tcp_early_retrans = 3\nkernel.osrelease = 5.10.0-28-amd64\n",
            ),
            tcp_metrics: Some(parse_tcp_metrics("10.0.0.2 age 5sec ssthresh 4 cwnd 2 rtt 35000us rttvar 1000us source 10.0.0.1\n").0),
            rtt_s: Some(0.035),
            bandwidth_bps: Some(3e9),
            ..Default::default()
        };
        let r = judge(&input);
        assert_eq!(r.max_receive_window, Some(3145728));
        let kinds: Vec<&str> = r.findings.iter().map(|f| f.kind).collect();
        assert!(kinds.contains(&"receive_buffer_below_bdp"), "{kinds:?}");
        assert!(kinds.contains(&"send_buffer_below_bdp"));
        assert!(kinds.contains(&"slow_start_after_idle"));
        assert!(kinds.contains(&"cached_small_ssthresh"));
        let rb = r.findings.iter().find(|f| f.kind == "receive_buffer_below_bdp").unwrap();
        // 3 Gbit/s x 35 ms = 13.125 MB; pre-6.6, half the buffer -> 26.25 MB -> 26 MiB rounded up.
        assert_eq!(rb.commands[0], "sysctl -w net.ipv4.tcp_rmem=\"4096 131072 27262976\"");
        assert!(render(&r).contains("ip tcp_metrics delete 10.0.0.2"));
    }
}
