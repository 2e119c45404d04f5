//! From one diagnosed connection direction to a lab scenario that should
//! behave like it, and one variant of that scenario per proposed fix.
//!
//! Every value comes from the diagnosis or the connection model, and every
//! assumption is written next to it (`Plan::taken`), so the TOML in the
//! output directory can be read, edited and rerun with `tcpwhy lab run`.

use tcpwhy_core::units::calc;
use tcpwhy_core::units::{fmt_bytes, fmt_rate, Bytes, Duration, Rate};
use tcpwhy_core::Cause;
use tcpwhy_diagnose::latency::LatencyReport;
use tcpwhy_diagnose::model::{ConnectionDiagnosis, DirectionDiagnosis, WhatIf};
use tcpwhy_flow::ConnectionSummary;
use tcpwhy_lab::scenario::{self, DirSpec, EndSpec, MetricsSeed, PolicerSpec, Scenario};

/// Longest transfer run in the lab. A longer capture is scaled down in time
/// to this many seconds of the same traffic: the rates and the limits are
/// what is compared, and several runs must fit in a few minutes.
pub const MAX_LAB_SECONDS: f64 = 6.0;

/// The receive window the lab's receiver advertises per byte of tcp_rmem
/// max. Linux 6.6+ derives it from the socket's scaling_ratio (payload over
/// truesize of received skbs, tcp_win_from_space()); for the lab's TUN
/// devices with a 1500-byte MTU it is 0.62, measured with `tcpwhy lab run
/// rwnd-rmem` (a 524,288-byte tcp_rmem max gives a 326,272-byte window).
/// Used only to pick the buffer that reproduces an observed window; the
/// reproduction check then compares the windows.
pub const LAB_WINDOW_PER_RMEM: f64 = 0.62;

/// Bytes in flight the lab's sender keeps per byte of tcp_wmem max when the
/// send buffer limits it: the buffer is charged skb truesize
/// (sk_wmem_queued) and the lab's GSO skbs carry little overhead; 0.9
/// measured with `tcpwhy lab run sndbuf-wmem` (262,144 bytes of tcp_wmem
/// max hold about 237,000 bytes in flight).
pub const LAB_FLIGHT_PER_WMEM: f64 = 0.9;

/// Buffers large enough that they never limit a lab run (16 MiB, the
/// tcp_rmem/tcp_wmem max of most tuned hosts and of the lab's scenarios).
const UNLIMITING_BUFFER: u64 = 16 << 20;

/// When the capture shows no standing queue, the bottleneck gets a queue of
/// one bandwidth-delay product: the classic buffer-sizing rule (Villamizar
/// and Song, "High performance TCP in ANSNET", 1994), what most router
/// defaults approximate. It matters only once a fix makes the flow fill it.
const QUEUE_BDP_MULTIPLE: f64 = 1.0;
/// The queue of the buffer-sizing rule at `rate_bps` (bytes).
fn bdp_queue(rate_bps: f64, rtt_s: f64) -> f64 {
    calc::bytes_in(rate_bps, rtt_s) * QUEUE_BDP_MULTIPLE
}

/// The lab emulator's smallest useful queue (docs/lab.md: at least 64 KiB).
const MIN_QUEUE_BYTES: f64 = 65536.0;

/// Which measure is compared: a transfer's goodput (bulk) or the total
/// time of request/response exchanges (connection churn).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    GoodputBps,
    ExchangeMs,
}

impl Measure {
    /// After / before as a gain (>1 is better), for either measure.
    pub fn gain(self, before: f64, after: f64) -> f64 {
        match self {
            Measure::GoodputBps => after / before,
            Measure::ExchangeMs => before / after,
        }
    }
    pub fn show(self, v: f64) -> String {
        match self {
            Measure::GoodputBps => fmt_rate(v),
            Measure::ExchangeMs => format!("{:.0} ms", v),
        }
    }
}

/// One parameter of the rebuild: its value, where it came from, and
/// whether the capture showed it (`seen`), the user gave it (`given`,
/// `--bandwidth`) or the rebuild had to assume it (`assumed`: a lower
/// bound, a rule of thumb, Linux's default).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Taken {
    pub parameter: String,
    pub value: String,
    pub from: String,
    pub basis: &'static str,
}

/// The fastest link the lab's emulator carries full: a 1 Gbit/s bottleneck
/// gives 943-944 Mbit/s of goodput on a 2-core machine (docs/lab.md,
/// "Measured"). A fix's ceiling above it is tested at this rate.
pub const LAB_MAX_LINK_BPS: f64 = 1e9;
/// A run at a fix's ceiling moves at least what the point prediction for it
/// carries in this many seconds, so that its goodput shows the rate past
/// slow start (which the top of the range is), not the slow start of the
/// capture's shorter transfer on a faster path.
pub const CEILING_RUN_SECONDS: f64 = 2.0;
/// Header bytes per segment on the lab's link: IPv4 and TCP (40) and the
/// timestamp option (12); the link's rate counts them, goodput does not.
const LAB_HEADER_BYTES: u32 = 52;

/// The same fix on a path as fast as the fix's own ceiling: the far end of
/// the range the capture leaves open when it never showed the path's
/// capacity (`path_capacity` `lower_bound`; issue 40). The run at the
/// estimate tests the low end; this one tests the top.
#[derive(Clone, Debug)]
pub struct Ceiling {
    /// What this run raises: the link's rate (`link.rate`), or the rate of
    /// a policer whose rate the losses left open (`link.down.policer.rate`).
    pub parameter: &'static str,
    /// The link (or policer) rate of this run (bit/s, headers included).
    pub link_bps: f64,
    /// The rebuild's link rate, the path rate the capture showed.
    pub rebuild_link_bps: f64,
    /// The range of the prediction: the low end for the lab's transfer,
    /// the fix's steady ceiling.
    pub low: f64,
    pub high: f64,
    /// The point prediction for this run's transfer on this link: the
    /// slow-start model up to the lower of the ceiling and the link's
    /// payload rate.
    pub predicted: f64,
    pub scenario: Scenario,
}

/// One proposed fix as a lab variant.
#[derive(Clone, Debug)]
pub struct FixPlan {
    /// The diagnosis's fix kind (`raise_tcp_rmem`, ...) or, for an
    /// alternative the fix text names, `<kind>+<what>` (e.g. `policer_not_host+pacing`).
    pub kind: String,
    /// What changes in the lab, in words.
    pub change: String,
    /// A host setting (sysctl, socket option, application) or a change to
    /// the path (a repaired link) that host tuning cannot make.
    pub host: bool,
    /// The predicted measure after the fix (from `what_if`), if any.
    pub predicted: Option<f64>,
    pub scenario: Scenario,
    /// The fix again at its ceiling, when its prediction is a range.
    pub ceiling: Option<Ceiling>,
}

/// A fix the lab does not run, and why.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Skipped {
    pub kind: String,
    pub why: String,
}

#[derive(Debug)]
pub struct Plan {
    pub scenario: Scenario,
    /// Each parameter, with where it came from.
    pub taken: Vec<Taken>,
    pub measure: Measure,
    /// The capture's value of the measure.
    pub captured: f64,
    /// The lab end whose capture plays the role of the user's capture.
    pub vantage: &'static str,
    /// The data sender is the lab's server (a download).
    pub sender_is_server: bool,
    pub fixes: Vec<FixPlan>,
    pub skipped: Vec<Skipped>,
    /// With flows sharing the path ([`Group`]): the captured flow's place
    /// among the rebuild's flows in the order they start, whose direction
    /// the lab's runs are judged on.
    pub flow_rank: Option<usize>,
}

