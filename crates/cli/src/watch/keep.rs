//! The flight recorder (`watch --keep DIR --when CAUSE,...`): the last
//! packets of each connection in a bounded ring; when a connection's
//! verdict turns into one of the causes, its packets are written to a pcap
//! file (`tcpwhy diagnose` and Wireshark open it) with a JSON sidecar that
//! holds the verdict.
//!
//! Bounds, each a flag (docs/watch.md):
//! - per connection: the last `--keep-seconds` of capture time and at most
//!   `--keep-mb`; its handshake (SYN, SYN-ACK) is pinned outside both, so
//!   that the file still tells the window scale and MSS;
//! - all connections: `--keep-memory` MiB; past it a connection's ring is
//!   trimmed to its fair share (the memory over the connections held);
//! - frames not yet given to a connection (the table holds a handshake as
//!   a compact attempt until data flows): the last `PENDING_FRAMES`;
//! - the directory: `--keep-disk` MiB of tcpwhy's own files, the oldest
//!   deleted first.
//!
//! A write that fails (a full disk) stops the recording with a warning;
//! the watch goes on.

use foldhash::HashMap;
use serde_json::json;
use std::collections::VecDeque;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use tcpwhy_core::Cause;
use tcpwhy_wire::{Frame, LinkType, PcapWriter};

/// Frames held while the table keeps their tuple as an attempt (a SYN not
/// yet answered, or answered and not yet carrying data): when the tuple
/// becomes a connection they join its ring. Bounded by count, so a SYN
/// flood only churns it: 4,096 frames of at most the snaplen (256 bytes by
/// default) are about 1.2 MiB.
pub const PENDING_FRAMES: usize = 4096;

/// Handshake frames pinned per connection (SYN, SYN-ACK and their
/// retransmissions).
const PINNED_MAX: usize = 4;

/// The file names tcpwhy writes in the directory start with this.
const FILE_PREFIX: &str = "tcpwhy-";

#[derive(Debug, Clone)]
pub struct KeepOptions {
    pub dir: PathBuf,
    /// The capture's snaplen, written in the files' headers.
    pub snaplen: u32,
    pub when: Vec<Cause>,
    pub seconds: f64,
    pub conn_bytes: usize,
    pub memory_bytes: usize,
    pub disk_bytes: u64,
}

struct Packet {
    time_ns: i64,
    orig_len: u32,
    data: Box<[u8]>,
}

impl Packet {
    fn of(f: &Frame<'_>) -> Packet {
        Packet { time_ns: f.time_ns, orig_len: f.orig_len, data: f.data.into() }
    }
    fn cost(&self) -> usize {
        self.data.len() + std::mem::size_of::<Packet>()
    }
}

#[derive(Default)]
struct Ring {
    pinned: Vec<Packet>,
    packets: VecDeque<Packet>,
    bytes: usize,
    /// Packets dropped from the front (older than the ring holds).
    dropped: u64,
    /// Causes already written for this connection.
    written: Vec<Cause>,
}

pub struct Keep {
    opt: KeepOptions,
    link: LinkType,
    rings: HashMap<u64, Ring>,
    pending: VecDeque<(u64, Packet)>,
    total: usize,
    pub files_written: u64,
    /// Set when a write failed: recording stopped.
    pub stopped: Option<String>,
}

impl Keep {
    pub fn new(opt: KeepOptions, link: LinkType) -> Result<Keep, String> {
        std::fs::create_dir_all(&opt.dir).map_err(|e| format!("--keep {}: {e}", opt.dir.display()))?;
        Ok(Keep { opt, link, rings: HashMap::default(), pending: VecDeque::new(), total: 0, files_written: 0, stopped: None })
    }

