//! A batch's output directory: one sub-directory per table, hive-partitioned
//! (`directions/date=2026-11-24/part-….parquet`), written in commits.
//!
//! A commit writes every table's rows for a set of finished files, each part
//! first as `….parquet.tmp` then renamed, the `files` table last. A resumed
//! batch reads the `files` table: a capture listed there with the same size
//! and modification time is skipped; parts of other tables whose commit has
//! no `files` part (the run was killed mid-commit) are removed, and their
//! captures are read again. So an interrupted batch loses at most the files
//! of its last, uncommitted set, and never gives a row twice.

use crate::pairs::{PairKey, PairResult, PairRow};
use crate::rows::{FileResult, Input};
use crate::tables::{Table, SCHEMA};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Commit after this many files... (a killed run redoes at most these).
pub const COMMIT_FILES: usize = 256;
/// ...or this many rows in all tables (bounds the rows held in memory)...
pub const COMMIT_ROWS: usize = 100_000;
/// ...or when the oldest pending file finished this long ago.
pub const COMMIT_INTERVAL: Duration = Duration::from_secs(30);

const MANIFEST: &str = "_tcpwhy_batch.json";
const LOCK: &str = "_tcpwhy_batch.lock";
/// Hive's name for a partition whose key is unknown (null).
pub const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {msg}")]
    Parquet { path: PathBuf, msg: String },
    #[error("{0}: another tcpwhy batch (pid {1}) is writing here; wait for it, or remove the lock file if that process is gone")]
    Locked(PathBuf, String),
    #[error("{dir}: holds a batch partitioned by '{found}' (schema {schema}); this run asks for '{asked}': use another --out, or the same --partition-by")]
    Layout { dir: PathBuf, found: String, asked: String, schema: String },
    #[error("--partition-by '{0}': expected none, date, parent or prefix:N (N characters of the file name)")]
    BadPartition(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DatasetError + '_ {
    move |source| DatasetError::Io { path: path.to_path_buf(), source }
}

/// The key a batch's tables are partitioned by (hive style directories).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartitionBy {
    None,
    /// The capture's first frame, UTC, YYYY-MM-DD.
    Date,
    /// The name of the directory holding the capture (the host, when
    /// captures are kept one directory per host).
    Parent,
    /// The first N characters of the capture's file name.
    Prefix(usize),
}

impl std::str::FromStr for PartitionBy {
    type Err = DatasetError;
    fn from_str(s: &str) -> Result<Self, DatasetError> {
        match s {
            "none" => Ok(PartitionBy::None),
            "date" => Ok(PartitionBy::Date),
            "parent" | "host" => Ok(PartitionBy::Parent),
            _ => s
                .strip_prefix("prefix:")
                .and_then(|n| n.parse().ok())
                .filter(|n| *n > 0)
                .map(PartitionBy::Prefix)
                .ok_or_else(|| DatasetError::BadPartition(s.into())),
        }
    }
}

impl std::fmt::Display for PartitionBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PartitionBy::None => write!(f, "none"),
            PartitionBy::Date => write!(f, "date"),
            PartitionBy::Parent => write!(f, "parent"),
            PartitionBy::Prefix(n) => write!(f, "prefix:{n}"),
        }
    }
}

impl PartitionBy {
    /// The hive column name.
    pub fn column(&self) -> Option<&'static str> {
        match self {
            PartitionBy::None => None,
            PartitionBy::Date => Some("date"),
            PartitionBy::Parent => Some("parent"),
            PartitionBy::Prefix(_) => Some("prefix"),
        }
    }

    /// The partition value of one file's rows (escaped for a directory name).
    pub fn value(&self, r: &FileResult) -> Option<String> {
        let path = Path::new(&r.file.file);
        let v = match self {
            PartitionBy::None => return None,
            PartitionBy::Date => r.file.first_time.map(utc_date),
            PartitionBy::Parent => path
                .parent()
                .and_then(|p| std::fs::canonicalize(p).ok().or(Some(p.to_path_buf())))
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())),
            PartitionBy::Prefix(n) => path.file_name().map(|s| s.to_string_lossy().chars().take(*n).collect()),
        };
        Some(v.filter(|s| !s.is_empty()).map_or_else(|| NULL_PARTITION.to_string(), |s| escape(&s)))
    }
}

/// Percent-escapes what a hive partition directory name cannot hold.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b' ' | b'+' | b'@' | b',') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out == "." || out == ".." {
        out = out.replace('.', "%2E");
    }
    out
}

