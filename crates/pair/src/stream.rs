//! The comparison's read: each point's records of its matched connections
//! ([`Rec`]), merged in time order (capture 1's clock moved by the
//! handshakes' coarse offset). The records come from a [`Spill`] written
//! during the diagnosis's own read, or from the capture read again on a
//! thread of its own through a bounded channel. Memory is the channels or
//! each reader's buffer of the spill, the segments in flight and the unmatched
//! copies of the last [`crate::compare::MATCH_HORIZON_NS`]: never the
//! length of a capture.

use crate::fingerprint::CONTENT_PREFIX_BYTES;
use foldhash::HashMap;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use tcpwhy_flow::{analyze_capture, AnalyzeOptions, Connection, Flags, SegmentEvent, SegmentSink};
use tcpwhy_wire::{CaptureReader, TcpFlags};

/// Segments handed over at a time, and batches queued per capture.
const BATCH: usize = 1024;
const BATCHES_QUEUED: usize = 16;

/// The connections whose records a read wants, each with the index of
/// its pair (so that the merge needs no lookup of its own).
pub type Wanted = HashMap<u64, u32>;

/// One segment of a matched connection as one point saw it.
#[derive(Debug, Clone, Copy)]
pub struct Rec {
    pub conn: u64,
    /// The pair it belongs to ([`Wanted`]; set by the read, not spilled).
    pub entry: u32,
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
    wanted: Wanted,
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

impl Rec {
    /// One segment as the flow model at this point read it.
    fn of(c: &Connection, e: &SegmentEvent) -> Rec {
        let d = e.direction;
        let f = e.flags;
        // set on fast and spurious retransmissions too (tcpwhy_flow::Flags)
        let retrans = f.has(Flags::RETRANSMISSION);
        let end = e.seq + e.payload_len as i64;
        let needless = f.has(Flags::SPURIOUS_RETRANSMISSION)
            || (retrans && c.dirs[d].sacked_ranges().any(|(s, x)| s <= e.seq && end <= x));
        let shift = if TcpFlags(e.tcp_flags).syn() { 0 } else { c.dirs[d].window_scale.shift().unwrap_or(0) };
        Rec {
            conn: c.id,
            entry: 0,
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
        }
    }

    /// The fixed little-endian layout of a record in a [`Spill`]; None
    /// for a connection id or frame number past 32 bits (the spill is then
    /// given up). The window in bytes fits 32 bits (65,535 << 14), its
    /// field 16; the TCP flags use 11 bits and the record's own flags the
    /// 5 above them.
    fn encode(&self) -> Option<[u8; REC_BYTES]> {
        let mut b = [0u8; REC_BYTES];
        b[0..4].copy_from_slice(&u32::try_from(self.conn).ok()?.to_le_bytes());
        b[4..8].copy_from_slice(&u32::try_from(self.frame).ok()?.to_le_bytes());
        let words = [self.time_ns, self.seq, self.ack, self.rtt_ns.unwrap_or(0)];
        for (i, w) in words.iter().enumerate() {
            b[8 + i * 8..16 + i * 8].copy_from_slice(&w.to_le_bytes());
        }
        b[40..44].copy_from_slice(&self.tsval.unwrap_or(0).to_le_bytes());
        b[44..48].copy_from_slice(&self.len.to_le_bytes());
        b[48..52].copy_from_slice(&(self.window_bytes.min(u32::MAX as u64) as u32).to_le_bytes());
        b[52..54].copy_from_slice(&(self.raw_window.min(u16::MAX as u32) as u16).to_le_bytes());
        let bits = u16::from(self.dir & 1) << 15
            | u16::from(self.retrans) << 14
            | u16::from(self.needless) << 13
            | u16::from(self.tsval.is_some()) << 12
            | u16::from(self.rtt_ns.is_some()) << 11;
        b[54..56].copy_from_slice(&(self.tcp_flags & TCP_FLAG_BITS | bits).to_le_bytes());
        Some(b)
    }

