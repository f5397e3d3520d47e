// What a newcomer sees first: StandMeet on a fresh, empty database (a server of its own,
// see playwright.config.ts). Every spec elsewhere runs on a database the others filled,
// and so missed that the Tasks panel with no row asked the server a malformed question
// every two seconds (answered 400) and never showed a new job until a reload.
//
// The tests run in order: the first leaves the database as empty as it found it, the
// second needs it so.
import { expect, test, type Page } from "@playwright/test";
import { signInAsAdmin } from "./fixtures/admin";
import { freshDatabaseUrl, insertJob, sql } from "./fixtures/db";
import { TasksPage } from "./fixtures/tasks_page";

test.describe.configure({ mode: "serial" });

/** Every answer of 400 or more to a request the page makes to its own server. */
function failedAnswers(page: Page, origin: string): string[] {
  const failed: string[] = [];
  page.on("response", (response) => {
    if (response.status() >= 400 && response.url().startsWith(origin)) {
      failed.push(`${response.status()} ${response.request().method()} ${response.url()} (on ${page.url()})`);
    }
  });
  return failed;
}

/** Every request the page makes to its own server's `/api/`. */
function apiRequests(page: Page, origin: string): string[] {
  const seen: string[] = [];
  page.on("request", (request) => {
    if (request.url().startsWith(`${origin}/api/`)) seen.push(request.url());
  });
  return seen;
}

test("every admin page, opened on a fresh database and left open for 10 s, gets no 4xx or 5xx", async ({
  page,
  context,
  baseURL,
}) => {
  test.setTimeout(90_000);
  const origin = new URL(baseURL!).origin;
  expect(await sql("SELECT id FROM jobs", [], freshDatabaseUrl()), "the database starts with no job").toEqual([]);
  await signInAsAdmin(page, "/admin");
  // Every page the admin navigation offers, so that a new page is covered too.
  const hrefs = await page
    .getByTestId("admin-sidebar")
    .getByRole("link")
    .evaluateAll((links) => links.map((link) => link.getAttribute("href") ?? ""));
  expect(hrefs.length, `the sidebar's pages: ${hrefs}`).toBeGreaterThanOrEqual(12);
  expect(hrefs).toContain("/admin/tasks");

  // All open at once, each in its own tab, then left alone together for 10 s.
  const failed: string[] = [];
  const opened = await Promise.all(
    hrefs.map(async (href) => {
      const tab = await context.newPage();
      const answers = failedAnswers(tab, origin);
      const requests = apiRequests(tab, origin);
      await tab.goto(href);
      await expect(tab.getByRole("heading", { level: 1 })).toBeVisible();
      return { href, tab, answers, requests };
    }),
  );
  // An observation window, not a wait for a condition: what the pages' own timers ask
  // while they stay open.
  await page.waitForTimeout(10_000);
  for (const { answers } of opened) failed.push(...answers);
  expect(failed, "requests of the admin pages answered 4xx/5xx").toEqual([]);
  // The panel did poll meanwhile (the window saw the requests it is about).
  const tasks = opened.find(({ href }) => href === "/admin/tasks")!;
  expect(tasks.requests.filter((url) => url.includes("/api/tasks/list")).length).toBeGreaterThanOrEqual(3);
  for (const { tab } of opened) await tab.close();
  expect(await sql("SELECT id FROM jobs", [], freshDatabaseUrl()), "looking changed nothing").toEqual([]);
});

test("an empty Tasks panel shows a job queued by SQL, and its chip reaches completed, without a reload", async ({
  page,
  baseURL,
}) => {
  const origin = new URL(baseURL!).origin;
  const failed = failedAnswers(page, origin);
  let loads = 0;
  page.on("load", () => loads++);
  await signInAsAdmin(page, "/admin/tasks");
  const tasks = new TasksPage(page);
  await expect(page.getByTestId("no-tasks")).toHaveText("No jobs match these filters.");
  await expect(tasks.rows).toHaveCount(0);
  // The panel is live (hydrated, polling for new rows) before the job exists.
  await page.waitForRequest((request) => request.url().startsWith(`${origin}/api/tasks/list`));
  const loadsBefore = loads;

  const id = await insertJob("system.noop", { from: "fresh database spec" }, { database: freshDatabaseUrl() });
  await expect(tasks.row(id)).toBeVisible();
  await expect(tasks.chip(id)).toHaveText("completed");
  await expect(page.getByTestId("no-tasks")).toHaveCount(0);
  expect(loads, "the page was not reloaded").toBe(loadsBefore);
  expect(failed, "the panel's requests answered 4xx/5xx").toEqual([]);
});
