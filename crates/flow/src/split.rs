//! Two cores on one connection: the capture split in time.
//!
//! The flow-hash shards (`crate::shard`) spread connections over threads;
//! a capture of one long connection keeps one of them busy and the reading
//! thread as busy again, which `bench/split.sh` measured at about 1.3x on
//! two cores. Here the file itself is cut in two at a record boundary near
//! its middle, and each half is read and analysed by a thread of its own:
//!
//! 1. The first thread reads from the start up to the split.
//! 2. After the first [`SPLIT_HEAD_FRAMES`] frames (the handshakes) it hands
//!    a copy of its table to the second thread, which skips ahead to
//!    [`SPLIT_WARM_UP_FRAMES`] frames before the split, reads those to
//!    bring the model up to date (queues of unacknowledged segments and
//!    TSvals, Wireshark's analysis state, the duplicate filter's memory),
//!    then empties everything counted and reads on from the split to the
//!    end (`Connection::restart_counts`).
//! 3. At the split, the first thread's state is the truth. The second
//!    thread's results are used only if it had, field by field, the same
//!    state at the split, and if every lookup it made into history that a
//!    warm-up cannot rebuild finds the same answer in the first thread's
//!    (`FlowTable::answers_as`). The counts of the two halves are then
//!    added (`Connection::join`): the result is what one pass gives, which
//!    `tests/split.rs` and the CLI's thread tests check on every shared
//!    capture.
//!    Holes the capture left before the warm-up (frames it missed and the
//!    sender never sent again) are audited the same way
//!    (`conn::HoleAudit`): every question asked of them after the split is
//!    asked again of the first thread's holes.
//! 4. Otherwise (a connection started or ended after the split, more
//!    history than the warm-up saw) the first thread reads on from the
//!    split itself: one pass, slower, never wrong.
//!
//! A per-segment sink splits too when it says how
//! (`ShardSink::SPLITS_IN_TIME`): the first stretch goes to the sink
//! itself, the second to its `ShardSink::Later`, which keeps what the
//! sink needs to take the stretch in once the split is proven
//! (`ShardSink::join_later`). `diagnose`'s recorder does (its parts close
//! where counts since the last part say, which only the first thread
//! knows): its later sink keeps the stretch's records, and the join asks
//! for a connection's state at the frame where a part closes
//! ([`SplitView::connection_at`]), rebuilt from snapshots of the second
//! stretch's table taken every [`SPLIT_SNAPSHOT_FRAMES`] frames
//! (`ShardSink::SPLIT_SNAPSHOTS`), which hold the duplicate filter's
//! verdicts instead of its memory. That is exact and, measured, slower
//! than the pipeline, so it is off unless `TCPWHY_SPLIT_RECORDS` is set
//! (`tcpwhy_diagnose::split` has the figures). `report`'s sink does not
//! split.
//!
//! Only plain pcap files are split (a record's position is found by
//! walking the record headers; pcapng and compressed input are not), and
//! only captures of few connections (the shards serve many).

use crate::analysis::{analysis, table_for, AnalyzeOptions, CaptureAnalysis};
use crate::conn::Connection;
use crate::table::{FlowTable, ShardSink, SplitView};
use std::sync::atomic::{AtomicBool, Ordering};
use tcpwhy_wire::{CaptureReader, CaptureSummary, LinkType, MappedPcap, StretchRead};

/// Frames read before the first thread hands its table to the second: the
/// handshakes of the connections the capture starts with, which a warm-up
/// cannot see again (window scale, initial sequence numbers, SYN options).
pub const SPLIT_HEAD_FRAMES: u64 = 1024;
/// Frames the second thread reads before the split to bring its copy up
/// to date. What it must have seen by the split: every segment still
/// unacknowledged there (a window's worth: 8,192 full-size segments are
/// 12 MB in flight, 1 Gbit/s over 95 ms), the last 16 frames of each
/// direction (the duplicate filter's recent frames) and one ACK of each
/// side. What it did not see is compared, not assumed.
pub const SPLIT_WARM_UP_FRAMES: usize = 8192;
/// Smallest file split: below, starting a thread and reading the warm-up
/// twice cost more than the half saved (a 10-record file takes 3.8 ms
/// from start to exit, `bench/split-results.md`; 16 MiB of snaplen-128
/// records take about 8 ms on one core).
pub const SPLIT_MIN_BYTES: usize = 16 << 20;
/// Most connections a split is tried with: the table is copied twice.
pub const SPLIT_MAX_CONNECTIONS: usize = 64;

