//! What a run does: the [`TrafficSpec`] both ends share, its limits and
//! defaults, and [`validate`].

use serde::{Deserialize, Serialize};

use crate::error::{Error, Problem};

/// Default `write_size` (128 KiB).
pub const DEFAULT_WRITE_SIZE: u32 = 128 * 1024;
/// Default `read_size` (128 KiB).
pub const DEFAULT_READ_SIZE: u32 = 128 * 1024;
/// Default `timeout_s`.
pub const DEFAULT_TIMEOUT_S: f64 = 120.0;
/// Default `response_bytes` (1 MiB).
pub const DEFAULT_RESPONSE_BYTES: u64 = 1024 * 1024;
/// Default `window_bytes` (2 MiB, OpenSSH's session channel window).
pub const DEFAULT_WINDOW_BYTES: u64 = 2 * 1024 * 1024;
/// Largest `write_size` / `read_size` accepted (64 MiB).
pub const MAX_IO_SIZE: u32 = 64 * 1024 * 1024;
/// Largest `request_bytes` accepted (64 MiB; use bulk upload beyond that).
pub const MAX_REQUEST_BYTES: u64 = 64 * 1024 * 1024;
/// Largest `connections` accepted.
pub const MAX_CONNECTIONS: u32 = 256;
/// Largest `requests` accepted.
pub const MAX_REQUESTS: u32 = 1_000_000;
/// Largest HTTP header block (request or response) accepted, in bytes.
pub const HTTP_MAX_HEADER: usize = 8192;
/// Largest number of `steps` in a script.
pub const MAX_STEPS: usize = 10_000;
/// Longest `wait_ms` of one script step (one hour).
pub const MAX_STEP_WAIT_MS: f64 = 3_600_000.0;
/// While a script end waits for its own previous step to leave before the
/// next one's wait starts, it asks the kernel this often (SIOCOUTQNSD).
pub const SCRIPT_DRAIN_POLL_MS: u64 = 1;

/// Size of one appwindow application ACK: the receiver's cumulative byte
/// count as a big-endian u64.
pub const APP_ACK_BYTES: usize = 8;
/// Size of the raw reqresp request header: `b"TWRQ"`, request payload length
/// (u32 big-endian), response length (u64 big-endian).
pub const RAW_REQUEST_HEADER: usize = 16;

/// Congestion control modules that exist in mainline Linux (net/ipv4/tcp_*.c).
/// `validate` accepts these plus whatever the local kernel lists as available.
pub const KNOWN_CONGESTION_CONTROLS: &[&str] = &[
    "reno", "cubic", "bbr", "bic", "cdg", "dctcp", "dctcp-reno", "highspeed", "htcp", "hybla", "illinois", "lp", "nv",
    "scalable", "vegas", "veno", "westwood", "yeah",
];

/// Which traffic pattern to generate.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// One-way bulk transfer over `connections` parallel connections.
    Bulk,
    /// Request/response exchanges (raw framing or HTTP/1.1).
    Reqresp,
    /// Bulk transfer with application-level flow control (SSH-channel-like).
    Appwindow,
    /// A replayed conversation on one connection: `steps` in order, each
    /// written by one end after its wait (turns, think times, pauses).
    Script,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Bulk => "bulk",
            Kind::Reqresp => "reqresp",
            Kind::Appwindow => "appwindow",
            Kind::Script => "script",
        }
    }
}

/// Data direction for bulk and appwindow.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// The server sends, the client receives (the usual case).
    #[default]
    Download,
    /// The client sends, the server receives.
    Upload,
}

/// One end of the connection: the client connects, the server accepts.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum End {
    Client,
    Server,
}

/// One step of a script: `from` waits `wait_ms`, then writes `bytes`; the
/// other end reads them. The wait starts when `from` has read every byte
/// of the step before (the peer's turn: the wait is its think time), or,
/// when the step before was its own, when that step's last byte has left
/// its socket (SIOCOUTQNSD at 0: the wait is a pause between chunks); the
/// first step's wait starts at the connection's start.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub from: End,
    pub bytes: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub wait_ms: f64,
    /// The other end stops reading for this long after its first read of
    /// the step (a receiving application that stalled: its buffer fills and
    /// the window closes), then reads as fast as data arrives. Default 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub read_pause_ms: f64,
}

