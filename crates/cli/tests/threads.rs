//! A capture whose connections are analysed on shard threads (`--jobs 2`
//! and `--jobs 3` on one file: tcpwhy_flow::analyze_capture_sharded) gives
//! byte for byte the output of one thread (diagnose, stats, and latency,
//! which prints the request lines read from the payloads), on captures this
//! project did not make: every public shared capture (pcap and pcapng,
//! gzip-compressed, cut by a snaplen, several links) and policing-lab
//! captures (xz-compressed, long, lossy). Several files at once are
//! compared too: their order in the output does not depend on the threads.

use std::path::PathBuf;
use std::process::Command;

fn shared() -> PathBuf {
    std::env::var_os("TCPWHY_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"))
        .join("captures")
}

fn captures() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(shared().join("public"))
        .expect("shared public captures")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_none_or(|e| e != "md"))
        .collect();
    files.sort();
    let mut lab: Vec<PathBuf> = std::fs::read_dir(shared().join("policing-lab"))
        .expect("shared policing-lab captures")
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".pcap"))
        .collect();
    lab.sort();
    // A spread of them: the first few and every tenth.
    files.extend(lab.iter().enumerate().filter(|(i, _)| *i < 3 || i % 10 == 0).map(|(_, p)| p.clone()));
    assert!(files.len() > 20, "shared captures missing: {}", files.len());
    files
}

fn run(args: &[&str], files: &[PathBuf]) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_tcpwhy")).args(args).args(files).output().unwrap();
    // 0: read whole; 4: partial (a shared capture ends mid-record)
    assert!(matches!(out.status.code(), Some(0 | 4)), "{args:?} {files:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

#[test]
fn shard_threads_change_no_byte_of_the_output() {
    let files = captures();
    for f in &files {
        for cmd in [&["diagnose", "--json", "--no-progress"][..], &["stats", "--json", "--no-progress"], &["latency", "--json", "--no-progress"]] {
            let one = run(&[cmd, &["--jobs", "1"]].concat(), std::slice::from_ref(f));
            let two = run(&[cmd, &["--jobs", "2"]].concat(), std::slice::from_ref(f));
            let three = run(&[cmd, &["--jobs", "3"]].concat(), std::slice::from_ref(f));
            assert!(!one.is_empty(), "{cmd:?} {}: no output", f.display());
            assert!(one == two, "{cmd:?} {}: --jobs 1 and --jobs 2 differ", f.display());
            assert!(one == three, "{cmd:?} {}: --jobs 1 and --jobs 3 differ", f.display());
        }
    }
    // Many files: one per thread, joined in the order given.
    let some = &files[..6];
    let one = run(&["diagnose", "--json", "--no-progress", "--jobs", "1"], some);
    let four = run(&["diagnose", "--json", "--no-progress", "--jobs", "4"], some);
    assert!(one == four, "6 files: --jobs 1 and --jobs 4 differ");
}
