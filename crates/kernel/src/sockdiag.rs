//! TCP socket sampling through NETLINK_SOCK_DIAG / inet_diag.
//!
//! Why this is written on `libc` instead of `netlink-packet-sock-diag` +
//! `netlink-sys`: that crate's `TcpInfo` is a fixed 232-byte buffer
//! (`TCP_INFO_LEN = 232`, parsed with `new_checked`), so it rejects the
//! shorter struct of older kernels and silently drops everything after
//! `tcpi_snd_wnd` (rcv_wnd, rehash, total_rto*, the 6.18 AccECN counters);
//! it does not decode `INET_DIAG_BBRINFO` / `DCTCPINFO` (they come back as
//! opaque `Other` attributes); and it builds a `Vec` of attribute enums plus a
//! `String` per socket. `tcpwhy live` samples 10k sockets every 100 ms, so
//! here each datagram is parsed in place from one reusable receive buffer, the
//! only per-socket value built is the [`SocketSample`] itself (the congestion
//! control name is an inline [`CongName`], not a `String`), and port filters
//! are compiled to inet_diag bytecode so the kernel skips other sockets.
//!
//! Wire layouts follow include/uapi/linux/{netlink,sock_diag,inet_diag}.h.

use std::io;
use std::mem;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::netns;
use crate::tcp_info::TcpInfo;

// --- netlink / sock_diag constants ------------------------------------------

const NLMSG_HDRLEN: usize = 16;
const NLMSG_NOOP: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLMSG_OVERRUN: u16 = 4;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const SOCK_DIAG_BY_FAMILY: u16 = 20;

const INET_DIAG_MSG_LEN: usize = 72;
const INET_DIAG_REQ_V2_LEN: usize = 56;
const INET_DIAG_REQ_BYTECODE: u16 = 1;

const INET_DIAG_MEMINFO: u16 = 1;
const INET_DIAG_INFO: u16 = 2;
const INET_DIAG_VEGASINFO: u16 = 3;
const INET_DIAG_CONG: u16 = 4;
const INET_DIAG_TOS: u16 = 5;
const INET_DIAG_TCLASS: u16 = 6;
const INET_DIAG_SKMEMINFO: u16 = 7;
const INET_DIAG_SHUTDOWN: u16 = 8;
const INET_DIAG_DCTCPINFO: u16 = 9;
const INET_DIAG_MARK: u16 = 15;
const INET_DIAG_BBRINFO: u16 = 16;
const NLA_TYPE_MASK: u16 = 0x3fff;

const INET_DIAG_BC_S_EQ: u8 = 11;
const INET_DIAG_BC_D_EQ: u8 = 12;

/// Extension request bits for [`Filter::extensions`] (`1 << (attr - 1)`).
pub mod ext {
    /// INET_DIAG_MEMINFO (legacy 4-counter memory info).
    pub const MEMINFO: u8 = 1 << (super::INET_DIAG_MEMINFO - 1);
    /// INET_DIAG_INFO: struct tcp_info.
    pub const INFO: u8 = 1 << (super::INET_DIAG_INFO - 1);
    /// INET_DIAG_VEGASINFO: also makes DCTCP and BBR report their info.
    pub const VEGASINFO: u8 = 1 << (super::INET_DIAG_VEGASINFO - 1);
    /// INET_DIAG_CONG: congestion control name.
    pub const CONG: u8 = 1 << (super::INET_DIAG_CONG - 1);
    /// INET_DIAG_TOS.
    pub const TOS: u8 = 1 << (super::INET_DIAG_TOS - 1);
    /// INET_DIAG_TCLASS.
    pub const TCLASS: u8 = 1 << (super::INET_DIAG_TCLASS - 1);
    /// INET_DIAG_SKMEMINFO: sk_meminfo counters.
    pub const SKMEMINFO: u8 = 1 << (super::INET_DIAG_SKMEMINFO - 1);
    /// INET_DIAG_SHUTDOWN.
    pub const SHUTDOWN: u8 = 1 << (super::INET_DIAG_SHUTDOWN - 1);
    /// What [`super::Filter::default`] asks for.
    pub const DEFAULT: u8 = INFO | CONG | SKMEMINFO | VEGASINFO | SHUTDOWN;
}

/// TCP state numbers (`idiag_state`, `tcpi_state`).
pub mod state {
    pub const ESTABLISHED: u8 = 1;
    pub const SYN_SENT: u8 = 2;
    pub const SYN_RECV: u8 = 3;
    pub const FIN_WAIT1: u8 = 4;
    pub const FIN_WAIT2: u8 = 5;
    pub const TIME_WAIT: u8 = 6;
    pub const CLOSE: u8 = 7;
    pub const CLOSE_WAIT: u8 = 8;
    pub const LAST_ACK: u8 = 9;
    pub const LISTEN: u8 = 10;
    pub const CLOSING: u8 = 11;
    pub const NEW_SYN_RECV: u8 = 12;
    pub const BOUND_INACTIVE: u8 = 13;

    /// Bit mask for `idiag_states` from a list of states.
    pub const fn mask(states: &[u8]) -> u32 {
        let mut m = 0u32;
        let mut i = 0;
        while i < states.len() {
            m |= 1 << states[i];
            i += 1;
        }
        m
    }

    /// Every state.
    pub const ALL: u32 = 0xffff_fffe;
    /// Connection-carrying states: everything except LISTEN, TIME_WAIT,
    /// NEW_SYN_RECV (request minisockets) and BOUND_INACTIVE, none of which
    /// have a `tcp_info` worth sampling.
    pub const DEFAULT: u32 = mask(&[
        ESTABLISHED,
        SYN_SENT,
        SYN_RECV,
        FIN_WAIT1,
        FIN_WAIT2,
        CLOSE,
        CLOSE_WAIT,
        LAST_ACK,
        CLOSING,
    ]);
}

// --- public data types ---------------------------------------------------------

/// A congestion-control algorithm name held inline (TCP_CA_NAME_MAX = 16),
/// so that sampling allocates nothing per socket. Serializes as a string.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CongName {
    len: u8,
    bytes: [u8; 16],
}

impl CongName {
    /// Build from the raw attribute (NUL-terminated, at most 16 bytes kept).
    pub fn from_bytes(raw: &[u8]) -> CongName {
        let end = raw
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(raw.len())
            .min(16);
        let mut s = &raw[..end];
        // keep only a valid UTF-8 prefix (names are ASCII in practice)
        while std::str::from_utf8(s).is_err() {
            s = &s[..s.len() - 1];
        }
        let mut bytes = [0u8; 16];
        bytes[..s.len()].copy_from_slice(s);
        CongName {
            len: s.len() as u8,
            bytes,
        }
    }

    /// The name, e.g. `"cubic"`, `"bbr"`.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("")
    }
}

impl std::fmt::Debug for CongName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl std::fmt::Display for CongName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for CongName {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for CongName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Serialize for CongName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for CongName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ok(CongName::from_bytes(s.as_bytes()))
    }
}

