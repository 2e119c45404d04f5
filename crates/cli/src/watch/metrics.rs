//! `watch --metrics ADDR:PORT`: the OpenMetrics text format (what
//! Prometheus scrapes) from the `prometheus-client` crate, served by
//! `tiny_http` on a thread of its own.
//!
//! Every name starts with `tcpwhy_`, counters end in `_total`, units are
//! the base units in the name (`_seconds`, `_bytes`). Labels are bounded:
//! `limit` takes one of the cause names of `tcpwhy diagnose` (docs/diagnose.md)
//! or `undiagnosed`, never a connection's addresses.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use std::sync::Arc;

type Labels = Vec<(&'static str, &'static str)>;

/// The label of connections with data whose verdict is not in yet.
pub const UNDIAGNOSED: &str = "undiagnosed";

/// RTT buckets: 100 µs doubling 17 times, to 6.6 s (a LAN to a
/// satellite path with a queue).
const RTT_BUCKET_START_S: f64 = 100e-6;
const RTT_BUCKETS: u16 = 17;
/// Policer-rate buckets: 125 kB/s (1 Mbit/s) doubling 15 times, to
/// 4 GB/s (32 Gbit/s).
const POLICER_BUCKET_START_BPS: f64 = 125e3;
const POLICER_BUCKETS: u16 = 15;

#[derive(Clone)]
pub struct Metrics {
    pub connections: Family<Labels, Gauge>,
    pub limited_bytes: Family<Labels, Counter>,
    pub verdict_changes: Family<Labels, Counter>,
    pub connections_seen: Counter,
    pub connections_evicted: Counter,
    pub rtt: Histogram,
    pub policer_rate: Histogram,
    pub packets: Counter,
    pub kernel_drops: Counter,
    pub interface_drops: Counter,
    pub keep_files: Counter,
}

impl Metrics {
    pub fn new() -> (Metrics, Registry) {
        let m = Metrics {
            connections: Family::default(),
            limited_bytes: Family::default(),
            verdict_changes: Family::default(),
            connections_seen: Counter::default(),
            connections_evicted: Counter::default(),
            rtt: Histogram::new(exponential_buckets(RTT_BUCKET_START_S, 2.0, RTT_BUCKETS)),
            policer_rate: Histogram::new(exponential_buckets(POLICER_BUCKET_START_BPS, 2.0, POLICER_BUCKETS)),
            packets: Counter::default(),
            kernel_drops: Counter::default(),
            interface_drops: Counter::default(),
            keep_files: Counter::default(),
        };
        let mut r = Registry::with_prefix("tcpwhy");
        r.register("connections", "Live connections that carried data, by what limits them now (their busier direction's primary cause)", m.connections.clone());
        r.register_with_unit("limited", "Payload bytes carried, by the limit their connection was under when they were carried", Unit::Bytes, m.limited_bytes.clone());
        r.register("verdict_changes", "Verdicts that turned into this limit (one per direction and change)", m.verdict_changes.clone());
        r.register("connections_seen", "Connections seen (from their first segment)", m.connections_seen.clone());
        r.register("connections_evicted", "Connections retired early to stay within --max-connections", m.connections_evicted.clone());
        r.register_with_unit("rtt", "Round-trip time samples (data to its ACK, Karn's rule) seen on the wire", Unit::Seconds, m.rtt.clone());
        r.register("policer_rate_bytes_per_second", "Token rates of the policers found (one per direction that turned policer)", m.policer_rate.clone());
        r.register("capture_packets", "Packets read from the interface", m.packets.clone());
        r.register("capture_kernel_dropped_packets", "Packets the kernel dropped because tcpwhy fell behind (pcap_stats ps_drop)", m.kernel_drops.clone());
        r.register("capture_interface_dropped_packets", "Packets the interface or its driver dropped (pcap_stats ps_ifdrop)", m.interface_drops.clone());
        r.register("keep_files", "Flight-recorder captures written (--keep)", m.keep_files.clone());
        (m, r)
    }

    pub fn limit(name: &'static str) -> Labels {
        vec![("limit", name)]
    }
}

/// Serves `registry` at http://ADDR/metrics on a thread; the bound address.
pub fn serve(addr: &str, registry: Registry) -> Result<std::net::SocketAddr, String> {
    let server = tiny_http::Server::http(addr).map_err(|e| format!("--metrics {addr}: cannot listen: {e}"))?;
    let bound = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| format!("--metrics {addr}: not an IP address"))?;
    let registry = Arc::new(registry);
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for req in server.incoming_requests() {
                let path = req.url().split('?').next().unwrap_or("");
                let resp = if path == "/metrics" {
                    let mut body = String::new();
                    if encode(&mut body, &registry).is_err() {
                        body.clear();
                    }
                    let ct = tiny_http::Header::from_bytes(
                        &b"Content-Type"[..],
                        &b"application/openmetrics-text; version=1.0.0; charset=utf-8"[..],
                    )
                    .expect("a valid header");
                    tiny_http::Response::from_string(body).with_header(ct)
                } else {
                    tiny_http::Response::from_string("tcpwhy watch: metrics are at /metrics\n").with_status_code(404)
                };
                let _ = req.respond(resp);
            }
        })
        .map_err(|e| format!("--metrics: {e}"))?;
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prometheus's conventions: every name has the tcpwhy_ prefix, counters
    /// end in _total, units are base units, and `limit` takes only the
    /// cause names (bounded cardinality).
    #[test]
    fn names_follow_prometheus_conventions() {
        let (m, r) = Metrics::new();
        for c in tcpwhy_core::Cause::ALL {
            m.connections.get_or_create(&Metrics::limit(c.as_str())).inc();
            m.limited_bytes.get_or_create(&Metrics::limit(c.as_str())).inc_by(10);
        }
        m.rtt.observe(0.02);
        m.policer_rate.observe(8e6);
        let mut text = String::new();
        encode(&mut text, &r).unwrap();
        let mut names = std::collections::BTreeSet::new();
        for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
            let name = line.split(['{', ' ']).next().unwrap();
            assert!(name.starts_with("tcpwhy_"), "{line}");
            names.insert(name.to_string());
        }
        for l in text.lines().filter(|l| l.starts_with("# TYPE")) {
            let mut w = l.split_whitespace().skip(2);
            let (name, kind) = (w.next().unwrap(), w.next().unwrap());
            if kind == "counter" {
                assert!(names.contains(&format!("{name}_total")), "{l}");
            }
        }
        for want in [
            "tcpwhy_connections",
            "tcpwhy_limited_bytes_total",
            "tcpwhy_rtt_seconds_bucket",
            "tcpwhy_policer_rate_bytes_per_second_bucket",
            "tcpwhy_capture_kernel_dropped_packets_total",
            "tcpwhy_connections_evicted_total",
        ] {
            assert!(names.contains(want), "{want} missing from {names:?}");
        }
        assert!(text.contains("tcpwhy_connections{limit=\"receiver_window\"} 1"), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn the_endpoint_serves_the_text_format() {
        let (m, r) = Metrics::new();
        m.packets.inc_by(42);
        let addr = serve("127.0.0.1:0", r).unwrap();
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
        let mut body = String::new();
        s.read_to_string(&mut body).unwrap();
        assert!(body.starts_with("HTTP/1.0 200") || body.starts_with("HTTP/1.1 200"), "{body}");
        assert!(body.contains("application/openmetrics-text"), "{body}");
        assert!(body.contains("tcpwhy_capture_packets_total 42"), "{body}");
        assert!(serve(&addr.to_string(), Metrics::new().1).is_err(), "the port is taken");
    }
}
