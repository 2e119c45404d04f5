//! The path estimates every detector shares, computed once per direction:
//! which side of the path the capture sits on, the full segment size, the
//! RTTs, the interval width and the path (bottleneck) rate.

use tcpwhy_core::units::calc;
use crate::options::Options;
use crate::rank;
use crate::limits::Interval;
use crate::record::{segment_size, ConnRecords, DirRecords};
use tcpwhy_core::units::{Duration, Rate};
use tcpwhy_flow::{CapturePoint, ConnectionSummary};

/// What a flow's group (the flows between the same two hosts at the same
/// time, `crate::groups`) tells its path.
#[derive(Debug, Clone, Default)]
pub struct GroupContext {
    /// The verdict of the policed group the flow belongs to.
    pub policer: Option<std::sync::Arc<crate::policer::PolicerVerdict>>,
    /// The group's base RTT, when the flow's own is above it by a queue's
    /// worth (`crate::groups::group_base`).
    pub base_rtt: Option<Duration>,
    /// The new data the group's other flows delivered while this one moved
    /// data, as a rate: with it, a flow at its fair share of a full link
    /// is not a flow on a link far from full (`crate::groups::others_rate`).
    pub others_rate: Option<Rate>,
}

/// The groups' contexts, by (connection number, direction index) of each
/// member.
pub type GroupVerdicts = std::collections::HashMap<(u64, usize), GroupContext>;

/// A capture point the flow model could not place is the sender's when at
/// least this many data-to-ACK samples have a median above
/// [`UNKNOWN_POINT_SENDER_MIN_MEDIAN_MS`]: near the receiver, the "RTT" of a
/// segment is the receiver's own ACK delay, well under a millisecond unless
/// a delayed ACK waits.
pub const UNKNOWN_POINT_MIN_SAMPLES: usize = 8;
pub const UNKNOWN_POINT_SENDER_MIN_MEDIAN_MS: f64 = 1.0;
/// The base RTT at the sender: this percentile of the data-to-ACK samples
/// once there are [`BASE_RTT_PERCENTILE_MIN_SAMPLES`] of them (one odd
/// sample, e.g. an ACK compressed by the receiver's NIC, must not set the
/// intervals), the smallest sample below that.
pub const BASE_RTT_PERCENTILE: f64 = 0.05;
pub const BASE_RTT_PERCENTILE_MIN_SAMPLES: usize = 50;
/// Interval width: one base RTT (so an interval is one round of the
/// window), within 1 ms and 1 s; 100 ms when no RTT is known.
pub const INTERVAL_MIN_NS: i64 = 1_000_000;
pub const INTERVAL_MAX_NS: i64 = 1_000_000_000;
pub const INTERVAL_NO_RTT_NS: i64 = 100_000_000;
/// At most this many intervals per direction (the width doubles beyond).
pub const MAX_INTERVALS: i64 = 200_000;
/// Path rate from packet trains (the packet-pair/train dispersion method of
/// Jacobson's pathchar and Dovrolis et al., "Packet-dispersion techniques
/// and a capacity-estimation methodology", IEEE/ACM ToN 2004): the
/// spacing of `TRAIN_POINTS` + 1 consecutive ACKs (at the sender) or data
/// segments (at the receiver), each gap at most a `TRAIN_MAX_GAP_RTT_DIV`th
/// of the RTT and the train at least `TRAIN_MIN_SPAN_NS` long; the median
/// over at least `TRAIN_MIN_COUNT` trains.
pub const TRAIN_POINTS: usize = 16;
pub const TRAIN_MAX_GAP_RTT_DIV: i64 = 8;
pub const TRAIN_MIN_GAP_NS: i64 = 200_000;
pub const TRAIN_MIN_SPAN_NS: i64 = 200_000;
pub const TRAIN_MIN_COUNT: usize = 3;
/// The capacity mode: the highest rate with at least this share of the
/// trains within `CAPACITY_MODE_WIDTH` of it (see [`path_rate`]).
pub const CAPACITY_MODE_MIN_SHARE: f64 = 0.10;
pub const CAPACITY_MODE_WIDTH: f64 = 0.05;
/// At the sender, trains with an ACK that advances by more than this many
/// segments are left out: a receiver ACKs at least every second full
/// segment (RFC 1122 4.2.3.2, RFC 5681 4.2), so a larger step is a hole
/// filled after a loss or a stretch ACK (GRO), whose timing is not the
/// bottleneck's.
pub const SENDER_MAX_ACK_STEP_SEGMENTS: i64 = 4;
const TRAIN_MAX_COUNT: usize = 20_000;
/// At the sender, a train's spacing is the bottleneck's only where its
/// packets waited there: the premise of packet-pair and train dispersion
/// (Keshav, SIGCOMM 1991; Dovrolis et al., ToN 2004) is that packets leave
/// the narrow link back to back. A packet that found the link idle leaves
/// it as far behind the one before as it was sent, so a train whose
/// packets never queued carries the sender's own spacing: the ACK clock of
/// a window that never reached the path's capacity (0.5% random loss at 60
/// ms: cubic's window of 16 segments spread over the round trip, "trains"
/// at 4.0 Mbit/s with the RTT 0.2 ms above its floor). A train counts when
/// every RTT sample of its ACKs is above the flow's smallest sample by at
/// least this many transmission times at the train's rate (each packet
/// waited for the one before it: the link stayed busy for the whole
/// train, not only inside bursts an idle link separated); trains without
/// RTT samples count as before.
pub const TRAIN_QUEUED_MIN_SERVICE_TIMES: f64 = 1.0;
/// Packet pairs (Keshav, "A control-theoretic approach to flow control",
/// SIGCOMM 1991; the trains' dispersion, one gap at a time): the median
/// rate of consecutive ACK steps (at the sender; data segments at the
/// receiver) at most a `TRAIN_MAX_GAP_RTT_DIV`th of the RTT apart, over at
/// least this many pairs. A flow sending a few segments per round trip has
/// no trains, but its pairs still cross the slowest link at its rate, and
/// packets the sender spaced only lower the estimate.
pub const PAIR_MIN_COUNT: usize = 30;
/// Packet-pair dispersion (issue 40, part 1): the bottleneck's rate from
/// the spacing of packets that crossed it back to back, when the flow
/// never filled the path and its trains are spread by the ACK clock. A
/// window-limited flow's packets leave the bottleneck in pairs and short
/// runs at its spacing, with the ACK clock's gaps between them; a train of
/// 17 points averages both and reads the flow's own rate (27 Mbit/s on a
/// 200 Mbit/s link), while the strongest mode of the single intervals is
/// the bottleneck's (193 at both ends). Method: Dovrolis, Ramanathan and
/// Moore, "Packet-dispersion techniques and a capacity-estimation
/// methodology" (IEEE/ACM ToN 2004): the capacity is a local mode of the
/// pair rates; modes above it come from compression after the bottleneck
/// (ACK compression, batched delivery), so the *strongest* mode is taken,
/// not the highest.
///
/// Points closer than `DISPERSION_MERGE_*_NS` (or two clock ticks) are one
/// delivery (one interrupt, one NAPI poll, one timestamp) and merge into
/// their last point. The sender's floor is higher: ACKs of two segments
/// reach it 3 to 10 µs apart after compression on the return path (seen on
/// the shared policing captures), so it cannot read a rate above about
/// 1.1 Gbit/s. Intervals shorter than `DISPERSION_MIN_TICKS` clock ticks
/// carry no timing; longer than the trains' gap (`TRAIN_MAX_GAP_RTT_DIV`)
/// they span the ACK clock's pauses.
pub const DISPERSION_MERGE_RECEIVER_NS: i64 = 3_000;
pub const DISPERSION_MERGE_SENDER_NS: i64 = 20_000;
pub const DISPERSION_MERGE_TICKS: i64 = 2;
pub const DISPERSION_MIN_TICKS: i64 = 10;
/// At least this many intervals, and a mode of at least
/// `DISPERSION_MODE_MIN_COUNT` of them and `DISPERSION_MODE_MIN_SHARE` of
/// all, within `CAPACITY_MODE_WIDTH` of it.
pub const DISPERSION_MIN_INTERVALS: usize = 30;
pub const DISPERSION_MODE_MIN_COUNT: usize = 10;
pub const DISPERSION_MODE_MIN_SHARE: f64 = 0.05;
/// No dispersion rate above one full segment per this many ns: at 15 µs
/// per segment and less, a receiver's interrupt coalescing delivers
/// batches of packets at the host's speed (Prasad, Jain and Dovrolis,
/// "Effects of interrupt coalescence on network measurements", PAM 2004:
/// coalescing timers of tens of µs), and the spacing no longer tells a
/// fast link from a batch. Two shared receiver-side captures read their
/// LAN (933 and 1,062 Mbit/s) for flows behind a slower path. The trains
/// still measure such paths when the flow fills them.
pub const DISPERSION_MIN_SEGMENT_SPACING_NS: f64 = 15_000.0;

