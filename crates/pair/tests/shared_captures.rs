//! Pairs of real captures (`../shared/captures/independent/`: each case
//! captured at both ends of a relay that is not tcpwhy's), and the same
//! with artifacts injected into one capture: duplicated frames, frames
//! missing, one direction only. Each must be placed where it happened.

use std::path::{Path, PathBuf};
use tcpwhy_pair::model::{PairReport, PairedConnection, PairedDirection};
use tcpwhy_pair::stream::Spill;
use tcpwhy_pair::{pair_files, PairOptions};
use tcpwhy_wire::{CaptureReader, PcapWriter};

fn shared() -> PathBuf {
    let p = std::env::var_os("TCPWHY_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    assert!(p.join("captures/independent").is_dir(), "shared captures not found at {} (set TCPWHY_SHARED)", p.display());
    p
}

fn case(name: &str) -> [PathBuf; 2] {
    let d = shared().join("captures/independent").join(name);
    [d.join("sender.pcap.xz"), d.join("receiver.pcap.xz")]
}

fn pair(a: &Path, b: &Path) -> PairReport {
    pair_files([a, b], PairOptions::default()).expect("both readable")
}

/// The pair that carried the most data.
fn bulk(r: &PairReport) -> &PairedConnection {
    r.pairs.iter().max_by_key(|p| p.directions.iter().map(|d| d.packets[0] + d.packets[1]).sum::<u64>()).expect("a pair")
}

fn from<'a>(p: &'a PairedConnection, who: &str) -> &'a PairedDirection {
    p.directions.iter().find(|d| d.from == who).expect("direction")
}

fn kinds(p: &PairedConnection) -> Vec<&'static str> {
    p.findings.iter().map(|f| f.kind).collect()
}

/// A copy of `src` keeping the frames `keep` says, each `times` times.
fn rewrite(src: &Path, dst: &Path, mut keep: impl FnMut(u64, &[u8]) -> usize) {
    let reader = CaptureReader::open(src).unwrap();
    let mut w = None;
    reader.for_each_frame(|f| {
        let w = w.get_or_insert_with(|| {
            let out = std::io::BufWriter::new(std::fs::File::create(dst).unwrap());
            PcapWriter::new(out, f.link, 65535).unwrap()
        });
        for _ in 0..keep(f.number, f.data) {
            w.write_packet(f.time_ns, f.orig_len, f.data).unwrap();
        }
    });
}

#[test]
fn random_loss_is_placed_between_the_points_at_the_configured_rate() {
    let [s, r] = case("random-loss");
    let rep = pair(&s, &r);
    assert_eq!(rep.unmatched, [0, 0]);
    let p = bulk(&rep);
    assert_eq!(p.client_capture, 0, "the sender's capture is on the client's side");
    let l = &from(p, "client").loss;
    // 0.5% configured on the data direction, between the two captures
    let share = l.between as f64 / l.segments as f64;
    assert!((0.002..0.012).contains(&share), "{l:?}");
    assert_eq!((l.before_upstream, l.after_downstream, l.not_captured_downstream), (0, 0, 0), "{l:?}");
    assert!(kinds(p).contains(&"loss_between"));
    // one machine's clock at both ends: the bounds hold 0, and are as wide
    // as the round trip between the points (60 ms)
    let [lo, hi] = rep.clock.offset_ms.expect("bounded");
    assert!(lo <= 0.0 && 0.0 <= hi && (55.0..65.0).contains(&(hi - lo)), "{lo} {hi}");
}

#[test]
fn frames_a_capture_dropped_are_not_network_loss() {
    let [s, r] = case("capture-drops");
    let p0 = pair(&s, &r);
    let p = bulk(&p0);
    let l = &from(p, "client").loss;
    assert_eq!(l.between + l.after_downstream + l.before_upstream, 0, "{l:?}");
    assert!(l.not_captured_upstream > 100 && l.not_captured_downstream > 100, "{l:?}");
    assert!(kinds(p).iter().all(|k| *k == "capture_missed"), "{:?}", kinds(p));
    // the delay between the points did not grow: no queue, no drain rate
    assert_eq!(from(p, "client").delay.as_ref().and_then(|x| x.drain_rate_bps), None);
}

