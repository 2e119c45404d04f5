//! Quantities in scenario files: rates ("200mbit"), durations ("40ms") and
//! sizes ("4MiB"), as tc and iperf3 users write them. A bare number is the
//! base unit (bit/s, microseconds... see each type).

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

fn split_number(s: &str) -> Option<(f64, String)> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(s.len());
    let num: f64 = s[..end].replace('_', "").parse().ok()?;
    if !num.is_finite() || num < 0.0 {
        return None;
    }
    Some((num, s[end..].trim().to_ascii_lowercase()))
}

macro_rules! quantity {
    ($name:ident, $what:expr, $parse:ident, $fmt:ident) => {
        impl std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                $parse(s).map($name).ok_or_else(|| format!("{s:?} is not {}", $what))
            }
        }
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> de::Visitor<'de> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        write!(f, "{}", $what)
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$name, E> {
                        Ok($name(v))
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$name, E> {
                        u64::try_from(v).map($name).map_err(|_| E::custom(format!("{v} is negative")))
                    }
                    fn visit_f64<E: de::Error>(self, v: f64) -> Result<$name, E> {
                        if v >= 0.0 && v.is_finite() {
                            Ok($name(v.round() as u64))
                        } else {
                            Err(E::custom(format!("{v} is not {}", $what)))
                        }
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$name, E> {
                        v.parse().map_err(E::custom)
                    }
                }
                d.deserialize_any(V)
            }
        }
        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&$fmt(self.0))
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(&$fmt(self.0))
            }
        }
    };
}

/// A rate in bits per second: `200mbit`, `1gbit`, `64kbit`, `12.5mbps`
/// (bytes: `MBps`... are not accepted to avoid the b/B trap: write bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Rate(pub u64);

fn parse_rate(s: &str) -> Option<u64> {
    if s.contains('B') {
        return None; // bytes per second (MBps, MB/s): refuse rather than guess
    }
    let (n, u) = split_number(s)?;
    let mult = match u.as_str() {
        "" | "bit" | "bps" => 1.0,
        "k" | "kbit" | "kbps" => 1e3,
        "m" | "mbit" | "mbps" => 1e6,
        "g" | "gbit" | "gbps" => 1e9,
        _ => return None,
    };
    Some((n * mult).round() as u64)
}

fn fmt_rate(v: u64) -> String {
    if v >= 1_000_000_000 && v % 1_000_000 == 0 {
        format!("{}gbit", v as f64 / 1e9)
    } else if v >= 1_000_000 && v % 1000 == 0 {
        format!("{}mbit", v as f64 / 1e6)
    } else if v >= 1000 && v % 1000 == 0 {
        format!("{}kbit", v / 1000)
    } else {
        format!("{v}bit")
    }
}

quantity!(Rate, "a rate such as \"200mbit\" or \"1gbit\"", parse_rate, fmt_rate);

/// A duration in microseconds: `40ms`, `1.5s`, `250us`; a bare number is ms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Micros(pub u64);

fn parse_micros(s: &str) -> Option<u64> {
    let (n, u) = split_number(s)?;
    let mult = match u.as_str() {
        "us" | "µs" => 1.0,
        "" | "ms" => 1e3,
        "s" => 1e6,
        "m" | "min" => 60e6,
        _ => return None,
    };
    Some((n * mult).round() as u64)
}

fn fmt_micros(v: u64) -> String {
    if v % 1_000_000 == 0 && v > 0 {
        format!("{}s", v / 1_000_000)
    } else if v % 1000 == 0 {
        format!("{}ms", v / 1000)
    } else {
        format!("{v}us")
    }
}

quantity!(Micros, "a duration such as \"40ms\" or \"2s\"", parse_micros, fmt_micros);

/// A size in bytes: `4MiB`, `64KiB`, `1MB` (10^6), `1500`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Bytes(pub u64);

fn parse_bytes(s: &str) -> Option<u64> {
    let (n, u) = split_number(s)?;
    let mult = match u.as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some((n * mult).round() as u64)
}

fn fmt_bytes(v: u64) -> String {
    if v >= 1 << 20 && v % (1 << 20) == 0 {
        format!("{}MiB", v >> 20)
    } else if v >= 1 << 10 && v % (1 << 10) == 0 {
        format!("{}KiB", v >> 10)
    } else {
        format!("{v}")
    }
}

quantity!(Bytes, "a size such as \"4MiB\" or \"65535\"", parse_bytes, fmt_bytes);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_tc_users_write() {
        assert_eq!("200mbit".parse::<Rate>().unwrap().0, 200_000_000);
        assert_eq!("1gbit".parse::<Rate>().unwrap().0, 1_000_000_000);
        assert_eq!("1.5Gbit".parse::<Rate>().unwrap().0, 1_500_000_000);
        assert!("200MBps".parse::<Rate>().is_err());
        assert_eq!("40ms".parse::<Micros>().unwrap().0, 40_000);
        assert_eq!("1.5s".parse::<Micros>().unwrap().0, 1_500_000);
        assert_eq!("20".parse::<Micros>().unwrap().0, 20_000);
        assert_eq!("4MiB".parse::<Bytes>().unwrap().0, 4 << 20);
        assert_eq!("64KiB".parse::<Bytes>().unwrap().0, 65536);
        assert_eq!("1MB".parse::<Bytes>().unwrap().0, 1_000_000);
        assert!("-5".parse::<Bytes>().is_err());
        assert!("lots".parse::<Bytes>().is_err());
        assert_eq!(Rate(200_000_000).to_string(), "200mbit");
        assert_eq!(Micros(40_000).to_string(), "40ms");
        assert_eq!(Bytes(4 << 20).to_string(), "4MiB");
    }
}
