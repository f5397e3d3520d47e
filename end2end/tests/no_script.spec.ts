// With JavaScript off, the visitor's forms still post and answer with a page that says
// the result or the error in words (docs/reference/README.md#weight; issue #67).
import { type Browser, expect, test } from "@playwright/test";
import { AccessRequestsPage, redeemCode } from "./fixtures/access_pages";
import { ADMIN_EMAIL, ADMIN_PASSWORD, signInAsAdmin } from "./fixtures/admin";
import { promotedEntry } from "./fixtures/corpus_page";
import { sql } from "./fixtures/db";
import { callTool } from "./fixtures/mcp";
import { codeIn, resetSmtp, waitForMails } from "./fixtures/smtp";

test.beforeEach(async () => {
  await resetSmtp();
});

function withoutScript(browser: Browser) {
  return browser.newContext({ baseURL: test.info().project.use.baseURL, javaScriptEnabled: false });
}

test("without JavaScript a visitor requests access: a mistake is named, a request is received", async ({ browser }) => {
  const context = await withoutScript(browser);
  const page = await context.newPage();
  const email = `noscript.${Date.now()}@example.com`;
  await page.goto("/request-access");
  const send = page.getByRole("button", { name: "Send request" });
  await expect(send).toBeEnabled();

  await page.getByLabel("Name").fill("No Script");
  await page.getByLabel("Email").fill("not an address");
  await send.click();
  await expect(page.getByRole("alert").first()).toContainText("Please check the fields marked below.");
  await expect(page.getByTestId("request-received")).toHaveCount(0);

  await page.getByLabel("Name").fill("No Script");
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Message").fill("Sent without JavaScript.");
  await page.getByRole("button", { name: "Send request" }).click();
  await expect(page.getByTestId("request-received")).toContainText("Request received");
  const rows = await sql<{ name: string }>("SELECT name FROM access_requests WHERE email = $1", [email]);
  expect(rows.map((row) => row.name)).toEqual(["No Script"]);
  await context.close();
});

test("without JavaScript a visitor enters a code: a wrong one is refused in words, the right one opens access", async ({
  browser,
  page,
}) => {
  const email = `noscript.code.${Date.now()}@example.com`;
  await sql("INSERT INTO access_requests (name, email, message) VALUES ('Code Reader', $1, 'from the test')", [email]);
  await signInAsAdmin(page, "/admin/access-requests");
  const requests = new AccessRequestsPage(page);
  await requests.approve(email);
  await expect(requests.mailChip(email)).toHaveText("sent");
  const code = codeIn((await waitForMails(email, 1))[0]);

  const context = await withoutScript(browser);
  const visitor = await context.newPage();
  await visitor.goto("/access");
  await visitor.getByLabel("Email").fill(email);
  await visitor.getByLabel("Access code").fill("WRNG-CODE-0000");
  await visitor.getByRole("button", { name: "Enter" }).click();
  await expect(visitor.getByRole("alert")).toContainText("does not match");
  await expect(visitor.getByTestId("access-granted")).toHaveCount(0);

  await visitor.getByLabel("Email").fill(email);
  await visitor.getByLabel("Access code").fill(code);
  await visitor.getByRole("button", { name: "Enter" }).click();
  await expect(visitor.getByTestId("access-granted")).toContainText("Access granted");
  await context.close();
});

