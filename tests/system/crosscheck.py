"""Frame-by-frame comparison of tcpwhy's analysis flags with TShark's
`tcp.analysis.*` fields. Used by test_tshark_crosscheck.py and runnable by
hand: `python3 tests/system/crosscheck.py CAPTURE...`."""

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# tcpwhy flag name -> tshark field
FLAGS = {
    "retransmission": "tcp.analysis.retransmission",
    "fast_retransmission": "tcp.analysis.fast_retransmission",
    "spurious_retransmission": "tcp.analysis.spurious_retransmission",
    "lost_segment": "tcp.analysis.lost_segment",
    "ack_unseen_segment": "tcp.analysis.ack_lost_segment",
    "out_of_order": "tcp.analysis.out_of_order",
    "duplicate_ack": "tcp.analysis.duplicate_ack",
    "zero_window": "tcp.analysis.zero_window",
    "zero_window_probe": "tcp.analysis.zero_window_probe",
    "zero_window_probe_ack": "tcp.analysis.zero_window_probe_ack",
    "window_full": "tcp.analysis.window_full",
    "window_update": "tcp.analysis.window_update",
    "keep_alive": "tcp.analysis.keep_alive",
    "keep_alive_ack": "tcp.analysis.keep_alive_ack",
}
EXTRA = ["tcp.stream", "tcp.seq_raw", "tcp.len", "tcp.srcport", "tcp.analysis.duplicate_ack_num",
         "frame.time_epoch", "tcp.analysis.initial_rtt"]


def tcpwhy_binary():
    return os.environ.get("TCPWHY", str(REPO / "target" / "release" / "tcpwhy"))


def tshark_frames(path):
    fields = list(FLAGS.values()) + EXTRA
    cmd = ["tshark", "-n", "-r", str(path), "-Y", "tcp", "-T", "fields", "-E", "occurrence=f"]
    for f in fields:
        cmd += ["-e", f]
    cmd += ["-e", "frame.number"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
    frames = {}
    for line in out.splitlines():
        cols = line.split("\t")
        if len(cols) != len(fields) + 1:
            continue
        number = int(cols[-1])
        flags = {name for name, col in zip(FLAGS, cols) if col}
        extra = dict(zip(EXTRA, cols[len(FLAGS):-1]))
        frames[number] = (flags, extra)
    return frames


def tcpwhy_frames(path):
    out = subprocess.run([tcpwhy_binary(), "packets", "--json", str(path)], capture_output=True, text=True)
    frames = {}
    for line in out.stdout.splitlines():
        o = json.loads(line)
        frames[o["frame"]] = o
    return frames


def compare(path):
    """Returns {flag: {"tshark": n, "tcpwhy": n, "only_tshark": [frames], "only_tcpwhy": [frames]}}."""
    ts = tshark_frames(path)
    tw = tcpwhy_frames(path)
    result = defaultdict(lambda: {"tshark": 0, "tcpwhy": 0, "only_tshark": [], "only_tcpwhy": []})
    for number in sorted(set(ts) | set(tw)):
        a = ts.get(number, (set(), {}))[0]
        b = set(tw[number]["flags"]) if number in tw else set()
        for flag in FLAGS:
            r = result[flag]
            r["tshark"] += flag in a
            r["tcpwhy"] += flag in b
            if flag in a and flag not in b:
                r["only_tshark"].append(number)
            elif flag in b and flag not in a:
                r["only_tcpwhy"].append(number)
    return dict(result), ts, tw


if __name__ == "__main__":
    for p in sys.argv[1:]:
        res, _, tw = compare(p)
        print(f"== {Path(p).name}")
        for flag, r in res.items():
            if r["tshark"] or r["tcpwhy"]:
                mark = "" if not (r["only_tshark"] or r["only_tcpwhy"]) else "   <-- differs"
                print(f"  {flag:26} tshark {r['tshark']:6} tcpwhy {r['tcpwhy']:6}{mark}"
                      f" only_tshark={r['only_tshark'][:8]} only_tcpwhy={r['only_tcpwhy'][:8]}")
