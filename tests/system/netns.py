"""Network-namespace plumbing for tcpwhy's kernel-oracle system tests.

Everything here runs as root and only ever talks to addresses that live inside
namespaces created by this module.  Every namespace name carries the pid of
the creating process (``twsys<pid>-<tag>``), so two concurrent runs cannot
collide, and every namespace is deleted again on teardown (context manager,
pytest fixture finalizer and an ``atexit`` hook as the last resort).

Topologies
----------
``pair``  : two namespaces, ``snd`` and ``rcv``, joined by one veth pair::

        snd [s0 10.77.1.1] ======= [d0 10.77.1.2] rcv

``routed``: a router namespace in the middle (the bottleneck lives there)::

        snd [s0 10.77.1.1] === [r0 10.77.1.254] rtr [r1 10.77.2.254] === [d0 10.77.2.1] rcv

IPv6 (ULA, ``fd00:77:<n>::/64``) can be enabled with ``ipv6=True``; the
addresses are added with ``nodad`` so they are usable at once.

Facts this module relies on (verified on the target kernel, see
``test_kernel_oracle.test_tcpdump_sees_egress_after_qdisc``):

* A packet socket (tcpdump) on an interface sees *egress* packets after the
  root qdisc has dequeued them (``dev_queue_xmit_nit`` runs in
  ``dev_hard_start_xmit``).  A packet the qdisc drops on enqueue is never seen
  by a capture on that interface.  TCP, however, has already counted it in
  ``bytes_sent``/``segs_out`` (``__tcp_transmit_skb`` counts before
  ``queue_xmit``).  Hence the bottleneck qdisc must NOT sit on the sender's
  own interface if the sender-side capture is to equal the kernel counters;
  the ``routed`` topology puts it on the router's egress towards ``rcv``.
* veth interfaces get the ``noqueue`` qdisc by default, so without a ``tc``
  qdisc there is no enqueue drop on the sender at all.
* tcpdump must run with ``--immediate-mode``: otherwise the packets of the
  last, not yet retired TPACKET_V3 block are lost when it is stopped, while
  it still reports "0 packets dropped by kernel".

All neighbour (ARP/ND) entries are static (no resolution traffic), and
``run_transfer`` can delay the handshake with a tiny token bucket on the
router; see its comments and test_kernel_oracle's docstring.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

NS_PREFIX = "twsys"

# scenario ids (the [param] of the module-scoped "transfer" fixture) that had
# a failing test; filled by conftest's report hook; their captures are kept
FAILED_SCENARIOS: set[str] = set()


def keep_captures(scenario: str) -> bool:
    return os.environ.get("TCPWHY_SYSTEST_KEEP") == "1" or scenario in FAILED_SCENARIOS

# --------------------------------------------------------------------------
# generic helpers
# --------------------------------------------------------------------------


class CommandError(RuntimeError):
    pass


def run(cmd, *, check=True, timeout=30, input=None):
    """Run a command (list) in the root namespace, return CompletedProcess."""
    proc = subprocess.run(
        [str(c) for c in cmd],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=timeout,
        input=input,
    )
    if check and proc.returncode != 0:
        raise CommandError(
            f"command failed ({proc.returncode}): {' '.join(map(str, cmd))}\n"
            f"stdout: {proc.stdout}\nstderr: {proc.stderr}"
        )
    return proc


def have_root() -> bool:
    return os.geteuid() == 0


def ensure_tool(tool: str, package: str | None = None) -> str | None:
    """Return the path of *tool*, apt-installing *package* once if missing.

    Returns None when the tool cannot be had (the caller skips)."""
    path = shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")
    if path:
        return path
    if package is None or not shutil.which("apt-get"):
        return None
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "install", "-y", "-q", package],
                ["apt-get", "update", "-q"],
                ["apt-get", "install", "-y", "-q", package]):
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=env, timeout=300)
        path = shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")
        if path:
            return path
    return None


def list_netns() -> list[str]:
    out = run(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_stale_namespaces() -> list[str]:
    """Delete namespaces of *this test suite* left behind by dead runs.

    Only names of the form ``twsys<pid>-...`` whose pid no longer exists are
    touched."""
    removed = []
    for name in list_netns():
        m = re.fullmatch(rf"{NS_PREFIX}(\d+)-\w+", name)
        if m and not _pid_alive(int(m.group(1))):
            run(["ip", "netns", "del", name], check=False)
            removed.append(name)
    return removed


# --------------------------------------------------------------------------
# namespaces
# --------------------------------------------------------------------------

_LIVE: set[str] = set()
_LIVE_PROCS: list[subprocess.Popen] = []
_LOCK = threading.Lock()


def _atexit_cleanup():
    for p in list(_LIVE_PROCS):
        with contextlib.suppress(Exception):
            if p.poll() is None:
                p.kill()
                p.wait(timeout=5)
    for name in list(_LIVE):
        subprocess.run(["ip", "netns", "del", name],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _LIVE.discard(name)


atexit.register(_atexit_cleanup)

_COUNTER = 0


def _unique_tag() -> str:
    global _COUNTER
    with _LOCK:
        _COUNTER += 1
        return f"{_COUNTER}"


class Netns:
    """One named network namespace."""

    def __init__(self, role: str, run_tag: str):
        self.role = role
        self.name = f"{NS_PREFIX}{os.getpid()}-{run_tag}{role}"
        run(["ip", "netns", "add", self.name])
        _LIVE.add(self.name)
        self.run(["ip", "link", "set", "lo", "up"])

    # -- commands --------------------------------------------------------
    def argv(self, cmd) -> list[str]:
        return ["ip", "netns", "exec", self.name, *map(str, cmd)]

    def run(self, cmd, **kw):
        return run(self.argv(cmd), **kw)

    def popen(self, cmd, **kw) -> subprocess.Popen:
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        kw.setdefault("text", True)
        kw.setdefault("preexec_fn", _die_with_parent)
        p = subprocess.Popen(self.argv(cmd), **kw)
        _LIVE_PROCS.append(p)
        return p

    def sysctl(self, key: str, value) -> None:
        self.run(["sysctl", "-q", "-w", f"{key}={value}"])

    def delete(self) -> None:
        run(["ip", "netns", "del", self.name], check=False)
        _LIVE.discard(self.name)

    def __repr__(self):
        return f"Netns({self.name})"


def _die_with_parent():
    """preexec_fn: SIGKILL the child when the test process dies, so that no
    tcpdump or peer survives a killed test run (``ip netns exec`` execs its
    command, and PR_SET_PDEATHSIG survives a non-setuid exec)."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:
        pass


