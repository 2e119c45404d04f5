//! Traffic shape before cause: whether a direction's pauses are the peer's
//! turn (request/response) or the sender's own (bulk written in bursts, a
//! paced stream, a speed test's chunks). The request/response analysis
//! (did each response pay slow start again?) applies only to the first.
//!
//! A request/response protocol alternates turns (HTTP/1.1, RFC 9112 section
//! 9.3; RPCs, SMB, SMTP): each response follows the peer's request. So a
//! burst after a pause is a response only when the receiver sent data (its
//! request) in that pause or as the burst began. A sender that pauses on
//! its own while the peer sends small messages now and then (a speed test
//! over a WebSocket reporting its measurements, a control channel) is not
//! answering them.

use crate::limits::Interval;
pub use crate::model::Shape;
use tcpwhy_core::Limit;

/// Share of the direction's time idle (no data sent in the interval) from
/// which its pauses shape the transfer; below it the transfer is bulk.
/// Carried over from the earlier rule (chosen on the lab's request/response
/// scenarios, whose responses leave 70% or more of the time idle, against
/// under 10% for the bulk ones).
pub const PAUSED_MIN_IDLE_SHARE: f64 = 0.3;
/// Share of the bursts after the first that must follow the receiver's
/// turn for request/response: most of them (a majority rule; a request may
/// be missed by a capture that started mid-exchange).
pub const REQUEST_RESPONSE_MIN_TURN_SHARE: f64 = 0.5;

/// Runs of non-idle intervals: (first, one past the last).
pub fn bursts(states: &[Limit]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut cur: Option<usize> = None;
    for (i, s) in states.iter().enumerate() {
        match (cur, *s == Limit::Idle) {
            (None, false) => cur = Some(i),
            (Some(a), true) => {
                out.push((a, i));
                cur = None;
            }
            _ => {}
        }
    }
    if let Some(a) = cur {
        out.push((a, states.len()));
    }
    out
}

/// Bursts after the first that began on the receiver's turn: it sent data
/// in the pause before them or in their first interval.
pub fn turns(bursts: &[(usize, usize)], iv: &[Interval]) -> usize {
    bursts
        .windows(2)
        .filter(|w| {
            let (prev_end, start) = (w[0].1, w[1].0);
            iv[prev_end.min(start)..=start].iter().any(|x| x.reverse_data)
        })
        .count()
}

pub fn classify(bursts: &[(usize, usize)], iv: &[Interval], idle_share: f64) -> Shape {
    if bursts.len() < 2 || idle_share < PAUSED_MIN_IDLE_SHARE {
        return Shape::Bulk;
    }
    let later = (bursts.len() - 1) as f64;
    if turns(bursts, iv) as f64 >= REQUEST_RESPONSE_MIN_TURN_SHARE * later {
        Shape::RequestResponse
    } else {
        Shape::SenderPaced
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Intervals from a pattern: 'D' data, 'R' data with the receiver's
    /// data in the same interval, '.' idle, 'r' idle with the receiver's data.
    fn series(p: &str) -> (Vec<Limit>, Vec<Interval>) {
        let states = p.chars().map(|c| if c == '.' || c == 'r' { Limit::Idle } else { Limit::CongestionWindow }).collect();
        let iv = p.chars().map(|c| Interval { reverse_data: c == 'r' || c == 'R', ..Default::default() }).collect();
        (states, iv)
    }

    fn shape(p: &str) -> Shape {
        let (states, iv) = series(p);
        let idle = states.iter().filter(|s| **s == Limit::Idle).count() as f64 / states.len() as f64;
        classify(&bursts(&states), &iv, idle)
    }

    #[test]
    fn responses_after_requests_are_request_response() {
        // Three exchanges: the request arrives in the pause, the response follows.
        assert_eq!(shape("DD....rDD....rDD...."), Shape::RequestResponse);
        // The request in the response's first interval counts as well.
        assert_eq!(shape("DD.....RD.....RD...."), Shape::RequestResponse);
    }

    #[test]
    fn a_sender_pausing_on_its_own_is_not_answering() {
        // A speed-test upload: the sender writes in chunks with pauses, the
        // receiver reports now and then, in the middle of a chunk.
        assert_eq!(shape("DDRD....DDDD....DRDD....DDDD...."), Shape::SenderPaced);
    }

    #[test]
    fn mostly_busy_is_bulk_whatever_the_receiver_sends() {
        assert_eq!(shape("DDDDRDDDDDDRDDD.DDDD"), Shape::Bulk);
        assert_eq!(shape("DDDDDDDD"), Shape::Bulk);
    }
}
