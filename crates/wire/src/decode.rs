//! One frame to one TCP segment: link header, IPv4/IPv6, TCP.

use crate::link::{strip, LinkType, Network};
use crate::tcp::{TcpFlags, TcpOptions};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An IP address, kept as bytes so that hashing and comparing are cheap.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Addr {
    V4([u8; 4]),
    V6([u8; 16]),
}

/// One word per address: the derived hash wrote the variant, the array's
/// length and its bytes, three calls into the hasher for every lookup of
/// the connection table (a capture of many connections at once looks up
/// every packet). Addresses of the two kinds are never equal, so their
/// words need not differ.
impl std::hash::Hash for Addr {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match self {
            Addr::V4(b) => state.write_u32(u32::from_ne_bytes(*b)),
            Addr::V6(b) => state.write_u128(u128::from_ne_bytes(*b)),
        }
    }
}

impl Addr {
    pub fn to_ip(self) -> IpAddr {
        match self {
            Addr::V4(b) => IpAddr::V4(Ipv4Addr::from(b)),
            Addr::V6(b) => IpAddr::V6(Ipv6Addr::from(b)),
        }
    }
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.to_ip().fmt(f)
    }
}

/// Why a frame did not yield a TCP segment. None of these is an error in
/// the capture: they are counted and reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotTcp {
    /// The link type is not one tcpwhy decodes.
    UnsupportedLink,
    /// Not IPv4/IPv6 (ARP, LLC, ...).
    NotIp,
    /// IP carrying something other than TCP (UDP, ICMP, ESP, ...).
    OtherProtocol,
    /// An IPv4 or IPv6 fragment: noted and skipped (TCP segments are not
    /// reassembled from IP fragments).
    Fragment,
    /// The headers are cut short by the snaplen before the fixed TCP header ends.
    Truncated,
    /// A length or version field that cannot be right.
    Malformed,
}

impl NotTcp {
    pub const ALL: [NotTcp; 6] = [
        NotTcp::UnsupportedLink,
        NotTcp::NotIp,
        NotTcp::OtherProtocol,
        NotTcp::Fragment,
        NotTcp::Truncated,
        NotTcp::Malformed,
    ];
    pub fn name(self) -> &'static str {
        match self {
            NotTcp::UnsupportedLink => "unsupported_link",
            NotTcp::NotIp => "not_ip",
            NotTcp::OtherProtocol => "other_protocol",
            NotTcp::Fragment => "ip_fragment",
            NotTcp::Truncated => "truncated_header",
            NotTcp::Malformed => "malformed",
        }
    }
}

/// The meaning of one TCP segment: addresses, header fields, options and
/// the payload length the segment really had on the wire.
#[derive(Debug, Clone, Copy)]
pub struct TcpSegment<'a> {
    pub src: Addr,
    pub dst: Addr,
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: TcpFlags,
    /// The raw 16-bit window field (unscaled).
    pub window: u16,
    pub options: TcpOptions,
    /// Payload bytes the segment carried, from the IP length fields (or from
    /// the frame's original length when the IP length is 0, as with TSO).
    pub payload_len: u32,
    /// The part of the payload that was captured (may be shorter).
    pub payload: &'a [u8],
    /// Payload bytes the capture holds: `payload.len()` as decoded. A
    /// segment passed between threads may carry only the first bytes of
    /// its payload (what its consumer reads); this keeps the true count.
    pub captured: u32,
    /// The IP length field was 0 and the length came from the frame.
    pub length_from_frame: bool,
    /// The IPv4 Identification field (None for IPv6): with the segment's
    /// other fields it tells a frame captured twice from a retransmission,
    /// which every common stack sends with a new ID.
    pub ip_id: Option<u16>,
    /// The TCP checksum as captured (covers the payload even when the
    /// snaplen cut it off).
    pub checksum: u16,
    /// The IPv4 TTL or the IPv6 hop limit as captured: the sender's initial
    /// value less the routers passed before the capture point.
    pub ttl: u8,
    /// IPv4 Don't Fragment (false for IPv6, which has no such bit).
    pub dont_fragment: bool,
}

