//! The sender's side: a send buffer that caps the flight below an open
//! window, and an application that writes less than the path takes (or
//! waits for the receiver's application, an application-level window).
//!
//! Both are states of the intervals (`crate::states`); which one leads is
//! the decision step's. This module words their evidence.

use tcpwhy_core::units::calc;
use super::{finding, num, Input, FINDING_MIN_SHARE};
use crate::model::{Evidence, Finding};
use serde_json::json;
use tcpwhy_core::units::fmt_bytes;
use tcpwhy_core::{Cause, Limit};

/// A writer blocked on a full send buffer is woken by the ACK that frees
/// room (tcp_check_space -> sk_stream_write_space) and what it writes goes
/// out at once (tcp_push): at the sender, a burst of a send-buffer-limited
/// flow begins within this long after an ACK on a host that is not
/// saturated.
pub const WAKE_MAX_NS: i64 = 1_000_000;
/// A burst begins after a silence longer than the wake-up window, so the
/// ACK before it is not one of the burst's own.
pub const BURST_GAP_MIN_NS: i64 = 2 * WAKE_MAX_NS;
/// Of a send-buffer-limited sender's bursts, all but those after ACKs the
/// capture dropped and the sends of timers (tail-loss probes, RTO) follow
/// an ACK within the wake-up window (held out: 97 to 100%).
/// Fewer, and the sender writes on its own clock: the application paces
/// it.
pub const WOKEN_MIN_SHARE: f64 = 0.8;
/// Bursts the wake-up test needs.
pub const WAKE_MIN_BURSTS: usize = 20;
/// The test tells the two clocks apart only where an instant unrelated to
/// the ACKs falls in a wake-up window less often than this, in the gaps
/// between ACKs where the bursts began (ACKs sparse enough there); denser
/// ACKs wake nothing they can be told from.
pub const WAKE_COINCIDENCE_MAX: f64 = 0.5;
/// A writer a full send buffer blocks is woken by the ACKs of what it sent
/// a round trip before, so its bursts come at least once a round trip
/// (more often when the ACKs free the room in parts). Bursts whose median
/// spacing exceeds this many round trips (the RTT's 90th percentile, the
/// queue included) are not released by the ACKs: the application writes
/// them on its own clock.
pub const ACK_CLOCK_MAX_PERIOD_RTTS: f64 = 1.25;
/// A sender paced by its application below this share of the busy time,
/// with its bursts woken by nothing: the `high` verdict needs the bursts
/// clearly unclocked.
pub const APP_CLOCK_HIGH_MAX_WOKEN: f64 = 0.5;

/// When the sender's bursts begin: after the ACK that freed buffer room
/// (a writer a full send buffer blocks), or on the application's own
/// clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Wakes {
    /// Bursts of new data after a silence of [`BURST_GAP_MIN_NS`].
    pub bursts: usize,
    /// Those that began within the wake-up window of an ACK.
    pub woken: usize,
    /// The chance that an instant unrelated to the ACKs falls inside the
    /// wake-up window, in the gap between ACKs where each burst began (the
    /// mean over the bursts): what a timer's bursts hit by chance. A timer
    /// whose chunks land in the train of the last chunk's ACKs falls among
    /// them at every tick, so the share of the whole time would understate
    /// it.
    pub coincidence: f64,
    /// The median time from one burst to the next, and the median bytes
    /// a burst carries.
    pub period_ns: i64,
    pub burst_bytes: u64,
    /// The RTT's 90th percentile (0: unknown).
    pub rtt_p90_ns: i64,
}

impl Wakes {
    pub fn woken_share(&self) -> f64 {
        self.woken as f64 / self.bursts.max(1) as f64
    }

    /// The bursts follow the application's clock, not the ACKs: enough
    /// of them, and either ACKs sparse enough to tell with fewer woken
    /// than a full send buffer wakes, or bursts further apart than its
    /// ACKs release them ([`Wakes::slower_than_acks`]).
    pub fn app_clocked(&self) -> bool {
        self.bursts >= WAKE_MIN_BURSTS
            && ((self.coincidence < WAKE_COINCIDENCE_MAX && self.woken_share() < WOKEN_MIN_SHARE) || self.slower_than_acks())
    }

    /// The bursts came less often than the ACKs of a full buffer release
    /// them ([`ACK_CLOCK_MAX_PERIOD_RTTS`]).
    pub fn slower_than_acks(&self) -> bool {
        self.rtt_p90_ns > 0 && self.period_ns as f64 > ACK_CLOCK_MAX_PERIOD_RTTS * self.rtt_p90_ns as f64
    }

