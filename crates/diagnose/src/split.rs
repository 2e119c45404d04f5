//! The recorder's side of a capture split in time (`tcpwhy_flow`'s
//! `split` module: two threads, each reading half of a file of few
//! connections).
//!
//! Where the recorder (`crate::recorder`) closes a part depends on what
//! it holds since the direction's last part (data and ACK records, the
//! global record budget, idle ACKs dropped), and a part is diagnosed
//! from the connection's whole summary at its close. The second thread
//! knows neither at the split. So it decides nothing: its
//! [`LaterRecords`] keeps the records its stretch adds, in order, and
//! the payload starts that may open a turn. At the join, once the split
//! is proven, the first thread's recorder (which then holds exactly
//! what one pass holds at the split) takes them in through the
//! recorder's own rules (`crate::record::Records::add`); where a part
//! closes, the connection's state at that frame is rebuilt
//! (`SplitView::connection_at`: the second stretch's table from its
//! snapshot before the frame, read on to it, joined to the first
//! stretch's) and the part is diagnosed from it. The first thread's
//! parts are closed the same way without being diagnosed (`Recorder`'s
//! `defer`), and every part of the split is diagnosed at its end on two
//! threads: the diagnoses are independent.
//!
//! The result is the recorder one pass gives, record for record and part
//! for part (`crates/cli/tests/split_scripts.rs` and `threads.rs` compare
//! `diagnose --json` byte for byte). What the second thread holds until
//! the join is bounded by the stretches split: at most
//! [`LATER_MAX_FRAMES`] frames (about 90 bytes a frame).
//!
//! It is off unless `TCPWHY_SPLIT_RECORDS` is set: on the 1.2 M-packet
//! snaplen-128 bench file it is exact and slower than the pipeline (226.8
//! against 196.3 ms, one thread 232.7 ms; best of 11 on 2026-11-27, a
//! machine whose timings varied by a third from run to run). What it
//! costs: every record of the second stretch, and every part's records
//! until the end, are held in memory touched for the first time (33,800
//! page faults against 9,000 for one thread, whose parts reuse one
//! buffer; 0.12 to 0.17 s of system time against 0.05), the join's replay
//! of the records (26 to 37 ms), and the parts' diagnoses after it (4
//! parts, 20 to 27 ms on two threads). The snapshots (73, 4 to 6 ms in
//! all) and the states rebuilt from them (2 ms) are cheap since they
//! carry the duplicate filter's verdicts instead of its memory
//! (`FlowTable::snapshot`; with the memory they took 57 ms).

use crate::model::Part;
use crate::record::{AckRec, DataRec, DirRecords, TurnHead, MAX_TURN_HEADS, TURN_HEAD_BYTES};
use tcpwhy_flow::{Connection, ConnectionSummary, Flags, SegmentEvent, SegmentSink};

/// Longest second stretch split for `diagnose`, in frames: 2^20 frames
/// hold at most about 90 MiB of records until the join (a data and an
/// ACK record a frame), about 45 MiB for a bulk transfer (one of them).
/// Longer captures keep the pipeline (one thread reading, one analysing),
/// whose memory does not grow with the capture.
pub const LATER_MAX_FRAMES: u64 = 1 << 20;

/// Bits of an entry of [`LaterRecords::ops`]; the connection's index
/// above them.
const OP_DATA: u32 = 1;
const OP_ACK: u32 = 2;
const OP_DIR1: u32 = 4;
const OP_HEAD: u32 = 8;
const OP_SHIFT: u32 = 4;
/// Connections an entry of [`LaterRecords::ops`] can index: the bits above
/// [`OP_SHIFT`].
const MAX_LATER_CONNECTIONS: usize = 1 << (u32::BITS - OP_SHIFT);
/// Records the second stretch may hold: a data and an ACK record for each
/// of its frames.
const LATER_MAX_OPS: u64 = 2 * LATER_MAX_FRAMES;
/// Payload heads kept for connections not yet recorded: as many as
/// [`MAX_TURN_HEADS`] for each of four such connections before the stretch
/// gives up (the heads of a connection whose records start in the first
/// stretch are bounded by `MAX_TURN_HEADS` each).
const MAX_UNRECORDED_HEADS: usize = 4 * MAX_TURN_HEADS;

