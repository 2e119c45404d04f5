#!/usr/bin/env python3
"""Times the report page in headless Chromium: load until every open plot is
drawn, a zoom (drag-select equivalent: setScale on the time axis, all linked
plots redraw), and a zoom back out to the full range. Usage: report-page.py FILE.html"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "system"))
from cdp import Browser, find_chromium  # noqa: E402

b = Browser(find_chromium())
try:
    t = time.monotonic()
    b.open_page(Path(sys.argv[1]).resolve().as_uri())
    ok = b.wait_for("window.tcpwhy && window.tcpwhy.ready === true", 300)
    ready = time.monotonic() - t
    assert ok, "page never became ready"
    timing = b.eval("""(async () => {
      const us = window.tcpwhy.plots[0], u = us[0];
      const x0 = u.scales.x.min, x1 = u.scales.x.max, out = {};
      const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
      let t = performance.now();
      u.setScale('x', { min: x0 + (x1 - x0) * 0.4, max: x0 + (x1 - x0) * 0.45 });
      await frame(); out.zoom_ms = performance.now() - t;
      t = performance.now();
      u.setScale('x', { min: x0 + (x1 - x0) * 0.4, max: x0 + (x1 - x0) * 0.4001 });
      await frame(); out.deep_zoom_ms = performance.now() - t;
      t = performance.now();
      u.setScale('x', { min: x0, max: x1 });
      await frame(); out.full_ms = performance.now() - t;
      out.panels = us.length;
      out.ready_ms = window.tcpwhy.ready_ms;
      out.decode_ms = window.tcpwhy.timing.reduce((a, t) => a + t.decode_ms, 0);
      out.build_ms = window.tcpwhy.timing.reduce((a, t) => a + t.build_ms, 0);
      out.points = window.tcpwhy.timing.reduce((a, t) => a + t.points, 0);
      out.heap_mb = performance.memory ? performance.memory.usedJSHeapSize / 1e6 : null;
      return out;
    })()""", await_promise=True)
    print(f"page: {timing['points']} points; ready {timing['ready_ms'] / 1e3:.2f} s after navigation start "
          f"(decode {timing['decode_ms']:.0f} ms, first draw of {timing['panels']} linked plots {timing['build_ms']:.0f} ms; "
          f"{ready:.2f} s from the request to open the page); "
          f"zoom to 5% {timing['zoom_ms']:.0f} ms; zoom to 0.01% {timing['deep_zoom_ms']:.0f} ms; "
          f"full range {timing['full_ms']:.0f} ms; JS heap {timing['heap_mb'] or 0:.0f} MB")
    problems = b.problems()
    if problems:
        print("page problems:", problems)
finally:
    b.close()
