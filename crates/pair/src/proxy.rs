//! Two connections a terminating proxy joins, one captured at each point.
//!
//! No segment crosses a terminating proxy: it acknowledges what it
//! receives and sends the bytes again on its own connection. What the two
//! captures share is the byte stream and causality: a byte leaves the
//! proxy only after it arrived there. That bounds the clocks (from the
//! first and last byte of each direction) and shows where the bytes
//! waited: a server that finished long before the client received is a
//! proxy holding the data, and what the proxy releases per round trip to
//! the client, below the client's window, is its send buffer (seed 004:
//! 30 KB every 150 ms behind nginx's 4 MB in 60 ms).

use crate::samples::Samples;
use crate::stream::Rec;

/// Progress points kept per direction and point (a series for "how much
/// had the client received when the server finished").
const PROGRESS_POINTS: i64 = 512;

/// The first round trips of the client's connection are slow start, not
/// the proxy's steady release (RFC 5681: the window doubles each round
/// from the initial window of 10 segments, RFC 6928): left out of the
/// release per round.
pub const RELEASE_SKIP_ROUNDS: usize = 4;

/// A round's release counts as the proxy's, not the client's window, when
/// it is at most this share of the client's largest advertised window: a
/// window-limited sender fills its window each round (Linux sends up to
/// min(cwnd, rwnd), tcp_cwnd_test and tcp_snd_wnd_test).
pub const RELEASE_MAX_WINDOW_SHARE: f64 = 0.8;

/// One direction's byte stream as one point saw it.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    pub first_ns: Option<i64>,
    pub last_ns: Option<i64>,
    pub end: i64,
    step: i64,
    /// (time, stream end) at about every 1/[`PROGRESS_POINTS`] of the bytes.
    series: Vec<(i64, i64)>,
}

impl Progress {
    fn with_total(total: i64) -> Self {
        Progress { step: (total / PROGRESS_POINTS).max(1), ..Default::default() }
    }

    fn add(&mut self, t: i64, end: i64) {
        self.first_ns.get_or_insert(t);
        self.last_ns = Some(t);
        if end > self.end {
            if self.series.last().is_none_or(|&(_, e)| end - e >= self.step) {
                self.series.push((t, end));
            }
            self.end = end;
        }
    }

    /// Bytes of the stream seen by time `t` (at most: the next progress point).
    pub fn by(&self, t: i64) -> i64 {
        match self.series.iter().position(|&(x, _)| x > t) {
            Some(i) => self.series[i].1 - 1,
            None => self.end - 1,
        }
    }
}

pub struct ProxyCompare {
    pub client_point: usize,
    pub client_side: [usize; 2],
    /// [direction: 0 the client's data, 1 the server's][capture point]
    pub progress: [[Progress; 2]; 2],
    /// Bytes the client received per round (bursts parted by half its RTT
    /// to the proxy), at the client's point.
    pub rounds: Samples,
    round: (i64, i64),
    pub round_gap_ns: Option<i64>,
    /// The client's largest advertised window (bytes), at its point.
    pub client_window_max: u64,
}

impl ProxyCompare {
    /// `totals[k][p]`: the bytes pass 1 counted; `client_rtt_ns`: SYN to
    /// SYN-ACK at the client's point (the round trip to the proxy).
    pub fn new(client_side: [usize; 2], client_point: usize, totals: [[i64; 2]; 2], client_rtt_ns: Option<i64>) -> Self {
        let p = |k: usize| [Progress::with_total(totals[k][0]), Progress::with_total(totals[k][1])];
        ProxyCompare {
            client_point,
            client_side,
            progress: [p(0), p(1)],
            rounds: Samples::default(),
            round: (0, i64::MIN),
            round_gap_ns: client_rtt_ns.filter(|&r| r > 0).map(|r| r / 2),
            client_window_max: 0,
        }
    }

    pub fn record(&mut self, p: usize, r: &Rec) {
        let k = usize::from(r.dir as usize != self.client_side[p]);
        if k == 0 && p == self.client_point {
            self.client_window_max = self.client_window_max.max(r.window_bytes);
        }
        if r.len == 0 {
            return;
        }
        self.progress[k][p].add(r.time_ns, r.seq + r.len as i64);
        if let (1, Some(gap)) = (k, self.round_gap_ns) {
            if p == self.client_point && !r.retrans {
                if r.time_ns - self.round.1 > gap && self.round.0 > 0 {
                    self.rounds.push(self.round.0, self.round.1);
                    self.round.0 = 0;
                }
                self.round = (self.round.0 + r.len as i64, r.time_ns);
            }
        }
    }

    /// The direction's upstream point: the client's data passes the
    /// client's point first.
    pub fn upstream(&self, k: usize) -> usize {
        if k == 0 { self.client_point } else { 1 - self.client_point }
    }

    /// Bounds on capture 1's clock minus capture 0's: each direction's
    /// first and last byte left the proxy after they reached it.
    pub fn offset_bounds(&self) -> Option<(i64, i64)> {
        let (mut lo, mut hi) = (i64::MIN, i64::MAX);
        for k in 0..2 {
            let up = self.upstream(k);
            let (u, d) = (&self.progress[k][up], &self.progress[k][1 - up]);
            for (tu, td) in [(u.first_ns, d.first_ns), (u.last_ns, d.last_ns)] {
                let (Some(tu), Some(td)) = (tu, td) else { continue };
                if up == 0 {
                    hi = hi.min(td - tu);
                } else {
                    lo = lo.max(tu - td);
                }
            }
        }
        crate::samples::bounds(lo, hi)
    }

    /// What the proxy released to the client per round, after slow start
    /// ([`RELEASE_SKIP_ROUNDS`]): the median, and the rounds counted.
    pub fn release_per_round(&self) -> Option<(i64, u64)> {
        let n = self.rounds.len();
        if n < RELEASE_SKIP_ROUNDS as u64 + 3 {
            return None;
        }
        // the decimated sample keeps the early rounds first: skip them
        let v = self.rounds.kept_from(RELEASE_SKIP_ROUNDS);
        crate::matching::median(v).map(|m| (m, n - RELEASE_SKIP_ROUNDS as u64))
    }
}
