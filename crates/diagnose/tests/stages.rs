//! The diagnosis is a one-way pipeline (docs/architecture.md, "Inside
//! diagnose"): each module of `src/` uses only the modules of the stages
//! before it. A rule that reaches back to a later stage (a verdict patched
//! after `decide`, a record that calls the analysis) is how the crate grew
//! one import circle of 24 files; this test keeps it from growing back.
//!
//! It reads the code, not the docs: every `crate::name` path, every name in
//! a `use crate::{...}` list, and `super::` in `detect/`, outside comments
//! and outside the `#[cfg(test)] mod tests` at a file's end.

use std::collections::BTreeMap;
use std::path::Path;

/// The stages, first to last. A module may use the ones listed before it.
const STAGES: &[&str] = &[
    // Order statistics every stage may read.
    "rank",
    // What the diagnosis is asked, and what it gives.
    "options", "system", "model", "commands", "quality",
    // The records of the pass, and what each reads from them.
    "record", "limits", "shape", "policer", "congestion",
    // One set of path facts per direction.
    "path",
    // Per interval and per request.
    "states", "timeline", "latency",
    // One detector per cause (the `detect/` folder), then the verdict.
    "detect", "decide",
    // The fixes and their gains, the paragraph.
    "fixes", "text", "consistency",
    // A direction, the flows that share its path, a long one in parts, a
    // connection.
    "analyze", "groups", "parts", "connection",
    // The streaming side: a capture split in time, the recorder, the one
    // pipeline every entry point runs (a file, a live capture).
    "split", "recorder", "pipeline",
    // The entry points.
    "lib",
];

/// The module a source file defines (`detect/loss.rs` is part of `detect`).
fn stage_of(rel: &str) -> String {
    let first = rel.split('/').next().unwrap_or(rel);
    first.trim_end_matches(".rs").to_string()
}

/// The code of a file without its comments and without its trailing test
/// module.
fn code(text: &str) -> String {
    let body = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    body.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The crate's modules a file's code names.
fn used(code: &str, modules: &[String], in_detect: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut add = |name: &str| {
        // A name at the crate's root that is not a module (`crate::Options`)
        // is one of lib.rs's re-exports: a use of the last stage.
        let name = if modules.iter().any(|m| m == name) || name.is_empty() { name } else { "lib" };
        if !name.is_empty() && !out.iter().any(|o| o == name) {
            out.push(name.to_string());
        }
    };
    let ident = |s: &str| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(list) = rest.strip_prefix('{') {
            // use crate::{a, b::C, d::{E, F}}: the first name of each item.
            let mut depth = 0;
            let mut item_start = true;
            for (j, c) in list.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && !c.is_whitespace() => {
                        item_start = false;
                        add(&ident(&list[j..]));
                    }
                    _ => {}
                }
            }
        } else {
            add(&ident(rest));
        }
    }
    if !in_detect {
        for (i, _) in code.match_indices("super::") {
            add(&ident(&code[i + "super::".len()..]));
        }
    }
    out
}

#[test]
fn each_stage_uses_only_the_stages_before_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("src readable") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
                files.insert(rel, std::fs::read_to_string(&p).expect("readable"));
            }
        }
    }
    let modules: Vec<String> = STAGES.iter().map(|s| s.to_string()).collect();
    let mut wrong = Vec::new();
    for (rel, text) in &files {
        let stage = stage_of(rel);
        let Some(at) = STAGES.iter().position(|s| *s == stage) else {
            wrong.push(format!("{rel}: module `{stage}` is in no stage (add it to STAGES)"));
            continue;
        };
        for m in used(&code(text), &modules, rel.starts_with("detect/")) {
            let to = STAGES.iter().position(|s| *s == m).unwrap();
            if to >= at && m != stage {
                wrong.push(format!("{rel} (stage {at}, {stage}) uses `{m}` (stage {to})"));
            }
        }
    }
    assert!(wrong.is_empty(), "uses that run back up the pipeline:\n{}", wrong.join("\n"));
}

/// The scanner itself: it finds what it must (else the test above could
/// pass on code that reaches back).
#[test]
fn the_scanner_finds_paths_lists_and_ignores_comments() {
    let modules: Vec<String> = ["model", "path", "decide", "groups", "lib"].iter().map(|s| s.to_string()).collect();
    let c = code("use crate::{model::X, path::{A, B}};\nlet x = crate::decide::decide(); // crate::groups\nfn f(o: &crate::Options) {}\n#[cfg(test)]\nmod tests { use crate::groups; }");
    let mut found = used(&c, &modules, false);
    found.sort();
    assert_eq!(found, ["decide", "lib", "model", "path"]);
}
