//! `tcpwhy annotate CAPTURE -o OUT.pcapng`: the capture again, frame for
//! frame, as pcapng with the diagnosis in packet comments (the EPB's
//! opt_comment, RFC draft-ietf-opsawg-pcapng section 3.5), so Wireshark
//! shows it beside the packets: `frame.comment contains "receiver_window"`
//! filters the segments sent while the receiver's window held the sender.
//!
//! Each data segment of a diagnosed direction says its phase (the state of
//! its interval, `timeline`) and the direction's primary; each frame a
//! finding cites as evidence says the finding. The capture is read twice:
//! once to diagnose it (`tcpwhy_batch::rows::diagnose_capture`, the pipeline
//! `batch` runs), once to copy it out. Memory: the diagnosis, and the
//! findings' evidence frames (a few per finding).

use crate::exit;
use clap::Args;
use pcap_parser::pcapng::{EnhancedPacketBlock, InterfaceDescriptionBlock, SectionHeaderBlock};
use pcap_parser::{Linktype, OptionCode, PcapNGOption, ToVec};
use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use tcpwhy_diagnose::{ConnectionDiagnosis, Options};
use tcpwhy_wire::{CaptureError, CaptureReader, Frame};

pub const ANNOTATE_AFTER_HELP: &str = "\
Writes OUT as pcapng with the same frames, times and interfaces, and a
comment on each frame the diagnosis speaks of:

  tcpwhy conn 1 10.0.0.1:5201 -> 10.0.0.2:40000 phase receiver_window (primary receiver_window)
  tcpwhy finding window_plateau conn 1 10.0.0.1:5201 -> 10.0.0.2:40000: the receiver's ...

In Wireshark or tshark, filter with
  frame.comment contains \"receiver_window\"
  tshark -r OUT.pcapng -Y 'frame.comment contains \"finding\"' -T fields -e frame.number -e frame.comment

Exit codes: 0 written; 1 OUT could not be written; 3 CAPTURE could not be
read; 4 CAPTURE is cut or corrupt part-way (OUT holds the frames before it).";

#[derive(Args, Clone)]
pub struct AnnotateArgs {
    /// Capture file (pcap, pcapng; .gz/.xz/.zst).
    pub file: PathBuf,
    /// The pcapng file to write.
    #[arg(short = 'o', long, value_name = "OUT.pcapng")]
    pub output: PathBuf,
}

/// A comment is one pcapng option: at most 65,535 bytes.
const COMMENT_MAX_BYTES: usize = 65_535;
/// Nanosecond timestamps (if_tsresol 9: 10^-9 s).
const TSRESOL_NANOS: u8 = 9;

/// One diagnosed direction, found again by its endpoints and time.
struct Direction {
    label: String,
    primary: &'static str,
    first_s: f64,
    last_s: f64,
    /// (start, end, state) of each run, in order.
    runs: Vec<(f64, f64, &'static str)>,
}

pub fn run(a: &AnnotateArgs) -> u8 {
    let opts = Options::default();
    let d = match tcpwhy_batch::rows::diagnose_capture(&a.file, &opts) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("tcpwhy annotate: {}: {e}", a.file.display());
            return exit::UNREADABLE;
        }
    };
    let (directions, findings) = index(&d.diagnoses);
    let reader = match CaptureReader::open(&a.file) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tcpwhy annotate: {}: {e}", a.file.display());
            return exit::UNREADABLE;
        }
    };
    let out = match File::create(&a.output) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("tcpwhy annotate: {}: {e}", a.output.display());
            return exit::FAILURE;
        }
    };
    let mut w = Writer { out: BufWriter::new(out), interfaces: HashMap::new(), error: None, frames: 0, commented: 0 };
    if let Err(e) = w.header() {
        eprintln!("tcpwhy annotate: {}: {e}", a.output.display());
        return exit::FAILURE;
    }
    let summary = reader.for_each_frame(|f| {
        if w.error.is_some() {
            return;
        }
        let mut comments: Vec<String> = phase_of(f, &directions).into_iter().collect();
        if let Some(v) = findings.get(&f.number) {
            comments.extend(v.iter().cloned());
        }
        if let Err(e) = w.frame(f, &comments) {
            w.error = Some(e);
        }
    });
    if let Some(e) = w.error.take().or_else(|| w.out.flush().err()) {
        eprintln!("tcpwhy annotate: {}: {e}", a.output.display());
        return exit::FAILURE;
    }
    eprintln!(
        "tcpwhy annotate: wrote {} ({} frames, {} with comments)",
        a.output.display(),
        w.frames,
        w.commented
    );
    match summary.error {
        Some(CaptureError::Truncated { .. } | CaptureError::Corrupt { .. }) => {
            if let Some(e) = &summary.error {
                eprintln!("tcpwhy annotate: warning: {}: {e}; {} holds the frames before it", a.file.display(), a.output.display());
            }
            exit::PARTIAL
        }
        Some(e) => {
            eprintln!("tcpwhy annotate: {}: {e}", a.file.display());
            exit::UNREADABLE
        }
        None => exit::OK,
    }
}

