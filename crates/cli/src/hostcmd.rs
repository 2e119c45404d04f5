//! `tcpwhy host`: this host's (or a saved) TCP settings judged against a
//! path: largest windows, throughput ceiling, findings with fix commands.

use clap::Args;
use std::path::PathBuf;
use std::process::Command;
use tcpwhy_host::host::{judge, render, HostInput};
use tcpwhy_host::text;
use crate::quantity::{bits_per_sec, seconds};

pub const HOST_AFTER_HELP: &str = "\
Reads this host's TCP sysctls (/proc/sys), kernel version, `ip tcp_metrics
show` and the TCP counters of /proc/net/snmp and /proc/net/netstat (what
nstat and netstat -s print); or saved copies of each (--sysctl, --kernel,
--tcp-metrics, --nstat; saved files are used instead of the live host, and
a missing one is simply not judged). With --rtt (and --bandwidth) it says
how large a window each side can reach, the ceiling of one connection at
that RTT, and which settings are below the path's bandwidth-delay product,
with the exact commands to fix them. The window arithmetic follows the
kernel's rule (tcp_adv_win_scale before 6.6, scaling_ratio after).

Examples:
  tcpwhy host --rtt 35ms --bandwidth 3gbit
  tcpwhy host --sysctl server-sysctl.txt --tcp-metrics metrics.txt --nstat nstat.txt --rtt 80ms
  sudo tcpwhy host --netns blue

Exit codes: 0 done; 2 usage error; 3 a file could not be read or held
nothing of the expected kind; 5/6 as for `live` with --netns.";

#[derive(Args)]
pub struct HostArgs {
    /// The path's RTT, with a unit (35ms, 0.035s): gives the throughput ceilings.
    #[arg(long, value_parser = seconds, value_name = "TIME")]
    pub rtt: Option<f64>,
    /// The path's bandwidth, with a unit (3gbit, 3Gbit/s, 375MB/s): flags buffers below the BDP.
    #[arg(long, value_parser = bits_per_sec, value_name = "RATE")]
    pub bandwidth: Option<f64>,
    /// A saved `sysctl -a` output instead of this host's settings.
    #[arg(long, value_name = "FILE")]
    pub sysctl: Option<PathBuf>,
    /// Kernel version of the saved host (e.g. 5.10), if the sysctl file lacks kernel.osrelease.
    #[arg(long, value_name = "VERSION")]
    pub kernel: Option<String>,
    /// A saved `ip tcp_metrics show` output.
    #[arg(long, value_name = "FILE")]
    pub tcp_metrics: Option<PathBuf>,
    /// A saved `nstat -az` or `netstat -s` output.
    #[arg(long, value_name = "FILE")]
    pub nstat: Option<PathBuf>,
    /// Read the live settings of this network namespace (needs root).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

fn read(p: &PathBuf) -> Result<String, u8> {
    std::fs::read_to_string(p).map_err(|e| {
        eprintln!("tcpwhy host: cannot read {}: {e}", p.display());
        crate::exit::UNREADABLE
    })
}

pub fn run(a: &HostArgs) -> u8 {
    match run_inner(a) {
        Ok(c) | Err(c) => c,
    }
}

fn run_inner(a: &HostArgs) -> Result<u8, u8> {
    let saved = a.sysctl.is_some() || a.tcp_metrics.is_some() || a.nstat.is_some();
    let mut input = HostInput {
        rtt_s: a.rtt,
        bandwidth_bps: a.bandwidth,
        kernel: a.kernel.clone(),
        ..Default::default()
    };
    if let Some(p) = &a.sysctl {
        input.sysctl = text::parse_sysctl(&read(p)?);
        if input.sysctl.is_empty() {
            eprintln!("tcpwhy host: {}: no `key = value` lines (expected `sysctl -a` output)", p.display());
            return Err(crate::exit::UNREADABLE);
        }
    } else if !saved {
        let snap = match &a.netns {
            Some(n) => tcpwhy_kernel::sysctl::snapshot_in_netns(n),
            None => tcpwhy_kernel::sysctl::snapshot(),
        };
        input.sysctl = snap.map_err(|e| crate::kcommon::kernel_error(&e, "cannot read sysctls", a.netns.as_deref()))?;
    }
    if let Some(p) = &a.tcp_metrics {
        let (m, skipped) = text::parse_tcp_metrics(&read(p)?);
        if !skipped.is_empty() {
            eprintln!("tcpwhy host: {}: {} lines skipped", p.display(), skipped.len());
        }
        input.tcp_metrics = Some(m);
    } else if !saved {
        let mut cmd = Command::new("ip");
        if let Some(n) = &a.netns {
            cmd.args(["-n", n]);
        }
        match cmd.args(["tcp_metrics", "show"]).output() {
            Ok(o) if o.status.success() => {
                input.tcp_metrics = Some(text::parse_tcp_metrics(&String::from_utf8_lossy(&o.stdout)).0)
            }
            Ok(o) => eprintln!(
                "tcpwhy host: `ip tcp_metrics show` failed ({}): cached metrics not judged",
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            Err(e) => eprintln!("tcpwhy host: cannot run `ip` ({e}): cached metrics not judged"),
        }
    }
    if let Some(p) = &a.nstat {
        let (c, _) = text::parse_counters(&read(p)?);
        if c.is_empty() {
            eprintln!("tcpwhy host: {}: no counters (expected `nstat -az` or `netstat -s` output)", p.display());
            return Err(crate::exit::UNREADABLE);
        }
        input.counters = Some(c);
    } else if !saved {
        let c = match &a.netns {
            Some(n) => tcpwhy_kernel::netns::run_in_netns(n, text::read_proc_counters),
            None => text::read_proc_counters(),
        };
        match c {
            Ok(c) => input.counters = Some(c),
            Err(e) => eprintln!("tcpwhy host: cannot read /proc/net counters: {e}"),
        }
    }
    if input.kernel.is_none() && !saved {
        input.kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok().map(|s| s.trim().to_string());
    }
    let r = judge(&input);
    if a.json {
        let mut v = serde_json::to_value(&r).unwrap_or_default();
        v["schema"] = "tcpwhy.host/1".into();
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        print!("{}", render(&r));
        if a.rtt.is_none() {
            println!("\n(give --rtt and --bandwidth for the throughput ceilings and the BDP checks)");
        }
    }
    Ok(crate::exit::OK)
}
