//! `tcpwhy live [FILTER]`: sample tcp_info of live sockets through
//! sock_diag, show them top-like, keep the samples, diagnose on exit.

use crate::kcommon::{kernel_error, parse_filter, use_color};
use clap::Args;
use std::collections::HashMap;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tcpwhy_host::series::{self, Tracker};
use crate::quantity::seconds;
use tcpwhy_core::units::{fmt_bytes, fmt_rate};
use tcpwhy_kernel::{SockDiag, SocketSample};

pub const LIVE_AFTER_HELP: &str = "\
Samples every matching TCP socket's tcp_info (the data `ss -tin` prints) at
the interval, straight from the kernel over netlink sock_diag. On a terminal
a top-like view shows each connection's rate, RTT, cwnd, packets in flight,
Send-Q and its current limit; the limit comes from the kernel's own clocks
(tcpi_busy_time, tcpi_rwnd_limited, tcpi_sndbuf_limited, 4.10+) between two
samples, plus cwnd versus packets in flight. On exit (Ctrl-C, or after
--duration) it prints what limited each connection that moved data.

Filter (like ss): `port 5201`, `sport 22`, `dport 443`, `src 10.0.0.1`,
`dst 10.0.0.2[:PORT]`, `ADDR:PORT` (the peer), a bare port, `-4`/`-6`.

Examples:
  tcpwhy live dport 5201                 # watch an iperf3 client
  tcpwhy live --duration 10s --record s.jsonl port 443
  sudo tcpwhy live --netns blue          # sockets of another namespace
  tcpwhy ss s.jsonl                      # diagnose the recording again

No root needed for the current namespace; another namespace needs root.
";

#[derive(Args)]
pub struct LiveArgs {
    /// Which sockets (see below); default: every connected TCP socket.
    pub filter: Vec<String>,
    /// Time between samples (e.g. 100ms, 1s).
    #[arg(long, default_value = "100ms", value_parser = seconds, value_name = "TIME")]
    pub interval: f64,
    /// Stop after this long (e.g. 10s) and print the diagnosis.
    #[arg(long, value_parser = seconds, value_name = "TIME")]
    pub duration: Option<f64>,
    /// Sample the sockets of this named network namespace (`ip netns list`).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// Keep every sample as JSON Lines (readable by `tcpwhy ss`).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// No top-like view, only the diagnosis at the end.
    #[arg(long)]
    pub no_view: bool,
    /// Print the final diagnosis as JSON.
    #[arg(long)]
    pub json: bool,
    /// Full scan period: every socket matching the filter is dumped this
    /// often; in between only sockets that moved data are looked up (each
    /// --interval). New connections appear at the next scan.
    #[arg(long, default_value = "1s", value_parser = seconds, value_name = "TIME")]
    pub scan: f64,
    /// Dump every matching socket at every interval (no active-socket
    /// shortcut; costs about 1 µs of kernel time per socket per sample).
    #[arg(long)]
    pub full: bool,
    /// Rows in the view and connections in the diagnosis (largest first).
    #[arg(long, default_value_t = 20)]
    pub top: usize,
}

fn key(s: &SocketSample) -> (u64, std::net::SocketAddr, std::net::SocketAddr) {
    (s.cookie, s.src, s.dst)
}

