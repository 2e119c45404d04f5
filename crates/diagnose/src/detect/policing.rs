//! The policer: losses that fit a token bucket (`crate::policer`, after
//! Flach et al., "An Internet-Wide Analysis of Traffic Policing", SIGCOMM
//! 2016), adapted to the capture point, and when its verdict is the cause.

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

/// Runs the token-bucket test on the data as the sender sent it.
pub(crate) fn detect(inp: &Input) -> PolicerVerdict {
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
    let mut verdict = policer::detect_flow(data, acks, path.base_ns());
    if verdict.policed && !path.sender_side {
        // Arrival bursts at the receiver mislead the bucket's rate: use the
        // goodput between the first and the last loss (the paper's estimate).
        if let Some(rate) = verdict.loss_span_s.and_then(|(a, b)| goodput_between(&r.data, a, b)) {
            verdict.rate_bps = Some(rate);
        }
    }
    verdict
}

/// New bytes delivered between two times (s), as a rate.
pub(crate) fn goodput_between(data: &[DataRec], a: f64, b: f64) -> Option<f64> {
    let (a_ns, b_ns) = ((a * 1e9) as i64, (b * 1e9) as i64);
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
    (b_ns > a_ns && bytes > 0).then(|| bytes as f64 * 8.0 / ((b_ns - a_ns) as f64 / 1e9))
}

/// The token bucket is the cause: the test passed and the losses did not
/// mostly follow a queue (a drop-tail queue fills before it drops, a
/// policer drops without one), or the bucket had a burst a queue cannot fit.
pub(crate) fn explains(v: &PolicerVerdict, loss: &Loss, inp: &Input) -> bool {
    let burst = v.burst_bytes.unwrap_or(0);
    v.policed
        && (loss.episodes == 0
            || !loss.mostly_after_queue()
            || (!loss.deep_queue && burst >= POLICER_BURST_MIN_SEGMENTS * inp.path.smss as u64)
            || (inp.path.sender_side && loss.episodes < 2 && loss.inflated_before == 0 && burst > 0))
}

/// The path's own rate is not clearly above the bucket's: a shaper looks
/// the same, unless the bucket's burst is one no shaper could have passed.
pub(crate) fn like_a_shaper(v: &PolicerVerdict, inp: &Input) -> Option<(f64, f64)> {
    let (path, rate) = (v.group_path_bps.or(inp.path.path_bps)?, v.rate_bps?);
    if path >= POLICER_DISPERSION_MIN_RATIO * rate {
        return None;
    }
    // A shaper's output never runs above its rate: what it took in above
    // the rate waited in its queue, and showed as RTT. A bucket's burst
    // larger than the queue the RTT showed passed at a policer.
    let rtt = &inp.path.rtt;
    let queue_seen = rtt.base_ms.zip(rtt.p90_ms).map(|(b, p)| (p - b).max(0.0) / 1000.0 * rate / 8.0);
    let burst = v.burst_bytes.unwrap_or(0) as f64;
    let floor = (POLICER_BURST_MIN_SEGMENTS * inp.path.smss as u64) as f64;
    if queue_seen.is_some_and(|q| burst > (SHAPER_QUEUE_BURST_FACTOR * q).max(floor)) {
        return None;
    }
    Some((path, rate))
}

/// The path carries back-to-back packets at [`SMALL_BUCKET_PATH_RATIO`]
/// times the flow's goodput or more (the caller has seen the losses spare
/// the spaced packets): the pair rate.
pub(crate) fn small_bucket(inp: &Input) -> Option<f64> {
    let goodput = inp.ds.goodput_bps?;
    let base_ns = (inp.path.rtt.base_ms? * 1e6) as i64;
    let pairs = crate::path::pair_rate(inp.r, inp.path.sender_side, inp.path.smss, base_ns)?;
    (pairs >= SMALL_BUCKET_PATH_RATIO * goodput).then_some(pairs)
}

pub(crate) fn findings(v: &PolicerVerdict, primary: Cause, out: &mut Vec<Finding>) {
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
    let text = if shared {
        let conns: Vec<String> = v.group.iter().map(|(c, _)| c.to_string()).collect();
        format!(
            "these {} flows (connections {}) share a policer: their losses together fit one token bucket at {} with a burst of {}, while each flow alone saw only a varying share of the rate; {} losses where the group's bucket ran empty, without queueing before them",
            v.group.len(),
            conns.join(", "),
            fmt_rate(rate),
            fmt_bytes(v.burst_bytes.unwrap_or(0) as f64),
            v.losses
        )
    } else {
        format!(
            "losses fit a token bucket: rate {} with a burst of {}; {} losses where the bucket ran empty, without queueing before them",
            fmt_rate(rate),
            fmt_bytes(v.burst_bytes.unwrap_or(0) as f64),
            v.losses
        )
    };
    let connections: Vec<u64> = v.group.iter().map(|(c, _)| *c).collect();
    out.push(finding(
        "policer",
        text,
        &[
            ("rate_bps", num(rate)),
            ("burst_bytes", json!(v.burst_bytes)),
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
