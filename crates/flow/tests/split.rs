//! A split in time: a capture cut in two at a record boundary, the second
//! stretch analysed from the state the first ends in with its counts
//! restarted (`Connection::restart_counts`), then joined to the first
//! (`Connection::join`), gives exactly the summaries of one pass. Run on
//! every shared capture, cut at several points, throughput and goodput
//! series included.

use std::collections::BTreeMap;
use std::path::PathBuf;
use tcpwhy_flow::{Connection, ConnectionSummary};
use tcpwhy_wire::{decode_frame, Addr, CaptureReader, LinkType};

fn shared() -> PathBuf {
    std::env::var_os("TCPWHY_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"))
}

fn captures(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("shared captures") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            captures(&p, out);
        } else if p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
            let n = n.trim_end_matches(".gz").trim_end_matches(".xz");
            n.ends_with(".pcap") || n.ends_with(".pcapng") || n.ends_with(".cap")
        }) {
            out.push(p);
        }
    }
}

struct Owned {
    number: u64,
    time_ns: i64,
    link: LinkType,
    data: Vec<u8>,
    orig_len: u32,
}

type Key = ((Addr, u16), (Addr, u16));
/// Connections by tuple; a tuple keeps one connection (enough here: both
/// runs see the same segments on it).
type Conns = BTreeMap<Key, Connection>;

fn feed(conns: &mut Conns, f: &Owned) {
    let Ok(seg) = decode_frame(f.link, &f.data, f.orig_len) else { return };
    let (x, y) = ((seg.src, seg.src_port), (seg.dst, seg.dst_port));
    let k = if x <= y { (x, y) } else { (y, x) };
    let next = conns.len() as u64 + 1;
    let c = conns.entry(k).or_insert_with(|| Connection::new(next, x, y, f.time_ns, f.number));
    let d = if c.endpoints[0] == x { 0 } else { 1 };
    c.process(&seg, f.number, f.time_ns, d);
}

fn summaries(conns: &Conns) -> Vec<String> {
    conns
        .values()
        .map(|c| serde_json::to_string(&ConnectionSummary::from_connection(c, true)).expect("json"))
        .collect()
}

#[test]
fn split_in_time_joins_to_one_pass() {
    let mut files = Vec::new();
    captures(&shared().join("captures"), &mut files);
    files.sort();
    assert!(files.len() > 20, "shared captures missing: {}", files.len());
    let mut cuts = 0;
    for path in &files {
        let Ok(reader) = CaptureReader::open(path) else { continue };
        let mut frames = Vec::new();
        reader.for_each_frame(|f| {
            frames.push(Owned { number: f.number, time_ns: f.time_ns, link: f.link, data: f.data.to_vec(), orig_len: f.orig_len })
        });
        let mut whole = Conns::new();
        for f in &frames {
            feed(&mut whole, f);
        }
        let expected = summaries(&whole);
        let n = frames.len();
        let mut points: Vec<usize> = vec![1, n / 7, n / 3, n / 2, 2 * n / 3, n.saturating_sub(1)];
        points.retain(|&m| m > 0 && m < n);
        points.dedup();
        for m in points {
            let mut first = Conns::new();
            for f in &frames[..m] {
                feed(&mut first, f);
            }
            let mut second = first.clone();
            for c in second.values_mut() {
                c.restart_counts();
            }
            for f in &frames[m..] {
                feed(&mut second, f);
            }
            for (k, c) in second.iter_mut() {
                if let Some(e) = first.get(k) {
                    c.join(e);
                }
            }
            let got = summaries(&second);
            assert_eq!(got.len(), expected.len(), "{} cut at frame {m}", path.display());
            for (g, e) in got.iter().zip(&expected) {
                assert_eq!(g, e, "{} cut at frame {m}", path.display());
            }
            cuts += 1;
        }
    }
    assert!(cuts > 100, "only {cuts} cuts");
}