/// The flows a finding says share the path with the diagnosed one (the
/// policer's `shared_with_connections`): the rebuild runs as many, started
/// as far apart, so that each gets the share of the path it had in the
/// capture. One flow alone behind a group's policer gets the whole bucket
/// (33 Mbit/s where three flows got 11 to 17 each).
#[derive(Clone, Debug)]
pub struct Group {
    /// Each flow's first packet (s, the capture's clock), this one's
    /// included.
    pub starts: Vec<f64>,
    /// This flow's start.
    pub own_start: f64,
    /// The data the flows carried in the shared direction, together.
    pub bytes: u64,
}

/// Flows of a group start at most this share of the lab's transfer apart
/// in all: later starters must still share the path with the first.
const GROUP_MAX_START_SPREAD: f64 = 0.5;

/// Why a direction cannot be rebuilt.
#[derive(Debug)]
pub struct CannotBuild(pub String);

struct Ctx<'a> {
    cs: &'a ConnectionSummary,
    d: &'a DirectionDiagnosis,
    /// index of the data sender in cs.directions
    s: usize,
    sender_is_server: bool,
    taken: Vec<Taken>,
    /// The lab's transfer, when it is shorter than the capture's: bytes,
    /// and the RTT and segment size the prediction for it needs.
    scaled: Option<(f64, f64, u32)>,
    /// The traffic is the captured conversation, replayed.
    replay: Option<Replayed>,
    group: Option<&'a Group>,
}

impl Ctx<'_> {
    /// A parameter the capture showed.
    fn take(&mut self, what: &str, value: String, from: String) {
        self.take_as(what, value, from, "seen");
    }
    /// A parameter the rebuild assumed.
    fn assume(&mut self, what: &str, value: String, from: String) {
        self.take_as(what, value, from, "assumed");
    }
    fn take_as(&mut self, what: &str, value: String, from: String, basis: &'static str) {
        self.taken.push(Taken { parameter: what.to_string(), value, from, basis });
    }
    /// The prediction for the lab's run ([`predicted`]); for a replay of
    /// part of the conversation, the whole direction's gain applied to it.
    fn predicted(&self, w: Option<&WhatIf>) -> Option<f64> {
        predicted(w, self.scaled).map(|p| p * self.replay.map_or(1.0, |r| r.scale))
    }
    fn sender_end(&self) -> &'static str {
        if self.sender_is_server {
            "server"
        } else {
            "client"
        }
    }
    fn receiver_end(&self) -> &'static str {
        if self.sender_is_server {
            "client"
        } else {
            "server"
        }
    }
    fn finding(&self, kind: &str) -> Option<&serde_json::Map<String, serde_json::Value>> {
        self.d.findings.iter().find(|f| f.kind == kind).map(|f| &f.numbers)
    }
    fn number(&self, kind: &str, key: &str) -> Option<f64> {
        self.finding(kind).and_then(|m| m.get(key)).and_then(|v| v.as_f64())
    }
}

fn end_mut<'a>(sc: &'a mut Scenario, end: &str) -> &'a mut EndSpec {
    if end == "server" {
        &mut sc.server
    } else {
        &mut sc.client
    }
}

/// The data direction's link overrides ("down" is server -> client).
fn data_dir(sc: &mut Scenario, sender_is_server: bool) -> &mut DirSpec {
    if sender_is_server {
        &mut sc.link.down
    } else {
        &mut sc.link.up
    }
}

/// A transfer scaled down in time keeps the bucket's share of its bytes:
/// the capture's goodput is the token rate plus what the bucket held
/// (spent at the start, refilled in idle gaps) over the whole capture, and
/// the full bucket spent over a shorter run would raise the lab's goodput
/// above the capture's (a 1 MB bucket at 3 Mbit/s: 26 s captured, 6 s in
/// the lab, 4.5 Mbit/s against 3.1). The burst is scaled as the bytes are,
/// to no less than 10 segments.
fn scale_bucket(cx: &mut Ctx, sc: &mut Scenario, factor: f64, mss: u32) {
    let ss = cx.sender_is_server;
    let Some(p) = data_dir(sc, ss).policer.as_mut() else {
        return;
    };
    let scaled = (p.burst.0 as f64 * factor).max(f64::from(mss) * 10.0).round() as u64;
    if scaled >= p.burst.0 {
        return;
    }
    let was = p.burst.0;
    p.burst = Bytes(scaled);
    let rate = p.rate.0 as f64;
    let name = if ss { "link.down.policer" } else { "link.up.policer" };
    if let Some(t) = cx.taken.iter_mut().find(|t| t.parameter == name) {
        t.value = format!("{} with a {} burst", fmt_rate(rate), fmt_bytes(scaled as f64));
        t.from = format!(
            "the policer finding's token rate and burst ({}), the burst scaled as the transfer is (x{factor:.2}) so that it keeps its share of the bytes",
            fmt_bytes(was as f64)
        );
    }
}

fn rmem(max: u64) -> String {
    format!("4096 {} {max}", 131072.min(max))
}
fn wmem(max: u64) -> String {
    format!("4096 {} {max}", 16384.min(max))
}

/// Round up to 4 KiB, as a person would write it.
fn round_buffer(b: f64) -> u64 {
    ((b / 4096.0).ceil() as u64).max(1) * 4096
}

/// Which end opened the connection: the SYN's sender; without a handshake
/// in the capture, the end on the lower port is taken as the server.
fn client_is_a(cs: &ConnectionSummary) -> bool {
    if !cs.started_mid_capture {
        return true;
    }
    cs.a.port > cs.b.port
}

pub fn plan(
    cs: &ConnectionSummary,
    conn: &ConnectionDiagnosis,
    d: &DirectionDiagnosis,
    latency: Option<&LatencyReport>,
    group: Option<&Group>,
) -> Result<Plan, CannotBuild> {
    let s = if d.from == "a" { 0 } else { 1 };
    let sender_is_server = (s == 0) != client_is_a(cs);
    let group = group.filter(|g| g.starts.len() >= 2);
    let mut cx = Ctx { cs, d, s, sender_is_server, taken: Vec::new(), scaled: None, replay: None, group };
    let Some(rtt_ms) = d.rtt.base_ms.or(d.rtt.handshake_ms).or(conn.handshake_rtt_ms) else {
        return Err(CannotBuild(
            "no RTT was measured for this connection (no handshake, no ACKed data): the path cannot be rebuilt; pass a capture with the handshake".into(),
        ));
    };
    let mut sc: Scenario = scenario::load("prove", "name = \"x\"\ntitle = \"x\"\ncause = \"none\"\n[traffic]\nkind = \"bulk\"\nbytes = 1\n", &[])
        .expect("the empty scenario is valid");
    sc.name = "prove".into();
    sc.cause = d.primary;
    sc.title = format!("rebuilt from connection {} ({} -> {}): {}", conn.id.number, d.sender, d.receiver, d.primary.as_str());
    sc.description = format!("Written by `tcpwhy prove` from the diagnosis: {}", d.summary);
    sc.expect.clear();

    let mss = path(&mut cx, &mut sc, rtt_ms);
    ends(&mut cx, &mut sc, mss);
    let (measure, captured) = traffic(&mut cx, &mut sc, latency, rtt_ms, mss);
    initial_window(&mut cx, &mut sc, conn.id.number, latency, mss);
    let (se, re) = (cx.sender_end(), cx.receiver_end());
    if captured <= 0.0 {
        return Err(CannotBuild("the capture gives no goodput for this direction to compare with".into()));
    }
    sc.validate().map_err(|e| CannotBuild(format!("the rebuilt scenario is not valid: {e}")))?;

    let vantage = match d.capture_point {
        "near_sender" => se,
        _ => re,
    };
    let (fixes, skipped) = fix_plans(&cx, &sc, measure, latency);
    let flow_rank = match (measure, group) {
        (Measure::GoodputBps, Some(g)) => Some(g.starts.iter().filter(|t| **t < g.own_start).count()),
        _ => None,
    };
    Ok(Plan { scenario: sc, taken: cx.taken, measure, captured, vantage, sender_is_server, fixes, skipped, flow_rank })
}

