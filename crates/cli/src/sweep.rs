//! `tcpwhy lab sweep`: randomized lab scenarios with the kernel as truth.
//!
//! Each draw picks a family (a built-in scenario, or a mixture of two
//! causes), draws its parameters from wide distributions (the RTT
//! log-uniform over 2 to 300 ms, the link's rate, buffers, bucket, queue
//! depth, loss rate, reader speed, application window and congestion
//! control as each family needs), runs it in the lab, and diagnoses both
//! captures. The expected verdict comes from what the run's own numbers
//! show, not from the family's label:
//! - the counters' own reading ([`reading`]): the receive window held the
//!   sender (which window by construction: a reader paced below it, a
//!   SYN-ACK without scaling, else the buffer), the send buffer was full,
//!   the policer, the queue or random loss dropped packets, the link was
//!   full, or the sender's ssthresh was small with no loss;
//! - none of those, but the scenario's own expectations hold: the cause
//!   it was built for (the application's window, slow start);
//! - neither: the draw is listed as unjudged (the counters show no single
//!   limit), not dropped.
//!
//! Results: `draws.jsonl` (one row per draw and capture point) and
//! `summary.md` (accuracy per family and capture point with Wilson 95%
//! intervals, and how many `high` verdicts were right) in `--out`.

use crate::labexit as exit;
use clap::Args;
use serde_json::json;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use tcpwhy_core::{Cause, Confidence};
use tcpwhy_lab::run::RunOptions;
use tcpwhy_lab::scenario;

pub const SWEEP_AFTER_HELP: &str = "\
Each draw runs one lab scenario (about 5 to 10 s) with parameters drawn at
random, diagnoses the sender's and the receiver's capture, and judges each
verdict against what the kernel's counters and the emulator's drop counts
of that run show. The same --seed draws the same parameters.

Families: receive-window, window-scaling-off, send-buffer, slow-reader,
policer, shaper, bottleneck, random-loss, cached-ssthresh, app-window,
app-paced, and two mixtures: window-and-loss (a receive window on a lossy path) and
reader-behind-shaper (a slow reader behind a deep queue).

Examples:
  sudo tcpwhy lab sweep --draws 200 --seed 1 --out bench/sweep-1
  sudo tcpwhy lab sweep --draws 20 --family policer --family random-loss --out /tmp/s

Exit codes: 0 the sweep ran (see summary.md for its figures); 2 invalid
arguments; 6 cannot run here (needs root); 1 a step failed; 130
interrupted.";

#[derive(Args)]
pub struct SweepArgs {
    /// How many draws.
    #[arg(long, default_value_t = 50)]
    draws: usize,
    /// Seed of the draws (the same seed draws the same parameters).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Only these families (repeatable; the list is below). Default: all.
    #[arg(long = "family", value_name = "NAME")]
    families: Vec<String>,
    /// Directory for draws.jsonl and summary.md (created).
    #[arg(long, short)]
    out: PathBuf,
    /// Keep each run's directory (captures, truth.json) under OUT/runs.
    #[arg(long)]
    keep: bool,
    /// Judge again the runs a sweep kept (`--keep`) in DIR, with this
    /// build's diagnosis and judge, without running the lab: the same
    /// draws, their captures and the kernel's counters they recorded.
    /// Writes OUT/draws.jsonl and OUT/summary.md (OUT may be DIR). Needs
    /// no root. --draws, --seed and --family are not used.
    #[arg(long, value_name = "DIR")]
    rejudge: Option<PathBuf>,
}

/// A family of draws: the scenario it starts from and how its parameters
/// are drawn.
struct Family {
    name: &'static str,
    scenario: &'static str,
    draw: fn(&mut fastrand::Rng) -> Vec<String>,
}

/// Link facts every family draws first.
struct Link {
    rtt_ms: f64,
    rate_mbit: f64,
}

impl Link {
    /// RTT log-uniform over 2 to 300 ms, the rate log-uniform over
    /// `lo`..`hi` Mbit/s (the lab's userspace link keeps up to a few
    /// hundred Mbit/s on two cores).
    fn draw(rng: &mut fastrand::Rng, lo: f64, hi: f64) -> Link {
        Link { rtt_ms: log_uniform(rng, 2.0, 300.0), rate_mbit: log_uniform(rng, lo, hi) }
    }
    fn bdp_bytes(&self) -> f64 {
        self.rate_mbit * 1e6 / 8.0 * self.rtt_ms / 1e3
    }
    fn sets(&self) -> Vec<String> {
        vec![format!("link.rtt={:.1}ms", self.rtt_ms), format!("link.rate={:.1}mbit", self.rate_mbit)]
    }
}

