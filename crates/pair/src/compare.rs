//! One connection seen at two points, segment by segment.
//!
//! - **Copies.** A segment is the same at both points when its sequence
//!   number, acknowledgement, TCP timestamp and control flags are ([`Key`]). Copies are paired first in, first out, within
//!   [`MATCH_HORIZON_NS`] of each other.
//! - **Clocks.** A copy cannot arrive before it left: each copy that went
//!   from capture 0 to capture 1 bounds the offset (capture 1's clock minus
//!   capture 0's) from above, each that went the other way from below
//!   (the reasoning of Paxson's "On calibrating measurements of packet
//!   transit times", SIGMETRICS 1998, without assuming symmetry). The
//!   growth of one-way delay needs no offset: it is each copy's delay
//!   less the smallest.
//! - **Where data was lost.** Each data segment's copies are counted at the
//!   upstream and the downstream point until the upstream point sees it
//!   acknowledged ([`Fate`]): fewer copies downstream, then a retransmission,
//!   is loss between the points; a copy that reached the downstream point
//!   and was still retransmitted, without the receiver having acknowledged
//!   or SACKed it, is loss after that point; a first copy the upstream
//!   point saw only as a retransmission was lost before it. A segment the
//!   downstream capture lacks but the receiver acknowledged without any
//!   retransmission was missed by that capture, not lost.

use crate::samples::Samples;
use crate::stream::Rec;
use serde::Serialize;
use std::collections::VecDeque;
use tcpwhy_wire::TcpFlags;

/// How far apart (in capture 0's time, capture 1's moved by the coarse
/// offset) two copies of one segment may be. The coarse offset is the
/// handshake's, wrong by at most a one-way delay; 2 s more covers any
/// queue a TCP connection survives without a retransmission timeout
/// being the norm (RFC 6298's 1 s minimum RTO, doubled).
pub const MATCH_HORIZON_NS: i64 = 2_000_000_000;

/// A data range acknowledged at the upstream point is settled once its last
/// copy is this much older than the merge's clock, or twice the handshake's
/// round trip between the points when that is longer (below the horizon).
/// The acknowledgement reached the upstream point after the data passed the
/// downstream one; what can still come is only a copy that the merge's
/// coarse offset (the handshake's, wrong by at most its one-way delay) put
/// late.
pub const SETTLE_LAG_MIN_NS: i64 = 50_000_000;

/// A data range is settled at the latest this long after its last copy,
/// acknowledged or not: a capture that holds one direction only never shows
/// the upstream point an ACK, and memory must not grow with the capture.
/// Linux gives up retransmitting after about 15 minutes (tcp_retries2), but
/// a retransmission more than a minute later (RFC 6298's 60 s ceiling on the
/// RTO) is not the same loss event.
pub const SETTLE_MAX_AGE_NS: i64 = 60_000_000_000;

/// A queue between the points is reported when the one-way delay's 95th
/// percentile is this far above its minimum: 2 ms is above the jitter of
/// two software captures' timestamps and of a host's scheduler (bench/
/// lab-link measures 0.1 to 0.3 ms at the 99th percentile). A copy that
/// waited this much more than the least is one that found a queue.
pub const QUEUE_MIN_GROWTH_NS: i64 = 2_000_000;

/// Back-to-back queued segments needed before the queue's drain rate is
/// given. Chosen, not derived: one gap is one packet's serialisation time,
/// which a host's scheduler can stretch or squeeze; 20 gaps of 1,500-byte
/// packets span 30 KB. Measured on the lab's 20 Mbit/s tbf only (19.3
/// Mbit/s of payload, tests/system/test_pair.py).
pub const DRAIN_MIN_SEGMENTS: u64 = 20;

/// The rate a queue between the points drains at. While a copy waited in
/// a queue (its one-way delay at least [`QUEUE_MIN_GROWTH_NS`] above the
/// least so far) and so did the one before it, the bottleneck sent them
/// back to back: the downstream gap between them is the time it took to
/// send the later one (packet dispersion at a busy link, Jacobson 1988,
/// Keshav's packet pair). Payload bytes over those gaps is the bottleneck's
/// rate less the headers.
#[derive(Default, Clone)]
pub struct Drain {
    last_queued_ns: Option<i64>,
    pub bytes: u64,
    pub ns: i64,
    pub segments: u64,
}