def kill_proc(p: subprocess.Popen, sig=signal.SIGTERM, timeout=5.0):
    """End a process this module started (by its own pid only)."""
    if p.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            p.send_signal(sig)
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                p.kill()
            p.wait(timeout=timeout)
    with contextlib.suppress(ValueError):
        _LIVE_PROCS.remove(p)


# --------------------------------------------------------------------------
# topology
# --------------------------------------------------------------------------


@dataclass
class Endpoint:
    ns: Netns
    dev: str
    addr4: str
    addr6: str | None = None

    def addr(self, family: int = 4) -> str:
        return self.addr4 if family == 4 else self.addr6


@dataclass
class Topology:
    kind: str
    snd: Endpoint
    rcv: Endpoint
    rtr: Netns | None = None
    # router side devices: toward sender, toward receiver
    rtr_to_snd: str | None = None
    rtr_to_rcv: str | None = None
    namespaces: list[Netns] = field(default_factory=list)
    ipv6: bool = False

    # the device whose egress carries the data towards the receiver and that
    # is *not* the sender's own interface (None for the pair topology)
    @property
    def bottleneck(self) -> tuple[Netns, str]:
        if self.rtr is not None:
            return self.rtr, self.rtr_to_rcv
        return self.snd.ns, self.snd.dev

    def all_links(self):
        """(ns, dev) for every interface of the topology."""
        links = [(self.snd.ns, self.snd.dev), (self.rcv.ns, self.rcv.dev)]
        if self.rtr is not None:
            links += [(self.rtr, self.rtr_to_snd), (self.rtr, self.rtr_to_rcv)]
        return links

    def teardown(self):
        for ns in self.namespaces:
            ns.delete()


def _veth(a: Netns, adev: str, b: Netns, bdev: str):
    run(["ip", "link", "add", adev, "netns", a.name, "type", "veth",
         "peer", "name", bdev, "netns", b.name])