/// What the second stretch adds to one connection's records.
#[derive(Debug, Default)]
struct LaterConn {
    id: u64,
    data: [Vec<DataRec>; 2],
    acks: [Vec<AckRec>; 2],
    /// A segment with records was kept: from here on the recorder holds
    /// the connection (`Records::head` finds it).
    recorded: bool,
    /// The direction of the last payload start kept after `recorded`.
    head_dir: Option<u8>,
    heads_kept: usize,
}

/// The second stretch's records, in the order one pass adds them
/// (module docs).
#[derive(Debug, Default)]
pub struct LaterRecords {
    /// One entry a segment with records or a payload start kept.
    ops: Vec<u32>,
    conns: Vec<LaterConn>,
    heads: Vec<TurnHead>,
    /// The last connection looked up.
    last: usize,
    spoiled: Option<&'static str>,
}

impl LaterRecords {
    fn conn(&mut self, id: u64) -> usize {
        if self.conns.get(self.last).is_some_and(|c| c.id == id) {
            return self.last;
        }
        let k = match self.conns.iter().position(|c| c.id == id) {
            Some(k) => k,
            None => {
                self.conns.push(LaterConn { id, ..LaterConn::default() });
                self.conns.len() - 1
            }
        };
        self.last = k;
        k
    }
}

impl SegmentSink for LaterRecords {
    fn segment(&mut self, _connection: &Connection, e: &SegmentEvent) {
        let Some((d, data, ack)) = crate::record::records_of(e) else { return };
        let k = self.conn(e.connection);
        let c = &mut self.conns[k];
        let mut op = (k as u32) << OP_SHIFT | if d == 1 { OP_DIR1 } else { 0 };
        if let Some(r) = data {
            c.data[d].push(r);
            op |= OP_DATA;
        }
        if let Some(r) = ack {
            c.acks[1 - d].push(r);
            op |= OP_ACK;
        }
        c.recorded = true;
        self.ops.push(op);
    }

    /// A payload start is kept when the recorder may make it a turn's
    /// head: while it may not hold the connection yet, every one; after,
    /// each that changes direction (one of the same direction as the last
    /// kept changes nothing). Past `MAX_TURN_HEADS` changes the recorder's
    /// list is full.
    fn payload(&mut self, _connection: &Connection, e: &SegmentEvent, payload: &[u8]) {
        if e.flags.has(Flags::RETRANSMISSION) || e.payload_len == 0 {
            return;
        }
        let d = (e.direction & 1) as u8;
        let k = self.conn(e.connection);
        let c = &mut self.conns[k];
        if c.recorded && c.head_dir == Some(d) {
            return;
        }
        if c.recorded {
            if c.heads_kept > MAX_TURN_HEADS {
                return;
            }
            c.head_dir = Some(d);
            c.heads_kept += 1;
        } else if self.heads.len() >= MAX_UNRECORDED_HEADS {
            self.spoiled = Some("too many payloads before the connection's first records");
            return;
        }
        let n = payload.len().min(TURN_HEAD_BYTES);
        self.heads.push(TurnHead { dir: d, t_ns: e.time_ns, seq: e.seq, bytes: payload[..n].to_vec() });
        self.ops.push((k as u32) << OP_SHIFT | OP_HEAD | if d == 1 { OP_DIR1 } else { 0 });
    }

    fn payload_prefix(&self) -> usize {
        TURN_HEAD_BYTES
    }
}

impl LaterRecords {
    /// Why the records cannot be taken in (too many to hold).
    pub fn spoiled(&self) -> Option<&'static str> {
        if self.ops.len() as u64 > LATER_MAX_OPS || self.conns.len() >= MAX_LATER_CONNECTIONS {
            return Some("the second stretch holds too many records for the diagnosis");
        }
        self.spoiled
    }
}

/// A part closed and not diagnosed yet: during a split in time (diagnosed
/// at its end), or on a shard thread (diagnosed beside it,
/// `crate::recorder`).
#[derive(Debug)]
pub(crate) struct Job {
    pub(crate) id: u64,
    pub(crate) d: usize,
    summary: ConnectionSummary,
    pub(crate) records: DirRecords,
}

