//! The public third-party captures in ../shared/captures/public (see its
//! SOURCES.md): each test states what the capture is known to contain, as
//! SOURCES.md documents it (from TShark and tcpdump), and checks that the
//! rebuilt connections say the same.

use std::path::PathBuf;
use tcpwhy_flow::{
    analyze_capture, AnalyzeOptions, CaptureAnalysis, CapturePoint, ConnectionSummary,
    DirectionSummary,
};
use tcpwhy_wire::{CaptureFormat, CaptureReader};

fn shared() -> PathBuf {
    std::env::var_os("TCPWHY_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"))
}

fn analyze(name: &str) -> CaptureAnalysis {
    let path = shared().join("captures/public").join(name);
    assert!(path.exists(), "missing shared capture {}", path.display());
    let reader = CaptureReader::open(&path).expect("opens");
    analyze_capture(reader, AnalyzeOptions::default(), &mut (), |_| {})
}

fn only(a: &CaptureAnalysis) -> &ConnectionSummary {
    assert_eq!(
        a.connections.len(),
        1,
        "{}: expected one connection",
        a.path
    );
    &a.connections[0]
}

/// The direction carrying most payload.
fn data_dir(c: &ConnectionSummary) -> &DirectionSummary {
    c.directions.iter().max_by_key(|d| d.counts.bytes).unwrap()
}

fn ack_dir(c: &ConnectionSummary) -> &DirectionSummary {
    c.directions.iter().min_by_key(|d| d.counts.bytes).unwrap()
}

#[test]
fn smtp_upload_without_window_scaling_is_window_full_bound() {
    // Windows client uploads 1.79 MB; the server's SYN-ACK has no window-scale
    // option, so its window stays at 64,240 and the client fills it 579 times.
    let a = analyze("suricata-verify__mime-stream-depth__input.pcap");
    let c = only(&a);
    let (up, down) = (data_dir(c), ack_dir(c));
    assert_eq!(up.from, "a");
    assert_eq!(up.counts.bytes, 1_793_113);
    assert_eq!(up.window_scale_offered, Some(true), "client offered wscale");
    assert_eq!(down.window_scale_offered, Some(false), "server did not");
    assert_eq!(up.window_scaling, "not_negotiated");
    assert_eq!(down.window_scaling, "not_negotiated");
    assert_eq!(down.advertised_window.max_bytes, Some(64_240));
    assert_eq!(up.flags.window_full, 579);
    assert_eq!(down.flags.zero_window, 15);
    assert_eq!(up.counts.retransmitted_packets, 0);
    assert!((c.handshake_rtt_ms.unwrap() - 110.8).abs() < 0.5);
}

#[test]
fn http_download_truncated_file_keeps_what_was_read() {
    let a = analyze("suricata-verify__http-mime-truncated__input.pcap");
    let err = a
        .error
        .as_ref()
        .expect("the file is cut in the middle of a record");
    assert!(err.is_partial());
    assert_eq!(a.frames, 2696);
    let c = only(&a);
    let (down, client) = (data_dir(c), ack_dir(c));
    assert_eq!(down.window_scaling, "not_negotiated");
    assert_eq!(client.flags.zero_window, 9);
    assert_eq!(down.flags.zero_window_probe, 5);
    assert_eq!(down.flags.window_full, 7);
    assert_eq!(client.flags.window_update + down.flags.window_update, 73);
    assert_eq!(
        down.capture_point,
        CapturePoint::NearReceiver,
        "captured at the client"
    );
}

#[test]
fn ndt_ipv6_download_without_sack_is_window_full_bound() {
    let a = analyze("m-lab-etl__ndt-nnwk2_1611335823_00000000000C2DA9.pcap.gz");
    assert!(matches!(
        a.format,
        CaptureFormat::Pcap {
            nanosecond: true,
            ..
        }
    ));
    assert_eq!(a.compression, Some("gzip"));
    let c = only(&a);
    assert!(c.a.addr.contains(':'), "IPv6");
    let (down, client) = (data_dir(c), ack_dir(c));
    assert_eq!(
        client.sack_permitted,
        Some(false),
        "client SYN has no SACK-permitted"
    );
    assert_eq!((client.window_scale, down.window_scale), (Some(9), Some(7)));
    assert_eq!(client.flags.zero_window, 122);
    assert_eq!(down.flags.window_full, 641);
    assert_eq!(down.counts.retransmitted_packets, 0);
    assert_eq!(
        down.counts.max_segment, 64_260,
        "TSO super-segments at the server"
    );
    assert!(down.counts.segments_above_mss > 0);
    assert_eq!(
        down.capture_point,
        CapturePoint::NearSender,
        "M-Lab captures at the server"
    );
    let mbit = down.throughput_bps.unwrap() / 1e6;
    assert!((40.0..70.0).contains(&mbit), "about 48 Mbit/s, got {mbit}");
}