def _addr(ns: Netns, dev: str, cidr: str, v6=False):
    cmd = ["ip"] + (["-6"] if v6 else []) + ["addr", "add", cidr, "dev", dev]
    if v6:
        cmd.append("nodad")
    ns.run(cmd)


def make_topology(kind: str = "routed", ipv6: bool = False) -> Topology:
    """Create the namespaces and links; caller must call ``teardown()``."""
    assert kind in ("pair", "routed")
    tag = _unique_tag()
    created: list[Netns] = []
    try:
        snd = Netns("s", tag); created.append(snd)
        rcv = Netns("d", tag); created.append(rcv)
        for ns in created:
            if not ipv6:
                ns.sysctl("net.ipv6.conf.all.disable_ipv6", 1)
                ns.sysctl("net.ipv6.conf.default.disable_ipv6", 1)
        if kind == "pair":
            _veth(snd, "s0", rcv, "d0")
            topo = Topology(kind, Endpoint(snd, "s0", "10.77.1.1", "fd00:77:1::1"),
                            Endpoint(rcv, "d0", "10.77.1.2", "fd00:77:1::2"),
                            namespaces=created, ipv6=ipv6)
            _addr(snd, "s0", "10.77.1.1/24")
            _addr(rcv, "d0", "10.77.1.2/24")
            if ipv6:
                _addr(snd, "s0", "fd00:77:1::1/64", v6=True)
                _addr(rcv, "d0", "fd00:77:1::2/64", v6=True)
            for ns, dev in topo.all_links():
                ns.run(["ip", "link", "set", dev, "up"])
            _static_neighbours(topo)
            return topo

        rtr = Netns("r", tag); created.append(rtr)
        if not ipv6:
            rtr.sysctl("net.ipv6.conf.all.disable_ipv6", 1)
            rtr.sysctl("net.ipv6.conf.default.disable_ipv6", 1)
        _veth(snd, "s0", rtr, "r0")
        _veth(rtr, "r1", rcv, "d0")
        topo = Topology(kind, Endpoint(snd, "s0", "10.77.1.1", "fd00:77:1::1"),
                        Endpoint(rcv, "d0", "10.77.2.1", "fd00:77:2::1"),
                        rtr=rtr, rtr_to_snd="r0", rtr_to_rcv="r1",
                        namespaces=created, ipv6=ipv6)
        _addr(snd, "s0", "10.77.1.1/24")
        _addr(rtr, "r0", "10.77.1.254/24")
        _addr(rtr, "r1", "10.77.2.254/24")
        _addr(rcv, "d0", "10.77.2.1/24")
        if ipv6:
            _addr(snd, "s0", "fd00:77:1::1/64", v6=True)
            _addr(rtr, "r0", "fd00:77:1::fe/64", v6=True)
            _addr(rtr, "r1", "fd00:77:2::fe/64", v6=True)
            _addr(rcv, "d0", "fd00:77:2::1/64", v6=True)
        for ns, dev in topo.all_links():
            ns.run(["ip", "link", "set", dev, "up"])
        rtr.sysctl("net.ipv4.ip_forward", 1)
        snd.run(["ip", "route", "add", "default", "via", "10.77.1.254"])
        rcv.run(["ip", "route", "add", "default", "via", "10.77.2.254"])
        if ipv6:
            rtr.sysctl("net.ipv6.conf.all.forwarding", 1)
            snd.run(["ip", "-6", "route", "add", "default", "via", "fd00:77:1::fe"])
            rcv.run(["ip", "-6", "route", "add", "default", "via", "fd00:77:2::fe"])
        _static_neighbours(topo)
        return topo
    except BaseException:
        for ns in created:
            ns.delete()
        raise


def mac_of(ns: Netns, dev: str) -> str:
    import json
    return json.loads(ns.run(["ip", "-j", "link", "show", "dev", dev]).stdout)[0]["address"]


