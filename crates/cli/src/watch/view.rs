//! The top-like view of `tcpwhy watch` (a terminal only).

use super::source::Drops;
use super::verdicts::Verdicts;
use std::io::{self, Write};
use std::time::Duration;
use tcpwhy_core::units::{fmt_bytes, fmt_rate};

/// A connection not diagnosed again for this long moved no data since:
/// its rate is shown as idle.
const IDLE_AFTER: Duration = Duration::from_secs(3);

pub struct Status<'a> {
    pub iface: &'a str,
    /// Capture time of the latest packet (s since the epoch).
    pub now_s: f64,
    pub elapsed: Duration,
    pub frames: u64,
    pub drops: Drops,
    pub live: usize,
    /// Files written, memory held, why it stopped.
    pub keep: Option<(u64, usize, Option<String>)>,
}

pub fn draw(s: &Status<'_>, v: &Verdicts, top: usize) -> io::Result<()> {
    let color = crate::kcommon::use_color();
    let (bold, dim, reset) = if color { ("\x1b[1m", "\x1b[2m", "\x1b[0m") } else { ("", "", "") };
    let mut o = String::from("\x1b[H\x1b[2J");
    o += &format!(
        "{bold}tcpwhy watch {}{reset}  {:.0} s  {} packets  {} connections live  (Ctrl-C: stop and diagnose)\n",
        s.iface,
        s.elapsed.as_secs_f64(),
        s.frames,
        s.live
    );
    let lost = s.drops.dropped + s.drops.if_dropped;
    if lost > 0 {
        o += &format!(
            "capture: {} packets dropped by the kernel, {} by the interface: a packet missing from the capture reads as a loss; loss and rate figures are weakened\n",
            s.drops.dropped, s.drops.if_dropped
        );
    } else {
        o += "capture: no packet dropped\n";
    }
    if let Some((files, mem, stopped)) = &s.keep {
        o += &format!("flight recorder: {files} captures written, {} held", fmt_bytes(*mem as f64));
        if let Some(why) = stopped {
            o += &format!(" (stopped: {why})");
        }
        o += "\n";
    }
    o += "\n";
    let header = format!(
        "{:>6}  {:<44} {:<24} {:<6} {:>7} {:>12} {:>9} {:>7}",
        "CONN", "SENDER -> RECEIVER", "LIMIT", "CONF", "SINCE", "RATE", "RTT ms", "RETRANS"
    );
    o += &format!("{bold}{header}{reset}\n");
    let mut rows: Vec<(&super::verdicts::ConnState, &super::verdicts::DirView)> =
        v.conns.values().flat_map(|c| c.dirs.iter().map(move |d| (c, d))).collect();
    let now = std::time::Instant::now();
    let rate = |c: &super::verdicts::ConnState, d: &super::verdicts::DirView| {
        if now.duration_since(c.updated) > IDLE_AFTER {
            0.0
        } else {
            d.rate_bps.unwrap_or(0.0)
        }
    };
    rows.sort_by(|x, y| rate(y.0, y.1).total_cmp(&rate(x.0, x.1)).then(y.1.bytes.cmp(&x.1.bytes)));
    for (c, d) in rows.iter().take(top) {
        let r = rate(c, d);
        o += &format!(
            "{:>6}  {:<44} {:<24} {:<6} {:>6.0}s {:>12} {:>9} {:>7}\n",
            c.number,
            format!("{} -> {}", d.sender, d.receiver),
            d.primary.as_str(),
            d.confidence.as_str(),
            (s.now_s - d.since_s).max(0.0),
            if r > 0.0 { fmt_rate(r) } else { format!("{dim}idle{reset}") },
            d.rtt_ms.map_or("-".into(), |x| format!("{x:.2}")),
            d.retransmitted
        );
    }
    if rows.len() > top {
        o += &format!("... {} more directions (--top N)\n", rows.len() - top);
    }
    if rows.is_empty() {
        o += &format!("{dim}no connection has carried enough data to diagnose yet ({} KiB){reset}\n", tcpwhy_diagnose::MIN_BYTES / 1024);
    }
    let mut out = io::stdout().lock();
    out.write_all(o.as_bytes())?;
    out.flush()
}
