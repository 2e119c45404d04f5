//! Losses and the queue before them. A drop-tail queue drops when it is
//! full, so the RTT rises before the loss (the queue builds for at least a
//! round trip, or a slow-start overshoot fills it within one); random loss
//! (a bad link, radio) comes without a queue. Jacobson's congestion
//! avoidance paper (SIGCOMM 1988) and the delay-based detectors after it
//! (TCP Vegas; Mathis et al.'s "pathdiag") read the same signal.

use tcpwhy_core::units::calc;
use super::{finding, num, Input, FINDING_MIN_SHARE};
use crate::model::{Evidence, Finding};
use crate::policer::{loss_by_spacing, Spacing};
use serde_json::json;
use tcpwhy_core::units::fmt_rate;
use tcpwhy_core::{Cause, Limit};

// The one queue test is a fact of the path (crate::path), kept under its
// names here too.
pub use crate::path::{queued_at, QUEUE_BEFORE_LOSS_FACTOR, QUEUE_BEFORE_LOSS_MIN_MS};
/// Round trips looked at before each loss episode.
pub const EPISODE_LOOKBACK_INTERVALS: usize = 3;
/// At the sender, the median of at least this many samples in the last
/// round trip before the first retransmission also counts (a delayed ACK
/// stretches a single sample).
pub const LAST_ROUND_MIN_SAMPLES: usize = 3;
/// A deep queue (a shaper's buffer): the RTT's 90th percentile at least
/// this factor above the path's own RTT (the smallest sample) and
/// [`DEEP_QUEUE_MIN_MS`] above it. A router
/// port's buffer is typically sized at about one RTT (the BDP rule of
/// thumb; Appenzeller et al., SIGCOMM 2004, for much less); a queue of
/// twice the path's RTT is a buffer far beyond the path, as token-bucket
/// shapers (tc tbf `latency`, carrier shaping) keep.
pub const DEEP_QUEUE_FACTOR: f64 = 3.0;
pub const DEEP_QUEUE_MIN_MS: f64 = 30.0;
/// Losses after a queue on a link delivering at least this share of the
/// path rate: the link was full (the bottleneck). A loss-based sender
/// whose only losses are the bottleneck's queue overflowing keeps the link
/// at least this busy: its window saws between W/2 and W (Reno, RFC 5681;
/// CUBIC keeps 0.7 W, RFC 9438) with W the path's BDP plus the buffer, so
/// even with no buffer it averages 3/4 of the link. Below it the flow got
/// less than its own overflows allow: the queue overflowed from bursts,
/// or the losses were not the queue's (random loss on a flow that filled
/// the queue between them).
pub const LINK_FULL_SHARE: f64 = 0.75;
/// Queue overflow on a link far from full, with the sender's buffer or
/// application holding it this share of the time: the sender's own bursts.
pub const SENDER_BURSTS_MIN_SHARE: f64 = 0.15;
/// Losses with the goodput at this share of the path rate or more are not
/// what limited the flow: without them it would gain at most 1/0.8 = 1.25
/// times, within the 25% a prediction is held to (prove's
/// `PREDICTION_TOLERANCE`), so the link is the limit. At the receiver,
/// where the queue before a loss cannot be seen, this holds of any loss;
/// at the sender, of losses without a queue before them: BBR, which does
/// not slow for a loss, ran at 86 to 95% of a 100 Mbit/s link under 0.5%
/// random loss in the lab, and was `random_loss` `high` there.
pub const LINK_FULL_DESPITE_LOSS_SHARE: f64 = 0.8;
/// Loss that spares the spaced packets: random loss (a bad link, radio)
/// strikes a packet whatever the gap before it, so among the packets sent
/// at least one packet time (at the goodput) after the one before, the
/// share lost is the overall share. Fewer losses there than a binomial
/// draw gives with probability below `SPACING_P_VALUE_MAX`, at under
/// `SPACING_RATIO_MAX` of the back-to-back packets' loss rate, is loss
/// that depends on the sending pattern: a token bucket that refilled in
/// the gap, or a shallow queue this flow fills. Bursty link loss
/// (Gilbert-Elliott) lowers the spaced rate too, so this only lowers the
/// confidence of `random_loss`, it names no other cause.
pub const SPACING_P_VALUE_MAX: f64 = 1e-3;
pub const SPACING_RATIO_MAX: f64 = 0.5;
pub use crate::policer::QUEUE_FULL_SHARE;
/// Evidence kept per finding.
const MAX_EVIDENCE: usize = 8;

