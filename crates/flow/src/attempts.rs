//! Connection attempts: a 4-tuple that has so far carried only control
//! segments without payload (SYN, SYN-ACK, RST, FIN, or no flags at all).
//!
//! Most of them become connections one round trip later. Those that do
//! not (unanswered SYNs, refused ones, half-open handshakes, scans, stray
//! RSTs) can number millions in a capture of a SYN flood or a scan. A full
//! [`Connection`](crate::Connection) costs about 2.5 KB; an attempt keeps
//! only its segments, compactly (48 bytes each, two inline), about 160
//! bytes in all. When a tuple carries anything else (data, a pure ACK), or
//! more than [`MAX_HELD_SEGMENTS`] segments, its held segments are replayed
//! through a new connection in their order, so its analysis is exactly what
//! it would have been.
//!
//! Attempts that never became connections are summarised as a whole
//! ([`AttemptSummary`]): counts, rates, sources and destinations, and what
//! they look like (a SYN flood, a port or host scan, backscatter). When
//! there are few of them ([`ATTEMPTS_LISTED_MAX`] or fewer) they are also
//! listed one by one as connections, as before.

use crate::key::Key;
use cardinality_estimator::CardinalityEstimator;
use smallvec::SmallVec;
use tcpwhy_core::units::{fmt_count, fmt_estimate};
use tcpwhy_wire::{Addr, TcpFlags, TcpOptions, TcpSegment};

/// An attempt with more segments than this becomes a connection: past a few
/// retransmitted SYNs and SYN-ACKs (Linux: tcp_syn_retries 6,
/// tcp_synack_retries 5) it is no longer cheap to hold, and it is rare.
pub const MAX_HELD_SEGMENTS: usize = 8;
/// Failed attempts are listed as connections one by one only when there are
/// at most this many in the capture; beyond, they are only summarised.
pub const ATTEMPTS_LISTED_MAX: usize = 1024;
/// At most this many attempts are held at once; the least recently seen
/// eighth is ended when the table is full. At 100,000 SYNs/s it holds the
/// last 1.1 s, longer than a handshake with one lost SYN-ACK (initial RTO
/// 1 s, RFC 6298), so real connections still complete their handshake in
/// the table. Half of what a hash table of 2^18 buckets holds (7/8 of
/// them): below half, the table clears the places of removed entries in
/// place instead of doubling. About 160 bytes a bucket: 40 MiB at most.
pub const MAX_LIVE_ATTEMPTS: usize = (1 << 18) / 16 * 7;
/// A half-open request stays in a Linux listener's SYN queue until its
/// SYN-ACK retries run out: tcp_synack_retries 5 gives 1+2+4+8+16+32 = 63 s.
pub const SYN_QUEUE_HOLD_S: usize = 63;
/// A listener's SYN queue holds at most its accept backlog, capped by
/// net.core.somaxconn (4096 by default since Linux 5.4). More failed
/// attempts to one listener within [`SYN_QUEUE_HOLD_S`] than this fill it:
/// Linux logs "Possible SYN flooding" and answers with SYN cookies.
pub const SYN_QUEUE_MAX: u64 = 4096;
/// A scan: one source took at least this share of the failed attempts...
pub const SCAN_SOURCE_SHARE: f64 = 0.5;
/// ...and reached at least this many ports (or hosts). nmap's default scan
/// tries 1,000 ports; 100 is well above what one client's retries reach.
pub const SCAN_MIN_TARGETS: u64 = 100;
/// A flood aims at one listener: it took at least this share of the
/// failed attempts.
pub const FLOOD_DESTINATION_SHARE: f64 = 0.5;
/// Heavy hitters kept for sources and destinations (space-saving).
const TOP_K: usize = 16;

const SYN: u16 = TcpFlags::SYN;
const ACK: u16 = TcpFlags::ACK;
const RST: u16 = TcpFlags::RST;
const FIN: u16 = TcpFlags::FIN;

/// Whether a segment can be held in an attempt: no payload, no SACK blocks,
/// and a SYN, RST or FIN (or no ACK at all: a NULL scan).
#[inline]
pub(crate) fn is_control(seg: &TcpSegment<'_>) -> bool {
    let f = seg.flags.0;
    seg.payload_len == 0 && seg.options.sack_count == 0 && (f & (SYN | RST | FIN) != 0 || f & ACK == 0)
}

