//! The hand-over from the reading thread's table to the shard threads
//! (`crate::shard`): the messages, their batches and each shard's lane,
//! and what the table keeps of a connection's capture quality until its
//! shard summarises it.
//!
//! A message is one cache line (`Seg`); messages cross in batches of
//! [`BATCH_MESSAGES`] from a fixed pool of [`BATCH_POOL`] per shard.

use crate::quality::DuplicateFilter;
use crate::conn::Connection;
use std::sync::mpsc::{Receiver, SyncSender};
use tcpwhy_wire::{Addr, SackBlock, TcpFlags, TcpOptions, TcpSegment};

/// Messages per batch: as the decode thread's batches (each hand-over may
/// cost a wake-up).
pub(crate) const BATCH_MESSAGES: usize = 4096;
/// Batches per shard that exist at once, reused.
pub(crate) const BATCH_POOL: usize = 4;

/// A message to a shard: a new connection in table slot `slot` (`Kind::Open`,
/// the connection in the batch's `opens`), a segment for the connection in
/// `slot`, or its end (`Kind::Retire`: summarise it, with what the table
/// kept in the batch's `retires`). Open and retire messages take their
/// payloads from those lists in order.
///
/// A segment crosses as the fields `Connection::process`
/// reads, in 64 bytes (one cache line) rather than the decoded
/// segment's 130. Every message is written by one core and read by
/// another, so its size is what the hand-over costs: with the whole
/// segment, the model ran half again as long on a shard as on one thread
/// (perf, snaplen-128 bench capture). The SACK blocks and the payload's
/// first bytes follow in the batch's bytes at `at`. Addresses, ports, the
/// IPv4 ID and the checksum stay behind: the table used them.
pub(crate) struct Seg {
    pub(crate) frame: u64,
    pub(crate) time_ns: i64,
    /// The table slot (live connections cost hundreds of bytes each, so
    /// there are far fewer than 2^32).
    pub(crate) slot: u32,
    pub(crate) at: u32,
    pub(crate) seq: u32,
    pub(crate) ack: u32,
    pub(crate) payload_len: u32,
    pub(crate) captured: u32,
    /// Payload bytes handed over (at most the sink's prefix).
    pub(crate) handed: u32,
    pub(crate) tsval: u32,
    pub(crate) tsecr: u32,
    pub(crate) flags: u16,
    pub(crate) window: u16,
    pub(crate) mss: u16,
    pub(crate) window_scale: u8,
    /// `OPT_*` bits.
    pub(crate) opts: u8,
    pub(crate) sack_count: u8,
    pub(crate) d: u8,
    pub(crate) kind: Kind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Segment,
    Open,
    Retire,
}

const OPT_MSS: u8 = 1;
const OPT_WINDOW_SCALE: u8 = 2;
const OPT_SACK_PERMITTED: u8 = 4;
const OPT_TIMESTAMP: u8 = 8;
const OPT_TRUNCATED: u8 = 16;
const OPT_LENGTH_FROM_FRAME: u8 = 32;
const SACK_BYTES: usize = 8;
/// A SYN's signature (crate::conn::SynOptions: the option layout, TTL, DF)
/// travels with its SACK blocks in the bytes: 10 bytes, for SYNs only, so
/// that the message stays 64 bytes.
const SIGNATURE_BYTES: usize = 10;

