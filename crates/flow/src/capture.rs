//! Whole-capture analysis: a capture file in, connection summaries out.

use crate::analysis::{analysis, table_for, AnalyzeOptions, CaptureAnalysis};
use crate::table::{FlowTable, SegmentSink, ShardSink};
use crate::table::SkipCounts;
use std::sync::mpsc;
use tcpwhy_wire::{decode_frame, CaptureReader, CaptureSummary, TcpSegment};

/// Reads a whole capture. `on_progress` is called every 64 Ki frames with
/// the bytes read so far from the file.
pub fn analyze_capture(
    reader: CaptureReader,
    options: AnalyzeOptions,
    sink: &mut impl SegmentSink,
    mut on_progress: impl FnMut(u64),
) -> CaptureAnalysis {
    let path = reader.path().display().to_string();
    let progress = reader.progress();
    let mut table = table_for(&options);
    let summary = if options.decode_thread {
        decoded_elsewhere(reader.map_ahead(true), &mut table, sink, &mut on_progress)
    } else {
        reader.for_each_frame(|frame| {
            table.frame(frame, sink);
            if frame.number % 65536 == 0 {
                on_progress(progress.bytes());
            }
        })
    };
    analysis(path, table, summary, sink)
}

/// [`analyze_capture`] with the connections' analysis sharded over
/// `shards` threads beside the reading thread (`crate::shard`): the same
/// results, the sink split over the shards and joined after. No shards:
/// [`analyze_capture`] (`options.decode_thread` is then obeyed; with shards
/// the reading thread decodes).
pub fn analyze_capture_sharded<S: ShardSink>(
    reader: CaptureReader,
    options: AnalyzeOptions,
    shards: usize,
    sink: &mut S,
    mut on_progress: impl FnMut(u64),
) -> CaptureAnalysis {
    if shards == 0 {
        return analyze_capture(reader, options, sink, on_progress);
    }
    let reader = if S::SPLITS_IN_TIME {
        match crate::split::analyze_split(reader, options, sink, &mut on_progress) {
            Ok(analysis) => return analysis,
            Err(reader) => reader,
        }
    } else {
        reader
    };
    let path = reader.path().display().to_string();
    let progress = reader.progress();
    let mut table = table_for(&options);
    let summary = crate::shard::with_shards(&mut table, shards, sink, |table| {
        reader.map_ahead(true).for_each_frame(|frame| {
            table.frame(frame, &mut ());
            if frame.number % 65536 == 0 {
                on_progress(progress.bytes());
            }
        })
    });
    analysis(path, table, summary, sink)
}

/// Segments decoded per batch handed between the threads. Each hand-over
/// may wake the other thread (a futex call and a context switch, some
/// microseconds): 4,096 segments make that nothing next to the segments.
/// Measured on the 1.2 M-packet bench capture at snaplen 128, two cores:
/// 0.153 s with batches of 256, 0.139 s with 4,096 (best of 12).
const BATCH_SEGMENTS: usize = 4096;
/// Batches that exist at once, reused: the reading thread waits for one to
/// come back rather than make another, so the hand-over holds at most
/// this many (about 0.7 MB each) however the two threads' speeds differ.
const BATCH_POOL: usize = 4;

/// Segments decoded on the reading thread, with the payload bytes the sink
/// reads (`SegmentSink::payload_prefix`).
#[derive(Default)]
struct Batch {
    segs: Vec<(TcpSegment<'static>, u64, i64, u32)>,
    bytes: Vec<u8>,
    /// The last frame number read, for progress.
    last_frame: u64,
}

impl Batch {
    fn new() -> Batch {
        Batch { segs: Vec::with_capacity(BATCH_SEGMENTS), ..Batch::default() }
    }
}

/// The capture read and decoded on a scoped thread; segments come back in
/// batches, in capture order, and go through the table here.
fn decoded_elsewhere(
    reader: CaptureReader,
    table: &mut FlowTable,
    sink: &mut impl SegmentSink,
    on_progress: &mut impl FnMut(u64),
) -> CaptureSummary {
    let progress = reader.progress();
    let prefix = sink.payload_prefix();
    let (full_tx, full_rx) = mpsc::sync_channel::<Batch>(BATCH_POOL);
    let (empty_tx, empty_rx) = mpsc::sync_channel::<Batch>(BATCH_POOL);
    for _ in 1..BATCH_POOL {
        let _ = empty_tx.send(Batch::new());
    }
    std::thread::scope(|scope| {
        let decoder = scope.spawn(move || {
            let mut skipped = SkipCounts::default();
            let mut batch = Some(Batch::new());
            let summary = reader.for_each_frame(|frame| {
                // No batch: the analysis ended early (it panicked); the
                // rest of the capture is read and dropped.
                let Some(b) = batch.as_mut() else { return };
                match decode_frame(frame.link, frame.data, frame.orig_len) {
                    Ok(ref seg) => {
                        let take = seg.payload.len().min(prefix);
                        let at = b.bytes.len() as u32;
                        b.bytes.extend_from_slice(&seg.payload[..take]);
                        b.segs.push((TcpSegment { payload: &[], ..*seg }, frame.number, frame.time_ns, at));
                    }
                    Err(why) => skipped.add(why),
                }
                b.last_frame = frame.number;
                if b.segs.len() >= BATCH_SEGMENTS {
                    let full = batch.take().expect("a batch");
                    if full_tx.send(full).is_ok() {
                        batch = empty_rx.recv().ok();
                    }
                }
            });
            if let Some(b) = batch {
                let _ = full_tx.send(b);
            }
            (summary, skipped)
        });
        let mut next_progress = 65536;
        for mut batch in full_rx {
            for (seg, frame, time_ns, at) in &batch.segs {
                let at = *at as usize;
                let payload = &batch.bytes[at..at + (seg.captured as usize).min(prefix)];
                table.segment(&TcpSegment { payload, ..*seg }, *frame, *time_ns, sink);
            }
            if batch.last_frame >= next_progress {
                next_progress = batch.last_frame + 65536;
                on_progress(progress.bytes());
            }
            batch.segs.clear();
            batch.bytes.clear();
            let _ = empty_tx.send(batch);
        }
        match decoder.join() {
            Ok((summary, skipped)) => {
                table.skipped.merge(&skipped);
                summary
            }
            Err(p) => std::panic::resume_unwind(p),
        }
    })
}
