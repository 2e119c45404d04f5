//! `tcpwhy watch IFACE [FILTER]`: live packets from an interface through
//! the same streaming pipeline a capture file goes through (the flow table
//! and the diagnosis's recorder), with the verdicts as they firm up, metrics
//! for a monitoring system, a flight recorder, and on exit the diagnosis
//! `tcpwhy diagnose` would print for the same packets. docs/watch.md.

mod keep;
mod libpcap;
mod metrics;
mod source;
mod verdicts;
mod view;

use crate::diagnose::{Collected, DiagnoseOptions, OneFile};
use clap::Args;
use foldhash::HashSet;
use std::io::{self, IsTerminal};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tcpwhy_core::Cause;
use tcpwhy_diagnose::{KernelRule, Live, Options};
use tcpwhy_flow::{Connection, FlowTable, SegmentEvent, SegmentSink};
use tcpwhy_wire::Frame;

pub use source::{WATCH_BUFFER_DEFAULT_MIB, WATCH_SNAPLEN_DEFAULT};

pub const WATCH_AFTER_HELP: &str = "\
Reads packets from a live interface (libpcap, the ring tcpdump uses; loaded
when the watch starts, from libpcap.so.1, libpcap.so.0.8 or libpcap.so, or
the library named in TCPWHY_LIBPCAP) and
runs them through the same analysis as `tcpwhy diagnose` on a capture file.
Every --interval the connections that moved data are diagnosed again: on a
terminal a top-like view shows each direction's current limit and since
when, its rate, RTT, retransmissions and the verdict's confidence. On exit
(Ctrl-C, or after --duration) it prints the diagnosis of everything seen,
as `tcpwhy diagnose` prints it.

FILTER is tcpdump's filter syntax (pcap-filter(7)); several words are joined.

Examples:
  sudo tcpwhy watch eth0 tcp port 443
  sudo tcpwhy watch any --duration 60s --json > verdicts.jsonl
  sudo tcpwhy watch eth0 --metrics 127.0.0.1:9464        # Prometheus scrapes /metrics
  sudo tcpwhy watch eth0 --keep /var/tmp/tcpwhy --when policer,receiver_window
  sudo tcpwhy watch --netns blue veth0 port 5201

