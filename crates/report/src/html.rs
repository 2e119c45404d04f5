//! The self-contained HTML report (`tcpwhy report -o report.html`).
//!
//! One file: uPlot (vendored, MIT), the page script and the data, all
//! inline. A Content-Security-Policy allows only the page's own two scripts
//! (by SHA-256 hash) and styles, and no network at all. Every string taken
//! from a capture (addresses, payload previews, diagnosis text quoting
//! them) is HTML-escaped when written as markup, and the data blocks are
//! JSON inside `<script type="application/json">` with `<`, `>`, `&`,
//! U+2028 and U+2029 escaped, so no capture content can close the block.
//! The page script builds the plots from those blocks with `textContent`
//! only. Per-packet columns are gzip-compressed, base64-encoded typed
//! arrays; the page decimates them per pixel column (exact min/max) for the
//! visible range on every zoom (see docs/report.md).

use crate::escape::{escape_html, json_for_script};
use crate::packets::{payload_preview, PacketLog, NONE_I64, NONE_U64};
use base64::Engine;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{self, Write};
use tcpwhy_core::Cause;
use tcpwhy_diagnose::latency::{ConnLatency, LatencyReport};
use tcpwhy_diagnose::model::ConnectionDiagnosis;
use tcpwhy_core::units::{fmt_bytes_decimal as fmt_bytes, fmt_rate};
use tcpwhy_flow::{CaptureAnalysis, ConnectionSummary, Flags};

const UPLOT_JS: &str = include_str!("../assets/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../assets/uPlot.min.css");
const REPORT_JS: &str = include_str!("../assets/report.js");
const REPORT_CSS: &str = include_str!("../assets/report.css");

/// One capture's results, as the report needs them.
pub struct CaptureReport<'a> {
    pub analysis: &'a CaptureAnalysis,
    pub diagnoses: &'a [ConnectionDiagnosis],
    pub packets: &'a PacketLog,
    /// Frame number -> first captured payload bytes (for the previews).
    pub payloads: &'a HashMap<u64, Vec<u8>>,
    /// Request/response exchanges (`tcpwhy latency`), if computed.
    pub latency: Option<&'a LatencyReport>,
    /// Flow groups with their series (`tcpwhy_diagnose::groups`).
    pub groups: &'a [(tcpwhy_diagnose::groups::FlowGroup, tcpwhy_diagnose::groups::GroupSeries)],
}

#[derive(Debug, Clone)]
pub struct HtmlOptions {
    /// Connections whose plots are embedded (largest first).
    pub max_plotted: usize,
    /// Connections listed in the overview.
    pub max_listed: usize,
    /// Bytes of payload shown per direction.
    pub preview_bytes: usize,
    /// Two captures of one path: their comparison's section
    /// (`pair_html::pair_section`), after the overview.
    pub pair_section: Option<String>,
}

impl Default for HtmlOptions {
    fn default() -> Self {
        HtmlOptions { max_plotted: 20, max_listed: 5000, preview_bytes: 160, pair_section: None }
    }
}

/// What was written (for the benchmark and the command's summary line).
#[derive(Debug, Default, Clone, Copy)]
pub struct HtmlStats {
    pub connections_listed: usize,
    pub connections_plotted: usize,
    pub data_points: usize,
    /// Exchanges drawn in the per-connection request timelines.
    pub exchanges_drawn: usize,
    pub bytes: usize,
}


fn csp_hash(content: &str) -> String {
    let d = Sha256::digest(content.as_bytes());
    format!("'sha256-{}'", base64::engine::general_purpose::STANDARD.encode(d))
}

/// The Content-Security-Policy of the page: nothing from the network,
/// scripts and styles only the page's own (by hash).
pub fn content_security_policy(scripts: &[&str], styles: &[&str]) -> String {
    let s: Vec<String> = scripts.iter().map(|c| csp_hash(c)).collect();
    let st: Vec<String> = styles.iter().map(|c| csp_hash(c)).collect();
    format!(
        "default-src 'none'; script-src {}; style-src {}; img-src 'none'; connect-src 'none'; base-uri 'none'; form-action 'none'",
        s.join(" "),
        st.join(" ")
    )
}

