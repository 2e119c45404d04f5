#!/usr/bin/env python3
"""Many captures: `tcpwhy batch` on one and two threads over the shared
policing captures (decompressed once, so that tcptrace reads the same files),
tcptrace and tshark over the same files in the same run, the Python call
against the CLI on one file, and peak memory over 100 and 10,000 small
captures.

Usage: bench/batch.py [--runs N] [--no-tshark]   (python3 from the repo's
.venv for the Python row: .venv/bin/python bench/batch.py)
Environment: TCPWHY (default target/release/tcpwhy), TCPWHY_SHARED (../shared).
Prints a Markdown table; bench/batch-results.md keeps a run.
"""

from __future__ import annotations

import argparse
import lzma
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TCPWHY = os.environ.get("TCPWHY", str(REPO / "target" / "release" / "tcpwhy"))
SHARED = Path(os.environ.get("TCPWHY_SHARED", REPO.parent / "shared"))


def peak_rss_kib(cmd) -> tuple[float, int]:
    """Wall time and peak RSS of one command run in a fresh child."""
    code = (
        "import resource,subprocess,sys,time;t=time.perf_counter();"
        "r=subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL);"
        "print(time.perf_counter()-t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode)"
    )
    out = subprocess.run([sys.executable, "-c", code, *map(str, cmd)], capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), int(out[1])


def best(cmd, runs, before=None):
    times, rss = [], 0
    for _ in range(runs):
        if before:
            before()
        t, r = peak_rss_kib(cmd)
        times.append(t)
        rss = max(rss, r)
    return min(times), rss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-tshark", action="store_true")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tcpwhy-bench-batch-"))
    rows = []
    try:
        src = sorted((SHARED / "captures" / "policing-lab").glob("*.pcap.xz"))
        caps = work / "caps"
        caps.mkdir()
        for p in src:
            (caps / p.name[:-3]).write_bytes(lzma.decompress(p.read_bytes()))
        files = sorted(caps.iterdir())
        size = sum(f.stat().st_size for f in files)
        out = work / "out"
        clean = lambda: shutil.rmtree(out, ignore_errors=True)  # noqa: E731
        t1, m1 = best([TCPWHY, "batch", caps, "--out", out, "-j", "1", "--no-progress"], a.runs, clean)
        t2, m2 = best([TCPWHY, "batch", caps, "--out", out, "-j", "2", "--no-progress"], a.runs, clean)
        rows.append((f"tcpwhy batch -j 1 ({len(files)} captures, {size / 2**20:.0f} MiB)", t1, m1))
        rows.append(("tcpwhy batch -j 2", t2, m2))
        if shutil.which("tcptrace"):
            script = work / "tcptrace.sh"
            script.write_text(f'for f in "{caps}"/*; do tcptrace -l -r "$f" >/dev/null 2>&1; done\n')
            rows.append(("tcptrace -l -r, file after file", *best(["bash", script], a.runs)))
        if shutil.which("tshark") and not a.no_tshark:
            script = work / "tshark.sh"
            script.write_text(f'for f in "{caps}"/*; do tshark -r "$f" -q -z conv,tcp >/dev/null 2>&1; done\n')
            rows.append(("tshark -q -z conv,tcp, file after file", *best(["bash", script], 1)))
        # The Python call against the CLI on the largest capture.
        big = max(files, key=lambda f: f.stat().st_size)
        cli_t, _ = best([TCPWHY, "diagnose", "--json", "--no-progress", big], a.runs)
        rows.append((f"tcpwhy diagnose --json, one capture ({big.stat().st_size / 2**20:.1f} MiB)", cli_t, 0))
        try:
            import tcpwhy

            tcpwhy.diagnose(big)
            py_t = min(_timed(lambda: tcpwhy.diagnose(big)) for _ in range(a.runs))
            rows.append(("tcpwhy.diagnose(path) in Python, same capture", py_t, 0))
        except ImportError:
            print("(tcpwhy not importable: run with .venv/bin/python for the Python row)", file=sys.stderr)
        # Memory against the number of files: hard links of one small capture.
        small = min((f for f in files if f.stat().st_size > 50_000), key=lambda f: f.stat().st_size)
        for n in (100, 10_000):
            d = work / f"small-{n}"
            d.mkdir()
            for i in range(n):
                os.link(small, d / f"c{i:05d}.pcap")
            t, m = best([TCPWHY, "batch", d, "--out", work / f"out-{n}", "-j", "2", "--no-progress"], 1)
            rows.append((f"tcpwhy batch -j 2, {n} small captures ({small.stat().st_size // 1024} KiB each)", t, m))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    print(f"Machine: {cpu}, {os.cpu_count()} cores, Linux {platform.release()}, {time.strftime('%Y-%m-%d')}\n")
    print("| command | best wall time | peak RSS |")
    print("|---|---|---|")
    for name, t, m in rows:
        print(f"| {name} | {t:.2f} s | {f'{m / 1024:.0f} MiB' if m else ''} |")
    d = {r[0]: r[1] for r in rows}
    print(f"\nbatch -j 2 speed-up over -j 1: {t1 / t2:.2f}x")
    tt = next((v for k, v in d.items() if k.startswith("tcptrace")), None)
    if tt:
        print(f"tcptrace file after file / batch -j 1: {tt / t1:.2f}x; / batch -j 2: {tt / t2:.2f}x")
    py = d.get("tcpwhy.diagnose(path) in Python, same capture")
    if py:
        print(f"Python / CLI on one capture: {py / cli_t:.2f}x")


def _timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
