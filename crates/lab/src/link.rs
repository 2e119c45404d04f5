//! A userspace link emulator between two TUN devices (the role mahimahi's
//! mm-delay / mm-link play), because the lab kernels have no netem.
//!
//! Each end of the emulated link is a TUN device in its own network
//! namespace; one thread per direction reads IP packets from the ingress TUN,
//! passes them through the direction's pipeline and writes them to the egress
//! TUN when their time has come:
//!
//! ```text
//!  read ─► policer ─► loss (random / Gilbert-Elliott) ─► duplicate
//!       ─► bottleneck: drop-tail queue drained at `rate` (serialisation)
//!       ─► propagation delay + jitter (order kept) ─► reorder (hold back)
//!       ─► write at the release time
//! ```
//!
//! Timing: a packet's release time is computed once, on arrival, from the
//! link state (when the bottleneck will have sent it, plus the delay), so the
//! emulator never has to revisit the queue. The thread sleeps in `ppoll` with
//! nanosecond timeouts and a 1 ns timer slack, and spins for the last
//! [`SPIN_NS`] before a release, which keeps the write lateness (reported in
//! [`DirectionStats`]) in the tens of microseconds.

use serde::{Deserialize, Serialize};
use std::collections::{BinaryHeap, VecDeque};
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// How long before a release the thread stops sleeping and spins.
const SPIN_NS: u64 = 40000;
/// The nice value of the emulator's threads. At nice 0 they share two cores
/// equally with both TCP stacks, two tcpdumps, the sock_diag sampler and
/// the tcp_probe reader, and a wake-up waits behind them: on a 2-core AMD
/// EPYC VM (2026-11-27) the write lateness p99 of the lab's rwnd-rmem run
/// was 1.1-1.2 ms at nice 0 and 0.27-0.50 ms at -15 (three runs each),
/// new-conn-per-request 0.6-5.8 ms against 0.51-0.56 ms, and the 1 Gbit/s
/// bench link (bench/scenarios/link-1gbit.toml) carried 662-789 Mbit/s
/// against 863-873. -15 weighs 29,154 against nice 0's 1,024 (the kernel's
/// sched_prio_to_weight): the emulator runs when it is due, and being
/// still a fair-share thread, it cannot starve the stacks the way a
/// real-time priority did (tried: at 1 Gbit/s the spinning threads took
/// both cores).
const LINK_NICE: i32 = -15;
/// Read buffer: a GSO super-packet (64 KiB of payload plus headers) and the
/// virtio-net header in front of it.
const MAX_PACKET: usize = 131_072;
/// Length of `struct virtio_net_hdr` in front of every packet.
pub const VNET_HDR: usize = 10;
/// Memory the delay line may hold before arriving packets are dropped.
const MAX_HELD_BYTES: u64 = 512 << 20;
/// Packets read from the ingress device per pass before releasing due ones.
const READ_BATCH: usize = 64;

/// Gilbert-Elliott bursty loss (netem's `loss gemodel p r 1-h 1-k`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GilbertElliott {
    /// Probability of moving from the good to the bad state, per packet.
    pub p: f64,
    /// Probability of moving from the bad back to the good state, per packet.
    pub r: f64,
    /// Loss probability in the bad state (default 1).
    #[serde(default = "one")]
    pub loss_bad: f64,
    /// Loss probability in the good state (default 0).
    #[serde(default)]
    pub loss_good: f64,
}

fn one() -> f64 {
    1.0
}

/// A token-bucket policer: packets that find too few tokens are dropped.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Policer {
    /// Token rate in bits per second.
    pub rate_bps: u64,
    /// Bucket depth in bytes (the burst a flow can send at line rate).
    pub burst_bytes: u64,
}

