//! DIR/prove.html: the result text, then the capture's time-sequence graph
//! beside the lab's, for the rebuild as captured and for each fix.

use super::HtmlInputs;
use crate::report_cmd::{load, Loaded};
use std::fs;
use std::io;
use std::path::Path;
use tcpwhy_diagnose::model::DirectionDiagnosis;
use tcpwhy_diagnose::Options;
use tcpwhy_report::escape::escape_html;
use tcpwhy_report::plot::{plot, Kind, PlotSpec};

const WIDTH: u32 = 640;
const HEIGHT: u32 = 400;

/// An SVG time-sequence graph of one connection direction, as text.
fn tsg(l: &Loaded, conn: u64, from: &str, tmp: &Path) -> Option<String> {
    let summary = l.analysis.connections.iter().find(|c| c.id == conn)?;
    let diag = l.diagnoses.iter().find(|d| d.id.number == conn);
    let spec = PlotSpec { kind: Kind::Tsg, connection: conn, direction: u8::from(from == "b"), width: WIDTH, height: HEIGHT, png: false };
    plot(tmp, &l.packets, summary, diag, &spec).ok()?;
    let svg = fs::read_to_string(tmp).ok();
    let _ = fs::remove_file(tmp);
    svg
}

/// The lab run's connection and direction to draw: the largest from the
/// lab's sender.
fn lab_pick(l: &Loaded, sender_is_server: bool) -> Option<(u64, &'static str)> {
    let port = format!(":{}", tcpwhy_lab::run::server_port());
    l.diagnoses
        .iter()
        .flat_map(|c| c.directions.iter().map(move |d| (c.id.number, d)))
        .filter(|(_, d)| d.sender.ends_with(&port) == sender_is_server)
        .max_by_key(|(_, d)| d.bytes)
        .map(|(n, d)| (n, d.from))
}

fn figure(title: &str, svg: Option<String>) -> String {
    format!(
        "<figure><figcaption>{}</figcaption>{}</figure>",
        escape_html(title),
        svg.unwrap_or_else(|| "<p>(no plot: the run left no capture to draw)</p>".into())
    )
}

pub(crate) fn write(out: &Path, inp: &HtmlInputs, cap: &Loaded, conn: u64, d: &DirectionDiagnosis, opts: &Options) -> io::Result<()> {
    let tmp = out.join(".plot.svg");
    let captured = tsg(cap, conn, d.from, &tmp);
    let mut rows = String::new();
    for (title, dir) in &inp.runs {
        let lab = load(&dir.join(&inp.pcap), false, true, false, opts);
        let svg = lab.as_ref().and_then(|l| lab_pick(l, inp.sender_is_server).and_then(|(n, f)| tsg(l, n, f, &tmp)));
        rows.push_str(&format!(
            "<div class=\"pair\">{}{}</div>\n",
            figure(&format!("capture, connection {conn}"), captured.clone()),
            figure(title, svg)
        ));
    }
    let page = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>tcpwhy prove</title>\n<style>\n\
         body {{ font-family: sans-serif; margin: 1.5em; }}\n\
         pre {{ background: #f6f6f6; padding: 1em; overflow-x: auto; }}\n\
         .pair {{ display: flex; flex-wrap: wrap; gap: 1em; margin-bottom: 1.5em; }}\n\
         figure {{ margin: 0; }} figcaption {{ font-weight: bold; margin-bottom: .3em; }}\n\
         svg {{ max-width: 100%; height: auto; }}\n</style></head><body>\n\
         <h1>Prove the fix</h1>\n<pre>{}</pre>\n<h2>Time-sequence graphs: the capture beside the lab</h2>\n{rows}</body></html>\n",
        escape_html(inp.text)
    );
    fs::write(out.join("prove.html"), page)
}
