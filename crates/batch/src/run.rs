//! Many captures over every core: files are diagnosed in parallel (one
//! file per task on a rayon pool, each file alone on its thread), and their
//! rows go through a bounded channel to the one thread that writes the
//! dataset. Memory is the files in flight (at most `jobs` captures plus the
//! channel's few results) and the rows of one commit, whatever the number of
//! files.

use crate::dataset::{Dataset, DatasetError};
use crate::pairs::{diagnose_pair, pair_key, PairJob};
use crate::rows::{diagnose_file, FileResult, Input};
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use tcpwhy_diagnose::Options;

/// What a batch did.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    /// Captures read in this run.
    pub files: usize,
    /// Captures already in the dataset (same path, size and mtime).
    pub skipped_done: usize,
    /// Files found in directories that are not captures (`Input::skipped`):
    /// listed in `files` with why, not read.
    pub not_captures: usize,
    pub errors: usize,
    pub packets: u64,
    pub connections: u64,
    pub directions: u64,
    /// `--pairs`: pairs of captures compared in this run, those already
    /// compared by an earlier one, and the connections paired.
    pub pairs: usize,
    pub pairs_done: usize,
    pub paired_connections: u64,
}

/// Diagnoses `inputs` on `jobs` threads into `ds`, skipping those it has
/// already committed. `on_file` sees each result (for a progress bar).
pub fn run(
    inputs: Vec<Input>,
    ds: &mut Dataset,
    opts: &Options,
    jobs: usize,
    mut on_file: impl FnMut(&FileResult),
) -> Result<Summary, DatasetError> {
    let mut summary = Summary::default();
    let todo: Vec<Input> = inputs
        .into_iter()
        .filter(|i| {
            let done = ds.is_done(i);
            summary.not_captures += usize::from(i.skipped.is_some());
            summary.skipped_done += usize::from(done && i.skipped.is_none());
            !done
        })
        .collect();
    let root = ds.root().to_path_buf();
    run_jobs(&todo, jobs, &root, |input| diagnose_file(input, opts), |r| {
        summary.count(&r);
        on_file(&r);
        ds.push(r)
    })?;
    ds.commit()?;
    Ok(summary)
}

/// Compares each pair of captures (`crate::pairs`) on `jobs` threads into
/// `ds`, with each capture's own rows written once: by the first pair that
/// lists it, unless an earlier run wrote them. Pairs already compared are
/// skipped. `on_file` sees each capture's result.
pub fn run_pairs(
    pairs: Vec<[Input; 2]>,
    ds: &mut Dataset,
    opts: &Options,
    jobs: usize,
    mut on_file: impl FnMut(&FileResult),
) -> Result<Summary, DatasetError> {
    let mut summary = Summary::default();
    let mut owned = std::collections::HashSet::new();
    let mut todo = Vec::new();
    for inputs in pairs {
        if ds.is_pair_done(&pair_key(&inputs)) {
            summary.pairs_done += 1;
            continue;
        }
        let diagnose = [0, 1].map(|k| {
            let i = &inputs[k];
            let first = owned.insert((i.path.clone(), i.size, i.mtime_ns));
            let done = ds.is_done(i);
            summary.skipped_done += usize::from(first && done);
            first && !done
        });
        todo.push(PairJob { inputs, diagnose });
    }
    // each pair's two captures are two tasks of the same pool
    let root = ds.root().to_path_buf();
    run_jobs(&todo, jobs, &root, |job| diagnose_pair(job, opts), |r| {
        for f in &r.files {
            summary.count(f);
            on_file(f);
        }
        summary.pairs += 1;
        summary.paired_connections += r.pairs.iter().filter(|p| p.connection_0.is_some()).count() as u64;
        ds.push_pair(r)
    })?;
    ds.commit()?;
    Ok(summary)
}

impl Summary {
    fn count(&mut self, r: &FileResult) {
        self.files += usize::from(r.file.skipped.is_none());
        self.errors += usize::from(!r.errors.is_empty());
        self.packets += r.file.frames;
        self.connections += r.file.connections;
        self.directions += r.file.directions;
    }
}

/// Runs `work` over `todo` on `jobs` workers (a rayon pool of that many
/// threads; a job may use more of it with `rayon::join`) and hands each
/// result to `take` on this thread, through a bounded channel: memory is
/// the jobs in flight. An error from `take` stops the workers.
fn run_jobs<J: Sync, R: Send>(
    todo: &[J],
    jobs: usize,
    root: &std::path::Path,
    work: impl Fn(&J) -> R + Sync,
    mut take: impl FnMut(R) -> Result<(), DatasetError>,
) -> Result<(), DatasetError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs.max(1))
        .thread_name(|i| format!("tcpwhy-batch-{i}"))
        .build()
        .map_err(|e| DatasetError::Io { path: root.into(), source: std::io::Error::other(e.to_string()) })?;
    let (tx, rx) = mpsc::sync_channel::<R>(jobs.max(1) * 2);
    let stop = AtomicBool::new(false);
    let mut result = Ok(());
    std::thread::scope(|s| {
        let (stop, work) = (&stop, &work);
        s.spawn(move || {
            pool.install(|| {
                todo.par_iter().with_max_len(1).for_each_with(tx, |tx, job| {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    if tx.send(work(job)).is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                });
            });
        });
        for r in rx {
            if let Err(e) = take(r) {
                stop.store(true, Ordering::Relaxed);
                result = Err(e);
                break; // dropping the receiver ends the workers' sends
            }
        }
    });
    result
}
