//! `tcpwhy._tcpwhy`, the native half of the Python package (python/tcpwhy):
//! captures read and diagnosed in Rust with the GIL released, results
//! handed to pyarrow through the Arrow C data interface (no copy through
//! Python objects). Errors come back as `(kind, exit_code, message)` for
//! the Python half to raise as `tcpwhy.CaptureError` subclasses, with the
//! results of the part before the damage attached.

use arrow_array::RecordBatch;
use arrow_pyarrow::IntoPyArrow;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use tcpwhy_batch::{Input, Table};
use tcpwhy_diagnose::{KernelRule, Options};
use tcpwhy_flow::{analyze_capture, AnalyzeOptions, CaptureAnalysis};
use tcpwhy_report::{CaptureReport, PacketLog};
use tcpwhy_wire::{CaptureError, CaptureReader};

type ErrorInfo = Option<(String, u8, String)>;

fn error_info(e: &CaptureError) -> (String, u8, String) {
    let kind = match e {
        CaptureError::Open { .. } | CaptureError::NotACapture { .. } => "unreadable",
        CaptureError::Truncated { .. } => "truncated",
        CaptureError::Corrupt { .. } => "corrupt",
    };
    (kind.into(), if e.is_partial() { 4 } else { 3 }, e.to_string())
}

fn table(py: Python<'_>, schema: arrow_schema::SchemaRef, batches: Vec<RecordBatch>) -> PyResult<Py<PyAny>> {
    let t = arrow_pyarrow::Table::try_new(batches, schema).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    Ok(t.into_pyarrow(py)?.unbind())
}

fn options(kernel: Option<&str>) -> PyResult<Options> {
    let kernel = match kernel {
        None => KernelRule::default(),
        Some(v) => KernelRule::for_version(v, None)
            .ok_or_else(|| PyValueError::new_err(format!("kernel '{v}' is not a version like 5.10 or 6.8")))?,
    };
    Ok(Options { kernel, bandwidth_bps: None, rtt_ms: None })
}

/// Diagnoses one capture: a dict of the batch tables (`directions`,
/// `quality`, `groups`, `errors`, `files`; schema tcpwhy.batch/1) and the
/// error, if any. Never raises for a bad capture: its error is a row.
#[pyfunction]
#[pyo3(signature = (path, kernel=None))]
fn diagnose_tables(py: Python<'_>, path: PathBuf, kernel: Option<&str>) -> PyResult<(Py<PyAny>, ErrorInfo)> {
    let opts = options(kernel)?;
    let input = Input::stat(path);
    let result = py.detach(|| tcpwhy_batch::diagnose_file(&input, &opts));
    let err = result.errors.first().map(|e| (e.kind.clone(), e.exit_code, e.message.clone()));
    Ok((tables_of(py, &result)?, err))
}

/// The batch tables of one file's result, as a dict of pyarrow tables.
fn tables_of(py: Python<'_>, result: &tcpwhy_batch::FileResult) -> PyResult<Py<PyAny>> {
    Ok(file_tables(py, &[result])?.into_any().unbind())
}

fn file_tables<'py>(py: Python<'py>, results: &[&tcpwhy_batch::FileResult]) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for t in Table::OF_FILES {
        let b = t.batch(results).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        out.set_item(t.name(), table(py, t.schema(), vec![b])?)?;
    }
    Ok(out)
}

