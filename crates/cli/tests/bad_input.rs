//! Every entry point says the same thing about bad input (issue 59): a
//! mistyped subcommand, a file that cannot be read, a capture without TCP,
//! several captures at once, a directory holding other files, a capture
//! cut part-way. The built binary is run as a user runs it.

use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tcpwhy(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcpwhy"))
        .args(args)
        .output()
        .unwrap()
}

/// `tcpwhy batch INPUT --out OUT --no-progress EXTRA...`.
fn batch(input: &str, out: &str, extra: &[&str]) -> Output {
    let mut args = vec!["batch", input, "--out", out, "--no-progress"];
    args.extend_from_slice(extra);
    tcpwhy(&args)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example() -> PathBuf {
    repo().join("examples/smtp-upload-no-window-scaling.pcap.xz")
}

fn shared_capture(name: &str) -> PathBuf {
    let base = std::env::var_os("TCPWHY_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    base.join("captures/public").join(name)
}

/// A little-endian microsecond pcap (Ethernet) of these frames.
fn pcap(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        for v in [1000 + i as u32, 0, f.len() as u32, f.len() as u32] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(f);
    }
    out
}

/// Five DNS-like UDP frames: a readable capture without TCP.
fn udp_only(dir: &Path) -> PathBuf {
    let mut f = vec![0u8; 6];
    f.extend_from_slice(&[0x11; 6]);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&[
        0x45, 0, 0, 32, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);
    f.extend_from_slice(&[0, 53, 0, 53, 0, 12, 0, 0, b'a', b'b', b'c', b'd']);
    let p = dir.join("dns.pcap");
    fs::write(&p, pcap(&vec![f; 5])).unwrap();
    p
}

/// The example capture, uncompressed.
fn example_pcap() -> Vec<u8> {
    let out = Command::new("xz")
        .arg("-dc")
        .arg(example())
        .output()
        .expect("xz (./run-tests installs it)");
    assert!(out.status.success());
    out.stdout
}

/// Every row of one batch table, as (column -> value) for the string
/// columns asked for.
fn batch_rows(out: &Path, table: &str, columns: &[&str]) -> Vec<Vec<Option<String>>> {
    use arrow_array::cast::AsArray;
    use arrow_array::Array;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let mut rows = Vec::new();
    let mut parts: Vec<PathBuf> = fs::read_dir(out.join(table))
        .map_or(Vec::new(), |d| d.map(|e| e.unwrap().path()).collect());
    parts.sort();
    for part in parts {
        let reader = ParquetRecordBatchReaderBuilder::try_new(fs::File::open(part).unwrap())
            .unwrap()
            .build()
            .unwrap();
        for batch in reader {
            let batch = batch.unwrap();
            for i in 0..batch.num_rows() {
                rows.push(
                    columns
                        .iter()
                        .map(|c| {
                            let col = batch
                                .column_by_name(c)
                                .unwrap_or_else(|| panic!("{table} has no column {c}"));
                            if col.is_null(i) {
                                return None;
                            }
                            if let Some(s) = col.as_string_opt::<i32>() {
                                return Some(s.value(i).to_string());
                            }
                            // A list of strings, one line each.
                            let l = col
                                .as_list_opt::<i32>()
                                .unwrap_or_else(|| panic!("{c}: not text"))
                                .value(i);
                            let s = l.as_string::<i32>();
                            Some(
                                (0..s.len())
                                    .map(|j| s.value(j))
                                    .collect::<Vec<_>>()
                                    .join("\n"),
                            )
                        })
                        .collect(),
                );
            }
        }
    }
    rows
}

#[test]
fn a_mistyped_subcommand_exits_2_with_the_closest_name() {
    let dir = tempfile::tempdir().unwrap();
    for (typed, meant) in [
        ("diagnoze", "diagnose"),
        ("stat", "stats"),
        ("reprot", "report"),
        ("Batch", "batch"),
    ] {
        let out = tcpwhy(&[typed, "x.pcap"]);
        assert_eq!(out.status.code(), Some(2), "{typed}: {}", text(&out.stderr));
        let e = text(&out.stderr);
        assert!(
            e.contains(&format!("error: unrecognized subcommand '{typed}'")),
            "{e}"
        );
        assert!(
            e.contains(&format!("a similar subcommand exists: '{meant}'")),
            "{e}"
        );
        assert!(out.stdout.is_empty());
    }
    // Anything else that names no file is a capture that cannot be read.
    for word in ["x.pcap", "capture", "/nonexistent/diagnoze"] {
        let out = tcpwhy(&[word]);
        assert_eq!(out.status.code(), Some(3), "{word}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains(&format!("tcpwhy: {word}: cannot open: ")),
            "{}",
            text(&out.stderr)
        );
        assert!(out.stdout.is_empty(), "{word}: {}", text(&out.stdout));
    }
    // A file that exists is read, whatever its name.
    fs::copy(udp_only(dir.path()), dir.path().join("stat")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tcpwhy"))
        .arg("stat")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "no TCP in stat: 5 frames, none TCP (other_protocol 5)\n"
    );
}

#[test]
fn nothing_readable_prints_only_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.pcap");
    fs::write(&empty, b"").unwrap();
    let notes = dir.path().join("notes.pcap");
    fs::write(&notes, b"hello, this is not a capture\n".repeat(10)).unwrap();
    let cases = [
        (
            "/nonexistent/x.pcap".to_string(),
            "cannot open: No such file",
        ),
        (
            empty.display().to_string(),
            "not a pcap or pcapng file (empty input)",
        ),
        (
            notes.display().to_string(),
            "not a pcap or pcapng file (unknown magic number)",
        ),
    ];
    let html = dir.path().join("r.html");
    for (file, why) in &cases {
        for args in [
            vec![file.as_str()],
            vec!["diagnose", "--json", file],
            vec!["stats", file],
            vec!["stats", "--json", file],
            vec!["latency", file],
            vec!["latency", "--json", file],
            vec!["packets", file],
            vec!["report", "-o", html.to_str().unwrap(), file],
        ] {
            let out = tcpwhy(&args);
            assert_eq!(
                out.status.code(),
                Some(3),
                "{args:?}: {}",
                text(&out.stderr)
            );
            assert_eq!(text(&out.stdout), "", "{args:?}: stdout");
            let e = text(&out.stderr);
            assert!(
                e.starts_with(&format!("tcpwhy: {file}: ")) && e.contains(why),
                "{args:?}: {e}"
            );
            assert_eq!(e.lines().count(), 1, "{args:?}: one error: {e}");
        }
    }
    assert!(!html.exists());
}

