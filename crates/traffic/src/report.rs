//! What a run saw: each end's [`Report`], its connections and requests,
//! stamped on both clocks.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use crate::clock::{stamp, Stamp};
use crate::spec::{Kind, TrafficSpec};

/// Which end ran.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Server,
    Client,
}

/// What this end did on one connection.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ConnRole {
    /// Sent the data (bulk, appwindow).
    Sender,
    /// Received the data (bulk, appwindow).
    Receiver,
    /// Sent requests (reqresp client).
    Requester,
    /// Answered requests (reqresp server).
    Responder,
}

/// One connection as seen by this end.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
pub struct ConnReport {
    /// Client: the order connections were opened in (0-based); server: the
    /// order they were accepted in. Match ends by address, not index.
    pub index: u32,
    pub role: ConnRole,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// Application bytes written (including reqresp framing / HTTP headers
    /// and appwindow ACKs).
    pub bytes_sent: u64,
    /// Application bytes read (same conventions).
    pub bytes_received: u64,
    /// Client: just before connect(); server: when accept() returned.
    pub start: Stamp,
    /// Client: connect() completed (handshake done); server: = `start`.
    pub connected: Stamp,
    /// Sender: just before the first write(); receiver: when the first
    /// read() returning data returned; requester: the first request's
    /// `request_start`; responder: the first request's first byte read.
    /// None if no data.
    pub first_byte: Option<Stamp>,
    /// Sender: when the last write() returned (data queued, not yet
    /// delivered); receiver: when the read() that returned the last data
    /// byte returned; requester: the last response byte read; responder:
    /// when the last response write() returned.
    pub last_byte: Option<Stamp>,
    /// After the closing handshake as seen by this end (EOF read, TCP_INFO
    /// taken), just before close().
    pub end: Stamp,
    /// Receiver only (bulk, appwindow): goodput in bits/s = 8 ×
    /// bytes_received / (last_byte − first_byte) on the monotonic clock.
    /// The bytes of the first read count although they arrived before
    /// `first_byte`, so it overestimates by at most one `read_size` per
    /// transfer. None for other roles or if the interval is empty.
    pub goodput_bps: Option<f64>,
    /// appwindow: application ACKs sent (receiver) or received (sender) on
    /// this connection; 0 otherwise.
    pub app_acks: u64,
    /// reqresp: requests carried by this connection; 0 otherwise.
    pub requests: u32,
    /// The socket's congestion control (getsockopt TCP_CONGESTION).
    pub congestion: String,
    /// getsockopt SO_SNDBUF at the end (the kernel's doubled value).
    pub sndbuf: u32,
    /// getsockopt SO_RCVBUF at the end (the kernel's doubled value).
    pub rcvbuf: u32,
    /// Raw getsockopt(TCP_INFO) bytes (512 requested; as many as the kernel
    /// returned), lower-case hex, taken after the closing handshake just
    /// before close(): by the sender after the receiver's EOF (all data
    /// acknowledged), by the receiver after the sender's EOF.
    pub tcp_info_hex: String,
}

/// One reqresp request as timed by the client.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
pub struct RequestTiming {
    /// 0-based request number.
    pub index: u32,
    /// `ConnReport::index` of the connection used.
    pub conn_index: u32,
    pub local_port: u16,
    pub remote_port: u16,
    /// Just before connect(), if this request opened its connection.
    pub connect_start: Option<Stamp>,
    /// Handshake done, if this request opened its connection.
    pub connected: Option<Stamp>,
    /// Just before the request's first write().
    pub request_start: Stamp,
    /// When the request's last write() returned.
    pub request_sent: Stamp,
    /// When the first read() returning response bytes returned.
    pub first_response_byte: Stamp,
    /// When the read() returning the last response byte returned.
    pub last_response_byte: Stamp,
    /// CLOCK_REALTIME ns at which the kernel received the segment carrying
    /// the last response byte (SO_TIMESTAMPNS: the skb timestamp a capture
    /// on this host shows), unshifted by when this process woke up to read
    /// it. None if the kernel gave no timestamp (a host's first timestamping
    /// socket turns skb timestamps on through deferred work: the first
    /// segments can arrive before).
    #[serde(default)]
    pub last_response_byte_kernel_ns: Option<u64>,
    /// Request bytes written, framing/headers included.
    pub request_bytes: u64,
    /// Response bytes read, headers included.
    pub response_bytes: u64,
    /// Response payload (body) bytes.
    pub response_body_bytes: u64,
}

