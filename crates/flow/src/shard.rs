//! One capture on several cores: the connections sharded over threads.
//!
//! The reading thread reads and decodes the capture and keeps the
//! connection table: lookup, port reuse, attempts and the flood summary,
//! retirement and eviction, connection numbers, and the capture-quality
//! checks (frames held twice, clocks stepping back). Everything it decides
//! on is in the table, so it decides exactly as on one thread. Each
//! connection's model (`Connection::process`) and sink run on one shard
//! thread, chosen by the connection's slot in the table: a shard sees every
//! segment of its connections in capture order, so each connection's
//! analysis is the one thread's, and so is the output
//! (`crates/cli/tests/threads.rs` compares them byte for byte).
//!
//! Messages cross in batches of [`BATCH_MESSAGES`] from a fixed pool of
//! [`BATCH_POOL`] per shard that the reading thread waits on, as with the
//! decode thread (`crate::capture`): memory in transit is bounded whatever
//! the threads' speeds. A connection's slot is reused only after its
//! retirement was queued on the same shard, so the shard always sees a
//! slot's retirement before its next connection.

use crate::summary::ConnectionSummary;
use crate::table::{analyse, Quality, SegmentSink};
use crate::Connection;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use tcpwhy_wire::TcpSegment;

/// Messages per batch: as the decode thread's batches (each hand-over may
/// cost a wake-up).
const BATCH_MESSAGES: usize = 4096;
/// Batches per shard that exist at once, reused.
const BATCH_POOL: usize = 4;

enum Msg {
    /// A new connection in table slot `slot`.
    Open { slot: usize, conn: Box<Connection> },
    /// A segment for the connection in `slot`, from side `d`; the first
    /// `len` bytes of its payload at `at` in the batch's bytes.
    Segment { slot: usize, d: u8, frame: u64, time_ns: i64, seg: TcpSegment<'static>, at: u32, len: u32 },
    /// The connection in `slot` is over: summarise it.
    Retire { slot: usize, evicted: bool, quality: Box<Quality> },
}

#[derive(Default)]
struct Batch {
    msgs: Vec<Msg>,
    bytes: Vec<u8>,
}

impl Batch {
    fn new() -> Batch {
        Batch { msgs: Vec::with_capacity(BATCH_MESSAGES), bytes: Vec::new() }
    }
}

/// The way to one shard: the batch being filled, and the channels.
struct Lane {
    /// None once the shard is gone (it panicked; the join reports it).
    batch: Option<Batch>,
    full: SyncSender<Batch>,
    empty: Receiver<Batch>,
}

impl Lane {
    #[inline]
    fn push(&mut self, msg: Msg) {
        let Some(b) = self.batch.as_mut() else { return };
        b.msgs.push(msg);
        if b.msgs.len() >= BATCH_MESSAGES {
            let full = self.batch.take().expect("a batch");
            if self.full.send(full).is_ok() {
                self.batch = self.empty.recv().ok();
            }
        }
    }
}

/// The table's side of the shards.
pub(crate) struct Outbox {
    lanes: Vec<Lane>,
    /// Payload bytes the sinks read.
    prefix: usize,
}

impl Outbox {
    fn lane(&mut self, slot: usize) -> &mut Lane {
        let n = self.lanes.len();
        &mut self.lanes[slot % n]
    }

    pub(crate) fn open(&mut self, slot: usize, conn: Box<Connection>) {
        self.lane(slot).push(Msg::Open { slot, conn });
    }

    #[inline]
    pub(crate) fn segment(&mut self, slot: usize, d: usize, seg: &TcpSegment<'_>, frame: u64, time_ns: i64) {
        let take = seg.payload.len().min(self.prefix);
        let lane = self.lane(slot);
        let Some(b) = lane.batch.as_mut() else { return };
        let at = b.bytes.len() as u32;
        b.bytes.extend_from_slice(&seg.payload[..take]);
        let seg = TcpSegment { payload: &[], ..*seg };
        lane.push(Msg::Segment { slot, d: d as u8, frame, time_ns, seg, at, len: take as u32 });
    }

    pub(crate) fn retire(&mut self, slot: usize, evicted: bool, quality: Quality) {
        self.lane(slot).push(Msg::Retire { slot, evicted, quality: Box::new(quality) });
    }

    /// Sends what is left; the shards end when their channel closes.
    fn close(self) {
        for lane in self.lanes {
            if let Some(b) = lane.batch {
                if !b.msgs.is_empty() {
                    let _ = lane.full.send(b);
                }
            }
        }
    }
}

/// Runs `read` (which reads the capture into `table`) with `shards` shard
/// threads analysing the connections, each with its own part of `sink`;
/// then summarises the connections still live, and joins the shards'
/// summaries into the table and their sinks into `sink`.
pub(crate) fn with_shards<S: crate::table::ShardSink, R>(
    table: &mut crate::FlowTable,
    shards: usize,
    sink: &mut S,
    read: impl FnOnce(&mut crate::FlowTable) -> R,
) -> R {
    let prefix = sink.payload_prefix();
    let series = table.series;
    std::thread::scope(|scope| {
        let mut lanes = Vec::with_capacity(shards);
        let mut workers = Vec::with_capacity(shards);
        for _ in 0..shards {
            let (full_tx, full_rx) = sync_channel::<Batch>(BATCH_POOL);
            let (empty_tx, empty_rx) = sync_channel::<Batch>(BATCH_POOL);
            for _ in 1..BATCH_POOL {
                let _ = empty_tx.send(Batch::new());
            }
            let part = sink.for_shard(shards);
            workers.push(scope.spawn(move || run_shard(full_rx, empty_tx, part, series)));
            lanes.push(Lane { batch: Some(Batch::new()), full: full_tx, empty: empty_rx });
        }
        table.outbox = Some(Outbox { lanes, prefix });
        let out = read(table);
        table.retire_live();
        table.outbox.take().expect("the shards' outbox").close();
        for w in workers {
            match w.join() {
                Ok((finished, part)) => {
                    table.add_finished(finished);
                    sink.join(part);
                }
                Err(p) => std::panic::resume_unwind(p),
            }
        }
        out
    })
}

/// One shard: its connections by table slot, their models and its sink.
fn run_shard<S: SegmentSink>(
    full: Receiver<Batch>,
    empty: SyncSender<Batch>,
    mut sink: S,
    series: bool,
) -> (Vec<ConnectionSummary>, S) {
    let mut slots: Vec<Option<Box<Connection>>> = Vec::new();
    let mut finished = Vec::new();
    for mut batch in full {
        for msg in batch.msgs.drain(..) {
            match msg {
                Msg::Open { slot, conn } => {
                    if slots.len() <= slot {
                        slots.resize_with(slot + 1, || None);
                    }
                    slots[slot] = Some(conn);
                }
                Msg::Segment { slot, d, frame, time_ns, seg, at, len } => {
                    let conn = slots[slot].as_mut().expect("an open connection");
                    let payload = &batch.bytes[at as usize..(at + len) as usize];
                    analyse(conn, &TcpSegment { payload, ..seg }, frame, time_ns, d as usize, &mut sink);
                }
                Msg::Retire { slot, evicted, quality } => {
                    let mut conn = slots[slot].take().expect("an open connection");
                    quality.give(&mut conn);
                    let mut summary = ConnectionSummary::from_connection(&conn, series);
                    summary.evicted = evicted;
                    finished.push(summary);
                }
            }
        }
        batch.bytes.clear();
        let _ = empty.send(batch);
    }
    (finished, sink)
}
