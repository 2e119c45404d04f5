#!/usr/bin/env bash
# tcpwhy throughput benchmark: tcpwhy vs tcptrace vs tshark on a 1M+ packet
# bulk TCP capture.  See bench/README.md for what it measures and how long it
# takes.
#
# Usage: bench/run.sh            (as root the first time: it builds captures
#                                 in two network namespaces)
#
# Environment knobs (all optional):
#   BENCH_RUNS=3          timed runs per (tool, capture); the best is reported
#   BENCH_TOOLS="tcptrace tshark tcpwhy"   which tools to run
#   TCPWHY=<repo>/target/release/tcpwhy    tcpwhy binary (built if missing)
#   BENCH_DATA=<repo>/bench/data           where captures and logs live
#   BENCH_RESULTS=<repo>/bench/results.md  where the results table is written
#   BENCH_CPU=0           core every timed command is pinned to (taskset)
#   BENCH_CPU2=1          second core of the two-thread (-j 2) rows
#   BENCH_BYTES=1600M     bytes iperf3 sends when generating the capture
#   BENCH_RATE=1gbit      tbf rate on the sender veth while capturing
#   BENCH_MIN_PACKETS=1050000  generation fails if the capture has fewer
#   BENCH_GEN_ONLY=1      only make sure the captures exist, then stop
#   BENCH_RECORD=1        record this run's diagnose figures (against tcptrace)
#                         as the guard's reference, bench/guard.tsv (at a release)
#   BENCH_GUARD_LOSS=0.05 the guard fails the run (exit 3) when diagnose is
#                         this much slower against tcptrace than recorded
set -euo pipefail

START_TS=$EPOCHREALTIME
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$BENCH_DIR/.." && pwd)
DATA_DIR=${BENCH_DATA:-$BENCH_DIR/data}
LOG_DIR=$DATA_DIR/logs
RUNS=${BENCH_RUNS:-3}
TOOLS=${BENCH_TOOLS:-"tcptrace tshark tcpwhy"}
DEFAULT_TCPWHY=$REPO_DIR/target/release/tcpwhy
TCPWHY=${TCPWHY:-$DEFAULT_TCPWHY}
RESULTS=${BENCH_RESULTS:-$BENCH_DIR/results.md}
CPU=${BENCH_CPU:-0}
# The second core of the two-thread rows (none on a one-core machine).
CPU2=${BENCH_CPU2:-$(( $(nproc) > 1 ? (CPU == 0 ? 1 : 0) : -1 ))}
[[ $CPU2 == -1 ]] && CPU2=""
BYTES=${BENCH_BYTES:-1600M}
RATE=${BENCH_RATE:-1gbit}
MIN_PACKETS=${BENCH_MIN_PACKETS:-1050000}
GEN_ONLY=${BENCH_GEN_ONLY:-0}

FULL=$DATA_DIR/bulk-full.pcap
SNAP=$DATA_DIR/bulk-snap128.pcap
MANY=$DATA_DIR/many8-snap128.pcap   # 8 copies of the snaplen-128 transfer at once
INFO=$DATA_DIR/captures.info     # key=value facts about the captures