/// Column buffer: f64, f32 and u8 columns, gzip-compressed and base64'd.
#[derive(Default)]
struct Cols {
    names: Vec<(String, &'static str, usize)>,
    raw: Vec<u8>,
}

impl Cols {
    /// Byte-shuffled (all first bytes, then all second bytes...): the
    /// slowly changing high bytes of times and sequence numbers then
    /// compress well. The page undoes it.
    fn shuffled<const N: usize>(&mut self, bytes: Vec<[u8; N]>) {
        let start = self.raw.len();
        self.raw.resize(start + bytes.len() * N, 0);
        let n = bytes.len();
        for (i, b) in bytes.iter().enumerate() {
            for (k, &x) in b.iter().enumerate() {
                self.raw[start + k * n + i] = x;
            }
        }
    }
    fn f8(&mut self, name: &str, v: impl ExactSizeIterator<Item = f64>) {
        self.names.push((name.into(), "f8", v.len()));
        self.shuffled(v.map(f64::to_le_bytes).collect());
    }
    fn f4(&mut self, name: &str, v: impl ExactSizeIterator<Item = f32>) {
        self.names.push((name.into(), "f4", v.len()));
        self.shuffled(v.map(f32::to_le_bytes).collect());
    }
    fn u1(&mut self, name: &str, v: impl ExactSizeIterator<Item = u8>) {
        self.names.push((name.into(), "u1", v.len()));
        self.raw.extend(v);
    }
    fn finish(self) -> (String, Value) {
        use flate2::{write::GzEncoder, Compression};
        let mut gz = GzEncoder::new(Vec::with_capacity(self.raw.len() / 2), Compression::fast());
        gz.write_all(&self.raw).expect("write to memory");
        let bytes = gz.finish().expect("write to memory");
        let cols: Vec<Value> = self.names.iter().map(|(n, t, l)| json!([n, t, l])).collect();
        (base64::engine::general_purpose::STANDARD.encode(bytes), Value::Array(cols))
    }
}

const SYN: u16 = 0x02;
const RST: u16 = 0x04;

fn data_flag_bits(f: u32) -> u8 {
    let f = Flags(f);
    (f.has(Flags::RETRANSMISSION) as u8)
        | (f.has(Flags::LOST_SEGMENT) as u8) << 1
        | (f.has(Flags::OUT_OF_ORDER) as u8) << 2
        | (f.has(Flags::SPURIOUS_RETRANSMISSION) as u8) << 3
        | (f.has(Flags::FAST_RETRANSMISSION) as u8) << 4
}

/// Which connections' plots were thinned, and to what bucket width.
fn thinned_note(log: &PacketLog) -> String {
    if !log.thinned() {
        return String::new();
    }
    let mut widths: Vec<(u64, i64)> = log.thinned_width.iter().map(|(c, w)| (*c, w.1)).collect();
    widths.sort_unstable();
    let list: Vec<String> = widths.iter().take(8).map(|(c, w)| format!("connection {c}: {}", fmt_width(*w))).collect();
    format!(
        "<p class=\"hint\">{} connection(s) had more packets than the plots keep: their plots show, per time bucket, the first, last, lowest and highest point of each series (exact values), not every packet ({}). The tables written with --parquet/--arrow hold every packet.</p>\n",
        widths.len(),
        escape_html(&list.join("; "))
    )
}

/// A bucket width for people: "12.5 ms".
fn fmt_width(ns: i64) -> String {
    tcpwhy_core::units::fmt_ms(ns as f64 / 1e6) + " buckets"
}

/// The plot data of one data direction (`d`: index of the sender).
fn direction_data(
    log: &PacketLog,
    rows: &[u32],
    sacks: &[(u32, i64, i64)],
    d: u8,
    t0_ns: i64,
    runs: Value,
    label: String,
) -> (Value, usize) {
    let rel = |t: i64| (t - t0_ns) as f64 / 1e9;
    let data: Vec<usize> = rows
        .iter()
        .map(|&r| r as usize)
        .filter(|&r| log.direction[r] == d && log.len[r] > 0 && log.tcp_flags[r] & (SYN | RST) == 0)
        .collect();
    let acks: Vec<usize> = rows
        .iter()
        .map(|&r| r as usize)
        .filter(|&r| log.direction[r] != d && log.ack[r] != NONE_I64 && log.tcp_flags[r] & (SYN | RST) == 0)
        .collect();
    let sk: Vec<&(u32, i64, i64)> = sacks.iter().filter(|s| log.direction[s.0 as usize] != d).collect();
    let mut c = Cols::default();
    c.f8("dt", data.iter().map(|&r| rel(log.time_ns[r])));
    c.f8("ds", data.iter().map(|&r| log.seq[r] as f64));
    c.f8("at", acks.iter().map(|&r| rel(log.time_ns[r])));
    c.f8("aa", acks.iter().map(|&r| log.ack[r] as f64));
    c.f8("aw", acks.iter().map(|&r| log.window[r] as f64));
    c.f8("st", sk.iter().map(|s| rel(log.time_ns[s.0 as usize])));
    c.f8("sl", sk.iter().map(|s| s.1 as f64));
    c.f8("sr", sk.iter().map(|s| s.2 as f64));
    c.f4("dl", data.iter().map(|&r| log.len[r] as f32));
    c.f4(
        "dq",
        data.iter().map(|&r| if log.in_flight[r] == NONE_U64 { f32::NAN } else { log.in_flight[r] as f32 }),
    );
    c.f4(
        "ar",
        acks.iter().map(|&r| if log.rtt_ns[r] == NONE_I64 { f32::NAN } else { (log.rtt_ns[r] as f64 / 1e6) as f32 }),
    );
    c.u1("df", data.iter().map(|&r| data_flag_bits(log.flags[r])));
    c.u1(
        "af",
        acks.iter().map(|&r| {
            let f = Flags(log.flags[r]);
            (f.has(Flags::DUPLICATE_ACK) as u8) | (f.has(Flags::ZERO_WINDOW) as u8) << 1
        }),
    );
    let points = data.len() + acks.len() + sk.len();
    let (bin, cols) = c.finish();
    (json!({ "label": label, "runs": runs, "cols": cols, "bin": bin }), points)
}

struct Row<'a> {
    file: usize,
    summary: &'a ConnectionSummary,
    diag: Option<&'a ConnectionDiagnosis>,
    bytes: u64,
    rate: f64,
    /// Of the largest diagnosed direction; None when nothing was diagnosed.
    primary: Option<Cause>,
}