def _static_neighbours(topo: Topology) -> None:
    """Permanent ARP/ND entries on every link: no neighbour resolution
    traffic ever competes with the test's packets (which matters for the
    handshake-delay token bucket, see run_transfer)."""
    if topo.rtr is None:
        pairs = [((topo.snd.ns, topo.snd.dev), (topo.rcv.ns, topo.rcv.dev),
                  (topo.snd.addr4, topo.rcv.addr4), (topo.snd.addr6, topo.rcv.addr6))]
    else:
        pairs = [((topo.snd.ns, topo.snd.dev), (topo.rtr, topo.rtr_to_snd),
                  (topo.snd.addr4, "10.77.1.254"), (topo.snd.addr6, "fd00:77:1::fe")),
                 ((topo.rtr, topo.rtr_to_rcv), (topo.rcv.ns, topo.rcv.dev),
                  ("10.77.2.254", topo.rcv.addr4), ("fd00:77:2::fe", topo.rcv.addr6))]
    for (ans, adev), (bns, bdev), (a4, b4), (a6, b6) in pairs:
        amac, bmac = mac_of(ans, adev), mac_of(bns, bdev)
        ans.run(["ip", "neigh", "replace", b4, "lladdr", bmac, "dev", adev, "nud", "permanent"])
        bns.run(["ip", "neigh", "replace", a4, "lladdr", amac, "dev", bdev, "nud", "permanent"])
        if topo.ipv6:
            ans.run(["ip", "-6", "neigh", "replace", b6, "lladdr", bmac, "dev", adev,
                     "nud", "permanent"])
            bns.run(["ip", "-6", "neigh", "replace", a6, "lladdr", amac, "dev", bdev,
                     "nud", "permanent"])


@contextlib.contextmanager
def topology(kind: str = "routed", ipv6: bool = False):
    topo = make_topology(kind, ipv6)
    try:
        yield topo
    finally:
        topo.teardown()


# --------------------------------------------------------------------------
# link configuration
# --------------------------------------------------------------------------

OFFLOAD_FEATURES = ("tso", "gso", "gro")


def set_offloads(ns: Netns, dev: str, **features: bool) -> dict[str, str]:
    """``set_offloads(ns, "s0", tso=False, gso=False, gro=False)``.

    Uses ethtool (apt-installed if missing).  Without ethtool only TSO/GSO can
    be disabled, via ``gso_max_size``/``gso_max_segs`` (GRO on veth is off by
    default anyway).  Returns the resulting feature states as reported by
    ``ethtool -k`` (or what was requested, without ethtool)."""
    ethtool = ensure_tool("ethtool", "ethtool")
    if ethtool:
        args = []
        for k, v in features.items():
            args += [k, "on" if v else "off"]
        if args:
            ns.run([ethtool, "-K", dev, *args])
        return offload_state(ns, dev)
    # fallback: no ethtool
    if features.get("tso") is False or features.get("gso") is False:
        ns.run(["ip", "link", "set", "dev", dev, "gso_max_segs", "1"])
    if features.get("gro"):
        raise CommandError("enabling GRO needs ethtool")
    return {k: ("on" if v else "off") for k, v in features.items()}


_ETHTOOL_NAMES = {
    "tso": "tcp-segmentation-offload",
    "gso": "generic-segmentation-offload",
    "gro": "generic-receive-offload",
}


def offload_state(ns: Netns, dev: str) -> dict[str, str]:
    ethtool = ensure_tool("ethtool", "ethtool")
    if not ethtool:
        return {}
    out = ns.run([ethtool, "-k", dev]).stdout
    state = {}
    for short, long in _ETHTOOL_NAMES.items():
        m = re.search(rf"^{long}: (\w+)", out, re.M)
        if m:
            state[short] = m.group(1)
    return state


def add_tbf(ns: Netns, dev: str, rate: str, burst: str, limit: str) -> None:
    """Root tbf qdisc on *dev*'s egress, e.g. ``rate="200mbit", burst="64kb",
    limit="1mb"`` (limit = queue size in bytes; packets beyond it are tail
    dropped)."""
    ns.run(["tc", "qdisc", "replace", "dev", dev, "root", "tbf",
            "rate", rate, "burst", burst, "limit", limit])


