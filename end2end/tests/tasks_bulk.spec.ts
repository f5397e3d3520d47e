// The Tasks panel as an operator's panel (docs/jobs.md#the-tasks-panel): select rows and retry them
// at once (after a confirmation, with a toast that counts), search by job id or by what
// the arguments contain, relative times in <time>, and the chart of the last hour.
import { expect, test } from "@playwright/test";
import { signInAsAdmin } from "./fixtures/admin";
import { insertJob, sql } from "./fixtures/db";
import { TasksPage } from "./fixtures/tasks_page";

/** A job that already gave up, as the engine leaves one: `discarded`. */
async function discardedJob(tag: string): Promise<number> {
  const rows = await sql<{ id: string }>(
    `INSERT INTO jobs (kind, args, state, attempt, max_attempts, finalized_at, errors)
     VALUES ('system.noop', $1, 'discarded', 1, 1, now(),
             jsonb_build_array(jsonb_build_object('attempt', 1, 'at', now(), 'error', 'gave up')))
     RETURNING id`,
    [JSON.stringify({ bulk: tag })],
  );
  return Number(rows[0].id);
}

test("bulk retry of three discarded jobs: asked first, one transaction, a toast that counts", async ({ page }) => {
  const tag = `retry-${Date.now()}`;
  const ids = [await discardedJob(tag), await discardedJob(tag), await discardedJob(tag)];
  await signInAsAdmin(page, `/admin/tasks?q=${encodeURIComponent(JSON.stringify({ bulk: tag }))}`);
  const tasks = new TasksPage(page);
  await expect(tasks.rows).toHaveCount(3);
  for (const id of ids) {
    await expect(tasks.chip(id)).toHaveText("discarded");
  }
  await expect(page.getByRole("button", { name: "Retry selected" })).toBeDisabled();
  await page.getByRole("checkbox", { name: "Select all" }).check();
  await expect(page.getByTestId("task-select")).toHaveCount(3);
  for (const box of await page.getByTestId("task-select").all()) {
    await expect(box).toBeChecked();
  }
  await page.getByRole("button", { name: "Retry selected" }).click();
  const dialog = page.getByRole("dialog");
  await expect(dialog).toContainText("Retry 3 selected jobs?");
  await dialog.getByRole("button", { name: "Retry selected" }).click();
  await expect(page.getByRole("status")).toContainText("3 jobs retried.");
  // The list was read again and nothing is selected: the keyboard is on "Select all".
  await expect(page.getByRole("checkbox", { name: "Select all" })).toBeFocused();
  for (const id of ids) {
    await expect(tasks.chip(id)).toHaveText("completed");
  }
});

test("search by id and by arguments; times are relative, with the exact time as a title", async ({ page }) => {
  const id = await insertJob("system.noop", { search_me: "yes" });
  await signInAsAdmin(page, "/admin/tasks");
  const search = page.getByTestId("task-search");
  await search.fill(String(id));
  await search.press("Enter");
  const tasks = new TasksPage(page);
  await expect(tasks.rows).toHaveCount(1);
  await expect(tasks.row(id)).toBeVisible();
  const created = tasks.row(id).locator("time").first();
  await expect(created).toHaveText(/^\d+ (s|min) ago$/);
  await expect(created).toHaveAttribute("title", / UTC$/);
  await expect(created).toHaveAttribute("datetime", /^\d{4}-\d\d-\d\dT/);

  await page.goto(`/admin/tasks?q=${encodeURIComponent('{"search_me": "yes"}')}`);
  await expect(tasks.row(id)).toBeVisible();
  const refused = await page.goto(`/admin/tasks?q=${encodeURIComponent("[1, 2]")}`);
  expect(refused?.status()).toBe(400);
  await expect(page.getByRole("alert")).toContainText("Search by a job id");
});

test("the chart of the last hour is drawn on the server", async ({ page }) => {
  await signInAsAdmin(page, "/admin/tasks");
  const chart = page.getByTestId("throughput-chart");
  await expect(chart).toBeVisible();
  await expect(chart.getByTestId("throughput-minute")).toHaveCount(60);
  await expect(chart).toHaveAttribute("aria-label", /Jobs finished in the last hour: \d+ completed/);
  // Without JavaScript too: it is in the server's HTML.
  const html = await (await page.request.get("/admin/tasks")).text();
  expect(html).toContain('data-testid="throughput-chart"');
});