const PROTO_TCP: u8 = 6;

#[inline]
fn be16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}
#[inline]
fn be32(d: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
}

/// Decodes a frame. `orig_len` is the frame's length on the wire (before
/// the snaplen cut); it is used only when the IP header's own length is 0.
///
/// Inlined with the IPv4 and TCP steps, so that the segment is built in
/// the caller's frame: returned from a call, its 130 bytes were stored
/// piecewise and read back whole, a store-forwarding stall that made up
/// a third of the decoding time (perf annotate, snaplen-128 bench capture).
#[inline(always)]
pub fn decode_frame(link: LinkType, data: &[u8], orig_len: u32) -> Result<TcpSegment<'_>, NotTcp> {
    if !link.is_supported() {
        return Err(NotTcp::UnsupportedLink);
    }
    let (l3, network) = strip(link, data).ok_or(NotTcp::Truncated)?;
    let ip = data.get(l3..).ok_or(NotTcp::Truncated)?;
    let frame_ip_len = (orig_len as usize).saturating_sub(l3);
    let network = match network {
        Network::ByVersion => match ip.first().map(|b| b >> 4) {
            Some(4) => Network::Ipv4,
            Some(6) => Network::Ipv6,
            Some(_) => return Err(NotTcp::NotIp),
            None => return Err(NotTcp::Truncated),
        },
        other => other,
    };
    match network {
        Network::Ipv4 => decode_ipv4(ip, frame_ip_len),
        Network::Ipv6 => decode_ipv6(ip, frame_ip_len),
        _ => Err(NotTcp::NotIp),
    }
}

#[inline(always)]
fn decode_ipv4(ip: &[u8], frame_ip_len: usize) -> Result<TcpSegment<'_>, NotTcp> {
    if ip.len() < 20 {
        return Err(NotTcp::Truncated);
    }
    if ip[0] >> 4 != 4 {
        return Err(NotTcp::Malformed);
    }
    let header_len = ((ip[0] & 0x0f) as usize) * 4;
    if header_len < 20 {
        return Err(NotTcp::Malformed);
    }
    let total_len = be16(ip, 2) as usize;
    let fragment = be16(ip, 6);
    if ip[9] != PROTO_TCP {
        return Err(NotTcp::OtherProtocol);
    }
    // More-fragments set or a non-zero offset: a piece of a datagram.
    if fragment & 0x3fff != 0 {
        return Err(NotTcp::Fragment);
    }
    let (ip_len, from_frame) = if total_len == 0 {
        (frame_ip_len, true)
    } else {
        (total_len, false)
    };
    if ip_len < header_len {
        return Err(NotTcp::Malformed);
    }
    let src = Addr::V4(ip[12..16].try_into().unwrap());
    let dst = Addr::V4(ip[16..20].try_into().unwrap());
    let tcp = ip.get(header_len..).ok_or(NotTcp::Truncated)?;
    let ip_fields = IpFields { id: Some(be16(ip, 4)), ttl: ip[8], dont_fragment: fragment & 0x4000 != 0 };
    decode_tcp(src, dst, tcp, ip_len - header_len, from_frame, ip_fields)
}

