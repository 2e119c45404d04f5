//! Capture quality first: the shared captures with the artifacts of real
//! capture setups injected (every frame duplicated, 3% of frames dropped by
//! the capture, one direction removed, a snaplen of 54 bytes, the clock
//! stepping back, the handshakes not captured) keep the clean
//! capture's verdict, or say why not; none of them gets a `high` verdict the
//! clean capture does not give.
//!
//! Variants are made with Wireshark's editcap, mergecap and tshark
//! (installed by ./run-tests), from captures this project did not make.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn shared(name: &str) -> PathBuf {
    let base = std::env::var_os("TCPWHY_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    base.join("captures").join(name)
}

/// A plain pcap of a shared capture: xz-compressed ones (which tshark does
/// not read) are unpacked into `dir` first.
fn unpacked(src: &Path, dir: &Path) -> PathBuf {
    if src.extension().is_none_or(|e| e != "xz") {
        return src.to_owned();
    }
    let out = dir.join("unpacked.pcap");
    let data = Command::new("xz").arg("-dc").arg(src).output().expect("xz (./run-tests installs it)");
    assert!(data.status.success(), "xz -dc {}", src.display());
    std::fs::write(&out, data.stdout).unwrap();
    out
}

fn tool(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e} (./run-tests installs it)", args[0]));
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn diagnose(p: &Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_tcpwhy")).args(["diagnose", "--json", "--no-progress"]).arg(p).output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// (connection, from, primary, confidence) of every direction over 100 kB.
fn verdicts(v: &Value) -> Vec<(u64, String, String, String)> {
    let mut out = Vec::new();
    for c in v["connections"].as_array().unwrap() {
        for d in c["directions"].as_array().unwrap() {
            if d["bytes"].as_u64().unwrap() > 100_000 {
                out.push((
                    c["id"]["number"].as_u64().unwrap(),
                    d["from"].as_str().unwrap().to_string(),
                    d["primary"].as_str().unwrap().to_string(),
                    d["confidence"].as_str().unwrap().to_string(),
                ));
            }
        }
    }
    out
}

fn quality_kinds(v: &Value) -> Vec<String> {
    v["connections"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["capture_quality"].as_array().unwrap().iter().map(|q| q["kind"].as_str().unwrap().to_string()))
        .collect()
}

/// The data sender's address of the largest direction.
fn sender_addr(v: &Value) -> String {
    let c = &v["connections"].as_array().unwrap().iter().find(|c| !c["directions"].as_array().unwrap().is_empty()).unwrap();
    let s = c["directions"][0]["sender"].as_str().unwrap();
    s.rsplit_once(':').unwrap().0.trim_matches(['[', ']']).to_string()
}

struct Variants {
    clean: PathBuf,
    dup: PathBuf,
    drop3: PathBuf,
    snap54: PathBuf,
    data_only: PathBuf,
    acks_only: PathBuf,
    clock_step: PathBuf,
    merged: PathBuf,
    reordered: PathBuf,
    no_syns: PathBuf,
}

fn make_variants(src: &Path, dir: &Path, sender: impl FnOnce(&Path) -> String) -> Variants {
    let p = |s: &str| dir.join(s);
    let v = Variants {
        clean: p("clean.pcap"),
        dup: p("dup.pcap"),
        drop3: p("drop3.pcap"),
        snap54: p("snap54.pcap"),
        data_only: p("data.pcap"),
        acks_only: p("acks.pcap"),
        clock_step: p("step.pcap"),
        merged: p("merged.pcap"),
        reordered: p("reordered.pcap"),
        no_syns: p("nosyns.pcap"),
    };
    let s = |x: &PathBuf| x.to_str().unwrap().to_string();
    let src = unpacked(src, dir);
    tool(&["tshark", "-r", src.to_str().unwrap(), "-F", "pcap", "-w", &s(&v.clean)]);
    // A mirror port or `-i any` over a bridge: every frame again, 4 µs later.
    tool(&["editcap", "-t", "0.000004", &s(&v.clean), &s(&p("shifted.pcap"))]);
    tool(&["mergecap", "-F", "pcap", "-w", &s(&v.dup), &s(&v.clean), &s(&p("shifted.pcap"))]);
    // Captures from two points 30 ms apart on the path, merged: every frame
    // again, 30 ms (hundreds of frames) later.
    tool(&["editcap", "-t", "0.03", &s(&v.clean), &s(&p("later.pcap"))]);
    tool(&["mergecap", "-F", "pcap", "-w", &s(&v.merged), &s(&v.clean), &s(&p("later.pcap"))]);
    // The capture drops one frame in 33 (3%).
    tool(&["tshark", "-r", &s(&v.clean), "-F", "pcap", "-w", &s(&v.drop3), "-Y", "frame.number % 33 != 0"]);
    tool(&["editcap", "-s", "54", &s(&v.clean), &s(&v.snap54)]);
    // The capture clock steps back 0.5 s after frame 200 (NTP, or merged files).
    tool(&["editcap", "-r", &s(&v.clean), &s(&p("head.pcap")), "1-200"]);
    tool(&["editcap", "-r", &s(&v.clean), &s(&p("tail.pcap")), "201-100000000"]);
    tool(&["editcap", "-t", "-0.5", &s(&p("tail.pcap")), &s(&p("tail-early.pcap"))]);
    tool(&["mergecap", "-a", "-F", "pcap", "-w", &s(&v.clock_step), &s(&p("head.pcap")), &s(&p("tail-early.pcap"))]);
    // Frames the capture itself reordered (a multi-queue NIC, `-i any`):
    // one frame in 50 swapped with the next.
    swap_neighbours(&v.clean, &v.reordered, 50);
    // The capture began after the connections opened: no SYN, no SYN-ACK,
    // so no window scale and no MSS option.
    tool(&["tshark", "-r", &s(&v.clean), "-F", "pcap", "-w", &s(&v.no_syns), "-Y", "!(tcp.flags.syn == 1)"]);
    let addr = sender(&v.clean);
    let from = if addr.contains(':') { format!("ipv6.src=={addr}") } else { format!("ip.src=={addr}") };
    tool(&["tshark", "-r", &s(&v.clean), "-F", "pcap", "-w", &s(&v.data_only), "-Y", &from]);
    tool(&["tshark", "-r", &s(&v.clean), "-F", "pcap", "-w", &s(&v.acks_only), "-Y", &format!("!({from})")]);
    v
}

/// Writes `src` (classic pcap) with frame `k * every + every / 2` swapped
/// with the frame after it, for every `k`.
fn swap_neighbours(src: &Path, dst: &Path, every: usize) {
    let data = std::fs::read(src).unwrap();
    let le = data[..4] == [0xd4, 0xc3, 0xb2, 0xa1] || data[..4] == [0x4d, 0x3c, 0xb2, 0xa1];
    let word = |b: &[u8]| {
        let w = [b[0], b[1], b[2], b[3]];
        (if le { u32::from_le_bytes(w) } else { u32::from_be_bytes(w) }) as usize
    };
    let mut records = Vec::new();
    let mut at = 24;
    while at + 16 <= data.len() {
        let end = at + 16 + word(&data[at + 8..at + 12]);
        records.push(at..end.min(data.len()));
        at = end;
    }
    for i in (every / 2..records.len().saturating_sub(1)).step_by(every) {
        records.swap(i, i + 1);
    }
    let mut out = data[..24].to_vec();
    for r in records {
        out.extend_from_slice(&data[r]);
    }
    std::fs::write(dst, out).unwrap();
}

const CAPTURES: &[&str] = &[
    "public/m-lab-etl__ndt-m6znc_1632401351_000000000005B90B.pcap.gz",
    "public/m-lab-etl__ndt-m6znc_1632401351_000000000005BA77.pcap.gz",
    "public/m-lab-etl__ndt-nnwk2_1611335823_00000000000C2DA9.pcap.gz",
    "public/m-lab-etl__ndt-nnwk2_1611335823_00000000000C2E15.pcap.gz",
    "public/tcptrace__dlt_null.dmp.gz",
    "public/tcptrace__zwnd.dmp.gz",
    "public/zeek__irc-dcc-send.pcapng",
    // a policer at 3 Mbit/s with a 1 MB bucket (`policer`, high), and one
    // at 10 Mbit/s whose 8,000-byte bucket is smaller than the bursts
    // (`policer`, medium, from the spacing of the losses and the packet
    // pairs: frames the capture missed once measured an RTT of 9 us and
    // made every loss look queued)
    "policing-lab/C=5-L=2000000-CD=1000-PCIR=3000000-PBC=1000000-RTT=100-RTTV=0-RTTC=0%-LOSS=0%-TCP=cubic-T=1-CP=10053.pcap.xz",
    "policing-lab/C=5-L=2000000-CD=1000-PCIR=10000000-PBC=8000-RTT=100-RTTV=0-RTTC=0%-LOSS=0%-TCP=cubic-T=1-CP=10056.pcap.xz",
];

#[test]
fn injected_capture_artifacts_keep_the_verdict_or_say_why() {
    for name in CAPTURES {
        let dir = tempfile::tempdir().unwrap();
        let v = make_variants(&shared(name), dir.path(), |clean| sender_addr(&diagnose(clean)));
        let clean = diagnose(&v.clean);
        let want = verdicts(&clean);
        assert!(!want.is_empty(), "{name}: no verdict on the clean capture");

        // Every frame twice: the copies are found and removed; the same
        // verdicts, the same confidence.
        let dup = diagnose(&v.dup);
        assert_eq!(verdicts(&dup), want, "{name}: duplicated frames changed the verdict");
        assert!(quality_kinds(&dup).contains(&"duplicate_frames".to_string()), "{name}");

        // Two capture points merged: with IPv4 IDs the copies are found
        // however far apart; the same verdicts.
        let merged = diagnose(&v.merged);
        if quality_kinds(&merged).contains(&"duplicate_frames".to_string()) {
            assert_eq!(verdicts(&merged), want, "{name}: merged capture points changed the verdict");
        } else {
            eprintln!("{name}: no IPv4 IDs: copies from a second capture point are not told from retransmissions: {:?}", verdicts(&merged));
        }

        // 3% of the frames missing from the capture: the same primaries; the
        // capture's gaps are told apart from loss in the network.
        let drop3 = diagnose(&v.drop3);
        let got = verdicts(&drop3);
        assert_eq!(
            got.iter().map(|x| (x.0, &x.1, &x.2)).collect::<Vec<_>>(),
            want.iter().map(|x| (x.0, &x.1, &x.2)).collect::<Vec<_>>(),
            "{name}: frames missing from the capture changed the verdict"
        );
        assert!(quality_kinds(&drop3).contains(&"frames_missing_from_capture".to_string()), "{name}");

        // Only the data direction: nothing can be judged.
        let data = diagnose(&v.data_only);
        for (n, from, primary, conf) in verdicts(&data) {
            assert_eq!((primary.as_str(), conf.as_str()), ("undetermined", "low"), "{name}: c{n}{from} from data only");
        }
        assert!(quality_kinds(&data).contains(&"one_direction_data_only".to_string()), "{name}");

        // Only the ACKs: the data direction is said to be missing.
        let acks = diagnose(&v.acks_only);
        assert!(verdicts(&acks).is_empty(), "{name}: a verdict from ACKs only");
        assert!(quality_kinds(&acks).contains(&"one_direction_acks_only".to_string()), "{name}: {:?}", quality_kinds(&acks));

        // The clock stepped back: found and said; the same verdict, or one
        // that rests on the RTT and is then not `high`.
        let step = diagnose(&v.clock_step);
        assert!(quality_kinds(&step).contains(&"clock_steps_back".to_string()), "{name}: {:?}", quality_kinds(&step));
        for got in verdicts(&step) {
            let same = want.iter().any(|w| (w.0, &w.1, &w.2) == (got.0, &got.1, &got.2));
            assert!(same || got.3 != "high", "{name}: a clock step gave {got:?} against {want:?} without saying why");
        }

        // One frame in 50 written out of order by the capture: the same
        // primaries (an ACK captured before the data it covers is no
        // spurious retransmission, a hole a reordered segment fills no
        // loss); the time running backwards is said, and a verdict resting
        // on the RTT may then be less than `high`.
        let reordered = diagnose(&v.reordered);
        let got = verdicts(&reordered);
        assert_eq!(
            got.iter().map(|x| (x.0, &x.1, &x.2)).collect::<Vec<_>>(),
            want.iter().map(|x| (x.0, &x.1, &x.2)).collect::<Vec<_>>(),
            "{name}: frames the capture reordered changed the verdict"
        );
        let said = quality_kinds(&reordered).contains(&"clock_steps_back".to_string());
        for (g, w) in got.iter().zip(&want) {
            assert!(g.3 == w.3 || (said && w.3 == "high"), "{name}: reordered frames changed {w:?} to {g:?} without saying why");
        }

        // The handshakes before the capture began: the receiver's window
        // scale is unknown, so its raw windows (up to 2^14 times too small)
        // must not read as a window limit. The same verdict, or
        // `undetermined`, or a verdict below `high` with the missing
        // handshake said; a window verdict only where the clean capture
        // gives it.
        let mid = diagnose(&v.no_syns);
        let kinds = quality_kinds(&mid);
        assert!(kinds.contains(&"handshake_not_captured".to_string()), "{name}: {kinds:?}");
        for got in verdicts(&mid) {
            let same = want.iter().any(|w| (&w.1, &w.2) == (&got.1, &got.2));
            assert!(same || got.2 == "undetermined" || got.3 != "high", "{name}: without the handshakes {got:?} against {want:?}");
            assert!(
                same || !matches!(got.2.as_str(), "receiver_window" | "window_scaling_off"),
                "{name}: without the handshakes the raw windows gave {got:?} against {want:?}"
            );
        }

        // Snaplen 54: the same verdict, or `undetermined`, or a lowered
        // confidence with the cut options named; never a new `high` verdict.
        let snap = diagnose(&v.snap54);
        let kinds = quality_kinds(&snap);
        for got in verdicts(&snap) {
            let same = want.iter().any(|w| (w.0, &w.1, &w.2) == (got.0, &got.1, &got.2));
            if !same {
                assert!(
                    got.2 == "undetermined" || (got.3 != "high" && kinds.contains(&"options_cut_by_snaplen".to_string())),
                    "{name}: snaplen 54 gave {got:?} against {want:?} without saying why"
                );
            }
        }
    }
}

/// A pcapng interface statistics block (ISB) for interface 0 with an
/// `isb_ifdrop` counter, as dumpcap writes at the end of a capture.
fn isb_with_ifdrop(drops: u64) -> Vec<u8> {
    let mut opts = Vec::new();
    opts.extend_from_slice(&5u16.to_le_bytes()); // isb_ifdrop
    opts.extend_from_slice(&8u16.to_le_bytes());
    opts.extend_from_slice(&drops.to_le_bytes());
    opts.extend_from_slice(&[0, 0, 0, 0]); // opt_endofopt
    let len = (4 + 4 + 4 + 8 + opts.len() + 4) as u32;
    let mut b = Vec::new();
    b.extend_from_slice(&5u32.to_le_bytes());
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&[0; 8]); // timestamp
    b.extend_from_slice(&opts);
    b.extend_from_slice(&len.to_le_bytes());
    b
}

