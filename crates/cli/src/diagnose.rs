//! `tcpwhy diagnose FILE...` (and `tcpwhy FILE`): what limited each
//! connection, why, the fix and what it gains.

use crate::read::{exit_code, read_sharded, read_with};
use clap::Args;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use tcpwhy_diagnose::{model::ConnectionDiagnosis, Diagnoser, KernelRule, Options};
use tcpwhy_flow::{analyze_capture, AnalyzeOptions, Tee};
use tcpwhy_pair::stream::Spill;

/// What `diagnose` does, for its help and the top-level one.
pub const DIAGNOSE_ABOUT: &str = "\
For each connection carrying data, tcpwhy cuts each direction into intervals of
about one RTT and attributes each to one limit (receiver_window, send_buffer,
sender_application, congestion_window, policer, bottleneck_link, slow_start,
receiver_application, idle), then names the root cause (primary), the
evidence (packet numbers, time ranges), the fix as commands with computed
values, and the predicted rate after the fix with its assumptions.

Examples:
  tcpwhy diagnose slow-download.pcap
  tcpwhy diagnose --kernel 5.10 --bandwidth 3gbit client.pcap.gz
  tcpwhy diagnose --json capture.pcapng | jq '.connections[].directions[].primary'
  tcpwhy diagnose --pair client.pcap server.pcap   # two capture points of one path

The fix arithmetic needs the kernel's rule for turning a receive buffer into a
window: before Linux 6.6 tcp_adv_win_scale (window = buffer x (1 - 1/2^scale)),
from 6.6 a per-socket scaling_ratio (about half). Default: 6.6+; use --kernel.";

/// `diagnose`'s exit codes (`tcpwhy --help` has every command's).
pub const DIAGNOSE_EXIT_HELP: &str = "\
Exit codes: 0 all input read; 2 usage error; 3 an input could not be read at all;
4 an input was truncated or corrupt part-way (the diagnosis covers the part
before the damage); 7 --pair: the two captures share no connection (each is
diagnosed alone); 1 other failure.";

#[derive(Args, Default, Clone)]
pub struct DiagnoseOptions {
    /// Print JSON (schema tcpwhy.diagnose/2, see docs/json.md).
    #[arg(long)]
    pub json: bool,
    /// The JSON on one line (`watch --json`, whose output is JSON Lines).
    #[arg(skip)]
    pub compact_json: bool,
    /// Kernel version of the receiver/sender the fixes are for (e.g. 5.10, 6.8):
    /// decides how tcp_rmem becomes a window.
    #[arg(long, value_name = "VERSION")]
    pub kernel: Option<String>,
    /// tcp_adv_win_scale on that kernel (before 6.6 only; default 1).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub adv_win_scale: Option<i8>,
    /// The path's bandwidth if you know it, with a unit (1gbit, 1Gbit/s, 125MB/s);
    /// otherwise estimated from packet spacing.
    #[arg(long, value_name = "RATE", value_parser = crate::quantity::bits_per_sec)]
    pub bandwidth: Option<f64>,
    /// The path's RTT if you know it, with a unit (35ms, 0.035s); otherwise measured.
    #[arg(long, value_name = "TIME", value_parser = crate::quantity::millis)]
    pub rtt: Option<f64>,
    /// Text output: show at most this many connections (largest first).
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Never show a progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Evidence: saved `ss -tin`/`ss -tinm` output (many snapshots allowed),
    /// or samples from `tcpwhy live --record`. Repeatable.
    #[arg(long, value_name = "FILE")]
    pub ss: Vec<PathBuf>,
    /// Evidence: a saved `sysctl -a` of the sender or receiver.
    #[arg(long, value_name = "FILE")]
    pub sysctl: Option<PathBuf>,
    /// Evidence: a saved `ip tcp_metrics show`.
    #[arg(long, value_name = "FILE")]
    pub tcp_metrics: Option<PathBuf>,
    /// Evidence: saved `nstat -az` or `netstat -s` counters.
    #[arg(long, value_name = "FILE")]
    pub nstat: Option<PathBuf>,
    /// Evidence: `tcpwhy trace --out` JSON Lines (or trace_pipe text).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Evidence: a `tcpwhy lab run` directory (its samples, trace, sysctls).
    #[arg(long, value_name = "DIR")]
    pub lab_run: Option<PathBuf>,
    /// Live connections held at most; past it the least recently seen are
    /// summarised early (marked evicted). Bounds memory on huge captures.
    #[arg(long, value_name = "N", default_value_t = tcpwhy_flow::MAX_CONNECTIONS_DEFAULT)]
    pub max_connections: usize,
    /// Threads to use (default: the number of cores). Several captures are
    /// read at once, one per thread; a capture with threads to spare has its
    /// connections analysed on them (sharded), beside the thread that reads
    /// it. The output is the same whatever the number.
    #[arg(long, short, value_name = "N")]
    pub jobs: Option<usize>,
    /// The two FILES are captures of one path at two points (the client's
    /// side and the server's, or either side of a middlebox): match their
    /// connections (through NAT and terminating proxies too), bound the
    /// clocks' offset, and say where the loss, the queue, the limit and the
    /// middlebox are (docs/pair.md).
    #[arg(long)]
    pub pair: bool,
}

