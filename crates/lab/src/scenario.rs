//! Scenario files: a TOML document describing the path, both ends, the
//! traffic and what the kernel must show. The built-in ones live in
//! `scenarios/` at the repository root and are compiled in; a path to any
//! `.toml` file works too. `--set a.b=v` edits the document before it is
//! checked, so every parameter can be swept from the command line.
//!
//! See docs/lab.md for the format.

use crate::link::{DirectionConfig, GilbertElliott, Policer};
use crate::Error;
use tcpwhy_core::units::{Bytes, Duration, Rate};
use tcpwhy_core::Cause;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The built-in scenarios: (name, TOML text).
pub const BUILTIN: &[(&str, &str)] = &[
    ("healthy-link", include_str!("../../../scenarios/healthy-link.toml")),
    ("rwnd-rmem", include_str!("../../../scenarios/rwnd-rmem.toml")),
    ("wscale-off", include_str!("../../../scenarios/wscale-off.toml")),
    ("sndbuf-wmem", include_str!("../../../scenarios/sndbuf-wmem.toml")),
    ("tiny-buffers", include_str!("../../../scenarios/tiny-buffers.toml")),
    ("slow-reader", include_str!("../../../scenarios/slow-reader.toml")),
    ("policer", include_str!("../../../scenarios/policer.toml")),
    ("shaper-deep-queue", include_str!("../../../scenarios/shaper-deep-queue.toml")),
    ("random-loss", include_str!("../../../scenarios/random-loss.toml")),
    ("new-conn-per-request", include_str!("../../../scenarios/new-conn-per-request.toml")),
    ("idle-restart", include_str!("../../../scenarios/idle-restart.toml")),
    ("idle-restart-ssai0", include_str!("../../../scenarios/idle-restart-ssai0.toml")),
    ("idle-restart-bbr", include_str!("../../../scenarios/idle-restart-bbr.toml")),
    ("cached-ssthresh", include_str!("../../../scenarios/cached-ssthresh.toml")),
    ("app-window", include_str!("../../../scenarios/app-window.toml")),
    ("delayed-ack", include_str!("../../../scenarios/delayed-ack.toml")),
    ("rtt-jump-spurious", include_str!("../../../scenarios/rtt-jump-spurious.toml")),
    ("policer-shared", include_str!("../../../scenarios/policer-shared.toml")),
    ("shaper-shared", include_str!("../../../scenarios/shaper-shared.toml")),
    ("window-beside-free", include_str!("../../../scenarios/window-beside-free.toml")),
];

/// One scenario, fully resolved.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    /// One line: what the scenario shows.
    pub title: String,
    /// The kind of problem it reproduces (e.g. "1", "5.3"; the table in
    /// docs/lab.md, The built-in scenarios).
    #[serde(default)]
    pub case: String,
    /// The cause it is built to show, in diagnose's vocabulary
    /// (`receiver_window`, `send_buffer`, `policer`, ..., `none`); a name
    /// outside it fails to parse, with the list of names.
    pub cause: Cause,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub link: LinkSpec,
    #[serde(default)]
    pub client: EndSpec,
    #[serde(default)]
    pub server: EndSpec,
    /// Handed to the traffic generators (see tcpwhy-traffic's TrafficSpec);
    /// socket options from `[client]`/`[server]` are added to it.
    pub traffic: toml::Table,
    #[serde(default)]
    pub capture: CaptureSpec,
    /// Conditions on the kernel's numbers that prove the scenario shows its
    /// cause; `tcpwhy lab run` checks them and the test suite requires them.
    #[serde(default)]
    pub expect: Vec<Expectation>,
}

/// The emulated path between the client and the server.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// Base round-trip time; half of it is added in each direction.
    #[serde(default)]
    pub rtt: Duration,
    /// Jitter added in each direction (order kept).
    #[serde(default)]
    pub jitter: Duration,
    /// Bottleneck rate in both directions (0 = none).
    #[serde(default)]
    pub rate: Rate,
    /// Drop-tail queue in front of the bottleneck (default 100 ms of `rate`).
    #[serde(default)]
    pub queue: Option<Bytes>,
    /// Random loss in both directions.
    #[serde(default)]
    pub loss: f64,
    /// Device MTU at both ends.
    #[serde(default = "default_mtu")]
    pub mtu: u32,
    /// Let the stacks hand the emulator TSO super-packets (as with a NIC);
    /// they are cut into MTU-sized segments whenever a per-packet effect
    /// (rate, loss, policer...) applies. Off by default: the captures then
    /// show wire-sized segments at both ends. Needed above ~1 Gbit/s.
    #[serde(default)]
    pub offload: bool,
    /// Use IPv6 addresses instead of IPv4.
    #[serde(default)]
    pub ipv6: bool,
    /// Server -> client overrides.
    #[serde(default)]
    pub down: DirSpec,
    /// Client -> server overrides.
    #[serde(default)]
    pub up: DirSpec,
}

