//! Every shared capture is diagnosed without panicking, and the largest data
//! direction of each gets a primary an engineer would accept from the
//! evidence documented in the captures' SOURCES.md.

use std::path::{Path, PathBuf};
use tcpwhy_core::Cause;
use tcpwhy_diagnose::{diagnose_all, DirectionDiagnosis, Options, Recorder};
use tcpwhy_flow::analyze_capture;
use tcpwhy_wire::CaptureReader;

fn shared() -> PathBuf {
    let p = std::env::var_os("TCPWHY_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    assert!(p.join("captures/public").is_dir(), "shared captures not found at {} (set TCPWHY_SHARED)", p.display());
    p
}

fn directions(path: &Path) -> Vec<DirectionDiagnosis> {
    let reader = CaptureReader::open(path).expect("readable");
    let mut rec = Recorder::default();
    let a = analyze_capture(reader, Default::default(), &mut rec, |_| {});
    let mut v: Vec<DirectionDiagnosis> =
        diagnose_all(&a, &rec, &Options::default()).into_iter().flat_map(|c| c.directions).collect();
    v.sort_by_key(|d| std::cmp::Reverse(d.bytes));
    v
}

/// What a public capture must and must never be called, with the reason
/// from its SOURCES.md (TShark and tcpdump figures, the handshake options).
struct Expect {
    /// A part of the file name.
    file: &'static str,
    /// Acceptable primaries of the largest direction (empty: none diagnosed).
    accept: &'static [Cause],
    /// Primaries no direction may get, whatever its confidence.
    never: &'static [Cause],
    why: &'static str,
}

/// Loss-based verdicts, wrong on a capture without retransmissions.
const LOSS: &[Cause] = &[Cause::RandomLoss, Cause::CongestionLoss, Cause::Policer, Cause::SpuriousRetransmission];

const EXPECT: &[Expect] = &[
    Expect {
        file: "00000000000C2DA9",
        accept: &[Cause::ReceiverApplication],
        never: &[Cause::RandomLoss, Cause::CongestionLoss, Cause::Policer, Cause::SpuriousRetransmission, Cause::WindowScalingOff],
        why: "122 zero windows from the client, 641 window-full, no retransmission; wscale 9/7 negotiated",
    },
    Expect {
        file: "00000000000C2E15",
        accept: &[Cause::ReceiverWindow],
        never: &[Cause::WindowScalingOff, Cause::Policer],
        why: "the client offers a shift of only 2: its window tops out at 261 KB (42 window-full); scaling is negotiated",
    },
    Expect {
        file: "000000000005BA77",
        accept: &[Cause::RandomLoss, Cause::CongestionLoss, Cause::Policer, Cause::BottleneckLink],
        never: &[Cause::WindowScalingOff, Cause::ReceiverWindow],
        why: "221 retransmissions, 18,934 duplicate ACKs at 178 Mbit/s; wscale 6/7 negotiated",
    },
    Expect {
        file: "000000000005B90B",
        accept: &[Cause::SendBuffer, Cause::SenderApplication, Cause::BottleneckLink, Cause::Undetermined],
        never: &[Cause::RandomLoss, Cause::CongestionLoss, Cause::Policer, Cause::SpuriousRetransmission, Cause::WindowScalingOff],
        why: "clean baseline captured at the receiver: no retransmission, no duplicate ACK, no zero window; flat at 94 Mbit/s",
    },
    Expect {
        file: "mime-stream-depth",
        accept: &[Cause::ReceiverApplication],
        never: LOSS,
        why: "the server's SYN-ACK has no window-scale option (579 window-full at 111 ms), but the 64 KiB window held 7% of the time and the server's reader, its window closed 0.55 s, 21%: the reader's fix wins back the most (70% is the client waiting on the server's SMTP replies)",
    },
    Expect {
        file: "http-mime-truncated",
        accept: &[Cause::WindowScalingOff],
        never: LOSS,
        why: "the server offers no window scale; 9 zero windows from the client",
    },
    Expect {
        file: "dlt_null",
        accept: &[Cause::ReceiverWindow],
        never: &[Cause::WindowScalingOff, Cause::RandomLoss, Cause::CongestionLoss, Cause::Policer],
        why: "a 16 KB window at 36 ms (204 window-full); scaling was negotiated with a shift of 0, which is not scaling off",
    },
    Expect {
        file: "zwnd",
        accept: &[Cause::ReceiverApplication],
        never: &[Cause::RandomLoss, Cause::CongestionLoss, Cause::Policer],
        why: "7 zero windows from the receiver and zero-window probes",
    },
    Expect {
        file: "decode-sll2-02",
        accept: &[Cause::SenderApplication, Cause::None, Cause::SlowStart],
        never: &[Cause::WindowScalingOff, Cause::Policer, Cause::RandomLoss, Cause::CongestionLoss],
        why: "one 2.6 MB HTTP download on a LAN in 20 ms, wscale 7/7",
    },
    Expect {
        file: "filecontainer-smb",
        accept: &[Cause::SlowStart, Cause::None, Cause::SenderApplication],
        never: &[Cause::Policer, Cause::Shaper, Cause::BottleneckLink, Cause::RandomLoss, Cause::CongestionLoss],
        why: "a negative control: an SMB session idle for up to 40 s between requests",
    },
    Expect {
        file: "206_example_b",
        accept: &[Cause::RandomLoss, Cause::CongestionLoss, Cause::ReceiverWindow, Cause::SenderApplication],
        never: &[Cause::Policer],
        why: "two range downloads, one request each: the 1 MB one has 56 retransmissions (13% of the segments) with \
              retransmission timeouts idling 96% of the time (no request between its bursts, so not a slow start per \
              response); the 214 KB one is short enough to spend its time in slow start; 57 zero windows, no window \
              scaling on either side",
    },
    Expect {
        file: "irc-dcc-send",
        accept: &[Cause::None, Cause::SenderApplication, Cause::ReceiverWindow],
        never: &[Cause::RandomLoss, Cause::CongestionLoss, Cause::Policer, Cause::SpuriousRetransmission, Cause::WindowScalingOff],
        why: "a clean 1.38 MB DCC transfer on a LAN, no loss, wscale 6/7",
    },
    Expect { file: "tcp_zerowindowrecovery", accept: &[], never: &[], why: "7 frames" },
    Expect { file: "bigtcp-ipv4", accept: &[], never: &[], why: "one frame" },
    Expect { file: "resp_1_benchmark", accept: &[], never: &[], why: "short redis connections" },
];

/// Each end's system where SOURCES.md names it, and what the BBR capture's
/// server runs (M-Lab's ndt7 servers on BBR; its sender side is captured).
#[test]
fn systems_and_the_senders_algorithm_where_the_sources_name_them() {
    use tcpwhy_diagnose::system::System;
    let dir = shared().join("captures/public");
    let open = |part: &str| {
        let path = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).find(|p| p.to_string_lossy().contains(part)).unwrap();
        let reader = CaptureReader::open(&path).expect("readable");
        let mut rec = Recorder::default();
        let a = analyze_capture(reader, Default::default(), &mut rec, |_| {});
        diagnose_all(&a, &rec, &Options::default())
    };
    // (file, system of a, system of b): the M-Lab servers run Linux, the
    // clients SOURCES.md calls Windows-like (SYN window 8192) Windows.
    for (file, a, b) in [
        ("00000000000C2E15", System::Windows, System::Linux),
        ("000000000005BA77", System::Macos, System::Linux),
        ("00000000000C2DA9", System::Linux, System::Linux),
        ("mime-stream-depth", System::Windows, System::Unknown),
        ("http-mime-truncated", System::Windows, System::Unknown),
    ] {
        let conns = open(file);
        let c = conns.iter().max_by_key(|c| c.directions.iter().map(|d| d.bytes).sum::<u64>()).unwrap();
        assert_eq!((c.id.a.system.name, c.id.b.system.name), (a, b), "{file}: {:?} / {:?}", c.id.a.system, c.id.b.system);
    }
    let conns = open("000000000005BA77");
    let d = conns.iter().flat_map(|c| &c.directions).max_by_key(|d| d.bytes).unwrap();
    assert_eq!(d.congestion_control.name, "bbr", "{:?}", d.congestion_control);
}

