//! bulk: exact byte counts both ways with parallel connections, duration
//! mode, and a slow reader driving the sender into zero windows.

mod common;
use common::*;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tcpwhy_traffic::{run_server, tcp_info_raw, ConnRole, Direction, Kind, Role, TrafficSpec};

fn bulk(bytes: u64, connections: u32, direction: Direction) -> TrafficSpec {
    let mut s = TrafficSpec::new(Kind::Bulk);
    s.bytes = Some(bytes);
    s.connections = connections;
    s.direction = direction;
    s.write_size = 100_003; // not a divisor of anything: exercises short final writes
    s.read_size = 65_521;
    s.timeout_s = 60.0;
    s
}

fn check_exact(direction: Direction) {
    let total = 12_000_007u64;
    let spec = bulk(total, 3, direction);
    let (srv, cli) = run_pair(&spec);
    assert_eq!((srv.role, cli.role), (Role::Server, Role::Client));
    let (snd, rcv) = match direction {
        Direction::Download => (&srv, &cli),
        Direction::Upload => (&cli, &srv),
    };
    assert_eq!(snd.bytes_sent, total);
    assert_eq!(snd.bytes_received, 0);
    assert_eq!(rcv.bytes_received, total);
    assert_eq!(rcv.bytes_sent, 0);
    assert_eq!(snd.connections.len(), 3);
    assert!(rcv.goodput_bps.unwrap() > 0.0);
    assert!(snd.goodput_bps.is_none());

    let mut shares: Vec<u64> = snd.connections.iter().map(|c| c.bytes_sent).collect();
    shares.sort();
    assert_eq!(shares, vec![4_000_002, 4_000_002, 4_000_003]);

    let mut ports = std::collections::HashSet::new();
    for (s, c) in pair_conns(&srv, &cli) {
        assert!(ports.insert(c.local.port()));
        let (tx, rx) = if direction == Direction::Download { (s, c) } else { (c, s) };
        assert_eq!(tx.role, ConnRole::Sender);
        assert_eq!(rx.role, ConnRole::Receiver);
        assert_eq!(tx.bytes_sent, rx.bytes_received);
        // The kernel agrees: the receiver's TCP counted exactly these bytes
        // (tcpi_bytes_received counts sequence space after the SYN, so the
        // FIN adds one) and the sender's peer acknowledged them all.
        let (ti_rx, len) = tcp_info(&rx.tcp_info_hex);
        assert!(len >= 200, "TCP_INFO only {len} bytes");
        let (ti_tx, _) = tcp_info(&tx.tcp_info_hex);
        assert_eq!(ti_rx.tcpi_bytes_received, rx.bytes_received + 1, "receiver tcpi_bytes_received");
        // bytes_acked covers the FIN, and on the connecting side the SYN too.
        let syn = u64::from(std::ptr::eq(tx, c)); // the sender is the client
        assert_eq!(ti_tx.tcpi_bytes_acked, tx.bytes_sent + 1 + syn, "sender tcpi_bytes_acked");
        // bytes_sent counts payload including retransmissions.
        assert_eq!(ti_tx.tcpi_bytes_sent - ti_tx.tcpi_bytes_retrans, tx.bytes_sent, "sender tcpi_bytes_sent");
        // Times are ordered on both clocks.
        for r in [s, c] {
            let f = r.first_byte.unwrap();
            let l = r.last_byte.unwrap();
            assert!(r.start.monotonic_ns <= r.connected.monotonic_ns);
            assert!(r.connected.monotonic_ns <= f.monotonic_ns);
            assert!(f.monotonic_ns <= l.monotonic_ns && l.monotonic_ns <= r.end.monotonic_ns);
            assert!(f.realtime_ns <= l.realtime_ns);
        }
    }
}

#[test]
fn download_exact_bytes_parallel() {
    check_exact(Direction::Download);
}

#[test]
fn upload_exact_bytes_parallel() {
    check_exact(Direction::Upload);
}

