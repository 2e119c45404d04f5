//! From a direction's records to its diagnosis: states per interval, then
//! the root cause with its evidence, the fix and the what-if.

use crate::fixes;
use crate::limits::{build_intervals, Interval};
use crate::model::*;
use crate::policer::{self, PolicerVerdict};
use crate::record::{AckRec, ConnRecords, DataRec, DirRecords};
use crate::KernelRule;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use tcpwhy_core::units::{fmt_bytes, fmt_ms, fmt_rate};
use tcpwhy_core::Confidence;
use tcpwhy_core::{Cause, Limit};
use tcpwhy_flow::{CapturePoint, ConnectionSummary, DirectionSummary, Flags};

/// Directions with less new data than this are not diagnosed.
pub const MIN_BYTES: u64 = 16 * 1024;
const MIN_DATA_SEGMENTS: usize = 8;
/// At most this many intervals per direction (the width grows beyond).
const MAX_INTERVALS: i64 = 200_000;

#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    pub kernel: KernelRule,
    /// Path bandwidth the user knows (bit/s); otherwise estimated.
    pub bandwidth_bps: Option<f64>,
    /// RTT the user knows (ms), for the fix arithmetic.
    pub rtt_ms: Option<f64>,
}

pub fn diagnose_connection(
    cs: &ConnectionSummary,
    recs: Option<&ConnRecords>,
    opts: &Options,
) -> ConnectionDiagnosis {
    // Capture quality first: it decides what the verdicts may rest on.
    let capture_quality = crate::quality::assess(cs);
    let mut directions = Vec::new();
    if let Some(r) = recs {
        for d in 0..2 {
            if let Some(mut dd) = diagnose_direction(cs, d, &r.dirs[d], opts) {
                crate::quality::apply(&mut dd, &capture_quality);
                directions.push(dd);
            }
        }
    }
    ConnectionDiagnosis {
        id: ConnectionId {
            number: cs.id,
            a: Endpoint { addr: cs.a.addr.clone(), port: cs.a.port },
            b: Endpoint { addr: cs.b.addr.clone(), port: cs.b.port },
        },
        first_time: cs.first_time,
        duration_s: cs.duration_s,
        handshake_rtt_ms: cs.handshake_rtt_ms,
        capture_quality,
        directions,
    }
}

fn endpoint_str(addr: &str, port: u16) -> String {
    if addr.contains(':') {
        format!("[{addr}]:{port}")
    } else {
        format!("{addr}:{port}")
    }
}

fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    Some(sorted[i.min(sorted.len() - 1)])
}

/// The payload of a full-sized segment: the largest length that makes up at
/// least a tenth of the first data segments.
fn segment_size(data: &[DataRec], mss: Option<u16>) -> u32 {
    let mut counts: BTreeMap<u32, u32> = BTreeMap::new();
    let sample = &data[..data.len().min(4000)];
    for d in sample {
        *counts.entry(d.len).or_default() += 1;
    }
    let min_count = (sample.len() as u32 / 10).max(1);
    let common = counts.iter().rev().find(|(_, &c)| c >= min_count).map(|(&l, _)| l);
    match (common, mss) {
        // Super-segments (TSO/GRO): use the MSS less the usual options.
        (Some(l), Some(m)) if l > m as u32 => (m as u32).saturating_sub(12).max(536),
        (Some(l), _) => l.max(1),
        (None, Some(m)) => m as u32,
        (None, None) => 1448,
    }
}

/// Bottleneck rate from the spacing inside trains: at the sender, of the
/// ACKs (cumulative bytes acknowledged); at the receiver, of the data.
pub(crate) fn path_rate(points: &[(i64, i64)], base_rtt_ns: i64) -> Option<f64> {
    const K: usize = 16;
    if points.len() < K + 1 {
        return None;
    }
    let max_gap = (base_rtt_ns / 8).max(200_000);
    let mut rates = Vec::new();
    let mut i = 0;
    while i + K < points.len() {
        let w = &points[i..=i + K];
        let ok = w.windows(2).all(|p| p[1].0 - p[0].0 <= max_gap && p[1].1 >= p[0].1);
        let dt = w[K].0 - w[0].0;
        let db = w[K].1 - w[0].1;
        if ok && dt >= 200_000 && db > 0 {
            rates.push(db as f64 * 8.0 / (dt as f64 / 1e9));
            i += K;
        } else {
            i += 1;
        }
        if rates.len() > 20_000 {
            break;
        }
    }
    if rates.len() < 3 {
        return None;
    }
    rates.sort_by(f64::total_cmp);
    percentile(&rates, 0.5)
}

/// At the receiver, lost segments never arrive: put a stand-in for each at
/// the time the hole appeared, and mark the segments that later fill a hole
/// as retransmissions, so the loss pattern looks as it did at the sender
/// (shifted by the one-way delay).
fn as_sent(data: &[DataRec], smss: u32) -> Vec<DataRec> {
    let mut out = Vec::with_capacity(data.len() + 64);
    let mut max_end = i64::MIN;
    let smss = smss.max(1) as i64;
    for d in data {
        let mut d = *d;
        if max_end != i64::MIN && d.seq > max_end {
            // A hole [max_end, seq): stand-ins sent just before this segment.
            let mut s = max_end;
            let mut n = 0;
            while s < d.seq && n < 1024 {
                let len = (d.seq - s).min(smss);
                out.push(DataRec { t_ns: d.t_ns - 1, seq: s, len: len as u32, flags: Flags::default(), ..d });
                s += len;
                n += 1;
            }
        } else if max_end != i64::MIN && d.end() <= max_end && d.len > 0 {
            d.flags.set(Flags::RETRANSMISSION);
        }
        max_end = max_end.max(d.end());
        out.push(d);
    }
    out
}

struct Ctx<'a> {
    ds: &'a DirectionSummary,
    sender_side: bool,
    smss: u32,
    base_ns: i64,
    rtt: Rtt,
}

