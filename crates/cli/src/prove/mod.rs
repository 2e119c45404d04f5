//! `tcpwhy prove`: rebuild a captured connection in the lab from its
//! diagnosis, check that the lab behaves like the capture, then run each
//! proposed fix and set the measured gain beside the predicted one.

mod derive;
mod html;
mod replay;

use tcpwhy_core::units::calc;
use crate::labexit as exit;
use crate::report_cmd::{load, Loaded};
use clap::{Args, ValueEnum};
use derive::{Measure, Plan};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use tcpwhy_core::units::fmt_rate;
use tcpwhy_core::{Cause, Limit};
use tcpwhy_diagnose::model::DirectionDiagnosis;
use tcpwhy_diagnose::{KernelRule, Options};
use tcpwhy_lab::run::RunOptions;
use tcpwhy_lab::scenario::Scenario;

pub const SCHEMA: &str = "tcpwhy.prove/1";

/// The lab's goodput (or exchange time) must be within 20% of the capture's
/// for the rebuild to count as a reproduction (the bound: the lab
/// is a model of the path, not a copy of it).
pub const REPRO_MEASURE_TOLERANCE: f64 = 0.20;
/// Each limit's share of the time may differ by at most 15 points.
pub const REPRO_LIMIT_POINTS: f64 = 0.15;
/// A prediction holds when the gain measured in the lab is within 25% of
/// the predicted gain.
pub const PREDICTION_TOLERANCE: f64 = 0.25;

