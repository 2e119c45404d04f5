//! script: each step's bytes from the right end, in order, with its wait.

mod common;
use common::*;

use std::time::Instant;
use tcpwhy_traffic::{validate, ConnRole, End, Kind, Step, TrafficSpec};

fn script(steps: &[(End, u64, f64)]) -> TrafficSpec {
    let mut s = TrafficSpec::new(Kind::Script);
    s.steps = steps.iter().map(|&(from, bytes, wait_ms)| Step { from, bytes, wait_ms, read_pause_ms: 0.0 }).collect();
    s.timeout_s = 30.0;
    s
}

#[test]
fn turns_go_in_order_with_their_bytes_and_waits() {
    // a greeting, a command, a reply after 150 ms, then data in two chunks
    // 200 ms apart and a last reply
    let spec = script(&[
        (End::Server, 23, 0.0),
        (End::Client, 45, 0.0),
        (End::Server, 37, 150.0),
        (End::Client, 300_000, 0.0),
        (End::Client, 200_000, 200.0),
        (End::Server, 6, 0.0),
    ]);
    assert_eq!(spec.data_sender(), End::Client);
    let t0 = Instant::now();
    let (srv, cli) = run_pair(&spec);
    let took = t0.elapsed().as_secs_f64();
    assert!(took >= 0.35, "the waits were skipped: {took:.3} s");
    assert!(took < 5.0, "{took:.3} s");
    let (s, c) = (&srv.connections[0], &cli.connections[0]);
    assert_eq!((c.role, s.role), (ConnRole::Sender, ConnRole::Receiver));
    assert_eq!(c.bytes_sent, 45 + 300_000 + 200_000);
    assert_eq!(s.bytes_received, c.bytes_sent);
    assert_eq!(s.bytes_sent, 23 + 37 + 6);
    assert_eq!(c.bytes_received, s.bytes_sent);
    // the receiver's data span holds the 200 ms pause between the chunks
    let (f, l) = (s.first_byte.unwrap(), s.last_byte.unwrap());
    assert!(l.secs_since(&f) >= 0.19, "{}", l.secs_since(&f));
    // the kernel saw exactly the script's bytes go out at each end
    let (ti, _) = tcp_info(&c.tcp_info_hex);
    assert_eq!(ti.tcpi_bytes_acked - 1 - 1, c.bytes_sent, "client bytes_acked counts SYN and FIN");
}

#[test]
fn a_script_needs_steps_of_bytes_and_waits_in_range() {
    assert!(validate(&TrafficSpec::new(Kind::Script)).is_err());
    assert!(validate(&script(&[(End::Client, 0, 0.0)])).is_err());
    assert!(validate(&script(&[(End::Client, 1, -1.0)])).is_err());
    assert!(validate(&script(&[(End::Client, 1, 40_000.0)])).is_err(), "waits past the timeout");
    assert!(validate(&script(&[(End::Client, 1, 10.0), (End::Server, 1, 0.0)])).is_ok());
    let mut bulk = TrafficSpec::new(Kind::Bulk);
    bulk.bytes = Some(1);
    bulk.steps = vec![Step { from: End::Client, bytes: 1, wait_ms: 0.0, read_pause_ms: 0.0 }];
    assert!(validate(&bulk).is_err(), "steps apply only to a script");
}
