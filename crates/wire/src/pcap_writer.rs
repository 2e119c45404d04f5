//! Classic pcap files out, without libpcap: the format every tool reads
//! (tcpdump, Wireshark, and `CaptureReader`). A 24-byte file header with
//! the nanosecond magic (0xa1b23c4d), version 2.4, the snaplen and the link
//! type, then each packet as a 16-byte record header (seconds, nanoseconds,
//! captured length, length on the wire) and its bytes. Fields are written
//! little-endian: readers take either byte order from the magic, and the
//! same packets give the same file on every host.

use crate::link::LinkType;
use std::io::{self, Write};

/// The nanosecond-resolution pcap magic.
pub const PCAP_MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// Bytes of the file header.
pub const PCAP_FILE_HEADER_LEN: u64 = 24;
/// Bytes of each record's header.
pub const PCAP_RECORD_HEADER_LEN: u64 = 16;
/// The largest snaplen libpcap reads back (MAXIMUM_SNAPLEN); a snaplen of
/// 0 or above it is written as this, as pcap_set_snaplen treats it.
pub const PCAP_MAX_SNAPLEN: u32 = 262_144;

/// Writes a pcap file to `out` (buffer it: each record is two writes).
pub struct PcapWriter<W: Write> {
    out: W,
    snaplen: u32,
    written: u64,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header. `link` gives the LINKTYPE_* number
    /// (`LinkType::linktype`); `snaplen` is the most bytes kept of a packet.
    pub fn new(mut out: W, link: LinkType, snaplen: u32) -> io::Result<PcapWriter<W>> {
        let snaplen = if snaplen == 0 || snaplen > PCAP_MAX_SNAPLEN {
            PCAP_MAX_SNAPLEN
        } else {
            snaplen
        };
        let mut h = [0u8; PCAP_FILE_HEADER_LEN as usize];
        h[0..4].copy_from_slice(&PCAP_MAGIC_NANOS.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone and sigfigs (bytes 8..16) are 0.
        h[16..20].copy_from_slice(&snaplen.to_le_bytes());
        h[20..24].copy_from_slice(&link.linktype().to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter {
            out,
            snaplen,
            written: PCAP_FILE_HEADER_LEN,
        })
    }

    /// One packet: captured at `time_ns` (nanoseconds since the Unix
    /// epoch), `orig_len` bytes on the wire, `data` the bytes captured
    /// (cut to the snaplen as a capture would). A time pcap cannot hold
    /// (before 1970, after 2106) is an InvalidInput error.
    pub fn write_packet(&mut self, time_ns: i64, orig_len: u32, data: &[u8]) -> io::Result<()> {
        let secs = u32::try_from(time_ns.div_euclid(1_000_000_000)).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("time {time_ns} ns is outside what pcap holds (1970 to 2106)"),
            )
        })?;
        let nanos = time_ns.rem_euclid(1_000_000_000) as u32;
        let data = &data[..data.len().min(self.snaplen as usize)];
        let caplen = data.len() as u32;
        let mut h = [0u8; PCAP_RECORD_HEADER_LEN as usize];
        h[0..4].copy_from_slice(&secs.to_le_bytes());
        h[4..8].copy_from_slice(&nanos.to_le_bytes());
        h[8..12].copy_from_slice(&caplen.to_le_bytes());
        h[12..16].copy_from_slice(&orig_len.max(caplen).to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(data)?;
        self.written += PCAP_RECORD_HEADER_LEN + caplen as u64;
        Ok(())
    }

    /// Bytes written so far (what the file's size must be once flushed).
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The output, not flushed (a `BufWriter`'s `into_inner` flushes and
    /// tells a failed flush).
    pub fn into_inner(self) -> W {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::CaptureReader;
    use std::path::Path;

    #[test]
    fn the_header_is_the_nanosecond_classic_format() {
        let w = PcapWriter::new(Vec::new(), LinkType::Raw, 256).unwrap();
        let b = w.into_inner();
        assert_eq!(b.len(), 24);
        assert_eq!(&b[0..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        assert_eq!(u16::from_le_bytes([b[4], b[5]]), 2);
        assert_eq!(u16::from_le_bytes([b[6], b[7]]), 4);
        assert_eq!(u32::from_le_bytes(b[16..20].try_into().unwrap()), 256);
        assert_eq!(
            u32::from_le_bytes(b[20..24].try_into().unwrap()),
            101,
            "LINKTYPE_RAW, not DLT_RAW"
        );
        let b = PcapWriter::new(Vec::new(), LinkType::LinuxSll, 0)
            .unwrap()
            .into_inner();
        assert_eq!(
            u32::from_le_bytes(b[16..20].try_into().unwrap()),
            PCAP_MAX_SNAPLEN
        );
        assert_eq!(u32::from_le_bytes(b[20..24].try_into().unwrap()), 113);
    }

    #[test]
    fn the_reader_reads_back_the_same_times_and_lengths() {
        let mut w = PcapWriter::new(Vec::new(), LinkType::Ethernet, 64).unwrap();
        let mut ip = [0u8; 100];
        ip[12] = 0x08;
        ip[14] = 0x45;
        let sent = [
            (1_700_000_000_123_456_789i64, 1514u32, 100usize),
            (1_700_000_001_000_000_001, 60, 60),
            (5, 40, 40),
        ];
        for &(t, len, cap) in &sent {
            w.write_packet(t, len, &ip[..cap]).unwrap();
        }
        assert!(w.write_packet(-1, 40, &ip[..40]).is_err());
        let want = 24 + 16 * 3 + 64 + 60 + 40;
        assert_eq!(w.written(), want);
        let bytes = w.into_inner();
        assert_eq!(bytes.len() as u64, want);
        let r =
            CaptureReader::from_reader(Path::new("mem"), Box::new(io::Cursor::new(bytes))).unwrap();
        let mut got = Vec::new();
        let s = r.for_each_frame(|f| got.push((f.time_ns, f.orig_len, f.data.len(), f.link)));
        assert!(s.error.is_none(), "{:?}", s.error);
        let expect: Vec<_> = sent
            .iter()
            .map(|&(t, len, cap)| (t, len, cap.min(64), LinkType::Ethernet))
            .collect();
        assert_eq!(got, expect);
    }
}