#[inline(never)]
fn decode_ipv6(ip: &[u8], frame_ip_len: usize) -> Result<TcpSegment<'_>, NotTcp> {
    if ip.len() < 40 {
        return Err(NotTcp::Truncated);
    }
    if ip[0] >> 4 != 6 {
        return Err(NotTcp::Malformed);
    }
    let payload_len = be16(ip, 4) as usize;
    let (mut remaining, from_frame) = if payload_len == 0 {
        // Jumbogram or BIG TCP: the frame tells the length.
        (frame_ip_len.saturating_sub(40), true)
    } else {
        (payload_len, false)
    };
    let mut next = ip[6];
    let mut offset = 40;
    let src = Addr::V6(ip[8..24].try_into().unwrap());
    let dst = Addr::V6(ip[24..40].try_into().unwrap());
    // Extension headers (RFC 8200 section 4).
    loop {
        match next {
            PROTO_TCP => break,
            // Hop-by-hop, routing, destination options, mobility, HIP, shim6.
            0 | 43 | 60 | 135 | 139 | 140 => {
                let h = ip.get(offset..offset + 2).ok_or(NotTcp::Truncated)?;
                let len = (h[1] as usize + 1) * 8;
                next = h[0];
                offset += len;
                remaining = remaining.checked_sub(len).ok_or(NotTcp::Malformed)?;
            }
            // Fragment header: only an atomic fragment (offset 0, M clear) is whole.
            44 => {
                let h = ip.get(offset..offset + 8).ok_or(NotTcp::Truncated)?;
                if be16(h, 2) & 0xfff9 != 0 {
                    return Err(NotTcp::Fragment);
                }
                next = h[0];
                offset += 8;
                remaining = remaining.checked_sub(8).ok_or(NotTcp::Malformed)?;
            }
            // Authentication header: length in 4-byte units minus 2.
            51 => {
                let h = ip.get(offset..offset + 2).ok_or(NotTcp::Truncated)?;
                let len = (h[1] as usize + 2) * 4;
                next = h[0];
                offset += len;
                remaining = remaining.checked_sub(len).ok_or(NotTcp::Malformed)?;
            }
            _ => return Err(NotTcp::OtherProtocol),
        }
    }
    let tcp = ip.get(offset..).ok_or(NotTcp::Truncated)?;
    decode_tcp(src, dst, tcp, remaining, from_frame, IpFields { id: None, ttl: ip[7], dont_fragment: false })
}

/// The IP header fields a TCP segment keeps.
#[derive(Clone, Copy)]
struct IpFields {
    id: Option<u16>,
    ttl: u8,
    dont_fragment: bool,
}

