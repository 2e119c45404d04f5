//! Min/max decimation: for drawing a series of many points on a few
//! hundred pixel columns without losing spikes.
//!
//! The x range is cut into `buckets` equal columns; in each column the
//! first, the minimum, the maximum and the last point are kept (their exact
//! values and positions), so the drawn envelope is exactly that of the full
//! data. The HTML report does the same in JavaScript for the visible range on
//! every zoom (`report.js`, `decimate`), so zooming in shows every point.

/// Indices (ascending, no duplicates) of the points to keep. `xs` must be
/// sorted ascending; points outside `[x0, x1]` are dropped, except the one
/// just before and just after the range so that lines run to the edges.
/// NaN values of `ys` are skipped.
pub fn min_max_indices(xs: &[f64], ys: &[f64], x0: f64, x1: f64, buckets: usize) -> Vec<usize> {
    let n = xs.len().min(ys.len());
    let lo = xs[..n].partition_point(|&x| x < x0);
    let hi = xs[..n].partition_point(|&x| x <= x1);
    let mut out = Vec::new();
    if lo > 0 {
        out.push(lo - 1);
    }
    if hi - lo <= buckets.saturating_mul(4) || buckets == 0 || x1 <= x0 {
        out.extend((lo..hi).filter(|&i| !ys[i].is_nan()));
    } else {
        let scale = buckets as f64 / (x1 - x0);
        let mut i = lo;
        while i < hi {
            let b = (((xs[i] - x0) * scale) as usize).min(buckets - 1);
            let (mut first, mut last, mut min, mut max) = (usize::MAX, 0, usize::MAX, usize::MAX);
            while i < hi && (((xs[i] - x0) * scale) as usize).min(buckets - 1) == b {
                let y = ys[i];
                if !y.is_nan() {
                    if first == usize::MAX {
                        first = i;
                    }
                    last = i;
                    if min == usize::MAX || y < ys[min] {
                        min = i;
                    }
                    if max == usize::MAX || y > ys[max] {
                        max = i;
                    }
                }
                i += 1;
            }
            if first != usize::MAX {
                let mut k = [first, min, max, last];
                k.sort_unstable();
                for j in k {
                    if out.last() != Some(&j) {
                        out.push(j);
                    }
                }
            }
        }
    }
    if hi < n {
        out.push(hi);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> f64 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*seed >> 11) as f64) / ((1u64 << 53) as f64)
    }

    #[test]
    fn keeps_exact_min_and_max_of_every_bucket() {
        let mut s = 7;
        let n = 200_000;
        let mut xs: Vec<f64> = (0..n).map(|_| lcg(&mut s) * 100.0).collect();
        xs.sort_by(f64::total_cmp);
        let ys: Vec<f64> = (0..n).map(|i| (i as f64 * 0.01).sin() * 1e6 + lcg(&mut s) * 1e3).collect();
        let buckets = 500;
        let keep = min_max_indices(&xs, &ys, 0.0, 100.0, buckets);
        assert!(keep.len() <= buckets * 4 + 2, "{}", keep.len());
        assert!(keep.windows(2).all(|w| w[0] < w[1]));
        // Per bucket, the min and max of the kept points equal those of all points.
        let bucket = |x: f64| ((x / 100.0 * buckets as f64) as usize).min(buckets - 1);
        let mut all = vec![(f64::INFINITY, f64::NEG_INFINITY); buckets];
        for i in 0..n {
            let b = &mut all[bucket(xs[i])];
            *b = (b.0.min(ys[i]), b.1.max(ys[i]));
        }
        let mut kept = vec![(f64::INFINITY, f64::NEG_INFINITY); buckets];
        for &i in &keep {
            let b = &mut kept[bucket(xs[i])];
            *b = (b.0.min(ys[i]), b.1.max(ys[i]));
        }
        assert_eq!(all, kept);
        // The global extremes are kept bit for bit.
        let gmax = ys.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        assert!(keep.iter().any(|&i| ys[i] == gmax));
    }

    #[test]
    fn zoomed_range_keeps_every_point_and_the_neighbours() {
        let xs: Vec<f64> = (0..1000).map(|i| i as f64).collect();
        let ys: Vec<f64> = xs.iter().map(|x| x * 2.0).collect();
        let keep = min_max_indices(&xs, &ys, 100.0, 199.0, 800);
        assert_eq!(keep.len(), 102);
        assert_eq!(keep[0], 99);
        assert_eq!(*keep.last().unwrap(), 200);
    }

    #[test]
    fn nan_values_are_skipped() {
        let xs: Vec<f64> = (0..10_000).map(|i| i as f64).collect();
        let ys: Vec<f64> = xs.iter().map(|&x| if (x as u64).is_multiple_of(2) { f64::NAN } else { x }).collect();
        let keep = min_max_indices(&xs, &ys, 0.0, 10_000.0, 10);
        assert!(keep.iter().all(|&i| !ys[i].is_nan() || i == 0));
    }
}