pub fn run(files: &[PathBuf], o: &DiagnoseOptions) -> io::Result<u8> {
    let kernel = match &o.kernel {
        None => KernelRule::default(),
        Some(v) => match KernelRule::for_version(v, o.adv_win_scale) {
            Some(k) => k,
            None => {
                eprintln!("tcpwhy: --kernel '{v}' is not a version like 5.10 or 6.8");
                return Ok(crate::exit::USAGE);
            }
        },
    };
    if o.pair && files.len() != 2 {
        eprintln!("tcpwhy: --pair compares two captures of one path: give exactly two FILES (got {})", files.len());
        return Ok(crate::exit::USAGE);
    }
    let opts = Options { kernel, bandwidth_bps: o.bandwidth, rtt_ms: o.rtt };
    // Each capture alone (in parallel with --jobs), then joined in the
    // order given: the output does not depend on the number of jobs.
    let (jobs, shards) = crate::read::thread_plan(o.jobs, files.len());
    let quiet = o.no_progress || jobs > 1;
    let analyze = AnalyzeOptions { max_connections: o.max_connections, ..Default::default() };
    // --pair: the comparison's records are spilled during this read, so
    // that pairing need not read the captures again (one file per thread)
    let spill = o.pair && shards == 0;
    let one = |path: &PathBuf| diagnose_one(path, analyze, shards, quiet, &opts, spill);
    let done: Vec<Option<OneFile>> = if jobs > 1 {
        use rayon::prelude::*;
        match rayon::ThreadPoolBuilder::new().num_threads(jobs).build() {
            Ok(pool) => pool.install(|| files.par_iter().map(one).collect()),
            Err(_) => files.iter().map(one).collect(),
        }
    } else {
        files.iter().map(one).collect()
    };
    let mut c = Collected::default();
    for (path, r) in files.iter().zip(done) {
        let Some(r) = r else {
            c.failed.push(path.display().to_string());
            continue;
        };
        c.add(file_entry(path, &r.analysis), r);
    }
    if o.pair && c.failed.is_empty() {
        let opt = tcpwhy_pair::PairOptions { max_connections: o.max_connections };
        // the fingerprints come from the diagnosis's own read of each capture
        let paths = [files[0].as_path(), files[1].as_path()];
        let analyses = [&c.analyses[0], &c.analyses[1]];
        let paired = match <[Option<Spill>; 2]>::try_from(std::mem::take(&mut c.spills)) {
            Ok([Some(s0), Some(s1)]) => tcpwhy_pair::pair_spilled(paths, analyses, [s0, s1], opt),
            _ => tcpwhy_pair::pair_analyses(paths, analyses, opt),
        };
        match paired {
            Ok(p) => c.pair = Some(p),
            Err(e) => eprintln!("tcpwhy: --pair: {e}"),
        }
    }
    report(c, o, kernel, files.len() > 1)
}

/// What `diagnose` prints, gathered from one or more captures (or from a
/// live interface, `tcpwhy watch`).
#[derive(Default)]
pub(crate) struct Collected {
    pub files_json: Vec<serde_json::Value>,
    pub analyses: Vec<tcpwhy_flow::CaptureAnalysis>,
    pub failed: Vec<String>,
    pub all: Vec<(usize, ConnectionDiagnosis)>,
    pub lat_conns: Vec<tcpwhy_diagnose::latency::ConnLatency>,
    pub groups: Vec<(usize, tcpwhy_diagnose::groups::FlowGroup)>,
    /// `--pair`: the two captures compared.
    pub pair: Option<tcpwhy_pair::model::PairReport>,
    /// `--pair`: each capture's spilled records, in the order read.
    pub spills: Vec<Option<Spill>>,
}