/// Losses and what came before them.
#[derive(Debug, Default)]
pub(crate) struct Loss {
    /// Retransmitted segments (the receiver's view: segments that filled a hole).
    pub retransmissions: u64,
    pub data_segments: u64,
    pub first_frames: Vec<u64>,
    /// Runs of intervals with retransmissions.
    pub episodes: u32,
    /// Episodes with the RTT inflated before them.
    pub inflated_before: u32,
    /// Of those, the episodes whose queue before them reached
    /// [`QUEUE_FULL_SHARE`] of the largest before any episode.
    pub full_queue_before: u32,
    /// The first loss ended slow start with no inflated RTT seen: the
    /// window overshot what the path holds (a queue filled within a round).
    pub overshoot: bool,
    pub episode_ranges: Vec<(f64, f64)>,
    /// The RTT's tail far above the base: a deep (shaper's) queue.
    pub deep_queue: bool,
    /// The queue (ms) the packets sent just before each episode's first
    /// loss waited in, when it held the burst the losses fit at about the
    /// rate the flow got (`policing::queue_overflowed`): the losses are
    /// a drop-tail queue's overflow, however short the queue against the
    /// RTT's jitter floor ([`QUEUE_BEFORE_LOSS_MIN_MS`]).
    pub overflowed_queue_ms: Option<f64>,
    /// Losses among spaced and back-to-back packets: counted (at the
    /// sender, with a goodput) only when the verdict is `random_loss`, the
    /// one it can weaken ([`Loss::count_spacing`], which `decide` calls).
    pub(crate) spacing: std::cell::OnceCell<Option<Spacing>>,
}

impl Loss {
    pub fn detect(inp: &Input) -> Loss {
        let path = inp.path;
        let (iv, r) = (inp.iv, inp.r);
        let retx: Vec<&crate::record::DataRec> = r.data.iter().filter(|x| x.is_retransmission()).collect();
        let mut l = Loss {
            retransmissions: retx.len() as u64,
            data_segments: r.data.len() as u64,
            first_frames: retx.iter().take(MAX_EVIDENCE).map(|x| x.frame).collect(),
            ..Default::default()
        };
        let base_ns = path.base_ns();
        // The queue (ms) before each episode that followed one.
        let mut queues: Vec<f64> = Vec::new();
        for i in 0..iv.len() {
            if iv[i].retx_pkts == 0 || (i > 0 && iv[i - 1].retx_pkts > 0) {
                continue;
            }
            l.episodes += 1;
            if l.episode_ranges.len() < MAX_EVIDENCE {
                l.episode_ranges.push((calc::s_from_ns(iv[i].start_ns as f64), calc::s_from_ns((iv[i].start_ns + path.width_ns()) as f64)));
            }
            let lo = i.saturating_sub(EPISODE_LOOKBACK_INTERVALS);
            let mut m = calc::ms_from_us(iv[lo..i].iter().filter_map(|x| x.rtt_mean_us()).fold(0.0, f64::max));
            // At the sender, also the last samples before the first
            // retransmission: a queue filled by a slow-start overshoot
            // shows only in the round trip that ends in the loss.
            if path.sender_side {
                if let (Some(t), Some(w)) = (retx.iter().find(|x| x.t_ns >= iv[i].start_ns).map(|x| x.t_ns), base_ns) {
                    let j = r.acks.partition_point(|a| a.t_ns < t - w);
                    let mut last: Vec<f64> = r.acks[j..]
                        .iter()
                        .take_while(|a| a.t_ns < t)
                        .filter(|a| a.rtt_us > 0)
                        .map(|a| calc::ms_from_us(a.rtt_us as f64))
                        .collect();
                    last.sort_by(f64::total_cmp);
                    if last.len() >= LAST_ROUND_MIN_SAMPLES {
                        m = m.max(last[last.len() / 2]);
                    }
                }
            }
            // Against the path's own RTT (the smallest sample: a low
            // percentile already carries a standing queue).
            if let (Some(b), true) = (path.min_rtt_ms(), m > 0.0) {
                if queued_at(m, b) {
                    l.inflated_before += 1;
                    queues.push(m - b);
                } else if l.episodes == 1 && i >= 1 && inp.states[i.saturating_sub(2)..i].contains(&Limit::SlowStart) {
                    l.overshoot = true;
                }
            }
        }
        let largest = queues.iter().copied().fold(0.0, f64::max);
        l.full_queue_before = queues.iter().filter(|&&q| q >= QUEUE_FULL_SHARE * largest).count() as u32;
        // Against the path's own RTT as the episodes are: behind a deep
        // standing queue the base percentile holds much of the queue
        // (bench/independent: a 240 ms tbf queue at 30 ms, base 86.6 ms,
        // p90 259.8 ms, 3.0 times it; the smallest sample 30.5 ms).
        l.deep_queue = match (path.min_rtt_ms().or(path.rtt.base_ms()), path.rtt.p90_ms()) {
            (Some(b), Some(p)) => p >= DEEP_QUEUE_FACTOR * b && p - b >= DEEP_QUEUE_MIN_MS,
            _ => false,
        };
        l
    }