    fn decode(b: &[u8; REC_BYTES]) -> Rec {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let i64_at = |i: usize| i64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let f = u16::from_le_bytes([b[54], b[55]]);
        Rec {
            conn: u32_at(0) as u64,
            entry: 0,
            frame: u32_at(4) as u64,
            time_ns: i64_at(8),
            seq: i64_at(16),
            ack: i64_at(24),
            rtt_ns: (f & 1 << 11 != 0).then_some(i64_at(32)),
            tsval: (f & 1 << 12 != 0).then_some(u32_at(40)),
            len: u32_at(44),
            window_bytes: u32_at(48) as u64,
            raw_window: u16::from_le_bytes([b[52], b[53]]) as u32,
            tcp_flags: f & TCP_FLAG_BITS,
            dir: (f >> 15) as u8,
            retrans: f & 1 << 14 != 0,
            needless: f & 1 << 13 != 0,
        }
    }
}

/// The TCP flag bits a spilled record keeps (the 8 of RFC 9293, AE and
/// two reserved).
const TCP_FLAG_BITS: u16 = 0x07ff;

/// Keeps the first bytes of one direction's stream (a connection with a
/// handshake, its payload from the first byte).
fn keep_prefix(map: &mut Prefixes, c: &Connection, e: &SegmentEvent, payload: &[u8]) {
    if e.seq != 1 || c.dirs[e.direction].syn.is_none() {
        return;
    }
    let p = &mut map.entry(c.id).or_default()[e.direction];
    let n = payload.len().min(CONTENT_PREFIX_BYTES);
    if p.len() < n {
        *p = payload[..n].to_vec();
    }
}

impl SegmentSink for Sink {
    fn segment(&mut self, c: &Connection, e: &SegmentEvent) {
        let Some(&entry) = self.wanted.get(&c.id) else { return };
        self.buf.push(Rec { entry, ..Rec::of(c, e) });
        if self.buf.len() >= BATCH {
            self.flush();
        }
    }

    fn payload(&mut self, c: &Connection, e: &SegmentEvent, payload: &[u8]) {
        let Some(map) = self.prefixes.as_mut() else { return };
        if !self.wanted.contains_key(&c.id) {
            keep_prefix(map, c, e, payload);
        }
    }

    fn payload_prefix(&self) -> usize {
        if self.prefixes.is_some() { CONTENT_PREFIX_BYTES } else { 0 }
    }
}

/// The first bytes of each direction, by connection id.
pub type Prefixes = HashMap<u64, [Vec<u8>; 2]>;

/// Bytes of one record in a [`Spill`].
const REC_BYTES: usize = 56;

/// The spill's write buffer. Each write is a system call: on the bench's
/// pair (a 1 M-packet capture with itself, 2-core AMD EPYC), 32 KiB took
/// 12% more time than 256 KiB, and 1 MiB 2% less.
const SPILL_BUFFER_BYTES: usize = 1 << 20;

/// A spill file is given up (the comparison then reads the capture again)
/// past this size: 19 M segments. Disk, like memory, stays bounded.
pub const SPILL_MAX_BYTES: u64 = 1 << 30;

/// The comparison's records of every connection, written during the
/// diagnosis's own read of a capture (a sink beside its recorder) to an
/// unnamed temporary file: the comparison then reads them instead of
/// reading and analysing the capture again. Memory holds a write buffer
/// and each connection's first bytes; the file goes when it is dropped.
pub struct Spill {
    out: Option<std::io::BufWriter<std::fs::File>>,
    written: u64,
    prefixes: Prefixes,
}

impl Spill {
    /// A spill in the system's temporary directory (`TMPDIR`).
    pub fn new() -> std::io::Result<Spill> {
        let f = tempfile::tempfile()?;
        Ok(Spill { out: Some(std::io::BufWriter::with_capacity(SPILL_BUFFER_BYTES, f)), written: 0, prefixes: HashMap::default() })
    }

    /// The records, to be read back, and the connections' first bytes; None
    /// when the spill was given up (too large, or a write failed).
    pub fn finish(self) -> Option<(Spilled, Prefixes)> {
        let f = self.out?.into_inner().ok()?;
        Some((Spilled { file: f, len: self.written }, self.prefixes))
    }
}

impl SegmentSink for Spill {
    fn segment(&mut self, c: &Connection, e: &SegmentEvent) {
        use std::io::Write;
        let Some(out) = self.out.as_mut() else { return };
        self.written += REC_BYTES as u64;
        let ok = self.written <= SPILL_MAX_BYTES && Rec::of(c, e).encode().is_some_and(|b| out.write_all(&b).is_ok());
        if !ok {
            self.out = None;
        }
    }

    fn payload(&mut self, c: &Connection, e: &SegmentEvent, payload: &[u8]) {
        keep_prefix(&mut self.prefixes, c, e, payload);
    }