impl Collected {
    /// One capture's results, after those already in.
    pub(crate) fn add(&mut self, entry: serde_json::Value, r: OneFile) {
        self.files_json.push(entry);
        let fi = self.files_json.len() - 1;
        self.lat_conns.extend(r.latency);
        self.groups.extend(r.groups.into_iter().map(|g| (fi, g)));
        self.all.extend(r.diags.into_iter().map(|d| (fi, d)));
        self.analyses.push(r.analysis);
        self.spills.push(r.spill);
    }
}

/// Applies the evidence options and prints the diagnosis (text or JSON);
/// the exit code.
pub(crate) fn report(c: Collected, o: &DiagnoseOptions, kernel: KernelRule, many_files: bool) -> io::Result<u8> {
    let Collected { files_json, analyses, failed, mut all, lat_conns, groups, mut pair, .. } = c;
    if let Some(p) = pair.as_mut() {
        let mut conns: Vec<(usize, &mut ConnectionDiagnosis)> = all.iter_mut().map(|(f, d)| (*f, d)).collect();
        tcpwhy_batch::pairs::carry_capacities(p, &mut conns);
    }
    // Nothing was readable: the errors on stderr are all there is to say.
    if analyses.is_empty() {
        return Ok(exit_code(&analyses, failed.len()));
    }
    if let Err(code) = apply_evidence(o, &mut all) {
        return Ok(code);
    }
    // Request latency (exchanges): its findings join the diagnosis.
    let lat = tcpwhy_diagnose::latency::latency_report(lat_conns);
    let mut out = BufWriter::new(io::stdout().lock());
    if o.json {
        let mut doc = json_doc(files_json, &failed, &all, &groups, &lat, o, kernel);
        if let Some(p) = &pair {
            crate::pair::add_json(&mut doc, p);
        }
        if o.compact_json {
            serde_json::to_writer(&mut out, &doc)?;
        } else {
            serde_json::to_writer_pretty(&mut out, &doc)?;
        }
        writeln!(out)?;
        for line in analyses.iter().filter_map(|a| a.no_tcp()) {
            eprintln!("tcpwhy: {line}");
        }
    } else {
        let color = io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        for line in analyses.iter().filter_map(|a| a.no_tcp()) {
            writeln!(out, "{line}")?;
        }
        write_attempts(&mut out, &analyses, color)?;
        // Connections and groups are named by their file when there are several.
        let labels: Vec<String> =
            analyses.iter().map(|a| if many_files { format!("{}: ", a.path) } else { String::new() }).collect();
        let no_tcp_at_all = analyses.iter().all(|a| a.no_tcp().is_some());
        write_text(&mut out, &all, &labels, o.top, color, no_tcp_at_all)?;
        write_groups(&mut out, &groups, &labels, color)?;
        write_latency(&mut out, &lat, color)?;
        if let Some(p) = &pair {
            crate::pair::write_text(&mut out, p, color)?;
        }
    }
    out.flush()?;
    if let Some(p) = &pair {
        for m in &p.messages {
            eprintln!("tcpwhy: --pair: {m}");
        }
        if p.pairs.is_empty() && exit_code(&analyses, failed.len()) == crate::exit::OK {
            return Ok(crate::exit::NOT_A_PAIR);
        }
    }
    Ok(exit_code(&analyses, failed.len()))
}

