//! The paired verdict: what each box between the points did, and where
//! the loss, the delay and the limit are. Each finding names its location
//! and, where it measures one, the box's parameter.

use crate::compare::{ConnCompare, DirCompare};
use crate::fingerprint::Fingerprint;
use crate::matching::{Match, MatchKind};
use crate::model::*;
use crate::proxy::{ProxyCompare, RELEASE_MAX_WINDOW_SHARE};
use crate::samples::ms;
use crate::stream::Rec;
use tcpwhy_core::units::fmt_rate;
use tcpwhy_flow::SynOptions;

pub use crate::compare::QUEUE_MIN_GROWTH_NS;

/// A queue beyond the downstream point: the median RTT seen there grows
/// this many times more than the one-way delay between the points. The
/// median, because data-to-ACK samples of a receiver that delays its ACKs
/// (up to 40 ms on Linux, TCP_DELACK_MIN; 200 ms elsewhere, RFC 9293
/// 3.8.6.3) inflate the upper quantiles of any short transfer.
pub const QUEUE_BEYOND_RATIO: f64 = 2.0;

/// Delay findings need this many paired packets (or RTT samples): a
/// handful of a control connection's packets tell no queue.
pub const DELAY_MIN_SAMPLES: u64 = 50;

/// A delay that rose and stayed is a step (a route change, a box that
/// holds every packet the same time), not a queue that builds and drains:
/// its median growth is at least this share of the 95th percentile.
pub const DELAY_STEP_MEDIAN_SHARE: f64 = 0.75;

/// Through a proxy, the server counts as done long before the client when
/// the client's transfer lasted this many times longer.
pub const PROXY_HELD_MIN_RATIO: f64 = 2.0;

/// A window without scaling carries at most this (RFC 7323 section 2.2).
const UNSCALED_WINDOW_MAX: f64 = 65535.0;

/// What the reads learn of one matched pair.
pub enum Comparison {
    /// One connection seen at both points.
    Same(ConnCompare),
    /// A terminating proxy's two connections, one at each point.
    Proxy(ProxyCompare),
}

impl Comparison {
    pub fn record(&mut self, p: usize, r: &Rec, adj_ns: i64) {
        match self {
            Comparison::Same(c) => c.record(p, r, adj_ns),
            Comparison::Proxy(x) => x.record(p, r),
        }
    }

    /// The reads have ended.
    pub fn finish(&mut self) {
        if let Comparison::Same(c) = self {
            c.finish();
        }
    }

    /// Bounds on capture 1's clock minus capture 0's, from causality.
    pub fn offset_bounds(&self) -> Option<(i64, i64)> {
        match self {
            Comparison::Same(c) => c.offset_bounds(),
            Comparison::Proxy(x) => x.offset_bounds(),
        }
    }
}

fn conn_ref(capture: usize, fp: &Fingerprint, client: usize) -> ConnRef {
    let e = |s: usize| format!("{}:{}", fp.endpoints[s].0, fp.endpoints[s].1);
    ConnRef { capture, id: fp.id, client: e(client), server: e(1 - client) }
}

pub(crate) fn paired(m: &Match, fp: [&Fingerprint; 2], s: &Comparison, cp: usize, why: String, t0: i64) -> PairedConnection {
    let mut pc = PairedConnection {
        connections: [conn_ref(0, fp[0], m.client_side[0]), conn_ref(1, fp[1], m.client_side[1])],
        kind: m.kind,
        evidence: m.evidence.clone(),
        client_capture: cp,
        client_capture_by: why,
        offset_ms: s.offset_bounds().map(|(lo, hi)| [ms(lo), ms(hi)]),
        directions: Vec::new(),
        proxy: Vec::new(),
        changes: Vec::new(),
        findings: Vec::new(),
        capacities: Vec::new(),
    };
    handshake_changes(m, fp, cp, &mut pc.changes);
    match s {
        Comparison::Same(c) => same_connection(c, t0, &mut pc),
        Comparison::Proxy(x) => proxied(x, fp, m, &mut pc),
    }
    // the round trip the client's window has to cover: the proxy's own
    // (its connection to the client), else the client's handshake's
    let rtt_ms = pc.proxy.iter().find_map(|p| p.round_trip_ms).or_else(|| fp[cp].handshake_gap_ns().map(ms));
    let from_changes = change_findings(&pc.changes, rtt_ms);
    pc.findings.extend(from_changes);
    if pc.findings.is_empty() {
        pc.findings.push(Finding {
            kind: "nothing_between",
            location: "between".into(),
            text: "the two captures agree: no loss, no queue and no change between the points".into(),
            fix: None,
            value: None,
        });
    }
    pc
}

