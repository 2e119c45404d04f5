//! The decision step: the detectors' evidence ranked into one primary
//! cause with its confidence. Causes that explain the time by themselves
//! come first (spurious retransmissions, the policer, a missing window
//! scale, a cached ssthresh, the reader); then the traffic's shape; then
//! the state that held the sender longest, read with the loss evidence.

use tcpwhy_core::units::calc;
use crate::detect::loss::{Loss, LINK_FULL_DESPITE_LOSS_SHARE};
use crate::detect::spurious::Spurious;
use crate::detect::start::Start;
use crate::detect::window::Window;
use crate::detect::policing::{self, Limiter};
use crate::detect::sender::APP_CLOCK_HIGH_MAX_WOKEN;
use crate::detect::Input;
use crate::policer::PolicerVerdict;
use crate::timeline::owned_by;
use tcpwhy_core::units::fmt_rate;
use tcpwhy_core::{Cause, Confidence, Limit};

/// The leading state holding less than this share of the busy time is a
/// weak lead: the verdict is `medium`.
pub const LEAD_MIN_SHARE: f64 = 0.4;
/// Congestion-window time at this share of the path rate is the link.
pub const CWND_AT_LINK_SHARE: f64 = 0.8;
/// The link not full: goodput (over the busy time) below this share of the path rate.
pub const LINK_NOT_FULL_SHARE: f64 = 0.7;
/// Queueing on a link not full, with the sender's buffer or application
/// holding it at least this share: the sender's bursts.
pub const SENDER_BURSTS_MIN_SHARE: f64 = 0.05;
/// Cached ssthresh: congestion-window and flat-flight time together at
/// least this share (the linear growth held the transfer), the growing
/// flight's at least the flat one's: congestion avoidance adds a segment
/// a round trip (RFC 5681 3.1), which the states read as
/// `congestion_window`; a flight flat most of the time was held by
/// something else. A send buffer that autotunes up from 16 KiB grows as
/// slowly in its first rounds (held out: a 64 KiB buffer at 25 ms read
/// `cached_ssthresh` `high` from the receiver with the flight flat 95% of
/// the time; the lab's cached ssthresh runs grow 67 to 95% of it).
pub const CACHED_MIN_SHARE: f64 = 0.5;
/// Random loss hiding as a flat flight: at least this many loss episodes,
/// none after a queue, congestion-window and flat-flight time together
/// at least [`CACHED_MIN_SHARE`] (a window of a few segments grows one per
/// round, which the noise of frequent losses hides).
pub const FREQUENT_LOSS_MIN_EPISODES: u32 = 4;
/// Request/response: the window held at least this share of the busy time.
pub const REQRESP_WINDOW_MIN_SHARE: f64 = 0.5;
/// The primary is the cause whose fix wins back the most time: a cause
/// whose states (`crate::timeline::owned_by`) held less than this share of
/// another state's time is outranked by that state's cause. The margin is
/// wide because an interval's state is one round trip's reading, and the
/// causes read first (a missing window scale, a policer, the reader) rest
/// on evidence beyond the time split; only a state that held several times
/// as long overrules them.
pub const OUTRANKED_SHARE: f64 = 1.0 / 3.0;

/// What the detectors found, for the decision.
pub(crate) struct Evidence<'a> {
    pub window: &'a Window,
    pub loss: &'a Loss,
    pub spurious: &'a Spurious,
    pub policer: &'a PolicerVerdict,
    pub start: &'a Start,
    pub request_response: bool,
    /// When the sender's bursts begin (`sender::wakes`).
    pub wakes: Option<crate::detect::sender::Wakes>,
    /// A sender that paused on its own: its chunks (`sender::chunks`).
    pub chunks: Option<crate::detect::sender::Chunks>,
}

impl Evidence<'_> {
    /// Something was lost: a retransmission that was not spurious. Linux
    /// undoes the cut of a recovery whose retransmissions all proved
    /// spurious (`tcp_try_undo_recovery`, DSACK and timestamps, RFC 3522),
    /// so those cost the window nothing (held out: a cached ssthresh run
    /// whose one retransmission was spurious read `random_loss` medium
    /// from both ends).
    pub fn lost(&self) -> bool {
        self.loss.retransmissions > self.spurious.count()
    }
}