/// States per interval.
fn classify(iv: &[Interval], ctx: &Ctx, path_bps: Option<f64>) -> Vec<Limit> {
    let smss = ctx.smss as u64;
    let width_s = ctx.base_ns as f64 / 1e9;
    let base_us = ctx.base_ns as f64 / 1000.0;
    let flight = |it: &Interval| -> u64 {
        if ctx.sender_side {
            it.max_flight.max(it.new_bytes.min(it.max_flight.max(1) * 4))
        } else {
            it.new_bytes
        }
    };
    let mut out = Vec::with_capacity(iv.len());
    let mut loss_until: i64 = -1;
    let mut ss_active = true;
    let mut burst_start = true;
    let mut max_win_seen: u64 = 0;
    let mut loss_peak: u64 = 0;
    for (i, it) in iv.iter().enumerate() {
        let outstanding = it.snd_nxt != i64::MIN && it.snd_nxt > it.acked;
        let prev_outstanding = i > 0 && iv[i - 1].snd_nxt != i64::MIN && iv[i - 1].snd_nxt > iv[i - 1].acked;
        let win = it.win_max;
        let shrinking = max_win_seen >= 8 * smss && win < max_win_seen / 2;
        max_win_seen = max_win_seen.max(it.win_max);
        if it.retx_pkts > 0 {
            loss_until = i as i64 + 1;
            ss_active = false;
            // The flight the window held when the loss came.
            loss_peak = flight(it).max(if i > 0 { flight(&iv[i - 1]) } else { 0 });
        }
        let state: Limit = if it.data_pkts == 0 {
            // A window still closed (zero or nearly) since the last ACK:
            // the receiver holds the sender, data outstanding or not.
            if it.zero_window || (win < 2 * smss && (outstanding || max_win_seen >= 8 * smss)) {
                Limit::ReceiverApplication
            } else if (i as i64) <= loss_until {
                Limit::CongestionWindow
            } else if ctx.sender_side && it.acked_bytes >= 4 * smss && win >= 4 * smss {
                // ACKs freed room and nothing was sent.
                if it.drained { Limit::SenderApplication } else { Limit::SendBuffer }
            } else if ctx.sender_side && (outstanding || prev_outstanding) {
                // Waiting for ACKs with nothing sent: whatever held it before.
                out.last().copied().unwrap_or(Limit::Idle)
            } else {
                Limit::Idle
            }
        } else if it.zero_window || (win < 2 * smss && max_win_seen >= 8 * smss) {
            Limit::ReceiverApplication
        } else if (i as i64) <= loss_until {
            Limit::CongestionWindow
        } else {
            let f = flight(it);
            let window_limited = if ctx.sender_side {
                it.window_full_flag
                    || it.min_gap.map_or(false, |g| g < 2 * smss as i64 || (g as f64) < 0.05 * win as f64)
            } else {
                win > 0 && f as f64 >= 0.8 * win as f64
            };
            let prev = if i > 0 { flight(&iv[i - 1]) } else { 0 };
            let prev2 = if i > 1 { flight(&iv[i - 2]) } else { 0 };
            let growing_fast = !burst_start && prev > 0 && f as f64 >= 1.5 * prev as f64;
            // Rounds and intervals are not in phase: in slow start one
            // interval may hold parts of two rounds, so keep it while growth lasts.
            let next = iv.get(i + 1).filter(|n| n.retx_pkts == 0).map_or(0, flight);
            let growing_ss = !burst_start
                && prev > 0
                && (f as f64 >= 1.15 * prev as f64
                    // At the sender, the largest flight alone (the new
                    // bytes of a round split between two intervals mislead).
                    || (ctx.sender_side
                        && iv[i - 1].max_flight > 0
                        && it.max_flight as f64 >= 1.3 * iv[i - 1].max_flight as f64)
                    // A round split unevenly between two intervals: the
                    // next one resumes the doubling.
                    || (it.retx_pkts == 0 && next as f64 >= 1.5 * f.max(prev) as f64));
            // Growth over two round trips in a row (slow start again after a loss or timeout).
            let growing_twice = growing_fast && prev2 > 0 && prev as f64 >= 1.3 * prev2 as f64;
            let first_of_burst_small = burst_start && f <= 40 * smss;
            let drained = ctx.sender_side && it.drained;
            let rtt_inflated = it.rtt_mean_us().map_or(false, |r| r > base_us * 1.25 + 2000.0);
            let rate = it.new_bytes as f64 * 8.0 / width_s;
            let at_path_rate = path_bps.map_or(false, |p| rate >= 0.85 * p);
            let lin_growing = i >= 4 && {
                let f4 = flight(&iv[i - 4]);
                f >= f4 + 2 * smss && f >= flight(&iv[i - 2])
            };
            // ACKs came back but the sender sent (almost) nothing new: not
            // the congestion window (each ACK would release data), not the
            // receiver's window (open): the sender had nothing to send.
            let stalled = ctx.sender_side
                && it.acked_bytes >= 4 * smss
                && (it.new_bytes as f64) < 0.25 * it.acked_bytes as f64
                && !window_limited;
            // A new connection's receive window opens round by round
            // (autotuning) while the congestion window doubles: both are
            // the cold start.
            // (Within the interval, or from the last one while the flight
            // keeps doubling.)
            let prev_win = if i > 0 { iv[i - 1].win_max } else { 0 };
            // A window reopening after it was closed is the reader, not autotuning.
            let window_opening = ss_active
                && it.retx_pkts == 0
                && it.win_min >= 2 * smss
                && (it.win_max as f64 >= 1.3 * it.win_min.max(1) as f64
                    || (!burst_start
                        && prev_win > 0
                        && win as f64 >= 1.15 * prev_win as f64
                        && f as f64 >= 1.3 * prev as f64)
                    // The window caught up with the doubling flight for one
                    // round and opens in the next, with the flight following.
                    || (!burst_start
                        && iv.get(i + 1).is_some_and(|n| {
                            n.retx_pkts == 0
                                && n.win_max as f64 >= 1.3 * it.win_max.max(1) as f64
                                && flight(n) as f64 >= 1.3 * f.max(1) as f64
                        })));
            if window_limited && window_opening && !shrinking {
                Limit::SlowStart
            } else if window_limited {
                ss_active = false;
                if shrinking {
                    Limit::ReceiverApplication
                } else {
                    Limit::ReceiverWindow
                }
            } else if (growing_twice && it.retx_pkts == 0)
                || (ss_active && (growing_ss || first_of_burst_small) && !drained)
            {
                Limit::SlowStart
            } else if ss_active && burst_start && drained {
                // A whole response in the first round: slow start if small.
                if f <= 40 * smss {
                    Limit::SlowStart
                } else {
                    ss_active = false;
                    Limit::SenderApplication
                }
            } else {
                if ss_active && !burst_start {
                    ss_active = false;
                }
                if drained || it.reverse_data {
                    Limit::SenderApplication
                } else if stalled {
                    // Stalled next to a message from the receiver's
                    // application (an application-level window update): the
                    // sender's application waited for it.
                    let msg_near = (i > 0 && iv[i - 1].reverse_data) || iv.get(i + 1).is_some_and(|n| n.reverse_data);
                    if msg_near { Limit::SenderApplication } else { Limit::SendBuffer }
                } else if rtt_inflated || at_path_rate {
                    Limit::BottleneckLink
                } else if lin_growing || (ctx.sender_side && (f as f64) < 0.9 * loss_peak as f64) {
                    // Growing slowly, or still below where a loss cut it.
                    Limit::CongestionWindow
                } else {
                    Limit::SendBuffer
                }
            }
        };
        if state == Limit::Idle {
            burst_start = true;
            ss_active = true;
        } else if it.data_pkts > 0 {
            // A burst after idle may restart in slow start.
            if !(burst_start && state == Limit::SlowStart) {
                burst_start = false;
            } else {
                burst_start = false;
            }
        }
        out.push(state);
    }
    if !ctx.sender_side {
        // At the receiver a single silent round trip between two with data,
        // the window open and no loss, is the sender holding back, not idle.
        for i in 1..iv.len().saturating_sub(1) {
            if out[i] == Limit::Idle
                && iv[i - 1].data_pkts > 0
                && iv[i + 1].data_pkts > 0
                && iv[i].retx_pkts == 0
                && iv[i + 1].retx_pkts == 0
                && iv[i].win_min >= 4 * smss
            {
                out[i] = if iv[i - 1].reverse_data || iv[i].reverse_data || iv[i + 1].reverse_data {
                    Limit::SenderApplication
                } else {
                    Limit::SendBuffer
                };
            }
        }
    }
    out
}

