//! Whole-capture analysis: a capture file in, connection summaries out.

use crate::attempts::AttemptSummary;
use crate::summary::ConnectionSummary;
use crate::table::{FlowTable, SegmentSink};
use tcpwhy_wire::{CaptureError, CaptureFormat, CaptureReader};

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
}

pub fn analyze_capture(
    reader: CaptureReader,
    options: AnalyzeOptions,
    sink: &mut impl SegmentSink,
    mut on_progress: impl FnMut(u64),
) -> CaptureAnalysis {
    let path = reader.path().display().to_string();
    let progress = reader.progress();
    let mut table = FlowTable::new();
    table.series = options.series;
    table.hold_attempts = !options.in_order;
    if options.max_connections > 0 {
        table.max_connections = options.max_connections;
    }
    let summary = reader.for_each_frame(|frame| {
        table.frame(frame, sink);
        if frame.number % 65536 == 0 {
            on_progress(progress.bytes());
        }
    });
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
