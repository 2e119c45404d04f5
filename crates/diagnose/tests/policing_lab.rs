//! Policer detection against the policing lab captures of Flach et al.
//! (shared/captures/policing-lab, SOURCES.md there), scored per chunk
//! against the file-name ground truth and compared with the published
//! detector's output (anchor-results.csv). docs/policing.md has the table.
//!
//! Run: cargo test -p tcpwhy-diagnose --release --test policing_lab -- --nocapture
//! POLICING_DUMP=1 prints every chunk.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tcpwhy_diagnose::policer::{self, PolicerVerdict};
use tcpwhy_diagnose::record::segment_size;
use tcpwhy_diagnose::Recorder;

fn shared() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/captures"
    ))
}

fn lab_dir() -> PathBuf {
    let dir = shared().join("policing-lab");
    assert!(
        dir.join("anchor-results.csv").is_file(),
        "policing lab captures not found at {} (expected the shared/ directory beside the \
         repository, with captures/policing-lab/*.pcap.xz and anchor-results.csv)",
        dir.display()
    );
    dir
}

/// One row of anchor-results.csv.
#[derive(Debug, Clone)]
struct AnchorRow {
    chunk: usize,
    packets: u64,
    losses: u64,
    policed: [bool; 2],
    rate: [Option<f64>; 2],
}

fn parse_anchor(path: &Path) -> HashMap<String, Vec<AnchorRow>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out: HashMap<String, Vec<AnchorRow>> = HashMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        // file,flow,chunk,dir,packets,losses,V1,[code c, R bps, B bytes burst],V2,[...]
        let open = line
            .find('[')
            .unwrap_or_else(|| panic!("anchor row: {line}"));
        let f: Vec<&str> = line[..open].trim_end_matches(',').split(',').collect();
        assert_eq!(f.len(), 7, "anchor row: {line}");
        let stem = f[0].trim_end_matches(".filtered").to_string();
        assert_eq!(f[1], "0", "anchor rows are for flow 0");
        assert_eq!(f[3], "b2a");
        let mut policed = [f[6] == "True", false];
        let mut rate = [None; 2];
        // "[code c, R bps, B bytes burst],V2,[...]"
        let mut s = &line[open..];
        for (k, rate) in rate.iter_mut().enumerate() {
            let (inside, r) = s[1..].split_once(']').unwrap();
            let parts: Vec<&str> = inside.split(", ").collect();
            *rate = parts[1].trim_end_matches(" bps").parse::<f64>().ok();
            if k == 0 {
                let (v, r2) = r.trim_start_matches(',').split_once(',').unwrap();
                policed[1] = v == "True";
                s = r2;
            }
        }
        out.entry(stem).or_default().push(AnchorRow {
            chunk: f[2].parse().unwrap(),
            packets: f[4].parse().unwrap(),
            losses: f[5].parse().unwrap(),
            policed,
            rate,
        });
    }
    out
}

/// Ground truth from the file name.
#[derive(Debug, Clone, Copy)]
struct Truth {
    pcir: Option<f64>,
    xt: bool,
}

fn truth(stem: &str) -> Truth {
    let field = |key: &str| {
        stem.split('-')
            .find_map(|p| p.strip_prefix(key))
            .and_then(|v| v.parse::<f64>().ok())
    };
    Truth {
        pcir: field("PCIR="),
        xt: stem.contains("-XT=1-"),
    }
}

struct Dir {
    data: Vec<tcpwhy_diagnose::DataRec>,
    acks: Vec<tcpwhy_diagnose::AckRec>,
    min_rtt_ns: Option<i64>,
    /// The direction's segment size, as the path facts take it.
    smss: u32,
}

/// Every data direction of every connection, connections in order of their
/// first packet; for each connection [a->b, b->a].
fn load(path: &Path) -> Vec<[Dir; 2]> {
    let reader = tcpwhy_wire::CaptureReader::open(path).expect("open capture");
    let mut rec = Recorder::default();
    let mut analysis = tcpwhy_flow::analyze_capture(reader, Default::default(), &mut rec, |_| {});
    analysis.connections.sort_by_key(|c| c.first_frame);
    analysis
        .connections
        .iter()
        .filter_map(|c| {
            let r = rec.get(c.id)?;
            let dir = |i: usize| Dir {
                data: r.dirs[i].data.clone(),
                acks: r.dirs[i].acks.clone(),
                min_rtt_ns: c.directions[i]
                    .rtt
                    .as_ref()
                    .map(|s| (s.min_ms * 1e6) as i64),
                smss: segment_size(&r.dirs[i].data, c.directions[1 - i].mss),
            };
            Some([dir(0), dir(1)])
        })
        .collect()
}

#[derive(Default)]
struct Score {
    correct: usize,
    total: usize,
}