/// How a change is told: "{left} <before>{arrived} <after>". In flight:
/// "the client's SYN left with MSS 1460 and arrived with MSS 1200"; across
/// a box that answered the handshake itself: "the server's SYN-ACK with
/// ...; the proxy's SYN-ACK to the client came with ...".
struct Telling {
    left: String,
    arrived: String,
    /// The box answered with its own options (a proxy, a SYN proxy):
    /// nothing was stripped in flight, it was not offered to the client.
    answered_in_middle: bool,
}

impl Telling {
    fn in_flight(who: &str) -> Telling {
        Telling { left: format!("{who} left"), arrived: " and arrived".into(), answered_in_middle: false }
    }
}

/// What a box changed in one SYN (or SYN-ACK) between leaving `up` and
/// reaching `down`.
fn compare_syn(t: &Telling, up: (usize, SynOptions), down: (usize, SynOptions), out: &mut Vec<Change>) {
    let (u, d) = (up.1, down.1);
    let (left, arrived) = (&t.left, &t.arrived);
    let frames = vec![[up.0 as u64, u.frame], [down.0 as u64, d.frame]];
    let mut add = |kind: &'static str, detail: String| out.push(Change { kind, detail, frames: frames.clone() });
    match (u.mss, d.mss) {
        (Some(a), Some(b)) if b < a => add("mss_clamped", format!("{left} with MSS {a}{arrived} with MSS {b}")),
        (Some(a), Some(b)) if b > a => add("mss_rewritten", format!("{left} with MSS {a}{arrived} with MSS {b}")),
        (Some(a), None) => add("mss_removed", format!("{left} with MSS {a}{arrived} without one")),
        _ => {}
    }
    let middle = t.answered_in_middle;
    match (u.window_scale, d.window_scale) {
        (Some(a), None) => add(
            if middle { "window_scale_not_offered_to_client" } else { "window_scale_stripped" },
            format!("{left} offering window scale {a}{arrived} without the option"),
        ),
        (Some(a), Some(b)) if a != b => add("window_scale_rewritten", format!("{left} with window scale {a}{arrived} with {b}")),
        (None, Some(b)) => add("window_scale_added", format!("{left} without window scaling{arrived} offering scale {b}")),
        _ => {}
    }
    if u.sack_permitted && !d.sack_permitted {
        add(if middle { "sack_not_offered_to_client" } else { "sack_stripped" }, format!("{left} offering SACK{arrived} without it"));
    }
    if u.timestamps && !d.timestamps {
        add(
            if middle { "timestamps_not_offered_to_client" } else { "timestamps_stripped" },
            format!("{left} with TCP timestamps{arrived} without them"),
        );
    }
}

