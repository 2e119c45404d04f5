//! The `tcpwhy` command: wires the crates together; holds no analysis.

use read::{exit_code, read_one, read_sharded, thread_plan};
use clap::{Args, CommandFactory, Parser, Subcommand};
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use tcpwhy_flow::{
    AnalyzeOptions, CaptureAnalysis, Connection, SegmentEvent, SegmentSink,
};

mod annotate;
mod batch;
mod bdp;
mod diagnose;
mod error;
mod evidence;
mod exit;
mod hostcmd;
mod kcommon;
mod lab;
mod labexit;
mod pair;
mod quantity;
mod read;
mod latency;
mod live;
mod sscmd;
mod sweep;
mod trace;
mod report_cmd;
mod prove;
mod watch;


/// Every command's exit codes, as README.md's table has them.
const EXIT_HELP: &str = "\
Exit codes: 0 all input read (`lab`: the run showed its cause; `prove`: the lab
reproduced the capture and every prediction held); 1 output could not be
written, or another failure (`lab`, `prove`: a step failed); 2 usage error, a
mistyped subcommand included (`watch`: also an unknown interface or a bad
filter; `lab`: an invalid scenario or parameter; `prove`: also nothing to
rebuild); 3 an input could not be read at all (missing, not a capture; `lab`:
the scenario file); 4 an input was truncated or corrupt part-way (results cover
the frames before the damage, and a warning says where); 5 `live`/`trace`/
`host`/`watch`: not allowed (root or CAP_NET_RAW needed), `lab`/`prove`: it ran
but the kernel's numbers did not show the cause, or the lab did not reproduce
the capture or a prediction missed; 6 `live`/`trace`/`host`: tracefs, the tcp
tracepoints or sock_diag missing, or no such network namespace, or libpcap
cannot be loaded (`watch`), `lab`/`prove`: cannot run the lab here (root,
iproute2, tcpdump, /dev/net/tun); 7 `diagnose --pair`: the two captures share
no connection (each is diagnosed alone); 130 `lab`/`prove` interrupted.";

const AFTER_HELP: &str = "\
Exit codes: 0 all input read; 2 usage error; 3 an input could not be read at all
(missing, not a capture); 4 an input was truncated or corrupt part-way (results
cover the frames before the damage, and a warning says where); 1 other failure.

Input: pcap (micro- or nanosecond, either byte order) and pcapng, optionally
gzip/xz/zstd-compressed (recognised by content); '-' reads standard input.";

#[derive(Parser)]
#[command(
    name = "tcpwhy",
    version,
    about = "Why is this TCP connection slow? Rebuilds every TCP connection in a capture and explains it with numbers.",
    after_help = [diagnose::DIAGNOSE_ABOUT, "\n\n", EXIT_HELP, "\n\n", quantity::UNITS_HELP].concat(),
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Capture files to diagnose (same as `tcpwhy diagnose FILE...`).
    files: Vec<PathBuf>,
    #[command(flatten)]
    diagnose: diagnose::DiagnoseOptions,
}