impl std::fmt::Display for Score {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pct = if self.total > 0 {
            100.0 * self.correct as f64 / self.total as f64
        } else {
            0.0
        };
        write!(f, "{:>3}/{:<3} ({:5.1}%)", self.correct, self.total, pct)
    }
}

#[test]
fn policing_lab() {
    let started = Instant::now();
    let dir = lab_dir();
    let anchor = parse_anchor(&dir.join("anchor-results.csv"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".pcap.xz"))
        .collect();
    files.sort();
    assert_eq!(
        files.len(),
        94,
        "expected the 94 lab captures in {}",
        dir.display()
    );
    let dump = std::env::var_os("POLICING_DUMP").is_some();

    // Scores: [ours, anchor run 1, anchor run 2], by category.
    let mut pol = [(); 3].map(|_| Score::default());
    let mut pol_xt = [(); 3].map(|_| Score::default());
    let mut non = [(); 3].map(|_| Score::default());
    let mut pol_noloss = [(); 3].map(|_| Score::default());
    let mut non_noloss = [(); 3].map(|_| Score::default());
    let mut rate_err: [Vec<f64>; 2] = [Vec::new(), Vec::new()]; // ours, anchor (non-XT)
    let mut rate_err_xt: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let (mut rows, mut count_match, mut loss_match) = (0usize, 0usize, 0usize);
    let mut flow_verdicts = Score::default();
    let mut flow_verdicts_non = Score::default();
    let mut multi_flow_files = 0;

    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let stem = name.trim_end_matches(".pcap.xz");
        let t = truth(stem);
        let Some(arows) = anchor.get(stem) else {
            panic!("no anchor rows for {stem}");
        };
        let conns = load(path);
        assert!(!conns.is_empty(), "{stem}: no connection");
        // Flow 0 of the anchor (run on a capture filtered to one flow): of
        // the connections (by first packet) whose b->a direction carries
        // data, the one whose chunks best match the anchor's packet counts.
        let (_, per) = conns
            .iter()
            .filter(|c| !c[1].data.is_empty())
            .map(|c| {
                let d = &c[1];
                (d, policer::detect_chunks(&d.data, &d.acks, d.min_rtt_ns, d.smss))
            })
            .min_by_key(|(_, per)| {
                arows
                    .iter()
                    .map(|a| {
                        per.get(a.chunk)
                            .map_or(a.packets, |v| v.packets.abs_diff(a.packets))
                    })
                    .sum::<u64>()
            })
            .expect("a flow with data");
        if conns.len() > 1 {
            multi_flow_files += 1;
        }
        let fv = policer::aggregate(&per);
        let policed_file = t.pcir.is_some();
        if fv.losses > 0 {
            if policed_file {
                flow_verdicts.total += 1;
                flow_verdicts.correct += fv.policed as usize;
            } else {
                flow_verdicts_non.total += 1;
                flow_verdicts_non.correct += !fv.policed as usize;
            }
        }
        for a in arows {
            rows += 1;
            let ours: PolicerVerdict = per.get(a.chunk).cloned().unwrap_or_default();
            if ours.packets == a.packets {
                count_match += 1;
            }
            if ours.losses == a.losses {
                loss_match += 1;
            }
            let verdicts = [ours.policed, a.policed[0], a.policed[1]];
            // Losses as the anchor counted them decide the category, so both
            // detectors are scored on the same chunks.
            let lossy = a.losses > 0;
            let bucket = match (policed_file, lossy, t.xt) {
                (true, true, false) => &mut pol,
                (true, true, true) => &mut pol_xt,
                (true, false, _) => &mut pol_noloss,
                (false, true, _) => &mut non,
                (false, false, _) => &mut non_noloss,
            };
            for k in 0..3 {
                bucket[k].total += 1;
                bucket[k].correct += (verdicts[k] == policed_file) as usize;
            }
            if let (Some(pcir), true) = (t.pcir, lossy) {
                let errs = if t.xt {
                    &mut rate_err_xt
                } else {
                    &mut rate_err
                };
                if let (true, Some(r)) = (ours.policed, ours.rate_bps) {
                    errs[0].push(r / pcir - 1.0);
                }
                if let (true, Some(r)) = (a.policed[0], a.rate[0]) {
                    errs[1].push(r / pcir - 1.0);
                }
            }
            if dump {
                println!(
                    "{:<40} c{} pk {:>5}/{:<5} loss {:>4}/{:<4} ours {:5} {:<24} rate {:>10.0} | anchor {:5} {:>10.0} | pcir {:?}",
                    short(stem),
                    a.chunk,
                    ours.packets,
                    a.packets,
                    ours.losses,
                    a.losses,
                    ours.policed,
                    ours.code,
                    ours.rate_bps.unwrap_or(0.0),
                    a.policed[0],
                    a.rate[0].unwrap_or(0.0),
                    t.pcir
                );
            }
        }
    }

    let line = |label: &str, s: &[Score; 3]| {
        println!("{label:<34} {}   {}   {}", s[0], s[1], s[2]);
    };
    println!();
    println!(
        "{:<34} {:<18}   {:<18}   {:<18}",
        "chunks (anchor's split)", "tcpwhy", "anchor run 1", "anchor run 2"
    );
    line("policed, with loss (no XT)", &pol);
    line("policed, with loss, cross traffic", &pol_xt);
    let sum = |a: &[Score; 3], b: &[Score; 3]| {
        [0, 1, 2].map(|k| Score {
            correct: a[k].correct + b[k].correct,
            total: a[k].total + b[k].total,
        })
    };
    let pol_all = sum(&pol, &pol_xt);
    line("policed, with loss, all", &pol_all);
    line("not policed (shaper/random loss)", &non);
    line("policed, no loss (undetectable)", &pol_noloss);
    line("not policed, no loss", &non_noloss);
    println!();
    let dist = |label: &str, v: &[f64]| {
        let mut a: Vec<f64> = v.iter().map(|e| e.abs()).collect();
        a.sort_by(|x, y| x.total_cmp(y));
        let within = |p: f64| a.iter().filter(|&&e| e <= p).count();
        let q = |p: f64| {
            if a.is_empty() {
                f64::NAN
            } else {
                a[((a.len() - 1) as f64 * p) as usize] * 100.0
            }
        };
        println!(
            "{label:<34} n={:<4} within 5%: {:<4} 10%: {:<4} 15%: {:<4} | |err| median {:5.1}% p90 {:5.1}% max {:5.1}%",
            a.len(),
            within(0.05),
            within(0.10),
            within(0.15),
            q(0.5),
            q(0.9),
            q(1.0)
        );
    };
    println!("rate error vs PCIR (policed verdicts on lossy chunks of PCIR files)");
    dist("tcpwhy, no XT", &rate_err[0]);
    dist("anchor run 1, no XT", &rate_err[1]);
    dist("tcpwhy, XT (flow shares the policer)", &rate_err_xt[0]);
    dist("anchor run 1, XT", &rate_err_xt[1]);
    println!();
    println!("chunk split vs anchor: {count_match}/{rows} same data-packet count, {loss_match}/{rows} same loss count");
    println!("captures with more than one connection: {multi_flow_files} (flow 0 chosen by best chunk match)");
    println!("whole-flow verdicts (detect_flow on flow 0, b->a, with losses): policed files {flow_verdicts}, others {flow_verdicts_non}");
    println!("elapsed {:.1} s", started.elapsed().as_secs_f64());

    let best_pol = pol_all[1].correct.max(pol_all[2].correct);
    let best_non = non[1].correct.max(non[2].correct);
    assert!(
        pol_all[0].correct >= best_pol,
        "policed chunks: tcpwhy {} < anchor {best_pol}",
        pol_all[0]
    );
    assert!(
        non[0].correct >= best_non,
        "non-policed chunks: tcpwhy {} < anchor {best_non}",
        non[0]
    );
    assert!(
        pol_all[0].correct > best_pol || non[0].correct > best_non,
        "not strictly better than the anchor"
    );
}

