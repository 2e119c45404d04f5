//! The comparison's read: both captures read at once, one thread each, their
//! matched connections' segments merged in time order (capture 1's clock
//! moved by the handshakes' coarse offset) through bounded channels. Memory
//! is the channels, the segments in flight and the unmatched copies of the
//! last [`crate::compare::MATCH_HORIZON_NS`]: never the length of a capture.

use crate::fingerprint::CONTENT_PREFIX_BYTES;
use foldhash::{HashMap, HashSet};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use tcpwhy_flow::{analyze_capture, AnalyzeOptions, Connection, Flags, SegmentEvent, SegmentSink};
use tcpwhy_wire::{CaptureReader, TcpFlags};

/// Segments handed over at a time, and batches queued per capture.
const BATCH: usize = 1024;
const BATCHES_QUEUED: usize = 16;

/// One segment of a matched connection as one point saw it.
#[derive(Debug, Clone, Copy)]
pub struct Rec {
    pub conn: u64,
    pub frame: u64,
    pub time_ns: i64,
    /// Side of the connection that sent it (0: endpoint a of that capture's table).
    pub dir: u8,
    pub seq: i64,
    pub len: u32,
    /// Relative acknowledgement number, -1 without ACK.
    pub ack: i64,
    pub tcp_flags: u16,
    /// The window field as sent (before scaling), and in bytes.
    pub raw_window: u32,
    pub window_bytes: u64,
    pub tsval: Option<u32>,
    /// This point's flow model called it a retransmission.
    pub retrans: bool,
    /// ...of data the receiver had already acknowledged or SACKed at this point.
    pub needless: bool,
    /// An RTT sample this ACK gave for the other side's data (ns).
    pub rtt_ns: Option<i64>,
}

struct Sink {
    wanted: HashSet<u64>,
    tx: SyncSender<Vec<Rec>>,
    buf: Vec<Rec>,
    closed: bool,
    /// The first bytes of each direction of the connections not wanted,
    /// when asked for (to match a proxy's halves after this pass).
    prefixes: Option<HashMap<u64, [Vec<u8>; 2]>>,
}

impl Sink {
    fn flush(&mut self) {
        if !self.buf.is_empty() && !self.closed {
            let full = std::mem::replace(&mut self.buf, Vec::with_capacity(BATCH));
            // the reader side stops early only when the merge has ended
            self.closed = self.tx.send(full).is_err();
        }
    }
}

impl SegmentSink for Sink {
    fn segment(&mut self, c: &Connection, e: &SegmentEvent) {
        if !self.wanted.contains(&c.id) {
            return;
        }
        let d = e.direction;
        let f = e.flags;
        // set on fast and spurious retransmissions too (tcpwhy_flow::Flags)
        let retrans = f.has(Flags::RETRANSMISSION);
        let end = e.seq + e.payload_len as i64;
        let needless = f.has(Flags::SPURIOUS_RETRANSMISSION)
            || (retrans && c.dirs[d].sacked_ranges().any(|(s, x)| s <= e.seq && end <= x));
        let shift = if TcpFlags(e.tcp_flags).syn() { 0 } else { c.dirs[d].window_scale.shift().unwrap_or(0) };
        self.buf.push(Rec {
            conn: c.id,
            frame: e.frame,
            time_ns: e.time_ns,
            dir: d as u8,
            seq: e.seq,
            len: e.payload_len,
            ack: e.ack.unwrap_or(-1),
            tcp_flags: e.tcp_flags,
            raw_window: (e.window_bytes >> shift).min(u32::MAX as u64) as u32,
            window_bytes: e.window_bytes,
            tsval: e.timestamp.map(|t| t.0),
            retrans,
            needless,
            rtt_ns: e.rtt_ns,
        });
        if self.buf.len() >= BATCH {
            self.flush();
        }
    }

    fn payload(&mut self, c: &Connection, e: &SegmentEvent, payload: &[u8]) {
        let Some(map) = self.prefixes.as_mut() else { return };
        if e.seq != 1 || c.dirs[e.direction].syn.is_none() || self.wanted.contains(&c.id) {
            return;
        }
        let p = &mut map.entry(c.id).or_default()[e.direction];
        let n = payload.len().min(CONTENT_PREFIX_BYTES);
        if p.len() < n {
            *p = payload[..n].to_vec();
        }
    }

    fn payload_prefix(&self) -> usize {
        if self.prefixes.is_some() { CONTENT_PREFIX_BYTES } else { 0 }
    }
}

/// The first bytes of each direction, by connection id.
pub type Prefixes = HashMap<u64, [Vec<u8>; 2]>;

/// Reads one capture on its own thread, sending its wanted connections'
/// segments; the receiver ends when the capture does. With `prefixes`,
/// the thread also returns the other connections' first bytes.
pub fn spawn_reader<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    reader: CaptureReader,
    wanted: HashSet<u64>,
    max_connections: usize,
    prefixes: bool,
) -> (Receiver<Vec<Rec>>, std::thread::ScopedJoinHandle<'scope, Prefixes>) {
    let (tx, rx) = sync_channel(BATCHES_QUEUED);
    let h = scope.spawn(move || {
        let prefixes = prefixes.then(HashMap::default);
        let mut sink = Sink { wanted, tx, buf: Vec::with_capacity(BATCH), closed: false, prefixes };
        let options = AnalyzeOptions { max_connections, ..Default::default() };
        analyze_capture(reader, options, &mut sink, |_| {});
        sink.flush();
        sink.prefixes.unwrap_or_default()
    });
    (rx, h)
}

/// One capture's records in order, a batch at a time.
pub struct Cursor {
    rx: Receiver<Vec<Rec>>,
    batch: Vec<Rec>,
    at: usize,
}

impl Cursor {
    pub fn new(rx: Receiver<Vec<Rec>>) -> Self {
        Cursor { rx, batch: Vec::new(), at: 0 }
    }

    pub fn peek(&mut self) -> Option<&Rec> {
        while self.at >= self.batch.len() {
            self.batch = self.rx.recv().ok()?;
            self.at = 0;
        }
        self.batch.get(self.at)
    }

    pub fn next(&mut self) -> Option<Rec> {
        let r = *self.peek()?;
        self.at += 1;
        Some(r)
    }
}

/// Calls `each(point, rec)` for both captures' records, in time order
/// with capture 1's clock moved back by `offset_ns`.
pub fn merge(mut cursors: [Cursor; 2], offset_ns: i64, mut each: impl FnMut(usize, Rec)) {
    loop {
        let t0 = cursors[0].peek().map(|r| r.time_ns);
        let t1 = cursors[1].peek().map(|r| r.time_ns - offset_ns);
        let p = match (t0, t1) {
            (Some(a), Some(b)) => usize::from(b < a),
            (Some(_), None) => 0,
            (None, Some(_)) => 1,
            (None, None) => return,
        };
        if let Some(r) = cursors[p].next() {
            each(p, r);
        }
    }
}
