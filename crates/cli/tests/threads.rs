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

/// `stats --jobs 2` and `diagnose --jobs 2` on a plain pcap file of few
/// connections split it in time (`tcpwhy_flow`'s split module: two threads on two halves, joined
/// only when the second half's state at the split is the first's). Forced
/// on small files here (`TCPWHY_SPLIT`: 64 frames of head, 512 of
/// warm-up, no smallest size), on the plain pcap shared captures and the
/// policing-lab spread written out uncompressed: byte for byte the output
/// of one thread, joined or not. A synthetic bulk transfer with a loss
/// and a SACK recovery every 4,000 segments (bench/make-bulk-pcap.py) is
/// joined, with the default settings but the smallest size, and so is the
/// same with a few frames the capture missed before the warm-up.
#[test]
fn split_in_time_changes_no_byte_of_the_output() {
    let dir = std::env::temp_dir().join(format!("tcpwhy-split-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut plain = Vec::new();
    for f in captures() {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with(".pcap") {
            plain.push(f);
        } else if let Some(stem) = name.strip_suffix(".xz").filter(|s| s.ends_with(".pcap")) {
            let out = dir.join(stem);
            let data = Command::new("xz").arg("-dc").arg(&f).output().expect("xz");
            assert!(data.status.success(), "xz -dc {}", f.display());
            std::fs::write(&out, data.stdout).unwrap();
            plain.push(out);
        }
    }
    assert!(plain.len() >= 8, "plain pcap captures: {}", plain.len());
    // `diagnose` split in time (`TCPWHY_SPLIT_RECORDS`: off by default,
    // slower than the pipeline here), with parts of 1,024 data segments:
    // parts close in the second half and are diagnosed after the join
    // (`tcpwhy_diagnose::split`).
    let tool = |cmd: &str, f: &PathBuf, jobs: &str, split: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tcpwhy"));
        c.args([cmd, "--json", "--no-progress", "--jobs", jobs]).arg(f).env("TCPWHY_SPLIT_REPORT", "1");
        c.env("TCPWHY_PART_SEGMENTS", "1024").env("TCPWHY_SPLIT_RECORDS", "1");
        if let Some(s) = split {
            c.env("TCPWHY_SPLIT", s);
        }
        let out = c.output().unwrap();
        assert!(matches!(out.status.code(), Some(0 | 4)), "{}: {}", f.display(), String::from_utf8_lossy(&out.stderr));
        (out.stdout, String::from_utf8_lossy(&out.stderr).to_string())
    };
    let both = |f: &PathBuf, split: &str| {
        ["stats", "diagnose"].map(|cmd| {
            let (one, _) = tool(cmd, f, "1", None);
            let (two, report) = tool(cmd, f, "2", Some(split));
            assert!(one == two, "{} {}: --jobs 1 and a split in time differ ({report})", cmd, f.display());
            report
        })
    };
    let mut tried = 0;
    for f in &plain {
        let reports = both(f, "64,512,0");
        tried += reports.iter().filter(|r| r.contains("split in time")).count();
    }
    assert!(tried >= 16, "a split was tried on {tried} runs only");
    let synthetic = dir.join("bulk.pcap");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/make-bulk-pcap.py");
    let made = Command::new("python3").arg(&script).arg(&synthetic).arg("300000").output().expect("python3");
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    for report in both(&synthetic, "1024,8192,0") {
        assert!(report.contains("joined at frame"), "not joined: {report}");
    }
    // Artifacts: the file cut inside its last record (the second half's
    // error names a frame), frames held twice, frames missing after the
    // middle. Joined or not, the output is one thread's.
    let data = std::fs::read(&synthetic).unwrap();
    let records = pcap_records(&data);
    let (mut twice, mut missing, mut dropped) = (data[..24].to_vec(), data[..24].to_vec(), data[..24].to_vec());
    for (i, r) in records.iter().enumerate() {
        twice.extend_from_slice(&data[r.clone()]);
        if i % 997 == 0 {
            twice.extend_from_slice(&data[r.clone()]);
        }
        if !(i % 503 == 0 || (records.len() / 2 + 5000..records.len() / 2 + 5300).contains(&i)) {
            missing.extend_from_slice(&data[r.clone()]);
        }
        if i % 49_999 != 7 {
            dropped.extend_from_slice(&data[r.clone()]);
        }
    }
    let last = records.last().unwrap();
    // `dropped`: one frame in 50,000 the capture missed (tcpdump's drops),
    // never sent again: holes before the warm-up that the second half never
    // saw, joined by the hole audit (`conn::HoleAudit`).
    let variants = [
        ("truncated", data[..last.start + 40].to_vec(), true),
        ("twice", twice, false),
        ("missing", missing, false),
        ("dropped", dropped, true),
    ];
    for (name, bytes, must_join) in variants {
        let f = dir.join(format!("bulk-{name}.pcap"));
        std::fs::write(&f, bytes).unwrap();
        for report in both(&f, "1024,8192,0") {
            assert!(!must_join || report.contains("joined at frame"), "{name}: not joined: {report}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The byte ranges of a little-endian classic pcap file's records.
fn pcap_records(data: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut at = 24;
    let mut out = Vec::new();
    while at + 16 <= data.len() {
        let caplen = u32::from_le_bytes(data[at + 8..at + 12].try_into().unwrap()) as usize;
        out.push(at..at + 16 + caplen);
        at += 16 + caplen;
    }
    out
}