/// At the receiver, the RTT distribution (median, p90) comes from the
/// receiver's own echo round trips (`limits::receiver_echo_rtts_ms`, the
/// kernel's tcp_rcv_rtt_measure_ts()) once there are this many; the
/// upstream delay of the flow model (the last ACK's TSval echoed) samples
/// a bulk flow almost never, as the receiver ACKs again before the echo
/// returns.
pub const RECEIVER_ECHO_MIN_SAMPLES: usize = 3;
/// Fewest RTT samples (data-to-ACK at the sender, per-interval means at
/// the receiver) for a distribution: with fewer, the median and the 90th
/// percentile are one sample.
pub const RTT_DISTRIBUTION_MIN_SAMPLES: usize = 3;
/// At the receiver without echo samples, the timestamps' RTT gives the
/// distribution only when its median is at least this share of the base:
/// below it, the echo spans only the capture point's side of the path.
pub const TS_RTT_MIN_SHARE_OF_BASE: f64 = 0.5;

/// A loss episode followed a queue when the RTT in the round trips before
/// it (up to `detect::loss::EPISODE_LOOKBACK_INTERVALS`) rose above the path's own RTT
/// by this factor and at least [`QUEUE_BEFORE_LOSS_MIN_MS`]: a queue of a
/// quarter of the path's RTT, beyond the jitter of delayed ACKs (40 ms
/// minimum on Linux, but usually cut short by the next segment) and of
/// scheduling on the hosts.
pub const QUEUE_BEFORE_LOSS_FACTOR: f64 = 1.25;
pub const QUEUE_BEFORE_LOSS_MIN_MS: f64 = 8.0;
/// The one queue test: an RTT (a sample, a median, a percentile) above the
/// path's own RTT by [`QUEUE_BEFORE_LOSS_FACTOR`] and at least
/// [`QUEUE_BEFORE_LOSS_MIN_MS`] carries a queue.
pub fn queued_at(rtt_ms: f64, base_ms: f64) -> bool {
    rtt_ms > (base_ms * QUEUE_BEFORE_LOSS_FACTOR).max(base_ms + QUEUE_BEFORE_LOSS_MIN_MS)
}

/// The one RTT of a connection whose two directions take turns (a request
/// and its response, crate::latency): the handshake's, else the smallest
/// data-to-ACK sample of either direction. A direction's own facts are
/// [`Path::estimate`]'s.
pub fn connection_rtt_ms(cs: &ConnectionSummary, r: &ConnRecords) -> Option<f64> {
    let min_sample = r
        .dirs
        .iter()
        .flat_map(|d| d.acks.iter())
        .filter(|a| a.rtt_us > 0)
        .map(|a| calc::ms_from_us(a.rtt_us as f64))
        .fold(f64::INFINITY, f64::min);
    cs.handshake_rtt_ms.or(min_sample.is_finite().then_some(min_sample))
}

pub(crate) fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    Some(sorted[i.min(sorted.len() - 1)])
}

/// The direction's RTTs, each a [`Duration`]; the report's
/// [`crate::model::Rtt`] is their form in milliseconds ([`Rtts::report`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rtts {
    /// Base (minimum) path RTT used for the intervals.
    pub base: Option<Duration>,
    pub median: Option<Duration>,
    pub p90: Option<Duration>,
    pub handshake: Option<Duration>,
    /// "data_ack" (sender-side samples), "handshake", "split" (both halves
    /// around the capture point), "timestamps", "same_hosts" or "none".
    pub source: &'static str,
}

