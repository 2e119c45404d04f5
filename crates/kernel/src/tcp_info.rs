//! Length-tolerant decoding of the kernel's `struct tcp_info`
//! (include/uapi/linux/tcp.h), as returned by `getsockopt(TCP_INFO)` and by
//! the `INET_DIAG_INFO` attribute of a sock_diag dump.
//!
//! The kernel only ever appends to this struct, and it hands userspace as many
//! bytes as it knows about (sock_diag) or as many as were asked for
//! (getsockopt). [`TcpInfo::from_bytes`] therefore decodes whatever prefix it
//! is given: every field that lies (even partly) beyond the supplied length is
//! `None`, so "this kernel does not report it" stays distinguishable from 0;
//! bytes beyond the newest layout known here are ignored.
//!
//! Layout (byte offsets, native endianness), checked against the uapi header
//! and against this machine's kernel (6.18 returns 280 bytes):
//!
//! | bytes     | fields                                                     | since |
//! |-----------|------------------------------------------------------------|-------|
//! | 0..104    | state .. total_retrans (the original core)                 | 2.6   |
//! | 104..120  | pacing_rate, max_pacing_rate                               | 3.15  |
//! | 120..136  | bytes_acked, bytes_received                                | 4.1   |
//! | 136..144  | segs_out, segs_in                                          | 4.2   |
//! | 144..160  | notsent_bytes, min_rtt, data_segs_in, data_segs_out        | 4.6   |
//! | 160..168  | delivery_rate                                              | 4.9   |
//! | 168..192  | busy_time, rwnd_limited, sndbuf_limited                    | 4.10  |
//! | 192..200  | delivered, delivered_ce                                    | 4.18  |
//! | 200..224  | bytes_sent, bytes_retrans, dsack_dups, reord_seen          | 4.19  |
//! | 224..232  | rcv_ooopack, snd_wnd                                       | 5.4   |
//! | 232..240  | rcv_wnd, rehash                                            | 6.2   |
//! | 240..248  | total_rto, total_rto_recoveries (u16), total_rto_time      | 6.7   |
//! | 248..280  | received_ce, AccECN byte counters, AccECN flags word       | 6.18  |

use serde::{Deserialize, Serialize};

/// Size of the original `struct tcp_info` (up to `tcpi_total_retrans`).
pub const TCP_INFO_CORE_LEN: usize = 104;
/// Size of the newest layout decoded here (Linux 6.18, with AccECN fields).
pub const TCP_INFO_MAX_LEN: usize = 280;

/// `tcpi_options` bits.
pub const TCPI_OPT_TIMESTAMPS: u8 = 1;
pub const TCPI_OPT_SACK: u8 = 2;
pub const TCPI_OPT_WSCALE: u8 = 4;
/// ECN was negotiated at TCP session init.
pub const TCPI_OPT_ECN: u8 = 8;
/// At least one ECT segment was received.
pub const TCPI_OPT_ECN_SEEN: u8 = 16;
/// SYN-ACK acked data in SYN sent or received.
pub const TCPI_OPT_SYN_DATA: u8 = 32;
/// Timestamps are in microseconds (Linux 6.7+).
pub const TCPI_OPT_USEC_TS: u8 = 64;
/// Child socket of a TCP Fast Open passive open.
pub const TCPI_OPT_TFO_CHILD: u8 = 128;

/// `tcpi_ca_state` values (enum tcp_ca_state).
pub const TCP_CA_OPEN: u8 = 0;
pub const TCP_CA_DISORDER: u8 = 1;
pub const TCP_CA_CWR: u8 = 2;
pub const TCP_CA_RECOVERY: u8 = 3;
pub const TCP_CA_LOSS: u8 = 4;

/// Name of a TCP state number (`tcpi_state`, `idiag_state`), as in the
/// kernel's `TCP_*` enum without the prefix.
pub fn tcp_state_name(state: u8) -> &'static str {
    match state {
        1 => "ESTABLISHED",
        2 => "SYN_SENT",
        3 => "SYN_RECV",
        4 => "FIN_WAIT1",
        5 => "FIN_WAIT2",
        6 => "TIME_WAIT",
        7 => "CLOSE",
        8 => "CLOSE_WAIT",
        9 => "LAST_ACK",
        10 => "LISTEN",
        11 => "CLOSING",
        12 => "NEW_SYN_RECV",
        13 => "BOUND_INACTIVE",
        _ => "UNKNOWN",
    }
}

