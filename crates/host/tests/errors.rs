//! Evidence that cannot be used gives an error that says which file, why,
//! and what was expected.

use std::path::{Path, PathBuf};
use tcpwhy_host::error::{Error, Format};
use tcpwhy_host::evidence::{load_samples, Evidence, EvidenceArgs};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

#[test]
fn missing_file_is_unreadable_with_its_path_and_io_error() {
    let p = PathBuf::from("/nonexistent/ss.txt");
    let e = Evidence::load(&EvidenceArgs { ss: vec![p.clone()], ..Default::default() }).unwrap_err();
    match &e {
        Error::Unreadable { path, source } => {
            assert_eq!(path, &p);
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(e.path(), p);
    assert!(e.to_string().starts_with("cannot read /nonexistent/ss.txt: "), "{e}");
    assert!(std::error::Error::source(&e).is_some());
}

#[test]
fn wrong_format_names_the_file_and_what_was_expected() {
    // A tcp_metrics file given as sysctl -a.
    let p = fixture("tcp_metrics-iproute2-6.1.txt");
    let e = Evidence::load(&EvidenceArgs { sysctl: Some(p.clone()), ..Default::default() }).unwrap_err();
    assert!(matches!(&e, Error::NoData { expected: Format::Sysctl, .. }), "{e:?}");
    assert_eq!(e.to_string(), format!("{}: no `key = value` lines (expected `sysctl -a` output)", p.display()));
    // ... as nstat counters.
    let e = Evidence::load(&EvidenceArgs { nstat: Some(p.clone()), ..Default::default() }).unwrap_err();
    assert!(matches!(&e, Error::NoData { expected: Format::Counters, .. }), "{e:?}");
    assert_eq!(e.to_string(), format!("{}: no counters (expected `nstat -az` or `netstat -s` output)", p.display()));
    // ... as ss output.
    let e = load_samples(&p, &mut Vec::new()).unwrap_err();
    assert!(matches!(&e, Error::NoData { expected: Format::Ss, .. }), "{e:?}");
    assert_eq!(e.to_string(), format!("{}: no sockets found (expected `ss -tin` output)", p.display()));
}

#[test]
fn lab_run_must_be_a_directory() {
    let p = fixture("tcp_metrics-iproute2-6.1.txt");
    let e = Evidence::load(&EvidenceArgs { lab_dir: Some(p.clone()), ..Default::default() }).unwrap_err();
    assert!(matches!(&e, Error::NotLabRun { path } if path == &p), "{e:?}");
    assert_eq!(e.to_string(), format!("{} is not a lab run directory", p.display()));
    let e = Evidence::load(&EvidenceArgs { lab_dir: Some("/nonexistent/run".into()), ..Default::default() }).unwrap_err();
    assert!(matches!(&e, Error::Unreadable { .. }), "{e:?}");
}