    /// One frame read: `owner` is the connection the table gave it to
    /// (None: a frame of an attempt, or not TCP); `handshake`: it carried a
    /// SYN; `adopted`: earlier frames (by number) that the table has just
    /// given to a connection.
    pub fn frame(&mut self, f: &Frame<'_>, owner: Option<u64>, handshake: bool, adopted: &[(u64, u64)]) {
        if self.stopped.is_some() {
            return;
        }
        for &(conn, number) in adopted {
            if let Some(i) = self.pending.iter().position(|(n, _)| *n == number) {
                let (_, p) = self.pending.remove(i).expect("position found");
                self.total -= p.cost();
                self.push(conn, p, true);
            }
        }
        let p = Packet::of(f);
        match owner {
            Some(conn) => self.push(conn, p, handshake),
            None => {
                // Only what could still become a connection's: TCP frames.
                self.total += p.cost();
                self.pending.push_back((f.number, p));
                if self.pending.len() > PENDING_FRAMES {
                    if let Some((_, old)) = self.pending.pop_front() {
                        self.total -= old.cost();
                    }
                }
            }
        }
    }

    fn push(&mut self, conn: u64, p: Packet, handshake: bool) {
        let live = self.rings.len().max(1);
        let fair = self.opt.memory_bytes / live;
        let cost = p.cost();
        let now = p.time_ns;
        let ring = self.rings.entry(conn).or_default();
        if handshake && ring.pinned.len() < PINNED_MAX {
            ring.pinned.push(p);
            self.total += cost;
            return;
        }
        ring.packets.push_back(p);
        ring.bytes += cost;
        self.total += cost;
        let horizon = now - (self.opt.seconds * 1e9) as i64;
        let over_total = self.total > self.opt.memory_bytes;
        while let Some(front) = ring.packets.front() {
            let too_old = front.time_ns < horizon;
            let too_big = ring.bytes > self.opt.conn_bytes || (over_total && ring.bytes > fair);
            if !(too_old || too_big) || ring.packets.len() == 1 {
                break;
            }
            let old = ring.packets.pop_front().expect("front");
            ring.bytes -= old.cost();
            self.total -= old.cost();
            ring.dropped += 1;
        }
    }

    /// The connection was retired: its ring goes.
    pub fn forget(&mut self, conn: u64) {
        if let Some(r) = self.rings.remove(&conn) {
            self.total -= r.bytes + r.pinned.iter().map(Packet::cost).sum::<usize>();
        }
    }

    pub fn memory(&self) -> usize {
        self.total
    }

    /// The verdict of `conn` turned into `cause`: writes its packets and
    /// the sidecar when `cause` is one of `--when` (once per connection and
    /// cause). The files written, or None.
    pub fn verdict(&mut self, conn: u64, cause: Cause, sidecar: serde_json::Value) -> Option<PathBuf> {
        if self.stopped.is_some() || !self.opt.when.contains(&cause) {
            return None;
        }
        let ring = self.rings.get_mut(&conn)?;
        if ring.written.contains(&cause) {
            return None;
        }
        ring.written.push(cause);
        let mut packets: Vec<&Packet> = ring.pinned.iter().chain(ring.packets.iter()).collect();
        packets.sort_by_key(|p| p.time_ns);
        let size: u64 = 24 + packets.iter().map(|p| 16 + p.data.len() as u64).sum::<u64>();
        let first = packets.first().map_or(0, |p| p.time_ns);
        let stem = format!("{FILE_PREFIX}{}-conn{conn}-{cause}", first / 1_000_000_000);
        let pcap = self.opt.dir.join(format!("{stem}.pcap"));
        let side = self.opt.dir.join(format!("{stem}.json"));
        let dropped = ring.dropped;
        let n = packets.len();
        let r = make_room(&self.opt.dir, self.opt.disk_bytes, size + 4096)
            .and_then(|_| write_pcap(&pcap, self.link, self.opt.snaplen, &packets))
            .and_then(|_| {
                let mut doc = sidecar;
                if let Some(m) = doc.as_object_mut() {
                    m.insert("pcap".into(), json!(pcap.file_name().map(|f| f.to_string_lossy().into_owned())));
                    m.insert("packets".into(), json!(n));
                    m.insert("packets_dropped_before".into(), json!(dropped));
                    m.insert("keep_seconds".into(), json!(self.opt.seconds));
                }
                let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
                std::fs::write(&side, text + "\n").map_err(|e| format!("{}: {e}", side.display()))
            });
        match r {
            Ok(()) => {
                self.files_written += 1;
                Some(pcap)
            }
            Err(e) => {
                let _ = std::fs::remove_file(&pcap);
                let _ = std::fs::remove_file(&side);
                self.stopped = Some(e);
                self.rings.clear();
                self.pending.clear();
                self.total = 0;
                None
            }
        }
    }
}

