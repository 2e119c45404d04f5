//! `tcpwhy stats --json`: schema `tcpwhy.stats/1`, documented in docs/json.md.
//! Fields are only ever added within a schema version; a removal or a
//! change of meaning bumps the version.

use serde_json::{json, Value};
use tcpwhy_flow::CaptureAnalysis;
use tcpwhy_wire::CaptureFormat;

pub const STATS_SCHEMA: &str = "tcpwhy.stats/1";

pub fn stats_json(files: &[CaptureAnalysis], failed: &[String]) -> Value {
    let mut connections = Vec::new();
    let mut file_list = Vec::new();
    for f in files {
        let format = match f.format {
            CaptureFormat::Pcap { nanosecond, .. } => {
                if nanosecond {
                    "pcap-ns"
                } else {
                    "pcap"
                }
            }
            CaptureFormat::PcapNg => "pcapng",
            CaptureFormat::Live => "live",
        };
        let skipped: serde_json::Map<String, Value> = f
            .skipped
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        file_list.push(json!({
            "path": f.path,
            "format": format,
            "compression": f.compression,
            "frames": f.frames,
            "tcp_segments": f.tcp_segments,
            "skipped": skipped,
            "unsupported_link_types": f.unsupported_links.iter().map(|(l, n)| json!({"link_type": l, "frames": n})).collect::<Vec<_>>(),
            "connections": f.connections.len(),
            "attempts": f.attempts,
            "evicted_connections": f.evicted_connections,
            "warning": f.error.as_ref().map(|e| e.to_string()),
            // The names `diagnose --json` and the batch `files` table use.
            "error": f.error.as_ref().map(|e| e.to_string()),
            "capture_warnings": f.warnings(),
        }));
        for c in &f.connections {
            let mut v = serde_json::to_value(c).unwrap_or(Value::Null);
            if let Value::Object(m) = &mut v {
                m.insert("file".into(), json!(f.path));
            }
            connections.push(v);
        }
    }
    json!({
        "schema": STATS_SCHEMA,
        "tool": format!("tcpwhy {}", env!("CARGO_PKG_VERSION")),
        "tcpwhy_version": env!("CARGO_PKG_VERSION"),
        "files": file_list,
        "unreadable": failed,
        "connections": connections,
    })
}
