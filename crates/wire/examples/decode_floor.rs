//! The floor under every per-packet analysis: read a capture and decode each
//! frame's link, IP and TCP headers (options included), and nothing else.
//! `bench/floor.sh` times it next to `tcpwhy stats` and `tcptrace -l -r`.
//!
//! Usage: cargo run --release -p tcpwhy-wire --example decode_floor -- FILE

use std::hint::black_box;
use std::path::PathBuf;

use tcpwhy_wire::{decode_frame, CaptureReader};

fn main() {
    let Some(path) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: decode_floor FILE");
        std::process::exit(2);
    };
    let reader = match CaptureReader::open(&path) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("decode_floor: {}: {e}", path.display());
            std::process::exit(1);
        }
    };
    let (mut tcp, mut other, mut sum) = (0u64, 0u64, 0u64);
    let summary = reader.for_each_frame(|f| match decode_frame(f.link, f.data, f.orig_len) {
        Ok(seg) => {
            tcp += 1;
            // Use what an analysis reads, so that none of it is optimised away.
            sum = sum
                .wrapping_add(seg.seq as u64)
                .wrapping_add(seg.ack as u64)
                .wrapping_add(seg.payload_len as u64)
                .wrapping_add(seg.options.timestamp.map_or(0, |t| t.0 as u64))
                .wrapping_add(seg.src_port as u64);
            black_box(&seg);
        }
        Err(_) => other += 1,
    });
    println!("{tcp} TCP segments, {other} other frames, checksum {sum:x}, {summary:?}");
}