/// Name of a congestion-avoidance state (`tcpi_ca_state`, tcp_cong_state_set).
pub fn ca_state_name(ca_state: u8) -> &'static str {
    match ca_state {
        TCP_CA_OPEN => "Open",
        TCP_CA_DISORDER => "Disorder",
        TCP_CA_CWR => "CWR",
        TCP_CA_RECOVERY => "Recovery",
        TCP_CA_LOSS => "Loss",
        _ => "Unknown",
    }
}

/// Decoded `struct tcp_info`. Field names drop the `tcpi_` prefix.
///
/// The fields of the original 104-byte core are plain integers (every Linux
/// that has sock_diag reports them; if fewer than 104 bytes were supplied the
/// missing ones read as 0 and [`TcpInfo::len`] tells). Everything after the
/// core is an `Option`: `None` means the kernel's struct was too short to
/// contain the field.
///
/// Units: times without a suffix are microseconds unless documented
/// otherwise; `last_*` are milliseconds ago; windows and thresholds named
/// `*_cwnd`/`*_ssthresh` are in segments, `*_wnd`/`*_space`/`rcv_ssthresh`
/// are in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpInfo {
    /// Number of bytes of `struct tcp_info` the kernel supplied (before any
    /// truncation to [`TCP_INFO_MAX_LEN`]: a newer kernel may report more).
    pub len: u16,

    /// TCP state (1 = ESTABLISHED ... see [`tcp_state_name`]).
    pub state: u8,
    /// Congestion-avoidance state (0 Open, 1 Disorder, 2 CWR, 3 Recovery, 4 Loss).
    pub ca_state: u8,
    /// Consecutive unrecovered RTO timeouts (icsk_retransmits).
    pub retransmits: u8,
    /// Unanswered zero-window / keepalive probes.
    pub probes: u8,
    /// Exponential RTO backoff shift.
    pub backoff: u8,
    /// TCPI_OPT_* bits.
    pub options: u8,
    /// Send window scale shift (peer's advertised wscale), 4 bits.
    pub snd_wscale: u8,
    /// Receive window scale shift (our wscale), 4 bits.
    pub rcv_wscale: u8,
    /// The last delivery-rate sample was application limited (1 bit, 4.9+; 0 before).
    pub delivery_rate_app_limited: bool,
    /// TFO client failure reason (2 bits, 5.5+; 0 before).
    pub fastopen_client_fail: u8,

    /// Retransmission timeout, µs.
    pub rto: u32,
    /// Delayed-ACK timeout, µs.
    pub ato: u32,
    /// Sender MSS (current mss_cache), bytes.
    pub snd_mss: u32,
    /// Estimated receiver MSS, bytes.
    pub rcv_mss: u32,

    /// Segments sent but not yet acknowledged (packets_out).
    pub unacked: u32,
    /// SACKed segments (sacked_out).
    pub sacked: u32,
    /// Segments marked lost (lost_out).
    pub lost: u32,
    /// Retransmitted segments still in flight (retrans_out).
    pub retrans: u32,
    /// Unused since 4.15 (always 0).
    pub fackets: u32,

    /// Time since last data sent, ms.
    pub last_data_sent: u32,
    /// Not maintained by the kernel (always 0).
    pub last_ack_sent: u32,
    /// Time since last data received, ms.
    pub last_data_recv: u32,
    /// Time since last ACK received, ms.
    pub last_ack_recv: u32,

    /// Path MTU, bytes.
    pub pmtu: u32,
    /// Receive-window clamp target (rcv_ssthresh), bytes.
    pub rcv_ssthresh: u32,
    /// Smoothed RTT, µs.
    pub rtt: u32,
    /// RTT mean deviation, µs.
    pub rttvar: u32,
    /// Slow-start threshold, segments (0x7fffffff = infinite).
    pub snd_ssthresh: u32,
    /// Congestion window, segments.
    pub snd_cwnd: u32,
    /// Advertised MSS, bytes.
    pub advmss: u32,
    /// Reordering metric, segments.
    pub reordering: u32,

    /// Receiver-side RTT estimate, µs.
    pub rcv_rtt: u32,
    /// Receive-buffer autotuning space (rcvq_space.space), bytes.
    pub rcv_space: u32,

    /// Total retransmitted segments over the connection's life.
    pub total_retrans: u32,

    /// Pacing rate, bytes/s (3.15+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pacing_rate: Option<u64>,
    /// SO_MAX_PACING_RATE, bytes/s (u64::MAX = unlimited) (3.15+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_pacing_rate: Option<u64>,
    /// Bytes acknowledged by the peer (RFC 4898 HCThruOctetsAcked) (4.1+).
    /// Counts sequence space, not just payload: on the active opener it
    /// starts at 1 (the SYN), and an acked FIN adds 1 (seen on 6.18).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_acked: Option<u64>,
    /// Bytes received in sequence (RFC 4898 HCThruOctetsReceived) (4.1+).
    /// The peer's SYN is not counted, its FIN adds 1 (seen on 6.18).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_received: Option<u64>,
    /// Segments sent, including retransmissions and pure ACKs (4.2+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segs_out: Option<u32>,
    /// Segments received (4.2+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segs_in: Option<u32>,

    /// Bytes in the write queue not yet sent, bytes (4.6+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notsent_bytes: Option<u32>,
    /// Minimum RTT seen (windowed), µs (4.6+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_rtt: Option<u32>,
    /// Segments received carrying data (4.6+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_segs_in: Option<u32>,
    /// Segments sent carrying data, incl. retransmissions (4.6+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_segs_out: Option<u32>,

    /// Latest delivery-rate sample, bytes/s (4.9+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_rate: Option<u64>,

    /// Time busy sending data, µs (4.10+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_time: Option<u64>,
    /// Time limited by the peer's receive window, µs (4.10+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rwnd_limited: Option<u64>,
    /// Time limited by the send buffer, µs (4.10+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sndbuf_limited: Option<u64>,

    /// Segments delivered (incl. out of order) (4.18+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered: Option<u32>,
    /// Delivered segments that were CE-marked (4.18+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered_ce: Option<u32>,

    /// Data bytes sent, incl. retransmissions (4.19+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_sent: Option<u64>,
    /// Data bytes retransmitted (4.19+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_retrans: Option<u64>,
    /// DSACK blocks received (4.19+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dsack_dups: Option<u32>,
    /// Reordering events seen (4.19+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reord_seen: Option<u32>,

    /// Out-of-order packets received (5.4+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rcv_ooopack: Option<u32>,
    /// Peer's advertised receive window after scaling, bytes (5.4+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snd_wnd: Option<u32>,
    /// Our advertised receive window after scaling, bytes (6.2+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rcv_wnd: Option<u32>,
    /// PLB- or timeout-triggered rehash attempts (6.2+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rehash: Option<u32>,

    /// RTO timeouts, incl. SYN/SYN-ACK and recurring ones (u16 in the kernel) (6.7+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_rto: Option<u16>,
    /// RTO recoveries, incl. an unfinished one (u16 in the kernel) (6.7+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_rto_recoveries: Option<u16>,
    /// Time spent in RTO recoveries, **ms** (6.7+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_rto_time: Option<u32>,

    /// CE-marked segments received (6.18+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received_ce: Option<u32>,
    /// AccECN: bytes delivered with ECT(1), bytes (6.18+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered_e1_bytes: Option<u32>,
    /// AccECN: bytes delivered with ECT(0), bytes (6.18+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered_e0_bytes: Option<u32>,
    /// AccECN: bytes delivered with CE, bytes (6.18+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered_ce_bytes: Option<u32>,
    /// AccECN: bytes received with ECT(1), bytes (6.18+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received_e1_bytes: Option<u32>,
    /// AccECN: bytes received with ECT(0), bytes (6.18+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received_e0_bytes: Option<u32>,
    /// AccECN: bytes received with CE, bytes (6.18+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received_ce_bytes: Option<u32>,
    /// The last 32-bit word (bytes 276..280), undecoded because its layout
    /// changed after it first shipped: Linux 6.18 has
    /// `__u16 tcpi_accecn_fail_mode; __u16 tcpi_accecn_opt_seen;` (verified
    /// here: with RFC 3168 ECN negotiated the word is 0), later kernels
    /// redefine it as `tcpi_ecn_mode:2, tcpi_accecn_opt_seen:2,
    /// tcpi_accecn_fail_mode:4, tcpi_options2:24`. Same size either way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accecn_raw: Option<u32>,
}