/// The complete verdict of a direction: its cause, how sure, what would
/// settle it, and the rate limiter's verdict when the decision found one
/// other than the detector's. The assembly (crate::analyze) relabels
/// nothing: it adds the fixes' notes to `to_confirm`, and what the
/// capture cannot support (crate::quality::apply) may lower it after.
pub(crate) struct Decision {
    pub primary: Cause,
    pub confidence: Confidence,
    pub to_confirm: Vec<String>,
    /// A policer smaller than the bursts (`policing::small_bucket`): its
    /// verdict, with the path's packet-pair rate and no rate or burst
    /// fitted, in place of the token-bucket fit's.
    pub small_bucket: Option<PolicerVerdict>,
    /// The flat flight was the application's pace, not a full send buffer
    /// (`app_clock`): the send-buffer time is the application's.
    pub app_clocked: bool,
    /// The sender's chunks began on a timer (`app_timer`): the cause read
    /// inside the chunks, which the application's pace outranks; the
    /// pauses are the application's.
    pub app_timer: Option<Cause>,
}

impl Decision {
    /// The limit of each interval under this verdict: under a policer, the
    /// congestion window's time is the policer's (its losses set the
    /// window).
    pub fn attribute(&self, states: &mut [Limit]) {
        if self.primary == Cause::Policer {
            for s in states.iter_mut().filter(|s| **s == Limit::CongestionWindow) {
                *s = Limit::Policer;
            }
        }
        // a flight held flat by the application's pace, not by a full buffer
        if self.app_clocked {
            for s in states.iter_mut().filter(|s| **s == Limit::SendBuffer) {
                *s = Limit::SenderApplication;
            }
        }
        // a pause until the application's timer fires
        if self.app_timer.is_some() {
            for s in states.iter_mut().filter(|s| **s == Limit::Idle) {
                *s = Limit::SenderApplication;
            }
        }
    }
}

/// One step's reading: a cause, a cap on the confidence, and what would
/// settle it.
struct Call {
    cause: Cause,
    cap: Confidence,
    note: Option<String>,
    small_bucket: Option<PolicerVerdict>,
}

impl Call {
    fn of(cause: Cause) -> Call {
        Call { cause, cap: Confidence::High, note: None, small_bucket: None }
    }

    fn capped(cause: Cause, cap: Confidence, note: String) -> Call {
        Call { cause, cap, note: Some(note), small_bucket: None }
    }
}

pub(crate) fn decide(inp: &Input, ev: &Evidence) -> Decision {
    let mut confidence = Confidence::High;
    let call = match decisive(inp, ev) {
        Some(Cause::Policer) => rate_limiter(inp, ev),
        Some(c) => Call::of(c),
        None => match by_leading_state(inp, ev, &mut confidence) {
            Cause::RandomLoss if inp.path.sender_side => random_loss(inp, ev),
            c => Call::of(c),
        },
    };
    let call = by_time(inp, ev, call);
    let call = app_clock(inp, ev, call);
    let app_clocked = call.cause == Cause::SenderApplication && ev.wakes.is_some_and(|w| w.app_clocked());
    let (call, app_timer) = app_timer(ev, call);
    if app_timer.is_some() {
        confidence = Confidence::High;
    }
    let Call { cause: primary, cap, note, small_bucket } = call;
    confidence.cap(cap);
    let mut to_confirm: Vec<String> = note.into_iter().collect();
    // A full send buffer never pauses the sender: chunks on a timer are the
    // application's from either end.
    if !inp.path.sender_side && app_timer.is_none() && matches!(primary, Cause::SendBuffer | Cause::SenderApplication) {
        confidence = Confidence::Medium;
        to_confirm.push(
            "capture at the sender, or run `ss -tinm` there: a Send-Q at the wmem limit confirms the send buffer, an empty one the application".into(),
        );
    }
    if !inp.path.sender_side && matches!(primary, Cause::RandomLoss | Cause::BottleneckLink | Cause::CongestionLoss) {
        confidence.cap(Confidence::Medium);
        to_confirm.push("capture at the sender to see RTT before each loss (queue build-up or not)".into());
    }
    if primary == Cause::WindowScalingOff {
        // The limit is certain; where the option was lost is not: the
        // handshake a capture shows is the one the nearest box sent or
        // passed on (a load balancer or SYN proxy answers the SYN itself,
        // a proxy opens its own connection, a firewall may strip options).
        to_confirm.push(
            "where window scaling was lost: a capture at the other end shows whether that end's own SYN or SYN-ACK offered it; if it did, a load balancer, SYN proxy or proxy between the two built or rewrote the handshake, and the fix belongs there (`tcpwhy diagnose --pair` compares the two)".into(),
        );
    }
    Decision { primary, confidence, to_confirm, small_bucket, app_clocked, app_timer }
}