log()  { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
warn() { printf '[bench %s] WARNING: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die()  { printf '[bench %s] ERROR: %s\n' "$(date +%H:%M:%S)" "$*" >&2; exit 1; }

[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "BENCH_RUNS must be a positive integer (got '$RUNS')"
mkdir -p "$DATA_DIR" "$LOG_DIR"

# --- dependencies ------------------------------------------------------------

APT_UPDATED=0
# ensure_cmd COMMAND DEBIAN_PACKAGE: install the package with apt-get if the
# command is missing (needs root).
ensure_cmd() {
    local cmd=$1 pkg=$2
    if command -v "$cmd" >/dev/null 2>&1 || [[ -x $cmd ]]; then return 0; fi
    [[ $EUID -eq 0 ]] || die "'$cmd' is missing; install Debian package '$pkg' (apt-get install -y $pkg)"
    command -v apt-get >/dev/null 2>&1 || die "'$cmd' is missing and apt-get is not available; install '$pkg'"
    log "installing $pkg (for $cmd)"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y "$pkg" >>"$LOG_DIR/apt.log" 2>&1; then
        if [[ $APT_UPDATED -eq 0 ]]; then
            APT_UPDATED=1
            apt-get update >>"$LOG_DIR/apt.log" 2>&1 || true
        fi
        DEBIAN_FRONTEND=noninteractive apt-get install -y "$pkg" >>"$LOG_DIR/apt.log" 2>&1 \
            || die "apt-get install $pkg failed; see $LOG_DIR/apt.log"
    fi
    command -v "$cmd" >/dev/null 2>&1 || [[ -x $cmd ]] || die "'$cmd' still missing after installing $pkg"
}

ensure_cmd /usr/bin/time time
ensure_cmd taskset util-linux
ensure_cmd capinfos wireshark-common
ensure_cmd editcap wireshark-common

# info_get KEY: read a value from the captures.info file.
info_get() { sed -n "s/^$1=//p" "$INFO" 2>/dev/null | tail -n1; }

# count_packets FILE: number of packets in a capture.
count_packets() {
    capinfos -c -M "$1" | awk -F: '/Number of packets/ { gsub(/[ \t]/, "", $2); print $2 }'
}

# --- capture generation ----------------------------------------------------

NS_TX="" NS_RX="" TCPDUMP_PID="" IPERF_SRV_PID="" GEN_TMP=""
cleanup_gen() {
    local rc=$?
    [[ -n $TCPDUMP_PID ]] && kill -INT "$TCPDUMP_PID" 2>/dev/null || true
    [[ -n $IPERF_SRV_PID ]] && kill "$IPERF_SRV_PID" 2>/dev/null || true
    [[ -n $TCPDUMP_PID || -n $IPERF_SRV_PID ]] && sleep 0.5
    [[ -n $NS_TX ]] && ip netns del "$NS_TX" 2>/dev/null || true
    [[ -n $NS_RX ]] && ip netns del "$NS_RX" 2>/dev/null || true
    [[ -n $GEN_TMP && -e $GEN_TMP ]] && rm -f "$GEN_TMP"
    return $rc
}

generate_full() {
    [[ $EUID -eq 0 ]] || die "generating $FULL needs root (network namespaces, veth, tcpdump); rerun as root"
    ensure_cmd ip iproute2
    ensure_cmd tc iproute2
    ensure_cmd ethtool ethtool
    ensure_cmd tcpdump tcpdump
    ensure_cmd iperf3 iperf3

    # Unique names (interface names must stay <= 15 chars).
    NS_TX="tcpwhy-bench-$$-tx"
    NS_RX="tcpwhy-bench-$$-rx"
    local v_tx="twb$$t" v_rx="twb$$r"
    # RFC 2544 benchmarking range; exists only inside our namespaces.
    local ip_tx=198.18.0.1 ip_rx=198.18.0.2
    GEN_TMP="$FULL.partial"
    trap cleanup_gen EXIT
    trap 'exit 130' INT TERM

    log "creating namespaces $NS_TX / $NS_RX joined by veth $v_tx <-> $v_rx"
    ip netns add "$NS_TX"
    ip netns add "$NS_RX"
    ip link add "$v_tx" netns "$NS_TX" type veth peer name "$v_rx" netns "$NS_RX"
    ip -n "$NS_TX" link set lo up
    ip -n "$NS_RX" link set lo up
    ip -n "$NS_TX" addr add "$ip_tx/30" dev "$v_tx"
    ip -n "$NS_RX" addr add "$ip_rx/30" dev "$v_rx"
    ip -n "$NS_TX" link set "$v_tx" mtu 1500 up
    ip -n "$NS_RX" link set "$v_rx" mtu 1500 up
    # No segmentation/coalescing offloads: every packet on the wire (and in the
    # capture) is one MSS-sized segment.  Checksum offload off too, so the
    # captured packets carry real checksums.
    ip netns exec "$NS_TX" ethtool -K "$v_tx" tso off gso off gro off tx off rx off >/dev/null
    ip netns exec "$NS_RX" ethtool -K "$v_rx" tso off gso off gro off tx off rx off >/dev/null
    # Rate-limit the sender so tcpdump never falls behind.
    tc -n "$NS_TX" qdisc replace dev "$v_tx" root tbf rate "$RATE" burst 256kb latency 50ms

    ip netns exec "$NS_RX" iperf3 -s -1 -B "$ip_rx" >"$LOG_DIR/iperf3-server.log" 2>&1 &
    IPERF_SRV_PID=$!
    local i
    for i in $(seq 100); do
        ip netns exec "$NS_RX" ss -Hltn 2>/dev/null | grep -q ":5201 " && break
        kill -0 "$IPERF_SRV_PID" 2>/dev/null || die "iperf3 server exited; see $LOG_DIR/iperf3-server.log"
        sleep 0.1
    done

    rm -f "$GEN_TMP"
    # -B is in KiB: a 512 MiB kernel ring so bursts never overflow it.
    ip netns exec "$NS_TX" tcpdump -i "$v_tx" -n -s 0 -B 524288 -w "$GEN_TMP" tcp \
        2>"$LOG_DIR/tcpdump.log" &
    TCPDUMP_PID=$!
    for i in $(seq 100); do
        grep -q "listening on" "$LOG_DIR/tcpdump.log" && break
        kill -0 "$TCPDUMP_PID" 2>/dev/null || die "tcpdump exited early: $(cat "$LOG_DIR/tcpdump.log")"
        sleep 0.1
    done
    grep -q "listening on" "$LOG_DIR/tcpdump.log" || die "tcpdump did not start; see $LOG_DIR/tcpdump.log"

    log "sending $BYTES with iperf3 at $RATE (tbf), capturing full packets at the sender"
    local t0=$EPOCHREALTIME
    ip netns exec "$NS_TX" iperf3 -c "$ip_rx" -n "$BYTES" >"$LOG_DIR/iperf3-client.log" 2>&1 \
        || die "iperf3 client failed; see $LOG_DIR/iperf3-client.log"
    local t1=$EPOCHREALTIME
    wait "$IPERF_SRV_PID" || true
    IPERF_SRV_PID=""
    sleep 1   # let the last ACKs/FINs reach tcpdump
    kill -INT "$TCPDUMP_PID"
    wait "$TCPDUMP_PID" || true
    TCPDUMP_PID=""
    log "iperf3 finished in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s"

    cat "$LOG_DIR/tcpdump.log" >&2
    local captured dropped
    captured=$(awk '/packets captured/ {print $1}' "$LOG_DIR/tcpdump.log")
    dropped=$(awk '/packets dropped by/ {s += $1} END {print s+0}' "$LOG_DIR/tcpdump.log")
    [[ -n $captured ]] || die "could not read tcpdump's statistics; see $LOG_DIR/tcpdump.log"
    [[ $dropped -eq 0 ]] || die "tcpdump dropped $dropped packets; try a lower BENCH_RATE (now $RATE)"
    [[ $captured -ge $MIN_PACKETS ]] \
        || die "only $captured packets captured (< $MIN_PACKETS); raise BENCH_BYTES (now $BYTES)"

    ip netns del "$NS_TX"; NS_TX=""
    ip netns del "$NS_RX"; NS_RX=""
    mv "$GEN_TMP" "$FULL"
    GEN_TMP=""
    trap - EXIT INT TERM

    {
        echo "generated=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "generator=iperf3 -n $BYTES over veth between two netns, tbf $RATE, offloads off, MTU 1500, tcpdump -s 0 at sender"
        echo "tcpdump_captured=$captured"
        echo "tcpdump_dropped=$dropped"
        echo "iperf3_seconds=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')"
        echo "kernel=$(uname -r)"
    } >"$INFO"
}

ensure_captures() {
    if [[ ! -s $FULL ]]; then
        rm -f "$SNAP" "$INFO"
        generate_full
    else
        log "reusing $FULL"
    fi
    if [[ ! -s $SNAP ]]; then
        rm -f "$MANY"
        log "deriving $SNAP with editcap -s 128"
        editcap -F pcap -s 128 "$FULL" "$SNAP.partial" || { rm -f "$SNAP.partial"; die "editcap failed"; }
        mv "$SNAP.partial" "$SNAP"
    else
        log "reusing $SNAP"
    fi
    if [[ ! -s $MANY ]]; then
        log "deriving $MANY with bench/make-many-pcap.py (8 connections)"
        python3 "$BENCH_DIR/make-many-pcap.py" "$SNAP" "$MANY.partial" 8 "$(count_packets "$SNAP")" \
            || { rm -f "$MANY.partial"; die "make-many-pcap.py failed"; }
        mv "$MANY.partial" "$MANY"
    else
        log "reusing $MANY"
    fi
    local f key n
    for f in "$FULL" "$SNAP" "$MANY"; do
        key=packets_$(basename "$f" .pcap | tr -c 'a-zA-Z0-9\n' '_')
        n=$(info_get "$key")
        if [[ -z $n ]]; then
            log "counting packets in $(basename "$f")"
            n=$(count_packets "$f")
            [[ -n $n ]] || die "capinfos could not count packets in $f"
            echo "$key=$n" >>"$INFO"
        fi
        [[ $n -ge $MIN_PACKETS ]] || die "$f has only $n packets (< $MIN_PACKETS); delete $DATA_DIR and rerun with a larger BENCH_BYTES"
        log "$(basename "$f"): $n packets, $(du -h --apparent-size "$f" | cut -f1)"
    done
}

ensure_captures
if [[ $GEN_ONLY == 1 ]]; then log "BENCH_GEN_ONLY=1: captures ready, stopping"; exit 0; fi

# --- timing ----------------------------------------------------------------

has_tool() { [[ " $TOOLS " == *" $1 "* ]]; }

# is_json FILE: true if FILE holds one JSON document (or JSON lines, one per line).
is_json() {
    if command -v python3 >/dev/null 2>&1; then
        python3 - "$1" <<'PY' 2>/dev/null
import json, sys
text = open(sys.argv[1]).read()
try:
    json.loads(text)
except ValueError:
    lines = [l for l in text.splitlines() if l.strip()]
    if not lines:
        sys.exit(1)
    for l in lines:
        json.loads(l)
PY
    else
        grep -q '^[[:space:]]*[[{]' "$1"
    fi
}

TCPWHY_OK=0
TCPWHY_NOTE=""
if has_tool tcpwhy; then
    if [[ $TCPWHY == "$DEFAULT_TCPWHY" ]]; then
        # Always build: a no-op when up to date, and never times a stale binary.
        log "building tcpwhy: cargo build --release (log: $LOG_DIR/cargo-build.log)"
        if ! (cd "$REPO_DIR" && cargo build --release) >"$LOG_DIR/cargo-build.log" 2>&1; then
            warn "cargo build --release failed; tcpwhy rows skipped (see $LOG_DIR/cargo-build.log)"
            tail -n 15 "$LOG_DIR/cargo-build.log" >&2 || true
            TCPWHY_NOTE="tcpwhy not run: cargo build --release failed"
        fi
    fi
    if [[ -n $TCPWHY_NOTE ]]; then
        :
    elif [[ ! -x $TCPWHY ]]; then
        warn "no tcpwhy binary at $TCPWHY; tcpwhy rows skipped"
        TCPWHY_NOTE="tcpwhy not run: no binary at $TCPWHY"
    else
        # Untimed sanity run on the small capture: a stub or broken `stats`
        # must not show up as an impossibly fast row.
        log "checking that '$TCPWHY stats' produces output"
        if ! "$TCPWHY" stats "$SNAP" >"$LOG_DIR/tcpwhy-stats.out" 2>"$LOG_DIR/tcpwhy-stats.stderr"; then
            TCPWHY_NOTE="tcpwhy not run: tcpwhy stats failed (see $LOG_DIR/tcpwhy-stats.stderr)"
        elif [[ ! -s $LOG_DIR/tcpwhy-stats.out ]]; then
            TCPWHY_NOTE="tcpwhy not run: tcpwhy stats printed nothing"
        elif ! "$TCPWHY" stats --json "$SNAP" >"$LOG_DIR/tcpwhy-stats-json.out" 2>"$LOG_DIR/tcpwhy-stats-json.stderr"; then
            TCPWHY_NOTE="tcpwhy not run: tcpwhy stats --json failed (see $LOG_DIR/tcpwhy-stats-json.stderr)"
        elif ! is_json "$LOG_DIR/tcpwhy-stats-json.out"; then
            TCPWHY_NOTE="tcpwhy not run: tcpwhy stats --json did not print JSON"
        else
            TCPWHY_OK=1
        fi
        if [[ -n $TCPWHY_NOTE ]]; then warn "$TCPWHY_NOTE"; fi
    fi
fi

ROWS=()          # "tool|capture|packets|wall|rss_kib|status"
declare -A TCPTRACE_PPS=()

# measure LABEL CAPTURE_NAME FILE PACKETS CMD...: best-of-RUNS wall time, max RSS.
measure() {
    local label=$1 cname=$2 file=$3 packets=$4; shift 4
    local best="" rss=0 i t0 t1 wall r rc status=ok
    local tfile="$LOG_DIR/time.out" errlog="$LOG_DIR/$(echo "$label-$cname" | tr -c 'a-zA-Z0-9\n-' '_').stderr"
    cat "$file" >/dev/null   # warm the page cache
    for ((i = 1; i <= RUNS; i++)); do
        t0=$EPOCHREALTIME
        rc=0
        /usr/bin/time -v -o "$tfile" taskset -c "${PIN:-$CPU}" "$@" >/dev/null 2>"$errlog" || rc=$?
        t1=$EPOCHREALTIME
        if [[ $rc -ne 0 ]]; then
            warn "$label on $cname exited $rc (stderr: $errlog)"
            tail -n 5 "$errlog" >&2 || true
            status="failed (exit $rc)"
            break
        fi
        wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b-a}')
        r=$(awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}' "$tfile")
        if [[ -n $r && $r -gt $rss ]]; then rss=$r; fi
        if [[ -z $best ]] || awk -v a="$wall" -v b="$best" 'BEGIN{exit !(a < b)}'; then best=$wall; fi
        log "  $label / $cname run $i/$RUNS: ${wall}s, RSS $((r / 1024)) MiB"
    done
    ROWS+=("$label|$cname|$packets|${best:--}|$rss|$status")
    if [[ $label == tcptrace* && $status == ok ]]; then
        TCPTRACE_PPS[$cname]=$(awk -v p="$packets" -v w="$best" 'BEGIN{printf "%.1f", p/w}')
    fi
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
if awk -v l="${LOAD_BEFORE%% *}" 'BEGIN{exit !(l > 0.5)}'; then
    warn "load average is $LOAD_BEFORE: other processes are running, timings will be noisy"
fi

TSHARK_FIELDS=(-e frame.number -e tcp.stream -e tcp.seq -e tcp.ack
    -e tcp.analysis.retransmission -e tcp.analysis.fast_retransmission
    -e tcp.analysis.lost_segment -e tcp.analysis.duplicate_ack
    -e tcp.analysis.zero_window -e tcp.analysis.ack_rtt -e tcp.analysis.bytes_in_flight)

# fresh_cache FILE: drops FILE from the page cache and reads it back, so
# every run starts from the same page cache (bench/fresh-cache.py says why).
fresh_cache() {
    python3 "$BENCH_DIR/fresh-cache.py" "$1" || warn "could not refill the page cache of $1"
}

for cname in full snap128 many8; do
    case $cname in full) file=$FULL ;; snap128) file=$SNAP ;; *) file=$MANY ;; esac
    packets=$(info_get "packets_$(basename "$file" .pcap | tr -c 'a-zA-Z0-9\n' '_')")
    log "capture $cname: $file ($packets packets), best of $RUNS runs, pinned to CPU $CPU"
    fresh_cache "$file"
    if has_tool tcptrace; then
        ensure_cmd tcptrace tcptrace
        measure "tcptrace -l -r" "$cname" "$file" "$packets" tcptrace -l -r "$file"
    fi
    if has_tool tshark; then
        ensure_cmd tshark tshark
        measure "tshark -z conv,tcp" "$cname" "$file" "$packets" tshark -r "$file" -q -z conv,tcp
        measure "tshark -T fields (tcp.analysis)" "$cname" "$file" "$packets" \
            tshark -r "$file" -T fields "${TSHARK_FIELDS[@]}"
    fi
    if [[ $TCPWHY_OK == 1 ]]; then
        measure "tcpwhy stats" "$cname" "$file" "$packets" "$TCPWHY" stats "$file"
        measure "tcpwhy stats --json" "$cname" "$file" "$packets" "$TCPWHY" stats --json "$file"
        measure "tcpwhy diagnose --json" "$cname" "$file" "$packets" "$TCPWHY" diagnose --json --no-progress "$file"
        if [[ -n $CPU2 ]]; then
            PIN="$CPU,$CPU2" measure "tcpwhy stats --json -j 2 (2 cores)" "$cname" "$file" "$packets" "$TCPWHY" stats --json -j 2 "$file"
            PIN="$CPU,$CPU2" measure "tcpwhy diagnose --json -j 2 (2 cores)" "$cname" "$file" "$packets" "$TCPWHY" diagnose --json --no-progress -j 2 "$file"
        fi
    fi
