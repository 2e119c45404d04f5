//! A sample series per connection (from `tcpwhy live`, `ss` text or a lab
//! run), cut into intervals between consecutive samples, each attributed to
//! one limit, and a diagnosis per connection.
//!
//! The attribution uses the kernel's own clocks when it has them (4.10+):
//! of the time the socket was busy sending (`tcpi_busy_time`), how much it
//! spent blocked by the peer's receive window (`tcpi_rwnd_limited`) or by
//! its own send buffer (`tcpi_sndbuf_limited`). The rest of the busy time
//! is cwnd-limited when the packets in flight reach cwnd, slow start while
//! cwnd < ssthresh, otherwise path/pacing. Time not busy while data was
//! still written is the sending application; no data moved is idle.
//! Without those counters (older kernels, a single snapshot) it falls back
//! to one snapshot's state: in flight vs cwnd, Send-Q vs snd_wnd,
//! `app_limited`.

use serde::{Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use tcpwhy_core::Limit;
use tcpwhy_kernel::SocketSample;

use tcpwhy_core::units::{fmt_bytes, fmt_rate};

/// A connection's primary limit as its local socket sees it: one of the
/// limit states `tcpwhy diagnose` uses, or, when the local end only
/// receives, none of its own (its send limits say nothing; the sending
/// end's socket has the answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Primary {
    Limit(Limit),
    ReceiverSide,
}

impl Primary {
    /// The name as the JSON and the text write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Primary::Limit(l) => l.as_str(),
            Primary::ReceiverSide => "receiver_side",
        }
    }
}

