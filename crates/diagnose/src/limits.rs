//! Limit attribution over time: the data direction cut into intervals of
//! about one RTT, each attributed to one state, as the kernel's chrono stats
//! (tcpi_busy/rwnd_limited/sndbuf_limited) and Web100's SndLimTime* do,
//! extended with the states a capture can tell apart.

use tcpwhy_core::units::calc;
use crate::record::{AckRec, DataRec};
use tcpwhy_flow::Flags;

/// A drain is the application's only when no ACK released the data after
/// it: new data sent within this time of the ACK that acknowledged
/// everything, with no data from the receiver in between, left as that ACK
/// freed room (the send buffer holds every unacknowledged byte, and a
/// writer blocked on it wakes when an ACK frees it: `sk_stream_write_space`),
/// and an application with nothing to send is not woken by a TCP ACK. The
/// same 100 µs as an ACK-clocked sender's (`congestion::ACK_CLOCK_MAX_NS`:
/// the kernel's processing, tens of µs). Measured at the sender
/// (bench/independent, tcp_wmem max 64 KiB, 25 ms, no rate limit): each
/// round trip's 64 KiB crossed the path in under a millisecond, the flight
/// fell to nothing, and new data followed the ACK 11 to 42 µs later (10th
/// to 90th percentile); it read `sender_application` `high`.
pub const REFILL_ON_ACK_MAX_NS: i64 = 100_000;

/// The ACK that acknowledged everything sent: its interval, its time, and
/// whether the receiver has sent data since.
struct Drain {
    iv: usize,
    ack_ns: i64,
    reverse: bool,
}

/// Per-interval measurements.
#[derive(Debug, Clone, Default)]
pub struct Interval {
    pub start_ns: i64,
    /// New (never sent before) payload bytes sent in the interval.
    pub new_bytes: u64,
    pub data_pkts: u32,
    pub retx_pkts: u32,
    /// Sender side: largest bytes in flight after a data segment.
    pub max_flight: u64,
    /// Smallest (window - in flight) gap seen after a data segment (sender side).
    pub min_gap: Option<i64>,
    /// Advertised window in effect: largest and smallest during the interval.
    pub win_max: u64,
    pub win_min: u64,
    pub zero_window: bool,
    pub window_full_flag: bool,
    /// All data sent was acknowledged at some moment while more came later.
    pub drained: bool,
    /// The receiver sent application data back.
    pub reverse_data: bool,
    pub rtt_sum_us: f64,
    pub rtt_n: u32,
    pub rtt_max_us: u32,
    /// Smallest RTT sample (0: none).
    pub rtt_min_us: u32,
    /// Highest sequence sent by the end of the interval (relative).
    pub snd_nxt: i64,
    /// Highest ACK by the end of the interval.
    pub acked: i64,
    /// Window in effect at the end of the interval.
    pub win_end: u64,
    /// Bytes newly acknowledged during the interval.
    pub acked_bytes: u64,
    /// ACKs that acknowledged new data during the interval.
    pub advancing_acks: u32,
    /// Segments from the receiver during the interval (duplicate ACKs and
    /// window updates included).
    pub acks: u32,
    /// Time the window an ACK of this interval offered stayed below
    /// [`WINDOW_DIPPED_SHARE`] of the largest offered before it, until the
    /// next ACK (or the interval's end).
    pub dipped_ns: i64,
    /// When the interval's first and last segments of new data were
    /// captured (None: no new data).
    pub new_data_span: Option<(i64, i64)>,
}

impl Interval {
    pub fn rtt_mean_us(&self) -> Option<f64> {
        (self.rtt_n > 0).then(|| self.rtt_sum_us / self.rtt_n as f64)
    }
}

