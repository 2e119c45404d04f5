//! `tcpwhy report` and `tcpwhy plot` end to end: tables read back with the
//! parquet and Arrow readers match `tcpwhy stats --json`; capture content is
//! escaped in the HTML; static plots are valid SVG/PNG.

use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn tcpwhy() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tcpwhy"))
}

fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/smtp-upload-no-window-scaling.pcap.xz")
}

fn stats_json(p: &Path) -> Value {
    let out = tcpwhy().args(["stats", "--json"]).arg(p).output().unwrap();
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).unwrap()
}

fn parquet_rows(p: &Path) -> usize {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let f = fs::File::open(p).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(f).unwrap().build().unwrap();
    reader.map(|b| b.unwrap().num_rows()).sum()
}

fn arrow_rows(p: &Path) -> usize {
    let f = fs::File::open(p).unwrap();
    let reader = arrow_ipc::reader::FileReader::try_new(f, None).unwrap();
    reader.map(|b| b.unwrap().num_rows()).sum()
}

#[test]
fn parquet_and_arrow_tables_read_back_with_the_packet_count_of_stats() {
    let dir = tempfile::tempdir().unwrap();
    let cap = example();
    let out = tcpwhy()
        .arg("report")
        .arg(&cap)
        .arg("--parquet")
        .arg(dir.path().join("pq"))
        .arg("--arrow")
        .arg(dir.path().join("ar"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s = stats_json(&cap);
    let segments = s["files"][0]["tcp_segments"].as_u64().unwrap() as usize;
    let conns = s["connections"].as_array().unwrap().len();
    assert!(segments > 1000);
    assert_eq!(parquet_rows(&dir.path().join("pq/packets.parquet")), segments);
    assert_eq!(arrow_rows(&dir.path().join("ar/packets.arrow")), segments);
    assert_eq!(parquet_rows(&dir.path().join("pq/connections.parquet")), conns);
    assert_eq!(arrow_rows(&dir.path().join("ar/connections.arrow")), conns);
    for t in ["sack", "series", "limits"] {
        let a = parquet_rows(&dir.path().join(format!("pq/{t}.parquet")));
        let b = arrow_rows(&dir.path().join(format!("ar/{t}.arrow")));
        assert_eq!(a, b, "{t}");
    }
    assert!(parquet_rows(&dir.path().join("pq/series.parquet")) > 0);
    assert!(parquet_rows(&dir.path().join("pq/limits.parquet")) > 0);
    // Packet bytes add up to the stats' data bytes.
    use arrow_array::{cast::AsArray, types::UInt32Type};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let f = fs::File::open(dir.path().join("pq/packets.parquet")).unwrap();
    let mut total = 0u64;
    for b in ParquetRecordBatchReaderBuilder::try_new(f).unwrap().build().unwrap() {
        let b = b.unwrap();
        let len = b.column_by_name("len").unwrap().as_primitive::<UInt32Type>();
        total += len.values().iter().map(|&v| v as u64).sum::<u64>();
    }
    let want: u64 = s["connections"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["directions"].as_array().unwrap().iter().map(|d| d["bytes"].as_u64().unwrap()))
        .sum();
    assert_eq!(total, want);
}

// --- a capture whose payloads carry markup ---------------------------------

fn csum(data: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in data.chunks(2) {
        s += u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0));
    }
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

fn frame(src: [u8; 4], dst: [u8; 4], sp: u16, dp: u16, seq: u32, ack: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut tcp = Vec::new();
    tcp.extend(sp.to_be_bytes());
    tcp.extend(dp.to_be_bytes());
    tcp.extend(seq.to_be_bytes());
    tcp.extend(ack.to_be_bytes());
    tcp.extend([5 << 4, flags, 0xff, 0xff, 0, 0, 0, 0]);
    let total = (20 + tcp.len() + payload.len()) as u16;
    let mut ip = vec![0x45, 0];
    ip.extend(total.to_be_bytes());
    ip.extend([0, 1, 0, 0, 64, 6, 0, 0]);
    ip.extend(src);
    ip.extend(dst);
    let c = csum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0];
    f.extend(ip);
    f.extend(tcp);
    f.extend(payload);
    f
}

fn write_markup_capture(path: &Path, c2s: &[u8], s2c: &[u8]) {
    let (c, s) = ([10, 0, 0, 1], [10, 0, 0, 2]);
    let (syn, ack, psh) = (0x02, 0x10, 0x08);
    let n1 = c2s.len() as u32;
    let frames = [
        frame(c, s, 40000, 80, 1000, 0, syn, b""),
        frame(s, c, 80, 40000, 5000, 1001, syn | ack, b""),
        frame(c, s, 40000, 80, 1001, 5001, ack, b""),
        frame(c, s, 40000, 80, 1001, 5001, psh | ack, c2s),
        frame(s, c, 80, 40000, 5001, 1001 + n1, psh | ack, s2c),
    ];
    let mut out = Vec::new();
    for v in [0xa1b2c3d4u32.to_le_bytes().to_vec(), 2u16.to_le_bytes().to_vec(), 4u16.to_le_bytes().to_vec()] {
        out.extend(v);
    }
    out.extend([0u8; 8]);
    out.extend(65535u32.to_le_bytes());
    out.extend(1u32.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        out.extend(1_700_000_000u32.to_le_bytes());
        out.extend((i as u32 * 1000).to_le_bytes());
        out.extend((f.len() as u32).to_le_bytes());
        out.extend((f.len() as u32).to_le_bytes());
        out.extend(f);
    }
    fs::write(path, out).unwrap();
}