impl fmt::Display for Primary {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl Serialize for Primary {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One connection's samples, in time order, seen from its local end.
#[derive(Debug, Clone)]
pub struct Series {
    pub local: SocketAddr,
    pub peer: SocketAddr,
    pub samples: Vec<SocketSample>,
}

/// Group samples by (local, peer), sorted by time. A new connection with
/// the same 4-tuple (cookie changes, or bytes counters go backwards)
/// starts a new series.
pub fn group(samples: &[SocketSample]) -> Vec<Series> {
    let mut map: BTreeMap<(SocketAddr, SocketAddr, usize), Series> = BTreeMap::new();
    let mut generation: BTreeMap<(SocketAddr, SocketAddr), (usize, u64, u64)> = BTreeMap::new();
    let mut sorted: Vec<&SocketSample> = samples.iter().collect();
    sorted.sort_by_key(|s| s.mono_ns);
    for s in sorted {
        let key = (s.src, s.dst);
        let acked = s.tcp_info.and_then(|t| t.bytes_acked).unwrap_or(0);
        let g = generation.entry(key).or_insert((0, s.cookie, acked));
        if (s.cookie != 0 && g.1 != 0 && s.cookie != g.1) || acked < g.2 {
            g.0 += 1;
        }
        g.1 = s.cookie;
        g.2 = acked;
        let gen = g.0;
        map.entry((s.src, s.dst, gen))
            .or_insert_with(|| Series {
                local: s.src,
                peer: s.dst,
                samples: Vec::new(),
            })
            .samples
            .push(s.clone());
    }
    map.into_values().collect()
}

/// The send buffer is the limit: it is full, yet everything in it is
/// already in flight (nothing unsent waits behind a window), so the
/// sender could send more if the buffer were larger. A full buffer with
/// unsent data only says the application writes faster than the real limit.
pub fn sndbuf_bound(s: &SocketSample) -> bool {
    let (Some(t), Some(m)) = (s.tcp_info, s.skmem) else { return false };
    let mss = t.snd_mss.max(1) as u64;
    let notsent = t.notsent_bytes.unwrap_or(0) as u64;
    let unacked_bytes = (s.wqueue as u64).saturating_sub(notsent);
    m.sndbuf > 0
        && m.wmem_queued as u64 * 100 >= m.sndbuf as u64 * 90
        && notsent < 2 * mss
        && (t.packets_in_flight() as u64) + 1 < t.snd_cwnd as u64
        && t.snd_wnd.is_none_or(|w| unacked_bytes + mss < w as u64)
}

/// The limit of one sample taken alone.
pub fn snapshot_limit(s: &SocketSample) -> Limit {
    let Some(t) = s.tcp_info else { return Limit::Idle };
    let mss = t.snd_mss.max(1) as u64;
    let inflight = t.packets_in_flight() as u64;
    let notsent = t.notsent_bytes.unwrap_or(0) as u64;
    let unacked_bytes = (s.wqueue as u64).saturating_sub(notsent);
    if t.unacked == 0 && notsent == 0 && s.wqueue == 0 {
        return Limit::Idle;
    }
    if let Some(w) = t.snd_wnd {
        // Data waits while most of the peer's window is in flight (the
        // window is only ever filled to within a few segments).
        if notsent > 0 && (unacked_bytes + 2 * mss >= w as u64 || unacked_bytes * 4 >= w as u64 * 3) && inflight < t.snd_cwnd as u64 {
            return Limit::ReceiverWindow;
        }
    }
    if sndbuf_bound(s) {
        return Limit::SendBuffer;
    }
    if inflight + 1 >= t.snd_cwnd as u64 {
        return if t.snd_cwnd < t.snd_ssthresh { Limit::SlowStart } else { Limit::CongestionWindow };
    }
    if t.delivery_rate_app_limited || notsent == 0 {
        return Limit::SenderApplication;
    }
    Limit::BottleneckLink
}

/// One interval between two samples.
#[derive(Debug, Clone, Serialize)]
pub struct Interval {
    pub start_s: f64,
    pub end_s: f64,
    /// Payload bytes acknowledged by the peer in the interval.
    pub acked_bytes: u64,
    /// Payload bytes received in the interval.
    pub received_bytes: u64,
    pub state: Limit,
    /// Share of the interval the kernel counted busy / rwnd / sndbuf limited
    /// (None without those counters).
    pub busy: Option<f64>,
    pub rwnd: Option<f64>,
    pub sndbuf: Option<f64>,
    pub retrans_segs: u32,
}

fn delta(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    Some(b?.saturating_sub(a?))
}

/// Attribute the interval from sample `a` to sample `b`.
pub fn interval(a: &SocketSample, b: &SocketSample, t0: u64) -> Interval {
    let dt_ns = b.mono_ns.saturating_sub(a.mono_ns).max(1);
    let dt_us = dt_ns as f64 / 1e3;
    let (ta, tb) = (a.tcp_info.unwrap_or_default(), b.tcp_info.unwrap_or_default());
    let acked = delta(ta.bytes_acked, tb.bytes_acked).unwrap_or(0);
    let received = delta(ta.bytes_received, tb.bytes_received).unwrap_or(0);
    let busy = delta(ta.busy_time, tb.busy_time);
    let rwnd = delta(ta.rwnd_limited, tb.rwnd_limited);
    let sndbuf = delta(ta.sndbuf_limited, tb.sndbuf_limited);
    let share = |x: Option<u64>| x.map(|v| (v as f64 / dt_us).min(1.0));
    let retrans = tb.total_retrans.saturating_sub(ta.total_retrans);
    let sending = acked > 0 || tb.unacked > 0 || b.wqueue > 0;
    let state = if !sending {
        Limit::Idle
    } else if let (Some(bz), Some(rw), Some(sb)) = (busy, rwnd, sndbuf) {
        let bzs = bz as f64 / dt_us;
        if rw as f64 >= 0.5 * bz as f64 && rw > 0 {
            Limit::ReceiverWindow
        } else if sb as f64 >= 0.5 * bz as f64 && sb > 0 {
            Limit::SendBuffer
        } else if bzs < 0.5 && b.wqueue == 0 {
            if acked == 0 {
                Limit::Idle
            } else {
                Limit::SenderApplication
            }
        } else {
            match snapshot_limit(b) {
                Limit::ReceiverWindow | Limit::SendBuffer => Limit::CongestionWindow,
                s => s,
            }
        }
    } else {
        snapshot_limit(b)
    };
    Interval {
        start_s: a.mono_ns.saturating_sub(t0) as f64 / 1e9,
        end_s: b.mono_ns.saturating_sub(t0) as f64 / 1e9,
        acked_bytes: acked,
        received_bytes: received,
        state,
        busy: share(busy),
        rwnd: share(rwnd),
        sndbuf: share(sndbuf),
        retrans_segs: retrans,
    }
}

/// What limited one connection over the series.
#[derive(Debug, Clone, Serialize)]
pub struct ConnDiagnosis {
    pub local: String,
    pub peer: String,
    pub samples: usize,
    pub duration_s: f64,
    /// "sender" (local end sent the data), "receiver" or "idle".
    pub role: &'static str,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub rate_bps: Option<f64>,
    pub cong: Option<String>,
    pub rtt_min_ms: Option<f64>,
    pub rtt_median_ms: Option<f64>,
    pub cwnd_median: Option<u32>,
    pub cwnd_max: Option<u32>,
    pub ssthresh_min: Option<u32>,
    pub snd_wnd_max: Option<u32>,
    pub retrans_segs: u32,
    /// Send-Q and Recv-Q at the last sample, bytes.
    pub send_q: u32,
    pub recv_q: u32,
    /// State -> share of the observed time.
    pub limits: BTreeMap<Limit, f64>,
    pub primary: Primary,
    /// Sentences with the numbers behind the primary.
    pub evidence: Vec<String>,
    /// Kernel counters over the whole life of the socket (last sample):
    /// busy, rwnd-limited, sndbuf-limited shares.
    pub lifetime_rwnd_share: Option<f64>,
    pub lifetime_sndbuf_share: Option<f64>,
}

fn median<T: Copy + Ord>(mut v: Vec<T>) -> Option<T> {
    if v.is_empty() {
        return None;
    }
    v.sort();
    Some(v[v.len() / 2])
}

/// Streaming state of one connection: what a diagnosis needs, in bounded
/// memory (first and latest sample, time per limit state, a bounded
/// reservoir of RTT and cwnd values), so `tcpwhy live` can follow
/// thousands of sockets for hours.
#[derive(Debug, Clone)]
pub struct Tracker {
    pub first: SocketSample,
    pub last: SocketSample,
    pub samples: usize,
    /// State -> seconds.
    pub state_s: BTreeMap<Limit, f64>,
    /// The latest interval (for a live view).
    pub latest: Option<Interval>,
    rtts: Vec<u32>,
    cwnds: Vec<u32>,
    min_rtt: Option<u32>,
    ssthresh_min: Option<u32>,
    snd_wnd_max: Option<u32>,
    stride: usize,
}

const RESERVOIR: usize = 512;

impl Tracker {
    pub fn new(s: &SocketSample) -> Tracker {
        let mut t = Tracker {
            first: s.clone(),
            last: s.clone(),
            samples: 0,
            state_s: BTreeMap::new(),
            latest: None,
            rtts: Vec::new(),
            cwnds: Vec::new(),
            min_rtt: None,
            ssthresh_min: None,
            snd_wnd_max: None,
            stride: 1,
        };
        t.observe(s);
        t
    }

