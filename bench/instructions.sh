#!/usr/bin/env bash
# Instructions per packet: tcpwhy stats, tcpwhy diagnose, tcptrace (and
# tshark with BENCH_TOOLS) on the same slice of a benchmark capture, counted
# by valgrind's callgrind, with tcpwhy's instructions split by stage.
#
# Wall times on a shared VM drift by half from one minute to the next (see
# bench/results.md); instruction counts do not: the same binary on the same
# packets gives the same count to a few parts in a million. This is the
# yardstick for work on the per-packet cost between bench/run.sh runs. It is
# not the issue's goal (that is wall time, bench/run.sh): a tool that waits
# on memory more runs fewer instructions per second.
#
# Usage: bench/instructions.sh [CAPTURE]   (default: bench/data/bulk-snap128.pcap,
#                                          made by bench/run.sh)
# Environment knobs (all optional):
#   BENCH_SLICE=500001-700000   the packets counted (editcap -r range): the
#                               middle of the transfer, past slow start
#   BENCH_TOOLS="tcptrace tcpwhy"   add tshark for tshark -q -z conv,tcp
#                               (about 3 minutes under callgrind)
#   TCPWHY=<repo>/target/release/tcpwhy
#   BENCH_RESULTS=<repo>/bench/instructions-results.md
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$BENCH_DIR/.." && pwd)
CAP=${1:-$BENCH_DIR/data/bulk-snap128.pcap}
SLICE=${BENCH_SLICE:-500001-700000}
TOOLS=${BENCH_TOOLS:-"tcptrace tcpwhy"}
TCPWHY=${TCPWHY:-$REPO_DIR/target/release/tcpwhy}
RESULTS=${BENCH_RESULTS:-$BENCH_DIR/instructions-results.md}

die() { echo "bench/instructions.sh: $*" >&2; exit 1; }
[[ -f $CAP ]] || die "no capture $CAP (run bench/run.sh first, or name one)"
for pair in valgrind:valgrind callgrind_annotate:valgrind editcap:wireshark-common capinfos:wireshark-common; do
  cmd=${pair%%:*} pkg=${pair#*:}
  if ! command -v "$cmd" >/dev/null 2>&1; then
    [[ $EUID -eq 0 ]] || die "'$cmd' is missing: apt-get install $pkg"
    (apt-get install -y -qq "$pkg" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq "$pkg" >/dev/null; }) \
      || die "apt-get install $pkg failed"
  fi
done
[[ " $TOOLS " != *" tcptrace "* ]] || command -v tcptrace >/dev/null || die "tcptrace is missing: apt-get install tcptrace"
[[ " $TOOLS " != *" tshark "* ]] || command -v tshark >/dev/null || die "tshark is missing: apt-get install tshark"
[[ -x $TCPWHY ]] || (cd "$REPO_DIR" && cargo build --release -q)

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
SLICED=$WORK/slice.pcap
editcap -F pcap -r "$CAP" "$SLICED" "$SLICE"
PACKETS=$(capinfos -c -M "$SLICED" | awk -F: '/Number of packets/ {gsub(/ /, "", $2); print $2}')
[[ $PACKETS -gt 0 ]] || die "the slice $SLICE of $CAP has no packets"

# count NAME COMMAND...: total instructions of COMMAND under callgrind.
declare -A TOTAL
count() {
  local name=$1; shift
  valgrind --tool=callgrind --callgrind-out-file="$WORK/$name.cg" "$@" >/dev/null 2>"$WORK/$name.err" \
    || die "$name failed under valgrind: $(tail -3 "$WORK/$name.err")"
  TOTAL[$name]=$(awk '/I[ ]+refs:/ {gsub(",", "", $NF); print $NF}' "$WORK/$name.err")
}
# threads NAME COMMAND...: the same, and each thread's count (callgrind
# runs the threads one at a time, so this is work, not time): BUSY[NAME] is
# the busiest thread's, THREADS[NAME] all threads' counts over 1% of it.
declare -A BUSY THREADS
threads() {
  local name=$1; shift
  valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$WORK/$name.cg" "$@" >/dev/null 2>"$WORK/$name.err" \
    || die "$name failed under valgrind: $(tail -3 "$WORK/$name.err")"
  TOTAL[$name]=$(awk '/I[ ]+refs:/ {gsub(",", "", $NF); print $NF}' "$WORK/$name.err")
  local counts
  counts=$(awk '/^totals:/ {print $2}' "$WORK/$name.cg"-* | sort -rn)
  BUSY[$name]=$(head -1 <<<"$counts")
  THREADS[$name]=$(awk -v t="${TOTAL[$name]}" '$1 > t / 100' <<<"$counts" | tr '\n' ' ')
}
for t in $TOOLS; do
  case $t in
    tcptrace) count tcptrace tcptrace -l -r "$SLICED" ;;
    tshark) count tshark tshark -r "$SLICED" -q -z conv,tcp ;;
    tcpwhy)
      count stats "$TCPWHY" stats --json -j 1 "$SLICED"
      count diagnose "$TCPWHY" diagnose --json --no-progress -j 1 "$SLICED"
      threads stats2 "$TCPWHY" stats --json -j 2 "$SLICED"
      threads diagnose2 "$TCPWHY" diagnose --json --no-progress -j 2 "$SLICED" ;;
    *) die "unknown tool $t (tcptrace, tshark, tcpwhy)" ;;
  esac