/// Native-endian reads from a fixed-size view of the struct (the input
/// itself when it is long enough, else a zero-padded copy): with constant
/// offsets the compiler drops the bounds checks and only the "was it
/// supplied" test on `n` remains.
struct Rd<'a> {
    raw: &'a [u8; TCP_INFO_MAX_LEN],
    n: usize,
}

impl Rd<'_> {
    #[inline(always)]
    fn u8(&self, off: usize) -> u8 {
        self.raw[off]
    }
    #[inline(always)]
    fn raw_u32(&self, off: usize) -> u32 {
        u32::from_ne_bytes([
            self.raw[off],
            self.raw[off + 1],
            self.raw[off + 2],
            self.raw[off + 3],
        ])
    }
    /// A core field: 0 unless wholly supplied.
    #[inline(always)]
    fn u32(&self, off: usize) -> u32 {
        if off + 4 <= self.n {
            self.raw_u32(off)
        } else {
            0
        }
    }
    #[inline(always)]
    fn opt_u16(&self, off: usize) -> Option<u16> {
        (off + 2 <= self.n).then(|| u16::from_ne_bytes([self.raw[off], self.raw[off + 1]]))
    }
    #[inline(always)]
    fn opt_u32(&self, off: usize) -> Option<u32> {
        (off + 4 <= self.n).then(|| self.raw_u32(off))
    }
    #[inline(always)]
    fn opt_u64(&self, off: usize) -> Option<u64> {
        (off + 8 <= self.n).then(|| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&self.raw[off..off + 8]);
            u64::from_ne_bytes(b)
        })
    }
}