impl Job {
    /// Closes direction `d`'s records into a part, from the connection as
    /// it is now (`c`): the records move into the job, and `r` goes on
    /// with the empty buffers `data` and `acks`.
    pub(crate) fn take(id: u64, d: usize, r: &mut DirRecords, c: &Connection, data: Vec<DataRec>, acks: Vec<AckRec>) -> Job {
        let records = DirRecords {
            data: std::mem::replace(&mut r.data, data),
            acks: std::mem::replace(&mut r.acks, acks),
            truncated: r.truncated,
            parts: Vec::new(),
            parts_closed: r.parts_closed,
        };
        r.parts_closed += 1;
        Job { id, d, summary: ConnectionSummary::from_connection(c, false), records }
    }

    /// The part's diagnosis.
    pub(crate) fn diagnose(&self, opts: &crate::options::Options) -> Part {
        crate::parts::diagnose(&self.summary, self.d, &self.records, opts, None)
    }
}

/// One step of [`LaterRecords::replay`], in the order one pass made it.
pub(crate) enum Replayed<'a> {
    /// A payload start that may open a turn.
    Head { id: u64, d: u8, t_ns: i64, seq: i64, bytes: &'a [u8] },
    /// A segment's records (direction `d`'s data, the other's ACK) at `frame`.
    Records { id: u64, d: usize, data: Option<DataRec>, ack: Option<AckRec>, frame: u64 },
}

impl LaterRecords {
    /// Gives the second stretch's records to `take` in the order one pass
    /// adds them, their frame numbers moved by `frame_delta` (the first
    /// stretch's frames before them).
    pub(crate) fn replay(self, frame_delta: i64, mut take: impl FnMut(Replayed<'_>)) {
        let renumber = |f: u64| (f as i64 + frame_delta) as u64;
        let mut next_data = vec![[0usize; 2]; self.conns.len()];
        let mut next_ack = vec![[0usize; 2]; self.conns.len()];
        let mut heads = self.heads.into_iter();
        for op in self.ops {
            let k = (op >> OP_SHIFT) as usize;
            let d = usize::from(op & OP_DIR1 != 0);
            let c = &self.conns[k];
            if op & OP_HEAD != 0 {
                if let Some(h) = heads.next() {
                    take(Replayed::Head { id: c.id, d: d as u8, t_ns: h.t_ns, seq: h.seq, bytes: &h.bytes });
                }
                continue;
            }
            let data = (op & OP_DATA != 0).then(|| {
                let r = c.data[d][next_data[k][d]];
                next_data[k][d] += 1;
                DataRec { frame: renumber(r.frame), ..r }
            });
            let ack = (op & OP_ACK != 0).then(|| {
                let r = c.acks[1 - d][next_ack[k][1 - d]];
                next_ack[k][1 - d] += 1;
                AckRec { frame: renumber(r.frame), ..r }
            });
            let frame = data.map(|r| r.frame).or(ack.map(|r| r.frame)).unwrap_or(0);
            take(Replayed::Records { id: c.id, d, data, ack, frame });
        }
    }
}

/// Closes direction `d`'s records into a part to be diagnosed later, from
/// the connection as it is now (`c`); gives the records freed.
pub(crate) fn defer(jobs: &mut Vec<Job>, id: u64, d: usize, r: &mut DirRecords, c: &Connection) -> usize {
    let n = r.data.len() + r.acks.len();
    let (data, acks) = (Vec::with_capacity(r.data.capacity()), Vec::with_capacity(r.acks.capacity()));
    jobs.push(Job::take(id, d, r, c, data, acks));
    n
}

/// The parts closed at the join, diagnosed on two threads; in the order
/// they closed.
pub(crate) fn diagnose_jobs(jobs: Vec<Job>, opts: &crate::options::Options) -> Vec<(u64, usize, Part)> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(j) = jobs.get(i) else { break done };
            done.push((i, j.diagnose(opts)));
        }
    };
    let mut done = if jobs.len() > 1 {
        std::thread::scope(|s| {
            let other = s.spawn(work);
            let mut mine = work();
            match other.join() {
                Ok(theirs) => mine.extend(theirs),
                Err(p) => std::panic::resume_unwind(p),
            }
            mine
        })
    } else {
        work()
    };
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(i, part)| (jobs[i].id, jobs[i].d, part)).collect()
}
