import { expect, test } from "@playwright/test";
import { AccessRequestsPage, RequestAccessPage, requestAccessAsVisitor, visitorContext } from "./fixtures/access_pages";
import { signInAsAdmin } from "./fixtures/admin";
import { sql } from "./fixtures/db";
import { OWNER_INBOX } from "./fixtures/ports";
import { codeIn, failNext, mailsTo, resetSmtp, waitForMails } from "./fixtures/smtp";
import { TasksPage } from "./fixtures/tasks_page";

test.beforeEach(async () => {
  await resetSmtp();
});

/** A pending request written straight into the database (no owner mail). */
async function pendingRequest(name: string, email: string): Promise<number> {
  const rows = await sql<{ id: string }>(
    "INSERT INTO access_requests (name, email, message) VALUES ($1, $2, 'from the test') RETURNING id",
    [name, email],
  );
  return Number(rows[0].id);
}

test("a visitor's request makes exactly one owner mail once its job is done", async ({ browser }) => {
  const before = (await mailsTo(OWNER_INBOX)).length;
  await requestAccessAsVisitor(browser, "Ada Visitor", "ada.visitor@example.com");
  const mails = await waitForMails(OWNER_INBOX, before + 1);
  expect(mails[mails.length - 1].data).toContain("Ada Visitor <ada.visitor@example.com> asks for access");
  await expect
    .poll(async () => (await sql<{ state: string }>(
      `SELECT j.state::text AS state FROM access_requests r JOIN jobs j ON j.id = r.notify_job_id
       WHERE r.email = 'ada.visitor@example.com'`,
    ))[0]?.state)
    .toBe("completed");
  expect((await mailsTo(OWNER_INBOX)).length).toBe(before + 1);
});

test("approve: the toast says queued, the chip goes sending → sent, the request is replied, and the code opens access", async ({
  page,
  browser,
}) => {
  const email = "grace.visitor@example.com";
  await pendingRequest("Grace Visitor", email);
  await signInAsAdmin(page, "/admin/access-requests");
  const requests = new AccessRequestsPage(page);
  await expect(requests.status(email)).toHaveText("pending");
  await expect(requests.mailChip(email)).toHaveAttribute("data-state", "none");

  await requests.approve(email);
  await expect(page.getByRole("status")).toContainText("queued");
  await expect(requests.mailChip(email)).toHaveText("sending");
  await expect(requests.mailChip(email)).toHaveText("sent");
  await expect(requests.status(email)).toHaveText("replied");

  const mails = await waitForMails(email, 1);
  const code = codeIn(mails[0]);

  // The visitor redeems the code.
  const visitor = await visitorContext(browser);
  const visitorPage = await visitor.newPage();
  await visitorPage.goto("/access");
  await visitorPage.getByLabel("Email").fill(email);
  await visitorPage.getByLabel("Access code").fill("WRNG-CODE-0000");
  await expect(visitorPage.getByRole("button", { name: "Enter" })).toBeEnabled();
  await visitorPage.getByRole("button", { name: "Enter" }).click();
  await expect(visitorPage.getByRole("alert")).toContainText("does not match");
  await visitorPage.getByLabel("Access code").fill(code);
  await visitorPage.getByRole("button", { name: "Enter" }).click();
  await expect(visitorPage.getByTestId("access-granted")).toContainText("Access granted");
  await visitor.close();

  // Approving again is refused, and no second mail goes out.
  await page.reload();
  await expect(requests.row(email).getByRole("button", { name: "Approve" })).toHaveCount(0);
  expect((await mailsTo(email)).length).toBe(1);
});

