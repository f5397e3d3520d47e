// Bookings (docs/bookings.md): a visitor with an access code books a slot and is
// told "Booked" at once; the owner's notification chip follows its mail job; the
// invitation is in the mail log; the mail's cancel link (a page with a button) frees
// the slot again. Also the race for one slot, and the admin's availability and Cancel.

import { expect, test } from "@playwright/test";
import { redeemCode, visitorContext } from "./fixtures/access_pages";
import { signInAsAdmin } from "./fixtures/admin";
import { sql } from "./fixtures/db";
import { callTool } from "./fixtures/mcp";
import { OWNER_INBOX } from "./fixtures/ports";
import { resetSmtp, waitForMails } from "./fixtures/smtp";

test.beforeEach(async () => {
  await resetSmtp();
  // Every day, all day, and from a clean slate, so the specs find free slots whenever
  // they run.
  await sql("DELETE FROM bookings");
  // The owner got mail from the specs before (access requests, recovery phrases): let
  // this spec's notifications not wait for the hourly per-recipient throttle.
  await sql(
    `DELETE FROM mail_log WHERE lower(recipient) IN (
       SELECT lower(email) FROM owner_profile UNION SELECT lower($1::text))`,
    [OWNER_INBOX],
  );
  const windows = [1, 2, 3, 4, 5, 6, 7].map((weekday) => ({ weekday, start: "00:00", end: "24:00" }));
  const set = await callTool("bookings.availability", { windows, slot_minutes: 30, buffer_minutes: 0, days_ahead: 3 });
  expect(set.isError).toBe(false);
});

test.afterEach(async () => {
  await callTool("queues.resume", { queue: "mail" });
  const weekdays = [1, 2, 3, 4, 5].map((weekday) => ({ weekday, start: "09:00", end: "17:00" }));
  await callTool("bookings.availability", { windows: weekdays, days_ahead: 14 });
});

/** A mail's text with quoted-printable soft breaks and escapes undone. */
function decoded(data: string): string {
  return data
    .replace(/=\r?\n/g, "")
    .replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}

test("a visitor with a code books a slot; the owner's chip goes sending → sent; the cancel link frees it", async ({
  page,
  browser,
}) => {
  const email = "booking.visitor@example.com";
  const visitor = await visitorContext(browser);
  const visitorPage = await visitor.newPage();

  // Without a code, /book says how to get one and lists nothing.
  await visitorPage.goto("/book");
  await expect(visitorPage.getByTestId("booking-refused")).toContainText("needs an access code");
  await expect(visitorPage.getByTestId("slot")).toHaveCount(0);
  await expect(visitorPage.getByRole("link", { name: "Book a meeting" })).toBeVisible();

  await redeemCode(visitorPage, email, "B7KQ-4MZP-9HXA");
  await visitorPage.goto("/book");
  // The times are grouped in the browser's own time zone once the page is live.
  await expect(visitorPage.getByTestId("booking-zone")).toContainText("your time zone");
  const slot = visitorPage.getByTestId("slot").nth(3);
  const start = await slot.getAttribute("data-start");
  expect(start).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:00Z$/);
  await slot.click();
  await expect(slot).toHaveAttribute("aria-pressed", "true");
  await visitorPage.getByLabel("Name").fill("Booking Visitor");
  await expect(visitorPage.getByLabel("Email")).toHaveValue(email);
  await visitorPage.getByLabel("Topic").fill("The analytical engine");

  // The mail queue is paused, so the owner's chip is seen on its way.
  expect((await callTool("queues.pause", { queue: "mail" })).isError).toBe(false);
  await visitorPage.getByRole("button", { name: "Book", exact: true }).click();
  await expect(visitorPage.getByTestId("booked")).toContainText("Booked");

  await signInAsAdmin(page, "/admin/bookings");
  const row = page.getByTestId("booking-row").filter({ hasText: email });
  await expect(row.getByTestId("booking-state")).toHaveText("confirmed");
  await expect(row.getByTestId("booking-mail-state")).toHaveText("sending");
  expect((await callTool("queues.resume", { queue: "mail" })).isError).toBe(false);
  await expect(row.getByTestId("booking-mail-state")).toHaveText("sent");

  // The visitor's invitation, as the mail log shows it.
  const mails = await waitForMails(email, 1);
  await page.goto("/admin/mail");
  const logged = page
    .getByTestId("mail-entry")
    .filter({ has: page.getByTestId("mail-recipient").getByText(email, { exact: true }) })
    .first();
  await expect(logged.getByTestId("mail-attachment")).toContainText("METHOD:REQUEST");
  await expect(logged.getByTestId("mail-attachment")).toContainText(`DTSTART:${start!.replace(/[-:]/g, "")}`);

  // The cancel link opens a page; only its button cancels.
  const link = decoded(mails[0].data).match(/http:\/\/127\.0\.0\.1:\d+\/book\/cancel\?token=[A-Za-z0-9_-]+/);
  expect(link).not.toBeNull();
  await visitorPage.goto(link![0]);
  await expect(visitorPage.getByTestId("cancel-booking-when")).toBeVisible();
  expect((await sql<{ state: string }>("SELECT state::text AS state FROM bookings WHERE email = $1", [email]))[0].state).toBe("confirmed");
  await visitorPage.getByRole("button", { name: "Cancel booking" }).click();
  await expect(visitorPage.getByTestId("booking-cancelled")).toContainText("Booking cancelled");
  await visitorPage.goto(link![0]);
  await expect(visitorPage.getByTestId("cancel-refused")).toContainText("cancelled already");

  // The slot is free again, and the admin's row says cancelled.
  await visitorPage.goto("/book");
  await expect(visitorPage.locator(`[data-testid="slot"][data-start="${start}"]`)).toHaveCount(1);
  await page.goto("/admin/bookings");
  await expect(row.getByTestId("booking-state")).toHaveText("cancelled");
  await visitor.close();
});