impl Drain {
    fn copy(&mut self, queued: bool, down_ns: i64, len: u32) {
        if !queued || len == 0 {
            self.last_queued_ns = None;
            return;
        }
        if let Some(prev) = self.last_queued_ns {
            self.bytes += len as u64;
            self.ns += (down_ns - prev).max(0);
            self.segments += 1;
        }
        self.last_queued_ns = Some(down_ns);
    }

    /// Payload bits per second, once enough was seen.
    pub fn rate_bps(&self) -> Option<f64> {
        (self.segments >= DRAIN_MIN_SEGMENTS && self.ns > 0).then(|| self.bytes as f64 * 8.0 / (self.ns as f64 / 1e9))
    }
}

/// Evidence frames kept per kind.
const EVIDENCE_MAX: usize = 5;

/// What makes two captured packets copies of one: the window is left out
/// (a box may rewrite it), and so is the length: a sender's capture holds
/// TSO super-packets that the wire carries as several segments, and the
/// first of those has the super-packet's sequence number, ACK and TSval.
/// The control bits a copy keeps: SYN, FIN, RST and ACK (a box may set
/// ECN's bits, PSH is the sender's hint).
const KEY_FLAGS: u16 = TcpFlags::SYN | TcpFlags::FIN | TcpFlags::RST | TcpFlags::ACK;

#[derive(PartialEq, Eq, Clone, Copy)]
struct Key {
    seq: i64,
    ack: i64,
    tsval: Option<u32>,
    flags: u16,
}

#[derive(Clone, Copy)]
struct Slot {
    key: Key,
    adj_ns: i64,
    time_ns: i64,
    frame: u64,
    raw_window: u32,
    len: u32,
    /// Later copies paired past this one.
    passed: u16,
    taken: bool,
}

/// Copies looked at, at most, for each packet's twin (a path keeps its
/// packets' order: the twin is nearly always the first).
const SCAN_SLOTS: usize = 256;

/// A packet that this many later packets of its direction were paired
/// past is declared unpaired: no FIFO path reorders that far (reordering
/// is rare and short, RFC 4737's measurements and Bennett et al. 1999).
pub const REORDER_MAX_PASSED: u16 = 32;

/// Ranges stepped over from a guess before a binary search instead.
const GUESS_STEPS: usize = 8;

/// One data sequence range's copies at the two points: a copy is a
/// segment that begins at or before the range's start and covers it.
#[derive(Clone)]
struct Fate {
    start: i64,
    end: i64,
    n: [u32; 2],
    first_up_retrans: bool,
    needless: u32,
    last_adj_ns: i64,
    frame: [u64; 2],
    /// The receiver's cumulative ACK covered it, seen at the downstream
    /// point, before a second copy passed there: it had arrived.
    delivered: bool,
}

/// Where one direction's data segments were lost, by segment.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LossCounts {
    /// Data segments (distinct sequence ranges) seen at either point.
    pub segments: u64,
    pub before_upstream: u64,
    pub between: u64,
    pub after_downstream: u64,
    /// Copies one capture lacks though the receiver had them: capture drops.
    pub not_captured_upstream: u64,
    pub not_captured_downstream: u64,
    /// Retransmissions of data the receiver had already acknowledged or SACKed.
    pub needless_retransmissions: u64,
    /// Segments still unacknowledged when the captures ended.
    pub unresolved: u64,
    /// Frames (upstream capture) of segments lost between the points.
    pub between_frames: Vec<u64>,
}

/// One direction of a connection seen at both points.
#[derive(Clone)]
pub struct DirCompare {
    /// The capture point the direction's packets pass first.
    pub up: usize,
    /// Each point's packets not yet paired, in arrival order.
    queue: [VecDeque<Slot>; 2],
    /// Data ranges by start, not overlapping, in order.
    fates: VecDeque<Fate>,
    /// Ranges settled from the front so far: an absolute index less this
    /// is a position in `fates`.
    popped: usize,
    /// Where the last search for the receiver's ACK, and for each point's
    /// data, ended (absolute indices): the next is a few ranges on.
    ack_guess: usize,
    data_guess: [usize; 2],
    cum_ack_up: i64,
    cum_ack_down: i64,
    settle_lag_ns: i64,
    /// Copies carry the same TSval at both points (not across a SYN proxy,
    /// which offsets the timestamps of the connection it splices).
    keyed_by_tsval: bool,
    /// Copies seen at each point, paired, and left unpaired.
    pub seen: [u64; 2],
    pub paired: u64,
    pub unpaired: [u64; 2],
    /// Downstream time minus upstream time of each paired copy (raw clocks),
    /// at the upstream time (capture 0's clock, ns).
    pub owd: Samples,
    /// The drain rate of a queue between the points.
    pub drain: Drain,
    /// RTT samples of this direction's data at each point (ns).
    pub rtt: [Samples; 2],
    /// Paired copies whose window field differs, and the first such.
    pub window_rewritten: u64,
    pub first_window_rewrite: Option<([u64; 2], [u32; 2])>,
    pub loss: LossCounts,
}