impl Default for LinkSpec {
    fn default() -> Self {
        toml::from_str("").unwrap()
    }
}

fn default_mtu() -> u32 {
    1500
}
fn yes() -> bool {
    true
}

/// Per-direction settings; anything unset falls back to `[link]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DirSpec {
    /// One-way delay (default: half of `link.rtt`).
    pub delay: Option<Duration>,
    /// One-way delay for the first `initial_packets` packets of this
    /// direction (e.g. a fast handshake before a slow path).
    pub initial_delay: Option<Duration>,
    #[serde(default)]
    pub initial_packets: u64,
    pub jitter: Option<Duration>,
    pub rate: Option<Rate>,
    pub queue: Option<Bytes>,
    pub loss: Option<f64>,
    pub loss_ge: Option<GilbertElliott>,
    #[serde(default)]
    pub reorder: f64,
    pub reorder_delay: Option<Duration>,
    #[serde(default)]
    pub duplicate: f64,
    pub policer: Option<PolicerSpec>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PolicerSpec {
    pub rate: Rate,
    pub burst: Bytes,
}

/// Settings of one end host (its namespace) and of its sockets.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EndSpec {
    /// net.ipv4.tcp_rmem ("min default max").
    pub tcp_rmem: Option<String>,
    /// net.ipv4.tcp_wmem ("min default max").
    pub tcp_wmem: Option<String>,
    /// net.ipv4.tcp_adv_win_scale (ignored by kernels >= 6.6 for the window).
    pub tcp_adv_win_scale: Option<i32>,
    pub tcp_window_scaling: Option<bool>,
    pub tcp_slow_start_after_idle: Option<bool>,
    pub tcp_no_metrics_save: Option<bool>,
    pub tcp_early_retrans: Option<u32>,
    /// Any other net.* sysctl, e.g. { "net.ipv4.tcp_moderate_rcvbuf" = "0" }.
    #[serde(default)]
    pub sysctl: BTreeMap<String, String>,
    /// Congestion control of the lab sockets (TCP_CONGESTION): cubic (the
    /// default, as on most Linux hosts, whatever this host's default is),
    /// bbr, reno.
    pub congestion: Option<String>,
    /// `ip route ... initcwnd N` towards the peer.
    pub initcwnd: Option<u32>,
    /// `ip route ... initrwnd N` towards the peer.
    pub initrwnd: Option<u32>,
    /// `ip route ... advmss N`: the MSS this end announces.
    pub advmss: Option<u32>,
    /// SO_SNDBUF of the lab sockets (the kernel doubles it).
    pub sndbuf: Option<Bytes>,
    /// SO_RCVBUF of the lab sockets (the kernel doubles it; fixes the window scale).
    pub rcvbuf: Option<Bytes>,
    /// TCP_NODELAY on the lab sockets.
    #[serde(default)]
    pub nodelay: bool,
    /// Pre-seed this end's tcp_metrics entry for the peer: a route metric plus
    /// a short priming connection that makes the kernel create the entry.
    pub tcp_metrics: Option<MetricsSeed>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsSeed {
    pub ssthresh: Option<u32>,
    pub cwnd: Option<u32>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CaptureSpec {
    /// Bytes kept per packet in the captures (0 = whole packets).
    #[serde(default = "default_snaplen")]
    pub snaplen: u32,
    /// Interval of the sock_diag samples of both ends (10-50 ms is typical).
    #[serde(default = "default_sample")]
    pub sample_interval: Duration,
    /// Record tcp:tcp_probe (and retransmit / congestion-state events).
    #[serde(default = "yes")]
    pub trace: bool,
}

impl Default for CaptureSpec {
    fn default() -> Self {
        toml::from_str("").unwrap()
    }
}

fn default_snaplen() -> u32 {
    128
}
fn default_sample() -> Duration {
    Duration::from_millis(20)
}

/// `metric` must lie within [min, max].
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    /// A name from truth.json's `metrics` (see docs/lab.md).
    pub metric: String,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// Why this number proves the cause.
    #[serde(default)]
    pub why: String,
}

