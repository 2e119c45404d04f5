//! Ground truth of a lab run: the kernel's own numbers for the transfer,
//! flattened into named metrics that scenario expectations test.
//!
//! Sources, in order of authority: the final TCP_INFO of each socket (taken
//! by the agents after the closing handshake), the sock_diag samples of both
//! ends, the tcp_probe trace, the emulator's counters, the agents' timings.

use crate::link::DirectionStats;
use crate::scenario::Scenario;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{self, BufRead};
use std::path::Path;
use tcpwhy_core::Cause;
use tcpwhy_kernel::{TcpInfo, TraceEvent};
use tcpwhy_traffic::{ConnRole, Report, RequestTiming, ServedRequest, TrafficSpec};

pub const SCHEMA: &str = "tcpwhy.lab.truth/1";

pub struct Inputs<'a> {
    pub scenario: &'a Scenario,
    pub spec: &'a TrafficSpec,
    pub client: &'a Report,
    pub server: &'a Report,
    pub link_up: &'a DirectionStats,
    pub link_down: &'a DirectionStats,
    pub out: &'a Path,
    pub trace_events: Option<Vec<TraceEvent>>,
    pub capture_notes: [String; 2],
    pub sample_counts: Vec<u64>,
    pub kernel: String,
    pub elapsed_s: f64,
    pub server_port: u16,
    /// CPU time the hypervisor took while the traffic ran (run::steal_ms).
    pub steal_ms: Option<f64>,
}

/// The kernel's view of one connection at its end.
#[derive(Serialize)]
pub struct ConnTruth {
    pub client: String,
    pub server: String,
    /// Which end sent the data (or the responses).
    pub sender: &'static str,
    pub busy_time_us: Option<u64>,
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
    pub rwnd_limited_share: Option<f64>,
    pub sndbuf_limited_share: Option<f64>,
    pub retransmits: u32,
    pub bytes_retrans: Option<u64>,
    pub final_cwnd: u32,
    pub final_ssthresh: u32,
    pub sender_tcp_info: TcpInfo,
    pub receiver_tcp_info: TcpInfo,
}

#[derive(Serialize)]
pub struct Check {
    pub metric: String,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub value: Option<f64>,
    pub ok: bool,
    pub why: String,
}

#[derive(Serialize)]
pub struct Truth {
    pub schema: &'static str,
    pub scenario: String,
    pub title: String,
    pub case: String,
    /// The cause the scenario was built to show.
    pub cause: Cause,
    pub kernel: String,
    pub parameters: serde_json::Value,
    pub client_address: String,
    pub server_address: String,
    /// "server" or "client": the end that sent the data.
    pub sender: &'static str,
    /// Application goodput at the receiver, bits/s.
    pub goodput_bps: Option<f64>,
    /// The slowest configured rate on the data path (bottleneck or policer).
    pub path_rate_bps: Option<u64>,
    pub connections: Vec<ConnTruth>,
    pub link: BTreeMap<&'static str, DirectionStats>,
    pub metrics: BTreeMap<String, f64>,
    pub expectations: Vec<Check>,
    /// All expectations hold.
    pub ok: bool,
    pub files: BTreeMap<&'static str, String>,
    pub notes: Vec<String>,
    pub elapsed_s: f64,
}

fn info(hex: &str) -> TcpInfo {
    TcpInfo::from_bytes(&tcpwhy_traffic::from_hex(hex).unwrap_or_default())
}

/// `flow{k}.*`: one flow's numbers when there are several.
fn flow_metrics(m: &mut BTreeMap<String, f64>, k: u32, si: &TcpInfo, goodput: Option<f64>) {
    if let Some(x) = share(si.rwnd_limited, si.busy_time) {
        m.insert(format!("flow{k}.rwnd_limited_share"), x);
    }
    if let Some(g) = goodput {
        m.insert(format!("flow{k}.goodput_bps"), g);
    }
    m.insert(format!("flow{k}.retransmits"), si.total_retrans as f64);
}

fn share(part: Option<u64>, whole: Option<u64>) -> Option<f64> {
    match (part, whole) {
        (Some(p), Some(w)) if w > 0 => Some(p as f64 / w as f64),
        _ => None,
    }
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    Some(v[v.len() / 2])
}

/// The few sample fields the metrics need.
#[derive(serde::Deserialize)]
struct Sample {
    mono_ns: u64,
    src: std::net::SocketAddr,
    rqueue: u32,
    wqueue: u32,
    tcp_info: Option<SampleInfo>,
    #[serde(default)]
    skmem: Option<SampleMem>,
}

