//! Sockets with options set before listen()/connect(), I/O that honours the
//! run's deadline and stop flag, clocks, and TCP_INFO.

use std::io::{self, Read, Write};
use std::mem::{size_of, zeroed};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::clock::{stamp, Stamp};
use crate::report::{ConnReport, ConnRole};
use crate::spec::{available_congestion_controls, SocketOpts};

/// How long one blocking socket call may wait before the loop around it
/// looks at the stop flag and the deadline again.
const POLL_SLICE: Duration = Duration::from_millis(100);

/// Buffer size requested from getsockopt(TCP_INFO).
pub const TCP_INFO_REQUEST: usize = 512;

/// Adds what we were doing to an error, keeping its kind.
pub(crate) fn ctx(e: io::Error, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// The run's controls: the caller's stop flag, an internal abort flag (set
/// when one connection of a parallel run fails), and the deadline.
pub(crate) struct Ctl<'a> {
    stop: &'a AtomicBool,
    abort: AtomicBool,
    deadline: Instant,
    timeout_s: f64,
}

impl<'a> Ctl<'a> {
    pub fn new(stop: &'a AtomicBool, timeout_s: f64) -> Self {
        Ctl {
            stop,
            abort: AtomicBool::new(false),
            deadline: Instant::now() + Duration::from_secs_f64(timeout_s),
            timeout_s,
        }
    }

    pub fn check(&self, doing: &str) -> io::Result<()> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(io::Error::new(io::ErrorKind::Interrupted, format!("stopped while {doing}")));
        }
        if self.abort.load(Ordering::Relaxed) {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                format!("gave up while {doing}: another connection of this run failed"),
            ));
        }
        if Instant::now() >= self.deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("timed out (timeout_s = {} s) while {doing}", self.timeout_s),
            ));
        }
        Ok(())
    }

    pub fn abort(&self) {
        self.abort.store(true, Ordering::Relaxed);
    }

    /// Sleeps until `t`, waking up to look at the stop flag and deadline.
    pub fn sleep_until(&self, t: Instant, doing: &str) -> io::Result<()> {
        loop {
            self.check(doing)?;
            let now = Instant::now();
            if now >= t {
                return Ok(());
            }
            std::thread::sleep((t - now).min(POLL_SLICE));
        }
    }
}

fn os_err(what: impl std::fmt::Display) -> io::Error {
    ctx(io::Error::last_os_error(), what)
}

fn setsockopt_raw(fd: RawFd, level: libc::c_int, name: libc::c_int, val: *const libc::c_void, len: usize) -> io::Result<()> {
    // SAFETY: val points to len readable bytes (callers pass a reference or a slice).
    let r = unsafe { libc::setsockopt(fd, level, name, val, len as libc::socklen_t) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, val: &T) -> io::Result<()> {
    setsockopt_raw(fd, level, name, val as *const T as *const libc::c_void, size_of::<T>())
}

fn getsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v and len are valid for writing.
    let r = unsafe { libc::getsockopt(fd, level, name, &mut v as *mut _ as *mut libc::c_void, &mut len) };
    if r == 0 {
        Ok(v)
    } else {
        Err(io::Error::last_os_error())
    }
}

fn set_congestion(fd: RawFd, name: &str) -> io::Result<()> {
    setsockopt_raw(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_ptr() as *const libc::c_void, name.len())
        .map_err(|e| {
            let avail = available_congestion_controls().map(|v| v.join(" ")).unwrap_or_else(|| "unknown".into());
            let why = match e.raw_os_error() {
                Some(libc::ENOENT) => "no such congestion control in this kernel (module not loaded?)",
                Some(libc::EPERM) => {
                    "not in net.ipv4.tcp_allowed_congestion_control and the process lacks CAP_NET_ADMIN"
                }
                _ => "rejected by the kernel",
            };
            io::Error::new(
                e.kind(),
                format!("setsockopt TCP_CONGESTION {name:?}: {why} ({e}); available: {avail}"),
            )
        })
}

/// The socket's congestion control (getsockopt TCP_CONGESTION).
pub(crate) fn get_congestion(fd: RawFd) -> io::Result<String> {
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf and len are valid for writing.
    let r = unsafe {
        libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, buf.as_mut_ptr() as *mut libc::c_void, &mut len)
    };
    if r != 0 {
        return Err(os_err("getsockopt TCP_CONGESTION"));
    }
    let b = &buf[..len as usize];
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    Ok(String::from_utf8_lossy(&b[..end]).into_owned())
}

