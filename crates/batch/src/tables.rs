//! The batch tables as Arrow: one schema per table (docs/batch.md), spelled
//! with tcpwhy-report's columns (`connection_key`, `f`), and
//! rows turned into record batches through arrow-json's serde decoder, so
//! the row structs in `rows` are the single definition of each column.

use crate::rows::FileResult;
use arrow_array::RecordBatch;
use arrow_schema::{ArrowError, DataType, Field, Fields, Schema, SchemaRef};
use serde::Serialize;
use std::sync::Arc;
use tcpwhy_report::tables::{connection_key, f};

/// Version of the batch tables: columns are only ever added within it.
pub const SCHEMA: &str = "tcpwhy.batch/1";

/// The tables of a batch. `Files` is written last in each commit: it is
/// the record of what a resumed batch may skip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    Directions,
    Quality,
    Groups,
    Errors,
    Todo,
    Files,
    /// Two capture points compared (`tcpwhy batch --pairs`; `crate::pairs`):
    /// written after `files`, from the pairs' own rows.
    Pairs,
}

impl Table {
    pub const ALL: [Table; 7] = [Table::Directions, Table::Quality, Table::Groups, Table::Errors, Table::Todo, Table::Files, Table::Pairs];
    /// The tables of one capture's rows (`FileResult`), `files` last.
    pub const OF_FILES: [Table; 6] = [Table::Directions, Table::Quality, Table::Groups, Table::Errors, Table::Todo, Table::Files];

    pub fn name(self) -> &'static str {
        match self {
            Table::Directions => "directions",
            Table::Quality => "quality",
            Table::Groups => "groups",
            Table::Errors => "errors",
            Table::Todo => "todo",
            Table::Files => "files",
            Table::Pairs => "pairs",
        }
    }

    pub fn from_name(s: &str) -> Option<Table> {
        Table::ALL.into_iter().find(|t| t.name() == s)
    }

    pub fn schema(self) -> SchemaRef {
        match self {
            Table::Directions => directions_schema(),
            Table::Quality => quality_schema(),
            Table::Groups => groups_schema(),
            Table::Errors => errors_schema(),
            Table::Todo => todo_schema(),
            Table::Files => files_schema(),
            Table::Pairs => pairs_schema(),
        }
    }

    /// The rows of this table in one file's result, as a record batch.
    pub fn batch(self, results: &[&FileResult]) -> Result<RecordBatch, ArrowError> {
        let schema = self.schema();
        match self {
            Table::Directions => to_batch(&schema, results.iter().flat_map(|r| &r.directions)),
            Table::Quality => to_batch(&schema, results.iter().flat_map(|r| &r.quality)),
            Table::Groups => to_batch(&schema, results.iter().flat_map(|r| &r.groups)),
            Table::Errors => to_batch(&schema, results.iter().flat_map(|r| &r.errors)),
            Table::Todo => to_batch(&schema, results.iter().flat_map(|r| &r.todo)),
            Table::Files => to_batch(&schema, results.iter().map(|r| &r.file)),
            Table::Pairs => Ok(RecordBatch::new_empty(schema)),
        }
    }

    pub fn rows_in(self, r: &FileResult) -> usize {
        match self {
            Table::Directions => r.directions.len(),
            Table::Quality => r.quality.len(),
            Table::Groups => r.groups.len(),
            Table::Errors => r.errors.len(),
            Table::Todo => r.todo.len(),
            Table::Files => 1,
            Table::Pairs => 0,
        }
    }
}

/// Rows (any `Serialize` whose fields are the schema's) to one record batch.
pub fn to_batch<'a, T: Serialize + 'a>(schema: &SchemaRef, rows: impl Iterator<Item = &'a T>) -> Result<RecordBatch, ArrowError> {
    let rows: Vec<&T> = rows.collect();
    let mut decoder = arrow_json::ReaderBuilder::new(schema.clone())
        .with_batch_size(rows.len().max(1))
        .build_decoder()?;
    decoder.serialize(&rows)?;
    Ok(decoder.flush()?.unwrap_or_else(|| RecordBatch::new_empty(schema.clone())))
}

fn list(item: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(item, true)))
}

fn strings() -> DataType {
    list(DataType::Utf8)
}

fn structure(fields: Vec<Field>) -> DataType {
    DataType::Struct(Fields::from(fields))
}

