// The admin console's frame (issue: an admin console people prefer): on admin pages the
// admin navigation is a sidebar in groups, beside the page at desktop width and folded
// behind a menu button at phone width; visitor pages keep their header.
import { expect, test } from "@playwright/test";
import { signInAsAdmin } from "./fixtures/admin";

const GROUPS: [string, string[]][] = [
  ["Work", ["Tasks", "Queues"]],
  ["People", ["Access requests", "Bookings"]],
  ["Content", ["Corpus", "Listings"]],
  ["Integrations", ["Events", "Webhooks", "Mail log"]],
];

test("at 1360 px the admin pages have a grouped sidebar beside the page and a one-row header", async ({ page }) => {
  await page.setViewportSize({ width: 1360, height: 900 });
  await signInAsAdmin(page, "/admin/queues");
  const sidebar = page.getByRole("navigation", { name: "Admin" });
  await expect(sidebar).toBeVisible();
  for (const [group, links] of GROUPS) {
    await expect(sidebar.getByText(group, { exact: true })).toBeVisible();
    for (const name of links) {
      await expect(sidebar.getByRole("link", { name, exact: true })).toBeVisible();
    }
  }
  await expect(sidebar.getByRole("link", { name: "Account", exact: true })).toBeVisible();
  await expect(sidebar.getByRole("link", { name: "Queues", exact: true })).toHaveAttribute("aria-current", "page");
  // Beside the page, not above it; no menu button at this width.
  const sidebarBox = await sidebar.boundingBox();
  const headingBox = await page.getByRole("heading", { level: 1 }).boundingBox();
  expect(sidebarBox && headingBox && sidebarBox.x + sidebarBox.width <= headingBox.x).toBeTruthy();
  await expect(page.getByTestId("admin-menu-button")).toBeHidden();
  // The header holds one row: it is no taller than its tallest control and padding.
  const header = await page.locator("header").boundingBox();
  expect(header && header.height < 80).toBeTruthy();
  // No visitor links on admin pages; the sidebar reaches another page.
  await expect(page.getByRole("navigation", { name: "Visitor" })).toHaveCount(0);
  await sidebar.getByRole("link", { name: "Mail log", exact: true }).click();
  await expect(page).toHaveURL(/\/admin\/mail$/);
  await expect(page.getByRole("heading", { level: 1 })).toHaveText("Mail log");
});

test("at 390 px the sidebar folds behind a menu button that opens it", async ({ page }) => {
  await page.setViewportSize({ width: 390, height: 844 });
  await signInAsAdmin(page, "/admin/queues");
  const button = page.getByTestId("admin-menu-button");
  const sidebar = page.getByRole("navigation", { name: "Admin" });
  await expect(button).toBeVisible();
  await expect(button).toHaveAttribute("aria-expanded", "false");
  await expect(sidebar).toBeHidden();
  // Nothing wider than the screen.
  const scrollWidth = await page.evaluate(() => document.documentElement.scrollWidth);
  expect(scrollWidth).toBeLessThanOrEqual(390);

  await expect(button).toBeEnabled(); // hydrated
  await button.click();
  await expect(button).toHaveAttribute("aria-expanded", "true");
  await expect(sidebar).toBeVisible();
  await sidebar.getByRole("link", { name: "Bookings", exact: true }).click();
  await expect(page).toHaveURL(/\/admin\/bookings$/);
  await expect(page.getByRole("heading", { level: 1 })).toHaveText("Bookings");
  await expect(page.getByTestId("admin-menu-button")).toHaveAttribute("aria-expanded", "false");
});

test("visitor pages keep the header with the visitor links", async ({ page }) => {
  await page.setViewportSize({ width: 1360, height: 900 });
  await page.goto("/search");
  await expect(page.getByRole("navigation", { name: "Visitor" }).getByRole("link", { name: "Search" })).toBeVisible();
  await expect(page.getByTestId("admin-sidebar")).toHaveCount(0);
  await expect(page.getByTestId("admin-menu-button")).toHaveCount(0);
});

test("keyboard: / focuses the page's search, g then a letter goes to an admin page, not while typing", async ({ page }) => {
  await page.setViewportSize({ width: 1360, height: 900 });
  await signInAsAdmin(page, "/admin/tasks");
  const search = page.getByTestId("task-search");
  await expect(page.locator("html")).toHaveAttribute("data-shortcuts", "on");
  await page.locator("main h1").click();
  await page.keyboard.press("/");
  await expect(search).toBeFocused();
  await expect(search).toHaveValue("");

  // Typed into the field, g and q are text.
  await page.keyboard.type("gq");
  await expect(search).toHaveValue("gq");
  await expect(page).toHaveURL(/\/admin\/tasks/);

  await page.locator("main h1").click();
  await page.keyboard.press("g");
  await page.keyboard.press("q");
  await expect(page).toHaveURL(/\/admin\/queues$/);
  await expect(page.getByRole("heading", { level: 1 })).toHaveText("Queues");
});

test("keyboard: / focuses the visitor's search box", async ({ page }) => {
  await page.goto("/search");
  const box = page.getByRole("searchbox").first();
  await expect(page.locator("html")).toHaveAttribute("data-shortcuts", "on");
  await page.locator("main h1").click();
  await page.keyboard.press("/");
  await expect(box).toBeFocused();
});