fn ms(d: Option<Duration>) -> Option<f64> {
    d.map(Duration::as_millis_f64)
}

fn from_ms(ms: Option<f64>) -> Option<Duration> {
    ms.map(Duration::from_millis_f64)
}

impl Rtts {
    pub fn base_ms(&self) -> Option<f64> {
        ms(self.base)
    }
    pub fn median_ms(&self) -> Option<f64> {
        ms(self.median)
    }
    pub fn p90_ms(&self) -> Option<f64> {
        ms(self.p90)
    }
    pub fn handshake_ms(&self) -> Option<f64> {
        ms(self.handshake)
    }
    /// The form the report carries.
    pub fn report(&self) -> crate::model::Rtt {
        crate::model::Rtt {
            base_ms: self.base_ms(),
            median_ms: self.median_ms(),
            p90_ms: self.p90_ms(),
            handshake_ms: self.handshake_ms(),
            source: self.source,
        }
    }
}

/// What every detector knows of the path.
pub(crate) struct Path {
    /// The capture sits near the sender (or in the middle): data-to-ACK
    /// samples are path RTTs and the flight is the sender's.
    pub sender_side: bool,
    pub smss: u32,
    pub rtt: Rtts,
    /// The path's RTT without a standing queue: the smallest data-to-ACK
    /// sample at the sender (the base percentile may already carry one), the
    /// base RTT elsewhere.
    pub min_rtt: Option<Duration>,
    /// The intervals' width: one round of the window.
    pub width: Duration,
    pub first_ns: i64,
    pub last_ns: i64,
    /// The user's path rate (`--bandwidth`), or the one from trains.
    pub path_rate: Option<Rate>,
    /// The bottleneck's rate from packet-pair dispersion
    /// ([`DISPERSION_MERGE_RECEIVER_NS`]): used for the predictions when
    /// nothing filled the path (crate::analyze).
    pub dispersion_rate: Option<Rate>,
    /// What other flows between the same hosts delivered at the same time
    /// (crate::groups): the link carries them too.
    pub others_rate: Option<Rate>,
    /// At the receiver: the data's round trip through the sender without
    /// a queue (the low percentile of the receiver's echo round trips).
    pub echo_base: Option<Duration>,
    /// What the flow measured itself, before its group's context.
    pub own: Own,
}

/// A flow's own RTT facts ([`Path::measure`]), which [`Path::in_group`]
/// weighs against the group's.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Own {
    /// The base RTT of its own samples, and where it came from.
    base: Option<Duration>,
    source: &'static str,
    /// At the sender, the smallest data-to-ACK sample.
    min_sample: Option<Duration>,
}

impl Path {
    /// `group`: what the flows this one shares its path with say
    /// (crate::groups): their base RTT, when the flow's own holds a queue,
    /// replaces the flow's own (source `same_hosts`); with other flows on
    /// the path, a round of the window is the flow's own median RTT when a
    /// queue inflates it (see [`Path::in_group`]).
    pub fn estimate(
        cs: &ConnectionSummary,
        d: usize,
        r: &DirRecords,
        opts: &Options,
        group: Option<&GroupContext>,
    ) -> Option<Path> {
        Some(Self::measure(cs, d, r, opts)?.in_group(r, opts, group))
    }

    /// The flow's own facts, before what its group says: what
    /// crate::groups reads once per flow and then puts in the group's
    /// context with [`Path::in_group`].
    pub fn measure(cs: &ConnectionSummary, d: usize, r: &DirRecords, opts: &Options) -> Option<Path> {
        let ds = &cs.directions[d];
        let peer = &cs.directions[1 - d];
        let smss = segment_size(&r.data, peer.mss);
        let mut samples: Vec<f64> = r
            .acks
            .iter()
            .filter(|a| a.rtt_us > 0)
            .map(|a| calc::ms_from_us(a.rtt_us as f64))
            .collect();
        let hs = cs.handshake_rtt_ms;
        let sender_side = match ds.capture_point {
            CapturePoint::NearSender | CapturePoint::Middle => true,
            CapturePoint::NearReceiver => false,
            CapturePoint::Unknown => {
                samples.len() >= UNKNOWN_POINT_MIN_SAMPLES
                    && rank::quantile_f64(&mut samples, 0.5).unwrap_or(0.0) > UNKNOWN_POINT_SENDER_MIN_MEDIAN_MS
            }
        };
        let echo = if sender_side {
            Vec::new()
        } else {
            crate::limits::receiver_echo_rtts_ms(&r.data, &r.acks, smss)
        };
        let (own_base_ms, median_ms, p90_ms, own_source) = if sender_side && samples.len() >= RTT_DISTRIBUTION_MIN_SAMPLES {
            (
                low_rank(&mut samples),
                rank::quantile_f64(&mut samples, 0.5),
                rank::quantile_f64(&mut samples, 0.9),
                "data_ack",
            )
        } else {
            receiver_rtts(cs, d, &echo)
        };
        // The data's round trip without a queue, at the receiver: the low
        // percentile of the echo samples, as the base at the sender.
        let echo_base_ms = low_percentile(&echo);
        let min_sample = if sender_side { from_ms(rank::min_f64(&samples)) } else { None };
        let own_base = from_ms(own_base_ms);
        let first_ns = r.data.first()?.t_ns;
        let last_ns = r.data.iter().map(|x| x.t_ns).max().unwrap_or(first_ns);
        let mut path = Path {
            sender_side,
            smss,
            rtt: Rtts { base: own_base, median: from_ms(median_ms), p90: from_ms(p90_ms), handshake: from_ms(hs), source: own_source },
            min_rtt: None,
            width: Duration::ZERO,
            first_ns,
            last_ns,
            path_rate: None,
            dispersion_rate: None,
            others_rate: None,
            echo_base: echo_base_ms.map(Duration::from_millis_f64),
            own: Own { base: own_base, source: own_source, min_sample },
        };
        path.settle(opts, None);
        path.width = path.width_for(opts, own_base);
        path.rates(r, opts);
        Some(path)
    }

