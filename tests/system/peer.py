#!/usr/bin/env python3
"""Minimal TCP sender/receiver for the kernel-oracle system tests.

Every message goes to stdout as one JSON object per line ("phase" tells which).

receiver::

    peer.py recv --bind ADDR --port P [--rcvbuf BYTES] [--read-size N]
                 [--read-delay S]

    -> {"phase":"listening", ...}
    accepts one connection (-> {"phase":"accepted", ...}), reads until EOF (optionally slowly: sleep
    --read-delay seconds after each read of --read-size bytes), then
    -> {"phase":"eof", "bytes_read":..., "tcp_info":{...}}
    shuts its side down (FIN), waits until the socket reaches CLOSE (the
    sender's last ACK arrived) and
    -> {"phase":"final", "tcp_info":{...}}

sender::

    peer.py send --connect ADDR --port P --bytes N [--write-size W] [--cc NAME]
                 [--sndbuf BYTES] [--drain-size B] [--hold-connect]

    optionally sends one UDP datagram of B bytes (on the wire) to the peer's
    port 9 right before connecting (see netns.run_transfer: it empties a slow
    token bucket so the handshake is delayed); connects; with --hold-connect
    -> {"phase":"connected", ...} and waits for one stdin line; writes N bytes in W-byte writes, waits until every byte is
    acknowledged (SIOCOUTQ == 0, tcpi_unacked == 0, tcpi_notsent_bytes == 0),
    -> {"phase":"quiesced", "local":[addr,port], "remote":[addr,port],
        "tcp_info":{...}}
    and then waits for one line on stdin (the test runs ``ss`` meanwhile).
    Then shutdown(SHUT_WR) (FIN), reads until the peer's FIN (EOF), by which
    time the kernel has sent the last ACK, and
    -> {"phase":"final", "tcp_info":{...}}

``tcp_info`` is ``struct tcp_info`` from include/uapi/linux/tcp.h decoded
length-tolerantly: only fields that lie completely inside the length the
kernel returned are reported.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import socket
import struct
import sys
import termios
import time

TCP_INFO = getattr(socket, "TCP_INFO", 11)
TCP_CONGESTION = getattr(socket, "TCP_CONGESTION", 13)
SIOCOUTQ = termios.TIOCOUTQ

TCP_STATES = {1: "ESTABLISHED", 2: "SYN_SENT", 3: "SYN_RECV", 4: "FIN_WAIT1",
              5: "FIN_WAIT2", 6: "TIME_WAIT", 7: "CLOSE", 8: "CLOSE_WAIT",
              9: "LAST_ACK", 10: "LISTEN", 11: "CLOSING", 12: "NEW_SYN_RECV"}

# (name, struct format) in declaration order; the layout follows the natural
# alignment rules of the C struct (no packing attribute).  Bit fields are
# decoded from their containing byte.
_TCP_INFO_LAYOUT = [
    ("tcpi_state", "B"), ("tcpi_ca_state", "B"), ("tcpi_retransmits", "B"),
    ("tcpi_probes", "B"), ("tcpi_backoff", "B"), ("tcpi_options", "B"),
    ("_wscale", "B"), ("_rate_flags", "B"),
    ("tcpi_rto", "I"), ("tcpi_ato", "I"), ("tcpi_snd_mss", "I"), ("tcpi_rcv_mss", "I"),
    ("tcpi_unacked", "I"), ("tcpi_sacked", "I"), ("tcpi_lost", "I"),
    ("tcpi_retrans", "I"), ("tcpi_fackets", "I"),
    ("tcpi_last_data_sent", "I"), ("tcpi_last_ack_sent", "I"),
    ("tcpi_last_data_recv", "I"), ("tcpi_last_ack_recv", "I"),
    ("tcpi_pmtu", "I"), ("tcpi_rcv_ssthresh", "I"), ("tcpi_rtt", "I"),
    ("tcpi_rttvar", "I"), ("tcpi_snd_ssthresh", "I"), ("tcpi_snd_cwnd", "I"),
    ("tcpi_advmss", "I"), ("tcpi_reordering", "I"),
    ("tcpi_rcv_rtt", "I"), ("tcpi_rcv_space", "I"),
    ("tcpi_total_retrans", "I"),
    ("tcpi_pacing_rate", "Q"), ("tcpi_max_pacing_rate", "Q"),
    ("tcpi_bytes_acked", "Q"), ("tcpi_bytes_received", "Q"),
    ("tcpi_segs_out", "I"), ("tcpi_segs_in", "I"),
    ("tcpi_notsent_bytes", "I"), ("tcpi_min_rtt", "I"),
    ("tcpi_data_segs_in", "I"), ("tcpi_data_segs_out", "I"),
    ("tcpi_delivery_rate", "Q"),
    ("tcpi_busy_time", "Q"), ("tcpi_rwnd_limited", "Q"), ("tcpi_sndbuf_limited", "Q"),
    ("tcpi_delivered", "I"), ("tcpi_delivered_ce", "I"),
    ("tcpi_bytes_sent", "Q"), ("tcpi_bytes_retrans", "Q"),
    ("tcpi_dsack_dups", "I"), ("tcpi_reord_seen", "I"),
    ("tcpi_rcv_ooopack", "I"),
    ("tcpi_snd_wnd", "I"), ("tcpi_rcv_wnd", "I"),
    ("tcpi_rehash", "I"),
    ("tcpi_total_rto", "H"), ("tcpi_total_rto_recoveries", "H"),
    ("tcpi_total_rto_time", "I"),
]


def _offsets():
    off, res = 0, []
    for name, fmt in _TCP_INFO_LAYOUT:
        size = struct.calcsize(fmt)
        off = (off + size - 1) // size * size  # natural alignment
        res.append((name, fmt, off, size))
        off += size
    return res, off


_FIELDS, TCP_INFO_SIZE = _offsets()


def decode_tcp_info(buf: bytes) -> dict:
    """Decode whatever prefix of struct tcp_info the kernel returned."""
    info: dict = {"_len": len(buf)}
    for name, fmt, off, size in _FIELDS:
        if off + size > len(buf):
            break
        (val,) = struct.unpack_from("=" + fmt, buf, off)
        if name == "_wscale":
            info["tcpi_snd_wscale"] = val & 0x0F
            info["tcpi_rcv_wscale"] = val >> 4
        elif name == "_rate_flags":
            info["tcpi_delivery_rate_app_limited"] = val & 0x01
            info["tcpi_fastopen_client_fail"] = (val >> 1) & 0x03
        else:
            info[name] = val
    if "tcpi_state" in info:
        info["state_name"] = TCP_STATES.get(info["tcpi_state"], str(info["tcpi_state"]))
    return info


def tcp_info(sock: socket.socket) -> dict:
    # ask for more than we know about; the kernel returns min(len, its size)
    buf = sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, 512)
    return decode_tcp_info(buf)


def outq(sock: socket.socket) -> int:
    buf = fcntl.ioctl(sock.fileno(), SIOCOUTQ, struct.pack("i", 0))
    return struct.unpack("i", buf)[0]


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")
    sys.stdout.flush()


def _family(addr: str) -> int:
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def _ep(sockaddr) -> list:
    return [sockaddr[0], sockaddr[1]]


# --------------------------------------------------------------------------


def cmd_recv(a) -> int:
    ls = socket.socket(_family(a.bind), socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if a.rcvbuf:
        # must be set before listen() so the window scale and initial window
        # derive from it; accepted sockets inherit it
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, a.rcvbuf)
    ls.bind((a.bind, a.port))
    ls.listen(1)
    emit({"phase": "listening", "addr": _ep(ls.getsockname())})
    ls.settimeout(a.timeout)
    conn, peer = ls.accept()
    ls.close()
    emit({"phase": "accepted", "local": _ep(conn.getsockname()), "remote": _ep(peer)})
    conn.settimeout(a.timeout)
    total = 0
    first = last = None
    while True:
        chunk = conn.recv(a.read_size)
        if not chunk:
            break
        now = time.monotonic()
        first = first or now
        last = now
        total += len(chunk)
        if a.read_delay:
            time.sleep(a.read_delay)
    emit({"phase": "eof", "bytes_read": total, "local": _ep(conn.getsockname()),
          "remote": _ep(peer), "read_seconds": (last - first) if first else 0.0,
          "tcp_info": tcp_info(conn)})
    conn.shutdown(socket.SHUT_WR)
    deadline = time.monotonic() + a.timeout
    info = tcp_info(conn)
    while info.get("tcpi_state") != 7 and time.monotonic() < deadline:  # CLOSE
        time.sleep(0.005)
        info = tcp_info(conn)
    emit({"phase": "final", "bytes_read": total, "tcp_info": info})
    conn.close()
    return 0


def cmd_send(a) -> int:
    s = socket.socket(_family(a.connect), socket.SOCK_STREAM)
    if a.cc:
        s.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, a.cc.encode())
    if a.sndbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, a.sndbuf)
    s.settimeout(a.timeout)
    if a.drain_size:
        # one UDP datagram of exactly --drain-size bytes on the wire
        # (Ethernet + IP + UDP headers included), sent right before the SYN:
        # it empties the token bucket of a slow tbf on the path so that the
        # SYN (and the handshake's ACK) have to wait for tokens
        fam = _family(a.connect)
        hdr = 14 + (40 if fam == socket.AF_INET6 else 20) + 8
        u = socket.socket(fam, socket.SOCK_DGRAM)
        u.sendto(b"\0" * max(a.drain_size - hdr, 0), (a.connect, 9))
        u.close()
    t0 = time.monotonic()
    s.connect((a.connect, a.port))
    if a.hold_connect:
        emit({"phase": "connected", "local": _ep(s.getsockname()),
              "remote": _ep(s.getpeername()), "tcp_info": tcp_info(s)})
        if sys.stdin.readline().strip() == "abort":
            s.close()
            return 0
    block = bytes(range(256)) * (a.write_size // 256 + 1)
    remaining = a.bytes
    writes = 0
    while remaining > 0:
        n = min(a.write_size, remaining)
        s.sendall(memoryview(block)[:n])
        remaining -= n
        writes += 1
    t_written = time.monotonic()
    deadline = t_written + a.timeout
    while True:
        info = tcp_info(s)
        if outq(s) == 0 and info.get("tcpi_unacked", 0) == 0 \
                and info.get("tcpi_notsent_bytes", 0) == 0:
            break
        if time.monotonic() > deadline:
            emit({"phase": "error", "error": "data not acknowledged in time",
                  "tcp_info": info, "outq": outq(s)})
            return 3
        time.sleep(0.002)
    t_acked = time.monotonic()
    cc = s.getsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, 16).rstrip(b"\0").decode()
    emit({"phase": "quiesced", "local": _ep(s.getsockname()),
          "remote": _ep(s.getpeername()), "bytes": a.bytes, "writes": writes,
          "write_size": a.write_size, "congestion_control": cc,
          "seconds": t_acked - t0, "tcp_info": info})
    # hold the connection open until the test has looked at it with ss
    line = sys.stdin.readline()
    if line.strip() == "abort":
        s.close()
        return 0
    s.shutdown(socket.SHUT_WR)
    extra = 0
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        extra += len(chunk)
    # the FIN from the peer has been processed and ACKed by now
    emit({"phase": "final", "unexpected_bytes_received": extra, "tcp_info": tcp_info(s)})
    s.close()
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--bind", required=True)
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--rcvbuf", type=int, default=0)
    r.add_argument("--read-size", type=int, default=256 * 1024)
    r.add_argument("--read-delay", type=float, default=0.0)
    r.add_argument("--timeout", type=float, default=30.0)
    s = sub.add_parser("send")
    s.add_argument("--connect", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--bytes", type=int, required=True)
    s.add_argument("--write-size", type=int, default=64 * 1024)
    s.add_argument("--cc", default="")
    s.add_argument("--sndbuf", type=int, default=0)
    s.add_argument("--timeout", type=float, default=30.0)
    s.add_argument("--hold-connect", action="store_true",
                   help="after connect: print 'connected', wait for a stdin line")
    s.add_argument("--drain-size", type=int, default=0,
                   help="send one UDP datagram of this wire size to the peer's "
                        "port 9 right before connecting")
    a = p.parse_args(argv)
    return cmd_recv(a) if a.cmd == "recv" else cmd_send(a)


if __name__ == "__main__":
    sys.exit(main())
