//! `tcpwhy annotate`: the capture comes back as pcapng with the same frames
//! and times, each data segment of a diagnosed direction commented with its
//! phase and each finding's evidence frames with the finding, read back
//! with Wireshark's tshark (installed by ./run-tests).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/smtp-upload-no-window-scaling.pcap.xz")
}

fn tshark(args: &[&str]) -> String {
    let out = Command::new("tshark").args(args).output().unwrap_or_else(|e| panic!("cannot run tshark: {e} (./run-tests installs it)"));
    assert!(out.status.success(), "tshark {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn annotated_capture_opens_in_tshark_with_the_phases_and_findings() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("annotated.pcapng");
    let run = Command::new(env!("CARGO_BIN_EXE_tcpwhy")).arg("annotate").arg(example()).arg("-o").arg(&out).output().unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    // the same frames at the same times as the original (unpacked: tshark reads no xz)
    let plain = dir.path().join("plain.pcap");
    let xz = Command::new("xz").arg("-dc").arg(example()).output().expect("xz");
    std::fs::write(&plain, xz.stdout).unwrap();
    let fields = ["-T", "fields", "-e", "frame.number", "-e", "frame.time_epoch", "-e", "frame.len", "-e", "frame.cap_len"];
    let original = tshark(&[&["-r", plain.to_str().unwrap()], &fields[..]].concat());
    let annotated = tshark(&[&["-r", out.to_str().unwrap()], &fields[..]].concat());
    assert_eq!(original.lines().count(), 2500);
    assert_eq!(original, annotated, "frames or times differ");

    let diag: Value = serde_json::from_slice(
        &Command::new(env!("CARGO_BIN_EXE_tcpwhy")).args(["diagnose", "--json", "--no-progress"]).arg(example()).output().unwrap().stdout,
    )
    .unwrap();
    let d = &diag["connections"][0]["directions"][0];
    let primary = d["primary"].as_str().unwrap();
    // every data segment of the upload says its phase; the filter Wireshark users type finds them
    let phased = tshark(&["-r", out.to_str().unwrap(), "-Y", "frame.comment contains \"phase receiver_window\"", "-T", "fields", "-e", "frame.number"]);
    assert!(phased.lines().count() > 50, "{} frames in receiver_window phases", phased.lines().count());
    let with_primary = tshark(&["-r", out.to_str().unwrap(), "-Y", &format!("frame.comment contains \"primary {primary}\""), "-T", "fields", "-e", "frame.number"]);
    let data_segments = d["bytes"].as_u64().unwrap() / 1460;
    assert!(with_primary.lines().count() as u64 >= data_segments * 9 / 10, "{} of about {data_segments}", with_primary.lines().count());
    // each finding's evidence frames carry the finding
    for f in d["findings"].as_array().unwrap() {
        let kind = f["kind"].as_str().unwrap();
        for fr in f["evidence"]["frames"].as_array().unwrap().iter().take(3) {
            let c = tshark(&["-r", out.to_str().unwrap(), "-Y", &format!("frame.number == {fr}"), "-T", "fields", "-e", "frame.comment"]);
            assert!(c.contains(&format!("tcpwhy finding {kind}")), "frame {fr}: {c}");
        }
    }
}

#[test]
fn an_unreadable_capture_writes_nothing_and_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.pcap");
    std::fs::write(&bad, b"not a capture at all").unwrap();
    let out = dir.path().join("out.pcapng");
    let run = Command::new(env!("CARGO_BIN_EXE_tcpwhy")).arg("annotate").arg(&bad).arg("-o").arg(&out).output().unwrap();
    assert_eq!(run.status.code(), Some(3), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(!out.exists());
}
