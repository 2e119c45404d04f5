//! Capture quality: frames the capture holds twice.
//!
//! A mirror (SPAN) port that copies both directions of a link, `tcpdump -i
//! any` on a host where a packet crosses a bridge and its port (or a veth
//! pair), and two capture files merged, all give every frame twice, a few
//! microseconds apart. Read as they are, the copies look like
//! retransmissions (tcptrace calls them "hardware duplicates"; Wireshark
//! flags them as retransmissions), and a diagnosis built on them sees a
//! lossy path that is not there.
//!
//! A copy is told from a retransmission by what a sender changes when it
//! sends a segment again:
//! - every common stack gives each IPv4 datagram it sends a new
//!   Identification (Linux: a per-socket counter, `ip_select_ident_segs`;
//!   Windows and the BSDs: a counter or a random ID per datagram), so the
//!   same ID with the same TCP header is the same transmission;
//! - the TCP checksum covers the whole segment (also the payload a snaplen
//!   cut off), and the timestamp option (RFC 7323) a retransmission carries
//!   is taken when it is sent;
//! - no retransmission can leave before one round trip (fast retransmit
//!   needs duplicate ACKs back; RTO is at least 200 ms, TLP two smoothed
//!   RTTs), and copies made by the capture are microseconds apart.
//!
//! A segment without payload and without an informative ID (IPv6, or ID 0)
//! can be sent twice identically within microseconds: duplicate ACKs
//! without SACK, or the RST a stack answers to each segment of a closed
//! connection (seen in the M-Lab capture C2DA9, frames 5178 and 5180).
//! Such a match is taken for a copy only once the connection has shown
//! copies that cannot be anything else (data, or frames with an ID).

use tcpwhy_wire::TcpSegment;

/// Copies with an informative IPv4 ID may be this far apart: two capture
/// points on one host or switch differ by the queue of a qdisc or a shaper
/// between them (tens of ms), captures merged from two points on a path by
/// the one-way delay between them (up to hundreds of ms). The ID, the
/// header and the checksum already say it is one transmission. The ID is
/// 16 bits: Linux counts per socket (`ip_select_ident_segs`), so it repeats
/// only after 65,536 datagrams of the connection, far more than the
/// [`DUPLICATE_MEMORY_MAX_FRAMES`] remembered; a stack with a global or
/// random ID gives a retransmission its original's ID by chance once in
/// 65,536, which would hide that one retransmission.
/// A data segment with the timestamp option and no ID (IPv6, ID 0) is
/// matched as far: a retransmission a tick or more later carries a new
/// TSval (RFC 7323 5.4; the tick is 1 ms on Linux, the BSDs, macOS and
/// Windows), so only a stack with a coarse clock retransmitting within one
/// tick could be taken for a copy.
pub const DUPLICATE_MAX_GAP_WITH_IP_ID_NS: i64 = 1_000_000_000;
/// Without an ID (IPv6, or a stack that sends ID 0 with DF set, RFC 6864),
/// only the header, the checksum and the timestamp option tell: copies
/// made by the capture are microseconds apart, while a retransmission
/// follows the original by at least one RTT. 1 ms is below the RTT of any
/// path that leaves a host; on a sub-millisecond path a retransmission
/// within the same timestamp tick could be taken for a copy.
pub const DUPLICATE_MAX_GAP_NS: i64 = 1_000_000;
/// A frame earlier than the connection's latest by more than this is a
/// step of the capture clock backwards (NTP stepping the clock, captures
/// merged from several points whose clocks differ). Frames of several
/// interfaces in one pcapng interleave by a few microseconds; 1 ms is far
/// above that and below the RTTs the diagnosis works with.
pub const CLOCK_STEP_BACK_NS: i64 = 1_000_000;
/// Recent frames remembered per direction. Copies made by the capture are
/// adjacent or nearly so; a ring this size covers copies up to 16 frames of
/// the same direction apart.
const RECENT_FRAMES: usize = 16;
/// Frames with an informative ID that left the ring are remembered for
/// [`DUPLICATE_MAX_GAP_WITH_IP_ID_NS`], at most this many per direction:
/// two captures merged from points 10 ms apart on a 100 Mbit/s path put a
/// copy about 85 frames after its original. The memory is taken only by
/// directions that filled the ring (not by the half-open connections of a
/// flood) and bounded by the rate, never by the capture's length.
pub const DUPLICATE_MEMORY_MAX_FRAMES: usize = 8192;

#[derive(Debug, Clone, Copy)]
struct Recent {
    fingerprint: u64,
    time_ns: i64,
    frame: u64,
    with_ip_id: bool,
    /// An ID, or data with a timestamp: matched up to the long gap.
    identified: bool,
}

/// Remembers the last frames of one direction and tells a copy.
#[derive(Debug, Clone, Default)]
pub struct DuplicateFilter {
    recent: Vec<Recent>,
    next: usize,
    /// Copies found, and the frame numbers of the first few (copy, original).
    pub copies: u64,
    pub examples: Vec<(u64, u64)>,
    /// Largest gap between a copy and its original, ns.
    pub max_gap_ns: i64,
    /// Copies that can be nothing else (data, or an IPv4 ID).
    pub certain_copies: u64,
    /// Frames with an ID that left the ring, within the ID's gap.
    older: Option<Box<Older>>,
}