def qdisc_stats(ns: Netns, dev: str) -> dict:
    """Root qdisc counters: sent_bytes, sent_packets, dropped, overlimits,
    requeues, and the raw ``tc -s`` text."""
    out = ns.run(["tc", "-s", "qdisc", "show", "dev", dev]).stdout
    m = re.search(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+), overlimits (\d+) "
                  r"requeues (\d+)\)", out)
    if not m:
        raise CommandError(f"cannot parse tc -s output:\n{out}")
    kind = out.split()[1] if out.split() else "?"
    bl = re.search(r"backlog (\d+)b (\d+)p", out)
    return {"kind": kind, "sent_bytes": int(m.group(1)), "sent_packets": int(m.group(2)),
            "dropped": int(m.group(3)), "overlimits": int(m.group(4)),
            "requeues": int(m.group(5)),
            "backlog_bytes": int(bl.group(1)) if bl else 0,
            "backlog_packets": int(bl.group(2)) if bl else 0, "raw": out}


def link_stats(ns: Netns, dev: str) -> dict:
    """Interface counters from ``ip -s -s link`` (rx/tx packets, bytes,
    dropped), used to diagnose veth-level drops."""
    out = ns.run(["ip", "-s", "-s", "link", "show", "dev", dev]).stdout
    res = {}
    lines = out.splitlines()
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("RX:") or s.startswith("TX:"):
            pre = s[:2].lower()
            hdr = s[3:].split()
            vals = lines[i + 1].split()
            for h, v in zip(hdr, vals):
                if v.isdigit():
                    res[f"{pre}_{h}"] = int(v)
    return res


# --------------------------------------------------------------------------
# tcpdump
# --------------------------------------------------------------------------


@dataclass
class CaptureResult:
    path: Path
    captured: int
    received_by_filter: int
    dropped_by_kernel: int
    stderr: str


class Capture:
    """tcpdump on one interface inside a namespace.

    ``tcpdump -n -i DEV -w FILE -s SNAPLEN -B 8192 -U -Z root
    --time-stamp-precision=P [-Q DIR] [FILTER]``; ``start()`` returns once tcpdump reports "listening on",
    ``stop()`` sends SIGINT, waits, and parses the three statistics lines
    tcpdump prints on exit."""

    def __init__(self, ns: Netns, dev: str, path: Path, bpf_filter: str = "tcp",
                 ts_precision: str = "micro", direction: str | None = None, snaplen: int = 0):
        self.ns, self.dev, self.path = ns, dev, Path(path)
        # 0: tcpdump's default (262144).  In immediate mode libpcap uses
        # TPACKET_V2, whose ring frames are sized by the MTU on Ethernet
        # but by the snaplen on other links (pcap-linux.c, create_ring):
        # on a TUN, -B 8192 holds 32 frames and a burst overflows it.
        # Give a TUN capture a snaplen just above its MTU.
        self.snaplen = snaplen
        self.filter = bpf_filter
        self.ts_precision = ts_precision
        self.direction = direction  # None (both), "in" or "out" (tcpdump -Q)
        self.proc: subprocess.Popen | None = None
        self._stderr: list[str] = []
        self._listening = threading.Event()
        self._reader: threading.Thread | None = None
        self.result: CaptureResult | None = None

    def start(self, timeout: float = 10.0) -> "Capture":
        tcpdump = ensure_tool("tcpdump", "tcpdump")
        if tcpdump is None:
            raise CommandError("tcpdump not available")
        cmd = [tcpdump, "-n", "-i", self.dev, "-w", str(self.path), "-s", str(self.snaplen),
               "-B", "8192", "-U", "--immediate-mode", "-Z", "root",
               f"--time-stamp-precision={self.ts_precision}"]
        if self.direction:
            cmd += ["-Q", self.direction]
        if self.filter:
            cmd.append(self.filter)
        self.proc = self.ns.popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

        def reader():
            for line in self.proc.stderr:
                self._stderr.append(line)
                if "listening on" in line:
                    self._listening.set()
            self._listening.set()

        self._reader = threading.Thread(target=reader, daemon=True)
        self._reader.start()
        if not self._listening.wait(timeout) or self.proc.poll() is not None:
            err = "".join(self._stderr)
            kill_proc(self.proc)
            raise CommandError(f"tcpdump on {self.ns.name}/{self.dev} did not start: {err}")
        return self

    def stop(self, settle: float = 0.3) -> CaptureResult:
        if self.result is not None:
            return self.result
        # give in-flight packets a moment to reach the ring buffer and file
        time.sleep(settle)
        kill_proc(self.proc, signal.SIGINT, timeout=10)
        self._reader.join(timeout=5)
        err = "".join(self._stderr)

        def stat(what):
            m = re.search(rf"(\d+) packets? {what}", err)
            if not m:
                raise CommandError(f"tcpdump did not report '{what}':\n{err}")
            return int(m.group(1))

        self.result = CaptureResult(self.path, stat("captured"),
                                    stat("received by filter"),
                                    stat("dropped by kernel"), err)
        return self.result

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        if self.proc is not None and self.result is None:
            try:
                self.stop(settle=0)
            except Exception:
                if exc[0] is None:
                    raise


