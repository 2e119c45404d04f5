//! `tcpwhy batch PATH... --out DIR`: every capture diagnosed on every
//! core into Parquet tables (tcpwhy-batch; schema in docs/batch.md).

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;
use tcpwhy_batch::{inputs, Dataset, Input, PartitionBy};
use tcpwhy_diagnose::{KernelRule, Options};

pub const BATCH_AFTER_HELP: &str = "\
Writes one Parquet table per kind of row under --out, each a directory of
part files (zstd), hive-partitioned when --partition-by is given:
  directions/  one row per connection direction diagnosed: primary, confidence,
               limits (share of time per limit), findings, fixes, what_if,
               predicted_bps and predicted_gain (names as in diagnose --json)
  quality/     capture-quality findings per connection (duplicates, drops...)
  groups/      flows from one host to another at the same time: aggregate
               rate, a shared policer, a flow held by its own limit
  files/       one row per capture read (size, mtime, frames, exit_code), and
               per other file found in a directory and not read (skipped: why)
  errors/      one row per capture that could not be read, or not to its end
  pairs/       with --pairs: one row per connection seen at both capture points
               (match, clock bounds, loss before/between/after, one-way delay
               growth, what a middlebox changed, the paired findings), or one
               row for a pair that matched nothing, saying why
A corrupt or unreadable capture is a row in errors/, never a failed batch.

Directories are searched recursively for captures by content (pcap or pcapng,
plain or gzip/xz/zstd-compressed, whatever the name) and by name (.pcap,
.pcapng, .cap, .dmp and their compressed forms: one so named that is not a
capture is a row in errors/); every other file is skipped, said on stderr
and listed in files/ with why.

Resumable: run the same command again and the captures already in files/ (same
path, size and modification time) are skipped; a run that was killed loses at
most its last uncommitted set of files (commits every 256 files, 100,000 rows
or 30 s) and never writes a row twice.

Query with DuckDB:
  duckdb -c \"SELECT primary, count(*) FROM 'out/directions/**/*.parquet' GROUP BY ALL\"
  (with --partition-by: read_parquet('out/directions/**/*.parquet', hive_partitioning=true))

Examples:
  tcpwhy batch captures/ --out results
  tcpwhy batch 'archive/**/*.pcap.gz' --partition-by date --out results -j 8
  find /data -name '*.pcap' > list.txt; tcpwhy batch --from-list list.txt --out results
  printf 'client.pcap\tserver.pcap\n' > pairs.txt; tcpwhy batch --pairs pairs.txt --out results

Exit codes: 0 every capture read; 4 some captures were unreadable or damaged
(their rows are in errors/); 2 usage error (bad flag, pattern matching nothing,
--out holding a batch with another --partition-by, a --pairs line that is not
two paths); 3 a --from-list or --pairs file could not be read; 1 the output could not be written (nothing lost: rerun to
resume).";

#[derive(Args)]
pub struct BatchArgs {
    /// Capture files, directories (searched recursively for captures, by
    /// content and by name) and quoted glob patterns.
    #[arg(required_unless_present_any = ["from_list", "pairs"])]
    paths: Vec<PathBuf>,
    /// A file listing capture paths, one per line ('-' for standard input).
    /// Repeatable.
    #[arg(long, value_name = "FILE")]
    from_list: Vec<PathBuf>,
    /// A file listing pairs of captures of one path, taken at two points
    /// (client and server, or either side of a middlebox): one pair per
    /// line, the two paths separated by a tab (or spaces when neither holds
    /// one); '-' for standard input. Each pair is compared as `diagnose
    /// --pair` does, into pairs/; each capture is diagnosed too, once.
    /// Repeatable.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["paths", "from_list", "all_files"])]
    pairs: Vec<PathBuf>,
    /// Output directory (created; a second run into it resumes).
    #[arg(long, short, value_name = "DIR")]
    out: PathBuf,
    /// Partition the tables by: none, date (the capture's first frame, UTC),
    /// parent (the directory holding the capture, e.g. one per host) or
    /// prefix:N (the first N characters of the file name).
    #[arg(long, default_value = "none", value_name = "KEY")]
    partition_by: PartitionBy,
    /// Parallel captures (default: the number of cores).
    #[arg(long, short, value_name = "N")]
    jobs: Option<usize>,
    /// In directories, read every file, not only the captures (each other
    /// file is then an error row).
    #[arg(long)]
    all_files: bool,
    /// Kernel version the fixes are for (e.g. 5.10, 6.8), as in diagnose.
    #[arg(long, value_name = "VERSION")]
    kernel: Option<String>,
    /// Never show a progress bar (it is shown only when stderr is a terminal).
    #[arg(long)]
    no_progress: bool,
}