/// One direction of the emulated link. All fields default to "no effect".
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DirectionConfig {
    /// One-way propagation delay in microseconds.
    #[serde(default)]
    pub delay_us: u64,
    /// One-way delay of the first `initial_packets` TCP packets instead of
    /// `delay_us` (a fast handshake in front of a slower path).
    #[serde(default)]
    pub initial_delay_us: Option<u64>,
    #[serde(default)]
    pub initial_packets: u64,
    /// Uniform jitter added to the delay, 0..=jitter_us microseconds. Packet
    /// order is kept (a packet never leaves before its predecessor); use
    /// `reorder` for reordering.
    #[serde(default)]
    pub jitter_us: u64,
    /// Random (Bernoulli) loss probability, 0..1.
    #[serde(default)]
    pub loss: f64,
    /// Bursty loss; applies in addition to `loss`.
    #[serde(default)]
    pub loss_ge: Option<GilbertElliott>,
    /// Probability that a packet is held back by `reorder_us` so that the
    /// packets behind it overtake it.
    #[serde(default)]
    pub reorder: f64,
    /// Extra hold-back of a reordered packet (default 1000 µs).
    #[serde(default = "default_reorder_us")]
    pub reorder_us: u64,
    /// Probability that a packet is delivered twice.
    #[serde(default)]
    pub duplicate: f64,
    /// Bottleneck rate in bits per second (0 = unlimited). Packets queue in
    /// front of it and are serialised at this rate, as on a real link.
    #[serde(default)]
    pub rate_bps: u64,
    /// Drop-tail queue in front of the bottleneck, in bytes (default: 100 ms
    /// at `rate_bps`, at least 64 KiB). Only used with `rate_bps`.
    #[serde(default)]
    pub queue_bytes: Option<u64>,
    /// Token-bucket policer, applied on arrival before the bottleneck.
    #[serde(default)]
    pub policer: Option<Policer>,
}

fn default_reorder_us() -> u64 {
    1000
}

impl DirectionConfig {
    /// Check ranges; the error names the offending field.
    pub fn validate(&self, name: &str) -> Result<(), crate::Error> {
        use crate::Error;
        let prob = |v: f64, f: &str| -> Result<(), Error> {
            if !(0.0..=1.0).contains(&v) || v.is_nan() {
                Err(Error::value(format!("{name}.{f}"), v, "a probability must be between 0 and 1"))
            } else {
                Ok(())
            }
        };
        prob(self.loss, "loss")?;
        prob(self.reorder, "reorder")?;
        prob(self.duplicate, "duplicate")?;
        if let Some(ge) = &self.loss_ge {
            prob(ge.p, "loss_ge.p")?;
            prob(ge.r, "loss_ge.r")?;
            prob(ge.loss_bad, "loss_ge.loss_bad")?;
            prob(ge.loss_good, "loss_ge.loss_good")?;
            if ge.r == 0.0 && ge.p > 0.0 {
                return Err(Error::value(format!("{name}.loss_ge.r"), 0, "the bad state would never end"));
            }
        }
        if self.delay_us > 10_000_000 || self.initial_delay_us.unwrap_or(0) > 10_000_000 || self.jitter_us > 10_000_000 || self.reorder_us > 10_000_000 {
            return Err(Error::field(name, "delays above 10 s are not supported"));
        }
        if self.rate_bps != 0 && self.rate_bps < 8_000 {
            return Err(Error::value(format!("{name}.rate_bps"), self.rate_bps, "below 8 kbit/s"));
        }
        if let Some(q) = self.queue_bytes {
            if self.rate_bps == 0 {
                return Err(Error::field(
                    format!("{name}.queue_bytes"),
                    "needs rate_bps (a queue only builds in front of a bottleneck)",
                ));
            }
            if q < 1500 {
                return Err(Error::value(format!("{name}.queue_bytes"), q, "must hold at least one 1500-byte packet"));
            }
        }
        if let Some(p) = &self.policer {
            if p.rate_bps < 8_000 {
                return Err(Error::value(format!("{name}.policer.rate_bps"), p.rate_bps, "below 8 kbit/s"));
            }
            if p.burst_bytes < 1500 {
                return Err(Error::value(
                    format!("{name}.policer.burst_bytes"),
                    p.burst_bytes,
                    "must hold at least one 1500-byte packet",
                ));
            }
        }
        Ok(())
    }

    fn effective_queue_bytes(&self) -> u64 {
        self.queue_bytes
            .unwrap_or_else(|| (self.rate_bps / 8 / 10).max(65_536))
    }
}

