//! Which files a batch reads: files named on the command line (always),
//! directories (walked recursively, keeping the captures: files whose
//! content is pcap or pcapng, plain or gzip/xz/zstd-compressed, as the
//! reader recognises it, and files named like captures, whose read gives an
//! error row if they are not), glob patterns (expanded here, for patterns
//! the shell did not expand or that would overflow its argument list), and
//! lists of paths. Every file a walk leaves out is listed with the reason.

use std::io::BufRead;
use std::path::{Path, PathBuf};

/// File name endings a directory walk takes without looking inside
/// (compressed forms too): a file so named that is not a capture gives an
/// error row. Other files are taken when their content is a capture.
pub const CAPTURE_SUFFIXES: &[&str] = &[
    ".pcap", ".pcapng", ".cap", ".dmp", ".pcap.gz", ".pcapng.gz", ".cap.gz", ".dmp.gz", ".pcap.xz", ".pcapng.xz",
    ".cap.xz", ".dmp.xz", ".pcap.zst", ".pcapng.zst", ".cap.zst", ".dmp.zst", ".pcap.zstd", ".pcapng.zstd",
];

/// The files a batch reads, and those a directory walk left out.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Expanded {
    pub paths: Vec<PathBuf>,
    /// Files found in a directory that are not captures, with the reason.
    pub skipped: Vec<(PathBuf, String)>,
}

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{0}: no such file or directory, and no file matches it as a pattern")]
    NoMatch(String),
    #[error("{pattern}: not a valid glob pattern: {msg}")]
    BadPattern { pattern: String, msg: String },
    #[error("{path}: cannot read the list of paths: {source}")]
    List { path: PathBuf, source: std::io::Error },
    #[error("{path}, line {line}: expected two capture paths separated by a tab (or by spaces when neither path holds one), found {text:?}")]
    PairLine { path: PathBuf, line: usize, text: String },
}

fn lines_of(l: &Path) -> Result<Vec<String>, InputError> {
    let reader: Box<dyn BufRead> = if l.as_os_str() == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        let f = std::fs::File::open(l).map_err(|source| InputError::List { path: l.to_path_buf(), source })?;
        Box::new(std::io::BufReader::new(f))
    };
    reader.lines().collect::<Result<_, _>>().map_err(|source| InputError::List { path: l.to_path_buf(), source })
}

/// The pairs of captures the lists name (`tcpwhy batch --pairs`): one pair
/// per line, the two paths separated by a tab, or by spaces when neither
/// path holds one (`-` for standard input; blank lines and `#` comments
/// skipped). A pair listed twice is compared once.
pub fn read_pairs(lists: &[PathBuf]) -> Result<Vec<[PathBuf; 2]>, InputError> {
    let mut out: Vec<[PathBuf; 2]> = Vec::new();
    for l in lists {
        for (n, line) in lines_of(l)?.iter().enumerate() {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let two: Vec<&str> = if t.contains('\t') {
                t.split('\t').map(str::trim).filter(|s| !s.is_empty()).collect()
            } else {
                t.split_whitespace().collect()
            };
            match two[..] {
                [a, b] => out.push([PathBuf::from(a), PathBuf::from(b)]),
                _ => return Err(InputError::PairLine { path: l.clone(), line: n + 1, text: t.to_string() }),
            }
        }
    }
    let mut seen = std::collections::HashSet::with_capacity(out.len());
    out.retain(|p| seen.insert(p.clone()));
    Ok(out)
}

/// True if a file found in a directory walk should be read.
pub fn looks_like_capture(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("").to_ascii_lowercase();
    CAPTURE_SUFFIXES.iter().any(|s| name.ends_with(s))
}

/// Why a file found in a directory is not read as a capture, judged by
/// its content (None: read it). A file that cannot be opened is read, so
/// that its error is a row.
pub fn not_a_capture(p: &Path) -> Option<String> {
    match tcpwhy_wire::sniff_capture(p) {
        Ok(tcpwhy_wire::Sniffed::Capture(_)) | Err(_) => None,
        Ok(tcpwhy_wire::Sniffed::CompressedOther(c)) => {
            Some(format!("not a capture: {c}-compressed, but neither pcap nor pcapng inside"))
        }
        Ok(tcpwhy_wire::Sniffed::Other) => {
            Some("not a capture: neither pcap nor pcapng, plain or gzip/xz/zstd-compressed".to_string())
        }
    }
}

fn walk(dir: &Path, all_files: bool, out: &mut Expanded) {
    let mut found: Vec<PathBuf> = walkdir::WalkDir::new(dir)
        .follow_links(true)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .collect();
    found.sort();
    for p in found {
        let why = if all_files || looks_like_capture(&p) { None } else { not_a_capture(&p) };
        match why {
            None => out.paths.push(p),
            Some(why) => out.skipped.push((p, why)),
        }
    }
}

