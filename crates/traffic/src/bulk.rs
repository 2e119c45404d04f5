//! bulk and appwindow: one-way transfers over parallel connections.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::clock::Stamp;
use crate::report::{ConnReport, ConnRole};
use crate::clock::stamp;
use crate::sock::{self, ctx, finish_conn, Conn, ConnTimes, Ctl};
use crate::spec::{Direction, Kind, SocketOpts, TrafficSpec, APP_ACK_BYTES};

/// Earliest start of the next operation after `done` bytes at `bps` bits/s
/// (from `t0`: a transfer's first write or read, or a script step's).
pub(crate) fn paced(t0: Instant, done: u64, bps: Option<u64>) -> Option<Instant> {
    bps.map(|r| t0 + Duration::from_secs_f64(done as f64 * 8.0 / r as f64))
}

/// Collects the first real error of a parallel run and aborts the others.
struct Errors<'a> {
    ctl: &'a Ctl<'a>,
    first: Mutex<Option<io::Error>>,
}

impl Errors<'_> {
    fn record(&self, e: io::Error) {
        let mut f = self.first.lock().unwrap();
        // An abort caused by another connection's failure is not the cause.
        let replace = match &*f {
            None => true,
            Some(old) => old.kind() == io::ErrorKind::ConnectionAborted && e.kind() != io::ErrorKind::ConnectionAborted,
        };
        if replace {
            *f = Some(e);
        }
        self.ctl.abort();
    }
}

pub(crate) fn client(spec: &TrafficSpec, ctl: &Ctl, server: SocketAddr) -> io::Result<Vec<ConnReport>> {
    let role = match spec.direction {
        Direction::Upload => ConnRole::Sender,
        Direction::Download => ConnRole::Receiver,
    };
    let errors = Errors { ctl, first: Mutex::new(None) };
    let reports = Mutex::new(Vec::new());
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for i in 0..spec.connections {
            let (errors, reports) = (&errors, &reports);
            s.spawn(move || {
                let opts = spec.client_opts(i);
                let at = t0 + Duration::from_secs_f64(spec.start_interval_s * f64::from(i));
                let r = ctl
                    .sleep_until(at, "waiting to start (start_interval_s)")
                    .and_then(|()| sock::connect(server, &opts, ctl))
                    .map_err(|e| ctx(e, format!("connection {i}")))
                    .and_then(|(st, start, connected)| {
                        let times = ConnTimes { start, connected, first: None, last: None };
                        run_conn(spec, ctl, st, &opts, i, role, times)
                    });
                match r {
                    Ok(c) => reports.lock().unwrap().push(c),
                    Err(e) => errors.record(e),
                }
            });
        }
    });
    if let Some(e) = errors.first.into_inner().unwrap() {
        return Err(e);
    }
    Ok(reports.into_inner().unwrap())
}

pub(crate) fn server(spec: &TrafficSpec, ctl: &Ctl, listener: &TcpListener) -> io::Result<Vec<ConnReport>> {
    let role = match spec.direction {
        Direction::Download => ConnRole::Sender,
        Direction::Upload => ConnRole::Receiver,
    };
    let errors = Errors { ctl, first: Mutex::new(None) };
    let reports = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for i in 0..spec.connections {
            let doing = format!("waiting for connection {} of {}", i + 1, spec.connections);
            match sock::accept(listener, ctl, &doing) {
                Ok((st, t)) => {
                    let (errors, reports) = (&errors, &reports);
                    s.spawn(move || {
                        let times = ConnTimes { start: t, connected: t, first: None, last: None };
                        match run_conn(spec, ctl, st, &spec.server, i, role, times) {
                            Ok(c) => reports.lock().unwrap().push(c),
                            Err(e) => errors.record(e),
                        }
                    });
                }
                Err(e) => {
                    errors.record(e);
                    break;
                }
            }
        }
    });
    if let Some(e) = errors.first.into_inner().unwrap() {
        return Err(e);
    }
    Ok(reports.into_inner().unwrap())
}

fn run_conn(
    spec: &TrafficSpec,
    ctl: &Ctl,
    st: TcpStream,
    opts: &SocketOpts,
    index: u32,
    role: ConnRole,
    times: ConnTimes,
) -> io::Result<ConnReport> {
    let fail = |e: io::Error| ctx(e, format!("connection {index}"));
    // Per-connection options again on accepted sockets (idempotent on the
    // client's, which had them before connect()).
    sock::apply_opts(st.as_raw_fd(), opts, false).map_err(fail)?;
    let mut conn = Conn::new(st, ctl, opts).map_err(fail)?;
    let label = format!("connection {index} ({} -> {})", conn.local, conn.remote);
    let res = match (spec.kind, role) {
        (Kind::Bulk, ConnRole::Sender) => bulk_send(spec, &mut conn, index),
        (Kind::Bulk, _) => receive(spec, &mut conn, None),
        (_, ConnRole::Sender) => window_send(spec, &mut conn, index),
        (_, _) => receive(spec, &mut conn, Some(spec.window_bytes)),
    };
    let (first, last, acks) = res.map_err(|e| ctx(e, &label))?;
    let t = ConnTimes { first, last, ..times };
    finish_conn(conn, index, role, t, acks, 0).map_err(|e| ctx(e, &label))
}

