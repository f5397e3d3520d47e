import { expect, test } from "@playwright/test";
import { signInAsAdmin } from "./fixtures/admin";
import { insertJob } from "./fixtures/db";
import { TasksPage } from "./fixtures/tasks_page";

test.beforeEach(async ({ page }) => {
  await signInAsAdmin(page);
});

test("jobs inserted by the test appear, newest first", async ({ page }) => {
  const first = await insertJob("system.noop", { n: 1 });
  const second = await insertJob("system.noop", { n: 2 });
  const tasks = new TasksPage(page);
  await tasks.goto();
  await expect(tasks.row(first)).toBeVisible();
  await expect(tasks.row(second)).toBeVisible();
  const ids = await tasks.rows.evaluateAll((rows) => rows.map((row) => Number(row.getAttribute("data-job-id"))));
  expect(ids.indexOf(second)).toBeLessThan(ids.indexOf(first));
  await expect(tasks.row(first)).toContainText("system.noop");
});

test("a system.noop job goes to completed on screen without a reload", async ({ page }) => {
  const tasks = new TasksPage(page);
  await tasks.goto();
  // Due in five seconds: it shows up scheduled (new rows are looked for every two
  // seconds, so at least one look falls before it is due, however quickly it then
  // runs), then runs.
  const id = await insertJob("system.noop", { watch: "me" }, { scheduledInSeconds: 5 });
  await expect(tasks.chip(id)).toHaveText("scheduled");
  await expect(tasks.chip(id)).toHaveText("completed", { timeout: 15_000 });
  await expect(tasks.chip(id)).toHaveAttribute("data-state", "completed");
});

test("a job made to fail shows retryable with its error, and Retry brings it to completed", async ({ page }) => {
  // Fails its first attempt and would only try again in an hour: the Retry button does it.
  const id = await insertJob("system.flaky", {
    fail_until_attempt: 2,
    message: "the test made it fail",
    retry_in_ms: 3_600_000,
  });
  const tasks = new TasksPage(page);
  await tasks.gotoJob(id);
  await expect(tasks.jobChip).toHaveText("retryable");
  await expect(page.getByTestId("job-attempt-error")).toContainText("the test made it fail (attempt 1)");

  await page.getByRole("button", { name: "Retry" }).click();
  await expect(page.getByRole("status")).toContainText("queued");
  await expect(tasks.jobChip).toHaveText("completed");
  await expect(page.getByTestId("job-output")).toContainText('"attempt": 2');
  // The failed attempt stays in the history.
  await expect(page.getByTestId("job-attempt-error")).toHaveCount(1);
});

test("Cancel on a scheduled job shows cancelled", async ({ page }) => {
  const id = await insertJob("system.noop", {}, { scheduledInSeconds: 3600 });
  const tasks = new TasksPage(page);
  await tasks.gotoJob(id);
  await expect(tasks.jobChip).toHaveText("scheduled");
  // Cancel asks first; "Keep it" changes nothing and gives the focus back.
  const cancel = page.getByRole("button", { name: "Cancel", exact: true });
  await cancel.click();
  const dialog = page.getByRole("dialog");
  await expect(dialog).toContainText(`Cancel job ${id}?`);
  await expect(dialog.getByRole("button", { name: "Cancel job" })).toBeFocused();
  await dialog.getByRole("button", { name: "Keep it" }).click();
  await expect(dialog).toHaveCount(0);
  await expect(cancel).toBeFocused();
  await expect(tasks.jobChip).toHaveText("scheduled");
  // With the keyboard: Enter on Cancel opens the dialog, Enter confirms.
  await page.keyboard.press("Enter");
  await expect(dialog).toBeVisible();
  await page.keyboard.press("Enter");
  await expect(page.getByRole("status")).toContainText(`Job ${id} cancelled`);
  // Cancelled, the job offers Retry where Cancel was: the keyboard is there.
  await expect(page.getByRole("button", { name: "Retry" })).toBeFocused();
  await expect(tasks.jobChip).toHaveText("cancelled");
  await expect(page.getByRole("button", { name: "Cancel" })).toHaveCount(0);
  await expect(page.getByRole("button", { name: "Retry" })).toBeVisible();
});

test("filters narrow the list, live in the URL and survive a reload", async ({ page }) => {
  const done = await insertJob("system.noop", {});
  const waiting = await insertJob("system.sleep", { ms: 1 }, { scheduledInSeconds: 3600 });
  const tasks = new TasksPage(page);
  await tasks.goto();
  await expect(tasks.row(waiting)).toBeVisible();

  await page.getByLabel("State").selectOption("scheduled");
  await page.getByLabel("Kind").selectOption("system.sleep");
  await page.getByRole("button", { name: "Filter" }).click();
  await expect(page).toHaveURL(/state=scheduled/);
  await expect(page).toHaveURL(/kind=system.sleep/);
  await expect(tasks.row(waiting)).toBeVisible();
  await expect(tasks.row(done)).toHaveCount(0);
  for (const chip of await tasks.rows.getByTestId("job-state").all()) {
    await expect(chip).toHaveText("scheduled");
  }

  await page.reload();
  await expect(page.getByLabel("State")).toHaveValue("scheduled");
  await expect(page.getByLabel("Kind")).toHaveValue("system.sleep");
  await expect(tasks.row(waiting)).toBeVisible();
  await expect(tasks.row(done)).toHaveCount(0);
});

test("an unknown job answers with a 404 page", async ({ page }) => {
  const response = await page.goto("/admin/tasks/987654321");
  expect(response?.status()).toBe(404);
  await expect(page.getByRole("heading", { level: 1 })).toHaveText("Page not found");
});