test("of two visitors after one slot, the second is told it was just taken and sees it gone", async ({ page }) => {
  await redeemCode(page, "second.visitor@example.com", "R4CE-8WXN-2LPA");
  await page.goto("/book");
  await expect(page.getByTestId("booking-zone")).toContainText("your time zone");
  const slot = page.getByTestId("slot").first();
  const start = (await slot.getAttribute("data-start"))!;
  await slot.click();
  await page.getByLabel("Name").fill("Second Visitor");
  // Someone else books that time first (the owner's agent, here).
  const first = await callTool("bookings.create", { start, name: "First", email: "first@example.com", topic: "" });
  expect(first.isError).toBe(false);
  await page.getByRole("button", { name: "Book", exact: true }).click();
  await expect(page.getByRole("alert")).toContainText("That time was just taken");
  await expect(page.locator(`[data-testid="slot"][data-start="${start}"]`)).toHaveCount(0);
  const rows = await sql<{ count: string }>("SELECT count(*) FROM bookings WHERE starts_at = $1", [start]);
  expect(Number(rows[0].count)).toBe(1);
});

test("the admin sets the availability (bad windows are refused in words) and cancels a booking", async ({ page }) => {
  const made = await callTool("bookings.slots", {});
  const start = made.content.slots[0].start;
  const booked = await callTool("bookings.create", { start, name: "Agent Booked", email: "agent.booked@example.com", topic: "Plans" });
  expect(booked.isError).toBe(false);

  await signInAsAdmin(page, "/admin/bookings");
  const form = page.getByRole("form", { name: "Availability" });
  await form.getByLabel("Monday").fill("17:00–09:00");
  await form.getByRole("button", { name: "Save availability" }).click();
  await expect(form.getByRole("alert")).toContainText("Monday 17:00–09:00: the end must come after the start.");
  await form.getByLabel("Monday").fill("09:00–12:00, 13:00–17:00");
  await form.getByRole("button", { name: "Save availability" }).click();
  await expect(page.getByRole("status").filter({ hasText: "Availability saved." })).toBeVisible();
  const saved = await callTool("bookings.availability", {});
  expect(saved.content.windows.filter((window: { weekday: number }) => window.weekday === 1)).toEqual([
    { weekday: 1, start: "09:00", end: "12:00" },
    { weekday: 1, start: "13:00", end: "17:00" },
  ]);

  const row = page.getByTestId("booking-row").filter({ hasText: "agent.booked@example.com" });
  await row.getByRole("button", { name: "Cancel" }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Cancel booking" }).click();
  await expect(page.getByRole("status").filter({ hasText: "Booking cancelled" })).toBeVisible();
  await expect(row.getByTestId("booking-state")).toHaveText("cancelled");
  await expect(row.getByRole("button", { name: "Cancel" })).toHaveCount(0);
  const listed = await callTool("bookings.list", {});
  expect(listed.content.bookings.find((b: { id: number }) => b.id === booked.content.id).state).toBe("cancelled");
});
