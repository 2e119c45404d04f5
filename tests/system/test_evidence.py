"""`tcpwhy diagnose` with kernel evidence beside the capture: a lab run
whose receiver buffer limits the transfer; the sender's own tcp_info
samples (the run directory) must confirm the receiver window the capture
shows, and an `ss -tinm` text file of the same kind of samples too."""

from __future__ import annotations

import json
import subprocess


def test_lab_run_evidence_confirms_receiver_window(tcpwhy_bin, tmp_path):
    out = tmp_path / "run"
    r = subprocess.run([str(tcpwhy_bin), "lab", "run", "rwnd-rmem", "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode in (0, 5), r.stderr[-2000:]
    d = subprocess.run(
        [str(tcpwhy_bin), "diagnose", "--json", "--no-progress", "--lab-run", str(out), str(out / "server.pcap")],
        capture_output=True, text=True, timeout=120,
    )
    assert d.returncode == 0, d.stderr
    doc = json.loads(d.stdout)
    dirs = [x for c in doc["connections"] for x in c["directions"] if x["bytes"] > 100_000]
    assert len(dirs) == 1
    kinds = {f["kind"]: f for f in dirs[0]["findings"]}
    assert dirs[0]["primary"] == "receiver_window"
    assert kinds["kernel_rwnd_limited"].get("confirms") is True, kinds
    # Without evidence, no kernel findings.
    d2 = subprocess.run([str(tcpwhy_bin), "diagnose", "--json", "--no-progress", str(out / "server.pcap")],
                        capture_output=True, text=True, timeout=120)
    doc2 = json.loads(d2.stdout)
    assert not any(f["kind"].startswith("kernel_") for c in doc2["connections"] for x in c["directions"] for f in x["findings"])


def test_missing_evidence_file_is_a_clear_error(tcpwhy_bin, tmp_path):
    d = subprocess.run(
        [str(tcpwhy_bin), "diagnose", "--no-progress", "--ss", str(tmp_path / "nope.txt"), str(tmp_path / "nope.pcap")],
        capture_output=True, text=True, timeout=60,
    )
    assert d.returncode == 3
    assert "nope" in d.stderr
