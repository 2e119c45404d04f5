//! A file `PcapWriter` wrote is read back with the same times and lengths
//! by tcpwhy's reader, and by tcpdump and tshark (each skipped when it is
//! not installed).

use std::io::BufWriter;
use std::path::Path;
use std::process::Command;
use tcpwhy_wire::{CaptureFormat, CaptureReader, LinkType, PcapWriter};

/// An IPv4 TCP segment (20 + 20 bytes) with `payload` bytes after it.
fn segment(payload: usize) -> Vec<u8> {
    let mut p = vec![0u8; 40 + payload];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&((40 + payload) as u16).to_be_bytes());
    p[8] = 64;
    p[9] = 6;
    p[12..16].copy_from_slice(&[10, 0, 0, 1]);
    p[16..20].copy_from_slice(&[10, 0, 0, 2]);
    p[20..22].copy_from_slice(&40000u16.to_be_bytes());
    p[22..24].copy_from_slice(&443u16.to_be_bytes());
    p[32] = 5 << 4;
    p[33] = 0x18;
    p
}

/// (time in ns, length on the wire, bytes captured) of each packet.
const PACKETS: [(i64, u32, usize); 4] = [
    (1_700_000_000_000_000_001, 40, 40),
    (1_700_000_000_123_456_789, 1500, 200),
    (1_700_000_001_999_999_999, 1040, 200),
    (1_700_000_002_500_000_000, 40, 40),
];

fn write(path: &Path) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = PcapWriter::new(BufWriter::new(f), LinkType::Raw, 200).unwrap();
    for &(t, len, cap) in &PACKETS {
        let data = segment(len as usize - 40);
        w.write_packet(t, len, &data[..cap]).unwrap();
    }
    let want = w.written();
    w.into_inner().into_inner().unwrap();
    assert_eq!(std::fs::metadata(path).unwrap().len(), want);
}

fn tool(name: &str) -> bool {
    Command::new(name)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn tcpwhy_tcpdump_and_tshark_read_what_the_writer_wrote() {
    let dir = std::env::temp_dir().join(format!("tcpwhy-pcap-writer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("w.pcap");
    write(&path);

    let r = CaptureReader::open(&path).unwrap();
    let mut got = Vec::new();
    let s = r.for_each_frame(|f| got.push((f.time_ns, f.orig_len, f.data.len())));
    assert!(s.error.is_none(), "{:?}", s.error);
    assert_eq!(
        s.format,
        CaptureFormat::Pcap {
            nanosecond: true,
            big_endian: false
        }
    );
    assert_eq!(got, PACKETS.to_vec());

    if tool("tcpdump") {
        // Nanosecond times as seconds since the epoch, and each length.
        let o = Command::new("tcpdump")
            .args(["-nn", "-tt", "--time-stamp-precision=nano", "-r"])
            .arg(&path)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), PACKETS.len(), "{text}");
        for (line, &(t, _, _)) in lines.iter().zip(&PACKETS) {
            let want = format!(
                "{}.{:09} IP 10.0.0.1.40000 > 10.0.0.2.443",
                t / 1_000_000_000,
                t % 1_000_000_000
            );
            assert!(
                line.starts_with(&want),
                "{line:?} does not start with {want:?}"
            );
        }
    } else {
        eprintln!("tcpdump not installed: its part skipped");
    }
    if tool("tshark") {
        let o = Command::new("tshark")
            .args([
                "-n",
                "-T",
                "fields",
                "-e",
                "frame.time_epoch",
                "-e",
                "frame.len",
                "-e",
                "frame.cap_len",
                "-r",
            ])
            .arg(&path)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
        assert_eq!(rows.len(), PACKETS.len(), "{text}");
        for (row, &(t, len, cap)) in rows.iter().zip(&PACKETS) {
            let want = format!("{}.{:09}", t / 1_000_000_000, t % 1_000_000_000);
            assert_eq!(row[0], want, "{text}");
            assert_eq!(row[1], len.to_string(), "{text}");
            assert_eq!(row[2], cap.to_string(), "{text}");
        }
    } else {
        eprintln!("tshark not installed: its part skipped");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
