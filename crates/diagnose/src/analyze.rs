//! From a direction's records to its diagnosis: states per interval, then
//! the root cause with its evidence, the fix and the what-if.

use tcpwhy_core::units::calc;
use crate::detect::loss::Loss;
use crate::detect::spurious::Spurious;
use crate::detect::start::Start;
use crate::detect::window::Window;
use crate::detect::{self, endpoint_str, policing, Input, Shares};
use crate::limits::build_intervals;
use crate::model::*;
use crate::path::Path;
use crate::record::DirRecords;
use crate::options::{Options, MIN_BYTES, MIN_DATA_SEGMENTS};
use crate::{decide, fixes, states};
use std::collections::BTreeMap;
use tcpwhy_core::units::Rate;
use tcpwhy_core::{Cause, Limit};
use tcpwhy_flow::ConnectionSummary;

/// The diagnosis of one data direction: the shared path estimates, the
/// state of each round trip, the detectors' evidence, the decision, then
/// the findings, the fixes and what they gain. `group`: what the group of
/// flows this direction belongs to says (crate::groups): a policed group's
/// verdict, the group's base RTT, the other flows' rate.
/// The receiver's windows when its window scale is unknown (the handshake
/// was not captured, or the snaplen cut its options): the advertised
/// values are raw 16-bit numbers of an unknown unit (Wireshark shows the
/// scale as "-1 (unknown)"), up to 2^14 times too small, so any flow would
/// read as held by them. A zero window is zero at any scale and stays;
/// every other is read as open, and the quality finding
/// `handshake_not_captured` says what that leaves unjudged.
fn open_windows(r: &DirRecords) -> DirRecords {
    let mut o = r.clone();
    for a in o.acks.iter_mut().filter(|a| a.window > 0) {
        a.window = u32::MAX;
    }
    o
}