/// The TOML text of a built-in scenario, or of a file (with where it came
/// from). A file that cannot be read is [`Error::Unreadable`]; a name that is
/// neither, [`Error::UnknownScenario`].
pub fn source(name_or_path: &str) -> Result<(String, String), Error> {
    if let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
        return Ok((format!("built-in scenario {name_or_path}"), text.to_string()));
    }
    let p = Path::new(name_or_path);
    if p.extension().is_some_and(|e| e == "toml") || p.exists() {
        let text = std::fs::read_to_string(p).map_err(|source| Error::Unreadable { path: p.to_path_buf(), source })?;
        return Ok((p.display().to_string(), text));
    }
    Err(Error::UnknownScenario {
        name: name_or_path.to_string(),
        builtin: BUILTIN.iter().map(|(n, _)| *n).collect(),
    })
}

/// Parse `text`, apply `sets` ("a.b.c=value"), check everything.
pub fn load(origin: &str, text: &str, sets: &[String]) -> Result<Scenario, Error> {
    let mut doc: toml::Table =
        toml::from_str(text).map_err(|e| Error::Toml { origin: origin.to_string(), source: Box::new(e) })?;
    for s in sets {
        apply_set(&mut doc, s)?;
    }
    let sc: Scenario = serde_path_to_error::deserialize(toml::Value::Table(doc))
        .map_err(|e| Error::Key { origin: origin.to_string(), key: e.path().to_string(), source: Box::new(e.into_inner()) })?;
    sc.validate()?;
    Ok(sc)
}

/// `a.b.c=value`: value is read as TOML (number, bool, string, inline
/// table); anything that is not valid TOML is taken as a string.
pub fn apply_set(doc: &mut toml::Table, set: &str) -> Result<(), Error> {
    let Some((key, raw)) = set.split_once('=') else {
        return Err(Error::set(set, "expected key=value, e.g. link.rtt=40ms"));
    };
    let key = key.trim();
    let path: Vec<&str> = key.split('.').collect();
    if path.iter().any(|p| p.is_empty()) {
        return Err(Error::set(set, "empty key part"));
    }
    let value = parse_value(raw.trim());
    // sysctl maps take dotted keys themselves: client.sysctl.net.ipv4.x=1
    let (path, value) = match path.iter().position(|p| *p == "sysctl") {
        Some(i) if i + 1 < path.len() => {
            let name = path[i + 1..].join(".");
            let mut t = toml::Table::new();
            t.insert(name, toml::Value::String(value_to_plain(&value)));
            (path[..=i].to_vec(), toml::Value::Table(t))
        }
        _ => (path, value),
    };
    let mut cur = doc;
    for (i, part) in path.iter().enumerate() {
        if i + 1 == path.len() {
            match (cur.get_mut(*part), value) {
                (Some(toml::Value::Table(existing)), toml::Value::Table(new)) => {
                    existing.extend(new);
                }
                (_, v) => {
                    cur.insert(part.to_string(), v);
                }
            }
            return Ok(());
        }
        let next = cur
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        match next {
            toml::Value::Table(t) => cur = t,
            _ => return Err(Error::set(set, format!("{} is not a table", path[..=i].join(".")))),
        }
    }
    Ok(())
}

