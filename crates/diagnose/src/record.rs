//! Compact per-segment records kept for diagnosis.
//!
//! While the flow table analyses a capture, the recorder
//! (`crate::recorder`) keeps here, for every connection and data
//! direction, one [`DataRec`] per data segment the sender sent and one
//! [`AckRec`] per segment the receiver sent back (its ACK number, advertised
//! window, the RTT sample it produced, and whether it carried data of its
//! own). The diagnosis works on these after the pass, with the RTT known.
//!
//! Memory is bounded: a global budget of records (40 bytes each); when it
//! is spent, a direction holding enough is closed into a part (the
//! caller's callback diagnoses it and the records are dropped), and
//! otherwise further segments are not recorded and the directions affected
//! are marked `truncated` (their diagnosis covers the part recorded).

use crate::model::Part;
use foldhash::HashMap;
use tcpwhy_flow::{Flags, SegmentEvent};
use std::collections::BTreeMap;

/// The full segment size: the largest payload length that makes up at
/// least 1/`SEGMENT_SIZE_MIN_SHARE_DIV` of the first `SEGMENT_SIZE_SAMPLE`
/// data segments (the last segment of each write is shorter).
pub const SEGMENT_SIZE_MIN_SHARE_DIV: u32 = 10;
pub const SEGMENT_SIZE_SAMPLE: usize = 4000;
/// Super-segments (TSO/GRO, larger than the MSS): the MSS less the
/// timestamp option (10 bytes and 2 of padding, RFC 7323 3) that Linux
/// carries on every segment.
pub const TIMESTAMP_OPTION_BYTES: u32 = 12;
/// The smallest MSS (RFC 1122 4.2.2.6 / RFC 9293 3.7.1 default, 536).
pub const MIN_MSS: u32 = 536;
/// A full segment on an Ethernet path when nothing says otherwise: 1500
/// bytes less the IPv4 and TCP headers (40) and the timestamp option (12).
pub const DEFAULT_SEGMENT_BYTES: u32 = 1448;

/// The payload of a full-sized segment: the one segment size of a
/// direction (the path facts carry it; the policer splits super-segments at
/// it). `mss` is the MSS option the receiver announced.
pub fn segment_size(data: &[DataRec], mss: Option<u16>) -> u32 {
    let mut counts: BTreeMap<u32, u32> = BTreeMap::new();
    let sample = &data[..data.len().min(SEGMENT_SIZE_SAMPLE)];
    for d in sample {
        *counts.entry(d.len).or_default() += 1;
    }
    let min_count = (sample.len() as u32 / SEGMENT_SIZE_MIN_SHARE_DIV).max(1);
    // The common lengths, shortest first.
    let common_lengths: Vec<u32> = counts.iter().filter(|(_, &c)| c >= min_count).map(|(&l, _)| l).collect();
    let common = common_lengths.last().copied();
    // Without the MSS option (the handshake not captured), super-segments
    // of TSO/GSO are told by their lengths: each carries whole segments
    // (`tcp_gso_segment` cuts at `gso_size`), so the common lengths share
    // the segment size as a divisor. Their greatest common divisor is it,
    // when it is a plausible segment ([`MIN_MSS`] or more); the shorter
    // last segments of writes are not common and do not enter.
    let divisor = || common_lengths.iter().copied().reduce(gcd).filter(|&g| g >= MIN_MSS);
    match (common, mss) {
        (Some(l), Some(m)) if l > m as u32 => full_segment(Some(m)),
        (Some(l), None) => divisor().unwrap_or(l.max(1)),
        (Some(l), _) => l.max(1),
        (None, Some(m)) => m as u32,
        (None, None) => DEFAULT_SEGMENT_BYTES,
    }
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The payload of a full segment under an announced MSS option: the MSS
/// less the timestamp option, at least [`MIN_MSS`]; without the option
/// (the handshake not captured), [`DEFAULT_SEGMENT_BYTES`].
pub fn full_segment(mss: Option<u16>) -> u32 {
    mss.map_or(DEFAULT_SEGMENT_BYTES, |m| u32::from(m).saturating_sub(TIMESTAMP_OPTION_BYTES).max(MIN_MSS))
}

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
    /// Parts already diagnosed and dropped (crate::parts): a long
    /// direction's records are held one part at a time.
    pub parts: Vec<Part>,
    /// How many parts were closed before the records now held.
    pub parts_closed: u32,
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
    /// The connection's id (its key in `Records::slot_of`).
    id: u64,
}

