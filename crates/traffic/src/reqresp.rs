//! reqresp: sequential requests over one keep-alive connection or a new
//! connection each, with raw framing or HTTP/1.1.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::error::{Head, HttpError};
use crate::clock::Stamp;
use crate::report::{ConnReport, ConnRole, RequestTiming, ServedRequest};
use crate::clock::stamp;
use crate::sock::{self, ctx, finish_conn, Conn, ConnTimes, Ctl};
use crate::spec::{ConnectionMode, Protocol, TrafficSpec, HTTP_MAX_HEADER, RAW_REQUEST_HEADER};

const RAW_MAGIC: &[u8; 4] = b"TWRQ";

fn bad_data(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// Makes `pending` hold at least `want` bytes, reading no more than needed.
/// Ok(false) if the peer closed before sending anything.
fn fill(conn: &mut Conn, pending: &mut Vec<u8>, want: usize, first: &mut Option<Stamp>, doing: &str) -> io::Result<bool> {
    let mut tmp = [0u8; 4096];
    while pending.len() < want {
        let room = (want - pending.len()).min(tmp.len());
        let n = conn.read(&mut tmp[..room], doing)?;
        if n == 0 {
            if pending.is_empty() {
                return Ok(false);
            }
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("peer closed after {} of {want} bytes while {doing}", pending.len()),
            ));
        }
        first.get_or_insert_with(stamp);
        pending.extend_from_slice(&tmp[..n]);
    }
    Ok(true)
}

/// Reads an HTTP header block (up to and including the blank line) into a
/// Vec; bytes after it stay in `pending`. Ok(None) on EOF before any byte.
fn read_head(
    conn: &mut Conn,
    pending: &mut Vec<u8>,
    first: &mut Option<Stamp>,
    doing: &str,
) -> io::Result<Option<Vec<u8>>> {
    let mut tmp = [0u8; 4096];
    let mut scanned = 0;
    loop {
        if let Some(pos) = pending[scanned..].windows(4).position(|w| w == b"\r\n\r\n") {
            let end = scanned + pos + 4;
            if end > HTTP_MAX_HEADER {
                break;
            }
            return Ok(Some(pending.drain(..end).collect()));
        }
        if pending.len() >= HTTP_MAX_HEADER {
            break;
        }
        scanned = pending.len().saturating_sub(3);
        let n = conn.read(&mut tmp, doing)?;
        if n == 0 {
            if pending.is_empty() {
                return Ok(None);
            }
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("peer closed inside a header block ({} bytes) while {doing}", pending.len()),
            ));
        }
        first.get_or_insert_with(stamp);
        pending.extend_from_slice(&tmp[..n]);
    }
    Err(bad_data(format!("header block longer than {HTTP_MAX_HEADER} bytes while {doing}")))
}

/// Reads and discards exactly `n` bytes (first from `pending`).
fn consume(
    conn: &mut Conn,
    pending: &mut Vec<u8>,
    mut n: u64,
    scratch: &mut [u8],
    first: &mut Option<Stamp>,
    doing: &str,
) -> io::Result<()> {
    let take = (pending.len() as u64).min(n) as usize;
    pending.drain(..take);
    n -= take as u64;
    while n > 0 {
        let want = n.min(scratch.len() as u64) as usize;
        let r = conn.read(&mut scratch[..want], doing)?;
        if r == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("peer closed with {n} bytes still expected while {doing}"),
            ));
        }
        first.get_or_insert_with(stamp);
        n -= r as u64;
    }
    Ok(())
}

/// A parsed HTTP request head.
#[derive(Debug, PartialEq)]
pub(crate) struct HttpRequest {
    pub response_bytes: u64,
    pub body_bytes: u64,
    pub close: bool,
}

fn header_lines(head: &[u8], what: Head) -> Result<(String, Vec<(String, String)>), HttpError> {
    let text = std::str::from_utf8(head).map_err(|_| HttpError::NotUtf8 { head: what })?;
    let text = text.strip_suffix("\r\n\r\n").ok_or(HttpError::Unterminated { head: what })?;
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default().to_string();
    let mut headers = Vec::new();
    for l in lines {
        let (name, value) = l.split_once(':').ok_or_else(|| HttpError::NoColon { head: what, line: l.to_string() })?;
        if name.is_empty() || name.trim() != name {
            return Err(HttpError::BadHeaderName { head: what, name: name.to_string() });
        }
        headers.push((name.to_ascii_lowercase(), value.trim().to_string()));
    }
    Ok((first, headers))
}

