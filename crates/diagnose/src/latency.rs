//! Request latency: where each request's time went.
//!
//! A connection's data is cut into turns (new data in one direction until
//! the other direction sends new data); a turn of the requester (the side
//! that sent data first, normally the client) and the responder's turn
//! after it make one exchange. For each exchange: new connection or
//! reused, the handshake, the idle gap before it and whether it exceeded
//! the RTO (slow-start restart for CUBIC/Reno with
//! tcp_slow_start_after_idle=1), the response's round trips and how many
//! were slow-start rounds (bursts growing from the first flight), time
//! spent waiting on a delayed ACK (Nagle), and the time it would have
//! taken on a warm connection. Connection-level findings and fixes follow.

use tcpwhy_core::units::calc;
use crate::path::{connection_rtt_ms, path_rate};
use crate::states::SLOW_START_GROWTH;
use tcpwhy_core::units::{fmt_bytes, fmt_ms, fmt_rate};
use crate::model::{Finding, Fix};
use crate::record::{full_segment, AckRec, ConnRecords, DataRec};
use serde::Serialize;
use serde_json::{json, Map, Value};
use tcpwhy_flow::{CapturePoint, ConnectionSummary};

pub const LATENCY_SCHEMA: &str = "tcpwhy.latency/1";
/// Linux's minimum RTO (TCP_RTO_MIN).
const RTO_MIN_MS: f64 = 200.0;
/// Linux's initial window (RFC 6928), in segments.
const IW_SEGMENTS: u64 = 10;
/// A gap between two segments of one message is a wait for the peer's
/// delayed ACK when it exceeds the round trip by this much, and the ACK
/// itself came at least this long after the segment it acknowledged: Linux
/// holds an ACK at least 40 ms (`TCP_DELACK_MIN`), Windows 200 ms, so 10 ms
/// sits above a path's jitter and below any delayed ACK.
const DELAYED_ACK_MIN_WAIT_NS: i64 = 10_000_000;
/// The next segment of such a wait left within this long of the ACK
/// (beyond the round trip): the writer was waiting for it (Nagle, RFC 896);
/// it did not pause on its own. Two milliseconds cover a host's scheduling delay.
const SENT_ON_ACK_MAX_NS: i64 = 2_000_000;
/// Delayed-ACK waits get a finding and a fix when they are at least this
/// share of all request time (below it, the odd wait).
const DELAYED_ACK_MIN_SHARE: f64 = 0.05;
/// A response that needed this many slow-start rounds on a new connection
/// (each round [`SLOW_START_GROWTH`] times the last) paid for a cold start:
/// the first round is the initial window, the next two doubled it, so the
/// initial window was at most a quarter of what the path took.
const COLD_START_ROUNDS: u32 = 3;