#[test]
fn every_public_capture_gets_a_sensible_primary() {
    let dir = shared().join("captures/public");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with(".md") {
            continue;
        }
        let dirs = directions(&path);
        for d in &dirs {
            assert!(d.primary.is_primary(), "{name}: {}", d.primary);
            let total: f64 = d.limits.values().sum();
            assert!((total - 1.0).abs() < 1e-6, "{name}: shares sum to {total}");
            assert!(!d.summary.is_empty());
        }
        let e = EXPECT.iter().find(|e| name.contains(e.file)).unwrap_or_else(|| panic!("{name}: no expectation"));
        for d in &dirs {
            assert!(!e.never.contains(&d.primary), "{name}: {} {} is wrong: {}\n{}", d.from, d.primary, e.why, d.summary);
        }
        match dirs.first() {
            None => assert!(e.accept.is_empty(), "{name}: nothing diagnosed, expected one of {:?}", e.accept),
            Some(d) => assert!(e.accept.contains(&d.primary), "{name}: primary {} not in {:?} ({})\n{}", d.primary, e.accept, e.why, d.summary),
        }
        seen += 1;
    }
    assert!(seen >= 15, "only {seen} captures");
}

#[test]
fn policing_lab_directions_never_panic_and_policed_ones_name_the_policer() {
    let dir = shared().join("captures/policing-lab");
    let (mut policed_files, mut named) = (0, 0);
    // Every sender there runs the file name's TCP (all CUBIC, Linux of
    // 2015): the congestion control named from the sender's capture.
    let (mut cc_right, mut cc_wrong, mut cc_wrong_high) = (0, Vec::new(), Vec::new());
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.ends_with(".pcap.xz") {
            continue;
        }
        let dirs = directions(&path);
        let truth = name.split('-').find_map(|f| f.strip_prefix("TCP=")).unwrap_or("cubic");
        for d in dirs.iter().filter(|d| d.bytes >= 500_000) {
            let cc = &d.congestion_control;
            if cc.name == truth {
                cc_right += 1;
            } else if cc.name != "unknown" {
                cc_wrong.push(format!("{name}: {} {:?}: {}", cc.name, cc.confidence, cc.evidence));
                if cc.confidence == Some(tcpwhy_core::Confidence::High) {
                    cc_wrong_high.push(name.clone());
                }
            }
        }
        if name.contains("PCIR=") && !name.contains("XT=1") {
            policed_files += 1;
            if dirs.iter().any(|d| d.primary == Cause::Policer) {
                named += 1;
            }
        }
        if name.contains("SCIR=") || name.contains("LOSS=1%") || name.contains("LOSS=2%") {
            assert!(dirs.iter().all(|d| d.primary != Cause::Policer), "{name}: called policed");
        }
    }
    // Chunk-level accuracy is tests/policing_lab.rs; here, whole flows.
    assert!(named * 2 >= policed_files, "policer named in {named} of {policed_files} policed files");
    // Measured: 122 right, 2 wrong (`bbr` `medium`), none wrong at `high`
    // (before the bucket's rules of docs/diagnose.md, 117 right and 21
    // wrong, 16 of them `high`).
    assert!(cc_wrong_high.is_empty(), "a wrong algorithm at high confidence: {cc_wrong_high:?}\n{cc_wrong:#?}");
    assert!(cc_wrong.len() * 20 <= cc_right, "{cc_right} right, wrong: {cc_wrong:#?}");
}

