//! The packet log's columns (`crate::packets::PacketLog`): one value per
//! analysed segment in each, and what thinning them (`crate::thin`) keeps.

use std::collections::HashMap;

/// Sentinel for "no value" in the i64 / u64 columns.
pub const NONE_I64: i64 = i64::MIN;
pub const NONE_U64: u64 = u64::MAX;

/// One row per analysed segment.
#[derive(Default, Debug)]
pub struct Columns {
    pub frame: Vec<u64>,
    pub time_ns: Vec<i64>,
    pub connection: Vec<u64>,
    /// 0: sent by endpoint a, 1: by endpoint b.
    pub direction: Vec<u8>,
    pub tcp_flags: Vec<u16>,
    /// tcpwhy analysis flags (`tcpwhy_flow::Flags` bits).
    pub flags: Vec<u32>,
    /// Relative sequence number.
    pub seq: Vec<i64>,
    pub len: Vec<u32>,
    /// Relative ACK number, [`NONE_I64`] when the ACK flag is not set.
    pub ack: Vec<i64>,
    /// Advertised window in bytes.
    pub window: Vec<u64>,
    /// Bytes in flight after a data segment, [`NONE_U64`] otherwise.
    pub in_flight: Vec<u64>,
    /// RTT sample this ACK produced, ns; [`NONE_I64`] when none.
    pub rtt_ns: Vec<i64>,
    /// SACK scoreboard rows: (packet row, left, right).
    pub sack: Vec<(u32, i64, i64)>,
    /// Per connection: (bucket origin ns, bucket width ns) once thinned.
    pub thinned_width: HashMap<u64, (i64, i64)>,
    /// Rows before this index are thinned at their connection's width.
    pub(crate) thin_clean: usize,
}

impl Columns {
    pub fn len(&self) -> usize {
        self.frame.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frame.is_empty()
    }
}
