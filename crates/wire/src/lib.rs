//! Capture files in, TCP segments out.
//!
//! `wire` knows two things: how packets are stored (pcap with micro- or
//! nanosecond timestamps in either byte order, pcapng with several
//! interfaces, each possibly gzip/xz/zstd-compressed, or read from stdin) and
//! how the headers inside a frame are laid out (Ethernet with 802.1Q/QinQ,
//! Linux cooked v1/v2, raw IP, BSD loopback; IPv4 with options, IPv6 with
//! extension headers; TCP with its options).
//!
//! It does not know what a connection is: that is the `flow` crate's job.
//!
//! Decoding is zero-copy and never trusts a length field: every read is
//! bounds-checked against the captured bytes. Captures cut by a snaplen,
//! IPv4 total length 0 (TSO/BIG TCP as seen by a local capture) and
//! super-segments larger than the MSS (TSO/GRO) are normal input; the payload
//! length of a segment comes from the IP header when it is valid and from the
//! frame's original length otherwise, never from what happens to be captured.

mod capture;
mod decode;
mod link;
mod pcap_writer;
mod tcp;

pub use capture::{
    sniff_capture, CaptureError, CaptureFormat, CaptureReader, CaptureSummary, Frame, MappedPcap, ReadProgress, Sniffed,
    StretchRead,
};
pub use decode::{decode_frame, Addr, NotTcp, TcpSegment};
pub use link::LinkType;
pub use pcap_writer::{
    PcapWriter, PCAP_FILE_HEADER_LEN, PCAP_MAGIC_NANOS, PCAP_MAX_SNAPLEN, PCAP_RECORD_HEADER_LEN,
};
pub use tcp::{OptionLayout, SackBlock, TcpFlags, TcpOptions, MAX_SACK_BLOCKS};
