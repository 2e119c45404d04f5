//! Capture quality, the stage between the flow model and the verdict: what
//! the capture itself did to the evidence, and which conclusions that
//! weakens. A verdict the capture cannot support becomes `undetermined`
//! (with what would settle it) or loses its `high` confidence; it is never
//! given on evidence the capture made up.
//!
//! What is checked, per connection:
//! - frames captured twice (removed by `tcpwhy_flow::DuplicateFilter`
//!   before any analysis): said, so the reader knows;
//! - one direction only: data without a single packet back (asymmetric
//!   routing, a capture filter), or ACKs for data the capture never saw;
//! - frames missing from the capture (data acknowledged but never seen),
//!   told apart from loss in the network (segments retransmitted);
//! - a snaplen that cut the TCP options (the SYN's window scale, SACK
//!   blocks, timestamps);
//! - a handshake before the capture began (window scale unknown);
//! - TSO/GRO super-segments (the capture is at a host with offloads: the
//!   spacing of wire packets is not visible).

use tcpwhy_core::units::calc;
use crate::model::DirectionDiagnosis;
pub use crate::model::QualityFinding;
use serde_json::{json, Map, Value};
use tcpwhy_core::units::{fmt_bytes, fmt_secs};
use tcpwhy_core::{Cause, Confidence};
use tcpwhy_flow::{ConnectionSummary, DirectionSummary};

/// Share of a direction's bytes missing from the capture above which
/// loss-based conclusions are no longer `high`: at 1% the capture's own
/// gaps are as frequent as the loss rates the loss detectors judge (a
/// Mathis-limited flow at 1% loss runs at 1.2 x MSS / (RTT x 0.1)).
pub const CAPTURE_MISSED_SHARE_SIGNIFICANT: f64 = 0.01;
/// ACKs of data the capture never saw, with no data of that direction
/// captured: at least this many before the data direction is called
/// missing (one or two are the tail of a connection that started before
/// the capture).
pub const ACKS_OF_UNSEEN_DATA_MIN: u64 = 8;

