#!/usr/bin/env bash
# The loss-free packet rate `tcpwhy watch` sustains on one core, beside
# `tcpdump -w /dev/null` on the same veth (issue 42; results in
# bench/watch-results.md).
#
# Two namespaces joined by a veth pair. trafgen (netsniff-ng, Debian's
# zero-copy PACKET_MMAP generator) sends on one end from CPU 0 at a fixed
# packet rate; the capture reads the other end pinned to CPU 1 (the kernel
# copies each frame into the capture's ring in the veth receive softirq,
# on the sender's CPU). The traffic is TCP: CONNS interleaved connections,
# each a data segment of PAYLOAD bytes (sequence numbers advancing) then the
# receiver's ACK of it, so the flow table and the diagnosis's recorder do
# their real per-packet work, and every interval the connections are
# diagnosed again.
#
# For each rate, SECONDS of traffic; a rate is loss-free when the capture
# got every packet sent (its own count) and the kernel dropped none
# (pcap_stats). Both tools get the same snaplen (256) and ring (64 MiB).
# On a 2-core machine the generator's core (trafgen, veth transmit and
# receive, the copy into the ring) tops out below what the capture's core
# can take, so each row also gives the capture's own CPU time (user +
# system, /proc/PID/stat) and packets per CPU-second: the rate one core
# sustains when it does nothing else.
#
# tcpdump runs with -Z root: dropping to its own user, it would chown its
# output file, and /dev/null owned by tcpdump breaks other tools (nstat).
#
# Usage (root): bench/watch.sh [RATE_KPPS ...]   (default: a sweep)
# Env: SECONDS_EACH (5), CONNS (64), PAYLOAD (100), DRAIN_PACKETS (3000000),
#      DRAIN_ONLY (set: skip the rate sweep), TCPWHY (target/release/tcpwhy)
set -euo pipefail
cd "$(dirname "$0")/.."
TCPWHY="${TCPWHY:-$PWD/target/release/tcpwhy}"
SECONDS_EACH="${SECONDS_EACH:-5}"
CONNS="${CONNS:-64}"
PAYLOAD="${PAYLOAD:-100}"
RATES=("$@")
# "max": trafgen as fast as it goes (no rate limit).
[ ${#RATES[@]} -gt 0 ] || RATES=(100 250 max)

for tool in trafgen tcpdump; do
  if ! command -v "$tool" >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq netsniff-ng tcpdump >/dev/null
  fi
done
[ -x "$TCPWHY" ] || { echo "build tcpwhy first (cargo build --release)" >&2; exit 1; }
# The floor: packets counted, nothing analysed, through libpcap and through
# a TPACKET_V3 ring of its own (crates/cli/examples/capture_floor.rs).
cargo build --release --example capture_floor -q
FLOOR="$PWD/target/release/examples/capture_floor"

# until the capture whose stderr is $1 says it is listening
wait_listening() {
  for _ in $(seq 100); do
    grep -q "listening on" "$1" 2>/dev/null && { sleep 0.5; return 0; }
    sleep 0.1
  done
  echo "capture did not start: $(cat "$1")" >&2
  return 1
}

G="twbench$$-gen"; C="twbench$$-cap"
cleanup() { ip netns del "$G" 2>/dev/null || true; ip netns del "$C" 2>/dev/null || true; }
trap cleanup EXIT
ip netns add "$G"; ip netns add "$C"
ip link add g0 netns "$G" type veth peer name w0 netns "$C"
ip -n "$G" link set g0 up; ip -n "$C" link set w0 up
ip -n "$G" link set lo up; ip -n "$C" link set lo up

# The trafgen configuration: per connection a data segment and its ACK.
cfg=$(mktemp /tmp/twbench.XXXX.cfg)
for ((i = 0; i < CONNS; i++)); do
  sp=$((20000 + i))
  cat >>"$cfg" <<EOF
{ eth(da=02:00:00:00:00:02, sa=02:00:00:00:00:01), ipv4(sa=10.9.0.1, da=10.9.1.$((i % 250 + 1)), ttl=64, id=dinc()),
  tcp(sp=$sp, dp=443, seq=dinc(1000, 4000000000, $PAYLOAD), aseq=5000, ack, psh, win=2000), fill(0x61, $PAYLOAD) }
{ eth(da=02:00:00:00:00:01, sa=02:00:00:00:00:02), ipv4(sa=10.9.1.$((i % 250 + 1)), da=10.9.0.1, ttl=64, id=dinc()),
  tcp(sp=443, dp=$sp, seq=5000, aseq=dinc($((1000 + PAYLOAD)), 4000000000, $PAYLOAD), ack, win=2000) }
EOF
done

machine="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, $(uname -r)"
echo "# $machine; $CONNS connections, $PAYLOAD-byte payloads, ${SECONDS_EACH}s per rate"
printf '%-10s %-8s %9s %12s %12s %10s %-9s %7s %12s\n' tool kpps sent-kpps sent captured dropped loss-free cpu-s kpps/cpu-s

# run_one TOOL KPPS: prints a row.
run_one() {
  local tool=$1 kpps=$2 err=$(mktemp) got drop n
  # "max": as many packets as 400,000 a second would send (above what
  # trafgen reaches on one core of this machine).
  n=$(( ${kpps/max/400} * 1000 * SECONDS_EACH ))
  if [ "$tool" = watch ]; then
    ip netns exec "$C" taskset -c 1 "$TCPWHY" watch w0 --no-view --snaplen 256 --buffer 64 >/dev/null 2>"$err" &
  else
    ip netns exec "$C" taskset -c 1 tcpdump -Z root -i w0 -s 256 -B 65536 --immediate-mode -w /dev/null tcp 2>"$err" &
  fi
  local pid=$!
  wait_listening "$err"
  local t0 t1 rate=()
  [ "$kpps" = max ] || rate=(-b "${kpps}000pps")
  t0=$(date +%s%N)
  ip netns exec "$G" taskset -c 0 trafgen -o g0 -i "$cfg" -P 1 "${rate[@]}" -n "$n" -q -C >/dev/null 2>&1 || true
  t1=$(date +%s%N)
  sleep 1.5
  # CPU time the capture spent (user + system) while it read everything.
  local ticks
  ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  kill -INT "$pid"; wait "$pid" || true
  if [ "$tool" = watch ]; then
    got=$(sed -n 's/^tcpwhy watch: \([0-9]*\) packets in .*/\1/p' "$err")
    drop=$(sed -n 's/.* \([0-9]*\) dropped by the kernel.*/\1/p' "$err")
  else
    got=$(sed -n 's/^\([0-9]*\) packets captured.*/\1/p' "$err")
    drop=$(sed -n 's/^\([0-9]*\) packets dropped by kernel.*/\1/p' "$err")
  fi
  local ok=no
  [ "${got:-0}" -ge "$n" ] && [ "${drop:-1}" -eq 0 ] && ok=yes
  local cpu_s capacity
  cpu_s=$(awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }')
  capacity=$(awk -v n="${got:-0}" -v c="$cpu_s" 'BEGIN { if (c > 0) printf "%.0f", n / c / 1000; else print "-" }')
  printf '%-10s %-8s %9s %12s %12s %10s %-9s %7s %12s\n' "$tool" "$kpps" "$(( n * 1000000 / (t1 - t0) ))" "$n" "${got:-?}" "${drop:-?}" "$ok" "$cpu_s" "$capacity"
  rm -f "$err"
}

[ -n "${DRAIN_ONLY:-}" ] && RATES=()
for kpps in "${RATES[@]}"; do
  run_one tcpdump "$kpps"
  run_one watch "$kpps"
done

# The drain: the capture is stopped (SIGSTOP) while DRAIN_PACKETS are sent
# into a 1 GiB ring, then let go (SIGCONT). With the ring full it never
# waits for a block, so its CPU time over the packets is its per-packet
# cost alone, and packets per CPU-second the most one core keeps up with.
DRAIN_PACKETS="${DRAIN_PACKETS:-3000000}"
echo
echo "# drain of $DRAIN_PACKETS packets queued in a 1 GiB ring"
printf '%-10s %12s %10s %7s %12s\n' tool captured dropped cpu-s kpps/cpu-s
run_drain() {
  local tool=$1 err=$(mktemp) got drop
  case $tool in
    watch) ip netns exec "$C" taskset -c 1 "$TCPWHY" watch w0 --no-view --snaplen 256 --buffer 1024 >/dev/null 2>"$err" & ;;
    tcpdump) ip netns exec "$C" taskset -c 1 tcpdump -Z root -i w0 -s 256 -B 1048576 --immediate-mode -w /dev/null tcp 2>"$err" & ;;
    floor-*) ip netns exec "$C" taskset -c 1 "$FLOOR" "${tool#floor-}" w0 1024 2>"$err" & ;;
  esac
  local pid=$!
  wait_listening "$err"
  local t0
  t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  kill -STOP "$pid"
  ip netns exec "$G" taskset -c 0 trafgen -o g0 -i "$cfg" -P 1 -n "$DRAIN_PACKETS" -q -C >/dev/null 2>&1 || true
  kill -CONT "$pid"
  # until its CPU time stops growing
  local last=-1 now
  while :; do
    sleep 1
    now=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    [ "$now" = "$last" ] && break
    last=$now
  done
  kill -INT "$pid"; wait "$pid" || true
  case $tool in
    watch)
      got=$(sed -n 's/^tcpwhy watch: \([0-9]*\) packets in .*/\1/p' "$err")
      drop=$(sed -n 's/.* \([0-9]*\) dropped by the kernel.*/\1/p' "$err") ;;
    tcpdump)
      got=$(sed -n 's/^\([0-9]*\) packets captured.*/\1/p' "$err")
      drop=$(sed -n 's/^\([0-9]*\) packets dropped by kernel.*/\1/p' "$err") ;;
    floor-*)
      got=$(sed -n 's/^\([0-9]*\) packets, .*/\1/p' "$err")
      drop=$(sed -n 's/.*, \([0-9]*\) dropped/\1/p' "$err") ;;
  esac
  local cpu_s
  cpu_s=$(awk -v t="$((now - t0))" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }')
  printf '%-10s %12s %10s %7s %12s\n' "$tool" "${got:-?}" "${drop:-?}" "$cpu_s" \
    "$(awk -v n="${got:-0}" -v c="$cpu_s" 'BEGIN { if (c > 0) printf "%.0f", n / c / 1000; else print "-" }')"
  rm -f "$err"
}
for round in 1 2 3; do
  for tool in floor-tpacket floor-pcap tcpdump watch; do
    run_drain "$tool"
  done
done
rm -f "$cfg"
