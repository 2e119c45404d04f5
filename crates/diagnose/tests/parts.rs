//! A long direction diagnosed in parts (crate::parts): on real captures cut
//! into small parts, the parts tile the direction, the held records never
//! exceed a part, and a steady cause survives the cut; the merge rules on
//! parts that disagree.

use std::path::{Path, PathBuf};
use tcpwhy_core::{Cause, Confidence, Limit};
use tcpwhy_diagnose::parts::{merge, Part, PART_AGREEMENT};
use tcpwhy_diagnose::{diagnose_all, DirectionDiagnosis, Options, Recorder};
use tcpwhy_flow::{analyze_capture, CaptureAnalysis};
use tcpwhy_wire::CaptureReader;

fn shared(name: &str) -> PathBuf {
    let p = std::env::var_os("TCPWHY_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    let dir = p.join("captures/public");
    let f = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("shared captures not found at {} (set TCPWHY_SHARED): {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.file_name().unwrap().to_string_lossy().contains(name));
    f.unwrap_or_else(|| panic!("no capture named *{name}*"))
}

/// The capture's analysis, its recorder and the largest direction's diagnosis.
fn diagnose(path: &Path, part: Option<usize>) -> (CaptureAnalysis, Recorder, DirectionDiagnosis) {
    let mut rec = Recorder::new(Options::default());
    if let Some(n) = part {
        rec = rec.with_part_size(n);
    }
    let a = analyze_capture(CaptureReader::open(path).expect("readable"), Default::default(), &mut rec, |_| {});
    let mut v: Vec<DirectionDiagnosis> =
        diagnose_all(&a, &rec, &Options::default()).into_iter().flat_map(|c| c.directions).collect();
    v.sort_by_key(|d| std::cmp::Reverse(d.bytes));
    let d = v.into_iter().next().expect("a diagnosed direction");
    (a, rec, d)
}

#[test]
fn parts_tile_the_direction_and_keep_a_steady_cause() {
    // M-Lab 5B90B: 86,000 segments held by the sender's buffer throughout
    // (tcp_info's sndbuf_limited in its SOURCES.md); zwnd: a receiver that
    // stops reading, window closing to zero again and again.
    for (name, part) in [("5B90B", 4096), ("zwnd", 4096)] {
        let path = shared(name);
        let (a, whole_rec, whole) = diagnose(&path, None);
        let (_, rec, cut) = diagnose(&path, Some(part));
        assert!(whole.parts.is_empty(), "{name}: a whole direction has no parts");
        assert!(cut.parts.len() >= 4, "{name}: {} parts", cut.parts.len());
        let cs = a.connections.iter().max_by_key(|c| c.directions.iter().map(|d| d.counts.unique_bytes).max()).unwrap();
        let d = if whole.from == "a" { 0 } else { 1 };
        // Every data segment in exactly one part; each part (but the last)
        // closed at the part size; parts in time order.
        let held = whole_rec.get(cs.id).unwrap().dirs[d].data.len() as u64;
        assert_eq!(cut.parts.iter().map(|p| p.data_segments).sum::<u64>(), held, "{name}");
        assert!(cut.parts[..cut.parts.len() - 1].iter().all(|p| p.data_segments == part as u64), "{name}");
        assert!(cut.parts.windows(2).all(|w| w[0].end <= w[1].start), "{name}");
        // At the end only the last part's records are held.
        let last = rec.get(cs.id).unwrap().dirs[d].data.len();
        assert!(last <= part && last as u64 == cut.parts.last().unwrap().data_segments, "{name}");
        // The direction's own figures, not a part's.
        assert_eq!((cut.bytes, cut.goodput_bps), (whole.bytes, whole.goodput_bps), "{name}");
        // A steady cause is the same cut or whole, and so is its share of time.
        assert_eq!(cut.primary, whole.primary, "{name}: parts {:?}", cut.parts);
        let share = |x: &DirectionDiagnosis| {
            x.limits.iter().filter(|(k, _)| k.as_str() == whole.primary.as_str()).map(|(_, v)| v).sum::<f64>()
        };
        assert!(share(&whole) > 0.5, "{name}: the cause held most of the time");
        assert!((share(&cut) - share(&whole)).abs() < 0.05, "{name}: {} vs {}", share(&cut), share(&whole));
        assert!((cut.limits.values().sum::<f64>() - 1.0).abs() < 1e-6);
        // "Is it the network?" and the what-if are the direction's: the
        // time won back is of the direction's duration, the prediction is
        // its bytes over what is left, and it stays within what the
        // untouched time allows.
        assert!((cut.time_split.network - whole.time_split.network).abs() < 0.05, "{name}");
        let gain = |x: &DirectionDiagnosis| x.what_if.first().and_then(|w| Some(w.predicted_bps? / w.current_bps));
        for w in &cut.what_if {
            let (Some(after), Some(saved), Some(p)) = (w.duration_s, w.saved_s, w.predicted_bps) else { continue };
            assert!((after + saved - cut.duration_s).abs() <= 1e-6 * cut.duration_s, "{name}: {after} + {saved} vs {}", cut.duration_s);
            assert!((p - cut.bytes as f64 * 8.0 / after).abs() <= 1e-6 * p, "{name}");
            assert_eq!(Some(w.current_bps), cut.goodput_bps, "{name}");
            // (a fix of the application itself shortens the application's time)
            let app = w.addresses.iter().any(|l| matches!(l, Limit::SenderApplication | Limit::ReceiverApplication | Limit::Idle));
            if let (Some(most), false) = (cut.time_split.most_bps, app) {
                assert!(p <= most * 1.001, "{name}: {p} above {most}");
            }
        }
        if let (Some(c), Some(w)) = (gain(&cut), gain(&whole)) {
            assert!(c / w < 1.5 && w / c < 1.5, "{name}: the parts' gain {c:.2}x against the whole's {w:.2}x");
        }
    }
}

/// Two parts of one real diagnosis with the given primaries and busy times.
fn two_parts(base: &DirectionDiagnosis, a: (Cause, f64), b: (Cause, f64)) -> Vec<Part> {
    let mut t = 0.0;
    [a, b]
        .into_iter()
        .map(|(cause, secs)| {
            let mut dd = base.clone();
            dd.primary = cause;
            dd.confidence = Confidence::High;
            dd.duration_s = secs;
            let mut summary = tcpwhy_diagnose::parts::PartSummary {
                start: t,
                end: t + secs,
                data_segments: 1000,
                bytes: 1_000_000,
                goodput_bps: None,
                primary: cause,
                confidence: Confidence::High,
            };
            summary.goodput_bps = Some(8e6 / secs);
            t += secs;
            Part { summary, diagnosis: Some(dd) }
        })
        .collect()
}

#[test]
fn parts_that_disagree_lower_the_confidence_and_say_so() {
    let path = shared("5B90B");
    let (a, _, base) = diagnose(&path, None);
    let cs = a.connections.iter().max_by_key(|c| c.directions.iter().map(|d| d.counts.unique_bytes).max()).unwrap();
    let d = if base.from == "a" { 0 } else { 1 };
    // 60% / 40%: below two thirds, the primary is the larger, at most medium.
    let m = merge(two_parts(&base, (Cause::ReceiverWindow, 6.0), (Cause::Policer, 4.0)), cs, d).unwrap();
    assert!(0.6 < PART_AGREEMENT);
    assert_eq!(m.primary, Cause::ReceiverWindow);
    assert_eq!(m.confidence, Confidence::Medium);
    let f = m.findings.iter().find(|f| f.kind == "cause_changed").expect("cause_changed finding");
    assert!(f.text.contains("receiver_window 60%") && f.text.contains("policer 40%"), "{}", f.text);
    assert_eq!(m.parts.len(), 2);
    assert!((m.duration_s - 10.0).abs() < 1e-9);
    // 80% / 20%: the longer part's verdict stands, with its confidence.
    let m = merge(two_parts(&base, (Cause::Policer, 2.0), (Cause::ReceiverWindow, 8.0)), cs, d).unwrap();
    assert_eq!((m.primary, m.confidence), (Cause::ReceiverWindow, Confidence::High));
    assert!(!m.findings.iter().any(|f| f.kind == "cause_changed"));
}

#[test]
fn a_spent_budget_closes_big_directions_into_parts_and_truncates_small_ones() {
    // A two-flow policed capture (two connections carrying data at once)
    // with a budget of 20,000 records for all directions together.
    let dir = shared("5B90B").parent().unwrap().parent().unwrap().join("policing-lab");
    let path = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().contains("CD1=2000-CD2=1000-ID=0-PCIR=10000000-RTT=100"))
        .expect("the two-flow policed capture");
    let mut rec = Recorder::with_budget(20_000);
    let a = analyze_capture(CaptureReader::open(&path).expect("readable"), Default::default(), &mut rec, |_| {});
    let held: usize =
        a.connections.iter().filter_map(|c| rec.get(c.id)).map(|r| r.dirs.iter().map(|d| d.data.len() + d.acks.len()).sum::<usize>()).sum();
    assert!(held <= 20_000, "{held} records held");
    let diags = diagnose_all(&a, &rec, &Options::default());
    let dirs: Vec<&DirectionDiagnosis> = diags.iter().flat_map(|c| &c.directions).collect();
    // Big directions were closed into parts rather than cut off. (A
    // direction whose connection went quiet keeps its records to the end,
    // and the segments that then find the budget spent in a direction of
    // fewer than 4,096 data segments are not recorded: `truncated`.)
    let split: Vec<&&DirectionDiagnosis> = dirs.iter().filter(|d| !d.parts.is_empty()).collect();
    assert!(!split.is_empty(), "no direction split");
    for d in split {
        // Closed parts are full-sized (4,096 data segments at least), apart
        // from the last one; their bytes never exceed the direction's.
        let n = d.parts.len();
        assert!(d.parts[..n - 1].iter().all(|p| p.data_segments >= 4096), "{:?}", d.parts);
        assert!(d.parts.iter().map(|p| p.bytes).sum::<u64>() <= d.bytes);
        // Nothing recorded is lost: without truncation they add up exactly.
        if !d.truncated {
            assert_eq!(d.parts.iter().map(|p| p.bytes).sum::<u64>(), d.bytes);
        }
    }
}