#[test]
fn capture_content_is_escaped_in_the_html() {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("markup.pcap");
    write_markup_capture(
        &cap,
        b"GET /<script>alert(1)</script> HTTP/1.1\r\n\r\n",
        b"</script><img src=x onerror=alert(1)>",
    );
    let html = dir.path().join("r.html");
    let out = tcpwhy().arg("report").arg(&cap).arg("-o").arg(&html).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = fs::read_to_string(&html).unwrap();
    assert!(text.contains("GET /&lt;script&gt;alert(1)&lt;/script&gt; HTTP/1.1"), "payload preview missing");
    assert!(text.contains("&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"));
    assert!(!text.contains("<img"));
    assert_eq!(text.matches("<script>").count(), 2, "only uPlot and the page script run");
    assert!(text.contains("http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';"));
    for reference in ["src=\"http", "href=\"http", "url(http", "src=\"//", "@import"] {
        assert!(!text.contains(reference), "network reference {reference}");
    }
}

#[test]
fn html_report_embeds_plot_data_for_the_diagnosed_connection() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let out = tcpwhy().arg("report").arg(example()).arg("-o").arg(&html).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = fs::read_to_string(&html).unwrap();
    let start = text.find("<script type=\"application/json\"").expect("a data block");
    let body = &text[text[start..].find('>').unwrap() + start + 1..];
    let json: Value = serde_json::from_str(&body[..body.find("</script>").unwrap()]).unwrap();
    let dirs = json["dirs"].as_array().unwrap();
    assert!(!dirs.is_empty());
    let cols: Vec<&str> = dirs[0]["cols"].as_array().unwrap().iter().map(|c| c[0].as_str().unwrap()).collect();
    for want in ["dt", "ds", "dl", "at", "aa", "aw", "ar", "st", "sl", "sr", "df", "dq", "af"] {
        assert!(cols.contains(&want), "{want} missing from {cols:?}");
    }
    assert!(!dirs[0]["runs"].as_array().unwrap().is_empty(), "limit band runs");
}

#[test]
fn plot_writes_svg_and_png() {
    let dir = tempfile::tempdir().unwrap();
    for kind in ["tsg", "window", "rtt", "rate"] {
        for ext in ["svg", "png"] {
            let p = dir.path().join(format!("{kind}.{ext}"));
            let out = tcpwhy()
                .args(["plot"])
                .arg(example())
                .args(["--conn", "1", "--kind", kind, "-o"])
                .arg(&p)
                .output()
                .unwrap();
            assert!(out.status.success(), "{kind} {ext}: {}", String::from_utf8_lossy(&out.stderr));
            let bytes = fs::read(&p).unwrap();
            if ext == "svg" {
                assert!(String::from_utf8_lossy(&bytes).contains("<svg"));
            } else {
                assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
            }
        }
    }
    let out = tcpwhy().args(["plot"]).arg(example()).args(["--conn", "999", "-o", "x.svg"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn report_without_an_output_is_a_usage_error() {
    let out = tcpwhy().arg("report").arg(example()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("-o report.html"));
}

/// The overview's "Flows compared" section: a two-flow capture of the
/// shared policing lab (two connections policed together at PCIR = 10
/// Mbit/s) gets its group with the shared policer, one stacked band per
/// flow linking to its section, and the policer's rate as a line.
#[test]
fn html_report_stacks_the_flows_of_a_policed_group() {
    let base = std::env::var_os("TCPWHY_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    let cap = base.join("captures/policing-lab").join(
        "C=5-L=2000000-CD1=1000-CD2=1000-ID=0-PCIR=10000000-PBC=1000000-RTT=100-RTTV=0-RTTC=0%-LOSS=0%-TCP=cubic-T=1-CP1=16445-CP2=16446.pcap.xz",
    );
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let out = tcpwhy().arg("report").arg(&cap).arg("-o").arg(&html).arg("--no-progress").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = fs::read_to_string(&html).unwrap();
    let start = text.find("<h2 class=\"section\">Flows compared").expect("the flows section");
    let section = &text[start..start + text[start..].find("</section>").unwrap()];
    assert!(section.contains("shared policer</span>: these"), "{section}");
    let bands: Vec<&str> = section.split("<polygon").skip(1).collect();
    assert!(bands.len() >= 2, "one band per flow: {}", bands.len());
    for b in &bands {
        let conn = b.split("data-conn=\"").nth(1).and_then(|x| x.split('"').next()).expect("band links its connection");
        assert!(text.contains(&format!("id=\"{conn}\"")), "{conn} has a section");
    }
    let line = section.find("class=\"policer-line\"").expect("the policer's rate");
    let title = &section[line..];
    let rate: f64 = title.split("shared policer: ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!((8.0..=11.0).contains(&rate), "policer at {rate} Mbit/s (PCIR 10 Mbit/s)");
}
