#!/usr/bin/env python3
"""Does `tcpwhy diagnose` name the sender's congestion control (issue 41)?

Runs bulk downloads in the lab with the server on reno, cubic or bbr
(per socket: TCP_CONGESTION), on paths of three kinds, at two RTTs, and
diagnoses each run's capture from both ends. The truth is the algorithm
the scenario set; the kernel's tcp_probe trace of each run is kept in its
folder.

Paths (defaults; options change them):
  queue   a 50 Mbit/s bottleneck with a drop-tail queue of one BDP
  deep    the same with eight BDPs of queue
  loss    200 Mbit/s with 0.5% random loss each way (queue never fills)
  policer a 100 Mbit/s link behind a 20 Mbit/s token-bucket policer with a
          100 KB bucket (its queue never fills)

Usage (root): bench/cc-matrix.py [--out DIR] [--rtts 20,80] [--seconds 8]
              [--ccs reno,cubic,bbr] [--paths queue,deep,loss] [--rate 50]
              [--queue-bdp 1] [--deep-bdp 8] [--loss-rate 200] [--loss 0.005]
              [--policer-rate 20] [--policer-link 100] [--policer-burst 100KB]
(results: bench/cc-matrix-results.md)
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

SCENARIO = """
name = "cc-{cc}-{path}-{rtt}ms"
title = "{cc} on a {path} path at {rtt} ms"
case = "generic"
cause = "{cause}"

[link]
rtt = "{rtt}ms"
rate = "{rate}"
{link_extra}

[client]
tcp_rmem = "4096 131072 67108864"

[server]
tcp_wmem = "4096 16384 67108864"
congestion = "{cc}"

[traffic]
kind = "bulk"
direction = "download"
duration_s = {seconds}
"""


def scenario(cc: str, path: str, rtt: int, seconds: float, a) -> str:
    if path == "loss":
        rate, extra, cause = f"{a.loss_rate}mbit", f"loss = {a.loss}", "random_loss"
    elif path == "policer":
        rate, cause = f"{a.policer_link}mbit", "policer"
        extra = f'\n[link.down.policer]\nrate = "{a.policer_rate}mbit"\nburst = "{a.policer_burst}"'
    else:
        rate = f"{a.rate}mbit"
        bdp = a.rate * 1e6 / 8 * rtt / 1000
        q = int(bdp * (a.deep_bdp if path == "deep" else a.queue_bdp))
        extra, cause = f'queue = "{q}B"', "shaper"
    return SCENARIO.format(cc=cc, path=path, rtt=rtt, rate=rate, link_extra=extra, cause=cause, seconds=seconds)


def diagnose(pcap: Path) -> list[dict]:
    p = subprocess.run([str(TCPWHY), "diagnose", "--json", "--no-progress", str(pcap)], capture_output=True, text=True)
    d = json.loads(p.stdout)
    out = []
    for c in d["connections"]:
        for x in c["directions"]:
            if x["bytes"] > 1_000_000:
                out.append(x)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--rtts", default="20,80")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--ccs", default="reno,cubic,bbr")
    ap.add_argument("--paths", default="queue,deep,loss")
    ap.add_argument("--rate", type=int, default=50, help="queue/deep paths' rate, Mbit/s")
    ap.add_argument("--queue-bdp", type=float, default=1.0)
    ap.add_argument("--deep-bdp", type=float, default=8.0)
    ap.add_argument("--loss-rate", type=int, default=200, help="loss path's rate, Mbit/s")
    ap.add_argument("--loss", type=float, default=0.005)
    ap.add_argument("--policer-rate", type=int, default=20, help="policer path's token rate, Mbit/s")
    ap.add_argument("--policer-link", type=int, default=100, help="policer path's link rate, Mbit/s")
    ap.add_argument("--policer-burst", default="100KB", help="policer path's bucket")
    a = ap.parse_args()
    base = a.out or Path(tempfile.mkdtemp(prefix="tcpwhy-cc-matrix-"))
    rows = []
    for path in a.paths.split(","):
        for rtt in (int(x) for x in a.rtts.split(",")):
            for cc in a.ccs.split(","):
                case = base / f"{cc}-{path}-{rtt}"
                case.mkdir(parents=True, exist_ok=True)
                toml = case / "scenario.toml"
                toml.write_text(scenario(cc, path, rtt, a.seconds, a))
                p = subprocess.run([str(TCPWHY), "lab", "run", str(toml), "--out", str(case / "capture")],
                                   capture_output=True, text=True, timeout=900)
                if p.returncode not in (0, 5):
                    rows.append((cc, path, rtt, "-", "lab run failed", "", "", "", ""))
                    print(p.stderr[-500:], file=sys.stderr)
                    continue
                for end in ("server", "client"):
                    for x in diagnose(case / "capture" / f"{end}.pcap"):
                        c = x["congestion_control"]
                        dec = ",".join(f"{v:.2f}" for v in sorted(c["decreases"]))
                        rows.append((cc, path, rtt, x["capture_point"], c["name"], c["confidence"] or "-",
                                     f"{len(c['decreases'])}/{c['recoveries']}", dec,
                                     f"{x['primary']} ({x['confidence']})"))
                        print(rows[-1], file=sys.stderr, flush=True)
    print("| algorithm | path | RTT ms | capture | named | confidence | read/recoveries | decreases | verdict |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")
    named = [r for r in rows if r[4] not in ("unknown", "lab run failed")]
    right = sum(1 for r in named if r[4] == r[0])
    high = [r for r in named if r[5] == "high"]
    print(f"\n{right} of {len(named)} named are right; {len(rows) - len(named)} of {len(rows)} unknown;"
          f" {sum(1 for r in high if r[4] == r[0])} of {len(high)} `high` right.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
