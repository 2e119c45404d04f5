"""The HTML report in a real browser (headless Chromium over the DevTools
protocol, tests/system/cdp.py): plots render, no console errors or CSP
violations, drag-zoom moves every plot of the connection, screenshots land
in target/report-screenshots/; and a capture whose payloads and file name
carry <script> / onerror markup shows it as text and runs nothing.

Needs Debian's chromium (./run-tests installs it as root); skipped without.
"""

from __future__ import annotations

import os
import struct
import subprocess
from pathlib import Path

import pytest

from cdp import Browser, find_chromium

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "target" / "report-screenshots"


def tcpwhy() -> str:
    return os.environ.get("TCPWHY", str(REPO / "target" / "release" / "tcpwhy"))


pytestmark = [
    pytest.mark.skipif(find_chromium() is None,
                       reason="chromium not installed (./run-tests installs the Debian package when run as root)"),
    pytest.mark.skipif(not Path(tcpwhy()).exists(), reason="build tcpwhy first (cargo build --release)"),
]


@pytest.fixture
def browser():
    b = Browser(find_chromium())
    yield b
    b.close()


def shared_capture() -> Path | None:
    shared = Path(os.environ.get("TCPWHY_SHARED", REPO.parent / "shared"))
    d = shared / "captures" / "policing-lab"
    if not d.is_dir():
        return None
    # A lossy transfer: retransmissions, SACK and several limit states.
    for p in sorted(d.glob("*PCIR=500000-RTT=100*XT=1*.pcap.xz")):
        return p
    return None


