//! What the fuzz targets do with an input and assert about the result,
//! shared with the corpus replay in `crates/wire/tests/fuzz_corpus.rs`
//! (included there with `#[path]`), so the two cannot drift apart.
// Each fuzz target uses part of this module.
#![allow(dead_code)]

use std::io::Cursor;
use std::path::Path;
use tcpwhy_flow::FlowTable;
use tcpwhy_wire::{decode_frame, CaptureReader, LinkType, MAX_SACK_BLOCKS};

/// Link types a `decode_frame` input can pick with its first byte.
pub const LINKS: [i32; 8] = [0, 1, 101, 108, 113, 228, 229, 276];

/// `decode_frame` target: byte 0 picks the link type, bytes 1..5 are
/// orig_len (u32 little-endian), the rest is the frame.
pub fn decode_frame_input(data: &[u8]) {
    let Some((head, frame)) = data.split_first_chunk::<5>() else {
        return;
    };
    let link = LinkType::from_linktype(LINKS[head[0] as usize % LINKS.len()]);
    let orig_len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]);
    check_decode(link, frame, orig_len);
}

/// The captured payload never exceeds what the headers say was sent, and
/// always lies inside the captured bytes.
pub fn check_decode(link: LinkType, frame: &[u8], orig_len: u32) {
    if let Ok(seg) = decode_frame(link, frame, orig_len) {
        assert!(seg.payload.len() <= seg.payload_len as usize);
        if !seg.payload.is_empty() {
            let start = seg.payload.as_ptr() as usize - frame.as_ptr() as usize;
            assert!(start + seg.payload.len() <= frame.len());
        }
        assert!(seg.options.sacks().len() <= MAX_SACK_BLOCKS);
    }
}

/// Every frame through `decode_frame` (with the checks above) and
/// `FlowTable`, then `finish()`. Returns the frames read.
pub fn pipeline(reader: CaptureReader) -> u64 {
    let mut table = FlowTable::new();
    let mut frames = 0u64;
    let summary = reader.for_each_frame(|frame| {
        frames += 1;
        assert_eq!(frame.number, frames, "frames are numbered 1, 2, 3, ...");
        assert!(
            frame.orig_len as usize >= frame.data.len(),
            "orig_len >= captured length"
        );
        check_decode(frame.link, frame.data, frame.orig_len);
        table.frame(frame, &mut ());
    });
    assert_eq!(summary.frames, frames);
    let segments = table.segments();
    assert_eq!(segments + table.skipped.total(), frames);
    let (connections, attempts) = table.finish(&mut ());
    assert!(connections.len() as u64 <= segments);
    assert!(attempts.attempts <= segments);
    assert!(attempts.failed <= attempts.attempts);
    frames
}

/// `capture_reader` target: the bytes as a stream.
pub fn capture_reader_input(data: &[u8]) -> Option<u64> {
    let input = Box::new(Cursor::new(data.to_vec()));
    let reader = CaptureReader::from_reader(Path::new("fuzz-input"), input).ok()?;
    Some(pipeline(reader))
}
