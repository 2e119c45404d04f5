//! CPU cost of sock_diag dumps with different extension sets, and of the
//! live tracker on top (used to tune `tcpwhy live`; see bench/README.md).
//!
//!   cargo run --release -p tcpwhy-host --example dump_cost -- NETNS [ROUNDS]

use std::collections::HashMap;
use tcpwhy_host::series::Tracker;
use tcpwhy_kernel::sockdiag::ext;
use tcpwhy_kernel::{Filter, SockDiag};

fn cpu() -> (f64, f64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    (t(ru.ru_utime), t(ru.ru_stime))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let ns = args.get(1).expect("NETNS");
    let rounds: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(50);
    let mut d = SockDiag::in_netns(ns).expect("sock_diag");
    for (name, bits, track) in [
        ("no extensions", 0, false),
        ("no extensions, IPv4 only", 0xff, false),
        ("all extensions (default)", ext::DEFAULT, false),
        ("INFO only", ext::INFO, false),
        ("INFO|SKMEMINFO", ext::INFO | ext::SKMEMINFO, false),
        ("INFO|SKMEMINFO + tracker", ext::INFO | ext::SKMEMINFO, true),
        ("all + tracker", ext::DEFAULT, true),
    ] {
        let f = if bits == 0xff { Filter::new().with_extensions(0).ipv4_only() } else { Filter::new().with_extensions(bits) };
        let mut buf = Vec::new();
        let mut tr: HashMap<u64, Tracker> = HashMap::new();
        let (u0, s0) = cpu();
        let mut n = 0;
        for _ in 0..rounds {
            buf.clear();
            d.dump_tcp_into(&f, &mut buf).unwrap();
            n += buf.len();
            if track {
                for s in &buf {
                    match tr.get_mut(&s.cookie) {
                        Some(t) => t.push(s),
                        None => {
                            tr.insert(s.cookie, Tracker::new(s));
                        }
                    }
                }
            }
        }
        let (u1, s1) = cpu();
        report(name, n / rounds, rounds, u1 - u0, s1 - s0);
        let _ = (u1, s1);
    }
    // Exact lookups (what `tcpwhy live` does between scans for active sockets).
    let all = d.dump_tcp(&Filter::new()).unwrap();
    let targets: Vec<_> = all.iter().map(|s| (s.src, s.dst, s.cookie)).collect();
    for k in [100usize, 1000, targets.len()] {
        let t = &targets[..k.min(targets.len())];
        let mut buf = Vec::new();
        let (u0, s0) = cpu();
        for _ in 0..rounds {
            buf.clear();
            let gone = d.get_tcp(t, ext::DEFAULT, &mut buf).unwrap();
            assert_eq!(gone, 0);
            assert_eq!(buf.len(), t.len());
        }
        let (u1, s1) = cpu();
        report(&format!("exact lookup of {}", t.len()), t.len(), rounds, u1 - u0, s1 - s0);
    }
}

fn report(name: &str, n: usize, rounds: usize, user: f64, sys: f64) {
    {
        let per = (user + sys) / rounds as f64;
        println!(
            "{name:<28} {:>6} sockets/round  user {:>6.2} ms  sys {:>6.2} ms per round  -> {:.1}% of a core at 10 rounds/s",
            n,
            user / rounds as f64 * 1e3,
            sys / rounds as f64 * 1e3,
            per * 10.0 * 100.0
        );
    }
}