done

# tcpwhy's stages, from the inclusive counts of the functions that begin
# them (callgrind_annotate --inclusive): each stage is its function less the
# next stage inside it.
stages() {
  callgrind_annotate --tree=calling --threshold=100 "$WORK/$1.cg" 2>/dev/null | python3 -c '
import re, sys
# Lines "  COST (PCT)  >   file:function (CALLSx) [object]": the inclusive
# cost of the calls to a function from one caller (inlined code is split by
# source file, so a function has several callers); summed per function.
calls = {}
for line in sys.stdin:
    m = re.match(r"\s*([0-9,]+) \([ 0-9.]+%\)\s+>\s+\S+?:(\S.*?) \(([0-9,]+)x\)", line)
    if m:
        calls[m.group(2)] = calls.get(m.group(2), 0) + int(m.group(1).replace(",", ""))
g = lambda n: calls.get(n, 0)
packets, total = int(sys.argv[1]), int(sys.argv[2])
whole = g("tcpwhy_flow::capture::analyze_capture")
frame = max(g("tcpwhy_flow::capture::analyze_capture::{{closure}}"), g("tcpwhy_flow::table::FlowTable::frame"))
segment = g("tcpwhy_flow::table::FlowTable::segment")
feed = g("tcpwhy_flow::table::feed")
copy = g("tcpwhy_flow::quality::DuplicateFilter::is_copy")
model = g("tcpwhy_flow::conn::Connection::process")
rec = g("<tcpwhy_diagnose::record::Recorder as tcpwhy_flow::table::SegmentSink>::segment") \
    + g("<tcpwhy_diagnose::record::Recorder as tcpwhy_flow::table::SegmentSink>::payload")
if not (whole and frame and segment and feed and model):
    print("|   (stages not found: the functions were inlined differently) | |")
    sys.exit()
rows = [
    ("reading records", whole - frame),
    ("decoding (link, IP, TCP, options)", frame - segment),
    ("connection lookup", segment - feed),
    ("duplicate filter", copy),
    ("flow model (Connection::process)", model),
    ("diagnosis records and parts", rec),
    ("between the stages", feed - copy - model - rec),
    ("start, end of capture, output", total - whole),
]
for name, n in rows:
    if n > 0:
        print(f"|   {name} | {n / packets:,.0f} | |")
' "$PACKETS" "${TOTAL[$1]}"
}

per() { python3 -c "print(f'{$1 / $2:,.0f}')"; }
ratio() { python3 -c "print(f'{$1 / $2:.2f}x')"; }
{
  echo "# Instructions per packet"
  echo
  echo "Produced by \`bench/instructions.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC') (repo at $(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo unknown))."
  echo "Capture: \`$(basename "$CAP")\`, packets $SLICE ($PACKETS packets, \`editcap -r\`). Counted by valgrind $(valgrind --version | sed 's/valgrind-//') (callgrind, Ir: instructions executed, the whole process)."
  echo
  echo "| command | instructions per packet | tcptrace's / this |"
  echo "|---|---:|---:|"
  base=${TOTAL[tcptrace]:-}
  for name in tcptrace tshark stats diagnose; do
    [[ -n ${TOTAL[$name]:-} ]] || continue
    case $name in
      tcptrace) label='`tcptrace -l -r`' ;;
      tshark) label='`tshark -q -z conv,tcp`' ;;
      *) label="\`tcpwhy $name --json -j 1\`" ;;
    esac
    r=""
    [[ -n $base ]] && r=$(ratio "$base" "${TOTAL[$name]}")
    echo "| $label | $(per "${TOTAL[$name]}" "$PACKETS") | $r |"
    if [[ $name == stats || $name == diagnose ]]; then stages "$name"; fi
  done
  if [[ -n ${TOTAL[stats2]:-} ]]; then
    echo
    echo "Two threads (\`-j 2\`: one reads, decodes and keeps the table and the duplicate filter, one runs the connections' analysis):"
    echo
    echo "| command | instructions per packet, all threads | each thread | more than one thread (\`-j 1\`) | \`-j 1\` / busiest thread |"
    echo "|---|---:|---|---:|---:|"
    for name in stats2 diagnose2; do
      one=${name%2}
      each=$(for n in ${THREADS[$name]}; do per "$n" "$PACKETS"; done | paste -sd/ | sed 's|/| / |g')
      echo "| \`tcpwhy $one --json -j 2\` | $(per "${TOTAL[$name]}" "$PACKETS") | $each | $(python3 -c "print(f'{(${TOTAL[$name]} - ${TOTAL[$one]}) / $PACKETS:+,.0f}')") | $(ratio "${TOTAL[$one]}" "${BUSY[$name]}") |"
    done
    echo
    echo "The last column is the most two threads could gain if each ran its"
    echo "instructions as fast as one thread does; the measured gain (bench/run.sh)"
    echo "is lower."
  fi
  echo
  echo "The indented rows split tcpwhy's count by stage (inclusive counts of the"
  echo "functions that begin each stage, each less the next stage inside it)."
  echo "Machine: $(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2; exit}'), $(nproc) cores; $(uname -r)."
} | tee "$RESULTS"