    /// Episodes that followed a queue: RTT inflated, or slow start overshooting.
    pub fn queue_before(&self) -> u32 {
        self.inflated_before + self.overshoot as u32
    }

    /// At least half the episodes, and at least one, are these.
    fn mostly(&self, episodes: u32) -> bool {
        self.episodes > 0 && episodes * 2 >= self.episodes
    }

    /// At least half the episodes followed a queue.
    pub fn mostly_after_queue(&self) -> bool {
        self.overflowed_queue_ms.is_some() || self.mostly(self.queue_before())
    }

    /// As [`Loss::mostly_after_queue`], with only the episodes after a
    /// full queue ([`QUEUE_FULL_SHARE`]): those a drop-tail queue's
    /// overflow explains.
    pub fn mostly_after_full_queue(&self) -> bool {
        self.overflowed_queue_ms.is_some() || self.mostly(self.full_queue_before + self.overshoot as u32)
    }

    /// The queue side was tipped by the slow-start overshoot alone: the
    /// episodes after it, read on their own, did not mostly follow a
    /// queue. An overshoot ends in loss wherever the window outgrows what
    /// the path holds, a drop-tail queue or a token bucket whose burst is
    /// smaller than slow start's last round, so it is no evidence for the
    /// one against the other; only the RTT before the later episodes is.
    /// With the overshoot the only episode, the count rests on it alone.
    pub fn queue_rests_on_overshoot(&self) -> bool {
        // the episodes after the overshoot (the first)
        let later = self.episodes.saturating_sub(1);
        self.overshoot && self.mostly_after_queue() && (later == 0 || self.inflated_before * 2 < later)
    }

    /// Counts the losses of spaced and back-to-back packets, once (one
    /// pass over the packets, as the policer test makes).
    pub fn count_spacing(&self, inp: &Input) {
        self.spacing.get_or_init(|| {
            if inp.path.sender_side && self.retransmissions > 0 {
                inp.ds.goodput_bps.map(|g| loss_by_spacing(&inp.r.data, g, inp.path.smss))
            } else {
                None
            }
        });
    }

    /// The spacing count, when it was made.
    pub fn spacing(&self) -> Option<Spacing> {
        self.spacing.get().copied().flatten()
    }

    /// The losses spared the spaced packets (see [`SPACING_P_VALUE_MAX`]).
    pub fn spares_spaced_packets(&self) -> bool {
        self.spacing().is_some_and(|s| s.p_value() < SPACING_P_VALUE_MAX && s.ratio() < SPACING_RATIO_MAX)
    }

    /// The spacing test could have rejected random loss: had the losses
    /// spared every spaced packet, its p-value would be under
    /// [`SPACING_P_VALUE_MAX`]. Without that power, `random_loss` rests on
    /// the absence of a queue alone, which a policer's small bucket or any
    /// loss at the tail of the bursts also gives.
    pub fn spacing_could_tell(&self) -> bool {
        self.spacing().is_some_and(|s| s.p_value_if_none_lost() < SPACING_P_VALUE_MAX)
    }

    /// (spaced packets, overall loss rate) of the spacing count.
    pub fn spacing_counts(&self) -> Option<(u64, f64)> {
        self.spacing().map(|s| {
            let n = s.spaced + s.tight;
            (s.spaced, if n == 0 { 0.0 } else { (s.spaced_lost + s.tight_lost) as f64 / n as f64 })
        })
    }

