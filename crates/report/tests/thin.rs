//! Thinning a packet log past its budget (packets.rs, thin.rs), on a real
//! capture: the thinned log keeps, in every time bucket of the width it
//! reports, exactly the first, last, lowest and highest sequence number of
//! the data and the lowest and highest ACK and window of the ACKs, as the
//! complete log has them; the rows exported before thinning are every row.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use tcpwhy_flow::{analyze_capture, Flags};
use tcpwhy_report::packets::{RowExport, NONE_I64, NONE_U64};
use tcpwhy_flow::Tee;
use tcpwhy_report::PacketLog;
use tcpwhy_wire::CaptureReader;

fn zwnd() -> PathBuf {
    let p = std::env::var_os("TCPWHY_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    p.join("captures/public/tcptrace__zwnd.dmp.gz")
}

/// Collects the frame numbers of every exported row.
struct Frames(Rc<RefCell<Vec<u64>>>);

impl RowExport for Frames {
    fn rows(&mut self, log: &PacketLog, rows: std::ops::Range<usize>) -> std::io::Result<()> {
        self.0.borrow_mut().extend_from_slice(&log.frame[rows]);
        Ok(())
    }
}

#[test]
fn thinning_keeps_each_buckets_extremes_and_exports_every_row() {
    let path = zwnd();
    let mut full = PacketLog::with_budget(usize::MAX);
    let mut thin = PacketLog::with_budget(8192);
    let exported = Rc::new(RefCell::new(Vec::new()));
    thin.set_export(Box::new(Frames(exported.clone())));
    analyze_capture(CaptureReader::open(&path).expect("readable"), Default::default(), &mut Tee(&mut full, &mut thin), |_| {});
    thin.finish_export().unwrap();
    assert!(full.len() > 3 * 8192, "the capture must exceed the budget: {} rows", full.len());
    assert!(thin.thinned() && !thin.truncated());
    assert!(thin.len() <= 8192);
    // Every row exported once, in capture order.
    assert_eq!(*exported.borrow(), full.frame);

    let kept: HashSet<u64> = thin.frame.iter().copied().collect();
    let data_flags = [Flags::RETRANSMISSION, Flags::LOST_SEGMENT, Flags::OUT_OF_ORDER, Flags::SPURIOUS_RETRANSMISSION, Flags::FAST_RETRANSMISSION]
        .iter()
        .fold(0, |a, f| a | f.0);
    let ack_flags = Flags::DUPLICATE_ACK.0 | Flags::ZERO_WINDOW.0;
    for (&conn, &(origin, width)) in &thin.thinned_width {
        // (bucket, direction, data or ack) -> the rows of the complete log.
        let mut groups: HashMap<(i64, u8, bool), Vec<usize>> = HashMap::new();
        for i in 0..full.len() {
            if full.connection[i] != conn || full.tcp_flags[i] & 0x07 != 0 {
                continue;
            }
            let b = (full.time_ns[i] - origin).div_euclid(width);
            // The kinds of rows thin.rs keeps apart: plain data, and the ACK
            // role of any segment without a duplicate-ACK or zero-window flag.
            if full.len[i] > 0 && full.flags[i] & data_flags == 0 {
                groups.entry((b, full.direction[i], true)).or_default().push(i);
            }
            if full.ack[i] != NONE_I64 && full.flags[i] & ack_flags == 0 {
                groups.entry((b, full.direction[i], false)).or_default().push(i);
            }
        }
        assert!(groups.len() > 10);
        let mut checked = 0;
        for ((_, _, data), rows) in &groups {
            assert!(kept.contains(&full.frame[rows[0]]) && kept.contains(&full.frame[*rows.last().unwrap()]));
            // Sequence and bytes in flight for data, ACK number and window
            // for ACKs: some row with each bucket's lowest and highest value
            // is kept (the window and the bytes in flight go up and down).
            let series: [&dyn Fn(usize) -> Option<i128>; 2] = if *data {
                [&|i| Some(full.seq[i] as i128), &|i| (full.in_flight[i] != NONE_U64).then(|| full.in_flight[i] as i128)]
            } else {
                [&|i| Some(full.ack[i] as i128), &|i| Some(full.window[i] as i128)]
            };
            for value in series {
                let vals: Vec<i128> = rows.iter().filter_map(|&i| value(i)).collect();
                let (Some(lo), Some(hi)) = (vals.iter().min(), vals.iter().max()) else { continue };
                for want in [*lo, *hi] {
                    assert!(
                        rows.iter().any(|&i| value(i) == Some(want) && kept.contains(&full.frame[i])),
                        "connection {conn}: extreme {want} lost"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 40, "{checked} extremes checked");
    }
}
