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
/// flood) and grows with the frames a direction sent up to this many (about
/// 320 KB), never with the capture's length.
pub const DUPLICATE_MEMORY_MAX_FRAMES: usize = 8192;

#[derive(Debug, Clone, Copy, PartialEq)]
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
    /// Some copy was certain (state: read by the next lookups, kept when
    /// a split in time restarts the counts).
    certain_seen: bool,
    /// Frames with an ID that left the ring, within the ID's gap.
    older: Option<Box<Older>>,
    /// The second stretch of a split in time skipped records: frames
    /// numbered below this, remembered from before the jump, are not the
    /// frames just before and are not looked at.
    trust_from: u64,
    /// Set on the second stretch past the split: the lookups (fingerprint,
    /// time) that the recent frames it trusts did not answer, which frames
    /// it never saw could have (see [`DuplicateFilter::answers_as`]).
    split_misses: Option<Vec<(u64, i64)>>,
    /// The furthest sequence end (SYN and FIN count) and ACK number of
    /// the frames so far, if any.
    max_end: Option<u32>,
    max_ack: Option<u32>,
}

/// Identified frames older than the ring: the last
/// [`DUPLICATE_MEMORY_MAX_FRAMES`] of them, in the order they left it, with
/// an index by fingerprint. Every frame of a busy direction passes through,
/// so it is made for that: a ring of frames (no allocation once grown) and
/// an open-addressed table (linear probing, a quarter full at most) of
/// 32-bit fingerprint tags and ring sequence numbers. The index is brought
/// up to date only when a frame is looked up (frames that advance the
/// sequence or ACK numbers never are: see [`DuplicateFilter::is_copy`]),
/// and rebuilt from the ring once per ring's worth of frames indexed, to
/// drop the entries the ring has overwritten. Both grow by doubling from
/// [`OLDER_MIN_FRAMES`], so a direction holds memory for the frames it
/// really sent, never more than the maximum.
#[derive(Debug, Clone)]
struct Older {
    /// Frames in the order they arrived; slot `seq % ring.len()`.
    ring: Vec<OlderFrame>,
    /// Frames pushed so far (the next one's sequence number).
    pushed: u64,
    /// Frames pushed that the index holds (the first `indexed`).
    indexed: u64,
    /// The fingerprint's high 32 bits, then a frame's sequence number (its
    /// low 31 bits, with the top bit set so that 0 means empty); indexed by
    /// the fingerprint's low bits, `INDEX_PER_FRAME` slots per ring slot.
    index: Vec<u64>,
    /// Entries added to the index since it was last rebuilt (which put in
    /// at most a ring's worth).
    since_rebuild: usize,
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct OlderFrame {
    fingerprint: u64,
    time_ns: i64,
    frame: u64,
}

/// The ring starts this small and doubles up to [`DUPLICATE_MEMORY_MAX_FRAMES`].
const OLDER_MIN_FRAMES: usize = 64;
/// Index slots per ring slot: live entries and those the ring overwrote
/// since the last rebuild together fill at most half of the index, so a
/// miss probes about 2.5 slots (Knuth's linear-probing bound).
const INDEX_PER_FRAME: usize = 4;
/// Marks an index slot as taken (sequence numbers keep their low 31 bits).
const SEQ_TAG: u32 = 1 << 31;

impl Default for Older {
    fn default() -> Self {
        Older {
            ring: vec![OlderFrame::default(); OLDER_MIN_FRAMES],
            pushed: 0,
            indexed: 0,
            index: vec![0; OLDER_MIN_FRAMES * INDEX_PER_FRAME],
            since_rebuild: 0,
        }
    }
}

impl Older {
    /// The frame remembered with this fingerprint, within the long gap.
    fn find(&mut self, fp: u64, time_ns: i64, trust_from: u64) -> Option<(i64, u64)> {
        self.catch_up();
        let mask = self.index.len() - 1;
        let n = self.ring.len() as u64;
        let tag = fp >> 32;
        let mut i = fp as usize & mask;
        // The newest match: the answer depends on the frames remembered,
        // not on where the index put them (a split in time compares them).
        let mut best: Option<(u32, i64, u64)> = None;
        loop {
            let s = self.index[i];
            if s == 0 {
                return best.map(|(_, t, f)| (t, f));
            }
            if s >> 32 == tag {
                // Frames back from the newest, within 2^31 (the ring is far smaller).
                let back = (self.pushed as u32 | SEQ_TAG).wrapping_sub(s as u32) & !SEQ_TAG;
                if back >= 1 && back as u64 <= n && best.is_none_or(|(b, _, _)| back < b) {
                    let f = &self.ring[((self.pushed - back as u64) & (n - 1)) as usize];
                    if f.fingerprint == fp
                        && f.frame >= trust_from
                        && (0..=DUPLICATE_MAX_GAP_WITH_IP_ID_NS).contains(&(time_ns - f.time_ns))
                    {
                        best = Some((back, f.time_ns, f.frame));
                    }
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// The frames remembered, newest first.
    fn newest_first(&self) -> impl Iterator<Item = &OlderFrame> + '_ {
        let n = self.ring.len() as u64;
        let held = self.pushed.min(n);
        (1..=held).map(move |back| &self.ring[((self.pushed - back) & (n - 1)) as usize])
    }

    fn push(&mut self, r: &Recent) {
        let n = self.ring.len();
        if self.pushed >= n as u64 && n < DUPLICATE_MEMORY_MAX_FRAMES {
            // Full and allowed to grow: keep every frame, in order; the
            // index is rebuilt at the next lookup.
            let mut ring = vec![OlderFrame::default(); 2 * n];
            for seq in self.pushed - n as u64..self.pushed {
                ring[(seq % (2 * n) as u64) as usize] = self.ring[(seq % n as u64) as usize];
            }
            self.ring = ring;
            self.index = vec![0; 2 * n * INDEX_PER_FRAME];
            self.indexed = 0;
            self.since_rebuild = usize::MAX / 2;
        }
        let n = self.ring.len() as u64;
        self.ring[(self.pushed & (n - 1)) as usize] = OlderFrame { fingerprint: r.fingerprint, time_ns: r.time_ns, frame: r.frame };
        self.pushed += 1;
    }

    /// Indexes the frames pushed since the last lookup, or rebuilds the
    /// index when that many entries would crowd it.
    fn catch_up(&mut self) {
        let n = self.ring.len() as u64;
        let pending = self.pushed - self.indexed;
        if pending == 0 {
            return;
        }
        let rebuild = pending >= n || self.since_rebuild as u64 + pending >= n;
        if rebuild {
            self.index.fill(0);
            self.indexed = self.pushed.saturating_sub(n);
        }
        let mask = self.index.len() - 1;
        for seq in self.indexed..self.pushed {
            // Oldest first: of two frames with one fingerprint, the newer
            // is found only once the older is beyond the gap.
            let fp = self.ring[(seq & (n - 1)) as usize].fingerprint;
            let mut i = fp as usize & mask;
            while self.index[i] != 0 {
                i = (i + 1) & mask;
            }
            self.index[i] = (fp >> 32) << 32 | (seq as u32 | SEQ_TAG) as u64;
        }
        // Entries beyond the ring's worth the rebuild put in.
        self.since_rebuild = if rebuild { 0 } else { self.since_rebuild + pending as usize };
        self.indexed = self.pushed;
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
    /// Some copy of this direction could be nothing else.
    pub fn certain_seen(&self) -> bool {
        self.certain_seen
    }

    /// The recent frames, newest first.
    fn recent_newest_first(&self) -> impl Iterator<Item = &Recent> + '_ {
        let n = self.recent.len();
        // `next` is where the next frame goes once the ring is full; before
        // that, frames are appended in order.
        let newest = if n < RECENT_FRAMES { n } else { self.next };
        (1..=n).map(move |k| &self.recent[(newest + n - k) % n])
    }

    /// Empties the counts, keeps the state, and starts noting the lookups
    /// a longer memory could answer: the second stretch of a split in time.
    pub(crate) fn restart_counts(&mut self) {
        self.copies = 0;
        self.examples.clear();
        self.max_gap_ns = 0;
        self.certain_copies = 0;
        self.split_misses = Some(Vec::new());
    }

    /// `self` continued from `earlier` with its counts restarted; makes it
    /// the whole.
    pub(crate) fn join(&mut self, earlier: &DuplicateFilter) {
        self.copies += earlier.copies;
        let mut examples = earlier.examples.clone();
        examples.extend(self.examples.iter().take(EXAMPLES.saturating_sub(examples.len())));
        self.examples = examples;
        self.max_gap_ns = self.max_gap_ns.max(earlier.max_gap_ns);
        self.certain_copies += earlier.certain_copies;
        self.split_misses = None;
    }

    /// The frames remembered before a jump are not looked at: see
    /// `trust_from`.
    pub(crate) fn resume_after_jump(&mut self, first_frame: u64) {
        self.trust_from = first_frame;
    }

    /// Adds `delta` to every frame number from `from` on.
    pub(crate) fn renumber(&mut self, from: u64, delta: i64) {
        let r = |v: &mut u64| *v = renumbered(*v, from, delta);
        for e in &mut self.recent {
            r(&mut e.frame);
        }
        if let Some(o) = self.older.as_mut() {
            for f in &mut o.ring {
                r(&mut f.frame);
            }
        }
        for (copy, original) in &mut self.examples {
            r(copy);
            r(original);
        }
        r(&mut self.trust_from);
    }

    /// Every frame remembered, newest first: (fingerprint, time, frame).
    fn remembered(&self) -> Vec<(u64, i64, u64)> {
        let recent = self.recent_newest_first().map(|r| (r.fingerprint, r.time_ns, r.frame));
        let older = self.older.iter().flat_map(|o| o.newest_first()).map(|f| (f.fingerprint, f.time_ns, f.frame));
        recent.chain(older).collect()
    }

    /// Whether `self`, started at the split from `at_split` (its memory
    /// then: the frames since the jump it trusts), read the frames since
    /// as one pass would have from `whole` (its state at the split): the
    /// same state; the frames `at_split` trusts the newest of `whole`'s;
    /// and no lookup the trusted frames did not answer since
    /// (`split_misses`) answerable by a frame of `whole`'s it did not
    /// trust (matched within the longest gap either way round).
    pub(crate) fn answers_as(&self, at_split: &DuplicateFilter, whole: &DuplicateFilter) -> bool {
        if at_split.max_end != whole.max_end || at_split.max_ack != whole.max_ack || at_split.certain_seen != whole.certain_seen {
            return false;
        }
        let trust = at_split.trust_from;
        let mine: Vec<(u64, i64, u64)> = at_split.remembered().into_iter().filter(|e| e.2 >= trust).collect();
        let theirs = whole.remembered();
        let mut matched = 0;
        let mut unseen = Vec::new();
        for e in theirs {
            if matched < mine.len() && e.2 >= trust {
                if e != mine[matched] {
                    return false;
                }
                matched += 1;
            } else {
                unseen.push(e);
            }
        }
        if matched < mine.len() {
            return false;
        }
        self.split_misses.iter().flatten().all(|&(fp, t)| {
            !unseen.iter().any(|&(f, time, _)| f == fp && (0..=DUPLICATE_MAX_GAP_WITH_IP_ID_NS).contains(&(t - time)))
        })
    }

    #[inline]
    fn advances(&mut self, seg: &TcpSegment<'_>) -> bool {
        let end = seg
            .seq
            .wrapping_add(seg.payload_len)
            .wrapping_add(seg.flags.syn() as u32 + seg.flags.fin() as u32);
        let beyond = |x: u32, max: &mut Option<u32>| match *max {
            Some(m) if (x.wrapping_sub(m) as i32) <= 0 => false,
            _ => {
                *max = Some(x);
                true
            }
        };
        let by_end = beyond(end, &mut self.max_end);
        let by_ack = seg.flags.ack() && beyond(seg.ack, &mut self.max_ack);
        by_end || by_ack
    }

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
        // A copy has its original's sequence number, length, flags and ACK:
        // a frame whose end or ACK lies beyond every earlier frame's (most
        // frames of a transfer) has no original to be a copy of, and
        // nothing is looked up.
        if !self.advances(seg) {
            let trust = self.trust_from;
            let hit = self
                .recent_newest_first()
                .find(|r| {
                    r.fingerprint == fp
                        && r.with_ip_id == with_ip_id
                        && r.frame >= trust
                        && (0..=max_gap).contains(&(time_ns - r.time_ns))
                })
                .map(|r| (r.time_ns, r.frame));
            let hit = match hit {
                None => {
                    if let Some(misses) = self.split_misses.as_mut() {
                        misses.push((fp, time_ns));
                    }
                    if identified {
                        self.older.as_mut().and_then(|o| o.find(fp, time_ns, trust))
                    } else {
                        None
                    }
                }
                hit => hit,
            }
            .filter(|_| !ambiguous || copies_seen);
            if let Some((t, original)) = hit {
                if !ambiguous {
                    self.certain_copies += 1;
                    self.certain_seen = true;
                }
                self.copies += 1;
                self.max_gap_ns = self.max_gap_ns.max(time_ns - t);
                if self.examples.len() < EXAMPLES {
                    self.examples.push((frame, original));
                }
                return true;
            }
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

/// `v + delta` if `v >= from` (see `FlowTable::renumber`).
pub(crate) fn renumbered(v: u64, from: u64, delta: i64) -> u64 {
    if v >= from {
        v.wrapping_add(delta as u64)
    } else {
        v
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
            captured: 0,
            length_from_frame: false,
            ip_id,
            checksum: 0xbeef,
            ttl: 64,
            dont_fragment: true,
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
    fn copies_are_found_as_far_back_as_the_memory_holds() {
        // 1 Gbit/s (12 us a segment): merged captures put each copy `lag`
        // frames after its original; the memory keeps the last
        // DUPLICATE_MEMORY_MAX_FRAMES frames that left the ring, through its
        // growth and after it wraps around many times
        for lag in [17usize, 100, 3000, DUPLICATE_MEMORY_MAX_FRAMES + RECENT_FRAMES - 1] {
            let mut f = DuplicateFilter::default();
            let total = 40_000usize;
            let mut copies = 0;
            for k in 0..total {
                let t = k as i64 * 12_000;
                let s = |j: usize| seg(1000u32.wrapping_add(j as u32 * 1448), Some((j % 65_000) as u16 + 1), None);
                assert!(!f.is_copy(&s(k), t, k as u64, false), "lag {lag}: frame {k} is new");
                if k >= lag && f.is_copy(&s(k - lag), t + 1, k as u64, false) {
                    copies += 1;
                }
            }
            // every copy is one frame later than planned: its original is
            // `lag` new frames back, plus the copies themselves are not kept
            assert_eq!(copies, total - lag, "lag {lag}");
        }
        // beyond the memory a copy is not found (it is far older than any
        // merged capture puts one)
        let mut f = DuplicateFilter::default();
        let lag = DUPLICATE_MEMORY_MAX_FRAMES + RECENT_FRAMES + 1;
        for k in 0..20_000usize {
            f.is_copy(&seg(k as u32 * 1448, Some((k % 65_000) as u16 + 1), None), k as i64 * 12_000, k as u64, false);
        }
        let k = 20_000 - lag;
        assert!(!f.is_copy(&seg(k as u32 * 1448, Some((k % 65_000) as u16 + 1), None), 20_000 * 12_000, 20_000, false));
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
