//! The `diagnose_flows` fuzz target's input and checks, shared with its
//! replay in `crates/report/tests/fuzz_flows.rs` (included there with
//! `#[path]`), so the two cannot drift apart.
//!
//! Random bytes almost never make a TCP connection long enough for the
//! detectors, so this target reads its bytes as a *script*: a 4-byte setup,
//! then 8 bytes per segment saying which side sends, its flags, how much
//! data, where its sequence number lies (next new byte, a retransmission, a
//! hole, a stale or a wild number), what it acknowledges (all, the same
//! again, half, past what was sent, an old number), its window, the time
//! since the previous frame (microseconds to hours, sometimes backwards),
//! its SACK block (above the ACK, or a D-SACK below it), ECN flags and
//! capture artifacts (the frame written twice, or not written). The setup
//! picks the handshake and its options (a side may leave out window
//! scaling), IPv4 or IPv6, one or two connections, the MSS and the snaplen.
//!
//! [`build`] turns the script into a classic pcap (Ethernet, IPv4 or IPv6,
//! the payload cut at the snaplen) and [`diagnose_flows_input`] runs it
//! through what `tcpwhy diagnose --json`, `tcpwhy latency`, `tcpwhy report`
//! and `tcpwhy stats --json --series` do: the flow table with the
//! diagnosis's recorder (small parts and record budgets chosen by the
//! setup, so parts and truncation are reached) beside the report's packet
//! log, every connection's diagnosis, the flow groups and their series, the
//! latency exchanges, the JSON, the HTML report and the stats JSON. It must
//! not panic, the time shares must be shares, and the diagnoses made with
//! the connections on a shard thread (`-j 2`) must be the same bytes.
// The fuzz target and the replay each use part of this module.
#![allow(dead_code)]

use std::io::Cursor;
use std::path::Path;
use tcpwhy_diagnose::latency::{connection_latency, latency_report};
use tcpwhy_diagnose::{diagnose_all, groups, Options, Recorder};
use tcpwhy_flow::{analyze_capture, analyze_capture_sharded, AnalyzeOptions, Tee};
use tcpwhy_report::{write_html, CaptureReport, HtmlOptions, PacketLog};
use tcpwhy_wire::CaptureReader;

/// Bytes of the setup before the segments.
pub const SETUP_BYTES: usize = 4;
/// Bytes per scripted segment.
pub const EVENT_BYTES: usize = 8;
/// Segments read from one input at most (inputs are capped by
/// `-max_len` when fuzzing; this bounds a replayed file too).
pub const MAX_EVENTS: usize = 50_000;

