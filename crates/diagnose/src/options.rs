//! What a diagnosis is asked to do (the user's knowledge of the path and
//! of the receiver's kernel) and the least data it judges. The first stage:
//! every other one reads it.

/// Directions with less new data than this are not diagnosed.
pub const MIN_BYTES: u64 = 16 * 1024;
/// ...or fewer data segments (too few round trips to tell states apart).
pub const MIN_DATA_SEGMENTS: usize = 8;

#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    pub kernel: KernelRule,
    /// Path bandwidth the user knows (bit/s); otherwise estimated.
    pub bandwidth_bps: Option<f64>,
    /// RTT the user knows (ms), for the fix arithmetic.
    pub rtt_ms: Option<f64>,
}

/// How the kernel turns a receive buffer into a window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KernelRule {
    /// Before 6.6: window = buffer x (1 - 1/2^tcp_adv_win_scale).
    AdvWinScale(i8),
    /// 6.6 and later: a per-socket scaling_ratio (payload / truesize), about 50%.
    ScalingRatio,
}

impl Default for KernelRule {
    fn default() -> Self {
        KernelRule::ScalingRatio
    }
}

impl KernelRule {
    /// From a kernel version such as "5.10" or "6.6.1" (and the sysctl
    /// tcp_adv_win_scale when known; default 1).
    pub fn for_version(version: &str, adv_win_scale: Option<i8>) -> Option<KernelRule> {
        let mut it = version.trim().trim_start_matches('v').split(['.', '-']);
        let major: u32 = it.next()?.parse().ok()?;
        let minor: u32 = it.next().unwrap_or("0").parse().ok()?;
        Some(if (major, minor) >= (6, 6) {
            KernelRule::ScalingRatio
        } else {
            KernelRule::AdvWinScale(adv_win_scale.unwrap_or(1))
        })
    }
    pub fn window_fraction(self) -> f64 {
        match self {
            KernelRule::ScalingRatio => 0.5,
            KernelRule::AdvWinScale(s) if s > 0 => 1.0 - 1.0 / f64::from(1u32 << s.min(14)),
            KernelRule::AdvWinScale(s) => 1.0 / f64::from(1u32 << (-s).clamp(0, 14)),
        }
    }
    pub fn describe(self) -> String {
        match self {
            KernelRule::ScalingRatio => "Linux 6.6+ per-socket scaling_ratio".into(),
            KernelRule::AdvWinScale(s) => format!("Linux before 6.6 with tcp_adv_win_scale={s}"),
        }
    }
    pub fn fraction_text(self) -> String {
        match self {
            KernelRule::ScalingRatio => "about half".into(),
            _ => format!("{:.0}%", self.window_fraction() * 100.0),
        }
    }
}