fn log_uniform(rng: &mut fastrand::Rng, lo: f64, hi: f64) -> f64 {
    (lo.ln() + rng.f64() * (hi.ln() - lo.ln())).exp()
}

fn uniform(rng: &mut fastrand::Rng, lo: f64, hi: f64) -> f64 {
    lo + rng.f64() * (hi - lo)
}

/// Bytes, at least `floor`.
fn bytes(x: f64, floor: f64) -> u64 {
    x.max(floor).round() as u64
}

/// A loss-based or model-based sender, drawn.
fn congestion(rng: &mut fastrand::Rng) -> String {
    format!("server.congestion={}", ["cubic", "reno", "bbr"][rng.usize(..3)])
}

/// A bulk transfer's length: long enough for many round trips at long RTTs.
fn duration(l: &Link) -> String {
    format!("traffic.duration_s={:.1}", (3.0f64).max(l.rtt_ms * 30.0 / 1e3).min(8.0))
}

const FAMILIES: &[Family] = &[
    Family {
        name: "receive-window",
        scenario: "rwnd-rmem",
        draw: |rng| {
            let l = Link::draw(rng, 20.0, 300.0);
            let max = bytes(l.bdp_bytes() * uniform(rng, 0.1, 0.7), 32_768.0);
            let mut s = l.sets();
            s.push(format!("client.tcp_rmem=4096 {} {max}", max.min(131_072)));
            s.push(duration(&l));
            s
        },
    },
    Family {
        name: "window-scaling-off",
        scenario: "wscale-off",
        draw: |rng| {
            // a path whose BDP is at least twice the 64 KiB window
            let mut l = Link::draw(rng, 20.0, 300.0);
            if l.bdp_bytes() < 131_072.0 {
                l.rtt_ms = (131_072.0 * 8.0 / (l.rate_mbit * 1e6) * 1e3).max(l.rtt_ms).min(300.0);
            }
            let mut s = l.sets();
            s.push(duration(&l));
            s
        },
    },
    Family {
        name: "send-buffer",
        scenario: "sndbuf-wmem",
        draw: |rng| {
            let l = Link::draw(rng, 20.0, 300.0);
            let buf = bytes(l.bdp_bytes() * uniform(rng, 0.1, 0.6), 16_384.0);
            let mut s = l.sets();
            s.push(format!("server.tcp_wmem=4096 16384 {}", buf * 2));
            s.push(format!("server.sndbuf={buf}"));
            s.push(format!("link.queue={}", bytes(l.bdp_bytes(), 65_536.0)));
            s.push(duration(&l));
            s
        },
    },
    Family {
        name: "slow-reader",
        scenario: "slow-reader",
        draw: |rng| {
            let l = Link::draw(rng, 20.0, 300.0);
            let read = l.rate_mbit * 1e6 * uniform(rng, 0.05, 0.4);
            let mut s = l.sets();
            s.push(format!("traffic.read_rate_bps={:.0}", read));
            s.push(duration(&l));
            s
        },
    },
    Family {
        name: "policer",
        scenario: "policer",
        draw: |rng| {
            let l = Link::draw(rng, 50.0, 300.0);
            let rate = l.rate_mbit * uniform(rng, 0.1, 0.6);
            let burst = bytes(rate * 1e6 / 8.0 * l.rtt_ms / 1e3 * log_uniform(rng, 0.1, 10.0), 16_384.0);
            let mut s = l.sets();
            s.push(format!("link.down.policer.rate={rate:.1}mbit"));
            s.push(format!("link.down.policer.burst={burst}"));
            s.push(congestion(rng));
            s.push(duration(&l));
            s
        },
    },
    Family {
        name: "shaper",
        scenario: "shaper-deep-queue",
        draw: |rng| {
            let l = Link::draw(rng, 5.0, 100.0);
            let mut s = l.sets();
            s.push(format!("link.queue={}", bytes(l.bdp_bytes() * uniform(rng, 3.0, 10.0), 65_536.0)));
            s.push(congestion(rng));
            s.push(duration(&l));
            s
        },
    },
    Family {
        name: "bottleneck",
        scenario: "healthy-link",
        draw: |rng| {
            let l = Link::draw(rng, 5.0, 200.0);
            let mut s = l.sets();
            s.push(format!("link.queue={}", bytes(l.bdp_bytes() * uniform(rng, 0.3, 1.5), 32_768.0)));
            s.push(congestion(rng));
            s.push(duration(&l));
            s
        },
    },
    Family {
        name: "random-loss",
        scenario: "random-loss",
        draw: |rng| {
            let l = Link::draw(rng, 20.0, 300.0);
            let mut s = l.sets();
            s.push(format!("link.loss={:.5}", log_uniform(rng, 0.0005, 0.03)));
            s.push(duration(&l));
            s
        },
    },
    Family {
        name: "cached-ssthresh",
        scenario: "cached-ssthresh",
        draw: |rng| {
            let l = Link::draw(rng, 20.0, 300.0);
            let mut s = l.sets();
            s.push(format!("server.tcp_metrics.ssthresh={}", rng.u32(2..=10)));
            s
        },
    },
    Family {
        name: "app-window",
        scenario: "app-window",
        draw: |rng| {
            let l = Link::draw(rng, 20.0, 300.0);
            let mut s = l.sets();
            s.push(format!("traffic.window_bytes={}", bytes(l.bdp_bytes() * uniform(rng, 0.1, 0.6), 16_384.0)));
            s
        },
    },
    Family {
        name: "app-paced",
        scenario: "healthy-link",
        draw: |rng| {
            // an application that writes a chunk every period, below the
            // link: the sender's clock is the application's
            let l = Link::draw(rng, 20.0, 300.0);
            let rate = l.rate_mbit * 1e6 * uniform(rng, 0.05, 0.5);
            let period_s = log_uniform(rng, 0.002, 0.2);
            let chunk = bytes(rate / 8.0 * period_s, 1448.0).min(4 << 20);
            let mut s = l.sets();
            s.push(format!("link.queue={}", bytes(l.bdp_bytes(), 65_536.0)));
            s.push(format!("traffic.app_rate_bps={rate:.0}"));
            s.push(format!("traffic.write_size={chunk}"));
            s.push(congestion(rng));
            // at least 25 chunks
            let secs = (3.0f64).max(l.rtt_ms * 30.0 / 1e3).max(25.0 * chunk as f64 * 8.0 / rate).min(8.0);
            s.push(format!("traffic.duration_s={secs:.1}"));
            s
        },
    },
    Family {
        name: "window-and-loss",
        scenario: "rwnd-rmem",
        draw: |rng| {
            let l = Link::draw(rng, 20.0, 300.0);
            let max = bytes(l.bdp_bytes() * uniform(rng, 0.1, 0.7), 32_768.0);
            let mut s = l.sets();
            s.push(format!("client.tcp_rmem=4096 {} {max}", max.min(131_072)));
            s.push(format!("link.loss={:.5}", log_uniform(rng, 0.0005, 0.01)));
            s.push(duration(&l));
            s
        },
    },
    Family {
        name: "reader-behind-shaper",
        scenario: "slow-reader",
        draw: |rng| {
            let l = Link::draw(rng, 5.0, 100.0);
            let mut s = l.sets();
            s.push(format!("link.queue={}", bytes(l.bdp_bytes() * uniform(rng, 3.0, 10.0), 65_536.0)));
            s.push(format!("traffic.read_rate_bps={:.0}", l.rate_mbit * 1e6 * uniform(rng, 0.1, 1.2)));
            s.push(duration(&l));
            s
        },
    },
];

