#!/usr/bin/env bash
# What two cores give on a one-connection capture: `-j 2` (for `stats`
# the split in time, crates/flow/src/split.rs: two threads on the two
# halves of the file, joined where proven exact; for `diagnose` the
# pipeline: one thread reads, decodes and keeps the table, the other runs
# the connection's model) against the bound of splitting the capture in
# time with no hand-over at all (two processes on the two halves of the
# file, cut by editcap). See bench/README.md, "Two cores on one
# connection".
#
# Usage: bench/split.sh
#
# Environment knobs (all optional):
#   BENCH_RUNS=11         timed runs per row; the best is reported
#   TCPWHY=<repo>/target/release/tcpwhy    tcpwhy binary (built if missing)
#   BENCH_DATA=<repo>/bench/data           where the captures live
#   BENCH_RESULTS=<repo>/bench/split-results.md   where the table is written
#   BENCH_CPU=0 BENCH_CPU2=1               the two cores
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$BENCH_DIR/.." && pwd)
DATA_DIR=${BENCH_DATA:-$BENCH_DIR/data}
RUNS=${BENCH_RUNS:-11}
TCPWHY=${TCPWHY:-$REPO_DIR/target/release/tcpwhy}
RESULTS=${BENCH_RESULTS:-$BENCH_DIR/split-results.md}
CPU=${BENCH_CPU:-0}
CPU2=${BENCH_CPU2:-1}
SNAP=$DATA_DIR/bulk-snap128.pcap
H1=$DATA_DIR/split-1.pcap
H2=$DATA_DIR/split-2.pcap
TINY=$DATA_DIR/split-tiny.pcap

die() { printf '[split] ERROR: %s\n' "$*" >&2; exit 1; }
log() { printf '[split %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "BENCH_RUNS must be a positive integer (got '$RUNS')"
(( $(nproc) >= 2 )) || die "needs two cores"
if [[ ! -s $SNAP ]]; then
    log "no $SNAP: generating the bench captures (bench/run.sh, as root)"
    BENCH_GEN_ONLY=1 BENCH_DATA=$DATA_DIR bash "$BENCH_DIR/run.sh"
fi
command -v editcap >/dev/null || { apt-get update -qq && apt-get install -y -qq wireshark-common >/dev/null; }
if [[ ! -x $TCPWHY ]]; then
    log "building tcpwhy (release)"
    cargo build --release --quiet --manifest-path "$REPO_DIR/Cargo.toml" -p tcpwhy-cli
fi

# The halves, cut at a record boundary (pcap, as the original: editcap
# writes pcapng unless told).
PACKETS=$(capinfos -T -r -c -M "$SNAP" | awk '{print $NF}')
HALF=$(( PACKETS / 2 ))
if [[ ! -s $H1 || ! -s $H2 || $H1 -ot $SNAP ]]; then
    editcap -F pcap -r "$SNAP" "$H1" "1-$HALF"
    editcap -F pcap -r "$SNAP" "$H2" "$(( HALF + 1 ))-$PACKETS"
    editcap -F pcap -r "$SNAP" "$TINY" 1-10
fi
# The same page cache for all: each file dropped and read back (editcap's
# small writes leave it in small pieces, which a mapping takes longer over).
python3 "$BENCH_DIR/fresh-cache.py" "$SNAP" "$H1" "$H2" "$TINY"

# interleaved CMD...: each command (bash -c) run RUNS times, the commands
# taking turns so that the machine's drift from minute to minute falls on
# all of them alike; prints each command's best wall time in ms.
interleaved() {
    python3 - "$RUNS" "$@" <<'PY'
import subprocess, sys, time
runs, cmds = int(sys.argv[1]), sys.argv[2:]
best = [float("inf")] * len(cmds)
for _ in range(runs):
    for i, c in enumerate(cmds):
        t0 = time.perf_counter()
        subprocess.run(["bash", "-c", c], stdout=subprocess.DEVNULL, check=True)
        best[i] = min(best[i], (time.perf_counter() - t0) * 1000)
print(" ".join(f"{b:.1f}" for b in best))
PY
}

T=$TCPWHY
rows=()
for cmd in stats diagnose; do
    log "$cmd"
    read -r whole pipe both one tiny < <(interleaved \
        "taskset -c $CPU $T $cmd --json -j 1 $SNAP" \
        "taskset -c $CPU,$CPU2 $T $cmd --json -j 2 $SNAP" \
        "taskset -c $CPU $T $cmd --json -j 1 $H1 >/dev/null & taskset -c $CPU2 $T $cmd --json -j 1 $H2 >/dev/null; wait" \
        "taskset -c $CPU $T $cmd --json -j 1 $H1 >/dev/null; taskset -c $CPU $T $cmd --json -j 1 $H2 >/dev/null" \
        "taskset -c $CPU $T $cmd --json -j 1 $TINY")
    rows+=("$cmd|$whole|$pipe|$both|$one|$tiny")
done

ratio() { python3 -c "print(f'{$1 / $2:.2f}x')"; }
{
    echo "# Two cores on one connection: \`-j 2\` against the bound of a split in time"
    echo
    echo "Produced by \`bench/split.sh\` on $(date -u '+%Y-%m-%d %H:%M') UTC (repo at $(git -C "$REPO_DIR" rev-parse --short HEAD)); see bench/README.md."
    echo "Capture: \`bulk-snap128.pcap\` ($PACKETS packets, one bulk connection), cut at record $HALF into two pcap files."
    echo "Wall time in ms, best of $RUNS (the commands take turns), page cache warm, cores $CPU and $CPU2."
    echo
    echo "| command | whole, one core | whole, \`-j 2\` | the halves at once, one core each | the halves one after the other, one core | a 10-record file (start and exit) | \`-j 2\` gain | split bound |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    for r in "${rows[@]}"; do
        IFS='|' read -r cmd whole pipe both one tiny <<<"$r"
        echo "| \`tcpwhy $cmd --json\` | $whole | $pipe | $both | $one | $tiny | $(ratio "$whole" "$pipe") | $(ratio "$whole" "$both") |"
    done
    echo
    echo "\`-j 2\` gain: whole on one core / whole with \`-j 2\`, which for"
    echo "\`stats\` is the split in time (two threads, the second's half joined"
    echo "once its state at the cut is proven the first's; the output is the"
    echo "one-thread output) and for \`diagnose\` the pipeline. Split bound:"
    echo "whole on one core / the two halves analysed at once, each by its own"
    echo "process on its own core, with no warm-up and no check; each process"
    echo "pays its own start and exit (the 10-record column). The halves are"
    echo "analysed cold (the second never saw the handshake): a bound, not an"
    echo "analysis (see bench/README.md)."
    echo
    echo "Machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; $(uname -r)."
} >"$RESULTS"
cat "$RESULTS"