/// `INET_DIAG_SKMEMINFO`: the socket's memory accounting, bytes
/// (`SK_MEMINFO_*`, include/uapi/linux/sock_diag.h).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkMemInfo {
    /// sk_rmem_alloc: receive queue memory in use.
    pub rmem_alloc: u32,
    /// sk_rcvbuf: receive buffer limit.
    pub rcvbuf: u32,
    /// sk_wmem_alloc: memory of skbs handed to the IP layer / qdisc / driver.
    pub wmem_alloc: u32,
    /// sk_sndbuf: send buffer limit.
    pub sndbuf: u32,
    /// sk_forward_alloc: memory reserved but unused.
    pub fwd_alloc: u32,
    /// sk_wmem_queued: write queue memory (sent-unacked + unsent).
    pub wmem_queued: u32,
    /// sk_omem_alloc: option memory.
    pub optmem: u32,
    /// Backlog queue length (3.x+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backlog: Option<u32>,
    /// Packets dropped (4.x+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drops: Option<u32>,
}

impl SkMemInfo {
    fn parse(v: &[u8]) -> Option<SkMemInfo> {
        let g = |i: usize| {
            v.get(i * 4..i * 4 + 4)
                .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        };
        Some(SkMemInfo {
            rmem_alloc: g(0)?,
            rcvbuf: g(1)?,
            wmem_alloc: g(2)?,
            sndbuf: g(3)?,
            fwd_alloc: g(4)?,
            wmem_queued: g(5)?,
            optmem: g(6)?,
            backlog: g(7),
            drops: g(8),
        })
    }
}

/// `INET_DIAG_BBRINFO` (struct tcp_bbr_info).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BbrInfo {
    /// Estimated bottleneck bandwidth, bytes/s.
    pub bw: u64,
    /// Min-filtered RTT, µs.
    pub min_rtt: u32,
    /// Pacing gain, fixed point with 8 fractional bits (256 = 1.0).
    pub pacing_gain: u32,
    /// Cwnd gain, fixed point with 8 fractional bits (256 = 1.0).
    pub cwnd_gain: u32,
}

/// `INET_DIAG_VEGASINFO` (struct tcpvegas_info).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VegasInfo {
    pub enabled: u32,
    pub rttcnt: u32,
    /// µs.
    pub rtt: u32,
    /// µs.
    pub minrtt: u32,
}

/// `INET_DIAG_DCTCPINFO` (struct tcp_dctcp_info).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DctcpInfo {
    pub enabled: u16,
    pub ce_state: u16,
    /// Fixed point, 1024 = 1.0.
    pub alpha: u32,
    pub ab_ecn: u32,
    pub ab_tot: u32,
}

/// One TCP socket as reported by one sock_diag dump.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SocketSample {
    /// CLOCK_REALTIME (ns since the epoch) when the datagram carrying this
    /// record was received.
    pub time_ns: u64,
    /// CLOCK_MONOTONIC (ns) at the same moment; same clock as the `mono`
    /// trace clock used by [`crate::tracefs`].
    pub mono_ns: u64,
    /// AF_INET (2) or AF_INET6 (10).
    pub family: u8,
    /// TCP state (see [`crate::tcp_info::tcp_state_name`]).
    pub state: u8,
    /// Local address and port.
    pub src: SocketAddr,
    /// Remote address and port.
    pub dst: SocketAddr,
    /// Bound interface (idiag_if), 0 if none.
    pub ifindex: u32,
    pub uid: u32,
    pub inode: u32,
    /// Socket cookie (`SO_COOKIE`, tcp_probe's `sock_cookie`).
    pub cookie: u64,
    /// idiag_rqueue: for TCP, bytes received but not read (rcv_nxt - copied_seq);
    /// for LISTEN, the accept backlog.
    pub rqueue: u32,
    /// idiag_wqueue: for TCP, bytes written but not acked (write_seq - snd_una);
    /// for LISTEN, the backlog limit.
    pub wqueue: u32,
    /// Pending timer: 0 none, 1 retransmit/loss probe, 2 keepalive,
    /// 3 TIME_WAIT, 4 zero-window probe.
    pub timer: u8,
    /// Retransmits / probes counted by that timer.
    pub retrans: u8,
    /// Time until the timer fires, ms.
    pub expires_ms: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_info: Option<TcpInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cong: Option<CongName>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skmem: Option<SkMemInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bbr: Option<BbrInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vegas: Option<VegasInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dctcp: Option<DctcpInfo>,
    /// Shutdown bits: 1 = receive side shut, 2 = send side shut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shutdown: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tos: Option<u8>,
    /// SO_MARK (reported only to CAP_NET_ADMIN).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mark: Option<u32>,
}

impl SocketSample {
    /// The congestion control name, if it was reported.
    pub fn cong_name(&self) -> Option<&str> {
        self.cong.as_ref().map(|c| c.as_str())
    }
}

/// Which sockets a dump returns.
///
/// Port conditions are compiled to inet_diag bytecode (the kernel then
/// skips other sockets, which matters with 10k sockets); all conditions are
/// also checked in userspace, so results are the same on kernels that
/// reject the bytecode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// `idiag_states` bit mask (`1 << state`), see [`state`].
    pub states: u32,
    pub ipv4: bool,
    pub ipv6: bool,
    /// Either end uses this port.
    pub port: Option<u16>,
    pub local_port: Option<u16>,
    pub remote_port: Option<u16>,
    /// Compared after mapping `::ffff:a.b.c.d` to `a.b.c.d`.
    pub local_addr: Option<IpAddr>,
    pub remote_addr: Option<IpAddr>,
    /// Extension request bits, see [`ext`].
    pub extensions: u8,
    /// Send port conditions to the kernel as bytecode (default true).
    pub kernel_filter: bool,
}

impl Default for Filter {
    fn default() -> Self {
        Filter {
            states: state::DEFAULT,
            ipv4: true,
            ipv6: true,
            port: None,
            local_port: None,
            remote_port: None,
            local_addr: None,
            remote_addr: None,
            extensions: ext::DEFAULT,
            kernel_filter: true,
        }
    }
}

