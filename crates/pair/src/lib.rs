//! Two captures of one path (`tcpwhy diagnose --pair A B`).
//!
//! Experts capture at both ends when one capture cannot settle a case;
//! this crate does the comparison they do by hand, in two passes over
//! each capture (both captures read at once, one thread each):
//!
//! 1. [`fingerprint`]: each connection's handshake, ISNs and first bytes;
//!    [`matching`] pairs the connections (the same connection by its ISNs,
//!    through NAT too; a proxy's two connections by content).
//! 2. [`stream`] merges the matched connections' packets in time order;
//!    [`compare`] pairs each packet's copies, bounds the clocks by
//!    causality and places each loss before, between or after the points;
//!    [`proxy`] follows the bytes through a terminating proxy.
//!
//! [`findings`] turns that into the paired verdict: what, where, the box's
//! parameter and its fix. Memory is bounded by the connections and what is
//! in flight, never by the captures' length.

pub mod compare;
pub mod fingerprint;
pub mod findings;
pub mod matching;
pub mod model;
pub mod proxy;
pub mod samples;
pub mod stream;

use compare::ConnCompare;
use fingerprint::{Fingerprint, Fingerprints};
use foldhash::{HashMap, HashSet};
use matching::{Match, MatchKind};
use model::*;
use findings::StateRef;
use proxy::ProxyCompare;
use samples::ms;
use std::path::Path;
use tcpwhy_flow::{analyze_capture, AnalyzeOptions, CaptureAnalysis};
use tcpwhy_wire::{CaptureError, CaptureReader};

#[derive(Debug, Clone, Copy)]
pub struct PairOptions {
    pub max_connections: usize,
}

impl Default for PairOptions {
    fn default() -> Self {
        PairOptions { max_connections: tcpwhy_flow::MAX_CONNECTIONS_DEFAULT }
    }
}

/// Why two captures could not be compared at all.
#[derive(Debug)]
pub enum PairError {
    /// A capture could not be opened.
    Open(CaptureError),
}

impl std::fmt::Display for PairError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PairError::Open(e) => write!(f, "{e}"),
        }
    }
}

fn fingerprints(path: &Path, opt: PairOptions) -> Result<Vec<Fingerprint>, PairError> {
    let reader = CaptureReader::open(path).map_err(PairError::Open)?;
    let mut sink = Fingerprints::default();
    let options = AnalyzeOptions { max_connections: opt.max_connections, ..Default::default() };
    analyze_capture(reader, options, &mut sink, |_| {});
    let mut v: Vec<Fingerprint> = sink.by_id.into_values().collect();
    v.sort_by_key(|f| f.id);
    Ok(v)
}

/// One matched pair's comparison.
enum State {
    Same(ConnCompare),
    Proxy(ProxyCompare),
}

/// The capture nearer the client, and how that was told. SYN to SYN-ACK
/// (or the first request byte to the first answer byte, through a proxy)
/// is longer the farther the point is from the server.
fn client_point(m: &Match, fp: [&Fingerprint; 2]) -> (usize, String) {
    let gap = |f: &Fingerprint, c: usize| -> Option<i64> {
        if m.kind == MatchKind::Proxied {
            Some(f.first_data_ns[1 - c]? - f.first_data_ns[c]?)
        } else {
            f.handshake_gap_ns()
        }
    };
    let what = if m.kind == MatchKind::Proxied { "request to answer" } else { "SYN to SYN-ACK" };
    match (gap(fp[0], m.client_side[0]), gap(fp[1], m.client_side[1])) {
        (Some(a), Some(b)) => {
            let p = usize::from(b > a);
            (p, format!("{what}: {:.3} ms at capture {p}, {:.3} ms at capture {}", ms(a.max(b)), ms(a.min(b)), 1 - p))
        }
        _ => (0, format!("{what} not seen at both points: capture 0 assumed nearer the client")),
    }
}



