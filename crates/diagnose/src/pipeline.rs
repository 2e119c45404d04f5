//! The one pipeline every entry point runs: segments go to a [`Recorder`]
//! as the flow table reads them (a file, a live capture, Arrow batches),
//! and the capture's verdicts come out with everything that depends on
//! more than one connection: the flow groups, the shared-path weighing,
//! what the capture's own drops and cut weaken, the request latency.
//!
//! - A file (`diagnose`, `report`, `batch`, the Python package):
//!   [`Diagnoser`]: feed [`Diagnoser::sink`] while the capture is read,
//!   then [`Diagnoser::finish`] gives the [`CaptureDiagnosis`].
//! - A live capture (`watch`): [`Live`]. Connections are diagnosed as
//!   they stand; one the flow table retires is held, records and all,
//!   until its two hosts have no live connection left, and only then
//!   diagnosed for good, beside every connection of those hosts it could
//!   share a bucket or a queue with (`groups`, `quality::shared_path`:
//!   both compare only connections of the same two hosts that overlap in
//!   time). So the exit report says what `diagnose` says of the same
//!   packets in a file, groups included. Memory stays bounded: at most
//!   [`MAX_HELD`] retired connections are held (past it, the host pair
//!   holding the most is settled with what it has).
//! The last stage of the crate: nothing in it imports this module.

use crate::groups::{self, FlowGroup};
use crate::latency::{connection_latency, ConnLatency};
use crate::model::ConnectionDiagnosis;
use crate::record::Records;
use crate::connection::diagnose_connection;
use crate::options::Options;
use crate::quality;
use crate::recorder::Recorder;
use std::collections::{HashMap, HashSet, VecDeque};
use tcpwhy_flow::{CaptureAnalysis, ConnectionSummary};

/// Diagnoses the connections of one capture point: the flows compared
/// with each other first (a group's policer verdict stands in for a
/// member's own when the member alone fails the test), then each
/// connection, then the verdicts that assume a flow was alone weighed
/// against the connections beside it (`quality::shared_path`). Every
/// group and overlap is between connections of the same two hosts at the
/// same time, so a set that holds all of a host pair's overlapping
/// connections gives each of them the verdict the whole capture gives.
pub fn diagnose_connections(connections: &[ConnectionSummary], records: &Records, opts: &Options) -> Vec<ConnectionDiagnosis> {
    let groups = groups::policed_groups(connections, records, opts);
    let mut diags: Vec<ConnectionDiagnosis> =
        connections.iter().map(|c| diagnose_connection(c, records.get(c.id), opts, &groups)).collect();
    quality::shared_path(&mut diags, connections);
    diags
}

/// Diagnoses every connection of a capture: [`diagnose_connections`], and
/// what the capture as a whole says of all of them (packets it dropped, a
/// cut part-way).
pub fn diagnose_all(capture: &CaptureAnalysis, recorder: &Recorder, opts: &Options) -> Vec<ConnectionDiagnosis> {
    let mut diags = diagnose_connections(&capture.connections, recorder.records(), opts);
    capture_drops(&mut diags, capture);
    // A capture cut part-way: its last transfers are seen only up to the cut.
    match &capture.error {
        Some(tcpwhy_wire::CaptureError::Truncated { frames, .. }) => {
            quality::capture_cut(&mut diags, &capture.connections, *frames, "the file ends there, in the middle of a record")
        }
        Some(tcpwhy_wire::CaptureError::Corrupt { frames, .. }) => {
            quality::capture_cut(&mut diags, &capture.connections, *frames, "the file is corrupt from there on")
        }
        _ => {}
    }
    diags
}

/// Packets the capture's own counters say it dropped weaken every verdict.
fn capture_drops(diags: &mut [ConnectionDiagnosis], capture: &CaptureAnalysis) {
    if let Some(n) = capture.interface_drops.filter(|n| *n > 0) {
        let counters = match capture.format {
            tcpwhy_wire::CaptureFormat::Live => {
                "the kernel's counters for this live capture (pcap_stats): the capture ring ran full, or the interface dropped them"
            }
            _ => "pcapng interface statistics: interface and OS drops",
        };
        quality::capture_dropped(diags, n, counters);
    }
}

