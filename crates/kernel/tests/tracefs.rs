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
