import { expect, test } from "@playwright/test";
import { AccountPage, confirmationLinkIn, resetOwnerAddress } from "./fixtures/account_page";
import { signInAsAdmin } from "./fixtures/admin";
import { sql } from "./fixtures/db";
import { OWNER_INBOX } from "./fixtures/ports";
import { failNext, mailsTo, resetSmtp, waitForMails } from "./fixtures/smtp";

// These specs change the owner's address; every other spec expects OWNER_INBOX.
test.beforeEach(async () => {
  await resetSmtp();
  await resetOwnerAddress();
});
test.afterAll(async () => {
  await resetSmtp();
  await resetOwnerAddress();
});

test("a change is queued, its chip goes sending → sent, and opening the mailed link changes the address", async ({ page }) => {
  const next = "owner.next@standmeet.test";
  await signInAsAdmin(page, "/admin/account");
  const account = new AccountPage(page);
  await account.goto();
  await expect(account.currentEmail).toHaveText(OWNER_INBOX);

  await account.changeTo(next);
  await expect(page.getByRole("status")).toContainText("queued");
  await expect(account.pendingRow).toContainText(next);
  await expect(account.newEmail).toHaveValue("");
  await expect(account.pendingState).toHaveText("sending");
  await expect(account.pendingState).toHaveText("sent");
  // Nothing changes until the new address confirms.
  await expect(account.currentEmail).toHaveText(OWNER_INBOX);

  const [mail] = await waitForMails(next, 1);
  const link = confirmationLinkIn(mail);
  // Opening the link (as a mail scanner would) changes nothing; "Confirm" does.
  await page.goto(link);
  await expect(page.getByTestId("confirm-preview")).toContainText(next);
  await account.goto();
  await expect(account.currentEmail).toHaveText(OWNER_INBOX);
  await page.goto(link);
  await page.getByRole("button", { name: "Confirm" }).click();
  await expect(page.getByTestId("confirm-outcome")).toHaveText(`StandMeet now mails the owner at ${next}.`);

  await account.goto();
  await expect(account.currentEmail).toHaveText(next);
  await expect(account.pendingRow).toHaveCount(0);

  // The link works once.
  await page.goto(link);
  await expect(page.getByTestId("confirm-outcome")).toContainText("already used");
});

test("of two changes in quick succession only the second address gets a mail; the first job completes as stale", async ({ page }) => {
  const first = "typo.owner@standmeet.test";
  const second = "right.owner@standmeet.test";
  await signInAsAdmin(page, "/admin/account");
  const account = new AccountPage(page);
  await account.goto();

  await account.changeTo(first);
  await expect(account.pendingRow).toContainText(first);
  await account.changeTo(second);
  await expect(account.pendingRow).toContainText(second);
  await expect(account.pendingState).toHaveText("sent");
  await waitForMails(second, 1);

  const rows = await sql<{ state: string; output: { sent: boolean; reason: string } }>(
    `SELECT j.state::text AS state, j.output FROM owner_email_changes c JOIN jobs j ON j.id = c.pending_email_job_id
     WHERE c.new_email = $1`,
    [first],
  );
  expect(rows).toEqual([{ state: "completed", output: { sent: false, reason: "stale" } }]);
  expect(await mailsTo(first)).toHaveLength(0);
});

test("a cancelled change's link no longer works and changes nothing", async ({ page }) => {
  const next = "cancelled.owner@standmeet.test";
  await signInAsAdmin(page, "/admin/account");
  const account = new AccountPage(page);
  await account.goto();
  await account.changeTo(next);
  await expect(account.pendingState).toHaveText("sent");
  const [mail] = await waitForMails(next, 1);

  await account.pendingRow.getByRole("button", { name: "Cancel" }).click();
  await expect(page.getByRole("status")).toContainText("cancelled");
  await expect(account.pendingRow).toHaveCount(0);

  await page.goto(confirmationLinkIn(mail));
  await expect(page.getByTestId("confirm-outcome")).toContainText("cancelled");
  await account.goto();
  await expect(account.currentEmail).toHaveText(OWNER_INBOX);
});

test("the recovery row shows the supplier's error while the SMTP server fails, then when it was sent", async ({ page }) => {
  await signInAsAdmin(page, "/admin/account");
  const account = new AccountPage(page);
  await account.goto();
  const before = (await mailsTo(OWNER_INBOX)).length;

  await failNext(1, 550, "mailbox unavailable for the test");
  await account.recoveryRow.getByRole("button", { name: "Send recovery phrase" }).click();
  await expect(account.recoveryOutcome).toHaveAttribute("data-sent", "false");
  await expect(account.recoveryOutcome).toContainText("mailbox unavailable for the test");
  expect(await mailsTo(OWNER_INBOX)).toHaveLength(before);

  await account.recoveryRow.getByRole("button", { name: "Send recovery phrase" }).click();
  await expect(account.recoveryOutcome).toHaveAttribute("data-sent", "true");
  await expect(account.recoveryOutcome).toContainText(/^sent at /);
  await waitForMails(OWNER_INBOX, before + 1);
});