    /// The facts with what the flow's group says ([`Path::estimate`]); the
    /// flow's own when it has no group. The rates are measured again only
    /// when a round of the window changed.
    pub fn in_group(mut self, r: &DirRecords, opts: &Options, group: Option<&GroupContext>) -> Path {
        let Some(g) = group else { return self };
        let group_base = g.base_rtt;
        self.others_rate = g.others_rate;
        let others = g.others_rate.is_some();
        // One round of the window: the base RTT, or for a flow that never
        // saw the path without the others' queue its own round trip (the
        // median RTT: the group's base would cut its rounds into silent
        // pieces while the other flows' packets pass the queue).
        let own = self.own.base;
        let round = {
            let base = match (own, group_base) {
                (Some(b), Some(g)) => Some(b.min(g)),
                (b, g) => b.or(g),
            };
            match (self.rtt.median, base) {
                (Some(m), Some(b)) if others && queued_at(m.as_millis_f64(), b.as_millis_f64()) => Some(m),
                _ => own,
            }
        };
        self.settle(opts, group_base);
        let width = self.width_for(opts, round);
        if width != self.width {
            self.width = width;
            self.rates(r, opts);
        }
        self
    }

    /// The base RTT and its source, and the smallest RTT, from the flow's
    /// own, the group's base (`group_base`) and `--rtt`.
    fn settle(&mut self, opts: &Options, group_base: Option<Duration>) {
        let (base, source) = match group_base {
            Some(g) if self.own.base.is_none_or(|b| g < b) => (Some(g), "same_hosts"),
            _ => (self.own.base, self.own.source),
        };
        let base = from_ms(opts.rtt_ms).or(base);
        let min_rtt = if self.sender_side { self.own.min_sample.or(base) } else { base };
        self.min_rtt = match (min_rtt, group_base) {
            (Some(m), Some(g)) => Some(m.min(g)),
            (m, g) => m.or(g),
        };
        (self.rtt.base, self.rtt.source) = (base, source);
    }

    /// The intervals' width: one round of the window (`round`; the base
    /// RTT under `--rtt`), at most [`MAX_INTERVALS`] of them.
    fn width_for(&self, opts: &Options, round: Option<Duration>) -> Duration {
        let round = if opts.rtt_ms.is_some() { self.rtt.base } else { round };
        let mut width_ns = round
            .map_or(INTERVAL_NO_RTT_NS, Duration::as_nanos_i64)
            .clamp(INTERVAL_MIN_NS, INTERVAL_MAX_NS);
        while (self.last_ns - self.first_ns) / width_ns > MAX_INTERVALS {
            width_ns *= 2;
        }
        Duration::from_nanos(width_ns as u64)
    }

    /// The path rate from trains and from packet-pair dispersion, at the
    /// intervals' width.
    fn rates(&mut self, r: &DirRecords, opts: &Options) {
        // At the sender, an ACK step of more than a delayed ACK's worth of
        // segments (a hole filled, a stretch ACK) carries no spacing.
        let max_step = self.sender_side.then_some(SENDER_MAX_ACK_STEP_SEGMENTS * self.smss as i64);
        let points = progress_points(r, self.sender_side);
        // At the sender, each point's RTT sample, for the queue the train's
        // packets met (`TRAIN_QUEUED_MIN_SERVICE_TIMES`).
        let waited = match (self.sender_side, self.min_rtt) {
            (true, Some(floor)) => Some(Waited { rtt_us: advancing_acks(r).map(|a| a.rtt_us).collect(), floor_us: calc::us_from_ns(floor.as_nanos_i64() as f64), smss: self.smss }),
            _ => None,
        };
        let trains = train_rates(&points, self.width_ns(), max_step, waited.as_ref());
        self.path_rate = opts.bandwidth_bps.or(capacity_of(trains)).map(Rate::from_bps_f64);
        self.dispersion_rate = dispersion_rate(&points, clock_tick(r), self.sender_side, self.smss, self.width_ns()).map(Rate::from_bps_f64);
    }

    /// The flow's goodput with what the other flows on the path delivered
    /// at the same time: how full the link is.
    pub fn link_used_bps(&self, goodput_bps: Option<f64>) -> Option<f64> {
        goodput_bps.map(|g| g + self.others_rate.map_or(0.0, Rate::bps))
    }

    /// [`Path::path_rate`] in bit/s, for arithmetic.
    pub fn path_bps(&self) -> Option<f64> {
        self.path_rate.map(Rate::bps)
    }

    /// The intervals' width in ns, for arithmetic on timestamps.
    pub fn width_ns(&self) -> i64 {
        self.width.as_nanos_i64()
    }

    /// [`Path::min_rtt`] in ms.
    pub fn min_rtt_ms(&self) -> Option<f64> {
        ms(self.min_rtt)
    }

    /// [`Path::echo_base`] in ms.
    pub fn echo_base_ms(&self) -> Option<f64> {
        ms(self.echo_base)
    }

    pub fn base_ns(&self) -> Option<i64> {
        self.rtt.base.map(Duration::as_nanos_i64)
    }

    /// The lowest RTT the connection showed: the floor of the path's
    /// samples ([`Path::min_rtt`]) or the handshake's, whichever is lower
    /// (HyStart's reference, `delay_min` in `tcp_cubic.c`, is the lowest
    /// sample the sender took).
    pub fn lowest_rtt_ms(&self) -> Option<f64> {
        match (self.min_rtt_ms(), self.rtt.handshake_ms()) {
            (Some(m), Some(h)) => Some(m.min(h)),
            (m, h) => m.or(h),
        }
    }

    /// At the receiver, the RTT distribution comes from the intervals' echo
    /// samples (the sender's side of the path, queueing included).
    pub fn refine_rtt(&mut self, iv: &[Interval]) {
        if self.sender_side {
            return;
        }
        let mut m: Vec<f64> = iv
            .iter()
            .filter_map(|x| x.rtt_mean_us())
            .map(calc::ms_from_us)
            .collect();
        m.sort_by(f64::total_cmp);
        if m.len() >= RTT_DISTRIBUTION_MIN_SAMPLES {
            self.rtt.median = from_ms(percentile(&m, 0.5));
            self.rtt.p90 = from_ms(percentile(&m, 0.9));
        }
    }
}