/// What happened in one direction (also the emulator's precision report).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DirectionStats {
    pub packets_in: u64,
    pub bytes_in: u64,
    pub packets_out: u64,
    pub bytes_out: u64,
    pub dropped_loss: u64,
    pub dropped_policer: u64,
    pub dropped_queue: u64,
    pub duplicated: u64,
    pub reordered: u64,
    /// Packets that could not be written (egress device gone or full).
    pub write_errors: u64,
    /// Largest bottleneck queue seen, in bytes.
    pub max_queue_bytes: u64,
    /// How late packets were written after their release time (µs).
    pub lateness_p50_us: f64,
    pub lateness_p99_us: f64,
    pub lateness_max_us: f64,
}

/// A packet waiting in the delay line.
struct Pending {
    release: u64,
    order: u64,
    buf: Vec<u8>,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        self.release == o.release && self.order == o.order
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    // BinaryHeap is a max-heap: reverse for earliest release first.
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (o.release, o.order).cmp(&(self.release, self.order))
    }
}

/// Lateness histogram: 1 µs buckets to 10 ms, then one overflow bucket.
struct Lateness {
    buckets: Vec<u64>,
    max_ns: u64,
    n: u64,
}

impl Lateness {
    fn new() -> Self {
        Lateness { buckets: vec![0; 10_001], max_ns: 0, n: 0 }
    }
    fn add(&mut self, ns: u64) {
        let b = ((ns / 1000) as usize).min(10_000);
        self.buckets[b] += 1;
        self.max_ns = self.max_ns.max(ns);
        self.n += 1;
    }
    fn quantile_us(&self, q: f64) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        let target = ((self.n as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= target {
                return i as f64 + 1.0; // upper edge of the bucket
            }
        }
        self.max_ns as f64 / 1000.0
    }
}

/// The per-direction pipeline state.
struct Pipeline {
    cfg: DirectionConfig,
    /// Split GSO super-packets into MTU-sized segments (any per-packet effect
    /// is configured); otherwise they travel whole, as after TSO/GRO.
    split: bool,
    rng: fastrand::Rng,
    ge_bad: bool,
    tokens: f64,
    tokens_at: u64,
    /// When the bottleneck finishes sending what it has accepted.
    link_free_at: u64,
    /// (departure time, bytes) of packets still in the bottleneck queue.
    queue: VecDeque<(u64, u32)>,
    queue_bytes: u64,
    queue_limit: u64,
    /// Release time of the last in-order packet (jitter keeps order).
    last_release: u64,
    order: u64,
    delay_line: BinaryHeap<Pending>,
    held_bytes: u64,
    /// TCP packets enqueued so far (for `initial_packets`).
    tcp_seen: u64,
    stats: DirectionStats,
    lateness: Lateness,
}

impl Pipeline {
    fn new(cfg: DirectionConfig, seed: u64) -> Self {
        let queue_limit = cfg.effective_queue_bytes();
        let tokens = cfg.policer.as_ref().map(|p| p.burst_bytes as f64).unwrap_or(0.0);
        let split = cfg.loss > 0.0
            || cfg.loss_ge.is_some()
            || cfg.reorder > 0.0
            || cfg.duplicate > 0.0
            || cfg.rate_bps > 0
            || cfg.policer.is_some();
        Pipeline {
            cfg,
            split,
            rng: fastrand::Rng::with_seed(seed),
            ge_bad: false,
            tokens,
            tokens_at: 0,
            link_free_at: 0,
            queue: VecDeque::new(),
            queue_bytes: 0,
            queue_limit,
            last_release: 0,
            order: 0,
            delay_line: BinaryHeap::new(),
            held_bytes: 0,
            tcp_seen: 0,
            stats: DirectionStats::default(),
            lateness: Lateness::new(),
        }
    }

    /// A packet (virtio-net header + IP packet) arrived at `now` (ns).
    fn arrive(&mut self, now: u64, pkt: Vec<u8>) {
        if self.split && pkt.len() > VNET_HDR && pkt[1] & 0x7f != 0 {
            match split_gso(&pkt) {
                Some(segs) => {
                    for s in segs {
                        self.admit(now, s);
                    }
                    return;
                }
                None => {} // not a TCP super-packet we can cut: keep whole
            }
        }
        self.admit(now, pkt);
    }

