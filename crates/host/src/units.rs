//! Parsing and printing of rates, durations and sizes.

/// "1gbit", "200mbit", "3e9", "10mbps" (bits), "1.5G" -> bit/s.
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.strip_suffix("/s").unwrap_or(&t);
    let (num, mult) = split_num(t);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("bad rate {s:?}: use e.g. 1gbit, 200mbit, 3e9"))?;
    let m = match mult.trim() {
        "" | "bit" | "bps" | "b" => 1.0,
        "k" | "kbit" | "kbps" => 1e3,
        "m" | "mbit" | "mbps" => 1e6,
        "g" | "gbit" | "gbps" => 1e9,
        "t" | "tbit" | "tbps" => 1e12,
        "kibit" => 1024.0,
        "mibit" => 1048576.0,
        "gibit" => 1073741824.0,
        _ => return Err(format!("bad rate unit in {s:?}: use bit, kbit, mbit, gbit")),
    };
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("rate must be positive: {s:?}"));
    }
    Ok(v * m)
}

/// "35ms", "0.1s", "250us", "2m" (minutes), a bare number is seconds -> seconds.
pub fn parse_duration(s: &str) -> Result<f64, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, unit) = split_num(&t);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("bad duration {s:?}: use e.g. 35ms, 0.1s, 10s"))?;
    let m = match unit.trim() {
        "" | "s" | "sec" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "ns" => 1e-9,
        "m" | "min" => 60.0,
        _ => return Err(format!("bad duration unit in {s:?}: use ms, s, us, min")),
    };
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("duration must not be negative: {s:?}"));
    }
    Ok(v * m)
}

/// "100MB", "1GiB", "64k", "1500" -> bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, unit) = split_num(&t);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("bad size {s:?}: use e.g. 100MB, 1GiB, 64KiB"))?;
    let m = match unit.trim() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "t" | "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1048576.0,
        "gib" => 1073741824.0,
        _ => return Err(format!("bad size unit in {s:?}: use B, KB, MB, GB, KiB, MiB, GiB")),
    };
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("size must not be negative: {s:?}"));
    }
    Ok((v * m).round() as u64)
}

fn split_num(t: &str) -> (&str, &str) {
    let end = t
        .char_indices()
        .find(|&(i, c)| {
            !(c.is_ascii_digit()
                || c == '.'
                || ((c == 'e' || c == 'E')
                    && t[i + 1..].starts_with(|d: char| d.is_ascii_digit() || d == '-' || d == '+'))
                || ((c == '-' || c == '+') && (i == 0 || t[..i].ends_with(['e', 'E']))))
        })
        .map(|(i, _)| i)
        .unwrap_or(t.len());
    (&t[..end], &t[end..])
}

pub fn fmt_rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gbit/s", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.1} Mbit/s", bps / 1e6)
    } else if bps >= 1e3 {
        format!("{:.1} kbit/s", bps / 1e3)
    } else {
        format!("{bps:.0} bit/s")
    }
}

pub fn fmt_bytes(b: f64) -> String {
    if b >= 1073741824.0 {
        format!("{:.2} GiB", b / 1073741824.0)
    } else if b >= 1048576.0 {
        format!("{:.2} MiB", b / 1048576.0)
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

pub fn fmt_secs(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{:.0} µs", s * 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn units() {
        assert_eq!(parse_rate("1gbit").unwrap(), 1e9);
        assert_eq!(parse_rate("3e9").unwrap(), 3e9);
        assert_eq!(parse_rate("200Mbit").unwrap(), 2e8);
        assert!(parse_rate("fast").is_err());
        assert!((parse_duration("35ms").unwrap() - 0.035).abs() < 1e-12);
        assert_eq!(parse_duration("10s").unwrap(), 10.0);
        assert_eq!(parse_duration("10").unwrap(), 10.0);
        assert_eq!(parse_size("100MB").unwrap(), 100_000_000);
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(fmt_rate(2.5e9), "2.50 Gbit/s");
    }
}
