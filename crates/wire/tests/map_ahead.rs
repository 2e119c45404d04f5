//! Reading a mapped pcap with pages mapped ahead on a helper thread
//! (`CaptureReader::map_ahead`) keeps the file's resident pages bounded:
//! measured with the kernel's own count of this process's resident file
//! pages (RssFile in /proc/self/status) while a 262 MiB file of full-size
//! frames is read, every core kept busy beside it. (Without the release of
//! the pages behind the reader, 200 MiB stay resident here. The helper also
//! releases pages it mapped after the reader had released them, a race seen
//! as 88 MiB resident in `stats -j 2` on the 1.7 GB bench capture; this test
//! does not provoke that race reliably.)

use std::io::Write;
use tcpwhy_wire::CaptureReader;

const FRAMES: usize = 180_000;
const FRAME_BYTES: usize = 1514;

fn rss_file_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("RssFile:")).expect("RssFile in /proc/self/status");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn pages_mapped_ahead_do_not_stay_resident() {
    let dir = std::env::temp_dir().join(format!("tcpwhy-map-ahead-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("big.pcap");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        // Classic pcap, microseconds, Ethernet.
        f.write_all(&[0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0]).unwrap();
        let frame = vec![0u8; FRAME_BYTES];
        for i in 0..FRAMES as u32 {
            let mut h = Vec::with_capacity(16);
            h.extend_from_slice(&(i / 1000).to_le_bytes());
            h.extend_from_slice(&((i % 1000) * 1000).to_le_bytes());
            h.extend_from_slice(&(FRAME_BYTES as u32).to_le_bytes());
            h.extend_from_slice(&(FRAME_BYTES as u32).to_le_bytes());
            f.write_all(&h).unwrap();
            f.write_all(&frame).unwrap();
        }
    }
    let file_mib = std::fs::metadata(&path).unwrap().len() >> 20;
    let before = rss_file_kib();
    let mut peak = 0;
    let mut frames = 0;
    let reader = CaptureReader::open(&path).unwrap().map_ahead(true);
    // Threads that keep every core busy, as the analysis does beside the
    // reader: the helper is then often preempted, and late.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let summary = std::thread::scope(|s| {
        for _ in 0..std::thread::available_parallelism().map_or(2, |n| n.get()) {
            s.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
        }
        let summary = reader.for_each_frame(|_| {
            frames += 1;
            if frames % 2048 == 0 {
                peak = peak.max(rss_file_kib().saturating_sub(before));
            }
        });
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        summary
    });
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(summary.frames, FRAMES as u64);
    assert!(summary.error.is_none());
    // 8 MiB mapped ahead and at most 2 MiB behind before a release; 32 MiB
    // leaves room for the kernel's fault-around, and is an eighth of the file.
    assert!(peak < 32 * 1024, "{peak} KiB of the {file_mib} MiB file resident while reading");
}
