//! Per-packet records kept for plots and tables: one row per analysed TCP
//! segment, stored column by column, plus the SACK scoreboard after each ACK
//! that carried SACK blocks.
//!
//! [`PacketLog`] is a [`SegmentSink`]; [`tcpwhy_flow::Tee`] lets it run in the same pass
//! as the diagnosis `Recorder`. Memory is bounded by a row budget (about 75
//! bytes a row, [`DEFAULT_PACKET_BUDGET`] rows). Up to the budget every
//! segment is kept. When it is reached the log is *thinned*: first every row
//! not yet given to the [`RowExport`] (the `packets` and `sack` tables,
//! written while the capture is read) is exported, then the connections with
//! the most rows are cut into time buckets, and in each bucket only the
//! rows that are the first, the last, the minimum or the maximum of a plotted
//! series are kept, for each kind of row (data, flagged data, ACKs, flagged
//! ACKs, control segments, each per direction). Buckets double in width
//! from a fixed origin, so thinning again keeps exactly the first, last,
//! minimum and maximum of all the original rows of the wider bucket: the
//! plot's envelope is exact, only the points inside it are fewer (the
//! report says at what resolution). [`PacketLog::thinned`] says so.

use std::collections::HashMap;
use tcpwhy_flow::{Connection, Flags, SegmentEvent, SegmentSink};

/// Default row budget: 1 Mi rows (about 75 MiB): every packet of a capture
/// up to a million packets, the 256 MiB bound of a report (issue 18) with
/// the diagnosis and the page's own buffers beside it.
pub const DEFAULT_PACKET_BUDGET: usize = 1 << 20;
/// Rows a thinning leaves at most: half the budget, so that each thinning
/// frees at least half and its cost is spread over as many new rows.
const THIN_TO_SHARE: f64 = 0.5;
/// A thinning that leaves more than this share of the budget stops the
/// recording instead (the log is then `truncated`).
const GIVE_UP_SHARE: f64 = 0.75;

/// Receives rows before a thinning drops them, and the rest at the end.
pub trait RowExport {
    /// Rows `rows` of `log` (and their SACK rows), in capture order.
    fn rows(&mut self, log: &PacketLog, rows: std::ops::Range<usize>) -> std::io::Result<()>;
}
/// SACK ranges kept per ACK (the highest ones: the newest holes).
const SACK_RANGES_PER_ACK: usize = 4;

pub use crate::columns::{Columns, NONE_I64, NONE_U64};

/// Column store of every analysed segment: its [`Columns`] (read through
/// `Deref`: `log.seq[i]`), with the budget, the SACK blocks seen and the
/// export that fill them.
#[derive(Default)]
pub struct PacketLog {
    cols: Columns,
    /// First data segment of each (connection, direction): its frame number.
    pub first_data_frame: HashMap<(u64, u8), u64>,
    budget: usize,
    truncated: bool,
    sack_seen: HashMap<(u64, u8), u64>,
    export: Option<Box<dyn RowExport>>,
    /// Rows before this index went to `export`.
    exported: usize,
    export_error: Option<std::io::Error>,
}

impl std::ops::Deref for PacketLog {
    type Target = Columns;
    fn deref(&self) -> &Columns {
        &self.cols
    }
}

impl std::ops::DerefMut for PacketLog {
    fn deref_mut(&mut self) -> &mut Columns {
        &mut self.cols
    }
}

impl std::fmt::Debug for dyn RowExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RowExport")
    }
}

