//! Compact per-segment records kept for diagnosis.
//!
//! [`Recorder`] is a [`SegmentSink`]: while the flow table analyses a
//! capture it keeps, for every connection and data direction, one
//! [`DataRec`] per data segment the sender sent and one [`AckRec`] per
//! segment the receiver sent back (its ACK number, advertised window, the
//! RTT sample it produced, and whether it carried data of its own). The
//! diagnosis works on these after the pass, with the RTT known.
//!
//! Memory is bounded: a global budget of records (40 bytes each); when it
//! is spent, further segments are not recorded and the directions affected
//! are marked `truncated` (their diagnosis covers the part recorded).

use foldhash::HashMap;
use tcpwhy_flow::{Connection, Flags, SegmentEvent, SegmentSink};

/// One data segment, as the sender sent it (seen at the capture point).
#[derive(Debug, Clone, Copy)]
pub struct DataRec {
    pub t_ns: i64,
    /// Relative sequence number of the first payload byte.
    pub seq: i64,
    pub frame: u64,
    pub len: u32,
    /// Bytes in flight after this segment (SACK-aware), saturated at u32::MAX.
    pub in_flight: u32,
    /// Analysis flags (`tcpwhy_flow::Flags`).
    pub flags: Flags,
    /// TSecr of the segment (0: none).
    pub tsecr: u32,
}

impl DataRec {
    pub fn end(&self) -> i64 {
        self.seq + self.len as i64
    }
    pub fn is_retransmission(&self) -> bool {
        self.flags.has(Flags::RETRANSMISSION)
    }
}

/// One segment from the receiver back to the sender.
#[derive(Debug, Clone, Copy)]
pub struct AckRec {
    pub t_ns: i64,
    /// Relative acknowledgement number in the data sender's sequence space.
    pub ack: i64,
    pub frame: u64,
    /// Advertised window in bytes (scaled), saturated at u32::MAX.
    pub window: u32,
    /// RTT sample (µs) this ACK produced for the sender's data; 0 = none.
    pub rtt_us: u32,
    /// Payload the receiver sent on this segment (application data going back).
    pub payload: u32,
    pub flags: Flags,
    /// TSval of the segment (0: none).
    pub tsval: u32,
}

/// Records of one data direction.
#[derive(Debug, Default, Clone)]
pub struct DirRecords {
    pub data: Vec<DataRec>,
    pub acks: Vec<AckRec>,
    /// The record budget ran out: later segments are missing.
    pub truncated: bool,
}

/// The first captured bytes of a turn: new data in one direction after
/// the other direction sent data (a request, a response). Untrusted.
#[derive(Debug, Clone)]
pub struct TurnHead {
    pub dir: u8,
    pub t_ns: i64,
    pub seq: i64,
    pub bytes: Vec<u8>,
}

/// At most this many bytes of each turn's start are kept.
pub const TURN_HEAD_BYTES: usize = 160;
/// At most this many turn heads per connection.
pub const MAX_TURN_HEADS: usize = 4096;

/// Both directions of one connection; index 0 = data sent by endpoint a.
#[derive(Debug, Default, Clone)]
pub struct ConnRecords {
    pub dirs: [DirRecords; 2],
    /// Starts of turns, in capture order.
    pub heads: Vec<TurnHead>,
    last_data_dir: Option<u8>,
}

/// Default budget: 8 Mi records (~320 MiB).
pub const DEFAULT_RECORD_BUDGET: usize = 8 << 20;

/// Keeps the records of every connection (see the module docs).
#[derive(Debug)]
pub struct Recorder {
    conns: HashMap<u64, ConnRecords>,
    budget: usize,
    used: usize,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::with_budget(DEFAULT_RECORD_BUDGET)
    }
}

impl Recorder {
    pub fn with_budget(records: usize) -> Self {
        Recorder { conns: HashMap::default(), budget: records, used: 0 }
    }
    pub fn get(&self, connection: u64) -> Option<&ConnRecords> {
        self.conns.get(&connection)
    }
    pub fn records_used(&self) -> usize {
        self.used
    }
    /// True when some segments were not recorded for lack of budget.
    pub fn budget_exhausted(&self) -> bool {
        self.used >= self.budget
    }
}

fn sat32(v: u64) -> u32 {
    v.min(u32::MAX as u64) as u32
}

impl SegmentSink for Recorder {
    fn payload(&mut self, _connection: &Connection, e: &SegmentEvent, payload: &[u8]) {
        if e.flags.has(Flags::RETRANSMISSION) || e.payload_len == 0 {
            return;
        }
        let d = (e.direction & 1) as u8;
        let Some(conn) = self.conns.get_mut(&e.connection) else { return };
        if conn.last_data_dir != Some(d) {
            conn.last_data_dir = Some(d);
            if conn.heads.len() < MAX_TURN_HEADS {
                let n = payload.len().min(TURN_HEAD_BYTES);
                conn.heads.push(TurnHead { dir: d, t_ns: e.time_ns, seq: e.seq, bytes: payload[..n].to_vec() });
            }
        }
    }

    fn segment(&mut self, _connection: &Connection, e: &SegmentEvent) {
        const SYN: u16 = 0x02;
        const RST: u16 = 0x04;
        let d = e.direction & 1;
        let has_ack = e.ack.is_some() && e.tcp_flags & (SYN | RST) == 0;
        let data = e.payload_len > 0 && e.tcp_flags & (SYN | RST) == 0;
        if !has_ack && !data {
            return;
        }
        let full = self.used >= self.budget;
        let conn = self.conns.entry(e.connection).or_default();
        if full {
            if data {
                conn.dirs[d].truncated = true;
            }
            if has_ack {
                conn.dirs[1 - d].truncated = true;
            }
            return;
        }
        if data {
            conn.dirs[d].data.push(DataRec {
                t_ns: e.time_ns,
                seq: e.seq,
                frame: e.frame,
                len: e.payload_len,
                in_flight: sat32(e.in_flight.unwrap_or(0)),
                flags: e.flags,
                tsecr: e.timestamp.map_or(0, |t| t.1),
            });
            self.used += 1;
        }
        if let (true, Some(ack)) = (has_ack, e.ack) {
            conn.dirs[1 - d].acks.push(AckRec {
                t_ns: e.time_ns,
                ack,
                frame: e.frame,
                window: sat32(e.window_bytes),
                rtt_us: e.rtt_ns.map(|r| (r / 1000).clamp(1, u32::MAX as i64) as u32).unwrap_or(0),
                payload: e.payload_len,
                flags: e.flags,
                tsval: e.timestamp.map_or(0, |t| t.0),
            });
            self.used += 1;
        }
    }
}
