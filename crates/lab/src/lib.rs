//! The lab: network namespaces, a TUN link emulator, scenarios and kernel ground truth.

pub mod link;
pub mod netns;
pub mod scenario;
pub mod units;
pub mod run;
pub mod trace;
pub mod truth;
