//! The recorder: the [`SegmentSink`] the flow table feeds while it reads a
//! capture. It keeps each connection's [`Records`] and, when a long
//! direction fills a part or the budget runs out, has the part diagnosed
//! there and then (`crate::parts`; during a split in time, at the split's
//! end, `crate::split`), so that memory is bounded by the live connections,
//! never by the length of the capture. The last stage of the streaming
//! side: it reads the records, the parts and the split, and nothing reads
//! it but the crate's entry points.

use crate::options::Options;
use crate::model::Part;
use crate::record::{records_of, AckRec, ConnRecords, DataRec, DirRecords, Records, TURN_HEAD_BYTES};
use crate::split::{defer, diagnose_jobs, Job, LaterRecords, Replayed};
use tcpwhy_flow::{Connection, Flags, SegmentEvent, SegmentSink, ShardSink, SplitView};

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
    /// Parts diagnosed on a thread of their own while the shard reads on
    /// (a recorder on a shard thread, `ShardSink::for_shard`).
    background: Option<Background>,
}

/// A shard's parts diagnosed beside it: a part's diagnosis is a function of
/// its records and the connection's summary at its close, so it can run
/// while the shard records the next part. On a capture of one long
/// connection the shard thread otherwise carries the connection's model,
/// its records and every part's diagnosis, while the reading thread waits
/// on it. One part at a time: the next close waits for the one before
/// (memory stays at two parts' records), and the parts reach their
/// directions in the order they closed, so the result is the one of a
/// recorder that diagnoses them in place.
#[derive(Debug, Default)]
struct Background {
    running: Option<std::thread::JoinHandle<Finished>>,
    /// Parts finished and not yet given to their directions.
    finished: Vec<(u64, usize, Part)>,
    /// The record buffers of the part finished last, for the next.
    spare: Option<(Vec<DataRec>, Vec<AckRec>)>,
}

/// A part diagnosed in the background: (connection, direction, the part,
/// its record buffers emptied).
type Finished = (u64, usize, Part, Vec<DataRec>, Vec<AckRec>);

impl Background {
    /// Waits for the part being diagnosed, if any.
    fn wait(&mut self) {
        if let Some(h) = self.running.take() {
            match h.join() {
                Ok((id, d, part, mut data, mut acks)) => {
                    data.clear();
                    acks.clear();
                    self.finished.push((id, d, part));
                    self.spare = Some((data, acks));
                }
                Err(p) => std::panic::resume_unwind(p),
            }
        }
    }

    /// Closes direction `d`'s records into a part diagnosed on its own
    /// thread from the connection as it is now; gives the records freed.
    fn close(&mut self, c: &Connection, id: u64, d: usize, r: &mut DirRecords, opts: &Options) -> usize {
        let n = r.data.len() + r.acks.len();
        self.wait();
        let (data, acks) = self.spare.take().unwrap_or_else(|| (Vec::with_capacity(r.data.capacity()), Vec::with_capacity(r.acks.capacity())));
        let job = Job::take(id, d, r, c, data, acks);
        let opts = *opts;
        self.running = Some(std::thread::spawn(move || {
            let part = job.diagnose(&opts);
            (job.id, job.d, part, job.records.data, job.records.acks)
        }));
        n
    }
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
        Recorder { records: Records::default(), opts, deferred: Vec::new(), defer: false, background: None }
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
    fn join_later_records(&mut self, later: LaterRecords, join: &dyn SplitView) {
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

    /// Waits for the part diagnosed in the background and gives it to its
    /// direction.
    fn finish_background(&mut self) {
        if let Some(b) = &mut self.background {
            b.wait();
            for (id, d, part) in b.finished.drain(..) {
                self.records.push_part(id, d, part);
            }
        }
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
        Recorder {
            records: self.records.for_shard(shards),
            opts: self.opts,
            deferred: Vec::new(),
            defer: false,
            background: Some(Background::default()),
        }
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

    fn join_later(&mut self, later: Self::Later, join: &dyn SplitView) {
        self.join_later_records(later, join);
    }

    fn split_starts(&mut self) {
        self.defer = true;
    }

    fn split_ends(&mut self) {
        self.defer = false;
        self.diagnose_deferred();
    }

    fn join(&mut self, mut shard: Self) {
        shard.finish_background();
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
        match &mut self.background {
            None => self.records.add(id, d, data, ack, &mut |x, r| close_part(connection, x, r, opts)),
            Some(b) => {
                self.records.add(id, d, data, ack, &mut |x, r| b.close(connection, id, x, r, opts));
                for (id, d, part) in b.finished.drain(..) {
                    self.records.push_part(id, d, part);
                }
            }
        }
    }
}

/// Closes direction `d`'s records into a part; the records freed.
fn close_part(c: &Connection, d: usize, r: &mut DirRecords, opts: &Options) -> usize {
    let n = r.data.len() + r.acks.len();
    crate::parts::close(c, d, r, opts);
    n
}
