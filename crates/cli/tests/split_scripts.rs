//! The split in time of `stats --jobs 2` and `diagnose --jobs 2`
//! (`tcpwhy_flow`'s split module, and `tcpwhy_diagnose::split` for the
//! diagnosis's records:
//! the second half analysed from a copy of the table warmed up just before
//! the cut, joined only if its state at the cut is the first half's) on
//! scripted captures: the `diagnose_flows` fuzz target's scripts
//! (`fuzz/flows.rs`: retransmissions, holes, stale and wild sequence and
//! ACK numbers, SACK and D-SACK blocks, clocks stepping back, frames
//! written twice or not at all, FINs and RSTs, two connections, a side
//! without window scaling), from fixed seeds, and bulk scripts kept open
//! and without capture holes ([`open`]), which can join. The split is
//! forced on these small files (`TCPWHY_SPLIT`: 16 frames of head, 512 of
//! warm-up, no smallest size). Joined or not, the output must be one
//! thread's, byte for byte; and enough of them must join for the test to
//! prove something. `SPLIT_SCRIPTS_VERBOSE=1` prints what each split did,
//! `SPLIT_SCRIPTS_KEEP=1` keeps the captures.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "../../../fuzz/flows.rs"]
mod flows;

/// Seeds of each kind (random scripts, scripts biased to a bulk transfer,
/// the same kept open).
const SEEDS: u64 = 60;

/// The commands compared: `stats` with its series, and `diagnose` split
/// in time (`TCPWHY_SPLIT_RECORDS`, off by default) with parts of 1,024
/// data segments (`TCPWHY_PART_SEGMENTS`), so that parts close in the
/// second half and are diagnosed after the join.
const COMMANDS: [&[&str]; 2] = [&["stats", "--json", "--series"], &["diagnose", "--json"]];

fn run(command: &[&str], f: &Path, jobs: &str) -> (Vec<u8>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tcpwhy"))
        .args(command)
        .args(["--no-progress", "--jobs", jobs])
        .arg(f)
        .env("TCPWHY_SPLIT", "16,512,0")
        .env("TCPWHY_SPLIT_REPORT", "1")
        .env("TCPWHY_PART_SEGMENTS", "1024")
        .env("TCPWHY_SPLIT_RECORDS", "1")
        .output()
        .expect("tcpwhy runs");
    assert!(matches!(out.status.code(), Some(0 | 4)), "{}: {}", f.display(), String::from_utf8_lossy(&out.stderr));
    (out.stdout, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The script without FIN, SYN or RST after the setup's handshake (a
/// connection retired after the split cannot be joined), without wild
/// sequence numbers, segments past a hole or frames left out: a hole the
/// capture never fills stays in the model's state, and one opened before
/// the warm-up makes the second half's state differ at the cut (the split
/// is then refused, rightly). Its other noise stays: retransmissions,
/// stale and wild ACKs, SACK and D-SACK blocks, clock steps, frames
/// written twice.
fn open(mut script: Vec<u8>) -> Vec<u8> {
    for e in script[flows::SETUP_BYTES..].chunks_exact_mut(flows::EVENT_BYTES) {
        e[0] &= !0x0e;
        e[2] %= 232;
    }
    script
}

#[test]
fn split_in_time_on_scripted_captures_is_one_pass() {
    let dir = std::env::temp_dir().join(format!("tcpwhy-split-scripts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (mut tried, mut joined, mut failures) = ([0; 2], [0; 2], Vec::new());
    for seed in 0..SEEDS {
        let bulk = flows::bulk(seed, 1000 + (seed as usize * 101) % 5000);
        let scripts = [
            ("script", flows::seeded(seed, 4 + 8 * (200 + (seed as usize * 37) % 2000))),
            ("open-bulk", open(bulk.clone())),
            ("bulk", bulk),
        ];
        for (kind, script) in scripts {
            let Some(built) = flows::build(&script) else { continue };
            let f: PathBuf = dir.join(format!("{kind}-{seed}.pcap"));
            std::fs::write(&f, &built.pcap).unwrap();
            let mut same = true;
            for (c, command) in COMMANDS.iter().enumerate() {
                let (one, _) = run(command, &f, "1");
                let (two, report) = run(command, &f, "2");
                tried[c] += report.contains("split in time") as usize;
                if std::env::var_os("SPLIT_SCRIPTS_VERBOSE").is_some() {
                    eprintln!("{} {kind} {seed} ({} frames): {}", command[0], built.frames, report.trim());
                }
                joined[c] += report.contains("joined at frame") as usize;
                if one != two {
                    same = false;
                    failures.push(format!("{} {kind} {seed} ({} frames): {report}", command[0], built.frames));
                }
            }
            if same && std::env::var_os("SPLIT_SCRIPTS_KEEP").is_none() {
                let _ = std::fs::remove_file(&f);
            }
        }
    }
    for (c, command) in COMMANDS.iter().enumerate() {
        eprintln!("{}: {} splits tried, {} joined", command[0], tried[c], joined[c]);
    }
    eprintln!("{} differ", failures.len());
    assert!(failures.is_empty(), "--jobs 1 and a split in time differ (kept in {}):\n{}", dir.display(), failures.join("\n"));
    if std::env::var_os("SPLIT_SCRIPTS_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    for (c, command) in COMMANDS.iter().enumerate() {
        assert!(tried[c] >= SEEDS as usize, "{}: a split was tried on {} captures only", command[0], tried[c]);
        assert!(joined[c] >= 10, "{}: only {} splits joined", command[0], joined[c]);
    }
}
