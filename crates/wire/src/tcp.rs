//! The TCP header (RFC 9293 section 3.1) and the options tcpwhy reads:
//! MSS (RFC 9293 3.2), window scale and timestamps (RFC 7323), SACK-permitted
//! and SACK blocks (RFC 2018).

/// TCP control bits, as in the header's flags byte (plus NS/AE in bit 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpFlags(pub u16);

impl TcpFlags {
    pub const FIN: u16 = 0x001;
    pub const SYN: u16 = 0x002;
    pub const RST: u16 = 0x004;
    pub const PSH: u16 = 0x008;
    pub const ACK: u16 = 0x010;
    pub const URG: u16 = 0x020;
    pub const ECE: u16 = 0x040;
    pub const CWR: u16 = 0x080;

    #[inline]
    pub fn fin(self) -> bool {
        self.0 & Self::FIN != 0
    }
    #[inline]
    pub fn syn(self) -> bool {
        self.0 & Self::SYN != 0
    }
    #[inline]
    pub fn rst(self) -> bool {
        self.0 & Self::RST != 0
    }
    #[inline]
    pub fn ack(self) -> bool {
        self.0 & Self::ACK != 0
    }
    #[inline]
    pub fn psh(self) -> bool {
        self.0 & Self::PSH != 0
    }
}

/// A SACK block: the left edge and the right edge (one past the last byte),
/// as raw 32-bit sequence numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SackBlock {
    pub left: u32,
    pub right: u32,
}

/// At most four SACK blocks fit in the 40 bytes of option space.
pub const MAX_SACK_BLOCKS: usize = 4;

/// The options of one segment. Absent options are `None` / `false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpOptions {
    pub mss: Option<u16>,
    pub window_scale: Option<u8>,
    pub sack_permitted: bool,
    /// (TSval, TSecr).
    pub timestamp: Option<(u32, u32)>,
    pub sack_blocks: [SackBlock; MAX_SACK_BLOCKS],
    pub sack_count: u8,
    /// Options were cut by the snaplen or malformed; what was read before
    /// that point is kept.
    pub truncated: bool,
    /// The kinds in the order they came, padding included (p0f's "olayout").
    pub layout: OptionLayout,
}

/// The kinds of a segment's first [`OptionLayout::MAX`] options in the
/// order they came, NOPs and End-of-Option-List included: the order is a
/// stack's signature (Linux writes MSS, SACK-permitted, timestamps, NOP,
/// window scale; Windows MSS, NOP, window scale, NOP, NOP, SACK-permitted).
/// Packed one kind per byte, as kind + 1 (0: no option).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OptionLayout(pub u64);

impl OptionLayout {
    pub const MAX: usize = 8;
    /// NOP, NOP, timestamps: every Linux segment after the handshake.
    const NOP_NOP_TS: OptionLayout = OptionLayout(2 | 2 << 8 | 9 << 16);

    fn push(&mut self, kind: u8, at: usize) {
        if at < Self::MAX {
            self.0 |= (kind.wrapping_add(1) as u64) << (8 * at);
        }
    }

    /// The kinds, in order.
    pub fn kinds(&self) -> impl Iterator<Item = u8> + '_ {
        (0..Self::MAX).map(|i| (self.0 >> (8 * i)) as u8).take_while(|&b| b != 0).map(|b| b.wrapping_sub(1))
    }

    /// p0f's spelling: "mss,sok,ts,nop,ws", "eol" for End-of-Option-List,
    /// "?N" for other kinds.
    pub fn describe(&self) -> String {
        let names: Vec<String> = self
            .kinds()
            .map(|k| match k {
                0 => "eol".into(),
                1 => "nop".into(),
                2 => "mss".into(),
                3 => "ws".into(),
                4 => "sok".into(),
                5 => "sack".into(),
                8 => "ts".into(),
                k => format!("?{k}"),
            })
            .collect();
        names.join(",")
    }
}

impl TcpOptions {
    #[inline]
    pub fn sacks(&self) -> &[SackBlock] {
        &self.sack_blocks[..self.sack_count as usize]
    }

    /// Parses the option bytes. Stops at End-of-Option-List, at a malformed
    /// length, or at the end of the captured bytes.
    #[inline]
    pub fn parse(bytes: &[u8]) -> TcpOptions {
        // The layout Linux puts on every segment after the handshake when
        // timestamps are on: NOP, NOP, TS (RFC 7323 Appendix A). Measured to
        // matter: most segments of a bulk transfer take this path.
        if let [1, 1, 8, 10, a, b, c, d, e, f, g, h] = *bytes {
            return TcpOptions {
                timestamp: Some((
                    u32::from_be_bytes([a, b, c, d]),
                    u32::from_be_bytes([e, f, g, h]),
                )),
                layout: OptionLayout::NOP_NOP_TS,
                ..TcpOptions::default()
            };
        }
        Self::parse_any(bytes)
    }