#[test]
fn kernel_rules_turn_windows_into_buffers() {
    use tcpwhy_diagnose::{buffer_for_window, KernelRule};
    // Case 1: tcp_rmem max 4 MiB with tcp_adv_win_scale=1 gives a 2 MiB window.
    let old = KernelRule::for_version("5.10", None).unwrap();
    assert_eq!(old, KernelRule::AdvWinScale(1));
    assert_eq!(old.window_fraction(), 0.5);
    assert_eq!(KernelRule::for_version("4.9", Some(2)).unwrap().window_fraction(), 0.75);
    assert_eq!(KernelRule::for_version("6.6", Some(2)).unwrap(), KernelRule::ScalingRatio);
    assert!(KernelRule::for_version("x", None).is_none());
    // Case 2: a 6.25 MB BDP needs about 12.5 MB of buffer (the write-up used 13,107,200).
    let b = buffer_for_window(6.25e6, old);
    assert_eq!(b, 12 * 1048576);
    let b = buffer_for_window(6.25e6 * 1.1, old);
    assert_eq!(b, 14 * 1048576);
    // Mathis: 1448 B, 100 ms, 1% loss -> about 1.41 Mbit/s.
    let m = tcpwhy_diagnose::mathis_bps(1448, 0.1, 0.01);
    assert!((m - 1.413e6).abs() < 1e4, "{m}");
}