/// A sender that paused on its own between chunks that began on a timer
/// (`sender::chunks`, `Chunks::on_timer`): the application's clock sets
/// the pace, and whatever held the chunks in the network (the call read
/// from the busy time) delays each chunk without moving more data, since
/// the next one starts on the clock. The application is the primary, and
/// the cause read inside the chunks is kept for the finding.
/// A call that is already the application's (its sends read from the
/// busy time) gives way to the timer too: the timer says more (the chunks,
/// their period, that no network fix moves more data).
fn app_timer(ev: &Evidence, call: Call) -> (Call, Option<Cause>) {
    if ev.request_response {
        return (call, None);
    }
    match ev.chunks.filter(|c| c.on_timer()) {
        Some(_) => (Call::of(Cause::SenderApplication), Some(call.cause)),
        None => (call, None),
    }
}

/// The call checked against the time split: the cause whose fix wins back
/// the most time is the primary. When the call's own states held less than
/// [`OUTRANKED_SHARE`] of the busy time of a state read from the windows
/// or the sender's own sending, that state's cause takes its place,
/// `medium`, with both named.
fn by_time(inp: &Input, ev: &Evidence, call: Call) -> Call {
    let s = &inp.shares;
    let owned = owned_by(call.cause);
    if owned.is_empty() {
        return call;
    }
    let own: f64 = owned.iter().map(|l| s.of_state(*l)).sum();
    // Only the states read from the windows and the sender's own sending
    // outrank a cause: the receiver's window and reader, the send buffer,
    // the sending application. The congestion window and the bottleneck
    // link are read from losses and the RTT, which the causes named first
    // explain themselves (a spurious retransmission's cut window, an RTT
    // jump read from the receiver as a queue, a policer's recoveries).
    let candidates = [Limit::ReceiverApplication, Limit::SenderApplication, Limit::ReceiverWindow, Limit::SendBuffer];
    let Some((lead, lead_share)) =
        candidates.iter().filter(|l| !owned.contains(l)).map(|l| (*l, s.of_state(*l))).max_by(|a, b| a.1.total_cmp(&b.1))
    else {
        return call;
    };
    if own >= OUTRANKED_SHARE * lead_share {
        return call;
    }
    let cause = match lead {
        Limit::ReceiverApplication => Cause::ReceiverApplication,
        Limit::SenderApplication => Cause::SenderApplication,
        Limit::ReceiverWindow if ev.window.scaling_off => Cause::WindowScalingOff,
        Limit::ReceiverWindow => Cause::ReceiverWindow,
        _ => Cause::SendBuffer,
    };
    if cause == call.cause {
        return call;
    }
    Call::capped(
        cause,
        Confidence::Medium,
        format!(
            "{} was read first, but its states ({}) held {:.0}% of the busy time against {:.0}% for {}: the primary is the cause whose fix wins back the most time",
            call.cause,
            owned.iter().map(|l| l.as_str()).collect::<Vec<_>>().join(", "),
            own * 100.0,
            lead_share * 100.0,
            lead
        ),
    )
}

