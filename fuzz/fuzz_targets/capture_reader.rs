//! Arbitrary bytes as a capture file read from a stream (pcap, pcapng, and
//! either of them gzip/xz/zstd-compressed, recognised by magic), through the
//! whole analysis: `CaptureReader::from_reader` -> `FlowTable::frame` for
//! every frame -> `FlowTable::finish`. Must never panic, hang or allocate
//! without bound (run with -rss_limit_mb=512).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::Cursor;
use std::path::Path;
use tcpwhy_flow::FlowTable;
use tcpwhy_wire::CaptureReader;

fuzz_target!(|data: &[u8]| {
    let input = Box::new(Cursor::new(data.to_vec()));
    let Ok(reader) = CaptureReader::from_reader(Path::new("fuzz-input"), input) else {
        return;
    };
    let mut table = FlowTable::new();
    let mut frames = 0u64;
    let summary = reader.for_each_frame(|frame| {
        frames += 1;
        assert_eq!(frame.number, frames, "frames are numbered 1, 2, 3, ...");
        assert!(frame.orig_len as usize >= frame.data.len(), "orig_len >= captured length");
        table.frame(frame, &mut ());
    });
    assert_eq!(summary.frames, frames);
    let segments = table.segments();
    assert!(segments + table.skipped.total() == frames);
    let connections = table.finish();
    assert!(connections.len() as u64 <= segments);
});
