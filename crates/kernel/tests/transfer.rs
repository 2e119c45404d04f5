//! Ground truth from a real transfer inside a real network namespace:
//! sock_diag and getsockopt(TCP_INFO) must agree with each other and with
//! what the application moved, and tcp_probe must see the flow.

mod common;

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use common::*;
use tcpwhy_kernel::sockdiag::{state, Filter, SockDiag, SocketSample};
use tcpwhy_kernel::tracefs::{TcpProbe, TcpProbeOptions, TraceEvent};
use tcpwhy_kernel::{getsockopt_tcp_info, mono_now_ns};

const TOTAL: usize = 20 * 1000 * 1000;

fn by_cookie(v: &[SocketSample], cookie: u64) -> &SocketSample {
    v.iter()
        .find(|s| s.cookie == cookie)
        .unwrap_or_else(|| panic!("cookie {cookie} not in {v:#?}"))
}

#[test]
fn transfer_ground_truth_ipv4() {
    if !root_or_skip("transfer_ground_truth_ipv4") {
        return;
    }
    let ns = Netns::new();
    let (listener, client, server) = pair_in(&ns.name, "127.0.0.1:0", Some(8 * 1024));
    let port = listener.local_addr().unwrap().port();
    let (c_cookie, s_cookie) = (so_cookie(client.as_raw_fd()), so_cookie(server.as_raw_fd()));

    let probe = TcpProbe::start(&TcpProbeOptions::port(port)).expect("start tcp_probe");
    let instance = probe.instance_dir().to_path_buf();
    assert!(instance.is_dir());
    assert!(probe.enabled_events().iter().any(|e| e == "tcp_probe"));
    let t0 = mono_now_ns();

    let mut diag = SockDiag::in_netns(&ns.name).expect("sock_diag in namespace");
    let filter = Filter::port(port);
    // Baseline: the active opener's bytes_acked already counts its SYN (1).
    let base = diag.dump_tcp(&filter).unwrap();
    assert_eq!(base.len(), 2);
    let c_base = by_cookie(&base, c_cookie).tcp_info.unwrap();
    let s_base = by_cookie(&base, s_cookie).tcp_info.unwrap();
    assert_eq!(
        (c_base.bytes_acked, c_base.bytes_received),
        (Some(1), Some(0)),
        "SYN counted in bytes_acked"
    );
    assert_eq!(
        (s_base.bytes_acked, s_base.bytes_received),
        (Some(0), Some(0))
    );

    let (sent, got) = transfer(&client, &server, TOTAL);
    assert_eq!((sent, got), (TOTAL, TOTAL));

    // The last ACK may be delayed; wait until the sender has seen it.
    let deadline = Instant::now() + Duration::from_secs(3);
    let samples = loop {
        let v = diag.dump_tcp(&filter).unwrap();
        let done = v
            .iter()
            .find(|s| s.cookie == c_cookie)
            .and_then(|s| s.tcp_info?.bytes_acked)
            .is_some_and(|b| b == TOTAL as u64 + 1);
        if done || Instant::now() > deadline {
            break v;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let t1 = mono_now_ns();

    // exactly the two connected sockets (LISTEN excluded by default)
    assert_eq!(samples.len(), 2, "{samples:#?}");
    let cs = by_cookie(&samples, c_cookie);
    let ss = by_cookie(&samples, s_cookie);
    assert_eq!(cs.src, client.local_addr().unwrap());
    assert_eq!(cs.dst, client.peer_addr().unwrap());
    assert_eq!(ss.src, server.local_addr().unwrap());
    assert_eq!(
        (cs.family, cs.state),
        (libc::AF_INET as u8, state::ESTABLISHED)
    );
    assert_eq!(cs.inode as u64, inode_of(client.as_raw_fd()));
    assert_eq!(ss.inode as u64, inode_of(server.as_raw_fd()));
    assert_eq!(cs.uid, 0);
    assert!(t0 <= cs.mono_ns && cs.mono_ns <= t1);
    assert!(cs.time_ns > 1_600_000_000_000_000_000);

    let ci = cs.tcp_info.expect("client tcp_info");
    let si = ss.tcp_info.expect("server tcp_info");
    // app-level ground truth
    assert_eq!(
        ci.bytes_acked.unwrap() - c_base.bytes_acked.unwrap(),
        TOTAL as u64
    );
    assert_eq!(
        si.bytes_received.unwrap() - s_base.bytes_received.unwrap(),
        TOTAL as u64
    );
    assert_eq!(si.bytes_acked, Some(0), "nothing sent by the server");
    assert!(ci.bytes_sent.unwrap() >= TOTAL as u64);
    assert_eq!(cs.wqueue, 0, "everything acked");
    assert_eq!(ss.rqueue, 0, "everything read");
    // tiny receive buffer: the sender spent time limited by the peer's window
    assert!(
        ci.rwnd_limited.unwrap() > 0,
        "rwnd_limited = {:?}",
        ci.rwnd_limited
    );
    assert!(ci.busy_time.unwrap() > 0);
    assert!(ss.skmem.unwrap().rcvbuf <= 64 * 1024, "{:?}", ss.skmem);
    assert!(cs.cong_name().is_some_and(|c| !c.is_empty()));
    assert!(ci.snd_cwnd > 0 && ci.rtt > 0);

    // sock_diag and getsockopt agree on what does not change
    for (fd, d) in [(client.as_raw_fd(), ci), (server.as_raw_fd(), si)] {
        let g = getsockopt_tcp_info(fd).unwrap();
        assert_eq!(g.len, d.len, "same struct size from both interfaces");
        assert!(g.len >= 232, "modern kernel expected, got {}", g.len);
        assert_eq!(g.state, d.state);
        assert_eq!(g.options, d.options);
        assert_eq!(g.snd_wscale, d.snd_wscale);
        assert_eq!(g.rcv_wscale, d.rcv_wscale);
        assert_eq!(g.snd_mss, d.snd_mss);
        assert_eq!(g.advmss, d.advmss);
        assert_eq!(g.pmtu, d.pmtu);
        assert_eq!(g.bytes_acked, d.bytes_acked);
        assert_eq!(g.bytes_received, d.bytes_received);
    }

    // the LISTEN socket shows up only when asked for
    let with_listen = diag.dump_tcp(&Filter::port(port).with_listen()).unwrap();
    assert_eq!(
        with_listen
            .iter()
            .filter(|s| s.state == state::LISTEN)
            .count(),
        1
    );
    assert_eq!(with_listen.len(), 3);

    // kernel bytecode and userspace filtering give the same sockets
    let mut a: Vec<u64> = diag
        .dump_tcp(&filter)
        .unwrap()
        .iter()
        .map(|s| s.cookie)
        .collect();
    let mut b: Vec<u64> = diag
        .dump_tcp(&filter.clone().without_kernel_filter())
        .unwrap()
        .iter()
        .map(|s| s.cookie)
        .collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    let only_client = diag
        .dump_tcp(&Filter::new().with_remote_port(port))
        .unwrap();
    assert_eq!(only_client.len(), 1);
    assert_eq!(only_client[0].cookie, c_cookie);
    assert!(diag
        .dump_tcp(&Filter::port(port).ipv6_only())
        .unwrap()
        .is_empty());

    // the host namespace does not see these sockets
    let host = SockDiag::new().unwrap().dump_tcp(&Filter::new()).unwrap();
    assert!(!host
        .iter()
        .any(|s| s.cookie == c_cookie || s.cookie == s_cookie));

    // JSON lines
    for s in &samples {
        let j = serde_json::to_string(s).unwrap();
        assert!(j.contains("\"bytes_acked\":") && !j.contains('\n'));
    }

    // tcp_probe saw this flow, on the same monotonic clock
    std::thread::sleep(Duration::from_millis(50));
    let stats_before = probe.stats();
    let events = probe.stop().expect("stop tcp_probe");
    assert!(
        !instance.exists(),
        "instance {} left behind",
        instance.display()
    );
    let probes: Vec<&TraceEvent> = events
        .iter()
        .filter(|e| matches!(e, TraceEvent::Probe { .. }))
        .collect();
    assert!(
        probes.len() > 100,
        "only {} tcp_probe events (stats {stats_before:?})",
        probes.len()
    );
    for e in &events {
        let (sp, dp) = e.ports();
        assert!(sp == port || dp == port, "event for another flow: {e:?}");
        assert!(
            e.mono_ns() >= t0 - 1_000 && e.mono_ns() <= mono_now_ns(),
            "{e:?} outside [{t0}, now]"
        );
    }
    let mut cookies_seen = std::collections::BTreeSet::new();
    for e in &probes {
        if let TraceEvent::Probe {
            snd_cwnd,
            srtt_us,
            sock_cookie,
            family,
            ..
        } = e
        {
            assert!(*snd_cwnd > 0 && *snd_cwnd < 100_000, "{e:?}");
            assert!(*srtt_us < 1_000_000, "{e:?}");
            assert_eq!(*family, 2);
            cookies_seen.insert(sock_cookie.expect("6.x kernels print sock_cookie"));
        }
    }
    // the probe's cookies are sock_diag's cookies
    assert!(
        cookies_seen.contains(&c_cookie),
        "{cookies_seen:?} vs client {c_cookie}"
    );
    assert!(
        cookies_seen
            .iter()
            .all(|c| *c == c_cookie || *c == s_cookie),
        "{cookies_seen:?}"
    );
    // the sender's ACK-processing events show srtt > 0
    assert!(probes.iter().any(
        |e| matches!(e, TraceEvent::Probe { srtt_us, sport, .. } if *srtt_us > 0 && *sport != port)
    ));
    drop((listener, client, server));
}

#[test]
fn transfer_ipv6_and_family_filter() {
    if !root_or_skip("transfer_ipv6_and_family_filter") {
        return;
    }
    let ns = Netns::new();
    let (listener, client, server) = pair_in(&ns.name, "[::1]:0", None);
    let port = listener.local_addr().unwrap().port();
    let (sent, got) = transfer(&client, &server, 1_000_000);
    assert_eq!(sent, got);

    let mut diag = SockDiag::in_netns_path(format!("/run/netns/{}", ns.name)).unwrap();
    assert!(diag.netns().is_some());
    let v6 = diag.dump_tcp(&Filter::port(port)).unwrap();
    assert_eq!(v6.len(), 2);
    for s in &v6 {
        assert_eq!(s.family, libc::AF_INET6 as u8);
        assert_eq!(s.src.ip(), "::1".parse::<std::net::IpAddr>().unwrap());
        assert_eq!(s.tcp_info.unwrap().state, state::ESTABLISHED);
    }
    let c = v6
        .iter()
        .find(|s| s.src == client.local_addr().unwrap())
        .unwrap();
    // + 1: the active opener's SYN
    assert!(c.tcp_info.unwrap().bytes_acked.unwrap() <= 1_000_001);
    assert!(diag
        .dump_tcp(&Filter::port(port).ipv4_only())
        .unwrap()
        .is_empty());
    let by_addr = diag
        .dump_tcp(
            &Filter::new()
                .with_local_addr("::1".parse().unwrap())
                .with_local_port(port),
        )
        .unwrap();
    assert_eq!(by_addr.len(), 1);
    assert_eq!(by_addr[0].cookie, so_cookie(server.as_raw_fd()));
    let st = diag.stats();
    assert!(
        st.dumps >= 3 && st.records >= 2 && st.skipped_records == 0 && st.truncated_datagrams == 0,
        "{st:?}"
    );
}

#[test]
fn many_sockets_one_dump() {
    if !root_or_skip("many_sockets_one_dump") {
        return;
    }
    // 300 connections = 600 sockets: the dump spans many netlink datagrams.
    let ns = Netns::new();
    let (listener, conns) = tcpwhy_kernel::netns::run_in_netns(&ns.name, || {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        let mut v = Vec::new();
        for _ in 0..300 {
            let c = std::net::TcpStream::connect(l.local_addr()?)?;
            let (s, _) = l.accept()?;
            v.push((c, s));
        }
        Ok((l, v))
    })
    .unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut diag = SockDiag::in_netns(&ns.name).unwrap();
    let before = diag.stats();
    let all = diag.dump_tcp(&Filter::new()).unwrap();
    let after = diag.stats();
    assert_eq!(all.len(), 600);
    assert!(
        after.datagrams - before.datagrams > 2,
        "expected a multi-part dump: {before:?} -> {after:?}"
    );
    assert!(all
        .iter()
        .all(|s| s.tcp_info.is_some() && s.skmem.is_some() && s.cong.is_some()));
    let mut cookies: Vec<u64> = all.iter().map(|s| s.cookie).collect();
    cookies.sort();
    cookies.dedup();
    assert_eq!(cookies.len(), 600);
    // one connection by remote port (the client's ephemeral port)
    let eph = conns[17].0.local_addr().unwrap().port();
    let one = diag
        .dump_tcp(&Filter::new().with_local_port(port).with_remote_port(eph))
        .unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].cookie, so_cookie(conns[17].1.as_raw_fd()));
    // reusing the output vector
    let mut out = Vec::with_capacity(600);
    diag.dump_tcp_into(&Filter::port(port), &mut out).unwrap();
    diag.dump_tcp_into(&Filter::port(port), &mut out).unwrap();
    assert_eq!(out.len(), 1200);
}