/// A flight held flat below an open window reads as a full send buffer;
/// an application that writes on its own clock holds it flat as well. The
/// bursts tell them apart (`sender::wakes`): a writer a full send buffer
/// blocks is woken by the ACK that frees room, so its bursts follow ACKs;
/// an application's timer does not wait for them.
fn app_clock(inp: &Input, ev: &Evidence, call: Call) -> Call {
    if call.cause != Cause::SendBuffer {
        return call;
    }
    let Some(w) = ev.wakes.filter(|w| w.app_clocked()) else {
        // At the sender the flat flight alone is both causes' (a timer whose
        // chunks land among the ACKs of the last one is woken by them, by
        // phase): `high` needs the bursts read as a full buffer's.
        if inp.path.sender_side && !ev.wakes.is_some_and(|w| w.buffer_clocked()) {
            let why = ev.wakes.map_or("too few bursts of new data to time".to_string(), |w| {
                format!(
                    "{} bursts, {} of them within {:.0} ms after an ACK where an unrelated instant falls there {:.0}% of the time",
                    w.bursts,
                    w.woken,
                    calc::ms_from_ns(crate::detect::sender::WAKE_MAX_NS as f64),
                    w.coincidence * 100.0
                )
            });
            let note = format!("the flight was flat as a full send buffer holds it, and as an application writing on its own clock holds it; when the bursts began does not tell them apart here ({why}): `ss -tinm` at the sender settles it (a Send-Q at the wmem limit for the buffer; app_limited and an empty Send-Q for the application)");
            return Call {
                cap: call.cap.min(Confidence::Medium),
                note: Some(match call.note {
                    Some(n) => format!("{n}; {note}"),
                    None => note,
                }),
                ..call
            };
        }
        return call;
    };
    let cap = if inp.path.sender_side && w.woken_share() <= APP_CLOCK_HIGH_MAX_WOKEN { Confidence::High } else { Confidence::Medium };
    let slower = if w.slower_than_acks() {
        format!(
            "; and they came every {:.1} ms (median), more than {} round trips of {:.1} ms apart, where the ACKs of a full buffer release a burst at least once a round trip",
            calc::ms_from_ns(w.period_ns as f64),
            crate::detect::sender::ACK_CLOCK_MAX_PERIOD_RTTS,
            calc::ms_from_ns(w.rtt_p90_ns as f64)
        )
    } else {
        String::new()
    };
    Call::capped(
        Cause::SenderApplication,
        cap,
        format!(
            "the flight was flat as a full send buffer holds it, but {} of {} bursts began with no ACK in the {:.0} ms before them (an instant unrelated to the ACKs falls there {:.0}% of the time){slower}: the sender wrote on its own clock, {}, where a writer a full send buffer blocks is woken by the ACK that frees room; `ss -tinm` at the sender settles it (app_limited and an empty Send-Q)",
            w.bursts - w.woken,
            w.bursts,
            calc::ms_from_ns(crate::detect::sender::WAKE_MAX_NS as f64),
            w.coincidence * 100.0,
            w.pace_text()
        ),
    )
}

/// A policer whose rate the losses do not show is named `high` only from
/// at least this many loss episodes. The first episode ends slow start:
/// an overshoot that any limit drops, a queue's or a bucket's. After it, a
/// bucket's rate shows in the rounds that find its tokens spent (Flach et
/// al., "An Internet-wide analysis of traffic policing", SIGCOMM 2016, read
/// it from the goodput between the first and the last loss); with the rate
/// unseen, only the episodes repeating at the bursts' tails tell a bucket
/// from loss that strikes at random, and one more episode is one draw.
pub const POLICER_MIN_EPISODES_UNSEEN_RATE: u32 = 3;

/// Why a drop-tail queue the sender's bursts overflow reads the same as
/// the policer, when it does: at the sender, the queue in front of each
/// loss episode drained the bucket's burst at a rate between the two
/// readings (`QueueDrain::undecided`); at the receiver, the link stayed
/// busy across the holes (`policing::HOLE_GAP_BUSY_MAX_SERVICE_TIMES`).
fn drop_tail_reads_the_same(inp: &Input, ev: &Evidence) -> Option<String> {
    if let Some(q) = policing::queue_drain(ev.policer, inp).filter(|q| q.undecided()) {
        return Some(format!(
            "or a drop-tail queue at the flow's own bottleneck: the packets sent just before each loss episode's first loss had waited {:.1} ms in a queue that drained the bucket's burst at {}, {:.1} times the rate the flow got; a policer behind a link that little faster than its rate, and a queue whose flow got that little of its link, read the same; the link's rate (the provider's plan, or a packet-pair probe) or the drop counters of the box in front of it would settle it",
            q.queue_ms,
            fmt_rate(q.drain_bps),
            q.ratio
        ));
    }
    let (gap, holes) = policing::gap_across_holes(inp).filter(|g| g.0 <= policing::HOLE_GAP_BUSY_MAX_SERVICE_TIMES)?;
    Some(format!(
        "or a drop-tail queue the sender's bursts overflow: across the {holes} holes in the sequence the link stayed busy (the segment above each hole arrived {gap:.2} transmission times after the one before it, the median), as it does behind a queue that drops only when full, where a policer's drop leaves its slot empty unless a slower link behind it is still draining its burst; a capture at the sender (the queue in front of each loss) would settle it"
    ))
}

