//! Helpers shared by the integration tests: run both ends on 127.0.0.1 and
//! decode TCP_INFO with libc's struct.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use tcpwhy_traffic::{from_hex, run_client, run_server, ConnReport, Report, TrafficSpec};

/// Runs server and client of `spec` on loopback; returns (server, client).
pub fn run_pair(spec: &TrafficSpec) -> (Report, Report) {
    let (s, c) = try_pair(spec);
    (s.expect("server"), c.expect("client"))
}

pub fn try_pair(spec: &TrafficSpec) -> (std::io::Result<Report>, std::io::Result<Report>) {
    try_pair_on(spec, "127.0.0.1:0".parse().unwrap())
}

pub fn try_pair_on(spec: &TrafficSpec, listen: SocketAddr) -> (std::io::Result<Report>, std::io::Result<Report>) {
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel::<SocketAddr>();
    std::thread::scope(|s| {
        let server = s.spawn(|| run_server(spec, listen, move |a| tx.send(a).unwrap(), &stop));
        let client = match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(addr) => run_client(spec, addr),
            Err(_) => Err(std::io::Error::other("server never became ready")),
        };
        if client.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        (server.join().unwrap(), client)
    })
}

/// Decodes `tcp_info_hex` into libc's struct (fields the kernel did not
/// return stay zero) and returns the kernel's length too.
pub fn tcp_info(hex: &str) -> (libc::tcp_info, usize) {
    let b = from_hex(hex).expect("hex");
    tcp_info_bytes(&b)
}

pub fn tcp_info_bytes(b: &[u8]) -> (libc::tcp_info, usize) {
    // SAFETY: tcp_info is plain integers; all-zero is valid, and we copy at
    // most its size.
    let mut ti: libc::tcp_info = unsafe { std::mem::zeroed() };
    let n = b.len().min(std::mem::size_of::<libc::tcp_info>());
    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), &mut ti as *mut _ as *mut u8, n) };
    (ti, b.len())
}

/// Pairs each server connection with the client connection at the other end.
pub fn pair_conns<'a>(server: &'a Report, client: &'a Report) -> Vec<(&'a ConnReport, &'a ConnReport)> {
    let by_local: HashMap<SocketAddr, &ConnReport> = client.connections.iter().map(|c| (c.local, c)).collect();
    assert_eq!(server.connections.len(), client.connections.len(), "connection counts differ");
    server
        .connections
        .iter()
        .map(|s| (s, *by_local.get(&s.remote).expect("server conn has a client peer")))
        .collect()
}

pub fn ms_between(a: &tcpwhy_traffic::Stamp, b: &tcpwhy_traffic::Stamp) -> f64 {
    (b.monotonic_ns as f64 - a.monotonic_ns as f64) / 1e6
}
