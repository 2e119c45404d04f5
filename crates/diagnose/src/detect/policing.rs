//! The policer: losses that fit a token bucket (`crate::policer`, after
//! Flach et al., "An Internet-Wide Analysis of Traffic Policing", SIGCOMM
//! 2016), adapted to the capture point, and when its verdict is the cause.

use tcpwhy_core::units::calc;
use super::loss::Loss;
use super::{finding, num, Input};
use crate::model::{Evidence, Finding};
use crate::policer::{self, PolicerVerdict};
use crate::record::{AckRec, DataRec};
use serde_json::json;
use tcpwhy_core::units::{fmt_bytes, fmt_rate};
use tcpwhy_core::Cause;
use tcpwhy_flow::Flags;

/// A bucket of at least this many segments is a policer's, not a drop-tail
/// queue overflowing from slow start (which fits no burst): with such a
/// burst the detector's own queue test (the smallest RTT of the round
/// before each loss) outweighs the coarser episode test, which one late
/// round sways.
pub const POLICER_BURST_MIN_SEGMENTS: u64 = 10;
/// A policer forwards the packets it passes as they came, so ACK trains
/// keep the spacing of the link before it, far above the token rate; a
/// shaper (a queue served at the rate) spaces them at its rate (packet
/// dispersion: Dovrolis et al., IEEE/ACM ToN 2004; Flach et al. 2016 2 on
/// policing against shaping). With the path rate from trains under this
/// multiple of the bucket's rate the two cannot be told apart: a policer
/// verdict is then `medium`. (On the policing-lab captures every policed
/// direction with a measured path rate had a ratio of 5 or more; a
/// 3 Mbit/s shaper with an 8,000-byte queue had 1.1.)
pub const POLICER_DISPERSION_MIN_RATIO: f64 = 1.5;
/// A shaper holds what arrives above its rate in its queue, so the most a
/// shaped flow can deliver above the rate is that queue, seen as the RTT's
/// rise (p99 over base) times the rate. A fitted burst more than this
/// multiple of it (the fit's own error: its rate is estimated between
/// losses) cannot have passed a shaper, whatever the packet spacing: with an
/// ACK-clocked sender the survivors of a policer with an empty bucket are
/// spaced at the token rate too, so trains at the line rate are seen only
/// while the bucket holds tokens (measured in the lab's policer scenario:
/// trains at 1.2 to 1.3 times the token rate, a burst of 480 to 540 KiB, the
/// RTT up by 0.3 to 0.5 ms).
pub const SHAPER_QUEUE_BURST_FACTOR: f64 = 2.0;
/// A queue a shaper drops from holds at least this many packets' times at
/// its rate when it drops (it drops only when full). Below it the RTT's
/// rise is what an ACK-clocked flow shows through any bottleneck with no
/// queue: a delayed ACK waits for the second segment, one packet's time
/// at the bottleneck (RFC 5681 section 4.2), and a packet may find another
/// in service. Measured on queue-less policed lab paths (20 Mbit/s tokens
/// behind a 22 to 24 Mbit/s link, 40 ms): 1.6 to 1.8; the shared SCIR=3
/// Mbit/s shaper: 3.0.
pub const SHAPER_QUEUE_MIN_PACKETS: f64 = 2.0;
/// A drop-tail queue fills before it drops, so the packets sent just
/// before a loss episode's first loss waited in it full, and it drains at
/// its link's rate, the rate that limited the flow; a token bucket drops
/// with no queue of its own, and what queue a burst meets in front of it
/// is a faster link's. So the fitted burst divided by the queue in front
/// of each episode's first loss is the rate the queue drained at. Within
/// this multiple of the rate the flow got while it lost, the bucket was
/// that queue: the flow, alone at a drop-tail queue, gets a share of its
/// link after each cut (Reno at least half of it), less when its own
/// buffer held it back between bursts. Measured at the sender (lab sweeps,
/// seeds 101 and 303, 2 to 300 ms): drop-tail queues overflowed by a send
/// buffer's bursts or by a bulk flow, 1.0 to 2.2 (2.8 once, over 2
/// episodes); policers with token rates 0.1 to 0.6 of the line, 2.8 to
/// 4,600, most of them far above 5 (a sender ACK-clocked at the token rate
/// meets no queue).
pub const QUEUE_DRAIN_MAX_RATE_FACTOR: f64 = 2.5;
/// Above [`QUEUE_DRAIN_MAX_RATE_FACTOR`] and up to this multiple, a
/// policer behind a link under this multiple of its rate, whose queue the
/// sender's bursts filled, and a drop-tail queue whose flow got little of
/// its link read the same: a policer verdict is then `medium`, with both.
pub const QUEUE_DRAIN_UNDECIDED_FACTOR: f64 = 4.0;
/// A drop-tail queue drops only while it is full, so its link is busy on
/// both sides of every drop: at the receiver, the segment that arrives
/// above a hole follows the one before it by one transmission time at the
/// link's rate, as any two segments of a busy period do. A policer's drop
/// leaves its slot empty, unless a slower link behind it is still busy
/// with the burst the bucket passed. With the median gap across the holes
/// at most this many transmission times, the receiver
/// cannot tell a policer from a drop-tail queue the sender's bursts
/// overflow: a policer verdict is `medium`, and the sender's capture (the
/// queue in front of each loss) settles it. Measured at the receiver (lab
/// sweeps, seeds 101 and 303): drop-tail queues overflowed by a send
/// buffer's bursts 0.77 to 1.01 (1.3 to 3.6 in 3 of 34, and 43 once);
/// policers 1.0 to 36, at most 1.25 in 6 of 25 (a slower link behind the
/// bucket still draining its burst).
pub const HOLE_GAP_BUSY_MAX_SERVICE_TIMES: f64 = 1.25;
/// The share of the in-sequence arrival gaps (per byte) at or below the
/// last link's transmission time ([`gap_across_holes`]): a bulk flow's
/// segments mostly arrive back to back; the ones after a pause are the
/// upper part.
pub const HOLE_GAP_SERVICE_QUANTILE: f64 = 0.25;
/// Holes in the sequence needed for [`HOLE_GAP_BUSY_MAX_SERVICE_TIMES`].
pub const HOLE_GAP_MIN_HOLES: usize = 5;
/// Loss episodes whose start must be read ([`QUEUE_DRAIN_MAX_RATE_FACTOR`]):
/// the first often ends slow start, which overflows whatever holds the
/// path.
pub const QUEUE_EDGE_MIN_EPISODES: usize = 2;
/// Losses that spare the packets sent after a pause (the spacing test,
/// `SPACING_P_VALUE_MAX`) come from something that drops bursts: a token
/// bucket smaller than the bursts, or the queue of a link slower than the
/// sender's, which a burst overflows. When back-to-back packets cross the
/// path (packet pairs) at this multiple of the flow's goodput or more, there
/// is no such slower link for a flow this slow to overflow: its queue would
/// have to hold less than a tenth of its own link's BDP, under the BDP/√n
/// buffer rule (Appenzeller et al., SIGCOMM 2004) for any fewer than 100
/// flows. The verdict is then a policer whose bucket is smaller than the
/// sender's bursts (its rate is above what the flow reached and is not
/// measured), at `medium`.
pub const SMALL_BUCKET_PATH_RATIO: f64 = 10.0;
/// Stand-ins for lost segments per hole, at most (a hole of more is a gap
/// in the capture, not a burst of loss).
const MAX_STAND_INS: usize = 1024;