/// The base of sorted RTT samples: [`BASE_RTT_PERCENTILE`] once there are
/// [`BASE_RTT_PERCENTILE_MIN_SAMPLES`], the smallest below that.
fn low_percentile(sorted: &[f64]) -> Option<f64> {
    if sorted.len() >= BASE_RTT_PERCENTILE_MIN_SAMPLES {
        percentile(sorted, BASE_RTT_PERCENTILE)
    } else {
        sorted.first().copied()
    }
}

/// [`low_percentile`] of an unsorted sample, by selection (`crate::rank`).
fn low_rank(samples: &mut [f64]) -> Option<f64> {
    if samples.len() >= BASE_RTT_PERCENTILE_MIN_SAMPLES {
        rank::quantile_f64(samples, BASE_RTT_PERCENTILE)
    } else {
        rank::min_f64(samples)
    }
}

/// Near the receiver (or with too few samples at the sender): (base,
/// median, p90, source). The path RTT comes from the two legs around the
/// capture point or the handshake; the receiver's TSval echoed in the
/// sender's data (`echo`, sorted, ms) spans the sender's side, queueing
/// included.
fn receiver_rtts(cs: &ConnectionSummary, d: usize, echo: &[f64]) -> (Option<f64>, Option<f64>, Option<f64>, &'static str) {
    let (ds, peer) = (&cs.directions[d], &cs.directions[1 - d]);
    let hs = cs.handshake_rtt_ms;
    let split = ds.rtt_to_receiver_ms.zip(ds.rtt_to_sender_ms).map(|(x, y)| x + y);
    let ts = ds.echo_delay.as_ref().or(peer.ts_rtt.as_ref());
    let base = split.or(hs).or(ts.map(|t| t.min_ms));
    let src = if split.is_some() {
        "split"
    } else if hs.is_some() {
        "handshake"
    } else if ts.is_some() {
        "timestamps"
    } else {
        "none"
    };
    let (med, p90) = match (ts, base) {
        _ if echo.len() >= RECEIVER_ECHO_MIN_SAMPLES => {
            let b = base.unwrap_or(0.0);
            (percentile(echo, 0.5).map(|m| m.max(b)), percentile(echo, 0.9).map(|m| m.max(b)))
        }
        (Some(t), Some(b)) if t.median_ms >= TS_RTT_MIN_SHARE_OF_BASE * b => (Some(t.median_ms.max(b)), Some(t.p99_ms.max(b))),
        _ => (None, None),
    };
    (base, med, p90, src)
}


/// The ACKs that advance the cumulative ACK: the sender's progress points
/// ([`progress_points`]) and their RTT samples, one pass each.
fn advancing_acks(r: &DirRecords) -> impl Iterator<Item = &crate::record::AckRec> {
    let mut hi = i64::MIN;
    r.acks.iter().filter(move |a| {
        let up = a.ack > hi;
        hi = hi.max(a.ack);
        up
    })
}

/// The RTT samples of the sender's progress points and the flow's floor,
/// for the queue a train's packets met at the bottleneck.
struct Waited {
    rtt_us: Vec<u32>,
    floor_us: f64,
    smss: u32,
}

impl Waited {
    /// Every point `from..=to` of a train at `rate_bps` waited at the
    /// bottleneck, or none carries an RTT sample to tell.
    fn queued(&self, from: usize, to: usize, rate_bps: f64) -> bool {
        let least = self.rtt_us.get(from..=to).unwrap_or(&[]).iter().copied().filter(|&x| x > 0).min();
        let Some(least) = least.filter(|_| rate_bps > 0.0).map(f64::from) else {
            return true;
        };
        let service_us = calc::us_from_s(calc::s_to_send(self.smss as f64, rate_bps));
        least - self.floor_us >= TRAIN_QUEUED_MIN_SERVICE_TIMES * service_us
    }
}

/// The data's progress over time: at the sender the cumulative ACK, at the
/// receiver the highest byte received (each point a new high).
fn progress_points(r: &DirRecords, sender_side: bool) -> Vec<(i64, i64)> {
    let mut hi = i64::MIN;
    if sender_side {
        advancing_acks(r).map(|a| (a.t_ns, a.ack)).collect()
    } else {
        r.data
            .iter()
            .filter_map(|x| {
                (x.end() > hi).then(|| {
                    hi = x.end();
                    (x.t_ns, hi)
                })
            })
            .collect()
    }
}

/// Bottleneck rate from the spacing inside trains of (time, bytes) points:
/// the capacity mode of the train rates, else their median.
///
/// Behind the bottleneck, packets of a train cannot be closer than its
/// transmission time, while cross traffic, pauses of the sender and the
/// ACK clock of a window-limited flow only spread them: the capacity is
/// the highest rate many trains share, not their median (Dovrolis et al.,
/// "Packet-dispersion techniques and a capacity-estimation methodology",
/// IEEE/ACM ToN 2004: the capacity mode). The median of a flow held by
/// its window at a third of a 200 Mbit/s link was 98 Mbit/s; the mode is
/// 193 (the payload rate of the link). `max_step` leaves out trains with a
/// larger step: at the sender, an ACK that advances by more than a few
/// segments fills a loss's hole or stretches over many segments, and
/// carries no spacing of the bottleneck.
pub(crate) fn path_rate(points: &[(i64, i64)], base_rtt_ns: i64) -> Option<f64> {
    capacity(points, base_rtt_ns, None)
}

pub(crate) fn capacity(
    points: &[(i64, i64)],
    base_rtt_ns: i64,
    max_step: Option<i64>,
) -> Option<f64> {
    capacity_of(train_rates(points, base_rtt_ns, max_step, None))
}

/// The capacity mode of a set of train rates, else their median.
fn capacity_of(mut rates: Vec<f64>) -> Option<f64> {
    if rates.len() < TRAIN_MIN_COUNT {
        return None;
    }
    rates.sort_by(f64::total_cmp);
    upper_mode(&rates).or_else(|| percentile(&rates, 0.5))
}

