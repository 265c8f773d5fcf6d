// `gputriage serve` in a real browser (from tests/serve_test.sh): the runs table
// lists the store's runs, filters and sorts them; a run opens on its report
// (verdict cards, drawn charts); ticking two runs compares them; the
// experiment's page draws its trend with the regression marked. No console
// error and no request beyond the server, on every page. Screenshots kept.
//   node serve_test.cjs BASE_URL ARTIFACT_DIR
"use strict";
const path = require("path");
const { launch, openPage, chartPixels, check, runTest } = require("./browser.cjs");

runTest(async () => {
  const [base, artifacts] = process.argv.slice(2);
  const origin = new URL(base).origin;
  const browser = await launch();
  const { page, context, log } = await openPage(browser);
  const rendered = () => page.waitForSelector("html[data-rendered=true]", { timeout: 30000 });
  try {
    // The runs table.
    await page.goto(base + "/", { waitUntil: "load" });
    await rendered();
    let ids = await page.$$eval("#runs tbody tr", (rows) => rows.map((r) => Number(r.dataset.run)));
    check(JSON.stringify(ids) === "[3,2,1]", `runs table lists the three runs, newest first (${ids})`);
    const badges = await page.$$eval("#runs tbody tr[data-run='3'] .badge", (b) => b.map((x) => x.textContent));
    check(badges.includes("regression") && badges.includes("input_bound"), `run 3 shows its verdicts (${badges})`);
    // Issue 53: each run's exit code is in the list.
    const exits = await page.$$eval("#runs tbody tr td[data-exit]", (tds) => tds.map((td) => td.textContent));
    check(exits.length === 3 && exits.every((x) => x === "0"), `the runs list shows each exit code (${exits})`);
    await page.screenshot({ path: path.join(artifacts, "serve-runs.png"), fullPage: true });
    // Sort by a column (ascending on the first click of a new column is descending; click twice).
    await Promise.all([page.waitForNavigation(), page.click("#runs th[data-key=id]")]);
    await rendered();
    ids = await page.$$eval("#runs tbody tr", (rows) => rows.map((r) => Number(r.dataset.run)));
    check(JSON.stringify(ids) === "[1,2,3]", `clicking the run column sorts ascending (${ids})`);
    // Filter by verdict.
    await page.selectOption("#filters select[name=verdict]", "regression");
    await Promise.all([page.waitForNavigation(), page.click("#filters button[type=submit]")]);
    await rendered();
    ids = await page.$$eval("#runs tbody tr", (rows) => rows.map((r) => Number(r.dataset.run)));
    // Runs 1 and 2 are one job recorded twice (serve_test.sh): on a busy machine run 2 may regress too.
    check(ids.includes(3) && !ids.includes(1), `the verdict filter keeps run 3 (${ids})`);
    check(page.url().includes("verdict=regression"), "the filter is in the address (shareable)");
    // Open a run.
    await Promise.all([page.waitForNavigation(), page.click("#runs a[href='/runs/3']")]);
    await rendered();
    const cards = await page.$$eval("[data-verdict]", (es) => es.map((e) => e.dataset.verdict));
    check(cards.includes("input_bound") && cards.includes("regression"), `run 3's report shows its verdict cards (${cards})`);
    const pixels = await chartPixels(page);
    check(pixels.length >= 2 && pixels.every((p) => p.data > 200), `run 3's charts are drawn (${pixels.map((p) => p.id + ":" + p.data)})`);
    // Its goodput ledger from the store: the bar, and the job's phases over time.
    const ledgerSegments = await page.$$eval(".ledger-segment", (es) => es.map((e) => e.dataset.bucket));
    check(ledgerSegments.includes("productive") && ledgerSegments.includes("data_wait"), `run 3's ledger bar is drawn (${ledgerSegments})`);
    const laneKinds = await page.$$eval(".phase-segment", (es) => es.map((e) => e.dataset.kind));
    check(laneKinds.includes("steps"), `run 3's phase lane is drawn (${laneKinds.length} segments)`);
    await page.screenshot({ path: path.join(artifacts, "serve-run.png"), fullPage: true });
    // Compare two runs from the table.
    await page.goto(base + "/", { waitUntil: "load" });
    await rendered();
    check(await page.$eval("#compare-selected", (b) => b.disabled), "compare is off until two runs are ticked");
    await page.check("#runs input[data-run='1']");
    await page.check("#runs input[data-run='3']");
    await Promise.all([page.waitForNavigation(), page.click("#compare-selected")]);
    await rendered();
    check(new URL(page.url()).search === "?a=1&b=3", `compare opens ?a=1&b=3 (${page.url()})`);
    const worse = await page.$$eval("[data-table=comparison] tr.worse", (r) => r.map((x) => x.dataset.metric));
    check(worse.includes("step_time_ms") || worse.includes("data_wait_percent"), `the comparison marks what got worse (${worse})`);
    // Shares change in points, as the terminal's compare says them (issue 41: "+60.5 points" there, "+334.8 %" here).
    const shareChange = await page.$$eval("[data-table=comparison] tr[data-metric=data_wait_percent] td", (tds) => tds.map((t) => t.textContent));
    check(shareChange.length >= 4 && / pts$/.test(shareChange[3]), `a share's change is in points (${shareChange})`);
    const changed = await page.textContent("main");
    check(changed.includes("tag.batch") && changed.includes("64") && changed.includes("128"), "the comparison lists the changed tag");
    await page.screenshot({ path: path.join(artifacts, "serve-compare.png"), fullPage: true });
    // The experiment's trend.
    await page.goto(base + "/experiments/loader-exp", { waitUntil: "load" });
    await rendered();
    const trend = await chartPixels(page);
    check(trend.length >= 2 && trend.every((p) => p.data > 100), `the trend charts are drawn (${trend.map((p) => p.id + ":" + p.data)})`);
    const regressionRows = await page.$$eval("[data-table=experiment] tr.regression", (r) => r.map((x) => Number(x.dataset.run)));
    check(regressionRows.includes(3) && !regressionRows.includes(1), `the trend marks run 3 as the regression (${regressionRows})`);
    // The marked point: red pixels in the step-time chart.
    const red = await page.$eval("[data-chart=trend-step_time_ms] canvas", (c) => {
      const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 0; i < d.length; i += 4) if (d[i] > 180 && d[i + 1] < 80 && d[i + 2] < 80 && d[i + 3] > 200) n++;
      return n;
    });
    check(red > 20, `the regression point is drawn in red (${red} pixels)`);
    await page.screenshot({ path: path.join(artifacts, "serve-experiment.png"), fullPage: true });
    // An error page says what is wrong.
    await page.goto(base + "/runs/99", { waitUntil: "load" });
    await rendered();
    const error = await page.textContent("[data-error]");
    check(/no run 99/.test(error), `a missing run says so (${error})`);
    log.console = log.console.filter((m) => !/404/.test(m));  // the missing run's fetch, expected
    const outside = log.requests.filter((u) => new URL(u).origin !== origin);
    check(outside.length === 0, `no request beyond the server (${outside.slice(0, 3)})`);
    check(log.console.length === 0, `no console errors (${log.console.slice(0, 3).join(" | ")})`);
    check(log.pageErrors.length === 0, `no page errors (${log.pageErrors.slice(0, 2).join(" | ")})`);
  } finally {
    await context.close();
    await browser.close();
  }
});