fn finding(kind: &'static str, text: String, weakens: &[&'static str], numbers: Value) -> QualityFinding {
    let numbers = match numbers {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    QualityFinding { kind, text, weakens: weakens.to_vec(), numbers }
}

fn side(cs: &ConnectionSummary, d: usize) -> String {
    let e = if d == 0 { &cs.a } else { &cs.b };
    if e.addr.contains(':') {
        format!("[{}]:{}", e.addr, e.port)
    } else {
        format!("{}:{}", e.addr, e.port)
    }
}

/// The capture's findings for one connection.
pub fn assess(cs: &ConnectionSummary) -> Vec<QualityFinding> {
    let mut out = Vec::new();
    let dirs = &cs.directions;
    let copies: u64 = dirs.iter().map(|d| d.duplicate_frames).sum();
    if copies > 0 {
        let examples: Vec<(u64, u64)> = dirs.iter().flat_map(|d| d.duplicate_examples.iter().copied()).take(4).collect();
        let gap_ms = dirs.iter().filter_map(|d| d.duplicate_max_gap_ms).fold(0.0, f64::max);
        // Copies a millisecond or more apart come from two capture points
        // (files merged, or a capture before and after a queue).
        let how = if gap_ms >= 1.0 {
            format!("up to {gap_ms:.1} ms apart: captures merged from two points, or taken before and after a queue")
        } else {
            "microseconds apart: a mirror port, a capture on several interfaces, or merged files".to_string()
        };
        out.push(finding(
            "duplicate_frames",
            format!(
                "{copies} frames were in the capture twice (the same IP ID, sequence, ACK, length and checksum, {how}); \
                 the copies were removed before the analysis, so they are not counted as retransmissions (e.g. frame {} \
                 repeats frame {})",
                examples.first().map_or(0, |e| e.0),
                examples.first().map_or(0, |e| e.1)
            ),
            &["nothing"],
            json!({ "frames": copies, "examples": examples, "max_gap_ms": gap_ms }),
        ));
    }
    for d in 0..2 {
        out.extend(one_direction(cs, d));
        out.extend(missing_from_capture(cs, d));
    }
    let cut: u64 = dirs.iter().map(|d| d.counts.options_cut_packets).sum();
    if cut > 0 {
        let syn_cut = dirs.iter().any(|d| d.window_scaling == "unknown") && !cs.started_mid_capture;
        out.push(finding(
            "options_cut_by_snaplen",
            format!(
                "the snaplen cut the TCP options of {cut} segments{}: SACK blocks and timestamps are missing from them; \
                 capture with a snaplen of at least 128 bytes (tcpdump -s 128) to keep them",
                if syn_cut { ", the SYNs' among them, so whether window scaling was negotiated is unknown" } else { "" }
            ),
            if syn_cut { &["window_scaling", "receiver_window", "rtt"] } else { &["rtt", "loss"] },
            json!({ "segments": cut, "window_scale_unknown": syn_cut }),
        ));
    }
    if cs.clock_steps_back > 0 {
        out.push(finding(
            "clock_steps_back",
            format!(
                "{} frames are earlier than frames captured before them (by up to {}): the capture clock stepped back, or \
                 captures from points with different clocks were merged; RTT samples across a step are wrong",
                cs.clock_steps_back,
                fmt_secs(cs.max_clock_step_back_s.unwrap_or(0.0))
            ),
            &["rtt"],
            json!({ "frames": cs.clock_steps_back, "max_step_s": cs.max_clock_step_back_s }),
        ));
    }
    if cs.started_mid_capture && dirs.iter().any(|d| d.counts.data_packets > 0) {
        out.push(finding(
            "handshake_not_captured",
            "the connection was open before the capture began: the window scale and the MSS are not known, so the advertised \
             windows are raw 16-bit values up to 2^14 times too small: the receiver's window is read only where it is zero, and \
             neither a window limit nor window scaling can be judged"
                .into(),
            &["window_scaling", "receiver_window"],
            json!({}),
        ));
    }
    for (d, s) in dirs.iter().enumerate() {
        if s.counts.segments_above_mss > 0 {
            out.push(finding(
                "offload_super_segments",
                format!(
                    "{} segments from {} are larger than the MSS (TSO/GSO at the sender or GRO at the receiver): the capture is \
                     on a host with offloads, so wire-packet spacing (the path-rate estimate) is not visible",
                    s.counts.segments_above_mss,
                    side(cs, d)
                ),
                &["path_rate"],
                json!({ "segments": s.counts.segments_above_mss }),
            ));
        }
    }
    out
}

fn one_direction(cs: &ConnectionSummary, d: usize) -> Option<QualityFinding> {
    let (s, peer) = (&cs.directions[d], &cs.directions[1 - d]);
    if peer.counts.packets == 0 && (s.counts.data_packets > 0 || s.counts.pure_acks >= ACKS_OF_UNSEEN_DATA_MIN) {
        // Mostly data: the return path is missing; mostly ACKs: the data is.
        let data_only = s.counts.data_packets >= s.counts.pure_acks;
        return Some(finding(
            if data_only { "one_direction_data_only" } else { "one_direction_acks_only" },
            format!(
                "only packets from {} are in the capture ({} data segments, {} pure ACKs), not one from {} (asymmetric \
                 routing, or a capture filter): {}",
                side(cs, d),
                s.counts.data_packets,
                s.counts.pure_acks,
                side(cs, 1 - d),
                if data_only {
                    "no ACK, window or SACK shows what the receiver saw, so neither its window, the RTT nor losses can be judged"
                } else {
                    "the data direction cannot be diagnosed from here"
                }
            ),
            &["everything"],
            json!({ "data_packets": s.counts.data_packets, "pure_acks": s.counts.pure_acks }),
        ));
    }
    let acks_of_unseen = s.flags.ack_unseen_segment;
    if peer.counts.data_packets == 0 && acks_of_unseen >= ACKS_OF_UNSEEN_DATA_MIN {
        return Some(finding(
            "one_direction_acks_only",
            format!(
                "{} acknowledged data {} sent {} times, and not one of those data segments is in the capture \
                 (asymmetric routing, or a capture filter): the data direction cannot be diagnosed from here",
                side(cs, d),
                side(cs, 1 - d),
                acks_of_unseen
            ),
            &["everything"],
            json!({ "acks_of_unseen_data": acks_of_unseen }),
        ));
    }
    None
}

fn missing_from_capture(cs: &ConnectionSummary, d: usize) -> Option<QualityFinding> {
    let (s, peer): (&DirectionSummary, &DirectionSummary) = (&cs.directions[d], &cs.directions[1 - d]);
    if s.counts.data_packets == 0 || (s.missed_bytes == 0 && peer.flags.ack_unseen_segment == 0) {
        return None;
    }
    let share = s.missed_bytes as f64 / (s.counts.unique_bytes + s.missed_bytes).max(1) as f64;
    let retx = s.counts.retransmitted_bytes;
    let total_gaps = (s.missed_bytes + retx).max(1) as f64;
    Some(finding(
        "frames_missing_from_capture",
        format!(
            "{} of {}'s data ({:.1}%) was acknowledged by the receiver but never captured: the capture dropped those frames, \
             the network did not ({:.0}% of the gaps; the other {:.0}% were retransmitted, lost in the network)",
            fmt_bytes(s.missed_bytes as f64),
            side(cs, d),
            share * 100.0,
            s.missed_bytes as f64 / total_gaps * 100.0,
            retx as f64 / total_gaps * 100.0
        ),
        if share >= CAPTURE_MISSED_SHARE_SIGNIFICANT { &["loss", "path_rate"] } else { &["nothing"] },
        json!({
            "missing_bytes": s.missed_bytes,
            "missing_share": share,
            "acks_of_unseen_data": peer.flags.ack_unseen_segment,
            "retransmitted_bytes": retx,
        }),
    ))
}

/// What each primary rests on, for matching against what a finding weakens.
fn rests_on(primary: Cause) -> &'static [&'static str] {
    match primary {
        Cause::ReceiverWindow => &["receiver_window", "rtt"],
        Cause::WindowScalingOff => &["window_scaling", "receiver_window"],
        // A verdict that names what held an ACK-clocked flow holds only if
        // the receiver's window did not: with its scale unknown (no
        // handshake captured), that is not known. A token bucket's fit
        // rests on the losses alone.
        Cause::CongestionLoss | Cause::RandomLoss | Cause::SpuriousRetransmission => &["loss", "rtt", "receiver_window"],
        Cause::Policer | Cause::Shaper => &["loss", "rtt", "path_rate"],
        Cause::BottleneckLink => &["path_rate", "rtt", "receiver_window"],
        Cause::SendBuffer | Cause::SenderApplication | Cause::CachedSsthresh | Cause::SlowStart => &["rtt", "receiver_window"],
        // Zero windows are zero at any scale, but whether the window or the
        // reader was the limit depends on the scale.
        Cause::ReceiverApplication => &["window_scaling"],
        Cause::DelayedAck | Cause::None | Cause::Undetermined => &[],
    }
}

