//! Live packets from an interface through libpcap (loaded when `watch`
//! starts: `libpcap.rs`).
//!
//! libpcap on Linux reads an AF_PACKET ring the kernel fills and the reader
//! takes packets from without a system call each: TPACKET_V3 blocks, or, in
//! immediate mode (packets handed over as they arrive, which a live verdict
//! needs), TPACKET_V2 frames. It is the library every other tool (tcpdump,
//! tshark) uses, with its filter compiler and its error messages.
//! bench/watch.sh measures it against a TPACKET_V3 ring read directly
//! (crates/cli/examples/capture_floor.rs) and `tcpdump -w /dev/null`.

use super::libpcap::{self, Capture, Next};
use std::fmt;
use tcpwhy_wire::{Frame, LinkType};

/// Bytes kept of each packet. The longest header stack tcpwhy decodes is
/// 122 bytes (Ethernet with two VLAN tags 22, IPv6 40, TCP with the full
/// 40 bytes of options 60); the rest is payload, of which the diagnosis
/// reads at most the first `TURN_HEAD_BYTES` (160) of a request or
/// response (docs/latency.md). 256 keeps every header and most of those
/// heads, at a sixth of a full 1,500-byte frame's ring space.
pub const WATCH_SNAPLEN_DEFAULT: u32 = 256;

/// The kernel ring libpcap asks for (pcap_set_buffer_size). At 1 Mpps of
/// 256-byte snaps (about 300 bytes a frame in TPACKET_V3 blocks) 64 MiB
/// hold 0.2 s of packets: what a periodic diagnosis (docs/watch.md) may
/// keep the reader away without a kernel drop.
pub const WATCH_BUFFER_DEFAULT_MIB: u32 = 64;

/// The read timeout: a quiet interface still returns to the loop this
/// often, to redraw, diagnose and see Ctrl-C. libpcap's own read timeout
/// does not: on Linux its poll() can wait for ever on a quiet interface
/// (with TPACKET_V3 the timeout becomes the ring's block-retire timeout;
/// seen here in immediate mode too: pcap_next_ex never returned on an idle
/// `lo`), so the capture is non-blocking and tcpwhy polls its descriptor.
pub const READ_TIMEOUT_MS: i32 = 100;

/// Why an interface could not be watched; each maps to an exit code.
#[derive(Debug)]
pub enum OpenError {
    /// An unknown interface or a bad filter: libpcap's own message (exit 2).
    Usage(String),
    /// Not allowed to capture (exit 5).
    Permission(String),
    /// libpcap is not installed, or too old (exit 6).
    Missing(String),
    /// Anything else (exit 1).
    Other(String),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Usage(m) | OpenError::Missing(m) | OpenError::Other(m) => f.write_str(m),
            OpenError::Permission(m) => write!(
                f,
                "{m}\ncapturing packets needs the CAP_NET_RAW capability (run as root, or `setcap cap_net_raw,cap_net_admin=eip` on the binary)"
            ),
        }
    }
}

/// Loads libpcap (once): what `watch` does first, so that a system
/// without it is told so before anything else starts.
pub fn load_libpcap() -> Result<&'static libpcap::Lib, OpenError> {
    libpcap::load().map_err(|e| OpenError::Missing(e.to_string()))
}

/// An open live capture.
pub struct Source {
    cap: Capture,
    /// The capture's descriptor, polled when the ring is empty (-1: none,
    /// and the poll only waits).
    fd: std::os::fd::RawFd,
    pub link: LinkType,
    /// The DLT the interface reported.
    pub dlt: i32,
    /// pcap_activate's warning (the capture runs regardless).
    pub warning: Option<String>,
    frames: u64,
}

/// What one read gave.
pub enum Read<'a> {
    Frame(Frame<'a>),
    /// Nothing within the read timeout.
    Quiet,
    /// The interface went away or the capture failed: libpcap's message.
    Ended(String),
}

/// The kernel's counters for this capture (pcap_stats: PACKET_STATISTICS).
#[derive(Debug, Clone, Copy, Default)]
pub struct Drops {
    /// No room in the ring: the reader fell behind.
    pub dropped: u64,
    /// Dropped by the interface or its driver.
    pub if_dropped: u64,
}