impl Filter {
    /// All connection-carrying sockets (see [`state::DEFAULT`]), both families.
    pub fn new() -> Filter {
        Filter::default()
    }
    /// Sockets with `port` at either end.
    pub fn port(port: u16) -> Filter {
        Filter {
            port: Some(port),
            ..Filter::default()
        }
    }
    pub fn with_port(mut self, port: u16) -> Filter {
        self.port = Some(port);
        self
    }
    pub fn with_local_port(mut self, port: u16) -> Filter {
        self.local_port = Some(port);
        self
    }
    pub fn with_remote_port(mut self, port: u16) -> Filter {
        self.remote_port = Some(port);
        self
    }
    pub fn with_local_addr(mut self, a: IpAddr) -> Filter {
        self.local_addr = Some(a);
        self
    }
    pub fn with_remote_addr(mut self, a: IpAddr) -> Filter {
        self.remote_addr = Some(a);
        self
    }
    pub fn with_states(mut self, mask: u32) -> Filter {
        self.states = mask;
        self
    }
    /// Also return LISTEN sockets.
    pub fn with_listen(mut self) -> Filter {
        self.states |= 1 << state::LISTEN;
        self
    }
    /// Also return TIME_WAIT sockets (they carry no tcp_info).
    pub fn with_time_wait(mut self) -> Filter {
        self.states |= 1 << state::TIME_WAIT;
        self
    }
    pub fn ipv4_only(mut self) -> Filter {
        self.ipv6 = false;
        self.ipv4 = true;
        self
    }
    pub fn ipv6_only(mut self) -> Filter {
        self.ipv4 = false;
        self.ipv6 = true;
        self
    }
    pub fn with_extensions(mut self, bits: u8) -> Filter {
        self.extensions = bits;
        self
    }
    pub fn without_kernel_filter(mut self) -> Filter {
        self.kernel_filter = false;
        self
    }

    /// Userspace check of everything but the state mask.
    pub fn matches(&self, src: &SocketAddr, dst: &SocketAddr) -> bool {
        if let Some(p) = self.port {
            if src.port() != p && dst.port() != p {
                return false;
            }
        }
        if self.local_port.is_some_and(|p| src.port() != p) {
            return false;
        }
        if self.remote_port.is_some_and(|p| dst.port() != p) {
            return false;
        }
        if self
            .local_addr
            .is_some_and(|a| a.to_canonical() != src.ip().to_canonical())
        {
            return false;
        }
        if self
            .remote_addr
            .is_some_and(|a| a.to_canonical() != dst.ip().to_canonical())
        {
            return false;
        }
        true
    }

    /// inet_diag bytecode for the port conditions, appended to `out`.
    /// Conditions are a conjunction of groups, each group a disjunction:
    /// `(sport==P || dport==P) && sport==L && dport==R`. Every condition is
    /// two 4-byte ops (the port rides in the second op's `no`); on success
    /// a condition jumps to the end of its group, on failure to the next
    /// condition of the group or, for the last one, 4 bytes past the end of
    /// the program (which the kernel treats as "reject").
    fn bytecode(&self, out: &mut Vec<u8>) {
        let mut groups: [&[(u8, u16)]; 3] = [&[], &[], &[]];
        let any = self
            .port
            .map(|p| [(INET_DIAG_BC_S_EQ, p), (INET_DIAG_BC_D_EQ, p)]);
        let loc = self.local_port.map(|p| [(INET_DIAG_BC_S_EQ, p)]);
        let rem = self.remote_port.map(|p| [(INET_DIAG_BC_D_EQ, p)]);
        if let Some(a) = &any {
            groups[0] = a;
        }
        if let Some(l) = &loc {
            groups[1] = l;
        }
        if let Some(r) = &rem {
            groups[2] = r;
        }
        let total: usize = groups.iter().map(|g| g.len() * 8).sum();
        let mut off = 0usize;
        for g in groups {
            let end = off + g.len() * 8;
            for (i, &(code, port)) in g.iter().enumerate() {
                let yes = (end - off) as u8;
                let no: u16 = if i + 1 < g.len() {
                    8
                } else {
                    (total - off + 4) as u16
                };
                out.push(code);
                out.push(yes);
                out.extend_from_slice(&no.to_ne_bytes());
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&port.to_ne_bytes());
                off += 8;
            }
        }
    }
}

/// Counters over the life of a [`SockDiag`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DumpStats {
    pub dumps: u64,
    pub datagrams: u64,
    pub records: u64,
    /// Records dropped because they were malformed (short header,
    /// attribute running past the message).
    pub skipped_records: u64,
    /// Datagrams larger than the receive buffer (the dump is then redone
    /// with a bigger buffer).
    pub truncated_datagrams: u64,
}

// --- the socket ----------------------------------------------------------------

/// A NETLINK_SOCK_DIAG socket bound to one network namespace.
pub struct SockDiag {
    fd: OwnedFd,
    buf: Vec<u8>,
    req: Vec<u8>,
    seq: u32,
    /// Cleared when the kernel rejects S_EQ/D_EQ bytecode (older kernels).
    bytecode_ok: bool,
    netns: Option<PathBuf>,
    stats: DumpStats,
}

impl std::fmt::Debug for SockDiag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SockDiag")
            .field("fd", &self.fd.as_raw_fd())
            .field("netns", &self.netns)
            .field("stats", &self.stats)
            .finish()
    }
}

const RECV_BUF: usize = 64 * 1024;