/// splitmix64: scripts from a seed.
pub fn seeded(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A script biased to a long in-order transfer (most events new data one
/// way and ACKs the other), so that the detectors and the parts are
/// reached, with the seed's noise in the rest.
pub fn bulk(seed: u64, events: usize) -> Vec<u8> {
    let mut s = seeded(seed, SETUP_BYTES + events * EVENT_BYTES);
    for e in s[SETUP_BYTES..].chunks_exact_mut(EVENT_BYTES) {
        if e[7] % 8 != 0 {
            let ack_only = e[7] & 8 != 0;
            e[0] = (e[0] & 0x80) | ack_only as u8; // data from side 0, ACKs from side 1
            e[1] = if ack_only { 0 } else { 3 };
            e[2] %= 160;
            e[3] %= 160;
            e[4] = e[4].max(64);
            e[6] &= 0x07;
            e[7] &= !3;
        }
    }
    s
}

/// One side of a scripted connection.
#[derive(Clone, Copy, Default)]
struct Side {
    isn: u32,
    /// Relative sequence number past the highest byte sent.
    nxt: u32,
    /// What this side acknowledged last (relative to the peer's ISN).
    acked: u32,
    tsval: u32,
    wscale: u8,
}

#[derive(Clone, Copy, Default)]
struct Conn {
    port: u16,
    sides: [Side; 2],
}

/// The setup's choices.
#[derive(Clone, Copy)]
struct Setup {
    handshake: bool,
    timestamps: bool,
    sack: bool,
    window_scale: bool,
    ipv6: bool,
    two_connections: bool,
    mss: u32,
    snaplen: usize,
}

/// A scripted capture: the pcap bytes and the recorder's part size and
/// record budget to diagnose it with.
pub struct Built {
    pub pcap: Vec<u8>,
    pub part_segments: usize,
    pub budget: usize,
    pub frames: usize,
}

const FIN: u16 = 0x01;
const SYN: u16 = 0x02;
const RST: u16 = 0x04;
const PSH: u16 = 0x08;
const ACK: u16 = 0x10;

/// The script in `data` as a pcap; None when it has no segment.
pub fn build(data: &[u8]) -> Option<Built> {
    let (head, script) = data.split_first_chunk::<SETUP_BYTES>()?;
    if script.len() < EVENT_BYTES {
        return None;
    }
    let [h0, h1, h2, h3] = *head;
    let setup = Setup {
        handshake: h0 & 1 != 0,
        timestamps: h0 & 2 != 0,
        sack: h0 & 4 != 0,
        window_scale: h0 & 8 != 0,
        ipv6: h0 & 16 != 0,
        two_connections: h0 & 32 != 0,
        mss: if h2 == 0 { 1448 } else { 536 + h2 as u32 * 4 },
        snaplen: [96, 128, 256, 65535][(h3 & 3) as usize],
    };
    let part_segments = [tcpwhy_diagnose::parts::PART_DATA_SEGMENTS, 64, 1024, 4096][(h0 >> 6) as usize];
    let budget = match h3 >> 2 {
        0 => tcpwhy_diagnose::record::DEFAULT_RECORD_BUDGET,
        n => n as usize * 512,
    };
    let mut conns = [Conn::default(); 2];
    for (i, c) in conns.iter_mut().enumerate() {
        c.port = 40000 + i as u16;
        c.sides[0] = Side { isn: 0x1000_0000u32.wrapping_mul(i as u32 + 1) ^ (h1 as u32) << 20, tsval: 1000, wscale: h1 & 15, ..Side::default() };
        c.sides[1] = Side { isn: 0xf000_0000u32.wrapping_sub(h2 as u32 * 7919), tsval: 5_000_000, wscale: h1 >> 4, ..Side::default() };
    }
    let mut out = Pcap::new(setup.snaplen);
    let mut t_us: u64 = 1_700_000_000_000_000;
    if setup.handshake {
        for c in conns.iter_mut().take(if setup.two_connections { 2 } else { 1 }) {
            for (d, flags) in [(0, SYN), (1, SYN | ACK), (0, ACK)] {
                let seg = Segment { d, flags, seq: 0, ack: c.sides[1 - d].nxt, len: 0, window: 65535, sack: None };
                out.frame(t_us, &setup, c, &seg, 1);
                if flags & SYN != 0 {
                    c.sides[d].nxt = 1;
                }
                t_us += 10_000;
            }
        }
    }
    for e in script.chunks_exact(EVENT_BYTES).take(MAX_EVENTS) {
        let ci = (setup.two_connections && e[0] & 0x80 != 0) as usize;
        let c = &mut conns[ci];
        let d = (e[0] & 1) as usize;
        let mut flags = [FIN, SYN, RST, PSH].iter().enumerate().fold(0, |f, (i, bit)| if e[0] >> (i + 1) & 1 != 0 { f | bit } else { f });
        if e[0] & 0x40 == 0 {
            flags |= ACK;
        }
        let mss = setup.mss;
        let len = match e[1] & 7 {
            0..=2 => 0,
            3..=5 => mss,
            6 => (e[1] >> 3) as u32 * 45,
            _ => mss * (2 + (e[1] >> 3) as u32 % 44),
        };
        let me = c.sides[d];
        let peer = c.sides[1 - d];
        let step = len.max(1);
        let seq = match e[2] {
            0..=159 => me.nxt,
            160..=207 => me.nxt.wrapping_sub(step * ((e[2] - 160) as u32 % 8 + 1)),
            208..=231 => me.nxt.wrapping_add(step * ((e[2] - 208) as u32 % 4 + 1)),
            232..=247 => me.nxt.wrapping_sub(1),
            _ => u32::from_le_bytes([e[3], e[4], e[5], e[2]]),
        };
        let ack = match e[3] {
            0..=159 => peer.nxt,
            160..=207 => me.acked,
            208..=231 => me.acked.wrapping_add(peer.nxt.wrapping_sub(me.acked) / 2),
            232..=247 => peer.nxt.wrapping_add((e[3] - 231) as u32 * mss),
            _ => me.acked.wrapping_sub(e[4] as u32 * mss),
        };
        let window = if e[4] == 255 { 65535 } else { e[4] as u16 * 257 };
        // Byte 7 bits 3 to 5: no SACK block (0), a D-SACK below the ACK
        // (RFC 2883; 7), or a block above it.
        let sack_kind = e[7] >> 3 & 7;
        let sack = (setup.sack && sack_kind != 0 && flags & ACK != 0).then(|| {
            if sack_kind == 7 {
                (ack.wrapping_sub(mss), ack)
            } else {
                let from = ack.wrapping_add(mss * (sack_kind as u32 & 3));
                (from, peer.nxt.min(from.wrapping_add(mss * (1 + (e[5] as u32 & 7)))))
            }
        });
        flags |= (e[7] as u16 >> 6 & 3) << 6; // ECE, CWR
        let delta = ((e[5] as u64) + 1) << (e[6] & 15);
        match e[6] >> 4 {
            15 => t_us = t_us.saturating_sub(delta),
            14 => t_us += delta << 12,
            _ => t_us += delta,
        }
        let seg = Segment { d, flags, seq, ack, len, window, sack };
        let copies = match e[7] & 3 {
            1 => 2,
            2 => 0,
            _ => 1,
        };
        out.frame(t_us, &setup, c, &seg, copies);
        let s = &mut c.sides[d];
        let end = seq.wrapping_add(len).wrapping_add((flags & (SYN | FIN) != 0) as u32);
        if (end.wrapping_sub(s.nxt) as i32) > 0 {
            s.nxt = end;
        }
        if flags & ACK != 0 {
            s.acked = ack;
        }
        if e[7] & 4 == 0 {
            s.tsval = s.tsval.wrapping_add((delta / 1000) as u32 + 1);
        }
    }
    let frames = out.frames;
    Some(Built { pcap: out.bytes, part_segments, budget, frames })
}

struct Segment {
    d: usize,
    flags: u16,
    seq: u32,
    ack: u32,
    len: u32,
    window: u16,
    sack: Option<(u32, u32)>,
}

/// A classic pcap (microseconds, little-endian, Ethernet) being written.
struct Pcap {
    bytes: Vec<u8>,
    snaplen: usize,
    frames: usize,
}

impl Pcap {
    fn new(snaplen: usize) -> Pcap {
        let mut bytes = Vec::new();
        for w in [0xa1b2_c3d4u32] {
            bytes.extend_from_slice(&w.to_le_bytes());
        }
        bytes.extend_from_slice(&2u16.to_le_bytes());
        bytes.extend_from_slice(&4u16.to_le_bytes());
        bytes.extend_from_slice(&0i32.to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&(snaplen as u32).to_le_bytes());
        bytes.extend_from_slice(&1u32.to_le_bytes());
        Pcap { bytes, snaplen, frames: 0 }
    }

    /// Writes `seg` of connection `c` `copies` times.
    fn frame(&mut self, t_us: u64, setup: &Setup, c: &Conn, seg: &Segment, copies: usize) {
        let (me, peer) = (&c.sides[seg.d], &c.sides[1 - seg.d]);
        let mut tcp = Vec::with_capacity(60);
        let (sport, dport) = if seg.d == 0 { (c.port, 443) } else { (443, c.port) };
        tcp.extend_from_slice(&sport.to_be_bytes());
        tcp.extend_from_slice(&dport.to_be_bytes());
        tcp.extend_from_slice(&me.isn.wrapping_add(seg.seq).to_be_bytes());
        let ack = if seg.flags & ACK != 0 { peer.isn.wrapping_add(seg.ack) } else { 0 };
        tcp.extend_from_slice(&ack.to_be_bytes());
        tcp.extend_from_slice(&[0, seg.flags as u8]);
        tcp.extend_from_slice(&seg.window.to_be_bytes());
        tcp.extend_from_slice(&[0, 0, 0, 0]);
        let mut opts = Vec::new();
        if seg.flags & SYN != 0 {
            opts.extend_from_slice(&[2, 4]);
            opts.extend_from_slice(&(setup.mss as u16).to_be_bytes());
            // Scale 15 in the setup: this side leaves the option out (a
            // middlebox that drops it from one SYN).
            if setup.window_scale && me.wscale != 15 {
                opts.extend_from_slice(&[1, 3, 3, me.wscale]);
            }
            if setup.sack {
                opts.extend_from_slice(&[1, 1, 4, 2]);
            }
        }
        if setup.timestamps {
            opts.extend_from_slice(&[1, 1, 8, 10]);
            opts.extend_from_slice(&me.tsval.to_be_bytes());
            opts.extend_from_slice(&peer.tsval.to_be_bytes());
        }
        if let Some((l, r)) = seg.sack {
            opts.extend_from_slice(&[1, 1, 5, 10]);
            opts.extend_from_slice(&peer.isn.wrapping_add(l).to_be_bytes());
            opts.extend_from_slice(&peer.isn.wrapping_add(r).to_be_bytes());
        }
        while opts.len() % 4 != 0 {
            opts.push(1);
        }
        opts.truncate(40);
        tcp[12] = ((20 + opts.len()) / 4 << 4) as u8;
        tcp.extend_from_slice(&opts);
        let l4 = tcp.len() + seg.len as usize;
        let mut frame = Vec::with_capacity(128);
        frame.extend_from_slice(&[2, 0, 0, 0, 0, seg.d as u8 + 1, 2, 0, 0, 0, 0, 2 - seg.d as u8]);
        let host = |d: usize, i: usize| if d == 0 { 10 + i as u8 } else { 1 };
        let ci = (c.port - 40000) as usize;
        if setup.ipv6 {
            frame.extend_from_slice(&0x86ddu16.to_be_bytes());
            frame.extend_from_slice(&[0x60, 0, 0, 0]);
            frame.extend_from_slice(&(l4.min(65535) as u16).to_be_bytes());
            frame.extend_from_slice(&[6, 64]);
            for d in [seg.d, 1 - seg.d] {
                frame.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, host(d, ci)]);
            }
        } else {
            frame.extend_from_slice(&0x0800u16.to_be_bytes());
            frame.extend_from_slice(&[0x45, 0]);
            frame.extend_from_slice(&((20 + l4).min(65535) as u16).to_be_bytes());
            frame.extend_from_slice(&(self.frames as u16).to_be_bytes());
            frame.extend_from_slice(&[0x40, 0, 64, 6, 0, 0]);
            for d in [seg.d, 1 - seg.d] {
                frame.extend_from_slice(&[10, 0, 0, host(d, ci)]);
            }
        }
        frame.extend_from_slice(&tcp);
        let orig_len = frame.len() + seg.len as usize;
        // The payload's bytes up to the snaplen: a request line, so that the
        // latency cut sees text.
        let body = b"GET / HTTP/1.1\r\nHost: fuzz\r\n\r\n";
        let mut i = 0;
        while frame.len() < orig_len.min(self.snaplen) {
            frame.push(body[i % body.len()]);
            i += 1;
        }
        for _ in 0..copies {
            self.bytes.extend_from_slice(&((t_us / 1_000_000) as u32).to_le_bytes());
            self.bytes.extend_from_slice(&((t_us % 1_000_000) as u32).to_le_bytes());
            self.bytes.extend_from_slice(&(frame.len() as u32).to_le_bytes());
            self.bytes.extend_from_slice(&(orig_len as u32).to_le_bytes());
            self.bytes.extend_from_slice(&frame);
            self.frames += 1;
        }
    }
}