    pub fn rate(&self) -> f64 {
        if self.data_segments == 0 { 0.0 } else { self.retransmissions as f64 / self.data_segments as f64 }
    }

    /// What the losses say about the path.
    pub fn cause(&self, inp: &Input) -> Cause {
        let path_full = |share: f64| inp.path.path_bps().zip(inp.link_used_bps()).map(|(p, g)| g >= share * p);
        let (sb, sa) = (inp.shares.send_buffer, inp.shares.sender_application);
        if self.mostly_after_queue() {
            if self.deep_queue {
                Cause::Shaper
            } else if path_full(LINK_FULL_SHARE).unwrap_or(true) {
                Cause::BottleneckLink
            } else if sb + sa >= SENDER_BURSTS_MIN_SHARE {
                // Queue overflow on a link far from full: the sender's own
                // bursts, released by its buffer or its application.
                if sb >= sa { Cause::SendBuffer } else { Cause::SenderApplication }
            } else {
                Cause::CongestionLoss
            }
        } else if path_full(LINK_FULL_DESPITE_LOSS_SHARE).unwrap_or(false) {
            Cause::BottleneckLink
        } else {
            Cause::RandomLoss
        }
    }

    pub fn findings(&self, inp: &Input, out: &mut Vec<Finding>) {
        if self.retransmissions > 0 {
            let flags = &inp.ds.flags;
            out.push(finding(
                "retransmissions",
                format!(
                    "{} retransmitted segments ({:.2}% of data segments, {} fast retransmissions) in {} loss episodes; RTT was inflated before {} of them{}{}{}",
                    self.retransmissions,
                    self.rate() * 100.0,
                    flags.fast_retransmission,
                    self.episodes,
                    self.inflated_before,
                    if self.overshoot { "; the first ended slow start (the window overshot the path)" } else { "" },
                    match self.overflowed_queue_ms {
                        Some(q) => format!("; the packets sent just before each episode's first loss had waited {q:.1} ms in a queue that drained at about the rate the flow got: a drop-tail queue overflowing"),
                        None => String::new(),
                    },
                    match self.spacing() {
                        Some(sp) if self.spares_spaced_packets() => format!(
                            "; {} of {} packets sent after a pause were lost against {:.2}% of those sent back to back: the loss depends on how the sender sends",
                            sp.spaced_lost,
                            sp.spaced,
                            sp.tight_lost as f64 / sp.tight.max(1) as f64 * 100.0
                        ),
                        _ => String::new(),
                    }
                ),
                &[
                    ("retransmitted_segments", json!(self.retransmissions)),
                    ("retransmission_rate", num(self.rate())),
                    ("fast_retransmissions", json!(flags.fast_retransmission)),
                    ("lost_segments", json!(flags.lost_segment)),
                    ("episodes", json!(self.episodes)),
                    ("inflated_before", json!(self.inflated_before)),
                    ("slow_start_overshoot", json!(self.overshoot)),
                    ("overflowed_queue_ms", json!(self.overflowed_queue_ms)),
                    ("spaced_packets", json!(self.spacing().map(|s| s.spaced))),
                    ("spaced_lost", json!(self.spacing().map(|s| s.spaced_lost))),
                    ("back_to_back_packets", json!(self.spacing().map(|s| s.tight))),
                    ("back_to_back_lost", json!(self.spacing().map(|s| s.tight_lost))),
                ],
                Evidence { frames: self.first_frames.clone(), time_ranges: self.episode_ranges.clone() },
            ));
        }
    }

