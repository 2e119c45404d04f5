//! `tcpwhy lab ...`: the command-line face of the tcpwhy-lab crate.

use clap::{Args, Subcommand};
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use crate::error::ToExitCode;
use tcpwhy_lab::run::RunOptions;
use tcpwhy_lab::scenario;

/// Exit codes of `tcpwhy lab` (documented in `tcpwhy lab --help`).
pub(crate) use crate::labexit as exit;

impl ToExitCode for tcpwhy_lab::Error {
    fn exit_code(&self) -> u8 {
        use tcpwhy_lab::Error as E;
        match self {
            E::Unreadable { .. } => exit::UNREADABLE,
            e if e.is_invalid_scenario() => exit::INVALID,
            E::Environment(_) => exit::ENVIRONMENT,
            E::Interrupted => exit::INTERRUPTED,
            _ => exit::FAILURE,
        }
    }
}

pub const LAB_AFTER_HELP: &str = "\
The lab reproduces a TCP performance problem with the real Linux stack: two
network namespaces (client, server) joined by tcpwhy's own link emulator over
TUN devices (delay, jitter, loss, reordering, duplication, a bottleneck with a
drop-tail queue, a token-bucket policer), with per-end sysctls, routes and
socket options, and tcpwhy's traffic generators. Each run leaves a capture at
each end, sock_diag samples of both ends, the tcp_probe trace, the sysctls and
truth.json (the kernel's own counters and whether they show the cause).

Examples:
  tcpwhy lab list
  tcpwhy lab show rwnd-rmem > my.toml          # start your own scenario
  sudo tcpwhy lab run rwnd-rmem --out /tmp/rwnd
  sudo tcpwhy lab run rwnd-rmem --set client.tcp_rmem='4096 131072 33554432' --out /tmp/fixed
  sudo tcpwhy lab run my.toml --set link.rtt=80ms --set link.rate=1gbit --out /tmp/x
  sudo tcpwhy lab clean

Exit codes: 0 the run showed its cause; 5 it ran but the kernel's numbers did
not show the cause (see truth.json `expectations`); 2 invalid scenario or
parameter (nothing was created); 3 the scenario file could not be read; 6
cannot run here (needs root, iproute2, tcpdump, /dev/net/tun); 1 a step
failed; 130 interrupted (everything removed).";

#[derive(Subcommand)]
pub enum LabCommand {
    /// List the built-in scenarios with the case and cause each reproduces.
    List,
    /// Print a built-in scenario's TOML (a starting point for your own);
    /// with --set, the scenario as `lab run` would use it.
    Show {
        /// Scenario name (see `tcpwhy lab list`) or a path to a .toml file.
        scenario: String,
        /// Override a parameter as for `lab run` (e.g. --set link.rtt=80ms).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
    },
    /// Run a scenario in fresh namespaces and write captures, samples,
    /// trace, sysctls and truth.json to --out.
    #[command(after_help = LAB_AFTER_HELP)]
    Run(RunArgs),
    /// Draw random scenarios (RTT, rates, buffers, bucket, queue, loss,
    /// reader, application window, congestion control), run each, and
    /// judge the diagnosis of both captures against the kernel's counters.
    #[command(after_help = crate::sweep::SWEEP_AFTER_HELP)]
    Sweep(crate::sweep::SweepArgs),
    /// Remove lab namespaces left behind by runs that no longer exist
    /// (e.g. after `kill -9`).
    Clean {
        /// Also remove the namespaces of runs that are still alive.
        #[arg(long)]
        all: bool,
    },
    /// (internal) Traffic agent run inside a lab namespace.
    #[command(hide = true)]
    Agent(AgentArgs),
}

#[derive(Args)]
pub struct RunArgs {
    /// A built-in scenario name or a path to a .toml scenario file.
    scenario: String,
    /// Override a parameter, e.g. --set link.rtt=80ms, --set
    /// server.tcp_wmem='4096 16384 4194304', --set traffic.duration_s=10,
    /// --set client.sysctl.net.ipv4.tcp_moderate_rcvbuf=0. Repeatable.
    /// Times, rates and sizes take their unit as on every other command
    /// (80ms, 1gbit, 4MiB; a bare 80 is refused for a time or a rate).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Directory for the results (created; existing files are replaced).
    #[arg(long, short)]
    out: PathBuf,
    /// Print truth.json instead of the summary.
    #[arg(long)]
    json: bool,
    /// Print each step.
    #[arg(long, short)]
    verbose: bool,
}

#[derive(Args)]
pub struct AgentArgs {
    #[arg(long)]
    role: String,
    #[arg(long)]
    addr: SocketAddr,
    #[arg(long)]
    spec: String,
}

pub fn main(cmd: LabCommand) -> u8 {
    match cmd {
        LabCommand::List => list(),
        LabCommand::Show { scenario, sets } => show(&scenario, &sets),
        LabCommand::Run(a) => run(a),
        LabCommand::Sweep(a) => crate::sweep::main(a),
        LabCommand::Clean { all } => match tcpwhy_lab::netns::clean(all) {
            Ok(v) => {
                let _ = tcpwhy_kernel::tracefs::remove_stale_instances();
                if v.is_empty() {
                    println!("nothing to clean");
                } else {
                    for n in v {
                        println!("removed namespace {n}");
                    }
                }
                exit::OK
            }
            Err(e) => {
                eprintln!("tcpwhy lab clean: {e}");
                exit::FAILURE
            }
        },
        LabCommand::Agent(a) => agent(a),
    }
}

fn show(name: &str, sets: &[String]) -> u8 {
    let builtin = scenario::BUILTIN.iter().find(|(n, _)| *n == name);
    if let (Some((_, text)), true) = (builtin, sets.is_empty()) {
        print!("{text}");
        return exit::OK;
    }
    match scenario::source(name).and_then(|(origin, text)| scenario::load(&origin, &text, sets)) {
        Ok(sc) => {
            print!("{}", sc.to_toml());
            exit::OK
        }
        Err(e) => {
            eprintln!("tcpwhy lab: {e}");
            e.exit_code()
        }
    }
}

fn list() -> u8 {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{:<22} {:<6} {:<24} TITLE", "SCENARIO", "CASE", "CAUSE");
    for (name, text) in scenario::BUILTIN {
        match scenario::load(name, text, &[]) {
            Ok(s) => {
                // The str, not the Cause: Cause's Display ignores the column width.
                let _ = writeln!(out, "{:<22} {:<6} {:<24} {}", s.name, s.case, s.cause.as_str(), s.title);
            }
            Err(e) => {
                let _ = writeln!(out, "{name:<22} (broken: {e})");
            }
        }
    }
    exit::OK
}

fn run(a: RunArgs) -> u8 {
    let sc = match scenario::source(&a.scenario).and_then(|(origin, text)| scenario::load(&origin, &text, &a.sets)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("tcpwhy lab: {e}");
            return e.exit_code();
        }
    };
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("tcpwhy"));
    let opt = RunOptions { out: a.out.clone(), agent_exe: exe, verbose: a.verbose };
    match tcpwhy_lab::run::run(&sc, &opt) {
        Ok(r) => {
            let t = &r.truth;
            if a.json {
                let _ = writeln!(io::stdout(), "{}", serde_json::to_string_pretty(t).unwrap());
            } else {
                print_summary(t, &r.out);
            }
            if t.ok {
                exit::OK
            } else {
                exit::NOT_SHOWN
            }
        }
        Err(e) => {
            eprintln!("tcpwhy lab: {e}");
            e.exit_code()
        }
    }
}