/// Identified frames older than the ring, by fingerprint (time, frame).
/// Bounded without an ordered queue: when it holds
/// [`DUPLICATE_MEMORY_MAX_FRAMES`], the frames beyond the gap are dropped,
/// and if that is not enough, the older half by time (amortised: one pass
/// per half of the capacity).
#[derive(Debug, Clone, Default)]
struct Older {
    by_fingerprint: foldhash::HashMap<u64, (i64, u64)>,
}

impl Older {
    fn find(&self, fp: u64, time_ns: i64) -> Option<(i64, u64)> {
        let &(t, frame) = self.by_fingerprint.get(&fp)?;
        (0..=DUPLICATE_MAX_GAP_WITH_IP_ID_NS).contains(&(time_ns - t)).then_some((t, frame))
    }

    fn push(&mut self, r: &Recent) {
        if self.by_fingerprint.len() >= DUPLICATE_MEMORY_MAX_FRAMES {
            let now = r.time_ns;
            self.by_fingerprint.retain(|_, (t, _)| now - *t <= DUPLICATE_MAX_GAP_WITH_IP_ID_NS);
            if self.by_fingerprint.len() > DUPLICATE_MEMORY_MAX_FRAMES / 2 {
                let oldest = self.by_fingerprint.values().map(|v| v.0).min().unwrap_or(now);
                let mid = oldest + (now - oldest) / 2;
                self.by_fingerprint.retain(|_, (t, _)| *t >= mid);
            }
        }
        self.by_fingerprint.insert(r.fingerprint, (r.time_ns, r.frame));
    }
}

const EXAMPLES: usize = 8;

fn fingerprint(seg: &TcpSegment<'_>) -> u64 {
    // A multiply-xorshift mix of the fields a retransmission would change or
    // that tell segments apart, a word at a time (per packet, so it must be
    // cheap); collisions only matter between frames of the same direction
    // within milliseconds.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut mix = |v: u64| {
        h = (h ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^= h >> 29;
    };
    mix(seg.seq as u64 | (seg.ack as u64) << 32);
    mix(seg.payload_len as u64 | (seg.flags.0 as u64) << 32 | (seg.window as u64) << 48);
    mix(seg.checksum as u64 | (seg.ip_id.unwrap_or(0) as u64) << 16 | (seg.ip_id.is_some() as u64) << 32);
    mix(seg.options.timestamp.map_or(u64::MAX, |(val, ecr)| val as u64 | (ecr as u64) << 32));
    h
}

impl DuplicateFilter {
    /// True when `seg` is a copy of a frame seen shortly before in this
    /// direction; otherwise remembers it. `copies_seen`: the connection
    /// already had copies that can only be copies (see the module notes).
    pub fn is_copy(&mut self, seg: &TcpSegment<'_>, time_ns: i64, frame: u64, copies_seen: bool) -> bool {
        let fp = fingerprint(seg);
        let with_ip_id = seg.ip_id.is_some_and(|id| id != 0);
        let ambiguous = !with_ip_id && seg.payload_len == 0;
        // One transmission whatever the gap: an ID, or data with a TSval
        // (a retransmission a clock tick or more later carries a new one).
        let identified = with_ip_id || (seg.payload_len > 0 && seg.options.timestamp.is_some());
        let max_gap = if identified { DUPLICATE_MAX_GAP_WITH_IP_ID_NS } else { DUPLICATE_MAX_GAP_NS };
        let hit = self
            .recent
            .iter()
            .find(|r| r.fingerprint == fp && r.with_ip_id == with_ip_id && (0..=max_gap).contains(&(time_ns - r.time_ns)))
            .map(|r| (r.time_ns, r.frame))
            .or_else(|| if identified { self.older.as_ref().and_then(|o| o.find(fp, time_ns)) } else { None })
            .filter(|_| !ambiguous || copies_seen);
        if let Some((t, original)) = hit {
            if !ambiguous {
                self.certain_copies += 1;
            }
            self.copies += 1;
            self.max_gap_ns = self.max_gap_ns.max(time_ns - t);
            if self.examples.len() < EXAMPLES {
                self.examples.push((frame, original));
            }
            return true;
        }
        let entry = Recent { fingerprint: fp, time_ns, frame, with_ip_id, identified };
        if self.recent.len() < RECENT_FRAMES {
            self.recent.push(entry);
        } else {
            let old = std::mem::replace(&mut self.recent[self.next], entry);
            if old.identified {
                self.older.get_or_insert_with(Default::default).push(&old);
            }
        }
        self.next = (self.next + 1) % RECENT_FRAMES;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpwhy_wire::{Addr, TcpFlags, TcpOptions};

    fn seg(seq: u32, ip_id: Option<u16>, tsval: Option<u32>) -> TcpSegment<'static> {
        let mut options = TcpOptions::default();
        options.timestamp = tsval.map(|v| (v, 7));
        TcpSegment {
            src: Addr::V4([10, 0, 0, 1]),
            dst: Addr::V4([10, 0, 0, 2]),
            src_port: 40000,
            dst_port: 80,
            seq,
            ack: 1,
            flags: TcpFlags(TcpFlags::ACK),
            window: 500,
            options,
            payload_len: 1448,
            payload: &[],
            length_from_frame: false,
            ip_id,
            checksum: 0xbeef,
        }
    }