impl DirCompare {
    pub fn new(up: usize, settle_lag_ns: i64, keyed_by_tsval: bool) -> Self {
        DirCompare {
            up,
            settle_lag_ns,
            keyed_by_tsval,
            queue: [VecDeque::new(), VecDeque::new()],
            fates: VecDeque::new(),
            popped: 0,
            drain: Drain::default(),
            ack_guess: 0,
            data_guess: [0; 2],
            cum_ack_up: i64::MIN,
            cum_ack_down: i64::MIN,
            seen: [0; 2],
            paired: 0,
            unpaired: [0; 2],
            owd: Samples::default(),
            rtt: [Samples::default(), Samples::default()],
            window_rewritten: 0,
            first_window_rewrite: None,
            loss: LossCounts::default(),
        }
    }

    /// Takes the twin of `key` from point `o`'s queue.
    fn twin(&mut self, o: usize, key: Key) -> Option<Slot> {
        let q = &mut self.queue[o];
        let at = q.iter().take(SCAN_SLOTS).position(|s| !s.taken && s.key == key)?;
        q[at].taken = true;
        let twin = q[at];
        for s in q.iter_mut().take(at).filter(|s| !s.taken) {
            s.passed += 1;
            if s.passed >= REORDER_MAX_PASSED {
                s.taken = true;
                self.unpaired[o] += 1;
            }
        }
        while q.front().is_some_and(|s| s.taken) {
            q.pop_front();
        }
        Some(twin)
    }

    /// A copy at point `p` paired with its twin at the other point, when
    /// one waits there; `adj_ns` is its time on capture 0's clock (coarse).
    /// Returns the raw time difference (capture 1 minus capture 0) of a pair.
    fn pair_copy(&mut self, p: usize, r: &Rec, adj_ns: i64) -> Option<i64> {
        self.seen[p] += 1;
        // pure ACKs are keyed by their ACK alone (their sequence number is
        // the same for all of them)
        let flags = TcpFlags(r.tcp_flags);
        let seq = if r.len == 0 && !flags.syn() && !flags.fin() { i64::MIN } else { r.seq };
        let tsval = if self.keyed_by_tsval { r.tsval } else { None };
        let key = Key { seq, ack: r.ack, tsval, flags: r.tcp_flags & KEY_FLAGS };
        let diff = self.twin(1 - p, key).map(|o| {
            self.paired += 1;
            let (t0, t1) = if p == 0 { (r.time_ns, o.time_ns) } else { (o.time_ns, r.time_ns) };
            let owd = if self.up == 0 { t1 - t0 } else { t0 - t1 };
            self.owd.push(owd, adj_ns.min(o.adj_ns));
            let queued = self.owd.min.is_some_and(|(m, _)| owd - m >= QUEUE_MIN_GROWTH_NS);
            let (down_ns, len) = if p == self.up { (o.time_ns, o.len) } else { (r.time_ns, r.len) };
            self.drain.copy(queued, down_ns, len);
            if o.raw_window != r.raw_window && !flags.syn() {
                self.window_rewritten += 1;
                if self.first_window_rewrite.is_none() {
                    let (f, w) = if p == 0 { ([r.frame, o.frame], [r.raw_window, o.raw_window]) } else { ([o.frame, r.frame], [o.raw_window, r.raw_window]) };
                    self.first_window_rewrite = Some((f, w));
                }
            }
            t1 - t0
        });
        if diff.is_none() {
            self.queue[p].push_back(Slot { key, adj_ns, time_ns: r.time_ns, frame: r.frame, raw_window: r.raw_window, len: r.len, passed: 0, taken: false });
        }
        diff
    }

    /// A copy's data, counted in the data ranges' fates.
    fn data_copy(&mut self, p: usize, r: &Rec, adj_ns: i64) {
        if r.len > 0 && !TcpFlags(r.tcp_flags).syn() {
            self.data(p, r, adj_ns);
        }
    }