/// The request latency of each connection that has exchanges.
fn latencies(connections: &[ConnectionSummary], records: &Records) -> Vec<ConnLatency> {
    connections.iter().filter_map(|cs| records.get(cs.id).and_then(|r| connection_latency(cs, r))).collect()
}

/// One capture diagnosed.
#[derive(Debug)]
pub struct CaptureDiagnosis {
    pub analysis: CaptureAnalysis,
    /// One per connection (in `analysis.connections`' order for a file).
    pub diagnoses: Vec<ConnectionDiagnosis>,
    pub latency: Vec<ConnLatency>,
    /// The flow groups (`groups::describe`).
    pub groups: Vec<FlowGroup>,
    /// The per-segment records the diagnosis was made from (the report's
    /// group series read them).
    pub recorder: Recorder,
}

/// A capture read once and diagnosed: feed [`Diagnoser::sink`] with the
/// read (alone, through `tcpwhy_flow::Tee` beside another sink, or as the
/// shard sink of a sharded read), then [`Diagnoser::finish`].
#[derive(Debug)]
pub struct Diagnoser {
    rec: Recorder,
    opts: Options,
}

impl Diagnoser {
    pub fn new(opts: Options) -> Diagnoser {
        Diagnoser { rec: Recorder::new(opts), opts }
    }

    /// Where the read's segments go.
    pub fn sink(&mut self) -> &mut Recorder {
        &mut self.rec
    }

    /// The capture's verdicts, once its read is done.
    pub fn finish(self, analysis: CaptureAnalysis) -> CaptureDiagnosis {
        let diagnoses = diagnose_all(&analysis, &self.rec, &self.opts);
        let latency = latencies(&analysis.connections, self.rec.records());
        let groups = groups::describe(&diagnoses, &analysis.connections, self.rec.records());
        CaptureDiagnosis { analysis, diagnoses, latency, groups, recorder: self.rec }
    }
}

/// Retired connections held for their host pair's verdicts at most: past
/// it, the pair that holds the most is settled with what it has (its
/// records count against the recorder's budget meanwhile).
pub const MAX_HELD: usize = 1024;

/// Two hosts, in either direction: the key groups and the shared-path
/// weighing compare connections by.
type HostPair = (String, String);

/// The host pair of a connection.
pub fn host_pair(c: &ConnectionSummary) -> HostPair {
    let (a, b) = (&c.a.addr, &c.b.addr);
    if a <= b {
        (a.clone(), b.clone())
    } else {
        (b.clone(), a.clone())
    }
}

/// The pipeline on a live capture (see the module docs).
#[derive(Debug)]
pub struct Live {
    opts: Options,
    rec: Recorder,
    /// Retired connections by host pair, waiting for the pair to go quiet.
    held: HashMap<HostPair, Vec<ConnectionSummary>>,
    /// Settled: each retired connection's last diagnosis and latency, the
    /// oldest dropped past `max_kept`.
    settled: VecDeque<(ConnectionDiagnosis, Option<ConnLatency>)>,
    groups: VecDeque<FlowGroup>,
    max_kept: usize,
    dropped: u64,
}

impl Live {
    /// `max_kept`: settled diagnoses (and flow groups) kept for the exit
    /// report; the oldest past it are dropped and counted.
    pub fn new(opts: Options, max_kept: usize) -> Live {
        Live {
            opts,
            rec: Recorder::new(opts),
            held: HashMap::new(),
            settled: VecDeque::new(),
            groups: VecDeque::new(),
            max_kept: max_kept.max(1),
            dropped: 0,
        }
    }

    /// Where the live read's segments go.
    pub fn sink(&mut self) -> &mut Recorder {
        &mut self.rec
    }

    pub fn recorder(&self) -> &Recorder {
        &self.rec
    }

    /// Retired connections held now.
    pub fn held(&self) -> usize {
        self.held.values().map(Vec::len).sum()
    }