/// Unix seconds to a UTC calendar date (Howard Hinnant's civil_from_days).
pub fn utc_date(unix_s: f64) -> String {
    let days = (unix_s / 86_400.0).floor() as i64;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// What one commit wrote.
#[derive(Debug, Default, Clone)]
pub struct Committed {
    pub files: usize,
    /// Pairs of captures compared (`--pairs`).
    pub pairs: usize,
    pub rows: BTreeMap<&'static str, usize>,
}

/// An output directory being written.
pub struct Dataset {
    root: PathBuf,
    partition: PartitionBy,
    run_id: String,
    seq: u64,
    pending: Vec<FileResult>,
    /// Compared pairs waiting for the commit (`crate::pairs`).
    pending_pairs: Vec<PairResult>,
    pending_rows: usize,
    pending_since: Option<Instant>,
    done: HashSet<(String, u64, i64)>,
    done_pairs: HashSet<PairKey>,
    /// Rows written by this run, per table.
    pub written: Committed,
}

fn part_id(name: &str) -> Option<&str> {
    name.strip_prefix("part-")?.split('.').next()
}

fn parts(dir: &Path) -> Vec<PathBuf> {
    if !dir.is_dir() {
        return Vec::new();
    }
    let mut v: Vec<PathBuf> = walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("part-")))
        .collect();
    v.sort();
    v
}

impl Dataset {
    /// Opens (creating) `root` for `partition`, taking its lock, removing
    /// what an interrupted run left half-written, and reading what is done.
    pub fn open(root: &Path, partition: PartitionBy) -> Result<Dataset, DatasetError> {
        std::fs::create_dir_all(root).map_err(io(root))?;
        let lock = root.join(LOCK);
        take_lock(&lock)?;
        let manifest = root.join(MANIFEST);
        if let Ok(text) = std::fs::read_to_string(&manifest) {
            let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            let found = v["partition_by"].as_str().unwrap_or("").to_string();
            let schema = v["schema"].as_str().unwrap_or("").to_string();
            if found != partition.to_string() || schema != SCHEMA {
                let _ = std::fs::remove_file(&lock);
                return Err(DatasetError::Layout { dir: root.into(), found, asked: partition.to_string(), schema });
            }
        } else {
            let m = serde_json::json!({
                "schema": SCHEMA,
                "partition_by": partition.to_string(),
                "partition_column": partition.column(),
                "tables": Table::ALL.iter().map(|t| t.name()).collect::<Vec<_>>(),
                "created_by": concat!("tcpwhy ", env!("CARGO_PKG_VERSION")),
            });
            std::fs::write(&manifest, serde_json::to_vec_pretty(&m).unwrap_or_default()).map_err(io(&manifest))?;
        }
        // What is committed: the parts of the files table, and of the
        // pairs table for a commit of pairs alone (both written last).
        let mut committed: HashSet<String> = HashSet::new();
        let (mut done, mut done_pairs) = (HashSet::new(), HashSet::new());
        for t in [Table::Files, Table::Pairs] {
            for p in parts(&root.join(t.name())) {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("").to_string();
                if name.ends_with(".tmp") {
                    std::fs::remove_file(&p).map_err(io(&p))?;
                    continue;
                }
                if let Some(id) = part_id(&name) {
                    committed.insert(id.to_string());
                }
                match t {
                    Table::Files => read_done(&p, &mut done)?,
                    _ => read_done_pairs(&p, &mut done_pairs)?,
                }
            }
        }
        for t in Table::ALL.iter().filter(|t| !matches!(t, Table::Files | Table::Pairs)) {
            for p in parts(&root.join(t.name())) {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if name.ends_with(".tmp") || !part_id(name).is_some_and(|id| committed.contains(id)) {
                    std::fs::remove_file(&p).map_err(io(&p))?;
                }
            }
        }
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let run_id = format!("{:011x}{:05x}", now.as_millis(), std::process::id() & 0xfffff);
        Ok(Dataset {
            root: root.to_path_buf(),
            partition,
            run_id,
            seq: 0,
            pending: Vec::new(),
            pending_pairs: Vec::new(),
            pending_rows: 0,
            pending_since: None,
            done,
            done_pairs,
            written: Committed::default(),
        })
    }

    /// Files already committed with this size and modification time.
    pub fn is_done(&self, i: &Input) -> bool {
        self.done.contains(&(i.path.display().to_string(), i.size, i.mtime_ns))
    }

