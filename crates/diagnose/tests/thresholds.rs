//! Every number the diagnosis decides by has a name, a value the docs
//! give, and a reason (issue 39: "no literal threshold in a comparison").
//!
//! 1. No comparison in `src/` holds a literal number beyond the few that are
//!    arithmetic, not thresholds (0, 1, 2, a percent, a unit's factor).
//!    A threshold is a named constant whose doc comment gives its source.
//! 2. Every numeric constant of `src/` is in docs/diagnose.md's table "Every
//!    named number", with the code's own spelling of its value, and every
//!    row of that table is a constant of the code. Change one without the
//!    other and this fails. `TCPWHY_UPDATE_DOCS=1 cargo test -p
//!    tcpwhy-diagnose --test thresholds` rewrites the table from the code,
//!    keeping the descriptions of the rows that stay (a new row takes the
//!    first sentence of its doc comment).
//!
//! Both read the code outside comments, string literals and the
//! `#[cfg(test)]` modules at a file's end.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const TABLE_START: &str = "<!-- named numbers: start -->";
const TABLE_END: &str = "<!-- named numbers: end -->";

/// Literals a comparison may hold: arithmetic, not thresholds. 0, 1 and 2
/// (halves, parity, "more than one"), a percent, the factors between
/// units (ms, µs, ns, bits).
const ARITHMETIC: &[&str] = &[
    "0", "1", "2", "0.0", "1.0", "2.0", "100.0", "1000", "1000.0", "1e3", "1e6", "1e9", "1e-3", "1e-6", "1e-9", "8", "8.0", "8e9", "1_000",
    "1_000_000", "1_000_000_000",
];

/// Numeric constants that are not numbers to decide by: the bits of an
/// entry of the second stretch's records (split.rs), TCP's flag bits
/// (record.rs).
const NOT_NUMBERS: &[&str] = &["OP_DATA", "OP_ACK", "OP_DIR1", "OP_HEAD", "OP_SHIFT", "SYN", "RST"];

const NUMERIC: &[&str] = &["f64", "f32", "i64", "u64", "u32", "i32", "usize", "u8", "u16"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/diagnose.md")
}

/// (path relative to src, the file's text before its test module)
fn sources() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![src()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).unwrap();
                let body = match text.find("#[cfg(test)]\nmod ") {
                    Some(i) => text[..i].to_string(),
                    None => text,
                };
                let rel = p.strip_prefix(src()).unwrap().to_string_lossy().replace('\\', "/");
                out.push((rel, body));
            }
        }
    }
    out.sort();
    out
}

