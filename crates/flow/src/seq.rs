//! Sequence-number arithmetic modulo 2^32 (RFC 9293 section 3.4) and
//! unwrapping into a 64-bit byte offset so that everything after this point
//! compares plain integers.

#[inline]
pub fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}
#[inline]
pub fn seq_gt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}
#[inline]
pub fn seq_le(a: u32, b: u32) -> bool {
    !seq_gt(a, b)
}

/// Maps raw 32-bit sequence numbers of one direction to offsets from a base.
/// The reference point only moves forward, so a stream longer than 4 GiB
/// keeps counting and old (retransmitted) numbers map below the reference.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Unwrapper {
    pub base: Option<u32>,
    last_raw: u32,
    last_offset: i64,
}

impl Unwrapper {
    pub fn is_set(&self) -> bool {
        self.base.is_some()
    }

    pub fn set_base(&mut self, raw: u32) {
        self.base = Some(raw);
        self.last_raw = raw;
        self.last_offset = 0;
    }

    /// Offset of `raw` without moving the reference (for ACK numbers and
    /// SACK edges, which refer to data already sent).
    #[inline]
    pub fn offset(&self, raw: u32) -> i64 {
        self.last_offset + raw.wrapping_sub(self.last_raw) as i32 as i64
    }

    /// Offset of `raw`, moving the reference forward when `raw` is ahead.
    #[inline]
    pub fn advance(&mut self, raw: u32) -> i64 {
        let delta = raw.wrapping_sub(self.last_raw) as i32 as i64;
        let offset = self.last_offset + delta;
        if delta > 0 {
            self.last_raw = raw;
            self.last_offset = offset;
        }
        offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwrap_across_wrap() {
        let mut u = Unwrapper::default();
        u.set_base(u32::MAX - 10);
        assert_eq!(u.advance(u32::MAX), 10);
        assert_eq!(u.advance(5), 16);
        assert_eq!(u.offset(u32::MAX - 5), 5);
        let mut raw = 5u32;
        for _ in 0..10 {
            raw = raw.wrapping_add(1 << 30);
            u.advance(raw);
        }
        assert_eq!(u.offset(raw), 16 + 10 * (1 << 30));
    }

    #[test]
    fn wrap_safe_compare() {
        assert!(seq_lt(u32::MAX, 3));
        assert!(seq_gt(3, u32::MAX));
        assert!(seq_le(7, 7));
    }
}
