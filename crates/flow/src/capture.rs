//! Whole-capture analysis: a capture file in, connection summaries out.

use crate::attempts::AttemptSummary;
use crate::summary::ConnectionSummary;
use crate::table::{FlowTable, SegmentSink, ShardSink};
use crate::table::SkipCounts;
use std::sync::mpsc;
use tcpwhy_wire::{decode_frame, CaptureError, CaptureFormat, CaptureReader, CaptureSummary, TcpSegment};

/// The model of one capture file.
#[derive(Debug)]
pub struct CaptureAnalysis {
    pub path: String,
    pub format: CaptureFormat,
    pub compression: Option<&'static str>,
    pub frames: u64,
    pub tcp_segments: u64,
    /// Frames skipped, by reason (`NotTcp::name`).
    pub skipped: Vec<(&'static str, u64)>,
    pub unsupported_links: Vec<(i32, u64)>,
    /// Packets the capture itself dropped (pcapng interface statistics).
    pub interface_drops: Option<u64>,
    pub connections: Vec<ConnectionSummary>,
    /// Connection attempts (SYNs and other control-only tuples) as a whole:
    /// floods and scans are told here rather than as millions of connections.
    pub attempts: AttemptSummary,
    /// Connections retired early to stay within `max_connections`.
    pub evicted_connections: u64,
    /// Set when reading stopped before the end: results cover what came before.
    pub error: Option<CaptureError>,
}

impl CaptureAnalysis {
    /// The one message for a capture that was read but holds no TCP at all,
    /// whatever command read it: `no TCP in PATH: N frames, none TCP`, with
    /// what the frames were (the `skipped` reasons) when there were any.
    /// (Frames whose TCP header the snaplen cut are TCP: their own warning
    /// says so.)
    pub fn no_tcp(&self) -> Option<String> {
        if self.tcp_segments > 0 || self.skipped.iter().any(|(why, n)| *why == "truncated_header" && *n > 0) {
            return None;
        }
        let what: Vec<String> = self.skipped.iter().filter(|(_, n)| *n > 0).map(|(why, n)| format!("{why} {n}")).collect();
        let what = if what.is_empty() { String::new() } else { format!(" ({})", what.join(", ")) };
        Some(format!("no TCP in {}: {} frames, none TCP{what}", self.path, self.frames))
    }

    /// The capture-level warnings, the same words in every output: no TCP
    /// at all ([`Self::no_tcp`]), frames the snaplen cut before the end of
    /// their TCP header, packets the capture dropped, connections summarised
    /// early.
    pub fn warnings(&self) -> Vec<String> {
        let mut w: Vec<String> = self.no_tcp().into_iter().collect();
        let cut = self.skipped.iter().find(|(why, _)| *why == "truncated_header").map_or(0, |(_, n)| *n);
        if cut > 0 {
            w.push(format!(
                "{cut} of {} frames were cut by the snaplen before the end of their TCP header and are not analysed; \
                 capture with a snaplen of at least 128 bytes (tcpdump -s 128)",
                self.frames
            ));
        }
        if let Some(n) = self.interface_drops.filter(|n| *n > 0) {
            w.push(format!(
                "the capture dropped {n} packets (pcapng interface statistics); verdicts resting on loss are at most medium"
            ));
        }
        if self.evicted_connections > 0 {
            w.push(format!(
                "{} connections were summarised while still open, to stay within --max-connections; \
                 a later segment of one starts a new connection",
                self.evicted_connections
            ));
        }
        w
    }
}

/// Reads a whole capture. `on_progress` is called every 64 Ki frames with
/// the bytes read so far from the file.
/// What to keep beyond the default summary.
#[derive(Debug, Clone, Copy, Default)]
pub struct AnalyzeOptions {
    /// Throughput and goodput over time in each direction's summary.
    pub series: bool,
    /// Live connections held at most (0: `MAX_CONNECTIONS_DEFAULT`).
    pub max_connections: usize,
    /// Every tuple is a connection from its first segment, and the sink
    /// sees segments in capture order (per-packet output). Off by default:
    /// control-only tuples are held as compact attempts first.
    pub in_order: bool,
    /// Read and decode the capture on a thread of its own, beside the
    /// analysis (two cores busy on one file). The results are the same as
    /// on one thread: the segments reach the table in capture order.
    pub decode_thread: bool,
}

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

pub(crate) fn table_for(options: &AnalyzeOptions) -> FlowTable {
    let mut table = FlowTable::new();
    table.series = options.series;
    table.hold_attempts = !options.in_order;
    if options.max_connections > 0 {
        table.max_connections = options.max_connections;
    }
    table
}

/// The analysis once the capture is read: the table's summaries.
pub(crate) fn analysis(path: String, table: FlowTable, summary: CaptureSummary, sink: &mut impl SegmentSink) -> CaptureAnalysis {
    let skipped = table
        .skipped
        .iter()
        .map(|(why, n)| (why.name(), n))
        .collect();
    let tcp_segments = table.segments();
    let evicted_connections = table.evicted_connections;
    let (connections, attempts) = table.finish(sink);
    CaptureAnalysis {
        path,
        format: summary.format,
        compression: summary.compression,
        frames: summary.frames,
        tcp_segments,
        skipped,
        unsupported_links: summary.unsupported_links,
        interface_drops: summary.interface_drops,
        connections,
        attempts,
        evicted_connections,
        error: summary.error,
    }
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