impl Source {
    pub fn open(iface: &str, filter: &str, snaplen: u32, buffer_mib: u32, promisc: bool) -> Result<Source, OpenError> {
        let lib = load_libpcap()?;
        let mut cap = Capture::create(lib, iface).map_err(|e| classify(iface, e))?;
        // The `any` device has no promiscuous mode: libpcap would activate
        // it with a warning that says nothing useful here.
        cap.set_promisc(promisc && iface != "any");
        cap.set_snaplen(snaplen.min(i32::MAX as u32) as i32);
        cap.set_immediate_mode(true);
        cap.set_buffer_size((buffer_mib.max(1) as i32).saturating_mul(1 << 20));
        cap.set_timeout(READ_TIMEOUT_MS);
        // Where only microseconds are offered the packets' times are converted.
        cap.set_nanosecond_precision();
        let warning = cap.activate().map_err(|e| classify(iface, e))?.map(|w| format!("{iface}: {w}"));
        cap.set_nonblock().map_err(|e| OpenError::Other(format!("{iface}: {e}")))?;
        if !filter.trim().is_empty() {
            cap.set_filter(filter).map_err(|e| OpenError::Usage(format!("bad filter {filter:?}: {e}")))?;
        }
        let dlt = cap.datalink();
        let fd = cap.selectable_fd();
        Ok(Source { cap, fd, link: LinkType::from_linktype(dlt), dlt, warning, frames: 0 })
    }

    /// The next packet, or why there is none.
    #[inline]
    pub fn next(&mut self) -> Read<'_> {
        match self.cap.next_packet() {
            Next::Packet(p) => {
                self.frames += 1;
                Read::Frame(Frame {
                    number: self.frames,
                    time_ns: p.time_ns,
                    link: self.link,
                    interface: 0,
                    data: p.data,
                    orig_len: p.len,
                })
            }
            Next::Timeout => {
                // Non-blocking and nothing in the ring: wait for a packet.
                let mut p = libc::pollfd { fd: self.fd, events: libc::POLLIN, revents: 0 };
                // SAFETY: one pollfd on the stack.
                unsafe { libc::poll(&mut p, 1, READ_TIMEOUT_MS) };
                Read::Quiet
            }
            Next::Error(m) => Read::Ended(if m.is_empty() { "the capture ended".into() } else { m }),
            Next::End => Read::Ended("the capture ended".into()),
        }
    }

    pub fn frames(&self) -> u64 {
        self.frames
    }

    pub fn drops(&mut self) -> Option<Drops> {
        self.cap
            .stats()
            .ok()
            .map(|s| Drops { dropped: s.dropped as u64, if_dropped: s.if_dropped as u64 })
    }
}

/// libpcap's error, sorted into what the user did (a name that is not an
/// interface), what the system refused (permissions) and the rest: by
/// pcap_activate's status code, and by the message and /sys/class/net where
/// the code is the generic one.
fn classify(iface: &str, e: libpcap::Error) -> OpenError {
    let m = e.message;
    let lower = m.to_ascii_lowercase();
    let exists = iface == "any" || std::path::Path::new("/sys/class/net").join(iface).exists();
    let denied = matches!(e.status, libpcap::PCAP_ERROR_PERM_DENIED | libpcap::PCAP_ERROR_PROMISC_PERM_DENIED);
    if denied || lower.contains("permission") || lower.contains("not permitted") {
        OpenError::Permission(format!("{iface}: {m}"))
    } else if e.status == libpcap::PCAP_ERROR_NO_SUCH_DEVICE || !exists || lower.contains("no such device") {
        let m = if m.is_empty() { "No such device exists".into() } else { m };
        OpenError::Usage(format!("{iface}: {m}"))
    } else {
        OpenError::Other(format!("{iface}: {m}"))
    }
}

/// Enters the named network namespace (`ip netns`) on this thread, to
/// open the capture in it; dropping the guard returns to the namespace
/// tcpwhy started in. The capture's socket stays bound to the device it
/// was opened on, and tcpwhy itself is then no process of that namespace
/// (`ip netns pids`), so whoever removes the namespace does not take the
/// watch with it: the watch sees the interface go away and reports.
pub fn enter_netns(name: &str) -> Result<NetnsGuard, String> {
    use std::os::fd::AsRawFd;
    let home = std::fs::File::open("/proc/thread-self/ns/net").map_err(|e| format!("this thread's network namespace: {e}"))?;
    let path = std::path::Path::new("/run/netns").join(name);
    let f = std::fs::File::open(&path).map_err(|e| format!("network namespace {name}: {e}"))?;
    // SAFETY: setns on an open namespace file descriptor.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if r != 0 {
        return Err(format!("cannot enter network namespace {name}: {}", std::io::Error::last_os_error()));
    }
    Ok(NetnsGuard { home })
}

pub struct NetnsGuard {
    home: std::fs::File,
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: setns back to the namespace file opened before leaving it.
        unsafe { libc::setns(self.home.as_raw_fd(), libc::CLONE_NEWNET) };
    }
}