/// Compares two captures of one path (what `tcpwhy diagnose --pair`
/// does): a dict of the `pairs` table and both captures' batch tables,
/// the first error of either capture, if any, and that capture's path.
/// Never raises for a bad capture.
#[pyfunction]
#[pyo3(signature = (a, b, kernel=None))]
fn pair_tables(py: Python<'_>, a: PathBuf, b: PathBuf, kernel: Option<&str>) -> PyResult<(Py<PyAny>, ErrorInfo, Option<String>)> {
    let opts = options(kernel)?;
    let job = tcpwhy_batch::pairs::PairJob { inputs: [Input::stat(a), Input::stat(b)], diagnose: [true, true] };
    let result = py.detach(|| tcpwhy_batch::pairs::diagnose_pair(&job, &opts));
    let first = result.files.iter().flat_map(|f| &f.errors).next();
    let err = first.map(|e| (e.kind.clone(), e.exit_code, e.message.clone()));
    let files: Vec<&tcpwhy_batch::FileResult> = result.files.iter().collect();
    let out = file_tables(py, &files)?;
    let schema = Table::Pairs.schema();
    let rows = tcpwhy_batch::tables::to_batch(&schema, result.pairs.iter()).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    out.set_item(Table::Pairs.name(), table(py, schema, vec![rows])?)?;
    Ok((out.into_any().unbind(), err, first.map(|e| e.file.clone())))
}

/// Why a file found in a directory is not a capture, judged by its content
/// as `tcpwhy batch` judges it; None for a capture (or a file that cannot
/// be opened: reading it gives the error).
#[pyfunction]
fn not_a_capture(path: PathBuf) -> Option<String> {
    tcpwhy_batch::inputs::not_a_capture(&path)
}

/// The batch tables of a file left out as not a capture: its `files` row,
/// with `skipped` saying why (what `tcpwhy batch` writes for it).
#[pyfunction]
fn skipped_tables(py: Python<'_>, path: PathBuf, why: String) -> PyResult<Py<PyAny>> {
    let result = tcpwhy_batch::diagnose_file(&Input::skipped(path, why), &Options::default());
    tables_of(py, &result)
}

fn read(path: &PathBuf, options: AnalyzeOptions, sink: &mut impl tcpwhy_flow::SegmentSink) -> Result<CaptureAnalysis, CaptureError> {
    let reader = CaptureReader::open(path)?;
    Ok(analyze_capture(reader, options, sink, |_| {}))
}

/// Per-connection statistics (the report's `connections` table, without
/// the diagnosis columns filled). Returns (table or None, error).
#[pyfunction]
fn stats(py: Python<'_>, path: PathBuf) -> PyResult<(Option<Py<PyAny>>, ErrorInfo)> {
    let res = py.detach(|| {
        let a = read(&path, AnalyzeOptions::default(), &mut ())?;
        let payloads = Default::default();
        let log = PacketLog::with_budget(0);
        let fr = CaptureReport { analysis: &a, diagnoses: &[], packets: &log, payloads: &payloads, latency: None, groups: &[] };
        let b = tcpwhy_report::tables::connections_batch(&[fr]);
        Ok::<_, CaptureError>((b, a.error.as_ref().map(error_info)))
    });
    match res {
        Err(e) => Ok((None, Some(error_info(&e)))),
        Ok((b, err)) => {
            let b = b.map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
            Ok((Some(table(py, tcpwhy_report::tables::connections_schema(), vec![b])?), err))
        }
    }
}

/// One row per TCP segment with the analysis flags (the report's `packets`
/// table). Returns (table or None, error).
#[pyfunction]
fn packets(py: Python<'_>, path: PathBuf) -> PyResult<(Option<Py<PyAny>>, ErrorInfo)> {
    let res = py.detach(|| {
        // Every row goes to the table as it is read (the log itself is
        // thinned past its budget, which only the plots see).
        let mut log = PacketLog::new();
        let batches = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let export = tcpwhy_report::tables::BatchExport { path: path.display().to_string(), batches: batches.clone() };
        log.set_export(Box::new(export));
        // Every segment, in capture order: no connection attempt held back.
        let a = read(&path, AnalyzeOptions { in_order: true, ..Default::default() }, &mut log)?;
        let r = log.finish_export();
        drop(log);
        let batches = std::mem::take(&mut *batches.borrow_mut());
        Ok::<_, CaptureError>((r.map(|_| batches), a.error.as_ref().map(error_info)))
    });
    match res {
        Err(e) => Ok((None, Some(error_info(&e)))),
        Ok((b, err)) => {
            let b = b.map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
            Ok((Some(table(py, tcpwhy_report::tables::packets_schema(), b)?), err))
        }
    }
}