pub const PROVE_AFTER_HELP: &str = "\
tcpwhy prove rebuilds one connection of a capture in the lab (root): the RTT,
the path rate and its queue, a policer's rate and burst, random loss, window
scaling per side, the receive and send buffers that give the observed
windows (through the kernel's rule), the MSS and the traffic, as a scenario
in DIR/scenario.toml. It runs that scenario and checks that the lab behaves
like the capture: goodput within 20%, the same primary cause, each limit's
share of the time within 15 points (on a random path, as one of its runs).
Then it runs the scenario once per
proposed fix (DIR/fix-*.toml) and shows the gain it measured beside the
gain the diagnosis predicted. A fix host tuning cannot make (a policer, a
lossy link) is shown as such, and its host-side alternative (pacing, BBR)
is measured. Each value of the rebuild is marked seen (the capture showed
it), given (--bandwidth) or assumed. When the capture never showed the
path full, the path rate is assumed and a fix's prediction is a range: the
fix then runs twice, at that rate and on a link as fast as the fix's own
ceiling (DIR/fix-*-ceiling.toml), and the text says how much the unseen
path decides the gain. Every scenario can be edited and rerun with
`tcpwhy lab run`.

Results: DIR/prove.json (schema tcpwhy.prove/1, docs/prove.md),
DIR/prove.html (the capture's and the lab's time-sequence graphs side by
side), and one lab run per directory (captured/, fix-*/, fix-*-ceiling/).

Examples:
  sudo tcpwhy prove slow.pcap --out /tmp/prove
  sudo tcpwhy prove slow.pcap --conn 3 --direction b --out /tmp/prove --json
  sudo tcpwhy prove slow.pcap --out /tmp/p --no-fixes      # only check the rebuild
  sudo tcpwhy prove slow.pcap --out /tmp/p --fix raise_tcp_rmem   # and run one fix

Exit codes: 0 the lab reproduced the capture and every prediction held;
5 it ran, but the lab did not reproduce the capture, a prediction missed,
or the diagnosis is undetermined (see the text for what did not match);
2 bad arguments or nothing to rebuild (no such connection, too little
data, no RTT); 3 the capture cannot be read; 6 cannot run the lab here
(needs root, iproute2, tcpdump, /dev/net/tun); 1 a lab step failed; 130
interrupted (everything removed).";

#[derive(Clone, Copy, ValueEnum)]
pub enum Side {
    A,
    B,
}

#[derive(Args)]
pub struct ProveArgs {
    /// Capture file (pcap, pcapng; .gz/.xz/.zst).
    capture: PathBuf,
    /// Connection number (as in `tcpwhy stats`); default: the connection
    /// that carried the most data.
    #[arg(long, value_name = "N")]
    conn: Option<u64>,
    /// The data direction: a (from the connection's first endpoint) or b;
    /// default: the one that carried more data.
    #[arg(long, value_enum)]
    direction: Option<Side>,
    /// Directory for the scenarios, the lab runs and the results (created).
    #[arg(long, short)]
    out: PathBuf,
    /// Print JSON (schema tcpwhy.prove/1) instead of the text.
    #[arg(long)]
    json: bool,
    /// Only rebuild and check the reproduction; run no fix.
    #[arg(long)]
    no_fixes: bool,
    /// Run only this fix (its kind as the text lists it, e.g.
    /// raise_tcp_rmem or pace_bursts+bbr); repeat for several. The others
    /// are listed as skipped.
    #[arg(long = "fix", value_name = "KIND", conflicts_with = "no_fixes")]
    only_fixes: Vec<String>,
    /// Path bandwidth you know (e.g. 200mbit), for the diagnosis.
    #[arg(long, value_parser = crate::quantity::bits_per_sec)]
    bandwidth: Option<f64>,
    /// A capture of the same path at its other end: the rate a queue
    /// between the two points drained at (or, where CAPTURE did not show
    /// the path's capacity, the capacity the sender's capture saw) sets the
    /// lab link's rate and the what-if it tests (docs/pair.md).
    #[arg(long, value_name = "OTHER")]
    pair: Option<PathBuf>,
    /// Kernel of the receiver, for the window rule (e.g. 5.10, 6.8).
    #[arg(long)]
    kernel: Option<String>,
    /// Print each lab step.
    #[arg(long, short)]
    verbose: bool,
}

#[derive(Serialize, Default, Clone)]
struct LabView {
    measure: Option<f64>,
    primary: Option<Cause>,
    limits: BTreeMap<Limit, f64>,
    /// The receiver's largest advertised window, when a window limits.
    window_bytes: Option<f64>,
}

#[derive(Serialize)]
struct Reproduction {
    ok: bool,
    run_dir: PathBuf,
    capture: LabView,
    lab: LabView,
    /// lab / capture of the measure.
    ratio: Option<f64>,
    measure_ok: bool,
    primary_ok: bool,
    /// The largest difference between a limit's share in the capture and in the lab.
    limits_max_diff: Option<f64>,
    limits_ok: bool,
    /// What did not match, in words.
    mismatches: Vec<String>,
    /// The lab's measure of each run: STOCHASTIC_RUNS runs when the path
    /// has random loss or one run missed (MISS_DRAWS), the median one is
    /// compared.
    runs: Vec<Option<f64>>,
    /// How late the emulator delivered packets (p99, µs): above 4 ms the
    /// machine perturbed the run (LAB_MAX_DELAY_ERROR_US).
    delay_error_p99_us: f64,
    /// The CPU time the hypervisor took during that run (ms, /proc/stat's
    /// steal), when the machine tells.
    steal_ms: Option<f64>,
}

#[derive(Serialize)]
struct FixResult {
    kind: String,
    change: String,
    /// false: a change to the path that host tuning cannot make.
    host: bool,
    scenario_file: PathBuf,
    run_dir: PathBuf,
    predicted: Option<f64>,
    predicted_gain: Option<f64>,
    measured: Option<f64>,
    measured_gain: Option<f64>,
    /// measured_gain / predicted_gain - 1; on a random path (several
    /// runs), measured / predicted - 1 of the value after the fix.
    prediction_error: Option<f64>,
    /// The prediction held (within 25%); null without a prediction.
    ok: Option<bool>,
    primary_after: Option<Cause>,
    /// As for the reproduction: the emulator's delay error p99 (µs) and the
    /// hypervisor's steal (ms).
    delay_error_p99_us: f64,
    steal_ms: Option<f64>,
    /// The emulator fell behind even on a rerun: the measure is shown but
    /// not judged.
    perturbed: bool,
    /// The measure of each run (several when the path has random loss).
    runs: Vec<Option<f64>>,
    error: Option<String>,
    /// The same fix on a path as fast as its ceiling, when the capture
    /// never showed the path's capacity and the prediction is a range.
    at_ceiling: Option<CeilingResult>,
}

/// A fix run again with the link at the fix's ceiling (derive::Ceiling).
#[derive(Serialize)]
struct CeilingResult {
    /// What the run raised: `link.rate`, or a policer's rate whose rate the
    /// losses left open (`link.down.policer.rate`, `link.up.policer.rate`).
    parameter: &'static str,
    /// The link (or policer) rate of this run (bit/s, headers included).
    link_rate_bps: f64,
    /// The rebuild's link rate: the path rate the capture showed.
    rebuild_link_rate_bps: f64,
    scenario_file: PathBuf,
    run_dir: PathBuf,
    /// The diagnosis's range for the lab's transfer (low) up to the fix's
    /// steady ceiling (high), and the point prediction for this run.
    predicted_low: f64,
    predicted_high: f64,
    predicted: f64,
    measured: Option<f64>,
    /// measured here over measured at the path rate the capture showed:
    /// what a faster path adds to the fix.
    more_than_at_estimate: Option<f64>,
    /// Within 25% of `predicted`, or inside [predicted_low, predicted_high].
    ok: Option<bool>,
    perturbed: bool,
    delay_error_p99_us: f64,
    runs: Vec<Option<f64>>,
    error: Option<String>,
}

#[derive(Serialize)]
struct Report {
    schema: &'static str,
    capture: PathBuf,
    connection: u64,
    direction: &'static str,
    sender: String,
    receiver: String,
    primary: Cause,
    confidence: tcpwhy_core::Confidence,
    measure: Measure,
    scenario_file: PathBuf,
    taken: Vec<derive::Taken>,
    reproduction: Reproduction,
    fixes: Vec<FixResult>,
    skipped: Vec<derive::Skipped>,
    /// "proven", "reproduced" (no fix to prove or --no-fixes),
    /// "prediction_missed", "not_reproduced", "undetermined" or
    /// "lab_perturbed" (the machine disturbed the emulator even on a rerun).
    verdict: &'static str,
    ok: bool,
    /// What the diagnosis's path rate rests on (`path_capacity`): where
    /// only a lower bound, the rebuild's link runs at that bound, and a fix
    /// whose prediction is a range is proven at its low end only.
    path_capacity: &'static str,
    /// The fixes whose prediction the unseen capacity would change, with
    /// their ceilings (bit/s).
    unproven_ceilings: Vec<(String, f64)>,
}

/// The fixes of `d` whose prediction is a range (the capture showed only a
/// lower bound of the path), with the top of the range, that were not run
/// at that ceiling.
fn unproven_ceilings(d: &tcpwhy_diagnose::DirectionDiagnosis, fixes: &[FixResult]) -> Vec<(String, f64)> {
    // a fix run as `<kind>+<how>` (pace_bursts+bbr) tests `<kind>`'s range
    let tested = |k: &str| {
        fixes.iter().any(|f| derive::fix_kind(&f.kind) == k && f.at_ceiling.as_ref().is_some_and(|c| c.ok.is_some()))
    };
    d.what_if
        .iter()
        .filter(|w| !tested(w.fix))
        .filter_map(|w| w.steady_range().map(|(_, hi)| (w.fix.to_string(), hi)))
        .collect()
}

/// `--pair OTHER`: the capacities the pair measures that `cap` did not
/// show, carried to its diagnoses (docs/pair.md); false when OTHER cannot
/// be read.
fn carry_from_pair(capture: &Path, other: &Path, cap: &mut Loaded, opts: &Options) -> bool {
    let Some(mut oc) = load(other, false, true, false, opts) else { return false };
    match crate::pair::pair_and_carry([capture, other], [&cap.analysis, &oc.analysis], [&mut cap.diagnoses, &mut oc.diagnoses]) {
        Ok(p) => {
            for m in &p.messages {
                eprintln!("tcpwhy prove: --pair: {m}");
            }
        }
        Err(e) => eprintln!("tcpwhy prove: --pair: {e}"),
    }
    true
}

/// `--kernel`'s window rule; None (said on stderr) for a version that is not one.
fn kernel_rule(a: &ProveArgs) -> Option<KernelRule> {
    let Some(v) = &a.kernel else { return Some(KernelRule::default()) };
    let k = KernelRule::for_version(v, None);
    if k.is_none() {
        eprintln!("tcpwhy prove: --kernel '{v}' is not a version like 5.10 or 6.8");
    }
    k
}

pub fn run(a: &ProveArgs) -> u8 {
    let Some(kernel) = kernel_rule(a) else { return exit::INVALID };
    let opts = Options { kernel, bandwidth_bps: a.bandwidth, rtt_ms: None };
    let Some(mut cap) = load(&a.capture, false, true, false, &opts) else { return exit::UNREADABLE };
    if a.pair.as_ref().is_some_and(|other| !carry_from_pair(&a.capture, other, &mut cap, &opts)) {
        return exit::UNREADABLE;
    }
    let (conn_no, from) = match pick(&cap, a.conn, a.direction) {
        Ok(x) => x,
        Err(msg) => {
            eprintln!("tcpwhy prove: {}: {msg}", a.capture.display());
            return exit::INVALID;
        }
    };
    let cd = cap.diagnoses.iter().find(|c| c.id.number == conn_no).expect("picked from the diagnoses");
    let d = cd.directions.iter().find(|x| x.from == from).expect("picked from the directions");
    let cs = cap.analysis.connections.iter().find(|c| c.id == conn_no).expect("every diagnosis has its connection");
    let group = shared_path(&cap, d);
    let mut plan = match derive::plan(cs, cd, d, Some(&cap.latency), group.as_ref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("tcpwhy prove: {}: connection {conn_no}: {}", a.capture.display(), e.0);
            return exit::INVALID;
        }
    };
    if let Err(msg) = keep_asked_fixes(&mut plan, &a.only_fixes) {
        eprintln!("tcpwhy prove: {}: connection {conn_no}: {msg}", a.capture.display());
        return exit::INVALID;
    }
    if let Err(e) = fs::create_dir_all(&a.out) {
        eprintln!("tcpwhy prove: cannot create {}: {e}", a.out.display());
        return exit::FAILURE;
    }
    let header = header_lines(a, conn_no, d, &plan);
    let scenario_file = a.out.join("scenario.toml");
    if let Err(e) = fs::write(&scenario_file, derive::annotated(&plan.scenario, &header)) {
        eprintln!("tcpwhy prove: cannot write {}: {e}", scenario_file.display());
        return exit::FAILURE;
    }
    let captured_view = LabView {
        measure: Some(plan.captured),
        primary: Some(d.primary),
        limits: d.limits.clone(),
        window_bytes: window_of(d),
    };
    // the rebuild as captured
    let captured_dir = a.out.join("captured");
    let mut m = match measure_runs(&plan.scenario, &captured_dir, &plan, &opts, a.verbose, None) {
        Ok(m) => m,
        Err(code) => return code,
    };
    let mut reproduction = compare(captured_view.clone(), m.view.clone(), m.dir.clone(), plan.measure, &m.runs, &m.others);
    if !reproduction.ok && m.runs.len() < MISS_DRAWS && m.delay_error_us <= LAB_MAX_DELAY_ERROR_US {
        eprintln!(
            "tcpwhy prove: the rebuild missed the capture in its one run; running it until it has {MISS_DRAWS} runs, to judge the capture against their spread"
        );
        m = match measure_runs(&plan.scenario, &captured_dir, &plan, &opts, a.verbose, Some(m)) {
            Ok(m) => m,
            Err(code) => return code,
        };
        reproduction = compare(captured_view, m.view.clone(), m.dir.clone(), plan.measure, &m.runs, &m.others);
    }
    let delay_error_us = m.delay_error_us;
    reproduction.delay_error_p99_us = delay_error_us;
    reproduction.steal_ms = m.steal_ms;
    if delay_error_us > LAB_MAX_DELAY_ERROR_US {
        reproduction.mismatches.push(perturbed_text(delay_error_us, m.steal_ms));
    }
    // each fix
    let mut fixes = Vec::new();
    if !a.no_fixes {
        for f in &plan.fixes {
            match run_fix(a, f, &plan, &reproduction, &header, &opts) {
                Ok(r) => fixes.push(r),
                Err(code) => return code,
            }
        }
    }
    let (verdict, ok) = verdict(d, &reproduction, &fixes, a.no_fixes || plan.fixes.is_empty());
    let unproven_ceilings = unproven_ceilings(d, &fixes);
    let report = Report {
        schema: SCHEMA,
        capture: a.capture.clone(),
        connection: conn_no,
        direction: from,
        sender: d.sender.clone(),
        receiver: d.receiver.clone(),
        primary: d.primary,
        confidence: d.confidence,
        measure: plan.measure,
        scenario_file,
        taken: plan.taken.clone(),
        reproduction,
        fixes,
        skipped: if a.no_fixes { Vec::new() } else { plan.skipped.clone() },
        path_capacity: d.path_capacity,
        unproven_ceilings,
        verdict,
        ok,
    };
    let json = serde_json::to_string_pretty(&report).expect("the report serializes");
    let _ = fs::write(a.out.join("prove.json"), format!("{json}\n"));
    let text = text(&report, plan.measure);
    if let Err(e) = html::write(&a.out, &report_html_inputs(&report, &text, &plan), &cap, conn_no, d, &opts) {
        eprintln!("tcpwhy prove: cannot write {}: {e}", a.out.join("prove.html").display());
    }
    let mut out = io::stdout().lock();
    let _ = if a.json { writeln!(out, "{json}") } else { write!(out, "{text}") };
    if ok {
        exit::OK
    } else {
        exit::NOT_SHOWN
    }
}