#[derive(Subcommand)]
enum Command {
    /// What limited each connection (receiver window, send buffer, policer,
    /// slow start...), the root cause with evidence, the fix as commands
    /// with computed values, and the predicted rate after the fix.
    #[command(after_help = [diagnose::DIAGNOSE_ABOUT, "\n\n", diagnose::DIAGNOSE_EXIT_HELP, "\n\n", quantity::UNITS_HELP].concat())]
    Diagnose {
        /// Capture files (pcap, pcapng; .gz/.xz/.zst; '-' for stdin).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        options: diagnose::DiagnoseOptions,
    },
    /// Where each request's time went: exchanges per connection (new or
    /// reused, idle restart, slow-start rounds, delayed ACK), the time on a
    /// warm connection, and fixes with the predicted latency.
    #[command(after_help = latency::LATENCY_AFTER_HELP)]
    Latency {
        /// Capture files (pcap, pcapng; .gz/.xz/.zst; '-' for stdin).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        options: latency::LatencyOptions,
    },
    /// Per-connection summary: packets, bytes, retransmissions, RTT, windows,
    /// throughput, idle time and analysis flags, for each direction.
    #[command(after_help = AFTER_HELP)]
    Stats {
        /// Capture files (pcap, pcapng; .gz/.xz/.zst; '-' for stdin).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        options: StatsOptions,
    },
    /// One line per TCP segment with tcpwhy's analysis flags (like tshark's
    /// tcp.analysis.* fields): sequence, length, ACK, window, bytes in
    /// flight, RTT sample.
    #[command(after_help = AFTER_HELP)]
    Packets {
        /// Capture file (pcap, pcapng; .gz/.xz/.zst; '-' for stdin).
        file: PathBuf,
        /// Print only segments that carry at least one analysis flag.
        #[arg(long)]
        flagged: bool,
        /// JSON Lines output, one object per segment (schema tcpwhy.packets/1).
        #[arg(long)]
        json: bool,
    },
    /// One self-contained HTML report (overview, diagnosis, request
    /// timelines, zoomable linked plots) with `-o report.html`; Parquet or Arrow tables with `--parquet
    /// DIR` / `--arrow DIR`.
    #[command(after_help = [report_cmd::REPORT_AFTER_HELP, "\n\n", quantity::UNITS_HELP].concat())]
    Report(report_cmd::ReportArgs),
    /// Diagnose many captures on every core into Parquet tables (one row per
    /// connection direction, capture quality, flow groups, files, errors);
    /// resumable; for DuckDB, pandas, Spark.
    #[command(after_help = batch::BATCH_AFTER_HELP)]
    Batch(batch::BatchArgs),
    /// The capture as pcapng with the diagnosis in packet comments (each
    /// data segment's phase, each finding on its evidence frames), for
    /// Wireshark: `frame.comment contains "receiver_window"`.
    #[command(after_help = annotate::ANNOTATE_AFTER_HELP)]
    Annotate(annotate::AnnotateArgs),
    /// A static plot of one connection (tsg, window, rtt, rate) as SVG or PNG.
    #[command(after_help = report_cmd::PLOT_AFTER_HELP)]
    Plot(report_cmd::PlotArgs),
    /// Reproduce a case with the real Linux TCP stack in network namespaces
    /// (needs root): `lab list`, `lab run SCENARIO --out DIR`, `lab sweep --draws N --out DIR`, `lab clean`.
    #[command(subcommand, after_help = lab::LAB_AFTER_HELP)]
    Lab(lab::LabCommand),
    /// Rebuild a captured connection in the lab from its diagnosis (root),
    /// check the lab behaves like the capture, run each proposed fix and
    /// show the measured gain beside the predicted one.
    #[command(after_help = prove::PROVE_AFTER_HELP)]
    Prove(prove::ProveArgs),
    /// Watch live sockets (tcp_info over sock_diag): rate, RTT, cwnd, in
    /// flight and the current limit per connection; diagnosis on exit.
    #[command(after_help = [live::LIVE_AFTER_HELP, kcommon::KERNEL_EXIT_HELP, "\n\n", quantity::UNITS_HELP].concat())]
    Live(live::LiveArgs),
    /// Watch an interface (root): live packets through the same analysis
    /// as `diagnose`, each connection's limit as it happens, metrics for
    /// Prometheus, a flight recorder; the diagnosis on exit.
    #[command(after_help = [watch::WATCH_AFTER_HELP, "\n\n", quantity::UNITS_HELP].concat())]
    Watch(watch::WatchArgs),
    /// Read saved `ss -tin`/`ss -tinm` output (one or many snapshots) and
    /// say what limited each connection.
    #[command(after_help = [sscmd::SS_AFTER_HELP, "\n\n", quantity::UNITS_HELP].concat())]
    Ss(sscmd::SsArgs),
    /// Judge this host's (or saved) TCP settings: largest windows,
    /// throughput ceiling at an RTT, findings with fix commands.
    #[command(after_help = [hostcmd::HOST_AFTER_HELP, "\n\n", quantity::UNITS_HELP].concat())]
    Host(hostcmd::HostArgs),
    /// Record per-ACK cwnd, ssthresh, peer window and RTT from the kernel's
    /// tcp_probe tracepoint (needs root).
    #[command(after_help = [trace::TRACE_AFTER_HELP, kcommon::KERNEL_EXIT_HELP, "\n\n", quantity::UNITS_HELP].concat())]
    Trace(trace::TraceArgs),
    /// Bandwidth-delay product: window needed, tcp_rmem/tcp_wmem for a
    /// kernel, time to send N bytes from a cold start.
    #[command(after_help = [bdp::BDP_AFTER_HELP, "\n\n", quantity::UNITS_HELP].concat())]
    Bdp(bdp::BdpArgs),
}