/// Test settings: `TCPWHY_SPLIT=head,warm-up,min-bytes` (frames, frames,
/// bytes) to split the small shared captures.
fn settings() -> (u64, usize, usize) {
    let default = (SPLIT_HEAD_FRAMES, SPLIT_WARM_UP_FRAMES, SPLIT_MIN_BYTES);
    let Ok(v) = std::env::var("TCPWHY_SPLIT") else { return default };
    let parts: Vec<usize> = v.split(',').filter_map(|p| p.trim().parse().ok()).collect();
    match parts[..] {
        [h, w, b] if h > 0 => (h as u64, w, b),
        _ => default,
    }
}

/// What happened to a split, on stderr when `TCPWHY_SPLIT_REPORT` is set
/// (for tests and benchmarks).
fn report(what: std::fmt::Arguments<'_>) {
    if std::env::var_os("TCPWHY_SPLIT_REPORT").is_some() {
        eprintln!("tcpwhy: split in time: {what}");
    }
}

/// The second thread's result: its table, its state at the split, how
/// its reading ended, where the split is, its sink and its snapshots.
struct Second<L> {
    table: FlowTable,
    at_split: FlowTable,
    read: StretchRead,
    split: (usize, u64),
    sink: L,
    snapshots: Vec<Snapshot>,
}

/// The second stretch's table after some frame, with where to read on:
/// the next record's offset and the frame's number (second stretch's
/// numbering, [`SECOND_NUMBERS_FROM`]).
struct Snapshot {
    offset: usize,
    number: u64,
    table: FlowTable,
}

/// Frames between two snapshots of the second stretch's table, for a sink
/// that asks for the connections' state at frames of the stretch
/// (`ShardSink::SPLIT_SNAPSHOTS`): at most this many frames are read
/// again to answer one question.
pub const SPLIT_SNAPSHOT_FRAMES: u64 = 8192;

/// What a sink needs at the join of a split in time
/// (`ShardSink::join_later`): the [`SplitView`] of this split.
pub struct SplitJoin<'a> {
    mapped: &'a MappedPcap<'a>,
    snapshots: &'a [Snapshot],
    /// The first stretch's table at the split.
    whole: &'a FlowTable,
    delta: i64,
    /// The table read on to the last frame asked about.
    cursor: std::cell::RefCell<Option<Snapshot>>,
    /// The frames of the second stretch its duplicate filter found to be
    /// copies: the snapshots have no filters (`FlowTable::snapshot`).
    copies: std::sync::Arc<Vec<u64>>,
}

impl SplitView for SplitJoin<'_> {
    fn frame_delta(&self) -> i64 {
        self.delta
    }

    fn connection_at_split(&self, id: u64) -> Option<&Connection> {
        self.whole.connection(id)
    }

    fn connection_at(&self, id: u64, frame: u64) -> Option<Connection> {
        let n = (frame as i64 - self.delta) as u64;
        let k = self.snapshots.partition_point(|s| s.number <= n).checked_sub(1)?;
        let s = &self.snapshots[k];
        let mut cursor = self.cursor.borrow_mut();
        // Read on from the last answer when it lies between the snapshot
        // and the frame (questions come in the order of their frames).
        let from = match cursor.take() {
            Some(c) if c.number <= n && c.number >= s.number => c,
            _ => {
                let mut table = s.table.snapshot()?;
                table.give_copy_verdicts(self.copies.clone());
                Snapshot { offset: s.offset, number: s.number, table }
            }
        };
        let Snapshot { mut offset, mut number, mut table } = from;
        if number < n {
            let read = self.mapped.read((offset, number), (usize::MAX, n), None, |f| table.frame(f, &mut ()));
            if read.last_number != n {
                return None;
            }
            (offset, number) = (read.end, read.last_number);
        }
        let mut c = table.connection(id)?.clone();
        *cursor = Some(Snapshot { offset, number, table });
        c.renumber(SECOND_NUMBERS_FROM + 1, self.delta);
        c.join(self.whole.connection(id)?);
        Some(c)
    }
}

