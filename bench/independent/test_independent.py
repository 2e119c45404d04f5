"""Held-out runs built outside tcpwhy's lab (bench/independent/run.py).

The path is a delay-only relay between two TUN devices (relay.c), the
kernel's tbf as the bottleneck and nftables' token bucket as the policer;
the traffic is iperf3. None of it is tcpwhy's link emulator or traffic
generator, so a rule fitted to the lab's habits fails here. Three points
of issue 39 that the lab's own matrix passed while runs like these failed:

- a policer behind a link only a little faster than its rate (1.2 and 1.1
  times): `policer` from both ends (they read `shaper` or
  `bottleneck_link`, `high` at the sender);
- a shaper's deep queue (tbf, 8 BDPs): `shaper` from both ends (the
  sender's base RTT held the standing queue, and it read
  `bottleneck_link` `high` in one run of two).

No `high` verdict may be wrong. The whole matrix is bench/independent/run.py
(results in bench/independent-results.md).
"""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def harness():
    spec = importlib.util.spec_from_file_location("independent", REPO / "bench" / "independent" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@contextlib.contextmanager
def held_out_run(tcpwhy_bin, case, tools):
    """Runs `case` of bench/independent/run.py (8 s) in a temporary
    directory: (the harness, the case's spec, its output directory, the
    algorithm iperf3 reports)."""
    for tool in tools:
        if not shutil.which(tool):
            pytest.skip(f"{tool} missing")
    ind = harness()
    ind.TCPWHY = tcpwhy_bin
    with tempfile.TemporaryDirectory(prefix="tcpwhy-independent-") as tmp:
        out = Path(tmp)
        relay = out / "relay"
        ind.sh("cc", "-O2", "-o", str(relay), str(REPO / "bench" / "independent" / "relay.c"))
        spec = ind.CASES[case]
        cc, _ = ind.run_case(case, spec, relay, out, 8.0)
        yield ind, spec, out, cc


@pytest.mark.parametrize("case", ["policer-20", "policer-50", "shaper"])
def test_held_out_rate_limiters_are_named_from_both_ends(tcpwhy_bin, case):
    with held_out_run(tcpwhy_bin, case, ("nft", "iperf3", "cc", "tc")) as (ind, spec, out, _):
        for side in ("server", "client"):
            d = ind.verdict(out / case / f"{side}.pcap")
            assert d is not None, f"{case} {side}: no diagnosis"
            got = (d["primary"], d["confidence"])
            assert d["primary"] in spec["right"], f"{case} {side}: {got}, want one of {sorted(spec['right'])}"


@pytest.mark.parametrize("case", ["bottleneck-bbr", "bottleneck-reno"])
def test_bbrs_gain_cycle_names_it_from_both_ends_and_no_loss_based_sender(tcpwhy_bin, case):
    """BBR paces at 1.25, 0.75 and six times 1 of its estimate a min_RTT
    each: on a one-BDP queue (tbf, 40 Mbit/s, 60 ms) its flight rises and
    falls once every 8 round trips, which the receiver sees as well as the
    sender (its receivers were `unknown` before the cycle was read: one
    recovery uncut, one in STARTUP's overshoot). Reno's sawtooth on the
    same path puts next to nothing at that period."""
    with held_out_run(tcpwhy_bin, case, ("iperf3", "cc", "tc")) as (ind, spec, out, cc):
        assert cc == spec["cc"], f"iperf3 reports {cc}"
        for side in ("server", "client"):
            d = ind.verdict(out / case / f"{side}.pcap")
            assert d is not None, f"{case} {side}: no diagnosis"
            got = d["congestion_control"]
            seen = {k: v for k, v in got.items() if k not in ("events", "decreases", "growth")}
            share = got["gain_cycle_share"]
            if spec["cc"] == "bbr":
                assert share is not None and share >= 0.2, f"{side}: {seen}"
                assert got["name"] == "bbr" and got["confidence"] in ("medium", "high"), f"{side}: {seen}"
            else:
                assert share is None or share < 0.1, f"{side}: {seen}"
                assert got["name"] in ("reno", "unknown"), f"{side}: {seen}"
