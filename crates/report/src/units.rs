//! Counts for people: thousands separators. Quantities (bytes, rates,
//! times) are formatted by `tcpwhy_core::units`, the same in every output.

/// Thousands separators for counts.
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn thousands() {
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(count(999), "999");
    }
}