fn handshake_changes(m: &Match, fp: [&Fingerprint; 2], cp: usize, out: &mut Vec<Change>) {
    let sp = 1 - cp;
    let c = |p: usize| m.client_side[p];
    if m.kind.same_connection() {
        if let (Some(u), Some(d)) = (fp[cp].syn[c(cp)], fp[sp].syn[c(sp)]) {
            compare_syn(&Telling::in_flight("the client's SYN"), (cp, u), (sp, d), out);
        }
        if let (Some(u), Some(d)) = (fp[sp].syn[1 - c(sp)], fp[cp].syn[1 - c(cp)]) {
            compare_syn(&Telling::in_flight("the server's SYN-ACK"), (sp, u), (cp, d), out);
        }
        return;
    }
    // a SYN-ACK the server did not send: what the client saw against what
    // the server offered
    let (Some(seen), Some(sent)) = (fp[cp].syn[1 - c(cp)], fp[sp].syn[1 - c(sp)]) else { return };
    if m.kind == MatchKind::SynAnsweredInMiddle {
        out.push(Change {
            kind: "syn_answered_in_middle",
            detail: format!(
                "the client's SYN reached the server's side, but the SYN-ACK the client saw (ISN {}) is not the server's (ISN {}): a SYN proxy or load balancer answered it",
                seen.isn, sent.isn
            ),
            frames: vec![[cp as u64, seen.frame], [sp as u64, sent.frame]],
        });
        // the box opened its own handshake to the server with a SYN built
        // from the client's (a SYN proxy's cookie keeps only some options)
        if let (Some(u), Some(d)) = (fp[cp].syn[c(cp)], fp[sp].syn[c(sp)]) {
            let t = Telling { left: "the client's SYN left".into(), arrived: "; the box's SYN to the server came".into(), answered_in_middle: false };
            compare_syn(&t, (cp, u), (sp, d), out);
        }
    }
    let who = if m.kind == MatchKind::Proxied { "the proxy's SYN-ACK to the client" } else { "the SYN-ACK" };
    // the client asked for window scaling and the box's answer refused it
    // (when the server's SYN-ACK offered it, the comparison below says so)
    let asked = fp[cp].syn[c(cp)].and_then(|s| s.window_scale);
    if let (Some(a), None, None) = (asked, seen.window_scale, sent.window_scale) {
        out.push(Change {
            kind: "window_scale_refused_in_middle",
            detail: format!(
                "{} the client saw, built by the box between the points (the server's own handshake is another), answered the client's offer of window scale {a} without window scaling",
                if m.kind == MatchKind::Proxied { "the proxy's SYN-ACK" } else { "the SYN-ACK" }
            ),
            frames: vec![[cp as u64, seen.frame]],
        });
    }
    // across a proxy nothing was stripped in flight: the box answered with
    // other options than the server's
    let telling = Telling { left: "the server's SYN-ACK".into(), arrived: format!("; {who} came"), answered_in_middle: true };
    compare_syn(&telling, (sp, sent), (cp, seen), out);
}

fn spread(d: &DirCompare, p: usize) -> Option<Spread> {
    let s = &d.rtt[p];
    Some(Spread { min: ms(s.min?.0), p50: ms(s.quantile(0.5)?), p95: ms(s.quantile(0.95)?) })
}

fn same_connection(c: &ConnCompare, t0: i64, pc: &mut PairedConnection) {
    let bounds = c.offset_bounds();
    for (k, d) in c.dirs.iter().enumerate() {
        if d.seen[0] + d.seen[1] == 0 {
            continue;
        }
        let from = if k == 0 { "client" } else { "server" };
        let delay = d.owd.min.map(|(min, _)| {
            let q = |x: f64| ms(d.owd.quantile(x).unwrap_or(min) - min);
            let (max, at) = d.owd.max.unwrap_or((min, t0));
            // downstream minus upstream raw time = delay + offset (or - offset)
            let base = bounds.map(|(lo, hi)| if d.up == 0 { [ms(min - hi), ms(min - lo)] } else { [ms(min + lo), ms(min + hi)] });
            Delay {
                base_ms: base,
                growth_p50_ms: q(0.5),
                growth_p95_ms: q(0.95),
                growth_max_ms: ms(max - min),
                growth_max_at_s: (at - t0) as f64 / 1e9,
                drain_rate_bps: drain_rate(d),
            }
        });
        pc.directions.push(PairedDirection {
            from,
            upstream_capture: d.up,
            packets: d.seen,
            paired: d.paired,
            unpaired: d.unpaired,
            loss: d.loss.clone(),
            delay,
            rtt_ms: [spread(d, 0), spread(d, 1)],
            window_rewritten: d.window_rewritten,
        });
        if d.window_rewritten > 0 {
            let (f, w) = d.first_window_rewrite.unwrap_or(([0, 0], [0, 0]));
            pc.changes.push(Change {
                kind: "window_rewritten",
                detail: format!(
                    "{} of the {from}'s packets carry another window field at each capture (first: {} at capture 0, {} at capture 1)",
                    d.window_rewritten, w[0], w[1]
                ),
                frames: vec![[0, f[0]], [1, f[1]]],
            });
        }
        loss_findings(from, d, pc);
        delay_findings(from, d, pc);
    }
}

