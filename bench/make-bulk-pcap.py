#!/usr/bin/env python3
"""Writes a synthetic bulk-transfer capture for the report benchmark, with no
root and no network namespaces: one TCP connection seen at the sender,
100 Mbit/s, 20 ms RTT, delayed ACKs (one per two segments), a loss every
~4,000 segments recovered with SACK (duplicate ACKs carrying SACK blocks,
a fast retransmission). Headers only (snaplen 66; the IP length keeps the
1448-byte payload), so 1 M packets take about 90 MB.

Usage: bench/make-bulk-pcap.py OUT.pcap [PACKETS]   (default 1,000,000)
"""

import struct
import sys

MSS = 1448
RATE = 100e6
RTT = 0.020
LOSS_EVERY = 4000
SNAP = 66
C, S = bytes([198, 18, 0, 1]), bytes([198, 18, 0, 2])
CP, SP = 40000, 5201
ISN_C, ISN_S = 1_000_000, 7_000_000
WSCALE = 7


def tcp(src, dst, sp, dp, seq, ack, flags, win, opts=b"", paylen=0):
    off = (20 + len(opts)) // 4
    h = struct.pack("!HHIIBBHHH", sp, dp, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, off << 4, flags, win, 0, 0) + opts
    total = 20 + len(h) + paylen
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0x4000, 64, 6, 0, src, dst)
    eth = b"\x02\0\0\0\0\x02\x02\0\0\0\0\x01\x08\x00"
    frame = eth + ip + h
    return frame, len(frame) + paylen


def main():
    out_path = sys.argv[1]
    want = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    gap = MSS * 8 / RATE
    events = []  # (time, frame bytes, orig_len)
    t = 1_700_000_000.0
    syn_opts = struct.pack("!BBH", 2, 4, MSS) + b"\x04\x02" + b"\x01\x03\x03" + bytes([WSCALE]) + b"\x00\x00"
    events.append((t, *tcp(C, S, CP, SP, ISN_C, 0, 0x02, 65535, syn_opts)))
    events.append((t + RTT, *tcp(S, C, SP, CP, ISN_S, ISN_C + 1, 0x12, 65535, syn_opts)))
    events.append((t + RTT + 1e-5, *tcp(C, S, CP, SP, ISN_C + 1, ISN_S + 1, 0x10, 512)))
    t0 = t + RTT + 2e-5
    win = (3 << 20) >> WSCALE
    # Data segments (sender side) and the ACKs that come back one RTT later.
    n_data = int(want * 0.66)
    data = []      # (time, seq index, retransmission)
    lost = set(range(LOSS_EVERY // 2, n_data, LOSS_EVERY))
    for i in range(n_data):
        data.append((t0 + i * gap, i, False))
    acks = []      # (time, cumulative index, sack (lo, hi) or None)
    pending = 0
    recovering = None
    retx = []
    for (td, i, _) in data:
        if i in lost:
            recovering = [i, 0]
            continue
        ta = td + RTT
        if recovering is not None:
            li = recovering[0]
            recovering[1] += 1
            acks.append((ta, li, (li + 1, i + 1)))
            if recovering[1] == 3:
                retx.append((ta + 5e-6, li))
                # The retransmission is acknowledged one RTT later, cumulatively.
                recovering.append(ta + 5e-6 + RTT)
            if len(recovering) == 3 and ta >= recovering[2]:
                acks.append((recovering[2], i + 1, None))
                recovering = None
            continue
        pending += 1
        if pending == 2:
            acks.append((ta, i + 1, None))
            pending = 0
    data.extend((tr, li, True) for (tr, li) in retx)
    data.sort()
    acks.sort()
    # Merge into frames.
    frames = []
    for (td, i, _) in data:
        frames.append((td, *tcp(C, S, CP, SP, ISN_C + 1 + i * MSS, ISN_S + 1, 0x10, 512, paylen=MSS)))
    for (ta, k, sack) in acks:
        opts = b""
        if sack:
            opts = b"\x01\x01" + struct.pack("!BBII", 5, 10, (ISN_C + 1 + sack[0] * MSS) & 0xFFFFFFFF,
                                             (ISN_C + 1 + sack[1] * MSS) & 0xFFFFFFFF)
        frames.append((ta, *tcp(S, C, SP, CP, ISN_S + 1, ISN_C + 1 + k * MSS, 0x10, win, opts)))
    frames.sort(key=lambda f: f[0])
    events.extend(frames)
    with open(out_path + ".partial", "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, SNAP, 1))  # nanosecond pcap
        buf = []
        for (ts, fr, orig) in events:
            ns = int(round(ts * 1e9))
            cap = fr[:SNAP]
            buf.append(struct.pack("<IIII", ns // 1_000_000_000, ns % 1_000_000_000, len(cap), orig))
            buf.append(cap)
            if len(buf) > 20000:
                f.write(b"".join(buf))
                buf.clear()
        f.write(b"".join(buf))
    import os
    os.replace(out_path + ".partial", out_path)
    print(f"{out_path}: {len(events)} packets", file=sys.stderr)


if __name__ == "__main__":
    main()
