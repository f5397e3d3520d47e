// When each file of a console page's first load arrives on the slow phone of
// end2end/weigh.mjs (CPU 4× slower, 1.6 Mbps / 150 ms), and when the page is hydrated:
// how docs/benchmarks.md found that a page's chunks waited for the app's shell.
//
// usage, against a running release server with an admin:
//   STANDMEET_URL=… STANDMEET_ADMIN_EMAIL=… STANDMEET_ADMIN_PASSWORD=… \
//     node end2end/timeline.mjs [/admin/tasks]
import { chromium } from "@playwright/test";
import { signedInState } from "./lib/sign-in.mjs";
const base = process.env.STANDMEET_URL ?? "http://127.0.0.1:3000";
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] });
const state = await signedInState(browser, base);
const context = await browser.newContext({ storageState: state });
const page = await context.newPage();
const cdp = await context.newCDPSession(page);
await cdp.send("Network.enable");
await cdp.send("Network.setCacheDisabled", { cacheDisabled: true });
await cdp.send("Emulation.setCPUThrottlingRate", { rate: 4 });
await cdp.send("Network.emulateNetworkConditions", { offline: false, latency: 150, downloadThroughput: 200000, uploadThroughput: 93750 });
await page.goto(`${base}${process.argv[2] ?? "/admin/tasks"}`);
await page.waitForFunction(() => document.documentElement.dataset.shortcuts === "on", null, { timeout: 60000 });
const t = await page.evaluate(() => ({ now: performance.now(), res: performance.getEntriesByType("resource").map((r) => [r.name.split("/").pop().slice(0, 30), Math.round(r.startTime), Math.round(r.responseEnd), r.encodedBodySize]) }));
console.log("hydrated at", Math.round(t.now));
for (const r of t.res) console.log(r.join("\t"));
await browser.close();
