//! What identifies each connection at one capture point (endpoints, both
//! SYNs with their ISNs and options, the first bytes of each direction's
//! stream, how much each direction carried and when), from the flow
//! table's connection summaries. Memory: one small record per connection.

use std::net::IpAddr;
use tcpwhy_flow::{ConnectionSummary, SynOptions};

/// Payload bytes compared to match the two connections a proxy joins: the
/// first bytes of each direction's stream. 16 bytes survive any snaplen
/// that keeps the headers (IPv6 with TCP timestamps is 86 bytes before the
/// payload; tcpdump's smallest usual snaplen, 96, leaves 10: then fewer are
/// compared, never more than both captures hold).
pub const CONTENT_PREFIX_BYTES: usize = 16;

/// One connection as one capture point saw it.
#[derive(Debug, Clone)]
pub struct Fingerprint {
    /// The flow table's id (the same on a second pass over the same file).
    pub id: u64,
    pub endpoints: [(IpAddr, u16); 2],
    pub first_ns: i64,
    pub last_ns: i64,
    /// Each side's SYN (side 0 sent the SYN when the handshake was seen).
    pub syn: [Option<SynOptions>; 2],
    /// The first captured bytes of each direction's stream (relative
    /// sequence 1; empty when that segment was not captured, and until the
    /// comparison's read fills it: [`crate::stream`]).
    pub prefix: [Vec<u8>; 2],
    /// Highest relative sequence end of data per direction (bytes carried).
    pub bytes: [i64; 2],
    /// First and last data segment per direction.
    pub first_data_ns: [Option<i64>; 2],
    pub last_data_ns: [Option<i64>; 2],
}

impl Fingerprint {
    /// The side that sent the SYN (the client), when the handshake was seen.
    /// (Only the SYN-ACK seen, as in a capture of one direction: the other side.)
    pub fn client(&self) -> Option<usize> {
        match (self.syn[0], self.syn[1]) {
            (Some(s), _) if !s.syn_ack => Some(0),
            (_, Some(s)) if !s.syn_ack => Some(1),
            (Some(_), None) => Some(1),
            (None, Some(_)) => Some(0),
            _ => None,
        }
    }

    /// The client's and the server's ISN, where this point saw them.
    pub fn isns(&self) -> Option<(Option<u32>, Option<u32>)> {
        let c = self.client()?;
        Some((self.syn[c].map(|s| s.isn), self.syn[1 - c].map(|s| s.isn)))
    }

    /// From a connection summary (the read `diagnose` already made),
    /// without the first bytes.
    pub fn from_summary(cs: &ConnectionSummary) -> Option<Fingerprint> {
        let ns = |s: f64| (s * 1e9).round() as i64;
        let addr = |e: &tcpwhy_flow::EndpointSummary| Some((e.addr.parse::<IpAddr>().ok()?, e.port));
        let syn = [cs.directions[0].syn, cs.directions[1].syn];
        let mut fp = Fingerprint {
            id: cs.id,
            endpoints: [addr(&cs.a)?, addr(&cs.b)?],
            first_ns: ns(cs.first_time),
            last_ns: ns(cs.last_time),
            syn,
            prefix: [Vec::new(), Vec::new()],
            bytes: [0, 0],
            first_data_ns: [cs.directions[0].first_data_time.map(ns), cs.directions[1].first_data_time.map(ns)],
            last_data_ns: [cs.directions[0].last_data_time.map(ns), cs.directions[1].last_data_time.map(ns)],
        };
        for d in 0..2 {
            fp.bytes[d] = cs.directions[d].counts.unique_bytes as i64 + 1;
        }
        Some(fp)
    }

    /// When this point saw the SYN, and the SYN-ACK.
    pub fn syn_ns(&self) -> Option<i64> {
        self.syn.iter().flatten().find(|s| !s.syn_ack).map(|s| s.time_ns)
    }

    pub fn synack_ns(&self) -> Option<i64> {
        self.syn.iter().flatten().find(|s| s.syn_ack).map(|s| s.time_ns)
    }

    /// SYN to SYN-ACK at this point: the farther the point from the
    /// server, the longer.
    pub fn handshake_gap_ns(&self) -> Option<i64> {
        Some(self.synack_ns()? - self.syn_ns()?)
    }
}