/// At the receiver, lost segments never arrive: put a stand-in for each at
/// the time the hole appeared, and mark the segments that later fill a hole
/// as retransmissions, so the loss pattern looks as it did at the sender
/// (shifted by the one-way delay). A hole that a segment the flow model
/// found reordered fills (never seen before, arriving within the
/// reordering threshold, `Flags::OUT_OF_ORDER`) was no loss: its bytes get
/// no stand-in and the segment stays what it is.
pub(crate) fn as_sent(data: &[DataRec], smss: u32) -> Vec<DataRec> {
    let mut out = Vec::with_capacity(data.len() + 64);
    let mut max_end = i64::MIN;
    let smss = smss.max(1) as i64;
    let reordered = |x: &DataRec| x.flags.has(Flags::OUT_OF_ORDER) && !x.is_retransmission();
    let mut late: Vec<(i64, i64)> = data.iter().filter(|x| reordered(x)).map(|x| (x.seq, x.end())).collect();
    late.sort_unstable();
    let arrives_late = |s: i64| {
        let i = late.partition_point(|r| r.0 <= s);
        i > 0 && late[i - 1].1 > s
    };
    for d in data {
        let mut d = *d;
        if max_end != i64::MIN && d.seq > max_end {
            let mut s = max_end;
            let mut n = 0;
            while s < d.seq && n < MAX_STAND_INS {
                let len = (d.seq - s).min(smss);
                if !arrives_late(s) {
                    out.push(DataRec { t_ns: d.t_ns - 1, seq: s, len: len as u32, flags: Flags::default(), ..d });
                }
                s += len;
                n += 1;
            }
        } else if max_end != i64::MIN && d.end() <= max_end && d.len > 0 && !reordered(&d) {
            d.flags.set(Flags::RETRANSMISSION);
        }
        max_end = max_end.max(d.end());
        out.push(d);
    }
    out
}

/// The policing evidence of a direction: the verdict of the policed group
/// it belongs to, if any (the flows it shares the path with pass the test
/// together: an aggregate policer, whose rate is the group's; a flow alone
/// sees a varying share of it, and may fail the test), else its own.
pub(crate) fn evidence(inp: &Input, group: Option<&PolicerVerdict>) -> PolicerVerdict {
    match group {
        Some(g) => g.clone(),
        None => detect(inp),
    }
}

/// The verdict a bucket smaller than the sender's bursts leaves (decide's
/// `small_bucket_pairs_bps`): no rate or burst fitted, the path's pair
/// rate, the losses.
pub(crate) fn small_bucket_verdict(pairs_bps: f64, loss: &Loss) -> PolicerVerdict {
    PolicerVerdict {
        code: policer::code::SMALL_BUCKET,
        group_path_bps: Some(pairs_bps),
        lost_frames: loss.first_frames.clone(),
        losses: loss.retransmissions,
        ..Default::default()
    }
}

