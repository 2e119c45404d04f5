//! One detector per cause. Each reads the shared path estimates
//! ([`crate::path::Path`]), the intervals and their states, and returns an
//! evidence struct whose numbers its findings cite; `crate::decide` ranks
//! them into the primary cause.
//!
//! | module | causes |
//! |---|---|
//! | [`window`] | receiver window, window scaling off, receiving application |
//! | [`sender`] | send buffer, sending application and application-level windows |
//! | [`loss`] | loss episodes, the queue before them: random loss, congestion loss, bottleneck link, shaper |
//! | [`policing`] | token-bucket policer (`crate::policer`, Flach et al.) |
//! | [`start`] | slow start and cold start, restarts after idle, cached ssthresh, HyStart |
//! | [`spurious`] | spurious retransmissions |
//!
//! Delayed ACKs and Nagle are per-request latency (`crate::latency`).

pub mod loss;
pub mod policing;
pub mod sender;
pub mod spurious;
pub mod start;
pub mod window;

use tcpwhy_core::units::calc;
use crate::limits::Interval;
use crate::model::{Evidence, Finding, LimitRun};
use crate::path::Path;
use crate::record::DirRecords;
use serde_json::{json, Map, Value};
use tcpwhy_core::Limit;
use tcpwhy_flow::{ConnectionSummary, DirectionSummary};

/// A state holding at least this share of the busy time gets its finding
/// even when it is not the primary (below it, the odd round trip).
pub const FINDING_MIN_SHARE: f64 = 0.05;

/// Busy time by state: the share of the intervals that were not idle.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Shares {
    pub receiver_window: f64,
    pub receiver_application: f64,
    pub send_buffer: f64,
    pub sender_application: f64,
    pub congestion_window: f64,
    pub bottleneck_link: f64,
    pub slow_start: f64,
    /// Intervals not idle.
    pub busy_intervals: f64,
}

impl Shares {
    /// One state's share of the busy time (idle and the policer, which
    /// the states read as the congestion window until the verdict, have
    /// none).
    pub fn of_state(&self, state: Limit) -> f64 {
        match state {
            Limit::ReceiverWindow => self.receiver_window,
            Limit::ReceiverApplication => self.receiver_application,
            Limit::SendBuffer => self.send_buffer,
            Limit::SenderApplication => self.sender_application,
            Limit::CongestionWindow => self.congestion_window,
            Limit::BottleneckLink => self.bottleneck_link,
            Limit::SlowStart => self.slow_start,
            Limit::Policer | Limit::Idle => 0.0,
        }
    }

    pub fn of(states: &[Limit]) -> Shares {
        let busy = states.iter().filter(|s| **s != Limit::Idle).count().max(1) as f64;
        let share = |state: Limit| states.iter().filter(|s| **s == state).count() as f64 / busy;
        Shares {
            receiver_window: share(Limit::ReceiverWindow),
            receiver_application: share(Limit::ReceiverApplication),
            send_buffer: share(Limit::SendBuffer),
            sender_application: share(Limit::SenderApplication),
            congestion_window: share(Limit::CongestionWindow),
            bottleneck_link: share(Limit::BottleneckLink),
            slow_start: share(Limit::SlowStart),
            busy_intervals: busy,
        }
    }
}

/// The share of all intervals in which a limit a congestion response
/// cannot tighten held the sender: the receiver's window and reader, the
/// send buffer, the sending application, and idle time (an application
/// with nothing to send).
pub(crate) fn held_elsewhere_share(states: &[Limit]) -> f64 {
    capture_share(states, &[Limit::ReceiverWindow, Limit::ReceiverApplication, Limit::SendBuffer, Limit::SenderApplication, Limit::Idle])
}

/// The share of all intervals, idle ones included, in one of `limits`.
pub(crate) fn capture_share(states: &[Limit], limits: &[Limit]) -> f64 {
    states.iter().filter(|s| limits.contains(s)).count() as f64 / states.len().max(1) as f64
}

/// What every detector reads.
pub(crate) struct Input<'a> {
    pub cs: &'a ConnectionSummary,
    /// The direction: 0 when `cs.a` sends.
    pub d: usize,
    pub ds: &'a DirectionSummary,
    pub peer: &'a DirectionSummary,
    pub r: &'a DirRecords,
    pub path: &'a Path,
    pub iv: &'a [Interval],
    pub states: &'a [Limit],
    pub shares: Shares,
}