fn content_length(headers: &[(String, String)], what: Head) -> Result<Option<u64>, HttpError> {
    let mut cl = None;
    for (n, v) in headers {
        match n.as_str() {
            "content-length" => {
                let x: u64 = v.parse().map_err(|_| HttpError::BadContentLength { head: what, value: v.clone() })?;
                if cl.is_some_and(|c| c != x) {
                    return Err(HttpError::ConflictingContentLength { head: what });
                }
                cl = Some(x);
            }
            "transfer-encoding" => return Err(HttpError::TransferEncoding { head: what, value: v.clone() }),
            _ => {}
        }
    }
    Ok(cl)
}

fn wants_close(headers: &[(String, String)]) -> bool {
    headers
        .iter()
        .filter(|(n, _)| n == "connection")
        .any(|(_, v)| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
}

pub(crate) fn parse_http_request(head: &[u8]) -> Result<HttpRequest, HttpError> {
    let (line, headers) = header_lines(head, Head::Request)?;
    let parts: Vec<&str> = line.split(' ').collect();
    let [method, target, version] = parts[..] else {
        return Err(HttpError::BadRequestLine { line });
    };
    if version != "HTTP/1.1" {
        return Err(HttpError::Version { version: version.to_string() });
    }
    if method != "GET" && method != "POST" {
        return Err(HttpError::Method { method: method.to_string() });
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if path != "/obj" {
        return Err(HttpError::Path { path: path.to_string() });
    }
    let bytes = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("bytes="))
        .ok_or_else(|| HttpError::NoBytes { target: target.to_string() })?;
    let response_bytes: u64 = bytes
        .parse()
        .map_err(|_| HttpError::BadBytes { bytes: bytes.to_string(), target: target.to_string() })?;
    if !headers.iter().any(|(n, _)| n == "host") {
        return Err(HttpError::NoHost);
    }
    let body_bytes = content_length(&headers, Head::Request)?.unwrap_or(0);
    Ok(HttpRequest { response_bytes, body_bytes, close: wants_close(&headers) })
}

/// (Content-Length, server closes after this response).
pub(crate) fn parse_http_response(head: &[u8]) -> Result<(u64, bool), HttpError> {
    let (line, headers) = header_lines(head, Head::Response)?;
    let mut parts = line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    let code = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") {
        return Err(HttpError::BadStatusLine { line: line.clone() });
    }
    if code != "200" {
        return Err(HttpError::Status { line: line.clone() });
    }
    let cl = content_length(&headers, Head::Response)?.ok_or(HttpError::NoContentLength)?;
    Ok((cl, wants_close(&headers) || version == "HTTP/1.0"))
}

fn build_request(spec: &TrafficSpec, server: SocketAddr, close: bool) -> Vec<u8> {
    let mut wire = match spec.protocol {
        Protocol::Raw => {
            let mut h = Vec::with_capacity(RAW_REQUEST_HEADER + spec.request_bytes as usize);
            h.extend_from_slice(RAW_MAGIC);
            h.extend_from_slice(&(spec.request_bytes as u32).to_be_bytes());
            h.extend_from_slice(&spec.response_bytes.to_be_bytes());
            h
        }
        Protocol::Http => {
            let c = if close { "close" } else { "keep-alive" };
            let n = spec.response_bytes;
            let s = if spec.request_bytes > 0 {
                format!(
                    "POST /obj?bytes={n} HTTP/1.1\r\nHost: {server}\r\nContent-Length: {}\r\n\
                     Content-Type: application/octet-stream\r\nConnection: {c}\r\n\r\n",
                    spec.request_bytes
                )
            } else {
                format!("GET /obj?bytes={n} HTTP/1.1\r\nHost: {server}\r\nConnection: {c}\r\n\r\n")
            };
            s.into_bytes()
        }
    };
    wire.resize(wire.len() + spec.request_bytes as usize, 0);
    wire
}

struct Open<'c> {
    conn: Conn<'c>,
    index: u32,
    times: ConnTimes,
    requests: u32,
    pending: Vec<u8>,
    /// The server will close after the current response (HTTP close).
    server_closes: bool,
}

impl Open<'_> {
    fn close(mut self) -> io::Result<ConnReport> {
        if !self.pending.is_empty() {
            return Err(bad_data(format!("{} unexpected bytes after the last response", self.pending.len())));
        }
        if self.server_closes {
            self.conn.expect_eof("waiting for the server to close (Connection: close)")?;
        } else {
            self.conn.shutdown_write()?;
            self.conn.expect_eof("waiting for the server to close after our FIN")?;
        }
        finish_conn(self.conn, self.index, ConnRole::Requester, self.times, 0, self.requests)
    }
}

