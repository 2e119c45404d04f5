"""A path with a middle, captured at both ends (tests/system/test_pair.py).

  client ns --TUN relay (one-way delay, bench/independent/relay.c)-- middle ns --veth-- server ns

The middle namespace is the box between the two capture points: it
forwards (or NATs, or clamps the MSS, or drops at random, or shapes with
tbf, with nftables and tc as an operator would), or runs a terminating
proxy (tests/system/pair_agents.py). tcpdump captures at the client's TUN
and at the server's veth: the two points `tcpwhy diagnose --pair` compares.
Nothing here is tcpwhy's lab or link emulator.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import netns

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RELAY_C = REPO / "bench" / "independent" / "relay.c"
AGENTS = HERE / "pair_agents.py"

CLIENT_IP, MIDDLE_C_IP = "10.78.1.1", "10.78.1.2"
MIDDLE_S_IP, SERVER_IP = "10.78.2.2", "10.78.2.1"
PORT = 8080


@dataclass
class Case:
    name: str
    rtt_ms: int = 40
    requests: int = 1
    bytes: int = 2_000_000
    middle_nft: list[str] = field(default_factory=list)   # forward-chain rules
    nat_nft: list[str] = field(default_factory=list)      # postrouting rules
    client_input_nft: list[str] = field(default_factory=list)
    tbf: tuple[str, int] | None = None                    # (rate, limit bytes) towards the client
    proxy_sndbuf: int | None = None                       # a proxy in the middle (0: default buffer)
    middle_sysctl: dict[str, str] = field(default_factory=dict)
    # nftables synproxy in the middle (its SYN-ACK's options, e.g.
    # "mss 1460 sack-perm timestamp": no wscale): the box answers the SYN
    synproxy: str | None = None


@dataclass
class Run:
    client_pcap: Path
    server_pcap: Path
    received: int
    # the proxy's client-facing socket, sampled by ss mid-transfer
    proxy_in_flight: list[int] = field(default_factory=list)
    proxy_sndbuf: list[int] = field(default_factory=list)
    # packets towards the client that the kernel dropped between the two
    # capture points (not by the case's own rules): the middle's veth in,
    # its TUN out (the relay not reading fast enough on a busy machine),
    # the client's TUN in; and the relay's own queue towards the client
    dropped_between: int = 0
    # frames tcpdump itself missed ("dropped by kernel"), per capture
    capture_missed: dict[str, int] = field(default_factory=dict)


def _dropped(ns: netns.Netns, dev: str, way: str) -> int:
    out = ns.run(["ip", "-s", "-j", "link", "show", dev], check=False).stdout
    try:
        return int(json.loads(out)[0]["stats64"][way]["dropped"])
    except (ValueError, LookupError):
        return 0


def _relay_dropped(stderr: str) -> tuple[int, int]:
    """What relay.c dropped on its full queues: (towards the middle, towards the client)."""
    m = re.search(r"relay: dropped (\d+) and (\d+)", stderr)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def build_relay(work: Path) -> Path:
    out = work / "relay"
    if not out.exists():
        subprocess.run(["cc", "-O2", "-o", str(out), str(RELAY_C)], check=True)
    return out


def _nft(ns: netns.Netns, work: Path, name: str, chains: str) -> None:
    f = work / f"{name}.nft"
    f.write_text(chains)
    ns.run(["nft", "-f", str(f)])


def _ss_samples(middle: netns.Netns, stop: float, run: Run) -> None:
    """The proxy's socket towards the client: bytes in flight (unacked x mss)
    and its send buffer (skmem tb), every 200 ms."""
    while time.time() < stop:
        out = middle.run(["ss", "-tmi", "state", "established", "dst", CLIENT_IP], check=False).stdout
        for m in re.finditer(r"skmem:\(([^)]*)\).*?mss:(\d+).*?unacked:(\d+)", out, re.S):
            tb = re.search(r"tb(\d+)", m.group(1))
            run.proxy_in_flight.append(int(m.group(2)) * int(m.group(3)))
            if tb:
                run.proxy_sndbuf.append(int(tb.group(1)))
        time.sleep(0.2)


def run_case(case: Case, work: Path) -> Run:
    work.mkdir(parents=True, exist_ok=True)
    relay = build_relay(work.parent)
    tag = netns._unique_tag()
    c, m, s = (netns.Netns(r, f"p{tag}") for r in ("c", "m", "s"))
    procs: list[subprocess.Popen] = []
    try:
        rp = subprocess.Popen([str(relay), "twpc", "twpm", str(case.rtt_ms * 500)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, preexec_fn=netns._die_with_parent)
        procs.append(rp)
        if rp.stdout.readline().strip() != "ready":
            raise RuntimeError("relay did not start")
        netns.run(["ip", "link", "set", "twpc", "netns", c.name])
        netns.run(["ip", "link", "set", "twpm", "netns", m.name])
        netns._veth(m, "twpm1", s, "twps")
        for ns, dev, ip in ((c, "twpc", CLIENT_IP), (m, "twpm", MIDDLE_C_IP), (m, "twpm1", MIDDLE_S_IP), (s, "twps", SERVER_IP)):
            netns._addr(ns, dev, f"{ip}/24")
            ns.run(["ip", "link", "set", dev, "up"])
        c.run(["ip", "route", "add", "default", "dev", "twpc"])
        s.run(["ip", "route", "add", "default", "via", MIDDLE_S_IP])
        m.sysctl("net.ipv4.ip_forward", 1)
        for k, v in case.middle_sysctl.items():
            m.sysctl(k, v)
        for ns, dev in ((m, "twpm1"), (s, "twps")):
            ns.run(["ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off"], check=False)
        if case.synproxy is not None:
            # as nftables' wiki and iptables-extensions(8) SYNPROXY set it up:
            # SYNs untracked, the handshake answered by the box, conntrack
            # strict so that the client's ACK reaches synproxy
            _nft(m, work, "synproxy", "table ip twsyn {\n"
                 " chain untrack {\n  type filter hook prerouting priority raw; policy accept;\n"
                 f"  iifname \"twpm\" tcp dport {PORT} tcp flags syn notrack\n }}\n"
                 " chain answer {\n  type filter hook forward priority filter; policy accept;\n"
                 f"  iifname \"twpm\" tcp dport {PORT} ct state invalid,untracked synproxy {case.synproxy}\n"
                 "  ct state invalid drop\n }\n}\n")
            m.sysctl("net.netfilter.nf_conntrack_tcp_loose", 0)
        if case.middle_nft or case.nat_nft:
            chains = "table ip twpair {\n"
            if case.middle_nft:
                chains += " chain pass {\n  type filter hook forward priority 0; policy accept;\n" + "".join(f"  {r}\n" for r in case.middle_nft) + " }\n"
            if case.nat_nft:
                chains += " chain natout {\n  type nat hook postrouting priority 100; policy accept;\n" + "".join(f"  {r}\n" for r in case.nat_nft) + " }\n"
            _nft(m, work, "middle", chains + "}\n")
        if case.client_input_nft:
            _nft(c, work, "client", "table ip twpair {\n chain inpass {\n  type filter hook input priority 0; policy accept;\n"
                 + "".join(f"  {r}\n" for r in case.client_input_nft) + " }\n}\n")
        if case.tbf:
            rate, limit = case.tbf
            m.run(["tc", "qdisc", "add", "dev", "twpm", "root", "tbf", "rate", rate, "burst", "3028", "limit", str(limit)])
        # the TUN's MTU is 1500: a snaplen above it keeps libpcap's ring at
        # 8 MiB / 2 KiB frames instead of 32 frames (netns.Capture)
        caps = [netns.Capture(c, "twpc", work / "client.pcap", snaplen=2048).start(),
                netns.Capture(s, "twps", work / "server.pcap").start()]
        srv = s.popen([sys.executable, AGENTS, "server", SERVER_IP, PORT, case.bytes])
        procs.append(srv)
        assert srv.stdout.readline().strip() == "ready"
        target = SERVER_IP
        if case.proxy_sndbuf is not None:
            px = m.popen([sys.executable, AGENTS, "proxy", MIDDLE_C_IP, PORT, SERVER_IP, PORT, case.proxy_sndbuf])
            procs.append(px)
            assert px.stdout.readline().strip() == "ready"
            target = MIDDLE_C_IP
        run = Run(work / "client.pcap", work / "server.pcap", 0)
        cl = c.popen([sys.executable, AGENTS, "client", target, PORT, case.requests])
        procs.append(cl)
        if case.proxy_sndbuf is not None:
            _ss_samples(m, time.time() + 1.5, run)
        out, err = cl.communicate(timeout=120)
        if cl.returncode != 0:
            raise RuntimeError(f"client failed: {err}")
        run.received = int(out.strip() or 0)
        for where, cap in zip(("client", "server"), caps):
            run.capture_missed[where] = cap.stop().dropped_by_kernel
        run.dropped_between = _dropped(m, "twpm1", "rx") + _dropped(m, "twpm", "tx") + _dropped(c, "twpc", "rx")
        netns.kill_proc(rp)
        run.dropped_between += _relay_dropped(rp.stderr.read())[1]
        return run
    finally:
        for p in procs:
            netns.kill_proc(p)
        for ns in (c, m, s):
            ns.delete()
