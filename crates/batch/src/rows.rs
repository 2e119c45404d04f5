//! One capture file diagnosed into rows of the batch tables (schema
//! `tcpwhy.batch/1`, docs/batch.md). The names are the diagnose JSON's
//! (`tcpwhy.diagnose/2`), flattened where a table wants a column: the
//! JSON's `from` is `direction` (a reserved word in SQL), `rtt.base_ms` is
//! `rtt_base_ms`, and `limits` is a struct with one share per limit.

use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tcpwhy_diagnose::{ConnectionDiagnosis, Diagnoser, Options};
use tcpwhy_flow::{analyze_capture, AnalyzeOptions, CaptureAnalysis, SegmentSink, Tee};
use tcpwhy_wire::{CaptureError, CaptureReader};

/// A capture file to read, with what identifies its content for a resumed
/// batch: a file whose size or modification time changed is read again.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Input {
    pub path: PathBuf,
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch (0 if unknown).
    pub mtime_ns: i64,
    /// Why a file found in a directory is not read (not a capture by its
    /// content, `inputs::not_a_capture`): it gets a `files` row saying so.
    pub skipped: Option<String>,
}

impl Input {
    /// Stats `path`; a file that cannot be stat'ed still becomes an input
    /// (size 0), so that reading it reports the error as a row.
    pub fn stat(path: PathBuf) -> Input {
        let meta = std::fs::metadata(&path).ok();
        let size = meta.as_ref().map_or(0, |m| m.len());
        let mtime_ns = meta
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i64);
        Input { path, size, mtime_ns, skipped: None }
    }

    /// A file left out of the batch, with the reason: not read, but listed.
    pub fn skipped(path: PathBuf, why: String) -> Input {
        Input { skipped: Some(why), ..Input::stat(path) }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct FindingRow {
    pub kind: String,
    pub text: String,
    /// The finding's numbers as a JSON object (rate_bps, burst_bytes...).
    pub numbers: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct FixRow {
    pub kind: String,
    pub on: String,
    pub text: String,
    pub commands: Vec<String>,
    /// The system `commands` are written for ("" for a fix without any).
    pub system: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct WhatIfRow {
    pub fix: String,
    pub current_bps: f64,
    pub predicted_bps: Option<f64>,
    pub predicted_low_bps: Option<f64>,
    pub predicted_high_bps: Option<f64>,
    pub bound: String,
    /// The states whose phases the fix shortens, and the replay's duration
    /// and time won back.
    pub addresses: Vec<String>,
    pub duration_s: Option<f64>,
    pub saved_s: Option<f64>,
    pub assumptions: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LimitRunRow {
    pub state: String,
    pub bytes: u64,
    pub start: f64,
    pub end: f64,
}

/// One row per diagnosed connection direction.
#[derive(Debug, Clone, Serialize)]
pub struct DirectionRow {
    pub file: String,
    pub connection: u64,
    pub a_addr: String,
    pub a_port: u16,
    pub b_addr: String,
    pub b_port: u16,
    /// "a" or "b": the data sender (the JSON's `from`).
    pub direction: String,
    pub sender: String,
    pub receiver: String,
    /// Each end's operating system from its handshake (tcpwhy_diagnose::system).
    pub sender_system: String,
    pub receiver_system: String,
    /// The sender's congestion control (tcpwhy_diagnose::congestion) and its confidence.
    pub congestion_control: String,
    pub congestion_control_confidence: Option<String>,
    pub first_time: f64,
    pub bytes: u64,
    pub duration_s: f64,
    pub goodput_bps: Option<f64>,
    pub capture_point: String,
    pub rtt_base_ms: Option<f64>,
    pub rtt_median_ms: Option<f64>,
    pub rtt_p90_ms: Option<f64>,
    pub handshake_rtt_ms: Option<f64>,
    pub rtt_source: String,
    pub segment_bytes: u32,
    pub path_rate_bps: Option<f64>,
    /// What the path rate rests on: given, seen, lower_bound, unknown.
    pub path_capacity: String,
    pub interval_ms: f64,
    pub traffic_shape: String,
    pub primary: String,
    pub confidence: String,
    pub summary: String,
    /// Share of the transfer's time in each limit (every limit present, 0
    /// when never seen).
    pub limits: BTreeMap<String, f64>,
    /// The first prediction of the fixes (the primary's): what the rate
    /// would be after it, and the gain (predicted / current).
    pub predicted_bps: Option<f64>,
    /// Its range: equal to it where the capture showed the path's
    /// capacity; else the rate at the lower bound and the fix's ceiling.
    pub predicted_low_bps: Option<f64>,
    pub predicted_high_bps: Option<f64>,
    pub predicted_gain: Option<f64>,
    /// The first prediction's time won back (seconds).
    pub saved_s: Option<f64>,
    /// "Is it the network?": the share of the time the network and TCP's
    /// settings hold, and the most any network or TCP fix gains.
    pub network_share: f64,
    pub most_gain: Option<f64>,
    pub findings: Vec<FindingRow>,
    pub fixes: Vec<FixRow>,
    pub what_if: Vec<WhatIfRow>,
    pub to_confirm: Vec<String>,
    /// Kinds of the connection's capture-quality findings (details in the
    /// `quality` table).
    pub capture_quality: Vec<String>,
    pub timeline: Vec<LimitRunRow>,
    pub truncated: bool,
}

/// One row per capture-quality finding of a connection.
#[derive(Debug, Clone, Serialize)]
pub struct QualityRow {
    pub file: String,
    pub connection: u64,
    pub kind: String,
    pub text: String,
    pub weakens: Vec<String>,
    pub numbers: String,
}

/// Two or more diagnosed flows from one host to another that overlap in
/// time (tcpwhy_diagnose::groups, the diagnose JSON's `groups`).
#[derive(Debug, Clone, Serialize)]
pub struct GroupRow {
    pub file: String,
    /// 1, 2, ... per file, in order of the group's first flow.
    pub group: u64,
    pub sender: String,
    pub receiver: String,
    pub flows: u64,
    pub connections: Vec<u64>,
    pub bytes: u64,
    pub first_time: f64,
    pub last_time: f64,
    /// All the flows' bytes over the time any of them moved data, bit/s.
    pub aggregate_goodput_bps: Option<f64>,
    /// The policer the flows share, if their losses together fit one.
    pub policer_rate_bps: Option<f64>,
    pub policer_burst_bytes: Option<u64>,
    /// Primary -> number of flows.
    pub primaries: BTreeMap<String, u64>,
    pub findings: Vec<GroupFindingRow>,
}

#[derive(Debug, Clone, Serialize)]
pub struct GroupFindingRow {
    pub kind: String,
    pub text: String,
}

/// One row per input file, written last in each commit: a resumed batch
/// skips the files listed here with the same size and modification time.
#[derive(Debug, Clone, Serialize)]
pub struct FileRow {
    pub file: String,
    pub size: u64,
    pub mtime_ns: i64,
    /// "pcap", "pcap-ns", "pcapng", or null when not readable.
    pub format: Option<String>,
    pub compression: Option<String>,
    pub frames: u64,
    pub tcp_segments: u64,
    pub connections: u64,
    pub directions: u64,
    pub interface_drops: Option<u64>,
    /// Connection attempts (tuples that began with control segments), how
    /// many never became connections, and what they look like
    /// (`syn_flood`, `port_scan`, `host_scan`, `backscatter`, or null).
    pub attempts: u64,
    pub failed_attempts: u64,
    pub attempts_kind: Option<String>,
    /// One sentence with the attempts' numbers.
    pub attempts_text: String,
    /// The first connection's first frame, Unix seconds.
    pub first_time: Option<f64>,
    pub capture_warnings: Vec<String>,
    /// The exit code `tcpwhy diagnose` would give for this file alone:
    /// 0 read, 3 unreadable, 4 truncated or corrupt part-way, 1 internal error.
    pub exit_code: u8,
    pub error: Option<String>,
    pub elapsed_s: f64,
    pub tcpwhy_version: String,
    /// Set for a file a directory walk found and did not read, with why
    /// ("not a capture: ..."); null for every file read.
    pub skipped: Option<String>,
}

/// One row per file that could not be read, or not to its end.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorRow {
    pub file: String,
    /// "unreadable" (3), "truncated" (4), "corrupt" (4) or "internal" (1).
    pub kind: String,
    pub exit_code: u8,
    pub message: String,
    /// Frames read before the problem (results cover them).
    pub frames_before: u64,
}

/// Everything one capture file gives.
#[derive(Debug, Clone)]
pub struct FileResult {
    pub file: FileRow,
    pub directions: Vec<DirectionRow>,
    pub quality: Vec<QualityRow>,
    pub groups: Vec<GroupRow>,
    pub errors: Vec<ErrorRow>,
    pub todo: Vec<TodoRow>,
}

impl FileResult {
    pub fn rows(&self) -> usize {
        1 + self.directions.len() + self.quality.len() + self.groups.len() + self.errors.len() + self.todo.len()
    }
}

fn to_json_text(m: &serde_json::Map<String, Value>) -> String {
    serde_json::to_string(m).unwrap_or_else(|_| "{}".into())
}

fn as_name<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// The direction rows of one connection's diagnosis.
pub fn direction_rows(file: &str, d: &ConnectionDiagnosis) -> Vec<DirectionRow> {
    let quality: Vec<String> = d.capture_quality.iter().map(|q| q.kind.to_string()).collect();
    d.directions
        .iter()
        .map(|x| {
            let mut limits: BTreeMap<String, f64> =
                tcpwhy_core::Limit::ALL.iter().map(|l| (l.as_str().to_string(), 0.0)).collect();
            for (l, share) in &x.limits {
                limits.insert(l.as_str().to_string(), *share);
            }
            let (sender_system, receiver_system) =
                if x.from == "a" { (d.id.a.system.name, d.id.b.system.name) } else { (d.id.b.system.name, d.id.a.system.name) };
            let first = x.what_if.iter().find(|w| w.predicted_bps.is_some());
            let predicted_bps = first.and_then(|w| w.predicted_bps);
            let predicted_gain = first.and_then(|w| {
                let p = w.predicted_bps?;
                (w.current_bps > 0.0).then(|| p / w.current_bps)
            });
            DirectionRow {
                file: file.to_string(),
                connection: d.id.number,
                a_addr: d.id.a.addr.clone(),
                a_port: d.id.a.port,
                b_addr: d.id.b.addr.clone(),
                b_port: d.id.b.port,
                direction: x.from.to_string(),
                sender: x.sender.clone(),
                receiver: x.receiver.clone(),
                sender_system: sender_system.as_str().to_string(),
                receiver_system: receiver_system.as_str().to_string(),
                congestion_control: x.congestion_control.name.to_string(),
                congestion_control_confidence: x.congestion_control.confidence.map(|c| c.as_str().to_string()),
                first_time: d.first_time,
                bytes: x.bytes,
                duration_s: x.duration_s,
                goodput_bps: x.goodput_bps,
                capture_point: x.capture_point.to_string(),
                rtt_base_ms: x.rtt.base_ms,
                rtt_median_ms: x.rtt.median_ms,
                rtt_p90_ms: x.rtt.p90_ms,
                handshake_rtt_ms: x.rtt.handshake_ms,
                rtt_source: x.rtt.source.to_string(),
                segment_bytes: x.segment_bytes,
                path_rate_bps: x.path_rate_bps,
                path_capacity: x.path_capacity.to_string(),
                interval_ms: x.interval_ms,
                traffic_shape: as_name(&x.traffic_shape),
                primary: x.primary.as_str().to_string(),
                confidence: x.confidence.as_str().to_string(),
                summary: x.summary.clone(),
                limits,
                predicted_bps,
                predicted_low_bps: first.and_then(|w| w.predicted_low_bps),
                predicted_high_bps: first.and_then(|w| w.predicted_high_bps),
                predicted_gain,
                saved_s: first.and_then(|w| w.saved_s),
                network_share: x.time_split.network,
                most_gain: x.time_split.most_gain,
                findings: x
                    .findings
                    .iter()
                    .map(|f| FindingRow { kind: f.kind.to_string(), text: f.text.clone(), numbers: to_json_text(&f.numbers) })
                    .collect(),
                fixes: x
                    .fixes
                    .iter()
                    .map(|f| FixRow {
                        kind: f.kind.to_string(),
                        on: f.on.to_string(),
                        text: f.text.clone(),
                        commands: f.commands.clone(),
                        system: f.system.to_string(),
                    })
                    .collect(),
                what_if: x
                    .what_if
                    .iter()
                    .map(|w| WhatIfRow {
                        fix: w.fix.to_string(),
                        current_bps: w.current_bps,
                        predicted_bps: w.predicted_bps,
                        predicted_low_bps: w.predicted_low_bps,
                        predicted_high_bps: w.predicted_high_bps,
                        bound: w.bound.to_string(),
                        addresses: w.addresses.iter().map(|l| l.as_str().to_string()).collect(),
                        duration_s: w.duration_s,
                        saved_s: w.saved_s,
                        assumptions: w.assumptions.clone(),
                    })
                    .collect(),
                to_confirm: x.to_confirm.clone(),
                capture_quality: quality.clone(),
                timeline: x
                    .timeline
                    .iter()
                    .map(|r| LimitRunRow { state: r.state.as_str().to_string(), bytes: r.bytes, start: r.start, end: r.end })
                    .collect(),
                truncated: x.truncated,
            }
        })
        .collect()
}

/// One row per fix with a replayed prediction for one direction: the time
/// it wins back, and the end it is for. Summed over a fleet's captures it
/// is the to-do list, ranked by the time each fix wins back
/// (docs/batch.md, `todo`).
#[derive(Debug, Clone, Serialize)]
pub struct TodoRow {
    pub file: String,
    pub connection: u64,
    pub direction: String,
    pub fix: String,
    /// `receiver`, `sender`, `both`, `path` or `application`.
    pub on: String,
    /// The address of the end the fix is for (the sender's or the
    /// receiver's; empty for `path` and `both`), and its system.
    pub host: String,
    pub system: String,
    pub primary: String,
    pub bytes: u64,
    pub duration_s: f64,
    pub saved_s: f64,
    pub current_bps: f64,
    pub predicted_bps: Option<f64>,
}

/// The to-do rows of one connection's diagnosis.
pub fn todo_rows(file: &str, d: &ConnectionDiagnosis) -> Vec<TodoRow> {
    let mut out = Vec::new();
    for x in &d.directions {
        let (sender, receiver) = if x.from == "a" { (&d.id.a, &d.id.b) } else { (&d.id.b, &d.id.a) };
        for w in &x.what_if {
            let Some(saved_s) = w.saved_s else { continue };
            let fix = x.fixes.iter().find(|f| f.kind == w.fix);
            let on = fix.map_or("", |f| f.on);
            let end = match on {
                "receiver" => Some(receiver),
                "sender" => Some(sender),
                "application" if x.primary == tcpwhy_core::Cause::ReceiverApplication => Some(receiver),
                "application" => Some(sender),
                _ => None,
            };
            out.push(TodoRow {
                file: file.to_string(),
                connection: d.id.number,
                direction: x.from.to_string(),
                fix: w.fix.to_string(),
                on: on.to_string(),
                host: end.map_or(String::new(), |e| e.addr.clone()),
                system: end.map_or(String::new(), |e| e.system.name.as_str().to_string()),
                primary: x.primary.as_str().to_string(),
                bytes: x.bytes,
                duration_s: x.duration_s,
                saved_s,
                current_bps: w.current_bps,
                predicted_bps: w.predicted_bps,
            });
        }
    }
    out
}

/// The flow groups of one capture as rows.
pub fn group_rows(file: &str, groups: &[tcpwhy_diagnose::groups::FlowGroup]) -> Vec<GroupRow> {
    groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let mut primaries: BTreeMap<String, u64> = BTreeMap::new();
            for f in &g.flows {
                *primaries.entry(f.primary.as_str().to_string()).or_default() += 1;
            }
            GroupRow {
                file: file.to_string(),
                group: i as u64 + 1,
                sender: g.sender.clone(),
                receiver: g.receiver.clone(),
                flows: g.flows.len() as u64,
                connections: g.flows.iter().map(|f| f.connection).collect(),
                bytes: g.flows.iter().map(|f| f.bytes).sum(),
                first_time: g.first_time,
                last_time: g.last_time,
                aggregate_goodput_bps: g.aggregate_goodput_bps,
                policer_rate_bps: g.policer_rate_bps,
                policer_burst_bytes: g.policer_burst_bytes,
                primaries,
                findings: g.findings.iter().map(|f| GroupFindingRow { kind: f.kind.to_string(), text: f.text.clone() }).collect(),
            }
        })
        .collect()
}

fn error_row(file: &str, e: &CaptureError) -> ErrorRow {
    let (kind, code, frames) = match e {
        CaptureError::Open { .. } | CaptureError::NotACapture { .. } => ("unreadable", 3, 0),
        CaptureError::Truncated { frames, .. } => ("truncated", 4, *frames),
        CaptureError::Corrupt { frames, .. } => ("corrupt", 4, *frames),
    };
    ErrorRow { file: file.to_string(), kind: kind.into(), exit_code: code, message: e.to_string(), frames_before: frames }
}

/// The capture analysed and diagnosed, as `tcpwhy diagnose` does it.
pub type Diagnosed = tcpwhy_diagnose::CaptureDiagnosis;

/// Reads and diagnoses one capture; `Err` when it cannot be read at all.
pub fn diagnose_capture(path: &Path, opts: &Options) -> Result<Diagnosed, CaptureError> {
    diagnose_capture_into(path, opts, &mut ())
}

/// [`diagnose_capture`], with `also` fed every segment of the same read
/// (the pair comparison's spill, `crate::pairs`).
pub fn diagnose_capture_into(path: &Path, opts: &Options, also: &mut impl SegmentSink) -> Result<Diagnosed, CaptureError> {
    let reader = CaptureReader::open(path)?;
    let mut dg = Diagnoser::new(*opts);
    let analysis = analyze_capture(reader, AnalyzeOptions::default(), &mut Tee(dg.sink(), also), |_| {});
    Ok(dg.finish(analysis))
}

/// The file's warnings and, when the record budget ran out, that too.
pub fn capture_warnings(d: &Diagnosed) -> Vec<String> {
    // the capture-level warnings `diagnose` prints (CaptureAnalysis::warnings)
    let mut w = d.analysis.warnings();
    if d.recorder.budget_exhausted() {
        w.push("record budget reached; later segments are not in the diagnosis (marked truncated)".into());
    }
    w
}

/// Reads one capture and gives its rows. Never fails: an unreadable file is
/// a `files` row and an `errors` row; a truncated one also keeps the rows of
/// the part before the damage.
pub fn diagnose_file(input: &Input, opts: &Options) -> FileResult {
    diagnose_file_into(input, opts, &mut ()).0
}

/// [`diagnose_file`], with `also` fed the same read, and the capture's
/// analysis kept when it could be read (the pair comparison needs both).
pub fn diagnose_file_into(input: &Input, opts: &Options, also: &mut impl SegmentSink) -> (FileResult, Option<CaptureAnalysis>) {
    file_result(input, read_file_into(input, opts, also))
}

/// One capture read and diagnosed, before its rows (`file_result`): a pair
/// job changes the diagnoses in between (a capacity the pair measured
/// replays each capture's what-if, `crate::pairs`).
pub struct FileRead {
    start: Instant,
    /// None: the file was skipped (not a capture); else the diagnosis, its
    /// read's error, or the panic it raised.
    outcome: Option<std::thread::Result<Result<Diagnosed, CaptureError>>>,
}

impl FileRead {
    /// The diagnosis, when the capture could be read.
    pub fn diagnosed(&mut self) -> Option<&mut Diagnosed> {
        match &mut self.outcome {
            Some(Ok(Ok(d))) => Some(d),
            _ => None,
        }
    }
}

/// Reads and diagnoses one capture (`also` fed the same read); never panics.
pub fn read_file_into(input: &Input, opts: &Options, also: &mut impl SegmentSink) -> FileRead {
    let start = Instant::now();
    let outcome = input
        .skipped
        .is_none()
        .then(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| diagnose_capture_into(&input.path, opts, also))));
    FileRead { start, outcome }
}

