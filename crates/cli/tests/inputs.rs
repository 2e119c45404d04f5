//! Every supported input form gives the same connections, and bad input
//! gives the documented exit code and a clear message, never a panic.
//!
//! Variants are made from real captures with Wireshark's editcap/mergecap
//! and the standard compressors (installed by ./run-tests).

use serde_json::Value;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn tcpwhy() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tcpwhy"))
}

fn shared_capture(name: &str) -> PathBuf {
    let base = std::env::var_os("TCPWHY_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    base.join("captures/public").join(name)
}

fn tool(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e} (./run-tests installs it)"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn gunzip_to(src: &Path, dst: &Path) {
    let out = Command::new("gzip")
        .arg("-dc")
        .arg(src)
        .output()
        .expect("gzip");
    fs::write(dst, out.stdout).unwrap();
}

fn stats(path: &Path) -> (Output, Value) {
    let out = tcpwhy()
        .args(["stats", "--json"])
        .arg(path)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out, v)
}

/// Connections without the per-file field, for comparing variants.
fn connections(v: &Value) -> Vec<Value> {
    v["connections"]
        .as_array()
        .expect("connections")
        .iter()
        .map(|c| {
            let mut c = c.clone();
            c.as_object_mut().unwrap().remove("file");
            c
        })
        .collect()
}

/// Rewrites a little-endian classic pcap in big-endian byte order.
fn to_big_endian(le: &[u8]) -> Vec<u8> {
    let mut out = le.to_vec();
    let swap32 = |b: &mut [u8]| b[..4].reverse();
    let swap16 = |b: &mut [u8]| b[..2].reverse();
    swap32(&mut out[0..]);
    swap16(&mut out[4..]);
    swap16(&mut out[6..]);
    for off in [8, 12, 16, 20] {
        swap32(&mut out[off..]);
    }
    let mut pos = 24;
    while pos + 16 <= le.len() {
        let caplen = u32::from_le_bytes(le[pos + 8..pos + 12].try_into().unwrap()) as usize;
        for off in [0, 4, 8, 12] {
            swap32(&mut out[pos + off..]);
        }
        pos += 16 + caplen;
    }
    assert_eq!(pos, le.len());
    out
}

struct Fixture {
    dir: tempfile::TempDir,
    base: PathBuf,
    baseline: Vec<Value>,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.pcap");
    gunzip_to(&shared_capture("tcptrace__dlt_null.dmp.gz"), &base);
    let (out, v) = stats(&base);
    assert!(out.status.success());
    let baseline = connections(&v);
    assert_eq!(baseline.len(), 1);
    Fixture {
        dir,
        base,
        baseline,
    }
}

#[test]
fn pcap_variants_and_compression_give_identical_connections() {
    let f = fixture();
    let d = f.dir.path();
    let nsec = d.join("nsec.pcap");
    tool(
        Command::new("editcap")
            .args(["-F", "nsecpcap"])
            .arg(&f.base)
            .arg(&nsec),
    );
    let be = d.join("be.pcap");
    fs::write(&be, to_big_endian(&fs::read(&f.base).unwrap())).unwrap();
    let be_nsec = d.join("be-nsec.pcap");
    fs::write(&be_nsec, to_big_endian(&fs::read(&nsec).unwrap())).unwrap();
    let ng = d.join("x.pcapng");
    tool(
        Command::new("editcap")
            .args(["-F", "pcapng"])
            .arg(&f.base)
            .arg(&ng),
    );
    let mut variants = vec![nsec.clone(), be, be_nsec.clone(), ng];
    for (compressor, ext) in [("gzip", "gz"), ("xz", "xz"), ("zstd", "zst")] {
        let src = if ext == "xz" { &be_nsec } else { &f.base };
        let dst = d.join(format!("c.pcap.{ext}"));
        let out = Command::new(compressor)
            .arg("-c")
            .arg(src)
            .output()
            .expect(compressor);
        fs::write(&dst, out.stdout).unwrap();
        variants.push(dst);
    }
    for v in &variants {
        let (out, json) = stats(v);
        assert!(
            out.status.success(),
            "{}: {}",
            v.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            connections(&json),
            f.baseline,
            "{} differs from the plain pcap",
            v.display()
        );
    }
    let (_, json) = stats(&nsec);
    assert_eq!(json["files"][0]["format"], "pcap-ns");
}