/// Everything the connection model reads from a segment without payload.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeldSegment {
    pub time_ns: i64,
    pub frame: u64,
    seq: u32,
    ack: u32,
    ts: (u32, u32),
    flags: u16,
    window: u16,
    mss: u16,
    checksum: u16,
    ip_id: u16,
    wscale: u8,
    bits: u8,
    /// A SYN's signature (crate::conn::SynOptions).
    layout: tcpwhy_wire::OptionLayout,
    ttl: u8,
    dont_fragment: bool,
}

const FROM_FIRST: u8 = 1;
const HAS_MSS: u8 = 2;
const HAS_WSCALE: u8 = 4;
const SACK_OK: u8 = 8;
const HAS_TS: u8 = 16;
const TRUNCATED: u8 = 32;
const HAS_IP_ID: u8 = 64;
const LEN_FROM_FRAME: u8 = 128;

impl HeldSegment {
    pub fn new(seg: &TcpSegment<'_>, frame: u64, time_ns: i64, from_first: bool) -> Self {
        let o = &seg.options;
        let bit = |on: bool, b: u8| if on { b } else { 0 };
        HeldSegment {
            time_ns,
            frame,
            seq: seg.seq,
            ack: seg.ack,
            ts: o.timestamp.unwrap_or((0, 0)),
            flags: seg.flags.0,
            window: seg.window,
            mss: o.mss.unwrap_or(0),
            checksum: seg.checksum,
            ip_id: seg.ip_id.unwrap_or(0),
            wscale: o.window_scale.unwrap_or(0),
            bits: bit(from_first, FROM_FIRST)
                | bit(o.mss.is_some(), HAS_MSS)
                | bit(o.window_scale.is_some(), HAS_WSCALE)
                | bit(o.sack_permitted, SACK_OK)
                | bit(o.timestamp.is_some(), HAS_TS)
                | bit(o.truncated, TRUNCATED)
                | bit(seg.ip_id.is_some(), HAS_IP_ID)
                | bit(seg.length_from_frame, LEN_FROM_FRAME),
            layout: o.layout,
            ttl: seg.ttl,
            dont_fragment: seg.dont_fragment,
        }
    }

    pub fn is_syn(&self) -> bool {
        self.flags & (SYN | ACK) == SYN
    }
    pub fn is_rst(&self) -> bool {
        self.flags & RST != 0
    }
    pub fn seq(&self) -> u32 {
        self.seq
    }
    pub fn from_first(&self) -> bool {
        self.bits & FROM_FIRST != 0
    }

    /// The segment again, between the key's endpoints.
    pub fn segment(&self, k: &Key) -> TcpSegment<'static> {
        let has = |b: u8| self.bits & b != 0;
        let (src, dst) = if self.from_first() { (k.0, k.1) } else { (k.1, k.0) };
        TcpSegment {
            src: src.0,
            dst: dst.0,
            src_port: src.1,
            dst_port: dst.1,
            seq: self.seq,
            ack: self.ack,
            flags: TcpFlags(self.flags),
            window: self.window,
            options: TcpOptions {
                mss: has(HAS_MSS).then_some(self.mss),
                window_scale: has(HAS_WSCALE).then_some(self.wscale),
                sack_permitted: has(SACK_OK),
                timestamp: has(HAS_TS).then_some(self.ts),
                truncated: has(TRUNCATED),
                layout: self.layout,
                ..TcpOptions::default()
            },
            payload_len: 0,
            payload: &[],
            captured: 0,
            length_from_frame: has(LEN_FROM_FRAME),
            ip_id: has(HAS_IP_ID).then_some(self.ip_id),
            checksum: self.checksum,
            ttl: self.ttl,
            dont_fragment: self.dont_fragment,
        }
    }
}

/// A tuple that has carried only control segments so far.
#[derive(Debug, Clone)]
pub(crate) struct Attempt {
    /// The connection id it gets if it becomes (or is listed as) one.
    pub id: u64,
    pub segs: SmallVec<[HeldSegment; 2]>,
}

