//! A small set of disjoint byte ranges (half-open, in unwrapped sequence
//! offsets), used for the SACK scoreboard and for the holes a capture did
//! not see. The number of ranges is capped so memory stays bounded whatever
//! the input; when the cap is hit the lowest ranges are dropped (documented
//! as an approximation, rare in practice: real SACK holds at most a few
//! dozen holes at once).

#[derive(Debug, Clone, Default, PartialEq)]
pub struct RangeSet {
    ranges: Vec<(i64, i64)>,
}

const MAX_RANGES: usize = 512;

impl RangeSet {
    pub fn iter(&self) -> impl Iterator<Item = &(i64, i64)> {
        self.ranges.iter()
    }

    /// Adds [start, end); returns the number of bytes that were not in the set.
    pub fn insert(&mut self, start: i64, end: i64) -> i64 {
        if end <= start {
            return 0;
        }
        // First range whose end reaches start.
        let i = self.ranges.partition_point(|&(_, e)| e < start);
        let mut j = i;
        let mut new_start = start;
        let mut new_end = end;
        let mut covered = 0;
        while j < self.ranges.len() && self.ranges[j].0 <= end {
            let (s, e) = self.ranges[j];
            covered += e.min(end) - s.max(start);
            new_start = new_start.min(s);
            new_end = new_end.max(e);
            j += 1;
        }
        self.ranges
            .splice(i..j, std::iter::once((new_start, new_end)));
        if self.ranges.len() > MAX_RANGES {
            self.ranges.remove(0);
        }
        (end - start) - covered.max(0)
    }

    /// Removes [start, end); returns the number of bytes removed.
    #[inline]
    pub fn remove(&mut self, start: i64, end: i64) -> i64 {
        if end <= start || self.ranges.is_empty() {
            return 0;
        }
        self.remove_nonempty(start, end)
    }

    fn remove_nonempty(&mut self, start: i64, end: i64) -> i64 {
        let mut removed = 0;
        let mut out: Vec<(i64, i64)> = Vec::new();
        let i = self.ranges.partition_point(|&(_, e)| e <= start);
        let mut j = i;
        while j < self.ranges.len() && self.ranges[j].0 < end {
            let (s, e) = self.ranges[j];
            removed += e.min(end) - s.max(start);
            if s < start {
                out.push((s, start));
            }
            if e > end {
                out.push((end, e));
            }
            j += 1;
        }
        if i != j {
            self.ranges.splice(i..j, out);
        }
        removed
    }

    /// Drops everything below `offset`.
    #[inline]
    pub fn trim_below(&mut self, offset: i64) {
        if self.ranges.is_empty() {
            return;
        }
        let k = self.ranges.partition_point(|&(_, e)| e <= offset);
        self.ranges.drain(..k);
        if let Some(first) = self.ranges.first_mut() {
            first.0 = first.0.max(offset);
        }
    }

    /// Drops everything at or above `offset`.
    #[inline]
    pub fn trim_above(&mut self, offset: i64) {
        let k = self.ranges.partition_point(|&(s, _)| s < offset);
        self.ranges.truncate(k);
        if let Some(last) = self.ranges.last_mut() {
            last.1 = last.1.min(offset);
        }
    }

    /// Bytes of the set inside [start, end).
    #[inline]
    pub fn overlap(&self, start: i64, end: i64) -> i64 {
        if self.ranges.is_empty() {
            return 0;
        }
        let i = self.ranges.partition_point(|&(_, e)| e <= start);
        self.ranges[i..]
            .iter()
            .take_while(|&&(s, _)| s < end)
            .map(|&(s, e)| e.min(end) - s.max(start))
            .sum()
    }

    /// True if [start, end) lies entirely inside one range.
    #[cfg(test)]
    pub fn contains(&self, start: i64, end: i64) -> bool {
        let i = self.ranges.partition_point(|&(_, e)| e < end);
        self.ranges
            .get(i)
            .is_some_and(|&(s, e)| s <= start && end <= e)
    }

    #[cfg(test)]
    pub fn total(&self) -> i64 {
        self.ranges.iter().map(|&(s, e)| e - s).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_merge_remove() {
        let mut r = RangeSet::default();
        assert_eq!(r.insert(10, 20), 10);
        assert_eq!(r.insert(30, 40), 10);
        assert_eq!(r.insert(15, 35), 10);
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), vec![(10, 40)]);
        assert_eq!(r.remove(20, 25), 5);
        assert_eq!(
            r.iter().copied().collect::<Vec<_>>(),
            vec![(10, 20), (25, 40)]
        );
        assert!(r.contains(26, 40));
        assert!(!r.contains(15, 30));
        assert_eq!(r.overlap(0, 100), 25);
        r.trim_below(30);
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), vec![(30, 40)]);
        assert_eq!(r.insert(40, 50), 10);
        assert_eq!(r.total(), 20);
    }

    #[test]
    fn trim_above_keeps_what_lies_below() {
        let mut r = RangeSet::default();
        r.insert(10, 20);
        r.insert(30, 40);
        r.insert(50, 60);
        let mut a = r.clone();
        a.trim_above(35);
        assert_eq!(a.iter().copied().collect::<Vec<_>>(), vec![(10, 20), (30, 35)]);
        let mut b = r.clone();
        b.trim_above(30);
        assert_eq!(b.iter().copied().collect::<Vec<_>>(), vec![(10, 20)]);
        r.trim_above(5);
        assert_eq!(r.total(), 0);
    }
}