/// Runs the script in `data` through the diagnosis (module docs). Returns
/// the number of directions diagnosed.
pub fn diagnose_flows_input(data: &[u8]) -> usize {
    let Some(built) = build(data) else {
        return 0;
    };
    diagnose_pcap(built.pcap, built.budget, built.part_segments, built.frames)
}

/// `pcap` (written by [`build`]) read and diagnosed, with the checks.
pub fn diagnose_pcap(pcap: Vec<u8>, budget: usize, part_segments: usize, frames: usize) -> usize {
    let read = |pcap: Vec<u8>| CaptureReader::from_reader(Path::new("fuzz-flows.pcap"), Box::new(Cursor::new(pcap))).expect("a pcap written by build()");
    let opts = Options::default();
    let analyze = AnalyzeOptions { series: true, ..AnalyzeOptions::default() };
    // As `-j 2` would: the connections' analysis on a shard thread. Its
    // diagnoses must be the one thread's, byte for byte.
    let mut sharded = Recorder::with_budget(budget).with_part_size(part_segments);
    let on_shard = analyze_capture_sharded(read(pcap.clone()), analyze, 1, &mut sharded, |_| {});
    let on_shard = serde_json::to_string(&diagnose_all(&on_shard, &sharded, &opts)).expect("the diagnoses as JSON");
    let mut rec = Recorder::with_budget(budget).with_part_size(part_segments);
    let mut log = PacketLog::new();
    let analysis = analyze_capture(read(pcap), analyze, &mut Tee(&mut rec, &mut log), |_| {});
    assert!(analysis.error.is_none(), "a pcap written by build() reads whole: {:?}", analysis.error);
    assert_eq!(analysis.frames as usize, frames);
    let diags = diagnose_all(&analysis, &rec, &opts);
    let mut directions = 0;
    for d in diags.iter().flat_map(|c| &c.directions) {
        directions += 1;
        let mut total = 0.0;
        for (limit, share) in &d.limits {
            assert!(share.is_finite() && (-1e-9..=1.0 + 1e-9).contains(share), "{limit:?} share {share}");
            total += share;
        }
        assert!(total <= 1.0 + 1e-6, "limit shares sum to {total}");
        assert!(d.duration_s.is_finite() && d.duration_s >= 0.0, "duration {}", d.duration_s);
        assert!(!d.summary.is_empty());
    }
    let groups: Vec<_> = groups::describe(&diags, &analysis.connections, rec.records())
        .into_iter()
        .map(|g| {
            let s = groups::series(&g, &analysis.connections, rec.records(), tcpwhy_report::flowgroups::BINS);
            (g, s)
        })
        .collect();
    let latency: Vec<_> = analysis.connections.iter().filter_map(|cs| rec.get(cs.id).and_then(|r| connection_latency(cs, r))).collect();
    let latency = latency_report(latency);
    let json = serde_json::to_string(&diags).expect("the diagnoses as JSON");
    assert!(json == on_shard, "the diagnoses differ on a shard thread");
    serde_json::to_string(&latency).expect("the latency report as JSON");
    let payloads = Default::default();
    let report = CaptureReport { analysis: &analysis, diagnoses: &diags, packets: &log, payloads: &payloads, latency: Some(&latency), groups: &groups };
    write_html(&mut std::io::sink(), "fuzz", &[report], &HtmlOptions::default()).expect("the report written");
    // And `tcpwhy stats --json --series` of the same capture.
    let files = [analysis];
    serde_json::to_string(&tcpwhy_report::stats_json(&files, &[])).expect("the stats as JSON");
    directions
}