/// The connection and direction to rebuild.
fn pick(cap: &Loaded, conn: Option<u64>, side: Option<Side>) -> Result<(u64, &'static str), String> {
    let bytes = |d: &DirectionDiagnosis| d.bytes;
    let candidates: Vec<_> = cap
        .diagnoses
        .iter()
        .filter(|c| conn.is_none_or(|n| c.id.number == n))
        .flat_map(|c| c.directions.iter().map(move |d| (c.id.number, d)))
        .filter(|(_, d)| side.is_none_or(|s| d.from == side_name(s)))
        .collect();
    if let Some(n) = conn {
        if !cap.diagnoses.iter().any(|c| c.id.number == n) {
            return Err(format!("no connection {n} (it has {}; see `tcpwhy stats`)", cap.analysis.connections.len()));
        }
    }
    candidates
        .iter()
        .max_by_key(|(_, d)| bytes(d))
        .map(|(n, d)| (*n, d.from))
        .ok_or_else(|| match conn {
            Some(n) => format!("connection {n} has no direction with enough data to diagnose (at least {} bytes)", tcpwhy_diagnose::MIN_BYTES),
            None => format!("no connection carried enough data to diagnose (at least {} bytes)", tcpwhy_diagnose::MIN_BYTES),
        })
}

fn side_name(s: Side) -> &'static str {
    match s {
        Side::A => "a",
        Side::B => "b",
    }
}

fn header_lines(a: &ProveArgs, conn: u64, d: &DirectionDiagnosis, plan: &Plan) -> Vec<String> {
    let mut h = vec![
        format!("Rebuilt by `tcpwhy prove` from {} connection {conn}, {} -> {}.", a.capture.display(), d.sender, d.receiver),
        format!("Diagnosis: {} ({} confidence).", d.primary.as_str(), d.confidence.as_str()),
        "Where each value comes from:".to_string(),
    ];
    for t in &plan.taken {
        h.push(format!("  {} = {} ({}): {}", t.parameter, t.value, t.basis, t.from));
    }
    h.push("Edit and rerun with: sudo tcpwhy lab run THIS.toml --out DIR".into());
    h
}

/// A lab run whose emulator delivered packets this much later than due
/// (p99, either direction) was perturbed by the machine: CUBIC's HyStart
/// leaves slow start on a delay increase of at least 4 ms
/// (HYSTART_DELAY_MIN in net/ipv4/tcp_cubic.c), so a larger error changes
/// what the kernel does, not only what is measured.
pub const LAB_MAX_DELAY_ERROR_US: f64 = 4000.0;

/// Runs a scenario; a run the machine perturbed is run once more. Returns
/// the delay error p99 of the run kept, in microseconds, and the
/// hypervisor's steal during it, in milliseconds.
fn run_lab(sc: &Scenario, out: &Path, verbose: bool) -> Result<(f64, Option<f64>), u8> {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("tcpwhy"));
    let opt = RunOptions { out: out.to_path_buf(), agent_exe: exe, verbose };
    let mut error_us = 0.0;
    let mut steal_ms = None;
    for attempt in 0..2 {
        eprintln!("tcpwhy prove: running {} in the lab ({})", sc.name, out.display());
        match tcpwhy_lab::run::run(sc, &opt) {
            Ok(r) => {
                let m = &r.truth.metrics;
                error_us = ["link.down.lateness_p99_us", "link.up.lateness_p99_us"]
                    .iter()
                    .filter_map(|k| m.get(*k).copied())
                    .fold(0.0, f64::max);
                steal_ms = m.get("machine.steal_ms").copied();
                if error_us <= LAB_MAX_DELAY_ERROR_US {
                    break;
                }
                if attempt == 0 {
                    eprintln!(
                        "tcpwhy prove: the link emulator fell behind in that run (packets up to {:.1} ms late, p99{}): running it again",
                        calc::ms_from_us(error_us),
                        steal_text(steal_ms)
                    );
                }
            }
            Err(e) => {
                use crate::error::ToExitCode;
                eprintln!("tcpwhy prove: lab: {e}");
                return Err(e.exit_code());
            }
        }
    }
    Ok((error_us, steal_ms))
}

/// ", the hypervisor took N ms of CPU time meanwhile" when it took any.
fn steal_text(steal_ms: Option<f64>) -> String {
    match steal_ms {
        Some(s) if s > 0.0 => format!("; the hypervisor took {s:.0} ms of CPU time from this machine meanwhile"),
        _ => String::new(),
    }
}

/// With random loss on the path, a capture is one draw: the losses of a
/// short transfer fall early or late, in slow start or not, and its goodput
/// varies by a factor of two or three between runs (measured on the lab's
/// random-loss scenario: 5.3 to 13.8 Mbit/s). Such a scenario is run this
/// many times: the median run is the lab's answer, and the runs' prediction
/// interval (`PREDICTION_INTERVAL`) is what a single capture is judged
/// against.
pub const STOCHASTIC_RUNS: usize = 5;

/// A path with no random element is still one draw of the machine's timing
/// and of the dynamics it feeds (when the bottleneck queue overflows, which
/// segment it drops): in 24 quiet runs of the lab's sndbuf-wmem scenario
/// on 2026-11-27, 22 carried 71 to 99 Mbit/s, one 57 and one 26.5, so one
/// rebuild can miss a capture of the same path by more than
/// REPRO_MEASURE_TOLERANCE. Such a path is run once; when that run misses
/// the capture, or a fix's run misses its prediction, it is run until it
/// has this many runs and judged as a random path is: by the runs'
/// prediction interval and their median. A real miss stays one: runs that
/// agree with each other give a narrow interval.
pub const MISS_DRAWS: usize = STOCHASTIC_RUNS;