/// A window the sender filled that stayed below this share of the largest
/// it had already offered, for [`crate::states::WINDOW_DIPPED_MIN_SHARE`]
/// of the round trip, held data its reader had not taken. Linux offers the
/// buffer's free space (__tcp_select_window) and never moves the right edge
/// back, so the window falls only by bytes that arrived and sit unread. A
/// buffer too small for the path, read at once, offers the same window at
/// every ACK (the lab's receive-window runs: the smallest window of every
/// window-limited round trip equal to the largest). A reader paced a little
/// below what the window allows lets it fall until it reads (the sweep's
/// slow readers at 2.8 to 2.9 Mbit/s behind a 79 KiB window on 130 to 146
/// ms: ACKs of 33 to 43 KiB offering 35 to 48 KiB, reopened to 79 KiB 20 to
/// 65 ms later), where its largest value never shrinks
/// ([`crate::states::WINDOW_SHRUNK_SHARE`]).
pub const WINDOW_DIPPED_SHARE: f64 = 0.75;

/// Builds the intervals of one direction. `sender_side`: in-flight values
/// and data-to-ACK RTTs describe the sender (capture near the sender).
pub fn build_intervals(
    data: &[DataRec],
    acks: &[AckRec],
    width_ns: i64,
    start_ns: i64,
    end_ns: i64,
    sender_side: bool,
) -> Vec<Interval> {
    let n = (((end_ns - start_ns).max(1) + width_ns - 1) / width_ns).max(1) as usize;
    let mut iv: Vec<Interval> = (0..n)
        .map(|i| Interval {
            start_ns: start_ns + i as i64 * width_ns,
            snd_nxt: i64::MIN,
            acked: i64::MIN,
            ..Default::default()
        })
        .collect();
    let idx = |t: i64| -> usize { (((t - start_ns).max(0)) / width_ns).min(n as i64 - 1) as usize };
    // Merge data and ACKs in time order.
    let (mut i, mut j) = (0usize, 0usize);
    let mut window: Option<u64> = None;
    let mut win_peak: u64 = 0;
    let mut snd_nxt: i64 = i64::MIN;
    let mut acked: i64 = i64::MIN;
    let mut drain: Option<Drain> = None;
    while i < data.len() || j < acks.len() {
        let take_data = j >= acks.len() || (i < data.len() && data[i].t_ns <= acks[j].t_ns);
        if take_data {
            let d = &data[i];
            i += 1;
            if d.t_ns < start_ns || d.t_ns >= end_ns {
                snd_nxt = snd_nxt.max(d.end());
                continue;
            }
            let k = idx(d.t_ns);
            // A drain followed by new data: the sender had nothing in flight.
            if let Some(dr) = drain.take() {
                let released_by_ack = !dr.reverse && d.t_ns - dr.ack_ns <= REFILL_ON_ACK_MAX_NS;
                if d.end() > snd_nxt && !released_by_ack {
                    iv[dr.iv].drained = true;
                }
            }
            let echo = if sender_side { None } else { echo_rtt_ns(&acks[..j], d) };
            add_data(&mut iv[k], d, &mut snd_nxt, window, echo);
        } else {
            let a = &acks[j];
            j += 1;
            let w = a.window as u64;
            window = Some(w);
            let peak_before = win_peak;
            win_peak = win_peak.max(w);
            if a.t_ns < start_ns || a.t_ns >= end_ns {
                acked = acked.max(a.ack);
                continue;
            }
            let k = idx(a.t_ns);
            let it = &mut iv[k];
            if (w as f64) < WINDOW_DIPPED_SHARE * peak_before as f64 {
                let until = acks.get(j).map_or(end_ns, |n| n.t_ns).min(it.start_ns + width_ns);
                it.dipped_ns += (until - a.t_ns).max(0);
            }
            it.acks += 1;
            if it.win_max == 0 && it.win_min == 0 {
                it.win_min = w;
            }
            it.win_end = w;
            it.acked = it.acked.max(a.ack);
            it.win_max = it.win_max.max(w);
            it.win_min = it.win_min.min(w);
            if w == 0 || a.flags.has(Flags::ZERO_WINDOW) {
                it.zero_window = true;
            }
            if a.rtt_us > 0 && sender_side {
                it.rtt_sum_us += a.rtt_us as f64;
                it.rtt_n += 1;
                it.rtt_max_us = it.rtt_max_us.max(a.rtt_us);
                it.rtt_min_us = if it.rtt_min_us == 0 { a.rtt_us } else { it.rtt_min_us.min(a.rtt_us) };
            }
            if a.payload > 0 {
                it.reverse_data = true;
                drain.iter_mut().for_each(|dr| dr.reverse = true);
            }
            if a.ack > acked {
                if acked != i64::MIN {
                    it.acked_bytes += (a.ack - acked) as u64;
                    it.advancing_acks += 1;
                }
                acked = a.ack;
                if snd_nxt != i64::MIN && acked >= snd_nxt {
                    drain = Some(Drain { iv: k, ack_ns: a.t_ns, reverse: a.payload > 0 });
                }
            }
        }
    }
    carry_forward(&mut iv);
    iv
}