fn value_to_plain(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn parse_value(raw: &str) -> toml::Value {
    let wrapped = format!("v = {raw}");
    match toml::from_str::<toml::Table>(&wrapped) {
        Ok(mut t) => t.remove("v").unwrap(),
        Err(_) => toml::Value::String(raw.to_string()),
    }
}


impl Scenario {
    /// The scenario as TOML, quantities in their spec form (`40ms`, `200mbit`,
    /// `512KiB`): what `lab show --set` prints and `lab run` reads back.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_else(|e| format!("# cannot print this scenario as TOML: {e}\n"))
    }

    pub fn validate(&self) -> Result<(), Error> {
        if self.name.is_empty() || !self.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(Error::value("name", format!("{:?}", self.name), "letters, digits, '-' and '_' only"));
        }
        if !(576..=65_535).contains(&self.link.mtu) || (self.link.ipv6 && self.link.mtu < 1280) {
            return Err(Error::value("link.mtu", self.link.mtu, "576..65535 (1280.. for IPv6)"));
        }
        for (name, d) in [("link.down", self.direction(true)), ("link.up", self.direction(false))] {
            d.validate(name)?;
        }
        for (name, e) in [("client", &self.client), ("server", &self.server)] {
            e.validate(name)?;
        }
        if self.capture.sample_interval < Duration::from_millis(1) || self.capture.sample_interval > Duration::from_millis(1000) {
            return Err(Error::value("capture.sample_interval", self.capture.sample_interval, "1ms..1s"));
        }
        if self.capture.snaplen != 0 && self.capture.snaplen < 64 {
            return Err(Error::value("capture.snaplen", self.capture.snaplen, "at least 64 bytes (0 = whole packets)"));
        }
        for e in &self.expect {
            if e.min.is_none() && e.max.is_none() {
                return Err(Error::field(format!("expect {:?}", e.metric), "give min, max or both"));
            }
        }
        Ok(())
    }

    /// The emulator settings of one direction (`down` = server to client).
    pub fn direction(&self, down: bool) -> DirectionConfig {
        let l = &self.link;
        let d = if down { &l.down } else { &l.up };
        let rate = d.rate.unwrap_or(l.rate).0;
        DirectionConfig {
            delay_us: d.delay.map(Duration::as_micros).unwrap_or(l.rtt.as_micros() / 2),
            initial_delay_us: d.initial_delay.map(Duration::as_micros),
            initial_packets: d.initial_packets,
            jitter_us: d.jitter.unwrap_or(l.jitter).as_micros(),
            loss: d.loss.unwrap_or(l.loss),
            loss_ge: d.loss_ge.clone(),
            reorder: d.reorder,
            reorder_us: d.reorder_delay.map(Duration::as_micros).unwrap_or(1000),
            duplicate: d.duplicate,
            rate_bps: rate,
            queue_bytes: if rate > 0 { d.queue.or(l.queue).map(|b| b.0) } else { None },
            policer: d.policer.as_ref().map(|p| Policer { rate_bps: p.rate.0, burst_bytes: p.burst.0 }),
        }
    }

    /// The slowest bottleneck of the path in the data direction, if any.
    pub fn path_rate_bps(&self, down: bool) -> Option<u64> {
        let d = self.direction(down);
        let mut r = if d.rate_bps > 0 { Some(d.rate_bps) } else { None };
        if let Some(p) = &d.policer {
            r = Some(r.map_or(p.rate_bps, |x| x.min(p.rate_bps)));
        }
        r
    }
}

impl EndSpec {
    fn validate(&self, name: &str) -> Result<(), Error> {
        for (k, v) in [("tcp_rmem", &self.tcp_rmem), ("tcp_wmem", &self.tcp_wmem)] {
            if let Some(v) = v {
                let n: Vec<u64> = v.split_whitespace().filter_map(|x| x.parse().ok()).collect();
                if n.len() != 3 || v.split_whitespace().count() != 3 || n[0] > n[1] || n[1] > n[2] || n[0] == 0 {
                    return Err(Error::value(
                        format!("{name}.{k}"),
                        format!("{v:?}"),
                        "three sizes \"min default max\" with min <= default <= max",
                    ));
                }
            }
        }
        if let Some(s) = self.tcp_adv_win_scale {
            if !(-31..=31).contains(&s) {
                return Err(Error::value(format!("{name}.tcp_adv_win_scale"), s, "-31..31"));
            }
        }
        if let Some(c) = &self.congestion {
            if !c.chars().all(|x| x.is_ascii_alphanumeric() || x == '_') || c.is_empty() {
                return Err(Error::value(
                    format!("{name}.congestion"),
                    format!("{c:?}"),
                    "a congestion control name such as cubic, bbr, reno",
                ));
            }
        }
        for k in self.sysctl.keys() {
            if !k.starts_with("net.") || k.contains("..") || k.contains('/') {
                return Err(Error::field(format!("{name}.sysctl {k:?}"), "only net.* sysctls (they are per namespace)"));
            }
        }
        for (k, v) in [("initcwnd", self.initcwnd), ("initrwnd", self.initrwnd)] {
            if let Some(v) = v {
                if !(1..=1024).contains(&v) {
                    return Err(Error::value(format!("{name}.{k}"), v, "1..1024 segments"));
                }
            }
        }
        if let Some(m) = self.advmss {
            if !(88..=65_495).contains(&m) {
                return Err(Error::value(format!("{name}.advmss"), m, "88..65495"));
            }
        }
        if let Some(m) = &self.tcp_metrics {
            if m.ssthresh.is_none() && m.cwnd.is_none() {
                return Err(Error::field(format!("{name}.tcp_metrics"), "give ssthresh and/or cwnd"));
            }
        }
        Ok(())
    }

