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
//! Messages cross in batches of `BATCH_MESSAGES` from a fixed pool of
//! `BATCH_POOL` per shard that the reading thread waits on, as with the
//! decode thread (`crate::capture`): memory in transit is bounded whatever
//! the threads' speeds. A connection's slot is reused only after its
//! retirement was queued on the same shard, so the shard always sees a
//! slot's retirement before its next connection.

use crate::handover::{Batch, Kind, Lane, Outbox, BATCH_POOL};
use crate::summary::ConnectionSummary;
use crate::table::{analyse, SegmentSink};
use crate::conn::Connection;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

/// Runs `read` (which reads the capture into `table`) with `shards` shard
/// threads analysing the connections, each with its own part of `sink`;
/// then summarises the connections still live, and joins the shards'
/// summaries into the table and their sinks into `sink`.
pub(crate) fn with_shards<S: crate::table::ShardSink, R>(
    table: &mut crate::table::FlowTable,
    shards: usize,
    sink: &mut S,
    read: impl FnOnce(&mut crate::table::FlowTable) -> R,
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
        let mut opens = batch.opens.drain(..);
        let mut retires = batch.retires.drain(..);
        for m in &batch.msgs {
            let slot = m.slot as usize;
            match m.kind {
                Kind::Segment => {
                    let conn = slots[slot].as_mut().expect("an open connection");
                    analyse(conn, &m.unpack(&batch.bytes), m.frame, m.time_ns, m.d as usize, &mut sink);
                }
                Kind::Open => {
                    if slots.len() <= slot {
                        slots.resize_with(slot + 1, || None);
                    }
                    slots[slot] = Some(opens.next().expect("the connection opened"));
                }
                Kind::Retire => {
                    let (evicted, quality) = retires.next().expect("the connection retired");
                    let mut conn = slots[slot].take().expect("an open connection");
                    quality.give(&mut conn);
                    let mut summary = ConnectionSummary::from_connection(&conn, series);
                    summary.evicted = evicted;
                    finished.push(summary);
                }
            }
        }
        drop((opens, retires));
        batch.msgs.clear();
        batch.bytes.clear();
        let _ = empty.send(batch);
    }
    (finished, sink)
}