/// A round trip sending at least this multiple of the median round's new
/// data is a "fast" round: BBR's probing phase sends at 1.25 times its
/// estimate (Linux's `tcp_bbr.c` pacing_gain cycle), Reno and CUBIC at the
/// top of their window's growth.
pub const FAST_ROUND_FACTOR: f64 = 1.15;
/// Rounds skipped at the start (slow start or BBR's STARTUP: the rate
/// doubles each round, so every round is "fast").
pub const RATE_TEST_SKIP_ROUNDS: usize = 10;
/// The overshoot that ends slow start or STARTUP is skipped too: the last
/// round within this share of the first rounds that lost more than the
/// later half's loss rate explains (binomial, z at
/// [`RATE_DEPENDENCE_MIN_Z`]) and those before it. A window that doubled
/// past what the path holds overflows whatever holds it (a queue or a
/// bucket) in rounds that sent much, whatever drops packets afterwards;
/// BBR keeps pacing on the bandwidth STARTUP measured while its max filter
/// holds it (`bbr_bw_rtts`, 10 of its rounds, which a queue lengthens).
/// Measured (bench/independent loss-bbr: BBR, 200 Mbit/s, 40 ms, a queue
/// of one BDP, 0.5% random loss): the overflow lasted 0.9 to 1.2 s (22
/// to 29 round trips) of 8 s; with it counted, fast rounds lost 6 to 10
/// times as often, without it 0.9 to 1.3 times.
pub const OVERSHOOT_SEARCH_SHARE: f64 = 0.25;
/// A token bucket drops only what arrives above its rate once its tokens
/// are spent, and a drop-tail queue only what arrives above its drain rate
/// while it is full: either way a packet sent in a fast round is more
/// likely lost. Random loss drops each packet with the same probability
/// whatever the sender does. The loss rate in fast rounds over the loss rate
/// in the others is tested one-sided (two proportions, normal
/// approximation): losses depend on the rate when z reaches this (a p-value
/// of 0.1%)...
pub const RATE_DEPENDENCE_MIN_Z: f64 = 3.0;
/// ...and are independent of it when the test could have seen a ratio of
/// [`RATE_DEPENDENCE_POWER_RATIO`] at that z, and the ratio seen is below
/// this. (Lab: BBR behind policers of 20 and 50 Mbit/s, ratios 16 and 4.3;
/// BBR on links with 0.5% and 1% random loss, 1.1 and 1.1.)
pub const RATE_INDEPENDENT_MAX_RATIO: f64 = 1.5;
/// The ratio the test must have had the power to see.
pub const RATE_DEPENDENCE_POWER_RATIO: f64 = 2.0;

/// Losses in fast rounds and in the others, at the sender: (lost, sent)
/// of each in segments of `smss`, with a round of `round_ns` (the base
/// RTT). The bytes lost are those retransmitted, each counted once, in the
/// round their original was sent (new data goes out in sequence order, so
/// the original is found by the bytes it holds).
pub fn losses_by_round_rate(data: &[DataRec], round_ns: i64, smss: u32) -> Option<[(u64, u64); 2]> {
    if round_ns <= 0 || smss == 0 {
        return None;
    }
    let originals: Vec<&DataRec> = data.iter().filter(|d| !d.is_retransmission()).collect();
    if originals.windows(2).any(|w| w[1].seq < w[0].seq || w[1].t_ns < w[0].t_ns) {
        // not in sequence and time order: not the sender's own view, or a
        // clock that stepped
        return None;
    }
    let (first, last) = (originals.first()?.t_ns, originals.last()?.t_ns);
    let n = ((last - first) / round_ns + 1).clamp(1, 1 << 20) as usize;
    let round = |t: i64| (((t - first).max(0) / round_ns) as usize).min(n - 1);
    // bytes, counted in segments: a capture with offloads holds
    // super-segments, retransmitted in other cuts
    let mut sent = vec![0u64; n];
    for d in &originals {
        sent[round(d.t_ns)] += u64::from(d.len);
    }
    let mut lost = vec![0u64; n];
    let mut done = i64::MIN; // retransmitted bytes below this are counted
    let mut retx: Vec<&DataRec> = data.iter().filter(|d| d.is_retransmission()).collect();
    retx.sort_by_key(|d| d.seq);
    for d in retx {
        let (lo, hi) = (d.seq.max(done), d.end());
        if hi <= lo {
            continue;
        }
        done = hi;
        // the original holding the first byte retransmitted
        let i = originals.partition_point(|o| o.end() <= lo);
        if let Some(o) = originals.get(i).filter(|o| o.seq <= lo && o.t_ns < d.t_ns) {
            lost[round(o.t_ns)] += (hi - lo) as u64;
        }
    }
    let segs = |b: u64| b.div_ceil(u64::from(smss));
    // Slow start restarts after an idle of an RTO (`tcp_cwnd_restart`):
    // the first such idle ends the search for the first overshoot.
    let idle_ns = crate::congestion::restart_idle_ns(round_ns);
    let restart = data.windows(2).find(|w| w[1].t_ns - w[0].t_ns >= idle_ns).map_or(n, |w| round(w[0].t_ns) + 1);
    let skip = overshoot_end(&sent, &lost, restart, smss).max(RATE_TEST_SKIP_ROUNDS);
    let mut busy: Vec<u64> = sent.iter().skip(skip).copied().filter(|&s| s > 0).collect();
    if busy.len() < RATE_TEST_SKIP_ROUNDS {
        return None;
    }
    busy.sort_unstable();
    let median = busy[busy.len() / 2] as f64;
    let mut out = [(0u64, 0u64); 2];
    for k in skip..n {
        let fast = usize::from(sent[k] as f64 >= FAST_ROUND_FACTOR * median);
        out[fast].0 += segs(lost[k]).min(segs(sent[k]));
        out[fast].1 += segs(sent[k]);
    }
    Some(out)
}

/// The round after slow start's overshoot, searched in the first
/// [`OVERSHOOT_SEARCH_SHARE`] of the rounds and before the round slow
/// start first restarts in (`restart`): 0 when no round there lost more
/// than the later half's loss rate explains. `sent`, `lost`: bytes per
/// round.
fn overshoot_end(sent: &[u64], lost: &[u64], restart: usize, smss: u32) -> usize {
    let segs = |b: u64| b.div_ceil(u64::from(smss)) as f64;
    let n = sent.len();
    let (l, s) = (n / 2..n).fold((0.0, 0.0), |(l, s), k| (l + segs(lost[k]).min(segs(sent[k])), s + segs(sent[k])));
    if s == 0.0 {
        return 0;
    }
    let p = (l / s).clamp(f64::MIN_POSITIVE, 1.0);
    let search = ((n as f64 * OVERSHOOT_SEARCH_SHARE) as usize).min(restart);
    (0..search)
        .rev()
        .find(|&k| {
            let (x, m) = (segs(lost[k]).min(segs(sent[k])), segs(sent[k]));
            let sd = (m * p * (1.0 - p)).sqrt();
            m > 0.0 && x - m * p >= RATE_DEPENDENCE_MIN_Z * sd.max(1.0)
        })
        .map_or(0, |k| k + 1)
}

