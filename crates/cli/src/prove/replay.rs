//! The captured conversation as a lab script: each turn of the connection
//! (a run of one end's data with none of the other's between) becomes a
//! step written by the same end, after the think time the capture shows
//! before it. A fix then runs against the same turns and waits, as the
//! what-if replays them (tcpwhy_diagnose::timeline: the idle time between
//! turns stays as captured).

use tcpwhy_core::units::calc;
use tcpwhy_diagnose::latency::TurnSpan;
use tcpwhy_traffic::{End, Step, MAX_STEPS};

/// A replay runs the capture's own time: at most this many seconds of its
/// turns (the first turns that fit, and at most the lab's `MAX_STEPS`), so that the five runs a judgement may
/// take, and each fix's, fit in a few minutes. A turn's timing cannot be
/// scaled down as a bulk transfer's bytes are: its round trips and think
/// times would take a larger share of a shorter run.
pub const MAX_REPLAY_SECONDS: f64 = 15.0;


/// Where the capture was taken, for the think times: a gap seen near the
/// end that waits holds a round trip besides the other end's think time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Near {
    A,
    B,
    /// In the middle, or unknown: half a round trip is taken off.
    Middle,
}

/// The captured connection the script is made from.
pub struct Conversation<'a> {
    pub turns: &'a [TurnSpan],
    pub client_is_a: bool,
    /// The data sender of the diagnosed direction is endpoint a.
    pub sender_is_a: bool,
    pub near: Near,
    /// The round trip of the rebuild's path (seconds).
    pub rtt_s: f64,
    /// The SYN's time, when the handshake is in the capture.
    pub syn: Option<f64>,
    /// The times (start, end) the diagnosed direction's receiving
    /// application held it.
    pub reader_held: &'a [(f64, f64)],
}

/// The script, and the part of the capture it replays.
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    pub steps: Vec<Step>,
    /// Turns replayed, of all the connection's.
    pub turns: usize,
    pub turns_total: usize,
    /// The data sender's turns among them, their bytes, and the time from
    /// the first's first segment to the last's last (the direction's
    /// duration as the diagnosis counts it, over the replayed turns).
    pub data_turns: usize,
    pub data_bytes: u64,
    pub data_span_s: f64,
    /// Steps whose reader stalls as the capture's did.
    pub reader_steps: usize,
}

impl Conversation<'_> {
    /// The script, when the direction's data came in two turns or more
    /// (with the other end's turns between): a single turn is a bulk
    /// transfer, rebuilt as one.
    pub fn script(&self) -> Option<Script> {
        let first = self.turns.first()?.first;
        let used = self.turns.iter().take(MAX_STEPS).take_while(|t| t.last - first <= MAX_REPLAY_SECONDS).count();
        let turns = &self.turns[..used];
        let data: Vec<&TurnSpan> = turns.iter().filter(|t| t.from_a == self.sender_is_a).collect();
        if data.len() < 2 {
            return None;
        }
        let mut steps = Vec::with_capacity(turns.len());
        let mut reader_steps = 0;
        for (k, t) in turns.iter().enumerate() {
            let wait_s = match k {
                0 => self.syn.map_or(0.0, |s| t.first - s - self.rtt_s),
                _ => {
                    let prev = &turns[k - 1];
                    let gap = t.first - prev.last;
                    match prev.acked.filter(|&a| a <= t.first) {
                        _ if prev.from_a == t.from_a => gap,
                        // the answer's first byte after the ACK of what it
                        // answers: both travel the same way, so the gap
                        // between them is the think time at any capture
                        // point, whatever queue delayed the turn's end
                        Some(a) => t.first - a,
                        None => gap - self.rtt_s * self.share_seen_twice(prev.from_a),
                    }
                }
            };
            let from = if t.from_a == self.client_is_a { End::Client } else { End::Server };
            let held = if t.from_a == self.sender_is_a { self.reader_held_in(t) } else { 0.0 };
            reader_steps += usize::from(held > 0.0);
            steps.push(Step { from, bytes: t.bytes.max(1), wait_ms: ms(wait_s), read_pause_ms: ms(held) });
        }
        Some(Script {
            steps,
            turns: used,
            turns_total: self.turns.len(),
            data_turns: data.len(),
            data_bytes: data.iter().map(|t| t.bytes).sum(),
            data_span_s: data[data.len() - 1].last - data[0].first,
            reader_steps,
        })
    }

    /// Without the ACK of a turn: the share of a round trip a gap between
    /// `prev_from_a`'s turn and the other end's answer holds besides the
    /// answer's think time: all of it seen near the end that waited, none
    /// near the end that answers (a queue at the turn's end is counted as
    /// think time then).
    fn share_seen_twice(&self, prev_from_a: bool) -> f64 {
        match self.near {
            Near::A if prev_from_a => 1.0,
            Near::B if !prev_from_a => 1.0,
            Near::Middle => 0.5,
            _ => 0.0,
        }
    }

    /// The time the receiving application held a data turn (its window
    /// closed): the lab's reader stops that long after its first read of
    /// the turn.
    fn reader_held_in(&self, t: &TurnSpan) -> f64 {
        self.reader_held.iter().map(|&(s, e)| (e.min(t.last) - s.max(t.first)).max(0.0)).sum()
    }
}

