//! What a whole-capture analysis gives (`crate::capture`, `crate::split`):
//! the options it reads by, the table it starts from, and the capture's
//! model built from the table's summaries once the capture is read.

use crate::attempts::AttemptSummary;
use crate::summary::ConnectionSummary;
use crate::table::{FlowTable, SegmentSink};
use tcpwhy_wire::{CaptureError, CaptureFormat, CaptureSummary};

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
