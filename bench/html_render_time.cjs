// Time to first render of HTML reports in headless Chromium (Debian's, driven by
// playwright-core): from navigation start to the frame that shows the drawn
// report (the page records performance.now() after the paint that follows its
// drawing), and Chromium's first contentful paint. Median of RUNS fresh pages per file.
//   node bench/html_render_time.cjs RUNS FILE...
"use strict";
const path = require("path");
const { pathToFileURL } = require("url");
const { launch, openPage } = require("../tests/browser/browser.cjs");

(async () => {
  const [runsArg, ...files] = process.argv.slice(2);
  const runs = Number(runsArg) || 5;
  const browser = await launch();
  const results = {};
  for (const file of files) {
    const rendered = [], fcp = [];
    for (let i = 0; i < runs; i++) {
      const { page, context, log } = await openPage(browser);
      await page.goto(pathToFileURL(path.resolve(file)).href, { waitUntil: "load" });
      await page.waitForSelector("html[data-rendered=true]", { timeout: 120000 });
      await page.waitForFunction(() => window.gputriagePaintedMs !== undefined, null, { timeout: 120000 });
      const t = await page.evaluate(() => ({
        rendered: window.gputriagePaintedMs,
        fcp: (performance.getEntriesByName("first-contentful-paint")[0] || {}).startTime,
      }));
      if (log.console.length || log.pageErrors.length) throw new Error(`${file}: ${log.console.concat(log.pageErrors).join(" | ")}`);
      rendered.push(t.rendered);
      if (t.fcp != null) fcp.push(t.fcp);
      await context.close();
    }
    const median = (a) => a.slice().sort((x, y) => x - y)[Math.floor(a.length / 2)];
    results[file] = { rendered_ms: median(rendered), fcp_ms: fcp.length ? median(fcp) : null };
  }
  await browser.close();
  console.log(JSON.stringify(results));
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