    fn observe(&mut self, s: &SocketSample) {
        self.samples += 1;
        let Some(t) = s.tcp_info else { return };
        if self.samples % self.stride == 0 {
            if t.rtt > 0 {
                self.rtts.push(t.rtt);
            }
            if t.snd_cwnd > 0 {
                self.cwnds.push(t.snd_cwnd);
            }
            if self.rtts.len() >= RESERVOIR || self.cwnds.len() >= RESERVOIR {
                // Halve the reservoir, sample half as often.
                self.rtts = self.rtts.iter().step_by(2).copied().collect();
                self.cwnds = self.cwnds.iter().step_by(2).copied().collect();
                self.stride *= 2;
            }
        }
        if let Some(m) = t.min_rtt.filter(|&m| m > 0) {
            self.min_rtt = Some(self.min_rtt.map_or(m, |x| x.min(m)));
        }
        if t.snd_ssthresh > 0 && t.snd_ssthresh < 1 << 30 {
            self.ssthresh_min = Some(self.ssthresh_min.map_or(t.snd_ssthresh, |x| x.min(t.snd_ssthresh)));
        }
        if let Some(w) = t.snd_wnd {
            self.snd_wnd_max = Some(self.snd_wnd_max.map_or(w, |x| x.max(w)));
        }
    }

    /// Add the next sample of this connection.
    pub fn push(&mut self, s: &SocketSample) {
        let iv = interval(&self.last, s, self.first.mono_ns);
        *self.state_s.entry(iv.state).or_insert(0.0) += iv.end_s - iv.start_s;
        self.latest = Some(iv);
        self.last = s.clone();
        self.observe(s);
    }

