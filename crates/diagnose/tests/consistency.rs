//! One output, one story (`tcpwhy_diagnose::consistency`): every direction
//! of every shared capture (public, independent, the policing lab) and of
//! the shipped example passes the checks against itself. The lab's runs
//! are checked by tests/system (the diagnosis matrix).

use std::path::{Path, PathBuf};
use tcpwhy_diagnose::{consistency, diagnose_all, Options, Recorder};
use tcpwhy_flow::analyze_capture;
use tcpwhy_wire::CaptureReader;

fn shared() -> PathBuf {
    let p = std::env::var_os("TCPWHY_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    assert!(p.join("captures/public").is_dir(), "shared captures not found at {} (set TCPWHY_SHARED)", p.display());
    p
}

fn captures(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            captures(&p, out);
        } else if !p.extension().is_some_and(|x| x == "md" || x == "json" || x == "txt") {
            out.push(p);
        }
    }
}

/// A capture's diagnoses with the default options; none when it cannot be read.
fn diagnoses(f: &Path) -> Vec<tcpwhy_diagnose::ConnectionDiagnosis> {
    let Ok(reader) = CaptureReader::open(f) else { return Vec::new() };
    let mut rec = Recorder::default();
    let a = analyze_capture(reader, Default::default(), &mut rec, |_| {});
    diagnose_all(&a, &rec, &Options::default())
}

#[test]
fn every_diagnosis_agrees_with_itself() {
    let mut files = Vec::new();
    captures(&shared().join("captures"), &mut files);
    files.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/smtp-upload-no-window-scaling.pcap.xz"));
    files.sort();
    let (mut directions, mut what_ifs, mut wrong) = (0, 0, Vec::new());
    for f in &files {
        for c in diagnoses(f) {
            for d in &c.directions {
                directions += 1;
                what_ifs += d.what_if.iter().filter(|w| w.predicted_bps.is_some()).count();
                for p in consistency::problems(d) {
                    wrong.push(format!("{} {} {}: {p}", f.file_name().unwrap().to_string_lossy(), c.id.number, d.from));
                }
            }
        }
    }
    assert!(directions >= 220 && what_ifs >= 190, "only {directions} directions, {what_ifs} predictions");
    assert!(wrong.is_empty(), "{} of {directions} directions contradict themselves:\n{}", wrong.len(), wrong.join("\n"));
}

/// A path capacity measured at another capture point of the same path
/// (`tcpwhy diagnose --pair`) replays the what-if of every direction whose
/// own capture did not show the capacity, and of no other unless the rate
/// was measured directly (`over_seen`: then a capacity seen is replaced
/// too, one given never): each shared
/// capture's directions, given a capacity half again above both the rate
/// each reached and the path rate it measured. Where the path bounds a
/// prediction, its steady rate is at most that capacity and the
/// prediction is a point; the output still agrees with itself.
#[test]
fn a_capacity_from_another_capture_point_replays_the_what_if() {
    let mut files = Vec::new();
    captures(&shared().join("captures"), &mut files);
    files.sort();
    let (mut replayed, mut kept, mut wrong) = (0, 0, Vec::new());
    for f in &files {
        for c in diagnoses(f) {
            for mut d in c.directions {
                let Some(now) = d.goodput_bps.filter(|g| *g > 0.0) else { continue };
                let before = d.path_capacity;
                let rate = 1.5 * now.max(d.path_rate_bps.unwrap_or(0.0));
                let name = format!("{} {} {}", f.file_name().unwrap().to_string_lossy(), c.id.number, d.from);
                let shown = matches!(before, "seen" | "given");
                if !d.with_capacity_from(rate, false) {
                    kept += 1;
                    if !shown {
                        wrong.push(format!("{name}: {before} not replayed"));
                    }
                    // a rate measured directly replaces one seen, never one given
                    if d.with_capacity_from(rate, true) != (before == "seen") || d.path_capacity != if before == "seen" { "paired" } else { before } {
                        wrong.push(format!("{name}: {before} over_seen gave {}", d.path_capacity));
                    }
                    continue;
                }
                replayed += 1;
                if shown || d.path_capacity != "paired" || d.path_rate_bps != Some(rate) {
                    wrong.push(format!("{name}: {before} replayed as {} at {:?}", d.path_capacity, d.path_rate_bps));
                }
                for w in d.what_if.iter().filter(|w| w.bound == "path_rate") {
                    let over = w.steady_bps.is_some_and(|s| s > rate * 1.001);
                    if over || w.predicted_low_bps != w.predicted_high_bps {
                        wrong.push(format!("{name} {}: steady {:?} ({:?} to {:?}) on a path of {rate:.0}", w.fix, w.steady_bps, w.predicted_low_bps, w.predicted_high_bps));
                    }
                }
                for p in consistency::problems(&d) {
                    wrong.push(format!("{name}: {p}"));
                }
            }
        }
    }
    assert!(replayed >= 100 && kept >= 100, "replayed {replayed}, kept {kept}");
    assert!(wrong.is_empty(), "{} wrong:\n{}", wrong.len(), wrong.join("\n"));
}