impl Attempt {
    pub fn last_ns(&self) -> i64 {
        self.segs.last().map_or(i64::MIN, |s| s.time_ns)
    }
    /// Whether the client (as the connection model chooses it: the sender
    /// of the first segment, or the receiver of a first SYN-ACK) is the
    /// key's first endpoint.
    fn client_is_first(&self) -> bool {
        let s = &self.segs[0];
        let synack = s.flags & (SYN | ACK) == SYN | ACK;
        s.from_first() != synack
    }
    /// How it ended without becoming a connection.
    fn outcome(&self) -> Outcome {
        let client_first = self.client_is_first();
        let (mut server_said, mut synack, mut refused) = (false, false, false);
        for s in &self.segs {
            if s.from_first() != client_first {
                server_said = true;
                synack |= s.flags & (SYN | ACK) == SYN | ACK;
                refused |= s.flags & RST != 0;
            }
        }
        let client_syn = self.segs.iter().any(|s| s.from_first() == client_first && s.flags & (SYN | ACK) == SYN);
        match (client_syn, synack, refused, server_said) {
            (true, true, _, _) => Outcome::HalfOpen,
            (true, false, true, _) => Outcome::Refused,
            (true, false, false, false) => Outcome::Unanswered,
            _ => Outcome::Other,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Unanswered,
    Refused,
    HalfOpen,
    Other,
}

/// Space-saving heavy hitters (Metwally, Agrawal and El Abbadi, 2005): the
/// `TOP_K` most frequent keys. Each count overestimates by at most the count
/// the key took over (kept beside it), so count − that is a sure lower bound.
#[derive(Debug, Clone)]
struct TopK<K: PartialEq + Copy> {
    items: Vec<(K, u64, u64)>,
}

impl<K: PartialEq + Copy> Default for TopK<K> {
    fn default() -> Self {
        TopK { items: Vec::new() }
    }
}

impl<K: PartialEq + Copy> TopK<K> {
    fn add(&mut self, k: K) {
        if let Some(e) = self.items.iter_mut().find(|e| e.0 == k) {
            e.1 += 1;
        } else if self.items.len() < TOP_K {
            self.items.push((k, 1, 0));
        } else if let Some(min) = self.items.iter_mut().min_by_key(|e| e.1) {
            *min = (k, min.1 + 1, min.1);
        }
    }
    /// Keys surely seen at least twice, with that sure count, most first.
    fn sorted(&self) -> Vec<(K, u64)> {
        let mut v: Vec<(K, u64)> = self.items.iter().map(|e| (e.0, e.1 - e.2)).filter(|e| e.1 >= 2).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1));
        v
    }
}

/// Streaming counts over all attempts (bounded memory: a few KB).
pub(crate) struct AttemptStats {
    attempts: u64,
    pub(crate) became_connections: u64,
    outcomes: [u64; 4],
    syn: u64,
    syn_ack: u64,
    rst: u64,
    fin: u64,
    first_ns: Option<i64>,
    last_ns: i64,
    sources: CardinalityEstimator<Addr>,
    dst_hosts: CardinalityEstimator<Addr>,
    dst_ports: CardinalityEstimator<u16>,
    top_dst: TopK<(Addr, u16)>,
    top_src: TopK<Addr>,
    /// Attempts started in each of the last `SYN_QUEUE_HOLD_S` seconds.
    ring: [u64; SYN_QUEUE_HOLD_S],
    ring_sec: i64,
    window_sum: u64,
    peak_window: u64,
    peak_window_end_ns: i64,
    peak_second: u64,
}

impl Default for AttemptStats {
    fn default() -> Self {
        AttemptStats {
            attempts: 0,
            became_connections: 0,
            outcomes: [0; 4],
            syn: 0,
            syn_ack: 0,
            rst: 0,
            fin: 0,
            first_ns: None,
            last_ns: 0,
            sources: CardinalityEstimator::new(),
            dst_hosts: CardinalityEstimator::new(),
            dst_ports: CardinalityEstimator::new(),
            top_dst: TopK::default(),
            top_src: TopK::default(),
            ring: [0; SYN_QUEUE_HOLD_S],
            ring_sec: i64::MIN,
            window_sum: 0,
            peak_window: 0,
            peak_window_end_ns: 0,
            peak_second: 0,
        }
    }
}

const NS_PER_S: i64 = 1_000_000_000;