    pub fn finish(&self) -> ConnDiagnosis {
        finish(self)
    }
}

pub fn diagnose(series: &Series) -> ConnDiagnosis {
    let mut t = Tracker::new(&series.samples[0]);
    for s in &series.samples[1..] {
        t.push(s);
    }
    t.finish()
}

fn finish(tr: &Tracker) -> ConnDiagnosis {
    let first = &tr.first;
    let last = &tr.last;
    let n = tr.samples;
    let t0 = first.mono_ns;
    let lt = last.tcp_info.unwrap_or_default();
    let ft = first.tcp_info.unwrap_or_default();
    let acked = delta(ft.bytes_acked, lt.bytes_acked).unwrap_or(0);
    let received = delta(ft.bytes_received, lt.bytes_received).unwrap_or(0);
    let duration_s = last.mono_ns.saturating_sub(t0) as f64 / 1e9;
    let mut limits = tr.state_s.clone();
    if n == 1 {
        limits.insert(snapshot_limit(first), 1.0);
    } else if duration_s > 0.0 {
        for v in limits.values_mut() {
            *v /= duration_s;
        }
    }
    // Lifetime counters (from the connection's start).
    let lifetime = |x: Option<u64>| match (x, lt.busy_time) {
        (Some(v), Some(b)) if b > 0 => Some(v as f64 / b as f64),
        _ => None,
    };
    let lifetime_rwnd_share = lifetime(lt.rwnd_limited);
    let lifetime_sndbuf_share = lifetime(lt.sndbuf_limited);
    let role = role_of(tr, acked, received);
    let primary = primary_limit(&limits, role, n, lifetime_rwnd_share, lifetime_sndbuf_share);
    let rtts = tr.rtts.clone();
    let cwnds = tr.cwnds.clone();
    let rate_bps = if n > 1 && duration_s > 0.0 {
        Some(acked.max(received) as f64 * 8.0 / duration_s)
    } else {
        lt.delivery_rate.map(|r| r as f64 * 8.0)
    };
    let evidence = primary_evidence(tr, primary, received, lifetime_rwnd_share, lifetime_sndbuf_share);
    ConnDiagnosis {
        local: last.src.to_string(),
        peer: last.dst.to_string(),
        samples: n,
        duration_s,
        role,
        bytes_acked: acked,
        bytes_received: received,
        rate_bps,
        cong: last.cong_name().map(str::to_string),
        rtt_min_ms: tr.min_rtt.map(|r| r as f64 / 1e3),
        rtt_median_ms: median(rtts).map(|r| r as f64 / 1e3),
        cwnd_median: median(cwnds.clone()),
        cwnd_max: cwnds.iter().copied().max(),
        ssthresh_min: tr.ssthresh_min,
        snd_wnd_max: tr.snd_wnd_max,
        retrans_segs: lt.total_retrans.saturating_sub(if n > 1 { ft.total_retrans } else { 0 }),
        send_q: last.wqueue,
        recv_q: last.rqueue,
        limits,
        primary,
        evidence,
        lifetime_rwnd_share,
        lifetime_sndbuf_share,
    }
}

/// Which way the data went: "sender", "receiver" or "idle", from the byte
/// counters over the series (a single snapshot: over the socket's life).
fn role_of(tr: &Tracker, acked: u64, received: u64) -> &'static str {
    let n = tr.samples;
    let last = &tr.last;
    let lt = last.tcp_info.unwrap_or_default();
    if acked > received && acked > 0 || (n == 1 && lt.bytes_acked.unwrap_or(0) > lt.bytes_received.unwrap_or(0) + 1) {
        "sender"
    } else if received > 0 || (n == 1 && lt.bytes_received.unwrap_or(0) > 0) {
        "receiver"
    } else if n == 1 && lt.bytes_acked.is_none() && (lt.unacked > 0 || last.wqueue > 0) {
        // Old ss without byte counters: data in flight or queued.
        "sender"
    } else {
        "idle"
    }
}

/// The primary limit: the state that took most of the non-idle time, unless
/// the local end only receives, or a single snapshot's lifetime counters say
/// the receive window or the send buffer limited at least half the busy time.
fn primary_limit(
    limits: &BTreeMap<Limit, f64>,
    role: &str,
    n: usize,
    lifetime_rwnd_share: Option<f64>,
    lifetime_sndbuf_share: Option<f64>,
) -> Primary {
    let mut primary = Primary::Limit(
        limits
            .iter()
            .filter(|(k, _)| **k != Limit::Idle)
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(k, _)| *k)
            .unwrap_or(Limit::Idle),
    );
    if role == "receiver" {
        // The local end only receives: its own send limits say nothing.
        primary = Primary::ReceiverSide;
    } else if n == 1 {
        // A single snapshot: prefer the kernel's lifetime counters.
        if lifetime_rwnd_share.is_some_and(|x| x >= 0.5) {
            primary = Primary::Limit(Limit::ReceiverWindow);
        } else if lifetime_sndbuf_share.is_some_and(|x| x >= 0.5) {
            primary = Primary::Limit(Limit::SendBuffer);
        }
    }
    primary
}

