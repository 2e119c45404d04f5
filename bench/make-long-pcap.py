#!/usr/bin/env python3
"""Writes the same synthetic bulk transfer as bench/make-bulk-pcap.py (one
connection at the sender, 100 Mbit/s, 20 ms RTT, delayed ACKs, a SACK-
recovered loss every 4,000 segments, headers only), but streamed: memory
stays small whatever the length, so 100 M packets (about 7 GB, 1.5 hours of
transfer) can be made for the memory bounds of `diagnose` and `report`.

Usage: bench/make-long-pcap.py OUT.pcap [PACKETS]   (default 100,000,000)
"""

import heapq
import importlib.util
import os
import struct
import sys

spec = importlib.util.spec_from_file_location("bulk", os.path.join(os.path.dirname(__file__), "make-bulk-pcap.py"))
bulk = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bulk)
MSS, RTT, LOSS_EVERY, SNAP, WSCALE = bulk.MSS, bulk.RTT, bulk.LOSS_EVERY, bulk.SNAP, bulk.WSCALE
C, S, CP, SP, ISN_C, ISN_S, tcp = bulk.C, bulk.S, bulk.CP, bulk.SP, bulk.ISN_C, bulk.ISN_S, bulk.tcp


def main():
    out_path = sys.argv[1]
    want = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000_000
    gap = MSS * 8 / bulk.RATE
    n_data = int(want * 0.66)
    win = (3 << 20) >> WSCALE
    data_frames = {}
    heap = []  # (time, order, frame, orig)
    order = 0

    def push(t, fr):
        nonlocal order
        order += 1
        heapq.heappush(heap, (t, order, fr[0], fr[1]))

    def data(i):
        return tcp(C, S, CP, SP, ISN_C + 1 + i * MSS, ISN_S + 1, 0x10, 512, paylen=MSS)

    def ack(k, sack=None):
        opts = b""
        if sack:
            opts = b"\x01\x01" + struct.pack("!BBII", 5, 10, (ISN_C + 1 + sack[0] * MSS) & 0xFFFFFFFF,
                                             (ISN_C + 1 + sack[1] * MSS) & 0xFFFFFFFF)
        return tcp(S, C, SP, CP, ISN_S + 1, ISN_C + 1 + k * MSS, 0x10, win, opts)

    count = 0
    with open(out_path + ".partial", "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, SNAP, 1))  # nanosecond pcap
        buf = []

        def emit(until):
            nonlocal count
            while heap and heap[0][0] < until:
                ts, _, fr, orig = heapq.heappop(heap)
                ns = int(round(ts * 1e9))
                cap = fr[:SNAP]
                buf.append(struct.pack("<IIII", ns // 1_000_000_000, ns % 1_000_000_000, len(cap), orig))
                buf.append(cap)
                count += 1
            if len(buf) > 40000:
                f.write(b"".join(buf))
                buf.clear()

        t = 1_700_000_000.0
        syn_opts = struct.pack("!BBH", 2, 4, MSS) + b"\x04\x02" + b"\x01\x03\x03" + bytes([WSCALE]) + b"\x00\x00"
        push(t, tcp(C, S, CP, SP, ISN_C, 0, 0x02, 65535, syn_opts))
        push(t + RTT, tcp(S, C, SP, CP, ISN_S, ISN_C + 1, 0x12, 65535, syn_opts))
        push(t + RTT + 1e-5, tcp(C, S, CP, SP, ISN_C + 1, ISN_S + 1, 0x10, 512))
        t0 = t + RTT + 2e-5
        pending = 0
        recovering = None
        for i in range(n_data):
            td = t0 + i * gap
            emit(td)
            if i % LOSS_EVERY == LOSS_EVERY // 2:
                push(td, data(i))  # sent, lost after the capture point
                recovering = [i, 0]
                continue
            push(td, data(i))
            ta = td + RTT
            if recovering is not None:
                li = recovering[0]
                recovering[1] += 1
                push(ta, ack(li, (li + 1, i + 1)))
                if recovering[1] == 3:
                    push(ta + 5e-6, data(li))
                    recovering.append(ta + 5e-6 + RTT)
                if len(recovering) == 3 and ta >= recovering[2]:
                    push(recovering[2], ack(i + 1))
                    recovering = None
                continue
            pending += 1
            if pending == 2:
                push(ta, ack(i + 1))
                pending = 0
        emit(float("inf"))
        f.write(b"".join(buf))
    os.replace(out_path + ".partial", out_path)
    print(f"{out_path}: {count} packets", file=sys.stderr)


if __name__ == "__main__":
    main()