impl AttemptStats {
    /// A new attempt; `client` and `server` as the connection model would
    /// name them.
    pub fn started(&mut self, client: (Addr, u16), server: (Addr, u16), time_ns: i64) {
        self.attempts += 1;
        self.first_ns.get_or_insert(time_ns);
        self.sources.insert(&client.0);
        self.dst_hosts.insert(&server.0);
        self.dst_ports.insert(&server.1);
        self.top_dst.add(server);
        self.top_src.add(client.0);
        // Attempts per second, and within the trailing SYN-queue hold time.
        let sec = time_ns.div_euclid(NS_PER_S);
        if sec > self.ring_sec {
            let steps = if self.ring_sec == i64::MIN { SYN_QUEUE_HOLD_S as i64 } else { sec - self.ring_sec };
            for s in 1..=steps.min(SYN_QUEUE_HOLD_S as i64) {
                let slot = ((self.ring_sec.wrapping_add(s)).rem_euclid(SYN_QUEUE_HOLD_S as i64)) as usize;
                self.window_sum -= self.ring[slot];
                self.ring[slot] = 0;
            }
            self.ring_sec = sec;
        }
        // A clock stepping back counts in the current second.
        let slot = self.ring_sec.rem_euclid(SYN_QUEUE_HOLD_S as i64) as usize;
        self.ring[slot] += 1;
        self.window_sum += 1;
        self.peak_second = self.peak_second.max(self.ring[slot]);
        if self.window_sum > self.peak_window {
            self.peak_window = self.window_sum;
            self.peak_window_end_ns = time_ns;
        }
    }

    pub fn segment(&mut self, flags: u16, time_ns: i64) {
        self.last_ns = self.last_ns.max(time_ns);
        match flags & (SYN | ACK) {
            SYN => self.syn += 1,
            x if x == SYN | ACK => self.syn_ack += 1,
            _ => {}
        }
        if flags & RST != 0 {
            self.rst += 1;
        }
        if flags & FIN != 0 {
            self.fin += 1;
        }
    }

    /// An attempt ended without becoming a connection.
    pub fn ended(&mut self, a: &Attempt) {
        let i = match a.outcome() {
            Outcome::Unanswered => 0,
            Outcome::Refused => 1,
            Outcome::HalfOpen => 2,
            Outcome::Other => 3,
        };
        self.outcomes[i] += 1;
    }

    pub fn summary(&self, listed: bool) -> AttemptSummary {
        let failed = self.outcomes.iter().sum::<u64>();
        let endpoint = |(a, p): (Addr, u16)| match a {
            Addr::V6(_) => format!("[{a}]:{p}"),
            Addr::V4(_) => format!("{a}:{p}"),
        };
        let mut s = AttemptSummary {
            attempts: self.attempts,
            became_connections: self.became_connections,
            failed,
            listed,
            unanswered: self.outcomes[0],
            refused: self.outcomes[1],
            half_open: self.outcomes[2],
            other: self.outcomes[3],
            syn_segments: self.syn,
            syn_ack_segments: self.syn_ack,
            rst_segments: self.rst,
            fin_segments: self.fin,
            first_time: self.first_ns.map(|t| t as f64 / 1e9),
            last_time: self.first_ns.map(|_| self.last_ns as f64 / 1e9),
            peak_attempts_per_s: self.peak_second,
            peak_attempts_63s: self.peak_window,
            peak_63s_end_time: self.first_ns.map(|_| self.peak_window_end_ns as f64 / 1e9),
            // An estimate never above the attempts it counts.
            sources: (self.sources.estimate() as u64).min(self.attempts),
            destination_hosts: (self.dst_hosts.estimate() as u64).min(self.attempts),
            destination_ports: (self.dst_ports.estimate() as u64).min(self.attempts),
            top_destinations: self.top_dst.sorted().into_iter().map(|(k, n)| TopEntry { endpoint: endpoint(k), attempts: n }).collect(),
            top_sources: self.top_src.sorted().into_iter().map(|(a, n)| TopEntry { endpoint: a.to_string(), attempts: n }).collect(),
            kind: None,
            text: String::new(),
        };
        s.classify();
        s
    }
}

/// Heavy hitter: an address (or address:port) and how many attempts it
/// surely had (exact while at most 16 distinct were seen, a lower bound
/// after). Only those with at least two.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TopEntry {
    pub endpoint: String,
    pub attempts: u64,
}

