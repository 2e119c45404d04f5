#!/usr/bin/env bash
# The floor under the per-packet goals: how fast a capture is only read and
# decoded (crates/wire/examples/decode_floor.rs: records, link, IP, TCP and
# its options, nothing analysed), next to `tcpwhy stats`, `tcpwhy diagnose`
# and `tcptrace -l -r` on the same captures, rounds interleaved so that a
# drifting machine moves every row alike.
#
# The issue's goals are ratios to tcptrace. On a capture where tcptrace is
# itself fast (snaplen 128: it reads a tenth of the bytes), a goal can lie
# at the floor: then no analysis at all fits in it.
#
# Usage: bench/floor.sh [CAPTURE...]   (default: the bench/run.sh captures)
# Environment: BENCH_RUNS=7 (timed runs per row, best kept), BENCH_CPU=0,
#   BENCH_RESULTS=<repo>/bench/floor-results.md
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$BENCH_DIR/.." && pwd)
RUNS=${BENCH_RUNS:-7}
CPU=${BENCH_CPU:-0}
RESULTS=${BENCH_RESULTS:-$BENCH_DIR/floor-results.md}
if [[ $# -gt 0 ]]; then CAPS=("$@"); else CAPS=("$BENCH_DIR/data/bulk-snap128.pcap" "$BENCH_DIR/data/bulk-full.pcap"); fi

die() { echo "bench/floor.sh: $*" >&2; exit 1; }
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "BENCH_RUNS must be a positive integer (got '$RUNS')"
for c in "${CAPS[@]}"; do [[ -f $c ]] || die "no capture $c (run bench/run.sh first, or name one)"; done
command -v tcptrace >/dev/null || die "tcptrace is missing: apt-get install tcptrace"
(cd "$REPO_DIR" && cargo build --release -q --bin tcpwhy && cargo build --release -q -p tcpwhy-wire --example decode_floor) \
    || die "build failed"
TCPWHY=$REPO_DIR/target/release/tcpwhy
FLOOR=$REPO_DIR/target/release/examples/decode_floor

# seconds COMMAND...: wall time of one run, pinned to one core, output dropped.
seconds() {
    local s e
    s=$(date +%s%N)
    taskset -c "$CPU" "$@" >/dev/null 2>&1 || die "failed: $*"
    e=$(date +%s%N)
    echo $(( (e - s) / 1000 ))
}

NAMES=("read and decode only (decode_floor)" "tcpwhy stats --json -j 1" "tcpwhy diagnose --json -j 1" "tcptrace -l -r")
{
    echo "# The floor: reading and decoding alone"
    echo
    echo "Produced by \`bench/floor.sh\` on $(date -u '+%Y-%m-%d %H:%M') UTC (repo at $(git -C "$REPO_DIR" rev-parse --short HEAD))."
    echo "Each command pinned to core $CPU, page cache warm, output to /dev/null; best of $RUNS rounds, the commands interleaved in each round."
    echo "Machine: $(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2; exit}'), $(nproc) cores; $(uname -r)."
    echo
    echo "| capture | command | best wall s | vs tcptrace | above the floor, ns a packet |"
    echo "|---|---|---:|---:|---:|"
} >"$RESULTS"
for cap in "${CAPS[@]}"; do
    packets=$("$FLOOR" "$cap" | awk '{print $1 + $5}')
    cat "$cap" >/dev/null
    declare -a best=(0 0 0 0)
    for ((r = 0; r < RUNS; r++)); do
        i=0
        for cmd in "$FLOOR $cap" "$TCPWHY stats --json -j 1 $cap" "$TCPWHY diagnose --json -j 1 $cap" "tcptrace -l -r $cap"; do
            # shellcheck disable=SC2086
            t=$(seconds $cmd)
            if [[ ${best[$i]} -eq 0 || $t -lt ${best[$i]} ]]; then best[$i]=$t; fi
            i=$((i + 1))
        done
    done
    for i in 0 1 2 3; do
        awk -v cap="$(basename "$cap")" -v name="${NAMES[$i]}" -v t="${best[$i]}" -v tt="${best[3]}" -v f="${best[0]}" -v n="$packets" \
            'BEGIN { printf "| %s | %s | %.3f | %.2fx | %s |\n", cap, name, t / 1e6, tt / t, (name ~ /tcptrace|floor/) ? "" : sprintf("%.0f", (t - f) * 1000 / n) }' >>"$RESULTS"
    done
done
cat >>"$RESULTS" <<'NOTE'

"vs tcptrace" is tcptrace's time over the row's. The issue's goals on the
real bulk capture: `stats` at least 8x and `diagnose` at least 5x, one
core, full packets and snaplen 128. The last column is what each tcpwhy
command spends a packet beyond reading and decoding it: the connection
table, the duplicate filter, the flow model (and for diagnose the records,
parts and verdicts). For a goal of G times tcptrace, that budget is
tcptrace's time / G less the floor's, divided by the packets.
NOTE
cat "$RESULTS"
