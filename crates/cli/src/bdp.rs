//! `tcpwhy bdp`: bandwidth-delay product, buffers for a kernel's window
//! rule, and time to send N bytes from a cold start.

use clap::Args;
use tcpwhy_diagnose::KernelRule;
use tcpwhy_core::units::{Bytes, Duration, Rate};

pub const BDP_AFTER_HELP: &str = "\
The window a path needs is bandwidth x RTT. The kernel keeps only part of a
receive buffer for the window: before Linux 6.6 buffer x (1 - 1/2^tcp_adv_win_scale)
(1/2 with the default 1 since Linux 3.6); from 6.6 a
per-socket scaling_ratio, about 1/2 with typical drivers. The printed
tcp_rmem/tcp_wmem lines give that window (never below the shipped defaults).
The cold-start table assumes slow start from IW10 doubling every RTT, no loss.

Examples:
  tcpwhy bdp --bandwidth 1gbit --rtt 50ms
  tcpwhy bdp --bandwidth 10gbit --rtt 80ms --kernel 5.10 --bytes 1GB";

#[derive(Args)]
pub struct BdpArgs {
    /// Path bandwidth, with a unit (1gbit, 1Gbit/s, 1gbps, 200mbit, 125MB/s).
    #[arg(long, value_name = "RATE")]
    pub bandwidth: Rate,
    /// Round-trip time, with a unit (50ms, 50 ms, 0.05s).
    #[arg(long, value_name = "TIME")]
    pub rtt: Duration,
    /// Kernel version whose window rule applies (default: 6.6 and later).
    #[arg(long, value_name = "VERSION")]
    pub kernel: Option<String>,
    /// tcp_adv_win_scale on that kernel (before 6.6; default 1).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub adv_win_scale: Option<i8>,
    /// Segment payload size, bytes.
    #[arg(long, default_value_t = 1448)]
    pub mss: u32,
    /// Initial congestion window, segments.
    #[arg(long, default_value_t = 10)]
    pub iw: u32,
    /// Transfer sizes for the cold-start table (100MB, 4MiB, 4m; no unit: bytes); default 100KB 1MB 10MB 100MB 1GB.
    #[arg(long, value_name = "SIZE")]
    pub bytes: Vec<Bytes>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: &BdpArgs) -> u8 {
    if a.rtt == Duration::ZERO || a.bandwidth.0 == 0 || a.mss == 0 || a.iw == 0 {
        eprintln!("tcpwhy bdp: --bandwidth, --rtt, --mss and --iw must be positive");
        return crate::exit::USAGE;
    }
    let rule = match &a.kernel {
        Some(k) => match KernelRule::for_version(k, a.adv_win_scale) {
            Some(r) => r,
            None => {
                eprintln!("tcpwhy bdp: kernel version {k:?} not understood (use e.g. 5.10 or 6.8)");
                return crate::exit::USAGE;
            }
        },
        None => KernelRule::default(),
    };
    let sizes = if a.bytes.is_empty() {
        vec![100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000]
    } else {
        a.bytes.iter().map(|b| b.0).collect()
    };
    let b = tcpwhy_host::bdp::compute(a.bandwidth.bps(), a.rtt.as_secs_f64(), rule, a.mss, a.iw, &sizes);
    if a.json {
        let mut v = serde_json::to_value(&b).unwrap_or_default();
        v["schema"] = "tcpwhy.bdp/1".into();
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        print!("{}", tcpwhy_host::bdp::render(&b));
    }
    crate::exit::OK
}