/// Per connection of a file: its packet rows and its SACK blocks (built on first use).
type ConnIndex = (HashMap<u64, Vec<u32>>, HashMap<u64, Vec<(u32, i64, i64)>>);

/// Writes the report. `title` is shown as the page heading (escaped).
pub fn write_html(out: &mut impl Write, title: &str, files: &[CaptureReport], opts: &HtmlOptions) -> io::Result<HtmlStats> {
    let mut stats = HtmlStats::default();
    let rows = connection_rows(files);
    let listed = rows.len().min(opts.max_listed);
    stats.connections_listed = listed;

    let mut h = String::with_capacity(1 << 20);
    page_head(&mut h, title, files);
    overview_table(&mut h, files, &rows, listed);
    let lat_by_conn = overview_sections(&mut h, files, &mut stats);
    if let Some(p) = &opts.pair_section {
        h.push_str(p);
    }
    out.write_all(h.as_bytes())?;
    stats.bytes += h.len();

    // Sections, largest first; plots for the first `max_plotted` with data.
    let mut by_conn: Vec<Option<ConnIndex>> = files.iter().map(|_| None).collect();
    let mut plotted = 0;
    let mut first_open = true;
    for r in rows[..listed].iter().filter(|r| r.diag.is_some_and(|d| !d.directions.is_empty()) || r.bytes > 0) {
        let f = &files[r.file];
        let s = r.summary;
        let key = format!("c-{}-{}", r.file, s.id);
        let mut h = String::new();
        let with_plots = plotted < opts.max_plotted && r.diag.is_some_and(|d| !d.directions.is_empty());
        connection_summary(&mut h, r, &key, with_plots, with_plots && first_open);
        if with_plots {
            first_open = false;
        }
        if let Some(d) = r.diag {
            direction_diagnoses(&mut h, d);
        }
        first_bytes(&mut h, f, s, opts.preview_bytes);
        let lat = lat_by_conn[r.file].get(&s.id);
        if with_plots || lat.is_some() {
            let idx = by_conn[r.file].get_or_insert_with(|| (f.packets.rows_by_connection(), f.packets.sack_by_connection()));
            let rows_c = idx.0.get(&s.id).map_or(&[][..], |v| &v[..]);
            let t0_ns = rows_c.first().map_or((s.first_time * 1e9) as i64, |&r| f.packets.time_ns[r as usize]);
            // The exchanges, on the same time axis as the plots.
            if let Some(c) = lat {
                h.push_str(&crate::timeline::connection_block(c, t0_ns as f64 / 1e9));
            }
        }
        if with_plots {
            plotted += 1;
            connection_plots(&mut h, f, r, &key, &mut by_conn[r.file], &mut stats);
        }
        h.push_str("</details>\n");
        out.write_all(h.as_bytes())?;
        stats.bytes += h.len();
    }
    stats.connections_plotted = plotted;
    let mut t = String::new();
    t.push_str("<p class=\"hint\">Generated by tcpwhy. Charts: uPlot (MIT licence, embedded).</p>\n<script>");
    t.push_str(UPLOT_JS);
    t.push_str("</script>\n<script>");
    t.push_str(REPORT_JS);
    t.push_str("</script>\n</body></html>\n");
    out.write_all(t.as_bytes())?;
    stats.bytes += t.len();
    Ok(stats)
}

