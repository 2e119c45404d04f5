//! One connection seen at two points, segment by segment.
//!
//! - **Copies.** A segment is the same at both points when its sequence
//!   number, length, acknowledgement, TCP timestamp and control flags are
//!   (the window is left out: a middlebox may rewrite it, and that is
//!   reported). Copies are paired first in, first out, within
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

use crate::fingerprint::SYN;
use crate::samples::Samples;
use crate::stream::Rec;
use foldhash::HashMap;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};

/// How far apart (in capture 0's time, capture 1's moved by the coarse
/// offset) two copies of one segment may be. The coarse offset is the
/// handshake's, wrong by at most a one-way delay; 2 s more covers any
/// queue a TCP connection survives without a retransmission timeout
/// being the norm (RFC 6298's 1 s minimum RTO, doubled).
pub const MATCH_HORIZON_NS: i64 = 2_000_000_000;

/// Evidence frames kept per kind.
const EVIDENCE_MAX: usize = 5;

#[derive(Hash, PartialEq, Eq, Clone, Copy)]
struct Key {
    seq: i64,
    len: u32,
    ack: i64,
    tsval: Option<u32>,
    flags: u16,
}

#[derive(Clone, Copy)]
struct Pend {
    adj_ns: i64,
    time_ns: i64,
    frame: u64,
    raw_window: u32,
}

/// One data segment's copies at the two points.
struct Fate {
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
pub struct DirCompare {
    /// The capture point the direction's packets pass first.
    pub up: usize,
    pending: [HashMap<Key, VecDeque<Pend>>; 2],
    order: VecDeque<(i64, usize, Key)>,
    fates: BTreeMap<i64, Fate>,
    cum_ack_up: i64,
    cum_ack_down: i64,
    /// Copies seen at each point, paired, and left unpaired.
    pub seen: [u64; 2],
    pub paired: u64,
    pub unpaired: [u64; 2],
    pub unpaired_acks: [u64; 2],
    /// Downstream time minus upstream time of each paired copy (raw clocks),
    /// at the upstream time (capture 0's clock, ns).
    pub owd: Samples,
    /// RTT samples of this direction's data at each point (ns).
    pub rtt: [Samples; 2],
    /// Paired copies whose window field differs, and the first such.
    pub window_rewritten: u64,
    pub first_window_rewrite: Option<([u64; 2], [u32; 2])>,
    pub loss: LossCounts,
    pub data_bytes: [i64; 2],
}

impl DirCompare {
    pub fn new(up: usize) -> Self {
        DirCompare {
            up,
            pending: [HashMap::default(), HashMap::default()],
            order: VecDeque::new(),
            fates: BTreeMap::new(),
            cum_ack_up: i64::MIN,
            cum_ack_down: i64::MIN,
            seen: [0; 2],
            paired: 0,
            unpaired: [0; 2],
            unpaired_acks: [0; 2],
            owd: Samples::default(),
            rtt: [Samples::default(), Samples::default()],
            window_rewritten: 0,
            first_window_rewrite: None,
            loss: LossCounts::default(),
            data_bytes: [0; 2],
        }
    }

    /// A copy at point `p`; `adj_ns` is its time on capture 0's clock (coarse).
    /// Returns the raw time difference (capture 1 minus capture 0) of a pair.
    fn copy(&mut self, p: usize, r: &Rec, adj_ns: i64) -> Option<i64> {
        self.seen[p] += 1;
        let key = Key { seq: r.seq, len: r.len, ack: r.ack, tsval: r.tsval, flags: r.tcp_flags & 0x17 };
        let mut diff = None;
        if let Some(q) = self.pending[1 - p].get_mut(&key) {
            if let Some(o) = q.pop_front() {
                if q.is_empty() {
                    self.pending[1 - p].remove(&key);
                }
                self.paired += 1;
                let (t0, t1) = if p == 0 { (r.time_ns, o.time_ns) } else { (o.time_ns, r.time_ns) };
                diff = Some(t1 - t0);
                let owd = if self.up == 0 { t1 - t0 } else { t0 - t1 };
                self.owd.push(owd, adj_ns.min(o.adj_ns));
                if o.raw_window != r.raw_window && r.tcp_flags & SYN == 0 {
                    self.window_rewritten += 1;
                    if self.first_window_rewrite.is_none() {
                        let (f, w) = if p == 0 { ([r.frame, o.frame], [r.raw_window, o.raw_window]) } else { ([o.frame, r.frame], [o.raw_window, r.raw_window]) };
                        self.first_window_rewrite = Some((f, w));
                    }
                }
            }
        }
        if diff.is_none() {
            let pend = Pend { adj_ns, time_ns: r.time_ns, frame: r.frame, raw_window: r.raw_window };
            self.pending[p].entry(key).or_default().push_back(pend);
            self.order.push_back((adj_ns, p, key));
        }
        if r.len > 0 && r.tcp_flags & SYN == 0 {
            self.data(p, r, adj_ns);
        }
        diff
    }