/// A capture from a random path reproduces when it lies within this
/// prediction interval of the lab's runs: where one more draw of the same
/// path falls with this probability. The runs' range alone is too narrow:
/// a further draw falls outside the range of 5 runs with probability 2/6
/// (order statistics), which CI saw (a random-loss capture at 3.9 Mbit/s,
/// runs from 6.4 to 29.5 Mbit/s).
pub const PREDICTION_INTERVAL: f64 = 0.95;

/// Two-sided Student t quantiles at `PREDICTION_INTERVAL` (0.975) for 1 to 10
/// degrees of freedom (any statistics table).
const T_975: [f64; 10] = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228];

/// The prediction interval for one more run, taking the measure as
/// log-normal (goodput under random loss varies as a ratio: the Mathis et
/// al. rate goes as 1/sqrt(p), and the losses a short transfer draws vary
/// by a factor): exp(mean ± t · sd · sqrt(1 + 1/n)) of the logs of the
/// runs. None with fewer than two runs to judge by.
fn prediction_interval(runs: &[Option<f64>]) -> Option<(f64, f64)> {
    let logs: Vec<f64> = runs.iter().flatten().filter(|v| **v > 0.0).map(|v| v.ln()).collect();
    let n = logs.len();
    if n < 2 || runs.len() < 2 {
        return None;
    }
    let mean = logs.iter().sum::<f64>() / n as f64;
    let sd = (logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
    let t = T_975[(n - 2).min(T_975.len() - 1)];
    let half = t * sd * (1.0 + 1.0 / n as f64).sqrt();
    Some(((mean - half).exp(), (mean + half).exp()))
}

struct Measured {
    /// Every run in the order run, to add runs to.
    all: Vec<(LabView, PathBuf)>,
    view: LabView,
    /// The median run's directory.
    dir: PathBuf,
    runs: Vec<Option<f64>>,
    /// The other runs of a random path (each one more draw of it).
    others: Vec<LabView>,
    delay_error_us: f64,
    /// The hypervisor's steal in the run with the largest delay error.
    steal_ms: Option<f64>,
}

fn stochastic(sc: &Scenario) -> bool {
    let l = &sc.link;
    l.loss > 0.0 || [&l.down, &l.up].iter().any(|d| d.loss.is_some_and(|p| p > 0.0) || d.loss_ge.is_some())
}

/// Runs a scenario (several times when it is random), loads the run that
/// plays the capture and takes its measure; the median run is kept.
/// `earlier`: the runs already made of it, which are run on to MISS_DRAWS.
fn measure_runs(sc: &Scenario, dir: &Path, plan: &Plan, opts: &Options, verbose: bool, earlier: Option<Measured>) -> Result<Measured, u8> {
    let (n, mut all, mut delay_error_us, mut steal_ms) = match earlier {
        Some(m) => (MISS_DRAWS, m.all, m.delay_error_us, m.steal_ms),
        None => (if stochastic(sc) { STOCHASTIC_RUNS } else { 1 }, Vec::new(), 0.0f64, None),
    };
    for i in all.len()..n {
        let d = if i == 0 { dir.to_path_buf() } else { PathBuf::from(format!("{}-{}", dir.display(), i + 1)) };
        let (error_us, steal) = run_lab(sc, &d, verbose)?;
        if all.is_empty() || error_us > delay_error_us {
            (delay_error_us, steal_ms) = (error_us, steal);
        }
        let view = load_vantage(&d, plan, opts).map(|l| lab_view(&l, plan)).unwrap_or_default();
        all.push((view, d));
    }
    let runs = all.iter().map(|(v, _)| v.measure).collect();
    let mut got = all.clone();
    got.sort_by(|a, b| a.0.measure.unwrap_or(f64::NAN).total_cmp(&b.0.measure.unwrap_or(f64::NAN)));
    let (view, dir) = got.remove(got.len() / 2);
    let others = got.into_iter().map(|(v, _)| v).collect();
    Ok(Measured { all, view, dir, runs, others, delay_error_us, steal_ms })
}

fn load_vantage(dir: &Path, plan: &Plan, opts: &Options) -> Option<Loaded> {
    load(&dir.join(format!("{}.pcap", plan.vantage)), false, true, false, opts)
}

/// The flows that share the diagnosed direction's path, as its policer
/// finding names them (`shared_with_connections`), with their starts and
/// their bytes in the same direction (the direction whose sender is this
/// one's).
fn shared_path(cap: &Loaded, d: &DirectionDiagnosis) -> Option<derive::Group> {
    let ids: Vec<u64> = d
        .findings
        .iter()
        .find(|f| f.kind == "policer")?
        .numbers
        .get("shared_with_connections")?
        .as_array()?
        .iter()
        .filter_map(|v| v.as_u64())
        .collect();
    let mut starts = Vec::new();
    let mut bytes = 0u64;
    let mut own_start = None;
    let host = |s: &str| s.rsplit_once(':').map_or(s.to_string(), |h| h.0.to_string());
    for id in &ids {
        let (Some(cs), Some(cd)) = (cap.analysis.connections.iter().find(|c| c.id == *id), cap.diagnoses.iter().find(|c| c.id.number == *id))
        else {
            continue;
        };
        let Some(dd) = cd.directions.iter().find(|x| host(&x.sender) == host(&d.sender)) else {
            continue;
        };
        if std::ptr::eq(dd, d) {
            own_start = Some(cs.first_time);
        }
        starts.push(cs.first_time);
        bytes += dd.bytes;
    }
    Some(derive::Group { own_start: own_start?, starts, bytes }).filter(|g| g.starts.len() >= 2)
}

/// The lab run's direction: the one carrying the most data from the lab's
/// sender (the server for a download); with several flows on the path,
/// the one that started in the captured flow's place.
fn lab_direction<'a>(l: &'a Loaded, plan: &Plan) -> Option<&'a DirectionDiagnosis> {
    let server_port = tcpwhy_lab::run::server_port().to_string();
    let mut dirs: Vec<(&DirectionDiagnosis, f64)> = l
        .diagnoses
        .iter()
        .flat_map(|c| {
            let start = l.analysis.connections.iter().find(|x| x.id == c.id.number).map_or(f64::INFINITY, |x| x.first_time);
            c.directions.iter().map(move |d| (d, start))
        })
        .filter(|(d, _)| d.bytes > 0 && d.sender.ends_with(&format!(":{server_port}")) == plan.sender_is_server)
        .collect();
    match plan.flow_rank {
        Some(k) if !dirs.is_empty() => {
            dirs.sort_by(|a, b| a.1.total_cmp(&b.1));
            Some(dirs[k.min(dirs.len() - 1)].0)
        }
        _ => dirs.into_iter().map(|x| x.0).max_by_key(|d| d.bytes),
    }
}

fn window_of(d: &DirectionDiagnosis) -> Option<f64> {
    d.findings.iter().find(|f| f.kind == "window_plateau").and_then(|f| f.numbers.get("window_bytes")).and_then(|v| v.as_f64())
}

fn lab_view(l: &Loaded, plan: &Plan) -> LabView {
    let d = lab_direction(l, plan);
    let measure = match plan.measure {
        Measure::GoodputBps => d.and_then(|d| d.goodput_bps),
        Measure::ExchangeMs => Some(l.latency.total_ms).filter(|t| *t > 0.0),
    };
    LabView { measure, primary: d.map(|d| d.primary), limits: d.map(|d| d.limits.clone()).unwrap_or_default(), window_bytes: d.and_then(window_of) }
}