/// The path: RTT, MTU, bottleneck and queue, policer, random loss. Returns
/// the segment payload.
fn path(cx: &mut Ctx, sc: &mut Scenario, rtt_ms: f64) -> u32 {
    let d = cx.d;
    let sender_is_server = cx.sender_is_server;
    sc.link.rtt = Duration::from_micros(calc::us_from_ms(rtt_ms).round() as u64);
    cx.take("link.rtt", format!("{rtt_ms:.1} ms"), format!("the connection's base RTT ({})", d.rtt.source));
    let mss = segment_payload(cx);
    sc.link.mtu = mss + 52;
    cx.take("link.mtu", sc.link.mtu.to_string(), format!("{mss}-byte segments plus 40 bytes of IPv4/TCP headers and 12 of timestamps"));
    let policer = (d.primary == Cause::Policer).then(|| (cx.number("policer", "rate_bps"), cx.number("policer", "burst_bytes")));
    let rate = d.path_rate_bps.filter(|r| *r > 0.0);
    let queue_ms = match (d.rtt.p90_ms, d.rtt.base_ms) {
        (Some(p90), Some(base)) if p90 > base => p90 - base,
        _ => 0.0,
    };
    if let Some(r) = rate {
        sc.link.rate = Rate(r.round() as u64);
        match d.path_capacity {
            "given" => cx.take_as("link.rate", fmt_rate(r), "the path rate you gave (--bandwidth)".into(), "given"),
            "seen" => cx.take("link.rate", fmt_rate(r), "the path rate from packet spacing; the capture showed the path full".into()),
            "paired" => cx.take("link.rate", fmt_rate(r), "the path rate the two capture points measured (--pair: the drain rate of a queue between them, or what the sender's capture saw)".into()),
            _ => cx.assume(
                "link.rate",
                fmt_rate(r),
                "the path rate from packet spacing, a lower bound: the capture never showed the path full (fixes are run here and at their ceiling)".into(),
            ),
        }
        let standing = matches!(d.primary, Cause::Shaper | Cause::BottleneckLink | Cause::CongestionLoss);
        let q = if standing && queue_ms > 0.0 {
            cx.take(
                "link.queue",
                String::new(),
                format!("the queue the RTT rise shows: {queue_ms:.1} ms (p90 over base) at the path rate"),
            );
            // the bytes the path rate carries in queue_ms, in the order of
            // the operations this value has always been computed in
            calc::s_from_ms(calc::bytes_in(r, queue_ms))
        } else {
            cx.assume(
                "link.queue",
                String::new(),
                "no standing queue in the capture: one bandwidth-delay product (the classic buffer-sizing rule)".into(),
            );
            bdp_queue(r, calc::s_from_ms(rtt_ms))
        };
        let q = round_buffer(q.max(MIN_QUEUE_BYTES));
        sc.link.queue = Some(Bytes(q));
        if let Some(t) = cx.taken.last_mut() {
            t.value = fmt_bytes(q as f64);
        }
    } else {
        cx.assume("link.rate", "none".into(), "no path rate could be estimated: the lab's link is not a bottleneck".into());
    }
    if let Some((Some(prate), burst)) = policer {
        let burst = burst.unwrap_or(0.0).max(f64::from(mss) * 10.0);
        let ss = sender_is_server;
        data_dir(sc, ss).policer = Some(PolicerSpec { rate: Rate(prate.round() as u64), burst: Bytes(burst.round() as u64) });
        let what = if ss { "link.down.policer" } else { "link.up.policer" };
        let value = format!("{} with a {} burst", fmt_rate(prate), fmt_bytes(burst));
        if cx.finding("policer").and_then(|m| m.get("rate_unseen")).and_then(|v| v.as_bool()) == Some(true) {
            // each burst found the bucket full: its rate is a lower bound
            cx.assume(what, value, "the policer finding's burst, and its rate as a lower bound: the losses showed the bucket's size, not its rate (rate_unseen)".into());
        } else {
            cx.take(what, value, "the policer finding's token rate and burst".into());
        }
        if rate.is_some_and(|r| r < prate * 1.05) {
            // the path estimate is the policed rate itself: no bottleneck beyond the policer
            sc.link.rate = Rate(0);
            sc.link.queue = None;
            cx.take("link.rate", "none".into(), "the estimated path rate is the policer's own: no other bottleneck".into());
        }
    }
    if matches!(d.primary, Cause::RandomLoss) {
        if let Some(p) = cx.number("retransmissions", "retransmission_rate").filter(|p| *p > 0.0) {
            let ss = sender_is_server;
            data_dir(sc, ss).loss = Some(p);
            cx.take(
                if ss { "link.down.loss" } else { "link.up.loss" },
                format!("{:.3}%", p * 100.0),
                "the share of data segments retransmitted".into(),
            );
        }
    }
    mss
}