#[derive(serde::Deserialize)]
struct SampleMem {
    sndbuf: u32,
    wmem_queued: u32,
}

#[derive(serde::Deserialize)]
struct SampleInfo {
    state: u8,
    snd_cwnd: u32,
    snd_ssthresh: u32,
    snd_mss: u32,
    unacked: u32,
    rtt: u32,
    #[serde(default)]
    snd_wnd: Option<u32>,
    #[serde(default)]
    delivery_rate_app_limited: bool,
}

fn read_samples(path: &Path) -> io::Result<Vec<Sample>> {
    let f = std::fs::File::open(path)?;
    let mut v = Vec::new();
    for line in io::BufReader::new(f).lines() {
        let line = line?;
        if let Ok(s) = serde_json::from_str::<Sample>(&line) {
            v.push(s);
        }
    }
    Ok(v)
}

/// The kernel's view of each sending connection, from the final TCP_INFO of both ends.
fn connection_truths(
    m: &mut BTreeMap<String, f64>,
    snd_rep: &Report,
    rcv_rep: &Report,
    server_sends: bool,
    sender: &'static str,
) -> Vec<ConnTruth> {
    let mut conns = Vec::new();
    for s in &snd_rep.connections {
        if !matches!(s.role, ConnRole::Sender | ConnRole::Responder) {
            continue;
        }
        let peer = rcv_rep.connections.iter().find(|r| r.local == s.remote && r.remote == s.local);
        let si = info(&s.tcp_info_hex);
        let ri = peer.map(|r| info(&r.tcp_info_hex)).unwrap_or_else(|| TcpInfo::from_bytes(&[]));
        let (client, server) = if server_sends { (s.remote, s.local) } else { (s.local, s.remote) };
        // per flow, by the order the client opened it (client_connections' index)
        let client_index = if server_sends { peer.map(|p| p.index) } else { Some(s.index) };
        if let (Some(k), true) = (client_index, snd_rep.connections.len() > 1) {
            flow_metrics(m, k, &si, peer.and_then(|p| p.goodput_bps));
        }
        conns.push(ConnTruth {
            client: client.to_string(),
            server: server.to_string(),
            sender,
            busy_time_us: si.busy_time,
            rwnd_limited_us: si.rwnd_limited,
            sndbuf_limited_us: si.sndbuf_limited,
            rwnd_limited_share: share(si.rwnd_limited, si.busy_time),
            sndbuf_limited_share: share(si.sndbuf_limited, si.busy_time),
            retransmits: si.total_retrans,
            bytes_retrans: si.bytes_retrans,
            final_cwnd: si.snd_cwnd,
            final_ssthresh: si.snd_ssthresh,
            sender_tcp_info: si,
            receiver_tcp_info: ri,
        });
    }
    conns
}

