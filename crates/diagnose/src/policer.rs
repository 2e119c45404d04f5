//! Token-bucket policer detection, after Flach et al., "An Internet-Wide
//! Analysis of Traffic Policing" (SIGCOMM 2016). docs/policing.md describes
//! the method, its thresholds and how it was validated.

use tcpwhy_core::units::calc;
use crate::record::{AckRec, DataRec};
use std::collections::BTreeMap;
use std::ops::Range;
use tcpwhy_flow::Flags;

/// The verdict for one flow or one chunk of a flow.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PolicerVerdict {
    pub policed: bool,
    /// Estimated token rate (bit/s).
    pub rate_bps: Option<f64>,
    /// Estimated bucket depth (bytes).
    pub burst_bytes: Option<u64>,
    /// Data segments judged lost (retransmitted later).
    pub losses: u64,
    /// Why: "policed", or the test that failed.
    pub code: &'static str,
    /// Frames of the first few lost segments (evidence).
    pub lost_frames: Vec<u64>,
    /// Time range (s, capture-relative ns / 1e9) from the first to the last loss.
    pub loss_span_s: Option<(f64, f64)>,
    /// Wire-sized data packets examined (super-segments split at the MSS).
    pub packets: u64,
    /// Chunks examined (1 for [`detect`]) and, of those, chunks with losses
    /// and chunks judged policed (filled by [`detect_flow`]).
    pub chunks: u32,
    pub lossy_chunks: u32,
    pub policed_chunks: u32,
    /// Set when the verdict is a group's ([`detect_group`]): the flows
    /// tested together, as (connection number, direction index).
    pub group: Vec<(u64, usize)>,
    /// For a group: the highest path rate any member measured (the line
    /// the policer sits on; one flow's trains interleave with the others'
    /// packets and look slower).
    pub group_path_bps: Option<f64>,
    /// Capture times of the lost packets (sent, or at the receiver the
    /// stand-ins where the hole appeared), for the queue in front of the
    /// losses ([`queue_at_losses`]); every lossy chunk's, in time order.
    #[serde(skip)]
    pub loss_times_ns: Vec<i64>,
    /// The paper's burst: the bytes passed before the first loss less the
    /// rate times the time since the chunk's first packet (the bucket's
    /// fill at the chunk's start when it was sending above the rate
    /// throughout); the median over the policed chunks. What the tests of
    /// a burst a queue cannot pass read (`detect::policing`): on a
    /// drop-tail queue that overflows from slow start it stays near 0,
    /// where the envelope's reads the queue's size.
    pub start_fill_bytes: Option<u64>,
    /// The queue that stood in front of the losses (ns, the median over the
    /// losses of [`queue_at_losses`]) and how many losses had RTT samples
    /// in the round before them; set by the diagnosis for a policed flow.
    pub queue_before_losses_ns: Option<i64>,
    pub queue_samples: usize,
    /// The queue in front of each loss episode's first loss (ns, the lower
    /// median over the episodes, [`queue_at_episode_starts`]) and how many
    /// episodes had samples; set by the diagnosis for a policed flow.
    #[serde(skip)]
    pub queue_at_episode_starts_ns: Option<i64>,
    #[serde(skip)]
    pub episode_starts: usize,
    /// A bucket [`RATE_SEEN_MAX_SPREAD`] times as fast explains the losses
    /// as well ([`rate_high`]; the bursts found the bucket refilled whole):
    /// the losses show the bucket's depth, not its rate, and `rate_bps`
    /// (what the flow got) is only a lower bound on it.
    pub rate_unseen: bool,
    /// With `rate_unseen`: the highest rate that explains the losses as
    /// well ([`rate_high`]); the bucket's rate lies between `rate_bps` and
    /// one step of [`RATE_SEEN_MAX_SPREAD`] above this.
    pub rate_high_bps: Option<f64>,
    /// Every rate the scan tried explained the losses: `rate_high_bps` is
    /// where it stopped, not a bound.
    pub rate_high_open: bool,
}

/// Verdict codes.
pub mod code {
    pub const POLICED: &str = "policed";
    pub const NO_DATA: &str = "no_data";
    /// Fewer than two losses, too few lost or passed packets, or losses in
    /// too few round trips.
    pub const INSUFFICIENT_LOSS: &str = "insufficient_loss";
    /// No RTT sample and no minimum RTT: the thresholds cannot be set.
    pub const NO_RTT: &str = "no_rtt";
    /// Too many losses while the simulated bucket still held tokens.
    pub const LOSS_FILL_OUT_OF_RANGE: &str = "loss_fill_out_of_range";
    /// Too many packets passed while the simulated bucket was empty.
    pub const PASS_FILL_OUT_OF_RANGE: &str = "pass_fill_out_of_range";
    /// The RTT rose before too many losses: a queue (shaper, congestion).
    pub const INFLATED_RTT: &str = "inflated_rtt";
    /// detect_flow: no chunk had losses.
    pub const NO_LOSS: &str = "no_loss";
    /// detect_flow: chunks with losses, but not enough of them policed.
    pub const NOT_POLICED: &str = "not_policed";
    /// Set by the diagnosis, not this test: losses that spare spaced
    /// packets on a path far faster than the flow
    /// (`detect::policing::SMALL_BUCKET_PATH_RATIO`); no rate is measured.
    pub const SMALL_BUCKET: &str = "small_bucket";
    /// Set by the diagnosis, not this test: at the sender, packets sent in
    /// the fast rounds were lost no more often than the others
    /// (`detect::policing::loss_depends_on_rate`): not a bucket's drops.
    pub const RATE_INDEPENDENT: &str = "losses_independent_of_rate";
}

// ---- thresholds (docs/policing.md explains each) ---------------------------

/// Minimum lost and passed packets after the first loss.
const MIN_LOSS_SAMPLES: usize = 15;
const MIN_PASS_SAMPLES: usize = 15;
/// Minimum number of RTT-long slices with a loss.
const MIN_SLICES_WITH_LOSS: usize = 3;
/// Tolerances, in RTTs' worth of tokens at the estimated rate.
const LOSS_ZERO_RTTS: f64 = 2.0;
const PASS_ZERO_RTTS: f64 = 0.75;
/// Fractions of losses / passes allowed outside the tolerance.
const LOSS_OUT_OF_RANGE: f64 = 0.10;
const PASS_OUT_OF_RANGE: f64 = 0.03;
/// RTT inflation before a loss: above this multiple of the low (10th
/// percentile) RTT, at least the median, and at least this many ns above it.
const INFLATED_RTT_FACTOR: f64 = 1.3;
const INFLATED_RTT_MIN_NS: i64 = 10_000_000;
/// A chunk whose median RTT exceeds the path minimum by this factor (and
/// INFLATED_RTT_MIN_NS) has a standing queue: not a policer.
const QUEUE_RTT_FACTOR: f64 = 1.15;
/// Fraction of losses allowed to follow an inflated RTT.
const INFLATED_RTT_TOLERANCE: f64 = 0.2;
/// A drop-tail queue drops only when it is full, so the episodes its
/// overflow explains are those whose queue before them reached this share
/// of the largest queue before any episode (the queue's capacity as the
/// flow showed it). The queue before an episode is the largest interval
/// mean of the round trips before it, and a queue that fills steadily
/// through its last round averages half its peak there. Read for a token
/// bucket's fit (`detect::loss::Loss::mostly_after_full_queue`, and the
/// losses [`INFLATED_RTT_TOLERANCE`] counts): behind a bucket
/// with tokens left, a link a little faster than the policed rate keeps a
/// queue of the bucket's first burst while the bucket empties, and the
/// bucket's losses then come with a queue smaller than the one the link
/// held before (bench/independent: a 50 Mbit/s policer, a 400 KB bucket,
/// a 55 Mbit/s link: 12 ms of queue before the second episode, 31 ms
/// before the first).
pub const QUEUE_FULL_SHARE: f64 = 0.5;
/// Chunks are also split at idle gaps longer than this and this many RTTs.
const IDLE_SPLIT_NS: i64 = 500_000_000;
const IDLE_SPLIT_RTTS: i64 = 5;
/// Rate windows: at least this many RTTs long, this percentile of them,
/// and at least this many windows (else the first-to-last-loss rate).
const WINDOW_RTTS: i64 = 2;
const WINDOW_PERCENTILE: f64 = 0.9;
const WINDOW_MIN: usize = 3;
/// The passed packets may raise the rate to at most this multiple of the
/// window rate; passes that need more fail the pass test instead.
const PASS_BOUND_CAP: f64 = 1.5;
/// A fitted rate is stated only when no rate this many times higher
/// explains the losses as well ([`rate_high`]): the band within which a
/// prediction counts as holding (issue 40, 25%), so a rate the capture
/// cannot pin within it is said to be a lower bound.
pub const RATE_SEEN_MAX_SPREAD: f64 = 1.25;
/// An unseen rate's upper end is scanned up to this many steps of
/// [`RATE_SEEN_MAX_SPREAD`] (1.25^24, about 212 times the fit): a sender
/// whose segments leave together (TSO) earns a bucket no tokens inside a
/// burst at any rate, so nothing else ends the scan.
pub const RATE_SCAN_MAX_STEPS: usize = 24;
/// At most this many lost frames are kept as evidence.
const MAX_EVIDENCE: usize = 16;

