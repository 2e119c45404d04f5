"""A long capture in bounded memory (issue: line rate in bounded memory).

One bulk connection (100 Mbit/s, 20 ms RTT, a SACK-recovered loss every
4,000 segments, headers only) made by bench/make-long-pcap.py at two lengths,
1.5 M and 4.5 M packets. `tcpwhy diagnose` holds a direction's records one
part (131,072 data segments) at a time and `tcpwhy report` thins its plot
rows past 1 Mi rows, so:
- peak memory (the kernel's ru_maxrss of the child, peak.py) stays within the issue's
  bounds (diagnose 64 MiB, report 256 MiB) and does not grow with the
  capture's length (three times the packets: within 25% of the shorter
  one's peak; the records before the parts existed grew 134 bytes a packet);
- the diagnosis covers the whole transfer: every byte, the goodput of the
  whole direction, parts that tile it in time, and the same verdict as each
  part's;
- the report's tables still hold every packet (they are written while the
  capture is read), and the page says its plots were thinned.
No timing is asserted: bench/ measures time (bench/results.md).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from peak import measured

REPO = Path(__file__).resolve().parents[2]
MAKE = REPO / "bench" / "make-long-pcap.py"
MIB = 1024 * 1024
DIAGNOSE_BUDGET = 64 * MIB
REPORT_BUDGET = 256 * MIB
# Memory may grow a little with length (the timeline, one summary per
# part), not with the packets.
LENGTH_GROWTH = 1.25
MSS = 1448


def tcpwhy() -> str:
    return os.environ.get("TCPWHY", str(REPO / "target" / "release" / "tcpwhy"))


pytestmark = pytest.mark.skipif(not Path(tcpwhy()).exists(), reason="build tcpwhy first (cargo build --release)")


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> dict[int, Path]:
    d = tmp_path_factory.mktemp("long")
    out = {}
    for n in (1_500_000, 4_500_000):
        p = d / f"bulk-{n}.pcap"
        subprocess.run([sys.executable, str(MAKE), str(p), str(n)], check=True, stderr=subprocess.DEVNULL)
        out[n] = p
    return out


def test_diagnose_of_a_long_transfer_is_bounded_and_whole(captures):
    peaks = {}
    for n, path in captures.items():
        code, out, err, peak = measured([tcpwhy(), "diagnose", "--json", "--no-progress", str(path)])
        assert code == 0, err
        peaks[n] = peak
        (conn,) = json.loads(out)["connections"]
        (d,) = conn["directions"]
        assert not d["truncated"], "no segment may be left out"
        parts = d["parts"]
        data_segments = int(n * 0.66)
        # Parts tile the transfer: 131,072 data segments each but the last,
        # one after the other in time, every data segment in one part
        # (retransmissions are data segments too).
        assert all(p["data_segments"] == 131_072 for p in parts[:-1])
        assert data_segments <= sum(p["data_segments"] for p in parts) <= data_segments * 1.01
        assert all(a["end"] <= b["start"] for a, b in zip(parts, parts[1:]))
        # Bytes and goodput are the whole direction's.
        assert d["bytes"] == data_segments * MSS
        assert d["goodput_bps"] == pytest.approx(100e6, rel=0.01)
        assert sum(p["bytes"] for p in parts) == d["bytes"]
        # A steady transfer: every part says the same, and so does the whole.
        assert {p["primary"] for p in parts} == {d["primary"]}
        assert not any(f["kind"] == "cause_changed" for f in d["findings"])
        assert sum(d["limits"].values()) == pytest.approx(1.0, abs=1e-6)
        assert peak < DIAGNOSE_BUDGET, f"{n} packets: peak {peak / MIB:.0f} MiB"
    short, long = peaks[1_500_000], peaks[4_500_000]
    assert long < short * LENGTH_GROWTH, f"peak grew with length: {short / MIB:.0f} -> {long / MIB:.0f} MiB"


def test_report_of_a_long_transfer_is_bounded_and_tables_hold_every_packet(captures, tmp_path):
    peaks = {}
    for n, path in captures.items():
        html = tmp_path / f"r{n}.html"
        tables = tmp_path / f"t{n}"
        code, _, err, peak = measured(
            [tcpwhy(), "report", "--no-progress", str(path), "-o", str(html), "--arrow", str(tables)]
        )
        assert code == 0, err
        peaks[n] = peak
        assert peak < REPORT_BUDGET, f"{n} packets: peak {peak / MIB:.0f} MiB"
        page = html.read_text()
        assert "had more packets than the plots keep" in page
        # Every packet is in the packets table: as many rows as the capture
        # has TCP segments (stats counts them in the same pass).
        m = re.search(r"packets\.arrow \((\d+) rows\)", err)
        assert m, err
        code, out, _, _ = measured([tcpwhy(), "stats", "--json", "--no-progress", str(path)])
        assert int(m.group(1)) == json.loads(out)["files"][0]["tcp_segments"]
        assert (tables / "packets.arrow").stat().st_size > n * 60
    short, long = peaks[1_500_000], peaks[4_500_000]
    assert long < short * LENGTH_GROWTH, f"peak grew with length: {short / MIB:.0f} -> {long / MIB:.0f} MiB"
