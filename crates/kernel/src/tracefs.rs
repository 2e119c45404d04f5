//! TCP tracepoints (`tcp:tcp_probe`, `tcp:tcp_retransmit_skb`,
//! `tcp:tcp_cong_state_set`) through tracefs, in a private ftrace instance.
//!
//! [`TcpProbe::start`] creates `instances/tcpwhy-<pid>-<n>` so the global
//! tracing state (and anybody else's instances) is untouched, sets the
//! instance's `trace_clock` to `mono` (CLOCK_MONOTONIC: the same clock as
//! [`crate::sockdiag::SocketSample::mono_ns`]), enables the events with an
//! optional port filter, and reads the instance's `trace_pipe` on a thread,
//! parsing each line into a [`TraceEvent`].
//!
//! Tracepoints are global, not per network namespace: the port filter is
//! what isolates one flow. Lines look like this (Linux 6.18):
//!
//! ```text
//!  python3-4401 [000] ..s2.  7783.675931: tcp_probe: family=AF_INET src=127.0.0.1:5999 dest=127.0.0.1:34916 mark=0x0 data_len=32741 snd_nxt=0x35ac4a3f snd_una=0x35ac4a3f snd_cwnd=10 ssthresh=2147483647 snd_wnd=65536 srtt=32 rcv_wnd=65483 sock_cookie=71 skbaddr=000000000363a948 skaddr=000000009a68297c
//!  python3-4401 [000] ..s2.  7783.675863: tcp_cong_state_set: family=AF_INET sport=5999 dport=34916 saddr=127.0.0.1 daddr=127.0.0.1 saddrv6=::ffff:127.0.0.1 daddrv6=::ffff:127.0.0.1 cong_state=0
//!  <idle>-0 [001] ..s2.  7790.000001: tcp_retransmit_skb: skbaddr=... skaddr=... family=AF_INET sport=5999 dport=34916 saddr=127.0.0.1 daddr=127.0.0.1 saddrv6=... daddrv6=... state=TCP_ESTABLISHED err=0
//! ```
//!
//! `srtt` is `srtt_us >> 3`, i.e. µs; `sock_cookie` is printed in hex
//! (`%llx`); `snd_nxt`/`snd_una`/`mark` with `%#x`. The text timestamp has
//! µs resolution.

use std::collections::VecDeque;
use std::ffi::CString;
use std::fs;
use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};

/// Prefix of every ftrace instance this module creates.
pub const INSTANCE_PREFIX: &str = "tcpwhy-";

const CANDIDATES: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

static INSTANCE_COUNTER: AtomicU32 = AtomicU32::new(0);

fn is_tracefs_root(p: &Path) -> bool {
    p.join("instances").is_dir() && p.join("events").is_dir()
}

/// The mounted tracefs root (`/sys/kernel/tracing`, else
/// `/sys/kernel/debug/tracing`).
pub fn tracefs_root() -> io::Result<PathBuf> {
    for c in CANDIDATES {
        let p = Path::new(c);
        if is_tracefs_root(p) {
            return Ok(p.to_path_buf());
        }
    }
    let root = unsafe { libc::geteuid() } == 0;
    Err(io::Error::new(
        if root {
            io::ErrorKind::NotFound
        } else {
            io::ErrorKind::PermissionDenied
        },
        if root {
            "tracefs is not mounted at /sys/kernel/tracing or /sys/kernel/debug/tracing \
             (mount -t tracefs nodev /sys/kernel/tracing)"
                .to_string()
        } else {
            "tracefs not accessible at /sys/kernel/tracing or /sys/kernel/debug/tracing: \
             tracing needs root"
                .to_string()
        },
    ))
}

/// Mount tracefs on `/sys/kernel/tracing` if it is not mounted anywhere
/// yet, and return the root. Needs root (CAP_SYS_ADMIN).
pub fn mount_tracefs() -> io::Result<PathBuf> {
    // Threads of one process must not stack two mounts.
    static MOUNTING: Mutex<()> = Mutex::new(());
    let _g = MOUNTING.lock().unwrap_or_else(|p| p.into_inner());
    match tracefs_root() {
        Ok(p) => return Ok(p),
        // not root: say so instead of failing to mount an existing tracefs
        Err(e) if unsafe { libc::geteuid() } != 0 => return Err(e),
        Err(_) => {}
    }
    let target = Path::new(CANDIDATES[0]);
    if !target.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{} does not exist: kernel without tracefs?",
                target.display()
            ),
        ));
    }
    let t = CString::new(target.as_os_str().as_bytes()).expect("no NUL");
    let fstype = CString::new("tracefs").expect("no NUL");
    let src = CString::new("nodev").expect("no NUL");
    // SAFETY: valid C strings, no data.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            t.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        let hint = if e.raw_os_error() == Some(libc::EPERM) {
            " (needs root)"
        } else {
            ""
        };
        return Err(io::Error::new(
            e.kind(),
            format!("cannot mount tracefs on {}: {e}{hint}", target.display()),
        ));
    }
    tracefs_root()
}

