//! TCP connections rebuilt from segments.
//!
//! [`FlowTable`] takes decoded segments (from `tcpwhy-wire`) in capture order
//! and keeps one [`Connection`] per 4-tuple: a new SYN with a new initial
//! sequence number on a tuple in use starts a new connection (port reuse);
//! a connection already open when the capture began is kept, with its
//! window scale marked unknown.
//!
//! For each direction it keeps the sender's sequence space (wrap-safe), the
//! handshake options, the advertised window in bytes, a SACK scoreboard,
//! bytes in flight net of SACKed data, RTT samples (data to ACK with Karn's
//! rule, and TSval to TSecr), goodput and throughput over time, idle gaps,
//! and per-segment analysis flags with the meaning of Wireshark's
//! `tcp.analysis.*` (see [`Flags`]). From the RTT split between the two
//! sides of the capture point it infers whether the capture was taken near
//! the sender or near the receiver ([`CapturePoint`]).
//!
//! Nothing here prints; memory is bounded per connection, and closed
//! connections are retired to a small summary.

mod analysis;
mod attempts;
mod capture;
mod conn;
mod flags;
mod handover;
mod key;
mod quality;
mod ranges;
mod seq;
mod shard;
mod split;
mod stats;
mod summary;
mod table;

pub use attempts::{AttemptSummary, TopEntry, ATTEMPTS_LISTED_MAX, MAX_HELD_SEGMENTS, MAX_LIVE_ATTEMPTS, SYN_QUEUE_HOLD_S, SYN_QUEUE_MAX};
pub use analysis::{AnalyzeOptions, CaptureAnalysis};
pub use capture::{analyze_capture, analyze_capture_sharded};
pub use split::{SplitJoin, SPLIT_HEAD_FRAMES, SPLIT_MAX_CONNECTIONS, SPLIT_MIN_BYTES, SPLIT_SNAPSHOT_FRAMES, SPLIT_WARM_UP_FRAMES};
pub use conn::{
    CloseState, Connection, Direction, IdleGap, SegmentCounts, SegmentEvent, SynOptions,
    WindowScale, IDLE_GAP_NS,
};
pub use flags::{FlagCounts, Flags};
pub use quality::{DuplicateFilter, CLOCK_STEP_BACK_NS, DUPLICATE_MAX_GAP_NS, DUPLICATE_MAX_GAP_WITH_IP_ID_NS, DUPLICATE_MEMORY_MAX_FRAMES};
pub use stats::{DurationStats, DurationSummary, RateSeries, Wide};
pub use summary::{
    BinnedBytes, CapturePoint, ConnectionSummary, DirectionSummary, EndpointSummary, SeriesSummary,
};
pub use table::{FlowTable, SegmentSink, ShardSink, SkipCounts, SplitView, Tee, MAX_CONNECTIONS_DEFAULT};