pub fn run(a: &LiveArgs) -> u8 {
    let f = match parse_filter(&a.filter) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("tcpwhy live: {e}");
            return crate::error::ToExitCode::exit_code(&e);
        }
    };
    if !(a.interval > 0.0) {
        eprintln!("tcpwhy live: --interval must be positive");
        return crate::exit::USAGE;
    }
    let (mut diag, mut record) = match open(a) {
        Ok(x) => x,
        Err(code) => return code,
    };
    tcpwhy_lab::netns::install_signal_handlers();
    let view = !a.no_view && io::stdout().is_terminal();
    let color = use_color();
    let interval = Duration::from_secs_f64(a.interval);
    let redraw = interval.max(Duration::from_millis(500));
    let start = Instant::now();
    let mut next = start;
    let mut last_draw: Option<Instant> = None;
    let mut trackers: HashMap<(u64, std::net::SocketAddr, std::net::SocketAddr), Tracker> = HashMap::new();
    let mut buf: Vec<SocketSample> = Vec::new();
    let mut rounds = 0u64;
    let mut next_scan = start;
    // Sockets that moved data at the last look: (local, peer, cookie).
    let mut active: Vec<(std::net::SocketAddr, std::net::SocketAddr, u64)> = Vec::new();
    let scan_ms = (a.scan * 1e3) as u32;
    let ext = f.filter.extensions;
    loop {
        buf.clear();
        let now = Instant::now();
        let full = a.full || now >= next_scan;
        let r = if full {
            next_scan = now + Duration::from_secs_f64(a.scan.max(a.interval));
            diag.dump_tcp_into(&f.filter, &mut buf)
        } else {
            diag.get_tcp(&active, ext, &mut buf).map(|_| ())
        };
        if let Err(e) = r {
            return kernel_error(&e, "sock_diag dump failed", a.netns.as_deref());
        }
        rounds += 1;
        if !take_round(&buf, &mut trackers, &mut active, record.as_mut(), scan_ms) {
            eprintln!("tcpwhy live: cannot write the recording");
            return crate::exit::FAILURE;
        }
        let now = Instant::now();
        if view && last_draw.is_none_or(|t| now - t >= redraw) {
            let _ = draw(&trackers, a, start.elapsed(), color);
            last_draw = Some(now);
        }
        if tcpwhy_lab::netns::interrupted() || a.duration.is_some_and(|d| start.elapsed().as_secs_f64() >= d) {
            break;
        }
        next += interval;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now; // fell behind: do not burst
        }
    }
    if let Some(mut w) = record {
        if w.flush().is_err() {
            eprintln!("tcpwhy live: cannot write the recording");
        }
    }
    if view {
        print!("\x1b[H\x1b[2J");
    }
    let stats = diag.stats();
    eprintln!(
        "tcpwhy live: {rounds} samples in {:.1} s, {} connections seen, {} records ({} skipped){}",
        start.elapsed().as_secs_f64(),
        trackers.len(),
        stats.records,
        stats.skipped_records,
        a.record.as_ref().map(|p| format!(", recorded to {}", p.display())).unwrap_or_default()
    );
    let mut diags: Vec<_> = trackers.values().map(|t| t.finish()).collect();
    print_diagnoses(&mut diags, a.json, a.top)
}

/// The sock_diag socket (in `--netns`) and the `--record` file; the exit
/// code when either cannot be had.
fn open(a: &LiveArgs) -> Result<(SockDiag, Option<BufWriter<std::fs::File>>), u8> {
    let diag = match &a.netns {
        Some(n) => SockDiag::in_netns(n),
        None => SockDiag::new(),
    };
    let diag = diag.map_err(|e| {
        kernel_error(
            &e,
            &format!("cannot open sock_diag{}", a.netns.as_ref().map(|n| format!(" in namespace {n}")).unwrap_or_default()),
            a.netns.as_deref(),
        )
    })?;
    let record = match &a.record {
        Some(p) => match std::fs::File::create(p) {
            Ok(f) => Some(BufWriter::new(f)),
            Err(e) => {
                eprintln!("tcpwhy live: cannot create {}: {e}", p.display());
                return Err(crate::exit::FAILURE);
            }
        },
        None => None,
    };
    Ok((diag, record))
}

/// One round's samples into their trackers; `active` becomes the sockets
/// that moved data (or have data queued, or sent or received within
/// `scan_ms`), the ones the next partial look asks for. False when the
/// recording could not be written.
fn take_round(
    buf: &[SocketSample],
    trackers: &mut HashMap<(u64, std::net::SocketAddr, std::net::SocketAddr), Tracker>,
    active: &mut Vec<(std::net::SocketAddr, std::net::SocketAddr, u64)>,
    mut record: Option<&mut BufWriter<std::fs::File>>,
    scan_ms: u32,
) -> bool {
    active.clear();
    for s in buf {
        let moved = match trackers.get_mut(&key(s)) {
            Some(t) => {
                let before = t.last.tcp_info.map(|x| (x.bytes_acked, x.bytes_received));
                t.push(s);
                before != s.tcp_info.map(|x| (x.bytes_acked, x.bytes_received))
            }
            None => {
                trackers.insert(key(s), Tracker::new(s));
                false
            }
        };
        let recent = s.tcp_info.is_some_and(|t| t.last_data_sent < scan_ms || t.last_data_recv < scan_ms);
        if s.state == 1 && (moved || recent || s.wqueue > 0 || s.rqueue > 0) {
            active.push((s.src, s.dst, s.cookie));
        }
        if let Some(w) = record.as_deref_mut() {
            if serde_json::to_writer(&mut *w, s).is_err() || w.write_all(b"\n").is_err() {
                return false;
            }
        }
    }
    true
}

