// gputriage's report page: the verdict cards, then the charts that show them.
// It reads two documents: the report (the same JSON as `diagnose --json`,
// docs/json-schema.md) and the chart series (src/report/chart_data.cc). The
// offline file embeds both; `serve` fetches them from its API and calls render().
// Charts are uPlot's (bundled at build time); this file only arranges them.
/* global uPlot */
"use strict";
(function () {
  const charts = [];  // {rebuild(), plot}: rebuilt when the theme changes
  let resizeHooked = false;

  // ---- small helpers -------------------------------------------------------
  // Unicode's bidirectional controls shown as escapes, so a kernel or job name
  // cannot display its characters in another order than they are.
  const BIDI = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g;
  function visible(s) {
    return s == null ? s : String(s).replace(BIDI, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  }
  // A name in a table cell: visible, and at most 200 characters (a 5,000-
  // character template instantiation would fill the page; the cell's tooltip
  // has it whole).
  function cellName(s) {
    const v = visible(s);
    return v != null && v.length > 200 ? v.slice(0, 200) + "… (" + v.length + " characters)" : v;
  }

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v == null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat()) {
      if (c == null || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }
  function num(v, digits) {
    if (v == null || !isFinite(v)) return "n/a";
    const d = digits == null ? (Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : 2) : digits;
    return Number(v).toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
  }
  function usd(v) {
    if (v == null || !isFinite(v)) return "n/a";
    // Cents hide the cost of a short capture: below a dollar, two significant digits.
    if (v !== 0 && Math.abs(v) < 1) return "$" + Number(v.toPrecision(2)).toString();
    return "$" + (Math.abs(v) >= 1000 ? num(v, 0) : num(v, 2));
  }
  function significant(v) {
    if (v == null || !isFinite(v)) return "n/a";
    return v !== 0 && Math.abs(v) < 1 ? Number(v.toPrecision(2)).toString() : num(v);
  }
  function withUnit(v, unit) {
    switch (unit) {
      case "percent": return num(v) + "%";
      case "ms": return num(v) + " ms";
      case "us": return num(v) + " µs";
      case "s": return num(v) + " s";
      case "usd": return usd(v);
      case "count": return num(v, Number.isInteger(v) ? 0 : 1);
      default: return num(v) + (unit ? " " + unit : "");
    }
  }
  function css(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }
  function secondsLabel(s, span) {
    if (s == null) return "";
    if (span < 120) return num(s, span < 2 ? 3 : span < 20 ? 2 : 1) + " s";
    const sign = s < 0 ? "-" : "";
    s = Math.abs(s);
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = Math.floor(s % 60);
    const pad = (x) => String(x).padStart(2, "0");
    return sign + (h > 0 ? h + ":" + pad(m) + ":" + pad(sec) : m + ":" + pad(sec));
  }
  function lowerBound(a, x) {
    let lo = 0, hi = a.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (a[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  // ---- theme ----------------------------------------------------------------
  function initialTheme() {
    let saved = null;
    try { saved = localStorage.getItem("gputriage-theme"); } catch (e) { /* file:// without storage */ }
    if (saved === "light" || saved === "dark") return saved;
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }
  function setTheme(theme, remember) {
    document.documentElement.dataset.theme = theme;
    if (remember) { try { localStorage.setItem("gputriage-theme", theme); } catch (e) { /* ignore */ } }
    for (const c of charts) c.rebuild();
  }
  function themeButton() {
    return el("button", {
      class: "no-print", type: "button", id: "theme-toggle", title: "light / dark",
      onclick: () => setTheme(document.documentElement.dataset.theme === "dark" ? "light" : "dark", true),
    }, "Theme");
  }
  // Print is always light: canvases keep the colours they were drawn with.
  let themeBeforePrint = null;
  window.addEventListener("beforeprint", () => {
    themeBeforePrint = document.documentElement.dataset.theme;
    if (themeBeforePrint !== "light") setTheme("light", false);
  });
  window.addEventListener("afterprint", () => {
    if (themeBeforePrint && themeBeforePrint !== "light") setTheme(themeBeforePrint, false);
    themeBeforePrint = null;
  });

  /// The page's heading with its navigation and the theme button (the theme set first).
  function topbar(title, subtitle, nav) {
    if (!document.documentElement.dataset.theme) document.documentElement.dataset.theme = initialTheme();
    return el("div", { class: "topbar" },
      el("div", {}, el("h1", { text: title }), subtitle ? el("div", { class: "muted", text: subtitle }) : null),
      el("div", { class: "no-print" }, nav || null, themeButton()));
  }

  // ---- charts ---------------------------------------------------------------
  function chartWidth(container) {
    return Math.max(320, Math.min(container.clientWidth || 900, 1360));
  }
  function axis(extra) {
    return Object.assign({
      stroke: css("--muted"), grid: { stroke: css("--grid"), width: 1 }, ticks: { stroke: css("--grid"), width: 1 },
    }, extra || {});
  }
  // A chart that rebuilds itself (theme change, resize) from a function of the theme.
  function addChart(container, id, title, note, build) {
    const box = el("div", { class: "chart", "data-chart": id }, el("p", { class: "title", text: title }),
      note ? el("p", { class: "note", text: note }) : null);
    const target = el("div");
    box.append(target);
    container.append(box);
    const entry = { plot: null, id: id };
    entry.rebuild = () => {
      if (entry.plot) entry.plot.destroy();
      target.textContent = "";
      const { opts, data } = build();
      opts.width = chartWidth(box);
      entry.plot = new uPlot(opts, data, target);
    };
    entry.rebuild();
    charts.push(entry);
    if (!resizeHooked) {
      resizeHooked = true;
      let timer = null;
      window.addEventListener("resize", () => {
        clearTimeout(timer);
        timer = setTimeout(() => {
          for (const c of charts) if (c.plot) c.plot.setSize({ width: chartWidth(c.plot.root.parentNode.parentNode), height: c.plot.height });
        }, 100);
      });
    }
    return entry;
  }

  // Step boundaries as dashed lines, only where they are far enough apart to read.
  function stepBoundaryHook(steps, onDensity) {
    return (u) => {
      if (!steps || !steps.start_s) return;
      const starts = steps.start_s;
      const lo = lowerBound(starts, u.scales.x.min), hi = lowerBound(starts, u.scales.x.max);
      const tooDense = hi - lo > u.bbox.width / (6 * (window.devicePixelRatio || 1));
      if (onDensity) onDensity(tooDense, hi - lo);
      if (tooDense) return;
      const ctx = u.ctx;
      ctx.save();
      ctx.strokeStyle = css("--step");
      ctx.lineWidth = 1;
      ctx.setLineDash([4, 3]);
      ctx.beginPath();
      for (let i = lo; i < hi; i++) {
        const x = Math.round(u.valToPos(starts[i], "x", true)) + 0.5;
        ctx.moveTo(x, u.bbox.top);
        ctx.lineTo(x, u.bbox.top + u.bbox.height);
      }
      ctx.stroke();
      ctx.restore();
    };
  }

  function pctValue(u, v) { return v == null ? "–" : num(v, 1) + "%"; }
  // A series of a few points is drawn as points too: a line needs two.
  function sparsePoints(values) {
    let n = 0;
    for (const v of values) if (v != null && ++n >= 3) return { show: false };
    return { show: true, size: 7 };
  }

  // Utilization (mean line over the min–max band of each bucket), the activity
  // series beside it, the data-wait share shaded and the step boundaries.
  function timelineChart(container, id, title, note, rec, gpu, busy) {
    return addChart(container, id, title, note, () => {
      const tables = [];
      const series = [{ label: "time", value: (u, v) => secondsLabel(v, rec.duration_s || 0) }];
      const bands = [];
      const span = rec.duration_s || 0;
      if (busy) {
        tables.push([busy.t_s, busy.percent]);
        series.push({ label: "kernel time", stroke: css("--util"), width: 1.5, fill: css("--band"), value: pctValue,
          paths: uPlot.paths.stepped({ align: 1 }), points: { show: false } });
      }
      const names = { gpu_util: "utilization", gr_engine_active: "GR engine active", sm_active: "SM active",
        tensor_active: "tensor active", dram_active: "DRAM active", job_sm_util: "job's SM utilization" };
      const colors = { gpu_util: "--util", gr_engine_active: "--util", sm_active: "--sm", tensor_active: "--tensor",
        dram_active: "--dram", job_sm_util: "--job" };
      if (gpu) {
        const busyName = gpu.series.gpu_util ? "gpu_util" : gpu.series.gr_engine_active ? "gr_engine_active" : null;
        for (const name of Object.keys(names)) {
          const s = gpu.series[name];
          if (!s) continue;
          if (name === busyName) {
            // max and min first, the band between them, then the mean over it.
            const base = series.length;
            tables.push([s.t_s, s.max, s.min, s.mean]);
            series.push({ label: names[name] + " max", stroke: css("--band"), width: 1, value: pctValue, points: { show: false }, spanGaps: true });
            series.push({ label: names[name] + " min", stroke: css("--band"), width: 1, value: pctValue, points: { show: false }, spanGaps: true });
            series.push({ label: names[name], stroke: css(colors[name]), width: 1.5, value: pctValue, points: sparsePoints(s.mean), spanGaps: true });
            bands.push({ series: [base, base + 1], fill: css("--band") });
          } else {
            tables.push([s.t_s, s.mean]);
            series.push({ label: names[name], stroke: css(colors[name]), width: 1.25, value: pctValue, points: sparsePoints(s.mean), spanGaps: true });
          }
        }
      }
      if (rec.data_wait) {
        tables.push([rec.data_wait.t_s, rec.data_wait.percent]);
        series.push({ label: "waiting for data", stroke: css("--wait-line"), width: 1, fill: css("--wait"), value: pctValue,
          paths: uPlot.paths.stepped({ align: 1 }), points: { show: false } });
      }
      const data = tables.length === 1 ? tables[0] : uPlot.join(tables);
      return {
        data,
        opts: {
          height: 240,
          scales: { x: { time: false }, y: { range: [0, 100] } },
          series, bands,
          axes: [axis({ values: (u, splits) => splits.map((v) => secondsLabel(v, span)) }),
            axis({ values: (u, splits) => splits.map((v) => v + "%"), size: 48 })],
          cursor: { sync: { key: "rec" + rec.recording }, drag: { x: true, y: false } },
          hooks: { draw: [stepBoundaryHook(rec.steps)] },
        },
      };
    });
  }

  // Memory at step ends (zero-code mode's sampler), on the recording's time axis
  // with its step boundaries; then what the peak held, where the job counted it.
  function memoryChart(container, id, rec, sm) {
    const m = rec.step_memory;
    const mib = (u, v) => v == null ? "–" : withUnit(v, "MiB");
    addChart(container, id, "Memory at step ends" + (m.device != null ? ": GPU " + m.device + " and the host" : ": the host"),
      (m.group > 1 ? "Each point the highest of " + m.group + " consecutive samples. " : "") +
      "Process " + m.pid + ", sampled as each step ended; a line that keeps rising is a leak (memory_creep).", () => {
        const series = [{ label: "time", value: (u, v) => secondsLabel(v, rec.duration_s || 0) }];
        const data = [m.t_s];
        const add = (values, label, color, dash) => {
          if (!values) return;
          data.push(values);
          series.push({ label: label, stroke: css(color), width: 1.5, dash: dash, value: mib, points: sparsePoints(values), spanGaps: true });
        };
        add(m.gpu_allocated_mib, "GPU allocated", "--util");
        add(m.gpu_reserved_mib, "GPU reserved", "--sm", [5, 3]);
        add(m.gpu_peak_mib, "GPU peak so far", "--tensor", [2, 2]);
        add(m.host_rss_mib, "host resident", "--dram");
        return {
          data,
          opts: {
            height: 220, scales: { x: { time: false } }, series,
            axes: [axis({ values: (u, splits) => splits.map((v) => secondsLabel(v, rec.duration_s || 0)) }),
              axis({ values: (u, splits) => splits.map((v) => withUnit(v, "MiB")), size: 96 })],
            cursor: { sync: { key: "rec" + rec.recording }, drag: { x: true, y: false } },
            hooks: { draw: [stepBoundaryHook(rec.steps)] },
          },
        };
      });
    const st = sm && sm.static;
    const p = sm && sm.processes && sm.processes[0];
    if (!st || st.parameters_bytes == null || !p) return;
    const gpu = p.gpu && String(st.device).startsWith("cuda");
    const peak = gpu ? p.gpu.allocated_peak_bytes : p.host.rss_peak_bytes;
    if (!peak) return;
    const M = 1024 * 1024;
    const fixed = st.parameters_bytes + (st.gradients_bytes || 0) + (st.optimizer_state_bytes || 0);
    const labels = ["parameters", "gradients", "optimizer state", gpu ? "activations and temporaries" : "the rest (runtime, activations)"];
    const values = [st.parameters_bytes / M, (st.gradients_bytes || 0) / M, (st.optimizer_state_bytes || 0) / M, Math.max(0, peak - fixed) / M];
    if (gpu) { labels.push("cached, free"); values.push(Math.max(0, p.gpu.reserved_max_bytes - peak) / M); }
    categoryBars(container, id + "-peak", "What the peak held (" + (gpu ? "GPU " + p.gpu.device : "host") + ")",
      "Parameters, gradients and optimizer state as the job's model and optimizers count them; the rest of the peak beside them.",
      labels, values, "MiB");
  }

  // Stacked bars: each category's series holds the running sum, drawn largest
  // first so the smaller sums sit on top; the legend shows each category's own value.
  function stackedBars(container, id, title, note, xs, xLabel, categories, fmt, xNames) {
    fmt = fmt || ((v) => num(v) + " ms");
    return addChart(container, id, title, note, () => {
      const raw = categories.map((c) => c.values);
      const cum = [];
      let run = xs.map(() => 0);
      for (const r of raw) {
        run = run.map((v, i) => v + (r[i] || 0));
        cum.push(run);
      }
      const bars = uPlot.paths.bars({ size: [0.8, 48], align: 0 });
      const series = [{ label: xLabel, value: (u, v) => (v == null ? "" : xNames ? xNames[v] || "" : String(v)) }];
      const data = [xs];
      for (let k = categories.length - 1; k >= 0; k--) {
        const color = css(categories[k].color || "--c" + (k % 8));
        const mine = raw[k];
        series.push({ label: categories[k].label, fill: color, stroke: color, width: 0, paths: bars, points: { show: false },
          value: (u, v, si, idx) => (idx == null || mine[idx] == null ? "–" : fmt(mine[idx])) });
        data.push(cum[k]);
      }
      return {
        data,
        opts: {
          height: 240, series,
          scales: { x: { time: false, range: (u, min, max) => [min - 0.5, max + 0.5] }, y: { range: (u, min, max) => [0, max * 1.05 || 1] } },
          axes: [axis(xNames ? { splits: () => xs, values: (u, splits) => splits.map((v) => xNames[v] || "") }
            : { values: (u, splits) => splits.map((v) => (Number.isInteger(v) ? String(v) : "")) }),
            axis({ values: (u, splits) => splits.map(fmt), size: 70 })],
        },
      };
    });
  }

  function categoryBars(container, id, title, note, labels, values, unit, xLabel) {
    return addChart(container, id, title, note, () => ({
      data: [labels.map((_, i) => i), values],
      opts: {
        height: 200,
        series: [{ label: xLabel || "cause", value: (u, v) => (v == null ? "" : labels[v] || "") },
          { label: unit, fill: css("--c3"), stroke: css("--c3"), width: 0, paths: uPlot.paths.bars({ size: [0.6, 90] }),
            points: { show: false }, value: (u, v) => (v == null ? "–" : num(v) + " " + unit) }],
        scales: { x: { time: false, range: () => [-0.5, labels.length - 0.5] }, y: { range: (u, min, max) => [0, max * 1.1 || 1] } },
        axes: [axis({ splits: () => labels.map((_, i) => i), values: (u, splits) => splits.map((v) => labels[v] || "") }),
          axis({ values: (u, splits) => splits.map((v) => num(v) + " " + unit), size: 80 })],
      },
    }));
  }

  // ---- sections ------------------------------------------------------------
  // The same colours for the same thing in every chart: waiting for data is the
  // red of the timeline's shading, GPU work the utilization blue.
  const phaseColors = { data: "--wait-line", data_loader: "--wait-line", kernel: "--util", forward: "--util",
    backward: "--tensor", optimizer: "--sm", communication: "--dram", unmarked: "--c5", other: "--c5", runtime: "--c7",
    cpu_exec: "--c6", memcpy: "--c1", memset: "--c2", checkpoint: "--c6" };
  const severityOrder = { high: 0, moderate: 1, low: 2, info: 3 };

  function findingCard(f, report) {
    const rec = f.recording != null && report.recordings[f.recording] ? report.recordings[f.recording] : null;
    const where = f.scope || (rec ? rec.source : "");
    const card = el("article", { class: "card sev-" + f.severity, "data-verdict": f.verdict },
      el("div", {}, el("span", { class: "badge sev-" + f.severity, text: f.severity }), el("span", { class: "verdict-id", text: f.verdict }),
        f.origin ? el("span", { class: "muted", text: " · from " + (f.origin === "metrics" ? "sampled metrics" : f.origin) }) : null),
      el("h3", { text: visible(f.title) }),
      where ? el("div", { class: "muted", text: where }) : null,
      el("p", { text: visible(f.detail) }));
    if (f.expected_gain) {
      const g = f.expected_gain;
      // [best, worst]; shown low to high (for a level where higher is better,
      // best is the larger: "19.8% – 26.7%", never reversed).
      const range = [Math.min(g.range[0], g.range[1]), Math.max(g.range[0], g.range[1])];
      card.append(el("div", { class: "gain" },
        el("div", {}, "Expected after the fix: ", el("b", { text: withUnit(g.expected, g.unit) }),
          " (now " + withUnit(g.current, g.unit) + "; range " + withUnit(range[0], g.unit) + " – " + withUnit(range[1], g.unit) +
          // A memory figure (growth, batch, shortfall) promises no throughput of its own.
          (g.speedup_percent != null && (g.unit === "ms" || g.speedup_percent !== 0)
            ? "; " + num(g.speedup_percent, 0) + "% more throughput" : "") + ")"),
        g.bounded_by ? el("div", { class: "muted", text: "bounded next by " + g.bounded_by }) : null,
        g.basis ? el("div", { class: "muted", text: g.basis }) : null));
    }
    if (f.recommendations && f.recommendations.length) {
      card.append(el("h4", { text: "Fix" }));
      for (const r of f.recommendations) card.append(el("pre", { text: r.action }), el("div", { class: "muted", text: r.why }));
    }
    if (f.evidence && f.evidence.length) {
      const rows = f.evidence.map((e) => el("tr", {},
        el("td", { text: e.name }), el("td", { class: "num", text: withUnit(e.value, e.unit) }),
        el("td", { text: e.threshold != null ? (e.comparison || "") + " " + withUnit(e.threshold, e.unit) : "" }),
        el("td", { class: "muted", text: e.source || "" })));
      card.append(el("details", { open: true }, el("summary", { text: "Evidence" }),
        el("table", {}, el("thead", {}, el("tr", {}, el("th", { text: "measure" }), el("th", { class: "num", text: "value" }),
          el("th", { text: "threshold" }), el("th", { text: "source" }))), el("tbody", {}, rows))));
    }
    if (f.cannot_exclude && f.cannot_exclude.length)
      card.append(el("p", { class: "muted" }, "Cannot exclude: " + f.cannot_exclude.join(", ") + (f.to_separate ? ". To tell them apart: " + f.to_separate : "")));
    if (f.seen_on && f.seen_on.length) card.append(el("p", { class: "muted", text: "Seen on " + f.seen_on.join(", ") }));
    if (f.config_changes && f.config_changes.length)
      card.append(el("p", { class: "muted", text: "Changed since the baseline: " +
        f.config_changes.map((c) => c.key + " " + (c.before ?? "–") + " → " + (c.after ?? "–")).join("; ") }));
    return card;
  }

  function summarySection(report) {
    const s = report.summary || {};
    const stats = [];
    const stat = (value, label) => stats.push(el("div", { class: "stat" }, el("b", { text: value }), el("span", { text: label })));
    // Busy only where something measured it (step markers alone measure no GPU).
    if (s.gpu_busy_source && !s.gpu_busy_source.startsWith("none"))
      stat(num(s.gpu_busy_percent, 1) + "%", "GPU busy (" + s.gpu_busy_source + ")");
    if (s.gpu_util_mean_percent != null) stat(num(s.gpu_util_mean_percent, 1) + "%", "utilization.gpu, time-weighted");
    if (s.steps) stat(num(s.avg_step_ms) + " ms", s.steps + " steps, mean step time");
    if (s.data_wait_percent) stat(num(s.data_wait_percent, 1) + "%", "of step time waiting for data");
    if (s.devices) stat(String(s.devices), s.device ? s.device : "GPUs");
    if (s.gpu_hours) stat(significant(s.gpu_hours), "GPU-hours observed");
    if (s.idle_cost_usd != null) stat(usd(s.idle_cost_usd), "paid for idle GPU time");
    if (s.idle_cost_usd_per_month != null) stat(usd(s.idle_cost_usd_per_month), "idle, per month");
    return el("section", { class: "summary", id: "summary" }, stats);
  }

  function kernelTable(rec, index) {
    const rows = (rec.kernels && rec.kernels.top) || [];
    if (!rows.length) return null;
    const cols = [
      { key: "name", label: "kernel", cls: "kernel-name", fmt: cellName }, { key: "class", label: "class" }, { key: "precision", label: "precision" },
      { key: "tensor_cores", label: "tensor cores", fmt: (v) => (v ? "yes" : "no") },
      { key: "count", label: "calls", num: true, fmt: (v) => num(v, 0) }, { key: "total_ms", label: "total ms", num: true, fmt: (v) => num(v) },
      { key: "mean_us", label: "mean µs", num: true, fmt: (v) => num(v) },
      { key: "mean_blocks_per_sm", label: "blocks/SM", num: true, fmt: (v) => num(v) },
      { key: "mean_occupancy_percent", label: "occupancy %", num: true, fmt: (v) => num(v) }];
    let sortKey = "total_ms", desc = true;
    const tbody = el("tbody");
    const ths = cols.map((c) => el("th", { class: "sortable" + (c.num ? " num" : ""), "data-key": c.key, text: c.label,
      onclick: () => { desc = sortKey === c.key ? !desc : !!c.num; sortKey = c.key; draw(); } }));
    function draw() {
      const sorted = rows.slice().sort((a, b) => {
        const x = a[sortKey], y = b[sortKey];
        const cmp = x == null ? 1 : y == null ? -1 : typeof x === "number" ? x - y : String(x).localeCompare(String(y));
        return desc ? -cmp : cmp;
      });
      tbody.textContent = "";
      for (const r of sorted) tbody.append(el("tr", {}, cols.map((c) => el("td", { class: (c.num ? "num " : "") + (c.cls || ""),
        title: c.key === "name" ? visible(r[c.key]) : null, text: c.fmt ? c.fmt(r[c.key]) : r[c.key] ?? "" }))));
      ths.forEach((th, i) => { th.classList.toggle("sorted-asc", cols[i].key === sortKey && !desc); th.classList.toggle("sorted-desc", cols[i].key === sortKey && desc); });
    }
    draw();
    return el("div", { "data-table": "kernels-" + index },
      el("h3", { text: "Kernels" + (rec.kernels.distinct_names ? " (top " + rows.length + " of " + rec.kernels.distinct_names + " names)" : "") }),
      el("table", { class: "kernels" }, el("thead", {}, el("tr", {}, ths)), tbody));
  }

  function costSection(report) {
    const c = report.cost;
    if (!c || !c.available) return null;
    const sec = el("section", { id: "cost" }, el("h2", { text: "Cost" }),
      el("p", { class: "muted", text: "Price: " + (c.price_basis || "") + ". Idle is paid GPU time with no kernel running (utilization.gpu), and where SM activity was sampled, the share of SMs left idle." }));
    const rows = c.devices.map((d) => el("tr", {}, el("td", { text: d.label }), el("td", { text: d.name }),
      el("td", { class: "num", text: significant(d.hours) }), el("td", { class: "num", text: usd(d.price_per_hour) }),
      el("td", { class: "num", text: usd(d.cost_usd) }), el("td", { class: "num", text: d.util_percent == null ? "n/a" : num(d.util_percent, 1) + "%" }),
      el("td", { class: "num", text: usd(d.idle_cost_by_util_usd) }), el("td", { class: "num", text: usd(d.idle_cost_by_sm_usd) })));
    rows.push(el("tr", {}, el("th", { text: "total" }), el("td"), el("td", { class: "num", text: significant(c.gpu_hours) }), el("td"),
      el("th", { class: "num", text: usd(c.cost_usd) }), el("td", { class: "num", text: c.util_mean_percent == null ? "" : num(c.util_mean_percent, 1) + "%" }),
      el("th", { class: "num", text: usd(c.idle_cost_by_util_usd) }), el("th", { class: "num", text: usd(c.idle_cost_by_sm_usd) })));
    sec.append(el("table", { "data-table": "cost" }, el("thead", {}, el("tr", {}, ["GPU", "model", "hours", "$/GPU-h", "cost", "utilization", "idle $ (util)", "idle $ (SM)"]
      .map((h, i) => el("th", { class: i >= 2 ? "num" : "", text: h })))), el("tbody", {}, rows)));
    if (c.monthly_spend_usd != null)
      sec.append(el("p", {}, "Of " + usd(c.monthly_spend_usd) + " a month, " + usd(c.monthly_idle_by_util_usd) + " pays for idle GPUs at this utilization."));
    const costDevices = c.devices.filter((d) => d.cost_usd > 0);
    if (costDevices.length) {
      stackedBars(sec, "cost", "Cost per GPU: busy and idle", "idle by utilization.gpu", costDevices.map((_, i) => i), "GPU",
        [{ label: "busy $", values: costDevices.map((d) => d.cost_usd - (d.idle_cost_by_util_usd || 0)) },
          { label: "idle $", values: costDevices.map((d) => d.idle_cost_by_util_usd || 0) }], usd, costDevices.map((d) => d.label));
    }
    if (c.what_if && c.what_if.length) {
      sec.append(el("h3", { text: "What if utilization rose" }));
      sec.append(el("table", { "data-table": "what-if" }, el("thead", {}, el("tr", {}, ["from", "to", "more compute, same spend", "less spend, same work", "a month"]
        .map((h, i) => el("th", { class: i ? "num" : "", text: h })))),
      el("tbody", {}, c.what_if.map((w) => el("tr", {}, el("td", { text: num(w.from_percent, 0) + "%" }), el("td", { class: "num", text: num(w.to_percent, 0) + "%" }),
        el("td", { class: "num", text: "+" + num(w.more_compute_percent, 0) + "%" }), el("td", { class: "num", text: num(w.spend_saved_percent, 0) + "%" }),
        el("td", { class: "num", text: w.monthly_saving_usd == null ? "" : usd(w.monthly_saving_usd) }))))));
    }
    for (const n of c.notes || []) sec.append(el("p", { class: "muted", text: n }));
    return sec;
  }

  // The goodput ledger (docs/ledger.md): one bar of the job's GPU time split
  // into its buckets, then the table a reader checks it against.
  const ledgerBuckets = ["productive", "data_wait", "communication", "host_stall", "between_steps", "startup",
    "compile_warmup", "checkpoint_restore", "checkpoint_save", "evaluation", "idle", "teardown", "hang", "crash",
    "lost_work", "unsplit"];
  const ledgerColors = Object.fromEntries(ledgerBuckets.map((b) => [b, "--lg-" + b]));
  // The job's phases over time, as its ledger bucketed them (a run of steps is
  // "steps"), in the ledger's colours.
  const laneColor = (kind) => ledgerColors[kind === "steps" ? "productive" : kind] || "--c5";
  function jobPhaseLane(jp, i) {
    const span = Math.max(jp.end_s - jp.start_s, 1e-9);
    const lane = el("div", { class: "phase-lane", id: "phases-" + i, role: "img", "aria-label": "the job's phases over time" });
    const kinds = [];
    for (const seg of jp.segments) {
      const left = Math.max(0, (seg.start_s - jp.start_s) / span), right = Math.min(1, (seg.end_s - jp.start_s) / span);
      if (right <= left) continue;
      if (!kinds.includes(seg.kind)) kinds.push(seg.kind);
      lane.append(el("span", { class: "phase-segment", "data-kind": seg.kind,
        title: seg.kind + ": " + secondsLabel(seg.start_s - jp.start_s, span) + " – " + secondsLabel(seg.end_s - jp.start_s, span),
        style: "left:" + (100 * left).toFixed(3) + "%;width:" + (100 * (right - left)).toFixed(3) + "%;background:var(" + laneColor(seg.kind) + ")" }));
    }
    const legend = el("p", { class: "muted" }, "Over the job's " + secondsLabel(span, span) + ": ",
      ...kinds.map((k) => el("span", {}, el("span", { class: "swatch", style: "background:var(" + laneColor(k) + ")" }), " " + k + "  ")),
      jp.dropped ? " (" + jp.dropped + " segments past the first 2,000 not drawn)" : "");
    return el("div", {}, el("h4", { text: "Phases over time (process " + jp.pid + ")" }), lane, legend);
  }

  function ledgerSection(rec, i, ch) {
    const l = rec.ledger;
    if (!l || !l.buckets) return null;
    const gpuHours = l.unit === "gpu_hours";
    const amount = (h) => (gpuHours ? significant(h) + " GPU-h" : significant(h * 3600) + " s");
    const known = l.buckets.filter((b) => b.known && b.hours > 0);
    const sec = el("div", { class: "ledger", id: "ledger-" + i },
      el("h3", { text: "Goodput ledger: where the " + (gpuHours ? "GPU-hours" : "job's hours") + " went" }),
      el("p", { class: "muted", text: amount(l.total) + (gpuHours ? " (" + significant(l.gpus) + " GPUs × " + significant(l.wall_hours * 3600) + " s)" : "") +
        ", " + l.span_source + ". Goodput " + (l.goodput == null ? "not known (no steps)" : num(100 * l.goodput, 1) + "%") +
        (l.price_per_gpu_hour == null ? "" : ", at " + usd(l.price_per_gpu_hour) + "/GPU-hour") + "." }));
    const bar = el("div", { class: "ledger-bar", role: "img", "aria-label": known.map((b) => (b.label || b.name) + " " + num(100 * b.share, 1) + "%").join(", ") });
    for (const b of known)
      bar.append(el("span", { class: "ledger-segment", "data-bucket": b.name, title: (b.label || b.name) + ": " + num(100 * b.share, 1) + "%",
        style: "width:" + (100 * b.share).toFixed(3) + "%;background:var(" + (ledgerColors[b.name] || "--c5") + ")" }));
    sec.append(bar);
    const rows = known.map((b) => el("tr", {},
      el("td", {}, el("span", { class: "swatch", style: "background:var(" + (ledgerColors[b.name] || "--c5") + ")" }), " " + (b.label || b.name)),
      el("td", { class: "num", text: amount(b.hours) }), el("td", { class: "num", text: num(100 * b.share, 1) + "%" }),
      el("td", { class: "num", text: b.dollars == null ? "" : usd(b.dollars) }), el("td", { class: "num", text: b.count ? String(b.count) : "" }),
      el("td", { class: "muted", text: b.source })));
    sec.append(el("table", { "data-table": "ledger" }, el("thead", {}, el("tr", {}, ["bucket", gpuHours ? "GPU time" : "time", "share", "cost", "count", "measured by"]
      .map((h, k) => el("th", { class: k >= 1 && k <= 4 ? "num" : "", text: h })))), el("tbody", {}, rows)));
    if (ch && ch.job_phases && ch.job_phases.segments.length) sec.append(jobPhaseLane(ch.job_phases, i));
    const unknown = l.buckets.filter((b) => !b.known).map((b) => b.label || b.name);
    if (unknown.length) sec.append(el("p", { class: "muted", text: "Not seen by this source (not zero): " + unknown.join(", ") + "." }));
    for (const n of l.notes || []) sec.append(el("p", { class: "muted", text: n }));
    return sec;
  }

  // Each marked process (rank) of a job: its phases per step and, where the ranks
  // met at collectives, how late it arrived and how long it waited for the last.
  function rankTable(rec, i) {
    const m = rec.step_markers;
    if (!m || !m.by_process || m.by_process.length < 2) return null;
    const sync = m.rank_sync && m.rank_sync.matched_steps > 0;
    const ms = (v) => (v == null ? "–" : num(v, 1));
    const order = m.by_process.slice().sort((a, b) => (a.rank == null) - (b.rank == null) || (a.rank || 0) - (b.rank || 0) || a.pid - b.pid);
    const heads = ["rank", "step p50", "data", "forward", "backward", "optimizer", "communication", "rest"].concat(sync ? ["late", "waited", "arrived last"] : []);
    const rows = order.map((p) => el("tr", {}, [el("td", { text: p.label })].concat(
      [p.step_ms_p50, p.data_wait_ms_mean, p.phases_ms_mean.forward, p.phases_ms_mean.backward, p.phases_ms_mean.optimizer, p.phases_ms_mean.communication, p.untraced_ms_mean]
        .map((v) => el("td", { class: "num", text: ms(v) })),
      sync ? [el("td", { class: "num", text: ms(p.late_ms_p50) }), el("td", { class: "num", text: ms(p.waited_ms_p50) }),
        el("td", { class: "num", text: p.last_share == null ? "–" : num(100 * p.last_share, 0) + "%" })] : [])));
    const sec = el("div", { class: "ranks", id: "ranks-" + i }, el("h3", { text: "Per rank (ms per step)" }),
      el("p", { class: "muted", text: sync ? m.rank_sync.matched_steps + " steps every rank marked: arrivals at the collectives " + num(m.rank_sync.arrival_spread_ms_p50, 1) +
        " ms apart, releases " + num(m.rank_sync.release_spread_ms_p50, 1) + " ms apart (" + (m.rank_sync.synchronous ? "the ranks wait for each other" : "no sign the ranks wait for each other") + ")." :
        "The processes marked no step they share with both sync times: no arrival to compare." }),
      el("table", { "data-table": "ranks" }, el("thead", {}, el("tr", {}, heads.map((h, k) => el("th", { class: k ? "num" : "", text: h })))), el("tbody", {}, rows)));
    return sec;
  }

  function recordingSection(report, chartDoc, i, app) {
    const rec = report.recordings[i];
    const ch = chartDoc && chartDoc.recordings ? chartDoc.recordings.find((r) => r.recording === i) : null;
    const sec = el("section", { class: "recording", id: "recording-" + i },
      el("h2", { text: "Recording " + (i + 1) + ": " + rec.source.split("/").pop() }),
      el("p", { class: "muted", text: [rec.format, rec.device && rec.device.name, rec.rank != null ? "rank " + rec.rank : null, rec.phase ? rec.phase + " phase" : null].filter(Boolean).join(" · ") }));
    app.append(sec);
    if (ch) {
      const stepNote = ch.steps ? (ch.steps.drawn ? ch.steps.count + " steps (" + ch.steps.source + ") as dashed lines where they fit; drag to zoom." :
        ch.steps.count + " steps: too many to draw their boundaries; the waiting share shows the rhythm.") : "";
      const waitNote = ch.data_wait ? " Shaded red: share of time waiting for data (" + ch.data_wait.source + ")." : "";
      if (ch.busy)
        timelineChart(sec, "timeline-" + i + "-trace", "Kernel activity over time: " + ch.busy.label,
          "Share of each " + num(ch.busy.bucket_s * 1000) + " ms bucket with a kernel running (what utilization.gpu samples). " + stepNote + waitNote, ch, null, ch.busy);
      if (ch.gpus_note) sec.append(el("p", { class: "muted", text: ch.gpus_note }));
      // One instant (a single scrape, a one-row log): no timeline to draw; each
      // GPU's levels at that instant instead.
      const instant = ch.gpus.length > 0 && ch.gpus.every((g) => Object.values(g.series).every((s) => s.t_s.length < 2));
      if (instant) {
        const labels = [], values = [];
        const short = { gpu_util: "util", gr_engine_active: "GR", sm_active: "SM", tensor_active: "tensor", dram_active: "DRAM", job_sm_util: "job SM" };
        for (const g of ch.gpus)
          for (const name of Object.keys(short)) {  // the timelines' order: busy first, then the pipes
            if (!g.series[name]) continue;
            labels.push(g.label.replace("GPU ", "") + " " + short[name]);
            values.push(g.series[name].mean[0]);
          }
        categoryBars(sec, "instant-" + i, "Activity at the one instant recorded",
          "This recording holds a single instant (one scrape or row): each GPU's levels then, in percent; there is no timeline.",
          labels, values, "%", "GPU, series");
      }
      if (!instant) ch.gpus.forEach((g, k) => {
        timelineChart(sec, "timeline-" + i + "-gpu" + k, g.label + (g.name ? " (" + g.name + ")" : "") + ": utilization and activity",
          "Each point one pixel column: the line is the time-weighted mean, the band the lowest and highest sample in it. " + stepNote + waitNote,
          ch, g, null);
      });
    }
    // Step-time breakdown: the trace's categories, or the step markers' phases.
    const steps = rec.step_breakdown && rec.step_breakdown.steps;
    if (steps && steps.length && rec.steps_from_markers) {
      const cats = ["kernel", "memcpy", "memset", "communication", "runtime", "data_loader", "cpu_exec", "other"];
      stackedBars(sec, "steps-" + i, "Step time by category", "Each step's wall time, in torch-tb-profiler's categories (where several run at once, the earlier category takes the time).",
        steps.map((s) => s.step), "step", cats.map((c) => ({ label: c.replace("_", " "), values: steps.map((s) => s[c + "_ms"]), color: phaseColors[c] })));
    } else if (ch && ch.step_phases && ch.step_phases.step.length) {
      const p = ch.step_phases;
      const names = Object.keys(p.phases).filter((n) => p.phases[n].some((v) => v > 0));
      stackedBars(sec, "steps-" + i, "Step time by phase", (p.group > 1 ? "Each bar the mean of " + p.group + " consecutive steps. " : "") + "From the job's step markers (process " + (ch.steps ? ch.steps.pid : "") + ").",
        p.step, "step", names.map((n) => ({ label: n, values: p.phases[n], color: phaseColors[n] })));
    }
    if (ch && ch.step_memory) memoryChart(sec, "memory-" + i, ch, rec.step_memory);
    const ranks = rankTable(rec, i);
    if (ranks) sec.append(ranks);
    if (rec.idle && rec.idle.total_ms > 0) {
      const causes = ["data_loader", "host_wait", "launch_overhead", "synchronization", "other"];
      categoryBars(sec, "idle-" + i, "GPU idle time by cause", num(rec.idle.total_ms) + " ms idle within the steps, in " + rec.idle.gaps + " gaps.",
        causes.map((c) => c.replace("_", " ")), causes.map((c) => rec.idle[c + "_ms"] || 0), "ms");
    }
    const ledger = ledgerSection(rec, i, ch);
    if (ledger) sec.append(ledger);
    const kt = kernelTable(rec, i);
    if (kt) sec.append(kt);
    const issues = (rec.import && rec.import.issues) || [];
    const lim = rec.limitations || [];
    if (issues.length || lim.length)
      sec.append(el("details", {}, el("summary", { text: "What this recording cannot tell, and import notes" }),
        el("ul", {}, lim.map((l) => el("li", { text: l })), issues.map((x) => el("li", { text: x.kind + " (" + x.count + "): " + x.first })))));
  }

  function render(app, report, chartDoc, options) {
    options = options || {};
    charts.length = 0;
    app.textContent = "";
    const title = options.title || app.dataset.title || "report";
    app.append(topbar("gputriage: " + title,
      "gputriage " + ((report.tool && report.tool.version) || "") + " · report schema " + report.schema_version, options.nav));
    app.append(summarySection(report));
    const findings = (report.findings || []).slice().sort((a, b) => (severityOrder[a.severity] ?? 9) - (severityOrder[b.severity] ?? 9));
    app.append(el("h2", { text: "Verdicts" }));
    const cards = el("section", { class: "cards", id: "verdicts" });
    if (!findings.length) cards.append(el("p", { class: "empty", text: "No findings: nothing in these recordings crosses a threshold." }));
    for (const f of findings) cards.append(findingCard(f, report));
    app.append(cards);
    for (const n of report.notes || []) app.append(el("p", { class: "muted", text: n }));
    report.recordings.forEach((_, i) => recordingSection(report, chartDoc, i, app));
    const cost = costSection(report);
    if (cost) app.append(cost);
    document.documentElement.dataset.rendered = "true";
    // Read by bench/html_report_benchmark.sh: drawing done, and the frame that shows it painted.
    window.gputriageRenderedMs = performance.now();
    requestAnimationFrame(() => setTimeout(() => { window.gputriagePaintedMs = performance.now(); }, 0));
  }

  function renderEmbedded() {
    const app = document.getElementById("gputriage-app");
    try {
      const report = JSON.parse(document.getElementById("gputriage-report").textContent);
      const chartDoc = JSON.parse(document.getElementById("gputriage-charts").textContent);
      render(app, report, chartDoc);
    } catch (e) {
      app.append(el("p", { class: "error", text: "This report could not be drawn: " + e.message }));
      throw e;
    }
  }

  window.GputriageReport = { render, renderEmbedded, el, num, usd, addChart, axis, css, topbar };
})();