/// `sender.*`, `receiver.*` and `connections`: the connections' TCP_INFO, summed or from the first.
fn sender_metrics(m: &mut BTreeMap<String, f64>, conns: &[ConnTruth], snd_rep: &Report) {
    let sum = |f: &dyn Fn(&ConnTruth) -> Option<u64>| -> Option<u64> {
        let v: Vec<u64> = conns.iter().filter_map(f).collect();
        if v.is_empty() { None } else { Some(v.iter().sum()) }
    };
    let busy = sum(&|c| c.busy_time_us);
    let rwnd = sum(&|c| c.rwnd_limited_us);
    let sndbuf = sum(&|c| c.sndbuf_limited_us);
    if let Some(b) = busy {
        m.insert("sender.busy_time_us".into(), b as f64);
    }
    if let Some(x) = share(rwnd, busy) {
        m.insert("sender.rwnd_limited_share".into(), x);
    }
    if let Some(x) = share(sndbuf, busy) {
        m.insert("sender.sndbuf_limited_share".into(), x);
    }
    if let (Some(b), Some(r), Some(s)) = (busy, rwnd, sndbuf) {
        if b > 0 {
            m.insert("sender.cwnd_limited_share".into(), b.saturating_sub(r + s) as f64 / b as f64);
        }
    }
    // busy time against the connections' lifetimes (idle = application)
    let life: f64 = snd_rep
        .connections
        .iter()
        .filter(|c| matches!(c.role, ConnRole::Sender | ConnRole::Responder))
        .map(|c| c.end.secs_since(&c.connected))
        .sum();
    if let Some(b) = busy {
        if life > 0.0 {
            m.insert("sender.busy_share".into(), (b as f64 / 1e6 / life).min(1.0));
        }
    }
    let total_retrans: u32 = conns.iter().map(|c| c.retransmits).sum();
    m.insert("sender.total_retrans".into(), total_retrans as f64);
    if let Some(b) = sum(&|c| c.bytes_retrans) {
        m.insert("sender.bytes_retrans".into(), b as f64);
        if let Some(sent) = sum(&|c| c.sender_tcp_info.bytes_sent) {
            if sent > 0 {
                m.insert("sender.retrans_share".into(), b as f64 / sent as f64);
            }
        }
    }
    if let Some(d) = sum(&|c| c.sender_tcp_info.dsack_dups.map(u64::from)) {
        m.insert("sender.dsack_dups".into(), d as f64);
    }
    if let Some(d) = sum(&|c| c.sender_tcp_info.total_rto.map(u64::from)) {
        m.insert("sender.total_rto".into(), d as f64);
    }
    m.insert("connections".into(), conns.len() as f64);
    if let Some(c) = conns.first() {
        let si = &c.sender_tcp_info;
        m.insert("sender.final_cwnd".into(), si.snd_cwnd as f64);
        m.insert("sender.final_ssthresh".into(), si.snd_ssthresh.min(1 << 20) as f64);
        m.insert("sender.snd_wscale".into(), si.snd_wscale as f64);
        m.insert("sender.rcv_wscale".into(), si.rcv_wscale as f64);
        m.insert("sender.snd_mss".into(), si.snd_mss as f64);
        if let Some(r) = si.min_rtt {
            m.insert("sender.min_rtt_ms".into(), r as f64 / 1000.0);
        }
        m.insert("receiver.rcv_wscale".into(), c.receiver_tcp_info.rcv_wscale as f64);
        m.insert("receiver.snd_wscale".into(), c.receiver_tcp_info.snd_wscale as f64);
    }
    m.insert("sender.max_final_cwnd".into(), conns.iter().map(|c| c.final_cwnd).max().unwrap_or(0) as f64);
}

/// Application goodput at the receiver, bits/s (reqresp: response bodies over the requests' times).
fn goodput_bps(spec: &TrafficSpec, client: &Report, rcv_rep: &Report) -> Option<f64> {
    match spec.kind {
        tcpwhy_traffic::Kind::Reqresp => {
            let bytes: u64 = client.requests.iter().map(|r| r.response_body_bytes).sum();
            let t: f64 = client.requests.iter().map(|r| r.last_byte_secs_since(&r.request_start)).sum();
            if t > 0.0 { Some(bytes as f64 * 8.0 / t) } else { None }
        }
        _ => rcv_rep.goodput_bps,
    }
}

/// `samples.*`: the sock_diag samples of the sender and the receiver.
fn sample_metrics(
    m: &mut BTreeMap<String, f64>,
    out: &Path,
    spec: &TrafficSpec,
    port: u16,
    server_sends: bool,
) -> io::Result<()> {
    let (snd_file, rcv_file) = if server_sends {
        ("server.samples.jsonl", "client.samples.jsonl")
    } else {
        ("client.samples.jsonl", "server.samples.jsonl")
    };
    let is_sender_sock = |s: &Sample| (s.src.port() == port) == server_sends;
    let snd: Vec<Sample> = read_samples(&out.join(snd_file))?.into_iter().filter(|s| is_sender_sock(s)).collect();
    let rcv: Vec<Sample> = read_samples(&out.join(rcv_file))?.into_iter().filter(|s| !is_sender_sock(s)).collect();
    m.insert("samples.sender.count".into(), snd.len() as f64);
    let est: Vec<&SampleInfo> = snd.iter().filter_map(|s| s.tcp_info.as_ref()).filter(|t| t.state == 1).collect();
    sndbuf_full_metric(m, &snd);
    if !est.is_empty() {
        established_sample_metrics(m, &est, spec);
    }
    m.insert("samples.sender.max_wqueue".into(), snd.iter().map(|s| s.wqueue).max().unwrap_or(0) as f64);
    m.insert("samples.receiver.max_rqueue".into(), rcv.iter().map(|s| s.rqueue).max().unwrap_or(0) as f64);
    m.insert("samples.receiver.count".into(), rcv.len() as f64);
    let _ = snd.first().map(|s| s.mono_ns);
    Ok(())
}

