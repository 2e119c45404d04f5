//! Static plots for tickets and docs (`tcpwhy plot`): SVG or PNG, drawn
//! with plotters. Same data and the same min/max decimation as the HTML
//! report, one plot per file.

use crate::decimate::min_max_indices;
use tcpwhy_core::units::fmt_bytes_decimal;
use crate::packets::{PacketLog, NONE_I64, NONE_U64};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::io;
use std::path::Path;
use tcpwhy_diagnose::model::ConnectionDiagnosis;
use tcpwhy_flow::{ConnectionSummary, Flags};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Tsg,
    Window,
    Rtt,
    Rate,
}

#[derive(Debug, Clone, Copy)]
pub struct PlotSpec {
    pub kind: Kind,
    pub connection: u64,
    /// Data sender: 0 = endpoint a, 1 = b.
    pub direction: u8,
    pub width: u32,
    pub height: u32,
    pub png: bool,
}

fn err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

/// The columns of one data direction, times relative to the connection's first packet.
struct Dir {
    dt: Vec<f64>,
    ds: Vec<f64>,
    de: Vec<f64>,
    retx: Vec<bool>,
    inflight: Vec<f64>,
    at: Vec<f64>,
    aa: Vec<f64>,
    aw: Vec<f64>,
    win_edge: Vec<f64>,
    rtt: Vec<f64>,
    st: Vec<f64>,
    sl: Vec<f64>,
    sr: Vec<f64>,
}

fn columns(log: &PacketLog, conn: u64, d: u8) -> Dir {
    const SYN_RST: u16 = 0x06;
    let rows: Vec<usize> = (0..log.len()).filter(|&i| log.connection[i] == conn).collect();
    let t0 = rows.first().map_or(0, |&r| log.time_ns[r]);
    let rel = |t: i64| (t - t0) as f64 / 1e9;
    let mut o = Dir {
        dt: vec![], ds: vec![], de: vec![], retx: vec![], inflight: vec![], at: vec![], aa: vec![], aw: vec![],
        win_edge: vec![], rtt: vec![], st: vec![], sl: vec![], sr: vec![],
    };
    for &r in &rows {
        if log.tcp_flags[r] & SYN_RST != 0 {
            continue;
        }
        if log.direction[r] == d && log.len[r] > 0 {
            o.dt.push(rel(log.time_ns[r]));
            o.ds.push(log.seq[r] as f64);
            o.de.push((log.seq[r] + log.len[r] as i64) as f64);
            o.retx.push(Flags(log.flags[r]).has(Flags::RETRANSMISSION));
            o.inflight.push(if log.in_flight[r] == NONE_U64 { f64::NAN } else { log.in_flight[r] as f64 });
        } else if log.direction[r] != d && log.ack[r] != NONE_I64 {
            o.at.push(rel(log.time_ns[r]));
            o.aa.push(log.ack[r] as f64);
            o.aw.push(log.window[r] as f64);
            o.win_edge.push((log.ack[r] as u64).saturating_add(log.window[r]) as f64);
            o.rtt.push(if log.rtt_ns[r] == NONE_I64 { f64::NAN } else { log.rtt_ns[r] as f64 / 1e6 });
        }
    }
    for &(row, l, r) in &log.sack {
        let i = row as usize;
        if log.connection[i] == conn && log.direction[i] != d {
            o.st.push(rel(log.time_ns[i]));
            o.sl.push(l as f64);
            o.sr.push(r as f64);
        }
    }
    o
}

