//! A bounded sample of a long series: every value while few, then every
//! second, fourth... (stride doubling), with the exact minimum and maximum
//! kept beside it. Quantiles of a decimated series are those of an evenly
//! thinned one.

/// Nanoseconds as milliseconds, for the report (its one unit of time).
pub fn ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

/// An interval whose ends were both bounded (`i64::MIN`/`MAX` mean not)
/// and do not contradict each other.
pub fn bounds(lo: i64, hi: i64) -> Option<(i64, i64)> {
    (lo > i64::MIN && hi < i64::MAX && lo <= hi).then_some((lo, hi))
}

/// Values kept at most.
pub const SAMPLES_MAX: usize = 1 << 15;

#[derive(Debug, Clone, Default)]
pub struct Samples {
    kept: Vec<i64>,
    stride: u64,
    seen: u64,
    pub min: Option<(i64, i64)>,
    pub max: Option<(i64, i64)>,
}

impl Samples {
    /// Adds `v`, observed at `at` (kept with the extremes).
    pub fn push(&mut self, v: i64, at: i64) {
        if self.min.is_none_or(|(m, _)| v < m) {
            self.min = Some((v, at));
        }
        if self.max.is_none_or(|(m, _)| v > m) {
            self.max = Some((v, at));
        }
        // the stride is a power of two: a mask, not a division per value
        let stride = self.stride.max(1);
        if self.seen & (stride - 1) == 0 {
            if self.kept.len() == SAMPLES_MAX {
                let mut i = 0;
                self.kept.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                self.stride = stride * 2;
            }
            if self.seen & (self.stride.max(1) - 1) == 0 {
                self.kept.push(v);
            }
        }
        self.seen += 1;
    }

    pub fn len(&self) -> u64 {
        self.seen
    }

    pub fn is_empty(&self) -> bool {
        self.seen == 0
    }

    /// The kept values after the first `skip` observed (in order).
    pub fn kept_from(&self, skip: usize) -> Vec<i64> {
        let stride = self.stride.max(1) as usize;
        self.kept.iter().skip(skip.div_ceil(stride)).copied().collect()
    }

    /// The `q` quantile (0..=1) of the kept values.
    pub fn quantile(&self, q: f64) -> Option<i64> {
        if self.kept.is_empty() {
            return None;
        }
        let mut v = self.kept.clone();
        let i = ((v.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
        Some(*v.select_nth_unstable(i).1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_series_stays_bounded_and_keeps_its_quantiles_and_extremes() {
        let mut s = Samples::default();
        for i in 0..1_000_000i64 {
            s.push(i, i);
        }
        assert!(s.kept.len() <= SAMPLES_MAX);
        assert_eq!(s.min, Some((0, 0)));
        assert_eq!(s.max, Some((999_999, 999_999)));
        let m = s.quantile(0.5).unwrap();
        assert!((m - 500_000).abs() < 5_000, "{m}");
    }
}