/// Compares two captures of one path, reading each a first time for its
/// connections' fingerprints.
pub fn pair_files(paths: [&Path; 2], opt: PairOptions) -> Result<PairReport, PairError> {
    let (f0, f1) = std::thread::scope(|s| {
        let h = s.spawn(|| fingerprints(paths[1], opt));
        let a = fingerprints(paths[0], opt);
        (a, h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
    });
    pair_with(paths, [f0?, f1?], true, opt)
}

/// Compares two captures of one path that `diagnose` has already read:
/// the fingerprints come from its connection summaries, and the first bytes
/// a proxy's halves are matched by from the comparison's own pass (a third
/// pass then reads the proxied connections, only when there are any).
pub fn pair_analyses(paths: [&Path; 2], analyses: [&CaptureAnalysis; 2], opt: PairOptions) -> Result<PairReport, PairError> {
    let fps = analyses.map(|a| a.connections.iter().filter_map(Fingerprint::from_summary).collect::<Vec<_>>());
    pair_with(paths, fps, false, opt)
}

/// The matched pairs and what the passes learn of them.
struct Pairs {
    matches: Vec<Match>,
    states: Vec<State>,
    sides: Vec<(usize, String)>,
    owner: HashMap<(usize, u64), usize>,
    first_adj: Option<i64>,
}

impl Pairs {
    fn add(&mut self, m: Match, fps: &[HashMap<u64, &Fingerprint>; 2]) {
        let fp = [fps[0][&m.ids[0]], fps[1][&m.ids[1]]];
        let (cp, why) = client_point(&m, fp);
        let i = self.matches.len();
        self.owner.insert((0, m.ids[0]), i);
        self.owner.insert((1, m.ids[1]), i);
        self.states.push(if m.kind.same_connection() {
            State::Same(ConnCompare::new(m.client_side, cp, fp[cp].handshake_gap_ns()))
        } else {
            let totals = |k: usize| {
                let side = |p: usize| if k == 0 { m.client_side[p] } else { 1 - m.client_side[p] };
                [fp[0].bytes[side(0)], fp[1].bytes[side(1)]]
            };
            State::Proxy(ProxyCompare::new(m.client_side, cp, [totals(0), totals(1)], fp[cp].handshake_gap_ns()))
        });
        self.sides.push((cp, why));
        self.matches.push(m);
    }

    /// Reads both captures once, feeding the pairs of `kinds` their
    /// packets; with `prefixes`, returns the other connections' first bytes.
    fn pass(&mut self, paths: [&Path; 2], which: impl Fn(&Match) -> bool, offset: i64, prefixes: bool, opt: PairOptions) -> Result<[stream::Prefixes; 2], PairError> {
        let wanted = |p: usize| -> HashSet<u64> { self.matches.iter().filter(|m| which(m)).map(|m| m.ids[p]).collect() };
        let (w0, w1) = (wanted(0), wanted(1));
        let readers = [CaptureReader::open(paths[0]).map_err(PairError::Open)?, CaptureReader::open(paths[1]).map_err(PairError::Open)?];
        let [r0, r1] = readers;
        let (owner, states, first_adj) = (&self.owner, &mut self.states, &mut self.first_adj);
        Ok(std::thread::scope(|s| {
            let (rx0, h0) = stream::spawn_reader(s, r0, w0, opt.max_connections, prefixes);
            let (rx1, h1) = stream::spawn_reader(s, r1, w1, opt.max_connections, prefixes);
            stream::merge([stream::Cursor::new(rx0), stream::Cursor::new(rx1)], offset, |p, r| {
                let Some(&i) = owner.get(&(p, r.conn)) else { return };
                let adj = if p == 0 { r.time_ns } else { r.time_ns - offset };
                first_adj.get_or_insert(adj);
                match &mut states[i] {
                    State::Same(c) => c.record(p, &r, adj),
                    State::Proxy(x) => x.record(p, &r),
                }
            });
            let join = |h: std::thread::ScopedJoinHandle<'_, stream::Prefixes>| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
            [join(h0), join(h1)]
        }))
    }
}

fn pair_with(paths: [&Path; 2], mut fps: [Vec<Fingerprint>; 2], prefixes_known: bool, opt: PairOptions) -> Result<PairReport, PairError> {
    let (isn_matches, coarse, mut used) = matching::match_by_isn([&fps[0], &fps[1]]);
    let mut proxied =
        if prefixes_known { matching::match_by_content([&fps[0], &fps[1]], &mut used, coarse) } else { Vec::new() };
    let mut pairs = Pairs { matches: Vec::new(), states: Vec::new(), sides: Vec::new(), owner: HashMap::default(), first_adj: None };
    {
        let index: [HashMap<u64, &Fingerprint>; 2] = [fps[0].iter().map(|f| (f.id, f)).collect(), fps[1].iter().map(|f| (f.id, f)).collect()];
        for m in isn_matches.into_iter().chain(proxied.drain(..)) {
            pairs.add(m, &index);
        }
    }
    let offset = coarse.or_else(|| matching::median(pairs.matches.iter().map(|m| m.reference_ns[1] - m.reference_ns[0]).collect()));
    // the first pass: every pair known so far (a pair with a SYN answered in
    // the middle has no packet in common to compare)
    let found = pairs.pass(paths, |m| m.kind != MatchKind::SynAnsweredInMiddle, offset.unwrap_or(0), !prefixes_known, opt)?;
    if !prefixes_known {
        for (p, got) in found.into_iter().enumerate() {
            for f in &mut fps[p] {
                if let Some(x) = got.get(&f.id) {
                    f.prefix = x.clone();
                }
            }
        }
        let late = matching::match_by_content([&fps[0], &fps[1]], &mut used, coarse);
        if !late.is_empty() {
            let index: [HashMap<u64, &Fingerprint>; 2] = [fps[0].iter().map(|f| (f.id, f)).collect(), fps[1].iter().map(|f| (f.id, f)).collect()];
            let first_new = pairs.matches.len();
            for m in late {
                pairs.add(m, &index);
            }
            let off = offset.or_else(|| matching::median(pairs.matches[first_new..].iter().map(|m| m.reference_ns[1] - m.reference_ns[0]).collect()));
            let new_ids: HashSet<[u64; 2]> = pairs.matches[first_new..].iter().map(|m| m.ids).collect();
            pairs.pass(paths, |m| new_ids.contains(&m.ids), off.unwrap_or(0), false, opt)?;
        }
    }
    report(paths, &fps, pairs, coarse)
}

fn report(paths: [&Path; 2], fps: &[Vec<Fingerprint>; 2], mut pairs: Pairs, coarse: Option<i64>) -> Result<PairReport, PairError> {
    for s in &mut pairs.states {
        if let State::Same(c) = s {
            c.finish();
        }
    }
    let index: [HashMap<u64, &Fingerprint>; 2] = [fps[0].iter().map(|f| (f.id, f)).collect(), fps[1].iter().map(|f| (f.id, f)).collect()];
    let files = [paths[0].display().to_string(), paths[1].display().to_string()];
    let n = pairs.matches.len();
    let mut report = PairReport {
        schema: PAIR_SCHEMA,
        files,
        connections: [fps[0].len(), fps[1].len()],
        clock: Clock { offset_ms: None, consistent: true, handshake_offset_ms: coarse.map(ms) },
        pairs: Vec::new(),
        unmatched: [fps[0].len() - n, fps[1].len() - n],
        messages: Vec::new(),
    };
    let (mut lo, mut hi) = (i64::MIN, i64::MAX);
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| pairs.matches[i].ids);
    for i in order {
        let m = &pairs.matches[i];
        let fp = [index[0][&m.ids[0]], index[1][&m.ids[1]]];
        let (cp, why) = pairs.sides[i].clone();
        let pc = findings::paired(m, fp, s_ref(&pairs.states[i]), cp, why, pairs.first_adj.unwrap_or(0));
        if let Some([a, b]) = pc.offset_ms {
            lo = lo.max((a * 1e6) as i64);
            hi = hi.min((b * 1e6) as i64);
        }
        report.pairs.push(pc);
    }
    if lo > i64::MIN && hi < i64::MAX {
        if lo <= hi {
            report.clock.offset_ms = Some([ms(lo), ms(hi)]);
        } else {
            report.clock.consistent = false;
            report.messages.push(format!(
                "the clocks cannot be aligned: packets bound capture 1's clock minus capture 0's below by {:.3} ms and above by {:.3} ms (a clock stepped or drifted during the captures)",
                ms(lo),
                ms(hi)
            ));
        }
    }
    if n == 0 {
        report.messages.push(no_match_message(fps));
    }
    Ok(report)
}


