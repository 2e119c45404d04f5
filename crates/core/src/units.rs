//! Quantities: sizes ([`Bytes`]), rates ([`Rate`]) and times ([`Duration`]).
//!
//! One parser per quantity, used by every CLI flag and every scenario key,
//! and one human formatter per quantity, used by every text output. The
//! conventions (docs/units.md):
//!
//! - **Input.** A size without a unit is bytes. A rate or a time without a
//!   unit is refused (except `0`), with the accepted units in the message:
//!   `35` could be seconds or milliseconds, `200` bits or megabits. Units are
//!   case-insensitive except `B` (bytes) against `b` (bits) in a rate.
//!   Sizes: `KB`/`MB`/`GB` are decimal (10^3), `KiB`/`MiB`/`GiB` binary, and
//!   a bare `k`/`m`/`g` is binary as in iperf3, tc and the kernel's
//!   `memparse` (`4m` = 4 MiB). Rates: `mbit`, `Mbit/s`, `Mb/s`, `mbps` are
//!   megabits (unlike tc, where `mbps` is bytes); `MB/s`, `MBps`, `MiB/s`
//!   are bytes per second.
//! - **Output.** Rates in SI bits per second (`62.3 Mbit/s`); sizes of
//!   buffers and windows in IEC (`64 KiB`, `5.96 MiB`), with the exact byte
//!   count wherever a value is copied into a sysctl; a BDP also in decimal
//!   MB ([`Bytes::decimal`]), because that is how people quote it.

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// Which quantity a parse was for; part of every [`ParseError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    Size,
    Rate,
    Time,
}

impl Quantity {
    fn name(self) -> &'static str {
        match self {
            Quantity::Size => "size",
            Quantity::Rate => "rate",
            Quantity::Time => "time",
        }
    }

    /// The accepted units, as the error messages list them.
    pub fn accepted(self) -> &'static str {
        match self {
            Quantity::Size => "B (or no unit), KiB/MiB/GiB/TiB or k/m/g/t (binary), KB/MB/GB/TB (decimal); e.g. 4MiB, 4m, 65535, 6.25MB",
            Quantity::Rate => "bit/s: bit, kbit, mbit, gbit, tbit, Mbit/s, Mb/s, mbps, gbps; bytes/s: B/s, KB/s, MB/s, GB/s, MBps, MiB/s; e.g. 1gbit, 1Gbit/s, 200mbit, 125MB/s",
            Quantity::Time => "ns, us (µs), ms, s, min, h; e.g. 35ms, 35 ms, 0.035s, 250us",
        }
    }
}

/// What was wrong with a quantity as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// Nothing that reads as a number.
    NoNumber,
    /// A rate or a time with no unit.
    NoUnit,
    UnknownUnit,
    Negative,
    /// Too large to represent, or not finite.
    OutOfRange,
}

/// A quantity that could not be read; the message names the accepted units.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.message())]
pub struct ParseError {
    pub kind: ParseErrorKind,
    pub quantity: Quantity,
    pub input: String,
}

impl ParseError {
    fn new(kind: ParseErrorKind, quantity: Quantity, input: &str) -> Self {
        ParseError { kind, quantity, input: input.to_string() }
    }

    fn message(&self) -> String {
        let (q, i) = (self.quantity.name(), &self.input);
        let why = match self.kind {
            ParseErrorKind::NoNumber => format!("{i:?} is not a {q}"),
            ParseErrorKind::NoUnit => format!("{i:?}: a {q} needs a unit (a bare number is ambiguous)"),
            ParseErrorKind::UnknownUnit => format!("{i:?}: not a unit of {q}"),
            ParseErrorKind::Negative => format!("{i:?}: a {q} cannot be negative"),
            ParseErrorKind::OutOfRange => format!("{i:?}: out of range for a {q}"),
        };
        format!("{why}; use {}", self.quantity.accepted())
    }
}