/// Split the `snd_wscale:4, rcv_wscale:4` byte. C bitfields are allocated
/// from the least significant bit on little-endian ABIs and from the most
/// significant bit on big-endian ones.
#[inline]
fn split_wscale(b: u8) -> (u8, u8) {
    if cfg!(target_endian = "little") {
        (b & 0x0f, b >> 4)
    } else {
        (b >> 4, b & 0x0f)
    }
}

/// Split the `delivery_rate_app_limited:1, fastopen_client_fail:2` byte.
#[inline]
fn split_flags(b: u8) -> (bool, u8) {
    if cfg!(target_endian = "little") {
        (b & 1 != 0, (b >> 1) & 3)
    } else {
        (b & 0x80 != 0, (b >> 5) & 3)
    }
}

impl TcpInfo {
    /// Decode a `struct tcp_info` of any length (see the module docs).
    /// Never fails and never panics: an empty slice yields an all-zero
    /// value with `len == 0`.
    #[inline]
    pub fn from_bytes(b: &[u8]) -> TcpInfo {
        match b.first_chunk::<TCP_INFO_MAX_LEN>() {
            Some(raw) => Self::decode(
                &Rd {
                    raw,
                    n: TCP_INFO_MAX_LEN,
                },
                b.len(),
            ),
            None => {
                let mut raw = [0u8; TCP_INFO_MAX_LEN];
                raw[..b.len()].copy_from_slice(b);
                Self::decode(
                    &Rd {
                        raw: &raw,
                        n: b.len(),
                    },
                    b.len(),
                )
            }
        }
    }