/// Applies the connection's capture findings to one direction's verdict:
/// `undetermined` where the capture cannot support any verdict (one side
/// missing) or the one given, `high` lowered where a finding weakens what
/// the verdict rests on.
pub fn apply(dd: &mut DirectionDiagnosis, findings: &[QualityFinding]) {
    let relevant: Vec<&QualityFinding> = findings.iter().collect();
    if relevant.iter().any(|f| f.weakens.contains(&"everything")) {
        undetermined(
            dd,
            "capture where both directions pass: on the sender or the receiver host, or on a link that carries the return path",
        );
        return;
    }
    let basis = rests_on(dd.primary);
    let window_scale_unknown = relevant.iter().any(|f| f.kind == "options_cut_by_snaplen" && f.weakens.contains(&"window_scaling"));
    if window_scale_unknown && matches!(dd.primary, Cause::ReceiverWindow | Cause::WindowScalingOff) {
        undetermined(
            dd,
            "capture the handshake with a snaplen that keeps the TCP options (tcpdump -s 128 or more): the window scale decides \
             whether the receiver's window is small",
        );
        return;
    }
    // A flat flight is the send buffer's only when the receiver's window
    // was open; with its scale unknown (analyze::open_windows) the window
    // may be what held the flight.
    let window_unknown = relevant.iter().any(|f| f.weakens.contains(&"receiver_window"));
    if window_unknown && dd.primary == Cause::SendBuffer {
        undetermined(
            dd,
            "capture from the connection's start (its SYNs carry the window scale), or run `ss -tim` on the sender: the flight \
             stayed flat, which the send buffer and the receiver's window (whose scale this capture does not show) both explain",
        );
        return;
    }
    for f in relevant {
        if f.weakens.iter().any(|w| basis.contains(w)) {
            dd.confidence.cap(Confidence::Medium);
            let note = format!("capture quality: {} ({})", f.kind, f.weakens.join(", "));
            if !dd.to_confirm.contains(&note) {
                dd.to_confirm.push(note);
            }
        }
    }
}