#[inline(always)]
fn decode_tcp<'a>(
    src: Addr,
    dst: Addr,
    tcp: &'a [u8],
    tcp_len: usize,
    length_from_frame: bool,
    ip: IpFields,
) -> Result<TcpSegment<'a>, NotTcp> {
    if tcp.len() < 20 {
        return Err(NotTcp::Truncated);
    }
    let header_len = ((tcp[12] >> 4) as usize) * 4;
    if header_len < 20 || header_len > tcp_len {
        return Err(NotTcp::Malformed);
    }
    let options_end = header_len.min(tcp.len());
    let mut options = TcpOptions::parse(&tcp[20..options_end]);
    if options_end < header_len {
        options.truncated = true;
    }
    let payload_len = tcp_len - header_len;
    let captured = tcp.get(header_len..).unwrap_or(&[]);
    let payload = &captured[..captured.len().min(payload_len)];
    Ok(TcpSegment {
        src,
        dst,
        src_port: be16(tcp, 0),
        dst_port: be16(tcp, 2),
        seq: be32(tcp, 4),
        ack: be32(tcp, 8),
        flags: TcpFlags(be16(tcp, 12) & 0x01ff),
        window: be16(tcp, 14),
        options,
        payload_len: payload_len as u32,
        payload,
        captured: payload.len() as u32,
        length_from_frame,
        ip_id: ip.id,
        checksum: be16(tcp, 16),
        ttl: ip.ttl,
        dont_fragment: ip.dont_fragment,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4_tcp(total_len: u16, payload: usize) -> Vec<u8> {
        let mut p = vec![0u8; 14 + 20 + 20 + payload];
        p[12] = 0x08;
        p[14] = 0x45;
        p[16..18].copy_from_slice(&total_len.to_be_bytes());
        p[18..20].copy_from_slice(&0x1234u16.to_be_bytes());
        p[23] = 6;
        p[26..30].copy_from_slice(&[10, 0, 0, 1]);
        p[30..34].copy_from_slice(&[10, 0, 0, 2]);
        let t = 34;
        p[t..t + 2].copy_from_slice(&40000u16.to_be_bytes());
        p[t + 2..t + 4].copy_from_slice(&80u16.to_be_bytes());
        p[t + 4..t + 8].copy_from_slice(&1000u32.to_be_bytes());
        p[t + 12] = 5 << 4;
        p[t + 13] = 0x18;
        p[t + 14..t + 16].copy_from_slice(&512u16.to_be_bytes());
        p
    }

    #[test]
    fn ethernet_ipv4_tcp() {
        let frame = ipv4_tcp(40 + 100, 100);
        let s = decode_frame(LinkType::Ethernet, &frame, frame.len() as u32).unwrap();
        assert_eq!(s.src.to_string(), "10.0.0.1");
        assert_eq!(
            (s.src_port, s.dst_port, s.seq, s.window),
            (40000, 80, 1000, 512)
        );
        assert_eq!(s.payload_len, 100);
        assert!(s.flags.ack() && s.flags.psh());
        assert_eq!(s.ip_id, Some(0x1234));
    }

    #[test]
    fn snaplen_cut_keeps_wire_length() {
        let frame = ipv4_tcp(40 + 1400, 1400);
        let s = decode_frame(LinkType::Ethernet, &frame[..80], frame.len() as u32).unwrap();
        assert_eq!(s.payload_len, 1400);
        assert_eq!(s.payload.len(), 80 - 54);
    }

    #[test]
    fn ip_total_length_zero_uses_frame_length() {
        let frame = ipv4_tcp(0, 80_000);
        let s = decode_frame(LinkType::Ethernet, &frame, frame.len() as u32).unwrap();
        assert_eq!(s.payload_len, 80_000);
        assert!(s.length_from_frame);
    }

    #[test]
    fn ethernet_padding_is_not_payload() {
        let mut frame = ipv4_tcp(40, 0);
        frame.extend_from_slice(&[0; 6]);
        let s = decode_frame(LinkType::Ethernet, &frame, frame.len() as u32).unwrap();
        assert_eq!(s.payload_len, 0);
    }

    #[test]
    fn qinq_tags_are_skipped() {
        let inner = ipv4_tcp(40, 0);
        let mut frame = inner[..12].to_vec();
        frame.extend_from_slice(&[0x88, 0xa8, 0, 10, 0x81, 0x00, 0, 20]);
        frame.extend_from_slice(&inner[12..]);
        let s = decode_frame(LinkType::Ethernet, &frame, frame.len() as u32).unwrap();
        assert_eq!(s.dst_port, 80);
    }

    #[test]
    fn fragments_are_skipped() {
        let mut frame = ipv4_tcp(40, 0);
        frame[20] = 0x20; // MF
        assert_eq!(
            decode_frame(LinkType::Ethernet, &frame, 54).unwrap_err(),
            NotTcp::Fragment
        );
    }

    #[test]
    fn garbage_never_panics() {
        let links = [
            LinkType::Ethernet,
            LinkType::Raw,
            LinkType::Null,
            LinkType::Loop,
            LinkType::LinuxSll,
            LinkType::LinuxSll2,
            LinkType::Ipv6,
        ];
        let mut x: u32 = 12345;
        for len in 0..200usize {
            let mut buf = vec![0u8; len];
            for b in buf.iter_mut() {
                x = x.wrapping_mul(1103515245).wrapping_add(12345);
                *b = (x >> 16) as u8;
            }
            if len > 14 {
                buf[12] = 0x08;
                buf[13] = 0;
                buf[14] = 0x45;
            }
            for link in links {
                let _ = decode_frame(link, &buf, x % 70000);
            }
        }
    }
}
