#!/usr/bin/env python3
"""Writes a SYN-flood capture, as seen at the victim, for the flood benchmark
and the memory-bound tests, with no root and no network namespaces.

- SYNS SYNs from random spoofed IPv4 sources and ports to 203.0.113.10:80, at
  RATE SYNs per second (default 2,000,000 at 100,000/s: 20 s, about 140 MB).
- With --synack F, the victim answers a fraction F of them with a SYN-ACK
  (SYN cookies: one SYN-ACK, no retransmission); with --rst F, a fraction of
  the spoofed sources that exist answer the SYN-ACK with a RST.
- With --scan-ports N, instead of the flood: one scanner (192.0.2.9) sends a
  SYN to ports 1..N of the victim, which refuses with a RST, except a few
  open ports answering a SYN-ACK that the scanner resets (nmap's SYN scan).
- With --legit N, N complete HTTP-like connections from 198.51.100.7 run
  through the flood (handshake, a 300-byte request, a 20 KB response, FINs),
  so that a tool's results for the good part can be checked.

Random numbers come from a fixed seed: the same arguments give the same file.

Usage: bench/make-flood-pcap.py OUT.pcap [--syns N] [--rate R] [--synack F]
       [--rst F] [--scan-ports N] [--legit N]
"""

import argparse
import random
import struct

VICTIM = bytes([203, 0, 113, 10])
CLIENT = bytes([198, 51, 100, 7])
SCANNER = bytes([192, 0, 2, 9])
ETH = b"\x02\0\0\0\0\x02\x02\0\0\0\0\x01\x08\x00"
SYN_OPTS = struct.pack("!BBH", 2, 4, 1460) + b"\x04\x02" + b"\x01\x03\x03\x07" + b"\x01\x01"


def tcp(src, dst, sp, dp, seq, ack, flags, win, opts=b"", paylen=0):
    off = (20 + len(opts)) // 4
    h = struct.pack("!HHIIBBHHH", sp, dp, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, off << 4, flags, win, 0, 0) + opts
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(h) + paylen, 0, 0x4000, 64, 6, 0, src, dst)
    return ETH + ip + h + bytes(paylen)


def legit(t, port, rtt=0.01):
    """One complete connection: (time, frame) pairs."""
    c, s = 1000 + port * 7, 50_000 + port * 13
    out = [
        (t, tcp(CLIENT, VICTIM, port, 80, c, 0, 0x02, 64240, SYN_OPTS)),
        (t + rtt, tcp(VICTIM, CLIENT, 80, port, s, c + 1, 0x12, 65160, SYN_OPTS)),
        (t + rtt * 1.01, tcp(CLIENT, VICTIM, port, 80, c + 1, s + 1, 0x10, 502)),
        (t + rtt * 1.02, tcp(CLIENT, VICTIM, port, 80, c + 1, s + 1, 0x18, 502, paylen=300)),
    ]
    # Seen at the server: the response leaves as soon as the request arrives.
    t1, seq = t + rtt * 1.02 + 5e-5, s + 1
    for i in range(14):
        n = min(1448, 20_000 - i * 1448)
        out.append((t1 + i * 1e-5, tcp(VICTIM, CLIENT, 80, port, seq, c + 301, 0x10, 509, paylen=n)))
        seq += n
        if i % 2 == 1 or i == 13:
            out.append((t1 + rtt + i * 1e-5, tcp(CLIENT, VICTIM, port, 80, c + 301, seq, 0x10, 502)))
    t2 = t1 + rtt * 1.5
    out += [
        (t2, tcp(CLIENT, VICTIM, port, 80, c + 301, seq, 0x11, 502)),
        (t2 + rtt, tcp(VICTIM, CLIENT, 80, port, seq, c + 302, 0x11, 509)),
        (t2 + rtt * 2, tcp(CLIENT, VICTIM, port, 80, c + 302, seq + 1, 0x10, 502)),
    ]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--syns", type=int, default=2_000_000)
    ap.add_argument("--rate", type=float, default=100_000.0)
    ap.add_argument("--synack", type=float, default=0.0)
    ap.add_argument("--rst", type=float, default=0.0)
    ap.add_argument("--legit", type=int, default=0)
    ap.add_argument("--scan-ports", type=int, default=0)
    a = ap.parse_args()
    rnd = random.Random(20261124)
    t0 = 1_700_000_000.0
    duration = (a.scan_ports or a.syns) / a.rate
    extra = []
    for i in range(a.legit):
        extra += legit(t0 + duration * (i + 0.5) / a.legit, 20000 + i)
    extra.sort(key=lambda e: e[0])
    with open(a.out, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        j = 0

        def emit(t, frame):
            sec = int(t)
            f.write(struct.pack("<IIII", sec, int((t - sec) * 1e6), len(frame), len(frame)))
            f.write(frame)

        for i in range(a.syns):
            t = t0 + i / a.rate
            while j < len(extra) and extra[j][0] <= t:
                emit(*extra[j])
                j += 1
            if a.scan_ports:
                if i >= a.scan_ports:
                    break
                port, isn = i + 1, rnd.getrandbits(32)
                emit(t, tcp(SCANNER, VICTIM, 40000, port, isn, 0, 0x02, 1024, b"\x02\x04\x05\xb4"))
                if port in (22, 80, 443):
                    emit(t + 1e-4, tcp(VICTIM, SCANNER, port, 40000, 777, isn + 1, 0x12, 65160, SYN_OPTS))
                    emit(t + 2e-4, tcp(SCANNER, VICTIM, 40000, port, isn + 1, 0, 0x04, 0))
                else:
                    emit(t + 1e-4, tcp(VICTIM, SCANNER, port, 40000, 0, isn + 1, 0x14, 0))
                continue
            src = struct.pack("!I", rnd.getrandbits(32) | 0x01000000)
            sp, isn = rnd.randrange(1024, 65536), rnd.getrandbits(32)
            emit(t, tcp(src, VICTIM, sp, 80, isn, 0, 0x02, 64240, SYN_OPTS))
            if a.synack and rnd.random() < a.synack:
                cookie = rnd.getrandbits(32)
                emit(t + 2e-6, tcp(VICTIM, src, 80, sp, cookie, isn + 1, 0x12, 65160, SYN_OPTS))
                if a.rst and rnd.random() < a.rst:
                    emit(t + 0.03, tcp(src, VICTIM, sp, 80, isn + 1, 0, 0x04, 0))
        for e in extra[j:]:
            emit(*e)


if __name__ == "__main__":
    main()