/// Shared with `tcpwhy ss`: sorts, prints text or JSON.
pub fn print_diagnoses(diags: &mut Vec<series::ConnDiagnosis>, json: bool, top: usize) -> u8 {
    diags.sort_by(|x, y| (y.bytes_acked.max(y.bytes_received)).cmp(&x.bytes_acked.max(x.bytes_received)));
    let moved: Vec<_> = diags.iter().filter(|d| d.role != "idle").collect();
    let out = io::stdout();
    let mut out = out.lock();
    let r = if json {
        serde_json::to_writer_pretty(&mut out, &serde_json::json!({
            "schema": "tcpwhy.live/1",
            "connections": moved,
        }))
        .map_err(io::Error::from)
        .and_then(|_| writeln!(out))
    } else if moved.is_empty() {
        writeln!(out, "no connection moved data while sampled ({} seen)", diags.len())
    } else {
        let mut r = Ok(());
        for d in moved.iter().take(top) {
            r = r.and_then(|_| writeln!(out, "{}\n", series::render(d)));
        }
        if moved.len() > top {
            r = r.and_then(|_| writeln!(out, "({} more connections; --top N shows more)", moved.len() - top));
        }
        r
    };
    match r {
        Ok(()) => crate::exit::OK,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => crate::exit::OK,
        Err(_) => crate::exit::FAILURE,
    }
}

fn draw(
    trackers: &HashMap<(u64, std::net::SocketAddr, std::net::SocketAddr), Tracker>,
    a: &LiveArgs,
    elapsed: Duration,
    color: bool,
) -> io::Result<()> {
    // Sockets seen within the last scan period.
    let newest = trackers.values().map(|t| t.last.mono_ns).max().unwrap_or(0);
    let horizon = newest.saturating_sub(((a.scan.max(a.interval) + a.interval) * 1.5e9) as u64);
    let current: Vec<&Tracker> = trackers.values().filter(|t| t.last.mono_ns >= horizon).collect();
    let mut rows: Vec<(&Tracker, f64)> = current
        .iter()
        .copied()
        .map(|t| {
            let rate = t
                .latest
                .as_ref()
                .map(|iv| (iv.acked_bytes.max(iv.received_bytes)) as f64 * 8.0 / (iv.end_s - iv.start_s).max(1e-9))
                .unwrap_or(0.0);
            (t, rate)
        })
        .collect();
    rows.sort_by(|x, y| y.1.total_cmp(&x.1));
    let mut o = String::new();
    o += "\x1b[H\x1b[2J";
    o += &format!(
        "tcpwhy live{}  {} sockets  every {:.0} ms  {:.0} s  (Ctrl-C: stop and diagnose)\n\n",
        a.netns.as_ref().map(|n| format!(" [{n}]")).unwrap_or_default(),
        current.len(),
        a.interval * 1e3,
        elapsed.as_secs_f64()
    );
    let header = format!(
        "{:<22} {:<22} {:>12} {:>9} {:>6} {:>6} {:>8} {:>10}  {}",
        "LOCAL", "PEER", "RATE", "RTT ms", "CWND", "INFL", "SSTHRESH", "SEND-Q", "LIMIT"
    );
    if color {
        o += &format!("\x1b[1m{header}\x1b[0m\n");
    } else {
        o += &header;
        o += "\n";
    }
    for (t, rate) in rows.iter().take(a.top) {
        let s = &t.last;
        let ti = s.tcp_info.unwrap_or_default();
        let ss = if ti.snd_ssthresh >= 1 << 30 { "-".to_string() } else { ti.snd_ssthresh.to_string() };
        let limit = t.latest.as_ref().map(|iv| iv.state).unwrap_or_else(|| series::snapshot_limit(s));
        o += &format!(
            "{:<22} {:<22} {:>12} {:>9.2} {:>6} {:>6} {:>8} {:>10}  {}\n",
            s.src.to_string(),
            s.dst.to_string(),
            fmt_rate(*rate),
            ti.rtt as f64 / 1e3,
            ti.snd_cwnd,
            ti.packets_in_flight(),
            ss,
            fmt_bytes(s.wqueue as f64),
            limit
        );
    }
    if rows.len() > a.top {
        o += &format!("... {} more\n", rows.len() - a.top);
    }
    let mut out = io::stdout().lock();
    out.write_all(o.as_bytes())?;
    out.flush()
}
