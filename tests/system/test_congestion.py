"""The sender's congestion control, named from either capture (issue 41).

The lab runs a bulk download with the server on reno, cubic or bbr (per
socket, TCP_CONGESTION) over a 40 ms path with 0.5% random loss, and both
captures are diagnosed. The oracle is the kernel's own name for the
socket's algorithm (sock_diag's INET_DIAG_CONG in the server's samples).
A named algorithm must be the kernel's; these paths lose often enough that
both ends must name it. On a deep queue that nothing overflows, BBR is
named from its window's fall without a loss (its drain after startup), and
CUBIC, which only cuts for a loss, must not be called BBR. Behind a
policer (20 Mbit/s, 100 KB bucket, 40 ms) each algorithm must be policed and
named right or `unknown`, never another algorithm. A run of short
responses on fresh connections (never out of slow start, nothing lost)
must say `unknown`. On a deep queue with one loss or none, Reno and CUBIC
are named from how their window grows.

The sweep over queues, deep queues and RTTs is bench/cc-matrix.py
(results in bench/cc-matrix-results.md).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import pytest


def diagnose(tcpwhy: Path, pcap: Path) -> list[dict]:
    p = subprocess.run([str(tcpwhy), "diagnose", "--json", "--no-progress", str(pcap)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return [x for c in json.loads(p.stdout)["connections"] for x in c["directions"]]


def kernel_cc(samples: Path) -> set[str]:
    names = set()
    for line in samples.read_text().splitlines():
        row = json.loads(line)
        if isinstance(row, dict):
            stack = [row]
            while stack:
                v = stack.pop()
                if isinstance(v, dict):
                    if isinstance(v.get("cong"), str):
                        names.add(v["cong"])
                    stack.extend(v.values())
                elif isinstance(v, list):
                    stack.extend(v)
    return names


def bulk_directions(tcpwhy: Path, tmp: str, scenario: str, sets: list[str], cc: str):
    """Runs `scenario` with the server on `cc`, checks that the kernel ran
    it, and yields (end, direction) for each bulk direction of both captures."""
    out = Path(tmp) / "run"
    args = [str(tcpwhy), "lab", "run", scenario, "--out", str(out)]
    for s in [*sets, f"server.congestion={cc}"]:
        args += ["--set", s]
    run = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert run.returncode in (0, 5), run.stderr[-2000:]
    assert kernel_cc(out / "server.samples.jsonl") == {cc}, "the kernel ran another algorithm"
    for end in ("server", "client"):
        dirs = [d for d in diagnose(tcpwhy, out / f"{end}.pcap") if d["bytes"] > 1_000_000]
        assert dirs, f"{end}: no bulk direction diagnosed"
        for d in dirs:
            yield end, d


@pytest.mark.parametrize("cc", ["reno", "cubic", "bbr"])
def test_the_algorithm_is_named_from_both_ends(system_env, tcpwhy_bin, cc):
    with tempfile.TemporaryDirectory(prefix="tcpwhy-cc-") as tmp:
        # 10 s: BBR's probing rounds (a tenth of the rounds) must hold
        # enough losses for the rate test to call them independent of the
        # rate (at 6 s, one run in a dozen had 23 there, a ratio of 1.66
        # to the other rounds, and stayed undecided: policer medium).
        sets = ["link.rtt=40ms", "link.rate=100mbit", "link.loss=0.005", "traffic.duration_s=10"]
        for end, d in bulk_directions(tcpwhy_bin, tmp, "random-loss", sets, cc):
            got = d["congestion_control"]
            seen = {k: v for k, v in got.items() if k not in ("events", "decreases")}
            assert got["name"] == cc, f"{end} ({d['capture_point']}, {d['primary']} {d['confidence']}, limits {d.get('limits')}): {seen}"
            assert got["confidence"] in ("medium", "high"), got
            if end == "server" and cc == "bbr":
                # The losses strike fast and slow rounds alike: random, even
                # under BBR, whose rate holds through them as a bucket's
                # token rate would (detect::policing::loss_depends_on_rate),
                # so never a policer. And BBR does not slow for a loss: it
                # runs at 85 to 95% of the link, so the link is what limits
                # it (detect::loss::LINK_FULL_DESPITE_LOSS_SHARE), the
                # losses a finding. It was `random_loss` `high` before,
                # "expected after the fix" 2% above the rate it had.
                share = d["goodput_bps"] / d["path_rate_bps"]
                want = "bottleneck_link" if share >= 0.8 else "random_loss"
                assert d["primary"] == want, f"{cc} at the sender, {share:.2} of the path: {d['primary']} {d['confidence']}"
                assert any(f["kind"] == "retransmissions" for f in d["findings"]), d["findings"]


@pytest.mark.parametrize("cc", ["cubic", "bbr"])
def test_a_fall_without_a_loss_names_bbr_and_only_bbr(system_env, tcpwhy_bin, cc):
    with tempfile.TemporaryDirectory(prefix="tcpwhy-cc-") as tmp:
        # 50 Mbit/s, 40 ms: a BDP of 250 KB, eight of them queued
        sets = ["link.rtt=40ms", "link.rate=50mbit", "link.queue=2000000B", "traffic.duration_s=6"]
        for end, d in bulk_directions(tcpwhy_bin, tmp, "shaper-deep-queue", sets, cc):
            got = d["congestion_control"]
            if cc == "bbr":
                assert got["name"] == "bbr" and got["confidence"] in ("medium", "high"), f"{end}: {got}"
            else:
                assert got["name"] in ("cubic", "unknown") and got["lossless_falls"] == 0, f"{end}: {got}"


@pytest.mark.parametrize("cc", ["reno", "cubic"])
def test_the_windows_growth_names_reno_and_cubic_on_a_deep_queue(system_env, tcpwhy_bin, cc):
    with tempfile.TemporaryDirectory(prefix="tcpwhy-cc-") as tmp:
        # 50 Mbit/s at 40 ms (a BDP of 250 KB), eight BDPs queued, 10 s: one
        # loss episode or none, too few cuts to name the sender alone. The
        # window's growth after them names it: Reno one segment a round
        # trip, CUBIC its curve (or 5% a round trip before its first loss),
        # and never the other's (congestion::growth).
        sets = ["link.rtt=40ms", "link.rate=50mbit", "link.queue=2000000B", "traffic.duration_s=10"]
        named, said = [], []
        for end, d in bulk_directions(tcpwhy_bin, tmp, "shaper-deep-queue", sets, cc):
            got = d["congestion_control"]
            fits = {g["fits"] for g in got["growth"]}
            assert got["name"] in (cc, "unknown"), f"{end}: {got}"
            assert not fits & ({"reno", "cubic"} - {cc}), f"{end}: {got['growth']}"
            if got["name"] == cc:
                said.append(end)
                if cc in fits:
                    named.append(end)
        # CUBIC leaves slow start here without a loss (HyStart) or cuts to
        # 0.7 once, and grows as only CUBIC does. Reno overshoots the queue
        # in slow start and cuts twice (3006, 1502, 751 segments in the
        # kernel's ssthresh): its window is read from the pipe, since the
        # flight above the second loss's hole held 1425 SACKed segments
        # and read as 0.84 of the window before, CUBIC's side (a CI
        # failure). The sender read 0.45 to 0.5 in 14 runs of 14; the
        # receiver reads some second cuts while PRR still drains the pipe
        # (0.82 to 0.98) and then names nothing.
        if cc == "cubic":
            assert named, f"{cc}: named from its growth at neither end"
        else:
            assert "server" in said, f"{cc}: not named at the sender"


def test_slow_start_only_transfers_are_unknown(system_env, tcpwhy_bin):
    with tempfile.TemporaryDirectory(prefix="tcpwhy-cc-") as tmp:
        out = Path(tmp) / "run"
        run = subprocess.run([str(tcpwhy_bin), "lab", "run", "new-conn-per-request", "--out", str(out)],
                             capture_output=True, text=True, timeout=600)
        assert run.returncode in (0, 5), run.stderr[-2000:]
        for end in ("server", "client"):
            dirs = diagnose(tcpwhy_bin, out / f"{end}.pcap")
            assert dirs
            for d in dirs:
                got = d["congestion_control"]
                assert got["name"] == "unknown" and got["confidence"] is None, got
                assert got["evidence"], got


@pytest.mark.parametrize("cc", ["reno", "cubic", "bbr"])
def test_behind_a_policer_each_algorithm_is_policed_and_never_misnamed(system_env, tcpwhy_bin, cc):
    with tempfile.TemporaryDirectory(prefix="tcpwhy-cc-") as tmp:
        # A 20 Mbit/s token bucket of 100 KB on a 100 Mbit/s link, 40 ms:
        # no queue ever forms, the bucket drops what exceeds its rate.
        sets = ["link.rtt=40ms", "link.rate=100mbit", "link.down.policer.rate=20mbit",
                "link.down.policer.burst=100KB", "traffic.duration_s=6"]
        for end, d in bulk_directions(tcpwhy_bin, tmp, "policer", sets, cc):
            assert d["primary"] == "policer", f"{cc}, {end}: {d['primary']} {d['confidence']}"
            got = d["congestion_control"]
            assert got["name"] in (cc, "unknown"), f"{cc}, {end}: {got}"
            if got["name"] == "bbr" and got["confidence"] in ("medium", "high"):
                # No "switch to BBR" for a sender named as running it.
                assert not any("congestion_control=bbr" in c for f in d["fixes"] for c in f["commands"]), d["fixes"]