/// Causes that say the same of a run: loss without a queue is read as
/// random or congestion loss by the same test.
fn also(c: Cause) -> Vec<Cause> {
    match c {
        Cause::RandomLoss => vec![Cause::RandomLoss, Cause::CongestionLoss],
        c => vec![c],
    }
}

/// Share at or above which a kernel counter names the limit (the matrix's
/// own expectations use 0.5 to 0.8; half the busy time is the weakest
/// reading that still makes it the largest single limit).
pub const COUNTER_LIMIT_MIN_SHARE: f64 = 0.5;
/// Emulator drops of one kind that make the loss the story (a handful of
/// retransmissions in seconds of transfer limits nothing).
pub const DROPS_MIN: f64 = 5.0;
/// Goodput at this share of the configured link rate: the link is full.
pub const LINK_FULL_MIN_SHARE: f64 = 0.8;

/// A reader paces the transfer when the goodput reached this share of its
/// read rate (set by construction, `traffic.read_rate_bps`): the window
/// then waits on the reader, not on the buffer's size.
pub const READER_PACE_MIN_SHARE: f64 = 0.9;
/// An application paces the transfer when the goodput reached this share
/// of its write rate (set by construction, `traffic.app_rate_bps`).
pub const APP_PACE_MIN_SHARE: f64 = 0.9;
/// A reader above this share of the link's rate, or on a full link, is no
/// slower than the link: the window and the link limit as much.
pub const READER_BELOW_LINK_MAX_SHARE: f64 = 0.8;
/// A cached ssthresh shows as the sender's smallest ssthresh at most this
/// many segments with no retransmission (nothing else lowers ssthresh),
/// on a link it left mostly empty.
pub const CACHED_SSTHRESH_MAX_SEGMENTS: f64 = 16.0;
pub const CACHED_GOODPUT_MAX_SHARE: f64 = 0.5;