/// Diagnoses many captures on `jobs` threads into a Parquet dataset (what
/// `tcpwhy batch` does); returns a dict of counts.
#[pyfunction]
#[pyo3(signature = (paths, out, partition_by="none", jobs=None, kernel=None, pairs=Vec::new()))]
fn batch(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    out: PathBuf,
    partition_by: &str,
    jobs: Option<usize>,
    kernel: Option<&str>,
    pairs: Vec<(PathBuf, PathBuf)>,
) -> PyResult<Py<PyAny>> {
    let opts = options(kernel)?;
    let partition: tcpwhy_batch::PartitionBy = partition_by.parse().map_err(|e: tcpwhy_batch::DatasetError| PyValueError::new_err(e.to_string()))?;
    let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let summary = py
        .detach(|| {
            let mut ds = tcpwhy_batch::Dataset::open(&out, partition).map_err(|e| e.to_string())?;
            if !pairs.is_empty() {
                let pairs = pairs.into_iter().map(|(a, b)| [Input::stat(a), Input::stat(b)]).collect();
                let s = tcpwhy_batch::run_pairs(pairs, &mut ds, &opts, jobs, |_| {}).map_err(|e| e.to_string())?;
                ds.finish().map_err(|e| e.to_string())?;
                return Ok(s);
            }
            let found = tcpwhy_batch::inputs::expand(&paths, &[], false).map_err(|e| e.to_string())?;
            // Files that are not captures are listed in `files` with why.
            let skipped = found.skipped.into_iter().map(|(p, why)| Input::skipped(p, why));
            let inputs = found.paths.into_iter().map(Input::stat).chain(skipped).collect();
            let s = tcpwhy_batch::run(inputs, &mut ds, &opts, jobs, |_| {}).map_err(|e| e.to_string())?;
            ds.finish().map_err(|e| e.to_string())?;
            Ok::<_, String>(s)
        })
        .map_err(PyRuntimeError::new_err)?;
    let d = PyDict::new(py);
    d.set_item("files", summary.files)?;
    d.set_item("skipped_done", summary.skipped_done)?;
    d.set_item("not_captures", summary.not_captures)?;
    d.set_item("errors", summary.errors)?;
    d.set_item("packets", summary.packets)?;
    d.set_item("connections", summary.connections)?;
    d.set_item("directions", summary.directions)?;
    d.set_item("pairs", summary.pairs)?;
    d.set_item("pairs_done", summary.pairs_done)?;
    d.set_item("paired_connections", summary.paired_connections)?;
    Ok(d.into_any().unbind())
}

/// The Arrow schema of a batch table, as a pyarrow.Schema.
#[pyfunction]
fn schema(py: Python<'_>, table: &str) -> PyResult<Py<PyAny>> {
    let t = Table::from_name(table).ok_or_else(|| PyValueError::new_err(format!("no table '{table}' (directions, quality, groups, errors, todo, files, pairs)")))?;
    Ok(arrow_pyarrow::ToPyArrow::to_pyarrow(t.schema().as_ref(), py)?.unbind())
}

#[pymodule]
fn _tcpwhy(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(diagnose_tables, m)?)?;
    m.add_function(wrap_pyfunction!(pair_tables, m)?)?;
    m.add_function(wrap_pyfunction!(stats, m)?)?;
    m.add_function(wrap_pyfunction!(packets, m)?)?;
    m.add_function(wrap_pyfunction!(batch, m)?)?;
    m.add_function(wrap_pyfunction!(schema, m)?)?;
    m.add_function(wrap_pyfunction!(not_a_capture, m)?)?;
    m.add_function(wrap_pyfunction!(skipped_tables, m)?)?;
    m.add("BATCH_SCHEMA", tcpwhy_batch::SCHEMA)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