/// `others`: the other runs of a random path. The capture is one draw of
/// that path, as each run is: its cause and its shares reproduce when they
/// match those of any run (the runs' causes and shares vary from draw to
/// draw, as their goodput does: 37 to 58% congestion-window time in the
/// lab's random-loss runs of 2026-11-26), as its goodput reproduces within
/// the runs' spread.
fn compare(capture: LabView, lab: LabView, run_dir: PathBuf, measure: Measure, runs: &[Option<f64>], others: &[LabView]) -> Reproduction {
    let mut mismatches = Vec::new();
    let ratio = match (capture.measure, lab.measure) {
        (Some(c), Some(l)) if c > 0.0 => Some(l / c),
        _ => None,
    };
    // On a random path the capture is one draw: it reproduces when it lies
    // within the runs' prediction interval (widened by the same 20%), or
    // near their median.
    let interval = prediction_interval(runs);
    let within_spread = interval.is_some_and(|(lo, hi)| {
        capture.measure.is_some_and(|c| c >= lo * (1.0 - REPRO_MEASURE_TOLERANCE) && c <= hi * (1.0 + REPRO_MEASURE_TOLERANCE))
    });
    let measure_ok = within_spread || ratio.is_some_and(|r| (r - 1.0).abs() <= REPRO_MEASURE_TOLERANCE);
    let what = match measure {
        Measure::GoodputBps => "goodput",
        Measure::ExchangeMs => "the exchanges' total time",
    };
    match (ratio, capture.measure, lab.measure) {
        (Some(r), Some(c), Some(l)) if !measure_ok => mismatches.push(format!(
            "{what}: {} in the lab against {} in the capture ({:+.0}%, more than {:.0}% apart{})",
            measure.show(l),
            measure.show(c),
            (r - 1.0) * 100.0,
            REPRO_MEASURE_TOLERANCE * 100.0,
            match interval {
                Some((lo, hi)) => format!(
                    " and outside the {:.0}% prediction interval of the runs, {} to {}",
                    PREDICTION_INTERVAL * 100.0,
                    measure.show(lo),
                    measure.show(hi)
                ),
                None => String::new(),
            }
        )),
        (None, _, _) => mismatches.push(format!("{what}: the lab run gave nothing to measure")),
        _ => {}
    }
    let primary_ok = measure == Measure::ExchangeMs
        || (capture.primary.is_some() && std::iter::once(&lab).chain(others).any(|v| v.primary == capture.primary));
    if !primary_ok {
        mismatches.push(format!(
            "the lab's primary cause is {} where the capture's is {}",
            lab.primary.map_or("none", |p| p.as_str()),
            capture.primary.map_or("none", |p| p.as_str())
        ));
    }
    let cb = busy_shares(&capture.limits);
    let max_diff = |lb: &BTreeMap<Limit, f64>| {
        let keys: std::collections::BTreeSet<&Limit> = cb.keys().chain(lb.keys()).collect();
        keys.into_iter().map(|k| (cb.get(k).copied().unwrap_or(0.0) - lb.get(k).copied().unwrap_or(0.0)).abs()).fold(0.0, f64::max)
    };
    // The run whose shares are nearest the capture's.
    let lb = std::iter::once(&lab)
        .chain(others)
        .filter(|v| v.primary.is_some())
        .map(|v| busy_shares(&v.limits))
        .min_by(|a, b| max_diff(a).total_cmp(&max_diff(b)))
        .unwrap_or_else(|| busy_shares(&lab.limits));
    let limits_max_diff = (measure == Measure::GoodputBps && lab.primary.is_some()).then(|| max_diff(&lb));
    let limits_ok = limits_max_diff.is_none_or(|x| x <= REPRO_LIMIT_POINTS + 1e-9);
    if !limits_ok {
        let worst = worst_limit(&cb, &lb);
        mismatches.push(format!(
            "shares of the busy time differ by {:.0} points (most: {worst}), more than {:.0}",
            limits_max_diff.unwrap_or(0.0) * 100.0,
            REPRO_LIMIT_POINTS * 100.0
        ));
    }
    let ok = measure_ok && primary_ok && limits_ok;
    Reproduction { ok, run_dir, capture, lab, ratio, measure_ok, primary_ok, limits_max_diff, limits_ok, mismatches, runs: runs.to_vec(), delay_error_p99_us: 0.0, steal_ms: None }
}

/// Shares of the busy time: `idle` (nothing to send, the application's
/// pauses) is left out and the rest scaled to 1, because the rebuild runs
/// the transfer without the application's pauses and shortened in time.
fn busy_shares(m: &BTreeMap<Limit, f64>) -> BTreeMap<Limit, f64> {
    let busy: f64 = m.iter().filter(|(k, _)| **k != Limit::Idle).map(|(_, v)| v).sum();
    m.iter().filter(|(k, _)| **k != Limit::Idle && busy > 0.0).map(|(k, v)| (*k, v / busy)).collect()
}

fn worst_limit(a: &BTreeMap<Limit, f64>, b: &BTreeMap<Limit, f64>) -> String {
    let keys: std::collections::BTreeSet<&Limit> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .map(|k| {
            let (x, y) = (a.get(k).copied().unwrap_or(0.0), b.get(k).copied().unwrap_or(0.0));
            ((x - y).abs(), format!("{} {:.0}% in the capture, {:.0}% in the lab", k.as_str(), x * 100.0, y * 100.0))
        })
        .max_by(|p, q| p.0.total_cmp(&q.0))
        .map(|p| p.1)
        .unwrap_or_default()
}

/// `--fix KIND...`: the plan's fixes of those kinds run, the others are
/// listed as skipped. A kind the plan does not hold is a usage error that
/// names the kinds it does.
fn keep_asked_fixes(plan: &mut Plan, asked: &[String]) -> Result<(), String> {
    if asked.is_empty() {
        return Ok(());
    }
    if let Some(k) = asked.iter().find(|k| !plan.fixes.iter().any(|f| &f.kind == *k)) {
        let kinds: Vec<&str> = plan.fixes.iter().map(|f| f.kind.as_str()).collect();
        return Err(format!("no fix {k:?} to run; this diagnosis proposes: {}", if kinds.is_empty() { "none".into() } else { kinds.join(", ") }));
    }
    let (kept, left): (Vec<_>, Vec<_>) = std::mem::take(&mut plan.fixes).into_iter().partition(|f| asked.contains(&f.kind));
    plan.fixes = kept;
    plan.skipped.extend(left.into_iter().map(|f| derive::Skipped { kind: f.kind, why: "not asked (--fix)".into() }));
    Ok(())
}

fn run_fix(
    a: &ProveArgs,
    f: &derive::FixPlan,
    plan: &Plan,
    repro: &Reproduction,
    header: &[String],
    opts: &Options,
) -> Result<FixResult, u8> {
    let stem = format!("fix-{}", f.kind.replace(['+', '_'], "-"));
    let scenario_file = a.out.join(format!("{stem}.toml"));
    let mut h = header.to_vec();
    h.push(format!("This variant: {} ({}).", f.change, if f.host { "a host setting" } else { "a change to the path" }));
    let _ = fs::write(&scenario_file, derive::annotated(&f.scenario, &h));
    let run_dir = a.out.join(&stem);
    let mut r = FixResult {
        kind: f.kind.clone(),
        change: f.change.clone(),
        host: f.host,
        scenario_file,
        run_dir: run_dir.clone(),
        predicted: f.predicted,
        predicted_gain: f.predicted.map(|p| plan.measure.gain(plan.captured, p)),
        measured: None,
        measured_gain: None,
        prediction_error: None,
        ok: None,
        primary_after: None,
        delay_error_p99_us: 0.0,
        steal_ms: None,
        perturbed: false,
        runs: Vec::new(),
        error: None,
        at_ceiling: None,
    };
    let missed = format!("{} missed its prediction", f.kind);
    let ran = run_judged(&f.scenario, &run_dir, plan, opts, a.verbose, &missed, |m| {
        judge_fix(&mut r, m, plan, repro);
        r.ok
    })?;
    if !ran {
        r.error = Some(LAB_RUN_FAILED.into());
        return Ok(r);
    }
    if let Some(c) = &f.ceiling {
        r.at_ceiling = Some(run_ceiling(a, f, c, plan, header, opts, r.measured)?);
    }
    Ok(r)
}

