//! The connection table: finds the connection of each segment, starts a new
//! one on port reuse, and retires closed connections so that memory is
//! bounded by the connections open at once.

use crate::conn::{CloseState, Connection, SegmentEvent};
use crate::summary::ConnectionSummary;
use foldhash::HashMap;
use tcpwhy_wire::{decode_frame, Addr, Frame, NotTcp, TcpSegment};

/// Receives every analysed segment (for per-packet output, plots, diagnosis).
pub trait SegmentSink {
    fn segment(&mut self, connection: &Connection, event: &SegmentEvent);
    /// The captured part of a data segment's payload (after `segment`).
    /// Untrusted bytes from the capture.
    #[inline]
    fn payload(&mut self, _connection: &Connection, _event: &SegmentEvent, _payload: &[u8]) {}
}

impl SegmentSink for () {
    #[inline]
    fn segment(&mut self, _: &Connection, _: &SegmentEvent) {}
}

type Endpoint = (Addr, u16);

/// A connection closed (both FINs or a RST) and silent this long is retired.
const RETIRE_AFTER_CLOSE_NS: i64 = 60_000_000_000;
/// A SYN nobody answered, silent this long, is retired: Linux gives up
/// after 6 SYN retries, about 127 s (tcp_syn_retries).
const RETIRE_UNANSWERED_SYN_NS: i64 = 180_000_000_000;
const SWEEP_EVERY_SEGMENTS: u64 = 1 << 16;

/// Counts of frames that did not yield a TCP segment.
#[derive(Debug, Clone, Default)]
pub struct SkipCounts {
    counts: [u64; NotTcp::ALL.len()],
}

impl SkipCounts {
    fn add(&mut self, why: NotTcp) {
        let i = NotTcp::ALL.iter().position(|w| *w == why).unwrap_or(0);
        self.counts[i] += 1;
    }
    pub fn iter(&self) -> impl Iterator<Item = (NotTcp, u64)> + '_ {
        NotTcp::ALL
            .iter()
            .copied()
            .zip(self.counts.iter().copied())
            .filter(|(_, c)| *c > 0)
    }
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
}

type Key = (Endpoint, Endpoint);

/// Tracks every TCP connection in a stream of frames.
#[derive(Default)]
pub struct FlowTable {
    /// Key to slot in `slots`; freed slots are reused.
    index: HashMap<Key, usize>,
    slots: Vec<Option<Connection>>,
    free: Vec<usize>,
    /// The last connection looked up: consecutive segments usually share it,
    /// and comparing the key is cheaper than hashing it.
    last: Option<(Key, usize)>,
    finished: Vec<ConnectionSummary>,
    /// Keep throughput/goodput series in the summaries.
    pub series: bool,
    next_id: u64,
    segments: u64,
    pub skipped: SkipCounts,
    /// Frames removed as copies of a frame just before (all connections).
    pub duplicate_frames: u64,
    now_ns: i64,
}