--json writes one JSON object per verdict change (schema tcpwhy.watch/1,
the direction's fields named as in `diagnose --json`), one per connection
that ended, and on exit the whole diagnosis (schema tcpwhy.diagnose/2) on
one line.

Exit codes: 0 the watch ended (Ctrl-C, --duration, or the interface went
away: what was seen is diagnosed); 2 unknown interface, bad filter or bad
option (libpcap's message); 5 not allowed to capture (needs CAP_NET_RAW);
6 libpcap is not installed (apt install libpcap0.8, dnf install libpcap);
1 other failure.";

/// Connections diagnosed again at most per interval: a busy server's
/// thousands of connections are taken in turns (those waiting longest
/// first), so one interval's work stays bounded (each diagnosis of a
/// connection with a few hundred segments takes tens of microseconds).
pub const MAX_DIAGNOSES_PER_INTERVAL: usize = 2000;

/// Diagnoses of ended connections kept for the exit report; past it the
/// oldest are dropped and counted (memory bounded by the live connections,
/// not by how long the watch ran).
pub const MAX_ENDED_KEPT: usize = 10_000;

#[derive(Args)]
pub struct WatchArgs {
    /// The interface (see `ip link`), or `any` for all of them.
    pub iface: String,
    /// Which packets, in tcpdump's filter syntax (default: `tcp`).
    pub filter: Vec<String>,
    /// Stop after this long (e.g. 30s, 10m) and print the diagnosis.
    #[arg(long, value_parser = crate::quantity::seconds, value_name = "TIME")]
    pub duration: Option<f64>,
    /// How often the connections that moved data are diagnosed again.
    #[arg(long, default_value = "1s", value_parser = crate::quantity::seconds, value_name = "TIME")]
    pub interval: f64,
    /// Verdict changes as JSON Lines (see below); the exit diagnosis as one JSON line.
    #[arg(long)]
    pub json: bool,
    /// No top-like view (the exit diagnosis only).
    #[arg(long)]
    pub no_view: bool,
    /// Serve metrics in the OpenMetrics/Prometheus text format at
    /// http://ADDR:PORT/metrics.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
    /// Flight recorder: keep each connection's last packets and write them
    /// to DIR (pcap + JSON sidecar) when its verdict turns into one of --when.
    #[arg(long, value_name = "DIR", requires = "when")]
    pub keep: Option<PathBuf>,
    /// The causes that make the flight recorder write (comma-separated
    /// names of `diagnose`'s primary causes, e.g. policer,receiver_window).
    #[arg(long, value_name = "CAUSE,...", value_delimiter = ',', requires = "keep")]
    pub when: Vec<String>,
    /// Flight recorder: seconds of packets kept per connection.
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    pub keep_seconds: f64,
    /// Flight recorder: MiB of packets kept per connection at most.
    #[arg(long, default_value_t = 16, value_name = "MIB")]
    pub keep_mb: usize,
    /// Flight recorder: MiB of packets kept over all connections at most.
    #[arg(long, default_value_t = 256, value_name = "MIB")]
    pub keep_memory: usize,
    /// Flight recorder: MiB of files in DIR at most (oldest deleted first).
    #[arg(long, default_value_t = 1024, value_name = "MIB")]
    pub keep_disk: u64,
    /// Capture in this named network namespace (`ip netns list`).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// Bytes kept of each packet (every header, and the first bytes of
    /// requests and responses).
    #[arg(long, default_value_t = WATCH_SNAPLEN_DEFAULT, value_name = "BYTES")]
    pub snaplen: u32,
    /// The kernel's capture ring, MiB.
    #[arg(long, default_value_t = WATCH_BUFFER_DEFAULT_MIB, value_name = "MIB")]
    pub buffer: u32,
    /// Do not put the interface into promiscuous mode.
    #[arg(long)]
    pub no_promisc: bool,
    /// Rows in the view; connections in the exit diagnosis's text.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Live connections held at most (the least recently seen are ended early).
    #[arg(long, value_name = "N", default_value_t = tcpwhy_flow::MAX_CONNECTIONS_DEFAULT)]
    pub max_connections: usize,
    /// Seconds a closed connection (both FINs, or a RST) stays silent
    /// before it is retired and its verdict settled. The default is Linux's
    /// TIME_WAIT: a FIN sent again within it still finds its connection.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0, value_parser = linger_seconds)]
    pub linger: f64,
    /// Kernel version the fixes are for (as for `diagnose`).
    #[arg(long, value_name = "VERSION")]
    pub kernel: Option<String>,
    /// The path's bandwidth if you know it (as for `diagnose`).
    #[arg(long, value_name = "RATE", value_parser = crate::quantity::bits_per_sec)]
    pub bandwidth: Option<f64>,
    /// The path's RTT if you know it (as for `diagnose`).
    #[arg(long, value_name = "TIME", value_parser = crate::quantity::millis)]
    pub rtt: Option<f64>,
}

/// What the flow table hands the watch for each segment: the diagnosis's
/// records, which connections moved data since the last interval, RTT
/// samples for the metrics, and which connection a frame went to (for the
/// flight recorder).
struct WatchSink {
    /// The pipeline the segments go to (`tcpwhy_diagnose::Live`).
    live: Live,
    dirty: HashSet<u64>,
    last_dirty: u64,
    rtt: Option<prometheus_client::metrics::histogram::Histogram>,
    /// The frame being read, its connection, whether it carried a SYN, and
    /// earlier frames the table gave to a connection while reading it.
    frame: u64,
    owner: Option<u64>,
    handshake: bool,
    adopted: Vec<(u64, u64)>,
    keep: bool,
}

impl SegmentSink for WatchSink {
    #[inline]
    fn segment(&mut self, c: &Connection, e: &SegmentEvent) {
        self.live.sink().segment(c, e);
        if e.payload_len > 0 && self.last_dirty != e.connection {
            self.dirty.insert(e.connection);
            self.last_dirty = e.connection;
        }
        if let (Some(h), Some(r)) = (&self.rtt, e.rtt_ns) {
            h.observe(r as f64 / 1e9);
        }
        if self.keep {
            if e.frame == self.frame {
                self.owner = Some(e.connection);
                self.handshake |= e.tcp_flags & 0x02 != 0;
            } else {
                self.adopted.push((e.connection, e.frame));
            }
        }
    }
    fn payload(&mut self, c: &Connection, e: &SegmentEvent, payload: &[u8]) {
        self.live.sink().payload(c, e, payload);
    }
    fn payload_prefix(&self) -> usize {
        self.live.recorder().payload_prefix()
    }
}

/// `--linger`: a number of seconds, zero or more.
fn linger_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=86_400.0).contains(&v) => Ok(v),
        _ => Err(format!("'{s}' is not a number of seconds from 0 to 86400")),
    }
}