/// Whether the losses depend on the sending rate: Some(true) when fast
/// rounds lose more (at [`RATE_DEPENDENCE_MIN_Z`]), Some(false) when the
/// test had the power to see it and did not, None otherwise.
pub fn loss_depends_on_rate(by: [(u64, u64); 2]) -> Option<bool> {
    let [(l0, n0), (l1, n1)] = by;
    if n0 == 0 || n1 == 0 || l0 + l1 == 0 {
        return None;
    }
    let (p0, p1) = (l0 as f64 / n0 as f64, l1 as f64 / n1 as f64);
    let z_at = |a: f64, b: f64| {
        let p = (a * n1 as f64 + b * n0 as f64) / (n0 + n1) as f64;
        let se = (p * (1.0 - p) * (1.0 / n0 as f64 + 1.0 / n1 as f64)).sqrt();
        if se > 0.0 { (a - b) / se } else { 0.0 }
    };
    if z_at(p1, p0) >= RATE_DEPENDENCE_MIN_Z {
        return Some(true);
    }
    let p = (l0 + l1) as f64 / (n0 + n1) as f64;
    let powered = z_at((RATE_DEPENDENCE_POWER_RATIO * p).min(1.0), p) >= RATE_DEPENDENCE_MIN_Z;
    (powered && p1 < RATE_INDEPENDENT_MAX_RATIO * p0.max(f64::MIN_POSITIVE)).then_some(false)
}

/// Runs the token-bucket test on the data as the sender sent it.
fn detect(inp: &Input) -> PolicerVerdict {
    let (r, path) = (inp.r, inp.path);
    let receiver_view;
    let data: &[DataRec] = if path.sender_side {
        &r.data
    } else {
        receiver_view = as_sent(&r.data, path.smss);
        &receiver_view
    };
    // Near the receiver, an ACK's "RTT" is the receiver's own ACK delay,
    // not the path's: the detector then works from the path RTT alone.
    let receiver_acks;
    let acks: &[AckRec] = if path.sender_side {
        &r.acks
    } else {
        receiver_acks = r.acks.iter().map(|a| AckRec { rtt_us: 0, ..*a }).collect::<Vec<_>>();
        &receiver_acks
    };
    if !data.iter().any(|x| x.is_retransmission()) {
        return PolicerVerdict { code: "no_loss", ..Default::default() };
    }
    let mut verdict = policer::detect_flow(data, acks, path.base_ns(), path.smss);
    if verdict.policed && path.sender_side {
        // A bucket drops what comes above its rate: losses that strike a
        // packet alike whatever the sender's rate were not its doing.
        let by = path.base_ns().and_then(|b| losses_by_round_rate(data, b, path.smss));
        let depends = by.and_then(loss_depends_on_rate);
        if std::env::var_os("TCPWHY_DEBUG_INTERVALS").is_some() {
            eprintln!("losses by round rate: {by:?} -> {depends:?}");
        }
        if depends == Some(false) {
            return PolicerVerdict { code: policer::code::RATE_INDEPENDENT, policed: false, ..verdict };
        }
    }
    if verdict.policed {
        queues_at_losses(&mut verdict, inp);
    }
    if verdict.policed && !path.sender_side {
        // Arrival bursts at the receiver mislead the bucket's rate: use the
        // goodput between the first and the last loss (the paper's estimate).
        if let Some(rate) = verdict.loss_span_s.and_then(|(a, b)| goodput_between(&r.data, a, b)) {
            // an unseen rate's range keeps its width above the new rate
            // (the scan measured how far above the fit the losses allow)
            if let (Some(high), Some(fit)) = (verdict.rate_high_bps, verdict.rate_bps) {
                verdict.rate_high_bps = Some(high / fit * rate);
            }
            verdict.rate_bps = Some(rate);
        }
    }
    verdict
}

/// New bytes delivered between two times (s), as a rate.
pub(crate) fn goodput_between(data: &[DataRec], a: f64, b: f64) -> Option<f64> {
    let (a_ns, b_ns) = (calc::ns_from_s(a) as i64, calc::ns_from_s(b) as i64);
    let mut hi = i64::MIN;
    let mut bytes = 0i64;
    for x in data.iter().filter(|x| x.t_ns >= a_ns && x.t_ns <= b_ns) {
        if hi == i64::MIN {
            hi = x.end();
        } else if x.end() > hi {
            bytes += x.end() - hi.max(x.seq);
            hi = x.end();
        }
    }
    (b_ns > a_ns && bytes > 0).then(|| calc::bps(bytes as f64, calc::s_from_ns((b_ns - a_ns) as f64)))
}