    /// One packet through policer, loss, duplication, bottleneck, delay.
    fn admit(&mut self, now: u64, pkt: Vec<u8>) {
        let len = (pkt.len() - VNET_HDR) as u64;
        self.stats.packets_in += 1;
        self.stats.bytes_in += len;

        if let Some(p) = &self.cfg.policer {
            if self.tokens_at == 0 {
                self.tokens_at = now;
            }
            let add = (now - self.tokens_at) as f64 * p.rate_bps as f64 / 8e9;
            self.tokens = (self.tokens + add).min(p.burst_bytes as f64);
            self.tokens_at = now;
            if self.tokens < len as f64 {
                self.stats.dropped_policer += 1;
                return;
            }
            self.tokens -= len as f64;
        }

        let mut lost = self.cfg.loss > 0.0 && self.rng.f64() < self.cfg.loss;
        if let Some(ge) = &self.cfg.loss_ge {
            // transition first, then lose with the new state's probability
            if self.ge_bad {
                if self.rng.f64() < ge.r {
                    self.ge_bad = false;
                }
            } else if self.rng.f64() < ge.p {
                self.ge_bad = true;
            }
            let pl = if self.ge_bad { ge.loss_bad } else { ge.loss_good };
            lost |= pl > 0.0 && self.rng.f64() < pl;
        }
        if lost {
            self.stats.dropped_loss += 1;
            return;
        }

        if self.cfg.duplicate > 0.0 && self.rng.f64() < self.cfg.duplicate {
            self.stats.duplicated += 1;
            self.enqueue(now, pkt.clone());
        }
        self.enqueue(now, pkt);
    }

    fn enqueue(&mut self, now: u64, pkt: Vec<u8>) {
        let len = (pkt.len() - VNET_HDR) as u64;
        if self.held_bytes + len > MAX_HELD_BYTES {
            self.stats.dropped_queue += 1;
            return;
        }
        let mut leave = now;
        if self.cfg.rate_bps > 0 {
            while let Some(&(dep, l)) = self.queue.front() {
                if dep > now {
                    break;
                }
                self.queue.pop_front();
                self.queue_bytes -= l as u64;
            }
            if self.queue_bytes + len > self.queue_limit {
                self.stats.dropped_queue += 1;
                return;
            }
            let tx_ns = len * 8 * 1_000_000_000 / self.cfg.rate_bps;
            let dep = self.link_free_at.max(now) + tx_ns;
            self.link_free_at = dep;
            self.queue.push_back((dep, len as u32));
            self.queue_bytes += len;
            self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(self.queue_bytes);
            leave = dep;
        }
        let jitter = if self.cfg.jitter_us > 0 {
            self.rng.u64(0..=self.cfg.jitter_us * 1000)
        } else {
            0
        };
        let is_tcp = match pkt.get(VNET_HDR).map(|b| b >> 4) {
            Some(4) => pkt.get(VNET_HDR + 9) == Some(&6),
            Some(6) => pkt.get(VNET_HDR + 6) == Some(&6),
            _ => false,
        };
        let delay_us = match self.cfg.initial_delay_us {
            Some(d) if is_tcp && self.tcp_seen < self.cfg.initial_packets => d,
            _ => self.cfg.delay_us,
        };
        if is_tcp {
            self.tcp_seen += 1;
        }
        let mut release = (leave + delay_us * 1000 + jitter).max(self.last_release);
        self.last_release = release;
        if self.cfg.reorder > 0.0 && self.rng.f64() < self.cfg.reorder {
            release += self.cfg.reorder_us * 1000;
            self.stats.reordered += 1;
        }
        self.order += 1;
        self.held_bytes += len;
        self.delay_line.push(Pending { release, order: self.order, buf: pkt });
    }

    fn next_release(&self) -> Option<u64> {
        self.delay_line.peek().map(|p| p.release)
    }

