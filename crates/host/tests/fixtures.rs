//! Parsers against saved outputs from several kernel / iproute2 versions
//! (tests/fixtures/README.md says which are real and which are written
//! from the print formats of older versions).

use std::path::Path;
use tcpwhy_core::Limit;
use tcpwhy_host::series::Primary;
use tcpwhy_host::{evidence, host, series, ss, text};

fn fixture(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)).unwrap()
}

#[test]
fn ss_loop_real_6_1() {
    let p = ss::parse(&fixture("ss-tinm-loop-iproute2-6.1-linux-6.18.txt"), 0.0);
    assert_eq!(p.snapshots, 5);
    assert!(p.timestamped);
    assert_eq!(p.samples.len(), 5);
    assert!(p.skipped.is_empty(), "{:?}", p.skipped);
    let s = &p.samples[0];
    assert_eq!(s.cong_name(), Some("bbr"));
    let t = s.tcp_info.unwrap();
    assert_eq!((t.snd_cwnd, t.snd_ssthresh, t.snd_mss), (180, 150, 1448));
    assert_eq!(t.rwnd_limited, Some(180_000));
    assert_eq!(t.busy_time, Some(316_000));
    assert!(s.bbr.unwrap().bw > 0);
    assert!(s.skmem.unwrap().sndbuf > 1_000_000);
    let g = series::group(&p.samples);
    assert_eq!(g.len(), 1);
    let d = series::diagnose(&g[0]);
    assert_eq!(d.role, "sender");
    assert_eq!(d.primary, Primary::Limit(Limit::ReceiverWindow), "{}", series::render(&d));
    assert!(d.rate_bps.unwrap() > 1e9);
}

#[test]
fn ss_tinoe_real_6_1() {
    let p = ss::parse(&fixture("ss-tinoe-iproute2-6.1-linux-6.18.txt"), 0.0);
    assert_eq!(p.samples.len(), 1);
    assert!(p.skipped.is_empty(), "{:?}", p.skipped);
    let s = &p.samples[0];
    assert_eq!(s.inode, 1070689);
    assert_eq!(s.cookie, 0x2b35a);
    let t = s.tcp_info.unwrap();
    assert_eq!(t.options & 3, 3); // ts sack
    // A single snapshot: the lifetime counters decide (61% rwnd-limited).
    let d = series::diagnose(&series::group(&p.samples)[0]);
    assert_eq!(d.primary, Primary::Limit(Limit::ReceiverWindow));
}

#[test]
fn ss_iproute2_3_10() {
    let p = ss::parse(&fixture("ss-tin-iproute2-3.10-centos7.txt"), 0.0);
    assert_eq!(p.samples.len(), 2);
    assert!(p.skipped.is_empty(), "{:?}", p.skipped);
    let t = p.samples[0].tcp_info.unwrap();
    assert_eq!((t.snd_cwnd, t.snd_ssthresh, t.total_retrans, t.rtt), (2, 4, 31, 35_500));
    assert_eq!(p.samples[0].wqueue, 2097152);
    let d = series::diagnose(&series::group(&p.samples[..1])[0]);
    assert_eq!(d.ssthresh_min, Some(4));
    assert_eq!(d.role, "sender");
    assert!(series::render(&d).contains("ssthresh 4"), "{}", series::render(&d));
}

#[test]
fn ss_iproute2_4_9_with_old_dctcp() {
    let p = ss::parse(&fixture("ss-tinm-iproute2-4.9-debian9.txt"), 0.0);
    assert_eq!(p.samples.len(), 2);
    assert!(p.skipped.is_empty(), "{:?}", p.skipped);
    let s = &p.samples[0];
    let t = s.tcp_info.unwrap();
    assert_eq!(t.bytes_acked, Some(241823017));
    assert_eq!(t.delivery_rate, Some((201.4e6 / 8.0) as u64));
    assert_eq!(t.pacing_rate, Some((246.7e6 / 8.0) as u64));
    assert_eq!(s.skmem.unwrap().drops, None);
    let d = p.samples[1].dctcp.unwrap();
    assert_eq!((d.enabled, d.alpha), (1, 16));
    // Send-Q at the send buffer, no busy counters: snapshot says send buffer.
    assert_eq!(series::snapshot_limit(s), Limit::SendBuffer);
}

#[test]
fn watch_snapshots() {
    let p = ss::parse(&fixture("watch-ss-4tni-iproute2-5.10.txt"), 0.0);
    assert_eq!(p.snapshots, 2);
    assert!(p.timestamped);
    assert_eq!(p.samples[1].time_ns - p.samples[0].time_ns, 1_000_000_000);
    let d = series::diagnose(&series::group(&p.samples)[0]);
    assert_eq!(d.samples, 2);
    assert!((d.rate_bps.unwrap() - (11400111.0 - 8901234.0) * 8.0).abs() < 1.0);
    assert_eq!(d.primary, Primary::Limit(Limit::CongestionWindow), "{}", series::render(&d));
}

#[test]
fn tcp_metrics_versions() {
    let (v, s) = text::parse_tcp_metrics(&fixture("tcp_metrics-iproute2-6.1.txt"));
    assert!(s.is_empty());
    assert_eq!(v[0].addr, "10.55.0.2");
    assert_eq!(v[0].rtt_us, Some(20));
    let (v, _) = text::parse_tcp_metrics(&fixture("tcp_metrics-iproute2-3.10-ms.txt"));
    assert_eq!((v[0].ssthresh, v[0].cwnd, v[0].rtt_us), (Some(4), Some(2), Some(68_000)));
}

