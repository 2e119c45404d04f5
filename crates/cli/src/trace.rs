//! `tcpwhy trace [FILTER] --duration 10s`: per-ACK cwnd, ssthresh, peer
//! window and srtt from `tcp:tcp_probe` (with `tcp_retransmit_skb` and
//! `tcp_cong_state_set`), in a private tracefs instance removed afterwards.

use crate::kcommon::{kernel_error, parse_filter};
use clap::Args;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tcpwhy_host::trace::{keep, render, summarize};
use crate::quantity::seconds;
use tcpwhy_kernel::{TcpProbe, TcpProbeOptions};

pub const TRACE_AFTER_HELP: &str = "\
Enables tcp:tcp_probe (one event per incoming segment on an established
socket: cwnd, ssthresh, snd_wnd, srtt, snd_nxt, snd_una), tcp:tcp_retransmit_skb
and tcp:tcp_cong_state_set in a private ftrace instance
(/sys/kernel/tracing/instances/tcpwhy-PID-N), so the global tracing state and
other users' instances are untouched; the instance is removed on exit, also
on Ctrl-C. Tracepoints see every namespace: the port filter selects the
flows (and is applied in the kernel); addresses are filtered afterwards.
This replaces a systemtap script printing cwnd at each write.

Filter: `port 5201`, `sport 22`, `dport 443`, `dst 10.0.0.2[:PORT]`, a bare port.
Needs root and tracefs with the tcp tracepoints (Linux 4.16+).

Examples:
  sudo tcpwhy trace port 5201 --duration 10s
  sudo tcpwhy trace dport 443 --duration 30s --out flows.jsonl
  tcpwhy diagnose capture.pcap --trace flows.jsonl
";

#[derive(Args)]
pub struct TraceArgs {
    /// Which flows (see below); default: every TCP flow on the machine.
    pub filter: Vec<String>,
    /// How long to record (e.g. 10s); Ctrl-C stops earlier.
    #[arg(long, default_value = "10s", value_parser = seconds, value_name = "TIME")]
    pub duration: f64,
    /// Write every event as JSON Lines (for `diagnose --trace`).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print one line per event (time, flow, cwnd, ssthresh, snd_wnd, srtt).
    #[arg(long)]
    pub events: bool,
    /// JSON summary per flow.
    #[arg(long)]
    pub json: bool,
    /// Per-CPU ring buffer, KiB.
    #[arg(long, default_value_t = 8192)]
    pub buffer_kb: u32,
}

pub fn run(a: &TraceArgs) -> u8 {
    let f = match parse_filter(&a.filter) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("tcpwhy trace: {e}");
            return crate::error::ToExitCode::exit_code(&e);
        }
    };
    let mut ports = f.ports.clone();
    ports.sort_unstable();
    ports.dedup();
    let opts = TcpProbeOptions {
        ports,
        buffer_size_kb: a.buffer_kb,
        ..Default::default()
    };
    let _ = tcpwhy_kernel::tracefs::remove_stale_instances();
    let probe = match TcpProbe::start(&opts) {
        Ok(p) => p,
        Err(e) => return kernel_error(&e, "cannot start tcp_probe tracing", None),
    };
    tcpwhy_lab::netns::install_signal_handlers();
    eprintln!(
        "tcpwhy trace: recording {} for {:.1} s in {} (Ctrl-C stops)",
        probe.enabled_events().join(", "),
        a.duration,
        probe.instance_dir().display()
    );
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < a.duration && !tcpwhy_lab::netns::interrupted() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let stats = probe.stats();
    let events = match probe.stop() {
        Ok(v) => v,
        Err(e) => {
            eprintln!("tcpwhy trace: stopping the trace: {e}");
            return crate::exit::FAILURE;
        }
    };
    let events: Vec<_> = events.into_iter().filter(|e| keep(e, &f.addrs)).collect();
    if stats.lost_events > 0 {
        eprintln!(
            "tcpwhy trace: warning: the kernel dropped {} events (ring buffer full; raise --buffer-kb)",
            stats.lost_events
        );
    }
    if let Some(p) = &a.out {
        let w = std::fs::File::create(p).map(BufWriter::new).and_then(|mut w| {
            for e in &events {
                serde_json::to_writer(&mut w, e)?;
                w.write_all(b"\n")?;
            }
            w.flush()
        });
        if let Err(e) = w {
            eprintln!("tcpwhy trace: cannot write {}: {e}", p.display());
            return crate::exit::FAILURE;
        }
    }
    let mut out = std::io::stdout().lock();
    if a.events {
        for e in &events {
            if let tcpwhy_kernel::TraceEvent::Probe { mono_ns, saddr, sport, daddr, dport, snd_cwnd, ssthresh, snd_wnd, srtt_us, snd_nxt, snd_una, .. } = e {
                let ss = if *ssthresh >= 0x7fff_0000 { "-".into() } else { ssthresh.to_string() };
                if writeln!(
                    out,
                    "{:.6} {}:{} > {}:{} cwnd={} ssthresh={} snd_wnd={} srtt={}us inflight={}",
                    *mono_ns as f64 / 1e9, saddr, sport, daddr, dport, snd_cwnd, ss, snd_wnd, srtt_us,
                    snd_nxt.wrapping_sub(*snd_una)
                )
                .is_err()
                {
                    return crate::exit::OK;
                }
            } else if writeln!(out, "{:.6} {}", e.mono_ns() as f64 / 1e9, e.name()).is_err() {
                return crate::exit::OK;
            }
        }
    }
    let flows = summarize(&events);
    let r = if a.json {
        serde_json::to_writer_pretty(&mut out, &serde_json::json!({"schema": "tcpwhy.trace/1", "events": events.len(), "flows": flows}))
            .map_err(std::io::Error::from)
            .and_then(|_| writeln!(out))
    } else if flows.is_empty() {
        writeln!(out, "no tcp_probe events for matching flows in {:.1} s", start.elapsed().as_secs_f64())
    } else {
        let mut r = Ok(());
        for fl in &flows {
            r = r.and_then(|_| writeln!(out, "{}\n", render(fl)));
        }
        r
    };
    match r {
        Ok(()) => crate::exit::OK,
        Err(_) => crate::exit::OK,
    }
}