/// A number of the scenario's traffic, written as an integer or a float.
fn traffic_number(sc: &scenario::Scenario, key: &str) -> Option<f64> {
    sc.traffic.get(key).and_then(|v| v.as_integer().map(|x| x as f64).or(v.as_float()))
}

/// What a run showed, as the judge reads it: from the run just made, or
/// from the truth.json a kept run left (`--rejudge`).
struct Shown {
    metrics: BTreeMap<String, f64>,
    /// "server" or "client": the end that sent the data.
    sender: String,
    goodput_bps: Option<f64>,
    path_rate_bps: Option<u64>,
    /// The scenario's own expectations held.
    ok: bool,
    /// The cause the scenario was built to show.
    cause: Cause,
}

impl Shown {
    fn of(t: &tcpwhy_lab::truth::Truth) -> Shown {
        Shown {
            metrics: t.metrics.clone(),
            sender: t.sender.to_string(),
            goodput_bps: t.goodput_bps,
            path_rate_bps: t.path_rate_bps,
            ok: t.ok,
            cause: t.cause,
        }
    }

    /// A kept run's truth.json (`tcpwhy.lab.truth/1`).
    fn read(path: &Path) -> Result<Shown, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let str_of = |k: &str| v.get(k).and_then(|x| x.as_str()).ok_or_else(|| format!("{}: no {k}", path.display()));
        Ok(Shown {
            metrics: serde_json::from_value(v.get("metrics").cloned().unwrap_or_default()).map_err(|e| format!("{}: metrics: {e}", path.display()))?,
            sender: str_of("sender")?.to_string(),
            goodput_bps: v.get("goodput_bps").and_then(|x| x.as_f64()),
            path_rate_bps: v.get("path_rate_bps").and_then(|x| x.as_u64()),
            ok: v.get("ok").and_then(|x| x.as_bool()).unwrap_or(false),
            cause: str_of("cause")?.parse().map_err(|_| format!("{}: unknown cause", path.display()))?,
        })
    }
}