impl Input<'_> {
    pub fn duration_s(&self) -> f64 {
        calc::s_from_ns((self.path.last_ns - self.path.first_ns) as f64)
    }

    /// How full the link was while the flow sent: its goodput over the
    /// intervals that were not idle (an application that paused between
    /// chunks left the link empty then, not full of something else), with
    /// what the other flows on the path delivered ([`Path::link_used_bps`]).
    pub fn link_used_bps(&self) -> Option<f64> {
        let busy = self.states.iter().filter(|s| **s != Limit::Idle).count();
        let busy_goodput = self.ds.goodput_bps.map(|g| if busy > 0 { g * self.states.len() as f64 / busy as f64 } else { g });
        self.path.link_used_bps(busy_goodput)
    }

    /// Runs of equal states on the capture's time axis.
    pub fn runs(&self) -> Vec<LimitRun> {
        runs(self.iv, self.states, self.path.width_ns())
    }

    /// Where a state held (up to 8 time ranges), as a finding's evidence.
    pub fn runs_of(&self, state: Limit) -> Vec<(f64, f64)> {
        self.runs().into_iter().filter(|x| x.state == state).take(8).map(|x| (x.start, x.end)).collect()
    }

    /// The receiver's largest advertised window (bytes); 0 when unknown,
    /// as with its window scale unknown (`analyze::open_windows`).
    pub fn rcv_win_max(&self) -> u64 {
        if self.peer.window_scale.is_none() {
            return 0;
        }
        self.peer.advertised_window.max_bytes.unwrap_or(0)
    }
}

pub(crate) fn runs(iv: &[Interval], states: &[Limit], width_ns: i64) -> Vec<LimitRun> {
    let mut v: Vec<LimitRun> = Vec::new();
    for (it, &s) in iv.iter().zip(states) {
        let (a, b) = (calc::s_from_ns(it.start_ns as f64), calc::s_from_ns((it.start_ns + width_ns) as f64));
        match v.last_mut() {
            Some(r) if r.state == s => {
                r.end = b;
                r.bytes += it.new_bytes;
            }
            _ => v.push(LimitRun { state: s, start: a, end: b, bytes: it.new_bytes }),
        }
    }
    v
}

pub(crate) fn num(v: f64) -> Value {
    if v.is_finite() {
        json!(calc::thousandths(v))
    } else {
        Value::Null
    }
}

pub(crate) fn finding(kind: &'static str, text: String, numbers: &[(&str, Value)], ev: Evidence) -> Finding {
    let mut m = Map::new();
    for (k, v) in numbers {
        m.insert((*k).to_string(), v.clone());
    }
    Finding { kind, text, numbers: m, evidence: ev }
}

pub(crate) fn endpoint_str(addr: &str, port: u16) -> String {
    if addr.contains(':') {
        format!("[{addr}]:{port}")
    } else {
        format!("{addr}:{port}")
    }
}

#[cfg(test)]
pub(crate) mod testkit {
    //! Synthetic directions for the detectors' unit tests: a connection
    //! summary from the flow model's own types, intervals and states.

    use crate::limits::Interval;
    use crate::path::Path;
    use crate::record::DirRecords;
    use tcpwhy_flow::ConnectionSummary;

    /// A connection seen from its handshake.
    pub fn summary() -> ConnectionSummary {
        ConnectionSummary { handshake_rtt_ms: Some(20.0), ..Default::default() }
    }

    pub fn path(sender_side: bool, base_ms: f64) -> Path {
        let rtt = tcpwhy_core::units::Duration::from_millis_f64(base_ms);
        Path {
            sender_side,
            smss: 1448,
            rtt: crate::path::Rtts { base: Some(rtt), median: Some(rtt), p90: Some(rtt), handshake: Some(rtt), source: "data_ack" },
            min_rtt: Some(tcpwhy_core::units::Duration::from_millis_f64(base_ms)),
            width: tcpwhy_core::units::Duration::from_millis_f64(base_ms),
            first_ns: 0,
            last_ns: (base_ms * 1e6) as i64 * 20,
            path_rate: None,
            dispersion_rate: None,
            others_rate: None,
            echo_base: None,
            own: Default::default(),
        }
    }

    pub fn records() -> DirRecords {
        DirRecords::default()
    }

    /// `n` intervals of `segs` segments each at the sender.
    pub fn flat(n: usize, segs: u64, width_ns: i64) -> Vec<Interval> {
        (0..n)
            .map(|k| Interval {
                start_ns: k as i64 * width_ns,
                new_bytes: segs * 1448,
                data_pkts: segs as u32,
                max_flight: segs * 1448,
                win_max: 1 << 20,
                win_min: 1 << 20,
                snd_nxt: i64::MIN,
                acked: i64::MIN,
                ..Default::default()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_is_as_full_as_the_flow_made_it_while_it_sent() {
        let mut cs = testkit::summary();
        cs.directions[0].goodput_bps = Some(6e6);
        let mut path = testkit::path(true, 100.0);
        let r = testkit::records();
        // chunks with pauses: idle 4 of 10 intervals
        let states = [vec![Limit::BottleneckLink; 6], vec![Limit::Idle; 4]].concat();
        let used = |path: &Path| {
            let inp = Input { cs: &cs, d: 0, ds: &cs.directions[0], peer: &cs.directions[1], r: &r, path, iv: &[], states: &states, shares: Shares::of(&states) };
            inp.link_used_bps()
        };
        assert_eq!(used(&path), Some(10e6));
        // the other flows on the path count too
        path.others_rate = Some(tcpwhy_core::units::Rate(2_000_000));
        assert_eq!(used(&path), Some(12e6));
    }
}
