#!/usr/bin/env python3
"""Does `tcpwhy prove` hold on every lab scenario, from both capture points?
(issue 40: "every lab scenario's fix, run by prove from both capture
points, holds"). Each scenario of scenarios/ runs once in the lab; prove
then sees only one end's capture at a time, rebuilds it, runs every fix
(and a fix whose prediction is a range again at the fix's ceiling), and
its verdict, each fix's predicted and measured value and the ceiling runs
are tabulated.

Usage (root): bench/prove-matrix.py [--out DIR] [SCENARIO ...]
(results: bench/prove-matrix-results.md)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TCPWHY = Path(os.environ.get("TCPWHY", REPO / "target" / "release" / "tcpwhy"))


def mb(v):
    return "-" if v is None else f"{v / 1e6:.1f}"


def fix_text(f: dict) -> str:
    if f.get("error"):
        return f"{f['kind']}: failed"
    if f.get("predicted") is None:
        return f"{f['kind']}: {mb(f.get('measured'))} (no prediction)"
    ok = {True: "held", False: "MISSED", None: "not judged"}[f.get("ok")]
    s = f"{f['kind']}: {mb(f['predicted'])} -> {mb(f.get('measured'))} {ok}"
    c = f.get("at_ceiling")
    if c:
        cok = {True: "held", False: "MISSED", None: "not judged"}[c.get("ok")]
        s += (f"; at {mb(c['link_rate_bps'])}: {mb(c['predicted_low'])} to {mb(c['predicted_high'])},"
              f" {mb(c.get('measured'))} {cok}")
    return s


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("scenarios", nargs="*")
    a = ap.parse_args()
    base = a.out or Path(tempfile.mkdtemp(prefix="tcpwhy-prove-matrix-"))
    names = a.scenarios or sorted(p.stem for p in (REPO / "scenarios").glob("*.toml"))
    rows = []
    for name in names:
        cap = base / name / "capture"
        p = subprocess.run([str(TCPWHY), "lab", "run", name, "--out", str(cap)], capture_output=True, text=True, timeout=600)
        if p.returncode not in (0, 5):
            rows.append((name, "-", "lab run failed", "", "", ""))
            continue
        for end in ("client", "server"):
            out = base / name / f"prove-{end}"
            q = subprocess.run([str(TCPWHY), "prove", str(cap / f"{end}.pcap"), "--out", str(out), "--json"],
                               capture_output=True, text=True, timeout=1800)
            try:
                r = json.loads(q.stdout)
            except json.JSONDecodeError:
                rows.append((name, end, f"exit {q.returncode}", "", "", q.stderr.strip().splitlines()[-1:] and q.stderr.strip().splitlines()[-1]))
                continue
            fixes = "; ".join(fix_text(f) for f in r["fixes"]) or "-"
            rows.append((name, end, r["verdict"], r["primary"], r.get("path_capacity", ""), fixes))
            print(rows[-1], file=sys.stderr, flush=True)
    print("| scenario | capture | verdict | primary | path_capacity | fixes: predicted -> measured (Mbit/s; ms for exchanges) |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(str(x) for x in row) + " |")
    judged = [r for r in rows if r[2] in ("proven", "prediction_missed")]
    proven = sum(1 for r in judged if r[2] == "proven")
    print(f"\n{proven} of {len(judged)} reproduced captures with a prediction are proven;"
          f" {len(rows)} captures in all ({sum(1 for r in rows if r[2] == 'not_reproduced')} not reproduced,"
          f" {sum(1 for r in rows if r[2] == 'reproduced')} reproduced without a prediction,"
          f" {sum(1 for r in rows if r[2] == 'lab_perturbed')} perturbed).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