    fn pop_due(&mut self, now: u64) -> Option<Pending> {
        if self.next_release()? <= now {
            let p = self.delay_line.pop()?;
            self.held_bytes -= (p.buf.len() - VNET_HDR) as u64;
            Some(p)
        } else {
            None
        }
    }
}

fn fold(mut sum: u32) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

fn sum16(data: &[u8]) -> u32 {
    let mut s = 0u32;
    let mut it = data.chunks_exact(2);
    for c in &mut it {
        s += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    if let [b] = it.remainder() {
        s += (*b as u32) << 8;
    }
    s
}

/// Cut a TCP GSO super-packet (virtio-net header + IPv4/IPv6 + TCP) into
/// the segments the NIC would have sent: sequence numbers advanced, IPv4 ID
/// incremented, FIN/PSH only on the last and CWR only on the first segment,
/// lengths and the IPv4 header checksum rewritten. The TCP checksum is left
/// to the receiving kernel (CHECKSUM_PARTIAL via the virtio-net header, the
/// pseudo-header sum in place), as the original super-packet had it.
/// Returns `None` for anything else.
fn split_gso(pkt: &[u8]) -> Option<Vec<Vec<u8>>> {
    let gso_size = u16::from_le_bytes([pkt[4], pkt[5]]) as usize;
    let ip = &pkt[VNET_HDR..];
    if gso_size == 0 || ip.is_empty() {
        return None;
    }
    let (ip_hl, v4) = match ip[0] >> 4 {
        4 if ip.len() >= 20 && ip[9] == 6 => (((ip[0] & 0x0f) as usize) * 4, true),
        6 if ip.len() >= 40 && ip[6] == 6 => (40, false),
        _ => return None,
    };
    if ip.len() < ip_hl + 20 {
        return None;
    }
    let tcp_hl = ((ip[ip_hl + 12] >> 4) as usize) * 4;
    let hl = ip_hl + tcp_hl;
    if tcp_hl < 20 || ip.len() < hl {
        return None;
    }
    let payload = &ip[hl..];
    if payload.len() <= gso_size {
        return None;
    }
    let seq = u32::from_be_bytes(ip[ip_hl + 4..ip_hl + 8].try_into().unwrap());
    let id = u16::from_be_bytes([ip[4], ip[5]]);
    let flags = ip[ip_hl + 13];
    let n = payload.len().div_ceil(gso_size);
    let mut out = Vec::with_capacity(n);
    for (i, chunk) in payload.chunks(gso_size).enumerate() {
        let mut s = Vec::with_capacity(VNET_HDR + hl + chunk.len());
        // virtio-net header: NEEDS_CSUM, no GSO, csum at TCP offset 16
        s.extend_from_slice(&[1, 0, 0, 0, 0, 0]);
        s.extend_from_slice(&(ip_hl as u16).to_le_bytes());
        s.extend_from_slice(&16u16.to_le_bytes());
        s.extend_from_slice(&ip[..hl]);
        s.extend_from_slice(chunk);
        let h = &mut s[VNET_HDR..];
        let tcp_len = (tcp_hl + chunk.len()) as u16;
        if v4 {
            h[2..4].copy_from_slice(&(ip_hl as u16 + tcp_len).to_be_bytes());
            h[4..6].copy_from_slice(&id.wrapping_add(i as u16).to_be_bytes());
            h[10..12].copy_from_slice(&[0, 0]);
            let c = !fold(sum16(&h[..ip_hl]));
            h[10..12].copy_from_slice(&c.to_be_bytes());
        } else {
            h[4..6].copy_from_slice(&tcp_len.to_be_bytes());
        }
        let t = ip_hl;
        h[t + 4..t + 8].copy_from_slice(&seq.wrapping_add((i * gso_size) as u32).to_be_bytes());
        let mut f = flags;
        if i + 1 < n {
            f &= !(0x01 | 0x08); // FIN, PSH
        }
        if i > 0 {
            f &= !0x80; // CWR
        }
        h[t + 13] = f;
        // pseudo-header sum, not complemented (CHECKSUM_PARTIAL convention)
        let addrs = if v4 { &h[12..20] } else { &h[8..40] };
        let ph = sum16(addrs) + 6 + tcp_len as u32;
        h[t + 16..t + 18].copy_from_slice(&fold(ph).to_be_bytes());
        out.push(s);
    }
    Some(out)
}

/// Monotonic clock in nanoseconds.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Open a TUN device called `name` inside the network namespace at `netns`
/// (a file such as /run/netns/NAME). The device lives as long as the fd.
pub fn open_tun_in_netns(netns: &std::path::Path, name: &str, offload: bool) -> io::Result<OwnedFd> {
    let ns = File::open(netns)
        .map_err(|e| io::Error::new(e.kind(), format!("open {}: {e}", netns.display())))?;
    let name = name.to_string();
    std::thread::spawn(move || -> io::Result<OwnedFd> {
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("setns into the lab namespace: {e}")));
        }
        open_tun(&name, offload)
    })
    .join()
    .map_err(|_| io::Error::other("TUN opener thread panicked"))?
}

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;
const IFF_VNET_HDR: libc::c_int = 0x4000;