/// The fix once more on a path as fast as its ceiling, judged on its value
/// (the transfer is longer than the rebuild's: see derive::CEILING_RUN_SECONDS).
fn run_ceiling(
    a: &ProveArgs,
    f: &derive::FixPlan,
    c: &derive::Ceiling,
    plan: &Plan,
    header: &[String],
    opts: &Options,
    at_estimate: Option<f64>,
) -> Result<CeilingResult, u8> {
    let stem = format!("fix-{}-ceiling", f.kind.replace(['+', '_'], "-"));
    let scenario_file = a.out.join(format!("{stem}.toml"));
    let mut h = header.to_vec();
    h.push(format!(
        "This variant: {} on a path as fast as the fix's ceiling ({}): {} = {}, the far end of what the capture leaves open.",
        f.change,
        fmt_rate(c.high),
        c.parameter,
        fmt_rate(c.link_bps)
    ));
    let _ = fs::write(&scenario_file, derive::annotated(&c.scenario, &h));
    let mut r = CeilingResult {
        parameter: c.parameter,
        link_rate_bps: c.link_bps,
        rebuild_link_rate_bps: c.rebuild_link_bps,
        scenario_file,
        run_dir: a.out.join(&stem),
        predicted_low: c.low,
        predicted_high: c.high,
        predicted: c.predicted,
        measured: None,
        more_than_at_estimate: None,
        ok: None,
        perturbed: false,
        delay_error_p99_us: 0.0,
        runs: Vec::new(),
        error: None,
    };
    let missed = format!("{} at its ceiling missed the range", f.kind);
    let ran = run_judged(&c.scenario, &a.out.join(&stem), plan, opts, a.verbose, &missed, |m| {
        r.run_dir = m.dir.clone();
        r.runs = m.runs.clone();
        r.delay_error_p99_us = m.delay_error_us;
        r.perturbed = m.delay_error_us > LAB_MAX_DELAY_ERROR_US;
        r.measured = m.view.measure;
        r.more_than_at_estimate = r.measured.zip(at_estimate).map(|(v, e)| v / e);
        r.ok = match (r.measured, r.perturbed) {
            (Some(v), false) => Some(ceiling_holds(v, c)),
            _ => None,
        };
        r.ok
    })?;
    if !ran {
        r.error = Some(LAB_RUN_FAILED.into());
    }
    Ok(r)
}

const LAB_RUN_FAILED: &str = "the lab run failed (see the message above)";

/// Runs a variant and judges it (`judge`: held, missed, or not judged); a
/// miss in its one run is run on until it has `MISS_DRAWS` runs and judged
/// on them. Ok(false): a lab run failed (its message was printed);
/// Err: interrupted, or the lab cannot run here.
fn run_judged(
    sc: &Scenario,
    dir: &Path,
    plan: &Plan,
    opts: &Options,
    verbose: bool,
    missed: &str,
    mut judge: impl FnMut(&Measured) -> Option<bool>,
) -> Result<bool, u8> {
    let mut earlier = None;
    loop {
        let m = match measure_runs(sc, dir, plan, opts, verbose, earlier.take()) {
            Ok(m) => m,
            Err(code) if code == exit::INTERRUPTED || code == exit::ENVIRONMENT => return Err(code),
            Err(_) => return Ok(false),
        };
        if judge(&m) != Some(false) || m.runs.len() >= MISS_DRAWS {
            return Ok(true);
        }
        eprintln!("tcpwhy prove: {missed} in its one run; running it until it has {MISS_DRAWS} runs");
        earlier = Some(m);
    }
}

/// A run at the ceiling holds when its goodput is within
/// `PREDICTION_TOLERANCE` of the point predicted for it, or inside the
/// diagnosis's range (issue 40's rule for a prediction that holds).
fn ceiling_holds(v: f64, c: &derive::Ceiling) -> bool {
    (v / c.predicted - 1.0).abs() <= PREDICTION_TOLERANCE || (c.low..=c.high).contains(&v)
}

/// A fix's measure against its prediction, from its runs so far.
fn judge_fix(r: &mut FixResult, m: &Measured, plan: &Plan, repro: &Reproduction) {
    r.delay_error_p99_us = m.delay_error_us;
    r.steal_ms = m.steal_ms;
    r.run_dir = m.dir.clone();
    r.runs = m.runs.clone();
    r.perturbed = r.delay_error_p99_us > LAB_MAX_DELAY_ERROR_US;
    r.measured = m.view.measure;
    r.primary_after = m.view.primary;
    if let (Some(v), Some(base)) = (m.view.measure, repro.lab.measure) {
        let g = plan.measure.gain(base, v);
        r.measured_gain = Some(g);
        if let (Some(pg), Some(p)) = (r.predicted_gain, r.predicted) {
            // When the lab's "before" is one of several draws (a random
            // path, or a miss run on: STOCHASTIC_RUNS, MISS_DRAWS), or the
            // fix's own value is the median of several, the prediction is
            // judged on the value after the fix, which does not depend on
            // the one draw of "before".
            let several = repro.runs.len() > 1 || m.runs.len() > 1;
            let err = if several { plan.measure.gain(p, v) - 1.0 } else { g / pg - 1.0 };
            r.prediction_error = Some(err);
            // a perturbed run is shown, not judged
            r.ok = (!r.perturbed).then_some(err.abs() <= PREDICTION_TOLERANCE);
        }
    }
}

fn perturbed_text(us: f64, steal_ms: Option<f64>) -> String {
    format!(
        "the lab's link emulator fell behind twice (packets up to {:.1} ms late, p99; above {:.0} ms CUBIC may leave slow start early{}): the machine was busy, or the flow ran faster than the emulator carries (docs/lab.md); run again on a quiet machine, or give the path a rate",
        calc::ms_from_us(us),
        calc::ms_from_us(LAB_MAX_DELAY_ERROR_US),
        steal_text(steal_ms)
    )
}

fn verdict(d: &DirectionDiagnosis, repro: &Reproduction, fixes: &[FixResult], no_fixes: bool) -> (&'static str, bool) {
    if d.primary == Cause::Undetermined {
        return ("undetermined", false);
    }
    // an alternative without a prediction cannot miss: its perturbation is only noted
    fn ceiling(f: &FixResult) -> Option<&CeilingResult> {
        f.at_ceiling.as_ref()
    }
    if repro.delay_error_p99_us > LAB_MAX_DELAY_ERROR_US
        || fixes.iter().any(|f| (f.perturbed && f.predicted_gain.is_some()) || ceiling(f).is_some_and(|c| c.perturbed))
    {
        return ("lab_perturbed", false);
    }
    if !repro.ok {
        return ("not_reproduced", false);
    }
    let ceiling_missed = |f: &FixResult| ceiling(f).is_some_and(|c| c.ok == Some(false) || c.error.is_some());
    if fixes.iter().any(|f| f.ok == Some(false) || f.error.is_some() || ceiling_missed(f)) {
        return ("prediction_missed", false);
    }
    if no_fixes || !fixes.iter().any(|f| f.ok == Some(true)) {
        return ("reproduced", true);
    }
    ("proven", true)
}