/// The rows of one capture read (`read_file_into`), and its analysis when
/// it could be read.
pub fn file_result(input: &Input, read: FileRead) -> (FileResult, Option<CaptureAnalysis>) {
    let start = read.start;
    let file = input.path.display().to_string();
    let mut row = FileRow {
        file: file.clone(),
        size: input.size,
        mtime_ns: input.mtime_ns,
        format: None,
        compression: None,
        frames: 0,
        tcp_segments: 0,
        connections: 0,
        directions: 0,
        interface_drops: None,
        attempts: 0,
        failed_attempts: 0,
        attempts_kind: None,
        attempts_text: String::new(),
        first_time: None,
        capture_warnings: Vec::new(),
        exit_code: 0,
        error: None,
        elapsed_s: 0.0,
        tcpwhy_version: env!("CARGO_PKG_VERSION").to_string(),
        skipped: input.skipped.clone(),
    };
    let Some(outcome) = read.outcome else {
        return (FileResult { file: row, directions: Vec::new(), quality: Vec::new(), groups: Vec::new(), errors: Vec::new(), todo: Vec::new() }, None);
    };
    let mut analysis = None;
    let mut result = FileResult { file: row.clone(), directions: Vec::new(), quality: Vec::new(), groups: Vec::new(), errors: Vec::new(), todo: Vec::new() };
    match outcome {
        Ok(Ok(d)) => {
            let a = &d.analysis;
            row.format = Some(a.format.name().to_string());
            row.compression = a.compression.map(str::to_string);
            row.frames = a.frames;
            row.tcp_segments = a.tcp_segments;
            row.connections = a.connections.len() as u64;
            row.interface_drops = a.interface_drops;
            row.attempts = a.attempts.attempts;
            row.failed_attempts = a.attempts.failed;
            row.attempts_kind = a.attempts.kind.map(str::to_string);
            row.attempts_text = a.attempts.text.clone();
            row.first_time = a.connections.iter().map(|c| c.first_time).min_by(f64::total_cmp);
            row.capture_warnings = capture_warnings(&d);
            for c in &d.diagnoses {
                result.directions.extend(direction_rows(&file, c));
                result.todo.extend(todo_rows(&file, c));
                result.quality.extend(c.capture_quality.iter().map(|q| QualityRow {
                    file: file.clone(),
                    connection: c.id.number,
                    kind: q.kind.to_string(),
                    text: q.text.clone(),
                    weakens: q.weakens.iter().map(|s| s.to_string()).collect(),
                    numbers: to_json_text(&q.numbers),
                }));
            }
            row.directions = result.directions.len() as u64;
            result.groups = group_rows(&file, &d.groups);
            if let Some(e) = &a.error {
                let er = error_row(&file, e);
                row.exit_code = er.exit_code;
                row.error = Some(er.message.clone());
                result.errors.push(er);
            }
            analysis = Some(d.analysis);
        }
        Ok(Err(e)) => {
            let er = error_row(&file, &e);
            row.exit_code = er.exit_code;
            row.error = Some(er.message.clone());
            result.errors.push(er);
        }
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            let message = format!("{file}: internal error while diagnosing: {msg} (please report it with the capture)");
            row.exit_code = 1;
            row.error = Some(message.clone());
            result.errors.push(ErrorRow { file: file.clone(), kind: "internal".into(), exit_code: 1, message, frames_before: 0 });
        }
    }
    row.elapsed_s = start.elapsed().as_secs_f64();
    result.file = row;
    (result, analysis)
}
