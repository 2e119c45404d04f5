//! The recorder: the [`SegmentSink`] the flow table feeds while it reads a
//! capture. It keeps each connection's [`Records`] and, when a long
//! direction fills a part or the budget runs out, has the part diagnosed
//! there and then (`crate::parts`; during a split in time, at the split's
//! end, `crate::split`), so that memory is bounded by the live connections,
//! never by the length of the capture. The last stage of the streaming
//! side: it reads the records, the parts and the split, and nothing reads
//! it but the crate's entry points.

use crate::options::Options;
use crate::record::{records_of, ConnRecords, DirRecords, Records, TURN_HEAD_BYTES};
use crate::split::{defer, diagnose_jobs, Job, LaterRecords, Replayed};
use tcpwhy_flow::{Connection, Flags, SegmentEvent, SegmentSink, ShardSink, SplitJoin};

/// Keeps the records of every connection and diagnoses the parts closed.
#[derive(Debug)]
pub struct Recorder {
    records: Records,
    /// For the parts diagnosed during the pass.
    opts: Options,
    /// Parts closed and not diagnosed yet (a split in time diagnoses them
    /// at its end on two threads, `crate::split`); `defer`: close so.
    deferred: Vec<Job>,
    defer: bool,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new(Options::default())
    }
}

impl Recorder {
    /// A recorder whose parts are diagnosed with `opts` (those of the
    /// diagnosis that follows).
    pub fn new(opts: Options) -> Self {
        Recorder { records: Records::default(), opts, deferred: Vec::new(), defer: false }
    }
    pub fn with_budget(records: usize) -> Self {
        Recorder { records: Records::with_budget(records), ..Recorder::default() }
    }
    /// Parts of `segments` data segments (tests; the default is
    /// [`crate::record::PART_DATA_SEGMENTS`]).
    pub fn with_part_size(mut self, segments: usize) -> Self {
        self.records = self.records.with_part_size(segments);
        self
    }
    /// The records held.
    pub fn records(&self) -> &Records {
        &self.records
    }
    pub fn get(&self, connection: u64) -> Option<&ConnRecords> {
        self.records.get(connection)
    }
    /// Drops a connection's records (it was diagnosed for the last time),
    /// giving them back and their share of the budget.
    pub fn remove(&mut self, connection: u64) -> Option<ConnRecords> {
        self.records.remove(connection)
    }
    pub fn records_used(&self) -> usize {
        self.records.records_used()
    }
    /// True when some segments were not recorded for lack of budget.
    pub fn budget_exhausted(&self) -> bool {
        self.records.budget_exhausted()
    }

    /// Takes in the second stretch of a split in time (`crate::split`'s
    /// module docs): its records through the records' own rules, each part
    /// that closes deferred with the connection's state at its frame.
    fn join_later_records(&mut self, later: LaterRecords, join: &SplitJoin<'_>) {
        let mut jobs = std::mem::take(&mut self.deferred);
        let records = &mut self.records;
        later.replay(join.frame_delta(), |r| match r {
            Replayed::Head { id, d, t_ns, seq, bytes } => records.head(id, d, t_ns, seq, bytes),
            Replayed::Records { id, d, data, ack, frame } => records.add(id, d, data, ack, &mut |x, r| {
                let at = join.connection_at(id, frame);
                debug_assert!(at.is_some(), "no state of connection {id} at frame {frame}");
                // Unreachable: the stretch was read once, and the split is
                // not joined when a connection started after it. Then the
                // state at the split.
                match at.as_ref().or(join.connection_at_split(id)) {
                    Some(c) => defer(&mut jobs, id, x, r, c),
                    None => 0,
                }
            }),
        });
        self.deferred = jobs;
    }

    /// Diagnoses the parts closed during the split (on two threads) and
    /// gives them to their directions, in the order they closed.
    fn diagnose_deferred(&mut self) {
        let jobs = std::mem::take(&mut self.deferred);
        for (id, d, part) in diagnose_jobs(jobs, &self.opts) {
            self.records.push_part(id, d, part);
        }
    }
}

/// Connections analysed on shard threads (`tcpwhy_flow::analyze_capture_sharded`):
/// each shard records its connections with an equal share of the budget.
/// Records are per connection, so the joined recorder holds what one
/// recorder would have, unless a shard ran out of its share (then its
/// directions are truncated or closed into parts earlier than on one
/// thread; `budget_exhausted` says so).
impl ShardSink for Recorder {
    fn for_shard(&self, shards: usize) -> Self {
        Recorder { records: self.records.for_shard(shards), opts: self.opts, deferred: Vec::new(), defer: false }
    }

    /// A capture of few connections is split in time (`crate::split`).
    const SPLITS_IN_TIME: bool = true;
    const SPLIT_SNAPSHOTS: bool = true;
    const LATER_MAX_FRAMES: u64 = crate::split::LATER_MAX_FRAMES;
    type Later = LaterRecords;

    fn later(&self) -> Self::Later {
        LaterRecords::default()
    }

    fn later_spoiled(later: &Self::Later) -> Option<&'static str> {
        later.spoiled()
    }

    fn join_later(&mut self, later: Self::Later, join: &SplitJoin<'_>) {
        self.join_later_records(later, join);
    }

    fn split_starts(&mut self) {
        self.defer = true;
    }

    fn split_ends(&mut self) {
        self.defer = false;
        self.diagnose_deferred();
    }

    fn join(&mut self, shard: Self) {
        self.records.join(shard.records);
    }
}

impl SegmentSink for Recorder {
    fn payload_prefix(&self) -> usize {
        TURN_HEAD_BYTES
    }

    fn payload(&mut self, _connection: &Connection, e: &SegmentEvent, payload: &[u8]) {
        if e.flags.has(Flags::RETRANSMISSION) || e.payload_len == 0 {
            return;
        }
        self.records.head(e.connection, (e.direction & 1) as u8, e.time_ns, e.seq, payload);
    }

    fn segment(&mut self, connection: &Connection, e: &SegmentEvent) {
        let Some((d, data, ack)) = records_of(e) else { return };
        let id = e.connection;
        if self.defer {
            let jobs = &mut self.deferred;
            self.records.add(id, d, data, ack, &mut |x, r| defer(jobs, id, x, r, connection));
            return;
        }
        let opts = &self.opts;
        self.records.add(id, d, data, ack, &mut |x, r| close_part(connection, x, r, opts));
    }
}

/// Closes direction `d`'s records into a part; the records freed.
fn close_part(c: &Connection, d: usize, r: &mut DirRecords, opts: &Options) -> usize {
    let n = r.data.len() + r.acks.len();
    crate::parts::close(c, d, r, opts);
    n
}