#[test]
fn namespace_errors_are_clear() {
    if !root_or_skip("namespace_errors_are_clear") {
        return;
    }
    let name = format!("twk-{}-missing", std::process::id());
    let e = SockDiag::in_netns(&name).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    assert!(e.to_string().contains(&name), "{e}");
    let e = SockDiag::in_netns_path("/etc/hostname").unwrap_err();
    assert!(e.to_string().contains("not a network namespace"), "{e}");
    assert!(SockDiag::in_netns("../x").is_err());
}

/// Cost of sampling 10k sockets (run with --ignored --nocapture).
#[test]
#[ignore]
fn perf_10k_sockets() {
    if !root_or_skip("perf_10k_sockets") {
        return;
    }
    let ns = Netns::new();
    let (_l, _conns) = tcpwhy_kernel::netns::run_in_netns(&ns.name, || {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        let mut v = Vec::new();
        for _ in 0..5000 {
            let c = std::net::TcpStream::connect(l.local_addr()?)?;
            let (s, _) = l.accept()?;
            v.push((c, s));
        }
        Ok((l, v))
    })
    .unwrap();
    let mut diag = SockDiag::in_netns(&ns.name).unwrap();
    let mut out = Vec::with_capacity(10_000);
    let mut f = Filter::new().ipv4_only();
    if let Ok(bits) = std::env::var("TWK_EXT") {
        f = f.with_extensions(bits.parse().unwrap());
    }
    diag.dump_tcp_into(&f, &mut out).unwrap();
    assert_eq!(out.len(), 10_000);
    let n = 50;
    let usage = || unsafe {
        let mut r: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut r);
        (
            (r.ru_utime.tv_sec * 1_000_000 + r.ru_utime.tv_usec) as u64,
            (r.ru_stime.tv_sec * 1_000_000 + r.ru_stime.tv_usec) as u64,
        )
    };
    let (u0, s0) = usage();
    let t = Instant::now();
    for _ in 0..n {
        out.clear();
        diag.dump_tcp_into(&f, &mut out).unwrap();
    }
    let wall = t.elapsed() / n;
    let (u1, s1) = usage();
    let (user, sys) = ((u1 - u0) / n as u64, (s1 - s0) / n as u64);
    eprintln!(
        "10k sockets: {:?} wall, {} µs user + {} µs sys per dump => {:.2}% of a core at 10 Hz; {} datagrams/dump",
        wall,
        user,
        sys,
        (user + sys) as f64 / 100_000.0 * 100.0,
        diag.stats().datagrams / (n as u64 + 1)
    );
}

