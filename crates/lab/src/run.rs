//! One lab run: namespaces, link emulator, captures, samplers, traffic,
//! ground truth. Everything created here is owned by a value whose drop
//! removes it, so an error or Ctrl-C at any step leaves nothing behind.

use crate::link::{open_tun_in_netns, DirectionStats, LinkEmulator};
use crate::netns::{self, Namespace};
use crate::scenario::Scenario;
use crate::Error;
use crate::truth;
use serde::Serialize;
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tcpwhy_kernel::sockdiag::{Filter, SockDiag};
use tcpwhy_kernel::TraceEvent;
use tcpwhy_traffic::{Report, TrafficSpec};

/// Port the lab server listens on (inside its own namespace). Unique per
/// run because tracepoints are global: the port tells this run's events from
/// a concurrent run's.
pub fn server_port() -> u16 {
    20_000 + (std::process::id() % 20_000) as u16 * 2
}
const DEV: &str = "tw0";

fn failed(context: &str) -> impl Fn(io::Error) -> Error + '_ {
    move |source| Error::Io { step: context.to_string(), source }
}

pub struct RunOptions {
    /// Output directory (created).
    pub out: PathBuf,
    /// The `tcpwhy` executable, run inside the namespaces as the traffic agent.
    pub agent_exe: PathBuf,
    /// Print each step to stderr.
    pub verbose: bool,
}

/// The traffic spec the agents run: `[traffic]` plus the per-end socket
/// options of `[client]` and `[server]`.
pub fn traffic_spec(sc: &Scenario) -> Result<TrafficSpec, Error> {
    let mut t = sc.traffic.clone();
    for (key, end) in [("client", &sc.client), ("server", &sc.server)] {
        let entry = t.entry(key.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let toml::Value::Table(opts) = entry else {
            return Err(Error::field(format!("traffic.{key}"), "must be a table"));
        };
        // Linux's default, whatever the host (and so a new namespace) uses
        let cc = end.congestion.clone().unwrap_or_else(|| "cubic".into());
        opts.entry("congestion").or_insert_with(|| toml::Value::String(cc));
        if let Some(b) = end.sndbuf {
            opts.entry("sndbuf").or_insert(toml::Value::Integer(b.0 as i64));
        }
        if let Some(b) = end.rcvbuf {
            opts.entry("rcvbuf").or_insert(toml::Value::Integer(b.0 as i64));
        }
        if end.nodelay {
            opts.entry("nodelay").or_insert(toml::Value::Boolean(true));
        }
    }
    let json = serde_json::to_string(&t).map_err(|e| Error::field("traffic", e.to_string()))?;
    // name the offending key (traffic.kind: unknown variant ...)
    let spec: TrafficSpec = serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(&json)).map_err(|e| {
        let inner = e.inner().to_string();
        let inner = inner.split(" at line ").next().unwrap_or(&inner).to_string();
        Error::field(format!("traffic.{}", e.path()), inner)
    })?;
    tcpwhy_traffic::validate(&spec)?;
    Ok(spec)
}

struct Addrs {
    client: IpAddr,
    server: IpAddr,
}

fn addrs(sc: &Scenario) -> Addrs {
    if sc.link.ipv6 {
        Addrs { client: "fd00:200::1".parse().unwrap(), server: "fd00:200::2".parse().unwrap() }
    } else {
        Addrs { client: "10.200.0.1".parse().unwrap(), server: "10.200.0.2".parse().unwrap() }
    }
}

fn log(opt: &RunOptions, msg: &str) {
    if opt.verbose {
        eprintln!("lab: {msg}");
    }
}

fn check_environment() -> Result<(), Error> {
    if unsafe { libc::geteuid() } != 0 {
        return Err(Error::Environment("the lab creates network namespaces and TUN devices: run it as root".into()));
    }
    for (tool, pkg) in [("ip", "iproute2"), ("tcpdump", "tcpdump")] {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).chain(["/usr/sbin".into(), "/sbin".into()]).any(|d| d.join(tool).exists()))
            .unwrap_or(false);
        if !found {
            return Err(Error::Environment(format!("`{tool}` not found (Debian package {pkg})")));
        }
    }
    if !Path::new("/dev/net/tun").exists() {
        return Err(Error::Environment("/dev/net/tun is missing (TUN support)".into()));
    }
    Ok(())
}

