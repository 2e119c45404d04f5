//! Arbitrary bytes as a capture file read from a stream (pcap, pcapng, and
//! either of them gzip/xz/zstd-compressed, recognised by magic), through the
//! whole analysis: `CaptureReader::from_reader` -> `FlowTable::frame` for
//! every frame -> `FlowTable::finish`. Must never panic, hang or allocate
//! without bound (run with -rss_limit_mb=512).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| {
    let _ = checks::capture_reader_input(data);
});