fn loss_findings(from: &'static str, d: &DirCompare, pc: &mut PairedConnection) {
    let l = &d.loss;
    let (up, down) = (d.up, 1 - d.up);
    let share = |n: u64| 100.0 * n as f64 / l.segments.max(1) as f64;
    let mut add = |kind: &'static str, location: String, n: u64, what: String| {
        if n > 0 {
            pc.findings.push(Finding { kind, location, text: format!("{n} of {} {from} data segments ({:.2}%) {what}", l.segments, share(n)), fix: None, value: Some(n as f64) });
        }
    };
    add("loss_between", "between".into(), l.between, format!("were lost between the points (seen at capture {up}, missing at capture {down}, then sent again)"));
    add("loss_before", format!("before:{up}"), l.before_upstream, format!("were lost before capture {up} (it saw only their retransmission)"));
    add("loss_after", format!("after:{down}"), l.after_downstream, format!("were lost after capture {down} (they passed it and were still sent again, unacknowledged)"));
    let missed = |p: usize| format!("are missing from capture {p} only: the receiver had them without a retransmission, so that capture dropped them, not the network");
    add("capture_missed", format!("capture:{down}"), l.not_captured_downstream, missed(down));
    add("capture_missed", format!("capture:{up}"), l.not_captured_upstream, missed(up));
    add("needless_retransmissions", format!("sender:{from}"), l.needless_retransmissions, "were sent again after the receiver had acknowledged or SACKed them".into());
}

/// The smallest one-way delay between the points, its median and its 95th
/// percentile (ns), over at least [`DELAY_MIN_SAMPLES`] paired copies.
fn delay_quantiles(d: &DirCompare) -> Option<(i64, i64, i64)> {
    let (Some((min, _)), Some(p50), Some(p95)) = (d.owd.min, d.owd.quantile(0.5), d.owd.quantile(0.95)) else { return None };
    (d.owd.len() >= DELAY_MIN_SAMPLES).then_some((min, p50, p95))
}

/// How the one-way delay between the points grew, when it did (by at
/// least [`QUEUE_MIN_GROWTH_NS`] at the 95th percentile): `true` for a
/// step, a delay that rose and stayed ([`DELAY_STEP_MEDIAN_SHARE`]);
/// `false` for a queue that builds and drains.
fn delay_step(min: i64, p50: i64, p95: i64) -> Option<bool> {
    let growth = p95 - min;
    (growth >= QUEUE_MIN_GROWTH_NS).then(|| (p50 - min) as f64 >= DELAY_STEP_MEDIAN_SHARE * growth as f64)
}

/// The rate a queue between the points drained at; none for a delay that
/// stepped up and stayed (no queue: the gaps downstream are the sender's
/// own, not a bottleneck's service times).
fn drain_rate(d: &DirCompare) -> Option<f64> {
    let queue = delay_quantiles(d).and_then(|(min, p50, p95)| delay_step(min, p50, p95)) == Some(false);
    d.drain.rate_bps().filter(|_| queue)
}