def report(tmp_path: Path, *captures: Path, name: str = "report.html") -> Path:
    out = tmp_path / name
    r = subprocess.run([tcpwhy(), "report", *map(str, captures), "-o", str(out), "--no-progress"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


# Counts pixels of a canvas that are neither white nor transparent nor grey
# (axes, grid and text are grey/black): the data drawn in colour.
COLOURED = """
(sel) => Array.from(document.querySelectorAll(sel)).map((c) => {
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) {
    const r = d[i], g = d[i+1], b = d[i+2], a = d[i+3];
    if (a > 0 && Math.max(r, g, b) - Math.min(r, g, b) > 40) n++;
  }
  return n;
})
"""


def open_report(b: Browser, path: Path):
    b.open_page(path.resolve().as_uri())
    assert b.wait_for("window.tcpwhy && window.tcpwhy.ready === true", 90), "page never became ready"
    assert b.eval("JSON.stringify(window.tcpwhy.errors)") == "[]"


def test_report_renders_zooms_and_has_no_console_errors(tmp_path, browser):
    cap = shared_capture() or sorted((REPO / "examples").glob("*.pcap.xz"))[0]
    html = report(tmp_path, cap)
    text = html.read_text()
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    b = browser
    open_report(b, html)
    SHOTS.mkdir(parents=True, exist_ok=True)
    b.screenshot(SHOTS / "report.png")
    # Five linked panels for the first direction, each with coloured data.
    panels = ["tsg", "window", "rtt", "rate", "band"]
    for p in panels:
        px = b.eval(f"({COLOURED})('details.conn[open] .panel-{p} canvas')")
        assert px and px[0] > 200, f"panel {p} looks blank: {px}"
    # Drag across the middle of the time-sequence plot: all panels zoom together.
    before = b.eval("window.tcpwhy.plots[0].map(u => [u.scales.x.min, u.scales.x.max])")
    y_before = b.eval("[window.tcpwhy.plots[0][0].scales.y.min, window.tcpwhy.plots[0][0].scales.y.max]")
    b.eval("document.querySelector('details.conn[open] .panel-tsg').scrollIntoView()")
    b.pump(0.3)
    rect = b.eval("(() => { const r = document.querySelector('details.conn[open] .panel-tsg .u-over').getBoundingClientRect();"
                  " return [r.left, r.top, r.width, r.height]; })()")
    x, y, w, h = rect
    b.drag(x + w * 0.40, y + h * 0.5, x + w * 0.45)
    b.pump(0.5)
    after = b.eval("window.tcpwhy.plots[0].map(u => [u.scales.x.min, u.scales.x.max])")
    span0 = before[0][1] - before[0][0]
    span1 = after[0][1] - after[0][0]
    assert 0 < span1 < span0 * 0.2, (before, after)
    assert all(abs(a[0] - after[0][0]) < 1e-9 and abs(a[1] - after[0][1]) < 1e-9 for a in after), after
    # The sequence axis follows the zoom (y fitted to the visible data).
    y_after = b.eval("[window.tcpwhy.plots[0][0].scales.y.min, window.tcpwhy.plots[0][0].scales.y.max]")
    assert y_after[1] - y_after[0] < (y_before[1] - y_before[0]) * 0.5, (y_before, y_after)
    # Zoomed in, the data is still drawn (full resolution for the range).
    for p in ("tsg", "window"):
        px = b.eval(f"({COLOURED})('details.conn[open] .panel-{p} canvas')")
        assert px[0] > 50, f"panel {p} blank after zoom: {px}"
    b.screenshot(SHOTS / "report-zoomed.png")
    # Sorting the overview by bytes (click) keeps every row.
    rows = b.eval("document.querySelectorAll('table.overview tbody tr').length")
    b.eval("document.querySelectorAll('table.overview th')[5].click()")
    assert b.eval("document.querySelectorAll('table.overview tbody tr').length") == rows
    # A link in the overview opens that connection's section and draws its plots.
    closed = b.eval("(() => { const d = document.querySelector('details.conn[data-data]:not([open])'); return d ? d.id : null; })()")
    if closed:
        built = b.eval("window.tcpwhy.built")
        b.eval(f"document.querySelector('a[href=\"#{closed}\"]').click()")
        assert b.wait_for(f"document.getElementById('{closed}').open && window.tcpwhy.built > {built}", 30)
    # The page's decimation keeps the exact min and max of every column.
    ok = b.eval("""(() => {
      const n = 200000, xs = new Float64Array(n), ys = new Float64Array(n);
      let s = 1; const rnd = () => (s = (s * 48271) % 2147483647) / 2147483647;
      for (let i = 0; i < n; i++) { xs[i] = i / n; ys[i] = Math.sin(i / 50) * 1e6 + rnd() * 1e3; }
      const B = 300, keep = window.tcpwhy.decimate(xs, ys, 0, 1, B);
      const col = (x) => Math.min(B - 1, Math.floor(x * B));
      const all = [], kept = [];
      for (let i = 0; i < n; i++) { const c = col(xs[i]); all[c] = all[c] || [Infinity, -Infinity];
        all[c][0] = Math.min(all[c][0], ys[i]); all[c][1] = Math.max(all[c][1], ys[i]); }
      for (const i of keep) { const c = col(xs[i]); kept[c] = kept[c] || [Infinity, -Infinity];
        kept[c][0] = Math.min(kept[c][0], ys[i]); kept[c][1] = Math.max(kept[c][1], ys[i]); }
      return keep.length <= 4 * B + 2 && JSON.stringify(all) === JSON.stringify(kept);
    })()""")
    assert ok
    b.pump(0.3)
    assert b.problems() == []
    # The page loaded nothing but itself.
    assert b.requests() == [html.resolve().as_uri()], b.requests()


# --- XSS --------------------------------------------------------------------

def _csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _frame(src, dst, sport, dport, seq, ack, flags, payload=b""):
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 65535, 0, 0)
    total = 20 + len(tcp) + len(payload)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 1, 0, 64, 6, 0, bytes(src), bytes(dst))
    ip = ip[:10] + struct.pack("!H", _csum(ip)) + ip[12:]
    pseudo = bytes(src) + bytes(dst) + struct.pack("!BBH", 0, 6, len(tcp) + len(payload))
    c = _csum(pseudo + tcp + payload)
    tcp = tcp[:16] + struct.pack("!H", c) + tcp[18:]
    eth = b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01" + b"\x08\x00"
    return eth + ip + tcp + payload


def write_pcap(path: Path, payload_c2s: bytes, payload_s2c: bytes):
    c, s = [10, 0, 0, 1], [10, 0, 0, 2]
    cp, sp = 40000, 80
    SYN, ACK, PSH, FIN = 0x02, 0x10, 0x08, 0x01
    frames = [
        _frame(c, s, cp, sp, 1000, 0, SYN),
        _frame(s, c, sp, cp, 5000, 1001, SYN | ACK),
        _frame(c, s, cp, sp, 1001, 5001, ACK),
        _frame(c, s, cp, sp, 1001, 5001, PSH | ACK, payload_c2s),
        _frame(s, c, sp, cp, 5001, 1001 + len(payload_c2s), ACK),
        _frame(s, c, sp, cp, 5001, 1001 + len(payload_c2s), PSH | ACK, payload_s2c),
        _frame(c, s, cp, sp, 1001 + len(payload_c2s), 5001 + len(payload_s2c), ACK | FIN),
        _frame(s, c, sp, cp, 5001 + len(payload_s2c), 1002 + len(payload_c2s), ACK | FIN),
        _frame(c, s, cp, sp, 1002 + len(payload_c2s), 5002 + len(payload_s2c), ACK),
    ]
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    for i, f in enumerate(frames):
        out += struct.pack("<IIII", 1_700_000_000, i * 10_000, len(f), len(f)) + f
    path.write_bytes(out)


