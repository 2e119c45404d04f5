//! `tcpwhy live`, `tcpwhy trace` and the text parsers against a real lab
//! transfer whose limit is known: a receiver with SO_RCVBUF 8 KiB (a window of a few segments, below
//! the cwnd of 10, so the window and not the cwnd binds) behind a
//! veth pair between two `t5-` network namespaces, a sender writing as fast
//! as it can (cubic). Truth: the sender is receiver-window limited.
//! Needs root (namespaces, tracefs); skipped with a reason otherwise.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use tcpwhy_kernel::netns::run_in_netns;

const BIN: &str = env!("CARGO_BIN_EXE_tcpwhy");
static COUNTER: AtomicU32 = AtomicU32::new(0);

fn root_or_skip(test: &str) -> bool {
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    eprintln!("SKIP {test}: needs root (network namespaces, tracefs)");
    false
}

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().expect("run ip");
    assert!(st.success(), "ip {args:?} failed");
}

/// Two namespaces joined by a veth pair (10.77.N.1 <-> 10.77.N.2), deleted on drop.
struct Lab {
    a: String,
    b: String,
    addr_a: String,
    addr_b: String,
}

impl Lab {
    fn new() -> Lab {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let id = format!("{}-{n}", std::process::id());
        let lab = Lab {
            a: format!("t5-{id}-a"),
            b: format!("t5-{id}-b"),
            addr_a: format!("10.77.{}.1", (std::process::id() as u32 * 4 + n) % 250),
            addr_b: format!("10.77.{}.2", (std::process::id() as u32 * 4 + n) % 250),
        };
        ip(&["netns", "add", &lab.a]);
        ip(&["netns", "add", &lab.b]);
        let va = format!("t5a{}", (std::process::id() % 100_000) * 10 + n);
        let vb = format!("t5b{}", (std::process::id() % 100_000) * 10 + n);
        ip(&["link", "add", &va, "netns", &lab.a, "type", "veth", "peer", "name", &vb, "netns", &lab.b]);
        ip(&["-n", &lab.a, "addr", "add", &format!("{}/24", lab.addr_a), "dev", &va]);
        ip(&["-n", &lab.b, "addr", "add", &format!("{}/24", lab.addr_b), "dev", &vb]);
        for (ns, dev) in [(&lab.a, &va), (&lab.b, &vb)] {
            ip(&["-n", ns, "link", "set", "lo", "up"]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
        }
        lab
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.a]).status();
        let _ = Command::new("ip").args(["netns", "del", &self.b]).status();
    }
}

fn setsockopt(fd: i32, level: i32, opt: i32, v: &[u8]) {
    let r = unsafe { libc::setsockopt(fd, level, opt, v.as_ptr() as *const libc::c_void, v.len() as u32) };
    assert_eq!(r, 0, "setsockopt: {}", std::io::Error::last_os_error());
}

/// Starts the known-limit transfer; returns (client socket, server address,
/// stop flag, threads).
fn transfer(lab: &Lab, secs: f64) -> (TcpStream, SocketAddr, Vec<std::thread::JoinHandle<u64>>) {
    let b_addr: SocketAddr = format!("{}:0", lab.addr_b).parse().unwrap();
    let listener: TcpListener = run_in_netns(&lab.b, move || {
        let l = TcpListener::bind(b_addr)?;
        setsockopt(l.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, &8192i32.to_ne_bytes());
        Ok(l)
    })
    .unwrap();
    let server = listener.local_addr().unwrap();
    let client: TcpStream = run_in_netns(&lab.a, move || {
        let s = TcpStream::connect(server)?;
        setsockopt(s.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_CONGESTION, b"cubic");
        Ok(s)
    })
    .unwrap();
    let reader = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let mut n = 0u64;
        loop {
            match c.read(&mut buf) {
                Ok(0) | Err(_) => return n,
                Ok(k) => n += k as u64,
            }
        }
    });
    let mut w = client.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let buf = vec![7u8; 1 << 16];
        let t = Instant::now();
        let mut n = 0u64;
        while t.elapsed().as_secs_f64() < secs {
            n += w.write(&buf).unwrap_or(0) as u64;
        }
        let _ = w.shutdown(std::net::Shutdown::Write);
        n
    });
    (client, server, vec![reader, writer])
}