/// Open a TUN device (layer 3, virtio-net header in front of each packet)
/// in the calling thread's network namespace. With `offload` the device
/// takes checksum offload and TSO, so the stack hands it 64 KiB
/// super-packets as it would a NIC, and the emulator can inject GRO-sized
/// packets on the other side.
pub fn open_tun(name: &str, offload: bool) -> io::Result<OwnedFd> {
    let path = CString::new("/dev/net/tun").unwrap();
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("open /dev/net/tun: {e}")));
    }
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    #[repr(C)]
    struct IfReq {
        name: [u8; 16],
        flags: libc::c_short,
        _pad: [u8; 22],
    }
    if name.len() > 15 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("interface name {name:?} longer than 15 bytes")));
    }
    let mut req = IfReq { name: [0; 16], flags: (libc::IFF_TUN | libc::IFF_NO_PI | IFF_VNET_HDR) as libc::c_short, _pad: [0; 22] };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut req) } < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("TUNSETIFF {name}: {e}")));
    }
    let off = if offload { TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 } else { 0 };
    if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD as _, off as libc::c_ulong) } < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("TUNSETOFFLOAD {name}: {e}")));
    }
    Ok(fd)
}

/// A running emulator: two threads, one per direction.
pub struct LinkEmulator {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    stats: Arc<Mutex<[DirectionStats; 2]>>,
}

impl LinkEmulator {
    /// Start forwarding: packets read from `a` go through `a_to_b` and are
    /// written to `b`; packets read from `b` go through `b_to_a` to `a`.
    pub fn start(a: OwnedFd, b: OwnedFd, a_to_b: DirectionConfig, b_to_a: DirectionConfig, seed: u64) -> io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Mutex::new([DirectionStats::default(), DirectionStats::default()]));
        let a = Arc::new(a);
        let b = Arc::new(b);
        let mut threads = Vec::new();
        for (i, (src, dst, cfg)) in [(a.clone(), b.clone(), a_to_b), (b, a, b_to_a)].into_iter().enumerate() {
            let stop = stop.clone();
            let stats = stats.clone();
            let seed = seed.wrapping_add(i as u64 * 0x9e37_79b9_7f4a_7c15);
            threads.push(
                std::thread::Builder::new()
                    .name(format!("link-{}", if i == 0 { "ab" } else { "ba" }))
                    .spawn(move || {
                        let st = run_direction(src.as_raw_fd(), dst.as_raw_fd(), cfg, seed, &stop);
                        stats.lock().unwrap()[i] = st;
                    })?,
            );
        }
        Ok(LinkEmulator { stop, threads, stats })
    }

    /// Stop both threads and return the statistics (a→b, b→a).
    pub fn stop(mut self) -> [DirectionStats; 2] {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.stats.lock().unwrap().clone()
    }
}