fn write_file(path: &Path, value: &str) -> io::Result<()> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(|e| ctx(e, path, "open"))?;
    f.write_all(value.as_bytes()).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("writing {value:?} to {}: {e}", path.display()),
        )
    })
}

fn ctx(e: io::Error, path: &Path, what: &str) -> io::Error {
    let hint = match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => " (tracing needs root)",
        _ => "",
    };
    io::Error::new(e.kind(), format!("{what} {}: {e}{hint}", path.display()))
}

/// Events this module knows how to parse.
pub const EVENT_PROBE: &str = "tcp_probe";
pub const EVENT_RETRANSMIT: &str = "tcp_retransmit_skb";
pub const EVENT_CONG_STATE: &str = "tcp_cong_state_set";

/// Field names declared in an event's `format` file.
fn event_fields(event_dir: &Path) -> io::Result<Vec<String>> {
    let text = fs::read_to_string(event_dir.join("format"))
        .map_err(|e| ctx(e, event_dir, "reading format of"))?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let decl = l.strip_prefix("field:")?.split(';').next()?;
            let name = decl.rsplit([' ', '*']).next()?;
            let name = name.split('[').next()?;
            Some(name.to_string())
        })
        .collect())
}

/// Options for [`TcpProbe::start`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpProbeOptions {
    /// Keep only events whose `sport` or `dport` is one of these (empty:
    /// every TCP socket on the machine).
    pub ports: Vec<u16>,
    /// Also enable `tcp:tcp_retransmit_skb` if the kernel has it.
    pub retransmit: bool,
    /// Also enable `tcp:tcp_cong_state_set` if the kernel has it.
    pub cong_state: bool,
    /// Ring buffer per CPU, KiB.
    pub buffer_size_kb: u32,
    /// Mount tracefs on /sys/kernel/tracing if it is not mounted.
    pub mount_if_missing: bool,
}

impl Default for TcpProbeOptions {
    fn default() -> Self {
        TcpProbeOptions {
            ports: Vec::new(),
            retransmit: true,
            cong_state: true,
            buffer_size_kb: 8192,
            mount_if_missing: true,
        }
    }
}

impl TcpProbeOptions {
    /// Defaults, filtered to one port.
    pub fn port(port: u16) -> Self {
        TcpProbeOptions {
            ports: vec![port],
            ..Default::default()
        }
    }
}

/// One parsed trace line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event")]
pub enum TraceEvent {
    /// `tcp:tcp_probe`: fires when a socket processes an incoming segment
    /// (tcp_rcv_established); src is the local end.
    #[serde(rename = "tcp_probe")]
    Probe {
        /// Trace timestamp on the `mono` clock, ns (µs resolution).
        mono_ns: u64,
        cpu: u16,
        /// 2 = AF_INET, 10 = AF_INET6.
        family: u16,
        saddr: IpAddr,
        daddr: IpAddr,
        sport: u16,
        dport: u16,
        mark: u32,
        /// Payload bytes of the segment being processed.
        data_len: u32,
        snd_nxt: u32,
        snd_una: u32,
        /// Segments.
        snd_cwnd: u32,
        /// Segments.
        ssthresh: u32,
        /// Bytes.
        snd_wnd: u32,
        /// Smoothed RTT, µs.
        srtt_us: u32,
        /// Bytes.
        rcv_wnd: u32,
        /// Socket cookie (same value as sock_diag's), absent on old kernels.
        #[serde(skip_serializing_if = "Option::is_none")]
        sock_cookie: Option<u64>,
    },
    /// `tcp:tcp_retransmit_skb`.
    #[serde(rename = "tcp_retransmit_skb")]
    Retransmit {
        mono_ns: u64,
        cpu: u16,
        family: u16,
        saddr: IpAddr,
        daddr: IpAddr,
        sport: u16,
        dport: u16,
        /// TCP state number (1 = ESTABLISHED ...).
        state: u8,
        /// Result of the retransmission attempt (6.x+), 0 = sent.
        #[serde(skip_serializing_if = "Option::is_none")]
        err: Option<i32>,
    },
    /// `tcp:tcp_cong_state_set`: a change of `ca_state`.
    #[serde(rename = "tcp_cong_state_set")]
    CongState {
        mono_ns: u64,
        cpu: u16,
        family: u16,
        saddr: IpAddr,
        daddr: IpAddr,
        sport: u16,
        dport: u16,
        /// New state: 0 Open, 1 Disorder, 2 CWR, 3 Recovery, 4 Loss.
        cong_state: u8,
    },
}