    /// The queue, when a queue is the story.
    pub fn queue_finding(&self, inp: &Input, primary: Cause, out: &mut Vec<Finding>) {
        let bl = inp.shares.bottleneck_link;
        if (bl > FINDING_MIN_SHARE || self.deep_queue) && matches!(primary, Cause::BottleneckLink | Cause::Shaper | Cause::CongestionLoss) {
            let (rtt, path_bps) = (&inp.path.rtt, inp.path.path_bps());
            out.push(finding(
                "queueing",
                format!(
                    "RTT rose from {:.1} ms to {:.1} ms (p90) as a queue built at the bottleneck{}",
                    rtt.base_ms().unwrap_or(0.0),
                    rtt.p90_ms().unwrap_or(0.0),
                    path_bps.map_or(String::new(), |p| format!("; trains arrive at {}", fmt_rate(p)))
                ),
                &[("base_rtt_ms", json!(rtt.base_ms())), ("p90_rtt_ms", json!(rtt.p90_ms())), ("path_rate_bps", json!(path_bps)), ("share", num(bl))],
                Evidence { frames: vec![], time_ranges: inp.runs_of(Limit::BottleneckLink) },
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::{testkit, Shares};
    use crate::limits::Interval;

    fn with_rtt(mut it: Interval, rtt_ms: f64) -> Interval {
        it.rtt_sum_us = rtt_ms * 1000.0;
        it.rtt_n = 1;
        it
    }

    fn detect(iv: &[Interval], states: &[Limit], p90_ms: f64) -> (Loss, Cause) {
        let cs = testkit::summary();
        let mut path = testkit::path(false, 20.0);
        path.rtt.p90 = Some(tcpwhy_core::units::Duration::from_millis_f64(p90_ms));
        let r = testkit::records();
        let inp = Input { cs: &cs, d: 0, ds: &cs.directions[0], peer: &cs.directions[1], r: &r, path: &path, iv, states, shares: Shares::of(states) };
        let l = Loss::detect(&inp);
        let c = l.cause(&inp);
        (l, c)
    }

    #[test]
    fn losses_after_the_rtt_rose_are_a_queue_and_without_are_random() {
        // 20 ms path; the RTT climbs to 40 ms before each loss
        let mut iv: Vec<Interval> = testkit::flat(12, 20, 20_000_000).into_iter().map(|x| with_rtt(x, 20.0)).collect();
        for k in [3usize, 7, 11] {
            iv[k - 1] = with_rtt(iv[k - 1].clone(), 40.0);
            iv[k].retx_pkts = 1;
        }
        let states = vec![Limit::CongestionWindow; 12];
        let (l, c) = detect(&iv, &states, 30.0);
        assert_eq!((l.episodes, l.inflated_before), (3, 3));
        assert_eq!(c, Cause::BottleneckLink, "no path rate known: a full link is assumed");
        // the same losses with a flat RTT: nothing queued before them
        let flat: Vec<Interval> = iv.iter().map(|x| with_rtt(x.clone(), 21.0)).collect();
        let (l, c) = detect(&flat, &states, 21.0);
        assert_eq!((l.episodes, l.inflated_before), (3, 0));
        assert_eq!(c, Cause::RandomLoss);
    }

    /// The measured pattern behind [`QUEUE_FULL_SHARE`] (bench/independent,
    /// a 50 Mbit/s policer with a 400 KB bucket behind a 55 Mbit/s link, 40
    /// ms): 31 ms of queue before the first episode, 12 ms before the
    /// second (what the bucket's first burst left while it emptied), none
    /// before the last two. Two of four followed a queue, one a full one.
    #[test]
    fn only_episodes_after_a_full_queue_are_a_drop_tail_queues() {
        let mut iv: Vec<Interval> = testkit::flat(20, 20, 20_000_000).into_iter().map(|x| with_rtt(x, 20.0)).collect();
        for (k, rtt) in [(4usize, 51.0), (8, 32.0), (13, 20.5), (18, 21.0)] {
            iv[k - 1] = with_rtt(iv[k - 1].clone(), rtt);
            iv[k].retx_pkts = 5;
        }
        let states = vec![Limit::CongestionWindow; 20];
        let (l, _) = detect(&iv, &states, 22.0);
        assert_eq!((l.episodes, l.inflated_before, l.full_queue_before), (4, 2, 1));
        assert!(l.mostly_after_queue() && !l.mostly_after_full_queue());
        // A drop-tail queue: every episode at the queue's capacity.
        for k in [8usize, 13, 18] {
            iv[k - 1] = with_rtt(iv[k - 1].clone(), 48.0);
        }
        let (l, _) = detect(&iv, &states, 45.0);
        assert_eq!((l.inflated_before, l.full_queue_before), (4, 4));
        assert!(l.mostly_after_full_queue());
    }

    #[test]
    fn a_queue_three_times_the_path_is_a_shaper() {
        let mut iv: Vec<Interval> = testkit::flat(6, 20, 20_000_000).into_iter().map(|x| with_rtt(x, 90.0)).collect();
        iv[5].retx_pkts = 2;
        let states = vec![Limit::BottleneckLink; 6];
        let (l, c) = detect(&iv, &states, 90.0);
        assert!(l.deep_queue);
        assert_eq!(c, Cause::Shaper);
    }
}