/// `samples.sender.sndbuf_full_share`: how often the send buffer alone held the sender back.
fn sndbuf_full_metric(m: &mut BTreeMap<String, f64>, snd: &[Sample]) {
    // send buffer full (socket memory at its limit) while neither the
    // peer's window nor cwnd is what stops the sender
    let (mut sb_busy, mut sb_full) = (0u64, 0u64);
    for s in snd {
        if let (Some(t), Some(mem)) = (&s.tcp_info, &s.skmem) {
            if t.state != 1 || t.unacked == 0 {
                continue;
            }
            sb_busy += 1;
            let inflight = t.unacked as u64 * t.snd_mss as u64;
            let below_wnd = t.snd_wnd.is_none_or(|w| inflight + 2 * (t.snd_mss as u64) < w as u64);
            if mem.wmem_queued as u64 * 10 >= mem.sndbuf as u64 * 9 && below_wnd && t.unacked + 2 < t.snd_cwnd {
                sb_full += 1;
            }
        }
    }
    if sb_busy > 0 {
        m.insert("samples.sender.sndbuf_full_share".into(), sb_full as f64 / sb_busy as f64);
    }
}

/// `samples.sender.*` from the sender's established samples (`est` not empty): cwnd, RTT, in flight, windows.
fn established_sample_metrics(m: &mut BTreeMap<String, f64>, est: &[&SampleInfo], spec: &TrafficSpec) {
    let busy: Vec<&&SampleInfo> = est.iter().filter(|t| t.unacked > 0).collect();
    let n = busy.len().max(1) as f64;
    m.insert("samples.sender.max_cwnd".into(), est.iter().map(|t| t.snd_cwnd).max().unwrap() as f64);
    m.insert("samples.sender.min_ssthresh".into(), est.iter().map(|t| t.snd_ssthresh).min().unwrap().min(1 << 20) as f64);
    m.insert("samples.sender.max_rtt_ms".into(), est.iter().map(|t| t.rtt).max().unwrap() as f64 / 1000.0);
    let mut rtts: Vec<f64> = busy.iter().map(|t| t.rtt as f64 / 1000.0).collect();
    if let Some(x) = median(&mut rtts) {
        m.insert("samples.sender.median_rtt_ms".into(), x);
    }
    m.insert(
        "samples.sender.max_inflight_bytes".into(),
        est.iter().map(|t| t.unacked as u64 * t.snd_mss as u64).max().unwrap() as f64,
    );
    if spec.kind == tcpwhy_traffic::Kind::Appwindow {
        // in flight against the application's own window (any size)
        let w = spec.window_bytes.max(1) as f64;
        m.insert(
            "samples.sender.max_inflight_app_windows".into(),
            est.iter().map(|t| t.unacked as u64 * t.snd_mss as u64).max().unwrap() as f64 / w,
        );
        m.insert(
            "samples.sender.max_cwnd_app_windows".into(),
            est.iter().map(|t| t.snd_cwnd as u64 * t.snd_mss as u64).max().unwrap() as f64 / w,
        );
    }
    m.insert(
        "samples.sender.max_cwnd_bytes".into(),
        est.iter().map(|t| t.snd_cwnd as u64 * t.snd_mss as u64).max().unwrap() as f64,
    );
    if est.iter().any(|t| t.snd_wnd.is_some()) {
        m.insert("samples.sender.max_snd_wnd".into(), est.iter().filter_map(|t| t.snd_wnd).max().unwrap() as f64);
        m.insert(
            "samples.sender.zero_window_share".into(),
            est.iter().filter(|t| t.snd_wnd == Some(0)).count() as f64 / est.len() as f64,
        );
    }
    // the window exhausted by the kernel's own state (in flight within
    // two segments of the peer's window), independent of the chrono
    let full = busy
        .iter()
        .filter(|t| t.snd_wnd.is_some_and(|w| (t.unacked as u64 + 2) * t.snd_mss as u64 >= w as u64))
        .count();
    m.insert("samples.sender.window_full_share".into(), full as f64 / n);
    m.insert("samples.sender.app_limited_share".into(), busy.iter().filter(|t| t.delivery_rate_app_limited).count() as f64 / n);
}

