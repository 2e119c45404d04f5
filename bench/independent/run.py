#!/usr/bin/env python3
"""Held-out runs built outside tcpwhy's lab (issues 39, 40, 41).

tcpwhy's own lab serialises packets in its TUN link emulator and runs its
own traffic generator; rules tuned on it can fit its habits. This harness
shares none of that code:

  client ns --veth-- middle ns --TUN relay.c (delay only)-- server ns

- the delay is relay.c's (a FIFO per direction, a fixed one-way delay);
- the bottleneck is the kernel's tbf on the middle's veth towards the
  client (rate, bucket of 2 packets, a byte limit for the queue);
- a policer is nftables' `limit rate over ... burst ... drop` (a token
  bucket on bytes) in the middle's forward chain;
- random loss is nftables' `numgen random`;
- the traffic is Debian's iperf3 (-R: the server sends), the captures
  Debian's tcpdump at the client's veth and the server's TUN;
- the causes are set as a user would: sysctls per namespace, a locked
  route ssthresh, iperf3's -C.

Each case names the verdicts that are right for it, decided here before
any run. Usage (root):

  bench/independent/run.py [--out DIR] [--only NAME,...] [--repeat N]

Writes DIR/<case>/{client,server}.pcap, iperf3.json, and prints one line
per capture: the case, the capture point, tcpwhy's verdict, confidence,
congestion control, path rate, predicted rate and range, and whether the
verdict and the name are right. Results: bench/independent-results.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TCPWHY = Path(os.environ.get("TCPWHY", REPO / "target" / "release" / "tcpwhy"))
NS = ("twi-c", "twi-m", "twi-s")
C_IP, M_IP, S_IP = "10.77.1.2", "10.77.1.1", "10.77.3.2"

# name: settings. rtt ms; rate Mbit/s of the bottleneck (None: none);
# queue in BDPs of the bottleneck; police (Mbit/s, burst bytes); loss
# (share); cc; client/server sysctls; ssthresh (locked route metric at the
# server); seconds; right: the verdicts that are right; cc_truth.
CASES = {
    "rwnd": dict(rtt=40, rate=100, queue=1.0, client={"net.ipv4.tcp_rmem": "4096 131072 262144"},
                 right={"receiver_window"}),
    "rwnd-fast": dict(rtt=30, rate=None, client={"net.ipv4.tcp_rmem": "4096 131072 393216"},
                      right={"receiver_window"}),
    "sndbuf": dict(rtt=40, rate=100, queue=1.0, server={"net.ipv4.tcp_wmem": "4096 16384 98304"},
                   right={"send_buffer"}),
    "wscale": dict(rtt=40, rate=60, queue=1.0, client={"net.ipv4.tcp_window_scaling": "0"},
                   right={"window_scaling_off"}),
    # 3 s: long enough past the crawl and the flow reaches the link
    # (CUBIC from a cached ssthresh of 8 did within 8 s, at 70 of 100 Mbit/s).
    "cached": dict(rtt=40, rate=100, queue=1.0, ssthresh=8, seconds=3, right={"cached_ssthresh"}),
    "shaper": dict(rtt=30, rate=20, queue=8.0, right={"shaper"}),
    "bottleneck": dict(rtt=50, rate=50, queue=1.0, right={"bottleneck_link", "congestion_loss"}),
    "policer-20": dict(rtt=40, rate=24, queue=1.0, police=(20, 60_000), right={"policer"}),
    "policer-50": dict(rtt=40, rate=55, queue=1.0, police=(50, 400_000), right={"policer"}),
    "loss": dict(rtt=40, rate=None, loss=0.005, right={"random_loss"}),
    "bottleneck-reno": dict(rtt=60, rate=40, queue=1.0, cc="reno", right={"bottleneck_link", "congestion_loss"}),
    "bottleneck-bbr": dict(rtt=60, rate=40, queue=1.0, cc="bbr", right={"bottleneck_link", "congestion_loss"}),
    "loss-reno": dict(rtt=40, rate=None, loss=0.005, cc="reno", right={"random_loss"}),
    "loss-bbr": dict(rtt=40, rate=200, queue=1.0, loss=0.005, cc="bbr", right={"random_loss", "bottleneck_link"}),
    # Written after the rules of b5d48e9 and never tuned on: other rates,
    # buckets, link ratios, queues and RTTs.
    "policer-30": dict(rtt=60, rate=39, queue=1.0, police=(30, 150_000), right={"policer"}),
    "policer-10": dict(rtt=80, rate=11, queue=2.0, police=(10, 30_000), right={"policer"}),
    "policer-80": dict(rtt=25, rate=200, queue=1.0, police=(80, 1_000_000), right={"policer"}),
    "shaper-50": dict(rtt=50, rate=50, queue=6.0, right={"shaper"}),
    "rwnd-60": dict(rtt=60, rate=200, queue=1.0, client={"net.ipv4.tcp_rmem": "4096 131072 524288"},
                    right={"receiver_window"}),
    "sndbuf-25": dict(rtt=25, rate=None, server={"net.ipv4.tcp_wmem": "4096 16384 65536"}, right={"send_buffer"}),
    "wscale-server": dict(rtt=70, rate=None, server={"net.ipv4.tcp_window_scaling": "0"},
                          right={"window_scaling_off"}),
    "loss-1pct": dict(rtt=30, rate=None, loss=0.01, right={"random_loss"}),
    # Written after the policer's rate range (2026-12-05), never tuned on: a
    # bucket of 5 packets, far smaller than the flow's bursts.
    "policer-small": dict(rtt=40, rate=100, queue=1.0, police=(10, 7_500), right={"policer"}),
}


def sh(*cmd, check=True, ns=None, **kw):
    if ns:
        cmd = ("ip", "netns", "exec", ns) + cmd
    return subprocess.run(cmd, check=check, capture_output=True, text=True, **kw)


def clean():
    for n in NS:
        sh("ip", "netns", "del", n, check=False)


def setup(case: dict, relay: Path, work: Path):
    clean()
    for n in NS:
        sh("ip", "netns", "add", n)
        sh("ip", "link", "set", "lo", "up", ns=n)
    c, m, s = NS
    sh("ip", "link", "add", "twc0", "netns", c, "type", "veth", "peer", "name", "twm0", "netns", m)
    p = subprocess.Popen([str(relay), "twtm", "twts", str(case["rtt"] * 500)], stdout=subprocess.PIPE,
                         stderr=open(work / "relay.log", "w"), text=True)
    if p.stdout.readline().strip() != "ready":
        clean()
        sys.exit("relay did not start")
    try:
        configure(case, work)
    except BaseException:
        p.terminate()
        p.wait(timeout=10)
        clean()
        raise
    return p


def configure(case: dict, work: Path):
    """Addresses, routes, sysctls, the bottleneck, the policer and the loss."""
    c, m, s = NS
    sh("ip", "link", "set", "twtm", "netns", m)
    sh("ip", "link", "set", "twts", "netns", s)
    sh("ip", "addr", "add", f"{C_IP}/24", "dev", "twc0", ns=c)
    sh("ip", "link", "set", "twc0", "up", ns=c)
    sh("ip", "route", "add", "default", "via", M_IP, ns=c)
    sh("ip", "addr", "add", f"{M_IP}/24", "dev", "twm0", ns=m)
    sh("ip", "link", "set", "twm0", "up", ns=m)
    sh("ip", "link", "set", "twtm", "up", ns=m)
    sh("ip", "route", "add", "10.77.3.0/24", "dev", "twtm", ns=m)
    sh("sysctl", "-qw", "net.ipv4.ip_forward=1", ns=m)
    sh("ip", "addr", "add", f"{S_IP}/24", "dev", "twts", ns=s)
    sh("ip", "link", "set", "twts", "up", ns=s)
    route = ["ip", "route", "add", "default", "dev", "twts"]
    if case.get("ssthresh"):
        route += ["ssthresh", "lock", str(case["ssthresh"])]
        sh("sysctl", "-qw", "net.ipv4.tcp_no_ssthresh_metrics_save=0", ns=s)
    sh(*route, ns=s)
    # A new namespace defaults to bbr here, whose init resets a cached
    # ssthresh (bbr_init) before iperf3 sets the case's algorithm on the
    # accepted socket; reno has no init.
    sh("sysctl", "-qw", "net.ipv4.tcp_congestion_control=reno", ns=s)
    # No offloads on the veth: the client's capture shows the packets as the
    # wire carries them (tbf serialises packets, not GSO trains).
    sh("ethtool", "-K", "twm0", "tso", "off", "gso", "off", "gro", "off", check=False, ns=m)
    sh("ethtool", "-K", "twc0", "tso", "off", "gso", "off", "gro", "off", check=False, ns=c)
    for k, v in case.get("client", {}).items():
        sh("sysctl", "-qw", f"{k}={v}", ns=c)
    for k, v in case.get("server", {}).items():
        sh("sysctl", "-qw", f"{k}={v}", ns=s)
    for side, ns in (("client", c), ("server", s)):
        for k, v in case.get(side, {}).items():
            got = sh("sysctl", "-n", k, ns=ns).stdout.split()
            if got != v.split():
                raise RuntimeError(f"{side} {k} reads {got}, not {v}")
    if case.get("rate"):
        rate = case["rate"] * 1_000_000
        bdp = rate / 8 * case["rtt"] / 1000
        limit = max(int(bdp * case.get("queue", 1.0)), 3000)
        sh("tc", "qdisc", "add", "dev", "twm0", "root", "tbf", "rate", f"{case['rate']}mbit",
           "burst", "3028", "limit", str(limit), ns=m)
    rules = []
    if case.get("police"):
        mbit, burst = case["police"]
        # In packets: nft's byte-mode bucket holds a whole second of tokens
        # plus the burst (nft_limit_init: unit * (rate + burst) / rate),
        # 2.5 MB at 20 Mbit/s; the packet mode's holds `burst` packets.
        # The data packets are full-sized (1,500 bytes), so the two agree.
        pps = round(mbit * 1e6 / 8 / 1500)
        rules.append(f"ip saddr 10.77.3.0/24 limit rate over {pps}/second burst {max(burst // 1500, 1)} packets drop")
    if case.get("loss"):
        rules.append(f"ip saddr 10.77.3.0/24 numgen random mod 100000 lt {int(case['loss'] * 100000)} drop")
    if rules:
        nft = "table ip tw {\n chain pass {\n  type filter hook forward priority 0; policy accept;\n" + "".join(f"  {r}\n" for r in rules) + " }\n}\n"
        (work / "rules.nft").write_text(nft)
        sh("nft", "-f", str(work / "rules.nft"), ns=m)


def fixed_case(case: dict, fix: dict) -> dict | None:
    """The case with the diagnosis's first fix applied as a user would: its
    sysctl on the end it names, or no cached ssthresh after `ip tcp_metrics
    flush`. None for a fix that is no host setting (a path's rate)."""
    side = {"receiver": "client", "sender": "server"}.get(fix.get("on"))
    if fix.get("kind") == "flush_tcp_metrics":
        return {k: v for k, v in case.items() if k != "ssthresh"}
    for cmd in fix.get("commands", []):
        if side and cmd.startswith("sysctl -w "):
            k, v = cmd[len("sysctl -w "):].split("#")[0].strip().split("=", 1)
            new = dict(case)
            if k == "net.ipv4.tcp_congestion_control":
                # the host's default algorithm: iperf3 -C picks it here
                new["cc"] = v.strip()
                return new
            new[side] = {**case.get(side, {}), k: v.strip('"')}
            return new
    return None


def run_case(name: str, case: dict, relay: Path, out: Path, seconds: float):
    work = out / name
    work.mkdir(parents=True, exist_ok=True)
    relay_p = setup(case, relay, work)
    c, _, s = NS
    try:
        dumps = [
            subprocess.Popen(["ip", "netns", "exec", c, "tcpdump", "-i", "twc0", "-s", "160", "-B", "16384", "-w",
                              str(work / "client.pcap"), "tcp"], stderr=subprocess.DEVNULL),
            subprocess.Popen(["ip", "netns", "exec", s, "tcpdump", "-i", "twts", "-s", "160", "-B", "16384", "-w",
                              str(work / "server.pcap"), "tcp"], stderr=subprocess.DEVNULL),
        ]
        srv = subprocess.Popen(["ip", "netns", "exec", s, "iperf3", "-s", "-1", "-B", S_IP],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        if case.get("ssthresh"):
            # The kernel reads a route's ssthresh only from a tcp_metrics
            # entry, which a closed connection creates (tcp_update_metrics):
            # prime it with a short transfer first, as `ip tcp_metrics`
            # entries come to be on a real host.
            sh("iperf3", "-c", S_IP, "-R", "-n", "100K", ns=c, check=False, timeout=30)
            srv.wait(timeout=10)
            srv = subprocess.Popen(["ip", "netns", "exec", s, "iperf3", "-s", "-1", "-B", S_IP],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)
            (work / "tcp_metrics.txt").write_text(sh("ip", "tcp_metrics", "show", ns=s).stdout)
        cmd = ["iperf3", "-c", S_IP, "-R", "-J"]
        cmd += ["-n", str(case["bytes"])] if case.get("bytes") else ["-t", str(case.get("seconds", seconds))]
        # The namespace's default is not the host's (here bbr): say it.
        cmd += ["-C", case.get("cc", "cubic")]
        # What the sending socket held mid-transfer (ss's skmem: tb is its
        # send buffer), to check that the case's settings took.
        ss = subprocess.Popen(["sh", "-c", f"sleep 2; ip netns exec {s} ss -tmi state established"],
                              stdout=open(work / "ss.txt", "w"), stderr=subprocess.DEVNULL)
        r = sh(*cmd, ns=c, check=False, timeout=120)
        ss.wait(timeout=10)
        (work / "iperf3.json").write_text(r.stdout)
        srv.wait(timeout=10)
        time.sleep(0.5)
        for d in dumps:
            d.terminate()
            d.wait(timeout=10)
    finally:
        relay_p.terminate()
        relay_p.wait(timeout=10)
        clean()
    try:
        j = json.loads((work / "iperf3.json").read_text())
        return j["end"].get("sender_tcp_congestion"), j["end"]["sum_received"]["bits_per_second"]
    except (ValueError, KeyError):
        return None, None


def send_buffer_took(case: dict, work: Path) -> bool:
    """False when ss's skmem shows a socket's send buffer (tb) above the
    case's tcp_wmem maximum, or its queue (w) well above it."""
    wmem = case.get("server", {}).get("net.ipv4.tcp_wmem")
    try:
        text = (work / "ss.txt").read_text()
    except OSError:
        return True
    if not wmem:
        return True
    cap = int(wmem.split()[2])
    # skmem:(r..,rb..,t..,tb<sndbuf>,f..,w<queued>,...): the queue is held
    # to the buffer (a segment or two of slack).
    import re
    queued = [int(w) for w in re.findall(r",w(\d+),", text)]
    tbs = [int(t) for t in re.findall(r",tb(\d+),", text)]
    return all(tb <= cap for tb in tbs) and all(w <= cap + 65536 for w in queued)


def verdict(pcap: Path):
    r = subprocess.run([str(TCPWHY), "diagnose", "--json", str(pcap)], capture_output=True, text=True)
    if r.returncode not in (0,) or not r.stdout.strip():
        return None
    best = None
    for conn in json.loads(r.stdout).get("connections", []):
        for d in conn.get("directions", []):
            if best is None or d.get("bytes", 0) > best.get("bytes", 0):
                best = d
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="/tmp/independent")
    ap.add_argument("--only", default="")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--diagnose-only", action="store_true", help="diagnose the captures already in --out")
    ap.add_argument("--fix", action="store_true",
                    help="apply each capture's first fix (its sysctl) and run the same bytes again: does the prediction hold?")
    a = ap.parse_args()
    out = Path(a.out)
    relay = out / "relay"
    out.mkdir(parents=True, exist_ok=True)
    if not a.diagnose_only:
        sh("cc", "-O2", "-o", str(relay), str(HERE / "relay.c"))
    names = [n for n in CASES if not a.only or n in a.only.split(",")]
    rows = []
    for rep in range(a.repeat):
        for name in names:
            case = CASES[name]
            tag = name if a.repeat == 1 else f"{name}.{rep}"
            if a.diagnose_only:
                try:
                    j = json.loads((out / tag / "iperf3.json").read_text())
                    cc, bps = j["end"].get("sender_tcp_congestion"), j["end"]["sum_received"]["bits_per_second"]
                except (OSError, ValueError, KeyError):
                    cc, bps = None, None
            else:
                cc, bps = run_case(tag, case, relay, out, a.seconds)
                # The kernel at times lets the socket queue ten times its
                # send buffer (ss: tb 64 KiB, w 683 KiB): such a run is
                # not the case; run it again, twice at most.
                for _ in range(2):
                    if send_buffer_took(case, out / tag):
                        break
                    print(f"{tag:18} the sender queued more than the case's tcp_wmem allows (ss.txt): run again", flush=True)
                    cc, bps = run_case(tag, case, relay, out, a.seconds)
            for side in ("server", "client"):
                d = verdict(out / tag / f"{side}.pcap")
                if d is None:
                    print(f"{tag:18} {side:7} no diagnosis", flush=True)
                    continue
                name_cc = (d.get("congestion_control") or {}).get("name")
                wi = (d.get("what_if") or [{}])[0]
                row = dict(
                    case=tag, capture=side, primary=d["primary"], confidence=d["confidence"],
                    right=d["primary"] in case["right"], cc_truth=cc, cc=name_cc,
                    cc_right=None if name_cc in (None, "unknown") else name_cc == cc,
                    iperf_bps=bps, goodput_bps=d.get("goodput_bps"), path_bps=d.get("path_rate_bps"),
                    capacity=d.get("path_capacity"),
                    predicted=wi.get("predicted_bps"),
                    low=wi.get("predicted_low_bps"),
                    high=wi.get("predicted_high_bps"),
                )
                if a.fix and not a.diagnose_only and d.get("fixes"):
                    fixed = fixed_case(case, d["fixes"][0])
                    if fixed is not None:
                        fixed["bytes"] = d["bytes"]
                        _, after = run_case(f"{tag}.fixed-{side}", fixed, relay, out, a.seconds)
                        row["after_bps"] = after
                        lo, hi, pt = row["low"], row["high"], row["predicted"]
                        row["holds"] = None if after is None or pt is None else (
                            abs(after - pt) <= 0.25 * pt or (lo is not None and hi is not None and lo <= after <= hi))
                rows.append(row)
                f = lambda x: "-" if x is None else f"{x / 1e6:.1f}"
                print(f"{tag:18} {side:7} {row['primary']:20} {row['confidence']:7} {'RIGHT' if row['right'] else 'WRONG'}  "
                      f"cc {name_cc}/{cc}  path {f(row['path_bps'])} ({row['capacity']})  goodput {f(row['goodput_bps'])}  "
                      f"pred {f(row['predicted'])} [{f(row['low'])}..{f(row['high'])}]"
                      + (f"  after {f(row.get('after_bps'))} {'HOLDS' if row.get('holds') else 'MISSED'}" if "holds" in row else ""),
                      flush=True)
    (out / "rows.json").write_text(json.dumps(rows, indent=1))
    n = len(rows)
    right = sum(r["right"] for r in rows)
    high = [r for r in rows if r["confidence"] == "high"]
    named = [r for r in rows if r["cc_right"] is not None]
    print(f"verdicts right {right}/{n}; high right {sum(r['right'] for r in high)}/{len(high)}; "
          f"cc named right {sum(r['cc_right'] for r in named)}/{len(named)}, unknown {n - len(named)}/{n}")
    tried = [r for r in rows if r.get("holds") is not None]
    if tried:
        print(f"predictions hold {sum(r['holds'] for r in tried)}/{len(tried)}")


if __name__ == "__main__":
    main()
