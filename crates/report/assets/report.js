// tcpwhy report page. Reads the data blocks (<script type="application/json">),
// never inserts markup: every capture-derived string goes through textContent.
"use strict";
(function () {
  const T = (window.tcpwhy = { decimate, plots: [], built: 0, errors: [], timing: [] });

  // ---- decimation: first, min, max, last of every pixel column ------------
  function lowerBound(a, v, lo, hi) {
    lo = lo || 0; hi = hi === undefined ? a.length : hi;
    while (lo < hi) { const m = (lo + hi) >>> 1; if (a[m] < v) lo = m + 1; else hi = m; }
    return lo;
  }
  function upperBound(a, v, lo, hi) {
    lo = lo || 0; hi = hi === undefined ? a.length : hi;
    while (lo < hi) { const m = (lo + hi) >>> 1; if (a[m] <= v) lo = m + 1; else hi = m; }
    return lo;
  }
  // Indices to draw for xs (sorted) / ys in [x0, x1] on `buckets` columns;
  // the same rule as the Rust `decimate::min_max_indices`.
  function decimate(xs, ys, x0, x1, buckets) {
    const n = Math.min(xs.length, ys.length);
    const lo = lowerBound(xs, x0, 0, n), hi = upperBound(xs, x1, 0, n);
    const out = [];
    if (lo > 0) out.push(lo - 1);
    if (hi - lo <= buckets * 4 || buckets <= 0 || !(x1 > x0)) {
      for (let i = lo; i < hi; i++) if (ys[i] === ys[i]) out.push(i);
    } else {
      const scale = buckets / (x1 - x0);
      let i = lo;
      while (i < hi) {
        const b = Math.min(Math.floor((xs[i] - x0) * scale), buckets - 1);
        let first = -1, last = -1, mn = -1, mx = -1;
        while (i < hi && Math.min(Math.floor((xs[i] - x0) * scale), buckets - 1) === b) {
          const y = ys[i];
          if (y === y) {
            if (first < 0) first = i;
            last = i;
            if (mn < 0 || y < ys[mn]) mn = i;
            if (mx < 0 || y > ys[mx]) mx = i;
          }
          i++;
        }
        if (first >= 0) {
          const k = [first, mn, mx, last].sort((a, b) => a - b);
          for (const j of k) if (out[out.length - 1] !== j) out.push(j);
        }
      }
    }
    if (hi < n) out.push(hi);
    return out;
  }

  // ---- data blocks ---------------------------------------------------------
  function b64bytes(s) {
    if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(s);
    const bin = atob(s);
    const a = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) a[i] = bin.charCodeAt(i);
    return a;
  }
  async function gunzip(bytes) {
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }
  async function columns(dir) {
    const raw = await gunzip(b64bytes(dir.bin));
    const out = {};
    let off = 0;
    for (const [name, type, n] of dir.cols) {
      const size = type === "f8" ? 8 : type === "f4" ? 4 : 1;
      // Columns are byte-shuffled (plane k holds byte k of every value).
      const bytes = new Uint8Array(n * size);
      for (let k = 0; k < size; k++) {
        const plane = off + k * n;
        for (let i = 0; i < n; i++) bytes[i * size + k] = raw[plane + i];
      }
      const buf = bytes.buffer;
      off += n * size;
      out[name] = type === "f8" ? new Float64Array(buf) : type === "f4" ? new Float32Array(buf) : new Uint8Array(buf);
    }
    return out;
  }

  // ---- drawing helpers -----------------------------------------------------
  const COLORS = {
    receiver_window: "#e69f00", send_buffer: "#cc79a7", sender_application: "#999999",
    congestion_window: "#0072b2", policer: "#d55e00", bottleneck_link: "#009e73",
    slow_start: "#56b4e9", receiver_application: "#f0e442", idle: "#e0e0e0",
  };
  const stateColor = (s) => COLORS[s] || "#bbbbbb";

  function clip(u, fn) {
    const ctx = u.ctx, b = u.bbox;
    ctx.save();
    ctx.beginPath();
    ctx.rect(b.left, b.top, b.width, b.height);
    ctx.clip();
    fn(ctx, b);
    ctx.restore();
  }
  function xr(u) { return [u.scales.x.min, u.scales.x.max]; }
  function cols(u) { return Math.max(1, Math.round(u.bbox.width)); }

  // The sender's window at its recoveries and falls without a loss
  // (diagnosis: congestion_control.events): a dashed line at each, labelled
  // with the factor (after / before) where there is room.
  const CC_NAMES = { reno: "Reno", cubic: "CUBIC", bbr: "BBR" };
  function ccTitle(cc) {
    if (!cc) return "";
    const named = CC_NAMES[cc.name] ? "the sender runs " + CC_NAMES[cc.name] + " (" + cc.confidence + ")" : "the sender's congestion control is not known";
    const n = cc.events.length;
    return "; " + named + (n ? "; marked: " + (cc.recoveries ? "each loss recovery with the window after it over the one before (Reno 0.5, CUBIC 0.7, BBR about 1)" : "") +
      (cc.events.some((e) => e[1] === "fall") ? (cc.recoveries ? ", and " : "") + "each fall of the flight without a loss (BBR's drain and ProbeRTT)" : "") : "");
  }
  function drawCcEvents(u, cc) {
    if (!cc || !cc.events.length) return;
    const [x0, x1] = xr(u);
    clip(u, (ctx, b) => {
      ctx.font = (10 * devicePixelRatio) + "px sans-serif";
      ctx.lineWidth = devicePixelRatio;
      ctx.setLineDash([3 * devicePixelRatio, 3 * devicePixelRatio]);
      let lastLabel = -1e9;
      for (const [t, kind, factor] of cc.events) {
        if (t < x0 || t > x1) continue;
        const px = u.valToPos(t, "x", true);
        const color = kind === "fall" ? "#9467bd" : factor == null ? "#aaaaaa" : "#d62728";
        ctx.strokeStyle = color;
        ctx.beginPath();
        ctx.moveTo(px, b.top);
        ctx.lineTo(px, b.top + b.height);
        ctx.stroke();
        if (factor != null && px - lastLabel > 40 * devicePixelRatio) {
          ctx.fillStyle = color;
          ctx.fillText((kind === "fall" ? "fall " : "\u00d7") + factor.toFixed(2), px + 2 * devicePixelRatio, b.top + 11 * devicePixelRatio);
          lastLabel = px;
        }
      }
      ctx.setLineDash([]);
    });
  }

  // A line (or step line) through the decimated points.
  function drawLine(u, xs, ys, color, step, width) {
    const [x0, x1] = xr(u);
    const idx = decimate(xs, ys, x0, x1, cols(u));
    clip(u, (ctx) => {
      ctx.strokeStyle = color;
      ctx.lineWidth = (width || 1) * devicePixelRatio;
      ctx.beginPath();
      let started = false, py = 0;
      for (const i of idx) {
        const px = u.valToPos(xs[i], "x", true), y = u.valToPos(ys[i], "y", true);
        if (!started) { ctx.moveTo(px, y); started = true; }
        else { if (step) ctx.lineTo(px, py); ctx.lineTo(px, y); }
        py = y;
      }
      ctx.stroke();
    });
  }
  function drawPoints(u, xs, ys, color) {
    const [x0, x1] = xr(u);
    const idx = decimate(xs, ys, x0, x1, cols(u));
    const s = 2 * devicePixelRatio;
    clip(u, (ctx) => {
      ctx.fillStyle = color;
      for (const i of idx) {
        if (ys[i] !== ys[i]) continue;
        ctx.fillRect(u.valToPos(xs[i], "x", true) - s / 2, u.valToPos(ys[i], "y", true) - s / 2, s, s);
      }
    });
  }
  // Vertical bars from lo[i] to hi[i] at xs[i] (segments, SACK blocks): every
  // bar when few are visible, else one bar per pixel column spanning the
  // exact minimum and maximum of the bars in it. `sel` restricts to indices.
  function drawBars(u, xs, lo, hi, color, sel, ticks) {
    const [x0, x1] = xr(u);
    const w = cols(u);
    const dpr = devicePixelRatio;
    clip(u, (ctx, b) => {
      ctx.strokeStyle = color;
      ctx.lineWidth = 1.5 * dpr;
      ctx.beginPath();
      const emit = (i) => {
        const px = u.valToPos(xs[i], "x", true);
        const ya = u.valToPos(lo[i], "y", true), yb = u.valToPos(hi[i], "y", true);
        ctx.moveTo(px, ya); ctx.lineTo(px, Math.min(yb, ya - 1));
        if (ticks) { ctx.moveTo(px - 2 * dpr, yb); ctx.lineTo(px + 2 * dpr, yb); ctx.moveTo(px - 2 * dpr, ya); ctx.lineTo(px + 2 * dpr, ya); }
      };
      if (sel) {
        const a = lowerBound(sel, 0), list = [];
        for (let k = a; k < sel.length; k++) { const i = sel[k]; if (xs[i] >= x0 && xs[i] <= x1) list.push(i); }
        if (list.length <= w * 2) { list.forEach(emit); ctx.stroke(); return; }
        aggregate(list);
      } else {
        const a = lowerBound(xs, x0), z = upperBound(xs, x1);
        if (z - a <= w * 2) { for (let i = a; i < z; i++) emit(i); ctx.stroke(); return; }
        const list = { length: z - a, at: (k) => a + k };
        aggregate(list);
      }
      ctx.stroke();
      function aggregate(list) {
        const mn = new Float64Array(w).fill(Infinity), mx = new Float64Array(w).fill(-Infinity);
        const scale = w / (x1 - x0);
        const len = list.length;
        for (let k = 0; k < len; k++) {
          const i = list.at ? list.at(k) : list[k];
          const c = Math.min(w - 1, Math.max(0, Math.floor((xs[i] - x0) * scale)));
          if (lo[i] < mn[c]) mn[c] = lo[i];
          if (hi[i] > mx[c]) mx[c] = hi[i];
        }
        for (let c = 0; c < w; c++) {
          if (mn[c] === Infinity) continue;
          const px = b.left + (c + 0.5) * (b.width / w);
          const ya = u.valToPos(mn[c], "y", true), yb = u.valToPos(mx[c], "y", true);
          ctx.moveTo(px, ya); ctx.lineTo(px, Math.min(yb, ya - 1));
        }
      }
    });
  }
  function drawMarks(u, xs, ys, sel, color, shape) {
    const [x0, x1] = xr(u);
    const s = 4 * devicePixelRatio;
    clip(u, (ctx) => {
      ctx.strokeStyle = color; ctx.fillStyle = color; ctx.lineWidth = 1.5 * devicePixelRatio;
      let last = -1e9, drawn = 0;
      for (const i of sel) {
        if (xs[i] < x0 || xs[i] > x1) continue;
        const px = u.valToPos(xs[i], "x", true);
        if (px - last < 1 && drawn > 2000) continue;
        last = px; drawn++;
        const py = u.valToPos(ys[i], "y", true);
        ctx.beginPath();
        if (shape === "tick") { ctx.moveTo(px, py); ctx.lineTo(px, py + s); ctx.stroke(); }
        else if (shape === "diamond") { ctx.moveTo(px, py - s); ctx.lineTo(px + s, py); ctx.lineTo(px, py + s); ctx.lineTo(px - s, py); ctx.closePath(); ctx.fill(); }
        else if (shape === "x") { ctx.moveTo(px - s, py - s); ctx.lineTo(px + s, py + s); ctx.moveTo(px - s, py + s); ctx.lineTo(px + s, py - s); ctx.stroke(); }
        else { ctx.moveTo(px, py - s); ctx.lineTo(px - s, py + s); ctx.lineTo(px + s, py + s); ctx.closePath(); ctx.fill(); }
      }
    });
  }
  // Extent of ys over xs in [x0, x1] (exact: a linear scan of the range).
  function extent(xs, ys, x0, x1, acc) {
    const a = Math.max(0, lowerBound(xs, x0) - 1), z = Math.min(xs.length, upperBound(xs, x1) + 1);
    for (let i = a; i < z; i++) { const y = ys[i]; if (y < acc[0]) acc[0] = y; if (y > acc[1]) acc[1] = y; }
    return acc;
  }

  // ---- panels --------------------------------------------------------------
  function fmtBytes(v) {
    const a = Math.abs(v);
    return a >= 1e9 ? (v / 1e9).toFixed(2) + " GB" : a >= 1e6 ? (v / 1e6).toFixed(2) + " MB" : a >= 1e3 ? (v / 1e3).toFixed(1) + " kB" : v.toFixed(0) + " B";
  }
  function fmtRate(v) { return v >= 1e9 ? (v / 1e9).toFixed(2) + " Gbit/s" : v >= 1e6 ? (v / 1e6).toFixed(1) + " Mbit/s" : (v / 1e3).toFixed(0) + " kbit/s"; }

  function buildDirection(host, dir, c, group) {
    const n = c.dt.length;
    // Derived arrays.
    const dEnd = new Float64Array(n);
    const retx = [], lost = [], ooo = [];
    const cumAll = new Float64Array(n + 1), cumNew = new Float64Array(n + 1);
    for (let i = 0; i < n; i++) {
      dEnd[i] = c.ds[i] + c.dl[i];
      const f = c.df[i];
      if (f & 1) retx.push(i);
      if (f & 2) lost.push(i);
      if (f & 4) ooo.push(i);
      cumAll[i + 1] = cumAll[i] + c.dl[i];
      cumNew[i + 1] = cumNew[i] + (f & 1 ? 0 : c.dl[i]);
    }
    const m = c.at.length;
    const winEdge = new Float64Array(m);
    const dup = [], zwin = [];
    for (let i = 0; i < m; i++) {
      winEdge[i] = c.aa[i] + c.aw[i];
      if (c.af[i] & 1) dup.push(i);
      if (c.af[i] & 2) zwin.push(i);
    }
    const xmin = Math.min(n ? c.dt[0] : Infinity, m ? c.at[0] : Infinity, dir.runs.length ? dir.runs[0][1] : Infinity);
    const xmax = Math.max(n ? c.dt[n - 1] : -Infinity, m ? c.at[m - 1] : -Infinity, dir.runs.length ? dir.runs[dir.runs.length - 1][2] : -Infinity);
    const X = isFinite(xmin) && isFinite(xmax) && xmax > xmin ? [xmin, xmax] : [0, 1];

    const rate = { t: null, all: null, good: null };
    function computeRate(x0, x1, w) {
      const k = x0 + "/" + x1 + "/" + w;
      if (rate.key === k) return;
      rate.key = k;
      const nb = Math.max(2, Math.floor(w / 4));
      const dx = (x1 - x0) / nb;
      rate.t = new Float64Array(nb); rate.all = new Float64Array(nb); rate.good = new Float64Array(nb);
      let a = lowerBound(c.dt, x0);
      for (let j = 0; j < nb; j++) {
        const z = lowerBound(c.dt, x0 + (j + 1) * dx, a);
        rate.t[j] = x0 + (j + 0.5) * dx;
        rate.all[j] = ((cumAll[z] - cumAll[a]) * 8) / dx;
        rate.good[j] = ((cumNew[z] - cumNew[a]) * 8) / dx;
        a = z;
      }
    }

    const panels = [
      {
        name: "tsg", title: "Time-sequence (tcptrace style): segments, ACK, receive window, SACK", ylabel: "relative sequence", height: 300, yfmt: fmtBytes,
        legend: [["#222", "data segment"], ["#d62728", "retransmission"], ["#2ca02c", "ACK"], ["#e6b400", "receive window edge"], ["#9467bd", "SACK block"], ["#ff7f0e", "capture missed bytes before (lost)"], ["#17becf", "out-of-order"], ["#2ca02c", "duplicate ACK (tick)"], ["#d62728", "zero window (diamond)"]],
        y: (x0, x1) => { const acc = [Infinity, -Infinity]; extent(c.dt, c.ds, x0, x1, acc); extent(c.dt, dEnd, x0, x1, acc); extent(c.at, c.aa, x0, x1, acc); extent(c.at, winEdge, x0, x1, acc); return acc; },
        draw: (u) => {
          drawLine(u, c.at, winEdge, "#e6b400", true);
          drawLine(u, c.at, c.aa, "#2ca02c", true);
          drawBars(u, c.st, c.sl, c.sr, "#9467bd", null, false);
          drawBars(u, c.dt, c.ds, dEnd, "#222", null, true);
          drawBars(u, c.dt, c.ds, dEnd, "#d62728", retx, true);
          drawMarks(u, c.dt, c.ds, lost, "#ff7f0e", "tri");
          drawMarks(u, c.dt, c.ds, ooo, "#17becf", "x");
          drawMarks(u, c.at, c.aa, dup, "#2ca02c", "tick");
          drawMarks(u, c.at, c.aa, zwin, "#d62728", "diamond");
        },
      },
      {
        name: "window", title: "Bytes in flight and receive window (no cwnd: a capture has no socket samples)" + ccTitle(dir.cc), ylabel: "bytes", height: 200, yfmt: fmtBytes,
        legend: [["#1f77b4", "bytes in flight"], ["#e6b400", "advertised receive window"]].concat(
          [["#d62728", "loss recovery (after/before)", (e) => e[1] === "recovery" && e[2] != null], ["#aaaaaa", "recovery not readable", (e) => e[1] === "recovery" && e[2] == null],
            ["#9467bd", "fall without a loss (flight/peak)", (e) => e[1] === "fall"]].filter((m) => dir.cc && dir.cc.events.some(m[2])).map((m) => [m[0], m[1]])),
        y: (x0, x1) => { const acc = [0, -Infinity]; extent(c.dt, c.dq, x0, x1, acc); extent(c.at, c.aw, x0, x1, acc); return acc; },
        draw: (u) => { drawLine(u, c.at, c.aw, "#e6b400", true, 1.5); drawLine(u, c.dt, c.dq, "#1f77b4", false); drawCcEvents(u, dir.cc); },
      },
      {
        name: "rtt", title: "RTT samples", ylabel: "ms", height: 160, yfmt: (v) => v.toFixed(1) + " ms",
        legend: [["#8c564b", "RTT sample (data to ACK)"]],
        y: (x0, x1) => extent(c.at, c.ar, x0, x1, [0, -Infinity]),
        draw: (u) => drawPoints(u, c.at, c.ar, "#8c564b"),
      },
      {
        name: "rate", title: "Throughput (all bytes sent) and goodput (new bytes)", ylabel: "bit/s", height: 160, yfmt: fmtRate,
        legend: [["#7f7f7f", "throughput"], ["#2ca02c", "goodput"]],
        y: (x0, x1, w) => { computeRate(x0, x1, w); const acc = [0, -Infinity]; for (const v of rate.all) if (v > acc[1]) acc[1] = v; return acc; },
        draw: (u) => { computeRate(u.scales.x.min, u.scales.x.max, u.bbox.width); drawLine(u, rate.t, rate.all, "#7f7f7f", true); drawLine(u, rate.t, rate.good, "#2ca02c", true, 1.5); },
      },
      {
        name: "band", title: "Limit state over time (per ~RTT interval)", ylabel: "", height: 130, band: true,
        legend: Array.from(new Set(dir.runs.map((r) => r[0]))).map((s) => [stateColor(s), s.replace(/_/g, " ")]),
        y: () => [0, 1],
        draw: (u) => clip(u, (ctx, b) => {
          for (const [s, a, z] of dir.runs) {
            const pa = u.valToPos(a, "x", true), pz = u.valToPos(z, "x", true);
            if (pz < b.left || pa > b.left + b.width) continue;
            ctx.fillStyle = stateColor(s);
            ctx.fillRect(pa, b.top, Math.max(1, pz - pa), b.height);
            if (pz - pa > 80 * devicePixelRatio) {
              ctx.fillStyle = "#000"; ctx.font = 11 * devicePixelRatio + "px sans-serif";
              ctx.fillText(s.replace(/_/g, " "), Math.max(pa, b.left) + 4, b.top + b.height / 2 + 4);
            }
          }
        }),
      },
    ];

    const made = [];
    let syncing = false;
    for (const p of panels) {
      const box = document.createElement("div");
      box.className = "panel panel-" + p.name;
      const h = document.createElement("div");
      h.className = "panel-title";
      h.textContent = p.title;
      box.appendChild(h);
      const lg = document.createElement("div");
      lg.className = "panel-legend";
      for (const [color, label] of p.legend) {
        const sw = document.createElement("span");
        sw.className = "sw";
        sw.style.background = color;
        lg.appendChild(sw);
        lg.appendChild(document.createTextNode(label + "  "));
      }
      box.appendChild(lg);
      const plotEl = document.createElement("div");
      box.appendChild(plotEl);
      const readout = document.createElement("div");
      readout.className = "readout";
      readout.textContent = "\u00a0";
      box.appendChild(readout);
      host.appendChild(box);
      const width = Math.max(300, host.clientWidth - 8);
      const updateY = (u) => {
        let [x0, x1] = xr(u);
        if (x0 == null || x1 == null || !(x1 > x0)) [x0, x1] = X;
        let [lo, hi] = p.y(x0, x1, u.bbox.width || width * devicePixelRatio);
        if (!isFinite(lo) || !isFinite(hi)) { lo = 0; hi = 1; }
        if (hi <= lo) hi = lo + 1;
        const pad = p.band ? 0 : (hi - lo) * 0.04;
        u.setScale("y", { min: lo - (lo === 0 ? 0 : pad), max: hi + pad });
      };
      const opts = {
        width, height: p.height,
        legend: { show: false },
        cursor: { sync: { key: "sync-" + group, setSeries: false }, drag: { x: true, y: false, setScale: true }, points: { show: false } },
        scales: { x: { time: false }, y: { auto: false, range: (u, a, b) => [a, b] } },
        axes: [
          { label: p.band ? "seconds since the connection's first packet" : "", size: p.band ? 40 : 30 },
          { label: p.ylabel, size: 88, values: p.band ? () => [] : (u, vals) => vals.map((v) => (p.yfmt ? p.yfmt(v) : v)) },
        ],
        series: [{}, { stroke: "transparent", points: { show: false } }],
        hooks: {
          ready: [(u) => updateY(u)],
          draw: [(u) => p.draw(u)],
          setScale: [(u, key) => {
            if (key !== "x") return;
            // uPlot is committing this change: set y after it.
            queueMicrotask(() => updateY(u));
            if (syncing) return;
            syncing = true;
            for (const o of made) if (o !== u) o.setScale("x", { min: u.scales.x.min, max: u.scales.x.max });
            syncing = false;
          }],
          setCursor: [(u) => {
            const l = u.cursor.left;
            if (l == null || l < 0) { readout.textContent = "\u00a0"; return; }
            const x = u.posToVal(l, "x"), y = u.posToVal(u.cursor.top, "y");
            const showY = !p.band && u.hover;
            readout.textContent = "t = " + x.toFixed(6) + " s" + (showY ? "   y = " + (p.yfmt ? p.yfmt(y) : y.toFixed(3)) : "");
          }],
        },
      };
      const u = new uPlot(opts, [X, [null, null]], plotEl);
      made.push(u);
      u.over.addEventListener("mouseenter", () => { u.hover = true; });
      u.over.addEventListener("mouseleave", () => { u.hover = false; });
    }
    T.plots.push(made);
    (host.closest("details.conn").plotSets ||= []).push(made);
    window.addEventListener("resize", () => {
      const w = Math.max(300, host.clientWidth - 8);
      for (const u of made) u.setSize({ width: w, height: u.height });
    });
    return made;
  }

  // Builds a connection's plots once; every caller waits for the same build.
  function buildConnection(det) {
    if (!det.building) det.building = buildPlots(det);
    return det.building;
  }

  async function buildPlots(det) {
    det.dataset.built = "1";
    const src = document.getElementById(det.dataset.data);
    if (!src) return;
    const spec = JSON.parse(src.textContent);
    const host = det.querySelector(".plots");
    for (const [k, dir] of spec.dirs.entries()) {
      const head = document.createElement("h3");
      head.textContent = "Plots: data from " + dir.label;
      host.appendChild(head);
      const box = document.createElement("div");
      host.appendChild(box);
      const t0 = performance.now();
      const c = await columns(dir);
      const t1 = performance.now();
      buildDirection(box, dir, c, det.id + "-" + k);
      T.timing.push({ decode_ms: t1 - t0, build_ms: performance.now() - t1, points: c.dt.length + c.at.length + c.st.length });
    }
    T.built++;
  }

  // ---- overview table sorting ---------------------------------------------
  function sortable(table) {
    const heads = table.tHead.rows[0].cells;
    for (let k = 0; k < heads.length; k++) {
      const th = heads[k];
      if (!th.dataset.sort) continue;
      th.tabIndex = 0;
      const go = () => {
        const dirn = th.dataset.dir === "desc" ? "asc" : "desc";
        for (const o of heads) delete o.dataset.dir;
        th.dataset.dir = dirn;
        const body = table.tBodies[0];
        const rows = Array.from(body.rows);
        const num = th.dataset.sort === "num";
        rows.sort((a, b) => {
          const va = a.cells[k].dataset.v ?? a.cells[k].textContent, vb = b.cells[k].dataset.v ?? b.cells[k].textContent;
          const r = num ? parseFloat(va) - parseFloat(vb) : va.localeCompare(vb);
          return dirn === "asc" ? r : -r;
        });
        for (const r of rows) body.appendChild(r);
      };
      th.addEventListener("click", go);
      th.addEventListener("keydown", (e) => { if (e.key === "Enter") go(); });
    }
  }

  // ---- request timelines ---------------------------------------------------
  // A click on an exchange zooms the connection's plots to it (building them
  // first if the section was never opened); a click on a connection's row
  // in the capture-wide timeline opens that connection's section.
  function timelines() {
    document.querySelectorAll("svg.waterfall g.ex").forEach((g) => {
      g.addEventListener("click", async () => {
        const det = g.closest("details.conn");
        if (!det) return;
        const t0 = parseFloat(g.dataset.t0), t1 = parseFloat(g.dataset.t1);
        if (!(t1 > t0)) return;
        det.open = true;
        await buildConnection(det);
        const pad = (t1 - t0) * 0.03;
        for (const made of det.plotSets || []) if (made.length) made[0].setScale("x", { min: t0 - pad, max: t1 + pad });
        T.zoomedTo = [t0, t1];
        const p = det.querySelector(".plots");
        if (p) p.scrollIntoView({ block: "nearest" });
      });
    });
    document.querySelectorAll("svg.waterfall g.conn-row").forEach((g) => {
      g.addEventListener("click", () => {
        const det = document.getElementById(g.dataset.conn);
        if (!det) return;
        det.open = true;
        det.scrollIntoView();
      });
    });
  }

  // A link from the overview opens the connection's section.
  function openHash() {
    const id = decodeURIComponent(location.hash.slice(1));
    const el = id && document.getElementById(id);
    if (el && el.tagName === "DETAILS" && !el.open) { el.open = true; el.scrollIntoView(); }
  }

  function main() {
    document.querySelectorAll("table.sortable").forEach(sortable);
    timelines();
    window.addEventListener("hashchange", openHash);
    const dets = document.querySelectorAll("details.conn[data-data]");
    dets.forEach((d) => {
      d.addEventListener("toggle", () => { if (d.open) buildConnection(d).catch((e) => { T.errors.push(String(e)); console.error(e); }); });
    });
    const open = Array.from(dets).filter((d) => d.open);
    Promise.all(open.map((d) => buildConnection(d))).then(() => { T.ready = true; T.ready_ms = performance.now(); }, (e) => { T.errors.push(String(e)); console.error(e); T.ready = true; });
    if (!open.length) T.ready = true;
    openHash();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", main);
  else main();
})();