/// Both end hosts: buffers, window scaling, congestion control, cached metrics.
fn ends(cx: &mut Ctx, sc: &mut Scenario, mss: u32) {
    let d = cx.d;
    let (cs, s) = (cx.cs, cx.s);
    let (se, re) = (cx.sender_end(), cx.receiver_end());
    let mut rcv_max = UNLIMITING_BUFFER;
    let mut snd_max = UNLIMITING_BUFFER;
    // A reader that fell behind until the window closed did so against a
    // buffer the size of the largest window: a larger one would have held
    // what it did not read with the window open.
    let reader_closed = d.primary == Cause::ReceiverApplication && cx.number("receiver_application", "zero_windows").is_some_and(|z| z > 0.0);
    if d.primary == Cause::ReceiverWindow || reader_closed {
        if let Some(w) = cx.number("window_plateau", "window_bytes") {
            rcv_max = round_buffer(w / LAB_WINDOW_PER_RMEM);
            cx.take(
                &format!("{re}.tcp_rmem"),
                rmem(rcv_max),
                format!("the receiver's largest window, {}, through the kernel's rule (window = {LAB_WINDOW_PER_RMEM} x buffer here)", fmt_bytes(w)),
            );
        }
    }
    if d.primary == Cause::SendBuffer {
        if let Some(f) = cx.number("flight_plateau", "flight_bytes") {
            snd_max = round_buffer(f / LAB_FLIGHT_PER_WMEM);
            cx.take(
                &format!("{se}.tcp_wmem"),
                wmem(snd_max),
                format!("the flight plateau, {}, over the {LAB_FLIGHT_PER_WMEM} of the buffer a sender keeps in flight", fmt_bytes(f)),
            );
        }
    }
    end_mut(sc, re).tcp_rmem = Some(rmem(rcv_max));
    end_mut(sc, se).tcp_wmem = Some(wmem(snd_max));
    // window scaling: a side whose SYN lacked the option
    let offered = |i: usize| cs.directions[i].window_scale_offered;
    for (i, end) in [(s, se), (1 - s, re)] {
        if offered(i) == Some(false) {
            end_mut(sc, end).tcp_window_scaling = Some(false);
            cx.take(&format!("{end}.tcp_window_scaling"), "false".into(), "its SYN carried no window-scale option".into());
        }
    }
    // The algorithm the capture shows (tcpwhy_diagnose::congestion), else Linux's default.
    let cc = &d.congestion_control;
    match (cc.acted_on(), cc.confidence) {
        (Some(name), Some(c)) => {
            end_mut(sc, se).congestion = Some(name.into());
            cx.take(&format!("{se}.congestion"), name.into(), format!("the capture shows it ({c}): {}", cc.evidence));
        }
        _ => {
            end_mut(sc, se).congestion = Some("cubic".into());
            cx.assume(&format!("{se}.congestion"), "cubic".into(), format!("Linux's default; the capture does not show the algorithm ({})", cc.evidence));
        }
    }
    if d.primary == Cause::CachedSsthresh {
        if let Some(b) = cx.number("early_slow_start_exit", "bytes_per_rtt_at_exit") {
            let segs = ((b / f64::from(mss)).round() as u32).max(2);
            end_mut(sc, se).tcp_metrics = Some(MetricsSeed { ssthresh: Some(segs), cwnd: None });
            cx.take(&format!("{se}.tcp_metrics"), format!("ssthresh {segs}"), "slow start ended at this many segments per round trip".into());
        }
    }
}

/// The traffic, and which measure the rebuild is judged on with the
/// capture's value of it.
fn traffic(cx: &mut Ctx, sc: &mut Scenario, latency: Option<&LatencyReport>, rtt_ms: f64, mss: u32) -> (Measure, f64) {
    let d = cx.d;
    let sender_is_server = cx.sender_is_server;
    let churn = latency.and_then(|l| l.findings.iter().find(|f| f.kind == "connection_churn"));
    match churn {
        Some(f) if d.primary == Cause::SlowStart => {
            let l = latency.unwrap();
            let conns = f.numbers.get("connections").and_then(|v| v.as_u64()).unwrap_or(1).clamp(1, 50);
            let mut sizes: Vec<u64> = l.connections.iter().flat_map(|c| c.exchanges.iter().map(|e| e.response_bytes)).collect();
            sizes.sort_unstable();
            let response = sizes.get(sizes.len() / 2).copied().unwrap_or(d.bytes).max(1);
            let mut gaps: Vec<f64> =
                l.connections.iter().flat_map(|c| c.exchanges.iter().filter_map(|e| e.idle_before_ms)).collect();
            gaps.sort_by(f64::total_cmp);
            let idle = gaps.get(gaps.len() / 2).copied().unwrap_or(0.0).max(0.0);
            let mut t = toml::Table::new();
            t.insert("kind".into(), "reqresp".into());
            t.insert("protocol".into(), "http".into());
            t.insert("connection".into(), "new".into());
            t.insert("requests".into(), (conns as i64).into());
            t.insert("response_bytes".into(), (response as i64).into());
            t.insert("idle_ms".into(), (idle.round() as i64).into());
            sc.traffic = t;
            cx.take(
                "traffic",
                format!("{conns} HTTP requests, a new connection each, {} responses, {idle:.0} ms apart", fmt_bytes(response as f64)),
                "the capture's exchanges (median response size and gap)".into(),
            );
            (Measure::ExchangeMs, l.total_ms)
        }
        _ if replay(cx, sc, latency, rtt_ms).is_some() => (Measure::GoodputBps, cx.replay.as_ref().map_or(0.0, |r| r.captured_bps)),
        _ => {
            let mut t = toml::Table::new();
            t.insert("kind".into(), "bulk".into());
            t.insert("direction".into(), if sender_is_server { "download" } else { "upload" }.into());
            let rate = d.goodput_bps.unwrap_or(0.0);
            // the rebuild's time per second of the capture
            let mut time_scale = 1.0;
            if d.duration_s <= MAX_LAB_SECONDS || rate <= 0.0 {
                t.insert("bytes".into(), (d.bytes.max(1) as i64).into());
                cx.take("traffic", format!("one transfer of {}", fmt_bytes(d.bytes as f64)), "the bytes of the direction".into());
            } else {
                // what the captured rate moves in MAX_LAB_SECONDS: the same
                // transfer, shorter; fixes then move the same bytes faster
                let bytes = calc::bytes_in(rate, MAX_LAB_SECONDS).round().max(1.0);
                time_scale = MAX_LAB_SECONDS / d.duration_s;
                t.insert("bytes".into(), (bytes as i64).into());
                cx.scaled = Some((bytes, calc::s_from_ms(rtt_ms), mss));
                scale_bucket(cx, sc, bytes / d.bytes.max(1) as f64, mss);
                cx.take(
                    "traffic",
                    format!("one transfer of {}", fmt_bytes(bytes)),
                    format!(
                        "the capture's {} in {:.1} s, scaled down in time to {MAX_LAB_SECONDS} s at the captured rate (predictions are made for this transfer)",
                        fmt_bytes(d.bytes as f64),
                        d.duration_s
                    ),
                );
            }
            if let Some(g) = cx.group {
                shared_path(cx, &mut t, g, time_scale);
            }
            if d.primary == Cause::SenderApplication {
                if let Some(g) = d.goodput_bps {
                    t.insert("app_rate_bps".into(), (g.round() as i64).into());
                    cx.take("traffic.app_rate_bps", fmt_rate(g), "the sender's application wrote at the goodput".into());
                }
                // an application on its own clock writes its bursts: the
                // same chunk at the same rate, not the lab's default writes
                let tick = [("application_clock", "burst_bytes"), ("application_timer", "chunk_bytes")]
                    .into_iter()
                    .find_map(|(kind, key)| cx.number(kind, key).map(|b| (kind, b)))
                    .filter(|&(_, b)| b >= 1.0 && b <= f64::from(tcpwhy_traffic::MAX_IO_SIZE));
                if let Some((kind, b)) = tick {
                    t.insert("write_size".into(), (b.round() as i64).into());
                    cx.take("traffic.write_size", fmt_bytes(b), format!("the bytes the sender's application wrote per tick of its clock ({kind})"));
                }
            }
            if d.primary == Cause::ReceiverApplication {
                if let Some(g) = d.goodput_bps {
                    t.insert("read_rate_bps".into(), (g.round() as i64).into());
                    cx.take("traffic.read_rate_bps", fmt_rate(g), "the receiving application read at the goodput".into());
                }
            }
            sc.traffic = t;
            (Measure::GoodputBps, d.goodput_bps.unwrap_or(0.0))
        }
    }
}