#[test]
fn live_and_trace_see_the_receiver_window_limit() {
    if !root_or_skip("live_and_trace_see_the_receiver_window_limit") {
        return;
    }
    let lab = Lab::new();
    let dir = tempfile::tempdir().unwrap();
    let trace_out = dir.path().join("trace.jsonl");
    let rec = dir.path().join("rec.jsonl");
    let tracefs = tcpwhy_kernel::tracefs::tracefs_root().is_ok()
        || std::path::Path::new("/sys/kernel/tracing").exists();

    // The port is only known once the listener exists: start the transfer
    // with a short head start, then the observers.
    let (client, server, threads) = transfer(&lab, 3.5);
    let port = server.port().to_string();
    let tracer = tracefs.then(|| {
        Command::new(BIN)
            .args(["trace", "port", &port, "--duration", "2s", "--json", "--out"])
            .arg(&trace_out)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    });
    let live = Command::new(BIN)
        .args(["live", "--netns", &lab.a, "--duration", "2s", "--no-view", "--json", "--interval", "100ms", "--record"])
        .arg(&rec)
        .args(["dport", &port])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Mid-transfer: the kernel's own view, and real ss text.
    std::thread::sleep(Duration::from_millis(1000));
    let ti = tcpwhy_kernel::getsockopt_tcp_info(client.as_raw_fd()).unwrap();
    // Exact lookups (what live does between full scans) find the socket by
    // 4-tuple, and report a closed one as gone.
    let mut sd = tcpwhy_kernel::SockDiag::in_netns(&lab.a).unwrap();
    let me = client.local_addr().unwrap();
    let mut got = Vec::new();
    let bogus: SocketAddr = format!("{}:1", lab.addr_b).parse().unwrap();
    let gone = sd.get_tcp(&[(me, server, 0), (me, bogus, 0)], tcpwhy_kernel::sockdiag::ext::DEFAULT, &mut got).unwrap();
    assert_eq!((got.len(), gone), (1, 1));
    assert_eq!(got[0].src, me);
    assert!(got[0].tcp_info.unwrap().bytes_acked.unwrap() > 0);
    let cookie = got[0].cookie;
    got.clear();
    sd.get_tcp(&[(me, server, cookie)], tcpwhy_kernel::sockdiag::ext::DEFAULT, &mut got).unwrap();
    assert_eq!(got[0].cookie, cookie);
    let ss_text = Command::new("ip")
        .args(["netns", "exec", &lab.a, "ss", "-tinm", "dport", "=", &format!(":{port}")])
        .output()
        .unwrap();
    let ss_text = String::from_utf8_lossy(&ss_text.stdout).to_string();
    // the window moves while ss runs (a process started in the namespace,
    // tens of ms): ss's reading is held to TCP_INFO's on both sides of it
    let ti_after = tcpwhy_kernel::getsockopt_tcp_info(client.as_raw_fd()).unwrap();

    let live_out = live.wait_with_output().unwrap();
    assert!(live_out.status.success(), "live failed: {}", String::from_utf8_lossy(&live_out.stderr));
    let trace_out_v = tracer.map(|t| t.wait_with_output().unwrap());
    for t in threads {
        t.join().unwrap();
    }

    // live: the sender's socket is receiver-window limited.
    let v: serde_json::Value = serde_json::from_slice(&live_out.stdout).unwrap();
    let local = client.local_addr().unwrap().to_string();
    let conns = v["connections"].as_array().unwrap();
    let c = conns.iter().find(|c| c["local"] == local.as_str()).unwrap_or_else(|| panic!("{local} not in {v:#}"));
    assert_eq!(c["role"], "sender", "{c:#}");
    assert!(c["samples"].as_u64().unwrap() >= 10, "{c:#}");
    eprintln!("live connection: {c}");
    // The oracle is the kernel's own chrono for this run (tcpi_rwnd_limited
    // over tcpi_busy_time, from the live samples). On a veth pair the
    // segments are sometimes reordered by microseconds across the two
    // CPUs; the sender then retransmits spuriously, cuts its congestion
    // window and the kernel itself counts most of the time elsewhere. When
    // the kernel says the window held the sender most of the time, live
    // must say so; in any case its share must follow the kernel's.
    let kernel_rwnd = c["lifetime_rwnd_share"].as_f64().unwrap();
    let live_rwnd = c["limits"]["receiver_window"].as_f64().unwrap_or(0.0);
    if kernel_rwnd >= 0.6 {
        assert_eq!(c["primary"], "receiver_window", "{c:#}");
        assert!(live_rwnd > 0.5, "{c:#}");
    } else {
        eprintln!("the kernel counted {kernel_rwnd:.2} of the busy time rwnd-limited in this run (segments reordered on the veth)");
    }
    assert!((live_rwnd - kernel_rwnd).abs() < 0.4, "live's receiver-window share {live_rwnd:.2} against the kernel's {kernel_rwnd:.2}: {c:#}");

    // The recording diagnoses the same way through `tcpwhy ss`.
    let again = Command::new(BIN).args(["ss", "--json"]).arg(&rec).output().unwrap();
    assert!(again.status.success());
    let v2: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    let c2 = v2["connections"].as_array().unwrap().iter().find(|c| c["local"] == local.as_str()).unwrap();
    assert_eq!(c2["primary"], c["primary"], "ss over the recording: {c2:#}");

    // Real ss text of the same socket agrees with TCP_INFO.
    let p = tcpwhy_host::ss::parse(&ss_text, 0.0);
    let s = p.samples.iter().find(|s| s.src.to_string() == local).unwrap_or_else(|| panic!("{ss_text}"));
    assert!(p.skipped.is_empty(), "{:?}", p.skipped);
    let st = s.tcp_info.unwrap();
    assert_eq!(st.snd_mss, ti.snd_mss);
    assert!(st.rwnd_limited.unwrap() > 0, "{ss_text}");
    assert!(s.skmem.is_some());
    let (w0, w1) = (ti.snd_wnd.unwrap() as f64, ti_after.snd_wnd.unwrap() as f64);
    let got = st.snd_wnd.unwrap() as f64;
    assert!(
        got >= 0.5 * w0.min(w1) && got <= 1.5 * w0.max(w1),
        "ss snd_wnd {got} vs TCP_INFO {w0} before and {w1} after it"
    );
    let w = w0;

    // trace: per-ACK cwnd and peer window consistent with TCP_INFO.
    if let Some(out) = trace_out_v {
        assert!(out.status.success(), "trace failed: {}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let f = v["flows"].as_array().unwrap().iter().find(|f| f["local"] == local.as_str()).unwrap_or_else(|| panic!("{v:#}"));
        assert!(f["probes"].as_u64().unwrap() > 100, "{f:#}");
        let wnd = f["snd_wnd_median"].as_f64().unwrap();
        assert!((wnd - w).abs() <= w * 0.5, "trace snd_wnd median {wnd} vs TCP_INFO {w}");
        let (cmin, cmax) = (f["cwnd_min"].as_u64().unwrap(), f["cwnd_max"].as_u64().unwrap());
        assert!(cmin <= ti.snd_cwnd as u64 && ti.snd_cwnd as u64 <= cmax, "cwnd {} outside trace {cmin}..{cmax}", ti.snd_cwnd);
        let srtt = f["srtt_median_us"].as_f64().unwrap();
        assert!(srtt > 0.0 && srtt < 20_000.0, "{f:#}");
        // The trace's share counts ACKs at which the peer's window left
        // the sender less free room than tcp_tso_should_defer sends into
        // (a third of the window; the test's window is 7 segments, so 5 in
        // flight already wait for more: CI saw kernel 0.62 against 0.31
        // when the share still asked for 90% of the window in flight). The
        // kernel's chrono counts the time tcp_write_xmit stopped on the
        // window. The ACKs are a superset of that time, except that the
        // chrono also runs on through a stall, where no ACK comes. But
        // tcp_cwnd_test comes first: in Recovery (a run the veth
        // reordered) the sender stops on its cut cwnd and the kernel counts
        // busy time while the holes keep the flight at the window (CI saw
        // kernel 0.35, trace 0.85). So the trace may see more than the
        // kernel, never much less, and they must agree when the window
        // held the sender most of the time. (12 local runs: kernel
        // 0.31-0.92, trace 0.83-1.00.)
        let trace_bound = f["window_bound_share"].as_f64().unwrap();
        assert!(trace_bound >= kernel_rwnd - 0.3, "trace's window-bound share {trace_bound:.2} against the kernel's {kernel_rwnd:.2}: {f:#}");
        if kernel_rwnd >= 0.6 {
            assert!((trace_bound - kernel_rwnd).abs() < 0.5, "trace's window-bound share {trace_bound:.2} against the kernel's {kernel_rwnd:.2}: {f:#}");
        }
        assert!(std::fs::metadata(&trace_out).unwrap().len() > 0);
        // tracefs restored: no instance left by a process that has exited.
        let left: Vec<String> = std::fs::read_dir("/sys/kernel/tracing/instances")
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().to_string())
                    .filter(|n| n.starts_with("tcpwhy-"))
                    .filter(|n| {
                        let pid = n.split('-').nth(1).unwrap_or("");
                        !std::path::Path::new(&format!("/proc/{pid}")).exists()
                    })
                    .collect()
            })
            .unwrap_or_default();
        assert!(left.is_empty(), "stale tracefs instances: {left:?}");
        eprintln!("trace flow: {f}");
        eprintln!("TCP_INFO mid-run: cwnd {} snd_wnd {:?} rtt {} us", ti.snd_cwnd, ti.snd_wnd, ti.rtt);
    } else {
        eprintln!("SKIP trace part: no tracefs");
    }
}

