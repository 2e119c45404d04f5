//! Replays the `diagnose_flows` fuzz target (fuzz/fuzz_targets/
//! diagnose_flows.rs: bytes read as a script of TCP segments, written as a
//! pcap and diagnosed) on a plain `cargo test`, without nightly or
//! libFuzzer: every file of fuzz/corpus/diagnose_flows/ and
//! fuzz/artifacts-kept/diagnose_flows/, and scripts drawn from fixed seeds
//! (so that the test covers scripts nobody kept). Same code and checks as
//! the target (`fuzz/flows.rs`). Each input runs under `catch_unwind`; the
//! test lists every input that panicked.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

#[path = "../../../fuzz/flows.rs"]
mod flows;

fn kept_inputs() -> Vec<(String, Vec<u8>)> {
    let fuzz = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut out = Vec::new();
    for kind in ["corpus", "artifacts-kept"] {
        let Ok(entries) = std::fs::read_dir(fuzz.join(kind).join("diagnose_flows")) else { continue };
        for e in entries.flatten() {
            let data = std::fs::read(e.path()).expect("a kept input");
            out.push((format!("{kind}/diagnose_flows/{}", e.file_name().to_string_lossy()), data));
        }
    }
    out.sort();
    out
}

fn run(label: &str, data: &[u8], failures: &mut Vec<String>) -> usize {
    match catch_unwind(AssertUnwindSafe(|| flows::diagnose_flows_input(data))) {
        Ok(n) => n,
        Err(p) => {
            let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
            failures.push(format!("{label}: panicked: {msg}"));
            0
        }
    }
}

fn check(failures: Vec<String>, runs: usize) {
    assert!(failures.is_empty(), "{} of {runs} inputs failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn diagnose_flows_corpus() {
    let mut failures = Vec::new();
    let kept = kept_inputs();
    // TCPWHY_FLOWS_PCAP=DIR: the kept inputs' captures written there, to
    // look at with tcpwhy, tcpdump or Wireshark.
    if let Some(dir) = std::env::var_os("TCPWHY_FLOWS_PCAP") {
        for (label, data) in &kept {
            if let Some(b) = flows::build(data) {
                let name = label.rsplit('/').next().unwrap_or("input");
                std::fs::write(PathBuf::from(&dir).join(format!("{name}.pcap")), b.pcap).expect("written");
            }
        }
    }
    for (label, data) in &kept {
        run(label, data, &mut failures);
    }
    check(failures, kept.len());
}

/// Seeded scripts: as many of each kind, their lengths spread.
const SEEDS: u64 = 120;

#[test]
fn diagnose_flows_seeded_scripts() {
    let mut failures = Vec::new();
    let mut diagnosed = 0;
    for seed in 0..SEEDS {
        let len = 4 + 8 * (1 + (seed as usize * 37) % 600);
        diagnosed += run(&format!("seeded script {seed}"), &flows::seeded(seed, len), &mut failures);
        diagnosed += run(&format!("seeded bulk {seed}"), &flows::bulk(seed, 300 + (seed as usize * 101) % 5000), &mut failures);
    }
    eprintln!("{diagnosed} directions diagnosed in {} scripts", 2 * SEEDS);
    check(failures, 2 * SEEDS as usize);
    // The scripts reach the detectors (a test that diagnosed nothing would
    // prove nothing).
    assert!(diagnosed > 100, "only {diagnosed} directions diagnosed");
}
