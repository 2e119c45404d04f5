//! Private ftrace instances: created, used and always removed.

mod common;

use std::fs;

use common::*;
use tcpwhy_kernel::tracefs::{self, TcpProbe, TcpProbeOptions, TraceEvent};

#[test]
fn drop_removes_instance_and_filter_is_applied() {
    if !root_or_skip("drop_removes_instance_and_filter_is_applied") {
        return;
    }
    let ns = Netns::new();
    let (listener, client, server) = pair_in(&ns.name, "127.0.0.1:0", None);
    let port = listener.local_addr().unwrap().port();
    let probe = TcpProbe::start(&TcpProbeOptions::port(port)).unwrap();
    let dir = probe.instance_dir().to_path_buf();
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with(&format!("tcpwhy-{}-", std::process::id())),
        "{name}"
    );
    assert!(fs::read_to_string(dir.join("trace_clock"))
        .unwrap()
        .contains("[mono]"));
    let filter = fs::read_to_string(dir.join("events/tcp/tcp_probe/filter")).unwrap();
    assert!(filter.contains(&format!("sport == {port}")), "{filter}");
    // the global instance is untouched
    let root = dir.parent().unwrap().parent().unwrap();
    assert_eq!(
        fs::read_to_string(root.join("events/tcp/tcp_probe/enable"))
            .unwrap()
            .trim(),
        "0"
    );

    transfer(&client, &server, 2_000_000);
    std::thread::sleep(std::time::Duration::from_millis(100));
    let got = probe.drain();
    assert!(!got.is_empty(), "stats {:?}", probe.stats());
    assert!(got.iter().all(
        |e| matches!(e, TraceEvent::Probe { sport, dport, .. } if *sport == port || *dport == port)
            || matches!(
                e,
                TraceEvent::CongState { .. } | TraceEvent::Retransmit { .. }
            )
    ));
    assert_eq!(probe.stats().unparsed, 0, "{:?}", probe.stats());
    drop(probe);
    assert!(!dir.exists(), "{} survived drop", dir.display());
}

#[test]
fn stale_instances_are_removed_live_ones_kept() {
    if !root_or_skip("stale_instances_are_removed_live_ones_kept") {
        return;
    }
    let live = TcpProbe::start(&TcpProbeOptions::port(1)).unwrap();
    // a pid that existed and is gone now
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = child.id();
    child.wait().unwrap();
    let root = tracefs::tracefs_root().unwrap();
    let stale = root.join(format!("instances/tcpwhy-{dead_pid}-0"));
    fs::create_dir(&stale).unwrap();
    let removed = tracefs::remove_stale_instances().unwrap();
    assert!(
        removed.contains(&format!("tcpwhy-{dead_pid}-0")),
        "{removed:?}"
    );
    assert!(!stale.exists());
    assert!(live.instance_dir().exists(), "live instance removed");
    let dir = live.instance_dir().to_path_buf();
    live.stop().unwrap();
    assert!(!dir.exists());
}