#[test]
fn a_capture_without_tcp_says_so_in_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let p = udp_only(dir.path());
    let f = p.to_str().unwrap();
    let said = format!("no TCP in {f}: 5 frames, none TCP (other_protocol 5)");
    for args in [
        vec![f],
        vec!["diagnose", f],
        vec!["stats", f],
        vec!["latency", f],
    ] {
        let out = tcpwhy(&args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert_eq!(text(&out.stdout), format!("{said}\n"), "{args:?}");
        assert_eq!(text(&out.stderr), "", "{args:?}");
    }
    // Where stdout is data, the message is on stderr.
    for args in [
        vec!["packets", f],
        vec!["diagnose", "--json", f],
        vec!["stats", "--json", f],
        vec!["latency", "--json", f],
    ] {
        let out = tcpwhy(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert_eq!(text(&out.stderr), format!("tcpwhy: {said}\n"), "{args:?}");
    }
    let html = dir.path().join("r.html");
    let out = tcpwhy(&["report", "-o", html.to_str().unwrap(), f]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains(&format!("tcpwhy: {said}\n")),
        "{}",
        text(&out.stderr)
    );
    // The JSON of diagnose and stats, and batch's files table, carry it.
    for cmd in ["diagnose", "stats"] {
        let v: Value = serde_json::from_slice(&tcpwhy(&[cmd, "--json", f]).stdout).unwrap();
        assert_eq!(
            v["files"][0]["capture_warnings"],
            serde_json::json!([said]),
            "{cmd}"
        );
    }
    let out_dir = dir.path().join("batch");
    let out = batch(f, out_dir.to_str().unwrap(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        batch_rows(&out_dir, "files", &["file", "capture_warnings"]),
        [[Some(f.to_string()), Some(said)]]
    );
}

#[test]
fn several_captures_are_named_by_their_paths() {
    let dir = tempfile::tempdir().unwrap();
    let a = example();
    let b = dir.path().join("copy.pcap");
    fs::write(&b, example_pcap()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tcpwhy"))
        .arg("diagnose")
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    for p in [&a, &b] {
        assert!(
            t.contains(&format!(
                "{}: connection 1  10.9.18.101:49277 <-> ",
                p.display()
            )),
            "{t}"
        );
    }
    assert!(!t.contains("file 0") && !t.contains("file 1"), "{t}");
    // One capture: no label, as the README shows.
    let one = text(&tcpwhy(&[a.to_str().unwrap()]).stdout);
    assert!(
        one.starts_with("connection 1  10.9.18.101:49277 <-> "),
        "{one}"
    );
}

#[test]
fn batch_takes_captures_by_content_and_lists_every_other_file() {
    let dir = tempfile::tempdir().unwrap();
    let captures = dir.path().join("in");
    fs::create_dir(&captures).unwrap();
    // A tcptrace dump (.dmp.gz), a capture without an extension, a note.
    fs::copy(
        shared_capture("tcptrace__zwnd.dmp.gz"),
        captures.join("zwnd.dmp.gz"),
    )
    .unwrap();
    fs::write(captures.join("upload"), example_pcap()).unwrap();
    fs::write(captures.join("README.md"), "what these are\n").unwrap();
    let out_dir = dir.path().join("out");
    let out = batch(captures.to_str().unwrap(), out_dir.to_str().unwrap(), &["-j", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let e = text(&out.stderr);
    let readme = captures.join("README.md").display().to_string();
    assert!(
        e.contains(&format!(
            "tcpwhy batch: skipped {readme}: not a capture: neither pcap nor pcapng, plain or gzip/xz/zstd-compressed\n"
        )),
        "{e}"
    );
    assert!(
        e.contains(
            "2 captures read (0 already done, 0 with errors; 1 other files skipped: not captures)"
        ),
        "{e}"
    );
    let mut files = batch_rows(&out_dir, "files", &["file", "format", "skipped"]);
    files.sort();
    let name = |n: &str| Some(captures.join(n).display().to_string());
    assert_eq!(
        files,
        [
            vec![
                name("README.md"),
                None,
                Some(
                    "not a capture: neither pcap nor pcapng, plain or gzip/xz/zstd-compressed"
                        .into()
                )
            ],
            vec![name("upload"), Some("pcap".into()), None],
            vec![name("zwnd.dmp.gz"), Some("pcap".into()), None],
        ]
    );
    let directions = batch_rows(&out_dir, "directions", &["file"]);
    assert!(
        directions.contains(&vec![name("zwnd.dmp.gz")])
            && directions.contains(&vec![name("upload")]),
        "{directions:?}"
    );
    // A second run reads nothing again and writes no row twice.
    let out = batch(captures.to_str().unwrap(), out_dir.to_str().unwrap(), &[]);
    assert!(
        text(&out.stderr).contains("0 captures read (2 already done"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(batch_rows(&out_dir, "files", &["file"]).len(), 3);
}

/// pcap records: (start, end) byte offsets of each after the file header.
fn records(data: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 24;
    while pos + 16 <= data.len() {
        let caplen = u32::from_le_bytes(data[pos + 8..pos + 12].try_into().unwrap()) as usize;
        out.push((pos, pos + 16 + caplen));
        pos += 16 + caplen;
    }
    out
}

#[test]
fn a_cut_capture_says_where_and_lowers_the_open_connection_one_step() {
    let dir = tempfile::tempdir().unwrap();
    let data = example_pcap();
    let recs = records(&data);
    let keep = recs.len() / 2;
    // The same frames, once ending cleanly and once cut inside the next record.
    let clean = dir.path().join("clean.pcap");
    fs::write(&clean, &data[..recs[keep - 1].1]).unwrap();
    let cut = dir.path().join("cut.pcap");
    fs::write(&cut, &data[..recs[keep].0 + 20]).unwrap();
    let json = |p: &Path| {
        let out = tcpwhy(&["diagnose", "--json", p.to_str().unwrap()]);
        (
            out.status.code(),
            serde_json::from_slice::<Value>(&out.stdout).unwrap(),
        )
    };
    let (code, whole) = json(&clean);
    assert_eq!(code, Some(0));
    let (code, part) = json(&cut);
    assert_eq!(code, Some(4));
    let (w, p) = (&whole["connections"][0], &part["connections"][0]);
    assert_eq!(w["directions"][0]["primary"], p["directions"][0]["primary"]);
    assert_eq!(w["directions"][0]["confidence"], "high", "{w:#}");
    assert_eq!(p["directions"][0]["confidence"], "medium", "{p:#}");
    assert!(w["capture_quality"]
        .as_array()
        .unwrap()
        .iter()
        .all(|q| q["kind"] != "capture_cut"));
    let q = p["capture_quality"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["kind"] == "capture_cut")
        .expect("capture_cut");
    assert_eq!(q["after_frame"], keep as u64);
    assert_eq!(q["open_at_cut"], true);
    assert_eq!(q["weakens"], serde_json::json!(["transfer_end"]));
    assert!(q["time"].as_f64().unwrap() > 1.5e9);
    let notes = p["directions"][0]["to_confirm"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .unwrap()
            .starts_with("the capture ends mid-transfer (cut after frame ")),
        "{notes:?}"
    );
    // The text says it beside the verdict, and stderr once.
    let out = tcpwhy(&[cut.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(4));
    let t = text(&out.stdout);
    assert!(
        t.contains(&format!(
            "  capture: the capture was cut after frame {keep}, "
        )),
        "{t}"
    );
    assert!(
        t.contains("(medium confidence, capture near the sender)"),
        "{t}"
    );
    assert_eq!(
        text(&out.stderr).matches("warning").count(),
        1,
        "{}",
        text(&out.stderr)
    );
    // batch (and so the Python package) reads the same diagnosis.
    let out_dir = dir.path().join("out");
    let out = batch(cut.to_str().unwrap(), out_dir.to_str().unwrap(), &[]);
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(
        batch_rows(&out_dir, "directions", &["confidence"]),
        [[Some("medium".to_string())]]
    );
    assert!(
        batch_rows(&out_dir, "quality", &["kind"]).contains(&vec![Some("capture_cut".to_string())])
    );
}

#[test]
fn capture_point_is_one_vocabulary() {
    let ex = example();
    let f = ex.to_str().unwrap();
    let d: Value = serde_json::from_slice(&tcpwhy(&["diagnose", "--json", f]).stdout).unwrap();
    let s: Value = serde_json::from_slice(&tcpwhy(&["stats", "--json", f]).stdout).unwrap();
    let dir = &d["connections"][0]["directions"][0];
    let i = usize::from(dir["from"] == "b");
    assert_eq!(dir["capture_point"], "near_sender");
    assert_eq!(
        dir["capture_point"],
        s["connections"][0]["directions"][i]["capture_point"]
    );
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("b");
    assert_eq!(
        batch(f, out.to_str().unwrap(), &[])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        batch_rows(&out, "directions", &["capture_point"]),
        [[Some("near_sender".to_string())]]
    );
}

#[test]
fn every_exit_code_is_in_the_readme_and_the_help() {
    let readme = fs::read_to_string(repo().join("README.md")).unwrap();
    let section = &readme[readme.find("## Exit codes and bad input").unwrap()..];
    let table = &section[section.find("\n| code |").expect("the exit-code table")..];
    let table = &table[..table[1..].find("\n\n").map_or(table.len(), |i| i + 1)];
    let help = text(&tcpwhy(&["--help"]).stdout);
    for (code, words) in [
        ("0", &["`prove`", "`lab`"][..]),
        ("2", &["mistyped subcommand"]),
        ("3", &["not a capture"]),
        ("4", &["truncated or corrupt"]),
        ("5", &["`live`/`trace`/`host`/`watch`", "`lab`", "`prove`"]),
        (
            "6",
            &["libpcap cannot be loaded (`watch`)", "`lab`/`prove`"],
        ),
        ("130", &["interrupted"]),
    ] {
        let row = table
            .lines()
            .find(|l| l.starts_with(&format!("| {code} |")))
            .unwrap_or_else(|| panic!("no row {code}"));
        for w in words {
            assert!(row.contains(w), "row {code}: {row}");
        }
        assert!(help.contains(&format!(" {code} ")), "--help lacks {code}");
    }
    assert!(
        !table.contains("`watch`: not allowed to capture"),
        "watch's permission failure is 5 now"
    );
}

/// `--pair` compares exactly two captures: one is a usage error; two that
/// share no connection get exit 7 and the reason, each still diagnosed;
/// an unreadable one is exit 3, as without `--pair`.
#[test]
fn pair_needs_two_captures_of_one_path() {
    let ex = example();
    let ex = ex.to_str().unwrap();
    let one = tcpwhy(&["diagnose", "--pair", ex]);
    assert_eq!(one.status.code(), Some(2), "{}", text(&one.stderr));
    assert!(text(&one.stderr).contains("exactly two FILES"));

    let a = shared_capture("../independent/random-loss/sender.pcap.xz");
    let b = shared_capture("../independent/capture-drops/receiver.pcap.xz");
    let none = tcpwhy(&["diagnose", "--pair", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(none.status.code(), Some(7), "{}", text(&none.stderr));
    assert!(text(&none.stderr).contains("no connection of the first capture is in the second"));
    let out = text(&none.stdout);
    assert!(out.contains("Two capture points") && out.contains("0 connection(s) matched"), "{out}");
    for f in [&a, &b] {
        assert!(out.contains(&format!("{}: connection", f.display())), "each capture is diagnosed alone:\n{out}");
    }

    let missing = tcpwhy(&["diagnose", "--pair", a.to_str().unwrap(), "/nonexistent/x.pcap"]);
    assert_eq!(missing.status.code(), Some(3), "{}", text(&missing.stderr));
}

/// `report --pair`: the comparison's section in the HTML, and the same
/// exit codes as `diagnose --pair`.
#[test]
fn report_pair_adds_the_comparison_section() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let (s, r) = (shared_capture("../independent/random-loss/sender.pcap.xz"), shared_capture("../independent/random-loss/receiver.pcap.xz"));
    let ok = tcpwhy(&["report", "--pair", "-o", html.to_str().unwrap(), s.to_str().unwrap(), r.to_str().unwrap()]);
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    let sec = &page[page.find("<section id=\"pair\">").expect("the pair section")..];
    assert!(sec.contains("Matched by: both ISNs equal") && sec.contains("lost before / between / after"), "{}", &sec[..sec.len().min(3000)]);
    // the random loss was between the two capture points
    assert!(sec.contains("<td>loss_between</td>"), "{}", &sec[..sec.len().min(3000)]);

    let other = shared_capture("../independent/capture-drops/receiver.pcap.xz");
    let none = tcpwhy(&["report", "--pair", "-o", html.to_str().unwrap(), s.to_str().unwrap(), other.to_str().unwrap()]);
    assert_eq!(none.status.code(), Some(7), "{}", text(&none.stderr));
    let one = tcpwhy(&["report", "--pair", "-o", html.to_str().unwrap(), s.to_str().unwrap()]);
    assert_eq!(one.status.code(), Some(2), "{}", text(&one.stderr));
}

/// `batch --pairs`: each listed pair compared as `diagnose --pair` compares
/// it (one `pairs` row per paired connection, one row saying why for a pair
/// that matched nothing), each capture diagnosed once however many pairs
/// list it, a rerun skipping what is done, and a malformed line a usage
/// error.
#[test]
fn batch_pairs_compares_each_pair_and_diagnoses_each_capture_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = shared_capture("../independent/random-loss/sender.pcap.xz");
    let r = shared_capture("../independent/random-loss/receiver.pcap.xz");
    let other = shared_capture("../independent/capture-drops/receiver.pcap.xz");
    let list = dir.path().join("pairs.txt");
    fs::write(&list, format!("# client\tserver\n{}\t{}\n\n{}\t{}\n", s.display(), r.display(), s.display(), other.display())).unwrap();
    let out = dir.path().join("out");
    let run = || tcpwhy(&["batch", "--pairs", list.to_str().unwrap(), "--out", out.to_str().unwrap(), "--no-progress"]);
    let first = run();
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    assert!(text(&first.stderr).contains("2 pairs of captures compared (0 already done), 2 connections seen at both points"), "{}", text(&first.stderr));
    let pairs = batch_rows(&out, "pairs", &["file_0", "file_1", "match_kind", "primary", "messages"]);
    // iperf3's two connections, and the pair that matched nothing
    assert_eq!(pairs.len(), 3, "{pairs:?}");
    let (s, r, other) = (s.display().to_string(), r.display().to_string(), other.display().to_string());
    let row = |f1: &str| pairs.iter().find(|p| p[1].as_deref() == Some(f1)).unwrap_or_else(|| panic!("{f1} in {pairs:?}"));
    // the same verdict as diagnose --pair
    let cli = tcpwhy(&["diagnose", "--pair", "--json", &s, &r]);
    let doc: Value = serde_json::from_slice(&cli.stdout).unwrap();
    let p = &doc["pair"]["pairs"][0];
    let matched = row(&r);
    assert_eq!(matched[0].as_deref(), Some(s.as_str()));
    assert_eq!(matched[2].as_deref(), p["kind"].as_str());
    assert_eq!(matched[3].as_deref(), p["findings"][0]["kind"].as_str());
    let none = row(&other);
    assert_eq!(none[2], None);
    assert!(none[4].as_deref().unwrap_or("").contains("no connection of the first capture is in the second"), "{none:?}");
    // three captures, each diagnosed once
    let mut files: Vec<String> = batch_rows(&out, "files", &["file"]).into_iter().filter_map(|f| f[0].clone()).collect();
    files.sort();
    let mut want = vec![s.clone(), r.clone(), other.clone()];
    want.sort();
    assert_eq!(files, want);
    let again = run();
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    assert!(text(&again.stderr).contains("0 pairs of captures compared (2 already done)"), "{}", text(&again.stderr));
    assert_eq!(batch_rows(&out, "pairs", &["file_0"]).len(), 3);
    assert_eq!(batch_rows(&out, "files", &["file"]).len(), 3);
    // a line that is not two paths
    fs::write(&list, format!("{s}\n")).unwrap();
    let bad = run();
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
    assert!(text(&bad.stderr).contains("line 1: expected two capture paths"), "{}", text(&bad.stderr));
}