/// Losses per capture file, as the published detector counted them
/// (anchor-results.csv: file, flow, chunk, direction, data packets,
/// losses, ...): an independent count, not tcpwhy's.
fn anchor_losses(dir: &std::path::Path) -> std::collections::HashMap<String, u64> {
    let mut out = std::collections::HashMap::new();
    for line in std::fs::read_to_string(dir.join("anchor-results.csv")).unwrap().lines() {
        let f: Vec<&str> = line.split(',').collect();
        if let (Some(file), Some(Ok(l))) = (f.first(), f.get(5).map(|v| v.parse::<u64>())) {
            *out.entry(format!("{}.pcap.xz", file.trim_end_matches(".filtered"))).or_default() += l;
        }
    }
    out
}

/// Whole files (issue 17's measure): a policed file (a `PCIR=` in the
/// name and losses on the flows, by the published detector's count) is
/// right when some data direction is `policer`, any other when none is.
/// Files whose names carry `CD1=` hold two flows policed together: a
/// per-flow test sees each at a varying share of the rate, the flow-group
/// test (crate::groups) sees the aggregate. Measured: single flow 16 of
/// 16, two flows 65 of 65, not policed 12 of 12; one policed file without
/// a loss is left out (docs/policing.md).
#[test]
fn policing_lab_files_single_and_multi_flow() {
    let dir = shared().join("captures/policing-lab");
    let losses = anchor_losses(&dir);
    let (mut single, mut multi, mut clean, mut lossless) = ((0, 0), (0, 0), (0, 0), 0);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.ends_with(".pcap.xz") {
            continue;
        }
        let lost = *losses.get(&name).unwrap_or_else(|| panic!("{name} is not in anchor-results.csv"));
        if name.contains("PCIR=") && lost == 0 {
            // a policer that dropped nothing leaves nothing to detect
            lossless += 1;
            continue;
        }
        let named = directions(&path).iter().any(|d| d.primary == Cause::Policer);
        let tally = if !name.contains("PCIR=") {
            &mut clean
        } else if name.contains("CD1=") {
            &mut multi
        } else {
            &mut single
        };
        tally.1 += 1;
        if named == name.contains("PCIR=") {
            tally.0 += 1;
        }
    }
    eprintln!("single flow {single:?}, two flows {multi:?}, not policed {clean:?}, policed without loss {lossless}");
    assert!(multi.1 >= 60 && single.1 >= 15 && clean.1 >= 10, "captures missing: {single:?} {multi:?} {clean:?}");
    assert!(lossless <= 2, "{lossless} policed files without a loss");
    // issue 17's goals: 95% of single-flow files, 90% of two-flow files
    assert!(multi.0 * 10 >= multi.1 * 9, "two-flow files right: {} of {}", multi.0, multi.1);
    assert!(single.0 * 20 >= single.1 * 19, "single-flow files right: {} of {}", single.0, single.1);
    assert_eq!(clean.0, clean.1, "a file without a policer was called policed");
}

/// The policing-lab captures whose name sets `key` (`PBC=`, `PCIR=`): each
/// with its name and that value.
fn policing_files_with(key: &str) -> Vec<(PathBuf, String, f64)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(shared().join("captures/policing-lab")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if let Some(v) = name.split('-').find_map(|f| f.strip_prefix(key)).and_then(|v| v.parse::<f64>().ok()) {
            out.push((path, name, v));
        }
    }
    out
}