    fn payload_prefix(&self) -> usize {
        CONTENT_PREFIX_BYTES
    }
}

/// A finished spill's records: each reader reads them into a buffer of its
/// own (`pread`: no mapping shared between the merging threads, whose
/// page faults and unmapping would contend).
pub struct Spilled {
    file: std::fs::File,
    len: u64,
}

/// Bytes a spill's reader reads at a time: a whole number of records, small
/// enough to stay in a core's cache while they are decoded.
const SPILL_READ_BYTES: usize = REC_BYTES * BATCH;

impl Spilled {
    /// Reads the records from byte `at` into `buf` (a whole number of
    /// records; empty at the end or on a read error).
    fn read(&self, at: u64, buf: &mut Vec<u8>) {
        use std::os::unix::fs::FileExt;
        let n = (self.len.saturating_sub(at) as usize).min(SPILL_READ_BYTES);
        buf.resize(n, 0);
        if self.file.read_exact_at(buf, at).is_err() {
            buf.clear();
        }
    }
}

/// Reads one capture on its own thread, sending its wanted connections'
/// segments; the receiver ends when the capture does. With `prefixes`,
/// the thread also returns the other connections' first bytes.
pub fn spawn_reader<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    reader: CaptureReader,
    wanted: Wanted,
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

/// One point's records in order, a batch at a time: from a reader
/// thread, or decoded from a spill on the merging thread itself (reading
/// a file in order is cheaper there than handing records between cores).
pub struct Cursor<'a> {
    from: From<'a>,
    batch: Vec<Rec>,
    at: usize,
}

enum From<'a> {
    Thread(Receiver<Vec<Rec>>),
    Spill { spill: &'a Spilled, at: u64, buf: Vec<u8>, wanted: Wanted },
    Done,
}

impl<'a> Cursor<'a> {
    pub fn new(rx: Receiver<Vec<Rec>>) -> Self {
        Cursor { from: From::Thread(rx), batch: Vec::new(), at: 0 }
    }

    /// The wanted connections' records of a spill ([`Spill::finish`]).
    pub fn spilled(spill: &'a Spilled, wanted: Wanted) -> Self {
        Cursor { from: From::Spill { spill, at: 0, buf: Vec::with_capacity(SPILL_READ_BYTES), wanted }, batch: Vec::new(), at: 0 }
    }

    /// The next batch (empty at the end).
    fn refill(&mut self) {
        self.batch.clear();
        self.at = 0;
        match &mut self.from {
            From::Thread(rx) => match rx.recv() {
                Ok(b) => self.batch = b,
                Err(_) => self.from = From::Done,
            },
            From::Spill { spill, at, buf, wanted } => {
                spill.read(*at, buf);
                if buf.is_empty() {
                    self.from = From::Done;
                    return;
                }
                *at += buf.len() as u64;
                // a connection's records come in runs: the last answer first
                let mut last: (u64, Option<u32>) = (u64::MAX, None);
                for b in buf.chunks_exact(REC_BYTES) {
                    let rec = Rec::decode(b.try_into().expect("a record's bytes"));
                    if rec.conn != last.0 {
                        last = (rec.conn, wanted.get(&rec.conn).copied());
                    }
                    if let Some(entry) = last.1 {
                        self.batch.push(Rec { entry, ..rec });
                    }
                }
            }
            From::Done => {}
        }
    }

    /// Whether a record is ready in the batch (refilling it when spent);
    /// false at the end.
    fn ready(&mut self) -> bool {
        while self.at >= self.batch.len() {
            if matches!(self.from, From::Done) {
                return false;
            }
            self.refill();
        }
        true
    }
}

/// Calls `each(point, rec)` for both captures' records, in time order
/// with capture 1's clock moved back by `offset_ns` (capture 0's first on
/// a tie). While both batches hold records the two are merged in place;
/// a batch is refilled only when spent.
pub fn merge(mut cursors: [Cursor<'_>; 2], offset_ns: i64, mut each: impl FnMut(usize, &Rec)) {
    loop {
        let [c0, c1] = &mut cursors;
        match (c0.ready(), c1.ready()) {
            (true, true) => {
                let (b0, b1) = (&c0.batch, &c1.batch);
                let (mut i, mut j) = (c0.at, c1.at);
                while i < b0.len() && j < b1.len() {
                    if b1[j].time_ns - offset_ns < b0[i].time_ns {
                        each(1, &b1[j]);
                        j += 1;
                    } else {
                        each(0, &b0[i]);
                        i += 1;
                    }
                }
                (c0.at, c1.at) = (i, j);
            }
            (true, false) => drain(c0, 0, &mut each),
            (false, true) => drain(c1, 1, &mut each),
            (false, false) => return,
        }
    }
}

/// Hands the rest of a cursor's batch to `each`.
fn drain(c: &mut Cursor<'_>, p: usize, each: &mut impl FnMut(usize, &Rec)) {
    for r in &c.batch[c.at..] {
        each(p, r);
    }
    c.at = c.batch.len();
}