/// Counts data segment `d` in its interval `it`: `snd_nxt` is the highest
/// sequence sent before it (moved past it), `window` the last window
/// offered, `echo_ns` the receiver's echo round trip it ends, when the
/// capture is the receiver's ([`echo_rtt_ns`]).
fn add_data(it: &mut Interval, d: &DataRec, snd_nxt: &mut i64, window: Option<u64>, echo_ns: Option<i64>) {
    it.data_pkts += 1;
    if d.flags.has(Flags::RETRANSMISSION) {
        it.retx_pkts += 1;
    }
    if d.end() > *snd_nxt {
        let new_from = d.seq.max(*snd_nxt);
        if *snd_nxt == i64::MIN {
            it.new_bytes += d.len as u64;
        } else {
            it.new_bytes += (d.end() - new_from).max(0) as u64;
        }
        *snd_nxt = d.end();
        it.new_data_span = Some(it.new_data_span.map_or((d.t_ns, d.t_ns), |(a, _)| (a, d.t_ns)));
    }
    let f = d.in_flight as u64;
    it.max_flight = it.max_flight.max(f);
    if let Some(w) = window {
        let gap = w as i64 - f as i64;
        it.min_gap = Some(it.min_gap.map_or(gap, |g| g.min(gap)));
    }
    if d.flags.has(Flags::WINDOW_FULL) {
        it.window_full_flag = true;
    }
    // At the receiver: this segment echoes the TSval of one of the
    // receiver's segments; the time since that segment left is the round
    // trip through the sender, queueing included.
    if let Some(ns) = echo_ns {
        let us = (ns / 1000).clamp(1, u32::MAX as i64) as u32;
        it.rtt_sum_us += us as f64;
        it.rtt_n += 1;
        it.rtt_max_us = it.rtt_max_us.max(us);
        it.rtt_min_us = if it.rtt_min_us == 0 { us } else { it.rtt_min_us.min(us) };
    }
    it.snd_nxt = *snd_nxt;
}

/// Carries the window, snd_nxt and the ACK into intervals without them;
/// the window in effect at an interval's start counts in its range.
fn carry_forward(iv: &mut [Interval]) {
    let mut last_win: Option<u64> = None;
    let mut last_nxt = i64::MIN;
    let mut last_ack = i64::MIN;
    for it in iv.iter_mut() {
        if it.win_max == 0 && it.win_min == 0 && !it.zero_window {
            if let Some(w) = last_win {
                it.win_max = w;
                it.win_min = w;
                it.win_end = w;
            }
        } else {
            // The window in effect at the start counts too.
            if let Some(w) = last_win {
                it.win_max = it.win_max.max(w);
                it.win_min = it.win_min.min(w);
            }
            last_win = Some(it.win_end);
        }
        if it.data_pkts == 0 {
            it.snd_nxt = last_nxt;
        } else {
            last_nxt = it.snd_nxt;
        }
        it.acked = it.acked.max(last_ack);
        last_ack = it.acked;
    }
}

