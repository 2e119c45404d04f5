//! Reading captures as every command does: with a progress bar on a
//! terminal, on the threads `--jobs` allows, a capture that cannot be
//! opened reported on stderr, and the exit code the reads give.

use crate::exit;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::{self, IsTerminal};
use tcpwhy_flow::{analyze_capture, analyze_capture_sharded, AnalyzeOptions, CaptureAnalysis, SegmentSink, ShardSink};
use tcpwhy_wire::CaptureReader;

/// How `--jobs N` threads are spent on `files` captures: captures read at
/// once, and the threads to spare for each beside the one reading it (its
/// connections sharded over them, or, where the analysis needs one order,
/// the decoding moved to one).
pub(crate) fn thread_plan(jobs: Option<usize>, files: usize) -> (usize, usize) {
    let threads = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    let at_once = threads.clamp(1, files.max(1));
    (at_once, threads / at_once - 1)
}

pub(crate) fn progress_bar(total: Option<u64>, quiet: bool) -> Option<ProgressBar> {
    let total = total?;
    if quiet || !io::stderr().is_terminal() || total < (16 << 20) {
        return None;
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    Some(bar)
}

/// Reads one capture, reporting problems on stderr. Returns None if the file
/// could not be read at all.
pub(crate) fn read_one(
    path: &std::path::Path,
    options: AnalyzeOptions,
    sink: &mut impl SegmentSink,
    quiet: bool,
) -> Option<CaptureAnalysis> {
    read_with(path, quiet, |reader, progress| analyze_capture(reader, options, sink, progress))
}

/// [`read_one`] with the connections sharded over `shards` threads (the
/// same results; `tcpwhy_flow::analyze_capture_sharded`).
pub(crate) fn read_sharded(
    path: &std::path::Path,
    options: AnalyzeOptions,
    shards: usize,
    sink: &mut impl ShardSink,
    quiet: bool,
) -> Option<CaptureAnalysis> {
    read_with(path, quiet, |reader, progress| analyze_capture_sharded(reader, options, shards, sink, progress))
}

/// Opens a capture and analyses it with a progress bar; a capture that
/// cannot be opened is reported and gives None.
pub(crate) fn read_with(
    path: &std::path::Path,
    quiet: bool,
    analyze: impl FnOnce(CaptureReader, &mut dyn FnMut(u64)) -> CaptureAnalysis,
) -> Option<CaptureAnalysis> {
    let reader = match CaptureReader::open(path) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tcpwhy: {e}");
            return None;
        }
    };
    let bar = progress_bar(reader.total_bytes(), quiet);
    if let Some(b) = &bar {
        b.set_message(path.display().to_string());
    }
    let analysis = analyze(reader, &mut |bytes| {
        if let Some(b) = &bar {
            b.set_position(bytes);
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if let Some(e) = &analysis.error {
        eprintln!("tcpwhy: warning: {e}");
    }
    Some(analysis)
}

pub(crate) fn exit_code(analyses: &[CaptureAnalysis], unreadable: usize) -> u8 {
    if unreadable > 0 {
        exit::UNREADABLE
    } else if analyses.iter().any(|a| a.error.is_some()) {
        exit::PARTIAL
    } else {
        exit::OK
    }
}