test("a first attempt refused with 451 shows failed, then sent after the retry, and the Tasks panel shows the error", async ({
  page,
}) => {
  const email = "alan.visitor@example.com";
  await pendingRequest("Alan Visitor", email);
  await signInAsAdmin(page, "/admin/access-requests");
  const requests = new AccessRequestsPage(page);
  await failNext(1, 451, "mailbox busy, try again later");

  await requests.approve(email);
  await expect(page.getByRole("status")).toContainText("queued");
  await expect(requests.mailChip(email)).toHaveText("failed");
  await expect(requests.status(email)).toHaveText("approved");
  await expect(requests.mailChip(email)).toHaveText("sent", { timeout: 20_000 });
  await expect(requests.status(email)).toHaveText("replied");
  expect((await mailsTo(email)).length).toBe(1);

  const rows = await sql<{ mail_job_id: string }>("SELECT mail_job_id FROM access_requests WHERE email = $1", [email]);
  const tasks = new TasksPage(page);
  await tasks.gotoJob(Number(rows[0].mail_job_id));
  await expect(tasks.jobChip).toHaveText("completed");
  await expect(page.getByTestId("job-attempt-error")).toContainText("451");
  await expect(page.getByTestId("job-attempt-error")).toContainText("mailbox busy");
});

test("the throttle snoozes the sixth mail to one recipient", async ({ page }) => {
  const email = "busy.visitor@example.com";
  for (let n = 1; n <= 6; n++) {
    await pendingRequest(`Busy Visitor ${n}`, email);
  }
  await signInAsAdmin(page, "/admin/access-requests");
  for (let n = 1; n <= 6; n++) {
    const row = page.getByTestId("access-request-row").filter({ hasText: `Busy Visitor ${n}` });
    await expect(row.getByRole("button", { name: "Approve" })).toBeEnabled();
    await row.getByRole("button", { name: "Approve" }).click();
    await expect(row.getByTestId("request-status")).not.toHaveText("pending");
  }
  await waitForMails(email, 5);
  await expect
    .poll(async () =>
      (await sql<{ state: string }>(
        `SELECT j.state::text AS state FROM access_requests r JOIN jobs j ON j.id = r.mail_job_id
         WHERE r.email = $1 ORDER BY r.id`,
        [email],
      )).map((row) => row.state).sort().join(","),
    )
    .toBe("completed,completed,completed,completed,completed,scheduled");
  expect((await mailsTo(email)).length).toBe(5);
  // The snoozed one still says sending: it is not failed, only waiting its turn.
  await page.reload();
  await expect(page.getByTestId("request-mail-state").filter({ hasText: "sending" })).toHaveCount(1);
});

test("the request form says what to fix, field by field, and sends nothing", async ({ page }) => {
  const before = (await mailsTo(OWNER_INBOX)).length;
  const form = new RequestAccessPage(page);
  await form.goto();
  await form.submit("", "not-an-address", "");
  await expect(page.getByText("Please check the fields marked below.")).toBeVisible();
  await expect(page.getByText("Please give your name.")).toBeVisible();
  await expect(page.getByText(/one @ between a name and a domain/)).toBeVisible();
  await expect(page.getByTestId("request-received")).toHaveCount(0);
  expect((await mailsTo(OWNER_INBOX)).length).toBe(before);
});

test("a request sent from another browser appears on the open list within 2 s, without a reload", async ({ page, browser }) => {
  await signInAsAdmin(page, "/admin/access-requests");
  const requests = new AccessRequestsPage(page);
  await expect(page.locator("html")).toHaveAttribute("data-shortcuts", "on");
  // The page is the one that was loaded: a reload would lose this mark.
  await page.evaluate(() => document.body.setAttribute("data-not-reloaded", "yes"));
  const email = `live.${Date.now()}@example.com`;
  await expect(requests.row(email)).toHaveCount(0);

  await requestAccessAsVisitor(browser, "Live Visitor", email);
  await expect(requests.row(email)).toBeVisible({ timeout: 2_000 });
  await expect(requests.status(email)).toHaveText("pending");
  await expect(page.locator("body")).toHaveAttribute("data-not-reloaded", "yes");
  // On top, as the newest.
  await expect(page.getByTestId("access-request-row").first()).toContainText(email);
});
