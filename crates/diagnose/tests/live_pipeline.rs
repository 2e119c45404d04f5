//! The live pipeline (`tcpwhy_diagnose::Live`, what `tcpwhy watch` runs)
//! against the file's (`Diagnoser`, what `tcpwhy diagnose` runs) on the
//! same packets: the flow table retires connections part-way through, as
//! it does live, and the exit report must still give every connection the
//! verdict the file gives it, flow groups and shared policers included.
//! The policing lab's multi-flow captures start their flows apart, so the
//! first flows end (and are retired) while the later ones still run.

use std::path::{Path, PathBuf};
use tcpwhy_diagnose::{CaptureDiagnosis, Diagnoser, Live, Options};
use tcpwhy_flow::{analyze_capture, FlowTable};
use tcpwhy_wire::CaptureReader;

fn shared() -> PathBuf {
    let p = std::env::var_os("TCPWHY_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    assert!(p.join("captures/public").is_dir(), "shared captures not found at {} (set TCPWHY_SHARED)", p.display());
    p
}

fn by_file(f: &Path) -> CaptureDiagnosis {
    let mut dg = Diagnoser::new(Options::default());
    let a = analyze_capture(CaptureReader::open(f).unwrap(), Default::default(), dg.sink(), |_| {});
    dg.finish(a)
}

/// The capture fed frame by frame as `watch` feeds its live frames: every
/// second of capture time the retired connections go to the pipeline and
/// the quiet host pairs are settled. Gives the exit report and how many
/// connections were retired before the end.
fn by_live(f: &Path) -> (CaptureDiagnosis, usize) {
    let opts = Options::default();
    let mut live = Live::new(opts, 10_000);
    let mut table = FlowTable::new();
    // `watch --linger 1`: closed connections retire a second after, so
    // most multi-flow captures retire their first flows part-way.
    table.retire_after_close_ns = 1_000_000_000;
    let mut next_tick = i64::MIN;
    let mut retired = 0;
    let summary = CaptureReader::open(f).unwrap().for_each_frame(|frame| {
        table.frame(frame, live.sink());
        if frame.time_ns >= next_tick {
            next_tick = frame.time_ns + 1_000_000_000;
            for s in table.take_finished() {
                retired += 1;
                live.ended(s);
            }
            if live.held() > 0 {
                let pairs = table.live_host_pairs();
                live.settle(|k| pairs.contains(k));
            }
        }
    });
    let (connections, attempts) = table.finish(live.sink());
    let analysis = tcpwhy_flow::CaptureAnalysis {
        path: f.display().to_string(),
        format: summary.format,
        compression: None,
        frames: summary.frames,
        tcp_segments: 0,
        skipped: Vec::new(),
        unsupported_links: Vec::new(),
        interface_drops: None,
        connections,
        attempts,
        evicted_connections: 0,
        error: None,
    };
    (live.finish(analysis).0, retired)
}

/// (connection, direction, primary, confidence) of every diagnosed direction.
fn verdicts(d: &CaptureDiagnosis) -> Vec<(u64, &'static str, String, String)> {
    let mut v: Vec<_> = d
        .diagnoses
        .iter()
        .flat_map(|c| c.directions.iter().map(move |x| (c.id.number, x.from, x.primary.as_str().to_string(), format!("{:?}", x.confidence))))
        .collect();
    v.sort();
    v
}

/// (connections, policer rate) of every flow group.
fn groups(d: &CaptureDiagnosis) -> Vec<(Vec<u64>, Option<u64>, usize)> {
    let mut v: Vec<_> = d
        .groups
        .iter()
        .map(|g| (g.flows.iter().map(|f| f.connection).collect(), g.policer_rate_bps.map(|r| r as u64), g.findings.len()))
        .collect();
    v.sort();
    v
}

#[test]
fn watch_says_what_diagnose_says_of_the_same_packets() {
    let dir = shared().join("captures/policing-lab");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".pcap"))
        .collect();
    files.sort();
    let (mut compared, mut shared_policers, mut retired_in_group) = (0, 0, 0);
    for f in &files {
        let file = by_file(f);
        // multi-flow captures with a group whose flows did not all end together
        if file.groups.is_empty() {
            continue;
        }
        let (live, retired) = by_live(f);
        if std::env::var_os("SHOW").is_some() { eprintln!("{retired} {}", f.display()); }
        let name = f.file_name().unwrap().to_string_lossy();
        assert_eq!(verdicts(&live), verdicts(&file), "{name}: verdicts differ");
        assert_eq!(groups(&live), groups(&file), "{name}: groups differ");
        compared += 1;
        if file.groups.iter().any(|g| g.policer_rate_bps.is_some()) {
            shared_policers += 1;
            if retired > 0 {
                retired_in_group += 1;
            }
        }
        if compared >= 40 {
            break;
        }
    }
    assert!(compared >= 20, "only {compared} captures with flow groups");
    assert!(shared_policers >= 10 && retired_in_group >= 5, "{shared_policers} shared policers, {retired_in_group} with flows retired part-way");
}