pub fn run(a: &BatchArgs) -> u8 {
    let kernel = match &a.kernel {
        None => KernelRule::default(),
        Some(v) => match KernelRule::for_version(v, None) {
            Some(k) => k,
            None => {
                eprintln!("tcpwhy: --kernel '{v}' is not a version like 5.10 or 6.8");
                return crate::exit::USAGE;
            }
        },
    };
    let opts = Options { kernel, bandwidth_bps: None, rtt_ms: None };
    // the captures, or the pairs of captures, to read
    let work = if a.pairs.is_empty() {
        inputs::expand(&a.paths, &a.from_list, a.all_files).map(|found| {
            // Every file a directory walk leaves out is said, and listed in files/.
            for (path, why) in &found.skipped {
                eprintln!("tcpwhy batch: skipped {}: {why}", path.display());
            }
            let skipped = found.skipped.into_iter().map(|(p, why)| Input::skipped(p, why));
            Work::Files(found.paths.into_iter().map(Input::stat).chain(skipped).collect())
        })
    } else {
        inputs::read_pairs(&a.pairs).map(|p| Work::Pairs(p.into_iter().map(|pair| pair.map(Input::stat)).collect()))
    };
    let work = match work {
        Ok(w) => w,
        Err(e @ inputs::InputError::List { .. }) => {
            eprintln!("tcpwhy: {e}");
            return crate::exit::UNREADABLE;
        }
        Err(e) => {
            eprintln!("tcpwhy: {e}");
            return crate::exit::USAGE;
        }
    };
    let mut ds = match Dataset::open(&a.out, a.partition_by.clone()) {
        Ok(d) => d,
        Err(e @ tcpwhy_batch::DatasetError::Layout { .. }) => {
            eprintln!("tcpwhy: {e}");
            return crate::exit::USAGE;
        }
        Err(e) => {
            eprintln!("tcpwhy: {e}");
            return crate::exit::FAILURE;
        }
    };
    let jobs = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let start = Instant::now();
    let result = match work {
        Work::Files(inputs) => {
            let read = |i: &&Input| i.skipped.is_none() && !ds.is_done(i);
            let mut bar = Progress::new(a, inputs.iter().filter(read).map(|i| i.size).sum(), inputs.iter().filter(read).count());
            let r = tcpwhy_batch::run(inputs, &mut ds, &opts, jobs, |r| bar.file(r));
            bar.finish();
            r
        }
        Work::Pairs(pairs) => {
            let mut seen = std::collections::HashSet::new();
            let read: Vec<&Input> = pairs.iter().flatten().filter(|i| seen.insert(&i.path) && !ds.is_done(i)).collect();
            let mut bar = Progress::new(a, read.iter().map(|i| i.size).sum(), read.len());
            let r = tcpwhy_batch::run_pairs(pairs, &mut ds, &opts, jobs, |r| bar.file(r));
            bar.finish();
            r
        }
    };
    let summary = match result {
        Ok(s) => s,
        Err(e) => {
            eprintln!("tcpwhy: {e}; what was committed stays, rerun the same command to resume");
            return crate::exit::FAILURE;
        }
    };
    let written = match ds.finish() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("tcpwhy: {e}; rerun the same command to resume");
            return crate::exit::FAILURE;
        }
    };
    print_summary(&summary, &written, start.elapsed().as_secs_f64(), jobs, a);
    if summary.errors > 0 {
        crate::exit::PARTIAL
    } else {
        crate::exit::OK
    }
}

/// What a batch reads: captures, or pairs of captures (`--pairs`).
enum Work {
    Files(Vec<Input>),
    Pairs(Vec<[Input; 2]>),
}

/// The progress bar (only when stderr is a terminal): bytes of the
/// captures to read, and files and packets read so far.
struct Progress {
    bar: Option<ProgressBar>,
    todo: usize,
    files: usize,
    packets: u64,
}

impl Progress {
    fn new(a: &BatchArgs, total_bytes: u64, todo: usize) -> Progress {
        let bar = (!a.no_progress && std::io::stderr().is_terminal()).then(|| {
            let b = ProgressBar::new(total_bytes);
            b.set_style(
                ProgressStyle::with_template("{bar:30} {binary_bytes}/{binary_total_bytes} {msg} ETA {eta}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            b
        });
        Progress { bar, todo, files: 0, packets: 0 }
    }

    fn file(&mut self, r: &tcpwhy_batch::FileResult) {
        if r.file.skipped.is_some() {
            return;
        }
        self.files += 1;
        self.packets += r.file.frames;
        if let Some(b) = &self.bar {
            b.inc(r.file.size);
            b.set_message(format!("{}/{} files, {} packets", self.files, self.todo, self.packets));
        }
    }

    fn finish(self) {
        if let Some(b) = self.bar {
            b.finish_and_clear();
        }
    }
}

/// The batch's one line on stderr.
fn print_summary(summary: &tcpwhy_batch::Summary, written: &tcpwhy_batch::dataset::Committed, secs: f64, jobs: usize, a: &BatchArgs) {
    let rows: Vec<String> = written.rows.iter().map(|(t, n)| format!("{t} {n}")).collect();
    eprintln!(
        "tcpwhy batch: {} captures read ({} already done, {} with errors; {} other files skipped: not captures), {} packets, {} connections, {} directions diagnosed in {secs:.1} s on {jobs} threads -> {} (rows: {})",
        summary.files,
        summary.skipped_done,
        summary.errors,
        summary.not_captures,
        summary.packets,
        summary.connections,
        summary.directions,
        a.out.display(),
        if rows.is_empty() { "none".into() } else { rows.join(", ") }
    );
    if !a.pairs.is_empty() {
        eprintln!(
            "tcpwhy batch: {} pairs of captures compared ({} already done), {} connections seen at both points",
            summary.pairs, summary.pairs_done, summary.paired_connections
        );
    }
}