/// At the receiver: the round trip through the sender that ends with data
/// segment `d`, from the receiver's TSval it echoes to the first of the
/// receiver's segments (`prior`: those sent before `d` arrived) that
/// carried it. This is the receiver's own RTT estimate in Linux
/// (tcp_rcv_rtt_measure_ts(): now minus the echoed TSecr, on the
/// receiver's clock), which sizes its buffer (DRS); queueing on the
/// sender's side of the path is included.
pub(crate) fn echo_rtt_ns(prior: &[AckRec], d: &DataRec) -> Option<i64> {
    if d.tsecr == 0 || prior.is_empty() {
        return None;
    }
    let k = prior.partition_point(|a| a.tsval != 0 && seq32_lt(a.tsval, d.tsecr));
    (k < prior.len() && prior[k].tsval == d.tsecr).then(|| d.t_ns - prior[k].t_ns)
}

/// The receiver's echo round trips ([`echo_rtt_ns`]) as (arrival time,
/// round trip) in ns, in time order, one per distinct TSecr carried by a
/// full segment, as the kernel samples them (tcp_rcv_rtt_measure_ts()
/// measures once per new TSecr, on segments of at least the receive MSS).
pub(crate) fn receiver_echo_samples(data: &[DataRec], acks: &[AckRec], smss: u32) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let (mut j, mut last_tsecr) = (0usize, None);
    for d in data {
        while j < acks.len() && acks[j].t_ns < d.t_ns {
            j += 1;
        }
        if d.len < smss || last_tsecr == Some(d.tsecr) {
            continue;
        }
        last_tsecr = Some(d.tsecr);
        if let Some(ns) = echo_rtt_ns(&acks[..j], d) {
            out.push((d.t_ns, ns.max(1)));
        }
    }
    out
}

/// [`receiver_echo_samples`]' round trips in ms, sorted.
pub(crate) fn receiver_echo_rtts_ms(data: &[DataRec], acks: &[AckRec], smss: u32) -> Vec<f64> {
    let mut out: Vec<f64> = receiver_echo_samples(data, acks, smss).into_iter().map(|(_, ns)| calc::ms_from_ns(ns as f64)).collect();
    out.sort_by(f64::total_cmp);
    out
}

fn seq32_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(t_us: i64, seq: i64) -> DataRec {
        DataRec { t_ns: t_us * 1000, seq, frame: 0, len: 1000, in_flight: 1000, flags: Flags::default(), tsecr: 0 }
    }

    fn ack(t_us: i64, ack: i64, payload: u32) -> AckRec {
        AckRec { t_ns: t_us * 1000, ack, frame: 0, window: 1 << 20, rtt_us: 0, payload, flags: Flags::default(), tsval: 0 }
    }

    /// Two bursts of 4 segments, 10 ms apart, the first acknowledged whole
    /// at 5 ms; the second leaves `gap_us` after that ACK.
    fn drained(gap_us: i64, reverse: u32) -> bool {
        let mut d: Vec<DataRec> = (0..4).map(|k| data(k, k * 1000)).collect();
        d.extend((0..4).map(|k| data(5_000 + gap_us + k, 4000 + k * 1000)));
        let a = vec![ack(5_000, 4000, reverse)];
        build_intervals(&d, &a, 2_000_000, 0, 20_000_000, true).iter().any(|it| it.drained)
    }

    /// New data right after the ACK that emptied the flight was waiting for
    /// that ACK (a send buffer, a window), not for the application; later,
    /// or after data from the receiver, it was the application's.
    #[test]
    fn a_drain_the_next_ack_refills_is_not_the_applications() {
        assert!(!drained(40, 0), "released by the ACK 40 µs before");
        assert!(drained(3_000, 0), "3 ms after the ACK: the application had nothing");
        assert!(drained(40, 100), "the receiver's data came with the ACK: an application's turn");
    }
}
