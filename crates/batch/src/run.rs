//! Many captures over every core: files are diagnosed in parallel (one
//! file per task on a rayon pool, each file alone on its thread), and their
//! rows go through a bounded channel to the one thread that writes the
//! dataset. Memory is the files in flight (at most `jobs` captures plus the
//! channel's few results) and the rows of one commit, whatever the number of
//! files.

use crate::dataset::{Dataset, DatasetError};
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
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs.max(1))
        .thread_name(|i| format!("tcpwhy-batch-{i}"))
        .build()
        .map_err(|e| DatasetError::Io { path: ds.root().into(), source: std::io::Error::other(e.to_string()) })?;
    let (tx, rx) = mpsc::sync_channel::<FileResult>(jobs.max(1) * 2);
    let stop = AtomicBool::new(false);
    let mut result = Ok(());
    std::thread::scope(|s| {
        let stop = &stop;
        s.spawn(move || {
            pool.install(|| {
                todo.par_iter().with_max_len(1).for_each_with(tx, |tx, input| {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    if tx.send(diagnose_file(input, opts)).is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                });
            });
        });
        for r in rx {
            summary.files += usize::from(r.file.skipped.is_none());
            summary.errors += usize::from(!r.errors.is_empty());
            summary.packets += r.file.frames;
            summary.connections += r.file.connections;
            summary.directions += r.file.directions;
            on_file(&r);
            if let Err(e) = ds.push(r) {
                stop.store(true, Ordering::Relaxed);
                result = Err(e);
                break; // dropping the receiver ends the workers' sends
            }
        }
    });
    result?;
    ds.commit()?;
    Ok(summary)
}