/// The sentences with the numbers behind `primary`: the kernel's limited
/// shares, the window or buffer sizes and what they cap, cwnd and
/// retransmissions, or what the receiving end saw.
fn primary_evidence(
    tr: &Tracker,
    primary: Primary,
    received: u64,
    lifetime_rwnd_share: Option<f64>,
    lifetime_sndbuf_share: Option<f64>,
) -> Vec<String> {
    let last = &tr.last;
    let n = tr.samples;
    let lt = last.tcp_info.unwrap_or_default();
    let ft = tr.first.tcp_info.unwrap_or_default();
    let (rtts, cwnds) = (&tr.rtts, &tr.cwnds);
    let mut evidence = Vec::new();
    let total_busy = delta(ft.busy_time, lt.busy_time);
    match primary {
        Primary::Limit(Limit::ReceiverWindow) => {
            let w = tr.snd_wnd_max;
            let rtt = median(rtts.clone()).unwrap_or(0) as f64 / 1e6;
            let share = if n > 1 {
                match (total_busy, delta(ft.rwnd_limited, lt.rwnd_limited)) {
                    (Some(b), Some(r)) if b > 0 => Some(r as f64 / b as f64),
                    _ => None,
                }
            } else {
                lifetime_rwnd_share
            };
            let mut t = String::from("the kernel counted the socket limited by the peer's receive window");
            if let Some(x) = share {
                t += &format!(" {:.0}% of its busy time (tcpi_rwnd_limited)", x * 100.0);
            }
            if let Some(w) = w {
                t += &format!("; the peer advertised at most {}", fmt_bytes(w as f64));
                if rtt > 0.0 {
                    t += &format!(
                        ", a ceiling of {} at {:.2} ms",
                        fmt_rate(w as f64 * 8.0 / rtt),
                        rtt * 1e3
                    );
                }
            }
            evidence.push(t);
        }
        Primary::Limit(Limit::SendBuffer) => {
            let mut t = String::from("the kernel counted the socket limited by its own send buffer");
            if let Some(x) = lifetime_sndbuf_share {
                t += &format!(" ({:.0}% of its busy time over its life, tcpi_sndbuf_limited)", x * 100.0);
            }
            if let Some(m) = last.skmem {
                t += &format!(
                    "; Send-Q {} with {} queued against a send buffer of {}",
                    fmt_bytes(last.wqueue as f64),
                    fmt_bytes(m.wmem_queued as f64),
                    fmt_bytes(m.sndbuf as f64)
                );
            }
            evidence.push(t);
        }
        Primary::Limit(Limit::CongestionWindow | Limit::SlowStart) => {
            evidence.push(format!(
                "packets in flight reached cwnd (median {} segments{}){}",
                median(cwnds.clone()).unwrap_or(0),
                tr.ssthresh_min.map(|x| format!(", ssthresh {x}")).unwrap_or_default(),
                if lt.total_retrans > ft.total_retrans {
                    format!("; {} segments retransmitted", lt.total_retrans - ft.total_retrans)
                } else {
                    String::new()
                }
            ));
        }
        Primary::Limit(Limit::SenderApplication) => evidence.push(
            "the socket was often not busy and had nothing queued: the sending application did not write fast enough".into(),
        ),
        Primary::ReceiverSide => {
            let mut t = format!("this end received {}", fmt_bytes(received.max(lt.bytes_received.unwrap_or(0)) as f64));
            if let Some(m) = last.skmem {
                t += &format!(
                    "; Recv-Q {} of a receive buffer of {}",
                    fmt_bytes(last.rqueue as f64),
                    fmt_bytes(m.rcvbuf as f64)
                );
            }
            t += "; diagnose the sending end for its limit";
            evidence.push(t);
        }
        _ => {}
    }
    evidence
}

