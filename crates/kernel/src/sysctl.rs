//! Sysctl snapshots and writes, per network namespace.
//!
//! Files under `/proc/sys/net` show the network namespace of the thread that
//! opens them, so the `*_in_netns` functions do their file I/O on a helper
//! thread that has joined the namespace (see [`crate::netns`]). Keys use the
//! dotted `sysctl(8)` form (`net.ipv4.tcp_rmem`); values are returned with
//! runs of whitespace (tabs in `tcp_rmem`, ...) collapsed to single spaces.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::PathBuf;

use crate::netns;

const PROC_SYS: &str = "/proc/sys";

/// Keys outside `net.ipv4.tcp_*` that [`snapshot`] includes.
pub const EXTRA_KEYS: &[&str] = &[
    "net.core.rmem_default",
    "net.core.rmem_max",
    "net.core.wmem_default",
    "net.core.wmem_max",
    "net.core.default_qdisc",
    "net.ipv4.ip_local_port_range",
    "kernel.osrelease",
];

/// `/proc/sys/...` for a dotted key, refusing anything that is not a plain
/// key (no `/`, no empty or `..` components).
pub fn key_path(key: &str) -> io::Result<PathBuf> {
    let ok = !key.is_empty()
        && key.split('.').all(|c| !c.is_empty())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if !ok {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid sysctl key {key:?}"),
        ));
    }
    let mut p = PathBuf::from(PROC_SYS);
    for c in key.split('.') {
        p.push(c);
    }
    Ok(p)
}

/// Collapse whitespace runs to one space and trim.
pub fn normalize(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for w in value.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

/// Read one sysctl of the calling thread's namespace (normalised value).
pub fn read(key: &str) -> io::Result<String> {
    let p = key_path(key)?;
    fs::read_to_string(&p).map(|v| normalize(&v)).map_err(|e| {
        let msg = match e.kind() {
            io::ErrorKind::NotFound => format!("sysctl {key} does not exist"),
            _ => format!("cannot read sysctl {key}: {e}"),
        };
        io::Error::new(e.kind(), msg)
    })
}

/// Write one sysctl in the calling thread's namespace.
pub fn set(key: &str, value: &str) -> io::Result<()> {
    let p = key_path(key)?;
    let mut f = fs::OpenOptions::new().write(true).open(&p).map_err(|e| {
        let msg = match e.kind() {
            io::ErrorKind::NotFound => {
                format!("sysctl {key} does not exist (cannot set it to {value:?})")
            }
            io::ErrorKind::PermissionDenied => {
                format!("not permitted to set sysctl {key} to {value:?}: {e} (needs root)")
            }
            _ => format!("cannot open sysctl {key} to set {value:?}: {e}"),
        };
        io::Error::new(e.kind(), msg)
    })?;
    f.write_all(value.as_bytes()).map_err(|e| {
        let msg = match e.raw_os_error() {
            Some(libc::EINVAL) => {
                format!("kernel rejected value {value:?} for sysctl {key} (EINVAL)")
            }
            Some(libc::EPERM) if key == "net.ipv4.tcp_congestion_control" => format!(
                "not permitted to set sysctl {key} to {value:?}: {e} (outside the initial network \
                 namespace only algorithms listed in net.ipv4.tcp_allowed_congestion_control may be set)"
            ),
            Some(libc::EPERM) | Some(libc::EACCES) => {
                format!("not permitted to set sysctl {key} to {value:?}: {e}")
            }
            _ => format!("setting sysctl {key} to {value:?}: {e}"),
        };
        io::Error::new(e.kind(), msg)
    })
}

/// Snapshot of the calling thread's network namespace: every readable
/// `net.ipv4.tcp_*` plus [`EXTRA_KEYS`] that exist. Unreadable entries are
/// skipped.
pub fn snapshot() -> io::Result<BTreeMap<String, String>> {
    let mut m = BTreeMap::new();
    let dir = PathBuf::from(PROC_SYS).join("net/ipv4");
    let rd = fs::read_dir(&dir)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot list {}: {e}", dir.display())))?;
    for ent in rd {
        let ent = ent?;
        let name = ent.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with("tcp_") || !ent.file_type().map(|t| t.is_file()).unwrap_or(false) {
            continue;
        }
        if let Ok(v) = fs::read_to_string(ent.path()) {
            m.insert(format!("net.ipv4.{name}"), normalize(&v));
        }
    }
    for key in EXTRA_KEYS {
        if let Ok(v) = read(key) {
            m.insert(key.to_string(), v);
        }
    }
    Ok(m)
}

/// [`snapshot`] of the named namespace `/run/netns/NAME`.
pub fn snapshot_in_netns(name: &str) -> io::Result<BTreeMap<String, String>> {
    netns::run_in_netns(name, snapshot).map_err(|e| with_ns(e, name))
}

/// [`read`] in the named namespace.
pub fn read_in_netns(name: &str, key: &str) -> io::Result<String> {
    netns::run_in_netns(name, || read(key)).map_err(|e| with_ns(e, name))
}

/// [`set`] in the named namespace.
pub fn set_in_netns(name: &str, key: &str, value: &str) -> io::Result<()> {
    netns::run_in_netns(name, || set(key, value)).map_err(|e| with_ns(e, name))
}

/// Several writes in one namespace switch; stops at the first error.
pub fn set_many_in_netns(name: &str, pairs: &[(&str, &str)]) -> io::Result<()> {
    netns::run_in_netns(name, || pairs.iter().try_for_each(|(k, v)| set(k, v)))
        .map_err(|e| with_ns(e, name))
}

fn with_ns(e: io::Error, name: &str) -> io::Error {
    let s = e.to_string();
    if s.contains(name) {
        e
    } else {
        io::Error::new(e.kind(), format!("{s} (in network namespace {name})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert_eq!(
            key_path("net.ipv4.tcp_rmem").unwrap(),
            PathBuf::from("/proc/sys/net/ipv4/tcp_rmem")
        );
        for bad in ["", "net..x", "net/ipv4", "../etc", ".net", "net.", "a b"] {
            assert!(key_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn normalizes() {
        assert_eq!(normalize("4096\t131072\t6291456\n"), "4096 131072 6291456");
        assert_eq!(normalize("  cubic \n"), "cubic");
        assert_eq!(normalize(""), "");
    }

    #[test]
    fn snapshot_of_own_namespace() {
        let m = snapshot().unwrap();
        assert!(m.contains_key("net.ipv4.tcp_congestion_control"), "{m:?}");
        assert!(m.contains_key("kernel.osrelease"));
        assert!(m.values().all(|v| !v.contains('\t') && !v.contains('\n')));
        assert!(m
            .keys()
            .all(|k| k.starts_with("net.ipv4.tcp_") || EXTRA_KEYS.contains(&k.as_str())));
    }

    #[test]
    fn missing_key_is_named() {
        let e = read("net.ipv4.tcp_no_such_thing").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().contains("net.ipv4.tcp_no_such_thing"));
    }
}
