#!/usr/bin/env bash
# Report benchmark: `tcpwhy report` generation time, peak memory and HTML
# size on a ~1 M-packet capture, Parquet export time, and how the page
# behaves in headless Chromium (time until the plots are drawn, time of a
# zoom and of a full-range redraw). No root, no namespaces: the capture is
# synthetic (bench/make-bulk-pcap.py) unless one is given.
# Usage: bench/report.sh [CAPTURE] [RUNS]     (default: bench/data/report-bulk-1m.pcap, 3)
set -euo pipefail
REPO_DIR=$(cd "$(dirname "$0")/.." && pwd)
TCPWHY=${TCPWHY:-$REPO_DIR/target/release/tcpwhy}
CAP=${1:-$REPO_DIR/bench/data/report-bulk-1m.pcap}
N=${2:-3}
OUT=$(mktemp -d /tmp/tcpwhy-report-bench.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
if [[ ! -f $CAP ]]; then
  mkdir -p "$(dirname "$CAP")"
  python3 "$REPO_DIR/bench/make-bulk-pcap.py" "$CAP" 1000000
fi
[[ -x $TCPWHY ]] || (cd "$REPO_DIR" && cargo build --release -q)
best() { sort -n | head -1; }
run() { # label, command...: best wall time and peak RSS over N runs
  local label=$1; shift
  local t=() r=()
  for _ in $(seq "$N"); do
    # wall seconds and peak RSS (KiB) of the child, without GNU time
    out=$(python3 -c 'import resource, subprocess, sys, time
t = time.monotonic()
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
print(f"{time.monotonic() - t:.3f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}")' "$@")
    t+=("${out% *}"); r+=("${out#* }")
  done
  printf '%-28s best %6.2f s   peak RSS %7.0f MiB\n' "$label" "$(printf '%s\n' "${t[@]}" | best)" \
    "$(( $(printf '%s\n' "${r[@]}" | sort -n | tail -1) / 1024 ))"
}
packets=$("$TCPWHY" stats --json --no-progress "$CAP" | python3 -c 'import json,sys; print(json.load(sys.stdin)["files"][0]["tcp_segments"])')
echo "capture: $CAP ($packets TCP segments, $(du -h "$CAP" | cut -f1))"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
run "stats --json"        "$TCPWHY" stats --json --no-progress "$CAP"
run "report -o report.html" "$TCPWHY" report --no-progress "$CAP" -o "$OUT/report.html"
run "report --parquet DIR"  "$TCPWHY" report --no-progress "$CAP" --parquet "$OUT/pq"
echo "HTML size: $(stat -c %s "$OUT/report.html") bytes ($(du -h "$OUT/report.html" | cut -f1)); parquet: $(du -sh "$OUT/pq" | cut -f1)"
if command -v chromium >/dev/null 2>&1; then
  python3 "$REPO_DIR/bench/report-page.py" "$OUT/report.html"
else
  echo "page: chromium not installed; skipped"
fi
