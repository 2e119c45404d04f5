//! reqresp: connection reuse vs new, raw and HTTP, service time, idle gaps.

mod common;
use common::*;

use std::collections::HashSet;

use tcpwhy_traffic::{ConnRole, ConnectionMode, Kind, Protocol, TrafficSpec, RAW_REQUEST_HEADER};

fn rr(requests: u32, connection: ConnectionMode, protocol: Protocol) -> TrafficSpec {
    let mut s = TrafficSpec::new(Kind::Reqresp);
    s.requests = requests;
    s.connection = connection;
    s.protocol = protocol;
    s.request_bytes = 100;
    s.response_bytes = 200_000;
    s.write_size = 50_000;
    s.timeout_s = 30.0;
    s
}

/// Checks what holds for every reqresp run; returns the distinct client ports.
fn check_common(spec: &TrafficSpec) -> usize {
    let (srv, cli) = run_pair(spec);
    let n = spec.requests as usize;
    assert_eq!(cli.requests.len(), n);
    assert_eq!(srv.served.len(), n);
    assert!(cli.served.is_empty() && srv.requests.is_empty());
    // Both ends agree on every byte.
    assert_eq!(cli.bytes_sent, srv.bytes_received);
    assert_eq!(cli.bytes_received, srv.bytes_sent);
    for (c, s) in pair_conns(&srv, &cli).iter().map(|(s, c)| (*c, *s)) {
        assert_eq!(c.role, ConnRole::Requester);
        assert_eq!(s.role, ConnRole::Responder);
        assert_eq!(c.bytes_sent, s.bytes_received);
        assert_eq!(c.bytes_received, s.bytes_sent);
        assert_eq!(c.requests, s.requests);
        let (ti, _) = tcp_info(&s.tcp_info_hex);
        assert_eq!(ti.tcpi_bytes_received, s.bytes_received + 1, "server tcpi_bytes_received (+FIN)");
    }
    for (i, (r, sv)) in cli.requests.iter().zip(&srv.served).enumerate() {
        assert_eq!(r.index as usize, i);
        assert_eq!(r.response_body_bytes, spec.response_bytes);
        assert_eq!(r.request_bytes, sv.request_bytes);
        assert_eq!(r.response_bytes, sv.response_bytes);
        assert_eq!((r.local_port, r.remote_port), (sv.remote_port, sv.local_port));
        match spec.protocol {
            Protocol::Raw => {
                assert_eq!(r.request_bytes, RAW_REQUEST_HEADER as u64 + spec.request_bytes);
                assert_eq!(r.response_bytes, spec.response_bytes);
            }
            Protocol::Http => {
                assert!(r.request_bytes > spec.request_bytes + 30);
                assert!(r.response_bytes > spec.response_bytes + 30);
            }
        }
        // Client-side order of events.
        let t = [
            r.connect_start.map(|s| s.monotonic_ns).unwrap_or(0),
            r.connected.map(|s| s.monotonic_ns).unwrap_or(0),
            r.request_start.monotonic_ns,
            r.request_sent.monotonic_ns,
            r.first_response_byte.monotonic_ns,
            r.last_response_byte.monotonic_ns,
        ];
        assert!(t.windows(2).all(|w| w[0] <= w[1]), "client times out of order: {t:?}");
        // Causal order across the ends (one host, one monotonic clock): a
        // byte is read only after the other end started writing it. (Not
        // "write returned before the peer read": on loopback the peer can
        // read before write() returns.)
        assert!(sv.request_first_byte.monotonic_ns >= r.request_start.monotonic_ns);
        assert!(sv.response_start.monotonic_ns >= sv.request_received.monotonic_ns);
        assert!(r.first_response_byte.monotonic_ns >= sv.response_start.monotonic_ns);
        assert!(r.last_response_byte.monotonic_ns >= sv.response_start.monotonic_ns);
        // The kernel's receive timestamps (SO_TIMESTAMPNS, CLOCK_REALTIME)
        // lie between the peer's start of writing and this end's read.
        // Every request has them, the first too: the server turns stamping
        // on and waits for the kernel's deferred work that makes it live
        // (net_enable_timestamp) before it lets the client connect.
        let stamps = (r.last_response_byte_kernel_ns, sv.request_first_byte_kernel_ns, sv.request_received_kernel_ns);
        assert!(stamps.0.is_some() && stamps.1.is_some() && stamps.2.is_some(), "request {i}: {stamps:?}");
        if let (Some(k_last), Some(k_first), Some(k_recv)) = stamps {
            assert!(sv.response_start.realtime_ns <= k_last && k_last <= r.last_response_byte.realtime_ns);
            assert!(r.request_start.realtime_ns <= k_first && k_first <= k_recv);
            assert!(k_first <= sv.request_first_byte.realtime_ns && k_recv <= sv.request_received.realtime_ns);
        }
        // Realtime stamps are close to now (same epoch as packet captures).
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
        assert!(now - r.request_start.realtime_ns < 60_000_000_000);
    }
    let ports: HashSet<u16> = cli.requests.iter().map(|r| r.local_port).collect();
    assert_eq!(cli.connections.len(), ports.len());
    let opened = cli.requests.iter().filter(|r| r.connect_start.is_some()).count();
    assert_eq!(opened, ports.len());
    ports.len()
}