fn undetermined(dd: &mut DirectionDiagnosis, settle: &str) {
    let was = dd.primary;
    dd.primary = Cause::Undetermined;
    dd.confidence = Confidence::Low;
    dd.fixes.clear();
    dd.what_if.clear();
    dd.summary = format!(
        "{} -> {}: undetermined: the capture cannot support a verdict (without its limits it would read as {}). To settle it, {}.",
        dd.sender, dd.receiver, was, settle
    );
    // The notes of the verdict given up no longer apply.
    dd.to_confirm = vec![settle.to_string()];
}

/// The capture itself dropped packets (the pcapng interface statistics
/// count them: `isb_ifdrop`, `isb_osdrop`). Which connections lost them is
/// not known, and a segment missing from the capture looks like a loss, so
/// every connection gets the finding and verdicts resting on loss or the
/// path rate are no longer `high`.
/// `counters` names where the count comes from (pcapng's interface
/// statistics, or the kernel's for a live capture).
pub fn capture_dropped(diags: &mut [crate::model::ConnectionDiagnosis], drops: u64, counters: &str) {
    let f = finding(
        "capture_dropped_packets",
        format!(
            "the capture dropped {drops} packets ({counters}), from any connection: \
             a segment missing from the capture looks like a loss"
        ),
        &["loss", "path_rate"],
        serde_json::json!({ "dropped_packets": drops }),
    );
    for c in diags.iter_mut().filter(|c| !c.directions.is_empty()) {
        c.capture_quality.push(f.clone());
        for dd in c.directions.iter_mut() {
            apply(dd, std::slice::from_ref(&f));
        }
    }
}

/// Verdicts drawn from one flow's own losses and delays, which assume the
/// flow alone loads its bottleneck: a policer or queue shared with other
/// flows acts on the aggregate (Flach et al. 2016: policers apply to
/// aggregates; Rubenstein, Kurose and Towsley 2002: shared congestion shows
/// only across flows), so one flow sees losses at a varying share of the
/// rate, which reads as random loss.
fn assumes_flow_alone(primary: Cause) -> bool {
    matches!(primary, Cause::RandomLoss | Cause::CongestionLoss | Cause::BottleneckLink | Cause::Shaper)
}

/// Other connections between the same two hosts moving data at the same
/// time as each diagnosed direction: a verdict that assumes the flow was
/// alone is lowered to `medium`, with the concurrent connections named.
pub fn shared_path(diags: &mut [crate::model::ConnectionDiagnosis], conns: &[ConnectionSummary]) {
    use std::collections::HashMap;
    // Data span of each connection with a diagnosed direction, by host pair.
    let mut groups: HashMap<(&str, &str), Vec<(f64, f64, usize)>> = HashMap::new();
    for (i, c) in conns.iter().enumerate() {
        if diags.get(i).is_none_or(|d| d.directions.is_empty()) {
            continue;
        }
        let first = c.directions.iter().filter_map(|d| d.first_data_time).fold(f64::INFINITY, f64::min);
        let last = c.directions.iter().filter_map(|d| d.last_data_time).fold(f64::NEG_INFINITY, f64::max);
        if first < last {
            let key = if c.a.addr <= c.b.addr { (c.a.addr.as_str(), c.b.addr.as_str()) } else { (c.b.addr.as_str(), c.a.addr.as_str()) };
            groups.entry(key).or_default().push((first, last, i));
        }
    }
    let mut others: HashMap<usize, Vec<u64>> = HashMap::new();
    for spans in groups.values_mut() {
        spans.sort_by(|x, y| x.0.total_cmp(&y.0));
        for (k, &(_, end, i)) in spans.iter().enumerate() {
            for &(_, _, j) in spans[k + 1..].iter().take_while(|s| s.0 < end) {
                others.entry(i).or_default().push(conns[j].id);
                others.entry(j).or_default().push(conns[i].id);
            }
        }
    }
    for (i, ids) in others {
        for dd in diags[i].directions.iter_mut().filter(|d| assumes_flow_alone(d.primary)) {
            dd.confidence.cap(Confidence::Medium);
            dd.to_confirm.push(format!(
                "{} other connection(s) between the same hosts moved data at the same time (connection {}): a policer or \
                 queue they share acts on all of them together, which one flow's losses and delays cannot show; compare \
                 the flows, or capture this one alone",
                ids.len(),
                ids.iter().take(4).map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
            ));
        }
    }
}

