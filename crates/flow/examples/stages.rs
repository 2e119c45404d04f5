//! Cost of each stage of the flow analysis per packet, with the capture
//! already in memory (no page faults, no I/O), so that a change to one
//! stage can be measured without the noise of the rest:
//!
//!   cargo run --release -p tcpwhy-flow --example stages -- CAPTURE [ROUNDS]
//!
//! Prints, for each stage, the best of ROUNDS (default 7) in nanoseconds
//! per packet: decoding alone, then decoding plus the flow table (lookup,
//! duplicate filter, `Connection::process`) with a sink that keeps nothing.
//! The difference is the flow model's cost. bench/README.md explains.

use std::path::PathBuf;
use std::time::Instant;
use tcpwhy_flow::FlowTable;
use tcpwhy_wire::{decode_frame, CaptureReader, LinkType};

struct Owned {
    number: u64,
    time_ns: i64,
    link: LinkType,
    orig_len: u32,
    data: Vec<u8>,
}

fn main() {
    let mut args = std::env::args_os().skip(1);
    let Some(path) = args.next().map(PathBuf::from) else {
        eprintln!("usage: stages CAPTURE [ROUNDS]");
        std::process::exit(2);
    };
    let rounds: usize = args
        .next()
        .and_then(|r| r.to_str().and_then(|r| r.parse().ok()))
        .unwrap_or(7);
    let reader = match CaptureReader::open(&path) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("stages: {e}");
            std::process::exit(1);
        }
    };
    let mut frames = Vec::new();
    reader.for_each_frame(|f| {
        frames.push(Owned {
            number: f.number,
            time_ns: f.time_ns,
            link: f.link,
            orig_len: f.orig_len,
            data: f.data.to_vec(),
        })
    });
    let n = frames.len().max(1) as f64;
    let mut best = [f64::MAX; 2];
    for _ in 0..rounds {
        let t = Instant::now();
        let mut ok = 0u64;
        for f in &frames {
            if let Ok(seg) = decode_frame(f.link, &f.data, f.orig_len) {
                ok += std::hint::black_box(seg.payload_len as u64) & 1;
            }
        }
        std::hint::black_box(ok);
        best[0] = best[0].min(t.elapsed().as_nanos() as f64 / n);

        let t = Instant::now();
        let mut table = FlowTable::new();
        for f in &frames {
            if let Ok(seg) = decode_frame(f.link, &f.data, f.orig_len) {
                table.segment(&seg, f.number, f.time_ns, &mut ());
            }
        }
        std::hint::black_box(table.finish(&mut ()));
        best[1] = best[1].min(t.elapsed().as_nanos() as f64 / n);
    }
    println!("packets {}", frames.len());
    println!("decode            {:6.1} ns/packet", best[0]);
    println!("decode + flow     {:6.1} ns/packet", best[1]);
    println!("flow (difference) {:6.1} ns/packet", best[1] - best[0]);
}
