#!/usr/bin/env bash
# What pairing costs against one diagnosis (docs/pair.md, "Cost"): the
# 1 M-packet bulk capture of bench/make-bulk-pcap.py paired with itself (so
# every packet is compared) through `diagnose --json --pair FILE FILE`,
# against `diagnose --json FILE` and `diagnose --json FILE FILE`, whole
# processes run in turn N times each (default 21), with medians of the wall
# time, the ratio per pair of runs, and the peak RSS.
# Usage: bench/pair-cost.sh [CAPTURE] [N]
set -euo pipefail
REPO_DIR=$(cd "$(dirname "$0")/.." && pwd)
TCPWHY=${TCPWHY:-$REPO_DIR/target/release/tcpwhy}
CAP=${1:-$REPO_DIR/bench/data/bulk-snap66.pcap}
N=${2:-21}
[[ -x $TCPWHY ]] || (cd "$REPO_DIR" && cargo build --release -q)
if [[ ! -f $CAP ]]; then
  mkdir -p "$(dirname "$CAP")"
  python3 "$REPO_DIR/bench/make-bulk-pcap.py" "$CAP"
fi
export TCPWHY CAP N
python3 - <<'PY'
import os, resource, statistics, subprocess, time
tcpwhy, cap, n = os.environ["TCPWHY"], os.environ["CAP"], int(os.environ["N"])
runs = {
    "one": [tcpwhy, "diagnose", "--json", "--no-progress", cap],
    "two": [tcpwhy, "diagnose", "--json", "--no-progress", cap, cap],
    "pair": [tcpwhy, "diagnose", "--json", "--no-progress", "--pair", cap, cap],
}
def once(cmd):
    t = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, use = os.wait4(p.pid, 0)
    wall = time.monotonic() - t
    if status != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({status})")
    return wall, use.ru_maxrss / 1024
for cmd in runs.values():
    once(cmd)  # warm the page cache
wall = {k: [] for k in runs}
peak = {k: [] for k in runs}
for _ in range(n):
    for k, cmd in runs.items():
        w, m = once(cmd)
        wall[k].append(w)
        peak[k].append(m)
print(f"capture: {cap} ({os.cpu_count()} cores, {os.uname().release}); medians of {n} runs in turn")
for k, label in [("one", "diagnose --json FILE"), ("two", "diagnose --json FILE FILE"), ("pair", "diagnose --json --pair FILE FILE")]:
    ratios = sorted(w / o for w, o in zip(wall[k], wall["one"]))
    print(f"{label:34} {statistics.median(wall[k]):.3f} s  {statistics.median(ratios):.2f}x one diagnosis"
          f" ({ratios[0]:.2f} to {ratios[-1]:.2f})  peak {statistics.median(peak[k]):.0f} MiB")
PY