/// What the run's own numbers show: the causes a right verdict names, and
/// on what the reading rests. None: no single limit shows.
fn reading(t: &Shown, sc: &scenario::Scenario) -> Option<(Vec<Cause>, String)> {
    let m = &t.metrics;
    let g = |k: &str| m.get(k).copied();
    let link = if t.sender == "server" { "down" } else { "up" };
    let drops = |kind: &str| g(&format!("link.{link}.dropped_{kind}")).unwrap_or(0.0);
    // Which window, by construction: a reader paced below what the window
    // allows, a SYN-ACK without scaling, else the buffer's size.
    let read_rate = traffic_number(sc, "read_rate_bps");
    let paced_by_reader = match (read_rate, t.goodput_bps) {
        (Some(r), Some(gp)) => gp >= READER_PACE_MIN_SHARE * r,
        _ => false,
    };
    let scaling_off = sc.server.tcp_window_scaling == Some(false) || sc.client.tcp_window_scaling == Some(false);
    let window = if paced_by_reader {
        Cause::ReceiverApplication
    } else if scaling_off {
        Cause::WindowScalingOff
    } else {
        Cause::ReceiverWindow
    };
    let retrans = g("sender.total_retrans").unwrap_or(0.0);
    let full = g("goodput_share").filter(|&s| s >= LINK_FULL_MIN_SHARE);
    if let Some(r) = g("sender.rwnd_limited_share").filter(|&r| r >= COUNTER_LIMIT_MIN_SHARE) {
        let mut want = vec![window];
        // a reader about as fast as the link: both limit
        if paced_by_reader && (full.is_some() || read_rate.zip(t.path_rate_bps).is_some_and(|(r, l)| r > READER_BELOW_LINK_MAX_SHARE * l as f64)) {
            want.extend([Cause::ReceiverWindow, Cause::BottleneckLink, Cause::Shaper]);
        }
        let how = if paced_by_reader { "; the goodput is the reader's rate" } else { "" };
        return Some((want, format!("the kernel: rwnd_limited {:.0}% of busy time{how}", r * 100.0)));
    }
    if drops("policer") >= DROPS_MIN {
        return Some((vec![Cause::Policer], format!("the policer dropped {}", drops("policer"))));
    }
    // The application's clock, by construction: a sender whose writes are
    // paced (`traffic.app_rate_bps`) and whose goodput reached that pace
    // (`APP_PACE_MIN_SHARE`) on a link it left partly empty. Each chunk
    // may meet a limit on its way (a queue its burst overflows, slow
    // start, a buffer smaller than the chunk: the kernel's app_limited
    // mark is then rare in the busy samples), but the next chunk starts on
    // the application's clock, so nothing else sets the rate.
    let app_rate = traffic_number(sc, "app_rate_bps");
    if let (Some(r), Some(gp)) = (app_rate, t.goodput_bps) {
        if gp >= APP_PACE_MIN_SHARE * r && full.is_none() {
            let al = g("samples.sender.app_limited_share").unwrap_or(f64::NAN);
            return Some((
                vec![Cause::SenderApplication],
                format!("the application's pace: goodput {:.0}% of its {:.1} Mbit/s (application-limited in {:.0}% of the busy samples)", gp / r * 100.0, r / 1e6, al * 100.0),
            ));
        }
    }
    // A full link: every bulk sender's buffer is full behind it too, and
    // a loss here or there limits nothing (`LINK_FULL_MIN_SHARE`).
    if let Some(s) = full {
        return Some((vec![Cause::BottleneckLink, Cause::Shaper, Cause::CongestionLoss], format!("goodput {:.0}% of the link", s * 100.0)));
    }
    // The application's own window, by construction (its writes wait for
    // the reader's acknowledgement; the socket buffer fills with each).
    if sc.traffic.get("kind").and_then(|k| k.as_str()) == Some("appwindow") {
        return Some((vec![Cause::SenderApplication], "the application's window, by construction".into()));
    }
    if let Some(r) = g("samples.sender.sndbuf_full_share").filter(|&r| r >= COUNTER_LIMIT_MIN_SHARE) {
        return Some((vec![Cause::SendBuffer], format!("socket memory: send buffer full {:.0}% of samples", r * 100.0)));
    }
    if drops("queue") >= DROPS_MIN {
        return Some((
            vec![Cause::BottleneckLink, Cause::Shaper, Cause::CongestionLoss],
            format!("the bottleneck's queue dropped {}", drops("queue")),
        ));
    }
    if drops("loss") >= DROPS_MIN {
        return Some((also(Cause::RandomLoss), format!("random loss dropped {}", drops("loss"))));
    }
    if let (Some(ss), Some(share)) = (g("samples.sender.min_ssthresh"), g("goodput_share")) {
        if ss <= CACHED_SSTHRESH_MAX_SEGMENTS && retrans == 0.0 && share < CACHED_GOODPUT_MAX_SHARE {
            return Some((vec![Cause::CachedSsthresh], format!("the sender's ssthresh {ss:.0} segments with no loss")));
        }
    }
    if t.ok {
        return Some((also(t.cause), "the scenario's expectations hold".into()));
    }
    None
}