fn runs_text(runs: &[Option<f64>], m: Measure) -> String {
    runs.iter().map(|v| v.map_or("-".to_string(), |x| m.show(x))).collect::<Vec<_>>().join(", ")
}

fn pct(x: f64) -> String {
    let v = (x * 100.0).round();
    if v == 0.0 {
        "0%".into()
    } else {
        format!("{v:+.0}%")
    }
}

fn gain(x: f64) -> String {
    format!("{x:.2}x")
}

fn text(r: &Report, m: Measure) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "prove      {} connection {}: {} -> {}",
        r.capture.display(),
        r.connection,
        r.sender,
        r.receiver
    );
    let _ = writeln!(s, "diagnosis  {} ({} confidence)", r.primary.as_str(), r.confidence.as_str());
    let _ = writeln!(s, "scenario   {}", r.scenario_file.display());
    for t in &r.taken {
        let _ = writeln!(s, "           {:<26} {:<26} {:<8} {}", t.parameter, t.value, t.basis, t.from);
    }
    let rp = &r.reproduction;
    let show = |v: Option<f64>| v.map_or("-".to_string(), |x| m.show(x));
    let _ = writeln!(
        s,
        "as captured  capture {}, lab {}{}   {}",
        show(rp.capture.measure),
        show(rp.lab.measure),
        rp.ratio.map_or(String::new(), |x| format!(" ({})", pct(x - 1.0))),
        if rp.measure_ok { "ok" } else { "MISMATCH" }
    );
    if rp.runs.len() > 1 {
        let _ = writeln!(s, "             the path is random: the median of {} lab runs ({})", rp.runs.len(), runs_text(&rp.runs, m));
    }
    if m == Measure::GoodputBps {
        let _ = writeln!(
            s,
            "             primary: capture {}, lab {}   {}",
            rp.capture.primary.map_or("-", |p| p.as_str()),
            rp.lab.primary.map_or("-", |p| p.as_str()),
            if rp.primary_ok { "ok" } else { "MISMATCH" }
        );
        if let Some(x) = rp.limits_max_diff {
            let _ = writeln!(s, "             shares of the busy time differ by at most {:.0} point(s)   {}", x * 100.0, if rp.limits_ok { "ok" } else { "MISMATCH" });
        }
        if let (Some(c), Some(l)) = (rp.capture.window_bytes, rp.lab.window_bytes) {
            let _ = writeln!(s, "             receiver window: capture {}, lab {}", tcpwhy_core::units::fmt_bytes(c), tcpwhy_core::units::fmt_bytes(l));
        }
    }
    for x in &rp.mismatches {
        let _ = writeln!(s, "             not reproduced: {x}");
    }
    if !r.fixes.is_empty() {
        let _ = writeln!(s, "fixes");
    }
    for f in &r.fixes {
        let _ = writeln!(s, "  {:<26} {}{}", f.kind, f.change, if f.host { "" } else { "  [path, not host tuning]" });
        if let Some(e) = &f.error {
            let _ = writeln!(s, "  {:<26} {e}", "");
            continue;
        }
        let pred = match (f.predicted, f.predicted_gain) {
            (Some(p), Some(g)) => format!("predicted {} ({})", m.show(p), gain(g)),
            _ => "no prediction".to_string(),
        };
        let meas = match (f.measured, f.measured_gain) {
            (Some(v), Some(g)) => format!("measured {} ({})", m.show(v), gain(g)),
            _ => "nothing measured".to_string(),
        };
        let judged = match (f.ok, f.prediction_error) {
            (Some(true), Some(e)) => format!("prediction held ({} off)", pct(e)),
            (Some(false), Some(e)) => format!("PREDICTION MISSED ({} off, more than {:.0}%)", pct(e), PREDICTION_TOLERANCE * 100.0),
            _ => String::new(),
        };
        let _ = writeln!(s, "  {:<26} {pred}; {meas}; now {}   {judged}", "", f.primary_after.map_or("-", |p| p.as_str()));
        if f.runs.len() > 1 {
            let _ = writeln!(s, "  {:<26} the median of {} runs ({})", "", f.runs.len(), runs_text(&f.runs, m));
        }
        if f.perturbed {
            let _ = writeln!(s, "  {:<26} not judged: {}", "", perturbed_text(f.delay_error_p99_us, f.steal_ms));
        }
        if let Some(c) = &f.at_ceiling {
            ceiling_text(&mut s, f, c, rp.lab.measure, m);
        }
    }
    for k in &r.skipped {
        let _ = writeln!(s, "  {:<26} not run: {}", k.kind, k.why);
    }
    for (fix, hi) in &r.unproven_ceilings {
        let _ = writeln!(
            s,
            "note       the capture never showed the path's capacity, only that it is at least the rate the rebuild gives its link: {fix} was tested at that bound; on a faster path it allows up to {} (prove --bandwidth RATE rebuilds a path whose rate you know)",
            tcpwhy_core::units::fmt_rate(*hi)
        );
    }
    let v = match r.verdict {
        "proven" if r.unproven_ceilings.is_empty() && r.fixes.iter().any(|f| f.at_ceiling.is_some()) => {
            "the lab reproduced the capture and every prediction held, on a path as fast as the capture showed and on one as fast as each fix's ceiling".to_string()
        }
        "proven" if !r.unproven_ceilings.is_empty() => {
            "the lab reproduced the capture and every prediction held at the path rate the capture showed, a lower bound (see the note)".to_string()
        }
        "proven" => "the lab reproduced the capture and every prediction held".to_string(),
        "reproduced" => "the lab reproduced the capture (no prediction to check)".to_string(),
        "prediction_missed" => "the lab reproduced the capture, but a prediction missed: trust the measured gain".to_string(),
        "lab_perturbed" => "the lab's link emulator fell behind (see above): nothing is judged".to_string(),
        "undetermined" => "the diagnosis is undetermined: there is no cause to prove; the rebuild shows what the path alone does".to_string(),
        _ => "the lab did not reproduce the capture: the diagnosis is doubtful, or the path has something the rebuild lacks (see above)".to_string(),
    };
    let _ = writeln!(s, "verdict    {}: {v}", r.verdict);
    let _ = writeln!(s, "results    {}", r.scenario_file.parent().unwrap_or(Path::new(".")).display());
    s
}

/// A fix's run at its ceiling: what ran, what held, and, when a faster path
/// gives the fix more, the assumption that decides the gain.
fn ceiling_text(s: &mut String, f: &FixResult, c: &CeilingResult, before: Option<f64>, m: Measure) {
    use std::fmt::Write as _;
    let pad = "";
    // the path's rate, or the rate of a policer the losses left open
    let what = if c.parameter == "link.rate" { "the path" } else { "the policer" };
    let _ = writeln!(
        s,
        "  {pad:<26} at the ceiling: {} {} (the capture showed {what} at least {} fast; the fix allows up to {})",
        c.parameter,
        fmt_rate(c.link_rate_bps),
        fmt_rate(c.rebuild_link_rate_bps),
        fmt_rate(c.predicted_high)
    );
    if let Some(e) = &c.error {
        let _ = writeln!(s, "  {pad:<26} {e}");
        return;
    }
    let judged = match (c.ok, c.measured) {
        (Some(true), Some(v)) if (c.predicted_low..=c.predicted_high).contains(&v) => {
            format!("inside the predicted range ({} to {})", fmt_rate(c.predicted_low), fmt_rate(c.predicted_high))
        }
        (Some(true), Some(v)) => format!("prediction held ({} off)", pct(v / c.predicted - 1.0)),
        (Some(false), Some(v)) => format!(
            "PREDICTION MISSED: outside the range {} to {} and {} off the point",
            fmt_rate(c.predicted_low),
            fmt_rate(c.predicted_high),
            pct(v / c.predicted - 1.0)
        ),
        _ => String::new(),
    };
    let _ = writeln!(
        s,
        "  {pad:<26} predicted {} for this run; measured {}   {judged}",
        m.show(c.predicted),
        c.measured.map_or("nothing".to_string(), |v| m.show(v)),
    );
    if c.runs.len() > 1 {
        let _ = writeln!(s, "  {pad:<26} the median of {} runs ({})", c.runs.len(), runs_text(&c.runs, m));
    }
    if c.perturbed {
        let _ = writeln!(s, "  {pad:<26} not judged: {}", perturbed_text(c.delay_error_p99_us, None));
    }
    // which assumption decides the gain
    if let (Some(x), Some(g), Some(v), Some(b)) = (c.more_than_at_estimate, f.measured_gain, c.measured, before) {
        if x > 1.0 + PREDICTION_TOLERANCE {
            let _ = writeln!(
                s,
                "  {pad:<26} the gain depends on {what}'s rate, which the capture did not show: {} if {what} is no faster than {}; at {} the fix gives {} more ({})",
                gain(g),
                fmt_rate(c.rebuild_link_rate_bps),
                fmt_rate(c.link_rate_bps),
                gain(x),
                gain(m.gain(b, v))
            );
        }
    }
}