# --------------------------------------------------------------------------
# ss
# --------------------------------------------------------------------------

_SS_INT = ("bytes_sent", "bytes_retrans", "bytes_acked", "bytes_received",
           "segs_out", "segs_in", "data_segs_out", "data_segs_in", "mss",
           "advmss", "rcvmss", "cwnd", "ssthresh", "pmtu", "delivered",
           "unacked", "lost", "sacked", "reordering", "notsent", "snd_wnd",
           "rcv_space", "rcv_ssthresh", "dsack_dups", "reord_seen",
           "rcv_ooopack")
_SS_FLOAT = ("rto", "ato", "minrtt", "rcv_rtt", "lastsnd", "lastrcv", "lastack")


def parse_ss_info(text: str) -> dict:
    """Parse the ``-i`` part of one ``ss -tinH`` record.

    ss omits several counters when they are zero (bytes_retrans, retrans,
    data_segs_out, ...); those default to 0 here.  ``rtt:A/B`` becomes
    ``rtt_ms``/``rttvar_ms``; ``retrans:X/Y`` becomes ``retrans``/
    ``total_retrans``."""
    res: dict = {k: 0 for k in ("bytes_sent", "bytes_retrans", "bytes_acked",
                                "bytes_received", "segs_out", "segs_in",
                                "data_segs_out", "data_segs_in", "retrans",
                                "total_retrans", "lost", "sacked", "unacked")}
    for tok in text.split():
        if ":" not in tok:
            continue
        key, _, val = tok.partition(":")
        if key == "rtt":
            a, _, b = val.partition("/")
            res["rtt_ms"], res["rttvar_ms"] = float(a), float(b)
        elif key == "retrans":
            a, _, b = val.partition("/")
            res["retrans"], res["total_retrans"] = int(a), int(b)
        elif key in _SS_INT:
            with contextlib.suppress(ValueError):
                res[key] = int(val)
        elif key in _SS_FLOAT:
            with contextlib.suppress(ValueError):
                res[key] = float(val)
    return res


def ss_connection(ns: Netns, local: tuple[str, int], remote: tuple[str, int]) -> dict:
    """``ss -tinH`` in *ns* for exactly one connection; returns parsed info
    plus the raw text.  Raises if not exactly one socket matches."""
    cmd = ["ss", "-tinH", "state", "established",
           f"( sport = :{local[1]} and dport = :{remote[1]} )"]
    out = ns.run(cmd).stdout
    # records: a line starting in column 0, continuation lines start with
    # whitespace
    records: list[str] = []
    for line in out.splitlines():
        if not line.strip():
            continue
        if line[0].isspace() and records:
            records[-1] += " " + line.strip()
        else:
            records.append(line.strip())
    want_l, want_r = _fmt_ep(local), _fmt_ep(remote)
    matching = [r for r in records if want_l in r and want_r in r]
    if len(matching) != 1:
        raise CommandError(f"expected one ss record for {want_l} -> {want_r}, got:\n{out}")
    info = parse_ss_info(matching[0])
    info["raw"] = matching[0]
    return info


def _fmt_ep(ep: tuple[str, int]) -> str:
    addr, port = ep
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


# --------------------------------------------------------------------------
# one measured transfer
# --------------------------------------------------------------------------

PEER = Path(__file__).with_name("peer.py")