/// The paragraph for one connection.
pub fn render(d: &ConnDiagnosis) -> String {
    let mut out = format!("{} -> {}  ", d.local, d.peer);
    if d.samples == 1 {
        out += &format!(
            "one snapshot, Send-Q {}, Recv-Q {}",
            fmt_bytes(d.send_q as f64),
            fmt_bytes(d.recv_q as f64)
        );
    } else {
        out += &format!(
            "{} samples over {:.1} s, {}",
            d.samples,
            d.duration_s,
            match d.role {
                "sender" => format!("sent {}", fmt_bytes(d.bytes_acked as f64)),
                "receiver" => format!("received {}", fmt_bytes(d.bytes_received as f64)),
                _ => "no data moved".into(),
            }
        );
    }
    if let Some(r) = d.rate_bps {
        if d.samples == 1 {
            out += &format!(" (last delivery rate {})", fmt_rate(r));
        } else {
            out += &format!(" ({})", fmt_rate(r));
        }
    }
    out += "\n  ";
    let mut facts = Vec::new();
    if let Some(c) = &d.cong {
        facts.push(c.clone());
    }
    if let Some(r) = d.rtt_median_ms {
        facts.push(format!("RTT {r:.2} ms"));
    }
    if let Some(r) = d.rtt_min_ms {
        facts.push(format!("min RTT {r:.2} ms"));
    }
    if let (Some(m), Some(x)) = (d.cwnd_median, d.cwnd_max) {
        facts.push(format!("cwnd median {m} max {x}"));
    }
    if let Some(s) = d.ssthresh_min {
        facts.push(format!("ssthresh {s}"));
    }
    if let Some(w) = d.snd_wnd_max {
        facts.push(format!("peer window up to {}", fmt_bytes(w as f64)));
    }
    if d.retrans_segs > 0 {
        facts.push(format!("{} retransmitted segments", d.retrans_segs));
    }
    out += &facts.join(", ");
    out += &format!("\n  limit: {}", d.primary);
    let shares: Vec<String> = d
        .limits
        .iter()
        .filter(|(_, v)| **v >= 0.005)
        .map(|(k, v)| format!("{k} {:.0}%", v * 100.0))
        .collect();
    if !shares.is_empty() && d.samples > 1 {
        out += &format!("  (time: {})", shares.join(", "));
    }
    for e in &d.evidence {
        out += &format!("\n  {e}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t_ms: u64, acked: u64, busy_ms: u64, rwnd_ms: u64) -> SocketSample {
        let text = format!(
            "ESTAB 0 100000 10.0.0.1:40000 10.0.0.2:5201\n\t cubic rtt:10/1 mss:1448 cwnd:100 bytes_acked:{acked} unacked:20 busy:{busy_ms}ms rwnd_limited:{rwnd_ms}ms sndbuf_limited:0ms notsent:50000 snd_wnd:30000\n"
        );
        let mut s = crate::ss::parse(&text, 0.0).samples.remove(0);
        s.mono_ns = t_ms * 1_000_000;
        s
    }

    #[test]
    fn rwnd_limited_series() {
        let v = vec![sample(0, 1, 0, 0), sample(100, 300_000, 100, 90), sample(200, 600_000, 200, 180)];
        let g = group(&v);
        assert_eq!(g.len(), 1);
        let d = diagnose(&g[0]);
        assert_eq!(d.primary, Primary::Limit(Limit::ReceiverWindow), "{d:?}");
        assert_eq!(d.role, "sender");
        assert!((d.rate_bps.unwrap() - 599_999.0 * 8.0 / 0.2).abs() < 1.0);
        assert!(render(&d).contains("90% of its busy time"), "{}", render(&d));
    }

    #[test]
    fn cwnd_limited_series() {
        let mut v = vec![sample(0, 1, 0, 0), sample(100, 300_000, 100, 0)];
        for s in &mut v {
            let t = s.tcp_info.as_mut().unwrap();
            t.unacked = 100;
            t.snd_ssthresh = 50;
            t.snd_wnd = Some(10_000_000);
        }
        let d = diagnose(&group(&v)[0]);
        assert_eq!(d.primary, Primary::Limit(Limit::CongestionWindow), "{d:?}");
    }
}