#[derive(Args, Default)]
struct StatsOptions {
    /// Print JSON (schema tcpwhy.stats/1, see docs/json.md) instead of the table.
    #[arg(long)]
    json: bool,
    /// Never show a progress bar (it is shown only when stderr is a terminal).
    #[arg(long)]
    no_progress: bool,
    /// With --json: add throughput and goodput over time to each direction
    /// (bytes per bin, at most 2,048 bins).
    #[arg(long, requires = "json")]
    series: bool,
    /// Live connections held at most; past it the least recently seen are
    /// summarised early (marked evicted). Bounds memory on huge captures.
    #[arg(long, value_name = "N", default_value_t = tcpwhy_flow::MAX_CONNECTIONS_DEFAULT)]
    max_connections: usize,
    /// Threads to use (default: the number of cores). Several captures are
    /// read at once, one per thread; a capture with threads to spare has its
    /// connections analysed on them (sharded), beside the thread that reads
    /// it. A plain pcap file of a few connections (16 MiB or more) is
    /// instead cut in two near its middle and each half read by a thread,
    /// joined only where the second half's state at the cut is proven the
    /// first's (else the first thread reads on). The output is the same
    /// whatever the number.
    #[arg(long, short, value_name = "N")]
    jobs: Option<usize>,
}

/// A first word that names no file and is within a small edit distance
/// of a subcommand's name (`tcpwhy diagnoze x.pcap`) is that subcommand
/// mistyped, not a capture to open: the closest name. A word with a path
/// separator or a dot is always a path.
fn mistyped_subcommand(word: &std::path::Path) -> Option<String> {
    let w = word.to_str()?.to_ascii_lowercase();
    if w.is_empty() || w.contains(['/', '.']) || word.exists() {
        return None;
    }
    Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .filter_map(|name| {
            let d = edit_distance(&w, &name);
            (d <= 2 && d * 3 <= w.len().max(name.len())).then_some((d, name))
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, name)| name)
}

/// Edits (insertions, deletions, substitutions, swaps of two neighbours)
/// from `a` to `b`: the optimal string alignment distance.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// clap's own error for an unknown subcommand, with the suggestion: exit 2.
fn unrecognized_subcommand(word: &std::path::Path, suggestion: String) -> ! {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let mut cmd = Cli::command();
    cmd.build();
    let mut err = clap::Error::new(ErrorKind::InvalidSubcommand).with_cmd(&cmd);
    err.insert(ContextKind::InvalidSubcommand, ContextValue::String(word.display().to_string()));
    err.insert(ContextKind::SuggestedSubcommand, ContextValue::Strings(vec![suggestion]));
    err.insert(ContextKind::Usage, ContextValue::StyledStr(cmd.render_usage()));
    err.exit()
}

/// Large blocks stay in the heap rather than each in a mapping of its own.
/// Each part of a long direction is diagnosed with several MB of vectors
/// (the policer's packets, the intervals, the RTT samples); glibc maps a
/// block above its mmap threshold (128 KiB, rising to at most 32 MiB as
/// such blocks are freed) and unmaps it on free, so every part's vectors
/// were fresh zero pages again: page faults took 17% of `diagnose`'s time
/// on bench/make-bulk-pcap.py's capture. With the thresholds at 64 MiB
/// (a block) and 256 MiB (the free top kept), the pages are reused:
/// `diagnose -j 1` in 0.878 of the time, peak memory 29 to 32 MiB; what
/// is kept is bounded by the peak of what was in use, never by the
/// capture's length (bench/speed.md).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_freed_pages() {
    const MMAP_THRESHOLD: libc::c_int = 64 << 20;
    const TRIM_THRESHOLD: libc::c_int = 256 << 20;
    // SAFETY: mallopt only sets two of glibc's allocator parameters; it is
    // called before any thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
    }
}
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_freed_pages() {}

