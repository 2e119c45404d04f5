//! Spec validation, socket options reaching the kernel, stop and timeout.

mod common;
use common::*;

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tcpwhy_traffic::{
    available_congestion_controls, from_hex, run_client, run_server, validate, Direction, Error, Kind, Problem, Report,
    TrafficSpec, KNOWN_CONGESTION_CONTROLS,
};

fn err(json: &str) -> String {
    TrafficSpec::from_json(json).expect_err(json).to_string()
}

#[test]
fn defaults() {
    let s = TrafficSpec::from_json(r#"{"kind":"bulk","bytes":1000}"#).unwrap();
    assert_eq!(s, {
        let mut d = TrafficSpec::new(Kind::Bulk);
        d.bytes = Some(1000);
        d
    });
    assert_eq!((s.write_size, s.read_size, s.connections, s.timeout_s), (131072, 131072, 1, 120.0));
    assert_eq!(s.direction, Direction::Download);
    let r = TrafficSpec::from_json(r#"{"kind":"reqresp"}"#).unwrap();
    assert_eq!((r.requests, r.request_bytes, r.response_bytes, r.request_writes), (1, 0, 1 << 20, 1));
    let a = TrafficSpec::from_json(r#"{"kind":"appwindow","bytes":5}"#).unwrap();
    assert_eq!(a.window_bytes, 2 << 20);
    // A full spec round-trips through JSON.
    let full = r#"{"kind":"reqresp","requests":3,"request_bytes":10,"response_bytes":99,"idle_ms":5,
        "connection":"new","service_ms":7,"protocol":"http","request_writes":2,"write_size":1000,
        "read_size":500,"timeout_s":9.5,
        "client":{"congestion":"reno","nodelay":true,"quickack":true,"sndbuf":100000,"rcvbuf":100000,
                  "maxseg":1200,"pacing_rate_bps":8000000,"notsent_lowat":16384},
        "server":{"congestion":"cubic"}}"#;
    let f = TrafficSpec::from_json(full).unwrap();
    let back: TrafficSpec = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
    assert_eq!(back, f);
}

#[test]
fn clear_errors() {
    let e = err(r#"{"kind":"bulk","bytes":1,"byts":2}"#);
    assert!(e.contains("unknown field `byts`"), "{e}");
    let e = err(r#"{"kind":"bulk","bytes":1,"client":{"nodelays":true}}"#);
    assert!(e.contains("unknown field `nodelays`"), "{e}");
    let e = err(r#"{"kind":"stream","bytes":1}"#);
    assert!(e.contains("unknown variant `stream`"), "{e}");
    let e = err(r#"{"kind":"appwindow","bytes":100,"window_bytes":0}"#);
    assert!(e.contains("window_bytes: must be at least 1"), "{e}");
    let e = err(r#"{"kind":"reqresp","requests":0}"#);
    assert!(e.contains("requests: 0 is out of range"), "{e}");
    let e = err(r#"{"kind":"bulk","bytes":1,"server":{"congestion":"foobar"}}"#);
    assert!(e.contains("server.congestion: unknown congestion control \"foobar\""), "{e}");
    let e = err(r#"{"kind":"bulk","bytes":1,"client":{"congestion":"cubic; rm"}}"#);
    assert!(e.contains("client.congestion"), "{e}");
    let e = err(r#"{"kind":"bulk"}"#);
    assert!(e.contains("bulk needs one of them"), "{e}");
    let e = err(r#"{"kind":"bulk","bytes":5,"duration_s":1}"#);
    assert!(e.contains("not both"), "{e}");
    let e = err(r#"{"kind":"bulk","bytes":5,"requests":3}"#);
    assert!(e.contains("requests: applies only to kind reqresp"), "{e}");
    let e = err(r#"{"kind":"reqresp","direction":"upload"}"#);
    assert!(e.contains("direction: applies only to kind bulk/appwindow"), "{e}");
    let e = err(r#"{"kind":"bulk","bytes":5,"write_size":0}"#);
    assert!(e.contains("write_size: 0 bytes is out of range"), "{e}");
    let e = err(r#"{"kind":"bulk","bytes":2,"connections":3}"#);
    assert!(e.contains("bytes: 2 is less than connections"), "{e}");
    let e = err(r#"{"kind":"bulk","bytes":10000000,"app_rate_bps":8000,"timeout_s":10}"#);
    assert!(e.contains("app_rate_bps: 10000000 bytes per connection"), "{e}");
    let e = err(r#"{"kind":"bulk","duration_s":200}"#);
    assert!(e.contains("duration_s: 200 s is not below timeout_s"), "{e}");
    let e = err(r#"{"kind":"bulk","bytes":1,"server":{"maxseg":20}}"#);
    assert!(e.contains("server.maxseg: 20 is out of range"), "{e}");
    let e = err(r#"{"kind":"reqresp","response_bytes":0}"#);
    assert!(e.contains("response_bytes: must be at least 1 with protocol raw"), "{e}");
    // Several problems are reported together.
    let e = err(r#"{"kind":"appwindow","window_bytes":0,"timeout_s":-1}"#);
    assert!(e.contains("window_bytes") && e.contains("timeout_s") && e.contains("bytes: appwindow needs"), "{e}");
    // run_* validate too.
    let mut bad = TrafficSpec::new(Kind::Reqresp);
    bad.requests = 0;
    let e = run_client(&bad, "127.0.0.1:9".parse().unwrap()).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("requests"), "{e}");
    assert!(validate(&TrafficSpec::new(Kind::Reqresp)).is_ok());
}

/// Errors carry their kind: a JSON problem, or the invalid fields one by one.
#[test]
fn errors_carry_their_kind() {
    let e = TrafficSpec::from_json(r#"{"kind":"bulk","bytes":1,"byts":2}"#).unwrap_err();
    assert!(matches!(e, Error::Json(_)), "{e:?}");
    assert!(e.to_string().starts_with("traffic spec: unknown field `byts`"), "{e}");
    let e = TrafficSpec::from_json(r#"{"kind":"appwindow","window_bytes":0,"timeout_s":-1}"#).unwrap_err();
    let Error::Invalid(problems) = &e else { panic!("{e:?}") };
    let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(fields, ["timeout_s", "bytes", "window_bytes"], "{e}");
    assert_eq!(
        e.to_string(),
        "invalid traffic spec: timeout_s: -1 is out of range (0 < timeout_s <= 86400 seconds); \
         bytes: appwindow needs the total bytes; window_bytes: must be at least 1 byte"
    );
    assert_eq!(e.problems(), &problems[..]);
    // run_* keep the error inside their io::Error.
    let mut bad = TrafficSpec::new(Kind::Reqresp);
    bad.requests = 0;
    let io = run_client(&bad, "127.0.0.1:9".parse().unwrap()).unwrap_err();
    let inner = io.get_ref().and_then(|i| i.downcast_ref::<Error>()).expect("inner Error");
    assert_eq!(inner.problems()[0], Problem { field: "requests".into(), message: "0 is out of range (1..=1000000)".into() });
    // tcp_info_hex
    assert!(matches!(from_hex("abc"), Err(Error::OddHex { len: 3 })));
    let e = from_hex("00zz").unwrap_err();
    assert!(matches!(&e, Error::BadHex { at: 2, .. }), "{e:?}");
    assert_eq!(e.to_string(), "bad hex at 2: \"zz\" is not two hex digits");
    assert!(from_hex("aéb").is_err(), "a multi-byte character is refused, not sliced");
    assert_eq!(from_hex("00ff7F").unwrap(), [0, 255, 127]);
}

/// A congestion control Linux has but this kernel does not: validation
/// passes, running fails naming it.
#[test]
fn unavailable_congestion_control_fails_at_run_time() {
    let avail = available_congestion_controls().unwrap_or_default();
    let Some(name) = KNOWN_CONGESTION_CONTROLS.iter().find(|n| !avail.iter().any(|a| a == *n)) else {
        eprintln!("every known congestion control is available here; nothing to test");
        return;
    };
    let mut s = TrafficSpec::new(Kind::Bulk);
    s.bytes = Some(1000);
    s.server.congestion = Some(name.to_string());
    validate(&s).unwrap();
    let e = run_server(&s, "127.0.0.1:0".parse().unwrap(), |_| panic!("must fail before ready"), &AtomicBool::new(false))
        .unwrap_err();
    assert!(e.to_string().contains(&format!("TCP_CONGESTION \"{name}\"")), "{e}");

    let mut c = TrafficSpec::new(Kind::Bulk);
    c.bytes = Some(1000);
    c.client.congestion = Some(name.to_string());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let e = run_client(&c, l.local_addr().unwrap()).unwrap_err();
    assert!(e.to_string().contains(name), "{e}");
}

/// Options reach the kernel: congestion control, buffer sizes, MSS,
/// pacing rate.
#[test]
fn socket_options_are_applied() {
    let mut s = TrafficSpec::new(Kind::Bulk);
    s.bytes = Some(2_000_000);
    s.server.congestion = Some("reno".into());
    s.server.maxseg = Some(1000);
    s.server.sndbuf = Some(300_000);
    s.server.pacing_rate_bps = Some(800_000_000);
    s.server.nodelay = true;
    s.client.congestion = Some("cubic".into());
    s.client.rcvbuf = Some(200_000);
    s.client.quickack = true;
    s.client.notsent_lowat = Some(65536);
    let (srv, cli) = run_pair(&s);
    let (sc, cc) = (&srv.connections[0], &cli.connections[0]);
    assert_eq!(sc.congestion, "reno");
    assert_eq!(cc.congestion, "cubic");
    assert_eq!(sc.sndbuf, 600_000);
    assert_eq!(cc.rcvbuf, 400_000);
    let (ti, _) = tcp_info(&sc.tcp_info_hex);
    assert!(ti.tcpi_snd_mss <= 1000, "snd_mss {}", ti.tcpi_snd_mss);
    assert_eq!(ti.tcpi_max_pacing_rate, 100_000_000, "bits/s converted to bytes/s");
    let (tc, _) = tcp_info(&cc.tcp_info_hex);
    assert_eq!(tc.tcpi_max_pacing_rate, u64::MAX, "client unpaced");
    assert!(tc.tcpi_rcv_mss <= 1000);
}

#[test]
fn server_stops_when_asked() {
    let mut s = TrafficSpec::new(Kind::Bulk);
    s.bytes = Some(1);
    let stop = AtomicBool::new(false);
    let t = Instant::now();
    let e = std::thread::scope(|sc| {
        sc.spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            stop.store(true, Ordering::Relaxed);
        });
        run_server(&s, "127.0.0.1:0".parse().unwrap(), |_| {}, &stop).unwrap_err()
    });
    assert_eq!(e.kind(), std::io::ErrorKind::Interrupted, "{e}");
    assert!(e.to_string().contains("stopped while waiting for connection 1 of 1"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(2));
}

#[test]
fn both_ends_time_out() {
    let mut s = TrafficSpec::new(Kind::Reqresp);
    s.timeout_s = 0.5;
    let t = Instant::now();
    let e = run_server(&s, "127.0.0.1:0".parse().unwrap(), |_| {}, &AtomicBool::new(false)).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
    assert!(e.to_string().contains("timeout_s = 0.5 s"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(2));

    // A peer that accepts (in the kernel) but never answers.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let t = Instant::now();
    let e = run_client(&s, l.local_addr().unwrap()).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
    assert!(e.to_string().contains("reading the response"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(2));
}

#[test]
fn report_json_round_trips() {
    let mut s = TrafficSpec::new(Kind::Reqresp);
    s.requests = 2;
    s.response_bytes = 10;
    let (srv, cli) = run_pair(&s);
    for r in [srv, cli] {
        let j = r.to_json();
        let back: Report = serde_json::from_str(&j).unwrap();
        assert_eq!(back, r);
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert!(v["connections"][0]["tcp_info_hex"].as_str().unwrap().len() >= 2 * 200);
        assert!(v["connections"][0]["start"]["realtime_ns"].as_u64().unwrap() > 1_600_000_000_000_000_000);
    }
}

#[test]
fn ipv6_loopback() {
    if TcpListener::bind("[::1]:0").is_err() {
        eprintln!("no IPv6 loopback here; nothing to test");
        return;
    }
    let mut s = TrafficSpec::new(Kind::Reqresp);
    s.requests = 2;
    s.protocol = tcpwhy_traffic::Protocol::Http;
    s.response_bytes = 5000;
    s.client.rcvbuf = Some(100_000);
    let (srv, cli) = try_pair_on(&s, "[::1]:0".parse().unwrap());
    let (srv, cli) = (srv.unwrap(), cli.unwrap());
    assert!(cli.connections[0].remote.is_ipv6());
    assert_eq!(cli.connections[0].local, srv.connections[0].remote);
    assert_eq!(cli.bytes_received, srv.bytes_sent);
}