/// `requests.*`: the reqresp client's request times (to the kernel's arrival
/// timestamp of the last response byte), in ms and in base RTTs.
fn request_metrics(m: &mut BTreeMap<String, f64>, reqs: &[RequestTiming], base_rtt_ms: f64) {
    if reqs.is_empty() {
        return;
    }
    let ms: Vec<f64> = reqs
        .iter()
        .map(|r| r.last_byte_secs_since(r.connect_start.as_ref().unwrap_or(&r.request_start)) * 1000.0)
        .collect();
    m.insert("requests.count".into(), reqs.len() as f64);
    let mut ports: Vec<u16> = reqs.iter().map(|r| r.local_port).collect();
    ports.sort();
    ports.dedup();
    m.insert("requests.connections".into(), ports.len() as f64);
    m.insert("requests.first_ms".into(), ms[0]);
    let mut all = ms.clone();
    if let Some(x) = median(&mut all) {
        m.insert("requests.median_ms".into(), x);
        if base_rtt_ms > 0.0 {
            m.insert("requests.median_rtts".into(), x / base_rtt_ms);
        }
    }
    let mut rest = ms[1..].to_vec();
    if let Some(x) = median(&mut rest) {
        m.insert("requests.median_rest_ms".into(), x);
        if base_rtt_ms > 0.0 {
            m.insert("requests.median_rest_rtts".into(), x / base_rtt_ms);
        }
    }
}

/// `trace.*`: the sender's tcp_probe and retransmit events (cwnd, zero windows, restarts).
fn trace_metrics(m: &mut BTreeMap<String, f64>, ev: &[TraceEvent], served: &[ServedRequest], port: u16, server_sends: bool) {
    let probes: Vec<&TraceEvent> = ev
        .iter()
        .filter(|e| matches!(e, TraceEvent::Probe { .. }) && (e.ports().0 == port) == server_sends)
        .collect();
    m.insert("trace.probe_events".into(), probes.len() as f64);
    m.insert(
        "trace.retransmits".into(),
        ev.iter().filter(|e| matches!(e, TraceEvent::Retransmit { .. }) && (e.ports().0 == port) == server_sends).count() as f64,
    );
    let cwnd = |e: &TraceEvent| match e {
        TraceEvent::Probe { snd_cwnd, .. } => *snd_cwnd,
        _ => 0,
    };
    m.insert("trace.max_cwnd".into(), probes.iter().map(|e| cwnd(e)).max().unwrap_or(0) as f64);
    // zero windows as the sender's kernel took them in, segment by
    // segment (tcp_probe fires for every segment the sender receives):
    // independent of how often the sampler happened to look
    let wnd = |e: &TraceEvent| match e {
        TraceEvent::Probe { snd_wnd, .. } => Some(*snd_wnd),
        _ => None,
    };
    let wnds: Vec<u32> = probes.iter().filter_map(|e| wnd(e)).collect();
    m.insert("trace.zero_window_acks".into(), wnds.iter().filter(|&&w| w == 0).count() as f64);
    m.insert(
        "trace.zero_window_episodes".into(),
        wnds.iter().enumerate().filter(|&(k, &w)| w == 0 && (k == 0 || wnds[k - 1] != 0)).count() as f64,
    );
    // the cwnd each response after the first starts from: first ACK
    // processed by the responder after it started writing
    if !served.is_empty() {
        let mut starts: Vec<f64> = Vec::new();
        for s in served.iter().skip(1) {
            let t = s.response_start.monotonic_ns;
            if let Some(e) = probes.iter().find(|e| e.mono_ns() >= t && e.ports().1 == s.remote_port) {
                starts.push(cwnd(e) as f64);
            }
        }
        if let Some(x) = median(&mut starts) {
            m.insert("trace.restart_cwnd_median".into(), x);
        }
    }
}

/// `link.{up,down}.*`: the emulator's counters of each direction.
fn link_metrics(m: &mut BTreeMap<String, f64>, link_up: &DirectionStats, link_down: &DirectionStats) {
    for (dir, st) in [("up", link_up), ("down", link_down)] {
        if let serde_json::Value::Object(o) = serde_json::to_value(st).unwrap() {
            for (k, v) in o {
                if let Some(x) = v.as_f64() {
                    m.insert(format!("link.{dir}.{k}"), x);
                }
            }
        }
    }
}

/// `capture.{client,server}.dropped`: packets each tcpdump reported "dropped by kernel".
fn capture_metrics(m: &mut BTreeMap<String, f64>, capture_notes: &[String; 2]) {
    for (who, note) in ["client", "server"].iter().zip(capture_notes) {
        for line in note.lines().filter(|l| l.contains("dropped by kernel")) {
            if let Some(n) = line.split_whitespace().next().and_then(|x| x.parse::<f64>().ok()) {
                m.insert(format!("capture.{who}.dropped"), n);
            }
        }
    }
}