/// A conversation the direction's data waited on between its turns (the
/// peer's replies, the application's pauses) is replayed turn by turn
/// ([`super::replay`]) instead of as one transfer, so that the idle time
/// the capture shows stays in the rebuild and in every fix's run, as the
/// what-if keeps it. Sets the scenario's traffic and `cx.replay`.
fn replay(cx: &mut Ctx, sc: &mut Scenario, latency: Option<&LatencyReport>, rtt_ms: f64) -> Option<()> {
    use super::replay::{Conversation, Near, MAX_REPLAY_SECONDS};
    let (cs, d) = (cx.cs, cx.d);
    // flows sharing a bucket are rebuilt as transfers of their shares
    // (`shared_path`), not one of them as its turns
    if cx.group.is_some() {
        return None;
    }
    let conn = latency?.connections.iter().find(|c| c.connection == cs.id)?;
    let sender_is_a = cx.s == 0;
    let near = match d.capture_point {
        "near_sender" if sender_is_a => Near::A,
        "near_sender" => Near::B,
        "near_receiver" if sender_is_a => Near::B,
        "near_receiver" => Near::A,
        _ => Near::Middle,
    };
    let held: Vec<(f64, f64)> =
        d.timeline.iter().filter(|r| r.state == tcpwhy_core::Limit::ReceiverApplication).map(|r| (r.start, r.end)).collect();
    let conv = Conversation {
        turns: &conn.turns,
        client_is_a: client_is_a(cs),
        sender_is_a,
        near,
        rtt_s: calc::s_from_ms(rtt_ms),
        syn: (!cs.started_mid_capture).then_some(cs.first_time),
        reader_held: &held,
    };
    let script = conv.script()?;
    if script.data_span_s <= 0.0 {
        return None;
    }
    let whole = script.turns == script.turns_total;
    // the capture's measure over the turns replayed: the direction's own
    // when they are all of them
    let captured_bps = match d.goodput_bps {
        Some(g) if whole => g,
        _ => calc::bps(script.data_bytes as f64, script.data_span_s),
    };
    let mut t = toml::Table::new();
    t.insert("kind".into(), "script".into());
    let steps: Vec<toml::Value> = script
        .steps
        .iter()
        .map(|st| toml::Value::try_from(st).expect("a step is plain data"))
        .collect();
    t.insert("steps".into(), toml::Value::Array(steps));
    sc.traffic = t;
    let peer_turns = script.turns - script.data_turns;
    cx.take(
        "traffic",
        format!(
            "the conversation replayed: {} turns ({} of data, {}; {} of the other end)",
            script.turns,
            script.data_turns,
            fmt_bytes(script.data_bytes as f64),
            peer_turns
        ),
        if whole {
            "the capture's turns, each after the think time the capture shows before it (from the ACK of the turn it answers)".into()
        } else {
            format!(
                "the capture's first {} of {} turns (the first {MAX_REPLAY_SECONDS} s), each after the think time the capture shows before it; the capture's goodput over them is {}",
                script.turns,
                script.turns_total,
                fmt_rate(captured_bps)
            )
        },
    );
    if script.reader_steps > 0 {
        cx.take(
            "traffic.steps.read_pause_ms",
            format!("{} data turns", script.reader_steps),
            "the receiving application held them (its window closed): its reads stop as long as the capture shows for each".into(),
        );
    }
    idle_restart(cx, sc, conn);
    // a fix's prediction is for the whole direction: the replayed turns
    // gain in the same proportion
    cx.replay = Some(Replayed { captured_bps, scale: d.goodput_bps.map_or(1.0, |g| captured_bps / g), data_bytes: script.data_bytes });
    Some(())
}

/// A first flight after idle of more segments than this did not restart
/// from the initial window: 10 segments (RFC 6928) and half again, the
/// bound `tcpwhy latency` reads a restart by.
const RESTART_MAX_FLIGHT_SEGMENTS: u64 = 15;

/// A sender whose turns after an idle longer than the RTO went on at the
/// window it had (RFC 5681 4.1 and Linux's tcp_slow_start_after_idle
/// restart it from the initial window) keeps its window after idle in the
/// rebuild: net.ipv4.tcp_slow_start_after_idle = 0, or a system without
/// the restart. A sender that restarted keeps the default.
fn idle_restart(cx: &mut Ctx, sc: &mut Scenario, conn: &tcpwhy_diagnose::latency::ConnLatency) {
    // the exchanges' responses are the data sender's turns when the
    // requester is the other end
    let requester_is_sender = conn.client == cx.d.sender;
    if requester_is_sender {
        return;
    }
    let after_idle: Vec<_> = conn.exchanges.iter().filter(|e| e.idle_exceeds_rto && e.response_rounds >= 2).collect();
    let (restarted, kept) = (after_idle.iter().filter(|e| e.idle_restart).count(), after_idle.iter().filter(|e| !e.idle_restart && e.first_flight_segments > RESTART_MAX_FLIGHT_SEGMENTS).count());
    if kept > 0 && restarted == 0 {
        let se = cx.sender_end();
        end_mut(sc, se).tcp_slow_start_after_idle = Some(false);
        cx.take(
            &format!("{se}.tcp_slow_start_after_idle"),
            "false".into(),
            format!("{kept} of its turns after an idle longer than the RTO went on at the window it had, none from the initial window"),
        );
    }
}

/// A replayed conversation: the capture's measure over the replayed turns,
/// and its ratio to the whole direction's.
#[derive(Clone, Copy, Debug)]
struct Replayed {
    captured_bps: f64,
    scale: f64,
    /// The data sender's bytes in the replayed turns.
    data_bytes: u64,
}

/// The flows of the capture's group ([`Group`]) in the rebuild: as many
/// connections, each carrying its share of the group's bytes (the lab
/// splits them evenly, so the flow's own transfer scaled by the group's),
/// started the median gap of the capture's starts apart (scaled in time
/// as the transfer is), at most [`GROUP_MAX_START_SPREAD`] of the
/// flow's own time in all.
fn shared_path(cx: &mut Ctx, t: &mut toml::Table, g: &Group, time_scale: f64) {
    let d = cx.d;
    let own = t.get("bytes").and_then(|v| v.as_integer()).unwrap_or(1) as f64;
    let r = group_traffic(g, own, d.duration_s.min(MAX_LAB_SECONDS), time_scale);
    let (n, bytes, interval) = (r.flows, r.bytes, r.interval_s);
    t.insert("bytes".into(), (bytes as i64).into());
    t.insert("connections".into(), (n as i64).into());
    if interval > 0.0 {
        t.insert("start_interval_s".into(), interval.into());
    }
    let value = format!("{n} transfers of {} each, started {interval:.1} s apart", fmt_bytes(bytes as f64 / n as f64));
    let from = format!(
        "the {n} flows that share the path in the capture ({} in all, their starts a median {:.2} s apart{}), each carrying what this one did",
        fmt_bytes(g.bytes as f64),
        r.captured_gap_s,
        if time_scale < 1.0 { ", both scaled in time as the transfer is" } else { "" }
    );
    match cx.taken.iter_mut().rev().find(|t| t.parameter == "traffic") {
        Some(e) => {
            e.value = value;
            e.from = format!("{from}; {}", e.from);
        }
        None => cx.take("traffic", value, from),
    }
}

