//! The first pass over each capture: what identifies each connection
//! (endpoints, both SYNs with their ISNs and options, the first bytes of
//! each direction's stream, how much each direction carried and when).
//! Memory: one small record per connection, as the flow table's summaries.

use foldhash::HashMap;
use std::net::IpAddr;
use tcpwhy_flow::{Connection, ConnectionSummary, SegmentEvent, SegmentSink, SynOptions};

/// Payload bytes compared to match the two connections a proxy joins: the
/// first bytes of each direction's stream. 16 bytes survive any snaplen
/// that keeps the headers (IPv6 with TCP timestamps is 86 bytes before the
/// payload; tcpdump's smallest usual snaplen, 96, leaves 10: then fewer are
/// compared, never more than both captures hold).
pub const CONTENT_PREFIX_BYTES: usize = 16;

/// TCP header flags (RFC 9293).
pub(crate) const SYN: u16 = 0x02;
pub(crate) const ACK: u16 = 0x10;
pub(crate) const FIN: u16 = 0x01;

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
    /// The time of the first SYN and of the first SYN-ACK at this point.
    pub syn_ns: Option<i64>,
    pub synack_ns: Option<i64>,
    /// The first captured bytes of each direction's stream (relative
    /// sequence 1; empty when that segment was not captured).
    pub prefix: [Vec<u8>; 2],
    /// Highest relative sequence end of data per direction (bytes carried).
    pub bytes: [i64; 2],
    /// First and last data segment per direction.
    pub first_data_ns: [Option<i64>; 2],
    pub last_data_ns: [Option<i64>; 2],
    pub frames: u64,
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

    /// The same from a diagnosis's connection summary (the pass `diagnose`
    /// already made), without the first bytes: those are read on the
    /// comparison's pass ([`crate::stream`]).
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
            syn_ns: None,
            synack_ns: None,
            prefix: [Vec::new(), Vec::new()],
            bytes: [0, 0],
            first_data_ns: [cs.directions[0].first_data_time.map(ns), cs.directions[1].first_data_time.map(ns)],
            last_data_ns: [cs.directions[0].last_data_time.map(ns), cs.directions[1].last_data_time.map(ns)],
            frames: cs.directions.iter().map(|d| d.counts.packets).sum(),
        };
        for d in 0..2 {
            fp.bytes[d] = cs.directions[d].counts.unique_bytes as i64 + 1;
            if let Some(s) = syn[d] {
                if s.syn_ack {
                    fp.synack_ns = Some(s.time_ns);
                } else {
                    fp.syn_ns = Some(s.time_ns);
                }
            }
        }
        Some(fp)
    }

    /// SYN to SYN-ACK at this point: the farther the point from the
    /// server, the longer.
    pub fn handshake_gap_ns(&self) -> Option<i64> {
        Some(self.synack_ns? - self.syn_ns?)
    }
}

/// The pass-1 sink.
#[derive(Default)]
pub struct Fingerprints {
    pub by_id: HashMap<u64, Fingerprint>,
}

impl SegmentSink for Fingerprints {
    fn segment(&mut self, c: &Connection, e: &SegmentEvent) {
        let fp = self.by_id.entry(c.id).or_insert_with(|| Fingerprint {
            id: c.id,
            endpoints: [(c.endpoints[0].0.to_ip(), c.endpoints[0].1), (c.endpoints[1].0.to_ip(), c.endpoints[1].1)],
            first_ns: e.time_ns,
            last_ns: e.time_ns,
            syn: [None, None],
            syn_ns: None,
            synack_ns: None,
            prefix: [Vec::new(), Vec::new()],
            bytes: [0, 0],
            first_data_ns: [None, None],
            last_data_ns: [None, None],
            frames: 0,
        });
        fp.frames += 1;
        fp.last_ns = fp.last_ns.max(e.time_ns);
        let d = e.direction;
        if e.tcp_flags & SYN != 0 {
            fp.syn[d] = c.dirs[d].syn;
            if e.tcp_flags & ACK != 0 {
                fp.synack_ns.get_or_insert(e.time_ns);
            } else {
                fp.syn_ns.get_or_insert(e.time_ns);
            }
        }
        if e.payload_len > 0 {
            fp.bytes[d] = fp.bytes[d].max(e.seq + e.payload_len as i64);
            fp.first_data_ns[d].get_or_insert(e.time_ns);
            fp.last_data_ns[d] = Some(e.time_ns);
        }
    }

    fn payload(&mut self, c: &Connection, e: &SegmentEvent, payload: &[u8]) {
        // the stream's first bytes, when the handshake fixed where it starts
        if e.seq != 1 || c.dirs[e.direction].syn.is_none() {
            return;
        }
        if let Some(fp) = self.by_id.get_mut(&c.id) {
            let p = &mut fp.prefix[e.direction];
            if p.len() < payload.len().min(CONTENT_PREFIX_BYTES) {
                *p = payload[..payload.len().min(CONTENT_PREFIX_BYTES)].to_vec();
            }
        }
    }

    fn payload_prefix(&self) -> usize {
        CONTENT_PREFIX_BYTES
    }
}