#[test]
fn ndt_small_client_window_scale() {
    let a = analyze("m-lab-etl__ndt-nnwk2_1611335823_00000000000C2E15.pcap.gz");
    let c = only(&a);
    let (down, client) = (data_dir(c), ack_dir(c));
    assert_eq!(client.window_scale, Some(2));
    assert_eq!(client.advertised_window.max_bytes, Some(261_340));
    assert_eq!(
        down.counts.retransmitted_packets + client.counts.retransmitted_packets,
        75
    );
    assert_eq!(down.flags.fast_retransmission, 1);
    assert_eq!(client.flags.zero_window, 3);
    assert_eq!(down.flags.window_full, 42);
    assert_eq!(down.capture_point, CapturePoint::NearSender);
    assert!((c.handshake_rtt_ms.unwrap() - 19.7).abs() < 0.5);
}

#[test]
fn ndt_lossy_download_counts_loss_and_recovery() {
    let a = analyze("m-lab-etl__ndt-m6znc_1632401351_000000000005BA77.pcap.gz");
    let c = only(&a);
    let (down, client) = (data_dir(c), ack_dir(c));
    assert_eq!((client.window_scale, down.window_scale), (Some(6), Some(7)));
    assert_eq!(client.flags.lost_segment, 25);
    assert!(client.flags.duplicate_ack > 18_000);
    assert!(
        down.counts.retransmitted_packets > 1000,
        "heavy loss recovered by retransmission"
    );
    assert!(
        !down.dsack_spurious_frames.is_empty(),
        "some retransmissions were D-SACKed"
    );
    assert_eq!(down.capture_point, CapturePoint::NearSender);
    let mbit = down.throughput_bps.unwrap() / 1e6;
    assert!(
        (160.0..200.0).contains(&mbit),
        "about 178 Mbit/s, got {mbit}"
    );
    assert!(
        down.rtt.unwrap().min_ms > 20.0,
        "path RTT ~32 ms seen at the sender"
    );
}

#[test]
fn ndt_clean_upload_captured_at_receiver() {
    let a = analyze("m-lab-etl__ndt-m6znc_1632401351_000000000005B90B.pcap.gz");
    let c = only(&a);
    let up = data_dir(c);
    assert_eq!(up.from, "a", "the client uploads");
    assert_eq!(up.counts.retransmitted_packets, 0);
    assert_eq!(c.directions[1].flags.duplicate_ack, 0);
    assert!(up.counts.segments_above_mss > 0, "GRO at the receiver");
    assert_eq!(up.counts.max_segment, 26_308);
    let peak = up.peak_throughput_bps.unwrap() / 1e6;
    assert!(
        (85.0..105.0).contains(&peak),
        "flat at about 94 Mbit/s, got {peak}"
    );
}

#[test]
fn linux_cooked_v2_with_gro() {
    let a = analyze("suricata-verify__decode-sll2-02__input.pcap");
    let c = only(&a);
    let down = data_dir(c);
    assert!(down.counts.bytes > 2_500_000);
    assert_eq!(down.counts.max_segment, 65_160);
    assert_eq!(down.counts.segments_above_mss, 79);
    assert_eq!(
        (c.directions[0].window_scale, c.directions[1].window_scale),
        (Some(7), Some(7))
    );
}

#[test]
fn vlan_tagged_smb_session_with_long_idle_gaps() {
    let a = analyze("suricata-verify__filecontainer-smb.pcap");
    let c = only(&a);
    assert_eq!(c.b.port, 445);
    assert!(c
        .directions
        .iter()
        .all(|d| d.window_scaling == "not_negotiated"));
    assert_eq!(
        c.directions
            .iter()
            .map(|d| d.counts.retransmitted_packets)
            .sum::<u64>(),
        5
    );
    assert!(
        c.idle_max_s > 35.0,
        "idle gaps of about 40 s, got {}",
        c.idle_max_s
    );
}