def test_capture_content_is_shown_as_text_and_runs_nothing(tmp_path, browser):
    p1 = b"GET /<script>window.__pwned=1;alert(1)</script> HTTP/1.1\r\nHost: x\r\n\r\n"
    p2 = b"HTTP/1.1 200 OK\r\n\r\n</script><img src=x onerror=window.__pwned=2;alert(2)>\xe2\x80\xa8"
    cap = tmp_path / "x<img src=y onerror=alert(3)>.pcap"
    write_pcap(cap, p1, p2)
    html = report(tmp_path, cap, name="xss.html")
    raw = html.read_text()
    assert "<script>window.__pwned" not in raw and "<img src" not in raw
    b = browser
    open_report(b, html)
    b.eval("document.querySelectorAll('details').forEach((d) => { d.open = true; })")
    b.pump(0.3)
    body = b.eval("document.body.innerText")
    assert "GET /<script>window.__pwned=1;alert(1)</script> HTTP/1.1" in body
    assert "</script><img src=x onerror=window.__pwned=2;alert(2)>" in body
    assert "x<img src=y onerror=alert(3)>.pcap" in body
    assert b.eval("typeof window.__pwned") == "undefined"
    assert b.eval("document.querySelectorAll('img').length") == 0
    assert b.eval("document.querySelectorAll('script:not([type])').length") == 2
    SHOTS.mkdir(parents=True, exist_ok=True)
    b.screenshot(SHOTS / "report-xss.png")
    b.pump(0.3)
    assert b.problems() == []
    assert len(b.requests()) == 1, b.requests()


# --- request timeline ---------------------------------------------------------