/// The token bucket is the cause: the test passed and the losses did not
/// mostly follow a full queue (a drop-tail queue fills before it drops, a
/// policer drops without one, [`crate::detect::loss::QUEUE_FULL_SHARE`]; slow start's overshoot, which ends in loss
/// at either, counts for neither: [`Loss::queue_rests_on_overshoot`]), or
/// the bucket had a burst a queue cannot fit.
/// The burst read here is the paper's (`PolicerVerdict::start_fill_bytes`):
/// the envelope's reads a drop-tail queue's size on a queue that overflows
/// from slow start.
pub(crate) fn explains(v: &PolicerVerdict, loss: &Loss, inp: &Input) -> bool {
    let burst = v.start_fill_bytes.unwrap_or(0);
    v.policed
        // the bucket was the flow's own queue (`queue_overflowed`, which
        // the diagnosis stores in the loss evidence)
        && loss.overflowed_queue_ms.is_none()
        && (loss.episodes == 0
            || !loss.mostly_after_full_queue()
            // A bucket drops slow start's overshoot as a queue does: with
            // losses that fit a bucket and no standing queue in front of
            // them, the later episodes decide.
            || (loss.queue_rests_on_overshoot() && no_queue_at_losses(v, inp))
            || (!loss.deep_queue && burst >= POLICER_BURST_MIN_SEGMENTS * inp.path.smss as u64)
            || (inp.path.sender_side && loss.episodes < 2 && loss.inflated_before == 0 && burst > 0))
}

/// The queue in front of the losses read as the fitted burst waiting in
/// it: at the sender, for a policed flow alone on its bucket, read at the
/// start of at least [`QUEUE_EDGE_MIN_EPISODES`] loss episodes
/// ([`policer::queue_at_episode_starts`]) and at least
/// [`SHAPER_QUEUE_MIN_PACKETS`] packets' times at the rate. Read at the
/// sender only: the receiver's echo samples come one per ACK the sender
/// answered, so a burst the application wrote at once is sampled at its
/// head, before any queue.
pub(crate) fn queue_drain(v: &PolicerVerdict, inp: &Input) -> Option<QueueDrain> {
    let (q_ns, burst, rate) = (v.queue_at_episode_starts_ns?, v.burst_bytes?, v.rate_bps?);
    let queue_s = calc::s_from_ns(q_ns as f64);
    let packets = calc::bytes(queue_s * rate) / inp.path.smss.max(1) as f64;
    let read = inp.path.sender_side
        && v.policed
        && v.group.len() < 2
        && v.episode_starts >= QUEUE_EDGE_MIN_EPISODES
        && packets >= SHAPER_QUEUE_MIN_PACKETS
        && rate > 0.0;
    let drain_bps = calc::bps(burst as f64, queue_s);
    read.then_some(QueueDrain { queue_ms: calc::ms_from_s(queue_s), drain_bps, ratio: drain_bps / rate })
}

/// The queue in front of each loss episode's first loss, and the rate it
/// drained the fitted burst at ([`queue_drain`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueueDrain {
    pub queue_ms: f64,
    pub drain_bps: f64,
    /// `drain_bps` over the rate the flow got while it lost.
    pub ratio: f64,
}

impl QueueDrain {
    /// The bucket was the queue: a drop-tail queue overflowing
    /// ([`QUEUE_DRAIN_MAX_RATE_FACTOR`]).
    pub fn is_the_queue(&self) -> bool {
        self.ratio <= QUEUE_DRAIN_MAX_RATE_FACTOR
    }

    /// Between the two readings ([`QUEUE_DRAIN_UNDECIDED_FACTOR`]).
    pub fn undecided(&self) -> bool {
        !self.is_the_queue() && self.ratio <= QUEUE_DRAIN_UNDECIDED_FACTOR
    }
}

/// At the receiver: the arrival gap across each hole in the sequence (the
/// segment that arrived above it against the one that arrived before it),
/// in transmission times of that segment, the median over the holes, and
/// how many (at least [`HOLE_GAP_MIN_HOLES`]). The transmission time is
/// what the capture shows of the last link: the
/// [`HOLE_GAP_SERVICE_QUANTILE`] of the arrival gaps between segments in
/// sequence, per byte (most segments of a bulk flow arrive back to back
/// at its bottleneck's rate).
pub(crate) fn gap_across_holes(inp: &Input) -> Option<(f64, usize)> {
    if inp.path.sender_side {
        return None;
    }
    let (mut max_end, mut prev_t) = (i64::MIN, i64::MIN);
    let (mut holes, mut in_order) = (Vec::new(), Vec::new());
    for d in inp.r.data.iter().filter(|d| d.len > 0) {
        if max_end != i64::MIN {
            let gap_per_byte = (d.t_ns - prev_t) as f64 / d.len as f64;
            if d.seq > max_end {
                holes.push(gap_per_byte);
            } else if d.seq == max_end {
                in_order.push(gap_per_byte);
            }
        }
        max_end = max_end.max(d.end());
        prev_t = d.t_ns;
    }
    let service = crate::rank::quantile_f64(&mut in_order, HOLE_GAP_SERVICE_QUANTILE).filter(|&s| s > 0.0)?;
    if holes.len() < HOLE_GAP_MIN_HOLES {
        return None;
    }
    let n = holes.len();
    Some((crate::rank::quantile_f64(&mut holes, 0.5)? / service, n))
}

/// A drop-tail queue overflowing, read at the sender ([`QueueDrain::is_the_queue`]).
pub(crate) fn queue_overflowed(v: &PolicerVerdict, inp: &Input) -> Option<QueueDrain> {
    queue_drain(v, inp).filter(QueueDrain::is_the_queue)
}

/// The queue in front of the losses (the smallest RTT of the round
/// before each, the median over the losses) was measured and is not a
/// shaper's by [`limiter`]'s test: under [`SHAPER_QUEUE_MIN_PACKETS`]
/// packets' times at the bucket's rate, or under the one queue test's
/// floor ([`crate::path::QUEUE_BEFORE_LOSS_MIN_MS`]).
fn no_queue_at_losses(v: &PolicerVerdict, inp: &Input) -> bool {
    let (Some(q_ns), Some(rate)) = (v.queue_before_losses_ns, v.rate_bps) else {
        return false;
    };
    let queue_ms = calc::ms_from_ns(q_ns as f64);
    let packets = calc::bytes(calc::s_from_ms(queue_ms) * rate) / inp.path.smss.max(1) as f64;
    !shaper_queue(queue_ms, packets)
}