    fn new_fate(start: i64, end: i64, adj_ns: i64) -> Fate {
        Fate { start, end, n: [0; 2], first_up_retrans: false, needless: 0, last_adj_ns: adj_ns, frame: [0; 2], delivered: false }
    }

    /// Counts a data segment as a copy of each range whose start it covers;
    /// bytes no range holds yet become new ranges.
    fn data(&mut self, p: usize, r: &Rec, adj_ns: i64) {
        let (seq, end) = (r.seq, r.seq + r.len as i64);
        // new data comes after every range: no search
        let mut i = if self.fates.back().is_none_or(|f| f.end <= seq) { self.fates.len() } else { self.first_ending_after(seq, self.data_guess[p]) };
        let mut at = seq;
        while at < end {
            if i == self.fates.len() || self.fates[i].start > at {
                // bytes no range holds: a new range up to the next one
                let stop = self.fates.get(i).map_or(end, |f| f.start.min(end));
                self.fates.insert(i, Self::new_fate(at, stop, adj_ns));
            }
            let up = self.up;
            let f = &mut self.fates[i];
            // a segment that begins inside a range is a piece of a larger
            // copy seen at the other point, not a copy of its own
            if f.start >= seq {
                if p == up && f.n[p] == 0 && r.retrans {
                    f.first_up_retrans = true;
                }
                if p == up && f.n[p] > 0 && r.needless {
                    f.needless += 1;
                }
                if f.frame[p] == 0 {
                    f.frame[p] = r.frame;
                }
                f.n[p] += 1;
            }
            f.last_adj_ns = f.last_adj_ns.max(adj_ns);
            at = f.end;
            i += 1;
        }
        self.data_guess[p] = self.popped + i;
    }

    /// The position of the first range that ends after `x`, looked for from
    /// `guess` (an absolute index, where the last search of its kind
    /// ended): a few steps while ranges and ACKs come in order, a binary
    /// search otherwise.
    fn first_ending_after(&self, x: i64, guess: usize) -> usize {
        let n = self.fates.len();
        let mut i = guess.saturating_sub(self.popped).min(n);
        if i > 0 && self.fates[i - 1].end > x {
            return self.fates.partition_point(|f| f.end <= x);
        }
        for _ in 0..GUESS_STEPS {
            if i == n || self.fates[i].end > x {
                return i;
            }
            i += 1;
        }
        self.fates.partition_point(|f| f.end <= x)
    }

    /// An acknowledgement of this direction's data, seen at point `p`.
    fn acked(&mut self, p: usize, ack: i64, rtt_ns: Option<i64>, adj_ns: i64) {
        if p == self.up {
            self.cum_ack_up = self.cum_ack_up.max(ack);
        } else if ack > self.cum_ack_down {
            // what this ACK newly covers had reached the receiver: a copy
            // passing the downstream point after it is not a loss there
            let from = self.first_ending_after(self.cum_ack_down, self.ack_guess);
            let mut covered = 0;
            for f in self.fates.range_mut(from..).take_while(|f| f.end <= ack) {
                if f.n[p] == 1 {
                    f.delivered = true;
                }
                covered += 1;
            }
            self.ack_guess = self.popped + from + covered;
            self.cum_ack_down = ack;
        }
        if let Some(rtt) = rtt_ns {
            self.rtt[p].push(rtt, adj_ns);
        }
    }

    /// Gives up the copies still unpaired after the horizon at `now`
    /// (capture 0's clock).
    fn expire_copies(&mut self, now: i64) {
        for p in 0..2 {
            while let Some(s) = self.queue[p].front().copied() {
                if !s.taken && now - s.adj_ns < MATCH_HORIZON_NS {
                    break;
                }
                self.queue[p].pop_front();
                if !s.taken {
                    self.unpaired[p] += 1;
                }
            }
        }
    }

    /// Settles the data ranges acknowledged and old enough at `now`.
    fn expire_fates(&mut self, now: i64) {
        while let Some(f) = self.fates.front() {
            let acked = f.end <= self.cum_ack_up.max(self.cum_ack_down);
            let age = now - f.last_adj_ns;
            if !(acked && age >= self.settle_lag_ns || age >= SETTLE_MAX_AGE_NS) {
                break;
            }
            let f = self.fates.pop_front().expect("front");
            self.popped += 1;
            settle(&mut self.loss, self.up, &f, acked);
        }
    }