/// Writes `packets` as a pcap file (tcpwhy_wire's writer: no libpcap),
/// buffered; a full disk shows in a write, in the last flush, or in the
/// size of what reached the file.
fn write_pcap(path: &Path, link: LinkType, snaplen: u32, packets: &[&Packet]) -> Result<(), String> {
    let err = |e: std::io::Error| format!("{}: {e}", path.display());
    let file = std::fs::File::create(path).map_err(err)?;
    let mut out = PcapWriter::new(BufWriter::new(file), link, snaplen).map_err(err)?;
    for p in packets {
        out.write_packet(p.time_ns, p.orig_len, &p.data).map_err(err)?;
    }
    let want = out.written();
    let file = out.into_inner().into_inner().map_err(|e| err(e.into_error()))?;
    let got = file.metadata().map_err(err)?.len();
    if got != want {
        return Err(format!("{}: wrote {got} of {want} bytes (disk full?)", path.display()));
    }
    Ok(())
}

/// Deletes tcpwhy's oldest files in `dir` until `need` more bytes fit
/// under `limit`.
fn make_room(dir: &Path, limit: u64, need: u64) -> Result<(), String> {
    let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files: Vec<(std::time::SystemTime, String, u64, PathBuf)> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let ours = name.starts_with(FILE_PREFIX) && (name.ends_with(".pcap") || name.ends_with(".json"));
            let m = e.metadata().ok()?;
            ours.then(|| (m.modified().unwrap_or(std::time::UNIX_EPOCH), name, m.len(), e.path()))
        })
        .collect();
    files.sort();
    let mut used: u64 = files.iter().map(|f| f.2).sum();
    for (_, _, len, path) in &files {
        if used + need <= limit {
            break;
        }
        if std::fs::remove_file(path).is_ok() {
            used -= len;
        }
    }
    if used + need > limit {
        return Err(format!("--keep-disk {} MiB cannot hold a file of {} KiB", limit >> 20, need >> 10));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(dir: &Path) -> KeepOptions {
        KeepOptions {
            dir: dir.to_path_buf(),
            snaplen: 256,
            when: vec![Cause::Policer],
            seconds: 2.0,
            conn_bytes: 64 * 1024,
            memory_bytes: 1 << 20,
            disk_bytes: 1 << 20,
        }
    }

    fn frame(number: u64, t_ms: i64, data: &[u8]) -> Frame<'_> {
        Frame { number, time_ns: t_ms * 1_000_000, link: LinkType::Raw, interface: 0, data, orig_len: data.len() as u32 }
    }

    #[test]
    fn a_ring_keeps_the_last_seconds_and_bytes_and_pins_the_handshake() {
        let dir = tempfile::tempdir().unwrap();
        let mut k = Keep::new(opts(dir.path()), LinkType::Raw).unwrap();
        let payload = [0u8; 1000];
        k.frame(&frame(1, 0, &payload[..60]), Some(7), true, &[]);
        for i in 0..10_000u64 {
            k.frame(&frame(i + 2, i as i64, &payload), Some(7), false, &[]);
        }
        let r = &k.rings[&7];
        assert_eq!(r.pinned.len(), 1, "the SYN stays");
        assert!(r.bytes <= 64 * 1024, "{}", r.bytes);
        let oldest = r.packets.front().unwrap().time_ns;
        assert!(oldest >= (10_000 - 2_000) * 1_000_000, "{oldest}");
        assert!(r.dropped > 9_000);
        // The total is the sum of what is held.
        let held: usize = r.bytes + r.pinned.iter().map(Packet::cost).sum::<usize>();
        assert_eq!(k.memory(), held);
        k.forget(7);
        assert_eq!(k.memory(), 0);
    }

    #[test]
    fn frames_of_an_attempt_join_the_connection_it_becomes_and_the_pending_list_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let mut k = Keep::new(opts(dir.path()), LinkType::Raw).unwrap();
        let syn = [1u8; 60];
        k.frame(&frame(1, 0, &syn), None, false, &[]);
        k.frame(&frame(2, 1, &syn), Some(3), false, &[(3, 1)]);
        assert_eq!(k.rings[&3].pinned.len(), 1);
        assert_eq!(k.rings[&3].packets.len(), 1);
        for i in 0..(PENDING_FRAMES as u64 * 3) {
            k.frame(&frame(10 + i, 2, &syn), None, false, &[]);
        }
        assert_eq!(k.pending.len(), PENDING_FRAMES);
    }

    #[test]
    fn the_memory_bound_trims_a_connection_to_its_share() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = opts(dir.path());
        o.memory_bytes = 256 * 1024;
        o.conn_bytes = 1 << 20;
        o.seconds = 1e6;
        let mut k = Keep::new(o, LinkType::Raw).unwrap();
        let payload = [0u8; 1000];
        for i in 0..4000u64 {
            k.frame(&frame(i + 1, i as i64, &payload), Some(i % 4), false, &[]);
        }
        assert!(k.memory() <= 256 * 1024 + 4 * 1100, "{}", k.memory());
        for c in 0..4 {
            assert!(k.rings[&c].bytes > 40 * 1024, "connection {c} keeps its share: {}", k.rings[&c].bytes);
        }
    }

    #[test]
    fn a_verdict_writes_a_pcap_tcpwhy_reads_and_the_disk_bound_deletes_the_oldest() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = opts(dir.path());
        o.disk_bytes = 40 * 1024;
        let mut k = Keep::new(o, LinkType::Raw).unwrap();
        // An IPv4 header with nothing after it: a frame the reader counts.
        let mut ip = [0u8; 40];
        ip[0] = 0x45;
        ip[3] = 40;
        ip[9] = 6;
        for c in 0..3u64 {
            for i in 0..400u64 {
                k.frame(&frame(c * 1000 + i + 1, (c * 1000 + i) as i64, &ip), Some(c), false, &[]);
            }
        }
        assert!(k.verdict(0, Cause::ReceiverWindow, json!({})).is_none(), "not a --when cause");
        let first = k.verdict(0, Cause::Policer, json!({"x": 1}));
        let first = first.unwrap_or_else(|| panic!("{:?}", k.stopped));
        assert!(k.verdict(0, Cause::Policer, json!({})).is_none(), "once per connection and cause");
        let reader = tcpwhy_wire::CaptureReader::open(&first).unwrap();
        let mut times = Vec::new();
        let s = reader.for_each_frame(|f| {
            assert_eq!((f.data.len(), f.orig_len, f.link), (40, 40, LinkType::Raw));
            times.push(f.time_ns);
        });
        assert!(s.error.is_none());
        let n = times.len();
        assert!(n > 100 && n <= 400, "{n}");
        // The last n frames of connection 0, one a millisecond, to the nanosecond.
        let want: Vec<i64> = (400 - n as i64..400).map(|ms| ms * 1_000_000).collect();
        assert_eq!(times, want);
        let side: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(first.with_extension("json")).unwrap()).unwrap();
        assert_eq!(side["packets"], n);
        assert_eq!(side["x"], 1);
        // Each file is about 22 KiB: the third verdict removes the first's files.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let second = k.verdict(1, Cause::Policer, json!({})).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let third = k.verdict(2, Cause::Policer, json!({})).unwrap();
        assert!(!first.exists() && !second.exists() && third.exists());
        assert_eq!(k.files_written, 3);
    }

    #[test]
    fn a_failed_write_stops_the_recording_not_the_watch() {
        let dir = tempfile::tempdir().unwrap();
        let mut k = Keep::new(opts(dir.path()), LinkType::Raw).unwrap();
        k.frame(&frame(1, 0, &[0x45; 40]), Some(1), false, &[]);
        // The directory went away (as a full or unmounted disk would fail).
        drop(dir);
        assert!(k.verdict(1, Cause::Policer, json!({})).is_none());
        assert!(k.stopped.is_some());
        k.frame(&frame(2, 1, &[0x45; 40]), Some(1), false, &[]);
        assert_eq!(k.memory(), 0);
    }
}