/// The largest ACK step that carries the bottleneck's spacing
/// ([`SENDER_MAX_ACK_STEP_SEGMENTS`] segments at the sender; any at the receiver).
fn sender_max_step(sender_side: bool, smss: u32) -> i64 {
    if sender_side {
        SENDER_MAX_ACK_STEP_SEGMENTS * smss as i64
    } else {
        i64::MAX
    }
}

/// The median packet-pair rate of a direction (see [`PAIR_MIN_COUNT`]).
pub(crate) fn pair_rate(r: &DirRecords, sender_side: bool, smss: u32, base_rtt_ns: i64) -> Option<f64> {
    let max_step = sender_max_step(sender_side, smss);
    pair_rate_of(&progress_points(r, sender_side), base_rtt_ns, max_step)
}

fn pair_rate_of(points: &[(i64, i64)], base_rtt_ns: i64, max_step: i64) -> Option<f64> {
    let max_gap = max_gap(base_rtt_ns);
    let mut rates: Vec<f64> = points
        .windows(2)
        .filter_map(|w| {
            let (dt, db) = (w[1].0 - w[0].0, w[1].1 - w[0].1);
            // two points in the same clock tick: faster than any rate
            (dt >= 0 && dt <= max_gap && db > 0 && db <= max_step)
                .then(|| if dt == 0 { f64::INFINITY } else { calc::bps(db as f64, calc::s_from_ns(dt as f64)) })
        })
        .collect();
    if rates.len() < PAIR_MIN_COUNT {
        return None;
    }
    rates.sort_by(f64::total_cmp);
    percentile(&rates, 0.5)
}

/// The capture's clock tick in this direction's records: the smallest
/// positive gap between consecutive data segments or ACKs (1 µs for
/// classic pcap, 10 ms for some Windows captures).
pub(crate) fn clock_tick(r: &DirRecords) -> i64 {
    let gaps = |t: &mut dyn Iterator<Item = i64>| {
        let mut prev = None;
        let mut best = i64::MAX;
        for x in t {
            if let Some(p) = prev {
                let d: i64 = x - p;
                if d != 0 {
                    best = best.min(d.abs());
                }
            }
            prev = Some(x);
        }
        best
    };
    let t = gaps(&mut r.data.iter().map(|x| x.t_ns)).min(gaps(&mut r.acks.iter().map(|a| a.t_ns)));
    if t == i64::MAX {
        1_000
    } else {
        t
    }
}

/// The bottleneck's rate from packet-pair dispersion (see
/// [`DISPERSION_MERGE_RECEIVER_NS`]): the strongest mode of the rates of
/// consecutive deliveries.
pub(crate) fn dispersion_rate(points: &[(i64, i64)], tick: i64, sender_side: bool, smss: u32, base_rtt_ns: i64) -> Option<f64> {
    let floor = if sender_side { DISPERSION_MERGE_SENDER_NS } else { DISPERSION_MERGE_RECEIVER_NS };
    let merge = floor.max(DISPERSION_MERGE_TICKS * tick);
    let min_dt = (DISPERSION_MIN_TICKS * tick).max(1);
    let max_gap = max_gap(base_rtt_ns);
    let max_step = sender_max_step(sender_side, smss);
    // one delivery each: (time, bytes, an ACK step in it filled a hole or stretched)
    let mut deliveries: Vec<(i64, i64, bool)> = Vec::new();
    let mut prev: Option<(i64, i64)> = None;
    for &(t, b) in points {
        let stretched = prev.is_some_and(|p| b - p.1 > max_step);
        match (prev, deliveries.last_mut()) {
            (Some(p), Some(last)) if t - p.0 <= merge => *last = (t, b, last.2 || stretched),
            _ => deliveries.push((t, b, stretched)),
        }
        prev = Some((t, b));
    }
    let mut rates: Vec<f64> = deliveries
        .windows(2)
        .filter_map(|w| {
            let (dt, db) = (w[1].0 - w[0].0, w[1].1 - w[0].1);
            (!w[1].2 && dt >= min_dt && dt <= max_gap && db > 0).then(|| calc::bps_over_ns(db as f64, dt as f64))
        })
        .collect();
    if rates.len() < DISPERSION_MIN_INTERVALS {
        return None;
    }
    rates.sort_by(f64::total_cmp);
    let (rate, count) = strongest_mode(&rates)?;
    let enough = count >= DISPERSION_MODE_MIN_COUNT && count as f64 >= DISPERSION_MODE_MIN_SHARE * rates.len() as f64;
    let coalesced = rate > calc::bps_over_ns(f64::from(smss), DISPERSION_MIN_SEGMENT_SPACING_NS);
    (enough && !coalesced).then_some(rate)
}

/// The rate with the most others within [`CAPACITY_MODE_WIDTH`] of it (the
/// lowest such on a tie), as the median of those, with their count.
fn strongest_mode(sorted: &[f64]) -> Option<(f64, usize)> {
    let mut best: Option<(f64, usize)> = None;
    for (lo, hi) in mode_windows(sorted) {
        if best.is_none_or(|b| hi - lo > b.1) {
            best = Some((sorted[(lo + hi) / 2], hi - lo));
        }
    }
    best
}

/// For each rate of `sorted` in turn, the index range of the rates within
/// [`CAPACITY_MODE_WIDTH`] of it (both ends move only forward).
fn mode_windows(sorted: &[f64]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let (mut lo, mut hi) = (0usize, 0usize);
    sorted.iter().map(move |&c| {
        while sorted[lo] < c * (1.0 - CAPACITY_MODE_WIDTH) {
            lo += 1;
        }
        while hi < sorted.len() && sorted[hi] <= c * (1.0 + CAPACITY_MODE_WIDTH) {
            hi += 1;
        }
        (lo, hi)
    })
}

/// The longest gap inside a train, a pair or a dispersion interval: an
/// `TRAIN_MAX_GAP_RTT_DIV`th of the RTT, at least `TRAIN_MIN_GAP_NS`.
fn max_gap(base_rtt_ns: i64) -> i64 {
    (base_rtt_ns / TRAIN_MAX_GAP_RTT_DIV).max(TRAIN_MIN_GAP_NS)
}