    /// Takes the copies' pairing from `o`, which kept it.
    ///
    /// Both takes destructure `o` whole, so a field added to `DirCompare`
    /// does not compile until it is placed in one share or named as
    /// neither's (set at construction).
    fn take_pairing(&mut self, o: DirCompare) {
        let DirCompare {
            // the pairing of copies
            queue,
            seen,
            paired,
            unpaired,
            owd,
            drain,
            window_rewritten,
            first_window_rewrite,
            // the fates' share
            fates: _,
            popped: _,
            ack_guess: _,
            data_guess: _,
            cum_ack_up: _,
            cum_ack_down: _,
            rtt: _,
            loss: _,
            // set at construction, the same in both
            up: _,
            settle_lag_ns: _,
            keyed_by_tsval: _,
        } = o;
        (self.queue, self.seen, self.paired, self.unpaired) = (queue, seen, paired, unpaired);
        (self.owd, self.drain, self.window_rewritten, self.first_window_rewrite) = (owd, drain, window_rewritten, first_window_rewrite);
    }

    /// Takes the data ranges' fates, and the ACKs' part in them, from `o`,
    /// which kept them.
    fn take_fates(&mut self, o: DirCompare) {
        let DirCompare {
            // the fates' share
            fates,
            popped,
            ack_guess,
            data_guess,
            cum_ack_up,
            cum_ack_down,
            rtt,
            loss,
            // the pairing of copies
            queue: _,
            seen: _,
            paired: _,
            unpaired: _,
            owd: _,
            drain: _,
            window_rewritten: _,
            first_window_rewrite: _,
            // set at construction, the same in both
            up: _,
            settle_lag_ns: _,
            keyed_by_tsval: _,
        } = o;
        (self.fates, self.popped, self.ack_guess, self.data_guess) = (fates, popped, ack_guess, data_guess);
        (self.cum_ack_up, self.cum_ack_down, self.rtt, self.loss) = (cum_ack_up, cum_ack_down, rtt, loss);
    }

    /// The captures ended: settles everything left.
    fn finish(&mut self) {
        for p in 0..2 {
            self.unpaired[p] += std::mem::take(&mut self.queue[p]).iter().filter(|s| !s.taken).count() as u64;
        }
        for f in std::mem::take(&mut self.fates) {
            let acked = f.end <= self.cum_ack_up.max(self.cum_ack_down);
            settle(&mut self.loss, self.up, &f, acked);
        }
    }
}

/// Counts one data segment's fate ([`DirCompare`]'s module doc).
fn settle(loss: &mut LossCounts, up: usize, f: &Fate, acked: bool) {
    let (nu, nd) = (f.n[up], f.n[1 - up]);
    loss.segments += 1;
    loss.needless_retransmissions += f.needless as u64;
    if !acked && nu.max(nd) <= 1 {
        loss.unresolved += 1;
        return;
    }
    if nd > nu {
        loss.not_captured_upstream += (nd - nu) as u64;
    } else if f.first_up_retrans {
        loss.before_upstream += 1;
    }
    if nu > nd {
        let missing = (nu - nd) as u64;
        let lost = if nd == 0 && acked {
            // the receiver acknowledged a copy this capture never saw
            loss.not_captured_downstream += 1;
            missing - 1
        } else {
            missing
        };
        loss.between += lost;
        if lost > 0 && loss.between_frames.len() < EVIDENCE_MAX {
            loss.between_frames.push(f.frame[up]);
        }
    }
    let both = nu.min(nd);
    if both >= 2 && !f.delivered {
        loss.after_downstream += (both - 1).saturating_sub(f.needless) as u64;
    }
}

/// Which of a comparison's four states a reader of its records keeps:
/// each direction's pairing of copies (the one-way delay, the drain, the
/// rewritten windows) and its data ranges' fates (the losses, the RTT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keep {
    pub pairing: [bool; 2],
    pub fates: [bool; 2],
}

impl Keep {
    pub const ALL: Keep = Keep { pairing: [true; 2], fates: [true; 2] };

    /// Share `i` of two readers of the same records, for a connection
    /// whose direction `heavy` carried the more data: share 0 keeps that
    /// direction's data ranges' fates alone (the heaviest of the four: a
    /// range per data segment, each ACK walking them), share 1 the other
    /// three. On the bench's bulk transfer paired with itself that is 4%
    /// faster (wall) than a share per direction, whose data direction
    /// waited on its ranges.
    pub fn share(heavy: usize, i: usize) -> Keep {
        let mine = |d: usize| (i == 0) == (d == heavy);
        Keep { fates: [mine(0), mine(1)], pairing: [i == 1, i == 1] }
    }
}

