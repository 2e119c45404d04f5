//! One vocabulary for quantities: every command that takes a rate, a time or
//! a size reads the same spellings to the same numbers, and refuses a bad
//! one (a bare number for a time or a rate, an unknown unit) with exit code
//! 2 and a message that lists the accepted units (docs/units.md).

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

fn tcpwhy(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcpwhy")).args(args).output().expect("run tcpwhy")
}

fn example() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/smtp-upload-no-window-scaling.pcap.xz")
        .display()
        .to_string()
}

fn json_ok(args: &[&str]) -> Value {
    let out = tcpwhy(args);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: not JSON: {e}"))
}

fn text_ok(args: &[&str]) -> String {
    let out = tcpwhy(args);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// 1 Gbit/s as people write it.
const GIGABIT: &[&str] = &["1gbit", "1Gbit/s", "1 Gbit/s", "1gbps", "1Gb/s", "1000mbit", "1e9bit", "125MB/s", "125MBps"];
/// 50 ms as people write it.
const FIFTY_MS: &[&str] = &["50ms", "50 ms", "0.05s", "50000us", "50e-3s"];

#[test]
fn every_command_reads_each_spelling_to_the_same_numbers() {
    let ex = example();
    let mut bdp = Vec::new();
    let mut host = Vec::new();
    let mut diagnose = Vec::new();
    let mut lab = Vec::new();
    for (i, rate) in GIGABIT.iter().enumerate() {
        let rtt = FIFTY_MS[i % FIFTY_MS.len()];
        let b = json_ok(&["bdp", "--bandwidth", rate, "--rtt", rtt, "--json"]);
        assert_eq!(b["bandwidth_bps"].as_f64(), Some(1e9), "bdp --bandwidth {rate}");
        assert!((b["rtt_s"].as_f64().unwrap() - 0.05).abs() < 1e-12, "bdp --rtt {rtt}");
        assert_eq!(b["bdp_bytes"].as_f64().map(f64::round), Some(6_250_000.0), "bdp {rate} {rtt}");
        bdp.push(b);
        host.push(json_ok(&["host", "--bandwidth", rate, "--rtt", rtt, "--json"]));
        diagnose.push(json_ok(&["diagnose", "--no-progress", "--json", "--bandwidth", rate, "--rtt", rtt, &ex]));
        lab.push(text_ok(&["lab", "show", "rwnd-rmem", "--set", &format!("link.rate={rate}"), "--set", &format!("link.rtt={rtt}")]));
    }
    for (what, all) in [("bdp", &bdp), ("host", &host), ("diagnose", &diagnose)] {
        for (i, v) in all.iter().enumerate() {
            assert_eq!(v, &all[0], "{what} with {} / {}", GIGABIT[i], FIFTY_MS[i % FIFTY_MS.len()]);
        }
    }
    for (i, t) in lab.iter().enumerate() {
        assert_eq!(t, &lab[0], "lab show --set link.rate={}", GIGABIT[i]);
    }
    assert!(lab[0].contains("rtt = \"50ms\"") && lab[0].contains("rate = \"1gbit\""), "{}", lab[0]);
    // The known path is what the diagnosis computes with.
    let d = &diagnose[0]["connections"][0]["directions"][0];
    assert_eq!(d["path_rate_bps"].as_f64(), Some(1e9), "{d:#}");
}

#[test]
fn sizes_read_the_same_in_binary_and_decimal_spellings() {
    let table = |sizes: &[&str]| {
        let mut args = vec!["bdp", "--bandwidth", "1gbit", "--rtt", "50ms", "--json"];
        for s in sizes {
            args.extend(["--bytes", s]);
        }
        let v = json_ok(&args);
        v["cold_start"].as_array().unwrap().iter().map(|c| c["bytes"].as_u64().unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(table(&["4MiB", "4m", "4 MiB", "4096k", "4194304"]), vec![4 << 20; 5]);
    assert_eq!(table(&["6.25MB", "6250000", "6250kB"]), vec![6_250_000; 3]);
}

#[test]
fn a_bad_quantity_is_exit_2_with_the_accepted_units_in_every_command() {
    let ex = example();
    let cases: Vec<Vec<String>> = [
        ("bdp", vec!["bdp", "--bandwidth", "1gbit", "--rtt=BAD"]),
        ("bdp rate", vec!["bdp", "--bandwidth=BAD", "--rtt", "50ms"]),
        ("host", vec!["host", "--rtt=BAD"]),
        ("host rate", vec!["host", "--rtt", "50ms", "--bandwidth=BAD"]),
        ("diagnose", vec!["diagnose", "--rtt=BAD", &ex]),
        ("diagnose rate", vec!["diagnose", "--bandwidth=BAD", &ex]),
        ("report", vec!["report", "--rtt=BAD", &ex, "-o", "/dev/null"]),
        ("live", vec!["live", "--interval=BAD"]),
        ("ss", vec!["ss", "--interval=BAD", "/dev/null"]),
        ("trace", vec!["trace", "--duration=BAD"]),
        ("lab show", vec!["lab", "show", "rwnd-rmem", "--set", "link.rtt=BAD"]),
        ("lab run", vec!["lab", "run", "rwnd-rmem", "--set", "link.rate=BAD", "--out", "/nonexistent/never-created"]),
    ]
    .iter()
    .map(|(_, a)| a.iter().map(|s| s.to_string()).collect())
    .collect();
    for bad in ["35", "fast", "35 parsecs", "-5ms"] {
        for case in &cases {
            let args: Vec<String> = case.iter().map(|a| a.replace("BAD", bad)).collect();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            // `--rtt=-5ms`: clap would read a separate `-5ms` as a flag.
            let out = tcpwhy(&args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(err.contains("use "), "{args:?}: no accepted units in {err}");
            assert!(err.contains("35ms") || err.contains("200mbit") || err.contains("1gbit"), "{args:?}: {err}");
        }
    }
}
