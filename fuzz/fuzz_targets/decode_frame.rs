//! One frame through `decode_frame`, for every supported link type.
//!
//! Input layout (the replay test in crates/wire/tests/fuzz_corpus.rs reads
//! corpus files the same way):
//!   byte 0      link type: LINKS[byte % 8]
//!   bytes 1..5  orig_len, u32 little-endian (length on the wire)
//!   bytes 5..   the captured frame
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcpwhy_wire::{decode_frame, LinkType, MAX_SACK_BLOCKS};

const LINKS: [i32; 8] = [0, 1, 101, 108, 113, 228, 229, 276];

fuzz_target!(|data: &[u8]| {
    let Some((head, frame)) = data.split_first_chunk::<5>() else {
        return;
    };
    let link = LinkType::from_linktype(LINKS[head[0] as usize % LINKS.len()]);
    let orig_len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]);
    if let Ok(seg) = decode_frame(link, frame, orig_len) {
        // The captured payload never exceeds what the headers say was sent,
        // and always lies inside the captured bytes.
        assert!(seg.payload.len() <= seg.payload_len as usize);
        if !seg.payload.is_empty() {
            let start = seg.payload.as_ptr() as usize - frame.as_ptr() as usize;
            assert!(start + seg.payload.len() <= frame.len());
        }
        assert!(seg.options.sacks().len() <= MAX_SACK_BLOCKS);
    }
});