/// Sets a buffer size, with the *FORCE variant first (root may exceed
/// net.core.[rw]mem_max), falling back to the plain one.
fn set_buf(fd: RawFd, force: libc::c_int, plain: libc::c_int, val: u32, what: &str) -> io::Result<()> {
    let v = val.min(i32::MAX as u32) as libc::c_int;
    match setsockopt(fd, libc::SOL_SOCKET, force, &v) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            setsockopt(fd, libc::SOL_SOCKET, plain, &v).map_err(|e| ctx(e, format!("setsockopt {what}={val}")))
        }
        Err(e) => Err(ctx(e, format!("setsockopt {what}={val}"))),
    }
}

fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, v: libc::c_int, what: &str) -> io::Result<()> {
    setsockopt(fd, level, name, &v).map_err(|e| ctx(e, format!("setsockopt {what}={v}")))
}

/// SO_TIMESTAMPNS on: the kernel reports each read's receive timestamp.
pub(crate) fn enable_rx_stamps(fd: RawFd) -> io::Result<()> {
    set_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1, "SO_TIMESTAMPNS")
}

/// One recvmsg() on `fd` into `buf`: the bytes read and the kernel's
/// receive timestamp (SCM_TIMESTAMPNS) when it sent one.
fn recv_stamped(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
    // Room for one cmsghdr and a timespec, u64-aligned.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: zeroed msghdr is valid; the pointers set below outlive the call.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<[u64; 8]>() as _;
    // SAFETY: fd is an open socket; msg points to live buffers.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: the kernel filled msg_control up to msg_controllen; CMSG_* walk
    // only within it.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                stamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, stamp))
}

/// How long [`await_rx_stamps`] waits for the kernel to start stamping.
const RX_STAMPS_WAIT: Duration = Duration::from_secs(2);

/// Waits until the kernel stamps received packets, at most [`RX_STAMPS_WAIT`];
/// returns whether it does. The host's first SO_TIMESTAMPNS socket turns
/// stamping on through a deferred work item (net/core/dev.c,
/// `net_enable_timestamp` schedules `netstamp_work`, which flips the static
/// key), and so does the first one after the last closed: segments that
/// arrive before that work ran carry no stamp. On a loaded host that can
/// outlast a whole request on loopback.
///
/// The probe is a TCP connection to itself on `ip` (the loopback address of
/// its family when unspecified), because only TCP's receive path says
/// whether the segment was stamped: `tcp_recvmsg` reports `skb->tstamp`
/// only when it is set, while a UDP or raw socket's `__sock_recv_timestamp`
/// fills a missing stamp with the time of the read ("race occurred between
/// timestamp enabling and packet receiving"), so a UDP probe passes before
/// stamping is live. When the probe cannot run (no loopback in the
/// namespace), it returns false at once and the stamps stay what they are:
/// optional.
pub(crate) fn await_rx_stamps(ip: std::net::IpAddr) -> bool {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let ip = match ip {
        IpAddr::V4(a) if a.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(a) if a.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        a => a,
    };
    let Ok(listener) = TcpListener::bind(SocketAddr::new(ip, 0)) else { return false };
    let Ok(addr) = listener.local_addr() else { return false };
    let Ok(mut tx) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else { return false };
    let Ok((rx, _)) = listener.accept() else { return false };
    if enable_rx_stamps(rx.as_raw_fd()).is_err() || rx.set_read_timeout(Some(Duration::from_millis(20))).is_err() {
        return false;
    }
    let _ = tx.set_nodelay(true);
    let start = Instant::now();
    let mut buf = [0u8; 64];
    while start.elapsed() < RX_STAMPS_WAIT {
        if tx.write_all(&[0]).is_err() {
            return false;
        }
        match recv_stamped(rx.as_raw_fd(), &mut buf) {
            Ok((n, Some(_))) if n > 0 => return true,
            Ok((0, _)) => return false,
            Ok(_) => std::thread::sleep(Duration::from_millis(1)),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted) => {}
            Err(_) => return false,
        }
    }
    false
}