/// One wire-sized data packet.
#[derive(Debug, Clone, Copy)]
struct Pkt {
    t_ns: i64,
    len: u32,
    frame: u64,
    lost: bool,
}

/// A bound on the pieces one super-segment is split into: 256 pieces of
/// the smallest MSS (536, RFC 9293 3.7.1) hold 137 KB, twice the 64 KiB of
/// a GSO segment.
const MAX_PIECES_PER_SEGMENT: u32 = 256;
/// Fewest RTT samples in a chunk for its own median and low percentile;
/// with fewer, the direction's minimum RTT stands for both.
const CHUNK_RTT_MIN_SAMPLES: usize = 3;
/// The chunk's RTT without its queue: this percentile of its samples.
const CHUNK_LOW_RTT_PERCENTILE: f64 = 0.1;

fn is_probe(d: &DataRec) -> bool {
    d.flags.has(Flags::KEEP_ALIVE) || d.flags.has(Flags::ZERO_WINDOW_PROBE)
}

/// Splits super-segments at the segment size (`record::segment_size`, the
/// path facts' `smss`) and marks lost packets: a packet is lost
/// when a later, non-spurious retransmission carries any of its bytes and it
/// was the latest transmission of them. Returns the packets and, for each
/// data record, the index of its first packet (plus one final entry).
fn packets(data: &[DataRec], smss: u32) -> (Vec<Pkt>, Vec<usize>) {
    let mss = smss.max(1);
    let mut pkts: Vec<Pkt> = Vec::with_capacity(data.len());
    let mut first = Vec::with_capacity(data.len() + 1);
    // Latest transmission of each byte range.
    let mut latest = Latest::default();
    for d in data {
        first.push(pkts.len());
        if d.len == 0 || is_probe(d) {
            continue;
        }
        let pieces = if d.len > mss { d.len.div_ceil(mss).min(MAX_PIECES_PER_SEGMENT) } else { 1 };
        let piece = d.len.div_ceil(pieces);
        let retx = d.is_retransmission();
        let spurious = d.flags.has(Flags::SPURIOUS_RETRANSMISSION);
        let mut off = 0u32;
        while off < d.len {
            let len = piece.min(d.len - off);
            let (s, e) = (d.seq + off as i64, d.seq + (off + len) as i64);
            let idx = pkts.len();
            if retx && !spurious {
                latest.mark_lost(s, e, &mut pkts);
            }
            latest.insert(s, e, idx);
            pkts.push(Pkt {
                t_ns: d.t_ns,
                len,
                frame: d.frame,
                lost: false,
            });
            off += len;
        }
    }
    first.push(pkts.len());
    (pkts, first)
}

/// The latest transmission of each byte: the first transmissions of new
/// data in a sorted list (appended in order: the common case, no tree
/// work), and what was sent again or out of order in a tree over them.
#[derive(Default)]
struct Latest {
    /// (start, end, packet) of first transmissions, in order, disjoint.
    first: Vec<(i64, i64, usize)>,
    /// Later transmissions: start -> (end, packet), disjoint; they shadow `first`.
    again: BTreeMap<i64, (i64, usize)>,
    /// The highest end in `again`: data starting below it goes there too.
    again_end: i64,
}

impl Latest {
    fn insert(&mut self, s: i64, e: i64, idx: usize) {
        if e <= s {
            return;
        }
        if self.first.last().is_none_or(|l| s >= l.1) && (self.again.is_empty() || s >= self.again_end) {
            self.first.push((s, e, idx));
        } else {
            insert_range(&mut self.again, s, e, idx);
            self.again_end = self.again_end.max(e);
        }
    }

    /// Marks lost every packet that was the latest to carry a byte of [s, e).
    fn mark_lost(&self, s: i64, e: i64, pkts: &mut [Pkt]) {
        let from = self.again.range(..=s).next_back().map(|(&k, _)| k).unwrap_or(s);
        for (_, &(end, i)) in self.again.range(from..e) {
            if end > s {
                pkts[i].lost = true;
            }
        }
        // First transmissions overlapping [s, e) where no later one covers
        // every byte of the overlap.
        let start = self.first.partition_point(|f| f.1 <= s);
        for &(fs, fe, i) in self.first[start..].iter().take_while(|f| f.0 < e) {
            let (lo, hi) = (fs.max(s), fe.min(e));
            if !covered(&self.again, lo, hi) {
                pkts[i].lost = true;
            }
        }
    }
}

/// Whether the disjoint intervals of `map` cover every byte of [lo, hi).
fn covered(map: &BTreeMap<i64, (i64, usize)>, lo: i64, hi: i64) -> bool {
    let mut at = lo;
    let from = map.range(..=lo).next_back().map(|(&k, _)| k).unwrap_or(lo);
    for (&k, &(end, _)) in map.range(from..hi) {
        if k > at {
            return false;
        }
        at = at.max(end);
        if at >= hi {
            return true;
        }
    }
    at >= hi
}

/// Records [s, e) as sent by packet `idx`, replacing what it overlaps.
fn insert_range(map: &mut BTreeMap<i64, (i64, usize)>, s: i64, e: i64, idx: usize) {
    if e <= s {
        return;
    }
    // Trim an interval starting before s that overlaps.
    if let Some((&k, &(end, i))) = map.range(..s).next_back() {
        if end > s {
            map.insert(k, (s, i));
            if end > e {
                map.insert(e, (end, i));
            }
        }
    }
    // Remove or trim intervals starting in [s, e).
    let inside: Vec<i64> = map.range(s..e).map(|(&k, _)| k).collect();
    for k in inside {
        let (end, i) = map.remove(&k).unwrap();
        if end > e {
            map.insert(e, (end, i));
        }
    }
    map.insert(s, (e, idx));
}

/// The queue in front of the losses: for each lost packet (at its capture
/// time), the smallest RTT among the samples of the round trip before it
/// (`samples`: (time, RTT) in time order; a standing queue delays every
/// packet of the round, a delayed ACK or a late wake-up only one), less the
/// path's own RTT. Returns the median over the losses that had a sample in
/// their round, and how many had. One sweep with a sliding-window minimum:
/// linear in losses and samples.
pub fn queue_at_losses(loss_times_ns: &[i64], samples: &[(i64, i64)], round_ns: i64, base_ns: i64) -> Option<(i64, usize)> {
    let mut times = loss_times_ns.to_vec();
    times.sort_unstable();
    let mut window: std::collections::VecDeque<(i64, i64)> = std::collections::VecDeque::new();
    let (mut next, mut q) = (0usize, Vec::new());
    for t in times {
        while next < samples.len() && samples[next].0 < t {
            let s = samples[next];
            while window.back().is_some_and(|b| b.1 >= s.1) {
                window.pop_back();
            }
            window.push_back(s);
            next += 1;
        }
        while window.front().is_some_and(|f| f.0 < t - round_ns) {
            window.pop_front();
        }
        if let Some(m) = window.front() {
            q.push((m.1 - base_ns).max(0));
        }
    }
    if q.is_empty() {
        return None;
    }
    q.sort_unstable();
    Some((q[q.len() / 2], q.len()))
}

/// RTT samples read at the start of a loss episode: the last this many
/// sent within a round before its first loss. Their median, so that one
/// delayed ACK (up to 40 ms on Linux, RFC 5681 section 4.2) does not move
/// it.
pub const EPISODE_EDGE_SAMPLES: usize = 3;