fn key(a: Endpoint, b: Endpoint) -> (Endpoint, Endpoint) {
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

impl FlowTable {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn segments(&self) -> u64 {
        self.segments
    }

    /// Decodes a frame and, if it is TCP, analyses it.
    #[inline]
    pub fn frame(&mut self, frame: &Frame<'_>, sink: &mut impl SegmentSink) {
        match decode_frame(frame.link, frame.data, frame.orig_len) {
            Ok(seg) => self.segment(&seg, frame.number, frame.time_ns, sink),
            Err(why) => self.skipped.add(why),
        }
    }

    /// Analyses one decoded segment.
    pub fn segment(
        &mut self,
        seg: &TcpSegment<'_>,
        frame: u64,
        time_ns: i64,
        sink: &mut impl SegmentSink,
    ) {
        self.segments += 1;
        self.now_ns = self.now_ns.max(time_ns);
        let src = (seg.src, seg.src_port);
        let dst = (seg.dst, seg.dst_port);
        let is_syn = seg.flags.syn() && !seg.flags.ack();
        // Equality with the last pair, either way round, needs no ordering
        // compare and no hash: the common case in any capture.
        let cached = match self.last {
            Some(((x, y), i)) if (x == src && y == dst) || (x == dst && y == src) => Some(i),
            _ => None,
        };
        let k = match self.last {
            Some((last_key, _)) if cached.is_some() => last_key,
            _ => key(src, dst),
        };
        let mut slot = cached.or_else(|| self.index.get(&k).copied());
        if let (Some(i), true) = (slot, is_syn) {
            let c = self.slots[i].as_ref().expect("indexed slot is live");
            let d = if c.endpoints[0] == src { 0 } else { 1 };
            let reuse = match c.dirs[d].syn {
                // A retransmitted SYN keeps the connection.
                Some(s) => s.isn != seg.seq,
                // A SYN on a tuple already carrying traffic: port reuse.
                None => true,
            };
            if reuse {
                self.retire(k, i);
                slot = None;
            }
        }
        let i = match slot {
            Some(i) => i,
            None => {
                self.next_id += 1;
                // The client is `a`: the SYN sender, or the receiver of a SYN-ACK.
                let (a, b) = if seg.flags.syn() && seg.flags.ack() {
                    (dst, src)
                } else {
                    (src, dst)
                };
                let conn = Connection::new(self.next_id, a, b, time_ns, frame);
                let i = match self.free.pop() {
                    Some(i) => {
                        self.slots[i] = Some(conn);
                        i
                    }
                    None => {
                        self.slots.push(Some(conn));
                        self.slots.len() - 1
                    }
                };
                self.index.insert(k, i);
                i
            }
        };
        self.last = Some((k, i));
        let conn = self.slots[i].as_mut().expect("live slot");
        let d = if conn.endpoints[0] == src { 0 } else { 1 };
        // Capture quality first: a frame the capture holds twice is not a
        // retransmission; the copy goes no further.
        if time_ns + crate::quality::CLOCK_STEP_BACK_NS < conn.last_ns {
            conn.clock_steps_back += 1;
            conn.max_clock_step_back_ns = conn.max_clock_step_back_ns.max(conn.last_ns - time_ns);
        }
        let copies_seen = conn.copies.iter().any(|f| f.certain_copies > 0);
        if conn.copies[d].is_copy(seg, time_ns, frame, copies_seen) {
            self.duplicate_frames += 1;
            return;
        }
        let event = conn.process(seg, frame, time_ns, d);
        sink.segment(conn, &event);
        if !seg.payload.is_empty() {
            sink.payload(conn, &event, seg.payload);
        }
        if self.segments.is_multiple_of(SWEEP_EVERY_SEGMENTS) {
            self.retire_closed();
        }
    }

    fn retire(&mut self, k: Key, i: usize) {
        self.index.remove(&k);
        if let Some(c) = self.slots[i].take() {
            self.finished
                .push(ConnectionSummary::from_connection(&c, self.series));
        }
        self.free.push(i);
        if self.last.is_some_and(|(_, j)| j == i) {
            self.last = None;
        }
    }

    fn retire_closed(&mut self) {
        let now = self.now_ns;
        let done: Vec<(Key, usize)> = self
            .index
            .iter()
            .filter(|(_, &i)| {
                let c = self.slots[i].as_ref().expect("live slot");
                let silent = now - c.last_ns;
                let closed = matches!(c.close, CloseState::FinBoth | CloseState::Reset);
                let unanswered = c.syn_ns.is_some() && c.dirs[1].stats.counts.packets == 0;
                (closed && silent > RETIRE_AFTER_CLOSE_NS)
                    || (unanswered && silent > RETIRE_UNANSWERED_SYN_NS)
            })
            .map(|(k, &i)| (*k, i))
            .collect();
        for (k, i) in done {
            self.retire(k, i);
        }
    }

    /// Connections currently held in memory.
    pub fn active_connections(&self) -> usize {
        self.index.len()
    }

    /// Summaries of all connections, in the order they started.
    pub fn finish(mut self) -> Vec<ConnectionSummary> {
        self.finished.extend(
            self.slots
                .iter()
                .flatten()
                .map(|c| ConnectionSummary::from_connection(c, self.series)),
        );
        self.finished.sort_by_key(|c| c.id);
        self.finished
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpwhy_wire::{TcpFlags, TcpOptions};

    /// A SYN scan: many connections that never carry data must stay small.
    #[test]
    fn half_open_connections_stay_small() {
        // About 2.5 KB today, with no heap allocation until samples arrive.
        assert!(
            std::mem::size_of::<Connection>() < 4096,
            "{}",
            std::mem::size_of::<Connection>()
        );
        let mut table = FlowTable::new();
        for port in 0..50_000u16 {
            let syn = TcpSegment {
                src: Addr::V4([10, 0, 0, 1]),
                dst: Addr::V4([10, 0, 0, 2]),
                src_port: port,
                dst_port: 80,
                seq: 1000,
                ack: 0,
                flags: TcpFlags(TcpFlags::SYN),
                window: 64240,
                options: TcpOptions::default(),
                payload_len: 0,
                payload: &[],
                length_from_frame: false,
                ip_id: None,
                checksum: 0,
            };
            table.segment(&syn, port as u64 + 1, port as i64 * 1000, &mut ());
        }
        assert_eq!(table.active_connections(), 50_000);
        // Unanswered SYNs are retired once silent for 180 s of capture time.
        table.now_ns = 200_000_000_000;
        table.retire_closed();
        assert_eq!(table.active_connections(), 0);
        assert_eq!(table.finish().len(), 50_000);
    }

    fn seg(from_client: bool, seq: u32, ack: u32, flags: u16, len: u32) -> TcpSegment<'static> {
        let (c, srv) = (
            (Addr::V4([10, 0, 0, 1]), 40000),
            (Addr::V4([10, 0, 0, 2]), 80),
        );
        let (src, dst) = if from_client { (c, srv) } else { (srv, c) };
        TcpSegment {
            src: src.0,
            dst: dst.0,
            src_port: src.1,
            dst_port: dst.1,
            seq,
            ack,
            flags: TcpFlags(flags),
            window: 65535,
            options: TcpOptions::default(),
            payload_len: len,
            payload: &[],
            length_from_frame: false,
            ip_id: None,
            checksum: 0,
        }
    }

    const SYN: u16 = TcpFlags::SYN;
    const ACK: u16 = TcpFlags::ACK;
    const SYN_ACK: u16 = TcpFlags::SYN | TcpFlags::ACK;
    const FIN_ACK: u16 = TcpFlags::FIN | TcpFlags::ACK;

    /// Client sends `bytes` in 1000-byte segments from ISN `isn`; the server
    /// ACKs each; both close. Returns the next frame number.
    fn exchange(t: &mut FlowTable, frame: &mut u64, isn: u32, bytes: u32) {
        let mut at = |t: &mut FlowTable, s: TcpSegment<'static>| {
            *frame += 1;
            t.segment(&s, *frame, *frame as i64 * 1_000_000, &mut ());
        };
        at(t, seg(true, isn, 0, SYN, 0));
        at(t, seg(false, 5000, isn.wrapping_add(1), SYN_ACK, 0));
        at(t, seg(true, isn.wrapping_add(1), 5001, ACK, 0));
        let mut sent = 0;
        while sent < bytes {
            at(t, seg(true, isn.wrapping_add(1 + sent), 5001, ACK, 1000));
            sent += 1000;
            at(t, seg(false, 5001, isn.wrapping_add(1 + sent), ACK, 0));
        }
        let end = isn.wrapping_add(1 + bytes);
        at(t, seg(true, end, 5001, FIN_ACK, 0));
        at(t, seg(false, 5001, end.wrapping_add(1), FIN_ACK, 0));
        at(t, seg(true, end.wrapping_add(1), 5002, ACK, 0));
    }

    #[test]
    fn new_syn_on_a_used_tuple_starts_a_new_connection() {
        let mut t = FlowTable::new();
        let mut frame = 0;
        exchange(&mut t, &mut frame, 100, 5000);
        exchange(&mut t, &mut frame, 900_000, 3000);
        let conns = t.finish();
        assert_eq!(conns.len(), 2);
        assert_eq!(conns[0].directions[0].counts.unique_bytes, 5000);
        assert_eq!(conns[1].directions[0].counts.unique_bytes, 3000);
        assert!(conns
            .iter()
            .all(|c| c.directions[0].counts.retransmitted_packets == 0));
    }

    #[test]
    fn retransmitted_syn_keeps_the_connection() {
        let mut t = FlowTable::new();
        t.segment(&seg(true, 100, 0, SYN, 0), 1, 0, &mut ());
        t.segment(&seg(true, 100, 0, SYN, 0), 2, 1_000_000_000, &mut ());
        let conns = t.finish();
        assert_eq!(conns.len(), 1);
        assert_eq!(conns[0].directions[0].flags.retransmission, 1);
    }

    #[test]
    fn sequence_numbers_wrapping_past_2_to_the_32() {
        let mut t = FlowTable::new();
        let mut frame = 0;
        // ISN 100 KB below the wrap; 1 MB crosses it.
        exchange(&mut t, &mut frame, u32::MAX - 100_000, 1_000_000);
        let c = &t.finish()[0];
        let d = &c.directions[0];
        assert_eq!(d.counts.unique_bytes, 1_000_000);
        assert_eq!(d.counts.bytes, 1_000_000);
        assert_eq!(d.counts.retransmitted_packets, 0);
        assert_eq!(d.flags, Default::default(), "no analysis flag anywhere");
        assert_eq!(c.directions[1].flags.ack_unseen_segment, 0);
        // One per data segment, and one for the FIN (it occupies sequence space).
        assert_eq!(d.rtt.unwrap().samples, 1001);
        assert_eq!(c.close, "fin_both");
    }
}
