//! The kernel's rule for how much of a socket buffer becomes window: what
//! the fixes size buffers by (tcpwhy-diagnose) and what the host's `bdp`
//! calculator prints (tcpwhy-host), spelled once.

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

/// A buffer size for a window: the kernel keeps only part of the buffer
/// for payload; rounded up to a whole MiB (or 64 KiB below 1 MiB).
pub fn buffer_for_window(window: f64, rule: KernelRule) -> u64 {
    let raw = window / rule.window_fraction();
    let unit = if raw >= 1048576.0 { 1048576.0 } else { 65536.0 };
    ((raw / unit).ceil() * unit) as u64
}