    pub fn done_count(&self) -> usize {
        self.done.len()
    }

    /// Pairs of captures already compared, with these sizes and times.
    pub fn is_pair_done(&self, key: &PairKey) -> bool {
        self.done_pairs.contains(key)
    }

    /// Adds one file's rows; commits when enough is pending.
    pub fn push(&mut self, r: FileResult) -> Result<(), DatasetError> {
        self.pending_rows += r.rows();
        self.pending.push(r);
        self.maybe_commit()
    }

    /// Adds one compared pair: its captures' rows and its `pairs` rows.
    pub fn push_pair(&mut self, mut r: PairResult) -> Result<(), DatasetError> {
        for f in std::mem::take(&mut r.files) {
            self.pending_rows += f.rows();
            self.pending.push(f);
        }
        self.pending_rows += r.pairs.len();
        self.pending_pairs.push(r);
        self.maybe_commit()
    }

    fn maybe_commit(&mut self) -> Result<(), DatasetError> {
        let since = *self.pending_since.get_or_insert_with(Instant::now);
        if self.pending.len() >= COMMIT_FILES || self.pending_rows >= COMMIT_ROWS || since.elapsed() >= COMMIT_INTERVAL {
            self.commit()?;
        }
        Ok(())
    }

    /// Writes what is pending, every table, `files` last.
    pub fn commit(&mut self) -> Result<(), DatasetError> {
        if self.pending.is_empty() && self.pending_pairs.is_empty() {
            return Ok(());
        }
        let id = format!("{}-{:06}", self.run_id, self.seq);
        self.seq += 1;
        let mut by_part: BTreeMap<Option<String>, Vec<&FileResult>> = BTreeMap::new();
        for r in &self.pending {
            by_part.entry(self.partition.value(r)).or_default().push(r);
        }
        for t in Table::OF_FILES {
            for (value, results) in &by_part {
                let rows: usize = results.iter().map(|r| t.rows_in(r)).sum();
                if rows == 0 {
                    continue;
                }
                let mut dir = self.root.join(t.name());
                if let (Some(col), Some(v)) = (self.partition.column(), value) {
                    dir = dir.join(format!("{col}={v}"));
                }
                std::fs::create_dir_all(&dir).map_err(io(&dir))?;
                let path = dir.join(format!("part-{id}.parquet"));
                let batch = t.batch(results).map_err(|e| DatasetError::Parquet { path: path.clone(), msg: e.to_string() })?;
                write_parquet(&path, &batch)?;
                *self.written.rows.entry(t.name()).or_default() += rows;
            }
        }
        // the pairs last, in one part (not partitioned: a pair's two
        // captures may fall in two partitions)
        let rows: Vec<&PairRow> = self.pending_pairs.iter().flat_map(|p| &p.pairs).collect();
        if !rows.is_empty() {
            let dir = self.root.join(Table::Pairs.name());
            std::fs::create_dir_all(&dir).map_err(io(&dir))?;
            let path = dir.join(format!("part-{id}.parquet"));
            let batch = crate::tables::to_batch(&Table::Pairs.schema(), rows.iter().copied())
                .map_err(|e| DatasetError::Parquet { path: path.clone(), msg: e.to_string() })?;
            write_parquet(&path, &batch)?;
            *self.written.rows.entry(Table::Pairs.name()).or_default() += rows.len();
        }
        for p in self.pending_pairs.drain(..) {
            self.done_pairs.insert(p.key);
            self.written.pairs += 1;
        }
        for r in self.pending.drain(..) {
            self.done.insert((r.file.file, r.file.size, r.file.mtime_ns));
            self.written.files += 1;
        }
        self.pending_rows = 0;
        self.pending_since = None;
        Ok(())
    }