    #[test]
    fn captures_merged_from_two_points_10_ms_apart_are_copies() {
        // 100 Mbit/s: a segment every 116 us; the second point sees each
        // 10 ms later, about 86 frames after the original
        let mut f = DuplicateFilter::default();
        let mut copies = 0;
        let mut events: Vec<(i64, u32, bool)> = Vec::new();
        for k in 0..400u32 {
            let t = k as i64 * 116_000;
            events.push((t, k, false));
            events.push((t + 10_000_000, k, true));
        }
        events.sort();
        for (i, &(t, k, _)) in events.iter().enumerate() {
            if f.is_copy(&seg(1000 + k * 1448, Some(k as u16 + 1), None), t, i as u64, false) {
                copies += 1;
            }
        }
        assert_eq!(copies, 400);
        // the same segment with a new ID (a retransmission) is not a copy
        assert!(!f.is_copy(&seg(1000, Some(9999), None), 60_000_000, 10_000, false));
        // a copy 80 ms later (two points on a long path) is still the same
        // transmission; beyond the ID's gap it is not taken for one
        let mut g = DuplicateFilter::default();
        for k in 0..20u32 {
            g.is_copy(&seg(k * 1448, Some(k as u16 + 1), None), k as i64 * 1000, k as u64, false);
        }
        assert!(g.is_copy(&seg(0, Some(1), None), 80_000_000, 98, false));
        assert!(!g.is_copy(&seg(1448, Some(2), None), DUPLICATE_MAX_GAP_WITH_IP_ID_NS + 2000, 99, false));
    }

    #[test]
    fn a_frame_captured_twice_microseconds_apart_is_a_copy() {
        let mut f = DuplicateFilter::default();
        assert!(!f.is_copy(&seg(1000, Some(41), Some(5)), 0, 1, false));
        assert!(f.is_copy(&seg(1000, Some(41), Some(5)), 4_000, 2, false));
        assert!(!f.is_copy(&seg(2448, Some(42), Some(5)), 8_000, 3, false));
        assert!(f.is_copy(&seg(2448, Some(42), Some(5)), 12_000, 4, false));
        assert_eq!((f.copies, f.examples.clone()), (2, vec![(2, 1), (4, 3)]));
    }

    #[test]
    fn a_retransmission_is_not_a_copy() {
        let mut f = DuplicateFilter::default();
        assert!(!f.is_copy(&seg(1000, Some(41), Some(5)), 0, 1, false));
        // Fast retransmit one RTT later: a new IP ID and a new TSval.
        assert!(!f.is_copy(&seg(1000, Some(97), Some(45)), 40_000_000, 9, false));
        // IPv6 (no ID): same segment, a new TSval.
        let mut f = DuplicateFilter::default();
        assert!(!f.is_copy(&seg(1000, None, Some(5)), 0, 1, false));
        assert!(!f.is_copy(&seg(1000, None, Some(6)), 300_000, 2, false));
        // No ID, no timestamps: identical, but later than copies can be.
        let mut f = DuplicateFilter::default();
        assert!(!f.is_copy(&seg(1000, Some(0), None), 0, 1, false));
        assert!(!f.is_copy(&seg(1000, Some(0), None), 2_000_000, 2, false));
        assert!(f.is_copy(&seg(1000, Some(0), None), 2_000_010, 3, false));
    }

    #[test]
    fn identical_acks_without_an_id_are_copies_only_once_copies_are_certain() {
        // IPv6 duplicate ACKs (no SACK) or RSTs answering two segments:
        // identical and microseconds apart, yet sent twice.
        let mut ack = seg(1000, None, None);
        ack.payload_len = 0;
        let mut f = DuplicateFilter::default();
        assert!(!f.is_copy(&ack, 0, 1, false));
        assert!(!f.is_copy(&ack, 12_000, 2, false));
        // Once data copies were seen, the same match is a copy.
        assert!(f.is_copy(&ack, 14_000, 3, true));
        assert_eq!(f.certain_copies, 0);
    }

    #[test]
    fn the_same_id_after_the_copy_window_is_not_a_copy() {
        let mut f = DuplicateFilter::default();
        assert!(!f.is_copy(&seg(1000, Some(41), Some(5)), 0, 1, false));
        assert!(!f.is_copy(&seg(1000, Some(41), Some(5)), DUPLICATE_MAX_GAP_WITH_IP_ID_NS + 1, 2, false));
    }
}