/// Every connection of every file with its bytes, rate and primary limit, largest first.
fn connection_rows<'a>(files: &[CaptureReport<'a>]) -> Vec<Row<'a>> {
    let mut rows: Vec<Row> = Vec::new();
    for (fi, f) in files.iter().enumerate() {
        let by_id: HashMap<u64, &ConnectionDiagnosis> = f.diagnoses.iter().map(|d| (d.id.number, d)).collect();
        for s in &f.analysis.connections {
            let diag = by_id.get(&s.id).copied();
            let bytes = s.directions.iter().map(|d| d.counts.bytes).sum();
            let main = diag.and_then(|d| d.directions.iter().max_by_key(|x| x.bytes));
            let rate = main
                .and_then(|m| m.goodput_bps)
                .or_else(|| s.directions.iter().filter_map(|d| d.goodput_bps).reduce(f64::max))
                .unwrap_or(0.0);
            rows.push(Row { file: fi, summary: s, diag, bytes, rate, primary: main.map(|m| m.primary) });
        }
    }
    rows.sort_by_key(|r| std::cmp::Reverse(r.bytes));
    rows
}

/// The page's head (policy, styles), its heading and a line per capture file.
fn page_head(h: &mut String, title: &str, files: &[CaptureReport]) {
    let csp = content_security_policy(&[UPLOT_JS, REPORT_JS], &[UPLOT_CSS, REPORT_CSS]);
    h.push_str("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    h.push_str(&format!("<meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">\n"));
    h.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    h.push_str(&format!("<meta name=\"generator\" content=\"tcpwhy {}\">\n", env!("CARGO_PKG_VERSION")));
    h.push_str(&format!("<title>tcpwhy report: {}</title>\n", escape_html(title)));
    h.push_str("<style>");
    h.push_str(UPLOT_CSS);
    h.push_str("</style>\n<style>");
    h.push_str(REPORT_CSS);
    h.push_str("</style>\n</head><body>\n");
    h.push_str(&format!("<h1>tcpwhy report: {}</h1>\n", escape_html(title)));
    for (fi, f) in files.iter().enumerate() {
        let a = f.analysis;
        h.push_str(&format!(
            "<p class=\"meta\">file {fi}: {} &mdash; {} frames, {} TCP segments, {} connections{}</p>\n",
            escape_html(&a.path),
            a.frames,
            a.tcp_segments,
            a.connections.len(),
            a.error.as_ref().map_or(String::new(), |e| format!(
                " <span class=\"warn\">(read stopped early: {}; results cover the frames before)</span>",
                escape_html(&e.to_string())
            ))
        ));
        if f.packets.truncated() {
            h.push_str("<p class=\"warn\">The per-packet budget ran out: the plots cover the first part of this capture.</p>\n");
        }
        h.push_str(&thinned_note(f.packets));
        h.push_str(&attempts_block(&a.attempts));
    }
}