fn main() -> ExitCode {
    keep_freed_pages();
    let cli = Cli::parse();
    if cli.command.is_none() {
        if let Some(name) = cli.files.first().and_then(|f| mistyped_subcommand(f)) {
            unrecognized_subcommand(&cli.files[0], name);
        }
    }
    let result = match cli.command {
        Some(Command::Diagnose { files, options }) => diagnose::run(&files, &options),
        Some(Command::Latency { files, options }) => latency::run(&files, &options),
        Some(Command::Stats { files, options }) => stats(&files, &options),
        Some(Command::Packets {
            file,
            flagged,
            json,
        }) => packets(&file, flagged, json),
        Some(Command::Report(args)) => report_cmd::run_report(&args),
        Some(Command::Plot(args)) => report_cmd::run_plot(&args),
        Some(Command::Batch(a)) => return ExitCode::from(batch::run(&a)),
        Some(Command::Annotate(a)) => return ExitCode::from(annotate::run(&a)),
        Some(Command::Lab(cmd)) => return ExitCode::from(lab::main(cmd)),
        Some(Command::Prove(a)) => return ExitCode::from(prove::run(&a)),
        Some(Command::Live(a)) => return ExitCode::from(live::run(&a)),
        Some(Command::Watch(a)) => return ExitCode::from(watch::run(&a)),
        Some(Command::Ss(a)) => return ExitCode::from(sscmd::run(&a)),
        Some(Command::Host(a)) => return ExitCode::from(hostcmd::run(&a)),
        Some(Command::Trace(a)) => return ExitCode::from(trace::run(&a)),
        Some(Command::Bdp(a)) => return ExitCode::from(bdp::run(&a)),
        None if !cli.files.is_empty() => diagnose::run(&cli.files, &cli.diagnose),
        None => {
            eprintln!(
                "tcpwhy: give a capture file, e.g. `tcpwhy capture.pcap`, or see `tcpwhy --help`"
            );
            return ExitCode::from(exit::USAGE);
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::from(exit::OK),
        Err(e) => {
            eprintln!("tcpwhy: {e}");
            ExitCode::from(exit::FAILURE)
        }
    }
}

fn stats(files: &[PathBuf], options: &StatsOptions) -> io::Result<u8> {
    let mut analyses = Vec::new();
    let mut failed = Vec::new();
    // Each capture alone (in parallel with --jobs), joined in the order given.
    let (jobs, shards) = thread_plan(options.jobs, files.len());
    let analyze = AnalyzeOptions {
        series: options.series,
        max_connections: options.max_connections,
        in_order: false,
        decode_thread: false,
    };
    let quiet = options.no_progress || jobs > 1;
    let one = |path: &PathBuf| read_sharded(path, analyze, shards, &mut (), quiet);
    let done: Vec<Option<CaptureAnalysis>> = match rayon::ThreadPoolBuilder::new().num_threads(jobs).build() {
        Ok(pool) if jobs > 1 => {
            use rayon::prelude::*;
            pool.install(|| files.par_iter().map(one).collect())
        }
        _ => files.iter().map(one).collect(),
    };
    for (path, a) in files.iter().zip(done) {
        match a {
            Some(a) => analyses.push(a),
            None => failed.push(path.display().to_string()),
        }
    }
    // Nothing was readable: the errors on stderr are all there is to say.
    if analyses.is_empty() {
        return Ok(exit_code(&analyses, failed.len()));
    }
    let mut out = BufWriter::new(io::stdout().lock());
    if options.json {
        for line in analyses.iter().filter_map(|a| a.no_tcp()) {
            eprintln!("tcpwhy: {line}");
        }
        serde_json::to_writer_pretty(&mut out, &tcpwhy_report::stats_json(&analyses, &failed))?;
        writeln!(out)?;
    } else {
        tcpwhy_report::write_stats_table(&mut out, &analyses)?;
    }
    out.flush()?;
    Ok(exit_code(&analyses, failed.len()))
}

/// Streams one line per segment.
struct PacketPrinter<W: Write> {
    out: W,
    flagged_only: bool,
    json: bool,
    error: Option<io::Error>,
}

impl<W: Write> PacketPrinter<W> {
    fn write(&mut self, c: &Connection, e: &SegmentEvent) -> io::Result<()> {
        let names: Vec<&str> = e.flags.names().collect();
        let tcp = tcp_flag_letters(e.tcp_flags);
        if self.json {
            let v = serde_json::json!({
                "frame": e.frame,
                "time": e.time_ns as f64 / 1e9,
                "connection": e.connection,
                "from": if e.direction == 0 { "a" } else { "b" },
                "src": format!("{}:{}", c.endpoints[e.direction].0, c.endpoints[e.direction].1),
                "tcp_flags": tcp,
                "seq": e.seq,
                "len": e.payload_len,
                "ack": e.ack,
                "window": e.window_bytes,
                "in_flight": e.in_flight,
                "rtt_ms": e.rtt_ns.map(|r| r as f64 / 1e6),
                "dup_ack_num": (e.dup_ack_num > 0).then_some(e.dup_ack_num),
                "flags": names,
            });
            serde_json::to_writer(&mut self.out, &v)?;
            writeln!(self.out)
        } else {
            writeln!(
                self.out,
                "{:>8} {:>17.6} c{:<4} {} {:<6} seq={} len={} ack={} win={}{}{} {}",
                e.frame,
                e.time_ns as f64 / 1e9,
                e.connection,
                if e.direction == 0 { "a>b" } else { "b>a" },
                tcp,
                e.seq,
                e.payload_len,
                e.ack.map_or("-".into(), |a| a.to_string()),
                e.window_bytes,
                e.in_flight
                    .map_or(String::new(), |f| format!(" inflight={f}")),
                e.rtt_ns
                    .map_or(String::new(), |r| format!(" rtt={:.3}ms", r as f64 / 1e6)),
                names.join(",")
            )
        }
    }
}

impl<W: Write> SegmentSink for PacketPrinter<W> {
    fn segment(&mut self, c: &Connection, e: &SegmentEvent) {
        if self.error.is_some() || (self.flagged_only && e.flags.is_empty()) {
            return;
        }
        if let Err(err) = self.write(c, e) {
            self.error = Some(err);
        }
    }
}

fn tcp_flag_letters(f: u16) -> String {
    let names = [
        (0x002, 'S'),
        (0x010, '.'),
        (0x001, 'F'),
        (0x004, 'R'),
        (0x008, 'P'),
        (0x020, 'U'),
    ];
    names
        .iter()
        .filter(|(bit, _)| f & bit != 0)
        .map(|(_, c)| *c)
        .collect()
}

fn packets(file: &std::path::Path, flagged: bool, json: bool) -> io::Result<u8> {
    let out = BufWriter::new(io::stdout().lock());
    let mut printer = PacketPrinter {
        out,
        flagged_only: flagged,
        json,
        error: None,
    };
    // One line per segment in capture order: no attempt is held back.
    let analysis = read_one(file, AnalyzeOptions { in_order: true, ..Default::default() }, &mut printer, true);
    if let Some(e) = printer.error.take() {
        return Err(e);
    }
    printer.out.flush()?;
    Ok(match analysis {
        None => exit::UNREADABLE,
        Some(a) => {
            // Stdout is one line per segment: the capture without any is said here.
            if let Some(line) = a.no_tcp() {
                eprintln!("tcpwhy: {line}");
            }
            exit_code(&[a], 0)
        }
    })
}