impl SockDiag {
    /// A sock_diag socket in the calling thread's network namespace.
    pub fn new() -> io::Result<SockDiag> {
        // SAFETY: plain syscall.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_SOCK_DIAG,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("cannot create NETLINK_SOCK_DIAG socket: {e}"),
            ));
        }
        // SAFETY: fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // A reply that never comes (it should not happen) must not hang the
        // sampler forever.
        let tv = libc::timeval {
            tv_sec: 5,
            tv_usec: 0,
        };
        // SAFETY: valid pointer and length.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const _ as *const libc::c_void,
                mem::size_of::<libc::timeval>() as libc::socklen_t,
            );
        }
        Ok(SockDiag {
            fd,
            buf: vec![0u8; RECV_BUF],
            req: Vec::with_capacity(128),
            seq: 0,
            bytecode_ok: true,
            netns: None,
            stats: DumpStats::default(),
        })
    }

    /// A sock_diag socket inside the named namespace `/run/netns/NAME`.
    pub fn in_netns(name: &str) -> io::Result<SockDiag> {
        let path = netns::netns_path(name)?;
        SockDiag::in_netns_path(path)
    }

    /// A sock_diag socket inside the namespace at `path`
    /// (`/run/netns/NAME`, `/proc/PID/ns/net`, ...).
    pub fn in_netns_path(path: impl AsRef<Path>) -> io::Result<SockDiag> {
        let path = path.as_ref();
        let mut sd = netns::run_in_netns_path(path, SockDiag::new)?;
        sd.netns = Some(path.to_path_buf());
        Ok(sd)
    }

    /// The namespace this socket was created in (None: the creator's own).
    pub fn netns(&self) -> Option<&Path> {
        self.netns.as_deref()
    }

    pub fn stats(&self) -> DumpStats {
        self.stats
    }

    /// Dump TCP sockets matching `filter` (one dump per enabled family).
    pub fn dump_tcp(&mut self, filter: &Filter) -> io::Result<Vec<SocketSample>> {
        let mut out = Vec::new();
        self.dump_tcp_into(filter, &mut out)?;
        Ok(out)
    }

    /// Like [`SockDiag::dump_tcp`] but appends to `out`, so a sampler can
    /// reuse one vector.
    pub fn dump_tcp_into(
        &mut self,
        filter: &Filter,
        out: &mut Vec<SocketSample>,
    ) -> io::Result<()> {
        if filter.ipv4 {
            self.dump_family(libc::AF_INET as u8, filter, out)?;
        }
        if filter.ipv6 {
            self.dump_family(libc::AF_INET6 as u8, filter, out)?;
        }
        Ok(())
    }

    fn dump_family(
        &mut self,
        family: u8,
        filter: &Filter,
        out: &mut Vec<SocketSample>,
    ) -> io::Result<()> {
        let fam = if family == libc::AF_INET as u8 {
            "AF_INET"
        } else {
            "AF_INET6"
        };
        let start = out.len();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let use_bc = filter.kernel_filter
                && self.bytecode_ok
                && (filter.port.is_some()
                    || filter.local_port.is_some()
                    || filter.remote_port.is_some());
            match self.dump_once(family, filter, use_bc, out) {
                Ok(false) => return Ok(()),
                Ok(true) if attempts < 3 => {
                    // a datagram did not fit: buffer already grown, redo
                    out.truncate(start);
                }
                Ok(true) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("sock_diag dump ({fam}): netlink datagrams keep being truncated"),
                    ))
                }
                Err(e) if use_bc && e.raw_os_error() == Some(libc::EINVAL) => {
                    // Kernel without INET_DIAG_BC_S_EQ/D_EQ: filter in userspace.
                    self.bytecode_ok = false;
                    out.truncate(start);
                }
                Err(e) => {
                    out.truncate(start);
                    return Err(io::Error::new(
                        e.kind(),
                        format!("sock_diag dump ({fam}) failed: {e}"),
                    ));
                }
            }
        }
    }

    /// One request + reply loop. Ok(true) means "a datagram was truncated,
    /// redo".
    fn dump_once(
        &mut self,
        family: u8,
        filter: &Filter,
        use_bc: bool,
        out: &mut Vec<SocketSample>,
    ) -> io::Result<bool> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        self.stats.dumps += 1;
        build_request(&mut self.req, seq, family, filter, use_bc);
        send_to_kernel(self.fd.as_raw_fd(), &self.req)?;

        let mut truncated = false;
        loop {
            // After a truncated datagram its NLMSG_DONE may have been cut
            // off; the kernel queues the next part of a dump while we are
            // in recv(), so "nothing readable" now means the dump is over.
            if truncated && !wait_readable(self.fd.as_raw_fd(), 200)? {
                return Ok(true);
            }
            let n = recv_datagram(self.fd.as_raw_fd(), &mut self.buf)?;
            let (time_ns, mono_ns) = now();
            self.stats.datagrams += 1;
            if n > self.buf.len() {
                truncated = true;
                self.stats.truncated_datagrams += 1;
                // Only look for the end of the dump; the records are
                // collected again by the redo with a bigger buffer.
                let mut scratch = Vec::new();
                let r = parse_datagram(
                    &self.buf,
                    seq,
                    filter,
                    time_ns,
                    mono_ns,
                    &mut scratch,
                    &mut self.stats,
                );
                self.buf.resize((n + 4095) & !4095, 0);
                if matches!(r, Ok(Parsed::Done)) {
                    return Ok(true);
                }
                continue;
            }
            match parse_datagram(
                &self.buf[..n],
                seq,
                filter,
                time_ns,
                mono_ns,
                out,
                &mut self.stats,
            )? {
                Parsed::Done => return Ok(truncated),
                Parsed::More => {}
            }
        }
    }
}