impl TraceEvent {
    pub fn mono_ns(&self) -> u64 {
        match self {
            TraceEvent::Probe { mono_ns, .. }
            | TraceEvent::Retransmit { mono_ns, .. }
            | TraceEvent::CongState { mono_ns, .. } => *mono_ns,
        }
    }
    /// (sport, dport): local and remote port of the socket.
    pub fn ports(&self) -> (u16, u16) {
        match self {
            TraceEvent::Probe { sport, dport, .. }
            | TraceEvent::Retransmit { sport, dport, .. }
            | TraceEvent::CongState { sport, dport, .. } => (*sport, *dport),
        }
    }
    /// The event's tracefs name.
    pub fn name(&self) -> &'static str {
        match self {
            TraceEvent::Probe { .. } => EVENT_PROBE,
            TraceEvent::Retransmit { .. } => EVENT_RETRANSMIT,
            TraceEvent::CongState { .. } => EVENT_CONG_STATE,
        }
    }
}

/// Counters of a [`TcpProbe`] reader.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceStats {
    /// Lines read from trace_pipe.
    pub lines: u64,
    /// Events parsed.
    pub events: u64,
    /// Lines that were not a known event (should stay 0).
    pub unparsed: u64,
    /// Events the kernel dropped because the ring buffer was full
    /// (`[LOST n EVENTS]` lines).
    pub lost_events: u64,
}

#[derive(Default)]
struct Shared {
    events: VecDeque<TraceEvent>,
    stats: TraceStats,
    error: Option<String>,
}

/// A running private ftrace instance with TCP tracepoints enabled.
pub struct TcpProbe {
    instance: PathBuf,
    enabled: Vec<String>,
    stop: Arc<AtomicBool>,
    shared: Arc<Mutex<Shared>>,
    reader: Option<JoinHandle<()>>,
    removed: bool,
}

impl std::fmt::Debug for TcpProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpProbe")
            .field("instance", &self.instance)
            .field("enabled", &self.enabled)
            .finish()
    }
}

