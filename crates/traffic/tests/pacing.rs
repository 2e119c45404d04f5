//! Pacing: application-level (app_rate_bps) and kernel (SO_MAX_PACING_RATE)
//! hold goodput within 10% of the target over a 2-second transfer.

mod common;
use common::*;

use tcpwhy_traffic::{Direction, Kind, TrafficSpec};

const RATE_BPS: u64 = 80_000_000; // 10 MB/s
const SECS: f64 = 2.0;

fn spec(direction: Direction) -> TrafficSpec {
    let mut s = TrafficSpec::new(Kind::Bulk);
    s.bytes = Some((RATE_BPS as f64 / 8.0 * SECS) as u64);
    s.direction = direction;
    s.write_size = 65_536;
    s.timeout_s = 30.0;
    s
}

fn assert_near(what: &str, got: f64) {
    let err = (got - RATE_BPS as f64).abs() / RATE_BPS as f64;
    eprintln!("{what}: {:.2} Mbit/s ({:+.1}%)", got / 1e6, (got / RATE_BPS as f64 - 1.0) * 100.0);
    assert!(err < 0.10, "{what}: goodput {got} bits/s is {:.1}% off {RATE_BPS}", err * 100.0);
}

#[test]
fn app_rate_limits_goodput() {
    let mut s = spec(Direction::Upload);
    s.app_rate_bps = Some(RATE_BPS);
    let (srv, cli) = run_pair(&s);
    assert_eq!(srv.bytes_received, s.bytes.unwrap());
    assert_near("app_rate_bps, receiver", srv.goodput_bps.unwrap());
    let c = &cli.connections[0];
    let secs = c.last_byte.unwrap().secs_since(&c.first_byte.unwrap());
    assert!((SECS * 0.9..SECS * 1.1).contains(&secs), "sender wrote for {secs} s");
}

#[test]
fn kernel_pacing_limits_goodput() {
    let mut s = spec(Direction::Download);
    s.server.pacing_rate_bps = Some(RATE_BPS);
    let (srv, cli) = run_pair(&s);
    assert_eq!(cli.bytes_received, s.bytes.unwrap());
    assert_near("SO_MAX_PACING_RATE, receiver", cli.goodput_bps.unwrap());
    let (ti, _) = tcp_info(&srv.connections[0].tcp_info_hex);
    assert_eq!(ti.tcpi_max_pacing_rate, RATE_BPS / 8);
}
