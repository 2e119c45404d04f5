#!/bin/bash
# Cost of `tcpwhy live`: CPU of one core while sampling N established TCP
# sockets (N/2 loopback connections held open in a network namespace
# t5-bench-PID) every INTERVAL for DURATION. Needs root.
#
#   bench/live-cost.sh [SOCKETS=10000] [INTERVAL=100ms] [DURATION=20s] [ACTIVE=0] [EXTRA live options...]
#
# ACTIVE of the connections carry traffic (64 KiB each every 100 ms) so
# that `live` has active sockets to follow between its full scans.
#
# Prints utime+stime of the tcpwhy process over its wall time, and appends
# the figures with the machine description to bench/live-results.md.
set -euo pipefail
SOCKETS=${1:-10000}; INTERVAL=${2:-100ms}; DURATION=${3:-20s}; ACTIVE=${4:-0}
shift $(( $# < 4 ? $# : 4 )); EXTRA=("$@")
HERE=$(cd "$(dirname "$0")" && pwd)
TCPWHY=${TCPWHY:-$HERE/../target/release/tcpwhy}
NS=t5-bench-$$
[ "$(id -u)" = 0 ] || { echo "needs root (network namespace)"; exit 1; }
[ -x "$TCPWHY" ] || { echo "build first: cargo build --release"; exit 1; }
HOLDER=
cleanup() { [ -n "$HOLDER" ] && kill "$HOLDER" 2>/dev/null; ip netns del "$NS" 2>/dev/null || true; }
trap cleanup EXIT INT TERM
ip netns add "$NS"; ip -n "$NS" link set lo up
READY=$(mktemp)
ip netns exec "$NS" python3 - "$SOCKETS" "$READY" "$ACTIVE" <<'PY' &
import resource, socket, sys, time
n = int(sys.argv[1]) // 2
resource.setrlimit(resource.RLIMIT_NOFILE, (n * 2 + 1000, n * 2 + 1000))
socks = []
for base in range(0, n, 20000):  # 20,000 connections per listener port at most
    l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(4096)
    for _ in range(min(20000, n - base)):
        c = socket.create_connection(l.getsockname()); a, _ = l.accept()
        socks += [c, a]
    socks.append(l)
open(sys.argv[2], "w").write("ready")
active = int(sys.argv[3])
pairs = [(socks[2 * i], socks[2 * i + 1]) for i in range(active)]
for c, a in pairs:
    c.setblocking(False); a.setblocking(False)
chunk = b"x" * 65536
while True:
    for c, a in pairs:
        try: c.send(chunk)
        except BlockingIOError: pass
        try:
            while a.recv(1 << 20): pass
        except BlockingIOError: pass
    time.sleep(0.1)
PY
HOLDER=$!
while [ ! -s "$READY" ]; do sleep 0.2; done
rm -f "$READY"
COUNT=$(ip netns exec "$NS" ss -tnH state established | wc -l)
echo "established sockets: $COUNT"
"$TCPWHY" live --netns "$NS" --interval "$INTERVAL" --duration "$DURATION" --no-view "${EXTRA[@]}" >/dev/null 2>/tmp/t5-live-bench.err &
PID=$!
T0=$(date +%s.%N)
CLK=$(getconf CLK_TCK)
LAST=0; US=
while kill -0 $PID 2>/dev/null; do
  LAST=$(awk '{print $14+$15}' /proc/$PID/stat 2>/dev/null || echo "$LAST"); US=$(awk '{print $14" user, "$15" sys (ticks)"}' /proc/$PID/stat 2>/dev/null || echo "$US")
  sleep 0.2
done
wait $PID || true
T1=$(date +%s.%N)
CPU=$(awk -v t="$LAST" -v c="$CLK" 'BEGIN{print t/c}')
WALL=$(awk -v a="$T0" -v b="$T1" 'BEGIN{print b-a}')
PCT=$(awk -v c="$CPU" -v w="$WALL" 'BEGIN{printf "%.2f", 100*c/w}')
SUMMARY=$(tail -1 /tmp/t5-live-bench.err)
echo "split: $US"; echo "tcpwhy live ${EXTRA[*]}: $CPU s CPU in $WALL s wall = $PCT% of one core ($SUMMARY)"
{
  echo "## $(date -u +%Y-%m-%dT%H:%M:%SZ) live sampling cost"
  echo
  echo "- machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- $COUNT established sockets ($ACTIVE connections carrying data), interval $INTERVAL, $DURATION, options: ${EXTRA[*]:-(default: full scan every 1 s, active sockets every interval)}"
  echo "- CPU: $CPU s over $WALL s = **$PCT% of one core**"
  echo "- $SUMMARY"
  echo
} >> "$HERE/live-results.md"