fn mbit(bps: f64) -> String {
    tcpwhy_core::units::fmt_rate(bps)
}

fn print_summary(t: &tcpwhy_lab::truth::Truth, out: &std::path::Path) {
    use std::fmt::Write as _;
    let mut text = String::new();
    macro_rules! p {
        ($($arg:tt)*) => {
            writeln!(text, $($arg)*).unwrap()
        };
    }
    let m = &t.metrics;
    p!("scenario   {} (case {}): {}", t.scenario, t.case, t.title);
    p!("built to show  {}", t.cause);
    p!("kernel     {}", t.kernel);
    if let Some(g) = t.goodput_bps {
        match t.path_rate_bps {
            Some(r) => p!("goodput    {} of a {} path ({:.0}%)", mbit(g), mbit(r as f64), 100.0 * g / r as f64),
            None => p!("goodput    {}", mbit(g)),
        }
    }
    if let (Some(b), Some(r), Some(s)) = (
        m.get("sender.busy_time_us"),
        m.get("sender.rwnd_limited_share"),
        m.get("sender.sndbuf_limited_share"),
    ) {
        p!(
            "sender     busy {:.2} s: rwnd_limited {:.0}%, sndbuf_limited {:.0}% (kernel chrono)",
            b / 1e6,
            r * 100.0,
            s * 100.0
        );
    }
    if let Some(c) = t.connections.first() {
        p!(
            "           retransmits {}, final cwnd {}, ssthresh {}",
            t.connections.iter().map(|c| c.retransmits).sum::<u32>(),
            c.final_cwnd,
            if c.final_ssthresh >= 0x7fff_ffff { "infinite".to_string() } else { c.final_ssthresh.to_string() }
        );
    }
    if let Some(n) = m.get("requests.count") {
        p!(
            "requests   {} on {} connection(s); median {:.1} ms",
            n,
            m.get("requests.connections").copied().unwrap_or(0.0),
            m.get("requests.median_ms").copied().unwrap_or(0.0)
        );
    }
    for d in ["down", "up"] {
        let g = |k: &str| m.get(&format!("link.{d}.{k}")).copied().unwrap_or(0.0);
        let drops = g("dropped_loss") + g("dropped_policer") + g("dropped_queue");
        if drops > 0.0 || g("max_queue_bytes") > 0.0 {
            p!(
                "link {d:<5} dropped: loss {} policer {} queue {}; max queue {} B; delay error p99 {} us",
                g("dropped_loss"),
                g("dropped_policer"),
                g("dropped_queue"),
                g("max_queue_bytes"),
                g("lateness_p99_us")
            );
        }
    }
    p!("expectations:");
    for c in &t.expectations {
        let range = match (c.min, c.max) {
            (Some(lo), Some(hi)) => format!("in [{lo}, {hi}]"),
            (Some(lo), None) => format!(">= {lo}"),
            (None, Some(hi)) => format!("<= {hi}"),
            _ => String::new(),
        };
        let v = c.value.map(|v| format!("{v:.4}")).unwrap_or_else(|| "missing".into());
        p!("  {} {} = {} ({}) - {}", if c.ok { "ok  " } else { "FAIL" }, c.metric, v, range, c.why);
    }
    for n in &t.notes {
        p!("note: {n}");
    }
    p!("results in {}: {}", out.display(), t.files.values().cloned().collect::<Vec<_>>().join(", "));
    let _ = io::stdout().write_all(text.as_bytes());
}

fn agent(a: AgentArgs) -> u8 {
    let spec = match tcpwhy_traffic::TrafficSpec::from_json(&a.spec) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return e.exit_code();
        }
    };
    let stop = AtomicBool::new(false);
    let r = match a.role.as_str() {
        "server" => tcpwhy_traffic::run_server(
            &spec,
            a.addr,
            |addr| {
                println!("READY {addr}");
                let _ = io::stdout().flush();
            },
            &stop,
        ),
        "client" => tcpwhy_traffic::run_client_with_stop(&spec, a.addr, &stop),
        other => {
            eprintln!("unknown role {other:?}");
            return exit::INVALID;
        }
    };
    match r {
        Ok(rep) => {
            println!("{}", rep.to_json());
            exit::OK
        }
        Err(e) => {
            eprintln!("{e}");
            exit::FAILURE
        }
    }
}