pub fn directions_schema() -> SchemaRef {
    use DataType::*;
    let limits = structure(tcpwhy_core::Limit::ALL.iter().map(|l| f(l.as_str(), Float64, false)).collect());
    let finding = structure(vec![f("kind", Utf8, false), f("text", Utf8, false), f("numbers", Utf8, false)]);
    let fix = structure(vec![
        f("kind", Utf8, false),
        f("on", Utf8, false),
        f("text", Utf8, false),
        f("commands", strings(), false),
        f("system", Utf8, false),
    ]);
    let what_if = structure(vec![
        f("fix", Utf8, false),
        f("current_bps", Float64, false),
        f("predicted_bps", Float64, true),
        f("predicted_low_bps", Float64, true),
        f("predicted_high_bps", Float64, true),
        f("bound", Utf8, false),
        f("addresses", strings(), false),
        f("duration_s", Float64, true),
        f("saved_s", Float64, true),
        f("assumptions", strings(), false),
    ]);
    let run = structure(vec![f("state", Utf8, false), f("bytes", UInt64, false), f("start", Float64, false), f("end", Float64, false)]);
    let mut fields = connection_key();
    fields.extend([
        f("direction", Utf8, false),
        f("sender", Utf8, false),
        f("receiver", Utf8, false),
        f("sender_system", Utf8, false),
        f("receiver_system", Utf8, false),
        f("congestion_control", Utf8, false),
        f("congestion_control_confidence", Utf8, true),
        f("first_time", Float64, false),
        f("bytes", UInt64, false),
        f("duration_s", Float64, false),
        f("goodput_bps", Float64, true),
        f("capture_point", Utf8, false),
        f("rtt_base_ms", Float64, true),
        f("rtt_median_ms", Float64, true),
        f("rtt_p90_ms", Float64, true),
        f("handshake_rtt_ms", Float64, true),
        f("rtt_source", Utf8, false),
        f("segment_bytes", UInt32, false),
        f("path_rate_bps", Float64, true),
        f("path_capacity", Utf8, false),
        f("interval_ms", Float64, false),
        f("traffic_shape", Utf8, false),
        f("primary", Utf8, false),
        f("confidence", Utf8, false),
        f("summary", Utf8, false),
        f("limits", limits, false),
        f("predicted_bps", Float64, true),
        f("predicted_low_bps", Float64, true),
        f("predicted_high_bps", Float64, true),
        f("predicted_gain", Float64, true),
        f("saved_s", Float64, true),
        f("network_share", Float64, false),
        f("most_gain", Float64, true),
        f("findings", list(finding), false),
        f("fixes", list(fix), false),
        f("what_if", list(what_if), false),
        f("to_confirm", strings(), false),
        f("capture_quality", strings(), false),
        f("timeline", list(run), false),
        f("truncated", Boolean, false),
    ]);
    Arc::new(Schema::new(fields))
}

pub fn todo_schema() -> SchemaRef {
    use DataType::*;
    Arc::new(Schema::new(vec![
        f("file", Utf8, false),
        f("connection", UInt64, false),
        f("direction", Utf8, false),
        f("fix", Utf8, false),
        f("on", Utf8, false),
        f("host", Utf8, false),
        f("system", Utf8, false),
        f("primary", Utf8, false),
        f("bytes", UInt64, false),
        f("duration_s", Float64, false),
        f("saved_s", Float64, false),
        f("current_bps", Float64, false),
        f("predicted_bps", Float64, true),
    ]))
}

pub fn quality_schema() -> SchemaRef {
    use DataType::*;
    Arc::new(Schema::new(vec![
        f("file", Utf8, false),
        f("connection", UInt64, false),
        f("kind", Utf8, false),
        f("text", Utf8, false),
        f("weakens", strings(), false),
        f("numbers", Utf8, false),
    ]))
}

pub fn groups_schema() -> SchemaRef {
    use DataType::*;
    let entries = Field::new(
        "entries",
        structure(vec![f("keys", Utf8, false), f("values", UInt64, true)]),
        false,
    );
    let finding = structure(vec![f("kind", Utf8, false), f("text", Utf8, false)]);
    Arc::new(Schema::new(vec![
        f("file", Utf8, false),
        f("group", UInt64, false),
        f("sender", Utf8, false),
        f("receiver", Utf8, false),
        f("flows", UInt64, false),
        f("connections", list(UInt64), false),
        f("bytes", UInt64, false),
        f("first_time", Float64, false),
        f("last_time", Float64, false),
        f("aggregate_goodput_bps", Float64, true),
        f("policer_rate_bps", Float64, true),
        f("policer_burst_bytes", UInt64, true),
        f("primaries", Map(Arc::new(entries), false), false),
        f("findings", list(finding), false),
    ]))
}

