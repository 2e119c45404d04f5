#!/usr/bin/env bash
# What diagnosis adds to the cost of `stats`: the same capture through
# `tcpwhy stats --json` and `tcpwhy diagnose --json`, best of N runs each,
# interleaved, with peak RSS, and `tcptrace -l -r` in the same loop when it
# is installed (apt-get install tcptrace). Usage: bench/diagnose-cost.sh CAPTURE [N]
# (default: the 1.2 M-packet capture bench/run.sh makes, if present).
set -euo pipefail
REPO_DIR=$(cd "$(dirname "$0")/.." && pwd)
TCPWHY=${TCPWHY:-$REPO_DIR/target/release/tcpwhy}
CAP=${1:-}
N=${2:-5}
if [[ -z $CAP ]]; then
  CAP=$REPO_DIR/bench/data/bulk-snap128.pcap
fi
[[ -n $CAP && -f $CAP ]] || { echo "usage: $0 CAPTURE [N]  (no capture found; run bench/run.sh first)" >&2; exit 2; }
[[ -x $TCPWHY ]] || (cd "$REPO_DIR" && cargo build --release -q)
best() { sort -n | head -1; }
declare -a S D RS RD TT
for i in $(seq "$N"); do
  if command -v tcptrace >/dev/null; then
    TT+=("$( { /usr/bin/time -f "%e" tcptrace -l -r "$CAP" >/dev/null; } 2>&1 | tail -1)")
  fi
  for cmd in stats diagnose; do
    out=$( { /usr/bin/time -f "%e %M" "$TCPWHY" "$cmd" --json --no-progress "$CAP" >/dev/null; } 2>&1 | tail -1)
    if [[ $cmd == stats ]]; then S+=("${out% *}"); RS+=("${out#* }"); else D+=("${out% *}"); RD+=("${out#* }"); fi
  done
done
s=$(printf '%s\n' "${S[@]}" | best); d=$(printf '%s\n' "${D[@]}" | best)
rs=$(printf '%s\n' "${RS[@]}" | best); rd=$(printf '%s\n' "${RD[@]}" | best)
echo "capture: $CAP ($(nproc) cores, $(uname -r))"
echo "stats --json:    best ${s}s, peak RSS ${rs} KiB"
echo "diagnose --json: best ${d}s, peak RSS ${rd} KiB"
python3 -c "print(f'diagnose / stats time: {float(\"$d\")/max(float(\"$s\"),1e-9):.2f}x')"
if [[ ${#TT[@]} -gt 0 ]]; then
  t=$(printf '%s\n' "${TT[@]}" | best)
  echo "tcptrace -l -r:  best ${t}s"
  python3 -c "print(f'tcptrace / diagnose time: {float(\"$t\")/max(float(\"$d\"),1e-9):.2f}x')"
fi
