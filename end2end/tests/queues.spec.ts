// Queues in the browser (docs/jobs.md): "Pause" stops a queue in the server's
// processes (a job inserted by SQL stays `available` while a job in another queue,
// inserted after it, runs), and "Resume" runs it at once.
import { expect, test } from "@playwright/test";
import { signInAsAdmin } from "./fixtures/admin";
import { insertJob, sql } from "./fixtures/db";

/** A job's state, read as an operator would. */
async function stateOf(id: number): Promise<string> {
  const rows = await sql<{ state: string }>("SELECT state::text FROM jobs WHERE id = $1", [id]);
  return rows[0]?.state ?? "gone";
}

test.afterEach(async () => {
  // Whatever happened, no queue stays paused for the specs that follow.
  await sql("DELETE FROM job_queue_pauses");
});

test("pause a queue: a job inserted by SQL stays available; resume: it completes", async ({ page }) => {
  await signInAsAdmin(page, "/admin/queues");
  await expect(page).toHaveTitle("Queues · StandMeet");
  const row = page.locator('[data-testid="queue-row"][data-queue="default"]');
  await expect(row).toHaveAttribute("data-paused", "false");
  for (const queue of ["default", "mail", "index", "fetch", "webhooks"]) {
    await expect(page.locator(`[data-testid="queue-row"][data-queue="${queue}"]`)).toHaveCount(1);
  }

  await row.getByRole("button", { name: "Pause queue default" }).click();
  await expect(page.getByRole("status")).toContainText("Queue default paused");
  await expect(row).toHaveAttribute("data-paused", "true");
  await expect(row.getByTestId("queue-state")).toHaveText("paused");

  const waiting = await insertJob("system.noop");
  // A job in another queue, inserted after it, runs: the paused queue had its chance.
  const control = Number(
    (
      await sql<{ id: string }>(
        "INSERT INTO jobs (kind, queue) VALUES ('system.noop', 'mail') RETURNING id",
      )
    )[0].id,
  );
  await expect.poll(() => stateOf(control)).toBe("completed");
  expect(await stateOf(waiting)).toBe("available");
  // The page's figures say so too (it refreshes every two seconds).
  await expect(
    row.locator('[data-testid="queue-count"][data-state="available"]'),
  ).not.toHaveAttribute("data-count", "0");
  await expect(row.getByTestId("queue-oldest-available")).not.toHaveText("—");

  // With the keyboard: Enter on Resume; the focus stays on the row's button (now Pause)
  // across the re-render and the refreshes that follow.
  await row.getByRole("button", { name: "Resume queue default" }).focus();
  await page.keyboard.press("Enter");
  await expect(page.getByRole("status")).toContainText("Queue default resumed");
  await expect(row.getByRole("button", { name: "Pause queue default" })).toBeFocused();
  await expect.poll(() => stateOf(waiting)).toBe("completed");
  await expect(row).toHaveAttribute("data-paused", "false");
  await expect(row.getByTestId("queue-state")).toHaveText("running");
});
