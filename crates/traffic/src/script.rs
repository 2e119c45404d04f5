//! script: one connection replaying a conversation, step by step (a
//! captured connection's turns, think times and pauses; `tcpwhy prove`).

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::bulk::paced;
use crate::clock::{stamp, Stamp};
use crate::report::{ConnReport, ConnRole};
use crate::sock::{self, ctx, finish_conn, Conn, ConnTimes, Ctl};
use crate::spec::{End, Step, TrafficSpec, SCRIPT_DRAIN_POLL_MS};

pub(crate) fn client(spec: &TrafficSpec, ctl: &Ctl, server: SocketAddr) -> io::Result<Vec<ConnReport>> {
    let (st, start, connected) = sock::connect(server, &spec.client, ctl)?;
    let times = ConnTimes { start, connected, first: None, last: None };
    run_conn(spec, ctl, st, End::Client, times).map(|c| vec![c])
}

pub(crate) fn server(spec: &TrafficSpec, ctl: &Ctl, listener: &TcpListener) -> io::Result<Vec<ConnReport>> {
    let (st, t) = sock::accept(listener, ctl, "waiting for the connection")?;
    let times = ConnTimes { start: t, connected: t, first: None, last: None };
    run_conn(spec, ctl, st, End::Server, times).map(|c| vec![c])
}

fn run_conn(spec: &TrafficSpec, ctl: &Ctl, st: std::net::TcpStream, me: End, times: ConnTimes) -> io::Result<ConnReport> {
    let opts = match me {
        End::Client => &spec.client,
        End::Server => &spec.server,
    };
    sock::apply_opts(st.as_raw_fd(), opts, false)?;
    let mut conn = Conn::new(st, ctl, opts)?;
    let label = format!("script ({} -> {})", conn.local, conn.remote);
    let sender = spec.data_sender();
    let role = if me == sender { ConnRole::Sender } else { ConnRole::Receiver };
    let (first, last) = play(spec, &mut conn, me, sender).map_err(|e| ctx(e, &label))?;
    // The client ends the conversation: its FIN after the last step, the
    // server's FIN in answer, so both ends have read everything.
    match me {
        End::Client => {
            conn.shutdown_write()?;
            conn.expect_eof("waiting for the server to close after the last step")?;
        }
        End::Server => {
            conn.expect_eof("waiting for the client to close after the last step")?;
            conn.shutdown_write()?;
        }
    }
    let t = ConnTimes { first, last, ..times };
    finish_conn(conn, 0, role, t, 0, 0).map_err(|e| ctx(e, &label))
}

/// The steps in order. Returns the first and last data write (the data
/// sender) or read (the others) of the data sender's steps.
fn play(spec: &TrafficSpec, conn: &mut Conn, me: End, sender: End) -> io::Result<(Option<Stamp>, Option<Stamp>)> {
    let mut buf = vec![0u8; spec.write_size.max(spec.read_size) as usize];
    let (mut first, mut last) = (None, None);
    let mut prev: Option<End> = None;
    for (i, step) in spec.steps.iter().enumerate() {
        let data = step.from == sender;
        if step.from == me {
            if prev == Some(me) {
                drained(conn, &format!("waiting for step {i}'s predecessor to leave"))?;
            }
            if step.wait_ms > 0.0 {
                let at = Instant::now() + Duration::from_secs_f64(step.wait_ms / 1000.0);
                conn.ctl().sleep_until(at, &format!("waiting before step {i} (wait_ms)"))?;
            }
            let rate = if data { spec.app_rate_bps } else { None };
            write_step(conn, step, &buf[..spec.write_size as usize], rate, i)?;
            if data {
                first.get_or_insert_with(stamp);
                last = Some(stamp());
            }
        } else {
            let rate = if data { spec.read_rate_bps } else { None };
            let (f, l) = read_step(conn, step, &mut buf[..spec.read_size as usize], rate, i)?;
            if data {
                first = first.or(f);
                last = l.or(last);
            }
        }
        prev = Some(step.from);
    }
    Ok((first, last))
}

fn write_step(conn: &mut Conn, step: &Step, buf: &[u8], rate: Option<u64>, i: usize) -> io::Result<()> {
    let doing = format!("writing step {i}");
    let t0 = Instant::now();
    let mut sent = 0u64;
    while sent < step.bytes {
        if let Some(at) = paced(t0, sent, rate) {
            conn.ctl().sleep_until(at, "pacing writes (app_rate_bps)")?;
        }
        let n = (step.bytes - sent).min(buf.len() as u64) as usize;
        conn.write_all(&buf[..n], &doing)?;
        sent += n as u64;
    }
    Ok(())
}

fn read_step(conn: &mut Conn, step: &Step, buf: &mut [u8], rate: Option<u64>, i: usize) -> io::Result<(Option<Stamp>, Option<Stamp>)> {
    let doing = format!("reading step {i} ({} bytes)", step.bytes);
    let (mut first, mut last) = (None, None);
    let mut t0 = None;
    let mut got = 0u64;
    while got < step.bytes {
        if let Some(at) = t0.and_then(|t| paced(t, got, rate)) {
            conn.ctl().sleep_until(at, "pacing reads (read_rate_bps)")?;
        }
        let want = (step.bytes - got).min(buf.len() as u64) as usize;
        let n = conn.read(&mut buf[..want], &doing)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("peer closed with {} bytes of step {i} still expected", step.bytes - got),
            ));
        }
        let t = stamp();
        first.get_or_insert(t);
        last = Some(t);
        if t0.is_none() && step.read_pause_ms > 0.0 {
            let at = Instant::now() + Duration::from_secs_f64(step.read_pause_ms / 1000.0);
            conn.ctl().sleep_until(at, &format!("pausing the reads of step {i} (read_pause_ms)"))?;
        }
        t0.get_or_insert_with(Instant::now);
        got += n as u64;
    }
    Ok((first, last))
}

/// Waits until every byte written has left the socket (SIOCOUTQNSD, the
/// bytes not yet sent, at 0), polling every [`SCRIPT_DRAIN_POLL_MS`].
fn drained(conn: &mut Conn, doing: &str) -> io::Result<()> {
    loop {
        let mut unsent: libc::c_int = 0;
        // SAFETY: SIOCOUTQNSD writes one int through the pointer.
        let r = unsafe { libc::ioctl(conn.fd(), libc::SIOCOUTQNSD, &mut unsent) };
        if r != 0 {
            return Err(ctx(io::Error::last_os_error(), "ioctl(SIOCOUTQNSD)"));
        }
        if unsent <= 0 {
            return Ok(());
        }
        let at = Instant::now() + Duration::from_millis(SCRIPT_DRAIN_POLL_MS);
        conn.ctl().sleep_until(at, doing)?;
    }
}