/// The queue the packets sent just before each loss episode's first loss
/// waited in (ns over `base_ns`), the lower median over the episodes, and
/// how many episodes had samples. Losses more than `round_ns` after the
/// previous one start an episode. Only the first loss is read: the
/// packets after it are acknowledged only once the hole is repaired, so
/// they give no sample (Karn), and the lower median keeps an episode whose
/// samples a late repair inflated from tipping it.
pub fn queue_at_episode_starts(loss_times_ns: &[i64], samples: &[(i64, i64)], round_ns: i64, base_ns: i64) -> Option<(i64, usize)> {
    let mut times = loss_times_ns.to_vec();
    times.sort_unstable();
    let (mut q, mut last) = (Vec::new(), i64::MIN);
    for t in times {
        let starts = last == i64::MIN || t - last > round_ns;
        last = t;
        if !starts {
            continue;
        }
        let end = samples.partition_point(|s| s.0 < t);
        let begin = samples[..end].partition_point(|s| s.0 < t - round_ns).max(end.saturating_sub(EPISODE_EDGE_SAMPLES));
        let mut edge: Vec<i64> = samples[begin..end].iter().map(|s| s.1).collect();
        if let Some(m) = lower_median(&mut edge) {
            q.push((m - base_ns).max(0));
        }
    }
    Some((lower_median(&mut q)?, q.len()))
}

/// The lower of the two middle values (the median of an odd count);
/// `None` when `v` is empty. Reorders `v`.
fn lower_median(v: &mut [i64]) -> Option<i64> {
    (!v.is_empty()).then(|| crate::rank::at_rank_by(v, (v.len() - 1) / 2, i64::cmp))
}

/// RTT samples of a chunk: (send time of the measured packet, RTT), in
/// order of send time.
pub(crate) fn rtt_samples(acks: &[AckRec]) -> Vec<(i64, i64)> {
    let mut v: Vec<(i64, i64)> = acks
        .iter()
        .filter(|a| a.rtt_us > 0)
        .map(|a| {
            let r = a.rtt_us as i64 * 1000;
            (a.t_ns - r, r)
        })
        .collect();
    // Nearly in order already (ACKs come in order, RTTs vary little): the
    // stable sort merges the runs it finds, where the unstable one
    // partitions as if at random. Equal pairs are the same value.
    v.sort();
    v
}

/// The nearest-rank percentile `p` of `v` (reordered), 0 when empty.
fn percentile(v: &mut [i64], p: f64) -> i64 {
    crate::rank::quantile_i64(v, p).unwrap_or(0)
}

