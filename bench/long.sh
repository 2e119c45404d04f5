#!/usr/bin/env bash
# Long captures in bounded memory: tcpwhy stats/diagnose/report next to
# tcptrace and tshark on one bulk connection of 10 M and 100 M packets
# (bench/make-long-pcap.py: 100 Mbit/s, 20 ms RTT, a SACK-recovered loss
# every 4,000 segments, headers only; 100 M packets are 7 GB, 1.5 hours of
# transfer). Peak memory is the point: diagnose within 64 MiB and report
# within 256 MiB however long the capture (issue 18).
#
# Usage: bench/long.sh        (no root needed; installs GNU time, tcptrace and
#                              tshark when run as root and missing)
# Environment knobs:
#   BENCH_SIZES="10000000 100000000"   packets of each capture
#   BENCH_RUNS=1          timed runs per command; the best is reported
#   BENCH_CPU=0           core each command is pinned to (taskset)
#   BENCH_TIMEOUT=900     seconds a command may take before it is stopped
#   TCPWHY=<repo>/target/release/tcpwhy
#   BENCH_DATA=<repo>/bench/data, BENCH_RESULTS=<repo>/bench/long-results.md
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$BENCH_DIR/.." && pwd)
DATA_DIR=${BENCH_DATA:-$BENCH_DIR/data}
SIZES=${BENCH_SIZES:-"10000000 100000000"}
RUNS=${BENCH_RUNS:-1}
CPU=${BENCH_CPU:-0}
TIMEOUT=${BENCH_TIMEOUT:-900}
TCPWHY=${TCPWHY:-$REPO_DIR/target/release/tcpwhy}
RESULTS=${BENCH_RESULTS:-$BENCH_DIR/long-results.md}
mkdir -p "$DATA_DIR"
log() { printf '[long %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

for pair in /usr/bin/time:time taskset:util-linux tcptrace:tcptrace tshark:tshark; do
    cmd=${pair%%:*} pkg=${pair#*:}
    if ! command -v "$cmd" >/dev/null 2>&1 && [[ ! -x $cmd ]]; then
        [[ $EUID -eq 0 ]] || { log "missing $cmd (Debian package $pkg)"; exit 1; }
        apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null
    fi
done
[[ -x $TCPWHY ]] || (cd "$REPO_DIR" && cargo build --release -q)

ROWS=()
measure() {
    local name=$1 file=$2; shift 2
    local best="" peak=0 status=ok
    for _ in $(seq "$RUNS"); do
        local tf; tf=$(mktemp)
        if ! timeout "$TIMEOUT" taskset -c "$CPU" /usr/bin/time -f '%e %M' -o "$tf" "$@" >/dev/null 2>&1; then
            status="failed or over ${TIMEOUT} s"
        fi
        read -r wall kb < <(tail -n1 "$tf") || true
        rm -f "$tf"
        [[ $status == ok ]] || break
        if [[ -z $best ]] || awk "BEGIN{exit !($wall < $best)}"; then best=$wall; fi
        (( kb > peak )) && peak=$kb
    done
    if [[ $status == ok ]]; then
        ROWS+=("| \`$name\` | $(basename "$file") | $best | $((peak / 1024)) |")
    else
        ROWS+=("| \`$name\` | $(basename "$file") | $status | - |")
    fi
    log "$name on $(basename "$file"): ${best:-$status} s, $((peak / 1024)) MiB"
}

CAPS=()
for n in $SIZES; do
    f=$DATA_DIR/long-$n.pcap
    [[ -s $f ]] || { log "writing $f"; python3 "$BENCH_DIR/make-long-pcap.py" "$f" "$n"; }
    CAPS+=("$f")
    measure "tcptrace -l -r" "$f" tcptrace -l -r "$f"
    # tshark keeps every frame's state: 10 M packets take about 8 GB, so it
    # runs on captures up to 10 M packets only.
    if (( n <= 10000000 )); then
        measure "tshark -q -z conv,tcp" "$f" tshark -r "$f" -q -z conv,tcp
    fi
    measure "tcpwhy stats" "$f" "$TCPWHY" stats --no-progress "$f"
    measure "tcpwhy diagnose" "$f" "$TCPWHY" diagnose --no-progress "$f"
    measure "tcpwhy report" "$f" "$TCPWHY" report --no-progress "$f" -o "$DATA_DIR/long-report.html"
done

{
    echo "# Long captures: tcpwhy next to tcptrace and tshark"
    echo
    echo "Produced by \`bench/long.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC') (repo at $(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo '?'))."
    echo "Each command pinned to one core (\`taskset -c $CPU\`), output to /dev/null; best wall time of $RUNS run(s), largest peak RSS (GNU time)."
    echo "Goals (issue 18): diagnose within 64 MiB and report within 256 MiB for a 100 M-packet connection."
    echo
    echo "| command | capture | wall s | peak RSS MiB |"
    echo "|---|---|---:|---:|"
    printf '%s\n' "${ROWS[@]}"
    echo
    echo "## Captures (bench/make-long-pcap.py)"
    echo
    for f in "${CAPS[@]}"; do
        echo "- \`$(basename "$f")\`: $(du -h "$f" | cut -f1); one bulk connection at the sender, 100 Mbit/s, 20 ms RTT, delayed ACKs, a SACK-recovered loss every 4,000 segments, headers only (snaplen 66)."
    done
    echo
    echo "## Machine"
    echo
    echo "- CPU: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1), $(nproc) cores; memory $(free -g | awk '/^Mem:/{print $2}') GiB"
    echo "- kernel: $(uname -r); tcptrace $(tcptrace -v 2>&1 | sed -n 's/.*version \([0-9.]*\).*/\1/p' | head -n1); $(tshark -v 2>/dev/null | head -n1)"
    echo "- tcpwhy: $("$TCPWHY" --version)"
} > "$RESULTS"
cat "$RESULTS"
