import { expect, test } from "@playwright/test";
import { AccessRequestsPage, requestAccessAsVisitor } from "./fixtures/access_pages";
import { signInAsAdmin } from "./fixtures/admin";

// This spec runs against the second server, started with STANDMEET_MAIL=none.

test("without a mail supplier, Approve shows the error toast and changes nothing", async ({ page, browser }) => {
  const email = "no.mail.visitor@example.com";
  await requestAccessAsVisitor(browser, "No Mail Visitor", email);
  await signInAsAdmin(page, "/admin/access-requests");
  const requests = new AccessRequestsPage(page);
  await expect(requests.status(email)).toHaveText("pending");

  await requests.approve(email);
  await expect(page.getByRole("status")).toContainText("No mail supplier is configured");
  await page.reload();
  await expect(requests.status(email)).toHaveText("pending");
  await expect(requests.mailChip(email)).toHaveAttribute("data-state", "none");
  await expect(requests.row(email).getByRole("button", { name: "Approve" })).toBeVisible();
});
