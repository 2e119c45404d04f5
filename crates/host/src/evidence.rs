//! Host and kernel evidence for a capture diagnosis: `ss` snapshots, a
//! `sysctl -a` file, `ip tcp_metrics show`, nstat / netstat counters, a
//! tcp_probe trace or a lab run directory. [`Evidence::load`] reads them;
//! [`apply`] adds findings to the capture's [`ConnectionDiagnosis`]es,
//! matched by 4-tuple (the socket's local end is the data sender or the
//! receiver of a direction).

use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use tcpwhy_core::{Cause, Limit};
use tcpwhy_diagnose::model::{Evidence as FrameEvidence, Finding};
use tcpwhy_diagnose::{ConnectionDiagnosis, DirectionDiagnosis};
use tcpwhy_kernel::{SocketSample, TraceEvent};

use crate::error::{Error, Format};
use crate::series::{self, ConnDiagnosis};
use crate::text::{self, Counters, TcpMetric};
use crate::trace::{self, FlowTrace};
use tcpwhy_core::units::fmt_bytes;

/// What the command line gave (clap-free).
#[derive(Debug, Clone, Default)]
pub struct EvidenceArgs {
    /// `ss -tin(m)` text files, or JSON Lines of samples (`tcpwhy live --record`, lab runs).
    pub ss: Vec<PathBuf>,
    pub sysctl: Option<PathBuf>,
    pub tcp_metrics: Option<PathBuf>,
    pub nstat: Option<PathBuf>,
    /// JSON Lines of trace events (`tcpwhy trace --out`, a lab run's trace.jsonl) or raw trace_pipe text.
    pub trace: Option<PathBuf>,
    /// A `tcpwhy lab run` directory: its samples, trace and sysctls.
    pub lab_dir: Option<PathBuf>,
}

impl EvidenceArgs {
    pub fn is_empty(&self) -> bool {
        self.ss.is_empty()
            && self.sysctl.is_none()
            && self.tcp_metrics.is_none()
            && self.nstat.is_none()
            && self.trace.is_none()
            && self.lab_dir.is_none()
    }
}

/// Evidence loaded and pre-digested.
#[derive(Debug, Default)]
pub struct Evidence {
    pub series: Vec<ConnDiagnosis>,
    /// Raw last sample per (local, peer), for Send-Q / skmem.
    pub last: BTreeMap<(SocketAddr, SocketAddr), SocketSample>,
    pub sysctl: BTreeMap<String, String>,
    pub tcp_metrics: Vec<TcpMetric>,
    pub counters: Counters,
    pub traces: Vec<FlowTrace>,
    /// Notes about what was read or skipped (for stderr).
    pub notes: Vec<String>,
}

fn read(p: &Path) -> Result<String, Error> {
    std::fs::read_to_string(p).map_err(|e| Error::unreadable(p, e))
}

/// Samples from ss text or JSON Lines of [`SocketSample`].
pub fn load_samples(p: &Path, notes: &mut Vec<String>) -> Result<Vec<SocketSample>, Error> {
    let t = read(p)?;
    if t.trim_start().starts_with('{') {
        let mut v = Vec::new();
        let mut bad = 0;
        for l in t.lines().filter(|l| !l.trim().is_empty()) {
            match serde_json::from_str::<SocketSample>(l) {
                Ok(s) => v.push(s),
                Err(_) => bad += 1,
            }
        }
        if bad > 0 {
            notes.push(format!("{}: {bad} lines are not socket samples", p.display()));
        }
        return Ok(v);
    }
    let parsed = crate::ss::parse(&t, 0.0);
    if parsed.samples.is_empty() {
        return Err(Error::no_data(p, Format::Ss));
    }
    for (what, n) in &parsed.skipped {
        notes.push(format!("{}: skipped {what} x{n}", p.display()));
    }
    Ok(parsed.samples)
}

impl Evidence {
    pub fn load(a: &EvidenceArgs) -> Result<Evidence, Error> {
        let mut e = Evidence::default();
        let mut samples = Vec::new();
        let mut trace_files: Vec<PathBuf> = a.trace.iter().cloned().collect();
        let mut ss_files = a.ss.clone();
        if let Some(dir) = &a.lab_dir {
            match std::fs::metadata(dir) {
                Err(e) => return Err(Error::unreadable(dir, e)),
                Ok(m) if !m.is_dir() => return Err(Error::NotLabRun { path: dir.clone() }),
                Ok(_) => {}
            }
            for f in ["client.samples.jsonl", "server.samples.jsonl"] {
                let p = dir.join(f);
                if p.exists() {
                    ss_files.push(p);
                }
            }
            for f in ["client.tcp_metrics.txt", "server.tcp_metrics.txt"] {
                if let Ok(t) = std::fs::read_to_string(dir.join(f)) {
                    e.tcp_metrics.extend(text::parse_tcp_metrics(&t).0);
                }
            }
            if dir.join("trace.jsonl").exists() {
                trace_files.push(dir.join("trace.jsonl"));
            }
            for f in ["server.sysctl.json", "client.sysctl.json"] {
                if let Ok(t) = std::fs::read_to_string(dir.join(f)) {
                    if let Ok(m) = serde_json::from_str::<BTreeMap<String, Value>>(&t) {
                        let role = f.split('.').next().unwrap_or("");
                        for (k, v) in m {
                            let v = v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
                            e.sysctl.insert(format!("{role}:{k}"), v);
                        }
                    }
                }
            }
        }
        for p in &ss_files {
            samples.extend(load_samples(p, &mut e.notes)?);
        }
        for s in &samples {
            e.last.insert((s.src, s.dst), s.clone());
        }
        e.series = series::group(&samples).iter().map(series::diagnose).collect();
        if let Some(p) = &a.sysctl {
            let m = text::parse_sysctl(&read(p)?);
            if m.is_empty() {
                return Err(Error::no_data(p, Format::Sysctl));
            }
            e.sysctl.extend(m);
        }
        if let Some(p) = &a.tcp_metrics {
            let (m, skipped) = text::parse_tcp_metrics(&read(p)?);
            if !skipped.is_empty() {
                e.notes.push(format!("{}: {} lines skipped", p.display(), skipped.len()));
            }
            e.tcp_metrics.extend(m);
        }
        if let Some(p) = &a.nstat {
            let (c, skipped) = text::parse_counters(&read(p)?);
            if c.is_empty() {
                return Err(Error::no_data(p, Format::Counters));
            }
            if skipped > 0 {
                e.notes.push(format!("{}: {skipped} lines not mapped to a counter", p.display()));
            }
            e.counters = c;
        }
        let mut events: Vec<TraceEvent> = Vec::new();
        for p in &trace_files {
            let (v, bad) = trace::read_jsonl(&read(p)?);
            if bad > 0 {
                e.notes.push(format!("{}: {bad} lines are not trace events", p.display()));
            }
            events.extend(v);
        }
        e.traces = trace::summarize(&events);
        Ok(e)
    }
}

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