/// A line without its comment and with its string literals emptied.
fn code_of(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    let mut in_str = false;
    while let Some(c) = chars.next() {
        if in_str {
            if c == '\\' {
                chars.next();
            } else if c == '"' {
                in_str = false;
                out.push('"');
            }
            continue;
        }
        if c == '"' {
            in_str = true;
            out.push('"');
            continue;
        }
        if c == '/' && chars.peek() == Some(&'/') {
            break;
        }
        // A char literal such as '"' or '/'.
        if c == '\'' {
            let rest: String = chars.clone().take(3).collect();
            if rest.len() >= 2 && rest.as_bytes()[1] == b'\'' {
                chars.next();
                chars.next();
                out.push_str("' '");
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// The numeric literals of a piece of code (not parts of names, not tuple
/// indices such as `.0`).
fn literals(code: &str) -> Vec<String> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let prev = if i > 0 { b[i - 1] } else { b' ' };
        if c.is_ascii_digit() && !(prev.is_ascii_alphanumeric() || prev == b'_' || prev == b'.') {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || (b[i] == b'.' && i + 1 < b.len() && b[i + 1].is_ascii_digit()) || (b[i] == b'-' && b[i - 1] == b'e')) {
                i += 1;
            }
            let lit = &code[start..i];
            // A type suffix (1u32, 0.5f64) is not part of the value.
            let lit = ["u8", "u16", "u32", "u64", "usize", "i32", "i64", "f64", "f32"].iter().fold(lit, |l, s| l.strip_suffix(s).unwrap_or(l));
            out.push(lit.to_string());
        } else {
            i += 1;
        }
    }
    out
}

/// The comparison operators of a line, with space on both sides (generics
/// such as `Vec<u8>` have none before the bracket).
fn compares(code: &str) -> bool {
    [" < ", " > ", " <= ", " >= ", " == ", " != "].iter().any(|op| code.contains(op))
}

/// A quantile's argument (`percentile(xs, 0.5)`, `quantile_f64(xs, 0.5)`)
/// names which sample, not a threshold.
fn without_quantiles(code: &str) -> String {
    let mut s = code.to_string();
    for call in ["percentile(", "quantile_f64(", "quantile_i64("] {
        while let Some(i) = s.find(call) {
            let rest = &s[i..];
            let Some(close) = rest.find(')') else { break };
            s.replace_range(i..i + close + 1, "q");
        }
    }
    s
}

#[test]
fn no_comparison_holds_a_literal_threshold() {
    let mut found = Vec::new();
    for (rel, body) in sources() {
        for (n, line) in body.lines().enumerate() {
            let code = code_of(line);
            let t = code.trim_start();
            if t.starts_with("const ") || t.starts_with("pub const ") || t.starts_with("pub(crate) const ") || t.starts_with("static ") {
                continue;
            }
            if !compares(&code) {
                continue;
            }
            let bad: Vec<String> = literals(&without_quantiles(&code)).into_iter().filter(|l| !ARITHMETIC.contains(&l.as_str())).collect();
            if !bad.is_empty() {
                found.push(format!("src/{rel}:{}: {bad:?} in `{}`", n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "literal thresholds in comparisons (name each, with its source):\n{}", found.join("\n"));
}

struct Constant {
    name: String,
    value: String,
    file: String,
    doc: String,
}

/// Every numeric constant of the code, with its value as the code spells it
/// and the first sentence of its doc comment (empty when it shares the one
/// before it).
fn constants() -> Vec<Constant> {
    let mut out = Vec::new();
    for (rel, body) in sources() {
        let lines: Vec<&str> = body.lines().collect();
        let mut doc: Vec<String> = Vec::new();
        // The last documented constant: one declared right after it with no
        // doc comment of its own shares its rule.
        let mut last_documented = String::new();
        let mut i = 0;
        while i < lines.len() {
            let t = lines[i].trim();
            if let Some(d) = t.strip_prefix("///") {
                doc.push(d.trim().to_string());
                i += 1;
                continue;
            }
            let decl = ["pub const ", "pub(crate) const ", "const "].iter().find_map(|p| t.strip_prefix(p));
            let Some(decl) = decl else {
                if !t.starts_with("#[") {
                    doc.clear();
                    if !t.is_empty() {
                        last_documented.clear();
                    }
                }
                i += 1;
                continue;
            };
            // The declaration, to its semicolon.
            let mut full = code_of(decl);
            while !full.trim_end().ends_with(';') && i + 1 < lines.len() {
                i += 1;
                full.push(' ');
                full.push_str(code_of(lines[i]).trim());
            }
            i += 1;
            let Some((name, rest)) = full.split_once(':') else { continue };
            let Some((ty, value)) = rest.split_once('=') else { continue };
            let (name, ty) = (name.trim().to_string(), ty.trim());
            if !NUMERIC.contains(&ty) || NOT_NUMBERS.contains(&name.as_str()) {
                doc.clear();
                continue;
            }
            let value = value.trim().trim_end_matches(';').trim().to_string();
            // Another module's constant under its own name: listed there.
            if value.ends_with(&format!("::{name}")) {
                doc.clear();
                continue;
            }
            let text = doc.join(" ").replace("[`", "`").replace("`]", "`");
            // The first sentence ends at a full stop that is not "e.g." or "i.e.".
            let end = text.match_indices(". ").map(|(k, _)| k).find(|&k| !text[..k].ends_with("e.g") && !text[..k].ends_with("i.e"));
            let first = match end {
                Some(k) => text[..=k].to_string(),
                None if text.is_empty() && !last_documented.is_empty() => format!("With `{last_documented}` (its rule)."),
                None => text.clone(),
            };
            if !text.is_empty() {
                last_documented = name.clone();
            }
            out.push(Constant { name, value, file: rel.clone(), doc: first });
            doc.clear();
        }
    }
    out
}

fn row(c: &Constant, what: &str) -> String {
    format!("| `{}` | `{}` | {} | {} |", c.name, c.value, c.file, what)
}

/// The table's rows in the docs: (name, file) -> (value, description). A
/// name may stand in two files (each stage's own threshold).
fn table(docs: &str) -> BTreeMap<(String, String), (String, String)> {
    let (Some(a), Some(b)) = (docs.find(TABLE_START), docs.find(TABLE_END)) else {
        return BTreeMap::new();
    };
    let mut out = BTreeMap::new();
    for line in docs[a..b].lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        if cells.len() >= 4 {
            let name = cells[0].trim_matches('`').to_string();
            let what = cells[3..].join(" | ");
            out.insert((name, cells[2].to_string()), (cells[1].trim_matches('`').to_string(), what));
        }
    }
    out
}

#[test]
fn every_named_number_is_in_the_docs_with_the_codes_value() {
    let text = std::fs::read_to_string(docs()).unwrap();
    let code = constants();
    let rows = table(&text);
    if std::env::var_os("TCPWHY_UPDATE_DOCS").is_some() {
        let mut sorted: Vec<&Constant> = code.iter().collect();
        sorted.sort_by(|a, b| (&a.file, &a.name).cmp(&(&b.file, &b.name)));
        let mut t = String::from(TABLE_START);
        t.push_str("\n| constant | value | file | what it is |\n|---|---|---|---|\n");
        for c in sorted {
            let what = rows.get(&(c.name.clone(), c.file.clone())).map(|r| r.1.clone()).filter(|w| !w.is_empty()).unwrap_or_else(|| c.doc.replace('|', "\\|"));
            t.push_str(&row(c, &what));
            t.push('\n');
        }
        let (a, b) = (text.find(TABLE_START).expect("table start marker"), text.find(TABLE_END).expect("table end marker"));
        let new = format!("{}{}{}", &text[..a], t, &text[b..]);
        std::fs::write(docs(), new).unwrap();
        return;
    }
    let mut wrong = Vec::new();
    for c in &code {
        match rows.get(&(c.name.clone(), c.file.clone())) {
            None => wrong.push(format!("{} ({}) is not in the table", c.name, c.file)),
            Some((v, _)) if v != &c.value => wrong.push(format!("{} ({}): the code has `{}`, the table `{}`", c.name, c.file, c.value, v)),
            _ => {}
        }
    }
    for (name, file) in rows.keys() {
        if !code.iter().any(|c| &c.name == name && &c.file == file) {
            wrong.push(format!("{name} ({file}) is in the table but not in the code"));
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/diagnose.md, \"Every named number\" (TCPWHY_UPDATE_DOCS=1 rewrites it):\n{}",
        wrong.join("\n")
    );
    assert!(code.len() > 150, "the parser found only {} constants", code.len());
}

#[test]
fn the_scanner_finds_literals_in_comparisons() {
    assert_eq!(literals("if x >= 1.5 * y && z < 10_000_000 {"), ["1.5", "10_000_000"]);
    assert_eq!(literals("w[1].0 > a.1 + 3u32"), ["1", "3"]);
    assert_eq!(literals("let x = 8e9 / 2.0;"), ["8e9", "2.0"]);
    assert!(compares(&code_of("if a < b { \"x >= 3\" }")));
    assert!(!compares(&code_of("let v: Vec<u8> = f(\"a > 3\"); // x > 3")));
    assert_eq!(literals(&without_quantiles("percentile(&s, 0.5) > LIMIT")), Vec::<String>::new());
    assert_eq!(literals(&without_quantiles("rank::quantile_f64(&mut s, 0.5).unwrap_or(x) > LIMIT")), Vec::<String>::new());
}