/// A shaper's standing queue: at least [`SHAPER_QUEUE_MIN_PACKETS`]
/// packets' times at the bucket's rate and the one queue test's floor
/// ([`crate::path::QUEUE_BEFORE_LOSS_MIN_MS`]).
fn shaper_queue(queue_ms: f64, queue_packets: f64) -> bool {
    queue_packets >= SHAPER_QUEUE_MIN_PACKETS && queue_ms >= crate::path::QUEUE_BEFORE_LOSS_MIN_MS
}

/// A policer or a shaper, for losses that fit a token bucket
/// ([`limiter`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Limiter {
    Policer,
    /// A queue served at the bucket's rate: `queue_ms` of it (the RTT's
    /// rise, p90 over base), `queue_packets` packets' times at the rate.
    Shaper { path_bps: f64, rate_bps: f64, queue_ms: f64, queue_packets: f64 },
    /// A queue of a few packets, within the RTT's jitter: a policer and a
    /// shaper with a short queue look the same.
    Either { path_bps: f64, rate_bps: f64, queue_ms: f64, queue_packets: f64 },
}

/// Which rate limiter the losses of a policed direction came from. A
/// policer forwards what it passes as it came, so ACK trains at
/// [`POLICER_DISPERSION_MIN_RATIO`] times the bucket's rate or more are a
/// policer's. Below that the trains cannot tell (an ACK-clocked sender
/// behind an empty bucket is spaced at the token rate too), and the queue
/// decides: a shaper is a queue and drops only when it is full, so its
/// flow's RTT rises by the queue; a policer drops with none. First, a
/// burst by the paper's reading (`start_fill_bytes`, which a queue
/// overflowing from slow start leaves near 0) over twice the queue and
/// [`POLICER_BURST_MIN_SEGMENTS`] passed a policer: a shaper's output
/// never runs above its rate. Then the standing queue, the RTT's rise (p90
/// over base) in packets' times at the bucket's rate:
/// - at least [`SHAPER_QUEUE_MIN_PACKETS`] and
///   [`crate::path::QUEUE_BEFORE_LOSS_MIN_MS`] (the one queue test's floor,
///   above the jitter of delayed ACKs and scheduling): a shaper;
/// - under [`SHAPER_QUEUE_MIN_PACKETS`], with a bucket's burst (the
///   envelope's, `burst_bytes`) over twice that queue and at least
///   [`POLICER_BURST_MIN_SEGMENTS`]: bytes passed above the rate that no
///   queue held, a policer;
/// - otherwise (a few packets of a fast link within the jitter, or a burst
///   a shallow queue could have held too): either.
pub(crate) fn limiter(v: &PolicerVerdict, inp: &Input) -> Limiter {
    let (Some(path_bps), Some(rate_bps)) = (v.group_path_bps.or(inp.path.path_bps()), v.rate_bps) else {
        return Limiter::Policer;
    };
    if path_bps >= POLICER_DISPERSION_MIN_RATIO * rate_bps {
        return Limiter::Policer;
    }
    let rtt = &inp.path.rtt;
    let Some(queue_ms) = rtt.base_ms().zip(rtt.p90_ms()).map(|(b, p)| (p - b).max(0.0)) else {
        return Limiter::Policer;
    };
    let queue_bytes = calc::bytes(calc::s_from_ms(queue_ms) * rate_bps);
    let floor = (POLICER_BURST_MIN_SEGMENTS * inp.path.smss as u64) as f64;
    let beyond_queue = |burst: Option<u64>| burst.unwrap_or(0) as f64 > (SHAPER_QUEUE_BURST_FACTOR * queue_bytes).max(floor);
    if beyond_queue(v.start_fill_bytes) {
        return Limiter::Policer;
    }
    let queue_packets = queue_bytes / inp.path.smss.max(1) as f64;
    if shaper_queue(queue_ms, queue_packets) {
        Limiter::Shaper { path_bps, rate_bps, queue_ms, queue_packets }
    } else if queue_packets < SHAPER_QUEUE_MIN_PACKETS && beyond_queue(v.burst_bytes) {
        Limiter::Policer
    } else {
        Limiter::Either { path_bps, rate_bps, queue_ms, queue_packets }
    }
}

/// The queue in front of the losses ([`policer::queue_at_losses`]) in ns,
/// and how many losses had a sample in the round trip before them, each
/// sample against the smallest of its kind ([`rtt_samples`]); at the
/// sender also the queue at each loss episode's start
/// ([`policer::queue_at_episode_starts`], which [`queue_drain`] reads
/// there only), from the same samples.
fn queues_at_losses(v: &mut PolicerVerdict, inp: &Input) {
    let Some(round_ns) = inp.path.base_ns() else {
        return;
    };
    let samples = rtt_samples(inp);
    let Some(base_ns) = samples.iter().map(|s| s.1).min() else {
        return;
    };
    if let Some((q, n)) = policer::queue_at_losses(&v.loss_times_ns, &samples, round_ns, base_ns) {
        (v.queue_before_losses_ns, v.queue_samples) = (Some(q), n);
    }
    if inp.path.sender_side {
        if let Some((q, n)) = policer::queue_at_episode_starts(&v.loss_times_ns, &samples, round_ns, base_ns) {
            (v.queue_at_episode_starts_ns, v.episode_starts) = (Some(q), n);
        }
    }
}