pub(crate) fn client(
    spec: &TrafficSpec,
    ctl: &Ctl,
    server: SocketAddr,
) -> io::Result<(Vec<ConnReport>, Vec<RequestTiming>)> {
    let new_each = spec.connection == ConnectionMode::New;
    let http = spec.protocol == Protocol::Http;
    let idle = Duration::from_millis(spec.idle_ms);
    let mut scratch = vec![0u8; spec.read_size as usize];
    let (mut conns, mut reqs) = (Vec::new(), Vec::new());
    let mut cur: Option<Open> = None;
    let mut prev_last: Option<Instant> = None;
    let mut next_index = 0u32;
    for i in 0..spec.requests {
        if let Some(p) = prev_last {
            ctl.sleep_until(p + idle, "idling between requests (idle_ms)")?;
        }
        let (mut connect_start, mut connected) = (None, None);
        if cur.is_none() {
            let (st, s0, s1) = sock::connect(server, &spec.client, ctl).map_err(|e| ctx(e, format!("request {i}")))?;
            sock::apply_opts(st.as_raw_fd(), &spec.client, false)?;
            let mut conn = Conn::new(st, ctl, &spec.client)?;
            conn.enable_rx_stamps()?;
            connect_start = Some(s0);
            connected = Some(s1);
            cur = Some(Open {
                conn,
                index: next_index,
                times: ConnTimes { start: s0, connected: s1, first: None, last: None },
                requests: 0,
                pending: Vec::new(),
                server_closes: false,
            });
            next_index += 1;
        }
        let o = cur.as_mut().expect("connection open");
        let label = format!("request {i} on connection {} ({} -> {})", o.index, o.conn.local, o.conn.remote);
        let wrap = |e: io::Error| ctx(e, &label);
        let wire = build_request(spec, server, new_each);
        let (sent0, recv0) = (o.conn.sent, o.conn.received);

        o.conn.restart_rx_stamps();
        let request_start = stamp();
        o.times.first.get_or_insert(request_start);
        let k = (spec.request_writes as usize).min(wire.len()).max(1);
        let (base, extra) = (wire.len() / k, wire.len() % k);
        let mut off = 0;
        for p in 0..k {
            let len = base + usize::from(p < extra);
            o.conn.write_all(&wire[off..off + len], "sending the request").map_err(wrap)?;
            off += len;
        }
        let request_sent = stamp();

        let mut first = None;
        let body = if http {
            let head = read_head(&mut o.conn, &mut o.pending, &mut first, "reading the response header")
                .map_err(wrap)?
                .ok_or_else(|| wrap(io::Error::new(io::ErrorKind::UnexpectedEof, "server closed before responding")))?;
            let (cl, closes) = parse_http_response(&head).map_err(|e| wrap(bad_data(e)))?;
            if cl != spec.response_bytes {
                return Err(wrap(bad_data(HttpError::WrongLength { got: cl, asked: spec.response_bytes })));
            }
            o.server_closes = closes;
            consume(&mut o.conn, &mut o.pending, cl, &mut scratch, &mut first, "reading the response body").map_err(wrap)?;
            cl
        } else {
            let n = spec.response_bytes;
            consume(&mut o.conn, &mut o.pending, n, &mut scratch, &mut first, "reading the response").map_err(wrap)?;
            n
        };
        let last = stamp();
        prev_last = Some(Instant::now());
        o.times.last = Some(last);
        o.requests += 1;
        let (lp, rp) = (o.conn.local.port(), o.conn.remote.port());
        reqs.push(RequestTiming {
            index: i,
            conn_index: o.index,
            local_port: lp,
            remote_port: rp,
            connect_start,
            connected,
            request_start,
            request_sent,
            first_response_byte: first.unwrap_or(last),
            last_response_byte: last,
            last_response_byte_kernel_ns: o.conn.last_rx_ns,
            request_bytes: o.conn.sent - sent0,
            response_bytes: o.conn.received - recv0,
            response_body_bytes: body,
        });
        if new_each || o.server_closes {
            let o = cur.take().expect("connection open");
            let index = o.index;
            conns.push(o.close().map_err(|e| ctx(e, format!("closing connection {index}")))?);
        }
    }
    if let Some(o) = cur.take() {
        let index = o.index;
        conns.push(o.close().map_err(|e| ctx(e, format!("closing connection {index}")))?);
    }
    Ok((conns, reqs))
}