fn delay_findings(from: &'static str, d: &DirCompare, pc: &mut PairedConnection) {
    let Some((min, p50, p95)) = delay_quantiles(d) else { return };
    let growth = p95 - min;
    let (max, _) = d.owd.max.unwrap_or((min, 0));
    let down = 1 - d.up;
    if let Some(step) = delay_step(min, p50, p95) {
        let (kind, what) = if step {
            ("delay_step_between", format!("rose by {:.1} ms and stayed there (median {:.1} ms above the smallest): the path between capture {} and capture {down} got longer or a box there holds every packet, not a queue that builds", ms(growth), ms(p50 - min), d.up))
        } else {
            // a queue, not a step: the drain rate stands (as drain_rate gives it)
            let drain = d.drain.rate_bps().map_or(String::new(), |r| {
                format!(", draining at about {} of payload: a bottleneck of that rate (a shaper or a slower link) between the points", fmt_rate(r))
            });
            ("queue_between", format!("grew by {:.1} ms (95th percentile; at most {:.1} ms): a queue between capture {} and capture {down}{drain}", ms(growth), ms(max - min), d.up))
        };
        pc.findings.push(Finding {
            kind,
            location: "between".into(),
            text: format!("the one-way delay of the {from}'s packets between the points {what}"),
            fix: None,
            value: Some(ms(growth)),
        });
    }
    let rtt = &d.rtt[down];
    let Some(g) = (|| Some(rtt.quantile(0.5)? - rtt.min?.0))() else { return };
    let between = p50 - min;
    if rtt.len() >= DELAY_MIN_SAMPLES && g >= QUEUE_MIN_GROWTH_NS && g as f64 >= QUEUE_BEYOND_RATIO * between as f64 {
        pc.findings.push(Finding {
            kind: "queue_beyond",
            location: format!("after:{down}"),
            text: format!(
                "the RTT of the {from}'s data seen at capture {down} is {:.1} ms above its smallest (median) while the delay between the points grew by {:.1} ms: the queue is beyond capture {down} (or on the ACKs' way back)",
                ms(g),
                ms(between)
            ),
            fix: None,
            value: Some(ms(g)),
        });
    }
}

fn proxied(x: &ProxyCompare, fp: [&Fingerprint; 2], m: &Match, pc: &mut PairedConnection) {
    let bounds = x.offset_bounds();
    let client_syn = fp[x.client_point].syn[m.client_side[x.client_point]];
    let seen_synack = fp[x.client_point].syn[m.side(x.client_point, 1)];
    for k in 0..2 {
        let up = x.upstream(k);
        let (u, d) = (&x.progress[k][up], &x.progress[k][1 - up]);
        let (Some(uf), Some(ul), Some(df), Some(dl)) = (u.first_ns, u.last_ns, d.first_ns, d.last_ns) else { continue };
        let from = if k == 0 { "client" } else { "server" };
        // the upstream's last byte on the downstream clock, as late as the bounds allow
        let done_down = bounds.map(|(lo, hi)| if up == 0 { d.by(ul + hi) } else { d.by(ul - lo) });
        let release = if k == 1 { x.release_per_round() } else { None };
        let rtt = x.round_gap_ns.map(|g| ms(2 * g));
        let pd = ProxyDirection {
            from,
            bytes: [x.progress[k][0].end.max(1) - 1, x.progress[k][1].end.max(1) - 1],
            upstream_ms: ms(ul - uf),
            downstream_ms: ms(dl - df),
            downstream_bytes_when_upstream_done: done_down,
            release_per_round_bytes: release.map(|r| r.0),
            rounds: release.map(|r| r.1),
            round_trip_ms: rtt.filter(|_| k == 1),
            client_window_max: (k == 1).then_some(x.client_window_max),
        };
        let total = u.end.max(1) - 1;
        let held = (dl - df) as f64 >= PROXY_HELD_MIN_RATIO * (ul - uf).max(1) as f64
            && done_down.is_some_and(|b| (b as f64) < 0.5 * total as f64);
        if held {
            pc.findings.push(Finding {
                kind: "proxy_held_data",
                location: "proxy".into(),
                text: format!(
                    "a terminating proxy between the points held the {from}'s data: capture {up} saw {total} bytes leave in {:.0} ms, capture {} received them over {:.0} ms, at most {} of them when the last had left",
                    ms(ul - uf),
                    1 - up,
                    ms(dl - df),
                    done_down.unwrap_or(0)
                ),
                fix: None,
                value: None,
            });
        }
        if let (true, Some((r, rounds)), Some(rtt)) = (held, release, rtt.filter(|_| k == 1)) {
            let window = x.client_window_max as f64;
            if (r as f64) <= RELEASE_MAX_WINDOW_SHARE * window {
                pc.findings.push(Finding {
                    kind: "proxy_send_buffer",
                    location: "proxy".into(),
                    text: format!(
                        "the proxy released about {r} bytes per {rtt:.0} ms round trip to the client ({rounds} rounds, median), below the client's window of {} bytes: the proxy's send buffer toward the client, about {r} bytes, limits the transfer to about {}",
                        x.client_window_max,
                        fmt_rate(r as f64 * 8.0 / (rtt / 1e3))
                    ),
                    fix: Some(format!(
                        "raise the proxy's send buffer toward the client so that it holds the client's whole window in flight ({} bytes now; the path's bandwidth-delay product once the window can scale): the proxy's own sndbuf setting, or net.ipv4.tcp_wmem max on a Linux proxy that leaves it to autotuning",
                        x.client_window_max
                    )),
                    value: Some(r as f64),
                });
            } else {
                let unscaled = seen_synack.is_some_and(|s| s.window_scale.is_none()) || client_syn.is_some_and(|s| s.window_scale.is_none());
                pc.findings.push(Finding {
                    kind: "client_receive_window",
                    location: "client".into(),
                    text: format!(
                        "the proxy released about {r} bytes per {rtt:.0} ms round trip, the client's whole window ({} bytes){}",
                        x.client_window_max,
                        if unscaled && window <= UNSCALED_WINDOW_MAX { ", which without window scaling cannot exceed 64 KB" } else { "" }
                    ),
                    fix: None,
                    value: Some(window),
                });
            }
        }
        pc.proxy.push(pd);
    }
}