/// Losses that fit a token bucket: a policer, or a shaper when a queue
/// served at the bucket's rate explains the spacing, the queue and the
/// losses by itself (`policing::limiter`), or either when the capture
/// cannot tell.
fn rate_limiter(inp: &Input, ev: &Evidence) -> Call {
    match policing::limiter(ev.policer, inp) {
        // One loss episode is one draw of the drop process: slow start's
        // last round overrunning a bucket whose rate it never showed, and
        // random loss striking inside that round, leave the same trace.
        Limiter::Policer if ev.policer.rate_unseen && ev.loss.episodes < POLICER_MIN_EPISODES_UNSEEN_RATE => Call::capped(
            Cause::Policer,
            Confidence::Medium,
            format!("the losses fell in {} loss episode(s) and the bucket's rate is not seen (the flow never ran at it after its tokens ran out): so few episodes cannot tell a policer from loss that strikes at random; a longer transfer, with more loss episodes, or a capture before the policer would settle it", ev.loss.episodes),
        ),
        Limiter::Policer => match drop_tail_reads_the_same(inp, ev) {
            Some(why) => Call::capped(Cause::Policer, Confidence::Medium, why),
            None => Call::of(Cause::Policer),
        },
        Limiter::Shaper { path_bps, rate_bps, queue_ms, queue_packets } => Call::capped(
            Cause::Shaper,
            Confidence::Medium,
            format!(
                "the losses also fit a token bucket at {}, but ACK trains arrive at {}, not clearly above it, and the RTT rose by {:.1} ms ({:.1} packets at that rate): a queue served at that rate (a shaper) spaced the packets and dropped when full; a policer behind a link of nearly its rate with a queue of its own would look the same, and a capture before the rate limit would tell them apart",
                fmt_rate(rate_bps),
                fmt_rate(path_bps),
                queue_ms,
                queue_packets
            ),
        ),
        Limiter::Either { path_bps, rate_bps, queue_ms, queue_packets } => Call::capped(
            Cause::Policer,
            Confidence::Medium,
            format!(
                "a policer or a shaper with a short queue: ACK trains arrive at {}, not clearly above the bucket's {}, and the RTT rose by {:.1} ms ({:.1} packets at that rate), within the jitter of the RTT; pacing the sender below {} helps with either, and a capture before the rate limit would tell them apart",
                fmt_rate(path_bps),
                fmt_rate(rate_bps),
                queue_ms,
                queue_packets,
                fmt_rate(rate_bps)
            ),
        ),
    }
}

/// Losses with no queue before them, read at the sender: random loss only
/// when they do not depend on how the packets were spaced. Loss that
/// spares the packets sent after a pause is a token bucket's smaller than
/// the bursts when the path is far faster than the flow
/// (`policing::small_bucket`), else one of the two; too few losses for the
/// test leave random loss `medium`.
fn random_loss(inp: &Input, ev: &Evidence) -> Call {
    // Random loss must not depend on how the packets were spaced: the
    // count (a pass over the packets) is made for this verdict only.
    ev.loss.count_spacing(inp);
    if ev.loss.spares_spaced_packets() {
        return match policing::small_bucket(inp) {
            // With the path far faster than the flow, no queue of a slower
            // link dropped the bursts: a bucket smaller than them did.
            Some(pairs) => Call {
                small_bucket: Some(policing::small_bucket_verdict(pairs, ev.loss)),
                ..Call::capped(
                    Cause::Policer,
                    Confidence::Medium,
                    format!(
                        "the losses spared packets sent after a pause, and back-to-back packets cross the path at {} (packet pairs): a token bucket holding fewer tokens than the sender's bursts (small, or drained by other flows); its rate is not measured (this flow alone stays below it). A capture before the policer, the provider's policing settings, or pacing the sender (fq) and seeing the losses stop would settle it",
                        fmt_rate(pairs)
                    ),
                )
            },
            None => Call::capped(
                Cause::RandomLoss,
                Confidence::Medium,
                "the losses spared packets sent after a pause, which random loss would not: a policer with a small bucket or a shallow queue fits too; the interface error counters on the path (ethtool -S, ip -s link) or a capture before the loss would settle it".into(),
            ),
        };
    }
    if !ev.loss.spacing_could_tell() {
        // Too few losses for the spacing test to see loss that depends on
        // the sending pattern: the verdict rests on the absence of a queue
        // alone.
        let (spaced, p) = ev.loss.spacing_counts().unwrap_or((0, 0.0));
        return Call::capped(
            Cause::RandomLoss,
            Confidence::Medium,
            format!(
                "too few losses to tell random loss from loss that depends on how the sender sends (a policer's small bucket, a shallow queue): {} packets were sent after a pause, and at the overall loss rate of {:.2}% even none of them lost would not have ruled random loss out; a longer capture, or the interface error counters on the path (ethtool -S, ip -s link), would settle it",
                spaced,
                p * 100.0
            ),
        );
    }
    Call::of(Cause::RandomLoss)
}