/// Connection use for reqresp.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum ConnectionMode {
    /// One keep-alive connection carries every request.
    #[default]
    Reuse,
    /// A new connection per request, closed after its response.
    New,
}

/// Request/response wire format for reqresp.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// Request = 16-byte header (`b"TWRQ"`, request payload length u32 BE,
    /// response length u64 BE) + `request_bytes` payload; response =
    /// exactly the requested number of bytes, no header.
    #[default]
    Raw,
    /// HTTP/1.1: `GET /obj?bytes=N` (or `POST` with a `Content-Length` body
    /// when `request_bytes` > 0) with `Host` and `Connection: keep-alive` /
    /// `close`; response `HTTP/1.1 200 OK` with `Content-Length: N`. Header
    /// blocks are limited to 8192 bytes.
    Http,
}

/// Socket options for one end. Applied to the listening socket (server, so
/// accepted sockets inherit them) or before connect() (client); the
/// per-connection ones are applied again to every accepted socket.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SocketOpts {
    /// TCP_CONGESTION name, e.g. "cubic", "bbr", "reno". Default: the
    /// kernel's (net.ipv4.tcp_congestion_control).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    /// SO_SNDBUF in bytes (the kernel doubles it for bookkeeping and stops
    /// autotuning the send buffer). Set with SO_SNDBUFFORCE when permitted,
    /// so it may exceed net.core.wmem_max. Default: kernel autotuning.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sndbuf: Option<u32>,
    /// SO_RCVBUF in bytes (doubled by the kernel; disables receive
    /// autotuning). Set before listen()/connect(), so it also bounds the
    /// window scale chosen at the handshake. Set with SO_RCVBUFFORCE when
    /// permitted. Default: kernel autotuning.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rcvbuf: Option<u32>,
    /// TCP_NODELAY (disable Nagle). Default false.
    pub nodelay: bool,
    /// TCP_QUICKACK: set after connect/accept and re-armed after every
    /// read() (the kernel clears it), so ACKs are not delayed. Default false.
    pub quickack: bool,
    /// TCP_MAXSEG in bytes (88..=32767), set before the handshake: caps the
    /// MSS this end advertises and uses. Default: from the route MTU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maxseg: Option<u32>,
    /// SO_MAX_PACING_RATE in **bits** per second (converted to the kernel's
    /// bytes per second by dividing by 8). Paces this end's sending with the
    /// kernel's TCP pacing (fq qdisc not required). Default: unpaced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pacing_rate_bps: Option<u64>,
    /// TCP_NOTSENT_LOWAT in bytes: writes block while this much unsent data
    /// is queued. Default: unset (net.ipv4.tcp_notsent_lowat).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notsent_lowat: Option<u32>,
}

fn d_connections() -> u32 {
    1
}
fn d_write_size() -> u32 {
    DEFAULT_WRITE_SIZE
}
fn d_read_size() -> u32 {
    DEFAULT_READ_SIZE
}
fn d_requests() -> u32 {
    1
}
fn d_response_bytes() -> u64 {
    DEFAULT_RESPONSE_BYTES
}
fn d_request_writes() -> u32 {
    1
}
fn d_window_bytes() -> u64 {
    DEFAULT_WINDOW_BYTES
}
fn d_timeout_s() -> f64 {
    DEFAULT_TIMEOUT_S
}