/// The verdict on the largest data direction of a capture.
fn verdict(pcap: &Path) -> Option<(Cause, Confidence, u64)> {
    let opts = tcpwhy_diagnose::Options::default();
    let d = tcpwhy_batch::rows::diagnose_capture(pcap, &opts).ok()?;
    d.diagnoses.iter().flat_map(|c| &c.directions).max_by_key(|x| x.bytes).map(|x| (x.primary, x.confidence, x.bytes))
}

/// Right and total, for a cell of the summary.
#[derive(Default, Clone, Copy)]
struct Tally {
    n: u32,
    right: u32,
    high: u32,
    high_right: u32,
}

impl Tally {
    fn add(&mut self, right: bool, conf: Confidence) {
        self.n += 1;
        self.right += right as u32;
        if conf == Confidence::High {
            self.high += 1;
            self.high_right += right as u32;
        }
    }
}

/// Wilson score interval at 95% (z = 1.96) for `k` of `n`.
pub fn wilson(k: u32, n: u32) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (n, p, z) = (n as f64, k as f64 / n as f64, 1.96f64);
    let d = 1.0 + z * z / n;
    let c = (p + z * z / (2.0 * n)) / d;
    let h = z * ((p * (1.0 - p) + z * z / (4.0 * n)) / n).sqrt() / d;
    ((c - h).max(0.0), (c + h).min(1.0))
}

pub fn main(a: SweepArgs) -> u8 {
    if let Some(src) = &a.rejudge {
        return rejudge(&a, src);
    }
    let families: Vec<&Family> = FAMILIES.iter().filter(|f| a.families.is_empty() || a.families.iter().any(|n| n == f.name)).collect();
    if families.is_empty() {
        eprintln!(
            "tcpwhy lab sweep: no family matches {:?}; families: {}",
            a.families,
            FAMILIES.iter().map(|f| f.name).collect::<Vec<_>>().join(", ")
        );
        return exit::INVALID;
    }
    if let Err(e) = std::fs::create_dir_all(a.out.join("runs")) {
        eprintln!("tcpwhy lab sweep: {}: {e}", a.out.display());
        return exit::FAILURE;
    }
    let mut rows = match std::fs::File::create(a.out.join("draws.jsonl")) {
        Ok(f) => std::io::BufWriter::new(f),
        Err(e) => {
            eprintln!("tcpwhy lab sweep: {}: {e}", a.out.display());
            return exit::FAILURE;
        }
    };
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("tcpwhy"));
    let mut rng = fastrand::Rng::with_seed(a.seed);
    let mut cells: BTreeMap<(String, &'static str), Tally> = BTreeMap::new();
    let mut unjudged: Vec<String> = Vec::new();
    let mut failed = 0u32;
    for k in 0..a.draws {
        let f = families[rng.usize(..families.len())];
        let dir = a.out.join("runs").join(format!("{k:04}-{}", f.name));
        let sets = (f.draw)(&mut rng);
        let sc = match scenario::source(f.scenario).and_then(|(o, t)| scenario::load(&o, &t, &sets)) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("draw {k} ({}): {e}", f.name);
                return exit::INVALID;
            }
        };
        let opt = RunOptions { out: dir.clone(), agent_exe: exe.clone(), verbose: false };
        let run = match tcpwhy_lab::run::run(&sc, &opt) {
            Ok(r) => r,
            Err(e) => {
                use crate::error::ToExitCode;
                let code = e.exit_code();
                if code == exit::ENVIRONMENT || code == exit::INTERRUPTED {
                    eprintln!("tcpwhy lab sweep: {e}");
                    return code;
                }
                eprintln!("draw {k} ({}): the run failed: {e}", f.name);
                failed += 1;
                let _ = writeln!(rows, "{}", json!({"draw": k, "family": f.name, "sets": sets, "failed": e.to_string()}));
                continue;
            }
        };
        let draw = Draw { k, family: f.name, scenario: f.scenario, seed: a.seed, sets: &sets, dir: &dir };
        let line = judge(&draw, &Shown::of(&run.truth), &sc, &mut rows, &mut cells, &mut unjudged);
        println!("{line}");
        if !a.keep {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    let _ = rows.flush();
    let text = summary(a.draws, a.seed, &cells, &unjudged, failed);
    print!("{text}");
    if let Err(e) = std::fs::write(a.out.join("summary.md"), text) {
        eprintln!("tcpwhy lab sweep: {e}");
        return exit::FAILURE;
    }
    exit::OK
}