/// The directions by their (sender, receiver) endpoints, and each finding's
/// evidence frames with the finding's comment.
#[allow(clippy::type_complexity)]
fn index(diags: &[ConnectionDiagnosis]) -> (HashMap<(String, String), Vec<Direction>>, HashMap<u64, Vec<String>>) {
    let mut dirs: HashMap<(String, String), Vec<Direction>> = HashMap::new();
    let mut findings: HashMap<u64, Vec<String>> = HashMap::new();
    for c in diags {
        for d in &c.directions {
            let label = format!("conn {} {} -> {}", c.id.number, d.sender, d.receiver);
            let runs: Vec<(f64, f64, &'static str)> = d.timeline.iter().map(|r| (r.start, r.end, r.state.as_str())).collect();
            let (first_s, last_s) = (runs.first().map_or(c.first_time, |r| r.0), runs.last().map_or(c.first_time, |r| r.1));
            for f in &d.findings {
                let text: String = f.text.chars().take(400).collect();
                for fr in &f.evidence.frames {
                    findings.entry(*fr).or_default().push(format!("tcpwhy finding {} {label}: {text}", f.kind));
                }
            }
            dirs.entry((d.sender.clone(), d.receiver.clone())).or_default().push(Direction {
                label,
                primary: d.primary.as_str(),
                first_s,
                last_s,
                runs,
            });
        }
    }
    (dirs, findings)
}

/// The phase comment of a data segment of a diagnosed direction.
fn phase_of(f: &Frame<'_>, dirs: &HashMap<(String, String), Vec<Direction>>) -> Option<String> {
    let seg = tcpwhy_wire::decode_frame(f.link, f.data, f.orig_len).ok()?;
    if seg.payload_len == 0 {
        return None;
    }
    // as the diagnosis writes an endpoint (IPv6 in brackets)
    let ep = |a: std::net::IpAddr, p: u16| match a {
        std::net::IpAddr::V6(v6) => format!("[{v6}]:{p}"),
        std::net::IpAddr::V4(v4) => format!("{v4}:{p}"),
    };
    let key = (ep(seg.src.to_ip(), seg.src_port), ep(seg.dst.to_ip(), seg.dst_port));
    let t = f.time_ns as f64 / 1e9;
    let d = dirs.get(&key)?.iter().find(|d| t >= d.first_s - 1e-9 && t <= d.last_s + 1e-9)?;
    let at = d.runs.partition_point(|r| r.1 <= t).min(d.runs.len().saturating_sub(1));
    let state = d.runs.get(at)?.2;
    Some(format!("tcpwhy {} phase {state} (primary {})", d.label, d.primary))
}

struct Writer {
    out: BufWriter<File>,
    /// Capture interface -> pcapng interface id (one IDB each, written
    /// before its first packet).
    interfaces: HashMap<(u32, u32), u32>,
    error: Option<io::Error>,
    frames: u64,
    commented: u64,
}

fn gen_err(e: impl std::fmt::Debug) -> io::Error {
    io::Error::other(format!("pcapng: {e:?}"))
}

impl Writer {
    fn header(&mut self) -> io::Result<()> {
        let mut shb = SectionHeaderBlock {
            block_type: 0,
            block_len1: 0,
            bom: 0,
            major_version: 1,
            minor_version: 0,
            section_len: -1,
            options: vec![option(OptionCode(4), "tcpwhy annotate")],
            block_len2: 0,
        };
        self.out.write_all(&shb.to_vec().map_err(gen_err)?)
    }

    fn frame(&mut self, f: &Frame<'_>, comments: &[String]) -> io::Result<()> {
        let linktype = f.link.linktype();
        let next = self.interfaces.len() as u32;
        let if_id = match self.interfaces.get(&(f.interface, linktype)) {
            Some(id) => *id,
            None => {
                let mut idb = InterfaceDescriptionBlock {
                    block_type: 0,
                    block_len1: 0,
                    linktype: Linktype(linktype as i32),
                    reserved: 0,
                    snaplen: 0,
                    options: Vec::new(),
                    block_len2: 0,
                    if_tsresol: TSRESOL_NANOS,
                    if_tsoffset: 0,
                };
                self.out.write_all(&idb.to_vec().map_err(gen_err)?)?;
                self.interfaces.insert((f.interface, linktype), next);
                next
            }
        };
        let ts = f.time_ns.max(0) as u64;
        // one opt_comment each (pcapng allows several; Wireshark lists them)
        let options: Vec<PcapNGOption> = comments.iter().map(|c| option(OptionCode::Comment, c)).collect();
        if !options.is_empty() {
            self.commented += 1;
        }
        let mut epb = EnhancedPacketBlock {
            block_type: 0,
            block_len1: 0,
            if_id,
            ts_high: (ts >> 32) as u32,
            ts_low: ts as u32,
            caplen: f.data.len() as u32,
            origlen: f.orig_len.max(f.data.len() as u32),
            data: f.data,
            options,
            block_len2: 0,
        };
        self.frames += 1;
        self.out.write_all(&epb.to_vec().map_err(gen_err)?)
    }
}

/// A UTF-8 option, cut to what one option holds (at a character boundary).
fn option(code: OptionCode, text: &str) -> PcapNGOption<'static> {
    let mut end = text.len().min(COMMENT_MAX_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let bytes = text.as_bytes()[..end].to_vec();
    PcapNGOption { code, len: bytes.len() as u16, value: Cow::Owned(bytes) }
}