/// Applies `opts`. `pre` = before listen()/connect(): also the buffer sizes
/// and TCP_MAXSEG (which must be set before the handshake to matter: window
/// scaling and the advertised MSS are chosen then).
pub(crate) fn apply_opts(fd: RawFd, opts: &SocketOpts, pre: bool) -> io::Result<()> {
    if pre {
        if let Some(v) = opts.rcvbuf {
            set_buf(fd, libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, v, "SO_RCVBUF")?;
        }
        if let Some(v) = opts.sndbuf {
            set_buf(fd, libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, v, "SO_SNDBUF")?;
        }
        if let Some(v) = opts.maxseg {
            set_int(fd, libc::IPPROTO_TCP, libc::TCP_MAXSEG, v as libc::c_int, "TCP_MAXSEG")?;
        }
    }
    if let Some(cc) = &opts.congestion {
        set_congestion(fd, cc)?;
    }
    if opts.nodelay {
        set_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1, "TCP_NODELAY")?;
    }
    if opts.quickack {
        set_int(fd, libc::IPPROTO_TCP, libc::TCP_QUICKACK, 1, "TCP_QUICKACK")?;
    }
    if let Some(bps) = opts.pacing_rate_bps {
        // The kernel takes bytes per second (an unsigned long).
        let bytes_per_s: u64 = bps / 8;
        setsockopt(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, &bytes_per_s)
            .map_err(|e| ctx(e, format!("setsockopt SO_MAX_PACING_RATE={bytes_per_s} bytes/s")))?;
    }
    if let Some(v) = opts.notsent_lowat {
        set_int(fd, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, v as libc::c_int, "TCP_NOTSENT_LOWAT")?;
    }
    Ok(())
}

