// The HTML report in a real browser (ctest html_report_browser): for each report
// named on the command line, with the verdicts it must show, the page loads with
// no console error and no network request, every verdict card of the report
// document is there, each chart's canvas has drawn pixels, the kernel table
// sorts, every goodput ledger draws its bar at its buckets' shares, and both themes draw. Screenshots go to the artifacts directory.
//   node report_test.cjs ARTIFACT_DIR REPORT.html[=verdict,verdict...] ...
"use strict";
const fs = require("fs");
const path = require("path");
const { pathToFileURL } = require("url");
const { launch, openPage, chartPixels, check, runTest } = require("./browser.cjs");

let ledgers = 0;  // goodput-ledger bars checked, over every report

async function checkReport(browser, file, expectedVerdicts, artifacts) {
  const name = path.basename(file, ".html");
  const { page, context, log } = await openPage(browser);
  const url = pathToFileURL(path.resolve(file)).href;
  await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector("html[data-rendered=true]", { timeout: 30000 });
  // The report document the page was built from: every finding must have its card.
  const report = JSON.parse(await page.$eval("#gputriage-report", (e) => e.textContent));
  const cards = await page.$$eval("[data-verdict]", (es) => es.map((e) => e.dataset.verdict));
  check(cards.length === report.findings.length, `${name}: ${cards.length} verdict cards for ${report.findings.length} findings`);
  for (const f of report.findings) check(cards.includes(f.verdict), `${name}: card for ${f.verdict}`);
  for (const v of expectedVerdicts) check(cards.includes(v), `${name}: expected verdict ${v} is shown`);
  const cardText = await page.$$eval("[data-verdict]", (es) => es.map((e) => e.textContent));
  // The page shows bidirectional controls as escapes (\u202e): so does the comparison.
  const visible = (s) => s.replace(/[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g,
    (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  report.findings.forEach((f, i) => {
    const text = cardText.find((t) => t.includes(visible(f.title)));
    check(text !== undefined, `${name}: card ${i} shows its title "${f.title.slice(0, 60)}"`);
    for (const e of f.evidence) check(text !== undefined && text.includes(e.name), `${name}: card ${f.verdict} shows evidence ${e.name}`);
    if (f.recommendations.length) check(text !== undefined && text.includes(f.recommendations[0].action), `${name}: card ${f.verdict} shows its fix`);
  });
  // Gain ranges read low to high (issue 24: "26.7 % – 19.8 %" was printed for a level where higher is better).
  for (const t of cardText) {
    const m = t.match(/range (-?[\d.,]+)[^–]*– (-?[\d.,]+)/);
    if (m) check(parseFloat(m[1].replace(/,/g, "")) <= parseFloat(m[2].replace(/,/g, "")), `${name}: gain ${m[0]} reads low to high`);
  }
  // Every recording with a goodput ledger draws its bar: one segment per bucket
  // with time, widths adding up to the whole bar, and a table row for each.
  for (const [i, rec] of report.recordings.entries()) {
    if (!rec.ledger || !rec.ledger.buckets) continue;
    const shown = rec.ledger.buckets.filter((b) => b.known && b.hours > 0);
    const segments = await page.$$eval(`#ledger-${i} .ledger-segment`, (es) =>
      es.map((e) => ({ bucket: e.dataset.bucket, width: e.getBoundingClientRect().width, bar: e.parentElement.getBoundingClientRect().width })));
    check(segments.length === shown.length, `${name}: ledger ${i} draws ${segments.length} segments for ${shown.length} buckets`);
    const drawn = segments.reduce((a, s) => a + s.width, 0);
    check(segments.length > 0 && Math.abs(drawn - segments[0].bar) <= shown.length + 1, `${name}: ledger ${i}'s segments fill the bar (${drawn.toFixed(1)} of ${segments.length ? segments[0].bar : 0} px)`);
    for (const b of shown) {
      const seg = segments.find((x) => x.bucket === b.name);
      check(seg !== undefined && Math.abs(seg.width / seg.bar - b.share) < 0.01 + 1 / seg.bar, `${name}: ledger ${i} ${b.name} drawn at its share ${b.share.toFixed(3)}`);
    }
    // Issue 53: each bucket in its own colour (between_steps and idle, hang, crash and lost_work shared one).
    const colours = await page.$$eval(`#ledger-${i} .ledger-segment`, (es) => es.map((e) => getComputedStyle(e).backgroundColor));
    check(new Set(colours).size === colours.length, `${name}: ledger ${i}'s buckets each have their own colour (${colours.join(", ")})`);
    const rows = await page.$$eval(`#ledger-${i} [data-table=ledger] tbody tr`, (trs) => trs.length);
    check(rows === shown.length, `${name}: ledger ${i} table has ${rows} rows for ${shown.length} buckets`);
    // A ledger from step markers draws the job's phases over time inside its lane.
    if (rec.step_markers) {
      const lane = await page.$$eval(`#phases-${i} .phase-segment`, (es) => es.map((e) => {
        const r = e.getBoundingClientRect(), p = e.parentElement.getBoundingClientRect();
        return { kind: e.dataset.kind, inside: r.left >= p.left - 0.5 && r.right <= p.right + 0.5 && r.width > 0 };
      }));
      check(lane.some((x) => x.kind === "steps"), `${name}: ledger ${i}'s phase lane draws the steps (${lane.length} segments)`);
      check(lane.every((x) => x.inside), `${name}: ledger ${i}'s phase segments lie inside the lane`);
    }
    ledgers += 1;
  }
  // A job of several ranks: a row per rank in its table, each named by its label.
  for (const [i, rec] of report.recordings.entries()) {
    const procs = rec.step_markers && rec.step_markers.by_process;
    if (!procs || procs.length < 2) continue;
    const rows = await page.$$eval(`#ranks-${i} [data-table=ranks] tbody tr td:first-child`, (tds) => tds.map((td) => td.textContent));
    check(rows.length === procs.length, `${name}: rank table ${i} has ${rows.length} rows for ${procs.length} processes`);
    for (const p of procs) check(rows.includes(p.label), `${name}: rank table ${i} names ${p.label}`);
  }
  // Memory at step ends: its chart over time, and what the peak held where the job counted it.
  for (const [i, rec] of report.recordings.entries()) {
    const sm = rec.step_memory;
    if (!sm) continue;
    check((await page.$$(`[data-chart="memory-${i}"] canvas`)).length > 0, `${name}: recording ${i} draws its memory`);
    if (sm.static && sm.static.parameters_bytes != null)
      check((await page.$$(`[data-chart="memory-${i}-peak"] canvas`)).length > 0, `${name}: recording ${i} draws what its peak held`);
  }
  const pixels = await chartPixels(page);
  check(pixels.length > 0, `${name}: ${pixels.length} charts`);
  for (const p of pixels) check(p.data > 200, `${name}: chart ${p.id} drew its data (${p.data} coloured of ${p.drawn} pixels)`);
  // The kernel table sorts on a click of its header.
  const tables = await page.$$("[data-table^=kernels] table");
  if (tables.length) {
    const firstCell = () => page.$eval("[data-table^=kernels] tbody tr td", (td) => td.textContent);
    const before = await firstCell();
    await page.click("[data-table^=kernels] th[data-key=count]");
    await page.click("[data-table^=kernels] th[data-key=count]");
    const counts = await page.$$eval("[data-table^=kernels] tbody tr", (rows) =>
      rows.map((r) => Number(r.children[4].textContent.replace(/,/g, ""))));
    check(counts.every((c, i) => i === 0 || counts[i - 1] <= c), `${name}: kernel table sorts by calls (ascending on the second click)`);
    check(typeof before === "string" && before.length > 0, `${name}: kernel table has rows`);
    // Names that a trace controls: at most 200 characters in a cell (the tooltip
    // has them whole) and no bidirectional control left raw (issue 24).
    const names = await page.$$eval("[data-table^=kernels] td.kernel-name", (tds) => tds.map((td) => td.textContent));
    check(names.every((n) => n.length <= 240), `${name}: kernel names fit their cells (longest ${Math.max(...names.map((n) => n.length))})`);
    check(names.every((n) => !/[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/.test(n)), `${name}: no raw bidi control in a kernel name`);
  }
  await page.screenshot({ path: path.join(artifacts, `${name}-light.png`), fullPage: true });
  // The top of the page (verdicts, then the first charts): the README's picture is one of these.
  const height = await page.evaluate(() => document.documentElement.scrollHeight);
  await page.screenshot({ path: path.join(artifacts, `${name}-top.png`), fullPage: true,
    clip: { x: 0, y: 0, width: 1400, height: Math.min(height, 2000) } });
  // Dark theme: every chart is drawn again in its colours.
  await page.click("#theme-toggle");
  check(await page.evaluate(() => document.documentElement.dataset.theme) === "dark", `${name}: theme toggles to dark`);
  const dark = await chartPixels(page);
  for (const p of dark) check(p.data > 200, `${name}: dark chart ${p.id} drew its data (${p.data} coloured pixels)`);
  await page.screenshot({ path: path.join(artifacts, `${name}-dark.png`), fullPage: true });
  // Print: light, every card and chart laid out (a PDF of the page).
  await page.emulateMedia({ media: "print" });
  await page.pdf({ path: path.join(artifacts, `${name}.pdf`), printBackground: true }).catch(() => {});
  await page.emulateMedia({ media: "screen" });
  // A narrow window: charts follow the width.
  await page.setViewportSize({ width: 700, height: 900 });
  await page.waitForTimeout(300);
  const widths = await page.$$eval("[data-chart] canvas", (cs) => cs.map((c) => c.getBoundingClientRect().width));
  check(widths.every((w) => w <= 700), `${name}: charts fit a 700 px window (widest ${Math.max(...widths)} px)`);
  const offsite = log.requests.filter((u) => u !== url);
  check(offsite.length === 0, `${name}: no network request (${offsite.slice(0, 3).join(", ")})`);
  check(log.console.length === 0, `${name}: no console errors or warnings (${log.console.slice(0, 3).join(" | ")})`);
  check(log.pageErrors.length === 0, `${name}: no page errors (${log.pageErrors.slice(0, 2).join(" | ")})`);
  await context.close();
}

runTest(async () => {
  const [artifacts, ...reports] = process.argv.slice(2);
  if (!artifacts || reports.length === 0) {
    console.error("usage: node report_test.cjs ARTIFACT_DIR REPORT.html[=verdict,...] ...");
    process.exit(2);
  }
  fs.mkdirSync(artifacts, { recursive: true });
  const browser = await launch();
  try {
    for (const arg of reports) {
      const [file, verdicts] = arg.split("=");
      await checkReport(browser, file, verdicts ? verdicts.split(",") : [], artifacts);
    }
    // The marked loop (a recorder's ledger) at least.
    check(ledgers >= 1, `${ledgers} goodput ledgers drawn`);
  } finally {
    await browser.close();
  }
});