/// Analyses `reader` split in time over two threads when the capture
/// allows it; gives the reader back when it does not (not a plain pcap
/// file, too small, too many connections at its start).
pub(crate) fn analyze_split<S: ShardSink>(
    reader: CaptureReader,
    options: AnalyzeOptions,
    sink: &mut S,
    on_progress: &mut impl FnMut(u64),
) -> Result<CaptureAnalysis, CaptureReader> {
    let (head, warm_up, min_bytes) = settings();
    let Some(mapped) = reader.mapped() else { return Err(reader) };
    if options.in_order || mapped.len() < min_bytes.max(64) {
        return Err(reader);
    }
    // A look at the start, thrown away: how many connections, and the
    // size of a record.
    let mut probe = table_for(&options);
    let first = mapped.read((24, 0), (usize::MAX, head), None, |f| probe.frame(f, &mut ()));
    if first.error.is_some() || first.last_number < head || probe.fork(SPLIT_MAX_CONNECTIONS).is_none() {
        return Err(reader);
    }
    let record = (first.end - 24) / head as usize;
    // The second thread reads the warm-up as well: the first takes a
    // little more than half.
    let middle = 24 + (mapped.len() - 24) / 2 + record * warm_up / 2;
    if middle >= mapped.len() {
        return Err(reader);
    }
    // A sink that holds the second stretch until the join holds a bounded
    // part of the file. And it is slower than the pipeline on this kind
    // of machine (module docs): only on request.
    if S::SPLIT_SNAPSHOTS
        && (((mapped.len() - middle) / record.max(1)) as u64 > S::LATER_MAX_FRAMES
            || std::env::var_os("TCPWHY_SPLIT_RECORDS").is_none())
    {
        return Err(reader);
    }
    let path = reader.path().display().to_string();
    let analysis = run(&mapped, options, (head, warm_up, middle, record), sink, on_progress);
    Ok(CaptureAnalysis { path, ..analysis })
}

fn run<S: ShardSink>(
    mapped: &MappedPcap<'_>,
    options: AnalyzeOptions,
    (head, warm_up, middle, record): (u64, usize, usize, usize),
    sink: &mut S,
    on_progress: &mut impl FnMut(u64),
) -> CaptureAnalysis {
    let stop = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::sync_channel::<Option<FlowTable>>(1);
    let mut table = table_for(&options);
    let later = sink.later();
    sink.split_starts();
    let (first, second) = std::thread::scope(|scope| {
        let second = scope.spawn(|| second_half::<S>(mapped, rx, (record, warm_up, middle), later, &stop));
        let mut tx = Some(tx);
        let first = mapped.read((24, 0), (middle, u64::MAX), None, |f| {
            table.frame(f, sink);
            if f.number == head {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(table.fork(SPLIT_MAX_CONNECTIONS));
                }
            }
            if f.number % 65536 == 0 {
                // Both halves advance together: twice the first's bytes.
                on_progress(2 * f.number * record as u64);
            }
        });
        drop(tx);
        if first.error.is_some() {
            stop.store(true, Ordering::Relaxed);
        }
        let second = match second.join() {
            Ok(s) => s,
            Err(p) => std::panic::resume_unwind(p),
        };
        (first, second)
    });
    let end = match (first.error.is_some(), second) {
        // Reading stops at the first bad record, as in one pass.
        (true, _) => first,
        // The second thread found the record the first stopped at.
        (false, Ok(second)) if second.split.0 == first.end => {
            let Second { table: mut later, mut at_split, mut read, split, sink: later_sink, snapshots } = second;
            let copies = later.copy_verdicts().unwrap_or_default();
            let delta = first.last_number as i64 - split.1 as i64;
            at_split.renumber(SECOND_NUMBERS_FROM + 1, delta);
            later.renumber(SECOND_NUMBERS_FROM + 1, delta);
            read.last_number = (read.last_number as i64 + delta) as u64;
            if let Some(e) = read.error.as_mut() {
                e.renumber(delta);
            }
            match later.answers_as(&at_split, &table) {
                Ok(()) => {
                    report(format_args!("joined at frame {}", first.last_number + 1));
                    let join = SplitJoin { mapped, snapshots: &snapshots, whole: &table, delta, cursor: Default::default(), copies };
                    sink.join_later(later_sink, &join);
                    later.join(table);
                    table = later;
                    read
                }
                Err(why) => {
                    report(format_args!("not joined: {why}; read on by one thread"));
                    mapped.read((first.end, first.last_number), (usize::MAX, u64::MAX), None, |f| table.frame(f, sink))
                }
            }
        }
        (false, second) => {
            let why = second.err().unwrap_or("it started at another record");
            report(format_args!("not joined: {why}; read on by one thread"));
            mapped.read((first.end, first.last_number), (usize::MAX, u64::MAX), None, |f| table.frame(f, sink))
        }
    };
    sink.split_ends();
    let frames = end.last_number;
    let summary = CaptureSummary {
        frames,
        format: mapped.format(),
        compression: None,
        unsupported_links: match mapped.link() {
            LinkType::Other(n) if frames > 0 => vec![(n, frames)],
            _ => Vec::new(),
        },
        error: end.error,
        interface_drops: None,
    };
    analysis(String::new(), table, summary, sink)
}