fn median_f(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn verdict(code: &'static str, pkts: &[Pkt]) -> PolicerVerdict {
    let lost: Vec<&Pkt> = pkts.iter().filter(|p| p.lost).collect();
    PolicerVerdict {
        code,
        losses: lost.len() as u64,
        lost_frames: lost.iter().take(MAX_EVIDENCE).map(|p| p.frame).collect(),
        loss_times_ns: lost.iter().map(|p| p.t_ns).collect(),
        loss_span_s: match (lost.first(), lost.last()) {
            (Some(a), Some(b)) => Some((calc::s_from_ns(a.t_ns as f64), calc::s_from_ns(b.t_ns as f64))),
            _ => None,
        },
        packets: pkts.len() as u64,
        chunks: 1,
        lossy_chunks: (!lost.is_empty()) as u32,
        ..Default::default()
    }
}

/// Rate (bytes/ns) from windows between losses: for each loss, the bytes
/// that passed until the first loss at least `window_ns` later. The bucket
/// is empty at both ends, so a window in which it never overflowed passed
/// exactly the rate (within a packet); windows in which it overflowed (the
/// sender fell below the rate) pass less. A high percentile of the windows
/// is the rate.
fn window_rate(
    pkts: &[Pkt],
    cum: &[f64],
    losses: &[usize],
    window_ns: i64,
    mss: f64,
) -> Option<f64> {
    let mut est = Vec::new();
    let mut j = 0usize;
    for (k, &i) in losses.iter().enumerate() {
        j = j.max(k + 1);
        while j < losses.len() && pkts[losses[j]].t_ns - pkts[i].t_ns < window_ns {
            j += 1;
        }
        if j >= losses.len() {
            break;
        }
        let dt = (pkts[losses[j]].t_ns - pkts[i].t_ns) as f64;
        est.push((cum[losses[j]] - cum[i] - mss).max(0.0) / dt);
    }
    if est.len() < WINDOW_MIN {
        return None;
    }
    est.sort_unstable_by(|a, b| a.total_cmp(b));
    Some(est[((est.len() - 1) as f64 * WINDOW_PERCENTILE) as usize])
}

/// The lowest rate (bytes/ns) under which all but PASS_OUT_OF_RANGE of the
/// packets passed after the first loss fit in the bucket, counting from the
/// latest loss (empty bucket) and allowing `slack_ns` of tokens.
fn pass_rate_bound(pkts: &[Pkt], cum: &[f64], first_loss: usize, slack_ns: f64) -> f64 {
    let mut bounds = Vec::new();
    let (mut t_l, mut c_l) = (pkts[first_loss].t_ns, cum[first_loss]);
    for (k, p) in pkts.iter().enumerate().skip(first_loss) {
        if p.lost {
            (t_l, c_l) = (p.t_ns, cum[k]);
        } else {
            bounds.push((cum[k] + p.len as f64 - c_l) / ((p.t_ns - t_l) as f64 + slack_ns));
        }
    }
    if bounds.is_empty() {
        return 0.0;
    }
    let i = ((bounds.len() - 1) as f64 * (1.0 - PASS_OUT_OF_RANGE)).floor() as usize;
    crate::rank::at_rank_by(&mut bounds, i, f64::total_cmp)
}

/// The bytes passed above the tokens earned at `bytes_per_ns` up to the
/// first loss: (the largest excess over any stretch that ends there, the
/// envelope's burst; the excess over the stretch from the first packet,
/// the paper's). The bucket was empty at the first loss and every packet
/// before it passed, so the bucket holds at least the envelope's burst
/// (the (sigma, rho) envelope, Cruz, IEEE Trans. Inf. Theory 1991). A
/// bucket holds no more than its depth, so the rounds of slow start spent
/// below the rate earn it nothing; the paper's stretch from the first
/// packet counts them, and read the lab's buckets as 0 B.
fn first_loss_bursts(pkts: &[Pkt], cum: &[f64], first_loss: usize, bytes_per_ns: f64) -> (f64, f64) {
    let t0 = pkts[0].t_ns;
    let level = |i: usize| cum[i] - bytes_per_ns * (pkts[i].t_ns - t0) as f64;
    let lowest = (0..=first_loss).map(level).fold(f64::INFINITY, f64::min);
    (level(first_loss) - lowest, level(first_loss))
}

/// Whether the losses show the bucket's rate, not only its depth: they do
/// when no rate [`RATE_SEEN_MAX_SPREAD`] times the fitted one explains
/// them as well ([`losses_out_at`]). A token bucket of depth `burst`
/// refilling at `bytes_per_ns` holds, after a pause of `g`, what it held
/// before plus the rate times `g`, up to its depth. While pauses refill only part of
/// the bucket, what a burst passes grows with the rate, and a faster
/// bucket would have passed packets that were lost: the rate is seen. A
/// pause that refills the bucket whole leaves only the depth in store,
/// and a burst that then loses before it has run for the refill time
/// passed the depth at any rate above the fit: the fitted rate is only
/// what the flow got. (A bucket of five packets at 10 Mbit/s, drained by
/// each round trip's burst and refilled in the pause before the next,
/// fits 0.5 to 0.9 Mbit/s, the depth once a round trip.) The test is the
/// bucket's own: its depth, its refill, and a packet lost only when the
/// bucket held less than the packet.
///
/// Returns the highest rate (bytes/ns) that explains the losses as well as
/// the fitted one, in steps of [`RATE_SEEN_MAX_SPREAD`], at most
/// [`RATE_SCAN_MAX_STEPS`] of them (the bucket's true rate may lie up to
/// one step above it), and whether every step did (the scan's end bounds
/// nothing): the fitted rate itself (the rate is seen) when the next
/// step's bucket would have passed more of the lost packets than the
/// larger of the fit's count and [`LOSS_OUT_OF_RANGE`] of them.
fn rate_high(pkts: &[Pkt], bytes_per_ns: f64, burst: f64) -> (f64, bool) {
    if !(bytes_per_ns > 0.0 && burst > 0.0) {
        return (bytes_per_ns, false);
    }
    let lost = pkts.iter().filter(|p| p.lost).count();
    // The fit and the steps above it, each rate the one before times the
    // spread (as one step at a time computes it), their losses counted
    // SCAN_LANES rates a pass (`losses_out_at_lanes`) as the scan needs them.
    let mut rates = vec![bytes_per_ns];
    for k in 0..RATE_SCAN_MAX_STEPS {
        rates.push(rates[k] * RATE_SEEN_MAX_SPREAD);
    }
    let mut outs: Vec<usize> = Vec::with_capacity(rates.len());
    let count = |i: usize, outs: &mut Vec<usize>| {
        if i >= outs.len() {
            let end = (i + SCAN_LANES).min(rates.len());
            outs.extend_from_slice(&losses_out_at_lanes(pkts, &rates[i..end], burst)[..end - i]);
        }
        outs[i]
    };
    let allowed = count(0, &mut outs).max((LOSS_OUT_OF_RANGE * lost as f64) as usize);
    for i in 1..rates.len() {
        if count(i, &mut outs) > allowed {
            return (rates[i - 1], false);
        }
    }
    (rates[RATE_SCAN_MAX_STEPS], true)
}

/// Rates tested in one pass of [`rate_high`]: independent token buckets
/// run side by side, where one at a time each pass waits on its own
/// chain of floating-point steps (a bucket's level depends on the one
/// before it): on a 1 M-packet bulk capture `rate_high` ran 2% of
/// `diagnose`'s instructions (callgrind) and took 8% of its time (perf).
const SCAN_LANES: usize = 8;

/// [`losses_out_at`] for each rate of `rates` (at most [`SCAN_LANES`]) in
/// one pass: the same steps per bucket, so the same counts.
fn losses_out_at_lanes(pkts: &[Pkt], rates: &[f64], depth: f64) -> [usize; SCAN_LANES] {
    let mut out = [0usize; SCAN_LANES];
    let Some(first) = pkts.first() else { return out };
    let n = rates.len().min(SCAN_LANES);
    let mut r = [0.0; SCAN_LANES];
    r[..n].copy_from_slice(&rates[..n]);
    let (mut tokens, mut t) = ([depth; SCAN_LANES], first.t_ns);
    for p in pkts {
        let dt = (p.t_ns - t).max(0) as f64;
        t = t.max(p.t_ns);
        let len = f64::from(p.len);
        for k in 0..SCAN_LANES {
            let level = (tokens[k] + r[k] * dt).min(depth);
            tokens[k] = if !p.lost {
                (level - len).max(0.0)
            } else if level >= len {
                out[k] += 1;
                level - len
            } else {
                level
            };
        }
    }
    out
}

#[cfg(test)]
/// The lost packets a token bucket of depth `depth` refilling at
/// `bytes_per_ns` would have passed: full at the first packet, each passed
/// packet spending its length (never below empty: it did pass), and a
/// lost one that found the bucket holding at least its length counted
/// and spending it, as the bucket would have passed it. Packets out of
/// time order (a clock step back) earn nothing.
fn losses_out_at(pkts: &[Pkt], bytes_per_ns: f64, depth: f64) -> usize {
    let Some(first) = pkts.first() else { return 0 };
    let (mut tokens, mut t, mut out) = (depth, first.t_ns, 0usize);
    for p in pkts {
        tokens = (tokens + bytes_per_ns * (p.t_ns - t).max(0) as f64).min(depth);
        t = t.max(p.t_ns);
        let len = f64::from(p.len);
        if !p.lost {
            tokens = (tokens - len).max(0.0);
        } else if tokens >= len {
            out += 1;
            tokens -= len;
        }
    }
    out
}

/// The bytes passed (not lost) before each packet, and after the last.
fn passed_before(pkts: &[Pkt]) -> Vec<f64> {
    let mut cum = Vec::with_capacity(pkts.len() + 1);
    let mut c = 0f64;
    for p in pkts {
        cum.push(c);
        if !p.lost {
            c += f64::from(p.len);
        }
    }
    cum.push(c);
    cum
}

/// Detection on one chunk whose packets are already marked lost or passed.
fn detect_pkts(pkts: &[Pkt], acks: &[AckRec], min_rtt_ns: Option<i64>, smss: u32) -> PolicerVerdict {
    if pkts.is_empty() {
        return verdict(code::NO_DATA, pkts);
    }
    let mut v = verdict(code::INSUFFICIENT_LOSS, pkts);
    let Some(first_loss) = pkts.iter().position(|p| p.lost) else {
        return v;
    };
    let last_loss = pkts.iter().rposition(|p| p.lost).unwrap();
    if last_loss == first_loss {
        return v;
    }
    // (The paper also wants the first loss within the first 2 MB. A sender
    // that leaves slow start early, by HyStart on a jittery path, reaches
    // the rate later than that and is policed all the same; the fill tests
    // below decide.)
    let t_first = pkts[first_loss].t_ns;
    let t_last = pkts[last_loss].t_ns;
    if t_last <= t_first {
        return v;
    }

    // RTT: median and low percentile of the chunk's samples.
    let samples = rtt_samples(acks);
    let mut rtts: Vec<i64> = samples.iter().map(|s| s.1).collect();
    let (median_rtt, low_rtt) = if rtts.len() >= CHUNK_RTT_MIN_SAMPLES {
        (percentile(&mut rtts, 0.5), percentile(&mut rtts, CHUNK_LOW_RTT_PERCENTILE))
    } else if let Some(m) = min_rtt_ns.filter(|&m| m > 0) {
        (m, m)
    } else {
        v.code = code::NO_RTT;
        return v;
    };
    let median_rtt = median_rtt.max(1);
    // The path's RTT without queueing: the direction's minimum if known.
    let base_rtt = min_rtt_ns.filter(|&m| m > 0).unwrap_or(low_rtt).max(1);

    // Bytes passed before each packet.
    let cum = passed_before(pkts);
    let losses: Vec<usize> = (first_loss..=last_loss).filter(|&i| pkts[i].lost).collect();
    let mss = f64::from(smss.max(1));

    // Rate: the paper's (bytes passed between the first and the last loss)
    // is a lower bound when the bucket overflowed in between; windows of
    // a few RTTs between losses find the rate itself.
    let span_rate = (cum[last_loss] - cum[first_loss]) / (t_last - t_first) as f64;
    let window = window_rate(pkts, &cum, &losses, WINDOW_RTTS * median_rtt, mss);
    // Passed packets bound the rate from below: since the last loss (an
    // empty bucket) a policer passes at most the rate's worth of bytes,
    // plus the tolerance.
    let pass_bound = pass_rate_bound(pkts, &cum, first_loss, PASS_ZERO_RTTS * median_rtt as f64);
    let base = window.unwrap_or(span_rate).max(span_rate);
    let bytes_per_ns = base.max(pass_bound.min(PASS_BOUND_CAP * base));
    let rate_bps = bytes_per_ns * 8e9;
    let loss_zero = LOSS_ZERO_RTTS * median_rtt as f64 * bytes_per_ns;
    let pass_zero = PASS_ZERO_RTTS * median_rtt as f64 * bytes_per_ns;

    // Burst (first_loss_bursts): the envelope's, and the paper's.
    let (burst, start_fill) = first_loss_bursts(pkts, &cum, first_loss, bytes_per_ns);
    v.burst_bytes = Some(burst.max(0.0) as u64);
    v.start_fill_bytes = Some(start_fill.max(0.0) as u64);
    v.rate_bps = Some(rate_bps);

    let BucketFills { on_loss, on_pass, slices, after_queue } =
        bucket_fills(pkts, &cum, &samples, first_loss, bytes_per_ns, median_rtt, base_rtt);
    let n_loss = on_loss.len() + 1;
    let loss_out = on_loss.iter().filter(|&&t| t > loss_zero).count();
    let pass_out = on_pass.iter().filter(|&&t| t < -pass_zero).count();
    if slices < MIN_SLICES_WITH_LOSS
        || n_loss < MIN_LOSS_SAMPLES
        || on_pass.len() < MIN_PASS_SAMPLES
    {
        return v;
    }
    if loss_out as f64 > LOSS_OUT_OF_RANGE * n_loss as f64 {
        v.code = code::LOSS_FILL_OUT_OF_RANGE;
        return v;
    }
    if pass_out as f64 > PASS_OUT_OF_RANGE * on_pass.len() as f64 {
        v.code = code::PASS_FILL_OUT_OF_RANGE;
        return v;
    }
    // A standing queue through the chunk (a shaper, a congested link).
    let queued = median_rtt as f64 > QUEUE_RTT_FACTOR * base_rtt as f64
        && median_rtt - base_rtt >= INFLATED_RTT_MIN_NS;
    let (inflated, judged) = inflated_losses(&after_queue, first_episode_end(pkts, &losses, median_rtt), n_loss);
    if queued || inflated as f64 > INFLATED_RTT_TOLERANCE * judged as f64 {
        v.code = code::INFLATED_RTT;
        return v;
    }
    // Whether the losses pin the rate: read for a policed chunk only (a
    // few passes over its packets).
    // A bucket passes a packet only when it holds the packet's length
    // (RFC 2697: a packet conforms when the bucket holds its size), so it
    // is at least as deep as the largest packet it passed, whatever the fit
    // (a fit at the receiver can read no burst at all).
    let largest = pkts.iter().filter(|p| !p.lost).map(|p| f64::from(p.len)).fold(0.0, f64::max);
    let (high, open) = rate_high(pkts, bytes_per_ns, burst.max(largest));
    v.rate_unseen = high > bytes_per_ns;
    v.rate_high_bps = v.rate_unseen.then_some(high * 8e9);
    v.rate_high_open = v.rate_unseen && open;
    v.policed = true;
    // The burst reported is that bound too: an envelope below one packet
    // (a flow sent at the bucket's rate, every packet finding it nearly
    // empty) had read "a burst of 3 B" beside full-sized packets passed.
    v.burst_bytes = Some(burst.max(largest).max(0.0) as u64);
    v.code = code::POLICED;
    v
}

/// A bucket's tokens through a chunk from its first loss ([`bucket_fills`]):
/// at each loss after the first and at each passed packet; the number of
/// round trips that held a loss (slices); and each loss's time with the
/// queue (ns) in the round trip before it, when inflated.
struct BucketFills {
    on_loss: Vec<f64>,
    on_pass: Vec<f64>,
    slices: usize,
    after_queue: Vec<(i64, Option<i64>)>,
}

/// Simulates a bucket filled at `bytes_per_ns`, empty at every loss
/// (re-synced there, so an error in the rate cannot accumulate over the
/// chunk). `cum`: the bytes passed before each packet; `samples`: the
/// chunk's RTT samples (send time, RTT) in time order.
fn bucket_fills(pkts: &[Pkt], cum: &[f64], samples: &[(i64, i64)], first_loss: usize, bytes_per_ns: f64, median_rtt: i64, base_rtt: i64) -> BucketFills {
    let t_first = pkts[first_loss].t_ns;
    let mut on_loss = Vec::new();
    let mut on_pass = Vec::new();
    let mut slices = 1usize;
    let mut slice_end = t_first + median_rtt;
    // Each loss's time and the queue (ns) in the round trip before it,
    // when inflated (INFLATED_RTT_FACTOR, INFLATED_RTT_MIN_NS).
    let mut after_queue: Vec<(i64, Option<i64>)> = Vec::new();
    let mut si = 0usize;
    let mut last_sync_t = t_first;
    let mut last_sync_cum = cum[first_loss];
    for (k, p) in pkts.iter().enumerate().skip(first_loss) {
        let tokens = bytes_per_ns * (p.t_ns - last_sync_t) as f64 - (cum[k] - last_sync_cum);
        if p.lost {
            if k > first_loss {
                on_loss.push(tokens);
            }
            last_sync_t = p.t_ns;
            last_sync_cum = cum[k];
            if p.t_ns > slice_end {
                slice_end = p.t_ns + median_rtt;
                slices += 1;
            }
            // The RTT of the packets sent in the round trip before this
            // one: the smallest, as a standing queue delays them all while
            // a delayed ACK (a lone segment before a hole) delays one.
            while si < samples.len() && samples[si].0 < p.t_ns {
                si += 1;
            }
            let recent = samples[..si]
                .iter()
                .rev()
                .take_while(|s| p.t_ns - s.0 <= median_rtt)
                .map(|s| s.1)
                .min();
            let queue = recent.filter(|&r| r as f64 > INFLATED_RTT_FACTOR * base_rtt as f64 && r - base_rtt >= INFLATED_RTT_MIN_NS);
            after_queue.push((p.t_ns, queue.map(|r| r - base_rtt)));
        } else {
            on_pass.push(tokens);
        }
    }
    BucketFills { on_loss, on_pass, slices, after_queue }
}

/// The first loss episode of a chunk: the bucket was full when the chunk
/// began (the flow's start, or an idle gap that refilled it), and while it
/// holds tokens it passes the sender's bursts at line rate, so a queue
/// after it (a link only a little faster than the policed rate) fills
/// before the bucket runs empty, as surely as a queue before a full
/// drop-tail link does. RTT inflation before that first episode's losses
/// does not tell a queue's losses from a bucket's; once the bucket is
/// empty the policed rate is below the link's and the queue after it
/// drains. So when at least [`MIN_LOSS_SAMPLES`] losses come after that
/// episode (losses less than a round trip apart), they alone are held to
/// [`INFLATED_RTT_TOLERANCE`]. Measured (bench/independent, a 50 Mbit/s
/// policer with a 400 KB bucket behind a 55 Mbit/s link): 26 of 91 losses
/// followed a queue, all in the first episode.
///
/// Returns the time of the last loss of that episode.
fn first_episode_end(pkts: &[Pkt], losses: &[usize], round_ns: i64) -> Option<i64> {
    let mut end = pkts[*losses.first()?].t_ns;
    for &k in &losses[1..] {
        if pkts[k].t_ns - end > round_ns {
            break;
        }
        end = pkts[k].t_ns;
    }
    Some(end)
}

/// The losses that followed a queue, and how many losses they are a share
/// of: those after the chunk's first episode ([`first_episode_end`]) when
/// there are at least [`MIN_LOSS_SAMPLES`] of them, else all `n_loss`.
///
/// A loss follows a queue when the queue before it was inflated and
/// reached [`QUEUE_FULL_SHARE`] of the largest before any loss: a
/// drop-tail queue drops only when full, and the queue a link a little
/// faster than the policed rate kept of the bucket's first burst drains
/// slowly (at the difference of the two rates) into the next episodes.
/// Measured (bench/independent policer-50, one run in eight): 31 ms of
/// queue before the first episode, 13 ms before the second 0.2 s later,
/// which counted and read `inflated_rtt`.
fn inflated_losses(after_queue: &[(i64, Option<i64>)], first_episode_end: Option<i64>, n_loss: usize) -> (usize, usize) {
    let largest = after_queue.iter().filter_map(|l| l.1).max().unwrap_or(0);
    let full = |q: Option<i64>| q.is_some_and(|q| q as f64 >= QUEUE_FULL_SHARE * largest as f64);
    let later: Vec<Option<i64>> = after_queue.iter().filter(|l| first_episode_end.is_some_and(|t| l.0 > t)).map(|l| l.1).collect();
    if later.len() >= MIN_LOSS_SAMPLES {
        (later.iter().filter(|&&q| full(q)).count(), later.len())
    } else {
        (after_queue.iter().filter(|l| full(l.1)).count(), n_loss)
    }
}

/// Detection on one chunk (or a whole flow taken as one chunk).
pub fn detect(data: &[DataRec], acks: &[AckRec], min_rtt_ns: Option<i64>, smss: u32) -> PolicerVerdict {
    let (pkts, _) = packets(data, smss);
    detect_pkts(&pkts, acks, min_rtt_ns, smss)
}

/// Splits a direction into chunks (application responses): a new chunk
/// starts at the first data segment after the receiver sent data of its own
/// (a new request), or after an idle gap (longer than 500 ms and 5 RTTs)
/// with everything acknowledged. Returns (data range, ack range) pairs
/// covering both slices in order.
pub fn chunks(
    data: &[DataRec],
    acks: &[AckRec],
    min_rtt_ns: Option<i64>,
) -> Vec<(Range<usize>, Range<usize>)> {
    let idle = IDLE_SPLIT_NS.max(min_rtt_ns.unwrap_or(0).saturating_mul(IDLE_SPLIT_RTTS));
    // Boundaries: (data index, ack index) where each chunk starts.
    let mut starts: Vec<(usize, usize)> = vec![(0, 0)];
    let mut ai = 0usize;
    let mut request_pending = false;
    let mut high_end = i64::MIN;
    let mut high_ack = i64::MIN;
    let mut request_ack_index = 0usize;
    let mut prev_t: Option<i64> = None;
    for (di, d) in data.iter().enumerate() {
        // Acks up to this data segment, in capture order.
        while ai < acks.len() && acks[ai].frame < d.frame {
            let a = &acks[ai];
            high_ack = high_ack.max(a.ack);
            if a.payload > 0 && !request_pending {
                request_pending = true;
                request_ack_index = ai;
            }
            ai += 1;
        }
        let (last_di, _) = *starts.last().unwrap();
        if di > last_di {
            let new_request = request_pending;
            let gap = prev_t.is_some_and(|t| d.t_ns.saturating_sub(t) > idle);
            let quiet = gap && high_ack >= high_end && !d.is_retransmission();
            if new_request || quiet {
                let ack_start = if new_request { request_ack_index } else { ai };
                let last_ai = starts.last().unwrap().1;
                starts.push((di, ack_start.max(last_ai)));
            }
        }
        request_pending = false;
        prev_t = Some(d.t_ns);
        if d.len > 0 {
            high_end = high_end.max(d.end());
        }
    }
    let mut out = Vec::with_capacity(starts.len());
    for (k, &(d0, a0)) in starts.iter().enumerate() {
        let (d1, a1) = starts
            .get(k + 1)
            .copied()
            .unwrap_or((data.len(), acks.len()));
        out.push((d0..d1, a0..a1));
    }
    out
}

/// Detection for a whole data direction: per chunk, then aggregated. The
/// direction is policed when at least half of its chunks with losses (and
/// at least one) are; the rate is the median of the policed chunks' rates.
pub fn detect_flow(data: &[DataRec], acks: &[AckRec], min_rtt_ns: Option<i64>, smss: u32) -> PolicerVerdict {
    let (pkts, first) = packets(data, smss);
    let mut v = aggregate(&chunk_verdicts(data, acks, &pkts, &first, min_rtt_ns, smss));
    spent_since_start(&mut v, &pkts);
    v
}

/// The bucket's depth read from the flow's start to its first loss, at the
/// aggregated rate: a policed verdict keeps the larger of that and its
/// chunks' envelopes.
///
/// Each chunk's envelope ([`first_loss_bursts`]) bounds the bucket only by
/// the tokens it held when the chunk began. A bucket deeper than one
/// response passes the first response whole and is found part-refilled by
/// the next (the published lab's 2 MB bucket at 3 Mbit/s: 2 MB chunks,
/// one second apart); its losses then show only the refill. The bucket's
/// bound holds over any stretch that ends where it ran empty, across
/// chunks and the idle between them (tokens earned in the idle are
/// counted, the bucket's cap only lowers what it held): the passed bytes
/// less the tokens earned, from the flow's start (a bucket full, unless
/// other traffic spent it) to its first loss. Only the stretch to the
/// first loss is read: past it, an error in the rate accumulates with the
/// time.
fn spent_since_start(v: &mut PolicerVerdict, pkts: &[Pkt]) {
    let (true, Some(rate_bps)) = (v.policed, v.rate_bps) else { return };
    let Some(first_loss) = pkts.iter().position(|p| p.lost) else { return };
    let cum = passed_before(&pkts[..=first_loss]);
    let (from_start, _) = first_loss_bursts(pkts, &cum, first_loss, rate_bps / 8e9);
    let from_start = from_start.max(0.0) as u64;
    v.burst_bytes = Some(v.burst_bytes.map_or(from_start, |b| b.max(from_start)));
}

/// Per-chunk verdicts for a whole direction (losses are judged over the
/// whole direction, so a retransmission in a later chunk still counts).
pub fn detect_chunks(
    data: &[DataRec],
    acks: &[AckRec],
    min_rtt_ns: Option<i64>,
    smss: u32,
) -> Vec<PolicerVerdict> {
    let (pkts, first) = packets(data, smss);
    chunk_verdicts(data, acks, &pkts, &first, min_rtt_ns, smss)
}

/// Each chunk's verdict over the direction's packets (`packets`: `first`
/// maps a data record to its first packet).
fn chunk_verdicts(
    data: &[DataRec],
    acks: &[AckRec],
    pkts: &[Pkt],
    first: &[usize],
    min_rtt_ns: Option<i64>,
    smss: u32,
) -> Vec<PolicerVerdict> {
    chunks(data, acks, min_rtt_ns)
        .into_iter()
        .map(|(dr, ar)| detect_pkts(&pkts[first[dr.start]..first[dr.end]], &acks[ar], min_rtt_ns, smss))
        .collect()
}

/// The token-bucket test over several flows that may share one policer
/// (Flach et al. 2016, section 3: a policer often enforces one rate for all
/// of a customer's traffic, and each flow then sees a varying share of it).
/// Each flow's packets are marked lost as for the flow alone; the flows'
/// packets and ACKs are merged in time order, so the simulated bucket is
/// drained by every flow's passed bytes; the merged stream is cut into busy
/// periods at idle gaps of the whole group (the bucket refills in them, as
/// [`chunks`] cuts one flow), each period is tested, and the verdicts are
/// aggregated as for one flow.
pub fn detect_group(flows: &[(&[DataRec], &[AckRec], u32)], min_rtt_ns: Option<i64>) -> PolicerVerdict {
    let mut pkts: Vec<Pkt> = Vec::new();
    let mut acks: Vec<AckRec> = Vec::new();
    // The flows share a path: one segment size, the largest of theirs.
    let smss = flows.iter().map(|f| f.2).max().unwrap_or(1);
    for (data, a, flow_smss) in flows {
        pkts.extend(packets(data, *flow_smss).0);
        acks.extend_from_slice(a);
    }
    pkts.sort_by_key(|p| (p.t_ns, p.frame));
    acks.sort_by_key(|a| (a.t_ns, a.frame));
    let idle = IDLE_SPLIT_NS.max(min_rtt_ns.unwrap_or(0).saturating_mul(IDLE_SPLIT_RTTS));
    let mut per = Vec::new();
    let (mut start, mut ai) = (0usize, 0usize);
    for k in 1..=pkts.len() {
        if k < pkts.len() && pkts[k].t_ns - pkts[k - 1].t_ns <= idle {
            continue;
        }
        let end_t = pkts[k - 1].t_ns;
        let a0 = ai;
        while ai < acks.len() && (k == pkts.len() || acks[ai].t_ns <= end_t + idle / 2) {
            ai += 1;
        }
        per.push(detect_pkts(&pkts[start..k], &acks[a0..ai], min_rtt_ns, smss));
        start = k;
    }
    let mut v = aggregate(&per);
    spent_since_start(&mut v, &pkts);
    v
}

/// Aggregates per-chunk verdicts into one.
pub fn aggregate(per: &[PolicerVerdict]) -> PolicerVerdict {
    let mut v = PolicerVerdict {
        code: code::NO_DATA,
        ..Default::default()
    };
    let mut rates = Vec::new();
    let mut fills = Vec::new();
    for c in per {
        v.chunks += 1;
        v.packets += c.packets;
        v.losses += c.losses;
        if c.losses > 0 {
            v.lossy_chunks += 1;
        }
        v.loss_times_ns.extend_from_slice(&c.loss_times_ns);
        for &f in &c.lost_frames {
            if v.lost_frames.len() < MAX_EVIDENCE {
                v.lost_frames.push(f);
            }
        }
        if let Some((a, b)) = c.loss_span_s {
            v.loss_span_s = Some(match v.loss_span_s {
                Some((x, y)) => (x.min(a), y.max(b)),
                None => (a, b),
            });
        }
        if c.policed {
            v.policed_chunks += 1;
            rates.extend(c.rate_bps);
            fills.extend(c.start_fill_bytes.map(|b| b as f64));
        }
    }
    if v.packets == 0 {
        return v;
    }
    if v.lossy_chunks == 0 {
        v.code = code::NO_LOSS;
        return v;
    }
    // A chunk with too few losses (or no RTT) for the test never met its
    // preconditions: it is no evidence either way, so it does not count
    // against the chunks that were judged. (Each chunk after an idle
    // period restarts slow start into a refilled bucket and loses only a
    // few packets: counted as "not policed", they outvoted the chunks that
    // fit the bucket.)
    let undecided = per
        .iter()
        .filter(|c| c.losses > 0 && matches!(c.code, code::INSUFFICIENT_LOSS | code::NO_RTT))
        .count() as u32;
    if v.policed_chunks >= 1 && 2 * v.policed_chunks >= v.lossy_chunks - undecided {
        v.policed = true;
        v.code = code::POLICED;
        v.rate_bps = Some(median_f(&mut rates));
        // Each chunk's envelope is a lower bound on the bucket (its fill
        // when the chunk began); a chunk that began with the bucket full
        // (the flow's start, an idle longer than depth / rate) shows it
        // whole: the largest.
        v.burst_bytes = per.iter().filter(|c| c.policed).filter_map(|c| c.burst_bytes).max();
        v.start_fill_bytes = Some(median_f(&mut fills) as u64);
        // The rate is unseen when it was in most of the policed chunks.
        // Each unseen chunk bounds the bucket's rate from above: the lowest
        // of their highs; a bound at or below the stated rate (the median
        // of the chunks') pins it after all.
        let unseen: Vec<(f64, bool)> = per
            .iter()
            .filter(|c| c.policed && c.rate_unseen)
            .filter_map(|c| c.rate_high_bps.map(|h| (h, c.rate_high_open)))
            .collect();
        let bound = unseen.iter().copied().min_by(|a, b| a.0.total_cmp(&b.0));
        if let (Some((high, open)), Some(rate)) = (bound, v.rate_bps) {
            if 2 * unseen.len() as u32 > v.policed_chunks && high > rate {
                (v.rate_unseen, v.rate_high_bps, v.rate_high_open) = (true, Some(high), open);
            }
        }
    } else if per.len() == 1 {
        v.code = per[0].code;
    } else {
        v.code = code::NOT_POLICED;
    }
    v
}

/// Loss against spacing: wire packets sent at least `len / rate` after the
/// packet before them ("spaced": a token bucket refilling at the rate, or
/// a queue only this flow fills, has gained room for them since) against
/// packets sent closer together ("tight").
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spacing {
    pub spaced: u64,
    pub spaced_lost: u64,
    pub tight: u64,
    pub tight_lost: u64,
}

/// Counts [`Spacing`] over the data as sent, at `rate_bps` (the goodput).
pub fn loss_by_spacing(data: &[DataRec], rate_bps: f64, smss: u32) -> Spacing {
    let mut s = Spacing::default();
    if !(rate_bps > 0.0) {
        return s;
    }
    let (pkts, _) = packets(data, smss);
    let bytes_per_ns = rate_bps / 8e9;
    for w in pkts.windows(2) {
        let (prev, p) = (&w[0], &w[1]);
        if (p.t_ns - prev.t_ns) as f64 * bytes_per_ns >= p.len as f64 {
            s.spaced += 1;
            s.spaced_lost += p.lost as u64;
        } else {
            s.tight += 1;
            s.tight_lost += p.lost as u64;
        }
    }
    s
}

impl Spacing {
    /// P(X <= spaced_lost) for X ~ Binomial(spaced, p), p the loss rate of
    /// all packets: the chance of so few losses among the spaced packets if
    /// loss did not depend on the spacing (random loss does not: a packet's
    /// spacing is fixed before its fate).
    pub fn p_value(&self) -> f64 {
        let (n1, k1) = (self.spaced, self.spaced_lost);
        let n = n1 + self.tight;
        if n1 == 0 || n == 0 {
            return 1.0;
        }
        let p = (k1 + self.tight_lost) as f64 / n as f64;
        if p <= 0.0 {
            return 1.0;
        }
        if p >= 1.0 {
            return if k1 < n1 { 0.0 } else { 1.0 };
        }
        let (lp, lq) = (p.ln(), (-p).ln_1p());
        let mut lpmf = n1 as f64 * lq;
        let mut sum = lpmf.exp();
        for i in 0..k1 {
            lpmf += ((n1 - i) as f64).ln() - ((i + 1) as f64).ln() + lp - lq;
            sum += lpmf.exp();
        }
        sum.min(1.0)
    }

    /// The test's power: the p-value it would give had the spaced packets
    /// lost nothing at all, (1 - p)^spaced. Above the test's level, even
    /// loss that spares every spaced packet could not be told from random
    /// loss with this few packets and losses.
    pub fn p_value_if_none_lost(&self) -> f64 {
        let n = self.spaced + self.tight;
        if self.spaced == 0 || n == 0 {
            return 1.0;
        }
        let p = (self.spaced_lost + self.tight_lost) as f64 / n as f64;
        (1.0 - p).max(0.0).powf(self.spaced as f64)
    }

    /// Loss rate of the spaced packets over that of the tight ones.
    pub fn ratio(&self) -> f64 {
        let a = self.spaced_lost as f64 / self.spaced.max(1) as f64;
        let b = self.tight_lost as f64 / self.tight.max(1) as f64;
        if b > 0.0 { a / b } else { f64::INFINITY }
    }
}

#[cfg(test)]
mod spacing_tests {
    use super::*;

    /// The spacing test's power: a lab random-loss run (15 losses, 125
    /// spaced packets) could not have rejected random loss even had the
    /// spaced packets lost none; a policing-lab capture with 2% loss (1,372
    /// spaced packets) could, and its 28 spaced losses do not reject it.
    #[test]
    fn the_spacing_test_has_power_only_with_enough_spaced_packets_and_losses() {
        let few = Spacing { spaced: 125, spaced_lost: 0, tight: 2334, tight_lost: 15 };
        assert!(few.p_value_if_none_lost() > 0.4 && few.p_value() > 0.4, "{}", few.p_value_if_none_lost());
        let many = Spacing { spaced: 1372, spaced_lost: 28, tight: 5633, tight_lost: 113 };
        assert!(many.p_value_if_none_lost() < 1e-10);
        assert!(many.p_value() > 0.05);
        assert_eq!(Spacing::default().p_value_if_none_lost(), 1.0);
    }

    /// The two-tier record of the latest transmission marks the same packets
    /// lost as a byte-by-byte model, over random mixes of new data,
    /// retransmissions (some carrying new bytes too) and reordering.
    #[test]
    fn latest_transmission_matches_a_byte_model() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for _ in 0..200 {
            let mut latest = Latest::default();
            let mut bytes: Vec<Option<usize>> = vec![None; 6000];
            let mut pkts = Vec::new();
            let mut want = Vec::new();
            let mut high = 0i64;
            for idx in 0..120usize {
                let kind = rnd(10);
                let (s, e) = if kind < 6 || high < 50 {
                    let len = 1 + rnd(40) as i64;
                    (high, high + len)
                } else {
                    let s = rnd(high as u64) as i64;
                    (s, (s + 1 + rnd(60) as i64).min(3999))
                };
                high = high.max(e);
                let retx = kind >= 6 && kind < 9;
                pkts.push(Pkt { t_ns: 0, len: (e - s) as u32, frame: idx as u64, lost: false });
                want.push(false);
                if retx {
                    latest.mark_lost(s, e, &mut pkts);
                    for b in s..e {
                        if let Some(i) = bytes[b as usize] {
                            want[i] = true;
                        }
                    }
                }
                latest.insert(s, e, idx);
                for b in s..e {
                    bytes[b as usize] = Some(idx);
                }
            }
            let got: Vec<bool> = pkts.iter().map(|p| p.lost).collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn binomial_tail_matches_a_direct_sum() {
        // 100 spaced packets, none lost, against 5% loss overall: 0.95^100
        let s = Spacing { spaced: 100, spaced_lost: 0, tight: 900, tight_lost: 50 };
        assert!((s.p_value() - 0.95f64.powi(100)).abs() < 1e-12);
        // losses spread evenly: not unlikely at all
        let even = Spacing { spaced: 100, spaced_lost: 5, tight: 900, tight_lost: 45 };
        assert!(even.p_value() > 0.5);
        assert!((even.ratio() - 1.0).abs() < 1e-9);
        assert_eq!(Spacing::default().p_value(), 1.0);
    }
}

#[cfg(test)]
mod envelope_tests {
    use super::*;

    fn pkt(t_ms: i64, lost: bool) -> Pkt {
        Pkt { t_ns: t_ms * 1_000_000, len: 1000, frame: t_ms as u64, lost }
    }

    /// A sender below the rate for a while (slow start's early rounds, a
    /// recovery) earns no tokens beyond a full bucket: the envelope reads
    /// the burst of the stretch that spent it, where the paper's count from
    /// the first packet reads those rounds as tokens.
    #[test]
    fn the_envelope_burst_counts_only_what_a_full_bucket_passed() {
        // 1 byte/us = 8 Mbit/s; 10 packets 10 ms apart (1,000 bytes per
        // 10 ms, below the rate), then 50 packets back to back at 100 ms,
        // the last of them lost
        let mut pkts: Vec<Pkt> = (0..10).map(|i| pkt(i * 10, false)).collect();
        pkts.extend((0..50).map(|i| pkt(100, i == 49)));
        let mut cum = vec![0.0];
        for p in &pkts {
            cum.push(cum.last().unwrap() + if p.lost { 0.0 } else { p.len as f64 });
        }
        let first_loss = pkts.len() - 1;
        let rate = 1e-3; // bytes per ns
        // 49 packets passed in no time: the bucket held 49,000 bytes
        let (env, from_start) = first_loss_bursts(&pkts, &cum, first_loss, rate);
        assert!((env - 49_000.0).abs() < 1.0, "{env}");
        // counted from the first packet: 59,000 passed less 100 ms of tokens
        assert!(from_start < 0.0, "{from_start}");
    }

    /// A bucket deeper than the first response passes it whole; the next,
    /// after an idle too short to refill it, loses once the refill is
    /// spent. That chunk's envelope reads the refill; from the flow's start
    /// the depth reads whole.
    #[test]
    fn a_bucket_deeper_than_a_response_is_read_from_the_flows_start() {
        // 1 byte/us (8 Mbit/s), a 100,000-byte bucket: 80 packets at 0 ms
        // (20,000 bytes left), 30 ms idle (50,000), then 60 packets at
        // 30 ms, of which the 51st and later are lost
        let mut pkts: Vec<Pkt> = (0..80).map(|_| pkt(0, false)).collect();
        pkts.extend((0..60).map(|i| pkt(30, i >= 50)));
        let mut v = PolicerVerdict { policed: true, rate_bps: Some(8e6), burst_bytes: Some(50_000), ..Default::default() };
        spent_since_start(&mut v, &pkts);
        // 130,000 passed less 30,000 of tokens earned
        assert_eq!(v.burst_bytes, Some(100_000));
        // a verdict that is not policed keeps what it had
        let mut no = PolicerVerdict { policed: false, rate_bps: Some(8e6), burst_bytes: Some(50_000), ..Default::default() };
        spent_since_start(&mut no, &pkts);
        assert_eq!(no.burst_bytes, Some(50_000));
    }

    /// A bucket of 5 packets, refilled whole in the 100 ms between bursts
    /// of 10 back-to-back packets: every burst passes 5 and loses 5,
    /// whatever the rate above 5 packets a round trip. A sender above the
    /// rate all along, never pausing for a whole refill, shows the rate;
    /// so does one whose pauses refill part of the bucket.
    #[test]
    fn a_bucket_each_burst_finds_full_shows_its_size_not_its_rate() {
        let us = |t: i64, lost: bool| Pkt { t_ns: t * 1000, len: 1000, frame: t as u64, lost };
        let mut bursts = Vec::new();
        for k in 0..20i64 {
            bursts.extend((0..10).map(|i| us(k * 100_000 + i, i >= 5)));
        }
        // a fit of 6,000 bytes a round trip (0.48 Mbit/s; the retransmissions
        // of each round pass too) and a 5,000-byte burst: the pause of
        // 99.99 ms refills it whole at that rate and at any faster one
        let fit = 6_000.0 / 100e6;
        assert!(rate_high(&bursts, fit, 5_000.0).0 > 2.0 * fit);
        // one packet every 100 us at 80 Mbit/s into a 40 Mbit/s bucket of
        // 5,000 bytes: after the first 5 ms, every other packet is lost
        let steady: Vec<Pkt> = (0..1_000i64).map(|i| us(i * 100, i >= 50 && i % 2 == 1)).collect();
        assert_eq!(rate_high(&steady, 5e-3, 5_000.0), (5e-3, false));
        // bursts of 12 after pauses of 100 and 200 ms into a bucket of
        // 10,000 bytes at 40 bytes a ms: the pauses refill 4,000 and 8,000,
        // and what each burst passes grows with its pause; a bucket 1.25
        // times as fast would have passed one or two more of each burst
        let mut partial = Vec::new();
        let mut t = 0i64;
        for k in 0..20i64 {
            let pause = if k % 2 == 0 { 100_000 } else { 200_000 };
            t += pause;
            let passes = if k == 0 { 10 } else { pause / 25_000 };
            partial.extend((0..12).map(|i| us(t + i, i >= passes)));
        }
        assert_eq!(rate_high(&partial, 40.0 / 1e6, 10_000.0), (40.0 / 1e6, false));
    }

    /// The buckets run side by side count what each counts alone, for
    /// every number of lanes, on packets with losses, idle gaps and a
    /// clock step back.
    #[test]
    fn buckets_side_by_side_count_as_each_alone() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut t = 0i64;
        let pkts: Vec<Pkt> = (0..5_000u64)
            .map(|i| {
                t += (next() % 300_000) as i64 - if i == 2_000 { 50_000_000 } else { 0 };
                Pkt { t_ns: t, len: 500 + (next() % 1_000) as u32, frame: i, lost: next() % 7 == 0 }
            })
            .collect();
        let rates: Vec<f64> = (0..SCAN_LANES).map(|k| 1e-3 * 1.25f64.powi(k as i32)).collect();
        for n in 1..=SCAN_LANES {
            let lanes = losses_out_at_lanes(&pkts, &rates[..n], 20_000.0);
            for k in 0..n {
                assert_eq!(lanes[k], losses_out_at(&pkts, rates[k], 20_000.0), "lanes {n}, rate {k}");
            }
        }
    }

    #[test]
    fn the_queue_before_a_loss_is_the_smallest_rtt_of_the_round_before_it() {
        let ms = 1_000_000;
        // base 40 ms; the round before the loss at 1 s saw 45, 43 and a
        // delayed 80; the one at 2 s saw 40.2 and 40.1
        let samples = [(600 * ms, 45 * ms), (700 * ms, 80 * ms), (900 * ms, 43 * ms), (1_700 * ms, 40_200_000), (1_900 * ms, 40_100_000), (3_000 * ms, 40 * ms)];
        let (q, n) = queue_at_losses(&[2_000 * ms, 1_000 * ms, 5_000 * ms], &samples, 500 * ms, 40 * ms).unwrap();
        // 3 ms and 0.1 ms; the loss at 5 s has no sample in its round
        assert_eq!(n, 2);
        assert_eq!(q, 3 * ms);
        assert_eq!(queue_at_losses(&[100 * ms], &samples, 50 * ms, 40 * ms), None);
    }

    #[test]
    fn the_queue_at_an_episode_start_is_read_just_before_its_first_loss() {
        let ms = 1_000_000;
        // base 5 ms, a round of 5 ms. Episode 1 (losses at 100 and 101 ms):
        // a burst queued behind the samples at 96, 97, 98 and 99 ms (5.1,
        // 7, 9, 50: a delayed ACK), the median of the last three 9 ms.
        // Episode 2 (at 300 ms): 9.5, 9.8, 10 ms. Episode 3 (at 500 ms):
        // the only sample in its round is 6 ms; the one at 480 ms is older
        // than the round.
        let samples = [
            (96 * ms, 5_100_000),
            (97 * ms, 7 * ms),
            (98 * ms, 9 * ms),
            (99 * ms, 50 * ms),
            (297 * ms, 9_500_000),
            (298 * ms, 9_800_000),
            (299 * ms, 10 * ms),
            (480 * ms, 30 * ms),
            (499 * ms, 6 * ms),
        ];
        let (q, n) = queue_at_episode_starts(&[101 * ms, 100 * ms, 300 * ms, 500 * ms], &samples, 5 * ms, 5 * ms).unwrap();
        // rises 4, 4.8 and 1 ms: the lower median
        assert_eq!(n, 3);
        assert_eq!(q, 4 * ms);
        // no sample within a round before the loss: nothing read
        assert_eq!(queue_at_episode_starts(&[400 * ms], &samples, 5 * ms, 5 * ms), None);
    }

    #[test]
    fn a_queue_draining_after_the_first_burst_is_not_a_full_one() {
        let ms = 1_000_000;
        // policer-50: 31 ms before the first episode's losses, 13 ms
        // before the second's (the link's queue of the bucket's first
        // burst, draining), none after
        let mut losses: Vec<(i64, Option<i64>)> = (0..10).map(|k| (k * ms, Some(31 * ms))).collect();
        losses.extend((0..10).map(|k| (200 * ms + k * ms, Some(13 * ms))));
        losses.extend((0..10).map(|k| (2000 * ms + k * ms, None)));
        assert_eq!(inflated_losses(&losses, Some(9 * ms), 30), (0, 20));
        // a drop-tail queue, full before every episode
        let full: Vec<(i64, Option<i64>)> = losses.iter().map(|l| (l.0, Some(30 * ms))).collect();
        assert_eq!(inflated_losses(&full, Some(9 * ms), 30), (20, 20));
    }
}