fn s_ref(s: &State) -> StateRef<'_> {
    match s {
        State::Same(c) => StateRef::Same(c),
        State::Proxy(p) => StateRef::Proxy(p),
    }
}

/// Why nothing matched: different connections, or times that do not overlap.
fn no_match_message(fps: &[Vec<Fingerprint>; 2]) -> String {
    let span = |v: &Vec<Fingerprint>| -> Option<(i64, i64)> {
        Some((v.iter().map(|f| f.first_ns).min()?, v.iter().map(|f| f.last_ns).max()?))
    };
    let handshakes = |v: &Vec<Fingerprint>| v.iter().filter(|f| f.client().is_some()).count();
    match (span(&fps[0]), span(&fps[1])) {
        (Some(a), Some(b)) => format!(
            "no connection of the first capture is in the second: none shares both initial sequence numbers or the first bytes of a proxied stream \
             ({} and {} connections, {} and {} with a handshake; the captures span {:.3} s and {:.3} s). \
             They are captures of different connections, or of times that do not overlap (their clocks may differ, so times alone do not tell).",
            fps[0].len(),
            fps[1].len(),
            handshakes(&fps[0]),
            handshakes(&fps[1]),
            (a.1 - a.0) as f64 / 1e9,
            (b.1 - b.0) as f64 / 1e9
        ),
        _ => "one capture holds no TCP connection: nothing to pair".to_string(),
    }
}