/// What both ends of one lab traffic run do. Fields that do not apply to
/// `kind` must be left at their defaults (`validate` rejects them otherwise).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TrafficSpec {
    /// "bulk", "reqresp" or "appwindow". Required.
    pub kind: Kind,

    /// bulk, appwindow: "download" (server sends; default) or "upload"
    /// (client sends).
    #[serde(default)]
    pub direction: Direction,
    /// bulk, appwindow: total application bytes to transfer, split over the
    /// connections (the first `bytes % connections` connections get one byte
    /// more). bulk needs exactly one of `bytes` and `duration_s`; appwindow
    /// needs `bytes`. No default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// bulk: send for this many seconds instead of a byte count (each
    /// connection's sender stops writing after this long, counted from its
    /// first write). Must be below `timeout_s`. No default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// bulk, appwindow: parallel connections (1..=256). Default 1.
    #[serde(default = "d_connections")]
    pub connections: u32,
    /// Bytes per write() call by the sender (bulk, appwindow) or by the
    /// server for a response (reqresp; the HTTP header rides in the first
    /// write). Default 131072.
    #[serde(default = "d_write_size")]
    pub write_size: u32,
    /// Largest read() by the receiver (bulk, appwindow) or by the client for
    /// a response body (reqresp), in bytes. Default 131072.
    #[serde(default = "d_read_size")]
    pub read_size: u32,
    /// bulk, appwindow: application-level sender rate limit, bits/s per
    /// connection: write k starts no earlier than (bytes written before it)
    /// / rate after the first write. script: the same within each step of
    /// the data sender (the end that writes the most bytes), counted from
    /// the step's first write. Default: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_rate_bps: Option<u64>,
    /// bulk, appwindow: slow reader, bits/s per connection: read k starts no
    /// earlier than (bytes read before it) / rate after the receiver's
    /// connection start, reading at most `read_size`. With a small receive
    /// buffer the kernel then advertises zero windows. script: the same for
    /// the data receiver's reads of each data step, counted from the
    /// step's first read. Default: read as fast as possible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_rate_bps: Option<u64>,
    /// bulk, appwindow: the client opens connection i (0-based) i times this
    /// many seconds after the first, so flows start at different times
    /// (with `duration_s` each still sends for that long). Default 0: all at
    /// once.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub start_interval_s: f64,
    /// bulk, appwindow: socket options for the client's connection i (the
    /// i-th entry), on top of `client`: every option set here replaces the
    /// one in `client` for that connection only, e.g. a small `rcvbuf` on
    /// one of two flows (set before connect(), so it also bounds that
    /// flow's window scale). At most `connections` entries. Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_connections: Vec<SocketOpts>,

    /// reqresp: number of requests (1..=1000000), sent one at a time.
    /// Default 1.
    #[serde(default = "d_requests")]
    pub requests: u32,
    /// reqresp: request payload bytes after the framing: raw = bytes after
    /// the 16-byte header; http = the body of a POST (0 = a GET without
    /// body). At most 64 MiB. Default 0.
    #[serde(default)]
    pub request_bytes: u64,
    /// reqresp: response payload bytes (raw: the whole response, at least 1;
    /// http: the body, after the header). Default 1048576.
    #[serde(default = "d_response_bytes")]
    pub response_bytes: u64,
    /// reqresp: the client sends each request (framing + payload) in this
    /// many write() calls of near-equal size (capped at the request's byte
    /// count). 2 with `nodelay` false reproduces write-write-read stalls
    /// (Nagle against delayed ACKs). Default 1.
    #[serde(default = "d_request_writes")]
    pub request_writes: u32,
    /// reqresp: client think time in milliseconds between the last byte of
    /// one response and the start of the next request (for connection
    /// "new", the next connect()). Default 0.
    #[serde(default)]
    pub idle_ms: u64,
    /// reqresp: "reuse" (one keep-alive connection; default) or "new" (a new
    /// connection per request, closed after the response).
    #[serde(default)]
    pub connection: ConnectionMode,
    /// reqresp: server think time in milliseconds between reading the whole
    /// request and writing the response. Default 0.
    #[serde(default)]
    pub service_ms: u64,
    /// reqresp: "raw" (default) or "http".
    #[serde(default)]
    pub protocol: Protocol,

    /// appwindow: the sender sends this many bytes (in `write_size` writes),
    /// then waits for the receiver's 8-byte application ACK, sent once it
    /// has read the whole window; the last window may be shorter. At least
    /// 1. Default 2097152 (2 MiB).
    #[serde(default = "d_window_bytes")]
    pub window_bytes: u64,

    /// script: the conversation, in order (1 to 10,000 steps, each of at
    /// least 1 byte; see [`Step`]). Required for script.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Step>,

    /// Each end gives up with a TimedOut error if its whole run (for the
    /// server: from run_server's start, including the wait for the client)
    /// takes longer than this many seconds. Default 120.
    #[serde(default = "d_timeout_s")]
    pub timeout_s: f64,

    /// Socket options of the client's sockets. Default: none set.
    #[serde(default)]
    pub client: SocketOpts,
    /// Socket options of the server's listening and accepted sockets.
    /// Default: none set.
    #[serde(default)]
    pub server: SocketOpts,
}

