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

pub use tcpwhy_core::kernel::KernelRule;