pub fn diagnose_direction(
    cs: &ConnectionSummary,
    d: usize,
    r: &DirRecords,
    opts: &Options,
    group: Option<&crate::path::GroupContext>,
) -> Option<DirectionDiagnosis> {
    let ds = &cs.directions[d];
    let peer = &cs.directions[1 - d];
    if ds.counts.unique_bytes < MIN_BYTES || r.data.len() < MIN_DATA_SEGMENTS {
        return None;
    }
    let open;
    let r = if peer.window_scale.is_none() {
        open = open_windows(r);
        &open
    } else {
        r
    };
    let mut path = Path::estimate(cs, d, r, opts, group)?;
    let iv = build_intervals(&r.data, &r.acks, path.width_ns(), path.first_ns, path.last_ns + 1, path.sender_side);
    path.refine_rtt(&iv);
    let ctx = states::Ctx { sender_side: path.sender_side, smss: path.smss, width_ns: path.width_ns(), base_ns: path.base_ns() };
    let mut states = states::classify(&iv, &ctx, path.path_bps());
    debug_intervals(&iv, &states);
    let inp = Input { cs, d, ds, peer, r, path: &path, iv: &iv, states: &states, shares: Shares::of(&states) };

    let det = Detected::of(&inp, group);

    // ---- Decision ----
    let decision = decide::decide(&inp, &det.evidence());
    let (primary, confidence) = (decision.primary, decision.confidence);
    let findings = det.findings(&inp, &decision);
    let Detected { window, loss, policer: detected, start, traffic_shape, wakes, chunks, .. } = det;
    let verdict = decision.small_bucket.as_ref().unwrap_or(&detected);
    let timer = chunks.zip(decision.app_timer);
    // Losses the diagnosis holds to be a token bucket's: what the sender's
    // name reads its window and cuts against (congestion::Bucket).
    let bucket_losses = crate::congestion::Bucket::of(primary, confidence);
    drop(inp);

    decision.attribute(&mut states);
    let duration_s = calc::s_from_ns((path.last_ns - path.first_ns) as f64);
    let timeline = crate::timeline::Timeline::of(&iv, &states, duration_s);
    let limits = limit_shares(&states);
    let (path_capacity, capacity_seen, path_rate) = path_capacity(&path, &loss, verdict, primary, opts);
    let held_share = detect::held_elsewhere_share(&states);
    let cc = crate::congestion::detect(r, path.sender_side, path.base_ns(), path.smss, held_share, bucket_losses);
    let facts = fixes::Facts {
        primary,
        goodput_bps: ds.goodput_bps.unwrap_or(0.0),
        rtt_s: path.rtt.base.map(tcpwhy_core::units::Duration::as_secs_f64),
        path_rate,
        path_from_dispersion: path_capacity == "dispersion",
        path_measured: opts.bandwidth_bps.is_none() && path_rate.is_some(),
        rcv_window: window.max_bytes,
        smss: path.smss,
        loss_rate: loss.rate(),
        policer_rate: verdict.rate_bps,
        // a bucket whose rate the losses do not show (policer::rate_high)
        // leaves the same fix as one smaller than the bursts: pace them
        policer_small_bucket: decision.small_bucket.is_some() || (primary == Cause::Policer && verdict.rate_unseen),
        policer_flows: verdict.group.len(),
        policer_rate_high: verdict.rate_high_bps.filter(|_| primary == Cause::Policer && verdict.rate_unseen && !verdict.rate_high_open),
        kernel: opts.kernel,
        wscale_who_receiver: peer.window_scale_offered == Some(false),
        bytes: ds.counts.unique_bytes,
        bursts: start.bursts.len(),
        ss_rounds: start.rounds(),
        sender_side: path.sender_side,
        capacity_seen,
        sender_cc: cc.acted_on(),
        app_pace: wakes.filter(|_| decision.app_clocked).map(|w| w.pace_text()).or(timer.map(|(c, _)| c.pace_text())),
        timeline,
    };
    let (fx, what_if, mut fix_notes) = fixes::fixes(&facts);
    let mut to_confirm = decision.to_confirm;
    let notes = to_confirm.len()..to_confirm.len() + fix_notes.len();
    to_confirm.append(&mut fix_notes);
    let (sender, receiver) = if d == 0 { (&cs.a, &cs.b) } else { (&cs.b, &cs.a) };
    let mut dd = DirectionDiagnosis {
        from: if d == 0 { "a" } else { "b" },
        sender: endpoint_str(&sender.addr, sender.port),
        receiver: endpoint_str(&receiver.addr, receiver.port),
        bytes: ds.counts.unique_bytes,
        duration_s,
        goodput_bps: ds.goodput_bps,
        capture_point: ds.capture_point.as_str(),
        rtt: path.rtt.report(),
        segment_bytes: path.smss,
        path_rate_bps: path_rate.map(Rate::bps),
        path_capacity,
        interval_ms: path.width.as_millis_f64(),
        limits,
        timeline: detect::runs(&iv, &states, path.width_ns()),
        time_split: crate::text::time_split(&facts.timeline, ds.counts.unique_bytes, traffic_shape),
        traffic_shape,
        primary,
        congestion_control: cc,
        confidence,
        summary: String::new(),
        findings,
        fixes: fx,
        what_if,
        to_confirm,
        truncated: r.truncated,
        parts: Vec::new(),
        what_if_inputs: None,
    };
    dd.what_if_inputs = Some(WhatIfInputs(std::sync::Arc::new(Replayable { facts, notes })));
    dd.summary = crate::text::paragraph(&dd);
    Some(dd)
}

/// Every detector's evidence on one direction, and the traffic's shape.
struct Detected {
    window: Window,
    loss: Loss,
    spurious: Spurious,
    policer: crate::policer::PolicerVerdict,
    start: Start,
    traffic_shape: crate::shape::Shape,
    request_response: bool,
    wakes: Option<detect::sender::Wakes>,
    chunks: Option<detect::sender::Chunks>,
}