/// What the server read: (response bytes asked for, close after it).
fn read_request(
    spec: &TrafficSpec,
    conn: &mut Conn,
    pending: &mut Vec<u8>,
    scratch: &mut [u8],
    first: &mut Option<Stamp>,
) -> io::Result<Option<(u64, bool)>> {
    match spec.protocol {
        Protocol::Raw => {
            if !fill(conn, pending, RAW_REQUEST_HEADER, first, "reading a request header")? {
                return Ok(None);
            }
            let h: Vec<u8> = pending.drain(..RAW_REQUEST_HEADER).collect();
            if &h[..4] != RAW_MAGIC {
                return Err(bad_data(format!("bad request magic {:02x?}", &h[..4])));
            }
            let req_len = u32::from_be_bytes(h[4..8].try_into().unwrap()) as u64;
            let resp_len = u64::from_be_bytes(h[8..16].try_into().unwrap());
            consume(conn, pending, req_len, scratch, first, "reading a request payload")?;
            Ok(Some((resp_len, false)))
        }
        Protocol::Http => {
            let Some(head) = read_head(conn, pending, first, "reading a request header")? else {
                return Ok(None);
            };
            let req = match parse_http_request(&head) {
                Ok(r) => r,
                Err(e) => {
                    let msg = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
                    let _ = conn.write_all(msg, "answering 400");
                    return Err(bad_data(format!("bad HTTP request: {e}")));
                }
            };
            consume(conn, pending, req.body_bytes, scratch, first, "reading a request body")?;
            Ok(Some((req.response_bytes, req.close)))
        }
    }
}

