//! Errors from the libraries reach the documented exit codes with a clear
//! message: an evidence or scenario file that cannot be read exits 3, a bad
//! filter or scenario value exits 2. Nothing here needs root, a capture from
//! the shared set, or runs the lab.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

fn tcpwhy(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcpwhy")).args(args).output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A valid pcap with no packets (little-endian, microseconds, Ethernet).
fn empty_pcap(dir: &Path) -> String {
    let mut h = Vec::new();
    h.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    h.extend_from_slice(&2u16.to_le_bytes());
    h.extend_from_slice(&4u16.to_le_bytes());
    h.extend_from_slice(&[0; 8]);
    h.extend_from_slice(&65535u32.to_le_bytes());
    h.extend_from_slice(&1u32.to_le_bytes());
    let p = dir.join("empty.pcap");
    fs::write(&p, h).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn missing_evidence_file_exits_3_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = empty_pcap(dir.path());
    // The capture alone is fine.
    let ok = tcpwhy(&["diagnose", &pcap]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let out = tcpwhy(&["diagnose", "--ss", "/nonexistent/ss.txt", &pcap]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(e.contains("tcpwhy: cannot read /nonexistent/ss.txt: "), "{e}");
    assert!(!e.contains("panicked"), "{e}");
}

#[test]
fn evidence_file_of_the_wrong_kind_exits_3_saying_what_was_expected() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = empty_pcap(dir.path());
    let notes = dir.path().join("notes.txt");
    fs::write(&notes, "not sysctl output\n").unwrap();
    let n = notes.to_str().unwrap();
    let out = tcpwhy(&["diagnose", "--sysctl", n, &pcap]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("{n}: no `key = value` lines (expected `sysctl -a` output)")), "{}", stderr(&out));
    let out = tcpwhy(&["diagnose", "--lab-run", n, &pcap]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("{n} is not a lab run directory")), "{}", stderr(&out));
    let out = tcpwhy(&["ss", "/nonexistent/ss.txt"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
}

/// The filter is parsed before any kernel access, so no root is needed.
#[test]
fn bad_filter_exits_2() {
    for (cmd, words, msg) in [
        ("live", &["bogus"][..], "filter word \"bogus\" not understood: use port N"),
        ("trace", &["dport", "99999"][..], "bad port \"99999\" in filter"),
        ("live", &["port"][..], "filter: `port` needs a value"),
    ] {
        let mut args = vec![cmd];
        args.extend_from_slice(words);
        let out = tcpwhy(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(msg), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn unreadable_scenario_file_exits_3_and_a_bad_value_exits_2() {
    let out = tcpwhy(&["lab", "show", "/nonexistent/my.toml"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("cannot read scenario file /nonexistent/my.toml: "), "{}", stderr(&out));
    // `lab run` reads the scenario before anything else: nothing is created.
    let dir = tempfile::tempdir().unwrap();
    let outdir = dir.path().join("run");
    let out = tcpwhy(&["lab", "run", "/nonexistent/my.toml", "--out", outdir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(!outdir.exists());

    let out = tcpwhy(&["lab", "show", "rwnd-rmem", "--set", "link.down.loss=2"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("link.down.loss = 2: a probability must be between 0 and 1"), "{}", stderr(&out));
    let out = tcpwhy(&["lab", "show", "no-such-scenario"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("unknown scenario \"no-such-scenario\"; built-in ones: "), "{}", stderr(&out));
    let bad = dir.path().join("bad.toml");
    fs::write(&bad, "name = \n").unwrap();
    let out = tcpwhy(&["lab", "show", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn watch_without_a_loadable_libpcap_exits_6_saying_what_to_install() {
    // The library named in TCPWHY_LIBPCAP replaces the default names: one
    // that does not exist is a system without libpcap.
    let out = Command::new(env!("CARGO_BIN_EXE_tcpwhy"))
        .args(["watch", "lo", "--duration", "1s"])
        .env("TCPWHY_LIBPCAP", "/nonexistent/libpcap.so.1")
        .output()
        .unwrap();
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(6), "{e}");
    assert!(e.starts_with("tcpwhy watch: libpcap is not installed: install it with `apt install libpcap0.8`"), "{e}");
    assert!(e.contains("`dnf install libpcap` (Fedora"), "{e}");
    assert!(e.contains("/nonexistent/libpcap.so.1"), "{e}");
    assert!(!e.contains("listening") && !e.contains("panicked"), "{e}");
    // Everything else runs without libpcap.
    let dir = tempfile::tempdir().unwrap();
    let pcap = empty_pcap(dir.path());
    let ok = Command::new(env!("CARGO_BIN_EXE_tcpwhy"))
        .args(["diagnose", &pcap])
        .env("TCPWHY_LIBPCAP", "/nonexistent/libpcap.so.1")
        .output()
        .unwrap();
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
}