/// The sortable overview table of the first `listed` connections.
fn overview_table(h: &mut String, files: &[CaptureReport], rows: &[Row], listed: usize) {
    h.push_str("<p class=\"hint\">Click a column heading to sort. In the plots: drag to zoom (all plots of a connection follow), double-click to zoom out.</p>\n");
    // Overview.
    h.push_str("<table class=\"overview sortable\"><thead><tr>");
    for (name, sort) in [
        ("connection", "num"),
        ("client (a)", "text"),
        ("server (b)", "text"),
        ("start (after the capture's first)", "num"),
        ("duration", "num"),
        ("bytes", "num"),
        ("rate", "num"),
        ("primary limit", "text"),
    ] {
        h.push_str(&format!("<th data-sort=\"{sort}\">{name}</th>"));
    }
    h.push_str("</tr></thead><tbody>\n");
    for r in &rows[..listed] {
        let s = r.summary;
        let key = format!("c-{}-{}", r.file, s.id);
        h.push_str(&format!(
            "<tr><td class=\"n\" data-v=\"{}\"><a href=\"#{key}\">{}{}</a></td><td>{}</td><td>{}</td><td class=\"n\" data-v=\"{}\">+{:.3} s</td><td class=\"n\" data-v=\"{}\">{:.3} s</td><td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\" data-v=\"{}\">{}</td><td>{}</td></tr>\n",
            s.id,
            if files.len() > 1 { format!("{}:", r.file) } else { String::new() },
            s.id,
            escape_html(&format!("{}:{}", s.a.addr, s.a.port)),
            escape_html(&format!("{}:{}", s.b.addr, s.b.port)),
            s.first_time,
            s.first_time - files[r.file].analysis.connections.iter().map(|c| c.first_time).fold(f64::INFINITY, f64::min),
            s.duration_s,
            s.duration_s,
            r.bytes,
            fmt_bytes(r.bytes as f64),
            r.rate,
            if r.rate > 0.0 { fmt_rate(r.rate) } else { "-".into() },
            escape_html(&r.primary.map_or(String::new(), |p| p.as_str().replace('_', " "))),
        ));
    }
    h.push_str("</tbody></table>\n");
    if rows.len() > listed {
        h.push_str(&format!("<p class=\"hint\">{} smaller connections not listed.</p>\n", rows.len() - listed));
    }
}

/// The flow-group and request-latency sections of each file; returns each
/// file's exchanges by connection, for the connection sections.
fn overview_sections<'a>(h: &mut String, files: &[CaptureReport<'a>], stats: &mut HtmlStats) -> Vec<HashMap<u64, &'a ConnLatency>> {
    // Flows compared: each group's aggregate rate with its flows stacked.
    for (fi, f) in files.iter().enumerate() {
        let t0 = f.analysis.connections.iter().map(|c| c.first_time).fold(f64::INFINITY, f64::min);
        let block = crate::flowgroups::overview_block(f.groups, if t0.is_finite() { t0 } else { 0.0 }, fi, (files.len() > 1).then_some(f.analysis.path.as_str()));
        if !block.is_empty() {
            h.push_str("<section class=\"groups\">\n");
            h.push_str(&block);
            h.push_str("</section>\n");
        }
    }
    // Request latency: every connection's exchanges on the capture's time axis.
    let mut lat_by_conn: Vec<HashMap<u64, &ConnLatency>> = Vec::with_capacity(files.len());
    for (fi, f) in files.iter().enumerate() {
        let Some(rep) = f.latency else {
            lat_by_conn.push(HashMap::new());
            continue;
        };
        lat_by_conn.push(rep.connections.iter().map(|c| (c.connection, c)).collect());
        let t0 = f.analysis.connections.iter().map(|c| c.first_time).fold(f64::INFINITY, f64::min);
        let block = crate::timeline::overview_block(rep, if t0.is_finite() { t0 } else { 0.0 }, fi, (files.len() > 1).then_some(f.analysis.path.as_str()));
        if !block.is_empty() {
            stats.exchanges_drawn += rep.connections.iter().map(|c| c.exchanges.len().min(crate::timeline::MAX_ROWS)).sum::<usize>();
            h.push_str("<section class=\"latency\">\n");
            h.push_str(&block);
            h.push_str("</section>\n");
        }
    }
    lat_by_conn
}

