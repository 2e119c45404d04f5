//! Evidence from ss / sysctl / tcp_metrics / nstat added to a capture's
//! diagnosis, matched by 4-tuple.

use std::collections::BTreeMap;
use std::path::Path;
use tcpwhy_core::Cause;
use tcpwhy_diagnose::system::SystemGuess;
use tcpwhy_diagnose::model::{ConnectionId, Endpoint, Rtt};
use tcpwhy_diagnose::{ConnectionDiagnosis, DirectionDiagnosis};
use tcpwhy_host::evidence::{apply, Evidence, EvidenceArgs};

fn direction(sender: &str, receiver: &str, primary: Cause) -> DirectionDiagnosis {
    DirectionDiagnosis {
        from: "a",
        sender: sender.into(),
        receiver: receiver.into(),
        bytes: 1_000_000,
        duration_s: 1.0,
        goodput_bps: Some(8e6),
        capture_point: "sender",
        rtt: Rtt { base_ms: Some(0.02), median_ms: Some(0.02), p90_ms: None, handshake_ms: None, source: "data_ack" },
        segment_bytes: 1448,
        path_rate_bps: None,
        path_capacity: "unknown",
        interval_ms: 1.0,
        limits: BTreeMap::new(),
        timeline: vec![],
        traffic_shape: tcpwhy_diagnose::shape::Shape::Bulk,
        primary,
        congestion_control: tcpwhy_diagnose::congestion::detect(&Default::default(), true, None, 1448, 0.0),
        confidence: tcpwhy_core::Confidence::High,
        summary: String::new(),
        findings: vec![],
        fixes: vec![],
        what_if: vec![],
        to_confirm: vec![],
        truncated: false,
        parts: Vec::new(),
    }
}

fn conn(d: DirectionDiagnosis) -> ConnectionDiagnosis {
    ConnectionDiagnosis {
        id: ConnectionId {
            number: 1,
            a: Endpoint { addr: "10.55.0.1".into(), port: 39710, system: SystemGuess::unknown_without_syn() },
            b: Endpoint { addr: "10.55.0.2".into(), port: 5201, system: SystemGuess::unknown_without_syn() },
        },
        first_time: 0.0,
        duration_s: 1.0,
        handshake_rtt_ms: None,
        capture_quality: vec![],
        directions: vec![d],
    }
}

#[test]
fn ss_confirms_receiver_window_and_host_settings_join() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let ev = Evidence::load(&EvidenceArgs {
        ss: vec![dir.join("ss-tinm-loop-iproute2-6.1-linux-6.18.txt")],
        sysctl: Some(dir.join("sysctl-a-linux-6.18.txt")),
        tcp_metrics: Some(dir.join("tcp_metrics-iproute2-3.10-ms.txt")),
        nstat: Some(dir.join("nstat-az-iproute2-6.1.txt")),
        ..Default::default()
    })
    .unwrap();
    let mut conns = vec![conn(direction("10.55.0.1:39710", "10.55.0.2:5201", Cause::ReceiverWindow))];
    apply(&ev, &mut conns);
    let kinds: Vec<&str> = conns[0].directions[0].findings.iter().map(|f| f.kind).collect();
    assert!(kinds.contains(&"kernel_rwnd_limited"), "{kinds:?}");
    assert!(kinds.contains(&"host_tcp_rmem"), "{kinds:?}");
    let f = conns[0].directions[0].findings.iter().find(|f| f.kind == "kernel_rwnd_limited").unwrap();
    assert!(f.text.contains("confirms"), "{}", f.text);
    assert_eq!(f.numbers["confirms"], true);
    assert!(conns[0].directions[0].summary.contains("Host evidence: The sender's kernel confirms"), "{}", conns[0].directions[0].summary);

    // Another 4-tuple gets nothing from this ss file.
    let mut other = vec![conn(direction("10.9.9.9:1", "10.55.0.2:5201", Cause::ReceiverWindow))];
    apply(&ev, &mut other);
    assert!(!other[0].directions[0].findings.iter().any(|f| f.kind.starts_with("kernel_")));
}

#[test]
fn send_queue_at_wmem_confirms_send_buffer() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let ev = Evidence::load(&EvidenceArgs {
        ss: vec![dir.join("ss-tinm-iproute2-4.9-debian9.txt")],
        ..Default::default()
    })
    .unwrap();
    let mut conns = vec![conn(direction("10.1.0.4:38650", "10.2.0.7:5201", Cause::SendBuffer))];
    apply(&ev, &mut conns);
    let f = conns[0].directions[0].findings.iter().find(|f| f.kind == "kernel_sndbuf_limited").expect("sndbuf finding");
    assert!(f.text.contains("confirms") && f.text.contains("Send-Q"), "{}", f.text);
}

#[test]
fn cached_ssthresh_for_the_receiver() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let ev = Evidence::load(&EvidenceArgs {
        tcp_metrics: Some(dir.join("tcp_metrics-iproute2-3.10-ms.txt")),
        ss: vec![dir.join("ss-tin-iproute2-3.10-centos7.txt")],
        ..Default::default()
    })
    .unwrap();
    let mut conns = vec![conn(direction("192.168.10.5:44312", "192.168.20.9:2049", Cause::CachedSsthresh))];
    apply(&ev, &mut conns);
    let kinds: Vec<&str> = conns[0].directions[0].findings.iter().map(|f| f.kind).collect();
    assert!(kinds.contains(&"cached_ssthresh_entry"), "{kinds:?}");
    assert!(kinds.contains(&"kernel_small_ssthresh"), "{kinds:?}");
}
