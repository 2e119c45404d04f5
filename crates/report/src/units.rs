//! Counts for people: thousands separators. Quantities (bytes, rates,
//! times) are formatted by `tcpwhy_core::units`, the same in every output.

/// Thousands separators for counts.
pub use tcpwhy_core::units::fmt_count as count;

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn thousands() {
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(count(999), "999");
    }
}