/// A data sender with no FIN or RST seen whose connection's last packet is
/// at most this long (or two of its RTTs, if longer) before the capture was
/// cut was still moving data at the cut.
pub const CUT_NEAR_S: f64 = 1.0;

/// The capture was cut after frame `after_frame` (`why`: the file ends in
/// the middle of a record, or is corrupt from there on): every diagnosed
/// connection is told where and when (the last TCP packet read), and a
/// direction still open at the cut (its sender sent no FIN, no RST from
/// either end, the connection's last packet near the cut: `CUT_NEAR_S`)
/// has its confidence lowered one step, with the reason: the capture ends
/// mid-transfer, so what limited the rest of it is not seen.
pub fn capture_cut(diags: &mut [crate::model::ConnectionDiagnosis], conns: &[ConnectionSummary], after_frame: u64, why: &str) {
    let Some(cut) = conns.iter().map(|c| c.last_time).max_by(f64::total_cmp) else { return };
    let start = conns.iter().map(|c| c.first_time).min_by(f64::total_cmp).unwrap_or(cut);
    let when = format!("after frame {after_frame}, {} into the capture", fmt_secs(cut - start));
    for (c, cs) in diags.iter_mut().zip(conns).filter(|(c, _)| !c.directions.is_empty()) {
        let reset = cs.directions.iter().any(|d| d.counts.rst > 0);
        let before_cut = cut - cs.last_time;
        let mut open = Vec::new();
        for dd in c.directions.iter_mut() {
            let sender = &cs.directions[usize::from(dd.from == "b")];
            let near = CUT_NEAR_S.max(calc::s_from_ms(2.0 * dd.rtt.base_ms.unwrap_or(0.0)));
            if sender.counts.fin > 0 || reset || before_cut > near {
                continue;
            }
            dd.confidence.lower();
            dd.to_confirm.push(format!(
                "the capture ends mid-transfer (cut {when}): this verdict covers the transfer up to the cut; capture to the \
                 connection's end to see what limited the rest"
            ));
            open.push(dd.sender.clone());
        }
        let text = if open.is_empty() {
            format!("the capture was cut {when} ({why}); this connection had ended or gone quiet before, so its verdict is whole")
        } else {
            let last = if before_cut > 0.0 {
                format!("its last packet {} before the cut", fmt_secs(before_cut))
            } else {
                "its packet the last one read".to_string()
            };
            format!(
                "the capture was cut {when} ({why}) while this connection was still open (no FIN or RST, {last}): the capture \
                 ends mid-transfer, so the verdict for the data from {} covers only the part before the cut and is one step less sure",
                open.join(" and ")
            )
        };
        // A direction still open: its verdict covers the part before the cut.
        let weakens: &[&'static str] = if open.is_empty() { &["nothing"] } else { &["transfer_end"] };
        c.capture_quality.push(finding(
            "capture_cut",
            text,
            weakens,
            json!({ "after_frame": after_frame, "time": cut, "offset_s": cut - start, "open_at_cut": !open.is_empty(),
                    "last_packet_before_cut_s": before_cut }),
        ));
    }
}