/// The bucket's size (issue 39): where the flow's start spends a full
/// bucket, the policer finding's `burst_bytes` is within 25% of the
/// configured one (PBC, bytes on the wire; the finding counts payload).
/// The 2 MB buckets are in: a bucket as deep as the 2 MB chunk passes the
/// first chunk whole, and is read from the flow's start across the idle to
/// the next chunk's first loss (`spent_since_start`).
#[test]
fn policing_lab_buckets_within_a_quarter_of_the_configured_size() {
    let (mut close, mut read, mut off) = (0, 0, Vec::new());
    for (path, name, pbc) in policing_files_with("PBC=") {
        // (cross traffic drains the bucket too: no flow sees it full)
        if name.contains("XT=1") {
            continue;
        }
        // one reading per bucket: the flows of a group share theirs
        let mut seen = Vec::new();
        for d in directions(&path) {
            let Some(burst) = d
                .findings
                .iter()
                .find(|f| f.kind == "policer")
                // (with two flows, each alone saw part of the bucket; the
                // group's reading is the bucket's)
                .filter(|f| !name.contains("CD1=") || f.numbers.get("shared_by_flows").and_then(|n| n.as_u64()).unwrap_or(1) >= 2)
                .and_then(|f| f.numbers.get("burst_bytes"))
                .and_then(|b| b.as_f64())
            else {
                continue;
            };
            if seen.contains(&burst.to_bits()) {
                continue;
            }
            seen.push(burst.to_bits());
            read += 1;
            if (burst - pbc).abs() <= 0.25 * pbc {
                close += 1;
            } else {
                off.push(format!("{name}: {burst} for {pbc}"));
            }
        }
    }
    eprintln!("buckets within 25%: {close} of {read}; off: {off:#?}");
    assert!(read >= 20, "only {read} buckets read");
    assert!(close * 5 >= read * 4, "buckets within 25%: {close} of {read}: {off:#?}");
}

/// The policer's rate where the diagnosis states one (issue 39): within
/// 10% of the configured rate (PCIR) on at least 90% of the policed files,
/// read from the group's finding where flows share the policer, else the
/// largest flow's. A finding that says its rate is not seen (`rate_unseen`:
/// a bucket 1.25 times as fast explains the losses as well,
/// `policer::rate_high`) states a range instead, from what the flow got to
/// `rate_high_bps`, and the configured rate must lie in it (within one
/// step of 1.25); the small-bucket verdict states none. Measured: 56 of 60
/// stated rates within 10%, 16 ranges, each holding the configured rate
/// (with the test before, 59 of 67 stated and 9 unseen: four 8 KB buckets
/// at 1.5 to 10 Mbit/s were stated at under 1 Mbit/s; docs/policing.md).
#[test]
fn policing_lab_rates_stated_within_a_tenth() {
    let (mut close, mut stated, mut unseen, mut off, mut outside) = (0, 0, 0, Vec::new(), Vec::new());
    for (path, name, pcir) in policing_files_with("PCIR=") {
        // (flows sharing it, rate, rate not seen, its high end) of each
        // direction's finding
        let findings: Vec<(f64, f64, bool, Option<f64>)> = directions(&path)
            .iter()
            .filter_map(|d| d.findings.iter().find(|f| f.kind == "policer"))
            .filter_map(|f| {
                let n = |k: &str| f.numbers.get(k).and_then(|n| n.as_f64());
                let unseen = f.numbers.get("rate_unseen").and_then(|u| u.as_bool()) == Some(true);
                Some((n("shared_by_flows").unwrap_or(1.0), n("rate_bps")?, unseen, n("rate_high_bps")))
            })
            .collect();
        // the group's finding (most flows), else the fastest flow's
        let Some(&(_, rate, rate_unseen, high)) = findings.iter().max_by(|a, b| (a.0, a.1).partial_cmp(&(b.0, b.1)).unwrap()) else {
            continue;
        };
        if rate_unseen {
            unseen += 1;
            let high = high.expect("an unseen rate states its high end");
            if !(rate <= pcir && pcir <= high * tcpwhy_diagnose::policer::RATE_SEEN_MAX_SPREAD) {
                outside.push(format!("{name}: {rate:.0} to {high:.0} for {pcir}"));
            }
            continue;
        }
        stated += 1;
        if (rate - pcir).abs() <= 0.1 * pcir {
            close += 1;
        } else {
            off.push(format!("{name}: {rate:.0} for {pcir}"));
        }
    }
    eprintln!("rates within 10%: {close} of {stated} stated; {unseen} not seen; off: {off:#?}; ranges without the rate: {outside:#?}");
    assert!(stated >= 40, "only {stated} rates stated");
    assert!(close * 100 >= stated * 90, "rates within 10%: {close} of {stated}: {off:#?}");
    assert!(outside.is_empty(), "unseen rates whose range leaves the configured one out: {outside:#?}");
}

