// With JavaScript off, the visitor's forms still post and answer with a page that says
// the result or the error in words (product.md §15, "Weight"; issue #67).
import { type Browser, expect, test } from "@playwright/test";
import { AccessRequestsPage } from "./fixtures/access_pages";
import { signInAsAdmin } from "./fixtures/admin";
import { sql } from "./fixtures/db";
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