    #[inline(always)]
    fn decode(r: &Rd<'_>, supplied: usize) -> TcpInfo {
        let len = supplied.min(u16::MAX as usize) as u16;
        let (snd_wscale, rcv_wscale) = split_wscale(r.u8(6));
        let (delivery_rate_app_limited, fastopen_client_fail) = split_flags(r.u8(7));
        TcpInfo {
            len,
            state: r.u8(0),
            ca_state: r.u8(1),
            retransmits: r.u8(2),
            probes: r.u8(3),
            backoff: r.u8(4),
            options: r.u8(5),
            snd_wscale,
            rcv_wscale,
            delivery_rate_app_limited,
            fastopen_client_fail,
            rto: r.u32(8),
            ato: r.u32(12),
            snd_mss: r.u32(16),
            rcv_mss: r.u32(20),
            unacked: r.u32(24),
            sacked: r.u32(28),
            lost: r.u32(32),
            retrans: r.u32(36),
            fackets: r.u32(40),
            last_data_sent: r.u32(44),
            last_ack_sent: r.u32(48),
            last_data_recv: r.u32(52),
            last_ack_recv: r.u32(56),
            pmtu: r.u32(60),
            rcv_ssthresh: r.u32(64),
            rtt: r.u32(68),
            rttvar: r.u32(72),
            snd_ssthresh: r.u32(76),
            snd_cwnd: r.u32(80),
            advmss: r.u32(84),
            reordering: r.u32(88),
            rcv_rtt: r.u32(92),
            rcv_space: r.u32(96),
            total_retrans: r.u32(100),
            pacing_rate: r.opt_u64(104),
            max_pacing_rate: r.opt_u64(112),
            bytes_acked: r.opt_u64(120),
            bytes_received: r.opt_u64(128),
            segs_out: r.opt_u32(136),
            segs_in: r.opt_u32(140),
            notsent_bytes: r.opt_u32(144),
            min_rtt: r.opt_u32(148),
            data_segs_in: r.opt_u32(152),
            data_segs_out: r.opt_u32(156),
            delivery_rate: r.opt_u64(160),
            busy_time: r.opt_u64(168),
            rwnd_limited: r.opt_u64(176),
            sndbuf_limited: r.opt_u64(184),
            delivered: r.opt_u32(192),
            delivered_ce: r.opt_u32(196),
            bytes_sent: r.opt_u64(200),
            bytes_retrans: r.opt_u64(208),
            dsack_dups: r.opt_u32(216),
            reord_seen: r.opt_u32(220),
            rcv_ooopack: r.opt_u32(224),
            snd_wnd: r.opt_u32(228),
            rcv_wnd: r.opt_u32(232),
            rehash: r.opt_u32(236),
            total_rto: r.opt_u16(240),
            total_rto_recoveries: r.opt_u16(242),
            total_rto_time: r.opt_u32(244),
            received_ce: r.opt_u32(248),
            delivered_e1_bytes: r.opt_u32(252),
            delivered_e0_bytes: r.opt_u32(256),
            delivered_ce_bytes: r.opt_u32(260),
            received_e1_bytes: r.opt_u32(264),
            received_e0_bytes: r.opt_u32(268),
            received_ce_bytes: r.opt_u32(272),
            accecn_raw: r.opt_u32(276),
        }
    }

    /// True if the supplied struct covered the whole 104-byte core.
    pub fn has_core(&self) -> bool {
        self.len as usize >= TCP_INFO_CORE_LEN
    }

