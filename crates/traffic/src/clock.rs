//! A moment on both clocks: CLOCK_REALTIME lines up with capture
//! timestamps, CLOCK_MONOTONIC measures durations.

use serde::{Deserialize, Serialize};

/// A moment on both clocks.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// CLOCK_REALTIME, ns since the Unix epoch (comparable with pcap times).
    pub realtime_ns: u64,
    /// CLOCK_MONOTONIC, ns (for durations; shared by namespaces of one host).
    pub monotonic_ns: u64,
}

impl Stamp {
    /// Seconds from `earlier` to `self` on the monotonic clock.
    pub fn secs_since(&self, earlier: &Stamp) -> f64 {
        (self.monotonic_ns as f64 - earlier.monotonic_ns as f64) / 1e9
    }
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec; the clocks used always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Now, on CLOCK_REALTIME and CLOCK_MONOTONIC (read back to back).
pub fn stamp() -> Stamp {
    Stamp { realtime_ns: clock_ns(libc::CLOCK_REALTIME), monotonic_ns: clock_ns(libc::CLOCK_MONOTONIC) }
}
