//! tcpwhy over many captures. `diagnose_file` turns one capture into rows
//! of the batch tables (schema `tcpwhy.batch/1`, docs/batch.md): one row
//! per connection direction with its primary, limits, findings and fixes;
//! capture-quality findings; host-pair groups; one row per file; and an
//! error row for each file that could not be read (or not to its end).
//! `run` diagnoses many files on every core into a hive-partitioned,
//! resumable Parquet dataset (`Dataset`); `run_pairs` compares listed
//! pairs of captures of one path (`pairs`: the `pairs` table) and
//! diagnoses each capture too. The CLI's `tcpwhy batch` and the
//! Python package (`tcpwhy.diagnose`, `tcpwhy.ray`) are built on this.

pub mod dataset;
pub mod inputs;
pub mod pairs;
pub mod rows;
pub mod run;
pub mod tables;

pub use dataset::{Dataset, DatasetError, PartitionBy};
pub use rows::{diagnose_capture, diagnose_file, Diagnosed, FileResult, Input};
pub use run::{run, run_pairs, Summary};
pub use tables::{Table, SCHEMA};