#[test]
fn bbr_info_from_a_bbr_socket() {
    if !root_or_skip("bbr_info_from_a_bbr_socket") {
        return;
    }
    let avail = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default();
    if !avail.split_whitespace().any(|c| c == "bbr") {
        eprintln!("SKIP bbr_info_from_a_bbr_socket: bbr not available ({avail})");
        return;
    }
    let ns = Netns::new();
    // The namespace inherits the host default (bbr here): make it reno (a
    // non-initial namespace may only pick "allowed" algorithms; reno always is).
    tcpwhy_kernel::sysctl::set_in_netns(&ns.name, "net.ipv4.tcp_congestion_control", "reno")
        .unwrap();
    let (listener, client, server) = pair_in(&ns.name, "127.0.0.1:0", None);
    let port = listener.local_addr().unwrap().port();
    let name = b"bbr";
    let r = unsafe {
        libc::setsockopt(
            client.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr() as *const libc::c_void,
            name.len() as u32,
        )
    };
    assert_eq!(
        r,
        0,
        "TCP_CONGESTION bbr: {}",
        std::io::Error::last_os_error()
    );
    transfer(&client, &server, 5_000_000);
    let v = SockDiag::in_netns(&ns.name)
        .unwrap()
        .dump_tcp(&Filter::port(port))
        .unwrap();
    let c = v
        .iter()
        .find(|s| s.cookie == so_cookie(client.as_raw_fd()))
        .unwrap();
    let s = v
        .iter()
        .find(|s| s.cookie == so_cookie(server.as_raw_fd()))
        .unwrap();
    assert_eq!(c.cong_name(), Some("bbr"));
    let bbr = c.bbr.expect("INET_DIAG_BBRINFO for a bbr socket");
    // min_rtt may be 0: over loopback a round trip can take under a
    // microsecond, and the kernel's rate sample takes it in whole µs
    // (tcp_stamp_us_delta; CI saw min_rtt 0 with bw 65.5 Gbit/s).
    assert!(
        bbr.bw > 0 && bbr.pacing_gain > 0 && bbr.cwnd_gain > 0,
        "{bbr:?}"
    );
    assert!(bbr.min_rtt < 1_000_000, "{bbr:?}");
    assert_eq!(s.cong_name(), Some("reno"));
    assert!(s.bbr.is_none());
}
