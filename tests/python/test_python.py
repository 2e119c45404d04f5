"""The Python package (maturin/pyo3) and `tcpwhy batch`, checked against the
CLI on real captures: the shipped example and the shared captures.

Run by ./run-tests in its virtual environment (pyarrow, duckdb, ray). The
CLI is $TCPWHY (default target/release/tcpwhy); the shared captures are in
$TCPWHY_SHARED (default ../shared).
"""

from __future__ import annotations

import json
import lzma
import os
import re
import subprocess
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pads
import pytest

import tcpwhy

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "smtp-upload-no-window-scaling.pcap.xz"
SHARED = Path(os.environ.get("TCPWHY_SHARED", REPO.parent / "shared"))
CAPTURES = SHARED / "captures"
TCPWHY = os.environ.get("TCPWHY", str(REPO / "target" / "release" / "tcpwhy"))


def cli(*args, check=True):
    p = subprocess.run([TCPWHY, *map(str, args)], capture_output=True, text=True)
    if check:
        assert p.returncode in (0, 4), p.stderr
    return p


def cli_json(*args):
    return json.loads(cli(*args).stdout)


def test_diagnose_gives_the_cli_verdicts_as_a_table():
    t = tcpwhy.diagnose(EXAMPLE)
    assert isinstance(t, pa.Table)
    assert t.schema.equals(tcpwhy.schema("directions"))
    doc = cli_json("diagnose", "--json", EXAMPLE)
    want = sorted(
        (c["id"]["number"], d["from"], d["primary"], d["confidence"], d["bytes"])
        for c in doc["connections"]
        for d in c["directions"]
    )
    got = sorted(zip(*(t[c].to_pylist() for c in ("connection", "direction", "primary", "confidence", "bytes"))))
    assert got == want and want, (got, want)
    row = t.to_pylist()[0]
    # The client waits on the SMTP server's replies 70% of the time: the
    # reader, not the unscaled window, holds what a fix can win back.
    assert row["primary"] == "receiver_application"
    # Limits are a struct with a share per limit; fixes carry commands.
    assert abs(sum(row["limits"].values()) - 1.0) < 0.02
    assert any(f["commands"] for f in row["fixes"])
    assert row["predicted_bps"] > row["goodput_bps"] and row["predicted_gain"] > 1
    # "Is it the network?": the network holds under a tenth of the time,
    # and no prediction exceeds what the untouched time allows.
    assert row["network_share"] < 0.1 and row["most_gain"] < 1.15
    assert row["predicted_gain"] <= 1.0 / (row["limits"]["idle"] + row["limits"]["sender_application"])
    assert row["saved_s"] > 0 and "receiver_application" in row["what_if"][0]["addresses"]
    tables = tcpwhy.diagnose(EXAMPLE, tables=True)
    assert set(tables) == set(tcpwhy.TABLES)
    files = tables["files"].to_pylist()
    assert files[0]["exit_code"] == 0 and files[0]["directions"] == t.num_rows
    assert tables["errors"].num_rows == 0


def test_stats_and_packets_match_the_cli():
    s = tcpwhy.stats(EXAMPLE)
    doc = cli_json("stats", "--json", EXAMPLE)
    assert s.num_rows == len(doc["connections"])
    assert s["bytes_ab"].to_pylist() == [c["directions"][0]["bytes"] for c in doc["connections"]]
    p = tcpwhy.packets(EXAMPLE)
    lines = cli("packets", "--json", EXAMPLE).stdout.splitlines()
    assert p.num_rows == len(lines) > 1000
    first = json.loads(lines[0])
    assert p["frame"][0].as_py() == first["frame"]