impl PacketLog {
    pub fn new() -> Self {
        Self::with_budget(DEFAULT_PACKET_BUDGET)
    }
    pub fn with_budget(rows: usize) -> Self {
        PacketLog { budget: rows, ..Default::default() }
    }
    pub fn len(&self) -> usize {
        self.frame.len()
    }
    pub fn is_empty(&self) -> bool {
        self.frame.is_empty()
    }
    /// The budget ran out and thinning could not free room (many small
    /// connections): later segments are missing.
    pub fn truncated(&self) -> bool {
        self.truncated
    }
    /// Some connections' rows were thinned (see the module docs).
    pub fn thinned(&self) -> bool {
        !self.thinned_width.is_empty()
    }
    /// Gives every row to `export`: those a thinning would drop, before it,
    /// and the rest at [`PacketLog::finish_export`].
    pub fn set_export(&mut self, export: Box<dyn RowExport>) {
        self.export = Some(export);
    }
    /// Exports the rows not yet exported; the first export error, if any.
    pub fn finish_export(&mut self) -> std::io::Result<()> {
        self.export_pending();
        match self.export_error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
    fn export_pending(&mut self) {
        if let Some(mut ex) = self.export.take() {
            if self.export_error.is_none() && self.exported < self.len() {
                if let Err(e) = ex.rows(self, self.exported..self.len()) {
                    self.export_error = Some(e);
                }
            }
            self.exported = self.len();
            self.export = Some(ex);
        }
    }
    /// Row indices grouped by connection id (rows of one connection in capture order).
    pub fn rows_by_connection(&self) -> HashMap<u64, Vec<u32>> {
        let mut m: HashMap<u64, Vec<u32>> = HashMap::new();
        for (i, c) in self.connection.iter().enumerate() {
            m.entry(*c).or_default().push(i as u32);
        }
        m
    }
    /// SACK rows grouped by connection id.
    pub fn sack_by_connection(&self) -> HashMap<u64, Vec<(u32, i64, i64)>> {
        let mut m: HashMap<u64, Vec<(u32, i64, i64)>> = HashMap::new();
        for s in &self.sack {
            m.entry(self.connection[s.0 as usize]).or_default().push(*s);
        }
        m
    }
    pub fn is_retransmission(&self, row: usize) -> bool {
        Flags(self.flags[row]).has(Flags::RETRANSMISSION)
    }
}

impl SegmentSink for PacketLog {
    fn segment(&mut self, c: &Connection, e: &SegmentEvent) {
        if self.frame.len() >= self.budget && !self.truncated {
            self.export_pending();
            crate::thin::thin(&mut self.cols, (self.budget as f64 * THIN_TO_SHARE) as usize);
            self.exported = self.len();
            self.thin_clean = self.len();
            if self.frame.len() as f64 > self.budget as f64 * GIVE_UP_SHARE {
                // Thinning freed too little (many small connections): stop
                // recording rather than thin again every few rows.
                self.truncated = true;
            }
        }
        if self.truncated {
            return;
        }
        let row = self.frame.len() as u32;
        let d = (e.direction & 1) as u8;
        self.frame.push(e.frame);
        self.time_ns.push(e.time_ns);
        self.connection.push(e.connection);
        self.direction.push(d);
        self.tcp_flags.push(e.tcp_flags);
        self.flags.push(e.flags.0);
        self.seq.push(e.seq);
        self.len.push(e.payload_len);
        self.ack.push(e.ack.unwrap_or(NONE_I64));
        self.window.push(e.window_bytes);
        self.in_flight.push(e.in_flight.unwrap_or(NONE_U64));
        self.rtt_ns.push(e.rtt_ns.unwrap_or(NONE_I64));
        if e.payload_len > 0 {
            self.first_data_frame.entry((e.connection, d)).or_insert(e.frame);
        }
        // SACK: the acking side's counter of SACK blocks sent moved on this
        // segment; the scoreboard of the peer (data sender) holds the result.
        let sent = c.dirs[d as usize].stats.counts.sack_blocks_sent;
        let seen = self.sack_seen.entry((e.connection, d)).or_insert(0);
        if sent != *seen {
            *seen = sent;
            let ranges: Vec<(i64, i64)> = c.dirs[1 - d as usize].sacked_ranges().collect();
            let skip = ranges.len().saturating_sub(SACK_RANGES_PER_ACK);
            for (l, r) in ranges.into_iter().skip(skip) {
                self.sack.push((row, l, r));
            }
        }
    }
}

/// Printable preview of captured payload bytes: ASCII kept, line breaks
/// shown as `\r` `\n`, everything else as `.`. The result is plain text; the
/// HTML writer escapes it like any other capture-derived string.
pub fn payload_preview(bytes: &[u8], max: usize) -> String {
    let mut s = String::new();
    for &b in bytes.iter().take(max) {
        match b {
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push('.'),
        }
    }
    s
}

/// Reads the captured payload of the given frames (second pass over the
/// capture). Returns frame number -> first `max` bytes.
pub fn read_payloads(
    path: &std::path::Path,
    frames: &std::collections::HashSet<u64>,
    max: usize,
) -> HashMap<u64, Vec<u8>> {
    let mut out = HashMap::new();
    let Some(&last) = frames.iter().max() else { return out };
    let Ok(reader) = tcpwhy_wire::CaptureReader::open(path) else { return out };
    // The reader has no early exit; frames past the last wanted are skipped cheaply.
    reader.for_each_frame(|f| {
        if f.number > last || !frames.contains(&f.number) {
            return;
        }
        if let Ok(seg) = tcpwhy_wire::decode_frame(f.link, f.data, f.orig_len) {
            out.insert(f.number, seg.payload[..seg.payload.len().min(max)].to_vec());
        }
    });
    out
}