    /// The wake-up test read the bursts as a full send buffer's: enough of
    /// them, ACKs sparse enough to tell, and most bursts woken by one.
    pub fn buffer_clocked(&self) -> bool {
        self.bursts >= WAKE_MIN_BURSTS && self.coincidence < WAKE_COINCIDENCE_MAX && self.woken_share() >= WOKEN_MIN_SHARE && !self.slower_than_acks()
    }

    /// The application's pace in words: the bursts' median size and
    /// spacing (a write the congestion window splits counts as two).
    pub fn pace_text(&self) -> String {
        format!(
            "bursts of about {} (median) every {:.1} ms",
            fmt_bytes(self.burst_bytes as f64),
            calc::ms_from_ns(self.period_ns as f64)
        )
    }
}

/// The wake-up test over a direction's records, at the sender (None at
/// the receiver, or without the records it needs): each burst of new data,
/// and whether an ACK came within the wake-up window before it.
pub(crate) fn wakes(inp: &Input) -> Option<Wakes> {
    // At the sender only: there the ACK and the write it wakes meet on one
    // host. At the receiver the ACK left a round trip before the burst
    // arrives, and that round trip varies with the queue the sender's own
    // bursts build (held out: 60 to 88 ms on a 60 ms path behind a 64 KiB
    // send buffer), more than any window that still tells the clocks apart.
    if !inp.path.sender_side {
        return None;
    }
    // each ACK as the burst it may wake sees it (the records are in
    // capture order: no copy, a search per burst)
    let acks = &inp.r.acks;
    let new_data = || inp.r.data.iter().filter(|d| d.len > 0 && !d.is_retransmission());
    let (first, last) = (new_data().next()?.t_ns, new_data().next_back()?.t_ns);
    if last <= first {
        return None;
    }
    let (mut bursts, mut woken, mut chance) = (0usize, 0usize, 0.0f64);
    let mut starts: Vec<i64> = Vec::new();
    let mut sizes: Vec<u64> = Vec::new();
    let smss = u64::from(inp.path.smss.max(1));
    let mut prev = i64::MIN;
    let mut data = new_data().peekable();
    while let Some(d) = data.next() {
        let starts_burst = prev != i64::MIN && d.t_ns - prev >= BURST_GAP_MIN_NS;
        prev = d.t_ns;
        if starts_burst {
            // A lone segment shorter than a full one is a write's tail that
            // Nagle's test held until the ACK of the last small segment
            // (RFC 896, Minshall's variant in tcp_nagle_check): the ACK
            // releases it whoever wrote it, and a writer a full buffer woke
            // refills at least a third of the buffer.
            let lone = data.peek().is_none_or(|n| n.t_ns - d.t_ns >= BURST_GAP_MIN_NS);
            if lone && u64::from(d.len) < smss {
                continue;
            }
            bursts += 1;
            starts.push(d.t_ns);
            sizes.push(0);
            // the last ACK at or before the burst's first segment, and the
            // next: an instant unrelated to the ACKs falls anywhere in the
            // gap between them, within the wake-up window of the first
            // with the chance the window covers of that gap
            let i = acks.partition_point(|a| a.t_ns <= d.t_ns);
            if i > 0 {
                let before = acks[i - 1].t_ns;
                if d.t_ns - before <= WAKE_MAX_NS {
                    woken += 1;
                }
                let gap = acks.get(i).map_or(last, |a| a.t_ns).max(d.t_ns) - before;
                chance += if gap > 0 { (WAKE_MAX_NS as f64 / gap as f64).min(1.0) } else { 1.0 };
            } else {
                chance += 1.0;
            }
        }
        if let Some(b) = sizes.last_mut() {
            *b += u64::from(d.len);
        }
    }
    let mut gaps: Vec<i64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    let period_ns = crate::rank::quantile_i64(&mut gaps, 0.5).unwrap_or(0);
    sizes.sort_unstable();
    let burst_bytes = sizes.get(sizes.len() / 2).copied().unwrap_or(0);
    let rtt_p90_ns = inp.path.rtt.p90.map_or(0, tcpwhy_core::units::Duration::as_nanos_i64);
    Some(Wakes { bursts, woken, coincidence: chance / bursts.max(1) as f64, period_ns, burst_bytes, rtt_p90_ns })
}