/// Kernel and host evidence beside the capture (ss, sysctl, tcp_metrics,
/// nstat, trace, a lab run): confirmations and findings. `Err` is the exit
/// code of evidence that could not be read.
fn apply_evidence(o: &DiagnoseOptions, all: &mut [(usize, ConnectionDiagnosis)]) -> Result<(), u8> {
    let ev_args = tcpwhy_host::evidence::EvidenceArgs {
        ss: o.ss.clone(),
        sysctl: o.sysctl.clone(),
        tcp_metrics: o.tcp_metrics.clone(),
        nstat: o.nstat.clone(),
        trace: o.trace.clone(),
        lab_dir: o.lab_run.clone(),
    };
    if ev_args.is_empty() {
        return Ok(());
    }
    match tcpwhy_host::evidence::Evidence::load(&ev_args) {
        Ok(ev) => {
            for n in &ev.notes {
                eprintln!("tcpwhy: {n}");
            }
            crate::evidence::apply(&ev, all.iter_mut().map(|(_, d)| d));
            Ok(())
        }
        Err(e) => {
            eprintln!("tcpwhy: {e}");
            Err(crate::error::ToExitCode::exit_code(&e))
        }
    }
}

/// The JSON document (schema `tcpwhy.diagnose/2`, docs/json.md).
fn json_doc(
    files_json: Vec<serde_json::Value>,
    failed: &[String],
    all: &[(usize, ConnectionDiagnosis)],
    groups: &[(usize, tcpwhy_diagnose::groups::FlowGroup)],
    lat: &tcpwhy_diagnose::latency::LatencyReport,
    o: &DiagnoseOptions,
    kernel: KernelRule,
) -> serde_json::Value {
    // Each connection and group with the index of its file in `files`.
    fn with_file<T: serde::Serialize>(fi: usize, x: &T) -> serde_json::Value {
        let mut v = serde_json::to_value(x).unwrap_or(serde_json::Value::Null);
        if let Some(m) = v.as_object_mut() {
            m.insert("file".into(), serde_json::json!(fi));
        }
        v
    }
    serde_json::json!({
        "schema": tcpwhy_diagnose::SCHEMA,
        "tcpwhy_version": env!("CARGO_PKG_VERSION"),
        "assumptions": {
            "kernel_rule": kernel.describe(),
            "bandwidth_bps": o.bandwidth,
            "rtt_ms": o.rtt,
        },
        "files": files_json,
        "unreadable": failed,
        "connections": all.iter().map(|(fi, d)| with_file(*fi, d)).collect::<Vec<_>>(),
        "groups": groups.iter().map(|(fi, g)| with_file(*fi, g)).collect::<Vec<_>>(),
        "latency": {
            "findings": lat.findings,
            "fixes": lat.fixes,
            "total_ms": lat.total_ms,
            "predicted_ms": lat.predicted_ms,
        },
    })
}

/// Each capture's connection attempts, when they say something (a flood,
/// a scan, failed attempts too many to list).
fn write_attempts(out: &mut impl Write, analyses: &[tcpwhy_flow::CaptureAnalysis], color: bool) -> io::Result<()> {
    let (bold, reset) = if color { ("\x1b[1m", "\x1b[0m") } else { ("", "") };
    for a in analyses {
        if let Some(line) = tcpwhy_report::attempts_line(&a.attempts) {
            let what = a.attempts.kind.unwrap_or("connection_attempts");
            writeln!(out, "{bold}{what}{reset} ({})", a.path)?;
            out.write_all(wrap(&line, 96, "    ").as_bytes())?;
            if let Some(fix) = tcpwhy_report::attempts_advice(&a.attempts) {
                out.write_all(wrap(&format!("what to do: {fix}"), 96, "    ").as_bytes())?;
            }
            writeln!(out)?;
        }
    }
    Ok(())
}

/// The request-latency findings and fixes over all connections.
fn write_latency(out: &mut impl Write, lat: &tcpwhy_diagnose::latency::LatencyReport, color: bool) -> io::Result<()> {
    if lat.findings.is_empty() {
        return Ok(());
    }
    let (bold, reset) = if color { ("\x1b[1m", "\x1b[0m") } else { ("", "") };
    writeln!(out, "{bold}request latency{reset} (tcpwhy latency for each exchange)")?;
    for f in &lat.findings {
        out.write_all(wrap(&format!("{}: {}", f.kind, f.text), 96, "    ").as_bytes())?;
    }
    for f in &lat.fixes {
        let after = lat.predicted_ms.get(f.kind).and_then(|v| v.as_f64());
        let t = format!(
            "fix: {}{}",
            f.text,
            after.map_or(String::new(), |a| format!(" (total request time {:.0} ms -> about {a:.0} ms)", lat.total_ms))
        );
        out.write_all(wrap(&t, 96, "    ").as_bytes())?;
    }
    Ok(())
}

