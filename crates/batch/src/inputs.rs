//! Which files a batch reads: files named on the command line (always),
//! directories (walked recursively, keeping files whose names look like
//! captures), glob patterns (expanded here, for patterns the shell did not
//! expand or that would overflow its argument list), and lists of paths.

use std::io::BufRead;
use std::path::{Path, PathBuf};

/// File name endings taken from a directory walk (compressed forms too).
pub const CAPTURE_SUFFIXES: &[&str] = &[
    ".pcap", ".pcapng", ".cap", ".dmp", ".pcap.gz", ".pcapng.gz", ".cap.gz", ".pcap.xz", ".pcapng.xz", ".pcap.zst",
    ".pcapng.zst", ".pcap.zstd", ".pcapng.zstd",
];

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{0}: no such file or directory, and no file matches it as a pattern")]
    NoMatch(String),
    #[error("{pattern}: not a valid glob pattern: {msg}")]
    BadPattern { pattern: String, msg: String },
    #[error("{path}: cannot read the list of paths: {source}")]
    List { path: PathBuf, source: std::io::Error },
}

/// True if a file found in a directory walk should be read.
pub fn looks_like_capture(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("").to_ascii_lowercase();
    CAPTURE_SUFFIXES.iter().any(|s| name.ends_with(s))
}

fn walk(dir: &Path, all_files: bool, out: &mut Vec<PathBuf>) {
    let mut found: Vec<PathBuf> = walkdir::WalkDir::new(dir)
        .follow_links(true)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .filter(|p| all_files || looks_like_capture(p))
        .collect();
    found.sort();
    out.extend(found);
}

/// Expands the command line's paths, in order, then the lists' (one path
/// per line, `-` for standard input; blank lines and `#` comments skipped).
/// A path listed twice is read once.
pub fn expand(args: &[PathBuf], lists: &[PathBuf], all_files: bool) -> Result<Vec<PathBuf>, InputError> {
    let mut out = Vec::new();
    for a in args {
        if a.is_dir() {
            walk(a, all_files, &mut out);
        } else if a.exists() {
            out.push(a.clone());
        } else {
            let pattern = a.to_string_lossy();
            if !pattern.contains(['*', '?', '[']) {
                // Kept: reading it gives the error row (no such file).
                out.push(a.clone());
                continue;
            }
            let paths = glob::glob(&pattern)
                .map_err(|e| InputError::BadPattern { pattern: pattern.to_string(), msg: e.msg.to_string() })?;
            let mut found: Vec<PathBuf> = paths.filter_map(Result::ok).collect();
            if found.is_empty() {
                return Err(InputError::NoMatch(pattern.to_string()));
            }
            found.sort();
            for p in found {
                if p.is_dir() {
                    walk(&p, all_files, &mut out);
                } else {
                    out.push(p);
                }
            }
        }
    }
    for l in lists {
        let reader: Box<dyn BufRead> = if l.as_os_str() == "-" {
            Box::new(std::io::BufReader::new(std::io::stdin()))
        } else {
            let f = std::fs::File::open(l).map_err(|source| InputError::List { path: l.clone(), source })?;
            Box::new(std::io::BufReader::new(f))
        };
        for line in reader.lines() {
            let line = line.map_err(|source| InputError::List { path: l.clone(), source })?;
            let t = line.trim();
            if !t.is_empty() && !t.starts_with('#') {
                out.push(PathBuf::from(t));
            }
        }
    }
    let mut seen = std::collections::HashSet::with_capacity(out.len());
    out.retain(|p| seen.insert(p.clone()));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_keep_captures_and_globs_expand() {
        let d = tempfile::tempdir().unwrap();
        for n in ["a.pcap", "b.pcapng.gz", "notes.md", "sub/c.cap"] {
            let p = d.path().join(n);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"x").unwrap();
        }
        let got = expand(&[d.path().to_path_buf()], &[], false).unwrap();
        let names: Vec<String> = got.iter().map(|p| p.strip_prefix(d.path()).unwrap().display().to_string()).collect();
        assert_eq!(names, ["a.pcap", "b.pcapng.gz", "sub/c.cap"]);
        let all = expand(&[d.path().to_path_buf()], &[], true).unwrap();
        assert_eq!(all.len(), 4);
        let g = expand(&[d.path().join("*.pcap*")], &[], false).unwrap();
        assert_eq!(g.len(), 2);
        assert!(matches!(expand(&[d.path().join("*.nothing")], &[], false), Err(InputError::NoMatch(_))));
        // Named files are kept even when missing: their read gives the error row.
        let missing = d.path().join("missing.pcap");
        assert_eq!(expand(&[missing.clone(), missing.clone()], &[], false).unwrap(), [missing]);
        let list = d.path().join("list.txt");
        std::fs::write(&list, format!("# captures\n{}\n\n{}\n", d.path().join("a.pcap").display(), d.path().join("x.pcap").display())).unwrap();
        assert_eq!(expand(&[], &[list], false).unwrap().len(), 2);
    }
}