fn extent(vals: &[&[f64]]) -> (f64, f64) {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for v in vals {
        for &x in v.iter() {
            if x.is_finite() {
                lo = lo.min(x);
                hi = hi.max(x);
            }
        }
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if hi <= lo {
        hi = lo + 1.0;
    }
    (lo, hi)
}

/// Points of (xs, ys) decimated to `cols` columns, as (x, y) pairs.
fn line(xs: &[f64], ys: &[f64], x0: f64, x1: f64, cols: usize) -> Vec<(f64, f64)> {
    min_max_indices(xs, ys, x0, x1, cols).into_iter().filter(|&i| !ys[i].is_nan()).map(|i| (xs[i], ys[i])).collect()
}

fn step(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    let mut o = Vec::with_capacity(points.len() * 2);
    for (k, p) in points.iter().enumerate() {
        if k > 0 {
            o.push((p.0, points[k - 1].1));
        }
        o.push(*p);
    }
    o
}

/// Vertical bars (x, lo, hi); over `cols` bars, one bar per column spanning
/// the exact min and max of the bars in it.
fn bars(xs: &[f64], lo: &[f64], hi: &[f64], sel: impl Fn(usize) -> bool, x0: f64, x1: f64, cols: usize) -> Vec<(f64, f64, f64)> {
    let idx: Vec<usize> = (0..xs.len()).filter(|&i| sel(i)).collect();
    if idx.len() <= cols * 2 || x1 <= x0 {
        return idx.iter().map(|&i| (xs[i], lo[i], hi[i])).collect();
    }
    let mut agg = vec![(f64::INFINITY, f64::NEG_INFINITY); cols];
    let scale = cols as f64 / (x1 - x0);
    for &i in &idx {
        let c = (((xs[i] - x0) * scale) as usize).min(cols - 1);
        agg[c] = (agg[c].0.min(lo[i]), agg[c].1.max(hi[i]));
    }
    agg.iter()
        .enumerate()
        .filter(|(_, a)| a.0.is_finite())
        .map(|(c, a)| (x0 + (c as f64 + 0.5) / scale, a.0, a.1))
        .collect()
}

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular());
    });
}

