"""`tcpwhy diagnose --pair`: a path with a box in the middle, captured at
both ends (tests/system/pairlab.py), each case named from the pair with its
location and the box's parameter. The truth is the configuration and, for
the proxy, the kernel's own view of its socket (ss)."""
from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path

import pytest

import pairlab
from pairlab import Case

REPO = Path(__file__).resolve().parents[2]

CASES = {
    "mss-clamp": Case("mss-clamp", middle_nft=["tcp flags syn tcp option maxseg size set 1200"]),
    "nat-port": Case("nat-port", requests=3, bytes=300_000,
                     nat_nft=['oifname "twpm1" meta l4proto tcp snat to 10.78.2.2:40000-40999']),
    "loss-between": Case("loss-between", bytes=3_000_000,
                         middle_nft=["ip saddr 10.78.2.1 tcp sport 8080 numgen random mod 1000 < 10 drop"]),
    "loss-after-client": Case("loss-after-client", bytes=3_000_000,
                              client_input_nft=["ip saddr 10.78.2.1 tcp sport 8080 numgen random mod 1000 < 10 drop"]),
    "shaper": Case("shaper", bytes=3_000_000, tbf=("20mbit", 100_000)),
    # responses that pay slow start into the same shaper with 20 ms of
    # queue: the queue builds and drains within each response
    "shaper-responses": Case("shaper-responses", requests=4, bytes=500_000, tbf=("20mbit", 50_000)),
    # seed 004's download, scaled: a far client, a proxy near the server
    # with a small send buffer towards the client and no window scaling
    # many short transfers: every connection paired, through NAT and a proxy
    "nat-many": Case("nat-many", requests=20, bytes=40_000,
                     nat_nft=['oifname "twpm1" meta l4proto tcp snat to 10.78.2.2:40000-40999']),
    "proxy-many": Case("proxy-many", requests=20, bytes=40_000, proxy_sndbuf=0),
    # a SYN proxy (nftables synproxy, as a DDoS front end or LVS runs one)
    # whose SYN-ACK offers no window scaling
    "synproxy": Case("synproxy", bytes=2_000_000, synproxy="mss 1460 sack-perm timestamp"),
    "proxy-sndbuf": Case("proxy-sndbuf", rtt_ms=150, bytes=1_000_000, proxy_sndbuf=16384,
                         middle_sysctl={"net.ipv4.tcp_window_scaling": "0"}),
}


@pytest.fixture(scope="module")
def runs(system_env, workdir):
    done = {}
    yield lambda name: done.setdefault(name, pairlab.run_case(CASES[name], workdir / "pair" / name))


