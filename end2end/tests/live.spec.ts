// Live chips over Server-Sent Events (docs/jobs.md): an access request's mail chip
// follows its job over /api/live, and the page makes no status poll while the stream is
// open; when the stream cannot be had, the page falls back to polling and the chip
// still gets there. Also Deny's confirmation on the same page.
import { expect, test, type Page } from "@playwright/test";
import { AccessRequestsPage } from "./fixtures/access_pages";
import { signInAsAdmin } from "./fixtures/admin";
import { sql } from "./fixtures/db";
import { failNext, resetSmtp, waitForMails } from "./fixtures/smtp";

test.beforeEach(async () => {
  await resetSmtp();
});

async function pendingRequest(name: string, email: string): Promise<void> {
  await sql("INSERT INTO access_requests (name, email, message) VALUES ($1, $2, 'from live')", [name, email]);
}

/** The URLs of the status polls and of the live streams the page asks for. */
function watchRequests(page: Page) {
  const seen = { polls: [] as string[], streams: [] as string[] };
  page.on("request", (request) => {
    const url = request.url();
    if (url.includes("/api/jobs/status")) seen.polls.push(url);
    if (url.includes("/api/live")) seen.streams.push(url);
  });
  return seen;
}

/** Approves a new request whose mail fails its first try (so that the chip has
 * somewhere to go after the approval answered), and watches it go failed → sent. */
async function approveAndWatchTheChip(page: Page, name: string, email: string) {
  await pendingRequest(name, email);
  await failNext(1, 451, "greylisted, try again later");
  await signInAsAdmin(page, "/admin/access-requests");
  const requests = new AccessRequestsPage(page);
  await requests.approve(email);
  await expect(requests.mailChip(email)).toHaveText("failed");
  await expect(requests.mailChip(email)).toHaveText("sent", { timeout: 20_000 });
  await waitForMails(email, 1);
}

test("a mail chip goes failed → sent over the live stream, with no status poll", async ({ page }) => {
  const seen = watchRequests(page);
  await approveAndWatchTheChip(page, "Lena Live", "lena.live@example.com");

  expect(seen.streams.length, "the page followed the job over /api/live").toBeGreaterThan(0);
  expect(seen.streams.some((url) => /ids=\d+/.test(url))).toBe(true);
  expect(seen.polls, "no status poll while the stream was open").toEqual([]);
});

test("with the stream cut off, the page polls and the chip still turns sent", async ({ page }) => {
  await page.route("**/api/live**", (route) => route.abort());
  const seen = watchRequests(page);
  await approveAndWatchTheChip(page, "Otto Offline", "otto.offline@example.com");
  expect(seen.polls.length, "the page fell back to the status poll").toBeGreaterThan(0);
});

test("Deny asks first: Keep it changes nothing, Deny denies", async ({ page }) => {
  const email = "dora.deny@example.com";
  await pendingRequest("Dora Deny", email);
  await signInAsAdmin(page, "/admin/access-requests");
  const requests = new AccessRequestsPage(page);
  const deny = requests.row(email).getByRole("button", { name: "Deny" });
  await expect(deny).toBeEnabled();
  await deny.click();
  const dialog = page.getByRole("dialog");
  await expect(dialog).toContainText("Deny the request of Dora Deny <dora.deny@example.com>?");
  await page.keyboard.press("Escape");
  await expect(dialog).toHaveCount(0);
  await expect(requests.status(email)).toHaveText("pending");
  await deny.focus();
  await page.keyboard.press("Enter");
  await expect(dialog.getByRole("button", { name: "Deny" })).toBeFocused();
  await page.keyboard.press("Enter");
  await expect(requests.status(email)).toHaveText("denied");
  // The row has no buttons left: the keyboard lands on the row itself.
  await expect(requests.row(email).locator('[data-focus-key^="request-"]')).toBeFocused();
});