impl Detected {
    /// One detector per cause, over the states of the round trips.
    fn of(inp: &Input, group: Option<&crate::path::GroupContext>) -> Detected {
        let window = Window::detect(inp);
        let mut loss = Loss::detect(inp);
        let spurious = Spurious::detect(inp);
        let policer = policing::evidence(inp, group.and_then(|g| g.policer.as_deref()));
        loss.overflowed_queue_ms = policing::queue_overflowed(&policer, inp).map(|q| q.queue_ms);
        if std::env::var_os("TCPWHY_DEBUG_INTERVALS").is_some() {
            eprintln!("policer verdict: {:?}", policer);
        }
        let start = Start::detect(inp, loss.retransmissions);
        // Traffic shape before cause: request/response only when the bursts
        // follow the receiver's turns (crate::shape).
        let idle_share = detect::capture_share(inp.states, &[Limit::Idle]);
        let traffic_shape = crate::shape::classify(&start.bursts, inp.iv, idle_share);
        let request_response = traffic_shape == crate::shape::Shape::RequestResponse;
        let (wakes, chunks) = detect::sender::clocks(inp, &start.bursts, request_response);
        Detected { window, loss, spurious, policer, start, traffic_shape, request_response, wakes, chunks }
    }

    /// What the decision reads.
    fn evidence(&self) -> decide::Evidence<'_> {
        decide::Evidence {
            window: &self.window,
            loss: &self.loss,
            spurious: &self.spurious,
            policer: &self.policer,
            start: &self.start,
            request_response: self.request_response,
            wakes: self.wakes,
            chunks: self.chunks,
        }
    }

    /// The findings under `decision`, in the order the text tells them.
    fn findings(&self, inp: &Input, decision: &decide::Decision) -> Vec<Finding> {
        let primary = decision.primary;
        let verdict = decision.small_bucket.as_ref().unwrap_or(&self.policer);
        let mut findings = Vec::new();
        self.window.findings(inp, primary, &mut findings);
        let timer = self.chunks.zip(decision.app_timer);
        detect::sender::findings(inp, primary, self.wakes.filter(|_| decision.app_clocked).as_ref(), timer, &mut findings);
        self.loss.findings(inp, &mut findings);
        policing::findings(verdict, primary, inp.path.smss, self.loss.retransmissions, &mut findings);
        self.spurious.findings(self.loss.retransmissions, &mut findings);
        self.start.findings(inp, primary, self.request_response, &mut findings);
        self.loss.queue_finding(inp, primary, &mut findings);
        findings
    }
}

/// Each state's share of the intervals.
fn limit_shares(states: &[Limit]) -> BTreeMap<Limit, f64> {
    let mut limits: BTreeMap<Limit, f64> = BTreeMap::new();
    for &s in states {
        *limits.entry(s).or_default() += 1.0 / states.len() as f64;
    }
    limits
}

/// What the path rate rests on, and whether the capture showed the path's
/// capacity: the flow filled the path (a queue grew, losses came after a
/// queue, a shaper's deep queue, a bucket ran empty, or the cause is the
/// path's own rate), or nothing filled and the rate is a lower bound
/// (docs/diagnose.md, "What the path rate rests on"). With the rate the
/// predictions use: when nothing filled the path, the bottleneck's spacing
/// of back-to-back packets where that is higher than the trains'
/// (crate::path::dispersion_rate, `dispersion`); the verdict stands on the
/// trains.
fn path_capacity(
    path: &Path,
    loss: &Loss,
    verdict: &crate::policer::PolicerVerdict,
    primary: Cause,
    opts: &Options,
) -> (&'static str, bool, Option<Rate>) {
    let queue_grew = match (path.rtt.p90_ms(), path.min_rtt_ms().or(path.rtt.base_ms())) {
        (Some(p90), Some(b)) => b > 0.0 && crate::path::queued_at(p90, b),
        _ => false,
    };
    let seen = opts.bandwidth_bps.is_some()
        || matches!(primary, Cause::Policer | Cause::Shaper | Cause::BottleneckLink | Cause::CongestionLoss)
        || verdict.rate_bps.is_some()
        || loss.inflated_before > 0
        || loss.deep_queue
        || queue_grew;
    let kind = match (opts.bandwidth_bps, path.path_rate) {
        (Some(_), _) => "given",
        (None, None) => "unknown",
        (None, Some(_)) if seen => "seen",
        (None, Some(_)) => "lower_bound",
    };
    match path.dispersion_rate.filter(|d| !seen && path.path_rate.is_none_or(|p| *d > p)) {
        Some(d) => ("dispersion", seen, Some(d)),
        None => (kind, seen, path.path_rate),
    }
}