def pair(tcpwhy_bin, a, b):
    p = subprocess.run([str(tcpwhy_bin), "diagnose", "--pair", "--json", str(a), str(b)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode in (0, 7), p.stderr
    return p.returncode, json.loads(p.stdout)


def the_pair(doc):
    """The pair that carried the data (the largest)."""
    pairs = doc["pair"]["pairs"]
    assert pairs, doc["pair"]["messages"]
    return max(pairs, key=lambda pc: max((sum(d["packets"]) for d in pc.get("directions", [])), default=0)
               + sum(max(x["bytes"]) for x in pc.get("proxy", [])))


def finding(pc, kind):
    return [f for f in pc["findings"] if f["kind"] == kind]


def direction(pc, who):
    return next(d for d in pc["directions"] if d["from"] == who)


def test_mss_clamp_is_named_with_its_value(runs, tcpwhy_bin):
    r = runs("mss-clamp")
    _, doc = pair(tcpwhy_bin, r.client_pcap, r.server_pcap)
    pc = the_pair(doc)
    assert pc["kind"] == "same_tuple" and pc["client_capture"] == 0
    clamps = [c for c in pc["changes"] if c["kind"] == "mss_clamped"]
    assert clamps and all("MSS 1200" in c["detail"] for c in clamps), pc["changes"]
    assert finding(pc, "mss_clamped")[0]["location"] == "middlebox"
    # each paired connection carries its pair object in the diagnosis
    assert all("pair" in c for c in doc["connections"])


def test_connections_are_matched_across_nat_with_a_port_rewrite(runs, tcpwhy_bin):
    r = runs("nat-port")
    _, doc = pair(tcpwhy_bin, r.client_pcap, r.server_pcap)
    pairs = doc["pair"]["pairs"]
    assert len(pairs) == 3 and all(p["kind"] == "translated" for p in pairs), pairs
    assert doc["pair"]["unmatched"] == [0, 0]
    for p in pairs:
        assert p["connections"][0]["client"] != p["connections"][1]["client"]
        assert "10.78.2.2:40" in p["connections"][1]["client"]


@pytest.mark.parametrize("name,kind", [("nat-many", "translated"), ("proxy-many", "proxied")])
def test_every_connection_is_paired_through_nat_and_a_proxy(runs, tcpwhy_bin, name, kind):
    r = runs(name)
    _, doc = pair(tcpwhy_bin, r.client_pcap, r.server_pcap)
    pairs = doc["pair"]["pairs"]
    assert [p["kind"] for p in pairs] == [kind] * 20, [(p["kind"], p["evidence"]) for p in pairs]
    assert doc["pair"]["unmatched"] == [0, 0]
    # one to one, each request with its own answer
    assert len({p["connections"][0]["id"] for p in pairs}) == len({p["connections"][1]["id"] for p in pairs}) == 20
    if kind == "proxied":
        for p in pairs:
            assert p["client_capture"] == 0, p["client_capture_by"]


def test_loss_between_the_points_is_placed_between(runs, tcpwhy_bin):
    r = runs("loss-between")
    _, doc = pair(tcpwhy_bin, r.client_pcap, r.server_pcap)
    pc = the_pair(doc)
    d = direction(pc, "server")
    assert d["upstream_capture"] == 1
    loss = d["loss"]
    share = loss["between"] / loss["segments"]
    assert 0.004 <= share <= 0.025, loss          # 1% configured
    assert loss["after_downstream"] <= 1 and loss["before_upstream"] == 0, loss
    assert finding(pc, "loss_between")


def test_loss_after_the_client_capture_is_placed_after_it(runs, tcpwhy_bin):
    r = runs("loss-after-client")
    _, doc = pair(tcpwhy_bin, r.client_pcap, r.server_pcap)
    pc = the_pair(doc)
    loss = direction(pc, "server")["loss"]
    assert 0.004 <= loss["after_downstream"] / loss["segments"] <= 0.025, loss
    # none between, but what the kernel or the relay dropped on the way
    # there, or a copy the client's tcpdump missed (a capture that misses
    # a copy reads as loss before it)
    allowed = r.dropped_between + r.capture_missed["client"]
    assert loss["between"] <= allowed, (loss, r.dropped_between, r.capture_missed)
    assert finding(pc, "loss_after")[0]["location"] == "after:0"


def test_a_shaper_queue_is_on_the_servers_data_between_the_points(runs, tcpwhy_bin):
    r = runs("shaper")
    _, doc = pair(tcpwhy_bin, r.client_pcap, r.server_pcap)
    pc = the_pair(doc)
    q = [f for f in finding(pc, "queue_between") if "server's" in f["text"]]
    # tbf's queue: 100 kB at 20 Mbit/s is 40 ms
    assert q and 10 <= q[0]["value"] <= 60, pc["findings"]
    # the box's parameter: the rate its queue drains at (tbf counts the IP
    # packet, the drain rate the payload: 1448 of 1500 bytes)
    rate = direction(pc, "server")["delay"]["drain_rate_bps"]
    assert abs(rate - 20e6) <= 0.25 * 20e6, rate
    assert direction(pc, "client")["delay"]["growth_p95_ms"] < 5
    # the drain rate, measured directly, is each capture's path rate for the
    # server's data: its what-if replayed with it (docs/pair.md)
    carried = pc.get("capacities", [])
    assert sorted(c["capture"] for c in carried if c["from"] == "server") == [0, 1], carried
    for c in doc["connections"]:
        for d in c["directions"]:
            if d["sender"].endswith(":8080"):
                assert (d["path_capacity"], d["path_rate_bps"]) == ("paired", rate), (c["file"], d["path_capacity"])


def test_a_queue_between_the_points_gives_each_capture_the_path_rate(runs, tcpwhy_bin):
    # slow-start responses through a 20 Mbit/s tbf: each capture alone
    # infers the rate from its trains (17 to 33 Mbit/s in trials); the pair
    # measures the queue's drain, and each capture's what-if takes it
    r = runs("shaper-responses")
    _, doc = pair(tcpwhy_bin, r.client_pcap, r.server_pcap)
    payload = 20e6 * 1448 / 1500
    pairs = [pc for pc in doc["pair"]["pairs"] if pc.get("directions")]
    assert len(pairs) >= 4, doc["pair"]["messages"]
    took = 0
    for pc in pairs:
        drain = direction(pc, "server").get("delay", {}).get("drain_rate_bps")
        if drain is None:
            continue
        assert abs(drain - payload) <= 0.25 * payload, drain
        carried = [c for c in pc.get("capacities", []) if c["from"] == "server"]
        assert sorted(c["capture"] for c in carried) == [0, 1] and all(c["source"] == "drain_between" for c in carried), pc.get("capacities")
        took += 1
    assert took >= 3, [direction(pc, "server").get("delay") for pc in pairs]
    for c in doc["connections"]:
        for d in c["directions"]:
            if d["sender"].endswith(":8080"):
                assert d["path_capacity"] == "paired", (c["file"], c["id"]["number"], d["path_capacity"])
                assert abs(d["path_rate_bps"] - payload) <= 0.25 * payload, (c["file"], d["path_rate_bps"])
                for w in d["what_if"]:
                    if w["bound"] == "path_rate" and w.get("steady_bps"):
                        assert w["steady_bps"] <= d["path_rate_bps"] * 1.001, w
    # `batch --pairs` gives each capture's direction rows the same replayed
    # what-if (read with the Python side's pyarrow, which ./run-tests
    # installs in .venv before the system tests)
    venv_python = REPO / ".venv" / "bin" / "python"
    if not venv_python.exists():
        pytest.skip("no .venv with pyarrow (./run-tests makes it)")
    out = r.client_pcap.parent / "batch"
    listing = r.client_pcap.parent / "pairs.txt"
    listing.write_text(f"{r.client_pcap}\t{r.server_pcap}\n")
    b = subprocess.run([str(tcpwhy_bin), "batch", "--pairs", str(listing), "--out", str(out)], capture_output=True, text=True,
                       timeout=300)
    assert b.returncode == 0, b.stderr
    read = subprocess.run([str(venv_python), "-c", (
        "import json, sys, pyarrow.dataset as ds; "
        "t = ds.dataset(sys.argv[1], format='parquet', partitioning='hive').to_table(); "
        "print(json.dumps([[r['file'], r['connection'], r['sender'], r['path_capacity'], r['predicted_bps']] for r in t.to_pylist()]))"),
        str(out / "directions")], capture_output=True, text=True, timeout=120)
    assert read.returncode == 0, read.stderr
    rows = json.loads(read.stdout)
    files = {str(r.client_pcap): 0, str(r.server_pcap): 1}
    want = {(c["file"], c["id"]["number"]): d for c in doc["connections"] for d in c["directions"] if d["sender"].endswith(":8080")}
    got = [(files[f], n, cap, pred) for f, n, sender, cap, pred in rows if sender.endswith(":8080")]
    assert len(got) == len(want) and got, (got, list(want))
    for f, n, cap, pred in got:
        d = want[(f, n)]
        assert cap == "paired", (f, n, cap)
        first = d["what_if"][0].get("predicted_bps") if d["what_if"] else None
        assert (pred is None and first is None) or abs(pred - first) <= 1e-6 * first, (f, n, pred, first)


def test_seed_004_proxy_send_buffer_and_window_scaling_from_the_pair(runs, tcpwhy_bin):
    r = runs("proxy-sndbuf")
    _, doc = pair(tcpwhy_bin, r.client_pcap, r.server_pcap)
    pc = the_pair(doc)
    assert pc["kind"] == "proxied" and pc["client_capture"] == 0, pc
    assert finding(pc, "proxy_held_data"), pc["findings"]
    buf = finding(pc, "proxy_send_buffer")
    assert buf, pc["findings"]
    # the kernel's own send buffer of the proxy's socket (ss: skmem tb)
    truth = statistics.median(r.proxy_sndbuf)
    assert abs(buf[0]["value"] - truth) <= 0.25 * truth, (buf[0], r.proxy_in_flight, r.proxy_sndbuf)
    assert finding(pc, "window_scaling_lost_in_middle"), pc["findings"]
    lo, hi = pc["offset_ms"]
    assert lo <= hi


def test_a_syn_proxy_that_answers_without_window_scaling(runs, tcpwhy_bin):
    r = runs("synproxy")
    _, doc = pair(tcpwhy_bin, r.client_pcap, r.server_pcap)
    pc = the_pair(doc)
    assert pc["kind"] == "syn_answered_in_middle" and pc["client_capture"] == 0, pc
    assert finding(pc, "syn_answered_in_middle")[0]["location"] == "middlebox"
    # the box's parameter: its SYN-ACK's options, and the SYN it sent on
    changes = {c["kind"]: c for c in pc["changes"]}
    assert "window_scale_refused_in_middle" in changes and "window_scale_stripped" in changes, changes
    assert all(len(c["frames"]) >= 1 for c in changes.values())
    ws = finding(pc, "window_scaling_lost_in_middle")[0]
    assert "64 KB" in ws["text"] and ws["location"] == "middlebox", ws
    # after the handshake the box splices one stream (sequence numbers and
    # timestamps translated): its segments are compared at both points
    for who in ("client", "server"):
        d = direction(pc, who)
        assert d["paired"] >= 0.95 * min(d["packets"]), d
    assert pc["offset_ms"] and pc["offset_ms"][0] <= pc["offset_ms"][1]
    # each capture alone: window scaling off, and a capture at the other
    # end named as what settles where it was lost
    for cap in (r.client_pcap, r.server_pcap):
        p = subprocess.run([str(tcpwhy_bin), "diagnose", "--json", str(cap)], capture_output=True, text=True, timeout=120)
        dg = max((d for c in json.loads(p.stdout)["connections"] for d in c["directions"]), key=lambda d: d["bytes"])
        assert dg["primary"] == "window_scaling_off", dg["primary"]
        assert any("capture at the other end" in n for n in dg["to_confirm"]), dg["to_confirm"]


def test_two_unrelated_captures_of_the_same_hosts_pair_nothing(runs, tcpwhy_bin):
    a, b = runs("loss-between"), runs("shaper")
    code, doc = pair(tcpwhy_bin, a.client_pcap, b.server_pcap)
    assert code == 7 and doc["pair"]["pairs"] == [], doc["pair"]
    assert "no connection of the first capture" in doc["pair"]["messages"][0]