/// A connection section's opening tag and its one-line summary (endpoints, size, limit).
fn connection_summary(h: &mut String, r: &Row, key: &str, with_plots: bool, open: bool) {
    let s = r.summary;
    h.push_str(&format!(
        "<details class=\"conn\" id=\"{key}\"{}{}>\n<summary><h2>connection {}</h2> {} &harr; {} &mdash; {} in {:.3} s{}</summary>\n",
        if with_plots { format!(" data-data=\"d-{key}\"") } else { String::new() },
        if open { " open" } else { "" },
        s.id,
        escape_html(&format!("{}:{}", s.a.addr, s.a.port)),
        escape_html(&format!("{}:{}", s.b.addr, s.b.port)),
        fmt_bytes(r.bytes as f64),
        s.duration_s,
        r.primary.map_or(String::new(), |p| format!(": <span class=\"limit\">{}</span>", escape_html(&p.as_str().replace('_', " ")))),
    ));
}

/// Each direction's diagnosis: primary limit, summary, fixes, what-ifs and notes.
fn direction_diagnoses(h: &mut String, d: &ConnectionDiagnosis) {
    for dd in &d.directions {
        h.push_str("<div class=\"dirdiag\">");
        h.push_str(&format!(
            "<div><span class=\"primary\">{} &rarr; {}: {}</span> ({} confidence, capture near the {})</div>",
            escape_html(&dd.sender),
            escape_html(&dd.receiver),
            escape_html(&dd.primary.as_str().replace('_', " ")),
            dd.confidence,
            escape_html(dd.capture_near()),
        ));
        h.push_str(&format!("<p>{}</p>", escape_html(&dd.summary)));
        phase_bar(h, dd);
        let cc = &dd.congestion_control;
        h.push_str(&format!(
            "<div class=\"hint\">sender's congestion control: {}{}</div>",
            escape_html(cc.name),
            escape_html(&cc.confidence.map_or(format!(" ({})", cc.evidence), |c| format!(" ({c} confidence): {}", cc.evidence)))
        ));
        for (e, who) in [(&d.id.a, "a"), (&d.id.b, "b")] {
            if e.system.from != "none" {
                h.push_str(&format!("<div class=\"hint\">system of {who} ({}): {} &mdash; {}</div>", escape_html(&e.addr), e.system.name.label(), escape_html(&e.system.evidence)));
            }
        }
        let cmds: Vec<String> = dd
            .fixes
            .iter()
            .flat_map(|fx| fx.tagged_commands().into_iter().map(|(tag, c)| format!("[{tag}] {c}")))
            .collect();
        if !cmds.is_empty() {
            h.push_str(&format!("<pre>{}</pre>", escape_html(&cmds.join("\n"))));
        }
        for w in dd.what_if.iter().skip(1) {
            if let Some(e) = w.expected_text() {
                h.push_str(&format!("<div>what if {}: {}</div>", escape_html(w.fix), escape_html(&e)));
            }
        }
        for n in &dd.to_confirm {
            h.push_str(&format!("<div class=\"hint\">note: {}</div>", escape_html(n)));
        }
        if dd.truncated {
            h.push_str("<div class=\"warn\">The record budget ran out: this covers the first part of the transfer.</div>");
        }
        h.push_str("</div>\n");
    }
}

/// Columns of the time-split bar: the direction's time cut into this many,
/// each drawn in the state that held most of it.
const PHASE_BAR_COLUMNS: usize = 200;