impl Seg {
    /// Packs `seg`, its SACK blocks and the first `prefix` bytes of its
    /// payload appended to `bytes`.
    #[inline]
    fn pack(slot: usize, d: usize, seg: &TcpSegment<'_>, frame: u64, time_ns: i64, bytes: &mut Vec<u8>, prefix: usize) -> Seg {
        let o = &seg.options;
        let at = bytes.len() as u32;
        // Most segments carry neither (and `stats` hands no payload).
        for b in o.sacks() {
            bytes.extend_from_slice(&b.left.to_ne_bytes());
            bytes.extend_from_slice(&b.right.to_ne_bytes());
        }
        if seg.flags.syn() {
            bytes.extend_from_slice(&o.layout.0.to_ne_bytes());
            bytes.push(seg.ttl);
            bytes.push(seg.dont_fragment as u8);
        }
        let handed = seg.payload.len().min(prefix);
        if handed > 0 {
            bytes.extend_from_slice(&seg.payload[..handed]);
        }
        let bit = |on: bool, b: u8| if on { b } else { 0 };
        let (tsval, tsecr) = o.timestamp.unwrap_or((0, 0));
        Seg {
            frame,
            time_ns,
            slot: slot as u32,
            at,
            seq: seg.seq,
            ack: seg.ack,
            payload_len: seg.payload_len,
            captured: seg.captured,
            handed: handed as u32,
            tsval,
            tsecr,
            flags: seg.flags.0,
            window: seg.window,
            mss: o.mss.unwrap_or(0),
            window_scale: o.window_scale.unwrap_or(0),
            opts: bit(o.mss.is_some(), OPT_MSS)
                | bit(o.window_scale.is_some(), OPT_WINDOW_SCALE)
                | bit(o.sack_permitted, OPT_SACK_PERMITTED)
                | bit(o.timestamp.is_some(), OPT_TIMESTAMP)
                | bit(o.truncated, OPT_TRUNCATED)
                | bit(seg.length_from_frame, OPT_LENGTH_FROM_FRAME),
            sack_count: o.sack_count,
            d: d as u8,
            kind: Kind::Segment,
        }
    }

    /// An open or retire message for `slot`.
    fn control(slot: usize, kind: Kind) -> Seg {
        Seg {
            frame: 0,
            time_ns: 0,
            slot: slot as u32,
            at: 0,
            seq: 0,
            ack: 0,
            payload_len: 0,
            captured: 0,
            handed: 0,
            tsval: 0,
            tsecr: 0,
            flags: 0,
            window: 0,
            mss: 0,
            window_scale: 0,
            opts: 0,
            sack_count: 0,
            d: 0,
            kind,
        }
    }

    /// The segment again, its payload the bytes handed over.
    #[inline]
    pub(crate) fn unpack<'a>(&self, bytes: &'a [u8]) -> TcpSegment<'a> {
        let has = |b: u8| self.opts & b != 0;
        let mut options = TcpOptions {
            mss: has(OPT_MSS).then_some(self.mss),
            window_scale: has(OPT_WINDOW_SCALE).then_some(self.window_scale),
            sack_permitted: has(OPT_SACK_PERMITTED),
            timestamp: has(OPT_TIMESTAMP).then_some((self.tsval, self.tsecr)),
            sack_blocks: Default::default(),
            sack_count: self.sack_count,
            truncated: has(OPT_TRUNCATED),
            layout: Default::default(),
        };
        let mut at = self.at as usize;
        for b in &mut options.sack_blocks[..self.sack_count as usize] {
            let word = |i: usize| u32::from_ne_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
            *b = SackBlock { left: word(at), right: word(at + 4) };
            at += SACK_BYTES;
        }
        let (mut ttl, mut dont_fragment) = (0, false);
        if TcpFlags(self.flags).syn() {
            let sig = &bytes[at..at + SIGNATURE_BYTES];
            options.layout = tcpwhy_wire::OptionLayout(u64::from_ne_bytes(sig[..8].try_into().expect("8 bytes")));
            ttl = sig[8];
            dont_fragment = sig[9] != 0;
            at += SIGNATURE_BYTES;
        }
        let payload = &bytes[at..at + self.handed as usize];
        TcpSegment {
            src: Addr::V4([0; 4]),
            dst: Addr::V4([0; 4]),
            src_port: 0,
            dst_port: 0,
            seq: self.seq,
            ack: self.ack,
            flags: TcpFlags(self.flags),
            window: self.window,
            options,
            payload_len: self.payload_len,
            payload,
            captured: self.captured,
            length_from_frame: has(OPT_LENGTH_FROM_FRAME),
            ip_id: None,
            checksum: 0,
            ttl,
            dont_fragment,
        }
    }
}