test("without JavaScript a visitor books a time from the list and cancels it from the mail's link", async ({ browser }) => {
  await sql("DELETE FROM bookings");
  const windows = [1, 2, 3, 4, 5, 6, 7].map((weekday) => ({ weekday, start: "00:00", end: "24:00" }));
  expect((await callTool("bookings.availability", { windows, slot_minutes: 30, buffer_minutes: 0, days_ahead: 3 })).isError).toBe(false);
  const email = `noscript.booking.${Date.now()}@example.com`;
  const context = await withoutScript(browser);
  const page = await context.newPage();
  await redeemCode(page, email, "N0SC-R1PT-B00K");
  await page.goto("/book");
  // No script to pick with the buttons: the free times are a list in the form.
  await expect(page.getByTestId("slot").first()).toBeHidden();
  const time = page.getByLabel("Time");
  await expect(time).toBeVisible();

  // Without a time, the server says so in words and books nothing.
  await page.getByLabel("Name").fill("No Script Booker");
  await page.getByRole("button", { name: "Book", exact: true }).click();
  await expect(page.getByRole("alert")).toContainText("time");
  await expect(page.getByTestId("booked")).toHaveCount(0);

  const start = await time.locator("option").nth(2).getAttribute("value");
  expect(start).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:00Z$/);
  await time.selectOption(start!);
  await page.getByLabel("Name").fill("No Script Booker");
  await page.getByLabel("Topic").fill("Plain HTML");
  await page.getByRole("button", { name: "Book", exact: true }).click();
  await expect(page.getByTestId("booked")).toContainText("Booked");
  await expect(page.getByTestId("booked")).toContainText(email);
  const booked = await sql<{ state: string; name: string }>(
    "SELECT state::text AS state, name FROM bookings WHERE email = $1",
    [email],
  );
  expect(booked).toEqual([{ state: "confirmed", name: "No Script Booker" }]);
  // Shown once: the page is the booking page again after that.
  await page.goto("/book");
  await expect(page.getByTestId("booked")).toHaveCount(0);
  await expect(page.locator(`#booking-time option[value="${start}"]`)).toHaveCount(0);

  const mails = await waitForMails(email, 1);
  const link = mails[0].data.replace(/=\r?\n/g, "").replace(/=3D/g, "=").match(/\/book\/cancel\?token=[A-Za-z0-9_-]+/);
  expect(link).not.toBeNull();
  await page.goto(link![0]);
  await page.getByRole("button", { name: "Cancel booking" }).click();
  await expect(page.getByTestId("booking-cancelled")).toContainText("Booking cancelled");
  const cancelled = await sql<{ state: string }>("SELECT state::text AS state FROM bookings WHERE email = $1", [email]);
  expect(cancelled).toEqual([{ state: "cancelled" }]);
  // The link on its own (no post behind it) says what it always said.
  await page.goto(link![0]);
  await expect(page.getByTestId("cancel-refused")).toContainText("cancelled already");
  await context.close();
});

test("without JavaScript an admin signs in (a wrong password is refused in words) and a visitor searches", async ({ browser }) => {
  const title = `Plain search words ${Date.now()}`;
  await promotedEntry(title, "Found without any script at all.");
  const context = await withoutScript(browser);
  const page = await context.newPage();
  await page.goto("/search");
  await page.getByRole("searchbox", { name: "Search" }).fill("script");
  await page.getByRole("main").getByRole("button", { name: "Search" }).click();
  await expect(page).toHaveURL(/\/search\?q=script/);
  await expect(page.getByTestId("search-result").filter({ hasText: title })).toHaveCount(1);

  await page.goto("/login");
  await page.getByLabel("Email").fill(ADMIN_EMAIL);
  await page.getByLabel("Password").fill("not the password");
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByTestId("login-error")).toBeVisible();
  await page.getByLabel("Password").fill(ADMIN_PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).toHaveURL(/\/admin$/);
  await expect(page.getByRole("heading", { level: 1 })).toHaveText("Overview");
  await context.close();
});

test("without JavaScript the phone-width header shows the navigation, and no button that could not work", async ({ browser }) => {
  const context = await browser.newContext({
    baseURL: test.info().project.use.baseURL,
    javaScriptEnabled: false,
    viewport: { width: 390, height: 800 },
  });
  const page = await context.newPage();
  await page.goto("/");
  const nav = page.getByRole("navigation", { name: "Visitor" });
  for (const name of ["Search", "Request access", "Enter a code", "Book a meeting"]) {
    await expect(nav.getByRole("link", { name })).toBeVisible();
  }
  await expect(page.getByTestId("visitor-menu-button")).toBeHidden();
  await expect(page.getByTestId("theme-toggle")).toBeHidden();
  await context.close();
});
