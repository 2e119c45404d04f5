//! Thinning a packet log's [`Columns`] that reached its budget (see `packets` module
//! docs): exact first, last, minimum and maximum per time bucket of every
//! plotted series, per kind of row.

use crate::columns::{Columns, NONE_I64, NONE_U64};
use std::collections::HashMap;
use tcpwhy_flow::Flags;

/// A connection with fewer rows than this is not thinned: with many small
/// connections the log stops recording instead (`truncated`), as before.
const MIN_ROWS_TO_THIN: usize = 4096;
/// The first width gives each bucket about this many rows of the connection
/// (so the first thinning about halves it: a bulk transfer's bucket keeps
/// up to 8 rows per kind, 2 or 3 kinds active).
const ROWS_PER_FIRST_BUCKET: i64 = 64;

const SYN_FIN_RST: u16 = 0x07;
const DATA_FLAGS: u32 =
    Flags::RETRANSMISSION.0 | Flags::LOST_SEGMENT.0 | Flags::OUT_OF_ORDER.0 | Flags::SPURIOUS_RETRANSMISSION.0 | Flags::FAST_RETRANSMISSION.0;
const ACK_FLAGS: u32 = Flags::DUPLICATE_ACK.0 | Flags::ZERO_WINDOW.0;

/// Indices kept in one (bucket, kind): first, last, and the minimum and
/// maximum of up to three series.
#[derive(Clone, Copy)]
struct Slot {
    first: u32,
    last: u32,
    min: [u32; 3],
    max: [u32; 3],
}

/// Thins the connections with the most rows until the log holds at most
/// `target` rows, or no connection is big enough to thin.
pub(crate) fn thin(log: &mut Columns, target: usize) {
    while log.len() > target {
        let mut count: HashMap<u64, usize> = HashMap::new();
        for &c in &log.connection {
            *count.entry(c).or_default() += 1;
        }
        let Some((&conn, &n)) = count.iter().max_by_key(|(c, n)| (**n, std::cmp::Reverse(**c))) else { return };
        if n < MIN_ROWS_TO_THIN {
            return;
        }
        let rows: Vec<usize> = (0..log.len()).filter(|&i| log.connection[i] == conn).collect();
        let (t_lo, t_hi) = rows.iter().fold((i64::MAX, i64::MIN), |(a, b), &i| (a.min(log.time_ns[i]), b.max(log.time_ns[i])));
        let span = (t_hi - t_lo).max(1);
        let (origin, mut width) = match log.thinned_width.get(&conn) {
            Some(&(o, w)) => (o, w),
            None => (t_lo, 0),
        };
        // The width in force thins the rows that came since at the same
        // resolution (the rows before `thin_clean` are already thinned at
        // it: selecting them again would keep the same rows); it doubles,
        // and everything is selected again, only when that is not enough.
        let mut keep = if width == 0 {
            width = (span * ROWS_PER_FIRST_BUCKET / n as i64).max(1);
            select(log, &rows, origin, width)
        } else {
            let split = rows.partition_point(|&i| i < log.thin_clean);
            let mut k = rows[..split].to_vec();
            k.extend(select(log, &rows[split..], origin, width));
            k
        };
        while keep.len() > n / 2 && width <= span.saturating_mul(2) {
            width = width.saturating_mul(2);
            keep = select(log, &rows, origin, width);
        }
        log.thinned_width.insert(conn, (origin, width));
        if keep.len() >= n {
            return;
        }
        let mut mask = vec![true; log.len()];
        for &i in &rows {
            mask[i] = false;
        }
        for &i in &keep {
            mask[i] = true;
        }
        retain(log, &mask);
    }
}