/// The direction's timeline as one bar (inline SVG, no script): each
/// state's phases in its colour, a dark band over the phases the first
/// prediction's fix shortens, and the time that fix wins back.
fn phase_bar(h: &mut String, dd: &tcpwhy_diagnose::DirectionDiagnosis) {
    let (Some(first), Some(last)) = (dd.timeline.first(), dd.timeline.last()) else { return };
    let span = last.end - first.start;
    if span <= 0.0 {
        return;
    }
    let width = span / PHASE_BAR_COLUMNS as f64;
    // each column's state: the one with most time in it
    let mut cols: Vec<tcpwhy_core::Limit> = Vec::with_capacity(PHASE_BAR_COLUMNS);
    let mut r = 0;
    for c in 0..PHASE_BAR_COLUMNS {
        let (a, z) = (first.start + c as f64 * width, first.start + (c + 1) as f64 * width);
        let mut best: Option<(tcpwhy_core::Limit, f64)> = None;
        let mut time: Vec<(tcpwhy_core::Limit, f64)> = Vec::new();
        while r < dd.timeline.len() && dd.timeline[r].end <= a {
            r += 1;
        }
        for run in dd.timeline[r..].iter().take_while(|run| run.start < z) {
            let t = run.end.min(z) - run.start.max(a);
            match time.iter_mut().find(|x| x.0 == run.state) {
                Some(x) => x.1 += t,
                None => time.push((run.state, t)),
            }
        }
        for x in time {
            if best.is_none_or(|b| x.1 > b.1) {
                best = Some(x);
            }
        }
        cols.push(best.map_or(tcpwhy_core::Limit::Idle, |b| b.0));
    }
    let shortened = dd.what_if.iter().find(|w| w.saved_s.is_some());
    let addressed = |s: &tcpwhy_core::Limit| shortened.is_some_and(|w| w.addresses.contains(s));
    // inline SVG: geometry in attributes, colours from the stylesheet's
    // classes (the page's Content-Security-Policy allows no style attribute)
    h.push_str(&format!(
        "<svg class=\"phases\" viewBox=\"0 0 {PHASE_BAR_COLUMNS} 10\" preserveAspectRatio=\"none\" role=\"img\" aria-label=\"time split\">"
    ));
    let mut i = 0;
    while i < cols.len() {
        let s = cols[i];
        let n = cols[i..].iter().take_while(|x| **x == s).count();
        h.push_str(&format!("<rect x=\"{i}\" y=\"0\" width=\"{n}\" height=\"10\" class=\"st-{}\"><title>{}</title></rect>", s.as_str(), s.as_str().replace('_', " ")));
        if addressed(&s) {
            h.push_str(&format!("<rect x=\"{i}\" y=\"0\" width=\"{n}\" height=\"3\" class=\"shortened\"/>"));
        }
        i += n;
    }
    h.push_str("</svg>");
    let mut legend: Vec<tcpwhy_core::Limit> = Vec::new();
    for c in &cols {
        if !legend.contains(c) {
            legend.push(*c);
        }
    }
    let items: Vec<String> = legend
        .iter()
        .map(|s| format!("<span class=\"sw st-{}\"></span>{}", s.as_str(), escape_html(&s.as_str().replace('_', " "))))
        .collect();
    let fix = shortened.map_or(String::new(), |w| {
        format!(
            " &mdash; dark band: the phases {} shortens (it wins back {:.2} s of {:.2} s)",
            escape_html(w.fix),
            w.saved_s.unwrap_or(0.0),
            dd.duration_s
        )
    });
    h.push_str(&format!("<div class=\"panel-legend\">time, {:.2} s: {}{fix}</div>", span, items.join(" ")));
}

/// The first payload bytes of each direction of a connection.
fn first_bytes(h: &mut String, f: &CaptureReport, s: &ConnectionSummary, preview_bytes: usize) {
    // First bytes of each direction (capture content: escaped text).
    for d in 0..2u8 {
        let Some(frame) = f.packets.first_data_frame.get(&(s.id, d)) else { continue };
        let Some(bytes) = f.payloads.get(frame).filter(|b| !b.is_empty()) else { continue };
        let (from, to) = if d == 0 { (&s.a, &s.b) } else { (&s.b, &s.a) };
        h.push_str(&format!(
            "<div class=\"hint\">first bytes {}:{} &rarr; {}:{} (frame {frame}):</div><div class=\"payload\">{}</div>\n",
            escape_html(&from.addr),
            from.port,
            escape_html(&to.addr),
            to.port,
            escape_html(&payload_preview(bytes, preview_bytes))
        ));
    }
}