class JsonLines:
    """Read JSON lines from a child's stdout with timeouts."""

    def __init__(self, proc: subprocess.Popen, label: str):
        import queue
        self.proc, self.label = proc, label
        self.q: "queue.Queue[str | None]" = queue.Queue()
        self.stderr_lines: list[str] = []

        def pump_out():
            for line in proc.stdout:
                self.q.put(line)
            self.q.put(None)

        def pump_err():
            for line in proc.stderr:
                self.stderr_lines.append(line)

        threading.Thread(target=pump_out, daemon=True).start()
        threading.Thread(target=pump_err, daemon=True).start()

    def next(self, phase: str, timeout: float) -> dict:
        import json
        import queue
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                line = self.q.get(timeout=max(left, 0.01))
            except queue.Empty:
                raise CommandError(f"{self.label}: no '{phase}' message within {timeout}s; "
                                   f"stderr: {''.join(self.stderr_lines)}")
            if line is None:
                time.sleep(0.1)
                raise CommandError(f"{self.label}: exited (rc={self.proc.poll()}) before "
                                   f"'{phase}'; stderr: {''.join(self.stderr_lines)}")
            msg = json.loads(line)
            if msg.get("phase") == "error":
                raise CommandError(f"{self.label}: {msg}")
            if msg.get("phase") == phase:
                return msg


@dataclass
class Scenario:
    """Parameters of one measured transfer (see test_kernel_oracle)."""
    name: str
    nbytes: int = 20 * 1000 * 1000
    write_size: int = 64 * 1024
    rate: str = "200mbit"
    burst: str = "64kb"
    limit: str = "1mb"          # bottleneck queue size (bytes)
    rcvbuf: int = 0             # receiver SO_RCVBUF (0: autotuning)
    cc: str = "cubic"
    family: int = 4
    port: int = 5001
    sender_offloads: dict = field(default_factory=lambda: dict(tso=False, gso=False, gro=False))
    receiver_offloads: dict = field(default_factory=lambda: dict(tso=False, gso=False, gro=False))
    router_offloads: dict = field(default_factory=lambda: dict(tso=False, gso=False, gro=False))
    ts_precision: str = "micro"
    timeout: float = 30.0
    # handshake delay (routed topology only): during the handshake the
    # bottleneck is a tbf of this rate with a bucket of handshake_burst bytes,
    # emptied by the sender right before its SYN; None disables it
    handshake_rate: str | None = "16kbit"
    handshake_burst: int = 128


@dataclass
class TransferResult:
    scenario: Scenario
    topo: Topology
    sender_pcap: Path
    receiver_pcap: Path
    sender_capture: CaptureResult
    receiver_capture: CaptureResult
    quiesced: dict          # sender's message at quiescence (tcp_info inside)
    ss: dict                # ss -tinH of the sender socket at quiescence
    sender_final: dict      # sender's tcp_info after the close handshake
    receiver_eof: dict
    receiver_final: dict
    bottleneck: dict        # tc -s qdisc of the bottleneck (data phase)
    handshake_qdisc: dict | None  # tc -s qdisc of the handshake-delay tbf
    links_before: dict
    links_after: dict
    offloads: dict
    seconds: float

    @property
    def sender_addr(self) -> tuple[str, int]:
        return tuple(self.quiesced["local"])

    @property
    def receiver_addr(self) -> tuple[str, int]:
        return tuple(self.quiesced["remote"])

    def link_delta(self, key: str) -> dict:
        out = {}
        for link, after in self.links_after.items():
            before = self.links_before.get(link, {})
            out[link] = after.get(key, 0) - before.get(key, 0)
        return out


