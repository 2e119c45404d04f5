//! Bytes read as a script of TCP segments (`fuzz/flows.rs`), written as a
//! pcap and put through what `tcpwhy diagnose --json`, `tcpwhy latency` and
//! `tcpwhy report` do (`fuzz/flows.rs`). Must never panic, the limits' time
//! shares must be shares, and `-j 2`'s diagnoses must be `-j 1`'s.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../flows.rs"]
mod flows;

fuzz_target!(|data: &[u8]| {
    let _ = flows::diagnose_flows_input(data);
});
