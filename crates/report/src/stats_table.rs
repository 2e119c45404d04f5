//! `tcpwhy stats`: one block per connection, the two directions side by side
//! (as `tcptrace -l` does), with the numbers an engineer looks at first.

use crate::units::count;
use tcpwhy_core::units::{fmt_bytes_decimal as bytes, fmt_ms as millis, fmt_rate as rate, fmt_secs as seconds};
use std::io::{self, Write};
use tcpwhy_flow::{CaptureAnalysis, CapturePoint, ConnectionSummary, DirectionSummary};

fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "-".into())
}

fn yes_no(v: Option<bool>) -> String {
    match v {
        Some(true) => "yes".into(),
        Some(false) => "no".into(),
        None => "?".into(),
    }
}

fn capture_point(p: CapturePoint) -> &'static str {
    match p {
        CapturePoint::NearSender => "near sender",
        CapturePoint::NearReceiver => "near receiver",
        CapturePoint::Middle => "middle",
        CapturePoint::Unknown => "unknown",
    }
}

type Row = (&'static str, fn(&DirectionSummary) -> String);

const ROWS: &[Row] = &[
    ("packets", |d| count(d.counts.packets)),
    ("data packets", |d| count(d.counts.data_packets)),
    ("pure ACKs", |d| count(d.counts.pure_acks)),
    ("SYN/FIN/RST", |d| {
        format!("{}/{}/{}", d.counts.syn, d.counts.fin, d.counts.rst)
    }),
    ("data bytes", |d| {
        format!(
            "{} ({})",
            count(d.counts.bytes),
            bytes(d.counts.bytes as f64)
        )
    }),
    ("unique bytes", |d| count(d.counts.unique_bytes)),
    ("retransmitted", |d| {
        format!(
            "{} pkts, {} B ({:.2}%)",
            count(d.counts.retransmitted_packets),
            count(d.counts.retransmitted_bytes),
            d.retransmission_ratio.unwrap_or(0.0) * 100.0
        )
    }),
    ("MSS / max / avg segment", |d| {
        format!(
            "{} / {} / {}",
            opt(d.mss, |m| m.to_string()),
            d.counts.max_segment,
            opt(d.avg_segment, |v| format!("{v:.0}"))
        )
    }),
    ("initial window", |d| {
        format!(
            "{} B, {} pkts",
            count(d.counts.initial_window_bytes),
            d.counts.initial_window_packets
        )
    }),
    ("missed / truncated bytes", |d| {
        format!(
            "{} / {}",
            count(d.missed_bytes),
            count(d.counts.truncated_bytes)
        )
    }),
    ("segments > MSS", |d| count(d.counts.segments_above_mss)),
    ("window scale", |d| match d.window_scale {
        Some(s) => format!("{s} ({})", d.window_scaling),
        None => d.window_scaling.to_string(),
    }),
    ("SACK / timestamps", |d| {
        format!("{} / {}", yes_no(d.sack_permitted), yes_no(d.timestamps))
    }),
    ("adv. window min/avg/max", |d| {
        let w = &d.advertised_window;
        format!(
            "{} / {} / {}",
            opt(w.min_bytes, count),
            opt(w.avg_bytes, |v| count(v as u64)),
            opt(w.max_bytes, count)
        )
    }),
    ("zero-window time", |d| {
        seconds(d.advertised_window.zero_window_s)
    }),
    ("in flight max/avg", |d| {
        format!(
            "{} / {}",
            count(d.in_flight.max_bytes),
            opt(d.in_flight.avg_bytes, |v| count(v as u64))
        )
    }),
    ("RTT samples", |d| opt(d.rtt.as_ref(), |r| count(r.samples))),
    ("RTT min/avg/max", |d| {
        opt(d.rtt.as_ref(), |r| {
            format!(
                "{} / {} / {}",
                millis(r.min_ms),
                millis(r.avg_ms),
                millis(r.max_ms)
            )
        })
    }),
    ("RTT stdev/median/p99", |d| {
        opt(d.rtt.as_ref(), |r| {
            format!(
                "{} / {} / {}",
                millis(r.stdev_ms),
                millis(r.median_ms),
                millis(r.p99_ms)
            )
        })
    }),
    ("TS RTT min/median", |d| {
        opt(d.ts_rtt.as_ref(), |r| {
            format!("{} / {}", millis(r.min_ms), millis(r.median_ms))
        })
    }),
    ("capture point", |d| {
        let evidence = match d.capture_point_evidence {
            Some("handshake") => "handshake",
            Some("data_minimum") => "min RTT",
            Some("data_median") => "median RTT",
            Some(_) => "all < 1 ms",
            None => return capture_point(d.capture_point).to_string(),
        };
        format!(
            "{} ({evidence}: rcv {}, snd {})",
            capture_point(d.capture_point),
            opt(d.rtt_to_receiver_ms, millis),
            opt(d.rtt_to_sender_ms, millis)
        )
    }),
    ("throughput", |d| opt(d.throughput_bps, rate)),
    ("goodput", |d| opt(d.goodput_bps, rate)),
    ("peak (100 ms)", |d| opt(d.peak_throughput_bps, rate)),
    ("idle gaps > 200 ms", |d| {
        if d.idle.gaps == 0 {
            "0".into()
        } else {
            format!(
                "{} (max {}, total {})",
                d.idle.gaps,
                seconds(d.idle.max_s),
                seconds(d.idle.total_s)
            )
        }
    }),
    ("retrans fast/spurious", |d| {
        format!(
            "{} / {}",
            d.flags.fast_retransmission, d.flags.spurious_retransmission
        )
    }),
    ("lost / ACKed unseen", |d| {
        format!("{} / {}", d.flags.lost_segment, d.flags.ack_unseen_segment)
    }),
    ("out-of-order", |d| count(d.flags.out_of_order)),
    ("duplicate ACKs (3rd)", |d| {
        format!(
            "{} ({})",
            count(d.flags.duplicate_ack),
            count(d.counts.triple_dup_acks)
        )
    }),
    ("retrans delay min/avg/max", |d| {
        opt(d.retransmit_delay.as_ref(), |r| {
            format!(
                "{} / {} / {}",
                millis(r.min_ms),
                millis(r.avg_ms),
                millis(r.max_ms)
            )
        })
    }),
    ("zero window / probes", |d| {
        format!("{} / {}", d.flags.zero_window, d.flags.zero_window_probe)
    }),
    ("window full / updates", |d| {
        format!("{} / {}", d.flags.window_full, d.flags.window_update)
    }),
    ("keep-alives", |d| count(d.flags.keep_alive)),
];

fn write_connection(out: &mut impl Write, file: &str, c: &ConnectionSummary) -> io::Result<()> {
    let a = format!("{}:{}", c.a.addr, c.a.port);
    let b = format!("{}:{}", c.b.addr, c.b.port);
    writeln!(out, "connection {}  {a} <-> {b}  ({file})", c.id)?;
    writeln!(
        out,
        "  frames {}-{}, {} long, {}{}, handshake RTT {}, longest silence {}",
        c.first_frame,
        c.last_frame,
        seconds(c.duration_s),
        c.close.replace('_', " "),
        if c.started_mid_capture {
            ", started before the capture"
        } else {
            ""
        },
        opt(c.handshake_rtt_ms, millis),
        seconds(c.idle_max_s),
    )?;
    let (x, y) = (&c.directions[0], &c.directions[1]);
    let label = 28;
    let col = 52;
    writeln!(out, "  {:<label$} {:<col$} b -> a", "", "a -> b")?;
    for (name, f) in ROWS {
        writeln!(out, "  {name:<label$} {:<col$} {}", f(x), f(y))?;
    }
    writeln!(out)
}

/// Writes the per-connection table for every file.
pub fn write_stats_table(out: &mut impl Write, files: &[CaptureAnalysis]) -> io::Result<()> {
    for f in files {
        for c in &f.connections {
            write_connection(out, &f.path, c)?;
        }
        // No TCP at all: the one message every command gives for it.
        if let Some(line) = f.no_tcp() {
            writeln!(out, "{line}")?;
            continue;
        }
        let skipped: u64 = f.skipped.iter().map(|(_, n)| n).sum();
        write!(
            out,
            "{}: {} frames, {} TCP segments, {} connections",
            f.path,
            count(f.frames),
            count(f.tcp_segments),
            f.connections.len()
        )?;
        if skipped > 0 {
            let why: Vec<String> = f.skipped.iter().map(|(k, n)| format!("{k} {n}")).collect();
            write!(out, "; skipped {} ({})", count(skipped), why.join(", "))?;
        }
        writeln!(out)?;
        if let Some(line) = attempts_line(&f.attempts) {
            writeln!(out, "{}: {line}", f.path)?;
        }
    }
    Ok(())
}

/// The capture's connection attempts in one line, when they say something
/// the connections above do not: a flood or scan, or failed attempts too
/// many to list one by one.
pub fn attempts_line(a: &tcpwhy_flow::AttemptSummary) -> Option<String> {
    if a.kind.is_none() && (a.failed == 0 || a.listed) {
        return None;
    }
    let listed = if a.listed { "" } else { " (failed attempts not listed as connections)" };
    Some(format!("{}{listed}", a.text))
}

/// What to do about a flood or scan: the Linux listener's defences, sized
/// from what the capture shows.
pub fn attempts_advice(a: &tcpwhy_flow::AttemptSummary) -> Option<String> {
    match a.kind? {
        "syn_flood" => {
            let upstream = if a.sources > 1000 {
                format!(
                    "with about {} sources (spoofed, or a botnet), per-source limits do not help: \
                     drop the flood upstream (the provider's DDoS protection)",
                    tcpwhy_core::units::fmt_estimate(a.sources)
                )
            } else {
                format!(
                    "from about {} sources, a per-source SYN rate limit in nftables stops it \
                     (meter per ip saddr, limit rate 100/second, drop over it)",
                    a.sources
                )
            };
            Some(format!(
                "keep SYN cookies on (sysctl -w net.ipv4.tcp_syncookies=1, the default) so the listener \
                 answers without keeping state: {} attempts within 63 s overflow a SYN queue of at most {} \
                 (net.core.somaxconn); {upstream}",
                tcpwhy_core::units::fmt_count(a.peak_attempts_63s),
                tcpwhy_flow::SYN_QUEUE_MAX
            ))
        }
        "port_scan" | "host_scan" => Some(format!(
            "a scanner, not a slow transfer: check that only the intended ports answer, and block {} if unwanted",
            a.top_sources.first().map_or("the source", |e| e.endpoint.as_str())
        )),
        _ => Some(
            "these replies answer connections someone else opened with this host's address (spoofed); \
             nothing to tune here"
                .into(),
        ),
    }
}