#[test]
fn real_tool_outputs_parse() {
    if !root_or_skip("real_tool_outputs_parse") {
        return;
    }
    let lab = Lab::new();
    // 2 s: ss must find the connection established; on a loaded machine
    // (CI ran this beside the other kernel tests) a 1 s transfer had ended
    // before the dump saw it.
    let (client, server, threads) = transfer(&lab, 2.0);
    std::thread::sleep(Duration::from_millis(400));
    let run = |args: &[&str]| {
        let o = Command::new("ip").args(["netns", "exec", &lab.a]).args(args).env("NSTAT_HISTORY", "/dev/null").output().unwrap();
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    // ss lists the socket once its dump sees it established; on a loaded
    // machine look again (a few times, 100 ms apart) before judging.
    let mut ss = run(&["ss", "-tinmoe"]);
    for _ in 0..10 {
        if ss.lines().count() > 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        ss = run(&["ss", "-tinmoe"]);
    }
    for t in threads {
        t.join().unwrap();
    }
    drop(client);
    std::thread::sleep(Duration::from_millis(200));
    let p = tcpwhy_host::ss::parse(&ss, 0.0);
    assert!(p.skipped.is_empty(), "{:?}\n{ss}", p.skipped);
    assert!(p.samples.iter().any(|s| s.dst == server), "{ss}");

    let sysctl = tcpwhy_host::text::parse_sysctl(&run(&["sysctl", "-a"]));
    assert!(sysctl.contains_key("net.ipv4.tcp_rmem"));
    assert!(sysctl.contains_key("net.ipv4.tcp_congestion_control"));

    let (m, skipped) = tcpwhy_host::text::parse_tcp_metrics(&run(&["ip", "tcp_metrics", "show"]));
    assert!(skipped.is_empty(), "{skipped:?}");
    assert!(m.iter().any(|e| e.addr == lab.addr_b && e.rtt_us.is_some()), "{m:?}");

    let (nstat, _) = tcpwhy_host::text::parse_counters(&run(&["nstat", "-az"]));
    let (netstat, _) = tcpwhy_host::text::parse_counters(&run(&["netstat", "-s"]));
    assert!(nstat["TcpOutSegs"] > 100);
    assert!(netstat["TcpOutSegs"] >= nstat["TcpOutSegs"]);
    assert!(nstat.contains_key("TcpExtTCPLossProbes"));

    // `tcpwhy host --netns` reads the same namespace live.
    let o = Command::new(BIN).args(["host", "--netns", &lab.a, "--rtt", "35ms", "--bandwidth", "3gbit", "--json"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "tcpwhy.host/1");
    assert!(v["max_receive_window"].as_u64().unwrap() > 0);
}

#[test]
fn clear_errors_and_exit_codes() {
    // Unknown namespace: 6 (as root) or 5/6 (not root).
    let o = Command::new(BIN).args(["live", "--netns", "t5-no-such-ns", "--duration", "0.1s"]).output().unwrap();
    let code = o.status.code().unwrap();
    assert!(code == 6 || code == 5, "code {code}: {}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("t5-no-such-ns"));
    // Bad filter: usage error.
    let o = Command::new(BIN).args(["live", "bogus-word"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    // Missing file: 3.
    let o = Command::new(BIN).args(["ss", "/nonexistent/ss.txt"]).output().unwrap();
    assert_eq!(o.status.code(), Some(3));
    // Without root (run as nobody when we are root): tracefs and namespaces refuse clearly.
    if unsafe { libc::geteuid() } == 0 && std::path::Path::new("/usr/bin/setpriv").exists() {
        let lab = Lab::new();
        let nobody = |args: &[&str]| {
            Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", BIN])
                .args(args)
                .output()
                .unwrap()
        };
        let o = nobody(&["trace", "port", "1", "--duration", "0.1s"]);
        assert!(matches!(o.status.code(), Some(5) | Some(6)), "{o:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("root") || e.contains("tracefs"), "{e}");
        let o = nobody(&["live", "--netns", &lab.a, "--duration", "0.1s"]);
        assert_eq!(o.status.code(), Some(5), "{o:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("root"));
        // The current namespace needs no root.
        let o = nobody(&["live", "--duration", "0.2s", "--no-view"]);
        assert_eq!(o.status.code(), Some(0), "{o:?}");
    }
}