#[derive(Debug, Clone, Serialize)]
pub struct Exchange {
    /// 1-based, within the connection.
    pub index: usize,
    /// HTTP/1.x request line, if the request starts with one (untrusted text).
    pub request_line: Option<String>,
    /// HTTP/1.x status line of the response, if visible (untrusted text).
    pub status_line: Option<String>,
    pub request_start: f64,
    pub request_end: f64,
    pub response_first: Option<f64>,
    pub response_last: Option<f64>,
    pub request_bytes: u64,
    pub response_bytes: u64,
    /// First exchange of a connection whose handshake is in the capture.
    pub new_connection: bool,
    /// Time from the SYN to the request's first byte (new connections).
    pub handshake_ms: Option<f64>,
    /// Time the responder had not sent data before this response.
    pub idle_before_ms: Option<f64>,
    /// The idle gap exceeded the RTO estimate (srtt + 200 ms).
    pub idle_exceeds_rto: bool,
    /// The response started again from about the initial window after idle.
    pub idle_restart: bool,
    pub first_flight_bytes: u64,
    pub first_flight_segments: u64,
    /// Round trips from the response's first byte to its last (1 = one flight).
    pub response_rounds: u32,
    /// Rounds in which the burst grew from the one before (slow start).
    pub slow_start_rounds: u32,
    /// Time spent waiting for a delayed ACK before sending the rest of a turn (Nagle).
    pub delayed_ack_ms: f64,
    /// Responder's own time between the request and the response.
    pub server_ms: Option<f64>,
    /// From the SYN (new connections) or the request's first byte to the response's last byte.
    pub time_ms: Option<f64>,
    /// The same exchange on a warm connection: no handshake, no slow start,
    /// no delayed ACK (one RTT + server time + size at the path rate).
    pub warm_ms: Option<f64>,
    /// Start times of the response's rounds (bursts), seconds; for the
    /// report's timeline, not in the JSON.
    #[serde(skip)]
    pub round_starts: Vec<f64>,
    /// The delayed-ACK waits as (start, end) times in seconds (report only).
    #[serde(skip)]
    pub waits: Vec<(f64, f64)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConnLatency {
    pub connection: u64,
    pub client: String,
    pub server: String,
    pub rtt_ms: Option<f64>,
    pub path_bps: Option<f64>,
    pub exchanges: Vec<Exchange>,
    /// The connection ended (FIN/RST) this long after its last exchange.
    pub closed_after_idle_ms: Option<f64>,
    /// Every turn of the conversation in order, the leading ones before the
    /// first request included: what `tcpwhy prove` replays. Not in the JSON
    /// (the exchanges give the same times).
    #[serde(skip)]
    pub turns: Vec<TurnSpan>,
}

/// One turn: a run of new data from one end with no data from the other
/// between (capture times, seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TurnSpan {
    /// Sent by the connection's endpoint a.
    pub from_a: bool,
    pub bytes: u64,
    pub first: f64,
    pub last: f64,
    /// When the other end's first ACK of the turn's last byte was seen:
    /// the other end had all of it then (less its ACK delay), wherever the
    /// capture was taken.
    pub acked: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LatencyReport {
    pub schema: &'static str,
    pub connections: Vec<ConnLatency>,
    pub findings: Vec<Finding>,
    pub fixes: Vec<Fix>,
    /// Total time of all exchanges now, and predicted after each fix (ms).
    pub total_ms: f64,
    pub predicted_ms: Map<String, Value>,
}

fn endpoint(addr: &str, port: u16) -> String {
    if addr.contains(':') {
        format!("[{addr}]:{port}")
    } else {
        format!("{addr}:{port}")
    }
}

/// The first line of `bytes` if it looks like an HTTP/1.x request or status
/// line; printable ASCII only (the rest is replaced).
fn http_line(bytes: &[u8], status: bool) -> Option<String> {
    const METHODS: [&str; 9] = ["GET ", "POST ", "PUT ", "HEAD ", "DELETE ", "OPTIONS ", "PATCH ", "CONNECT ", "TRACE "];
    let ok = if status {
        bytes.starts_with(b"HTTP/1.")
    } else {
        METHODS.iter().any(|m| bytes.starts_with(m.as_bytes()))
    };
    if !ok {
        return None;
    }
    let end = bytes.iter().position(|&b| b == b'\r' || b == b'\n').unwrap_or(bytes.len());
    let line: String = bytes[..end.min(120)]
        .iter()
        .map(|&b| if (0x20..0x7f).contains(&b) { b as char } else { '?' })
        .collect();
    Some(line)
}

/// New data only (no retransmissions), in time order.
fn new_data(data: &[DataRec]) -> Vec<DataRec> {
    let mut hi = i64::MIN;
    let mut out = Vec::with_capacity(data.len());
    for d in data {
        if d.len > 0 && d.end() > hi {
            hi = d.end();
            out.push(*d);
        }
    }
    out
}

struct Turn {
    dir: usize,
    segs: std::ops::Range<usize>,
}

/// Time spent between two segments of one turn waiting for the peer's
/// delayed ACK: the peer's ACK of the first came much later than a round
/// trip, and the next segment followed the ACK at once.
fn delayed_ack_wait(segs: &[DataRec], acks: &[AckRec], rtt_ns: i64, spans: &mut Vec<(f64, f64)>) -> f64 {
    let mut wait = 0.0;
    for w in segs.windows(2) {
        let (a, b) = (w[0], w[1]);
        let gap = b.t_ns - a.t_ns;
        if gap < rtt_ns + DELAYED_ACK_MIN_WAIT_NS {
            continue;
        }
        let j = acks.partition_point(|x| x.t_ns <= a.t_ns);
        let ack = acks[j..].iter().take_while(|x| x.t_ns <= b.t_ns).find(|x| x.ack >= a.end() && x.payload == 0);
        if let Some(x) = ack {
            if b.t_ns - x.t_ns <= rtt_ns + SENT_ON_ACK_MAX_NS && x.t_ns - a.t_ns >= DELAYED_ACK_MIN_WAIT_NS {
                wait += calc::ms_from_ns((gap - rtt_ns).max(0) as f64);
                if gap > rtt_ns {
                    spans.push((calc::s_from_ns((a.t_ns + rtt_ns) as f64), calc::s_from_ns(b.t_ns as f64)));
                }
            }
        }
    }
    wait
}

/// Bursts of a response: segments separated by less than a quarter RTT.
fn bursts(segs: &[DataRec], rtt_ns: i64) -> Vec<(i64, u64, u64)> {
    let gap = (rtt_ns / 4).max(500_000);
    let mut out: Vec<(i64, u64, u64)> = Vec::new();
    let mut last_t = i64::MIN;
    for s in segs {
        if out.is_empty() || s.t_ns - last_t > gap {
            out.push((s.t_ns, 0, 0));
        }
        let b = out.last_mut().expect("pushed");
        b.1 += s.len as u64;
        b.2 += 1;
        last_t = s.t_ns;
    }
    out
}

/// The data of both directions in time order, cut where the sender
/// changes: each run of one side's segments is a turn.
fn split_turns(data: &[Vec<DataRec>; 2]) -> Vec<Turn> {
    let mut turns: Vec<Turn> = Vec::new();
    let (mut i, mut j) = (0usize, 0usize);
    let mut cur: Option<(usize, usize)> = None; // (dir, start index)
    loop {
        let next = match (data[0].get(i), data[1].get(j)) {
            (Some(a), Some(b)) => Some(if a.t_ns <= b.t_ns { 0 } else { 1 }),
            (Some(_), None) => Some(0),
            (None, Some(_)) => Some(1),
            (None, None) => None,
        };
        let Some(d) = next else { break };
        let idx = if d == 0 { i } else { j };
        match cur {
            Some((cd, _)) if cd == d => {}
            Some((cd, start)) => {
                let end = if cd == 0 { i } else { j };
                turns.push(Turn { dir: cd, segs: start..end });
                cur = Some((d, idx));
            }
            None => cur = Some((d, idx)),
        }
        if d == 0 { i += 1 } else { j += 1 }
    }
    if let Some((cd, start)) = cur {
        turns.push(Turn { dir: cd, segs: start..data[cd].len() });
    }
    turns
}

/// The ACK of a turn's last byte is looked for among this many ACKs after
/// it: the answer to a turn follows its ACK closely, and a capture whose
/// ACKs never cover the turns (cut, one-sided, crafted) costs no more than
/// this per turn.
const TURN_ACK_SCAN: usize = 4096;

/// Each turn's bytes, times and the other end's ACK of its last byte.
fn turn_spans(turns: &[Turn], data: &[Vec<DataRec>; 2], r: &ConnRecords) -> Vec<TurnSpan> {
    turns
        .iter()
        .map(|t| {
            let segs = &data[t.dir][t.segs.clone()];
            let end = segs[segs.len() - 1].end();
            let acks = &r.dirs[t.dir].acks;
            let from = acks.partition_point(|a| a.t_ns < segs[segs.len() - 1].t_ns);
            let acked = acks[from..].iter().take(TURN_ACK_SCAN).find(|a| a.ack >= end).map(|a| calc::s_from_ns(a.t_ns as f64));
            TurnSpan {
                acked,
                from_a: t.dir == 0,
                bytes: segs.iter().map(|x| x.len as u64).sum(),
                first: calc::s_from_ns(segs[0].t_ns as f64),
                last: calc::s_from_ns(segs[segs.len() - 1].t_ns as f64),
            }
        })
        .collect()
}

pub fn connection_latency(cs: &ConnectionSummary, r: &ConnRecords) -> Option<ConnLatency> {
    let syn_time = (!cs.started_mid_capture).then_some(cs.first_time);
    let data = [new_data(&r.dirs[0].data), new_data(&r.dirs[1].data)];
    if data[0].is_empty() && data[1].is_empty() {
        return None;
    }
    // The requester sent data first.
    let req_dir = match (data[0].first(), data[1].first()) {
        (Some(a), Some(b)) => usize::from(b.t_ns < a.t_ns),
        (Some(_), None) => 0,
        _ => 1,
    };
    let resp_dir = 1 - req_dir;
    let turns = split_turns(&data);

    let rtt_ms = connection_rtt_ms(cs, r);
    let rtt_ns = rtt_ms.map_or(0, |m| calc::ns_from_ms(m) as i64);
    let sender_side = cs.directions[resp_dir].capture_point == CapturePoint::NearSender;
    // Path rate of the response direction (train spacing).
    let points: Vec<(i64, i64)> = if sender_side {
        let mut hi = i64::MIN;
        r.dirs[resp_dir].acks.iter().filter_map(|a| (a.ack > hi).then(|| { hi = a.ack; (a.t_ns, a.ack) })).collect()
    } else {
        data[resp_dir].iter().map(|x| (x.t_ns, x.end())).collect()
    };
    let path_bps = path_rate(&points, rtt_ns.max(1_000_000));
    // The responder's full segment, under the MSS the requester announced.
    let mss = u64::from(full_segment(cs.directions[req_dir].mss));
    let iw = IW_SEGMENTS * mss;

    let facts = PathFacts { rtt_ns, rtt_ms, path_bps, iw, sender_side };
    let heads = &r.heads;
    let head_at = |dir: usize, t: i64| -> Option<&[u8]> {
        heads.iter().find(|h| h.dir as usize == dir && h.t_ns == t).map(|h| h.bytes.as_slice())
    };
    let mut exchanges: Vec<Exchange> = Vec::new();
    let mut prev_resp_last: Option<i64> = None;
    let mut k = 0;
    while k < turns.len() {
        if turns[k].dir != req_dir {
            k += 1;
            continue;
        }
        let req = &data[req_dir][turns[k].segs.clone()];
        let resp: &[DataRec] = match turns.get(k + 1) {
            Some(t) if t.dir == resp_dir => &data[resp_dir][t.segs.clone()],
            _ => &[],
        };
        k += 2;
        let (rs, re) = (req[0].t_ns, req[req.len() - 1].t_ns);
        let index = exchanges.len() + 1;
        let new_connection = index == 1 && !cs.started_mid_capture && syn_time.is_some();
        let start_ns = if new_connection { syn_time.map_or(rs, |s| calc::ns_from_s(s) as i64) } else { rs };
        let mut ex = Exchange {
            index,
            request_line: head_at(req_dir, rs).and_then(|b| http_line(b, false)),
            status_line: resp.first().and_then(|x| head_at(resp_dir, x.t_ns)).and_then(|b| http_line(b, true)),
            request_start: calc::s_from_ns(rs as f64),
            request_end: calc::s_from_ns(re as f64),
            response_first: resp.first().map(|x| calc::s_from_ns(x.t_ns as f64)),
            response_last: resp.last().map(|x| calc::s_from_ns(x.t_ns as f64)),
            request_bytes: req.iter().map(|x| x.len as u64).sum(),
            response_bytes: resp.iter().map(|x| x.len as u64).sum(),
            new_connection,
            handshake_ms: new_connection.then(|| calc::ms_from_ns((rs - start_ns) as f64)),
            idle_before_ms: None,
            idle_exceeds_rto: false,
            idle_restart: false,
            first_flight_bytes: 0,
            first_flight_segments: 0,
            response_rounds: 0,
            slow_start_rounds: 0,
            delayed_ack_ms: 0.0,
            server_ms: None,
            time_ms: resp.last().map(|x| calc::ms_from_ns((x.t_ns - start_ns) as f64)),
            warm_ms: None,
            round_starts: Vec::new(),
            waits: Vec::new(),
        };
        if let (Some(p), Some(f)) = (prev_resp_last, resp.first()) {
            let idle = calc::ms_from_ns((f.t_ns - p) as f64);
            ex.idle_before_ms = Some(idle);
            ex.idle_exceeds_rto = rtt_ms.is_some_and(|r| idle > r + RTO_MIN_MS);
        }
        let mut waits = Vec::new();
        ex.delayed_ack_ms = delayed_ack_wait(req, &r.dirs[req_dir].acks, rtt_ns, &mut waits)
            + delayed_ack_wait(resp, &r.dirs[resp_dir].acks, rtt_ns, &mut waits);
        ex.waits = waits;
        if !resp.is_empty() && rtt_ns > 0 {
            read_response(&mut ex, resp, (rs, re), &facts);
            prev_resp_last = Some(resp[resp.len() - 1].t_ns);
        }
        exchanges.push(ex);
    }
    if exchanges.is_empty() {
        return None;
    }
    let last_data = calc::s_from_ns(data.iter().filter_map(|d| d.last()).map(|x| x.t_ns).max().unwrap_or(0) as f64);
    let closed_after_idle_ms = (cs.close != "open").then(|| calc::ms_from_s(cs.last_time - last_data)).filter(|&ms| ms >= 1000.0);
    let (c, s) = if req_dir == 0 { (&cs.a, &cs.b) } else { (&cs.b, &cs.a) };
    let turns = turn_spans(&turns, &data, r);
    Some(ConnLatency {
        connection: cs.id,
        client: endpoint(&c.addr, c.port),
        server: endpoint(&s.addr, s.port),
        rtt_ms,
        path_bps,
        exchanges,
        closed_after_idle_ms,
        turns,
    })
}

/// What an exchange's response is read against: the connection's RTT, the
/// response direction's path rate, the initial window, and whether the
/// capture is at the responder.
struct PathFacts {
    rtt_ns: i64,
    rtt_ms: Option<f64>,
    path_bps: Option<f64>,
    iw: u64,
    sender_side: bool,
}

/// An exchange's response (`resp`, after the request sent from `req.0` to
/// `req.1`): its rounds, slow start, an idle restart, the server's think
/// time, and its time on a warm connection.
fn read_response(ex: &mut Exchange, resp: &[DataRec], req: (i64, i64), p: &PathFacts) {
    let (rs, re) = req;
    let b = bursts(resp, p.rtt_ns);
    ex.round_starts = b.iter().map(|x| calc::s_from_ns(x.0 as f64)).collect();
    ex.first_flight_bytes = b[0].1;
    ex.first_flight_segments = b[0].2;
    let mut ss = 1u32;
    for w in b.windows(2) {
        if w[1].1 as f64 >= SLOW_START_GROWTH * w[0].1 as f64 {
            ss += 1;
        } else {
            break;
        }
    }
    ex.slow_start_rounds = if b.len() >= 2 { ss } else { 0 };
    let span = resp[resp.len() - 1].t_ns - resp[0].t_ns;
    ex.response_rounds = ((span as f64 / p.rtt_ns as f64).round() as u32).saturating_add(1);
    ex.idle_restart = ex.index > 1
        && ex.idle_exceeds_rto
        && ex.first_flight_bytes <= p.iw + p.iw / 2
        && ex.slow_start_rounds >= 2
        && ex.response_bytes > 2 * ex.first_flight_bytes;
    let think = calc::ms_from_ns((resp[0].t_ns - re) as f64) - if p.sender_side { 0.0 } else { p.rtt_ms.unwrap_or(0.0) };
    ex.server_ms = Some(think.max(0.0));
    let req_ms = calc::ms_from_ns((re - rs) as f64) - ex.delayed_ack_ms.min(calc::ms_from_ns((re - rs) as f64));
    // Transfer at the path's rate; a response within the initial
    // window goes in one flight even when the rate is unknown.
    let transfer = match p.path_bps {
        Some(bps) => Some(calc::ms_from_s(calc::s_to_send(ex.response_bytes as f64, bps))),
        None if ex.response_bytes <= p.iw => Some(0.0),
        None => None,
    };
    if let (Some(rtt), Some(tr)) = (p.rtt_ms, transfer) {
        ex.warm_ms = Some(req_ms + rtt + think.max(0.0) + tr.max(0.0));
    }
}

fn finding(kind: &'static str, text: String, numbers: Value) -> Finding {
    let numbers = match numbers {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    Finding { kind, text, numbers, evidence: Default::default() }
}

/// Findings, fixes and predictions over all connections.
pub fn latency_report(conns: Vec<ConnLatency>) -> LatencyReport {
    let all: Vec<(&ConnLatency, &Exchange)> = conns.iter().flat_map(|c| c.exchanges.iter().map(move |e| (c, e))).collect();
    let total: f64 = all.iter().map(|(_, e)| time_of(e)).sum();
    let mut out = Found::default();
    churn(&conns, total, &mut out);
    // Idle close.
    let closes: Vec<f64> = conns.iter().filter_map(|c| c.closed_after_idle_ms).collect();
    if !closes.is_empty() {
        let mut v = closes.clone();
        v.sort_by(f64::total_cmp);
        let med = v[v.len() / 2];
        out.findings.push(finding(
            "idle_close",
            format!("{} connection(s) closed after being idle for about {} (an idle timeout on one end)", closes.len(), fmt_ms(med)),
            json!({"connections": closes.len(), "idle_timeout_ms": med}),
        ));
    }
    idle_restarts(&all, total, &mut out);
    delayed_acks(&all, total, &mut out);
    // Slow start on new connections over a long fat path: initcwnd.
    let cold: Vec<&Exchange> = all.iter().filter(|(_, e)| e.new_connection && e.slow_start_rounds >= COLD_START_ROUNDS).map(|(_, e)| *e).collect();
    if !cold.is_empty() && !out.fixes.iter().any(|f| f.kind == "reuse_connections") {
        out.findings.push(finding(
            "cold_start",
            format!(
                "{} response(s) on new connections needed {:.1} slow-start rounds on average before reaching the path's rate",
                cold.len(),
                cold.iter().map(|e| e.slow_start_rounds as f64).sum::<f64>() / cold.len() as f64
            ),
            json!({"exchanges": cold.len()}),
        ));
    }
    let Found { findings, fixes, predicted } = out;
    LatencyReport { schema: LATENCY_SCHEMA, connections: conns, findings, fixes, total_ms: total, predicted_ms: predicted }
}

/// What the report's steps found: findings, fixes, and each fix's
/// predicted total time.
#[derive(Default)]
struct Found {
    findings: Vec<Finding>,
    fixes: Vec<Fix>,
    predicted: Map<String, serde_json::Value>,
}

/// An exchange's time, and its time on a warm connection (never more).
fn time_of(e: &Exchange) -> f64 {
    e.time_ms.unwrap_or(0.0)
}
fn warm_of(e: &Exchange) -> f64 {
    e.warm_ms.unwrap_or_else(|| time_of(e)).min(time_of(e))
}

/// Churn: one exchange per connection, several connections. An exchange
/// without a response is a one-way transfer (a bulk download's data seen
/// as the "request"), not a request paying for its connection.
fn churn(conns: &[ConnLatency], total: f64, out: &mut Found) {
    let single: Vec<&ConnLatency> = conns
        .iter()
        .filter(|c| c.exchanges.len() == 1 && c.exchanges[0].new_connection && c.exchanges[0].response_first.is_some())
        .collect();
    if !(single.len() >= 2 && single.len() * 2 >= conns.len()) {
        return;
    }
    let hs: Vec<f64> = single.iter().filter_map(|c| c.exchanges[0].handshake_ms).collect();
    let ss: Vec<u32> = single.iter().map(|c| c.exchanges[0].slow_start_rounds).collect();
    let now: f64 = single.iter().map(|c| time_of(&c.exchanges[0])).sum();
    // One reused connection (or a pool) still opens cold once: the
    // first request keeps its handshake and slow start, the others go warm.
    let first = single
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.exchanges[0].request_start.total_cmp(&b.1.exchanges[0].request_start))
        .map_or(0, |(i, _)| i);
    let after: f64 = single
        .iter()
        .enumerate()
        .map(|(i, c)| if i == first { time_of(&c.exchanges[0]) } else { warm_of(&c.exchanges[0]) })
        .sum();
    let mean_hs = hs.iter().sum::<f64>() / hs.len().max(1) as f64;
    let mean_ss = ss.iter().sum::<u32>() as f64 / ss.len().max(1) as f64;
    out.findings.push(finding(
        "connection_churn",
        format!(
            "one request per connection: {} connections each paid a handshake ({}) and slow start from the initial window ({:.1} slow-start rounds on average); {} in total, about {} on one reused connection (only the first request opens it)",
            single.len(), fmt_ms(mean_hs), mean_ss, fmt_ms(now), fmt_ms(after)
        ),
        json!({"connections": single.len(), "handshake_ms": mean_hs, "slow_start_rounds": mean_ss, "time_ms": now, "warm_ms": after}),
    ));
    out.fixes.push(Fix {
        kind: "reuse_connections",
        on: "application",
        text: "reuse connections: HTTP keep-alive with idle timeouts longer than the gaps between requests on both ends, or a connection pool".into(),
        commands: vec!["keepalive_timeout 300s;   # nginx".into(), "KeepAliveTimeout 300   # Apache httpd".into()],
        ..Default::default()
    });
    out.predicted.insert("reuse_connections".into(), json!(total - now + after));
}

/// Responses on a reused connection that restarted from the initial
/// window after an idle period.
fn idle_restarts(all: &[(&ConnLatency, &Exchange)], total: f64, out: &mut Found) {
    let restarts: Vec<&Exchange> = all.iter().filter(|(_, e)| e.idle_restart).map(|(_, e)| *e).collect();
    if restarts.is_empty() {
        return;
    }
    let now: f64 = restarts.iter().map(|e| time_of(e)).sum();
    let after: f64 = restarts.iter().map(|e| warm_of(e)).sum();
    let idle: f64 = restarts.iter().filter_map(|e| e.idle_before_ms).sum::<f64>() / restarts.len() as f64;
    out.findings.push(finding(
        "idle_restart",
        format!(
            "{} response(s) on a reused connection started again from the initial window after {} idle (more than the RTO): {} rounds on average, {} in total, about {} without the restart",
            restarts.len(),
            fmt_ms(idle),
            restarts.iter().map(|e| e.response_rounds).sum::<u32>() / restarts.len() as u32,
            fmt_ms(now),
            fmt_ms(after)
        ),
        json!({"exchanges": restarts.len(), "idle_ms": idle, "time_ms": now, "warm_ms": after}),
    ));
    out.fixes.push(Fix {
        kind: "no_slow_start_after_idle",
        on: "sender",
        text: "keep the congestion window across idle periods on the responder (CUBIC/Reno restart from the initial window after an RTO of idle); BBR does not restart".into(),
        commands: vec!["sysctl -w net.ipv4.tcp_slow_start_after_idle=0".into()],
        ..Default::default()
    });
    out.predicted.insert("no_slow_start_after_idle".into(), json!(total - now + after));
}

/// Exchanges that waited on a delayed ACK before the rest of a message
/// could go (Nagle).
fn delayed_acks(all: &[(&ConnLatency, &Exchange)], total: f64, out: &mut Found) {
    let dack: f64 = all.iter().map(|(_, e)| e.delayed_ack_ms).sum();
    let n_dack = all.iter().filter(|(_, e)| e.delayed_ack_ms > 0.0).count();
    if !(dack > 0.0 && total > 0.0 && dack / total >= DELAYED_ACK_MIN_SHARE) {
        return;
    }
    out.findings.push(finding(
        "delayed_ack",
        format!(
            "{} of {} exchanges waited for a delayed ACK before the rest of a message could go (Nagle): {} in total, {:.0}% of all request time",
            n_dack, all.len(), fmt_ms(dack), dack / total * 100.0
        ),
        json!({"exchanges": n_dack, "wait_ms": dack, "share": dack / total}),
    ));
    out.fixes.push(Fix {
        kind: "nodelay",
        on: "application",
        text: "write each message in one call, or set TCP_NODELAY on the writer; TCP_QUICKACK on the reader acknowledges at once".into(),
        commands: vec!["setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one)   # writer".into()],
        ..Default::default()
    });
    out.predicted.insert("nodelay".into(), json!(total - dack));
}

/// The report as text: a table per connection, then findings and fixes.
pub fn latency_text(rep: &LatencyReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for c in &rep.connections {
        let _ = writeln!(
            s,
            "connection {}  {} -> {}  RTT {}{}",
            c.connection,
            c.client,
            c.server,
            c.rtt_ms.map_or("?".into(), fmt_ms),
            c.path_bps.map_or(String::new(), |p| format!(", path about {}", fmt_rate(p)))
        );
        let _ = writeln!(
            s,
            "  {:>3}  {:<6} {:>9} {:>10} {:>9} {:>9} {:>8} {:>10} {:>9} {:>9}  {}",
            "#", "conn", "idle", "response", "time", "rounds", "ss", "1st flight", "dACK", "warm", "request"
        );
        for e in &c.exchanges {
            let conn = if e.new_connection { "new" } else { "reused" };
            let idle = e.idle_before_ms.map_or("-".into(), |m| format!("{}{}", fmt_ms(m), if e.idle_restart { "!" } else if e.idle_exceeds_rto { "*" } else { "" }));
            let _ = writeln!(
                s,
                "  {:>3}  {:<6} {:>9} {:>10} {:>9} {:>9} {:>8} {:>10} {:>9} {:>9}  {}",
                e.index,
                conn,
                idle,
                fmt_bytes(e.response_bytes as f64),
                e.time_ms.map_or("-".into(), fmt_ms),
                e.response_rounds,
                e.slow_start_rounds,
                format!("{} seg", e.first_flight_segments),
                if e.delayed_ack_ms > 0.0 { fmt_ms(e.delayed_ack_ms) } else { "-".into() },
                e.warm_ms.map_or("-".into(), fmt_ms),
                e.request_line.as_deref().unwrap_or("")
            );
        }
    }
    if rep.connections.iter().any(|c| c.exchanges.iter().any(|e| e.idle_exceeds_rto)) {
        s.push_str("  (idle * : longer than the RTO; ! : and the response restarted from the initial window)\n");
    }
    for f in &rep.findings {
        let _ = writeln!(s, "finding {}: {}", f.kind, f.text);
    }
    for f in &rep.fixes {
        let after = rep.predicted_ms.get(f.kind).and_then(Value::as_f64);
        let _ = writeln!(
            s,
            "fix [{}] {}{}",
            f.on,
            f.text,
            after.map_or(String::new(), |a| format!(" (total request time {} -> about {})", fmt_ms(rep.total_ms), fmt_ms(a)))
        );
        for c in &f.commands {
            let _ = writeln!(s, "    {c}");
        }
    }
    s
}