/// The rebuild's traffic for a group ([`shared_path`]).
#[derive(Debug, PartialEq)]
struct GroupTraffic {
    flows: usize,
    /// All the flows' bytes, which the lab splits evenly: as many times
    /// the captured flow's.
    bytes: u64,
    /// Between two starts in the rebuild, rounded to 0.1 s.
    interval_s: f64,
    /// The capture's median gap between two starts.
    captured_gap_s: f64,
}

/// `own`: the captured flow's bytes in the rebuild; `own_s`: its time in
/// the rebuild; `time_scale`: the rebuild's seconds per captured second.
/// Every flow carries what the captured one did (the lab splits the bytes
/// evenly): the captured flow then shares the bucket as it did until it
/// ends, as it did. An even split of the group's bytes ended the first
/// of three flows early, alone at the end no more (18.9 against 16.0
/// Mbit/s captured, near the reproduction's 20%).
fn group_traffic(g: &Group, own: f64, own_s: f64, time_scale: f64) -> GroupTraffic {
    let n = g.starts.len().max(2);
    let mut starts = g.starts.clone();
    starts.sort_by(f64::total_cmp);
    let mut gaps: Vec<f64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort_by(f64::total_cmp);
    let gap = gaps.get(gaps.len() / 2).copied().unwrap_or(0.0);
    let interval = (gap * time_scale).min(GROUP_MAX_START_SPREAD * own_s / (n - 1) as f64).max(0.0);
    GroupTraffic {
        flows: n,
        bytes: ((own * n as f64).round() as u64).max(n as u64),
        interval_s: (interval * 10.0).round() / 10.0,
        captured_gap_s: gap,
    }
}

/// Linux's initial window (RFC 6928), which the lab's sender has unless the
/// capture shows a larger one.
const LINUX_INITIAL_WINDOW: u32 = 10;

/// A first flight of more than 10 segments (a CDN's or a tuned server's
/// `initcwnd`) becomes the lab sender's route `initcwnd`. A smaller one is
/// left alone: the receiver's window or the application can make a first
/// flight smaller than the initial window, never larger.
fn initial_window(cx: &mut Ctx, sc: &mut Scenario, conn: u64, latency: Option<&LatencyReport>, mss: u32) {
    let Some(first) = latency
        .and_then(|l| l.connections.iter().find(|c| c.connection == conn))
        .and_then(|c| c.exchanges.iter().find(|e| e.new_connection && e.first_flight_bytes > 0))
    else {
        return;
    };
    let segs = (first.first_flight_bytes as f64 / f64::from(mss.max(1))).round() as u32;
    if segs > LINUX_INITIAL_WINDOW && segs <= 256 {
        let se = cx.sender_end();
        end_mut(sc, se).initcwnd = Some(segs);
        cx.take(
            &format!("{se}.initcwnd"),
            segs.to_string(),
            format!("the first flight of the connection, {} (Linux sends {LINUX_INITIAL_WINDOW} segments by default)", fmt_bytes(first.first_flight_bytes as f64)),
        );
    }
}

/// Payload bytes of a full segment, as the lab can send it (the MSS the
/// receiver announced when the capture saw super-segments of offloading).
fn segment_payload(cx: &Ctx) -> u32 {
    let seg = cx.d.segment_bytes;
    if (500..=8948).contains(&seg) {
        return seg;
    }
    let peer_mss = cx.cs.directions[1 - cx.s].mss.filter(|m| (536..=8960).contains(&u32::from(*m)));
    tcpwhy_diagnose::record::full_segment(peer_mss)
}

/// The prediction for the lab's transfer: the diagnosis's own when the lab
/// moves the capture's bytes; for a transfer scaled down in time, the same
/// slow-start model (tcpwhy_diagnose::transfer_bps) applied to the lab's
/// bytes from the diagnosis's rate once past slow start.
fn predicted(w: Option<&WhatIf>, scaled: Option<(f64, f64, u32)>) -> Option<f64> {
    let w = w?;
    match (scaled, w.steady_bps) {
        (Some((bytes, rtt_s, mss)), Some(steady)) => Some(tcpwhy_diagnose::transfer_bps(bytes, steady, rtt_s, mss).0),
        _ => w.predicted_bps,
    }
}