    fn data(&mut self, p: usize, r: &Rec, adj_ns: i64) {
        let end = r.seq + r.len as i64;
        self.data_bytes[p] = self.data_bytes[p].max(end);
        let covering = self.fates.range(..=r.seq).next_back().filter(|(_, f)| f.end > r.seq).map(|(s, _)| *s);
        let up = self.up;
        let f = match covering {
            Some(s) => self.fates.get_mut(&s).expect("found"),
            None => self.fates.entry(r.seq).or_insert(Fate {
                end,
                n: [0; 2],
                first_up_retrans: false,
                needless: 0,
                last_adj_ns: adj_ns,
                frame: [0; 2],
                delivered: false,
            }),
        };
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
        f.last_adj_ns = f.last_adj_ns.max(adj_ns);
    }

    /// An acknowledgement of this direction's data, seen at point `p`.
    fn acked(&mut self, p: usize, ack: i64, rtt_ns: Option<i64>, adj_ns: i64) {
        if p == self.up {
            self.cum_ack_up = self.cum_ack_up.max(ack);
        } else if ack > self.cum_ack_down {
            // what this ACK newly covers had reached the receiver: a copy
            // passing the downstream point after it is not a loss there
            let from = self.cum_ack_down.max(i64::MIN + 1);
            for (_, f) in self.fates.range_mut(from..ack) {
                if f.end <= ack && f.n[p] == 1 {
                    f.delivered = true;
                }
            }
            self.cum_ack_down = ack;
        }
        if let Some(rtt) = rtt_ns {
            self.rtt[p].push(rtt, adj_ns);
        }
    }

    /// Settles what is older than the horizon at `now` (capture 0's clock).
    fn expire(&mut self, now: i64) {
        while let Some(&(t, p, key)) = self.order.front() {
            if now - t < MATCH_HORIZON_NS {
                break;
            }
            self.order.pop_front();
            if let Some(q) = self.pending[p].get_mut(&key) {
                if q.front().is_some_and(|x| x.adj_ns == t) {
                    q.pop_front();
                    self.unpaired[p] += 1;
                    if key.len == 0 {
                        self.unpaired_acks[p] += 1;
                    }
                }
                if q.is_empty() {
                    self.pending[p].remove(&key);
                }
            }
        }
        while let Some(e) = self.fates.first_entry() {
            let f = e.get();
            if f.end > self.cum_ack_up || now - f.last_adj_ns < MATCH_HORIZON_NS {
                break;
            }
            let f = e.remove();
            settle(&mut self.loss, self.up, &f, true);
        }
    }

    /// The captures ended: settles everything left.
    fn finish(&mut self) {
        for q in self.pending.iter().zip([0, 1]).flat_map(|(m, p)| m.values().map(move |q| (q, p))) {
            self.unpaired[q.1] += q.0.len() as u64;
        }
        for (_, f) in std::mem::take(&mut self.fates) {
            let acked = f.end <= self.cum_ack_up;
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

/// A connection seen at both points: both directions ([`DirCompare`]),
/// indexed 0 for the client's data, 1 for the server's.
pub struct ConnCompare {
    pub client_side: [usize; 2],
    pub dirs: [DirCompare; 2],
    /// Bounds on capture 1's clock minus capture 0's, from causality.
    pub offset_lo: i64,
    pub offset_hi: i64,
}

impl ConnCompare {
    /// `client_point`: the capture nearer the client.
    pub fn new(client_side: [usize; 2], client_point: usize) -> Self {
        ConnCompare {
            client_side,
            dirs: [DirCompare::new(client_point), DirCompare::new(1 - client_point)],
            offset_lo: i64::MIN,
            offset_hi: i64::MAX,
        }
    }

    pub fn record(&mut self, p: usize, r: &Rec, adj_ns: i64) {
        let k = usize::from(r.dir as usize != self.client_side[p]);
        if r.ack >= 0 {
            self.dirs[1 - k].acked(p, r.ack, r.rtt_ns, adj_ns);
        }
        if let Some(diff) = self.dirs[k].copy(p, r, adj_ns) {
            if self.dirs[k].up == 0 {
                self.offset_hi = self.offset_hi.min(diff);
            } else {
                self.offset_lo = self.offset_lo.max(diff);
            }
        }
        self.dirs[k].expire(adj_ns);
        self.dirs[1 - k].expire(adj_ns);
    }

    pub fn finish(&mut self) {
        for d in &mut self.dirs {
            d.finish();
        }
    }
}
