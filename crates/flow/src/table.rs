//! The connection table: finds the connection of each segment, starts a new
//! one on port reuse, and retires closed connections so that memory is
//! bounded by the connections open at once.

use crate::attempts::{is_control, Attempt, AttemptStats, AttemptSummary, HeldSegment, ATTEMPTS_LISTED_MAX, MAX_HELD_SEGMENTS, MAX_LIVE_ATTEMPTS};
use crate::conn::{CloseState, Connection, SegmentEvent};
use crate::handover::{Outbox, Quality};
use crate::key::{Endpoint, Key};
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
    /// The most payload bytes `payload` reads of a segment: a capture read
    /// on another thread hands over only these (the segment's `captured`
    /// still counts them all).
    fn payload_prefix(&self) -> usize {
        usize::MAX
    }
}

impl SegmentSink for () {
    #[inline]
    fn segment(&mut self, _: &Connection, _: &SegmentEvent) {}
    fn payload_prefix(&self) -> usize {
        0
    }
}

/// Two sinks fed the same segments in one pass (a diagnosis's recorder
/// and a report's packet log, or the pair comparison's spill). Each gets
/// the payload bytes it asks for.
pub struct Tee<'a, A: SegmentSink, B: SegmentSink>(pub &'a mut A, pub &'a mut B);

impl<A: SegmentSink, B: SegmentSink> SegmentSink for Tee<'_, A, B> {
    fn segment(&mut self, c: &Connection, e: &SegmentEvent) {
        self.0.segment(c, e);
        self.1.segment(c, e);
    }

    fn payload(&mut self, c: &Connection, e: &SegmentEvent, payload: &[u8]) {
        self.0.payload(c, e, &payload[..payload.len().min(self.0.payload_prefix())]);
        self.1.payload(c, e, &payload[..payload.len().min(self.1.payload_prefix())]);
    }

    fn payload_prefix(&self) -> usize {
        self.0.payload_prefix().max(self.1.payload_prefix())
    }
}

/// What a sink may ask at the join of a split in time
/// ([`ShardSink::join_later`]; `crate::split` answers it).
pub trait SplitView {
    /// Add this to the second stretch's frame numbers.
    fn frame_delta(&self) -> i64;
    /// Connection `id` at the split (the first stretch's).
    fn connection_at_split(&self, id: u64) -> Option<&Connection>;
    /// Connection `id` as one pass has it just after frame `frame` (a frame
    /// of the second stretch, in the file's numbering): the second
    /// stretch's state there (read again from the snapshot before it)
    /// joined to the first stretch's. `None` with no snapshot before the
    /// frame or no such connection.
    fn connection_at(&self, id: u64, frame: u64) -> Option<Connection>;
}

/// A sink that can be split over shard threads and joined after them
/// ([`crate::analyze_capture_sharded`]): each shard's sink sees every
/// segment of the connections on that shard, in capture order.
pub trait ShardSink: SegmentSink + Send + Sized {
    /// An empty sink for one of `shards` shards.
    fn for_shard(&self, shards: usize) -> Self;
    /// Takes in what one shard's sink gathered.
    fn join(&mut self, shard: Self);
    /// The capture may instead be split in time over two threads
    /// (`crate::split`): the first stretch goes to this sink, the second
    /// to a [`ShardSink::Later`], taken in at the join.
    const SPLITS_IN_TIME: bool = false;
    /// The join asks for connections' state at frames of the second
    /// stretch (`SplitView::connection_at`): the second thread keeps
    /// snapshots of its table.
    const SPLIT_SNAPSHOTS: bool = false;
    /// Longest second stretch (in frames, estimated from the file's size)
    /// split for this sink: what `Later` holds until the join is bounded.
    const LATER_MAX_FRAMES: u64 = u64::MAX;
    /// What the second stretch of a split in time gathers, before it is
    /// known what came before the split.
    type Later: SegmentSink + Send;
    /// An empty sink for the second stretch.
    fn later(&self) -> Self::Later;
    /// Why `later` cannot be taken in (it grew past its bound): the
    /// split then reads on by one thread. Asked every few thousand frames.
    fn later_spoiled(_later: &Self::Later) -> Option<&'static str> {
        None
    }
    /// Takes in what the second stretch gathered, as if this sink had seen
    /// its segments after the first stretch's: called once the split is
    /// proven (`FlowTable::answers_as`). `join` gives the frame numbers'
    /// offset and each connection's state at any frame of the stretch.
    fn join_later(&mut self, later: Self::Later, join: &dyn SplitView);
    /// A split in time starts: the first stretch comes next.
    fn split_starts(&mut self) {}
    /// The split's reading is over, joined or read on by one thread.
    fn split_ends(&mut self) {}
}

impl ShardSink for () {
    const SPLITS_IN_TIME: bool = true;
    type Later = ();
    fn for_shard(&self, _: usize) {}
    fn join(&mut self, _: ()) {}
    fn later(&self) {}
    fn join_later(&mut self, _: (), _: &dyn SplitView) {}
}

/// Entries of the table's cache of recent connections (`FlowTable::recent`):
/// direct-mapped, so more connections than this at once only make it miss.
const RECENT_WAYS: usize = 256;