impl TcpProbe {
    /// Create the instance and start tracing (see the module docs).
    pub fn start(opts: &TcpProbeOptions) -> io::Result<TcpProbe> {
        let root = if opts.mount_if_missing {
            mount_tracefs()?
        } else {
            tracefs_root()?
        };
        let tcp_events = root.join("events/tcp");
        if !tcp_events.join(EVENT_PROBE).is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "tracepoint tcp:tcp_probe not available ({} missing)",
                    tcp_events.join(EVENT_PROBE).display()
                ),
            ));
        }
        let pid = std::process::id();
        let instances = root.join("instances");
        let instance = loop {
            let n = INSTANCE_COUNTER.fetch_add(1, Ordering::Relaxed);
            let dir = instances.join(format!("{INSTANCE_PREFIX}{pid}-{n}"));
            match fs::create_dir(&dir) {
                Ok(()) => break dir,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(ctx(e, &dir, "cannot create ftrace instance")),
            }
        };
        let mut probe = TcpProbe {
            instance,
            enabled: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            shared: Arc::new(Mutex::new(Shared::default())),
            reader: None,
            removed: false,
        };
        // On any error below, Drop removes the instance.
        probe.configure(opts)?;
        Ok(probe)
    }

    fn configure(&mut self, opts: &TcpProbeOptions) -> io::Result<()> {
        let inst = self.instance.clone();
        let clocks = fs::read_to_string(inst.join("trace_clock"))
            .map_err(|e| ctx(e, &inst, "reading trace_clock of"))?;
        if !clocks
            .split_whitespace()
            .any(|c| c.trim_matches(['[', ']']) == "mono")
        {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("trace clock 'mono' not offered: {clocks}"),
            ));
        }
        write_file(&inst.join("trace_clock"), "mono")?;
        write_file(&inst.join("tracing_on"), "0")?;
        write_file(
            &inst.join("buffer_size_kb"),
            &opts.buffer_size_kb.max(64).to_string(),
        )?;

        let mut wanted = vec![EVENT_PROBE];
        if opts.retransmit {
            wanted.push(EVENT_RETRANSMIT);
        }
        if opts.cong_state {
            wanted.push(EVENT_CONG_STATE);
        }
        for ev in wanted {
            let dir = inst.join("events/tcp").join(ev);
            if !dir.is_dir() {
                continue; // optional event missing on this kernel
            }
            if !opts.ports.is_empty() {
                let fields = event_fields(&dir)?;
                if !(fields.iter().any(|f| f == "sport") && fields.iter().any(|f| f == "dport")) {
                    return Err(io::Error::new(
                        io::ErrorKind::Unsupported,
                        format!("tcp:{ev} has no sport/dport fields to filter on"),
                    ));
                }
                let expr = opts
                    .ports
                    .iter()
                    .map(|p| format!("sport == {p} || dport == {p}"))
                    .collect::<Vec<_>>()
                    .join(" || ");
                write_file(&dir.join("filter"), &expr)?;
            }
            write_file(&dir.join("enable"), "1")?;
            self.enabled.push(ev.to_string());
        }

        let pipe = inst.join("trace_pipe");
        let c = CString::new(pipe.as_os_str().as_bytes()).expect("no NUL");
        // SAFETY: valid path.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(ctx(io::Error::last_os_error(), &pipe, "cannot open"));
        }
        // SAFETY: fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let stop = self.stop.clone();
        let shared = self.shared.clone();
        self.reader = Some(
            std::thread::Builder::new()
                .name("tcpwhy-trace".into())
                .spawn(move || reader_loop(fd, stop, shared))?,
        );
        write_file(&inst.join("tracing_on"), "1")?;
        Ok(())
    }

    /// The instance directory (`.../instances/tcpwhy-<pid>-<n>`).
    pub fn instance_dir(&self) -> &Path {
        &self.instance
    }

    /// Names of the events that were enabled.
    pub fn enabled_events(&self) -> &[String] {
        &self.enabled
    }

    /// Take the events parsed so far (for streaming consumers).
    pub fn drain(&self) -> Vec<TraceEvent> {
        let mut g = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        g.events.drain(..).collect()
    }

    pub fn stats(&self) -> TraceStats {
        self.shared.lock().unwrap_or_else(|p| p.into_inner()).stats
    }

    /// Disable the events, read what is left in the buffer, remove the
    /// instance and return every event not yet drained.
    pub fn stop(mut self) -> io::Result<Vec<TraceEvent>> {
        self.shutdown()?;
        let mut g = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = g.error.take() {
            return Err(io::Error::other(format!("trace_pipe reader failed: {e}")));
        }
        Ok(g.events.drain(..).collect())
    }

    fn shutdown(&mut self) -> io::Result<()> {
        if self.removed {
            return Ok(());
        }
        // Stop producing, let the reader drain, then remove the instance
        // (rmdir fails with EBUSY while trace_pipe is open).
        let _ = write_file(&self.instance.join("tracing_on"), "0");
        for ev in &self.enabled {
            let _ = write_file(
                &self.instance.join("events/tcp").join(ev).join("enable"),
                "0",
            );
        }
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.reader.take() {
            let _ = h.join();
        }
        self.removed = true;
        remove_instance(&self.instance)
    }
}

impl Drop for TcpProbe {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

fn remove_instance(dir: &Path) -> io::Result<()> {
    // The kernel can briefly report EBUSY right after the last reader
    // closed; retry a few times.
    let mut last = None;
    for _ in 0..50 {
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                last = Some(e);
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => return Err(ctx(e, dir, "cannot remove ftrace instance")),
        }
    }
    Err(ctx(
        last.unwrap_or_else(|| io::Error::other("busy")),
        dir,
        "cannot remove ftrace instance",
    ))
}