/// The practice capture of an application that writes 32 KiB every 20 ms
/// over 30 ms (../shared/captures/independent/app-paced, truth.json: the
/// kernel shows app_limited and 912 bytes not sent): the flat flight is
/// the application's clock, not a full send buffer, at the sender; the
/// receiver's `medium` names both; the window-limited run beside it keeps
/// its verdict.
#[test]
fn an_application_on_its_own_clock_is_not_a_full_send_buffer() {
    let dir = shared().join("captures/independent");
    let dirs = directions(&dir.join("app-paced").join("sender.pcap.xz"));
    let d = &dirs[0];
    assert_eq!(d.primary, Cause::SenderApplication, "{}", d.summary);
    assert!(d.findings.iter().any(|f| f.kind == "application_clock"), "{:?}", d.findings);
    assert!(d.time_split.network < 0.2, "{:?}", d.time_split);
    // the receiver cannot time the sender's wake-ups: medium, both named
    let dirs = directions(&dir.join("app-paced").join("receiver.pcap.xz"));
    let d = &dirs[0];
    assert!(matches!(d.primary, Cause::SendBuffer | Cause::SenderApplication), "{}", d.summary);
    assert_eq!(d.confidence, tcpwhy_core::Confidence::Medium, "{}", d.summary);
    assert!(d.to_confirm.iter().any(|t| t.contains("the application")), "{:?}", d.to_confirm);
    for end in ["sender", "receiver"] {
        let dirs = directions(&dir.join("capture-drops").join(format!("{end}.pcap.xz")));
        assert_eq!(dirs[0].primary, Cause::ReceiverWindow, "{end}: {}", dirs[0].summary);
    }
}

/// The practice captures of random loss, an RTT jump and a cached
/// ssthresh (../shared/captures/independent, truth.json), each read as its
/// expert reading from both ends:
/// - 0.5% random loss at 60 ms: cubic's window stays under the path, so
///   the ACK clock's "trains" (the RTT 0.2 ms above its floor) measure the
///   sender, not a link: not `bottleneck_link`;
/// - a SYN answered within a millisecond, data at 320 ms: at the receiver
///   the RTO's copy arrives 210 ms after its in-order original, a timer
///   shorter than the round trip;
/// - a cached ssthresh of 8 behind iperf3's cookie: the rounds after the
///   greeting grow linearly from IW10.
#[test]
fn random_loss_an_rtt_jump_and_a_cached_ssthresh_read_right_from_both_ends() {
    let dir = shared().join("captures/independent");
    for (case, want) in [
        ("random-loss", &[Cause::RandomLoss, Cause::CongestionLoss][..]),
        ("rtt-jump", &[Cause::SpuriousRetransmission][..]),
        ("cached-ssthresh", &[Cause::CachedSsthresh][..]),
    ] {
        for end in ["sender", "receiver"] {
            let dirs = directions(&dir.join(case).join(format!("{end}.pcap.xz")));
            let d = &dirs[0];
            assert!(want.contains(&d.primary), "{case} at the {end}: {:?} {:?}: {}", d.primary, d.confidence, d.summary);
        }
    }
    let dirs = directions(&dir.join("rtt-jump").join("receiver.pcap.xz"));
    let f = dirs[0].findings.iter().find(|f| f.kind == "spurious_retransmissions").expect("the spurious finding");
    assert!(f.text.contains("less than the data's round trip"), "{}", f.text);
}
