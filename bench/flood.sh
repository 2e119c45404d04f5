#!/usr/bin/env bash
# Floods and scans: tcpwhy stats/diagnose/report next to tcptrace and tshark
# on a SYN flood of 2 M SYNs from random sources (bench/make-flood-pcap.py,
# 50 real connections through it) and a port scan of 60,000 ports.
#
# Usage: bench/flood.sh        (no root needed; installs nothing but
#                               GNU time/tcptrace/tshark when run as root)
# Environment knobs:
#   BENCH_RUNS=3          timed runs per command; the best is reported
#   BENCH_CPU=0           core each command is pinned to (taskset)
#   BENCH_TIMEOUT=300     seconds a command may take before it is stopped
#   TCPWHY=<repo>/target/release/tcpwhy
#   BENCH_DATA=<repo>/bench/data, BENCH_RESULTS=<repo>/bench/flood-results.md
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$BENCH_DIR/.." && pwd)
DATA_DIR=${BENCH_DATA:-$BENCH_DIR/data}
RUNS=${BENCH_RUNS:-3}
CPU=${BENCH_CPU:-0}
TIMEOUT=${BENCH_TIMEOUT:-300}
TCPWHY=${TCPWHY:-$REPO_DIR/target/release/tcpwhy}
RESULTS=${BENCH_RESULTS:-$BENCH_DIR/flood-results.md}
mkdir -p "$DATA_DIR"
log() { printf '[flood %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

for pair in /usr/bin/time:time taskset:util-linux tcptrace:tcptrace tshark:tshark; do
    cmd=${pair%%:*} pkg=${pair#*:}
    if ! command -v "$cmd" >/dev/null 2>&1 && [[ ! -x $cmd ]]; then
        [[ $EUID -eq 0 ]] || { log "missing $cmd (Debian package $pkg)"; exit 1; }
        apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null
    fi
done
[[ -x $TCPWHY ]] || (cd "$REPO_DIR" && cargo build --release -q)

FLOOD=$DATA_DIR/syn-flood-2M.pcap
SCAN=$DATA_DIR/port-scan-60k.pcap
[[ -s $FLOOD ]] || { log "writing $FLOOD"; python3 "$BENCH_DIR/make-flood-pcap.py" "$FLOOD" --syns 2000000 --legit 50; }
[[ -s $SCAN ]] || { log "writing $SCAN"; python3 "$BENCH_DIR/make-flood-pcap.py" "$SCAN" --scan-ports 60000 --rate 20000 --legit 5; }

# measure NAME FILE CMD...: best wall time and largest peak RSS over RUNS.
ROWS=()
measure() {
    local name=$1 file=$2; shift 2
    cat "$file" >/dev/null
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
    log "$name on $(basename "$file"): ${best:-$status}"
}

for f in "$FLOOD" "$SCAN"; do
    measure "tcptrace -n" "$f" tcptrace -n "$f"
    measure "tshark -q -z conv,tcp" "$f" tshark -r "$f" -q -z conv,tcp
    measure "tcpwhy stats" "$f" "$TCPWHY" stats --no-progress "$f"
    measure "tcpwhy diagnose" "$f" "$TCPWHY" diagnose --no-progress "$f"
    measure "tcpwhy report" "$f" "$TCPWHY" report --no-progress "$f" -o "$DATA_DIR/flood-report.html"
done

{
    echo "# Floods and scans: tcpwhy next to tcptrace and tshark"
    echo
    echo "Produced by \`bench/flood.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC') (repo at $(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo '?'))."
    echo "Each command pinned to one core (\`taskset -c $CPU\`), page cache warm, output to /dev/null; best wall time of $RUNS runs, largest peak RSS (GNU time)."
    echo "A command over ${TIMEOUT} s is stopped and shown as such."
    echo
    echo "| command | capture | wall s | peak RSS MiB |"
    echo "|---|---|---:|---:|"
    printf '%s\n' "${ROWS[@]}"
    echo
    echo "## Captures (bench/make-flood-pcap.py, fixed seed)"
    echo
    echo "- \`syn-flood-2M.pcap\`: $(du -h "$FLOOD" | cut -f1), 2,000,000 SYNs from random spoofed sources to one port at 100,000/s, and 50 complete connections through it."
    echo "- \`port-scan-60k.pcap\`: $(du -h "$SCAN" | cut -f1), one source sends a SYN to ports 1 to 60,000 at 20,000/s; the victim refuses with RSTs except 3 open ports, and 5 complete connections."
    echo
    echo "## Machine"
    echo
    echo "- CPU: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1), $(nproc) cores; memory $(free -g | awk '/^Mem:/{print $2}') GiB"
    echo "- kernel: $(uname -r); tcptrace $(tcptrace -v 2>&1 | sed -n 's/.*version \([0-9.]*\).*/\1/p' | head -n1); $(tshark -v 2>/dev/null | head -n1)"
    echo "- tcpwhy: $("$TCPWHY" --version)"
} > "$RESULTS"
cat "$RESULTS"