/// A connection's plots: the placeholder and its data block (per direction: limit runs and packet columns).
fn connection_plots(h: &mut String, f: &CaptureReport, r: &Row, key: &str, by_conn: &mut Option<ConnIndex>, stats: &mut HtmlStats) {
    let s = r.summary;
    let idx = by_conn.get_or_insert_with(|| (f.packets.rows_by_connection(), f.packets.sack_by_connection()));
    let rows_c = idx.0.get(&s.id).map_or(&[][..], |v| &v[..]);
    let sacks_c = idx.1.get(&s.id).map_or(&[][..], |v| &v[..]);
    let t0_ns = rows_c.first().map_or((s.first_time * 1e9) as i64, |&r| f.packets.time_ns[r as usize]);
    let t0 = t0_ns as f64 / 1e9;
    let mut dirs = Vec::new();
    for dd in r.diag.map_or(&[][..], |d| &d.directions[..]) {
        let di = if dd.from == "a" { 0u8 } else { 1u8 };
        let runs: Vec<Value> = dd.timeline.iter().map(|lr| json!([lr.state, lr.start - t0, lr.end - t0])).collect();
        let label = format!("{} to {}", dd.sender, dd.receiver);
        let (mut v, n) = direction_data(f.packets, rows_c, sacks_c, di, t0_ns, Value::Array(runs), label);
        stats.data_points += n;
        v["cc"] = congestion_marks(&dd.congestion_control, t0);
        dirs.push(v);
    }
    let spec = json!({ "t0": t0, "dirs": dirs });
    h.push_str("<div class=\"plots\"></div>\n");
    h.push_str(&format!(
        "<script type=\"application/json\" id=\"d-{key}\">{}</script>\n",
        json_for_script(&spec)
    ));
}

/// The sender's congestion control for the bytes-in-flight plot: its name,
/// and each recovery and fall without a loss as [time from `t0`, kind,
/// factor] (docs/report.md).
fn congestion_marks(cc: &tcpwhy_diagnose::model::CongestionControl, t0: f64) -> Value {
    let events: Vec<Value> = cc.events.iter().map(|e| json!([e.t - t0, e.kind, e.factor])).collect();
    json!({ "name": cc.name, "confidence": cc.confidence, "recoveries": cc.recoveries, "events": events })
}

/// A file's flood or scan (connection attempts as a whole), when there is
/// one to tell.
fn attempts_block(a: &tcpwhy_flow::AttemptSummary) -> String {
    let Some(line) = crate::stats_table::attempts_line(a) else { return String::new() };
    let top = |v: &[tcpwhy_flow::TopEntry]| {
        if v.is_empty() {
            return "none made more than one".to_string();
        }
        v.iter().take(5).map(|e| format!("{} (at least {})", e.endpoint, crate::units::count(e.attempts))).collect::<Vec<_>>().join(", ")
    };
    format!(
        "<div class=\"attempts\"><p class=\"warn\"><b>{}</b>: {}</p><p>Most attempted: {}. Most attempts from: {}.</p>{}</div>\n",
        a.kind.unwrap_or("connection attempts").replace('_', " "),
        escape_html(&line),
        escape_html(&top(&a.top_destinations)),
        escape_html(&top(&a.top_sources)),
        crate::stats_table::attempts_advice(a).map_or(String::new(), |t| format!("<p>What to do: {}</p>", escape_html(&t))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_are_safe_inline() {
        for a in [UPLOT_JS, REPORT_JS] {
            assert!(!a.to_ascii_lowercase().contains("</script"));
            assert!(!a.contains("<!--"));
        }
        for a in [UPLOT_CSS, REPORT_CSS] {
            assert!(!a.to_ascii_lowercase().contains("</style"));
        }
        assert!(!REPORT_JS.contains("innerHTML") && !REPORT_JS.contains("insertAdjacentHTML") && !REPORT_JS.contains("eval("));
    }

    #[test]
    fn csp_allows_only_own_scripts_and_no_network() {
        let csp = content_security_policy(&["a"], &["b"]);
        assert!(csp.starts_with("default-src 'none';"));
        assert!(!csp.contains("unsafe") && !csp.contains("http"));
        // sha256("a"), base64.
        assert!(csp.contains("'sha256-ypeBEsobvcr6wjGzmiPcTaeG7/gUfE5yuYB3ha/uSLs='"));
    }
}