/// Splits "35 ms" into (35.0, "ms"): the number may have a fraction, an
/// exponent and `_` separators; spaces may stand between it and the unit.
fn split(s: &str, q: Quantity) -> Result<(f64, &str), ParseError> {
    let t = s.trim();
    let b = t.as_bytes();
    let mut end = 0;
    if end < b.len() && (b[end] == b'-' || b[end] == b'+') {
        end += 1;
    }
    while end < b.len() {
        let c = b[end];
        let exponent = (c == b'e' || c == b'E')
            && end > 0
            && b[end - 1].is_ascii_digit()
            && b.get(end + 1).is_some_and(|d| d.is_ascii_digit() || ((*d == b'-' || *d == b'+') && b.get(end + 2).is_some_and(u8::is_ascii_digit)));
        let sign_after_e = (c == b'-' || c == b'+') && end > 0 && (b[end - 1] == b'e' || b[end - 1] == b'E');
        if c.is_ascii_digit() || c == b'.' || c == b'_' || exponent || sign_after_e {
            end += 1;
        } else {
            break;
        }
    }
    let num: f64 = t[..end]
        .replace('_', "")
        .parse()
        .map_err(|_| ParseError::new(ParseErrorKind::NoNumber, q, s))?;
    if !num.is_finite() {
        return Err(ParseError::new(ParseErrorKind::OutOfRange, q, s));
    }
    if num < 0.0 {
        return Err(ParseError::new(ParseErrorKind::Negative, q, s));
    }
    Ok((num, t[end..].trim()))
}

fn to_u64(v: f64, q: Quantity, input: &str) -> Result<u64, ParseError> {
    let r = v.round();
    if !(0.0..1.8e19).contains(&r) {
        return Err(ParseError::new(ParseErrorKind::OutOfRange, q, input));
    }
    Ok(r as u64)
}

const KIB: f64 = 1024.0;
const MIB: f64 = 1024.0 * 1024.0;
const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

// ---------------------------------------------------------------- Bytes

/// A size in bytes: buffers, windows, transfers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(pub u64);

impl Bytes {
    pub fn get(self) -> u64 {
        self.0
    }

    /// Decimal units, as a BDP is quoted in the field: `6.25 MB`.
    pub fn decimal(self) -> String {
        fmt_bytes_decimal(self.0 as f64)
    }

    /// The form scenario files and `--set` take back: `4MiB`, `64KiB`, `1500`.
    pub fn spec(self) -> String {
        let v = self.0;
        if v >= 1 << 30 && v % (1 << 30) == 0 {
            format!("{}GiB", v >> 30)
        } else if v >= 1 << 20 && v % (1 << 20) == 0 {
            format!("{}MiB", v >> 20)
        } else if v >= 1 << 10 && v % (1 << 10) == 0 {
            format!("{}KiB", v >> 10)
        } else {
            format!("{v}")
        }
    }
}

impl FromStr for Bytes {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let q = Quantity::Size;
        let (n, unit) = split(s, q)?;
        let mult = match unit.to_ascii_lowercase().as_str() {
            "" | "b" | "byte" | "bytes" => 1.0,
            "k" | "kib" | "ki" => KIB,
            "m" | "mib" | "mi" => MIB,
            "g" | "gib" | "gi" => GIB,
            "t" | "tib" | "ti" => GIB * KIB,
            "kb" => 1e3,
            "mb" => 1e6,
            "gb" => 1e9,
            "tb" => 1e12,
            _ => return Err(ParseError::new(ParseErrorKind::UnknownUnit, q, s)),
        };
        to_u64(n * mult, q, s).map(Bytes)
    }
}

/// The human form of a size: `512 B`, `64 KiB`, `5.96 MiB`, `1.50 GiB`.
/// Thousands separators for counts: 1,234,567.
pub fn fmt_count(n: u64) -> String {
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

/// An estimated count to two significant figures: "about 2.0 million".
pub fn fmt_estimate(n: u64) -> String {
    match n {
        0..=9_999 => fmt_count(n),
        10_000..=999_999 => format!("{}k", (n as f64 / 1e3).round()),
        _ => format!("{:.1} million", n as f64 / 1e6),
    }
}

pub fn fmt_bytes(b: f64) -> String {
    if b >= GIB {
        format!("{:.2} GiB", b / GIB)
    } else if b >= MIB {
        format!("{:.2} MiB", b / MIB)
    } else if b >= KIB {
        format!("{:.0} KiB", b / KIB)
    } else {
        format!("{b:.0} B")
    }
}

/// A size in decimal units: `6.25 MB`, `1.79 MB`, `579 B` (volumes of
/// data, plot axes, and a BDP as the field quotes it).
pub fn fmt_bytes_decimal(b: f64) -> String {
    let a = b.abs();
    if a >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if a >= 1e6 {
        format!("{:.2} MB", b / 1e6)
    } else if a >= 1e3 {
        format!("{:.1} kB", b / 1e3)
    } else {
        format!("{b:.0} B")
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&fmt_bytes(self.0 as f64))
    }
}

