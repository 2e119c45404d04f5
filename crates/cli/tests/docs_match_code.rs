//! The reference pages name every field the code writes: each key of
//! `diagnose --json` and `stats --json` (on captures that bring out the
//! optional ones: groups, capture-quality findings, a cut capture, no TCP)
//! is in docs/json.md, the findings' numbers in docs/diagnose.md or
//! docs/latency.md, and each column of the batch tables in docs/batch.md.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn doc(name: &str) -> String {
    fs::read_to_string(repo().join("docs").join(name)).unwrap()
}

/// The names a page gives in code: every word of every `backticked` span
/// (so `{ base_ms, median_ms }` names both).
fn named(page: &str) -> BTreeSet<String> {
    page.split('`')
        .skip(1)
        .step_by(2)
        .flat_map(|span| span.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

fn shared(rel: &str) -> PathBuf {
    let base = std::env::var_os("TCPWHY_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    base.join("captures").join(rel)
}

/// Objects whose keys are data (a limit, a skip reason, a flag, a fix),
/// not fields.
const MAPS: &[&str] = &["limits", "skipped", "flags", "predicted_ms"];

/// Every key with the paths it was seen under.
fn keys(v: &Value, path: &str, out: &mut BTreeMap<String, BTreeSet<String>>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                out.entry(k.clone()).or_default().insert(path.to_string());
                if !MAPS.contains(&k.as_str()) {
                    keys(x, &format!("{path}.{k}"), out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| keys(x, &format!("{path}[]"), out)),
        _ => {}
    }
}

/// A pcap cut inside a record half-way (the example, uncompressed).
fn cut_example(dir: &Path) -> PathBuf {
    let raw = Command::new("xz")
        .arg("-dc")
        .arg(repo().join("examples/smtp-upload-no-window-scaling.pcap.xz"))
        .output()
        .unwrap();
    let p = dir.join("cut.pcap");
    fs::write(&p, &raw.stdout[..raw.stdout.len() / 2 + 3]).unwrap();
    p
}

fn json_of(args: &[&str], files: &[PathBuf]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_tcpwhy"))
        .args(args)
        .args(files)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stderr)))
}

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut v = vec![
        repo().join("examples/smtp-upload-no-window-scaling.pcap.xz"),
        cut_example(dir),
    ];
    for rel in [
        // duplicate frames, missing frames, offloads, a handshake before the capture
        "public/tcpdump__bigtcp-ipv4.pcap",
        "public/tcptrace__zwnd.dmp.gz",
        "public/m-lab-etl__ndt-nnwk2_1611335823_00000000000C2DA9.pcap.gz",
        "public/zeek__irc-dcc-send.pcapng",
        // two flows to one host through one policer: a group
        "policing-lab/C=5-L=2000000-CD1=500-CD2=1000-ID=0-PCIR=3000000-RTT=100-RTTV=0-RTTC=0%-LOSS=0%-XT=1-TCP=cubic-T=1-CP1=16307-CP2=16308.pcap.xz",
    ] {
        v.push(shared(rel));
    }
    v
}

#[test]
fn json_md_names_every_field_of_diagnose_and_stats() {
    let dir = tempfile::tempdir().unwrap();
    let files = inputs(dir.path());
    let json_md = named(&doc("json.md"));
    let findings_docs = named(&[doc("diagnose.md"), doc("latency.md")].concat());
    let mut missing = Vec::new();
    let mut seen_groups = false;
    for args in [
        &["diagnose", "--json", "--no-progress"][..],
        &["stats", "--json", "--no-progress"],
    ] {
        let v = json_of(args, &files);
        seen_groups |= v["groups"].as_array().is_some_and(|g| !g.is_empty());
        let mut found = BTreeMap::new();
        keys(&v, "", &mut found);
        for (k, paths) in found {
            // A finding's numbers are documented with its kind.
            let in_findings = paths.iter().all(|p| p.ends_with(".findings[]"));
            let documented = json_md.contains(&k) || (in_findings && findings_docs.contains(&k));
            if !documented {
                missing.push(format!(
                    "{} {k} (under {})",
                    args[0],
                    paths.iter().next().unwrap()
                ));
            }
        }
    }
    assert!(seen_groups, "the inputs should bring out a group");
    assert!(
        missing.is_empty(),
        "fields the docs do not name:\n{}",
        missing.join("\n")
    );
}

#[test]
fn batch_md_names_every_column() {
    let batch_md = doc("batch.md");
    let mut missing = Vec::new();
    for t in tcpwhy_batch::Table::ALL {
        assert!(
            batch_md.contains(&format!("### `{}`", t.name())),
            "no section for {}",
            t.name()
        );
        for f in t.schema().fields() {
            if !batch_md.contains(&format!("`{}`", f.name())) {
                missing.push(format!("{}.{}", t.name(), f.name()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "columns docs/batch.md does not name: {missing:?}"
    );
}