fn fix_plans(cx: &Ctx, base: &Scenario, measure: Measure, latency: Option<&LatencyReport>) -> (Vec<FixPlan>, Vec<Skipped>) {
    let (se, re) = (cx.sender_end(), cx.receiver_end());
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    let what_if = |k: &str| cx.d.what_if.iter().find(|w| w.fix == k);
    let mut push = |kind: &str, change: String, host: bool, pred: Option<f64>, f: &dyn Fn(&mut Scenario)| {
        let mut sc = base.clone();
        f(&mut sc);
        sc.name = format!("prove-{}", kind.replace(['+', '_'], "-"));
        out.push(FixPlan { kind: kind.to_string(), change, host, predicted: pred, scenario: sc, ceiling: None });
    };
    if measure == Measure::ExchangeMs {
        let l = latency.expect("exchanges come with a latency report");
        for fix in &l.fixes {
            let pred = l.predicted_ms.get(fix.kind).and_then(|v| v.as_f64());
            match fix.kind {
                "reuse_connections" => push(fix.kind, "one keep-alive connection carries every request".into(), true, pred, &|sc| {
                    sc.traffic.insert("connection".into(), "reuse".into());
                }),
                "no_slow_start_after_idle" => push(fix.kind, format!("{se}.tcp_slow_start_after_idle = false"), true, pred, &|sc| {
                    end_mut(sc, se).tcp_slow_start_after_idle = Some(false);
                }),
                k => skipped.push(Skipped { kind: k.into(), why: "not modelled in the lab rebuild".into() }),
            }
        }
        return (out, skipped);
    }
    // A sender that runs BBR already is not switched to it.
    let runs_bbr = cx.d.congestion_control.acted_on() == Some("bbr");
    for fix in &cx.d.fixes {
        let w = what_if(fix.kind);
        match fix.kind {
            // The fix's buffer, whatever system its commands are written for.
            "raise_tcp_rmem" => match fix.buffer_bytes.map(rmem) {
                Some(v) => push(fix.kind, format!("{re}.tcp_rmem = \"{v}\""), true, cx.predicted(w), &|sc| {
                    end_mut(sc, re).tcp_rmem = Some(v.clone());
                }),
                None => skipped.push(Skipped { kind: fix.kind.into(), why: "the fix names no tcp_rmem value".into() }),
            },
            "raise_tcp_wmem" => match fix.buffer_bytes.map(wmem) {
                Some(v) => push(fix.kind, format!("{se}.tcp_wmem = \"{v}\""), true, cx.predicted(w), &|sc| {
                    end_mut(sc, se).tcp_wmem = Some(v.clone());
                }),
                None => skipped.push(Skipped { kind: fix.kind.into(), why: "the fix names no tcp_wmem value".into() }),
            },
            "enable_window_scaling" => push(fix.kind, "tcp_window_scaling = true at both ends".into(), true, cx.predicted(w), &|sc| {
                sc.client.tcp_window_scaling = Some(true);
                sc.server.tcp_window_scaling = Some(true);
            }),
            "policer_not_host" => {
                // the fix's own pacing rate (per flow, below its share of a
                // group's bucket), else 95% of the bucket's
                let r = cx.number("policer", "rate_bps").unwrap_or(cx.d.goodput_bps.unwrap_or(0.0));
                let pace = fix.pace_bps.unwrap_or(r * 0.95).floor();
                push(
                    "policer_not_host+pacing",
                    format!("the sender paces at {} (SO_MAX_PACING_RATE, as fq maxrate would): the policer stays", fmt_rate(pace)),
                    true,
                    cx.predicted(w),
                    &|sc| {
                        set_socket_opt(sc, se, "pacing_rate_bps", toml::Value::Integer(pace as i64));
                    },
                );
                if !runs_bbr { push(
                    "policer_not_host+bbr",
                    format!("{se}.congestion = bbr (paces at the rate it measures): the policer stays"),
                    true,
                    None,
                    &|sc| {
                        end_mut(sc, se).congestion = Some("bbr".into());
                    },
                ); }
            }
            // the sender paces (BBR paces at the rate it measures); the
            // bucket stays, at the lowest rate the losses allow
            "pace_bursts" if runs_bbr => skipped.push(Skipped { kind: fix.kind.into(), why: "the sender runs BBR already".into() }),
            "pace_bursts" => push("pace_bursts+bbr", format!("{se}.congestion = bbr (paces at the rate it measures): the policer stays"), true, cx.predicted(w), &|sc| {
                end_mut(sc, se).congestion = Some("bbr".into());
            }),
            "find_lossy_link" => {
                push(fix.kind, "the lossy link repaired (no random loss): a path change, not host tuning".into(), false, cx.predicted(w), &|sc| {
                    sc.link.loss = 0.0;
                    sc.link.down.loss = None;
                    sc.link.up.loss = None;
                });
                if !runs_bbr {
                    push("find_lossy_link+bbr", format!("{se}.congestion = bbr, the loss stays"), true, None, &|sc| {
                        end_mut(sc, se).congestion = Some("bbr".into());
                    });
                }
            }
            "shaper_queue" if runs_bbr => skipped.push(Skipped { kind: fix.kind.into(), why: "the sender runs BBR already".into() }),
            "shaper_queue" => push("shaper_queue+bbr", format!("{se}.congestion = bbr (keeps the shaper's queue short)"), true, cx.predicted(w), &|sc| {
                end_mut(sc, se).congestion = Some("bbr".into());
            }),
            "application_window" => push(fix.kind, "the application writes as fast as TCP takes it".into(), true, cx.predicted(w), &|sc| {
                sc.traffic.remove("app_rate_bps");
                // a replayed conversation whose sender waited on the
                // other end's turns: its data as one transfer, no waits
                if let Some(r) = cx.replay {
                    let mut t = toml::Table::new();
                    t.insert("kind".into(), "bulk".into());
                    t.insert("direction".into(), if cx.sender_is_server { "download" } else { "upload" }.into());
                    t.insert("bytes".into(), (r.data_bytes.max(1) as i64).into());
                    sc.traffic = t;
                }
            }),
            "receiver_reads_faster" => push(fix.kind, "the receiving application reads as fast as data arrives".into(), true, cx.predicted(w), &|sc| {
                sc.traffic.remove("read_rate_bps");
                if let Some(toml::Value::Array(steps)) = sc.traffic.get_mut("steps") {
                    for st in steps.iter_mut().filter_map(|v| v.as_table_mut()) {
                        st.remove("read_pause_ms");
                    }
                }
            }),
            "flush_tcp_metrics" => push(fix.kind, format!("no cached tcp_metrics entry at the {se}, tcp_no_metrics_save = true"), true, cx.predicted(w), &|sc| {
                let e = end_mut(sc, se);
                e.tcp_metrics = None;
                e.tcp_no_metrics_save = Some(true);
            }),
            "application_buffer" => skipped.push(Skipped {
                kind: fix.kind.into(),
                why: "the same window as raise_tcp_rmem, set by the application: measured there".into(),
            }),
            "link_capacity" => skipped.push(Skipped { kind: fix.kind.into(), why: "more capacity is a change to the path; nothing on the hosts to run".into() }),
            k => skipped.push(Skipped { kind: k.into(), why: "not modelled in the lab rebuild".into() }),
        }
    }
    // a replay's turns are not a transfer to lengthen on a faster link
    let bulk = |f: &FixPlan| f.scenario.traffic.get("kind").and_then(|k| k.as_str()) != Some("script");
    for f in out.iter_mut().filter(|f| f.predicted.is_some() && bulk(f)) {
        let w = what_if(fix_kind(&f.kind));
        // the run at the ceiling tests the rate the fix allows past slow
        // start (the transfer's own replayed range is what it predicts here)
        let range = w.and_then(|w| w.steady_range());
        f.ceiling = match w.map(|w| w.bound) {
            Some("policer_rate") => policer_ceiling(f, range, cx.sender_is_server, cx.group.map_or(1, |g| g.starts.len())),
            _ => ceiling(f, range),
        };
    }
    (out, skipped)
}

/// The fix at its ceiling (see [`Ceiling`]): when its prediction is a
/// range and the rebuild has a link rate to raise. The link runs at the
/// ceiling plus the headers, at most [`LAB_MAX_LINK_BPS`]; the transfer
/// moves at least [`CEILING_RUN_SECONDS`] of the point prediction.
fn ceiling(f: &FixPlan, range: Option<(f64, f64)>) -> Option<Ceiling> {
    let (_, high) = range?;
    let low = f.predicted?;
    let sc = &f.scenario;
    if sc.link.rate.0 == 0 {
        return None;
    }
    let (_, payload_share) = lab_payload(sc);
    let link_bps = (high / payload_share).min(LAB_MAX_LINK_BPS);
    if link_bps <= sc.link.rate.0 as f64 {
        return None;
    }
    let (mut c, predicted) = ceiling_run(sc, high.min(link_bps * payload_share), 1);
    c.link.rate = Rate(link_bps.round() as u64);
    // the queue keeps the rebuild's rule: one bandwidth-delay product of the new link
    let q = round_buffer(bdp_queue(link_bps, sc.link.rtt.as_secs_f64()).max(MIN_QUEUE_BYTES));
    c.link.queue = Some(Bytes(q));
    Some(Ceiling { parameter: "link.rate", link_bps, rebuild_link_bps: sc.link.rate.0 as f64, low, high, predicted, scenario: c })
}

/// The lab's segment payload and the share of the link's bytes it is (the
/// rest, [`LAB_HEADER_BYTES`], are headers).
fn lab_payload(sc: &Scenario) -> (u32, f64) {
    let mss = sc.link.mtu.saturating_sub(LAB_HEADER_BYTES).max(1);
    (mss, f64::from(mss) / f64::from(mss + LAB_HEADER_BYTES))
}

/// The rebuild for a run at a ceiling of `steady` (bit/s of payload per
/// flow, `flows` of them): the transfer moves at least
/// [`CEILING_RUN_SECONDS`] of it; with the point prediction for one flow's
/// share of that transfer (slow start counted). The caller raises the
/// rate it tests.
fn ceiling_run(sc: &Scenario, steady: f64, flows: usize) -> (Scenario, f64) {
    let (mss, _) = lab_payload(sc);
    let bytes = sc.traffic.get("bytes").and_then(|v| v.as_integer()).unwrap_or(1) as f64;
    let bytes = bytes.max(calc::bytes_in(steady * flows as f64, CEILING_RUN_SECONDS).round());
    let mut c = sc.clone();
    c.name = format!("{}-ceiling", sc.name);
    c.traffic.insert("bytes".into(), (bytes as i64).into());
    let predicted = tcpwhy_diagnose::transfer_bps(bytes / flows as f64, steady, sc.link.rtt.as_secs_f64(), mss).0;
    (c, predicted)
}