    /// Live connections diagnosed as they stand, with the retired
    /// connections held for their hosts beside them.
    pub fn diagnose(&self, live: &[ConnectionSummary]) -> Vec<ConnectionDiagnosis> {
        let pairs: HashSet<HostPair> = if self.held.is_empty() { HashSet::new() } else { live.iter().map(host_pair).collect() };
        let mut beside = self.held.iter().filter(|(k, _)| pairs.contains(*k)).flat_map(|(_, h)| h).peekable();
        if beside.peek().is_none() {
            return diagnose_connections(live, self.rec.records(), &self.opts);
        }
        let conns: Vec<ConnectionSummary> = live.iter().chain(beside).cloned().collect();
        let mut diags = diagnose_connections(&conns, self.rec.records(), &self.opts);
        diags.truncate(live.len());
        diags
    }

    /// A connection the flow table retired: its verdict now, beside the
    /// retired connections of its hosts still held (the live ones are in
    /// [`Live::diagnose`]'s). It is held until [`Live::settle`].
    pub fn ended(&mut self, s: ConnectionSummary) -> ConnectionDiagnosis {
        let key = host_pair(&s);
        // Beside the held ones it overlapped (a busy pair may hold many).
        let v = self.held.entry(key).or_default();
        let mut beside: Vec<ConnectionSummary> =
            v.iter().filter(|h| h.first_time <= s.last_time && s.first_time <= h.last_time).cloned().collect();
        beside.push(s.clone());
        v.push(s);
        let groups = groups::policed_groups(&beside, self.rec.records(), &self.opts);
        let last = &beside[beside.len() - 1];
        let d = diagnose_connection(last, self.rec.get(last.id), &self.opts, &groups);
        if self.held() > MAX_HELD {
            if let Some(k) = self.held.iter().max_by_key(|(_, v)| v.len()).map(|(k, _)| k.clone()) {
                self.settle_pair(&k);
            }
        }
        d
    }

    /// Settles the held connections of every host pair `live` says has no
    /// live connection: no later connection of theirs can overlap them.
    pub fn settle(&mut self, live: impl Fn(&HostPair) -> bool) {
        let quiet: Vec<HostPair> = self.held.keys().filter(|k| !live(k)).cloned().collect();
        for k in quiet {
            self.settle_pair(&k);
        }
    }

    /// Diagnoses a host pair's held connections for good, and lets their
    /// records go.
    fn settle_pair(&mut self, key: &HostPair) {
        let Some(conns) = self.held.remove(key) else { return };
        let diags = diagnose_connections(&conns, self.rec.records(), &self.opts);
        for g in groups::describe(&diags, &conns, self.rec.records()) {
            self.groups.push_back(g);
            if self.groups.len() > self.max_kept {
                self.groups.pop_front();
            }
        }
        for (c, d) in conns.iter().zip(diags) {
            let latency = self.rec.get(c.id).and_then(|r| connection_latency(c, r));
            self.rec.remove(c.id);
            self.settled.push_back((d, latency));
            if self.settled.len() > self.max_kept {
                self.settled.pop_front();
                self.dropped += 1;
            }
        }
    }

    /// The exit report: the connections still live (`analysis`, from the
    /// flow table's finish) diagnosed together with those held, then
    /// every settled one; and how many settled diagnoses were dropped past
    /// `max_kept`.
    pub fn finish(mut self, mut analysis: CaptureAnalysis) -> (CaptureDiagnosis, u64) {
        let mut held: Vec<ConnectionSummary> = std::mem::take(&mut self.held).into_values().flatten().collect();
        held.sort_by_key(|c| c.id);
        let live = std::mem::replace(&mut analysis.connections, held);
        analysis.connections.extend(live);
        let mut diagnoses = diagnose_all(&analysis, &self.rec, &self.opts);
        let mut latency = latencies(&analysis.connections, self.rec.records());
        let mut groups: Vec<FlowGroup> = self.groups.into_iter().collect();
        groups.extend(groups::describe(&diagnoses, &analysis.connections, self.rec.records()));
        groups.sort_by(|x, y| x.first_time.total_cmp(&y.first_time));
        let (mut settled, settled_latency): (Vec<_>, Vec<_>) = self.settled.into_iter().unzip();
        capture_drops(&mut settled, &analysis);
        diagnoses.extend(settled);
        diagnoses.sort_by_key(|c| c.id.number);
        latency.extend(settled_latency.into_iter().flatten());
        latency.sort_by_key(|l| l.connection);
        (CaptureDiagnosis { analysis, diagnoses, latency, groups, recorder: self.rec }, self.dropped)
    }
}
