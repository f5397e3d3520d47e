import { expect, test } from "@playwright/test";
import { AccessRequestsPage } from "./fixtures/access_pages";
import { signInAsAdmin } from "./fixtures/admin";
import { sql } from "./fixtures/db";
import { resetSmtp, waitForMails } from "./fixtures/smtp";

// The suite's server exports traces to a collector that is not there
// (OTEL_EXPORTER_OTLP_ENDPOINT in playwright.config.ts): every other spec passing is
// the proof that a dead collector changes nothing a user sees. This one looks at what
// traces add to the console.

test.beforeEach(async () => {
  await resetSmtp();
});

test("a job's page shows the trace it was queued in, as a link to the trace viewer", async ({ page }) => {
  const email = "tracy.visitor@example.com";
  const rows = await sql<{ id: string }>(
    "INSERT INTO access_requests (name, email, message) VALUES ('Tracy Visitor', $1, 'from the test') RETURNING id",
    [email],
  );
  const request = Number(rows[0].id);
  await signInAsAdmin(page, "/admin/access-requests");
  const requests = new AccessRequestsPage(page);
  await requests.approve(email);
  await expect(requests.mailChip(email)).toHaveText("sent");
  await waitForMails(email, 1);

  const jobs = await sql<{ id: string; trace_context: string | null }>(
    `SELECT j.id, j.trace_context FROM access_requests r JOIN jobs j ON j.id = r.mail_job_id WHERE r.id = $1`,
    [request],
  );
  expect(jobs).toHaveLength(1);
  const traceId = jobs[0].trace_context?.split("-")[1];
  expect(traceId).toMatch(/^[0-9a-f]{32}$/);

  await page.goto(`/admin/tasks/${jobs[0].id}`);
  const shown = page.getByTestId("job-trace-id");
  await expect(shown).toHaveText(traceId!);
  await expect(shown.getByRole("link")).toHaveAttribute("href", `https://traces.example/trace/${traceId}`);
});
