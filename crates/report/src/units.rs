//! Human units: bytes, rates and durations with sensible precision.

pub fn bytes(n: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut v = n;
    let mut u = 0;
    while v.abs() >= 1000.0 && u < UNITS.len() - 1 {
        v /= 1000.0;
        u += 1;
    }
    if u == 0 {
        format!("{} B", n as i64)
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

pub fn rate(bits_per_sec: f64) -> String {
    const UNITS: [&str; 4] = ["bit/s", "kbit/s", "Mbit/s", "Gbit/s"];
    let mut v = bits_per_sec;
    let mut u = 0;
    while v.abs() >= 1000.0 && u < UNITS.len() - 1 {
        v /= 1000.0;
        u += 1;
    }
    format!("{v:.3} {}", UNITS[u])
}

pub fn millis(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.3} s", ms / 1000.0)
    } else if ms >= 10.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.3} ms")
    }
}

pub fn seconds(s: f64) -> String {
    millis(s * 1000.0)
}

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
    fn formats() {
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(bytes(2_097_152.0), "2.10 MB");
        assert_eq!(rate(470_000_000.0), "470.000 Mbit/s");
        assert_eq!(millis(35.7), "35.7 ms");
    }
}
