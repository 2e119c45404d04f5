//! Per-segment analysis flags. Each has the meaning of the Wireshark field
//! named in its doc (`tcp.analysis.*`), except where noted: tcpwhy calls a
//! segment out-of-order only if its bytes were never seen before, and a
//! retransmission whenever they were (Wireshark decides by a timer and calls
//! quick retransmissions out-of-order).

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags(pub u32);

macro_rules! flags {
    ($($(#[$doc:meta])* $name:ident = $bit:expr, $json:literal;)*) => {
        impl Flags {
            $($(#[$doc])* pub const $name: Flags = Flags(1 << $bit);)*
            /// (flag, JSON name) for every flag, in a stable order.
            pub const ALL: &'static [(Flags, &'static str)] = &[$((Flags::$name, $json)),*];
        }
    };
}

flags! {
    /// `tcp.analysis.retransmission`: data (or SYN/FIN) below the highest
    /// sequence already sent. Also set on fast and spurious retransmissions,
    /// as in Wireshark.
    RETRANSMISSION = 0, "retransmission";
    /// `tcp.analysis.fast_retransmission`: at the sequence the receiver has
    /// acknowledged at least twice more (duplicate ACKs), within 20 ms of the last one.
    FAST_RETRANSMISSION = 1, "fast_retransmission";
    /// `tcp.analysis.spurious_retransmission`: the bytes were already
    /// cumulatively acknowledged when retransmitted; tcpwhy also sets it when
    /// the receiver later reports them with a D-SACK (RFC 2883).
    SPURIOUS_RETRANSMISSION = 2, "spurious_retransmission";
    /// `tcp.analysis.lost_segment`: this segment starts beyond the highest
    /// sequence seen: the capture missed something before it.
    LOST_SEGMENT = 3, "lost_segment";
    /// `tcp.analysis.ack_lost_segment`: acknowledges data the capture never saw.
    ACK_UNSEEN_SEGMENT = 4, "ack_unseen_segment";
    /// `tcp.analysis.out_of_order`: fills a hole with bytes never seen before,
    /// within about one RTT of the hole appearing (network reordering).
    OUT_OF_ORDER = 5, "out_of_order";
    /// `tcp.analysis.duplicate_ack`: same ACK, window and sequence as the
    /// previous segment of this side, no data, no SYN/FIN/RST.
    DUPLICATE_ACK = 6, "duplicate_ack";
    /// `tcp.analysis.zero_window`: advertises a zero window (not on SYN/FIN/RST).
    ZERO_WINDOW = 7, "zero_window";
    /// `tcp.analysis.zero_window_probe`: one byte at the next sequence while the peer's window is zero.
    ZERO_WINDOW_PROBE = 8, "zero_window_probe";
    /// `tcp.analysis.zero_window_probe_ack`.
    ZERO_WINDOW_PROBE_ACK = 9, "zero_window_probe_ack";
    /// `tcp.analysis.window_full`: the segment fills the peer's advertised
    /// window exactly (only when the window scale is known).
    WINDOW_FULL = 10, "window_full";
    /// `tcp.analysis.window_update`: a pure ACK that only changes the window.
    WINDOW_UPDATE = 11, "window_update";
    /// `tcp.analysis.keep_alive`: 0 or 1 byte at one below the next sequence.
    KEEP_ALIVE = 12, "keep_alive";
    /// `tcp.analysis.keep_alive_ack`.
    KEEP_ALIVE_ACK = 13, "keep_alive_ack";
    /// Not a Wireshark flag: Wireshark would label this segment differently
    /// (out-of-order instead of retransmission, or the reverse). See
    /// docs/flags.md.
    RECLASSIFIED = 14, "reclassified_vs_wireshark";
}

impl Flags {
    #[inline]
    pub fn has(self, f: Flags) -> bool {
        self.0 & f.0 != 0
    }
    #[inline]
    pub fn set(&mut self, f: Flags) {
        self.0 |= f.0
    }
    #[inline]
    pub fn clear(&mut self, f: Flags) {
        self.0 &= !f.0
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Flags::ALL
            .iter()
            .filter(move |(f, _)| self.has(*f))
            .map(|(_, n)| *n)
    }
}

/// How many segments of one direction carried each flag.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct FlagCounts {
    pub retransmission: u64,
    pub fast_retransmission: u64,
    pub spurious_retransmission: u64,
    /// Of `spurious_retransmission`: those shown spurious only by a later D-SACK.
    pub spurious_by_dsack: u64,
    pub lost_segment: u64,
    pub ack_unseen_segment: u64,
    pub out_of_order: u64,
    pub duplicate_ack: u64,
    pub zero_window: u64,
    pub zero_window_probe: u64,
    pub zero_window_probe_ack: u64,
    pub window_full: u64,
    pub window_update: u64,
    pub keep_alive: u64,
    pub keep_alive_ack: u64,
    pub reclassified_vs_wireshark: u64,
}

impl FlagCounts {
    /// Adds another stretch's counts.
    pub fn merge(&mut self, other: &FlagCounts) {
        let FlagCounts {
            retransmission,
            fast_retransmission,
            spurious_retransmission,
            spurious_by_dsack,
            lost_segment,
            ack_unseen_segment,
            out_of_order,
            duplicate_ack,
            zero_window,
            zero_window_probe,
            zero_window_probe_ack,
            window_full,
            window_update,
            keep_alive,
            keep_alive_ack,
            reclassified_vs_wireshark,
        } = *other;
        self.retransmission += retransmission;
        self.fast_retransmission += fast_retransmission;
        self.spurious_retransmission += spurious_retransmission;
        self.spurious_by_dsack += spurious_by_dsack;
        self.lost_segment += lost_segment;
        self.ack_unseen_segment += ack_unseen_segment;
        self.out_of_order += out_of_order;
        self.duplicate_ack += duplicate_ack;
        self.zero_window += zero_window;
        self.zero_window_probe += zero_window_probe;
        self.zero_window_probe_ack += zero_window_probe_ack;
        self.window_full += window_full;
        self.window_update += window_update;
        self.keep_alive += keep_alive;
        self.keep_alive_ack += keep_alive_ack;
        self.reclassified_vs_wireshark += reclassified_vs_wireshark;
    }

    pub fn add(&mut self, f: Flags) {
        if f.is_empty() {
            return;
        }
        let pairs: [(Flags, &mut u64); 15] = [
            (Flags::RETRANSMISSION, &mut self.retransmission),
            (Flags::FAST_RETRANSMISSION, &mut self.fast_retransmission),
            (
                Flags::SPURIOUS_RETRANSMISSION,
                &mut self.spurious_retransmission,
            ),
            (Flags::LOST_SEGMENT, &mut self.lost_segment),
            (Flags::ACK_UNSEEN_SEGMENT, &mut self.ack_unseen_segment),
            (Flags::OUT_OF_ORDER, &mut self.out_of_order),
            (Flags::DUPLICATE_ACK, &mut self.duplicate_ack),
            (Flags::ZERO_WINDOW, &mut self.zero_window),
            (Flags::ZERO_WINDOW_PROBE, &mut self.zero_window_probe),
            (
                Flags::ZERO_WINDOW_PROBE_ACK,
                &mut self.zero_window_probe_ack,
            ),
            (Flags::WINDOW_FULL, &mut self.window_full),
            (Flags::WINDOW_UPDATE, &mut self.window_update),
            (Flags::KEEP_ALIVE, &mut self.keep_alive),
            (Flags::KEEP_ALIVE_ACK, &mut self.keep_alive_ack),
            (Flags::RECLASSIFIED, &mut self.reclassified_vs_wireshark),
        ];
        for (flag, counter) in pairs {
            if f.has(flag) {
                *counter += 1;
            }
        }
    }
}