/// Chunks the timer test needs (`Chunks::on_timer`, below).
pub const TIMER_MIN_CHUNKS: usize = 8;
/// A timer's periods vary by at most this share (median absolute
/// deviation over the median period): an application's sleep is late by
/// the scheduler's latency, well under a tenth of a period of a few
/// milliseconds or more on a host that is not saturated.
pub const TIMER_MAX_JITTER: f64 = 0.1;
/// A timer's period is at least this many base RTTs. A flow the ACK clock
/// holds (a window, a buffer) also sends once a round trip with a quiet
/// round trip between, as regular as a timer; a pause of at least a round
/// trip after a chunk that took one is the shortest the ACK clock cannot
/// make.
pub const TIMER_MIN_PERIOD_RTTS: f64 = 2.0;
/// A timer's period is at least this many ticks of the capture's clock,
/// so that [`TIMER_MAX_JITTER`] is two ticks or more: a clock of 10 ms
/// (some Windows captures) makes any pattern of a few ticks look exact.
pub const TIMER_MIN_TICKS: i64 = 20;
/// The pauses hold at least this share of the direction's time (intervals
/// idle: nothing outstanding, the window open). Less, and the network
/// barely kept up with the timer: the chunks' time in the network then
/// decides when they are delivered, and a timer's clock is no answer.
pub const TIMER_MIN_IDLE_SHARE: f64 = 0.1;
/// Chunks whose pauses are as regular as their periods (each chunk took
/// the network about as long) may come from an application that waits a
/// fixed time after each chunk rather than on a timer; a faster network
/// then shortens the period by what it saves. The application's pace still
/// leads when its pauses hold at least this share of the time: no network
/// fix then makes the transfer even twice as fast.
pub const PAUSE_LEADS_MIN_IDLE_SHARE: f64 = 0.5;
/// At most this share of the chunks released by the receiver: an ACK that
/// moved the window's right edge (a reader that took data, or the ACK
/// Linux held until it did, `__tcp_ack_snd_check`) reached the sender as
/// the chunk began. A reader on its own clock paces the sender as
/// regularly as a timer, through the window. At the sender the ACK comes
/// within [`WAKE_MAX_NS`] before the chunk; at the receiver it left a
/// round trip before the chunk arrived, [`RELEASE_MIN_RTTS`] to
/// [`RELEASE_MAX_RTTS`] base RTTs before (the pause drained the queue) plus
/// the wake-up window.
pub const TIMER_MAX_RELEASED_SHARE: f64 = 0.5;
/// The earliest a released chunk arrives at the receiver after the ACK
/// that released it, in base RTTs: a round trip, less the base's own noise.
pub const RELEASE_MIN_RTTS: f64 = 0.8;
/// The latest, in base RTTs: the pause before a chunk drained the queue,
/// so the round trip is the base one, with a quarter for the jitter of
/// real paths.
pub const RELEASE_MAX_RTTS: f64 = 1.25;

/// The chunks of a direction whose sender paused on its own, and whether
/// they began on a timer.
///
/// An application that writes a chunk on a timer (a media server's
/// segments, a telemetry stream, a rate-limited copy) starts each chunk a
/// period after the last one began, however long the network took to
/// carry it; one that waits a fixed time after a chunk was sent (or for
/// the peer's turn, `crate::shape`) starts it a pause after the last one
/// ended. So a timer shows in the chunks' starts being more regular than
/// the pauses between them, and the network's time inside each chunk then
/// moves no more data: the next chunk starts on the clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Chunks {
    pub chunks: usize,
    /// The median time from one chunk's start to the next's, and from one
    /// chunk's last segment to the next chunk's first.
    pub period_ns: i64,
    pub pause_ns: i64,
    /// Median absolute deviation over the median, of the periods and of
    /// the pauses.
    pub period_jitter: f64,
    pub pause_jitter: f64,
    /// The median new bytes of a chunk, and the median time the network
    /// took to carry one (first to last segment).
    pub chunk_bytes: u64,
    pub carry_ns: i64,
    /// The path's base RTT (0: unknown), the capture's clock tick, and the
    /// share of the direction's intervals idle.
    pub rtt_ns: i64,
    pub tick_ns: i64,
    pub idle_share: f64,
    /// Chunks an ACK moving the window's right edge released
    /// ([`TIMER_MAX_RELEASED_SHARE`]).
    pub released: usize,
}