/// A connection seen at both points: both directions ([`DirCompare`]),
/// indexed 0 for the client's data, 1 for the server's.
#[derive(Clone)]
pub struct ConnCompare {
    pub client_side: [usize; 2],
    pub dirs: [DirCompare; 2],
    /// Bounds on capture 1's clock minus capture 0's, from causality.
    pub offset_lo: i64,
    pub offset_hi: i64,
    /// A box answered the handshake (a SYN proxy): each point's SYN and
    /// SYN-ACK are different packets, not copies.
    handshake_answered_in_middle: bool,
}

impl ConnCompare {
    /// `client_point`: the capture nearer the client; `gap_ns`: SYN to
    /// SYN-ACK there, when seen ([`SETTLE_LAG_MIN_NS`]);
    /// `answered_in_middle`: a SYN proxy answered the handshake.
    pub fn new(client_side: [usize; 2], client_point: usize, gap_ns: Option<i64>, answered_in_middle: bool) -> Self {
        let lag = gap_ns.map_or(MATCH_HORIZON_NS, |g| (2 * g).clamp(SETTLE_LAG_MIN_NS, MATCH_HORIZON_NS));
        let ts = !answered_in_middle;
        ConnCompare {
            client_side,
            dirs: [DirCompare::new(client_point, lag, ts), DirCompare::new(1 - client_point, lag, ts)],
            offset_lo: i64::MIN,
            offset_hi: i64::MAX,
            handshake_answered_in_middle: answered_in_middle,
        }
    }

    pub fn record(&mut self, p: usize, r: &Rec, adj_ns: i64) {
        self.record_share(p, r, adj_ns, Keep::ALL);
    }

    /// [`ConnCompare::record`] for the states `keep` names alone (the
    /// others are left as they were): two threads can each keep a share of
    /// the same records, joined after by [`ConnCompare::take_share`]. A
    /// record is a copy in its own direction (paired with its twin, and
    /// counted in that direction's data ranges) and an ACK of the other's
    /// data (counted in that direction's ranges); the four states share
    /// nothing else.
    pub fn record_share(&mut self, p: usize, r: &Rec, adj_ns: i64, keep: Keep) {
        if self.handshake_answered_in_middle && TcpFlags(r.tcp_flags).syn() {
            return;
        }
        let k = usize::from(r.dir as usize != self.client_side[p]);
        if r.ack >= 0 && keep.fates[1 - k] {
            self.dirs[1 - k].acked(p, r.ack, r.rtt_ns, adj_ns);
        }
        if keep.pairing[k] {
            if let Some(diff) = self.dirs[k].pair_copy(p, r, adj_ns) {
                if self.dirs[k].up == 0 {
                    self.offset_hi = self.offset_hi.min(diff);
                } else {
                    self.offset_lo = self.offset_lo.max(diff);
                }
            }
        }
        if keep.fates[k] {
            self.dirs[k].data_copy(p, r, adj_ns);
        }
        for d in [k, 1 - k] {
            if keep.pairing[d] {
                self.dirs[d].expire_copies(adj_ns);
            }
            if keep.fates[d] {
                self.dirs[d].expire_fates(adj_ns);
            }
        }
    }

    /// Takes the states `keep` names, and the clock bounds its copies
    /// gave, from a comparison that kept them ([`ConnCompare::record_share`]).
    pub fn take_share(&mut self, other: ConnCompare, keep: Keep) {
        let ConnCompare { dirs, offset_lo, offset_hi, .. } = other;
        for (d, o) in dirs.into_iter().enumerate() {
            match (keep.pairing[d], keep.fates[d]) {
                (true, true) => self.dirs[d] = o,
                (true, false) => self.dirs[d].take_pairing(o),
                (false, true) => self.dirs[d].take_fates(o),
                (false, false) => {}
            }
        }
        self.offset_lo = self.offset_lo.max(offset_lo);
        self.offset_hi = self.offset_hi.min(offset_hi);
    }

    /// The offset's bounds (capture 1's clock minus capture 0's), when
    /// packets crossed both ways and agree.
    pub fn offset_bounds(&self) -> Option<(i64, i64)> {
        crate::samples::bounds(self.offset_lo, self.offset_hi)
    }

    pub fn finish(&mut self) {
        for d in &mut self.dirs {
            d.finish();
        }
    }
}