fn short(stem: &str) -> String {
    stem.split('-')
        .filter(|p| {
            ["CD", "PCIR", "PBC", "SCIR", "SBC", "LOSS", "XT"]
                .iter()
                .any(|k| p.starts_with(k))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// detect_flow on every direction of every public capture: it must not
/// panic, whatever the input.
#[test]
fn public_captures_never_panic() {
    let dir = shared().join("public");
    assert!(
        dir.is_dir(),
        "public captures not found at {}",
        dir.display()
    );
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "md") {
            continue;
        }
        let Ok(reader) = tcpwhy_wire::CaptureReader::open(&path) else {
            continue;
        };
        let mut rec = Recorder::default();
        let analysis = tcpwhy_flow::analyze_capture(reader, Default::default(), &mut rec, |_| {});
        for c in &analysis.connections {
            let Some(r) = rec.get(c.id) else { continue };
            for (i, d) in r.dirs.iter().enumerate() {
                let min_rtt = c.directions[i]
                    .rtt
                    .as_ref()
                    .map(|s| (s.min_ms * 1e6) as i64);
                let smss = segment_size(&d.data, c.directions[1 - i].mss);
                let v = policer::detect_flow(&d.data, &d.acks, min_rtt, smss);
                let _ = policer::detect(&d.data, &d.acks, None, smss);
                assert!(v.losses as usize <= d.data.len() * 64);
                n += 1;
            }
        }
    }
    println!("detect_flow ran on {n} directions of the public captures");
    assert!(n > 0);
}