#[test]
fn an_rtt_jump_is_a_delay_step_between_the_points_not_a_queue() {
    let [s, r] = case("rtt-jump");
    let p0 = pair(&s, &r);
    let p = bulk(&p0);
    let steps: Vec<_> = p.findings.iter().filter(|f| f.kind == "delay_step_between").collect();
    assert_eq!(steps.len(), 2, "{:?}", p.findings);
    // the relay added 160 ms each way after the handshake
    assert!(steps.iter().all(|f| (150.0..175.0).contains(&f.value.unwrap())), "{steps:?}");
    assert!(!kinds(p).contains(&"queue_between"));
    // no queue, so no drain rate: the gaps downstream are the sender's own,
    // and no capture's what-if may take them for the path's capacity
    for d in &p.directions {
        assert_eq!(d.delay.as_ref().and_then(|x| x.drain_rate_bps), None, "{}: {:?}", d.from, d.delay);
    }
}

#[test]
fn captures_of_different_transfers_pair_nothing() {
    let [s, _] = case("random-loss");
    let [_, r] = case("capture-drops");
    let rep = pair(&s, &r);
    assert!(rep.pairs.is_empty(), "{:?}", rep.pairs.iter().map(|p| &p.evidence).collect::<Vec<_>>());
    assert!(rep.messages[0].contains("no connection of the first capture"), "{:?}", rep.messages);
}

#[test]
fn artifacts_injected_into_one_capture_are_told_from_the_network() {
    let [s, r] = case("random-loss");
    let tmp = std::env::temp_dir().join(format!("tcpwhy-pair-test-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let clean = bulk(&pair(&s, &r)).clone();
    let base = from(&clean, "client").loss.clone();

    // every 40th frame of the receiver's capture missing: capture drops there
    let missing = tmp.join("missing.pcap");
    rewrite(&r, &missing, |n, _| usize::from(n % 40 != 0));
    let rep = pair(&s, &missing);
    let l = &from(bulk(&rep), "client").loss;
    assert_eq!(l.between, base.between, "{l:?}");
    assert!(l.not_captured_downstream > 30, "{l:?}");

    // every frame of the sender's capture twice: nothing changes but the
    // copies' count
    let doubled = tmp.join("doubled.pcap");
    rewrite(&s, &doubled, |_, _| 2);
    let rep = pair(&doubled, &r);
    let l = &from(bulk(&rep), "client").loss;
    assert_eq!((l.between, l.after_downstream), (base.between, 0), "{l:?}");

    // the sender's capture of its own packets only (tcpdump -Q out): the
    // data's losses are still placed, and nothing of the ACKs is invented
    let one_way = tmp.join("one-way.pcap");
    rewrite(&s, &one_way, |_, d| {
        // IPv4 source address 10.199.0.1 on Ethernet or Linux cooked capture
        usize::from(d.windows(4).take(40).any(|w| w == [10, 199, 0, 1]) && !d.windows(8).take(40).any(|w| w == [10, 199, 0, 2, 10, 199, 0, 1]))
    });
    let rep = pair(&one_way, &r);
    let p = bulk(&rep);
    let l = &from(p, "client").loss;
    assert_eq!(l.between, base.between, "{l:?}");
    assert_eq!(from(p, "server").paired, 0);
    std::fs::remove_dir_all(&tmp).ok();
}

/// The command line pairs from `diagnose`'s own read of each capture
/// (`pair_analyses`): the same report as reading them afresh.
#[test]
fn pairing_from_the_diagnosis_read_equals_a_fresh_read() {
    for name in ["random-loss", "capture-drops", "rtt-jump"] {
        let [s, r] = case(name);
        let analyses = [&s, &r].map(|p| {
            tcpwhy_flow::analyze_capture(CaptureReader::open(p).unwrap(), Default::default(), &mut (), |_| {})
        });
        let a = tcpwhy_pair::pair_analyses([&s, &r], [&analyses[0], &analyses[1]], PairOptions::default()).unwrap();
        let b = pair(&s, &r);
        let j = |x: &PairReport| serde_json::to_value(x).unwrap();
        assert_eq!(j(&a), j(&b), "{name}");
        // and from the records spilled during that read (no second read)
        let mut spills = [Spill::new().unwrap(), Spill::new().unwrap()];
        let analyses = [0, 1].map(|i| {
            let p = [&s, &r][i];
            tcpwhy_flow::analyze_capture(CaptureReader::open(p).unwrap(), Default::default(), &mut spills[i], |_| {})
        });
        let c = tcpwhy_pair::pair_spilled([&s, &r], [&analyses[0], &analyses[1]], spills, PairOptions::default()).unwrap();
        assert_eq!(j(&c), j(&b), "{name}, spilled");
        assert!(!c.pairs.is_empty(), "{name}");
    }
}