impl TrafficSpec {
    /// Parses JSON (unknown fields are errors, [`Error::Json`]) and
    /// validates ([`Error::Invalid`]).
    pub fn from_json(s: &str) -> Result<TrafficSpec, Error> {
        let spec: TrafficSpec = serde_json::from_str(s)?;
        validate(&spec)?;
        Ok(spec)
    }

    /// A spec of `kind` with every other field at its default.
    pub fn new(kind: Kind) -> TrafficSpec {
        TrafficSpec {
            kind,
            direction: Direction::Download,
            bytes: None,
            duration_s: None,
            connections: d_connections(),
            write_size: d_write_size(),
            read_size: d_read_size(),
            app_rate_bps: None,
            read_rate_bps: None,
            start_interval_s: 0.0,
            client_connections: Vec::new(),
            requests: d_requests(),
            request_bytes: 0,
            response_bytes: d_response_bytes(),
            request_writes: d_request_writes(),
            idle_ms: 0,
            connection: ConnectionMode::Reuse,
            service_ms: 0,
            protocol: Protocol::Raw,
            window_bytes: d_window_bytes(),
            steps: Vec::new(),
            timeout_s: d_timeout_s(),
            client: SocketOpts::default(),
            server: SocketOpts::default(),
        }
    }

    /// Bytes for connection `i` (0-based) of a byte-count transfer.
    pub fn bytes_for_connection(&self, i: u32) -> Option<u64> {
        let total = self.bytes?;
        let n = self.connections.max(1) as u64;
        Some(total / n + u64::from((i as u64) < total % n))
    }

    /// The client's socket options for connection `i`: `client` with the
    /// options set in `client_connections[i]` replacing its own.
    pub fn client_opts(&self, i: u32) -> SocketOpts {
        let mut o = self.client.clone();
        if let Some(x) = self.client_connections.get(i as usize) {
            let x = x.clone();
            o.congestion = x.congestion.or(o.congestion);
            o.sndbuf = x.sndbuf.or(o.sndbuf);
            o.rcvbuf = x.rcvbuf.or(o.rcvbuf);
            o.nodelay |= x.nodelay;
            o.quickack |= x.quickack;
            o.maxseg = x.maxseg.or(o.maxseg);
            o.pacing_rate_bps = x.pacing_rate_bps.or(o.pacing_rate_bps);
            o.notsent_lowat = x.notsent_lowat.or(o.notsent_lowat);
        }
        o
    }

    /// The end that writes the data: the server for reqresp and for a
    /// download, the client for an upload; for a script, the end whose
    /// steps carry the most bytes (the server on a tie).
    pub fn data_sender(&self) -> End {
        match self.kind {
            Kind::Reqresp => End::Server,
            Kind::Script => {
                let of = |e: End| self.steps.iter().filter(|s| s.from == e).map(|s| s.bytes).sum::<u64>();
                if of(End::Client) > of(End::Server) {
                    End::Client
                } else {
                    End::Server
                }
            }
            Kind::Bulk | Kind::Appwindow => match self.direction {
                Direction::Download => End::Server,
                Direction::Upload => End::Client,
            },
        }
    }