/// Data segments in one part: 2^17 = 131,072, about 190 MB of payload in
/// 1448-byte segments: 1.5 s of a 1 Gbit/s transfer, 7.5 s at 200 Mbit/s
/// (the fastest path of the lab matrix, whose runs last at most 6 s, so each
/// of its directions is one part), thousands of base-RTT intervals, enough
/// for every detector. Measured on a 100 Mbit/s bulk transfer: a diagnosis
/// holds about 130 bytes per data segment of the part at its peak (the
/// records, 40 bytes a data segment and 48 an ACK, and the detectors'
/// working copies). 2^19 took 85 MiB, 2^18 55 MiB on this machine and 68
/// MiB on a fresh CI machine (over the 64 MiB of issue 18), 2^17 37 MiB.
pub const PART_DATA_SEGMENTS: usize = 1 << 17;

/// The part size in force: [`PART_DATA_SEGMENTS`], or the environment's
/// `TCPWHY_PART_SEGMENTS` (at least 1,024; for tests and for trading memory
/// against the span one diagnosis sees).
pub fn part_segments() -> usize {
    std::env::var("TCPWHY_PART_SEGMENTS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map_or(PART_DATA_SEGMENTS, |n| n.max(1024))
}

/// Default budget of records held at once over all connections: 4 Mi
/// records (about 180 MiB). One direction holds at most one part
/// ([`PART_DATA_SEGMENTS`]); the budget bounds many
/// directions together.
pub const DEFAULT_RECORD_BUDGET: usize = 4 << 20;

/// When the budget is spent, a direction holding at least this many data
/// segments is closed into a part (diagnosed, its records dropped) rather
/// than truncated: 4,096 segments are hundreds of round trips at a full
/// window of a few segments, enough for every detector.
pub const MIN_PART_DATA_SEGMENTS: usize = 4096;

/// ACK records held for a direction that has sent fewer than
/// `MIN_DATA_SEGMENTS` data segments (too few to diagnose) before the idle
/// ones are dropped: in a download, every data segment of the server is also
/// an ACK of the client's few bytes. 65,536 records (3 MiB) are far more
/// than any request's exchange needs.
pub const IDLE_ACKS: usize = 1 << 16;

/// The records of every connection, within the record budget: what the
/// recorder (`crate::recorder`) keeps (see the module docs). Parts are
/// closed by a callback of the caller's (`add`'s `close`), so the records
/// know nothing of the diagnosis.
#[derive(Debug)]
pub struct Records {
    /// Records by slot, and the slot of each connection id.
    conns: Vec<ConnRecords>,
    slot_of: HashMap<u64, usize>,
    /// The last connection looked up: consecutive segments usually share it.
    last: Option<(u64, usize)>,
    budget: usize,
    used: usize,
    /// Data segments of a direction that close a part.
    part_segments: usize,
    /// A shard's records joined into these ran out of their budget.
    shard_exhausted: bool,
}

impl Default for Records {
    fn default() -> Self {
        Records::with_budget(DEFAULT_RECORD_BUDGET)
    }
}

impl Records {
    /// Records within a budget of `records`, parts of [`part_segments`].
    pub fn with_budget(records: usize) -> Self {
        Records {
            conns: Vec::new(),
            slot_of: HashMap::default(),
            last: None,
            budget: records,
            used: 0,
            part_segments: part_segments(),
            shard_exhausted: false,
        }
    }
    /// Parts of `segments` data segments (tests; the default is
    /// [`PART_DATA_SEGMENTS`]).
    pub fn with_part_size(mut self, segments: usize) -> Self {
        self.part_segments = segments.max(1);
        self
    }
    pub fn get(&self, connection: u64) -> Option<&ConnRecords> {
        self.slot_of.get(&connection).map(|&i| &self.conns[i])
    }
    /// Drops a connection's records (it was diagnosed for the last time),
    /// giving them back and their share of the budget.
    pub fn remove(&mut self, connection: u64) -> Option<ConnRecords> {
        let i = self.slot_of.remove(&connection)?;
        let rec = self.conns.swap_remove(i);
        if i < self.conns.len() {
            // The last slot moved into i.
            self.slot_of.insert(self.conns[i].id, i);
        }
        self.last = None;
        let held: usize = rec.dirs.iter().map(|d| d.data.len() + d.acks.len()).sum();
        self.used = self.used.saturating_sub(held);
        Some(rec)
    }
    pub fn records_used(&self) -> usize {
        self.used
    }
    /// True when some segments were not recorded for lack of budget.
    pub fn budget_exhausted(&self) -> bool {
        self.used >= self.budget || self.shard_exhausted
    }

    /// The records of a connection; made (when `make`) on its first segment.
    #[inline]
    fn slot(&mut self, connection: u64, make: bool) -> Option<usize> {
        let i = match self.last {
            Some((c, i)) if c == connection => i,
            _ => {
                let i = match self.slot_of.get(&connection) {
                    Some(&i) => i,
                    None if make => {
                        self.conns.push(ConnRecords { id: connection, ..ConnRecords::default() });
                        self.slot_of.insert(connection, self.conns.len() - 1);
                        self.conns.len() - 1
                    }
                    None => return None,
                };
                self.last = Some((connection, i));
                i
            }
        };
        Some(i)
    }

    /// Empty records for one of `shards` shard threads: an equal share of
    /// the budget (records are per connection, so the joined records hold
    /// what one thread's would, unless a shard ran out of its share).
    pub(crate) fn for_shard(&self, shards: usize) -> Self {
        Records {
            budget: (self.budget / shards.max(1)).max(1),
            part_segments: self.part_segments,
            ..Records::with_budget(0)
        }
    }

    /// Takes in a shard's records.
    pub(crate) fn join(&mut self, shard: Records) {
        self.shard_exhausted |= shard.budget_exhausted();
        self.used += shard.used;
        let mut conns: Vec<Option<ConnRecords>> = shard.conns.into_iter().map(Some).collect();
        for (id, i) in shard.slot_of {
            if let Some(c) = conns[i].take() {
                self.conns.push(c);
                self.slot_of.insert(id, self.conns.len() - 1);
            }
        }
        self.last = None;
    }
}

fn sat32(v: u64) -> u32 {
    v.min(u32::MAX as u64) as u32
}

/// The records a segment adds: its direction, a data record (it carries
/// data) and an ACK record for the other direction (it acknowledges);
/// None when it adds neither.
#[inline(always)]
pub(crate) fn records_of(e: &SegmentEvent) -> Option<(usize, Option<DataRec>, Option<AckRec>)> {
    const SYN: u16 = 0x02;
    const RST: u16 = 0x04;
    let d = (e.direction & 1) as usize;
    let ack = e.ack.filter(|_| e.tcp_flags & (SYN | RST) == 0);
    let data = e.payload_len > 0 && e.tcp_flags & (SYN | RST) == 0;
    if ack.is_none() && !data {
        return None;
    }
    let data = data.then(|| DataRec {
        t_ns: e.time_ns,
        seq: e.seq,
        frame: e.frame,
        len: e.payload_len,
        in_flight: sat32(e.in_flight.unwrap_or(0)),
        flags: e.flags,
        tsecr: e.timestamp.map_or(0, |t| t.1),
    });
    let ack = ack.map(|ack| AckRec {
        t_ns: e.time_ns,
        ack,
        frame: e.frame,
        window: sat32(e.window_bytes),
        rtt_us: e.rtt_ns.map(|r| (r / 1000).clamp(1, u32::MAX as i64) as u32).unwrap_or(0),
        payload: e.payload_len,
        flags: e.flags,
        tsval: e.timestamp.map_or(0, |t| t.0),
    });
    Some((d, data, ack))
}

impl Records {
    /// Adds a segment's records to connection `id` (direction `d`'s data,
    /// the other's ACK). `close` closes a direction's records into a part
    /// and gives the records freed.
    #[inline(always)]
    pub(crate) fn add(
        &mut self,
        id: u64,
        d: usize,
        data: Option<DataRec>,
        ack: Option<AckRec>,
        close: &mut impl FnMut(usize, &mut DirRecords) -> usize,
    ) {
        let mut full = self.used >= self.budget;
        let i = self.slot(id, true).expect("slot made");
        let conn = &mut self.conns[i];
        // Out of budget: the direction this segment adds to (its data, or
        // the data its ACK acknowledges) becomes a part if it is big enough.
        for (adds, x) in [(data.is_some(), d), (ack.is_some(), 1 - d)] {
            if full && adds && conn.dirs[x].data.len() >= MIN_PART_DATA_SEGMENTS {
                self.used -= close(x, &mut conn.dirs[x]);
                full = self.used >= self.budget;
            }
        }
        if full {
            if data.is_some() {
                conn.dirs[d].truncated = true;
            }
            if ack.is_some() {
                conn.dirs[1 - d].truncated = true;
            }
            return;
        }
        if let Some(rec) = data {
            conn.dirs[d].data.push(rec);
            self.used += 1;
        }
        if ack.is_some() && self.used >= self.budget {
            // The data record took the last of the budget.
            conn.dirs[1 - d].truncated = true;
        } else if let Some(rec) = ack {
            conn.dirs[1 - d].acks.push(rec);
            self.used += 1;
        }
        // A direction that reached a part's size is diagnosed and dropped.
        if data.is_some() && conn.dirs[d].data.len() >= self.part_segments {
            self.used -= close(d, &mut conn.dirs[d]);
        }
        let r = &mut conn.dirs[1 - d];
        if ack.is_some() && r.data.len() < crate::options::MIN_DATA_SEGMENTS && r.acks.len() >= IDLE_ACKS {
            self.used -= drop_idle_acks(r);
        } else if ack.is_some() && r.acks.len() >= self.part_segments {
            self.used -= close(1 - d, r);
        }
    }

    /// A new data segment's payload: the start of a turn when the
    /// connection's last new data went the other way.
    pub(crate) fn head(&mut self, id: u64, d: u8, t_ns: i64, seq: i64, payload: &[u8]) {
        let Some(i) = self.slot(id, false) else { return };
        let conn = &mut self.conns[i];
        if conn.last_data_dir != Some(d) {
            conn.last_data_dir = Some(d);
            if conn.heads.len() < MAX_TURN_HEADS {
                let n = payload.len().min(TURN_HEAD_BYTES);
                conn.heads.push(TurnHead { dir: d, t_ns, seq, bytes: payload[..n].to_vec() });
            }
        }
    }
}

impl Records {
    /// A part closed and diagnosed elsewhere (`crate::split`), after those
    /// already closed.
    pub(crate) fn push_part(&mut self, id: u64, d: usize, part: Part) {
        if let Some(i) = self.slot(id, false) {
            self.conns[i].dirs[d].parts.push(part);
        }
    }
}

/// ACKs piling up for a direction that sends (almost) no data: the other
/// direction's data segments all carry an ACK. Those after the one that
/// acknowledged everything sent tell nothing more; they are dropped (the
/// count freed).
fn drop_idle_acks(r: &mut DirRecords) -> usize {
    let end = r.data.iter().map(|x| x.end()).max().unwrap_or(i64::MIN);
    let mut keep = r.acks.iter().position(|a| a.ack >= end).map_or(r.acks.len(), |i| i + 1);
    if keep + 1 >= r.acks.len() {
        // Nothing acknowledged it all yet: keep the first half (halving
        // keeps this linear over the capture).
        keep = r.acks.len() / 2;
    }
    // The newest stays: the window the receiver advertises now.
    let last = r.acks[r.acks.len() - 1];
    let n = r.acks.len() - keep - 1;
    r.acks.truncate(keep);
    r.acks.push(last);
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(t: i64) -> DataRec {
        DataRec { t_ns: t, seq: t * 1000, frame: t as u64, len: 1000, in_flight: 0, flags: Flags::default(), tsecr: 0 }
    }

    /// `tcpwhy watch` drops a connection's records once it ended: the
    /// budget comes back, and the other connections keep theirs.
    #[test]
    fn removing_a_connection_gives_back_its_records_and_keeps_the_others() {
        let mut r = Records::with_budget(1000);
        let mut close = |_: usize, _: &mut DirRecords| 0;
        for id in [5u64, 6, 7] {
            for t in 0..(id as i64) {
                r.add(id, 0, Some(data(t)), None, &mut close);
            }
        }
        assert_eq!(r.records_used(), 18);
        let gone = r.remove(5).expect("held");
        assert_eq!(gone.dirs[0].data.len(), 5);
        assert_eq!(r.records_used(), 13);
        assert!(r.get(5).is_none() && r.remove(5).is_none());
        assert_eq!(r.get(6).unwrap().dirs[0].data.len(), 6);
        assert_eq!(r.get(7).unwrap().dirs[0].data.len(), 7);
        r.add(7, 0, Some(data(9)), None, &mut close);
        assert_eq!(r.get(7).unwrap().dirs[0].data.len(), 8);
        r.add(5, 0, Some(data(1)), None, &mut close);
        assert_eq!(r.get(5).unwrap().dirs[0].data.len(), 1);
    }
}
