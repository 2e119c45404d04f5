//! Bandwidth-delay product arithmetic: the window a path needs, the buffer
//! sizes that give that window under a kernel's buffer-to-window rule (the
//! same [`buffer_for_window`] / [`KernelRule`] the diagnosis uses), and how
//! long N bytes take from a cold start.

use serde::Serialize;
use tcpwhy_core::{buffer_for_window, KernelRule};

use tcpwhy_core::units::{fmt_bytes, fmt_bytes_decimal, fmt_rate, fmt_secs, Bytes};

#[derive(Debug, Clone, Serialize)]
pub struct ColdStart {
    pub bytes: u64,
    /// Round trips spent in slow start before the window covers the BDP
    /// (or the data runs out).
    pub slow_start_rounds: u32,
    /// From the first data segment until the last byte arrives, s.
    pub seconds: f64,
    /// Including the handshake (one more RTT), s.
    pub seconds_with_handshake: f64,
    pub average_bps: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Bdp {
    pub bandwidth_bps: f64,
    pub rtt_s: f64,
    pub bdp_bytes: f64,
    pub mss: u32,
    pub bdp_segments: f64,
    pub kernel_rule: String,
    /// Buffer whose window covers the BDP.
    pub buffer_bytes: u64,
    pub tcp_rmem: String,
    pub tcp_wmem: String,
    pub rmem_max: u64,
    pub wmem_max: u64,
    /// Initial window, segments.
    pub initial_window: u32,
    pub cold_start: Vec<ColdStart>,
}

/// Time to deliver `bytes` with slow start from `iw` segments doubling
/// each RTT until the window covers the BDP, then at the path rate. Each
/// slow-start round costs one RTT; the rest is serialisation at the path
/// rate plus a one-way delay for the last byte. No loss.
pub fn cold_start(bytes: u64, bw_bps: f64, rtt_s: f64, mss: u32, iw: u32) -> ColdStart {
    let bdp = bw_bps / 8.0 * rtt_s;
    let mut cwnd = iw as f64 * mss as f64;
    let mut sent = 0.0;
    let mut t = 0.0;
    let mut rounds = 0;
    let total = bytes as f64;
    while sent + cwnd < total && cwnd < bdp {
        sent += cwnd;
        cwnd *= 2.0;
        t += rtt_s;
        rounds += 1;
    }
    t += (total - sent) * 8.0 / bw_bps + rtt_s / 2.0;
    ColdStart {
        bytes,
        slow_start_rounds: rounds,
        seconds: t,
        seconds_with_handshake: t + rtt_s,
        average_bps: total * 8.0 / (t + rtt_s),
    }
}

pub fn compute(bw_bps: f64, rtt_s: f64, rule: KernelRule, mss: u32, iw: u32, sizes: &[u64]) -> Bdp {
    let bdp = bw_bps / 8.0 * rtt_s;
    // Never below the defaults a current kernel ships (4 MiB / 6 MiB).
    let buf = buffer_for_window(bdp, rule);
    let rmax = buf.max(6 << 20);
    // The send buffer holds the unacknowledged window plus what waits
    // behind it (the kernel sizes sndbuf at about twice cwnd): 2 x BDP,
    // whatever the receive-side rule.
    let wmax = buffer_for_window(bdp, KernelRule::ScalingRatio).max(4 << 20);
    Bdp {
        bandwidth_bps: bw_bps,
        rtt_s,
        bdp_bytes: bdp,
        mss,
        bdp_segments: bdp / mss as f64,
        kernel_rule: rule.describe(),
        buffer_bytes: buf,
        tcp_rmem: format!("4096 131072 {rmax}"),
        tcp_wmem: format!("4096 16384 {wmax}"),
        rmem_max: rmax,
        wmem_max: wmax,
        initial_window: iw,
        cold_start: sizes.iter().map(|&b| cold_start(b, bw_bps, rtt_s, mss, iw)).collect(),
    }
}

pub fn render(b: &Bdp) -> String {
    let mut o = String::new();
    o += &format!(
        "path {} x RTT {}: bandwidth-delay product {} = {} ({:.0} B, {:.0} segments of {} B)\n",
        fmt_rate(b.bandwidth_bps),
        fmt_secs(b.rtt_s),
        Bytes(b.bdp_bytes.round() as u64).decimal(),
        fmt_bytes(b.bdp_bytes),
        b.bdp_bytes,
        b.bdp_segments,
        b.mss
    );
    o += &format!(
        "window needed: {} in flight, so the receiver must advertise that much and the sender must hold it unacknowledged\n",
        fmt_bytes(b.bdp_bytes)
    );
    o += &format!(
        "kernel rule: {} -> a buffer of {} ({} B) gives that window\n\n",
        b.kernel_rule,
        fmt_bytes(b.buffer_bytes as f64),
        b.buffer_bytes
    );
    o += "settings (both ends; the receiver's tcp_rmem decides the window, the sender's tcp_wmem how much it can keep in flight):\n";
    o += &format!("  sysctl -w net.ipv4.tcp_rmem=\"{}\"\n", b.tcp_rmem);
    o += &format!("  sysctl -w net.ipv4.tcp_wmem=\"{}\"\n", b.tcp_wmem);
    o += &format!(
        "  sysctl -w net.core.rmem_max={}   # only for applications that set SO_RCVBUF\n",
        b.rmem_max
    );
    o += &format!(
        "  sysctl -w net.core.wmem_max={}   # only for applications that set SO_SNDBUF\n\n",
        b.wmem_max
    );
    o += &format!(
        "cold start with IW{} (slow start doubling each RTT, no loss; +1 RTT for the handshake):\n",
        b.initial_window
    );
    o += "  size          slow-start RTTs   time      with handshake   average\n";
    for c in &b.cold_start {
        o += &format!(
            "  {:<13} {:>15}   {:<9} {:<16} {}\n",
            fmt_bytes_decimal(c.bytes as f64),
            c.slow_start_rounds,
            fmt_secs(c.seconds),
            fmt_secs(c.seconds_with_handshake),
            fmt_rate(c.average_bps)
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_gbit_50ms() {
        let b = compute(1e9, 0.05, KernelRule::AdvWinScale(1), 1448, 10, &[1_000_000, 100_000_000]);
        assert!((b.bdp_bytes - 6_250_000.0).abs() < 1.0);
        // Pre-6.6 with adv_win_scale 1: half the buffer -> 12.5 MB -> 12 MiB rounded up.
        assert_eq!(b.buffer_bytes, 12 * 1048576);
        assert_eq!(b.tcp_rmem, format!("4096 131072 {}", 12 * 1048576));
        let c = &b.cold_start[0];
        // 14480, 28960, 57920, 115840, 231680, 463360 -> after 6 rounds 912,240 sent; the rest at 1 Gbit/s.
        assert_eq!(c.slow_start_rounds, 6);
        let rest = (1_000_000.0 - 912_240.0) * 8.0 / 1e9;
        assert!((c.seconds - (0.3 + rest + 0.025)).abs() < 1e-9);
        // 100 MB: cwnd passes the BDP after 9 rounds.
        assert_eq!(b.cold_start[1].slow_start_rounds, 9);
        let k = compute(1e9, 0.05, KernelRule::AdvWinScale(2), 1448, 10, &[]);
        assert_eq!(k.buffer_bytes, 8 * 1048576); // 75%
    }
}
