//! The README's example output is what command 1 prints today: the first
//! thing a reader sees must stay true.

use std::path::Path;
use std::process::Command;

#[test]
fn readme_example_output_is_current() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(repo.join("README.md")).unwrap();
    let start = readme.find("```\nconnection 1 ").expect("README has the example output block") + 4;
    let end = start + readme[start..].find("```").expect("block closed");
    let shown = &readme[start..end];
    let out = Command::new(env!("CARGO_BIN_EXE_tcpwhy"))
        .arg("--no-progress")
        .arg(repo.join("examples/smtp-upload-no-window-scaling.pcap.xz"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let now = String::from_utf8(out.stdout).unwrap();
    assert_eq!(shown.trim_end(), now.trim_end(), "update README.md's example output (run command 1)");
}

/// Every Markdown file the README names is in the repository (a bare name
/// at its root), except those it places in the shared captures.
#[test]
fn readme_names_only_docs_that_exist() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(repo.join("README.md")).unwrap();
    let mut checked = 0;
    for line in readme.lines().filter(|l| !l.contains("shared/captures")) {
        let names = line.split(|c: char| !(c.is_ascii_alphanumeric() || "_/.-".contains(c))).filter(|w| w.ends_with(".md"));
        for name in names {
            let name = name.trim_start_matches("./");
            assert!(repo.join(name).exists(), "README.md names {name}, which is not in the repository");
            checked += 1;
        }
    }
    assert!(checked > 5, "{checked}");
}
