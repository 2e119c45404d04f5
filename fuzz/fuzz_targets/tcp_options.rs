//! Arbitrary bytes as a TCP option list (`TcpOptions::parse` is public and
//! takes any slice; inside a segment it sees at most 40 bytes).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcpwhy_wire::{TcpOptions, MAX_SACK_BLOCKS};

fuzz_target!(|data: &[u8]| {
    let o = TcpOptions::parse(data);
    assert!(o.sacks().len() <= MAX_SACK_BLOCKS);
});
