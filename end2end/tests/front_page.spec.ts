// The visitors' front page (issue #38): the owner's name and introduction, set by an
// admin on the account page (Markdown, rendered safely), and the ways in; nothing
// about the machinery.
import { expect, test } from "@playwright/test";
import { signInAsAdmin } from "./fixtures/admin";
import { sql } from "./fixtures/db";

test.afterEach(async () => {
  await sql("DELETE FROM front_page");
});

test("an admin sets the owner's name and introduction; visitors see them with the ways in", async ({ page, browser }) => {
  await signInAsAdmin(page, "/admin/account");
  const form = page.getByRole("region", { name: "Front page" });
  await form.getByLabel("Name").fill("Ada Lovelace");
  await form
    .getByLabel("Introduction (Markdown)")
    .fill("I write about *engines* and [notes](https://example.com/notes).\n\n<script>alert(1)</script>");
  await expect(form.getByRole("button", { name: "Save front page" })).toBeEnabled();
  await form.getByRole("button", { name: "Save front page" }).click();
  await expect(page.getByRole("status")).toContainText("Front page saved.");

  // A visitor (no session) sees it, rendered on the server.
  const visitor = await browser.newPage();
  const response = await visitor.request.get("/");
  const html = await response.text();
  expect(html).toMatch(/<h1[^>]*>Ada Lovelace(<!>)?<\/h1>/);
  expect(html).toContain("<em>engines</em>");
  expect(html).not.toContain("<script>alert(1)</script>");
  expect(html).not.toContain("Check the service");
  await visitor.goto("/");
  await expect(visitor.getByRole("heading", { level: 1 })).toHaveText("Ada Lovelace");
  const introduction = visitor.getByTestId("owner-introduction");
  await expect(introduction.getByRole("link", { name: "notes" })).toHaveAttribute("href", "https://example.com/notes");
  await expect(introduction).toContainText("<script>alert(1)</script>");
  const waysIn = visitor.getByRole("list", { name: "Ways in" });
  for (const [name, href] of [
    ["Request access", "/request-access"],
    ["Enter a code", "/access"],
    ["Book a meeting", "/book"],
  ]) {
    await expect(waysIn.getByRole("link", { name })).toHaveAttribute("href", href);
  }
  // The search box takes the visitor to the results.
  await visitor.getByRole("searchbox", { name: "Search the owner's writing" }).fill("engines");
  await visitor.getByRole("main").getByRole("button", { name: "Search" }).click();
  await expect(visitor).toHaveURL(/\/search\?q=engines$/);
  await visitor.close();

  // The form keeps what was saved.
  await page.reload();
  await expect(page.getByRole("region", { name: "Front page" }).getByLabel("Name")).toHaveValue("Ada Lovelace");
});

test("a front page without a name is refused with a message, and nothing changes", async ({ page }) => {
  await signInAsAdmin(page, "/admin/account");
  const form = page.getByRole("region", { name: "Front page" });
  await form.getByLabel("Name").fill("   ");
  await expect(form.getByRole("button", { name: "Save front page" })).toBeEnabled();
  await form.getByRole("button", { name: "Save front page" }).click();
  await expect(page.getByRole("status")).toContainText("Give the name visitors should see");
  expect(await sql("SELECT * FROM front_page")).toEqual([]);
});

test("at phone width the front page and the overview fit the screen", async ({ page }) => {
  await page.setViewportSize({ width: 390, height: 844 });
  await signInAsAdmin(page, "/admin");
  for (const path of ["/", "/admin"]) {
    await page.goto(path);
    await expect(page.getByRole("heading", { level: 1 })).toBeVisible();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow, path).toBeLessThanOrEqual(0);
  }
});