def test_errors_carry_the_exit_code_and_the_part_before_the_damage(tmp_path):
    with pytest.raises(tcpwhy.UnreadableCaptureError) as e:
        tcpwhy.diagnose(tmp_path / "missing.pcap")
    assert e.value.exit_code == 3 and isinstance(e.value, OSError)
    notpcap = tmp_path / "notes.pcap"
    notpcap.write_text("not a capture\n")
    with pytest.raises(tcpwhy.UnreadableCaptureError):
        tcpwhy.stats(notpcap)
    # Cut the example in the middle of a record.
    raw = lzma.decompress(EXAMPLE.read_bytes())
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(raw[: len(raw) * 2 // 3 + 7])
    with pytest.raises(tcpwhy.TruncatedCaptureError) as e:
        tcpwhy.diagnose(cut)
    assert e.value.exit_code == 4 and e.value.kind == "truncated"
    assert isinstance(e.value.partial, pa.Table) and e.value.partial.num_rows >= 1
    with pytest.warns(tcpwhy.CaptureWarning):
        t = tcpwhy.packets(cut, errors="warn")
    assert 1000 < t.num_rows < tcpwhy.packets(EXAMPLE).num_rows
    assert tcpwhy.stats(cut, errors="ignore").num_rows >= 1
    # The CLI says the same.
    assert cli("diagnose", cut, check=False).returncode == 4
    assert cli("diagnose", notpcap, check=False).returncode == 3


def test_the_gil_is_released_while_reading():
    """Python threads run while a capture is read and diagnosed: a counter
    advances during the call (with the GIL held it could not move)."""
    counts = []
    done = threading.Event()

    def work():
        for _ in range(3):
            tcpwhy.diagnose(EXAMPLE)
            tcpwhy.packets(EXAMPLE)
        done.set()

    t = threading.Thread(target=work)
    n = 0
    t.start()
    while not done.is_set():
        n += 1
        if n % 1000 == 0:
            counts.append(n)
    t.join()
    assert n > 10_000, f"the main thread advanced only {n} times during six captures"


def read_table(root: Path, table: str) -> pa.Table:
    d = root / table
    if not d.exists():
        return tcpwhy.schema(table).empty_table()
    return pads.dataset(d, format="parquet", partitioning="hive").to_table()


def rows(t: pa.Table, drop=("elapsed_s",)):
    keep = [c for c in t.column_names if c not in drop]
    return sorted((json.dumps(r, sort_keys=True, default=str) for r in t.select(keep).to_pylist()))


INDEPENDENT = CAPTURES / "independent"


@pytest.fixture(scope="module")
def batch_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("batch") / "out"
    p = cli("batch", CAPTURES, "--out", out, "-j", "2", check=False)
    assert p.returncode in (0, 4), p.stderr
    # each independent case was captured at both ends: its pair
    pairs = out.parent / "pairs.txt"
    pairs.write_text("".join(f"{d / 'sender.pcap.xz'}\t{d / 'receiver.pcap.xz'}\n" for d in sorted(INDEPENDENT.iterdir()) if d.is_dir()))
    p = cli("batch", "--pairs", pairs, "--out", out, "-j", "2", check=False)
    assert p.returncode in (0, 4) and "0 captures read" in p.stderr, p.stderr
    return out


def test_batch_writes_every_capture_once_and_resumes(batch_out, tmp_path):
    files = read_table(batch_out, "files")
    every = sorted(str(p) for p in CAPTURES.rglob("*") if p.is_file())
    # Captures are told by content: the tcptrace .dmp.gz dumps are read too.
    captures = [p for p in every if re.search(r"\.(pcap|pcapng|cap|dmp)(\.(gz|xz|zst))?$", p)]
    assert any(p.endswith(".dmp.gz") for p in captures)
    # Every file has one row: each other file says why it was not read.
    assert sorted(files["file"].to_pylist()) == every
    skipped = {r["file"]: r["skipped"] for r in files.select(["file", "skipped"]).to_pylist() if r["skipped"] is not None}
    assert sorted(skipped) == sorted(set(every) - set(captures)), skipped
    assert all(why.startswith("not a capture: ") for why in skipped.values()), skipped
    assert len(captures) >= 100
    d = read_table(batch_out, "directions")
    assert d.schema.remove_metadata().equals(tcpwhy.schema("directions")), d.schema
    # A second run skips everything it has.
    p = cli("batch", CAPTURES, "--out", batch_out, check=False)
    assert f"0 captures read ({len(captures)} already done" in p.stderr, p.stderr
    assert read_table(batch_out, "files").num_rows == len(every)
    # An interrupted commit (a part without its files part) is removed and
    # its captures read again; a damaged capture is an error row.
    out = tmp_path / "resume"
    first = captures[:3]
    cli("batch", *first, "--out", out)
    orphan = out / "directions" / "part-0000000000000000-000000.parquet"
    orphan.write_bytes((next((out / "directions").glob("part-*.parquet"))).read_bytes())
    raw = lzma.decompress(EXAMPLE.read_bytes())
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(raw[: len(raw) // 2 + 3])
    p = cli("batch", *captures[:5], bad, tmp_path / "missing.pcap", "--out", out, check=False)
    assert p.returncode == 4, p.stderr
    assert not orphan.exists()
    f = read_table(out, "files")
    assert f.num_rows == 7 and len(set(f["file"].to_pylist())) == 7
    errors = {r["file"]: r for r in read_table(out, "errors").to_pylist()}
    assert errors[str(bad)]["kind"] == "truncated" and errors[str(bad)]["exit_code"] == 4
    assert errors[str(tmp_path / "missing.pcap")]["kind"] == "unreadable"
    # The truncated capture's good part is diagnosed.
    assert str(bad) in read_table(out, "directions")["file"].to_pylist()


def test_batch_partitions_by_date_and_python_batch_matches(batch_out, tmp_path):
    out = tmp_path / "by-date"
    r = tcpwhy.batch([CAPTURES / "public"], out, partition_by="date", jobs=2)
    assert r["files"] >= 5
    dates = sorted(p.name for p in (out / "files").iterdir())
    assert dates and all(re.fullmatch(r"date=(\d{4}-\d\d-\d\d|__HIVE_DEFAULT_PARTITION__)", d) for d in dates), dates
    t = read_table(out, "directions")
    assert "date" in t.column_names
    # The same rows as the CLI's unpartitioned batch of the same files.
    whole = read_table(batch_out, "directions")
    public = whole.filter(pa.compute.starts_with(whole["file"], str(CAPTURES / "public")))
    assert rows(t.drop_columns(["date"])) == rows(public)
    # A different layout in the same directory is refused.
    p = cli("batch", CAPTURES / "public", "--out", out, "--partition-by", "parent", check=False)
    assert p.returncode == 2 and "partitioned by 'date'" in p.stderr


def test_pair_gives_the_cli_comparison_and_batch_pairs_match(batch_out, tmp_path):
    s, r = INDEPENDENT / "random-loss" / "sender.pcap.xz", INDEPENDENT / "random-loss" / "receiver.pcap.xz"
    t = tcpwhy.pair(s, r)
    assert t.schema.equals(tcpwhy.schema("pairs"))
    want = cli_json("diagnose", "--pair", "--json", s, r)["pair"]["pairs"]
    got = t.to_pylist()
    # iperf3's control connection and its data connection
    assert len(got) == len(want) == 2, got
    for g, w in zip(got, want):
        assert (g["connection_0"], g["connection_1"]) == tuple(c["id"] for c in w["connections"])
        assert g["match_kind"] == w["kind"] == "same_tuple"
        assert g["primary"] == w["findings"][0]["kind"]
        assert [d["from"] for d in g["directions"]] == [d["from"] for d in w["directions"]]
        for gd, wd in zip(g["directions"], w["directions"]):
            loss = wd["loss"]
            assert (gd["lost_before_upstream"], gd["lost_between"], gd["lost_after_downstream"]) == (
                loss["before_upstream"], loss["between"], loss["after_downstream"])
    # 0.5% random loss on the path between the two ends
    assert any(d["lost_between"] > 0 for g in got for d in g["directions"])
    tables = tcpwhy.pair(s, r, tables=True)
    assert set(tables) == set(tcpwhy.TABLES) | {"pairs"}
    assert sorted(set(tables["directions"]["file"].to_pylist())) == sorted([str(s), str(r)])
    # Python's batch of pairs, the CLI's, and pair() give the same rows
    out = tmp_path / "py"
    res = tcpwhy.batch([], out, pairs=[(s, r)], jobs=2)
    assert (res["pairs"], res["paired_connections"], res["files"]) == (1, 2, 2), res
    assert rows(read_table(out, "pairs")) == rows(t)
    every = read_table(batch_out, "pairs")
    assert rows(every.filter(pa.compute.equal(every["file_0"], str(s)))) == rows(t)
    # every independent case's connections are matched, by their tuple
    cases = [d for d in INDEPENDENT.iterdir() if d.is_dir()]
    assert len(set(every["file_0"].to_pylist())) == len(cases)
    assert set(every["match_kind"].to_pylist()) == {"same_tuple"}
    with pytest.raises(tcpwhy.UnreadableCaptureError) as e:
        tcpwhy.pair(s, tmp_path / "missing.pcap")
    assert e.value.path == str(tmp_path / "missing.pcap")


def test_duckdb_queries_in_the_docs_run(batch_out):
    duckdb = pytest.importorskip("duckdb")
    doc = (REPO / "docs" / "batch.md").read_text()
    queries = re.findall(r"```sql\n(.*?)```", doc, re.S)
    assert len(queries) >= 3
    con = duckdb.connect()
    results = []
    for q in queries:
        q = q.replace("'results/", f"'{batch_out}/")
        results.append(con.execute(q).fetchall())
    assert all(results), "every documented query returns rows on the shared captures"
    # The first query: primaries per server; policer is among them (the
    # policing captures).
    assert any("policer" in map(str, r) for r in results[0])


def test_ray_gives_the_same_rows_as_batch(batch_out, tmp_path):
    ray = pytest.importorskip("ray")
    import tcpwhy.ray as tray

    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    try:
        paths = tray.expand(str(CAPTURES))
        assert len(paths) >= 100 and any(p.endswith(".dmp.gz") for p in paths)
        out = tmp_path / "ray"
        ds = tray.diagnose(str(CAPTURES), output=out)
        got = ds.to_arrow_refs()
        got = pa.concat_tables(ray.get(got)) if got else tcpwhy.schema("directions").empty_table()
        want = read_table(batch_out, "directions")
        assert rows(got) == rows(want)
        for table in tcpwhy.TABLES:
            written = pads.dataset(out / table, format="parquet").to_table() if (out / table).exists() else tcpwhy.schema(table).empty_table()
            assert rows(written) == rows(read_table(batch_out, table)), table
    finally:
        ray.shutdown()


def test_ray_retries_a_dead_worker_and_reads_uris(batch_out, tmp_path):
    """A worker killed mid-task (os._exit, as an OOM kill would) is rerun by
    Ray; captures given as pyarrow.fs URIs are copied to the worker and keep
    their URI in the rows."""
    ray = pytest.importorskip("ray")
    import tcpwhy.ray as tray

    marker = tmp_path / "crashed"
    os.environ["TCPWHY_RAY_CRASH_ONCE"] = str(marker)
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    try:
        public = sorted(p for p in (CAPTURES / "public").iterdir() if p.suffix in (".pcap", ".pcapng"))[:6]
        uris = [p.resolve().as_uri() for p in public]
        got = pa.concat_tables(ray.get(tray.diagnose(uris, table="files").to_arrow_refs()))
        assert marker.exists(), "no worker was killed: the test did not test retries"
        assert sorted(got["file"].to_pylist()) == sorted(uris)
        want = read_table(batch_out, "files")
        # (The batch keeps paths as given: TCPWHY_SHARED may hold "..".)
        want = {str(Path(r["file"]).resolve()): r for r in want.to_pylist()}
        for r in got.to_pylist():
            w = want[str(Path(r["file"][len("file://"):]).resolve())]
            assert (r["frames"], r["connections"], r["directions"]) == (w["frames"], w["connections"], w["directions"])
    finally:
        os.environ.pop("TCPWHY_RAY_CRASH_ONCE", None)
        ray.shutdown()
