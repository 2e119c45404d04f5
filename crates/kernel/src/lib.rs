//! Kernel evidence: sock_diag tcp_info sampling, tracefs tcp_probe, sysctl snapshots.
//!
//! - [`tcp_info`]: length-tolerant `struct tcp_info` decoding.
//! - [`sockdiag`]: NETLINK_SOCK_DIAG dumps of TCP sockets (tcp_info,
//!   congestion control, skmeminfo, BBR/Vegas/DCTCP info), in any named
//!   network namespace, plus `getsockopt(TCP_INFO)`.
//! - [`tracefs`]: `tcp:tcp_probe`, `tcp:tcp_retransmit_skb` and
//!   `tcp:tcp_cong_state_set` in a private ftrace instance, on the `mono`
//!   clock (same as [`sockdiag::SocketSample::mono_ns`]).
//! - [`sysctl`]: snapshots and writes of TCP sysctls per namespace.
//! - [`netns`]: run a closure inside a named network namespace.

pub mod netns;
pub mod sockdiag;
pub mod sysctl;
pub mod tcp_info;
pub mod tracefs;

pub use sockdiag::{getsockopt_tcp_info, Filter, SkMemInfo, SockDiag, SocketSample};
pub use tcp_info::TcpInfo;
pub use tracefs::{TcpProbe, TcpProbeOptions, TraceEvent};

/// CLOCK_MONOTONIC now, ns (the clock of `mono_ns` fields).
pub fn mono_now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