def run_transfer(topo: Topology, scen: Scenario, workdir: Path) -> TransferResult:
    """Run one sender->receiver transfer with captures at both ends and
    collect the kernel's view (TCP_INFO at both ends, ss at the sender)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    snd, rcv = topo.snd, topo.rcv
    offl = {}
    for ns, dev in topo.all_links():
        if ns is snd.ns:
            want = scen.sender_offloads
        elif ns is rcv.ns:
            want = scen.receiver_offloads
        else:
            want = scen.router_offloads
        offl[f"{ns.role}/{dev}"] = set_offloads(ns, dev, **want)
    # congestion control is chosen per socket (peer.py --cc, TCP_CONGESTION):
    # a child netns may only default to the "allowed" algorithms
    bns, bdev = topo.bottleneck
    hs_delay = bool(scen.handshake_rate) and topo.rtr is not None
    if hs_delay:
        # Handshake delay without netem.  A token bucket of handshake_burst
        # bytes refilled at handshake_rate; the sender's drain datagram (one
        # packet of exactly handshake_burst bytes, sent right before the SYN
        # through this qdisc) empties it, so the SYN waits ~len(SYN)/rate
        # (74 B at 16 kbit/s: ~37 ms; slow enough that a sender delayed by a
        # busy machine still finds the bucket nearly empty) and the handshake's ACK, arriving right
        # after the SYN consumed the refilled tokens, waits ~len(ACK)/rate.
        # At the sender capture SYN->SYN/ACK is long and SYN/ACK->ACK short;
        # at the receiver capture the reverse.  Once the receiver accepted
        # (the handshake ACK has passed) the data-phase tbf replaces it.
        add_tbf(bns, bdev, scen.handshake_rate, f"{scen.handshake_burst}b",
                f"{4 * scen.handshake_burst}b")
    else:
        add_tbf(bns, bdev, scen.rate, scen.burst, scen.limit)
    handshake_qdisc = None

    procs: list[subprocess.Popen] = []
    caps: list[Capture] = []
    t0 = time.monotonic()
    try:
        raddr = rcv.addr(scen.family)
        rproc = rcv.ns.popen([sys.executable, PEER, "recv", "--bind", raddr,
                              "--port", scen.port, "--rcvbuf", scen.rcvbuf,
                              "--timeout", scen.timeout])
        procs.append(rproc)
        rlines = JsonLines(rproc, "receiver")
        rlines.next("listening", 10)

        flt = f"tcp port {scen.port}"
        spcap = workdir / f"{scen.name}-sender.pcap"
        dpcap = workdir / f"{scen.name}-receiver.pcap"
        caps.append(Capture(snd.ns, snd.dev, spcap, flt, scen.ts_precision).start())
        caps.append(Capture(rcv.ns, rcv.dev, dpcap, flt, scen.ts_precision).start())
        links_before = {f"{ns.role}/{dev}": link_stats(ns, dev) for ns, dev in topo.all_links()}

        scmd = [sys.executable, PEER, "send", "--connect", raddr,
                "--port", scen.port, "--bytes", scen.nbytes,
                "--write-size", scen.write_size, "--cc", scen.cc,
                "--timeout", scen.timeout]
        if hs_delay:
            scmd += ["--hold-connect", "--drain-size", scen.handshake_burst]
        sproc = snd.ns.popen(scmd, stdin=subprocess.PIPE)
        procs.append(sproc)
        slines = JsonLines(sproc, "sender")
        if hs_delay:
            slines.next("connected", 10)
            rlines.next("accepted", 10)
            handshake_qdisc = qdisc_stats(bns, bdev)
            if handshake_qdisc["backlog_packets"]:
                raise CommandError(f"handshake qdisc not empty:\n{handshake_qdisc['raw']}")
            # a fresh qdisc, so the data-phase counters start at zero
            bns.run(["tc", "qdisc", "del", "dev", bdev, "root"])
            add_tbf(bns, bdev, scen.rate, scen.burst, scen.limit)
            sproc.stdin.write("go\n")
            sproc.stdin.flush()
        quiesced = slines.next("quiesced", scen.timeout + 5)
        ss = ss_connection(snd.ns, tuple(quiesced["local"]), tuple(quiesced["remote"]))
        # second TCP_INFO-independent look is done; let the sender close
        sproc.stdin.write("go\n")
        sproc.stdin.flush()
        sender_final = slines.next("final", 10)
        receiver_eof = rlines.next("eof", 10)
        receiver_final = rlines.next("final", 10)
        for p in procs:
            p.wait(timeout=10)
        scap = caps[0].stop()
        dcap = caps[1].stop()
        links_after = {f"{ns.role}/{dev}": link_stats(ns, dev) for ns, dev in topo.all_links()}
        return TransferResult(
            scenario=scen, topo=topo, sender_pcap=spcap, receiver_pcap=dpcap,
            sender_capture=scap, receiver_capture=dcap, quiesced=quiesced, ss=ss,
            sender_final=sender_final, receiver_eof=receiver_eof,
            receiver_final=receiver_final, bottleneck=qdisc_stats(bns, bdev),
            handshake_qdisc=handshake_qdisc,
            links_before=links_before, links_after=links_after, offloads=offl,
            seconds=time.monotonic() - t0)
    finally:
        for p in procs:
            kill_proc(p, signal.SIGKILL)
        for c in caps:
            if c.result is None and c.proc is not None:
                with contextlib.suppress(Exception):
                    c.stop(settle=0)
