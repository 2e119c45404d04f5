"""tcpwhy's per-segment analysis flags against TShark's tcp.analysis.* on
every shared capture (../shared/captures/public, and a sample of the
policing-lab captures).

Counts per flag must agree frame by frame. The one class of disagreement
allowed is Wireshark's known error (docs/flags.md): it decides
"out-of-order" vs "retransmission" by a timer (handshake RTT, or 3 ms), so
it calls a quick retransmission out-of-order and a late reordered segment a
retransmission. tcpwhy decides by whether the bytes were seen before. Each
such frame is checked here from TShark's own per-frame sequence numbers: a
frame tcpwhy calls a retransmission must overlap bytes an earlier frame of
the same direction carried; one it calls out-of-order must not.
"""

import lzma
import os
import shutil
from pathlib import Path

import pytest

from crosscheck import FLAGS, compare, tcpwhy_binary

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("TCPWHY_SHARED", REPO.parent / "shared"))
PUBLIC = sorted(p for p in (SHARED / "captures" / "public").iterdir() if p.name != "SOURCES.md")
POLICING = sorted((SHARED / "captures" / "policing-lab").glob("*.pcap.xz"))[:6]

pytestmark = [
    pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark missing (./run-tests installs it)"),
    pytest.mark.skipif(not Path(tcpwhy_binary()).exists(), reason="build tcpwhy first (cargo build --release)"),
]


def previously_seen(ts_frames, wanted):
    """For each frame in `wanted`: how many of its bytes earlier frames of the
    same stream and direction carried, and how long ago the sequence space
    first moved past its start (the age of the hole it fills), from TShark's
    own tcp.seq_raw / tcp.len / frame.time_epoch. One pass per direction with
    unwrapped offsets and merged intervals."""
    base, last, seen, result, passed = {}, {}, {}, {}, {}
    for n in sorted(ts_frames):
        e = ts_frames[n][1]
        if not e["tcp.len"] or not e["tcp.seq_raw"]:
            continue
        key = (e["tcp.stream"], e["tcp.srcport"])
        raw, length = int(e["tcp.seq_raw"]), int(e["tcp.len"])
        now = float(e["frame.time_epoch"])
        if key not in base:
            base[key], last[key], seen[key], passed[key] = raw, 0, [], []
        # Unwrap relative to the previous offset of this direction (mod 2^32).
        off = last[key] + ((raw - (base[key] + last[key])) + 2**31) % 2**32 - 2**31
        ivs = seen[key]
        if n in wanted:
            overlap = sum(max(0, min(off + length, hi) - max(off, lo)) for lo, hi in ivs)
            since = next((t for high, t in passed[key] if high > off), None)
            result[n] = (overlap, None if since is None else now - since)
        if off + length > last[key]:
            passed[key].append((off + length, now))
        last[key] = max(last[key], off)
        # Insert [off, off+length) keeping the list merged.
        lo, hi, out = off, off + length, []
        for a, b in ivs:
            if b < lo or a > hi:
                out.append((a, b))
            else:
                lo, hi = min(lo, a), max(hi, b)
        out.append((lo, hi))
        out.sort()
        seen[key] = out
    return result


def check(path):
    result, ts_frames, tw_frames = compare(path)
    assert ts_frames, f"tshark read nothing from {path}"
    assert tw_frames, f"tcpwhy read nothing from {path}"
    assert set(ts_frames) == set(tw_frames), "both see the same TCP frames"
    differing = sorted({f for r in result.values() for f in r["only_tcpwhy"] + r["only_tshark"]})
    seen_bytes = previously_seen(ts_frames, set(differing))
    for frame in differing:
        ws = ts_frames[frame][0]
        tw = set(tw_frames[frame]["flags"])
        assert "reclassified_vs_wireshark" in tw, (
            f"{path.name} frame {frame} differs (tshark {sorted(ws)}, tcpwhy {sorted(tw)})")
        seen, hole_age = seen_bytes.get(frame, (0, None))
        irtt = ts_frames[frame][1]["tcp.analysis.initial_rtt"]
        # tcpwhy's line: half the iRTT (REORDER_MAX_RTT_SHARE in
        # crates/flow/src/conn.rs); Wireshark's is the iRTT itself
        threshold = float(irtt) * 0.5 if irtt and float(irtt) > 0 else 0.003
        if "retransmission" in tw:
            assert "out_of_order" in ws or "retransmission" in ws
            # Either the bytes had been sent before, or they fill a hole older
            # than the threshold: the original was lost before the capture
            # point and this is its retransmission.
            assert seen > 0 or (hole_age is not None and hole_age >= threshold), (
                f"frame {frame}: tcpwhy says retransmission, bytes unseen, hole age {hole_age}")
        else:
            # Never seen, and the hole is younger than the threshold (Wireshark
            # measured from a later timestamp, or the segment ends at nextseq).
            assert "out_of_order" in tw and "retransmission" in ws
            assert seen == 0, f"frame {frame}: tcpwhy says out-of-order but its bytes were seen before"
            assert hole_age is not None and hole_age < threshold, f"frame {frame}: hole age {hole_age}"
    return result, len(differing)


@pytest.mark.parametrize("capture", PUBLIC, ids=lambda p: p.name)
def test_public_capture_flags_match_tshark(capture):
    check(capture)


@pytest.mark.parametrize("capture", POLICING, ids=lambda p: p.name[:60])
def test_policing_lab_flags_match_tshark(capture, tmp_path):
    plain = tmp_path / capture.name.removesuffix(".xz")
    plain.write_bytes(lzma.decompress(capture.read_bytes()))
    check(plain)


def test_wireshark_out_of_order_error_is_real_and_counted():
    """The lossy M-Lab download: Wireshark calls 4,044 segments out-of-order.
    Captured at the sender, which never reorders its own segments: all but a
    few had been sent before, so they are retransmissions. The few the other
    way fill holes the capture missed moments earlier (reordered)."""
    capture = SHARED / "captures" / "public" / "m-lab-etl__ndt-m6znc_1632401351_000000000005BA77.pcap.gz"
    result, explained = check(capture)
    r, o = result["retransmission"], result["out_of_order"]
    assert o["tshark"] == 4044 and r["tshark"] == 221
    to_retrans = set(r["only_tcpwhy"])
    to_ooo = set(o["only_tcpwhy"])
    assert to_retrans == set(o["only_tshark"]) and to_ooo == set(r["only_tshark"])
    assert len(to_retrans) > 4000 and len(to_ooo) < 50
    assert explained == len(to_retrans) + len(to_ooo)
    assert r["tcpwhy"] == r["tshark"] + len(to_retrans) - len(to_ooo)