impl RequestTiming {
    /// Seconds from `start` (one of this request's stamps) to the arrival of
    /// the last response byte: by the kernel's receive timestamp when it
    /// gave one, which a late wake-up of the client does not shift, else by
    /// the client's clock when its read() returned.
    pub fn last_byte_secs_since(&self, start: &Stamp) -> f64 {
        match self.last_response_byte_kernel_ns {
            Some(k) => (k as f64 - start.realtime_ns as f64) / 1e9,
            None => self.last_response_byte.secs_since(start),
        }
    }
}

/// One reqresp request as handled by the server.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
pub struct ServedRequest {
    /// 0-based order in which the server read requests.
    pub index: u32,
    pub conn_index: u32,
    pub local_port: u16,
    pub remote_port: u16,
    /// When the read() returning the request's first byte returned.
    pub request_first_byte: Stamp,
    /// When the read() completing the request returned.
    pub request_received: Stamp,
    /// CLOCK_REALTIME ns at which the kernel received the last segment the
    /// first read() of the request copied from (SO_TIMESTAMPNS): the
    /// arrival of the request's first piece when it came alone.
    #[serde(default)]
    pub request_first_byte_kernel_ns: Option<u64>,
    /// CLOCK_REALTIME ns at which the kernel received the segment carrying
    /// the request's last byte (SO_TIMESTAMPNS).
    #[serde(default)]
    pub request_received_kernel_ns: Option<u64>,
    /// After the service_ms wait, just before the response's first write().
    pub response_start: Stamp,
    /// When the response's last write() returned.
    pub response_written: Stamp,
    /// Request bytes read, framing/headers included.
    pub request_bytes: u64,
    /// Response bytes written, headers included.
    pub response_bytes: u64,
}

/// What one end did.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
pub struct Report {
    pub role: Role,
    pub kind: Kind,
    /// The spec this end ran.
    pub spec: TrafficSpec,
    /// When run_server / run_client started (server: before binding).
    pub start: Stamp,
    /// When it finished.
    pub end: Stamp,
    /// Sum over connections.
    pub bytes_sent: u64,
    /// Sum over connections.
    pub bytes_received: u64,
    /// Receiver only (bulk, appwindow): 8 × total bytes received / (latest
    /// `last_byte` − earliest `first_byte`) over all connections.
    pub goodput_bps: Option<f64>,
    /// appwindow: application ACKs over all connections.
    pub app_acks: u64,
    /// In the order of `ConnReport::index`.
    pub connections: Vec<ConnReport>,
    /// reqresp client: one per request, in order. Empty otherwise.
    pub requests: Vec<RequestTiming>,
    /// reqresp server: one per request, in order. Empty otherwise.
    pub served: Vec<ServedRequest>,
}

impl Report {
    pub(crate) fn new(role: Role, spec: &TrafficSpec, start: Stamp, mut connections: Vec<ConnReport>) -> Report {
        connections.sort_by_key(|c| c.index);
        let received: u64 = connections.iter().map(|c| c.bytes_received).sum();
        let rx: Vec<&ConnReport> = connections.iter().filter(|c| c.role == ConnRole::Receiver).collect();
        let goodput_bps = if rx.is_empty() {
            None
        } else {
            let first = rx.iter().filter_map(|c| c.first_byte).map(|s| s.monotonic_ns).min();
            let last = rx.iter().filter_map(|c| c.last_byte).map(|s| s.monotonic_ns).max();
            match (first, last) {
                (Some(f), Some(l)) if l > f => Some(received as f64 * 8.0 / ((l - f) as f64 / 1e9)),
                _ => None,
            }
        };
        Report {
            role,
            kind: spec.kind,
            spec: spec.clone(),
            start,
            end: stamp(),
            bytes_sent: connections.iter().map(|c| c.bytes_sent).sum(),
            bytes_received: received,
            goodput_bps,
            app_acks: connections.iter().map(|c| c.app_acks).sum(),
            connections,
            requests: Vec::new(),
            served: Vec::new(),
        }
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("report serializes")
    }
}
