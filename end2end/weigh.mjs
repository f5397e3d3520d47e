// Weighs and times a first visit of StandMeet's pages in Chromium, as docs/benchmarks.md
// reports them ("A first visit"): bytes on the wire with an empty cache (Accept-Encoding
// br, gzip), and the time until the page is usable on a slow phone (CPU 4× slower, a
// 1.6 Mbps / 150 ms network): a visitor's page once it has loaded (it carries no app
// code), a console page once hydrated (`<html data-shortcuts="on">`). Each page is
// loaded RUNS times in fresh contexts; the range over the runs is printed. HYDRATED=all
// waits for hydration on every page (for a build that hydrates the visitor's pages too).
//
// usage, against a running server (scripts/build --release, then the binary):
//   STANDMEET_URL=http://127.0.0.1:3000 STANDMEET_ADMIN_EMAIL=… STANDMEET_ADMIN_PASSWORD=… \
//     node end2end/weigh.mjs
import { chromium } from "@playwright/test";
import { signedInState } from "./lib/sign-in.mjs";

const base = process.env.STANDMEET_URL ?? "http://127.0.0.1:3000";
const email = process.env.STANDMEET_ADMIN_EMAIL;
const password = process.env.STANDMEET_ADMIN_PASSWORD;
const runs = Number(process.env.RUNS ?? 3);
const visitorPages = ["/", "/search?q=notes", "/request-access", "/access", "/book", "/login"];
// The jobs' pages come with the app's shell; one page of each other group of pages.
const adminPages = ["/admin", "/admin/tasks", "/admin/queues", "/admin/access-requests", "/admin/corpus"];

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});

async function visit(path, { storageState, slow }) {
  const context = await browser.newContext({ storageState });
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send("Network.enable");
  await cdp.send("Network.setCacheDisabled", { cacheDisabled: true });
  await cdp.send("Network.setExtraHTTPHeaders", { headers: { "Accept-Encoding": "br, gzip" } });
  if (slow) {
    await cdp.send("Emulation.setCPUThrottlingRate", { rate: 4 });
    await cdp.send("Network.emulateNetworkConditions", {
      offline: false,
      latency: 150,
      downloadThroughput: (1.6 * 1000 * 1000) / 8,
      uploadThroughput: (750 * 1000) / 8,
    });
  }
  let bytes = 0;
  cdp.on("Network.loadingFinished", (event) => (bytes += event.encodedDataLength));
  await page.goto(`${base}${path}`, { waitUntil: "load", timeout: 120_000 });
  if (path.startsWith("/admin") || process.env.HYDRATED === "all") {
    await page.waitForFunction(() => document.documentElement.dataset.shortcuts === "on", null, { timeout: 120_000 });
  }
  const usableMs = await page.evaluate(() => performance.now());
  const htmlMs = await page.evaluate(() => performance.getEntriesByType("navigation")[0].responseEnd);
  await context.close();
  return { bytes, usableMs, htmlMs };
}

const range = (values, digits = 0) => {
  const low = Math.min(...values);
  const high = Math.max(...values);
  return low.toFixed(digits) === high.toFixed(digits) ? low.toFixed(digits) : `${low.toFixed(digits)}–${high.toFixed(digits)}`;
};

const state = email && password ? await signedInState(browser, base) : undefined;
console.log("| page | KB on the wire | HTML arrived, slow phone (s) | usable, slow phone (s) |");
console.log("|---|---|---|---|");
for (const path of [...visitorPages, ...(state ? adminPages : [])]) {
  const storageState = path.startsWith("/admin") ? state : undefined;
  const weighed = await visit(path, { storageState, slow: false });
  const timed = [];
  for (let run = 0; run < runs; run++) timed.push(await visit(path, { storageState, slow: true }));
  console.log(
    `| \`${path}\` | ${(weighed.bytes / 1000).toFixed(1)} | ${range(timed.map((t) => t.htmlMs / 1000), 1)} | ${range(timed.map((t) => t.usableMs / 1000), 1)} |`,
  );
}
await browser.close();
