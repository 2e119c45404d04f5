//! The lab: network namespaces, a TUN link emulator, scenarios and kernel ground truth.
