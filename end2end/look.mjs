// Every page, as a person first sees it: at 1360 px in light mode and at 390 px in dark
// mode, signed out and signed in. Writes a full-page screenshot of each to OUT (default
// /tmp/standmeet-look) and prints every console error, failed request and uncaught
// exception a page gave while it loaded and hydrated; exits 1 if there was any.
//
// usage, against a running server with an admin:
//   STANDMEET_URL=… STANDMEET_ADMIN_EMAIL=… STANDMEET_ADMIN_PASSWORD=… node end2end/look.mjs
import { chromium } from "@playwright/test";
import { mkdirSync } from "node:fs";
import { signIn } from "./lib/sign-in.mjs";

const base = process.env.STANDMEET_URL ?? "http://127.0.0.1:3000";
const out = process.env.OUT ?? "/tmp/standmeet-look";
mkdirSync(out, { recursive: true });
const visitorPages = [
  "/", "/search?q=notes", "/request-access", "/access", "/book", "/book/cancel?token=none",
  "/login", "/account/confirm-email?token=none",
];
const adminPages = [
  "/admin", "/admin/tasks", "/admin/queues", "/admin/schedules", "/admin/access-requests",
  "/admin/listings", "/admin/corpus", "/admin/mail", "/admin/events", "/admin/webhooks",
  "/admin/bookings", "/admin/account",
];
// A list's first row leads to its detail page, when the list has one.
const detailOf = {
  "/admin/tasks": /\/admin\/tasks\/\d+/,
  "/admin/corpus": /\/admin\/corpus\/\d+/,
  "/admin/webhooks": /\/admin\/webhooks\/\d+/,
  "/search?q=notes": /\/entries\/\d+/,
};
const looks = [
  { name: "1360-light", viewport: { width: 1360, height: 900 }, colorScheme: "light" },
  { name: "390-dark", viewport: { width: 390, height: 844 }, colorScheme: "dark", isMobile: true, hasTouch: true },
];

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium", args: ["--no-sandbox"] });
let problems = 0;

async function look(context, label, path) {
  const page = await context.newPage();
  const said = [];
  page.on("console", (message) => message.type() === "error" && said.push(`console: ${message.text()}`));
  page.on("pageerror", (error) => said.push(`exception: ${error.message}`));
  page.on("requestfailed", (request) => said.push(`request failed: ${request.url()} ${request.failure()?.errorText}`));
  const reply = await page.goto(`${base}${path}`);
  if (path.startsWith("/admin")) {
    await page.waitForFunction(() => document.documentElement.dataset.shortcuts === "on", null, { timeout: 30_000 });
  } else {
    await page.waitForLoadState("networkidle");
  }
  const slug = path.replace(/[^a-z0-9]+/gi, "_").replace(/^_|_$/g, "") || "home";
  await page.screenshot({ path: `${out}/${label}-${slug}.png`, fullPage: true });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  if (overflow > 0) said.push(`wider than the window by ${overflow} px`);
  console.log(`${label} ${path} ${reply.status()}${said.length ? "\n  " + said.join("\n  ") : ""}`);
  problems += said.length;
  let detail = null;
  for (const [list, pattern] of Object.entries(detailOf)) {
    if (path === list) {
      const hrefs = await page.locator("a[href]").evaluateAll((links) => links.map((a) => a.getAttribute("href")));
      detail = hrefs.find((href) => pattern.test(href)) ?? null;
    }
  }
  await page.close();
  return detail;
}

for (const { name, ...options } of looks) {
  const signedOut = await browser.newContext(options);
  for (const path of visitorPages) {
    const detail = await look(signedOut, `${name}-out`, path);
    if (detail) await look(signedOut, `${name}-out`, detail);
  }
  await signedOut.close();
  const signedIn = await browser.newContext(options);
  await signIn(signedIn, base);
  for (const path of [...adminPages, ...visitorPages]) {
    const detail = await look(signedIn, `${name}-in`, path);
    if (detail) await look(signedIn, `${name}-in`, detail);
  }
  await signedIn.close();
}
await browser.close();
console.log(problems ? `${problems} problems` : "no problems");
process.exit(problems ? 1 : 0);
