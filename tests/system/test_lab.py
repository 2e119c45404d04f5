"""The lab (`tcpwhy lab`): every built-in scenario must show its cause by the
kernel's own numbers, and the lab must clean up after itself whatever happens.

Each scenario file carries its expectations (e.g. the sender's
tcpi_rwnd_limited share of tcpi_busy_time for rwnd-rmem, policer drops and
retransmissions for policer, the tcp_probe cwnd after idle for idle-restart);
`tcpwhy lab run` exits 0 only if all of them hold. On top of that these tests
check the run's files against each other: the sender-side capture analysed by
tcpwhy carries exactly the bytes the kernel says it sent.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import time
from pathlib import Path

import pytest

import netns

REPO = Path(__file__).resolve().parents[2]


def lab_namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {l.split()[0] for l in out.splitlines() if l.startswith("tcpwhy-")}


def tracefs_instances() -> set[str]:
    for root in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        p = Path(root) / "instances"
        if p.is_dir():
            return {d.name for d in p.iterdir() if d.name.startswith("tcpwhy-")}
    return set()


def scenario_names(tcpwhy: Path) -> list[str]:
    out = subprocess.run([str(tcpwhy), "lab", "list"], capture_output=True, text=True, check=True).stdout
    return [l.split()[0] for l in out.splitlines()[1:] if l.strip()]


def _tcpwhy() -> Path:
    env = os.environ.get("TCPWHY")
    return Path(env) if env else REPO / "target" / "release" / "tcpwhy"


SCENARIOS = scenario_names(_tcpwhy()) if _tcpwhy().exists() else []


def run_lab(tcpwhy, *args, timeout=300):
    return subprocess.run([str(tcpwhy), "lab", *map(str, args)], capture_output=True, text=True, timeout=timeout)


def test_every_case_has_a_scenario(tcpwhy_bin):
    causes = set()
    for line in subprocess.run([str(tcpwhy_bin), "lab", "list"], capture_output=True, text=True).stdout.splitlines()[1:]:
        causes.add(line.split()[2])
    for c in ("receiver_window", "window_scaling_off", "send_buffer", "receiver_application", "bottleneck_link",
              "policer", "shaper", "random_loss", "slow_start", "cached_ssthresh", "sender_application",
              "delayed_ack", "spurious_retransmission"):
        assert c in causes, f"no scenario shows {c}"


# A lab run is one draw of a random experiment: where the losses fall, how
# far cwnd is cut, how the machine schedules the two stacks. When the first
# draw misses an expectation, the scenario is run to DRAWS_ON_MISS draws and
# each expectation is judged on the median of its metric over them, as
# `prove` judges a path that missed its capture (MISS_DRAWS, docs/prove.md).
# A scenario that does not show its cause misses in most draws and still
# fails. (sndbuf-wmem's send-buffer share is 0.70-0.74 in quiet runs here,
# 0.57-0.69 beside a CPU hog, and was 0.41 in one CI run: the runs with more
# loss episodes spend longer cwnd-limited after each cut.)
DRAWS_ON_MISS = 3


def judged_on_draws(tcpwhy_bin, tmp_path, scenario, first: dict) -> list[dict]:
    """The expectations that the median over DRAWS_ON_MISS draws misses."""
    metrics = [first["metrics"]]
    for k in range(1, DRAWS_ON_MISS):
        p = run_lab(tcpwhy_bin, "run", scenario, "--out", tmp_path / f"{scenario}-draw{k}", "--json")
        assert p.returncode in (0, 5), p.stderr
        metrics.append(json.loads(p.stdout)["metrics"])
    missed = []
    for c in first["expectations"]:
        values = [m[c["metric"]] for m in metrics if m.get(c["metric"]) is not None]
        v = statistics.median(values) if values else None
        ok = v is not None and (c["min"] is None or v >= c["min"]) and (c["max"] is None or v <= c["max"])
        if not ok:
            missed.append({**c, "draws": values, "median": v})
    return missed


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario_shows_its_cause(tcpwhy_bin, tmp_path, scenario):
    before = lab_namespaces()
    out = tmp_path / scenario
    p = run_lab(tcpwhy_bin, "run", scenario, "--out", out, "--json")
    assert lab_namespaces() <= before, "lab run left namespaces behind"
    assert p.returncode in (0, 5), p.stderr
    truth = json.loads(p.stdout)
    if any(not c["ok"] for c in truth["expectations"]):
        failed = judged_on_draws(tcpwhy_bin, tmp_path, scenario, truth)
        assert not failed, f"{scenario} did not show its cause in {DRAWS_ON_MISS} draws: {json.dumps(failed, indent=1)}\n{p.stderr}"
        assert lab_namespaces() <= before, "lab run left namespaces behind"
    else:
        assert p.returncode == 0
    assert truth["schema"] == "tcpwhy.lab.truth/1" and truth["scenario"] == scenario

    # everything the issue promises is there and not empty
    for f in ("client.pcap", "server.pcap", "client.samples.jsonl", "server.samples.jsonl",
              "client.sysctl.json", "server.sysctl.json", "truth.json", "link.json"):
        assert (out / f).stat().st_size > 0, f
    if truth["parameters"]["capture"]["trace"]:
        assert (out / "trace.jsonl").stat().st_size > 0
    # samples every 10-50 ms at both ends
    assert truth["metrics"]["samples.sender.count"] >= 5
    # the per-end settings really were applied in the namespaces
    params = truth["parameters"]
    for end in ("client", "server"):
        sysctl = json.loads((out / f"{end}.sysctl.json").read_text())
        for key in ("tcp_rmem", "tcp_wmem"):
            if params[end].get(key):
                assert sysctl[f"net.ipv4.{key}"] == " ".join(params[end][key].split())

    # the sender-side capture carries exactly what the kernel sent: tcpwhy's
    # analysis of the lab's capture against the kernel's own bytes_sent
    if truth["sender"] == "server" and len(truth["connections"]) == 1:
        stats = json.loads(subprocess.run([str(tcpwhy_bin), "stats", "--json", str(out / "server.pcap")],
                                          capture_output=True, text=True, check=True).stdout)
        conn = truth["connections"][0]
        kernel_sent = conn["sender_tcp_info"]["bytes_sent"]
        dirs = [d for c in stats["connections"] for d in c["directions"]
                if f"{c[d['from']]['addr']}:{c[d['from']]['port']}" == conn["server"]]
        assert dirs, f"{conn['server']} not in the capture"
        # bytes_sent counts the FIN (1 sequence number); the capture's
        # byte count is payload only
        assert dirs[0]["bytes"] in (kernel_sent, kernel_sent - 1), (dirs[0]["bytes"], kernel_sent)


def test_invalid_parameter_creates_nothing(tcpwhy_bin, tmp_path):
    before = lab_namespaces()
    for sets, needle in ((["link.down.loss=2"], "link.down.loss"),
                         (["link.rtt=fast"], "link.rtt"),
                         (["link.rtt=80"], "needs a unit"),
                         (["server.tcp_wmem=1 2"], "server.tcp_wmem"),
                         (["link.colour=red"], "colour"),
                         (["traffic.kind=teleport"], "kind"),
                         (["server.congestion=no-such-cc"], "congestion")):
        args = ["run", "rwnd-rmem", "--out", tmp_path / "x"]
        for s in sets:
            args += ["--set", s]
        p = run_lab(tcpwhy_bin, *args)
        assert p.returncode == 2, (sets, p.stderr)
        assert needle in p.stderr, (sets, p.stderr)
    assert run_lab(tcpwhy_bin, "run", "no-such-scenario", "--out", tmp_path / "y").returncode == 2
    assert lab_namespaces() == before
    assert not (tmp_path / "x").exists()


def test_concurrent_runs_do_not_collide(tcpwhy_bin, tmp_path):
    before = lab_namespaces()
    procs = [subprocess.Popen([str(tcpwhy_bin), "lab", "run", s, "--out", str(tmp_path / s), "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for s in ("delayed-ack", "rtt-jump-spurious")]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert json.loads(out)["ok"]
    assert lab_namespaces() <= before


def test_interrupt_removes_everything(tcpwhy_bin, tmp_path):
    before_ns, before_tr = lab_namespaces(), tracefs_instances()
    p = subprocess.Popen([str(tcpwhy_bin), "lab", "run", "policer", "--out", str(tmp_path / "p")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # wait until the run is in its traffic phase
    deadline = time.time() + 30
    while time.time() < deadline and not (tmp_path / "p" / "server.samples.jsonl").exists():
        time.sleep(0.05)
    assert (tmp_path / "p" / "server.samples.jsonl").exists()
    assert any(n.startswith(f"tcpwhy-{p.pid}-") for n in lab_namespaces())
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "interrupted" in err
    assert lab_namespaces() <= before_ns
    assert tracefs_instances() <= before_tr


def test_clean_removes_namespaces_of_dead_runs(tcpwhy_bin):
    # a pid that cannot be alive (above pid_max)
    name = "tcpwhy-99999999-0-client"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        p = run_lab(tcpwhy_bin, "clean")
        assert p.returncode == 0
        assert f"removed namespace {name}" in p.stdout
        assert name not in lab_namespaces()
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def test_needs_root(tcpwhy_bin, tmp_path):
    runuser = netns.ensure_tool("setpriv", None)
    if runuser is None:
        pytest.skip("setpriv not available")
    # a copy nobody can reach (the checkout may sit in a private directory)
    import shutil, tempfile
    d = Path(tempfile.mkdtemp(prefix="tcpwhy-nobody-"))
    try:
        d.chmod(0o755)
        exe = d / "tcpwhy"
        shutil.copy(tcpwhy_bin, exe)
        exe.chmod(0o755)
        p = subprocess.run([runuser, "--reuid=65534", "--regid=65534", "--clear-groups", str(exe), "lab", "run",
                            "rwnd-rmem", "--out", str(d / "out")], capture_output=True, text=True)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    assert p.returncode == 6, p.stderr
    assert "root" in p.stderr


def test_emulator_effects_reach_the_kernel(tcpwhy_bin, tmp_path):
    """Reordering, duplication and bursty loss in the emulator are seen by the
    sender's kernel: reordering detected, D-SACKs for the duplicates,
    retransmissions for the losses."""
    p = run_lab(tcpwhy_bin, "run", "healthy-link", "--out", tmp_path / "fx", "--json",
                "--set", "link.down.reorder=0.005", "--set", "link.down.duplicate=0.005",
                "--set", "link.down.loss_ge={p=0.001,r=0.5}", "--set", "traffic.duration_s=3")
    assert p.returncode in (0, 5), p.stderr
    t = json.loads(p.stdout)
    m, k = t["metrics"], t["connections"][0]["sender_tcp_info"]
    assert m["link.down.reordered"] > 0 and m["link.down.duplicated"] > 0 and m["link.down.dropped_loss"] > 0
    assert k["reord_seen"] > 0, "the kernel saw no reordering"
    assert k["dsack_dups"] > 0, "no D-SACK for duplicated segments"
    assert k["total_retrans"] > 0


def test_ipv6(tcpwhy_bin, tmp_path):
    p = run_lab(tcpwhy_bin, "run", "delayed-ack", "--set", "link.ipv6=true", "--out", tmp_path / "v6", "--json")
    assert p.returncode == 0, p.stderr
    t = json.loads(p.stdout)
    assert t["server_address"].startswith("fd00:200::"), t["server_address"]


def test_sweep_judges_each_draw_by_the_runs_own_counters(tcpwhy_bin, tmp_path):
    """`lab sweep`: two random receive-window draws run, both captures of
    each are diagnosed, and each row names what the kernel showed (the
    receive window held the sender) beside the verdict. The figures of
    real sweeps are in bench/."""
    before = lab_namespaces()
    out = tmp_path / "sweep"
    p = run_lab(tcpwhy_bin, "sweep", "--draws", "2", "--seed", "5", "--family", "receive-window", "--out", out, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = [json.loads(l) for l in (out / "draws.jsonl").read_text().splitlines()]
    assert [(r["draw"], r["capture_point"]) for r in rows] == [(0, "sender"), (0, "receiver"), (1, "sender"), (1, "receiver")]
    for r in rows:
        assert r["expected"] == ["receiver_window"], r
        assert "rwnd_limited" in r["basis"], r
        assert r["primary"] and r["right"] == (r["primary"] == "receiver_window"), r
    summary = (out / "summary.md").read_text()
    assert "| receive-window | sender |" in summary and "`high`" in summary, summary
    assert not (out / "runs").exists() or not any((out / "runs").iterdir()), "run directories are removed without --keep"
    # a row's parameters rebuild its run
    again = run_lab(tcpwhy_bin, "show", "rwnd-rmem", *sum((["--set", s] for s in rows[0]["sets"]), []))
    assert again.returncode == 0, again.stderr
    assert lab_namespaces() == before
    # a kept run judged again without the lab (no root needed, no
    # namespace): the same draw, the same expectation and verdict
    kept = tmp_path / "kept"
    p = run_lab(tcpwhy_bin, "sweep", "--draws", "1", "--seed", "5", "--family", "receive-window", "--out", kept, "--keep", timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert (kept / "runs" / "0000-receive-window" / "truth.json").is_file()
    p = subprocess.run([tcpwhy_bin, "lab", "sweep", "--rejudge", kept, "--out", tmp_path / "rejudged"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    first = [json.loads(l) for l in (kept / "draws.jsonl").read_text().splitlines()]
    again = [json.loads(l) for l in (tmp_path / "rejudged" / "draws.jsonl").read_text().splitlines()]
    key = lambda r: (r["draw"], r["capture_point"], r["sets"], r["expected"], r["basis"], r["primary"], r["confidence"], r["right"])
    assert [key(r) for r in again] == [key(r) for r in first] and len(again) == 2, (first, again)
    assert [key(r)[:4] for r in first] == [key(r)[:4] for r in rows[:2]], "the same seed draws the same parameters"
    assert "| receive-window | sender |" in (tmp_path / "rejudged" / "summary.md").read_text()
    assert lab_namespaces() == before
    # an unknown family is a usage error, before anything runs
    bad = run_lab(tcpwhy_bin, "sweep", "--draws", "1", "--family", "no-such", "--out", tmp_path / "bad")
    assert bad.returncode == 2 and "receive-window" in bad.stderr
