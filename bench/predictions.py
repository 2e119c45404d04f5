#!/usr/bin/env python3
"""Do the predictions hold? Each case runs a lab scenario whose flow a
window or a buffer holds below the path, diagnoses the capture of each
end, applies the proposed fix to the *real* scenario (the same path, the
fix's value set as a user would set it), runs it again and holds the
measured goodput against the prediction: it holds when it is within 25%
of `predicted_bps`, or inside [`predicted_low_bps`, `predicted_high_bps`]
(issue 40). Paths of both kinds: the scenarios' 200 Mbit/s bottleneck
(faster than the window's ceiling) and a 1 Gbit/s one, which the fixed
flows do not fill either (no rate limit that the fix meets).

Usage (root): bench/predictions.py [--out DIR]   (results: bench/predictions-results.md)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TCPWHY = Path(os.environ.get("TCPWHY", REPO / "target" / "release" / "tcpwhy"))
TOLERANCE = 0.25

# (scenario, link rate, the fix's settings from the diagnosis's commands)
CASES = [
    ("rwnd-rmem", "200mbit"),
    ("rwnd-rmem", "1gbit"),
    ("wscale-off", "200mbit"),
    ("wscale-off", "1gbit"),
    ("sndbuf-wmem", "200mbit"),
    ("sndbuf-wmem", "1gbit"),
]


def lab(scenario: str, out: Path, sets: list[str]) -> dict:
    args = [str(TCPWHY), "lab", "run", scenario, "--out", str(out)]
    for s in sets:
        args += ["--set", s]
    p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if p.returncode not in (0, 5):
        raise RuntimeError(f"lab run {scenario} {sets}: {p.returncode}\n{p.stderr}")
    return json.loads((out / "truth.json").read_text())


def same_bytes(scenario: str, nbytes: int, case: Path) -> str:
    """The scenario with its 6 s replaced by the captured direction's bytes."""
    text = (REPO / "scenarios" / f"{scenario}.toml").read_text()
    text = re.sub(r"(?m)^duration_s\s*=.*$", f"bytes = {nbytes}", text)
    f = case / f"{scenario}-same-bytes.toml"
    f.write_text(text)
    return str(f)


def diagnose(pcap: Path) -> dict:
    p = subprocess.run([str(TCPWHY), "diagnose", "--json", "--no-progress", str(pcap)], capture_output=True, text=True)
    doc = json.loads(p.stdout)
    dirs = [x for c in doc["connections"] for x in c["directions"]]
    return max(dirs, key=lambda x: x["bytes"])


def fix_sets(d: dict) -> tuple[str, list[str]] | None:
    """The first fix with a prediction, as `lab run --set`s on the real scenario."""
    w = next((w for w in d["what_if"] if w.get("predicted_bps")), None)
    if w is None:
        return None
    cmds = [c for f in d["fixes"] if f["kind"] == w["fix"] for c in f["commands"]]
    if w["fix"] == "raise_tcp_rmem":
        m = next(re.search(r'tcp_rmem="([^"]+)"', c) for c in cmds if "tcp_rmem" in c)
        return w["fix"], [f"client.tcp_rmem={m.group(1)}"]
    if w["fix"] == "raise_tcp_wmem":
        m = next(re.search(r'tcp_wmem="([^"]+)"', c) for c in cmds if "tcp_wmem" in c)
        buf = int(m.group(1).split()[-1])
        # the scenario's application sets SO_SNDBUF: it takes the new size
        # too (the kernel doubles what it is given)
        return w["fix"], [f"server.tcp_wmem={m.group(1)}", f"server.sndbuf={buf // 2}"]
    if w["fix"] == "enable_window_scaling":
        return w["fix"], ["server.tcp_window_scaling=true"]
    return None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    base = a.out or Path(tempfile.mkdtemp(prefix="tcpwhy-predictions-"))
    rows = []
    for scenario, rate in CASES:
        case = base / f"{scenario}-{rate}"
        t = lab(scenario, case / "capture", [f"link.rate={rate}"])
        for end in ("client", "server"):
            d = diagnose(case / "capture" / f"{end}.pcap")
            fx = fix_sets(d)
            if fx is None:
                rows.append((scenario, rate, end, d["primary"], d["path_capacity"], None, None, None, None, None, "no fix"))
                continue
            kind, sets = fx
            w = next(w for w in d["what_if"] if w["fix"] == kind)
            # the prediction is for this transfer (its bytes, slow start
            # counted): the fix is run on the same bytes, and on the
            # scenario's own duration, held against the rate past slow start
            same = lab(same_bytes(scenario, d["bytes"], case), case / f"fix-{end}-same", [f"link.rate={rate}", *sets])
            after = lab(scenario, case / f"fix-{end}", [f"link.rate={rate}", *sets])
            m, m6 = same["goodput_bps"], after["goodput_bps"]
            p, lo, hi = w["predicted_bps"], w["predicted_low_bps"], w["predicted_high_bps"]
            ranged = lo is not None and hi is not None and hi > lo
            held = lambda v, point: abs(v / point - 1) <= TOLERANCE or (ranged and lo <= v <= hi)
            # the longer run is held against the rate past slow start
            holds = held(m, p) and held(m6, w["steady_bps"] or p)
            rows.append((scenario, rate, end, d["primary"], d["path_capacity"], t["goodput_bps"], p, (lo, hi), m, m6,
                         "holds" if holds else "MISSED"))
            print(rows[-1], file=sys.stderr, flush=True)
    mb = lambda v: "-" if v is None else f"{v / 1e6:.1f}"
    print("| scenario | link | capture | primary | path_capacity | before | predicted | range | after the fix, same bytes | after the fix, the scenario's duration | |")
    print("|---|---|---|---|---|---:|---:|---|---:|---:|---|")
    for s, r, e, pr, pc, before, p, rng, m, m6, ok in rows:
        rng_s = "-" if rng is None else f"{mb(rng[0])} to {mb(rng[1])}"
        print(f"| {s} | {r} | {e} | {pr} | {pc} | {mb(before)} | {mb(p)} | {rng_s} | {mb(m)} | {mb(m6)} | {ok} |")
    held = sum(1 for r in rows if r[-1] == "holds")
    point = sum(1 for r in rows if r[6] and r[8] and abs(r[8] / r[6] - 1) <= TOLERANCE)
    print(f"\n{held} of {len(rows)} predictions hold (Mbit/s; within {TOLERANCE:.0%} of predicted, or inside the range);"
          f" {point} of {len(rows)} point predictions are within {TOLERANCE:.0%} on the same bytes.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