// ---------------------------------------------------------------- Rate

/// A rate in bits per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(pub u64);

impl Rate {
    /// From bit/s with a fraction (a measured rate), to the nearest bit/s;
    /// a negative or NaN rate is 0, and one past u64 saturates.
    pub fn from_bps_f64(bps: f64) -> Self {
        Rate(bps.max(0.0).round() as u64)
    }

    pub fn bits_per_sec(self) -> u64 {
        self.0
    }

    pub fn bps(self) -> f64 {
        self.0 as f64
    }

    pub fn bytes_per_sec(self) -> f64 {
        self.0 as f64 / 8.0
    }

    /// The form scenario files and `--set` take back: `200mbit`, `1.5gbit`.
    pub fn spec(self) -> String {
        let v = self.0;
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
}

/// Reads a rate unit: returns the multiplier to bit/s.
fn rate_unit(unit: &str) -> Option<f64> {
    // "/s" or "ps" says "per second"; without it only "bit" reads as a rate.
    let (core, per_second) = if let Some(c) = unit.strip_suffix("/s").or_else(|| unit.strip_suffix("/S")) {
        (c.trim_end(), true)
    } else if let Some(c) = unit.strip_suffix("ps").or_else(|| unit.strip_suffix("PS")).or_else(|| unit.strip_suffix("Ps")) {
        (c, true)
    } else {
        (unit, false)
    };
    let lower = core.to_ascii_lowercase();
    let (prefix, per_unit) = if let Some(p) = lower.strip_suffix("bits").or_else(|| lower.strip_suffix("bit")) {
        (p.to_string(), 1.0)
    } else if let Some(p) = lower.strip_suffix("bytes").or_else(|| lower.strip_suffix("byte")) {
        (p.to_string(), 8.0)
    } else if per_second && (core.ends_with('b') || core.ends_with('B')) {
        // "Mb/s", "mbps" are bits; "MB/s", "MBps" bytes: the case of b says which.
        let bytes = core.ends_with('B');
        (lower[..lower.len() - 1].to_string(), if bytes { 8.0 } else { 1.0 })
    } else {
        return None;
    };
    let prefix_mult = match prefix.as_str() {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" => 1e12,
        "ki" => KIB,
        "mi" => MIB,
        "gi" => GIB,
        _ => return None,
    };
    Some(prefix_mult * per_unit)
}

impl FromStr for Rate {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let q = Quantity::Rate;
        let (n, unit) = split(s, q)?;
        if unit.is_empty() {
            return if n == 0.0 { Ok(Rate(0)) } else { Err(ParseError::new(ParseErrorKind::NoUnit, q, s)) };
        }
        let mult = rate_unit(unit).ok_or_else(|| ParseError::new(ParseErrorKind::UnknownUnit, q, s))?;
        to_u64(n * mult, q, s).map(Rate)
    }
}

/// The human form of a rate: `62.3 Mbit/s`, `2.50 Gbit/s`, `512 kbit/s`.
pub fn fmt_rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gbit/s", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.1} Mbit/s", bps / 1e6)
    } else if bps >= 1e3 {
        format!("{:.0} kbit/s", bps / 1e3)
    } else {
        format!("{bps:.0} bit/s")
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&fmt_rate(self.0 as f64))
    }
}

// ---------------------------------------------------------------- Duration

/// A time span, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub u64);

impl Duration {
    pub const ZERO: Duration = Duration(0);

