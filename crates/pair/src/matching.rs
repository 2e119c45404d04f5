//! Which connection of one capture is which of the other.
//!
//! - **The same TCP connection** keeps both initial sequence numbers
//!   whatever rewrites its addresses and ports (NAT, a load balancer in
//!   direct-routing or tunnel mode): two random 32-bit ISNs (RFC 9293
//!   section 3.4.1, RFC 6528) equal at both points identify it. Equal
//!   endpoints name it `same_tuple`, others `translated` (NAT, a port
//!   rewrite).
//! - **The client's ISN kept, the server's not**: the SYN was answered by
//!   something between the points that translates sequence numbers (a SYN
//!   proxy or SYN cookies in a firewall or load balancer).
//! - **Two connections a terminating proxy joins** share no ISN: they are
//!   matched by content, the first bytes of both streams
//!   ([`crate::fingerprint::CONTENT_PREFIX_BYTES`]), one to one, in time order.
//!
//! Every match must agree on one clock offset between the captures
//! (within [`OFFSET_AGREEMENT_NS`]); an ISN equal by chance in two unrelated
//! captures of the same hosts does not.

use crate::fingerprint::Fingerprint;
use foldhash::HashMap;
use serde::Serialize;

/// Matches whose handshake times put the two clocks further apart than this
/// from the matches' median are rejected: one path's one-way delay and a
/// SYN's retransmission (1 s, RFC 6298 2.1) fit in it many times over.
pub const OFFSET_AGREEMENT_NS: i64 = 10_000_000_000;

/// Two connections with the same content are a proxy's two halves only if
/// one clock offset lets the request reach the server's side after the
/// client's and the answer reach the client's side after the server's.
/// Without a connection matched by its ISNs to fix the offset, that offset
/// must lie within this of zero: the same request repeated later (the same
/// hosts, the same object) satisfies causality at any larger offset, so a
/// larger one cannot be told from two separate transfers. NTP keeps hosts
/// within milliseconds of each other; captures from clocks further apart
/// pair only through a connection that keeps its ISNs.
pub const CONTENT_MAX_CLOCK_OFFSET_NS: i64 = 1_000_000_000;

/// Content that matches a proxy's two connections must be at least this
/// long in the first direction: a shorter prefix ("GET ") is shared by
/// unrelated requests.
pub const CONTENT_MIN_BYTES: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchKind {
    /// The same connection, with the same endpoints at both points.
    SameTuple,
    /// The same connection (both ISNs equal), addresses or ports rewritten.
    Translated,
    /// The client's ISN equal, the SYN-ACK's not: answered in the middle.
    SynAnsweredInMiddle,
    /// Two connections joined by a terminating proxy (matched by content).
    Proxied,
}

impl MatchKind {
    /// One TCP connection seen twice: its segments can be compared one by one.
    pub fn same_connection(self) -> bool {
        matches!(self, MatchKind::SameTuple | MatchKind::Translated)
    }

    /// The segments after the handshake are one stream seen twice: the
    /// same connection, or one whose handshake a SYN proxy answered and
    /// then spliced (it translates sequence numbers and timestamps, so
    /// copies are compared by relative numbers without their TSval).
    pub fn segments_comparable(self) -> bool {
        self != MatchKind::Proxied
    }

    /// Its name, as in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            MatchKind::SameTuple => "same_tuple",
            MatchKind::Translated => "translated",
            MatchKind::SynAnsweredInMiddle => "syn_answered_in_middle",
            MatchKind::Proxied => "proxied",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Match {
    /// Connection ids in capture 0 and capture 1.
    pub ids: [u64; 2],
    pub kind: MatchKind,
    /// The SYN sender's side index in each capture's connection.
    pub client_side: [usize; 2],
    /// Capture times of the match's reference event in each capture
    /// (the SYN, or the first request byte for a proxy).
    pub reference_ns: [i64; 2],
    pub evidence: Vec<String>,
}

impl Match {
    /// Capture `p`'s side index of direction `k` (0: client to server, 1:
    /// server to client) in its connection.
    pub fn side(&self, p: usize, k: usize) -> usize {
        if k == 0 {
            self.client_side[p]
        } else {
            1 - self.client_side[p]
        }
    }

    /// Capture 1's reference time minus capture 0's.
    pub fn offset(&self) -> i64 {
        self.reference_ns[1] - self.reference_ns[0]
    }
}

/// The offset most matches agree on (their median).
pub fn median_offset<'a>(matches: impl IntoIterator<Item = &'a Match>) -> Option<i64> {
    median(matches.into_iter().map(Match::offset).collect())
}

/// Which connections of each capture a match took.
pub type Used = [Vec<bool>; 2];