done

# --- report ----------------------------------------------------------------

table() {
    echo "| tool | capture | packets | wall s (best of $RUNS) | packets/s | peak RSS MiB | packets/s vs tcptrace |"
    echo "|---|---|---:|---:|---:|---:|---:|"
    local row tool cname packets wall rss status pps ratio base
    for row in "${ROWS[@]}"; do
        IFS='|' read -r tool cname packets wall rss status <<<"$row"
        if [[ $status != ok ]]; then
            echo "| \`$tool\` | $cname | $packets | $status | - | - | - |"
            continue
        fi
        pps=$(awk -v p="$packets" -v w="$wall" 'BEGIN{printf "%.0f", p/w}')
        base=${TCPTRACE_PPS[$cname]:-}
        if [[ -n $base ]]; then
            ratio=$(awk -v p="$packets" -v w="$wall" -v b="$base" 'BEGIN{printf "%.2fx", (p/w)/b}')
        else
            ratio="n/a"
        fi
        printf '| `%s` | %s | %s | %.2f | %s | %.1f | %s |\n' \
            "$tool" "$cname" "$packets" "$wall" "$pps" "$(awk -v r="$rss" 'BEGIN{print r/1024}')" "$ratio"
    done
}

ver() { "$@" 2>&1 | grep -v -i 'running as user' | head -n1 || true; }
TABLE=$(table)
ELAPSED=$(awk -v a="$START_TS" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.0f", b-a}')
TCPWHY_VER="not run"
if [[ $TCPWHY_OK == 1 ]]; then TCPWHY_VER="$(ver "$TCPWHY" --version) ($TCPWHY)"; fi
GIT_REV=$(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo "no commit")

{
    echo "# tcpwhy benchmark results"
    echo
    echo "Produced by \`bench/run.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC') (repo at $GIT_REV); see bench/README.md."
    echo "Every command is single-threaded, pinned with \`taskset -c $CPU\`, except the rows marked (2 cores), pinned to cores $CPU and $CPU2; each capture dropped from the page cache and read back before its rows (page cache warm and freshly filled), stdout to /dev/null."
    echo "Wall time is the best of $RUNS runs; peak RSS is the largest \"Maximum resident set size\" from \`/usr/bin/time -v\`."
    echo
    echo "$TABLE"
    echo
    if [[ -n $TCPWHY_NOTE ]]; then echo "Note: $TCPWHY_NOTE."; echo; fi
    echo "## Captures"
    echo
    echo "- \`bulk-full.pcap\`: $(du -h --apparent-size "$FULL" | cut -f1), $(info_get packets_bulk_full) packets, full packets (snaplen 262144)"
    echo "- \`bulk-snap128.pcap\`: $(du -h --apparent-size "$SNAP" | cut -f1), $(info_get packets_bulk_snap128) packets, derived with \`editcap -s 128\`"
    echo "- \`many8-snap128.pcap\`: $(du -h --apparent-size "$MANY" | cut -f1), $(info_get packets_many8_snap128) packets, derived with \`bench/make-many-pcap.py\`: the first eighth of bulk-snap128 eight times over (client ports changed), interleaved record by record, for one capture of many connections on two cores"
    echo "- generation: $(info_get generator); tcpdump dropped $(info_get tcpdump_dropped); generated $(info_get generated)"
    echo
    echo "## Machine"
    echo
    echo "- CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -n1), $(nproc) cores"
    echo "- memory: $(free -g | awk '/^Mem:/ {print $2}') GiB"
    echo "- kernel: $(uname -r); $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
    echo "- tcptrace: $(ver tcptrace -v | sed 's/^Version: //')"
    echo "- tshark: $(ver tshark --version)"
    echo "- tcpdump: $(ver tcpdump --version); iperf3: $(ver iperf3 --version)"
    echo "- tcpwhy: $TCPWHY_VER; $(ver rustc --version)"
    echo "- load average (1/5/15 min) before timing: $LOAD_BEFORE, after: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- whole bench/run.sh run: ${ELAPSED} s"
} >"$RESULTS"

echo
echo "$TABLE"
echo
if [[ -n $TCPWHY_NOTE ]]; then echo "Note: $TCPWHY_NOTE."; fi
log "results written to $RESULTS (total ${ELAPSED} s)"

# --- guard -------------------------------------------------------------------
# Each step of the speed history measured "no slower" than the one before
# and the steps added up (1.5x over a month). So every run compares
# `diagnose` with the figure recorded for the last release, not with the
# last commit: its speed against tcptrace in this same run (a ratio, so the
# machine's drift from minute to minute cancels), on the snaplen-128 file.
# More than GUARD_LOSS slower fails the run (exit 3). BENCH_RECORD=1
# records this run's figures as the new reference (at a release).
GUARD=$BENCH_DIR/guard.tsv
GUARD_LOSS=${BENCH_GUARD_LOSS:-0.05}
guard_ratio() {   # guard_ratio LABEL CAPTURE: this run's packets/s vs tcptrace
    local row tool cname packets wall rss status base
    for row in "${ROWS[@]}"; do
        IFS='|' read -r tool cname packets wall rss status <<<"$row"
        [[ $tool == "$1" && $cname == "$2" && $status == ok ]] || continue
        base=${TCPTRACE_PPS[$cname]:-}
        [[ -n $base ]] && awk -v p="$packets" -v w="$wall" -v b="$base" 'BEGIN{printf "%.3f", (p/w)/b}'
        return
    done
}
if [[ $TCPWHY_OK == 1 ]] && has_tool tcptrace; then
    if [[ ${BENCH_RECORD:-0} == 1 ]]; then
        {
            echo "# tcpwhy speed against tcptrace -l -r in the same bench/run.sh run: the reference bench/run.sh's guard holds each run to"
            echo "# recorded $(date -u '+%Y-%m-%d') at $GIT_REV on $(lscpu | sed -n 's/^Model name: *//p' | head -n1), $(nproc) cores"
            for label in "tcpwhy diagnose --json" "tcpwhy diagnose --json -j 2 (2 cores)"; do
                r=$(guard_ratio "$label" snap128)
                [[ -n $r ]] && printf '%s\tsnap128\t%s\n' "$label" "$r"
            done
        } >"$GUARD"
        log "recorded the guard's reference in $GUARD"
    elif [[ -f $GUARD ]]; then
        failed=0
        while IFS=$'\t' read -r label cname want; do
            [[ -z $label || $label == \#* ]] && continue
            got=$(guard_ratio "$label" "$cname")
            if [[ -z $got ]]; then
                warn "guard: no figure for '$label' on $cname in this run"
                continue
            fi
            if awk -v g="$got" -v w="$want" -v l="$GUARD_LOSS" 'BEGIN{exit !(g < w * (1 - l))}'; then
                warn "guard: '$label' on $cname runs at ${got}x tcptrace, below the recorded ${want}x by more than $(awk -v l="$GUARD_LOSS" 'BEGIN{print l*100}')%"
                failed=1
            else
                log "guard: '$label' on $cname at ${got}x tcptrace (recorded ${want}x)"
            fi
        done <"$GUARD"
        [[ $failed == 0 ]] || exit 3
    fi
fi