/// RTT samples as (time, RTT) in time order, from what the capture point
/// has: near the sender the ACKs' RTTs at each packet's send time; near
/// the receiver the echo round trips (`limits::receiver_echo_samples`) at
/// each arrival, which cross the data's path too.
fn rtt_samples(inp: &Input) -> Vec<(i64, i64)> {
    if inp.path.sender_side {
        policer::rtt_samples(&inp.r.acks)
    } else {
        crate::limits::receiver_echo_samples(&inp.r.data, &inp.r.acks, inp.path.smss)
    }
}

/// The path carries back-to-back packets at [`SMALL_BUCKET_PATH_RATIO`]
/// times the flow's goodput or more (the caller has seen the losses spare
/// the spaced packets): the pair rate.
pub(crate) fn small_bucket(inp: &Input) -> Option<f64> {
    let goodput = inp.ds.goodput_bps?;
    let base_ns = inp.path.base_ns()?;
    let pairs = crate::path::pair_rate(inp.r, inp.path.sender_side, inp.path.smss, base_ns)?;
    (pairs >= SMALL_BUCKET_PATH_RATIO * goodput).then_some(pairs)
}

pub(crate) fn findings(v: &PolicerVerdict, primary: Cause, smss: u32, retransmissions: u64, out: &mut Vec<Finding>) {
    if v.code == policer::code::SMALL_BUCKET {
        let pairs = v.group_path_bps.unwrap_or(0.0);
        out.push(finding(
            "policer",
            format!(
                "a token bucket holding fewer tokens than the sender's bursts (a small bucket, or one other flows drain): the losses struck packets sent back to back and spared those sent after a pause, and back-to-back packets cross the path at {} (packet pairs), so no slower link's queue dropped them; the bucket's rate is not measured, as this flow alone stays below it",
                fmt_rate(pairs)
            ),
            &[
                ("rate_bps", json!(null)),
                ("burst_bytes", json!(null)),
                ("pair_rate_bps", num(pairs)),
                ("code", json!(v.code)),
                ("shared_by_flows", json!(1)),
                ("shared_with_connections", json!([])),
            ],
            Evidence { frames: v.lost_frames.clone(), time_ranges: v.loss_span_s.into_iter().collect() },
        ));
        return;
    }
    if !(v.policed || primary == Cause::Policer) {
        return;
    }
    let rate = v.rate_bps.unwrap_or(0.0);
    let shared = v.group.len() >= 2;
    // The queue in front of the losses, in packets' times at the rate: a
    // shaper drops only when its queue is full, a policer with an empty
    // bucket without one.
    let queue_packets = v.queue_before_losses_ns.filter(|_| rate > 0.0).map(|q| calc::bytes(calc::s_from_ns(q as f64) * rate) / smss.max(1) as f64);
    let queue_text = match (v.queue_before_losses_ns, queue_packets) {
        (Some(q), Some(p)) => format!(
            "; in front of the losses (the median over {} of them) a queue of {:.1} ms, {:.1} packets at the bucket's rate",
            v.queue_samples,
            calc::ms_from_ns(q as f64),
            p
        ),
        _ => String::new(),
    };
    let burst = fmt_bytes(v.burst_bytes.unwrap_or(0) as f64);
    // (policer::rate_high)
    let high = v.rate_high_bps.unwrap_or(rate);
    let upto = if v.rate_high_open {
        format!("{} or more", fmt_rate(high))
    } else {
        format!("{} ({:.1} times that)", fmt_rate(high), high / rate)
    };
    let unseen = format!(
        "token bucket of {burst} whose rate the losses do not show: it is at least {} (what the flow got), and any rate up to {upto} explains the losses as well (the bursts found the bucket refilled whole after their pauses)",
        fmt_rate(rate)
    );
    // A loss is a captured packet whose bytes were sent again: one
    // retransmission can carry the bytes of several (TSO super-segments,
    // a retransmission that coalesces), or several one packet's.
    let lost_text = if shared || v.losses == retransmissions {
        format!("{} losses", v.losses)
    } else {
        format!("{} packets lost (their bytes sent again in {retransmissions} retransmissions)", v.losses)
    };
    let text = if shared {
        let conns: Vec<String> = v.group.iter().map(|(c, _)| c.to_string()).collect();
        let bucket = if v.rate_unseen { unseen } else { format!("token bucket at {} with a burst of {burst}", fmt_rate(rate)) };
        format!(
            "these {} flows (connections {}) share a policer: their losses together fit one {bucket}, while each flow alone saw only a varying share of the rate; {} where the group's bucket ran empty{}",
            v.group.len(),
            conns.join(", "),
            lost_text,
            queue_text
        )
    } else if v.rate_unseen {
        format!("losses fit a {unseen}; {} where the bucket ran empty{}", lost_text, queue_text)
    } else {
        format!(
            "losses fit a token bucket: rate {} with a burst of {}; {} where the bucket ran empty{}",
            fmt_rate(rate),
            fmt_bytes(v.burst_bytes.unwrap_or(0) as f64),
            lost_text,
            queue_text
        )
    };
    let connections: Vec<u64> = v.group.iter().map(|(c, _)| *c).collect();
    out.push(finding(
        "policer",
        text,
        &[
            ("rate_bps", num(rate)),
            ("burst_bytes", json!(v.burst_bytes)),
            ("rate_unseen", json!(v.rate_unseen)),
            ("rate_high_bps", json!(v.rate_high_bps)),
            ("rate_high_open", json!(v.rate_high_open)),
            ("queue_before_losses_ms", json!(v.queue_before_losses_ns.map(|q| calc::ms_from_ns(q as f64)))),
            ("queue_before_losses_packets", json!(queue_packets)),
            ("losses", json!(v.losses)),
            ("code", json!(v.code)),
            ("shared_by_flows", json!(if shared { v.group.len() } else { 1 })),
            ("shared_with_connections", json!(connections)),
        ],
        Evidence { frames: v.lost_frames.clone(), time_ranges: v.loss_span_s.into_iter().collect() },
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(t: i64, seq: i64) -> DataRec {
        DataRec { t_ns: t, seq, frame: t as u64, len: 1000, in_flight: 0, flags: Flags::default(), tsecr: 0 }
    }

    /// 100 rounds of 10 segments (every 8th a fast round of 13), a loss in
    /// each round that `lose` picks, retransmitted a round later.
    fn rounds(lose: impl Fn(usize, usize) -> bool) -> Vec<DataRec> {
        const R: i64 = 100_000_000;
        let (mut out, mut seq, mut retx) = (Vec::new(), 0i64, Vec::new());
        for k in 0..100usize {
            let n = if k % 8 == 0 { 13 } else { 10 };
            for i in 0..n {
                out.push(seg(k as i64 * R + i as i64 * 1000, seq));
                if lose(k, i) {
                    retx.push((k as i64 * R + R + i as i64, seq));
                }
                seq += 1000;
            }
            for (t, s) in retx.iter().filter(|(t, _)| *t < (k as i64 + 2) * R && *t >= (k as i64 + 1) * R) {
                let mut r = seg(*t, *s);
                r.flags.set(Flags::RETRANSMISSION);
                out.push(r);
            }
        }
        out.sort_by_key(|d| d.t_ns);
        out
    }

    #[test]
    fn slow_starts_overshoot_is_left_out_of_the_rate_test() {
        // 100 rounds of 10 segments; rounds 10 to 20 overflow (5 lost of
        // 10, STARTUP's overshoot), then one loss in 20 rounds (random)
        let sent = vec![10_000u64; 100];
        let lost: Vec<u64> = (0..100).map(|k| if (10..=20).contains(&k) { 5000 } else if k % 20 == 7 { 1000 } else { 0 }).collect();
        assert_eq!(overshoot_end(&sent, &lost, 100, 1000), 21);
        // slow start restarted at round 15 (an idle of an RTO): the
        // search stops there
        assert_eq!(overshoot_end(&sent, &lost, 15, 1000), 15);
        // losses no heavier early than late: nothing to skip
        let even: Vec<u64> = (0..100).map(|k| if k % 20 == 7 { 1000 } else { 0 }).collect();
        assert_eq!(overshoot_end(&sent, &even, 100, 1000), 0);
        // an overflow past the first quarter is not slow start's
        let late: Vec<u64> = (0..100).map(|k| if (30..=35).contains(&k) { 5000 } else { 0 }).collect();
        assert_eq!(overshoot_end(&sent, &late, 100, 1000), 0);
    }

    #[test]
    fn losses_in_the_fast_rounds_follow_the_rate_and_even_ones_do_not() {
        const R: i64 = 100_000_000;
        // a bucket: every fast round loses its last 3 (the excess)
        let bucket = losses_by_round_rate(&rounds(|k, i| k % 8 == 0 && i >= 10), R, 1000).unwrap();
        assert_eq!(bucket[1].0, 33, "{bucket:?}");
        assert_eq!(loss_depends_on_rate(bucket), Some(true));
        // random: one packet in ten rounds of either kind, even odds
        let random = losses_by_round_rate(&rounds(|k, i| (k * 7 + i * 3) % 53 == 0), R, 1000).unwrap();
        let ratio = (random[1].0 as f64 / random[1].1 as f64) / (random[0].0 as f64 / random[0].1 as f64);
        assert!(ratio < RATE_INDEPENDENT_MAX_RATIO, "{random:?}");
        // too few losses to have the power to tell: no answer
        assert_eq!(loss_depends_on_rate([(1, 800), (0, 110)]), None);
        // the power and an even ratio: independent
        assert_eq!(loss_depends_on_rate([(200, 20000), (28, 2800)]), Some(false));
    }

    #[test]
    fn holes_at_the_receiver_become_losses_and_their_fill_a_retransmission() {
        // 0..1000 and 3000..4000 arrive, then 1000..3000 fills the hole
        let v = as_sent(&[seg(10, 0), seg(20, 3000), seg(30, 1000), seg(40, 2000)], 1000);
        let kinds: Vec<(i64, i64, bool)> = v.iter().map(|x| (x.t_ns, x.seq, x.is_retransmission())).collect();
        assert_eq!(kinds, vec![(10, 0, false), (19, 1000, false), (19, 2000, false), (20, 3000, false), (30, 1000, true), (40, 2000, true)]);
    }

    #[test]
    fn a_hole_a_reordered_segment_fills_was_no_loss() {
        // 1000..2000 arrives after 2000..3000, reordered (the flow model's
        // OUT_OF_ORDER): no stand-in, and the late segment is no retransmission
        let mut late = seg(30, 1000);
        late.flags.set(Flags::OUT_OF_ORDER);
        let v = as_sent(&[seg(10, 0), seg(20, 2000), late], 1000);
        let kinds: Vec<(i64, i64, bool)> = v.iter().map(|x| (x.t_ns, x.seq, x.is_retransmission())).collect();
        assert_eq!(kinds, vec![(10, 0, false), (20, 2000, false), (30, 1000, false)]);
    }

    #[test]
    fn goodput_between_counts_new_bytes_only() {
        let d = [seg(0, 0), seg(500_000_000, 1000), seg(600_000_000, 1000), seg(1_000_000_000, 2000)];
        // 2000 new bytes after the first segment in one second
        assert_eq!(goodput_between(&d, 0.0, 1.0), Some(16_000.0));
        assert_eq!(goodput_between(&d, 0.7, 0.8), None);
    }
}