#[derive(Default)]
pub(crate) struct Batch {
    pub(crate) msgs: Vec<Seg>,
    pub(crate) bytes: Vec<u8>,
    pub(crate) opens: Vec<Box<Connection>>,
    pub(crate) retires: Vec<(bool, Quality)>,
}

impl Batch {
    pub(crate) fn new() -> Batch {
        Batch { msgs: Vec::with_capacity(BATCH_MESSAGES), ..Batch::default() }
    }
}

/// The way to one shard: the batch being filled, and the channels.
pub(crate) struct Lane {
    /// None once the shard is gone (it panicked; the join reports it).
    pub(crate) batch: Option<Batch>,
    pub(crate) full: SyncSender<Batch>,
    pub(crate) empty: Receiver<Batch>,
}

impl Lane {
    #[inline]
    fn push(&mut self, msg: Seg) {
        let Some(b) = self.batch.as_mut() else { return };
        b.msgs.push(msg);
        if b.msgs.len() >= BATCH_MESSAGES {
            self.hand_over();
        }
    }

    /// Sends the full batch and takes an empty one.
    #[cold]
    fn hand_over(&mut self) {
        let full = self.batch.take().expect("a batch");
        if self.full.send(full).is_ok() {
            self.batch = self.empty.recv().ok();
        }
    }
}

/// The table's side of the shards.
pub(crate) struct Outbox {
    pub(crate) lanes: Vec<Lane>,
    /// Payload bytes the sinks read.
    pub(crate) prefix: usize,
}

impl Outbox {
    #[inline]
    fn lane(&mut self, slot: usize) -> &mut Lane {
        let n = self.lanes.len();
        // One shard (two cores): no division.
        if n == 1 {
            &mut self.lanes[0]
        } else {
            &mut self.lanes[slot % n]
        }
    }

    pub(crate) fn open(&mut self, slot: usize, conn: Box<Connection>) {
        let lane = self.lane(slot);
        let Some(b) = lane.batch.as_mut() else { return };
        b.opens.push(conn);
        lane.push(Seg::control(slot, Kind::Open));
    }

    #[inline]
    pub(crate) fn segment(&mut self, slot: usize, d: usize, seg: &TcpSegment<'_>, frame: u64, time_ns: i64) {
        let prefix = self.prefix;
        let lane = self.lane(slot);
        let Some(b) = lane.batch.as_mut() else { return };
        let msg = Seg::pack(slot, d, seg, frame, time_ns, &mut b.bytes, prefix);
        b.msgs.push(msg);
        if b.msgs.len() >= BATCH_MESSAGES {
            lane.hand_over();
        }
    }

    pub(crate) fn retire(&mut self, slot: usize, evicted: bool, quality: Quality) {
        let lane = self.lane(slot);
        let Some(b) = lane.batch.as_mut() else { return };
        b.retires.push((evicted, quality));
        lane.push(Seg::control(slot, Kind::Retire));
    }

    /// Sends what is left; the shards end when their channel closes.
    pub(crate) fn close(self) {
        for lane in self.lanes {
            if let Some(b) = lane.batch {
                if !b.msgs.is_empty() {
                    let _ = lane.full.send(b);
                }
            }
        }
    }
}

/// What the capture-quality checks keep of a connection: frames held
/// twice, and frames stamped before the connection's latest.
#[derive(Debug, Clone, Default)]
pub(crate) struct Quality {
    pub copies: [DuplicateFilter; 2],
    pub clock_steps_back: u64,
    pub max_clock_step_back_ns: i64,
}

