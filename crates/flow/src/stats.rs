//! Bounded-memory summaries: RTT distributions and rate time series.

use serde::Serialize;

/// Log-scale histogram of durations: 16 buckets per octave (about 4.4%
/// relative precision) from 1 microsecond to about 2^27 us (134 s).
const SUB_BUCKETS: usize = 16;
const OCTAVES: usize = 28;

/// A 128-bit sum kept as two words: 8-byte aligned, so that the structures
/// holding one stay as compact as with 64-bit fields (an `i128` field made
/// the per-direction state 16-byte aligned and the analysis 4% slower on
/// the snaplen-128 bench capture). Adds wrap, as two's complement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Wide {
    lo: u64,
    hi: u64,
}

impl Wide {
    #[inline]
    pub fn add(&mut self, v: i128) {
        let (lo, carry) = self.lo.overflowing_add(v as u64);
        self.lo = lo;
        self.hi = self.hi.wrapping_add(((v >> 64) as u64).wrapping_add(carry as u64));
    }

    pub fn merge(&mut self, other: Wide) {
        self.add(other.signed());
    }

    pub fn signed(self) -> i128 {
        ((self.hi as u128) << 64 | self.lo as u128) as i128
    }

    pub fn unsigned(self) -> u128 {
        (self.hi as u128) << 64 | self.lo as u128
    }
}

/// The sums are integers, so that two halves of a capture analysed apart
/// add up to exactly the whole ([`DurationStats::merge`]).
#[derive(Debug, Clone, PartialEq)]
pub struct DurationStats {
    count: u64,
    sum_ns: Wide,
    sum_sq_ns: Wide,
    min_ns: i64,
    max_ns: i64,
    /// Allocated on the first sample: most connections of a scan or of
    /// short exchanges never need one.
    buckets: Option<Box<[u32; SUB_BUCKETS * OCTAVES]>>,
}

impl Default for DurationStats {
    fn default() -> Self {
        DurationStats {
            count: 0,
            sum_ns: Wide::default(),
            sum_sq_ns: Wide::default(),
            min_ns: i64::MAX,
            max_ns: 0,
            buckets: None,
        }
    }
}

fn bucket_of(us: f64) -> usize {
    if us <= 1.0 {
        return 0;
    }
    let idx = (us.log2() * SUB_BUCKETS as f64) as usize;
    idx.min(SUB_BUCKETS * OCTAVES - 1)
}

fn bucket_value_us(idx: usize) -> f64 {
    // Geometric middle of the bucket.
    2f64.powf((idx as f64 + 0.5) / SUB_BUCKETS as f64)
}

/// Summary of a duration distribution in milliseconds.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct DurationSummary {
    pub samples: u64,
    pub min_ms: f64,
    pub avg_ms: f64,
    pub max_ms: f64,
    pub stdev_ms: f64,
    /// From the histogram: within about 4.4% of the exact value.
    pub median_ms: f64,
    pub p99_ms: f64,
}

