//! What `live`, `trace` and `host` share: the socket filter, exit codes
//! for kernel access, and turning I/O errors into clear messages.

use std::io;
use std::net::{IpAddr, SocketAddr};
use tcpwhy_kernel::Filter;

/// Exit code: the command needs privileges it does not have (root or
/// CAP_NET_ADMIN / CAP_SYS_ADMIN: tracefs, another network namespace).
pub const NEEDS_PRIVILEGE: u8 = 5;
/// Exit code: a kernel facility is missing (tracefs not mounted or without
/// the tcp tracepoints, no sock_diag support) or the named network
/// namespace does not exist.
pub const NO_FACILITY: u8 = 6;

pub const KERNEL_EXIT_HELP: &str = "\
Exit codes: 0 done; 1 other failure; 2 usage error (also a bad filter);
3 an input file could not be read; 5 not allowed (needs root: tracefs,
another network namespace); 6 missing kernel facility (tracefs, tcp
tracepoints, sock_diag) or unknown network namespace.";

/// A socket filter from words like ss's: `port 5201`, `sport 22`,
/// `dport 443`, `src 10.0.0.1`, `dst 10.0.0.2`, `dst 10.0.0.2:5201`,
/// `10.0.0.2:5201` (the peer), or a bare port (`5201`, `:5201`).
#[derive(Debug, Clone, Default)]
pub struct SocketFilter {
    pub filter: Filter,
    /// Every port named (either end) — what tracefs filters on.
    pub ports: Vec<u16>,
    /// Every address named (either end).
    pub addrs: Vec<IpAddr>,
}

/// A filter that cannot be parsed: a usage error (exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("bad port {0:?} in filter")]
    BadPort(String),
    #[error("bad address {0:?} in filter (numeric addresses only)")]
    BadAddress(String),
    #[error("filter: `{0}` needs a value")]
    MissingValue(&'static str),
    #[error(
        "filter word {0:?} not understood: use port N, sport N, dport N, src ADDR, dst ADDR[:PORT], ADDR:PORT or N"
    )]
    UnknownWord(String),
}

fn port_of(s: &str) -> Result<u16, FilterError> {
    s.trim_start_matches(':')
        .parse()
        .map_err(|_| FilterError::BadPort(s.to_string()))
}

fn addr_or_sock(s: &str) -> Result<(Option<IpAddr>, Option<u16>), FilterError> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok((Some(a.ip()), Some(a.port())));
    }
    if let Ok(ip) = s.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
        return Ok((Some(ip), None));
    }
    if let Some((h, p)) = s.rsplit_once(':') {
        if let (Ok(ip), Ok(p)) = (h.parse::<IpAddr>(), p.parse::<u16>()) {
            return Ok((Some(ip), Some(p)));
        }
    }
    Err(FilterError::BadAddress(s.to_string()))
}

pub fn parse_filter(words: &[String]) -> Result<SocketFilter, FilterError> {
    let mut f = SocketFilter::default();
    let words: Vec<&str> = words
        .iter()
        .flat_map(|w| w.split_whitespace())
        .filter(|w| !matches!(*w, "=" | "==" | "eq" | "and" | "&&"))
        .collect();
    let mut i = 0;
    let next = |i: &mut usize, what: &'static str| -> Result<&str, FilterError> {
        *i += 1;
        words.get(*i).copied().ok_or(FilterError::MissingValue(what))
    };
    while i < words.len() {
        match words[i] {
            "port" => {
                let p = port_of(next(&mut i, "port")?)?;
                f.filter = f.filter.clone().with_port(p);
                f.ports.push(p);
            }
            "sport" | "lport" => {
                let p = port_of(next(&mut i, "sport")?)?;
                f.filter = f.filter.clone().with_local_port(p);
                f.ports.push(p);
            }
            "dport" | "rport" => {
                let p = port_of(next(&mut i, "dport")?)?;
                f.filter = f.filter.clone().with_remote_port(p);
                f.ports.push(p);
            }
            "src" | "dst" => {
                let local = words[i] == "src";
                let (a, p) = addr_or_sock(next(&mut i, "src/dst")?)?;
                if let Some(a) = a {
                    f.filter = if local { f.filter.clone().with_local_addr(a) } else { f.filter.clone().with_remote_addr(a) };
                    f.addrs.push(a);
                }
                if let Some(p) = p {
                    f.filter = if local { f.filter.clone().with_local_port(p) } else { f.filter.clone().with_remote_port(p) };
                    f.ports.push(p);
                }
            }
            "-4" | "ipv4" => f.filter = f.filter.clone().ipv4_only(),
            "-6" | "ipv6" => f.filter = f.filter.clone().ipv6_only(),
            w if w.trim_start_matches(':').parse::<u16>().is_ok() => {
                let p = port_of(w)?;
                f.filter = f.filter.clone().with_port(p);
                f.ports.push(p);
            }
            w => {
                let (a, p) = addr_or_sock(w).map_err(|_| FilterError::UnknownWord(w.to_string()))?;
                if let Some(a) = a {
                    f.filter = f.filter.clone().with_remote_addr(a);
                    f.addrs.push(a);
                }
                if let Some(p) = p {
                    f.filter = f.filter.clone().with_remote_port(p);
                    f.ports.push(p);
                }
            }
        }
        i += 1;
    }
    Ok(f)
}