fn kernel_rule(a: &WatchArgs) -> Result<KernelRule, String> {
    match &a.kernel {
        None => Ok(KernelRule::default()),
        Some(v) => KernelRule::for_version(v, None).ok_or_else(|| format!("--kernel '{v}' is not a version like 5.10 or 6.8")),
    }
}

fn keep_options(a: &WatchArgs) -> Result<Option<keep::KeepOptions>, String> {
    let Some(dir) = &a.keep else { return Ok(None) };
    let when = a
        .when
        .iter()
        .map(|w| w.trim().parse::<Cause>().map_err(|e| format!("--when: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    if !(a.keep_seconds > 0.0) {
        return Err("--keep-seconds must be positive".into());
    }
    Ok(Some(keep::KeepOptions {
        dir: dir.clone(),
        snaplen: a.snaplen,
        when,
        seconds: a.keep_seconds,
        conn_bytes: a.keep_mb.max(1) << 20,
        memory_bytes: a.keep_memory.max(1) << 20,
        disk_bytes: a.keep_disk.max(1) << 20,
    }))
}

pub fn run(a: &WatchArgs) -> u8 {
    let usage = |m: String| {
        eprintln!("tcpwhy watch: {m}");
        crate::exit::USAGE
    };
    let kernel = match kernel_rule(a) {
        Ok(k) => k,
        Err(m) => return usage(m),
    };
    let keep_opt = match keep_options(a) {
        Ok(k) => k,
        Err(m) => return usage(m),
    };
    if !(a.interval > 0.0) {
        return usage("--interval must be positive".into());
    }
    // libpcap first: a system without it is told what to install before
    // anything starts.
    if let Err(e) = source::load_libpcap() {
        eprintln!("tcpwhy watch: {e}");
        return open_error_code(&e);
    }
    // The metrics server listens where tcpwhy was started; only the
    // capture is opened in --netns.
    let (metrics, registry) = metrics::Metrics::new();
    if let Some(addr) = &a.metrics {
        match metrics::serve(addr, registry) {
            Ok(bound) => eprintln!("tcpwhy watch: metrics at http://{bound}/metrics"),
            Err(m) => {
                eprintln!("tcpwhy watch: {m}");
                return crate::exit::FAILURE;
            }
        }
    }
    let netns = match a.netns.as_deref().map(source::enter_netns).transpose() {
        Ok(g) => g,
        Err(m) => return usage(m),
    };
    let filter = if a.filter.is_empty() { "tcp".to_string() } else { a.filter.join(" ") };
    let opened = source::Source::open(&a.iface, &filter, a.snaplen, a.buffer, !a.no_promisc);
    drop(netns);
    let mut src = match opened {
        Ok(s) => s,
        Err(e) => {
            eprintln!("tcpwhy watch: {e}");
            return open_error_code(&e);
        }
    };
    if let Some(w) = &src.warning {
        eprintln!("tcpwhy watch: warning: {w}");
    }
    if !src.link.is_supported() {
        return usage(format!("{}: link type {} is not one tcpwhy decodes", a.iface, src.dlt));
    }
    let keep = match keep_opt.map(|k| keep::Keep::new(k, src.link)).transpose() {
        Ok(k) => k,
        Err(m) => return usage(m),
    };
    eprintln!("tcpwhy watch: listening on {} ({filter}), snaplen {}", a.iface, a.snaplen);
    tcpwhy_lab::netns::install_signal_handlers();
    let opts = Options { kernel, bandwidth_bps: a.bandwidth, rtt_ms: a.rtt };
    let mut w = Watch::new(a, opts, metrics, keep);
    let ended = w.read(&mut src);
    w.finish(src, ended, kernel)
}

/// The exit code for why the capture could not be opened: the codes
/// `live`, `trace` and `host` use for "not allowed" and "missing".
fn open_error_code(e: &source::OpenError) -> u8 {
    match e {
        source::OpenError::Usage(_) => crate::exit::USAGE,
        source::OpenError::Permission(_) => crate::kcommon::NEEDS_PRIVILEGE,
        source::OpenError::Missing(_) => crate::kcommon::NO_FACILITY,
        source::OpenError::Other(_) => crate::exit::FAILURE,
    }
}

/// The state of one watch.
struct Watch<'a> {
    a: &'a WatchArgs,
    table: FlowTable,
    sink: WatchSink,
    verdicts: verdicts::Verdicts,
    metrics: metrics::Metrics,
    keep: Option<keep::Keep>,
    started: Instant,
    view: bool,
    drops: source::Drops,
    last_frame_ns: i64,
}

impl<'a> Watch<'a> {
    fn new(a: &'a WatchArgs, opts: Options, metrics: metrics::Metrics, keep: Option<keep::Keep>) -> Watch<'a> {
        let mut table = FlowTable::new();
        table.max_connections = a.max_connections.max(1);
        table.retire_after_close_ns = (a.linger * 1e9) as i64;
        let sink = WatchSink {
            live: Live::new(opts, MAX_ENDED_KEPT),
            dirty: HashSet::default(),
            last_dirty: u64::MAX,
            rtt: a.metrics.as_ref().map(|_| metrics.rtt.clone()),
            frame: 0,
            owner: None,
            handshake: false,
            adopted: Vec::new(),
            keep: keep.is_some(),
        };
        Watch {
            a,
            table,
            sink,
            verdicts: verdicts::Verdicts::new(a.json),
            metrics,
            keep,
            started: Instant::now(),
            view: !a.no_view && !a.json && io::stdout().is_terminal(),
            drops: source::Drops::default(),
            last_frame_ns: 0,
        }
    }

    /// Reads until Ctrl-C, --duration or the end of the capture; why it
    /// ended when the interface went away.
    fn read(&mut self, src: &mut source::Source) -> Option<String> {
        let interval = Duration::from_secs_f64(self.a.interval);
        let mut next_tick = Instant::now() + interval;
        let deadline = self.a.duration.map(|d| self.started + Duration::from_secs_f64(d));
        let mut since_clock = 0u32;
        loop {
            match src.next() {
                source::Read::Frame(f) => {
                    self.frame(&f);
                    since_clock += 1;
                    // The clock is read every 64 frames (and on every quiet read).
                    if since_clock < 64 {
                        continue;
                    }
                }
                source::Read::Quiet => {}
                source::Read::Ended(m) => return Some(m),
            }
            since_clock = 0;
            if tcpwhy_lab::netns::interrupted() {
                return None;
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return None;
            }
            if now >= next_tick {
                self.tick(src);
                next_tick = (next_tick + interval).max(Instant::now());
            }
        }
    }

    #[inline]
    fn frame(&mut self, f: &Frame<'_>) {
        self.last_frame_ns = f.time_ns;
        if self.keep.is_none() {
            self.table.frame(f, &mut self.sink);
            return;
        }
        self.sink.frame = f.number;
        self.sink.owner = None;
        self.sink.handshake = false;
        self.sink.adopted.clear();
        let skipped = self.table.skipped.total();
        self.table.frame(f, &mut self.sink);
        let tcp = self.table.skipped.total() == skipped;
        if let Some(k) = self.keep.as_mut().filter(|_| tcp) {
            k.frame(f, self.sink.owner, self.sink.handshake, &self.sink.adopted);
        }
    }

    /// Every interval: the kernel's drop counters, the connections that
    /// ended, the verdicts of those that moved data, the view.
    fn tick(&mut self, src: &mut source::Source) {
        if let Some(d) = src.drops() {
            self.metrics.kernel_drops.inc_by(d.dropped.saturating_sub(self.drops.dropped));
            self.metrics.interface_drops.inc_by(d.if_dropped.saturating_sub(self.drops.if_dropped));
            self.drops = d;
        }
        let frames = src.frames();
        let seen = self.metrics.packets.get();
        self.metrics.packets.inc_by(frames.saturating_sub(seen));
        let ctx = verdicts::Context { metrics: &self.metrics, now_ns: self.last_frame_ns };
        for s in self.table.take_finished() {
            if s.evicted {
                self.metrics.connections_evicted.inc();
            }
            let d = self.sink.live.ended(s.clone());
            self.verdicts.ended(&ctx, &s, &d, self.keep.as_mut());
            if let Some(k) = self.keep.as_mut() {
                k.forget(s.id);
            }
        }
        // Retired connections are diagnosed for good once their hosts have
        // no live connection left (`tcpwhy_diagnose::pipeline`).
        if self.sink.live.held() > 0 {
            let live = self.table.live_host_pairs();
            self.sink.live.settle(|k| live.contains(k));
        }
        let ids = self.verdicts.pick(&mut self.sink.dirty, MAX_DIAGNOSES_PER_INTERVAL);
        self.sink.last_dirty = u64::MAX;
        if !ids.is_empty() {
            let summaries = self.table.live_summaries(|id| ids.contains(&id));
            self.verdicts.update(&ctx, &summaries, &self.sink.live, self.keep.as_mut());
        }
        if let Some(k) = &self.keep {
            let written = k.files_written;
            let counted = self.metrics.keep_files.get();
            self.metrics.keep_files.inc_by(written.saturating_sub(counted));
        }
        if self.view {
            let status = view::Status {
                iface: &self.a.iface,
                now_s: self.last_frame_ns as f64 / 1e9,
                elapsed: self.started.elapsed(),
                frames,
                drops: self.drops,
                live: self.table.active_connections(),
                keep: self.keep.as_ref().map(|k| (k.files_written, k.memory(), k.stopped.clone())),
            };
            let _ = view::draw(&status, &self.verdicts, self.a.top);
        }
    }

    /// The exit report: what ended before, and what is still live, as
    /// `diagnose` prints it.
    fn finish(mut self, mut src: source::Source, ended: Option<String>, kernel: KernelRule) -> u8 {
        if let Some(d) = src.drops() {
            self.drops = d;
        }
        let frames = src.frames();
        drop(src);
        if self.view {
            print!("\x1b[H\x1b[2J");
        }
        if let Some(m) = &ended {
            eprintln!("tcpwhy watch: the capture on {} ended: {m}", self.a.iface);
        }
        if let Some(m) = self.keep.as_ref().and_then(|k| k.stopped.as_ref()) {
            eprintln!("tcpwhy watch: warning: the flight recorder stopped: {m}");
        }
        let d = self.drops;
        eprintln!(
            "tcpwhy watch: {frames} packets in {:.1} s, {} dropped by the kernel, {} by the interface{}",
            self.started.elapsed().as_secs_f64(),
            d.dropped,
            d.if_dropped,
            self.keep.as_ref().map(|k| format!(", {} flight-recorder captures written", k.files_written)).unwrap_or_default()
        );
        let mut sink = self.sink;
        let skipped = self.table.skipped.iter().map(|(why, n)| (why.name(), n)).collect();
        let tcp_segments = self.table.segments();
        let evicted = self.table.evicted_connections;
        let (connections, attempts) = self.table.finish(&mut sink);
        let analysis = tcpwhy_flow::CaptureAnalysis {
            path: self.a.iface.clone(),
            format: tcpwhy_wire::CaptureFormat::Live,
            compression: None,
            frames,
            tcp_segments,
            skipped,
            unsupported_links: Vec::new(),
            interface_drops: Some(d.dropped + d.if_dropped),
            connections,
            attempts,
            evicted_connections: evicted,
            error: None,
        };
        let (done, dropped_ended) = sink.live.finish(analysis);
        if dropped_ended > 0 {
            eprintln!("tcpwhy watch: {dropped_ended} ended connections are left out of the report (at most {MAX_ENDED_KEPT} are kept)");
        }
        let mut entry = crate::diagnose::file_entry(std::path::Path::new(&self.a.iface), &done.analysis);
        if let Some(m) = entry.as_object_mut() {
            m.insert("kernel_drops".into(), serde_json::json!(d.dropped));
            m.insert("interface_driver_drops".into(), serde_json::json!(d.if_dropped));
        }
        let mut c = Collected::default();
        c.add(entry, OneFile { analysis: done.analysis, diags: done.diagnoses, latency: done.latency, groups: done.groups, spill: None });
        let o = DiagnoseOptions {
            json: self.a.json,
            compact_json: true,
            kernel: self.a.kernel.clone(),
            bandwidth: self.a.bandwidth,
            rtt: self.a.rtt,
            top: self.a.top,
            max_connections: self.a.max_connections,
            ..DiagnoseOptions::default()
        };
        match crate::diagnose::report(c, &o, kernel, false) {
            Ok(_) => crate::exit::OK,
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => crate::exit::OK,
            Err(e) => {
                eprintln!("tcpwhy watch: {e}");
                crate::exit::FAILURE
            }
        }
    }
}