fn to_sockaddr(a: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data; all-zero is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
    let len = match a {
        SocketAddr::V4(v4) => {
            // SAFETY: sockaddr_storage is large and aligned enough for sockaddr_in.
            let sin = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = v4.port().to_be();
            sin.sin_addr = libc::in_addr { s_addr: u32::from_ne_bytes(v4.ip().octets()) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            // SAFETY: sockaddr_storage is large and aligned enough for sockaddr_in6.
            let sin6 = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = v6.port().to_be();
            sin6.sin6_flowinfo = v6.flowinfo();
            sin6.sin6_addr = libc::in6_addr { s6_addr: v6.ip().octets() };
            sin6.sin6_scope_id = v6.scope_id();
            size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

fn new_socket(addr: &SocketAddr, nonblock: bool) -> io::Result<OwnedFd> {
    let domain = if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    let mut ty = libc::SOCK_STREAM | libc::SOCK_CLOEXEC;
    if nonblock {
        ty |= libc::SOCK_NONBLOCK;
    }
    // SAFETY: plain socket(2) call.
    let fd = unsafe { libc::socket(domain, ty, libc::IPPROTO_TCP) };
    if fd < 0 {
        return Err(os_err("socket"));
    }
    // SAFETY: fd is a fresh descriptor that we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Waits for `events` on `fd` for at most one poll slice. Ok(true) if ready.
fn poll_slice(fd: RawFd, events: libc::c_short) -> io::Result<bool> {
    let mut p = libc::pollfd { fd, events, revents: 0 };
    // SAFETY: p is a valid pollfd.
    let r = unsafe { libc::poll(&mut p, 1, POLL_SLICE.as_millis() as libc::c_int) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(ctx(e, "poll"));
    }
    Ok(r > 0)
}

/// A listening socket with `opts` applied before listen(); non-blocking so
/// that `accept` can watch the controls.
pub(crate) fn listen(addr: SocketAddr, opts: &SocketOpts) -> io::Result<TcpListener> {
    let fd = new_socket(&addr, false)?;
    let raw = fd.as_raw_fd();
    set_int(raw, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1, "SO_REUSEADDR")?;
    apply_opts(raw, opts, true)?;
    let (ss, len) = to_sockaddr(&addr);
    // SAFETY: ss/len describe a valid sockaddr.
    if unsafe { libc::bind(raw, &ss as *const _ as *const libc::sockaddr, len) } != 0 {
        return Err(os_err(format!("bind {addr}")));
    }
    // SAFETY: plain listen(2).
    if unsafe { libc::listen(raw, 1024) } != 0 {
        return Err(os_err(format!("listen {addr}")));
    }
    let l = TcpListener::from(fd);
    l.set_nonblocking(true)?;
    Ok(l)
}

/// Accepts one connection: (stream, peer, time accept() returned).
pub(crate) fn accept(l: &TcpListener, ctl: &Ctl, doing: &str) -> io::Result<(TcpStream, Stamp)> {
    loop {
        ctl.check(doing)?;
        match l.accept() {
            Ok((s, _)) => {
                let t = stamp();
                s.set_nonblocking(false)?;
                return Ok((s, t));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                poll_slice(l.as_raw_fd(), libc::POLLIN)?;
            }
            Err(e)
                if matches!(e.kind(), io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted) => {}
            Err(e) => return Err(ctx(e, "accept")),
        }
    }
}

/// Connects with `opts` applied before connect(): (stream, connect() called,
/// handshake done).
pub(crate) fn connect(addr: SocketAddr, opts: &SocketOpts, ctl: &Ctl) -> io::Result<(TcpStream, Stamp, Stamp)> {
    let fd = new_socket(&addr, true)?;
    let raw = fd.as_raw_fd();
    apply_opts(raw, opts, true)?;
    let (ss, len) = to_sockaddr(&addr);
    let doing = format!("connecting to {addr}");
    ctl.check(&doing)?;
    let start = stamp();
    // SAFETY: ss/len describe a valid sockaddr.
    let r = unsafe { libc::connect(raw, &ss as *const _ as *const libc::sockaddr, len) };
    if r != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(ctx(e, format!("connect {addr}")));
        }
        while !poll_slice(raw, libc::POLLOUT)? {
            ctl.check(&doing)?;
        }
        let so_error = getsockopt_int(raw, libc::SOL_SOCKET, libc::SO_ERROR)?;
        if so_error != 0 {
            return Err(ctx(io::Error::from_raw_os_error(so_error), format!("connect {addr}")));
        }
    }
    let connected = stamp();
    let s = TcpStream::from(fd);
    s.set_nonblocking(false)?;
    Ok((s, start, connected))
}

/// Raw getsockopt(TCP_INFO) bytes, as many as the kernel returned for a
/// 512-byte request.
pub fn tcp_info_raw(sock: &impl AsRawFd) -> io::Result<Vec<u8>> {
    let mut buf = [0u8; TCP_INFO_REQUEST];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf and len are valid for writing.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if r != 0 {
        return Err(os_err("getsockopt TCP_INFO"));
    }
    Ok(buf[..(len as usize).min(buf.len())].to_vec())
}

/// Lower-case hex of `b`.
pub fn to_hex(b: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for &x in b {
        s.push(D[(x >> 4) as usize] as char);
        s.push(D[(x & 15) as usize] as char);
    }
    s
}

/// Inverse of [`to_hex`] (for decoding `tcp_info_hex`).
pub fn from_hex(s: &str) -> Result<Vec<u8>, crate::error::Error> {
    if s.len() & 1 == 1 {
        return Err(crate::error::Error::OddHex { len: s.len() });
    }
    let digit = |b: u8| (b as char).to_digit(16);
    s.as_bytes()
        .chunks(2)
        .enumerate()
        .map(|(i, pair)| match (digit(pair[0]), digit(pair[1])) {
            (Some(h), Some(l)) => Ok((h * 16 + l) as u8),
            _ => Err(crate::error::Error::BadHex { at: i * 2, found: String::from_utf8_lossy(pair).into_owned() }),
        })
        .collect()
}

/// A connected socket with app-level byte counters; every call honours the
/// run's controls.
pub(crate) struct Conn<'c> {
    pub stream: TcpStream,
    ctl: &'c Ctl<'c>,
    quickack: bool,
    /// Reads ask the kernel for its receive timestamps (SO_TIMESTAMPNS).
    rx_stamps: bool,
    /// CLOCK_REALTIME ns at which the kernel received the last segment the
    /// latest read() returned bytes of (the skb timestamp, the one a packet
    /// capture on the same host shows); None before a read or when the
    /// kernel gave none.
    pub last_rx_ns: Option<u64>,
    /// `last_rx_ns` of the first read() returning bytes since
    /// `restart_rx_stamps`.
    pub first_rx_ns: Option<u64>,
    pub sent: u64,
    pub received: u64,
    pub local: SocketAddr,
    pub remote: SocketAddr,
}

impl<'c> Conn<'c> {
    pub fn new(stream: TcpStream, ctl: &'c Ctl<'c>, opts: &SocketOpts) -> io::Result<Self> {
        stream.set_read_timeout(Some(POLL_SLICE))?;
        stream.set_write_timeout(Some(POLL_SLICE))?;
        let local = stream.local_addr()?;
        let remote = stream.peer_addr()?;
        Ok(Conn { stream, ctl, quickack: opts.quickack, rx_stamps: false, last_rx_ns: None, first_rx_ns: None, sent: 0, received: 0, local, remote })
    }

    /// From now on each read() also takes the kernel's receive timestamp of
    /// the data (SO_TIMESTAMPNS; for TCP, tcp_recvmsg reports the timestamp
    /// of the last skb it copied from): an oracle of when bytes reached this
    /// host that a late wake-up of this process does not shift.
    pub fn enable_rx_stamps(&mut self) -> io::Result<()> {
        enable_rx_stamps(self.fd())?;
        self.rx_stamps = true;
        Ok(())
    }

    /// Forgets the kernel receive timestamps taken so far (a new message).
    pub fn restart_rx_stamps(&mut self) {
        (self.first_rx_ns, self.last_rx_ns) = (None, None);
    }

    pub fn ctl(&self) -> &'c Ctl<'c> {
        self.ctl
    }

    /// One read(); 0 = EOF. Re-arms TCP_QUICKACK (the kernel clears it).
    pub fn read(&mut self, buf: &mut [u8], doing: &str) -> io::Result<usize> {
        loop {
            self.ctl.check(doing)?;
            let got = if self.rx_stamps { self.recv_stamped(buf) } else { self.stream.read(buf) };
            match got {
                Ok(n) => {
                    self.received += n as u64;
                    if n > 0 && self.first_rx_ns.is_none() {
                        self.first_rx_ns = self.last_rx_ns;
                    }
                    if self.quickack && n > 0 {
                        set_int(self.stream.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_QUICKACK, 1, "TCP_QUICKACK")?;
                    }
                    return Ok(n);
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ctx(e, doing)),
            }
        }
    }

    /// One recvmsg() into `buf`; sets `last_rx_ns` from an SCM_TIMESTAMPNS
    /// control message when it returns data.
    fn recv_stamped(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let (n, stamp) = recv_stamped(self.fd(), buf)?;
        if n > 0 {
            self.last_rx_ns = stamp;
        }
        Ok(n)
    }

    pub fn write_all(&mut self, mut buf: &[u8], doing: &str) -> io::Result<()> {
        while !buf.is_empty() {
            self.ctl.check(doing)?;
            match self.stream.write(buf) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, format!("write returned 0 while {doing}"))),
                Ok(n) => {
                    self.sent += n as u64;
                    buf = &buf[n..];
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ctx(e, doing)),
            }
        }
        Ok(())
    }

    pub fn read_exact(&mut self, buf: &mut [u8], doing: &str) -> io::Result<()> {
        let mut got = 0;
        while got < buf.len() {
            let n = self.read(&mut buf[got..], doing)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("peer closed after {got} of {} bytes while {doing}", buf.len()),
                ));
            }
            got += n;
        }
        Ok(())
    }

    pub fn shutdown_write(&self) -> io::Result<()> {
        self.stream.shutdown(Shutdown::Write).map_err(|e| ctx(e, "shutdown(SHUT_WR)"))
    }

    /// Reads until the peer's FIN; any data is a protocol error.
    pub fn expect_eof(&mut self, doing: &str) -> io::Result<()> {
        let mut b = [0u8; 64];
        let n = self.read(&mut b, doing)?;
        if n != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unexpected {n} bytes from the peer while {doing}"),
            ));
        }
        Ok(())
    }

    pub fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    /// (congestion control, SO_SNDBUF, SO_RCVBUF) as the kernel has them now.
    pub fn effective(&self) -> (String, u32, u32) {
        let fd = self.fd();
        let cc = get_congestion(fd).unwrap_or_default();
        let snd = getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF).unwrap_or(0) as u32;
        let rcv = getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF).unwrap_or(0) as u32;
        (cc, snd, rcv)
    }
}