#[test]
fn two_range_downloads_with_zero_windows() {
    let a = analyze("zeek__206_example_b.pcap");
    assert_eq!(a.connections.len(), 2);
    let zero: u64 = a
        .connections
        .iter()
        .map(|c| c.directions[0].flags.zero_window)
        .sum();
    assert_eq!(zero, 57, "client zero windows");
    let dup: u64 = a
        .connections
        .iter()
        .map(|c| c.directions[0].flags.duplicate_ack)
        .sum();
    assert_eq!(dup, 64);
    for c in &a.connections {
        assert!(c
            .directions
            .iter()
            .all(|d| d.window_scale_offered == Some(false)));
        assert!(c
            .directions
            .iter()
            .all(|d| d.advertised_window.max_bytes.unwrap() <= 65_535));
        assert_eq!(
            c.directions[1].capture_point,
            CapturePoint::NearReceiver,
            "captured at the client"
        );
    }
    // Wireshark calls 52 of these out-of-order; their bytes had been seen,
    // so tcpwhy counts them as retransmissions (see tests/system/test_tshark_crosscheck.py).
    let retrans: u64 = a
        .connections
        .iter()
        .map(|c| c.directions[1].counts.retransmitted_packets)
        .sum();
    assert_eq!(retrans, 56 + 52);
    assert_eq!(
        a.connections
            .iter()
            .map(|c| c.directions[1].flags.out_of_order)
            .sum::<u64>(),
        0
    );
}

#[test]
fn pcapng_irc_dcc_transfer() {
    let a = analyze("zeek__irc-dcc-send.pcapng");
    assert_eq!(a.format, CaptureFormat::PcapNg);
    let transfer = a
        .connections
        .iter()
        .max_by_key(|c| data_dir(c).counts.bytes)
        .unwrap();
    let d = data_dir(transfer);
    assert!(d.counts.bytes > 1_300_000);
    assert_eq!(d.counts.retransmitted_packets, 0);
    assert_eq!(d.capture_point, CapturePoint::NearSender);
    assert!(transfer.duration_s < 1.0);
}

#[test]
fn bsd_loopback_link_type_and_small_windows() {
    let a = analyze("tcptrace__dlt_null.dmp.gz");
    let c = only(&a);
    let d = data_dir(c);
    assert_eq!(d.counts.bytes, 331_296);
    assert_eq!(
        (c.directions[0].window_scale, c.directions[1].window_scale),
        (Some(0), Some(0))
    );
    assert_eq!(
        c.directions[0].window_scaling, "negotiated",
        "wscale 0 is negotiated, with no shift"
    );
    assert!(ack_dir(c).advertised_window.max_bytes.unwrap() <= 17_000);
    assert_eq!(d.flags.window_full, 204);
    assert!((c.handshake_rtt_ms.unwrap() - 36.0).abs() < 1.0);
    assert_eq!(d.capture_point, CapturePoint::NearSender);
}

#[test]
fn ttcp_transfer_with_zero_window_probes() {
    let a = analyze("tcptrace__zwnd.dmp.gz");
    assert_eq!(a.skipped, vec![("other_protocol", 4)], "a few DNS packets");
    let c = only(&a);
    assert_eq!(c.b.port, 5001);
    let (d, r) = (data_dir(c), ack_dir(c));
    assert!(d.counts.bytes > 24_000_000);
    assert_eq!(r.flags.zero_window, 7);
    assert_eq!(d.flags.zero_window_probe, 6);
    assert_eq!(r.flags.zero_window_probe_ack, 6);
    assert_eq!(d.flags.window_full, 1);
    assert!(d.counts.truncated_payload_packets > 0, "snaplen 68");
}

#[test]
fn loopback_redis_many_short_connections() {
    let a = analyze("tcpdump__resp_1_benchmark.pcap");
    assert_eq!(a.connections.len(), 15);
    for c in &a.connections {
        assert_eq!(c.directions[0].mss, Some(65_495));
        assert_eq!(c.b.port, 6379);
        assert_eq!(c.close, "fin_both");
    }
}

#[test]
fn capture_starting_mid_connection_has_unknown_window_scale() {
    let a = analyze("packets__tcp_zerowindowrecovery.pcapng");
    let c = only(&a);
    assert!(c.started_mid_capture);
    assert!(c
        .directions
        .iter()
        .all(|d| d.window_scaling == "unknown" && d.window_scale.is_none()));
    let zero: u64 = c.directions.iter().map(|d| d.flags.zero_window).sum();
    let update: u64 = c.directions.iter().map(|d| d.flags.window_update).sum();
    assert_eq!((zero, update), (1, 1));
}

#[test]
fn big_tcp_segment_with_ip_length_zero() {
    let a = analyze("tcpdump__bigtcp-ipv4.pcap");
    let c = only(&a);
    assert_eq!(c.directions[0].counts.bytes, 80_000);
    assert_eq!(c.directions[0].counts.max_segment, 80_000);
}