impl SockDiag {
    /// Exact lookups of known sockets (by 4-tuple and cookie), batched into
    /// few syscalls: much cheaper than a dump when only some sockets of many
    /// are wanted (the kernel finds each in its hash instead of walking every
    /// socket). Sockets that no longer exist are skipped; returns how many
    /// were gone.
    pub fn get_tcp(
        &mut self,
        targets: &[(SocketAddr, SocketAddr, u64)],
        extensions: u8,
        out: &mut Vec<SocketSample>,
    ) -> io::Result<usize> {
        const BATCH: usize = 128;
        let all = Filter::new().with_states(u32::MAX).without_kernel_filter();
        let mut gone = 0;
        for chunk in targets.chunks(BATCH) {
            let base = self.seq.wrapping_add(1);
            self.seq = self.seq.wrapping_add(chunk.len() as u32);
            self.req.clear();
            for (i, (src, dst, cookie)) in chunk.iter().enumerate() {
                build_get_request(&mut self.req, base.wrapping_add(i as u32), src, dst, *cookie, extensions);
            }
            self.stats.dumps += 1;
            send_to_kernel(self.fd.as_raw_fd(), &self.req)?;
            let mut replies = 0;
            while replies < chunk.len() {
                let n = recv_datagram(self.fd.as_raw_fd(), &mut self.buf)?;
                let (time_ns, mono_ns) = now();
                self.stats.datagrams += 1;
                if n > self.buf.len() {
                    self.buf.resize((n + 4095) & !4095, 0);
                    return Err(io::Error::new(io::ErrorKind::InvalidData, "sock_diag reply truncated"));
                }
                let data = &self.buf[..n];
                let mut off = 0usize;
                while data.len() - off >= NLMSG_HDRLEN {
                    let len = rd_u32(data, off) as usize;
                    let typ = rd_u16(data, off + 4);
                    let mseq = rd_u32(data, off + 8);
                    if len < NLMSG_HDRLEN || len > data.len() - off {
                        return Err(io::Error::new(io::ErrorKind::InvalidData, "malformed netlink message"));
                    }
                    let payload = &data[off + NLMSG_HDRLEN..off + len];
                    off += align4(len).min(data.len() - off);
                    if mseq.wrapping_sub(base) as usize >= chunk.len() {
                        continue;
                    }
                    match typ {
                        SOCK_DIAG_BY_FAMILY => {
                            replies += 1;
                            self.stats.records += 1;
                            if parse_record(payload, &all, time_ns, mono_ns, out) == Record::Broken {
                                self.stats.skipped_records += 1;
                            }
                        }
                        NLMSG_ERROR => {
                            replies += 1;
                            let err = if payload.len() >= 4 { rd_u32(payload, 0) as i32 } else { 0 };
                            if err == -libc::ENOENT {
                                gone += 1;
                            } else if err != 0 {
                                return Err(io::Error::from_raw_os_error(-err));
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(gone)
    }
}

fn build_get_request(req: &mut Vec<u8>, seq: u32, src: &SocketAddr, dst: &SocketAddr, cookie: u64, extensions: u8) {
    let at = req.len();
    req.resize(at + NLMSG_HDRLEN + INET_DIAG_REQ_V2_LEN, 0);
    let r = at + NLMSG_HDRLEN;
    req[r] = if src.is_ipv4() { libc::AF_INET as u8 } else { libc::AF_INET6 as u8 };
    req[r + 1] = libc::IPPROTO_TCP as u8;
    req[r + 2] = extensions;
    req[r + 4..r + 8].copy_from_slice(&u32::MAX.to_ne_bytes());
    let id = r + 8;
    req[id..id + 2].copy_from_slice(&src.port().to_be_bytes());
    req[id + 2..id + 4].copy_from_slice(&dst.port().to_be_bytes());
    let put = |req: &mut Vec<u8>, off: usize, a: &SocketAddr| match a.ip() {
        std::net::IpAddr::V4(v) => req[off..off + 4].copy_from_slice(&v.octets()),
        std::net::IpAddr::V6(v) => req[off..off + 16].copy_from_slice(&v.octets()),
    };
    put(req, id + 4, src);
    put(req, id + 20, dst);
    // idiag_if 0; cookie as two u32 halves (low first), or "no cookie".
    if cookie == 0 {
        req[id + 40..id + 48].copy_from_slice(&[0xff; 8]);
    } else {
        req[id + 40..id + 44].copy_from_slice(&(cookie as u32).to_ne_bytes());
        req[id + 44..id + 48].copy_from_slice(&((cookie >> 32) as u32).to_ne_bytes());
    }
    let len = (req.len() - at) as u32;
    req[at..at + 4].copy_from_slice(&len.to_ne_bytes());
    req[at + 4..at + 6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req[at + 6..at + 8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    req[at + 8..at + 12].copy_from_slice(&seq.to_ne_bytes());
}

fn wait_readable(fd: RawFd, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        if r >= 0 {
            return Ok(r > 0);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn now() -> (u64, u64) {
    fn get(clock: libc::clockid_t) -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid pointer.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }
    (get(libc::CLOCK_REALTIME), get(libc::CLOCK_MONOTONIC))
}

fn build_request(req: &mut Vec<u8>, seq: u32, family: u8, filter: &Filter, use_bc: bool) {
    req.clear();
    req.resize(NLMSG_HDRLEN + INET_DIAG_REQ_V2_LEN, 0);
    // inet_diag_req_v2
    let r = NLMSG_HDRLEN;
    req[r] = family;
    req[r + 1] = libc::IPPROTO_TCP as u8;
    req[r + 2] = filter.extensions;
    req[r + 4..r + 8].copy_from_slice(&filter.states.to_ne_bytes());
    // id: all zero except the cookie, which is "no cookie"
    req[r + 8 + 40..r + 8 + 48].copy_from_slice(&[0xff; 8]);
    if use_bc {
        let at = req.len();
        req.extend_from_slice(&[0, 0, 0, 0]);
        filter.bytecode(req);
        let nla_len = (req.len() - at) as u16;
        req[at..at + 2].copy_from_slice(&nla_len.to_ne_bytes());
        req[at + 2..at + 4].copy_from_slice(&INET_DIAG_REQ_BYTECODE.to_ne_bytes());
    }
    let len = req.len() as u32;
    req[0..4].copy_from_slice(&len.to_ne_bytes());
    req[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    req[8..12].copy_from_slice(&seq.to_ne_bytes());
    // pid 0
}

fn send_to_kernel(fd: RawFd, msg: &[u8]) -> io::Result<()> {
    // SAFETY: zeroed sockaddr_nl is the kernel's address (pid 0, groups 0).
    let mut sa: libc::sockaddr_nl = unsafe { mem::zeroed() };
    sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    loop {
        // SAFETY: valid buffer and address.
        let r = unsafe {
            libc::sendto(
                fd,
                msg.as_ptr() as *const libc::c_void,
                msg.len(),
                0,
                &sa as *const _ as *const libc::sockaddr,
                mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if r >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(io::Error::new(
                e.kind(),
                format!("sending sock_diag request: {e}"),
            ));
        }
    }
}

/// Receive one datagram; returns its real length (may exceed `buf.len()`:
/// MSG_TRUNC).
fn recv_datagram(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: valid buffer.
        let r = unsafe {
            libc::recv(
                fd,
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                libc::MSG_TRUNC,
            )
        };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "timed out waiting for sock_diag reply",
                ))
            }
            _ => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("receiving sock_diag reply: {e}"),
                ))
            }
        }
    }
}

// --- parsing (pure, unit-tested on hand-built bytes) -------------------------

#[derive(Debug, PartialEq, Eq)]
enum Parsed {
    More,
    Done,
}

#[inline]
fn rd_u16(b: &[u8], off: usize) -> u16 {
    u16::from_ne_bytes([b[off], b[off + 1]])
}
#[inline]
fn rd_u32(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}
#[inline]
fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Parse every netlink message in one datagram. Messages of another
/// sequence number (leftovers of an abandoned dump) are ignored.
fn parse_datagram(
    data: &[u8],
    seq: u32,
    filter: &Filter,
    time_ns: u64,
    mono_ns: u64,
    out: &mut Vec<SocketSample>,
    stats: &mut DumpStats,
) -> io::Result<Parsed> {
    let mut off = 0usize;
    while data.len() - off >= NLMSG_HDRLEN {
        let len = rd_u32(data, off) as usize;
        let typ = rd_u16(data, off + 4);
        let mseq = rd_u32(data, off + 8);
        if len < NLMSG_HDRLEN || len > data.len() - off {
            // The datagram is cut or corrupt: nothing after this point can
            // be framed. Not fatal for the records already taken.
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "malformed netlink message (len {len}, {} bytes left)",
                    data.len() - off
                ),
            ));
        }
        let payload = &data[off + NLMSG_HDRLEN..off + len];
        off += align4(len).min(data.len() - off);
        if mseq != seq {
            continue;
        }
        match typ {
            NLMSG_DONE => {
                if payload.len() >= 4 {
                    let err = rd_u32(payload, 0) as i32;
                    if err < 0 {
                        return Err(io::Error::from_raw_os_error(-err));
                    }
                }
                return Ok(Parsed::Done);
            }
            NLMSG_ERROR => {
                if payload.len() < 4 {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "short NLMSG_ERROR",
                    ));
                }
                let err = rd_u32(payload, 0) as i32;
                if err == 0 {
                    continue; // ACK
                }
                return Err(io::Error::from_raw_os_error(err.unsigned_abs() as i32));
            }
            NLMSG_OVERRUN => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "netlink overrun",
                ));
            }
            NLMSG_NOOP => {}
            SOCK_DIAG_BY_FAMILY => {
                stats.records += 1;
                if !state_wanted(payload, filter) {
                    continue;
                }
                if parse_record(payload, filter, time_ns, mono_ns, out) == Record::Broken {
                    stats.skipped_records += 1;
                }
            }
            _ => {}
        }
    }
    Ok(Parsed::More)
}

fn state_wanted(payload: &[u8], filter: &Filter) -> bool {
    payload.len() < 2 || (filter.states >> (payload[1] & 31)) & 1 == 1
}