/// The entry of the recent-connection cache for a pair of endpoints, the
/// same either way round (XOR is symmetric).
#[inline]
fn recent_way(a: &Endpoint, b: &Endpoint) -> usize {
    let fold = |e: &Endpoint| {
        let x = match e.0 {
            Addr::V4(b) => u32::from_ne_bytes(b) as u64,
            Addr::V6(b) => {
                let w = u128::from_ne_bytes(b);
                (w as u64) ^ (w >> 64) as u64
            }
        };
        x ^ (e.1 as u64) << 32
    };
    let h = (fold(a) ^ fold(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> 56) as usize % RECENT_WAYS
}

/// A connection closed (both FINs or a RST) and silent this long is retired
/// (the default of `FlowTable::retire_after_close_ns`): Linux's TIME_WAIT
/// (TCP_TIMEWAIT_LEN, 60 s), the time an end keeps a closed connection to
/// answer a retransmitted FIN, so a late copy still finds its connection.
pub const RETIRE_AFTER_CLOSE_NS: i64 = 60_000_000_000;
/// A SYN nobody answered, silent this long, is retired: Linux gives up
/// after 6 SYN retries, about 127 s (tcp_syn_retries).
const RETIRE_UNANSWERED_SYN_NS: i64 = 180_000_000_000;
/// Closed connections are looked for once per this much capture time, far
/// below the silences that retire them (`RETIRE_AFTER_CLOSE_NS`).
const SWEEP_EVERY_NS: i64 = 1_000_000_000;

/// Counts of frames that did not yield a TCP segment.
#[derive(Debug, Clone, Default)]
pub struct SkipCounts {
    counts: [u64; NotTcp::ALL.len()],
}

impl SkipCounts {
    pub(crate) fn add(&mut self, why: NotTcp) {
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
    pub(crate) fn merge(&mut self, other: &SkipCounts) {
        for (a, b) in self.counts.iter_mut().zip(other.counts) {
            *a += b;
        }
    }
}

/// Live connections held at once by default; past it, the least recently
/// seen eighth is retired (summarised, marked `evicted`). A connection costs
/// about 2.5 KB plus its samples, so this bounds the table near 1 GiB in
/// the worst case; a busy load balancer holds some 100,000 at once.
pub const MAX_CONNECTIONS_DEFAULT: usize = 1 << 18;

/// Tracks every TCP connection in a stream of frames.
pub struct FlowTable {
    /// Key to slot in `slots`; freed slots are reused.
    index: HashMap<Key, usize>,
    slots: Vec<Option<Live>>,
    free: Vec<usize>,
    /// The last connection looked up: consecutive segments usually share it,
    /// and comparing the key is cheaper than hashing it.
    last: Option<(Key, usize)>,
    /// Connections looked up lately, by [`recent_way`]: where many
    /// connections interleave (a server's capture) the last one rarely
    /// matches, and comparing a key found here is cheaper than the hash
    /// table's lookup (measured on the 8-transfer bench capture).
    recent: Box<[Option<(Key, usize)>]>,
    finished: Vec<ConnectionSummary>,
    /// Keep throughput/goodput series in the summaries.
    pub series: bool,
    /// Hold tuples that carry only control segments as compact attempts
    /// (see `attempts`). Off: every tuple is a connection from its first
    /// segment, and the sink sees every segment in capture order.
    pub hold_attempts: bool,
    /// Live connections held at most (least recently seen evicted).
    pub max_connections: usize,
    /// A closed connection silent this long is retired (`RETIRE_AFTER_CLOSE_NS`).
    pub retire_after_close_ns: i64,
    /// Connections retired early to stay within `max_connections`.
    pub evicted_connections: u64,
    attempts: HashMap<Key, Attempt>,
    /// Attempts that ended without becoming connections, while few enough
    /// to be listed one by one (`ATTEMPTS_LISTED_MAX`).
    ended_attempts: Vec<(Key, Attempt)>,
    too_many_attempts: bool,
    attempt_stats: AttemptStats,
    next_id: u64,
    segments: u64,
    pub skipped: SkipCounts,
    /// Frames removed as copies of a frame just before (all connections).
    pub duplicate_frames: u64,
    now_ns: i64,
    /// Closed connections are looked for at the first segment of each
    /// `SWEEP_EVERY_NS` of capture time: by time, not by count, so that a
    /// stretch of the capture read apart (a split in time) sweeps where
    /// one pass does.
    next_sweep_ns: i64,
    /// The second stretch of a split in time, past the split: its results
    /// are joined to the first stretch's only if no connection started or
    /// ended (else this says which).
    split_mode: bool,
    split_spoiled: Option<&'static str>,
    /// The duplicate filter's verdicts, kept or given (`CopyVerdicts`).
    copy_verdicts: Option<Box<CopyVerdicts>>,
    /// Set when the connections are analysed on shard threads
    /// (`crate::shard`): the table keeps only their [`Live`] state.
    pub(crate) outbox: Option<Outbox>,
}

impl Default for FlowTable {
    fn default() -> Self {
        FlowTable {
            index: HashMap::default(),
            slots: Vec::new(),
            free: Vec::new(),
            last: None,
            recent: vec![None; RECENT_WAYS].into_boxed_slice(),
            finished: Vec::new(),
            series: false,
            hold_attempts: true,
            max_connections: MAX_CONNECTIONS_DEFAULT,
            retire_after_close_ns: RETIRE_AFTER_CLOSE_NS,
            evicted_connections: 0,
            attempts: HashMap::default(),
            ended_attempts: Vec::new(),
            too_many_attempts: false,
            attempt_stats: AttemptStats::default(),
            next_id: 0,
            segments: 0,
            skipped: SkipCounts::default(),
            duplicate_frames: 0,
            now_ns: 0,
            next_sweep_ns: i64::MIN,
            split_mode: false,
            split_spoiled: None,
            copy_verdicts: None,
            outbox: None,
        }
    }
}

/// The client is `a`: the SYN sender, or the receiver of a SYN-ACK.
fn client_server(seg: &TcpSegment<'_>) -> (Endpoint, Endpoint) {
    let (src, dst) = ((seg.src, seg.src_port), (seg.dst, seg.dst_port));
    if seg.flags.syn() && seg.flags.ack() {
        (dst, src)
    } else {
        (src, dst)
    }
}

/// The duplicate filter's verdicts over a stretch of frames: the frames
/// found to be copies, kept while the stretch is read (`log`), then given
/// instead of the filter's when the stretch is read again from a snapshot
/// without the filters' memory (`FlowTable::snapshot`), which is most of
/// a table's size.
#[derive(Debug, Clone, Default)]
pub(crate) struct CopyVerdicts {
    replay: bool,
    frames: std::sync::Arc<Vec<u64>>,
    next: usize,
}

impl CopyVerdicts {
    #[inline]
    fn is_copy(&mut self, filter: impl FnOnce() -> bool, frame: u64) -> bool {
        if !self.replay {
            let copy = filter();
            if copy {
                std::sync::Arc::make_mut(&mut self.frames).push(frame);
            }
            return copy;
        }
        while self.frames.get(self.next).is_some_and(|&f| f < frame) {
            self.next += 1;
        }
        self.frames.get(self.next) == Some(&frame)
    }
}


/// A live connection as the table holds it: the fields of the model that
/// the table's own decisions read (port reuse, retirement, eviction), kept
/// in step with it by [`Live::note`]; the capture-quality checks, which run
/// before the model; and the connection itself, unless a shard thread
/// analyses it (`crate::shard`).
#[derive(Clone)]
pub(crate) struct Live {
    pub endpoints: [Endpoint; 2],
    /// `Connection::last_ns`.
    last_ns: i64,
    /// `Connection::close` and `fin_seen`.
    close: CloseState,
    fin_seen: [bool; 2],
    /// The ISN of each side's first SYN (`Direction::syn`).
    syn_isn: [Option<u32>; 2],
    /// A SYN without ACK was analysed (`Connection::syn_ns`).
    syn_sent: bool,
    /// Endpoint b sent a segment the model analysed.
    b_sent: bool,
    pub quality: Quality,
    conn: Option<Box<Connection>>,
}

impl Live {
    fn new(conn: Connection) -> Live {
        Live {
            endpoints: conn.endpoints,
            last_ns: conn.last_ns,
            close: conn.close,
            fin_seen: conn.fin_seen,
            syn_isn: [None; 2],
            syn_sent: false,
            b_sent: false,
            quality: Quality::default(),
            conn: Some(Box::new(conn)),
        }
    }

    /// A copy with empty capture-quality state.
    fn clone_without_quality(&self) -> Live {
        Live {
            endpoints: self.endpoints,
            last_ns: self.last_ns,
            close: self.close,
            fin_seen: self.fin_seen,
            syn_isn: self.syn_isn,
            syn_sent: self.syn_sent,
            b_sent: self.b_sent,
            quality: Quality::default(),
            conn: self.conn.clone(),
        }
    }

    /// What `Connection::process` changes of the fields above.
    #[inline]
    fn note(&mut self, seg: &TcpSegment<'_>, time_ns: i64, d: usize) {
        let flags = seg.flags;
        self.last_ns = time_ns;
        if flags.syn() {
            self.syn_isn[d].get_or_insert(seg.seq);
            self.syn_sent |= !flags.ack();
        }
        self.b_sent |= d == 1;
        if flags.fin() {
            self.fin_seen[d] = true;
        }
        if flags.rst() || self.fin_seen != [false, false] {
            self.close = self.close.after(flags.rst(), self.fin_seen, d);
        }
    }

    /// The connection's summary, its quality counts given to it.
    fn summary(self, c: &mut Connection, series: bool, evicted: bool) -> ConnectionSummary {
        self.quality.give(c);
        let mut summary = ConnectionSummary::from_connection(c, series);
        summary.evicted = evicted;
        summary
    }
}

/// Runs one segment through its connection: the capture-quality checks,
/// then the model and the sink, here or on the connection's shard.
#[allow(clippy::too_many_arguments)]
#[inline]
#[allow(clippy::too_many_arguments)]
fn feed(
    live: &mut Live,
    slot: usize,
    duplicate_frames: &mut u64,
    verdicts: Option<&mut CopyVerdicts>,
    outbox: Option<&mut Outbox>,
    seg: &TcpSegment<'_>,
    frame: u64,
    time_ns: i64,
    sink: &mut impl SegmentSink,
) {
    let d = if live.endpoints[0] == (seg.src, seg.src_port) { 0 } else { 1 };
    // Capture quality first: a frame the capture holds twice is not a
    // retransmission; the copy goes no further.
    let q = &mut live.quality;
    if time_ns + crate::quality::CLOCK_STEP_BACK_NS < live.last_ns {
        q.clock_steps_back += 1;
        q.max_clock_step_back_ns = q.max_clock_step_back_ns.max(live.last_ns - time_ns);
    }
    let copy = match verdicts {
        None => {
            let copies_seen = q.copies.iter().any(|f| f.certain_seen());
            q.copies[d].is_copy(seg, time_ns, frame, copies_seen)
        }
        Some(v) => v.is_copy(|| {
            let copies_seen = q.copies.iter().any(|f| f.certain_seen());
            q.copies[d].is_copy(seg, time_ns, frame, copies_seen)
        }, frame),
    };
    if copy {
        *duplicate_frames += 1;
        return;
    }
    live.note(seg, time_ns, d);
    match (&mut live.conn, outbox) {
        (Some(conn), _) => analyse(conn, seg, frame, time_ns, d, sink),
        (None, Some(outbox)) => outbox.segment(slot, d, seg, frame, time_ns),
        (None, None) => unreachable!("a connection is in its slot or on a shard"),
    }
}

/// The model, then the sink.
#[inline]
pub(crate) fn analyse(conn: &mut Connection, seg: &TcpSegment<'_>, frame: u64, time_ns: i64, d: usize, sink: &mut impl SegmentSink) {
    let event = conn.process(seg, frame, time_ns, d);
    sink.segment(conn, &event);
    if !seg.payload.is_empty() {
        sink.payload(conn, &event, seg.payload);
    }
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
            Ok(ref seg) => self.segment(seg, frame.number, frame.time_ns, sink),
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
        self.connection_segment(seg, frame, time_ns, sink);
        if self.now_ns >= self.next_sweep_ns {
            if self.next_sweep_ns != i64::MIN {
                self.retire_closed();
            }
            self.next_sweep_ns = (self.now_ns.div_euclid(SWEEP_EVERY_NS) + 1) * SWEEP_EVERY_NS;
        }
    }

    fn connection_segment(
        &mut self,
        seg: &TcpSegment<'_>,
        frame: u64,
        time_ns: i64,
        sink: &mut impl SegmentSink,
    ) {
        let src = (seg.src, seg.src_port);
        let dst = (seg.dst, seg.dst_port);
        let is_syn = seg.flags.syn() && !seg.flags.ack();
        // Equality with the last pair, either way round, needs no ordering
        // compare and no hash: the common case in any capture.
        let cached = match self.last {
            Some(((x, y), i)) if (x == src && y == dst) || (x == dst && y == src) => Some(i),
            _ => None,
        };
        let (k, mut slot) = match (self.last, cached) {
            (Some((last_key, _)), Some(i)) => (last_key, Some(i)),
            _ => {
                let way = recent_way(&src, &dst);
                match self.recent[way] {
                    Some(((x, y), i)) if (x == src && y == dst) || (x == dst && y == src) => ((x, y), Some(i)),
                    _ => {
                        let k = key(src, dst);
                        let slot = self.index.get(&k).copied();
                        if let Some(i) = slot {
                            self.recent[way] = Some((k, i));
                        }
                        (k, slot)
                    }
                }
            }
        };
        if let (Some(i), true) = (slot, is_syn) {
            let c = self.slots[i].as_ref().expect("indexed slot is live");
            let d = if c.endpoints[0] == src { 0 } else { 1 };
            let reuse = match c.syn_isn[d] {
                // A retransmitted SYN keeps the connection.
                Some(isn) => isn != seg.seq,
                // A SYN on a tuple already carrying traffic: port reuse.
                None => true,
            };
            if reuse {
                self.retire(k, i);
                slot = None;
            }
        }
        if slot.is_none() && self.split_mode {
            self.split_spoiled.get_or_insert("a connection started after the split");
        }
        let i = match slot {
            Some(i) => i,
            None if self.hold_attempts => match self.attempt_segment(k, seg, frame, time_ns, is_syn, sink) {
                Some(i) => i,
                None => return,
            },
            None => {
                self.next_id += 1;
                let (a, b) = client_server(seg);
                self.open(k, Connection::new(self.next_id, a, b, time_ns, frame))
            }
        };
        self.last = Some((k, i));
        let live = self.slots[i].as_mut().expect("live slot");
        feed(live, i, &mut self.duplicate_frames, self.copy_verdicts.as_deref_mut(), self.outbox.as_mut(), seg, frame, time_ns, sink);
    }

    /// A segment on a tuple with no live connection: held in an attempt, or
    /// it makes the attempt (or the tuple) a connection, whose slot is
    /// returned with the held segments already fed to it.
    fn attempt_segment(
        &mut self,
        k: Key,
        seg: &TcpSegment<'_>,
        frame: u64,
        time_ns: i64,
        is_syn: bool,
        sink: &mut impl SegmentSink,
    ) -> Option<usize> {
        let control = is_control(seg);
        let from_first = (seg.src, seg.src_port) == k.0;
        if let Some(a) = self.attempts.get_mut(&k) {
            // A SYN with a new ISN from the side that sent one: the port is
            // reused, and the old attempt is over.
            let reused = is_syn
                && a.segs.iter().any(|h| h.from_first() == from_first && h.is_syn() && h.seq() != seg.seq);
            if !reused {
                if control && a.segs.len() < MAX_HELD_SEGMENTS {
                    a.segs.push(HeldSegment::new(seg, frame, time_ns, from_first));
                    self.attempt_stats.segment(seg.flags.0, time_ns);
                    return None;
                }
                // It carries more than control segments: a connection.
                let a = self.attempts.remove(&k).expect("attempt just found");
                self.attempt_stats.became_connections += 1;
                let held = a.segs[0].segment(&k);
                let (ca, cb) = client_server(&held);
                let i = self.open(k, Connection::new(a.id, ca, cb, a.segs[0].time_ns, a.segs[0].frame));
                let live = self.slots[i].as_mut().expect("live slot");
                for h in &a.segs {
                    feed(live, i, &mut self.duplicate_frames, self.copy_verdicts.as_deref_mut(), self.outbox.as_mut(), &h.segment(&k), h.frame, h.time_ns, sink);
                }
                return Some(i);
            }
            let old = self.attempts.remove(&k).expect("attempt just found");
            self.end_attempt(k, old);
        }
        self.next_id += 1;
        let (a, b) = client_server(seg);
        if !control {
            return Some(self.open(k, Connection::new(self.next_id, a, b, time_ns, frame)));
        }
        if self.attempts.len() >= MAX_LIVE_ATTEMPTS {
            self.evict_attempts();
        }
        self.attempt_stats.started(a, b, time_ns);
        self.attempt_stats.segment(seg.flags.0, time_ns);
        let mut segs = smallvec::SmallVec::new();
        segs.push(HeldSegment::new(seg, frame, time_ns, from_first));
        self.attempts.insert(k, Attempt { id: self.next_id, segs });
        None
    }

    /// Puts a new connection in a slot, evicting the least recently seen
    /// ones first when the table is full.
    fn open(&mut self, k: Key, conn: Connection) -> usize {
        if self.index.len() >= self.max_connections.max(8) {
            self.evict_connections();
        }
        let mut live = Live::new(conn);
        let i = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        if let Some(outbox) = self.outbox.as_mut() {
            outbox.open(i, live.conn.take().expect("a new connection"));
        }
        self.slots[i] = Some(live);
        self.index.insert(k, i);
        i
    }

    /// Retires the least recently seen eighth of the live connections.
    fn evict_connections(&mut self) {
        let mut by_age: Vec<(i64, Key, usize)> = self
            .index
            .iter()
            .map(|(k, &i)| (self.slots[i].as_ref().map_or(i64::MIN, |c| c.last_ns), *k, i))
            .collect();
        let n = (by_age.len() / 8).max(1);
        by_age.select_nth_unstable_by_key(n - 1, |e| e.0);
        for (_, k, i) in by_age.into_iter().take(n) {
            self.evicted_connections += 1;
            self.retire_as(k, i, true);
        }
    }

    /// Ends the least recently seen eighth of the live attempts.
    fn evict_attempts(&mut self) {
        let mut by_age: Vec<(i64, Key)> = self.attempts.iter().map(|(k, a)| (a.last_ns(), *k)).collect();
        let n = (by_age.len() / 8).max(1);
        by_age.select_nth_unstable_by_key(n - 1, |e| e.0);
        for (_, k) in by_age.into_iter().take(n) {
            if let Some(a) = self.attempts.remove(&k) {
                self.end_attempt(k, a);
            }
        }
    }

    /// An attempt is over without becoming a connection: counted, and kept
    /// for listing while there are few.
    fn end_attempt(&mut self, k: Key, a: Attempt) {
        self.attempt_stats.ended(&a);
        if self.too_many_attempts {
            return;
        }
        if self.ended_attempts.len() < ATTEMPTS_LISTED_MAX {
            self.ended_attempts.push((k, a));
        } else {
            self.too_many_attempts = true;
            self.ended_attempts = Vec::new();
        }
    }

    fn retire(&mut self, k: Key, i: usize) {
        self.retire_as(k, i, false)
    }

    fn retire_as(&mut self, k: Key, i: usize, evicted: bool) {
        if self.split_mode {
            self.split_spoiled.get_or_insert("a connection ended after the split");
        }
        self.index.remove(&k);
        let way = recent_way(&k.0, &k.1);
        if self.recent[way].is_some_and(|(_, j)| j == i) {
            self.recent[way] = None;
        }
        if let Some(mut live) = self.slots[i].take() {
            match (live.conn.take(), self.outbox.as_mut()) {
                (Some(mut c), _) => self.finished.push(live.summary(&mut c, self.series, evicted)),
                (None, Some(outbox)) => outbox.retire(i, evicted, live.quality),
                (None, None) => unreachable!("a connection is in its slot or on a shard"),
            }
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
                let unanswered = c.syn_sent && !c.b_sent;
                (closed && silent > self.retire_after_close_ns)
                    || (unanswered && silent > RETIRE_UNANSWERED_SYN_NS)
            })
            .map(|(k, &i)| (*k, i))
            .collect();
        for (k, i) in done {
            self.retire(k, i);
        }
        // Attempts: one with a RST is over once silent as long as a closed
        // connection; the rest wait out the SYN retries.
        let done: Vec<Key> = self
            .attempts
            .iter()
            .filter(|(_, a)| {
                let silent = now - a.last_ns();
                let reset = a.segs.iter().any(|h| h.is_rst());
                (reset && silent > self.retire_after_close_ns) || silent > RETIRE_UNANSWERED_SYN_NS
            })
            .map(|(k, _)| *k)
            .collect();
        for k in done {
            if let Some(a) = self.attempts.remove(&k) {
                self.end_attempt(k, a);
            }
        }
    }

    /// Sends every live connection to its shard to be summarised there
    /// (`crate::shard`, before [`FlowTable::finish`]).
    pub(crate) fn retire_live(&mut self) {
        let live: Vec<(Key, usize)> = self.index.iter().map(|(k, &i)| (*k, i)).collect();
        for (k, i) in live {
            self.retire(k, i);
        }
    }

    /// Summaries made on shard threads.
    pub(crate) fn add_finished(&mut self, finished: Vec<ConnectionSummary>) {
        self.finished.extend(finished);
    }

    /// A copy of the table to continue from further on in the capture
    /// (the second stretch of a split in time): the connections and the
    /// table's state, nothing counted. `None` with shards, with attempts
    /// held (their statistics do not add up), or with more than
    /// `max_connections` connections.
    pub(crate) fn fork(&self, max_connections: usize) -> Option<FlowTable> {
        self.fork_with(max_connections, true)
    }

    /// [`FlowTable::fork`]; without the duplicate filters' memory unless
    /// `filters` (a snapshot, which reads again with the verdicts kept).
    fn fork_with(&self, max_connections: usize, filters: bool) -> Option<FlowTable> {
        if self.outbox.is_some() || !self.attempts.is_empty() || self.index.len() > max_connections {
            return None;
        }
        let slots = if filters {
            self.slots.clone()
        } else {
            let light = |l: &Live| Live { quality: Quality::default(), ..l.clone_without_quality() };
            self.slots.iter().map(|s| s.as_ref().map(light)).collect()
        };
        Some(FlowTable {
            index: self.index.clone(),
            slots,
            free: self.free.clone(),
            last: self.last,
            recent: self.recent.clone(),
            finished: Vec::new(),
            series: self.series,
            hold_attempts: self.hold_attempts,
            max_connections: self.max_connections,
            retire_after_close_ns: self.retire_after_close_ns,
            evicted_connections: 0,
            attempts: HashMap::default(),
            ended_attempts: Vec::new(),
            too_many_attempts: self.too_many_attempts,
            attempt_stats: AttemptStats::default(),
            next_id: self.next_id,
            segments: 0,
            skipped: SkipCounts::default(),
            duplicate_frames: 0,
            now_ns: self.now_ns,
            next_sweep_ns: self.next_sweep_ns,
            split_mode: false,
            split_spoiled: None,
            copy_verdicts: None,
            outbox: None,
        })
    }

    /// An exact copy of the table (a second stretch's state, counts
    /// included) to read on from later: `None` where [`FlowTable::fork`]
    /// gives none.
    pub(crate) fn snapshot(&self) -> Option<FlowTable> {
        let mut t = self.fork_with(usize::MAX, false)?;
        t.segments = self.segments;
        t.skipped = self.skipped.clone();
        t.duplicate_frames = self.duplicate_frames;
        t.evicted_connections = self.evicted_connections;
        t.split_mode = self.split_mode;
        t.split_spoiled = self.split_spoiled;
        // The verdicts are given when it reads again (`give_copy_verdicts`).
        t.copy_verdicts = self.copy_verdicts.as_ref().map(|_| Box::new(CopyVerdicts { replay: true, ..CopyVerdicts::default() }));
        Some(t)
    }

    /// The duplicate filter's verdicts kept since `keep_copy_verdicts`.
    pub(crate) fn copy_verdicts(&self) -> Option<std::sync::Arc<Vec<u64>>> {
        self.copy_verdicts.as_ref().map(|v| v.frames.clone())
    }

    /// A snapshot reads again with these verdicts (those kept when the
    /// frames were first read) in place of its duplicate filters.
    pub(crate) fn give_copy_verdicts(&mut self, frames: std::sync::Arc<Vec<u64>>) {
        if let Some(v) = self.copy_verdicts.as_mut().filter(|v| v.replay) {
            v.frames = frames;
            v.next = 0;
        }
    }

    /// Keep the duplicate filter's verdicts from here on, for snapshots
    /// ([`FlowTable::snapshot`]).
    pub(crate) fn keep_copy_verdicts(&mut self) {
        self.copy_verdicts = Some(Box::default());
    }

    /// The live connection numbered `id`.
    pub(crate) fn connection(&self, id: u64) -> Option<&Connection> {
        self.slots.iter().flatten().filter_map(|l| l.conn.as_deref()).find(|c| c.id == id)
    }

    /// The records from here to the next segment are skipped: see
    /// [`Connection::resume_after_jump`].
    pub(crate) fn resume_after_jump(&mut self, first_frame: u64) {
        for live in self.slots.iter_mut().flatten() {
            for f in &mut live.quality.copies {
                f.resume_after_jump(first_frame);
            }
            if let Some(c) = live.conn.as_mut() {
                c.resume_after_jump(first_frame);
            }
        }
    }

    /// At the split, on the second stretch: returns the state here (to be
    /// compared with the first stretch's at its end, [`FlowTable::answers_as`])
    /// and empties everything counted.
    pub(crate) fn start_split(&mut self) -> Option<FlowTable> {
        let at_split = self.fork(usize::MAX)?;
        self.segments = 0;
        self.skipped = SkipCounts::default();
        self.duplicate_frames = 0;
        self.finished.clear();
        self.ended_attempts.clear();
        self.attempt_stats = AttemptStats::default();
        self.evicted_connections = 0;
        for live in self.slots.iter_mut().flatten() {
            for f in &mut live.quality.copies {
                f.restart_counts();
            }
            live.quality.clock_steps_back = 0;
            live.quality.max_clock_step_back_ns = 0;
            if let Some(c) = live.conn.as_mut() {
                c.restart_counts();
            }
        }
        self.split_mode = true;
        Some(at_split)
    }

    /// Adds `delta` to every frame number from `from` on: the second
    /// stretch numbers its frames from far above any real number, until
    /// the first stretch says how many frames came before the split.
    pub(crate) fn renumber(&mut self, from: u64, delta: i64) {
        for live in self.slots.iter_mut().flatten() {
            for f in &mut live.quality.copies {
                f.renumber(from, delta);
            }
            if let Some(c) = live.conn.as_mut() {
                c.renumber(from, delta);
            }
        }
    }

    /// The second stretch cannot be joined any more (see `split_spoiled`).
    pub(crate) fn split_spoiled(&self) -> Option<&'static str> {
        self.split_spoiled
    }

    /// Whether this table, the second stretch of a split in time started
    /// from `at_split`, read the segments since the split as one pass
    /// would have from `whole` (the first stretch's table at the split).
    pub(crate) fn answers_as(&self, at_split: &FlowTable, whole: &FlowTable) -> Result<(), &'static str> {
        if let Some(why) = self.split_spoiled {
            return Err(why);
        }
        if whole.outbox.is_some() || !whole.attempts.is_empty() || !at_split.attempts.is_empty() {
            return Err("attempts were held at the split");
        }
        if whole.next_id != at_split.next_id
            || whole.now_ns != at_split.now_ns
            || whole.next_sweep_ns != at_split.next_sweep_ns
            || whole.too_many_attempts != at_split.too_many_attempts
            || whole.index.len() != at_split.index.len()
        {
            return Err("the table differs at the split");
        }
        for (k, &i) in &whole.index {
            let (Some(&j), Some(&f)) = (at_split.index.get(k), self.index.get(k)) else {
                return Err("the connections differ at the split");
            };
            let (Some(w), Some(s), Some(f)) = (&whole.slots[i], &at_split.slots[j], &self.slots[f]) else {
                return Err("the connections differ at the split");
            };
            let same = w.endpoints == s.endpoints
                && w.last_ns == s.last_ns
                && w.close == s.close
                && w.fin_seen == s.fin_seen
                && w.syn_isn == s.syn_isn
                && w.syn_sent == s.syn_sent
                && w.b_sent == s.b_sent;
            if !same {
                return Err("a connection's table state differs at the split");
            }
            if !(0..2).all(|d| f.quality.copies[d].answers_as(&s.quality.copies[d], &w.quality.copies[d])) {
                return Err("the duplicate filter's memory differs at the split");
            }
            let (Some(wc), Some(sc), Some(fc)) = (&w.conn, &s.conn, &f.conn) else {
                return Err("a connection is on a shard");
            };
            if !fc.answers_as(sc, wc) {
                return Err("a connection's state differs at the split");
            }
        }
        Ok(())
    }

    /// Makes this table (the second stretch, checked by
    /// [`FlowTable::answers_as`]) the whole: `whole` is the first
    /// stretch's table at the split.
    pub(crate) fn join(&mut self, whole: FlowTable) {
        let mut whole = whole;
        for (k, &i) in &whole.index {
            let f = self.index[k];
            let (Some(lf), Some(lw)) = (self.slots[f].as_mut(), whole.slots[i].as_ref()) else { continue };
            for d in 0..2 {
                lf.quality.copies[d].join(&lw.quality.copies[d]);
            }
            lf.quality.clock_steps_back += lw.quality.clock_steps_back;
            lf.quality.max_clock_step_back_ns = lf.quality.max_clock_step_back_ns.max(lw.quality.max_clock_step_back_ns);
            if let (Some(cf), Some(cw)) = (lf.conn.as_mut(), lw.conn.as_ref()) {
                cf.join(cw);
            }
        }
        self.segments += whole.segments;
        self.skipped.merge(&whole.skipped);
        self.duplicate_frames += whole.duplicate_frames;
        self.finished = std::mem::take(&mut whole.finished);
        self.ended_attempts = std::mem::take(&mut whole.ended_attempts);
        self.too_many_attempts = whole.too_many_attempts;
        self.attempt_stats = std::mem::take(&mut whole.attempt_stats);
        self.evicted_connections = whole.evicted_connections;
        self.split_mode = false;
    }

    /// Summaries of the connections held now, as they stand, without
    /// ending them (a live view: `tcpwhy watch`); `want` picks them by id.
    /// Connections on shard threads are not here (a live view has none).
    pub fn live_summaries(&self, mut want: impl FnMut(u64) -> bool) -> Vec<ConnectionSummary> {
        let mut out: Vec<ConnectionSummary> = self
            .slots
            .iter()
            .flatten()
            .filter_map(|live| {
                let c = live.conn.as_ref()?;
                want(c.id).then(|| {
                    let mut c = c.clone();
                    live.quality.clone().give(&mut c);
                    ConnectionSummary::from_connection(&c, self.series)
                })
            })
            .collect();
        out.sort_by_key(|c| c.id);
        out
    }

    /// The two hosts of each connection held now, each pair in the order
    /// of its addresses' text (as `ConnectionSummary` writes them, so a
    /// retired connection's pair compares with these).
    pub fn live_host_pairs(&self) -> std::collections::HashSet<(String, String)> {
        self.slots
            .iter()
            .flatten()
            .filter_map(|live| live.conn.as_ref())
            .map(|c| {
                let (a, b) = (c.endpoints[0].0.to_string(), c.endpoints[1].0.to_string());
                if a <= b { (a, b) } else { (b, a) }
            })
            .collect()
    }

    /// The summaries of connections retired since the last call (closed and
    /// silent, or evicted), handed over so that a table that runs for
    /// days (`tcpwhy watch`) does not keep them: memory stays bounded by
    /// the live connections. `finish` then returns only the rest.
    pub fn take_finished(&mut self) -> Vec<ConnectionSummary> {
        std::mem::take(&mut self.finished)
    }

    /// Connections currently held in memory.
    pub fn active_connections(&self) -> usize {
        self.index.len()
    }

    /// The attempts seen so far, as a whole.
    pub fn attempt_summary(&self) -> AttemptSummary {
        self.attempt_stats.summary(!self.too_many_attempts && !self.ended_attempts.is_empty())
    }

    /// Summaries of all connections, in the order they started, and of the
    /// attempts. Failed attempts are listed as connections (their segments
    /// fed to `sink` now) when there are at most `ATTEMPTS_LISTED_MAX`.
    pub fn finish(mut self, sink: &mut impl SegmentSink) -> (Vec<ConnectionSummary>, AttemptSummary) {
        let live: Vec<(Key, Attempt)> = self.attempts.drain().collect();
        for (k, a) in live {
            self.end_attempt(k, a);
        }
        let attempts = self.attempt_summary();
        for (k, a) in std::mem::take(&mut self.ended_attempts) {
            let held = a.segs[0].segment(&k);
            let (ca, cb) = client_server(&held);
            let mut live = Live::new(Connection::new(a.id, ca, cb, a.segs[0].time_ns, a.segs[0].frame));
            for h in &a.segs {
                feed(&mut live, usize::MAX, &mut self.duplicate_frames, None, None, &h.segment(&k), h.frame, h.time_ns, sink);
            }
            let mut conn = live.conn.take().expect("a local connection");
            self.finished.push(live.summary(&mut conn, self.series, false));
        }
        // Connections still live (none with shards: `crate::shard` retired
        // them to their shards before this).
        for live in std::mem::take(&mut self.slots).into_iter().flatten() {
            let mut live = live;
            let mut conn = live.conn.take().expect("a local connection");
            self.finished.push(live.summary(&mut conn, self.series, false));
        }
        self.finished.sort_by_key(|c| c.id);
        (self.finished, attempts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpwhy_wire::{TcpFlags, TcpOptions};

    fn syn_from(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> TcpSegment<'static> {
        TcpSegment {
            src: Addr::V4(src),
            dst: Addr::V4(dst),
            src_port: sport,
            dst_port: dport,
            seq: 1000 + sport as u32,
            ack: 0,
            flags: TcpFlags(TcpFlags::SYN),
            window: 64240,
            options: TcpOptions { mss: Some(1460), window_scale: Some(7), sack_permitted: true, ..TcpOptions::default() },
            payload_len: 0,
            payload: &[],
            captured: 0,
            length_from_frame: false,
            ip_id: Some(sport),
            checksum: 0,
            ttl: 64,
            dont_fragment: true,
        }
    }

    /// More connections at once than the cache of recent ones holds
    /// (`RECENT_WAYS`), interleaved segment by segment, a third of them
    /// reset and their ports reused (their slots taken by other tuples):
    /// every segment reaches its own connection.
    #[test]
    fn interleaved_connections_and_port_reuse_keep_their_segments() {
        let clients = 3 * RECENT_WAYS as u32;
        let server = [10, 0, 0, 2];
        let client = |c: u32| [10, 1, (c >> 8) as u8, c as u8];
        let port = |c: u32| 20_000 + (c % 7) as u16;
        let mut table = FlowTable::new();
        let mut frame = 0u64;
        let mut send = |table: &mut FlowTable, s: TcpSegment<'static>| {
            frame += 1;
            table.segment(&s, frame, frame as i64 * 1_000, &mut ());
        };
        let syn_ack = |c: u32, isn: u32| TcpSegment {
            flags: TcpFlags(TcpFlags::SYN | TcpFlags::ACK),
            seq: 77,
            ack: isn + 1,
            ..syn_from(server, 80, client(c), port(c))
        };
        let data = |c: u32, isn: u32, k: u32, len: u32| TcpSegment {
            flags: TcpFlags(TcpFlags::ACK),
            seq: isn + 1 + k * 1000,
            ack: 78,
            payload_len: len,
            options: TcpOptions::default(),
            ip_id: Some(k as u16 + 1),
            ..syn_from(client(c), port(c), server, 80)
        };
        for round in 0..2u32 {
            let isn = |c: u32| 1000 + port(c) as u32 + round * 50_000;
            // The second round: only every third client comes back.
            let active: Vec<u32> = (0..clients).filter(|c| round == 0 || c % 3 == 0).collect();
            for &c in &active {
                let syn = TcpSegment { seq: isn(c), ..syn_from(client(c), port(c), server, 80) };
                send(&mut table, syn);
                send(&mut table, syn_ack(c, isn(c)));
            }
            for k in 0..5 {
                for &c in &active {
                    send(&mut table, data(c, isn(c), k, 100 + c % 50 + round));
                }
            }
            if round == 0 {
                for c in (0..clients).filter(|c| c % 3 == 0) {
                    let rst = TcpSegment { flags: TcpFlags(TcpFlags::RST), seq: isn(c) + 5001, ..data(c, isn(c), 0, 0) };
                    send(&mut table, rst);
                }
            }
        }
        let (conns, _) = table.finish(&mut ());
        assert_eq!(conns.len() as u32, clients + clients / 3);
        for cs in &conns {
            let c = cs.a.addr.split('.').map(|o| o.parse::<u32>().unwrap()).collect::<Vec<_>>();
            let c = c[2] << 8 | c[3];
            // The first round took 7 frames a client and a RST a third.
            let second = cs.first_frame > (7 * clients + clients / 3) as u64;
            let d = &cs.directions[0].counts;
            assert_eq!((d.syn, d.data_packets), (1, 5), "client {c}, second round {second}");
            assert_eq!(d.unique_bytes, 5 * (100 + c % 50 + second as u32) as u64, "client {c}");
            assert_eq!(cs.directions[1].counts.syn, 1);
        }
    }

    /// A live view (`tcpwhy watch`): the summaries of connections as they
    /// stand are those `finish` gives for the same segments, and taking
    /// the retired ones leaves `finish` only the rest.
    #[test]
    fn live_summaries_are_what_finish_would_say() {
        let (c, s) = ([10, 0, 0, 1], [10, 0, 0, 2]);
        let mut table = FlowTable::new();
        let mut twin = FlowTable::new();
        let mut n = 0u64;
        let mut both = |seg: TcpSegment<'static>| {
            n += 1;
            table.segment(&seg, n, n as i64 * 1_000_000, &mut ());
            twin.segment(&seg, n, n as i64 * 1_000_000, &mut ());
        };
        let syn = syn_from(c, 40000, s, 80);
        let isn = syn.seq;
        both(syn);
        both(TcpSegment { flags: TcpFlags(TcpFlags::SYN | TcpFlags::ACK), seq: 500, ack: isn + 1, ..syn_from(s, 80, c, 40000) });
        for k in 0..20u32 {
            let data = TcpSegment {
                flags: TcpFlags(TcpFlags::ACK),
                seq: isn + 1 + k * 1000,
                ack: 501,
                payload_len: 1000,
                options: TcpOptions::default(),
                ip_id: Some(k as u16 + 10),
                ..syn_from(c, 40000, s, 80)
            };
            both(data);
            let ack = TcpSegment {
                flags: TcpFlags(TcpFlags::ACK),
                seq: 501,
                ack: isn + 1 + (k + 1) * 1000,
                options: TcpOptions::default(),
                ip_id: Some(k as u16 + 100),
                ..syn_from(s, 80, c, 40000)
            };
            both(ack);
        }
        let live = table.live_summaries(|_| true);
        assert!(table.take_finished().is_empty());
        assert!(table.live_summaries(|_| false).is_empty());
        let (done, _) = twin.finish(&mut ());
        assert_eq!(live.len(), 1);
        assert_eq!(format!("{:?}", live[0]), format!("{:?}", done[0]));
        assert_eq!(live[0].directions[0].counts.unique_bytes, 20_000);
    }

    /// A SYN flood: attempts that never carry data stay small, and are
    /// summarised rather than listed.
    #[test]
    fn half_open_connections_stay_small() {
        // 168: a held SYN keeps its signature (option layout, TTL, DF) for
        // the system fingerprint, 16 bytes over two held segments.
        assert!(
            std::mem::size_of::<(Key, Attempt)>() <= 168,
            "{}",
            std::mem::size_of::<(Key, Attempt)>()
        );
        let mut table = FlowTable::new();
        for i in 0..50_000u32 {
            let src = [10, (i >> 16) as u8, (i >> 8) as u8, i as u8];
            let syn = syn_from(src, 1024 + (i % 60_000) as u16, [10, 0, 0, 2], 80);
            // 100,000 SYNs per second.
            table.segment(&syn, i as u64 + 1, i as i64 * 10_000, &mut ());
        }
        assert_eq!(table.active_connections(), 0);
        assert_eq!(table.attempts.len(), 50_000);
        // Unanswered SYNs are over once silent for 180 s of capture time.
        table.now_ns = 200_000_000_000;
        table.retire_closed();
        assert_eq!(table.attempts.len(), 0);
        let (conns, att) = table.finish(&mut ());
        assert!(conns.is_empty());
        assert_eq!((att.attempts, att.failed, att.unanswered, att.became_connections), (50_000, 50_000, 50_000, 0));
        assert!(!att.listed);
        assert_eq!(att.kind, Some("syn_flood"), "{}", att.text);
        assert_eq!(att.peak_attempts_per_s, 50_000);
        assert_eq!(att.top_destinations[0].endpoint, "10.0.0.2:80");
        assert!((att.sources as f64 - 50_000.0).abs() < 2_500.0, "{}", att.sources);
    }

    /// Past `MAX_LIVE_ATTEMPTS` held at once, the oldest are ended: memory
    /// stays bounded however fast the SYNs come.
    #[test]
    fn attempts_held_at_once_are_bounded() {
        let mut table = FlowTable::new();
        let n = MAX_LIVE_ATTEMPTS as u32 * 3;
        for i in 0..n {
            let src = [11, (i >> 16) as u8, (i >> 8) as u8, i as u8];
            table.segment(&syn_from(src, 4000, [10, 0, 0, 2], 443), i as u64 + 1, i as i64 * 1_000, &mut ());
            assert!(table.attempts.len() <= MAX_LIVE_ATTEMPTS);
        }
        let (conns, att) = table.finish(&mut ());
        assert!(conns.is_empty());
        assert_eq!((att.attempts, att.unanswered), (n as u64, n as u64));
    }

    /// A port scan from one source: refused on most ports.
    #[test]
    fn a_port_scan_is_named() {
        let mut table = FlowTable::new();
        let mut frame = 0;
        for port in 1..=2000u16 {
            frame += 1;
            let syn = syn_from([192, 0, 2, 9], 50_000, [10, 0, 0, 2], port);
            table.segment(&syn, frame, frame as i64 * 100_000, &mut ());
            let mut rst = syn_from([10, 0, 0, 2], port, [192, 0, 2, 9], 50_000);
            rst.flags = TcpFlags(TcpFlags::RST | TcpFlags::ACK);
            rst.seq = 0;
            rst.ack = syn.seq + 1;
            rst.options = TcpOptions::default();
            frame += 1;
            table.segment(&rst, frame, frame as i64 * 100_000, &mut ());
        }
        let (conns, att) = table.finish(&mut ());
        assert!(conns.is_empty());
        assert_eq!((att.attempts, att.refused), (2000, 2000));
        assert_eq!(att.kind, Some("port_scan"), "{}", att.text);
        assert_eq!(att.top_sources[0].endpoint, "192.0.2.9");
    }

    /// A RST storm on random tuples (or the backscatter of someone else's
    /// flood): each RST is an attempt of its own, held compactly, and
    /// named as a whole.
    #[test]
    fn a_rst_storm_is_backscatter() {
        let mut table = FlowTable::new();
        for i in 0..20_000u32 {
            let mut rst = syn_from([100, (i >> 16) as u8, (i >> 8) as u8, i as u8], 80, [10, 0, 0, 2], 1024 + (i % 60_000) as u16);
            rst.flags = TcpFlags(TcpFlags::RST | TcpFlags::ACK);
            rst.options = TcpOptions::default();
            table.segment(&rst, i as u64 + 1, i as i64 * 100_000, &mut ());
        }
        assert_eq!(table.active_connections(), 0);
        let (conns, att) = table.finish(&mut ());
        assert!(conns.is_empty());
        assert_eq!((att.attempts, att.other, att.rst_segments), (20_000, 20_000, 20_000));
        assert_eq!(att.kind, Some("backscatter"), "{}", att.text);
    }

    /// One tuple reused at a high rate: each new ISN ends the attempt before
    /// it, so thousands of refused attempts on one tuple stay one entry.
    #[test]
    fn port_reuse_at_a_high_rate_stays_one_entry() {
        let mut table = FlowTable::new();
        let mut frame = 0;
        for i in 0..5_000u32 {
            let mut syn = syn_from([10, 1, 1, 1], 5555, [10, 0, 0, 2], 8080);
            syn.seq = i.wrapping_mul(2_654_435_761);
            frame += 1;
            table.segment(&syn, frame, frame as i64 * 10_000, &mut ());
            let mut rst = syn_from([10, 0, 0, 2], 8080, [10, 1, 1, 1], 5555);
            rst.flags = TcpFlags(TcpFlags::RST | TcpFlags::ACK);
            rst.seq = 0;
            rst.ack = syn.seq.wrapping_add(1);
            frame += 1;
            table.segment(&rst, frame, frame as i64 * 10_000, &mut ());
            assert!(table.attempts.len() <= 1);
        }
        let (conns, att) = table.finish(&mut ());
        assert!(conns.is_empty());
        assert_eq!((att.attempts, att.refused), (5_000, 5_000));
        assert_eq!(att.top_destinations[0].attempts, 5_000);
    }

    /// A few failed attempts are still listed as connections, exactly as
    /// when every tuple is a connection from its first segment; connections
    /// that complete are unchanged by passing through an attempt.
    #[test]
    fn held_attempts_give_the_same_connections() {
        let run = |hold: bool| {
            let mut t = FlowTable::new();
            t.hold_attempts = hold;
            let mut frame = 0;
            exchange(&mut t, &mut frame, 100, 5000);
            for i in 0..20u16 {
                frame += 1;
                t.segment(&syn_from([10, 9, 9, 9], 3000 + i, [10, 0, 0, 2], 22), frame, frame as i64 * 1_000_000, &mut ());
                // Half of them retransmitted once.
                if i % 2 == 0 {
                    frame += 1;
                    t.segment(&syn_from([10, 9, 9, 9], 3000 + i, [10, 0, 0, 2], 22), frame, frame as i64 * 1_000_000, &mut ());
                }
            }
            exchange(&mut t, &mut frame, 900_000, 3000);
            let (conns, att) = t.finish(&mut ());
            (serde_json::to_string(&conns).unwrap(), att)
        };
        let (held, att) = run(true);
        let (plain, _) = run(false);
        assert_eq!(held, plain);
        assert!(att.listed);
        assert_eq!((att.attempts, att.became_connections, att.unanswered), (22, 2, 20));
        assert_eq!(att.kind, None);
    }

    /// Past `max_connections` the least recently seen are summarised early.
    #[test]
    fn connections_past_the_limit_are_evicted() {
        let mut t = FlowTable::new();
        t.max_connections = 16;
        for i in 0..100u16 {
            let mut s = seg(true, 5, 9, ACK, 100);
            s.src_port = 1000 + i;
            t.segment(&s, i as u64 + 1, i as i64, &mut ());
        }
        assert!(t.active_connections() <= 16);
        let evicted = t.evicted_connections;
        let (conns, _) = t.finish(&mut ());
        assert_eq!(conns.len(), 100);
        assert_eq!(conns.iter().filter(|c| c.evicted).count() as u64, evicted);
        assert!(evicted >= 84);
        // The oldest went first.
        assert!(conns[..84].iter().all(|c| c.evicted));
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
            captured: 0,
            length_from_frame: false,
            ip_id: None,
            checksum: 0,
            ttl: 64,
            dont_fragment: true,
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
        let (conns, _) = t.finish(&mut ());
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
        let (conns, _) = t.finish(&mut ());
        assert_eq!(conns.len(), 1);
        assert_eq!(conns[0].directions[0].flags.retransmission, 1);
    }

    #[test]
    fn sequence_numbers_wrapping_past_2_to_the_32() {
        let mut t = FlowTable::new();
        let mut frame = 0;
        // ISN 100 KB below the wrap; 1 MB crosses it.
        exchange(&mut t, &mut frame, u32::MAX - 100_000, 1_000_000);
        let c = &t.finish(&mut ()).0[0];
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