/// The rate of each train of `TRAIN_POINTS` + 1 points.
/// With `waited` (at the sender), only the trains whose packets queued at
/// the bottleneck ([`TRAIN_QUEUED_MIN_SERVICE_TIMES`]).
fn train_rates(points: &[(i64, i64)], base_rtt_ns: i64, max_step: Option<i64>, waited: Option<&Waited>) -> Vec<f64> {
    let max_gap = max_gap(base_rtt_ns);
    let mut rates = Vec::new();
    let mut i = 0;
    while i + TRAIN_POINTS < points.len() && rates.len() <= TRAIN_MAX_COUNT {
        let w = &points[i..=i + TRAIN_POINTS];
        let ok = w.windows(2).all(|p| {
            p[1].0 - p[0].0 <= max_gap
                && p[1].1 >= p[0].1
                && max_step.is_none_or(|m| p[1].1 - p[0].1 <= m)
        });
        let dt = w[TRAIN_POINTS].0 - w[0].0;
        let db = w[TRAIN_POINTS].1 - w[0].1;
        if ok && dt >= TRAIN_MIN_SPAN_NS && db > 0 {
            let rate = calc::bps(db as f64, calc::s_from_ns(dt as f64));
            if waited.is_none_or(|w| w.queued(i + 1, i + TRAIN_POINTS, rate)) {
                rates.push(rate);
            }
            i += TRAIN_POINTS;
        } else {
            i += 1;
        }
    }
    rates
}