    fn parse_any(mut bytes: &[u8]) -> TcpOptions {
        let mut opts = TcpOptions::default();
        let mut at = 0;
        while let Some(&kind) = bytes.first() {
            opts.layout.push(kind, at);
            at += 1;
            match kind {
                0 => {
                    // Padding after the list: count every End-of-Option-List
                    // byte (p0f's "eol+N"), up to the layout's room.
                    for _ in bytes.iter().skip(1).take_while(|&&b| b == 0) {
                        opts.layout.push(0, at);
                        at += 1;
                    }
                    break;
                }
                1 => {
                    bytes = &bytes[1..];
                    continue;
                }
                _ => {}
            }
            let Some(&len) = bytes.get(1) else {
                opts.truncated = true;
                break;
            };
            let len = len as usize;
            if len < 2 {
                opts.truncated = true;
                break;
            }
            let Some(body) = bytes.get(2..len) else {
                opts.truncated = true;
                break;
            };
            match (kind, body.len()) {
                (2, 2) => opts.mss = Some(u16::from_be_bytes([body[0], body[1]])),
                (3, 1) => opts.window_scale = Some(body[0]),
                (4, 0) => opts.sack_permitted = true,
                (5, n) if n % 8 == 0 => {
                    // Several SACK options in one list (never in a real
                    // 40-byte option space) keep only the first four blocks.
                    let room = MAX_SACK_BLOCKS - opts.sack_count as usize;
                    for chunk in body.chunks_exact(8).take(room) {
                        opts.sack_blocks[opts.sack_count as usize] = SackBlock {
                            left: u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]),
                            right: u32::from_be_bytes([chunk[4], chunk[5], chunk[6], chunk[7]]),
                        };
                        opts.sack_count += 1;
                    }
                }
                (8, 8) => {
                    opts.timestamp = Some((
                        u32::from_be_bytes([body[0], body[1], body[2], body[3]]),
                        u32::from_be_bytes([body[4], body[5], body[6], body[7]]),
                    ))
                }
                _ => {}
            }
            bytes = &bytes[len..];
        }
        opts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_linux_syn_options() {
        // mss 1460, sackOK, TS val 1 ecr 0, nop, wscale 7
        let bytes = [
            2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7,
        ];
        let o = TcpOptions::parse(&bytes);
        assert_eq!(o.mss, Some(1460));
        assert!(o.sack_permitted);
        assert_eq!(o.timestamp, Some((1, 0)));
        assert_eq!(o.window_scale, Some(7));
        assert!(!o.truncated);
        assert_eq!(o.layout.describe(), "mss,sok,ts,nop,ws");
    }

    #[test]
    fn the_layout_keeps_padding_and_order() {
        // macOS: mss, nop, ws 6, nop, nop, ts, sok, eol, eol.
        let bytes = [
            2, 4, 0x05, 0xb4, 1, 3, 3, 6, 1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 4, 2, 0, 0,
        ];
        let o = TcpOptions::parse(&bytes);
        assert_eq!(o.layout.describe(), "mss,nop,ws,nop,nop,ts,sok,eol");
        // The fast path of a data segment keeps its layout too.
        let ts = [1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2];
        assert_eq!(TcpOptions::parse(&ts).layout.describe(), "nop,nop,ts");
        assert_eq!(TcpOptions::parse(&ts).layout, TcpOptions::parse_any(&ts).layout);
    }

    #[test]
    fn many_sack_options_keep_four_blocks() {
        // Found by cargo fuzz: two SACK options of three blocks each.
        let mut bytes = vec![];
        for _ in 0..2 {
            bytes.extend_from_slice(&[5, 26]);
            bytes.extend_from_slice(&[0u8; 24]);
        }
        assert_eq!(TcpOptions::parse(&bytes).sacks().len(), MAX_SACK_BLOCKS);
    }

    #[test]
    fn parses_sack_blocks_and_stops_at_bad_length() {
        let bytes = [
            1, 1, 5, 18, 0, 0, 0, 10, 0, 0, 0, 20, 0, 0, 0, 30, 0, 0, 0, 40, 8, 1,
        ];
        let o = TcpOptions::parse(&bytes);
        assert_eq!(
            o.sacks(),
            &[
                SackBlock {
                    left: 10,
                    right: 20
                },
                SackBlock {
                    left: 30,
                    right: 40
                }
            ]
        );
        assert!(o.truncated);
    }
}
