//! The lab: network namespaces, a TUN link emulator, scenarios and kernel ground truth.

pub mod error;
pub mod link;
pub mod netns;
pub mod scenario;
pub mod run;
pub mod trace;
pub mod truth;

pub use error::Error;
