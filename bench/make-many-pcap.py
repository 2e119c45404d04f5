#!/usr/bin/env python3
"""Makes a many-connection capture from a one-connection one, for the
benchmark of one capture on several cores: the first PACKETS/K records of
IN, K times over with the client ports changed (the port that is not the
server's, the first record's destination port, plus 16 per copy),
interleaved record by record with the same timestamps. Every connection is
a real transfer; the per-connection analysis is K times that of the
prefix. Classic pcap with Ethernet and IPv4 only (what bench/run.sh makes).

Usage: bench/make-many-pcap.py IN.pcap OUT.pcap [K] [PACKETS]   (default 8, 1,200,000)
"""

import struct
import sys


def records(f):
    while True:
        h = f.read(16)
        if len(h) < 16:
            return
        incl = struct.unpack("<IIII", h)[2]
        yield h, f.read(incl)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    k = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    want = int(sys.argv[4]) if len(sys.argv) > 4 else 1_200_000
    with open(src, "rb") as f:
        ghdr = f.read(24)
        if struct.unpack("<I", ghdr[:4])[0] not in (0xA1B2C3D4, 0xA1B23C4D):
            sys.exit("make-many-pcap: little-endian classic pcap only")
        recs = []
        for h, data in records(f):
            recs.append((h, data))
            if len(recs) * k >= want:
                break
    ihl = (recs[0][1][14] & 0x0F) * 4
    server = struct.unpack("!H", recs[0][1][16 + ihl:18 + ihl])[0]
    with open(dst, "wb") as out:
        out.write(ghdr)
        for h, data in recs:
            ihl = (data[14] & 0x0F) * 4
            t = 14 + ihl
            sp, dp = struct.unpack("!HH", data[t:t + 4])
            for i in range(k):
                if dp == server:
                    ports = struct.pack("!HH", (sp + 16 * i) & 0xFFFF, dp)
                elif sp == server:
                    ports = struct.pack("!HH", sp, (dp + 16 * i) & 0xFFFF)
                else:
                    ports = data[t:t + 4]
                out.write(h)
                out.write(data[:t] + ports + data[t + 4:])


if __name__ == "__main__":
    main()