/// The matches by ISNs, the coarse offset (capture 1's clock minus capture
/// 0's) their handshakes agree on, and which connections they took.
pub fn match_by_isn(fps: [&[Fingerprint]; 2]) -> (Vec<Match>, Option<i64>, Used) {
    // capture 1's connections by each ISN it saw (0: the client's, 1: the server's)
    let mut by_isn: [HashMap<u32, Vec<usize>>; 2] = [HashMap::default(), HashMap::default()];
    for (i, fp) in fps[1].iter().enumerate() {
        if let Some(isns) = fp.isns() {
            for (k, x) in [isns.0, isns.1].into_iter().enumerate() {
                if let Some(x) = x {
                    by_isn[k].entry(x).or_default().push(i);
                }
            }
        }
    }
    let mut used = [vec![false; fps[0].len()], vec![false; fps[1].len()]];
    let mut found: Vec<(usize, usize, Match)> = Vec::new();
    for (i, a) in fps[0].iter().enumerate() {
        let (Some(ca), Some((ac, as_))) = (a.client(), a.isns()) else { continue };
        let cands = match (ac, as_) {
            (Some(x), _) => by_isn[0].get(&x),
            (None, Some(x)) => by_isn[1].get(&x),
            _ => None,
        };
        for &j in cands.into_iter().flatten() {
            let b = &fps[1][j];
            let cb = b.client().unwrap_or(0);
            let Some((bc, bs)) = b.isns() else { continue };
            let same_endpoints = a.endpoints[ca] == b.endpoints[cb] && a.endpoints[1 - ca] == b.endpoints[1 - cb];
            let tuple = |what: String| {
                if same_endpoints {
                    (MatchKind::SameTuple, format!("{what}, same endpoints"))
                } else {
                    (
                        MatchKind::Translated,
                        format!(
                            "{what}; endpoints {}:{} -> {}:{} at one point, {}:{} -> {}:{} at the other",
                            a.endpoints[ca].0,
                            a.endpoints[ca].1,
                            a.endpoints[1 - ca].0,
                            a.endpoints[1 - ca].1,
                            b.endpoints[cb].0,
                            b.endpoints[cb].1,
                            b.endpoints[1 - cb].0,
                            b.endpoints[1 - cb].1
                        ),
                    )
                }
            };
            let (kind, why) = match (ac, bc, as_, bs) {
                (Some(x), Some(y), Some(u), Some(v)) if x == y && u == v => tuple(format!("both ISNs equal ({x} and {u})")),
                (Some(x), Some(y), Some(u), Some(v)) if x == y => (
                    MatchKind::SynAnsweredInMiddle,
                    format!("the client's ISN {x} at both points; the SYN-ACK's ISN {u} at one, {v} at the other"),
                ),
                // one leg of the handshake missing at one point (a capture
                // of one direction): the ISN both saw
                (Some(x), Some(y), _, _) if x == y => tuple(format!("the client's ISN {x} at both points (the SYN-ACK missing at one)")),
                (_, _, Some(u), Some(v)) if u == v => tuple(format!("the server's ISN {u} at both points (the SYN missing at one)")),
                _ => continue,
            };
            let t = |f: &Fingerprint| if ac.is_some() && bc.is_some() { f.syn_ns() } else { f.synack_ns() };
            let (Some(ta), Some(tb)) = (t(a), t(b)) else { continue };
            found.push((i, j, Match { ids: [a.id, b.id], kind, client_side: [ca, cb], reference_ns: [ta, tb], evidence: vec![why] }));
        }
    }
    // one offset for all: drop the matches that disagree with the median
    let offset = median_offset(found.iter().map(|(_, _, m)| m));
    let mut matches = Vec::new();
    for (i, j, m) in found {
        if offset.is_some_and(|o| (m.offset() - o).abs() > OFFSET_AGREEMENT_NS) || used[0][i] || used[1][j] {
            continue;
        }
        used[0][i] = true;
        used[1][j] = true;
        matches.push(m);
    }
    matches.sort_by_key(|m| m.ids);
    (matches, offset, used)
}

fn prefix_eq(x: &[u8], y: &[u8], min: usize) -> bool {
    let n = x.len().min(y.len());
    n >= min && x[..n] == y[..n]
}