/// Prints a clear message for a kernel-access error and returns the exit code.
pub fn kernel_error(e: &io::Error, what: &str, netns: Option<&str>) -> u8 {
    let root = unsafe { libc::geteuid() } == 0;
    match e.kind() {
        io::ErrorKind::PermissionDenied => {
            eprintln!("tcpwhy: {what}: {e}");
            if !root {
                eprintln!("tcpwhy: this needs root (or CAP_NET_ADMIN/CAP_SYS_ADMIN); try again with sudo");
            }
            NEEDS_PRIVILEGE
        }
        io::ErrorKind::NotFound => {
            eprintln!("tcpwhy: {what}: {e}");
            if let Some(ns) = netns {
                eprintln!("tcpwhy: no network namespace named {ns:?} (see `ip netns list`)");
            }
            NO_FACILITY
        }
        io::ErrorKind::Unsupported => {
            eprintln!("tcpwhy: {what}: {e}");
            NO_FACILITY
        }
        _ if e.raw_os_error() == Some(libc::EPROTONOSUPPORT) || e.raw_os_error() == Some(libc::EAFNOSUPPORT) => {
            eprintln!("tcpwhy: {what}: {e} (this kernel has no NETLINK_SOCK_DIAG / inet_diag support)");
            NO_FACILITY
        }
        _ => {
            eprintln!("tcpwhy: {what}: {e}");
            crate::exit::FAILURE
        }
    }
}

/// Whether to colour (a terminal and NO_COLOR unset).
pub fn use_color() -> bool {
    use std::io::IsTerminal;
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && io::stdout().is_terminal()
}

#[cfg(test)]
mod tests {
    use super::*;
    fn w(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }
    #[test]
    fn filters() {
        let f = parse_filter(&w("dport 5201")).unwrap();
        assert_eq!(f.filter.remote_port, Some(5201));
        assert_eq!(f.ports, vec![5201]);
        let f = parse_filter(&w("dst 10.0.0.2:443")).unwrap();
        assert_eq!(f.filter.remote_addr, Some("10.0.0.2".parse().unwrap()));
        assert_eq!(f.filter.remote_port, Some(443));
        let f = parse_filter(&w("sport = :22")).unwrap();
        assert_eq!(f.filter.local_port, Some(22));
        assert_eq!(parse_filter(&w("5001")).unwrap().filter.port, Some(5001));
        assert_eq!(parse_filter(&w("bogus")).unwrap_err(), FilterError::UnknownWord("bogus".into()));
        assert_eq!(parse_filter(&w("port")).unwrap_err(), FilterError::MissingValue("port"));
        let e = parse_filter(&w("dport 99999")).unwrap_err();
        assert_eq!(e, FilterError::BadPort("99999".into()));
        assert_eq!(e.to_string(), "bad port \"99999\" in filter");
        let e = parse_filter(&w("dst host.example")).unwrap_err();
        assert_eq!(e.to_string(), "bad address \"host.example\" in filter (numeric addresses only)");
    }
}