/// What the HTML page shows besides the plots.
pub(crate) struct HtmlInputs<'a> {
    pub text: &'a str,
    /// (title, run directory) of each lab run, the as-captured one first.
    pub runs: Vec<(String, PathBuf)>,
    /// The lab capture that plays the user's capture (client.pcap or server.pcap).
    pub pcap: String,
    pub sender_is_server: bool,
}

fn report_html_inputs<'a>(r: &Report, text: &'a str, plan: &Plan) -> HtmlInputs<'a> {
    let mut runs = vec![("lab, as captured".to_string(), r.reproduction.run_dir.clone())];
    for f in &r.fixes {
        if f.error.is_none() {
            runs.push((format!("lab, {}: {}", f.kind, f.change), f.run_dir.clone()));
        }
        if let Some(c) = f.at_ceiling.as_ref().filter(|c| c.error.is_none()) {
            runs.push((format!("lab, {} at its ceiling: link.rate {}", f.kind, fmt_rate(c.link_rate_bps)), c.run_dir.clone()));
        }
    }
    HtmlInputs { text, runs, pcap: format!("{}.pcap", plan.vantage), sender_is_server: plan.sender_is_server }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(measure: f64, primary: Cause, limits: &[(Limit, f64)]) -> LabView {
        LabView { measure: Some(measure), primary: Some(primary), limits: limits.iter().copied().collect(), window_bytes: None }
    }

    #[test]
    fn busy_shares_leave_out_idle() {
        let m: BTreeMap<Limit, f64> = [(Limit::Idle, 0.5), (Limit::Policer, 0.4), (Limit::SlowStart, 0.1)].into_iter().collect();
        let b = busy_shares(&m);
        assert!(!b.contains_key(&Limit::Idle));
        assert!((b[&Limit::Policer] - 0.8).abs() < 1e-9 && (b[&Limit::SlowStart] - 0.2).abs() < 1e-9);
    }

    #[test]
    fn a_reproduction_needs_the_measure_the_cause_and_the_shares() {
        let cap = || view(60e6, Cause::ReceiverWindow, &[(Limit::ReceiverWindow, 0.9), (Limit::SlowStart, 0.1)]);
        let one = [Some(1.0)];
        let r = compare(cap(), view(66e6, Cause::ReceiverWindow, &[(Limit::ReceiverWindow, 0.85), (Limit::SlowStart, 0.15)]), PathBuf::new(), Measure::GoodputBps, &one, &[]);
        assert!(r.ok && r.mismatches.is_empty(), "{:?}", r.mismatches);
        // 25% faster: out of the 20% bound
        let r = compare(cap(), view(75e6, Cause::ReceiverWindow, &[(Limit::ReceiverWindow, 0.9), (Limit::SlowStart, 0.1)]), PathBuf::new(), Measure::GoodputBps, &one, &[]);
        assert!(!r.ok && !r.measure_ok && r.primary_ok && r.limits_ok);
        // another cause
        let r = compare(cap(), view(60e6, Cause::BottleneckLink, &[(Limit::BottleneckLink, 0.9), (Limit::SlowStart, 0.1)]), PathBuf::new(), Measure::GoodputBps, &one, &[]);
        assert!(!r.ok && !r.primary_ok && !r.limits_ok);
        // shares 20 points apart
        let r = compare(cap(), view(60e6, Cause::ReceiverWindow, &[(Limit::ReceiverWindow, 0.7), (Limit::SlowStart, 0.3)]), PathBuf::new(), Measure::GoodputBps, &one, &[]);
        assert!(!r.ok && r.measure_ok && !r.limits_ok);
        assert!(r.mismatches[0].contains("20 points"), "{:?}", r.mismatches);
        // a random path: the capture's cause and shares are those of
        // another run, not of the median one
        let median = view(60e6, Cause::SendBuffer, &[(Limit::SendBuffer, 0.6), (Limit::SlowStart, 0.4)]);
        let other = view(50e6, Cause::ReceiverWindow, &[(Limit::ReceiverWindow, 0.8), (Limit::SlowStart, 0.2)]);
        let r = compare(cap(), median.clone(), PathBuf::new(), Measure::GoodputBps, &[Some(50e6), Some(60e6)], &[other]);
        assert!(r.ok && r.primary_ok && r.limits_ok, "{:?}", r.mismatches);
        let r = compare(cap(), median, PathBuf::new(), Measure::GoodputBps, &[Some(50e6), Some(60e6)], &[]);
        assert!(!r.ok && !r.primary_ok && !r.limits_ok);
    }

    #[test]
    fn a_random_path_is_judged_on_the_spread_of_its_runs() {
        let cap = view(8e6, Cause::RandomLoss, &[(Limit::CongestionWindow, 1.0)]);
        let lab = || view(11e6, Cause::RandomLoss, &[(Limit::CongestionWindow, 1.0)]);
        // the median is 37% off, but the capture lies between the runs
        let r = compare(cap.clone(), lab(), PathBuf::new(), Measure::GoodputBps, &[Some(5e6), Some(11e6), Some(12e6)], &[]);
        assert!(r.ok, "{:?}", r.mismatches);
        // runs close together (sd 5%), the capture more than 20% below the
        // interval: not reproduced
        let close = [Some(10.5e6), Some(11e6), Some(12e6), Some(11.5e6), Some(10.8e6)];
        let r = compare(view(7e6, Cause::RandomLoss, &[(Limit::CongestionWindow, 1.0)]), lab(), PathBuf::new(), Measure::GoodputBps, &close, &[]);
        assert!(!r.ok && r.mismatches[0].contains("outside the 95% prediction interval"), "{:?}", r.mismatches);
        // CI's case: widely spread runs (6.4 to 29.5 Mbit/s); a capture
        // below all five is still a likely draw of that path
        let wide = [Some(8.97e6), Some(10.17e6), Some(18.94e6), Some(29.49e6), Some(6.39e6)];
        let r = compare(view(3.87e6, Cause::RandomLoss, &[(Limit::CongestionWindow, 1.0)]), lab(), PathBuf::new(), Measure::GoodputBps, &wide, &[]);
        assert!(r.measure_ok, "{:?}", r.mismatches);
        // but not one five times below the lowest
        let r = compare(view(1.2e6, Cause::RandomLoss, &[(Limit::CongestionWindow, 1.0)]), lab(), PathBuf::new(), Measure::GoodputBps, &wide, &[]);
        assert!(!r.measure_ok, "{:?}", r.mismatches);
    }
}