/// A proxy's two connections: the client's first bytes (at least
/// [`CONTENT_MIN_BYTES`]) and the server's first bytes equal, one to one,
/// the closest in time (after `offset` when it is known) first.
pub fn match_by_content(fps: [&[Fingerprint]; 2], used: &mut Used, offset: Option<i64>) -> Vec<Match> {
    // capture 1's unmatched connections by their client's first bytes
    let mut by_prefix: HashMap<&[u8], Vec<usize>> = HashMap::default();
    for (j, b) in fps[1].iter().enumerate() {
        if let Some(cb) = b.client().filter(|_| !used[1][j]) {
            if b.prefix[cb].len() >= CONTENT_MIN_BYTES {
                by_prefix.entry(&b.prefix[cb][..CONTENT_MIN_BYTES]).or_default().push(j);
            }
        }
    }
    let mut cands: Vec<(i64, usize, usize)> = Vec::new();
    for (i, a) in fps[0].iter().enumerate() {
        let Some(ca) = a.client().filter(|_| !used[0][i]) else { continue };
        let Some(js) = a.prefix[ca].get(..CONTENT_MIN_BYTES).and_then(|k| by_prefix.get(k)) else { continue };
        for &j in js {
            let b = &fps[1][j];
            let cb = b.client().unwrap_or(0);
            if !prefix_eq(&a.prefix[ca], &b.prefix[cb], CONTENT_MIN_BYTES) {
                continue;
            }
            // the answers must agree too, when both carried one
            let (ra, rb) = (&a.prefix[1 - ca], &b.prefix[1 - cb]);
            if !ra.is_empty() && !rb.is_empty() && !prefix_eq(ra, rb, 1) {
                continue;
            }
            let Some(off) = causal_offset(a, ca, b, cb, offset) else { continue };
            cands.push(((off - offset.unwrap_or(0)).abs(), i, j));
        }
    }
    cands.sort();
    let mut out = Vec::new();
    for (_, i, j) in cands {
        if used[0][i] || used[1][j] {
            continue;
        }
        used[0][i] = true;
        used[1][j] = true;
        let (a, b) = (&fps[0][i], &fps[1][j]);
        let (ca, cb) = (a.client().unwrap_or(0), b.client().unwrap_or(0));
        let n = a.prefix[ca].len().min(b.prefix[cb].len());
        out.push(Match {
            ids: [a.id, b.id],
            kind: MatchKind::Proxied,
            client_side: [ca, cb],
            reference_ns: [a.first_data_ns[ca].unwrap_or(a.first_ns), b.first_data_ns[cb].unwrap_or(b.first_ns)],
            evidence: vec![format!(
                "different ISNs, the same first {n} bytes from the client ({}){}; {} and {} bytes to the client",
                printable(&a.prefix[ca][..n]),
                if a.prefix[1 - ca].is_empty() { String::new() } else { " and from the server".to_string() },
                a.bytes[1 - ca].max(1) - 1,
                b.bytes[1 - cb].max(1) - 1
            )],
        });
    }
    out
}

/// The clock offset (capture 1 minus capture 0) nearest the expected one
/// under which `a` and `b` can be a proxy's two halves, with either capture
/// on the client's side ([`CONTENT_MAX_CLOCK_OFFSET_NS`]); None if there is
/// none. The request's first byte reaches the server's side after the
/// client's; the answer's first and last bytes reach the client's side
/// after the server's.
fn causal_offset(a: &Fingerprint, ca: usize, b: &Fingerprint, cb: usize, expected: Option<i64>) -> Option<i64> {
    let (center, tol) = match expected {
        Some(o) => (o, OFFSET_AGREEMENT_NS),
        None => (0, CONTENT_MAX_CLOCK_OFFSET_NS),
    };
    let req = b.first_data_ns[cb]? - a.first_data_ns[ca]?;
    let answers: Vec<i64> = [
        b.first_data_ns[1 - cb].zip(a.first_data_ns[1 - ca]),
        b.last_data_ns[1 - cb].zip(a.last_data_ns[1 - ca]),
    ]
    .into_iter()
    .flatten()
    .map(|(x, y)| x - y)
    .collect();
    let mut best: Option<i64> = None;
    // capture 0 on the client's side: answers <= offset <= req; on the
    // server's side: req <= offset <= answers
    for (lo, hi) in [
        (answers.iter().copied().max().unwrap_or(i64::MIN), req),
        (req, answers.iter().copied().min().unwrap_or(i64::MAX)),
    ] {
        let (lo, hi) = (lo.max(center - tol), hi.min(center + tol));
        if lo <= hi {
            let o = center.clamp(lo, hi);
            if best.is_none_or(|b| (o - center).abs() < (b - center).abs()) {
                best = Some(o);
            }
        }
    }
    best
}

fn printable(b: &[u8]) -> String {
    b.iter().map(|&c| if (0x20..0x7f).contains(&c) { c as char } else { '.' }).collect()
}

pub(crate) fn median(mut v: Vec<i64>) -> Option<i64> {
    if v.is_empty() {
        return None;
    }
    let mid = v.len() / 2;
    Some(*v.select_nth_unstable(mid).1)
}