/// Builds a ConnReport: takes TCP_INFO and the effective options, stamps
/// `end`, then closes the socket.
pub(crate) struct ConnTimes {
    pub start: Stamp,
    pub connected: Stamp,
    pub first: Option<Stamp>,
    pub last: Option<Stamp>,
}

pub(crate) fn finish_conn(
    conn: Conn,
    index: u32,
    role: ConnRole,
    t: ConnTimes,
    app_acks: u64,
    requests: u32,
) -> io::Result<ConnReport> {
    let info = tcp_info_raw(&conn.stream)?;
    let (congestion, sndbuf, rcvbuf) = conn.effective();
    let end = stamp();
    let goodput_bps = match (role, t.first, t.last) {
        (ConnRole::Receiver, Some(f), Some(l)) if l.monotonic_ns > f.monotonic_ns => {
            Some(conn.received as f64 * 8.0 / l.secs_since(&f))
        }
        _ => None,
    };
    let r = ConnReport {
        index,
        role,
        local: conn.local,
        remote: conn.remote,
        bytes_sent: conn.sent,
        bytes_received: conn.received,
        start: t.start,
        connected: t.connected,
        first_byte: t.first,
        last_byte: t.last,
        end,
        goodput_bps,
        app_acks,
        requests,
        congestion,
        sndbuf,
        rcvbuf,
        tcp_info_hex: to_hex(&info),
    };
    drop(conn);
    Ok(r)
}