#[test]
fn duration_mode_counts_match() {
    let mut spec = TrafficSpec::new(Kind::Bulk);
    spec.duration_s = Some(0.5);
    spec.connections = 2;
    spec.app_rate_bps = Some(80_000_000); // keep the loopback from eating both cores
    spec.timeout_s = 30.0;
    let t = Instant::now();
    let (srv, cli) = run_pair(&spec);
    let el = t.elapsed().as_secs_f64();
    assert!((0.45..5.0).contains(&el), "took {el} s");
    assert!(srv.bytes_sent > 1_000_000);
    assert_eq!(srv.bytes_sent, cli.bytes_received);
    for (s, c) in pair_conns(&srv, &cli) {
        assert_eq!(s.bytes_sent, c.bytes_received);
        let d = s.last_byte.unwrap().secs_since(&s.first_byte.unwrap());
        assert!((0.4..1.5).contains(&d), "sender wrote for {d} s");
    }
}

/// Slow reader with a small receive buffer, both ends from the library: the
/// sender's kernel reports most of its busy time as receive-window limited.
#[test]
fn slow_reader_makes_sender_rwnd_limited() {
    let mut spec = TrafficSpec::new(Kind::Bulk);
    spec.bytes = Some(100_000);
    spec.read_size = 2_000;
    spec.read_rate_bps = Some(400_000); // 50 kB/s: 2 s
    spec.client.rcvbuf = Some(4096);
    spec.timeout_s = 30.0;
    let (srv, cli) = run_pair(&spec);
    assert_eq!(cli.bytes_received, 100_000);
    let c = &cli.connections[0];
    let s = &srv.connections[0];
    let secs = c.last_byte.unwrap().secs_since(&c.first_byte.unwrap());
    assert!((1.6..4.0).contains(&secs), "read for {secs} s");
    let (ti, _) = tcp_info(&s.tcp_info_hex);
    eprintln!(
        "sender busy {} us rwnd_limited {} us sndbuf_limited {} us; receiver rcvbuf {}",
        ti.tcpi_busy_time, ti.tcpi_rwnd_limited, ti.tcpi_sndbuf_limited, c.rcvbuf
    );
    assert_eq!(c.rcvbuf, 8192, "SO_RCVBUF 4096 doubled by the kernel");
    assert!(ti.tcpi_rwnd_limited > 1_000_000, "rwnd_limited {} us", ti.tcpi_rwnd_limited);
    assert!(ti.tcpi_rwnd_limited * 2 > ti.tcpi_busy_time, "rwnd-limited less than half the busy time");
}

/// The library's slow reader against a plain sender that samples its own
/// TCP_INFO: the peer's advertised window (tcpi_snd_wnd) reaches zero.
#[test]
fn slow_reader_advertises_zero_window() {
    let mut spec = TrafficSpec::new(Kind::Bulk);
    spec.direction = Direction::Upload;
    spec.bytes = Some(100_000);
    spec.read_size = 2_000;
    spec.read_rate_bps = Some(400_000);
    spec.server.rcvbuf = Some(4096);
    spec.timeout_s = 30.0;
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel();
    let done = AtomicBool::new(false);
    let done = &done;
    let (report, min_wnd, samples, zero_samples) = std::thread::scope(|sc| {
        let h = sc.spawn(|| run_server(&spec, "127.0.0.1:0".parse().unwrap(), move |a| tx.send(a).unwrap(), &stop));
        let addr = rx.recv().unwrap();
        let mut s = TcpStream::connect(addr).unwrap();
        let probe = s.try_clone().unwrap();
        let sampler = sc.spawn(move || {
            let (mut min, mut n, mut zeros) = (u32::MAX, 0u32, 0u32);
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let b = tcp_info_raw(&probe).unwrap();
                assert!(b.len() >= 232, "kernel too old for tcpi_snd_wnd");
                let (ti, _) = tcp_info_bytes(&b);
                // Only while data is outstanding or queued.
                if ti.tcpi_notsent_bytes > 0 || ti.tcpi_unacked > 0 {
                    min = min.min(ti.tcpi_snd_wnd);
                    zeros += u32::from(ti.tcpi_snd_wnd == 0);
                    n += 1;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            (min, n, zeros)
        });
        s.write_all(&vec![0u8; 100_000]).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).unwrap();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let (min, n, zeros) = sampler.join().unwrap();
        (h.join().unwrap().unwrap(), min, n, zeros)
    });
    eprintln!("snd_wnd min {min_wnd} over {samples} samples, {zero_samples} at zero");
    assert_eq!(report.bytes_received, 100_000);
    assert!(samples > 100, "only {samples} samples");
    assert_eq!(min_wnd, 0, "the sender never saw a zero window");
    assert!(zero_samples * 4 > samples, "zero window in only {zero_samples} of {samples} samples");
}
