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


@pytest.mark.parametrize("case", ["policer-20", "policer-50", "shaper"])
def test_held_out_rate_limiters_are_named_from_both_ends(tcpwhy_bin, case):
    for tool in ("nft", "iperf3", "cc", "tc"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} missing")
    ind = harness()
    ind.TCPWHY = tcpwhy_bin
    with tempfile.TemporaryDirectory(prefix="tcpwhy-independent-") as tmp:
        out = Path(tmp)
        relay = out / "relay"
        ind.sh("cc", "-O2", "-o", str(relay), str(REPO / "bench" / "independent" / "relay.c"))
        spec = ind.CASES[case]
        ind.run_case(case, spec, relay, out, 8.0)
        for side in ("server", "client"):
            d = ind.verdict(out / case / f"{side}.pcap")
            assert d is not None, f"{case} {side}: no diagnosis"
            got = (d["primary"], d["confidence"])
            assert d["primary"] in spec["right"], f"{case} {side}: {got}, want one of {sorted(spec['right'])}"