/// The fix behind a bucket as fast as the top of its range: a policer
/// whose rate the losses leave open (`rate_high_bps`) is rebuilt at the
/// lowest rate they allow, and the fix runs again with the bucket at the
/// highest (per flow times the flows that share it), its burst as it was.
fn policer_ceiling(f: &FixPlan, range: Option<(f64, f64)>, sender_is_server: bool, flows: usize) -> Option<Ceiling> {
    let (_, high) = range?;
    let low = f.predicted?;
    let sc = &f.scenario;
    let dir = if sender_is_server { &sc.link.down } else { &sc.link.up };
    let rebuild_bps = dir.policer.as_ref()?.rate.0 as f64;
    let (_, payload_share) = lab_payload(sc);
    let rate_bps = high * flows as f64 / payload_share;
    if rate_bps <= rebuild_bps {
        return None;
    }
    let (mut c, predicted) = ceiling_run(sc, high, flows);
    let d = if sender_is_server { &mut c.link.down } else { &mut c.link.up };
    if let Some(p) = d.policer.as_mut() {
        p.rate = Rate(rate_bps.round() as u64);
    }
    Some(Ceiling {
        parameter: if sender_is_server { "link.down.policer.rate" } else { "link.up.policer.rate" },
        link_bps: rate_bps,
        rebuild_link_bps: rebuild_bps,
        low,
        high,
        predicted,
        scenario: c,
    })
}

/// The diagnosis's fix a lab variant runs: `<kind>` of `<kind>+<how>`
/// (`pace_bursts+bbr` runs `pace_bursts`).
pub fn fix_kind(kind: &str) -> &str {
    kind.split('+').next().unwrap_or(kind)
}

/// A socket option of one end's lab sockets, in `[traffic.<end>]`.
fn set_socket_opt(sc: &mut Scenario, end: &str, key: &str, v: toml::Value) {
    let e = sc.traffic.entry(end.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if let toml::Value::Table(t) = e {
        t.insert(key.to_string(), v);
    }
}

/// The TOML written to the output directory: where each value came from,
/// then the scenario.
pub fn annotated(sc: &Scenario, header: &[String]) -> String {
    let mut s = String::new();
    for h in header {
        for line in h.lines() {
            s.push_str("# ");
            s.push_str(line);
            s.push('\n');
        }
    }
    s.push('\n');
    s.push_str(&sc.to_toml());
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_round_up_and_keep_a_valid_default() {
        assert_eq!(round_buffer(326272.0 / LAB_WINDOW_PER_RMEM), 528384);
        assert_eq!(rmem(65536), "4096 65536 65536");
        assert_eq!(wmem(1 << 20), "4096 16384 1048576");
    }

    fn fix_on(rate_bps: u64, bytes: i64, predicted: f64) -> FixPlan {
        let mut sc = scenario::load("t", "name = \"t\"\ntitle = \"t\"\ncause = \"none\"\n[traffic]\nkind = \"bulk\"\nbytes = 1\n", &[]).unwrap();
        sc.link.rate = Rate(rate_bps);
        sc.link.rtt = Duration::from_micros(40_000);
        sc.link.mtu = 1500;
        sc.traffic.insert("bytes".into(), bytes.into());
        FixPlan { kind: "raise_tcp_rmem".into(), change: String::new(), host: true, predicted: Some(predicted), scenario: sc, ceiling: None }
    }

    #[test]
    fn a_range_is_tested_at_its_ceiling_on_a_faster_longer_path() {
        // the capture showed 194 Mbit/s at least; the fix allows 835
        let f = fix_on(194_000_000, 32_000_000, 168e6);
        let c = ceiling(&f, Some((168e6, 835e6))).expect("a range gives a ceiling run");
        // the link carries the ceiling's payload plus 52 header bytes per 1448
        assert!((c.link_bps - 835e6 * 1500.0 / 1448.0).abs() < 1.0, "{}", c.link_bps);
        assert_eq!(c.scenario.link.rate.0, c.link_bps.round() as u64);
        // one bandwidth-delay product of the new link as its queue
        assert!(c.scenario.link.queue.unwrap().0 as f64 >= c.link_bps / 8.0 * 0.04);
        // at least CEILING_RUN_SECONDS at the ceiling: 835 Mbit/s x 2 s
        let bytes = c.scenario.traffic["bytes"].as_integer().unwrap() as f64;
        assert!((bytes - 835e6 / 8.0 * CEILING_RUN_SECONDS).abs() < 2.0, "{bytes}");
        // the point for this run pays slow start, below the ceiling
        assert!(c.predicted < 835e6 && c.predicted > 600e6, "{}", c.predicted);
        assert_eq!((c.low, c.high), (168e6, 835e6));
        // the base scenario is left as it was
        assert_eq!(f.scenario.link.rate.0, 194_000_000);
    }

    #[test]
    fn a_ceiling_above_the_lab_runs_at_its_fastest_link_and_none_without_a_range() {
        let f = fix_on(25_000_000, 5_000_000, 24e6);
        let c = ceiling(&f, Some((24e6, 1.25e9))).unwrap();
        assert_eq!(c.link_bps, LAB_MAX_LINK_BPS);
        // the point is what the link carries, not the ceiling beyond it
        assert!(c.predicted <= LAB_MAX_LINK_BPS * 1448.0 / 1500.0);
        assert!(ceiling(&f, None).is_none(), "a point prediction has nothing to test beyond it");
        let mut no_rate = f.clone();
        no_rate.scenario.link.rate = Rate(0);
        assert!(ceiling(&no_rate, Some((24e6, 1.25e9))).is_none(), "no link rate: nothing to raise");
    }

    #[test]
    fn a_group_is_rebuilt_as_its_flows_started_as_far_apart() {
        // three flows 1 s apart, 27 MiB together, the captured one 11 MiB in 5.8 s
        let g = Group { starts: vec![10.0, 12.0, 11.0], own_start: 10.0, bytes: 27 << 20 };
        let r = group_traffic(&g, (11 << 20) as f64, 5.8, 1.0);
        assert_eq!(r, GroupTraffic { flows: 3, bytes: 33 << 20, interval_s: 1.0, captured_gap_s: 1.0 });
        // scaled down in time: the gaps as the transfer is
        let r = group_traffic(&g, (2 << 20) as f64, 6.0, 0.25);
        assert_eq!((r.bytes, r.interval_s), (6 << 20, 0.3));
        // flows far apart in the capture still overlap in the rebuild
        let far = Group { starts: vec![0.0, 30.0], own_start: 0.0, bytes: 1 << 20 };
        assert_eq!(group_traffic(&far, 1e6, 4.0, 1.0).interval_s, 2.0);
    }

    #[test]
    fn measures_gain_in_the_right_sense() {
        assert!((Measure::GoodputBps.gain(50.0, 100.0) - 2.0).abs() < 1e-9);
        assert!((Measure::ExchangeMs.gain(1000.0, 250.0) - 4.0).abs() < 1e-9);
    }
}
