//! Two captures of one path (`tcpwhy diagnose --pair A B`).
//!
//! Experts capture at both ends when one capture cannot settle a case;
//! this crate does the comparison they do by hand:
//!
//! 1. [`fingerprint`]: each connection's handshake, ISNs and data, from the
//!    read `diagnose` already made of each capture; [`matching`] pairs the
//!    connections by their ISNs (the same connection, through NAT too).
//! 2. [`stream`] reads each point's records (spilled during the
//!    diagnosis's read, [`stream::Spill`], or read from the capture again)
//!    and merges the matched connections' packets in time order; [`compare`]
//!    pairs each packet's copies, bounds the clocks by causality and places
//!    each loss before, between or after the points. The first bytes of
//!    the other connections (kept by the spill, or taken by the same read)
//!    let [`matching`] pair a terminating proxy's two connections; a
//!    further pass, of those only, feeds [`proxy`], which follows the
//!    bytes through the proxy.
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

use compare::{ConnCompare, Keep};
use findings::Comparison;
use fingerprint::Fingerprint;
use foldhash::{HashMap, HashSet};
use matching::{Match, MatchKind};
use model::*;
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

/// Compares two captures of one path, reading each for its connections
/// first (as `diagnose` does; [`pair_analyses`] takes those reads).
pub fn pair_files(paths: [&Path; 2], opt: PairOptions) -> Result<PairReport, PairError> {
    let analyse = |path: &Path| -> Result<CaptureAnalysis, PairError> {
        let reader = CaptureReader::open(path).map_err(PairError::Open)?;
        let options = AnalyzeOptions { max_connections: opt.max_connections, ..Default::default() };
        Ok(analyze_capture(reader, options, &mut (), |_| {}))
    };
    let (a0, a1) = std::thread::scope(|s| {
        let h = s.spawn(|| analyse(paths[1]));
        (analyse(paths[0]), h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
    });
    pair_analyses(paths, [&a0?, &a1?], opt)
}

/// One matched pair: the match, the capture nearer the client and how that
/// was told, and what the reads learn of it.
struct Entry {
    m: Match,
    client_point: usize,
    why: String,
    comparison: Comparison,
    /// The direction (0: the client's data) that carried the more bytes at
    /// capture 0: the comparison's heaviest state ([`Keep::share`]).
    heavy: usize,
}

/// Each capture's fingerprints by connection id.
fn index(fps: &[Vec<Fingerprint>; 2]) -> [HashMap<u64, &Fingerprint>; 2] {
    [fps[0].iter().map(|f| (f.id, f)).collect(), fps[1].iter().map(|f| (f.id, f)).collect()]
}

/// The matched pairs and what the reads learn of them.
#[derive(Default)]
struct Pairs {
    entries: Vec<Entry>,
    first_adj: Option<i64>,
}

impl Pairs {
    fn add(&mut self, m: Match, fps: &[HashMap<u64, &Fingerprint>; 2]) {
        let fp = [fps[0][&m.ids[0]], fps[1][&m.ids[1]]];
        let (cp, why) = client_point(&m, fp);
        let comparison = if m.kind.segments_comparable() {
            let answered = m.kind == MatchKind::SynAnsweredInMiddle;
            Comparison::Same(ConnCompare::new(m.client_side, cp, fp[cp].handshake_gap_ns(), answered))
        } else {
            let totals = |k: usize| [fp[0].bytes[m.side(0, k)], fp[1].bytes[m.side(1, k)]];
            Comparison::Proxy(ProxyCompare::new(m.client_side, cp, [totals(0), totals(1)], fp[cp].handshake_gap_ns()))
        };
        let bytes = |k: usize| fp[0].bytes[m.side(0, k)];
        let heavy = usize::from(bytes(1) > bytes(0));
        self.entries.push(Entry { m, client_point: cp, why, comparison, heavy });
    }

    /// Each point's wanted connections (those of the pairs `which`
    /// selects), with their pair's index.
    fn wanted(&self, which: impl Fn(&Match) -> bool) -> [stream::Wanted; 2] {
        [0, 1].map(|p| self.entries.iter().enumerate().filter(|(_, e)| which(&e.m)).map(|(i, e)| (e.m.ids[p], i as u32)).collect())
    }

    /// Reads both points' records once, feeding the pairs `which` selects
    /// their packets; from captures with `prefixes`, returns the other
    /// connections' first bytes (a spill kept them already).
    fn read(&mut self, src: &Sources, which: impl Fn(&Match) -> bool, offset: i64, prefixes: bool, opt: PairOptions) -> Result<[stream::Prefixes; 2], PairError> {
        match *src {
            Sources::Spills(sp) => {
                self.read_spills(sp, which, offset);
                Ok(Default::default())
            }
            Sources::Captures(paths) => self.read_captures(paths, which, offset, prefixes, opt),
        }
    }

    /// Both captures read again at once, one thread each, merged here.
    fn read_captures(&mut self, paths: [&Path; 2], which: impl Fn(&Match) -> bool, offset: i64, prefixes: bool, opt: PairOptions) -> Result<[stream::Prefixes; 2], PairError> {
        let [w0, w1] = self.wanted(which);
        let r0 = CaptureReader::open(paths[0]).map_err(PairError::Open)?;
        let r1 = CaptureReader::open(paths[1]).map_err(PairError::Open)?;
        let (entries, first_adj) = (&mut self.entries, &mut self.first_adj);
        Ok(std::thread::scope(|s| {
            let (rx0, h0) = stream::spawn_reader(s, r0, w0, opt.max_connections, prefixes);
            let (rx1, h1) = stream::spawn_reader(s, r1, w1, opt.max_connections, prefixes);
            stream::merge([stream::Cursor::new(rx0), stream::Cursor::new(rx1)], offset, |p, r| {
                let t = adjusted(p, r, offset);
                first_adj.get_or_insert(t);
                entries[r.entry as usize].comparison.record(p, r, t);
            });
            let join = |h: std::thread::ScopedJoinHandle<'_, stream::Prefixes>| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
            [join(h0), join(h1)]
        }))
    }

    /// The records spilled at both points, merged twice at once: this
    /// thread keeps each comparison's first share of its states
    /// ([`Keep::share`]; and the proxies'), a second thread the other
    /// share, each merging both spills on its own (decoding a record is
    /// cheaper than handing it between cores). The shares are joined
    /// after.
    fn read_spills(&mut self, sp: [&stream::Spilled; 2], which: impl Fn(&Match) -> bool, offset: i64) {
        let wanted = self.wanted(&which);
        let shares: Vec<Option<(ConnCompare, Keep)>> = self
            .entries
            .iter()
            .map(|e| match &e.comparison {
                Comparison::Same(c) if which(&e.m) => Some((c.clone(), Keep::share(e.heavy, 1))),
                _ => None,
            })
            .collect();
        let cursors = |w: &[stream::Wanted; 2]| [stream::Cursor::spilled(sp[0], w[0].clone()), stream::Cursor::spilled(sp[1], w[1].clone())];
        let (entries, first_adj) = (&mut self.entries, &mut self.first_adj);
        std::thread::scope(|s| {
            let second = cursors(&wanted);
            let h = s.spawn(move || {
                let mut shares = shares;
                stream::merge(second, offset, |p, r| {
                    if let Some((c, keep)) = shares[r.entry as usize].as_mut() {
                        c.record_share(p, r, adjusted(p, r, offset), *keep);
                    }
                });
                shares
            });
            stream::merge(cursors(&wanted), offset, |p, r| {
                let t = adjusted(p, r, offset);
                first_adj.get_or_insert(t);
                let e = &mut entries[r.entry as usize];
                match &mut e.comparison {
                    Comparison::Same(c) => c.record_share(p, r, t, Keep::share(e.heavy, 0)),
                    other => other.record(p, r, t),
                }
            });
            let shares = h.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
            for (e, share) in entries.iter_mut().zip(shares) {
                if let (Comparison::Same(c), Some((share, keep))) = (&mut e.comparison, share) {
                    c.take_share(share, keep);
                }
            }
        });
    }
}

/// A record's time on capture 0's clock (capture 1's moved back by the
/// coarse `offset`).
fn adjusted(p: usize, r: &stream::Rec, offset: i64) -> i64 {
    if p == 0 { r.time_ns } else { r.time_ns - offset }
}

/// Where both points' records are read from: the captures (analysed
/// again), or the spills their diagnoses wrote.
enum Sources<'a> {
    Captures([&'a Path; 2]),
    Spills([&'a stream::Spilled; 2]),
}

/// Compares two captures of one path that have already been read (as
/// `diagnose` reads them): the fingerprints come from their connection
/// summaries.
pub fn pair_analyses(paths: [&Path; 2], analyses: [&CaptureAnalysis; 2], opt: PairOptions) -> Result<PairReport, PairError> {
    pair_from(paths, analyses, Sources::Captures(paths), None, opt)
}

/// [`pair_analyses`] with the records the diagnosis's read spilled
/// ([`stream::Spill`]) instead of a second read of each capture: the same
/// report. A spill that was given up means reading the captures again.
pub fn pair_spilled(paths: [&Path; 2], analyses: [&CaptureAnalysis; 2], spills: [stream::Spill; 2], opt: PairOptions) -> Result<PairReport, PairError> {
    let [s0, s1] = spills;
    match (s0.finish(), s1.finish()) {
        (Some((f0, p0)), Some((f1, p1))) => pair_from(paths, analyses, Sources::Spills([&f0, &f1]), Some([p0, p1]), opt),
        _ => pair_analyses(paths, analyses, opt),
    }
}

fn pair_from(paths: [&Path; 2], analyses: [&CaptureAnalysis; 2], src: Sources, spilled_prefixes: Option<[stream::Prefixes; 2]>, opt: PairOptions) -> Result<PairReport, PairError> {
    let mut fps = analyses.map(|a| a.connections.iter().filter_map(Fingerprint::from_summary).collect::<Vec<_>>());
    let (isn_matches, coarse, mut used) = matching::match_by_isn([&fps[0], &fps[1]]);
    let mut pairs = Pairs::default();
    let idx = index(&fps);
    for m in isn_matches {
        pairs.add(m, &idx);
    }
    // every pair with packets in common, and the others' first bytes
    let read = pairs.read(&src, |_| true, coarse.unwrap_or(0), spilled_prefixes.is_none(), opt)?;
    let found = spilled_prefixes.unwrap_or(read);
    for (p, got) in found.into_iter().enumerate() {
        for f in &mut fps[p] {
            if let Some(x) = got.get(&f.id) {
                f.prefix = x.clone();
            }
        }
    }
    let proxied = matching::match_by_content([&fps[0], &fps[1]], &mut used, coarse);
    if !proxied.is_empty() {
        let offset = coarse.or_else(|| matching::median_offset(&proxied));
        let new_ids: HashSet<[u64; 2]> = proxied.iter().map(|m| m.ids).collect();
        let idx = index(&fps);
        for m in proxied {
            pairs.add(m, &idx);
        }
        pairs.read(&src, |m| new_ids.contains(&m.ids), offset.unwrap_or(0), false, opt)?;
    }
    Ok(report(paths, &fps, pairs, coarse))
}

fn report(paths: [&Path; 2], fps: &[Vec<Fingerprint>; 2], mut pairs: Pairs, coarse: Option<i64>) -> PairReport {
    let idx = index(fps);
    let n = pairs.entries.len();
    let mut report = PairReport {
        schema: PAIR_SCHEMA,
        files: [paths[0].display().to_string(), paths[1].display().to_string()],
        connections: [fps[0].len(), fps[1].len()],
        clock: Clock { offset_ms: None, consistent: true, handshake_offset_ms: coarse.map(ms) },
        pairs: Vec::new(),
        unmatched: [fps[0].len() - n, fps[1].len() - n],
        messages: Vec::new(),
    };
    let (mut lo, mut hi) = (i64::MIN, i64::MAX);
    pairs.entries.sort_by_key(|e| e.m.ids);
    for e in &mut pairs.entries {
        e.comparison.finish();
        if let Some((a, b)) = e.comparison.offset_bounds() {
            lo = lo.max(a);
            hi = hi.min(b);
        }
        let fp = [idx[0][&e.m.ids[0]], idx[1][&e.m.ids[1]]];
        report.pairs.push(findings::paired(&e.m, fp, &e.comparison, e.client_point, e.why.clone(), pairs.first_adj.unwrap_or(0)));
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
    report
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
