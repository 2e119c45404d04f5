//! `tcpwhy latency FILE...`: where each request's time went.

use crate::read::{exit_code, read_sharded};
use clap::Args;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use tcpwhy_diagnose::latency::{connection_latency, latency_report, latency_text};
use tcpwhy_diagnose::Recorder;
use tcpwhy_flow::AnalyzeOptions;

pub const LATENCY_AFTER_HELP: &str = "\
Each connection is cut into exchanges: a turn of data from the side that
spoke first (the request) and the other side's answer (the response). HTTP/1.x
request and status lines are shown when visible. For each exchange: new or
reused connection, the idle gap before it (* longer than the RTO, ! and the
response restarted from the initial window), the response's size, time and
round trips, how many of them were slow-start rounds, the first flight in
segments (10 = a cold initial window), time lost waiting for a delayed ACK
(Nagle), and the time the same exchange would take on a warm connection.
Then findings (connection churn, idle restarts, idle timeouts, delayed ACKs)
and fixes with the total request time predicted after each.

Examples:
  tcpwhy latency web-client.pcap
  tcpwhy latency --json capture.pcapng | jq '.connections[].exchanges[] | {index, time_ms, warm_ms}'

Exit codes: 0 all input read; 2 usage error; 3 an input could not be read at all;
4 an input was truncated or corrupt part-way (results cover the part before the
damage); 1 other failure.";

#[derive(Args, Default, Clone)]
pub struct LatencyOptions {
    /// Print JSON (schema tcpwhy.latency/1, see docs/latency.md).
    #[arg(long)]
    pub json: bool,
    /// Never show a progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Threads to use (default: the number of cores): with two or more,
    /// each capture's connections are analysed on them (sharded), beside
    /// the thread that reads it. The output is the same whatever the number.
    #[arg(long, short, value_name = "N")]
    pub jobs: Option<usize>,
}

pub fn run(files: &[PathBuf], o: &LatencyOptions) -> io::Result<u8> {
    let mut analyses = Vec::new();
    let mut failed = 0;
    let mut conns = Vec::new();
    let (_, shards) = crate::read::thread_plan(o.jobs, 1);
    for path in files {
        let mut rec = Recorder::default();
        match read_sharded(path, AnalyzeOptions::default(), shards, &mut rec, o.no_progress) {
            Some(a) => {
                for cs in &a.connections {
                    if let Some(l) = rec.get(cs.id).and_then(|r| connection_latency(cs, r)) {
                        conns.push(l);
                    }
                }
                analyses.push(a);
            }
            None => failed += 1,
        }
    }
    // Nothing was readable: the errors on stderr are all there is to say.
    if analyses.is_empty() {
        return Ok(exit_code(&analyses, failed));
    }
    let rep = latency_report(conns);
    let mut out = BufWriter::new(io::stdout().lock());
    let no_tcp: Vec<String> = analyses.iter().filter_map(|a| a.no_tcp()).collect();
    if o.json {
        for line in &no_tcp {
            eprintln!("tcpwhy: {line}");
        }
        serde_json::to_writer_pretty(&mut out, &rep)?;
        writeln!(out)?;
    } else {
        for line in &no_tcp {
            writeln!(out, "{line}")?;
        }
        if !rep.connections.is_empty() {
            out.write_all(latency_text(&rep).as_bytes())?;
        } else if no_tcp.len() < analyses.len() {
            writeln!(out, "No connection carried data in both directions.")?;
        }
    }
    out.flush()?;
    Ok(exit_code(&analyses, failed))
}