impl Drop for LinkEmulator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn run_direction(src: RawFd, dst: RawFd, cfg: DirectionConfig, seed: u64, stop: &AtomicBool) -> DirectionStats {
    // Timer slack 1 ns: ppoll wakes when asked. (A real-time priority was
    // tried: it starves the two TCP stacks on a 2-core machine at 1 Gbit/s.)
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    // A larger scheduler weight (LINK_NICE): the thread wakes on time
    // though the two stacks, the captures and the samplers share its cores.
    // Best effort: without the privilege the thread runs at nice 0.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, LINK_NICE) };
    let mut p = Pipeline::new(cfg, seed);
    let mut scratch = vec![0u8; MAX_PACKET];
    while !stop.load(Ordering::Relaxed) {
        // 1. take in what has arrived
        let mut got = 0;
        while got < READ_BATCH {
            let n = unsafe { libc::read(src, scratch.as_mut_ptr() as *mut _, scratch.len()) };
            if n <= VNET_HDR as isize {
                break;
            }
            got += 1;
            p.arrive(now_ns(), scratch[..n as usize].to_vec());
        }
        // 2. release what is due
        let mut now = now_ns();
        while let Some(pk) = p.pop_due(now) {
            let w = unsafe { libc::write(dst, pk.buf.as_ptr() as *const _, pk.buf.len()) };
            if w < 0 {
                p.stats.write_errors += 1;
            } else {
                p.stats.packets_out += 1;
                p.stats.bytes_out += (pk.buf.len() - VNET_HDR) as u64;
            }
            now = now_ns();
            p.lateness.add(now.saturating_sub(pk.release));
        }
        if got == READ_BATCH {
            continue; // more may be waiting
        }
        // 3. wait for input or the next release
        let wait = match p.next_release() {
            Some(r) => r.saturating_sub(now_ns()),
            None => 50_000_000, // re-check `stop` every 50 ms
        };
        let mut pfd = libc::pollfd { fd: src, events: libc::POLLIN, revents: 0 };
        if wait <= SPIN_NS {
            // close to a release: spin, but keep taking input
            unsafe { libc::poll(&mut pfd, 1, 0) };
            continue;
        }
        let sleep = wait - SPIN_NS;
        let ts = libc::timespec { tv_sec: (sleep / 1_000_000_000) as _, tv_nsec: (sleep % 1_000_000_000) as _ };
        unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    }
    let mut st = p.stats.clone();
    st.lateness_p50_us = p.lateness.quantile_us(0.5);
    st.lateness_p99_us = p.lateness.quantile_us(0.99);
    st.lateness_max_us = p.lateness.max_ns as f64 / 1000.0;
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(len: usize) -> Vec<u8> {
        vec![0u8; len + VNET_HDR]
    }

    #[test]
    fn bottleneck_serialises_and_delays() {
        let cfg = DirectionConfig { delay_us: 10_000, rate_bps: 12_000_000, ..Default::default() };
        let mut p = Pipeline::new(cfg, 1);
        // three 1500-byte packets at t=1 s: 1 ms each at 12 Mbit/s
        for _ in 0..3 {
            p.arrive(1_000_000_000, pkt(1500));
        }
        let mut rel: Vec<u64> = std::iter::from_fn(|| p.delay_line.pop().map(|x| x.release)).collect();
        rel.sort();
        assert_eq!(rel, vec![1_011_000_000, 1_012_000_000, 1_013_000_000]);
    }

    #[test]
    fn drop_tail_queue() {
        let cfg = DirectionConfig { rate_bps: 12_000_000, queue_bytes: Some(4500), ..Default::default() };
        let mut p = Pipeline::new(cfg, 1);
        for _ in 0..5 {
            p.arrive(0, pkt(1500));
        }
        assert_eq!(p.stats.dropped_queue, 2);
        // 1 ms later one packet has left: room for one more
        p.arrive(1_000_000, pkt(1500));
        assert_eq!(p.stats.dropped_queue, 2);
        p.arrive(1_000_000, pkt(1500));
        assert_eq!(p.stats.dropped_queue, 3);
    }