    /// Commits the rest and releases the lock.
    pub fn finish(mut self) -> Result<Committed, DatasetError> {
        self.commit()?;
        let _ = std::fs::remove_file(self.root.join(LOCK));
        Ok(std::mem::take(&mut self.written))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl Drop for Dataset {
    fn drop(&mut self) {
        // Released on error paths too; a commit not made is redone next time.
        let _ = std::fs::remove_file(self.root.join(LOCK));
    }
}

fn take_lock(lock: &Path) -> Result<(), DatasetError> {
    use std::io::Write;
    for _ in 0..2 {
        match std::fs::OpenOptions::new().write(true).create_new(true).open(lock) {
            Ok(mut f) => {
                let _ = write!(f, "{}", std::process::id());
                return Ok(());
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let pid = std::fs::read_to_string(lock).unwrap_or_default().trim().to_string();
                let alive = !pid.is_empty() && Path::new("/proc").join(&pid).exists();
                if alive {
                    return Err(DatasetError::Locked(lock.to_path_buf(), pid));
                }
                // Left by a run that was killed: take it over.
                std::fs::remove_file(lock).map_err(io(lock))?;
            }
            Err(e) => return Err(io(lock)(e)),
        }
    }
    Err(DatasetError::Locked(lock.to_path_buf(), "?".into()))
}

/// Writes one part, zstd-compressed, as `.tmp` then renamed into place.
pub fn write_parquet(path: &Path, batch: &arrow_array::RecordBatch) -> Result<(), DatasetError> {
    let tmp = path.with_extension("parquet.tmp");
    let file = File::create(&tmp).map_err(io(&tmp))?;
    let props = tcpwhy_report::tables::parquet_properties();
    let perr = |e: parquet::errors::ParquetError| DatasetError::Parquet { path: tmp.clone(), msg: e.to_string() };
    let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).map_err(perr)?;
    w.write(batch).map_err(perr)?;
    let file = w.into_inner().map_err(perr)?;
    file.sync_all().map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))?;
    Ok(())
}

fn read_done(p: &Path, done: &mut HashSet<(String, u64, i64)>) -> Result<(), DatasetError> {
    read_file_keys(p, [""], "files", |[k]| {
        done.insert(k);
    })
}

fn read_done_pairs(p: &Path, done: &mut HashSet<PairKey>) -> Result<(), DatasetError> {
    read_file_keys(p, ["_0", "_1"], "pairs", |k| {
        done.insert(k);
    })
}

/// Each row's captures as a resumed batch knows them: for each column
/// suffix, the columns `file`, `size` and `mtime_ns` with it (the `files`
/// table's one capture, the `pairs` table's two).
fn read_file_keys<const N: usize>(
    p: &Path,
    suffixes: [&str; N],
    table: &str,
    mut each: impl FnMut([(String, u64, i64); N]),
) -> Result<(), DatasetError> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, UInt64Type};
    let perr = |msg: String| DatasetError::Parquet { path: p.to_path_buf(), msg };
    let f = File::open(p).map_err(io(p))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(f).map_err(|e| perr(e.to_string()))?;
    let names: Vec<String> = suffixes.iter().flat_map(|s| ["file", "size", "mtime_ns"].map(|n| format!("{n}{s}"))).collect();
    let schema = builder.parquet_schema();
    let cols: Vec<usize> = names.iter().filter_map(|n| schema.columns().iter().position(|c| c.name() == n)).collect();
    if cols.len() != names.len() {
        return Err(perr(format!("not a tcpwhy batch {table} table")));
    }
    let mask = parquet::arrow::ProjectionMask::leaves(schema, cols);
    for b in builder.with_projection(mask).build().map_err(|e| perr(e.to_string()))? {
        let b = b.map_err(|e| perr(e.to_string()))?;
        // the projection keeps the file's column order: each found by name
        let col = |n: &str| b.schema().index_of(n).map(|i| b.column(i).clone()).map_err(|e| perr(e.to_string()));
        let mut keys = Vec::with_capacity(N);
        for s in suffixes {
            keys.push((col(&format!("file{s}"))?, col(&format!("size{s}"))?, col(&format!("mtime_ns{s}"))?));
        }
        let typed: Vec<_> = keys.iter().map(|(f, s, m)| (f.as_string::<i32>(), s.as_primitive::<UInt64Type>(), m.as_primitive::<Int64Type>())).collect();
        for i in 0..b.num_rows() {
            each(std::array::from_fn(|k| (typed[k].0.value(i).to_string(), typed[k].1.value(i), typed[k].2.value(i))));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_escapes() {
        assert_eq!(utc_date(0.0), "1970-01-01");
        assert_eq!(utc_date(1_795_478_400.5), "2026-11-24");
        assert_eq!(utc_date(951_782_400.0), "2000-02-29");
        assert_eq!(escape("host-1.example"), "host-1.example");
        assert_eq!(escape("a/b=c"), "a%2Fb%3Dc");
        assert_eq!("prefix:3".parse::<PartitionBy>().unwrap(), PartitionBy::Prefix(3));
        assert!("prefix:0".parse::<PartitionBy>().is_err());
        assert!("month".parse::<PartitionBy>().is_err());
    }
}