#[derive(PartialEq, Eq)]
enum Record {
    Taken,
    Filtered,
    Broken,
}

fn addr(family: u8, raw: &[u8], port: u16) -> Option<SocketAddr> {
    if family == libc::AF_INET as u8 {
        let a: [u8; 4] = raw[..4].try_into().ok()?;
        Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(a)), port))
    } else if family == libc::AF_INET6 as u8 {
        let a: [u8; 16] = raw[..16].try_into().ok()?;
        Some(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(a)), port))
    } else {
        None
    }
}

/// Decode one inet_diag_msg and push it onto `out` (built in place: a
/// sample is ~700 bytes, so it is not moved around).
fn parse_record(
    p: &[u8],
    filter: &Filter,
    time_ns: u64,
    mono_ns: u64,
    out: &mut Vec<SocketSample>,
) -> Record {
    if p.len() < INET_DIAG_MSG_LEN {
        return Record::Broken;
    }
    let family = p[0];
    let sport = u16::from_be_bytes([p[4], p[5]]);
    let dport = u16::from_be_bytes([p[6], p[7]]);
    let (Some(src), Some(dst)) = (
        addr(family, &p[8..24], sport),
        addr(family, &p[24..40], dport),
    ) else {
        return Record::Broken;
    };
    if !filter.matches(&src, &dst) {
        return Record::Filtered;
    }
    let cookie = rd_u32(p, 44) as u64 | (rd_u32(p, 48) as u64) << 32;
    out.push(SocketSample {
        time_ns,
        mono_ns,
        family,
        state: p[1],
        src,
        dst,
        ifindex: rd_u32(p, 40),
        uid: rd_u32(p, 64),
        inode: rd_u32(p, 68),
        cookie,
        rqueue: rd_u32(p, 56),
        wqueue: rd_u32(p, 60),
        timer: p[2],
        retrans: p[3],
        expires_ms: rd_u32(p, 52),
        tcp_info: None,
        cong: None,
        skmem: None,
        bbr: None,
        vegas: None,
        dctcp: None,
        shutdown: None,
        tos: None,
        mark: None,
    });
    let s = out.last_mut().expect("just pushed");
    if parse_attrs(&p[INET_DIAG_MSG_LEN..], s) {
        Record::Taken
    } else {
        out.pop();
        Record::Broken
    }
}

/// Fill `s` from the attributes; false if they are malformed.
fn parse_attrs(mut a: &[u8], s: &mut SocketSample) -> bool {
    while a.len() >= 4 {
        let nla_len = rd_u16(a, 0) as usize;
        let typ = rd_u16(a, 2) & NLA_TYPE_MASK;
        if nla_len < 4 || nla_len > a.len() {
            return false;
        }
        let v = &a[4..nla_len];
        match typ {
            INET_DIAG_INFO => s.tcp_info = Some(TcpInfo::from_bytes(v)),
            INET_DIAG_CONG => s.cong = Some(CongName::from_bytes(v)),
            INET_DIAG_SKMEMINFO => match SkMemInfo::parse(v) {
                Some(m) => s.skmem = Some(m),
                None => return false,
            },
            INET_DIAG_BBRINFO if v.len() >= 20 => {
                s.bbr = Some(BbrInfo {
                    bw: rd_u32(v, 0) as u64 | (rd_u32(v, 4) as u64) << 32,
                    min_rtt: rd_u32(v, 8),
                    pacing_gain: rd_u32(v, 12),
                    cwnd_gain: rd_u32(v, 16),
                })
            }
            INET_DIAG_VEGASINFO if v.len() >= 16 => {
                s.vegas = Some(VegasInfo {
                    enabled: rd_u32(v, 0),
                    rttcnt: rd_u32(v, 4),
                    rtt: rd_u32(v, 8),
                    minrtt: rd_u32(v, 12),
                })
            }
            INET_DIAG_DCTCPINFO if v.len() >= 16 => {
                s.dctcp = Some(DctcpInfo {
                    enabled: rd_u16(v, 0),
                    ce_state: rd_u16(v, 2),
                    alpha: rd_u32(v, 4),
                    ab_ecn: rd_u32(v, 8),
                    ab_tot: rd_u32(v, 12),
                })
            }
            INET_DIAG_BBRINFO | INET_DIAG_VEGASINFO | INET_DIAG_DCTCPINFO => return false,
            INET_DIAG_SHUTDOWN if !v.is_empty() => s.shutdown = Some(v[0]),
            INET_DIAG_TOS | INET_DIAG_TCLASS if !v.is_empty() => s.tos = Some(v[0]),
            INET_DIAG_MARK if v.len() >= 4 => s.mark = Some(rd_u32(v, 0)),
            _ => {}
        }
        let adv = align4(nla_len);
        if adv >= a.len() {
            break;
        }
        a = &a[adv..];
    }
    true
}

