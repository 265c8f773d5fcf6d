// Shared by the browser tests: Debian's Chromium driven by playwright-core
// (never a downloaded browser), headless, with the flags that keep it off the
// network, and the checks every page gets: no console error, no page error, no
// request leaving the page's own origin (none at all for a file:// report).
// Playwright gives each launch a new empty profile of its own.
"use strict";
const fs = require("fs");
const { chromium } = require("playwright-core");

const executablePath = process.env.GPUTRIAGE_CHROMIUM || "/usr/bin/chromium";

async function launch() {
  if (!fs.existsSync(executablePath)) throw new Error(`${executablePath} is missing (scripts/bootstrap.sh installs Debian's chromium)`);
  const browser = await chromium.launch({
    executablePath,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
  });
  return browser;
}

/// A page that records what the checks look at.
async function openPage(browser, options) {
  const context = await browser.newContext(Object.assign({ viewport: { width: 1400, height: 900 } }, options || {}));
  const page = await context.newPage();
  const log = { console: [], pageErrors: [], requests: [] };
  page.on("console", (m) => {
    // Chromium's hint after repeated getImageData calls: the checks' own pixel reads, not the page's.
    if (m.type() === "warning" && m.text().includes("willReadFrequently")) return;
    if (m.type() === "error" || m.type() === "warning") log.console.push(`${m.type()}: ${m.text()}`);
  });
  page.on("pageerror", (e) => log.pageErrors.push(String(e && e.stack || e)));
  page.on("request", (r) => log.requests.push(r.url()));
  return { page, context, log };
}

/// Per chart element: pixels drawn at all (axes, grid and labels too) and pixels
/// of the data (saturated colour: every series, band and bar is coloured, while
/// axes, grid and text are grey in both themes), so an empty plot cannot pass.
async function chartPixels(page) {
  return page.$$eval("[data-chart]", (boxes) => boxes.map((box) => {
    let drawn = 0, data = 0;
    for (const canvas of box.querySelectorAll("canvas")) {
      const ctx = canvas.getContext("2d");
      if (!ctx || !canvas.width || !canvas.height) continue;
      const d = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
      for (let i = 0; i < d.length; i += 4) {
        if (d[i + 3] === 0) continue;
        drawn++;
        const hi = Math.max(d[i], d[i + 1], d[i + 2]), lo = Math.min(d[i], d[i + 1], d[i + 2]);
        if (hi - lo > 60 && d[i + 3] > 40) data++;
      }
    }
    return { id: box.dataset.chart, drawn, data };
  }));
}

let failures = 0;
function check(ok, what) {
  if (ok) {
    console.log(`ok   ${what}`);
  } else {
    failures++;
    console.log(`FAIL ${what}`);
  }
}
function failed() { return failures; }

/// Runs a test's main and exits 0 only when it finished with every check passed.
function runTest(main) {
  main().then(() => {
    if (failures) {
      console.log(`${failures} checks failed`);
      process.exit(1);
    }
    console.log("all checks passed");
  }, (e) => {
    console.error(e);
    process.exit(1);
  });
}

module.exports = { launch, openPage, chartPixels, check, failed, runTest };
