//! Order statistics by selection, not by sorting.
//!
//! A detector that reads a few ranks of a sample (a median, a low and a
//! high percentile, the smallest) needs only those ranks in place, not
//! the whole sample in order: `select_nth_unstable` puts one rank in place
//! in linear time where a sort takes n log n. The value at a rank is the
//! same whichever way it is found (the comparison is a total order), so
//! every result equals the sorted slice's at that index. A long direction
//! is diagnosed in parts of up to `PART_DATA_SEGMENTS` records, and sorting
//! the RTT samples and pass bounds of each part was a tenth of `diagnose`'s
//! instructions on a bulk transfer (bench/instructions.sh).
//!
//! The functions reorder the slice they are given.

use std::cmp::Ordering;

/// The index of the nearest rank of quantile `q` in a sorted sample of
/// `n` (n > 0): round((n - 1) q), as every percentile of the diagnosis
/// reads it.
pub(crate) fn nearest_rank(n: usize, q: f64) -> usize {
    (((n - 1) as f64 * q).round() as usize).min(n - 1)
}

/// The value that index `k` of `v` would hold once sorted by `cmp`.
pub(crate) fn at_rank_by<T: Copy>(v: &mut [T], k: usize, cmp: impl FnMut(&T, &T) -> Ordering) -> T {
    *v.select_nth_unstable_by(k, cmp).1
}

/// The nearest-rank quantile `q` of `v` under `f64::total_cmp`; `None`
/// when `v` is empty.
pub(crate) fn quantile_f64(v: &mut [f64], q: f64) -> Option<f64> {
    (!v.is_empty()).then(|| at_rank_by(v, nearest_rank(v.len(), q), f64::total_cmp))
}

/// The nearest-rank quantile `q` of `v`; `None` when `v` is empty.
pub(crate) fn quantile_i64(v: &mut [i64], q: f64) -> Option<i64> {
    (!v.is_empty()).then(|| at_rank_by(v, nearest_rank(v.len(), q), i64::cmp))
}

/// The smallest value of `v` under `f64::total_cmp`.
pub(crate) fn min_f64(v: &[f64]) -> Option<f64> {
    v.iter().copied().min_by(f64::total_cmp)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Selection gives the sorted slice's value at every rank, on samples
    /// with ties, negative zero and both orders.
    #[test]
    fn every_rank_equals_the_sorted_value() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for n in [1usize, 2, 3, 10, 51, 1000] {
            let v: Vec<f64> = (0..n).map(|_| ((next() % 97) as f64 - 48.0) / 4.0).collect();
            let mut v = v;
            v.push(-0.0);
            v.push(0.0);
            let mut sorted = v.clone();
            sorted.sort_by(f64::total_cmp);
            for q in [0.0, 0.05, 0.1, 0.5, 0.9, 0.95, 1.0] {
                let want = sorted[nearest_rank(sorted.len(), q)];
                let got = quantile_f64(&mut v.clone(), q).unwrap();
                assert_eq!(want.to_bits(), got.to_bits(), "n={n} q={q}");
            }
            assert_eq!(min_f64(&v).unwrap().to_bits(), sorted[0].to_bits());
            let iv: Vec<i64> = v.iter().map(|x| (x * 4.0) as i64).collect();
            let mut isorted = iv.clone();
            isorted.sort_unstable();
            for q in [0.0, 0.1, 0.5, 0.9, 1.0] {
                assert_eq!(quantile_i64(&mut iv.clone(), q), Some(isorted[nearest_rank(isorted.len(), q)]));
            }
        }
        assert_eq!(quantile_f64(&mut [], 0.5), None);
    }
}