fn reader_loop(fd: OwnedFd, stop: Arc<AtomicBool>, shared: Arc<Mutex<Shared>>) {
    let mut buf = vec![0u8; 256 * 1024];
    let mut pending: Vec<u8> = Vec::with_capacity(4096);
    let mut batch: Vec<TraceEvent> = Vec::with_capacity(1024);
    let mut stats = TraceStats::default();
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        // SAFETY: valid buffer.
        let r = unsafe {
            libc::read(
                fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
            )
        };
        if r > 0 {
            pending.extend_from_slice(&buf[..r as usize]);
            let mut start = 0;
            while let Some(nl) = pending[start..].iter().position(|&b| b == b'\n') {
                let line = &pending[start..start + nl];
                start += nl + 1;
                handle_line(line, &mut batch, &mut stats);
            }
            pending.drain(..start);
            let mut g = shared.lock().unwrap_or_else(|p| p.into_inner());
            g.events.extend(batch.drain(..));
            g.stats = stats;
            continue;
        }
        if r == 0 {
            if stopping {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            continue;
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => {
                if stopping {
                    break;
                }
                let mut p = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(&mut p, 1, 50) };
            }
            _ => {
                shared.lock().unwrap_or_else(|p| p.into_inner()).error = Some(e.to_string());
                break;
            }
        }
    }
    if !pending.is_empty() {
        let line = std::mem::take(&mut pending);
        handle_line(&line, &mut batch, &mut stats);
    }
    let mut g = shared.lock().unwrap_or_else(|p| p.into_inner());
    g.events.extend(batch.drain(..));
    g.stats = stats;
}

fn handle_line(line: &[u8], batch: &mut Vec<TraceEvent>, stats: &mut TraceStats) {
    let Ok(line) = std::str::from_utf8(line) else {
        stats.lines += 1;
        stats.unparsed += 1;
        return;
    };
    if line.trim().is_empty() {
        return;
    }
    stats.lines += 1;
    if let Some(n) = parse_lost_line(line) {
        stats.lost_events += n;
        return;
    }
    match parse_trace_line(line) {
        Some(ev) => {
            stats.events += 1;
            batch.push(ev);
        }
        None => stats.unparsed += 1,
    }
}

/// `CPU:1 [LOST 123 EVENTS]`
fn parse_lost_line(line: &str) -> Option<u64> {
    let i = line.find("[LOST ")?;
    let rest = &line[i + 6..];
    let n = rest.split_whitespace().next()?;
    if !rest[n.len()..].trim_start().starts_with("EVENTS]") {
        return None;
    }
    n.parse().ok()
}

/// Split a trace line into (cpu, timestamp ns, event name, fields).
fn split_header(line: &str) -> Option<(u16, u64, &str, &str)> {
    // "<comm>-<pid> [ccc] <flags> <secs>.<frac>: <event>: <fields>"
    // comm may contain spaces and ':', so anchor on the "[digits]" cpu field.
    let b = line.as_bytes();
    let mut i = 0;
    let (cpu, after) = loop {
        let open = i + line[i..].find('[')?;
        let close = open + line[open..].find(']')?;
        let inner = &line[open + 1..close];
        if !inner.is_empty()
            && inner.bytes().all(|c| c.is_ascii_digit())
            && b.get(close + 1) == Some(&b' ')
            && follows_task_field(&line[..open])
        {
            break (inner.parse::<u16>().ok()?, close + 1);
        }
        i = open + 1;
    };
    let mut rest = &line[after..];
    // timestamp: first token ending in ':' that looks like secs.frac
    let ts_ns = loop {
        rest = rest.trim_start();
        let end = rest.find(' ').unwrap_or(rest.len());
        let tok = &rest[..end];
        rest = &rest[end..];
        if tok.is_empty() {
            return None;
        }
        if let Some(t) = tok.strip_suffix(':') {
            if let Some(ns) = parse_timestamp(t) {
                break ns;
            }
        }
    };
    let rest = rest.trim_start();
    let colon = rest.find(": ")?;
    let name = &rest[..colon];
    if name.is_empty() || name.contains(' ') {
        return None;
    }
    Some((cpu, ts_ns, name, &rest[colon + 2..]))
}

/// The text before the cpu field ends with `comm-PID` (optionally followed
/// by `(TGID)` when the record-tgid option is on).
fn follows_task_field(before: &str) -> bool {
    let mut t = before.trim_end();
    if t.ends_with(')') {
        match t.rfind('(') {
            Some(i) => t = t[..i].trim_end(),
            None => return false,
        }
    }
    let digits = t.bytes().rev().take_while(|c| c.is_ascii_digit()).count();
    digits > 0 && t[..t.len() - digits].ends_with('-')
}

fn parse_timestamp(t: &str) -> Option<u64> {
    let (s, f) = t.split_once('.')?;
    if s.is_empty()
        || f.is_empty()
        || f.len() > 9
        || !s.bytes().all(|c| c.is_ascii_digit())
        || !f.bytes().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    let secs: u64 = s.parse().ok()?;
    let frac: u64 = f.parse().ok()?;
    secs.checked_mul(1_000_000_000)?
        .checked_add(frac * 10u64.pow(9 - f.len() as u32))
}

