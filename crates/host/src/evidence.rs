//! Host and kernel evidence for a capture diagnosis: `ss` snapshots, a
//! `sysctl -a` file, `ip tcp_metrics show`, nstat / netstat counters, a
//! tcp_probe trace or a lab run directory. [`Evidence::load`] reads them.
//! Adding them to a capture's diagnosis is the command line's work
//! (crates/cli/src/evidence.rs), so that this crate reads the host and the
//! kernel without depending on the diagnosis.

use serde_json::Value;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use tcpwhy_kernel::{SocketSample, TraceEvent};

use crate::error::{Error, Format};
use crate::series::{self, ConnDiagnosis};
use crate::text::{self, Counters, TcpMetric};
use crate::trace::{self, FlowTrace};

/// What the command line gave (clap-free).
#[derive(Debug, Clone, Default)]
pub struct EvidenceArgs {
    /// `ss -tin(m)` text files, or JSON Lines of samples (`tcpwhy live --record`, lab runs).
    pub ss: Vec<PathBuf>,
    pub sysctl: Option<PathBuf>,
    pub tcp_metrics: Option<PathBuf>,
    pub nstat: Option<PathBuf>,
    /// JSON Lines of trace events (`tcpwhy trace --out`, a lab run's trace.jsonl) or raw trace_pipe text.
    pub trace: Option<PathBuf>,
    /// A `tcpwhy lab run` directory: its samples, trace and sysctls.
    pub lab_dir: Option<PathBuf>,
}

impl EvidenceArgs {
    pub fn is_empty(&self) -> bool {
        self.ss.is_empty()
            && self.sysctl.is_none()
            && self.tcp_metrics.is_none()
            && self.nstat.is_none()
            && self.trace.is_none()
            && self.lab_dir.is_none()
    }
}

/// Evidence loaded and pre-digested.
#[derive(Debug, Default)]
pub struct Evidence {
    pub series: Vec<ConnDiagnosis>,
    /// Raw last sample per (local, peer), for Send-Q / skmem.
    pub last: BTreeMap<(SocketAddr, SocketAddr), SocketSample>,
    pub sysctl: BTreeMap<String, String>,
    pub tcp_metrics: Vec<TcpMetric>,
    pub counters: Counters,
    pub traces: Vec<FlowTrace>,
    /// Notes about what was read or skipped (for stderr).
    pub notes: Vec<String>,
}

fn read(p: &Path) -> Result<String, Error> {
    std::fs::read_to_string(p).map_err(|e| Error::unreadable(p, e))
}

/// Samples from ss text or JSON Lines of [`SocketSample`].
pub fn load_samples(p: &Path, notes: &mut Vec<String>) -> Result<Vec<SocketSample>, Error> {
    let t = read(p)?;
    if t.trim_start().starts_with('{') {
        let mut v = Vec::new();
        let mut bad = 0;
        for l in t.lines().filter(|l| !l.trim().is_empty()) {
            match serde_json::from_str::<SocketSample>(l) {
                Ok(s) => v.push(s),
                Err(_) => bad += 1,
            }
        }
        if bad > 0 {
            notes.push(format!("{}: {bad} lines are not socket samples", p.display()));
        }
        return Ok(v);
    }
    let parsed = crate::ss::parse(&t, 0.0);
    if parsed.samples.is_empty() {
        return Err(Error::no_data(p, Format::Ss));
    }
    for (what, n) in &parsed.skipped {
        notes.push(format!("{}: skipped {what} x{n}", p.display()));
    }
    Ok(parsed.samples)
}

impl Evidence {
    pub fn load(a: &EvidenceArgs) -> Result<Evidence, Error> {
        let mut e = Evidence::default();
        let mut samples = Vec::new();
        let mut trace_files: Vec<PathBuf> = a.trace.iter().cloned().collect();
        let mut ss_files = a.ss.clone();
        if let Some(dir) = &a.lab_dir {
            match std::fs::metadata(dir) {
                Err(e) => return Err(Error::unreadable(dir, e)),
                Ok(m) if !m.is_dir() => return Err(Error::NotLabRun { path: dir.clone() }),
                Ok(_) => {}
            }
            for f in ["client.samples.jsonl", "server.samples.jsonl"] {
                let p = dir.join(f);
                if p.exists() {
                    ss_files.push(p);
                }
            }
            for f in ["client.tcp_metrics.txt", "server.tcp_metrics.txt"] {
                if let Ok(t) = std::fs::read_to_string(dir.join(f)) {
                    e.tcp_metrics.extend(text::parse_tcp_metrics(&t).0);
                }
            }
            if dir.join("trace.jsonl").exists() {
                trace_files.push(dir.join("trace.jsonl"));
            }
            for f in ["server.sysctl.json", "client.sysctl.json"] {
                if let Ok(t) = std::fs::read_to_string(dir.join(f)) {
                    if let Ok(m) = serde_json::from_str::<BTreeMap<String, Value>>(&t) {
                        let role = f.split('.').next().unwrap_or("");
                        for (k, v) in m {
                            let v = v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
                            e.sysctl.insert(format!("{role}:{k}"), v);
                        }
                    }
                }
            }
        }
        for p in &ss_files {
            samples.extend(load_samples(p, &mut e.notes)?);
        }
        for s in &samples {
            e.last.insert((s.src, s.dst), s.clone());
        }
        e.series = series::group(&samples).iter().map(series::diagnose).collect();
        if let Some(p) = &a.sysctl {
            let m = text::parse_sysctl(&read(p)?);
            if m.is_empty() {
                return Err(Error::no_data(p, Format::Sysctl));
            }
            e.sysctl.extend(m);
        }
        if let Some(p) = &a.tcp_metrics {
            let (m, skipped) = text::parse_tcp_metrics(&read(p)?);
            if !skipped.is_empty() {
                e.notes.push(format!("{}: {} lines skipped", p.display(), skipped.len()));
            }
            e.tcp_metrics.extend(m);
        }
        if let Some(p) = &a.nstat {
            let (c, skipped) = text::parse_counters(&read(p)?);
            if c.is_empty() {
                return Err(Error::no_data(p, Format::Counters));
            }
            if skipped > 0 {
                e.notes.push(format!("{}: {skipped} lines not mapped to a counter", p.display()));
            }
            e.counters = c;
        }
        let mut events: Vec<TraceEvent> = Vec::new();
        for p in &trace_files {
            let (v, bad) = trace::read_jsonl(&read(p)?);
            if bad > 0 {
                e.notes.push(format!("{}: {bad} lines are not trace events", p.display()));
            }
            events.extend(v);
        }
        e.traces = trace::summarize(&events);
        Ok(e)
    }
}