impl DurationStats {
    pub fn add(&mut self, ns: i64) {
        let ns = ns.max(0);
        let us = ns as f64 / 1000.0;
        self.count += 1;
        self.sum_ns.add(ns as i128);
        self.sum_sq_ns.add(((ns as u128) * (ns as u128)) as i128);
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
        self.buckets
            .get_or_insert_with(|| Box::new([0; SUB_BUCKETS * OCTAVES]))[bucket_of(us)] += 1;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Adds the samples of `later` (the same quantity over a later stretch
    /// of the capture): the result is what one pass over both would hold.
    pub fn merge(&mut self, later: &DurationStats) {
        self.count += later.count;
        self.sum_ns.merge(later.sum_ns);
        self.sum_sq_ns.merge(later.sum_sq_ns);
        self.min_ns = self.min_ns.min(later.min_ns);
        self.max_ns = self.max_ns.max(later.max_ns);
        if let Some(theirs) = &later.buckets {
            let mine = self.buckets.get_or_insert_with(|| Box::new([0; SUB_BUCKETS * OCTAVES]));
            for (a, b) in mine.iter_mut().zip(theirs.iter()) {
                *a += b;
            }
        }
    }

    pub fn min_ns(&self) -> Option<i64> {
        (self.count > 0).then_some(self.min_ns)
    }

    /// Quantile in nanoseconds (from the histogram), if there are samples.
    pub fn quantile_ns(&self, q: f64) -> Option<i64> {
        (self.count > 0).then(|| (self.quantile_ms(q) * 1e6) as i64)
    }

    fn quantile_ms(&self, q: f64) -> f64 {
        let rank = ((self.count as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0u64;
        let Some(buckets) = &self.buckets else {
            return self.max_ns as f64 / 1e6;
        };
        for (i, &c) in buckets.iter().enumerate() {
            seen += c as u64;
            if seen >= rank {
                let v = bucket_value_us(i) / 1000.0;
                return v.clamp(self.min_ns as f64 / 1e6, self.max_ns as f64 / 1e6);
            }
        }
        self.max_ns as f64 / 1e6
    }

    pub fn summary(&self) -> Option<DurationSummary> {
        if self.count == 0 {
            return None;
        }
        let n = self.count as f64;
        let (sum_ns, sum_sq_ns) = (self.sum_ns.signed(), self.sum_sq_ns.unsigned());
        let avg_ns = sum_ns as f64 / n;
        // n * sum(x^2) - sum(x)^2 = n^2 * variance, exact in integers
        // while it fits (durations up to hours, billions of samples).
        let spread = (self.count as u128)
            .checked_mul(sum_sq_ns)
            .and_then(|a| a.checked_sub((sum_ns.max(0) as u128).checked_mul(sum_ns.max(0) as u128)?));
        let var_ns2 = match spread {
            Some(s) => s as f64 / (n * n),
            None => (sum_sq_ns as f64 / n - avg_ns * avg_ns).max(0.0),
        };
        Some(DurationSummary {
            samples: self.count,
            min_ms: self.min_ns as f64 / 1e6,
            avg_ms: avg_ns / 1e6,
            max_ms: self.max_ns as f64 / 1e6,
            stdev_ms: var_ns2.sqrt() / 1e6,
            median_ms: self.quantile_ms(0.5),
            p99_ms: self.quantile_ms(0.99),
        })
    }
}

/// Bytes per time bin, with the bin width doubling whenever the series
/// would exceed `MAX_BINS`: memory stays bounded for any capture length,
/// and the sum over bins is always exact.
#[derive(Debug, Clone, Serialize)]
pub struct RateSeries {
    pub start_ns: i64,
    pub bin_ns: i64,
    pub bytes: Vec<u64>,
    /// Time range of the last bin, so that the common case (same bin as the
    /// previous sample) needs no division.
    #[serde(skip)]
    last_bin: (i64, i64),
}

const MAX_BINS: usize = 2048;
const INITIAL_BIN_NS: i64 = 1_000_000; // 1 ms

impl RateSeries {
    pub fn new(start_ns: i64) -> Self {
        RateSeries {
            start_ns,
            bin_ns: INITIAL_BIN_NS,
            bytes: Vec::new(),
            last_bin: (0, 0),
        }
    }

    #[inline]
    pub fn add(&mut self, time_ns: i64, bytes: u64) {
        if time_ns >= self.last_bin.0 && time_ns < self.last_bin.1 {
            if let Some(last) = self.bytes.last_mut() {
                *last += bytes;
                return;
            }
        }
        self.add_slow(time_ns, bytes);
    }

    fn add_slow(&mut self, time_ns: i64, bytes: u64) {
        let offset = (time_ns - self.start_ns).max(0);
        let mut bin = (offset / self.bin_ns) as usize;
        while bin >= MAX_BINS {
            self.coarsen();
            bin = (offset / self.bin_ns) as usize;
        }
        if bin >= self.bytes.len() {
            self.bytes.resize(bin + 1, 0);
        }
        self.bytes[bin] += bytes;
        if bin + 1 == self.bytes.len() {
            let start = self.start_ns + bin as i64 * self.bin_ns;
            self.last_bin = (start, start + self.bin_ns);
        } else {
            self.last_bin = (0, 0);
        }
    }

    /// The same bins with nothing in them: where a later stretch of the
    /// capture continues the series, to be [`RateSeries::merge`]d after.
    pub fn emptied(&self) -> RateSeries {
        RateSeries {
            start_ns: self.start_ns,
            bin_ns: self.bin_ns,
            bytes: Vec::new(),
            last_bin: (0, 0),
        }
    }

    /// Adds `later`, a series with the same start continued from
    /// [`RateSeries::emptied`]: bins are coarsened to the wider of the two
    /// (bins of both are power-of-two multiples of one width from one
    /// start, so they align), then added.
    pub fn merge(&mut self, later: &RateSeries) {
        debug_assert_eq!(self.start_ns, later.start_ns);
        let mut later = later.clone();
        while self.bin_ns < later.bin_ns {
            self.coarsen();
        }
        while later.bin_ns < self.bin_ns {
            later.coarsen();
        }
        if later.bytes.len() > self.bytes.len() {
            self.bytes.resize(later.bytes.len(), 0);
        }
        for (a, b) in self.bytes.iter_mut().zip(later.bytes) {
            *a += b;
        }
        self.last_bin = (0, 0);
    }

    fn coarsen(&mut self) {
        let merged: Vec<u64> = self.bytes.chunks(2).map(|c| c.iter().sum()).collect();
        self.bytes = merged;
        self.bin_ns *= 2;
        self.last_bin = (0, 0);
    }

    /// Highest rate over any one bin, in bits per second (bins of at least
    /// `min_bin_ns` are used so that one burst does not read as a rate).
    pub fn peak_bits_per_sec(&self, min_bin_ns: i64) -> Option<f64> {
        if self.bytes.is_empty() {
            return None;
        }
        let group = ((min_bin_ns + self.bin_ns - 1) / self.bin_ns).max(1) as usize;
        let width_s = (group as i64 * self.bin_ns) as f64 / 1e9;
        self.bytes
            .chunks(group)
            .filter(|c| c.len() == group)
            .map(|c| c.iter().sum::<u64>() as f64 * 8.0 / width_s)
            .fold(None, |acc: Option<f64>, v| {
                Some(acc.map_or(v, |a| a.max(v)))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_quantiles_are_close() {
        let mut d = DurationStats::default();
        for i in 1..=1000 {
            d.add(i * 1_000_000); // 1..1000 ms
        }
        let s = d.summary().unwrap();
        assert_eq!(s.samples, 1000);
        assert!((s.min_ms - 1.0).abs() < 1e-9 && (s.max_ms - 1000.0).abs() < 1e-9);
        assert!((s.avg_ms - 500.5).abs() < 1e-6);
        assert!((s.median_ms / 500.0 - 1.0).abs() < 0.05, "{}", s.median_ms);
        assert!((s.p99_ms / 990.0 - 1.0).abs() < 0.05, "{}", s.p99_ms);
        assert!((s.stdev_ms - 288.67).abs() < 0.1);
    }

    #[test]
    fn rate_series_coarsens_and_keeps_sum() {
        let mut r = RateSeries::new(0);
        for ms in 0..10_000i64 {
            r.add(ms * 1_000_000, 1000);
        }
        assert!(r.bytes.len() <= MAX_BINS);
        assert_eq!(r.bytes.iter().sum::<u64>(), 10_000 * 1000);
        let peak = r.peak_bits_per_sec(100_000_000).unwrap();
        assert!((peak / 8_000_000.0 - 1.0).abs() < 0.05, "{peak}");
    }
}
