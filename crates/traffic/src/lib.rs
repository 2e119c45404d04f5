//! Traffic generators for the lab: bulk, request/response, application-windowed,
//! and a replayed conversation (script).
//!
//! One [`TrafficSpec`] describes both ends. The lab runs [`run_server`] in one
//! network namespace and [`run_client`] in the other; each returns a
//! [`Report`] whose byte counts and timestamps are ground truth for the
//! diagnosis (CLOCK_REALTIME lines up with capture timestamps).
//!
//! Conventions used throughout:
//! * rates (`*_bps`) are **bits** per second of application payload;
//! * sizes are bytes; times are named by unit (`_ms`, `_s`, `_ns`);
//! * "sender"/"receiver" are the ends of the data direction (bulk,
//!   appwindow); for `direction = "download"` the server sends;
//! * every connection ends cleanly: the sender (or the client, for reqresp)
//!   calls shutdown(SHUT_WR) after its last byte, the other end reads to EOF
//!   and closes, and the first end reads that EOF before closing, so both
//!   ends' byte counts are exact and all data was acknowledged before the
//!   final TCP_INFO snapshot.
//!
//! The byte contents are zeros. Nothing is exchanged beyond what is
//! described per kind (no hello, no trailer).


mod bulk;
mod clock;
mod error;
mod report;
mod reqresp;
mod script;
mod sock;
mod spec;

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::AtomicBool;

pub use error::{Error, Head, HttpError, Problem};
pub use clock::{stamp, Stamp};
pub use report::*;
pub use sock::{from_hex, tcp_info_raw, to_hex, TCP_INFO_REQUEST};
pub use spec::*;

/// An invalid spec as the I/O error the run functions return (the message
/// is the [`Error`]'s, which stays reachable as its inner error).
fn invalid(e: Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e)
}

/// Runs the server end: binds `listen` (port 0 = ephemeral) with
/// `spec.server` options, calls `ready` with the bound address once it is
/// listening, serves the connections/requests the spec implies, and returns
/// when they are done. Returns an Interrupted error if `stop` is set first
/// (checked at least every 100 ms), TimedOut after `timeout_s`.
pub fn run_server(
    spec: &TrafficSpec,
    listen: SocketAddr,
    ready: impl FnOnce(SocketAddr),
    stop: &AtomicBool,
) -> io::Result<Report> {
    validate(spec).map_err(invalid)?;
    let start = stamp();
    let ctl = sock::Ctl::new(stop, spec.timeout_s);
    let listener = sock::listen(listen, &spec.server).map_err(|e| ctx_role("server", e))?;
    if spec.kind == Kind::Reqresp {
        // The request timings take the kernel's receive stamps: on before the
        // client can connect (accepted sockets inherit it), and live in the
        // kernel before the first segment arrives.
        sock::enable_rx_stamps(listener.as_raw_fd()).map_err(|e| ctx_role("server", e))?;
        sock::await_rx_stamps(listener.local_addr()?.ip());
    }
    ready(listener.local_addr()?);
    let r = match spec.kind {
        Kind::Bulk | Kind::Appwindow => bulk::server(spec, &ctl, &listener).map(|c| Report::new(Role::Server, spec, start, c)),
        Kind::Script => script::server(spec, &ctl, &listener).map(|c| Report::new(Role::Server, spec, start, c)),
        Kind::Reqresp => reqresp::server(spec, &ctl, &listener).map(|(c, served)| {
            let mut r = Report::new(Role::Server, spec, start, c);
            r.served = served;
            r
        }),
    };
    r.map_err(|e| ctx_role("server", e))
}

/// Runs the client end against `server` with `spec.client` options.
pub fn run_client(spec: &TrafficSpec, server: SocketAddr) -> io::Result<Report> {
    run_client_with_stop(spec, server, &AtomicBool::new(false))
}

/// [`run_client`] with a stop flag (checked at least every 100 ms).
pub fn run_client_with_stop(spec: &TrafficSpec, server: SocketAddr, stop: &AtomicBool) -> io::Result<Report> {
    validate(spec).map_err(invalid)?;
    let start = stamp();
    let ctl = sock::Ctl::new(stop, spec.timeout_s);
    let r = match spec.kind {
        Kind::Bulk | Kind::Appwindow => bulk::client(spec, &ctl, server).map(|c| Report::new(Role::Client, spec, start, c)),
        Kind::Script => script::client(spec, &ctl, server).map(|c| Report::new(Role::Client, spec, start, c)),
        Kind::Reqresp => reqresp::client(spec, &ctl, server).map(|(c, reqs)| {
            let mut r = Report::new(Role::Client, spec, start, c);
            r.requests = reqs;
            r
        }),
    };
    r.map_err(|e| ctx_role("client", e))
}

fn ctx_role(role: &str, e: io::Error) -> io::Error {
    sock::ctx(e, format!("traffic {role}"))
}
