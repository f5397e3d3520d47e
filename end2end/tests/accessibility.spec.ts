// Every page in both colour modes, checked with axe-core (WCAG 2 A and AA rules):
// no serious or critical violation (issue #38). The pages that show one thing get a
// thing to show (a job, an endpoint, a published corpus entry) made by SQL first.
import AxeBuilder from "@axe-core/playwright";
import { expect, test, type Page } from "@playwright/test";
import { signInAsAdmin } from "./fixtures/admin";
import { insertJob, sql } from "./fixtures/db";

const VISITOR_PAGES = ["/", "/search", "/search?q=notes", "/request-access", "/access", "/book", "/login"];
const ADMIN_PAGES = [
  "/admin",
  "/admin/tasks",
  "/admin/queues",
  "/admin/schedules",
  "/admin/access-requests",
  "/admin/bookings",
  "/admin/listings",
  "/admin/corpus",
  "/admin/events",
  "/admin/webhooks",
  "/admin/mail",
  "/admin/account",
];

/** The serious and critical violations on the page as it is now, one line each. */
async function violations(page: Page): Promise<string[]> {
  const results = await new AxeBuilder({ page }).withTags(["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]).analyze();
  return results.violations
    .filter((violation) => violation.impact === "serious" || violation.impact === "critical")
    .map(
      (violation) =>
        `${violation.id} (${violation.impact}): ${violation.help} — ${violation.nodes
          .slice(0, 3)
          .map((node) => node.target.join(" "))
          .join(", ")}`,
    );
}

for (const scheme of ["light", "dark"] as const) {
  test(`every page passes axe-core in ${scheme} mode`, async ({ page }) => {
    test.setTimeout(120_000);
    await page.emulateMedia({ colorScheme: scheme });
    const job = await insertJob("system.noop", { accessibility: true }, { scheduledInSeconds: 3600 });
    const endpoint = Number(
      (
        await sql<{ id: string }>(
          `INSERT INTO webhook_endpoints (url, event_types, secret)
           VALUES ('https://a11y.example/hook', '{*}', 'whsec_a11y') RETURNING id`,
        )
      )[0].id,
    );
    const entry = Number(
      (
        await sql<{ id: string }>(
          `INSERT INTO corpus_entries (title, body, status) VALUES ('Accessibility notes', 'Read by visitors.', 'promoted') RETURNING id`,
        )
      )[0].id,
    );
    try {
      const found: string[] = [];
      // Beside the pages of the menus: a published entry, the pages a mailed link opens
      // (here with a token that does not work), and the page for an unknown address.
      const visitorPages = [
        ...VISITOR_PAGES,
        `/entries/${entry}`,
        "/book/cancel?token=not-a-token",
        "/account/confirm-email?token=not-a-token",
        "/no-such-page",
      ];
      for (const path of visitorPages) {
        await page.goto(path);
        await expect(page.getByRole("heading", { level: 1 })).toBeVisible();
        found.push(...(await violations(page)).map((line) => `${path}: ${line}`));
      }
      await signInAsAdmin(page, "/admin");
      for (const path of [...ADMIN_PAGES, `/admin/tasks/${job}`, `/admin/webhooks/${endpoint}`, `/admin/corpus/${entry}`]) {
        await page.goto(path);
        await expect(page.getByRole("heading", { level: 1 })).toBeVisible();
        await expect(page.getByTestId("theme-toggle")).toBeEnabled();
        found.push(...(await violations(page)).map((line) => `${path}: ${line}`));
      }
      expect(found).toEqual([]);
    } finally {
      await sql("DELETE FROM corpus_entries WHERE id = $1", [entry]);
      await sql("DELETE FROM webhook_endpoints WHERE id = $1", [endpoint]);
      await sql("DELETE FROM jobs WHERE id = $1", [job]);
    }
  });
}
