#!/usr/bin/env python3
"""Benchmark of tcpwhy's TUN link emulator (run as root).

1. Throughput: a bulk TCP transfer through the emulator at 20 ms RTT, with
   no bottleneck (super-packets pass whole) and with a 1 Gbit/s bottleneck
   (every packet cut to 1500 bytes and serialised).
2. Delay precision at 100 Mbit/s: the sender is paced at 100 Mbit/s over a
   10 ms one-way path; for every data segment the one-way delay is taken
   from the two captures (sender-side tun, receiver-side tun, same clock)
   and compared with the configured 10 ms. The emulator's own count of how
   late it wrote each packet is reported beside it.

Usage: sudo bench/lab-link.py [--runs N]   (writes bench/lab-results.md)
"""
import json, os, platform, statistics, subprocess, sys, tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
TCPWHY = os.environ.get("TCPWHY", str(REPO / "target/release/tcpwhy"))


def lab(scenario, out, *sets):
    cmd = [TCPWHY, "lab", "run", str(BENCH / "scenarios" / scenario), "--out", str(out), "--json"]
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 5):
        sys.exit(f"{scenario}: {p.stderr}")
    return json.loads(p.stdout)


def segments(pcap):
    """(seq, len) -> first capture time, for the server's data segments."""
    out = subprocess.run([TCPWHY, "packets", "--json", str(pcap)], capture_output=True, text=True, check=True).stdout
    seen = {}
    for line in out.splitlines():
        p = json.loads(line)
        if p["from"] == "b" and p["len"] > 0:
            seen.setdefault((p["seq"], p["len"]), p["time"])
    return seen


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def main():
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 3
    subprocess.run(["cargo", "build", "--release", "--locked", "-q"], cwd=REPO, check=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tput = {}
        for sc in ("link-throughput.toml", "link-1gbit.toml"):
            vals = [lab(sc, Path(tmp) / f"{sc}-{i}")["goodput_bps"] for i in range(runs)]
            tput[sc] = vals
        errs, late = [], []
        for i in range(runs):
            out = Path(tmp) / f"prec-{i}"
            t = lab("link-precision.toml", out)
            late.append(t["link"]["down"]["lateness_p99_us"])
            snd, rcv = segments(out / "server.pcap"), segments(out / "client.pcap")
            delay = t["parameters"]["link"]["rtt"]
            for k, ts in snd.items():
                if k in rcv:
                    errs.append(abs((rcv[k] - ts) * 1e3 - 10.0))
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    lines = [
        "# Link emulator benchmark",
        "",
        f"Machine: {os.cpu_count()} cores, {cpu}, kernel {platform.release()}. "
        f"Best / median of {runs} runs; rerun with `sudo bench/lab-link.py`.",
        "",
        "| measurement | best | median | goal |",
        "|---|---|---|---|",
        f"| TCP goodput, 20 ms RTT, no bottleneck (TSO super-packets) | {max(tput['link-throughput.toml'])/1e9:.2f} Gbit/s | {statistics.median(tput['link-throughput.toml'])/1e9:.2f} Gbit/s | >= 1 Gbit/s |",
        f"| TCP goodput, 20 ms RTT, 1 Gbit/s bottleneck, 1500-byte packets | {max(tput['link-1gbit.toml'])/1e6:.0f} Mbit/s | {statistics.median(tput['link-1gbit.toml'])/1e6:.0f} Mbit/s | link filled |",
        f"| one-way delay error at 100 Mbit/s, from the captures, p50 / p99 / max | {pct(errs, .5)*1e3:.0f} / {pct(errs, .99)*1e3:.0f} / {max(errs)*1e3:.0f} us | {len(errs)} segments | p99 < 500 us |",
        f"| emulator write lateness at 100 Mbit/s, p99 (its own count) | {min(late):.0f} us | {statistics.median(late):.0f} us | |",
        "",
    ]
    text = "\n".join(lines)
    (BENCH / "lab-results.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