/// Seconds as milliseconds to the microsecond, at least 0.
fn ms(s: f64) -> f64 {
    calc::ms_from_us(calc::us_from_s(s.max(0.0)).round())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(from_a: bool, bytes: u64, first: f64, last: f64) -> TurnSpan {
        TurnSpan { from_a, bytes, first, last, acked: None }
    }

    /// An SMTP upload seen at the client (a): the server's greeting and
    /// replies come a round trip (0.1 s) plus its think time after each
    /// command; the data goes in two turns.
    fn smtp() -> Vec<TurnSpan> {
        vec![
            turn(false, 23, 0.25, 0.25),
            turn(true, 20, 0.26, 0.26),
            turn(false, 40, 0.41, 0.41),
            turn(true, 400_000, 0.42, 0.92),
            turn(false, 6, 1.07, 1.07),
            turn(true, 400_000, 1.08, 1.18),
            turn(false, 6, 1.33, 1.33),
        ]
    }

    fn conv<'a>(turns: &'a [TurnSpan], near: Near, held: &'a [(f64, f64)]) -> Conversation<'a> {
        Conversation { turns, client_is_a: true, sender_is_a: true, near, rtt_s: 0.1, syn: Some(0.0), reader_held: held }
    }

    #[test]
    fn each_turn_is_a_step_of_its_end_after_its_think_time() {
        let t = smtp();
        let s = conv(&t, Near::A, &[]).script().unwrap();
        assert_eq!(s.turns, 7);
        // the sender's command counts, as the direction's bytes and
        // duration count it
        assert_eq!((s.data_turns, s.data_bytes), (3, 800_020));
        assert!((s.data_span_s - 0.92).abs() < 1e-9);
        let from: Vec<End> = s.steps.iter().map(|x| x.from).collect();
        assert_eq!(from, [End::Server, End::Client, End::Server, End::Client, End::Server, End::Client, End::Server]);
        let waits: Vec<f64> = s.steps.iter().map(|x| x.wait_ms).collect();
        // near the client: the server's answers lose a round trip, the
        // client's own turns follow at once
        assert_eq!(waits, [150.0, 10.0, 50.0, 10.0, 50.0, 10.0, 50.0]);
        // seen near the server, the same gaps are the server's own time
        let s = conv(&t, Near::B, &[]).script().unwrap();
        assert_eq!(s.steps[2].wait_ms, 150.0);
        assert_eq!(s.steps[1].wait_ms, 0.0, "the client's gap held the round trip");
    }

    #[test]
    fn the_think_time_runs_from_the_ack_of_what_it_answers() {
        // seen at the server: a response whose end sat 0.35 s in a queue,
        // ACKed by the client 0.47 s after its last segment left, and the
        // next request 1.0 s after that ACK
        let t = [
            turn(true, 8, 0.0, 0.0),
            TurnSpan { acked: Some(2.0 + 0.47), ..turn(false, 2_000_000, 0.001, 2.0) },
            turn(true, 8, 3.47, 3.47),
            turn(false, 2_000_000, 3.471, 5.0),
        ];
        let s = Conversation { near: Near::B, syn: None, ..conv(&t, Near::B, &[]) }.script().unwrap();
        assert_eq!(s.steps[2].wait_ms, 1000.0);
        assert_eq!(s.steps[2].from, End::Client);
    }

    #[test]
    fn a_turn_the_reader_held_stalls_its_reads_as_long() {
        let t = smtp();
        let s = conv(&t, Near::A, &[(0.45, 0.9), (1.5, 1.6)]).script().unwrap();
        assert_eq!(s.reader_steps, 1);
        assert_eq!(s.steps[3].read_pause_ms, 450.0);
        assert_eq!(s.steps[5].read_pause_ms, 0.0);
    }

    #[test]
    fn one_data_turn_is_no_conversation_and_a_long_one_is_cut_at_whole_turns() {
        let t = [turn(false, 100, 0.0, 0.0), turn(true, 1_000_000, 0.1, 3.0)];
        assert!(conv(&t, Near::A, &[]).script().is_none());
        let long: Vec<TurnSpan> = (0..40).map(|i| turn(i % 2 == 1, 1000, i as f64, i as f64 + 0.5)).collect();
        let s = conv(&long, Near::A, &[]).script().unwrap();
        assert_eq!((s.turns, s.turns_total), (15, 40));
        assert!(s.steps.len() == 15 && s.data_turns == 7);
        // a chatty connection: no more turns than a script takes
        let chatty: Vec<TurnSpan> = (0..20_000).map(|i| turn(i % 2 == 1, 10, i as f64 * 1e-4, i as f64 * 1e-4)).collect();
        assert_eq!(conv(&chatty, Near::A, &[]).script().unwrap().turns, MAX_STEPS);
    }
}