fn ip(args: &[&str]) -> bool {
    std::process::Command::new("ip")
        .args(args)
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn retransmit_and_cong_state_events_under_loss() {
    if !root_or_skip("retransmit_and_cong_state_events_under_loss") {
        return;
    }
    // snd [a0 10.77.1.1] == [r0 10.77.1.254] rtr [r1 10.77.2.254] == [b0 10.77.2.1] rcv
    // with a shallow tbf on r1: drops happen on the router, not in the
    // sender's own qdisc (a local drop is not retransmitted, just re-sent).
    let (na, nr, nb) = (Netns::new(), Netns::new(), Netns::new());
    let (a, r, b) = (na.name.as_str(), nr.name.as_str(), nb.name.as_str());
    let ok = ip(&[
        "-n", a, "link", "add", "a0", "type", "veth", "peer", "name", "r0", "netns", r,
    ]) && ip(&[
        "-n", r, "link", "add", "r1", "type", "veth", "peer", "name", "b0", "netns", b,
    ]) && ip(&["-n", a, "addr", "add", "10.77.1.1/24", "dev", "a0"])
        && ip(&["-n", r, "addr", "add", "10.77.1.254/24", "dev", "r0"])
        && ip(&["-n", r, "addr", "add", "10.77.2.254/24", "dev", "r1"])
        && ip(&["-n", b, "addr", "add", "10.77.2.1/24", "dev", "b0"])
        && ip(&["-n", a, "link", "set", "a0", "up"])
        && ip(&["-n", r, "link", "set", "r0", "up"])
        && ip(&["-n", r, "link", "set", "r1", "up"])
        && ip(&["-n", b, "link", "set", "b0", "up"])
        && ip(&["-n", a, "route", "add", "default", "via", "10.77.1.254"])
        && ip(&["-n", b, "route", "add", "default", "via", "10.77.2.254"]);
    assert!(ok, "topology setup failed");
    tcpwhy_kernel::sysctl::set_in_netns(r, "net.ipv4.ip_forward", "1").unwrap();
    let tc = std::process::Command::new("tc")
        .args([
            "-n", r, "qdisc", "add", "dev", "r1", "root", "tbf", "rate", "50mbit", "burst", "15kb",
            "limit", "15kb",
        ])
        .status();
    if !tc.is_ok_and(|s| s.success()) {
        eprintln!("SKIP retransmit_and_cong_state_events_under_loss: tbf qdisc unavailable");
        return;
    }
    tcpwhy_kernel::sysctl::set_in_netns(a, "net.ipv4.tcp_congestion_control", "reno").unwrap();
    let listener =
        tcpwhy_kernel::netns::run_in_netns(b, || std::net::TcpListener::bind("10.77.2.1:0"))
            .unwrap();
    let addr = listener.local_addr().unwrap();
    let port = addr.port();
    let client =
        tcpwhy_kernel::netns::run_in_netns(a, || std::net::TcpStream::connect(addr)).unwrap();
    let (server, _) = listener.accept().unwrap();

    let probe = TcpProbe::start(&TcpProbeOptions::port(port)).unwrap();
    let has_retx = probe
        .enabled_events()
        .iter()
        .any(|e| e == tracefs::EVENT_RETRANSMIT);
    let has_cong = probe
        .enabled_events()
        .iter()
        .any(|e| e == tracefs::EVENT_CONG_STATE);
    transfer(&client, &server, 4_000_000);
    std::thread::sleep(std::time::Duration::from_millis(50));
    let info =
        tcpwhy_kernel::getsockopt_tcp_info(std::os::fd::AsRawFd::as_raw_fd(&client)).unwrap();
    let stats = probe.stats();
    let events = probe.stop().unwrap();
    assert!(info.total_retrans > 0, "no loss happened: {info:?}");
    assert_eq!(stats.unparsed, 0, "{stats:?}");
    let client_port = client.local_addr().unwrap().port();
    let a0: std::net::IpAddr = "10.77.1.1".parse().unwrap();
    if has_retx {
        let retx: Vec<_> = events
            .iter()
            .filter(|e| matches!(e, TraceEvent::Retransmit { .. }))
            .collect();
        assert!(
            !retx.is_empty(),
            "total_retrans {} but no tcp_retransmit_skb",
            info.total_retrans
        );
        for e in &retx {
            let TraceEvent::Retransmit {
                sport,
                dport,
                state,
                family,
                saddr,
                err,
                ..
            } = e
            else {
                unreachable!()
            };
            assert_eq!(
                (*sport, *dport, *family, *saddr),
                (client_port, port, 2, a0),
                "{e:?}"
            );
            assert_eq!(*state, 1, "{e:?}");
            assert!(err.is_none_or(|e| e == 0), "{e:?}");
        }
        // an skb may carry several segments: events <= retransmitted segments
        assert!(
            retx.len() as u32 <= info.total_retrans,
            "{} > {}",
            retx.len(),
            info.total_retrans
        );
    }
    if has_cong {
        let states: Vec<u8> = events
            .iter()
            .filter_map(|e| match e {
                TraceEvent::CongState {
                    cong_state, sport, ..
                } if *sport == client_port => Some(*cong_state),
                _ => None,
            })
            .collect();
        assert!(
            states.iter().any(|s| *s == 3 || *s == 4),
            "no Recovery/Loss in {states:?}"
        );
        assert!(states.iter().all(|s| *s <= 4));
    }
    // the sender's probes saw the window shrink after loss
    let ssth: Vec<u32> = events
        .iter()
        .filter_map(|e| match e {
            TraceEvent::Probe {
                sport, ssthresh, ..
            } if *sport == client_port => Some(*ssthresh),
            _ => None,
        })
        .collect();
    assert!(
        ssth.iter().any(|s| *s < 1_000_000),
        "ssthresh never set: {:?}",
        &ssth[..ssth.len().min(5)]
    );
}