    /// Name of [`TcpInfo::state`].
    pub fn state_name(&self) -> &'static str {
        tcp_state_name(self.state)
    }

    /// Name of [`TcpInfo::ca_state`].
    pub fn ca_state_name(&self) -> &'static str {
        ca_state_name(self.ca_state)
    }

    /// Segments in flight as the kernel estimates them:
    /// `unacked - (sacked + lost) + retrans` (tcp_packets_in_flight).
    pub fn packets_in_flight(&self) -> u32 {
        self.unacked
            .saturating_sub(self.sacked.saturating_add(self.lost))
            .saturating_add(self.retrans)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full 280-byte struct with a distinct known value in every field,
    /// written at the offsets from include/uapi/linux/tcp.h.
    fn full() -> Vec<u8> {
        let mut b = vec![0u8; TCP_INFO_MAX_LEN];
        let put32 =
            |b: &mut Vec<u8>, off: usize, v: u32| b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        let put64 =
            |b: &mut Vec<u8>, off: usize, v: u64| b[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        b[0] = 1; // ESTABLISHED
        b[1] = 3; // Recovery
        b[2] = 2;
        b[3] = 1;
        b[4] = 5;
        b[5] = TCPI_OPT_TIMESTAMPS | TCPI_OPT_SACK | TCPI_OPT_WSCALE;
        // snd_wscale = 7, rcv_wscale = 9
        b[6] = if cfg!(target_endian = "little") {
            0x97
        } else {
            0x79
        };
        // app_limited = 1, fastopen_client_fail = 2
        b[7] = if cfg!(target_endian = "little") {
            0b101
        } else {
            0b1100_0000
        };
        // core u32s: 8..104 → value = 1000 + offset
        for off in (8..104).step_by(4) {
            put32(&mut b, off, 1000 + off as u32);
        }
        put64(&mut b, 104, 0x1_0000_0068);
        put64(&mut b, 112, u64::MAX);
        put64(&mut b, 120, 20_000_000);
        put64(&mut b, 128, 30_000_000);
        for off in (136..160).step_by(4) {
            put32(&mut b, off, 2000 + off as u32);
        }
        put64(&mut b, 160, 125_000_000);
        put64(&mut b, 168, 111);
        put64(&mut b, 176, 222);
        put64(&mut b, 184, 333);
        put32(&mut b, 192, 4192);
        put32(&mut b, 196, 4196);
        put64(&mut b, 200, 0x2_0000_00c8);
        put64(&mut b, 208, 0x3_0000_00d0);
        for off in (216..240).step_by(4) {
            put32(&mut b, off, 5000 + off as u32);
        }
        b[240..242].copy_from_slice(&7u16.to_ne_bytes());
        b[242..244].copy_from_slice(&3u16.to_ne_bytes());
        put32(&mut b, 244, 1500);
        for off in (248..280).step_by(4) {
            put32(&mut b, off, 6000 + off as u32);
        }
        b
    }

    #[test]
    fn full_struct_every_field() {
        let t = TcpInfo::from_bytes(&full());
        assert_eq!(t.len, 280);
        assert_eq!(
            (t.state, t.ca_state, t.retransmits, t.probes, t.backoff),
            (1, 3, 2, 1, 5)
        );
        assert_eq!(t.options, 7);
        assert_eq!((t.snd_wscale, t.rcv_wscale), (7, 9));
        assert!(t.delivery_rate_app_limited);
        assert_eq!(t.fastopen_client_fail, 2);
        assert_eq!(t.rto, 1008);
        assert_eq!(t.ato, 1012);
        assert_eq!(t.snd_mss, 1016);
        assert_eq!(t.rcv_mss, 1020);
        assert_eq!(t.unacked, 1024);
        assert_eq!(t.sacked, 1028);
        assert_eq!(t.lost, 1032);
        assert_eq!(t.retrans, 1036);
        assert_eq!(t.fackets, 1040);
        assert_eq!(t.last_data_sent, 1044);
        assert_eq!(t.last_ack_sent, 1048);
        assert_eq!(t.last_data_recv, 1052);
        assert_eq!(t.last_ack_recv, 1056);
        assert_eq!(t.pmtu, 1060);
        assert_eq!(t.rcv_ssthresh, 1064);
        assert_eq!(t.rtt, 1068);
        assert_eq!(t.rttvar, 1072);
        assert_eq!(t.snd_ssthresh, 1076);
        assert_eq!(t.snd_cwnd, 1080);
        assert_eq!(t.advmss, 1084);
        assert_eq!(t.reordering, 1088);
        assert_eq!(t.rcv_rtt, 1092);
        assert_eq!(t.rcv_space, 1096);
        assert_eq!(t.total_retrans, 1100);
        assert_eq!(t.pacing_rate, Some(0x1_0000_0068));
        assert_eq!(t.max_pacing_rate, Some(u64::MAX));
        assert_eq!(t.bytes_acked, Some(20_000_000));
        assert_eq!(t.bytes_received, Some(30_000_000));
        assert_eq!(t.segs_out, Some(2136));
        assert_eq!(t.segs_in, Some(2140));
        assert_eq!(t.notsent_bytes, Some(2144));
        assert_eq!(t.min_rtt, Some(2148));
        assert_eq!(t.data_segs_in, Some(2152));
        assert_eq!(t.data_segs_out, Some(2156));
        assert_eq!(t.delivery_rate, Some(125_000_000));
        assert_eq!(t.busy_time, Some(111));
        assert_eq!(t.rwnd_limited, Some(222));
        assert_eq!(t.sndbuf_limited, Some(333));
        assert_eq!(t.delivered, Some(4192));
        assert_eq!(t.delivered_ce, Some(4196));
        assert_eq!(t.bytes_sent, Some(0x2_0000_00c8));
        assert_eq!(t.bytes_retrans, Some(0x3_0000_00d0));
        assert_eq!(t.dsack_dups, Some(5216));
        assert_eq!(t.reord_seen, Some(5220));
        assert_eq!(t.rcv_ooopack, Some(5224));
        assert_eq!(t.snd_wnd, Some(5228));
        assert_eq!(t.rcv_wnd, Some(5232));
        assert_eq!(t.rehash, Some(5236));
        assert_eq!(t.total_rto, Some(7));
        assert_eq!(t.total_rto_recoveries, Some(3));
        assert_eq!(t.total_rto_time, Some(1500));
        assert_eq!(t.received_ce, Some(6248));
        assert_eq!(t.delivered_e1_bytes, Some(6252));
        assert_eq!(t.delivered_e0_bytes, Some(6256));
        assert_eq!(t.delivered_ce_bytes, Some(6260));
        assert_eq!(t.received_e1_bytes, Some(6264));
        assert_eq!(t.received_e0_bytes, Some(6268));
        assert_eq!(t.received_ce_bytes, Some(6272));
        assert_eq!(t.accecn_raw, Some(6276));
    }

    #[test]
    fn core_only_104() {
        let b = full();
        let t = TcpInfo::from_bytes(&b[..104]);
        assert_eq!(t.len, 104);
        assert!(t.has_core());
        assert_eq!(t.total_retrans, 1100);
        assert_eq!(t.snd_cwnd, 1080);
        assert_eq!(t.pacing_rate, None);
        assert_eq!(t.bytes_acked, None);
        assert_eq!(t.accecn_raw, None);
        // absent fields are not serialized at all
        let j = serde_json::to_string(&t).unwrap();
        assert!(!j.contains("pacing_rate"), "{j}");
        assert!(j.contains("\"total_retrans\":1100"), "{j}");
    }

    #[test]
    fn length_160_4_6_kernel() {
        let b = full();
        let t = TcpInfo::from_bytes(&b[..160]);
        assert_eq!(t.bytes_acked, Some(20_000_000));
        assert_eq!(t.data_segs_out, Some(2156));
        assert_eq!(t.delivery_rate, None);
        assert_eq!(t.busy_time, None);
    }

    #[test]
    fn length_192_and_232() {
        let b = full();
        let t = TcpInfo::from_bytes(&b[..192]);
        assert_eq!(t.delivery_rate, Some(125_000_000));
        assert_eq!(t.sndbuf_limited, Some(333));
        assert_eq!(t.delivered, None);

        let t = TcpInfo::from_bytes(&b[..232]);
        assert_eq!(t.snd_wnd, Some(5228));
        assert_eq!(t.rcv_wnd, None);
        assert_eq!(t.rehash, None);
        assert_eq!(t.total_rto, None);

        let t = TcpInfo::from_bytes(&b[..248]);
        assert_eq!(t.total_rto_time, Some(1500));
        assert_eq!(t.received_ce, None);
    }

    #[test]
    fn field_partly_beyond_length_is_absent() {
        let b = full();
        // 110 bytes: pacing_rate (104..112) is cut in the middle.
        let t = TcpInfo::from_bytes(&b[..110]);
        assert_eq!(t.pacing_rate, None);
        // 242 bytes: total_rto present, recoveries not.
        let t = TcpInfo::from_bytes(&b[..242]);
        assert_eq!(t.total_rto, Some(7));
        assert_eq!(t.total_rto_recoveries, None);
    }

    #[test]
    fn longer_than_known_is_accepted() {
        let mut b = full();
        b.extend_from_slice(&[0xee; 40]);
        let t = TcpInfo::from_bytes(&b);
        assert_eq!(t.len, 320);
        assert_eq!(
            t,
            TcpInfo {
                len: 320,
                ..TcpInfo::from_bytes(&full())
            }
        );
    }

    #[test]
    fn short_and_empty_never_panic() {
        let b = full();
        for n in 0..b.len() {
            let t = TcpInfo::from_bytes(&b[..n]);
            assert_eq!(t.len as usize, n);
        }
        let t = TcpInfo::from_bytes(&[]);
        assert_eq!(t.rto, 0);
        assert!(!t.has_core());
        let t = TcpInfo::from_bytes(&b[..14]);
        assert_eq!(t.state, 1);
        assert_eq!(t.rto, 1008); // 8..12 present
        assert_eq!(t.ato, 0); // 12..16 absent
    }

    #[test]
    fn json_round_trip_keeps_absence() {
        let b = full();
        for n in [104, 160, 232, 280] {
            let t = TcpInfo::from_bytes(&b[..n]);
            let j = serde_json::to_string(&t).unwrap();
            let back: TcpInfo = serde_json::from_str(&j).unwrap();
            assert_eq!(back, t, "{n}");
        }
    }

    #[test]
    fn names() {
        assert_eq!(tcp_state_name(1), "ESTABLISHED");
        assert_eq!(tcp_state_name(10), "LISTEN");
        assert_eq!(ca_state_name(4), "Loss");
        let t = TcpInfo::from_bytes(&full());
        assert_eq!(t.state_name(), "ESTABLISHED");
        assert_eq!(t.ca_state_name(), "Recovery");
        // unacked 1024 - (sacked 1028 + lost 1032) saturates to 0, + retrans 1036
        assert_eq!(t.packets_in_flight(), 1036);
    }
}
