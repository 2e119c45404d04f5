//! Tables for DuckDB, Polars, Spark: `connections`, `packets`, `sack`,
//! `series` and `limits`, written as Parquet (zstd) or Arrow IPC files.
//! Schema in docs/report.md; every table has `file` (the capture path) so
//! that many captures can be queried together.

use crate::html::CaptureReport;
use crate::packets::{PacketLog, RowExport, NONE_I64, NONE_U64};
use arrow_array::builder::{BooleanBuilder, Float64Builder, Int64Builder, StringBuilder, UInt16Builder, UInt64Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{ArrowError, DataType, Field, Schema};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tcpwhy_flow::Flags;

/// File format of the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    Parquet,
    /// Arrow IPC file format (`.arrow`, a.k.a. Feather v2).
    Arrow,
}

impl TableFormat {
    fn ext(self) -> &'static str {
        match self {
            TableFormat::Parquet => "parquet",
            TableFormat::Arrow => "arrow",
        }
    }
}

/// Rows in one batch of the packet table.
const BATCH_ROWS: usize = 256 * 1024;

fn err(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

struct TableWriter {
    inner: Inner,
}

enum Inner {
    Parquet(parquet::arrow::ArrowWriter<File>),
    Arrow(arrow_ipc::writer::FileWriter<File>),
}

impl TableWriter {
    fn create(dir: &Path, name: &str, schema: Arc<Schema>, format: TableFormat) -> std::io::Result<(TableWriter, PathBuf)> {
        let path = dir.join(format!("{name}.{}", format.ext()));
        let file = File::create(&path)?;
        let inner = match format {
            TableFormat::Parquet => {
                Inner::Parquet(parquet::arrow::ArrowWriter::try_new(file, schema, Some(parquet_properties())).map_err(err)?)
            }
            TableFormat::Arrow => Inner::Arrow(arrow_ipc::writer::FileWriter::try_new(file, &schema).map_err(err)?),
        };
        Ok((TableWriter { inner }, path))
    }
    fn write(&mut self, b: &RecordBatch) -> std::io::Result<()> {
        match &mut self.inner {
            Inner::Parquet(w) => w.write(b).map_err(err),
            Inner::Arrow(w) => w.write(b).map_err(err),
        }
    }
    fn close(self) -> std::io::Result<()> {
        match self.inner {
            Inner::Parquet(w) => w.close().map(|_| ()).map_err(err),
            Inner::Arrow(mut w) => w.finish().map_err(err),
        }
    }
}

fn batch(schema: &Arc<Schema>, cols: Vec<ArrayRef>) -> std::io::Result<RecordBatch> {
    RecordBatch::try_new(schema.clone(), cols).map_err(|e: ArrowError| err(e))
}

/// One column: the shorthand every schema of tcpwhy's tables (here and in
/// tcpwhy-batch) is spelled with.
pub fn f(name: &str, t: DataType, nullable: bool) -> Field {
    Field::new(name, t, nullable)
}

/// The columns that name a connection in every table that has one row per
/// connection or direction: the capture's path, its connection number, and
/// its two ends (a = the end that sent the first segment seen).
pub fn connection_key() -> Vec<Field> {
    use DataType::*;
    vec![
        f("file", Utf8, false),
        f("connection", UInt64, false),
        f("a_addr", Utf8, false),
        f("a_port", UInt16, false),
        f("b_addr", Utf8, false),
        f("b_port", UInt16, false),
    ]
}

/// How every Parquet file tcpwhy writes is written: zstd, and tcpwhy's
/// version as the writer.
pub fn parquet_properties() -> parquet::file::properties::WriterProperties {
    parquet::file::properties::WriterProperties::builder()
        .set_compression(parquet::basic::Compression::ZSTD(Default::default()))
        .set_created_by(concat!("tcpwhy ", env!("CARGO_PKG_VERSION")).into())
        .build()
}

pub fn connections_schema() -> Arc<Schema> {
    use DataType::*;
    let mut fields = connection_key();
    fields.extend([
        f("first_time", Float64, false),
        f("last_time", Float64, false),
        f("duration_s", Float64, false),
        f("handshake_rtt_ms", Float64, true),
    ]);
    for d in ["ab", "ba"] {
        fields.push(f(&format!("packets_{d}"), UInt64, false));
        fields.push(f(&format!("bytes_{d}"), UInt64, false));
        fields.push(f(&format!("retransmitted_bytes_{d}"), UInt64, false));
        fields.push(f(&format!("goodput_bps_{d}"), Float64, true));
        fields.push(f(&format!("primary_{d}"), Utf8, true));
        fields.push(f(&format!("confidence_{d}"), Utf8, true));
    }
    Arc::new(Schema::new(fields))
}

pub fn packets_schema() -> Arc<Schema> {
    use DataType::*;
    Arc::new(Schema::new(vec![
        f("file", Utf8, false),
        f("frame", UInt64, false),
        f("time_ns", Int64, false),
        f("connection", UInt64, false),
        f("direction", Utf8, false),
        f("tcp_flags", UInt16, false),
        f("seq", Int64, false),
        f("len", UInt32, false),
        f("ack", Int64, true),
        f("window", UInt64, false),
        f("in_flight", UInt64, true),
        f("rtt_ms", Float64, true),
        f("flags", UInt32, false),
        f("retransmission", Boolean, false),
    ]))
}

pub fn sack_schema() -> Arc<Schema> {
    use DataType::*;
    Arc::new(Schema::new(vec![
        f("file", Utf8, false),
        f("frame", UInt64, false),
        f("time_ns", Int64, false),
        f("connection", UInt64, false),
        f("direction", Utf8, false),
        f("left", Int64, false),
        f("right", Int64, false),
    ]))
}

pub fn series_schema() -> Arc<Schema> {
    use DataType::*;
    Arc::new(Schema::new(vec![
        f("file", Utf8, false),
        f("connection", UInt64, false),
        f("direction", Utf8, false),
        f("metric", Utf8, false),
        f("start_time", Float64, false),
        f("bin_s", Float64, false),
        f("bytes", UInt64, false),
    ]))
}

pub fn limits_schema() -> Arc<Schema> {
    use DataType::*;
    Arc::new(Schema::new(vec![
        f("file", Utf8, false),
        f("connection", UInt64, false),
        f("direction", Utf8, false),
        f("state", Utf8, false),
        f("start_time", Float64, false),
        f("end_time", Float64, false),
    ]))
}

/// What was written.
#[derive(Debug, Default, Clone)]
pub struct TablesWritten {
    pub files: Vec<(PathBuf, usize)>,
}

/// The `connections` table of these captures as one record batch.
pub fn connections_batch(files: &[CaptureReport]) -> std::io::Result<RecordBatch> {
    let schema = connections_schema();
    let dname = |d: u8| if d == 0 { "a" } else { "b" };
    let mut file = StringBuilder::new();
    let mut conn = UInt64Builder::new();
    let (mut aa, mut ap, mut ba, mut bp) = (StringBuilder::new(), UInt16Builder::new(), StringBuilder::new(), UInt16Builder::new());
    let (mut ft, mut lt, mut du, mut hs) = (Float64Builder::new(), Float64Builder::new(), Float64Builder::new(), Float64Builder::new());
    let mut per: Vec<(UInt64Builder, UInt64Builder, UInt64Builder, Float64Builder, StringBuilder, StringBuilder)> = (0..2)
        .map(|_| (UInt64Builder::new(), UInt64Builder::new(), UInt64Builder::new(), Float64Builder::new(), StringBuilder::new(), StringBuilder::new()))
        .collect();
    for fr in files {
        let diags: std::collections::HashMap<u64, _> = fr.diagnoses.iter().map(|d| (d.id.number, d)).collect();
        for s in &fr.analysis.connections {
                file.append_value(&fr.analysis.path);
            conn.append_value(s.id);
            aa.append_value(&s.a.addr);
            ap.append_value(s.a.port);
            ba.append_value(&s.b.addr);
            bp.append_value(s.b.port);
            ft.append_value(s.first_time);
            lt.append_value(s.last_time);
            du.append_value(s.duration_s);
            let dg = diags.get(&s.id);
            hs.append_option(s.handshake_rtt_ms);
            for (d, p) in per.iter_mut().enumerate() {
                let ds = &s.directions[d];
                p.0.append_value(ds.counts.packets);
                p.1.append_value(ds.counts.bytes);
                p.2.append_value(ds.counts.retransmitted_bytes);
                p.3.append_option(ds.goodput_bps);
                let dd = dg.and_then(|g| g.directions.iter().find(|x| x.from == dname(d as u8)));
                p.4.append_option(dd.map(|x| x.primary.as_str()));
                p.5.append_option(dd.map(|x| x.confidence.as_str()));
            }
        }
    }
    let mut cols: Vec<ArrayRef> = vec![
        Arc::new(file.finish()),
        Arc::new(conn.finish()),
        Arc::new(aa.finish()),
        Arc::new(ap.finish()),
        Arc::new(ba.finish()),
        Arc::new(bp.finish()),
        Arc::new(ft.finish()),
        Arc::new(lt.finish()),
        Arc::new(du.finish()),
        Arc::new(hs.finish()),
    ];
    for mut p in per {
        cols.push(Arc::new(p.0.finish()));
        cols.push(Arc::new(p.1.finish()));
        cols.push(Arc::new(p.2.finish()));
        cols.push(Arc::new(p.3.finish()));
        cols.push(Arc::new(p.4.finish()));
        cols.push(Arc::new(p.5.finish()));
    }
    batch(&schema, cols)
}

/// The `packets` table of one capture, in record batches of at most
/// 256 Ki rows, each given to `each`.
pub fn packet_batches(fr: &CaptureReport, mut each: impl FnMut(RecordBatch) -> std::io::Result<()>) -> std::io::Result<()> {
    let mut start = 0;
    while start < fr.packets.len() {
        let end = (start + BATCH_ROWS).min(fr.packets.len());
        each(packet_batch(&fr.analysis.path, fr.packets, start..end)?)?;
        start = end;
    }
    Ok(())
}

/// Rows `r` of a packet log as one batch of the `packets` table.
fn packet_batch(path: &str, p: &PacketLog, r: std::ops::Range<usize>) -> std::io::Result<RecordBatch> {
    let dname = |d: u8| if d == 0 { "a" } else { "b" };
    let (start, end) = (r.start, r.end);
    let mut file = StringBuilder::new();
    let mut dir_b = StringBuilder::new();
    for i in r.clone() {
        file.append_value(path);
        dir_b.append_value(dname(p.direction[i]));
    }
    let mut ack = Int64Builder::with_capacity(end - start);
    let mut inf = UInt64Builder::with_capacity(end - start);
    let mut rtt = Float64Builder::with_capacity(end - start);
    let mut retx = BooleanBuilder::with_capacity(end - start);
    for i in r.clone() {
        ack.append_option((p.ack[i] != NONE_I64).then_some(p.ack[i]));
        inf.append_option((p.in_flight[i] != NONE_U64).then_some(p.in_flight[i]));
        rtt.append_option((p.rtt_ns[i] != NONE_I64).then(|| p.rtt_ns[i] as f64 / 1e6));
        retx.append_value(Flags(p.flags[i]).has(Flags::RETRANSMISSION));
    }
    let cols: Vec<ArrayRef> = vec![
        Arc::new(file.finish()),
        Arc::new(arrow_array::UInt64Array::from(p.frame[r.clone()].to_vec())),
        Arc::new(arrow_array::Int64Array::from(p.time_ns[r.clone()].to_vec())),
        Arc::new(arrow_array::UInt64Array::from(p.connection[r.clone()].to_vec())),
        Arc::new(dir_b.finish()),
        Arc::new(arrow_array::UInt16Array::from(p.tcp_flags[r.clone()].to_vec())),
        Arc::new(arrow_array::Int64Array::from(p.seq[r.clone()].to_vec())),
        Arc::new(arrow_array::UInt32Array::from(p.len[r.clone()].to_vec())),
        Arc::new(ack.finish()),
        Arc::new(arrow_array::UInt64Array::from(p.window[r.clone()].to_vec())),
        Arc::new(inf.finish()),
        Arc::new(rtt.finish()),
        Arc::new(arrow_array::UInt32Array::from(p.flags[r.clone()].to_vec())),
        Arc::new(retx.finish()),
    ];
    batch(&packets_schema(), cols)
}

/// The SACK rows of packet rows `r` as one batch of the `sack` table.
fn sack_batch(path: &str, p: &PacketLog, r: std::ops::Range<usize>) -> std::io::Result<RecordBatch> {
    let dname = |d: u8| if d == 0 { "a" } else { "b" };
    let (mut file, mut frame, mut t, mut conn, mut dir_b, mut l, mut rt) = (
        StringBuilder::new(),
        UInt64Builder::new(),
        Int64Builder::new(),
        UInt64Builder::new(),
        StringBuilder::new(),
        Int64Builder::new(),
        Int64Builder::new(),
    );
    let lo = p.sack.partition_point(|s| (s.0 as usize) < r.start);
    let hi = p.sack.partition_point(|s| (s.0 as usize) < r.end);
    for &(row, left, right) in &p.sack[lo..hi] {
        let i = row as usize;
        file.append_value(path);
        frame.append_value(p.frame[i]);
        t.append_value(p.time_ns[i]);
        conn.append_value(p.connection[i]);
        dir_b.append_value(dname(p.direction[i]));
        l.append_value(left);
        rt.append_value(right);
    }
    let cols: Vec<ArrayRef> = vec![
        Arc::new(file.finish()),
        Arc::new(frame.finish()),
        Arc::new(t.finish()),
        Arc::new(conn.finish()),
        Arc::new(dir_b.finish()),
        Arc::new(l.finish()),
        Arc::new(rt.finish()),
    ];
    batch(&sack_schema(), cols)
}

/// The `packets` and `sack` tables of one format, written while captures
/// are read: a [`PacketLog`] gives its rows here before thinning drops them
/// (`PacketLog::set_export`), so the tables hold every packet however long
/// the capture.
pub struct PacketTables {
    packets: TableWriter,
    sack: TableWriter,
    written: [(PathBuf, usize); 2],
}

impl PacketTables {
    pub fn create(dir: &Path, format: TableFormat) -> std::io::Result<PacketTables> {
        std::fs::create_dir_all(dir)?;
        let (packets, p) = TableWriter::create(dir, "packets", packets_schema(), format)?;
        let (sack, s) = TableWriter::create(dir, "sack", sack_schema(), format)?;
        Ok(PacketTables { packets, sack, written: [(p, 0), (s, 0)] })
    }
    /// Rows `r` of `log`, read from the capture `path`.
    pub fn rows(&mut self, path: &str, log: &PacketLog, r: std::ops::Range<usize>) -> std::io::Result<()> {
        let mut start = r.start;
        while start < r.end {
            let end = (start + BATCH_ROWS).min(r.end);
            let b = packet_batch(path, log, start..end)?;
            self.written[0].1 += b.num_rows();
            self.packets.write(&b)?;
            let b = sack_batch(path, log, start..end)?;
            if b.num_rows() > 0 {
                self.written[1].1 += b.num_rows();
                self.sack.write(&b)?;
            }
            start = end;
        }
        Ok(())
    }
    /// Closes both files: their paths and row counts.
    pub fn close(self) -> std::io::Result<[(PathBuf, usize); 2]> {
        self.packets.close()?;
        self.sack.close()?;
        Ok(self.written)
    }
}

/// A [`RowExport`] collecting the `packets` table in memory, batch by batch
/// (Python's `tcpwhy.packets`: every row, however much the log is thinned).
pub struct BatchExport {
    pub path: String,
    pub batches: std::rc::Rc<std::cell::RefCell<Vec<RecordBatch>>>,
}

impl RowExport for BatchExport {
    fn rows(&mut self, log: &PacketLog, rows: std::ops::Range<usize>) -> std::io::Result<()> {
        let mut start = rows.start;
        while start < rows.end {
            let end = (start + BATCH_ROWS).min(rows.end);
            self.batches.borrow_mut().push(packet_batch(&self.path, log, start..end)?);
            start = end;
        }
        Ok(())
    }
}

/// A [`RowExport`] feeding shared [`PacketTables`] (one per format asked
/// for) with the rows of the capture `path`.
pub struct TableExport {
    pub tables: std::rc::Rc<std::cell::RefCell<Vec<PacketTables>>>,
    pub path: String,
}

impl RowExport for TableExport {
    fn rows(&mut self, log: &PacketLog, rows: std::ops::Range<usize>) -> std::io::Result<()> {
        for t in self.tables.borrow_mut().iter_mut() {
            t.rows(&self.path, log, rows.clone())?;
        }
        Ok(())
    }
}

/// Writes the five tables into `dir` (created if missing). Throughput and
/// goodput series come from the summaries when the capture was analysed
/// with `series` on.
///
/// `streamed`: the `packets` and `sack` tables, when a [`PacketTables`]
/// already wrote them during the read (their paths and row counts).
pub fn write_tables(
    dir: &Path,
    files: &[CaptureReport],
    format: TableFormat,
    streamed: Option<[(PathBuf, usize); 2]>,
) -> std::io::Result<TablesWritten> {
    std::fs::create_dir_all(dir)?;
    let mut out = TablesWritten::default();

    // connections
    let (mut w, path) = TableWriter::create(dir, "connections", connections_schema(), format)?;
    let b = connections_batch(files)?;
    let n = b.num_rows();
    w.write(&b)?;
    w.close()?;
    out.files.push((path, n));

    // packets and sack: already written while the captures were read, or
    // now from the logs.
    let written = match streamed {
        Some(w) => w,
        None => {
            let mut t = PacketTables::create(dir, format)?;
            for fr in files {
                t.rows(&fr.analysis.path, fr.packets, 0..fr.packets.len())?;
            }
            t.close()?
        }
    };
    out.files.extend(written);

    // series (throughput/goodput bins) and limits (timeline runs)
    let schema = series_schema();
    let (mut w, path) = TableWriter::create(dir, "series", schema.clone(), format)?;
    let mut n = 0;
    {
        let (mut file, mut conn, mut dir_b, mut metric, mut st, mut bs, mut by) = (
            StringBuilder::new(),
            UInt64Builder::new(),
            StringBuilder::new(),
            StringBuilder::new(),
            Float64Builder::new(),
            Float64Builder::new(),
            UInt64Builder::new(),
        );
        for fr in files {
            for s in &fr.analysis.connections {
                for ds in &s.directions {
                    let Some(se) = &ds.series else { continue };
                    for (name, b) in [("throughput", &se.throughput), ("goodput", &se.goodput)] {
                        let Some(b) = b else { continue };
                        for (k, v) in b.bytes.iter().enumerate() {
                            n += 1;
                            file.append_value(&fr.analysis.path);
                            conn.append_value(s.id);
                            dir_b.append_value(ds.from);
                            metric.append_value(name);
                            st.append_value(b.start_time + k as f64 * b.bin_s);
                            bs.append_value(b.bin_s);
                            by.append_value(*v);
                        }
                    }
                }
            }
        }
        let cols: Vec<ArrayRef> = vec![
            Arc::new(file.finish()),
            Arc::new(conn.finish()),
            Arc::new(dir_b.finish()),
            Arc::new(metric.finish()),
            Arc::new(st.finish()),
            Arc::new(bs.finish()),
            Arc::new(by.finish()),
        ];
        w.write(&batch(&schema, cols)?)?;
    }
    w.close()?;
    out.files.push((path, n));

    let schema = limits_schema();
    let (mut w, path) = TableWriter::create(dir, "limits", schema.clone(), format)?;
    let mut n = 0;
    {
        let (mut file, mut conn, mut dir_b, mut state, mut st, mut en) = (
            StringBuilder::new(),
            UInt64Builder::new(),
            StringBuilder::new(),
            StringBuilder::new(),
            Float64Builder::new(),
            Float64Builder::new(),
        );
        for fr in files {
            for d in fr.diagnoses {
                for dd in &d.directions {
                    for r in &dd.timeline {
                        n += 1;
                        file.append_value(&fr.analysis.path);
                        conn.append_value(d.id.number);
                        dir_b.append_value(dd.from);
                        state.append_value(r.state.as_str());
                        st.append_value(r.start);
                        en.append_value(r.end);
                    }
                }
            }
        }
        let cols: Vec<ArrayRef> = vec![
            Arc::new(file.finish()),
            Arc::new(conn.finish()),
            Arc::new(dir_b.finish()),
            Arc::new(state.finish()),
            Arc::new(st.finish()),
            Arc::new(en.finish()),
        ];
        w.write(&batch(&schema, cols)?)?;
    }
    w.close()?;
    out.files.push((path, n));
    Ok(out)
}
