//! Whole-capture analysis: a capture file in, connection summaries out.

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
    CaptureAnalysis {
        path,
        format: summary.format,
        compression: summary.compression,
        frames: summary.frames,
        tcp_segments,
        skipped,
        unsupported_links: summary.unsupported_links,
        interface_drops: summary.interface_drops,
        connections: table.finish(),
        error: summary.error,
    }
}