/// Findings of the boxes' changes, with the fix on the box.
fn change_findings(changes: &[Change], rtt_ms: Option<f64>) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    for c in changes {
        let (kind, fix) = match c.kind {
            "window_scale_not_offered_to_client" | "window_scale_stripped" | "window_scale_refused_in_middle" => (
                "window_scaling_lost_in_middle",
                "enable window scaling on the box that answers or rewrites the client's handshake (a load balancer or proxy: net.ipv4.tcp_window_scaling=1 there, or its own option), not on the server",
            ),
            "mss_clamped" => ("mss_clamped", "nothing to fix if the path's MTU needs it; otherwise remove the clamp (nftables `tcp option maxseg size set`, iptables TCPMSS) on the box between the points"),
            "syn_answered_in_middle" => ("syn_answered_in_middle", "the box that answers SYNs (SYN proxy, load balancer) owns the handshake's options: check its settings"),
            "sack_stripped" | "sack_not_offered_to_client" => ("sack_lost_in_middle", "enable SACK on the box between the points"),
            "window_rewritten" => ("window_rewritten", "a box between the points rewrites the advertised window: check it (a firewall's window tracking or a WAN optimiser)"),
            _ => continue,
        };
        // one finding per kind, with each change that shows it
        match out.iter_mut().find(|f| f.kind == kind) {
            Some(f) => f.text = format!("{}; {}", f.text, c.detail),
            None => out.push(Finding { kind, location: "middlebox".into(), text: c.detail.clone(), fix: Some(fix.into()), value: None }),
        }
    }
    if let Some(f) = out.iter_mut().find(|f| f.kind == "window_scaling_lost_in_middle") {
        f.text.push_str(": the client's window cannot exceed 64 KB");
        if let Some(r) = rtt_ms {
            f.text.push_str(&format!(", at most {} over its {r:.0} ms round trip", fmt_rate(UNSCALED_WINDOW_MAX * 8.0 / (r / 1e3))));
        }
    }
    out
}