fn runs(iv: &[Interval], states: &[Limit], width_ns: i64) -> Vec<LimitRun> {
    let mut v: Vec<LimitRun> = Vec::new();
    for (it, &s) in iv.iter().zip(states) {
        let (a, b) = (it.start_ns as f64 / 1e9, (it.start_ns + width_ns) as f64 / 1e9);
        match v.last_mut() {
            Some(r) if r.state == s => r.end = b,
            _ => v.push(LimitRun { state: s, start: a, end: b }),
        }
    }
    v
}

fn num(v: f64) -> Value {
    if v.is_finite() {
        json!((v * 1000.0).round() / 1000.0)
    } else {
        Value::Null
    }
}

fn finding(kind: &'static str, text: String, numbers: &[(&str, Value)], ev: Evidence) -> Finding {
    let mut m = Map::new();
    for (k, v) in numbers {
        m.insert((*k).to_string(), v.clone());
    }
    Finding { kind, text, numbers: m, evidence: ev }
}

pub fn diagnose_direction(
    cs: &ConnectionSummary,
    d: usize,
    r: &DirRecords,
    opts: &Options,
) -> Option<DirectionDiagnosis> {
    let ds = &cs.directions[d];
    let peer = &cs.directions[1 - d];
    if ds.counts.unique_bytes < MIN_BYTES || r.data.len() < MIN_DATA_SEGMENTS {
        return None;
    }
    let (sender, receiver) = if d == 0 { (&cs.a, &cs.b) } else { (&cs.b, &cs.a) };
    let smss = segment_size(&r.data, peer.mss);

    // RTT.
    let mut samples: Vec<f64> =
        r.acks.iter().filter(|a| a.rtt_us > 0).map(|a| a.rtt_us as f64 / 1000.0).collect();
    samples.sort_by(f64::total_cmp);
    let hs = cs.handshake_rtt_ms;
    let split = match (ds.rtt_to_receiver_ms, ds.rtt_to_sender_ms) {
        (Some(x), Some(y)) => Some(x + y),
        _ => None,
    };
    let sender_side = match ds.capture_point {
        CapturePoint::NearSender => true,
        CapturePoint::NearReceiver => false,
        CapturePoint::Middle => true,
        CapturePoint::Unknown => samples.len() >= 8 && percentile(&samples, 0.5).unwrap_or(0.0) > 1.0,
    };
    let (base_ms, median_ms, p90_ms, source) = if sender_side && samples.len() >= 3 {
        // A low percentile rather than the minimum: one odd sample must not set the intervals.
        let lo = if samples.len() >= 50 { percentile(&samples, 0.05) } else { samples.first().copied() };
        (lo, percentile(&samples, 0.5), percentile(&samples, 0.9), "data_ack")
    } else {
        // At the receiver: the path RTT from the handshake or the two legs
        // around the capture point; the receiver's TSval echoed in the
        // sender's data spans the sender's side (queueing included).
        let ts = ds.echo_delay.as_ref().or(peer.ts_rtt.as_ref());
        let base = split.or(hs).or(ts.map(|t| t.min_ms));
        let src = if split.is_some() { "split" } else if hs.is_some() { "handshake" } else if ts.is_some() { "timestamps" } else { "none" };
        let (med, p90) = match (ts, base) {
            (Some(t), Some(b)) if t.median_ms >= 0.5 * b => (Some(t.median_ms.max(b)), Some(t.p99_ms.max(b))),
            _ => (None, None),
        };
        (base, med, p90, src)
    };
    let base_ms = opts.rtt_ms.or(base_ms);
    let rtt = Rtt { base_ms, median_ms, p90_ms, handshake_ms: hs, source };

    let first = r.data.first()?.t_ns;
    let last = r.data.iter().map(|x| x.t_ns).max().unwrap_or(first);
    let mut width_ns = base_ms.map_or(100_000_000, |m| (m * 1e6) as i64).clamp(1_000_000, 1_000_000_000);
    while (last - first) / width_ns > MAX_INTERVALS {
        width_ns *= 2;
    }
    let ctx = Ctx { ds, sender_side, smss, base_ns: width_ns, rtt: rtt.clone() };

    // Path rate: ACK spacing at the sender, data spacing at the receiver.
    let points: Vec<(i64, i64)> = if sender_side {
        let mut hi = i64::MIN;
        r.acks
            .iter()
            .filter_map(|a| {
                if a.ack > hi {
                    hi = a.ack;
                    Some((a.t_ns, a.ack))
                } else {
                    None
                }
            })
            .collect()
    } else {
        let mut hi = i64::MIN;
        r.data
            .iter()
            .filter_map(|x| {
                if x.end() > hi {
                    hi = x.end();
                    Some((x.t_ns, hi))
                } else {
                    None
                }
            })
            .collect()
    };
    let measured_rate = path_rate(&points, width_ns);
    let path_bps = opts.bandwidth_bps.or(measured_rate);

    let iv = build_intervals(&r.data, &r.acks, width_ns, first, last + 1, sender_side);
    // At the receiver, the RTT distribution comes from the intervals' echo samples.
    let (median_ms, p90_ms) = if sender_side {
        (median_ms, p90_ms)
    } else {
        let mut m: Vec<f64> = iv.iter().filter_map(|x| x.rtt_mean_us()).map(|u| u / 1000.0).collect();
        m.sort_by(f64::total_cmp);
        if m.len() >= 3 { (percentile(&m, 0.5), percentile(&m, 0.9)) } else { (median_ms, p90_ms) }
    };
    let rtt = Rtt { median_ms, p90_ms, ..rtt };
    let states = classify(&iv, &ctx, path_bps);
    if std::env::var_os("TCPWHY_DEBUG_INTERVALS").is_some() {
        for (it, st) in iv.iter().zip(&states) {
            eprintln!(
                "{:.3} {:<20} new={:>8} pkts={:>4} retx={:>3} flight={:>8} gap={:>9} win={:>8}-{:<8} rtt={:>7.1} min={:>7.1} drained={} rev={} zw={}",
                it.start_ns as f64 / 1e9, st.as_str(), it.new_bytes, it.data_pkts, it.retx_pkts, it.max_flight,
                it.min_gap.map_or("-".into(), |g| g.to_string()), it.win_min, it.win_max,
                it.rtt_mean_us().unwrap_or(0.0) / 1000.0, it.rtt_min_us as f64 / 1000.0, it.drained as u8, it.reverse_data as u8, it.zero_window as u8
            );
        }
    }
    let total = states.len() as f64;
    let mut limits: BTreeMap<Limit, f64> = BTreeMap::new();
    for &s in &states {
        *limits.entry(s).or_default() += 1.0 / total;
    }
    let busy_total = states.iter().filter(|s| **s != Limit::Idle).count().max(1) as f64;
    let busy_share = |state: Limit| states.iter().filter(|s| **s == state).count() as f64 / busy_total;

    let duration_s = (last - first) as f64 / 1e9;
    let goodput = ds.goodput_bps;
    let bytes = ds.counts.unique_bytes;

    // ---- Evidence ----
    let mut findings = Vec::new();
    let mut to_confirm = Vec::new();
    let retx: Vec<&DataRec> = r.data.iter().filter(|x| x.is_retransmission()).collect();
    let n_retx = retx.len() as u64;
    let base_ns = base_ms.map(|m| (m * 1e6) as i64);

    // Spurious retransmissions: flagged by the flow (already ACKed, D-SACK),
    // or the original's ACK back less than half an RTT after the retransmission.
    let dsack: std::collections::HashSet<u64> = ds.dsack_spurious_frames.iter().copied().collect();
    let mut spurious_frames = Vec::new();
    if sender_side {
        if let Some(bns) = base_ns {
            let mut j = 0usize;
            for x in &retx {
                while j < r.acks.len() && r.acks[j].t_ns <= x.t_ns {
                    j += 1;
                }
                let quick = r.acks[j..]
                    .iter()
                    .take_while(|a| a.t_ns - x.t_ns < bns / 2)
                    .any(|a| a.ack >= x.end());
                if quick || x.flags.has(Flags::SPURIOUS_RETRANSMISSION) || dsack.contains(&x.frame) {
                    spurious_frames.push(x.frame);
                }
            }
        }
    } else {
        for x in &retx {
            if x.flags.has(Flags::SPURIOUS_RETRANSMISSION) || dsack.contains(&x.frame) {
                spurious_frames.push(x.frame);
            }
        }
    }
    let n_spurious = spurious_frames.len() as u64;
    // The data path's RTT far above the handshake's (a nearby box answered the SYN).
    let data_rtt = if sender_side { base_ms } else { median_ms };
    let rtt_jump = match (hs, data_rtt) {
        (Some(h), Some(b)) if b > 4.0 * h.max(0.05) && b - h > 10.0 => Some((h, b)),
        _ => None,
    };

    // Policer (Flach et al.).
    let receiver_view;
    let pdata: &[DataRec] = if sender_side {
        &r.data
    } else {
        receiver_view = as_sent(&r.data, smss);
        &receiver_view
    };
    // Near the receiver, an ACK's "RTT" is the receiver's own ACK delay,
    // not the path's: the detector then works from the path RTT alone.
    let receiver_acks;
    let packs: &[AckRec] = if sender_side {
        &r.acks
    } else {
        receiver_acks = r.acks.iter().map(|a| AckRec { rtt_us: 0, ..*a }).collect::<Vec<_>>();
        &receiver_acks
    };
    let mut verdict: PolicerVerdict = if pdata.iter().any(|x| x.is_retransmission()) {
        policer::detect_flow(pdata, packs, base_ns)
    } else {
        PolicerVerdict { code: "no_loss", ..Default::default() }
    };
    if verdict.policed && !sender_side {
        // Arrival bursts at the receiver mislead the bucket's rate: use the
        // goodput between the first and the last loss (the paper's estimate).
        if let Some((a, b)) = verdict.loss_span_s {
            let (a_ns, b_ns) = ((a * 1e9) as i64, (b * 1e9) as i64);
            let mut hi = i64::MIN;
            let mut bytes = 0i64;
            for x in r.data.iter().filter(|x| x.t_ns >= a_ns && x.t_ns <= b_ns) {
                if hi == i64::MIN {
                    hi = x.end();
                } else if x.end() > hi {
                    bytes += x.end() - hi.max(x.seq);
                    hi = x.end();
                }
            }
            if b_ns > a_ns && bytes > 0 {
                verdict.rate_bps = Some(bytes as f64 * 8.0 / ((b_ns - a_ns) as f64 / 1e9));
            }
        }
    }

    if std::env::var_os("TCPWHY_DEBUG_INTERVALS").is_some() {
        eprintln!("policer verdict: {:?}", verdict);
    }
    // Loss episodes and RTT before them, against the path's own RTT (the
    // smallest sample: a low percentile already carries a standing queue).
    let min_rtt_ms = if sender_side {
        samples.first().copied().or(base_ms)
    } else {
        base_ms
    };
    let mut episodes = 0u32;
    let mut inflated_before = 0u32;
    let mut overshoot = false;
    let mut episode_ranges = Vec::new();
    for i in 0..iv.len() {
        if iv[i].retx_pkts > 0 && (i == 0 || iv[i - 1].retx_pkts == 0) {
            episodes += 1;
            if episode_ranges.len() < 8 {
                episode_ranges.push((iv[i].start_ns as f64 / 1e9, (iv[i].start_ns + width_ns) as f64 / 1e9));
            }
            let lo = i.saturating_sub(3);
            let mut m = iv[lo..i].iter().filter_map(|x| x.rtt_mean_us()).fold(0.0, f64::max) / 1000.0;
            // At the sender, also the last samples before the first
            // retransmission: a queue filled by a slow-start overshoot shows
            // only in the round trip that ends in the loss.
            if sender_side {
                if let (Some(t), Some(w)) = (retx.iter().find(|x| x.t_ns >= iv[i].start_ns).map(|x| x.t_ns), base_ns) {
                    // The median, as a delayed ACK stretches a single sample.
                    let j = r.acks.partition_point(|a| a.t_ns < t - w);
                    let mut last: Vec<f64> = r.acks[j..]
                        .iter()
                        .take_while(|a| a.t_ns < t)
                        .filter(|a| a.rtt_us > 0)
                        .map(|a| a.rtt_us as f64 / 1000.0)
                        .collect();
                    last.sort_by(f64::total_cmp);
                    if last.len() >= 3 {
                        m = m.max(last[last.len() / 2]);
                    }
                }
            }
            if let (Some(b), true) = (min_rtt_ms, m > 0.0) {
                // A queue of at least a quarter of the path's RTT and 8 ms:
                // below that, jitter and delayed ACKs.
                if m > (b * 1.25).max(b + 8.0) {
                    inflated_before += 1;
                } else if episodes == 1 && i >= 1 && states[i.saturating_sub(2)..i].contains(&Limit::SlowStart) {
                    // The first loss ending slow start: the window overshot
                    // what the path holds (a queue filled within one round).
                    overshoot = true;
                }
            }
        }
    }
    // Episodes that followed a queue: RTT inflated, or slow start overshooting.
    let queue_before = inflated_before + overshoot as u32;
    let deep_queue = match (base_ms, p90_ms) {
        (Some(b), Some(p)) => p >= 3.0 * b && p - b >= 30.0,
        _ => false,
    };

    // Bursts (request/response) and slow start per burst.
    let bursts = crate::shape::bursts(&states);
    // Slow-start rounds per burst: intervals in slow start, but no more
    // than the trains of data (segments separated by a quarter RTT) in the
    // burst. A response sent (or paced) in one train is split between two
    // intervals when it straddles a boundary; a restart from the initial
    // window shows as trains that wait an RTT for ACKs.
    let ss_rounds: Vec<usize> = bursts
        .iter()
        .map(|&(a, b)| {
            let n = states[a..b].iter().filter(|s| **s == Limit::SlowStart).count();
            let (t0, t1) = (iv[a].start_ns, iv[b - 1].start_ns + width_ns);
            let gap = width_ns / 4;
            let j = r.data.partition_point(|x| x.t_ns < t0);
            let mut trains = 0usize;
            let mut last = i64::MIN;
            for x in r.data[j..].iter().take_while(|x| x.t_ns < t1) {
                if last == i64::MIN || x.t_ns - last > gap {
                    trains += 1;
                }
                last = x.t_ns;
            }
            n.min(trains.max(1))
        })
        .collect();
    let idle_share = limits.get(&Limit::Idle).copied().unwrap_or(0.0);
    // Traffic shape before cause: request/response only when the bursts
    // follow the receiver's turns (crate::shape).
    let traffic_shape = crate::shape::classify(&bursts, &iv, idle_share);
    let reqresp = traffic_shape == crate::shape::Shape::RequestResponse;

    // Cached ssthresh: growth linear from the start, at a small window,
    // with no loss, the window open and more data waiting.
    let cached = !cs.started_mid_capture && cs.handshake_rtt_ms.is_some() && iv.len() >= 6 && {
        let f = |i: usize| if sender_side { iv[i].max_flight.max(iv[i].new_bytes) } else { iv[i].new_bytes };
        let no_loss_early = iv[..6].iter().all(|x| x.retx_pkts == 0);
        let open = states[..6].iter().all(|s| *s != Limit::ReceiverWindow && *s != Limit::ReceiverApplication);
        let not_drained = iv[..4].iter().all(|x| !(sender_side && x.drained) && !x.reverse_data);
        let f1 = f(1).max(1) as f64;
        let f3 = f(3) as f64;
        no_loss_early && open && not_drained && f(1) <= 24 * smss as u64 && f3 < 1.6 * f1 && f3 >= f1 * 0.9
    };
    // HyStart (CUBIC's delay-based exit) ends slow start the same way when
    // a round's RTT rises by clamp(RTT/8, 4 ms, 16 ms) once the window is at
    // least 16 segments (hystart_low_window) and still doubling: that round,
    // not a cached value, explains the exit.
    let hystart_exit: Option<(usize, f64)> = if cached {
        let f = |i: usize| if sender_side { iv[i].max_flight.max(iv[i].new_bytes) } else { iv[i].new_bytes };
        let base = cs.handshake_rtt_ms.unwrap_or(0.0).min(min_rtt_ms.unwrap_or(f64::INFINITY));
        let rise = (base / 8.0).clamp(4.0, 16.0);
        (1..4.min(iv.len())).find_map(|i| {
            let doubling = f(i) >= 16 * smss as u64 && f(i) as f64 >= 1.6 * f(i - 1) as f64;
            let r = iv[i].rtt_min_us as f64 / 1000.0;
            (doubling && iv[i].rtt_min_us > 0 && r > base + rise).then_some((i, r - base))
        })
    } else {
        None
    };
    let cached = cached && hystart_exit.is_none();

    let wscale_off = ds.window_scaling == "not_negotiated" || peer.window_scaling == "not_negotiated";
    let rcv_win_max = peer.advertised_window.max_bytes.unwrap_or(0);

    // ---- Primary ----
    let rw = busy_share(Limit::ReceiverWindow);
    let ra = busy_share(Limit::ReceiverApplication);
    let sb = busy_share(Limit::SendBuffer);
    let sa = busy_share(Limit::SenderApplication);
    let cw = busy_share(Limit::CongestionWindow);
    let bl = busy_share(Limit::BottleneckLink);
    let ss = busy_share(Limit::SlowStart);
    let zero_window_s = peer.advertised_window.zero_window_s;
    let mut confidence = Confidence::High;
    let loss_cause = || -> Cause {
        if episodes > 0 && queue_before * 2 >= episodes {
            if deep_queue {
                Cause::Shaper
            } else if path_bps.zip(goodput).map_or(true, |(p, g)| g >= 0.6 * p) {
                Cause::BottleneckLink
            } else if sb + sa >= 0.15 {
                // Queue overflow on a link far from full: the sender's own
                // bursts, released by its buffer or its application.
                if sb >= sa {
                    Cause::SendBuffer
                } else {
                    Cause::SenderApplication
                }
            } else {
                Cause::CongestionLoss
            }
        } else if !sender_side {
            if path_bps.zip(goodput).map_or(false, |(p, g)| g >= 0.8 * p) {
                Cause::BottleneckLink
            } else {
                Cause::RandomLoss
            }
        } else {
            Cause::RandomLoss
        }
    };
    // Spurious retransmissions matter when the RTT jumped after the
    // handshake (every early timer fires), or when there are several and
    // no window explains the time (a lone tail-loss probe at a full window
    // is not the story).
    let spurious_matters = n_spurious >= 1
        && n_spurious * 2 >= n_retx
        && (rtt_jump.is_some() || (n_spurious >= 3 && busy_share(Limit::ReceiverWindow) + busy_share(Limit::ReceiverApplication) < 0.5));
    let primary: Cause = if spurious_matters {
        Cause::SpuriousRetransmission
    } else if verdict.policed
        && (episodes == 0
            || queue_before * 2 < episodes
            // The detector's own queue test (the smallest RTT of the round
            // before each loss) passed and the bucket had a burst: a
            // drop-tail queue overflowing from slow start fits no burst (0).
            // The coarser episode test above is swayed by one late round.
            || (!deep_queue && verdict.burst_bytes.unwrap_or(0) >= 10 * smss as u64)
            || (sender_side && episodes < 2 && inflated_before == 0 && verdict.burst_bytes.unwrap_or(0) > 0))
    {
        Cause::Policer
    } else if wscale_off
        && rcv_win_max <= 65535
        && ((rw >= 0.3 && rw >= ra)
            // A 64 KiB buffer that also closes now and then: the missing
            // scaling is still the cap (and a bigger buffer absorbs the
            // reader's pauses); a reader that holds it closed most of the
            // time is the receiving application.
            || (rw >= 0.1 && rw + ra >= 0.3 && zero_window_s < 0.3 * duration_s))
    {
        Cause::WindowScalingOff
    } else if cached && n_retx == 0 && cw + sb >= 0.5 {
        Cause::CachedSsthresh
    } else if ra >= 0.25 || (zero_window_s > 0.1 * duration_s && ra > 0.1) {
        Cause::ReceiverApplication
    } else if reqresp {
        // Request/response: did the responses pay slow start?
        let later: Vec<usize> = if cs.handshake_rtt_ms.is_some() { ss_rounds[1..].to_vec() } else { ss_rounds.clone() };
        let restarts = later.iter().filter(|&&n| n >= 2).count();
        if !later.is_empty() && restarts * 2 >= later.len() {
            Cause::SlowStart
        } else if rw >= 0.5 {
            Cause::ReceiverWindow
        } else {
            Cause::None
        }
    } else {
        let mut best = [
            (Limit::ReceiverWindow, rw),
            (Limit::SendBuffer, sb),
            (Limit::SenderApplication, sa),
            (Limit::CongestionWindow, cw),
            (Limit::BottleneckLink, bl),
            (Limit::SlowStart, ss),
        ];
        best.sort_by(|a, b| b.1.total_cmp(&a.1));
        let (top, share) = best[0];
        let cold_start = cs.handshake_rtt_ms.is_some()
            && !cs.started_mid_capture
            && n_retx == 0
            && ss > 0.0
            && busy_total <= 40.0
            && states.first() == Some(&Limit::SlowStart)
            && {
                // Still growing: later round trips carried more than earlier
                // ones (the last, partial one left out).
                let busy: Vec<u64> = iv.iter().zip(&states).filter(|(_, s)| **s != Limit::Idle).map(|(x, _)| x.new_bytes).collect();
                let n = busy.len().saturating_sub(1);
                n >= 4 && {
                    let (a, b) = busy[..n].split_at(n / 2);
                    let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len().max(1) as f64;
                    mean(b) >= 1.2 * mean(a)
                }
            };
        // The link was not full: queueing came from bursts, not from a full link.
        let link_not_full = path_bps.zip(goodput).map_or(false, |(p, g)| g < 0.7 * p);
        if share < 0.4 {
            confidence = Confidence::Medium;
        }
        match top {
            Limit::CongestionWindow if n_retx > 0 => loss_cause(),
            Limit::CongestionWindow => {
                if path_bps.zip(goodput).map_or(false, |(p, g)| g >= 0.8 * p) {
                    Cause::BottleneckLink
                } else if cold_start {
                    // A new connection's window still growing from the
                    // initial window when the data ran out (slow start left
                    // early, e.g. by HyStart, then linear growth): the cost
                    // is the cold start.
                    Cause::SlowStart
                } else {
                    confidence = Confidence::Low;
                    Cause::None
                }
            }
            // Queueing without a full link: bursts from a sender that
            // holds back between them (its buffer or its application).
            Limit::SendBuffer if cold_start => Cause::SlowStart,
            // A flight flat between frequent losses with no queue before
            // them: the congestion window held down by random loss (its
            // growth of one segment per round trip hides in the noise of a
            // small window), not a send buffer.
            Limit::SendBuffer if n_retx > 0 && episodes >= 4 && queue_before * 2 < episodes && cw + sb >= 0.5 => loss_cause(),
            Limit::BottleneckLink if link_not_full && sb + sa >= 0.05 => {
                confidence = Confidence::Medium;
                if sb >= sa {
                    Cause::SendBuffer
                } else {
                    Cause::SenderApplication
                }
            }
            Limit::BottleneckLink => {
                if n_retx > 0 && episodes > 0 && queue_before * 2 < episodes && sender_side {
                    Cause::RandomLoss
                } else if deep_queue {
                    Cause::Shaper
                } else {
                    Cause::BottleneckLink
                }
            }
            // The states that are causes in themselves.
            Limit::ReceiverWindow => Cause::ReceiverWindow,
            Limit::SendBuffer => Cause::SendBuffer,
            Limit::SenderApplication => Cause::SenderApplication,
            Limit::SlowStart => Cause::SlowStart,
            // Not among the candidates: the policer and the receiving
            // application are decided above, idle is no limit.
            Limit::Policer => Cause::Policer,
            Limit::ReceiverApplication => Cause::ReceiverApplication,
            Limit::Idle => Cause::None,
        }
    };
    if !sender_side && matches!(primary, Cause::SendBuffer | Cause::SenderApplication) {
        confidence = Confidence::Medium;
        to_confirm.push(
            "capture at the sender, or run `ss -tinm` there: a Send-Q at the wmem limit confirms the send buffer, an empty one the application".into(),
        );
    }
    if !sender_side && matches!(primary, Cause::RandomLoss | Cause::BottleneckLink | Cause::CongestionLoss) {
        if confidence == Confidence::High {
            confidence = Confidence::Medium;
        }
        to_confirm.push("capture at the sender to see RTT before each loss (queue build-up or not)".into());
    }

    // ---- Findings ----
    let ev_all = Evidence {
        frames: vec![r.data[0].frame, r.data[r.data.len() - 1].frame],
        time_ranges: vec![(first as f64 / 1e9, last as f64 / 1e9)],
    };
    let runs_of = |state: Limit| -> Vec<(f64, f64)> {
        runs(&iv, &states, width_ns).into_iter().filter(|x| x.state == state).take(8).map(|x| (x.start, x.end)).collect()
    };
    let rtt_s = base_ms.map(|m| m / 1000.0);
    if rw > 0.05 || primary == Cause::ReceiverWindow || primary == Cause::WindowScalingOff {
        let plateau = rcv_win_max as f64;
        // The ceiling at the RTT the flow lived with (queueing included).
        let live_ms = median_ms.or(base_ms).map(|m| m.max(base_ms.unwrap_or(0.0)));
        let ceiling = live_ms.map(|t| plateau * 8.0 / (t / 1000.0));
        let frames: Vec<u64> = r.data.iter().filter(|x| x.flags.has(Flags::WINDOW_FULL)).take(8).map(|x| x.frame).collect();
        findings.push(finding(
            "window_plateau",
            format!(
                "the receiver's advertised window peaked at {}{}; the sender was window-limited {:.0}% of the busy time",
                fmt_bytes(plateau),
                ceiling.map_or(String::new(), |c| format!(", a ceiling of {} at {:.1} ms", fmt_rate(c), live_ms.unwrap_or(0.0))),
                rw * 100.0
            ),
            &[
                ("window_bytes", json!(rcv_win_max)),
                ("ceiling_bps", ceiling.map_or(Value::Null, num)),
                ("share", num(rw)),
                ("window_full_segments", json!(ds.flags.window_full)),
            ],
            Evidence { frames, time_ranges: runs_of(Limit::ReceiverWindow) },
        ));
    }
    if wscale_off {
        let who = if peer.window_scale_offered == Some(false) {
            format!("the receiver ({})'s SYN", endpoint_str(&receiver.addr, receiver.port))
        } else if ds.window_scale_offered == Some(false) {
            format!("the sender ({})'s SYN", endpoint_str(&sender.addr, sender.port))
        } else {
            "a SYN".into()
        };
        findings.push(finding(
            "window_scaling_off",
            format!("window scaling was not negotiated: {who} carried no window-scale option, so the window can never exceed 64 KiB"),
            &[
                ("sender_offered", json!(ds.window_scale_offered)),
                ("receiver_offered", json!(peer.window_scale_offered)),
            ],
            Evidence { frames: vec![cs.first_frame], time_ranges: vec![] },
        ));
    }
    if ra > 0.0 || zero_window_s > 0.0 {
        findings.push(finding(
            "receiver_application",
            format!(
                "the receiver's window shrank or closed: {} zero-window advertisements, {:.2} s at zero; receiver-application limited {:.0}% of the busy time",
                peer.flags.zero_window, zero_window_s, ra * 100.0
            ),
            &[("zero_windows", json!(peer.flags.zero_window)), ("zero_window_s", num(zero_window_s)), ("share", num(ra))],
            Evidence { frames: vec![], time_ranges: runs_of(Limit::ReceiverApplication) },
        ));
    }
    if sb > 0.05 || primary == Cause::SendBuffer {
        let mut fl: Vec<u64> = iv.iter().zip(&states).filter(|(_, s)| **s == Limit::SendBuffer).map(|(x, _)| if sender_side { x.max_flight } else { x.new_bytes }).collect();
        fl.sort();
        let plateau = fl.get(fl.len() / 2).copied().unwrap_or(0);
        findings.push(finding(
            "flight_plateau",
            format!(
                "bytes in flight flat at about {} below the {} window, with no loss and no queueing: send-buffer limited {:.0}% of the busy time",
                fmt_bytes(plateau as f64),
                fmt_bytes(rcv_win_max as f64),
                sb * 100.0
            ),
            &[("flight_bytes", json!(plateau)), ("window_bytes", json!(rcv_win_max)), ("share", num(sb))],
            Evidence { frames: vec![], time_ranges: runs_of(Limit::SendBuffer) },
        ));
    }
    if sa > 0.05 || primary == Cause::SenderApplication {
        let mut per_rtt: Vec<u64> = iv.iter().zip(&states).filter(|(_, s)| **s == Limit::SenderApplication).map(|(x, _)| x.new_bytes).collect();
        per_rtt.sort();
        let typical = per_rtt.get(per_rtt.len() / 2).copied().unwrap_or(0);
        let drained = iv.iter().filter(|x| x.drained).count();
        let reverse = iv.iter().filter(|x| x.reverse_data).count();
        findings.push(finding(
            "sender_application",
            format!(
                "the sender had nothing in flight for part of each round trip while the window was open: about {} per RTT{}; application-limited {:.0}% of the busy time",
                fmt_bytes(typical as f64),
                if reverse > 0 { format!(", each burst following data from the receiver ({reverse} round trips): application-level flow control") } else { String::new() },
                sa * 100.0
            ),
            &[("bytes_per_rtt", json!(typical)), ("drained_rtts", json!(drained)), ("reverse_data_rtts", json!(reverse)), ("share", num(sa))],
            Evidence { frames: vec![], time_ranges: runs_of(Limit::SenderApplication) },
        ));
    }
    if n_retx > 0 {
        let loss_rate = n_retx as f64 / r.data.len() as f64;
        findings.push(finding(
            "retransmissions",
            format!(
                "{} retransmitted segments ({:.2}% of data segments, {} fast retransmissions) in {} loss episodes; RTT was inflated before {} of them{}",
                n_retx,
                loss_rate * 100.0,
                ds.flags.fast_retransmission,
                episodes,
                inflated_before,
                if overshoot { "; the first ended slow start (the window overshot the path)" } else { "" }
            ),
            &[
                ("retransmitted_segments", json!(n_retx)),
                ("retransmission_rate", num(loss_rate)),
                ("fast_retransmissions", json!(ds.flags.fast_retransmission)),
                ("lost_segments", json!(ds.flags.lost_segment)),
                ("episodes", json!(episodes)),
                ("inflated_before", json!(inflated_before)),
                ("slow_start_overshoot", json!(overshoot)),
            ],
            Evidence { frames: retx.iter().take(8).map(|x| x.frame).collect(), time_ranges: episode_ranges.clone() },
        ));
    }
    if verdict.policed || primary == Cause::Policer {
        let rate = verdict.rate_bps.unwrap_or(0.0);
        findings.push(finding(
            "policer",
            format!(
                "losses fit a token bucket: rate {} with a burst of {}; {} losses where the bucket ran empty, without queueing before them",
                fmt_rate(rate),
                fmt_bytes(verdict.burst_bytes.unwrap_or(0) as f64),
                verdict.losses
            ),
            &[
                ("rate_bps", num(rate)),
                ("burst_bytes", json!(verdict.burst_bytes)),
                ("losses", json!(verdict.losses)),
                ("code", json!(verdict.code)),
            ],
            Evidence { frames: verdict.lost_frames.clone(), time_ranges: verdict.loss_span_s.into_iter().collect() },
        ));
    }
    if n_spurious > 0 || rtt_jump.is_some() {
        findings.push(finding(
            "spurious_retransmissions",
            format!(
                "{} of {} retransmissions were spurious (the original was acknowledged anyway){}",
                n_spurious,
                n_retx,
                rtt_jump.map_or(String::new(), |(h, b)| format!(
                    "; the handshake took {h:.1} ms but data round trips {b:.1} ms: timers set from the handshake fire too early"
                ))
            ),
            &[
                ("spurious", json!(n_spurious)),
                ("retransmissions", json!(n_retx)),
                ("handshake_rtt_ms", json!(rtt_jump.map(|x| x.0))),
                ("data_rtt_ms", json!(rtt_jump.map(|x| x.1))),
            ],
            Evidence { frames: spurious_frames.iter().take(8).copied().collect(), time_ranges: vec![] },
        ));
    }
    if cached || primary == Cause::CachedSsthresh {
        findings.push(finding(
            "early_slow_start_exit",
            format!(
                "growth turned linear after {} per RTT with no loss before it: the connection left slow start at a tiny window, as a cached ssthresh (ip tcp_metrics) does",
                fmt_bytes(iv.get(1).map_or(0, |x| x.new_bytes) as f64)
            ),
            &[("bytes_per_rtt_at_exit", json!(iv.get(1).map(|x| x.new_bytes)))],
            Evidence { frames: vec![r.data[0].frame], time_ranges: vec![(first as f64 / 1e9, iv.get(4).map_or(first, |x| x.start_ns) as f64 / 1e9)] },
        ));
    }
    if let Some((i, rise)) = hystart_exit {
        findings.push(finding(
            "hystart_exit",
            format!(
                "slow start ended without loss at {} per RTT when the RTT rose {} in one round: CUBIC's HyStart delay exit (a queue or jitter on the path), not a cached ssthresh",
                fmt_bytes(iv[i].new_bytes as f64),
                fmt_ms(rise)
            ),
            &[("bytes_per_rtt_at_exit", json!(iv[i].new_bytes)), ("rtt_rise_ms", num(rise))],
            Evidence { frames: vec![], time_ranges: vec![(iv[i].start_ns as f64 / 1e9, (iv[i].start_ns + width_ns) as f64 / 1e9)] },
        ));
    }
    if ss > 0.05 || primary == Cause::SlowStart {
        let rounds: usize = ss_rounds.iter().sum();
        findings.push(finding(
            "slow_start",
            format!(
                "{} slow-start round trips over {} burst{} of data{}",
                rounds,
                bursts.len(),
                if bursts.len() == 1 { "" } else { "s" },
                if reqresp { ", each after an idle period" } else { "" }
            ),
            &[("rounds", json!(rounds)), ("bursts", json!(bursts.len())), ("share", num(ss))],
            Evidence { frames: vec![], time_ranges: runs_of(Limit::SlowStart) },
        ));
    }
    if (bl > 0.05 || deep_queue) && matches!(primary, Cause::BottleneckLink | Cause::Shaper | Cause::CongestionLoss) {
        findings.push(finding(
            "queueing",
            format!(
                "RTT rose from {:.1} ms to {:.1} ms (p90) as a queue built at the bottleneck{}",
                base_ms.unwrap_or(0.0),
                p90_ms.unwrap_or(0.0),
                path_bps.map_or(String::new(), |p| format!("; trains arrive at {}", fmt_rate(p)))
            ),
            &[("base_rtt_ms", json!(base_ms)), ("p90_rtt_ms", json!(p90_ms)), ("path_rate_bps", json!(path_bps)), ("share", num(bl))],
            Evidence { frames: vec![], time_ranges: runs_of(Limit::BottleneckLink) },
        ));
    }

    let mut states = states;
    if primary == Cause::Policer {
        for s in states.iter_mut() {
            if *s == Limit::CongestionWindow {
                *s = Limit::Policer;
            }
        }
        let total = states.len() as f64;
        limits.clear();
        for &s in &states {
            *limits.entry(s).or_default() += 1.0 / total;
        }
    }
    let facts = fixes::Facts {
        primary,
        goodput_bps: goodput.unwrap_or(0.0),
        rtt_s,
        path_bps,
        path_measured: opts.bandwidth_bps.is_none() && measured_rate.is_some(),
        rcv_window: rcv_win_max,
        smss,
        loss_rate: if r.data.is_empty() { 0.0 } else { n_retx as f64 / r.data.len() as f64 },
        policer_rate: verdict.rate_bps,
        kernel: opts.kernel,
        wscale_who_receiver: peer.window_scale_offered == Some(false),
        bytes,
        bursts: bursts.len(),
        ss_rounds: ss_rounds.iter().sum(),
        sender_side,
    };
    let (fx, what_if, mut notes) = fixes::fixes(&facts);
    to_confirm.append(&mut notes);
    let timeline = runs(&iv, &states, width_ns);
    let _ = &ctx.rtt;
    let _ = ctx.ds;
    let mut dd = DirectionDiagnosis {
        from: if d == 0 { "a" } else { "b" },
        sender: endpoint_str(&sender.addr, sender.port),
        receiver: endpoint_str(&receiver.addr, receiver.port),
        bytes,
        duration_s,
        goodput_bps: goodput,
        capture_point: match ds.capture_point {
            CapturePoint::NearSender => "sender",
            CapturePoint::NearReceiver => "receiver",
            CapturePoint::Middle => "middle",
            CapturePoint::Unknown => "unknown",
        },
        rtt,
        segment_bytes: smss,
        path_rate_bps: path_bps,
        interval_ms: width_ns as f64 / 1e6,
        limits,
        timeline,
        traffic_shape,
        primary,
        confidence,
        summary: String::new(),
        findings,
        fixes: fx,
        what_if,
        to_confirm,
        truncated: r.truncated,
    };
    let _ = ev_all;
    dd.summary = crate::text::paragraph(&dd);
    Some(dd)
}