    pub fn from_nanos(ns: u64) -> Self {
        Duration(ns)
    }
    pub fn from_micros(us: u64) -> Self {
        Duration(us.saturating_mul(1000))
    }
    pub fn from_millis(ms: u64) -> Self {
        Duration(ms.saturating_mul(1_000_000))
    }
    pub fn from_secs_f64(s: f64) -> Self {
        Duration((s.max(0.0) * 1e9).round() as u64)
    }
    /// From milliseconds with a fraction, to the nearest nanosecond: exact
    /// for any whole number of microseconds (an RTT sample).
    pub fn from_millis_f64(ms: f64) -> Self {
        Duration((ms.max(0.0) * 1e6).round() as u64)
    }
    /// Nanoseconds as a signed offset, for arithmetic on timestamps.
    pub fn as_nanos_i64(self) -> i64 {
        i64::try_from(self.0).unwrap_or(i64::MAX)
    }
    pub fn as_nanos(self) -> u64 {
        self.0
    }
    pub fn as_micros(self) -> u64 {
        self.0 / 1000
    }
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    pub fn std(self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.0)
    }

    /// The form scenario files and `--set` take back: `40ms`, `2s`, `250us`.
    pub fn spec(self) -> String {
        let v = self.0;
        if v > 0 && v % 1_000_000_000 == 0 {
            format!("{}s", v / 1_000_000_000)
        } else if v % 1_000_000 == 0 {
            format!("{}ms", v / 1_000_000)
        } else if v % 1000 == 0 {
            format!("{}us", v / 1000)
        } else {
            format!("{v}ns")
        }
    }
}

impl From<std::time::Duration> for Duration {
    fn from(d: std::time::Duration) -> Self {
        Duration(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}

impl FromStr for Duration {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let q = Quantity::Time;
        let (n, unit) = split(s, q)?;
        let mult = match unit.to_ascii_lowercase().as_str() {
            "" if n == 0.0 => 0.0,
            "" => return Err(ParseError::new(ParseErrorKind::NoUnit, q, s)),
            "ns" | "nsec" => 1.0,
            "us" | "µs" | "μs" | "usec" => 1e3,
            "ms" | "msec" => 1e6,
            "s" | "sec" | "secs" | "second" | "seconds" => 1e9,
            "m" | "min" | "mins" | "minute" | "minutes" => 60e9,
            "h" | "hour" | "hours" => 3600e9,
            _ => return Err(ParseError::new(ParseErrorKind::UnknownUnit, q, s)),
        };
        to_u64(n * mult, q, s).map(Duration)
    }
}

/// The human form of a time given in milliseconds: `527 µs`, `8.25 ms`,
/// `110.8 ms`, `2.77 s`.
pub fn fmt_ms(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.2} s", ms / 1000.0)
    } else if ms >= 10.0 {
        format!("{ms:.1} ms")
    } else if ms >= 1.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{:.0} µs", ms * 1000.0)
    }
}

/// [`fmt_ms`] for a time in seconds.
pub fn fmt_secs(s: f64) -> String {
    fmt_ms(s * 1000.0)
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&fmt_ms(self.as_millis_f64()))
    }
}

// ---------------------------------------------------------------- arithmetic

/// The conversions the rules compute with, on `f64` values: one place for
/// each factor (8 bits a byte, 10^3 between time units, 10^6 bit/s a
/// Mbit/s), so a rule says what it computes (`bps(window, rtt_s)`) rather
/// than how (`window * 8.0 / rtt_s`). Each is the one expression it
/// replaces, so results are bit for bit what the hand conversion gave.
/// Typed values convert through their own methods ([`Duration::as_secs_f64`],
/// [`Rate::bytes_per_sec`]); these serve the `f64` quantities in between.
pub mod calc {
    /// Bits in a byte.
    pub const BITS_PER_BYTE: f64 = 8.0;

    /// Nanoseconds to seconds.
    pub fn s_from_ns(ns: f64) -> f64 {
        ns / 1e9
    }
    /// Nanoseconds to milliseconds.
    pub fn ms_from_ns(ns: f64) -> f64 {
        ns / 1e6
    }
    /// Nanoseconds to microseconds.
    pub fn us_from_ns(ns: f64) -> f64 {
        ns / 1e3
    }
    /// Microseconds to milliseconds.
    pub fn ms_from_us(us: f64) -> f64 {
        us / 1000.0
    }
    /// Microseconds to seconds.
    pub fn s_from_us(us: f64) -> f64 {
        us / 1e6
    }
    /// Milliseconds to seconds.
    pub fn s_from_ms(ms: f64) -> f64 {
        ms / 1000.0
    }
    /// Seconds to milliseconds.
    pub fn ms_from_s(s: f64) -> f64 {
        s * 1000.0
    }
    /// Seconds to nanoseconds.
    pub fn ns_from_s(s: f64) -> f64 {
        s * 1e9
    }
    /// Milliseconds to nanoseconds.
    pub fn ns_from_ms(ms: f64) -> f64 {
        ms * 1e6
    }
    /// Microseconds to nanoseconds.
    pub fn ns_from_us(us: f64) -> f64 {
        us * 1000.0
    }
    /// Milliseconds to microseconds.
    pub fn us_from_ms(ms: f64) -> f64 {
        ms * 1000.0
    }
    /// Seconds to microseconds.
    pub fn us_from_s(s: f64) -> f64 {
        s * 1e6
    }

