// Schedules in the browser (docs/jobs.md): the built-in listings-fetch row, Enable /
// Disable, adding a schedule (a bad expression refused naming the field at fault),
// "Run now" with its live chip and "already queued", by mouse and by keyboard.
import { expect, test } from "@playwright/test";
import { signInAsAdmin } from "./fixtures/admin";
import { sql } from "./fixtures/db";

test.afterEach(async () => {
  // Nothing of this spec fires later, in another spec's time.
  await sql("DELETE FROM job_schedules WHERE name LIKE 'e2e-%'");
  await sql("UPDATE job_schedules SET enabled = false WHERE name = 'listings-fetch'");
});

test("the built-in schedule is listed with its meaning and can be enabled and disabled", async ({ page }) => {
  await signInAsAdmin(page, "/admin/schedules");
  await expect(page).toHaveTitle("Schedules · StandMeet");
  const row = page.locator('[data-testid="schedule-row"][data-schedule="listings-fetch"]');
  await expect(row).toHaveAttribute("data-enabled", "false");
  await expect(row.getByTestId("schedule-cron")).toHaveText("0 * * * *");
  await expect(row.getByTestId("schedule-meaning")).toContainText("minute 0");
  await expect(row.getByTestId("schedule-next-run")).toContainText("disabled");

  await row.getByRole("button", { name: "Enable" }).click();
  await expect(page.getByRole("status")).toContainText("Schedule listings-fetch enabled");
  await expect(row).toHaveAttribute("data-enabled", "true");
  // The next run is the next full hour, as a <time> a machine can read.
  const next = await row.getByTestId("schedule-next-run").locator("time").getAttribute("datetime");
  const at = new Date(next ?? "");
  expect(at.getTime()).toBeGreaterThan(Date.now());
  expect(at.getTime() - Date.now()).toBeLessThanOrEqual(3_600_000);
  expect(at.getUTCMinutes()).toBe(0);

  await row.getByRole("button", { name: "Disable" }).click();
  await expect(row).toHaveAttribute("data-enabled", "false");
});

test("add a schedule: a bad expression is refused naming its field; Run now queues its job once", async ({ page }) => {
  await signInAsAdmin(page, "/admin/schedules");
  await page.getByLabel("Name").fill("e2e-nightly");
  await page.getByLabel("Cron expression").fill("30 25 * * *");
  await page.getByLabel("Kind").selectOption("system.sleep");
  await page.getByLabel("Args (a JSON object)").fill('{"ms": 1500}');
  await page.getByRole("button", { name: "Add schedule" }).click();
  await expect(page.getByTestId("schedule-form-error")).toContainText('hour field "25"');
  await expect(page.locator('[data-testid="schedule-row"][data-schedule="e2e-nightly"]')).toHaveCount(0);
  const written = await sql("SELECT 1 FROM job_schedules WHERE name = 'e2e-nightly'");
  expect(written).toHaveLength(0);

  await page.getByLabel("Cron expression").fill("30 2 * * *");
  await page.getByRole("button", { name: "Add schedule" }).click();
  await expect(page.getByRole("status")).toContainText("Schedule e2e-nightly added");
  const row = page.locator('[data-testid="schedule-row"][data-schedule="e2e-nightly"]');
  await expect(row.getByTestId("schedule-meaning")).toContainText("02:30");
  await expect(row.getByTestId("schedule-last-run")).toHaveText("never");

  // Run now: a job, whose chip follows it live to completed; a second Run now while it
  // sleeps answers "already queued" with the same job.
  await row.getByRole("button", { name: "Run now" }).click();
  await expect(page.getByRole("status")).toContainText("queued");
  const link = row.getByTestId("schedule-last-run").locator("a");
  await expect(link).toHaveText(/^#\d+$/);
  const job = (await link.textContent())!.slice(1);
  await expect(page.getByRole("status")).toContainText(`Job ${job} of e2e-nightly queued`);
  await row.getByRole("button", { name: "Run now" }).focus();
  await page.keyboard.press("Enter");
  await expect(page.getByRole("status")).toContainText(`Already queued: job ${job}`);
  await expect(row.getByTestId("job-state")).toHaveText("completed", { timeout: 15_000 });
  const jobs = await sql<{ n: string }>("SELECT count(*) AS n FROM jobs WHERE kind = 'system.sleep' AND args = '{\"ms\": 1500}'");
  expect(Number(jobs[0].n)).toBe(1);
});

test("the form offers the kinds a schedule can run, each with an example of its arguments", async ({ page }) => {
  await signInAsAdmin(page, "/admin/schedules");
  const kind = page.getByLabel("Kind");
  await expect(kind).toBeEnabled();
  const offered = await kind.locator("option").evaluateAll((options) => options.map((o) => (o as HTMLOptionElement).value));
  expect(offered).toContain("listings.fetch_all");
  expect(offered).toContain("jobs.fetch_source");
  // Mail and delivery jobs are about one request or event: not on a clock.
  for (const never of ["access_request.approval_mail", "owner.email_confirmation", "webhooks.deliver", "corpus.index"]) {
    expect(offered).not.toContain(never);
  }
  await kind.selectOption("jobs.fetch_source");
  await expect(page.getByLabel("Args (a JSON object)")).toHaveValue('{"source_id": 1}');
  await expect(page.locator("#schedule-kind-help")).toContainText("one source");
  await kind.selectOption("system.sleep");
  await expect(page.getByLabel("Args (a JSON object)")).toHaveValue('{"ms": 1000}');
});