/// The second stretch numbers its frames from here until it knows how
/// many came before (a real capture holds fewer than 2^40 frames).
const SECOND_NUMBERS_FROM: u64 = 1 << 40;

/// The second thread: finds a record boundary a warm-up before the split
/// (without walking the records before it: that walk is a chain of
/// dependent loads, 11 ms for half the snaplen-128 bench file), waits for
/// the first thread's table, reads the warm-up, then from the split to
/// the end. Frames are numbered from [`SECOND_NUMBERS_FROM`].
fn second_half<S: ShardSink>(
    mapped: &MappedPcap<'_>,
    rx: std::sync::mpsc::Receiver<Option<FlowTable>>,
    (record, warm_up, middle): (usize, usize, usize),
    mut sink: S::Later,
    stop: &AtomicBool,
) -> Result<Second<S::Later>, &'static str> {
    let warm_at = mapped.resync(middle.saturating_sub(record * warm_up)).ok_or("no record boundary found")?;
    let mut table = rx
        .recv()
        .ok()
        .flatten()
        .ok_or("too many connections, or attempts held, after the first frames")?;
    table.resume_after_jump(SECOND_NUMBERS_FROM + 1);
    let warm = mapped.read((warm_at, SECOND_NUMBERS_FROM), (middle, u64::MAX), Some(stop), |f| table.frame(f, &mut ()));
    if warm.error.is_some() || warm.end >= mapped.len() {
        return Err("the warm-up reached the end of the file");
    }
    let split = (warm.end, warm.last_number);
    let at_split = table.start_split().ok_or("attempts held at the split")?;
    if S::SPLIT_SNAPSHOTS {
        table.keep_copy_verdicts();
    }
    let mut snapshots = Vec::new();
    let mut at = split;
    let read = loop {
        // In stretches between snapshots when the sink asks for them.
        let until = if S::SPLIT_SNAPSHOTS {
            snapshots.extend(table.snapshot().map(|table| Snapshot { offset: at.0, number: at.1, table }));
            at.1 + SPLIT_SNAPSHOT_FRAMES
        } else {
            u64::MAX
        };
        let read = mapped.read(at, (usize::MAX, until), Some(stop), |f| {
            table.frame(f, &mut sink);
            if f.number % 4096 == 0 && (table.split_spoiled().is_some() || S::later_spoiled(&sink).is_some()) {
                stop.store(true, Ordering::Relaxed);
            }
        });
        if read.error.is_some() || read.end >= mapped.len() || read.last_number < until || stop.load(Ordering::Relaxed) {
            break read;
        }
        at = (read.end, read.last_number);
    };
    if let Some(why) = table.split_spoiled().or(S::later_spoiled(&sink)) {
        return Err(why);
    }
    if stop.load(Ordering::Relaxed) {
        return Err("stopped");
    }
    Ok(Second { table, at_split, read, split, sink, snapshots })
}