/// `getsockopt(fd, IPPROTO_TCP, TCP_INFO)` with a buffer larger than any
/// known `struct tcp_info`, decoded with the length the kernel returned.
pub fn getsockopt_tcp_info(fd: RawFd) -> io::Result<TcpInfo> {
    let mut buf = [0u8; 512];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: valid buffer and length pointer.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("getsockopt(TCP_INFO) on fd {fd}: {e}"),
        ));
    }
    Ok(TcpInfo::from_bytes(&buf[..(len as usize).min(buf.len())]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nlmsg(typ: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&((NLMSG_HDRLEN + payload.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&typ.to_ne_bytes());
        m.extend_from_slice(&2u16.to_ne_bytes()); // NLM_F_MULTI
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(payload);
        while m.len() % 4 != 0 {
            m.push(0);
        }
        m
    }

    fn attr(typ: u16, val: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&((4 + val.len()) as u16).to_ne_bytes());
        a.extend_from_slice(&typ.to_ne_bytes());
        a.extend_from_slice(val);
        while a.len() % 4 != 0 {
            a.push(0);
        }
        a
    }

    fn diag_msg(family: u8, st: u8, sport: u16, dport: u16, cookie: u64) -> Vec<u8> {
        let mut p = vec![0u8; INET_DIAG_MSG_LEN];
        p[0] = family;
        p[1] = st;
        p[4..6].copy_from_slice(&sport.to_be_bytes());
        p[6..8].copy_from_slice(&dport.to_be_bytes());
        if family == libc::AF_INET as u8 {
            p[8..12].copy_from_slice(&[10, 0, 0, 1]);
            p[24..28].copy_from_slice(&[10, 0, 0, 2]);
        } else {
            p[8..24].copy_from_slice(&Ipv6Addr::LOCALHOST.octets());
            p[24..40].copy_from_slice(&"fd00::2".parse::<Ipv6Addr>().unwrap().octets());
        }
        p[44..48].copy_from_slice(&(cookie as u32).to_ne_bytes());
        p[48..52].copy_from_slice(&((cookie >> 32) as u32).to_ne_bytes());
        p[56..60].copy_from_slice(&7u32.to_ne_bytes());
        p[60..64].copy_from_slice(&9u32.to_ne_bytes());
        p[64..68].copy_from_slice(&1000u32.to_ne_bytes());
        p[68..72].copy_from_slice(&4242u32.to_ne_bytes());
        p
    }

    fn tcp_info_bytes(len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        b[0] = 1;
        b[80..84].copy_from_slice(&33u32.to_ne_bytes()); // snd_cwnd
        if len >= 128 {
            b[120..128].copy_from_slice(&123_456u64.to_ne_bytes()); // bytes_acked
        }
        b
    }

    fn full_record(sport: u16, dport: u16) -> Vec<u8> {
        let mut p = diag_msg(2, 1, sport, dport, 0x1_0000_0002);
        p.extend(attr(INET_DIAG_INFO, &tcp_info_bytes(280)));
        p.extend(attr(INET_DIAG_CONG, b"bbr\0"));
        let mem: Vec<u8> = (1u32..=9).flat_map(|v| v.to_ne_bytes()).collect();
        p.extend(attr(INET_DIAG_SKMEMINFO, &mem));
        let mut bbr = Vec::new();
        for v in [0x10u32, 0x1, 500, 739, 512] {
            bbr.extend_from_slice(&v.to_ne_bytes());
        }
        p.extend(attr(INET_DIAG_BBRINFO, &bbr));
        p.extend(attr(INET_DIAG_SHUTDOWN, &[2]));
        p
    }

    fn parse(
        data: &[u8],
        seq: u32,
        f: &Filter,
    ) -> (io::Result<Parsed>, Vec<SocketSample>, DumpStats) {
        let mut out = Vec::new();
        let mut st = DumpStats::default();
        let r = parse_datagram(data, seq, f, 1, 2, &mut out, &mut st);
        (r, out, st)
    }

    #[test]
    fn full_record_decodes() {
        let mut d = nlmsg(SOCK_DIAG_BY_FAMILY, 5, &full_record(5201, 40000));
        d.extend(nlmsg(NLMSG_DONE, 5, &0i32.to_ne_bytes()));
        let (r, out, st) = parse(&d, 5, &Filter::new());
        assert_eq!(r.unwrap(), Parsed::Done);
        assert_eq!(st.records, 1);
        assert_eq!(out.len(), 1);
        let s = &out[0];
        assert_eq!(s.src, "10.0.0.1:5201".parse().unwrap());
        assert_eq!(s.dst, "10.0.0.2:40000".parse().unwrap());
        assert_eq!(s.cookie, 0x1_0000_0002);
        assert_eq!((s.rqueue, s.wqueue, s.uid, s.inode), (7, 9, 1000, 4242));
        assert_eq!((s.time_ns, s.mono_ns), (1, 2));
        let ti = s.tcp_info.unwrap();
        assert_eq!(ti.snd_cwnd, 33);
        assert_eq!(ti.bytes_acked, Some(123_456));
        assert_eq!(ti.len, 280);
        assert_eq!(s.cong_name(), Some("bbr"));
        let m = s.skmem.unwrap();
        assert_eq!(
            (m.rmem_alloc, m.rcvbuf, m.optmem, m.backlog, m.drops),
            (1, 2, 7, Some(8), Some(9))
        );
        assert_eq!(s.bbr.unwrap().bw, 0x1_0000_0010);
        assert_eq!(s.bbr.unwrap().min_rtt, 500);
        assert_eq!(s.shutdown, Some(2));
        let j = serde_json::to_string(s).unwrap();
        assert_eq!(&serde_json::from_str::<SocketSample>(&j).unwrap(), s);
        assert!(j.contains("\"cong\":\"bbr\""), "{j}");
        assert!(j.contains("\"src\":\"10.0.0.1:5201\""), "{j}");
    }

    #[test]
    fn multi_part_and_short_tcp_info() {
        // Two datagrams: records in the first, more + DONE in the second.
        let mut d1 = nlmsg(SOCK_DIAG_BY_FAMILY, 9, &full_record(1, 2));
        let mut old = diag_msg(10, 1, 3, 4, 1);
        old.extend(attr(INET_DIAG_INFO, &tcp_info_bytes(104)));
        d1.extend(nlmsg(SOCK_DIAG_BY_FAMILY, 9, &old));
        let (r, out, _) = parse(&d1, 9, &Filter::new());
        assert_eq!(r.unwrap(), Parsed::More);
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].src, "[::1]:3".parse().unwrap());
        let ti = out[1].tcp_info.unwrap();
        assert_eq!(ti.snd_cwnd, 33);
        assert_eq!(ti.bytes_acked, None);

        let d2 = nlmsg(NLMSG_DONE, 9, &0i32.to_ne_bytes());
        let (r, out, _) = parse(&d2, 9, &Filter::new());
        assert_eq!(r.unwrap(), Parsed::Done);
        assert!(out.is_empty());
    }

    #[test]
    fn stale_sequence_ignored() {
        let mut d = nlmsg(SOCK_DIAG_BY_FAMILY, 1, &full_record(1, 2));
        d.extend(nlmsg(NLMSG_DONE, 1, &0i32.to_ne_bytes()));
        d.extend(nlmsg(SOCK_DIAG_BY_FAMILY, 2, &full_record(3, 4)));
        let (r, out, _) = parse(&d, 2, &Filter::new());
        assert_eq!(r.unwrap(), Parsed::More);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].src.port(), 3);
    }

    #[test]
    fn nlmsg_error_becomes_io_error() {
        let mut p = (-libc::EINVAL).to_ne_bytes().to_vec();
        p.extend_from_slice(&[0u8; 16]);
        let d = nlmsg(NLMSG_ERROR, 4, &p);
        let (r, _, _) = parse(&d, 4, &Filter::new());
        assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::EINVAL));
        // an ACK (error 0) is not an error
        let d = nlmsg(NLMSG_ERROR, 4, &[0u8; 20]);
        assert_eq!(parse(&d, 4, &Filter::new()).0.unwrap(), Parsed::More);
        // DONE carrying an error
        let d = nlmsg(NLMSG_DONE, 4, &(-libc::ENOMEM).to_ne_bytes());
        assert_eq!(
            parse(&d, 4, &Filter::new()).0.unwrap_err().raw_os_error(),
            Some(libc::ENOMEM)
        );
    }

    #[test]
    fn truncated_attribute_skips_record_only() {
        let mut bad = diag_msg(2, 1, 1, 2, 1);
        let mut a = attr(INET_DIAG_INFO, &tcp_info_bytes(160));
        a[0..2].copy_from_slice(&400u16.to_ne_bytes()); // claims more than present
        bad.extend(a);
        let mut d = nlmsg(SOCK_DIAG_BY_FAMILY, 3, &bad);
        d.extend(nlmsg(SOCK_DIAG_BY_FAMILY, 3, &full_record(5, 6)));
        // short header
        d.extend(nlmsg(SOCK_DIAG_BY_FAMILY, 3, &[2, 1, 0, 0]));
        // bbr attribute too short
        let mut b = diag_msg(2, 1, 7, 8, 1);
        b.extend(attr(INET_DIAG_BBRINFO, &[0u8; 8]));
        d.extend(nlmsg(SOCK_DIAG_BY_FAMILY, 3, &b));
        let (r, out, st) = parse(&d, 3, &Filter::new());
        assert_eq!(r.unwrap(), Parsed::More);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].src.port(), 5);
        assert_eq!(st.skipped_records, 3);
    }

    #[test]
    fn cut_datagram_never_panics() {
        let mut d = nlmsg(SOCK_DIAG_BY_FAMILY, 1, &full_record(1, 2));
        d.extend(nlmsg(SOCK_DIAG_BY_FAMILY, 1, &full_record(3, 4)));
        d.extend(nlmsg(NLMSG_DONE, 1, &0i32.to_ne_bytes()));
        for n in 0..d.len() {
            let _ = parse(&d[..n], 1, &Filter::new());
        }
        // garbage
        let g: Vec<u8> = (0..600u32).map(|i| (i * 7919 % 251) as u8).collect();
        for n in 0..g.len() {
            let _ = parse(&g[..n], 0x0, &Filter::new());
        }
        // nlmsg length shorter than a header
        let mut bad = nlmsg(NLMSG_DONE, 1, &[0; 4]);
        bad[0..4].copy_from_slice(&8u32.to_ne_bytes());
        assert!(parse(&bad, 1, &Filter::new()).0.is_err());
    }

    #[test]
    fn userspace_filter() {
        let mut d = Vec::new();
        for (s, dp) in [(5201, 40000), (40000, 5201), (22, 50000)] {
            d.extend(nlmsg(SOCK_DIAG_BY_FAMILY, 1, &full_record(s, dp)));
        }
        let (_, out, _) = parse(&d, 1, &Filter::port(5201));
        assert_eq!(out.len(), 2);
        let (_, out, _) = parse(&d, 1, &Filter::new().with_local_port(5201));
        assert_eq!(out.len(), 1);
        let (_, out, _) = parse(
            &d,
            1,
            &Filter::new().with_remote_port(5201).with_local_port(40000),
        );
        assert_eq!(out.len(), 1);
        let (_, out, _) = parse(
            &d,
            1,
            &Filter::new().with_local_addr("10.0.0.2".parse().unwrap()),
        );
        assert_eq!(out.len(), 0);
        let (_, out, _) = parse(
            &d,
            1,
            &Filter::new().with_remote_addr("::ffff:10.0.0.2".parse().unwrap()),
        );
        assert_eq!(out.len(), 3);
        // state mask
        let (_, out, _) = parse(
            &d,
            1,
            &Filter::new().with_states(state::mask(&[state::LISTEN])),
        );
        assert_eq!(out.len(), 0);
    }

    /// Run the bytecode the way the kernel's inet_diag_bc_run() does.
    fn run_bc(bc: &[u8], sport: u16, dport: u16) -> bool {
        let mut len = bc.len() as i32;
        let mut pc = 0usize;
        while len > 0 {
            let code = bc[pc];
            let yes_off = bc[pc + 1] as i32;
            let no_off = rd_u16(bc, pc + 2) as i32;
            let port = rd_u16(bc, pc + 6);
            let yes = match code {
                INET_DIAG_BC_S_EQ => sport == port,
                INET_DIAG_BC_D_EQ => dport == port,
                _ => panic!("unexpected op"),
            };
            let step = if yes { yes_off } else { no_off };
            len -= step;
            pc = (pc as i32 + step) as usize;
        }
        len == 0
    }

    #[test]
    fn bytecode_semantics() {
        type Case = (Filter, Vec<((u16, u16), bool)>);
        let cases: Vec<Case> = vec![
            (
                Filter::port(80),
                vec![((80, 1), true), ((1, 80), true), ((1, 2), false)],
            ),
            (
                Filter::new().with_local_port(80),
                vec![((80, 1), true), ((1, 80), false)],
            ),
            (
                Filter::new().with_remote_port(80),
                vec![((80, 1), false), ((1, 80), true)],
            ),
            (
                Filter::new().with_local_port(80).with_remote_port(90),
                vec![((80, 90), true), ((80, 1), false), ((1, 90), false)],
            ),
            (
                Filter::port(80).with_local_port(5),
                vec![
                    ((5, 80), true),
                    ((80, 5), false),
                    ((5, 6), false),
                    ((80, 80), false),
                ],
            ),
            (
                Filter::port(80).with_remote_port(80),
                vec![((1, 80), true), ((80, 1), false)],
            ),
        ];
        for (f, checks) in cases {
            let mut bc = Vec::new();
            f.bytecode(&mut bc);
            assert_eq!(bc.len() % 8, 0);
            for ((s, d), want) in checks {
                assert_eq!(run_bc(&bc, s, d), want, "{f:?} sport={s} dport={d}");
                assert_eq!(
                    f.matches(
                        &SocketAddr::from(([1, 1, 1, 1], s)),
                        &SocketAddr::from(([2, 2, 2, 2], d))
                    ),
                    want
                );
            }
        }
    }

    #[test]
    fn request_layout() {
        let mut req = Vec::new();
        build_request(&mut req, 77, 2, &Filter::port(5201), true);
        assert_eq!(rd_u32(&req, 0) as usize, req.len());
        assert_eq!(rd_u16(&req, 4), SOCK_DIAG_BY_FAMILY);
        assert_eq!(rd_u16(&req, 6), NLM_F_REQUEST | NLM_F_DUMP);
        assert_eq!(rd_u32(&req, 8), 77);
        assert_eq!(req[16], 2);
        assert_eq!(req[17], libc::IPPROTO_TCP as u8);
        assert_eq!(req[18], ext::DEFAULT);
        assert_eq!(rd_u32(&req, 20), state::DEFAULT);
        assert_eq!(req.len(), 16 + 56 + 4 + 16);
        assert_eq!(rd_u16(&req, 72), 20);
        assert_eq!(rd_u16(&req, 74), INET_DIAG_REQ_BYTECODE);
        build_request(&mut req, 78, 10, &Filter::new(), false);
        assert_eq!(req.len(), 72);
    }

    #[test]
    fn cong_name() {
        assert_eq!(CongName::from_bytes(b"cubic\0\0\0").as_str(), "cubic");
        assert_eq!(CongName::from_bytes(b"").as_str(), "");
        assert_eq!(CongName::from_bytes(&[b'a'; 40]).as_str().len(), 16);
        assert_eq!(CongName::from_bytes(&[b'a', 0xff, b'b']).as_str(), "a");
        assert!(CongName::from_bytes(b"reno") == "reno");
    }
}