type Io = (Option<Stamp>, Option<Stamp>, u64);

/// bulk sender: writes the connection's share (or for duration_s), then
/// shutdown(WR) and waits for the receiver's EOF.
fn bulk_send(spec: &TrafficSpec, conn: &mut Conn, index: u32) -> io::Result<Io> {
    let buf = vec![0u8; spec.write_size as usize];
    let total = spec.bytes_for_connection(index);
    let duration = spec.duration_s.map(Duration::from_secs_f64);
    let first = Some(stamp());
    let t0 = Instant::now();
    let mut sent: u64 = 0;
    loop {
        let n = match total {
            Some(t) if sent >= t => break,
            Some(t) => (t - sent).min(buf.len() as u64) as usize,
            None => buf.len(),
        };
        if let Some(at) = paced(t0, sent, spec.app_rate_bps) {
            conn.ctl().sleep_until(at, "pacing writes (app_rate_bps)")?;
        }
        if let Some(d) = duration {
            if t0.elapsed() >= d {
                break;
            }
        }
        conn.write_all(&buf[..n], "sending")?;
        sent += n as u64;
    }
    let last = Some(stamp());
    conn.shutdown_write()?;
    conn.expect_eof("waiting for the receiver to close after the last byte")?;
    Ok((first, last, 0))
}

/// appwindow sender: one window at a time, each followed by the receiver's
/// ACK; shutdown(WR) right after the last byte, then the last ACK, then EOF.
fn window_send(spec: &TrafficSpec, conn: &mut Conn, index: u32) -> io::Result<Io> {
    let buf = vec![0u8; spec.write_size as usize];
    let total = spec.bytes_for_connection(index).expect("appwindow has bytes");
    let window = spec.window_bytes;
    let first = Some(stamp());
    let mut last = None;
    let t0 = Instant::now();
    let (mut sent, mut acks) = (0u64, 0u64);
    while sent < total {
        let window_end = (sent + window).min(total);
        while sent < window_end {
            if let Some(at) = paced(t0, sent, spec.app_rate_bps) {
                conn.ctl().sleep_until(at, "pacing writes (app_rate_bps)")?;
            }
            let n = (window_end - sent).min(buf.len() as u64) as usize;
            conn.write_all(&buf[..n], "sending a window")?;
            sent += n as u64;
        }
        if sent == total {
            last = Some(stamp());
            conn.shutdown_write()?;
        }
        let mut ack = [0u8; APP_ACK_BYTES];
        conn.read_exact(&mut ack, "waiting for an application ACK")?;
        let acked = u64::from_be_bytes(ack);
        if acked != sent {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("application ACK for {acked} bytes, expected {sent}"),
            ));
        }
        acks += 1;
    }
    conn.expect_eof("waiting for the receiver to close after the last ACK")?;
    Ok((first, last, acks))
}

/// Receiver for bulk (`window` None) and appwindow: reads to EOF, paced by
/// read_rate_bps; for appwindow, sends an ACK with the cumulative byte count
/// after each full window and, at EOF, for a final partial window.
fn receive(spec: &TrafficSpec, conn: &mut Conn, window: Option<u64>) -> io::Result<Io> {
    let mut buf = vec![0u8; spec.read_size as usize];
    let t0 = Instant::now();
    let (mut first, mut last) = (None, None);
    let (mut got, mut pending, mut acks) = (0u64, 0u64, 0u64);
    loop {
        if let Some(at) = paced(t0, got, spec.read_rate_bps) {
            conn.ctl().sleep_until(at, "pacing reads (read_rate_bps)")?;
        }
        // Never read past a window boundary: the ACK goes out when exactly
        // one window has been read.
        let want = match window {
            Some(w) => (w - pending).min(buf.len() as u64) as usize,
            None => buf.len(),
        };
        let n = conn.read(&mut buf[..want], "receiving")?;
        if n == 0 {
            if window.is_some() && pending > 0 {
                conn.write_all(&got.to_be_bytes(), "sending the final application ACK")?;
                acks += 1;
            }
            break;
        }
        let t = stamp();
        first.get_or_insert(t);
        last = Some(t);
        got += n as u64;
        pending += n as u64;
        if window == Some(pending) {
            conn.write_all(&got.to_be_bytes(), "sending an application ACK")?;
            acks += 1;
            pending = 0;
        }
    }
    Ok((first, last, acks))
}