#[test]
fn counters_real() {
    let (c, _) = text::parse_counters(&fixture("nstat-az-iproute2-6.1.txt"));
    assert!(c["TcpOutSegs"] > 1_000_000);
    assert!(c.contains_key("TcpExtTCPLossProbes"));
    let (n, _) = text::parse_counters(&fixture("netstat-s-net-tools-2.10.txt"));
    assert_eq!(n["TcpOutSegs"], c["TcpOutSegs"]);
    assert_eq!(n["TcpRetransSegs"], c["TcpRetransSegs"]);
}

#[test]
fn host_from_saved_debian11() {
    let input = host::HostInput {
        sysctl: text::parse_sysctl(&fixture("sysctl-a-linux-5.10-debian11.txt")),
        tcp_metrics: Some(text::parse_tcp_metrics(&fixture("tcp_metrics-iproute2-3.10-ms.txt")).0),
        counters: Some(text::parse_counters(&fixture("nstat-az-iproute2-6.1.txt")).0),
        rtt_s: Some(0.035),
        bandwidth_bps: Some(3e9),
        ..Default::default()
    };
    let r = host::judge(&input);
    assert_eq!(r.kernel.as_deref(), Some("5.10.0-28-amd64"));
    assert_eq!(r.max_receive_window, Some(3 << 20));
    let text = host::render(&r);
    for k in ["receive_buffer_below_bdp", "send_buffer_below_bdp", "slow_start_after_idle", "cached_small_ssthresh", "tail_loss_probe"] {
        assert!(text.contains(k), "{k} missing in\n{text}");
    }
    let r6 = host::judge(&host::HostInput {
        sysctl: text::parse_sysctl(&fixture("sysctl-a-linux-6.18.txt")),
        rtt_s: Some(0.035),
        ..Default::default()
    });
    assert!(r6.kernel_rule.contains("6.6+"));
}

#[test]
fn evidence_loads_fixtures() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let e = evidence::Evidence::load(&evidence::EvidenceArgs {
        ss: vec![dir.join("ss-tinm-loop-iproute2-6.1-linux-6.18.txt")],
        sysctl: Some(dir.join("sysctl-a-linux-6.18.txt")),
        tcp_metrics: Some(dir.join("tcp_metrics-iproute2-6.1.txt")),
        nstat: Some(dir.join("nstat-az-iproute2-6.1.txt")),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(e.series.len(), 1);
    assert!(e.sysctl.contains_key("net.ipv4.tcp_rmem"));
    assert!(evidence::Evidence::load(&evidence::EvidenceArgs {
        sysctl: Some(dir.join("tcp_metrics-iproute2-6.1.txt")),
        ..Default::default()
    })
    .is_err());
}

/// Real: a cubic sender behind a 32 KiB receive buffer; ss omits the zero
/// sndbuf_limited, and the send queue sits at the send buffer because the
/// application writes faster than the window allows: still receiver window.
#[test]
fn ss_rwnd_loop_with_full_send_queue() {
    let p = ss::parse(&fixture("ss-tinm-rwnd-loop-iproute2-6.1-linux-6.18.txt"), 0.0);
    assert_eq!(p.snapshots, 3);
    assert_eq!(p.samples[0].tcp_info.unwrap().sndbuf_limited, Some(0));
    let d = series::diagnose(&series::group(&p.samples)[0]);
    assert_eq!(d.primary, Primary::Limit(Limit::ReceiverWindow), "{}", series::render(&d));
    assert!(d.limits[&Limit::ReceiverWindow] > 0.9);
}

/// Bad input is data, not a crash: every line of every fixture cut at every
/// character, and some garbage, through every parser.
#[test]
fn parsers_never_panic_on_cut_lines() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut garbage = vec![
        "mem:()".to_string(),
        "\tskmem:( bbr:(bw:,mrtt:) rtt:/ wscale:, retrans:/ timer:(on,,) busy:ms(".into(),
        "ESTAB 99999999999 0 [::1]:x 1.2.3.4:".into(),
        "Every 0.1s: Sun Nov 99 99:99:99 2026".into(),
        "2026-13-45T25:61:61.5Zé".into(),
        "é".repeat(30),
    ];
    for e in std::fs::read_dir(&dir).unwrap() {
        let t = std::fs::read_to_string(e.unwrap().path()).unwrap();
        garbage.extend(t.lines().take(40).map(String::from));
    }
    let header = "State Recv-Q Send-Q Local Address:Port Peer Address:Port\nESTAB 0 0 10.0.0.1:1 10.0.0.2:2\n";
    for line in &garbage {
        for (i, _) in line.char_indices().chain(std::iter::once((line.len(), ' '))) {
            let cut = &line[..i];
            let p = ss::parse(&format!("{header}{cut}\n\t{cut}\n"), 0.1);
            for g in series::group(&p.samples) {
                let _ = series::render(&series::diagnose(&g));
            }
            let _ = text::parse_sysctl(cut);
            let _ = text::parse_tcp_metrics(cut);
            let _ = text::parse_counters(&format!("TcpExt: A B\nTcpExt: {cut}\n{cut}"));
            let _ = ss::parse_timestamp_line(cut);
        }
    }
}