/// Packets the capture itself dropped (pcapng interface statistics) are
/// counted, reported per file, and keep loss-based verdicts from `high`;
/// the same file without the counter keeps its verdict.
#[test]
fn interface_drop_counters_weaken_loss_verdicts() {
    // 2% random loss on the path, diagnosed random_loss (high) from the sender
    let lab = shared("policing-lab");
    let src = std::fs::read_dir(&lab)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().contains("LOSS=2%"))
        .min()
        .expect("a policing-lab capture with 2% random loss");
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("clean.pcap");
    let out = Command::new("xz").args(["-dc"]).arg(&src).output().unwrap();
    std::fs::write(&pcap, out.stdout).unwrap();
    let ng = dir.path().join("clean.pcapng");
    tool(&["editcap", "-F", "pcapng", pcap.to_str().unwrap(), ng.to_str().unwrap()]);
    let clean = diagnose(&ng);
    assert!(verdicts(&clean).iter().any(|v| v.2 == "random_loss" && v.3 == "high"), "{:?}", verdicts(&clean));
    assert_eq!(clean["files"][0]["interface_drops"], Value::Null);

    let mut bytes = std::fs::read(&ng).unwrap();
    bytes.extend(isb_with_ifdrop(37));
    let dropped = dir.path().join("dropped.pcapng");
    std::fs::write(&dropped, bytes).unwrap();
    let v = diagnose(&dropped);
    assert_eq!(v["files"][0]["interface_drops"], 37);
    assert!(v["files"][0]["capture_warnings"][0].as_str().unwrap().contains("dropped 37 packets"));
    assert!(quality_kinds(&v).contains(&"capture_dropped_packets".to_string()));
    for (c, from, primary, conf) in verdicts(&v) {
        let was = verdicts(&clean).into_iter().find(|x| x.0 == c && x.1 == from).unwrap();
        assert_eq!(primary, was.2, "the verdict itself stays");
        if primary == "random_loss" {
            assert_eq!(conf, "medium", "a loss verdict cannot be high when the capture dropped packets");
        }
    }
}