impl Quality {
    /// Hands the counts to the connection, for its summary.
    pub(crate) fn give(self, c: &mut Connection) {
        c.copies = self.copies;
        c.clock_steps_back = self.clock_steps_back;
        c.max_clock_step_back_ns = self.max_clock_step_back_ns;
    }
}

// The hand-over's cost is its size (see `Seg`).
const _: () = assert!(std::mem::size_of::<Seg>() <= 64);

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(options: TcpOptions, payload: &[u8], payload_len: u32, length_from_frame: bool) -> TcpSegment<'_> {
        TcpSegment {
            src: Addr::V4([10, 0, 0, 1]),
            dst: Addr::V4([10, 0, 0, 2]),
            src_port: 40000,
            dst_port: 443,
            seq: 0xfedc_ba98,
            ack: 0x0123_4567,
            flags: TcpFlags(0x1ff),
            window: 0xabcd,
            options,
            payload_len,
            payload,
            captured: payload.len() as u32,
            length_from_frame,
            ip_id: Some(7),
            checksum: 0xbeef,
            ttl: 64,
            dont_fragment: true,
        }
    }

    /// What `Connection::process` reads comes back as it went.
    fn same(a: &TcpSegment<'_>, b: &TcpSegment<'_>, prefix: usize) {
        assert_eq!((a.seq, a.ack, a.flags, a.window), (b.seq, b.ack, b.flags, b.window));
        assert_eq!(a.options, b.options);
        // A SYN's signature crosses too (every case here is a SYN).
        assert_eq!((a.ttl, a.dont_fragment), (b.ttl, b.dont_fragment));
        assert_eq!((a.payload_len, a.captured, a.length_from_frame), (b.payload_len, b.captured, b.length_from_frame));
        assert_eq!(&a.payload[..a.payload.len().min(prefix)], b.payload);
    }

    #[test]
    fn a_segment_crosses_to_a_shard_unchanged() {
        let full = TcpOptions {
            mss: Some(1460),
            window_scale: Some(14),
            sack_permitted: true,
            timestamp: Some((u32::MAX, 1)),
            sack_blocks: [
                SackBlock { left: 1, right: 2 },
                SackBlock { left: u32::MAX - 1, right: 5 },
                SackBlock { left: 9, right: 10 },
                SackBlock { left: 0, right: u32::MAX },
            ],
            sack_count: 4,
            truncated: true,
            layout: tcpwhy_wire::OptionLayout(0x0905_0403_0201_0100),
        };
        let some = TcpOptions {
            sack_blocks: [SackBlock { left: 100, right: 200 }, SackBlock::default(), SackBlock::default(), SackBlock::default()],
            sack_count: 1,
            mss: Some(0),
            window_scale: Some(0),
            ..TcpOptions::default()
        };
        let bytes: Vec<u8> = (0..=255).collect();
        let cases = [
            segment(full, &bytes[..200], 1448, false),
            segment(some, &bytes[..62], 80_000, true),
            segment(TcpOptions::default(), &[], 0, false),
            // a payload handed over cut short by the decode thread: the
            // count of bytes captured stays
            TcpSegment { captured: 1448, ..segment(TcpOptions::default(), &bytes[..10], 1448, false) },
        ];
        for prefix in [0, 160, usize::MAX] {
            // several segments in one batch's bytes, as on a lane
            let mut buf = vec![0xee; 3];
            let packed: Vec<Seg> = cases.iter().enumerate().map(|(i, s)| Seg::pack(i, i % 2, s, 10 + i as u64, -5, &mut buf, prefix)).collect();
            for (i, (m, s)) in packed.iter().zip(&cases).enumerate() {
                assert!(m.kind == Kind::Segment);
                assert_eq!((m.slot as usize, m.d as usize, m.frame, m.time_ns), (i, i % 2, 10 + i as u64, -5));
                same(s, &m.unpack(&buf), prefix);
            }
        }
    }
}
