// What a first visit costs on the wire (docs/reference/README.md#weight): every byte Chromium
// receives for a page with an empty cache (HTML, CSS, scripts, wasm, images), counted
// from the DevTools protocol's `Network.loadingFinished` (`encodedDataLength`: headers
// and body as they came over the connection, compressed), for a browser that sends
// `Accept-Encoding: br, gzip`. scripts/test runs the browser specs on the release
// build, so these are the bytes a user downloads.
//
// The budgets (docs/reference/README.md#weight), and what this spec measured when they were set
// (2026-12-06, the release build of #67; docs/benchmarks.md has the table):
//   a visitor's page   100 KB   measured 12.4–12.6 KB: HTML 4.2–4.4, CSS 7.6, icon 0.6
//   /admin             900 KB   measured 452.0 KB once the wasm was cut into chunks (the
//                               shell 208 KB and the jobs' group 210 KB, brotli); 801.1 KB
//                               when the whole wasm came to every console page; about 320
//                               KB with component types erased and the jobs' pages in the
//                               shell (docs/benchmarks.md)
import { type CDPSession, expect, type Page, test } from "@playwright/test";
import { signInAsAdmin } from "./fixtures/admin";
import { promotedEntry } from "./fixtures/corpus_page";

const KB = 1000;
const VISITOR_BUDGET = 100 * KB;
const ADMIN_BUDGET = 900 * KB;

/** Requests of one page load as the protocol reports them. */
class Wire {
  private readonly urls = new Map<string, string>();
  private readonly types = new Map<string, string>();
  private readonly bytes = new Map<string, number>();
  private readonly failed = new Set<string>();

  static async open(page: Page): Promise<Wire> {
    const wire = new Wire();
    const cdp: CDPSession = await page.context().newCDPSession(page);
    await cdp.send("Network.enable");
    // An empty cache for every request of the load, as on a first visit.
    await cdp.send("Network.setCacheDisabled", { cacheDisabled: true });
    await cdp.send("Network.setExtraHTTPHeaders", { headers: { "Accept-Encoding": "br, gzip" } });
    cdp.on("Network.requestWillBeSent", (event) => {
      wire.urls.set(event.requestId, event.request.url);
      wire.types.set(event.requestId, event.type ?? "");
    });
    // Only the requests this load started: one the page before began (a poll still on
    // its way when the protocol was turned on) is not this page's weight.
    cdp.on("Network.loadingFinished", (event) => {
      if (wire.urls.has(event.requestId)) wire.bytes.set(event.requestId, event.encodedDataLength);
    });
    cdp.on("Network.loadingFailed", (event) => wire.failed.add(event.requestId));
    return wire;
  }

  /** Every request finished but the live streams, which stay open by design. */
  settled(): boolean {
    return [...this.urls.keys()].every(
      (id) => this.bytes.has(id) || this.failed.has(id) || this.types.get(id) === "EventSource",
    );
  }

  total(): number {
    return [...this.bytes.values()].reduce((sum, bytes) => sum + bytes, 0);
  }

  requested(): string[] {
    return [...this.urls.values()].map((url) => new URL(url).pathname);
  }

  /** One line per request, for the report. */
  report(): string {
    return [...this.bytes]
      .map(([id, bytes]) => `${String(bytes).padStart(9)}  ${new URL(this.urls.get(id) ?? "").pathname}`)
      .join("\n");
  }
}

test("a visitor's first page is its HTML and CSS: within 100 KB, and no wasm", async ({ browser }) => {
  const entry = await promotedEntry("Weighed entry", "An entry whose page is weighed.");
  const pages = ["/", "/search?q=notes", "/request-access", "/access", "/book", "/login", `/entries/${entry}`];
  const lines: string[] = [];
  for (const path of pages) {
    const context = await browser.newContext({ baseURL: test.info().project.use.baseURL });
    const page = await context.newPage();
    const wire = await Wire.open(page);
    await page.goto(path);
    await expect(page.getByRole("heading", { level: 1 })).toBeVisible();
    await expect.poll(() => wire.settled()).toBe(true);
    const total = wire.total();
    lines.push(`${path}: ${(total / KB).toFixed(1)} KB\n${wire.report()}`);
    expect(wire.requested().filter((requested) => requested.endsWith(".wasm")), path).toEqual([]);
    expect(total, `${path} weighs ${total} bytes:\n${wire.report()}`).toBeLessThanOrEqual(VISITOR_BUDGET);
    await context.close();
  }
  console.log(`visitor pages on the wire (empty cache):\n${lines.join("\n")}`);
});

test("an admin's first /admin, hydrated, is within 900 KB", async ({ browser }) => {
  const context = await browser.newContext({ baseURL: test.info().project.use.baseURL });
  const page = await context.newPage();
  await signInAsAdmin(page, "/admin/account");
  const wire = await Wire.open(page);
  await page.goto("/admin");
  // Hydrated: the app's code ran, the shortcuts listen.
  await expect(page.locator("html")).toHaveAttribute("data-shortcuts", "on");
  await expect(page.getByTestId("overview-card").first()).toBeVisible();
  await expect.poll(() => wire.settled()).toBe(true);
  const total = wire.total();
  console.log(`/admin on the wire (empty cache): ${(total / KB).toFixed(1)} KB\n${wire.report()}`);
  expect(wire.requested().some((requested) => requested.endsWith(".wasm"))).toBe(true);
  expect(total, `/admin weighs ${total} bytes:\n${wire.report()}`).toBeLessThanOrEqual(ADMIN_BUDGET);
  await context.close();
});
