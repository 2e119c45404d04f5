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
        diagnose_all(&a.connections, &rec, &Options::default()).into_iter().flat_map(|c| c.directions).collect();
    v.sort_by_key(|d| std::cmp::Reverse(d.bytes));
    v
}

/// (file name part, acceptable primaries of the largest direction; empty: none diagnosed)
const EXPECT: &[(&str, &[Cause])] = &[
    // 122 zero windows, 5.65 s at zero (SOURCES.md): the reader is slow.
    ("00000000000C2DA9", &[Cause::ReceiverApplication]),
    // Window peaks at 255 KiB, window-full most of the time.
    ("00000000000C2E15", &[Cause::ReceiverWindow]),
    // 27% of the data retransmitted on a 160 Mbit/s NDT download.
    ("000000000005BA77", &[Cause::RandomLoss, Cause::CongestionLoss, Cause::Policer, Cause::BottleneckLink]),
    // Captured at the receiver: from there a send buffer and a slow writer look alike.
    ("000000000005B90B", &[Cause::SendBuffer, Cause::SenderApplication, Cause::BottleneckLink]),
    // The server's SYN-ACK carried no window scale; 579 window-full segments.
    ("mime-stream-depth", &[Cause::WindowScalingOff]),
    ("http-mime-truncated", &[Cause::WindowScalingOff]),
    // tcptrace's example: a 16 KiB window at 27 ms.
    ("dlt_null", &[Cause::ReceiverWindow]),
    // tcptrace's zero-window example: 22 s of zero window.
    ("zwnd", &[Cause::ReceiverApplication]),
    // A web page over a LAN: the server sends what it has.
    ("decode-sll2-02", &[Cause::SenderApplication, Cause::None, Cause::SlowStart]),
    // Request/response protocols with long pauses.
    ("filecontainer-smb", &[Cause::SlowStart, Cause::None, Cause::SenderApplication]),
    ("206_example_b", &[Cause::None, Cause::SlowStart, Cause::SenderApplication, Cause::ReceiverWindow]),
    ("irc-dcc-send", &[Cause::None, Cause::SenderApplication, Cause::ReceiverWindow]),
    // Too little data in one direction to diagnose.
    ("tcp_zerowindowrecovery", &[]),
    ("bigtcp-ipv4", &[]),
    ("resp_1_benchmark", &[]),
];

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
        let (_, ok) = EXPECT.iter().find(|(k, _)| name.contains(k)).unwrap_or_else(|| panic!("{name}: no expectation"));
        match dirs.first() {
            None => assert!(ok.is_empty(), "{name}: nothing diagnosed, expected one of {ok:?}"),
            Some(d) => assert!(ok.contains(&d.primary), "{name}: primary {} not in {ok:?}\n{}", d.primary, d.summary),
        }
        seen += 1;
    }
    assert!(seen >= 15, "only {seen} captures");
}

#[test]
fn policing_lab_directions_never_panic_and_policed_ones_name_the_policer() {
    let dir = shared().join("captures/policing-lab");
    let (mut policed_files, mut named) = (0, 0);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.ends_with(".pcap.xz") {
            continue;
        }
        let dirs = directions(&path);
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