    #[test]
    fn policer_passes_burst_then_rate() {
        // 8 Mbit/s = 1 byte/µs, burst 3000 bytes
        let cfg = DirectionConfig { policer: Some(Policer { rate_bps: 8_000_000, burst_bytes: 3000 }), ..Default::default() };
        let mut p = Pipeline::new(cfg, 1);
        // 100 back-to-back packets at t=1s, then one every 750 µs (2 Mbyte/s offered, 1 allowed)
        for _ in 0..100 {
            p.arrive(1_000_000_000, pkt(1500));
        }
        assert_eq!(p.stats.dropped_policer, 98);
        let mut t = 1_000_000_000u64;
        for _ in 0..1000 {
            t += 750_000;
            p.arrive(t, pkt(1500));
        }
        let passed = 1000 - (p.stats.dropped_policer - 98);
        // 750 ms at 1 byte/µs = 750,000 bytes = 500 packets (± the burst)
        assert!((498..=502).contains(&passed), "{passed}");
    }

    #[test]
    fn random_loss_rate() {
        let cfg = DirectionConfig { loss: 0.02, ..Default::default() };
        let mut p = Pipeline::new(cfg, 7);
        for i in 0..100_000 {
            p.arrive(i, pkt(100));
            p.delay_line.clear();
        }
        let l = p.stats.dropped_loss as f64 / 1e5;
        assert!((0.018..0.022).contains(&l), "{l}");
    }

    #[test]
    fn gilbert_elliott_is_bursty() {
        let cfg = DirectionConfig { loss_ge: Some(GilbertElliott { p: 0.01, r: 0.25, loss_bad: 1.0, loss_good: 0.0 }), ..Default::default() };
        let mut p = Pipeline::new(cfg, 3);
        let mut lost = Vec::new();
        for i in 0..200_000u64 {
            let before = p.stats.dropped_loss;
            p.arrive(i, pkt(100));
            p.delay_line.clear();
            lost.push(p.stats.dropped_loss > before);
        }
        // stationary bad share p/(p+r) = 0.0385; mean burst 1/r = 4
        let share = p.stats.dropped_loss as f64 / 200_000.0;
        assert!((0.032..0.045).contains(&share), "{share}");
        let bursts = lost.windows(2).filter(|w| !w[0] && w[1]).count() as f64;
        let mean_burst = p.stats.dropped_loss as f64 / bursts;
        assert!((3.4..4.6).contains(&mean_burst), "{mean_burst}");
    }

    #[test]
    fn jitter_keeps_order_and_reorder_breaks_it() {
        let cfg = DirectionConfig { delay_us: 1000, jitter_us: 500, ..Default::default() };
        let mut p = Pipeline::new(cfg, 5);
        for i in 0..1000u64 {
            p.arrive(i * 10_000, pkt(100));
        }
        let mut out: Vec<(u64, u64)> = std::iter::from_fn(|| p.delay_line.pop().map(|x| (x.release, x.order))).collect();
        assert!(out.windows(2).all(|w| w[0].1 < w[1].1), "jitter must keep order");
        let cfg = DirectionConfig { delay_us: 1000, reorder: 0.1, reorder_us: 100, ..Default::default() };
        let mut p = Pipeline::new(cfg, 5);
        for i in 0..1000u64 {
            p.arrive(i * 10_000, pkt(100));
        }
        out = std::iter::from_fn(|| p.delay_line.pop().map(|x| (x.release, x.order))).collect();
        let inversions = out.windows(2).filter(|w| w[0].1 > w[1].1).count() as u64;
        assert!(inversions > 0 && inversions <= p.stats.reordered, "{inversions} {}", p.stats.reordered);
    }

    #[test]
    fn validation_names_the_field() {
        let c = DirectionConfig { loss: 1.5, ..Default::default() };
        let e = c.validate("link.forward").unwrap_err();
        assert!(
            matches!(&e, crate::Error::Value { field, value: Some(v), .. } if field == "link.forward.loss" && v == "1.5"),
            "{e:?}"
        );
        assert_eq!(e.to_string(), "link.forward.loss = 1.5: a probability must be between 0 and 1");
        let c = DirectionConfig { queue_bytes: Some(10_000), ..Default::default() };
        let e = c.validate("x").unwrap_err();
        assert!(e.is_invalid_scenario());
        assert_eq!(e.to_string(), "x.queue_bytes: needs rate_bps (a queue only builds in front of a bottleneck)");
    }
}
