//! `tcpwhy report FILE... -o report.html [--parquet DIR] [--arrow DIR]` and
//! `tcpwhy plot FILE --conn ID --kind tsg|window|rtt|rate -o plot.svg|png`.

use crate::exit;
use crate::read::{exit_code, read_one};
use clap::{Args, ValueEnum};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use tcpwhy_diagnose::latency::{latency_report, LatencyReport};
use tcpwhy_diagnose::groups::{FlowGroup, GroupSeries};
use tcpwhy_diagnose::{model::ConnectionDiagnosis, Diagnoser, KernelRule, Options};
use tcpwhy_flow::{AnalyzeOptions, CaptureAnalysis};
use std::cell::RefCell;
use std::rc::Rc;
use tcpwhy_report::tables::{PacketTables, TableExport};
use tcpwhy_flow::Tee;
use tcpwhy_report::{packets::read_payloads, CaptureReport, HtmlOptions, PacketLog, TableFormat};

pub const REPORT_AFTER_HELP: &str = "\
The HTML report is one file that opens offline in any browser: an overview of
the connections (click a heading to sort by bytes, rate or primary limit), the
request latency (tcpwhy latency's findings and fixes, and a timeline of every
connection's request/response exchanges) and, for each connection, the
diagnosis, a waterfall of its exchanges (handshake, request, responder time,
response rounds, idle restarts, delayed-ACK waits; click one to zoom the plots
to it) and linked plots on one time axis:
time-sequence (segments, ACK line, receive window, SACK blocks,
retransmissions), bytes in flight against the receive window, RTT samples,
throughput/goodput and the limit state over time. Drag across a plot to zoom
(all plots of the connection follow); double-click to zoom out. Millions of
packets stay smooth: the page draws the exact minimum and maximum of each
pixel column and every packet once you zoom in. Nothing from the capture can
run in the page, and the page makes no network request.

--parquet DIR / --arrow DIR write the tables connections, packets, sack,
series and limits (schema: docs/report.md) for DuckDB, Polars or Spark:
  duckdb -c \"select primary_ab, count(*) from 'DIR/connections.parquet' group by 1\"

Examples:
  tcpwhy report slow.pcap -o slow.html
  tcpwhy report day1.pcap day2.pcap -o both.html --parquet tables/
  tcpwhy plot slow.pcap --conn 3 --kind tsg -o tsg.svg

Exit codes: 0 all input read; 2 usage error; 3 an input could not be read at all;
4 an input was truncated or corrupt part-way (the report covers the part before
the damage); 1 other failure (e.g. the output could not be written).";

pub const PLOT_AFTER_HELP: &str = "\
Kinds:
  tsg     time-sequence graph (tcptrace style): data segments, ACK line,
          receive-window line, SACK blocks, retransmissions in red
  window  bytes in flight against the advertised receive window
  rtt     RTT samples (data segment to its ACK)
  rate    throughput (all bytes) and goodput (new bytes) over time

The connection number is the one `tcpwhy stats` and `tcpwhy diagnose` print.
--dir picks the data direction (a: from the client, b: from the server);
by default the one that sent more. The format follows the output name
(.svg or .png).

Example: tcpwhy plot slow.pcap --conn 1 --kind tsg -o tsg.svg";

#[derive(Args, Clone)]
pub struct ReportArgs {
    /// Capture files (pcap, pcapng; .gz/.xz/.zst; '-' for stdin).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Write the HTML report to this file.
    #[arg(short = 'o', long, value_name = "FILE.html")]
    pub output: Option<PathBuf>,
    /// Also write Parquet tables (connections, packets, sack, series, limits) into DIR.
    #[arg(long, value_name = "DIR")]
    pub parquet: Option<PathBuf>,
    /// Also write the same tables as Arrow IPC files (.arrow) into DIR.
    #[arg(long, value_name = "DIR")]
    pub arrow: Option<PathBuf>,
    /// The two FILES are captures of one path at two points (say, the
    /// client and the server): add their comparison (matched connections,
    /// where packets were lost or queued, what a box between changed), as
    /// `tcpwhy diagnose --pair` does (docs/pair.md). Exit 7 when they share
    /// no connection.
    #[arg(long)]
    pub pair: bool,
    /// Embed plots for at most this many connections (the largest).
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub plots: usize,
    /// Never show a progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// For the diagnosis, as in `tcpwhy diagnose`: the kernel version the fixes are for.
    #[arg(long, value_name = "VERSION")]
    pub kernel: Option<String>,
    /// tcp_adv_win_scale on that kernel (before 6.6 only; default 1).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub adv_win_scale: Option<i8>,
    /// The path's bandwidth if you know it, with a unit (1gbit, 1Gbit/s, 125MB/s); otherwise estimated.
    #[arg(long, value_name = "RATE", value_parser = crate::quantity::bits_per_sec)]
    pub bandwidth: Option<f64>,
    /// The path's RTT if you know it, with a unit (35ms, 0.035s); otherwise measured.
    #[arg(long, value_name = "TIME", value_parser = crate::quantity::millis)]
    pub rtt: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlotKind {
    Tsg,
    Window,
    Rtt,
    Rate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlotDir {
    A,
    B,
}

#[derive(Args, Clone)]
pub struct PlotArgs {
    /// Capture file (pcap, pcapng; .gz/.xz/.zst).
    pub file: PathBuf,
    /// Connection number (as `tcpwhy stats` prints it).
    #[arg(long, value_name = "ID")]
    pub conn: u64,
    /// What to plot.
    #[arg(long, value_enum, default_value = "tsg")]
    pub kind: PlotKind,
    /// Data direction: a (client to server) or b; default: the one with more data.
    #[arg(long, value_enum)]
    pub dir: Option<PlotDir>,
    /// Output file: .svg or .png.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: PathBuf,
    /// Image size in pixels.
    #[arg(long, default_value_t = 1200)]
    pub width: u32,
    #[arg(long, default_value_t = 600)]
    pub height: u32,
}

pub(crate) struct Loaded {
    pub analysis: CaptureAnalysis,
    pub diagnoses: Vec<ConnectionDiagnosis>,
    pub packets: PacketLog,
    payloads: HashMap<u64, Vec<u8>>,
    pub latency: LatencyReport,
    groups: Vec<(FlowGroup, GroupSeries)>,
    /// Writing the streamed packet tables failed.
    export_error: Option<io::Error>,
}

pub(crate) fn load(path: &Path, series: bool, quiet: bool, payloads: bool, opts: &Options) -> Option<Loaded> {
    load_with(path, series, quiet, payloads, opts, None)
}

/// `load`, giving every packet row to `export` (the streamed `packets` and
/// `sack` tables) as it is read.
fn load_with(
    path: &Path,
    series: bool,
    quiet: bool,
    payloads: bool,
    opts: &Options,
    export: Option<tcpwhy_report::tables::TableExport>,
) -> Option<Loaded> {
    let mut dg = Diagnoser::new(*opts);
    let mut log = PacketLog::new();
    let exporting = export.is_some();
    if let Some(e) = export {
        log.set_export(Box::new(e));
    }
    // The per-packet log needs every segment in capture order: a second
    // core decodes (the connections are not sharded).
    let decode_thread = crate::read::thread_plan(None, 1).1 >= 1;
    let analysis = read_one(path, AnalyzeOptions { series, decode_thread, ..Default::default() }, &mut Tee(dg.sink(), &mut log), quiet)?;
    let export_error = if exporting { log.finish_export().err() } else { None };
    let d = dg.finish(analysis);
    let (analysis, diagnoses) = (d.analysis, d.diagnoses);
    let latency = latency_report(d.latency);
    let rec = d.recorder;
    let groups = d
        .groups
        .into_iter()
        .map(|g| {
            let s = tcpwhy_diagnose::groups::series(&g, &analysis.connections, rec.records(), tcpwhy_report::flowgroups::BINS);
            (g, s)
        })
        .collect();
    drop(rec);
    if log.truncated() {
        eprintln!(
            "tcpwhy: warning: {}: packet budget ({} segments) reached; plots and tables cover the first part",
            path.display(),
            log.len()
        );
    }
    let mut payload = HashMap::new();
    if payloads && path.as_os_str() != "-" {
        let mut frames: Vec<u64> = log.first_data_frame.values().copied().collect();
        frames.sort_unstable();
        frames.truncate(20_000);
        let want: HashSet<u64> = frames.into_iter().collect();
        payload = read_payloads(path, &want, 256);
    }
    Some(Loaded { analysis, diagnoses, packets: log, payloads: payload, latency, groups, export_error })
}

/// `report --pair`: the two captures compared (read again, docs/pair.md),
/// with the path capacities the pair measures carried to their diagnoses.
fn pair_loaded(files: &[PathBuf], loaded: &mut [Loaded]) -> Option<tcpwhy_pair::model::PairReport> {
    let [x, y] = loaded else { return None };
    match crate::pair::pair_and_carry([&files[0], &files[1]], [&x.analysis, &y.analysis], [&mut x.diagnoses, &mut y.diagnoses]) {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("tcpwhy: --pair: {e}");
            None
        }
    }
}

pub fn run_report(a: &ReportArgs) -> io::Result<u8> {
    if a.output.is_none() && a.parquet.is_none() && a.arrow.is_none() {
        eprintln!("tcpwhy report: say where to write: -o report.html, --parquet DIR and/or --arrow DIR");
        return Ok(exit::USAGE);
    }
    let kernel = match &a.kernel {
        None => KernelRule::default(),
        Some(v) => match KernelRule::for_version(v, a.adv_win_scale) {
            Some(k) => k,
            None => {
                eprintln!("tcpwhy: --kernel '{v}' is not a version like 5.10 or 6.8");
                return Ok(exit::USAGE);
            }
        },
    };
    if a.pair && a.files.len() != 2 {
        eprintln!("tcpwhy report: --pair compares two captures of one path: give exactly two FILES (got {})", a.files.len());
        return Ok(exit::USAGE);
    }
    let opts = Options { kernel, bandwidth_bps: a.bandwidth, rtt_ms: a.rtt };
    let tables = a.parquet.is_some() || a.arrow.is_some();
    // The packets and sack tables are written while each capture is read,
    // so they hold every packet however much the plots are thinned.
    let mut dirs = Vec::new();
    let mut writers = Vec::new();
    for (dir, format) in [(&a.parquet, TableFormat::Parquet), (&a.arrow, TableFormat::Arrow)] {
        if let Some(dir) = dir {
            let t = PacketTables::create(dir, format).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
            dirs.push((dir, format));
            writers.push(t);
        }
    }
    let streams = Rc::new(RefCell::new(writers));
    let mut loaded = Vec::new();
    let mut failed = 0;
    for path in &a.files {
        let export = tables.then(|| TableExport { tables: streams.clone(), path: path.display().to_string() });
        match load_with(path, tables, a.no_progress, a.output.is_some(), &opts, export) {
            Some(mut l) => {
                if let Some(e) = l.export_error.take() {
                    return Err(e);
                }
                loaded.push(l)
            }
            None => failed += 1,
        }
    }
    if loaded.is_empty() {
        return Ok(exit::UNREADABLE);
    }
    for line in loaded.iter().filter_map(|l| l.analysis.no_tcp()) {
        eprintln!("tcpwhy: {line}");
    }
    let pair = if a.pair { pair_loaded(&a.files, &mut loaded) } else { None };
    let reports: Vec<CaptureReport> = loaded
        .iter()
        .map(|l| CaptureReport {
            analysis: &l.analysis,
            diagnoses: &l.diagnoses,
            packets: &l.packets,
            payloads: &l.payloads,
            latency: Some(&l.latency),
            groups: &l.groups,
        })
        .collect();
    if let Some(p) = &pair {
        for m in &p.messages {
            eprintln!("tcpwhy: --pair: {m}");
        }
    }
    if let Some(out) = &a.output {
        let title = a.files.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
        let pair_section = pair.as_ref().map(tcpwhy_report::pair_html::pair_section);
        let opts = HtmlOptions { max_plotted: a.plots, pair_section, ..Default::default() };
        let mut w = BufWriter::new(File::create(out).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", out.display())))?);
        let st = tcpwhy_report::write_html(&mut w, &title, &reports, &opts)?;
        w.flush()?;
        eprintln!(
            "tcpwhy: wrote {} ({:.1} MB; {} connections, plots for {})",
            out.display(),
            st.bytes as f64 / 1e6,
            st.connections_listed,
            st.connections_plotted
        );
    }
    let writers = std::mem::take(&mut *streams.borrow_mut());
    for ((dir, format), t) in dirs.into_iter().zip(writers) {
        {
            let w = tcpwhy_report::write_tables(dir, &reports, format, Some(t.close()?))?;
            let list: Vec<String> = w
                .files
                .iter()
                .map(|(p, n)| format!("{} ({n} rows)", p.file_name().unwrap_or_default().to_string_lossy()))
                .collect();
            eprintln!("tcpwhy: wrote {}: {}", dir.display(), list.join(", "));
        }
    }
    let analyses: Vec<CaptureAnalysis> = loaded.into_iter().map(|l| l.analysis).collect();
    let code = exit_code(&analyses, failed);
    if pair.is_some_and(|p| p.pairs.is_empty()) && code == exit::OK {
        return Ok(exit::NOT_A_PAIR);
    }
    Ok(code)
}

pub fn run_plot(a: &PlotArgs) -> io::Result<u8> {
    let ext = a.output.extension().and_then(|e| e.to_str()).map(|e| e.to_ascii_lowercase());
    let png = match ext.as_deref() {
        Some("svg") => false,
        Some("png") => true,
        _ => {
            eprintln!("tcpwhy plot: the output name must end in .svg or .png");
            return Ok(exit::USAGE);
        }
    };
    let Some(l) = load(&a.file, false, true, false, &Options::default()) else { return Ok(exit::UNREADABLE) };
    let Some(summary) = l.analysis.connections.iter().find(|c| c.id == a.conn) else {
        if let Some(line) = l.analysis.no_tcp() {
            eprintln!("tcpwhy plot: {line}");
            return Ok(exit::USAGE);
        }
        eprintln!(
            "tcpwhy plot: no connection {} in {} (it has {}; see `tcpwhy stats`)",
            a.conn,
            a.file.display(),
            l.analysis.connections.len()
        );
        return Ok(exit::USAGE);
    };
    let dir = match a.dir {
        Some(PlotDir::A) => 0,
        Some(PlotDir::B) => 1,
        None => (summary.directions[1].counts.bytes > summary.directions[0].counts.bytes) as u8,
    };
    let diag = l.diagnoses.iter().find(|d| d.id.number == a.conn);
    let kind = match a.kind {
        PlotKind::Tsg => tcpwhy_report::plot::Kind::Tsg,
        PlotKind::Window => tcpwhy_report::plot::Kind::Window,
        PlotKind::Rtt => tcpwhy_report::plot::Kind::Rtt,
        PlotKind::Rate => tcpwhy_report::plot::Kind::Rate,
    };
    let spec = tcpwhy_report::plot::PlotSpec { kind, connection: a.conn, direction: dir, width: a.width, height: a.height, png };
    tcpwhy_report::plot::plot(&a.output, &l.packets, summary, diag, &spec)?;
    eprintln!("tcpwhy: wrote {}", a.output.display());
    Ok(exit_code(&[l.analysis], 0))
}