impl Chunks {
    /// The chunks began on the application's clock: enough of them, their
    /// periods regular, and no less regular than the pauses (or the pauses
    /// regular too and holding most of the time).
    pub fn on_timer(&self) -> bool {
        let timer = self.period_jitter <= self.pause_jitter && self.idle_share >= TIMER_MIN_IDLE_SHARE;
        let fixed_pause = self.pause_jitter <= TIMER_MAX_JITTER && self.idle_share >= PAUSE_LEADS_MIN_IDLE_SHARE;
        self.chunks >= TIMER_MIN_CHUNKS
            && self.period_jitter <= TIMER_MAX_JITTER
            && (timer || fixed_pause)
            && self.rtt_ns > 0
            && self.period_ns as f64 >= TIMER_MIN_PERIOD_RTTS * self.rtt_ns as f64
            && self.period_ns >= TIMER_MIN_TICKS * self.tick_ns
            && self.released as f64 <= TIMER_MAX_RELEASED_SHARE * self.chunks as f64
    }

    pub fn pace_text(&self) -> String {
        format!(
            "chunks of about {} (median) every {:.1} ms",
            fmt_bytes(self.chunk_bytes as f64),
            calc::ms_from_ns(self.period_ns as f64)
        )
    }
}

/// The sender's two clocks: when its bursts begin against the ACKs
/// ([`wakes`], at the sender), and its chunks between pauses ([`chunks`];
/// at any share idle, a timer shows in its starts however short its
/// pauses, but not in a request/response exchange, whose pauses are the
/// peer's turns).
pub(crate) fn clocks(inp: &Input, bursts: &[(usize, usize)], request_response: bool) -> (Option<Wakes>, Option<Chunks>) {
    let w = wakes(inp);
    let c = if request_response { None } else { chunks(inp, bursts) };
    if std::env::var_os("TCPWHY_DEBUG_INTERVALS").is_some() {
        eprintln!("{} bursts; chunks {c:?}; wakes {w:?}", bursts.len());
    }
    (w, c)
}

/// Median absolute deviation over the median (infinite when the median
/// is 0).
fn jitter(v: &mut [i64]) -> (i64, f64) {
    let m = crate::rank::quantile_i64(v, 0.5).unwrap_or(0);
    let mut dev: Vec<i64> = v.iter().map(|x| (x - m).abs()).collect();
    let mad = crate::rank::quantile_i64(&mut dev, 0.5).unwrap_or(0);
    (m, if m > 0 { mad as f64 / m as f64 } else { f64::INFINITY })
}

/// The chunks of a direction, from its bursts (runs of intervals that
/// were not idle, `crate::shape::bursts`): each chunk's first new segment
/// and last segment, at either capture point (a chunk's first segment
/// finds the queue the pause drained, so the receiver sees the sender's
/// clock shifted by the path's delay).
pub(crate) fn chunks(inp: &Input, bursts: &[(usize, usize)]) -> Option<Chunks> {
    if bursts.len() < 2 {
        return None;
    }
    let data = &inp.r.data;
    let at = |i: usize| inp.iv.get(i).map_or(i64::MAX, |x| x.start_ns);
    let mut spans: Vec<(i64, i64, u64)> = Vec::with_capacity(bursts.len());
    for &(a, b) in bursts {
        let (from, to) = (data.partition_point(|d| d.t_ns < at(a)), data.partition_point(|d| d.t_ns < at(b)));
        let seg = &data[from..to];
        let first = seg.iter().find(|d| d.len > 0 && !d.is_retransmission()).map(|d| d.t_ns);
        let last = seg.iter().rev().find(|d| d.len > 0).map(|d| d.t_ns);
        let bytes: u64 = seg.iter().filter(|d| d.len > 0 && !d.is_retransmission()).map(|d| u64::from(d.len)).sum();
        if let (Some(f), Some(l)) = (first, last) {
            spans.push((f, l, bytes));
        }
    }
    if spans.len() < 2 {
        return None;
    }
    let (period_ns, period_jitter) = jitter(&mut spans.windows(2).map(|w| w[1].0 - w[0].0).collect::<Vec<_>>());
    let (pause_ns, pause_jitter) = jitter(&mut spans.windows(2).map(|w| w[1].0 - w[0].1).collect::<Vec<_>>());
    let mut sizes: Vec<i64> = spans.iter().map(|s| s.2 as i64).collect();
    let chunk_bytes = crate::rank::quantile_i64(&mut sizes, 0.5).unwrap_or(0) as u64;
    let mut carry: Vec<i64> = spans.iter().map(|s| s.1 - s.0).collect();
    let carry_ns = crate::rank::quantile_i64(&mut carry, 0.5).unwrap_or(0);
    let rtt_ns = inp.path.base_ns().unwrap_or(0);
    // the right edge (ACK + window) each ACK left, at most as far as any before it
    let acks = &inp.r.acks;
    let (mut edge, mut moved): (i64, Vec<bool>) = (i64::MIN, Vec::with_capacity(acks.len()));
    for a in acks {
        let e = a.ack + i64::from(a.window);
        moved.push(e > edge);
        edge = edge.max(e);
    }
    let (lo, hi) = if inp.path.sender_side {
        (0, WAKE_MAX_NS)
    } else {
        ((RELEASE_MIN_RTTS * rtt_ns as f64) as i64, (RELEASE_MAX_RTTS * rtt_ns as f64) as i64 + WAKE_MAX_NS)
    };
    let released = spans
        .iter()
        .filter(|(start, _, _)| {
            let (a, b) = (acks.partition_point(|x| x.t_ns < start - hi), acks.partition_point(|x| x.t_ns <= start - lo));
            moved[a..b].iter().any(|m| *m)
        })
        .count();
    let tick_ns = crate::path::clock_tick(inp.r);
    let idle_share = super::capture_share(inp.states, &[Limit::Idle]);
    Some(Chunks { chunks: spans.len(), period_ns, pause_ns, period_jitter, pause_jitter, chunk_bytes, carry_ns, rtt_ns, tick_ns, idle_share, released })
}