/// `--rejudge DIR`: every draw of DIR/draws.jsonl whose run was kept,
/// judged again from its captures and truth.json.
fn rejudge(a: &SweepArgs, src: &Path) -> u8 {
    let fail = |e: String| {
        eprintln!("tcpwhy lab sweep --rejudge: {e}");
        exit::FAILURE
    };
    let listed = match std::fs::read_to_string(src.join("draws.jsonl")) {
        Ok(t) => t,
        Err(e) => return fail(format!("{}: {e} (a sweep's --out directory, run with --keep)", src.join("draws.jsonl").display())),
    };
    // one row per capture point: the draws in order, once each
    let mut draws: Vec<serde_json::Value> = Vec::new();
    for l in listed.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(l) else { return fail(format!("{}: a line is not JSON", src.display())) };
        if v.get("failed").is_none() && !draws.iter().any(|d| d.get("draw") == v.get("draw")) {
            draws.push(v);
        }
    }
    if let Err(e) = std::fs::create_dir_all(&a.out) {
        return fail(format!("{}: {e}", a.out.display()));
    }
    let mut rows = match std::fs::File::create(a.out.join("draws.jsonl")) {
        Ok(f) => std::io::BufWriter::new(f),
        Err(e) => return fail(format!("{}: {e}", a.out.display())),
    };
    let (mut cells, mut unjudged, mut missing) = (BTreeMap::new(), Vec::new(), 0u32);
    let mut seed = a.seed;
    for v in &draws {
        let k = v.get("draw").and_then(|x| x.as_u64()).unwrap_or(0) as usize;
        let family = v.get("family").and_then(|x| x.as_str()).unwrap_or("");
        let scenario_name = v.get("scenario").and_then(|x| x.as_str()).unwrap_or("");
        seed = v.get("seed").and_then(|x| x.as_u64()).unwrap_or(seed);
        let sets: Vec<String> = v.get("sets").and_then(|x| serde_json::from_value(x.clone()).ok()).unwrap_or_default();
        let dir = src.join("runs").join(format!("{k:04}-{family}"));
        let shown = match Shown::read(&dir.join("truth.json")) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("draw {k} ({family}): not kept: {e}");
                missing += 1;
                continue;
            }
        };
        let sc = match scenario::source(scenario_name).and_then(|(o, t)| scenario::load(&o, &t, &sets)) {
            Ok(s) => s,
            Err(e) => return fail(format!("draw {k} ({family}): {e}")),
        };
        let draw = Draw { k, family, scenario: scenario_name, seed, sets: &sets, dir: &dir };
        println!("{}", judge(&draw, &shown, &sc, &mut rows, &mut cells, &mut unjudged));
    }
    let _ = rows.flush();
    let text = summary(draws.len(), seed, &cells, &unjudged, missing);
    print!("{text}");
    if let Err(e) = std::fs::write(a.out.join("summary.md"), text) {
        return fail(e.to_string());
    }
    exit::OK
}

/// One draw as the judge sees it: its number, family, scenario, seed, the
/// parameters drawn and the run's directory.
struct Draw<'a> {
    k: usize,
    family: &'a str,
    scenario: &'a str,
    seed: u64,
    sets: &'a [String],
    dir: &'a Path,
}