/// Expands the command line's paths, in order, then the lists' (one path
/// per line, `-` for standard input; blank lines and `#` comments skipped).
/// A path listed twice is read once.
pub fn expand(args: &[PathBuf], lists: &[PathBuf], all_files: bool) -> Result<Expanded, InputError> {
    let mut out = Expanded::default();
    for a in args {
        if a.is_dir() {
            walk(a, all_files, &mut out);
        } else if a.exists() {
            out.paths.push(a.clone());
        } else {
            let pattern = a.to_string_lossy();
            if !pattern.contains(['*', '?', '[']) {
                // Kept: reading it gives the error row (no such file).
                out.paths.push(a.clone());
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
                    out.paths.push(p);
                }
            }
        }
    }
    for l in lists {
        for line in lines_of(l)? {
            let t = line.trim();
            if !t.is_empty() && !t.starts_with('#') {
                out.paths.push(PathBuf::from(t));
            }
        }
    }
    let mut seen = std::collections::HashSet::with_capacity(out.paths.len());
    out.paths.retain(|p| seen.insert(p.clone()));
    let mut seen = std::collections::HashSet::with_capacity(out.skipped.len());
    out.skipped.retain(|(p, _)| seen.insert(p.clone()));
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
        let rel = |p: &PathBuf| p.strip_prefix(d.path()).unwrap().display().to_string();
        let names: Vec<String> = got.paths.iter().map(rel).collect();
        assert_eq!(names, ["a.pcap", "b.pcapng.gz", "sub/c.cap"]);
        let skipped: Vec<(String, &str)> = got.skipped.iter().map(|(p, why)| (rel(p), why.as_str())).collect();
        assert_eq!(skipped, [("notes.md".to_string(), "not a capture: neither pcap nor pcapng, plain or gzip/xz/zstd-compressed")]);
        let all = expand(&[d.path().to_path_buf()], &[], true).unwrap();
        assert_eq!((all.paths.len(), all.skipped.len()), (4, 0));
        let g = expand(&[d.path().join("*.pcap*")], &[], false).unwrap();
        assert_eq!(g.paths.len(), 2);
        assert!(matches!(expand(&[d.path().join("*.nothing")], &[], false), Err(InputError::NoMatch(_))));
        // Named files are kept even when missing: their read gives the error row.
        let missing = d.path().join("missing.pcap");
        assert_eq!(expand(&[missing.clone(), missing.clone()], &[], false).unwrap().paths, [missing]);
        let list = d.path().join("list.txt");
        std::fs::write(&list, format!("# captures\n{}\n\n{}\n", d.path().join("a.pcap").display(), d.path().join("x.pcap").display())).unwrap();
        assert_eq!(expand(&[], &[list], false).unwrap().paths.len(), 2);
    }

    #[test]
    fn pairs_are_two_paths_a_line() {
        let d = tempfile::tempdir().unwrap();
        let list = d.path().join("pairs.txt");
        std::fs::write(&list, "# client\tserver\nc 1.pcap\ts 1.pcap\n\nc2.pcap   s2.pcap\nc2.pcap s2.pcap\n").unwrap();
        let got = read_pairs(&[list.clone()]).unwrap();
        let want: Vec<[PathBuf; 2]> = vec![["c 1.pcap".into(), "s 1.pcap".into()], ["c2.pcap".into(), "s2.pcap".into()]];
        assert_eq!(got, want);
        std::fs::write(&list, "a.pcap b.pcap\nonly.pcap\n").unwrap();
        match read_pairs(&[list]) {
            Err(InputError::PairLine { line, text, .. }) => assert_eq!((line, text.as_str()), (2, "only.pcap")),
            other => panic!("{other:?}"),
        }
    }

    /// A capture is taken by its content whatever its name (`.dmp.gz`,
    /// `.bin`, no extension); a compressed file that holds something else
    /// is left out, with the reason.
    #[test]
    fn directories_take_captures_by_content() {
        use std::io::Write;
        let d = tempfile::tempdir().unwrap();
        let pcap_header = [0xd4u8, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0];
        let gzip = |bytes: &[u8]| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(bytes).unwrap();
            e.finish().unwrap()
        };
        std::fs::write(d.path().join("trace.bin"), pcap_header).unwrap();
        std::fs::write(d.path().join("old.dmp.gz"), gzip(&pcap_header)).unwrap();
        std::fs::write(d.path().join("capture"), gzip(&pcap_header)).unwrap();
        std::fs::write(d.path().join("notes.txt.gz"), gzip(b"hello, not a capture")).unwrap();
        let got = expand(&[d.path().to_path_buf()], &[], false).unwrap();
        let names: Vec<&str> = got.paths.iter().map(|p| p.file_name().unwrap().to_str().unwrap()).collect();
        assert_eq!(names, ["capture", "old.dmp.gz", "trace.bin"]);
        assert_eq!(got.skipped.len(), 1);
        assert_eq!(got.skipped[0].0, d.path().join("notes.txt.gz"));
        assert_eq!(got.skipped[0].1, "not a capture: gzip-compressed, but neither pcap nor pcapng inside");
    }
}
