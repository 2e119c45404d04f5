//! appwindow: exact bytes and one application ACK per window.

mod common;
use common::*;

use tcpwhy_traffic::{ConnRole, Direction, Kind, TrafficSpec, APP_ACK_BYTES};

fn aw(bytes: u64, window: u64, direction: Direction, connections: u32) -> TrafficSpec {
    let mut s = TrafficSpec::new(Kind::Appwindow);
    s.bytes = Some(bytes);
    s.window_bytes = window;
    s.direction = direction;
    s.connections = connections;
    s.write_size = 16_384;
    s.timeout_s = 30.0;
    s
}

fn check(spec: &TrafficSpec) {
    let (srv, cli) = run_pair(spec);
    let total = spec.bytes.unwrap();
    let (snd, rcv) = match spec.direction {
        Direction::Download => (&srv, &cli),
        Direction::Upload => (&cli, &srv),
    };
    let expected_acks: u64 = (0..spec.connections)
        .map(|i| spec.bytes_for_connection(i).unwrap().div_ceil(spec.window_bytes))
        .sum();
    assert_eq!(snd.bytes_sent, total);
    assert_eq!(rcv.bytes_received, total);
    assert_eq!(snd.app_acks, expected_acks);
    assert_eq!(rcv.app_acks, expected_acks);
    assert_eq!(rcv.bytes_sent, expected_acks * APP_ACK_BYTES as u64);
    assert_eq!(snd.bytes_received, expected_acks * APP_ACK_BYTES as u64);
    for (s, c) in pair_conns(&srv, &cli) {
        let (tx, rx) = if spec.direction == Direction::Download { (s, c) } else { (c, s) };
        assert_eq!((tx.role, rx.role), (ConnRole::Sender, ConnRole::Receiver));
        assert_eq!(tx.bytes_sent, rx.bytes_received);
        assert_eq!(tx.app_acks, tx.bytes_sent.div_ceil(spec.window_bytes));
        assert_eq!(tx.app_acks, rx.app_acks);
        // The receiver's kernel saw exactly the ACK bytes go out (+FIN).
        let (ti, _) = tcp_info(&rx.tcp_info_hex);
        assert_eq!(ti.tcpi_bytes_sent - ti.tcpi_bytes_retrans, rx.bytes_sent);
    }
}

#[test]
fn partial_last_window() {
    check(&aw(1_000_000, 65_536, Direction::Download, 1)); // 16 ACKs, last window 16_960 bytes
}

#[test]
fn exact_multiple_upload() {
    check(&aw(4 * 65_536, 65_536, Direction::Upload, 1)); // 4 ACKs
}

#[test]
fn window_larger_than_transfer() {
    check(&aw(10_000, 1 << 20, Direction::Download, 1)); // 1 ACK
}

#[test]
fn parallel_connections() {
    check(&aw(300_001, 100_000, Direction::Download, 2)); // 150_001 + 150_000: 2 + 2 ACKs
}

/// Stop-and-wait per window: with 4000-byte windows and a receiver reading
/// 4000 bytes per 50 ms, the sender cannot write window k before the
/// receiver has read k − 1 windows; the 9th read is paced 8 × 50 ms after
/// the 1st, so the last write comes about 0.4 s after the first (about 0
/// without the waits: 40 kB fit in the socket buffers).
#[test]
fn sender_waits_for_each_ack() {
    let mut s = aw(40_000, 4_000, Direction::Download, 1);
    // 10 windows; the sender is rate limited only by the ACKs it waits for,
    // and the receiver reads 4000 bytes per 50 ms.
    s.read_size = 4_000;
    s.read_rate_bps = Some(640_000);
    let (srv, _cli) = run_pair(&s);
    let c = &srv.connections[0];
    assert_eq!(c.app_acks, 10);
    let secs = c.last_byte.unwrap().secs_since(&c.first_byte.unwrap());
    assert!(secs >= 0.35, "sender finished after {secs} s: it did not wait for ACKs");
}
