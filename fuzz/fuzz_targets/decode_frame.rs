//! One frame through `decode_frame`, for every supported link type.
//!
//! Input layout (the replay test in crates/wire/tests/fuzz_corpus.rs reads
//! corpus files the same way):
//!   byte 0      link type: LINKS[byte % 8]
//!   bytes 1..5  orig_len, u32 little-endian (length on the wire)
//!   bytes 5..   the captured frame
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| checks::decode_frame_input(data));