    /// The namespace sysctls this end needs, in order.
    pub fn sysctls(&self) -> Vec<(String, String)> {
        let mut v = Vec::new();
        let b = |x: bool| if x { "1" } else { "0" }.to_string();
        if let Some(x) = &self.tcp_rmem {
            v.push(("net.ipv4.tcp_rmem".into(), x.clone()));
        }
        if let Some(x) = &self.tcp_wmem {
            v.push(("net.ipv4.tcp_wmem".into(), x.clone()));
        }
        if let Some(x) = self.tcp_adv_win_scale {
            v.push(("net.ipv4.tcp_adv_win_scale".into(), x.to_string()));
        }
        if let Some(x) = self.tcp_window_scaling {
            v.push(("net.ipv4.tcp_window_scaling".into(), b(x)));
        }
        if let Some(x) = self.tcp_slow_start_after_idle {
            v.push(("net.ipv4.tcp_slow_start_after_idle".into(), b(x)));
        }
        if let Some(x) = self.tcp_no_metrics_save {
            v.push(("net.ipv4.tcp_no_metrics_save".into(), b(x)));
        }
        if let Some(x) = self.tcp_early_retrans {
            v.push(("net.ipv4.tcp_early_retrans".into(), x.to_string()));
        }
        if self.tcp_metrics.as_ref().is_some_and(|m| m.ssthresh.is_some()) {
            // kernels >= 5.4 neither save nor use a cached ssthresh otherwise
            v.push(("net.ipv4.tcp_no_ssthresh_metrics_save".into(), "0".into()));
        }
        for (k, x) in &self.sysctl {
            v.push((k.clone(), x.clone()));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_scenario_loads() {
        for (name, text) in BUILTIN {
            let s = load(name, text, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(&s.name, name);
            assert!(!s.expect.is_empty(), "{name} proves nothing");
        }
    }

    #[test]
    fn set_overrides_and_errors_name_the_key() {
        let (_, text) = source("rwnd-rmem").unwrap();
        let s = load("t", &text, &["link.rtt=80ms".into(), "link.down.loss=0.01".into(), "client.sysctl.net.ipv4.tcp_moderate_rcvbuf=0".into()]).unwrap();
        assert_eq!(s.link.rtt, Duration::from_millis(80));
        assert_eq!(s.direction(true).loss, 0.01);
        assert_eq!(s.direction(true).delay_us, 40_000);
        assert_eq!(s.client.sysctl["net.ipv4.tcp_moderate_rcvbuf"], "0");
        let e = load("t", &text, &["link.rtt=fast".into()]).unwrap_err().to_string();
        assert!(e.contains("link.rtt") && e.contains("not a time"), "{e}");
        let e = load("t", &text, &["link.rtt=80".into()]).unwrap_err().to_string();
        assert!(e.contains("link.rtt") && e.contains("needs a unit"), "{e}");
        let e = load("t", &text, &["link.down.loss=2".into()]).unwrap_err().to_string();
        assert!(e.contains("link.down.loss"), "{e}");
        let e = load("t", &text, &["cause=reciever_window".into()]).unwrap_err().to_string();
        assert!(e.contains("cause: \"reciever_window\" is not a cause: one of receiver_window, send_buffer"), "{e}");
        let e = load("t", &text, &["link.colour=red".into()]).unwrap_err().to_string();
        assert!(e.contains("colour"), "{e}");
        let e = load("t", &text, &["server.tcp_wmem=4096 1 2".into()]).unwrap_err().to_string();
        assert!(e.contains("server.tcp_wmem"), "{e}");
        let e = load("t", &text, &["client.sysctl.kernel.panic=1".into()]).unwrap_err().to_string();
        assert!(e.contains("only net.*"), "{e}");
        assert!(source("no-such-scenario").unwrap_err().to_string().contains("rwnd-rmem"));
    }
}