/// The causes that explain the time by themselves, in order.
fn decisive(inp: &Input, ev: &Evidence) -> Option<Cause> {
    let s = &inp.shares;
    let no_loss = !ev.lost();
    if ev.spurious.explains(inp, ev.loss.retransmissions, ev.loss.deep_queue) {
        Some(ev.spurious.cause())
    } else if policing::explains(ev.policer, ev.loss, inp) {
        Some(Cause::Policer)
    } else if ev.window.scaling_off_explains(inp) {
        Some(Cause::WindowScalingOff)
    } else if ev.start.cached && no_loss && s.congestion_window + s.send_buffer >= CACHED_MIN_SHARE && s.congestion_window >= s.send_buffer {
        Some(Cause::CachedSsthresh)
    } else if ev.window.reader_explains(inp) {
        Some(Cause::ReceiverApplication)
    } else if ev.request_response {
        // Request/response: did the responses pay slow start?
        Some(if ev.start.responses_restart(inp.cs.handshake_seen()) {
            Cause::SlowStart
        } else if s.receiver_window >= REQRESP_WINDOW_MIN_SHARE {
            Cause::ReceiverWindow
        } else {
            Cause::None
        })
    } else {
        None
    }
}

/// The state that held the sender longest, read with the loss evidence.
fn by_leading_state(inp: &Input, ev: &Evidence, confidence: &mut Confidence) -> Cause {
    let s = &inp.shares;
    let loss = ev.loss;
    let mut best = [
        (Limit::ReceiverWindow, s.receiver_window),
        (Limit::SendBuffer, s.send_buffer),
        (Limit::SenderApplication, s.sender_application),
        (Limit::CongestionWindow, s.congestion_window),
        (Limit::BottleneckLink, s.bottleneck_link),
        (Limit::SlowStart, s.slow_start),
    ];
    best.sort_by(|a, b| b.1.total_cmp(&a.1));
    let (top, share) = best[0];
    if share < LEAD_MIN_SHARE {
        *confidence = Confidence::Medium;
    }
    // How full the link is: this flow and the others on it at the time.
    let used = inp.link_used_bps();
    let goodput_share = |share: f64| inp.path.path_bps().zip(used).is_some_and(|(p, g)| g >= share * p);
    let link_not_full = inp.path.path_bps().zip(used).is_some_and(|(p, g)| g < LINK_NOT_FULL_SHARE * p);
    let lossy = ev.lost();
    let sender_bursts = || if s.send_buffer >= s.sender_application { Cause::SendBuffer } else { Cause::SenderApplication };
    match top {
        Limit::CongestionWindow if lossy => {
            if loss.queue_rests_on_overshoot() {
                // One ambiguous episode tipped it (see the method).
                confidence.cap(Confidence::Medium);
            }
            loss.cause(inp)
        }
        Limit::CongestionWindow => {
            if goodput_share(CWND_AT_LINK_SHARE) {
                Cause::BottleneckLink
            } else if ev.start.cold {
                Cause::SlowStart
            } else {
                *confidence = Confidence::Low;
                Cause::None
            }
        }
        Limit::SendBuffer if ev.start.cold => Cause::SlowStart,
        Limit::SendBuffer
            if lossy
                && loss.episodes >= FREQUENT_LOSS_MIN_EPISODES
                && !loss.mostly_after_queue()
                && s.congestion_window + s.send_buffer >= CACHED_MIN_SHARE =>
        {
            loss.cause(inp)
        }
        // Queueing without a full link: bursts from a sender that holds
        // back between them (its buffer or its application).
        Limit::BottleneckLink if link_not_full && s.send_buffer + s.sender_application >= SENDER_BURSTS_MIN_SHARE => {
            *confidence = Confidence::Medium;
            sender_bursts()
        }
        Limit::BottleneckLink => {
            if lossy && loss.episodes > 0 && !loss.mostly_after_queue() && inp.path.sender_side && !goodput_share(LINK_FULL_DESPITE_LOSS_SHARE) {
                Cause::RandomLoss
            } else if loss.deep_queue {
                Cause::Shaper
            } else {
                Cause::BottleneckLink
            }
        }
        Limit::ReceiverWindow => Cause::ReceiverWindow,
        Limit::SendBuffer => Cause::SendBuffer,
        Limit::SenderApplication => Cause::SenderApplication,
        Limit::SlowStart => Cause::SlowStart,
        // Not among the candidates: the policer and the receiving
        // application are decided before, idle is no limit.
        Limit::Policer => Cause::Policer,
        Limit::ReceiverApplication => Cause::ReceiverApplication,
        Limit::Idle => Cause::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::{testkit, Shares};

    fn decide_states(states: &[Limit], loss: Loss) -> Decision {
        decide_policed(states, loss, PolicerVerdict::default())
    }

    fn decide_policed(states: &[Limit], loss: Loss, policer: PolicerVerdict) -> Decision {
        decide_with(states, loss, policer, Start::default())
    }

    fn decide_with(states: &[Limit], loss: Loss, policer: PolicerVerdict, start: Start) -> Decision {
        decide_spurious(states, loss, policer, start, Spurious::default())
    }

    fn decide_spurious(states: &[Limit], loss: Loss, policer: PolicerVerdict, start: Start, spurious: Spurious) -> Decision {
        let cs = testkit::summary();
        let path = testkit::path(true, 20.0);
        let r = testkit::records();
        let inp = Input { cs: &cs, d: 0, ds: &cs.directions[0], peer: &cs.directions[1], r: &r, path: &path, iv: &[], states, shares: Shares::of(states) };
        let window = Window { scaling_off: false, max_bytes: 1 << 20, zero_window_s: 0.0 };
        let ev = Evidence { window: &window, loss: &loss, spurious: &spurious, policer: &policer, start: &start, request_response: false, wakes: None, chunks: None };
        decide(&inp, &ev)
    }

    #[test]
    fn the_leading_state_is_the_cause_and_a_weak_lead_is_medium() {
        let d = decide_states(&[vec![Limit::ReceiverWindow; 8], vec![Limit::SlowStart; 2]].concat(), Loss::default());
        assert_eq!((d.primary, d.confidence), (Cause::ReceiverWindow, Confidence::High));
        let mixed = [vec![Limit::ReceiverWindow; 3], vec![Limit::SendBuffer; 3], vec![Limit::SlowStart; 2], vec![Limit::SenderApplication; 2]].concat();
        let d = decide_states(&mixed, Loss::default());
        assert_eq!(d.confidence, Confidence::Medium);
    }

    #[test]
    fn congestion_window_time_with_losses_is_read_from_the_losses() {
        let states = vec![Limit::CongestionWindow; 10];
        let loss = Loss { retransmissions: 30, data_segments: 1000, episodes: 6, ..Default::default() };
        assert_eq!(decide_states(&states, loss).primary, Cause::RandomLoss);
        let queued = Loss { retransmissions: 30, data_segments: 1000, episodes: 6, inflated_before: 5, ..Default::default() };
        assert_eq!(decide_states(&states, queued).primary, Cause::BottleneckLink);
        // no loss, no path rate, no cold start: nothing to blame
        let d = decide_states(&states, Loss::default());
        assert_eq!((d.primary, d.confidence), (Cause::None, Confidence::Low));
    }

    /// A slow start that ended early without a loss is a cached ssthresh
    /// when congestion avoidance's growth held the transfer, not when a
    /// flat flight did (held out, bench/independent sndbuf-25 from the
    /// receiver: a 64 KiB send buffer, the flight flat 95% of the time).
    #[test]
    fn a_cached_ssthresh_holds_a_growing_flight_not_a_flat_one_and_a_spurious_retransmission_loses_nothing() {
        let cached = || Start { cached: true, ..Start::default() };
        let growing = [vec![Limit::CongestionWindow; 9], vec![Limit::SendBuffer; 1]].concat();
        assert_eq!(decide_with(&growing, Loss::default(), PolicerVerdict::default(), cached()).primary, Cause::CachedSsthresh);
        let flat = [vec![Limit::CongestionWindow; 1], vec![Limit::SendBuffer; 19]].concat();
        assert_eq!(decide_with(&flat, Loss::default(), PolicerVerdict::default(), cached()).primary, Cause::SendBuffer);
        // One retransmission, spurious: Linux undoes its cut, nothing was
        // lost (held out: the same run read random_loss medium).
        let one = || Loss { retransmissions: 1, data_segments: 5000, episodes: 1, ..Default::default() };
        let spurious = Spurious { frames: vec![7], rtt_jump: None, early_timer: None };
        assert_eq!(decide_spurious(&growing, one(), PolicerVerdict::default(), cached(), spurious).primary, Cause::CachedSsthresh);
        assert_eq!(decide_with(&growing, one(), PolicerVerdict::default(), cached()).primary, Cause::RandomLoss);
    }

    /// Measured on a Reno sender behind a 20 Mbit/s, 100 KB policer at
    /// 80 ms (bench/cc-matrix.py --paths policer): two episodes, the first
    /// slow start's overshoot, the second with no queue before it, and
    /// losses that fit a token bucket with 0.3 ms of queue in front of
    /// them. It was `congestion_loss` `high`.
    #[test]
    fn an_overshoot_alone_does_not_make_a_queue_of_a_bucket() {
        let states = vec![Limit::CongestionWindow; 10];
        let loss = || Loss { retransmissions: 71, data_segments: 8500, episodes: 2, overshoot: true, ..Default::default() };
        assert!(loss().queue_rests_on_overshoot());
        let d = decide_states(&states, loss());
        assert_ne!(d.primary, Cause::Policer);
        assert_eq!(d.confidence, Confidence::Medium, "one ambiguous episode decided it");
        let policed = PolicerVerdict { policed: true, rate_bps: Some(12.6e6), queue_before_losses_ns: Some(300_000), ..Default::default() };
        assert_eq!(decide_policed(&states, loss(), policed.clone()).primary, Cause::Policer);
        // With a queue in front of the losses (BBR on a 1% loss path at
        // 100 ms, from the receiver: 64 ms), the overshoot keeps counting.
        let queued_losses = PolicerVerdict { queue_before_losses_ns: Some(64_000_000), ..policed.clone() };
        assert_ne!(decide_policed(&states, loss(), queued_losses).primary, Cause::Policer);
        // A later episode after a queue keeps the queue's side.
        let queued = Loss { inflated_before: 1, ..loss() };
        assert!(!queued.queue_rests_on_overshoot());
        assert_ne!(decide_policed(&states, queued, policed.clone()).primary, Cause::Policer);
        // The overshoot the only episode (held out, bench/independent
        // policer-30: CUBIC behind a 30 Mbit/s, 150 KB bucket at 60 ms,
        // 119 losses in slow start, 0.3 ms of queue in front of them, then
        // 8 s without one). It was `bottleneck_link` `high`.
        let alone = || Loss { retransmissions: 119, data_segments: 17000, episodes: 1, overshoot: true, ..Default::default() };
        assert!(alone().queue_rests_on_overshoot());
        assert_eq!(decide_policed(&states, alone(), policed).primary, Cause::Policer);
        assert_eq!(decide_states(&states, alone()).confidence, Confidence::Medium);
    }

    /// 1% random loss on a 40 ms path with no rate limit (tests/system/
    /// test_pair.py, loss-between): one loss episode that fit a "0 B"
    /// bucket whose rate the losses did not show read `policer` `high`
    /// from both ends. So few episodes leave it `medium`; more keep it.
    #[test]
    fn a_policer_from_too_few_episodes_with_an_unseen_rate_is_medium() {
        let states = vec![Limit::CongestionWindow; 10];
        let loss = |episodes| Loss { retransmissions: 22, data_segments: 2100, episodes, overshoot: true, ..Default::default() };
        let unseen = PolicerVerdict { policed: true, rate_bps: Some(88e6), rate_unseen: true, queue_before_losses_ns: Some(0), ..Default::default() };
        for episodes in [1, 2] {
            let d = decide_policed(&states, loss(episodes), unseen.clone());
            assert_eq!((d.primary, d.confidence), (Cause::Policer, Confidence::Medium), "{episodes} episode(s)");
            assert!(d.to_confirm.iter().any(|n| n.contains("loss episode")), "{:?}", d.to_confirm);
        }
        let many = Loss { inflated_before: 0, ..loss(POLICER_MIN_EPISODES_UNSEEN_RATE) };
        let d = decide_policed(&states, many, unseen.clone());
        assert_eq!(d.primary, Cause::Policer);
        assert!(d.to_confirm.iter().all(|n| !n.contains("loss episode")), "{:?}", d.to_confirm);
        // a rate the losses show is the paper's policer, however few episodes
        let seen = PolicerVerdict { rate_unseen: false, ..unseen };
        assert!(decide_policed(&states, loss(1), seen).to_confirm.iter().all(|n| !n.contains("loss episode")));
    }
}