/// The median of a state's intervals, by `value`, over those `keep`
/// holds (all of them when it holds none).
fn median_of(inp: &Input, state: Limit, value: impl Fn(&crate::limits::Interval) -> u64, keep: impl Fn(&crate::limits::Interval) -> bool) -> u64 {
    let of_state: Vec<&crate::limits::Interval> = inp.iv.iter().zip(inp.states).filter(|(_, s)| **s == state).map(|(x, _)| x).collect();
    let kept: Vec<&crate::limits::Interval> = of_state.iter().copied().filter(|x| keep(x)).collect();
    let mut v: Vec<u64> = if kept.is_empty() { of_state } else { kept }.into_iter().map(value).collect();
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

pub(crate) fn findings(inp: &Input, primary: Cause, app_clock: Option<&Wakes>, timer: Option<(Chunks, Cause)>, out: &mut Vec<Finding>) {
    let (sb, sa) = (inp.shares.send_buffer, inp.shares.sender_application);
    if let Some((c, within)) = timer {
        out.push(finding(
            "application_timer",
            format!(
                "the sender wrote on a timer, {}: the chunks' starts varied by {:.0}% of the period and the pauses after them by {:.0}%, so each chunk began on the application's clock, not when the last one had gone; it sent nothing for {:.0}% of the time with the window open. The network carried a chunk in {:.1} ms (median{}), and carrying it faster would deliver each chunk sooner without moving more data",
                c.pace_text(),
                c.period_jitter * 100.0,
                c.pause_jitter.min(9.99) * 100.0,
                c.idle_share * 100.0,
                calc::ms_from_ns(c.carry_ns as f64),
                if within == Cause::SenderApplication { String::new() } else { format!("; {within} inside the chunks") }
            ),
            &[
                ("chunks", json!(c.chunks)),
                ("period_ms", num(calc::ms_from_ns(c.period_ns as f64))),
                ("pause_ms", num(calc::ms_from_ns(c.pause_ns as f64))),
                ("period_jitter", num(c.period_jitter)),
                ("pause_jitter", num(c.pause_jitter.min(9.99))),
                ("chunk_bytes", json!(c.chunk_bytes)),
                ("carry_ms", num(calc::ms_from_ns(c.carry_ns as f64))),
                ("within_chunks", json!(within.as_str())),
            ],
            Evidence { frames: vec![], time_ranges: inp.runs_of(Limit::Idle) },
        ));
        return;
    }
    if let Some(w) = app_clock {
        out.push(finding(
            "application_clock",
            format!(
                "the sender wrote on its own clock, {}: {} of {} bursts began with no ACK in the {:.0} ms before them (by chance {:.0}%), where a writer a full send buffer blocks is woken by the ACK that frees room{}; the flat flight ({:.0}% of the busy time) is the application's pace",
                w.pace_text(),
                w.bursts - w.woken,
                w.bursts,
                calc::ms_from_ns(WAKE_MAX_NS as f64),
                w.coincidence * 100.0,
                if w.slower_than_acks() {
                    format!(
                        ", and the bursts came more than {ACK_CLOCK_MAX_PERIOD_RTTS} round trips ({:.1} ms, the RTT's 90th percentile) apart, where the ACKs of a full buffer release one at least once a round trip",
                        calc::ms_from_ns(w.rtt_p90_ns as f64)
                    )
                } else {
                    String::new()
                },
                (sb + sa) * 100.0
            ),
            &[
                ("bursts", json!(w.bursts)),
                ("woken_by_ack", json!(w.woken)),
                ("coincidence", num(w.coincidence)),
                ("period_ms", num(calc::ms_from_ns(w.period_ns as f64))),
                ("burst_bytes", json!(w.burst_bytes)),
            ],
            Evidence { frames: vec![], time_ranges: inp.runs_of(Limit::SendBuffer) },
        ));
        return;
    }
    if sb > FINDING_MIN_SHARE || primary == Cause::SendBuffer {
        let sender_side = inp.path.sender_side;
        // The flight is read where the sender sent: an interval in which
        // ACKs freed room and nothing left (crate::states) has none.
        let sent = |x: &crate::limits::Interval| x.data_pkts > 0;
        let plateau = median_of(inp, Limit::SendBuffer, |x| if sender_side { x.max_flight } else { x.new_bytes }, sent);
        let window = inp.rcv_win_max();
        // 0: the receiver's window scale is unknown (no handshake captured).
        let below = if window > 0 { format!("below the {} window", fmt_bytes(window as f64)) } else { "below a window of unknown scale".into() };
        out.push(finding(
            "flight_plateau",
            format!(
                "bytes in flight flat at about {} {below}, with no loss and no queueing: send-buffer limited {:.0}% of the busy time",
                fmt_bytes(plateau as f64),
                sb * 100.0
            ),
            &[("flight_bytes", json!(plateau)), ("window_bytes", json!(window)), ("share", num(sb))],
            Evidence { frames: vec![], time_ranges: inp.runs_of(Limit::SendBuffer) },
        ));
    }
    if sa > FINDING_MIN_SHARE || primary == Cause::SenderApplication {
        let typical = median_of(inp, Limit::SenderApplication, |x| x.new_bytes, |_| true);
        let drained = inp.iv.iter().filter(|x| x.drained).count();
        let reverse = inp.iv.iter().filter(|x| x.reverse_data).count();
        out.push(finding(
            "sender_application",
            format!(
                "the sender had nothing in flight for part of each round trip while the window was open: about {} per RTT{}; application-limited {:.0}% of the busy time",
                fmt_bytes(typical as f64),
                if reverse > 0 {
                    format!(", each burst following data from the receiver ({reverse} round trips): application-level flow control")
                } else {
                    String::new()
                },
                sa * 100.0
            ),
            &[("bytes_per_rtt", json!(typical)), ("drained_rtts", json!(drained)), ("reverse_data_rtts", json!(reverse)), ("share", num(sa))],
            Evidence { frames: vec![], time_ranges: inp.runs_of(Limit::SenderApplication) },
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::{testkit, Shares};
    use crate::record::{AckRec, DataRec, DirRecords};

    #[test]
    fn the_flight_plateau_is_the_median_flight_of_the_send_buffer_intervals() {
        let cs = testkit::summary();
        let path = testkit::path(true, 10.0);
        let r = testkit::records();
        let mut iv = testkit::flat(6, 30, path.width_ns());
        iv[5].max_flight = 99 * 1448;
        let states = [vec![Limit::SlowStart; 2], vec![Limit::SendBuffer; 4]].concat();
        let inp = Input { cs: &cs, d: 0, ds: &cs.directions[0], peer: &cs.directions[1], r: &r, path: &path, iv: &iv, states: &states, shares: Shares::of(&states) };
        let mut out = Vec::new();
        findings(&inp, Cause::SendBuffer, None, None, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].kind, "flight_plateau");
        assert_eq!(out[0].numbers["flight_bytes"], json!(30 * 1448));
        assert_eq!(out[0].evidence.time_ranges, vec![(0.02, 0.06)]);
    }

    /// 40 bursts of 10 segments, 20 ms apart, each ACKed 30 ms later; with
    /// `woken`, each burst leaves 50 µs after an ACK (a writer a full send
    /// buffer blocked), else on its own 20 ms clock, 7 ms after the last ACK.
    fn bursts(woken: bool) -> DirRecords {
        let mut r = testkit::records();
        let (mut seq, ms) = (0i64, 1_000_000i64);
        for k in 0..40i64 {
            let start = k * 20 * ms + if woken { 50_000 } else { 0 };
            for i in 0..10i64 {
                let t = start + i * 100_000;
                r.data.push(DataRec { t_ns: t, seq, frame: 0, len: 1448, in_flight: 0, flags: Default::default(), tsecr: 0 });
                seq += 1448;
                r.acks.push(AckRec { t_ns: t + 30 * ms, ack: seq, frame: 0, window: 1 << 20, rtt_us: 30_000, payload: 0, flags: Default::default(), tsval: 0 });
            }
            if woken {
                // the ACK that freed the room this burst fills
                r.acks.push(AckRec { t_ns: start - 50_000, ack: seq, frame: 0, window: 1 << 20, rtt_us: 0, payload: 0, flags: Default::default(), tsval: 0 });
            }
        }
        r.acks.sort_by_key(|a| a.t_ns);
        r
    }

    /// The wake-up test over `r` at the sender, on a path of `rtt_ms`,
    /// the intervals all read as the send buffer's.
    fn wakes_at_sender(r: &DirRecords, rtt_ms: f64) -> Wakes {
        let cs = testkit::summary();
        let path = testkit::path(true, rtt_ms);
        let iv = testkit::flat(5, 10, path.width_ns());
        let states = vec![Limit::SendBuffer; 5];
        let inp = Input { cs: &cs, d: 0, ds: &cs.directions[0], peer: &cs.directions[1], r, path: &path, iv: &iv, states: &states, shares: Shares::of(&states) };
        wakes(&inp).expect("records enough")
    }

    #[test]
    fn bursts_after_the_acks_are_a_full_send_buffer_and_bursts_on_a_timer_the_application() {
        for (woken, app) in [(true, false), (false, true)] {
            let w = wakes_at_sender(&bursts(woken), 30.0);
            assert_eq!(w.bursts, 39, "{w:?}");
            assert_eq!(w.app_clocked(), app, "{w:?}");
            assert_eq!((w.period_ns, w.burst_bytes), (20_000_000, 14_480));
            assert!(w.coincidence < 0.2, "{w:?}");
            if app {
                // the ACKs 30 ms after each burst fall 10 ms before the next
                assert_eq!(w.woken, 0);
            }
        }
    }

    /// A timer's chunks of 64 segments at line rate every 41 ms on a 31 ms
    /// path, each ACKed two segments every 560 µs from 31 ms on, and with
    /// `tail` a last segment of 800 bytes that Nagle's test holds until the
    /// ACK of the previous chunk's tail: each chunk begins inside the train
    /// of the last one's ACKs, 0.1 to 0.5 ms after one of them.
    fn timer_among_acks(tail: bool) -> DirRecords {
        let mut r = testkit::records();
        let (us, ms) = (1_000i64, 1_000_000i64);
        let mut seq = 0i64;
        for k in 0..40i64 {
            let start = k * 41 * ms;
            let first = seq;
            for i in 0..64i64 {
                r.data.push(DataRec { t_ns: start + i * 10 * us, seq, frame: 0, len: 1448, in_flight: 0, flags: Default::default(), tsecr: 0 });
                seq += 1448;
            }
            for j in 1..=32i64 {
                let t = start + 31 * ms + j * 560 * us + (k * 37 % 11) * 10 * us;
                r.acks.push(AckRec { t_ns: t, ack: first + j * 2 * 1448, frame: 0, window: 1 << 22, rtt_us: 31_000, payload: 0, flags: Default::default(), tsval: 0 });
            }
            if tail {
                // held until the ACK of all before it, 20 µs after it
                let t = start + 31 * ms + 32 * 560 * us + (k * 37 % 11) * 10 * us + 20 * us;
                r.data.push(DataRec { t_ns: t, seq, frame: 0, len: 800, in_flight: 0, flags: Default::default(), tsecr: 0 });
                seq += 800;
            }
        }
        r.data.sort_by_key(|d| d.t_ns);
        r.acks.sort_by_key(|a| a.t_ns);
        r
    }

    #[test]
    fn a_timer_inside_the_last_chunks_ack_train_is_not_read_as_a_full_buffer() {
        for tail in [false, true] {
            // the RTT's 90th percentile with the chunk's queue, 35 ms: the
            // chunks come less than 1.25 round trips apart, as a buffer's
            // ACKs may
            let w = wakes_at_sender(&timer_among_acks(tail), 35.0);
            // the tails are no bursts of their own: 39 chunk starts, 41 ms apart
            assert_eq!((w.bursts, w.period_ns), (39, 41_000_000), "{w:?}");
            // each began within 1 ms of an ACK, as ACKs 560 µs apart make any instant
            assert_eq!(w.woken, 39, "{w:?}");
            assert!(w.coincidence > 0.99, "{w:?}");
            assert!(!w.buffer_clocked() && !w.app_clocked(), "{w:?}");
        }
    }

    /// Chunks at (start ms, duration ms), a segment every millisecond
    /// inside each, on 10 ms intervals (idle where nothing was sent); with
    /// `released`, an ACK moving the window's edge reaches the sender
    /// 100 µs before each chunk (a reader's window update).
    fn chunked(spans: &[(i64, i64)], released: bool) -> (DirRecords, Vec<crate::limits::Interval>, Vec<Limit>) {
        let ms = 1_000_000i64;
        let mut r = testkit::records();
        let mut seq = 0i64;
        for (k, &(start, dur)) in spans.iter().enumerate() {
            for i in 0..=dur {
                r.data.push(DataRec { t_ns: (start + i) * ms, seq, frame: 0, len: 1448, in_flight: 0, flags: Default::default(), tsecr: 0 });
                seq += 1448;
            }
            if released {
                r.acks.push(AckRec { t_ns: start * ms - 100_000, ack: 0, frame: 0, window: (k as u32 + 1) << 20, rtt_us: 0, payload: 0, flags: Default::default(), tsval: 0 });
            }
        }
        let end = spans.last().map_or(0, |s| s.0 + s.1 + 1);
        let n = (end / 10 + 1) as usize;
        let iv = testkit::flat(n, 1, 10 * ms);
        let states = (0..n as i64)
            .map(|k| if r.data.iter().any(|d| d.t_ns >= k * 10 * ms && d.t_ns < (k + 1) * 10 * ms) { Limit::CongestionWindow } else { Limit::Idle })
            .collect();
        (r, iv, states)
    }

    #[test]
    fn chunks_on_a_timer_are_the_applications_and_chunks_after_a_pause_or_a_window_update_are_not() {
        let cs = testkit::summary();
        let path = testkit::path(true, 10.0);
        let dur = |k: i64| 12 + (k * 7) % 17;
        // every 50 ms, however long the last one took
        let timer: Vec<(i64, i64)> = (0..20).map(|k| (k * 50, dur(k))).collect();
        // 25 ms after the last one ended
        let mut after = vec![(0i64, dur(0))];
        for k in 1..20 {
            let (s, d) = after[k as usize - 1];
            after.push((s + d + 25, dur(k)));
        }
        for (spans, released, want) in [(&timer, false, true), (&after, false, false), (&timer, true, false)] {
            let (r, iv, states) = chunked(spans, released);
            let inp = Input { cs: &cs, d: 0, ds: &cs.directions[0], peer: &cs.directions[1], r: &r, path: &path, iv: &iv, states: &states, shares: Shares::of(&states) };
            let c = chunks(&inp, &crate::shape::bursts(&states)).expect("chunks");
            assert_eq!(c.chunks, 20, "{c:?}");
            assert_eq!(c.on_timer(), want, "{c:?}");
            assert_eq!(c.released, if released { 20 } else { 0 }, "{c:?}");
        }
        let (r, iv, states) = chunked(&timer, false);
        let inp = Input { cs: &cs, d: 0, ds: &cs.directions[0], peer: &cs.directions[1], r: &r, path: &path, iv: &iv, states: &states, shares: Shares::of(&states) };
        let c = chunks(&inp, &crate::shape::bursts(&states)).unwrap();
        assert_eq!(c.period_ns, 50_000_000);
        assert_eq!(c.period_jitter, 0.0);
        assert!(c.pause_jitter > TIMER_MAX_JITTER, "{c:?}");
        // the same timer on a path whose round trip is half the period: the
        // ACK clock could make it
        let slow = testkit::path(true, 30.0);
        let inp = Input { path: &slow, ..inp };
        assert!(!chunks(&inp, &crate::shape::bursts(&states)).unwrap().on_timer());
    }

    #[test]
    fn intervals_that_sent_nothing_do_not_set_the_flight_plateau() {
        let cs = testkit::summary();
        let path = testkit::path(true, 10.0);
        let r = testkit::records();
        // ACKs freed room and nothing left in three of the five
        let mut iv = testkit::flat(5, 30, path.width_ns());
        for x in &mut iv[2..] {
            (x.data_pkts, x.new_bytes, x.max_flight) = (0, 0, 0);
        }
        let states = vec![Limit::SendBuffer; 5];
        let inp = Input { cs: &cs, d: 0, ds: &cs.directions[0], peer: &cs.directions[1], r: &r, path: &path, iv: &iv, states: &states, shares: Shares::of(&states) };
        let mut out = Vec::new();
        findings(&inp, Cause::SendBuffer, None, None, &mut out);
        assert_eq!(out[0].numbers["flight_bytes"], json!(30 * 1448));
    }
}