pub(crate) fn server(
    spec: &TrafficSpec,
    ctl: &Ctl,
    listener: &TcpListener,
) -> io::Result<(Vec<ConnReport>, Vec<ServedRequest>)> {
    let service = Duration::from_millis(spec.service_ms);
    // The listener's receive stamps were turned on by run_server before it
    // called ready; accepted sockets inherit them.
    let zeros = vec![0u8; spec.write_size as usize];
    let mut scratch = vec![0u8; spec.read_size as usize];
    let (mut conns, mut served) = (Vec::new(), Vec::new());
    let mut index = 0u32;
    while (served.len() as u64) < spec.requests as u64 {
        let doing = format!("waiting for a connection ({} of {} requests served)", served.len(), spec.requests);
        let (st, t) = sock::accept(listener, ctl, &doing)?;
        let fail = |e: io::Error| ctx(e, format!("connection {index}"));
        sock::apply_opts(st.as_raw_fd(), &spec.server, false).map_err(fail)?;
        let mut conn = Conn::new(st, ctl, &spec.server).map_err(fail)?;
        conn.enable_rx_stamps().map_err(fail)?;
        let label = format!("connection {index} ({} -> {})", conn.local, conn.remote);
        let wrap = |e: io::Error| ctx(e, &label);
        let mut times = ConnTimes { start: t, connected: t, first: None, last: None };
        let mut pending = Vec::new();
        let mut nreq = 0u32;
        loop {
            let (sent0, recv0) = (conn.sent, conn.received);
            conn.restart_rx_stamps();
            let mut first = None;
            let Some((resp_len, close)) =
                read_request(spec, &mut conn, &mut pending, &mut scratch, &mut first).map_err(wrap)?
            else {
                break; // the client closed
            };
            let request_received = stamp();
            let request_first_byte = first.unwrap_or(request_received);
            times.first.get_or_insert(request_first_byte);
            if !service.is_zero() {
                ctl.sleep_until(Instant::now() + service, "service time (service_ms)").map_err(wrap)?;
            }
            let response_start = stamp();
            let head = match spec.protocol {
                Protocol::Raw => Vec::new(),
                Protocol::Http => format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {resp_len}\r\nContent-Type: application/octet-stream\r\n\
                     Connection: {}\r\n\r\n",
                    if close { "close" } else { "keep-alive" }
                )
                .into_bytes(),
            };
            // The header rides in the first write with up to write_size body bytes.
            let mut left = resp_len;
            let n0 = left.min(zeros.len() as u64) as usize;
            let mut w = head;
            w.extend_from_slice(&zeros[..n0]);
            conn.write_all(&w, "writing a response").map_err(wrap)?;
            left -= n0 as u64;
            while left > 0 {
                let n = left.min(zeros.len() as u64) as usize;
                conn.write_all(&zeros[..n], "writing a response").map_err(wrap)?;
                left -= n as u64;
            }
            let response_written = stamp();
            times.last = Some(response_written);
            served.push(ServedRequest {
                index: served.len() as u32,
                conn_index: index,
                local_port: conn.local.port(),
                remote_port: conn.remote.port(),
                request_first_byte,
                request_received,
                request_first_byte_kernel_ns: conn.first_rx_ns,
                request_received_kernel_ns: conn.last_rx_ns,
                response_start,
                response_written,
                request_bytes: conn.received - recv0,
                response_bytes: conn.sent - sent0,
            });
            nreq += 1;
            if close {
                conn.shutdown_write().map_err(wrap)?;
                conn.expect_eof("waiting for the client to close (Connection: close)").map_err(wrap)?;
                break;
            }
        }
        if !pending.is_empty() {
            return Err(wrap(bad_data(format!("{} bytes of an incomplete request at EOF", pending.len()))));
        }
        conns.push(finish_conn(conn, index, ConnRole::Responder, times, 0, nreq).map_err(wrap)?);
        index += 1;
    }
    Ok((conns, served))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_request_parsing() {
        let r = parse_http_request(b"GET /obj?bytes=123 HTTP/1.1\r\nHost: a:1\r\nConnection: close\r\n\r\n").unwrap();
        assert_eq!(r, HttpRequest { response_bytes: 123, body_bytes: 0, close: true });
        let r = parse_http_request(
            b"POST /obj?x=1&bytes=7 HTTP/1.1\r\nhost: a\r\nContent-Length: 5\r\nConnection: Keep-Alive\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r, HttpRequest { response_bytes: 7, body_bytes: 5, close: false });
        for bad in [
            &b"GET /obj?bytes=1 HTTP/1.1\r\n\r\n"[..],
            b"GET /x?bytes=1 HTTP/1.1\r\nHost: a\r\n\r\n",
            b"GET /obj HTTP/1.1\r\nHost: a\r\n\r\n",
            b"GET /obj?bytes=z HTTP/1.1\r\nHost: a\r\n\r\n",
            b"PUT /obj?bytes=1 HTTP/1.1\r\nHost: a\r\n\r\n",
            b"GET /obj?bytes=1 HTTP/1.0\r\nHost: a\r\n\r\n",
            b"GET /obj?bytes=1 HTTP/1.1\r\nHost a\r\n\r\n",
            b"POST /obj?bytes=1 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"POST /obj?bytes=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        ] {
            assert!(parse_http_request(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn http_response_parsing() {
        assert_eq!(
            parse_http_response(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n").unwrap(),
            (10, false)
        );
        assert_eq!(
            parse_http_response(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").unwrap(),
            (0, true)
        );
        assert!(parse_http_response(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n").is_err());
        assert!(parse_http_response(b"HTTP/1.1 200 OK\r\n\r\n").is_err());
    }

    #[test]
    fn http_errors_carry_their_kind() {
        let e = parse_http_request(b"GET /x?bytes=1 HTTP/1.1\r\nHost: a\r\n\r\n").unwrap_err();
        assert_eq!(e, HttpError::Path { path: "/x".into() });
        assert_eq!(e.to_string(), "unknown path \"/x\" (expected /obj?bytes=N)");
        let e = parse_http_request(b"POST /obj?bytes=1 HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n").unwrap_err();
        assert_eq!(e, HttpError::BadContentLength { head: Head::Request, value: "x".into() });
        assert_eq!(e.to_string(), "request: bad Content-Length \"x\"");
        let e = parse_http_response(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n").unwrap_err();
        assert_eq!(e.to_string(), "server answered \"HTTP/1.1 404 Not Found\"");
        assert_eq!(parse_http_response(b"HTTP/1.1 200 OK\r\n\r\n").unwrap_err(), HttpError::NoContentLength);
        // As the crate's error, and inside the io::Error a run returns.
        let io = bad_data(e.clone());
        assert_eq!(io.kind(), io::ErrorKind::InvalidData);
        assert_eq!(io.get_ref().and_then(|i| i.downcast_ref::<HttpError>()), Some(&e));
        assert_eq!(crate::error::Error::from(e).to_string(), "server answered \"HTTP/1.1 404 Not Found\"");
    }

    #[test]
    fn raw_request_layout() {
        let mut s = TrafficSpec::new(crate::spec::Kind::Reqresp);
        s.request_bytes = 3;
        s.response_bytes = 0x0102;
        let w = build_request(&s, "127.0.0.1:1".parse().unwrap(), false);
        assert_eq!(w.len(), RAW_REQUEST_HEADER + 3);
        assert_eq!(&w[..4], b"TWRQ");
        assert_eq!(&w[4..8], &[0, 0, 0, 3]);
        assert_eq!(&w[8..16], &[0, 0, 0, 0, 0, 0, 1, 2]);
    }
}
