//! Link layers: find where the IP header starts and which IP version it is.

/// The link types tcpwhy decodes (LINKTYPE_* values from the tcpdump.org list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkType {
    /// LINKTYPE_NULL (0): 4-byte address family in the capturing host's byte order.
    Null,
    /// LINKTYPE_ETHERNET (1).
    Ethernet,
    /// LINKTYPE_RAW (101), and the historical DLT_RAW values 12 and 14.
    Raw,
    /// LINKTYPE_LOOP (108): like NULL but the family is in network byte order.
    Loop,
    /// LINKTYPE_LINUX_SLL (113): Linux cooked capture v1.
    LinuxSll,
    /// LINKTYPE_IPV4 (228).
    Ipv4,
    /// LINKTYPE_IPV6 (229).
    Ipv6,
    /// LINKTYPE_LINUX_SLL2 (276): Linux cooked capture v2.
    LinuxSll2,
    /// Anything else; the number is kept for the message.
    Other(i32),
}

impl LinkType {
    pub fn from_linktype(value: i32) -> LinkType {
        match value {
            0 => LinkType::Null,
            1 => LinkType::Ethernet,
            12 | 14 | 101 => LinkType::Raw,
            108 => LinkType::Loop,
            113 => LinkType::LinuxSll,
            228 => LinkType::Ipv4,
            229 => LinkType::Ipv6,
            276 => LinkType::LinuxSll2,
            other => LinkType::Other(other),
        }
    }

    /// The LINKTYPE_* number a capture file stores for this link (raw IP
    /// as LINKTYPE_RAW, 101, whatever DLT the interface reported).
    pub fn linktype(self) -> u32 {
        match self {
            LinkType::Null => 0,
            LinkType::Ethernet => 1,
            LinkType::Raw => 101,
            LinkType::Loop => 108,
            LinkType::LinuxSll => 113,
            LinkType::Ipv4 => 228,
            LinkType::Ipv6 => 229,
            LinkType::LinuxSll2 => 276,
            LinkType::Other(n) => n as u32,
        }
    }

    pub fn is_supported(self) -> bool {
        !matches!(self, LinkType::Other(_))
    }
}

pub(crate) const ETHERTYPE_IPV4: u16 = 0x0800;
pub(crate) const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_QINQ: u16 = 0x88a8;
const ETHERTYPE_QINQ_OLD: u16 = 0x9100;

/// What a link header says about the packet it carries.
pub(crate) enum Network {
    Ipv4,
    Ipv6,
    /// A version nibble decides (raw IP).
    ByVersion,
    Other,
}

#[inline]
fn be16(data: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*data.get(at)?, *data.get(at + 1)?]))
}

fn from_ethertype(ethertype: u16) -> Network {
    match ethertype {
        ETHERTYPE_IPV4 => Network::Ipv4,
        ETHERTYPE_IPV6 => Network::Ipv6,
        _ => Network::Other,
    }
}

/// BSD address families for IPv4 and the several values used for IPv6
/// (BSD 24, FreeBSD 28, Darwin 30, Linux 10).
fn from_family(family: u32) -> Network {
    match family {
        2 => Network::Ipv4,
        10 | 24 | 28 | 30 => Network::Ipv6,
        _ => Network::Other,
    }
}

/// Returns the offset of the network header and what it is, or `None` if
/// the link header itself is cut short.
#[inline]
pub(crate) fn strip(link: LinkType, data: &[u8]) -> Option<(usize, Network)> {
    match link {
        LinkType::Ethernet => {
            let mut offset = 12;
            let mut ethertype = be16(data, offset)?;
            // 802.1Q and QinQ: any stack of tags.
            while matches!(
                ethertype,
                ETHERTYPE_VLAN | ETHERTYPE_QINQ | ETHERTYPE_QINQ_OLD
            ) {
                offset += 4;
                ethertype = be16(data, offset)?;
            }
            Some((offset + 2, from_ethertype(ethertype)))
        }
        LinkType::LinuxSll => Some((16, from_ethertype(be16(data, 14)?))),
        LinkType::LinuxSll2 => {
            let ethertype = be16(data, 0)?;
            if data.len() < 20 {
                return None;
            }
            Some((20, from_ethertype(ethertype)))
        }
        LinkType::Null => {
            let raw: [u8; 4] = data.get(..4)?.try_into().ok()?;
            // Written in the capturing host's byte order; the family is a
            // small number, so whichever order gives one below 256 is right.
            let le = u32::from_le_bytes(raw);
            let family = if le < 256 {
                le
            } else {
                u32::from_be_bytes(raw)
            };
            Some((4, from_family(family)))
        }
        LinkType::Loop => {
            let raw: [u8; 4] = data.get(..4)?.try_into().ok()?;
            Some((4, from_family(u32::from_be_bytes(raw))))
        }
        LinkType::Raw => Some((0, Network::ByVersion)),
        LinkType::Ipv4 => Some((0, Network::Ipv4)),
        LinkType::Ipv6 => Some((0, Network::Ipv6)),
        LinkType::Other(_) => Some((0, Network::Other)),
    }
}