    /// Bytes to bits.
    pub fn bits(bytes: f64) -> f64 {
        bytes * BITS_PER_BYTE
    }
    /// Bits to bytes.
    pub fn bytes(bits: f64) -> f64 {
        bits / BITS_PER_BYTE
    }
    /// The rate, in bit/s, of `bytes` over `s` seconds.
    pub fn bps(bytes: f64, s: f64) -> f64 {
        bytes * BITS_PER_BYTE / s
    }
    /// The rate, in bit/s, of `bytes` over `ns` nanoseconds.
    pub fn bps_over_ns(bytes: f64, ns: f64) -> f64 {
        bytes * 8e9 / ns
    }
    /// The bytes a rate of `bps` carries in `s` seconds.
    pub fn bytes_in(bps: f64, s: f64) -> f64 {
        bps / BITS_PER_BYTE * s
    }
    /// The seconds `bytes` take at `bps`.
    pub fn s_to_send(bytes: f64, bps: f64) -> f64 {
        bytes * BITS_PER_BYTE / bps
    }
    /// bit/s to Mbit/s.
    pub fn mbps(bps: f64) -> f64 {
        bps / 1e6
    }
    /// Mbit/s to bit/s.
    pub fn bps_from_mbps(mbps: f64) -> f64 {
        mbps * 1e6
    }
    /// `v` to three decimals (the JSON's numbers, a factor to 0.001).
    pub fn thousandths(v: f64) -> f64 {
        (v * 1000.0).round() / 1000.0
    }
    /// bit/s to kbit/s.
    pub fn kbps(bps: f64) -> f64 {
        bps / 1e3
    }
}

// ---------------------------------------------------------------- serde

/// Scenario files write quantities as strings (`"40ms"`); a number is read
/// as the string of that number, so `rtt = 40` is refused like `--rtt 40`
/// while `burst = 65535` is bytes.
macro_rules! serde_quantity {
    ($t:ident, $expecting:expr) => {
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> de::Visitor<'de> for V {
                    type Value = $t;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$t, E> {
                        v.parse().map_err(E::custom)
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$t, E> {
                        self.visit_str(&v.to_string())
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$t, E> {
                        self.visit_str(&v.to_string())
                    }
                    fn visit_f64<E: de::Error>(self, v: f64) -> Result<$t, E> {
                        self.visit_str(&v.to_string())
                    }
                }
                d.deserialize_any(V)
            }
        }
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.spec())
            }
        }
    };
}

