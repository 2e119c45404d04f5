"""Floods and scans in bounded memory (issue: line rate in bounded memory).

A SYN flood of 2 M SYNs from random spoofed sources, and a port scan, made by
bench/make-flood-pcap.py (no root, no namespaces), each with a few real
connections running through it. `tcpwhy stats`, `diagnose` and `report`
must each:
- stay within 256 MiB of peak memory (the kernel's own count for the child
  process, wait4's ru_maxrss, measured from a small launcher: peak.py), where listing every attempt as a connection
  took about 10 GB;
- name the flood or scan with its numbers, exact where counted exactly;
- still give every real connection with its bytes.
No timing is asserted: bench/flood.sh measures time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from peak import measured

REPO = Path(__file__).resolve().parents[2]
MAKE = REPO / "bench" / "make-flood-pcap.py"
MIB = 1024 * 1024
PEAK_BUDGET = 256 * MIB


def tcpwhy() -> str:
    return os.environ.get("TCPWHY", str(REPO / "target" / "release" / "tcpwhy"))


pytestmark = pytest.mark.skipif(not Path(tcpwhy()).exists(), reason="build tcpwhy first (cargo build --release)")


def run_measured(args: list[str]) -> tuple[int, str, int]:
    """Runs a command; returns its exit code, stdout and peak RSS in bytes."""
    code, out, _, peak = measured(args)
    return code, out, peak


@pytest.fixture(scope="module")
def flood(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("flood") / "flood.pcap"
    subprocess.run([sys.executable, str(MAKE), str(out), "--syns", "2000000", "--legit", "50"], check=True)
    return out


@pytest.fixture(scope="module")
def scan(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("scan") / "scan.pcap"
    subprocess.run([sys.executable, str(MAKE), str(out), "--scan-ports", "20000", "--rate", "5000", "--legit", "3"],
                   check=True)
    return out


def attempts_of(doc: dict) -> dict:
    (f,) = doc["files"]
    return f["attempts"]


def test_stats_summarises_a_syn_flood_in_bounded_memory(flood):
    code, out, peak = run_measured([tcpwhy(), "stats", "--json", "--no-progress", str(flood)])
    assert code == 0
    assert peak < PEAK_BUDGET, f"peak {peak / MIB:.0f} MiB"
    doc = json.loads(out)
    a = attempts_of(doc)
    # Counted exactly: every SYN started an attempt; 50 completed.
    assert (a["attempts"], a["became_connections"], a["unanswered"]) == (2_000_050, 50, 2_000_000)
    assert a["kind"] == "syn_flood" and not a["listed"]
    assert a["top_destinations"][0] == {"endpoint": "203.0.113.10:80", "attempts": 2_000_050}
    # 100,000 SYNs a second, plus the real connections' SYNs.
    assert 100_000 <= a["peak_attempts_per_s"] <= 100_010
    # HyperLogLog++: within 2% of the 2 M random sources.
    assert abs(a["sources"] - 2_000_000) < 40_000
    conns = doc["connections"]
    assert len(conns) == 50
    for c in conns:
        assert c["b"] == {"addr": "203.0.113.10", "port": 80}
        assert c["directions"][1]["unique_bytes"] == 20_000
        assert c["close"] == "fin_both"


@pytest.mark.parametrize("command", ["diagnose", "report"])
def test_diagnose_and_report_name_the_flood_in_bounded_memory(flood, tmp_path, command):
    if command == "diagnose":
        args = [tcpwhy(), "diagnose", "--no-progress", str(flood)]
    else:
        args = [tcpwhy(), "report", "--no-progress", str(flood), "-o", str(tmp_path / "r.html")]
    code, out, peak = run_measured(args)
    assert code == 0
    assert peak < PEAK_BUDGET, f"{command}: peak {peak / MIB:.0f} MiB"
    text = out if command == "diagnose" else (tmp_path / "r.html").read_text()
    assert "SYN flood on 203.0.113.10:80: 2,000,050 connection attempts, 50 became connections" in text
    assert "tcp_syncookies" in text


def test_diagnose_json_keeps_the_real_connections_beside_a_flood(flood):
    code, out, _ = run_measured([tcpwhy(), "diagnose", "--json", "--no-progress", str(flood)])
    assert code == 0
    doc = json.loads(out)
    assert attempts_of(doc)["kind"] == "syn_flood"
    served = [d for c in doc["connections"] for d in c["directions"] if d["bytes"] > 0 and d["sender"].endswith(":80")]
    assert len(served) == 50


def test_a_port_scan_is_named_not_listed(scan):
    code, out, peak = run_measured([tcpwhy(), "diagnose", "--json", "--no-progress", str(scan)])
    assert code == 0
    assert peak < PEAK_BUDGET
    doc = json.loads(out)
    a = attempts_of(doc)
    assert a["kind"] == "port_scan", a["text"]
    # 20,000 ports: 3 open (SYN-ACK, then the scanner's RST), the rest refused.
    assert (a["refused"], a["half_open"], a["became_connections"]) == (19_997, 3, 3)
    assert a["top_sources"][0] == {"endpoint": "192.0.2.9", "attempts": 20_000}
    assert abs(a["destination_ports"] - 20_001) < 400
    assert len(doc["connections"]) == 3


def test_few_failed_attempts_are_still_listed_as_connections(tmp_path):
    """Below 1,024 failed attempts nothing changes: each is a connection."""
    small = tmp_path / "small.pcap"
    subprocess.run([sys.executable, str(MAKE), str(small), "--syns", "300", "--synack", "0.5", "--legit", "2"],
                   check=True)
    code, out, _ = run_measured([tcpwhy(), "stats", "--json", "--no-progress", str(small)])
    assert code == 0
    doc = json.loads(out)
    a = attempts_of(doc)
    assert a["listed"] and a["kind"] is None
    assert len(doc["connections"]) == 302
    assert a["failed"] == 300
    assert a["half_open"] + a["unanswered"] == 300
    assert a["half_open"] == sum(1 for c in doc["connections"] if c["directions"][1]["packets"] > 0) - 2


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> Path:
    """A smaller flood with everything at once: SYN-ACKs (half-open),
    RSTs from the spoofed sources, and real connections through it."""
    out = tmp_path_factory.mktemp("mixed") / "mixed.pcap"
    subprocess.run([sys.executable, str(MAKE), str(out), "--syns", "100000", "--synack", "0.3", "--rst", "0.5",
                    "--legit", "40"], check=True)
    return out


@pytest.mark.parametrize("which", ["mixed", "scan", "few"])
def test_connections_sharded_over_threads_change_no_byte(which, mixed, scan, tmp_path):
    """One capture with its connections sharded over 2 or 3 threads (the
    table, the attempts, eviction and connection numbers stay on the
    reading thread) gives byte for byte the one-thread output, also when
    eviction (--max-connections) retires connections early."""
    if which == "few":
        path = tmp_path / "few.pcap"
        subprocess.run([sys.executable, str(MAKE), str(path), "--syns", "300", "--synack", "0.5", "--legit", "30"],
                       check=True)
    else:
        path = {"mixed": mixed, "scan": scan}[which]
    for command in (["stats", "--json"], ["diagnose", "--json"], ["latency", "--json"]):
        for extra in ([], ["--max-connections", "8"]):
            if command[0] == "latency" and extra:
                continue
            outs = []
            for jobs in ("1", "2", "3"):
                code, out, _ = run_measured([tcpwhy(), *command, "--no-progress", "--jobs", jobs, *extra, str(path)])
                assert code == 0, (which, command, extra, jobs)
                outs.append(out)
            assert outs[0] == outs[1] == outs[2], (which, command, extra)
            if extra and command[0] == "stats" and which != "scan":
                assert json.loads(outs[0])["files"][0]["evicted_connections"] > 0, which
