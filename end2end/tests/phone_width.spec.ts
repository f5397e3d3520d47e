// At phone width (390 px) the header is one row, whoever reads it, and the tables of
// the console read as cards: nothing scrolls sideways (issue #51).
import { expect, type Page, test } from "@playwright/test";
import { signInAsAdmin } from "./fixtures/admin";
import { visitorContext } from "./fixtures/access_pages";
import { insertJob, sql } from "./fixtures/db";

const PHONE = { width: 390, height: 844 };

/** The tops of the header's visible controls: one row when they are all alike. */
async function headerRowTops(page: Page): Promise<number[]> {
  return page.locator("header > div > *").evaluateAll((children) =>
    children
      .filter((child) => (child as HTMLElement).offsetParent !== null && child.getBoundingClientRect().height > 0)
      .map((child) => Math.round(child.getBoundingClientRect().top + child.getBoundingClientRect().height / 2)),
  );
}

async function expectOneRow(page: Page) {
  const tops = await headerRowTops(page);
  expect(tops.length).toBeGreaterThanOrEqual(3);
  expect(Math.max(...tops) - Math.min(...tops), `the header's controls sit in one row: ${tops}`).toBeLessThanOrEqual(4);
  const scrollWidth = await page.evaluate(() => document.documentElement.scrollWidth);
  expect(scrollWidth).toBeLessThanOrEqual(PHONE.width);
}

test("a visitor's header at 390 px is one row, its links behind Menu", async ({ browser }) => {
  const context = await visitorContext(browser);
  const page = await context.newPage();
  await page.setViewportSize(PHONE);
  await page.goto("/");
  const nav = page.getByRole("navigation", { name: "Visitor" });
  const menu = page.getByTestId("visitor-menu-button");
  await expect(menu).toBeEnabled(); // hydrated
  await expectOneRow(page);
  await expect(nav.getByRole("link", { name: "Search" })).toBeHidden();

  await menu.click();
  await expect(menu).toHaveAttribute("aria-expanded", "true");
  for (const name of ["Search", "Request access", "Enter a code", "Book a meeting"]) {
    await expect(nav.getByRole("link", { name })).toBeVisible();
  }
  await expect(nav.getByRole("link", { name: "Admin", exact: true })).toHaveCount(0);
  await nav.getByRole("link", { name: "Search" }).click();
  await expect(page).toHaveURL(/\/search/);
  await context.close();
});

test("a signed-in admin's visitor header at 390 px is one row with one Admin link behind Menu", async ({ page }) => {
  await page.setViewportSize(PHONE);
  await signInAsAdmin(page, "/");
  const nav = page.getByRole("navigation", { name: "Visitor" });
  const menu = page.getByTestId("visitor-menu-button");
  await expect(menu).toBeEnabled();
  await expectOneRow(page);
  await menu.click();
  // One link into the console, not one per admin page.
  await expect(nav.getByRole("link")).toHaveCount(5);
  await nav.getByRole("link", { name: "Admin", exact: true }).click();
  await expect(page).toHaveURL(/\/admin$/);
  await expect(page.getByRole("heading", { level: 1 })).toHaveText("Overview");
  await expectOneRow(page);
});

test("at 1360 px the visitor header is one row, with the Admin link for an admin", async ({ page }) => {
  await page.setViewportSize({ width: 1360, height: 900 });
  await signInAsAdmin(page, "/search");
  await expect(page.getByTestId("visitor-menu-button")).toBeHidden();
  const nav = page.getByRole("navigation", { name: "Visitor" });
  await expect(nav.getByRole("link", { name: "Admin", exact: true })).toBeVisible();
  await expect(nav.getByRole("link", { name: "Tasks" })).toHaveCount(0);
  const header = await page.locator("header").boundingBox();
  expect(header && header.height < 80).toBeTruthy();
});

test("the access requests table at 390 px reads as cards, nothing scrolls sideways", async ({ page }) => {
  const email = `phone.${Date.now()}@example.com`;
  await sql(
    "INSERT INTO access_requests (name, email, message) VALUES ($1, $2, $3)",
    ["Phone Reader", email, "A message long enough to need more than one line on a phone screen, as messages do."],
  );
  await page.setViewportSize(PHONE);
  await signInAsAdmin(page, "/admin/access-requests?status=pending");
  const row = page.getByTestId("access-request-row").filter({ hasText: email });
  await expect(row).toBeVisible();
  // Every cell of the card is within the screen, led by its column's name.
  for (const testId of ["request-status", "request-mail-state"]) {
    const box = await row.getByTestId(testId).boundingBox();
    expect(box && box.x >= 0 && box.x + box.width <= PHONE.width, `${testId} on screen`).toBeTruthy();
  }
  const approve = await row.getByRole("button", { name: "Approve" }).boundingBox();
  expect(approve && approve.x + approve.width <= PHONE.width).toBeTruthy();
  await expect(row.locator('td[data-label="Status"]')).toBeVisible();
  const overflow = await page.evaluate(() =>
    [...document.querySelectorAll("main table")].map((table) => {
      const card = table.parentElement as HTMLElement;
      return card.scrollWidth - card.clientWidth;
    }),
  );
  expect(overflow.every((extra) => extra <= 0), `no table scrolls sideways: ${overflow}`).toBeTruthy();
  const scrollWidth = await page.evaluate(() => document.documentElement.scrollWidth);
  expect(scrollWidth).toBeLessThanOrEqual(PHONE.width);
});

test("the Tasks and Bookings tables at 390 px do not scroll sideways either", async ({ page }) => {
  // A job with a long error, the widest a row gets.
  await insertJob("system.noop", { phone: "a rather long argument to make the row wide" }, { scheduledInSeconds: 3600 });
  await page.setViewportSize(PHONE);
  await signInAsAdmin(page, "/admin/tasks");
  await expect(page.getByTestId("task-row").first()).toBeVisible();
  for (const path of ["/admin/tasks", "/admin/bookings"]) {
    await page.goto(path);
    await expect(page.getByRole("heading", { level: 1 })).toBeVisible();
    const overflow = await page.evaluate(() =>
      [...document.querySelectorAll("main table")].map((table) => {
        const card = table.parentElement as HTMLElement;
        return card.scrollWidth - card.clientWidth;
      }),
    );
    expect(overflow.every((extra) => extra <= 0), `${path}: no table scrolls sideways: ${overflow}`).toBeTruthy();
    const scrollWidth = await page.evaluate(() => document.documentElement.scrollWidth);
    expect(scrollWidth, path).toBeLessThanOrEqual(PHONE.width);
  }
});