serde_quantity!(Bytes, "a size such as \"4MiB\" or 65535");
serde_quantity!(Rate, "a rate such as \"200mbit\" or \"1gbit\"");
serde_quantity!(Duration, "a time such as \"40ms\" or \"2s\"");

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(s: &str) -> u64 {
        s.parse::<Rate>().unwrap_or_else(|e| panic!("{e}")).0
    }
    fn time_ns(s: &str) -> u64 {
        s.parse::<Duration>().unwrap_or_else(|e| panic!("{e}")).0
    }
    fn size(s: &str) -> u64 {
        s.parse::<Bytes>().unwrap_or_else(|e| panic!("{e}")).0
    }

    #[test]
    fn rates_in_the_spellings_people_type() {
        for s in ["1gbit", "1Gbit/s", "1gbps", "1Gbps", "1 Gbit/s", "1000mbit", "1e9bit", "1Gb/s", "125MB/s", "125MBps", "1_000_000_000bit/s"] {
            assert_eq!(rate(s), 1_000_000_000, "{s}");
        }
        assert_eq!(rate("200mbit"), 200_000_000);
        assert_eq!(rate("64kbit"), 64_000);
        assert_eq!(rate("1MiB/s"), 8 * 1_048_576);
        assert_eq!(rate("1.5Gbit"), 1_500_000_000);
        assert_eq!(rate("0"), 0);
    }

    #[test]
    fn a_rate_without_a_unit_is_refused_with_the_units() {
        let e = "200".parse::<Rate>().unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::NoUnit);
        assert!(e.to_string().contains("mbit") && e.to_string().contains("MB/s"), "{e}");
        for bad in ["fast", "1gb", "1MB", "-5mbit", "1 furlong/s", "1zbit", ""] {
            assert!(bad.parse::<Rate>().is_err(), "{bad}");
        }
    }

    #[test]
    fn times_in_the_spellings_people_type() {
        for s in ["35ms", "35 ms", "0.035s", "35000us", "35000 µs", "35e-3s", "3.5e7ns"] {
            assert_eq!(time_ns(s), 35_000_000, "{s}");
        }
        assert_eq!(time_ns("2min"), 120_000_000_000);
        assert_eq!(time_ns("2m"), 120_000_000_000);
        assert_eq!(time_ns("0"), 0);
        let e = "35".parse::<Duration>().unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::NoUnit);
        assert!(e.to_string().contains("35ms"), "{e}");
        for bad in ["-1s", "5 parsecs", "ms", "1e400s"] {
            assert!(bad.parse::<Duration>().is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_in_the_spellings_people_type() {
        for s in ["4MiB", "4m", "4M", "4 MiB", "4096KiB", "4096k", "4194304", "4194304B"] {
            assert_eq!(size(s), 4 << 20, "{s}");
        }
        assert_eq!(size("6.25MB"), 6_250_000);
        assert_eq!(size("1GB"), 1_000_000_000);
        assert_eq!(size("1g"), 1 << 30);
        assert!("-4k".parse::<Bytes>().is_err());
        assert!("4 parsecs".parse::<Bytes>().is_err());
    }

    #[test]
    fn one_output_convention() {
        assert_eq!(Rate(62_300_000).to_string(), "62.3 Mbit/s");
        assert_eq!(Rate(2_500_000_000).to_string(), "2.50 Gbit/s");
        assert_eq!(Bytes(65535).to_string(), "64 KiB");
        assert_eq!(Bytes(6_250_000).to_string(), "5.96 MiB");
        assert_eq!(Bytes(6_250_000).decimal(), "6.25 MB");
        assert_eq!(Duration::from_micros(527).to_string(), "527 µs");
        assert_eq!(Duration::from_micros(8250).to_string(), "8.25 ms");
        assert_eq!(Duration::from_micros(110_800).to_string(), "110.8 ms");
        assert_eq!(Duration::from_millis(2770).to_string(), "2.77 s");
    }

    #[test]
    fn specs_read_back() {
        for b in [Bytes(4 << 20), Bytes(65536), Bytes(1500), Bytes(3 << 30)] {
            assert_eq!(b.spec().parse::<Bytes>().unwrap(), b);
        }
        for r in [Rate(200_000_000), Rate(1_500_000_000), Rate(64_000), Rate(1234)] {
            assert_eq!(r.spec().parse::<Rate>().unwrap(), r);
        }
        for d in [Duration::from_millis(40), Duration::from_millis(2000), Duration::from_micros(250), Duration(17)] {
            assert_eq!(d.spec().parse::<Duration>().unwrap(), d);
        }
    }

    #[test]
    fn serde_reads_strings_and_numbers() {
        #[derive(Deserialize)]
        struct S {
            b: Bytes,
            r: Rate,
            t: Duration,
        }
        let s: S = serde_json::from_str(r#"{"b": 65535, "r": "1gbit", "t": "40ms"}"#).unwrap();
        assert_eq!((s.b.0, s.r.0, s.t.0), (65535, 1_000_000_000, 40_000_000));
        let e = serde_json::from_str::<S>(r#"{"b": 1, "r": "1gbit", "t": 40}"#).err().unwrap();
        assert!(e.to_string().contains("needs a unit"), "{e}");
    }
}