/// What a direction's what-if is replayed from
/// ([`DirectionDiagnosis::with_capacity_from`]): the fixes' inputs, and
/// where the fixes' own notes are in `to_confirm`.
struct Replayable {
    facts: fixes::Facts,
    notes: std::ops::Range<usize>,
}

/// The kinds of `path_capacity` a capacity measured elsewhere replaces:
/// this capture did not show the path's capacity (docs/diagnose.md, "What
/// the path rate rests on").
const CAPACITY_NOT_SHOWN: [&str; 3] = ["unknown", "lower_bound", "dispersion"];

impl DirectionDiagnosis {
    /// The fixes and the what-if again, with the path's capacity measured at
    /// another capture point of the same path (`tcpwhy diagnose --pair`):
    /// `rate_bps` of payload, `path_capacity` `paired`. Where this capture
    /// did not show the capacity itself ([`CAPACITY_NOT_SHOWN`]), and, with
    /// `over_seen`, where it did: a rate measured directly (the service
    /// times of a queue between the points) is better evidence than one
    /// this capture inferred from its trains while the path filled. One the
    /// user gave stays. The verdict stays too: the cause is what this
    /// capture showed; the capacity bounds what a fix can gain. Returns
    /// whether anything was replayed.
    pub fn with_capacity_from(&mut self, rate_bps: f64, over_seen: bool) -> bool {
        let open = CAPACITY_NOT_SHOWN.contains(&self.path_capacity) || over_seen && self.path_capacity == "seen";
        if !open || !(rate_bps.is_finite() && rate_bps > 0.0) {
            return false;
        }
        let Some(inputs) = self.what_if_inputs.as_ref().and_then(|w| w.0.downcast_ref::<Replayable>()) else { return false };
        let mut f = inputs.facts.clone();
        f.path_rate = Some(Rate::from_bps_f64(rate_bps));
        f.path_measured = true;
        f.path_from_dispersion = false;
        f.capacity_seen = true;
        let (fx, what_if, notes) = fixes::fixes(&f);
        let at = inputs.notes.start.min(self.to_confirm.len());
        let end = inputs.notes.end.min(self.to_confirm.len());
        let replayed = Replayable { facts: f, notes: at..at + notes.len() };
        self.to_confirm.splice(at..end, notes);
        self.what_if_inputs = Some(WhatIfInputs(std::sync::Arc::new(replayed)));
        self.fixes = fx;
        self.what_if = what_if;
        self.path_rate_bps = Some(rate_bps);
        self.path_capacity = "paired";
        self.summary = crate::text::paragraph(self);
        true
    }
}

/// `TCPWHY_DEBUG_INTERVALS=1`: every interval with its state, on stderr.
fn debug_intervals(iv: &[crate::limits::Interval], states: &[Limit]) {
    if std::env::var_os("TCPWHY_DEBUG_INTERVALS").is_none() {
        return;
    }
    for (it, st) in iv.iter().zip(states) {
        eprintln!(
            "{:.3} {:<20} new={:>8} pkts={:>4} retx={:>3} flight={:>8} gap={:>9} win={:>8}-{:<8} rtt={:>7.1} min={:>7.1} drained={} rev={} zw={} acked={}",
            calc::s_from_ns(it.start_ns as f64), st.as_str(), it.new_bytes, it.data_pkts, it.retx_pkts, it.max_flight,
            it.min_gap.map_or("-".into(), |g| g.to_string()), it.win_min, it.win_max,
            calc::ms_from_us(it.rtt_mean_us().unwrap_or(0.0)), calc::ms_from_us(it.rtt_min_us as f64), it.drained as u8, it.reverse_data as u8, it.zero_window as u8, it.acked_bytes
        );
    }
}