fn num_u64(v: &str) -> Option<u64> {
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

fn num_u32(v: &str) -> Option<u32> {
    num_u64(v).and_then(|n| u32::try_from(n).ok())
}

fn family_num(v: &str) -> Option<u16> {
    match v {
        "AF_INET" => Some(2),
        "AF_INET6" => Some(10),
        _ => v.parse().ok(),
    }
}

fn state_num(v: &str) -> Option<u8> {
    let s = v.strip_prefix("TCP_").unwrap_or(v);
    Some(match s {
        "ESTABLISHED" => 1,
        "SYN_SENT" => 2,
        "SYN_RECV" => 3,
        "FIN_WAIT1" => 4,
        "FIN_WAIT2" => 5,
        "TIME_WAIT" => 6,
        "CLOSE" => 7,
        "CLOSE_WAIT" => 8,
        "LAST_ACK" => 9,
        "LISTEN" => 10,
        "CLOSING" => 11,
        "NEW_SYN_RECV" => 12,
        "BOUND_INACTIVE" => 13,
        _ => return v.parse().ok(),
    })
}

fn kv(fields: &str) -> impl Iterator<Item = (&str, &str)> {
    fields
        .split_ascii_whitespace()
        .filter_map(|t| t.split_once('='))
}

/// Parse one line of `trace`/`trace_pipe` output of the three TCP events.
/// Returns None for other events and malformed lines.
pub fn parse_trace_line(line: &str) -> Option<TraceEvent> {
    let (cpu, mono_ns, name, fields) = split_header(line)?;
    match name {
        EVENT_PROBE => {
            let (mut family, mut src, mut dst) = (None, None, None);
            let (mut mark, mut data_len, mut snd_nxt, mut snd_una) = (0, 0, None, None);
            let (mut snd_cwnd, mut ssthresh, mut snd_wnd, mut srtt, mut rcv_wnd) =
                (None, None, None, None, None);
            let mut cookie = None;
            for (k, v) in kv(fields) {
                match k {
                    "family" => family = family_num(v),
                    "src" => src = v.parse::<SocketAddr>().ok(),
                    "dest" => dst = v.parse::<SocketAddr>().ok(),
                    "mark" => mark = num_u32(v)?,
                    "data_len" => data_len = num_u32(v)?,
                    "snd_nxt" => snd_nxt = num_u32(v),
                    "snd_una" => snd_una = num_u32(v),
                    "snd_cwnd" => snd_cwnd = num_u32(v),
                    "ssthresh" => ssthresh = num_u32(v),
                    "snd_wnd" => snd_wnd = num_u32(v),
                    "srtt" => srtt = num_u32(v),
                    "rcv_wnd" => rcv_wnd = num_u32(v),
                    "sock_cookie" => cookie = u64::from_str_radix(v, 16).ok(),
                    _ => {}
                }
            }
            let (src, dst) = (src?, dst?);
            let family = family.unwrap_or(if src.is_ipv4() { 2 } else { 10 });
            Some(TraceEvent::Probe {
                mono_ns,
                cpu,
                family,
                saddr: src.ip(),
                daddr: dst.ip(),
                sport: src.port(),
                dport: dst.port(),
                mark,
                data_len,
                snd_nxt: snd_nxt?,
                snd_una: snd_una?,
                snd_cwnd: snd_cwnd?,
                ssthresh: ssthresh?,
                snd_wnd: snd_wnd?,
                srtt_us: srtt?,
                rcv_wnd: rcv_wnd.unwrap_or(0),
                sock_cookie: cookie,
            })
        }
        EVENT_RETRANSMIT | EVENT_CONG_STATE => {
            let (mut family, mut sport, mut dport) = (None, None, None);
            let (mut s4, mut d4, mut s6, mut d6) = (None, None, None, None);
            let (mut st, mut err, mut cs) = (None, None, None);
            for (k, v) in kv(fields) {
                match k {
                    "family" => family = family_num(v),
                    "sport" => sport = v.parse::<u16>().ok(),
                    "dport" => dport = v.parse::<u16>().ok(),
                    "saddr" => s4 = v.parse::<IpAddr>().ok(),
                    "daddr" => d4 = v.parse::<IpAddr>().ok(),
                    "saddrv6" => s6 = v.parse::<IpAddr>().ok(),
                    "daddrv6" => d6 = v.parse::<IpAddr>().ok(),
                    "state" => st = state_num(v),
                    "err" => err = v.parse::<i32>().ok(),
                    "cong_state" => cs = v.parse::<u8>().ok(),
                    _ => {}
                }
            }
            let family = family?;
            let (saddr, daddr) = if family == 10 { (s6?, d6?) } else { (s4?, d4?) };
            let (sport, dport) = (sport?, dport?);
            if name == EVENT_RETRANSMIT {
                Some(TraceEvent::Retransmit {
                    mono_ns,
                    cpu,
                    family,
                    saddr,
                    daddr,
                    sport,
                    dport,
                    state: st?,
                    err,
                })
            } else {
                Some(TraceEvent::CongState {
                    mono_ns,
                    cpu,
                    family,
                    saddr,
                    daddr,
                    sport,
                    dport,
                    cong_state: cs?,
                })
            }
        }
        _ => None,
    }
}

/// Remove `instances/tcpwhy-<pid>-*` left behind by processes that are no
/// longer alive (e.g. killed with SIGKILL). Returns the names removed.
/// Does nothing (Ok, empty) when tracefs is not mounted.
pub fn remove_stale_instances() -> io::Result<Vec<String>> {
    let Ok(root) = tracefs_root() else {
        return Ok(Vec::new());
    };
    let dir = root.join("instances");
    let mut removed = Vec::new();
    for ent in fs::read_dir(&dir).map_err(|e| ctx(e, &dir, "cannot list"))? {
        let ent = ent?;
        let name = ent.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(INSTANCE_PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        if pid <= 0 || pid_alive(pid) {
            continue;
        }
        let path = ent.path();
        // disable first so nothing races with the removal
        let _ = write_file(&path.join("tracing_on"), "0");
        match remove_instance(&path) {
            Ok(()) => removed.push(name),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {} // someone still reads it
            Err(e) => return Err(e),
        }
    }
    Ok(removed)
}

fn pid_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks existence/permission.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROBE: &str = "         python3-4401    [000] ..s2.  7783.675931: tcp_probe: family=AF_INET src=127.0.0.1:5999 dest=127.0.0.1:34916 mark=0x0 data_len=32741 snd_nxt=0x35ac4a3f snd_una=0x35ac4a3e snd_cwnd=10 ssthresh=2147483647 snd_wnd=65536 srtt=32 rcv_wnd=65483 sock_cookie=71 skbaddr=000000000363a948 skaddr=000000009a68297c";
    const CONG: &str = "         python3-4401    [000] ..s2.  7783.675863: tcp_cong_state_set: family=AF_INET sport=5999 dport=34916 saddr=127.0.0.1 daddr=127.0.0.1 saddrv6=::ffff:127.0.0.1 daddrv6=::ffff:127.0.0.1 cong_state=3";
    const RETX: &str = "          <idle>-0       [001] ..s1. 12345.000007: tcp_retransmit_skb: skbaddr=00000000aa skaddr=00000000bb family=AF_INET6 sport=5201 dport=40000 saddr=0.0.0.0 daddr=0.0.0.0 saddrv6=fd00::1 daddrv6=fd00::2 state=TCP_ESTABLISHED err=0";

    #[test]
    fn probe_line() {
        let ev = parse_trace_line(PROBE).unwrap();
        assert_eq!(
            ev,
            TraceEvent::Probe {
                mono_ns: 7_783_675_931_000,
                cpu: 0,
                family: 2,
                saddr: "127.0.0.1".parse().unwrap(),
                daddr: "127.0.0.1".parse().unwrap(),
                sport: 5999,
                dport: 34916,
                mark: 0,
                data_len: 32741,
                snd_nxt: 0x35ac4a3f,
                snd_una: 0x35ac4a3e,
                snd_cwnd: 10,
                ssthresh: 2147483647,
                snd_wnd: 65536,
                srtt_us: 32,
                rcv_wnd: 65483,
                sock_cookie: Some(0x71),
            }
        );
        let j = serde_json::to_string(&ev).unwrap();
        assert!(j.starts_with("{\"event\":\"tcp_probe\""), "{j}");
        assert_eq!(serde_json::from_str::<TraceEvent>(&j).unwrap(), ev);
        for l in [CONG, RETX] {
            let e = parse_trace_line(l).unwrap();
            assert_eq!(
                serde_json::from_str::<TraceEvent>(&serde_json::to_string(&e).unwrap()).unwrap(),
                e
            );
        }
    }

    #[test]
    fn probe_ipv6_and_odd_comm() {
        let l = "  my prog: [7] x-99  [001] d..1.  10.5: tcp_probe: family=AF_INET6 src=[::1]:5201 dest=[fd00::2]:40000 mark=0x10 data_len=0 snd_nxt=0x1 snd_una=0x1 snd_cwnd=20 ssthresh=7 snd_wnd=100 srtt=5 rcv_wnd=9 sock_cookie=ffffffffff skbaddr=0 skaddr=0";
        let TraceEvent::Probe {
            mono_ns,
            cpu,
            family,
            saddr,
            dport,
            mark,
            sock_cookie,
            ..
        } = parse_trace_line(l).unwrap()
        else {
            panic!()
        };
        assert_eq!(mono_ns, 10_500_000_000);
        assert_eq!(cpu, 1);
        assert_eq!(family, 10);
        assert_eq!(saddr, "::1".parse::<IpAddr>().unwrap());
        assert_eq!(dport, 40000);
        assert_eq!(mark, 0x10);
        assert_eq!(sock_cookie, Some(0xff_ffff_ffff));
    }

    #[test]
    fn older_probe_without_cookie() {
        // 4.16-era format: no rcv_wnd / sock_cookie
        let l = " iperf3-1 [000] ..s1 100.000001: tcp_probe: src=10.0.0.1:5201 dest=10.0.0.2:4000 mark=0x0 length=0 snd_nxt=0x1 snd_una=0x1 snd_cwnd=10 ssthresh=7 snd_wnd=100 srtt=5 rcv_wnd=9";
        let TraceEvent::Probe {
            family,
            sock_cookie,
            mono_ns,
            ..
        } = parse_trace_line(l).unwrap()
        else {
            panic!()
        };
        assert_eq!(family, 2);
        assert_eq!(sock_cookie, None);
        assert_eq!(mono_ns, 100_000_001_000);
    }

    #[test]
    fn cong_and_retransmit_lines() {
        assert_eq!(
            parse_trace_line(CONG).unwrap(),
            TraceEvent::CongState {
                mono_ns: 7_783_675_863_000,
                cpu: 0,
                family: 2,
                saddr: "127.0.0.1".parse().unwrap(),
                daddr: "127.0.0.1".parse().unwrap(),
                sport: 5999,
                dport: 34916,
                cong_state: 3
            }
        );
        assert_eq!(
            parse_trace_line(RETX).unwrap(),
            TraceEvent::Retransmit {
                mono_ns: 12_345_000_007_000,
                cpu: 1,
                family: 10,
                saddr: "fd00::1".parse().unwrap(),
                daddr: "fd00::2".parse().unwrap(),
                sport: 5201,
                dport: 40000,
                state: 1,
                err: Some(0)
            }
        );
    }

    #[test]
    fn junk_lines() {
        for l in [
            "",
            "# tracer: nop",
            "garbage",
            " x-1 [000] ..s1 1.0: sched_switch: prev_comm=a",
            " x-1 [000] ..s1 1.0: tcp_probe: family=AF_INET src=bad dest=127.0.0.1:1",
            " x-1 [000] ..s1 1.0: tcp_probe: ",
            " x-1 [000] ..s1 1.0: tcp_retransmit_skb: family=AF_INET sport=1",
            " x-1 [000] ..s1 : tcp_probe: x=y",
            "[",
            "[1]",
            "[1] ",
        ] {
            assert!(parse_trace_line(l).is_none(), "{l:?}");
        }
        // every prefix of a valid line is handled without panic
        for n in 0..PROBE.len() {
            let _ = parse_trace_line(&PROBE[..n]);
        }
    }

    #[test]
    fn lost_lines_and_stats() {
        assert_eq!(parse_lost_line("CPU:1 [LOST 123 EVENTS]"), Some(123));
        assert_eq!(parse_lost_line("foo"), None);
        let mut batch = Vec::new();
        let mut st = TraceStats::default();
        for l in [PROBE, "CPU:0 [LOST 5 EVENTS]", "nonsense", CONG, ""] {
            handle_line(l.as_bytes(), &mut batch, &mut st);
        }
        assert_eq!(
            st,
            TraceStats {
                lines: 4,
                events: 2,
                unparsed: 1,
                lost_events: 5
            }
        );
        assert_eq!(batch.len(), 2);
    }

    #[test]
    fn timestamps() {
        assert_eq!(parse_timestamp("1.5"), Some(1_500_000_000));
        assert_eq!(parse_timestamp("0.000000001"), Some(1));
        assert_eq!(parse_timestamp("1.0000000001"), None);
        assert_eq!(parse_timestamp("1"), None);
        assert_eq!(parse_timestamp("a.1"), None);
    }
}