def write_keepalive_pcap(path: Path, starts=(0.040, 0.200, 1.500), segs=4):
    """One HTTP/1.1 keep-alive connection, 20 ms RTT, a request at each of
    `starts` (seconds) answered after 5 ms at the server by `segs` 1400-byte
    segments; the last request follows 1.2 s of idle."""
    c, s = [10, 0, 0, 1], [10, 0, 0, 2]
    cp, sp = 40001, 80
    SYN, ACK, PSH = 0x02, 0x10, 0x08
    frames = [(0.000, _frame(c, s, cp, sp, 1000, 0, SYN)),
              (0.020, _frame(s, c, sp, cp, 5000, 1001, SYN | ACK)),
              (0.020, _frame(c, s, cp, sp, 1001, 5001, ACK))]
    cseq, sseq = 1001, 5001
    for k, t in enumerate(starts, 1):
        req = f"GET /{k} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        frames.append((t, _frame(c, s, cp, sp, cseq, sseq, PSH | ACK, req)))
        cseq += len(req)
        for i in range(segs):
            body = (b"HTTP/1.1 200 OK\r\n\r\n" if i == 0 else b"") + bytes(1400 - (19 if i == 0 else 0))
            frames.append((t + 0.025 + i * 0.0001, _frame(s, c, sp, cp, sseq, cseq, PSH | ACK, body)))
            sseq += len(body)
        frames.append((t + 0.045 + segs * 0.0001, _frame(c, s, cp, sp, cseq, sseq, ACK)))
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    for t, f in frames:
        us = round(t * 1e6)
        out += struct.pack("<IIII", 1_700_000_000 + us // 1_000_000, us % 1_000_000, len(f), len(f)) + f
    path.write_bytes(out)


def test_request_timeline_draws_each_exchange_and_zooms_the_plots_to_it(tmp_path, browser):
    cap = tmp_path / "keepalive.pcap"
    write_keepalive_pcap(cap)
    lat = subprocess.run([tcpwhy(), "latency", "--json", str(cap)], capture_output=True, text=True)
    assert lat.returncode == 0, lat.stderr
    import json
    exchanges = json.loads(lat.stdout)["connections"][0]["exchanges"]
    assert [e["request_line"] for e in exchanges] == ["GET /1 HTTP/1.1", "GET /2 HTTP/1.1", "GET /3 HTTP/1.1"]
    html = report(tmp_path, cap, name="timeline.html")
    b = browser
    open_report(b, html)
    # The capture-wide timeline (one row for the connection) and the
    # connection's own (one row per exchange), each with the phases drawn.
    assert b.eval("document.querySelectorAll('section.latency svg.waterfall g.conn-row').length") == 1
    rows = "document.querySelectorAll('details.conn[open] svg.waterfall g.ex')"
    assert b.eval(f"{rows}.length") == 3
    titles = b.eval(f"Array.from({rows}).map(g => g.querySelector('title').textContent)")
    assert "GET /2 HTTP/1.1 -> HTTP/1.1 200 OK" in titles[1] and "reused connection" in titles[1]
    assert "new connection, handshake" in titles[0]
    assert "idle 1.30 s before (longer than the RTO)" in titles[2], titles[2]
    for cls in ("ph-hs", "ph-req", "ph-wait", "ph-resp"):
        assert b.eval(f"document.querySelectorAll('details.conn[open] svg.waterfall .{cls}').length") >= 1, cls
    # Table: one row per exchange with the request lines as text.
    body = b.eval("Array.from(document.querySelectorAll('details.conn[open] table.exchanges tbody tr')).map(r => r.innerText)")
    assert len(body) == 3 and "GET /3 HTTP/1.1" in body[2]
    # The SVG's time axis is the plots' axis: clicking exchange 2 zooms every
    # plot of the connection to it.
    t0, t1 = b.eval(f"[parseFloat({rows}[1].dataset.t0), parseFloat({rows}[1].dataset.t1)]")
    assert abs(t0 - 0.200) < 1e-3 and abs(t1 - (0.225 + 3 * 0.0001)) < 1e-3, (t0, t1)
    b.eval(f"{rows}[1].dispatchEvent(new MouseEvent('click', {{bubbles: true}}))")
    assert b.wait_for("window.tcpwhy.zoomedTo !== undefined", 10)
    b.pump(0.3)
    scales = b.eval("window.tcpwhy.plots[0].map(u => [u.scales.x.min, u.scales.x.max])")
    for lo, hi in scales:
        assert t0 - 0.01 < lo <= t0 and t1 <= hi < t1 + 0.01, scales
    SHOTS.mkdir(parents=True, exist_ok=True)
    b.screenshot(SHOTS / "report-timeline.png")
    assert b.problems() == []


# Counts pixels of the window panel's canvas in a marker's colour.
PIXELS_OF = """
(sel, rgb) => Array.from(document.querySelectorAll(sel)).map((c) => {
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4)
    if (Math.abs(d[i] - rgb[0]) < 24 && Math.abs(d[i+1] - rgb[1]) < 24 && Math.abs(d[i+2] - rgb[2]) < 24 && d[i+3] > 0) n++;
  return n;
})
"""


def test_bytes_in_flight_marks_the_senders_recoveries_and_names_its_algorithm(tmp_path, browser):
    """The window panel names the congestion control the diagnosis read and
    draws a mark at each loss recovery it lists (issue 41): a CUBIC sender
    behind a policer, from the shared policing captures."""
    import json
    shared = Path(os.environ.get("TCPWHY_SHARED", REPO.parent / "shared"))
    caps = sorted((shared / "captures" / "policing-lab").glob("*PCIR=3000000-PBC=8000-RTT=100-*TCP=cubic*.pcap.xz"))
    if not caps:
        pytest.skip("shared policing captures not found")
    cap = caps[0]
    d = json.loads(subprocess.run([tcpwhy(), "diagnose", "--json", "--no-progress", str(cap)],
                                  capture_output=True, text=True, check=True).stdout)
    # The report opens the largest connection first; its direction's events.
    conn = max(d["connections"], key=lambda c: sum(x["bytes"] for x in c["directions"]))
    cc = max(conn["directions"], key=lambda x: x["bytes"])["congestion_control"]
    assert cc["name"] == "cubic" and cc["recoveries"] > 10, cc
    read = [e for e in cc["events"] if e["kind"] == "recovery" and e["factor"] is not None]
    assert read and all(abs(e["factor"] - 0.7) < 0.3 for e in read[:5]), read[:5]
    assert all(a["t"] <= b["t"] for a, b in zip(cc["events"], cc["events"][1:]))
    html = report(tmp_path, cap, name="cc.html")
    b = browser
    open_report(b, html)
    panel = "details.conn[open] .panel-window"
    title = b.eval(f"document.querySelector('{panel}').innerText")
    assert "the sender runs CUBIC (high)" in title and "loss recovery (after/before)" in title, title
    red = b.eval(f"({PIXELS_OF})('{panel} canvas', [0xd6, 0x27, 0x28])")
    assert red and red[0] > 100, red
    SHOTS.mkdir(parents=True, exist_ok=True)
    b.screenshot(SHOTS / "report-congestion.png")
    assert b.problems() == []