/// Writes the plot to `path` (SVG or PNG as `spec.png` says).
pub fn plot(
    path: &Path,
    log: &PacketLog,
    summary: &ConnectionSummary,
    diag: Option<&ConnectionDiagnosis>,
    spec: &PlotSpec,
) -> io::Result<()> {
    register_font();
    let d = columns(log, spec.connection, spec.direction);
    let (from, to) = if spec.direction == 0 { (&summary.a, &summary.b) } else { (&summary.b, &summary.a) };
    let primary = diag
        .and_then(|g| g.directions.iter().find(|x| x.from == if spec.direction == 0 { "a" } else { "b" }))
        .map(|x| format!(" — {}", x.primary.as_str().replace('_', " ")))
        .unwrap_or_default();
    let title = format!(
        "connection {}: {}:{} → {}:{}{}",
        spec.connection, from.addr, from.port, to.addr, to.port, primary
    );
    if spec.png {
        let root = BitMapBackend::new(path, (spec.width, spec.height)).into_drawing_area();
        draw(&root, &d, spec, &title)?;
        root.present().map_err(err)
    } else {
        let root = SVGBackend::new(path, (spec.width, spec.height)).into_drawing_area();
        draw(&root, &d, spec, &title)?;
        root.present().map_err(err)
    }
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, d: &Dir, spec: &PlotSpec, title: &str) -> io::Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let (x0, x1) = extent(&[&d.dt, &d.at]);
    let cols = (spec.width as usize).saturating_sub(120).max(50);
    let (ylabel, (y0, y1)) = match spec.kind {
        Kind::Tsg => ("relative sequence", extent(&[&d.ds, &d.de, &d.aa, &d.win_edge])),
        Kind::Window => ("bytes", { let (_, h) = extent(&[&d.inflight, &d.aw]); (0.0, h) }),
        Kind::Rtt => ("RTT (ms)", { let (_, h) = extent(&[&d.rtt]); (0.0, h) }),
        Kind::Rate => ("Mbit/s", (0.0, 1.0)),
    };
    // Rate: bins of 4 pixels.
    let mut rate: (Vec<(f64, f64)>, Vec<(f64, f64)>) = (vec![], vec![]);
    let mut y1 = y1;
    if spec.kind == Kind::Rate {
        let nb = (cols / 4).max(2);
        let dx = (x1 - x0) / nb as f64;
        let mut all = vec![0.0; nb];
        let mut good = vec![0.0; nb];
        for i in 0..d.dt.len() {
            let b = (((d.dt[i] - x0) / dx) as usize).min(nb - 1);
            let len = d.de[i] - d.ds[i];
            all[b] += len;
            if !d.retx[i] {
                good[b] += len;
            }
        }
        let mbps = |v: f64| v * 8.0 / dx / 1e6;
        rate.0 = step((0..nb).map(|b| (x0 + b as f64 * dx, mbps(all[b]))).collect());
        rate.1 = step((0..nb).map(|b| (x0 + b as f64 * dx, mbps(good[b]))).collect());
        y1 = all.iter().map(|&v| mbps(v)).fold(1e-3, f64::max);
    }
    let pad = (y1 - y0) * 0.03;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(90)
        .build_cartesian_2d(x0..x1, (y0 - if y0 == 0.0 { 0.0 } else { pad })..(y1 + pad))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("seconds since the connection's first packet")
        .y_desc(ylabel)
        .y_label_formatter(&|v: &f64| match spec.kind {
            Kind::Tsg | Kind::Window => fmt_bytes_decimal(*v),
            _ => format!("{v:.1}"),
        })
        .x_label_formatter(&|v: &f64| format!("{v:.2}"))
        .label_style(("sans-serif", 12))
        .light_line_style(RGBColor(238, 238, 238))
        .draw()
        .map_err(err)?;
    let yellow = RGBColor(230, 180, 0);
    let green = RGBColor(44, 160, 44);
    match spec.kind {
        Kind::Tsg => {
            chart.draw_series(LineSeries::new(step(line(&d.at, &d.win_edge, x0, x1, cols)), yellow)).map_err(err)?
                .label("receive window edge").legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], yellow));
            chart.draw_series(LineSeries::new(step(line(&d.at, &d.aa, x0, x1, cols)), green)).map_err(err)?
                .label("ACK").legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], green));
            let purple = RGBColor(148, 103, 189);
            let sb = bars(&d.st, &d.sl, &d.sr, |_| true, x0, x1, cols);
            chart.draw_series(sb.into_iter().map(|(x, a, b)| PathElement::new(vec![(x, a), (x, b)], purple.stroke_width(2)))).map_err(err)?
                .label("SACK block").legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], purple));
            let segs = bars(&d.dt, &d.ds, &d.de, |i| !d.retx[i], x0, x1, cols);
            chart.draw_series(segs.into_iter().map(|(x, a, b)| PathElement::new(vec![(x, a), (x, b)], BLACK.stroke_width(2)))).map_err(err)?
                .label("data segment").legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK));
            let red = RGBColor(214, 39, 40);
            let rx = bars(&d.dt, &d.ds, &d.de, |i| d.retx[i], x0, x1, cols);
            chart.draw_series(rx.into_iter().map(|(x, a, b)| PathElement::new(vec![(x, a), (x, b)], red.stroke_width(2)))).map_err(err)?
                .label("retransmission").legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], red));
        }
        Kind::Window => {
            chart.draw_series(LineSeries::new(step(line(&d.at, &d.aw, x0, x1, cols)), yellow.stroke_width(2))).map_err(err)?
                .label("advertised receive window").legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], yellow));
            let blue = RGBColor(31, 119, 180);
            chart.draw_series(LineSeries::new(line(&d.dt, &d.inflight, x0, x1, cols), blue)).map_err(err)?
                .label("bytes in flight").legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], blue));
        }
        Kind::Rtt => {
            let brown = RGBColor(140, 86, 75);
            chart.draw_series(line(&d.at, &d.rtt, x0, x1, cols).into_iter().map(|p| Circle::new(p, 2, brown.filled()))).map_err(err)?
                .label("RTT sample").legend(move |(x, y)| Circle::new((x + 8, y), 3, brown.filled()));
        }
        Kind::Rate => {
            let grey = RGBColor(127, 127, 127);
            chart.draw_series(LineSeries::new(rate.0, grey)).map_err(err)?
                .label("throughput").legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], grey));
            chart.draw_series(LineSeries::new(rate.1, green.stroke_width(2))).map_err(err)?
                .label("goodput").legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], green));
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .label_font(("sans-serif", 12))
        .draw()
        .map_err(err)?;
    Ok(())
}