/// The attempts of a capture as a whole (see the module docs). Distinct
/// counts are HyperLogLog++ estimates (exact up to a few hundred).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct AttemptSummary {
    /// Tuples whose first segments were control segments (every connection
    /// that starts with a SYN is one).
    pub attempts: u64,
    /// Of those, how many went on to carry data or ACKs: connections.
    pub became_connections: u64,
    /// Ended as attempts: the next four added up.
    pub failed: u64,
    /// The failed attempts are also listed as connections.
    pub listed: bool,
    /// A SYN and no answer.
    pub unanswered: u64,
    /// A SYN answered by a RST.
    pub refused: u64,
    /// A SYN answered by a SYN-ACK, and the handshake never completed.
    pub half_open: u64,
    /// Anything else: stray RSTs, FINs, SYN-ACKs without a SYN (backscatter).
    pub other: u64,
    pub syn_segments: u64,
    pub syn_ack_segments: u64,
    pub rst_segments: u64,
    pub fin_segments: u64,
    pub first_time: Option<f64>,
    pub last_time: Option<f64>,
    /// Most attempts started within one second (capture clock).
    pub peak_attempts_per_s: u64,
    /// Most attempts started within 63 s (how long Linux keeps a half-open
    /// request), and when that window ended.
    pub peak_attempts_63s: u64,
    pub peak_63s_end_time: Option<f64>,
    pub sources: u64,
    pub destination_hosts: u64,
    pub destination_ports: u64,
    pub top_destinations: Vec<TopEntry>,
    pub top_sources: Vec<TopEntry>,
    /// "syn_flood", "port_scan", "host_scan", "backscatter", or none.
    pub kind: Option<&'static str>,
    /// One sentence with the numbers.
    pub text: String,
}

impl AttemptSummary {
    fn classify(&mut self) {
        let failed = self.failed.max(1) as f64;
        let top_dst = self.top_destinations.first().map_or(0, |e| e.attempts) as f64;
        let top_src = self.top_sources.first().map_or(0, |e| e.attempts) as f64;
        let n = fmt_count;
        let rate = format!(
            "{} connection attempts, {} became connections; {} unanswered, {} refused (RST), {} half-open (SYN-ACK, no ACK), {} other; at most {} a second",
            n(self.attempts),
            n(self.became_connections),
            n(self.unanswered),
            n(self.refused),
            n(self.half_open),
            n(self.other),
            n(self.peak_attempts_per_s)
        );
        let started_failing = self.unanswered + self.refused + self.half_open;
        self.kind = if self.failed > SYN_QUEUE_MAX
            && self.peak_attempts_63s > SYN_QUEUE_MAX
            && top_dst >= FLOOD_DESTINATION_SHARE * failed
            && self.sources >= SCAN_MIN_TARGETS
        {
            Some("syn_flood")
        } else if started_failing >= SCAN_MIN_TARGETS && top_src >= SCAN_SOURCE_SHARE * failed && self.destination_ports >= SCAN_MIN_TARGETS {
            Some("port_scan")
        } else if started_failing >= SCAN_MIN_TARGETS && top_src >= SCAN_SOURCE_SHARE * failed && self.destination_hosts >= SCAN_MIN_TARGETS {
            Some("host_scan")
        } else if self.other > SYN_QUEUE_MAX && self.other as f64 >= 0.5 * failed {
            Some("backscatter")
        } else {
            None
        };
        let dst = self.top_destinations.first().map_or("-", |e| e.endpoint.as_str());
        let src = self.top_sources.first().map_or("-", |e| e.endpoint.as_str());
        self.text = match self.kind {
            Some("syn_flood") => format!(
                "SYN flood on {dst}: {rate}; {} within 63 s (a Linux listener's SYN queue holds at most {SYN_QUEUE_MAX}, then it answers with SYN cookies), from about {} sources",
                n(self.peak_attempts_63s),
                fmt_estimate(self.sources)
            ),
            Some("port_scan") => format!(
                "port scan from {src}: {rate}; about {} ports on {} host{}",
                fmt_estimate(self.destination_ports),
                fmt_estimate(self.destination_hosts),
                if self.destination_hosts == 1 { "" } else { "s" }
            ),
            Some("host_scan") => format!("host scan from {src}: {rate}; about {} hosts", fmt_estimate(self.destination_hosts)),
            Some(_) => format!(
                "backscatter: {rate}; replies (SYN-ACKs, RSTs) to connections this capture never saw start, as a host whose address was spoofed in a flood receives them"
            ),
            None => format!("{rate}"),
        };
    }
}