pub fn files_schema() -> SchemaRef {
    use DataType::*;
    Arc::new(Schema::new(vec![
        f("file", Utf8, false),
        f("size", UInt64, false),
        f("mtime_ns", Int64, false),
        f("format", Utf8, true),
        f("compression", Utf8, true),
        f("frames", UInt64, false),
        f("tcp_segments", UInt64, false),
        f("connections", UInt64, false),
        f("directions", UInt64, false),
        f("interface_drops", UInt64, true),
        f("attempts", UInt64, false),
        f("failed_attempts", UInt64, false),
        f("attempts_kind", Utf8, true),
        f("attempts_text", Utf8, false),
        f("first_time", Float64, true),
        f("capture_warnings", strings(), false),
        f("exit_code", UInt8, false),
        f("error", Utf8, true),
        f("elapsed_s", Float64, false),
        f("tcpwhy_version", Utf8, false),
        f("skipped", Utf8, true),
    ]))
}

pub fn pairs_schema() -> SchemaRef {
    use DataType::*;
    let finding = structure(vec![
        f("kind", Utf8, false),
        f("location", Utf8, false),
        f("text", Utf8, false),
        f("fix", Utf8, true),
        f("value", Float64, true),
    ]);
    let change = structure(vec![f("kind", Utf8, false), f("detail", Utf8, false), f("frames", UInt64, false)]);
    let direction = structure(vec![
        f("from", Utf8, false),
        f("upstream_capture", UInt8, false),
        f("packets_0", UInt64, false),
        f("packets_1", UInt64, false),
        f("paired", UInt64, false),
        f("segments", UInt64, false),
        f("lost_before_upstream", UInt64, false),
        f("lost_between", UInt64, false),
        f("lost_after_downstream", UInt64, false),
        f("not_captured_upstream", UInt64, false),
        f("not_captured_downstream", UInt64, false),
        f("needless_retransmissions", UInt64, false),
        f("unresolved", UInt64, false),
        f("base_delay_low_ms", Float64, true),
        f("base_delay_high_ms", Float64, true),
        f("growth_p50_ms", Float64, true),
        f("growth_p95_ms", Float64, true),
        f("growth_max_ms", Float64, true),
        f("drain_rate_bps", Float64, true),
        f("rtt_min_ms_0", Float64, true),
        f("rtt_min_ms_1", Float64, true),
        f("window_rewritten", UInt64, false),
    ]);
    let proxy = structure(vec![
        f("from", Utf8, false),
        f("bytes_0", Int64, false),
        f("bytes_1", Int64, false),
        f("upstream_ms", Float64, false),
        f("downstream_ms", Float64, false),
        f("release_per_round_bytes", Int64, true),
        f("round_trip_ms", Float64, true),
        f("client_window_max", UInt64, true),
    ]);
    let mut fields = Vec::new();
    for k in 0..2 {
        fields.extend([f(&format!("file_{k}"), Utf8, false), f(&format!("size_{k}"), UInt64, false), f(&format!("mtime_ns_{k}"), Int64, false)]);
    }
    fields.extend([
        f("connection_0", UInt64, true),
        f("connection_1", UInt64, true),
        f("client_0", Utf8, true),
        f("server_0", Utf8, true),
        f("client_1", Utf8, true),
        f("server_1", Utf8, true),
        f("match_kind", Utf8, true),
        f("evidence", strings(), false),
        f("client_capture", UInt8, true),
        f("client_capture_by", Utf8, true),
        f("offset_low_ms", Float64, true),
        f("offset_high_ms", Float64, true),
        f("primary", Utf8, true),
        f("primary_location", Utf8, true),
        f("findings", list(finding), false),
        f("changes", list(change), false),
        f("directions", list(direction), false),
        f("proxy", list(proxy), false),
        f("connections_0", UInt64, false),
        f("connections_1", UInt64, false),
        f("unmatched_0", UInt64, false),
        f("unmatched_1", UInt64, false),
        f("clock_consistent", Boolean, false),
        f("messages", strings(), false),
    ]);
    Arc::new(Schema::new(fields))
}

pub fn errors_schema() -> SchemaRef {
    use DataType::*;
    Arc::new(Schema::new(vec![
        f("file", Utf8, false),
        f("kind", Utf8, false),
        f("exit_code", UInt8, false),
        f("message", Utf8, false),
        f("frames_before", UInt64, false),
    ]))
}