/// The highest rate with at least [`CAPACITY_MODE_MIN_SHARE`] of the
/// trains within [`CAPACITY_MODE_WIDTH`] of it (the median of those).
fn upper_mode(sorted: &[f64]) -> Option<f64> {
    let need =
        ((sorted.len() as f64 * CAPACITY_MODE_MIN_SHARE).ceil() as usize).max(TRAIN_MIN_COUNT);
    mode_windows(sorted).filter(|(lo, hi)| hi - lo >= need).last().map(|(lo, hi)| sorted[(lo + hi) / 2])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::DataRec;
    use tcpwhy_flow::Flags;

    fn seg(t_ns: i64, seq: i64, len: u32) -> DataRec {
        DataRec {
            t_ns,
            seq,
            len,
            frame: 0,
            in_flight: 0,
            flags: Flags::default(),
            tsecr: 0,
        }
    }

    #[test]
    fn segment_size_is_the_common_full_length_and_super_segments_fall_back_to_the_mss() {
        let mut d: Vec<DataRec> = (0..90).map(|i| seg(i, i * 1448, 1448)).collect();
        d.extend((0..10).map(|i| seg(100 + i, 0, 200)));
        assert_eq!(segment_size(&d, Some(1460)), 1448);
        let tso: Vec<DataRec> = (0..50).map(|i| seg(i, i * 65160, 65160)).collect();
        assert_eq!(segment_size(&tso, Some(1460)), 1448);
        assert_eq!(segment_size(&[], None), 1448);
        // Without the MSS option: super-segments of 14, 3 and 1 segments
        // (a sender's capture with TSO) share the segment as a divisor...
        let mut gso: Vec<DataRec> = (0..40).map(|i| seg(i, 0, 14 * 1448)).collect();
        gso.extend((0..30).map(|i| seg(i, 0, 3 * 1448)));
        gso.extend((0..30).map(|i| seg(i, 0, 1448)));
        assert_eq!(segment_size(&gso, None), 1448);
        // ...and lengths that share no plausible segment keep the largest.
        assert_eq!(segment_size(&d, None), 1448);
        let mut odd: Vec<DataRec> = (0..50).map(|i| seg(i, 0, 1448)).collect();
        odd.extend((0..50).map(|i| seg(i, 0, 1000)));
        assert_eq!(segment_size(&odd, None), 1448);
    }

    #[test]
    fn path_rate_is_the_median_train_rate_and_ignores_gaps() {
        // 100 Mbit/s: 1448 bytes every 115.84 us, in trains of 20 with
        // an RTT-long pause between them
        let mut pts = Vec::new();
        let (mut t, mut b) = (0i64, 0i64);
        for _ in 0..10 {
            for _ in 0..20 {
                t += 115_840;
                b += 1448;
                pts.push((t, b));
            }
            t += 20_000_000;
        }
        let r = path_rate(&pts, 20_000_000).unwrap();
        assert!((r - 100e6).abs() < 1e6, "{r}");
        // too few trains: no estimate
        assert_eq!(path_rate(&pts[..20], 20_000_000), None);
    }

    #[test]
    fn pairs_give_the_path_rate_of_a_flow_without_trains() {
        // 4 segments a round trip of 100 ms, ACKed one by one 11.6 us apart
        // (1 Gbit/s): no train of 17, but 3 pairs a round
        let mut pts = Vec::new();
        let (mut t, mut b) = (0i64, 0i64);
        for _ in 0..20 {
            for _ in 0..4 {
                t += 11_584;
                b += 1448;
                pts.push((t, b));
            }
            t += 100_000_000;
        }
        assert_eq!(path_rate(&pts, 100_000_000), None);
        let r = pair_rate_of(&pts, 100_000_000, 4 * 1448).unwrap();
        assert!((r - 1e9).abs() < 1e7, "{r}");
        // too few pairs (10 rounds, 30 pairs less one): no estimate
        assert_eq!(pair_rate_of(&pts[..39], 100_000_000, 4 * 1448), None);
        // an ACK that covers a filled hole (8 segments) is no pair
        let holes: Vec<(i64, i64)> = pts.iter().map(|&(t, b)| (t, b * 8)).collect();
        assert_eq!(pair_rate_of(&holes, 100_000_000, 4 * 1448), None);
        // segments the sender spaced 20 ms apart (a fifth of the RTT) are
        // no pairs either
        let spaced: Vec<(i64, i64)> = (1..100).map(|i| (i * 20_000_000, i * 1448)).collect();
        assert_eq!(pair_rate_of(&spaced, 100_000_000, 4 * 1448), None);
    }

    /// A 64 KiB window on a 200 Mbit/s, 40 ms path, as the lab's
    /// wscale-off shows it: pairs at the bottleneck's 60 µs per segment,
    /// a millisecond of ACK clock between them, a round trip's pause.
    fn spread_window(pair_gap_ns: i64) -> Vec<(i64, i64)> {
        let mut pts = Vec::new();
        let (mut t, mut b) = (0i64, 0i64);
        for _round in 0..40 {
            for k in 0..22 {
                t += if k == 0 { 37_000_000 } else { 1_000_000 };
                b += 1448;
                pts.push((t, b));
                t += pair_gap_ns;
                b += 1448;
                pts.push((t, b));
            }
        }
        pts
    }

    #[test]
    fn dispersion_reads_the_bottleneck_where_trains_read_the_window() {
        let pts = spread_window(60_000);
        let trains = path_rate(&pts, 40_000_000).unwrap();
        assert!(trains < 40e6, "trains average the ACK clock's gaps: {trains}");
        let d = dispersion_rate(&pts, 1_000, false, 1448, 40_000_000).unwrap();
        assert!((d - 1448.0 * 8e9 / 60_000.0).abs() < 1e6, "{d}");
        // the same from the sender's ACKs (one per segment)
        let s = dispersion_rate(&pts, 1_000, true, 1448, 40_000_000).unwrap();
        assert!((s - d).abs() < 1e6, "{s} {d}");
    }

    #[test]
    fn dispersion_merges_one_delivery_and_refuses_coalesced_batches() {
        // pairs 12 µs apart (a 1 Gbit/s link, or one interrupt's batch):
        // above one segment per 15 µs the spacing cannot tell them apart
        assert_eq!(dispersion_rate(&spread_window(12_000), 1_000, false, 1448, 40_000_000), None);
        // ACKs 5 µs apart at the sender are one compressed delivery: no
        // pair rate at all from them, the millisecond gaps remain
        let s = dispersion_rate(&spread_window(5_000), 1_000, true, 1448, 40_000_000);
        assert!(s.is_none_or(|r| r < 30e6), "{s:?}");
        // with a 10 ms clock nothing is short enough to time
        assert_eq!(dispersion_rate(&spread_window(60_000), 10_000_000, false, 1448, 40_000_000), None);
        // too few intervals
        assert_eq!(dispersion_rate(&spread_window(60_000)[..20], 1_000, false, 1448, 40_000_000), None);
    }

    #[test]
    fn the_strongest_mode_is_the_most_shared_rate_not_the_highest() {
        let mut v: Vec<f64> = std::iter::repeat_n(193e6, 50).chain(std::iter::repeat_n(900e6, 20)).chain([12e6, 13e6]).collect();
        v.sort_by(f64::total_cmp);
        assert_eq!(strongest_mode(&v), Some((193e6, 50)));
    }

    #[test]
    fn a_window_limited_flow_shows_the_capacity_mode_not_the_median() {
        // trains in bursts at 200 Mbit/s (each a window's first segments,
        // queued at the bottleneck), the rest ACK-clocked at 60 Mbit/s
        let mut pts = Vec::new();
        let (mut t, mut b) = (0i64, 0i64);
        for round in 0..30 {
            let gap = if round % 3 == 0 { 57_920 } else { 193_066 };
            for _ in 0..17 {
                t += gap;
                b += 1448;
                pts.push((t, b));
            }
            t += 20_000_000;
        }
        let r = path_rate(&pts, 20_000_000).unwrap();
        assert!((r - 200e6).abs() < 2e6, "{r}");
        // at the sender, trains with a step over 4 segments are left out
        let mut jumpy = pts.clone();
        for p in jumpy.iter_mut().skip(5) {
            p.1 += 100_000;
        }
        assert_eq!(
            train_rates(&jumpy[..17], 20_000_000, Some(4 * 1448), None).len(),
            0
        );
    }

    /// cubic's window of 16 segments under random loss on a 60 ms path:
    /// one ACK every 3.75 ms, the RTT at its floor. Trains of that ACK
    /// clock read the sender's rate (3.1 Mbit/s); its packets never waited
    /// at a bottleneck, so they measure none. The same spacing behind a
    /// queue of a few packets is the bottleneck's.
    #[test]
    fn trains_whose_packets_never_queued_carry_the_senders_spacing() {
        let pts: Vec<(i64, i64)> = (1..200).map(|i| (i * 3_750_000, i * 1448)).collect();
        let at = |rtt_us: u32| Waited { rtt_us: vec![rtt_us; pts.len()], floor_us: 60_000.0, smss: 1448 };
        let flat = train_rates(&pts, 60_000_000, Some(4 * 1448), Some(&at(60_200)));
        assert!(flat.is_empty(), "{flat:?}");
        assert!(!train_rates(&pts, 60_000_000, Some(4 * 1448), None).is_empty());
        // two packets' worth of queue (3.75 ms each): the link was busy
        let queued = train_rates(&pts, 60_000_000, Some(4 * 1448), Some(&at(67_600)));
        assert!(!queued.is_empty() && (queued[0] - 1448.0 * 8e9 / 3_750_000.0).abs() < 1e5, "{queued:?}");
        // bursts of 4 packets with the link idle between: the first of
        // each found no queue, so the train's spacing is the sender's
        let bursty = Waited { rtt_us: (0..pts.len()).map(|i| if i % 4 == 0 { 60_000 } else { 67_600 }).collect(), floor_us: 60_000.0, smss: 1448 };
        assert!(train_rates(&pts, 60_000_000, Some(4 * 1448), Some(&bursty)).is_empty());
        // no RTT samples: no evidence against the train
        assert!(!train_rates(&pts, 60_000_000, Some(4 * 1448), Some(&at(0))).is_empty());
    }

    #[test]
    fn percentile_rounds_to_the_nearest_rank() {
        let v: Vec<f64> = (0..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.05), Some(5.0));
        assert_eq!(percentile(&v, 0.9), Some(90.0));
        assert_eq!(percentile(&[], 0.5), None);
    }
}