/// The rows of `rows` (one connection) to keep at this bucket width.
fn select(log: &Columns, rows: &[usize], origin: i64, width: i64) -> Vec<usize> {
    let mut slots: HashMap<(i64, u8), Slot> = HashMap::new();
    let mut always = Vec::new();
    let nan_i = |v: i64| if v == NONE_I64 { f64::NAN } else { v as f64 };
    for &i in rows {
        if log.tcp_flags[i] & SYN_FIN_RST != 0 {
            always.push(i);
            continue;
        }
        let b = (log.time_ns[i] - origin).div_euclid(width);
        let d = log.direction[i];
        let f = log.flags[i];
        let mut roles: [Option<(u8, [f64; 3])>; 2] = [None, None];
        if log.len[i] > 0 {
            let kind = if f & DATA_FLAGS != 0 { 1 } else { 0 };
            let inflight = if log.in_flight[i] == NONE_U64 { f64::NAN } else { log.in_flight[i] as f64 };
            roles[0] = Some((d * 4 + kind, [log.seq[i] as f64, inflight, f64::NAN]));
        }
        if log.ack[i] != NONE_I64 {
            let kind = if f & ACK_FLAGS != 0 { 3 } else { 2 };
            roles[1] = Some((d * 4 + kind, [log.ack[i] as f64, log.window[i] as f64, nan_i(log.rtt_ns[i])]));
        }
        if roles.iter().all(Option::is_none) {
            always.push(i);
            continue;
        }
        for (class, ys) in roles.into_iter().flatten() {
            let s = slots.entry((b, class)).or_insert(Slot { first: i as u32, last: i as u32, min: [u32::MAX; 3], max: [u32::MAX; 3] });
            s.last = i as u32;
            for k in 0..3 {
                let y = ys[k];
                if y.is_nan() {
                    continue;
                }
                let val = |j: u32| role_value(log, j as usize, class, k);
                if s.min[k] == u32::MAX || y < val(s.min[k]) {
                    s.min[k] = i as u32;
                }
                if s.max[k] == u32::MAX || y > val(s.max[k]) {
                    s.max[k] = i as u32;
                }
            }
        }
    }
    let mut keep = always;
    for s in slots.values() {
        keep.push(s.first as usize);
        keep.push(s.last as usize);
        keep.extend(s.min.iter().chain(&s.max).filter(|&&j| j != u32::MAX).map(|&j| j as usize));
    }
    keep.sort_unstable();
    keep.dedup();
    keep
}

/// Series `k` of row `i` in the role of `class` (as in `select`).
fn role_value(log: &Columns, i: usize, class: u8, k: usize) -> f64 {
    if class % 4 < 2 {
        match k {
            0 => log.seq[i] as f64,
            _ => log.in_flight[i] as f64,
        }
    } else {
        match k {
            0 => log.ack[i] as f64,
            1 => log.window[i] as f64,
            _ => log.rtt_ns[i] as f64,
        }
    }
}

/// Keeps the rows whose mask is true, with their SACK rows renumbered.
fn retain(log: &mut Columns, mask: &[bool]) {
    fn keep<T: Copy>(v: &mut Vec<T>, mask: &[bool]) {
        let mut j = 0;
        for i in 0..v.len() {
            if mask[i] {
                v[j] = v[i];
                j += 1;
            }
        }
        v.truncate(j);
    }
    let mut new_index = Vec::with_capacity(mask.len());
    let mut n = 0u32;
    for &m in mask {
        new_index.push(n);
        n += m as u32;
    }
    log.thin_clean = if log.thin_clean >= mask.len() { n as usize } else { new_index[log.thin_clean] as usize };
    log.sack.retain(|s| mask[s.0 as usize]);
    for s in &mut log.sack {
        s.0 = new_index[s.0 as usize];
    }
    keep(&mut log.frame, mask);
    keep(&mut log.time_ns, mask);
    keep(&mut log.connection, mask);
    keep(&mut log.direction, mask);
    keep(&mut log.tcp_flags, mask);
    keep(&mut log.flags, mask);
    keep(&mut log.seq, mask);
    keep(&mut log.len, mask);
    keep(&mut log.ack, mask);
    keep(&mut log.window, mask);
    keep(&mut log.in_flight, mask);
    keep(&mut log.rtt_ns, mask);
}
