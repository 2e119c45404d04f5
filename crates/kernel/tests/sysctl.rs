//! sysctl writes and snapshots inside a namespace leave the host alone.

mod common;

use common::*;
use tcpwhy_kernel::sysctl;

#[test]
fn set_and_snapshot_round_trip_in_namespace() {
    if !root_or_skip("set_and_snapshot_round_trip_in_namespace") {
        return;
    }
    let ns = Netns::new();
    let host_before = sysctl::read("net.ipv4.tcp_rmem").unwrap();
    let host_snap = sysctl::snapshot().unwrap();
    let want = "4096 77777 3333333";
    assert_ne!(host_before, want);

    sysctl::set_in_netns(&ns.name, "net.ipv4.tcp_rmem", "4096\t77777   3333333").unwrap();
    sysctl::set_many_in_netns(
        &ns.name,
        &[("net.ipv4.tcp_sack", "0"), ("net.ipv4.tcp_ecn", "1")],
    )
    .unwrap();

    let snap = sysctl::snapshot_in_netns(&ns.name).unwrap();
    assert_eq!(
        snap.get("net.ipv4.tcp_rmem").map(String::as_str),
        Some(want)
    );
    assert_eq!(snap.get("net.ipv4.tcp_sack").map(String::as_str), Some("0"));
    assert_eq!(
        sysctl::read_in_netns(&ns.name, "net.ipv4.tcp_ecn").unwrap(),
        "1"
    );
    assert_eq!(
        snap.get("kernel.osrelease"),
        host_snap.get("kernel.osrelease")
    );
    assert!(snap.contains_key("net.ipv4.ip_local_port_range"));
    assert!(snap.contains_key("net.ipv4.tcp_congestion_control"));
    assert!(
        snap.keys()
            .filter(|k| k.starts_with("net.ipv4.tcp_"))
            .count()
            > 30,
        "{snap:?}"
    );
    assert!(snap.values().all(|v| !v.contains('\t')));

    // the host namespace is untouched
    assert_eq!(sysctl::read("net.ipv4.tcp_rmem").unwrap(), host_before);
    let host_after = sysctl::snapshot().unwrap();
    assert_eq!(
        host_after.get("net.ipv4.tcp_sack"),
        host_snap.get("net.ipv4.tcp_sack")
    );
}

#[test]
fn sysctl_errors_name_key_and_value() {
    if !root_or_skip("sysctl_errors_name_key_and_value") {
        return;
    }
    let ns = Netns::new();
    let e = sysctl::set_in_netns(&ns.name, "net.ipv4.tcp_rmem", "not a number").unwrap_err();
    let s = e.to_string();
    assert!(
        s.contains("net.ipv4.tcp_rmem") && s.contains("not a number"),
        "{s}"
    );
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{s}");

    let e = sysctl::set_in_netns(&ns.name, "net.ipv4.tcp_no_such_knob", "1").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    assert!(e.to_string().contains("net.ipv4.tcp_no_such_knob"), "{e}");

    // a restricted congestion control cannot be the default of a child namespace
    let allowed = sysctl::read("net.ipv4.tcp_allowed_congestion_control").unwrap();
    let available = sysctl::read("net.ipv4.tcp_available_congestion_control").unwrap();
    if let Some(restricted) = available
        .split(' ')
        .find(|c| !allowed.split(' ').any(|a| a == *c))
    {
        let e = sysctl::set_in_netns(&ns.name, "net.ipv4.tcp_congestion_control", restricted)
            .unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
        assert!(
            e.to_string().contains("tcp_allowed_congestion_control"),
            "{e}"
        );
    }

    let missing = format!("twk-{}-nope", std::process::id());
    let e = sysctl::snapshot_in_netns(&missing).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    assert!(e.to_string().contains(&missing), "{e}");
}