#[test]
fn raw_reuse_uses_one_connection() {
    assert_eq!(check_common(&rr(5, ConnectionMode::Reuse, Protocol::Raw)), 1);
}

#[test]
fn raw_new_uses_a_connection_per_request() {
    assert_eq!(check_common(&rr(5, ConnectionMode::New, Protocol::Raw)), 5);
}

#[test]
fn http_reuse_round_trips() {
    assert_eq!(check_common(&rr(4, ConnectionMode::Reuse, Protocol::Http)), 1);
    let mut get = rr(3, ConnectionMode::Reuse, Protocol::Http);
    get.request_bytes = 0; // GET without a body
    get.response_bytes = 0; // empty body: header only
    assert_eq!(check_common(&get), 1);
}

#[test]
fn http_new_round_trips() {
    assert_eq!(check_common(&rr(4, ConnectionMode::New, Protocol::Http)), 4);
}

#[test]
fn split_requests_arrive_whole() {
    let mut s = rr(3, ConnectionMode::Reuse, Protocol::Raw);
    s.request_writes = 3;
    s.request_bytes = 10;
    check_common(&s);
    let mut h = rr(2, ConnectionMode::Reuse, Protocol::Http);
    h.request_writes = 7;
    check_common(&h);
}

#[test]
fn service_time_shows_in_timings() {
    for protocol in [Protocol::Raw, Protocol::Http] {
        let mut s = rr(3, ConnectionMode::Reuse, protocol);
        s.service_ms = 60;
        s.response_bytes = 1000;
        let (srv, cli) = run_pair(&s);
        for (r, sv) in cli.requests.iter().zip(&srv.served) {
            let wait = ms_between(&r.request_sent, &r.first_response_byte);
            assert!(wait >= 60.0, "first byte {wait} ms after the request");
            assert!(wait < 1000.0, "first byte {wait} ms after the request");
            assert!(ms_between(&sv.request_received, &sv.response_start) >= 60.0);
        }
    }
}

#[test]
fn idle_gaps_are_respected() {
    for connection in [ConnectionMode::Reuse, ConnectionMode::New] {
        let mut s = rr(4, connection, Protocol::Raw);
        s.idle_ms = 80;
        s.response_bytes = 1000;
        let (_srv, cli) = run_pair(&s);
        for w in cli.requests.windows(2) {
            let next = w[1].connect_start.unwrap_or(w[1].request_start);
            let gap = ms_between(&w[0].last_response_byte, &next);
            assert!((80.0..1000.0).contains(&gap), "{connection:?}: gap {gap} ms");
            if connection == ConnectionMode::New {
                assert!(w[1].connect_start.is_some());
            } else {
                assert!(w[1].connect_start.is_none());
            }
        }
    }
}