/// One capture diagnosed: what `run` joins.
pub(crate) struct OneFile {
    pub analysis: tcpwhy_flow::CaptureAnalysis,
    pub diags: Vec<ConnectionDiagnosis>,
    pub latency: Vec<tcpwhy_diagnose::latency::ConnLatency>,
    pub groups: Vec<tcpwhy_diagnose::groups::FlowGroup>,
    /// `--pair`: the comparison's records, written during this read.
    pub spill: Option<Spill>,
}

/// `spill`: also write the pair comparison's records (one thread per
/// capture, `shards` 0).
fn diagnose_one(path: &std::path::Path, analyze: AnalyzeOptions, shards: usize, quiet: bool, opts: &Options, spill: bool) -> Option<OneFile> {
    let mut dg = Diagnoser::new(*opts);
    // a spill that cannot be made only means reading the capture again
    let mut spill = spill.then(Spill::new).and_then(Result::ok);
    let analysis = match spill.as_mut() {
        Some(s) => read_with(path, quiet, |reader, progress| analyze_capture(reader, analyze, &mut Tee(dg.sink(), s), progress))?,
        None => read_sharded(path, analyze, shards, dg.sink(), quiet)?,
    };
    let d = dg.finish(analysis);
    if d.recorder.budget_exhausted() {
        eprintln!(
            "tcpwhy: warning: {}: record budget ({} segments) reached; later segments are not in the diagnosis (marked truncated)",
            path.display(),
            d.recorder.records_used()
        );
    }
    Some(OneFile { analysis: d.analysis, diags: d.diagnoses, latency: d.latency, groups: d.groups, spill })
}

/// The file's entry in the JSON, after printing its capture warnings
/// (frames the snaplen cut before the TCP header, packets the capture
/// dropped).
pub(crate) fn file_entry(path: &std::path::Path, a: &tcpwhy_flow::CaptureAnalysis) -> serde_json::Value {
    let warnings = a.warnings();
    // A capture without TCP is said where the results go (`report`).
    let no_tcp = a.no_tcp();
    for w in warnings.iter().filter(|w| no_tcp.as_ref() != Some(*w)) {
        eprintln!("tcpwhy: warning: {}: {w}", path.display());
    }
    serde_json::json!({
        "capture_warnings": warnings,
        "interface_drops": a.interface_drops,
        "path": a.path,
        // The words of `stats --json` and the batch `files` table.
        "format": a.format.name(),
        "compression": a.compression,
        "frames": a.frames,
        "tcp_segments": a.tcp_segments,
        "connections": a.connections.len(),
        "attempts": a.attempts,
        "evicted_connections": a.evicted_connections,
        "error": a.error.as_ref().map(|e| e.to_string()),
    })
}

/// Flow groups that say something together (a shared policer, a flow held
/// by its own limit next to a fast one).
fn write_groups(
    out: &mut impl Write,
    groups: &[(usize, tcpwhy_diagnose::groups::FlowGroup)],
    labels: &[String],
    color: bool,
) -> io::Result<()> {
    let (bold, reset) = if color { ("\x1b[1m", "\x1b[0m") } else { ("", "") };
    for (fi, g) in groups.iter().filter(|(_, g)| !g.findings.is_empty()) {
        let file = labels.get(*fi).map_or("", String::as_str);
        let conns: Vec<String> = g.flows.iter().map(|f| f.connection.to_string()).collect();
        writeln!(
            out,
            "{bold}{file}flows from {} to {}{reset} (connections {}): {} flows at the same time, together {}",
            g.sender,
            g.receiver,
            conns.join(", "),
            g.flows.len(),
            g.aggregate_goodput_bps.map_or("?".into(), tcpwhy_core::units::fmt_rate)
        )?;
        for f in &g.findings {
            out.write_all(wrap(&format!("{}: {}", f.kind, f.text), 96, "    ").as_bytes())?;
        }
        writeln!(out)?;
    }
    Ok(())
}

fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for w in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + w.len() > width {
            out.push_str(indent);
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(w);
    }
    if !line.is_empty() {
        out.push_str(indent);
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn write_text(
    out: &mut impl Write,
    all: &[(usize, ConnectionDiagnosis)],
    labels: &[String],
    top: usize,
    color: bool,
    no_tcp_at_all: bool,
) -> io::Result<()> {
    let (bold, dim, reset) = if color { ("\x1b[1m", "\x1b[2m", "\x1b[0m") } else { ("", "", "") };
    // A connection with no direction to diagnose is still shown when the
    // capture holds only its ACKs: the reader must learn the data is missing.
    let shown = |d: &ConnectionDiagnosis| {
        !d.directions.is_empty() || d.capture_quality.iter().any(|f| f.weakens.contains(&"everything"))
    };
    let mut with_data: Vec<&(usize, ConnectionDiagnosis)> = all.iter().filter(|(_, d)| shown(d)).collect();
    with_data.sort_by_key(|(_, d)| std::cmp::Reverse(d.directions.iter().map(|x| x.bytes).sum::<u64>()));
    let quiet = all.len() - with_data.len();
    if with_data.is_empty() {
        if no_tcp_at_all {
            return Ok(()); // said above, per file
        }
        writeln!(out, "No connection carried enough data to diagnose ({} connections, under {} KiB each).", all.len(), tcpwhy_diagnose::MIN_BYTES / 1024)?;
        return Ok(());
    }
    for (fi, c) in with_data.iter().take(top) {
        let file = labels.get(*fi).map_or("", String::as_str);
        writeln!(
            out,
            "{bold}{file}connection {}{reset}  {}:{} <-> {}:{}{}",
            c.id.number,
            c.id.a.addr,
            c.id.a.port,
            c.id.b.addr,
            c.id.b.port,
            c.handshake_rtt_ms.map_or(String::new(), |h| format!("  handshake RTT {h:.1} ms"))
        )?;
        for q in &c.capture_quality {
            out.write_all(wrap(&format!("capture: {}", q.text), 96, "  ").as_bytes())?;
        }
        // Each end's system, in one line: the fixes below are written for it.
        let systems: Vec<String> = [&c.id.a, &c.id.b]
            .iter()
            .filter(|e| e.system.from != "none")
            .map(|e| match (e.system.confidence, e.system.evidence.rsplit_once(": ")) {
                (Some(conf), _) => format!(
                    "{} {} ({conf}: {} {}, initial TTL {})",
                    e.addr,
                    e.system.name.label(),
                    e.system.from.replace('_', "-").to_uppercase(),
                    e.system.options.as_deref().unwrap_or(""),
                    e.system.initial_ttl.map_or("?".into(), |t| t.to_string())
                ),
                (None, Some((_, why))) => format!("{} unknown ({why})", e.addr),
                (None, None) => format!("{} unknown", e.addr),
            })
            .collect();
        if !systems.is_empty() {
            out.write_all(wrap(&format!("systems: {}", systems.join("; ")), 96, "  ").as_bytes())?;
        }
        for d in &c.directions {
            writeln!(out, "  {bold}{}{reset} ({} confidence, capture near the {})", d.primary, d.confidence, d.capture_near())?;
            out.write_all(wrap(&d.summary, 96, "    ").as_bytes())?;
            let cc = &d.congestion_control;
            if let Some(conf) = cc.confidence {
                out.write_all(wrap(&format!("The sender runs {} ({conf} confidence): {}.", cc.name, cc.evidence), 96, "    ").as_bytes())?;
            }
            for f in &d.fixes {
                for (tag, cmd) in f.tagged_commands() {
                    writeln!(out, "    {dim}[{tag}]{reset} {cmd}")?;
                }
            }
            for w in d.what_if.iter().skip(1) {
                if let Some(e) = w.expected_text() {
                    out.write_all(wrap(&format!("what if {}: {e}", w.fix), 96, "    ").as_bytes())?;
                }
            }
            for n in &d.to_confirm {
                out.write_all(wrap(&format!("note: {n}"), 96, "    ").as_bytes())?;
            }
            if d.truncated {
                writeln!(out, "    note: the record budget ran out; this covers the first part of the transfer")?;
            }
        }
        writeln!(out)?;
    }
    if with_data.len() > top {
        writeln!(out, "{} more connections with data (use --top or --json).", with_data.len() - top)?;
    }
    if quiet > 0 {
        writeln!(out, "{quiet} connections carried too little data to diagnose.")?;
    }
    Ok(())
}
