// `gputriage serve`'s pages. One script for every address: it reads the path,
// asks the JSON API (src/serve/serve_api.h) and draws the runs table, a run's
// report (report.js, the same as the offline file), a comparison of two runs,
// or an experiment's trend with its regressions marked.
/* global uPlot, GputriageReport */
"use strict";
(function () {
  const R = GputriageReport;
  const el = R.el, num = R.num;
  const app = document.getElementById("gputriage-app");

  async function api(path) {
    const res = await fetch(path, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    let body = null;
    try { body = await res.json(); } catch (e) { /* not JSON */ }
    if (!res.ok) throw new Error((body && body.error) || `${path}: HTTP ${res.status}`);
    return body;
  }
  function nav() {
    return el("nav", {}, el("a", { href: "/" }, "Runs"));
  }
  function header(title, subtitle) {
    document.title = "gputriage: " + title;
    return R.topbar(title, subtitle, nav());
  }
  function showError(e) {
    app.append(el("p", { class: "error", "data-error": "true", text: String(e.message || e) }));
    document.documentElement.dataset.rendered = "true";
  }
  function when(ns) {
    if (!ns) return "";
    const d = new Date(ns / 1e6);
    const pad = (x) => String(x).padStart(2, "0");
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
  }
  function duration(r) {
    if (!r.ended_ns || !r.started_ns) return "";
    const s = (r.ended_ns - r.started_ns) / 1e9;
    return s < 120 ? num(s, 0) + " s" : s < 7200 ? num(s / 60, 0) + " min" : num(s / 3600, 1) + " h";
  }

  // ---- the runs table -------------------------------------------------------
  const columns = [
    { key: "id", label: "run", num: true }, { key: "started", label: "started" }, { key: "name", label: "name" },
    { key: "status", label: "status" }, { key: "exit_code", label: "exit", num: true },
    { key: "duration", label: "duration", num: true }, { key: "gpus", label: "GPUs", num: true },
    { key: "gpu_util_mean_percent", label: "util", num: true }, { key: "step_time_ms", label: "step ms", num: true },
    { key: "data_wait_percent", label: "data wait", num: true }, { key: null, label: "verdicts" }, { key: "command", label: "command" }];

  async function runsPage() {
    const params = new URLSearchParams(location.search);
    app.append(header("Runs", "the run store's recordings; click a run for its report, tick two to compare"));
    const form = el("form", { class: "filters no-print", id: "filters" });
    const field = (name, placeholder) => el("input", { name, placeholder, value: params.get(name) || "", size: 18 });
    const verdictSelect = el("select", { name: "verdict" }, el("option", { value: "" }, "any verdict"));
    const compareButton = el("button", { type: "button", id: "compare-selected", disabled: true }, "Compare selected");
    form.append(field("name", "name contains"), field("tag", "tag (key or key=value)"), verdictSelect, field("q", "command, host"),
      el("button", { type: "submit" }, "Filter"), compareButton);
    app.append(form);
    const status = el("p", { class: "muted", id: "runs-status" });
    const table = el("table", { id: "runs", "data-table": "runs" });
    app.append(status, table);
    const selected = new Set();
    compareButton.addEventListener("click", () => {
      const [a, b] = [...selected].sort((x, y) => x - y);
      location.href = `/compare?a=${a}&b=${b}`;
    });
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const next = new URLSearchParams();
      for (const [k, v] of new FormData(form)) if (v) next.set(k, v);
      for (const k of ["sort", "order"]) if (params.get(k)) next.set(k, params.get(k));
      location.search = next.toString();
    });
    const query = new URLSearchParams();
    for (const k of ["name", "tag", "verdict", "q", "sort", "order", "limit", "offset"]) if (params.get(k)) query.set(k, params.get(k));
    const page = await api("/api/runs?" + query.toString());
    for (const v of page.verdicts) verdictSelect.append(el("option", { value: v, selected: params.get("verdict") === v }, v));
    status.textContent = `${page.total} run${page.total === 1 ? "" : "s"}` + (page.total > page.runs.length ? `, showing ${page.offset + 1}–${page.offset + page.runs.length}` : "");
    const sort = params.get("sort") || "id", order = params.get("order") || "desc";
    const head = el("tr", {}, el("th", { class: "no-print" }), columns.map((c) => {
      if (!c.key) return el("th", { text: c.label });
      const cls = "sortable" + (c.num ? " num" : "") + (c.key === sort ? (order === "asc" ? " sorted-asc" : " sorted-desc") : "");
      return el("th", { class: cls, "data-key": c.key, text: c.label, onclick: () => {
        const next = new URLSearchParams(params);
        next.set("sort", c.key);
        next.set("order", c.key === sort && order === "desc" ? "asc" : "desc");
        location.search = next.toString();
      } });
    }));
    const body = el("tbody");
    for (const r of page.runs) {
      const f = r.figures || {};
      const box = el("input", { type: "checkbox", "data-run": r.id, onchange: (e) => {
        if (e.target.checked) selected.add(r.id); else selected.delete(r.id);
        compareButton.disabled = selected.size !== 2;
      } });
      // One badge per verdict (a trace and the metrics may both have found it), at its most severe.
      const rank = { high: 3, moderate: 2, low: 1, info: 0 };
      const byVerdict = new Map();
      for (const x of r.findings || []) {
        const seen = byVerdict.get(x.verdict);
        if (!seen || rank[x.severity] > rank[seen.severity]) byVerdict.set(x.verdict, x);
      }
      const verdicts = el("td", {}, [...byVerdict.values()].map((x) => el("span", { class: "badge sev-" + x.severity, title: x.title, text: x.verdict })));
      body.append(el("tr", { "data-run": r.id },
        el("td", { class: "no-print" }, box),
        el("td", { class: "num" }, el("a", { href: `/runs/${r.id}` }, String(r.id))),
        el("td", { text: when(r.started_ns) }),
        el("td", {}, r.name ? el("a", { href: `/experiments/${encodeURIComponent(r.name)}` }, r.name) : ""),
        el("td", { text: r.status }),
        // How the job ended (issue 53: the list had no exit code): 137 is a kill, 1 a failure.
        el("td", { class: "num" + (r.exit_code ? " failed" : ""), "data-exit": r.exit_code == null ? "" : String(r.exit_code),
          text: r.exit_code == null ? "" : String(r.exit_code) }),
        el("td", { class: "num", text: duration(r) }), el("td", { class: "num", text: r.devices }),
        el("td", { class: "num", text: f.gpu_util_mean_percent != null ? num(f.gpu_util_mean_percent, 1) + "%" : "" }),
        el("td", { class: "num", text: f.step_time_ms != null ? num(f.step_time_ms) : "" }),
        el("td", { class: "num", text: f.data_wait_percent != null ? num(f.data_wait_percent, 1) + "%" : "" }),
        verdicts, el("td", { class: "kernel-name", text: r.command })));
    }
    table.append(el("thead", {}, head), body);
    if (!page.runs.length) app.append(el("p", { class: "empty", text: "No run matches." }));
    document.documentElement.dataset.rendered = "true";
  }

  // ---- one run ---------------------------------------------------------------
  async function runPage(id) {
    const [report, charts] = await Promise.all([api(`/api/runs/${id}/report`), api(`/api/runs/${id}/charts`)]);
    const rec = report.recordings[0] || {};
    const name = rec.settings && rec.settings.name;
    R.render(app, report, charts, {
      title: `run ${id}` + (name ? ` (${name})` : ""),
      nav: el("span", {}, nav(), name ? el("a", { href: `/experiments/${encodeURIComponent(name)}` }, "Experiment") : null, " "),
    });
  }

  // ---- two runs ---------------------------------------------------------------
  async function comparePage() {
    const params = new URLSearchParams(location.search);
    const a = params.get("a"), b = params.get("b");
    app.append(header(`Compare run ${a} with run ${b}`, "B against A: each figure, what changed, and the change most likely behind each move"));
    const c = await api(`/api/compare?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`);
    app.append(el("p", {}, el("a", { href: `/runs/${a}` }, `A: run ${a}`), " · ", el("a", { href: `/runs/${b}` }, `B: run ${b}`)));
    const withUnit = (v, unit) => (v == null ? "n/a" : unit === "percent" ? num(v, 1) + "%" : num(v) + " " + unit);
    const rows = c.metrics.map((m) => el("tr", { class: m.worse ? "worse" : m.better ? "better" : "", "data-metric": m.metric },
      el("td", { text: m.metric }), el("td", { class: "num", text: withUnit(m.before, m.unit) }),
      el("td", { class: "num", text: withUnit(m.after, m.unit) }),
      // Shares move in points, as the terminal's compare says them: 8.6% → 42.0% is +33.4 pts, not +387%.
      el("td", { class: "num", text: m.unit === "percent" && m.before != null && m.after != null
        ? (m.after - m.before > 0 ? "+" : "") + num(m.after - m.before, 1) + " pts"
        : m.change_percent == null ? "" : (m.change_percent > 0 ? "+" : "") + num(m.change_percent, 1) + "%" }),
      el("td", {}, m.worse ? el("span", { class: "badge sev-high", text: "worse" }) : m.better ? el("span", { class: "badge sev-info", text: "better" }) : "")));
    app.append(el("h2", { text: "Figures" }), el("table", { "data-table": "comparison" },
      el("thead", {}, el("tr", {}, ["figure", "A", "B", "change", ""].map((h, i) => el("th", { class: i && i < 4 ? "num" : "", text: h })))),
      el("tbody", {}, rows)));
    app.append(el("h2", { text: "What changed" }));
    if (!c.config_changes.length) app.append(el("p", { class: "empty", text: "No recorded setting differs." }));
    else app.append(el("table", {}, el("tbody", {}, c.config_changes.map((ch) => el("tr", {}, el("td", { text: ch.key }),
      el("td", { text: ch.before ?? "–" }), el("td", { text: "→" }), el("td", { text: ch.after ?? "–" }))))));
    if (c.explanations.length) app.append(el("h2", { text: "Why it moved" }), el("ul", {}, c.explanations.map((e) => el("li", { text: e.text }))));
    app.append(el("h2", { text: "Verdicts" }), el("p", {}, "A: " + (c.verdicts.a.join(", ") || "none")), el("p", {}, "B: " + (c.verdicts.b.join(", ") || "none")));
    document.documentElement.dataset.rendered = "true";
  }

  // ---- an experiment's trend ----------------------------------------------------
  const trendFigures = [
    ["step_time_ms", "step time", "ms"], ["samples_per_s", "samples/s", ""], ["gpu_util_mean_percent", "utilization", "%"],
    ["gpu_busy_percent", "GPU busy", "%"], ["data_wait_percent", "data wait", "%"], ["tensor_core_percent_of_matrix_time", "tensor-core share", "%"],
    ["mfu_percent", "MFU", "%"]];

  async function experimentPage(name) {
    app.append(header(`Experiment ${name}`, "its complete runs, oldest first; red points are runs judged a regression against the runs before them"));
    const exp = await api(`/api/experiments/${encodeURIComponent(name)}`);
    const runs = exp.runs;
    const xs = runs.map((_, i) => i);
    const section = el("section", { id: "trend" });
    app.append(section);
    for (const [key, label, unit] of trendFigures) {
      const values = runs.map((r) => (r.figures && r.figures[key] != null ? r.figures[key] : null));
      if (values.every((v) => v == null)) continue;
      const marked = runs.map((r, i) => (r.regression ? values[i] : null));
      R.addChart(section, "trend-" + key, label + " by run", null, () => {
        const css = R.css, axis = R.axis;
        return {
          data: [xs, values, marked],
          opts: {
            height: 200,
            scales: { x: { time: false, range: (u, min, max) => [min - 0.5, max + 0.5] } },
            series: [
              { label: "run", value: (u, v) => (v == null || !runs[v] ? "" : "run " + runs[v].id) },
              { label, stroke: css("--util"), width: 1.5, spanGaps: true, points: { show: true, size: 5 },
                value: (u, v) => (v == null ? "–" : num(v) + (unit ? " " + unit : "")) },
              { label: "regression", stroke: css("--sev-high"), width: 0, paths: () => null,
                points: { show: true, size: 11, fill: css("--sev-high"), stroke: css("--sev-high") },
                value: (u, v) => (v == null ? "" : "regressed") }],
            axes: [axis({ splits: () => xs, values: (u, splits) => splits.map((i) => (runs[i] ? String(runs[i].id) : "")) }),
              axis({ values: (u, splits) => splits.map((v) => num(v) + (unit === "%" ? "%" : unit ? " " + unit : "")), size: 70 })],
          },
        };
      });
    }
    const rows = runs.map((r) => el("tr", { "data-run": r.id, class: r.regression ? "regression" : "" },
      el("td", { class: "num" }, el("a", { href: `/runs/${r.id}` }, String(r.id))), el("td", { text: when(r.started_ns) }),
      el("td", {}, r.regression ? el("span", { class: "badge sev-high", text: "regression" }) : ""),
      el("td", {}, r.findings.map((f) => el("span", { class: "badge sev-" + f.severity, title: f.title, text: f.verdict }))),
      el("td", { text: r.changes_from_previous.map((c) => `${c.key}: ${c.before ?? "–"} → ${c.after ?? "–"}`).join("; ") })));
    app.append(el("h2", { text: "Runs" }), el("table", { "data-table": "experiment" },
      el("thead", {}, el("tr", {}, ["run", "started", "", "verdicts", "changed since the run before"].map((h) => el("th", { text: h })))),
      el("tbody", {}, rows)));
    document.documentElement.dataset.rendered = "true";
  }

  const path = location.pathname;
  let page;
  if (path === "/") page = runsPage();
  else if (/^\/runs\/\d+$/.test(path)) page = runPage(path.split("/")[2]);
  else if (path === "/compare") page = comparePage();
  else if (path.startsWith("/experiments/")) page = experimentPage(decodeURIComponent(path.slice("/experiments/".length)));
  else page = Promise.reject(new Error("no such page: " + path));
  page.catch(showError);
})();
