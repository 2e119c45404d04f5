//! Host-side TCP evidence beyond captures, all turned into the same typed
//! data as `tcpwhy-kernel` produces:
//!
//! - [`ss`]: saved `ss -tin` / `ss -tinm` text (one or many snapshots, with
//!   timestamps from `date`, `watch` or a loop) into [`SocketSample`]s.
//! - [`series`]: a per-connection sample series (from `ss` text, `tcpwhy
//!   live`, or a lab run) cut into intervals, each attributed to a limit
//!   from the kernel's own busy / rwnd_limited / sndbuf_limited counters
//!   plus cwnd versus in flight; a diagnosis per connection.
//! - [`text`]: `sysctl -a`, `ip tcp_metrics show`, `nstat -az` and
//!   `netstat -s` text.
//! - [`host`]: the host's settings judged: largest windows, throughput
//!   ceiling at an RTT, findings with exact fix commands.
//! - [`bdp`]: bandwidth-delay product, buffer sizes for a kernel's window
//!   rule, time to send N bytes from a cold start.
//! - [`trace`]: per-flow summaries of `tcp:tcp_probe` events.
//! - [`evidence`]: all of the above loaded as evidence for a capture
//!   diagnosis (the command line adds it to the diagnosis).
//!
//! [`SocketSample`]: tcpwhy_kernel::SocketSample

pub mod bdp;
pub mod error;
pub mod evidence;
pub mod host;
pub mod series;
pub mod ss;
pub mod text;
pub mod trace;

pub use error::Error;