/// A child process killed (and reaped) on drop.
struct Proc {
    child: Option<Child>,
    what: String,
}

impl Proc {
    fn spawn(mut cmd: Command, what: &str) -> Result<Proc, Error> {
        let child = cmd.spawn().map_err(failed(&format!("start {what}")))?;
        Ok(Proc { child: Some(child), what: what.to_string() })
    }
    fn child(&mut self) -> &mut Child {
        self.child.as_mut().unwrap()
    }
    /// Send SIGINT and wait up to `grace` for exit.
    fn interrupt(&mut self, grace: Duration) {
        if let Some(c) = self.child.as_mut() {
            unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
            let end = Instant::now() + grace;
            while Instant::now() < end {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    /// Wait for exit, polling for interruption and a deadline.
    fn wait(&mut self, deadline: Instant) -> Result<std::process::ExitStatus, Error> {
        loop {
            if netns::interrupted() {
                return Err(Error::Interrupted);
            }
            if let Some(st) = self.child().try_wait().map_err(failed(&self.what))? {
                return Ok(st);
            }
            if Instant::now() > deadline {
                return Err(Error::Failed(format!("{} did not finish in time", self.what)));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// tcpdump on the lab device of one namespace.
fn start_capture(ns: &Namespace, file: &Path, snaplen: u32) -> Result<(Proc, JoinHandle<String>), Error> {
    let mut cmd = ns.command("tcpdump");
    cmd.args(["-i", DEV, "-n", "-q", "--immediate-mode", "-B", "16384", "-s"])
        .arg(snaplen.to_string())
        .arg("-w")
        .arg(file)
        .arg("tcp")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut p = Proc::spawn(cmd, "tcpdump")?;
    let stderr = p.child().stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        let mut all = String::new();
        let mut told = false;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if !told && line.contains("listening on") {
                let _ = tx.send(());
                told = true;
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(()) => Ok((p, h)),
        Err(_) => {
            drop(p);
            let msg = h.join().unwrap_or_default();
            Err(Error::Failed(format!("tcpdump did not start: {}", msg.trim())))
        }
    }
}

fn stop_capture(mut p: Proc, h: JoinHandle<String>) -> String {
    p.interrupt(Duration::from_secs(5));
    drop(p);
    h.join().unwrap_or_default()
}

/// Samples the lab sockets of one namespace via sock_diag until stopped.
fn start_sampler(ns: &str, port: u16, interval: Duration, file: PathBuf, stop: Arc<AtomicBool>) -> Result<JoinHandle<io::Result<u64>>, Error> {
    let mut diag = SockDiag::in_netns(ns).map_err(failed("sock_diag"))?;
    Ok(std::thread::spawn(move || -> io::Result<u64> {
        let mut w = BufWriter::new(File::create(&file)?);
        let filter = Filter::port(port);
        let mut n = 0u64;
        let mut next = Instant::now();
        let mut buf = Vec::new();
        loop {
            let last = stop.load(Ordering::Relaxed);
            buf.clear();
            diag.dump_tcp_into(&filter, &mut buf)?;
            for s in &buf {
                serde_json::to_writer(&mut w, s)?;
                w.write_all(b"\n")?;
                n += 1;
            }
            if last {
                break;
            }
            next += interval;
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            } else {
                next = now;
            }
        }
        w.flush()?;
        Ok(n)
    }))
}

fn agent_command(ns: &Namespace, opt: &RunOptions, role: &str, addr: SocketAddr, spec_json: &str) -> Command {
    let mut c = ns.command(opt.agent_exe.to_str().unwrap_or("tcpwhy"));
    c.args(["lab", "agent", "--role", role, "--addr"])
        .arg(addr.to_string())
        .arg("--spec")
        .arg(spec_json)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Run server + client agents to completion; returns their reports.
fn run_traffic(
    opt: &RunOptions,
    client: &Namespace,
    server: &Namespace,
    server_addr: SocketAddr,
    spec: &TrafficSpec,
    on_ready: impl FnOnce() -> Result<(), Error>,
) -> Result<(Report, Report), Error> {
    let spec_json = serde_json::to_string(spec).unwrap();
    let mut srv = Proc::spawn(agent_command(server, opt, "server", server_addr, &spec_json), "server agent")?;
    let srv_out = srv.child().stdout.take().unwrap();
    let srv_err = srv.child().stderr.take().unwrap();
    let srv_err_h = std::thread::spawn(move || io::read_to_string(srv_err).unwrap_or_default());
    let mut srv_lines = BufReader::new(srv_out);
    let mut first = String::new();
    srv_lines.read_line(&mut first).map_err(failed("server agent"))?;
    if !first.starts_with("READY") {
        drop(srv);
        let err = srv_err_h.join().unwrap_or_default();
        return Err(Error::Failed(format!("server agent did not start: {}", err.trim())));
    }
    on_ready()?;
    let mut cli = Proc::spawn(agent_command(client, opt, "client", server_addr, &spec_json), "client agent")?;
    let cli_out = cli.child().stdout.take().unwrap();
    let cli_err = cli.child().stderr.take().unwrap();
    let cli_out_h = std::thread::spawn(move || io::read_to_string(cli_out).unwrap_or_default());
    let cli_err_h = std::thread::spawn(move || io::read_to_string(cli_err).unwrap_or_default());
    let srv_out_h = std::thread::spawn(move || io::read_to_string(srv_lines).unwrap_or_default());
    let deadline = Instant::now() + Duration::from_secs_f64(spec.timeout_s + 15.0);
    let cst = cli.wait(deadline)?;
    let sst = srv.wait(deadline)?;
    let (cout, cerr) = (cli_out_h.join().unwrap_or_default(), cli_err_h.join().unwrap_or_default());
    let (sout, serr) = (srv_out_h.join().unwrap_or_default(), srv_err_h.join().unwrap_or_default());
    if !cst.success() {
        return Err(Error::Failed(format!("client agent: {}", cerr.trim())));
    }
    if !sst.success() {
        return Err(Error::Failed(format!("server agent: {}", serr.trim())));
    }
    let parse = |s: &str, who: &str| -> Result<Report, Error> {
        serde_json::from_str(s).map_err(|e| Error::Failed(format!("{who} agent report: {e}")))
    };
    Ok((parse(&cout, "client")?, parse(&sout, "server")?))
}

fn sysctl_path(key: &str) -> PathBuf {
    PathBuf::from("/proc/sys").join(key.replace('.', "/"))
}

fn apply_sysctls(ns: &Namespace, end: &str, list: &[(String, String)]) -> Result<(), Error> {
    let list = list.to_vec();
    tcpwhy_kernel::netns::run_in_netns(ns.name(), move || -> io::Result<()> {
        for (k, v) in &list {
            fs::write(sysctl_path(k), v).map_err(|e| {
                io::Error::new(e.kind(), format!("sysctl {k} = {v:?}: {e}"))
            })?;
        }
        Ok(())
    })
    .map_err(|source| Error::Refused { what: end.to_string(), source })
}

/// Every net.ipv4.tcp_* and net.core.*mem* setting of a namespace.
fn snapshot_sysctls(ns: &Namespace) -> io::Result<std::collections::BTreeMap<String, String>> {
    tcpwhy_kernel::netns::run_in_netns(ns.name(), || {
        let mut m = std::collections::BTreeMap::new();
        let mut add = |dir: &str, pred: &dyn Fn(&str) -> bool| -> io::Result<()> {
            for e in fs::read_dir(Path::new("/proc/sys").join(dir))? {
                let e = e?;
                let name = e.file_name().to_string_lossy().into_owned();
                if pred(&name) {
                    if let Ok(v) = fs::read_to_string(e.path()) {
                        let key = format!("{}.{name}", dir.replace('/', "."));
                        m.insert(key, v.split_whitespace().collect::<Vec<_>>().join(" "));
                    }
                }
            }
            Ok(())
        };
        add("net/ipv4", &|n| n.starts_with("tcp_"))?;
        add("net/core", &|n| n.contains("mem") || n == "default_qdisc")?;
        if let Ok(v) = fs::read_to_string("/proc/sys/kernel/osrelease") {
            m.insert("kernel.osrelease".into(), v.trim().to_string());
        }
        Ok(m)
    })
}

/// What a finished run leaves behind (also written as truth.json).
#[derive(Serialize)]
pub struct RunResult {
    pub truth: truth::Truth,
    pub out: PathBuf,
}

/// The two namespaces and their ends of the lab link: a TUN device in each, addressed and up.
fn create_link(sc: &Scenario, a: &Addrs) -> Result<(Namespace, Namespace, OwnedFd, OwnedFd), Error> {
    let client = Namespace::create("client").map_err(failed("create namespace"))?;
    let server = Namespace::create("server").map_err(failed("create namespace"))?;
    let tun_c = open_tun_in_netns(&client.path(), DEV, sc.link.offload).map_err(failed("TUN"))?;
    let tun_s = open_tun_in_netns(&server.path(), DEV, sc.link.offload).map_err(failed("TUN"))?;
    let mtu = sc.link.mtu.to_string();
    if !sc.link.ipv6 {
        // no IPv6 chatter (router solicitations...) on an IPv4 lab link
        for ns in [&client, &server] {
            apply_sysctls(ns, "link", &[(format!("net.ipv6.conf.{DEV}.disable_ipv6"), "1".into())])?;
        }
    }
    for (ns, me, peer) in [(&client, a.client, a.server), (&server, a.server, a.client)] {
        let (fam, extra): (&str, &[&str]) = if sc.link.ipv6 { ("-6", &["nodad"]) } else { ("-4", &[]) };
        let (me_s, peer_s) = (me.to_string(), peer.to_string());
        let mut args = vec![fam, "addr", "add", me_s.as_str(), "peer", peer_s.as_str(), "dev", DEV];
        args.extend_from_slice(extra);
        ns.ip(&args).map_err(failed("address"))?;
        ns.ip(&["link", "set", DEV, "up", "mtu", &mtu, "txqueuelen", "10000"]).map_err(failed("link"))?;
    }
    Ok((client, server, tun_c, tun_s))
}

/// Each end's sysctls, and its route to the peer with the end's initcwnd, initrwnd, advmss and ssthresh.
fn apply_host_settings(sc: &Scenario, client: &Namespace, server: &Namespace, a: &Addrs) -> Result<(), Error> {
    for (ns, end, spec_end, peer) in [(client, "client", &sc.client, a.server), (server, "server", &sc.server, a.client)] {
        apply_sysctls(ns, end, &spec_end.sysctls())?;
        let mut route: Vec<String> = vec!["route".into(), "replace".into(), peer.to_string(), "dev".into(), DEV.into()];
        if sc.link.ipv6 {
            route.insert(0, "-6".into());
        }
        let before = route.len();
        for (k, v) in [("initcwnd", spec_end.initcwnd), ("initrwnd", spec_end.initrwnd), ("advmss", spec_end.advmss)] {
            if let Some(v) = v {
                route.push(k.into());
                route.push(v.to_string());
            }
        }
        if let Some(s) = spec_end.tcp_metrics.as_ref().and_then(|m| m.ssthresh) {
            route.extend(["ssthresh".into(), "lock".into(), s.to_string()]);
        }
        // always: IPv6 does not add a route to a point-to-point peer itself
        let _ = before;
        let r: Vec<&str> = route.iter().map(|s| s.as_str()).collect();
        ns.ip(&r).map_err(|source| Error::Refused { what: format!("{end} route"), source })?;
    }
    Ok(())
}

/// Pre-seed tcp_metrics with a short connection to `addr` (another port), if either end seeds it.
fn prime_tcp_metrics(opt: &RunOptions, sc: &Scenario, client: &Namespace, server: &Namespace, addr: SocketAddr) -> Result<(), Error> {
    if sc.client.tcp_metrics.is_some() || sc.server.tcp_metrics.is_some() {
        log(opt, "priming tcp_metrics");
        let mut prime = TrafficSpec::new(tcpwhy_traffic::Kind::Bulk);
        prime.bytes = Some(1000);
        prime.timeout_s = 30.0;
        run_traffic(opt, client, server, addr, &prime, || Ok(()))?;
        // the entry is written when the socket is destroyed; give it a moment
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

/// What the measured traffic left: the agents' reports and what the instruments recorded.
struct Measured {
    client_report: Report,
    server_report: Report,
    sample_counts: Vec<u64>,
    trace_events: Option<Vec<TraceEvent>>,
    capture_notes: [String; 2],
    link_stats: [DirectionStats; 2],
}

/// Run the traffic under captures, tcp_probe trace and sock_diag samplers, then stop them and the emulator.
fn measure(
    opt: &RunOptions,
    sc: &Scenario,
    client: &Namespace,
    server: &Namespace,
    emu: LinkEmulator,
    server_addr: SocketAddr,
    spec: &TrafficSpec,
) -> Result<Measured, Error> {
    let port = server_addr.port();
    log(opt, "starting captures");
    let (cap_c, cap_c_h) = start_capture(client, &opt.out.join("client.pcap"), sc.capture.snaplen)?;
    let (cap_s, cap_s_h) = start_capture(server, &opt.out.join("server.pcap"), sc.capture.snaplen)?;

    let tracer = if sc.capture.trace {
        match crate::trace::Tracer::start(port, &opt.out.join("trace.jsonl")) {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("lab: warning: no tcp_probe trace: {e}");
                None
            }
        }
    } else {
        None
    };

    let stop = Arc::new(AtomicBool::new(false));
    let interval = sc.capture.sample_interval.std();
    let mut samplers = Vec::new();
    log(opt, "running traffic");
    let traffic = run_traffic(opt, client, server, server_addr, spec, || {
        for (ns, file) in [(client, "client.samples.jsonl"), (server, "server.samples.jsonl")] {
            samplers.push(start_sampler(ns.name(), port, interval, opt.out.join(file), stop.clone())?);
        }
        Ok(())
    });
    // let the last ACKs and FINs reach the captures
    std::thread::sleep(Duration::from_micros(sc.link.rtt.as_micros() * 2 + 50_000));
    stop.store(true, Ordering::Relaxed);
    let mut sample_counts = Vec::new();
    for s in samplers {
        sample_counts.push(s.join().map_err(|_| Error::Failed("sampler panicked".into()))?.map_err(failed("sock_diag sampler"))?);
    }
    let trace_events = tracer.map(|t| t.stop()).transpose().map_err(failed("trace"))?;
    let cap_c_msg = stop_capture(cap_c, cap_c_h);
    let cap_s_msg = stop_capture(cap_s, cap_s_h);
    let link_stats: [DirectionStats; 2] = emu.stop();
    let (client_report, server_report) = traffic?;
    Ok(Measured {
        client_report,
        server_report,
        sample_counts,
        trace_events,
        capture_notes: [cap_c_msg, cap_s_msg],
        link_stats,
    })
}

/// Write `data` as `name` in the output directory.
fn write_file(opt: &RunOptions, name: &str, data: &str) -> Result<(), Error> {
    fs::write(opt.out.join(name), data).map_err(failed(&format!("write {name}")))
}

/// Save the scenario, the reports, both ends' sysctls and tcp_metrics and the link counters; returns the client's sysctls.
fn save_run_files(
    opt: &RunOptions,
    sc: &Scenario,
    client: &Namespace,
    server: &Namespace,
    measured: &Measured,
) -> Result<std::collections::BTreeMap<String, String>, Error> {
    let sys_c = snapshot_sysctls(client).map_err(failed("sysctl snapshot"))?;
    let sys_s = snapshot_sysctls(server).map_err(failed("sysctl snapshot"))?;
    let metrics_c = client.ip(&["tcp_metrics", "show"]).unwrap_or_default();
    let metrics_s = server.ip(&["tcp_metrics", "show"]).unwrap_or_default();
    let link_stats = &measured.link_stats;
    write_file(opt, "scenario.toml", &toml::to_string(sc).unwrap_or_default())?;
    write_file(opt, "client.report.json", &measured.client_report.to_json())?;
    write_file(opt, "server.report.json", &measured.server_report.to_json())?;
    write_file(opt, "client.sysctl.json", &serde_json::to_string_pretty(&sys_c).unwrap())?;
    write_file(opt, "server.sysctl.json", &serde_json::to_string_pretty(&sys_s).unwrap())?;
    write_file(opt, "client.tcp_metrics.txt", &metrics_c)?;
    write_file(opt, "server.tcp_metrics.txt", &metrics_s)?;
    write_file(opt, "link.json", &serde_json::to_string_pretty(&serde_json::json!({"up": link_stats[0], "down": link_stats[1]})).unwrap())?;
    Ok(sys_c)
}

/// Run `sc`, leaving everything in `opt.out`.
pub fn run(sc: &Scenario, opt: &RunOptions) -> Result<RunResult, Error> {
    // everything that can be checked is checked before anything is created
    sc.validate()?;
    let spec = traffic_spec(sc)?;
    check_environment()?;
    netns::install_signal_handlers();
    fs::create_dir_all(&opt.out).map_err(failed(&format!("create {}", opt.out.display())))?;
    let started = Instant::now();

    log(opt, "creating namespaces");
    let a = addrs(sc);
    let (client, server, tun_c, tun_s) = create_link(sc, &a)?;
    if netns::interrupted() {
        return Err(Error::Interrupted);
    }

    log(opt, "applying host settings");
    apply_host_settings(sc, &client, &server, &a)?;

    log(opt, "starting the link emulator");
    let seed = 0x7c9_u64 ^ started.elapsed().as_nanos() as u64;
    let emu = LinkEmulator::start(tun_c, tun_s, sc.direction(false), sc.direction(true), seed).map_err(failed("link emulator"))?;
    let port = server_port();
    let server_addr = SocketAddr::new(a.server, port);

    prime_tcp_metrics(opt, sc, &client, &server, SocketAddr::new(a.server, port + 1))?;
    let steal0 = steal_ms();
    let measured = measure(opt, sc, &client, &server, emu, server_addr, &spec)?;
    let steal = steal0.zip(steal_ms()).map(|(a, b)| b - a);

    log(opt, "collecting ground truth");
    let sys_c = save_run_files(opt, sc, &client, &server, &measured)?;
    let t = truth::build(truth::Inputs {
        scenario: sc,
        spec: &spec,
        client: &measured.client_report,
        server: &measured.server_report,
        link_up: &measured.link_stats[0],
        link_down: &measured.link_stats[1],
        out: &opt.out,
        trace_events: measured.trace_events,
        capture_notes: measured.capture_notes,
        sample_counts: measured.sample_counts,
        kernel: sys_c.get("kernel.osrelease").cloned().unwrap_or_default(),
        elapsed_s: started.elapsed().as_secs_f64(),
        server_port: port,
        steal_ms: steal,
    })
    .map_err(failed("ground truth"))?;
    write_file(opt, "truth.json", &serde_json::to_string_pretty(&t).unwrap())?;
    drop(client);
    drop(server);
    Ok(RunResult { truth: t, out: opt.out.clone() })
}

/// The CPU time the hypervisor gave to other guests while this one wanted
/// it ("steal", the eighth value of /proc/stat's `cpu` line, in USER_HZ
/// ticks: proc(5)), all CPUs together, in milliseconds. None where
/// /proc/stat cannot be read.
pub fn steal_ms() -> Option<f64> {
    let stat = fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: f64 = line.split_whitespace().nth(8)?.parse().ok()?;
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| ticks * 1000.0 / hz as f64)
}
