//! Replays the fuzz corpus (fuzz/corpus/<target>/) and the kept crash
//! reproducers (fuzz/artifacts-kept/<target>/) through the same code paths
//! as the cargo-fuzz targets in fuzz/fuzz_targets/, with the same byte
//! interpretation and the same assertions, so that a regression is caught by
//! a plain `cargo test` on stable, without nightly or libFuzzer.
//!
//! Each input runs under `catch_unwind`; the test lists every input that
//! panicked, not just the first.
//!
//! Reproducers of bugs that are reported but not fixed yet are listed in
//! `KNOWN_OPEN`: they are expected to panic. Once one stops panicking the
//! test fails and asks for its entry to be removed, so that from then on it
//! guards against the bug coming back.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use tcpwhy_wire::{CaptureReader, TcpOptions, MAX_SACK_BLOCKS};

/// `<target>/<file name>` of kept reproducers that still panic, each with
/// the bug it shows.
/// For example:
/// `("tcp_options/sack-blocks-over-4-in-two-options", "TcpOptions::parse: sack_count past MAX_SACK_BLOCKS")`
/// (that one is fixed: its reproducer now guards the fix).
const KNOWN_OPEN: &[(&str, &str)] = &[];

fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// Every file of `fuzz/corpus/<target>` and `fuzz/artifacts-kept/<target>`,
/// sorted, with its `<kind>/<target>/<name>` label.
fn inputs(target: &str) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for kind in ["corpus", "artifacts-kept"] {
        let dir = fuzz_dir().join(kind).join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_file() {
                let name = entry.file_name().to_string_lossy().into_owned();
                out.push((format!("{kind}/{target}/{name}"), path));
            }
        }
    }
    out.sort();
    out
}

fn known_open(label: &str) -> Option<&'static str> {
    let short = label.strip_prefix("artifacts-kept/")?;
    KNOWN_OPEN
        .iter()
        .find(|(name, _)| *name == short)
        .map(|(_, why)| *why)
}

/// Runs `check` on every input of `target`; fails listing the inputs that
/// panicked (other than known open bugs) and the known open bugs that no
/// longer panic. Returns how many inputs ran.
fn replay(target: &str, check: impl Fn(&Path, &[u8])) -> usize {
    let inputs = inputs(target);
    let mut failures = Vec::new();
    for (label, path) in &inputs {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{label}: {e}"));
        let result = catch_unwind(AssertUnwindSafe(|| check(path, &data)));
        match (result, known_open(label)) {
            (Ok(()), None) | (Err(_), Some(_)) => {}
            (Err(panic), None) => {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!("{label}: panicked: {msg}"));
            }
            (Ok(()), Some(why)) => failures.push(format!(
                "{label}: no longer panics ({why}): remove it from KNOWN_OPEN in {}",
                file!()
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} inputs failed:\n{}",
        failures.len(),
        inputs.len(),
        failures.join("\n")
    );
    inputs.len()
}

/// The link types of fuzz/fuzz_targets/decode_frame.rs, chosen by byte 0.
#[path = "../../../fuzz/checks.rs"]
mod checks;
use checks::{
    capture_reader_input as capture_reader_target, decode_frame_input as decode_frame_target,
    pipeline,
};

/// fuzz/fuzz_targets/capture_file.rs: the bytes as a file, opened as the CLI
/// opens one (a plain classic pcap is memory-mapped).
fn capture_file_target(path: &Path) -> Option<u64> {
    let reader = CaptureReader::open(path).ok()?;
    Some(pipeline(reader))
}

#[test]
fn decode_frame_corpus() {
    let n = replay("decode_frame", |_, data| decode_frame_target(data));
    assert!(n > 0, "no decode_frame corpus in {}", fuzz_dir().display());
}

#[test]
fn tcp_options_corpus() {
    let n = replay("tcp_options", |_, data| {
        let o = TcpOptions::parse(data);
        assert!(o.sacks().len() <= MAX_SACK_BLOCKS);
    });
    assert!(n > 0, "no tcp_options corpus in {}", fuzz_dir().display());
}

#[test]
fn capture_reader_corpus() {
    // As the target does (a stream), and also opened by path: the
    // capture_file target runs with this corpus too (fuzz/README.md), and
    // opening a plain pcap by path takes the memory-mapped reader.
    let n = replay("capture_reader", |path, data| {
        capture_reader_target(data);
        capture_file_target(path);
    });
    assert!(
        n > 0,
        "no capture_reader corpus in {}",
        fuzz_dir().display()
    );
}

#[test]
fn capture_file_corpus() {
    let n = replay("capture_file", |path, data| {
        capture_file_target(path);
        capture_reader_target(data);
    });
    assert!(n > 0, "no capture_file corpus in {}", fuzz_dir().display());
}

/// The seeds are real captures: they must still read as such (a corpus
/// that no longer opens would replay nothing useful).
#[test]
fn capture_seeds_still_read() {
    for name in [
        "zwr.pcapng",
        "mime-be.pcap",
        "ndt6.pcap.gz",
        "null.pcap.xz",
        "irc.pcapng.zst",
        "sll2.pcap",
    ] {
        let path = fuzz_dir().join("corpus/capture_reader").join(name);
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let frames = capture_reader_target(&data).unwrap_or_else(|| panic!("{name}: not opened"));
        assert!(frames >= 5, "{name}: only {frames} frames");
    }
}
