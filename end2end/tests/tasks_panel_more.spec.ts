import { expect, test } from "@playwright/test";
import { AccessRequestsPage } from "./fixtures/access_pages";
import { signInAsAdmin } from "./fixtures/admin";
import { boardUrl, resetBoards, slowBoard } from "./fixtures/boards";
import { sql } from "./fixtures/db";
import { insertSource, resetListings } from "./fixtures/listings_page";
import { callTool } from "./fixtures/mcp";
import { failNext, resetSmtp, waitForMails } from "./fixtures/smtp";
import { TasksPage } from "./fixtures/tasks_page";

test.beforeEach(async () => {
  await resetSmtp();
  await resetBoards();
});

async function pendingRequest(name: string, email: string): Promise<number> {
  const rows = await sql<{ id: string }>(
    "INSERT INTO access_requests (name, email, message) VALUES ($1, $2, 'from tasks-panel-more') RETURNING id",
    [name, email],
  );
  return Number(rows[0].id);
}

async function mailJobOf(email: string): Promise<number> {
  const rows = await sql<{ mail_job_id: string }>("SELECT mail_job_id FROM access_requests WHERE email = $1", [email]);
  return Number(rows[0].mail_job_id);
}

test("after approval the row goes sending → sent, and the Tasks panel shows its job completed", async ({ page }) => {
  const email = "ida.more@example.com";
  await pendingRequest("Ida More", email);
  await signInAsAdmin(page, "/admin/access-requests");
  const requests = new AccessRequestsPage(page);
  await requests.approve(email);
  await expect(page.getByRole("status")).toContainText("queued");
  await expect(requests.mailChip(email)).toHaveText("sending");
  await expect(requests.mailChip(email)).toHaveText("sent");
  await waitForMails(email, 1);

  const tasks = new TasksPage(page);
  await tasks.goto("?kind=access_request.approval_mail");
  await expect(tasks.chip(await mailJobOf(email))).toHaveText("completed");
});

test("with the SMTP server failing first the row shows failed, then sent after the retry", async ({ page }) => {
  const email = "joan.more@example.com";
  await pendingRequest("Joan More", email);
  await failNext(1, 451, "greylisted, try again later");
  await signInAsAdmin(page, "/admin/access-requests");
  const requests = new AccessRequestsPage(page);
  await requests.approve(email);
  await expect(requests.mailChip(email)).toHaveText("failed");
  await expect(requests.mailChip(email)).toHaveAttribute("title", /greylisted/);
  await expect(requests.mailChip(email)).toHaveText("sent", { timeout: 20_000 });

  const tasks = new TasksPage(page);
  const job = await mailJobOf(email);
  await tasks.goto();
  await expect(tasks.chip(job)).toHaveText("completed");
  await expect(tasks.row(job)).toContainText("2 / ");
});

test("jobs.fetch_new past its wait limit gives a receipt; jobs.fetch_result redeems it in the shape of a fetch that finished in time", async () => {
  await resetListings();
  await insertSource("Acme", "greenhouse", boardUrl("/greenhouse/acme"));
  await insertSource("Globex", "lever", boardUrl("/lever/globex"));
  // The server waits 3 s (playwright.config.ts); this board answers after 5 s.
  await slowBoard("/lever/globex", 5_000);

  const receipt = await callTool("jobs.fetch_new");
  expect(receipt.isError).toBe(false);
  expect(receipt.content.pending).toBe(true);
  expect(Object.keys(receipt.content).sort()).toEqual(["job_ids", "pending"]);
  expect(receipt.content.job_ids).toHaveLength(2);

  const early = await callTool("jobs.fetch_result", { job_ids: receipt.content.job_ids });
  expect(early.content).toEqual(receipt.content);

  let redeemed: any;
  await expect
    .poll(async () => {
      redeemed = (await callTool("jobs.fetch_result", { job_ids: receipt.content.job_ids })).content;
      return redeemed.pending;
    }, { timeout: 20_000 })
    .toBe(false);
  expect(redeemed.job_ids).toEqual(receipt.content.job_ids);
  expect(redeemed.errors).toEqual([]);
  expect(redeemed.listings).toHaveLength(5);
  expect(redeemed.listings.every((listing: { new: boolean }) => listing.new)).toBe(true);

  // A fetch that finishes within the wait answers at once, in the same shape.
  await resetBoards();
  const inTime = await callTool("jobs.fetch_new");
  expect(inTime.content.pending).toBe(false);
  expect(Object.keys(inTime.content).sort()).toEqual(Object.keys(redeemed).sort());
  expect(Object.keys(inTime.content.listings[0]).sort()).toEqual(Object.keys(redeemed.listings[0]).sort());
  const titles = (answer: any) => answer.listings.map((listing: { title: string }) => listing.title).sort();
  expect(titles(inTime.content)).toEqual(titles(redeemed));
  expect(inTime.content.listings.every((listing: { new: boolean }) => !listing.new)).toBe(true);

  // tasks.get stays state only.
  const task = await callTool("tasks.get", { job_id: receipt.content.job_ids[0] });
  expect(task.content.state).toBe("completed");
  expect(task.content).not.toHaveProperty("listings");

  const foreign = await callTool("jobs.fetch_result", { job_ids: [987654321] });
  expect(foreign.isError).toBe(true);
  expect(foreign.content.error).toContain("There is no job 987654321");
});
