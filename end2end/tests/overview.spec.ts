// The overview (`/admin`, issue #38): where signing in lands; cards for what needs an
// admin's attention that follow changes while the page is open (made here as an
// operator would, by SQL) and open the page that shows each, filtered.
import { expect, test, type Page } from "@playwright/test";
import { LoginPage } from "./fixtures/admin";
import { insertJob, sql } from "./fixtures/db";

const VISITOR = "overview-visitor@example.com";
const ENDPOINT = "https://overview.example/gone";

test.afterEach(async () => {
  await sql("DELETE FROM job_queue_pauses");
  await sql("DELETE FROM webhook_endpoints WHERE url = $1", [ENDPOINT]);
  await sql("DELETE FROM access_requests WHERE email = $1", [VISITOR]);
});

function card(page: Page, name: string) {
  return page.locator(`[data-testid="overview-card"][data-card="${name}"]`);
}

async function countOf(page: Page, name: string): Promise<number> {
  return Number(await card(page, name).getAttribute("data-count"));
}

test("signing in lands on the overview; its cards follow what happens and open the filtered pages", async ({ page }) => {
  const login = new LoginPage(page);
  await login.goto();
  await login.signIn();
  await expect(page).toHaveURL(/\/admin$/);
  await expect(page).toHaveTitle("Overview · StandMeet");
  await expect(page.getByRole("heading", { level: 1 })).toHaveText("Overview");
  const sidebar = page.getByRole("navigation", { name: "Admin" });
  await expect(sidebar.getByRole("link", { name: "Overview" })).toHaveAttribute("aria-current", "page");
  await expect(sidebar.getByRole("link", { name: "Tasks" })).not.toHaveAttribute("aria-current", "page");
  await expect(page.getByTestId("theme-toggle")).toBeEnabled();

  const before: Record<string, number> = {};
  for (const name of ["failed", "retrying", "requests", "webhooks", "paused"]) {
    before[name] = await countOf(page, name);
  }

  // While the page is open: a request arrives, a job is discarded and another waits
  // to retry, an endpoint is disabled, a queue is paused.
  await sql("INSERT INTO access_requests (name, email) VALUES ('Overview Visitor', $1)", [VISITOR]);
  for (const state of ["discarded", "retryable"]) {
    const id = await insertJob("system.noop", { overview: state }, { scheduledInSeconds: 3600 });
    await sql("UPDATE jobs SET state = $2::job_state, attempt = 1 WHERE id = $1", [id, state]);
  }
  await sql(
    `INSERT INTO webhook_endpoints (url, event_types, secret, enabled, disabled_reason)
     VALUES ($1, '{*}', 'whsec_overview', false, 'It answered 410 Gone.')`,
    [ENDPOINT],
  );
  await sql("INSERT INTO job_queue_pauses (queue) VALUES ('webhooks')");

  // Live: no reload.
  await expect(card(page, "requests")).toHaveAttribute("data-count", String(before.requests + 1));
  await expect(card(page, "failed")).toHaveAttribute("data-count", String(before.failed + 1));
  await expect(card(page, "retrying")).toHaveAttribute("data-count", String(before.retrying + 1));
  await expect(card(page, "webhooks")).toHaveAttribute("data-count", String(before.webhooks + 1));
  await expect(card(page, "paused")).toHaveAttribute("data-count", String(before.paused + 1));
  await expect(card(page, "paused")).toContainText("webhooks");
  await expect(card(page, "failed")).toHaveAttribute("data-attention", "true");
  const queue = page.locator('[data-testid="overview-queue"][data-queue="webhooks"]');
  await expect(queue.getByTestId("overview-queue-state")).toHaveText("paused");

  // Each card opens the page that shows what it counts.
  await card(page, "failed").click();
  await expect(page).toHaveURL(/\/admin\/tasks\?state=discarded$/);
  await expect(page.getByTestId("task-row").first().getByTestId("job-state")).toHaveText("discarded");
  await page.goto("/admin");
  await card(page, "requests").click();
  await expect(page).toHaveURL(/\/admin\/access-requests\?status=pending$/);
  await expect(page.getByTestId("access-request-row").filter({ hasText: VISITOR })).toHaveCount(1);
  await page.goto("/admin");
  await card(page, "paused").click();
  await expect(page).toHaveURL(/\/admin\/queues$/);
  await expect(page.locator('[data-testid="queue-row"][data-queue="webhooks"]')).toHaveAttribute("data-paused", "true");
});

test("g o jumps to the overview from any admin page", async ({ page }) => {
  const login = new LoginPage(page);
  await login.goto("/admin/mail");
  await login.signIn();
  await expect(page).toHaveURL(/\/admin\/mail$/);
  await expect(page.locator("html")).toHaveAttribute("data-shortcuts", "on");
  await page.keyboard.press("g");
  await page.keyboard.press("o");
  await expect(page).toHaveURL(/\/admin$/);
  await expect(page.getByRole("heading", { level: 1 })).toHaveText("Overview");
});