/// Each of the scenario's expectations tested against the metrics.
fn check_expectations(sc: &Scenario, m: &BTreeMap<String, f64>) -> Vec<Check> {
    let mut checks = Vec::new();
    for e in &sc.expect {
        let v = m.get(&e.metric).copied();
        let ok = v.is_some_and(|v| e.min.is_none_or(|lo| v >= lo) && e.max.is_none_or(|hi| v <= hi));
        checks.push(Check { metric: e.metric.clone(), min: e.min, max: e.max, value: v, ok, why: e.why.clone() });
    }
    checks
}

/// The run's files present in `out`, by what they hold.
fn present_files(out: &Path) -> BTreeMap<&'static str, String> {
    let mut files = BTreeMap::new();
    for (k, v) in [
        ("client_capture", "client.pcap"),
        ("server_capture", "server.pcap"),
        ("client_samples", "client.samples.jsonl"),
        ("server_samples", "server.samples.jsonl"),
        ("trace", "trace.jsonl"),
        ("client_sysctl", "client.sysctl.json"),
        ("server_sysctl", "server.sysctl.json"),
        ("client_report", "client.report.json"),
        ("server_report", "server.report.json"),
        ("link", "link.json"),
        ("scenario", "scenario.toml"),
    ] {
        if out.join(v).exists() {
            files.insert(k, v.to_string());
        }
    }
    files
}

pub fn build(i: Inputs) -> io::Result<Truth> {
    let sc = i.scenario;
    let port = i.server_port;
    let server_sends = i.spec.data_sender() == tcpwhy_traffic::End::Server;
    let sender = if server_sends { "server" } else { "client" };
    let (snd_rep, rcv_rep) = if server_sends { (i.server, i.client) } else { (i.client, i.server) };
    let mut m: BTreeMap<String, f64> = BTreeMap::new();
    let mut notes = Vec::new();

    // --- per connection, from the final TCP_INFO of both ends
    let conns = connection_truths(&mut m, snd_rep, rcv_rep, server_sends, sender);
    sender_metrics(&mut m, &conns, snd_rep);

    // --- goodput
    let goodput = goodput_bps(i.spec, i.client, rcv_rep);
    let path_rate = sc.path_rate_bps(server_sends);
    if let Some(g) = goodput {
        m.insert("goodput_bps".into(), g);
        if let Some(r) = path_rate {
            m.insert("goodput_share".into(), g / r as f64);
        }
    }
    let base_rtt_ms = (sc.direction(true).delay_us + sc.direction(false).delay_us) as f64 / 1000.0;
    m.insert("path.base_rtt_ms".into(), base_rtt_ms);

    // --- sock_diag samples of the sender and the receiver
    sample_metrics(&mut m, i.out, i.spec, port, server_sends)?;

    // --- requests
    request_metrics(&mut m, &i.client.requests, base_rtt_ms);

    // --- tcp_probe trace of the sender
    if let Some(ev) = &i.trace_events {
        trace_metrics(&mut m, ev, &i.server.served, port, server_sends);
    } else {
        notes.push("no tcp_probe trace (tracefs unavailable or capture.trace = false)".into());
    }

    // --- the emulator
    link_metrics(&mut m, i.link_up, i.link_down);
    capture_metrics(&mut m, &i.capture_notes);
    if let Some(st) = i.steal_ms {
        m.insert("machine.steal_ms".into(), st);
    }

    // --- expectations
    let checks = check_expectations(sc, &m);
    let ok = checks.iter().all(|c| c.ok);
    let files = present_files(i.out);
    let a = |r: &Report| r.connections.first().map(|c| c.local.ip().to_string()).unwrap_or_default();
    Ok(Truth {
        schema: SCHEMA,
        scenario: sc.name.clone(),
        title: sc.title.clone(),
        case: sc.case.clone(),
        cause: sc.cause,
        kernel: i.kernel,
        parameters: serde_json::to_value(sc).unwrap_or_default(),
        client_address: a(i.client),
        server_address: a(i.server),
        sender,
        goodput_bps: goodput,
        path_rate_bps: path_rate,
        connections: conns,
        link: BTreeMap::from([("up", i.link_up.clone()), ("down", i.link_down.clone())]),
        metrics: m,
        expectations: checks,
        ok,
        files,
        notes,
        elapsed_s: i.elapsed_s,
    })
}