#[test]
fn stdin_is_read_with_a_dash() {
    let f = fixture();
    let mut child = tcpwhy()
        .args(["stats", "--json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let data = fs::read(shared_capture("tcptrace__dlt_null.dmp.gz")).unwrap();
    child.stdin.take().unwrap().write_all(&data).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(connections(&v), f.baseline);
}

#[test]
fn pcapng_with_interfaces_of_different_link_types_and_resolutions() {
    // Interface 0: BSD loopback, microseconds. Interface 1: Linux cooked v2,
    // nanoseconds. Each interface's link type and resolution must be used.
    let f = fixture();
    let d = f.dir.path();
    let sll2 = shared_capture("suricata-verify__decode-sll2-02__input.pcap");
    let sll2_ns = d.join("sll2-ns.pcap");
    tool(
        Command::new("editcap")
            .args(["-F", "nsecpcap"])
            .arg(&sll2)
            .arg(&sll2_ns),
    );
    let merged = d.join("merged.pcapng");
    tool(
        Command::new("mergecap")
            .args(["-F", "pcapng", "-w"])
            .arg(&merged)
            .arg(&f.base)
            .arg(&sll2_ns),
    );
    let (out, v) = stats(&merged);
    assert!(out.status.success());
    let (_, alone) = stats(&sll2);
    let mut expected: Vec<Value> = connections(&stats(&f.base).1);
    expected.extend(connections(&alone));
    let mut got = connections(&v);
    let key = |c: &Value| c["first_time"].as_f64().unwrap();
    expected.sort_by(|a, b| key(a).total_cmp(&key(b)));
    got.sort_by(|a, b| key(a).total_cmp(&key(b)));
    assert_eq!(got.len(), 2);
    for (g, e) in got.iter().zip(&expected) {
        for field in ["first_time", "last_time", "directions", "handshake_rtt_ms"] {
            assert_eq!(g[field], e[field], "{field}");
        }
    }
}

#[test]
fn missing_and_non_capture_files_exit_3() {
    let d = tempfile::tempdir().unwrap();
    let out = tcpwhy()
        .args(["stats", "/nonexistent/x.pcap"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot open"));
    for (name, bytes) in [
        ("empty.pcap", vec![]),
        ("text.pcap", b"hello, this is not a capture\n".repeat(10)),
    ] {
        let p = d.path().join(name);
        fs::write(&p, bytes).unwrap();
        let out = tcpwhy().arg("stats").arg(&p).output().unwrap();
        assert_eq!(out.status.code(), Some(3), "{name}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("not a pcap or pcapng"),
            "{name}"
        );
    }
}

#[test]
fn a_good_and_a_missing_file_report_the_good_one_and_exit_3() {
    let f = fixture();
    let out = tcpwhy()
        .args(["stats", "--json"])
        .arg(&f.base)
        .arg("/nonexistent.pcap")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(connections(&v), f.baseline);
    assert_eq!(v["unreadable"][0], "/nonexistent.pcap");
}

#[test]
fn truncation_anywhere_keeps_earlier_connections_and_never_panics() {
    let f = fixture();
    let data = fs::read(&f.base).unwrap();
    let d = f.dir.path();
    let base_packets = f.baseline[0]["directions"][0]["packets"].as_u64().unwrap();
    let mut partial = 0;
    for cut in (30..data.len()).step_by(997) {
        let p = d.join("cut.pcap");
        fs::write(&p, &data[..cut]).unwrap();
        let (out, v) = stats(&p);
        let code = out.status.code();
        assert!(code == Some(0) || code == Some(4), "cut {cut}: {code:?}");
        if code == Some(4) {
            partial += 1;
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                err.matches("warning").count(),
                1,
                "one clear warning: {err}"
            );
            assert!(err.contains("truncated"), "{err}");
        }
        let conns = connections(&v);
        assert!(conns.len() <= 1);
        if let Some(c) = conns.first() {
            assert!(c["directions"][0]["packets"].as_u64().unwrap() <= base_packets);
        }
    }
    assert!(partial > 0);
    // A compressed stream cut short.
    let gz = fs::read(shared_capture("tcptrace__dlt_null.dmp.gz")).unwrap();
    let p = d.join("cut.pcap.gz");
    fs::write(&p, &gz[..gz.len() / 2]).unwrap();
    let (out, v) = stats(&p);
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(
        connections(&v).len(),
        1,
        "connections read before the damage are kept"
    );
}

#[test]
fn corrupt_record_length_is_refused_without_allocating_it() {
    let f = fixture();
    let mut data = fs::read(&f.base).unwrap();
    // Find the 100th record and give it a 2 GiB length.
    let mut pos = 24;
    for _ in 0..100 {
        let caplen = u32::from_le_bytes(data[pos + 8..pos + 12].try_into().unwrap()) as usize;
        pos += 16 + caplen;
    }
    data[pos + 8..pos + 12].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    let p = f.dir.path().join("corrupt.pcap");
    fs::write(&p, &data).unwrap();
    let (out, v) = stats(&p);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let conns = connections(&v);
    assert_eq!(conns.len(), 1);
    let packets: u64 = conns[0]["directions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["packets"].as_u64().unwrap())
        .sum();
    assert_eq!(packets, 100, "the 100 records before the corrupt one");
}

#[test]
fn unsupported_link_type_is_counted_not_fatal() {
    let f = fixture();
    let mut data = fs::read(&f.base).unwrap();
    data[20..24].copy_from_slice(&147u32.to_le_bytes()); // LINKTYPE_USER0
    let p = f.dir.path().join("user0.pcap");
    fs::write(&p, &data).unwrap();
    let (out, v) = stats(&p);
    assert!(out.status.success());
    assert_eq!(v["files"][0]["unsupported_link_types"][0]["link_type"], 147);
    assert_eq!(connections(&v).len(), 0);
}

#[test]
fn every_subcommand_has_help() {
    for sub in [
        vec!["--help"],
        vec!["stats", "--help"],
        vec!["packets", "--help"],
        vec!["watch", "--help"],
    ] {
        let out = tcpwhy().args(&sub).output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Exit codes"), "{sub:?}");
    }
}

#[test]
fn series_add_up_to_the_byte_counts() {
    let out = tcpwhy()
        .args(["stats", "--json", "--series"])
        .arg(shared_capture(
            "m-lab-etl__ndt-m6znc_1632401351_000000000005BA77.pcap.gz",
        ))
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    for d in v["connections"][0]["directions"].as_array().unwrap() {
        let sum = |name: &str| -> u64 {
            d["series"][name]["bytes"]
                .as_array()
                .map_or(0, |b| b.iter().map(|x| x.as_u64().unwrap()).sum())
        };
        assert_eq!(sum("throughput"), d["bytes"].as_u64().unwrap());
        assert_eq!(sum("goodput"), d["unique_bytes"].as_u64().unwrap());
        let bins = d["series"]["throughput"]["bytes"]
            .as_array()
            .map_or(0, |b| b.len());
        assert!(bins <= 2048);
    }
    // Without --series the field is absent.
    let (_, plain) = stats(&shared_capture("tcptrace__dlt_null.dmp.gz"));
    assert!(plain["connections"][0]["directions"][0]
        .get("series")
        .is_none());
}

#[test]
fn link_type_field_with_fcs_bits_reads_the_same_plain_and_compressed() {
    // The pcap header's LinkType field keeps the link type in its low 16
    // bits; the upper bits may say the frames carry an FCS (found by cargo
    // fuzz: the mapped and the streaming readers disagreed).
    let f = fixture();
    let mut data = fs::read(&f.base).unwrap();
    let link = u32::from_le_bytes(data[20..24].try_into().unwrap());
    data[20..24].copy_from_slice(&(link | 0x2400_0000).to_le_bytes());
    let plain = f.dir.path().join("fcs.pcap");
    fs::write(&plain, &data).unwrap();
    let gz = f.dir.path().join("fcs.pcap.gz");
    let out = Command::new("gzip").arg("-c").arg(&plain).output().unwrap();
    fs::write(&gz, out.stdout).unwrap();
    for p in [&plain, &gz] {
        let (out, v) = stats(p);
        assert!(out.status.success());
        assert_eq!(connections(&v), f.baseline, "{}", p.display());
    }
}

/// `diagnose --jobs N` reads the captures in parallel and gives exactly the
/// output of one job, in the order the files were given (a missing file
/// among them included).
#[test]
fn diagnose_in_parallel_equals_one_job() {
    let mut files: Vec<PathBuf> = [
        "m-lab-etl__ndt-m6znc_1632401351_000000000005B90B.pcap.gz",
        "tcptrace__zwnd.dmp.gz",
        "packets__tcp_zerowindowrecovery.pcapng",
        "zeek__irc-dcc-send.pcapng",
        "m-lab-etl__ndt-nnwk2_1611335823_00000000000C2DA9.pcap.gz",
    ]
    .iter()
    .map(|n| shared_capture(n))
    .collect();
    files.insert(2, PathBuf::from("/nonexistent/missing.pcap"));
    let run = |jobs: &str, json: bool| {
        let mut cmd = tcpwhy();
        cmd.args(["diagnose", "--no-progress", "--jobs", jobs]);
        if json {
            cmd.arg("--json");
        }
        let out = cmd.args(&files).output().expect("run tcpwhy");
        assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("utf-8")
    };
    // Connections are named by their file's path (the sixth file, the fifth read).
    let last = format!("{}: connection", files[5].display());
    for json in [true, false] {
        let one = run("1", json);
        assert!(one.contains(if json { "zwnd" } else { last.as_str() }), "{one}");
        assert_eq!(one, run("2", json), "json: {json}");
        assert_eq!(one, run("4", json), "json: {json}");
    }
    let stats = |jobs: &str| {
        let out = tcpwhy().args(["stats", "--json", "--no-progress", "--jobs", jobs]).args(&files).output().expect("run");
        assert_eq!(out.status.code(), Some(3));
        out.stdout
    };
    assert_eq!(stats("1"), stats("3"));
}