    /// Socket options of the data sender (bulk, appwindow).
    fn sender_opts(&self) -> &SocketOpts {
        match self.data_sender() {
            End::Server => &self.server,
            End::Client => &self.client,
        }
    }
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// start_interval_s and client_connections.
fn check_flows(spec: &TrafficSpec, errs: &mut Vec<Problem>) {
    for (i, o) in spec.client_connections.iter().enumerate() {
        check_opts(&format!("client_connections[{i}]"), o, errs);
    }
    if spec.client_connections.len() > spec.connections as usize {
        errs.push(Problem::new(
            "client_connections",
            format!("{} entries for {} connections", spec.client_connections.len(), spec.connections),
        ));
    }
    let last_start = spec.start_interval_s * f64::from(spec.connections.saturating_sub(1));
    if !(spec.start_interval_s.is_finite() && spec.start_interval_s >= 0.0) {
        errs.push(Problem::new("start_interval_s", format!("{} must be 0 or a positive number of seconds", spec.start_interval_s)));
    } else if spec.timeout_s > 0.0 && last_start > 0.0 && last_start + spec.duration_s.unwrap_or(0.0) >= spec.timeout_s {
        errs.push(Problem::new(
            "start_interval_s",
            format!("the last connection starts after {last_start} s and must end before timeout_s ({} s)", spec.timeout_s),
        ));
    }
}

fn check_opts(side: &str, o: &SocketOpts, errs: &mut Vec<Problem>) {
    if let Some(cc) = &o.congestion {
        let ok_syntax = !cc.is_empty()
            && cc.len() < 16
            && cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        let avail = available_congestion_controls().unwrap_or_default();
        if !ok_syntax {
            errs.push(Problem::new(
                format!("{side}.congestion"),
                format!("{cc:?} is not a congestion control name (1 to 15 of a-z 0-9 _ -)"),
            ));
        } else if !KNOWN_CONGESTION_CONTROLS.contains(&cc.as_str()) && !avail.iter().any(|a| a == cc) {
            errs.push(Problem::new(
                format!("{side}.congestion"),
                format!(
                    "unknown congestion control {cc:?} (Linux has: {}; this kernel has available: {})",
                    KNOWN_CONGESTION_CONTROLS.join(" "),
                    if avail.is_empty() { "unknown".to_string() } else { avail.join(" ") }
                ),
            ));
        }
    }
    for (name, v) in [("sndbuf", o.sndbuf), ("rcvbuf", o.rcvbuf)] {
        if let Some(v) = v {
            if v == 0 || v > 1 << 30 {
                errs.push(Problem::new(format!("{side}.{name}"), format!("{v} bytes is out of range (1..=1073741824)")));
            }
        }
    }
    if let Some(v) = o.maxseg {
        if !(88..=32767).contains(&v) {
            errs.push(Problem::new(format!("{side}.maxseg"), format!("{v} is out of range (the kernel accepts 88..=32767)")));
        }
    }
    if let Some(v) = o.pacing_rate_bps {
        if v < 8 {
            errs.push(Problem::new(format!("{side}.pacing_rate_bps"), format!("{v} bits/s is below 8 (the kernel takes bytes/s)")));
        }
    }
    if let Some(v) = o.notsent_lowat {
        if v == 0 || v > i32::MAX as u32 {
            errs.push(Problem::new(format!("{side}.notsent_lowat"), format!("{v} is out of range (1..=2147483647)")));
        }
    }
}

/// Checks a spec before anything runs. The error ([`Error::Invalid`]) lists
/// every problem found, each naming its parameter (shown separated by "; ").
pub fn validate(spec: &TrafficSpec) -> Result<(), Error> {
    let mut errs: Vec<Problem> = Vec::new();
    if !(spec.timeout_s.is_finite() && spec.timeout_s > 0.0 && spec.timeout_s <= 86400.0) {
        errs.push(Problem::new("timeout_s", format!("{} is out of range (0 < timeout_s <= 86400 seconds)", spec.timeout_s)));
    }
    for (name, v) in [("write_size", spec.write_size), ("read_size", spec.read_size)] {
        if v == 0 || v > MAX_IO_SIZE {
            errs.push(Problem::new(name, format!("{v} bytes is out of range (1..={MAX_IO_SIZE})")));
        }
    }
    check_opts("client", &spec.client, &mut errs);
    check_opts("server", &spec.server, &mut errs);
    check_flows(spec, &mut errs);

    kind_fields(spec, &mut errs);
    for (name, v) in [("app_rate_bps", spec.app_rate_bps), ("read_rate_bps", spec.read_rate_bps)] {
        if let Some(v) = v {
            if v < 8 {
                errs.push(Problem::new(name, format!("{v} bits/s is below 8")));
            }
        }
    }

    match spec.kind {
        Kind::Bulk | Kind::Appwindow => check_transfer(spec, &mut errs),
        Kind::Reqresp => check_requests(spec, &mut errs),
        Kind::Script => check_steps(spec, &mut errs),
    }

    if errs.is_empty() {
        Ok(())
    } else {
        Err(Error::Invalid(errs))
    }
}

/// Parameters that only some kinds use must stay at their defaults.
fn kind_fields(spec: &TrafficSpec, errs: &mut Vec<Problem>) {
    let kind = spec.kind;
    let d = TrafficSpec::new(kind);
    let data_kinds = [Kind::Bulk, Kind::Appwindow];
    let paced_kinds = [Kind::Bulk, Kind::Appwindow, Kind::Script];
    let only = |kinds: &[Kind], field: &str, set: bool, errs: &mut Vec<Problem>| {
        if set && !kinds.contains(&kind) {
            let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
            errs.push(Problem::new(field, format!("applies only to kind {} (this spec is {:?})", names.join("/"), kind.as_str())));
        }
    };
    only(&data_kinds, "direction", spec.direction != d.direction, errs);
    only(&data_kinds, "bytes", spec.bytes.is_some(), errs);
    only(&[Kind::Bulk], "duration_s", spec.duration_s.is_some(), errs);
    only(&data_kinds, "connections", spec.connections != d.connections, errs);
    only(&paced_kinds, "app_rate_bps", spec.app_rate_bps.is_some(), errs);
    only(&paced_kinds, "read_rate_bps", spec.read_rate_bps.is_some(), errs);
    only(&data_kinds, "start_interval_s", spec.start_interval_s != 0.0, errs);
    only(&data_kinds, "client_connections", !spec.client_connections.is_empty(), errs);
    let rr = [Kind::Reqresp];
    only(&rr, "requests", spec.requests != d.requests, errs);
    only(&rr, "request_bytes", spec.request_bytes != d.request_bytes, errs);
    only(&rr, "response_bytes", spec.response_bytes != d.response_bytes, errs);
    only(&rr, "request_writes", spec.request_writes != d.request_writes, errs);
    only(&rr, "idle_ms", spec.idle_ms != d.idle_ms, errs);
    only(&rr, "connection", spec.connection != d.connection, errs);
    only(&rr, "service_ms", spec.service_ms != d.service_ms, errs);
    only(&rr, "protocol", spec.protocol != d.protocol, errs);
    only(&[Kind::Appwindow], "window_bytes", spec.window_bytes != d.window_bytes, errs);
    only(&[Kind::Script], "steps", !spec.steps.is_empty(), errs);
}

/// A script: its steps and their waits, which must fit in the timeout.
fn check_steps(spec: &TrafficSpec, errs: &mut Vec<Problem>) {
    if spec.steps.is_empty() || spec.steps.len() > MAX_STEPS {
        errs.push(Problem::new("steps", format!("{} steps is out of range (1..={MAX_STEPS})", spec.steps.len())));
    }
    let mut waits_s = 0.0;
    for (i, st) in spec.steps.iter().enumerate() {
        if st.bytes == 0 {
            errs.push(Problem::new(format!("steps[{i}].bytes"), "must be at least 1"));
        }
        if !(st.read_pause_ms.is_finite() && (0.0..=MAX_STEP_WAIT_MS).contains(&st.read_pause_ms)) {
            errs.push(Problem::new(format!("steps[{i}].read_pause_ms"), format!("{} is out of range (0..={MAX_STEP_WAIT_MS} ms)", st.read_pause_ms)));
        } else {
            waits_s += st.read_pause_ms / 1000.0;
        }
        if !(st.wait_ms.is_finite() && (0.0..=MAX_STEP_WAIT_MS).contains(&st.wait_ms)) {
            errs.push(Problem::new(format!("steps[{i}].wait_ms"), format!("{} is out of range (0..={MAX_STEP_WAIT_MS} ms)", st.wait_ms)));
        } else {
            waits_s += st.wait_ms / 1000.0;
        }
    }
    if waits_s >= spec.timeout_s {
        errs.push(Problem::new("steps", format!("the steps wait {waits_s:.1} s in all, not below timeout_s ({} s)", spec.timeout_s)));
    }
}

/// A bulk or appwindow transfer: its connections, its size or time, and
/// rate limits that must fit in the timeout.
fn check_transfer(spec: &TrafficSpec, errs: &mut Vec<Problem>) {
    let kind = spec.kind;
    if spec.connections == 0 || spec.connections > MAX_CONNECTIONS {
        errs.push(Problem::new("connections", format!("{} is out of range (1..={MAX_CONNECTIONS})", spec.connections)));
    }
    match (spec.bytes, spec.duration_s) {
        (Some(_), Some(_)) => errs.push(Problem::new("bytes, duration_s", "give one of them, not both")),
        (None, None) if kind == Kind::Bulk => {
            errs.push(Problem::new("bytes, duration_s", "bulk needs one of them (total bytes or seconds)"))
        }
        (None, _) if kind == Kind::Appwindow => errs.push(Problem::new("bytes", "appwindow needs the total bytes")),
        _ => {}
    }
    if let Some(b) = spec.bytes {
        if b < spec.connections.max(1) as u64 {
            errs.push(Problem::new(
                "bytes",
                format!("{b} is less than connections ({}); every connection needs at least 1 byte", spec.connections),
            ));
        }
    }
    if let Some(t) = spec.duration_s {
        if !(t.is_finite() && t > 0.0) {
            errs.push(Problem::new("duration_s", format!("{t} must be a positive number of seconds")));
        } else if t >= spec.timeout_s {
            errs.push(Problem::new("duration_s", format!("{t} s is not below timeout_s ({} s)", spec.timeout_s)));
        }
    }
    if kind == Kind::Appwindow && spec.window_bytes == 0 {
        errs.push(Problem::new("window_bytes", "must be at least 1 byte"));
    }
    // Rate-limited byte-count transfers must fit in the timeout.
    if let Some(per_conn) = spec.bytes_for_connection(0) {
        let rates = [
            ("app_rate_bps", spec.app_rate_bps),
            ("read_rate_bps", spec.read_rate_bps),
            (
                if spec.direction == Direction::Download {
                    "server.pacing_rate_bps"
                } else {
                    "client.pacing_rate_bps"
                },
                spec.sender_opts().pacing_rate_bps,
            ),
        ];
        for (name, rate) in rates {
            if let Some(r) = rate.filter(|&r| r >= 8) {
                let secs = per_conn as f64 * 8.0 / r as f64;
                if secs >= spec.timeout_s {
                    errs.push(Problem::new(
                        name,
                        format!(
                            "{per_conn} bytes per connection at {r} bits/s takes about {secs:.1} s, \
                             not below timeout_s ({} s)",
                            spec.timeout_s
                        ),
                    ));
                }
            }
        }
    }
}

/// Request/response: the requests, their sizes and their waits.
fn check_requests(spec: &TrafficSpec, errs: &mut Vec<Problem>) {
    if spec.requests == 0 || spec.requests > MAX_REQUESTS {
        errs.push(Problem::new("requests", format!("{} is out of range (1..={MAX_REQUESTS})", spec.requests)));
    }
    if spec.request_bytes > MAX_REQUEST_BYTES {
        errs.push(Problem::new(
            "request_bytes",
            format!("{} is more than {MAX_REQUEST_BYTES} (use kind bulk, direction upload)", spec.request_bytes),
        ));
    }
    if spec.protocol == Protocol::Raw && spec.response_bytes == 0 {
        errs.push(Problem::new("response_bytes", "must be at least 1 with protocol raw (the response has no header)"));
    }
    if spec.request_writes == 0 {
        errs.push(Problem::new("request_writes", "must be at least 1"));
    }
    let waits_s = spec.requests as f64 * (spec.idle_ms + spec.service_ms) as f64 / 1000.0;
    if waits_s >= spec.timeout_s {
        errs.push(Problem::new(
            "idle_ms, service_ms",
            format!(
                "{} requests spend {waits_s:.1} s waiting, not below timeout_s ({} s)",
                spec.requests, spec.timeout_s
            ),
        ));
    }
}

/// The names in /proc/sys/net/ipv4/tcp_available_congestion_control (None if
/// unreadable).
pub fn available_congestion_controls() -> Option<Vec<String>> {
    let s = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").ok()?;
    Some(s.split_whitespace().map(str::to_owned).collect())
}