/// Judges both captures of a draw against what the run showed: a row per
/// capture point in draws.jsonl, a cell tally, and the line printed.
fn judge(
    d: &Draw,
    t: &Shown,
    sc: &scenario::Scenario,
    rows: &mut impl Write,
    cells: &mut BTreeMap<(String, &'static str), Tally>,
    unjudged: &mut Vec<String>,
) -> String {
    let read = reading(t, sc);
    let receiver = if t.sender == "server" { "client" } else { "server" };
    let mut line = format!("draw {:>3} {:<20}", d.k, d.family);
    for (end, file) in [("sender", t.sender.as_str()), ("receiver", receiver)] {
        let v = verdict(&d.dir.join(format!("{file}.pcap")));
        let right = match (&read, v) {
            (Some((want, _)), Some((p, _, _))) => Some(want.contains(&p)),
            _ => None,
        };
        if let (Some(r), Some((_, c, _))) = (right, v) {
            cells.entry((d.family.to_string(), end)).or_default().add(r, c);
        }
        line += &format!(
            "  {end}: {} {}",
            v.map_or("-".into(), |(p, c, _)| format!("{}/{}", p.as_str(), c.as_str())),
            match right {
                Some(true) => "right",
                Some(false) => "WRONG",
                None => "unjudged",
            }
        );
        let _ = writeln!(
            rows,
            "{}",
            json!({
                "draw": d.k, "seed": d.seed, "family": d.family, "scenario": d.scenario, "sets": d.sets,
                "capture_point": end,
                "expected": read.as_ref().map(|(w, _)| w.iter().map(|c| c.as_str()).collect::<Vec<_>>()),
                "basis": read.as_ref().map(|(_, b)| b.clone()),
                "scenario_ok": t.ok,
                "primary": v.map(|x| x.0.as_str()), "confidence": v.map(|x| x.1.as_str()), "bytes": v.map(|x| x.2),
                "right": right,
                "metrics": t.metrics,
            })
        );
    }
    if read.is_none() {
        unjudged.push(format!("draw {} {}: {}", d.k, d.family, d.sets.join(" ")));
    }
    line
}

/// summary.md: `draws` draws of `seed`, each cell's tally, the draws no
/// single limit settles and the runs that failed (or were not kept).
fn summary(draws: usize, seed: u64, cells: &BTreeMap<(String, &'static str), Tally>, unjudged: &[String], failed: u32) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "# tcpwhy lab sweep: {draws} draws, seed {seed}\n");
    let _ = writeln!(s, "| family | capture | right | of | share | 95% interval | high right | high |");
    let _ = writeln!(s, "|---|---|---:|---:|---:|---|---:|---:|");
    let mut all = Tally::default();
    for ((fam, end), t) in cells {
        let (lo, hi) = wilson(t.right, t.n);
        let _ = writeln!(
            s,
            "| {fam} | {end} | {} | {} | {:.0}% | {:.0}-{:.0}% | {} | {} |",
            t.right,
            t.n,
            100.0 * t.right as f64 / t.n.max(1) as f64,
            lo * 100.0,
            hi * 100.0,
            t.high_right,
            t.high
        );
        all.n += t.n;
        all.right += t.right;
        all.high += t.high;
        all.high_right += t.high_right;
    }
    let (lo, hi) = wilson(all.right, all.n);
    let (hlo, hhi) = wilson(all.high_right, all.high);
    let _ = writeln!(
        s,
        "\nAll: {} of {} verdicts right ({:.0}%, 95% interval {:.0}-{:.0}%); `high`: {} of {} right ({:.0}-{:.0}%).",
        all.right,
        all.n,
        100.0 * all.right as f64 / all.n.max(1) as f64,
        lo * 100.0,
        hi * 100.0,
        all.high_right,
        all.high,
        hlo * 100.0,
        hhi * 100.0
    );
    let _ = writeln!(s, "Unjudged draws (the counters show no single limit): {}; failed runs: {failed}.", unjudged.len());
    for u in unjudged {
        let _ = writeln!(s, "- {u}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_interval_holds_the_share_and_narrows_with_more_draws() {
        let (lo, hi) = wilson(9, 10);
        assert!(lo < 0.9 && 0.9 < hi && lo > 0.5, "{lo} {hi}");
        let (lo2, hi2) = wilson(90, 100);
        assert!(hi2 - lo2 < hi - lo);
        assert_eq!(wilson(0, 0), (0.0, 1.0));
    }

    /// The same seed draws the same parameters.
    #[test]
    fn a_seed_draws_the_same_parameters() {
        let draws = |seed| {
            let mut rng = fastrand::Rng::with_seed(seed);
            FAMILIES.iter().map(|f| (f.draw)(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draws(5), draws(5));
        assert_ne!(draws(5), draws(6));
    }

    /// Every family's draws load as scenarios, for many seeds.
    #[test]
    fn every_familys_draws_make_valid_scenarios() {
        let mut rng = fastrand::Rng::with_seed(7);
        for f in FAMILIES {
            for _ in 0..20 {
                let sets = (f.draw)(&mut rng);
                let r = scenario::source(f.scenario).and_then(|(o, t)| scenario::load(&o, &t, &sets));
                assert!(r.is_ok(), "{}: {sets:?}: {:?}", f.name, r.err().map(|e| e.to_string()));
            }
        }
    }
}
